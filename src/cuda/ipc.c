/*
 * ipc.c - the driver side of the CUDA IPC all-reduce (core/api_ipc.c runs the protocol): each
 * rank's device workspace, exported with cuIpcGetMemHandle and mapped by the other ranks of
 * the host with cuIpcOpenMemHandle, a stream of its own, and the copies and reductions on it.
 * Everything runs in the context the workspace was allocated in (that of the first buffers
 * that used it); each failure is one sentence naming the driver call and its CUresult.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "cuda/kernels.h"
#include "util/log.h"
#include "util/status.h"

#define BUS_OFF CU_IPC_HANDLE_SIZE /* where the bus id starts in a handle record */
#define BUS_LEN 32
_Static_assert(RCOLL_GPU_IPC_HANDLE_BYTES == CU_IPC_HANDLE_SIZE + BUS_LEN, "IPC record size");

struct rcoll_gpu_ipc {
    CUcontext ctx;     /* of the workspace, the stream and every operation */
    CUdeviceptr own;   /* this rank's workspace (cuMemAlloc) */
    size_t bytes;
    CUstream stream;
    CUdevice dev;      /* the workspace's GPU */
    char bus[BUS_LEN]; /* and its PCI bus id */
    int nranks, rank;
    CUdeviceptr *peer; /* [nranks]: each rank's workspace as mapped here (own for this rank;
                        * 0 where not opened) */
    int blocks;               /* the one-kernel all-reduce's grid: proposed, then agreed */
    rcoll_oneshot_err_t *err; /* its reports, [RCOLL_ONESHOT_MAX_BLOCKS] (cuMemAllocHost) */
    /* The stream-ordered one-kernel calls: per ring entry an event after its kernel and its
     * reports (made at the first such call); the entry of the last one launched (-1: none
     * since the last blocking one, which was waited for). */
    CUevent ring_ev[RCOLL_GPU_IPC_RING];
    int ring_busy[RCOLL_GPU_IPC_RING];
    rcoll_oneshot_err_t *ring_err; /* [RCOLL_GPU_IPC_RING][RCOLL_ONESHOT_MAX_BLOCKS] */
    int ring_next, ring_last;
};

static rcoll_status_t enter(const rcoll_gpu_ipc_t *ipc, CUcontext *saved)
{
    return rcoll_gpu_ctx_push(ipc->ctx, "the IPC workspace's context", saved);
}

static void leave(const rcoll_gpu_ipc_t *ipc, CUcontext saved)
{
    rcoll_gpu_ctx_pop(ipc->ctx, saved);
}

