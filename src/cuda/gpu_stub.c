/*
 * gpu_stub.c - gpu.h in a build without CUDA: every pointer is host memory, RCOLL_CUDA=1 is
 * refused with the reason.
 */
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
