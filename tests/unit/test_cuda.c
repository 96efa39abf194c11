/*
 * test_cuda.c - the CUDA layer without a GPU: through a scripted driver table (as
 * test_verbs.c scripts libibverbs) the driver's refusals (missing library, driver too old,
 * cuInit failing, each with its sentence), pointer classification and its range cache (one
 * driver call per allocation), the entry checks (kinds not mixed in one call), the public
 * rcoll_cuda_* calls and the staging path, point to point included:
 * every collective, blocking, nonblocking and grouped, run on real processes with
 * "device" buffers, results checked against a reference computed here, the bytes copied
 * each way counted (nothing copied out before rcoll_wait), the staging areas' life (lazy,
 * reused, grown, freed), and the driver failing.
 *
 * What this does NOT test: a GPU.  The scripted "device" allocations are host memory in an
 * arena of their own (as the driver's reserved address range keeps device addresses apart
 * from host ones); the scripted cuMemcpyDtoH/HtoD are memcpy, cuMemAllocHost is calloc.  It
 * checks rcoll's logic and its sequence of driver calls (which buffers, which bytes, which
 * context is current), not the driver's behaviour; tests/gpu/test_stage.c runs the same
 * collectives on a real GPU.  Runs under the ASan build too (nothing may leak).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "cuda/kernels.h"
#include "mp.h"
#include "rcoll.h"
#include "util/status.h"

/* ---- scripted driver ---- */
static int version = 13000, init_result = CUDA_SUCCESS, attr_calls;

typedef struct {
    char *mem;
    size_t size;
    unsigned memtype, managed;
    unsigned long long id;
    int heap; /* calloc'd (pinned host fakes); device fakes live in the arena */
} fake_alloc_t;

#define NALLOCS 256
static fake_alloc_t allocs[NALLOCS];
static int nallocs;

/* "Device" memory: an arena never reused, apart from the host heap. */
#define ARENA_BYTES (64u << 20)
static char *arena;
static size_t arena_used;

/* Contexts: every fake device allocation belongs to CTX_DEV; the application's current
 * context is CTX_APP.  A copy made while the buffer's context is not current is counted. */
#define CTX_APP ((CUcontext)(uintptr_t)0xa990)
#define CTX_DEV ((CUcontext)(uintptr_t)0xdef0)
static CUcontext cur_ctx = CTX_APP;
static int ctx_wrong, ctx_sets;

/* Staging calls: counters, and failures on demand (the n-th next call fails; 0: none). */
static size_t bytes_dtoh, bytes_htod;
static int calls_dtoh, calls_htod, host_allocs, host_frees, host_live;
static int fail_alloc_host, fail_dtoh, fail_htod;

static CUresult s_version(int *v)
{
    *v = version;
    return CUDA_SUCCESS;
}
static CUresult s_init(unsigned flags)
{
    (void)flags;
    return (CUresult)init_result;
}
static CUresult s_err_name(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_NO_DEVICE         ? "CUDA_ERROR_NO_DEVICE"
         : e == CUDA_ERROR_OUT_OF_MEMORY   ? "CUDA_ERROR_OUT_OF_MEMORY"
         : e == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
                                           : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}
static CUresult s_err_string(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_NO_DEVICE         ? "no CUDA-capable device is detected"
         : e == CUDA_ERROR_OUT_OF_MEMORY   ? "out of memory"
         : e == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
                                           : "unknown error";
    return CUDA_SUCCESS;
}
static const fake_alloc_t *find(uintptr_t p)
{
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].size && p >= (uintptr_t)allocs[i].mem &&
            p < (uintptr_t)allocs[i].mem + allocs[i].size)
            return &allocs[i];
    return NULL;
}
/* As the driver: attributes of a known allocation, zeros (SUCCESS) for memory it never saw. */
static CUresult s_attrs(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    attr_calls++;
    const fake_alloc_t *a = find((uintptr_t)p);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned *)data[i] = a ? a->memtype : 0;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned *)data[i] = a ? a->managed : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data[i] = a ? (CUdeviceptr)a->mem : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data[i] = a ? a->size : 0;
            break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            *(unsigned long long *)data[i] = a ? a->id : 0;
            break;
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            if (!a) return CUDA_ERROR_INVALID_VALUE;
            *(CUcontext *)data[i] = a->memtype == CU_MEMORYTYPE_DEVICE ? CTX_DEV : NULL;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}
static CUresult s_ctx_get(CUcontext *c)
{
    *c = cur_ctx;
    return CUDA_SUCCESS;
}
/* One scripted device: the current context's, when there is one (the rank's GPU at
 * communicator creation). */
static CUresult s_ctx_device(CUdevice *d)
{
    if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult s_ctx_set(CUcontext c)
{
    ctx_sets++;
    cur_ctx = c;
    return CUDA_SUCCESS;
}
static fake_alloc_t *fake_add(char *mem, size_t size, unsigned memtype, unsigned managed,
                              int heap)
{
    int slot = nallocs;
    for (int i = 0; i < nallocs; i++)
        if (!allocs[i].size) slot = i;
    if (slot == nallocs) {
        if (nallocs == NALLOCS) return NULL;
        nallocs++;
    }
    fake_alloc_t *a = &allocs[slot];
    static unsigned long long ids;
    *a = (fake_alloc_t){mem, size, memtype, managed, ++ids, heap};
    return a;
}
static CUresult s_alloc_host(void **p, size_t bytes)
{
    if (fail_alloc_host && --fail_alloc_host == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    char *m = calloc(1, bytes);
    if (!m || !fake_add(m, bytes, CU_MEMORYTYPE_HOST, 0, 1)) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    host_allocs++;
    host_live++;
    *p = m;
    return CUDA_SUCCESS;
}
/* Staging areas must be pinned for every context (portable): those that are, counted. */
static int host_portable;
static CUresult s_host_alloc(void **p, size_t bytes, unsigned int flags)
{
    CUresult r = s_alloc_host(p, bytes);
    if (r == CUDA_SUCCESS && (flags & CU_MEMHOSTALLOC_PORTABLE)) host_portable++;
    return r;
}
static CUresult s_free_host(void *p)
{
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].size && allocs[i].mem == p && allocs[i].memtype == CU_MEMORYTYPE_HOST) {
            free(p);
            allocs[i].size = 0;
            allocs[i].mem = NULL;
            host_frees++;
            host_live--;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}
/* A copy: the device side must lie inside one device allocation, with its context current;
 * the host side inside a pinned allocation (the staging area). */
static CUresult s_copy(char *dst, const char *src, size_t n, const char *dev, const char *host)
{
    const fake_alloc_t *d = find((uintptr_t)dev), *h = find((uintptr_t)host);
    if (!d || d->memtype != CU_MEMORYTYPE_DEVICE || (uintptr_t)dev + n > (uintptr_t)d->mem + d->size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!h || h->memtype != CU_MEMORYTYPE_HOST || (uintptr_t)host + n > (uintptr_t)h->mem + h->size)
        return CUDA_ERROR_INVALID_VALUE;
    if (cur_ctx != CTX_DEV) ctx_wrong++;
    memcpy(dst, src, n);
    return CUDA_SUCCESS;
}
static CUresult s_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    if (fail_dtoh && --fail_dtoh == 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
    CUresult r = s_copy(dst, (const char *)src, n, (const char *)src, dst);
    if (r == CUDA_SUCCESS) {
        calls_dtoh++;
        bytes_dtoh += n;
    }
    return r;
}
static CUresult s_htod(CUdeviceptr dst, const void *src, size_t n)
{
    if (fail_htod && --fail_htod == 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
    CUresult r = s_copy((char *)dst, src, n, (const char *)dst, src);
    if (r == CUDA_SUCCESS) {
        calls_htod++;
        bytes_htod += n;
    }
    return r;
}

/* Devices and memory of the public rcoll_cuda_* calls: two devices, whose primary contexts
 * are CTX_DEV (device 0, the one fake allocations belong to) and CTX_DEV1. */
#define CTX_DEV1 ((CUcontext)(uintptr_t)0xdef1)
static int retains, dev_allocs, dev_frees, memcpy_calls, fail_dev_alloc;
static char *fake(size_t size, unsigned memtype, unsigned managed);
static CUresult s_dev_count(int *n)
{
    *n = 2;
    return CUDA_SUCCESS;
}
static CUresult s_dev_get(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal > 1) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
static CUresult s_retain(CUcontext *c, CUdevice d)
{
    retains++;
    *c = d == 0 ? CTX_DEV : CTX_DEV1;
    return CUDA_SUCCESS;
}
static CUresult s_dev_name(char *name, int len, CUdevice d)
{
    snprintf(name, (size_t)len, "Scripted GPU %d", (int)d);
    return CUDA_SUCCESS;
}
static CUresult s_busid(char *id, int len, CUdevice d)
{
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x19 + (int)d);
    return CUDA_SUCCESS;
}
static CUresult s_mem_alloc(CUdeviceptr *p, size_t bytes)
{
    if (fail_dev_alloc && --fail_dev_alloc == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (cur_ctx != CTX_DEV) ctx_wrong++;
    char *m = fake(bytes, CU_MEMORYTYPE_DEVICE, 0);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    dev_allocs++;
    *p = (CUdeviceptr)m;
    return CUDA_SUCCESS;
}
static CUresult s_mem_alloc_managed(CUdeviceptr *p, size_t bytes, unsigned flags)
{
    if (flags != CU_MEM_ATTACH_GLOBAL) return CUDA_ERROR_INVALID_VALUE;
    char *m = fake(bytes, CU_MEMORYTYPE_DEVICE, 1);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    dev_allocs++;
    *p = (CUdeviceptr)m;
    return CUDA_SUCCESS;
}
static CUresult s_mem_free(CUdeviceptr p)
{
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].size && allocs[i].mem == (char *)p &&
            allocs[i].memtype == CU_MEMORYTYPE_DEVICE) {
            allocs[i].size = 0; /* the arena is never reused */
            dev_frees++;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}
/* cuMemcpy with unified addressing: any side may be host or device; a device side must lie
 * inside one allocation, with its context current. */
static CUresult s_memcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    const fake_alloc_t *d = find((uintptr_t)dst), *s = find((uintptr_t)src);
    if ((d && (uintptr_t)dst + n > (uintptr_t)d->mem + d->size) ||
        (s && (uintptr_t)src + n > (uintptr_t)s->mem + s->size))
        return CUDA_ERROR_INVALID_VALUE;
    if (cur_ctx != CTX_DEV) ctx_wrong++;
    memmove((void *)dst, (const void *)src, n);
    memcpy_calls++;
    return CUDA_SUCCESS;
}