rcoll_status_t rcoll_gpu_ipc_create(const void *dev, size_t bytes, int rank, int nranks,
                                    rcoll_gpu_ipc_t **ipc_p, void *handle)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    *ipc_p = NULL;
    memset(handle, 0, RCOLL_GPU_IPC_HANDLE_BYTES);
    rcoll_gpu_ipc_t *ipc = calloc(1, sizeof(*ipc));
    CUdeviceptr *peer = calloc((size_t)nranks, sizeof(*peer));
    if (!ipc || !peer) {
        free(ipc);
        free(peer);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory for the CUDA IPC state");
    }
    ipc->peer = peer;
    ipc->ring_last = -1;
    ipc->nranks = nranks;
    ipc->rank = rank;
    CUcontext saved = NULL;
    int switched = 0;
    rcoll_status_t st = rcoll_gpu_ctx_enter(dev, &saved, &switched);
    if (st != RCOLL_OK) goto err;
    CUresult res = cu->cuCtxGetCurrent(&ipc->ctx);
    if (res == CUDA_SUCCESS && !ipc->ctx) res = CUDA_ERROR_INVALID_CONTEXT;
    if (res != CUDA_SUCCESS) {
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuCtxGetCurrent (the buffers' context)");
        goto err_ctx;
    }
    if ((res = cu->cuCtxGetDevice(&ipc->dev)) != CUDA_SUCCESS ||
        (res = cu->cuDeviceGetPCIBusId(ipc->bus, BUS_LEN, ipc->dev)) != CUDA_SUCCESS) {
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res,
                           "cuCtxGetDevice / cuDeviceGetPCIBusId (the buffers' GPU)");
        goto err_ctx;
    }
    ipc->bus[BUS_LEN - 1] = '\0';
    int sms = 0;
    if ((res = cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                        ipc->dev)) != CUDA_SUCCESS) {
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT) "
                           "(the buffers' GPU)");
        goto err_ctx;
    }
    /* at most one block per SM: every block spins until its peers' arrive, so the whole grid
     * should be on the GPU at once */
    ipc->blocks = sms < 1 ? 1 : sms < RCOLL_ONESHOT_MAX_BLOCKS ? sms : RCOLL_ONESHOT_MAX_BLOCKS;
    char what[96];
    if ((res = cu->cuMemAlloc(&ipc->own, bytes)) != CUDA_SUCCESS) {
        snprintf(what, sizeof(what), "cuMemAlloc(%zu bytes) for the CUDA IPC workspace", bytes);
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, what);
        ipc->own = 0;
        goto err_ctx;
    }
    ipc->bytes = bytes;
    /* The one-kernel all-reduce's header (the flags the peers push here, the abort word)
     * starts at 0; complete before any peer can write or read it (only after the set-up's
     * last host collective). */
    if ((res = cu->cuMemsetD8(ipc->own, 0, bytes < RCOLL_ONESHOT_HDR ? bytes
                                                                     : RCOLL_ONESHOT_HDR)) !=
            CUDA_SUCCESS ||
        (res = cu->cuCtxSynchronize()) != CUDA_SUCCESS) {
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "clearing the CUDA IPC workspace's flags "
                           "(cuMemsetD8, cuCtxSynchronize)");
        goto err_ctx;
    }
    void *err = NULL;
    if ((res = cu->cuMemAllocHost(&err, RCOLL_ONESHOT_MAX_BLOCKS *
                                            sizeof(rcoll_oneshot_err_t))) != CUDA_SUCCESS) {
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuMemAllocHost(the one-kernel all-reduce's "
                           "reports)");
        goto err_ctx;
    }
    ipc->err = err;
    if ((res = cu->cuIpcGetMemHandle((CUipcMemHandle *)handle, ipc->own)) != CUDA_SUCCESS) {
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuIpcGetMemHandle(the CUDA IPC workspace)");
        goto err_ctx;
    }
    /* A blocking stream: its work waits for what the application queued on the legacy
     * default stream before the call, as the staging path's synchronous copies do. */
    if ((res = cu->cuStreamCreate(&ipc->stream, CU_STREAM_DEFAULT)) != CUDA_SUCCESS) {
        st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuStreamCreate(the CUDA IPC stream)");
        ipc->stream = NULL;
        goto err_ctx;
    }
    memcpy((char *)handle + BUS_OFF, ipc->bus, BUS_LEN);
    ipc->peer[rank] = ipc->own;
    rcoll_gpu_ctx_leave(saved, switched);
    *ipc_p = ipc;
    return RCOLL_OK;
err_ctx:
    rcoll_gpu_ctx_leave(saved, switched);
err:
    rcoll_gpu_ipc_free(&ipc, 0);
    return st;
}

rcoll_status_t rcoll_gpu_ipc_open(rcoll_gpu_ipc_t *ipc, const void *handles)
{
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    for (int p = 0; p < ipc->nranks && st == RCOLL_OK; p++) {
        if (p == ipc->rank) continue;
        const char *rec = (const char *)handles + (size_t)p * RCOLL_GPU_IPC_HANDLE_BYTES;
        char bus[BUS_LEN];
        memcpy(bus, rec + BUS_OFF, BUS_LEN);
        bus[BUS_LEN - 1] = '\0';
        if (strcmp(bus, ipc->bus) != 0) { /* another GPU: visible here, reachable directly? */
            CUdevice d;
            int can = 0;
            if (rcoll_cu->cuDeviceGetByPCIBusId(&d, bus) != CUDA_SUCCESS) {
                const char *vis = getenv("CUDA_VISIBLE_DEVICES");
                st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rank %d's GPU %s is not visible to "
                                   "this process (CUDA_VISIBLE_DEVICES=%s)", p, bus,
                                   vis ? vis : "(not set)");
                break;
            }
            CUresult res = rcoll_cu->cuDeviceCanAccessPeer(&can, ipc->dev, d);
            if (res != CUDA_SUCCESS) {
                st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuDeviceCanAccessPeer");
                break;
            }
            if (!can) {
                st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "this rank's GPU %s cannot access "
                                   "rank %d's GPU %s directly (no NVLink or PCIe "
                                   "peer-to-peer between them)", ipc->bus, p, bus);
                break;
            }
        }
        CUipcMemHandle h;
        memcpy(&h, rec, sizeof(h));
        CUresult res = rcoll_cu->cuIpcOpenMemHandle(&ipc->peer[p], h,
                                                    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (res != CUDA_SUCCESS) {
            char what[96];
            snprintf(what, sizeof(what), "cuIpcOpenMemHandle(rank %d's workspace)", p);
            st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, what);
            ipc->peer[p] = 0;
        }
    }
    leave(ipc, saved);
    return st;
}

