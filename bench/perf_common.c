/*
 * perf_common.c - the nccl-tests-compatible harness behind every *_perf binary in bench/.
 * It parses the flags, creates the communicator, sweeps sizes, times and checks each
 * operation, prints the nccl-tests table and footer, and writes JSON and memory reports.
 * It knows a collective only through its perf_coll_t and uses the public rcoll API only;
 * expected results are computed here, never through the library under test.
 */
#include "perf_common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * Datatypes and operators
 * ------------------------------------------------------------------------------------------ */

/* Indexed by rcoll_datatype_t. */
static const char *const dtype_names[RCOLL_NUM_DATATYPES] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"};
static const size_t dtype_sizes[RCOLL_NUM_DATATYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
/* "-d all" runs the datatypes in nccl-tests' order. */
static const rcoll_datatype_t all_dtypes[RCOLL_NUM_DATATYPES] = {
    RCOLL_INT8, RCOLL_UINT8, RCOLL_INT32, RCOLL_UINT32, RCOLL_INT64, RCOLL_UINT64,
    RCOLL_FLOAT16, RCOLL_FLOAT32, RCOLL_FLOAT64, RCOLL_BFLOAT16};
static const char *const op_names[RCOLL_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};
/* "-o all" runs the operators in nccl-tests' order. */
static const rcoll_op_t all_ops[RCOLL_NUM_OPS] = {RCOLL_SUM, RCOLL_PROD, RCOLL_MAX, RCOLL_MIN,
                                                   RCOLL_AVG};

const char *perf_dtype_name(rcoll_datatype_t dt)
{
    return ((unsigned)dt < RCOLL_NUM_DATATYPES) ? dtype_names[dt] : "?";
}

const char *perf_op_name(rcoll_op_t op)
{
    return ((unsigned)op < RCOLL_NUM_OPS) ? op_names[op] : "?";
}

static size_t dtype_size(rcoll_datatype_t dt)
{
    return dtype_sizes[dt];
}

static int dtype_is_float(rcoll_datatype_t dt)
{
    return dt == RCOLL_FLOAT16 || dt == RCOLL_BFLOAT16 || dt == RCOLL_FLOAT32 ||
           dt == RCOLL_FLOAT64;
}

static int dtype_is_signed(rcoll_datatype_t dt)
{
    return dt == RCOLL_INT8 || dt == RCOLL_INT32 || dt == RCOLL_INT64;
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
    switch (dtype_size(dt)) {
    case 1: ((uint8_t *)buf)[k] = (uint8_t)v; break;
    case 4: ((uint32_t *)buf)[k] = (uint32_t)v; break;
    default: ((uint64_t *)buf)[k] = v; break;
    }
}

static uint64_t load_bits(const void *buf, size_t k, rcoll_datatype_t dt)
{
    switch (dtype_size(dt)) {
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
    } else {
        for (size_t k = 0; k < count; k++)
            store_int(buf, k, dt, int_value(rank, first + k));
    }
}

static uint64_t reduce_int(rcoll_datatype_t dt, rcoll_op_t op, int nranks, size_t i)
{
    unsigned bits = (unsigned)(8 * dtype_size(dt));
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
        else
            store_int(buf, k, dt, reduce_int(dt, op, nranks, first + k));
    }
}

/* Distance in units in the last place between two finite values of one float type. */
static uint64_t ulp_distance(uint64_t a, uint64_t b, rcoll_datatype_t dt)
{
    unsigned bits = (unsigned)(8 * dtype_size(dt));
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

/* ---------------------------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    size_t min_bytes, max_bytes, step_bytes;
    long step_factor; /* <= 1: additive steps of step_bytes */
    int iters, warmup, agg, cycles, check, root, blocking, timeout, average, mem_report;
    int nthreads, ngpus;
    const char *json_path;
    int ndtypes;
    rcoll_datatype_t dtypes[RCOLL_NUM_DATATYPES];
    int nops;
    rcoll_op_t ops[RCOLL_NUM_OPS];
    const char *algo, *transport;
} perf_opts_t;

typedef struct {
    const perf_coll_t *coll;
    perf_opts_t opt;
    rcoll_comm_t comm;
    int rank, nranks;
    char *sendbuf, *recvbuf, *expbuf; /* recvbuf doubles as the in-place buffer */
    size_t user_bytes;
    rcoll_request_t *reqs;
    FILE *json;
    int json_rows;
    double bw_sum;
    long bw_count;
    int64_t wrong_total;
    char *memlog; /* -M per-operation lines, printed after the table */
    size_t memlog_len;
} perf_ctx_t;

