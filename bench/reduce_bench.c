/*
 * reduce_bench.c - throughput of the CPU reduction kernels (algo/reduce.c) next to memcpy.
 * For each datatype, dst = a OP b over buffers of SIZE bytes; GB/s counts the two inputs read
 * and the output written (3 x SIZE), memcpy's GB/s counts read + write (2 x SIZE), both from
 * the median of ITERS timed runs after one warm-up.  Single-threaded; needs no network.
 *
 *   reduce_bench [-s SIZE[K|M|G]] [-n ITERS] [-i generic|avx2|avx512|all]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algo/reduce.h"
#include "rcoll.h"

typedef struct {
    rcoll_datatype_t dt;
    rcoll_op_t op;
} bench_case_t;

/* AVG rows divide by 4 (4 ranks). */
static const bench_case_t bench_cases[] = {
    {RCOLL_INT8, RCOLL_SUM},     {RCOLL_UINT8, RCOLL_SUM},     {RCOLL_UINT8, RCOLL_BXOR},
    {RCOLL_INT16, RCOLL_SUM},    {RCOLL_INT16, RCOLL_PROD},    {RCOLL_INT16, RCOLL_MIN},
    {RCOLL_INT16, RCOLL_AVG},    {RCOLL_INT16, RCOLL_BAND},    {RCOLL_UINT16, RCOLL_SUM},
    {RCOLL_UINT16, RCOLL_MAX},   {RCOLL_INT32, RCOLL_SUM},     {RCOLL_INT32, RCOLL_PROD},
    {RCOLL_INT32, RCOLL_AVG},    {RCOLL_INT32, RCOLL_BAND},    {RCOLL_UINT32, RCOLL_SUM},
    {RCOLL_INT64, RCOLL_SUM},    {RCOLL_INT64, RCOLL_BOR},     {RCOLL_UINT64, RCOLL_SUM},
    {RCOLL_BOOL, RCOLL_SUM},     {RCOLL_BOOL, RCOLL_PROD},     {RCOLL_BOOL, RCOLL_BXOR},
    {RCOLL_FLOAT16, RCOLL_SUM},  {RCOLL_BFLOAT16, RCOLL_SUM},  {RCOLL_FLOAT32, RCOLL_SUM},
    {RCOLL_FLOAT32, RCOLL_MIN},  {RCOLL_FLOAT64, RCOLL_SUM},
};
#define NUM_CASES (sizeof(bench_cases) / sizeof(bench_cases[0]))

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* "16M", "4096", "1G" -> bytes; 0 on a malformed value. */
static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    return *end == '\0' ? (size_t)v : 0;
}

/* Inputs that keep every type away from overflow to Inf/NaN and from subnormals. */
static void fill(void *p, size_t bytes, rcoll_datatype_t dt, int which)
{
    size_t n;
    switch (dt) {
    case RCOLL_FLOAT16:
    case RCOLL_BFLOAT16: {
        uint16_t v = dt == RCOLL_FLOAT16 ? rcoll_float_to_half(which ? 1.5f : 0.25f)
                                         : rcoll_float_to_bf16(which ? 1.5f : 0.25f);
        n = bytes / 2;
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)p)[i] = v;
        break;
    }
    case RCOLL_FLOAT32:
        n = bytes / 4;
        for (size_t i = 0; i < n; i++)
            ((float *)p)[i] = which ? 1.5f + (float)(i & 7) : 0.25f;
        break;
    case RCOLL_FLOAT64:
        n = bytes / 8;
        for (size_t i = 0; i < n; i++)
            ((double *)p)[i] = which ? 1.5 + (double)(i & 7) : 0.25;
        break;
    case RCOLL_BOOL: /* 0 and 1, in two patterns */
        for (size_t i = 0; i < bytes; i++)
            ((unsigned char *)p)[i] = (unsigned char)((which ? i : i >> 1) & 1);
        break;
    default:
        memset(p, which ? 3 : 5, bytes);
        break;
    }
}

static double time_memcpy(void *dst, const void *src, size_t bytes, int iters, double *t)
{
    memcpy(dst, src, bytes);
    for (int k = 0; k < iters; k++) {
        double t0 = now_s();
        memcpy(dst, src, bytes);
        t[k] = now_s() - t0;
    }
    return median(t, iters);
}

