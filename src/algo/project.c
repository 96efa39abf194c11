/*
 * project.c - the projection model of algo/project.h: alpha-beta times of all-reduce,
 * all-gather and reduce-scatter on a described cluster, per algorithm family, and the
 * choice.  Pure functions of the description; it must not measure, communicate or log.
 *
 * Notation: n GPUs, g per node, N = n/g nodes, k rails (NICs per node), S bytes (nccl-tests'
 * size), B_l NVLink bandwidth of a GPU, B_n payload bandwidth of one NIC, R reduction speed,
 * a_l = overhead + NVLink latency, a_n(L) = overhead + NIC latency + (2L+1) switch latencies
 * for a message that climbs to level L of the fat tree (0: within a leaf).  Bandwidths are
 * per direction; a phase's time is its latency terms plus its bytes over its slowest link.
 *
 *   ring (one ring of n, k channels; AR: f = 2(n-1)/n, 2(n-1) steps; AG/RS: f = (n-1)/n,
 *         n-1 steps)        steps a_n(Lmax) + f S max(1/(k B_n), (g-1)/g / B_l) [+ red]
 *                           (one node: steps a_l + f S / B_l)
 *   tree (AR; chain in the node, double binary tree over the nodes, depth D = floor log2 N)
 *                           2 (D a_n(Lmax) + (g-1) a_l) + S max(c/(k B_n), 2(g-1)/g / B_l)
 *                           + S/R, c = 2 (1 for N = 2: no node has two children)
 *   hier-ring (AR)          2(g-1) a_l + 2(g-1)/g S/B_l  +  2(N-1) a_n + 2(N-1)/N S/(k B_n)
 *             (AG, RS)      (g-1) a_l + (g-1)/g S/B_l    +  (N-1) a_n + (N-1)/N S/(k B_n)
 *   hier-tree (AR)          2(g-1) a_l + 2(g-1)/g S/B_l  +  2 D a_n + c S/(k B_n)
 *   pat (AG, RS)            NVLink phase as hier  +  sum over s = ceil(log2 N) steps j of
 *                           a_n(L_j) + c_j S/N o(L_j) / (k B_n),  c_j = min(2^j, N - 2^j)
 *                           blocks at distance d_j = 2^(s-1-j) nodes (the large steps near)
 *       (AR)                reduce-scatter then all-gather: twice the above
 *   red (AR, RS)            (g-1)/g S/R + (N-1)/N S/(g R) (ring: (n-1)/n S/R); 0 if R = 0
 *
 * o(L) is the product of the oversubscription ratios below level L: in a log-step exchange
 * at a distance of a leaf or more every node of a leaf sends up at once, so each gets
 * 1/o of its NIC.  Rings and trees cross a leaf's uplinks with one or two flows per rail
 * (nodes numbered leaf by leaf), so oversubscription does not slow them.  The NVLink and
 * network phases of hier-* and pat run one after the other (as algo/hier.c does: their byte
 * terms add), or, with `pipelined`, overlap chunk by chunk (the larger byte term counts).
 */
#include <math.h>
#include <string.h>

#include "algo/project.h"
#include "util/status.h"

static const char *const alg_names[RCOLL_PROJ_ALG_COUNT] = {
    [RCOLL_PROJ_RING] = "ring",           [RCOLL_PROJ_TREE] = "tree",
    [RCOLL_PROJ_HIER_RING] = "hier-ring", [RCOLL_PROJ_HIER_TREE] = "hier-tree",
    [RCOLL_PROJ_PAT] = "pat",
};
static const char *const coll_names[RCOLL_PROJ_COLL_COUNT] = {
    [RCOLL_PROJ_ALLREDUCE] = "all-reduce",
    [RCOLL_PROJ_ALLGATHER] = "all-gather",
    [RCOLL_PROJ_REDUCE_SCATTER] = "reduce-scatter",
};

const char *rcoll_proj_alg_name(rcoll_proj_alg_t a)
{
    return a >= 0 && a < RCOLL_PROJ_ALG_COUNT ? alg_names[a] : "?";
}