static const char *prog_name = "perf";
static int usage_lead = 1; /* only the launch's rank 0 prints usage errors */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: %s [options]\n"
        "  -b,--minbytes <size>       first size (K/M/G suffixes)          [32M]\n"
        "  -e,--maxbytes <size>       last size                            [32M]\n"
        "  -i,--stepbytes <size>      additive step (without -f)           [1M]\n"
        "  -f,--stepfactor <n>        multiplicative step\n"
        "  -n,--iters <n>             timed iterations per size            [20]\n"
        "  -w,--warmup_iters <n>      untimed iterations                   [1]\n"
        "  -m,--agg_iters <n>         operations aggregated per iteration  [1]\n"
        "  -N,--run_cycles <n>        repeat the sweep, 0 = forever        [1]\n"
        "  -c,--check <n>             correctness iterations, 0 = off      [1]\n"
        "  -o,--op <op>               sum prod min max avg all             [sum]\n"
        "  -d,--datatype <type>       int8 uint8 int32 uint32 int64 uint64 half float\n"
        "                             double bfloat16 all                  [float]\n"
        "  -r,--root <rank>           root of rooted collectives, -1 = all [0]\n"
        "  -z,--blocking <0/1/2>      1: wait and barrier after each op    [0]\n"
        "  -T,--timeout <s>           abort (exit 4) when init or a row takes longer [0]\n"
        "  -a,--average <0-3>         time over ranks: 0 rank0 1 mean 2 min 3 max [1]\n"
        "  -J,--output_file <file>    also write JSON results\n"
        "  -M,--memory <0/1>          print a memory-usage report          [0]\n"
        "  -t,--nthreads <n>          threads per process (only 1)         [1]\n"
        "  -g,--ngpus <n>             GPUs per thread (only 1)             [1]\n"
        "     --memtype <host|cuda>   buffer memory (only host)            [host]\n"
        "     --algo <name>           force an algorithm (sets RCOLL_ALGO)\n"
        "     --transport <name>      force a transport (sets RCOLL_TRANSPORT)\n"
        "  -h,--help                  this text\n"
        "Launch several ranks with tools/rcoll-run; without RCOLL_* variables it runs one rank.\n"
        "Exit: 0 ok, 1 internal, 3 library error, 4 timeout, 5 not implemented, 6 usage,"
        " 7 wrong results.\n",
        prog_name);
}

static void usage_fail(int code, const char *fmt, const char *what, const char *value)
{
    if (usage_lead) {
        fprintf(stderr, "%s: ", prog_name);
        fprintf(stderr, fmt, what, value);
        fprintf(stderr, "\n");
        if (code == PERF_EXIT_USAGE)
            fprintf(stderr, "%s: run with -h for the list of options\n", prog_name);
    }
    exit(code);
}

int perf_parse_size(const char *s, size_t *bytes)
{
    char *end;
    unsigned long long v, mult = 1;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    switch (*end) {
    case 'K': case 'k': mult = 1ULL << 10; end++; break;
    case 'M': case 'm': mult = 1ULL << 20; end++; break;
    case 'G': case 'g': mult = 1ULL << 30; end++; break;
    case 'T': case 't': mult = 1ULL << 40; end++; break;
    default: break;
    }
    if (*end != '\0' || v > SIZE_MAX / mult)
        return -1;
    *bytes = (size_t)(v * mult);
    return 0;
}

static long parse_long(const char *what, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        char range[96];
        snprintf(range, sizeof(range), "%s (expected an integer in [%ld, %ld])", s, lo, hi);
        usage_fail(PERF_EXIT_USAGE, "invalid value for %s: %s", what, range);
    }
    return v;
}

static size_t parse_size_opt(const char *what, const char *s)
{
    size_t v;
    if (perf_parse_size(s, &v) != 0)
        usage_fail(PERF_EXIT_USAGE, "invalid size for %s: '%s' (use e.g. 8, 64K, 32M, 1G)",
                   what, s);
    return v;
}

static int lookup_dtype(const char *s)
{
    static const struct { const char *name; int dt; } names[] = {
        {"int8", RCOLL_INT8}, {"char", RCOLL_INT8}, {"uint8", RCOLL_UINT8},
        {"int32", RCOLL_INT32}, {"int", RCOLL_INT32}, {"uint32", RCOLL_UINT32},
        {"int64", RCOLL_INT64}, {"uint64", RCOLL_UINT64}, {"half", RCOLL_FLOAT16},
        {"float16", RCOLL_FLOAT16}, {"fp16", RCOLL_FLOAT16}, {"float", RCOLL_FLOAT32},
        {"float32", RCOLL_FLOAT32}, {"fp32", RCOLL_FLOAT32}, {"double", RCOLL_FLOAT64},
        {"float64", RCOLL_FLOAT64}, {"fp64", RCOLL_FLOAT64}, {"bfloat16", RCOLL_BFLOAT16},
        {"bf16", RCOLL_BFLOAT16}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].dt;
    if (strncmp(s, "f8", 2) == 0 || strncmp(s, "fp8", 3) == 0)
        usage_fail(PERF_EXIT_NOT_IMPLEMENTED, "%s %s: not implemented (rcoll has no fp8 types)",
                   "-d", s);
    return -1;
}

static int lookup_op(const char *s)
{
    for (int i = 0; i < RCOLL_NUM_OPS; i++)
        if (strcmp(s, op_names[i]) == 0)
            return i;
    if (strcmp(s, "mulsum") == 0 || strcmp(s, "premulsum") == 0)
        usage_fail(PERF_EXIT_NOT_IMPLEMENTED, "%s %s: not implemented in rcoll", "-o", s);
    return -1;
}

/* -d / -o take one name, "all", or a comma-separated list (an rcoll extension). */
static void parse_dtypes(perf_opts_t *o, const char *arg)
{
    if (strcmp(arg, "all") == 0) {
        memcpy(o->dtypes, all_dtypes, sizeof(all_dtypes));
        o->ndtypes = RCOLL_NUM_DATATYPES;
        return;
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->ndtypes = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int dt = lookup_dtype(t);
        if (dt < 0)
            usage_fail(PERF_EXIT_USAGE, "invalid %s '%s' (int8 uint8 int32 uint32 int64 uint64 "
                       "half float double bfloat16 all)", "datatype", t);
        if (o->ndtypes < RCOLL_NUM_DATATYPES)
            o->dtypes[o->ndtypes++] = (rcoll_datatype_t)dt;
    }
    if (o->ndtypes == 0)
        usage_fail(PERF_EXIT_USAGE, "invalid %s '%s'", "datatype", arg);
}

