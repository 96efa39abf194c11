/*
 * allgather_rd.c - all-gather by recursive doubling, for a power-of-two number of ranks: in
 * round k each rank exchanges the 2^k blocks it holds (those of ranks r & ~(2^k - 1) up) with
 * rank r ^ 2^k, straight into the output, in pieces of the executor's chunk, its sends
 * leading its receives by two pieces (as the doubling all-reduce does).  log2 n rounds
 * instead of the ring's n - 1 steps; the same bytes.
 *
 *   rd   sum over rounds k of P_k alpha + (n - 1) B beta   P_k = ceil(2^k B / C) pieces
 *
 * Own schedule (RCOLL_SCHED_OWN): s->own[0] = log2 n (a step's round is found by walking the
 * rounds: few).  Does not apply to other rank counts.
 *
 * Not chosen by default (`calibrated`): on the development VM, 4 ranks over shared memory, it
 * beat the ring below 4 KiB (11.6 vs 15-17 us) but lost at 2 MiB (443 vs 266 us), which its
 * formula does not see; until the set-up probe measures all-gathers, RCOLL_ALGO_ALLGATHER=rd
 * asks for it.
 */
#include <math.h>

#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"

static int log2_exact(int n)
{
    int l = 0;
    while ((1 << l) < n) l++;
    return (1 << l) == n ? l : -1;
}

/* Pieces in round k: 2^k blocks of count elements in chunks. */
static uint64_t pieces(const rcoll_sched_t *s, int k)
{
    uint64_t elems = ((uint64_t)1 << k) * s->count;
    return (elems + s->chunk - 1) / s->chunk;
}

static void rd_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int rounds = (int)s->own[0], r = s->rank, round = 0;
    uint64_t m = pieces(s, 0);
    while (round < rounds - 1 && k >= 2 * m) k -= 2 * m, m = pieces(s, ++round);
    int partner = r ^ (1 << round);
    uint64_t lead = m < 2 ? m : 2, i;
    int is_send;
    if (k < lead) {
        is_send = 1, i = k;
    } else if (k - lead < 2 * (m - lead)) {
        is_send = (k - lead) % 2 == 1;
        i = (k - lead) / 2 + (is_send ? lead : 0);
    } else {
        is_send = 0, i = (m - lead) + (k - lead - 2 * (m - lead));
    }
    /* the range a rank holds before this round starts at its rank with the low bits clear */
    size_t span = ((size_t)1 << round) * s->count;
    size_t mine = (size_t)(r & ~((1 << round) - 1)) * s->count;
    size_t theirs = (size_t)(partner & ~((1 << round) - 1)) * s->count;
    size_t off = (size_t)i * s->chunk, left = span - off;
    st->count = left < s->chunk ? left : s->chunk;
    st->has_send = is_send;
    st->has_recv = !is_send;
    st->send_peer = st->recv_peer = partner;
    st->off = st->doff = (is_send ? mine : theirs) + off;
    st->act = is_send ? RCOLL_ACT_NONE : RCOLL_ACT_DIRECT;
    st->send_buf = RCOLL_BUF_DST;
    st->red_buf = RCOLL_BUF_DST;
    st->wait_send_step = -1;
}

static void rd_sched(rcoll_sched_t *s, int nranks, int rank, size_t count, size_t chunk)
{
    *s = (rcoll_sched_t){.kind = RCOLL_SCHED_OWN, .step_fn = rd_step, .nranks = nranks,
                         .rank = rank, .count = count, .chunk = chunk ? chunk : 1};
    int rounds = log2_exact(nranks);
    s->own[0] = rounds > 0 ? (uint64_t)rounds : 0;
    s->nloops = count && rounds > 0 ? 1 : 0;
    s->nsteps = 0;
    for (int k = 0; s->nloops && k < rounds; k++) s->nsteps += 2 * pieces(s, k);
}

static double rd_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *p = rcoll_algo_flat_path(ctx);
    int n = ctx->nranks, rounds = log2_exact(n);
    if (n <= 1) return 0;
    if (rounds < 0) return HUGE_VAL;
    double B = (double)bytes / n, C = ctx->chunk_bytes ? (double)ctx->chunk_bytes : B, t = 0;
    for (int k = 0; k < rounds; k++) {
        double span = B * (double)(1 << k);
        double P = C > 0 && span > C ? (double)(size_t)((span + C - 1) / C) : 1;
        t += P * p->alpha_us + span * p->beta_us_per_b;
    }
    return t;
}

static void rd_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op, rcoll_sched_t *s)
{
    rd_sched(s, ctx->nranks, ctx->rank, op->count, rcoll_algo_chunk_elems(ctx, op->dt));
}

static void rd_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    rd_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, NULL);
    op->nwant = 0;
    for (int k = 0; k < (int)s.own[0] && op->nwant < RCOLL_ALGO_MAX_WANT; k++)
        op->want[op->nwant++] = (rcoll_algo_want_t){ctx->rank ^ (1 << k), 1, 1};
}

const rcoll_algo_ops_t rcoll_allgather_rd = {
    .predict = rd_predict,
    .start = rd_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = rd_schedule,
    .calibrated = 1,
};