static const rcoll_cu_api_t scripted = {
    .cuInit = s_init, .cuDriverGetVersion = s_version, .cuGetErrorName = s_err_name,
    .cuGetErrorString = s_err_string, .cuPointerGetAttributes = s_attrs,
    .cuCtxGetCurrent = s_ctx_get, .cuCtxSetCurrent = s_ctx_set,
    .cuCtxGetDevice = s_ctx_device,
    .cuMemAllocHost = s_alloc_host, .cuMemFreeHost = s_free_host,
    .cuMemHostAlloc = s_host_alloc,
    .cuMemcpyDtoH = s_dtoh, .cuMemcpyHtoD = s_htod,
    .cuDeviceGetCount = s_dev_count, .cuDeviceGet = s_dev_get,
    .cuDevicePrimaryCtxRetain = s_retain, .cuDeviceGetName = s_dev_name,
    .cuDeviceGetPCIBusId = s_busid, .cuMemAlloc = s_mem_alloc,
    .cuMemAllocManaged = s_mem_alloc_managed, .cuMemFree = s_mem_free, .cuMemcpy = s_memcpy,
};

/* A fake allocation: device and managed ones from the arena, pinned host ones from the heap. */
static char *fake(size_t size, unsigned memtype, unsigned managed)
{
    char *mem;
    int heap = memtype == CU_MEMORYTYPE_HOST;
    if (heap) {
        mem = calloc(1, size);
    } else {
        size_t at = (arena_used + 255) & ~(size_t)255;
        if (at + size > ARENA_BYTES) return NULL;
        mem = arena + at;
        arena_used = at + size;
        memset(mem, 0, size);
    }
    if (!mem || !fake_add(mem, size, memtype, managed, heap)) {
        if (heap) free(mem);
        return NULL;
    }
    return mem;
}

/* ---- the driver's refusals ---- */
static void test_refusals(void)
{
    CHECK(rcoll_cu_load("/nonexistent/libcuda.so.1") == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no CUDA driver (/nonexistent/libcuda.so.1: "),
          "missing library named with dlerror's text: %s", rcoll_err_get());
    CHECK(rcoll_cu == NULL, "no table after a failed load");
    CHECK(rcoll_cu_load("/nonexistent/libcuda.so.1") == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no CUDA driver"), "the result is kept: %s",
          rcoll_err_get());

    version = 12040;
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "CUDA driver 12.4") && strstr(rcoll_err_get(), "too old"),
          "driver too old: %s", rcoll_err_get());
    CHECK(rcoll_cu == NULL, "no table with an old driver");
    version = 13000;
    init_result = CUDA_ERROR_NO_DEVICE;
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable "
                                      "device is detected)"),
          "cuInit failure: %s", rcoll_err_get());
    init_result = CUDA_SUCCESS;
    rcoll_cu_set_api(NULL);

    /* RCOLL_CUDA=1 without a driver fails communicator creation with the sentence. */
    rcoll_gpu_config_t cfg = {.mode = RCOLL_GPU_ON};
    snprintf(cfg.cuda_lib, sizeof(cfg.cuda_lib), "/nonexistent/libcuda.so.1");
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no CUDA driver"), "RCOLL_CUDA=1: %s", rcoll_err_get());
    CHECK(!rcoll_gpu_active(), "not active");
    cfg.mode = RCOLL_GPU_AUTO; /* auto: the library is not in the process, nothing is tried */
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_OK && !rcoll_gpu_active(), "auto without libcuda");
    cfg.mode = RCOLL_GPU_OFF;
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_OK && !rcoll_gpu_active(), "RCOLL_CUDA=0");
    rcoll_cu_set_api(NULL);

    setenv("RCOLL_CUDA", "1", 1);
    setenv("RCOLL_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
    rcoll_unique_id_t id;
    rcoll_comm_t comm = NULL;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK, "unique id");
    CHECK(rcoll_comm_init_rank(1, &id, 0, &comm) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_last_init_error(), "no CUDA driver (/nonexistent/libcuda.so.1"),
          "communicator creation refused: %s", rcoll_last_init_error());
    unsetenv("RCOLL_CUDA");
    unsetenv("RCOLL_CUDA_LIB");
    rcoll_cu_set_api(NULL);
}

/* ---- classification and its cache ---- */
static void test_classify(void)
{
    CHECK(rcoll_gpu_classify(&version) == RCOLL_MEM_HOST && attr_calls == 0,
          "no driver in use: host, no call");
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_OK, "scripted driver: %s", rcoll_err_get());
    rcoll_gpu_config_t cfg = {.mode = RCOLL_GPU_AUTO};
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_OK && rcoll_gpu_active(), "active");

    char *dev = fake(1 << 16, CU_MEMORYTYPE_DEVICE, 0);
    char *man = fake(1 << 12, CU_MEMORYTYPE_DEVICE, 1);
    char *pin = fake(1 << 12, CU_MEMORYTYPE_HOST, 0);
    char host[64];
    attr_calls = 0;
    CHECK(rcoll_gpu_classify(dev) == RCOLL_MEM_DEVICE, "device");
    CHECK(rcoll_gpu_classify(dev + 1000) == RCOLL_MEM_DEVICE &&
              rcoll_gpu_classify(dev + (1 << 16) - 1) == RCOLL_MEM_DEVICE && attr_calls == 1,
          "inside the allocation: cached, one driver call (%d)", attr_calls);
    CHECK(rcoll_gpu_classify(man) == RCOLL_MEM_MANAGED &&
              rcoll_gpu_classify(man + 5) == RCOLL_MEM_MANAGED && attr_calls == 2,
          "managed, cached (%d)", attr_calls);
    CHECK(rcoll_gpu_classify(pin) == RCOLL_MEM_HOST_PINNED &&
              rcoll_gpu_classify(pin + 7) == RCOLL_MEM_HOST_PINNED && attr_calls == 3,
          "pinned host, cached (%d)", attr_calls);
    CHECK(rcoll_gpu_classify(host) == RCOLL_MEM_HOST &&
              rcoll_gpu_classify(host) == RCOLL_MEM_HOST && attr_calls == 5,
          "pageable host: asked each time, never cached (%d)", attr_calls);
    CHECK(rcoll_gpu_cache_count() == 3, "three entries");
    rcoll_gpu_cache_flush();
    CHECK(rcoll_gpu_cache_count() == 0 && rcoll_gpu_classify(dev + 3) == RCOLL_MEM_DEVICE &&
              attr_calls == 6, "flushed: asked again");
    /* more allocations than the cache holds: the oldest go, the count stays bounded */
    for (int i = 0; i < 70; i++) rcoll_gpu_classify(fake(64, CU_MEMORYTYPE_DEVICE, 0));
    CHECK(rcoll_gpu_cache_count() == 64, "bounded: %zu", rcoll_gpu_cache_count());
    /* an allocation freed behind rcoll's back and its address reused by a smaller one: the
     * range comes from the driver, checked by buffer id, and the stale entry goes */
    rcoll_gpu_cache_flush();
    char *big = fake(1 << 16, CU_MEMORYTYPE_DEVICE, 0);
    uintptr_t base = 0;
    size_t size = 0;
    CHECK(rcoll_gpu_classify(big + 100) == RCOLL_MEM_DEVICE &&
              rcoll_gpu_ptr_range(big + 100, &base, &size) == RCOLL_OK &&
              base == (uintptr_t)big && size == 1 << 16, "range of a classified allocation");
    fake_alloc_t *old = (fake_alloc_t *)find((uintptr_t)big);
    if (old) old->size = 0; /* freed */
    fake_add(big, 4096, CU_MEMORYTYPE_DEVICE, 1, 0); /* reused, smaller, managed */
    CHECK(rcoll_gpu_ptr_range(big + 100, &base, &size) == RCOLL_OK &&
              base == (uintptr_t)big && size == 4096,
          "range after the address was reused: %zu bytes, not the stale cached 65536", size);
    attr_calls = 0;
    CHECK(rcoll_gpu_classify(big + 100) == RCOLL_MEM_MANAGED && attr_calls == 1,
          "the stale entry is gone: classified again (%d calls)", attr_calls);
    CHECK(rcoll_gpu_ptr_range(big + 8192, &base, &size) == RCOLL_ERR_INVALID_ARG,
          "past the new allocation: not CUDA memory");
    CHECK(!strcmp(rcoll_memkind_name(RCOLL_MEM_DEVICE), "CUDA device memory") &&
              !strcmp(rcoll_memkind_name(RCOLL_MEM_MANAGED), "CUDA managed memory"), "names");
    rcoll_gpu_cache_flush();
}

