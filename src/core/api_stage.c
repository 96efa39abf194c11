/*
 * api_stage.c - the device path's first piece: a blocking collective whose buffers are CUDA
 * device or managed memory runs the host collective on copies of them in the communicator's
 * pinned staging area (cuda/gpu.h rcoll_gpu_stage_*).  This file knows which bytes each
 * collective reads and writes on this rank (rooted calls, displacements, in place) and copies
 * exactly those: the inputs before, the outputs after.  It never calls the driver itself.
 *
 *   device sendbuf --DtoH--> staging (pinned) --host collective--> staging --HtoD--> recvbuf
 *
 * A buffer that overlaps the other (in place, or a block of it) shares one staged region
 * with it, at the same relative offsets, so the host collective sees the same aliasing.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "core/api_int.h"
#include "core/comm.h"
#include "cuda/gpu.h"
#include "util/status.h"

/* The pieces of one buffer this rank reads (in) or writes (out), offsets from the buffer. */
typedef struct {
    rcoll_gpu_span_t *span;
    size_t n, cap;
    size_t extent; /* the largest off + len: bytes of the region */
} spans_t;

static void span_add(spans_t *s, size_t off, size_t len)
{
    if (!len) return;
    if (s->n && s->span[s->n - 1].off + s->span[s->n - 1].len == off) {
        s->span[s->n - 1].len += len; /* contiguous with the previous piece: one copy */
    } else {
        s->span[s->n].off = off;
        s->span[s->n].len = len;
        s->n++;
    }
    if (off + len > s->extent) s->extent = off + len;
}

/* The bytes of src read and of dst written on this rank by the collective a. */
static void call_spans(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                       const size_t *const *v, spans_t *in, spans_t *out)
{
    size_t es = rcoll_dt_size(a->dt), n = (size_t)comm->nranks, me = (size_t)comm->rank;
    size_t bytes = a->count * es;
    int is_root = comm->rank == a->root;
    switch (a->kind) {
    case RCOLL_OP_ALLREDUCE:
        span_add(in, 0, bytes);
        span_add(out, 0, bytes);
        break;
    case RCOLL_OP_BCAST: /* the root's buffer is read, every other rank's written */
        if (is_root)
            span_add(in, 0, bytes);
        else
            span_add(out, 0, bytes);
        break;
    case RCOLL_OP_REDUCE: /* recvbuf on the root only */
        span_add(in, 0, bytes);
        if (a->dst) span_add(out, 0, bytes);
        break;
    case RCOLL_OP_ALLGATHER: /* count: per rank */
        if (a->src) span_add(in, 0, bytes);
        span_add(out, 0, n * bytes);
        break;
    case RCOLL_OP_REDUCE_SCATTER: /* in place: the result at recvbuf's start (or own block) */
        span_add(in, 0, n * bytes);
        span_add(out, 0, bytes);
        break;
    case RCOLL_OP_ALLTOALL:
        span_add(in, 0, n * bytes);
        span_add(out, 0, n * bytes);
        break;
    case RCOLL_OP_GATHER: /* src: this rank's block (NULL when count is 0); dst: root only */
        if (a->src) span_add(in, 0, bytes);
        if (a->dst) span_add(out, 0, n * bytes);
        break;
    case RCOLL_OP_SCATTER: /* src: root only; the root's own block in place is not moved */
        if (a->src) span_add(in, 0, n * bytes);
        if (a->dst && !(a->src && (const char *)a->dst == (const char *)a->src + me * bytes))
            span_add(out, 0, bytes);
        break;
    case RCOLL_OP_ALLGATHERV: /* count: the sum; v: recvcounts, displs */
        if (a->src) span_add(in, 0, v[RCOLL_V_COUNT][me] * es);
        for (size_t i = 0; a->dst && i < n; i++)
            span_add(out, v[RCOLL_V_DISPL][i] * es, v[RCOLL_V_COUNT][i] * es);
        break;
    case RCOLL_OP_ALLTOALLV: /* v: sendcounts, sdispls, recvcounts, rdispls */
        for (size_t i = 0; a->src && i < n; i++)
            span_add(in, v[RCOLL_V_DISPL][i] * es, v[RCOLL_V_COUNT][i] * es);
        for (size_t i = 0; a->dst && i < n; i++)
            span_add(out, v[RCOLL_V_RDISPL][i] * es, v[RCOLL_V_RCOUNT][i] * es);
        break;
    case RCOLL_OP_REDUCE_SCATTERV: /* count: the sum; v: recvcounts */
        span_add(in, 0, bytes);
        if (a->dst) span_add(out, 0, v[RCOLL_V_COUNT][me] * es);
        break;
    default:
        break;
    }
}

