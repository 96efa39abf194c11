/*
 * perf_common.h - the harness shared by rcoll's nccl-tests-compatible perf binaries.
 *
 * A perf binary describes one collective with a perf_coll_t (name, bus-bandwidth factor,
 * buffer sizes, how to run it, how to fill inputs and what to expect) and calls perf_main().
 * The harness owns everything else: flags, launch, size sweep, timing, the table and footer,
 * JSON output, the memory report, correctness checks and exit codes
 * (docs: /work/shared/specs/nccl-tests-compat.md).  Uses the public rcoll API only.
 *
 * A minimal user (see all_reduce_perf.c):
 *     static const perf_coll_t coll = { .name = "all_reduce_perf", .reducing = 1, ... };
 *     int main(int argc, char **argv) { return perf_main(argc, argv, &coll); }
 */
#ifndef RCOLL_PERF_COMMON_H
#define RCOLL_PERF_COMMON_H

#include <stddef.h>

#include "rcoll.h"

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

    /* busbw = algbw x bus_factor(nranks). */
    double (*bus_factor)(int nranks);

    /* Fill *sz for a row whose nominal element count is `count` (= -b..-e size / type size).
     * The row's size column is max(send_count, recv_count) x type size, which is also the S
     * used for algbw (it matches the spec's table for every collective). */
    void (*sizes)(size_t count, int nranks, int rank, perf_sizes_t *sz);

    /* Run one operation to completion (blocking call).  Required. */
    rcoll_status_t (*run)(const perf_op_t *o, const void *sendbuf, void *recvbuf);

    /* Start one operation without waiting (nonblocking call), or NULL when the collective has
     * no nonblocking form (the harness then uses run). */
    rcoll_status_t (*start)(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                            rcoll_request_t *req);

    /* Write this rank's sz.send_count input elements into sendbuf.  Usually one call of
     * perf_fill_input(). */
    void (*fill)(const perf_op_t *o, void *sendbuf);

    /* Write the exact expected content of this rank's receive buffer into `expected` (room for
     * sz.recv_count elements) and return how many leading elements to compare; 0 when this
     * rank's output is undefined (a non-root rank of reduce).  Computed by the harness helpers
     * below, never through the library. */
    size_t (*expect)(const perf_op_t *o, void *expected);
} perf_coll_t;

/* Run the benchmark: parse argv, create the communicator, sweep, print, clean up.
 * Returns the process exit code (PERF_EXIT_*); some failures exit directly with their code. */
int perf_main(int argc, char **argv, const perf_coll_t *coll);

/* ---- Data helpers: inputs whose reductions are exact in any order --------------------------
 * value(r, i) is a pure function of (datatype, op, rank r, element index i):
 *  - integer types: a hash of (r, i) over the full range (sum/prod wrap exactly mod 2^bits);
 *  - float types, op PROD: +-1 or +-2, at most ceil(nranks/8) factors of 2 per element (fits
 *    float16 up to 120 ranks);
 *  - other float ops: small integers in [-A, A] with A chosen so every partial sum of nranks
 *    values is exactly representable (A <= 256/nranks for bfloat16, 2048/nranks for float16).
 * nranks is needed for A and the prod period; it must be the communicator size. */

/* buf[k] = value(rank, first + k) for k < count, in datatype dt. */
void perf_fill_input(void *buf, size_t count, rcoll_datatype_t dt, rcoll_op_t op, int rank,
                     int nranks, size_t first);

/* buf[k] = op over r < nranks of value(r, first + k), computed exactly with rcoll's semantics
 * (integer wrap; integer AVG = wrapped sum / nranks truncating; float AVG = exact sum divided
 * by nranks in the element type, half/bfloat16 through float32). */
void perf_fill_reduced(void *buf, size_t count, rcoll_datatype_t dt, rcoll_op_t op, int nranks,
                       size_t first);

/* Number of elements of got[] that differ from expected[]: integers bitwise, floats by value
 * (+0 == -0), float AVG within 2 units in the last place of the element type. */
size_t perf_count_wrong(const void *got, const void *expected, size_t count,
                        rcoll_datatype_t dt, rcoll_op_t op);

/* Names as nccl-tests prints them ("float", "half", "sum", ...). */
const char *perf_dtype_name(rcoll_datatype_t dt);
const char *perf_op_name(rcoll_op_t op);

/* Parse "64", "8K", "32M", "1G" (powers of 1024, either case) into bytes; 0 on success,
 * -1 on a malformed or overflowing value. */
int perf_parse_size(const char *s, size_t *bytes);

#endif /* RCOLL_PERF_COMMON_H */
