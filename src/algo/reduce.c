/*
 * reduce.c - element-wise CPU reductions dst = a OP b for every datatype x op, plus the
 * float16/bfloat16 conversions and the datatype and op tables (sizes, names, which pairs
 * are defined).  Memory-bound, so the kernels are simple loops vectorized
 * three ways (AVX-512, AVX2+F16C, portable) and one variant is picked once per process.
 * Must not allocate, log, block or branch per element on dt/op: a call is one table lookup
 * and one indirect call into a typed kernel.
 *
 *   rcoll_reduce_local(dst, a, b, n, dt, op, d)
 *        |  ops = reduce_ops_active (set once: best ISA, or rcoll_reduce_isa_set)
 *        v
 *   ops->kernel[dt][op](dst, a, b, n, d)      e.g. k_sum_u32_avx512: one vpaddd zmm / 16 elts
 */
#include "algo/reduce.h"

#include <stdatomic.h>
#include <string.h>

/* The SIMD variants use GCC's per-function target pragmas and x86 intrinsics; other compilers
 * and architectures get the portable variant only. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define REDUCE_HAVE_X86 1
#include <immintrin.h>
#else
#define REDUCE_HAVE_X86 0
#endif

/* At -O2 GCC's "very cheap" vectorizer cost model rejects any loop that needs a scalar
 * epilogue, i.e. every loop here.  Use the normal model, so -O2 and -O3 builds vectorize
 * alike. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#endif

/* dst may alias a or b exactly.  That makes no loop-carried dependence (element i reads only
 * a[i] and b[i] before writing dst[i]), which is what ivdep asserts; it spares the runtime
 * overlap check that would otherwise send exact aliasing down the scalar path. */
#if defined(__GNUC__) && !defined(__clang__)
#define REDUCE_IVDEP _Pragma("GCC ivdep")
#elif defined(__clang__)
#define REDUCE_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define REDUCE_IVDEP
#endif

#define RI static inline __attribute__((always_inline))

