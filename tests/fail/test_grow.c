/*
 * test_grow.c - rcoll_comm_grow: ranks that are not in a communicator join its members
 * through a grow id one member made.  Real processes (mp.c): the members make their
 * communicator from the parent's unique id; the new ranks are more forked processes that get
 * the grow id through shared memory, as an application would through a file or a store.
 *  - 3 members grow to 5 (rank 1 makes the id): members keep their ranks, the new ranks take
 *    3 and 4; all-reduce, a 1 MiB broadcast from a new rank and an all-gather are right on
 *    the new communicator, and the old one still works;
 *  - a training job's case: 4 ranks, rank 2 killed, the survivors shrink to 3, and a
 *    restarted process joins as rank 3 of 4 and gets the parameters from rank 0;
 *  - refusals, each on every member alike and quickly, the old communicator usable after:
 *    no member made an id; two did (the new rank holding one of them fails at once, saying
 *    the members refused); the members pass different sizes; a new rank that never comes
 *    (the members fail after RCOLL_TIMEOUT naming it); a communicator destroyed with an
 *    unused id (its new rank fails at once); bad arguments.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mp.h"
#include "rcoll.h"

#define TIMEOUT_S 3.0
#define PROMPT_S 2.0 /* a refusal travels in milliseconds; the timeout is 3 s */

typedef struct {
    volatile int ready; /* the id below is written */
    rcoll_unique_id_t id;
    volatile int member_done; /* test-specific signal from the members */
} shared_t;

typedef struct {
    int mode;
    int members; /* ranks of the first communicator; the others are new */
    shared_t *sh;
} grow_arg_t;

enum { MODE_BASIC, MODE_ELASTIC, MODE_NO_ID, MODE_TWO_IDS, MODE_SIZES, MODE_NEVER,
       MODE_DESTROYED, MODE_ARGS };

static void publish(shared_t *sh, const rcoll_unique_id_t *id)
{
    sh->id = *id;
    __sync_synchronize();
    sh->ready = 1;
}

static int await_id(shared_t *sh, rcoll_unique_id_t *id)
{
    double until = check_now_s() + 10;
    while (!sh->ready && check_now_s() < until) check_sleep_ms(5);
    __sync_synchronize();
    if (!sh->ready) return 0;
    *id = sh->id;
    return 1;
}

static int sum_ok(rcoll_comm_t c, int n)
{
    int v = 1;
    return rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, c) == RCOLL_OK && v == n;
}

/* The collectives on a grown communicator of n ranks, against values computed here. */
static int check_grown(rcoll_comm_t c, int rank, int n)
{
    int bad = 0, r = -1, size = -1;
    if (rcoll_comm_rank(c, &r) != RCOLL_OK || rcoll_comm_size(c, &size) != RCOLL_OK ||
        r != rank || size != n) {
        fprintf(stderr, "rank %d: grown communicator says rank %d of %d (want %d of %d)\n",
                rank, r, size, rank, n);
        bad |= 1;
    }
    int v = rank + 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, c) != RCOLL_OK ||
        v != n * (n + 1) / 2)
        bad |= 2;
    size_t cnt = (1u << 20) / sizeof(float);
    float *b = malloc(cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i++) b[i] = rank == n - 1 ? (float)(i % 977) : -1.0f;
    if (rcoll_bcast(b, cnt, RCOLL_FLOAT32, n - 1, c) != RCOLL_OK) bad |= 4;
    for (size_t i = 0; i < cnt && !(bad & 4); i++)
        if (b[i] != (float)(i % 977)) bad |= 4;
    free(b);
    int mine = 100 + rank, all[64];
    if (rcoll_allgather(&mine, all, 1, RCOLL_INT32, c) != RCOLL_OK) bad |= 8;
    for (int p = 0; p < n && !(bad & 8); p++)
        if (all[p] != 100 + p) bad |= 8;
    if (bad) fprintf(stderr, "rank %d: grown communicator wrong (bits %d): %s\n", rank, bad,
                     rcoll_comm_last_error(c));
    return bad;
}

/* A new rank: waits for the id, joins as rank of n. */
static int newcomer(shared_t *sh, int rank, int n, rcoll_comm_t *out)
{
    rcoll_unique_id_t id;
    *out = NULL;
    if (!await_id(sh, &id)) {
        fprintf(stderr, "new rank %d: no grow id came\n", rank);
        return -1;
    }
    return (int)rcoll_comm_grow(NULL, n, &id, rank, out);
}

