/*
 * test_shrink_sub.c - rcoll_comm_shrink of communicators of some ranks (split children), real
 * processes forked by mp.c whose bootstrap root lives in this test's parent:
 *  - 6 ranks split in two groups by parity, the odd group ordered by descending rank; rank 3
 *    SIGKILLed: every communicator fails (the parent and both groups), each group shrinks
 *    its own - at the same time, two rounds at the root - (the even group keeps its 3 ranks,
 *    the odd one is 5 then 1), and the parent shrinks to 5; every new communicator's
 *    all-reduce, broadcast and all-gather are right against values computed here;
 *  - a group of a group (4 of 8 ranks, then 2 of those), rank 6 killed: the inner group
 *    without it shrinks to the same 2 ranks;
 *  - 4 ranks in pairs, rank 3 killed: rank 2 leaves the job cleanly instead of shrinking;
 *    the pair {0, 1} shrunk before must not take that exit for a death;
 *  - a healthy group of 2 of 4 ranks whose rank 1 calls 5 s late (RCOLL_TIMEOUT 3 s): the
 *    other one goes on alone after the timeout, the late call fails with RCOLL_ERR_TIMEOUT
 *    saying it came too late, and the late rank is still in the job (the parent works);
 *  - a job of more than the ranks a request can name is not needed to refuse: a shrink of
 *    some ranks past the job's first 1024 says so (not tested: 1025 processes).
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

/* Shared by the forked ranks: how many are out of their barrier (the victim dies after all). */
static int *sh_ready;

/* The new communicator c has ranks whose job ranks are ids[0..n) (in order): all-reduce of
 * the job ranks, a broadcast from its last rank, an all-gather of the job ranks. */
static int check_comm(rcoll_comm_t c, const int *ids, int n, int me_job, const char *what)
{
    int r = -1, size = -1, bad = 0;
    rcoll_comm_rank(c, &r);
    rcoll_comm_size(c, &size);
    if (size != n || r < 0 || r >= n || ids[r] != me_job) {
        fprintf(stderr, "job rank %d: %s is rank %d of %d\n", me_job, what, r, size);
        return 1;
    }
    long v = me_job + 1, want = 0;
    for (int i = 0; i < n; i++) want += ids[i] + 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT64, RCOLL_SUM, c) != RCOLL_OK ||
        v != want)
        bad |= 2;
    int b[300];
    for (int i = 0; i < 300; i++) b[i] = r == n - 1 ? i * 3 + ids[n - 1] : -1;
    if (rcoll_bcast(b, 300, RCOLL_INT32, n - 1, c) != RCOLL_OK) bad |= 4;
    for (int i = 0; i < 300 && !(bad & 4); i++)
        if (b[i] != i * 3 + ids[n - 1]) bad |= 4;
    int all[16];
    if (rcoll_allgather(&me_job, all, 1, RCOLL_INT32, c) != RCOLL_OK) bad |= 8;
    for (int i = 0; i < n && !(bad & 8); i++)
        if (all[i] != ids[i]) bad |= 8;
    if (bad)
        fprintf(stderr, "job rank %d: %s wrong (bits %d): %s\n", me_job, what, bad,
                rcoll_comm_last_error(c));
    return bad;
}

static int groups(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    rcoll_comm_t g = NULL, gs = NULL, ps = NULL;
    int odd = rank % 2, bad = 0;
    if (rcoll_comm_split(comm, odd, odd ? -rank : rank, &g) != RCOLL_OK) return 100;
    volatile int *ready = sh_ready;
    if (rcoll_barrier(comm) != RCOLL_OK) return 100;
    __sync_fetch_and_add(ready, 1);
    if (rank == 3) {
        double until = check_now_s() + 10;
        while (*ready < 6 && check_now_s() < until) check_sleep_ms(1);
        raise(SIGKILL);
    }
    int v = 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK)
        bad |= 16; /* the job's communicator fails */
    /* The odd group lost rank 3: it fails.  The even group's call may complete before it
     * reads the failure (its peers are alive); either way it is shrunk. */
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, g) == RCOLL_OK && odd)
        bad |= 16;
    double t0 = check_now_s();
    rcoll_status_t st = rcoll_comm_shrink(g, RCOLL_SHRINK_DEFAULT, &gs);
    fprintf(stderr, "job rank %d: group shrink %s in %.3f s\n", rank, rcoll_status_string(st),
            check_now_s() - t0);
    if (st != RCOLL_OK) {
        fprintf(stderr, "job rank %d: %s\n", rank, rcoll_comm_last_error(g));
        return 32;
    }
    static const int even_ids[] = {0, 2, 4}, odd_ids[] = {5, 1};
    bad |= odd ? check_comm(gs, odd_ids, 2, rank, "odd group") :
                 check_comm(gs, even_ids, 3, rank, "even group");
    if (rcoll_comm_shrink(comm, RCOLL_SHRINK_DEFAULT, &ps) != RCOLL_OK) {
        fprintf(stderr, "job rank %d: job shrink: %s\n", rank, rcoll_comm_last_error(comm));
        return bad | 64;
    }
    static const int job_ids[] = {0, 1, 2, 4, 5};
    bad |= check_comm(ps, job_ids, 5, rank, "the job");
    /* and the group again, on the shrunk job: still right after the job's round */
    bad |= odd ? check_comm(gs, odd_ids, 2, rank, "odd group after") :
                 check_comm(gs, even_ids, 3, rank, "even group after");
    rcoll_comm_destroy(gs);
    rcoll_comm_destroy(ps);
    rcoll_comm_destroy(g);
    (void)n;
    return bad;
}

