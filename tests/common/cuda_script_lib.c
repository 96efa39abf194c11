/*
 * cuda_script_lib.c - a scripted CUDA driver library (libcuda_script.so) for tests of whole
 * programs on machines without a GPU: a process loads it with RCOLL_CUDA_LIB=<path> in place
 * of libcuda.so.1, through the same dlopen + cuGetProcAddress path as the real driver.
 *
 * What it scripts, and how it keeps a test honest:
 * - "Device" memory lives in a memfd mapped twice: the addresses handed out are a PROT_NONE
 *   view, so any load or store through a device pointer (a buffer the program forgot to
 *   stage) is a SIGSEGV, as it would be a fault on a GPU; the library's copies use the second,
 *   writable view.  Managed memory is ordinary host memory (host-accessible, as on a GPU
 *   system).  cuMemAllocHost is calloc, reported as pinned host memory.
 * - cuPointerGetAttributes answers for its own allocations (type, managed, range, buffer id,
 *   context) and says "unknown" (type 0) for anything else, as the driver does for pageable
 *   memory.
 * - Devices: CUDA_SCRIPT_DEVICES of them (default 1), "Scripted GPU <n>" at bus id
 *   0000:<19+n>:00.0, one primary context each; the current context is per thread.
 * - Copies insist that a device side lies inside one allocation; a copy made while another
 *   context than the allocation's is current is counted (wrong_ctx).
 * - CUDA_SCRIPT_FAIL=<function>[:<n>] makes the n-th call (default the first) of that
 *   function fail (CUDA_ERROR_OUT_OF_MEMORY for allocations, CUDA_ERROR_ILLEGAL_ADDRESS for
 *   copies).
 * - At exit, with CUDA_SCRIPT_STATS set, one line on stderr: "cuda-script: pid P: allocs A
 *   frees F live L htod_bytes H dtoh_bytes D memcpy_bytes M wrong_ctx W".
 * Entry points rcoll binds but a test never reaches (kernels, streams, events, graphs) return
 * CUDA_ERROR_NOT_SUPPORTED.
 *
 * It checks a program's logic and its use of the driver, never a GPU: copies are memcpy.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define ARENA_BYTES ((size_t)4 << 30) /* sparse: only what is written takes memory */
#define MAX_ALLOCS 4096
#define MAX_DEVICES 16
#define CTX_OF(dev) ((CUcontext)(uintptr_t)(0xc0de0000u + (unsigned)(dev)))

typedef struct {
    uintptr_t base; /* address handed out */
    size_t size;
    unsigned memtype, managed;
    unsigned long long id;
    CUcontext ctx;
    char *rw; /* where the library reads and writes it */
} alloc_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static alloc_t allocs[MAX_ALLOCS];
static int ndevices = 1;
static char *dev_view, *rw_view; /* the device arena: PROT_NONE view, writable view */
static size_t dev_used;
static unsigned long long next_id;
static __thread CUcontext current;
static long n_allocs, n_frees, n_live, wrong_ctx;
static unsigned long long htod_bytes, dtoh_bytes, memcpy_bytes;
static char fail_name[64];
static long fail_at, fail_calls;

static int should_fail(const char *fn)
{
    if (!fail_name[0] || strcmp(fn, fail_name) != 0) return 0;
    return __atomic_add_fetch(&fail_calls, 1, __ATOMIC_RELAXED) == fail_at;
}

static void report(void)
{
    if (getenv("CUDA_SCRIPT_STATS"))
        fprintf(stderr, "cuda-script: pid %d: allocs %ld frees %ld live %ld htod_bytes %llu "
                "dtoh_bytes %llu memcpy_bytes %llu wrong_ctx %ld\n", (int)getpid(), n_allocs,
                n_frees, n_live, htod_bytes, dtoh_bytes, memcpy_bytes, wrong_ctx);
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    pthread_mutex_lock(&lock);
    if (!dev_view) {
        const char *d = getenv("CUDA_SCRIPT_DEVICES");
        ndevices = d ? atoi(d) : 1;
        if (ndevices < 0 || ndevices > MAX_DEVICES) ndevices = 1;
        const char *f = getenv("CUDA_SCRIPT_FAIL");
        if (f) {
            snprintf(fail_name, sizeof(fail_name), "%s", f);
            char *colon = strchr(fail_name, ':');
            fail_at = 1;
            if (colon) {
                *colon = '\0';
                fail_at = atol(colon + 1);
            }
        }
        int fd = memfd_create("cuda-script-device", 0);
        if (fd < 0 || ftruncate(fd, (off_t)ARENA_BYTES) != 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        dev_view = mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        rw_view = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                       fd, 0);
        close(fd);
        if (dev_view == MAP_FAILED || rw_view == MAP_FAILED) {
            dev_view = NULL;
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        atexit(report);
    }
    pthread_mutex_unlock(&lock);
    return ndevices ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

static CUresult s_err_name(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_OUT_OF_MEMORY     ? "CUDA_ERROR_OUT_OF_MEMORY"
         : e == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
         : e == CUDA_ERROR_INVALID_VALUE   ? "CUDA_ERROR_INVALID_VALUE"
         : e == CUDA_ERROR_NO_DEVICE       ? "CUDA_ERROR_NO_DEVICE"
         : e == CUDA_ERROR_INVALID_DEVICE  ? "CUDA_ERROR_INVALID_DEVICE"
         : e == CUDA_ERROR_NOT_SUPPORTED   ? "CUDA_ERROR_NOT_SUPPORTED"
                                           : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}

static CUresult s_err_string(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_OUT_OF_MEMORY     ? "out of memory"
         : e == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
         : e == CUDA_ERROR_INVALID_VALUE   ? "invalid argument"
         : e == CUDA_ERROR_NO_DEVICE       ? "no CUDA-capable device is detected"
         : e == CUDA_ERROR_INVALID_DEVICE  ? "invalid device ordinal"
         : e == CUDA_ERROR_NOT_SUPPORTED   ? "operation not supported (scripted driver)"
                                           : "unknown error";
    return CUDA_SUCCESS;
}

/* The allocation holding p, or NULL; the lock is held by the caller. */
static alloc_t *find(uintptr_t p)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].size && p >= allocs[i].base && p - allocs[i].base < allocs[i].size)
            return &allocs[i];
    return NULL;
}

