/*
 * test_cuda_stream.c - the stream-ordered collectives (rcoll_<op>_stream) without a GPU,
 * through a scripted driver table whose streams are real: each fake stream has a worker
 * thread that runs the items enqueued on it (async copies, host functions, and "kernels":
 * test functions) one after another, in order, and can be held (nothing starts) and
 * released.  So asynchrony is real: a call returns before its work runs.  On real processes
 * (2, 3, 4 ranks; 3 with the progress thread) it checks: the call returns before anything of
 * it ran; stream order (a "kernel" enqueued before the call writes the input, one after it
 * sees the result); every collective in stream order, many in flight, against a reference
 * computed here, with the count arrays overwritten before the stream runs; host buffers in
 * stream order; the jobs' areas (one per call in flight, reused); the refusals (a blocking
 * call while stream calls are pending, a capturing stream, a group, nonblocking operations
 * in flight); a rank killed while a stream call waits for it (the next call names the stream
 * call and the rank; the survivors shrink and go on in stream order); and, on one rank, each driver call failing at enqueue, and destroy and
 * abort waiting for a held stream.
 *
 * What this does NOT test: a GPU.  "Device" memory is host memory in an arena of its own,
 * the async copies are memcpy run by the fake stream's thread, cuLaunchHostFunc runs the
 * function on that thread.  It checks rcoll's logic (what is enqueued, in which order, the
 * jobs' life, the errors), not the driver's behaviour; tests/gpu/test_stage.c runs the
 * stream calls on a real GPU.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "mp.h"
#include "rcoll.h"
#include "util/status.h"

/* ---- scripted driver: memory ---- */

typedef struct {
    char *mem;
    size_t size;
    unsigned memtype;
} fake_alloc_t;

#define NALLOCS 512
static fake_alloc_t allocs[NALLOCS];
static int nallocs;
static pthread_mutex_t alloc_mu = PTHREAD_MUTEX_INITIALIZER;

#define ARENA_BYTES (64u << 20)
static char *arena;
static size_t arena_used;

#define CTX_APP ((CUcontext)(uintptr_t)0xa990)
#define CTX_DEV ((CUcontext)(uintptr_t)0xdef0)
static __thread CUcontext cur_ctx = CTX_APP;
static _Atomic int ctx_wrong;

static _Atomic size_t bytes_dtoh, bytes_htod;
static _Atomic int hostfn_runs, host_allocs, host_live, host_frees;
/* failures on demand: the n-th next call fails (0: none) */
static int fail_alloc_host, fail_dtoh, fail_htod, fail_hostfn;

static CUresult s_version(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}
static CUresult s_init(unsigned flags)
{
    (void)flags;
    return CUDA_SUCCESS;
}
static CUresult s_err_name(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_OUT_OF_MEMORY   ? "CUDA_ERROR_OUT_OF_MEMORY"
         : e == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
         : e == CUDA_ERROR_LAUNCH_FAILED   ? "CUDA_ERROR_LAUNCH_FAILED"
                                           : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}