void rcoll_gpu_ipc_bus(const void *handle, char *bus, size_t len)
{
    snprintf(bus, len, "%.*s", BUS_LEN - 1, (const char *)handle + BUS_OFF);
}

char *rcoll_gpu_ipc_base(const rcoll_gpu_ipc_t *ipc, int rank)
{
    return (char *)(uintptr_t)ipc->peer[rank];
}

int rcoll_gpu_ipc_blocks_proposed(const rcoll_gpu_ipc_t *ipc)
{
    return ipc->blocks;
}

void rcoll_gpu_ipc_blocks_set(rcoll_gpu_ipc_t *ipc, int blocks)
{
    ipc->blocks = blocks;
}

size_t rcoll_gpu_ipc_bytes(const rcoll_gpu_ipc_t *ipc)
{
    return ipc ? ipc->bytes : 0;
}

rcoll_status_t rcoll_gpu_ipc_copy(rcoll_gpu_ipc_t *ipc, void *dst, const void *src,
                                  size_t bytes)
{
    if (!bytes) return RCOLL_OK;
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    CUresult res = rcoll_cu->cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst,
                                               (CUdeviceptr)(uintptr_t)src, bytes, ipc->stream);
    leave(ipc, saved);
    if (res != CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof(what), "cuMemcpyDtoDAsync of %zu bytes from %p to %p", bytes, src,
                 dst);
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, what);
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_ipc_reduce(rcoll_gpu_ipc_t *ipc, void *dst, const void *a,
                                    const void *b, size_t count, rcoll_datatype_t dt,
                                    rcoll_op_t op, int avg_divisor)
{
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    st = rcoll_cuda_reduce((CUdeviceptr)(uintptr_t)dst, 0, (CUdeviceptr)(uintptr_t)a,
                           (CUdeviceptr)(uintptr_t)b, count, dt, op, avg_divisor, ipc->stream);
    leave(ipc, saved);
    return st;
}

rcoll_status_t rcoll_gpu_ipc_reduce_all(rcoll_gpu_ipc_t *ipc, void *dst, size_t at,
                                        size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                                        int avg_divisor)
{
    if (ipc->nranks > RCOLL_ONESHOT_MAX_RANKS || at % 16) /* the inputs are read as vectors */
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no n-input reduction here (%d ranks, "
                             "offset %zu)", ipc->nranks, at);
    for (int p = 0; p < ipc->nranks; p++)
        if (!ipc->peer[p])
            return rcoll_err_set(RCOLL_ERR_INTERNAL, "rank %d's workspace is not mapped", p);
    rcoll_oneshot_args_t a;
    memset(&a, 0, sizeof(a));
    for (int p = 0; p < ipc->nranks; p++) a.peer[p] = (uint64_t)ipc->peer[p];
    a.nranks = ipc->nranks;
    a.rank = ipc->rank;
    a.blocks = ipc->blocks;
    a.dst = (uint64_t)(uintptr_t)dst;
    a.count = count;
    a.slot = at;
    a.avg_divisor = avg_divisor;
    a.shots = 0;
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    st = rcoll_cuda_oneshot(&a, dt, op, ipc->stream);
    leave(ipc, saved);
    return st;
}

