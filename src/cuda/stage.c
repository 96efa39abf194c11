/*
 * stage.c - the staging area of the device path: pinned host memory per communicator and
 * the synchronous copies between it and device (or managed) buffers, each made with the
 * buffer's own CUDA context current.  What is copied, and when, is core's business
 * (core/api_stage.c, core/api_stream.c); this file only talks to the driver and says which
 * call failed.  The stream-ordered forms only enqueue (cuMemcpy*Async, cuLaunchHostFunc).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "util/log.h"
#include "util/status.h"

typedef struct retired {
    struct retired *next;
    void *host;
    size_t bytes;
    CUcontext ctx;
} retired_t;

struct rcoll_gpu_pinned {
    pthread_mutex_t lock;
    size_t cap;        /* 0: no bound */
    size_t held;       /* every area's bytes and the retired ones' (reserved before allocating) */
    size_t retired_bytes;
    retired_t *retired;
};

struct rcoll_gpu_stage {
    void *host;     /* cuMemHostAlloc (portable), or NULL */
    size_t bytes;
    CUcontext ctx;  /* current when host was allocated: freed in it */
    rcoll_gpu_pinned_t *pool; /* where its bytes are counted (NULL: nowhere) */
};

rcoll_status_t rcoll_gpu_ctx_enter(const void *dev, CUcontext *saved, int *switched)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    char text[160];
    CUcontext ctx = NULL, cur = NULL;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_CONTEXT;
    void *data = &ctx;
    *switched = 0;
    CUresult res = cu->cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)dev);
    if (res != CUDA_SUCCESS)
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "cuPointerGetAttributes(%p, CONTEXT) failed: %s",
                             dev, rcoll_cu_strerror(res, text, sizeof(text)));
    res = cu->cuCtxGetCurrent(&cur);
    if (res != CUDA_SUCCESS)
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "cuCtxGetCurrent failed: %s",
                             rcoll_cu_strerror(res, text, sizeof(text)));
    *saved = cur;
    if (!ctx || ctx == cur) return RCOLL_OK; /* no context of its own (VMM), or current */
    res = cu->cuCtxSetCurrent(ctx);
    if (res != CUDA_SUCCESS)
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "cuCtxSetCurrent(the context of %p) failed: %s",
                             dev, rcoll_cu_strerror(res, text, sizeof(text)));
    *switched = 1;
    return RCOLL_OK;
}

void rcoll_gpu_ctx_leave(CUcontext saved, int switched)
{
    if (!switched) return;
    CUresult res = rcoll_cu->cuCtxSetCurrent(saved);
    if (res != CUDA_SUCCESS) {
        char text[160];
        RCOLL_WARN(CUDA, "cuCtxSetCurrent(the caller's context) failed: %s",
                   rcoll_cu_strerror(res, text, sizeof(text)));
    }
}

/* cuMemFreeHost of host, allocated with ctx current (made current for the call). */
static void pinned_release(void *host, size_t bytes, CUcontext ctx)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    CUcontext cur = NULL;
    int switched = 0;
    char text[160];
    if (cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && ctx && ctx != cur)
        switched = cu->cuCtxSetCurrent(ctx) == CUDA_SUCCESS;
    CUresult res = cu->cuMemFreeHost(host);
    if (res != CUDA_SUCCESS)
        RCOLL_WARN(CUDA, "cuMemFreeHost(%p, the %zu-byte staging area) failed: %s", host, bytes,
                   rcoll_cu_strerror(res, text, sizeof(text)));
    if (switched) cu->cuCtxSetCurrent(cur);
}

static void pool_add(rcoll_gpu_pinned_t *pool, size_t bytes, int sign)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    pool->held = sign > 0 ? pool->held + bytes : pool->held - bytes;
    pthread_mutex_unlock(&pool->lock);
}

static void host_free(rcoll_gpu_stage_t *s)
{
    if (!s->host) return;
    pinned_release(s->host, s->bytes, s->ctx);
    pool_add(s->pool, s->bytes, -1);
    s->host = NULL;
    s->bytes = 0;
    s->ctx = NULL;
}

/* Free the pool's retired areas (outside stream order only). */
static void pool_trim(rcoll_gpu_pinned_t *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    retired_t *r = pool->retired;
    pool->retired = NULL;
    pool->held -= pool->retired_bytes;
    pool->retired_bytes = 0;
    pthread_mutex_unlock(&pool->lock);
    while (r) {
        retired_t *next = r->next;
        pinned_release(r->host, r->bytes, r->ctx);
        free(r);
        r = next;
    }
}

rcoll_gpu_pinned_t *rcoll_gpu_pinned_new(size_t cap)
{
    rcoll_gpu_pinned_t *pool = calloc(1, sizeof(*pool));
    if (!pool) return NULL;
    pthread_mutex_init(&pool->lock, NULL);
    pool->cap = cap;
    return pool;
}

