/*
 * test_reduce.c - unit test of algo/reduce.c: every datatype x op x kernel variant against a
 * reference computed here independently (float64 arithmetic and __int128 integers, its own
 * float16/bfloat16 rounding built on frexp/ldexp/nearbyint, bool as C truth values), plus the
 * conversions, aliasing, vector tails, AVG divisors, integer wrap-around, bool normalization,
 * the pairs that are not defined (bitwise on floats, AVG on bool) and bad arguments.  No
 * sockets, no threads.
 * Prints "N passed, M failed, K skipped" (a kernel variant this CPU lacks is a skip).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "check.h"
#include "rcoll.h"

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define dt_name(dt) rcoll_dt_name((rcoll_datatype_t)(dt))
#define op_name(op) rcoll_op_name((rcoll_op_t)(op))

static size_t dt_size(rcoll_datatype_t dt)
{
    static const size_t sz[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
    return sz[dt];
}

/* The integer types (not BOOL, which has its own reference). */
static int dt_is_int(rcoll_datatype_t dt)
{
    return dt <= RCOLL_UINT64 || dt == RCOLL_INT16 || dt == RCOLL_UINT16;
}

static int dt_is_signed(rcoll_datatype_t dt)
{
    return dt == RCOLL_INT8 || dt == RCOLL_INT16 || dt == RCOLL_INT32 || dt == RCOLL_INT64;
}

static int op_is_bitwise(rcoll_op_t op)
{
    return op == RCOLL_BAND || op == RCOLL_BOR || op == RCOLL_BXOR;
}

/* Which pairs are defined, stated independently of rcoll_reduce_defined. */
static int pair_defined(rcoll_datatype_t dt, rcoll_op_t op)
{
    if (op_is_bitwise(op))
        return dt_is_int(dt) || dt == RCOLL_BOOL;
    return !(dt == RCOLL_BOOL && op == RCOLL_AVG);
}

/* ---------------------------------------------------------------------------------------------
 * Independent reference for the 16-bit float formats: a format with mb mantissa bits and
 * maximum exponent emax (float16: 10, 15; bfloat16: 7, 127).
 * ------------------------------------------------------------------------------------------ */
static double ref_small_to_double(uint16_t h, int mb, int emax)
{
    int ebits = mb == 10 ? 5 : 8;
    int sign = h >> 15;
    int e = (h >> mb) & ((1 << ebits) - 1);
    int m = h & ((1 << mb) - 1);
    double v;

    if (e == (1 << ebits) - 1)
        v = m != 0 ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - emax - mb);
    else
        v = ldexp((double)(m | (1 << mb)), e - emax - mb);
    return sign ? -v : v;
}

/* Round a double to the format, ties to even.  NaN gives the canonical quiet NaN. */
static uint16_t ref_double_to_small(double v, int mb, int emax)
{
    int ebits = mb == 10 ? 5 : 8;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    uint16_t inf = (uint16_t)(sign | (((1 << ebits) - 1) << mb));
    double a = fabs(v);
    int emin = 1 - emax;

    if (isnan(v))
        return (uint16_t)(inf | (1 << (mb - 1)));
    if (a >= ldexp(2.0 - ldexp(1.0, -(mb + 1)), emax))
        return inf;
    if (a < ldexp(1.0, emin)) {
        double q = nearbyint(ldexp(a, mb - emin)); /* subnormal; 2^mb is the smallest normal */
        return (uint16_t)(sign | (uint16_t)q);
    }
    int k;
    frexp(a, &k);
    int e = k - 1; /* a in [2^e, 2^(e+1)) */
    double q = nearbyint(ldexp(a, mb - e));
    if (q == ldexp(1.0, mb + 1)) {
        q /= 2;
        e++;
    }
    if (e > emax)
        return inf;
    return (uint16_t)(sign | ((e + emax) << mb) | ((uint16_t)q - (1 << mb)));
}

static double ref_h2d(uint16_t h)
{
    return ref_small_to_double(h, 10, 15);
}

static uint16_t ref_d2h(double v)
{
    return ref_double_to_small(v, 10, 15);
}

static double ref_b2d(uint16_t h)
{
    return ref_small_to_double(h, 7, 127);
}

static uint16_t ref_d2b(double v)
{
    return ref_double_to_small(v, 7, 127);
}

static int h_is_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

