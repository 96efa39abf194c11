/*
 * test_wait.c - the wait modes (rcoll_comm_config_t.wait, RCOLL_WAIT; docs/api.md "Waiting"):
 *   idle       rank n-1 arrives 1 s late at an all-reduce; the others' CPU time over their
 *              wait (CLOCK_PROCESS_CPUTIME_ID) is at most 3% of it with RCOLL_WAIT_SLEEP (they
 *              sleep on the doorbell), and the same wait with RCOLL_WAIT_SPIN is the control
 *              that shows the check can tell (it polls and naps: more than the sleeping
 *              bound).  Results right in both.
 *   auto       every rank pinned to one CPU (ranks outnumber the CPUs of their masks):
 *              RCOLL_WAIT_AUTO sleeps as RCOLL_WAIT_SLEEP does.
 *   moves      sleeping ranks, late by 0-20 ms in turn: all-reduce of 8 B to 4 MiB (the
 *              transport's slots refill while the peer sleeps), bcast, allgather, alltoall,
 *              point to point both ways, a group batch, with and without the progress thread;
 *              every result right, and the whole run within its time (a lost wakeup would
 *              cost a 10 ms slice per step).
 *   wait_for   rcoll_wait_for: rank n-1 arrives 300 ms late; the others wait in 50 ms
 *              slices, each slice returns done = 0 within 50-150 ms (several of them), then
 *              done = 1 with the right sums; in each wait mode, with and without the progress
 *              thread.  Bad arguments (NULL, negative or NaN timeout) refused.
 *   env        RCOLL_WAIT=sleep selects the mode for rcoll_comm_init_rank.
 *   invalid    wait = 7 is refused with RCOLL_ERR_INVALID_ARG and a sentence.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mp.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    int wait; /* RCOLL_WAIT_* */
    int pin;  /* pin every rank to CPU 0 before init */
    int pt;   /* progress thread */
    double cpu_frac[8]; /* out (through the result file): CPU / wall over the late wait */
} wait_arg_t;

static rcoll_status_t init_cfg(const rcoll_unique_id_t *id, int rank, int n, int wait, int pt,
                               rcoll_comm_t *comm)
{
    rcoll_comm_config_t cfg = RCOLL_COMM_CONFIG_INIT;
    cfg.wait = wait;
    cfg.progress_thread = pt;
    return rcoll_comm_init_rank_config(n, id, rank, &cfg, comm);
}

/* Exit code: 0 right; 2 setup; 3 wrong result; 10 + CPU percent (capped 99) otherwise: the
 * parent reads each rank's CPU share from its exit code minus 10 when it is >= 10. */
static int idle(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    wait_arg_t *a = arg;
    if (a->pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) return 2;
    }
    rcoll_comm_t comm;
    if (init_cfg(id, rank, n, a->wait, 0, &comm) != RCOLL_OK) return 2;
    float v[4] = {(float)rank, 1, 2, 3};
    if (rcoll_allreduce(RCOLL_IN_PLACE, v, 4, RCOLL_FLOAT32, RCOLL_SUM, comm) != RCOLL_OK)
        return 2;
    v[0] = (float)rank;
    if (rank == n - 1) sleep_ms(1000);
    double c0 = cpu_s(), w0 = wall_s();
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, v, 4, RCOLL_FLOAT32, RCOLL_SUM, comm);
    double frac = (cpu_s() - c0) / (wall_s() - w0);
    rcoll_comm_destroy(comm);
    if (st != RCOLL_OK || v[0] != (float)(n * (n - 1) / 2) || v[3] != (float)(3 * n * n))
        return 3;
    if (rank == n - 1) return 0;
    int pct = (int)(frac * 100 + 0.5);
    return 10 + (pct > 89 ? 89 : pct);
}

static int check_idle(int n, int wait, int pin, const char *what, int expect_low)
{
    wait_arg_t a = {.wait = wait, .pin = pin};
    mp_result_t res;
    mp_run_raw(n, idle, &a, 60, &res);
    int worst = 0, ok = 1;
    for (int r = 0; r < n - 1; r++) {
        int code = res.codes[r];
        if (code < 10) {
            ok = 0;
            fprintf(stderr, "%s: rank %d exited %d\n", what, r, code);
            continue;
        }
        if (code - 10 > worst) worst = code - 10;
    }
    ok &= res.codes[n - 1] == 0;
    printf("%s, %d ranks: waiting ranks' CPU over a 1 s wait: at most %d%%\n", what, n, worst);
    CHECK(ok, "%s: every rank right", what);
    if (expect_low)
        CHECK(worst <= 3, "%s: the waiting ranks sleep (CPU %d%% of the wait, at most 3%%)",
              what, worst);
    return worst;
}