/* ---- the public rcoll_cuda_* calls: devices, memory, copies ---- */
static void test_public(void)
{
    int n = -1;
    /* No driver: each call says why (the first load's result is kept for the process). */
    rcoll_cu_set_api(NULL);
    rcoll_gpu_test_reset();
    setenv("RCOLL_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
    CHECK(rcoll_cuda_device_count(&n) == RCOLL_ERR_UNSUPPORTED && n == 0 &&
              !strncmp(rcoll_cuda_last_error(), "rcoll_cuda_device_count: no CUDA driver "
                       "(/nonexistent/libcuda.so.1: ", 67),
          "no driver: %s", rcoll_cuda_last_error());
    void *p = &n;
    CHECK(rcoll_cuda_alloc(&p, 64) == RCOLL_ERR_UNSUPPORTED && p == NULL &&
              strstr(rcoll_cuda_last_error(), "rcoll_cuda_alloc: no CUDA driver"),
          "alloc without a driver: %s", rcoll_cuda_last_error());
    unsetenv("RCOLL_CUDA_LIB");
    rcoll_cu_set_api(NULL);
    setenv("RCOLL_CUDA", "0", 1);
    CHECK(rcoll_cuda_set_device(0) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_cuda_last_error(), "rcoll_cuda_set_device: RCOLL_CUDA=0 forbids"),
          "RCOLL_CUDA=0 refuses: %s", rcoll_cuda_last_error());
    unsetenv("RCOLL_CUDA");
    CHECK(rcoll_cuda_device_count(NULL) == RCOLL_ERR_INVALID_ARG &&
              !strcmp(rcoll_cuda_last_error(), "rcoll_cuda_device_count: count is NULL"),
          "NULL count: %s", rcoll_cuda_last_error());

    /* The scripted driver, loaded by the first call (not by a communicator). */
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_OK && !rcoll_gpu_active(), "table, not active");
    CHECK(rcoll_cuda_device_count(&n) == RCOLL_OK && n == 2 && rcoll_gpu_active() &&
              rcoll_cuda_last_error()[0] == 0, "two devices, driver now in use (%d)", n);
    CHECK(rcoll_cuda_set_device(2) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_cuda_last_error(), "CUDA device 2 does not exist: the driver sees 2 "
                     "devices (ordinals 0 to 1; CUDA_VISIBLE_DEVICES="),
          "no device 2: %s", rcoll_cuda_last_error());
    CHECK(rcoll_cuda_set_device(-1) == RCOLL_ERR_INVALID_ARG, "no device -1");
    retains = 0;
    CHECK(rcoll_cuda_set_device(1) == RCOLL_OK && cur_ctx == CTX_DEV1 &&
              rcoll_cuda_set_device(0) == RCOLL_OK && cur_ctx == CTX_DEV &&
              rcoll_cuda_set_device(1) == RCOLL_OK && rcoll_cuda_set_device(0) == RCOLL_OK &&
              retains == 2, "set device: its primary context current, retained once (%d)",
          retains);
    char name[64], bus[16], tiny[8];
    CHECK(rcoll_cuda_device_info(1, name, sizeof(name), bus, sizeof(bus)) == RCOLL_OK &&
              !strcmp(name, "Scripted GPU 1") && !strcmp(bus, "0000:1a:00.0"),
          "info: %s %s", name, bus);
    CHECK(rcoll_cuda_device_info(0, tiny, sizeof(tiny), NULL, 0) == RCOLL_OK &&
              !strcmp(tiny, "Scripte"), "truncated within its length: %s", tiny);
    CHECK(rcoll_cuda_device_info(5, name, sizeof(name), NULL, 0) == RCOLL_ERR_INVALID_ARG &&
              name[0] == 0, "info of a missing device");

    /* Allocations. */
    CHECK(rcoll_cuda_alloc(NULL, 64) == RCOLL_ERR_INVALID_ARG, "ptr NULL");
    CHECK(rcoll_cuda_alloc(&p, 0) == RCOLL_ERR_INVALID_ARG && p == NULL &&
              strstr(rcoll_cuda_last_error(), "bytes is 0"), "0 bytes");
    cur_ctx = NULL;
    CHECK(rcoll_cuda_alloc(&p, 64) == RCOLL_ERR_INVALID_USAGE &&
              strstr(rcoll_cuda_last_error(), "no CUDA context is current in this thread"),
          "no current device: %s", rcoll_cuda_last_error());
    CHECK(rcoll_cuda_set_device(0) == RCOLL_OK, "device 0");
    fail_dev_alloc = 1;
    CHECK(rcoll_cuda_alloc(&p, 1 << 20) == RCOLL_ERR_NO_MEMORY && p == NULL &&
              !strcmp(rcoll_cuda_last_error(), "rcoll_cuda_alloc: cuMemAlloc(1048576 bytes) "
                      "failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"),
          "device full: %s", rcoll_cuda_last_error());
    ctx_wrong = 0;
    int allocs0 = dev_allocs, frees0 = dev_frees;
    char *d = NULL, *m = NULL;
    CHECK(rcoll_cuda_alloc((void **)&d, 4096) == RCOLL_OK && d &&
              rcoll_gpu_classify(d) == RCOLL_MEM_DEVICE, "device allocation");
    CHECK(rcoll_cuda_alloc_managed((void **)&m, 4096) == RCOLL_OK && m &&
              rcoll_gpu_classify(m + 100) == RCOLL_MEM_MANAGED, "managed allocation");

    /* Copies: host -> device -> device -> host, in the device's context; host to host with
     * no driver call. */
    char src[4096], back[4096];
    for (int i = 0; i < 4096; i++) src[i] = (char)(i * 7 + 1);
    memset(back, 0, sizeof(back));
    cur_ctx = CTX_DEV1; /* the caller's current device is another one */
    memcpy_calls = 0;
    CHECK(rcoll_cuda_memcpy(d, src, 4096) == RCOLL_OK &&
              rcoll_cuda_memcpy(m, d + 96, 4000) == RCOLL_OK &&
              rcoll_cuda_memcpy(back, m, 4000) == RCOLL_OK && memcpy_calls == 3 &&
              !memcmp(back, src + 96, 4000) && ctx_wrong == 0 && cur_ctx == CTX_DEV1,
          "round trip through device and managed memory, each copy in the buffer's context, "
          "the caller's context restored (%d calls, %d wrong)", memcpy_calls, ctx_wrong);
    CHECK(rcoll_cuda_memcpy(back, src, 100) == RCOLL_OK && memcpy_calls == 3 &&
              !memcmp(back, src, 100), "host to host: memmove, no driver call");
    CHECK(rcoll_cuda_memcpy(back, d + 4000, 200) == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_cuda_last_error(), "rcoll_cuda_memcpy: cuMemcpy of 200 bytes from ") &&
              strstr(rcoll_cuda_last_error(), "(CUDA device memory) to "),
          "a copy past the allocation fails with the driver's error: %s",
          rcoll_cuda_last_error());
    CHECK(rcoll_cuda_memcpy(NULL, src, 4) == RCOLL_ERR_INVALID_ARG &&
              rcoll_cuda_memcpy(back, src, 0) == RCOLL_OK, "NULL dst refused, 0 bytes a no-op");

    /* Frees. */
    CHECK(rcoll_cuda_free(d + 64) == RCOLL_ERR_INVALID_ARG && dev_frees == frees0 &&
              strstr(rcoll_cuda_last_error(), "is not the start of a CUDA device or managed "
                     "allocation"), "inside an allocation: refused, nothing freed");
    CHECK(rcoll_cuda_free(src) == RCOLL_ERR_INVALID_ARG && dev_frees == frees0,
          "host memory: refused");
    CHECK(rcoll_cuda_free(NULL) == RCOLL_OK, "NULL: no-op");
    CHECK(rcoll_cuda_free(d) == RCOLL_OK && rcoll_cuda_free(m) == RCOLL_OK &&
              dev_frees == frees0 + 2 && dev_allocs == allocs0 + 2 &&
              rcoll_gpu_cache_count() == 0 && cur_ctx == CTX_DEV1,
          "freed in their context, the cache dropped, the caller's context restored");
    CHECK(rcoll_cuda_free(d) == RCOLL_ERR_INVALID_ARG, "double free refused");
    cur_ctx = CTX_APP;
    ctx_wrong = 0;
    rcoll_gpu_cache_flush(); /* the driver stays in use for the tests after this one */
}

