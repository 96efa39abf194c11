/*
 * dtref.c - independent datatype helpers for the collective tests (dtref.h).
 */
#include <math.h>
#include <string.h>

#include "dtref.h"
#include "rcoll.h"

const size_t dt_size[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
const char *const dt_name[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                               "half", "bfloat16", "float", "double"};
const char *const op_name[] = {"sum", "prod", "min", "max", "avg"};

int dt_is_float(int dt) { return dt >= RCOLL_FLOAT16; }

int dt_is_signed(int dt) { return dt == RCOLL_INT8 || dt == RCOLL_INT32 || dt == RCOLL_INT64; }

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
    case RCOLL_UINT8: { uint8_t x; memcpy(&x, p, 1); return x; }
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