static int basic(grow_arg_t *a, const rcoll_unique_id_t *pid, int rank, int n)
{
    int m = a->members, bad = 0;
    rcoll_comm_t c = NULL, g = NULL;
    if (rank >= m) {
        if (newcomer(a->sh, rank, n, &g) != RCOLL_OK) {
            fprintf(stderr, "new rank %d: grow: %s\n", rank, rcoll_last_init_error());
            return 64;
        }
        bad |= check_grown(g, rank, n);
        rcoll_comm_destroy(g);
        return bad;
    }
    if (rcoll_comm_init_rank(m, pid, rank, &c) != RCOLL_OK) return 100;
    if (rank == 1) {
        rcoll_unique_id_t id, again;
        if (rcoll_comm_grow_id(c, &id) != RCOLL_OK || rcoll_comm_grow_id(c, &again) != RCOLL_OK ||
            memcmp(&id, &again, sizeof(id)) != 0)
            bad |= 16; /* made once, the same id when asked again */
        publish(a->sh, &id);
    }
    rcoll_status_t st = rcoll_comm_grow(c, n, NULL, rank == 2 ? 2 : RCOLL_UNDEFINED, &g);
    if (st != RCOLL_OK) {
        fprintf(stderr, "member %d: grow: %s: %s\n", rank, rcoll_status_string(st),
                rcoll_comm_last_error(c));
        return 32;
    }
    bad |= check_grown(g, rank, n);
    if (!sum_ok(c, m)) bad |= 128; /* the old one is untouched */
    if (rank % 2) { /* either order */
        rcoll_comm_destroy(g);
        rcoll_comm_destroy(c);
    } else {
        rcoll_comm_destroy(c);
        rcoll_comm_destroy(g);
    }
    return bad;
}

/* 4 members, rank 2 killed; the restarted process is mp's rank 4 and becomes rank 3 of 4. */
static int elastic(grow_arg_t *a, const rcoll_unique_id_t *pid, int rank, int n)
{
    (void)n;
    int m = a->members, bad = 0;
    float params[1000];
    rcoll_comm_t c = NULL, s = NULL, g = NULL;
    if (rank >= m) {
        if (newcomer(a->sh, m - 1, m, &g) != RCOLL_OK) {
            fprintf(stderr, "restarted rank: grow: %s\n", rcoll_last_init_error());
            return 64;
        }
        for (int i = 0; i < 1000; i++) params[i] = 0;
        if (rcoll_bcast(params, 1000, RCOLL_FLOAT32, 0, g) != RCOLL_OK) bad |= 1;
        for (int i = 0; i < 1000 && !bad; i++)
            if (params[i] != 0.5f * i + 3.0f) bad |= 2; /* the survivors' values */
        if (!sum_ok(g, m)) bad |= 4;
        rcoll_comm_destroy(g);
        return bad;
    }
    if (rcoll_comm_init_rank(m, pid, rank, &c) != RCOLL_OK) return 100;
    for (int i = 0; i < 1000; i++) params[i] = (float)i;
    if (rcoll_allreduce(RCOLL_IN_PLACE, params, 1000, RCOLL_FLOAT32, RCOLL_SUM, c) != RCOLL_OK)
        return 100;
    if (rank == 2) raise(SIGKILL);
    int v = 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, c) == RCOLL_OK) bad |= 8;
    if (rcoll_comm_shrink(c, RCOLL_SHRINK_DEFAULT, &s) != RCOLL_OK) {
        fprintf(stderr, "rank %d: shrink: %s\n", rank, rcoll_comm_last_error(c));
        return 16;
    }
    rcoll_comm_destroy(c);
    int sr = -1;
    rcoll_comm_rank(s, &sr);
    for (int i = 0; i < 1000; i++) params[i] = 0.5f * i + 3.0f; /* "trained" on 3 ranks */
    if (sr == 0) {
        rcoll_unique_id_t id;
        if (rcoll_comm_grow_id(s, &id) != RCOLL_OK) return 32;
        publish(a->sh, &id);
    }
    if (rcoll_comm_grow(s, m, NULL, RCOLL_UNDEFINED, &g) != RCOLL_OK) {
        fprintf(stderr, "rank %d: grow after shrink: %s\n", rank, rcoll_comm_last_error(s));
        rcoll_comm_destroy(s);
        return 32;
    }
    rcoll_comm_destroy(s);
    if (rcoll_bcast(params, 1000, RCOLL_FLOAT32, 0, g) != RCOLL_OK) bad |= 1;
    if (!sum_ok(g, m)) bad |= 4;
    rcoll_comm_destroy(g);
    return bad;
}