/* ---- the entry checks of the collectives ---- */
static void test_api(void)
{
    rcoll_unique_id_t id;
    rcoll_comm_t comm = NULL;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK && rcoll_comm_init_rank(1, &id, 0, &comm) ==
              RCOLL_OK, "one-rank communicator: %s", rcoll_last_init_error());
    if (!comm) return;
    float *dev = (float *)fake(4096, CU_MEMORYTYPE_DEVICE, 0);
    float *man = (float *)fake(4096, CU_MEMORYTYPE_DEVICE, 1);
    float *pin = (float *)fake(4096, CU_MEMORYTYPE_HOST, 0);
    float host[16] = {1, 2, 3}, out[16];

    CHECK(rcoll_allreduce(host, out, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK &&
              out[2] == 3, "host buffers: accepted");
    CHECK(rcoll_allreduce(host, pin, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK &&
              pin[1] == 2, "pinned host: the host path");
    CHECK(host_allocs == 0 && bytes_dtoh == 0, "host buffers: nothing staged");
    CHECK(rcoll_allreduce(host, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_INVALID_ARG && strstr(rcoll_comm_last_error(comm), "host memory but") &&
              strstr(rcoll_comm_last_error(comm), "all host memory or all CUDA memory"),
          "mixed kinds refused: %s", rcoll_comm_last_error(comm));
    size_t counts[1] = {16}, displs[1] = {0};
    CHECK(rcoll_allgatherv(host, 16, man, counts, displs, RCOLL_FLOAT32, comm) ==
              RCOLL_ERR_INVALID_ARG, "allgatherv mixed: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_allreduce(pin, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_INVALID_ARG && strstr(rcoll_comm_last_error(comm), "pinned host memory"),
          "pinned and device mixed: %s", rcoll_comm_last_error(comm));
    CHECK(host_allocs == 0, "a refused call stages nothing");


    /* the blocking calls stage: one rank, so the result is the input */
    for (int i = 0; i < 16; i++) dev[i] = (float)i;
    size_t mem0 = 0, mem1 = 0;
    rcoll_comm_mem_usage(comm, &mem0);
    CHECK(rcoll_allreduce(dev, dev + 64, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK &&
              dev[64 + 5] == 5 && dev[64 + 15] == 15, "device allreduce: %s",
          rcoll_comm_last_error(comm));
    rcoll_comm_mem_usage(comm, &mem1);
    CHECK(host_allocs == 1 && host_live == 1 && bytes_dtoh == 64 && bytes_htod == 64 &&
              calls_dtoh == 1 && calls_htod == 1, "staged: %d area, %zu bytes in, %zu out",
          host_allocs, bytes_dtoh, bytes_htod);
    CHECK(mem1 >= mem0 + 64, "rcoll_comm_mem_usage counts the staging area: %zu -> %zu", mem0,
          mem1);
    CHECK(cur_ctx == CTX_APP && ctx_wrong == 0, "copies in the buffer's context, the "
          "caller's restored (%d wrong)", ctx_wrong);
    for (int i = 0; i < 16; i++) man[i] = (float)(2 * i);
    CHECK(rcoll_allreduce(RCOLL_IN_PLACE, man, 16, RCOLL_FLOAT32, RCOLL_MAX, comm) == RCOLL_OK &&
              man[7] == 14 && host_allocs == 1 && bytes_dtoh == 128 && bytes_htod == 128,
          "managed, in place, the area reused: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_bcast(dev, 16, RCOLL_FLOAT32, 0, comm) == RCOLL_OK && bytes_dtoh == 192 &&
              bytes_htod == 128, "bcast on the root: copied in only");
    CHECK(rcoll_reduce(dev, NULL, 16, RCOLL_FLOAT32, RCOLL_SUM, 0, comm) ==
              RCOLL_ERR_INVALID_ARG, "reduce: recvbuf NULL on the root still refused");

    /* nonblocking: copied in at the post, out when rcoll_wait / rcoll_test sees completion,
     * in an area of its own per call in flight */
    rcoll_request_t r1 = NULL, r2 = NULL;
    int allocs0 = host_allocs, done = 0;
    size_t out0 = bytes_htod;
    for (int i = 0; i < 16; i++) dev[i] = (float)(3 * i), man[i] = (float)(5 * i);
    CHECK(rcoll_iallreduce(dev, dev + 64, 16, RCOLL_FLOAT32, RCOLL_SUM, comm, &r1) ==
              RCOLL_OK && rcoll_iallgather(RCOLL_IN_PLACE, man, 16, RCOLL_FLOAT32, comm, &r2) ==
              RCOLL_OK, "two nonblocking calls posted: %s", rcoll_comm_last_error(comm));
    CHECK(bytes_htod == out0 && host_allocs == allocs0 + 2, "nothing copied out yet, an area "
          "each (%d)", host_allocs - allocs0);
    CHECK(rcoll_wait(&r2) == RCOLL_OK && man[9] == 45 && bytes_htod == out0 + 64,
          "iallgather in place completed by rcoll_wait: %s", rcoll_comm_last_error(comm));
    for (int k = 0; k < 1000 && !done; k++)
        if (rcoll_test(&r1, &done) != RCOLL_OK) break;
    CHECK(done && !r1 && dev[64 + 7] == 21 && bytes_htod == out0 + 128 && cur_ctx == CTX_APP,
          "iallreduce completed by rcoll_test: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_iallreduce(RCOLL_IN_PLACE, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, comm, &r1) ==
              RCOLL_OK && rcoll_wait(&r1) == RCOLL_OK && host_allocs == allocs0 + 2,
          "the next nonblocking call reuses a free area");
    fail_htod = 1;
    CHECK(rcoll_iallreduce(RCOLL_IN_PLACE, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, comm, &r1) ==
              RCOLL_OK && rcoll_wait(&r1) == RCOLL_ERR_SYSTEM && !r1 &&
              strstr(rcoll_comm_last_error(comm), "rcoll_iallreduce: copying the result from "
                     "the staging area to recvbuf") &&
              strstr(rcoll_comm_last_error(comm), "cuMemcpyHtoD"),
          "a failing copy out is rcoll_wait's error: %s", rcoll_comm_last_error(comm));
    fail_dtoh = 1;
    r1 = NULL;
    CHECK(rcoll_ireduce(dev, dev + 64, 16, RCOLL_FLOAT32, RCOLL_SUM, 0, comm, &r1) ==
              RCOLL_ERR_SYSTEM && !r1 && strstr(rcoll_comm_last_error(comm), "cuMemcpyDtoH"),
          "a failing copy in is the post's error: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_iallreduce(RCOLL_IN_PLACE, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, comm, &r1) ==
              RCOLL_OK && rcoll_wait(&r1) == RCOLL_OK && host_allocs == allocs0 + 2,
          "usable, the areas reused after the failures: %s", rcoll_comm_last_error(comm));

    /* blocking calls inside a group: copied in at the call, out at rcoll_group_end */
    for (int i = 0; i < 16; i++) dev[i] = (float)(7 * i), man[i] = (float)i;
    out0 = bytes_htod;
    CHECK(rcoll_group_start() == RCOLL_OK &&
              rcoll_allreduce(dev, dev + 64, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK &&
              rcoll_bcast(man, 16, RCOLL_FLOAT32, 0, comm) == RCOLL_OK &&
              rcoll_reduce_scatter(RCOLL_IN_PLACE, man + 64, 16, RCOLL_FLOAT32, RCOLL_SUM,
                                   comm) == RCOLL_OK && bytes_htod == out0,
          "grouped device calls queued, nothing copied out yet: %s",
          rcoll_comm_last_error(comm));
    CHECK(rcoll_group_end() == RCOLL_OK && dev[64 + 3] == 21 && bytes_htod == out0 + 128 &&
              host_allocs == allocs0 + 2 + 1 && cur_ctx == CTX_APP,
          "copied out at rcoll_group_end (%zu bytes, %d areas): %s", bytes_htod - out0,
          host_allocs - allocs0, rcoll_comm_last_error(comm));
    CHECK(rcoll_allreduce(host, out, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK,
          "still usable after the refusals: %s", rcoll_comm_last_error(comm));
    /* point to point with device buffers: staged, each buffer in a pinned area of its own;
     * a message to oneself inside a group, the receive copied out at rcoll_group_end */
    for (int i = 0; i < 8; i++) dev[i] = (float)(10 + i), dev[256 + i] = -1;
    int p2p_allocs = host_allocs, p2p_live = host_live;
    bytes_dtoh = bytes_htod = 0;
    CHECK(rcoll_group_start() == RCOLL_OK, "group");
    CHECK(rcoll_send(dev, 8, RCOLL_FLOAT32, 0, comm) == RCOLL_OK &&
              rcoll_recv(dev + 256, 8, RCOLL_FLOAT32, 0, comm) == RCOLL_OK && bytes_dtoh == 32 &&
              bytes_htod == 0 && dev[256] == -1, "send/recv to oneself in a group: the send "
          "copied in at the call, nothing out yet: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_group_end() == RCOLL_OK && dev[256] == 10 && dev[256 + 7] == 17 &&
              bytes_htod == 32 && host_allocs == p2p_allocs && host_live == p2p_live &&
              cur_ctx == CTX_APP,
          "received at rcoll_group_end: %.0f %.0f (%d new areas: the nonblocking calls' "
          "reused): %s", dev[256], dev[256 + 7], host_allocs - p2p_allocs,
          rcoll_comm_last_error(comm));
    /* the send's copy in failing: that item is not sent (the group goes on without it) */
    fail_dtoh = 1;
    CHECK(rcoll_group_start() == RCOLL_OK, "group");
    rcoll_status_t s1 = rcoll_send(dev, 8, RCOLL_FLOAT32, 0, comm);
    CHECK(s1 == RCOLL_ERR_SYSTEM && strstr(rcoll_comm_last_error(comm), "rcoll_send: copying buf") &&
              strstr(rcoll_comm_last_error(comm), "CUDA_ERROR_ILLEGAL_ADDRESS") &&
              strstr(rcoll_comm_last_error(comm), "(nothing was sent)"),
          "send's copy in failing: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_group_end() == RCOLL_OK && bytes_htod == 32, "the group ends empty: %s",
          rcoll_comm_last_error(comm));
    /* the receive's copy out failing: the status of rcoll_group_end, with its sentence */
    for (int i = 0; i < 8; i++) dev[i] = (float)(20 + i);
    fail_htod = 1;
    CHECK(rcoll_group_start() == RCOLL_OK && rcoll_send(dev, 8, RCOLL_FLOAT32, 0, comm) ==
              RCOLL_OK && rcoll_recv(dev + 256, 8, RCOLL_FLOAT32, 0, comm) == RCOLL_OK, "group");
    CHECK(rcoll_group_end() == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_comm_last_error(comm), "rcoll_recv: copying the received message "
                     "from the staging area to buf") &&
              strstr(rcoll_comm_last_error(comm), "(the message itself was received)") &&
              dev[256] == 10 && fail_htod == 0,
          "recv's copy out failing: %s", rcoll_comm_last_error(comm));
    CHECK(host_allocs == p2p_allocs && host_live == p2p_live, "the areas reused (%d "
          "allocated)", host_allocs - p2p_allocs);
    CHECK(rcoll_comm_destroy(comm) == RCOLL_OK, "destroy");
    CHECK(host_live == 0 && host_frees == 4, "the staging areas freed with the communicator "
          "(%d live, %d freed)", host_live, host_frees);
}

/* ---- the staging path on real processes ---- */

typedef int32_t elem_t;
static elem_t val(int rank, size_t i, int salt) { return rank * 1000 + (elem_t)i * 3 + salt; }

typedef struct {
    long fails0;
    rcoll_comm_t comm;
    int rank, n;
} ctx_t;

/* The copies of one call, from the counters. */
static size_t in0, out0;
static void mark(void)
{
    in0 = bytes_dtoh;
    out0 = bytes_htod;
}
static void copied(ctx_t *c, const char *what, size_t in, size_t out)
{
    CHECK(bytes_dtoh - in0 == in && bytes_htod - out0 == out,
          "rank %d/%d %s: copied %zu bytes in and %zu out (expected %zu and %zu)", c->rank, c->n,
          what, bytes_dtoh - in0, bytes_htod - out0, in, out);
    CHECK(cur_ctx == CTX_APP, "rank %d %s: the caller's context is current again", c->rank,
          what);
}
static int ok(ctx_t *c, rcoll_status_t st, const char *what)
{
    CHECK(st == RCOLL_OK, "rank %d/%d %s: %s: %s", c->rank, c->n, what, rcoll_status_string(st),
          rcoll_comm_last_error(c->comm));
    return st == RCOLL_OK;
}
/* Elements [0, count) of buf against want(i); returns the number wrong (the first printed). */
#define EXPECT(c, what, buf, count, want_expr)                                                \
    do {                                                                                      \
        size_t bad_ = 0, first_ = 0;                                                          \
        for (size_t i = 0; i < (count); i++)                                                  \
            if ((buf)[i] != (elem_t)(want_expr) && !bad_++) first_ = i;                       \
        CHECK(!bad_, "rank %d/%d %s: %zu wrong, first [%zu] = %d", (c)->rank, (c)->n, what,   \
              bad_, first_, bad_ ? (int)(buf)[first_] : 0);                                   \
    } while (0)

#define POISON ((elem_t)0x5a5a5a5a)
static elem_t *dalloc(size_t count)
{
    elem_t *p = (elem_t *)fake(count * sizeof(elem_t) + 64, CU_MEMORYTYPE_DEVICE, 0);
    for (size_t i = 0; p && i < count + 16; i++) p[i] = POISON;
    return p;
}

static void stage_block(ctx_t *c, size_t cnt)
{
    int me = c->rank, n = c->n;
    size_t es = sizeof(elem_t), B = cnt * es;
    rcoll_comm_t comm = c->comm;
    elem_t *s = dalloc(cnt * (size_t)n), *r = dalloc(cnt * (size_t)n);
    if (!s || !r) {
        CHECK(0, "arena full");
        return;
    }

    /* all-reduce, out of place and in place */
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 1);
    mark();
    if (ok(c, rcoll_allreduce(s, r, cnt, RCOLL_INT32, RCOLL_SUM, comm), "allreduce")) {
        EXPECT(c, "allreduce", r, cnt, (n * (n - 1) / 2) * 1000 + n * (elem_t)(i * 3 + 1));
        copied(c, "allreduce", B, B);
        CHECK(r[cnt] == POISON, "allreduce: nothing past the end");
    }
    for (size_t i = 0; i < cnt; i++) r[i] = val(me, i, 2);
    mark();
    if (ok(c, rcoll_allreduce(RCOLL_IN_PLACE, r, cnt, RCOLL_INT32, RCOLL_MAX, comm), "in place")) {
        EXPECT(c, "allreduce in place", r, cnt, val(n - 1, i, 2));
        copied(c, "in place", B, B);
    }

    /* broadcast from the last rank */
    int root = n - 1;
    for (size_t i = 0; i < cnt; i++) r[i] = me == root ? val(me, i, 3) : POISON;
    mark();
    if (ok(c, rcoll_bcast(r, cnt, RCOLL_INT32, root, comm), "bcast")) {
        EXPECT(c, "bcast", r, cnt, val(root, i, 3));
        copied(c, "bcast", me == root ? B : 0, me == root ? 0 : B);
    }

    /* reduce to rank 0: recvbuf NULL elsewhere; in place on the root */
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 4), r[i] = POISON;
    mark();
    if (ok(c, rcoll_reduce(s, me == 0 ? r : NULL, cnt, RCOLL_INT32, RCOLL_SUM, 0, comm),
           "reduce")) {
        if (me == 0) EXPECT(c, "reduce", r, cnt, (n * (n - 1) / 2) * 1000 + n * (elem_t)(i * 3 + 4));
        copied(c, "reduce", B, me == 0 ? B : 0);
    }
    for (size_t i = 0; i < cnt; i++) r[i] = val(me, i, 5);
    mark();
    if (ok(c, rcoll_reduce(me == 0 ? RCOLL_IN_PLACE : r, me == 0 ? r : NULL, cnt, RCOLL_INT32,
                           RCOLL_MIN, 0, comm), "reduce in place")) {
        if (me == 0) EXPECT(c, "reduce in place", r, cnt, val(0, i, 5));
        copied(c, "reduce in place", B, me == 0 ? B : 0);
    }

    /* all-gather, out of place and in place */
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 6);
    for (size_t i = 0; i < cnt * (size_t)n; i++) r[i] = POISON;
    mark();
    if (ok(c, rcoll_allgather(s, r, cnt, RCOLL_INT32, comm), "allgather")) {
        EXPECT(c, "allgather", r, cnt * (size_t)n, val((int)(i / cnt), i % cnt, 6));
        copied(c, "allgather", B, (size_t)n * B);
    }
    for (size_t i = 0; i < cnt * (size_t)n; i++)
        r[i] = i / cnt == (size_t)me ? val(me, i % cnt, 7) : POISON;
    mark();
    if (ok(c, rcoll_allgather(RCOLL_IN_PLACE, r, cnt, RCOLL_INT32, comm), "allgather in place")) {
        EXPECT(c, "allgather in place", r, cnt * (size_t)n, val((int)(i / cnt), i % cnt, 7));
        copied(c, "allgather in place", B, (size_t)n * B);
    }

    /* reduce-scatter, out of place and in place (the result at recvbuf's start) */
    for (size_t i = 0; i < cnt * (size_t)n; i++) s[i] = val(me, i, 8);
    for (size_t i = 0; i < cnt; i++) r[i] = POISON;
    mark();
    if (ok(c, rcoll_reduce_scatter(s, r, cnt, RCOLL_INT32, RCOLL_SUM, comm), "reduce_scatter")) {
        EXPECT(c, "reduce_scatter", r, cnt,
               (n * (n - 1) / 2) * 1000 + n * (elem_t)(((size_t)me * cnt + i) * 3 + 8));
        copied(c, "reduce_scatter", (size_t)n * B, B);
    }
    for (size_t i = 0; i < cnt * (size_t)n; i++) r[i] = val(me, i, 9);
    mark();
    if (ok(c, rcoll_reduce_scatter(RCOLL_IN_PLACE, r, cnt, RCOLL_INT32, RCOLL_SUM, comm),
           "reduce_scatter in place")) {
        EXPECT(c, "reduce_scatter in place", r, cnt,
               (n * (n - 1) / 2) * 1000 + n * (elem_t)(((size_t)me * cnt + i) * 3 + 9));
        copied(c, "reduce_scatter in place", (size_t)n * B, B);
    }

    /* all-to-all: block j of rank i holds i, j */
    for (size_t i = 0; i < cnt * (size_t)n; i++)
        s[i] = val(me, (i / cnt) * 100 + i % cnt, 10);
    mark();
    if (ok(c, rcoll_alltoall(s, r, cnt, RCOLL_INT32, comm), "alltoall")) {
        EXPECT(c, "alltoall", r, cnt * (size_t)n, val((int)(i / cnt), (size_t)me * 100 + i % cnt, 10));
        copied(c, "alltoall", (size_t)n * B, (size_t)n * B);
    }

    /* gather to rank 1 % n and scatter from it; recvbuf / sendbuf NULL elsewhere */
    root = 1 % n;
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 11);
    mark();
    if (ok(c, rcoll_gather(s, me == root ? r : NULL, cnt, RCOLL_INT32, root, comm), "gather")) {
        if (me == root) EXPECT(c, "gather", r, cnt * (size_t)n, val((int)(i / cnt), i % cnt, 11));
        copied(c, "gather", B, me == root ? (size_t)n * B : 0);
    }
    for (size_t i = 0; i < cnt * (size_t)n; i++) s[i] = val(root, i, 12);
    for (size_t i = 0; i < cnt; i++) r[i] = POISON;
    mark();
    if (ok(c, rcoll_scatter(me == root ? s : NULL, r, cnt, RCOLL_INT32, root, comm), "scatter")) {
        EXPECT(c, "scatter", r, cnt, val(root, (size_t)me * cnt + i, 12));
        copied(c, "scatter", me == root ? (size_t)n * B : 0, B);
    }
    /* scatter in place on the root: its block stays, nothing is copied back there */
    mark();
    if (ok(c, rcoll_scatter(me == root ? s : NULL, me == root ? (void *)RCOLL_IN_PLACE : r, cnt,
                            RCOLL_INT32, root, comm), "scatter in place")) {
        EXPECT(c, "scatter in place", (me == root ? s + (size_t)root * cnt : r), cnt,
               val(root, (size_t)me * cnt + i, 12));
        copied(c, "scatter in place", me == root ? (size_t)n * B : 0, me == root ? 0 : B);
    }
    /* gather in place on the root */
    for (size_t i = 0; i < cnt * (size_t)n; i++)
        r[i] = me == root && i / cnt == (size_t)root ? val(me, i % cnt, 13) : POISON;
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 13);
    mark();
    if (ok(c, rcoll_gather(me == root ? RCOLL_IN_PLACE : s, me == root ? r : NULL, cnt,
                           RCOLL_INT32, root, comm), "gather in place")) {
        if (me == root)
            EXPECT(c, "gather in place", r, cnt * (size_t)n, val((int)(i / cnt), i % cnt, 13));
        copied(c, "gather in place", B, me == root ? (size_t)n * B : 0);
    }
}

