/*
 * api_stream.c - the stream-ordered collectives (rcoll_allreduce_stream ...): each call
 * enqueues its work on the caller's CUDA stream and returns; it never waits for the stream
 * nor runs the collective itself.  This file decides what is enqueued and owns the jobs
 * (the state a call's host function needs); the driver calls are cuda/stage.c's, the host
 * collective is queued by queue.c (stream_exec, below).  Per call, on `stream`:
 *
 *   cuMemcpyDtoHAsync(inputs -> job's pinned area)      (device buffers only)
 *   cuLaunchHostFunc(job_run): the host collective on the area, on the callback thread
 *   cuMemcpyHtoDAsync(area -> outputs)                  (device buffers, outputs here)
 *   cuLaunchHostFunc(job_release): the area may be reused (after the last copy has run)
 *
 * A job is held by the enqueuing call and by each host function enqueued for it; the last
 * to let go frees it for the next call (and counts the communicator's pending calls down).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/api_int.h"
#include "core/comm.h"
#include "cuda/gpu.h"
#include "util/log.h"
#include "util/status.h"

struct rcoll_stream_job {
    struct rcoll_stream_job *next; /* every job of the communicator */
    _Atomic int refs;              /* 0: free */
    rcoll_comm_t comm;
    rcoll_gpu_stage_t *area;       /* pinned host memory, kept for the next call */
    rcoll_coll_args_t h;           /* the call on the staged copies (or the host buffers) */
    const size_t *v[RCOLL_V_NUM];  /* the count arrays, copied into vbuf (or NULL) */
    size_t *vbuf;
    size_t vcap;
    int has_v;
    const char *fn;
    void *stream;
    uint64_t seq;                  /* the communicator's stream call number */
};

static void stream_jobs_free(rcoll_comm_t comm);

/* A free job (the one with the largest area, so that growth is rare), or a new one; NULL
 * when out of memory.  Only the enqueuing thread (holding stream_busy) looks. */
static struct rcoll_stream_job *job_take(rcoll_comm_t comm)
{
    struct rcoll_stream_job *j, *best = NULL;
    for (j = comm->stream_jobs; j; j = j->next)
        if (!atomic_load_explicit(&j->refs, memory_order_acquire) &&
            (!best || rcoll_gpu_stage_bytes(j->area) > rcoll_gpu_stage_bytes(best->area)))
            best = j;
    if (!best) {
        best = calloc(1, sizeof(*best));
        if (!best) return NULL;
        best->comm = comm;
        best->next = comm->stream_jobs;
        comm->stream_jobs = best;
        comm->free_stream_jobs = stream_jobs_free;
    }
    atomic_store_explicit(&best->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&comm->stream_pending, 1, memory_order_acq_rel);
    return best;
}

/* Let go of j; the last holder frees it.  The pending count is the last thing touched: once
 * it is 0 the communicator may be destroyed. */
static void job_put(struct rcoll_stream_job *j)
{
    rcoll_comm_t comm = j->comm;
    if (atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) == 1)
        atomic_fetch_sub_explicit(&comm->stream_pending, 1, memory_order_release);
}

/* In the host function: run the host collective h now, on the callback thread, taking the
 * communicator (waiting while another thread is inside it).  On failure the communicator is
 * marked failed, its last error prefixed with the stream call (fn, seq, stream).  A
 * communicator already failed (or aborted) runs nothing. */
