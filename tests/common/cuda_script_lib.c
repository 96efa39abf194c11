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
 *   system).  cuMemAllocHost and cuMemHostAlloc are calloc, reported as pinned host memory.
 * - cuPointerGetAttributes answers for its own allocations (type, managed, range, buffer id,
 *   context) and says "unknown" (type 0) for anything else, as the driver does for pageable
 *   memory.
 * - Devices: CUDA_SCRIPT_DEVICES of them (default 1), "Scripted GPU <n>" at bus id
 *   0000:<19+n>:00.0, one primary context each; the current context is per thread; any two
 *   can access each other (cuDeviceCanAccessPeer) unless CUDA_SCRIPT_NO_P2P is set.
 * - Copies insist that a device side lies inside one allocation; a copy made while another
 *   context than the allocation's is current is counted (wrong_ctx).
 * - CUDA_SCRIPT_FAIL=<function>[:<n>] makes the n-th call (default the first) of that
 *   function fail (CUDA_ERROR_OUT_OF_MEMORY for allocations, CUDA_ERROR_ILLEGAL_ADDRESS for
 *   copies).
 * - At exit, with CUDA_SCRIPT_STATS set, one line on stderr: "cuda-script: pid P: allocs A
 *   frees F live L htod_bytes H dtoh_bytes D memcpy_bytes M dmabufs B kernels K oneshots O
 *   twoshots T reduce_all R meets E stops S freed_mapped X ipc_open I
 *   async_copies C other_abi V wrong_ctx W" (other_abi: calls of a function's form that the
 *   program did not declare; see cuGetProcAddress).
 * - CUDA_SCRIPT_DEVICE_VISIBLE set: the device arena's handed-out view is mapped readable and
 *   writable instead, so that a NIC (Soft-RoCE in the test VM) can register device memory as
 *   nvidia-peermem lets it; host access then goes unnoticed (use the byte counters to show
 *   that nothing was staged).
 * - dma-bufs (cuMemGetHandleForAddressRange) for page-aligned ranges of device allocations,
 *   unless CUDA_SCRIPT_NO_DMABUF is set (then CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0).
 * - CUDA IPC: a handle names the owner's pid, its arena memfd and the range; another process
 *   opens it through /proc/<pid>/fd (the same user, or root) and maps it twice as above, so
 *   the peer's device memory is just as untouchable from the host.  Open mappings are counted
 *   in the owner's arena; the owner freeing an allocation another process still has mapped
 *   (undefined with the driver) is counted too (freed_mapped in the stats).
 * - Streams run nothing until they are synchronized: the async copies and kernel launches
 *   are queued on their stream and carried out, in order, by cuStreamSynchronize (which
 *   returns the first failure, as a real stream's sticky error) or, up to an event's place,
 *   by cuEventSynchronize; so work the program forgot to wait for is not there when it (or
 *   another process) looks.
 * - rcoll's reduction kernels (rcoll_reduce_<dt>_<op>) are carried out on the host with the
 *   same element arithmetic (src/cuda/reduce_elem.h) over the launch's parameters; so is the
 *   one-kernel all-reduce (rcoll_oneshot_<dt>_<op>, the protocol of src/cuda/oneshot.h: copy
 *   in, publish the flags, wait for every peer's in its mapped workspace with the deadline,
 *   report a different signature or the deadline in the host records, reduce in rank order;
 *   the two-shot: each rank's shard reduced into its output area, the second flags, every
 *   other shard copied from its owner's output area).  The flags, the waits and the abort
 *   word are the kernel's own code (src/cuda/oneshot_proto.h).  Its waits run while
 *   the stream is synchronized, so the ranks' "kernels" meet as real ones would.
 * Entry points rcoll binds but a test never reaches (events, graphs, the legacy copies of the
 * stream API) return CUDA_ERROR_NOT_SUPPORTED.
 *
 * It checks a program's logic and its use of the driver, never a GPU: copies are memcpy.
 */
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda/oneshot.h"
#include "cuda/oneshot_proto.h"
#include "cuda/reduce_elem.h"

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
    void *map_none, *map_rw; /* an opened IPC mapping (unmapped at close), else NULL */
    size_t map_len;
    uint32_t *imports; /* an opened IPC mapping: the owner's import counts (mapped), else NULL */
    unsigned import_idx; /* and which of them is this mapping's */
} alloc_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static alloc_t allocs[MAX_ALLOCS];
static int ndevices = 1;
static char *dev_view, *rw_view; /* the device arena: PROT_NONE view, writable view */
static int dev_fd = -1;           /* its memfd, kept open for the IPC handles */
static size_t dev_used;
static unsigned long long next_id;
static __thread CUcontext current;
static long n_allocs, n_frees, n_live, wrong_ctx, n_launches, n_ipc_opens, n_async, n_dmabufs;
static long n_oneshots, n_twoshots, n_oneshot_stops, n_freed_mapped, n_reduce_all, n_meets;
/* Calls of a form of a function other than the one a CUDA 12/13 program declares: one older
 * than any the script has, or CUDA 13's context-taking cuCtxGetDevice/cuCtxSynchronize
 * (rcoll binds the older forms; see cuGetProcAddress below). */
static long n_old_abi, n_ctx_v2;
/* The arena's first bytes: per allocation slot, how many other processes have it mapped
 * (CUDA IPC); freeing an allocation that is still mapped elsewhere is counted
 * (freed_mapped), since the driver leaves it undefined. */
#define IMPORTS_BYTES (MAX_ALLOCS * sizeof(uint32_t))
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
                "dtoh_bytes %llu memcpy_bytes %llu dmabufs %ld kernels %ld oneshots %ld "
                "twoshots %ld reduce_all %ld meets %ld stops %ld freed_mapped %ld ipc_open %ld async_copies %ld other_abi %ld "
                "wrong_ctx %ld\n",
                (int)getpid(), n_allocs, n_frees, n_live, htod_bytes, dtoh_bytes, memcpy_bytes,
                n_dmabufs, n_launches, n_oneshots, n_twoshots, n_reduce_all, n_meets, n_oneshot_stops, n_freed_mapped, n_ipc_opens,
                n_async, n_old_abi + n_ctx_v2, wrong_ctx);
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
        /* CUDA_SCRIPT_DEVICE_VISIBLE: the handed-out view readable and writable, for tests
         * where a NIC must register device memory (no fault then on host access) */
        int prot = getenv("CUDA_SCRIPT_DEVICE_VISIBLE") ? PROT_READ | PROT_WRITE : PROT_NONE;
        dev_view = mmap(NULL, ARENA_BYTES, prot, MAP_SHARED | MAP_NORESERVE, fd, 0);
        rw_view = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                       fd, 0);
        dev_fd = fd;
        dev_used = IMPORTS_BYTES;
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
         : e == CUDA_ERROR_INVALID_HANDLE  ? "CUDA_ERROR_INVALID_HANDLE"
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
         : e == CUDA_ERROR_INVALID_HANDLE  ? "invalid resource handle"
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

