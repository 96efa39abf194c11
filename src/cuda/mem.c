/*
 * mem.c - CUDA devices and memory for the public rcoll_cuda_* calls (core/api_gpu.c checks
 * their arguments): choosing a device (its primary context made current, as cudaSetDevice
 * does), its name and PCI bus id, device and managed allocations, and copies between any
 * two kinds of memory.  They exist so that a program that does not link the CUDA runtime
 * (the perf binaries) can hand rcoll device buffers; each failure is one sentence naming the
 * driver call and its CUresult.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "util/log.h"
#include "util/status.h"

/* Primary contexts retained by rcoll_gpu_set_device, one per ordinal, kept for the process
 * (as the runtime keeps the one cudaSetDevice made current). */
#define MAX_RETAINED 256
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext retained[MAX_RETAINED];

static rcoll_status_t drv_fail(rcoll_status_t st, CUresult res, const char *what)
{
    return rcoll_cu_fail(st, res, what);
}

rcoll_status_t rcoll_gpu_device_count(int *count)
{
    CUresult res = rcoll_cu->cuDeviceGetCount(count);
    if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "cuDeviceGetCount");
    return RCOLL_OK;
}

/* The device of ordinal, after checking that it exists. */
static rcoll_status_t get_device(int ordinal, CUdevice *dev)
{
    int count = 0;
    rcoll_status_t st = rcoll_gpu_device_count(&count);
    if (st != RCOLL_OK) return st;
    if (ordinal < 0 || ordinal >= count) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "CUDA device %d does not exist: the driver sees %d device%s "
                             "(ordinals 0 to %d; CUDA_VISIBLE_DEVICES=%s)", ordinal, count,
                             count == 1 ? "" : "s", count - 1, vis ? vis : "(not set)");
    }
    CUresult res = rcoll_cu->cuDeviceGet(dev, ordinal);
    if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "cuDeviceGet");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_set_device(int ordinal)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    CUdevice dev;
    rcoll_status_t st = get_device(ordinal, &dev);
    if (st != RCOLL_OK) return st;
    CUcontext ctx = NULL;
    pthread_mutex_lock(&retain_lock);
    if (ordinal < MAX_RETAINED) ctx = retained[ordinal];
    CUresult res = CUDA_SUCCESS;
    if (!ctx) {
        res = cu->cuDevicePrimaryCtxRetain(&ctx, dev);
        if (res == CUDA_SUCCESS && ordinal < MAX_RETAINED) retained[ordinal] = ctx;
    }
    pthread_mutex_unlock(&retain_lock);
    if (res != CUDA_SUCCESS)
        return drv_fail(RCOLL_ERR_SYSTEM, res, "cuDevicePrimaryCtxRetain");
    res = cu->cuCtxSetCurrent(ctx);
    if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "cuCtxSetCurrent");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_device_info(int ordinal, char *name, size_t name_len, char *bus_id,
                                     size_t bus_id_len)
{
    CUdevice dev;
    rcoll_status_t st = get_device(ordinal, &dev);
    if (st != RCOLL_OK) return st;
    /* The driver takes int lengths; names and bus ids are short. */
    if (name && name_len) {
        CUresult res = rcoll_cu->cuDeviceGetName(name, name_len > 4096 ? 4096 : (int)name_len,
                                                 dev);
        if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "cuDeviceGetName");
        name[name_len - 1] = '\0';
    }
    if (bus_id && bus_id_len) {
        CUresult res = rcoll_cu->cuDeviceGetPCIBusId(
            bus_id, bus_id_len > 4096 ? 4096 : (int)bus_id_len, dev);
        if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "cuDeviceGetPCIBusId");
        bus_id[bus_id_len - 1] = '\0';
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_mem_alloc(void **ptr, size_t bytes, int managed)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    CUcontext cur = NULL;
    CUresult res = cu->cuCtxGetCurrent(&cur);
    if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "cuCtxGetCurrent");
    if (!cur)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                             "no CUDA context is current in this thread: choose a device first "
                             "(rcoll_cuda_set_device, or cudaSetDevice)");
    CUdeviceptr p = 0;
    if (managed)
        res = cu->cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
    else
        res = cu->cuMemAlloc(&p, bytes);
    if (res != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof(what), "%s(%zu bytes)", managed ? "cuMemAllocManaged" : "cuMemAlloc",
                 bytes);
        return drv_fail(res == CUDA_ERROR_OUT_OF_MEMORY ? RCOLL_ERR_NO_MEMORY : RCOLL_ERR_SYSTEM,
                        res, what);
    }
    *ptr = (void *)(uintptr_t)p;
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_mem_free(void *ptr)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    unsigned int memtype = 0, managed = 0;
    CUdeviceptr start = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    void *data[] = {&memtype, &managed, &start};
    CUresult res = cu->cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)ptr);
    if (res != CUDA_SUCCESS || (memtype != CU_MEMORYTYPE_DEVICE && !managed) ||
        (uintptr_t)start != (uintptr_t)ptr)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "%p is not the start of a CUDA device or managed allocation (from "
                             "rcoll_cuda_alloc): nothing freed", ptr);
    CUcontext saved = NULL;
    int switched = 0;
    rcoll_status_t st = rcoll_gpu_ctx_enter(ptr, &saved, &switched);
    if (st != RCOLL_OK) return st;
    res = cu->cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    rcoll_gpu_ctx_leave(saved, switched);
    /* The range may come back from the driver as another allocation: forget it. */
    rcoll_gpu_cache_flush();
    if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "cuMemFree");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_memcpy(void *dst, const void *src, size_t bytes)
{
    rcoll_memkind_t dk = rcoll_gpu_classify(dst), sk = rcoll_gpu_classify(src);
    if (!rcoll_memkind_on_device(dk) && !rcoll_memkind_on_device(sk)) {
        memmove(dst, src, bytes); /* host to host: no driver needed */
        return RCOLL_OK;
    }
    CUcontext saved = NULL;
    int switched = 0;
    rcoll_status_t st =
        rcoll_gpu_ctx_enter(rcoll_memkind_on_device(dk) ? dst : src, &saved, &switched);
    if (st != RCOLL_OK) return st;
    CUresult res = rcoll_cu->cuMemcpy((CUdeviceptr)(uintptr_t)dst,
                                      (CUdeviceptr)(uintptr_t)src, bytes);
    rcoll_gpu_ctx_leave(saved, switched);
    if (res != CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof(what), "cuMemcpy of %zu bytes from %p (%s) to %p (%s)", bytes, src,
                 rcoll_memkind_name(sk), dst, rcoll_memkind_name(dk));
        return drv_fail(RCOLL_ERR_SYSTEM, res, what);
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_current_bus(char *bus, size_t len)
{
    if (!rcoll_gpu_active())
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "the CUDA driver is not in use");
    CUcontext cur = NULL;
    CUdevice dev = 0;
    CUresult res = rcoll_cu->cuCtxGetCurrent(&cur);
    if (res == CUDA_SUCCESS && !cur)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no CUDA context is current");
    if (res == CUDA_SUCCESS) res = rcoll_cu->cuCtxGetDevice(&dev);
    if (res == CUDA_SUCCESS) res = rcoll_cu->cuDeviceGetPCIBusId(bus, (int)len, dev);
    if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "the current CUDA device");
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_ptr_bus(const void *p, char *bus, size_t len)
{
    if (!rcoll_gpu_active())
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "the CUDA driver is not in use");
    CUcontext saved = NULL;
    int switched = 0;
    rcoll_status_t st = rcoll_gpu_ctx_enter(p, &saved, &switched);
    if (st != RCOLL_OK) return st;
    CUdevice dev = 0;
    CUresult res = rcoll_cu->cuCtxGetDevice(&dev);
    if (res == CUDA_SUCCESS) res = rcoll_cu->cuDeviceGetPCIBusId(bus, (int)len, dev);
    rcoll_gpu_ctx_leave(saved, switched);
    if (res != CUDA_SUCCESS) return drv_fail(RCOLL_ERR_SYSTEM, res, "the device of a buffer");
    return RCOLL_OK;
}

