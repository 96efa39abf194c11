/*
 * select.c - the table of all-reduce algorithms (built from RCOLL_ALGO_LIST), RCOLL_ALGO's
 * names, and the choice: the alpha-beta-gamma cost model (n ranks, S bytes, path alpha/beta,
 * reduction gamma; each algorithm's predict holds its formula, next to its code):
 *
 *   ring      2(n-1) alpha + 2(n-1)/n S beta + (n-1)/n S gamma                  flat.c
 *   doubling  (L + 2f) alpha + (L + 2f) S beta + (L + f) S gamma                 flat.c
 *   tree      2 D alpha + 2 S beta + S gamma                                    flat.c
 *   one-shot  alpha/2 + (n-1) S beta + (n-1) S gamma       host segment only    oneshot.c
 *   two-shot  2 alpha + (2n-1)/n S beta/2 + (n-1)/n S gamma  host segment only  twoshot.c
 *   cma       3 alpha + 0.93 x two-shot's byte terms, from 4 MiB (measured)     cma.c
 *             host segment and cross-memory attach between every pair of ranks
 *   hier      ring phases on the hosts and across them    several hosts         hier.c
 *
 * The cheapest applicable one runs unless RCOLL_ALGO forces one that applies.  Pipelining is
 * not modelled in the times (only in the choice of chunk, rcoll_select_chunk); the constants
 * are measured at creation (core/probe.c), fitted defaults otherwise (docs/benchmarks.md),
 * and RCOLL_TUNING_FILE replaces them.  Logs the choice; moves no data.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "algo/select.h"
#include "algo/tree.h"
#include "util/log.h"
#include "util/status.h"

#define ALGO_ENTRY(id, name) [RCOLL_ALG_##id] = &rcoll_algo_##name,
#define ALGO_NAME(id, name) [RCOLL_ALG_##id] = #name,
const rcoll_algo_ops_t *const rcoll_algos[RCOLL_ALG_COUNT] = {RCOLL_ALGO_LIST(ALGO_ENTRY)};
const char *const rcoll_alg_names[RCOLL_ALG_COUNT] = {RCOLL_ALGO_LIST(ALGO_NAME)};

#define BCAST_ENTRY(id, name) [RCOLL_BCAST_ALG_##id] = &rcoll_bcast_##name,
#define BCAST_NAME(id, name) [RCOLL_BCAST_ALG_##id] = #name,
#define ALLGATHER_ENTRY(id, name) [RCOLL_ALLGATHER_ALG_##id] = &rcoll_allgather_##name,
#define ALLGATHER_NAME(id, name) [RCOLL_ALLGATHER_ALG_##id] = #name,
static const rcoll_algo_ops_t *const bcast_ops[] = {RCOLL_BCAST_ALGO_LIST(BCAST_ENTRY)};
static const char *const bcast_names[] = {RCOLL_BCAST_ALGO_LIST(BCAST_NAME)};
static const rcoll_algo_ops_t *const allgather_ops[] = {RCOLL_ALLGATHER_ALGO_LIST(ALLGATHER_ENTRY)};
static const char *const allgather_names[] = {RCOLL_ALLGATHER_ALGO_LIST(ALLGATHER_NAME)};
const rcoll_algo_table_t rcoll_algo_tables[RCOLL_COLL_COUNT] = {
    [RCOLL_COLL_ALLREDUCE] = {"all-reduce", "RCOLL_ALGO", RCOLL_ALG_COUNT, rcoll_algos,
                              rcoll_alg_names},
    [RCOLL_COLL_BCAST] = {"broadcast", "RCOLL_ALGO_BCAST", RCOLL_BCAST_ALG_COUNT, bcast_ops,
                          bcast_names},
    [RCOLL_COLL_ALLGATHER] = {"all-gather", "RCOLL_ALGO_ALLGATHER", RCOLL_ALLGATHER_ALG_COUNT,
                              allgather_ops, allgather_names},
};

/* The knobs' values: "auto", then the table's names in table order, from the same lists. */
#define ALGO_KNOB_NAME(id, name) #name,
static const char *const algo_knob_names[] = {"auto", RCOLL_ALGO_LIST(ALGO_KNOB_NAME) NULL};
static const char *const bcast_knob_names[] = {"auto", RCOLL_BCAST_ALGO_LIST(ALGO_KNOB_NAME)
                                               NULL};
