/*
 * kernels.c - the host side of the device reductions: the kernels' names (stamped from
 * reduce_elem.h's list, as the kernels are), the module per context, the launch geometry.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda/kernels.h"
#include "util/log.h"
#include "cuda/reduce_elem.h"
#include "util/status.h"

#define NAME_OF(DT, OP, T, fn) [DT][OP] = "rcoll_reduce_" #DT "_" #OP,
static const char *const kernel_names[RCOLL_NUM_DATATYPES][RCOLL_NUM_OPS] = {
    RCOLL_ELEM_LIST(NAME_OF)};
#undef NAME_OF

#define ONESHOT_NAME_OF(DT, OP, T, fn) [DT][OP] = "rcoll_oneshot_" #DT "_" #OP,
static const char *const oneshot_names[RCOLL_NUM_DATATYPES][RCOLL_NUM_OPS] = {
    RCOLL_ELEM_LIST(ONESHOT_NAME_OF)};
#undef ONESHOT_NAME_OF

#define SIZE_OF(DT, OP, T, fn) [DT][OP] = sizeof(T),
static const size_t elem_size[RCOLL_NUM_DATATYPES][RCOLL_NUM_OPS] = {RCOLL_ELEM_LIST(SIZE_OF)};
#undef SIZE_OF

#define MAX_CONTEXTS 16
#define THREADS 256

typedef struct {
    CUcontext ctx;
    unsigned long long ctx_id; /* cuCtxGetId: a reset primary context keeps its handle */
    CUmodule module;
    int sms;
    CUfunction fn[RCOLL_NUM_DATATYPES][RCOLL_NUM_OPS];
    CUfunction oneshot[RCOLL_NUM_DATATYPES][RCOLL_NUM_OPS];
} module_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static module_t modules[MAX_CONTEXTS];
static int nmodules;

const char *rcoll_cuda_kernel_name(rcoll_datatype_t dt, rcoll_op_t op)
{
    if ((unsigned)dt >= RCOLL_NUM_DATATYPES || (unsigned)op >= RCOLL_NUM_OPS) return NULL;
    return kernel_names[dt][op];
}

static rcoll_status_t cu_fail(CUresult res, const char *what)
{
    return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, what);
}

/* The module of the current context, loaded on first use.  A module belongs to one context:
 * the context's id (not only its handle, which a reset primary context keeps and a new context
 * may reuse) says whether a cached one is still that context's; one that is not is gone with
 * its context (not unloaded: its handle means nothing now) and loaded again. */
static rcoll_status_t module_get(module_t **out)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    CUcontext ctx = NULL;
    unsigned long long id = 0;
    CUresult res = cu->cuCtxGetCurrent(&ctx);
    if (res != CUDA_SUCCESS) return cu_fail(res, "cuCtxGetCurrent");
    if (!ctx)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                             "no current CUDA context on this thread: the device reduction runs "
                             "on the context of its buffers");
    if ((res = cu->cuCtxGetId(ctx, &id)) != CUDA_SUCCESS) return cu_fail(res, "cuCtxGetId");
    rcoll_status_t st = RCOLL_OK;
    pthread_mutex_lock(&lock);
    int slot = nmodules;
    for (int i = 0; i < nmodules; i++) {
        if (modules[i].ctx != ctx) continue;
        if (modules[i].ctx_id == id) {
            *out = &modules[i];
            goto done;
        }
        RCOLL_INFO(CUDA, "CUDA context %p was reset or replaced (id %llu, was %llu): loading "
                   "rcoll's kernels again", (void *)ctx, id, modules[i].ctx_id);
        slot = i;
        break;
    }
    if (slot == MAX_CONTEXTS) {
        st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "more than %d CUDA contexts used",
                           MAX_CONTEXTS);
        goto done;
    }
    module_t fresh, *m = &fresh;
    memset(m, 0, sizeof(*m));
    CUdevice dev;
    if ((res = cu->cuModuleLoadData(&m->module, rcoll_cuda_fatbin)) != CUDA_SUCCESS) {
        st = cu_fail(res, "loading rcoll's CUDA kernels (cuModuleLoadData)");
        goto done;
    }
    if ((res = cu->cuCtxGetDevice(&dev)) != CUDA_SUCCESS ||
        (res = cu->cuDeviceGetAttribute(&m->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                        dev)) != CUDA_SUCCESS) {
        cu->cuModuleUnload(m->module);
        st = cu_fail(res, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
        goto done;
    }
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++) {
        for (int op = 0; op < RCOLL_NUM_OPS; op++) {
            if (!kernel_names[dt][op]) continue;
            const char *bad = kernel_names[dt][op];
            res = cu->cuModuleGetFunction(&m->fn[dt][op], m->module, bad);
            if (res == CUDA_SUCCESS) {
                bad = oneshot_names[dt][op];
                res = cu->cuModuleGetFunction(&m->oneshot[dt][op], m->module, bad);
            }
            if (res != CUDA_SUCCESS) {
                cu->cuModuleUnload(m->module);
                st = cu_fail(res, bad);
                goto done;
            }
        }
    }
    m->ctx = ctx;
    m->ctx_id = id;
    modules[slot] = fresh; /* only now: a failed reload leaves the old record to try again */
    if (slot == nmodules) nmodules++;
    *out = &modules[slot];
