/*
 * test_reduce_elem.c - src/cuda/reduce_elem.h, the element arithmetic the device kernels are
 * built from, compiled here by the host compiler and checked bit for bit (NaN payloads apart:
 * a NaN must meet a NaN) against the host kernels of src/algo/reduce.c, every instruction-set
 * variant this CPU has, for every datatype x op: every float16 / bfloat16 value against a set
 * of edge values (NaN, +-0, +-Inf, subnormals, the largest finite, rounding ties), edge and
 * random values of the other types, AVG divisors 2, 3, 7 and 1000.  Then the one-kernel
 * all-reduce's fold of many ranks' float16 / bfloat16 values (rcoll_e_fold16): the float32
 * sum rounded once, against sums computed in double on values whose sums are exact in float32
 * (so the reference is one rounding of the exact sum by reduce.c's conversion), where the
 * chain of two-input reductions (rounding after each rank) differs.  Builds without CUDA.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "check.h"
#include "cuda/reduce_elem.h"

typedef void (*elem_fn)(void *dst, const void *x, const void *y, int d);

/* One adapter per pair of the list: out = fn(x, y, d) through memcpy. */
#define ADAPT(DT, OP, T, fn)                                                                   \
    static void adapt_##DT##_##OP(void *out, const void *x, const void *y, int d)              \
    {                                                                                          \
        T a, b, r;                                                                             \
        memcpy(&a, x, sizeof(T));                                                              \
        memcpy(&b, y, sizeof(T));                                                              \
        r = rcoll_elem_##fn(a, b, d);                                                          \
        memcpy(out, &r, sizeof(T));                                                            \
    }
RCOLL_ELEM_LIST(ADAPT)
#undef ADAPT
#define ENTRY(DT, OP, T, fn) [DT][OP] = adapt_##DT##_##OP,
static const elem_fn elem[RCOLL_NUM_DATATYPES][RCOLL_NUM_OPS] = {RCOLL_ELEM_LIST(ENTRY)};
#undef ENTRY

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int is_nan(rcoll_datatype_t dt, const void *p)
{
    uint16_t h;
    float f;
    double d;
    switch (dt) {
    case RCOLL_FLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    case RCOLL_BFLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    case RCOLL_FLOAT32:
        memcpy(&f, p, 4);
        return isnan(f);
    case RCOLL_FLOAT64:
        memcpy(&d, p, 8);
        return isnan(d);
    default:
        return 0;
    }
}

static long compared;

/* a, b: n elements; the host kernel's result against the element function's. */
static void compare(rcoll_datatype_t dt, rcoll_op_t op, int d, const unsigned char *a,
                    const unsigned char *b, size_t n, const char *isa)
{
    size_t es = rcoll_dt_size(dt);
    unsigned char *host = malloc(n * es), one[8];
    rcoll_reduce_local(host, a, b, n, dt, op, d);
    rcoll_op_t eop = (op == RCOLL_AVG && d <= 1) ? RCOLL_SUM : op;
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; i++) {
        elem[dt][eop](one, a + i * es, b + i * es, d);
        compared++;
        if (!memcmp(one, host + i * es, es)) continue;
        if (is_nan(dt, one) && is_nan(dt, host + i * es)) continue;
        uint64_t x = 0, y = 0, h = 0, e = 0;
        memcpy(&x, a + i * es, es);
        memcpy(&y, b + i * es, es);
        memcpy(&h, host + i * es, es);
        memcpy(&e, one, es);
        CHECK(0, "%s %s d=%d (%s): x=%#llx y=%#llx host %#llx, element %#llx",
              rcoll_dt_name(dt), rcoll_op_name(op), d, isa, (unsigned long long)x,
              (unsigned long long)y, (unsigned long long)h, (unsigned long long)e);
        bad++;
    }
    if (!bad) check_passed++;
    free(host);
}

/* Edge values of a type as raw bits. */
static size_t edges(rcoll_datatype_t dt, uint64_t *v)
{
    static const uint64_t h16[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00,
                                   0xbc00, 0x3c01, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00,
                                   0x7c01, 0xfe00, 0x3555, 0x4000, 0x0200, 0x5640, 0x7bfe};
    static const uint64_t b16[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80,
                                   0xbf80, 0x3f81, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0,
                                   0x7f81, 0xffc0, 0x3eab, 0x4000, 0x0040, 0x4b00, 0x7f7e};
    static const uint64_t f32[] = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff,
                                   0x00800000, 0x3f800000, 0xbf800000, 0x3f800001, 0x7f7fffff,
                                   0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
                                   0xffc00000, 0x4b000000, 0x33800000, 0x3eaaaaab};
    static const uint64_t f64[] = {0, 0x8000000000000000ull, 1, 0x000fffffffffffffull,
                                   0x3ff0000000000000ull, 0xbff0000000000000ull,
                                   0x7fefffffffffffffull, 0x7ff0000000000000ull,
                                   0xfff0000000000000ull, 0x7ff8000000000000ull,
                                   0x7ff0000000000001ull, 0x4330000000000000ull};
    static const uint64_t ints[] = {0, 1, 2, 3, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff,
                                    0x7fffffff, 0x80000000u, 0xffffffffu, 0x7fffffffffffffffull,
                                    0x8000000000000000ull, 0xffffffffffffffffull,
                                    0xfffffffffffffffeull, 100, 0xffffff9cull};
    const uint64_t *src;
    size_t n;
    switch (dt) {
    case RCOLL_FLOAT16: src = h16, n = sizeof(h16) / 8; break;
    case RCOLL_BFLOAT16: src = b16, n = sizeof(b16) / 8; break;
    case RCOLL_FLOAT32: src = f32, n = sizeof(f32) / 8; break;
    case RCOLL_FLOAT64: src = f64, n = sizeof(f64) / 8; break;
    default: src = ints, n = sizeof(ints) / 8; break;
    }
    memcpy(v, src, n * 8);
    return n;
}