#define REGION_ALIGN 64

/* One staged call: what was copied in, and where its outputs go. */
typedef struct {
    spans_t in, out;
    const char *dev_in; /* the device buffer the inputs come from (NULL: none) */
    char *host_in;      /* its staged copy */
    char *dev_out;     /* the device buffer the outputs go to (NULL: none) */
    char *host_out;    /* its staged copy */
    rcoll_coll_args_t h; /* the call on the staged copies */
} plan_t;

static void plan_free(plan_t *p)
{
    free(p->in.span);
    free(p->out.span);
    p->in.span = p->out.span = NULL;
}

/* The communicator's pinned host memory (its bound, its retired areas), made at first use;
 * NULL when out of memory (then nothing is counted). */
static rcoll_gpu_pinned_t *pinned_of(rcoll_comm_t comm)
{
    if (!comm->gpu_pinned) comm->gpu_pinned = rcoll_gpu_pinned_new(comm->cfg.gpu.stage_pinned_max);
    return comm->gpu_pinned;
}

/* Work out the call's bytes, reserve them in *area (flags: RCOLL_GPU_STAGE_IN_STREAM for a
 * stream-ordered call) and (copy_in) copy the inputs in.  On failure the sentence is in the
 * last error and p holds nothing. */
static rcoll_status_t stage_in(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                               const size_t *const *v, const char *fn,
                               rcoll_gpu_stage_t **area, plan_t *p, int copy_in, int flags)
{
    size_t n = (size_t)comm->nranks + 1;
    const char *sname = a->kind == RCOLL_OP_BCAST ? "buf" : "sendbuf";
    const char *rname = a->kind == RCOLL_OP_BCAST ? "buf" : "recvbuf";
    *p = (plan_t){.in = {.cap = n}, .out = {.cap = n}, .h = *a};
    p->in.span = malloc(n * sizeof(*p->in.span));
    p->out.span = malloc(n * sizeof(*p->out.span));
    if (!p->in.span || !p->out.span) {
        plan_free(p);
        return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    call_spans(comm, a, v, &p->in, &p->out);

    /* Regions: src's and dst's extents; one region when they overlap (in place). */
    const char *s = p->in.extent ? a->src : NULL;
    char *d = p->out.extent ? a->dst : NULL;
    size_t sext = p->in.extent, dext = p->out.extent;
    if (a->src && a->src == a->dst) { /* in place: the same pointer, whatever is copied */
        s = a->src;
        d = a->dst;
    }
    int shared = s && d &&
                 (s == d || rcoll_api_spans_overlap(s, sext ? sext : 1, d, dext ? dext : 1));
    uintptr_t base = 0;
    size_t total = 0, soff = 0, doff = 0;
    if (shared) {
        base = (uintptr_t)s < (uintptr_t)d ? (uintptr_t)s : (uintptr_t)d;
        uintptr_t end = (uintptr_t)s + sext > (uintptr_t)d + dext ? (uintptr_t)s + sext
                                                                 : (uintptr_t)d + dext;
        total = end - base;
        soff = (uintptr_t)s - base;
        doff = (uintptr_t)d - base;
    } else {
        doff = (sext + REGION_ALIGN - 1) & ~(size_t)(REGION_ALIGN - 1);
        total = doff + dext;
    }
    if (!total) return RCOLL_OK; /* nothing read or written here: the call as it is */

    char *host = NULL;
    rcoll_status_t st = rcoll_gpu_stage_reserve(area, pinned_of(comm), s ? (const void *)s : d,
                                                total, flags, (void **)&host);
    if (st != RCOLL_OK) {
        plan_free(p);
        return rcoll_api_arg_error(comm, st, "%s: staging %s %p through pinned host memory: %s",
                                   fn, s ? sname : rname, s ? (const void *)s : d,
                                   rcoll_err_get());
    }
    if (s) p->h.src = host + soff;
    if (d) p->h.dst = host + doff;
    /* a dst this rank writes nothing to, inside src's region (an own block): keep the
     * aliasing the host collective may look at */
    if (!d && s && a->dst && (uintptr_t)a->dst >= (uintptr_t)s &&
        (uintptr_t)a->dst <= (uintptr_t)s + sext)
        p->h.dst = host + soff + ((uintptr_t)a->dst - (uintptr_t)s);
    if (d && p->out.n) {
        p->dev_out = d;
        p->host_out = host + doff;
    }
    if (s && p->in.n) {
        p->dev_in = s;
        p->host_in = host + soff;
    }
    if (!copy_in) return RCOLL_OK;
    st = rcoll_gpu_stage_copy(0, (void *)s, host + soff, p->in.span, p->in.n);
    if (st != RCOLL_OK) {
        plan_free(p);
        return rcoll_api_arg_error(comm, st, "%s: copying %s %p to the staging area: %s (the "
                                   "collective was not started on this rank)", fn, sname,
                                   (const void *)s, rcoll_err_get());
    }
    return RCOLL_OK;
}

static rcoll_status_t stage_out(rcoll_comm_t comm, rcoll_op_kind_t kind, void *dev, void *host,
                                const rcoll_gpu_span_t *spans, size_t n, const char *fn)
{
    if (!dev || !n) return RCOLL_OK;
    rcoll_status_t st = rcoll_gpu_stage_copy(1, dev, host, spans, n);
    if (st != RCOLL_OK && kind == RCOLL_OP_P2P)
        st = rcoll_api_arg_error(comm, st, "%s: copying the received message from the staging "
                                 "area to buf %p: %s (the message itself was received)", fn, dev,
                                 rcoll_err_get());
    else if (st != RCOLL_OK)
        st = rcoll_api_arg_error(comm, st, "%s: copying the result from the staging area to %s "
                                 "%p: %s (the collective itself completed)", fn,
                                 kind == RCOLL_OP_BCAST ? "buf" : "recvbuf", dev,
                                 rcoll_err_get());
    return st;
}

/* ---- nonblocking calls: an area per call in flight ---- */

struct rcoll_stage_job {
    struct rcoll_stage_job *next; /* every job of the communicator */
    struct rcoll_stage_job *req_next; /* the other jobs of the same request (point to point:
                                       * one per staged buffer of a call or group) */
    _Atomic int busy;             /* attached to a request in flight */
    rcoll_gpu_stage_t *area;
    rcoll_op_kind_t kind;
    char *dev_out, *host_out;
    rcoll_gpu_span_t *out;        /* owned */
    size_t nout;
    const char *fn;               /* the call's name (a literal) */
};

static void stage_jobs_free(rcoll_comm_t comm);

/* A free job of comm (the first found, or a new one); NULL when out of memory. */
static struct rcoll_stage_job *job_take(rcoll_comm_t comm)
{
    struct rcoll_stage_job *j;
    for (j = comm->stage_jobs; j; j = j->next)
        if (!atomic_load_explicit(&j->busy, memory_order_acquire)) break;
    if (!j) {
        j = calloc(1, sizeof(*j));
        if (!j) return NULL;
        j->next = comm->stage_jobs;
        comm->stage_jobs = j;
        comm->free_stage_jobs = stage_jobs_free;
    }
    atomic_store_explicit(&j->busy, 1, memory_order_relaxed);
    j->req_next = NULL;
    j->dev_out = j->host_out = NULL;
    j->nout = 0;
    return j;
}

static void job_put(struct rcoll_stage_job *j)
{
    free(j->out);
    j->out = NULL;
    j->nout = 0;
    atomic_store_explicit(&j->busy, 0, memory_order_release);
}

/* The post-step of a request with staged buffers (struct rcoll_request's post): copy (the
 * request seen complete with status st): every job's outputs copied to the device when st is
 * RCOLL_OK (one failing does not keep the others' back), the status the operation's or the
 * first failing copy's; copy 0 (released unfinished): nothing copied.  The jobs' areas are
 * free for the next call either way. */
static rcoll_status_t stage_post(struct rcoll_request *r, rcoll_status_t st, int copy)
{
    struct rcoll_stage_job *j = r->stage_job;
    r->stage_job = NULL;
    int ok = copy && st == RCOLL_OK;
    while (j) {
        struct rcoll_stage_job *nx = j->req_next;
        if (ok) {
            rcoll_status_t cst =
                stage_out(r->comm, j->kind, j->dev_out, j->host_out, j->out, j->nout, j->fn);
            if (st == RCOLL_OK) st = cst;
        }
        job_put(j);
        j = nx;
    }
    return st;
}

size_t rcoll_stage_bytes(rcoll_comm_t comm)
{
    size_t total = rcoll_gpu_stage_bytes(comm->gpu_stage);
    for (struct rcoll_stage_job *j = comm->stage_jobs; j; j = j->next)
        total += sizeof(*j) + rcoll_gpu_stage_bytes(j->area);
    return total;
}

/* Every staging area of the nonblocking calls (the communicator's free_stage_jobs). */
static void stage_jobs_free(rcoll_comm_t comm)
{
    struct rcoll_stage_job *j = comm->stage_jobs;
    while (j) {
        struct rcoll_stage_job *nx = j->next;
        rcoll_gpu_stage_free(&j->area);
        free(j->out);
        free(j);
        j = nx;
    }
    comm->stage_jobs = NULL;
}

rcoll_status_t rcoll_api_stage_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                    const size_t *const *v, rcoll_request_t *req,
                                    int deferred, const char *fn)
{
    plan_t p;
    rcoll_status_t st;
    if (!req && !deferred) { /* blocking: the communicator's area, outputs copied at once */
        st = stage_in(comm, a, v, fn, &comm->gpu_stage, &p, 1, 0);
        if (st != RCOLL_OK) return st;
        st = rcoll_api_run_host(comm, &p.h, v, NULL, NULL, NULL, fn);
        if (st == RCOLL_OK)
            st = stage_out(comm, a->kind, p.dev_out, p.host_out, p.out.span, p.out.n, fn);
        plan_free(&p);
        return st;
    }
    /* nonblocking or grouped: an area of its own, the outputs copied when its completion is
     * seen (rcoll_test, rcoll_wait, rcoll_group_end) */
    struct rcoll_stage_job *j = job_take(comm);
    if (!j) return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    st = stage_in(comm, a, v, fn, &j->area, &p, 1, 0);
    if (st != RCOLL_OK) {
        job_put(j);
        return st;
    }
    j->kind = a->kind;
    j->dev_out = p.dev_out;
    j->host_out = p.host_out;
    j->out = p.out.span;
    j->nout = p.out.n;
    j->fn = fn;
    p.out.span = NULL;
    plan_free(&p);
    st = rcoll_api_run_host(comm, &p.h, v, req, stage_post, j, fn);
    if (st != RCOLL_OK) job_put(j);
    return st;
}