static const char *const allgather_knob_names[] = {
    "auto", RCOLL_ALLGATHER_ALGO_LIST(ALGO_KNOB_NAME) NULL};
static const rcoll_knob_t algo_knobs[] = {
    RCOLL_KNOB_ENUM_OF(rcoll_algo_config_t, "RCOLL_ALGO", "auto", algo, algo_knob_names,
                       "all-reduce algorithm: auto (the cost model chooses) or one of the "
                       "table's (docs/design.md): ring, rd (recursive doubling), oneshot (host "
                       "segment, up to 16 KiB), tree (double binary tree), twoshot (host "
                       "segment: reduce-scatter + all-gather through shared memory), cma (two-shot "
                       "reading the peers' buffers directly: host segment and cross-memory "
                       "attach, RCOLL_CMA), hier "
                       "(several hosts with equal ranks); one that does not apply here leaves "
                       "the choice to the cost model"),
    RCOLL_KNOB_ENUM_OF(rcoll_algo_config_t, "RCOLL_ALGO_BCAST", "auto", bcast, bcast_knob_names,
                       "broadcast algorithm: auto (the cost model chooses), chain (pipelined "
                       "along the ring) or binomial (a binomial tree from the root)"),
    RCOLL_KNOB_ENUM_OF(rcoll_algo_config_t, "RCOLL_ALGO_ALLGATHER", "auto", allgather,
                       allgather_knob_names,
                       "all-gather algorithm: auto (the cost model chooses), ring, rd "
                       "(recursive doubling, power-of-two rank counts; elsewhere the model "
                       "chooses) or bruck (ceil(log2 n) rounds, any rank count)"),
};
const rcoll_config_table_t rcoll_algo_config_table =
    RCOLL_CONFIG_TABLE("algo", algo_knobs, rcoll_algo_config_t);

double rcoll_algo_stub_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    (void)ctx, (void)bytes;
    return HUGE_VAL;
}

void rcoll_algo_stub_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op) { (void)ctx, (void)op; }

rcoll_status_t rcoll_algo_stub_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                        int *progressed)
{
    (void)ctx, (void)op;
    *progressed = 0;
    return RCOLL_OK;
}

int rcoll_algo_forced_coll(const rcoll_algo_config_t *cfg, rcoll_coll_t c)
{
    switch (c) {
    case RCOLL_COLL_ALLREDUCE: return cfg->algo - 1;
    case RCOLL_COLL_BCAST: return cfg->bcast - 1;
    case RCOLL_COLL_ALLGATHER: return cfg->allgather - 1;
    default: return -1;
    }
}

size_t rcoll_algo_chunk_elems(const rcoll_algo_ctx_t *ctx, rcoll_datatype_t dt)
{
    size_t esize = rcoll_dt_size(dt);
    return esize && ctx->chunk_bytes >= esize ? ctx->chunk_bytes / esize : 1;
}

const rcoll_path_cost_t *rcoll_algo_flat_path(const rcoll_algo_ctx_t *ctx)
{
    return rcoll_algo_flat_shm(ctx) ? &ctx->tuning->shm : &ctx->tuning->net;
}

/* The INFO line of choice a for `bytes` of collective c, once per power-of-two size class and
 * again when the class's choice changes (logged: the class's last logged choice + 1), so that a
 * program alternating two sizes does not log every call; with every applicable algorithm's
 * prediction (an "m" after one: the probe's measured curve, not the formula). */
static void log_choice(const rcoll_algo_ctx_t *ctx, uint8_t logged[64], rcoll_coll_t c,
                       size_t bytes, int a, int forced, double pred)
{
    int cls = 0;
    while (cls < 63 && ((size_t)1 << (cls + 1)) <= bytes) cls++;
    if (logged[cls] == (uint8_t)(a + 1)) return;
    logged[cls] = (uint8_t)(a + 1);
    const rcoll_algo_table_t *tb = &rcoll_algo_tables[c];
    int ar = c == RCOLL_COLL_ALLREDUCE;
    char others[256];
    size_t len = 0;
    others[0] = '\0';
    for (int k = 0; k < tb->count && len < sizeof(others); k++) {
        double x = ar ? rcoll_algo_predict(ctx, (rcoll_allreduce_alg_t)k, bytes)
                      : tb->ops[k]->predict(ctx, bytes);
        if (isinf(x)) continue;
        len += (size_t)snprintf(others + len, sizeof(others) - len, "%s%s %.2f%s",
                                len ? ", " : "", tb->names[k], x,
                                ar && ctx->fit[k].npoints ? "m" : "");
    }
    RCOLL_INFO(ALGO, "%s of %zu B on %d ranks: %s (%s%s%.2f us predicted; %s)", tb->coll, bytes,
               ctx->nranks, tb->names[a], forced ? tb->knob : "", forced ? "; " : "", pred,
               others);
}