/* The moves case: every kind of call with late ranks in turn. */
static int moves(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    wait_arg_t *a = arg;
    rcoll_comm_t comm;
    if (init_cfg(id, rank, n, RCOLL_WAIT_SLEEP, a->pt, &comm) != RCOLL_OK) return 2;
    int bad = 0, step = 0;
    size_t max = 1u << 20; /* floats: 4 MiB */
    float *v = malloc(max * sizeof(float));
    int32_t *g = malloc((size_t)n * 64 * sizeof(int32_t));
    int32_t *t = malloc((size_t)n * 64 * sizeof(int32_t));
    if (!v || !g || !t) return 2;
    for (size_t count = 2; count <= max; count *= 8, step++) {
        for (size_t i = 0; i < count; i++) v[i] = (float)(rank + 1) + (float)(i % 5);
        if (rank == step % n) sleep_ms(20);
        if (rcoll_allreduce(RCOLL_IN_PLACE, v, count, RCOLL_FLOAT32, RCOLL_SUM, comm) != RCOLL_OK)
            return 2;
        for (size_t i = 0; i < count; i++)
            bad |= v[i] != (float)(n * (n + 1) / 2) + (float)(i % 5) * (float)n;
    }
    for (int root = 0; root < n; root++) {
        int32_t b[16];
        for (int i = 0; i < 16; i++) b[i] = rank == root ? 100 * root + i : -1;
        if (rank == (root + 1) % n) sleep_ms(10);
        if (rcoll_bcast(b, 16, RCOLL_INT32, root, comm) != RCOLL_OK) return 2;
        for (int i = 0; i < 16; i++) bad |= b[i] != 100 * root + i;
    }
    for (int i = 0; i < 64; i++) g[i] = rank * 1000 + i;
    if (rank == 0) sleep_ms(15);
    if (rcoll_allgather(g, t, 64, RCOLL_INT32, comm) != RCOLL_OK) return 2;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 64; i++) bad |= t[r * 64 + i] != r * 1000 + i;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 64; i++) g[r * 64 + i] = rank * 1000 + r * 64 + i;
    if (rank == n - 1) sleep_ms(15);
    if (rcoll_alltoall(g, t, 64, RCOLL_INT32, comm) != RCOLL_OK) return 2;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 64; i++) bad |= t[r * 64 + i] != r * 1000 + rank * 64 + i;
    /* point to point around the ring, both ways, as one group batch; then a plain pair */
    int nxt = (rank + 1) % n, prv = (rank + n - 1) % n;
    int32_t s1 = rank, s2 = -rank, r1 = -99, r2 = -99;
    if (rank == 1 % n) sleep_ms(10);
    rcoll_group_start();
    rcoll_send(&s1, 1, RCOLL_INT32, nxt, comm);
    rcoll_send(&s2, 1, RCOLL_INT32, prv, comm);
    rcoll_recv(&r1, 1, RCOLL_INT32, prv, comm);
    rcoll_recv(&r2, 1, RCOLL_INT32, nxt, comm);
    if (rcoll_group_end() != RCOLL_OK) return 2;
    bad |= r1 != prv || r2 != -nxt;
    if (rcoll_barrier(comm) != RCOLL_OK) return 2;
    free(v);
    free(g);
    free(t);
    rcoll_comm_destroy(comm);
    if (bad) fprintf(stderr, "rank %d: wrong results (progress thread %d)\n", rank, a->pt);
    return bad ? 3 : 0;
}

/* arg: wait mode * 2 + progress thread.  Exit 0 right; 4 a slice out of bounds; 5 never
 * returned done = 0 (the peer is 300 ms late: it must). */
static int wait_for(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    int mode = *(int *)arg;
    rcoll_comm_t comm;
    if (init_cfg(id, rank, n, mode / 2, mode % 2, &comm) != RCOLL_OK) return 2;
    float v[8];
    for (int i = 0; i < 8; i++) v[i] = (float)(rank + i);
    if (rank == n - 1) sleep_ms(300);
    rcoll_request_t req = NULL;
    if (rcoll_iallreduce(RCOLL_IN_PLACE, v, 8, RCOLL_FLOAT32, RCOLL_SUM, comm, &req) != RCOLL_OK)
        return 2;
    int done = 0, slices = 0, bad = 0;
    volatile double zero = 0;
    if (rcoll_wait_for(&req, -1.0, &done) != RCOLL_ERR_INVALID_ARG ||
        rcoll_wait_for(&req, zero / zero, &done) != RCOLL_ERR_INVALID_ARG ||
        rcoll_wait_for(&req, 1.0, NULL) != RCOLL_ERR_INVALID_ARG || !req) {
        fprintf(stderr, "rank %d: a negative, NaN or done-less rcoll_wait_for was not refused\n",
                rank);
        bad = 6;
    }
    rcoll_status_t st = RCOLL_OK;
    while (!done && st == RCOLL_OK) {
        double t0 = wall_s();
        st = rcoll_wait_for(&req, 0.05, &done);
        double took = wall_s() - t0;
        if (!done) {
            slices++;
            if (took < 0.045 || took > 0.15) {
                fprintf(stderr, "rank %d: a 50 ms slice took %.3f s\n", rank, took);
                bad = 4;
            }
            if (!req) bad = 4;
        }
    }
    if (st != RCOLL_OK || req) bad = 2;
    if (bad == 2) fprintf(stderr, "rank %d: %s\n", rank, rcoll_status_string(st));
    for (int i = 0; i < 8; i++) bad |= v[i] != (float)(n * (n - 1) / 2 + n * i) ? 3 : 0;
    if (!bad && rank != n - 1 && slices < 3) bad = 5;
    rcoll_comm_destroy(comm);
    return bad;
}