static void parse_ops(perf_opts_t *o, const char *arg)
{
    if (strcmp(arg, "all") == 0) {
        memcpy(o->ops, all_ops, sizeof(all_ops));
        o->nops = RCOLL_NUM_OPS;
        return;
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->nops = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int op = lookup_op(t);
        if (op < 0)
            usage_fail(PERF_EXIT_USAGE, "invalid %s '%s' (sum prod min max avg all)", "op", t);
        if (o->nops < RCOLL_NUM_OPS)
            o->ops[o->nops++] = (rcoll_op_t)op;
    }
    if (o->nops == 0)
        usage_fail(PERF_EXIT_USAGE, "invalid %s '%s'", "op", arg);
}

enum { OPT_MEMTYPE = 1000, OPT_ALGO, OPT_TRANSPORT };

static void parse_args(int argc, char **argv, perf_opts_t *o)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepbytes", required_argument, NULL, 'i'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"agg_iters", required_argument, NULL, 'm'},
        {"run_cycles", required_argument, NULL, 'N'},
        {"check", required_argument, NULL, 'c'},
        {"op", required_argument, NULL, 'o'},
        {"datatype", required_argument, NULL, 'd'},
        {"root", required_argument, NULL, 'r'},
        {"blocking", required_argument, NULL, 'z'},
        {"timeout", required_argument, NULL, 'T'},
        {"average", required_argument, NULL, 'a'},
        {"output_file", required_argument, NULL, 'J'},
        {"memory", required_argument, NULL, 'M'},
        {"nthreads", required_argument, NULL, 't'},
        {"ngpus", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {"memtype", required_argument, NULL, OPT_MEMTYPE},
        {"algo", required_argument, NULL, OPT_ALGO},
        {"transport", required_argument, NULL, OPT_TRANSPORT},
        {NULL, 0, NULL, 0}};
    int c;

    *o = (perf_opts_t){
        .min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20,
        .step_factor = 1, .iters = 20, .warmup = 1, .agg = 1, .cycles = 1, .check = 1,
        .root = 0, .blocking = 0, .timeout = 0, .average = 1, .mem_report = 0,
        .nthreads = 1, .ngpus = 1, .ndtypes = 1, .dtypes = {RCOLL_FLOAT32}, .nops = 1,
        .ops = {RCOLL_SUM}};

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":b:e:i:f:n:w:m:N:c:o:d:r:z:T:a:J:M:t:g:h", longopts,
                            NULL)) != -1) {
        switch (c) {
        case 'b': o->min_bytes = parse_size_opt("-b", optarg); break;
        case 'e': o->max_bytes = parse_size_opt("-e", optarg); break;
        case 'i': o->step_bytes = parse_size_opt("-i", optarg); break;
        case 'f': o->step_factor = parse_long("-f", optarg, 1, 1L << 20); break;
        case 'n': o->iters = (int)parse_long("-n", optarg, 1, INT_MAX); break;
        case 'w': o->warmup = (int)parse_long("-w", optarg, 0, INT_MAX); break;
        case 'm': o->agg = (int)parse_long("-m", optarg, 1, 1 << 20); break;
        case 'N': o->cycles = (int)parse_long("-N", optarg, 0, INT_MAX); break;
        case 'c': o->check = (int)parse_long("-c", optarg, 0, INT_MAX); break;
        case 'o': parse_ops(o, optarg); break;
        case 'd': parse_dtypes(o, optarg); break;
        case 'r': o->root = (int)parse_long("-r", optarg, -1, INT_MAX); break;
        case 'z': o->blocking = (int)parse_long("-z", optarg, 0, 2); break;
        case 'T': o->timeout = (int)parse_long("-T", optarg, 0, INT_MAX); break;
        case 'a': o->average = (int)parse_long("-a", optarg, 0, 3); break;
        case 'J': o->json_path = optarg; break;
        case 'M': o->mem_report = (int)parse_long("-M", optarg, 0, 1); break;
        case 't': o->nthreads = (int)parse_long("-t", optarg, 1, INT_MAX); break;
        case 'g': o->ngpus = (int)parse_long("-g", optarg, 1, INT_MAX); break;
        case 'h':
            if (usage_lead)
                usage(stdout);
            exit(PERF_EXIT_OK);
        case OPT_MEMTYPE:
            if (strcmp(optarg, "cuda") == 0)
                usage_fail(PERF_EXIT_NOT_IMPLEMENTED, "%s %s: not implemented (this build "
                           "benchmarks host memory only)", "--memtype", optarg);
            if (strcmp(optarg, "host") != 0)
                usage_fail(PERF_EXIT_USAGE, "invalid value for %s: '%s' (host or cuda)",
                           "--memtype", optarg);
            break;
        case OPT_ALGO: o->algo = optarg; break;
        case OPT_TRANSPORT: o->transport = optarg; break;
        case ':':
            usage_fail(PERF_EXIT_USAGE, "option %s%s needs a value", "", argv[optind - 1]);
            break;
        default:
            usage_fail(PERF_EXIT_USAGE, "unknown option %s%s", "", argv[optind - 1]);
            break;
        }
    }
    if (optind < argc)
        usage_fail(PERF_EXIT_USAGE, "unexpected argument %s%s", "", argv[optind]);
    if (o->min_bytes > o->max_bytes) {
        char v[64];
        snprintf(v, sizeof(v), "%zu > %zu", o->min_bytes, o->max_bytes);
        usage_fail(PERF_EXIT_USAGE, "invalid size range %s: %s", "-b/-e", v);
    }
    if (o->step_factor <= 1 && o->step_bytes == 0 && o->min_bytes < o->max_bytes)
        usage_fail(PERF_EXIT_USAGE, "invalid value for %s: %s (the sweep would never end)",
                   "-i", "0");
    if (o->nthreads != 1 || o->ngpus != 1)
        usage_fail(PERF_EXIT_NOT_IMPLEMENTED, "%s: not implemented (%s; run one process per "
                   "rank with tools/rcoll-run)", o->nthreads != 1 ? "-t" : "-g",
                   "only 1 thread and 1 device per process are supported");
}