int rcoll_algo_choose_coll(rcoll_algo_ctx_t *ctx, rcoll_coll_t c, size_t bytes)
{
    if (c == RCOLL_COLL_ALLREDUCE) return (int)rcoll_algo_choose(ctx, bytes);
    const rcoll_algo_table_t *tb = &rcoll_algo_tables[c];
    rcoll_algo_memo_t *m = &ctx->memo[c];
    if (m->last_alg > 0 && bytes == m->last_bytes) return m->last_alg - 1;
    int a = ctx->forced_coll[c], forced = a >= 0 && a < tb->count;
    if (forced && isinf(tb->ops[a]->predict(ctx, bytes))) forced = 0;
    double best_t = HUGE_VAL;
    if (!forced) {
        a = 0;
        for (int k = 0; k < tb->count; k++) {
            /* no probe measures these collectives yet: an algorithm that must be measured
             * is not chosen by default */
            double x = tb->ops[k]->calibrated ? HUGE_VAL : tb->ops[k]->predict(ctx, bytes);
            if (x < best_t) best_t = x, a = k;
        }
    }
    m->last_alg = a + 1;
    m->last_bytes = bytes;
    log_choice(ctx, m->logged, c, bytes, a, forced, tb->ops[a]->predict(ctx, bytes));
    return a;
}

const char *rcoll_algo_name(rcoll_allreduce_alg_t a)
{
    return a >= 0 && a < RCOLL_ALG_COUNT ? rcoll_alg_names[a] : "auto";
}

double rcoll_algo_fit_eval(const rcoll_algo_fit_t *f, size_t bytes)
{
    double S = (double)bytes;
    int n = f->npoints;
    if (n == 1 || S <= f->bytes[0]) return f->us[0];
    int k = 1;
    while (k < n - 1 && S > f->bytes[k]) k++;
    double slope = (f->us[k] - f->us[k - 1]) / (f->bytes[k] - f->bytes[k - 1]);
    return f->us[k - 1] + slope * (S - f->bytes[k - 1]);
}

double rcoll_algo_predict(const rcoll_algo_ctx_t *ctx, rcoll_allreduce_alg_t a, size_t bytes)
{
    double x = rcoll_algos[a]->predict(ctx, bytes);
    if (isinf(x)) return x;
    const rcoll_algo_fit_t *f = &ctx->fit[a];
    /* one point (the probe stopped there): above it, the formula's shape through it */
    if (f->npoints == 1 && (double)bytes > f->bytes[0]) {
        double x0 = rcoll_algos[a]->predict(ctx, (size_t)f->bytes[0]);
        if (x0 > 0 && isfinite(x0)) return f->us[0] * x / x0;
    }
    if (f->npoints) {
        /* Above the last point, an algorithm whose cost is the path's (it names no probe
         * sizes of its own: the constants describe it) costs no less a byte than its formula
         * says with the measured constants: the last segment's slope was measured where
         * latency still counts, and the bytes must still cross the path (recursive doubling
         * over TCP, 4 ranks: 0.77 us a KiB from 32 KiB to 1 MiB, 2.5 us a KiB above; its
         * formula gives ~3).  The others' formulas are not that exact (two-shot's over
         * shared memory is 2x its measured slope). */
        double y = rcoll_algo_fit_eval(f, bytes);
        double last = f->bytes[f->npoints - 1];
        if ((double)bytes > last && !rcoll_algos[a]->probe_bytes[0]) {
            double xl = rcoll_algos[a]->predict(ctx, (size_t)last);
            if (isfinite(xl) && x > xl && f->us[f->npoints - 1] + (x - xl) > y)
                y = f->us[f->npoints - 1] + (x - xl);
        }
        return y;
    }
    return rcoll_algos[a]->calibrated ? HUGE_VAL : x;
}

