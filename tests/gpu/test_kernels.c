/*
 * test_kernels.c - rcoll's device reduction kernels on a real GPU (suite gpu; tests/gpu/run.sh).
 * Every datatype x op through rcoll_cuda_reduce against the host kernels (rcoll_reduce_local)
 * bit for bit (NaN payloads apart): fresh random inputs per case, outputs and guard bytes
 * poisoned, odd counts, pointers aligned, misaligned alike (the scalar head) and misaligned
 * differently (all scalar), in place (dst == a), and the fused second destination.  Results
 * up to FULL_BYTES are copied back and compared whole; larger ones only in windows (the head
 * with the guard before it, one random window inside, the tail with TAIL bytes past the end),
 * each window compared in full against the host reference, so a case costs two small copies
 * back instead of the whole buffer (the GPU script's time budget, tests/gpu/run.sh).  Then the
 * kernel's bandwidth: bytes read and written per second by a float32 sum of 256 MiB against
 * cuMemcpyDtoD's, printed as a ratio.  Only the driver table of rcoll is used (no libcudart).
 * Exit 77 with the reason where there is no GPU or no usable driver.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/reduce.h"
#include "check.h"
#include "cuda/cuda_drv.h"
#include "cuda/kernels.h"
#include "util/status.h"

#define GUARD 64
#define POISON 0xa5
#define FULL_BYTES ((size_t)64 << 10) /* results up to this size are checked whole */
#define WINDOW ((size_t)4096)         /* bytes per window of a larger result */
#define TAIL ((size_t)4096)           /* bytes past a result's end checked still poisoned */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cu_ok(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return 1;
    char text[160];
    CHECK(0, "%s: %s", what, rcoll_cu_strerror(r, text, sizeof(text)));
    return 0;
}

static int is_nan(rcoll_datatype_t dt, const unsigned char *p)
{
    uint16_t h;
    float f;
    double d;
    switch (dt) {
    case RCOLL_FLOAT16: memcpy(&h, p, 2); return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    case RCOLL_BFLOAT16: memcpy(&h, p, 2); return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    case RCOLL_FLOAT32: memcpy(&f, p, 4); return isnan(f);
    case RCOLL_FLOAT64: memcpy(&d, p, 8); return isnan(d);
    default: return 0;
    }
}

/* Random elements: raw bits, except floats mostly of moderate size (sums that round). */
static void fill(unsigned char *p, size_t n, rcoll_datatype_t dt)
{
    size_t es = rcoll_dt_size(dt);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = next();
        if (dt == RCOLL_FLOAT32 && (v & 3)) {
            float f = (float)((int64_t)(v >> 8) % 100000) / 16.0f;
            memcpy(p + i * es, &f, 4);
        } else if (dt == RCOLL_FLOAT64 && (v & 3)) {
            double f = (double)((int64_t)(v >> 8) % 100000) / 3.0;
            memcpy(p + i * es, &f, 8);
        } else {
            memcpy(p + i * es, &v, es);
        }
    }
}

typedef struct {
    const char *name;
    size_t oa, ob, od; /* offsets in elements */
    int in_place, fused;
} layout_t;

static const layout_t layouts[] = {
    {"aligned", 0, 0, 0, 0, 0},          {"same misalignment", 1, 1, 1, 0, 0},
    {"different alignments", 1, 0, 3, 0, 0}, {"in place", 0, 0, 0, 1, 0},
    {"fused copy", 0, 0, 0, 0, 1},       {"fused, misaligned", 3, 3, 3, 0, 1},
};

