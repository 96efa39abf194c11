/*
 * dtref.c - independent datatype helpers for the collective tests (dtref.h).
 */
#include <math.h>
#include <string.h>

#include "dtref.h"
#include "rcoll.h"

const size_t dt_size[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
const char *const dt_name[] = {"int8", "uint8", "int32",  "uint32", "int64",  "uint64", "half",
                               "bfloat16", "float", "double", "int16", "uint16", "bool"};
const char *const op_name[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};

int dt_is_float(int dt) { return dt >= RCOLL_FLOAT16 && dt <= RCOLL_FLOAT64; }

int dt_is_signed(int dt)
{
    return dt == RCOLL_INT8 || dt == RCOLL_INT16 || dt == RCOLL_INT32 || dt == RCOLL_INT64;
}

int op_is_bitwise(int op) { return op == RCOLL_BAND || op == RCOLL_BOR || op == RCOLL_BXOR; }

int dt_op_defined(int dt, int op)
{
    if (op_is_bitwise(op)) return !dt_is_float(dt);
    return !(dt == RCOLL_BOOL && op == RCOLL_AVG);
}

int dt_op_narrow(int dt, int op)
{
    return dt == RCOLL_INT16 || dt == RCOLL_UINT16 || dt == RCOLL_BOOL || op_is_bitwise(op);
}

uint16_t ref_half(double v)
{
    if (v == 0) return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    double a = fabs(v);
    int e = 0;
    while (a >= 2.0) { a /= 2; e++; }
    while (a < 1.0) { a *= 2; e--; }
    uint16_t mant = (uint16_t)lround((a - 1.0) * 1024.0);
    if (mant == 1024) { mant = 0; e++; }
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | mant);
}

double ref_half_val(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0) v = ldexp(m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

uint16_t ref_bf16(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* small integers: the low half is zero */
}

double ref_bf16_val(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void ref_store_bits(void *buf, int dt, size_t i, uint64_t v)
{
    char *p = (char *)buf + i * dt_size[dt];
    if (dt_size[dt] == 1) { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); }
    else if (dt_size[dt] == 2) { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); }
    else if (dt_size[dt] == 4) { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); }
    else memcpy(p, &v, 8);
}

void ref_store(void *buf, int dt, size_t i, double v)
{
    char *p = (char *)buf + i * dt_size[dt];
    switch (dt) {
    case RCOLL_FLOAT16: { uint16_t x = ref_half(v); memcpy(p, &x, 2); break; }
    case RCOLL_BFLOAT16: { uint16_t x = ref_bf16(v); memcpy(p, &x, 2); break; }
    case RCOLL_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case RCOLL_FLOAT64: memcpy(p, &v, 8); break;
    default: ref_store_bits(buf, dt, i, (uint64_t)(int64_t)v); break;
    }
}

double ref_load(const void *buf, int dt, size_t i)
{
    const char *p = (const char *)buf + i * dt_size[dt];
    switch (dt) {
    case RCOLL_INT8: { int8_t x; memcpy(&x, p, 1); return x; }
    case RCOLL_UINT8:
    case RCOLL_BOOL: { uint8_t x; memcpy(&x, p, 1); return x; }
    case RCOLL_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case RCOLL_UINT16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case RCOLL_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case RCOLL_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case RCOLL_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case RCOLL_UINT64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case RCOLL_FLOAT16: { uint16_t x; memcpy(&x, p, 2); return ref_half_val(x); }
    case RCOLL_BFLOAT16: { uint16_t x; memcpy(&x, p, 2); return ref_bf16_val(x); }
    case RCOLL_FLOAT32: { float x; memcpy(&x, p, 4); return x; }
    default: { double x; memcpy(&x, p, 8); return x; }
    }
}

int64_t ref_gen(int dt, int op, int r, size_t i, int salt)
{
    uint64_t h = (uint64_t)i * 2654435761u + (uint64_t)r * 40503u + (uint64_t)op * 977u +
                 (uint64_t)salt * 131u;
    h ^= h >> 13;
    if (dt == RCOLL_BOOL) return (int64_t)(h % 3);
    switch (op) {
    case RCOLL_PROD: return 1 + (int64_t)(h % 2);           /* 1 or 2: 2^9 fits half */
    case RCOLL_MIN:
    case RCOLL_MAX: return (int64_t)(h % 120);             /* fits int8 and uint8 */
    default: return (int64_t)(h % 9);                      /* 0..8 */
    }
}

/* Wrap an exact integer result to the datatype's range (modular arithmetic). */
static double ref_wrap(int dt, int64_t v)
{
    switch (dt) {
    case RCOLL_INT8: return (int8_t)(uint8_t)v;
    case RCOLL_UINT8: return (uint8_t)v;
    case RCOLL_INT16: return (int16_t)(uint16_t)v;
    case RCOLL_UINT16: return (uint16_t)v;
    case RCOLL_INT32: return (int32_t)(uint32_t)v;
    case RCOLL_UINT32: return (uint32_t)v;
    default: return (double)v;
    }
}

double ref_expected(int dt, int op, int n, size_t i, int salt)
{
    if (dt == RCOLL_BOOL) { /* or (sum, max, bor), and (prod, min, band), xor (bxor) */
        int any = 0, all = 1, odd = 0;
        for (int r = 0; r < n; r++) {
            int t = ref_gen(dt, op, r, i, salt) != 0;
            any |= t, all &= t, odd ^= t;
        }
        if (op == RCOLL_BXOR) return odd;
        return op == RCOLL_PROD || op == RCOLL_MIN || op == RCOLL_BAND ? all : any;
    }
    int64_t acc = ref_gen(dt, op, 0, i, salt);
    for (int r = 1; r < n; r++) {
        int64_t v = ref_gen(dt, op, r, i, salt);
        switch (op) {
        case RCOLL_PROD: acc *= v; break;
        case RCOLL_MIN: acc = v < acc ? v : acc; break;
        case RCOLL_MAX: acc = v > acc ? v : acc; break;
        case RCOLL_BAND: acc &= v; break;
        case RCOLL_BOR: acc |= v; break;
        case RCOLL_BXOR: acc ^= v; break;
        default: acc += v; break;
        }
    }
    if (op != RCOLL_AVG) return dt_is_float(dt) ? (double)acc : ref_wrap(dt, acc);
    if (dt_is_float(dt)) return (double)acc / n;
    /* Integer AVG: the sum in the element type, then C division (truncating). */
    double w = ref_wrap(dt, acc);
    if (dt_is_signed(dt)) return (double)((int64_t)w / n);
    return (double)((uint64_t)w / (uint64_t)n);
}

int ref_close_enough(int dt, int op, double got, double want)
{
    if (op != RCOLL_AVG || !dt_is_float(dt)) return got == want;
    double rel = dt == RCOLL_FLOAT16 ? 1.0 / 512 : dt == RCOLL_BFLOAT16 ? 1.0 / 64
               : dt == RCOLL_FLOAT32 ? 1e-6 : 1e-12;
    return fabs(got - want) <= rel * (fabs(want) > 1 ? fabs(want) : 1);
}
