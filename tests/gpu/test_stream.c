/*
 * test_stream.c - the stream-ordered collectives on a real GPU (suite gpu; tests/gpu/run.sh):
 * 2, 3 and 4 processes sharing the one GPU, each with a non-blocking stream of its own
 * (cuStreamCreate).  On that stream, with no host synchronization in between: the inputs
 * written by cuMemsetD32Async and a real kernel (rcoll's reduction kernel, a + b), the
 * collective (rcoll_<op>_stream on cuMemAlloc buffers), then cuMemcpyDtoHAsync of the
 * result into pinned memory; one cuStreamSynchronize, then the results are checked against
 * a reference computed here.  Several calls in flight at once (all-reduce, broadcast,
 * all-gather, reduce-scatter, all-to-all, a barrier), host buffers in stream order, and a
 * stream under graph capture (refused, and the capture still ends cleanly).
 * Each rank loads the driver itself (CUDA must not be started before fork); only rcoll's
 * driver table is used.  Exit 77 with the reason where there is no GPU or usable driver.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cuda/cuda_drv.h"
#include "cuda/kernels.h"
#include "mp.h"
#include "rcoll.h"
#include "util/status.h"

#define SKIP_CODE 77
typedef int32_t elem_t;

static const char *lib;

typedef struct {
    rcoll_comm_t comm;
    int rank, n, fails;
    const rcoll_cu_api_t *cu;
    CUstream s;
} rk_t;

static int cu_ok(rk_t *k, CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return 1;
    char text[160];
    fprintf(stderr, "rank %d: %s: %s\n", k->rank, what, rcoll_cu_strerror(r, text, sizeof(text)));
    k->fails++;
    return 0;
}
static int ran(rk_t *k, rcoll_status_t st, const char *what)
{
    if (st == RCOLL_OK) return 1;
    fprintf(stderr, "rank %d/%d %s: %s: %s\n", k->rank, k->n, what, rcoll_status_string(st),
            rcoll_comm_last_error(k->comm));
    k->fails++;
    return 0;
}
static void expect(rk_t *k, const char *what, const elem_t *got, size_t count,
                   elem_t (*want)(rk_t *, size_t, size_t), size_t cnt)
{
    for (size_t i = 0; i < count; i++)
        if (got[i] != want(k, i, cnt)) {
            fprintf(stderr, "rank %d/%d %s: [%zu] = %d, want %d\n", k->rank, k->n, what, i,
                    (int)got[i], (int)want(k, i, cnt));
            k->fails++;
            return;
        }
}

/* Inputs: rank r's value at i is 11 x (r + 1) (memset 1 x, memset 10 x, a kernel adds). */
static elem_t in_of(int r) { return 11 * (r + 1); }
static elem_t w_sum(rk_t *k, size_t i, size_t cnt)
{
    (void)i, (void)cnt;
    return 11 * k->n * (k->n + 1) / 2;
}
static elem_t w_bcast(rk_t *k, size_t i, size_t cnt)
{
    (void)i, (void)cnt;
    return in_of(k->n - 1);
}
static elem_t w_gather(rk_t *k, size_t i, size_t cnt)
{
    (void)k;
    return in_of((int)(i / cnt));
}
static elem_t w_a2a(rk_t *k, size_t i, size_t cnt)
{
    /* rank r sends block j as in_of(r) + j: this rank gets in_of(i / cnt) + rank */
    return in_of((int)(i / cnt)) + k->rank;
}

/* Write the inputs on the stream: memset, memset, kernel. */
static int inputs(rk_t *k, CUdeviceptr a, CUdeviceptr b, size_t count)
{
    const rcoll_cu_api_t *cu = k->cu;
    unsigned r1 = (unsigned)(k->rank + 1);
    if (!cu_ok(k, cu->cuMemsetD32Async(a, r1, count, k->s), "cuMemsetD32Async") ||
        !cu_ok(k, cu->cuMemsetD32Async(b, 10 * r1, count, k->s), "cuMemsetD32Async"))
        return 0;
    rcoll_status_t st = rcoll_cuda_reduce(a, 0, a, b, count, RCOLL_INT32, RCOLL_SUM, 1, k->s);
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: kernel: %s\n", k->rank, rcoll_err_get());
        k->fails++;
        return 0;
    }
    return 1;
}