const char *rcoll_proj_coll_name(rcoll_proj_coll_t c)
{
    return c >= 0 && c < RCOLL_PROJ_COLL_COUNT ? coll_names[c] : "?";
}

void rcoll_cluster_h100(rcoll_cluster_t *c)
{
    *c = (rcoll_cluster_t){
        .gpus_per_node = 8,
        .nvlink_gbs = 450.0,
        .nvlink_lat_us = 1.0,
        .nics_per_node = 8,
        .nic_gbit = 400.0,
        .nic_eff = 4096.0 / (4096.0 + 26.0), /* IB: LRH 8, BTH 12, ICRC 4, VCRC 2 bytes */
        .nic_lat_us = 2.0,
        .levels = 2,
        .nodes_per_leaf = 32,
        .leaves_per_pod = 64,
        .oversub = {1.0, 1.0},
        .switch_lat_us = 0.15,
        .overhead_us = 2.0,
        .reduce_gbs = 0.0,
    };
}

void rcoll_cluster_netns(rcoll_cluster_t *c, double link_gbit, double latency_us,
                         double reduce_gbs)
{
    *c = (rcoll_cluster_t){
        .gpus_per_node = 1,
        .nvlink_gbs = 1.0, /* unused: one rank per host */
        .nvlink_lat_us = 0.0,
        .nics_per_node = 1,
        .nic_gbit = link_gbit,
        .nic_eff = 1448.0 / 1538.0, /* TCP payload per Ethernet frame on the wire */
        .nic_lat_us = latency_us,
        .levels = 1,
        .nodes_per_leaf = 1 << 20, /* the bridge has as many ports as hosts */
        .leaves_per_pod = 1,
        .oversub = {1.0, 1.0},
        .switch_lat_us = 0.0,
        .overhead_us = 0.0,
        .reduce_gbs = reduce_gbs,
    };
}

static int positive(double x) { return x > 0 && isfinite(x); }
static int nonneg(double x) { return x >= 0 && isfinite(x); }

rcoll_status_t rcoll_cluster_check(const rcoll_cluster_t *c, long ngpus)
{
    const rcoll_status_t bad = RCOLL_ERR_INVALID_ARG;
    if (ngpus < 1) return rcoll_err_set(bad, "the GPU count must be at least 1, not %ld", ngpus);
    if (c->gpus_per_node < 1)
        return rcoll_err_set(bad, "GPUs per node must be at least 1, not %d", c->gpus_per_node);
    if (ngpus % c->gpus_per_node)
        return rcoll_err_set(bad, "%ld GPUs is not a multiple of the node size (%d GPUs per "
                             "node)", ngpus, c->gpus_per_node);
    if (c->gpus_per_node > 1 && !positive(c->nvlink_gbs))
        return rcoll_err_set(bad, "NVLink bandwidth must be a positive number of GB/s, not %g",
                             c->nvlink_gbs);
    if (c->nics_per_node < 1)
        return rcoll_err_set(bad, "NICs per node must be at least 1, not %d", c->nics_per_node);
    if (!positive(c->nic_gbit))
        return rcoll_err_set(bad, "NIC bandwidth must be a positive number of Gbit/s, not %g",
                             c->nic_gbit);
    if (!(c->nic_eff > 0 && c->nic_eff <= 1))
        return rcoll_err_set(bad, "NIC efficiency must be in (0, 1], not %g", c->nic_eff);
    if (!nonneg(c->nvlink_lat_us) || !nonneg(c->nic_lat_us) || !nonneg(c->switch_lat_us) ||
        !nonneg(c->overhead_us))
        return rcoll_err_set(bad, "latencies and the overhead must be >= 0 microseconds");
    if (!nonneg(c->reduce_gbs))
        return rcoll_err_set(bad, "reduction speed must be >= 0 GB/s (0: free), not %g",
                             c->reduce_gbs);
    if (c->levels < 1 || c->levels > RCOLL_PROJ_MAX_LEVELS)
        return rcoll_err_set(bad, "the fat tree must have 1, 2 or 3 levels, not %d", c->levels);
    if (c->nodes_per_leaf < 1 || c->leaves_per_pod < 1)
        return rcoll_err_set(bad, "nodes per leaf and leaves per pod must be at least 1");
    for (int l = 0; l < c->levels - 1; l++)
        if (!(c->oversub[l] >= 1) || !isfinite(c->oversub[l]))
            return rcoll_err_set(bad, "oversubscription of level %d must be >= 1 (1 = "
                                 "non-blocking), not %g", l + 1, c->oversub[l]);
    long nodes = ngpus / c->gpus_per_node;
    long cap = c->levels == 1 ? c->nodes_per_leaf
             : c->levels == 2 ? (long)c->nodes_per_leaf * c->leaves_per_pod : -1;
    if (cap > 0 && nodes > cap)
        return rcoll_err_set(bad, "%ld nodes do not fit a %d-level fat tree of %ld nodes "
                             "(nodes per leaf %d, leaves per pod %d): add a level", nodes,
                             c->levels, cap, c->nodes_per_leaf, c->leaves_per_pod);
    return RCOLL_OK;
}