static void print_cpu(void)
{
    printf("# best kernel variant: %s", rcoll_reduce_isa_name(rcoll_reduce_isa_best()));
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    printf("   cpu:%s%s%s%s%s%s\n", __builtin_cpu_supports("avx512f") ? " avx512f" : "",
           __builtin_cpu_supports("avx512bw") ? " avx512bw" : "",
           __builtin_cpu_supports("avx512vl") ? " avx512vl" : "",
           __builtin_cpu_supports("avx512dq") ? " avx512dq" : "",
           __builtin_cpu_supports("avx2") ? " avx2" : "",
           __builtin_cpu_supports("f16c") ? " f16c" : "");
#else
    printf("   cpu: not x86\n");
#endif
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-s SIZE[K|M|G]] [-n ITERS] [-i generic|avx2|avx512|all]\n"
            "  -s  bytes per buffer (default 16M)\n"
            "  -n  timed iterations per row, median reported (default 20)\n"
            "  -i  kernel variant to run (default: the best this CPU supports)\n",
            prog);
}

int main(int argc, char **argv)
{
    size_t bytes = (size_t)16 << 20;
    int iters = 20;
    const char *isa_arg = NULL;
    int opt;

    while ((opt = getopt(argc, argv, "s:n:i:h")) != -1) {
        switch (opt) {
        case 's': bytes = parse_size(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'i': isa_arg = optarg; break;
        default: usage(argv[0]); return opt == 'h' ? 0 : 2;
        }
    }
    if (bytes < 64 || iters < 1) {
        usage(argv[0]);
        return 2;
    }
    bytes &= ~(size_t)63; /* a whole number of elements for every type */

    int isa_on[RCOLL_REDUCE_ISA_COUNT] = {0};
    if (isa_arg == NULL) {
        isa_on[rcoll_reduce_isa_best()] = 1;
    } else {
        int found = 0;
        for (int i = 0; i < RCOLL_REDUCE_ISA_COUNT; i++) {
            if (strcmp(isa_arg, "all") == 0 ||
                strcmp(isa_arg, rcoll_reduce_isa_name((rcoll_reduce_isa_t)i)) == 0)
                isa_on[i] = found = 1;
        }
        if (!found) {
            usage(argv[0]);
            return 2;
        }
    }

    unsigned char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    unsigned char *d = aligned_alloc(64, bytes);
    double *t = malloc((size_t)iters * sizeof(*t));
    if (a == NULL || b == NULL || d == NULL || t == NULL) {
        fprintf(stderr, "reduce_bench: cannot allocate 3 x %zu bytes\n", bytes);
        return 1;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    memset(d, 0, bytes);

    print_cpu();
    double mc = time_memcpy(d, a, bytes, iters, t);
    double mc_gbs = 2.0 * (double)bytes / mc / 1e9;
    printf("# buffer %.1f MiB, %d iterations (median); memcpy %.2f GB/s (read + write)\n",
           (double)bytes / (1 << 20), iters, mc_gbs);
    printf("# GB/s = (2 inputs + 1 output) x buffer / time\n");
    printf("%-8s %-9s %-5s %10s %10s %8s %10s\n", "variant", "dtype", "op", "count", "time_us",
           "GB/s", "vs_memcpy");

    for (int isa = 0; isa < RCOLL_REDUCE_ISA_COUNT; isa++) {
        if (!isa_on[isa])
            continue;
        if (rcoll_reduce_isa_set((rcoll_reduce_isa_t)isa) != RCOLL_OK) {
            printf("%-8s not supported on this CPU or build\n",
                   rcoll_reduce_isa_name((rcoll_reduce_isa_t)isa));
            continue;
        }
        for (size_t c = 0; c < NUM_CASES; c++) {
            const bench_case_t *bc = &bench_cases[c];
            size_t count = bytes / rcoll_dt_size(bc->dt);
            int divisor = bc->op == RCOLL_AVG ? 4 : 0;
            fill(a, bytes, bc->dt, 0);
            fill(b, bytes, bc->dt, 1);
            rcoll_reduce_local(d, a, b, count, bc->dt, bc->op, divisor); /* warm-up */
            for (int k = 0; k < iters; k++) {
                double t0 = now_s();
                rcoll_reduce_local(d, a, b, count, bc->dt, bc->op, divisor);
                t[k] = now_s() - t0;
            }
            double sec = median(t, iters);
            double gbs = 3.0 * (double)bytes / sec / 1e9;
            printf("%-8s %-9s %-5s %10zu %10.1f %8.2f %10.2f\n",
                   rcoll_reduce_isa_name((rcoll_reduce_isa_t)isa), rcoll_dt_name(bc->dt),
                   rcoll_op_name(bc->op), count, sec * 1e6, gbs, gbs / mc_gbs);
        }
    }
    rcoll_reduce_isa_set(rcoll_reduce_isa_best());

    free(a);
    free(b);
    free(d);
    free(t);
    return 0;
}
