/*
 * allgather_ring.c - all-gather around the ring in rank order (blocks land by rank): n - 1
 * steps per loop, each forwarding the block received in the step before, straight into the
 * output (the schedule: sched.c, rcoll_sched_ring_allgather).
 *
 *   ring   (n - 1) L (alpha + min(B, C) beta)    B = S / n bytes per block, L = ceil(B / C)
 */
#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"

static double ring_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *p = rcoll_algo_flat_path(ctx);
    int n = ctx->nranks;
    if (n <= 1) return 0;
    double B = (double)bytes / n, C = ctx->chunk_bytes ? (double)ctx->chunk_bytes : B;
    if (C > B) C = B;
    double L = C > 0 ? (double)(size_t)((B + C - 1) / C) : 1;
    return (n - 1) * L * (p->alpha_us + C * p->beta_us_per_b);
}

static void ring_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                          rcoll_sched_t *s)
{
    rcoll_sched_ring_allgather(s, ctx->nranks, ctx->rank, op->count,
                               rcoll_algo_chunk_elems(ctx, op->dt));
}

static void ring_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    int n = ctx->nranks;
    ring_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, NULL);
    /* the rank-order ring, where the host-grouped one differs (else those are the ring's
     * links, connected at creation: nothing to ask for on every call) */
    op->nwant = 0;
    if (!ctx->ring_map) return;
    op->want[0] = (rcoll_algo_want_t){(ctx->rank + 1) % n, 1, 0};
    op->want[1] = (rcoll_algo_want_t){(ctx->rank - 1 + n) % n, 0, 1};
    op->nwant = 2;
}

const rcoll_algo_ops_t rcoll_allgather_ring = {
    .predict = ring_predict,
    .start = ring_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = ring_schedule,
};