static void in_order(rk_t *k, size_t cnt)
{
    const rcoll_cu_api_t *cu = k->cu;
    size_t N = (size_t)k->n, big = cnt * N, B = big * sizeof(elem_t);
    CUdeviceptr a = 0, b = 0, ar = 0, bc = 0, ag = 0, rs = 0, a2s = 0, a2r = 0;
    elem_t *h = NULL, *host = malloc(cnt * sizeof(elem_t));
    if (!cu_ok(k, cu->cuMemAlloc(&a, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAlloc(&b, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAlloc(&ar, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAlloc(&bc, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAlloc(&ag, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAlloc(&rs, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAlloc(&a2s, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAlloc(&a2r, B), "cuMemAlloc") ||
        !cu_ok(k, cu->cuMemAllocHost((void **)&h, 5 * B), "cuMemAllocHost") || !host)
        goto out;
    for (size_t i = 0; i < cnt; i++) host[i] = k->rank + 1;
    /* a = 11 (rank + 1) over nranks x cnt elements; the all-to-all's blocks get + j */
    if (!inputs(k, a, b, big)) goto out;
    for (size_t j = 0; j < N; j++)
        if (!cu_ok(k, cu->cuMemsetD32Async(b + j * cnt * sizeof(elem_t), (unsigned)j, cnt, k->s),
                   "cuMemsetD32Async"))
            goto out;
    if (rcoll_cuda_reduce(a2s, 0, a, b, big, RCOLL_INT32, RCOLL_SUM, 1, k->s) != RCOLL_OK) {
        fprintf(stderr, "rank %d: kernel: %s\n", k->rank, rcoll_err_get());
        k->fails++;
        goto out;
    }
    /* bcast's root buffer */
    if (k->rank == k->n - 1 &&
        !cu_ok(k, cu->cuMemsetD32Async(bc, (unsigned)in_of(k->rank), cnt, k->s), "memset"))
        goto out;
    /* the collectives, all in flight, no host synchronization since the inputs */
    rcoll_comm_t c = k->comm;
    void *s = (void *)k->s;
    if (!ran(k, rcoll_allreduce_stream((void *)a, (void *)ar, cnt, RCOLL_INT32, RCOLL_SUM, c, s),
             "allreduce_stream") ||
        !ran(k, rcoll_bcast_stream((void *)bc, cnt, RCOLL_INT32, k->n - 1, c, s),
             "bcast_stream") ||
        !ran(k, rcoll_allgather_stream((void *)a, (void *)ag, cnt, RCOLL_INT32, c, s),
             "allgather_stream") ||
        !ran(k, rcoll_reduce_scatter_stream((void *)a, (void *)rs, cnt, RCOLL_INT32, RCOLL_SUM,
                                            c, s), "reduce_scatter_stream") ||
        !ran(k, rcoll_alltoall_stream((void *)a2s, (void *)a2r, cnt, RCOLL_INT32, c, s),
             "alltoall_stream") ||
        !ran(k, rcoll_barrier_stream(c, s), "barrier_stream") ||
        !ran(k, rcoll_allreduce_stream(RCOLL_IN_PLACE, host, cnt, RCOLL_INT32, RCOLL_SUM, c, s),
             "allreduce_stream on host memory"))
        goto sync;
    /* the results back, on the same stream */
    elem_t *h_ar = h, *h_bc = h + big, *h_ag = h + 2 * big, *h_rs = h + 3 * big,
           *h_a2 = h + 4 * big;
    if (!cu_ok(k, cu->cuMemcpyDtoHAsync(h_ar, ar, cnt * sizeof(elem_t), k->s), "DtoHAsync") ||
        !cu_ok(k, cu->cuMemcpyDtoHAsync(h_bc, bc, cnt * sizeof(elem_t), k->s), "DtoHAsync") ||
        !cu_ok(k, cu->cuMemcpyDtoHAsync(h_ag, ag, B, k->s), "DtoHAsync") ||
        !cu_ok(k, cu->cuMemcpyDtoHAsync(h_rs, rs, cnt * sizeof(elem_t), k->s), "DtoHAsync") ||
        !cu_ok(k, cu->cuMemcpyDtoHAsync(h_a2, a2r, B, k->s), "DtoHAsync"))
        goto sync;
    if (!cu_ok(k, cu->cuStreamSynchronize(k->s), "cuStreamSynchronize")) goto out;
    expect(k, "allreduce", h_ar, cnt, w_sum, cnt);
    expect(k, "bcast", h_bc, cnt, w_bcast, cnt);
    expect(k, "allgather", h_ag, big, w_gather, cnt);
    expect(k, "reduce_scatter", h_rs, cnt, w_sum, cnt);
    expect(k, "alltoall", h_a2, big, w_a2a, cnt);
    for (size_t i = 0; i < cnt; i++)
        if (host[i] != k->n * (k->n + 1) / 2) {
            fprintf(stderr, "rank %d: host buffer [%zu] = %d\n", k->rank, i, (int)host[i]);
            k->fails++;
            break;
        }
    goto out;
sync:
    cu->cuStreamSynchronize(k->s);
out:
    if (h) cu->cuMemFreeHost(h);
    free(host);
    CUdeviceptr all[] = {a, b, ar, bc, ag, rs, a2s, a2r};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]) cu->cuMemFree(all[i]);
}

/* A capturing stream is refused, and the capture is not broken by the attempt. */
static void capture(rk_t *k)
{
    const rcoll_cu_api_t *cu = k->cu;
    CUdeviceptr d = 0;
    CUgraph g = NULL;
    if (!cu_ok(k, cu->cuMemAlloc(&d, 256), "cuMemAlloc")) return;
    if (cu_ok(k, cu->cuStreamBeginCapture(k->s, CU_STREAM_CAPTURE_MODE_RELAXED),
              "cuStreamBeginCapture")) {
        cu->cuMemsetD32Async(d, 1, 64, k->s);
        rcoll_status_t st = rcoll_allreduce_stream(RCOLL_IN_PLACE, (void *)d, 64, RCOLL_INT32,
                                                   RCOLL_SUM, k->comm, (void *)k->s);
        if (st != RCOLL_ERR_UNSUPPORTED ||
            !strstr(rcoll_comm_last_error(k->comm), "cannot be captured")) {
            fprintf(stderr, "rank %d: capture not refused: %s: %s\n", k->rank,
                    rcoll_status_string(st), rcoll_comm_last_error(k->comm));
            k->fails++;
        }
        if (cu_ok(k, cu->cuStreamEndCapture(k->s, &g), "cuStreamEndCapture (after the "
                                                         "refusal)") && g)
            cu->cuGraphDestroy(g);
    }
    cu->cuMemFree(d);
}

static int rank_main(const rcoll_unique_id_t *id, int rank, int nranks, void *arg)
{
    (void)arg;
    rk_t k = {.rank = rank, .n = nranks};
    if (rcoll_cu_load(lib) != RCOLL_OK) {
        fprintf(stderr, "rank %d: SKIP: %s\n", rank, rcoll_err_get());
        return SKIP_CODE;
    }
    const rcoll_cu_api_t *cu = k.cu = rcoll_cu;
    CUdevice dev;
    CUcontext ctx;
    int ndev = 0;
    if (cu->cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev == 0) {
        fprintf(stderr, "rank %d: SKIP: the CUDA driver sees no device\n", rank);
        return SKIP_CODE;
    }
    if (!cu_ok(&k, cu->cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !cu_ok(&k, cu->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
        !cu_ok(&k, cu->cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
        !cu_ok(&k, cu->cuStreamCreate(&k.s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
        return 1;
    if (rcoll_comm_init_rank(nranks, id, rank, &k.comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    in_order(&k, 1);
    in_order(&k, 37);
    in_order(&k, 100000);
    in_order(&k, 37); /* reusing the jobs' areas */
    capture(&k);
    if (rcoll_comm_destroy(k.comm) != RCOLL_OK) k.fails++;
    cu->cuStreamDestroy(k.s);
    cu->cuDevicePrimaryCtxRelease(dev);
    return k.fails ? 1 : 0;
}

int main(void)
{
    check_set_note(NULL);
    if (access("/dev/nvidia0", F_OK) != 0) {
        printf("SKIP: no NVIDIA GPU here (/dev/nvidia0 missing)\n");
        return 77;
    }
    lib = getenv("RCOLL_CUDA_LIB") ? getenv("RCOLL_CUDA_LIB") : "libcuda.so.1";
    for (int n = 2; n <= 4; n++) {
        mp_result_t res;
        int bad = mp_run_raw(n, rank_main, NULL, 300, &res);
        int skips = 0;
        for (int r = 0; r < n; r++) skips += res.codes[r] == SKIP_CODE;
        if (skips == n) {
            printf("SKIP: the ranks could not use the CUDA driver (see above)\n");
            return check_passed || check_failed ? check_summary() : 77;
        }
        CHECK(bad == 0, "%d ranks on one GPU: the stream-ordered collectives (exit codes %d %d "
              "%d %d)", n, res.codes[0], res.codes[1], res.codes[2], res.codes[3]);
    }
    return check_summary();
}