static int b_is_nan(uint16_t h)
{
    return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t dbits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

/* ---------------------------------------------------------------------------------------------
 * Element access and the reference reduction
 * ------------------------------------------------------------------------------------------ */
static i128 load_int(rcoll_datatype_t dt, const void *p, size_t i)
{
    switch (dt) {
    case RCOLL_INT8: return ((const int8_t *)p)[i];
    case RCOLL_UINT8: return ((const uint8_t *)p)[i];
    case RCOLL_INT16: return ((const int16_t *)p)[i];
    case RCOLL_UINT16: return ((const uint16_t *)p)[i];
    case RCOLL_INT32: return ((const int32_t *)p)[i];
    case RCOLL_UINT32: return ((const uint32_t *)p)[i];
    case RCOLL_INT64: return ((const int64_t *)p)[i];
    default: return ((const uint64_t *)p)[i];
    }
}

/* Reduce a wide value modulo 2^bits into the type's range. */
static i128 wrap_int(rcoll_datatype_t dt, i128 v)
{
    int bits = (int)dt_size(dt) * 8;
    u128 mask = bits == 64 ? (u128)UINT64_MAX : (((u128)1 << bits) - 1);
    u128 u = (u128)v & mask;
    if (dt_is_signed(dt) && (u >> (bits - 1)) != 0)
        return (i128)u - ((i128)1 << bits);
    return (i128)u;
}

static void store_int(rcoll_datatype_t dt, void *p, size_t i, i128 v)
{
    switch (dt) {
    case RCOLL_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case RCOLL_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case RCOLL_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case RCOLL_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case RCOLL_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case RCOLL_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case RCOLL_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: ((uint64_t *)p)[i] = (uint64_t)v; break;
    }
}

static double ref_apply(rcoll_op_t op, double x, double y)
{
    switch (op) {
    case RCOLL_PROD: return x * y;
    case RCOLL_MIN: return x < y ? x : y;
    case RCOLL_MAX: return x > y ? x : y;
    default: return x + y;
    }
}

/* Reference for element i of (a OP b) with AVG divisor d, written to out[i]. */
static void ref_element(rcoll_datatype_t dt, rcoll_op_t op, int d, const void *a, const void *b,
                        void *out, size_t i)
{
    int divide = op == RCOLL_AVG && d > 1;

    if (dt == RCOLL_BOOL) {
        int x = ((const unsigned char *)a)[i] != 0, y = ((const unsigned char *)b)[i] != 0, r;
        switch (op) {
        case RCOLL_PROD:
        case RCOLL_MIN:
        case RCOLL_BAND: r = x && y; break;
        case RCOLL_BXOR: r = x != y; break;
        default: r = x || y; break; /* SUM, MAX, BOR */
        }
        ((unsigned char *)out)[i] = (unsigned char)r;
        return;
    }
    if (dt_is_int(dt)) {
        i128 x = load_int(dt, a, i), y = load_int(dt, b, i), r;
        /* Bitwise on the two's complement bits: the low bits of the u128 forms. */
        u128 ux = (u128)x, uy = (u128)y;
        switch (op) {
        case RCOLL_PROD: r = wrap_int(dt, (i128)(ux * uy)); break;
        case RCOLL_MIN: r = x < y ? x : y; break;
        case RCOLL_MAX: r = x > y ? x : y; break;
        case RCOLL_BAND: r = wrap_int(dt, (i128)(ux & uy)); break;
        case RCOLL_BOR: r = wrap_int(dt, (i128)(ux | uy)); break;
        case RCOLL_BXOR: r = wrap_int(dt, (i128)(ux ^ uy)); break;
        default: r = wrap_int(dt, x + y); break;
        }
        if (divide)
            r /= d; /* C division truncates toward zero */
        store_int(dt, out, i, r);
        return;
    }
    switch (dt) {
    case RCOLL_FLOAT16: {
        /* op in float32 (double then float: exact for halves, then one float rounding). */
        uint16_t x = ((const uint16_t *)a)[i], y = ((const uint16_t *)b)[i];
        float r = (float)ref_apply(op, ref_h2d(x), ref_h2d(y));
        uint16_t h = ref_d2h(r);
        if (divide)
            h = ref_d2h((float)(ref_h2d(h) / d));
        ((uint16_t *)out)[i] = h;
        break;
    }
    case RCOLL_BFLOAT16: {
        uint16_t x = ((const uint16_t *)a)[i], y = ((const uint16_t *)b)[i];
        float r = (float)ref_apply(op, ref_b2d(x), ref_b2d(y));
        uint16_t h = ref_d2b(r);
        if (divide)
            h = ref_d2b((float)(ref_b2d(h) / d));
        ((uint16_t *)out)[i] = h;
        break;
    }
    case RCOLL_FLOAT32: {
        /* float op == double op rounded to float for +, *, / (53 >= 2*24 + 2). */
        float x = ((const float *)a)[i], y = ((const float *)b)[i];
        float r = (float)ref_apply(op, x, y);
        if (divide)
            r = (float)((double)r / d);
        ((float *)out)[i] = r;
        break;
    }
    default: {
        double x = ((const double *)a)[i], y = ((const double *)b)[i];
        double r = ref_apply(op, x, y);
        if (divide)
            r = r / d;
        ((double *)out)[i] = r;
        break;
    }
    }
}

/* Equal bit patterns, or both NaN for the floating types. */
static int elem_equal(rcoll_datatype_t dt, const void *p, const void *q, size_t i)
{
    switch (dt) {
    case RCOLL_FLOAT16: {
        uint16_t x = ((const uint16_t *)p)[i], y = ((const uint16_t *)q)[i];
        return x == y || (h_is_nan(x) && h_is_nan(y));
    }
    case RCOLL_BFLOAT16: {
        uint16_t x = ((const uint16_t *)p)[i], y = ((const uint16_t *)q)[i];
        return x == y || (b_is_nan(x) && b_is_nan(y));
    }
    case RCOLL_FLOAT32: {
        float x = ((const float *)p)[i], y = ((const float *)q)[i];
        return fbits(x) == fbits(y) || (isnan(x) && isnan(y));
    }
    case RCOLL_FLOAT64: {
        double x = ((const double *)p)[i], y = ((const double *)q)[i];
        return dbits(x) == dbits(y) || (isnan(x) && isnan(y));
    }
    default: {
        size_t es = dt_size(dt);
        return memcmp((const char *)p + i * es, (const char *)q + i * es, es) == 0;
    }
    }
}

static void fill_random(rcoll_datatype_t dt, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        int special = (r & 7) == 0;
        uint64_t pick = (r >> 3) % 8;
        switch (dt) {
        case RCOLL_FLOAT16:
        case RCOLL_BFLOAT16:
            ((uint16_t *)p)[i] = (uint16_t)(r >> 16); /* every pattern: NaN, Inf, subnormal */
            break;
        case RCOLL_BOOL: {
            /* Mostly 0 and 1; one in four any byte (true unless 0: 0x80, 0xff, 2, ...). */
            uint8_t any = (uint8_t)(r >> 24);
            ((uint8_t *)p)[i] = (r & 3) == 0 ? any : (uint8_t)((r >> 2) & 1);
            break;
        }
        case RCOLL_FLOAT32: {
            static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN,
                                       FLT_TRUE_MIN, -FLT_MIN, FLT_MAX};
            float m = (float)((int64_t)(r >> 40) - (1 << 23)) / 8388608.0f; /* [-1, 1) */
            float f = ldexpf(m, (int)((r >> 8) % 60) - 30);
            ((float *)p)[i] = special ? sp[pick] : f;
            break;
        }
        case RCOLL_FLOAT64: {
            static const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN,
                                        4.9e-324, -DBL_MIN, DBL_MAX};
            double m = ((double)(r >> 11) - 0x1p52) / 0x1p52; /* [-1, 1) */
            double f = ldexp(m, (int)((r >> 3) % 200) - 100);
            ((double *)p)[i] = special ? sp[pick] : f;
            break;
        }
        default: {
            /* Full range, with extremes often enough to hit every wrap. */
            static const int64_t sp[] = {0,  1,   -1,    INT64_MAX, INT64_MIN,
                                         2, -2, 127, 32767, -32768};
            i128 v = special ? (i128)sp[(r >> 3) % 10] : (i128)(int64_t)rnd();
            store_int(dt, p, i, wrap_int(dt, v));
            break;
        }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reduction matrix
 * ------------------------------------------------------------------------------------------ */
enum { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B, ALIAS_A_B, ALIAS_ALL, ALIAS_COUNT };
static const char *alias_name[] = {"none", "dst==a", "dst==b", "a==b", "dst==a==b"};

static const size_t g_counts[] = {0, 1, 2, 3, 7, 8, 15, 16, 31, 33, 64, 255, 1000, 4097};
#define NCOUNTS (sizeof(g_counts) / sizeof(g_counts[0]))
#define MAXCOUNT 4097

/* Buffers sized exactly (plus one guard element each side) and offset by one element from
 * malloc's alignment, so that vector loops run unaligned and overruns show. */
typedef struct {
    unsigned char *base;
    void *p;
} tbuf_t;

static tbuf_t tbuf_alloc(rcoll_datatype_t dt, size_t n)
{
    tbuf_t t;
    size_t es = dt_size(dt);
    t.base = malloc((n + 2) * es);
    if (t.base == NULL) {
        perror("malloc");
        exit(2);
    }
    memset(t.base, 0xA5, (n + 2) * es);
    t.p = t.base + es;
    return t;
}

static int tbuf_guards_ok(const tbuf_t *t, rcoll_datatype_t dt, size_t n)
{
    size_t es = dt_size(dt);
    for (size_t k = 0; k < es; k++) {
        if (t->base[k] != 0xA5 || t->base[(n + 1) * es + k] != 0xA5)
            return 0;
    }
    return 1;
}

static void run_one(rcoll_reduce_isa_t isa, rcoll_datatype_t dt, rcoll_op_t op, size_t n,
                    int alias, int d)
{
    size_t es = dt_size(dt);
    tbuf_t ta = tbuf_alloc(dt, n), tb = tbuf_alloc(dt, n), td = tbuf_alloc(dt, n);
    unsigned char *in_a = malloc(n * es + 1), *in_b = malloc(n * es + 1);
    unsigned char *want = malloc(n * es + 1);

    fill_random(dt, ta.p, n);
    fill_random(dt, tb.p, n);
    fill_random(dt, td.p, n);

    void *a = ta.p, *b = tb.p, *dst = td.p;
    switch (alias) {
    case ALIAS_DST_A: dst = a; break;
    case ALIAS_DST_B: dst = b; break;
    case ALIAS_A_B: b = a; break;
    case ALIAS_ALL: b = a; dst = a; break;
    default: break;
    }
    memcpy(in_a, a, n * es);
    memcpy(in_b, b, n * es);
    for (size_t i = 0; i < n; i++)
        ref_element(dt, op, d, in_a, in_b, want, i);

    rcoll_reduce_local(dst, a, b, n, dt, op, d);

    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++) {
        if (!elem_equal(dt, dst, want, i))
            bad = i;
    }
    int guards = tbuf_guards_ok(&ta, dt, n) && tbuf_guards_ok(&tb, dt, n) &&
                 tbuf_guards_ok(&td, dt, n);
    /* Inputs that are not the destination must be unchanged. */
    int inputs = (a == dst || memcmp(a, in_a, n * es) == 0) &&
                 (b == dst || memcmp(b, in_b, n * es) == 0);
    if (bad < n) {
        uint64_t got = 0, exp = 0, xa = 0, xb = 0;
        memcpy(&got, (char *)dst + bad * es, es);
        memcpy(&exp, want + bad * es, es);
        memcpy(&xa, in_a + bad * es, es);
        memcpy(&xb, in_b + bad * es, es);
        CHECK(0, "%s %s %s n=%zu %s d=%d: element %zu a=0x%llx b=0x%llx got 0x%llx want 0x%llx",
              rcoll_reduce_isa_name(isa), dt_name(dt), op_name(op), n, alias_name[alias], d, bad,
              (unsigned long long)xa, (unsigned long long)xb, (unsigned long long)got,
              (unsigned long long)exp);
    } else {
        CHECK(guards && inputs, "%s %s %s n=%zu %s d=%d: guards %d inputs %d",
              rcoll_reduce_isa_name(isa), dt_name(dt), op_name(op), n, alias_name[alias], d,
              guards, inputs);
    }
    free(ta.base);
    free(tb.base);
    free(td.base);
    free(in_a);
    free(in_b);
    free(want);
}