/* The kernel's parameter: the peers, ranks and report address; its reports cleared. */
static rcoll_status_t oneshot_fill(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_args_t *a,
                                   rcoll_oneshot_err_t *err)
{
    if (ipc->nranks > RCOLL_ONESHOT_MAX_RANKS)
        return rcoll_err_set(RCOLL_ERR_INTERNAL, "one-kernel all-reduce on %d ranks (at most "
                             "%d)", ipc->nranks, RCOLL_ONESHOT_MAX_RANKS);
    memset(a->peer, 0, sizeof(a->peer));
    for (int p = 0; p < ipc->nranks; p++) a->peer[p] = (uint64_t)ipc->peer[p];
    a->nranks = ipc->nranks;
    a->rank = ipc->rank;
    a->blocks = ipc->blocks;
    a->err = (uint64_t)(uintptr_t)err;
    memset(err, 0, RCOLL_ONESHOT_MAX_BLOCKS * sizeof(rcoll_oneshot_err_t));
    return RCOLL_OK;
}

/* The blocks' reports as one: the first failure, a mismatch before a timeout before an abort
 * (each says more than the next). */
static void oneshot_fold(const rcoll_oneshot_err_t *err, rcoll_oneshot_err_t *report)
{
    static const int rank_of[] = {0, 2, 3, 1}; /* by code: higher says more */
    memset(report, 0, sizeof(*report));
    for (int b = 0; b < RCOLL_ONESHOT_MAX_BLOCKS; b++) { /* the unused ones stay OK */
        const volatile rcoll_oneshot_err_t *e = &err[b];
        uint32_t c = e->code;
        if (c == RCOLL_ONESHOT_OK || c > RCOLL_ONESHOT_ABORTED) continue;
        if (report->code == RCOLL_ONESHOT_OK || rank_of[c] > rank_of[report->code]) {
            report->code = c;
            report->peer = e->peer;
            report->flag = e->flag;
        }
    }
}