static void stream_exec(rcoll_comm_t comm, const rcoll_coll_args_t *h, const size_t *const *v,
                        const char *fn, uint64_t seq, void *stream)
{
    /* Wait for the communicator: the enqueuing thread never holds in_use, so whoever does
     * (a call refused because stream calls are pending, mem queries) leaves soon. */
    for (unsigned spins = 0;
         atomic_exchange_explicit(&comm->in_use, 1, memory_order_acquire); spins++) {
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_store_explicit(&comm->in_use_fn, fn, memory_order_relaxed);
    rcoll_pt_lock(comm);
    if (comm->failed == RCOLL_OK &&
        !atomic_load_explicit(&comm->stream_abort, memory_order_acquire)) {
        rcoll_status_t st = h->kind == RCOLL_OP_BARRIER
                                ? rcoll_api_barrier_host(comm, NULL, fn)
                                : rcoll_api_run_host(comm, h, v, NULL, NULL, NULL, fn);
        if (st != RCOLL_OK) {
            /* No caller to return it to: the communicator fails, and its next call says
             * which stream call did. */
            if (comm->failed == RCOLL_OK) comm->failed = st;
            char keep[RCOLL_LAST_ERROR_MAX];
            snprintf(keep, sizeof(keep), "%s", comm->last_error);
            snprintf(comm->last_error, sizeof(comm->last_error),
                     "%s (stream call #%llu on this communicator, on stream %p) failed in "
                     "stream order: %.480s", fn, (unsigned long long)seq, stream, keep);
            RCOLL_WARN(COLL, "%s", comm->last_error);
        }
    }
    rcoll_api_leave(comm, RCOLL_OK);
}

/* Host functions: on the driver's callback thread; no CUDA calls here. */
static void job_run(void *arg)
{
    struct rcoll_stream_job *j = arg;
    stream_exec(j->comm, &j->h, j->has_v ? j->v : NULL, j->fn, j->seq, j->stream);
    job_put(j);
}

static void job_release(void *arg)
{
    job_put(arg);
}

/* Copy the count arrays the host collective will read (the caller's may be gone by then). */
static rcoll_status_t job_set_v(struct rcoll_stream_job *j, const size_t *const *v, int n)
{
    j->has_v = v != NULL;
    memset(j->v, 0, sizeof(j->v));
    if (!v) return RCOLL_OK;
    size_t need = (size_t)RCOLL_V_NUM * (size_t)n;
    if (j->vcap < need) {
        size_t *b = realloc(j->vbuf, need * sizeof(*b));
        if (!b) return RCOLL_ERR_NO_MEMORY;
        j->vbuf = b;
        j->vcap = need;
    }
    for (int k = 0; k < RCOLL_V_NUM; k++) {
        if (!v[k]) continue;
        memcpy(j->vbuf + (size_t)k * (size_t)n, v[k], (size_t)n * sizeof(size_t));
        j->v[k] = j->vbuf + (size_t)k * (size_t)n;
    }
    return RCOLL_OK;
}

/* After a failure to enqueue: work already enqueued for j may still use its area; wait for
 * the stream (an error here means the stream will run nothing more) before letting go. */
static void enqueue_failed(struct rcoll_stream_job *j, int enqueued)
{
    if (enqueued) rcoll_gpu_stream_sync(j->stream);
    job_put(j);
}

rcoll_status_t rcoll_api_stream_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                     const size_t *const *v, int staged, void *stream,
                                     const char *fn)
{
    rcoll_status_t st = rcoll_gpu_stream_check(stream);
    if (st != RCOLL_OK) return rcoll_api_arg_error(comm, st, "%s: %s", fn, rcoll_err_get());
    struct rcoll_stream_job *j = job_take(comm);
    if (!j || job_set_v(j, v, comm->nranks) != RCOLL_OK) {
        if (j) job_put(j);
        return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    rcoll_stage_call_t c = {.h = *a};
    if (staged) {
        st = rcoll_api_stage_prepare(comm, a, v, fn, &j->area, &c);
        if (st != RCOLL_OK) {
            job_put(j);
            return st;
        }
    }
    j->h = c.h;
    j->fn = fn;
    j->stream = stream;
    j->seq = ++comm->stream_seq;
    const char *sname = a->kind == RCOLL_OP_BCAST ? "buf" : "sendbuf";
    const char *rname = a->kind == RCOLL_OP_BCAST ? "buf" : "recvbuf";

    /* 1. the inputs into the area */
    int enq = 0, any = 0;
    if (c.dev_in) {
        st = rcoll_gpu_stream_copy(0, c.dev_in, c.host_in, c.in, c.nin, stream, &enq);
        any |= enq;
        if (st != RCOLL_OK) {
            st = rcoll_api_arg_error(comm, st, "%s: enqueueing the copy of %s %p to the staging "
                                     "area: %s (the collective was not enqueued on this rank)",
                                     fn, sname, c.dev_in, rcoll_err_get());
            goto err;
        }
    }
    /* 2. the collective */
    atomic_fetch_add_explicit(&j->refs, 1, memory_order_relaxed);
    st = rcoll_gpu_stream_host_fn(stream, job_run, j);
    if (st != RCOLL_OK) {
        atomic_fetch_sub_explicit(&j->refs, 1, memory_order_relaxed);
        st = rcoll_api_arg_error(comm, st, "%s: enqueueing the collective: %s (the collective "
                                 "was not enqueued on this rank)", fn, rcoll_err_get());
        goto err;
    }
    any = 1;
    /* 3. the outputs back, then the area free */
    if (c.dev_out && c.nout) {
        st = rcoll_gpu_stream_copy(1, c.dev_out, c.host_out, c.out, c.nout, stream, &enq);
        if (st != RCOLL_OK) {
            st = rcoll_api_arg_error(comm, st, "%s: enqueueing the copy of the result to %s "
                                     "%p: %s (the collective is enqueued and runs, but its "
                                     "result will not reach %s)", fn, rname, c.dev_out,
                                     rcoll_err_get(), rname);
            goto err;
        }
        atomic_fetch_add_explicit(&j->refs, 1, memory_order_relaxed);
        st = rcoll_gpu_stream_host_fn(stream, job_release, j);
        if (st != RCOLL_OK) {
            atomic_fetch_sub_explicit(&j->refs, 1, memory_order_relaxed);
            /* everything is enqueued: only the area's release is not; waiting for the stream
             * stands in for it */
            st = rcoll_api_arg_error(comm, st, "%s: enqueueing the release of the staging "
                                     "area: %s (the collective and its copies are enqueued; "
                                     "this call waited for the stream instead)", fn,
                                     rcoll_err_get());
            goto err;
        }
    }
    rcoll_api_stage_call_free(&c);
    job_put(j);
    return RCOLL_OK;

err:
    rcoll_api_stage_call_free(&c);
    enqueue_failed(j, any);
    return st;
}

/* The stream calls' jobs and their areas (the communicator's free_stream_jobs: none may be
 * pending). */
static void stream_jobs_free(rcoll_comm_t comm)
{
    struct rcoll_stream_job *j = comm->stream_jobs;
    while (j) {
        struct rcoll_stream_job *nx = j->next;
        rcoll_gpu_stage_free(&j->area);
        free(j->vbuf);
        free(j);
        j = nx;
    }
    comm->stream_jobs = NULL;
}

size_t rcoll_stream_bytes(rcoll_comm_t comm)
{
    size_t total = 0;
    for (struct rcoll_stream_job *j = comm->stream_jobs; j; j = j->next)
        total += sizeof(*j) + j->vcap * sizeof(size_t) + rcoll_gpu_stage_bytes(j->area);
    return total;
}
