/*
 * cuda_drv.h - the one function table through which rcoll calls the CUDA driver.  libcuda is
 * never linked: rcoll_cu_load() dlopen()s it (RCOLL_CUDA_LIB, default libcuda.so.1), checks
 * cuDriverGetVersion against what the embedded kernels need, binds every entry point with
 * cuGetProcAddress for the CUDA version rcoll was built with, and calls cuInit(0).  Unit
 * tests install a scripted table with rcoll_cu_set_api() (the same version and cuInit
 * checks run on it).  Only src/cuda/ (and the tests of it) include this header: it is the
 * one that includes <cuda.h>.
 */
#ifndef RCOLL_CUDA_CUDA_DRV_H
#define RCOLL_CUDA_CUDA_DRV_H

#include <cuda.h>
#include "rcoll.h"

/* The driver the kernels need: the major version of the toolkit that built them (a fatbin
 * of CUDA 13 cubins and PTX loads on a 13.x driver, not on 12.x). */
#define RCOLL_CUDA_MIN_DRIVER ((CUDA_VERSION / 1000) * 1000)

typedef struct rcoll_cu_api {
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuGetErrorName)(CUresult error, const char **str);
    CUresult (*cuGetErrorString)(CUresult error, const char **str);
    CUresult (*cuPointerGetAttributes)(unsigned int n, CUpointer_attribute *attrs, void **data,
                                       CUdeviceptr ptr);
    CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetDevice)(CUdevice *dev);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attr, CUdevice dev);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
    CUresult (*cuModuleUnload)(CUmodule module);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule module, const char *name);
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int shared, CUstream stream, void **params,
                               void **extra);
    CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t bytes);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *p, size_t bytes, unsigned int flags);
    CUresult (*cuMemAllocHost)(void **p, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr p);
    CUresult (*cuMemFreeHost)(void *p);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t n);
    /* The memory and device calls of the public API (core/api_gpu.c, cuda/mem.c). */
    CUresult (*cuMemcpy)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuDeviceGetPCIBusId)(char *busid, int len, CUdevice dev);
    /* CUDA IPC between the ranks of a host (cuda/ipc.c). */
    CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *handle, CUdeviceptr p);
    CUresult (*cuIpcOpenMemHandle)(CUdeviceptr *p, CUipcMemHandle handle, unsigned int flags);
    CUresult (*cuIpcCloseMemHandle)(CUdeviceptr p);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                  CUstream stream);
    CUresult (*cuDeviceGetByPCIBusId)(CUdevice *dev, const char *busid);
    CUresult (*cuDeviceCanAccessPeer)(int *can, CUdevice dev, CUdevice peer);
    CUresult (*cuEventCreate)(CUevent *ev, unsigned int flags);
    CUresult (*cuEventRecord)(CUevent ev, CUstream stream);
    CUresult (*cuEventSynchronize)(CUevent ev);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (*cuEventDestroy)(CUevent ev);
    /* The stream-ordered one-kernel all-reduce (cuda/ipc.c). */
    CUresult (*cuEventQuery)(CUevent ev);
    CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent ev, unsigned int flags);
    /* The stream-ordered calls (core/api_stream.c, cuda/stream.c). */
    CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes,
                                  CUstream stream);
    CUresult (*cuLaunchHostFunc)(CUstream stream, CUhostFn fn, void *data);
    CUresult (*cuStreamSynchronize)(CUstream stream);
    CUresult (*cuStreamIsCapturing)(CUstream stream, CUstreamCaptureStatus *status);
    /* Used by the tests on a GPU (tests/gpu/test_stream.c), not by rcoll itself. */
    CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
    CUresult (*cuStreamDestroy)(CUstream stream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned int value, size_t n,
                                 CUstream stream);
    CUresult (*cuStreamBeginCapture)(CUstream stream, CUstreamCaptureMode mode);
    CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph *graph);
    CUresult (*cuGraphDestroy)(CUgraph graph);
    /* GPUDirect RDMA by dma-buf (cuda/mem.c rcoll_gpu_dmabuf_fd). */
    CUresult (*cuMemGetHandleForAddressRange)(void *handle, CUdeviceptr p, size_t bytes,
                                              CUmemRangeHandleType type,
                                              unsigned long long flags);
    /* Pinned staging areas, portable across contexts (cuda/stage.c). */
    CUresult (*cuMemHostAlloc)(void **p, size_t bytes, unsigned int flags);
    /* A context's id, unique in the process: the kernels' module cache (cuda/kernels.c)
     * notices a context reset or a new context at an old handle. */
    CUresult (*cuCtxGetId)(CUcontext ctx, unsigned long long *id);
} rcoll_cu_api_t;

/* Every entry of the table with the CUDA version of the ABI its member declares (the
 * _v<version> of cudaTypedefs.h's PFN_<name>_v<version>), in the table's order.  The driver
 * is asked for each name at that version, never at CUDA_VERSION: a driver hands out the newest
 * form of a function that is not newer than the version asked, and some functions changed
 * their arguments (CUDA 13's cuCtxGetDevice takes a context too: PFN_cuCtxGetDevice_v13000),
 * so asking for CUDA_VERSION would give a function of another signature than the member's.
 * cuda_drv.c checks every member's type against its PFN typedef at compile time. */
