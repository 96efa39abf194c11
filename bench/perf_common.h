/*
 * perf_common.h - the harness shared by rcoll's nccl-tests-compatible perf binaries.
 *
 * A perf binary describes one collective with a perf_coll_t (name, bus-bandwidth factor,
 * buffer sizes, how to run it, how to fill inputs and what to expect) and calls perf_main().
 * The harness owns everything else: flags, launch, size sweep, timing, the table and footer,
 * JSON output, the memory report, correctness checks and exit codes
 * (docs: /work/shared/specs/nccl-tests-compat.md).  Uses the public rcoll API only.
 * Implementation: perf_common.c (run, time, print), perf_opts.c (flags), perf_data.c (data).
 *
 * A minimal user (see all_reduce_perf.c):
 *     static const perf_coll_t coll = { .name = "all_reduce_perf", .reducing = 1, ... };
 *     int main(int argc, char **argv) { return perf_main(argc, argv, &coll); }
 */
#ifndef RCOLL_PERF_COMMON_H
#define RCOLL_PERF_COMMON_H

#include <stddef.h>

#include "rcoll.h"
#include "perf_data.h" /* inputs, expected results, checking: what callbacks use */

/* Exit codes (the spec's list). */
enum {
    PERF_EXIT_OK = 0,
    PERF_EXIT_INTERNAL = 1,
    PERF_EXIT_CUDA = 2,
    PERF_EXIT_LIBRARY = 3,
    PERF_EXIT_TIMEOUT = 4,
    PERF_EXIT_NOT_IMPLEMENTED = 5,
    PERF_EXIT_USAGE = 6,
    PERF_EXIT_WRONG = 7
};

/* Element counts of one table row, for the calling rank.  All counts are in elements. */
typedef struct {
    size_t send_count;       /* elements this rank sends (size of its send buffer) */
    size_t recv_count;       /* elements this rank receives (size of its receive buffer) */
    size_t param_count;      /* the count argument of the library call */
    size_t send_inplace_off; /* in place: where this rank's input starts inside the one buffer */
    size_t recv_inplace_off; /* in place: where this rank's output starts inside that buffer */
} perf_sizes_t;

/* One operation as the harness asks a collective to run or check it. */
typedef struct {
    rcoll_comm_t comm;
    int rank;
    int nranks;
    rcoll_datatype_t dtype;
    rcoll_op_t op;   /* the -o operator; RCOLL_SUM for non-reducing collectives */
    int root;        /* the -r root; 0 for unrooted collectives */
    int in_place;    /* 1: sendbuf and recvbuf lie inside one buffer at the *_inplace_off */
    perf_sizes_t sz; /* from perf_coll_t.sizes for this row */
} perf_op_t;

/* What the in-place column of a row does. */
typedef enum {
    PERF_IN_PLACE_CHECKED = 0, /* timed and checked like out of place (the default) */
    PERF_IN_PLACE_UNCHECKED,   /* timed with the in-place buffers, #wrong prints N/A: the
                                * result is not defined (nccl-tests' sendrecv does the same) */
    PERF_IN_PLACE_NONE         /* the library has no in-place form: the column is not run and
                                * prints N/A in all four fields (JSON nulls), and is left out
                                * of the average bus bandwidth */
} perf_in_place_t;

/*
 * The description of one collective.  Buffers handed to the callbacks:
 *   out of place: sendbuf holds sz.send_count elements, recvbuf sz.recv_count;
 *   in place:     one buffer B of max(send, recv) elements; sendbuf = B + send_inplace_off,
 *                 recvbuf = B + recv_inplace_off (the callback decides whether to pass
 *                 RCOLL_IN_PLACE or the pointers to the library).
 */
typedef struct {
    const char *name; /* program name as printed: "all_reduce_perf" */
    int reducing;     /* 1: -o applies and the redop column names it; 0: "none", -o ignored */
    int rooted;       /* 1: -r applies (-1 loops over every root); 0: root column prints -1 */
    perf_in_place_t in_place; /* what the in-place column does (0: timed and checked) */

    /* busbw = algbw x bus_factor(nranks). */
    double (*bus_factor)(int nranks);

    /* Fill *sz for a row whose nominal element count is `count` (= -b..-e size / type size).
     * The row's size column is max(send_count, recv_count) x type size, which is also the S
     * used for algbw (it matches the spec's table for every collective); the count column is
     * param_count, as nccl-tests prints it (the count argument of the call). */
    void (*sizes)(size_t count, int nranks, int rank, perf_sizes_t *sz);

    /* Run one operation to completion (blocking call).  Required. */
    rcoll_status_t (*run)(const perf_op_t *o, const void *sendbuf, void *recvbuf);

    /* Start one operation without waiting (nonblocking call), or NULL when the collective has
     * no nonblocking form (the harness then uses run). */
    rcoll_status_t (*start)(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                            rcoll_request_t *req);

    /* Write this rank's sz.send_count input elements into sendbuf.  Usually one call of
     * perf_fill_input().  Called before every timed column and every check, never inside the
     * timed region.  recvbuf is the column's receive buffer (poisoned before a check); most
     * collectives leave it alone, one whose library call works in one buffer only (broadcast,
     * out of place) stages its input there. */
    void (*fill)(const perf_op_t *o, void *sendbuf, void *recvbuf);

    /* Write the exact expected content of this rank's receive buffer into `expected` (room for
     * sz.recv_count elements) and return how many leading elements to compare; 0 when this
     * rank's output is undefined (a non-root rank of reduce).  Computed with the helpers of
     * perf_data.h, never through the library. */
    size_t (*expect)(const perf_op_t *o, void *expected);
} perf_coll_t;

/* Bus-bandwidth factors shared by several collectives: 1 (broadcast, reduce, send/recv) and
 * (n-1)/n (all-gather, reduce-scatter, all-to-all: each rank moves all but its own block). */
double perf_bus_factor_one(int nranks);
double perf_bus_factor_ring(int nranks);

/* Run the benchmark: parse argv, create the communicator, sweep, print, clean up.
 * Returns the process exit code (PERF_EXIT_*); some failures exit directly with their code. */
int perf_main(int argc, char **argv, const perf_coll_t *coll);

/* Parse "64", "8K", "32M", "1G" (powers of 1024, either case) into bytes; 0 on success,
 * -1 on a malformed or overflowing value. */
int perf_parse_size(const char *s, size_t *bytes);

#endif /* RCOLL_PERF_COMMON_H */
