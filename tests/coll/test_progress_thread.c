/*
 * test_progress_thread.c - a communicator with a progress thread (rcoll_comm_config_t
 * .progress_thread, RCOLL_PROGRESS_THREAD) moves its nonblocking operations while the caller
 * makes no rcoll call, and keeps every other behaviour:
 *   moves      3 ranks post an 8 MiB all-reduce (many pipeline steps), sleep 1 s without a
 *              call, then one rcoll_test finds it done with the right sums.  The control (no
 *              thread, same steps) finds it not done, so the check can tell the difference.
 *   shared     one thread waits (rcoll_wait) while another posts and tests on the same
 *              communicator: allowed with the thread, every result right.
 *   mixed      blocking collectives, point-to-point both ways, a group batch, a dup'd child
 *              (it inherits the thread), then destroy with the thread running.
 *   env        RCOLL_PROGRESS_THREAD=1 turns it on for rcoll_comm_init_rank.
 *   dead       a rank exits while the others sleep with an all-reduce posted: their first
 *              rcoll_test afterwards already holds the error naming it (found by the thread);
 *              also with a dup whose own thread reads the same control connection.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mp.h"

#define BIG (2u << 20) /* floats: 8 MiB */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static rcoll_status_t init_cfg(const rcoll_unique_id_t *id, int rank, int n, int pt,
                               rcoll_comm_t *comm)
{
    rcoll_comm_config_t cfg = RCOLL_COMM_CONFIG_INIT;
    cfg.progress_thread = pt;
    cfg.name = pt ? "with-thread" : "without";
    return rcoll_comm_init_rank_config(n, id, rank, &cfg, comm);
}

static int sums_ok(const float *v, size_t count, int n)
{
    for (size_t i = 0; i < count; i++)
        if (v[i] != (float)(n * (n + 1) / 2) + (float)(i % 7) * (float)n) return 0;
    return 1;
}

static void fill(float *v, size_t count, int rank)
{
    for (size_t i = 0; i < count; i++) v[i] = (float)(rank + 1) + (float)(i % 7);
}

/* arg: &pt.  Exit code 0: done after the sleep (pt) / not done (control), sums right. */
static int moves(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    int pt = *(int *)arg;
    rcoll_comm_t comm;
    if (init_cfg(id, rank, n, pt, &comm) != RCOLL_OK) return 2;
    float *v = malloc(BIG * sizeof(float));
    if (!v) return 2;
    fill(v, BIG, rank);
    rcoll_request_t req = NULL;
    if (rcoll_iallreduce(RCOLL_IN_PLACE, v, BIG, RCOLL_FLOAT32, RCOLL_SUM, comm, &req) !=
        RCOLL_OK)
        return 2;
    sleep_ms(1000); /* "computing": no rcoll call */
    int done = 0;
    rcoll_status_t st = rcoll_test(&req, &done);
    int bad = st != RCOLL_OK || done != pt;
    if (bad)
        fprintf(stderr, "rank %d (thread %d): after 1 s, rcoll_test says done=%d (%s)\n", rank,
                pt, done, rcoll_status_string(st));
    if (!done && rcoll_wait(&req) != RCOLL_OK) bad = 1;
    if (!sums_ok(v, BIG, n)) {
        fprintf(stderr, "rank %d: wrong sums\n", rank);
        bad = 1;
    }
    free(v);
    rcoll_comm_destroy(comm);
    return bad;
}

typedef struct {
    rcoll_request_t *req;
    rcoll_status_t st;
} waiter_t;

static void *waiter(void *arg)
{
    waiter_t *w = arg;
    w->st = rcoll_wait(w->req);
    return NULL;
}

