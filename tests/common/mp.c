/*
 * mp.c - forks rank processes for the multi-process tests (see mp.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    mp_rank_fn_t fn;
    void *arg;
} wrap_t;

static int run_wrapped(const rcoll_unique_id_t *id, int rank, int nranks, void *arg)
{
    wrap_t *w = arg;
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_rank(nranks, id, rank, &comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: init failed: %s: %s\n", rank, rcoll_status_string(st),
                rcoll_last_init_error());
        return 90;
    }
    int rc = w->fn(comm, rank, nranks, w->arg);
    st = rcoll_comm_destroy(comm);
    if (st != RCOLL_OK && rc == 0) rc = 91;
    return rc;
}

int mp_run(int nranks, mp_rank_fn_t fn, void *arg, double timeout_s, mp_result_t *res)
{
    wrap_t w = {fn, arg};
    return mp_run_raw(nranks, run_wrapped, &w, timeout_s, res);
}

int mp_run_raw(int nranks, mp_raw_fn_t fn, void *arg, double timeout_s, mp_result_t *res)
{
    mp_result_t local;
    if (!res) res = &local;
    memset(res, 0, sizeof(*res));
    res->nranks = nranks;
    if (nranks < 1 || nranks > 64) return nranks;
    /* Fork first, then make the id (which starts the root thread) and hand it over a pipe:
     * a child forked while a thread of the parent holds a lock (malloc's, under ASan) would
     * inherit it locked forever. */
    fflush(NULL);
    pid_t pids[64];
    int pipes[64][2];
    double t0 = now_s();
    for (int r = 0; r < nranks; r++) {
        if (pipe(pipes[r]) != 0) {
            perror("pipe");
            pids[r] = 0;
            res->codes[r] = 99;
            continue;
        }
        pids[r] = fork();
        if (pids[r] == 0) {
            close(pipes[r][1]);
            rcoll_unique_id_t id;
            size_t got = 0;
            while (got < sizeof(id)) {
                ssize_t n = read(pipes[r][0], (char *)&id + got, sizeof(id) - got);
                if (n <= 0) _exit(98); /* the parent could not make an id */
                got += (size_t)n;
            }
            close(pipes[r][0]);
            int rc = fn(&id, r, nranks, arg);
            fflush(NULL);
            _exit(rc);
        }
        close(pipes[r][0]);
        if (pids[r] < 0) {
            perror("fork");
            pids[r] = 0;
            res->codes[r] = 99;
        }
    }
    rcoll_unique_id_t id;
    rcoll_status_t st = rcoll_get_unique_id(&id);
    if (st != RCOLL_OK)
        fprintf(stderr, "rcoll_get_unique_id: %s: %s\n", rcoll_status_string(st),
                rcoll_last_init_error());
    for (int r = 0; r < nranks; r++) {
        if (pids[r] > 0 && st == RCOLL_OK && write(pipes[r][1], &id, sizeof(id)) != sizeof(id))
            perror("write");
        if (pids[r] > 0) close(pipes[r][1]);
    }
    int left = 0;
    for (int r = 0; r < nranks; r++) left += pids[r] > 0;
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < nranks; r++)
                if (pids[r] == p) {
                    res->codes[r] = WIFEXITED(status) ? WEXITSTATUS(status)
                                                      : 128 + WTERMSIG(status);
                    pids[r] = 0;
                    left--;
                }
            continue;
        }
        if (now_s() - t0 > timeout_s) {
            for (int r = 0; r < nranks; r++)
                if (pids[r] > 0) {
                    fprintf(stderr, "mp: rank %d (pid %d) still running after %.0f s: killed\n",
                            r, (int)pids[r], timeout_s);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], &status, 0);
                    res->codes[r] = MP_TIMEOUT_EXIT;
                    pids[r] = 0;
                    left--;
                }
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    res->seconds = now_s() - t0;
    int bad = 0;
    for (int r = 0; r < nranks; r++) bad += res->codes[r] != 0;
    return bad;
}

void mp_set_env_rank(int rank, int nranks, const char *root, const char *secret)
{
    char v[32];
    snprintf(v, sizeof(v), "%d", rank);
    setenv("RCOLL_RANK", v, 1);
    snprintf(v, sizeof(v), "%d", nranks);
    setenv("RCOLL_NRANKS", v, 1);
    setenv("RCOLL_ROOT", root, 1);
    setenv("RCOLL_SECRET", secret, 1);
}