rcoll_status_t rcoll_api_stage_prepare(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                       const size_t *const *v, const char *fn,
                                       rcoll_gpu_stage_t **area, rcoll_stage_call_t *call)
{
    plan_t p;
    rcoll_status_t st = stage_in(comm, a, v, fn, area, &p, 0, RCOLL_GPU_STAGE_IN_STREAM);
    if (st != RCOLL_OK) return st;
    *call = (rcoll_stage_call_t){
        .dev_in = (void *)p.dev_in, .host_in = p.host_in, .in = p.in.span, .nin = p.in.n,
        .dev_out = p.dev_out, .host_out = p.host_out, .out = p.out.span, .nout = p.out.n,
        .h = p.h};
    return RCOLL_OK;
}

void rcoll_api_stage_call_free(rcoll_stage_call_t *call)
{
    free(call->in);
    free(call->out);
    call->in = call->out = NULL;
    call->nin = call->nout = 0;
}

rcoll_status_t rcoll_api_stage_p2p(rcoll_comm_t comm, struct rcoll_request *r, int is_send,
                                   void *buf, size_t bytes, const char *fn, void **host_p)
{
    struct rcoll_stage_job *j = job_take(comm);
    if (!j) return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    char *host = NULL;
    rcoll_gpu_span_t span = {0, bytes};
    rcoll_status_t st =
        rcoll_gpu_stage_reserve(&j->area, pinned_of(comm), buf, bytes, 0, (void **)&host);
    if (st != RCOLL_OK) {
        job_put(j);
        return rcoll_api_arg_error(comm, st, "%s: staging buf %p through pinned host memory: %s",
                                   fn, buf, rcoll_err_get());
    }
    if (is_send) { /* the data leaves from the area: copied now, buf free again at return */
        st = rcoll_gpu_stage_copy(0, buf, host, &span, 1);
        if (st != RCOLL_OK) {
            job_put(j);
            return rcoll_api_arg_error(comm, st, "%s: copying buf %p to the staging area: %s "
                                       "(nothing was sent)", fn, buf, rcoll_err_get());
        }
    } else {
        j->out = malloc(sizeof(*j->out));
        if (!j->out) {
            job_put(j);
            return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
        }
        j->out[0] = span;
        j->nout = 1;
        j->dev_out = buf;
        j->host_out = host;
    }
    j->kind = RCOLL_OP_P2P;
    j->fn = fn;
    j->req_next = r->stage_job; /* released with the request, outputs copied at its end */
    r->stage_job = j;
    r->post = stage_post;
    *host_p = host;
    return RCOLL_OK;
}