static int shared(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    rcoll_comm_t comm;
    if (init_cfg(id, rank, n, 1, &comm) != RCOLL_OK) return 2;
    size_t c1 = 1u << 20;
    float *a = malloc(c1 * sizeof(float));
    int32_t b[5] = {0}, c[3];
    if (!a) return 2;
    fill(a, c1, rank);
    if (rank == n - 1) sleep_ms(300); /* the waiter below waits for this rank a while */
    rcoll_request_t r1 = NULL, r2 = NULL, r3 = NULL;
    if (rcoll_iallreduce(RCOLL_IN_PLACE, a, c1, RCOLL_FLOAT32, RCOLL_SUM, comm, &r1) != RCOLL_OK)
        return 2;
    waiter_t w = {&r1, RCOLL_ERR_INTERNAL};
    pthread_t th;
    if (pthread_create(&th, NULL, waiter, &w) != 0) return 2;
    sleep_ms(20); /* the waiter is inside rcoll_wait now */
    for (int i = 0; i < 5; i++) b[i] = rank * 10 + i;
    for (int i = 0; i < 3; i++) c[i] = rank == 0 ? 7 + i : -1;
    int bad = 0;
    rcoll_status_t st = rcoll_iallreduce(RCOLL_IN_PLACE, b, 5, RCOLL_INT32, RCOLL_MAX, comm, &r2);
    if (st == RCOLL_OK) st = rcoll_ibcast(c, 3, RCOLL_INT32, 0, comm, &r3);
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: posting beside a waiting thread: %s: %s\n", rank,
                rcoll_status_string(st), rcoll_comm_last_error(comm));
        bad = 1;
    }
    for (int done = 0; st == RCOLL_OK && !done;) st = rcoll_test(&r2, &done);
    if (st == RCOLL_OK) st = rcoll_wait(&r3);
    pthread_join(th, NULL);
    bad |= st != RCOLL_OK || w.st != RCOLL_OK || r1 != NULL || !sums_ok(a, c1, n);
    for (int i = 0; i < 5; i++) bad |= b[i] != (n - 1) * 10 + i;
    for (int i = 0; i < 3; i++) bad |= c[i] != 7 + i;
    if (bad)
        fprintf(stderr, "rank %d: shared: %s / waiter %s, b[4]=%d c[2]=%d\n", rank,
                rcoll_status_string(st), rcoll_status_string(w.st), b[4], c[2]);
    free(a);
    rcoll_comm_destroy(comm);
    return bad;
}

static int mixed_on(rcoll_comm_t comm, int rank, int n)
{
    int bad = 0;
    int64_t x = rank + 1;
    bad |= rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT64, RCOLL_SUM, comm) != RCOLL_OK ||
           x != n * (n + 1) / 2;
    int32_t g[64];
    int32_t mine = rank * 3;
    bad |= rcoll_allgather(&mine, g, 1, RCOLL_INT32, comm) != RCOLL_OK;
    for (int i = 0; i < n; i++) bad |= g[i] != i * 3;
    /* point to point both ways around the ring, nonblocking, receive posted second */
    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    int32_t out[1000], in[1000];
    for (int i = 0; i < 1000; i++) out[i] = rank * 1000 + i;
    rcoll_request_t s = NULL, r = NULL;
    bad |= rcoll_isend(out, 1000, RCOLL_INT32, to, comm, &s) != RCOLL_OK;
    bad |= rcoll_irecv(in, 1000, RCOLL_INT32, from, comm, &r) != RCOLL_OK;
    bad |= rcoll_wait(&r) != RCOLL_OK || rcoll_wait(&s) != RCOLL_OK;
    for (int i = 0; i < 1000; i++) bad |= in[i] != from * 1000 + i;
    /* a group batch */
    int32_t gin = -1, gout = rank;
    rcoll_group_start();
    rcoll_send(&gout, 1, RCOLL_INT32, to, comm);
    rcoll_recv(&gin, 1, RCOLL_INT32, from, comm);
    bad |= rcoll_group_end() != RCOLL_OK || gin != from;
    bad |= rcoll_barrier(comm) != RCOLL_OK;
    return bad;
}