static CUresult s_err_string(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "scripted failure";
    return CUDA_SUCCESS;
}
static const fake_alloc_t *find_locked(uintptr_t p)
{
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].size && p >= (uintptr_t)allocs[i].mem &&
            p < (uintptr_t)allocs[i].mem + allocs[i].size)
            return &allocs[i];
    return NULL;
}
/* Is [p, p + n) inside one allocation of memtype? */
static int inside(const void *p, size_t n, unsigned memtype)
{
    pthread_mutex_lock(&alloc_mu);
    const fake_alloc_t *a = find_locked((uintptr_t)p);
    int ok = a && a->memtype == memtype && (uintptr_t)p + n <= (uintptr_t)a->mem + a->size;
    pthread_mutex_unlock(&alloc_mu);
    return ok;
}
static CUresult s_attrs(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    pthread_mutex_lock(&alloc_mu);
    fake_alloc_t a0 = {0}, *a = &a0;
    const fake_alloc_t *f = find_locked((uintptr_t)p);
    if (f) a0 = *f;
    pthread_mutex_unlock(&alloc_mu);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned *)data[i] = a->memtype;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned *)data[i] = 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data[i] = (CUdeviceptr)a->mem;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data[i] = a->size;
            break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            *(unsigned long long *)data[i] = (unsigned long long)(uintptr_t)a->mem;
            break;
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            if (!f) return CUDA_ERROR_INVALID_VALUE;
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
static CUresult s_busid(char *id, int len, CUdevice d)
{
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x19 + (int)d);
    return CUDA_SUCCESS;
}
static CUresult s_ctx_device(CUdevice *d)
{
    if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult s_ctx_set(CUcontext c)
{
    cur_ctx = c;
    return CUDA_SUCCESS;
}
static int fake_add(char *mem, size_t size, unsigned memtype)
{
    pthread_mutex_lock(&alloc_mu);
    int slot = -1;
    for (int i = 0; i < nallocs && slot < 0; i++)
        if (!allocs[i].size) slot = i;
    if (slot < 0 && nallocs < NALLOCS) slot = nallocs++;
    if (slot >= 0) allocs[slot] = (fake_alloc_t){mem, size, memtype};
    pthread_mutex_unlock(&alloc_mu);
    return slot >= 0;
}
static CUresult s_alloc_host(void **p, size_t bytes)
{
    if (fail_alloc_host && --fail_alloc_host == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    char *m = calloc(1, bytes);
    if (!m || !fake_add(m, bytes, CU_MEMORYTYPE_HOST)) {
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
    pthread_mutex_lock(&alloc_mu);
    int found = 0;
    for (int i = 0; i < nallocs && !found; i++)
        if (allocs[i].size && allocs[i].mem == p && allocs[i].memtype == CU_MEMORYTYPE_HOST) {
            allocs[i].size = 0;
            allocs[i].mem = NULL;
            found = 1;
        }
    pthread_mutex_unlock(&alloc_mu);
    if (!found) return CUDA_ERROR_INVALID_VALUE;
    free(p);
    host_live--;
    host_frees++;
    return CUDA_SUCCESS;
}
/* "Device" memory: from the arena (never reused), poisoned. */
typedef int32_t elem_t;
#define POISON ((elem_t)0x5a5a5a5a)
static elem_t *dalloc(size_t count)
{
    size_t size = (count + 16) * sizeof(elem_t);
    size_t at = (arena_used + 255) & ~(size_t)255;
    if (at + size > ARENA_BYTES) return NULL;
    elem_t *p = (elem_t *)(arena + at);
    arena_used = at + size;
    for (size_t i = 0; i < count + 16; i++) p[i] = POISON;
    return fake_add((char *)p, size, CU_MEMORYTYPE_DEVICE) ? p : NULL;
}

/* ---- scripted driver: streams with a worker thread each ---- */

enum { IT_COPY, IT_FN };
typedef struct item {
    int kind, to_device;
    void *dst;
    const void *src;
    size_t n;
    void (*fn)(void *);
    void *arg;
    struct item *next;
} item_t;

typedef struct fstream {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    item_t *head, *tail;
    int busy, held, stop, capturing;
    pthread_t th;
} fstream_t;

static void *fs_worker(void *arg)
{
    fstream_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && (s->held || !s->head)) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head) break; /* stopped, and nothing left */
        item_t *it = s->head;
        s->head = it->next;
        if (!s->head) s->tail = NULL;
        s->busy = 1;
        pthread_mutex_unlock(&s->mu);
        if (it->kind == IT_COPY) {
            memcpy(it->dst, it->src, it->n);
            if (it->to_device)
                bytes_htod += it->n;
            else
                bytes_dtoh += it->n;
        } else {
            it->fn(it->arg);
        }
        free(it);
        pthread_mutex_lock(&s->mu);
        s->busy = 0;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
static fstream_t *fs_new(void)
{
    fstream_t *s = calloc(1, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_create(&s->th, NULL, fs_worker, s);
    return s;
}
static void fs_push(fstream_t *s, item_t *it)
{
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}
static void fs_hold(fstream_t *s, int held)
{
    pthread_mutex_lock(&s->mu);
    s->held = held;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}
static void fs_sync(fstream_t *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->head || s->busy) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}
static void fs_free(fstream_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    s->held = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
/* A "kernel": fn(arg) in stream order. */
static void fs_kernel(fstream_t *s, void (*fn)(void *), void *arg)
{
    item_t *it = calloc(1, sizeof(*it));
    it->kind = IT_FN;
    it->fn = fn;
    it->arg = arg;
    fs_push(s, it);
}

static fstream_t *default_stream; /* NULL: the legacy default stream, made when first used */
static fstream_t *fs_of(CUstream st)
{
    if (st) return (fstream_t *)st;
    if (!default_stream) default_stream = fs_new();
    return default_stream;
}

/* The async copies check at enqueue, as the driver does: device range in one device
 * allocation, host range in pinned memory, the buffer's context current. */
static CUresult s_copy_async(int to_device, void *dst, const void *src, size_t n, CUstream st)
{
    const void *dev = to_device ? dst : src, *host = to_device ? src : dst;
    if (!inside(dev, n, CU_MEMORYTYPE_DEVICE) || !inside(host, n, CU_MEMORYTYPE_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    if (cur_ctx != CTX_DEV) ctx_wrong++;
    item_t *it = calloc(1, sizeof(*it));
    *it = (item_t){.kind = IT_COPY, .to_device = to_device, .dst = dst, .src = src, .n = n};
    fs_push(fs_of(st), it);
    return CUDA_SUCCESS;
}
static CUresult s_dtoh_async(void *dst, CUdeviceptr src, size_t n, CUstream st)
{
    if (fail_dtoh && --fail_dtoh == 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
    return s_copy_async(0, dst, (const void *)src, n, st);
}
static CUresult s_htod_async(CUdeviceptr dst, const void *src, size_t n, CUstream st)
{
    if (fail_htod && --fail_htod == 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
    return s_copy_async(1, (void *)dst, src, n, st);
}
/* The blocking staging path's copies (a blocking call frees what stream calls outgrew). */
static CUresult s_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}
static CUresult s_htod(CUdeviceptr dst, const void *src, size_t n)
{
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}
typedef struct {
    CUhostFn fn;
    void *data;
} hostfn_t;
static void run_hostfn(void *arg)
{
    hostfn_t h = *(hostfn_t *)arg;
    free(arg);
    hostfn_runs++;
    h.fn(h.data);
}
static CUresult s_launch_host(CUstream st, CUhostFn fn, void *data)
{
    if (fail_hostfn && --fail_hostfn == 0) return CUDA_ERROR_LAUNCH_FAILED;
    hostfn_t *h = malloc(sizeof(*h));
    *h = (hostfn_t){fn, data};
    fs_kernel(fs_of(st), run_hostfn, h);
    return CUDA_SUCCESS;
}
static CUresult s_stream_sync(CUstream st)
{
    fs_sync(fs_of(st));
    return CUDA_SUCCESS;
}
static CUresult s_is_capturing(CUstream st, CUstreamCaptureStatus *cs)
{
    *cs = fs_of(st)->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                               : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

static const rcoll_cu_api_t scripted = {
    .cuInit = s_init, .cuDriverGetVersion = s_version, .cuGetErrorName = s_err_name,
    .cuGetErrorString = s_err_string, .cuPointerGetAttributes = s_attrs,
    .cuCtxGetCurrent = s_ctx_get, .cuCtxSetCurrent = s_ctx_set,
    .cuCtxGetDevice = s_ctx_device, .cuDeviceGetPCIBusId = s_busid,
    .cuMemAllocHost = s_alloc_host, .cuMemFreeHost = s_free_host,
    .cuMemHostAlloc = s_host_alloc,
    .cuMemcpyDtoHAsync = s_dtoh_async, .cuMemcpyHtoDAsync = s_htod_async,
    .cuMemcpyDtoH = s_dtoh, .cuMemcpyHtoD = s_htod,
    .cuLaunchHostFunc = s_launch_host, .cuStreamSynchronize = s_stream_sync,
    .cuStreamIsCapturing = s_is_capturing,
};

/* ---- the collectives in stream order, on real processes ---- */

static elem_t val(int rank, size_t i, int salt) { return rank * 1000 + (elem_t)i * 3 + salt; }
/* sum over ranks of val(r, i, salt) */
static elem_t vsum(int n, size_t i, int salt)
{
    return (elem_t)(1000 * n * (n - 1) / 2) + (elem_t)n * ((elem_t)i * 3 + salt);
}

typedef struct {
    rcoll_comm_t comm;
    int rank, n;
    long fails0;
} ctx_t;

#define EXPECT(c, what, buf, count, want_expr)                                                \
    do {                                                                                      \
        size_t bad_ = 0, first_ = 0;                                                          \
        for (size_t i = 0; i < (count); i++)                                                  \
            if ((buf)[i] != (elem_t)(want_expr) && !bad_++) first_ = i;                       \
        CHECK(!bad_, "rank %d/%d %s: %zu wrong, first [%zu] = %d", (c)->rank, (c)->n, what,   \
              bad_, first_, bad_ ? (int)(buf)[first_] : 0);                                   \
    } while (0)

static int ok(ctx_t *c, rcoll_status_t st, const char *what)
{
    CHECK(st == RCOLL_OK, "rank %d/%d %s: %s: %s", c->rank, c->n, what, rcoll_status_string(st),
          rcoll_comm_last_error(c->comm));
    return st == RCOLL_OK;
}

/* "Kernels" of the order test: fill the input, snapshot the output. */
typedef struct {
    elem_t *buf, *copy;
    size_t count;
    int rank, salt;
} kern_t;
static void k_fill(void *arg)
{
    kern_t *k = arg;
    for (size_t i = 0; i < k->count; i++) k->buf[i] = val(k->rank, i, k->salt);
}
static void k_snapshot(void *arg)
{
    kern_t *k = arg;
    memcpy(k->copy, k->buf, k->count * sizeof(elem_t));
}

/* The call returns before any of its work ran; a kernel before it writes the input, one
 * after it sees the result. */
static void order(ctx_t *c, fstream_t *s, size_t cnt)
{
    elem_t *in = dalloc(cnt), *out = dalloc(cnt), *seen = calloc(cnt, sizeof(elem_t));
    kern_t fill = {in, NULL, cnt, c->rank, 7}, snap = {out, seen, cnt, c->rank, 0};
    fs_hold(s, 1);
    fs_kernel(s, k_fill, &fill);
    int runs0 = hostfn_runs;
    size_t in0 = bytes_dtoh;
    ok(c, rcoll_allreduce_stream(in, out, cnt, RCOLL_INT32, RCOLL_SUM, c->comm, s),
       "allreduce_stream");
    CHECK(hostfn_runs == runs0 && bytes_dtoh == in0 && out[0] == POISON && in[0] == POISON,
          "rank %d: the call returned before anything of it ran", c->rank);
    fs_kernel(s, k_snapshot, &snap);
    fs_hold(s, 0);
    fs_sync(s);
    EXPECT(c, "a kernel after the call sees the result", seen, cnt, vsum(c->n, i, 7));
    EXPECT(c, "the result in recvbuf", out, cnt, vsum(c->n, i, 7));
    CHECK(out[cnt] == POISON, "rank %d: nothing written past recvbuf", c->rank);
    CHECK(bytes_dtoh - in0 == cnt * sizeof(elem_t), "rank %d: %zu bytes copied in", c->rank,
          bytes_dtoh - in0);
    free(seen);
}

/* Every collective in stream order, all in flight at once (the stream held until all are
 * enqueued), checked after one synchronization. */
static void many(ctx_t *c, fstream_t *s, size_t cnt, int salt)
{
    int me = c->rank, n = c->n;
    size_t N = (size_t)n;
    rcoll_comm_t comm = c->comm;
    elem_t *ar = dalloc(cnt), *bc = dalloc(cnt), *ag_s = dalloc(cnt), *ag = dalloc(cnt * N);
    elem_t *rs_s = dalloc(cnt * N), *rs = dalloc(cnt), *a2a_s = dalloc(cnt * N);
    elem_t *a2a = dalloc(cnt * N), *rd_s = dalloc(cnt), *rd = dalloc(cnt);
    elem_t *ga_s = dalloc(cnt), *ga = dalloc(cnt * N), *sc_s = dalloc(cnt * N);
    elem_t *sc = dalloc(cnt), *agv = dalloc(3 * cnt * N), *rsv_s = dalloc(cnt * N);
    elem_t *rsv = dalloc(cnt);
    elem_t *host = malloc(cnt * sizeof(elem_t));
    for (size_t i = 0; i < cnt; i++) {
        ar[i] = val(me, i, salt);
        bc[i] = me == 1 % n ? val(me, i, salt) : POISON;
        ag_s[i] = val(me, i, salt);
        rd_s[i] = val(me, i, salt);
        ga_s[i] = val(me, i, salt);
        host[i] = val(me, i, salt + 1);
    }
    for (size_t i = 0; i < cnt * N; i++) {
        rs_s[i] = val(me, i, salt);
        a2a_s[i] = val(me, i, salt) + (elem_t)(i / cnt) * 100000; /* block i/cnt to rank i/cnt */
        sc_s[i] = val(me, i, salt);
        rsv_s[i] = val(me, i, salt);
    }
    /* v-forms: block r of allgatherv at 3 x r x cnt (gaps between), reduce-scatter-v even */
    size_t *counts = malloc(N * sizeof(size_t)), *displs = malloc(N * sizeof(size_t));
    for (size_t r = 0; r < N; r++) {
        counts[r] = cnt;
        displs[r] = 3 * r * cnt;
    }
    int allocs0 = host_allocs, runs0 = hostfn_runs;
    fs_hold(s, 1);
    ok(c, rcoll_allreduce_stream(RCOLL_IN_PLACE, ar, cnt, RCOLL_INT32, RCOLL_SUM, comm, s),
       "allreduce in place");
    ok(c, rcoll_bcast_stream(bc, cnt, RCOLL_INT32, 1 % n, comm, s), "bcast");
    ok(c, rcoll_allgather_stream(ag_s, ag, cnt, RCOLL_INT32, comm, s), "allgather");
    ok(c, rcoll_reduce_scatter_stream(rs_s, rs, cnt, RCOLL_INT32, RCOLL_SUM, comm, s),
       "reduce_scatter");
    ok(c, rcoll_alltoall_stream(a2a_s, a2a, cnt, RCOLL_INT32, comm, s), "alltoall");
    ok(c, rcoll_reduce_stream(rd_s, me == 0 ? rd : NULL, cnt, RCOLL_INT32, RCOLL_SUM, 0, comm,
                              s), "reduce");
    ok(c, rcoll_gather_stream(ga_s, me == n - 1 ? ga : NULL, cnt, RCOLL_INT32, n - 1, comm, s),
       "gather");
    ok(c, rcoll_scatter_stream(me == 0 ? sc_s : NULL, sc, cnt, RCOLL_INT32, 0, comm, s),
       "scatter");
    ok(c, rcoll_allgatherv_stream(ag_s, cnt, agv, counts, displs, RCOLL_INT32, comm, s),
       "allgatherv");
    ok(c, rcoll_reduce_scatterv_stream(rsv_s, rsv, counts, RCOLL_INT32, RCOLL_SUM, comm, s),
       "reduce_scatterv");
    ok(c, rcoll_barrier_stream(comm, s), "barrier");
    ok(c, rcoll_allreduce_stream(RCOLL_IN_PLACE, host, cnt, RCOLL_INT32, RCOLL_SUM, comm, s),
       "host buffer");
    /* the arrays are the call's to forget: the stream has not read them yet */
    for (size_t r = 0; r < N; r++) counts[r] = displs[r] = (size_t)1 << 40;
    CHECK(hostfn_runs == runs0 && ar[0] == val(me, 0, salt) && host[0] == val(me, 0, salt + 1),
          "rank %d: twelve calls enqueued, none ran yet", me);
    size_t mem = 0;
    rcoll_comm_mem_usage(comm, &mem);
    CHECK(mem > 10 * cnt * sizeof(elem_t), "rank %d: memory usage %zu counts the jobs", me,
          mem);
    fs_hold(s, 0);
    fs_sync(s);
    int staged = 10; /* the barrier and the host-buffer call need no area */
    CHECK(host_allocs - allocs0 <= staged, "rank %d: at most an area per call in flight (%d)",
          me, host_allocs - allocs0);
    EXPECT(c, "allreduce", ar, cnt, vsum(n, i, salt));
    EXPECT(c, "bcast", bc, cnt, val(1 % n, i, salt));
    EXPECT(c, "allgather", ag, cnt * N, val((int)(i / cnt), i % cnt, salt));
    EXPECT(c, "reduce_scatter", rs, cnt, vsum(n, (size_t)me * cnt + i, salt));
    EXPECT(c, "alltoall", a2a, cnt * N,
           val((int)(i / cnt), (size_t)me * cnt + i % cnt, salt) + me * 100000);
    if (me == 0) EXPECT(c, "reduce", rd, cnt, vsum(n, i, salt));
    if (me == n - 1) EXPECT(c, "gather", ga, cnt * N, val((int)(i / cnt), i % cnt, salt));
    EXPECT(c, "scatter", sc, cnt, val(0, (size_t)me * cnt + i, salt));
    EXPECT(c, "allgatherv", agv, 3 * cnt * N,
           i % (3 * cnt) < cnt ? val((int)(i / (3 * cnt)), i % (3 * cnt), salt) : POISON);
    EXPECT(c, "reduce_scatterv", rsv, cnt, vsum(n, (size_t)me * cnt + i, salt));
    EXPECT(c, "host buffer in stream order", host, cnt, vsum(n, i, salt + 1));
    CHECK(ctx_wrong == 0 && cur_ctx == CTX_APP, "rank %d: contexts (%d wrong)", me,
          (int)ctx_wrong);
    free(host);
    free(counts);
    free(displs);
}

/* Refusals, each with its sentence; the communicator usable after each. */
static void refusals(ctx_t *c, fstream_t *s)
{
    rcoll_comm_t comm = c->comm;
    elem_t *d = dalloc(16), h[16];
    for (int i = 0; i < 16; i++) h[i] = d[i] = c->rank;
    fs_hold(s, 1);
    ok(c, rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 16, RCOLL_INT32, RCOLL_SUM, comm, s),
       "pending call");
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, h, 16, RCOLL_INT32, RCOLL_SUM, comm);
    CHECK(st == RCOLL_ERR_INVALID_USAGE &&
              strstr(rcoll_comm_last_error(comm), "rcoll_allreduce: 1 stream call enqueued on "
                                                  "this communicator has not run yet"),
          "rank %d: a blocking call while a stream call is pending: %s", c->rank,
          rcoll_comm_last_error(comm));
    rcoll_request_t req = NULL;
    CHECK(rcoll_ibcast(h, 16, RCOLL_INT32, 0, comm, &req) == RCOLL_ERR_INVALID_USAGE && !req,
          "rank %d: a nonblocking one too", c->rank);
    fs_hold(s, 0);
    fs_sync(s);
    ok(c, rcoll_allreduce(RCOLL_IN_PLACE, h, 16, RCOLL_INT32, RCOLL_SUM, comm),
       "blocking call after the stream was synchronized");
    CHECK(h[3] == c->n * (c->n - 1) / 2, "rank %d: its result", c->rank);

    s->capturing = 1;
    st = rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 16, RCOLL_INT32, RCOLL_SUM, comm, s);
    CHECK(st == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_comm_last_error(comm), "is being captured into a CUDA graph: rcoll's "
                                                  "stream calls cannot be captured"),
          "rank %d: a capturing stream refused: %s", c->rank, rcoll_comm_last_error(comm));
    s->capturing = 0;
    rcoll_group_start();
    st = rcoll_bcast_stream(d, 16, RCOLL_INT32, 0, comm, s);
    rcoll_group_end();
    CHECK(st == RCOLL_ERR_INVALID_USAGE &&
              strstr(rcoll_comm_last_error(comm), "not allowed inside rcoll_group_start/end"),
          "rank %d: in a group: %s", c->rank, rcoll_comm_last_error(comm));
    /* nonblocking operations in flight: rank 0 checks while rank 1 holds back its part */
    if (c->n == 2) {
        if (c->rank == 1) usleep(300000);
        ok(c, rcoll_iallreduce(RCOLL_IN_PLACE, h, 16, RCOLL_INT32, RCOLL_SUM, comm, &req),
           "iallreduce");
        if (c->rank == 0) {
            st = rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 16, RCOLL_INT32, RCOLL_SUM, comm, s);
            CHECK(st == RCOLL_ERR_INVALID_USAGE &&
                      strstr(rcoll_comm_last_error(comm), "nonblocking operations of this "
                                                          "communicator are in flight"),
                  "rank 0: nonblocking in flight: %s", rcoll_comm_last_error(comm));
        }
        ok(c, rcoll_wait(&req), "wait");
    }
    ok(c, rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 16, RCOLL_INT32, RCOLL_SUM, comm, s),
       "usable after the refusals");
    fs_sync(s);
    CHECK(d[0] == c->n * (c->n * (c->n - 1) / 2), "rank %d: both in-place calls ran (%d)",
          c->rank, d[0]);
}

static int stream_rank(rcoll_comm_t comm, int rank, int nranks, void *arg)
{
    (void)arg;
    ctx_t c = {comm, rank, nranks, check_failed};
    CHECK(rcoll_gpu_active(), "rank %d: the scripted driver is in use", rank);
    fstream_t *s = fs_new();
    order(&c, s, 37);
    order(&c, s, 5000);
    many(&c, s, 37, 1);
    int allocs1 = host_allocs;
    many(&c, s, 37, 2); /* the same again: the jobs' areas reused */
    CHECK(host_allocs == allocs1, "rank %d: areas reused by the next round (%d new)", rank,
          host_allocs - allocs1);
    many(&c, s, 3000, 3);
    /* the legacy default stream */
    elem_t *d = dalloc(8);
    for (int i = 0; i < 8; i++) d[i] = rank;
    ok(&c, rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 8, RCOLL_INT32, RCOLL_SUM, comm, NULL),
       "default stream");
    fs_sync(fs_of(NULL));
    CHECK(d[5] == nranks * (nranks - 1) / 2, "rank %d: on the default stream", rank);
    refusals(&c, s);
    fs_free(s);
    if (default_stream) fs_free(default_stream);
    default_stream = NULL;
    return check_failed != c.fails0;
}

