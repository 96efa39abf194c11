/*
 * introspect.h - what a communicator would choose, for the tools and benchmarks that link the
 * layers (bench/selector_check): not part of the public API.
 */
#ifndef RCOLL_CORE_INTROSPECT_H
#define RCOLL_CORE_INTROSPECT_H

#include <stddef.h>
#include "rcoll.h"

/* The all-reduce algorithm (an index into rcoll_alg_names, algo/algo.h) that comm runs for
 * an all-reduce of `bytes`: RCOLL_ALGO's where it applies, else the cost model's.  -1 for a
 * communicator of one rank or an invalid handle.  Logs the choice as a call would. */
int rcoll_comm_allreduce_choice(rcoll_comm_t comm, size_t bytes);
/* The same for collective coll (rcoll_coll_t, algo/algo.h: 0 all-reduce, 1 broadcast,
 * 2 all-gather) moving `bytes` (broadcast: the vector; all-gather: the gathered whole): an
 * index into rcoll_algo_tables[coll].names, -1 as above. */
int rcoll_comm_algo_choice(rcoll_comm_t comm, int coll, size_t bytes);
/* The sizes at which the set-up probe times all-reduce algorithm alg (an index into
 * rcoll_alg_names) on a communicator whose peers are all over shared memory (shm = 1) or not,
 * none above cap: their number, the sizes in pts (RCOLL_ALGO_PROBE_POINTS at most).  A
 * point's budget (10 ms a run) may still stop a curve earlier. */
int rcoll_probe_points(int alg, size_t cap, int shm, size_t *pts);

#endif