/* ---- pipelined staging: large collectives in chunks ---- */

static int block_kind(rcoll_op_kind_t kind)
{
    return kind == RCOLL_OP_ALLGATHER || kind == RCOLL_OP_REDUCE_SCATTER ||
           kind == RCOLL_OP_ALLTOALL || kind == RCOLL_OP_GATHER || kind == RCOLL_OP_SCATTER;
}

/*
 * The collectives of per-rank blocks in chunks (all-gather, reduce-scatter, all-to-all,
 * gather, scatter; count elements per block): chunk k is elements [off, off + cnt) of every
 * block, so every rank runs the same collective of cnt elements per block.  This rank reads
 * nin blocks of src and writes nout blocks of dst (0, 1 or nranks each: below); block r's
 * piece of chunk k is at r x count + off in the caller's buffer and at nin x off + r x cnt
 * (nout x ... for dst) in the chunk-major copy the host collective works on, so a chunk's
 * pieces are contiguous there ([block][cnt]).  With one block the two layouts are the same.
 *
 * Staged, the copies themselves do the packing (one copy per piece on the staging streams,
 * chunk k's event after its last piece in); with host buffers, memcpy through a pack of
 * nranks x per elements on a side of nranks blocks (a side of one block is used in place).
 * skip: a block of dst not written back (in place: the own block of an all-gather or gather
 * already holds its piece; a scatter's root in place: its block is where it was read).  In
 * place otherwise (a reduce-scatter's result at recvbuf's start or on the own block), every
 * piece a chunk writes is one that chunk has already read.
 */
