/*
 * bcast_binomial.c - broadcast down a binomial tree rooted at the root (ring positions,
 * relative to the root: v = (pos - root) mod n), pipelined per chunk.  Rank v > 0 receives
 * from its parent v - hibit(v); every rank sends each chunk to its children v + 2^k (2^k > v,
 * v + 2^k < n), the largest subtree first.  Rank n - 1 (a leaf) sends the root an empty
 * closing message first, which the root receives last: every rank receives in every call,
 * as in the chain (docs/design.md, "Every rank receives in every call").
 *
 *   binomial   (L D + D - 1)(alpha + C beta)    D = ceil(log2 n) rounds, L chunks of C bytes
 *
 * ceil(log2 n) hops of latency instead of the chain's n - 1, but the root sends every byte D
 * times: small vectors on many ranks.
 *
 * The schedule is this file's own (RCOLL_SCHED_OWN): s->own[0] = v, [1] = the number of
 * children, [2] = steps per chunk, [3] = 1 when this rank has a closing step.
 */
#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"

static int hibit(int v)
{
    int h = 1;
    while (h * 2 <= v) h *= 2;
    return h;
}

/* Child j (0 = the largest subtree) of v among n, or -1. */
static int child(int v, int n, int j)
{
    int lo = v ? 2 * hibit(v) : 1, t = 1;
    while (v + t * 2 < n && t * 2 > 0) t *= 2;
    for (; t >= lo && v + t < n; t /= 2, j--)
        if (j == 0) return v + t;
    return -1;
}

static int nchildren(int v, int n)
{
    int c = 0;
    while (child(v, n, c) >= 0) c++;
    return c;
}

static void closing(const rcoll_sched_t *s, int peer_v, int send, rcoll_step_t *st)
{
    int n = s->nranks;
    st->has_recv = !send;
    st->has_send = send;
    st->recv_peer = st->send_peer = (peer_v + s->root) % n;
    st->act = RCOLL_ACT_NONE;
    st->red_buf = RCOLL_BUF_SRC;
    st->send_buf = RCOLL_BUF_SRC;
    st->wait_send_step = -1;
    st->off = st->doff = 0;
    st->count = 0;
}

static void binomial_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks, v = (int)s->own[0];
    uint64_t spl = s->own[2], data_steps = s->nloops * spl;
    if (s->own[3]) { /* the closing message: rank n - 1 first, the root last */
        if (v != 0 && k == 0) {
            closing(s, 0, 1, st);
            return;
        }
        if (v != 0) k--;
        else if (k == data_steps) {
            closing(s, n - 1, 0, st);
            return;
        }
    }
    uint64_t loop = k / spl;
    int j = (int)(k % spl);
    st->off = (size_t)(loop * s->chunk);
    size_t left = s->count - st->off;
    st->count = left < s->chunk ? left : s->chunk;
    st->has_recv = v > 0 && j == 0;
    st->recv_peer = ((v - hibit(v)) + s->root) % n;
    st->act = st->has_recv ? RCOLL_ACT_DIRECT : RCOLL_ACT_NONE;
    int c = j < (int)s->own[1] ? child(v, n, j) : -1;
    st->has_send = c >= 0;
    st->send_peer = c >= 0 ? (c + s->root) % n : 0;
    st->send_buf = RCOLL_BUF_DST;
    st->red_buf = RCOLL_BUF_SRC;
    st->wait_send_step = -1;
}

static void binomial_sched(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                           size_t chunk_elems)
{
    *s = (rcoll_sched_t){.kind = RCOLL_SCHED_OWN, .step_fn = binomial_step, .nranks = nranks,
                         .rank = rank, .root = root, .count = count};
    s->chunk = chunk_elems ? chunk_elems : 1;
    s->nloops = (count && nranks > 1) ? (count + s->chunk - 1) / s->chunk : 0;
    int v = ((rank - root) % nranks + nranks) % nranks;
    int nc = nchildren(v, nranks);
    s->own[0] = (uint64_t)v;
    s->own[1] = (uint64_t)nc;
    s->own[2] = (uint64_t)(nc > 1 ? nc : 1);
    s->own[3] = s->nloops && (v == 0 || v == nranks - 1);
    s->steps_per_loop = (uint32_t)s->own[2];
    s->nsteps = s->nloops * s->own[2] + s->own[3];
}

static double binomial_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *p = rcoll_algo_flat_path(ctx);
    int n = ctx->nranks, D = 0;
    if (n <= 1) return 0;
    while ((1 << D) < n) D++;
    double S = (double)bytes, C = ctx->chunk_bytes ? (double)ctx->chunk_bytes : S;
    if (C > S) C = S;
    double L = C > 0 ? (double)(size_t)((S + C - 1) / C) : 1;
    return (L * D + D - 1) * (p->alpha_us + C * p->beta_us_per_b);
}

static void binomial_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                              rcoll_sched_t *s)
{
    binomial_sched(s, ctx->nranks, ctx->ring_pos, op->root, op->count,
                   rcoll_algo_chunk_elems(ctx, op->dt));
}

static void binomial_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    int n = ctx->nranks;
    binomial_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, ctx->ring_map);
    /* its links: parent, children, and the closing pair (ring positions -> ranks) */
    int v = (int)s.own[0];
#define RANK_OF(vv) (ctx->ring_map ? ctx->ring_map[((vv) + op->root) % n] : ((vv) + op->root) % n)
    op->nwant = 0;
    if (v > 0)
        op->want[op->nwant++] = (rcoll_algo_want_t){RANK_OF(v - hibit(v)), 0, 1};
    for (int j = 0; j < (int)s.own[1] && op->nwant < RCOLL_ALGO_MAX_WANT - 1; j++)
        op->want[op->nwant++] = (rcoll_algo_want_t){RANK_OF(child(v, n, j)), 1, 0};
    if (s.own[3])
        op->want[op->nwant++] = (rcoll_algo_want_t){RANK_OF(v ? 0 : n - 1), v != 0, v == 0};
#undef RANK_OF
}

const rcoll_algo_ops_t rcoll_bcast_binomial = {
    .predict = binomial_predict,
    .start = binomial_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = binomial_schedule,
};