static void store(unsigned char *buf, size_t i, size_t es, uint64_t v)
{
    memcpy(buf + i * es, &v, es); /* little endian: the low bytes */
}

static void run_all(const char *isa)
{
    static const int divisors[] = {2, 3, 7, 1000};
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++) {
        size_t es = rcoll_dt_size((rcoll_datatype_t)dt);
        uint64_t ev[32];
        size_t ne = edges((rcoll_datatype_t)dt, ev);
        int half = dt == RCOLL_FLOAT16 || dt == RCOLL_BFLOAT16;
        /* pairs: edges x edges, then (half types) every value x edges, then random */
        size_t n = ne * ne + (half ? 65536 * ne : 0) + 20000;
        unsigned char *a = malloc(n * es), *b = malloc(n * es);
        size_t k = 0;
        for (size_t i = 0; i < ne; i++)
            for (size_t j = 0; j < ne; j++, k++) store(a, k, es, ev[i]), store(b, k, es, ev[j]);
        if (half)
            for (uint64_t x = 0; x < 65536; x++)
                for (size_t j = 0; j < ne; j++, k++)
                    store(a, k, es, (j & 1) ? x : ev[j]), store(b, k, es, (j & 1) ? ev[j] : x);
        for (; k < n; k++) {
            uint64_t x = next(), y = next();
            if (dt == RCOLL_FLOAT32) { /* mostly moderate magnitudes: sums that round */
                float fx = (float)((int64_t)(x % 2000001) - 1000000) / 64.0f;
                float fy = (float)((int64_t)(y % 2000001) - 1000000) / 64.0f;
                if (k & 1) memcpy(&x, &fx, 4), memcpy(&y, &fy, 4);
            } else if (dt == RCOLL_FLOAT64) {
                double fx = (double)((int64_t)(x % 2000001) - 1000000) / 3.0;
                double fy = (double)((int64_t)(y % 2000001) - 1000000) / 7.0;
                if (k & 1) memcpy(&x, &fx, 8), memcpy(&y, &fy, 8);
            }
            store(a, k, es, x);
            store(b, k, es, y);
        }
        for (int op = 0; op < RCOLL_NUM_OPS; op++) {
            if (!rcoll_reduce_defined((rcoll_datatype_t)dt, (rcoll_op_t)op)) {
                CHECK(elem[dt][op] == NULL, "%s %s has no element function",
                      rcoll_dt_name((rcoll_datatype_t)dt), rcoll_op_name((rcoll_op_t)op));
                continue;
            }
            CHECK(elem[dt][op] != NULL, "%s %s has an element function",
                  rcoll_dt_name((rcoll_datatype_t)dt), rcoll_op_name((rcoll_op_t)op));
            if (!elem[dt][op]) continue;
            if (op == RCOLL_AVG)
                for (size_t q = 0; q < sizeof(divisors) / sizeof(divisors[0]); q++)
                    compare((rcoll_datatype_t)dt, (rcoll_op_t)op, divisors[q], a, b, n, isa);
            else
                compare((rcoll_datatype_t)dt, (rcoll_op_t)op, 1, a, b, n, isa);
        }
        free(a);
        free(b);
    }
}

/* A random float16 (bf 0) or bfloat16 (bf 1) of either sign with exponent in [2, 10] (bf16:
 * [0, 12]): sums of up to 16 of them are exact in float32. */
static uint16_t fold_value(int bf)
{
    uint64_t r = next();
    unsigned sign = (unsigned)(r & 1) << 15;
    if (bf) return (uint16_t)(sign | (unsigned)(127 + r / 2 % 13) << 7 | (unsigned)(r >> 8) % 128);
    return (uint16_t)(sign | (unsigned)(15 + 2 + r / 2 % 9) << 10 | (unsigned)(r >> 8) % 1024);
}

