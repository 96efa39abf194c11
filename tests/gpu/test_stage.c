/*
 * test_stage.c - the staging path on a real GPU (suite gpu; tests/gpu/run.sh): every blocking
 * collective with CUDA device buffers (cuMemAlloc) across 2, 3 and 4 processes sharing the
 * one GPU, results copied back and checked against a reference computed here on the host
 * (integers, so exact), gaps between the blocks of the uneven calls and guard elements behind
 * every buffer checked untouched; managed memory (cuMemAllocManaged) through all-reduce.
 * Then the cost of staging: a 64 MiB float32 sum all-reduce on 2 ranks with device buffers
 * against the same with host buffers, printed (not judged).
 * Nonblocking calls too (two in flight, waited for in reverse order), and blocking calls
 * inside a group.
 * Each rank process loads the driver itself (CUDA must not be started before fork); only
 * rcoll's driver table is used (no libcudart).  Exit 77 with the reason where there is no GPU
 * or no usable driver.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cuda/cuda_drv.h"
#include "mp.h"
#include "rcoll.h"
#include "util/status.h"

#define SKIP_CODE 77
#define GUARD 16
typedef int32_t elem_t;
#define POISON ((elem_t)0x5a5a5a5a)

static const char *lib;

/* The scripted driver's counter of this process (tests/common/cuda_script_lib.c), -1 on a
 * real driver. */
static long script_count(const char *name)
{
    void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    void *f = h ? dlsym(h, "cuda_script_count") : NULL;
    long n = -1;
    if (f) {
        long (*count)(const char *);
        memcpy(&count, &f, sizeof(f));
        n = count(name);
    }
    if (h) dlclose(h);
    return n;
}

static elem_t val(int rank, size_t i, int salt) { return rank * 1000 + (elem_t)i * 3 + salt; }

typedef struct {
    rcoll_comm_t comm;
    int rank, n, fails;
    const rcoll_cu_api_t *cu;
    CUdeviceptr ds, dr;  /* device send and receive buffers */
    elem_t *hs, *hr;     /* their host images */
    size_t cap;          /* elements each, guards included */
} rk_t;

static void fail(rk_t *k, const char *fmt, const char *what, long a, long b)
{
    if (k->fails++ < 8) {
        fprintf(stderr, "rank %d/%d %s: ", k->rank, k->n, what);
        fprintf(stderr, fmt, a, b);
        fprintf(stderr, "\n");
    }
}

/* After an abort while peers' kernels may still poll this rank's workspace: it was not
 * freed under them (on a GPU that is a fault in the peer, not the deadline's clean error). */
static void abort_keeps_workspace(rk_t *k)
{
    long freed = script_count("freed_mapped");
    if (freed > 0)
        fail(k, "%ld %ld", "freed its CUDA IPC workspace while a peer had it mapped", freed, 0);
}

static int cu_ok(rk_t *k, CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return 1;
    char text[160];
    fprintf(stderr, "rank %d: %s: %s\n", k->rank, what, rcoll_cu_strerror(r, text, sizeof(text)));
    k->fails++;
    return 0;
}

/* Host images to the device (both buffers, guards included), and the receive buffer back. */
static int put(rk_t *k)
{
    return cu_ok(k, k->cu->cuMemcpyHtoD(k->ds, k->hs, k->cap * sizeof(elem_t)), "HtoD send") &&
           cu_ok(k, k->cu->cuMemcpyHtoD(k->dr, k->hr, k->cap * sizeof(elem_t)), "HtoD recv");
}
static int get(rk_t *k, CUdeviceptr d, elem_t *h)
{
    return cu_ok(k, k->cu->cuMemcpyDtoH(h, d, k->cap * sizeof(elem_t)), "DtoH");
}
static int ran(rk_t *k, rcoll_status_t st, const char *what)
{
    if (st == RCOLL_OK) return 1;
    fprintf(stderr, "rank %d/%d %s: %s: %s\n", k->rank, k->n, what, rcoll_status_string(st),
            rcoll_comm_last_error(k->comm));
    k->fails++;
    return 0;
}
static void poison(elem_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = POISON;
}
/* got[0, count) against want(i), then `guard` elements of poison behind. */
#define EXPECT_G(k, what, got, count, guard, want_expr)                                       \
    do {                                                                                      \
        size_t n_ = (count), g_ = (guard);                                                    \
        for (size_t i = 0; i < n_; i++)                                                       \
            if ((got)[i] != (elem_t)(want_expr)) {                                            \
                fail(k, "[%ld] = %ld wrong", what, (long)i, (long)(got)[i]);                  \
                break;                                                                        \
            }                                                                                 \
        for (size_t i = n_; i < n_ + g_; i++)                                                 \
            if ((got)[i] != POISON) {                                                         \
                fail(k, "guard [%ld] = %ld written", what, (long)i, (long)(got)[i]);          \
                break;                                                                        \
            }                                                                                 \
    } while (0)
#define EXPECT(k, what, got, count, want_expr) EXPECT_G(k, what, got, count, GUARD, want_expr)

