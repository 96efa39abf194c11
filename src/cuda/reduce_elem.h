/*
 * reduce_elem.h - the per-element arithmetic of every datatype x op, written once for the
 * device kernels (nvcc, src/cuda/reduce.cu) and the host compiler (the kernel launcher's name
 * table, tests/unit/test_reduce_elem.c).  It follows src/algo/reduce.c bit for bit (NaN
 * payloads apart), which the unit test checks element by element against every instruction-set
 * variant of the host kernels:
 *   integers: SUM and PROD wrap (computed on the unsigned type), MIN/MAX by the type's sign,
 *     AVG = (wrapped sum) / d truncated toward zero, 8/16-bit dividing in float and 32-bit in
 *     double (exact there, see reduce.c), 64-bit in integers;
 *   float16 / bfloat16: widened to float32, the op in float32, rounded back to nearest even
 *     (AVG: the sum rounded to the type, then divided in float32 and rounded again);
 *   MIN = (x < y ? x : y), MAX = (x > y ? x : y): a NaN operand or -0/+0 gives y;
 *   bool: any non-zero byte is true, SUM/MAX/BOR are or, PROD/MIN/BAND and, BXOR xor; 0 or 1.
 * Every function takes (x, y, d); d is the AVG divisor (>= 2; the caller turns AVG with d <= 1
 * into SUM, as rcoll_reduce_local does) and is ignored by the other ops.
 * No CUDA header is needed: under nvcc the functions are __host__ __device__.
 */
#ifndef RCOLL_CUDA_REDUCE_ELEM_H
#define RCOLL_CUDA_REDUCE_ELEM_H

#include <stdint.h>
#if !defined(__CUDACC__)
#include <string.h>
#endif

#if defined(__CUDACC__)
#define RCOLL_HD __host__ __device__
#define RCOLL_ELEM static __forceinline__ RCOLL_HD
#else
#define RCOLL_HD
#define RCOLL_ELEM static inline __attribute__((always_inline, unused))
#endif

/* ---- bits ---- */
RCOLL_ELEM uint32_t rcoll_e_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
#endif
}

RCOLL_ELEM float rcoll_e_f32_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
#endif
}

/* cond ? x : y computed without a branch (as reduce.c's reduce_select). */
RCOLL_ELEM uint32_t rcoll_e_select(int cond, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - (uint32_t)(cond != 0);
    return (x & m) | (y & ~m);
}

/* ---- float16 / bfloat16 <-> float32 ----
 * On the host reduce.c's software conversions (branch-free, about 20 integer operations
 * each); on the device the hardware's cvt instructions (one each; cvt.rn.bf16.f32 needs
 * sm_80, the oldest target built), which give the same bits for every non-NaN value: both
 * are exact widenings and round-to-nearest-even narrowings with IEEE subnormals and
 * overflow to infinity (tests/gpu/test_kernels.c compares the device kernels with the host
 * ones bit for bit, NaN payloads apart). */
RCOLL_ELEM float rcoll_e_half_to_float(uint16_t h)
{
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t normal = (em << 13) + (112u << 23);
    uint32_t special = 0x7f800000u | ((em & 0x3ffu) << 13) | (em > 0x7c00u ? 0x00400000u : 0);
    uint32_t tiny = rcoll_e_f32_bits((float)(int32_t)em * 0x1p-24f);
    uint32_t mag = rcoll_e_select(em >= 0x7c00u, special,
                                  rcoll_e_select(em >= 0x0400u, normal, tiny));
    return rcoll_e_f32_from_bits(sign | mag);
#endif
}

RCOLL_ELEM uint16_t rcoll_e_float_to_half(float f)
{
#if defined(__CUDA_ARCH__)
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    uint32_t bits = rcoll_e_f32_bits(f);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t abs = bits & 0x7fffffffu;
    uint32_t nan = 0x7e00u | ((abs >> 13) & 0x3ffu);
    uint32_t normal = ((abs + 0x0fffu + ((abs >> 13) & 1u)) >> 13) - (112u << 10);
    /* |f| + 0.5 rounds |f| to the half subnormal step (2^-24), ties to even. */
    uint32_t tiny = rcoll_e_f32_bits(rcoll_e_f32_from_bits(abs) + 0.5f) - 0x3f000000u;
    uint32_t mag = rcoll_e_select(abs > 0x7f800000u, nan,
                                  rcoll_e_select(abs >= 0x477ff000u, 0x7c00u,
                                                 rcoll_e_select(abs >= 0x38800000u, normal,
                                                                tiny)));
    return (uint16_t)(sign | mag);
#endif
}