static int nested(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg, (void)n;
    rcoll_comm_t g = NULL, gg = NULL, s = NULL;
    int bad = 0;
    /* outer: {0,2,4,6} and {1,3,5,7}; inner: pairs {0,4} {2,6} and {1,5} {3,7} */
    if (rcoll_comm_split(comm, rank % 2, rank, &g) != RCOLL_OK) return 100;
    if (rcoll_comm_split(g, (rank / 2) % 2, rank, &gg) != RCOLL_OK) return 100;
    volatile int *ready = sh_ready;
    if (rcoll_barrier(comm) != RCOLL_OK) return 100;
    __sync_fetch_and_add(ready, 1);
    if (rank == 6) { /* once every rank is out of the barrier (a loaded machine is slow) */
        double until = check_now_s() + 10;
        while (*ready < 8 && check_now_s() < until) check_sleep_ms(1);
        raise(SIGKILL);
    }
    /* Every rank sees the failure first (the job's communicator has rank 6): a death is
     * announced to the whole job, and each communicator is then shrunk; one shrunk before
     * its rank read the announcement would fail when it does, and be shrunk again. */
    int v = 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK)
        bad |= 16;
    if (rcoll_comm_shrink(gg, RCOLL_SHRINK_DEFAULT, &s) != RCOLL_OK) {
        fprintf(stderr, "job rank %d: inner shrink: %s\n", rank, rcoll_comm_last_error(gg));
        return 32;
    }
    int ids[2] = {rank % 4, rank % 4 + 4};
    int two = rank != 2;
    if (rank == 2) ids[0] = 2;
    bad |= check_comm(s, ids, two ? 2 : 1, rank, "inner group");
    rcoll_comm_destroy(s);
    rcoll_comm_destroy(gg);
    rcoll_comm_destroy(g);
    return bad;
}

static int late(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    rcoll_comm_t g = NULL, s = NULL;
    int bad = 0;
    if (rcoll_comm_split(comm, rank < 2 ? 0 : RCOLL_UNDEFINED, rank, &g) != RCOLL_OK) return 100;
    double start = check_now_s();
    if (rank == 0) {
        rcoll_status_t st = rcoll_comm_shrink(g, RCOLL_SHRINK_DEFAULT, &s);
        double t = check_now_s() - start;
        fprintf(stderr, "rank 0: shrink alone after %.2f s: %s\n", t, rcoll_status_string(st));
        static const int ids[] = {0};
        if (st != RCOLL_OK || t < TIMEOUT_S - 0.5 || t > TIMEOUT_S + 2) bad |= 1;
        else bad |= check_comm(s, ids, 1, 0, "rank 0 alone");
    } else if (rank == 1) {
        check_sleep_ms((int)(TIMEOUT_S * 1000) + 2000);
        double t0 = check_now_s();
        rcoll_status_t st = rcoll_comm_shrink(g, RCOLL_SHRINK_DEFAULT, &s);
        double t = check_now_s() - t0;
        fprintf(stderr, "rank 1: late shrink %s after %.2f s: %s\n", rcoll_status_string(st), t,
                rcoll_comm_last_error(g));
        if (st != RCOLL_ERR_TIMEOUT || s || t > 1.0 ||
            !strstr(rcoll_comm_last_error(g), "went on without it"))
            bad |= 2;
    }
    /* the late rank is still in the job: its communicator works for everyone (all call it
     * once rank 1 is back, within RCOLL_TIMEOUT of each other) */
    while (check_now_s() - start < TIMEOUT_S + 2.5) check_sleep_ms(20);
    int v = 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, comm) != RCOLL_OK || v != n)
        bad |= 4;
    if (s) rcoll_comm_destroy(s);
    if (g) rcoll_comm_destroy(g);
    return bad;
}