static void blocks(rk_t *k, size_t cnt)
{
    int me = k->rank, n = k->n, root = n - 1;
    size_t nb = cnt * (size_t)n;
    void *S = (void *)k->ds, *R = (void *)k->dr;
    elem_t *hs = k->hs, *hr = k->hr;
    rcoll_comm_t c = k->comm;
    int sum0 = n * (n - 1) / 2 * 1000;

    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < cnt; i++) hs[i] = val(me, i, 1);
    if (put(k) && ran(k, rcoll_allreduce(S, R, cnt, RCOLL_INT32, RCOLL_SUM, c), "allreduce") &&
        get(k, k->dr, hr))
        EXPECT(k, "allreduce", hr, cnt, sum0 + n * (elem_t)(i * 3 + 1));
    poison(hr, k->cap);
    for (size_t i = 0; i < cnt; i++) hr[i] = val(me, i, 2);
    if (put(k) && ran(k, rcoll_allreduce(RCOLL_IN_PLACE, R, cnt, RCOLL_INT32, RCOLL_MAX, c),
                       "allreduce in place") && get(k, k->dr, hr))
        EXPECT(k, "allreduce in place", hr, cnt, val(n - 1, i, 2));

    poison(hr, k->cap);
    for (size_t i = 0; me == root && i < cnt; i++) hr[i] = val(me, i, 3);
    if (put(k) && ran(k, rcoll_bcast(R, cnt, RCOLL_INT32, root, c), "bcast") && get(k, k->dr, hr))
        EXPECT(k, "bcast", hr, cnt, val(root, i, 3));

    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < cnt; i++) hs[i] = val(me, i, 4);
    if (put(k) && ran(k, rcoll_reduce(S, me == 0 ? R : NULL, cnt, RCOLL_INT32, RCOLL_SUM, 0, c),
                       "reduce") && get(k, k->dr, hr)) {
        if (me == 0)
            EXPECT(k, "reduce", hr, cnt, sum0 + n * (elem_t)(i * 3 + 4));
        else
            EXPECT(k, "reduce (recvbuf not used here)", hr, 0, 0);
    }

    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < cnt; i++) hs[i] = val(me, i, 6);
    if (put(k) && ran(k, rcoll_allgather(S, R, cnt, RCOLL_INT32, c), "allgather") &&
        get(k, k->dr, hr))
        EXPECT(k, "allgather", hr, nb, val((int)(i / cnt), i % cnt, 6));
    poison(hr, k->cap);
    for (size_t i = 0; i < cnt; i++) hr[(size_t)me * cnt + i] = val(me, i, 7);
    if (put(k) && ran(k, rcoll_allgather(RCOLL_IN_PLACE, R, cnt, RCOLL_INT32, c),
                       "allgather in place") && get(k, k->dr, hr))
        EXPECT(k, "allgather in place", hr, nb, val((int)(i / cnt), i % cnt, 7));

    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < nb; i++) hs[i] = val(me, i, 8);
    if (put(k) && ran(k, rcoll_reduce_scatter(S, R, cnt, RCOLL_INT32, RCOLL_SUM, c),
                       "reduce_scatter") && get(k, k->dr, hr))
        EXPECT(k, "reduce_scatter", hr, cnt, sum0 + n * (elem_t)(((size_t)me * cnt + i) * 3 + 8));

    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < nb; i++) hs[i] = val(me, (i / cnt) * 100 + i % cnt, 10);
    if (put(k) && ran(k, rcoll_alltoall(S, R, cnt, RCOLL_INT32, c), "alltoall") &&
        get(k, k->dr, hr))
        EXPECT(k, "alltoall", hr, nb, val((int)(i / cnt), (size_t)me * 100 + i % cnt, 10));

    root = 1 % n;
    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < cnt; i++) hs[i] = val(me, i, 11);
    if (put(k) && ran(k, rcoll_gather(S, me == root ? R : NULL, cnt, RCOLL_INT32, root, c),
                       "gather") && get(k, k->dr, hr))
        EXPECT(k, "gather", hr, me == root ? nb : 0, val((int)(i / cnt), i % cnt, 11));

    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; me == root && i < nb; i++) hs[i] = val(root, i, 12);
    if (put(k) && ran(k, rcoll_scatter(me == root ? S : NULL, R, cnt, RCOLL_INT32, root, c),
                       "scatter") && get(k, k->dr, hr))
        EXPECT(k, "scatter", hr, cnt, val(root, (size_t)me * cnt + i, 12));
}

/* n elements at h must be poison (the gaps between the blocks of the uneven calls). */
static void untouched(rk_t *k, const char *what, const elem_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (h[i] != POISON) {
            fail(k, "[%ld] = %ld written", what, (long)i, (long)h[i]);
            return;
        }
}