done:
    pthread_mutex_unlock(&lock);
    return st;
}

rcoll_status_t rcoll_cuda_reduce(CUdeviceptr dst, CUdeviceptr dst2, CUdeviceptr a,
                                 CUdeviceptr b, size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                                 int avg_divisor, CUstream stream)
{
    if ((unsigned)dt >= RCOLL_NUM_DATATYPES || (unsigned)op >= RCOLL_NUM_OPS ||
        !kernel_names[dt][op])
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "device reduction: datatype %d with op %d "
                             "is not defined", (int)dt, (int)op);
    if (!rcoll_cu)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "device reduction: no CUDA driver loaded");
    if (count == 0) return RCOLL_OK;
    if (op == RCOLL_AVG && avg_divisor <= 1) op = RCOLL_SUM;
    module_t *m = NULL;
    rcoll_status_t st = module_get(&m);
    if (st != RCOLL_OK) return st;

    /* head: elements before the first 16-byte boundary, the same for every pointer, else all
     * scalar. */
    size_t es = elem_size[dt][op];
    uintptr_t off = (uintptr_t)a & 15u;
    size_t head = count;
    if (((uintptr_t)b & 15u) == off && ((uintptr_t)dst & 15u) == off &&
        (!dst2 || ((uintptr_t)dst2 & 15u) == off) && off % es == 0)
        head = ((16u - off) & 15u) / es;
    if (head > count) head = count;
    size_t items = head + (count - head) / (16 / es) + (count - head) % (16 / es);
    size_t blocks = (items + THREADS - 1) / THREADS;
    size_t cap = (size_t)(m->sms > 0 ? m->sms : 1) * 8; /* 8 x 256 threads per SM */
    if (blocks > cap) blocks = cap;
    if (blocks == 0) blocks = 1;
    int d = avg_divisor;
    void *params[] = {&dst, &dst2, &a, &b, &count, &head, &d};
    CUresult res = rcoll_cu->cuLaunchKernel(m->fn[dt][op], (unsigned)blocks, 1, 1, THREADS, 1,
                                            1, 0, stream, params, NULL);
    if (res != CUDA_SUCCESS) return cu_fail(res, kernel_names[dt][op]);
    return RCOLL_OK;
}

rcoll_status_t rcoll_cuda_oneshot(const rcoll_oneshot_args_t *args, rcoll_datatype_t dt,
                                  rcoll_op_t op, CUstream stream)
{
    if ((unsigned)dt >= RCOLL_NUM_DATATYPES || (unsigned)op >= RCOLL_NUM_OPS ||
        !oneshot_names[dt][op])
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "one-kernel all-reduce: datatype %d with op "
                             "%d is not defined", (int)dt, (int)op);
    if (!rcoll_cu)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "one-kernel all-reduce: no CUDA driver "
                             "loaded");
    module_t *m = NULL;
    rcoll_status_t st = module_get(&m);
    if (st != RCOLL_OK) return st;
    if (args->blocks < 1 || args->blocks > RCOLL_ONESHOT_MAX_BLOCKS)
        return rcoll_err_set(RCOLL_ERR_INTERNAL, "one-kernel all-reduce with a grid of %d "
                             "blocks (1 to %d)", (int)args->blocks, RCOLL_ONESHOT_MAX_BLOCKS);
    rcoll_oneshot_args_t a = *args;
    void *params[] = {&a};
    CUresult res = rcoll_cu->cuLaunchKernel(m->oneshot[dt][op], (unsigned)a.blocks, 1, 1,
                                            RCOLL_ONESHOT_THREADS, 1, 1, 0, stream, params,
                                            NULL);
    if (res != CUDA_SUCCESS) return cu_fail(res, oneshot_names[dt][op]);
    return RCOLL_OK;
}

void rcoll_cuda_kernels_unload(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nmodules; i++)
        if (rcoll_cu) rcoll_cu->cuModuleUnload(modules[i].module);
    nmodules = 0;
    pthread_mutex_unlock(&lock);
}