size_t rcoll_dt_size(rcoll_datatype_t dt)
{
    static const size_t sizes[RCOLL_NUM_DATATYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
    return ((unsigned)dt < RCOLL_NUM_DATATYPES) ? sizes[dt] : 0;
}

const char *rcoll_dt_name(rcoll_datatype_t dt)
{
    static const char *const names[RCOLL_NUM_DATATYPES] = {
        "int8",     "uint8",   "int32",   "uint32", "int64",  "uint64", "float16",
        "bfloat16", "float32", "float64", "int16",  "uint16", "bool"};
    return ((unsigned)dt < RCOLL_NUM_DATATYPES) ? names[dt] : "?";
}

const char *rcoll_op_name(rcoll_op_t op)
{
    static const char *const names[RCOLL_NUM_OPS] = {"sum", "prod", "min",  "max",
                                                     "avg", "band", "bor", "bxor"};
    return ((unsigned)op < RCOLL_NUM_OPS) ? names[op] : "?";
}

static int dt_is_float(rcoll_datatype_t dt)
{
    return dt >= RCOLL_FLOAT16 && dt <= RCOLL_FLOAT64;
}

int rcoll_reduce_defined(rcoll_datatype_t dt, rcoll_op_t op)
{
    if ((unsigned)dt >= RCOLL_NUM_DATATYPES || (unsigned)op >= RCOLL_NUM_OPS)
        return 0;
    if (op == RCOLL_BAND || op == RCOLL_BOR || op == RCOLL_BXOR)
        return !dt_is_float(dt);
    return !(op == RCOLL_AVG && dt == RCOLL_BOOL);
}

typedef void (*reduce_kernel_fn_t)(void *dst, const void *a, const void *b, size_t n, int d);
typedef void (*reduce_finish_fn_t)(void *buf, size_t n, int d);

/* One instruction-set variant: a kernel for every dt x op and an AVG finisher per dt.
 * kernel[dt][RCOLL_AVG] is only called with d >= 2 (d <= 1 is plain SUM).  The pairs that
 * rcoll_reduce_defined() refuses hold k_undefined / f_undefined, which write nothing. */
typedef struct {
    reduce_kernel_fn_t kernel[RCOLL_NUM_DATATYPES][RCOLL_NUM_OPS];
    reduce_finish_fn_t finish[RCOLL_NUM_DATATYPES];
} reduce_ops_t;

/* ---------------------------------------------------------------------------------------------
 * Scalar conversions (also the element helpers of the portable kernels)
 * ------------------------------------------------------------------------------------------ */
RI uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

RI float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* cond ? x : y without a branch.  The conversions below compute every case and select, so
 * that loops calling them vectorize even on the base target (GCC 12 left the plain ?: form
 * as control flow and did not vectorize it). */
RI uint32_t reduce_select(int cond, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - (uint32_t)(cond != 0);
    return (x & m) | (y & ~m);
}

RI float half_to_float_sw(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu; /* exponent and mantissa */
    /* Normal: rebias the exponent from 15 to 127. */
    uint32_t normal = (em << 13) + (112u << 23);
    /* Inf, or NaN made quiet as F16C's vcvtph2ps does; the payload is kept. */
    uint32_t special = 0x7f800000u | ((em & 0x3ffu) << 13) | (em > 0x7c00u ? 0x00400000u : 0);
    /* Zero or subnormal: em * 2^-24, exact in float32. */
    uint32_t tiny = f32_bits((float)(int32_t)em * 0x1p-24f);
    uint32_t mag = reduce_select(em >= 0x7c00u, special,
                                 reduce_select(em >= 0x0400u, normal, tiny));
    return f32_from_bits(sign | mag);
}

RI uint16_t float_to_half_sw(float f)
{
    uint32_t bits = f32_bits(f);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t abs = bits & 0x7fffffffu;

    /* NaN: quiet, keep the top payload bits. */
    uint32_t nan = 0x7e00u | ((abs >> 13) & 0x3ffu);
    /* Normal half (2^-14 <= |f| < 65520): drop 13 mantissa bits with ties to even (add just
     * under half an ulp, plus the bit that makes an exact tie round up when it is odd), and
     * rebias the exponent; a carry out of the mantissa correctly bumps the exponent. */
    uint32_t normal = ((abs + 0x0fffu + ((abs >> 13) & 1u)) >> 13) - (112u << 10);
    /* Subnormal half (|f| < 2^-14): adding 0.5 leaves the exponent at 2^-1, where one ulp is
     * 2^-24, the half subnormal step; the float addition rounds |f| to a multiple of it, ties
     * to even (the default rounding mode), and the mantissa bits of the sum count those
     * steps.  1024 steps encode the smallest normal, as the format wants. */
    uint32_t tiny = f32_bits(f32_from_bits(abs) + 0.5f) - 0x3f000000u;
    /* >= 65520 (halfway past the largest half, 65504) and Inf give Inf. */
    uint32_t mag = reduce_select(abs > 0x7f800000u, nan,
                                 reduce_select(abs >= 0x477ff000u, 0x7c00u,
                                               reduce_select(abs >= 0x38800000u, normal, tiny)));
    return (uint16_t)(sign | mag);
}

RI float bf16_to_float_sw(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

RI uint16_t float_to_bf16_sw(float f)
{
    uint32_t bits = f32_bits(f);
    uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u); /* ties to even; may carry to Inf */
    uint32_t quiet = bits | 0x00400000u;
    uint32_t out = (bits & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
    return (uint16_t)(out >> 16);
}

float rcoll_half_to_float(uint16_t h)
{
    return half_to_float_sw(h);
}

uint16_t rcoll_float_to_half(float f)
{
    return float_to_half_sw(f);
}

float rcoll_bf16_to_float(uint16_t h)
{
    return bf16_to_float_sw(h);
}

uint16_t rcoll_float_to_bf16(float f)
{
    return float_to_bf16_sw(f);
}

/* ---------------------------------------------------------------------------------------------
 * Element helpers.  Signed SUM/PROD run on the unsigned kernels (same bits, no overflow UB);
 * signed AVG converts the wrapped unsigned sum back (GCC defines that as modulo 2^bits).
 * 8-, 16- and 32-bit AVG divide in float / double: the truncated quotient is exact there,
 * because the rounding error (< |q| * 2^-24 resp. 2^-53) stays below the 1/d gap to the next
 * integer, and, unlike integer division, it vectorizes.
 * ------------------------------------------------------------------------------------------ */
#define MIN_OF(x, y) ((x) < (y) ? (x) : (y))
#define MAX_OF(x, y) ((x) > (y) ? (x) : (y))

/* avg_i<s> and avg_u<s> for 8 and 16 bits: the wrapped sum, divided in float. */
#define AVG_VIA_FLOAT(s, S, U)                                                                 \
    RI S avg_i##s(S x, S y, int d)                                                             \
    {                                                                                          \
        S sum = (S)(U)((U)x + (U)y);                                                           \
        return (S)((float)sum / (float)d);                                                     \
    }                                                                                          \
    RI U avg_u##s(U x, U y, int d)                                                             \
    {                                                                                          \
        U sum = (U)(x + y);                                                                    \
        return (U)((float)sum / (float)d);                                                     \
    }

AVG_VIA_FLOAT(8, int8_t, uint8_t)
AVG_VIA_FLOAT(16, int16_t, uint16_t)

RI int32_t avg_i32(int32_t x, int32_t y, int d)
{
    int32_t s = (int32_t)((uint32_t)x + (uint32_t)y);
    return (int32_t)((double)s / (double)d);
}

RI uint32_t avg_u32(uint32_t x, uint32_t y, int d)
{
    return (uint32_t)((double)(x + y) / (double)d);
}

RI int64_t avg_i64(int64_t x, int64_t y, int d)
{
    int64_t s = (int64_t)((uint64_t)x + (uint64_t)y);
    return s / d; /* d >= 2: no INT64_MIN / -1 */
}

RI uint64_t avg_u64(uint64_t x, uint64_t y, int d)
{
    return (x + y) / (uint64_t)d;
}

/* The named sum rounds to the type even where excess precision is kept (x87). */
RI float avg_f32(float x, float y, int d)
{
    float s = x + y;
    return s / (float)d;
}

RI double avg_f64(double x, double y, int d)
{
    double s = x + y;
    return s / (double)d;
}

RI uint16_t bf16_add(uint16_t x, uint16_t y)
{
    return float_to_bf16_sw(bf16_to_float_sw(x) + bf16_to_float_sw(y));
}

RI uint16_t bf16_mul(uint16_t x, uint16_t y)
{
    return float_to_bf16_sw(bf16_to_float_sw(x) * bf16_to_float_sw(y));
}

RI uint16_t bf16_min(uint16_t x, uint16_t y)
{
    float fx = bf16_to_float_sw(x), fy = bf16_to_float_sw(y);
    return float_to_bf16_sw(MIN_OF(fx, fy));
}

RI uint16_t bf16_max(uint16_t x, uint16_t y)
{
    float fx = bf16_to_float_sw(x), fy = bf16_to_float_sw(y);
    return float_to_bf16_sw(MAX_OF(fx, fy));
}

RI uint16_t bf16_div(uint16_t x, int d)
{
    return float_to_bf16_sw(bf16_to_float_sw(x) / (float)d);
}

RI uint16_t f16_add(uint16_t x, uint16_t y)
{
    return float_to_half_sw(half_to_float_sw(x) + half_to_float_sw(y));
}

RI uint16_t f16_mul(uint16_t x, uint16_t y)
{
    return float_to_half_sw(half_to_float_sw(x) * half_to_float_sw(y));
}

RI uint16_t f16_min(uint16_t x, uint16_t y)
{
    float fx = half_to_float_sw(x), fy = half_to_float_sw(y);
    return float_to_half_sw(MIN_OF(fx, fy));
}

RI uint16_t f16_max(uint16_t x, uint16_t y)
{
    float fx = half_to_float_sw(x), fy = half_to_float_sw(y);
    return float_to_half_sw(MAX_OF(fx, fy));
}

RI uint16_t f16_div(uint16_t x, int d)
{
    return float_to_half_sw(half_to_float_sw(x) / (float)d);
}

/* ---------------------------------------------------------------------------------------------
 * Kernel templates.  REDUCE_KERNELS(isa) stamps out every loop-form kernel, compiled under
 * whatever target pragma surrounds it; the loops are left to the auto-vectorizer.
 * ------------------------------------------------------------------------------------------ */

/* dst[i] = EXPR with x = a[i], y = b[i] (and d in scope). */
#define REDUCE_KERNEL(isa, name, T, EXPR)                                                      \
    static void k_##name##_##isa(void *dst_v, const void *a_v, const void *b_v, size_t n,     \
                                 int d)                                                        \
    {                                                                                          \
        T *dst = dst_v;                                                                        \
        const T *a = a_v;                                                                      \
        const T *b = b_v;                                                                      \
        (void)d;                                                                               \
        REDUCE_IVDEP                                                                           \
        for (size_t i = 0; i < n; i++) {                                                       \
            T x = a[i];                                                                        \
            T y = b[i];                                                                        \
            dst[i] = (T)(EXPR);                                                                \
        }                                                                                      \
    }

/* buf[i] = EXPR with x = buf[i] (and d in scope). */
#define REDUCE_FINISH(isa, name, T, EXPR)                                                      \
    static void f_##name##_##isa(void *buf_v, size_t n, int d)                                 \
    {                                                                                          \
        T *buf = buf_v;                                                                        \
        for (size_t i = 0; i < n; i++) {                                                       \
            T x = buf[i];                                                                      \
            buf[i] = (T)(EXPR);                                                                \
        }                                                                                      \
    }

/* SUM, PROD, BAND, BOR, BXOR (unsigned: the same bits for both signs, wrapping) and MIN, MAX,
 * AVG of an integer type. */
#define REDUCE_INT_KERNELS(isa, s, S, U, WIDE)                                                 \
    REDUCE_KERNEL(isa, sum_u##s, U, x + y)                                                     \
    REDUCE_KERNEL(isa, prod_u##s, U, (WIDE)x * (WIDE)y)                                        \
    REDUCE_KERNEL(isa, band_u##s, U, x & y)                                                    \
    REDUCE_KERNEL(isa, bor_u##s, U, x | y)                                                     \
    REDUCE_KERNEL(isa, bxor_u##s, U, x ^ y)                                                    \
    REDUCE_KERNEL(isa, min_i##s, S, MIN_OF(x, y))                                              \
    REDUCE_KERNEL(isa, max_i##s, S, MAX_OF(x, y))                                              \
    REDUCE_KERNEL(isa, min_u##s, U, MIN_OF(x, y))                                              \
    REDUCE_KERNEL(isa, max_u##s, U, MAX_OF(x, y))                                              \
    REDUCE_KERNEL(isa, avg_i##s, S, avg_i##s(x, y, d))                                         \
    REDUCE_KERNEL(isa, avg_u##s, U, avg_u##s(x, y, d))

/* WIDE keeps unsigned multiplication unsigned after integer promotion (u16 * u16 would
 * overflow int).  BOOL reads any non-zero byte as true and writes 0 or 1. */
#define REDUCE_KERNELS(isa)                                                                    \
    REDUCE_INT_KERNELS(isa, 8, int8_t, uint8_t, unsigned)                                      \
    REDUCE_INT_KERNELS(isa, 16, int16_t, uint16_t, unsigned)                                   \
    REDUCE_INT_KERNELS(isa, 32, int32_t, uint32_t, uint32_t)                                   \
    REDUCE_INT_KERNELS(isa, 64, int64_t, uint64_t, uint64_t)                                   \
    REDUCE_KERNEL(isa, sum_f32, float, x + y)                                                  \
    REDUCE_KERNEL(isa, prod_f32, float, x * y)                                                 \
    REDUCE_KERNEL(isa, min_f32, float, MIN_OF(x, y))                                           \
    REDUCE_KERNEL(isa, max_f32, float, MAX_OF(x, y))                                           \
    REDUCE_KERNEL(isa, avg_f32, float, avg_f32(x, y, d))                                       \
    REDUCE_KERNEL(isa, sum_f64, double, x + y)                                                 \
    REDUCE_KERNEL(isa, prod_f64, double, x * y)                                                \
    REDUCE_KERNEL(isa, min_f64, double, MIN_OF(x, y))                                          \
    REDUCE_KERNEL(isa, max_f64, double, MAX_OF(x, y))                                          \
    REDUCE_KERNEL(isa, avg_f64, double, avg_f64(x, y, d))                                      \
    REDUCE_KERNEL(isa, or_bool, uint8_t, (x | y) != 0)                                         \
    REDUCE_KERNEL(isa, and_bool, uint8_t, (x != 0) & (y != 0))                                 \
    REDUCE_KERNEL(isa, xor_bool, uint8_t, (x != 0) ^ (y != 0))                                 \
    REDUCE_FINISH(isa, i8, int8_t, (float)x / (float)d)                                        \
    REDUCE_FINISH(isa, u8, uint8_t, (float)x / (float)d)                                       \
    REDUCE_FINISH(isa, i16, int16_t, (float)x / (float)d)                                      \
    REDUCE_FINISH(isa, u16, uint16_t, (float)x / (float)d)                                     \
    REDUCE_FINISH(isa, i32, int32_t, (double)x / (double)d)                                    \
    REDUCE_FINISH(isa, u32, uint32_t, (double)x / (double)d)                                   \
    REDUCE_FINISH(isa, i64, int64_t, x / d)                                                    \
    REDUCE_FINISH(isa, u64, uint64_t, x / (uint64_t)d)                                         \
    REDUCE_FINISH(isa, f32, float, x / (float)d)                                               \
    REDUCE_FINISH(isa, f64, double, x / (double)d)

/* float16 and bfloat16 through the software conversions. */
#define REDUCE_HALF_KERNELS_SW(isa)                                                            \
    REDUCE_KERNEL(isa, sum_f16, uint16_t, f16_add(x, y))                                       \
    REDUCE_KERNEL(isa, prod_f16, uint16_t, f16_mul(x, y))                                      \
    REDUCE_KERNEL(isa, min_f16, uint16_t, f16_min(x, y))                                       \
    REDUCE_KERNEL(isa, max_f16, uint16_t, f16_max(x, y))                                       \
    REDUCE_KERNEL(isa, avg_f16, uint16_t, f16_div(f16_add(x, y), d))                           \
    REDUCE_FINISH(isa, f16, uint16_t, f16_div(x, d))                                           \
    REDUCE_KERNEL(isa, sum_bf16, uint16_t, bf16_add(x, y))                                     \
    REDUCE_KERNEL(isa, prod_bf16, uint16_t, bf16_mul(x, y))                                    \
    REDUCE_KERNEL(isa, min_bf16, uint16_t, bf16_min(x, y))                                     \
    REDUCE_KERNEL(isa, max_bf16, uint16_t, bf16_max(x, y))                                     \
    REDUCE_KERNEL(isa, avg_bf16, uint16_t, bf16_div(bf16_add(x, y), d))                        \
    REDUCE_FINISH(isa, bf16, uint16_t, bf16_div(x, d))

/* The stubs behind the pairs rcoll_reduce_defined() refuses (callers validate first). */
static void k_undefined(void *dst, const void *a, const void *b, size_t n, int d)
{
    (void)dst, (void)a, (void)b, (void)n, (void)d;
}

static void f_undefined(void *buf, size_t n, int d)
{
    (void)buf, (void)n, (void)d;
}

/* Table rows, in rcoll_op_t order.  sg is i or u: MIN, MAX and AVG compare and divide with
 * the sign; the other ops are the same bits either way. */
#define INT_ROW(isa, s, sg)                                                                    \
    {k_sum_u##s##_##isa,  k_prod_u##s##_##isa, k_min_##sg##s##_##isa, k_max_##sg##s##_##isa,   \
     k_avg_##sg##s##_##isa, k_band_u##s##_##isa, k_bor_u##s##_##isa,  k_bxor_u##s##_##isa}
#define FLOAT_ROW(isa, name)                                                                   \
    {k_sum_##name##_##isa, k_prod_##name##_##isa, k_min_##name##_##isa, k_max_##name##_##isa,  \
     k_avg_##name##_##isa, k_undefined,           k_undefined,          k_undefined}
/* SUM and MAX are or, PROD and MIN are and; no AVG. */
#define BOOL_ROW(isa)                                                                          \
    {k_or_bool_##isa,  k_and_bool_##isa, k_and_bool_##isa, k_or_bool_##isa,                    \
     k_undefined,      k_and_bool_##isa, k_or_bool_##isa,  k_xor_bool_##isa}

/* The table of one variant; the 16-bit float kernels k_<op>_{f16,bf16}_<isa> and
 * f_{f16,bf16}_<isa> come from REDUCE_HALF_KERNELS_SW or, on x86, HALF_KERNELS. */
#define REDUCE_OPS_TABLE(isa)                                                                  \
    static const reduce_ops_t reduce_ops_##isa = {                                             \
        .kernel = {                                                                            \
            [RCOLL_INT8] = INT_ROW(isa, 8, i),                                                 \
            [RCOLL_UINT8] = INT_ROW(isa, 8, u),                                                \
            [RCOLL_INT16] = INT_ROW(isa, 16, i),                                               \
            [RCOLL_UINT16] = INT_ROW(isa, 16, u),                                              \
            [RCOLL_INT32] = INT_ROW(isa, 32, i),                                               \
            [RCOLL_UINT32] = INT_ROW(isa, 32, u),                                              \
            [RCOLL_INT64] = INT_ROW(isa, 64, i),                                               \
            [RCOLL_UINT64] = INT_ROW(isa, 64, u),                                              \
            [RCOLL_FLOAT16] = FLOAT_ROW(isa, f16),                                             \
            [RCOLL_BFLOAT16] = FLOAT_ROW(isa, bf16),                                           \
            [RCOLL_FLOAT32] = FLOAT_ROW(isa, f32),                                             \
            [RCOLL_FLOAT64] = FLOAT_ROW(isa, f64),                                             \
            [RCOLL_BOOL] = BOOL_ROW(isa),                                                      \
        },                                                                                     \
        .finish = {                                                                            \
            [RCOLL_INT8] = f_i8_##isa,                                                         \
            [RCOLL_UINT8] = f_u8_##isa,                                                        \
            [RCOLL_INT16] = f_i16_##isa,                                                       \
            [RCOLL_UINT16] = f_u16_##isa,                                                      \
            [RCOLL_INT32] = f_i32_##isa,                                                       \
            [RCOLL_UINT32] = f_u32_##isa,                                                      \
            [RCOLL_INT64] = f_i64_##isa,                                                       \
            [RCOLL_UINT64] = f_u64_##isa,                                                      \
            [RCOLL_FLOAT16] = f_f16_##isa,                                                     \
            [RCOLL_BFLOAT16] = f_bf16_##isa,                                                   \
            [RCOLL_FLOAT32] = f_f32_##isa,                                                     \
            [RCOLL_FLOAT64] = f_f64_##isa,                                                     \
            [RCOLL_BOOL] = f_undefined,                                                        \
        },                                                                                     \
    };

/* ---------------------------------------------------------------------------------------------
 * Portable variant (the base target: SSE2 on x86-64).  float16 goes through the software
 * conversions; only used where the CPU lacks AVX2/F16C, or off x86.
 * ------------------------------------------------------------------------------------------ */
REDUCE_KERNELS(generic)
REDUCE_HALF_KERNELS_SW(generic)
REDUCE_OPS_TABLE(generic)

#if REDUCE_HAVE_X86
/* ---------------------------------------------------------------------------------------------
 * float16 and bfloat16 with intrinsics: widen to float32 lanes, apply the op, round back.
 * float16 uses the F16C / AVX-512 conversions (ties to even by immediate, whatever MXCSR
 * says); bfloat16 widens by a shift and narrows with the same integer rounding as
 * float_to_bf16_sw (no AVX512_BF16: vcvtneps2bf16 flushes subnormals).  op and bf are
 * compile-time constants in every instantiation, so the branches on them fold away.
 * vminps/vmaxps return the second operand when either is NaN, exactly MIN_OF/MAX_OF.
 * ------------------------------------------------------------------------------------------ */
#define F16_RNE (_MM_FROUND_TO_NEAREST_INT)

/* Kernels k_<op>_<name>_<isa> and the finisher f_<name>_<isa> for one 16-bit format. */
#define HALF_KERNELS_OF(isa, name, bf)                                                         \
    static void k_sum_##name##_##isa(void *dst, const void *a, const void *b, size_t n, int d) \
    {                                                                                          \
        h16_loop_##isa(dst, a, b, n, d, RCOLL_SUM, bf);                                        \
    }                                                                                          \
    static void k_prod_##name##_##isa(void *dst, const void *a, const void *b, size_t n,      \
                                      int d)                                                   \
    {                                                                                          \
        h16_loop_##isa(dst, a, b, n, d, RCOLL_PROD, bf);                                       \
    }                                                                                          \
    static void k_min_##name##_##isa(void *dst, const void *a, const void *b, size_t n, int d) \
    {                                                                                          \
        h16_loop_##isa(dst, a, b, n, d, RCOLL_MIN, bf);                                        \
    }                                                                                          \
    static void k_max_##name##_##isa(void *dst, const void *a, const void *b, size_t n, int d) \
    {                                                                                          \
        h16_loop_##isa(dst, a, b, n, d, RCOLL_MAX, bf);                                        \
    }                                                                                          \
    static void k_avg_##name##_##isa(void *dst, const void *a, const void *b, size_t n, int d) \
    {                                                                                          \
        h16_loop_##isa(dst, a, b, n, d, RCOLL_AVG, bf);                                        \
    }                                                                                          \
    static void f_##name##_##isa(void *buf, size_t n, int d)                                   \
    {                                                                                          \
        h16_finish_##isa(buf, n, d, bf);                                                       \
    }

#define HALF_KERNELS(isa)                                                                      \
    HALF_KERNELS_OF(isa, f16, 0)                                                               \
    HALF_KERNELS_OF(isa, bf16, 1)

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

RI __m256 h16_widen_avx2(__m128i v, int bf)
{
    if (bf)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtph_ps(v);
}

RI __m128i h16_narrow_avx2(__m256 v, int bf)
{
    if (!bf)
        return _mm256_cvtps_ph(v, F16_RNE);
    __m256i bits = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    __m256i out = _mm256_srli_epi32(
        _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(rounded),
                                             _mm256_castsi256_ps(quiet), nan)),
        16);
    /* Lanes hold 0..0xffff, so the unsigned saturating pack is exact. */
    return _mm_packus_epi32(_mm256_castsi256_si128(out), _mm256_extracti128_si256(out, 1));
}

RI __m256 h16_op_avx2(__m256 x, __m256 y, rcoll_op_t op)
{
    switch (op) {
    case RCOLL_PROD:
        return _mm256_mul_ps(x, y);
    case RCOLL_MIN:
        return _mm256_min_ps(x, y);
    case RCOLL_MAX:
        return _mm256_max_ps(x, y);
    default: /* SUM, and the sum part of AVG */
        return _mm256_add_ps(x, y);
    }
}

/* 8 elements; both loads happen before the store, so exact aliasing of dst is fine. */
RI void h16_step_avx2(uint16_t *dst, const uint16_t *a, const uint16_t *b, __m256 vd,
                      rcoll_op_t op, int bf)
{
    __m256 x = h16_widen_avx2(_mm_loadu_si128((const __m128i *)a), bf);
    __m256 y = h16_widen_avx2(_mm_loadu_si128((const __m128i *)b), bf);
    __m128i r = h16_narrow_avx2(h16_op_avx2(x, y, op), bf);
    if (op == RCOLL_AVG)
        r = h16_narrow_avx2(_mm256_div_ps(h16_widen_avx2(r, bf), vd), bf);
    _mm_storeu_si128((__m128i *)dst, r);
}

RI void h16_loop_avx2(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n, int d,
                      rcoll_op_t op, int bf)
{
    const __m256 vd = _mm256_set1_ps((float)d);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        h16_step_avx2(dst + i, a + i, b + i, vd, op, bf);
        h16_step_avx2(dst + i + 8, a + i + 8, b + i + 8, vd, op, bf);
    }
    for (; i + 8 <= n; i += 8)
        h16_step_avx2(dst + i, a + i, b + i, vd, op, bf);
    if (i < n) {
        /* Tail of 1..7 through a zero-padded block, so it rounds like the body. */
        uint16_t ta[8] = {0}, tb[8] = {0}, td[8];
        size_t rest = n - i;
        memcpy(ta, a + i, rest * sizeof(uint16_t));
        memcpy(tb, b + i, rest * sizeof(uint16_t));
        h16_step_avx2(td, ta, tb, vd, op, bf);
        memcpy(dst + i, td, rest * sizeof(uint16_t));
    }
}

RI void h16_finish_avx2(uint16_t *buf, size_t n, int d, int bf)
{
    const __m256 vd = _mm256_set1_ps((float)d);
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m256 x = h16_widen_avx2(_mm_loadu_si128((const __m128i *)(buf + i)), bf);
        _mm_storeu_si128((__m128i *)(buf + i), h16_narrow_avx2(_mm256_div_ps(x, vd), bf));
    }
    if (i < n) {
        uint16_t t[8] = {0};
        size_t rest = n - i;
        memcpy(t, buf + i, rest * sizeof(uint16_t));
        __m256 x = h16_widen_avx2(_mm_loadu_si128((const __m128i *)t), bf);
        _mm_storeu_si128((__m128i *)t, h16_narrow_avx2(_mm256_div_ps(x, vd), bf));
        memcpy(buf + i, t, rest * sizeof(uint16_t));
    }
}

HALF_KERNELS(avx2)
REDUCE_KERNELS(avx2)
REDUCE_OPS_TABLE(avx2)

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,f16c,prefer-vector-width=512")

RI __m512 h16_widen_avx512(__m256i v, int bf)
{
    if (bf)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
    return _mm512_cvtph_ps(v);
}

RI __m256i h16_narrow_avx512(__m512 v, int bf)
{
    if (!bf)
        return _mm512_cvtps_ph(v, F16_RNE);
    __m512i bits = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    __m512i quiet = _mm512_or_si512(bits, _mm512_set1_epi32(0x00400000));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512i out = _mm512_mask_blend_epi32(nan, rounded, quiet);
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(out, 16)); /* vpmovdw: keep low halves */
}

RI __m512 h16_op_avx512(__m512 x, __m512 y, rcoll_op_t op)
{
    switch (op) {
    case RCOLL_PROD:
        return _mm512_mul_ps(x, y);
    case RCOLL_MIN:
        return _mm512_min_ps(x, y);
    case RCOLL_MAX:
        return _mm512_max_ps(x, y);
    default:
        return _mm512_add_ps(x, y);
    }
}

/* Up to 16 elements under a mask; masked-off lanes are neither read nor written. */
RI void h16_step_avx512(uint16_t *dst, const uint16_t *a, const uint16_t *b, __mmask16 m,
                        __m512 vd, rcoll_op_t op, int bf)
{
    __m512 x = h16_widen_avx512(_mm256_maskz_loadu_epi16(m, a), bf);
    __m512 y = h16_widen_avx512(_mm256_maskz_loadu_epi16(m, b), bf);
    __m256i r = h16_narrow_avx512(h16_op_avx512(x, y, op), bf);
    if (op == RCOLL_AVG)
        r = h16_narrow_avx512(_mm512_div_ps(h16_widen_avx512(r, bf), vd), bf);
    _mm256_mask_storeu_epi16(dst, m, r);
}

RI __mmask16 h16_tail_mask(size_t rest)
{
    return rest >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rest) - 1u);
}

RI void h16_loop_avx512(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n, int d,
                        rcoll_op_t op, int bf)
{
    const __m512 vd = _mm512_set1_ps((float)d);
    size_t i = 0;

    for (; i + 32 <= n; i += 32) {
        h16_step_avx512(dst + i, a + i, b + i, 0xffff, vd, op, bf);
        h16_step_avx512(dst + i + 16, a + i + 16, b + i + 16, 0xffff, vd, op, bf);
    }
    for (; i < n; i += 16)
        h16_step_avx512(dst + i, a + i, b + i, h16_tail_mask(n - i), vd, op, bf);
}

RI void h16_finish_avx512(uint16_t *buf, size_t n, int d, int bf)
{
    const __m512 vd = _mm512_set1_ps((float)d);

    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = h16_tail_mask(n - i);
        __m512 x = h16_widen_avx512(_mm256_maskz_loadu_epi16(m, buf + i), bf);
        _mm256_mask_storeu_epi16(buf + i, m, h16_narrow_avx512(_mm512_div_ps(x, vd), bf));
    }
}

HALF_KERNELS(avx512)
REDUCE_KERNELS(avx512)
REDUCE_OPS_TABLE(avx512)

#pragma GCC pop_options
#endif /* REDUCE_HAVE_X86 */

/* ---------------------------------------------------------------------------------------------
 * Variant selection and the entry points
 * ------------------------------------------------------------------------------------------ */
static const reduce_ops_t *const reduce_ops_by_isa[RCOLL_REDUCE_ISA_COUNT] = {
    [RCOLL_REDUCE_ISA_GENERIC] = &reduce_ops_generic,
#if REDUCE_HAVE_X86
    [RCOLL_REDUCE_ISA_AVX2] = &reduce_ops_avx2,
    [RCOLL_REDUCE_ISA_AVX512] = &reduce_ops_avx512,
#endif
};

/* NULL until the first call picks the best variant. */
static _Atomic(const reduce_ops_t *) reduce_ops_active;

static int reduce_isa_supported(rcoll_reduce_isa_t isa)
{
    switch (isa) {
    case RCOLL_REDUCE_ISA_GENERIC:
        return 1;
#if REDUCE_HAVE_X86
    case RCOLL_REDUCE_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case RCOLL_REDUCE_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("f16c");
#endif
    default:
        return 0;
    }
}

rcoll_reduce_isa_t rcoll_reduce_isa_best(void)
{
    if (reduce_isa_supported(RCOLL_REDUCE_ISA_AVX512))
        return RCOLL_REDUCE_ISA_AVX512;
    if (reduce_isa_supported(RCOLL_REDUCE_ISA_AVX2))
        return RCOLL_REDUCE_ISA_AVX2;
    return RCOLL_REDUCE_ISA_GENERIC;
}

static const reduce_ops_t *reduce_ops_get(void)
{
    const reduce_ops_t *ops = atomic_load_explicit(&reduce_ops_active, memory_order_acquire);
    if (ops != NULL)
        return ops;

    const reduce_ops_t *expected = NULL;
    ops = reduce_ops_by_isa[rcoll_reduce_isa_best()];
    /* Lose gracefully to a concurrent first call or rcoll_reduce_isa_set(). */
    if (!atomic_compare_exchange_strong_explicit(&reduce_ops_active, &expected, ops,
                                                 memory_order_acq_rel, memory_order_acquire))
        ops = expected;
    return ops;
}

rcoll_reduce_isa_t rcoll_reduce_isa_get(void)
{
    const reduce_ops_t *ops = reduce_ops_get();
    for (int i = 0; i < RCOLL_REDUCE_ISA_COUNT; i++) {
        if (reduce_ops_by_isa[i] == ops)
            return (rcoll_reduce_isa_t)i;
    }
    return RCOLL_REDUCE_ISA_GENERIC; /* not reached */
}

rcoll_status_t rcoll_reduce_isa_set(rcoll_reduce_isa_t isa)
{
    if ((unsigned)isa >= RCOLL_REDUCE_ISA_COUNT)
        return RCOLL_ERR_INVALID_ARG;
    if (reduce_ops_by_isa[isa] == NULL || !reduce_isa_supported(isa))
        return RCOLL_ERR_UNSUPPORTED;
    atomic_store_explicit(&reduce_ops_active, reduce_ops_by_isa[isa], memory_order_release);
    return RCOLL_OK;
}

const char *rcoll_reduce_isa_name(rcoll_reduce_isa_t isa)
{
    switch (isa) {
    case RCOLL_REDUCE_ISA_GENERIC:
        return "generic";
    case RCOLL_REDUCE_ISA_AVX2:
        return "avx2";
    case RCOLL_REDUCE_ISA_AVX512:
        return "avx512";
    default:
        return "unknown";
    }
}

void rcoll_reduce_local(void *dst, const void *a, const void *b, size_t count,
                        rcoll_datatype_t dt, rcoll_op_t op, int avg_divisor)
{
    if (count == 0 || (unsigned)dt >= RCOLL_NUM_DATATYPES || (unsigned)op >= RCOLL_NUM_OPS)
        return;
    if (op == RCOLL_AVG && avg_divisor <= 1)
        op = RCOLL_SUM; /* x / 1 == x; nothing to divide by otherwise */
    reduce_ops_get()->kernel[dt][op](dst, a, b, count, avg_divisor);
}

void rcoll_reduce_avg_finish(void *buf, size_t count, rcoll_datatype_t dt, int divisor)
{
    if (count == 0 || (unsigned)dt >= RCOLL_NUM_DATATYPES || divisor <= 1)
        return;
    reduce_ops_get()->finish[dt](buf, count, divisor);
}

void rcoll_reduce_single(void *buf, size_t count, rcoll_datatype_t dt)
{
    if (count == 0 || dt != RCOLL_BOOL)
        return;
    reduce_ops_get()->kernel[RCOLL_BOOL][RCOLL_BOR](buf, buf, buf, count, 0); /* x | x: 0/1 */
}