/* 4 ranks in pairs, rank 3 killed: the pair {0, 1} shrinks (to itself), and rank 2, whose pair
 * lost rank 3, leaves the job cleanly (destroys its communicators, exits) instead.  A clean
 * exit after a failure is not a death: the pair's new communicator must keep working after
 * rank 2 has gone. */
static int leaver(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg, (void)n;
    rcoll_comm_t g = NULL, s = NULL;
    if (rcoll_comm_split(comm, rank / 2, rank, &g) != RCOLL_OK) return 100;
    volatile int *ready = sh_ready;
    if (rcoll_barrier(comm) != RCOLL_OK) return 100;
    __sync_fetch_and_add(ready, 1);
    if (rank == 3) {
        double until = check_now_s() + 10; /* every other rank is out of the barrier */
        while (*ready < 4 && check_now_s() < until) check_sleep_ms(1);
        raise(SIGKILL);
    }
    int v = 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK)
        return 16;
    if (rank == 2) { /* leaves: mp destroys comm after g */
        rcoll_comm_destroy(g);
        return 0;
    }
    if (rcoll_comm_shrink(g, RCOLL_SHRINK_DEFAULT, &s) != RCOLL_OK) return 32;
    check_sleep_ms(800); /* rank 2 has left by now */
    static const int ids[] = {0, 1};
    int bad = check_comm(s, ids, 2, rank, "the pair after rank 2 left");
    rcoll_comm_destroy(s);
    rcoll_comm_destroy(g);
    return bad;
}

int main(void)
{
    char tmo[16];
    snprintf(tmo, sizeof(tmo), "%g", TIMEOUT_S);
    setenv("RCOLL_TIMEOUT", tmo, 1);
    sh_ready = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh_ready == MAP_FAILED) return 1;
    mp_result_t res;
    double t0 = check_now_s();
    *sh_ready = 0;
    mp_run(6, groups, NULL, 40, &res);
    printf("6 ranks in two groups, rank 3 killed: both groups and the job shrink  %.2f s\n",
           check_now_s() - t0);
    for (int r = 0; r < 6; r++)
        CHECK(res.codes[r] == (r == 3 ? 128 + SIGKILL : 0), "groups: rank %d exit %d (bits: "
              "2 all-reduce, 4 broadcast, 8 all-gather, 1 rank/size, 16 no failure seen, 32 "
              "group shrink, 64 job shrink)", r, res.codes[r]);
    t0 = check_now_s();
    *sh_ready = 0;
    mp_run(8, nested, NULL, 40, &res);
    printf("8 ranks, a group of a group, rank 6 killed: the inner groups shrink     %.2f s\n",
           check_now_s() - t0);
    for (int r = 0; r < 8; r++)
        CHECK(res.codes[r] == (r == 6 ? 128 + SIGKILL : 0), "nested: rank %d exit %d", r,
              res.codes[r]);
    t0 = check_now_s();
    *sh_ready = 0;
    mp_run(4, leaver, NULL, 40, &res);
    printf("4 ranks in pairs, rank 3 killed, rank 2 leaves: the pair {0, 1} works on  %.2f s\n",
           check_now_s() - t0);
    for (int r = 0; r < 4; r++)
        CHECK(res.codes[r] == (r == 3 ? 128 + SIGKILL : 0), "a rank leaving after the failure: "
              "rank %d exit %d (bits: 2-8 the pair's collectives failed, 16 no failure seen, "
              "32 shrink)", r, res.codes[r]);
    t0 = check_now_s();
    mp_run(4, late, NULL, 40, &res);
    printf("a group of 2 of 4, rank 1 calls 5 s late: left out, still in the job  %.2f s\n",
           check_now_s() - t0);
    for (int r = 0; r < 4; r++)
        CHECK(res.codes[r] == 0, "late: rank %d exit %d (bits: 1 rank 0 not alone after the "
              "timeout, 2 the late call not refused promptly saying why, 4 the job's "
              "communicator broken)", r, res.codes[r]);
    return check_summary();
}