static CUresult s_attrs(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find((uintptr_t)p), copy = a ? *a : (alloc_t){0};
    pthread_mutex_unlock(&lock);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = copy.memtype; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data[i] = copy.managed; break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data[i] = (CUdeviceptr)copy.base;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = copy.size; break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data[i] = copy.id; break;
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            if (!a) return CUDA_ERROR_INVALID_VALUE;
            *(CUcontext *)data[i] = copy.ctx;
            break;
        default: return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

static CUresult s_ctx_get(CUcontext *c)
{
    *c = current;
    return CUDA_SUCCESS;
}

static CUresult s_ctx_set(CUcontext c)
{
    current = c;
    return CUDA_SUCCESS;
}

static CUresult s_ctx_device(CUdevice *d)
{
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    *d = (CUdevice)((uintptr_t)current - (uintptr_t)CTX_OF(0));
    return CUDA_SUCCESS;
}

static CUresult s_ctx_sync(void) { return CUDA_SUCCESS; }

static CUresult s_dev_count(int *n)
{
    *n = ndevices;
    return CUDA_SUCCESS;
}

static CUresult s_dev_get(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= ndevices) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

static CUresult s_dev_name(char *name, int len, CUdevice d)
{
    snprintf(name, (size_t)len, "Scripted GPU %d", (int)d);
    return CUDA_SUCCESS;
}

static CUresult s_dev_bus(char *id, int len, CUdevice d)
{
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x19 + (int)d);
    return CUDA_SUCCESS;
}

static CUresult s_retain(CUcontext *c, CUdevice d)
{
    if (d < 0 || d >= ndevices) return CUDA_ERROR_INVALID_DEVICE;
    *c = CTX_OF(d);
    return CUDA_SUCCESS;
}

static CUresult s_release(CUdevice d)
{
    (void)d;
    return CUDA_SUCCESS;
}