/* ---------------------------------------------------------------------------------------------
 * Watchdog (-T), failures and small collective helpers
 * ------------------------------------------------------------------------------------------ */

static char watchdog_msg[200];
static size_t watchdog_len;

static void watchdog_fire(int sig)
{
    (void)sig;
    ssize_t n = write(STDERR_FILENO, watchdog_msg, watchdog_len);
    (void)n;
    _exit(PERF_EXIT_TIMEOUT);
}

static void watchdog_setup(int seconds)
{
    if (seconds <= 0)
        return;
    snprintf(watchdog_msg, sizeof(watchdog_msg),
             "%s: timeout: no progress within -T %d s (init or one row); aborting\n",
             prog_name, seconds);
    watchdog_len = strlen(watchdog_msg);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = watchdog_fire;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)seconds);
}

static void watchdog_rearm(const perf_ctx_t *c)
{
    if (c->opt.timeout > 0)
        alarm((unsigned)c->opt.timeout);
}

/* A library call failed: report it with the communicator's detail, abandon, exit 3. */
static void lib_fail(perf_ctx_t *c, const char *call, rcoll_status_t st)
{
    char detail[512];
    snprintf(detail, sizeof(detail), "%s", c->comm ? rcoll_comm_last_error(c->comm) : "");
    fprintf(stderr, "%s: rank %d: %s failed: %s%s%s\n", prog_name, c->rank, call,
            rcoll_status_string(st), detail[0] ? ": " : "", detail);
    fflush(stdout);
    if (c->json)
        fclose(c->json);
    rcoll_comm_abort(c->comm);
    exit(PERF_EXIT_LIBRARY);
}

static void lib_check(perf_ctx_t *c, const char *call, rcoll_status_t st)
{
    if (RCOLL_IS_ERR(st))
        lib_fail(c, call, st);
}

/* 1 when `bad` is nonzero on any rank, so that all ranks leave together. */
static int any_rank(perf_ctx_t *c, int bad)
{
    int32_t v = bad ? 1 : 0;
    lib_check(c, "rcoll_allreduce(agreement)",
              rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_MAX, c->comm));
    return v != 0;
}

static void leave(perf_ctx_t *c, int code)
{
    if (c->json)
        fclose(c->json);
    rcoll_comm_destroy(c->comm);
    exit(code);
}

/* The value the library will see (--algo/--transport were exported before init). */
static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? v : dflt;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void memlog_add(perf_ctx_t *c, const char *line)
{
    size_t n = strlen(line);
    char *p = realloc(c->memlog, c->memlog_len + n + 1);
    if (p == NULL)
        return; /* the report is best effort */
    memcpy(p + c->memlog_len, line, n + 1);
    c->memlog = p;
    c->memlog_len += n;
}

static void fmt_mem(char *out, size_t len, double bytes)
{
    const char *unit = "B";
    double mag = fabs(bytes);
    if (mag >= 1073741824.0) { bytes /= 1073741824.0; unit = "GB"; }
    else if (mag >= 1048576.0) { bytes /= 1048576.0; unit = "MB"; }
    else if (mag >= 1024.0) { bytes /= 1024.0; unit = "KB"; }
    int dec = unit[0] == 'B' ? 0 : fabs(bytes) < 10 ? 2 : fabs(bytes) < 100 ? 1 : 0;
    snprintf(out, len, "%.*f %s", dec, bytes, unit);
}

static size_t mem_usage(perf_ctx_t *c)
{
    size_t b = 0;
    lib_check(c, "rcoll_comm_mem_usage", rcoll_comm_mem_usage(c->comm, &b));
    return b;
}