/* The uneven collectives, with gaps between the blocks that must stay untouched. */
static void stage_v(ctx_t *c)
{
    int me = c->rank, n = c->n;
    size_t es = sizeof(elem_t);
    rcoll_comm_t comm = c->comm;
    size_t counts[64], displs[64], scounts[64], sdispls[64], rcounts[64], rdispls[64];
    size_t total = 0, ext = 0;
    for (int i = 0; i < n; i++) {
        counts[i] = (size_t)i + 2;
        displs[i] = ext + 3; /* a gap of 3 before every block */
        ext = displs[i] + counts[i];
        total += counts[i];
    }
    elem_t *s = dalloc(4096), *r = dalloc(4096);
    if (!s || !r) {
        CHECK(0, "arena full");
        return;
    }
    for (size_t i = 0; i < counts[me]; i++) s[i] = val(me, i, 20);
    for (size_t i = 0; i < ext + 8; i++) r[i] = POISON;
    mark();
    if (ok(c, rcoll_allgatherv(s, counts[me], r, counts, displs, RCOLL_INT32, comm),
           "allgatherv")) {
        size_t bad = 0;
        for (int b = 0; b < n; b++) {
            for (size_t i = 0; i < counts[b]; i++) bad += r[displs[b] + i] != val(b, i, 20);
            for (size_t i = displs[b] - 3; i < displs[b]; i++) bad += r[i] != POISON;
        }
        CHECK(!bad && r[ext] == POISON, "rank %d allgatherv: %zu wrong (blocks, gaps)", me, bad);
        copied(c, "allgatherv", counts[me] * es, total * es);
        CHECK(calls_htod > 0, "counted");
    }
    /* in place: the own block already at displs[me] */
    for (size_t i = 0; i < ext + 8; i++) r[i] = POISON;
    for (size_t i = 0; i < counts[me]; i++) r[displs[me] + i] = val(me, i, 21);
    mark();
    if (ok(c, rcoll_allgatherv(RCOLL_IN_PLACE, counts[me], r, counts, displs, RCOLL_INT32, comm),
           "allgatherv in place")) {
        size_t bad = 0;
        for (int b = 0; b < n; b++) {
            for (size_t i = 0; i < counts[b]; i++) bad += r[displs[b] + i] != val(b, i, 21);
            for (size_t i = displs[b] - 3; i < displs[b]; i++) bad += r[i] != POISON;
        }
        CHECK(!bad, "rank %d allgatherv in place: %zu wrong", me, bad);
        copied(c, "allgatherv in place", counts[me] * es, total * es);
    }

    /* all-to-all-v: rank i sends (i + 2j) % 3 + 1 elements to rank j; gaps on both sides */
    size_t sext = 0, rext = 0, stot = 0, rtot = 0;
    for (int j = 0; j < n; j++) {
        scounts[j] = (size_t)((me + 2 * j) % 3 + 1);
        sdispls[j] = sext + 1;
        sext = sdispls[j] + scounts[j];
        stot += scounts[j];
        rcounts[j] = (size_t)((j + 2 * me) % 3 + 1);
        rdispls[j] = rext + 2;
        rext = rdispls[j] + rcounts[j];
        rtot += rcounts[j];
    }
    for (size_t i = 0; i < sext; i++) s[i] = POISON;
    for (int j = 0; j < n; j++)
        for (size_t k = 0; k < scounts[j]; k++) s[sdispls[j] + k] = val(me, (size_t)j * 100 + k, 22);
    for (size_t i = 0; i < rext + 8; i++) r[i] = POISON;
    mark();
    if (ok(c, rcoll_alltoallv(s, scounts, sdispls, r, rcounts, rdispls, RCOLL_INT32, comm),
           "alltoallv")) {
        size_t bad = 0;
        for (int i = 0; i < n; i++) {
            for (size_t k = 0; k < rcounts[i]; k++)
                bad += r[rdispls[i] + k] != val(i, (size_t)me * 100 + k, 22);
            bad += r[rdispls[i] - 1] != POISON || r[rdispls[i] - 2] != POISON;
        }
        CHECK(!bad && r[rext] == POISON, "rank %d alltoallv: %zu wrong", me, bad);
        copied(c, "alltoallv", stot * es, rtot * es);
    }

    /* reduce-scatter-v: block i of counts[i] elements to rank i; in place at the start */
    for (size_t i = 0; i < total; i++) s[i] = val(me, i, 23);
    for (size_t i = 0; i < counts[me] + 8; i++) r[i] = POISON;
    size_t before = 0;
    for (int i = 0; i < me; i++) before += counts[i];
    mark();
    if (ok(c, rcoll_reduce_scatterv(s, r, counts, RCOLL_INT32, RCOLL_SUM, comm),
           "reduce_scatterv")) {
        EXPECT(c, "reduce_scatterv", r, counts[me],
               (n * (n - 1) / 2) * 1000 + n * (elem_t)((before + i) * 3 + 23));
        CHECK(r[counts[me]] == POISON, "rank %d reduce_scatterv: nothing past the block", me);
        copied(c, "reduce_scatterv", total * es, counts[me] * es);
    }
    for (size_t i = 0; i < total; i++) r[i] = val(me, i, 24);
    mark();
    if (ok(c, rcoll_reduce_scatterv(RCOLL_IN_PLACE, r, counts, RCOLL_INT32, RCOLL_SUM, comm),
           "reduce_scatterv in place")) {
        EXPECT(c, "reduce_scatterv in place", r, counts[me],
               (n * (n - 1) / 2) * 1000 + n * (elem_t)((before + i) * 3 + 24));
        copied(c, "reduce_scatterv in place", total * es, counts[me] * es);
    }
}