static int env_mode(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    rcoll_comm_t comm;
    if (rcoll_comm_init_rank(n, id, rank, &comm) != RCOLL_OK) return 2;
    float v = 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_FLOAT32, RCOLL_SUM, comm) != RCOLL_OK)
        return 2;
    if (rank == n - 1) sleep_ms(1000);
    double c0 = cpu_s(), w0 = wall_s();
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_FLOAT32, RCOLL_SUM, comm);
    double frac = (cpu_s() - c0) / (wall_s() - w0);
    rcoll_comm_destroy(comm);
    if (st != RCOLL_OK || v != (float)(n * n)) return 3;
    return rank == n - 1 || frac <= 0.03 ? 0 : 4;
}

int main(void)
{
    mp_result_t res;
    /* the control first: spinning waits cost more than the sleeping bound */
    int spin = check_idle(2, RCOLL_WAIT_SPIN, 0, "RCOLL_WAIT_SPIN", 0);
    CHECK(spin > 3, "control: RCOLL_WAIT_SPIN's polling and naps cost more than 3%% of the "
          "wait (%d%%), so the sleeping bound tells the modes apart", spin);
    check_idle(2, RCOLL_WAIT_SLEEP, 0, "RCOLL_WAIT_SLEEP", 1);
    check_idle(3, RCOLL_WAIT_SLEEP, 0, "RCOLL_WAIT_SLEEP", 1);
    check_idle(2, RCOLL_WAIT_AUTO, 1, "RCOLL_WAIT_AUTO, ranks pinned to one CPU", 1);

    for (int pt = 0; pt <= 1; pt++) {
        for (int n = 2; n <= 3; n++) {
            wait_arg_t a = {.pt = pt};
            double t0 = wall_s();
            int rc = mp_run_raw(n, moves, &a, 60, &res);
            double took = wall_s() - t0;
            CHECK(rc == 0, "moves, %d ranks, progress thread %d: every result right", n, pt);
            /* sleeps in the test itself: 20 ms x 7 sizes + 10 x n + 15 + 15 + 10 */
            CHECK(took < 10, "moves, %d ranks, progress thread %d: %.2f s (a lost wakeup costs "
                  "a slice per step)", n, pt, took);
        }
    }

    for (int mode = RCOLL_WAIT_SPIN * 2; mode <= RCOLL_WAIT_SLEEP * 2 + 1; mode++) {
        int m = mode;
        CHECK(mp_run_raw(3, wait_for, &m, 60, &res) == 0,
              "rcoll_wait_for: 50 ms slices while a peer is 300 ms late, then the sums (%s, "
              "progress thread %d)", mode / 2 == RCOLL_WAIT_SLEEP ? "sleep" : "spin", mode % 2);
    }
    {
        rcoll_request_t none = NULL;
        int d = 0;
        CHECK(rcoll_wait_for(NULL, 1, &d) == RCOLL_ERR_INVALID_ARG &&
                  rcoll_wait_for(&none, 1, &d) == RCOLL_ERR_INVALID_ARG,
              "rcoll_wait_for: NULL request refused");
    }
    setenv("RCOLL_WAIT", "sleep", 1);
    CHECK(mp_run_raw(2, env_mode, NULL, 60, &res) == 0,
          "RCOLL_WAIT=sleep: the waiting rank sleeps (CPU at most 3%% of a 1 s wait)");
    unsetenv("RCOLL_WAIT");

    rcoll_unique_id_t id;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK, "unique id");
    rcoll_comm_config_t cfg = RCOLL_COMM_CONFIG_INIT;
    cfg.wait = 7;
    rcoll_comm_t comm = NULL;
    rcoll_status_t st = rcoll_comm_init_rank_config(1, &id, 0, &cfg, &comm);
    CHECK(st == RCOLL_ERR_INVALID_ARG && strstr(rcoll_last_init_error(), "wait 7"),
          "wait = 7 refused: %s (%s)", rcoll_status_string(st), rcoll_last_init_error());
    return check_summary();
}