static void test_matrix(rcoll_reduce_isa_t isa)
{
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++) {
        for (int op = 0; op < RCOLL_NUM_OPS; op++) {
            if (!pair_defined(dt, op))
                continue; /* test_undefined */
            for (size_t c = 0; c < NCOUNTS; c++) {
                for (int alias = 0; alias < ALIAS_COUNT; alias++) {
                    if (op == RCOLL_AVG) {
                        for (int d = -1; d <= 9; d++)
                            run_one(isa, dt, op, g_counts[c], alias, d);
                    } else {
                        /* The divisor must be ignored. */
                        run_one(isa, dt, op, g_counts[c], alias, (int)(rnd() % 10));
                    }
                }
            }
        }
    }
}

/* rcoll_reduce_avg_finish against the reference, and AVG(d) == SUM then finish(d). */
static void test_finish(rcoll_reduce_isa_t isa)
{
    static const size_t counts[] = {0, 1, 7, 15, 16, 17, 33, 1000, 4097};
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++) {
        size_t es = dt_size(dt);
        if (!pair_defined(dt, RCOLL_AVG))
            continue;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            size_t n = counts[c];
            for (int d = -1; d <= 9; d++) {
                tbuf_t t = tbuf_alloc(dt, n);
                unsigned char *zero = calloc(n + 1, es), *want = malloc(n * es + 1);
                unsigned char *orig = malloc(n * es + 1);
                fill_random(dt, t.p, n);
                memcpy(orig, t.p, n * es);
                for (size_t i = 0; i < n; i++) {
                    if (d <= 1)
                        memcpy(want + i * es, orig + i * es, es);
                    else
                        ref_element(dt, RCOLL_AVG, d, orig, zero, want, i);
                }
                /* The reference adds +0 first, which turns -0 into +0; -0 / d is -0. */
                for (size_t i = 0; i < n && d > 1 && !dt_is_int(dt); i++) {
                    int neg_zero = 0;
                    if (dt == RCOLL_FLOAT32)
                        neg_zero = fbits(((float *)orig)[i]) == 0x80000000u;
                    else if (dt == RCOLL_FLOAT64)
                        neg_zero = dbits(((double *)orig)[i]) == 0x8000000000000000ull;
                    else
                        neg_zero = ((uint16_t *)orig)[i] == 0x8000;
                    if (neg_zero)
                        memcpy(want + i * es, orig + i * es, es);
                }
                rcoll_reduce_avg_finish(t.p, n, dt, d);
                size_t bad = n;
                for (size_t i = 0; i < n && bad == n; i++) {
                    if (!elem_equal(dt, t.p, want, i))
                        bad = i;
                }
                CHECK(bad == n && tbuf_guards_ok(&t, dt, n),
                      "%s finish %s n=%zu d=%d: first bad element %zu",
                      rcoll_reduce_isa_name(isa), dt_name(dt), n, d, bad);

                /* AVG(d) versus SUM followed by finish(d), bit for bit. */
                if (n > 0 && d > 1) {
                    unsigned char *a = malloc(n * es), *b = malloc(n * es);
                    unsigned char *r1 = malloc(n * es), *r2 = malloc(n * es);
                    fill_random(dt, a, n);
                    fill_random(dt, b, n);
                    rcoll_reduce_local(r1, a, b, n, dt, RCOLL_AVG, d);
                    rcoll_reduce_local(r2, a, b, n, dt, RCOLL_SUM, 0);
                    rcoll_reduce_avg_finish(r2, n, dt, d);
                    size_t diff = n;
                    for (size_t i = 0; i < n && diff == n; i++) {
                        if (!elem_equal(dt, r1, r2, i))
                            diff = i;
                    }
                    CHECK(diff == n, "%s %s avg(d=%d) != sum+finish at element %zu",
                          rcoll_reduce_isa_name(isa), dt_name(dt), d, diff);
                    free(a);
                    free(b);
                    free(r1);
                    free(r2);
                }
                free(t.base);
                free(zero);
                free(want);
                free(orig);
            }
        }
    }
}

