/*
 * pipe.c - the driver side of pipelined staging (core/api_stage.c decides the chunks): two
 * streams of a communicator, one for the copies in (device to pinned host) and one for the
 * copies out, and an event after each copy in, so that the host collective of chunk k starts
 * as soon as chunk k is in while the later chunks are still being copied.  Everything runs in
 * the context the streams were made in (that of the first buffers staged this way; buffers of
 * another context make new ones).  Each failure is one sentence naming the driver call.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "util/log.h"
#include "util/status.h"

struct rcoll_gpu_pipe {
    CUcontext ctx;
    CUstream in, out;
    CUevent *ev;
    int nev;
};

static rcoll_status_t enter(const rcoll_gpu_pipe_t *p, CUcontext *saved)
{
    return rcoll_gpu_ctx_push(p->ctx, "the staging streams' context", saved);
}

static void leave(const rcoll_gpu_pipe_t *p, CUcontext saved)
{
    rcoll_gpu_ctx_pop(p->ctx, saved);
}

void rcoll_gpu_pipe_free(rcoll_gpu_pipe_t **pp)
{
    rcoll_gpu_pipe_t *p = *pp;
    *pp = NULL;
    if (!p) return;
    CUcontext saved = NULL;
    if (p->ctx && enter(p, &saved) == RCOLL_OK) {
        const rcoll_cu_api_t *cu = rcoll_cu;
        if (p->in) cu->cuStreamSynchronize(p->in);
        if (p->out) cu->cuStreamSynchronize(p->out);
        for (int i = 0; i < p->nev; i++)
            if (p->ev[i]) cu->cuEventDestroy(p->ev[i]);
        if (p->in) cu->cuStreamDestroy(p->in);
        if (p->out) cu->cuStreamDestroy(p->out);
        leave(p, saved);
    }
    free(p->ev);
    free(p);
}

rcoll_status_t rcoll_gpu_pipe_get(rcoll_gpu_pipe_t **pp, const void *dev, int nev)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    CUcontext saved = NULL, ctx = NULL;
    int switched = 0;
    rcoll_status_t st = rcoll_gpu_ctx_enter(dev, &saved, &switched);
    if (st != RCOLL_OK) return st;
    CUresult res = cu->cuCtxGetCurrent(&ctx);
    rcoll_gpu_ctx_leave(saved, switched);
    if (res != CUDA_SUCCESS) return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuCtxGetCurrent");
    if (*pp && (*pp)->ctx != ctx) rcoll_gpu_pipe_free(pp); /* buffers of another context */
    rcoll_gpu_pipe_t *p = *pp;
    if (!p) {
        if (!(p = calloc(1, sizeof(*p))))
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory (staging streams)");
        p->ctx = ctx;
        *pp = p;
        if ((st = enter(p, &saved)) != RCOLL_OK) return st;
        /* blocking streams: they follow the application's work on the legacy stream, as
         * the synchronous staging copies do */
        if ((res = cu->cuStreamCreate(&p->in, CU_STREAM_DEFAULT)) != CUDA_SUCCESS ||
            (res = cu->cuStreamCreate(&p->out, CU_STREAM_DEFAULT)) != CUDA_SUCCESS)
            st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuStreamCreate(a staging stream)");
        leave(p, saved);
        if (st != RCOLL_OK) {
            rcoll_gpu_pipe_free(pp);
            return st;
        }
    }
    if (nev > p->nev) {
        CUevent *ev = realloc(p->ev, (size_t)nev * sizeof(*ev));
        if (!ev) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory (staging events)");
        p->ev = ev;
        if ((st = enter(p, &saved)) != RCOLL_OK) return st;
        for (; p->nev < nev; p->nev++) {
            p->ev[p->nev] = NULL;
            if ((res = cu->cuEventCreate(&p->ev[p->nev], CU_EVENT_DISABLE_TIMING)) !=
                CUDA_SUCCESS) {
                st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuEventCreate(a staging event)");
                break;
            }
        }
        leave(p, saved);
    }
    return st;
}

rcoll_status_t rcoll_gpu_pipe_copy(rcoll_gpu_pipe_t *p, int to_device, void *dev, void *host,
                                   size_t len, int mark)
{
    if (mark >= p->nev)
        return rcoll_err_set(RCOLL_ERR_INTERNAL, "staging event %d of %d", mark, p->nev);
    rcoll_gpu_span_t span = {0, len};
    CUstream s = to_device ? p->out : p->in;
    int enq = 0;
    rcoll_status_t st = rcoll_gpu_stream_copy(to_device, dev, host, &span, 1, s, &enq);
    if (st != RCOLL_OK || mark < 0) return st;
    CUcontext saved;
    if ((st = enter(p, &saved)) != RCOLL_OK) return st;
    CUresult res = rcoll_cu->cuEventRecord(p->ev[mark], s);
    leave(p, saved);
    if (res != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuEventRecord(a staging event)");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_pipe_wait(rcoll_gpu_pipe_t *p, int mark)
{
    CUresult res = rcoll_cu->cuEventSynchronize(p->ev[mark]);
    if (res != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuEventSynchronize(a staging event)");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_pipe_finish(rcoll_gpu_pipe_t *p)
{
    CUresult r1 = rcoll_cu->cuStreamSynchronize(p->in);
    CUresult r2 = rcoll_cu->cuStreamSynchronize(p->out);
    if (r1 != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, r1, "cuStreamSynchronize(the staging stream in)");
    if (r2 != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, r2, "cuStreamSynchronize(the staging stream out)");
    return RCOLL_OK;
}