typedef struct {
    size_t nin, nout; /* blocks of src read, of dst written, on this rank */
    size_t skip;      /* a block of dst not written back, or SIZE_MAX */
} blocks_t;

static blocks_t call_blocks(rcoll_comm_t comm, const rcoll_coll_args_t *a)
{
    size_t n = (size_t)comm->nranks, me = (size_t)comm->rank;
    size_t blk = a->count * rcoll_dt_size(a->dt);
    const char *s = a->src;
    char *d = a->dst;
    blocks_t b = {0, 0, SIZE_MAX};
    switch (a->kind) {
    case RCOLL_OP_ALLGATHER:
    case RCOLL_OP_GATHER: /* dst on the root only */
        b.nin = s ? 1 : 0;
        b.nout = d ? n : 0;
        if (s && d && s == d + me * blk) b.skip = me;
        break;
    case RCOLL_OP_REDUCE_SCATTER:
        b.nin = n;
        b.nout = 1;
        break;
    case RCOLL_OP_ALLTOALL:
        b.nin = b.nout = n;
        break;
    case RCOLL_OP_SCATTER: /* src on the root only */
        b.nin = s ? n : 0;
        b.nout = d ? 1 : 0;
        if (s && d && d == s + me * blk) b.skip = 0;
        break;
    default:
        break;
    }
    return b;
}

