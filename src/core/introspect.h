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

#endif
