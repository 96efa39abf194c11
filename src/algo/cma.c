/*
 * cma.c - single-copy all-reduce over cross-memory attach (cma.h).
 *
 *   area:  [rank 0: posted | reduced | done | probe | slot 0 | ... | slot K-1][rank 1: ...]
 *   posted, reduced, done: each the number of operations this rank has published, reduced
 *            its shard of, gathered (one cache line each)
 *   probe:   this process's id, and the address and value of a word it owns (creation)
 *   slot g % K: operation g's call tag and the addresses of its send and receive buffers
 *
 *   Rank i, for operation g (shard j = elements [j*E, (j+1)*E) of the vector):
 *     publish  when every rank's done >= g - K + 1 (nobody reads slot g % K any more): write
 *              the slot                                                   -> posted = g + 1
 *     reduce   when every rank's posted >= g + 1 and its tag matches: for each chunk of
 *              shard i, read the chunk of every peer's send buffer into the scratch buffer
 *              and reduce it into dst                                     -> reduced = g + 1
 *     gather   for each peer p with reduced >= g + 1: read p's shard p of its dst into ours
 *                                                                         -> done = g + 1
 *     leave    when every rank's done >= g + 1: nobody reads our buffers any more.
 *   Every shard is reduced by one rank in one order, so every rank ends with the same bits.
 *   In place works: a rank writes shard p of its buffer only after p has reduced it (p is
 *   the only reader of that part of our send buffer), and its own shard only with its own
 *   reads of it.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "algo/algo.h"
#include "algo/cma.h"
#include "algo/reduce.h"
#include "algo/select.h"
#include "util/status.h"

#define LINE 64
enum { C_POSTED = 0, C_REDUCED = 1, C_DONE = 2, C_PROBE = 3, C_SLOTS = 4 };
#define RANK_STRIDE ((size_t)(C_SLOTS + RCOLL_CMA_SLOTS) * LINE)

typedef struct {
    int64_t pid;
    uint64_t addr;  /* address of value in that process */
    uint64_t value;
} probe_t;

typedef struct {
    uint64_t tag;
    uint64_t src, dst; /* the buffers' addresses in the publishing process */
} slot_t;

size_t rcoll_cma_area_size(int nranks)
{
    return nranks < 2 ? 0 : (size_t)nranks * RANK_STRIDE;
}

rcoll_status_t rcoll_cma_attach(rcoll_cma_t *cm, char *base, int nranks, int rank)
{
    memset(cm, 0, sizeof(*cm));
    cm->scratch = aligned_alloc(LINE, RCOLL_CMA_CHUNK);
    if (!cm->scratch)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory for the CMA scratch buffer (%u B)",
                             RCOLL_CMA_CHUNK);
    cm->base = base;
    cm->nranks = nranks;
    cm->rank = rank;
    return RCOLL_OK;
}

void rcoll_cma_detach(rcoll_cma_t *cm)
{
    free(cm->scratch);
    memset(cm, 0, sizeof(*cm));
}

static char *line(const rcoll_cma_t *cm, int r, int which)
{
    return cm->base + (size_t)r * RANK_STRIDE + (size_t)which * LINE;
}

static _Atomic uint64_t *ctr(const rcoll_cma_t *cm, int r, int which)
{
    return (_Atomic uint64_t *)(void *)line(cm, r, which);
}

static slot_t *slot(const rcoll_cma_t *cm, int r, uint64_t g)
{
    return (slot_t *)(void *)line(cm, r, C_SLOTS + (int)(g % RCOLL_CMA_SLOTS));
}

static uint64_t load(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_acquire); }
static void store(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_release);
}

static int64_t peer_pid(const rcoll_cma_t *cm, int p)
{
    return ((const probe_t *)(const void *)line(cm, p, C_PROBE))->pid;
}

