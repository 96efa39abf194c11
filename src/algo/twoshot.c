/*
 * twoshot.c - two-shot all-reduce over a host segment.
 *
 *   area:  [rank 0: control | slot 0 | slot 1 | ... slot K-1][rank 1: ...] ...
 *   control: three counters on their own cache lines: posted, reduced, done - each the
 *            number of (global) rounds this rank has published, reduced, gathered
 *   slot:  [header: call tag | shard 0 | shard 1 | ... | shard n-1]
 *
 *   The vector is cut into rounds of n shards; global round g uses slot g % K.  Rank i, for
 *   each of its rounds:
 *     publish  copy its input shards j != i into its slot's shard j        -> posted = g + 1
 *     reduce   dst shard i = src shard i op (every peer's slot, shard i);
 *              copy the result into its own slot's shard i                  -> reduced = g + 1
 *     gather   copy every peer p's slot shard p into dst shard p            -> done = g + 1
 *   A rank publishes round g only when every rank's done >= g - K + 1, that is when nobody
 *   reads slot g % K any more; it publishes at most one round ahead of its reductions, so
 *   the copies of round g + 1 overlap the peers' work on round g.  Each shard is reduced by
 *   one rank only, so every rank ends with identical bits.  A rank's src shards are read
 *   before its dst shards of the same round are written, so in-place works.
 *
 *   Memory traffic per rank for S bytes: S read from src and S written to dst, plus about
 *   3 (n-1)/n S through the slots, which stay in cache when K slots of every rank fit.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/reduce.h"
#include "algo/select.h"
#include "algo/twoshot.h"
#include "util/status.h"

#define LINE 64
#define CTRL_BYTES (4 * LINE)
enum { C_POSTED = 0, C_REDUCED = 1, C_DONE = 2 };

typedef struct {
    uint64_t tag; /* the call's signature digest (count, datatype, op, number...): a rank that
                   * reads a peer's round checks it first, to catch mismatched calls */
} slot_header_t;

static size_t shard_size(int nranks, size_t slot_bytes)
{
    if (slot_bytes <= LINE) return 0;
    return (slot_bytes - LINE) / (size_t)nranks / LINE * LINE;
}

static size_t slot_stride(int nranks, size_t slot_bytes)
{
    return LINE + (size_t)nranks * shard_size(nranks, slot_bytes);
}

static size_t rank_stride(int nranks, size_t slot_bytes)
{
    return CTRL_BYTES + RCOLL_TWOSHOT_SLOTS * slot_stride(nranks, slot_bytes);
}

size_t rcoll_twoshot_area_size(int nranks, size_t slot_bytes)
{
    if (nranks < 2 || shard_size(nranks, slot_bytes) == 0) return 0;
    return (size_t)nranks * rank_stride(nranks, slot_bytes);
}

void rcoll_twoshot_attach(rcoll_twoshot_t *ts, char *base, int nranks, int rank,
                          size_t slot_bytes)
{
    memset(ts, 0, sizeof(*ts));
    ts->base = base;
    ts->nranks = nranks;
    ts->rank = rank;
    ts->slot_bytes = slot_bytes;
    ts->shard_bytes = shard_size(nranks, slot_bytes);
}

static _Atomic uint64_t *ctr(const rcoll_twoshot_t *ts, int r, int which)
{
    char *p = ts->base + (size_t)r * rank_stride(ts->nranks, ts->slot_bytes) +
              (size_t)which * LINE;
    return (_Atomic uint64_t *)(void *)p;
}

static char *slot(const rcoll_twoshot_t *ts, int r, uint64_t g)
{
    return ts->base + (size_t)r * rank_stride(ts->nranks, ts->slot_bytes) + CTRL_BYTES +
           (size_t)(g % RCOLL_TWOSHOT_SLOTS) * slot_stride(ts->nranks, ts->slot_bytes);
}

static char *shard(const rcoll_twoshot_t *ts, char *s, int j)
{
    return s + LINE + (size_t)j * ts->shard_bytes;
}

