/*
 * allgather_bruck.c - all-gather in ceil(log2 n) rounds for any number of ranks (Bruck et
 * al.): before round k a rank holds the m = 2^k blocks r, r+1, ..., r+m-1 (mod n); it sends
 * them to rank r - 2^k and receives blocks r + 2^k ... from rank r + 2^k, so that it then
 * holds 2^(k+1); the last round moves only the n - 2^k blocks still missing.  Straight into
 * the output, blocks at their ranks' places (a run of blocks that wraps past the last rank
 * is two pieces), in pieces of the executor's chunk, sends leading receives by two pieces.
 *
 *   n = 6:  round 0  r -> r-1   1 block      r holds r, r+1
 *           round 1  r -> r-2   2 blocks     r holds r .. r+3
 *           round 2  r -> r-4   2 blocks     r holds all 6
 *
 *   bruck   sum over rounds k of P_k alpha + (n - 1) B beta   P_k = ceil(m_k B / C) pieces,
 *           m_k = min(2^k, n - 2^k)
 *
 * Own schedule (RCOLL_SCHED_OWN): s->own[0] = rounds.  Not chosen by default (`calibrated`,
 * as rd: no probe measures all-gathers yet); RCOLL_ALGO_ALLGATHER=bruck asks for it.  The
 * log-step all-gather of the projection model (algo/project.c, "pat") for any rank count.
 */
#include <math.h>

#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"

static int ceil_log2(int n)
{
    int l = 0;
    while ((1 << l) < n) l++;
    return l;
}

/* Blocks moved in round k. */
static int round_blocks(int n, int k)
{
    int d = 1 << k;
    return d < n - d ? d : n - d;
}

/* The m blocks from block b (mod n) as element ranges: [b, min(b+m, n)) and the wrapped
 * [0, b+m-n), with their piece counts. */
typedef struct {
    size_t start[2], len[2];
    uint64_t pieces[2];
} span_t;

static span_t span_of(const rcoll_sched_t *s, int b, int m)
{
    int n = s->nranks, end1 = b + m < n ? b + m : n;
    span_t sp;
    sp.start[0] = (size_t)b * s->count;
    sp.len[0] = (size_t)(end1 - b) * s->count;
    sp.start[1] = 0;
    sp.len[1] = b + m > n ? (size_t)(b + m - n) * s->count : 0;
    for (int i = 0; i < 2; i++) sp.pieces[i] = (sp.len[i] + s->chunk - 1) / s->chunk;
    return sp;
}

/* Offset and length of piece i of a span. */
static void piece_of(const rcoll_sched_t *s, const span_t *sp, uint64_t i, size_t *off,
                     size_t *len)
{
    int seg = i < sp->pieces[0] ? 0 : 1;
    if (seg) i -= sp->pieces[0];
    size_t at = (size_t)i * s->chunk, left = sp->len[seg] - at;
    *off = sp->start[seg] + at;
    *len = left < s->chunk ? left : s->chunk;
}

typedef struct {
    int send_peer, recv_peer;
    span_t send, recv;
} round_t;

static round_t round_of(const rcoll_sched_t *s, int k)
{
    int n = s->nranks, r = s->rank, d = 1 << k, m = round_blocks(n, k);
    return (round_t){.send_peer = (r - d + n) % n, .recv_peer = (r + d) % n,
                     .send = span_of(s, r, m), .recv = span_of(s, (r + d) % n, m)};
}