static CUresult add(uintptr_t base, size_t size, unsigned memtype, unsigned managed, char *rw)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (!allocs[i].size) {
            allocs[i] = (alloc_t){base, size, memtype, managed, ++next_id, current, rw};
            n_allocs++;
            n_live++;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult s_alloc(CUdeviceptr *p, size_t bytes)
{
    if (should_fail("cuMemAlloc")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    size_t at = (dev_used + 255) & ~(size_t)255; /* the arena is never reused */
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (at + bytes <= ARENA_BYTES) {
        r = add((uintptr_t)dev_view + at, bytes, CU_MEMORYTYPE_DEVICE, 0, rw_view + at);
        if (r == CUDA_SUCCESS) {
            dev_used = at + bytes;
            *p = (CUdeviceptr)(uintptr_t)(dev_view + at);
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult s_alloc_managed(CUdeviceptr *p, size_t bytes, unsigned flags)
{
    if (should_fail("cuMemAllocManaged")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!bytes || flags != CU_MEM_ATTACH_GLOBAL) return CUDA_ERROR_INVALID_VALUE;
    char *m = calloc(1, bytes);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    CUresult r = add((uintptr_t)m, bytes, CU_MEMORYTYPE_DEVICE, 1, m);
    pthread_mutex_unlock(&lock);
    if (r != CUDA_SUCCESS) free(m);
    else *p = (CUdeviceptr)(uintptr_t)m;
    return r;
}

static CUresult s_alloc_host(void **p, size_t bytes)
{
    if (should_fail("cuMemAllocHost")) return CUDA_ERROR_OUT_OF_MEMORY;
    char *m = calloc(1, bytes ? bytes : 1);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    CUresult r = add((uintptr_t)m, bytes ? bytes : 1, CU_MEMORYTYPE_HOST, 0, m);
    pthread_mutex_unlock(&lock);
    if (r != CUDA_SUCCESS) free(m);
    else *p = m;
    return r;
}

/* Free the allocation starting at p of the given kind (host 1: cuMemFreeHost). */
static CUresult release(uintptr_t p, int host)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && a->base == p && (a->memtype == CU_MEMORYTYPE_HOST) == (host != 0)) {
        if (host || a->managed) free(a->rw);
        a->size = 0;
        n_frees++;
        n_live--;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult s_free(CUdeviceptr p) { return release((uintptr_t)p, 0); }
static CUresult s_free_host(void *p) { return release((uintptr_t)p, 1); }

/* Where the library may touch [p, p + n): the writable view of a device allocation, p itself
 * for host memory; NULL when a device range is not inside one allocation. */
static char *access_of(uintptr_t p, size_t n, int *device)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    char *r = (char *)p;
    *device = 0;
    if (a && a->memtype == CU_MEMORYTYPE_DEVICE) { /* device or managed: a CUDA side */
        *device = 1;
        r = n <= a->size - (p - a->base) ? a->rw + (p - a->base) : NULL;
        if (a->ctx != current) wrong_ctx++;
    } else if ((uintptr_t)p >= (uintptr_t)dev_view && (uintptr_t)p - (uintptr_t)dev_view <
                                                          ARENA_BYTES) {
        *device = 1;
        r = NULL; /* inside the arena but in no live allocation: freed or never allocated */
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult copy(const char *fn, uintptr_t dst, uintptr_t src, size_t n, int want_dst_dev,
                     int want_src_dev, unsigned long long *counter)
{
    if (should_fail(fn)) return CUDA_ERROR_ILLEGAL_ADDRESS;
    int ddev, sdev;
    char *d = access_of(dst, n, &ddev), *s = access_of(src, n, &sdev);
    if (!d || !s) return CUDA_ERROR_INVALID_VALUE;
    if ((want_dst_dev >= 0 && ddev != want_dst_dev) || (want_src_dev >= 0 && sdev != want_src_dev))
        return CUDA_ERROR_INVALID_VALUE;
    memmove(d, s, n);
    __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

static CUresult s_htod(CUdeviceptr dst, const void *src, size_t n)
{
    return copy("cuMemcpyHtoD", (uintptr_t)dst, (uintptr_t)src, n, 1, 0, &htod_bytes);
}

static CUresult s_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    return copy("cuMemcpyDtoH", (uintptr_t)dst, (uintptr_t)src, n, 0, 1, &dtoh_bytes);
}

static CUresult s_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy("cuMemcpyDtoD", (uintptr_t)dst, (uintptr_t)src, n, 1, 1, &memcpy_bytes);
}

static CUresult s_memcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy("cuMemcpy", (uintptr_t)dst, (uintptr_t)src, n, -1, -1, &memcpy_bytes);
}

static CUresult s_memset8(CUdeviceptr dst, unsigned char v, size_t n)
{
    int dev;
    char *d = access_of((uintptr_t)dst, n, &dev);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    memset(d, v, n);
    return CUDA_SUCCESS;
}

static CUresult s_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

/* Everything else: the program asked for something this script does not do. */
static CUresult s_unsupported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

static const struct {
    const char *name;
    void *fn;
} table[] = {
    {"cuInit", (void *)cuInit},
    {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuGetErrorName", (void *)s_err_name},
    {"cuGetErrorString", (void *)s_err_string},
    {"cuPointerGetAttributes", (void *)s_attrs},
    {"cuCtxGetCurrent", (void *)s_ctx_get},
    {"cuCtxSetCurrent", (void *)s_ctx_set},
    {"cuCtxGetDevice", (void *)s_ctx_device},
    {"cuCtxSynchronize", (void *)s_ctx_sync},
    {"cuDeviceGetCount", (void *)s_dev_count},
    {"cuDeviceGet", (void *)s_dev_get},
    {"cuDeviceGetName", (void *)s_dev_name},
    {"cuDeviceGetPCIBusId", (void *)s_dev_bus},
    {"cuDevicePrimaryCtxRetain", (void *)s_retain},
    {"cuDevicePrimaryCtxRelease", (void *)s_release},
    {"cuMemAlloc", (void *)s_alloc},
    {"cuMemAllocManaged", (void *)s_alloc_managed},
    {"cuMemAllocHost", (void *)s_alloc_host},
    {"cuMemFree", (void *)s_free},
    {"cuMemFreeHost", (void *)s_free_host},
    {"cuMemcpyHtoD", (void *)s_htod},
    {"cuMemcpyDtoH", (void *)s_dtoh},
    {"cuMemcpyDtoD", (void *)s_dtod},
    {"cuMemcpy", (void *)s_memcpy},
    {"cuMemsetD8", (void *)s_memset8},
    {"cuStreamIsCapturing", (void *)s_capturing},
};

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    (void)version, (void)flags;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(symbol, table[i].name) == 0) {
            *pfn = table[i].fn;
            if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    *pfn = (void *)s_unsupported;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}