/* Copy len bytes at remote address `from` in process pid to `to`: 0, or an errno (a short
 * read, which happens only when the remote range is not all mapped, is EFAULT). */
static int cma_read(int64_t pid, void *to, uint64_t from, size_t len)
{
    while (len) {
        struct iovec l = {to, len}, r = {(void *)(uintptr_t)from, len};
        ssize_t got = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return errno;
        if (got == 0) return EFAULT;
        to = (char *)to + got;
        from += (uint64_t)got;
        len -= (size_t)got;
    }
    return 0;
}

void rcoll_cma_publish_probe(rcoll_cma_t *cm)
{
    probe_t *pr = (probe_t *)(void *)line(cm, cm->rank, C_PROBE);
    /* A word of this process's own memory (the scratch buffer) with a value a reader could
     * not guess: its address mixed with the process id. */
    uint64_t v = ((uint64_t)(uintptr_t)cm->scratch * 0x9e3779b97f4a7c15ull) ^ (uint64_t)getpid();
    memcpy(cm->scratch, &v, sizeof(v));
    pr->pid = getpid();
    pr->addr = (uint64_t)(uintptr_t)cm->scratch;
    pr->value = v;
}

int rcoll_cma_probe(const rcoll_cma_t *cm, char *why, size_t why_len)
{
    for (int p = 0; p < cm->nranks; p++) {
        if (p == cm->rank) continue;
        const probe_t *pr = (const probe_t *)(const void *)line(cm, p, C_PROBE);
        uint64_t got = 0;
        int e = cma_read(pr->pid, &got, pr->addr, sizeof(got));
        if (e) {
            snprintf(why, why_len, "process_vm_readv of rank %d (pid %lld) failed: %s", p,
                     (long long)pr->pid, strerror(e));
            return 0;
        }
        if (got != pr->value) {
            snprintf(why, why_len, "process_vm_readv of rank %d (pid %lld) read another "
                     "value than it published (another process with that id?)", p,
                     (long long)pr->pid);
            return 0;
        }
    }
    return 1;
}

void rcoll_cma_op_init(rcoll_cma_op_t *o, rcoll_cma_t *cm, uint64_t tag, const void *src,
                       void *dst, size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                       size_t chunk_bytes)
{
    memset(o, 0, sizeof(*o));
    o->cm = cm;
    o->tag = tag;
    o->src = src;
    o->dst = dst;
    o->count = count;
    o->dt = dt;
    o->op = op;
    o->esize = rcoll_dt_size(dt);
    /* n shards of whole cache lines (the last ones may be short or empty) */
    size_t n = (size_t)cm->nranks, line_elems = LINE / o->esize ? LINE / o->esize : 1;
    size_t e = (count + n - 1) / n;
    o->shard_elems = (e + line_elems - 1) / line_elems * line_elems;
    if (chunk_bytes == 0 || chunk_bytes > RCOLL_CMA_CHUNK) chunk_bytes = RCOLL_CMA_CHUNK;
    o->chunk_elems = chunk_bytes / o->esize ? chunk_bytes / o->esize : 1;
    o->g = cm->calls++;
    o->waiting_peer = -1;
}

/* Elements [*first, *first + return) of shard j. */
static size_t shard_range(const rcoll_cma_op_t *o, int j, size_t *first)
{
    size_t start = (size_t)j * o->shard_elems;
    *first = start;
    if (start >= o->count) return 0;
    size_t left = o->count - start;
    return left < o->shard_elems ? left : o->shard_elems;
}

static rcoll_status_t read_error(rcoll_cma_op_t *o, int p, int e, const char *what)
{
    o->waiting_peer = p;
    if (e == ESRCH) /* the peer's process has exited: a failed peer, as a dropped link is */
        return rcoll_err_set(RCOLL_ERR_REMOTE, "rank %d (pid %lld) is gone: its process "
                             "exited while this rank read its %s", p,
                             (long long)peer_pid(o->cm, p), what);
    return rcoll_err_set(RCOLL_ERR_SYSTEM, "reading rank %d's %s (process_vm_readv, pid "
                         "%lld) failed: %s", p, what, (long long)peer_pid(o->cm, p),
                         strerror(e));
}