/* ---------------------------------------------------------------------------------------------
 * JSON (rank 0 only; written as the run goes)
 * ------------------------------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6f", v);
    else
        fputs("null", f);
}

static void json_open(perf_ctx_t *c, int argc, char **argv)
{
    int bad = 0;
    if (c->rank == 0 && c->opt.json_path) {
        c->json = fopen(c->opt.json_path, "w");
        if (c->json == NULL) {
            fprintf(stderr, "%s: cannot write JSON output to %s: %s\n", prog_name,
                    c->opt.json_path, strerror(errno));
            bad = 1;
        }
    }
    if (any_rank(c, bad))
        leave(c, PERF_EXIT_USAGE);
    if (c->json == NULL)
        return;
    FILE *f = c->json;
    const perf_opts_t *o = &c->opt;
    char when[64];
    time_t t = time(NULL);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
    int v = rcoll_version();
    fprintf(f, "{\"version\":1,\"program\":");
    json_str(f, c->coll->name);
    fprintf(f, ",\"rcoll_version\":\"%d.%d.%d\",\"start_time\":", v / 10000, v / 100 % 100,
            v % 100);
    json_str(f, when);
    fprintf(f, ",\"args\":[");
    for (int i = 0; i < argc; i++) {
        if (i)
            fputc(',', f);
        json_str(f, argv[i]);
    }
    fprintf(f, "],\"config\":{\"nthreads\":%d,\"ngpus\":%d,\"nranks\":%d,"
            "\"minimum_bytes\":%zu,\"maximum_bytes\":%zu,", o->nthreads, o->ngpus, c->nranks,
            o->min_bytes, o->max_bytes);
    if (o->step_factor > 1)
        fprintf(f, "\"step_factor\":%ld,", o->step_factor);
    else
        fprintf(f, "\"step_bytes\":%zu,", o->step_bytes);
    fprintf(f, "\"warmup_iters\":%d,\"iterations\":%d,\"aggregated_iterations\":%d,"
            "\"validation\":%d,\"blocking\":%d,\"average\":%d,\"memory\":\"host\",\"algo\":",
            o->warmup, o->iters, o->agg, o->check, o->blocking, o->average);
    json_str(f, env_or("RCOLL_ALGO", "auto"));
    fprintf(f, ",\"transport\":");
    json_str(f, env_or("RCOLL_TRANSPORT", "auto"));
    fprintf(f, "},\"devices\":[");
}

static void json_column(FILE *f, const char *key, double us, double algbw, double busbw,
                        int64_t wrong)
{
    fprintf(f, ",\"%s\":{\"time_us\":", key);
    json_num(f, us);
    fprintf(f, ",\"algbw\":");
    json_num(f, algbw);
    fprintf(f, ",\"busbw\":");
    json_num(f, busbw);
    if (wrong < 0)
        fprintf(f, ",\"wrong\":null}");
    else
        fprintf(f, ",\"wrong\":%" PRId64 "}", wrong);
}

/* ---------------------------------------------------------------------------------------------
 * Preamble: configuration and one line per rank
 * ------------------------------------------------------------------------------------------ */

#define RANK_RECORD 256 /* bytes per rank: int32 pid, then the host name */

static void print_preamble(perf_ctx_t *c)
{
    const perf_opts_t *o = &c->opt;
    size_t total = (size_t)c->nranks * RANK_RECORD;
    uint8_t *rec = calloc(total, 1);

    if (any_rank(c, rec == NULL)) {
        if (c->rank == 0)
            fprintf(stderr, "%s: out of memory for the device report\n", prog_name);
        leave(c, PERF_EXIT_INTERNAL);
    }
    /* Every rank fills its own slot of a zeroed buffer; a SUM all-reduce gathers them. */
    uint8_t *mine = rec + (size_t)c->rank * RANK_RECORD;
    int32_t pid = (int32_t)getpid();
    memcpy(mine, &pid, sizeof(pid));
    if (gethostname((char *)mine + 4, RANK_RECORD - 5) != 0)
        strcpy((char *)mine + 4, "unknown");
    mine[RANK_RECORD - 1] = 0;
    lib_check(c, "rcoll_allreduce(device report)",
              rcoll_allreduce(RCOLL_IN_PLACE, rec, total, RCOLL_UINT8, RCOLL_SUM, c->comm));

    if (c->rank == 0) {
        int v = rcoll_version();
        printf("# nccl-tests-compatible rcoll version %d.%d.%d rcoll-headers=%d "
               "rcoll-library=%d\n", v / 10000, v / 100 % 100, v % 100, RCOLL_VERSION_CODE, v);
        printf("# Collective test starting: %s\n", c->coll->name);
        printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
               "iters: %d agg iters: %d validation: %d graph: 0\n", o->nthreads, o->ngpus,
               o->min_bytes, o->max_bytes,
               o->step_factor > 1 ? (size_t)o->step_factor : o->step_bytes,
               o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg, o->check);
        if (o->blocking == 1)
            printf("# Blocking Enabled: wait for completion and barrier after each collective\n");
        else if (o->blocking > 1)
            printf("# Blocking Enabled: wait for completion after each collective (no barrier)\n");
        printf("# rcoll: %d ranks, memory host, algo %s, transport %s\n", c->nranks,
               env_or("RCOLL_ALGO", "auto"), env_or("RCOLL_TRANSPORT", "auto"));
        printf("#\n# Using devices\n");
        for (int r = 0; r < c->nranks; r++) {
            const uint8_t *p = rec + (size_t)r * RANK_RECORD;
            int32_t rpid;
            memcpy(&rpid, p, sizeof(rpid));
            const char *host = (const char *)p + 4;
            printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", r, 0,
                   (int)rpid, host, -1, "host", "host-memory");
            if (c->json) {
                fprintf(c->json, "%s{\"rank\":%d,\"pid\":%d,\"hostname\":", r ? "," : "", r,
                        (int)rpid);
                json_str(c->json, host);
                fprintf(c->json, ",\"device\":\"host-memory\"}");
            }
        }
        if (c->json)
            fprintf(c->json, "],\"results\":[");
    }
    free(rec);
}

static void print_header(void)
{
    /* Same columns as the rows: the five row labels, then time/algbw/busbw/#wrong twice. */
    printf("#\n");
    printf("# %10s  %12s  %8s  %6s  %6s  %9s%-12s%23s%s\n", "", "", "", "", "", "",
           "out-of-place", "", "in-place");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
           "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)");
}

/* ---------------------------------------------------------------------------------------------
 * Running, timing and checking
 * ------------------------------------------------------------------------------------------ */