static void test_stream_mp(void)
{
    for (int n = 2; n <= 4; n++) {
        mp_result_t res;
        int bad = mp_run(n, stream_rank, NULL, 120, &res);
        CHECK(bad == 0, "%d ranks: the stream-ordered collectives (exit codes %d %d %d %d)", n,
              res.codes[0], res.codes[1], res.codes[2], res.codes[3]);
    }
    setenv("RCOLL_PROGRESS_THREAD", "1", 1);
    mp_result_t res;
    CHECK(mp_run(3, stream_rank, NULL, 120, &res) == 0, "3 ranks with the progress thread "
          "(exit codes %d %d %d)", res.codes[0], res.codes[1], res.codes[2]);
    unsetenv("RCOLL_PROGRESS_THREAD");
}

/* ---- a rank dies while a stream call waits for it ---- */

#define VICTIM 2
static int dying_rank(rcoll_comm_t comm, int rank, int nranks, void *arg)
{
    (void)arg;
    ctx_t c = {comm, rank, nranks, check_failed};
    fstream_t *s = fs_new();
    elem_t *d = dalloc(64), *e = dalloc(64);
    for (int i = 0; i < 64; i++) d[i] = e[i] = 1;
    ok(&c, rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 64, RCOLL_INT32, RCOLL_SUM, comm, s),
       "first call");
    fs_sync(s);
    CHECK(d[0] == nranks, "rank %d: the first call's result", rank);
    rcoll_status_t aerr = RCOLL_ERR_INTERNAL;
    CHECK(rcoll_comm_get_async_error(comm, &aerr) == RCOLL_OK && aerr == RCOLL_OK,
          "rank %d: no failure yet (%d)", rank, (int)aerr);
    if (rank == VICTIM) raise(SIGKILL);
    /* two calls enqueued: the first fails in stream order, the second runs nothing */
    ok(&c, rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 64, RCOLL_INT32, RCOLL_SUM, comm, s),
       "second call (enqueued before the failure)");
    ok(&c, rcoll_bcast_stream(e, 64, RCOLL_INT32, 0, comm, s), "third call");
    fs_sync(s);
    /* known without a call (what a thread waiting on a CUDA event asks) */
    CHECK(rcoll_comm_get_async_error(comm, &aerr) == RCOLL_OK && aerr < 0,
          "rank %d: the failure in stream order is reported without a call (%d)", rank,
          (int)aerr);
    const char *err = rcoll_comm_last_error(comm);
    CHECK(strstr(err, "rcoll_allreduce_stream (stream call #2 on this communicator, on stream") &&
              strstr(err, "failed in stream order") && strstr(err, "rank 2"),
          "rank %d: the failure names the stream call and the rank: %s", rank, err);
    rcoll_status_t st = rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 64, RCOLL_INT32, RCOLL_SUM,
                                               comm, s);
    CHECK(st == RCOLL_ERR_INVALID_USAGE && strstr(rcoll_comm_last_error(comm),
                                                  "communicator failed earlier") &&
              strstr(rcoll_comm_last_error(comm), "rcoll_allreduce_stream (stream call #2"),
          "rank %d: the next call says so: %s", rank, rcoll_comm_last_error(comm));
    /* the survivors go on without the victim */
    rcoll_comm_t small = NULL;
    ok(&c, rcoll_comm_shrink(comm, 0, &small), "shrink");
    if (small) {
        for (int i = 0; i < 64; i++) d[i] = rank + 1;
        ok(&c, rcoll_allreduce_stream(RCOLL_IN_PLACE, d, 64, RCOLL_INT32, RCOLL_SUM, small, s),
           "a stream call on the shrunk communicator");
        fs_sync(s);
        CHECK(d[7] == 3, "rank %d: its result (%d)", rank, d[7]);
        CHECK(rcoll_comm_get_async_error(small, &aerr) == RCOLL_OK && aerr == RCOLL_OK,
              "rank %d: the shrunk communicator has not failed (%d)", rank, (int)aerr);
        ok(&c, rcoll_comm_destroy(small), "destroy the shrunk communicator");
    }
    fs_free(s);
    return check_failed != c.fails0;
}