/* 1 when every rank's counter `which` is >= v; else 0 with o->waiting_peer set. */
static int all_reached(rcoll_cma_op_t *o, int which, uint64_t v)
{
    const rcoll_cma_t *cm = o->cm;
    for (int p = 0; p < cm->nranks; p++)
        if (p != cm->rank && load(ctr(cm, p, which)) < v) {
            o->waiting_peer = p;
            return 0;
        }
    return 1;
}

/* One chunk of this rank's shard: read it from every peer and reduce. */
static rcoll_status_t reduce_chunk(rcoll_cma_op_t *o)
{
    rcoll_cma_t *cm = o->cm;
    int n = cm->nranks, me = cm->rank;
    size_t first, cnt = shard_range(o, me, &first);
    size_t per = o->chunk_elems, off = first + o->red_off;
    size_t c = cnt - o->red_off < per ? cnt - o->red_off : per;
    char *d = o->dst + off * o->esize;
    const char *a = o->src + off * o->esize;
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n;
        const slot_t *s = slot(cm, p, o->g);
        int e = cma_read(peer_pid(cm, p), cm->scratch, s->src + off * o->esize, c * o->esize);
        if (e) return read_error(o, p, e, "send buffer");
        rcoll_reduce_local(d, a, cm->scratch, c, o->dt, o->op, i == n - 1 ? n : 0);
        a = d;
    }
    o->red_off += c;
    return RCOLL_OK;
}

rcoll_status_t rcoll_cma_progress(rcoll_cma_op_t *o, int *progressed)
{
    rcoll_cma_t *cm = o->cm;
    int n = cm->nranks, me = cm->rank;
    uint64_t g = o->g;
    *progressed = 0;
    for (;;) {
        switch (o->phase) {
        case 0: /* publish */
            if (g >= RCOLL_CMA_SLOTS && !all_reached(o, C_DONE, g - RCOLL_CMA_SLOTS + 1))
                return RCOLL_INPROGRESS;
            if (load(ctr(cm, me, C_DONE)) < g) return RCOLL_INPROGRESS; /* our own earlier op */
            *slot(cm, me, g) = (slot_t){o->tag, (uint64_t)(uintptr_t)o->src,
                                        (uint64_t)(uintptr_t)o->dst};
            store(ctr(cm, me, C_POSTED), g + 1);
            o->phase = 1;
            *progressed = 1;
            break;
        case 1: { /* reduce this rank's shard */
            if (o->red_off == 0) {
                if (!all_reached(o, C_POSTED, g + 1)) return RCOLL_INPROGRESS;
                for (int p = 0; p < n; p++)
                    if (p != me && slot(cm, p, g)->tag != o->tag) {
                        o->waiting_peer = p;
                        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                             "rank %d published a different call in the CMA "
                                             "all-reduce's slot", p);
                    }
            }
            size_t first, cnt = shard_range(o, me, &first);
            (void)first;
            if (o->red_off < cnt) {
                rcoll_status_t st = reduce_chunk(o);
                if (st != RCOLL_OK) return st;
                *progressed = 1;
                if (o->red_off < cnt) return RCOLL_INPROGRESS; /* one chunk per call */
            }
            store(ctr(cm, me, C_REDUCED), g + 1);
            o->phase = 2;
            *progressed = 1;
            break;
        }
        case 2: /* gather the peers' shards */
            while (o->gat_peer < n - 1) {
                int p = (me + 1 + o->gat_peer) % n;
                if (load(ctr(cm, p, C_REDUCED)) < g + 1) {
                    o->waiting_peer = p;
                    return RCOLL_INPROGRESS;
                }
                size_t first, cnt = shard_range(o, p, &first);
                if (cnt) {
                    int e = cma_read(peer_pid(cm, p), o->dst + first * o->esize,
                                     slot(cm, p, g)->dst + first * o->esize, cnt * o->esize);
                    if (e) return read_error(o, p, e, "receive buffer");
                }
                o->gat_peer++;
                *progressed = 1;
            }
            store(ctr(cm, me, C_DONE), g + 1);
            o->phase = 3;
            *progressed = 1;
            break;
        case 3: /* nobody reads our buffers any more */
            if (!all_reached(o, C_DONE, g + 1)) return RCOLL_INPROGRESS;
            o->phase = 4;
            *progressed = 1;
            return RCOLL_OK;
        default:
            return RCOLL_OK;
        }
    }
}