RCOLL_ELEM float rcoll_e_bf16_to_float(uint16_t h)
{
    return rcoll_e_f32_from_bits((uint32_t)h << 16);
}

RCOLL_ELEM uint16_t rcoll_e_float_to_bf16(float f)
{
#if defined(__CUDA_ARCH__)
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    uint32_t bits = rcoll_e_f32_bits(f);
    uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    uint32_t quiet = bits | 0x00400000u;
    uint32_t out = (bits & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
    return (uint16_t)(out >> 16);
#endif
}

#define RCOLL_E_MIN(x, y) ((x) < (y) ? (x) : (y))
#define RCOLL_E_MAX(x, y) ((x) > (y) ? (x) : (y))

/* ---- integers: rcoll_elem_<type>_<op>(x, y, d) ---- */
/* S signed, U unsigned, W the unsigned type products are computed in (no int promotion
 * overflow), QS / QU the types a signed / unsigned AVG divides in. */
#define RCOLL_E_INT(s, S, U, W, QS, QU)                                                        \
    RCOLL_ELEM U rcoll_elem_u##s##_sum(U x, U y, int d)                                        \
    {                                                                                          \
        (void)d;                                                                               \
        return (U)(x + y);                                                                     \
    }                                                                                          \
    RCOLL_ELEM U rcoll_elem_u##s##_prod(U x, U y, int d)                                       \
    {                                                                                          \
        (void)d;                                                                               \
        return (U)((W)x * (W)y);                                                               \
    }                                                                                          \
    RCOLL_ELEM U rcoll_elem_u##s##_min(U x, U y, int d)                                        \
    {                                                                                          \
        (void)d;                                                                               \
        return RCOLL_E_MIN(x, y);                                                              \
    }                                                                                          \
    RCOLL_ELEM U rcoll_elem_u##s##_max(U x, U y, int d)                                        \
    {                                                                                          \
        (void)d;                                                                               \
        return RCOLL_E_MAX(x, y);                                                              \
    }                                                                                          \
    RCOLL_ELEM U rcoll_elem_u##s##_avg(U x, U y, int d)                                        \
    {                                                                                          \
        U sum = (U)(x + y);                                                                    \
        return (U)((QU)sum / (QU)d);                                                           \
    }                                                                                          \
    RCOLL_ELEM U rcoll_elem_u##s##_band(U x, U y, int d)                                       \
    {                                                                                          \
        (void)d;                                                                               \
        return (U)(x & y);                                                                     \
    }                                                                                          \
    RCOLL_ELEM U rcoll_elem_u##s##_bor(U x, U y, int d)                                        \
    {                                                                                          \
        (void)d;                                                                               \
        return (U)(x | y);                                                                     \
    }                                                                                          \
    RCOLL_ELEM U rcoll_elem_u##s##_bxor(U x, U y, int d)                                       \
    {                                                                                          \
        (void)d;                                                                               \
        return (U)(x ^ y);                                                                     \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_sum(S x, S y, int d)                                        \
    {                                                                                          \
        return (S)rcoll_elem_u##s##_sum((U)x, (U)y, d);                                        \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_prod(S x, S y, int d)                                       \
    {                                                                                          \
        return (S)rcoll_elem_u##s##_prod((U)x, (U)y, d);                                       \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_min(S x, S y, int d)                                        \
    {                                                                                          \
        (void)d;                                                                               \
        return RCOLL_E_MIN(x, y);                                                              \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_max(S x, S y, int d)                                        \
    {                                                                                          \
        (void)d;                                                                               \
        return RCOLL_E_MAX(x, y);                                                              \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_avg(S x, S y, int d)                                        \
    {                                                                                          \
        S sum = (S)(U)((U)x + (U)y);                                                           \
        return (S)((QS)sum / (QS)d);                                                           \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_band(S x, S y, int d)                                       \
    {                                                                                          \
        return (S)rcoll_elem_u##s##_band((U)x, (U)y, d);                                       \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_bor(S x, S y, int d)                                        \
    {                                                                                          \
        return (S)rcoll_elem_u##s##_bor((U)x, (U)y, d);                                        \
    }                                                                                          \
    RCOLL_ELEM S rcoll_elem_i##s##_bxor(S x, S y, int d)                                       \
    {                                                                                          \
        return (S)rcoll_elem_u##s##_bxor((U)x, (U)y, d);                                       \
    }

RCOLL_E_INT(8, int8_t, uint8_t, unsigned, float, float)
RCOLL_E_INT(16, int16_t, uint16_t, unsigned, float, float)
RCOLL_E_INT(32, int32_t, uint32_t, uint32_t, double, double)
/* 64-bit AVG divides in integers (d >= 2: no INT64_MIN / -1). */
RCOLL_E_INT(64, int64_t, uint64_t, uint64_t, int64_t, uint64_t)
#undef RCOLL_E_INT

/* ---- float32 / float64 ---- */
#define RCOLL_E_FLOAT(name, T)                                                                 \
    RCOLL_ELEM T rcoll_elem_##name##_sum(T x, T y, int d)                                      \
    {                                                                                          \
        (void)d;                                                                               \
        return x + y;                                                                          \
    }                                                                                          \
    RCOLL_ELEM T rcoll_elem_##name##_prod(T x, T y, int d)                                     \
    {                                                                                          \
        (void)d;                                                                               \
        return x * y;                                                                          \
    }                                                                                          \
    RCOLL_ELEM T rcoll_elem_##name##_min(T x, T y, int d)                                      \
    {                                                                                          \
        (void)d;                                                                               \
        return RCOLL_E_MIN(x, y);                                                              \
    }                                                                                          \
    RCOLL_ELEM T rcoll_elem_##name##_max(T x, T y, int d)                                      \
    {                                                                                          \
        (void)d;                                                                               \
        return RCOLL_E_MAX(x, y);                                                              \
    }                                                                                          \
    RCOLL_ELEM T rcoll_elem_##name##_avg(T x, T y, int d)                                      \
    {                                                                                          \
        T s = x + y;                                                                           \
        return s / (T)d;                                                                       \
    }

RCOLL_E_FLOAT(f32, float)
RCOLL_E_FLOAT(f64, double)
#undef RCOLL_E_FLOAT

/* ---- float16 / bfloat16: in float32, rounded back ---- */
#define RCOLL_E_HALF(name, WIDEN, NARROW)                                                      \
    RCOLL_ELEM uint16_t rcoll_elem_##name##_sum(uint16_t x, uint16_t y, int d)                 \
    {                                                                                          \
        (void)d;                                                                               \
        return NARROW(WIDEN(x) + WIDEN(y));                                                    \
    }                                                                                          \
    RCOLL_ELEM uint16_t rcoll_elem_##name##_prod(uint16_t x, uint16_t y, int d)                \
    {                                                                                          \
        (void)d;                                                                               \
        return NARROW(WIDEN(x) * WIDEN(y));                                                    \
    }                                                                                          \
    RCOLL_ELEM uint16_t rcoll_elem_##name##_min(uint16_t x, uint16_t y, int d)                 \
    {                                                                                          \
        float fx = WIDEN(x), fy = WIDEN(y);                                                    \
        (void)d;                                                                               \
        return NARROW(RCOLL_E_MIN(fx, fy));                                                    \
    }                                                                                          \
    RCOLL_ELEM uint16_t rcoll_elem_##name##_max(uint16_t x, uint16_t y, int d)                 \
    {                                                                                          \
        float fx = WIDEN(x), fy = WIDEN(y);                                                    \
        (void)d;                                                                               \
        return NARROW(RCOLL_E_MAX(fx, fy));                                                    \
    }                                                                                          \
    RCOLL_ELEM uint16_t rcoll_elem_##name##_avg(uint16_t x, uint16_t y, int d)                 \
    {                                                                                          \
        return NARROW(WIDEN(rcoll_elem_##name##_sum(x, y, d)) / (float)d);                    \
    }

RCOLL_E_HALF(f16, rcoll_e_half_to_float, rcoll_e_float_to_half)
RCOLL_E_HALF(bf16, rcoll_e_bf16_to_float, rcoll_e_float_to_bf16)
#undef RCOLL_E_HALF

/* ---- float16 / bfloat16 over many ranks at once (the one-kernel all-reduce) ----
 * A kernel that holds every rank's value folds them in float32 and rounds once, instead of
 * rounding to the 16-bit type after each rank as a chain of two-input reductions must: the
 * sum of n values is then the float32 sum rounded once (AVG: that sum divided by d in float32,
 * rounded once).  bf is 1 for bfloat16, 0 for float16; op as rcoll_op_t (SUM 0, PROD 1,
 * MIN 2, MAX 3, AVG 4).  MIN and MAX give what the two-input chain gives (they are exact). */
RCOLL_ELEM float rcoll_e_widen16(int bf, uint16_t h)
{
    return bf ? rcoll_e_bf16_to_float(h) : rcoll_e_half_to_float(h);
}

RCOLL_ELEM float rcoll_e_fold16(int op, float acc, float x)
{
    return op == 1 ? acc * x : op == 2 ? RCOLL_E_MIN(acc, x) : op == 3 ? RCOLL_E_MAX(acc, x)
                                                                        : acc + x;
}

RCOLL_ELEM uint16_t rcoll_e_fold16_end(int bf, int op, float acc, int d)
{
    float f = op == 4 ? acc / (float)d : acc;
    return bf ? rcoll_e_float_to_bf16(f) : rcoll_e_float_to_half(f);
}

/* ---- bool ---- */
RCOLL_ELEM uint8_t rcoll_elem_bool_or(uint8_t x, uint8_t y, int d)
{
    (void)d;
    return (uint8_t)((x | y) != 0);
}

RCOLL_ELEM uint8_t rcoll_elem_bool_and(uint8_t x, uint8_t y, int d)
{
    (void)d;
    return (uint8_t)((x != 0) & (y != 0));
}

RCOLL_ELEM uint8_t rcoll_elem_bool_xor(uint8_t x, uint8_t y, int d)
{
    (void)d;
    return (uint8_t)((x != 0) ^ (y != 0));
}

/*
 * Every defined datatype x op pair, once: X(DT, OP, T, fn) with DT and OP the numeric values
 * of rcoll_datatype_t and rcoll_op_t (this header needs no rcoll.h; the unit test checks them),
 * T the element's storage type and fn the element function (without its rcoll_elem_ prefix).
 * The device kernels are stamped from it, and so is the launcher's name table; kernel names are
 * rcoll_reduce_<DT>_<OP> (numbers: bool's and-kernel serves three ops).
 * Datatypes: INT8 0, UINT8 1, INT32 2, UINT32 3, INT64 4, UINT64 5, FLOAT16 6, BFLOAT16 7,
 * FLOAT32 8, FLOAT64 9, INT16 10, UINT16 11, BOOL 12.
 * Ops: SUM 0, PROD 1, MIN 2, MAX 3, AVG 4, BAND 5, BOR 6, BXOR 7.
 */
#define RCOLL_ELEM_INT_ROW(X, DT, T, name)                                                     \
    X(DT, 0, T, name##_sum) X(DT, 1, T, name##_prod) X(DT, 2, T, name##_min)                   \
    X(DT, 3, T, name##_max) X(DT, 4, T, name##_avg) X(DT, 5, T, name##_band)                   \
    X(DT, 6, T, name##_bor) X(DT, 7, T, name##_bxor)
#define RCOLL_ELEM_FLOAT_ROW(X, DT, T, name)                                                   \
    X(DT, 0, T, name##_sum) X(DT, 1, T, name##_prod) X(DT, 2, T, name##_min)                   \
    X(DT, 3, T, name##_max) X(DT, 4, T, name##_avg)
#define RCOLL_ELEM_LIST(X)                                                                     \
    RCOLL_ELEM_INT_ROW(X, 0, int8_t, i8)                                                       \
    RCOLL_ELEM_INT_ROW(X, 1, uint8_t, u8)                                                      \
    RCOLL_ELEM_INT_ROW(X, 2, int32_t, i32)                                                     \
    RCOLL_ELEM_INT_ROW(X, 3, uint32_t, u32)                                                    \
    RCOLL_ELEM_INT_ROW(X, 4, int64_t, i64)                                                     \
    RCOLL_ELEM_INT_ROW(X, 5, uint64_t, u64)                                                    \
    RCOLL_ELEM_FLOAT_ROW(X, 6, uint16_t, f16)                                                  \
    RCOLL_ELEM_FLOAT_ROW(X, 7, uint16_t, bf16)                                                 \
    RCOLL_ELEM_FLOAT_ROW(X, 8, float, f32)                                                     \
    RCOLL_ELEM_FLOAT_ROW(X, 9, double, f64)                                                    \
    RCOLL_ELEM_INT_ROW(X, 10, int16_t, i16)                                                    \
    RCOLL_ELEM_INT_ROW(X, 11, uint16_t, u16)                                                   \
    X(12, 0, uint8_t, bool_or) X(12, 1, uint8_t, bool_and) X(12, 2, uint8_t, bool_and)         \
    X(12, 3, uint8_t, bool_or) X(12, 5, uint8_t, bool_and) X(12, 6, uint8_t, bool_or)          \
    X(12, 7, uint8_t, bool_xor)

#endif