rcoll_allreduce_alg_t rcoll_algo_model(const rcoll_algo_ctx_t *ctx, size_t bytes,
                                       double *predicted_us)
{
    rcoll_allreduce_alg_t best = RCOLL_ALG_RING;
    double best_t = HUGE_VAL;
    for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
        double x = rcoll_algo_predict(ctx, (rcoll_allreduce_alg_t)a, bytes);
        if (x < best_t) {
            best_t = x;
            best = (rcoll_allreduce_alg_t)a;
        }
    }
    if (predicted_us) *predicted_us = best_t;
    return best;
}

rcoll_allreduce_alg_t rcoll_algo_choose(rcoll_algo_ctx_t *ctx, size_t bytes)
{
    if (ctx->last_alg >= 0 && bytes == ctx->last_bytes)
        return (rcoll_allreduce_alg_t)ctx->last_alg; /* the common case: same size again */
    ctx->last_bytes = bytes;
    rcoll_allreduce_alg_t a = ctx->forced;
    double pred = 0;
    /* A forced algorithm that does not apply here (a host-segment algorithm without the
     * segment, hier on one host) falls back to the model. */
    if (a != RCOLL_ALG_AUTO && isinf(rcoll_algos[a]->predict(ctx, bytes))) a = RCOLL_ALG_AUTO;
    if (a == RCOLL_ALG_AUTO) a = rcoll_algo_model(ctx, bytes, &pred);
    ctx->last_alg = (int)a;
    log_choice(ctx, ctx->logged, RCOLL_COLL_ALLREDUCE, bytes, (int)a,
               ctx->forced != RCOLL_ALG_AUTO, pred ? pred : rcoll_algos[a]->predict(ctx, bytes));
    return a;
}

void rcoll_algo_choose_reset(rcoll_algo_ctx_t *ctx)
{
    ctx->last_alg = -1;
    memset(ctx->logged, 0, sizeof(ctx->logged));
    memset(ctx->memo, 0, sizeof(ctx->memo));
}

void rcoll_tuning_defaults(rcoll_tuning_t *t)
{
    t->shm = (rcoll_path_cost_t){.alpha_us = 0.4, .beta_us_per_b = 1.0 / 20e3};
    t->net = (rcoll_path_cost_t){.alpha_us = 8.0, .beta_us_per_b = 1.0 / 3e3};
    /* Effective per-byte reduction cost: the kernels run at memory speed (~40 GB/s) and
     * overlap with transfers, so much of it is hidden. */
    t->gamma_us_per_b = 1.0 / 60e3;
}

rcoll_status_t rcoll_tuning_parse(const char *text, rcoll_tuning_t *out)
{
    rcoll_tuning_t t = *out;
    int lineno = 0;
    const char *p = text;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[256];
        lineno++;
        if (len >= sizeof(line))
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tuning line %d is too long", lineno);
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : NULL;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char key[64];
        double v;
        char extra;
        if (sscanf(line, " %63[a-z_] = %lf %c", key, &v, &extra) != 2) {
            int blank = 1;
            for (char *c = line; *c; c++)
                if (*c != ' ' && *c != '\t' && *c != '\r') blank = 0;
            if (blank) continue;
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tuning line %d: expected 'key = "
                                 "number', got '%s'", lineno, line);
        }
        if (!(v > 0) || !isfinite(v))
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tuning line %d: %s must be a "
                                 "positive number", lineno, key);
        if (!strcmp(key, "shm_alpha_us")) t.shm.alpha_us = v;
        else if (!strcmp(key, "shm_beta_gbps")) t.shm.beta_us_per_b = 1.0 / (v * 1e3);
        else if (!strcmp(key, "net_alpha_us")) t.net.alpha_us = v;
        else if (!strcmp(key, "net_beta_gbps")) t.net.beta_us_per_b = 1.0 / (v * 1e3);
        else if (!strcmp(key, "reduce_gbps")) t.gamma_us_per_b = 1.0 / (v * 1e3);
        else
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tuning line %d: unknown key '%s' "
                                 "(shm_alpha_us, shm_beta_gbps, net_alpha_us, net_beta_gbps, "
                                 "reduce_gbps)", lineno, key);
    }
    *out = t;
    return RCOLL_OK;
}

