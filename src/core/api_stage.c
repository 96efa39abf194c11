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
#include <stdint.h>
#include <stdlib.h>

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

rcoll_status_t rcoll_api_stage_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                    const size_t *const *v, const char *fn)
{
    size_t n = (size_t)comm->nranks + 1;
    const char *sname = a->kind == RCOLL_OP_BCAST ? "buf" : "sendbuf";
    const char *rname = a->kind == RCOLL_OP_BCAST ? "buf" : "recvbuf";
    spans_t in = {.cap = n}, out = {.cap = n};
    in.span = malloc(n * sizeof(*in.span));
    out.span = malloc(n * sizeof(*out.span));
    if (!in.span || !out.span) {
        free(in.span);
        free(out.span);
        return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    call_spans(comm, a, v, &in, &out);

    /* Regions: src's and dst's extents; one region when they overlap (in place). */
    const char *s = in.extent ? a->src : NULL;
    char *d = out.extent ? a->dst : NULL;
    size_t sext = in.extent, dext = out.extent;
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

    rcoll_coll_args_t h = *a;
    rcoll_status_t st = RCOLL_OK;
    char *host = NULL;
    if (total) {
        st = rcoll_gpu_stage_reserve(&comm->gpu_stage, s ? (const void *)s : d, total,
                                     (void **)&host);
        if (st != RCOLL_OK) {
            st = rcoll_api_arg_error(comm, st, "%s: staging %s %p through pinned host memory: "
                                     "%s", fn, s ? sname : rname, s ? (const void *)s : d,
                                     rcoll_err_get());
            goto out;
        }
        if (s) h.src = host + soff;
        if (d) h.dst = host + doff;
        /* a dst this rank writes nothing to, inside src's region (an own block): keep the
         * aliasing the host collective may look at */
        if (!d && s && a->dst && (uintptr_t)a->dst >= (uintptr_t)s &&
            (uintptr_t)a->dst <= (uintptr_t)s + sext)
            h.dst = host + soff + ((uintptr_t)a->dst - (uintptr_t)s);
        st = rcoll_gpu_stage_copy(0, (void *)s, host + soff, in.span, in.n);
        if (st != RCOLL_OK) {
            st = rcoll_api_arg_error(comm, st, "%s: copying %s %p to the staging area: %s "
                                     "(the collective was not started on this rank)", fn,
                                     sname, (const void *)s, rcoll_err_get());
            goto out;
        }
    }
    st = rcoll_api_run_host(comm, &h, v, fn);
    if (st != RCOLL_OK || !out.n) goto out;
    st = rcoll_gpu_stage_copy(1, d, host + doff, out.span, out.n);
    if (st != RCOLL_OK)
        st = rcoll_api_arg_error(comm, st, "%s: copying the result from the staging area to %s "
                                 "%p: %s (the collective itself completed)", fn, rname,
                                 (void *)d, rcoll_err_get());
out:
    free(in.span);
    free(out.span);
    return st;
}