/* The end of a chunked call: wait for the staging streams (finish: they were used) and
 * name what failed, st or the wait: chunk k of nch (the loop stopped at it), or the wait
 * for the copies out once every chunk had gone. */
static rcoll_status_t pipe_end(rcoll_comm_t comm, rcoll_status_t st, int finish, size_t k,
                               size_t nch, const char *fn)
{
    rcoll_status_t fst = finish ? rcoll_gpu_pipe_finish(comm->gpu_pipe) : RCOLL_OK;
    if (st == RCOLL_OK) st = fst;
    if (st == RCOLL_OK || strstr(comm->last_error, fn)) return st;
    if (k < nch)
        return rcoll_api_arg_error(comm, st, "%s: pipelined staging, chunk %zu of %zu: %s", fn,
                                   k + 1, nch, rcoll_err_get());
    return rcoll_api_arg_error(comm, st, "%s: pipelined staging, waiting for the copies out of "
                               "the %zu chunks: %s", fn, nch, rcoll_err_get());
}

static rcoll_status_t chunked_blocks(rcoll_comm_t comm, const rcoll_coll_args_t *a, int staged,
                                     size_t per, size_t nch, const char *fn)
{
    size_t es = rcoll_dt_size(a->dt), n = (size_t)comm->nranks;
    size_t count = a->count, blk = count * es;
    blocks_t b = call_blocks(comm, a);
    const char *src = a->src;
    char *dst = a->dst;
    rcoll_status_t st = RCOLL_OK;
    if (!staged) {
        char *pin = b.nin > 1 ? malloc(b.nin * per * es) : NULL;
        char *pout = b.nout > 1 ? malloc(b.nout * per * es) : NULL;
        if ((b.nin > 1 && !pin) || (b.nout > 1 && !pout)) {
            free(pin);
            free(pout);
            return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory (a pack "
                                       "of %zu bytes for RCOLL_STAGE_CHUNK)", fn, n * per * es);
        }
        for (size_t k = 0; k < nch && st == RCOLL_OK; k++) {
            size_t off = k * per, cnt = count - off < per ? count - off : per;
            for (size_t r = 0; pin && r < b.nin; r++)
                memcpy(pin + r * cnt * es, src + (r * count + off) * es, cnt * es);
            rcoll_coll_args_t c = *a;
            c.count = cnt;
            if (b.nin) c.src = pin ? pin : src + off * es;
            if (b.nout) c.dst = pout ? pout : dst + off * es;
            st = rcoll_api_run_host(comm, &c, NULL, NULL, NULL, NULL, fn);
            for (size_t r = 0; pout && st == RCOLL_OK && r < b.nout; r++)
                if (r != b.skip)
                    memcpy(dst + (r * count + off) * es, pout + r * cnt * es, cnt * es);
        }
        free(pin);
        free(pout);
        return st;
    }
    /* the staged copies: src's chunk-major copy, then dst's, 64-byte aligned apart */
    size_t out_at = (b.nin * blk + REGION_ALIGN - 1) & ~(size_t)(REGION_ALIGN - 1);
    const void *dev = b.nin ? (const void *)src : (const void *)dst;
    char *host = NULL;
    if ((st = rcoll_gpu_stage_reserve(&comm->gpu_stage, pinned_of(comm), dev,
                                      out_at + b.nout * blk, 0, (void **)&host)) != RCOLL_OK)
        return rcoll_api_arg_error(comm, st, "%s: staging %s %p through pinned host memory: %s",
                                   fn, b.nin ? "sendbuf" : "recvbuf", dev, rcoll_err_get());
    char *host_in = host, *host_out = host + out_at;
    if (nch > INT32_MAX) nch = INT32_MAX; /* never: counts are bounded far below */
    if ((st = rcoll_gpu_pipe_get(&comm->gpu_pipe, dev, (int)nch)) != RCOLL_OK)
        return rcoll_api_arg_error(comm, st, "%s: pipelined staging: %s (the collective was not "
                                   "started on this rank)", fn, rcoll_err_get());
    /* every chunk's pieces in at once, an event after each chunk's last */
    for (size_t k = 0; k < nch && st == RCOLL_OK; k++) {
        size_t off = k * per, cnt = count - off < per ? count - off : per;
        for (size_t r = 0; r < b.nin && st == RCOLL_OK; r++)
            st = rcoll_gpu_pipe_copy(comm->gpu_pipe, 0, (char *)src + (r * count + off) * es,
                                     host_in + (b.nin * off + r * cnt) * es, cnt * es,
                                     r == b.nin - 1 ? (int)k : -1);
    }
    if (st != RCOLL_OK) {
        rcoll_gpu_pipe_finish(comm->gpu_pipe); /* nothing enqueued may outlive the call */
        return rcoll_api_arg_error(comm, st, "%s: copying sendbuf %p to the staging area: %s (the "
                                   "collective was not started on this rank)", fn,
                                   (const void *)src, rcoll_err_get());
    }
    /* chunk k's collective as soon as it is in; its pieces out behind the later chunks */
    size_t k = 0;
    for (; k < nch && st == RCOLL_OK; k++) {
        size_t off = k * per, cnt = count - off < per ? count - off : per;
        if (b.nin && (st = rcoll_gpu_pipe_wait(comm->gpu_pipe, (int)k)) != RCOLL_OK) break;
        rcoll_coll_args_t c = *a;
        c.count = cnt;
        if (b.nin) c.src = host_in + b.nin * off * es;
        if (b.nout) c.dst = host_out + b.nout * off * es;
        if ((st = rcoll_api_run_host(comm, &c, NULL, NULL, NULL, NULL, fn)) != RCOLL_OK) break;
        for (size_t r = 0; r < b.nout && st == RCOLL_OK; r++)
            if (r != b.skip)
                st = rcoll_gpu_pipe_copy(comm->gpu_pipe, 1, dst + (r * count + off) * es,
                                         host_out + (b.nout * off + r * cnt) * es, cnt * es, -1);
        if (st != RCOLL_OK) break; /* k: the chunk that failed */
    }
    return pipe_end(comm, st, 1, k, nch, fn);
}