/* Issue `n` operations in the configured mode and wait for all of them. */
static void run_ops(perf_ctx_t *c, const perf_op_t *o, const void *sb, void *rb, int n)
{
    const perf_coll_t *coll = c->coll;

    if (c->opt.blocking != 0 || coll->start == NULL) {
        for (int a = 0; a < n; a++) {
            lib_check(c, "the benchmarked collective", coll->run(o, sb, rb));
            if (c->opt.blocking == 1)
                lib_check(c, "rcoll_barrier", rcoll_barrier(c->comm));
        }
        return;
    }
    for (int a = 0; a < n; a++)
        lib_check(c, "the benchmarked collective (nonblocking start)",
                  coll->start(o, sb, rb, &c->reqs[a]));
    for (int a = 0; a < n; a++)
        lib_check(c, "rcoll_wait", rcoll_wait(&c->reqs[a]));
}

/* The send and receive pointers of one column (see perf_coll_t for the in-place layout). */
static void column_bufs(perf_ctx_t *c, const perf_op_t *o, char **sb, char **rb)
{
    size_t ts = dtype_size(o->dtype);
    if (o->in_place) {
        *sb = c->recvbuf + o->sz.send_inplace_off * ts;
        *rb = c->recvbuf + o->sz.recv_inplace_off * ts;
    } else {
        *sb = c->sendbuf;
        *rb = c->recvbuf;
    }
}

/* Fill this rank's input; poison the output first so unwritten elements are caught. */
static void prepare(perf_ctx_t *c, const perf_op_t *o, int poison)
{
    size_t ts = dtype_size(o->dtype);
    size_t big = o->sz.send_count > o->sz.recv_count ? o->sz.send_count : o->sz.recv_count;
    char *sb, *rb;
    column_bufs(c, o, &sb, &rb);
    if (poison)
        memset(c->recvbuf, 0xa5, (o->in_place ? big : o->sz.recv_count) * ts);
    c->coll->fill(o, sb);
}

