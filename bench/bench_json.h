/*
 * bench_json.h - JSON string output shared by the benchmark programs (perf binaries,
 * compare_mpi, rcoll_net_perf), which write their results as JSON with plain stdio.
 */
#ifndef RCOLL_BENCH_JSON_H
#define RCOLL_BENCH_JSON_H

#include <stdio.h>

/* Write s as a JSON string literal: quotes and backslashes escaped, control characters and
 * bytes outside ASCII as \u00XX. */
void bench_json_str(FILE *f, const char *s);

#endif