static void uneven(rk_t *k)
{
    int me = k->rank, n = k->n;
    size_t counts[8], displs[8], sc[8], sd[8], rc[8], rd[8], total = 0, ext = 0;
    for (int b = 0; b < n; b++) {
        counts[b] = (size_t)b * 50 + 2;
        displs[b] = ext + 3; /* a gap of 3 elements before each block */
        ext = displs[b] + counts[b];
        total += counts[b];
    }
    void *S = (void *)k->ds, *R = (void *)k->dr;
    elem_t *hs = k->hs, *hr = k->hr;
    rcoll_comm_t c = k->comm;
    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < counts[me]; i++) hs[i] = val(me, i, 20);
    if (put(k) && ran(k, rcoll_allgatherv(S, counts[me], R, counts, displs, RCOLL_INT32, c),
                       "allgatherv") && get(k, k->dr, hr)) {
        for (int b = 0; b < n; b++) {
            EXPECT_G(k, "allgatherv block", hr + displs[b], counts[b], 0, val(b, i, 20));
            untouched(k, "allgatherv gap", hr + displs[b] - 3, 3);
        }
        untouched(k, "allgatherv guard", hr + ext, GUARD);
    }
    size_t sext = 0, rext = 0;
    for (int b = 0; b < n; b++) {
        sc[b] = (size_t)((me + 2 * b) % 3) * 40 + 1;
        sd[b] = sext + 1;
        sext = sd[b] + sc[b];
        rc[b] = (size_t)((b + 2 * me) % 3) * 40 + 1;
        rd[b] = rext + GUARD;
        rext = rd[b] + rc[b];
    }
    poison(hs, k->cap), poison(hr, k->cap);
    for (int b = 0; b < n; b++)
        for (size_t q = 0; q < sc[b]; q++) hs[sd[b] + q] = val(me, (size_t)b * 1000 + q, 22);
    if (put(k) && ran(k, rcoll_alltoallv(S, sc, sd, R, rc, rd, RCOLL_INT32, c), "alltoallv") &&
        get(k, k->dr, hr)) {
        for (int b = 0; b < n; b++) {
            untouched(k, "alltoallv gap", hr + rd[b] - GUARD, GUARD);
            EXPECT_G(k, "alltoallv block", hr + rd[b], rc[b], 0,
                     val(b, (size_t)me * 1000 + i, 22));
        }
        untouched(k, "alltoallv guard", hr + rext, GUARD);
    }
    size_t before = 0;
    for (int b = 0; b < me; b++) before += counts[b];
    poison(hs, k->cap), poison(hr, k->cap);
    for (size_t i = 0; i < total; i++) hs[i] = val(me, i, 23);
    if (put(k) && ran(k, rcoll_reduce_scatterv(S, R, counts, RCOLL_INT32, RCOLL_SUM, c),
                       "reduce_scatterv") && get(k, k->dr, hr))
        EXPECT(k, "reduce_scatterv", hr, counts[me],
               n * (n - 1) / 2 * 1000 + n * (elem_t)((before + i) * 3 + 23));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The cost of staging: a 64 MiB float32 sum, device buffers against host buffers (rank 0
 * prints the best of 5 after a warm-up of each). */
static void cost(rk_t *k)
{
    const rcoll_cu_api_t *cu = k->cu;
    size_t count = (size_t)16 << 20, bytes = count * 4;
    CUdeviceptr d = 0;
    float *h = calloc(count, 4);
    if (!h || !cu_ok(k, cu->cuMemAlloc(&d, bytes), "cuMemAlloc 64 MiB")) {
        free(h);
        return;
    }
    cu_ok(k, cu->cuMemsetD8(d, 0, bytes), "cuMemsetD8");
    double best[2] = {1e9, 1e9};
    for (int kind = 0; kind < 2; kind++) {
        void *buf = kind ? (void *)d : (void *)h;
        for (int it = 0; it < 6; it++) {
            rcoll_barrier(k->comm);
            double t0 = now_s();
            if (!ran(k, rcoll_allreduce(RCOLL_IN_PLACE, buf, count, RCOLL_FLOAT32, RCOLL_SUM,
                                        k->comm), "allreduce 64 MiB"))
                break;
            double t = now_s() - t0;
            if (it && t < best[kind]) best[kind] = t;
        }
    }
    if (k->rank == 0)
        printf("allreduce 64 MiB float32 sum, %d ranks on one GPU, in place, best of 5: host "
               "buffers %.2f ms, device buffers (staged) %.2f ms\n", k->n, best[0] * 1e3,
               best[1] * 1e3);
    cu->cuMemFree(d);
    free(h);
}

/* Two calls in flight on device buffers: nonblocking, waited for in reverse order, or
 * (grouped) blocking calls inside rcoll_group_start/end. */
