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
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "core/comm.h"
#include "core/introspect.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

#define ALPHA_REPS 10
#define BETA_REPS 5 /* best of: one slow run of 2 made beta 0.13 GB/s for 2.8 on TCP */
#define BIG_REPS 2  /* the 2 MiB ring on a slow link: tens of ms each */
#define PROBE_BYTES ((size_t)256 << 10)
#define PROBE_NET_BYTES ((size_t)2 << 20)

#define POINT_BUDGET_US 10000.0 /* the longest run of one probe point (estimated) */

/* Best (smallest) microseconds per all-reduce of `bytes` with algorithm a over reps runs: the
 * noise here is one-sided (a descheduled rank makes a run slow, never fast).  warm: one
 * untimed run first, which also lines the ranks up (0: the caller's previous run did). */
static rcoll_status_t time_allreduce_how(rcoll_comm_t c, rcoll_allreduce_alg_t a, float *buf,
                                         size_t bytes, int reps, int warm, double *best_us)
{
    c->probe_alg = (int)a;
    rcoll_status_t st = warm ? rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, buf, buf, bytes / 4,
                                              RCOLL_FLOAT32, RCOLL_SUM, 0)
                             : RCOLL_OK;
    *best_us = 1e30;
    for (int n = 0; n < reps && st == RCOLL_OK; n++) {
        uint64_t t0 = rcoll_now_ns();
        st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, buf, buf, bytes / 4, RCOLL_FLOAT32, RCOLL_SUM,
                            0);
        double us = (double)(rcoll_now_ns() - t0) * 1e-3;
        if (us < *best_us) *best_us = us;
    }
    c->probe_alg = -1;
    return st;
}

/* The same after a warm-up. */
static rcoll_status_t time_allreduce(rcoll_comm_t c, rcoll_allreduce_alg_t a, float *buf,
                                     size_t bytes, int reps, double *best_us)
{
    return time_allreduce_how(c, a, buf, bytes, reps, 1, best_us);
}

/* Where no algorithm names its own sizes: latency, the middle, bandwidth, and over a network
 * past a megabyte, where recursive doubling's and the ring's growth part (over TCP on 2 ranks
 * doubling costs 0.45 us a KiB past 2 MiB, the ring 0.27; below 1 MiB both less); over shared
 * memory a point at 256 KiB instead (a straight line from 32 KiB to 1 MiB put doubling below
 * two-shot at 128 KiB on 2 ranks in some creations, where it ran 1.27x slower). */
static const size_t net_points[RCOLL_ALGO_PROBE_POINTS] = {64, (size_t)32 << 10,
                                                            (size_t)1 << 20, (size_t)4 << 20};
static const size_t shm_points[RCOLL_ALGO_PROBE_POINTS] = {64, (size_t)32 << 10,
                                                            (size_t)256 << 10, (size_t)1 << 20};
/* Past a megabyte (over a network) each point is the best of two runs without a warm-up. */
#define MIB_POINT ((size_t)1 << 20)

/* Algorithm a's probe sizes here (returns how many): its ops' or the default, none larger
 * than cap. */
int rcoll_probe_points(int a, size_t cap, int shm, size_t *pts)
{
    const rcoll_algo_ops_t *ops = rcoll_algos[a];
    const size_t *src = ops->probe_bytes[0] ? ops->probe_bytes : shm ? shm_points : net_points;
    int n = 0;
    for (int k = 0; k < RCOLL_ALGO_PROBE_POINTS && src[k] >= 4; k++) {
        size_t b = src[k] & ~(size_t)3;
        if (b > cap) b = cap;
        if (n && b <= pts[n - 1]) continue;
        pts[n++] = b;
    }
    return n;
}

/* The algorithm auto would run for `bytes` if every unmeasured algorithm cost what its formula
 * says (measured ones: their curve): -1 where none applies. */
static int formula_choice(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    int best = -1;
    double best_t = HUGE_VAL;
    for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
        double x = rcoll_algos[a]->predict(ctx, bytes);
        if (isinf(x)) continue;
        if (ctx->fit[a].npoints) x = rcoll_algo_predict(ctx, (rcoll_allreduce_alg_t)a, bytes);
        if (x < best_t) best_t = x, best = a;
    }
    return best;
}

