/*
 * gpu_stub.c - gpu.h in a build without CUDA: every pointer is host memory, RCOLL_CUDA=1 is
 * refused with the reason.
 */
#include <string.h>

#include "cuda/gpu.h"
#include "util/status.h"

int rcoll_gpu_on;

rcoll_status_t rcoll_gpu_setup(const rcoll_gpu_config_t *cfg)
{
    if (cfg->mode == RCOLL_GPU_ON)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                             "RCOLL_CUDA=1 but this rcoll was built without CUDA (-Dcuda=disabled, "
                             "or no nvcc and cuda.h when it was configured)");
    return RCOLL_OK;
}

rcoll_memkind_t rcoll_gpu_classify(const void *p)
{
    (void)p;
    return RCOLL_MEM_HOST;
}

size_t rcoll_gpu_cache_count(void)
{
    return 0;
}

void rcoll_gpu_cache_flush(void)
{
}

void rcoll_gpu_test_reset(void)
{
}

/* Without CUDA nothing is ever classified as device memory: staging is never asked for. */
rcoll_gpu_pinned_t *rcoll_gpu_pinned_new(size_t cap)
{
    (void)cap;
    return NULL;
}

void rcoll_gpu_pinned_free(rcoll_gpu_pinned_t **pool) { *pool = NULL; }

size_t rcoll_gpu_pinned_held(const rcoll_gpu_pinned_t *pool)
{
    (void)pool;
    return 0;
}

size_t rcoll_gpu_pinned_retired(const rcoll_gpu_pinned_t *pool)
{
    (void)pool;
    return 0;
}

rcoll_status_t rcoll_gpu_stage_reserve(rcoll_gpu_stage_t **stage_p, rcoll_gpu_pinned_t *pool,
                                       const void *dev, size_t bytes, int flags, void **host_p)
{
    (void)stage_p, (void)pool, (void)dev, (void)bytes, (void)flags, (void)host_p;
    return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll was built without CUDA: no staging");
}

rcoll_status_t rcoll_gpu_stage_copy(int to_device, void *dev, void *host,
                                    const rcoll_gpu_span_t *spans, size_t nspans)
{
    (void)to_device, (void)dev, (void)host, (void)spans, (void)nspans;
    return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll was built without CUDA: no staging");
}

size_t rcoll_gpu_stage_bytes(const rcoll_gpu_stage_t *stage)
{
    (void)stage;
    return 0;
}

void rcoll_gpu_stage_free(rcoll_gpu_stage_t **stage_p)
{
    *stage_p = NULL;
}

rcoll_status_t rcoll_gpu_stream_check(void *stream)
{
    (void)stream;
    return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll was built without CUDA: no stream "
                         "calls");
}

rcoll_status_t rcoll_gpu_stream_copy(int to_device, void *dev, void *host,
                                     const rcoll_gpu_span_t *spans, size_t nspans,
                                     void *stream, int *enqueued_p)
{
    (void)to_device, (void)dev, (void)host, (void)spans, (void)nspans, (void)stream;
    *enqueued_p = 0;
    return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll was built without CUDA: no stream "
                         "calls");
}

rcoll_status_t rcoll_gpu_stream_host_fn(void *stream, rcoll_gpu_host_fn_t fn, void *arg)
{
    (void)stream, (void)fn, (void)arg;
    return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll was built without CUDA: no stream "
                         "calls");
}

rcoll_status_t rcoll_gpu_stream_sync(void *stream)
{
    (void)stream;
    return RCOLL_OK;
}

/* The public rcoll_cuda_* calls: one sentence, whichever is called. */
#define NO_CUDA                                                                                \
    rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll was built without CUDA (-Dcuda=disabled, or no " \
                  "nvcc and cuda.h when it was configured): no CUDA devices or memory")