/* cuEventElapsedTime_v2 (CUDA 12.8) where the header has it. */
#if CUDA_VERSION >= 12080
#define RCOLL_CU_ELAPSED_V 12080
#else
#define RCOLL_CU_ELAPSED_V 2000
#endif
#define RCOLL_CU_ENTRIES(X) \
    X(cuInit, 2000) \
    X(cuDriverGetVersion, 2020) \
    X(cuGetErrorName, 6000) \
    X(cuGetErrorString, 6000) \
    X(cuPointerGetAttributes, 7000) \
    X(cuCtxGetCurrent, 4000) \
    X(cuCtxSetCurrent, 4000) \
    X(cuCtxGetDevice, 2000) \
    X(cuCtxSynchronize, 2000) \
    X(cuDeviceGetCount, 2000) \
    X(cuDeviceGet, 2000) \
    X(cuDeviceGetAttribute, 2000) \
    X(cuDeviceGetName, 2000) \
    X(cuDevicePrimaryCtxRetain, 7000) \
    X(cuDevicePrimaryCtxRelease, 11000) \
    X(cuModuleLoadData, 2000) \
    X(cuModuleUnload, 2000) \
    X(cuModuleGetFunction, 2000) \
    X(cuLaunchKernel, 4000) \
    X(cuMemAlloc, 3020) \
    X(cuMemAllocManaged, 6000) \
    X(cuMemAllocHost, 3020) \
    X(cuMemFree, 3020) \
    X(cuMemFreeHost, 2000) \
    X(cuMemcpyHtoD, 3020) \
    X(cuMemcpyDtoH, 3020) \
    X(cuMemcpyDtoD, 3020) \
    X(cuMemsetD8, 3020) \
    X(cuMemcpy, 4000) \
    X(cuDeviceGetPCIBusId, 4010) \
    X(cuIpcGetMemHandle, 4010) \
    X(cuIpcOpenMemHandle, 11000) \
    X(cuIpcCloseMemHandle, 4010) \
    X(cuMemcpyDtoDAsync, 3020) \
    X(cuDeviceGetByPCIBusId, 4010) \
    X(cuDeviceCanAccessPeer, 4000) \
    X(cuEventCreate, 2000) \
    X(cuEventRecord, 2000) \
    X(cuEventSynchronize, 2000) \
    X(cuEventElapsedTime, RCOLL_CU_ELAPSED_V) \
    X(cuEventDestroy, 4000) \
    X(cuEventQuery, 2000) \
    X(cuStreamWaitEvent, 3020) \
    X(cuMemcpyDtoHAsync, 3020) \
    X(cuMemcpyHtoDAsync, 3020) \
    X(cuLaunchHostFunc, 10000) \
    X(cuStreamSynchronize, 2000) \
    X(cuStreamIsCapturing, 10000) \
    X(cuStreamCreate, 2000) \
    X(cuStreamDestroy, 4000) \
    X(cuMemsetD32Async, 3020) \
    X(cuStreamBeginCapture, 10010) \
    X(cuStreamEndCapture, 10000) \
    X(cuGraphDestroy, 10000) \
    X(cuMemGetHandleForAddressRange, 11070) \
    X(cuMemHostAlloc, 2020) \
    X(cuCtxGetId, 12000)

/* The table in use; NULL until rcoll_cu_load() succeeded or a test installed one. */
extern const rcoll_cu_api_t *rcoll_cu;

/* Load the driver from path once per process (later calls return the first result):
 *   RCOLL_ERR_UNSUPPORTED "no CUDA driver (libcuda.so.1: <dlerror>)" when it cannot be
 *   opened or lacks an entry point, "CUDA driver 12.4 is too old ..." below
 *   RCOLL_CUDA_MIN_DRIVER, and "cuInit failed: CUDA_ERROR_... (<text>)" when it does not
 *   start (no device, driver/kernel module mismatch). */
rcoll_status_t rcoll_cu_load(const char *path);
/* Would loading path find the library already mapped into this process (dlopen RTLD_NOLOAD)?
 * An application that uses CUDA has loaded it; one that does not cannot hold CUDA memory. */
int rcoll_cu_present(const char *path);
/* Put a scripted table behind every driver call (tests), running the version and cuInit
 * checks on it; the status is that of rcoll_cu_load.  NULL forgets the table and the load
 * result (the library, if one was opened, stays mapped), so that a test may load again. */
rcoll_status_t rcoll_cu_set_api(const rcoll_cu_api_t *api);
/* st with "<what> failed: CUDA_ERROR_... (...)" as the error's sentence. */
rcoll_status_t rcoll_cu_fail(rcoll_status_t st, CUresult res, const char *what);
/* Make ctx current (when it is not): *saved gets the context to put back with
 * rcoll_gpu_ctx_pop.  Errors: RCOLL_ERR_SYSTEM naming the driver call; what names ctx. */
rcoll_status_t rcoll_gpu_ctx_push(CUcontext ctx, const char *what, CUcontext *saved);
void rcoll_gpu_ctx_pop(CUcontext ctx, CUcontext saved);
/* Make the context of dev current (when it has one other than the current one): *saved gets
 * the context to put back, *switched whether anything changed.  Errors: RCOLL_ERR_SYSTEM,
 * naming the driver call.  rcoll_gpu_ctx_leave puts *saved back (a failure is logged). */
rcoll_status_t rcoll_gpu_ctx_enter(const void *dev, CUcontext *saved, int *switched);
void rcoll_gpu_ctx_leave(CUcontext saved, int switched);
/* "CUDA_ERROR_INVALID_VALUE (invalid argument)" for res, from the table when there is one. */
const char *rcoll_cu_strerror(CUresult res, char *buf, size_t len);

#endif