static void test_fold16(void)
{
    long bad = 0, cases = 0, chain_differs = 0;
    static const rcoll_op_t ops[] = {RCOLL_SUM, RCOLL_AVG, RCOLL_MIN, RCOLL_MAX};
    for (int bf = 0; bf <= 1; bf++) {
        rcoll_datatype_t dt = bf ? RCOLL_BFLOAT16 : RCOLL_FLOAT16;
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            rcoll_op_t op = ops[o];
            for (int t = 0; t < 20000; t++) {
                int n = 2 + (int)(next() % 15);
                uint16_t v[16];
                double sum = 0, lo = INFINITY, hi = -INFINITY;
                for (int p = 0; p < n; p++) {
                    v[p] = fold_value(bf);
                    double x = bf ? rcoll_bf16_to_float(v[p]) : rcoll_half_to_float(v[p]);
                    sum += x;
                    lo = x < lo ? x : lo;
                    hi = x > hi ? x : hi;
                }
                float want_f = op == RCOLL_SUM   ? (float)sum
                               : op == RCOLL_AVG ? (float)sum / (float)n
                               : op == RCOLL_MIN ? (float)lo
                                                 : (float)hi;
                uint16_t want = bf ? rcoll_float_to_bf16(want_f) : rcoll_float_to_half(want_f);
                float acc = rcoll_e_widen16(bf, v[0]);
                for (int p = 1; p < n; p++) acc = rcoll_e_fold16(op, acc, rcoll_e_widen16(bf, v[p]));
                uint16_t got = rcoll_e_fold16_end(bf, op, acc, n);
                /* the two-input chain, rounding after each rank */
                uint16_t chain = v[0];
                for (int p = 1; p < n; p++)
                    elem[dt][p == n - 1 ? op : op == RCOLL_AVG ? RCOLL_SUM : op](&chain, &chain,
                                                                                 &v[p], n);
                cases++;
                if (got != want && bad++ < 5)
                    printf("fold16 %s op %d over %d ranks: 0x%04x, want 0x%04x\n",
                           bf ? "bf16" : "f16", (int)op, n, got, want);
                chain_differs += chain != want;
            }
        }
    }
    printf("fold16: %ld cases, the per-rank rounding chain differs from the once-rounded sum "
           "in %ld\n", cases, chain_differs);
    CHECK(bad == 0, "fold16: %ld of %ld differ from the once-rounded exact result", bad, cases);
    CHECK(chain_differs > 1000, "the inputs do not tell rounding once from rounding per rank "
          "(%ld)", chain_differs);
}

int main(void)
{
    check_set_note(NULL);
    /* the list's numbers are rcoll.h's */
    CHECK(RCOLL_INT8 == 0 && RCOLL_UINT8 == 1 && RCOLL_INT32 == 2 && RCOLL_UINT32 == 3 &&
              RCOLL_INT64 == 4 && RCOLL_UINT64 == 5 && RCOLL_FLOAT16 == 6 &&
              RCOLL_BFLOAT16 == 7 && RCOLL_FLOAT32 == 8 && RCOLL_FLOAT64 == 9 &&
              RCOLL_INT16 == 10 && RCOLL_UINT16 == 11 && RCOLL_BOOL == 12 &&
              RCOLL_NUM_DATATYPES == 13, "datatype numbers");
    CHECK(RCOLL_SUM == 0 && RCOLL_PROD == 1 && RCOLL_MIN == 2 && RCOLL_MAX == 3 &&
              RCOLL_AVG == 4 && RCOLL_BAND == 5 && RCOLL_BOR == 6 && RCOLL_BXOR == 7 &&
              RCOLL_NUM_OPS == 8, "op numbers");
    /* the conversions alone, every value */
    int conv_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = rcoll_e_half_to_float((uint16_t)h), b = rcoll_half_to_float((uint16_t)h);
        if (memcmp(&a, &b, 4)) conv_bad++;
        a = rcoll_e_bf16_to_float((uint16_t)h), b = rcoll_bf16_to_float((uint16_t)h);
        if (memcmp(&a, &b, 4)) conv_bad++;
    }
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)next();
        float f;
        memcpy(&f, &u, 4);
        if (rcoll_e_float_to_half(f) != rcoll_float_to_half(f)) conv_bad++;
        if (rcoll_e_float_to_bf16(f) != rcoll_float_to_bf16(f)) conv_bad++;
    }
    CHECK(conv_bad == 0, "conversions equal reduce.c's: %d differ", conv_bad);

    static const rcoll_reduce_isa_t isas[] = {RCOLL_REDUCE_ISA_GENERIC, RCOLL_REDUCE_ISA_AVX2,
                                              RCOLL_REDUCE_ISA_AVX512};
    for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
        if (rcoll_reduce_isa_set(isas[i]) != RCOLL_OK) {
            check_skip("instruction set %s: not on this CPU", rcoll_reduce_isa_name(isas[i]));
            continue;
        }
        run_all(rcoll_reduce_isa_name(isas[i]));
    }
    printf("%ld element results compared\n", compared);
    test_fold16();
    return check_summary();
}