/* Nonblocking: every call posted first, then waited for in reverse order. */
static void stage_nb(ctx_t *c, size_t cnt)
{
    int me = c->rank, n = c->n, root = n - 1;
    size_t es = sizeof(elem_t), B = cnt * es, nb = cnt * (size_t)n;
    rcoll_comm_t comm = c->comm;
    enum { AR, BC, RD, AG, RS, A2A, GA, SC, AGV, RSV, NREQ };
    elem_t *s[NREQ], *r[NREQ];
    for (int q = 0; q < NREQ; q++) {
        s[q] = dalloc(nb + 64), r[q] = dalloc(nb + 64);
        if (!s[q] || !r[q]) {
            CHECK(0, "arena full");
            return;
        }
    }
    size_t counts[64], displs[64], total = 0, before = 0, ext = 0;
    for (int b = 0; b < n; b++) {
        counts[b] = (size_t)b + 1;
        displs[b] = ext + (size_t)b; /* a gap of b elements before block b */
        ext = displs[b] + counts[b];
        if (b < me) before += counts[b];
        total += counts[b];
    }
    for (size_t i = 0; i < nb + 64; i++) {
        s[AR][i] = val(me, i, 40), s[RD][i] = val(me, i, 41), s[AG][i] = val(me, i, 42);
        s[RS][i] = val(me, i, 43), s[A2A][i] = val(me, (i / cnt) * 100 + i % cnt, 44);
        s[GA][i] = val(me, i, 45), s[SC][i] = val(root, i, 46), s[AGV][i] = val(me, i, 47);
        s[RSV][i] = val(me, i, 48);
        r[BC][i] = me == root ? val(me, i, 49) : POISON;
    }
    rcoll_request_t q[NREQ] = {0};
    mark();
    int posted = ok(c, rcoll_iallreduce(s[AR], r[AR], cnt, RCOLL_INT32, RCOLL_SUM, comm, &q[AR]),
                    "iallreduce") &&
                 ok(c, rcoll_ibcast(r[BC], cnt, RCOLL_INT32, root, comm, &q[BC]), "ibcast") &&
                 ok(c, rcoll_ireduce(s[RD], me == 0 ? r[RD] : NULL, cnt, RCOLL_INT32, RCOLL_SUM,
                                     0, comm, &q[RD]), "ireduce") &&
                 ok(c, rcoll_iallgather(s[AG], r[AG], cnt, RCOLL_INT32, comm, &q[AG]),
                    "iallgather") &&
                 ok(c, rcoll_ireduce_scatter(s[RS], r[RS], cnt, RCOLL_INT32, RCOLL_SUM, comm,
                                             &q[RS]), "ireduce_scatter") &&
                 ok(c, rcoll_ialltoall(s[A2A], r[A2A], cnt, RCOLL_INT32, comm, &q[A2A]),
                    "ialltoall") &&
                 ok(c, rcoll_igather(s[GA], me == root ? r[GA] : NULL, cnt, RCOLL_INT32, root,
                                     comm, &q[GA]), "igather") &&
                 ok(c, rcoll_iscatter(me == root ? s[SC] : NULL, r[SC], cnt, RCOLL_INT32, root,
                                      comm, &q[SC]), "iscatter") &&
                 ok(c, rcoll_iallgatherv(s[AGV], counts[me], r[AGV], counts, displs,
                                         RCOLL_INT32, comm, &q[AGV]), "iallgatherv") &&
                 ok(c, rcoll_ireduce_scatterv(s[RSV], r[RSV], counts, RCOLL_INT32, RCOLL_SUM,
                                              comm, &q[RSV]), "ireduce_scatterv");
    if (!posted) return;
    size_t want_in = B + (me == root ? B : 0) + B + B + (size_t)n * B + (size_t)n * B + B +
                     (me == root ? (size_t)n * B : 0) + counts[me] * es + total * es;
    size_t want_out = B + (me == root ? 0 : B) + (me == 0 ? B : 0) + (size_t)n * B + B +
                      (size_t)n * B + (me == root ? (size_t)n * B : 0) + B + total * es +
                      counts[me] * es;
    CHECK(bytes_dtoh - in0 == want_in && bytes_htod == out0, "rank %d: copied in at the posts "
          "(%zu of %zu), nothing out before the waits (%zu)", me, bytes_dtoh - in0, want_in,
          bytes_htod - out0);
    for (int k = NREQ - 1; k >= 0; k--) ok(c, rcoll_wait(&q[k]), "rcoll_wait");
    copied(c, "nonblocking calls", want_in, want_out);
    int sum0 = n * (n - 1) / 2 * 1000;
    EXPECT(c, "iallreduce", r[AR], cnt, sum0 + n * (elem_t)(i * 3 + 40));
    EXPECT(c, "ibcast", r[BC], cnt, val(root, i, 49));
    if (me == 0) EXPECT(c, "ireduce", r[RD], cnt, sum0 + n * (elem_t)(i * 3 + 41));
    EXPECT(c, "iallgather", r[AG], nb, val((int)(i / cnt), i % cnt, 42));
    EXPECT(c, "ireduce_scatter", r[RS], cnt,
           sum0 + n * (elem_t)(((size_t)me * cnt + i) * 3 + 43));
    EXPECT(c, "ialltoall", r[A2A], nb, val((int)(i / cnt), (size_t)me * 100 + i % cnt, 44));
    if (me == root) EXPECT(c, "igather", r[GA], nb, val((int)(i / cnt), i % cnt, 45));
    EXPECT(c, "iscatter", r[SC], cnt, val(root, (size_t)me * cnt + i, 46));
    size_t bad = 0;
    for (int b = 0; b < n; b++) {
        for (size_t i = 0; i < counts[b]; i++) bad += r[AGV][displs[b] + i] != val(b, i, 47);
        for (size_t i = displs[b] - (size_t)b; i < displs[b]; i++) bad += r[AGV][i] != POISON;
    }
    CHECK(!bad, "rank %d iallgatherv: %zu wrong (blocks, gaps)", me, bad);
    EXPECT(c, "ireduce_scatterv", r[RSV], counts[me],
           sum0 + n * (elem_t)((before + i) * 3 + 48));
    CHECK(r[RSV][counts[me]] == POISON, "rank %d ireduce_scatterv: nothing past its block", me);
}