static uint64_t load(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_acquire); }
static void store(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_release);
}

void rcoll_twoshot_op_init(rcoll_twoshot_op_t *o, rcoll_twoshot_t *ts, uint64_t tag,
                           const void *src, void *dst, size_t count, rcoll_datatype_t dt,
                           rcoll_op_t op)
{
    memset(o, 0, sizeof(*o));
    o->ts = ts;
    o->tag = tag;
    o->src = src;
    o->dst = dst;
    o->count = count;
    o->dt = dt;
    o->op = op;
    o->esize = rcoll_dt_size(dt);
    /* As few rounds as the slots allow, and the vector cut evenly among the ranks in each:
     * full-size shards would leave a vector shorter than one round's n shards to the first
     * ranks (128 KiB on 2 ranks: one rank reduced all of it, the other 64 bytes). */
    size_t n = (size_t)ts->nranks, cap = ts->shard_bytes / o->esize;
    size_t line = LINE / o->esize ? LINE / o->esize : 1;
    size_t rounds = (count + cap * n - 1) / (cap * n);
    size_t want = rounds ? (count + rounds * n - 1) / (rounds * n) : cap;
    want = (want + line - 1) / line * line; /* whole cache lines per shard */
    o->shard_elems = want < cap ? want : cap;
    size_t per_round = o->shard_elems * n;
    o->nrounds = (count + per_round - 1) / per_round;
    o->g0 = ts->rounds;
    ts->rounds += o->nrounds;
    o->waiting_peer = -1;
}

/* Elements [*first, *first + return) of shard j in round r. */
static size_t shard_range(const rcoll_twoshot_op_t *o, uint64_t r, int j, size_t *first)
{
    size_t start = (size_t)r * o->shard_elems * (size_t)o->ts->nranks + (size_t)j * o->shard_elems;
    *first = start;
    if (start >= o->count) return 0;
    size_t left = o->count - start;
    return left < o->shard_elems ? left : o->shard_elems;
}

static int try_publish(rcoll_twoshot_op_t *o)
{
    const rcoll_twoshot_t *ts = o->ts;
    int n = ts->nranks, me = ts->rank;
    uint64_t g = o->g0 + o->pub;
    if (g >= RCOLL_TWOSHOT_SLOTS)
        for (int p = 0; p < n; p++)
            if (load(ctr(ts, p, C_DONE)) < g - RCOLL_TWOSHOT_SLOTS + 1) {
                o->waiting_peer = p;
                return 0;
            }
    char *s = slot(ts, me, g);
    for (int j = 0; j < n; j++) {
        if (j == me) continue;
        size_t first, cnt = shard_range(o, o->pub, j, &first);
        if (cnt) memcpy(shard(ts, s, j), o->src + first * o->esize, cnt * o->esize);
    }
    slot_header_t *h = (slot_header_t *)(void *)s;
    h->tag = o->tag;
    store(ctr(ts, me, C_POSTED), g + 1);
    o->pub++;
    return 1;
}

static rcoll_status_t try_reduce(rcoll_twoshot_op_t *o, int *moved)
{
    const rcoll_twoshot_t *ts = o->ts;
    int n = ts->nranks, me = ts->rank;
    uint64_t g = o->g0 + o->red;
    for (int p = 0; p < n; p++) {
        if (p == me) continue;
        if (load(ctr(ts, p, C_POSTED)) < g + 1) {
            o->waiting_peer = p;
            return RCOLL_OK;
        }
        const slot_header_t *h = (const slot_header_t *)(const void *)slot(ts, p, g);
        if (h->tag != o->tag) {
            o->waiting_peer = p;
            return rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                 "rank %d published a round of a different call in the "
                                 "two-shot slot", p);
        }
    }
    size_t first, cnt = shard_range(o, o->red, me, &first);
    if (cnt) {
        char *d = o->dst + first * o->esize;
        const char *a = o->src + first * o->esize;
        int k = 0;
        for (int i = 1; i < n; i++) {
            int p = (me + i) % n;
            rcoll_reduce_local(d, a, shard(ts, slot(ts, p, g), me), cnt, o->dt, o->op,
                               ++k == n - 1 ? n : 0);
            a = d;
        }
        memcpy(shard(ts, slot(ts, me, g), me), d, cnt * o->esize);
    }
    store(ctr(ts, me, C_REDUCED), g + 1);
    o->red++;
    *moved = 1;
    return RCOLL_OK;
}

