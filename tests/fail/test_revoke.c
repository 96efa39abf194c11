/*
 * test_revoke.c - rcoll_comm_revoke: one rank revokes a communicator while the others wait in
 * an all-reduce on it; they fail at once naming it, its own later calls are refused, the
 * parent communicator is unaffected, and a shrink of the revoked one gives a working
 * communicator of the same ranks.  Then a revoke from a helper thread while the same rank's
 * main thread waits in a call on it.  Real processes, RCOLL_TIMEOUT far above the bounds.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mp.h"
#include "rcoll.h"

#define PROMPT_S 2.0 /* a revoke travels in milliseconds; the timeout is 30 s */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int sum_ok(rcoll_comm_t c, int n)
{
    int v = 1;
    return rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, c) == RCOLL_OK && v == n;
}

static int revoke_rank(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    int bad = 0;
    rcoll_comm_t dup = NULL;
    if (rcoll_comm_dup(comm, &dup) != RCOLL_OK) return 1;
    float v[4096];
    for (int i = 0; i < 4096; i++) v[i] = 1;
    if (rank == n - 1) {
        sleep_s(0.3); /* the others are waiting in the all-reduce by now */
        if (rcoll_comm_revoke(dup) != RCOLL_OK) bad |= 1;
        if (rcoll_comm_revoke(dup) != RCOLL_OK) bad |= 1; /* twice: a no-op */
        double t0 = now_s();
        rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, v, 4096, RCOLL_FLOAT32, RCOLL_SUM,
                                            dup);
        if (st != RCOLL_ERR_INVALID_USAGE || !strstr(rcoll_comm_last_error(dup), "revoked by") ||
            now_s() - t0 > PROMPT_S) {
            fprintf(stderr, "rank %d: a call after its own revoke: %s: %s\n", rank,
                    rcoll_status_string(st), rcoll_comm_last_error(dup));
            bad |= 2;
        }
    } else {
        double t0 = now_s();
        rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, v, 4096, RCOLL_FLOAT32, RCOLL_SUM,
                                            dup);
        double t = now_s() - t0;
        char want[64];
        snprintf(want, sizeof(want), "revoked by rank %d", n - 1);
        fprintf(stderr, "rank %d: the all-reduce on the revoked communicator: %s after %.3f s: "
                "%s\n", rank, rcoll_status_string(st), t, rcoll_comm_last_error(dup));
        if (st != RCOLL_ERR_REMOTE || !strstr(rcoll_comm_last_error(dup), want) || t > PROMPT_S)
            bad |= 4;
    }
    /* the parent is unaffected */
    if (!sum_ok(comm, n)) {
        fprintf(stderr, "rank %d: the parent after the revoke: %s\n", rank,
                rcoll_comm_last_error(comm));
        bad |= 8;
    }
    /* everyone leaves the revoked one by shrinking it: the same ranks, working */
    rcoll_comm_t s = NULL;
    double t0 = now_s();
    rcoll_status_t st = rcoll_comm_shrink(dup, RCOLL_SHRINK_DEFAULT, &s);
    int size = 0;
    if (st != RCOLL_OK || rcoll_comm_size(s, &size) != RCOLL_OK || size != n || !sum_ok(s, n) ||
        now_s() - t0 > PROMPT_S + 1) {
        fprintf(stderr, "rank %d: shrinking the revoked communicator: %s (size %d): %s\n", rank,
                rcoll_status_string(st), size, rcoll_comm_last_error(dup));
        bad |= 16;
    }
    t0 = now_s();
    if (s) rcoll_comm_destroy(s);
    rcoll_comm_destroy(dup);
    if (now_s() - t0 > PROMPT_S) bad |= 32;
    return bad;
}

typedef struct {
    rcoll_comm_t c;
    rcoll_status_t st;
} revoker_t;

static void *revoker(void *arg)
{
    revoker_t *r = arg;
    sleep_s(0.3);
    r->st = rcoll_comm_revoke(r->c);
    return NULL;
}

static int thread_rank(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg, (void)n;
    int bad = 0;
    rcoll_comm_t dup = NULL;
    if (rcoll_comm_dup(comm, &dup) != RCOLL_OK) return 1;
    int v = 1;
    double t0 = now_s();
    rcoll_status_t st;
    if (rank == 0) {
        revoker_t r = {dup, RCOLL_ERR_INTERNAL};
        pthread_t t;
        pthread_create(&t, NULL, revoker, &r);
        st = rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, dup);
        pthread_join(t, NULL);
        if (r.st != RCOLL_OK) bad |= 1;
    } else {
        sleep_s(1.0); /* rank 0 waits alone meanwhile, and is revoked from its own thread */
        t0 = now_s();
        st = rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, dup);
        /* An operation whose inputs had all arrived may complete before this rank reads the
         * revoke (rank 0 had posted its part): the next one cannot. */
        if (st == RCOLL_OK) {
            fprintf(stderr, "rank %d: completed before it read the revoke; once more\n", rank);
            t0 = now_s();
            st = rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, dup);
        }
    }
    double t = now_s() - t0;
    fprintf(stderr, "rank %d: %s after %.3f s: %s\n", rank, rcoll_status_string(st), t,
            rcoll_comm_last_error(dup));
    if (st == RCOLL_OK || !strstr(rcoll_comm_last_error(dup), "revoked by rank 0") ||
        t > (rank == 0 ? 0.3 : 0.0) + PROMPT_S)
        bad |= 2;
    rcoll_comm_destroy(dup);
    if (!sum_ok(comm, n)) bad |= 4;
    return bad;
}

int main(void)
{
    setenv("RCOLL_TIMEOUT", "30", 1);
    mp_result_t res;
    mp_run(3, revoke_rank, NULL, 60, &res);
    for (int r = 0; r < 3; r++)
        CHECK(res.codes[r] == 0, "revoke by rank 2 while 0 and 1 wait: rank %d (exit %d: bit 1 "
              "revoke refused, 2 its own call not refused, 4 the others not failed promptly "
              "naming it, 8 the parent affected, 16 shrink, 32 destroy slow)", r, res.codes[r]);
    mp_run(3, thread_rank, NULL, 60, &res);
    for (int r = 0; r < 3; r++)
        CHECK(res.codes[r] == 0, "revoke from a helper thread while rank 0 waits: rank %d "
              "(exit %d: bit 1 revoke refused, 2 the call not failed promptly naming rank 0, "
              "4 the parent affected)", r, res.codes[r]);
    return check_summary();
}
