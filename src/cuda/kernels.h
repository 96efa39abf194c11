/*
 * kernels.h - launching the device reductions of reduce.cu (the embedded fatbin) through the
 * driver table.  Needs the driver loaded (rcoll_cu) and a current context on the calling
 * thread; the module is loaded once per context.
 */
#ifndef RCOLL_CUDA_KERNELS_H
#define RCOLL_CUDA_KERNELS_H

#include <stddef.h>
#include "cuda/cuda_drv.h"
#include "cuda/oneshot.h"
#include "rcoll.h"

/* The fatbin nvcc built from reduce.cu (generated kernels_fatbin.c). */
extern const unsigned char rcoll_cuda_fatbin[];
extern const size_t rcoll_cuda_fatbin_size;

/* dst[i] = a[i] op b[i] for i < count (and dst2[i] too when dst2 is not 0), on stream,
 * asynchronously; device or managed pointers of the current context.  dst and dst2 may alias
 * a or b exactly.  AVG divides by avg_divisor (<= 1: SUM), as rcoll_reduce_local.  Errors:
 * RCOLL_ERR_INVALID_ARG (pair not defined), RCOLL_ERR_UNSUPPORTED (no driver, no current
 * context), RCOLL_ERR_SYSTEM (module load or launch failed; the driver's error named). */
rcoll_status_t rcoll_cuda_reduce(CUdeviceptr dst, CUdeviceptr dst2, CUdeviceptr a,
                                 CUdeviceptr b, size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                                 int avg_divisor, CUstream stream);

/* The one-kernel all-reduce (cuda/oneshot.h) of dt x op with *args, launched on stream
 * (args->blocks blocks), asynchronously; the current context's.  Errors as
 * rcoll_cuda_reduce (and RCOLL_ERR_INTERNAL for a grid outside 1..MAX_BLOCKS). */
rcoll_status_t rcoll_cuda_oneshot(const rcoll_oneshot_args_t *args, rcoll_datatype_t dt,
                                  rcoll_op_t op, CUstream stream);

/* The kernel's name for dt x op ("rcoll_reduce_8_0"), NULL where the pair is not defined. */
const char *rcoll_cuda_kernel_name(rcoll_datatype_t dt, rcoll_op_t op);

/* Unload every module this process loaded (contexts must still exist). */
void rcoll_cuda_kernels_unload(void);

#endif