static void two_in_flight(rk_t *k, size_t cnt, int grouped)
{
    const rcoll_cu_api_t *cu = k->cu;
    int me = k->rank, n = k->n;
    CUdeviceptr dx = 0;
    if (!cu_ok(k, cu->cuMemAlloc(&dx, k->cap * sizeof(elem_t)), "cuMemAlloc")) return;
    elem_t *hx = malloc(k->cap * sizeof(elem_t));
    poison(k->hs, k->cap), poison(k->hr, k->cap), poison(hx, k->cap);
    for (size_t i = 0; i < cnt; i++) k->hs[i] = val(me, i, 50);
    for (size_t i = 0; i < cnt; i++) hx[(size_t)me * cnt + i] = val(me, i, 51);
    rcoll_request_t r1 = NULL, r2 = NULL;
    int ok = hx && put(k) && cu_ok(k, cu->cuMemcpyHtoD(dx, hx, k->cap * sizeof(elem_t)), "HtoD");
    if (ok && grouped) {
        rcoll_group_start();
        ok = ran(k, rcoll_allreduce((void *)k->ds, (void *)k->dr, cnt, RCOLL_INT32, RCOLL_SUM,
                                    k->comm), "grouped allreduce");
        ok &= ran(k, rcoll_allgather(RCOLL_IN_PLACE, (void *)dx, cnt, RCOLL_INT32, k->comm),
                  "grouped allgather");
        ok &= ran(k, rcoll_group_end(), "rcoll_group_end");
    } else if (ok) {
        ok = ran(k, rcoll_iallreduce((void *)k->ds, (void *)k->dr, cnt, RCOLL_INT32, RCOLL_SUM,
                                     k->comm, &r1), "iallreduce") &&
             ran(k, rcoll_iallgather(RCOLL_IN_PLACE, (void *)dx, cnt, RCOLL_INT32, k->comm,
                                     &r2), "iallgather") &&
             ran(k, rcoll_wait(&r2), "wait iallgather") &&
             ran(k, rcoll_wait(&r1), "wait iallreduce");
    }
    if (ok && get(k, k->dr, k->hr) && get(k, dx, hx)) {
        EXPECT(k, "iallreduce", k->hr, cnt, n * (n - 1) / 2 * 1000 + n * (elem_t)(i * 3 + 50));
        EXPECT(k, "iallgather in place", hx, cnt * (size_t)n, val((int)(i / cnt), i % cnt, 51));
    }
    free(hx);
    cu->cuMemFree(dx);
}

