/*
 * perf_data.c - the data side of the perf harness: datatype and operator tables, float16 and
 * bfloat16 encoding, per-rank input values whose reductions are exact in any order, the
 * expected results computed independently of the library, and wrong-element counting.
 * Pure functions of their arguments: no communicator, no I/O, nothing timed.
 */
#include "perf_data.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Datatypes and operators
 * ------------------------------------------------------------------------------------------ */

/* Indexed by rcoll_datatype_t. */
static const char *const dtype_names[RCOLL_NUM_DATATYPES] = {
    "int8",  "uint8",  "int32", "uint32", "int64", "uint64", "half",
    "bfloat16", "float", "double", "int16", "uint16", "bool"};
static const size_t dtype_sizes[RCOLL_NUM_DATATYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
/* "-d all" runs the datatypes in nccl-tests' order, then rcoll's own. */
const rcoll_datatype_t perf_all_dtypes[RCOLL_NUM_DATATYPES] = {
    RCOLL_INT8,    RCOLL_UINT8,   RCOLL_INT32,   RCOLL_UINT32,   RCOLL_INT64,
    RCOLL_UINT64,  RCOLL_FLOAT16, RCOLL_FLOAT32, RCOLL_FLOAT64,  RCOLL_BFLOAT16,
    RCOLL_INT16,   RCOLL_UINT16,  RCOLL_BOOL};
static const char *const op_names[RCOLL_NUM_OPS] = {"sum", "prod", "min",  "max",
                                                    "avg", "band", "bor", "bxor"};
/* "-o all" runs the operators in nccl-tests' order, then the bitwise ones. */
const rcoll_op_t perf_all_ops[RCOLL_NUM_OPS] = {RCOLL_SUM, RCOLL_PROD, RCOLL_MAX,
                                                   RCOLL_MIN, RCOLL_AVG,  RCOLL_BAND,
                                                   RCOLL_BOR, RCOLL_BXOR};

const char *perf_dtype_name(rcoll_datatype_t dt)
{
    return ((unsigned)dt < RCOLL_NUM_DATATYPES) ? dtype_names[dt] : "?";
}

const char *perf_op_name(rcoll_op_t op)
{
    return ((unsigned)op < RCOLL_NUM_OPS) ? op_names[op] : "?";
}

size_t perf_dtype_size(rcoll_datatype_t dt)
{
    return ((unsigned)dt < RCOLL_NUM_DATATYPES) ? dtype_sizes[dt] : 0;
}

static int dtype_is_float(rcoll_datatype_t dt)
{
    return dt == RCOLL_FLOAT16 || dt == RCOLL_BFLOAT16 || dt == RCOLL_FLOAT32 ||
           dt == RCOLL_FLOAT64;
}

static int dtype_is_signed(rcoll_datatype_t dt)
{
    return dt == RCOLL_INT8 || dt == RCOLL_INT16 || dt == RCOLL_INT32 || dt == RCOLL_INT64;
}

int perf_op_defined(rcoll_datatype_t dt, rcoll_op_t op)
{
    if (op == RCOLL_BAND || op == RCOLL_BOR || op == RCOLL_BXOR)
        return !dtype_is_float(dt);
    return !(dt == RCOLL_BOOL && op == RCOLL_AVG);
}

/* ---------------------------------------------------------------------------------------------
 * float16 / bfloat16 conversions (round to nearest even)
 * ------------------------------------------------------------------------------------------ */

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t mag = x & 0x7fffffffu;

    if (mag > 0x7f800000u) /* NaN: keep it quiet */
        return sign | 0x7e00u;
    if (mag >= 0x477ff000u) /* >= 65520 rounds to infinity */
        return sign | 0x7c00u;
    if (mag < 0x38800000u) { /* below 2^-14: subnormal half (units of 2^-24) or zero */
        float a = fabsf(f) * 16777216.0f; /* exact: scaling by a power of two */
        return sign | (uint16_t)lrintf(a); /* 1024 lands on the smallest normal, as it should */
    }
    uint32_t r = mag - (112u << 23); /* rebias the exponent from 127 to 15 */
    r += 0x0fffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t x;

    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    if (exp == 31)
        x = sign | 0x7f800000u | (man << 13);
    else
        x = sign | ((exp + 112u) << 23) | (man << 13);
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* ---------------------------------------------------------------------------------------------
 * Element access
 * ------------------------------------------------------------------------------------------ */

static void store_float(void *buf, size_t k, rcoll_datatype_t dt, double v)
{
    switch (dt) {
    case RCOLL_FLOAT16: ((uint16_t *)buf)[k] = f32_to_f16((float)v); break;
    case RCOLL_BFLOAT16: ((uint16_t *)buf)[k] = f32_to_bf16((float)v); break;
    case RCOLL_FLOAT32: ((float *)buf)[k] = (float)v; break;
    default: ((double *)buf)[k] = v; break;
    }
}

static double load_float(const void *buf, size_t k, rcoll_datatype_t dt)
{
    switch (dt) {
    case RCOLL_FLOAT16: return f16_to_f32(((const uint16_t *)buf)[k]);
    case RCOLL_BFLOAT16: return bf16_to_f32(((const uint16_t *)buf)[k]);
    case RCOLL_FLOAT32: return ((const float *)buf)[k];
    default: return ((const double *)buf)[k];
    }
}

/* Integer elements travel as their low bits in a uint64_t. */
static void store_int(void *buf, size_t k, rcoll_datatype_t dt, uint64_t v)
{
    switch (perf_dtype_size(dt)) {
    case 1: ((uint8_t *)buf)[k] = (uint8_t)v; break;
    case 2: ((uint16_t *)buf)[k] = (uint16_t)v; break;
    case 4: ((uint32_t *)buf)[k] = (uint32_t)v; break;
    default: ((uint64_t *)buf)[k] = v; break;
    }
}

static uint64_t load_bits(const void *buf, size_t k, rcoll_datatype_t dt)
{
    switch (perf_dtype_size(dt)) {
    case 1: return ((const uint8_t *)buf)[k];
    case 2: return ((const uint16_t *)buf)[k];
    case 4: return ((const uint32_t *)buf)[k];
    default: return ((const uint64_t *)buf)[k];
    }
}

static int64_t sign_extend(uint64_t v, unsigned bits)
{
    if (bits >= 64)
        return (int64_t)v;
    uint64_t m = (uint64_t)1 << (bits - 1);
    v &= ((uint64_t)1 << bits) - 1;
    return (int64_t)((v ^ m) - m);
}

/* ---------------------------------------------------------------------------------------------
 * Input values and exact expected results
 * ------------------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t int_value(int r, size_t i)
{
    return mix64((uint64_t)i * 0x9e3779b97f4a7c15ULL + (uint64_t)r * 0xd1b54a32d192ed03ULL + 1);
}

/* bool: 0 two times in three (so that "and" over a few ranks is not always false), else 1 or
 * another non-zero byte, which the library must read as true. */
static uint8_t bool_value(int r, size_t i)
{
    uint64_t h = int_value(r, i);
    return h % 3 ? 0 : (h & 8) ? 1 : (uint8_t)((h >> 8) | 2);
}

/* Largest |value| such that any partial sum of nranks values is exact in the type. */
static int64_t float_amplitude(rcoll_datatype_t dt, int nranks)
{
    int64_t limit = dt == RCOLL_BFLOAT16 ? 256 : dt == RCOLL_FLOAT16 ? 2048 : (int64_t)1 << 24;
    int64_t a = limit / (nranks > 0 ? nranks : 1);
    if (a > 100)
        a = 100;
    return a < 1 ? 1 : a;
}

static double float_value(rcoll_datatype_t dt, rcoll_op_t op, int r, int nranks, size_t i)
{
    if (op == RCOLL_PROD) {
        /* +-1 or +-2; at most ceil(nranks / period) twos per element. */
        uint64_t period = nranks <= 120 ? 8 : (uint64_t)nranks;
        double mag = (((uint64_t)i + (uint64_t)r) % period == 0) ? 2.0 : 1.0;
        return (((uint64_t)i * 3 + (uint64_t)r) % 5 == 0) ? -mag : mag;
    }
    int64_t a = float_amplitude(dt, nranks);
    uint64_t m = (uint64_t)(2 * a + 1); /* odd, so 2i + r visits every residue */
    return (double)((int64_t)(((uint64_t)i * 2 + (uint64_t)r) % m) - a);
}

void perf_fill_input(void *buf, size_t count, rcoll_datatype_t dt, rcoll_op_t op, int rank,
                     int nranks, size_t first)
{
    if (dtype_is_float(dt)) {
        for (size_t k = 0; k < count; k++)
            store_float(buf, k, dt, float_value(dt, op, rank, nranks, first + k));
    } else if (dt == RCOLL_BOOL) {
        for (size_t k = 0; k < count; k++)
            store_int(buf, k, dt, bool_value(rank, first + k));
    } else {
        for (size_t k = 0; k < count; k++)
            store_int(buf, k, dt, int_value(rank, first + k));
    }
}

/* or (sum, max, bor), and (prod, min, band) or xor (bxor) of the truth values; 0 or 1. */
static uint64_t reduce_bool(rcoll_op_t op, int nranks, size_t i)
{
    int any = 0, all = 1, odd = 0;
    for (int r = 0; r < nranks; r++) {
        int t = bool_value(r, i) != 0;
        any |= t, all &= t, odd ^= t;
    }
    if (op == RCOLL_BXOR)
        return (uint64_t)odd;
    return (uint64_t)(op == RCOLL_PROD || op == RCOLL_MIN || op == RCOLL_BAND ? all : any);
}

static uint64_t reduce_int(rcoll_datatype_t dt, rcoll_op_t op, int nranks, size_t i)
{
    unsigned bits = (unsigned)(8 * perf_dtype_size(dt));
    uint64_t mask = bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
    int sgn = dtype_is_signed(dt);
    uint64_t acc = int_value(0, i) & mask;

    for (int r = 1; r < nranks; r++) {
        uint64_t v = int_value(r, i) & mask;
        switch (op) {
        case RCOLL_PROD: acc = (acc * v) & mask; break;
        case RCOLL_MIN:
            if (sgn ? sign_extend(v, bits) < sign_extend(acc, bits) : v < acc)
                acc = v;
            break;
        case RCOLL_MAX:
            if (sgn ? sign_extend(v, bits) > sign_extend(acc, bits) : v > acc)
                acc = v;
            break;
        case RCOLL_BAND: acc &= v; break;
        case RCOLL_BOR: acc |= v; break;
        case RCOLL_BXOR: acc ^= v; break;
        default: acc = (acc + v) & mask; break; /* SUM, AVG */
        }
    }
    if (op == RCOLL_AVG) {
        /* The wrapped sum in the element's type, divided in that type (C truncation). */
        if (sgn)
            acc = (uint64_t)(sign_extend(acc, bits) / (int64_t)nranks) & mask;
        else
            acc = acc / (uint64_t)nranks;
    }
    return acc;
}

static double reduce_float(rcoll_datatype_t dt, rcoll_op_t op, int nranks, size_t i)
{
    /* Every partial result is a small integer (or +-2^k), exact in double and in dt. */
    double acc = float_value(dt, op, 0, nranks, i);
    for (int r = 1; r < nranks; r++) {
        double v = float_value(dt, op, r, nranks, i);
        switch (op) {
        case RCOLL_PROD: acc *= v; break;
        case RCOLL_MIN: acc = v < acc ? v : acc; break;
        case RCOLL_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (op == RCOLL_AVG) {
        if (dt == RCOLL_FLOAT64)
            acc = acc / (double)nranks;
        else /* float32 division; float16/bfloat16 round once more in store_float */
            acc = (double)((float)acc / (float)nranks);
    }
    return acc;
}

void perf_fill_reduced(void *buf, size_t count, rcoll_datatype_t dt, rcoll_op_t op, int nranks,
                       size_t first)
{
    for (size_t k = 0; k < count; k++) {
        if (dtype_is_float(dt))
            store_float(buf, k, dt, reduce_float(dt, op, nranks, first + k));
        else if (dt == RCOLL_BOOL)
            store_int(buf, k, dt, reduce_bool(op, nranks, first + k));
        else
            store_int(buf, k, dt, reduce_int(dt, op, nranks, first + k));
    }
}

/* Distance in units in the last place between two finite values of one float type. */
static uint64_t ulp_distance(uint64_t a, uint64_t b, rcoll_datatype_t dt)
{
    unsigned bits = (unsigned)(8 * perf_dtype_size(dt));
    uint64_t sbit = (uint64_t)1 << (bits - 1);
    uint64_t ma = a & (sbit - 1), mb = b & (sbit - 1);
    if ((a & sbit) == (b & sbit))
        return ma > mb ? ma - mb : mb - ma;
    return ma + mb; /* opposite signs: distance through zero (cannot overflow: mags < 2^63) */
}

size_t perf_count_wrong(const void *got, const void *expected, size_t count,
                        rcoll_datatype_t dt, rcoll_op_t op)
{
    size_t wrong = 0;

    if (!dtype_is_float(dt)) {
        for (size_t k = 0; k < count; k++)
            wrong += load_bits(got, k, dt) != load_bits(expected, k, dt);
        return wrong;
    }
    for (size_t k = 0; k < count; k++) {
        double g = load_float(got, k, dt), e = load_float(expected, k, dt);
        if (g == e)
            continue;
        if (op == RCOLL_AVG && !isnan(g) && !isinf(g) &&
            ulp_distance(load_bits(got, k, dt), load_bits(expected, k, dt), dt) <= 2)
            continue;
        wrong++;
    }
    return wrong;
}
