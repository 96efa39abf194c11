/*
 * probe.c - measures the cost model's constants at communicator creation (RCOLL_TUNING_PROBE,
 * on by default; skipped when RCOLL_TUNING_FILE gives them or RCOLL_ALGO forces the choice):
 * for the path most peers use (shared memory when every peer is on this host, else the
 * network),
 *
 *   alpha  from 8-byte recursive-doubling all-reduces:  T = (L + 2f) alpha
 *   gamma  from reducing 256 KiB of float32 locally:     T = S gamma
 *   beta   from 256 KiB ring all-reduces:                 T = 2(n-1) alpha + 2(n-1)/n S beta
 *                                                            + (n-1)/n S gamma
 *          across hosts on a slow network (a 256 KiB ring over 1 ms), from the difference of 2 MiB and
 *          256 KiB rings instead (the slope: free of alpha, and of the burst a rate-limited
 *          link lets through at full speed)
 *
 * each the best of a few runs, then the maximum over ranks (an all-reduce), so every rank
 * holds the same constants and makes the same choices.  Costs well under a millisecond on
 * shared memory and a few on TCP.  The other path keeps its defaults.  Communicators split
 * from this one inherit the constants (rcoll_comm_split).
 */
#include <stdio.h>
#include <stdlib.h>

#include "algo/reduce.h"
#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

#define ALPHA_REPS 10
#define BETA_REPS 2
#define PROBE_BYTES ((size_t)256 << 10)
#define PROBE_NET_BYTES ((size_t)2 << 20)

/* Best (smallest) microseconds per all-reduce of `bytes` with algorithm a, over reps runs. */
static rcoll_status_t time_allreduce(rcoll_comm_t c, rcoll_allreduce_alg_t a, float *buf,
                                     size_t bytes, int reps, double *best_us)
{
    c->probe_alg = (int)a;
    /* a warm-up, which also lines the ranks up */
    rcoll_status_t st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, buf, buf, bytes / 4, RCOLL_FLOAT32,
                                       RCOLL_SUM, 0);
    *best_us = 1e30;
    for (int i = 0; i < reps && st == RCOLL_OK; i++) {
        uint64_t t0 = rcoll_now_ns();
        st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, buf, buf, bytes / 4, RCOLL_FLOAT32, RCOLL_SUM,
                            0);
        double us = (double)(rcoll_now_ns() - t0) * 1e-3;
        if (us < *best_us) *best_us = us;
    }
    c->probe_alg = -1;
    return st;
}

rcoll_status_t rcoll_comm_probe(rcoll_comm_t c)
{
    if (c->nranks < 2) return RCOLL_OK;
    /* Settings may differ between ranks: probe only if every rank wants to, so that all run
     * the same collectives. */
    int32_t want = c->cfg.tuning_probe && !c->cfg.tuning_file[0] &&
                   c->algo.forced == RCOLL_ALG_AUTO;
    rcoll_status_t st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, &want, &want, 1, RCOLL_INT32,
                                       RCOLL_MIN, 0);
    if (st != RCOLL_OK) return rcoll_err_set(st, "tuning probe: %s", c->last_error);
    if (!want) return RCOLL_OK;
    /* only across hosts: on one host nothing limits the rate, a slow ring is a busy CPU */
    size_t big = c->nhosts > 1 ? PROBE_NET_BYTES : 0;
    float *buf = calloc((PROBE_BYTES * 2 > big ? PROBE_BYTES * 2 : big) / 4, sizeof(float));
    if (!buf) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "tuning probe: no memory");
    int n = c->nranks, p = 1, L = 0;
    while (p * 2 <= n) p *= 2, L++;
    int f = p != n;
    double m[3] = {0, 0, 0}; /* alpha us, gamma us/B, beta us/B */
    double t_rd = 0, t_ring = 0, t_big = 0;
    st = time_allreduce(c, RCOLL_ALG_RD, buf, 8, ALPHA_REPS, &t_rd);
    if (st == RCOLL_OK) st = time_allreduce(c, RCOLL_ALG_RING, buf, PROBE_BYTES, BETA_REPS, &t_ring);
    /* Every rank must take the same branch: the slow-link test uses the maximum over ranks. */
    double slow = t_ring;
    if (st == RCOLL_OK && big)
        st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, &slow, &slow, 1, RCOLL_FLOAT64, RCOLL_MAX, 0);
    if (st == RCOLL_OK && big && slow < 1000.0) big = 0;
    if (st == RCOLL_OK && big) st = time_allreduce(c, RCOLL_ALG_RING, buf, big, BETA_REPS, &t_big);
    if (st == RCOLL_OK) {
        double best = 1e30;
        for (int i = 0; i < 3; i++) {
            uint64_t t0 = rcoll_now_ns();
            rcoll_reduce_local(buf, buf, buf + PROBE_BYTES / 4, PROBE_BYTES / 4, RCOLL_FLOAT32,
                               RCOLL_SUM, 0);
            double us = (double)(rcoll_now_ns() - t0) * 1e-3;
            if (us < best) best = us;
        }
        double S = (double)PROBE_BYTES, N = n;
        m[0] = t_rd / (L + 2 * f);
        m[1] = best / S;
        m[2] = (t_ring - 2 * (N - 1) * m[0] - (N - 1) / N * S * m[1]) / (2 * (N - 1) / N * S);
        if (big) { /* the slope between the two sizes */
            double dS = (double)big - S;
            m[2] = (t_big - t_ring - (N - 1) / N * dS * m[1]) / (2 * (N - 1) / N * dS);
        }
        st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, m, m, 3, RCOLL_FLOAT64, RCOLL_MAX, 0);
    }
    free(buf);
    if (st != RCOLL_OK) return rcoll_err_set(st, "tuning probe: %s", c->last_error);
    /* Keep the constants physical whatever the noise: positive, a transfer not cheaper than
     * 1 TB/s, a reduction not cheaper than 1 TB/s. */
    if (m[0] < 0.01) m[0] = 0.01;
    if (m[1] < 1e-6) m[1] = 1e-6;
    if (m[2] < 1e-6) m[2] = 1e-6;
    rcoll_path_cost_t *path = c->all_shm ? &c->tuning.shm : &c->tuning.net;
    path->alpha_us = m[0];
    path->beta_us_per_b = m[2];
    c->tuning.gamma_us_per_b = m[1];
    rcoll_algo_choose_reset(&c->algo); /* choose afresh with the measured constants */
    char extra[48] = "";
    if (big) snprintf(extra, sizeof(extra), ", 2 MiB ring %.1f us", t_big);
    RCOLL_INFO(INIT, "tuning probe (%s): alpha %.3f us, beta %.2f GB/s, reduction %.2f GB/s "
               "(8 B doubling %.2f us, 256 KiB ring %.1f us%s)", c->all_shm ? "shm" : "net",
               m[0], 1e-3 / m[2], 1e-3 / m[1], t_rd, t_ring, extra);
    return RCOLL_OK;
}