/* Every float16 / bfloat16 pattern through the vector conversions: x + (-0) == x exactly. */
static void test_kernel_conversions(rcoll_reduce_isa_t isa)
{
    enum { N = 65536 };
    uint16_t *x = malloc(N * 2), *z = malloc(N * 2), *r = malloc(N * 2);
    for (int k = 0; k < 2; k++) {
        rcoll_datatype_t dt = k == 0 ? RCOLL_FLOAT16 : RCOLL_BFLOAT16;
        for (uint32_t i = 0; i < N; i++) {
            x[i] = (uint16_t)i;
            z[i] = 0x8000;
        }
        rcoll_reduce_local(r, x, z, N, dt, RCOLL_SUM, 0);
        long bad = 0;
        for (uint32_t i = 0; i < N; i++) {
            int nan = k == 0 ? h_is_nan(x[i]) : b_is_nan(x[i]);
            int rnan = k == 0 ? h_is_nan(r[i]) : b_is_nan(r[i]);
            if (nan ? !rnan : r[i] != x[i])
                bad++;
        }
        CHECK(bad == 0, "%s %s: x + -0 != x for %ld patterns", rcoll_reduce_isa_name(isa),
              dt_name(dt), bad);
    }
    free(x);
    free(z);
    free(r);
}

/* ---------------------------------------------------------------------------------------------
 * Scalar conversions
 * ------------------------------------------------------------------------------------------ */
