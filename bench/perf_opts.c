/*
 * perf_opts.c - command-line options of the perf binaries: the nccl-tests flags (same names,
 * defaults and meaning) plus rcoll's own long options, parsed into a perf_opts_t.
 * Invalid usage is reported by the launch's rank 0 only and exits 6 (5 for flags rcoll does
 * not implement); this file creates no communicator and runs nothing.
 */
#include "perf_opts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *perf_prog_name = "perf";
int perf_usage_lead = 1; /* only the launch's rank 0 prints usage errors */

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
        "  -o,--op <op>               sum prod min max avg band bor bxor all [sum]\n"
        "  -d,--datatype <type>       int8 uint8 int32 uint32 int64 uint64 half float\n"
        "                             double bfloat16 int16 uint16 bool all [float]\n"
        "                             (pairs rcoll does not define are skipped: bitwise\n"
        "                             ops on floating types, avg on bool)\n"
        "  -r,--root <rank>           root of rooted collectives, -1 = all [0]\n"
        "  -z,--blocking <0/1/2>      1: wait and barrier after each op    [0]\n"
        "  -T,--timeout <s>           abort (exit 4) when init or a row takes longer [0]\n"
        "  -a,--average <0-3>         time over ranks: 0 rank0 1 mean 2 min 3 max [1]\n"
        "  -J,--output_file <file>    also write JSON results\n"
        "  -M,--memory <0/1>          print a memory-usage report          [0]\n"
        "  -t,--nthreads <n>          threads per process (only 1)         [1]\n"
        "  -g,--ngpus <n>             GPUs per thread (only 1)             [1]\n"
        "     --memtype <host|cuda|managed>  buffer memory: host, CUDA device or  [host]\n"
        "                             CUDA managed memory (one device per local rank)\n"
        "     --ranks-per-gpu <n>     local ranks sharing one CUDA device  [1]\n"
        "     --algo <name>           force an algorithm (sets RCOLL_ALGO)\n"
        "     --transport <name>      force a transport (sets RCOLL_TRANSPORT)\n"
        "  -h,--help                  this text\n"
        "Launch several ranks with tools/rcoll-run; without RCOLL_* variables it runs one rank.\n"
        "Exit: 0 ok, 1 internal, 2 CUDA error, 3 library error, 4 timeout, 5 not implemented,"
        " 6 usage,"
        " 7 wrong results.\n",
        perf_prog_name);
}

void perf_usage_fail(int code, const char *fmt, const char *what, const char *value)
{
    if (perf_usage_lead) {
        fprintf(stderr, "%s: ", perf_prog_name);
        fprintf(stderr, fmt, what, value);
        fprintf(stderr, "\n");
        if (code == PERF_EXIT_USAGE)
            fprintf(stderr, "%s: run with -h for the list of options\n", perf_prog_name);
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
        perf_usage_fail(PERF_EXIT_USAGE, "invalid value for %s: %s", what, range);
    }
    return v;
}

static size_t parse_size_opt(const char *what, const char *s)
{
    size_t v;
    if (perf_parse_size(s, &v) != 0)
        perf_usage_fail(PERF_EXIT_USAGE, "invalid size for %s: '%s' (use e.g. 8, 64K, 32M, 1G)",
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
        {"bf16", RCOLL_BFLOAT16}, {"int16", RCOLL_INT16}, {"short", RCOLL_INT16},
        {"uint16", RCOLL_UINT16}, {"bool", RCOLL_BOOL}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].dt;
    if (strncmp(s, "f8", 2) == 0 || strncmp(s, "fp8", 3) == 0)
        perf_usage_fail(PERF_EXIT_NOT_IMPLEMENTED,
                        "%s %s: not implemented (rcoll has no fp8 types)", "-d", s);
    return -1;
}

static int lookup_op(const char *s)
{
    for (int i = 0; i < RCOLL_NUM_OPS; i++)
        if (strcmp(s, perf_op_name((rcoll_op_t)i)) == 0)
            return i;
    if (strcmp(s, "mulsum") == 0 || strcmp(s, "premulsum") == 0)
        perf_usage_fail(PERF_EXIT_NOT_IMPLEMENTED, "%s %s: not implemented in rcoll", "-o", s);
    return -1;
}