static double combine_time(perf_ctx_t *c, double t)
{
    switch (c->opt.average) {
    case 0:
        lib_check(c, "rcoll_bcast(time)", rcoll_bcast(&t, 1, RCOLL_FLOAT64, 0, c->comm));
        return t;
    case 2:
        lib_check(c, "rcoll_allreduce(time)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &t, 1, RCOLL_FLOAT64, RCOLL_MIN, c->comm));
        return t;
    case 3:
        lib_check(c, "rcoll_allreduce(time)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &t, 1, RCOLL_FLOAT64, RCOLL_MAX, c->comm));
        return t;
    default:
        lib_check(c, "rcoll_allreduce(time)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &t, 1, RCOLL_FLOAT64, RCOLL_SUM, c->comm));
        return t / c->nranks;
    }
}

/* Microseconds per operation, combined over ranks per -a. */
static double time_column(perf_ctx_t *c, const perf_op_t *o)
{
    char *sb, *rb;
    column_bufs(c, o, &sb, &rb);
    prepare(c, o, 0);
    for (int w = 0; w < c->opt.warmup; w++)
        run_ops(c, o, sb, rb, c->opt.agg);
    lib_check(c, "rcoll_barrier", rcoll_barrier(c->comm));
    double t0 = now_s();
    for (int it = 0; it < c->opt.iters; it++)
        run_ops(c, o, sb, rb, c->opt.agg);
    double us = (now_s() - t0) * 1e6 / ((double)c->opt.iters * c->opt.agg);
    return combine_time(c, us);
}

/* Wrong elements summed over ranks (stops at the first check iteration that finds any). */
static int64_t check_column(perf_ctx_t *c, const perf_op_t *o)
{
    int64_t wrong = 0;
    char *sb, *rb;
    column_bufs(c, o, &sb, &rb);
    for (int k = 0; k < c->opt.check && wrong == 0; k++) {
        prepare(c, o, 1);
        run_ops(c, o, sb, rb, 1);
        size_t n = c->coll->expect(o, c->expbuf);
        wrong = (int64_t)perf_count_wrong(rb, c->expbuf, n, o->dtype, o->op);
        lib_check(c, "rcoll_allreduce(#wrong)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &wrong, 1, RCOLL_INT64, RCOLL_SUM, c->comm));
    }
    return wrong;
}

/* nccl-tests' number style: the most decimals (2, 1, 0) that fit the width, else exponent. */
static void fmt_fit(char *out, size_t len, double v, int width)
{
    for (int dec = 2; dec >= 0; dec--) {
        int n = snprintf(out, len, "%*.*f", width, dec, v);
        if (n >= 0 && n <= width)
            return;
    }
    snprintf(out, len, "%*.*e", width, width >= 7 ? 1 : 0, v);
}

static void print_column(double us, double algbw, double busbw, int64_t wrong)
{
    char t[32], a[32], b[32], w[32];
    fmt_fit(t, sizeof(t), us, 7);
    fmt_fit(a, sizeof(a), algbw, 6);
    fmt_fit(b, sizeof(b), busbw, 6);
    if (wrong < 0)
        snprintf(w, sizeof(w), "%6s", "N/A");
    else
        snprintf(w, sizeof(w), "%6" PRId64, wrong);
    printf("  %7s  %6s  %6s  %6s", t, a, b, w);
}

static void run_row(perf_ctx_t *c, perf_op_t *o, size_t bytes)
{
    const perf_coll_t *coll = c->coll;
    size_t ts = dtype_size(o->dtype);
    coll->sizes(bytes / ts, c->nranks, c->rank, &o->sz);
    size_t elems = o->sz.send_count > o->sz.recv_count ? o->sz.send_count : o->sz.recv_count;
    size_t row_bytes = elems * ts;
    int shown_root = coll->rooted ? o->root : -1;
    const char *opname = coll->reducing ? perf_op_name(o->op) : "none";

    watchdog_rearm(c);
    if (c->rank == 0) {
        printf("%12zu  %12zu  %8s  %6s  %6d", row_bytes, elems, perf_dtype_name(o->dtype),
               opname, shown_root);
        fflush(stdout);
        if (c->json) {
            fprintf(c->json, "%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\","
                    "\"root\":%d", c->json_rows++ ? "," : "", row_bytes, elems,
                    perf_dtype_name(o->dtype), opname, shown_root);
        }
    }
    for (int ip = 0; ip < 2; ip++) {
        o->in_place = ip;
        double us = time_column(c, o);
        int64_t wrong = c->opt.check > 0 ? check_column(c, o) : -1;
        double algbw = us > 0 ? (double)row_bytes / (us * 1e3) : 0.0;
        double busbw = algbw * coll->bus_factor(c->nranks);
        if (wrong > 0)
            c->wrong_total += wrong;
        if (c->rank == 0) {
            print_column(us, algbw, busbw, wrong);
            fflush(stdout);
            if (c->json)
                json_column(c->json, ip ? "in_place" : "out_of_place", us, algbw, busbw, wrong);
        }
        c->bw_sum += busbw;
        c->bw_count++;
    }
    if (c->rank == 0) {
        printf("\n");
        fflush(stdout);
        if (c->json)
            fprintf(c->json, "}");
    }
}

static size_t next_size(const perf_opts_t *o, size_t s)
{
    if (o->step_factor > 1) {
        if (s == 0)
            return 1; /* a factor never leaves 0 */
        return s > SIZE_MAX / (size_t)o->step_factor ? SIZE_MAX : s * (size_t)o->step_factor;
    }
    return s > SIZE_MAX - o->step_bytes ? SIZE_MAX : s + o->step_bytes;
}

/* One sweep over sizes for one (datatype, op, root). */
static void run_sweep(perf_ctx_t *c, perf_op_t *o)
{
    size_t before = 0;
    if (c->opt.mem_report)
        before = mem_usage(c);
    int first = 1;
    for (size_t s = c->opt.min_bytes; s <= c->opt.max_bytes;) {
        run_row(c, o, s);
        if (first && c->opt.mem_report) {
            size_t after = mem_usage(c);
            char line[256], d[32], t[32];
            fmt_mem(d, sizeof(d), (double)after - (double)before);
            fmt_mem(t, sizeof(t), (double)after);
            snprintf(line, sizeof(line), "# Memory per operation : %s %s root %d: first size "
                     "%s, library now %s\n", perf_dtype_name(o->dtype),
                     c->coll->reducing ? perf_op_name(o->op) : "none",
                     c->coll->rooted ? o->root : -1, d, t);
            memlog_add(c, line);
            first = 0;
        }
        size_t n = next_size(&c->opt, s);
        if (n <= s)
            break;
        s = n;
    }
    if (c->opt.mem_report) {
        char line[128], d[32];
        fmt_mem(d, sizeof(d), (double)mem_usage(c) - (double)before);
        snprintf(line, sizeof(line), "#                        after the sweep: %s\n", d);
        memlog_add(c, line);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Setup and main
 * ------------------------------------------------------------------------------------------ */

static int env_launched(void)
{
    return getenv("RCOLL_NRANKS") || getenv("RCOLL_RANK") || getenv("WORLD_SIZE") ||
           (getenv("OMPI_COMM_WORLD_SIZE") && getenv("RCOLL_ROOT"));
}

static int env_rank_hint(void)
{
    const char *names[] = {"RCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        if (v)
            return atoi(v);
    }
    return 0;
}

static void comm_create(perf_ctx_t *c)
{
    rcoll_status_t st;
    const char *how;

    if (c->opt.algo && setenv("RCOLL_ALGO", c->opt.algo, 1) != 0)
        usage_fail(PERF_EXIT_INTERNAL, "%s: setenv failed%s", "--algo", "");
    if (c->opt.transport && setenv("RCOLL_TRANSPORT", c->opt.transport, 1) != 0)
        usage_fail(PERF_EXIT_INTERNAL, "%s: setenv failed%s", "--transport", "");
    if (env_launched()) {
        how = "rcoll_comm_init_env";
        st = rcoll_comm_init_env(&c->comm);
    } else {
        rcoll_unique_id_t id;
        how = "rcoll_get_unique_id";
        st = rcoll_get_unique_id(&id);
        if (st == RCOLL_OK) {
            how = "rcoll_comm_init_rank";
            st = rcoll_comm_init_rank(1, &id, 0, &c->comm);
        }
    }
    if (RCOLL_IS_ERR(st)) {
        const char *why = rcoll_last_init_error();
        fprintf(stderr, "%s: %s failed: %s%s%s\n", prog_name, how, rcoll_status_string(st),
                why && why[0] ? ": " : "", why ? why : "");
        exit(PERF_EXIT_LIBRARY);
    }
    lib_check(c, "rcoll_comm_rank", rcoll_comm_rank(c->comm, &c->rank));
    lib_check(c, "rcoll_comm_size", rcoll_comm_size(c->comm, &c->nranks));
}

/* Buffers for the largest row of any selected datatype; every rank agrees before going on. */
static void buffers_alloc(perf_ctx_t *c)
{
    size_t send = 0, recv = 0, big = 0;
    for (int i = 0; i < c->opt.ndtypes; i++) {
        size_t ts = dtype_size(c->opt.dtypes[i]);
        perf_sizes_t sz;
        c->coll->sizes(c->opt.max_bytes / ts, c->nranks, c->rank, &sz);
        size_t s = sz.send_count * ts, r = sz.recv_count * ts;
        send = s > send ? s : send;
        recv = r > recv ? r : recv;
        big = (s > r ? s : r) > big ? (s > r ? s : r) : big;
    }
    /* At least one cache line each so pointers are never NULL, even for 0-byte rows. */
    send += 64;
    big += 64;
    recv += 64;
    void *sb = NULL, *rb = NULL, *eb = NULL;
    int bad = posix_memalign(&sb, 4096, send) != 0 || posix_memalign(&rb, 4096, big) != 0 ||
              posix_memalign(&eb, 4096, recv) != 0;
    c->reqs = calloc((size_t)c->opt.agg, sizeof(*c->reqs));
    bad |= c->reqs == NULL;
    if (bad)
        fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes of buffers for -e %zu\n",
                prog_name, c->rank, send + big + recv, c->opt.max_bytes);
    if (any_rank(c, bad))
        leave(c, PERF_EXIT_INTERNAL);
    memset(sb, 0, send); /* touch every page now, not inside a timed loop */
    memset(rb, 0, big);
    memset(eb, 0, recv);
    c->sendbuf = sb;
    c->recvbuf = rb;
    c->expbuf = eb;
    c->user_bytes = send + big + recv;
}

static void print_footer(perf_ctx_t *c)
{
    double avg = c->bw_count ? c->bw_sum / (double)c->bw_count : 0.0;
    if (c->rank != 0)
        return;
    if (c->memlog)
        fputs(c->memlog, stdout);
    printf("# %-20s : %" PRId64 " %s\n", "Out of bounds values", c->wrong_total,
           c->wrong_total ? "FAILED" : "OK");
    printf("# %-20s : %g\n", "Avg bus bandwidth", avg);
    printf("#\n# Collective test concluded: %s\n", c->coll->name);
    fflush(stdout);
    if (c->json) {
        fprintf(c->json, "],\"out_of_bounds\":{\"count\":%" PRId64 ",\"okay\":%s},"
                "\"average_bus_bandwidth\":", c->wrong_total, c->wrong_total ? "false" : "true");
        json_num(c->json, avg);
        fprintf(c->json, "}\n");
    }
}

int perf_main(int argc, char **argv, const perf_coll_t *coll)
{
    perf_ctx_t ctx;
    perf_ctx_t *c = &ctx;

    memset(c, 0, sizeof(*c));
    c->coll = coll;
    prog_name = coll->name;
    usage_lead = env_rank_hint() <= 0;
    parse_args(argc, argv, &c->opt);
    watchdog_setup(c->opt.timeout);

    comm_create(c);
    if (coll->rooted && c->opt.root >= c->nranks) {
        if (c->rank == 0)
            fprintf(stderr, "%s: invalid value for -r: %d (the job has %d ranks)\n", prog_name,
                    c->opt.root, c->nranks);
        leave(c, PERF_EXIT_USAGE);
    }
    json_open(c, argc, argv);
    print_preamble(c);
    buffers_alloc(c);
    if (c->opt.mem_report && c->rank == 0) {
        char lib[32], usr[32], tot[32];
        size_t lb = mem_usage(c);
        fmt_mem(lib, sizeof(lib), (double)lb);
        fmt_mem(usr, sizeof(usr), (double)c->user_bytes);
        fmt_mem(tot, sizeof(tot), (double)(lb + c->user_bytes));
        printf("# %-20s : rcoll library %s | user buffers %s | Total %s\n", "Host memory usage",
               lib, usr, tot);
    }
    if (c->rank == 0) {
        print_header();
        fflush(stdout);
    }

    int nroots = coll->rooted && c->opt.root < 0 ? c->nranks : 1;
    int nops = coll->reducing ? c->opt.nops : 1;
    for (int cyc = 0; c->opt.cycles == 0 || cyc < c->opt.cycles; cyc++) {
        for (int d = 0; d < c->opt.ndtypes; d++) {
            for (int p = 0; p < nops; p++) {
                for (int r = 0; r < nroots; r++) {
                    perf_op_t o = {
                        .comm = c->comm, .rank = c->rank, .nranks = c->nranks,
                        .dtype = c->opt.dtypes[d],
                        .op = coll->reducing ? c->opt.ops[p] : RCOLL_SUM,
                        .root = !coll->rooted ? 0 : c->opt.root < 0 ? r : c->opt.root};
                    run_sweep(c, &o);
                }
            }
        }
    }
    if (c->opt.timeout > 0)
        alarm((unsigned)c->opt.timeout); /* bounds the teardown too */
    print_footer(c);
    int code = c->wrong_total ? PERF_EXIT_WRONG : PERF_EXIT_OK;
    if (c->json)
        fclose(c->json);
    c->json = NULL;
    rcoll_status_t st = rcoll_comm_destroy(c->comm);
    if (RCOLL_IS_ERR(st)) {
        fprintf(stderr, "%s: rank %d: rcoll_comm_destroy failed: %s\n", prog_name, c->rank,
                rcoll_status_string(st));
        if (code == PERF_EXIT_OK)
            code = PERF_EXIT_LIBRARY;
    }
    free(c->sendbuf);
    free(c->recvbuf);
    free(c->expbuf);
    free(c->reqs);
    free(c->memlog);
    return code;
}