/* One case: returns 0 on a mismatch (reported). */
static int one_case(rcoll_datatype_t dt, rcoll_op_t op, int d, size_t n, const layout_t *L,
                    CUdeviceptr da, CUdeviceptr db, CUdeviceptr dd, CUdeviceptr de,
                    unsigned char *ha, unsigned char *hb, unsigned char *want,
                    unsigned char *got, size_t cap)
{
    size_t es = rcoll_dt_size(dt), bytes = n * es;
    if ((L->od + n) * es + 2 * GUARD > cap) return 1;
    fill(ha, n, dt);
    fill(hb, n, dt);
    rcoll_reduce_local(want, ha, hb, n, dt, op, d);
    CUdeviceptr a = da + GUARD + L->oa * es, b = db + GUARD + L->ob * es;
    CUdeviceptr dst = L->in_place ? a : dd + GUARD + L->od * es;
    CUdeviceptr dst2 = L->fused ? de + GUARD + L->od * es : 0;
    const rcoll_cu_api_t *cu = rcoll_cu;
    if (!cu_ok(cu->cuMemsetD8(dd, POISON, cap), "poison") ||
        !cu_ok(cu->cuMemsetD8(de, POISON, cap), "poison") ||
        !cu_ok(cu->cuMemcpyHtoD(a, ha, bytes), "copy a") ||
        !cu_ok(cu->cuMemcpyHtoD(b, hb, bytes), "copy b"))
        return 0;
    rcoll_status_t st = rcoll_cuda_reduce(dst, dst2, a, b, n, dt, op, d, NULL);
    if (!cu_ok(cu->cuCtxSynchronize(), "kernel")) return 0;
    if (st != RCOLL_OK) {
        CHECK(0, "rcoll_cuda_reduce: %s", rcoll_err_get());
        return 0;
    }
    size_t off = GUARD + (L->in_place ? L->oa : L->od) * es, end = off + bytes;
    /* The windows [lo, hi) of the buffer copied back and checked: everything up to TAIL bytes
     * past the end for a small result; else the head (with the guard before it), one window
     * at a random element inside, and the tail with TAIL bytes past the end. */
    size_t lo[3], hi[3], nwin = 0;
    size_t stop = end + TAIL < cap ? end + TAIL : cap;
    if (bytes <= FULL_BYTES) {
        lo[nwin] = 0, hi[nwin++] = stop;
    } else {
        size_t mid = off + (size_t)(next() % (n - WINDOW / es)) * es;
        lo[nwin] = 0, hi[nwin++] = off + WINDOW;
        lo[nwin] = mid, hi[nwin++] = mid + WINDOW;
        lo[nwin] = end - WINDOW, hi[nwin++] = stop;
    }
    for (int pass = 0; pass < 1 + L->fused; pass++) {
        CUdeviceptr base = pass ? de : (L->in_place ? da : dd);
        for (size_t w = 0; w < nwin; w++) {
            if (!cu_ok(cu->cuMemcpyDtoH(got + lo[w], base + lo[w], hi[w] - lo[w]), "copy back"))
                return 0;
            for (size_t at = lo[w]; at < hi[w]; at++) {
                if (at >= off && at < end) {
                    if ((at - off) % es) continue; /* checked with its element's first byte */
                    size_t i = (at - off) / es;
                    const unsigned char *g = got + at, *wnt = want + i * es;
                    if (memcmp(g, wnt, es) && !(is_nan(dt, g) && is_nan(dt, wnt))) {
                        uint64_t x = 0, y = 0, gv = 0, wv = 0;
                        memcpy(&x, ha + i * es, es), memcpy(&y, hb + i * es, es);
                        memcpy(&gv, g, es), memcpy(&wv, wnt, es);
                        CHECK(0, "%s %s d=%d n=%zu %s%s: element %zu of %#llx, %#llx: device "
                              "%#llx, host %#llx", rcoll_dt_name(dt), rcoll_op_name(op), d, n,
                              L->name, pass ? " (second destination)" : "", i,
                              (unsigned long long)x, (unsigned long long)y,
                              (unsigned long long)gv, (unsigned long long)wv);
                        return 0;
                    }
                } else if (!L->in_place && got[at] != POISON) {
                    CHECK(0, "%s %s n=%zu %s%s: byte %zd outside the result written",
                          rcoll_dt_name(dt), rcoll_op_name(op), n, L->name,
                          pass ? " (second destination)" : "", (ssize_t)at - (ssize_t)off);
                    return 0;
                }
            }
        }
    }
    return 1;
}

static void bandwidth(CUdeviceptr a, CUdeviceptr b, CUdeviceptr d, size_t bytes)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    CUevent e0, e1;
    float ms_red = 0, ms_fused = 0, ms_copy = 0;
    size_t n = bytes / 4;
    const int iters = 20;
    if (!cu_ok(cu->cuEventCreate(&e0, 0), "event") || !cu_ok(cu->cuEventCreate(&e1, 0), "event"))
        return;
    for (int which = 0; which < 3; which++) {
        float *ms = which == 0 ? &ms_red : which == 1 ? &ms_fused : &ms_copy;
        for (int it = -2; it < iters; it++) {
            if (it == 0) cu->cuEventRecord(e0, NULL);
            if (which == 2)
                cu->cuMemcpyDtoD(d, a, bytes);
            else
                rcoll_cuda_reduce(d, which == 1 ? b : 0, a, b, n, RCOLL_FLOAT32, RCOLL_SUM, 1,
                                  NULL);
        }
        cu->cuEventRecord(e1, NULL);
        cu->cuEventSynchronize(e1);
        cu->cuEventElapsedTime(ms, e0, e1);
    }
    double red = 3.0 * (double)bytes * iters / (ms_red * 1e-3) / 1e9;
    double fused = 4.0 * (double)bytes * iters / (ms_fused * 1e-3) / 1e9;
    double copy = 2.0 * (double)bytes * iters / (ms_copy * 1e-3) / 1e9;
    printf("bandwidth (%zu MiB float32 sum, bytes read + written per second):\n"
           "  reduce kernel       %8.1f GB/s\n  reduce + copy       %8.1f GB/s\n"
           "  cuMemcpyDtoD        %8.1f GB/s\n  reduce / memcpy     %8.2f\n"
           "  reduce+copy / memcpy %7.2f\n",
           bytes >> 20, red, fused, copy, red / copy, fused / copy);
    CHECK(red > 0 && copy > 0, "bandwidth measured");
    cu->cuEventDestroy(e0);
    cu->cuEventDestroy(e1);
}

