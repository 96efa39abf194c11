/*
 * hier.c - hierarchical all-reduce for several hosts with the same number k >= 2 of ranks
 * each: three ring phases over the communicator's connections (schedules on positions in
 * the host's group or the cross-host group, mapped to ranks), one operation for the caller.
 * Knows no transport or core: it reports the connections each phase needs (op->want).
 *
 *   2 hosts x 3 ranks, the vector in k = 3 blocks a b c (A0 = local index 0 on host A):
 *
 *   1 reduce-scatter on each host        A0 A1 A2 ->  A0:a  A1:b  A2:c   (host sums, in dst)
 *   2 all-reduce of block i across       A0:a <-> B0:a   A1:b <-> B1:b   A2:c <-> B2:c
 *     hosts, the k rings in parallel                                     (global sums)
 *   3 all-gather on each host            A0:a A1:b A2:c  ->  every rank a b c
 *   4 the count % k tail elements: a ring all-reduce over every rank (skipped when 0)
 *
 *   2(k-1) + 2(H-1) + (k-1) hops; each host link carries 2(H-1)/H S instead of the flat
 *   ring's 2(n-1)/n S.  Model (s: shared memory, n: network):
 *     2(k-1)a_s + 2(k-1)/k S b_s + (k-1)/k S g + 2(H-1)a_n + 2(H-1)/H S b_n + (H-1)/(Hk) S g
 *   AVG runs as SUM and divides once at the end.
 */
#include <math.h>

#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"

typedef struct {
    rcoll_exec_t exec; /* first: the phases run through rcoll_algo_sched_progress */
    int phase;         /* running (1..4) */
} hier_state_t;

_Static_assert(sizeof(hier_state_t) <= RCOLL_ALGO_STATE_BYTES, "hier state too big");

static hier_state_t *hier_state(rcoll_algo_op_t *op)
{
    return (hier_state_t *)(void *)op->state.bytes;
}

static double hier_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    int nhosts = ctx->nhosts, ppn = ctx->ppn;
    if (nhosts < 2 || ppn < 2) return HUGE_VAL;
    const rcoll_tuning_t *t = ctx->tuning;
    double S = (double)bytes, K = (double)ppn, H = (double)nhosts, g = t->gamma_us_per_b;
    const rcoll_path_cost_t *s = &t->shm, *n = &t->net;
    return 2 * (K - 1) * s->alpha_us + 2 * (K - 1) / K * S * s->beta_us_per_b +
           (K - 1) / K * S * g + 2 * (H - 1) * n->alpha_us +
           2 * (H - 1) / H * S * n->beta_us_per_b + (H - 1) / (H * K) * S * g;
}

/* Start the next phase (skipping an empty tail); 1 when none is left. */
static int hier_next_phase(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    hier_state_t *h = hier_state(op);
    size_t esize = rcoll_dt_size(op->dt);
    int k = ctx->ppn;
    size_t blk = op->count / (size_t)k, main_n = blk * (size_t)k, tail = op->count - main_n;
    size_t chunk = ctx->chunk_bytes / esize;
    char *own = (char *)op->dst + (size_t)ctx->local_idx * blk * esize;
    rcoll_op_t rop = op->op == RCOLL_AVG ? RCOLL_SUM : op->op;
    rcoll_sched_t s;
    const int *map;
    const void *src;
    void *dst;
    int gsize, pos;
    int phase = ++h->phase;
    if (phase == 4 && tail == 0) phase = ++h->phase;
    switch (phase) {
    case 1:
        rcoll_sched_ring_reduce_scatter(&s, k, ctx->local_idx, blk, chunk);
        map = ctx->local_group, src = op->src, dst = own, gsize = k, pos = ctx->local_idx;
        break;
    case 2:
        rcoll_sched_ring_allreduce(&s, ctx->nhosts, ctx->cross_idx, blk, chunk);
        map = ctx->cross_group, src = own, dst = own, gsize = ctx->nhosts, pos = ctx->cross_idx;
        break;
    case 3:
        rcoll_sched_ring_allgather(&s, k, ctx->local_idx, blk, chunk);
        map = ctx->local_group, src = op->dst, dst = op->dst, gsize = k, pos = ctx->local_idx;
        break;
    case 4:
        rcoll_sched_ring_allreduce(&s, ctx->nranks, ctx->ring_pos, tail, chunk);
        map = ctx->ring_map, src = (const char *)op->src + main_n * esize;
        dst = (char *)op->dst + main_n * esize, gsize = ctx->nranks, pos = ctx->ring_pos;
        break;
    default:
        if (op->op == RCOLL_AVG)
            rcoll_reduce_avg_finish(op->dst, op->count, op->dt, ctx->nranks);
        return 1;
    }
    rcoll_exec_init(&h->exec, &s, ctx->link, src, dst, op->dt, rop, op->tag);
    rcoll_exec_set_map(&h->exec, map);
    int next = (pos + 1) % gsize, prev = (pos - 1 + gsize) % gsize;
    op->want[0] = (rcoll_algo_want_t){.peer = map ? map[next] : next, .send = 1};
    op->want[1] = (rcoll_algo_want_t){.peer = map ? map[prev] : prev, .recv = 1};
    op->nwant = 2;
    return 0;
}

static void hier_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    hier_state(op)->phase = 0;
    hier_next_phase(ctx, op);
}

static rcoll_status_t hier_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                    int *progressed)
{
    rcoll_status_t st = rcoll_algo_sched_progress(ctx, op, progressed);
    if (st == RCOLL_OK && !hier_next_phase(ctx, op)) {
        *progressed = 1;
        return RCOLL_INPROGRESS;
    }
    return st;
}

const rcoll_algo_ops_t rcoll_algo_hier = {
    .predict = hier_predict,
    .start = hier_start,
    .progress = hier_progress,
};
