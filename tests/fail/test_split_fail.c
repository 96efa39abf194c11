/*
 * test_split_fail.c - a split that fails for a local reason on one rank (EMFILE: rank 1 runs
 * out of file descriptors after a few kept splits) reaches every member at once: every rank's
 * split fails, or its next call, well inside RCOLL_TIMEOUT, the others' errors naming rank 1;
 * the parent ends the same on every rank (usable everywhere when rank 1 failed before the
 * exchange, failed everywhere, as for a dead rank, when it failed connecting); destroying the
 * parent and the kept splits never waits out the timeout.  Real processes, 2 and 3 ranks, the
 * default transports and TCP, the limit at several margins so that it bites at each step.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "check.h"
#include "mp.h"
#include "rcoll.h"

static int margin = 24; /* descriptors left to rank 1 above what it has open */
#define VICTIM 1
#define TIMEOUT_S 12.0
#define PROMPT_S 4.0 /* a failure that travels, not a deadline: well under the timeout */
#define MAXSPLIT 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n - 3; /* ., .. and the directory's own */
}

static int rank_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    int bad = 0;
    rcoll_comm_t comm = NULL;
    if (rcoll_comm_init_rank(n, id, rank, &comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: init failed: %s\n", rank, rcoll_last_init_error());
        return 2;
    }
    if (rank == VICTIM) {
        /* room for a few splits, not for many (each keeps its connections) */
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = (rlim_t)(open_fds() + margin);
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 3;
    }
    rcoll_comm_t kept[MAXSPLIT];
    int nkept = 0, failed_at = -1;
    double took = 0;
    char err[512] = "";
    for (int i = 0; i < MAXSPLIT && failed_at < 0; i++) {
        double t0 = now_s();
        rcoll_status_t st = rcoll_comm_split(comm, 0, rank, &kept[nkept]);
        took = now_s() - t0;
        if (st == RCOLL_OK) {
            nkept++;
            continue;
        }
        failed_at = i;
        snprintf(err, sizeof(err), "%s", rcoll_comm_last_error(comm));
    }
    if (failed_at < 0) {
        fprintf(stderr, "rank %d: %d splits and none failed (the limit did not bite)\n", rank,
                MAXSPLIT);
        return 4;
    }
    fprintf(stderr, "rank %d: split #%d failed after %.2f s (%d kept): %s\n", rank, failed_at,
            took, nkept, err);
    if (took > PROMPT_S) bad |= 1 << 3;
    if (rank != VICTIM && !strstr(err, "rank 1")) bad |= 1 << 4;
    /* the parent: its next calls end at once.  The first call to fail is numbered (3: none
     * of three did); a call can complete on one rank as its peer fails in it (the peer's
     * data had arrived), so the ranks' numbers may differ by one, not more (the caller
     * checks, from bits 6-7 of the exit code). */
    int first_fail = 3;
    for (int k = 0; k < 3; k++) {
        int v = 1;
        double t0 = now_s();
        rcoll_status_t st = k == 0 ? rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32,
                                                     RCOLL_SUM, comm)
                                   : rcoll_barrier(comm);
        double t = now_s() - t0;
        if (t > PROMPT_S || (k == 0 && st == RCOLL_OK && v != n)) bad |= 1 << 5;
        if (st != RCOLL_OK) {
            fprintf(stderr, "rank %d: the parent's call %d: %s after %.2f s: %s\n", rank, k,
                    rcoll_status_string(st), t, rcoll_comm_last_error(comm));
            first_fail = k;
            break;
        }
    }
    /* destroying never waits out the timeout */
    double t1 = now_s();
    for (int i = 0; i < nkept; i++) rcoll_comm_destroy(kept[i]);
    rcoll_comm_destroy(comm);
    double t_destroy = now_s() - t1;
    fprintf(stderr, "rank %d: destroyed %d communicators in %.2f s\n", rank, nkept + 1,
            t_destroy);
    if (t_destroy > PROMPT_S) bad |= 1 << 2;
    return bad | first_fail << 6;
}

static void run(int nr, const char *transport)
{
    if (transport)
        setenv("RCOLL_TRANSPORT", transport, 1);
    else
        unsetenv("RCOLL_TRANSPORT");
    mp_result_t res;
    double t0 = now_s();
    mp_run_raw(nr, rank_fn, NULL, 3 * TIMEOUT_S, &res);
    double took = now_s() - t0;
    const char *tn = transport ? transport : "default";
    for (int r = 0; r < nr; r++)
        CHECK((res.codes[r] & 63) == 0, "%s, %d ranks, margin %d: rank %d: the failure reached "
              "it promptly and destroy returned (exit %d: bit 2 destroy slow, 3 split slow, 4 "
              "rank 1 not named, 5 the parent's next call slow or wrong)", tn, nr, margin, r,
              res.codes[r]);
    int lo = 3, hi = 0;
    for (int r = 0; r < nr; r++) {
        int f = (res.codes[r] >> 6) & 3;
        lo = f < lo ? f : lo;
        hi = f > hi ? f : hi;
    }
    CHECK(hi - lo <= 1, "%s, %d ranks, margin %d: the parent ends the "
          "same on every rank (first failing call of three: %d to %d; 3 = none failed)", tn, nr,
          margin, lo, hi);
    CHECK(took < 2 * TIMEOUT_S, "%s, %d ranks, margin %d: the whole run %.1f s, under twice "
          "the timeout", tn, nr, margin, took);
}

int main(void)
{
    char t[32];
    snprintf(t, sizeof(t), "%g", TIMEOUT_S);
    setenv("RCOLL_TIMEOUT", t, 1);
    for (margin = 4; margin <= 24; margin += 2) {
        run(2, NULL);
        run(3, NULL);
        run(2, "tcp");
    }
    return check_summary();
}