/* Blocking calls inside a group: copied out at rcoll_group_end. */
static void stage_group(ctx_t *c, size_t cnt)
{
    int me = c->rank, n = c->n;
    size_t es = sizeof(elem_t), B = cnt * es, nb = cnt * (size_t)n;
    rcoll_comm_t comm = c->comm;
    elem_t *s1 = dalloc(nb), *r1 = dalloc(nb), *s2 = dalloc(nb), *r2 = dalloc(nb);
    elem_t *g = dalloc(nb);
    if (!s1 || !r1 || !s2 || !r2 || !g) {
        CHECK(0, "arena full");
        return;
    }
    for (size_t i = 0; i < nb; i++) {
        s1[i] = val(me, i, 60);
        s2[i] = val(me, (i / cnt) * 100 + i % cnt, 61);
        g[i] = i / cnt == (size_t)me ? val(me, i % cnt, 62) : POISON;
    }
    mark();
    CHECK(rcoll_group_start() == RCOLL_OK, "group");
    int ok1 = ok(c, rcoll_allreduce(s1, r1, cnt, RCOLL_INT32, RCOLL_SUM, comm), "grouped allreduce");
    int ok2 = ok(c, rcoll_alltoall(s2, r2, cnt, RCOLL_INT32, comm), "grouped alltoall");
    int ok3 = ok(c, rcoll_allgather(RCOLL_IN_PLACE, g, cnt, RCOLL_INT32, comm),
                 "grouped allgather");
    CHECK(bytes_htod == out0, "rank %d: nothing copied out before rcoll_group_end", me);
    if (!ok(c, rcoll_group_end(), "rcoll_group_end") || !ok1 || !ok2 || !ok3) return;
    copied(c, "group", B + (size_t)n * B + B, B + (size_t)n * B + (size_t)n * B);
    EXPECT(c, "grouped allreduce", r1, cnt, n * (n - 1) / 2 * 1000 + n * (elem_t)(i * 3 + 60));
    EXPECT(c, "grouped alltoall", r2, nb, val((int)(i / cnt), (size_t)me * 100 + i % cnt, 61));
    EXPECT(c, "grouped allgather", g, nb, val((int)(i / cnt), i % cnt, 62));
}

/* Point to point on device buffers: a ring exchange in a group, nonblocking receives posted
 * before the sends, and blocking pairs; the bytes copied each way and the results. */
static void stage_p2p(ctx_t *c, size_t cnt)
{
    int me = c->rank, n = c->n, right = (me + 1) % n, left = (me + n - 1) % n;
    size_t B = cnt * sizeof(elem_t);
    rcoll_comm_t comm = c->comm;
    elem_t *s = dalloc(cnt), *r = dalloc(cnt), *r2 = dalloc(cnt);
    if (!s || !r || !r2) {
        CHECK(0, "arena full");
        return;
    }
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 70);
    mark();
    CHECK(rcoll_group_start() == RCOLL_OK, "group");
    int ok1 = ok(c, rcoll_send(s, cnt, RCOLL_INT32, right, comm), "grouped send");
    int ok2 = ok(c, rcoll_recv(r, cnt, RCOLL_INT32, left, comm), "grouped recv");
    CHECK(bytes_htod == out0 && r[0] == POISON, "rank %d: nothing received before "
          "rcoll_group_end", me);
    if (!ok(c, rcoll_group_end(), "p2p rcoll_group_end") || !ok1 || !ok2) return;
    copied(c, "p2p ring in a group", B, B);
    EXPECT(c, "p2p ring in a group", r, cnt, val(left, i, 70));
    EXPECT(c, "p2p ring: past the end untouched", r + cnt, 16, POISON);

    /* nonblocking, the receive posted first; copied out by its rcoll_wait only */
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 71);
    mark();
    rcoll_request_t rq = NULL, sq = NULL;
    ok(c, rcoll_irecv(r2, cnt, RCOLL_INT32, right, comm, &rq), "irecv");
    ok(c, rcoll_isend(s, cnt, RCOLL_INT32, left, comm, &sq), "isend");
    for (size_t i = 0; i < cnt; i++) s[i] = POISON; /* the send buffer is free at return */
    CHECK(bytes_htod == out0, "rank %d: nothing copied out before rcoll_wait", me);
    if (!ok(c, rcoll_wait(&sq), "wait isend") || !ok(c, rcoll_wait(&rq), "wait irecv")) return;
    copied(c, "p2p nonblocking", B, B);
    EXPECT(c, "p2p nonblocking", r2, cnt, val(right, i, 71));

    /* blocking pairs (0-1, 2-3; with an odd count the last rank sits out) */
    int peer = me ^ 1;
    if (peer >= n) return;
    for (size_t i = 0; i < cnt; i++) s[i] = val(me, i, 72);
    mark();
    if (me % 2 == 0) {
        ok(c, rcoll_send(s, cnt, RCOLL_INT32, peer, comm), "send");
        ok(c, rcoll_recv(r, cnt, RCOLL_INT32, peer, comm), "recv");
    } else {
        ok(c, rcoll_recv(r, cnt, RCOLL_INT32, peer, comm), "recv");
        ok(c, rcoll_send(s, cnt, RCOLL_INT32, peer, comm), "send");
    }
    copied(c, "p2p blocking", B, B);
    EXPECT(c, "p2p blocking", r, cnt, val(peer, i, 72));
}

