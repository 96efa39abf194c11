/*
 * flat.c - the all-reduces that are one schedule (sched.c, where the pictures are) run by the
 * executor (exec.c) on ring positions: ring, recursive doubling and double binary tree; and
 * the runner of a schedule as an operation that hier.c and core's other collectives use.
 * Moves no bytes itself and never blocks.  Models (n ranks, S bytes, path alpha/beta as
 * rcoll_algo_flat_shm says, reduction gamma, p = largest power of two <= n, L = log2 p,
 * D = floor(log2 n)):
 *
 *   ring      2(n-1) alpha + 2(n-1)/n S beta + (n-1)/n S gamma           2(n-1) steps/loop
 *   doubling  (L + 2f) alpha + (L + 2f) S beta + (L + f) S gamma    f = 1 if n != p
 *   tree      2 D alpha + 2 S beta + S gamma   (each rank sends and receives about S up and
 *             S down; the two phases are not overlapped)
 */
#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"
#include "algo/tree.h"
#include "util/log.h"

_Static_assert(sizeof(rcoll_exec_t) <= RCOLL_ALGO_STATE_BYTES, "executor state too big");

void rcoll_algo_sched_start(rcoll_algo_op_t *op, const rcoll_sched_t *s,
                            const rcoll_link_t *link, const int *pmap)
{
    rcoll_exec_t *e = rcoll_algo_exec(op);
    rcoll_exec_init(e, s, link, op->src, op->dst, op->dt, op->op, op->tag);
    rcoll_exec_set_map(e, pmap);
    RCOLL_TRACE(ALGO, "op tag %d count %zu: schedule %d, %llu steps, chunk %zu elements",
                op->tag, op->count, (int)s->kind, (unsigned long long)s->nsteps, s->chunk);
}

rcoll_status_t rcoll_algo_sched_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                         int *progressed)
{
    (void)ctx;
    rcoll_exec_t *e = rcoll_algo_exec(op);
    rcoll_status_t st = rcoll_exec_progress(e, progressed);
    op->waiting_peer = e->waiting_peer;
    op->waiting_recv = e->waiting_recv;
    op->err_peer = e->err_peer;
    return st;
}

static const rcoll_path_cost_t *flat_path(const rcoll_algo_ctx_t *ctx)
{
    return rcoll_algo_flat_shm(ctx) ? &ctx->tuning->shm : &ctx->tuning->net;
}

static double ring_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *c = flat_path(ctx);
    double S = (double)bytes, N = ctx->nranks, g = ctx->tuning->gamma_us_per_b;
    if (ctx->nranks <= 1) return 0;
    return 2 * (N - 1) * c->alpha_us + 2 * (N - 1) / N * S * c->beta_us_per_b +
           (N - 1) / N * S * g;
}

static double rd_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *c = flat_path(ctx);
    double S = (double)bytes, g = ctx->tuning->gamma_us_per_b;
    if (ctx->nranks <= 1) return 0;
    int p = 1, L = 0;
    while (p * 2 <= ctx->nranks) p *= 2, L++;
    int f = p != ctx->nranks;
    return (L + 2 * f) * c->alpha_us + (L + 2 * f) * S * c->beta_us_per_b + (L + f) * S * g;
}

static double tree_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *c = flat_path(ctx);
    double S = (double)bytes;
    if (ctx->nranks <= 1) return 0;
    return 2 * rcoll_dbtree_depth(ctx->nranks) * c->alpha_us + 2 * S * c->beta_us_per_b +
           S * ctx->tuning->gamma_us_per_b;
}

/* Elements per pipeline chunk of algorithm a: the model's (rcoll_select_chunk, with the
 * configured constants) unless RCOLL_CHUNK_SIZE fixed it. */
static size_t flat_chunk(const rcoll_algo_ctx_t *ctx, rcoll_allreduce_alg_t a,
                         const rcoll_algo_op_t *op)
{
    size_t esize = rcoll_dt_size(op->dt);
    const rcoll_tuning_t *t = ctx->chunk_tuning ? ctx->chunk_tuning : ctx->tuning;
    size_t bytes = ctx->chunk_fixed ? ctx->chunk_bytes
                                    : rcoll_select_chunk(t, a, ctx->nranks, op->count * esize,
                                                         ctx->all_shm, ctx->chunk_bytes);
    return bytes / esize;
}

static void ring_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                          rcoll_sched_t *s)
{
    rcoll_sched_ring_allreduce(s, ctx->nranks, ctx->ring_pos, op->count, flat_chunk(ctx, RCOLL_ALG_RING, op));
}

static void ring_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    ring_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, ctx->ring_map);
}

static void rd_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                          rcoll_sched_t *s)
{
    rcoll_sched_rd_allreduce(s, ctx->nranks, ctx->ring_pos, op->count, flat_chunk(ctx, RCOLL_ALG_RD, op));
}

static void rd_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    rd_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, ctx->ring_map);
    /* Its doubling partners (log2 p of them) are connected on its first use, not at
     * creation: a communicator's set-up connections stay a constant few (docs/scale.md). */
    int partners[RCOLL_ALGO_MAX_WANT];
    int np = rcoll_sched_rd_partners(ctx->nranks, ctx->ring_pos, partners);
    op->nwant = 0;
    for (int i = 0; i < np && op->nwant < RCOLL_ALGO_MAX_WANT; i++) {
        int peer = ctx->ring_map ? ctx->ring_map[partners[i]] : partners[i];
        op->want[op->nwant++] = (rcoll_algo_want_t){.peer = peer, .send = 1, .recv = 1};
    }
}

static void tree_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                          rcoll_sched_t *s)
{
    rcoll_sched_dbtree_allreduce(s, ctx->nranks, ctx->ring_pos, op->count, flat_chunk(ctx, RCOLL_ALG_TREE, op));
}

static void tree_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    tree_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, ctx->ring_map);
}

const rcoll_algo_ops_t rcoll_algo_ring = {
    .predict = ring_predict,
    .start = ring_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = ring_schedule,
};

const rcoll_algo_ops_t rcoll_algo_rd = {
    .predict = rd_predict,
    .start = rd_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = rd_schedule,
};

const rcoll_algo_ops_t rcoll_algo_tree = {
    .predict = tree_predict,
    .start = tree_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = tree_schedule,
};

/* Not in the table: progresses a schedule the caller started (core's other collectives). */
const rcoll_algo_ops_t rcoll_algo_sched = {
    .predict = rcoll_algo_stub_predict,
    .start = rcoll_algo_stub_start,
    .progress = rcoll_algo_sched_progress,
};