void rcoll_gpu_pinned_free(rcoll_gpu_pinned_t **pool_p)
{
    rcoll_gpu_pinned_t *pool = *pool_p;
    *pool_p = NULL;
    if (!pool) return;
    if (rcoll_cu) pool_trim(pool);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

size_t rcoll_gpu_pinned_held(const rcoll_gpu_pinned_t *pool)
{
    return pool ? __atomic_load_n(&pool->held, __ATOMIC_RELAXED) : 0;
}

size_t rcoll_gpu_pinned_retired(const rcoll_gpu_pinned_t *pool)
{
    return pool ? __atomic_load_n(&pool->retired_bytes, __ATOMIC_RELAXED) : 0;
}

rcoll_status_t rcoll_gpu_stage_reserve(rcoll_gpu_stage_t **stage_p, rcoll_gpu_pinned_t *pool,
                                       const void *dev, size_t bytes, int flags, void **host_p)
{
    rcoll_gpu_stage_t *s = *stage_p;
    int in_stream = (flags & RCOLL_GPU_STAGE_IN_STREAM) != 0;
    if (s && s->host && s->bytes >= bytes) {
        *host_p = s->host;
        return RCOLL_OK;
    }
    if (!rcoll_cu)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no CUDA driver in use: nothing to stage");
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory (staging area)");
        s->pool = pool;
        *stage_p = s;
    }
    size_t had = s->bytes;
    /* At least double, and round up to 64 KiB: counts creeping up reallocate a few times,
     * not at every call. */
    size_t want = bytes;
    if (had && had <= ((size_t)-1 >> 2) && want < 2 * had) want = 2 * had;
    if (want <= ((size_t)-1 >> 1)) want = (want + 0xffff) & ~(size_t)0xffff;
    if (!in_stream) pool_trim(pool); /* what stream-ordered calls outgrew: free now */
    if (pool) {
        pthread_mutex_lock(&pool->lock);
        /* outside stream order the old area goes first; in stream order it is retired */
        size_t after = pool->held - (in_stream ? 0 : had) + want;
        int over = pool->cap && after > pool->cap;
        size_t exact = bytes <= ((size_t)-1 >> 1) ? (bytes + 0xffff) & ~(size_t)0xffff : bytes;
        if (over && exact < want) { /* the doubling would pass the bound: just what is asked */
            after -= want - exact;
            want = exact;
            over = after > pool->cap;
        }
        size_t held = pool->held, retired = pool->retired_bytes;
        if (!over) pool->held += want; /* reserved now, given back if the allocation fails */
        pthread_mutex_unlock(&pool->lock);
        if (over)
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY,
                                 "%zu bytes of staging area would hold %zu bytes of pinned host "
                                 "memory in this communicator, over RCOLL_STAGE_PINNED_MAX=%zu "
                                 "(its areas hold %zu now%s; raise the knob, or keep fewer "
                                 "staged calls in flight)", want, after, pool->cap, held,
                                 retired ? ", some outgrown by stream-ordered calls and freed "
                                           "at the next call outside stream order" : "");
    }
    if (s->host && in_stream) { /* retired: no cuMemFreeHost in a stream-ordered call */
        retired_t *r = malloc(sizeof(*r));
        if (!r) {
            pool_add(pool, want, -1);
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory (staging area)");
        }
        *r = (retired_t){NULL, s->host, s->bytes, s->ctx};
        if (pool) {
            pthread_mutex_lock(&pool->lock);
            r->next = pool->retired;
            pool->retired = r;
            pool->retired_bytes += r->bytes;
            pthread_mutex_unlock(&pool->lock);
        } else {
            pinned_release(r->host, r->bytes, r->ctx); /* no pool: nowhere to keep it */
            free(r);
        }
        s->host = NULL;
        s->bytes = 0;
        s->ctx = NULL;
    } else {
        host_free(s); /* grown: the old contents are not needed */
    }
    CUcontext saved = NULL;
    int switched = 0;
    rcoll_status_t st = rcoll_gpu_ctx_enter(dev, &saved, &switched);
    if (st != RCOLL_OK) {
        pool_add(pool, want, -1);
        return st;
    }
    void *host = NULL;
    CUcontext ctx = NULL;
    rcoll_cu->cuCtxGetCurrent(&ctx);
    /* Portable: pinned for every context of the process, not only the current one (a process
     * driving several GPUs stages each one's buffers through its areas). */
    CUresult res = rcoll_cu->cuMemHostAlloc(&host, want, CU_MEMHOSTALLOC_PORTABLE);
    rcoll_gpu_ctx_leave(saved, switched);
    if (res != CUDA_SUCCESS || !host) {
        char text[160];
        pool_add(pool, want, -1);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "cuMemHostAlloc(%zu bytes, portable) for the staging "
                             "area failed: %s", want,
                             res != CUDA_SUCCESS ? rcoll_cu_strerror(res, text, sizeof(text))
                                                 : "no memory returned");
    }
    s->host = host;
    s->bytes = want;
    s->ctx = ctx;
    RCOLL_INFO(CUDA, "staging area: %zu bytes of pinned host memory at %p", want, host);
    *host_p = host;
    return RCOLL_OK;
}