static int try_gather(rcoll_twoshot_op_t *o)
{
    const rcoll_twoshot_t *ts = o->ts;
    int n = ts->nranks, me = ts->rank, moved = 0;
    while (o->gat < o->red) {
        uint64_t g = o->g0 + o->gat;
        while (o->gat_peer < n - 1) {
            int p = (me + 1 + o->gat_peer) % n;
            if (load(ctr(ts, p, C_REDUCED)) < g + 1) {
                o->waiting_peer = p;
                return moved;
            }
            size_t first, cnt = shard_range(o, o->gat, p, &first);
            if (cnt)
                memcpy(o->dst + first * o->esize, shard(ts, slot(ts, p, g), p), cnt * o->esize);
            o->gat_peer++;
            moved = 1;
        }
        store(ctr(ts, me, C_DONE), g + 1);
        o->gat++;
        o->gat_peer = 0;
        moved = 1;
    }
    return moved;
}

rcoll_status_t rcoll_twoshot_progress(rcoll_twoshot_op_t *o, int *progressed)
{
    *progressed = 0;
    for (;;) {
        int moved = try_gather(o);
        if (o->red < o->pub) {
            rcoll_status_t st = try_reduce(o, &moved);
            if (st != RCOLL_OK) return st;
        }
        if (o->pub < o->nrounds && o->pub <= o->red) moved |= try_publish(o);
        if (o->gat == o->nrounds) {
            *progressed = 1;
            return RCOLL_OK;
        }
        if (!moved) return RCOLL_INPROGRESS;
        *progressed = 1;
    }
}

/* The table entry.  Model: 2 alpha + (2n-1)/n S beta/2 + (n-1)/n S gamma on shared memory (a
 * transfer through the shm transport is two copies, in and out; two-shot copies each byte
 * once per stage). */
_Static_assert(sizeof(rcoll_twoshot_op_t) <= RCOLL_ALGO_STATE_BYTES, "two-shot state too big");

static rcoll_twoshot_op_t *twoshot_state(rcoll_algo_op_t *op)
{
    return (rcoll_twoshot_op_t *)(void *)op->state.bytes;
}

static double twoshot_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_tuning_t *t = ctx->tuning;
    double S = (double)bytes, N = ctx->nranks;
    if (ctx->nranks <= 1) return 0;
    if (!rcoll_algo_flat_shm(ctx) || !ctx->has_hostseg) return HUGE_VAL;
    return 2 * t->shm.alpha_us + (2 * N - 1) / N * S * t->shm.beta_us_per_b / 2 +
           (N - 1) / N * S * t->gamma_us_per_b;
}

static void twoshot_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_twoshot_op_init(twoshot_state(op), &ctx->twoshot, (uint64_t)op->tag, op->src, op->dst,
                          op->count, op->dt, op->op);
}

static rcoll_status_t twoshot_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                       int *progressed)
{
    (void)ctx;
    rcoll_twoshot_op_t *o = twoshot_state(op);
    return rcoll_algo_hostseg_report(op, rcoll_twoshot_progress(o, progressed), o->waiting_peer);
}

const rcoll_algo_ops_t rcoll_algo_twoshot = {
    .predict = twoshot_predict,
    .start = twoshot_start,
    .progress = twoshot_progress,
    .uses_hostseg = 1,
    /* its own cost (copies through the slots) measured where it takes over from one-shot,
     * between, and at 1 MiB */
    .probe_bytes = {64, (size_t)32 << 10, (size_t)256 << 10, (size_t)1 << 20},
};