/* The call a restricted to elements [off, off + cnt) (elementwise collectives only). */
static rcoll_coll_args_t chunk_of(const rcoll_coll_args_t *a, size_t off, size_t cnt)
{
    size_t es = rcoll_dt_size(a->dt);
    rcoll_coll_args_t c = *a;
    if (c.src) c.src = (const char *)c.src + off * es;
    if (c.dst) c.dst = (char *)c.dst + off * es;
    c.count = cnt;
    return c;
}

rcoll_status_t rcoll_api_chunked(rcoll_comm_t comm, const rcoll_coll_args_t *a, int staged,
                                 rcoll_request_t *req, const char *fn)
{
    size_t es = rcoll_dt_size(a->dt);
    size_t per = comm->cfg.gpu.stage_chunk / es ? comm->cfg.gpu.stage_chunk / es : 1;
    size_t nch = (a->count + per - 1) / per;
    struct rcoll_request *r = NULL;
    rcoll_status_t st = RCOLL_OK;
    if (req && (st = rcoll_req_alloc(comm, a->kind, &r)) != RCOLL_OK)
        return rcoll_api_arg_error(comm, st, "%s: %s", fn, rcoll_err_get());
    if (block_kind(a->kind)) {
        st = chunked_blocks(comm, a, staged, per, nch, fn);
        goto done;
    }
    if (!staged) { /* host buffers: the same chunks, so that every rank runs the same calls */
        for (size_t k = 0; k < nch && st == RCOLL_OK; k++) {
            size_t off = k * per, cnt = a->count - off < per ? a->count - off : per;
            rcoll_coll_args_t c = chunk_of(a, off, cnt);
            st = rcoll_api_run_host(comm, &c, NULL, NULL, NULL, NULL, fn);
        }
        goto done;
    }
    plan_t p;
    if ((st = stage_in(comm, a, NULL, fn, &comm->gpu_stage, &p, 0, 0)) != RCOLL_OK) goto done;
    if (nch > INT32_MAX) nch = INT32_MAX; /* never: counts are bounded far below */
    const void *dev = p.dev_in ? (const void *)p.dev_in : (const void *)p.dev_out;
    if (dev && (st = rcoll_gpu_pipe_get(&comm->gpu_pipe, dev, (int)nch)) != RCOLL_OK) {
        st = rcoll_api_arg_error(comm, st, "%s: pipelined staging: %s (the collective was not "
                                 "started on this rank)", fn, rcoll_err_get());
        plan_free(&p);
        goto done;
    }
    /* every chunk's copy in at once, an event after each */
    for (size_t k = 0; p.dev_in && k < nch && st == RCOLL_OK; k++) {
        size_t off = k * per * es, len = (a->count - k * per < per ? a->count - k * per : per) * es;
        st = rcoll_gpu_pipe_copy(comm->gpu_pipe, 0, (char *)p.dev_in + off, p.host_in + off,
                                 len, (int)k);
    }
    if (st != RCOLL_OK) {
        rcoll_gpu_pipe_finish(comm->gpu_pipe); /* nothing enqueued may outlive the call */
        st = rcoll_api_arg_error(comm, st, "%s: copying sendbuf %p to the staging area: %s (the "
                                 "collective was not started on this rank)", fn, p.dev_in,
                                 rcoll_err_get());
        plan_free(&p);
        goto done;
    }
    /* chunk k's collective as soon as it is in; its copy out behind the later chunks */
    size_t k = 0;
    for (; k < nch && st == RCOLL_OK; k++) {
        size_t off = k * per, cnt = a->count - off < per ? a->count - off : per;
        if (p.dev_in && (st = rcoll_gpu_pipe_wait(comm->gpu_pipe, (int)k)) != RCOLL_OK) break;
        rcoll_coll_args_t c = chunk_of(&p.h, off, cnt);
        if ((st = rcoll_api_run_host(comm, &c, NULL, NULL, NULL, NULL, fn)) != RCOLL_OK) break;
        if (p.dev_out &&
            (st = rcoll_gpu_pipe_copy(comm->gpu_pipe, 1, p.dev_out + off * es,
                                      p.host_out + off * es, cnt * es, -1)) != RCOLL_OK)
            break; /* k: the chunk that failed */
    }
    st = pipe_end(comm, st, dev != NULL, k, nch, fn);
    plan_free(&p);
done:
    if (r && st != RCOLL_OK) rcoll_req_release(r);
    if (r && st == RCOLL_OK) { /* the nonblocking form: complete at return */
        r->complete = 1;
        r->status = RCOLL_OK;
        *req = r;
    }
    return st;
}