/* Managed memory: staged the same way; the host reads the result directly. */
static void managed(rk_t *k)
{
    const rcoll_cu_api_t *cu = k->cu;
    CUdeviceptr m = 0;
    size_t count = 1000;
    if (!cu_ok(k, cu->cuMemAllocManaged(&m, (count + GUARD) * sizeof(elem_t),
                                        CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged"))
        return;
    elem_t *p = (elem_t *)m;
    for (size_t i = 0; i < count + GUARD; i++) p[i] = i < count ? val(k->rank, i, 30) : POISON;
    if (ran(k, rcoll_allreduce(RCOLL_IN_PLACE, p, count, RCOLL_INT32, RCOLL_SUM, k->comm),
            "managed allreduce") && cu_ok(k, cu->cuCtxSynchronize(), "cuCtxSynchronize"))
        EXPECT(k, "managed allreduce", p, count,
               k->n * (k->n - 1) / 2 * 1000 + k->n * (elem_t)(i * 3 + 30));
    cu->cuMemFree(m);
}

/* One rank process: the driver, the primary context of device 0, then the communicator. */
/* With RCOLL_CUDA_IPC=1: an input written by an asynchronous memset on the legacy default
 * stream just before the call is what the all-reduce reads (its stream follows that one). */
static void ordered(rk_t *k, size_t cnt)
{
    const rcoll_cu_api_t *cu = k->cu;
    int n = k->n;
    poison(k->hr, k->cap);
    if (!cu_ok(k, cu->cuMemcpyHtoD(k->dr, k->hr, k->cap * sizeof(elem_t)), "HtoD recv") ||
        !cu_ok(k, cu->cuMemsetD32Async(k->ds, (unsigned)(7 + k->rank), cnt, NULL),
               "cuMemsetD32Async") ||
        !ran(k, rcoll_allreduce((void *)k->ds, (void *)k->dr, cnt, RCOLL_INT32, RCOLL_SUM,
                                k->comm), "ordered allreduce") ||
        !get(k, k->dr, k->hr))
        return;
    EXPECT(k, "allreduce after a legacy-stream memset", k->hr, cnt,
           7 * n + n * (n - 1) / 2);
}

/* The driver, GPU 0's primary context made current, the communicator: 0, or the exit code
 * (SKIP_CODE with the reason where there is no usable driver or device). */
static int rank_up(rk_t *k, const rcoll_unique_id_t *id, CUdevice *dev, CUcontext *ctx)
{
    if (rcoll_cu_load(lib) != RCOLL_OK) {
        fprintf(stderr, "rank %d: SKIP: %s\n", k->rank, rcoll_err_get());
        return SKIP_CODE;
    }
    const rcoll_cu_api_t *cu = k->cu = rcoll_cu;
    int ndev = 0;
    if (cu->cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev == 0) {
        fprintf(stderr, "rank %d: SKIP: the CUDA driver sees no device\n", k->rank);
        return SKIP_CODE;
    }
    if (!cu_ok(k, cu->cuDeviceGet(dev, 0), "cuDeviceGet") ||
        !cu_ok(k, cu->cuDevicePrimaryCtxRetain(ctx, *dev), "cuDevicePrimaryCtxRetain") ||
        !cu_ok(k, cu->cuCtxSetCurrent(*ctx), "cuCtxSetCurrent"))
        return 1;
    if (rcoll_comm_init_rank(k->n, id, k->rank, &k->comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: init: %s\n", k->rank, rcoll_last_init_error());
        return 1;
    }
    return 0;
}

/* Misuse of the one-kernel all-reduce (RCOLL_CUDA_IPC=1, RCOLL_CUDA_IPC_ONESHOT_SHARED=1),
 * after one good call: arg 1, rank 1 calls it with another count (every rank is refused with
 * RCOLL_ERR_INVALID_USAGE naming both calls, and the next CUDA IPC call is refused too); arg
 * 2, rank 2 never calls it (the others get RCOLL_ERR_TIMEOUT naming rank 2, within
 * RCOLL_TIMEOUT and well before the test's own limit). */
static int rank_oneshot_misuse(const rcoll_unique_id_t *id, int rank, int nranks, void *arg)
{
    long mode = (long)(intptr_t)arg;
    rk_t k = {.rank = rank, .n = nranks};
    CUdevice dev;
    CUcontext ctx;
    int up = rank_up(&k, id, &dev, &ctx);
    if (up) return up;
    const rcoll_cu_api_t *cu = k.cu;
    CUdeviceptr d = 0;
    elem_t h[16];
    if (!cu_ok(&k, cu->cuMemAlloc(&d, 256 * sizeof(elem_t)), "cuMemAlloc")) goto out;
    /* Operation #1, an all-gather over CUDA IPC: rcoll's own collectives inside it (the
     * set-up, the barriers) are steps of it, so the sentences below number the all-reduces
     * #2 and #3. */
    for (int i = 0; i < 4; i++) h[i] = 100 * rank + i;
    if (!cu_ok(&k, cu->cuMemcpyHtoD(d + 512, h, 4 * sizeof(elem_t)), "HtoD") ||
        !ran(&k, rcoll_allgather((void *)(d + 512), (void *)(d + 640), 4, RCOLL_INT32, k.comm),
             "allgather") ||
        !cu_ok(&k, cu->cuMemcpyDtoH(h, d + 640, 16 * sizeof(elem_t)), "DtoH"))
        goto out;
    for (int i = 0; i < 4 * nranks && i < 16; i++)
        if (h[i] != 100 * (i / 4) + i % 4) {
            fail(&k, "element %ld: %ld", "allgather", i, h[i]);
            goto out;
        }
    for (int i = 0; i < 16; i++) h[i] = rank + i;
    if (!cu_ok(&k, cu->cuMemcpyHtoD(d, h, sizeof(h)), "HtoD") ||
        !ran(&k, rcoll_allreduce((void *)d, (void *)(d + 128), 16, RCOLL_INT32, RCOLL_SUM,
                                 k.comm), "first allreduce") ||
        !cu_ok(&k, cu->cuMemcpyDtoH(h, d + 128, sizeof(h)), "DtoH"))
        goto out;
    for (int i = 0; i < 16; i++)
        if (h[i] != nranks * (nranks - 1) / 2 + nranks * i) {
            fail(&k, "element %ld: %ld", "first allreduce", i, h[i]);
            goto out;
        }
    if (mode == 2 && rank == 2) goto out; /* never joins: destroys its communicator */
    /* pieced (RCOLL_CUDA_IPC_TWOSHOT=0): found at a step's device meet, the steps named so */
    const char *two = getenv("RCOLL_CUDA_IPC_TWOSHOT");
    int pieced = two && !strcmp(two, "0");
    double t0 = now_s();
    size_t cnt = mode == 1 && rank == 1 ? 8 : 16;
    rcoll_status_t st =
        rcoll_allreduce((void *)d, (void *)(d + 128), cnt, RCOLL_INT32, RCOLL_SUM, k.comm);
    double took = now_s() - t0;
    const char *e = rcoll_comm_last_error(k.comm);
    fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, rcoll_status_string(st), took, e);
    if (mode == 1) {
        char want[96];
        snprintf(want, sizeof(want), "called allreduce(count=%d, int32, sum) as %soperation #3 "
                 "while", rank == 1 ? 16 : 8, pieced ? "a step of " : "");
        if (st != RCOLL_ERR_INVALID_USAGE || !strstr(e, want) ||
            !strstr(e, pieced ? "CUDA IPC allreduce" : "one-kernel"))
            fail(&k, "%ld %ld", "a different count is not named", (long)st, 0);
        st = rcoll_allreduce((void *)d, (void *)(d + 128), 16, RCOLL_INT32, RCOLL_SUM, k.comm);
        if (st != RCOLL_ERR_INVALID_USAGE ||
            !strstr(rcoll_comm_last_error(k.comm), "an earlier one-kernel all-reduce"))
            fail(&k, "%ld %ld", "the call after a failed one-kernel all-reduce is not refused",
                 (long)st, 0);
    } else if (st != RCOLL_ERR_TIMEOUT ||
               !strstr(e, pieced ? "rank 2 did not join a step of operation #3 within"
                                 : "rank 2 did not join operation #3 within") ||
               !strstr(e, pieced ? "its last one-kernel all-reduce was a step of operation #2"
                                 : "its last one-kernel all-reduce was operation #2") ||
               took > 30) {
        fail(&k, "status %ld after %ld s", "a rank that never joins is not named", (long)st,
             (long)took);
    }
out:
    if (d) cu->cuMemFree(d);
    if (rcoll_comm_abort(k.comm) != RCOLL_OK) k.fails++;
    abort_keeps_workspace(&k);
    cu->cuDevicePrimaryCtxRelease(dev);
    return k.fails ? 1 : 0;
}

/* The stream-ordered all-reduce as one kernel on the caller's stream (RCOLL_CUDA_IPC=1,
 * RCOLL_CUDA_IPC_ONESHOT_SHARED=1).  Mode 0: NCALLS calls alternating between two streams of
 * the caller's (more than the ring of RCOLL_GPU_IPC_RING in flight), one-shot and two-shot
 * sizes, some in place, nothing synchronized in between; then every result checked.  Mode
 * 1: rank 1 enqueues another count as its third call, and every rank two calls more: after
 * synchronizing, the next call fails on every rank (INVALID_USAGE) naming both calls, and
 * the calls behind it stopped at once.  Mode 2: rank 2 never enqueues its second call: the
 * others' next call names rank 2 (TIMEOUT after RCOLL_TIMEOUT = 3 s), and the two calls
 * queued behind stop at once (the streams drain in about 3 s, not 9). */
#define NCALLS 24
static int rank_stream_oneshot(const rcoll_unique_id_t *id, int rank, int nranks, void *arg)
{
    long mode = (long)(intptr_t)arg;
    static const size_t counts[] = {1, 7, 1000, 4096, 16384, 40000}; /* 40000: two-shot */
    rk_t k = {.rank = rank, .n = nranks};
    CUdevice dev;
    CUcontext ctx;
    int up = rank_up(&k, id, &dev, &ctx);
    if (up) return up;
    const rcoll_cu_api_t *cu = k.cu;
    const size_t maxc = 40000, per = 2 * maxc * sizeof(elem_t);
    CUdeviceptr d = 0;
    CUstream st[2] = {NULL, NULL};
    elem_t *h = malloc(maxc * sizeof(elem_t));
    if (!h) goto out;
    if (!cu_ok(&k, cu->cuMemAlloc(&d, NCALLS * per), "cuMemAlloc") ||
        !cu_ok(&k, cu->cuStreamCreate(&st[0], 0), "cuStreamCreate") ||
        !cu_ok(&k, cu->cuStreamCreate(&st[1], 0), "cuStreamCreate"))
        goto out;
    int calls = mode ? 5 : NCALLS;
    for (int c = 0; c < calls; c++) { /* inputs (in-place calls: the receive buffer) */
        size_t cnt = mode ? 16 : counts[c % 6];
        for (size_t i = 0; i < cnt; i++) h[i] = val(rank, i, c);
        CUdeviceptr in = d + (size_t)c * per + (c % 4 == 3 ? maxc * sizeof(elem_t) : 0);
        if (!cu_ok(&k, cu->cuMemcpyHtoD(in, h, cnt * sizeof(elem_t)), "HtoD")) goto out;
    }
    double t0 = now_s();
    for (int c = 0; c < calls; c++) {
        size_t cnt = mode ? 16 : counts[c % 6];
        if (mode == 1 && rank == 1 && c == 2) cnt = 8;
        if (mode == 2 && rank == 2 && c == 1) break; /* never joins */
        CUdeviceptr S = d + (size_t)c * per, R = S + maxc * sizeof(elem_t);
        rcoll_status_t r = rcoll_allreduce_stream(c % 4 == 3 ? RCOLL_IN_PLACE : (void *)S,
                                                  (void *)R, cnt, RCOLL_INT32, RCOLL_SUM,
                                                  k.comm, st[c % 2]);
        if (!ran(&k, r, "rcoll_allreduce_stream")) goto out;
    }
    /* a blocking call before the streams have run their kernels: allowed (no host function
     * holds the communicator) */
    if (mode == 0 && !ran(&k, rcoll_barrier(k.comm), "barrier before the streams ran")) goto out;
    if (!cu_ok(&k, cu->cuStreamSynchronize(st[0]), "cuStreamSynchronize") ||
        !cu_ok(&k, cu->cuStreamSynchronize(st[1]), "cuStreamSynchronize"))
        goto out;
    double took = now_s() - t0;
    if (mode == 0) {
        for (int c = 0; c < calls; c++) {
            size_t cnt = counts[c % 6];
            if (!cu_ok(&k, cu->cuMemcpyDtoH(h, d + (size_t)c * per + maxc * sizeof(elem_t),
                                            cnt * sizeof(elem_t)), "DtoH"))
                goto out;
            EXPECT_G(&k, "stream-ordered one-kernel all-reduce", h, cnt, 0,
                     nranks * (nranks - 1) / 2 * 1000 + nranks * ((elem_t)i * 3 + c));
        }
        /* and a blocking call after them works */
        if (!ran(&k, rcoll_barrier(k.comm), "barrier after the stream calls")) goto out;
    } else if (!(mode == 2 && rank == 2)) {
        rcoll_status_t r = rcoll_barrier(k.comm);
        const char *e = rcoll_comm_last_error(k.comm);
        fprintf(stderr, "rank %d: streams drained in %.1f s; next call: %s: %s\n", rank, took,
                rcoll_status_string(r), e);
        /* the peer's call is announced no more (later calls replaced it): its digest */
        char want[160];
        snprintf(want, sizeof(want), "rank %d's one-kernel all-reduce as operation #3 was "
                 "another call (signature digest ", rank == 1 ? 0 : 1);
        if (!strstr(e, want) || !strstr(e, rank == 1 ? "this rank's allreduce(count=8, int32, "
                                        "sum)" : "this rank's allreduce(count=16, int32, sum)"))
            want[0] = '\0';
        if (r != RCOLL_ERR_INVALID_USAGE || !strstr(e, "failed in stream order") ||
            (mode == 1 && !want[0]) ||
            (mode == 2 && !strstr(e, "rank 2 did not join operation #2 within")))
            fail(&k, "%ld %ld", "the failed stream-ordered call is not named", (long)r, 0);
        if (took > (mode == 2 ? 6 : 2))
            fail(&k, "%ld s (mode %ld)", "the calls behind the failed one did not stop at once",
                 (long)took, mode);
    }
out:
    if (st[0]) cu->cuStreamSynchronize(st[0]);
    if (st[1]) cu->cuStreamSynchronize(st[1]);
    /* rank 2 of mode 2 aborts while the others' kernels still wait for it */
    if ((mode ? rcoll_comm_abort(k.comm) : rcoll_comm_destroy(k.comm)) != RCOLL_OK) k.fails++;
    abort_keeps_workspace(&k);
    if (st[0]) cu->cuStreamDestroy(st[0]);
    if (st[1]) cu->cuStreamDestroy(st[1]);
    if (d) cu->cuMemFree(d);
    free(h);
    cu->cuDevicePrimaryCtxRelease(dev);
    return k.fails ? 1 : 0;
}

static int rank_main(const rcoll_unique_id_t *id, int rank, int nranks, void *arg)
{
    int timing = arg != NULL;
    rk_t k = {.rank = rank, .n = nranks};
    CUdevice dev;
    CUcontext ctx;
    int up = rank_up(&k, id, &dev, &ctx);
    if (up) return up;
    const rcoll_cu_api_t *cu = k.cu;
    if (timing) {
        cost(&k);
    } else {
        k.cap = (size_t)nranks * 5000 + 4 * 200 + 64 + GUARD;
        k.hs = malloc(k.cap * sizeof(elem_t));
        k.hr = malloc(k.cap * sizeof(elem_t));
        if (k.hs && k.hr && cu_ok(&k, cu->cuMemAlloc(&k.ds, k.cap * sizeof(elem_t)), "cuMemAlloc") &&
            cu_ok(&k, cu->cuMemAlloc(&k.dr, k.cap * sizeof(elem_t)), "cuMemAlloc")) {
            blocks(&k, 1);
            blocks(&k, 37);
            blocks(&k, 5000);
            uneven(&k);
            two_in_flight(&k, 1000, 0);
            two_in_flight(&k, 1000, 1);
            managed(&k);
            if (getenv("RCOLL_CUDA_IPC")) ordered(&k, 5000);
            CUcontext now = NULL;
            cu->cuCtxGetCurrent(&now);
            if (now != ctx) fail(&k, "%ld %ld", "the caller's context is not current after", 0, 0);
        }
        if (k.ds) cu->cuMemFree(k.ds);
        if (k.dr) cu->cuMemFree(k.dr);
        free(k.hs);
        free(k.hr);
    }
    if (rcoll_comm_destroy(k.comm) != RCOLL_OK) k.fails++;
    cu->cuDevicePrimaryCtxRelease(dev);
    return k.fails ? 1 : 0;
}

static void restore_timeout(const char *outer)
{
    if (outer)
        setenv("RCOLL_TIMEOUT", outer, 1);
    else
        unsetenv("RCOLL_TIMEOUT");
}

int main(void)
{
    check_set_note(NULL);
    /* RCOLL_TEST_SCRIPTED_GPU=1: run against the scripted driver library that RCOLL_CUDA_LIB
     * names (tests/common/cuda_script_lib.c; the mp suite's stage_scripted), no GPU needed:
     * it checks rcoll's logic, not a GPU. */
    const char *scripted = getenv("RCOLL_TEST_SCRIPTED_GPU");
    if (!(scripted && !strcmp(scripted, "1")) && access("/dev/nvidia0", F_OK) != 0) {
        printf("SKIP: no NVIDIA GPU here (/dev/nvidia0 missing)\n");
        return 77;
    }
    /* The driver is not even opened here: this process forks the ranks, and CUDA does not
     * survive a fork.  A rank that cannot load it exits 77 with the reason. */
    lib = getenv("RCOLL_CUDA_LIB") ? getenv("RCOLL_CUDA_LIB") : "libcuda.so.1";
    /* The caller's RCOLL_TIMEOUT (tests/gpu/run.sh derives one from its budget) is put back
     * after the cases that need 3 s. */
    char *outer_timeout = getenv("RCOLL_TIMEOUT") ? strdup(getenv("RCOLL_TIMEOUT")) : NULL;
    int skipped = 0;
    for (int n = 2; n <= 4; n++) {
        mp_result_t res;
        int bad = mp_run_raw(n, rank_main, NULL, 300, &res);
        int skips = 0;
        for (int r = 0; r < n; r++) skips += res.codes[r] == SKIP_CODE;
        if (skips == n) {
            skipped = 1;
            break;
        }
        CHECK(bad == 0, "%d ranks on one GPU: every blocking collective with device buffers "
              "(exit codes %d %d %d %d)", n, res.codes[0], res.codes[1], res.codes[2],
              res.codes[3]);
    }
    if (skipped) {
        printf("SKIP: the ranks could not use the CUDA driver (see above)\n");
        return check_passed || check_failed ? check_summary() : 77;
    }
    /* The same matrix over CUDA IPC: the collectives it covers run on the GPU, the others
     * (v-forms, groups) are staged as before; plus the ordering with the legacy stream. */
    setenv("RCOLL_CUDA_IPC", "1", 1);
    for (int n = 2; n <= 4; n++) {
        mp_result_t res;
        int bad = mp_run_raw(n, rank_main, NULL, 300, &res);
        CHECK(bad == 0, "%d ranks on one GPU, RCOLL_CUDA_IPC=1: every blocking collective with "
              "device buffers (exit codes %d %d %d %d)", n, res.codes[0], res.codes[1],
              res.codes[2], res.codes[3]);
    }
    /* Again with the one-kernel all-reduce on the shared GPU (its all-reduces of up to 64 KiB),
     * then its misuse: a different count, a rank that never joins. */
    setenv("RCOLL_CUDA_IPC_ONESHOT_SHARED", "1", 1);
    for (int n = 2; n <= 4; n++) {
        mp_result_t res;
        int bad = mp_run_raw(n, rank_main, NULL, 300, &res);
        CHECK(bad == 0, "%d ranks on one GPU, the one-kernel all-reduce: every blocking "
              "collective with device buffers (exit codes %d %d %d %d)", n, res.codes[0],
              res.codes[1], res.codes[2], res.codes[3]);
    }
    mp_result_t mres;
    CHECK(mp_run_raw(3, rank_oneshot_misuse, (void *)1, 120, &mres) == 0,
          "one-kernel all-reduce, another count on rank 1: named on every rank (exit codes %d "
          "%d %d)", mres.codes[0], mres.codes[1], mres.codes[2]);
    setenv("RCOLL_CUDA_IPC_ONESHOT", "0", 1); /* the same through the two-shot */
    CHECK(mp_run_raw(3, rank_oneshot_misuse, (void *)1, 120, &mres) == 0,
          "two-shot all-reduce, another count on rank 1: named on every rank (exit codes %d "
          "%d %d)", mres.codes[0], mres.codes[1], mres.codes[2]);
    unsetenv("RCOLL_CUDA_IPC_ONESHOT");
    setenv("RCOLL_TIMEOUT", "3", 1);
    CHECK(mp_run_raw(3, rank_oneshot_misuse, (void *)2, 120, &mres) == 0,
          "one-kernel all-reduce, rank 2 never joins: named within the deadline (exit codes %d "
          "%d %d)", mres.codes[0], mres.codes[1], mres.codes[2]);
    restore_timeout(outer_timeout);
    /* The same in pieces (no one-kernel form fits), whose steps meet on device flags in the
     * IPC stream's order instead of host barriers: a different count named at the first
     * meet, a rank that never joins named within the deadline, no hang. */
    setenv("RCOLL_CUDA_IPC_ONESHOT", "8", 1);
    setenv("RCOLL_CUDA_IPC_TWOSHOT", "0", 1);
    CHECK(mp_run_raw(3, rank_oneshot_misuse, (void *)1, 120, &mres) == 0,
          "pieced all-reduce, another count on rank 1: named on every rank at a device meet "
          "(exit codes %d %d %d)", mres.codes[0], mres.codes[1], mres.codes[2]);
    setenv("RCOLL_TIMEOUT", "3", 1);
    CHECK(mp_run_raw(3, rank_oneshot_misuse, (void *)2, 120, &mres) == 0,
          "pieced all-reduce, rank 2 never joins: named within the deadline at a device meet "
          "(exit codes %d %d %d)", mres.codes[0], mres.codes[1], mres.codes[2]);
    restore_timeout(outer_timeout);
    unsetenv("RCOLL_CUDA_IPC_ONESHOT");
    unsetenv("RCOLL_CUDA_IPC_TWOSHOT");
    /* In the caller's stream order: the matrix on 2-4 ranks, then the misuses. */
    for (int n = 2; n <= 4; n++)
        CHECK(mp_run_raw(n, rank_stream_oneshot, (void *)0, 120, &mres) == 0,
              "%d ranks, the stream-ordered one-kernel all-reduce on two streams (exit codes "
              "%d %d %d %d)", n, mres.codes[0], mres.codes[1], mres.codes[2], mres.codes[3]);
    CHECK(mp_run_raw(3, rank_stream_oneshot, (void *)1, 120, &mres) == 0,
          "stream-ordered one-kernel all-reduce, another count on rank 1: named at the next "
          "call (exit codes %d %d %d)", mres.codes[0], mres.codes[1], mres.codes[2]);
    setenv("RCOLL_TIMEOUT", "3", 1);
    CHECK(mp_run_raw(3, rank_stream_oneshot, (void *)2, 120, &mres) == 0,
          "stream-ordered one-kernel all-reduce, rank 2 never joins: named, the calls behind "
          "stopped (exit codes %d %d %d)", mres.codes[0], mres.codes[1], mres.codes[2]);
    restore_timeout(outer_timeout);
    unsetenv("RCOLL_CUDA_IPC_ONESHOT_SHARED");
    unsetenv("RCOLL_CUDA_IPC");
    mp_result_t res;
    CHECK(mp_run_raw(2, rank_main, (void *)1, 300, &res) == 0, "timing run");
    free(outer_timeout);
    return check_summary();
}