static int stage_rank(rcoll_comm_t comm, int rank, int nranks, void *arg)
{
    (void)arg;
    ctx_t c = {check_failed, comm, rank, nranks};
    CHECK(rcoll_gpu_active(), "rank %d: the scripted driver is in use", rank);
    int allocs0 = host_allocs;
    stage_block(&c, 1);
    stage_block(&c, 37);
    stage_v(&c);
    int after_small = host_allocs;
    CHECK(after_small - allocs0 == 1 && host_live == 1, "rank %d: the area made at the first "
          "call and reused by the small ones (%d allocations)", rank, after_small - allocs0);
    stage_block(&c, 40000); /* 160 KB blocks: the area grows (at least doubling) */
    int after_large = host_allocs;
    CHECK(after_large > after_small && after_large - after_small <= 3 && host_live == 1,
          "rank %d: grown %d times, one area live", rank, after_large - after_small);
    stage_block(&c, 40000);
    stage_block(&c, 5);
    CHECK(host_allocs == after_large && host_live == 1, "rank %d: the same calls again reuse "
          "it (%d allocations)", rank, host_allocs - after_large);
    /* nonblocking: ten calls in flight, an area each; a second round reuses them */
    stage_nb(&c, 33);
    int after_nb = host_allocs;
    CHECK(after_nb - after_large == 10 && host_live == 11, "rank %d: an area per nonblocking "
          "call in flight (%d)", rank, after_nb - after_large);
    stage_nb(&c, 33);
    stage_nb(&c, 2);
    stage_group(&c, 17); /* three calls: areas of the nonblocking calls, reused */
    stage_p2p(&c, 17);   /* point to point: an area per staged buffer, the same ones reused */
    stage_p2p(&c, 1000);
    size_t mem_nb = 0;
    rcoll_comm_mem_usage(comm, &mem_nb);
    CHECK(mem_nb >= 40000 * sizeof(elem_t) * (size_t)nranks + 10 * 65536, "rank %d: memory "
          "usage %zu counts the nonblocking calls' areas too", rank, mem_nb);
    CHECK(host_allocs == after_nb && host_live == 11, "rank %d: reused by the next calls (%d "
          "allocations)", rank, host_allocs - after_nb);
    CHECK(ctx_wrong == 0 && cur_ctx == CTX_APP, "rank %d: %d copies outside the buffer's "
          "context", rank, ctx_wrong);
    size_t mem = 0;
    rcoll_comm_mem_usage(comm, &mem);
    CHECK(mem > 40000 * sizeof(elem_t) * (size_t)nranks, "rank %d: memory usage %zu counts the "
          "area", rank, mem);

    /* a second communicator has its own area, freed with it */
    rcoll_comm_t dup = NULL;
    if (ok(&c, rcoll_comm_dup(comm, &dup), "dup")) {
        elem_t *d = dalloc(8);
        for (int i = 0; i < 8; i++) d[i] = rank;
        ok(&c, rcoll_allreduce(RCOLL_IN_PLACE, d, 8, RCOLL_INT32, RCOLL_SUM, dup), "dup allreduce");
        CHECK(d[3] == nranks * (nranks - 1) / 2 && host_live == 12, "rank %d: dup's own area",
              rank);
        CHECK(rcoll_comm_destroy(dup) == RCOLL_OK && host_live == 11, "rank %d: dup's area "
              "freed with it (%d live)", rank, host_live);
    }
    return check_failed != c.fails0;
}

static void test_stage_mp(void)
{
    rcoll_gpu_cache_flush();
    for (int n = 2; n <= 4; n++) {
        mp_result_t res;
        int bad = mp_run(n, stage_rank, NULL, 120, &res);
        CHECK(bad == 0, "%d ranks: every blocking collective on staged device buffers (exit "
              "codes %d %d %d %d)", n, res.codes[0], res.codes[1], res.codes[2], res.codes[3]);
    }
    /* with the progress thread: blocking calls stage the same way */
    setenv("RCOLL_PROGRESS_THREAD", "1", 1);
    mp_result_t res;
    CHECK(mp_run(3, stage_rank, NULL, 120, &res) == 0, "3 ranks with the progress thread (exit "
          "codes %d %d %d)", res.codes[0], res.codes[1], res.codes[2]);
    unsetenv("RCOLL_PROGRESS_THREAD");
}

/* ---- the driver failing: the call says which driver call, the communicator lives on ---- */
static void test_stage_errors(void)
{
    rcoll_unique_id_t id;
    rcoll_comm_t comm = NULL;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK && rcoll_comm_init_rank(1, &id, 0, &comm) ==
              RCOLL_OK, "one-rank communicator: %s", rcoll_last_init_error());
    if (!comm) return;
    int live0 = host_live;
    elem_t *d = dalloc(64);
    for (int i = 0; i < 16; i++) d[i] = i;

    fail_alloc_host = 1;
    CHECK(rcoll_allreduce(d, d + 32, 16, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_ERR_NO_MEMORY &&
              strstr(rcoll_comm_last_error(comm), "rcoll_allreduce: staging sendbuf") &&
              strstr(rcoll_comm_last_error(comm), "cuMemHostAlloc(") &&
              strstr(rcoll_comm_last_error(comm), "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"),
          "cuMemHostAlloc failing: %s", rcoll_comm_last_error(comm));
    CHECK(host_live == live0 && d[32] == POISON, "nothing allocated, nothing written");
    CHECK(rcoll_allreduce(d, d + 32, 16, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK &&
              d[32 + 7] == 7 && host_live == live0 + 1, "the next call works: %s",
          rcoll_comm_last_error(comm));

    for (int i = 0; i < 16; i++) d[32 + i] = POISON;
    fail_dtoh = 1;
    char want[200];
    snprintf(want, sizeof(want), "cuMemcpyDtoH of 64 bytes from %p failed: "
             "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)", (void *)d);
    CHECK(rcoll_allreduce(d, d + 32, 16, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_comm_last_error(comm), want) &&
              strstr(rcoll_comm_last_error(comm), "not started on this rank"),
          "cuMemcpyDtoH failing: %s", rcoll_comm_last_error(comm));
    CHECK(d[32] == POISON && cur_ctx == CTX_APP, "nothing written, the caller's context back");

    fail_htod = 1;
    CHECK(rcoll_allreduce(RCOLL_IN_PLACE, d, 16, RCOLL_INT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_SYSTEM && strstr(rcoll_comm_last_error(comm), "cuMemcpyHtoD of 64 "
                                         "bytes to") &&
              strstr(rcoll_comm_last_error(comm), "the collective itself completed"),
          "cuMemcpyHtoD failing: %s", rcoll_comm_last_error(comm));
    CHECK(cur_ctx == CTX_APP, "the caller's context back");
    /* a larger call, whose new area cannot be allocated: the old one is gone, not leaked */
    elem_t *big = dalloc(100000);
    fail_alloc_host = 1;
    CHECK(rcoll_allreduce(RCOLL_IN_PLACE, big, 100000, RCOLL_INT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_NO_MEMORY && host_live == live0, "growing fails: %s (%d live)",
          rcoll_comm_last_error(comm), host_live);
    CHECK(rcoll_allreduce(d, d + 32, 16, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK &&
              d[32 + 9] == 9, "usable after every failure: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_comm_destroy(comm) == RCOLL_OK && host_live == live0, "freed: %d live",
          host_live);
    CHECK(fail_alloc_host == 0 && fail_dtoh == 0 && fail_htod == 0, "every failure happened");
    CHECK(host_allocs > 0 && host_portable == host_allocs, "every staging area portable (%d "
          "of %d)", host_portable, host_allocs);
}

/* ---- kernels: names and the embedded fatbin ---- */
static void test_kernels(void)
{
    CHECK(rcoll_cuda_fatbin_size > 1000, "fatbin embedded: %zu bytes", rcoll_cuda_fatbin_size);
    /* a fatbin starts with its magic 0xba55ed50 (little endian) */
    CHECK(rcoll_cuda_fatbin[0] == 0x50 && rcoll_cuda_fatbin[1] == 0xed &&
              rcoll_cuda_fatbin[2] == 0x55 && rcoll_cuda_fatbin[3] == 0xba, "fatbin magic");
    CHECK(((uintptr_t)rcoll_cuda_fatbin & 63) == 0, "aligned");
    int defined = 0;
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++)
        for (int op = 0; op < RCOLL_NUM_OPS; op++) {
            const char *name = rcoll_cuda_kernel_name((rcoll_datatype_t)dt, (rcoll_op_t)op);
            int is_float = dt >= RCOLL_FLOAT16 && dt <= RCOLL_FLOAT64;
            int want = !(is_float && op >= RCOLL_BAND) && !(dt == RCOLL_BOOL && op == RCOLL_AVG);
            CHECK(!name == !want, "kernel of %d x %d %s", dt, op, name ? name : "(none)");
            if (!name) continue;
            defined++;
            char buf[32];
            snprintf(buf, sizeof(buf), "rcoll_reduce_%d_%d", dt, op);
            CHECK(!strcmp(buf, name), "%s", name);
            /* (nvcc compresses a fatbin past about 20 MB whole: then no name shows here, and
             * the kernels should shrink, or this check learn to inflate it) */
            CHECK(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, name, strlen(name)) != NULL,
                  "%s is in the fatbin", name);
            snprintf(buf, sizeof(buf), "rcoll_oneshot_%d_%d", dt, op); /* the one-kernel too */
            CHECK(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, buf, strlen(buf)) != NULL,
                  "%s is in the fatbin", buf);
        }
    CHECK(defined == 91, "91 pairs: %d", defined);
    CHECK(rcoll_cuda_reduce(0, 0, 0, 0, 4, RCOLL_FLOAT32, RCOLL_BAND, 1, NULL) ==
              RCOLL_ERR_INVALID_ARG, "undefined pair refused");
}

int main(void)
{
    check_set_note(rcoll_err_get);
    arena = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) return 1;
    test_refusals();
    test_classify();
    test_public();
    test_api();
    test_stage_mp();
    test_stage_errors();
    test_kernels();
    rcoll_cu_set_api(NULL);
    rcoll_gpu_test_reset();
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].heap && allocs[i].size) free(allocs[i].mem);
    munmap(arena, ARENA_BYTES);
    return check_summary();
}