int main(void)
{
    check_set_note(NULL);
    if (access("/dev/nvidia0", F_OK) != 0) {
        printf("SKIP: no NVIDIA GPU here (/dev/nvidia0 missing)\n");
        return 77;
    }
    const char *lib = getenv("RCOLL_CUDA_LIB") ? getenv("RCOLL_CUDA_LIB") : "libcuda.so.1";
    if (rcoll_cu_load(lib) != RCOLL_OK) {
        printf("SKIP: %s\n", rcoll_err_get());
        return 77;
    }
    const rcoll_cu_api_t *cu = rcoll_cu;
    int ndev = 0;
    if (cu->cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev == 0) {
        printf("SKIP: the CUDA driver sees no device\n");
        return 77;
    }
    CUdevice dev;
    CUcontext ctx;
    char name[128] = "";
    if (!cu_ok(cu->cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !cu_ok(cu->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
        !cu_ok(cu->cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
        return check_summary();
    cu->cuDeviceGetName(name, sizeof(name), dev);
    printf("device 0: %s\n", name);

    const size_t cap = ((size_t)1 << 20) * 8 + 64 * 8 + 2 * GUARD;
    CUdeviceptr da, db, dd, de;
    unsigned char *ha = malloc(cap), *hb = malloc(cap), *want = malloc(cap), *got = malloc(cap);
    if (!cu_ok(cu->cuMemAlloc(&da, cap), "cuMemAlloc") || !cu_ok(cu->cuMemAlloc(&db, cap), "a") ||
        !cu_ok(cu->cuMemAlloc(&dd, cap), "a") || !cu_ok(cu->cuMemAlloc(&de, cap), "a"))
        return check_summary();
    static const size_t counts[] = {1, 2, 3, 7, 15, 16, 17, 31, 1000, 4099, 65537, 1048576};
    static const int divisors[] = {2, 3, 7};
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++) {
        for (int op = 0; op < RCOLL_NUM_OPS; op++) {
            if (!rcoll_reduce_defined((rcoll_datatype_t)dt, (rcoll_op_t)op)) {
                CHECK(rcoll_cuda_reduce(dd, 0, da, db, 4, (rcoll_datatype_t)dt, (rcoll_op_t)op,
                                        1, NULL) == RCOLL_ERR_INVALID_ARG, "undefined pair");
                continue;
            }
            int ok = 1;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && ok; c++)
                for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]) && ok; l++) {
                    int d = op == RCOLL_AVG ? divisors[(c + l) % 3] : 1;
                    ok = one_case((rcoll_datatype_t)dt, (rcoll_op_t)op, d, counts[c],
                                  &layouts[l], da, db, dd, de, ha, hb, want, got, cap);
                }
            CHECK(ok, "%s %s", rcoll_dt_name((rcoll_datatype_t)dt),
                  rcoll_op_name((rcoll_op_t)op));
        }
    }
    cu->cuMemFree(da), cu->cuMemFree(db), cu->cuMemFree(dd), cu->cuMemFree(de);

    size_t big = (size_t)256 << 20;
    if (cu_ok(cu->cuMemAlloc(&da, big), "a") && cu_ok(cu->cuMemAlloc(&db, big), "a") &&
        cu_ok(cu->cuMemAlloc(&dd, big), "a")) {
        bandwidth(da, db, dd, big);
        cu->cuMemFree(da), cu->cuMemFree(db), cu->cuMemFree(dd);
    }
    rcoll_cuda_kernels_unload();
    cu->cuDevicePrimaryCtxRelease(dev);
    free(ha), free(hb), free(want), free(got);
    return check_summary();
}
