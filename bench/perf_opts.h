/*
 * perf_opts.h - options of the perf harness (internal to bench/: perf_opts.c parses them,
 * perf_common.c runs them).  Perf binaries themselves only call perf_main().
 */
#ifndef RCOLL_PERF_OPTS_H
#define RCOLL_PERF_OPTS_H

#include <stddef.h>

#include "perf_common.h"

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
    int memtype;      /* perf_memtype_t: where the benchmarked buffers live */
    int ranks_per_gpu; /* --ranks-per-gpu: local ranks that share one CUDA device */
} perf_opts_t;

/* --memtype: host memory (default), CUDA device memory, CUDA managed memory. */
typedef enum { PERF_MEM_HOST = 0, PERF_MEM_CUDA = 1, PERF_MEM_MANAGED = 2 } perf_memtype_t;

/* Program name used in messages (the perf_coll_t name once perf_main has started). */
extern const char *perf_prog_name;
/* 1 on the launch's rank 0 (or a single process): only it prints usage errors. */
extern int perf_usage_lead;

/* Parse argv into *o (defaults first); -h prints usage and exits 0, invalid usage exits with
 * PERF_EXIT_USAGE or PERF_EXIT_NOT_IMPLEMENTED. */
void perf_parse_args(int argc, char **argv, perf_opts_t *o);

/* Print "<prog>: " fmt (with what, value) on the lead rank and exit with code. */
void perf_usage_fail(int code, const char *fmt, const char *what, const char *value);

#endif /* RCOLL_PERF_OPTS_H */