rcoll_status_t rcoll_gpu_load(const rcoll_gpu_config_t *cfg)
{
    (void)cfg;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_device_count(int *count)
{
    *count = 0;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_set_device(int ordinal)
{
    (void)ordinal;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_device_info(int ordinal, char *name, size_t name_len, char *bus_id,
                                     size_t bus_id_len)
{
    (void)ordinal, (void)name, (void)name_len, (void)bus_id, (void)bus_id_len;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_mem_alloc(void **ptr, size_t bytes, int managed)
{
    (void)ptr, (void)bytes, (void)managed;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_mem_free(void *ptr)
{
    (void)ptr;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_memcpy(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_current_bus(char *bus, size_t len)
{
    if (len) bus[0] = '\0';
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ptr_bus(const void *p, char *bus, size_t len)
{
    (void)p;
    if (len) bus[0] = '\0';
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ptr_range(const void *p, uintptr_t *base, size_t *size)
{
    (void)p;
    *base = 0;
    *size = 0;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ptr_buffer_id(const void *p, uintptr_t *base, size_t *size,
                                       unsigned long long *buffer_id)
{
    (void)p;
    *base = 0;
    *size = 0;
    *buffer_id = 0;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_dmabuf_fd(const void *p, size_t len, int *fd)
{
    (void)p, (void)len;
    *fd = -1;
    return NO_CUDA;
}

/* CUDA IPC: never reached without CUDA (no buffer is device memory). */
rcoll_status_t rcoll_gpu_ipc_create(const void *dev, size_t bytes, int rank, int nranks,
                                    rcoll_gpu_ipc_t **ipc, void *handle)
{
    (void)dev, (void)bytes, (void)rank, (void)nranks, (void)handle;
    *ipc = NULL;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ipc_open(rcoll_gpu_ipc_t *ipc, const void *handles)
{
    (void)ipc, (void)handles;
    return NO_CUDA;
}

void rcoll_gpu_ipc_bus(const void *handle, char *bus, size_t len)
{
    (void)handle;
    if (len) bus[0] = '\0';
}

char *rcoll_gpu_ipc_base(const rcoll_gpu_ipc_t *ipc, int r)
{
    (void)ipc, (void)r;
    return NULL;
}

void rcoll_gpu_ipc_meets_begin(rcoll_gpu_ipc_t *ipc) { (void)ipc; }

rcoll_status_t rcoll_gpu_ipc_meet(rcoll_gpu_ipc_t *ipc, uint64_t flag, uint64_t timeout_ns)
{
    (void)ipc, (void)flag, (void)timeout_ns;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ipc_meets_end(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_err_t *report)
{
    (void)ipc;
    memset(report, 0, sizeof(*report));
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ipc_reduce_all(rcoll_gpu_ipc_t *ipc, void *dst, size_t at,
                                        size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                                        int avg_divisor)
{
    (void)ipc, (void)dst, (void)at, (void)count, (void)dt, (void)op, (void)avg_divisor;
    return NO_CUDA;
}

size_t rcoll_gpu_ipc_bytes(const rcoll_gpu_ipc_t *ipc)
{
    (void)ipc;
    return 0;
}

int rcoll_gpu_ipc_blocks_proposed(const rcoll_gpu_ipc_t *ipc)
{
    (void)ipc;
    return 1;
}

void rcoll_gpu_ipc_blocks_set(rcoll_gpu_ipc_t *ipc, int blocks)
{
    (void)ipc, (void)blocks;
}

int rcoll_gpu_ipc_ring_next(const rcoll_gpu_ipc_t *ipc, int *busy)
{
    (void)ipc;
    *busy = 0;
    return 0;
}

rcoll_status_t rcoll_gpu_ipc_oneshot_async(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_args_t *a,
                                           rcoll_datatype_t dt, rcoll_op_t op, void *stream,
                                           int *slot)
{
    (void)ipc, (void)a, (void)dt, (void)op, (void)stream, (void)slot;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ipc_oneshot_poll(rcoll_gpu_ipc_t *ipc, int slot, int wait, int *done,
                                          rcoll_oneshot_err_t *report)
{
    (void)ipc, (void)slot, (void)wait, (void)report;
    *done = 1;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ipc_copy(rcoll_gpu_ipc_t *ipc, void *dst, const void *src,
                                  size_t bytes)
{
    (void)ipc, (void)dst, (void)src, (void)bytes;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ipc_reduce(rcoll_gpu_ipc_t *ipc, void *dst, const void *a,
                                    const void *b, size_t count, rcoll_datatype_t dt,
                                    rcoll_op_t op, int avg_divisor)
{
    (void)ipc, (void)dst, (void)a, (void)b, (void)count, (void)dt, (void)op, (void)avg_divisor;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_ipc_oneshot(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_args_t *a,
                                     rcoll_datatype_t dt, rcoll_op_t op,
                                     rcoll_oneshot_err_t *report)
{
    (void)ipc, (void)a, (void)dt, (void)op;
    report->code = RCOLL_ONESHOT_OK;
    return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll was built without CUDA");
}

rcoll_status_t rcoll_gpu_ipc_sync(rcoll_gpu_ipc_t *ipc)
{
    (void)ipc;
    return NO_CUDA;
}

void rcoll_gpu_ipc_unmap(rcoll_gpu_ipc_t *ipc) { (void)ipc; }

void rcoll_gpu_ipc_free(rcoll_gpu_ipc_t **ipc, int keep_own)
{
    (void)keep_own;
    *ipc = NULL;
}

/* Pipelined staging: never reached without CUDA. */
rcoll_status_t rcoll_gpu_pipe_get(rcoll_gpu_pipe_t **pipe, const void *dev, int nev)
{
    (void)pipe, (void)dev, (void)nev;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_pipe_copy(rcoll_gpu_pipe_t *pipe, int to_device, void *dev, void *host,
                                   size_t len, int mark)
{
    (void)pipe, (void)to_device, (void)dev, (void)host, (void)len, (void)mark;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_pipe_wait(rcoll_gpu_pipe_t *pipe, int mark)
{
    (void)pipe, (void)mark;
    return NO_CUDA;
}

rcoll_status_t rcoll_gpu_pipe_finish(rcoll_gpu_pipe_t *pipe)
{
    (void)pipe;
    return NO_CUDA;
}

void rcoll_gpu_pipe_free(rcoll_gpu_pipe_t **pipe)
{
    *pipe = NULL;
}