static void test_half_conversions(void)
{
    long bad_widen = 0, bad_trip = 0, bad_nan = 0, bad_round = 0;

    for (uint32_t h = 0; h < 65536; h++) {
        float f = rcoll_half_to_float((uint16_t)h);
        double want = ref_h2d((uint16_t)h);
        if (h_is_nan((uint16_t)h)) {
            uint16_t back = rcoll_float_to_half(f);
            if (!isnan(f) || !h_is_nan(back) || (back & 0x200) == 0)
                bad_nan++;
            continue;
        }
        if (fbits(f) != fbits((float)want))
            bad_widen++;
        if (rcoll_float_to_half(f) != h)
            bad_trip++;
        /* Midpoint to the next pattern (same sign), and one float ulp either side of it. */
        if ((h & 0x7fff) < 0x7c00) {
            double next = ref_h2d((uint16_t)(h + 1));
            if ((h & 0x7fff) == 0x7bff)
                next = copysign(65536.0, want);
            double mid = (want + next) / 2; /* exact in float: 12 significant bits */
            float fm = (float)mid;
            float lo = nextafterf(fm, 0.0f), hi = nextafterf(fm, copysignf(INFINITY, fm));
            if (rcoll_float_to_half(fm) != ref_d2h(fm) || rcoll_float_to_half(lo) != ref_d2h(lo) ||
                rcoll_float_to_half(hi) != ref_d2h(hi))
                bad_round++;
            /* ties go to the even pattern */
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            if (rcoll_float_to_half(fm) != even)
                bad_round++;
        }
    }
    CHECK(bad_widen == 0, "half->float: %ld patterns differ from the reference", bad_widen);
    CHECK(bad_trip == 0, "half->float->half: %ld patterns do not round-trip", bad_trip);
    CHECK(bad_nan == 0, "half NaN: %ld patterns lose NaN-ness or quietness", bad_nan);
    CHECK(bad_round == 0, "float->half midpoints: %ld wrong", bad_round);

    /* Strided sweep over all floats plus random patterns. */
    long bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
        float f = bits_f((uint32_t)u);
        uint16_t got = rcoll_float_to_half(f), want = ref_d2h(f);
        if (isnan(f) ? !h_is_nan(got) : got != want)
            bad++;
    }
    for (int i = 0; i < 2000000; i++) {
        float f = bits_f((uint32_t)rnd());
        uint16_t got = rcoll_float_to_half(f), want = ref_d2h(f);
        if (isnan(f) ? !h_is_nan(got) : got != want)
            bad++;
    }
    CHECK(bad == 0, "float->half sweep: %ld wrong", bad);

    /* Named cases. */
    struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {65504.0f, 0x7bff},                  /* largest half */
        {65519.99f, 0x7bff},                 /* just under the overflow tie */
        {65520.0f, 0x7c00},                  /* the tie goes to (even) Inf */
        {-65520.0f, 0xfc00},
        {1e9f, 0x7c00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-24f, 0x0001},                  /* smallest subnormal */
        {0x1p-25f, 0x0000},                  /* tie to even: 0 */
        {0x1.8p-25f, 0x0001},
        {0x1.8p-24f, 0x0002},                /* 1.5 steps: tie to even 2 */
        {0x1.4p-23f, 0x0002},                /* 2.5 steps: tie to even 2 */
        {0x1p-14f, 0x0400},                  /* smallest normal */
        {0x1.ff8p-15f, 0x03ff},              /* largest subnormal */
        {0x1.ffcp-15f, 0x0400},              /* 1023.5 steps round up into the normals */
        {0x1.ff0p-15f, 0x03fe},
        {1.0f + 0x1p-11f, 0x3c00},           /* tie to even, down */
        {1.0f + 0x3p-11f, 0x3c02},           /* tie to even, up */
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01}, /* just over the tie */
        {FLT_TRUE_MIN, 0x0000},
        {-FLT_TRUE_MIN, 0x8000},
        {0.1f, 0x2e66},
        {0.333333343f, 0x3555},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint16_t got = rcoll_float_to_half(cases[i].f);
        CHECK(got == cases[i].h, "float_to_half(%a) = 0x%04x, want 0x%04x", (double)cases[i].f,
              got, cases[i].h);
    }
    CHECK(fbits(rcoll_half_to_float(0x0001)) == fbits(0x1p-24f), "half 0x0001 != 2^-24");
    CHECK(fbits(rcoll_half_to_float(0x83ff)) == fbits(-0x1.ff8p-15f), "half 0x83ff");
    CHECK(isnan(rcoll_half_to_float(0x7c01)) && isnan(rcoll_half_to_float(0xfe00)), "half NaN");
}

static void test_bf16_conversions(void)
{
    long bad_widen = 0, bad_trip = 0, bad_nan = 0, bad_round = 0;

    for (uint32_t h = 0; h < 65536; h++) {
        float f = rcoll_bf16_to_float((uint16_t)h);
        double want = ref_b2d((uint16_t)h);
        if (b_is_nan((uint16_t)h)) {
            uint16_t back = rcoll_float_to_bf16(f);
            if (!isnan(f) || !b_is_nan(back) || (back & 0x40) == 0)
                bad_nan++;
            continue;
        }
        if (fbits(f) != fbits((float)want))
            bad_widen++;
        if (rcoll_float_to_bf16(f) != h)
            bad_trip++;
        if ((h & 0x7fff) < 0x7f80) {
            /* Midpoint toward the next pattern: the float with bit 15 set. */
            uint32_t mid = (h << 16) | 0x8000u;
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            if (rcoll_float_to_bf16(bits_f(mid)) != even ||
                rcoll_float_to_bf16(bits_f(mid - 1)) != h ||
                rcoll_float_to_bf16(bits_f(mid + 1)) != (uint16_t)(h + 1))
                bad_round++;
            if (rcoll_float_to_bf16(bits_f(mid)) != ref_d2b(bits_f(mid)))
                bad_round++;
        }
    }
    CHECK(bad_widen == 0, "bf16->float: %ld patterns differ from the reference", bad_widen);
    CHECK(bad_trip == 0, "bf16->float->bf16: %ld patterns do not round-trip", bad_trip);
    CHECK(bad_nan == 0, "bf16 NaN: %ld patterns lose NaN-ness or quietness", bad_nan);
    CHECK(bad_round == 0, "float->bf16 midpoints: %ld wrong", bad_round);

    long bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
        float f = bits_f((uint32_t)u);
        uint16_t got = rcoll_float_to_bf16(f), want = ref_d2b(f);
        if (isnan(f) ? !b_is_nan(got) : got != want)
            bad++;
    }
    CHECK(bad == 0, "float->bf16 sweep: %ld wrong", bad);

    CHECK(rcoll_float_to_bf16(FLT_MAX) == 0x7f80, "bf16(FLT_MAX) rounds to Inf");
    CHECK(rcoll_float_to_bf16(-FLT_MAX) == 0xff80, "bf16(-FLT_MAX) rounds to -Inf");
    CHECK(rcoll_float_to_bf16(bits_f(0x7f7f7fff)) == 0x7f7f, "bf16 just below overflow");
    CHECK(rcoll_float_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "bf16 tie to even down");
    CHECK(rcoll_float_to_bf16(1.0f + 0x3p-8f) == 0x3f82, "bf16 tie to even up");
    CHECK(rcoll_float_to_bf16(FLT_TRUE_MIN) == 0x0000, "bf16 smallest subnormal float");
    CHECK(rcoll_float_to_bf16(bits_f(0x00008000u)) == 0x0000, "bf16 subnormal tie to even");
    CHECK(rcoll_float_to_bf16(bits_f(0x00018000u)) == 0x0002, "bf16 subnormal tie up");
    CHECK(rcoll_float_to_bf16(bits_f(0x7f800001u)) == 0x7fc0, "bf16 sNaN low payload quieted");
}

