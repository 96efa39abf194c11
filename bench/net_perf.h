/*
 * net_perf.h - rcoll_net_perf's shared pieces: limits, perftest's headers, the options, one
 * process's side of the test, results; and the functions of its option parser
 * (net_perf_opts.c) and its report writer (net_perf_report.c).
 */
#ifndef RCOLL_BENCH_NET_PERF_H
#define RCOLL_BENCH_NET_PERF_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "transport/transport.h"
#include "util/time.h"

#define NP_DEF_SIZE_BW 65536u          /* perftest's defaults: 64 KiB for bw, 2 B for lat */
#define NP_DEF_SIZE_LAT 2u
#define NP_DEF_MAX_SIZE (8u << 20)     /* top of an -a sweep, as perftest's -a */
#define NP_DEF_ITERS 1000u
#define NP_MAX_ITERS 10000000u
#define NP_MIN_AUTO_ITERS 10u
#define NP_AUTO_TARGET_S 0.5           /* automatic -n: about this long per size */
#define NP_DEF_DEPTH 32
#define NP_MAX_DEPTH 1024
#define NP_BUF_BUDGET ((size_t)64 << 20) /* data bytes in flight per side, at most */
#define NP_WARMUP_LAT 16u
#define NP_PEAK_WINDOW_NS 10000000u  /* bw peak: windows of at least 10 ms */
#define NP_MAX_SIZES 64
#define NP_TOKEN_MAGIC 0x72634e50u     /* "rcNP" */
#define NP_EXIT_FAIL 1
#define NP_EXIT_USAGE 2

/* perftest's separator and column headers (perftest_parameters.h), byte for byte. */
#define NP_RESULT_LINE                                                                        \
    "---------------------------------------------------------------------------------------\n"
#define NP_HEADER_BW                                                                          \
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
#define NP_HEADER_LAT                                                                         \
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "   \
    "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "

typedef enum { NP_MODE_BW, NP_MODE_LAT } np_mode_t;

/* What a round is; the parent sends one token before each, and NP_ROUND_BYE at the end. */
typedef enum { NP_ROUND_WARMUP = 1, NP_ROUND_MEASURE = 2, NP_ROUND_BYE = 3 } np_round_kind_t;

typedef struct {
    uint32_t magic; /* NP_TOKEN_MAGIC */
    uint32_t kind;  /* np_round_kind_t */
    uint64_t size;  /* message bytes */
    uint64_t iters; /* messages (bw) or round trips (lat) */
    uint64_t reserved;
} np_token_t;

typedef struct {
    const rcoll_transport_ops_t *tp;
    np_mode_t mode;
    size_t min_size, max_size; /* equal for one size; -a sweeps powers of two */
    uint64_t iters;            /* 0: automatic */
    int depth;
    int check_all;
    double timeout_s;
    const char *dev_arg; /* index or device name; NULL: device 0 */
    const char *json_path;
} np_opts_t;

/* One process's side: its comms, buffers and the peer process it watches. */
typedef struct {
    const np_opts_t *o;
    const rcoll_transport_ops_t *tp;
    int dev;
    rcoll_transport_props_t props;
    int is_parent;
    pid_t peer_pid;
    int peer_reaped, peer_status; /* parent: the child's wait status once reaped */
    uint32_t spin;
    uint64_t poll_ns; /* RCOLL_POLL_US: polling before naps */
    void *lc, *sc, *rc; /* listen comm, send comm (to the peer), recv comm (from it) */
    unsigned char *sbuf, *rbuf;
    void *smh, *rmh;       /* memory handles of sbuf (on sc) and rbuf (on rc) */
    void *tmh_out, *tmh_in; /* ... of tok_out (on sc) and tok_in (on rc) */
    void **reqs;           /* one slot per outstanding message (depth) */
    np_token_t tok_out, tok_in;
} np_end_t;

/* Poll-loop state: how long the current wait has made no progress. */
typedef struct {
    rcoll_backoff_t bo;
    uint32_t idle;
    uint64_t since_ns;
} np_watch_t;

typedef struct {
    size_t size;
    uint64_t iters;
    double v[7]; /* bw: peak, average (Gb/s), rate (Mpps); lat: min max typ avg stdev p99 p999 */
} np_result_t;

/* net_perf_report.c */
/* qsort order of doubles, ascending. */
int np_cmp_double(const void *a, const void *b);
/* Latency statistics of n one-way times (sorts us): min max typical avg stdev p99 p99.9. */
void np_lat_stats(double *us, uint64_t n, np_result_t *r);
/* One row of perftest's table for the mode; the table header with the run's settings. */
void np_print_row(np_mode_t mode, const np_result_t *r);
void np_print_header(const np_end_t *e);
/* The run's settings and n results as JSON into f. */
rcoll_status_t np_json_write(const np_end_t *e, FILE *f, const np_result_t *res, size_t n);

/* net_perf_opts.c */
/* Parse the command line into o (transport name in *tname): 0 to run, -1 after --help
 * (exit 0), NP_EXIT_USAGE on bad usage (printed). */
int np_parse_args(int argc, char **argv, np_opts_t *o, const char **tname);
/* The built-in transports' names, comma-separated, for messages. */
void np_list_transports(char *buf, size_t len);

#endif