static int mixed(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    int env = arg != NULL;
    rcoll_comm_t comm, dup = NULL;
    rcoll_status_t st = env ? rcoll_comm_init_rank(n, id, rank, &comm)
                            : init_cfg(id, rank, n, 1, &comm);
    if (st != RCOLL_OK) return 2;
    int bad = mixed_on(comm, rank, n);
    if (bad) fprintf(stderr, "rank %d: mixed on the parent failed\n", rank);
    if (rcoll_comm_dup(comm, &dup) != RCOLL_OK) return 2;
    if (mixed_on(dup, rank, n)) {
        fprintf(stderr, "rank %d: mixed on the dup failed\n", rank);
        bad = 1;
    }
    /* work left posted and completed, then destroy while both threads run */
    float v[4] = {1, 1, 1, 1};
    rcoll_request_t req = NULL;
    bad |= rcoll_iallreduce(RCOLL_IN_PLACE, v, 4, RCOLL_FLOAT32, RCOLL_SUM, dup, &req) !=
           RCOLL_OK;
    sleep_ms(50);
    bad |= rcoll_wait(&req) != RCOLL_OK || v[3] != (float)n;
    bad |= rcoll_comm_destroy(dup) != RCOLL_OK;
    bad |= rcoll_comm_destroy(comm) != RCOLL_OK;
    return bad;
}

/* arg non-NULL: a dup (its own progress thread, the same control connection) has an
 * all-reduce posted too, so two threads read the root's notice. */
static int dead(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    rcoll_comm_t comm[2] = {NULL, NULL};
    int nc = arg ? 2 : 1;
    if (init_cfg(id, rank, n, 1, &comm[0]) != RCOLL_OK) return 2;
    if (nc == 2 && rcoll_comm_dup(comm[0], &comm[1]) != RCOLL_OK) return 2;
    if (rank == n - 1) _exit(0); /* gone without a word */
    int32_t v[2][16] = {{0}};
    rcoll_request_t req[2] = {NULL, NULL};
    for (int c = 0; c < nc; c++)
        if (rcoll_iallreduce(RCOLL_IN_PLACE, v[c], 16, RCOLL_INT32, RCOLL_SUM, comm[c],
                             &req[c]) != RCOLL_OK)
            return 2;
    sleep_ms(2500); /* no call: only the threads can notice */
    char want[32];
    snprintf(want, sizeof(want), "rank %d", n - 1);
    int bad = 0;
    for (int c = 0; c < nc; c++) {
        int done = 0;
        rcoll_status_t st = rcoll_test(&req[c], &done);
        int b = !done || st == RCOLL_OK || !strstr(rcoll_comm_last_error(comm[c]), want);
        if (b)
            fprintf(stderr, "rank %d comm %d: after the peer left: done=%d %s '%s'\n", rank, c,
                    done, rcoll_status_string(st), rcoll_comm_last_error(comm[c]));
        if (!done) rcoll_wait(&req[c]);
        bad |= b;
    }
    for (int c = nc - 1; c >= 0; c--) rcoll_comm_destroy(comm[c]);
    return bad;
}

int main(void)
{
    mp_result_t res;
    unsetenv("RCOLL_PROGRESS_THREAD");
    int on = 1, off = 0;
    CHECK(mp_run_raw(3, moves, &on, 60, &res) == 0,
          "with the thread, an 8 MiB all-reduce completes while its ranks make no call");
    CHECK(mp_run_raw(3, moves, &off, 60, &res) == 0,
          "control: without it, the same all-reduce waits for a call");
    CHECK(mp_run_raw(3, shared, NULL, 60, &res) == 0,
          "one thread waits while another posts and tests on the same communicator");
    CHECK(mp_run_raw(3, mixed, NULL, 60, &res) == 0,
          "blocking, point-to-point, group, dup and destroy with the thread (config)");
    setenv("RCOLL_PROGRESS_THREAD", "1", 1);
    CHECK(mp_run_raw(2, mixed, &on, 60, &res) == 0, "RCOLL_PROGRESS_THREAD=1 turns it on");
    unsetenv("RCOLL_PROGRESS_THREAD");
    setenv("RCOLL_TIMEOUT", "20", 1);
    CHECK(mp_run_raw(3, dead, NULL, 60, &res) == 0 && res.seconds < 15,
          "a departed rank is named by the thread while the others make no call (%.1f s)",
          res.seconds);
    CHECK(mp_run_raw(3, dead, &on, 60, &res) == 0 && res.seconds < 15,
          "... and by both threads of a communicator and its dup (%.1f s)", res.seconds);
    return check_summary();
}