static void test_stream_failure(void)
{
    setenv("RCOLL_TIMEOUT", "5", 1);
    mp_result_t res;
    mp_run(3, dying_rank, NULL, 60, &res);
    CHECK(res.codes[0] == 0 && res.codes[1] == 0 && res.codes[VICTIM] == 128 + SIGKILL,
          "survivors saw the failure of the stream call (exit codes %d %d %d)", res.codes[0],
          res.codes[1], res.codes[2]);
    unsetenv("RCOLL_TIMEOUT");
}

/* ---- one rank: the driver failing at enqueue, destroy waiting ---- */

static void *release_later(void *arg)
{
    usleep(200000);
    fs_hold(arg, 0);
    return NULL;
}

/* A one-rank communicator (NULL, the failure counted, when creation fails). */
static rcoll_comm_t one_rank_comm(void)
{
    rcoll_unique_id_t id;
    rcoll_comm_t comm = NULL;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK && rcoll_comm_init_rank(1, &id, 0, &comm) ==
              RCOLL_OK, "one-rank communicator: %s", rcoll_last_init_error());
    return comm;
}

static void test_stream_errors(void)
{
    rcoll_comm_t comm = NULL;
    comm = one_rank_comm();
    if (!comm) return;
    fstream_t *s = fs_new();
    elem_t *d = dalloc(64), *r = dalloc(64), h[4] = {1, 2, 3, 4};
    for (int i = 0; i < 64; i++) d[i] = i;
    int live0 = host_live, runs0 = hostfn_runs;
    rcoll_status_t st;

    fail_hostfn = 1;
    st = rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm, s);
    CHECK(st == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_comm_last_error(comm), "rcoll_allreduce_stream: enqueueing the "
                                                  "collective: cuLaunchHostFunc(stream") &&
              strstr(rcoll_comm_last_error(comm), "CUDA_ERROR_LAUNCH_FAILED") &&
              strstr(rcoll_comm_last_error(comm), "not enqueued on this rank"),
          "cuLaunchHostFunc failing: %s", rcoll_comm_last_error(comm));
    fs_sync(s);
    CHECK(r[0] == POISON, "nothing reached recvbuf");
    CHECK(rcoll_allreduce(RCOLL_IN_PLACE, h, 4, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK,
          "nothing left pending: a blocking call is accepted: %s", rcoll_comm_last_error(comm));

    fail_dtoh = 1;
    st = rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm, s);
    CHECK(st == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_comm_last_error(comm), "enqueueing the copy of sendbuf") &&
              strstr(rcoll_comm_last_error(comm), "cuMemcpyDtoHAsync of 256 bytes from") &&
              strstr(rcoll_comm_last_error(comm), "not enqueued on this rank"),
          "cuMemcpyDtoHAsync failing: %s", rcoll_comm_last_error(comm));
    CHECK(hostfn_runs == runs0, "no host function ran");

    fail_htod = 1;
    st = rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm, s);
    CHECK(st == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_comm_last_error(comm), "cuMemcpyHtoDAsync of 256 bytes to") &&
              strstr(rcoll_comm_last_error(comm), "the collective is enqueued and runs, but "
                                                  "its result will not reach recvbuf"),
          "cuMemcpyHtoDAsync failing: %s", rcoll_comm_last_error(comm));
    CHECK(hostfn_runs == runs0 + 1 && r[0] == POISON, "the collective ran (the call waited "
          "for it), its result not copied");
    CHECK(rcoll_allreduce(RCOLL_IN_PLACE, h, 4, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK,
          "nothing left pending: %s", rcoll_comm_last_error(comm));

    elem_t *big = dalloc(100000);
    fail_alloc_host = 1;
    st = rcoll_allreduce_stream(RCOLL_IN_PLACE, big, 100000, RCOLL_INT32, RCOLL_SUM, comm, s);
    CHECK(st == RCOLL_ERR_NO_MEMORY && strstr(rcoll_comm_last_error(comm), "cuMemHostAlloc"),
          "the staging area cannot be allocated: %s", rcoll_comm_last_error(comm));

    ok(&(ctx_t){comm, 0, 1, 0}, rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm,
                                                       s), "usable after every failure");
    fs_sync(s);
    EXPECT(&((ctx_t){comm, 0, 1, 0}), "its result", r, 64, i);
    CHECK(host_allocs > 0 && host_portable == host_allocs, "every staging area portable (%d "
          "of %d)", host_portable, host_allocs);
    CHECK(fail_alloc_host == 0 && fail_dtoh == 0 && fail_htod == 0 && fail_hostfn == 0,
          "every failure happened");

    /* destroy with a call still held in the stream: it waits for it */
    for (int i = 0; i < 64; i++) d[i] = 2 * i;
    fs_hold(s, 1);
    ok(&(ctx_t){comm, 0, 1, 0}, rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm,
                                                       s), "held call");
    pthread_t th;
    pthread_create(&th, NULL, release_later, s);
    int runs1 = hostfn_runs;
    CHECK(rcoll_comm_destroy(comm) == RCOLL_OK, "destroy waited for the held call");
    CHECK(hostfn_runs >= runs1 + 1, "the call ran before destroy returned");
    pthread_join(th, NULL);
    fs_sync(s);
    EXPECT(&((ctx_t){comm, 0, 1, 0}), "its result", r, 64, 2 * i);
    CHECK(host_live == live0, "the areas freed with the communicator (%d live, %d before)",
          (int)host_live, live0);

    /* abort with two calls held: it waits for them, and they run nothing */
    comm = one_rank_comm();
    if (comm) {
        for (int i = 0; i < 64; i++) d[i] = 3 * i;
        fs_hold(s, 1);
        ok(&(ctx_t){comm, 0, 1, 0}, rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM,
                                                           comm, s), "held call 1");
        ok(&(ctx_t){comm, 0, 1, 0}, rcoll_bcast_stream(r, 64, RCOLL_INT32, 0, comm, s),
           "held call 2");
        pthread_create(&th, NULL, release_later, s);
        runs1 = hostfn_runs;
        CHECK(rcoll_comm_abort(comm) == RCOLL_OK && hostfn_runs >= runs1 + 3,
              "abort waited for the held calls (%d host functions ran)", hostfn_runs - runs1);
        pthread_join(th, NULL);
        fs_sync(s);
        CHECK(host_live == live0, "the areas freed by abort (%d live)", (int)host_live);
    }
    fs_free(s);
    if (default_stream) fs_free(default_stream);
    default_stream = NULL;
}