/* ---------------------------------------------------------------------------------------------
 * Named integer wrap cases, bad arguments, variant API
 * ------------------------------------------------------------------------------------------ */
static void test_wrap_cases(rcoll_reduce_isa_t isa)
{
    const char *nm = rcoll_reduce_isa_name(isa);
    {
        int8_t a[3] = {127, -128, -128}, b[3] = {1, -1, -1}, r[3];
        rcoll_reduce_local(r, a, b, 3, RCOLL_INT8, RCOLL_SUM, 0);
        CHECK(r[0] == -128 && r[1] == 127, "%s int8 sum wrap: %d %d", nm, r[0], r[1]);
        rcoll_reduce_local(r, a, b, 3, RCOLL_INT8, RCOLL_PROD, 0);
        CHECK(r[1] == -128 && r[0] == 127, "%s int8 prod: %d %d", nm, r[0], r[1]);
        rcoll_reduce_local(r, a, b, 3, RCOLL_INT8, RCOLL_AVG, 2);
        CHECK(r[0] == -64 && r[1] == 63, "%s int8 avg of wrapped sum: %d %d", nm, r[0], r[1]);
    }
    {
        uint8_t a[1] = {255}, b[1] = {1}, r[1];
        rcoll_reduce_local(r, a, b, 1, RCOLL_UINT8, RCOLL_SUM, 0);
        CHECK(r[0] == 0, "%s uint8 255+1", nm);
        rcoll_reduce_local(r, a, a, 1, RCOLL_UINT8, RCOLL_PROD, 0);
        CHECK(r[0] == 1, "%s uint8 255*255", nm);
    }
    {
        int32_t a[2] = {INT32_MAX, -7}, b[2] = {1, 0}, r[2];
        rcoll_reduce_local(r, a, b, 2, RCOLL_INT32, RCOLL_SUM, 0);
        CHECK(r[0] == INT32_MIN, "%s int32 max+1", nm);
        rcoll_reduce_local(r, a, b, 2, RCOLL_INT32, RCOLL_AVG, 2);
        CHECK(r[1] == -3 && r[0] == INT32_MIN / 2, "%s int32 avg truncates: %d %d", nm, r[0],
              r[1]);
        int32_t c[1] = {INT32_MIN}, e[1] = {-1};
        rcoll_reduce_local(r, c, e, 1, RCOLL_INT32, RCOLL_PROD, 0);
        CHECK(r[0] == INT32_MIN, "%s int32 min*-1", nm);
    }
    {
        int64_t a[3] = {INT64_MAX, INT64_MIN, 0x100000000ll}, b[3] = {2, -1, 0x100000000ll};
        int64_t r[3];
        rcoll_reduce_local(r, a, b, 3, RCOLL_INT64, RCOLL_PROD, 0);
        CHECK(r[0] == -2 && r[1] == INT64_MIN && r[2] == 0, "%s int64 prod wrap", nm);
        rcoll_reduce_local(r, a, b, 3, RCOLL_INT64, RCOLL_SUM, 0);
        CHECK(r[0] == INT64_MIN + 1 && r[1] == INT64_MAX, "%s int64 sum wrap", nm);
    }
    {
        uint64_t a[2] = {UINT64_MAX, (1ull << 63) + 1}, b[2] = {2, 0}, r[2];
        rcoll_reduce_local(r, a, b, 2, RCOLL_UINT64, RCOLL_AVG, 3);
        CHECK(r[0] == 0 && r[1] == ((1ull << 63) + 1) / 3, "%s uint64 avg", nm);
        uint32_t c[1] = {UINT32_MAX}, e[1] = {UINT32_MAX}, s[1];
        rcoll_reduce_local(s, c, e, 1, RCOLL_UINT32, RCOLL_AVG, 7);
        CHECK(s[0] == (UINT32_MAX - 1) / 7, "%s uint32 avg of wrapped sum", nm);
    }
}