static void bruck_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int rounds = (int)s->own[0], round = 0;
    round_t rd = round_of(s, 0);
    uint64_t ps = rd.send.pieces[0] + rd.send.pieces[1];
    uint64_t pr = rd.recv.pieces[0] + rd.recv.pieces[1];
    while (round < rounds - 1 && k >= ps + pr) {
        k -= ps + pr;
        rd = round_of(s, ++round);
        ps = rd.send.pieces[0] + rd.send.pieces[1];
        pr = rd.recv.pieces[0] + rd.recv.pieces[1];
    }
    /* sends lead by two pieces, then receive and send alternate, then what is left */
    uint64_t lead = ps < 2 ? ps : 2, both = pr < ps - lead ? pr : ps - lead, i;
    int is_send;
    if (k < lead) {
        is_send = 1, i = k;
    } else if (k - lead < 2 * both) {
        is_send = (k - lead) % 2 == 1;
        i = (k - lead) / 2 + (is_send ? lead : 0);
    } else if (pr > both) {
        is_send = 0, i = both + (k - lead - 2 * both);
    } else {
        is_send = 1, i = lead + both + (k - lead - 2 * both);
    }
    size_t off, len;
    piece_of(s, is_send ? &rd.send : &rd.recv, i, &off, &len);
    st->count = len;
    st->has_send = is_send;
    st->has_recv = !is_send;
    st->send_peer = rd.send_peer;
    st->recv_peer = rd.recv_peer;
    st->off = st->doff = off;
    st->act = is_send ? RCOLL_ACT_NONE : RCOLL_ACT_DIRECT;
    st->send_buf = RCOLL_BUF_DST;
    st->red_buf = RCOLL_BUF_DST;
    st->wait_send_step = -1;
}

static void bruck_sched(rcoll_sched_t *s, int nranks, int rank, size_t count, size_t chunk)
{
    *s = (rcoll_sched_t){.kind = RCOLL_SCHED_OWN, .step_fn = bruck_step, .nranks = nranks,
                         .rank = rank, .count = count, .chunk = chunk ? chunk : 1};
    int rounds = nranks > 1 ? ceil_log2(nranks) : 0;
    s->own[0] = (uint64_t)rounds;
    s->nloops = count && rounds > 0 ? 1 : 0;
    s->nsteps = 0;
    for (int k = 0; s->nloops && k < rounds; k++) {
        round_t rd = round_of(s, k);
        s->nsteps += rd.send.pieces[0] + rd.send.pieces[1] + rd.recv.pieces[0] +
                     rd.recv.pieces[1];
    }
}

static double bruck_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_path_cost_t *p = rcoll_algo_flat_path(ctx);
    int n = ctx->nranks;
    if (n <= 1) return 0;
    double B = (double)bytes / n, C = ctx->chunk_bytes ? (double)ctx->chunk_bytes : B, t = 0;
    for (int k = 0; k < ceil_log2(n); k++) {
        double span = B * round_blocks(n, k);
        double P = C > 0 && span > C ? (double)(size_t)((span + C - 1) / C) : 1;
        t += P * p->alpha_us + span * p->beta_us_per_b;
    }
    return t;
}

static void bruck_schedule(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                           rcoll_sched_t *s)
{
    bruck_sched(s, ctx->nranks, ctx->rank, op->count, rcoll_algo_chunk_elems(ctx, op->dt));
}

static void bruck_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_sched_t s;
    int n = ctx->nranks, r = ctx->rank;
    bruck_schedule(ctx, op, &s);
    rcoll_algo_sched_start(op, &s, ctx->link, NULL);
    op->nwant = 0;
    for (int k = 0; k < (int)s.own[0] && op->nwant + 2 <= RCOLL_ALGO_MAX_WANT; k++) {
        int to = (r - (1 << k) + n) % n, from = (r + (1 << k)) % n;
        if (to == from) {
            op->want[op->nwant++] = (rcoll_algo_want_t){to, 1, 1};
        } else {
            op->want[op->nwant++] = (rcoll_algo_want_t){to, 1, 0};
            op->want[op->nwant++] = (rcoll_algo_want_t){from, 0, 1};
        }
    }
}

const rcoll_algo_ops_t rcoll_allgather_bruck = {
    .predict = bruck_predict,
    .start = bruck_start,
    .progress = rcoll_algo_sched_progress,
    .schedule = bruck_schedule,
    .calibrated = 1,
};