/* Fat-tree level a message climbs to between nodes d apart (aligned groups). */
static int level_of(const rcoll_cluster_t *c, long d)
{
    if (c->levels >= 3 && d >= (long)c->nodes_per_leaf * c->leaves_per_pod) return 2;
    if (c->levels >= 2 && d >= c->nodes_per_leaf) return 1;
    return 0;
}

static double a_net(const rcoll_cluster_t *c, int level)
{
    return c->overhead_us + c->nic_lat_us + (2 * level + 1) * c->switch_lat_us;
}

static double a_nvl(const rcoll_cluster_t *c) { return c->overhead_us + c->nvlink_lat_us; }

/* Bytes per microsecond. */
static double bw_nvl(const rcoll_cluster_t *c) { return c->nvlink_gbs * 1e3; }
static double bw_node(const rcoll_cluster_t *c)
{
    return c->nics_per_node * c->nic_gbit / 8.0 * c->nic_eff * 1e3;
}

static double slowdown(const rcoll_cluster_t *c, int level)
{
    double o = 1;
    for (int l = 0; l < level; l++) o *= c->oversub[l];
    return o;
}

/* Microseconds to reduce x bytes (0 when reductions are free). */
static double red(const rcoll_cluster_t *c, double x)
{
    return c->reduce_gbs > 0 ? x / (c->reduce_gbs * 1e3) : 0;
}

static int floor_log2(long x)
{
    int l = 0;
    while (x > 1) x >>= 1, l++;
    return l;
}

static int ceil_log2(long x)
{
    int l = 0;
    while ((1L << l) < x) l++;
    return l;
}

/* One log-step all-gather or reduce-scatter of S bytes across N nodes (every rail at once):
 * its latency terms in *lat, the time of its bytes returned. */
static double logstep(const rcoll_cluster_t *c, long N, double S, double *lat)
{
    int s = ceil_log2(N);
    double t = 0;
    *lat = 0;
    for (int j = 0; j < s; j++) {
        long blocks = (1L << j) < N - (1L << j) ? (1L << j) : N - (1L << j);
        int L = level_of(c, 1L << (s - 1 - j));
        *lat += a_net(c, L);
        t += blocks * S / N * slowdown(c, L) / bw_node(c);
    }
    return t;
}

/* The byte terms of two phases: in sequence, or overlapped chunk by chunk. */
static double phases(const rcoll_cluster_t *c, double a, double b)
{
    return c->pipelined ? (a > b ? a : b) : a + b;
}