static void test_new_type_cases(rcoll_reduce_isa_t isa)
{
    const char *nm = rcoll_reduce_isa_name(isa);
    {
        int16_t a[4] = {32767, -32768, 256, -7}, b[4] = {1, -1, 256, 2}, r[4];
        rcoll_reduce_local(r, a, b, 4, RCOLL_INT16, RCOLL_SUM, 0);
        CHECK(r[0] == -32768 && r[1] == 32767 && r[2] == 512 && r[3] == -5,
              "%s int16 sum wrap: %d %d %d %d", nm, r[0], r[1], r[2], r[3]);
        rcoll_reduce_local(r, a, b, 4, RCOLL_INT16, RCOLL_PROD, 0);
        CHECK(r[0] == 32767 && r[1] == -32768 && r[2] == 0 && r[3] == -14,
              "%s int16 prod wrap (256*256 = 2^16 = 0): %d %d %d %d", nm, r[0], r[1], r[2], r[3]);
        rcoll_reduce_local(r, a, b, 4, RCOLL_INT16, RCOLL_AVG, 2);
        CHECK(r[0] == -16384 && r[1] == 16383 && r[3] == -2,
              "%s int16 avg of the wrapped sum, truncated: %d %d %d", nm, r[0], r[1], r[3]);
        rcoll_reduce_local(r, a, b, 4, RCOLL_INT16, RCOLL_MIN, 0);
        CHECK(r[0] == 1 && r[1] == -32768 && r[3] == -7, "%s int16 min is signed", nm);
        rcoll_reduce_local(r, a, b, 4, RCOLL_INT16, RCOLL_BXOR, 0);
        CHECK(r[0] == 32766 && r[1] == 32767 && r[2] == 0 && r[3] == -5,
              "%s int16 bxor: %d %d %d %d", nm, r[0], r[1], r[2], r[3]);
    }
    {
        uint16_t a[3] = {65535, 65535, 0x00ff}, b[3] = {65535, 1, 0x0ff0}, r[3];
        rcoll_reduce_local(r, a, b, 3, RCOLL_UINT16, RCOLL_PROD, 0);
        CHECK(r[0] == 1 && r[1] == 65535, "%s uint16 65535*65535 wraps to 1: %u", nm, r[0]);
        rcoll_reduce_local(r, a, b, 3, RCOLL_UINT16, RCOLL_SUM, 0);
        CHECK(r[0] == 65534 && r[1] == 0, "%s uint16 sum wrap: %u %u", nm, r[0], r[1]);
        rcoll_reduce_local(r, a, b, 3, RCOLL_UINT16, RCOLL_MIN, 0);
        CHECK(r[1] == 1, "%s uint16 min is unsigned", nm);
        rcoll_reduce_local(r, a, b, 3, RCOLL_UINT16, RCOLL_BAND, 0);
        CHECK(r[2] == 0x00f0 && r[1] == 1, "%s uint16 band", nm);
        rcoll_reduce_local(r, a, b, 3, RCOLL_UINT16, RCOLL_BOR, 0);
        CHECK(r[2] == 0x0fff && r[1] == 65535, "%s uint16 bor", nm);
    }
    {
        int64_t a[1] = {INT64_MIN}, b[1] = {-1}, r[1];
        rcoll_reduce_local(r, a, b, 1, RCOLL_INT64, RCOLL_BAND, 0);
        CHECK(r[0] == INT64_MIN, "%s int64 band", nm);
        rcoll_reduce_local(r, a, b, 1, RCOLL_INT64, RCOLL_BXOR, 0);
        CHECK(r[0] == INT64_MAX, "%s int64 bxor", nm);
    }
    {
        /* Any non-zero byte is true; every result is 0 or 1. */
        uint8_t a[8] = {0, 0, 1, 1, 2, 0x80, 0xff, 0x10};
        uint8_t b[8] = {0, 1, 0, 1, 0x80, 0x80, 1, 0};
        static const uint8_t want_or[8] = {0, 1, 1, 1, 1, 1, 1, 1};
        static const uint8_t want_and[8] = {0, 0, 0, 1, 1, 1, 1, 0};
        static const uint8_t want_xor[8] = {0, 1, 1, 0, 0, 0, 0, 1};
        static const struct {
            rcoll_op_t op;
            const uint8_t *want;
        } cases[] = {{RCOLL_SUM, want_or},  {RCOLL_MAX, want_or},  {RCOLL_BOR, want_or},
                     {RCOLL_PROD, want_and}, {RCOLL_MIN, want_and}, {RCOLL_BAND, want_and},
                     {RCOLL_BXOR, want_xor}};
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            uint8_t r[8];
            memset(r, 0x55, sizeof(r));
            rcoll_reduce_local(r, a, b, 8, RCOLL_BOOL, cases[k].op, 0);
            CHECK(memcmp(r, cases[k].want, 8) == 0,
                  "%s bool %s: got %u %u %u %u %u %u %u %u", nm, op_name(cases[k].op), r[0], r[1],
                  r[2], r[3], r[4], r[5], r[6], r[7]);
        }
        /* Byte 0x80 & 0x01 is 0 bitwise, but true and true is true. */
        uint8_t x[1] = {0x80}, y[1] = {0x01}, r[1];
        rcoll_reduce_local(r, x, y, 1, RCOLL_BOOL, RCOLL_BAND, 0);
        CHECK(r[0] == 1, "%s bool band is logical (0x80 and 0x01 = 1), got %u", nm, r[0]);
        rcoll_reduce_local(r, x, x, 1, RCOLL_BOOL, RCOLL_BXOR, 0);
        CHECK(r[0] == 0, "%s bool bxor of a value with itself", nm);
    }
}

/* Every pair that is not defined: rcoll_reduce_defined agrees with pair_defined, and the
 * kernel writes nothing (callers validate; nothing must crash or scribble if one did not). */
static void test_undefined(rcoll_reduce_isa_t isa)
{
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++) {
        for (int op = 0; op < RCOLL_NUM_OPS; op++) {
            int want = pair_defined(dt, op);
            CHECK(rcoll_reduce_defined(dt, op) == want, "rcoll_reduce_defined(%s, %s) != %d",
                  dt_name(dt), op_name(op), want);
            if (want)
                continue;
            unsigned char a[40], b[40], r[40];
            memset(a, 1, sizeof(a));
            memset(b, 2, sizeof(b));
            memset(r, 0x77, sizeof(r));
            rcoll_reduce_local(r, a, b, 40 / dt_size(dt), dt, op, 3);
            int untouched = 1;
            for (size_t k = 0; k < sizeof(r); k++)
                untouched &= r[k] == 0x77;
            CHECK(untouched, "%s %s %s (not defined) wrote its output",
                  rcoll_reduce_isa_name(isa), dt_name(dt), op_name(op));
        }
    }
    CHECK(!rcoll_reduce_defined(RCOLL_NUM_DATATYPES, RCOLL_SUM) &&
              !rcoll_reduce_defined(RCOLL_INT8, RCOLL_NUM_OPS) &&
              !rcoll_reduce_defined((rcoll_datatype_t)-1, RCOLL_SUM),
          "rcoll_reduce_defined out of range");
}