/* Measure what auto may choose: every algorithm the formulas would pick at some size from
 * 8 B to 1 GiB is timed at its probe sizes, the times agreed (the maximum over ranks, so
 * every rank holds the same curves) and kept as its prediction (rcoll_algo_fit_t); then again
 * with the curves in place, until every algorithm auto may choose is measured.  Each curve
 * only rises with the size (a point below the previous one, which is noise, takes its value).
 * Every rank runs the same list: it follows from what the ranks agreed (the shape, the host
 * segment, CMA, the constants, the agreed times).  cap: the largest size timed (a link slow
 * enough to make the probe long is timed up to PROBE_BYTES only). */
static rcoll_status_t fit_algorithms(rcoll_comm_t c, size_t cap)
{
    rcoll_algo_ctx_t *ctx = &c->algo;
    enum { NP = RCOLL_ALGO_PROBE_POINTS };
    for (int a = 0; a < RCOLL_ALG_COUNT; a++) ctx->fit[a].npoints = 0;
    float *buf = NULL;
    size_t buf_bytes = 0;
    char line[640];
    size_t len = 0;
    line[0] = '\0';
    rcoll_status_t st = RCOLL_OK;
    for (int pass = 0; pass < RCOLL_ALG_COUNT && st == RCOLL_OK; pass++) {
        int want[RCOLL_ALG_COUNT] = {0}, nwant = 0;
        for (size_t bytes = 8; bytes <= ((size_t)1 << 30); bytes *= 4) {
            int a = formula_choice(ctx, bytes);
            if (a >= 0 && !ctx->fit[a].npoints && !want[a]) want[a] = 1, nwant++;
        }
        if (!nwant) break;
        double t[RCOLL_ALG_COUNT][NP];
        size_t pts[RCOLL_ALG_COUNT][NP];
        int np[RCOLL_ALG_COUNT];
        memset(t, 0, sizeof(t));
        for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
            np[a] = want[a] ? rcoll_probe_points(a, cap, c->all_shm, pts[a]) : 0;
            if (np[a] && pts[a][np[a] - 1] > buf_bytes) buf_bytes = pts[a][np[a] - 1];
        }
        free(buf);
        buf = calloc(buf_bytes / 4 + 1, sizeof(float));
        if (!buf) st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "tuning probe: no memory");
        /* Size by size, agreed after each: an algorithm whose next point would take more
         * than POINT_BUDGET_US per run (its time here times its formula's growth to the
         * next size) stops here; above its last point its curve follows its formula (one
         * point) or its last slope (9 ranks over TCP with 64-byte chunks: seconds). */
        for (int k = 0; k < NP && st == RCOLL_OK; k++) {
            double lvl[RCOLL_ALG_COUNT] = {0};
            int any = 0;
            for (int a = 0; a < RCOLL_ALG_COUNT && st == RCOLL_OK; a++) {
                if (k >= np[a]) continue;
                /* small sizes: the best of many (cheap); large ones: the best of five (the
                 * median of three moved with two slow runs: two-shot at 1 MiB over shared
                 * memory read 50-81 us, and auto ran the ring, 1.5x slower, in 3 of 12
                 * creations); past a megabyte (over a network): the best of two, no
                 * warm-up (the previous point warmed the algorithm; each run costs
                 * milliseconds) */
                int small = pts[a][k] <= PROBE_BYTES / 8;
                int huge = pts[a][k] > MIB_POINT;
                st = time_allreduce_how(c, (rcoll_allreduce_alg_t)a, buf, pts[a][k],
                                        small ? ALPHA_REPS : huge ? 2 : 5, !huge, &lvl[a]);
                any = 1;
            }
            if (!any) break;
            if (st == RCOLL_OK)
                st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, lvl, lvl, RCOLL_ALG_COUNT,
                                    RCOLL_FLOAT64, RCOLL_MAX, 0);
            for (int a = 0; a < RCOLL_ALG_COUNT && st == RCOLL_OK; a++) {
                if (k >= np[a]) continue;
                t[a][k] = lvl[a];
                /* the next point's time: this one's, grown as the formula grows */
                double f0 = rcoll_algos[a]->predict(ctx, pts[a][k]);
                double f1 = k + 1 < np[a] ? rcoll_algos[a]->predict(ctx, pts[a][k + 1]) : 0;
                double grow = f0 > 0 && isfinite(f0) && isfinite(f1)
                                  ? f1 / f0 : (double)pts[a][k + 1 < np[a] ? k + 1 : k] /
                                                  (double)pts[a][k];
                if (k + 1 < np[a] && lvl[a] * grow > POINT_BUDGET_US) np[a] = k + 1;
            }
        }
        if (st != RCOLL_OK) break;
        for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
            if (!want[a]) continue;
            rcoll_algo_fit_t *f = &ctx->fit[a];
            f->npoints = np[a] ? np[a] : 1;
            if (!np[a]) { /* no sizes (cannot happen with the default): never again */
                f->bytes[0] = 8, f->us[0] = HUGE_VAL;
                continue;
            }
            for (int k = 0; k < np[a]; k++) {
                f->bytes[k] = (double)pts[a][k];
                f->us[k] = t[a][k] > 0.01 ? t[a][k] : 0.01;
                if (k && f->us[k] < f->us[k - 1]) f->us[k] = f->us[k - 1];
                if (len < sizeof(line))
                    len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s%s %zu B %.2f us",
                                            k ? "," : len ? "; " : "", k ? "" : rcoll_alg_names[a],
                                            k ? "" : ":", pts[a][k], f->us[k]);
            }
        }
    }
    free(buf);
    if (st != RCOLL_OK) return st;
    RCOLL_INFO(INIT, "tuning probe, measured: %s", line[0] ? line : "nothing");
    return RCOLL_OK;
}