/* The refusals: members are ranks < a->members, at most one new rank after them. */
/* The id's root lives in a member's process: it stays until the new rank has its answer. */
static void await_newcomer(grow_arg_t *a, int nprocs)
{
    double until = check_now_s() + 10;
    while (nprocs > a->members && !a->sh->member_done && check_now_s() < until) check_sleep_ms(5);
}

static int refusal(grow_arg_t *a, const rcoll_unique_id_t *pid, int rank, int n)
{
    int m = a->members, bad = 0;
    rcoll_comm_t c = NULL, g = NULL;
    if (rank >= m) { /* the new rank: fails, promptly after the members refused */
        rcoll_unique_id_t id;
        if (!await_id(a->sh, &id)) return 64;
        double t0 = check_now_s();
        rcoll_status_t st = rcoll_comm_grow(NULL, m + 1, &id, m, &g);
        double t = check_now_s() - t0;
        const char *e = rcoll_last_init_error();
        fprintf(stderr, "new rank: %s after %.2f s: %s\n", rcoll_status_string(st), t, e);
        const char *want = a->mode == MODE_DESTROYED ? "destroyed before it grew"
                                                     : "refused by the members";
        if (st == RCOLL_OK || !strstr(e, want) || t > PROMPT_S + 1.0) bad |= 1;
        if (g) rcoll_comm_destroy(g);
        __sync_synchronize();
        a->sh->member_done = 1; /* the members' processes (the id's root) may go now */
        return bad;
    }
    if (rcoll_comm_init_rank(m, pid, rank, &c) != RCOLL_OK) return 100;
    rcoll_unique_id_t id;
    int want_n = m + 1;
    rcoll_status_t want = RCOLL_ERR_INVALID_USAGE;
    const char *text = NULL;
    switch (a->mode) {
    case MODE_NO_ID:
        text = "no member made a grow id";
        break;
    case MODE_TWO_IDS:
        if (rank == 0 || rank == 2) {
            if (rcoll_comm_grow_id(c, &id) != RCOLL_OK) bad |= 2;
            if (rank == 0) publish(a->sh, &id);
        }
        text = "ranks 0 and 2 both made a grow id";
        break;
    case MODE_SIZES:
        if (rank == 0) {
            if (rcoll_comm_grow_id(c, &id) != RCOLL_OK) bad |= 2;
            publish(a->sh, &id);
        }
        if (rank == 1) want_n = m + 2;
        want = RCOLL_ERR_INVALID_ARG;
        text = "every member must pass the same nranks";
        break;
    case MODE_NEVER:
        if (rank == 0 && rcoll_comm_grow_id(c, &id) != RCOLL_OK) bad |= 2;
        want = RCOLL_ERR_TIMEOUT;
        text = "never joined";
        break;
    case MODE_DESTROYED:
        if (rank == 0) {
            if (rcoll_comm_grow_id(c, &id) != RCOLL_OK) bad |= 2;
            publish(a->sh, &id);
            check_sleep_ms(300); /* the new rank is waiting in its join by now */
        }
        if (!sum_ok(c, m)) bad |= 4;
        rcoll_comm_destroy(c);
        await_newcomer(a, n);
        return bad;
    }
    double t0 = check_now_s();
    rcoll_status_t st = rcoll_comm_grow(c, want_n, NULL, RCOLL_UNDEFINED, &g);
    double t = check_now_s() - t0;
    fprintf(stderr, "member %d: %s after %.2f s: %s\n", rank, rcoll_status_string(st), t,
            rcoll_comm_last_error(c));
    double bound = a->mode == MODE_NEVER ? TIMEOUT_S + 3.0 : PROMPT_S;
    if (st != want || g != NULL || !strstr(rcoll_comm_last_error(c), text) || t > bound)
        bad |= 8;
    if (a->mode == MODE_NEVER && !strstr(rcoll_comm_last_error(c), "rank 3 never joined"))
        bad |= 8;
    if (!sum_ok(c, m)) bad |= 16; /* refused: the old one works on */
    rcoll_comm_destroy(c);
    await_newcomer(a, n);
    return bad;
}