/* ---- GPUDirect RDMA by dma-buf ---- */

rcoll_status_t rcoll_gpu_dmabuf_fd(const void *p, size_t len, int *fd)
{
    *fd = -1;
    if (!rcoll_gpu_active()) {
        /* The transport asks on behalf of a caller that holds CUDA memory (NCCL through the
         * net plugin): the driver is in that process, load it with the default knobs. */
        static rcoll_gpu_config_t cfg;
        rcoll_status_t st = rcoll_config_parse(&rcoll_gpu_config_table, &cfg);
        if (st == RCOLL_OK) st = rcoll_gpu_load(&cfg);
        if (st != RCOLL_OK) return st;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if ((uintptr_t)p % page || len % page || !len)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "dma-buf of %zu bytes at %p: address and "
                             "length must be multiples of the %zu-byte host page", len, p, page);
    const rcoll_cu_api_t *cu = rcoll_cu;
    unsigned int memtype = 0;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data = &memtype;
    CUresult res = cu->cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)(uintptr_t)p);
    if (res != CUDA_SUCCESS || memtype != CU_MEMORYTYPE_DEVICE)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%p is not CUDA device memory: it has no "
                             "dma-buf", p);
    CUcontext saved = NULL;
    int switched = 0;
    rcoll_status_t st = rcoll_gpu_ctx_enter(p, &saved, &switched);
    if (st != RCOLL_OK) return st;
    CUdevice dev = 0;
    int ok = 0;
    res = cu->cuCtxGetDevice(&dev);
    if (res == CUDA_SUCCESS)
        res = cu->cuDeviceGetAttribute(&ok, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
    int got = -1;
    if (res == CUDA_SUCCESS && ok)
        res = cu->cuMemGetHandleForAddressRange(&got, (CUdeviceptr)(uintptr_t)p, len,
                                                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    rcoll_gpu_ctx_leave(saved, switched);
    if (res == CUDA_SUCCESS && !ok)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "CUDA device %d cannot export dma-bufs "
                             "(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0: it needs a Turing or "
                             "newer GPU, the open kernel modules and Linux 5.12 or newer)",
                             (int)dev);
    if (res != CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof(what), "cuMemGetHandleForAddressRange(dma-buf of %zu bytes at %p)",
                 len, p);
        return drv_fail(res == CUDA_ERROR_NOT_SUPPORTED ? RCOLL_ERR_UNSUPPORTED
                                                        : RCOLL_ERR_SYSTEM, res, what);
    }
    *fd = got;
    return RCOLL_OK;
}