/* rcoll_reduce_single: bool becomes 0/1, every other type stays as it is. */
static void test_single(void)
{
    uint8_t v[37];
    for (size_t i = 0; i < sizeof(v); i++)
        v[i] = (uint8_t)(i * 37);
    rcoll_reduce_single(v, sizeof(v), RCOLL_BOOL);
    int ok = 1;
    for (size_t i = 0; i < sizeof(v); i++)
        ok &= v[i] == (((uint8_t)(i * 37)) != 0);
    CHECK(ok, "rcoll_reduce_single(bool) normalizes to 0/1");
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++) {
        if (dt == RCOLL_BOOL)
            continue;
        for (size_t i = 0; i < sizeof(v); i++)
            v[i] = (uint8_t)(i * 37);
        rcoll_reduce_single(v, sizeof(v) / dt_size(dt), dt);
        ok = 1;
        for (size_t i = 0; i < sizeof(v); i++)
            ok &= v[i] == (uint8_t)(i * 37);
        CHECK(ok, "rcoll_reduce_single(%s) leaves the data alone", dt_name(dt));
    }
    rcoll_reduce_single(NULL, 0, RCOLL_BOOL);
}

static void test_names(void)
{
    CHECK(strcmp(rcoll_dt_name(RCOLL_INT16), "int16") == 0 &&
              strcmp(rcoll_dt_name(RCOLL_UINT16), "uint16") == 0 &&
              strcmp(rcoll_dt_name(RCOLL_BOOL), "bool") == 0 &&
              strcmp(rcoll_dt_name(RCOLL_FLOAT64), "float64") == 0 &&
              strcmp(rcoll_dt_name(RCOLL_NUM_DATATYPES), "?") == 0,
          "datatype names");
    CHECK(strcmp(rcoll_op_name(RCOLL_AVG), "avg") == 0 &&
              strcmp(rcoll_op_name(RCOLL_BAND), "band") == 0 &&
              strcmp(rcoll_op_name(RCOLL_BOR), "bor") == 0 &&
              strcmp(rcoll_op_name(RCOLL_BXOR), "bxor") == 0 &&
              strcmp(rcoll_op_name((rcoll_op_t)-1), "?") == 0,
          "op names");
    CHECK(rcoll_dt_size(RCOLL_INT16) == 2 && rcoll_dt_size(RCOLL_UINT16) == 2 &&
              rcoll_dt_size(RCOLL_BOOL) == 1 && rcoll_datatype_size(RCOLL_BOOL) == 1,
          "sizes of int16, uint16, bool");
}

static void test_bad_args(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, r[4] = {9, 9, 9, 9};
    rcoll_reduce_local(r, a, b, 4, (rcoll_datatype_t)99, RCOLL_SUM, 0);
    rcoll_reduce_local(r, a, b, 4, (rcoll_datatype_t)-1, RCOLL_SUM, 0);
    rcoll_reduce_local(r, a, b, 4, RCOLL_FLOAT32, (rcoll_op_t)RCOLL_NUM_OPS, 0);
    rcoll_reduce_local(r, a, b, 4, RCOLL_FLOAT32, (rcoll_op_t)-3, 0);
    rcoll_reduce_local(NULL, NULL, NULL, 0, RCOLL_FLOAT32, RCOLL_SUM, 0);
    rcoll_reduce_avg_finish(r, 4, (rcoll_datatype_t)42, 3);
    rcoll_reduce_avg_finish(NULL, 0, RCOLL_FLOAT32, 3);
    CHECK(r[0] == 9 && r[1] == 9 && r[2] == 9 && r[3] == 9, "bad dt/op must not write");
}

static void test_isa_api(void)
{
    rcoll_reduce_isa_t best = rcoll_reduce_isa_best();
    CHECK(rcoll_reduce_isa_get() == best, "the default variant is the best one");
    CHECK(rcoll_reduce_isa_set((rcoll_reduce_isa_t)7) == RCOLL_ERR_INVALID_ARG,
          "isa_set(7) must be INVALID_ARG");
    CHECK(rcoll_reduce_isa_set(RCOLL_REDUCE_ISA_GENERIC) == RCOLL_OK, "generic always works");
    CHECK(rcoll_reduce_isa_get() == RCOLL_REDUCE_ISA_GENERIC, "isa_get after set");
    CHECK(strcmp(rcoll_reduce_isa_name(RCOLL_REDUCE_ISA_AVX512), "avx512") == 0 &&
              strcmp(rcoll_reduce_isa_name((rcoll_reduce_isa_t)9), "unknown") == 0,
          "isa names");
    CHECK(rcoll_reduce_isa_set(best) == RCOLL_OK, "restore best");
}

int main(void)
{
    test_isa_api();
    test_half_conversions();
    test_bf16_conversions();
    test_bad_args();
    test_names();
    test_single();

    rcoll_reduce_isa_t best = rcoll_reduce_isa_best();
    printf("best kernel variant: %s\n", rcoll_reduce_isa_name(best));
    for (int isa = 0; isa < RCOLL_REDUCE_ISA_COUNT; isa++) {
        if (rcoll_reduce_isa_set((rcoll_reduce_isa_t)isa) != RCOLL_OK) {
            check_skip("variant %s: not supported by this CPU",
                       rcoll_reduce_isa_name((rcoll_reduce_isa_t)isa));
            continue;
        }
        long failed_before = check_failed;
        test_wrap_cases((rcoll_reduce_isa_t)isa);
        test_new_type_cases((rcoll_reduce_isa_t)isa);
        test_undefined((rcoll_reduce_isa_t)isa);
        test_kernel_conversions((rcoll_reduce_isa_t)isa);
        test_matrix((rcoll_reduce_isa_t)isa);
        test_finish((rcoll_reduce_isa_t)isa);
        printf("variant %s: %s\n", rcoll_reduce_isa_name((rcoll_reduce_isa_t)isa),
               check_failed == failed_before ? "ok" : "FAILED");
    }
    rcoll_reduce_isa_set(best);

    return check_summary();
}