/* Make the stream wait for the last stream-ordered one-kernel call (inside the context). */
static rcoll_status_t after_last(rcoll_gpu_ipc_t *ipc, CUstream stream)
{
    if (ipc->ring_last < 0) return RCOLL_OK;
    CUresult res = rcoll_cu->cuStreamWaitEvent(stream, ipc->ring_ev[ipc->ring_last], 0);
    if (res != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuStreamWaitEvent(after the previous "
                             "one-kernel all-reduce)");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_ipc_oneshot(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_args_t *a,
                                     rcoll_datatype_t dt, rcoll_op_t op,
                                     rcoll_oneshot_err_t *report)
{
    memset(report, 0, sizeof(*report));
    rcoll_status_t st = oneshot_fill(ipc, a, ipc->err);
    if (st != RCOLL_OK) return st;
    CUcontext saved;
    st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    st = after_last(ipc, ipc->stream);
    if (st == RCOLL_OK) st = rcoll_cuda_oneshot(a, dt, op, ipc->stream);
    CUresult res = st == RCOLL_OK ? rcoll_cu->cuStreamSynchronize(ipc->stream) : CUDA_SUCCESS;
    leave(ipc, saved);
    if (st != RCOLL_OK) return st;
    if (res != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuStreamSynchronize(the CUDA IPC stream)");
    ipc->ring_last = -1; /* everything before it has run too */
    oneshot_fold(ipc->err, report);
    return RCOLL_OK;
}

void rcoll_gpu_ipc_meets_begin(rcoll_gpu_ipc_t *ipc)
{
    /* nothing of this rank writes the reports now: the last call ended with its stream */
    memset(ipc->err, 0, RCOLL_ONESHOT_MAX_BLOCKS * sizeof(rcoll_oneshot_err_t));
}

rcoll_status_t rcoll_gpu_ipc_meet(rcoll_gpu_ipc_t *ipc, uint64_t flag, uint64_t timeout_ns)
{
    if (ipc->nranks > RCOLL_ONESHOT_MAX_RANKS)
        return rcoll_err_set(RCOLL_ERR_INTERNAL, "a meet of %d ranks (at most %d)",
                             ipc->nranks, RCOLL_ONESHOT_MAX_RANKS);
    rcoll_oneshot_args_t a;
    memset(&a, 0, sizeof(a));
    for (int p = 0; p < ipc->nranks; p++) a.peer[p] = (uint64_t)ipc->peer[p];
    a.nranks = ipc->nranks;
    a.rank = ipc->rank;
    a.blocks = 1; /* one flag per rank: block 0's */
    a.flag = flag;
    a.timeout_ns = timeout_ns;
    a.err = (uint64_t)(uintptr_t)ipc->err;
    a.shots = 3;
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    st = after_last(ipc, ipc->stream); /* flags in call order: after a stream-ordered one */
    if (st == RCOLL_OK) st = rcoll_cuda_oneshot(&a, RCOLL_FLOAT32, RCOLL_SUM, ipc->stream);
    leave(ipc, saved);
    return st;
}

rcoll_status_t rcoll_gpu_ipc_meets_end(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_err_t *report)
{
    memset(report, 0, sizeof(*report));
    rcoll_status_t st = rcoll_gpu_ipc_sync(ipc);
    if (st != RCOLL_OK) return st;
    ipc->ring_last = -1; /* everything before has run too */
    oneshot_fold(ipc->err, report);
    return RCOLL_OK;
}

int rcoll_gpu_ipc_ring_next(const rcoll_gpu_ipc_t *ipc, int *busy)
{
    *busy = ipc->ring_busy[ipc->ring_next];
    return ipc->ring_next;
}

/* The ring's events and reports, at the first stream-ordered call (inside the context). */
static rcoll_status_t ring_make(rcoll_gpu_ipc_t *ipc)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    void *err = NULL;
    CUresult res = cu->cuMemAllocHost(&err, (size_t)RCOLL_GPU_IPC_RING * RCOLL_ONESHOT_MAX_BLOCKS *
                                                sizeof(rcoll_oneshot_err_t));
    if (res != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuMemAllocHost(the stream-ordered "
                             "one-kernel all-reduce's reports)");
    ipc->ring_err = err;
    for (int i = 0; i < RCOLL_GPU_IPC_RING; i++) {
        if ((res = cu->cuEventCreate(&ipc->ring_ev[i], CU_EVENT_DISABLE_TIMING)) !=
            CUDA_SUCCESS) {
            ipc->ring_ev[i] = NULL;
            return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuEventCreate(for the stream-ordered "
                                 "one-kernel all-reduce)");
        }
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_ipc_oneshot_async(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_args_t *a,
                                           rcoll_datatype_t dt, rcoll_op_t op, void *stream,
                                           int *slot)
{
    int i = ipc->ring_next;
    if (ipc->ring_busy[i])
        return rcoll_err_set(RCOLL_ERR_INTERNAL, "stream-ordered one-kernel all-reduce: ring "
                             "entry %d still in use", i);
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    if (!ipc->ring_err) st = ring_make(ipc);
    if (st == RCOLL_OK)
        st = oneshot_fill(ipc, a, ipc->ring_err + (size_t)i * RCOLL_ONESHOT_MAX_BLOCKS);
    CUstream s = (CUstream)stream;
    if (st == RCOLL_OK) st = after_last(ipc, s);
    if (st == RCOLL_OK) st = rcoll_cuda_oneshot(a, dt, op, s);
    if (st == RCOLL_OK) {
        CUresult res = rcoll_cu->cuEventRecord(ipc->ring_ev[i], s);
        if (res != CUDA_SUCCESS) {
            /* the kernel is queued and will run: wait for it here instead */
            st = rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuEventRecord(after the stream-ordered "
                               "one-kernel all-reduce)");
            rcoll_cu->cuStreamSynchronize(s);
        }
    }
    leave(ipc, saved);
    if (st != RCOLL_OK) return st;
    ipc->ring_busy[i] = 1;
    ipc->ring_last = i;
    ipc->ring_next = (i + 1) % RCOLL_GPU_IPC_RING;
    *slot = i;
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_ipc_oneshot_poll(rcoll_gpu_ipc_t *ipc, int slot, int wait, int *done,
                                          rcoll_oneshot_err_t *report)
{
    memset(report, 0, sizeof(*report));
    *done = 1;
    if (slot < 0 || slot >= RCOLL_GPU_IPC_RING || !ipc->ring_busy[slot]) return RCOLL_OK;
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    CUresult res = wait ? rcoll_cu->cuEventSynchronize(ipc->ring_ev[slot])
                        : rcoll_cu->cuEventQuery(ipc->ring_ev[slot]);
    leave(ipc, saved);
    if (res == CUDA_ERROR_NOT_READY && !wait) {
        *done = 0;
        return RCOLL_OK;
    }
    ipc->ring_busy[slot] = 0;
    if (ipc->ring_last == slot) ipc->ring_last = -1;
    if (res != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, wait ? "cuEventSynchronize(after a "
                             "stream-ordered one-kernel all-reduce)" : "cuEventQuery(after a "
                             "stream-ordered one-kernel all-reduce)");
    oneshot_fold(ipc->ring_err + (size_t)slot * RCOLL_ONESHOT_MAX_BLOCKS, report);
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_ipc_sync(rcoll_gpu_ipc_t *ipc)
{
    CUcontext saved;
    rcoll_status_t st = enter(ipc, &saved);
    if (st != RCOLL_OK) return st;
    CUresult res = rcoll_cu->cuStreamSynchronize(ipc->stream);
    leave(ipc, saved);
    if (res != CUDA_SUCCESS)
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuStreamSynchronize(the CUDA IPC stream)");
    return RCOLL_OK;
}

void rcoll_gpu_ipc_unmap(rcoll_gpu_ipc_t *ipc)
{
    CUcontext saved = NULL;
    if (!ipc || !ipc->ctx || enter(ipc, &saved) != RCOLL_OK) return;
    const rcoll_cu_api_t *cu = rcoll_cu;
    char text[160];
    CUresult res;
    if (ipc->stream && (res = cu->cuStreamSynchronize(ipc->stream)) != CUDA_SUCCESS)
        RCOLL_WARN(CUDA, "cuStreamSynchronize(the CUDA IPC stream) failed: %s",
                   rcoll_cu_strerror(res, text, sizeof(text)));
    for (int i = 0; i < RCOLL_GPU_IPC_RING; i++) /* stream-ordered ones still queued */
        if (ipc->ring_busy[i] && (res = cu->cuEventSynchronize(ipc->ring_ev[i])) != CUDA_SUCCESS)
            RCOLL_WARN(CUDA, "cuEventSynchronize(after a stream-ordered one-kernel all-reduce) "
                       "failed: %s", rcoll_cu_strerror(res, text, sizeof(text)));
    for (int p = 0; p < ipc->nranks; p++) {
        if (p == ipc->rank || !ipc->peer[p]) continue;
        if ((res = cu->cuIpcCloseMemHandle(ipc->peer[p])) != CUDA_SUCCESS)
            RCOLL_WARN(CUDA, "cuIpcCloseMemHandle(rank %d's workspace) failed: %s", p,
                       rcoll_cu_strerror(res, text, sizeof(text)));
        ipc->peer[p] = 0;
    }
    leave(ipc, saved);
}

void rcoll_gpu_ipc_free(rcoll_gpu_ipc_t **ipc_p, int keep_own)
{
    rcoll_gpu_ipc_t *ipc = *ipc_p;
    *ipc_p = NULL;
    if (!ipc) return;
    rcoll_gpu_ipc_unmap(ipc);
    const rcoll_cu_api_t *cu = rcoll_cu;
    CUcontext saved = NULL;
    if (ipc->ctx && enter(ipc, &saved) == RCOLL_OK) {
        char text[160];
        CUresult res;
        if (ipc->stream) cu->cuStreamDestroy(ipc->stream);
        if (ipc->err) cu->cuMemFreeHost(ipc->err);
        for (int i = 0; i < RCOLL_GPU_IPC_RING; i++)
            if (ipc->ring_ev[i]) cu->cuEventDestroy(ipc->ring_ev[i]);
        if (ipc->ring_err) cu->cuMemFreeHost(ipc->ring_err);
        if (ipc->own && keep_own)
            RCOLL_INFO(CUDA, "the CUDA IPC workspace (%zu bytes at 0x%llx) is kept: another "
                       "process may still have it mapped; it goes with this process",
                       ipc->bytes, (unsigned long long)ipc->own);
        else if (ipc->own && (res = cu->cuMemFree(ipc->own)) != CUDA_SUCCESS)
            RCOLL_WARN(CUDA, "cuMemFree(the CUDA IPC workspace) failed: %s",
                       rcoll_cu_strerror(res, text, sizeof(text)));
        leave(ipc, saved);
    }
    free(ipc->peer);
    free(ipc);
}