/* This process's earlier measurements (RCOLL_TUNING_REUSE), by the communicator's shape. */
#define CACHE_SLOTS 8
typedef struct {
    uint64_t key; /* 0: empty */
    rcoll_tuning_t tuning;
    rcoll_algo_fit_t fit[RCOLL_ALG_COUNT];
} probe_cache_t;
static probe_cache_t cache[CACHE_SLOTS];
static unsigned cache_next;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

/* What the measurements depend on: the ranks, how they sit on hosts, the paths between them,
 * and what the set-up agreed (host segment, CMA). */
static uint64_t shape_key(const rcoll_comm_t c)
{
    uint64_t v[] = {(uint64_t)c->nranks, (uint64_t)c->nhosts, (uint64_t)c->ppn,
                    (uint64_t)c->local_ranks, (uint64_t)c->all_shm,
                    (uint64_t)c->algo.has_hostseg, (uint64_t)c->algo.has_cma,
                    (uint64_t)c->cfg.transport, (uint64_t)c->chunk_bytes};
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) h = (h ^ v[i]) * 1099511628211ull;
    return h ? h : 1;
}

static int cache_find(uint64_t key, probe_cache_t *out)
{
    int hit = 0;
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < CACHE_SLOTS && !hit; i++)
        if (cache[i].key == key) *out = cache[i], hit = 1;
    pthread_mutex_unlock(&cache_mu);
    return hit;
}

static void cache_put(uint64_t key, const rcoll_comm_t c)
{
    pthread_mutex_lock(&cache_mu);
    int slot = -1;
    for (int i = 0; i < CACHE_SLOTS && slot < 0; i++)
        if (cache[i].key == key) slot = i;
    if (slot < 0) slot = (int)(cache_next++ % CACHE_SLOTS);
    cache[slot].key = key;
    cache[slot].tuning = c->tuning;
    memcpy(cache[slot].fit, c->algo.fit, sizeof(cache[slot].fit));
    pthread_mutex_unlock(&cache_mu);
}

/* Every rank found this shape's measurements: take them, agreed (the maximum over ranks of
 * every number, so that every rank holds the same even if their processes measured in
 * different communicators). */
static rcoll_status_t reuse(rcoll_comm_t c, const probe_cache_t *e)
{
    enum { NT = 5, NF = 1 + 2 * RCOLL_ALGO_PROBE_POINTS };
    double v[NT + NF * RCOLL_ALG_COUNT];
    v[0] = e->tuning.shm.alpha_us, v[1] = e->tuning.shm.beta_us_per_b;
    v[2] = e->tuning.net.alpha_us, v[3] = e->tuning.net.beta_us_per_b;
    v[4] = e->tuning.gamma_us_per_b;
    for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
        double *f = v + NT + NF * a;
        f[0] = e->fit[a].npoints;
        for (int k = 0; k < RCOLL_ALGO_PROBE_POINTS; k++)
            f[1 + k] = k < e->fit[a].npoints ? e->fit[a].bytes[k] : 0,
            f[1 + RCOLL_ALGO_PROBE_POINTS + k] = k < e->fit[a].npoints ? e->fit[a].us[k] : 0;
    }
    rcoll_status_t st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, v, v, sizeof(v) / sizeof(v[0]),
                                       RCOLL_FLOAT64, RCOLL_MAX, 0);
    if (st != RCOLL_OK) return rcoll_err_set(st, "tuning probe: %s", c->last_error);
    c->tuning.shm.alpha_us = v[0], c->tuning.shm.beta_us_per_b = v[1];
    c->tuning.net.alpha_us = v[2], c->tuning.net.beta_us_per_b = v[3];
    c->tuning.gamma_us_per_b = v[4];
    for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
        const double *f = v + NT + NF * a;
        rcoll_algo_fit_t *fit = &c->algo.fit[a];
        fit->npoints = (int)f[0];
        for (int k = 0; k < RCOLL_ALGO_PROBE_POINTS; k++)
            fit->bytes[k] = f[1 + k], fit->us[k] = f[1 + RCOLL_ALGO_PROBE_POINTS + k];
    }
    rcoll_algo_choose_reset(&c->algo);
    RCOLL_INFO(INIT, "tuning probe: this process's measurements of the same shape reused "
               "(RCOLL_TUNING_REUSE=0 measures every time)");
    return RCOLL_OK;
}