/* A context with only what the model reads: n ranks without a host layout, or nhosts x ppn. */
static rcoll_algo_ctx_t model_ctx(const rcoll_tuning_t *t, int n, int nhosts, int ppn, int shm,
                                  int hostseg)
{
    return (rcoll_algo_ctx_t){.nranks = n, .nhosts = nhosts, .ppn = ppn, .all_shm = shm,
                              .has_hostseg = hostseg, .tuning = t, .forced = RCOLL_ALG_AUTO,
                              .last_alg = -1};
}

double rcoll_select_predict(const rcoll_tuning_t *t, rcoll_allreduce_alg_t a, int n,
                            size_t bytes, int shm, int hostseg)
{
    if (a < 0 || a >= RCOLL_ALG_COUNT) return HUGE_VAL;
    rcoll_algo_ctx_t c = model_ctx(t, n, 1, n, shm, hostseg);
    return rcoll_algos[a]->predict(&c, bytes);
}

rcoll_allreduce_alg_t rcoll_select_allreduce(const rcoll_tuning_t *t, int n, size_t bytes,
                                             int shm, int hostseg, double *predicted_us)
{
    rcoll_algo_ctx_t c = model_ctx(t, n, 1, n, shm, hostseg);
    return rcoll_algo_model(&c, bytes, predicted_us);
}

double rcoll_select_predict_hier(const rcoll_tuning_t *t, int nhosts, int ppn, size_t bytes)
{
    rcoll_algo_ctx_t c = model_ctx(t, nhosts * ppn, nhosts, ppn, 0, 0);
    return rcoll_algos[RCOLL_ALG_HIER]->predict(&c, bytes);
}

rcoll_allreduce_alg_t rcoll_select_allreduce_hosts(const rcoll_tuning_t *t, int nhosts, int ppn,
                                                   size_t bytes, double *predicted_us)
{
    rcoll_algo_ctx_t c = model_ctx(t, nhosts * ppn, nhosts, ppn, 0, 0);
    return rcoll_algo_model(&c, bytes, predicted_us);
}

/* Recursive doubling over a network: chunks of at most this.  Each exchange sends two chunks
 * ahead of its receives on both partners; with the 1 MiB slot that kept 2 MiB in each
 * socket, the kernel grew the connections' buffers, and from then on every doubling call on
 * them ran slower: over TCP on this VM a 256 KiB all-reduce on 2 ranks went from 80 to
 * 103-135 us after a few 2 MiB ones, 8 MiB ones took 3.4 ms against the ring's 2.6.  With
 * 256 KiB chunks neither happens (80 us before and after; 8 MiB 2.7 ms). */
#define RD_NET_CHUNK ((size_t)256 << 10)

size_t rcoll_select_chunk(const rcoll_tuning_t *t, rcoll_allreduce_alg_t a, int n, size_t bytes,
                          int shm, size_t max_chunk)
{
    const rcoll_path_cost_t *c = shm ? &t->shm : &t->net;
    double depth, lane;
    if (n < 2) return max_chunk;
    if (a == RCOLL_ALG_RING) {
        depth = 2.0 * (n - 1);
        lane = (double)bytes / n;
    } else if (a == RCOLL_ALG_TREE) {
        depth = 2.0 * rcoll_dbtree_depth(n);
        lane = (double)bytes / 2;
    } else if (a == RCOLL_ALG_RD && !shm) {
        return max_chunk < RD_NET_CHUNK ? max_chunk : RD_NET_CHUNK;
    } else {
        return max_chunk;
    }
    double per_b = c->beta_us_per_b + t->gamma_us_per_b;
    double best = sqrt(lane * c->alpha_us / ((depth - 1) * per_b));
    if (!(best < (double)max_chunk)) return max_chunk;
    /* The optimum rounded to 64 bytes: whichever neighbour the formula prefers. */
    size_t down = (size_t)best & ~(size_t)63, up = down + 64;
    double t_down = (depth + lane / (double)down - 1) * (c->alpha_us + (double)down * per_b);
    double t_up = (depth + lane / (double)up - 1) * (c->alpha_us + (double)up * per_b);
    size_t chunk = down == 0 || (t_up < t_down && up <= max_chunk) ? up : down;
    size_t lo = max_chunk < 4096 ? max_chunk : 4096;
    return chunk < lo ? lo : chunk;
}
