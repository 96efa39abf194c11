/*
 * bcast_chain.c - broadcast along the ring from the root, pipelined per chunk (the schedule:
 * sched.c, rcoll_sched_chain_bcast): each rank receives a chunk from its ring predecessor
 * straight into the buffer and forwards it to its successor; the chain's last rank sends the
 * root an empty closing message, so every rank receives in every call.
 *
 *   chain   (n - 2 + L)(alpha + C beta)      L = ceil(S / C) chunks of C bytes
 *
 * Bandwidth-optimal for large vectors (the root sends each byte once); n - 1 hops of latency.
 */
#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"

static double chain_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *p = rcoll_algo_flat_path(ctx);
    if (ctx->nranks <= 1) return 0;
    double S = (double)bytes, C = ctx->chunk_bytes ? (double)ctx->chunk_bytes : S;
    if (C > S) C = S;
    double L = C > 0 ? (double)(size_t)((S + C - 1) / C) : 1;
    return (ctx->nranks - 2 + L) * (p->alpha_us + C * p->beta_us_per_b);
}

static void chain_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                           rcoll_sched_t *s)
{
    rcoll_sched_chain_bcast(s, ctx->nranks, ctx->ring_pos, op->root, op->count,
                            rcoll_algo_chunk_elems(ctx, op->dt));
}

static void chain_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    chain_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, ctx->ring_map);
}

const rcoll_algo_ops_t rcoll_bcast_chain = {
    .predict = chain_predict,
    .start = chain_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = chain_schedule,
};