static int bad_args(grow_arg_t *a, const rcoll_unique_id_t *pid, int rank, int n)
{
    (void)a;
    rcoll_comm_t c = NULL, g = (rcoll_comm_t)1;
    int bad = 0;
    if (rcoll_comm_init_rank(n, pid, rank, &c) != RCOLL_OK) return 100;
    rcoll_unique_id_t id;
    if (rcoll_comm_grow(c, n, NULL, RCOLL_UNDEFINED, &g) != RCOLL_ERR_INVALID_ARG || g ||
        !strstr(rcoll_comm_last_error(c), "is not above"))
        bad |= 1;
    if (rcoll_comm_grow(c, n + 1, NULL, rank + 1, &g) != RCOLL_ERR_INVALID_ARG ||
        !strstr(rcoll_comm_last_error(c), "keeps its rank"))
        bad |= 2;
    if (rcoll_comm_grow(c, n + 1, NULL, RCOLL_UNDEFINED, NULL) != RCOLL_ERR_INVALID_ARG) bad |= 4;
    if (rcoll_comm_grow_id(c, NULL) != RCOLL_ERR_INVALID_ARG) bad |= 4;
    if (rcoll_comm_grow(NULL, n + 1, NULL, n, &g) != RCOLL_ERR_INVALID_ARG) bad |= 8;
    if (rcoll_comm_grow_id(c, &id) != RCOLL_OK) bad |= 16;
    if (rcoll_comm_grow(NULL, n + 1, &id, 0, &g) != RCOLL_ERR_INVALID_ARG || g) bad |= 8;
    if (rcoll_comm_grow(NULL, n + 1, &id, n + 1, &g) != RCOLL_ERR_INVALID_ARG) bad |= 8;
    rcoll_group_start();
    if (rcoll_comm_grow(c, n + 1, NULL, RCOLL_UNDEFINED, &g) != RCOLL_ERR_INVALID_USAGE)
        bad |= 32;
    rcoll_group_end();
    if (!sum_ok(c, n)) bad |= 64;
    rcoll_comm_destroy(c);
    return bad;
}

static grow_arg_t arg;

static int run_rank(const rcoll_unique_id_t *id, int rank, int n, void *p)
{
    grow_arg_t *a = p;
    switch (a->mode) {
    case MODE_BASIC:
        return basic(a, id, rank, n);
    case MODE_ELASTIC:
        return elastic(a, id, rank, n);
    case MODE_ARGS:
        return bad_args(a, id, rank, n);
    default:
        return refusal(a, id, rank, n);
    }
}

static void run(int mode, int members, int nprocs, const char *name, const char *bits)
{
    memset(arg.sh, 0, sizeof(*arg.sh));
    arg.mode = mode;
    arg.members = members;
    mp_result_t res;
    double t0 = check_now_s();
    mp_run_raw(nprocs, run_rank, &arg, 40, &res);
    printf("%-60s %.2f s\n", name, check_now_s() - t0);
    for (int r = 0; r < nprocs; r++) {
        int want = mode == MODE_ELASTIC && r == 2 ? 128 + SIGKILL : 0;
        CHECK(res.codes[r] == want, "%s: process %d exit %d, want %d (%s)", name, r,
              res.codes[r], want, bits);
    }
}

int main(void)
{
    char tmo[16];
    snprintf(tmo, sizeof(tmo), "%g", TIMEOUT_S);
    setenv("RCOLL_TIMEOUT", tmo, 1);
    arg.sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                  -1, 0);
    if (arg.sh == MAP_FAILED) return 1;
    const char *grown = "bits: 1 rank/size, 2 all-reduce, 4 broadcast, 8 all-gather, 16 "
                        "grow_id, 32 grow failed, 64 new rank's grow failed, 128 old comm";
    run(MODE_BASIC, 3, 5, "3 members grow to 5", grown);
    run(MODE_ELASTIC, 4, 5, "4 ranks, rank 2 killed, shrink to 3, a restart joins",
        "bits: 1-2 parameters from rank 0 wrong, 4 all-reduce, 8 no failure seen, 16 shrink, "
        "32 grow, 64 the restart's grow");
    const char *refused = "bits: 1 new rank not failed promptly saying why, 2 grow_id, 8 not "
                          "refused alike and promptly, 16 old comm unusable after";
    run(MODE_NO_ID, 3, 3, "no member made a grow id: refused on every member", refused);
    run(MODE_TWO_IDS, 3, 4, "two members made grow ids: refused, the new rank told", refused);
    run(MODE_SIZES, 3, 4, "members ask for different sizes: refused", refused);
    run(MODE_NEVER, 3, 3, "the new rank never comes: timeout naming it", refused);
    run(MODE_DESTROYED, 3, 4, "destroyed with an unused grow id: the new rank told", refused);
    run(MODE_ARGS, 2, 2, "bad arguments", "bits: 1 size, 2 rank, 4 NULL, 8 new rank's "
        "arguments, 16 grow_id, 32 inside a group, 64 comm unusable after");
    return check_summary();
}
