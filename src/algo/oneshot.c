/*
 * oneshot.c - one-shot all-reduce over a host segment.
 *
 *   segment: [rank 0: slot A | slot B][rank 1: slot A | slot B] ...
 *   slot:    [seq | tag | data ...] - the operation number and the call's signature digest
 *            sit on the same cache line as the first 48 bytes of data, so a small vector
 *            crosses cores as a single line; a rank whose tag differs is a mismatched call
 *
 *   operation k (from 1) uses slot k % 2: copy the input into the own slot, publish seq = k
 *   (release), wait until every rank's slot shows k (acquire), then dst = slot(0) op slot(1)
 *   op ... op slot(n-1) in rank order on every rank (identical bits everywhere).
 *
 *   Reusing slot k % 2 at operation k + 2 is safe without any extra flag: finishing k + 1
 *   required every rank to publish k + 1, which each did only after finishing k, reading
 *   included.                                                         1 publish + 1 wait
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/oneshot.h"
#include "algo/reduce.h"
#include "algo/select.h"
#include "util/status.h"

#define LINE 64
#define HDR_BYTES (2 * sizeof(uint64_t))
#define SLOT_BYTES (((RCOLL_ONESHOT_MAX_BYTES + HDR_BYTES) + LINE - 1) / LINE * LINE)

size_t rcoll_oneshot_segment_size(int nranks) { return (size_t)nranks * 2 * SLOT_BYTES; }

static char *slot(const rcoll_oneshot_t *os, int r, uint64_t k)
{
    return os->base + ((size_t)r * 2 + (size_t)(k % 2)) * SLOT_BYTES;
}

static _Atomic uint64_t *slot_seq(char *s) { return (_Atomic uint64_t *)(void *)s; }
static uint64_t *slot_tag(char *s) { return (uint64_t *)(void *)(s + sizeof(uint64_t)); }
static char *slot_data(char *s) { return s + HDR_BYTES; }

void rcoll_oneshot_op_init(rcoll_oneshot_op_t *o, const rcoll_oneshot_t *os, uint64_t k,
                           uint64_t tag, const void *src, void *dst, size_t count,
                           rcoll_datatype_t dt, rcoll_op_t op)
{
    memset(o, 0, sizeof(*o));
    o->os = os;
    o->k = k;
    o->tag = tag;
    o->src = src;
    o->dst = dst;
    o->count = count;
    o->dt = dt;
    o->op = op;
    o->waiting_peer = -1;
}

rcoll_status_t rcoll_oneshot_progress(rcoll_oneshot_op_t *o, int *progressed)
{
    const rcoll_oneshot_t *os = o->os;
    int n = os->nranks;
    size_t bytes = o->count * rcoll_dt_size(o->dt);
    *progressed = 0;
    if (!o->published) {
        char *mine = slot(os, os->rank, o->k);
        memcpy(slot_data(mine), o->src, bytes);
        *slot_tag(mine) = o->tag;
        atomic_store_explicit(slot_seq(mine), o->k, memory_order_release);
        o->published = 1;
        *progressed = 1;
    }
    for (int p = 0; p < n; p++) {
        char *s = slot(os, p, o->k);
        if (atomic_load_explicit(slot_seq(s), memory_order_acquire) < o->k) {
            o->waiting_peer = p;
            return RCOLL_INPROGRESS;
        }
        /* Published: compare the calls (same cache line) before using any data. */
        if (*slot_tag(s) != o->tag) {
            o->waiting_peer = p;
            return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "rank %d published a different call "
                                 "in the one-shot slot", p);
        }
    }
    memcpy(o->dst, slot_data(slot(os, 0, o->k)), bytes);
    for (int p = 1; p < n; p++)
        rcoll_reduce_local(o->dst, o->dst, slot_data(slot(os, p, o->k)), o->count, o->dt, o->op,
                           p == n - 1 ? n : 0);
    *progressed = 1;
    return RCOLL_OK;
}

/* The table entry.  Model: alpha/2 + (n-1) S (beta + gamma) on shared memory (one publish and
 * one wait instead of a message each way; every rank reads and reduces n-1 vectors). */
_Static_assert(sizeof(rcoll_oneshot_op_t) <= RCOLL_ALGO_STATE_BYTES, "one-shot state too big");

static rcoll_oneshot_op_t *oneshot_state(rcoll_algo_op_t *op)
{
    return (rcoll_oneshot_op_t *)(void *)op->state.bytes;
}

static double oneshot_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_tuning_t *t = ctx->tuning;
    double S = (double)bytes, N = ctx->nranks;
    if (ctx->nranks <= 1) return 0;
    if (!rcoll_algo_flat_shm(ctx) || !ctx->has_hostseg || bytes > RCOLL_ONESHOT_MAX_BYTES)
        return HUGE_VAL;
    return 0.5 * t->shm.alpha_us + (N - 1) * S * (t->shm.beta_us_per_b + t->gamma_us_per_b);
}

static void oneshot_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    rcoll_oneshot_op_init(oneshot_state(op), &ctx->oneshot, ++ctx->oneshot_seq,
                          (uint64_t)op->tag, op->src, op->dst, op->count, op->dt, op->op);
}

static rcoll_status_t oneshot_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                       int *progressed)
{
    (void)ctx;
    rcoll_oneshot_op_t *o = oneshot_state(op);
    return rcoll_algo_hostseg_report(op, rcoll_oneshot_progress(o, progressed), o->waiting_peer);
}

const rcoll_algo_ops_t rcoll_algo_oneshot = {
    .predict = oneshot_predict,
    .start = oneshot_start,
    .progress = oneshot_progress,
    .uses_hostseg = 1,
    /* its formula is the shared-memory path's; its own cost (the segment's cache lines)
     * measured at its smallest and largest sizes */
    .probe_bytes = {64, 4096, RCOLL_ONESHOT_MAX_BYTES},
};