double rcoll_project_time(const rcoll_cluster_t *c, rcoll_proj_coll_t coll,
                          rcoll_proj_alg_t alg, long ngpus, double S)
{
    long g = c->gpus_per_node, N = ngpus / g, n = ngpus;
    int ar = coll == RCOLL_PROJ_ALLREDUCE, reduces = coll != RCOLL_PROJ_ALLGATHER;
    if (alg < 0 || alg >= RCOLL_PROJ_ALG_COUNT || coll < 0 || coll >= RCOLL_PROJ_COLL_COUNT)
        return HUGE_VAL;
    if ((alg == RCOLL_PROJ_TREE || alg == RCOLL_PROJ_HIER_TREE) && !ar) return HUGE_VAL;
    if ((alg == RCOLL_PROJ_HIER_RING || alg == RCOLL_PROJ_HIER_TREE) && (N < 2 || g < 2))
        return HUGE_VAL;
    if (alg == RCOLL_PROJ_PAT && N < 2) return HUGE_VAL;
    if (n <= 1) return 0;

    double an = a_net(c, level_of(c, N - 1)), al = a_nvl(c), Bl = bw_nvl(c), Bk = bw_node(c);
    double gf = (double)(g - 1) / g;  /* share of a node's phase that crosses NVLink */
    double red_hier = reduces ? red(c, gf * S) + red(c, (double)(N - 1) / N * S / g) : 0;
    int D = floor_log2(N);
    double cfac = N == 2 ? 1 : 2;     /* tree: bytes a node sends, in S */
    switch (alg) {
    case RCOLL_PROJ_RING: {
        double f = (ar ? 2.0 : 1.0) * (n - 1) / n, steps = (ar ? 2.0 : 1.0) * (n - 1);
        double r = reduces ? red(c, (double)(n - 1) / n * S) : 0;
        if (N == 1) return steps * al + f * S / Bl + r;
        double t = f * S / Bk, tl = g > 1 ? f * S * gf / Bl : 0;
        return steps * an + (t > tl ? t : tl) + r;
    }
    case RCOLL_PROJ_TREE: {
        double t = N > 1 ? cfac * S / Bk : 0, tl = g > 1 ? 2 * gf * S / Bl : 0;
        return 2 * (D * an + (g - 1) * al) + (t > tl ? t : tl) + red(c, S);
    }
    case RCOLL_PROJ_HIER_RING: {
        double m = ar ? 2 : 1;
        return m * (g - 1) * al + m * (N - 1) * an +
               phases(c, m * gf * S / Bl, m * (double)(N - 1) / N * S / Bk) + red_hier;
    }
    case RCOLL_PROJ_HIER_TREE:
        return 2 * (g - 1) * al + 2 * D * an + phases(c, 2 * gf * S / Bl, cfac * S / Bk) +
               red_hier;
    case RCOLL_PROJ_PAT: {
        double m = ar ? 2 : 1, lat, bytes = logstep(c, N, S, &lat);
        return m * ((g - 1) * al + lat) + phases(c, m * gf * S / Bl, m * bytes) + red_hier;
    }
    default:
        return HUGE_VAL;
    }
}

rcoll_proj_alg_t rcoll_project_choose(const rcoll_cluster_t *c, rcoll_proj_coll_t coll,
                                      long ngpus, double bytes, double *us)
{
    rcoll_proj_alg_t best = RCOLL_PROJ_RING;
    double best_t = HUGE_VAL;
    for (int a = 0; a < RCOLL_PROJ_ALG_COUNT; a++) {
        double t = rcoll_project_time(c, coll, (rcoll_proj_alg_t)a, ngpus, bytes);
        if (t < best_t) best_t = t, best = (rcoll_proj_alg_t)a;
    }
    if (us) *us = best_t;
    return best;
}

double rcoll_project_algbw(double bytes, double us)
{
    return us > 0 && isfinite(us) ? bytes / us / 1e3 : 0;
}

double rcoll_project_busbw(rcoll_proj_coll_t coll, long ngpus, double bytes, double us)
{
    double f = (double)(ngpus - 1) / ngpus;
    if (ngpus < 1) return 0;
    return rcoll_project_algbw(bytes, us) * (coll == RCOLL_PROJ_ALLREDUCE ? 2 * f : f);
}