/* The table entry.  The model takes it only from CMA_AUTO_MIN bytes (RCOLL_ALGO=cma forces it
 * at any size), as two-shot's cost for the bytes times CMA_BYTE_RATIO plus three latencies.
 * Fewer passes over the data would suggest far less (2(n-1)/n S at one copy's cost against
 * two-shot's (2n-1)/n), but the kernel copies cache-resident data several times slower than a
 * user-space copy does: on the development VM (2 ranks, docs/benchmarks.md) cma lost 1-6 us at
 * 16-128 KiB, tied from 256 KiB to 2 MiB and won 5-10% from 4 MiB.  A threshold, because the
 * probe's constants (core/probe.c) vary too much from run to run for a fitted overhead term to
 * put the crossover at the same place twice. */
#define CMA_BYTE_RATIO 0.93
#define CMA_AUTO_MIN ((size_t)4 << 20)
_Static_assert(sizeof(rcoll_cma_op_t) <= RCOLL_ALGO_STATE_BYTES, "CMA state too big");

static rcoll_cma_op_t *cma_state(rcoll_algo_op_t *op)
{
    return (rcoll_cma_op_t *)(void *)op->state.bytes;
}

static double cma_predict(const rcoll_algo_ctx_t *ctx, size_t bytes)
{
    const rcoll_tuning_t *t = ctx->tuning;
    double S = (double)bytes, N = ctx->nranks;
    if (ctx->nranks <= 1) return 0;
    if (!rcoll_algo_flat_shm(ctx) || !ctx->has_hostseg || !ctx->has_cma) return HUGE_VAL;
    if (bytes < CMA_AUTO_MIN && ctx->forced != RCOLL_ALG_CMA) return HUGE_VAL;
    double twoshot_bytes = (2 * N - 1) / N * S * t->shm.beta_us_per_b / 2 +
                           (N - 1) / N * S * t->gamma_us_per_b;
    return 3 * t->shm.alpha_us + CMA_BYTE_RATIO * twoshot_bytes;
}

static void cma_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op)
{
    /* RCOLL_CHUNK_SIZE, when given, also cuts the reads (tests' many-chunk runs) */
    rcoll_cma_op_init(cma_state(op), &ctx->cma, (uint64_t)op->tag, op->src, op->dst,
                      op->count, op->dt, op->op, ctx->chunk_fixed ? ctx->chunk_bytes : 0);
}

static rcoll_status_t cma_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                   int *progressed)
{
    (void)ctx;
    rcoll_cma_op_t *o = cma_state(op);
    return rcoll_algo_hostseg_report(op, rcoll_cma_progress(o, progressed), o->waiting_peer);
}

const rcoll_algo_ops_t rcoll_algo_cma = {
    .predict = cma_predict,
    .start = cma_start,
    .progress = cma_progress,
    .uses_hostseg = 1,
    /* the kernel's copies cost what they cost where it runs (several times a user-space
     * copy in some VMs and containers): measured, or not chosen by default */
    .probe_bytes = {4096, (size_t)256 << 10, (size_t)1 << 20},
    .calibrated = 1,
};