/* The spans' copies between dev and host in dev's context: synchronous (async 0) or enqueued
 * on stream; *enqueued (when not NULL) = 1 once one copy was enqueued. */
static rcoll_status_t span_copy(int to_device, void *dev, void *host,
                                const rcoll_gpu_span_t *spans, size_t nspans, int async,
                                void *stream, int *enqueued)
{
    size_t i = 0;
    while (i < nspans && !spans[i].len) i++;
    if (i == nspans) return RCOLL_OK;
    if (!rcoll_cu)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no CUDA driver in use: nothing to stage");
    CUcontext saved = NULL;
    int switched = 0;
    rcoll_status_t st = rcoll_gpu_ctx_enter(dev, &saved, &switched);
    for (; st == RCOLL_OK && i < nspans; i++) {
        size_t off = spans[i].off, len = spans[i].len;
        if (!len) continue;
        CUdeviceptr d = (CUdeviceptr)((char *)dev + off);
        char *h = (char *)host + off;
        CUstream cs = (CUstream)stream;
        CUresult res = !async ? (to_device ? rcoll_cu->cuMemcpyHtoD(d, h, len)
                                           : rcoll_cu->cuMemcpyDtoH(h, d, len))
                              : (to_device ? rcoll_cu->cuMemcpyHtoDAsync(d, h, len, cs)
                                           : rcoll_cu->cuMemcpyDtoHAsync(h, d, len, cs));
        if (res != CUDA_SUCCESS) {
            char text[160], on[48] = "";
            if (async) snprintf(on, sizeof(on), " on stream %p", stream);
            st = rcoll_err_set(RCOLL_ERR_SYSTEM, "%s%s of %zu bytes %s %p%s failed: %s",
                               to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH", async ? "Async" : "",
                               len, to_device ? "to" : "from", (void *)d, on,
                               rcoll_cu_strerror(res, text, sizeof(text)));
        } else if (enqueued) {
            *enqueued = 1;
        }
    }
    rcoll_gpu_ctx_leave(saved, switched);
    return st;
}

rcoll_status_t rcoll_gpu_stage_copy(int to_device, void *dev, void *host,
                                    const rcoll_gpu_span_t *spans, size_t nspans)
{
    return span_copy(to_device, dev, host, spans, nspans, 0, NULL, NULL);
}

size_t rcoll_gpu_stage_bytes(const rcoll_gpu_stage_t *stage)
{
    return stage ? stage->bytes : 0;
}

void rcoll_gpu_stage_free(rcoll_gpu_stage_t **stage_p)
{
    rcoll_gpu_stage_t *s = *stage_p;
    if (!s) return;
    if (s->host && rcoll_cu) host_free(s);
    free(s);
    *stage_p = NULL;
}

/* ---- stream order: enqueue only (core/api_stream.c) ---- */

rcoll_status_t rcoll_gpu_stream_check(void *stream)
{
    if (!rcoll_cu)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no CUDA driver in use: stream calls need "
                             "it (RCOLL_CUDA=1, docs/gpu.md)");
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult res = rcoll_cu->cuStreamIsCapturing((CUstream)stream, &cs);
    if (res != CUDA_SUCCESS) {
        char text[160];
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "cuStreamIsCapturing(stream %p) failed: %s",
                             stream, rcoll_cu_strerror(res, text, sizeof(text)));
    }
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "stream %p is %s: rcoll's stream calls "
                             "cannot be captured into a CUDA graph (each would run its "
                             "collective once per replay in a host function holding state of "
                             "this call; not supported yet, docs/gpu.md): enqueue the call "
                             "outside the capture", stream,
                             cs == CU_STREAM_CAPTURE_STATUS_ACTIVE
                                 ? "being captured into a CUDA graph"
                                 : "in a capture that was invalidated");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_stream_copy(int to_device, void *dev, void *host,
                                     const rcoll_gpu_span_t *spans, size_t nspans,
                                     void *stream, int *enqueued_p)
{
    *enqueued_p = 0;
    return span_copy(to_device, dev, host, spans, nspans, 1, stream, enqueued_p);
}

rcoll_status_t rcoll_gpu_stream_host_fn(void *stream, rcoll_gpu_host_fn_t fn, void *arg)
{
    if (!rcoll_cu)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no CUDA driver in use");
    CUresult res = rcoll_cu->cuLaunchHostFunc((CUstream)stream, fn, arg);
    if (res != CUDA_SUCCESS) {
        char text[160];
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "cuLaunchHostFunc(stream %p) failed: %s", stream,
                             rcoll_cu_strerror(res, text, sizeof(text)));
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_stream_sync(void *stream)
{
    if (!rcoll_cu) return RCOLL_OK;
    CUresult res = rcoll_cu->cuStreamSynchronize((CUstream)stream);
    if (res != CUDA_SUCCESS) {
        char text[160];
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "cuStreamSynchronize(stream %p) failed: %s",
                             stream, rcoll_cu_strerror(res, text, sizeof(text)));
    }
    return RCOLL_OK;
}