/* The communicator's pinned memory: a stream-ordered call that outgrows its area never frees
 * (cuMemFreeHost synchronizes the device); the next call outside stream order does.  And the
 * bound, RCOLL_STAGE_PINNED_MAX: a call past it fails saying so, the communicator goes on. */
static void test_stream_pinned(void)
{
    rcoll_comm_t comm = NULL;
    comm = one_rank_comm();
    if (!comm) return;
    ctx_t c = {comm, 0, 1, 0};
    fstream_t *s = fs_new();
    elem_t *d = dalloc(64), *r = dalloc(64), *big = dalloc(100000);
    for (int i = 0; i < 64; i++) d[i] = i;
    for (int i = 0; i < 100000; i++) big[i] = i;
    int live0 = host_live;
    ok(&c, rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm, s), "small");
    fs_sync(s);
    int frees0 = host_frees, live1 = host_live;
    ok(&c, rcoll_allreduce_stream(RCOLL_IN_PLACE, big, 100000, RCOLL_INT32, RCOLL_SUM, comm, s),
       "large: the area outgrown");
    CHECK(host_frees == frees0 && host_live == live1 + 1, "no cuMemFreeHost in the stream call "
          "(%d freed, %d live, were %d)", host_frees - frees0, (int)host_live, live1);
    fs_sync(s);
    EXPECT(&c, "the large one's result", big, 100000, i);
    ok(&c, rcoll_allreduce(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm), "a blocking call");
    CHECK(host_frees == frees0 + 1, "the outgrown area freed by the next call outside stream "
          "order (%d freed)", host_frees - frees0);
    CHECK(rcoll_comm_destroy(comm) == RCOLL_OK && host_live == live0, "all freed at destroy "
          "(%d live, were %d)", (int)host_live, live0);

    setenv("RCOLL_STAGE_PINNED_MAX", "262144", 1);
    comm = NULL;
    comm = one_rank_comm();
    unsetenv("RCOLL_STAGE_PINNED_MAX");
    if (comm) {
        c.comm = comm;
        ok(&c, rcoll_allreduce_stream(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm, s), "small");
        rcoll_status_t st =
            rcoll_allreduce_stream(RCOLL_IN_PLACE, big, 100000, RCOLL_INT32, RCOLL_SUM, comm, s);
        CHECK(st == RCOLL_ERR_NO_MEMORY &&
                  strstr(rcoll_comm_last_error(comm), "over RCOLL_STAGE_PINNED_MAX=262144"),
              "past the bound in stream order: %s", rcoll_comm_last_error(comm));
        fs_sync(s);
        st = rcoll_allreduce(RCOLL_IN_PLACE, big, 100000, RCOLL_INT32, RCOLL_SUM, comm);
        CHECK(st == RCOLL_ERR_NO_MEMORY &&
                  strstr(rcoll_comm_last_error(comm), "over RCOLL_STAGE_PINNED_MAX=262144"),
              "past the bound, blocking: %s", rcoll_comm_last_error(comm));
        for (int i = 0; i < 64; i++) d[i] = 5 * i;
        ok(&c, rcoll_allreduce(d, r, 64, RCOLL_INT32, RCOLL_SUM, comm), "usable after");
        EXPECT(&c, "its result", r, 64, 5 * i);
        CHECK(rcoll_comm_destroy(comm) == RCOLL_OK && host_live == live0, "all freed");
    }

    /* near the bound, an area that grows is not refused for its doubling alone: 192 KiB
     * held, 200 KB asked for (doubled: 384 KiB, past 320 KiB; as asked: 256 KiB, within) */
    setenv("RCOLL_STAGE_PINNED_MAX", "327680", 1);
    comm = NULL;
    comm = one_rank_comm();
    unsetenv("RCOLL_STAGE_PINNED_MAX");
    if (comm) {
        c.comm = comm;
        ok(&c, rcoll_allreduce(RCOLL_IN_PLACE, big, 37500, RCOLL_INT32, RCOLL_SUM, comm),
           "150 KB: a 192 KiB area");
        ok(&c, rcoll_allreduce(RCOLL_IN_PLACE, big, 50000, RCOLL_INT32, RCOLL_SUM, comm),
           "200 KB: grown to what it asks, not refused for the doubling");
        CHECK(rcoll_comm_destroy(comm) == RCOLL_OK && host_live == live0, "all freed");
    }
    fs_free(s);
}

/* Without the driver in use the calls are refused with a sentence. */
static void test_no_driver(void)
{
    rcoll_comm_t comm = NULL;
    comm = one_rank_comm();
    if (!comm) return;
    int h[4] = {0};
    CHECK(rcoll_allreduce_stream(RCOLL_IN_PLACE, h, 4, RCOLL_INT32, RCOLL_SUM, comm, NULL) ==
              RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_comm_last_error(comm), "stream calls need the CUDA driver"),
          "no driver: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_comm_destroy(comm) == RCOLL_OK, "destroy");
}

int main(void)
{
    check_set_note(rcoll_err_get);
    arena = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) return 1;
    test_no_driver();
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_OK, "scripted driver: %s", rcoll_err_get());
    rcoll_gpu_config_t cfg = {.mode = RCOLL_GPU_AUTO};
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_OK && rcoll_gpu_active(), "active");
    test_stream_mp();
    test_stream_failure();
    test_stream_errors();
    test_stream_pinned();
    rcoll_cu_set_api(NULL);
    rcoll_gpu_test_reset();
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].size && allocs[i].memtype == CU_MEMORYTYPE_HOST) free(allocs[i].mem);
    munmap(arena, ARENA_BYTES);
    return check_summary();
}
