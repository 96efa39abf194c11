/*
 * select.c - cost model for the all-reduce algorithms (n ranks, S bytes, path alpha/beta,
 * reduction gamma; p = largest power of two <= n, L = log2 p):
 *
 *   ring      2(n-1) alpha + 2(n-1)/n S beta + (n-1)/n S gamma
 *   doubling  (L + 2f) alpha + (L + 2f) S beta + (L + f) S gamma      f = 1 if n != p
 *   tree      2 D alpha + 2 S beta + S gamma         D = floor(log2 n), double binary tree
 *             (each rank sends and receives about S up and S down; phases not overlapped)
 *   one-shot  alpha/2 + (n-1) S beta + (n-1) S gamma                  host segment only
 *             (one publish and one wait instead of a message each way)
 *   two-shot  2 alpha + (2n-1)/n S beta/2 + (n-1)/n S gamma           host segment only
 *             (a transfer through the shm transport is two copies, in and out; two-shot
 *             copies each byte once per stage: in, out of its owner's result)
 *
 * Pipelining is not modelled in the times (only in the choice of chunk, rcoll_select_chunk);
 * the constants are measured at creation (core/probe.c), fitted defaults otherwise
 * (docs/benchmarks.md), and RCOLL_TUNING_FILE replaces them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/oneshot.h"
#include "algo/select.h"
#include "util/status.h"

/* floor(log2 n): the depth of the double binary tree. */
static int tree_depth(int n)
{
    int d = 0;
    while ((2 << d) <= n) d++;
    return d;
}

const char *const rcoll_alg_names[RCOLL_ALG_COUNT] = {"ring", "rd", "oneshot", "tree", "twoshot",
                                                      "hier"};

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

double rcoll_select_predict(const rcoll_tuning_t *t, rcoll_allreduce_alg_t a, int n,
                            size_t bytes, int shm, int hostseg)
{
    const rcoll_path_cost_t *c = shm ? &t->shm : &t->net;
    double S = (double)bytes, N = (double)n, g = t->gamma_us_per_b;
    if (n <= 1) return 0;
    switch (a) {
    case RCOLL_ALG_RING:
        return 2 * (N - 1) * c->alpha_us + 2 * (N - 1) / N * S * c->beta_us_per_b +
               (N - 1) / N * S * g;
    case RCOLL_ALG_RD: {
        int p = 1, L = 0;
        while (p * 2 <= n) p *= 2, L++;
        int f = p != n;
        return (L + 2 * f) * c->alpha_us + (L + 2 * f) * S * c->beta_us_per_b + (L + f) * S * g;
    }
    case RCOLL_ALG_TREE:
        return 2 * tree_depth(n) * c->alpha_us + 2 * S * c->beta_us_per_b + S * g;
    case RCOLL_ALG_ONESHOT:
        if (!shm || !hostseg || bytes > RCOLL_ONESHOT_MAX_BYTES) return HUGE_VAL;
        return 0.5 * c->alpha_us + (N - 1) * S * (c->beta_us_per_b + g);
    case RCOLL_ALG_TWOSHOT:
        if (!shm || !hostseg) return HUGE_VAL;
        return 2 * c->alpha_us + (2 * N - 1) / N * S * c->beta_us_per_b / 2 + (N - 1) / N * S * g;
    default:
        return HUGE_VAL;
    }
}

double rcoll_select_predict_hier(const rcoll_tuning_t *t, int nhosts, int ppn, size_t bytes)
{
    if (nhosts < 2 || ppn < 2) return HUGE_VAL;
    double S = (double)bytes, K = (double)ppn, H = (double)nhosts, g = t->gamma_us_per_b;
    const rcoll_path_cost_t *s = &t->shm, *n = &t->net;
    return 2 * (K - 1) * s->alpha_us + 2 * (K - 1) / K * S * s->beta_us_per_b +
           (K - 1) / K * S * g + 2 * (H - 1) * n->alpha_us + 2 * (H - 1) / H * S * n->beta_us_per_b +
           (H - 1) / (H * K) * S * g;
}

rcoll_allreduce_alg_t rcoll_select_allreduce_hosts(const rcoll_tuning_t *t, int nhosts, int ppn,
                                                   size_t bytes, double *predicted_us)
{
    double flat_t;
    rcoll_allreduce_alg_t a = rcoll_select_allreduce(t, nhosts * ppn, bytes, 0, 0, &flat_t);
    double h = rcoll_select_predict_hier(t, nhosts, ppn, bytes);
    if (h < flat_t) a = RCOLL_ALG_HIER, flat_t = h;
    if (predicted_us) *predicted_us = flat_t;
    return a;
}

rcoll_allreduce_alg_t rcoll_select_allreduce(const rcoll_tuning_t *t, int n, size_t bytes,
                                             int shm, int hostseg, double *predicted_us)
{
    rcoll_allreduce_alg_t best = RCOLL_ALG_RING;
    double best_t = HUGE_VAL;
    for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
        double x = rcoll_select_predict(t, (rcoll_allreduce_alg_t)a, n, bytes, shm, hostseg);
        if (x < best_t) {
            best_t = x;
            best = (rcoll_allreduce_alg_t)a;
        }
    }
    if (predicted_us) *predicted_us = best_t;
    return best;
}

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
        depth = 2.0 * tree_depth(n);
        lane = (double)bytes / 2;
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
