/*
 * api_gpu.c - the public rcoll_cuda_* calls (include/rcoll.h, "CUDA devices and memory"):
 * argument checks, loading the driver on first use (RCOLL_CUDA and RCOLL_CUDA_LIB as at
 * communicator creation, except that auto loads it: the caller asked for CUDA), and the
 * per-thread sentence of the last failure.  The driver calls are cuda/mem.c's.
 */
#include <stdio.h>

#include "core/config.h"
#include "cuda/gpu.h"
#include "rcoll.h"
#include "util/log.h"
#include "util/status.h"

static __thread char cuda_error[RCOLL_ERR_TEXT_MAX];

const char *rcoll_cuda_last_error(void) { return cuda_error; }

/* Record the failure of fn (the status and sentence of rcoll_err_set) and return it. */
static rcoll_status_t failed(const char *fn, rcoll_status_t st)
{
    snprintf(cuda_error, sizeof(cuda_error), "%s: %s", fn, rcoll_err_get());
    RCOLL_INFO(CUDA, "%s", cuda_error);
    return st;
}

/* Start of every call: the driver loaded (or the reason it cannot be). */
static rcoll_status_t enter(const char *fn)
{
    cuda_error[0] = '\0';
    if (rcoll_gpu_active()) return RCOLL_OK;
    rcoll_config_t cfg;
    rcoll_status_t st = rcoll_config_load(&cfg);
    if (st == RCOLL_OK) st = rcoll_gpu_load(&cfg.gpu);
    return st == RCOLL_OK ? st : failed(fn, st);
}

static rcoll_status_t null_arg(const char *fn, const char *what)
{
    return failed(fn, rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s is NULL", what));
}

rcoll_status_t rcoll_cuda_device_count(int *count)
{
    if (!count) return null_arg(__func__, "count");
    *count = 0;
    rcoll_status_t st = enter(__func__);
    if (st == RCOLL_OK) st = rcoll_gpu_device_count(count);
    return st == RCOLL_OK ? st : failed(__func__, st);
}

rcoll_status_t rcoll_cuda_set_device(int ordinal)
{
    rcoll_status_t st = enter(__func__);
    if (st == RCOLL_OK) st = rcoll_gpu_set_device(ordinal);
    return st == RCOLL_OK ? st : failed(__func__, st);
}

rcoll_status_t rcoll_cuda_device_info(int ordinal, char *name, size_t name_len, char *bus_id,
                                      size_t bus_id_len)
{
    if (name && name_len) name[0] = '\0';
    if (bus_id && bus_id_len) bus_id[0] = '\0';
    rcoll_status_t st = enter(__func__);
    if (st == RCOLL_OK) st = rcoll_gpu_device_info(ordinal, name, name_len, bus_id, bus_id_len);
    return st == RCOLL_OK ? st : failed(__func__, st);
}

static rcoll_status_t alloc(const char *fn, void **ptr, size_t bytes, int managed)
{
    if (!ptr) return null_arg(fn, "ptr");
    *ptr = NULL;
    if (bytes == 0)
        return failed(fn, rcoll_err_set(RCOLL_ERR_INVALID_ARG, "bytes is 0 (the driver "
                                        "allocates at least one byte)"));
    rcoll_status_t st = enter(fn);
    if (st == RCOLL_OK) st = rcoll_gpu_mem_alloc(ptr, bytes, managed);
    return st == RCOLL_OK ? st : failed(fn, st);
}

rcoll_status_t rcoll_cuda_alloc(void **ptr, size_t bytes)
{
    return alloc(__func__, ptr, bytes, 0);
}

rcoll_status_t rcoll_cuda_alloc_managed(void **ptr, size_t bytes)
{
    return alloc(__func__, ptr, bytes, 1);
}

rcoll_status_t rcoll_cuda_free(void *ptr)
{
    if (!ptr) return RCOLL_OK;
    rcoll_status_t st = enter(__func__);
    if (st == RCOLL_OK) st = rcoll_gpu_mem_free(ptr);
    return st == RCOLL_OK ? st : failed(__func__, st);
}

rcoll_status_t rcoll_cuda_memcpy(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return RCOLL_OK;
    if (!dst) return null_arg(__func__, "dst");
    if (!src) return null_arg(__func__, "src");
    rcoll_status_t st = enter(__func__);
    if (st == RCOLL_OK) st = rcoll_gpu_memcpy(dst, src, bytes);
    return st == RCOLL_OK ? st : failed(__func__, st);
}