/* A context this driver handed out (a device's primary context), as a real driver checks
 * the handles it is given. */
static int ctx_valid(CUcontext c)
{
    uintptr_t d = (uintptr_t)c - (uintptr_t)CTX_OF(0);
    return (uintptr_t)c >= (uintptr_t)CTX_OF(0) && d < (uintptr_t)ndevices;
}

static CUresult s_ctx_get(CUcontext *c)
{
    *c = current;
    return CUDA_SUCCESS;
}

static CUresult s_ctx_set(CUcontext c)
{
    if (c && !ctx_valid(c)) return CUDA_ERROR_INVALID_CONTEXT;
    current = c;
    return CUDA_SUCCESS;
}

static CUresult s_ctx_device(CUdevice *d)
{
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    *d = (CUdevice)((uintptr_t)current - (uintptr_t)CTX_OF(0));
    return CUDA_SUCCESS;
}

static CUresult s_ctx_sync(void) { return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

/* CUDA 13's forms (PFN_cuCtxGetDevice_v13000, PFN_cuCtxSynchronize_v13000): the context is an
 * argument, NULL for the current one; one this driver never handed out fails.  A program that
 * declares the old form but was handed these passes whatever its second argument register
 * holds. */
static CUresult s_ctx_device_v2(CUdevice *d, CUcontext c)
{
    __atomic_add_fetch(&n_ctx_v2, 1, __ATOMIC_RELAXED);
    if (!c) return s_ctx_device(d);
    if (!ctx_valid(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *d = (CUdevice)((uintptr_t)c - (uintptr_t)CTX_OF(0));
    return CUDA_SUCCESS;
}

static CUresult s_ctx_sync_v2(CUcontext c)
{
    __atomic_add_fetch(&n_ctx_v2, 1, __ATOMIC_RELAXED);
    if (!c) return s_ctx_sync();
    return ctx_valid(c) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

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

static CUresult s_dev_by_bus(CUdevice *d, const char *bus)
{
    unsigned x = 0;
    if (sscanf(bus, "0000:%x:00.0", &x) != 1 || x < 0x19 || (int)(x - 0x19) >= ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = (CUdevice)(x - 0x19);
    return CUDA_SUCCESS;
}

/* Peer access between two scripted GPUs: yes, unless CUDA_SCRIPT_NO_P2P is set. */
static CUresult s_can_peer(int *can, CUdevice a, CUdevice b)
{
    if (a < 0 || a >= ndevices || b < 0 || b >= ndevices) return CUDA_ERROR_INVALID_DEVICE;
    *can = a == b || !getenv("CUDA_SCRIPT_NO_P2P");
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

/* Primary contexts are reset (cuDevicePrimaryCtxReset): the handle stays, the context behind it
 * is new (its id changes) and what was loaded into the old one is gone: a kernel of a module
 * loaded before the reset fails to launch (CUDA_ERROR_INVALID_HANDLE) until a module is loaded
 * again in the new one. */
static unsigned ctx_gen[MAX_DEVICES], module_gen[MAX_DEVICES]; /* module_gen: gen + 1, 0 none */

static CUresult s_ctx_reset(CUdevice d)
{
    if (d < 0 || d >= ndevices) return CUDA_ERROR_INVALID_DEVICE;
    __atomic_add_fetch(&ctx_gen[d], 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

static CUresult s_ctx_id(CUcontext c, unsigned long long *id)
{
    if (!c) c = current;
    if (!c || !ctx_valid(c)) return CUDA_ERROR_INVALID_CONTEXT;
    unsigned d = (unsigned)((uintptr_t)c - (uintptr_t)CTX_OF(0));
    *id = (unsigned long long)__atomic_load_n(&ctx_gen[d], __ATOMIC_RELAXED) << 8 | (d + 1);
    return CUDA_SUCCESS;
}

/* The current context's kernels are loaded (in this context, since its last reset). */
static int module_loaded(void)
{
    if (!current || !ctx_valid(current)) return 0;
    unsigned d = (unsigned)((uintptr_t)current - (uintptr_t)CTX_OF(0));
    return __atomic_load_n(&module_gen[d], __ATOMIC_RELAXED) ==
           __atomic_load_n(&ctx_gen[d], __ATOMIC_RELAXED) + 1;
}

static CUresult add(uintptr_t base, size_t size, unsigned memtype, unsigned managed, char *rw)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (!allocs[i].size) {
            allocs[i] = (alloc_t){base, size, memtype, managed, ++next_id, current, rw, NULL,
                                  NULL, 0, NULL, 0};
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
    /* page-aligned, as the driver's larger allocations are (dma-bufs need whole pages); the
     * arena is never reused */
    size_t at = (dev_used + 4095) & ~(size_t)4095;
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

static CUresult s_host_alloc(void **p, size_t bytes, unsigned int flags)
{
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    if (should_fail("cuMemHostAlloc")) return CUDA_ERROR_OUT_OF_MEMORY;
    return s_alloc_host(p, bytes);
}

/* Free the allocation starting at p of the given kind (host 1: cuMemFreeHost). */
static CUresult release(uintptr_t p, int host)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && a->base == p && (a->memtype == CU_MEMORYTYPE_HOST) == (host != 0) && !a->map_len) {
        if (!host && !a->managed &&
            __atomic_load_n((uint32_t *)(void *)rw_view + (a - allocs), __ATOMIC_ACQUIRE))
            n_freed_mapped++;
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

/* On the legacy stream (NULL): done at once; the script queues work on its own streams only. */
static CUresult s_memset32_async(CUdeviceptr dst, unsigned v, size_t n, CUstream st)
{
    if (st) return CUDA_ERROR_NOT_SUPPORTED;
    int dev;
    char *d = access_of((uintptr_t)dst, n * 4, &dev);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) memcpy(d + 4 * i, &v, 4);
    return CUDA_SUCCESS;
}

static CUresult s_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

/* ---- CUDA IPC ---- */
typedef struct {
    uint32_t magic;
    int32_t pid, fd;
    uint32_t idx; /* the allocation's slot: its import count */
    uint64_t offset, size;
} ipc_handle_t;
#define IPC_MAGIC 0x50494352u /* "RCIP" */

static CUresult s_ipc_get(CUipcMemHandle *h, CUdeviceptr p)
{
    if (should_fail("cuIpcGetMemHandle")) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    alloc_t *a = find((uintptr_t)p);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && a->base == (uintptr_t)p && a->memtype == CU_MEMORYTYPE_DEVICE && !a->managed &&
        !a->map_len) {
        ipc_handle_t ih = {IPC_MAGIC, (int32_t)getpid(), dev_fd, (uint32_t)(a - allocs),
                           (uint64_t)(a->base - (uintptr_t)dev_view), a->size};
        memset(h, 0, sizeof(*h));
        memcpy(h, &ih, sizeof(ih));
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult s_ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
    (void)flags;
    if (should_fail("cuIpcOpenMemHandle")) return CUDA_ERROR_INVALID_HANDLE;
    ipc_handle_t ih;
    memcpy(&ih, &h, sizeof(ih));
    if (ih.magic != IPC_MAGIC || ih.pid == (int32_t)getpid()) return CUDA_ERROR_INVALID_HANDLE;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)ih.pid, (int)ih.fd);
    int fd = open(path, O_RDWR);
    if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t start = ih.offset / page * page, delta = ih.offset - start;
    size_t len = (delta + ih.size + page - 1) / page * page;
    char *none = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, (off_t)start);
    char *rw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    uint32_t *imports = mmap(NULL, IMPORTS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (none == MAP_FAILED || rw == MAP_FAILED || imports == MAP_FAILED ||
        ih.idx >= MAX_ALLOCS) {
        if (none != MAP_FAILED) munmap(none, len);
        if (rw != MAP_FAILED) munmap(rw, len);
        if (imports != MAP_FAILED) munmap(imports, IMPORTS_BYTES);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&lock);
    CUresult r = add((uintptr_t)(none + delta), ih.size, CU_MEMORYTYPE_DEVICE, 0, rw + delta);
    if (r == CUDA_SUCCESS) {
        alloc_t *a = find((uintptr_t)(none + delta));
        a->map_none = none;
        a->map_rw = rw;
        a->map_len = len;
        a->imports = imports;
        a->import_idx = ih.idx;
        __atomic_add_fetch(&imports[ih.idx], 1, __ATOMIC_RELEASE);
        n_allocs--; /* an import, not an allocation: counted apart */
        n_live--;
        n_ipc_opens++;
        *p = (CUdeviceptr)(uintptr_t)(none + delta);
    }
    pthread_mutex_unlock(&lock);
    if (r != CUDA_SUCCESS) {
        munmap(none, len);
        munmap(rw, len);
        munmap(imports, IMPORTS_BYTES);
    }
    return r;
}

static CUresult s_ipc_close(CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find((uintptr_t)p);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && a->base == (uintptr_t)p && a->map_len) {
        munmap(a->map_none, a->map_len);
        munmap(a->map_rw, a->map_len);
        __atomic_sub_fetch(&a->imports[a->import_idx], 1, __ATOMIC_RELEASE);
        munmap(a->imports, IMPORTS_BYTES);
        a->imports = NULL;
        a->size = 0;
        a->map_len = 0;
        n_ipc_opens--;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- streams: queued work, carried out by cuStreamSynchronize ---- */
#define EMU(DT, OP, T, fn)                                                                    \
    static void emu_##DT##_##OP(char *dst, char *dst2, const char *a, const char *b,         \
                                size_t n, int d)                                             \
    {                                                                                         \
        for (size_t i = 0; i < n; i++) {                                                      \
            T x, y, r;                                                                        \
            memcpy(&x, a + i * sizeof(T), sizeof(T));                                         \
            memcpy(&y, b + i * sizeof(T), sizeof(T));                                         \
            r = rcoll_elem_##fn(x, y, d);                                                     \
            memcpy(dst + i * sizeof(T), &r, sizeof(T));                                       \
            if (dst2) memcpy(dst2 + i * sizeof(T), &r, sizeof(T));                            \
        }                                                                                     \
    }
RCOLL_ELEM_LIST(EMU)
#undef EMU
typedef struct {
    int dt, op;
    size_t es;
    void (*fn)(char *, char *, const char *, const char *, size_t, int);
} kernel_t;
#define EMU_ENTRY(DT, OP, T, fn) {DT, OP, sizeof(T), emu_##DT##_##OP},
static const kernel_t kernels[] = {RCOLL_ELEM_LIST(EMU_ENTRY)};
static const kernel_t oneshots[] = {RCOLL_ELEM_LIST(EMU_ENTRY)}; /* the same, as one-shots */
#undef EMU_ENTRY
#define NKERNELS (sizeof(kernels) / sizeof(kernels[0]))

static const kernel_t *kernel_of(int dt, int op)
{
    for (size_t i = 0; i < NKERNELS; i++)
        if (kernels[i].dt == dt && kernels[i].op == op) return &kernels[i];
    return NULL;
}

typedef struct {
    int kernel;                 /* 0: a copy (DtoD), 1: a kernel, 2: DtoH, 3: HtoD, 4: one-shot,
                                 * 5: wait for stream (stream_t *)dst up to position n */
    const kernel_t *k;
    uintptr_t dst, dst2, a, b;  /* copy: dst, a = src; n = bytes */
    size_t n;
    int d;
    rcoll_oneshot_args_t os;    /* 4: the kernel's parameter */
} work_t;
typedef struct {
    pthread_mutex_t lock;
    work_t *q;
    size_t n, cap;
    size_t done;           /* q[0, done) carried out */
    unsigned long long base; /* work carried out and dropped before q[0] */
    CUresult err;          /* the first failure of carried-out work (sticky until sync) */
} stream_t;

static CUresult s_stream_create(CUstream *st, unsigned flags)
{
    (void)flags;
    stream_t *s = calloc(1, sizeof(*s));
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    /* recursive: a stream's wait for an event of its own, or of a stream waiting on it,
     * comes back to a lock this thread holds (already carried out that far then) */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&s->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    *st = (CUstream)s;
    return CUDA_SUCCESS;
}

static CUresult enqueue(CUstream st, const work_t *w)
{
    if (!st) return CUDA_ERROR_NOT_SUPPORTED; /* the script queues on its own streams only */
    stream_t *s = (stream_t *)st;
    pthread_mutex_lock(&s->lock);
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        work_t *q = realloc(s->q, cap * sizeof(*q));
        if (!q) {
            pthread_mutex_unlock(&s->lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->q = q;
        s->cap = cap;
    }
    s->q[s->n++] = *w;
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

/* The blocks that have not stopped meet the peers on the flags at byte offset off, with the
 * kernel's own code (cuda/oneshot_proto.h) on the mapped headers: every block pushes its flag
 * into every rank's header, then each waits for the peers' in this rank's own header (a block
 * that fails stops: its report in err, this rank's abort word set).  The blocks run one after
 * another here, so all publish before any waits, from one start of the deadline, as the
 * kernel's blocks, running together, would. */
static void meet(const rcoll_oneshot_args_t *a, char *const *hdr, unsigned off, int *stopped)
{
    rcoll_oneshot_args_t h = *a; /* the same call, its workspaces as this process reaches them */
    for (int p = 0; p < a->nranks; p++) h.peer[p] = (uint64_t)(uintptr_t)hdr[p];
    long stops = 0;
    for (unsigned b = 0; b < (unsigned)a->blocks; b++)
        if (!stopped[b] && (stopped[b] = rcoll_os_publish(&h, b, off))) stops++;
    const uint64_t start = rcoll_os_now_ns();
    for (unsigned b = 0; b < (unsigned)a->blocks; b++)
        if (!stopped[b] && (stopped[b] = rcoll_os_wait(&h, b, off, start))) stops++;
    __atomic_add_fetch(&n_oneshot_stops, stops, __ATOMIC_RELAXED);
}

/* dst[lo, hi) (and dst2's) = every rank's area (areas[p]) reduced in rank order; AVG sums
 * and divides at the last rank. */
static void reduce_rank_order(const rcoll_oneshot_args_t *a, const kernel_t *k, char *dst,
                              char *dst2, char *const *areas, uint64_t lo, uint64_t hi)
{
    const kernel_t *mid = kernel_of(k->dt, k->op == 4 ? 0 : k->op);
    size_t at = (size_t)lo * k->es, cnt = (size_t)(hi - lo);
    if (!cnt) return;
    if (k->dt == 6 || k->dt == 7) { /* float16, bfloat16: in float32, rounded once */
        int bf = k->dt == 7;
        for (size_t i = 0; i < cnt; i++) {
            uint16_t h;
            memcpy(&h, areas[0] + at + 2 * i, 2);
            float acc = rcoll_e_widen16(bf, h);
            for (int p = 1; p < a->nranks; p++) {
                memcpy(&h, areas[p] + at + 2 * i, 2);
                acc = rcoll_e_fold16(k->op, acc, rcoll_e_widen16(bf, h));
            }
            h = rcoll_e_fold16_end(bf, k->op, acc, a->avg_divisor);
            memcpy(dst + at + 2 * i, &h, 2);
        }
        if (dst2) memcpy(dst2 + at, dst + at, cnt * k->es);
        return;
    }
    memcpy(dst + at, areas[0] + at, cnt * k->es);
    for (int p = 1; p < a->nranks; p++)
        (p == a->nranks - 1 ? k : mid)->fn(dst + at, NULL, dst + at, areas[p] + at, cnt,
                                           a->avg_divisor);
    if (dst2) memcpy(dst2 + at, dst + at, cnt * k->es);
}

/* The one-kernel all-reduce (one-shot or two-shot), block by block as reduce.cu does it. */
static CUresult run_oneshot(const work_t *w)
{
    const rcoll_oneshot_args_t *a = &w->os;
    const kernel_t *k = w->k;
    size_t bytes = a->count * k->es, span = a->shots == 2 ? a->out + bytes : bytes;
    int n = a->nranks, me = a->rank, dev, two = a->shots == 2;
    const unsigned nb = (unsigned)a->blocks;
    if (n < 1 || n > RCOLL_ONESHOT_MAX_RANKS || me < 0 || me >= n || a->blocks < 1 ||
        a->blocks > RCOLL_ONESHOT_MAX_BLOCKS ||
        !kernel_of(k->dt, k->op == 4 ? 0 : k->op) || (two && a->out < bytes))
        return CUDA_ERROR_INVALID_VALUE;
    char *hdr[RCOLL_ONESHOT_MAX_RANKS], *in[RCOLL_ONESHOT_MAX_RANKS];
    char *out[RCOLL_ONESHOT_MAX_RANKS];
    for (int p = 0; p < n; p++) {
        hdr[p] = access_of(a->peer[p], RCOLL_ONESHOT_HDR, &dev);
        in[p] = bytes ? access_of(a->peer[p] + a->slot, span, &dev) : NULL;
        if (!hdr[p] || (bytes && !in[p])) return CUDA_ERROR_ILLEGAL_ADDRESS;
        out[p] = in[p] ? in[p] + a->out : NULL;
    }
    if (a->shots == 3) { /* meet only: a barrier in stream order (cuda/oneshot.h) */
        int stopped3[RCOLL_ONESHOT_MAX_BLOCKS] = {0};
        __atomic_add_fetch(&n_meets, 1, __ATOMIC_RELAXED);
        meet(a, hdr, 0, stopped3);
        return CUDA_SUCCESS;
    }
    if (a->shots == 0) { /* reduce only: the inputs are there, no flags (cuda/oneshot.h) */
        char *out0 = access_of(a->dst, bytes, &dev);
        if (!out0 || a->slot % 16) return CUDA_ERROR_ILLEGAL_ADDRESS;
        __atomic_add_fetch(&n_reduce_all, 1, __ATOMIC_RELAXED);
        uint64_t lo0, hi0;
        for (unsigned b = 0; b < nb; b++) {
            rcoll_oneshot_part(a->count, k->es, nb, b, &lo0, &hi0);
            reduce_rank_order(a, k, out0, NULL, in, lo0, hi0);
        }
        return CUDA_SUCCESS;
    }
    char *src = access_of(a->src, bytes, &dev), *dst = access_of(a->dst, bytes, &dev);
    if (!src || !dst) return CUDA_ERROR_ILLEGAL_ADDRESS;
    memcpy(in[me], src, bytes); /* every block's part of every shard */
    __atomic_add_fetch(two ? &n_twoshots : &n_oneshots, 1, __ATOMIC_RELAXED);
    int stopped[RCOLL_ONESHOT_MAX_BLOCKS] = {0};
    uint64_t lo, hi;
    meet(a, hdr, 0, stopped);
    for (unsigned b = 0; b < nb; b++) {
        if (stopped[b]) continue;
        if (two)
            rcoll_twoshot_part(a->count, k->es, n, me, nb, b, &lo, &hi);
        else
            rcoll_oneshot_part(a->count, k->es, nb, b, &lo, &hi);
        reduce_rank_order(a, k, dst, two ? out[me] : NULL, in, lo, hi);
    }
    if (!two) return CUDA_SUCCESS;
    meet(a, hdr, RCOLL_ONESHOT_FLAG2, stopped);
    for (unsigned b = 0; b < nb; b++) {
        for (int r = 0; r < n && !stopped[b]; r++) {
            if (r == me) continue;
            rcoll_twoshot_part(a->count, k->es, n, r, nb, b, &lo, &hi);
            memcpy(dst + lo * k->es, out[r] + lo * k->es, (size_t)(hi - lo) * k->es);
        }
    }
    return CUDA_SUCCESS;
}

static void run_upto(stream_t *s, unsigned long long upto);

static CUresult run_work(const work_t *w)
{
    int dev;
    if (w->kernel == 4) return run_oneshot(w);
    if (w->kernel == 5) { /* cuStreamWaitEvent: the other stream's work up to the event */
        stream_t *o = (stream_t *)w->dst;
        pthread_mutex_lock(&o->lock);
        run_upto(o, w->n);
        pthread_mutex_unlock(&o->lock);
        return CUDA_SUCCESS;
    }
    if (w->kernel != 1) {
        char *d = access_of(w->dst, w->n, &dev), *s = access_of(w->a, w->n, &dev);
        if (!d || !s) return CUDA_ERROR_ILLEGAL_ADDRESS;
        memmove(d, s, w->n);
        unsigned long long *counter = w->kernel == 2 ? &dtoh_bytes
                                      : w->kernel == 3 ? &htod_bytes : &memcpy_bytes;
        __atomic_add_fetch(counter, w->n, __ATOMIC_RELAXED);
        if (w->kernel >= 2) __atomic_add_fetch(&n_async, 1, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    }
    size_t bytes = w->n * w->k->es;
    char *d = access_of(w->dst, bytes, &dev), *a = access_of(w->a, bytes, &dev);
    char *b = access_of(w->b, bytes, &dev), *d2 = w->dst2 ? access_of(w->dst2, bytes, &dev) : NULL;
    if (!d || !a || !b || (w->dst2 && !d2)) return CUDA_ERROR_ILLEGAL_ADDRESS;
    w->k->fn(d, d2, a, b, w->n, w->d);
    return CUDA_SUCCESS;
}

/* Carry out s's work up to absolute position upto (the lock held). */
static void run_upto(stream_t *s, unsigned long long upto)
{
    while (s->base + s->done < upto && s->done < s->n) {
        CUresult e = run_work(&s->q[s->done++]);
        if (s->err == CUDA_SUCCESS) s->err = e;
    }
}

static CUresult s_stream_sync(CUstream st)
{
    if (!st) return CUDA_SUCCESS;
    stream_t *s = (stream_t *)st;
    pthread_mutex_lock(&s->lock);
    run_upto(s, s->base + s->n);
    CUresult r = s->err;
    s->err = CUDA_SUCCESS;
    s->base += s->n;
    s->n = s->done = 0;
    pthread_mutex_unlock(&s->lock);
    if (r == CUDA_SUCCESS && should_fail("cuStreamSynchronize")) r = CUDA_ERROR_ILLEGAL_ADDRESS;
    return r;
}

static CUresult s_stream_destroy(CUstream st)
{
    stream_t *s = (stream_t *)st;
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    s_stream_sync(st);
    free(s->q);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return CUDA_SUCCESS;
}

/* Events: the position of their record in its stream; synchronizing one carries out the
 * stream's work up to there. */
typedef struct {
    stream_t *s;
    unsigned long long pos;
} event_t;

static CUresult s_event_create(CUevent *ev, unsigned flags)
{
    (void)flags;
    event_t *e = calloc(1, sizeof(*e));
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    *ev = (CUevent)e;
    return CUDA_SUCCESS;
}

static CUresult s_event_record(CUevent ev, CUstream st)
{
    if (!st) return CUDA_ERROR_NOT_SUPPORTED;
    event_t *e = (event_t *)ev;
    stream_t *s = (stream_t *)st;
    pthread_mutex_lock(&s->lock);
    e->s = s;
    e->pos = s->base + s->n;
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static CUresult s_event_sync(CUevent ev)
{
    event_t *e = (event_t *)ev;
    if (!e->s) return CUDA_SUCCESS;
    pthread_mutex_lock(&e->s->lock);
    run_upto(e->s, e->pos);
    CUresult r = e->s->err;
    pthread_mutex_unlock(&e->s->lock);
    return r;
}

static CUresult s_event_query(CUevent ev)
{
    event_t *e = (event_t *)ev;
    if (!e->s) return CUDA_SUCCESS;
    pthread_mutex_lock(&e->s->lock);
    CUresult r = e->s->base + e->s->done >= e->pos ? e->s->err : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&e->s->lock);
    return r;
}

static CUresult s_stream_wait_event(CUstream st, CUevent ev, unsigned flags)
{
    event_t *e = (event_t *)ev;
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    if (should_fail("cuStreamWaitEvent")) return CUDA_ERROR_INVALID_HANDLE;
    if (!e->s || e->s == (stream_t *)st) return st ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
    work_t w;
    memset(&w, 0, sizeof(w));
    w.kernel = 5;
    w.dst = (uintptr_t)e->s;
    w.n = (size_t)e->pos;
    return enqueue(st, &w);
}

static CUresult s_event_destroy(CUevent ev)
{
    free(ev);
    return CUDA_SUCCESS;
}

static CUresult s_dtoh_async(void *dst, CUdeviceptr src, size_t n, CUstream st)
{
    if (should_fail("cuMemcpyDtoHAsync")) return CUDA_ERROR_ILLEGAL_ADDRESS;
    work_t w = {2, NULL, (uintptr_t)dst, 0, (uintptr_t)src, 0, n, 0, {{0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
    return enqueue(st, &w);
}

static CUresult s_htod_async(CUdeviceptr dst, const void *src, size_t n, CUstream st)
{
    if (should_fail("cuMemcpyHtoDAsync")) return CUDA_ERROR_ILLEGAL_ADDRESS;
    work_t w = {3, NULL, (uintptr_t)dst, 0, (uintptr_t)src, 0, n, 0, {{0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
    return enqueue(st, &w);
}

static CUresult s_dtod_async(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
    if (should_fail("cuMemcpyDtoDAsync")) return CUDA_ERROR_ILLEGAL_ADDRESS;
    work_t w = {0, NULL, (uintptr_t)dst, 0, (uintptr_t)src, 0, n, 0, {{0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
    return enqueue(st, &w);
}

static CUresult s_module_load(CUmodule *m, const void *image)
{
    (void)image;
    if (!current || !ctx_valid(current)) return CUDA_ERROR_INVALID_CONTEXT;
    unsigned d = (unsigned)((uintptr_t)current - (uintptr_t)CTX_OF(0));
    __atomic_store_n(&module_gen[d], __atomic_load_n(&ctx_gen[d], __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
    *m = (CUmodule)(uintptr_t)0x40d;
    return CUDA_SUCCESS;
}

static CUresult s_module_unload(CUmodule m)
{
    (void)m;
    return CUDA_SUCCESS;
}

static CUresult s_module_fn(CUfunction *f, CUmodule m, const char *name)
{
    (void)m;
    int dt = -1, op = -1, one = 0;
    if (sscanf(name, "rcoll_reduce_%d_%d", &dt, &op) != 2) {
        if (sscanf(name, "rcoll_oneshot_%d_%d", &dt, &op) != 2) return CUDA_ERROR_NOT_FOUND;
        one = 1;
    }
    const kernel_t *k = kernel_of(dt, op);
    if (!k) return CUDA_ERROR_NOT_FOUND;
    *f = (CUfunction)(uintptr_t)(one ? &oneshots[k - kernels] : k);
    return CUDA_SUCCESS;
}

/* Device d has 3 + 2d SMs: ranks on different devices propose different one-kernel grids
 * (3, 5, 7, ...: odd, and fewer than RCOLL_ONESHOT_MAX_BLOCKS) and must agree on one. */
static CUresult s_dev_attr(int *v, CUdevice_attribute attr, CUdevice d)
{
    *v = attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 3 + 2 * (int)d
         : attr == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED ? !getenv("CUDA_SCRIPT_NO_DMABUF")
                                                          : 0;
    return CUDA_SUCCESS;
}

/* A dma-buf of a page-aligned range of one device allocation.  No dma-buf exporter exists
 * here: the descriptor is a new one for the arena's memfd (what a scripted NIC table takes
 * and closes); the range is checked as the driver checks it. */
static CUresult s_dmabuf(void *handle, CUdeviceptr p, size_t size, CUmemRangeHandleType type,
                         unsigned long long flags)
{
    if (should_fail("cuMemGetHandleForAddressRange")) return CUDA_ERROR_NOT_SUPPORTED;
    if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags || !size || (uintptr_t)p % 4096 ||
        size % 4096)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    alloc_t *a = find((uintptr_t)p);
    int ok = a && a->memtype == CU_MEMORYTYPE_DEVICE && !a->managed &&
             (uintptr_t)p + size <= a->base + ((a->size + 4095) & ~(size_t)4095);
    int fd = ok ? fcntl(dev_fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (fd >= 0) n_dmabufs++;
    pthread_mutex_unlock(&lock);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    *(int *)handle = fd;
    return CUDA_SUCCESS;
}

/* rcoll_reduce_<dt>_<op>(dst, dst2, a, b, n, head, d): queued, carried out at the sync. */
static CUresult s_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shared, CUstream st, void **params,
                         void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)extra;
    if (should_fail("cuLaunchKernel")) return CUDA_ERROR_LAUNCH_FAILED;
    if (!module_loaded()) return CUDA_ERROR_INVALID_HANDLE; /* not in this context */
    if (!gx || !bx || bx > 1024) return CUDA_ERROR_INVALID_VALUE;
    const kernel_t *k = (const kernel_t *)f;
    if (k >= oneshots && k < oneshots + NKERNELS) { /* the one-kernel all-reduce */
        work_t w;
        memset(&w, 0, sizeof(w));
        w.kernel = 4;
        w.k = &kernels[k - oneshots];
        memcpy(&w.os, params[0], sizeof(w.os));
        /* the grid is the ranks' agreed one, which the parameter carries */
        if (gx != (unsigned)w.os.blocks || w.os.blocks > RCOLL_ONESHOT_MAX_BLOCKS ||
            bx != RCOLL_ONESHOT_THREADS)
            return CUDA_ERROR_INVALID_VALUE;
        __atomic_add_fetch(&n_launches, 1, __ATOMIC_RELAXED);
        return enqueue(st, &w);
    }
    work_t w = {1, k, (uintptr_t) * (CUdeviceptr *)params[0],
                (uintptr_t) * (CUdeviceptr *)params[1], (uintptr_t) * (CUdeviceptr *)params[2],
                (uintptr_t) * (CUdeviceptr *)params[3], *(size_t *)params[4],
                *(int *)params[6], {{0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
    __atomic_add_fetch(&n_launches, 1, __ATOMIC_RELAXED);
    return enqueue(st, &w);
}

/* Everything else: the program asked for something this script does not do. */
static CUresult s_unsupported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

/* Each function with the CUDA version whose ABI it has (cudaTypedefs.h's PFN_<name>_v<n>);
 * a name whose arguments changed has a row per form, newest last. */
static const struct {
    const char *name;
    int since;
    void *fn;
} table[] = {
    {"cuInit", 2000, (void *)cuInit},
    {"cuDriverGetVersion", 2020, (void *)cuDriverGetVersion},
    {"cuGetErrorName", 6000, (void *)s_err_name},
    {"cuGetErrorString", 6000, (void *)s_err_string},
    {"cuPointerGetAttributes", 7000, (void *)s_attrs},
    {"cuCtxGetCurrent", 4000, (void *)s_ctx_get},
    {"cuCtxSetCurrent", 4000, (void *)s_ctx_set},
    {"cuCtxGetDevice", 2000, (void *)s_ctx_device},
    {"cuCtxGetDevice", 13000, (void *)s_ctx_device_v2},
    {"cuCtxSynchronize", 2000, (void *)s_ctx_sync},
    {"cuCtxSynchronize", 13000, (void *)s_ctx_sync_v2},
    {"cuDeviceGetCount", 2000, (void *)s_dev_count},
    {"cuDeviceGet", 2000, (void *)s_dev_get},
    {"cuDeviceGetName", 2000, (void *)s_dev_name},
    {"cuDeviceGetPCIBusId", 4010, (void *)s_dev_bus},
    {"cuDevicePrimaryCtxRetain", 7000, (void *)s_retain},
    {"cuDevicePrimaryCtxRelease", 11000, (void *)s_release},
    {"cuDevicePrimaryCtxReset", 11000, (void *)s_ctx_reset},
    {"cuCtxGetId", 12000, (void *)s_ctx_id},
    {"cuMemAlloc", 3020, (void *)s_alloc},
    {"cuMemAllocManaged", 6000, (void *)s_alloc_managed},
    {"cuMemAllocHost", 3020, (void *)s_alloc_host},
    {"cuMemHostAlloc", 2020, (void *)s_host_alloc},
    {"cuMemFree", 3020, (void *)s_free},
    {"cuMemFreeHost", 2000, (void *)s_free_host},
    {"cuMemcpyHtoD", 3020, (void *)s_htod},
    {"cuMemcpyDtoH", 3020, (void *)s_dtoh},
    {"cuMemcpyDtoD", 3020, (void *)s_dtod},
    {"cuMemcpy", 4000, (void *)s_memcpy},
    {"cuMemsetD8", 3020, (void *)s_memset8},
    {"cuStreamIsCapturing", 10000, (void *)s_capturing},
    {"cuIpcGetMemHandle", 4010, (void *)s_ipc_get},
    {"cuIpcOpenMemHandle", 11000, (void *)s_ipc_open},
    {"cuIpcCloseMemHandle", 4010, (void *)s_ipc_close},
    {"cuStreamCreate", 2000, (void *)s_stream_create},
    {"cuStreamSynchronize", 2000, (void *)s_stream_sync},
    {"cuStreamDestroy", 4000, (void *)s_stream_destroy},
    {"cuMemcpyDtoDAsync", 3020, (void *)s_dtod_async},
    {"cuModuleLoadData", 2000, (void *)s_module_load},
    {"cuModuleUnload", 2000, (void *)s_module_unload},
    {"cuModuleGetFunction", 2000, (void *)s_module_fn},
    {"cuDeviceGetAttribute", 2000, (void *)s_dev_attr},
    {"cuMemGetHandleForAddressRange", 11070, (void *)s_dmabuf},
    {"cuLaunchKernel", 4000, (void *)s_launch},
    {"cuDeviceGetByPCIBusId", 4010, (void *)s_dev_by_bus},
    {"cuDeviceCanAccessPeer", 4000, (void *)s_can_peer},
    {"cuMemsetD32Async", 3020, (void *)s_memset32_async},
    {"cuEventCreate", 2000, (void *)s_event_create},
    {"cuEventRecord", 2000, (void *)s_event_record},
    {"cuEventSynchronize", 2000, (void *)s_event_sync},
    {"cuEventDestroy", 4000, (void *)s_event_destroy},
    {"cuEventQuery", 2000, (void *)s_event_query},
    {"cuStreamWaitEvent", 3020, (void *)s_stream_wait_event},
    {"cuMemcpyDtoHAsync", 3020, (void *)s_dtoh_async},
    {"cuMemcpyHtoDAsync", 3020, (void *)s_htod_async},
};

/* A form older than any this script has (the 32-bit cuMemAlloc of CUDA 2.0 ...): what a
 * program asking for too old a version would get; it fails, and is counted. */
static CUresult s_old_abi(void)
{
    __atomic_add_fetch(&n_old_abi, 1, __ATOMIC_RELAXED);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* As the driver does: the newest form of symbol whose version is not newer than version.
 * Names the script does not implement get s_unsupported. */
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    (void)flags;
    int known = 0;
    *pfn = NULL;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(symbol, table[i].name) != 0) continue;
        known = 1;
        if (table[i].since <= version) *pfn = table[i].fn;
    }
    if (known && !*pfn) *pfn = (void *)s_old_abi;
    if (!known) *pfn = (void *)s_unsupported;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* For tests of the binding: the version of the form fn is (its row's), 1 for the too-old
 * stand-in, 0 for s_unsupported or anything else. */
EXPORT int cuda_script_abi(const void *fn)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].fn == fn) return table[i].since;
    return fn == (const void *)s_old_abi ? 1 : 0;
}

/* For tests: one of the stats line's counters of this process by name ("freed_mapped",
 * "other_abi", "live"); -1 for a name it does not know. */
EXPORT long cuda_script_count(const char *name)
{
    if (!strcmp(name, "freed_mapped")) return __atomic_load_n(&n_freed_mapped, __ATOMIC_RELAXED);
    if (!strcmp(name, "other_abi"))
        return __atomic_load_n(&n_old_abi, __ATOMIC_RELAXED) +
               __atomic_load_n(&n_ctx_v2, __ATOMIC_RELAXED);
    if (!strcmp(name, "live")) return __atomic_load_n(&n_live, __ATOMIC_RELAXED);
    return -1;
}