static rcoll_status_t measure(rcoll_comm_t c);

rcoll_status_t rcoll_comm_probe(rcoll_comm_t c)
{
    if (c->nranks < 2) return RCOLL_OK;
    /* Settings may differ between ranks: probe only if every rank wants to, so that all run
     * the same collectives; reuse only if every rank has the measurements. */
    uint64_t key = shape_key(c);
    probe_cache_t e;
    memset(&e, 0, sizeof(e));
    /* A large communicator takes the built-in constants: the probe's ring over every rank
     * grows with the size (11 s of a 14 s creation at 256 ranks on two cores), and what it
     * measures, one link's costs, a small one measures as well (docs/scale.md). */
    int big = c->nranks > c->cfg.tuning_probe_max;
    int32_t want[2] = {c->cfg.tuning_probe && !c->cfg.tuning_file[0] && !big &&
                           c->algo.forced == RCOLL_ALG_AUTO,
                       c->cfg.tuning_reuse && cache_find(key, &e)};
    /* The agreement runs on the tree, whose links creation made: no other connection.  Not
     * where RCOLL_ALGO forces an algorithm: there it runs on that one, so that ranks forcing
     * different ones fail at creation, naming both (test_misuse). */
    c->probe_alg = c->algo.forced == RCOLL_ALG_AUTO ? RCOLL_ALG_TREE : -1;
    rcoll_status_t st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, want, want, 2, RCOLL_INT32,
                                       RCOLL_MIN, 0);
    c->probe_alg = -1;
    if (st != RCOLL_OK) return rcoll_err_set(st, "tuning probe: %s", c->last_error);
    if (big && c->cfg.tuning_probe && !c->cfg.tuning_file[0] && c->rank == 0)
        RCOLL_INFO(INIT, "tuning probe skipped: %d ranks, above RCOLL_TUNING_PROBE_MAX=%d (the "
                   "built-in constants apply)", c->nranks, c->cfg.tuning_probe_max);
    if (!want[0]) return RCOLL_OK;
    if (want[1]) return reuse(c, &e);
    st = measure(c);
    if (st == RCOLL_OK) cache_put(key, c);
    return st;
}

/* The probe itself (every rank wants it). */
static rcoll_status_t measure(rcoll_comm_t c)
{
    rcoll_status_t st;
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
    if (st == RCOLL_OK && big) st = time_allreduce(c, RCOLL_ALG_RING, buf, big, BIG_REPS, &t_big);
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
    /* big is still set only for a slow link (above) */
    st = fit_algorithms(c, big ? PROBE_BYTES : SIZE_MAX);
    if (st != RCOLL_OK) return rcoll_err_set(st, "tuning probe: %s", c->last_error);
    rcoll_algo_choose_reset(&c->algo); /* choose afresh with the measured constants */
    char extra[48] = "";
    if (big) snprintf(extra, sizeof(extra), ", 2 MiB ring %.1f us", t_big);
    RCOLL_INFO(INIT, "tuning probe (%s): alpha %.3f us, beta %.2f GB/s, reduction %.2f GB/s "
               "(8 B doubling %.2f us, 256 KiB ring %.1f us%s)", c->all_shm ? "shm" : "net",
               m[0], 1e-3 / m[2], 1e-3 / m[1], t_rd, t_ring, extra);
    return RCOLL_OK;
}

int rcoll_comm_allreduce_choice(rcoll_comm_t c, size_t bytes)
{
    if (!c || c->nranks < 2) return -1;
    return (int)rcoll_algo_choose(&c->algo, bytes);
}

int rcoll_comm_algo_choice(rcoll_comm_t c, int coll, size_t bytes)
{
    if (!c || c->nranks < 2 || coll < 0 || coll >= RCOLL_COLL_COUNT) return -1;
    return rcoll_algo_choose_coll(&c->algo, (rcoll_coll_t)coll, bytes);
}
