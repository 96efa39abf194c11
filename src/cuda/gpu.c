/*
 * gpu.c - gpu.h with CUDA: when the driver is loaded, and pointer classification through
 * cuPointerGetAttributes with a cache of CUDA allocations.
 *
 * The cache holds up to RANGE_CACHE entries, one per CUDA allocation seen (device, managed or
 * pinned host), keyed by the allocation's range [base, base + size) as the driver reports it
 * (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR / RANGE_SIZE), with its kind and buffer id.  A
 * pointer inside a cached range is classified without a driver call.  Pageable host memory has
 * no range and is never cached.  Invalidation (docs/gpu.md): entries are replaced oldest first
 * when the cache is full and dropped by rcoll_gpu_cache_flush(); a freed allocation is not
 * noticed.  That is safe for what the kind decides today (device and managed memory are
 * refused, host and pinned host take the host path): device and managed ranges lie in the
 * driver's reserved unified address range, which host allocations never reuse, and a stale
 * pinned entry classifies reused host memory as pinned, which takes the same path.  The parts
 * of the device path where a stale entry would matter check the buffer id
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID, kept in the entry): rcoll_gpu_ptr_range asks the driver
 * for the range and id and drops an entry of another allocation over it, registrations for
 * GPUDirect RDMA ask for the id.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "util/log.h"
#include "util/status.h"

int rcoll_gpu_on;

#define RANGE_CACHE 64

typedef struct {
    uintptr_t base, end;
    unsigned long long buffer_id;
    rcoll_memkind_t kind;
} range_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static range_t cache[RANGE_CACHE];
static size_t cache_n, cache_next;
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

rcoll_status_t rcoll_gpu_setup(const rcoll_gpu_config_t *cfg)
{
    if (rcoll_gpu_active() || cfg->mode == RCOLL_GPU_OFF) return RCOLL_OK;
    if (cfg->mode == RCOLL_GPU_AUTO && !rcoll_cu && !rcoll_cu_present(cfg->cuda_lib))
        return RCOLL_OK; /* the process does not use CUDA: nothing of it to classify */
    pthread_mutex_lock(&setup_lock);
    rcoll_status_t st = rcoll_cu ? RCOLL_OK : rcoll_cu_load(cfg->cuda_lib);
    if (st == RCOLL_OK) __atomic_store_n(&rcoll_gpu_on, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&setup_lock);
    if (st != RCOLL_OK && cfg->mode == RCOLL_GPU_AUTO) {
        RCOLL_INFO(CUDA, "not using CUDA: %s", rcoll_err_get());
        return RCOLL_OK;
    }
    return st;
}

rcoll_status_t rcoll_gpu_load(const rcoll_gpu_config_t *cfg)
{
    if (rcoll_gpu_active()) return RCOLL_OK;
    if (cfg->mode == RCOLL_GPU_OFF)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                             "RCOLL_CUDA=0 forbids loading the CUDA driver (unset it, or set it "
                             "to 1 or auto, to use CUDA memory)");
    rcoll_gpu_config_t on = *cfg;
    on.mode = RCOLL_GPU_ON;
    return rcoll_gpu_setup(&on);
}

static int cache_find(uintptr_t p, rcoll_memkind_t *kind)
{
    for (size_t i = 0; i < cache_n; i++) {
        if (p >= cache[i].base && p < cache[i].end) {
            *kind = cache[i].kind;
            return 1;
        }
    }
    return 0;
}

rcoll_memkind_t rcoll_gpu_classify(const void *ptr)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    if (!rcoll_gpu_active() || !cu || !ptr) return RCOLL_MEM_HOST;
    uintptr_t p = (uintptr_t)ptr;
    rcoll_memkind_t kind;
    pthread_mutex_lock(&cache_lock);
    int hit = cache_find(p, &kind);
    pthread_mutex_unlock(&cache_lock);
    if (hit) return kind;

    unsigned int memtype = 0, managed = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    unsigned long long buffer_id = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *data[] = {&memtype, &managed, &start, &size, &buffer_id};
    CUresult res = cu->cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)p);
    if (res != CUDA_SUCCESS) {
        char text[160];
        RCOLL_TRACE(CUDA, "cuPointerGetAttributes(%p): %s; taken as host memory", ptr,
                    rcoll_cu_strerror(res, text, sizeof(text)));
        return RCOLL_MEM_HOST;
    }
    if (managed)
        kind = RCOLL_MEM_MANAGED;
    else if (memtype == CU_MEMORYTYPE_DEVICE)
        kind = RCOLL_MEM_DEVICE;
    else if (memtype == CU_MEMORYTYPE_HOST)
        kind = RCOLL_MEM_HOST_PINNED;
    else
        return RCOLL_MEM_HOST; /* unknown to the driver: pageable host memory, not cached */
    if (size && (uintptr_t)start <= p && p - (uintptr_t)start < size) {
        pthread_mutex_lock(&cache_lock);
        rcoll_memkind_t again;
        if (!cache_find(p, &again)) { /* another thread may have added it meanwhile */
            range_t *e = &cache[cache_next];
            cache_next = (cache_next + 1) % RANGE_CACHE;
            if (cache_n < RANGE_CACHE) cache_n++;
            *e = (range_t){(uintptr_t)start, (uintptr_t)start + size, buffer_id, kind};
        }
        pthread_mutex_unlock(&cache_lock);
    }
    return kind;
}

rcoll_status_t rcoll_gpu_ptr_range(const void *p, uintptr_t *base, size_t *size)
{
    /* The driver's word, with the buffer id: a cached range is trusted for a pointer's kind
     * only, since a freed allocation's range may now hold another of another size. */
    unsigned long long id = 0;
    rcoll_status_t st = rcoll_gpu_ptr_buffer_id(p, base, size, &id);
    if (st != RCOLL_OK) return st;
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < cache_n; i++) {
        range_t *e = &cache[i];
        if (e->end > *base && e->base < *base + *size && e->buffer_id != id) {
            RCOLL_TRACE(CUDA, "cached CUDA range [0x%llx, +%zu) is stale (buffer id %llu, now "
                        "%llu): dropped", (unsigned long long)e->base,
                        (size_t)(e->end - e->base), e->buffer_id, id);
            e->base = e->end = 0; /* matches nothing: the next classification asks */
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return RCOLL_OK;
}

rcoll_status_t rcoll_gpu_ptr_buffer_id(const void *p, uintptr_t *base, size_t *size,
                                       unsigned long long *buffer_id)
{
    if (!rcoll_gpu_active() || !rcoll_cu)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "the CUDA driver is not in use");
    CUdeviceptr start = 0;
    size_t bytes = 0;
    unsigned long long id = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *data[] = {&start, &bytes, &id};
    CUresult res = rcoll_cu->cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)p);
    if (res != CUDA_SUCCESS || !start || !bytes || !id)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%p is not in a CUDA allocation", p);
    *base = (uintptr_t)start;
    *size = bytes;
    *buffer_id = id;
    return RCOLL_OK;
}

size_t rcoll_gpu_cache_count(void)
{
    pthread_mutex_lock(&cache_lock);
    size_t n = cache_n;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

void rcoll_gpu_cache_flush(void)
{
    pthread_mutex_lock(&cache_lock);
    cache_n = cache_next = 0;
    pthread_mutex_unlock(&cache_lock);
}

void rcoll_gpu_test_reset(void)
{
    rcoll_gpu_cache_flush();
    __atomic_store_n(&rcoll_gpu_on, 0, __ATOMIC_RELEASE);
}