/* -d / -o take one name, "all", or a comma-separated list (an rcoll extension). */
static void parse_dtypes(perf_opts_t *o, const char *arg)
{
    if (strcmp(arg, "all") == 0) {
        memcpy(o->dtypes, perf_all_dtypes, sizeof(perf_all_dtypes));
        o->ndtypes = RCOLL_NUM_DATATYPES;
        return;
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->ndtypes = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int dt = lookup_dtype(t);
        if (dt < 0)
            perf_usage_fail(PERF_EXIT_USAGE, "invalid %s '%s' (int8 uint8 int32 uint32 int64 "
                            "uint64 half float double bfloat16 int16 uint16 bool all)",
                            "datatype", t);
        if (o->ndtypes < RCOLL_NUM_DATATYPES)
            o->dtypes[o->ndtypes++] = (rcoll_datatype_t)dt;
    }
    if (o->ndtypes == 0)
        perf_usage_fail(PERF_EXIT_USAGE, "invalid %s '%s'", "datatype", arg);
}

static void parse_ops(perf_opts_t *o, const char *arg)
{
    if (strcmp(arg, "all") == 0) {
        memcpy(o->ops, perf_all_ops, sizeof(perf_all_ops));
        o->nops = RCOLL_NUM_OPS;
        return;
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->nops = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int op = lookup_op(t);
        if (op < 0)
            perf_usage_fail(PERF_EXIT_USAGE,
                            "invalid %s '%s' (sum prod min max avg band bor bxor all)", "op", t);
        if (o->nops < RCOLL_NUM_OPS)
            o->ops[o->nops++] = (rcoll_op_t)op;
    }
    if (o->nops == 0)
        perf_usage_fail(PERF_EXIT_USAGE, "invalid %s '%s'", "op", arg);
}

enum { OPT_MEMTYPE = 1000, OPT_ALGO, OPT_TRANSPORT, OPT_RANKS_PER_GPU };

void perf_parse_args(int argc, char **argv, perf_opts_t *o)
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
        {"ranks-per-gpu", required_argument, NULL, OPT_RANKS_PER_GPU},
        {NULL, 0, NULL, 0}};
    int c;

    *o = (perf_opts_t){
        .min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20,
        .step_factor = 1, .iters = 20, .warmup = 1, .agg = 1, .cycles = 1, .check = 1,
        .root = 0, .blocking = 0, .timeout = 0, .average = 1, .mem_report = 0,
        .nthreads = 1, .ngpus = 1, .ndtypes = 1, .dtypes = {RCOLL_FLOAT32}, .nops = 1,
        .ops = {RCOLL_SUM}, .memtype = PERF_MEM_HOST, .ranks_per_gpu = 1};

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
            if (perf_usage_lead)
                usage(stdout);
            exit(PERF_EXIT_OK);
        case OPT_MEMTYPE:
            if (strcmp(optarg, "host") == 0)
                o->memtype = PERF_MEM_HOST;
            else if (strcmp(optarg, "cuda") == 0 || strcmp(optarg, "device") == 0)
                o->memtype = PERF_MEM_CUDA;
            else if (strcmp(optarg, "managed") == 0)
                o->memtype = PERF_MEM_MANAGED;
            else
                perf_usage_fail(PERF_EXIT_USAGE, "invalid value for %s: '%s' (host, cuda or "
                                "managed)", "--memtype", optarg);
            break;
        case OPT_RANKS_PER_GPU:
            o->ranks_per_gpu = (int)parse_long("--ranks-per-gpu", optarg, 1, 1 << 16);
            break;
        case OPT_ALGO: o->algo = optarg; break;
        case OPT_TRANSPORT: o->transport = optarg; break;
        case ':':
            perf_usage_fail(PERF_EXIT_USAGE, "option %s%s needs a value", "", argv[optind - 1]);
            break;
        default:
            perf_usage_fail(PERF_EXIT_USAGE, "unknown option %s%s", "", argv[optind - 1]);
            break;
        }
    }
    if (optind < argc)
        perf_usage_fail(PERF_EXIT_USAGE, "unexpected argument %s%s", "", argv[optind]);
    if (o->min_bytes > o->max_bytes) {
        char v[64];
        snprintf(v, sizeof(v), "%zu > %zu", o->min_bytes, o->max_bytes);
        perf_usage_fail(PERF_EXIT_USAGE, "invalid size range %s: %s", "-b/-e", v);
    }
    if (o->step_factor <= 1 && o->step_bytes == 0 && o->min_bytes < o->max_bytes)
        perf_usage_fail(PERF_EXIT_USAGE, "invalid value for %s: %s (the sweep would never end)",
                        "-i", "0");
    if (o->nthreads != 1 || o->ngpus != 1)
        perf_usage_fail(PERF_EXIT_NOT_IMPLEMENTED, "%s: not implemented (%s; run one process per "
                        "rank with tools/rcoll-run)", o->nthreads != 1 ? "-t" : "-g",
                        "only 1 thread and 1 device per process are supported");
}
