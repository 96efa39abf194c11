/*
 * select.h - the cost model of the all-reduce algorithms: alpha-beta-gamma constants (per-message
 * latency alpha and per-byte transfer time beta of the path, per-byte reduction time gamma),
 * their defaults and tuning files, the pipeline chunk, and pure forms of the model's
 * predictions and choice over the algorithm table (algo/algo.h; each algorithm's predict
 * holds its formula).  No I/O.
 */
#ifndef RCOLL_ALGO_SELECT_H
#define RCOLL_ALGO_SELECT_H

#include <stddef.h>
#include "algo/algo.h"
#include "rcoll.h"

typedef struct rcoll_path_cost {
    double alpha_us;        /* per message */
    double beta_us_per_b;   /* per byte moved */
} rcoll_path_cost_t;

struct rcoll_tuning { /* rcoll_tuning_t (algo/algo.h) */
    rcoll_path_cost_t shm;  /* ranks on one host over shared memory */
    rcoll_path_cost_t net;  /* ranks over the network transport */
    double gamma_us_per_b;  /* per byte reduced */
};

/* Constants fitted to this project's measurements (docs/benchmarks.md). */
void rcoll_tuning_defaults(rcoll_tuning_t *t);
/* Override from text of "key = value" lines (# comments): shm_alpha_us, shm_beta_gbps,
 * net_alpha_us, net_beta_gbps, reduce_gbps.  RCOLL_ERR_INVALID_ARG naming the line on error;
 * t is only changed on success. */
rcoll_status_t rcoll_tuning_parse(const char *text, rcoll_tuning_t *t);

/* Predicted microseconds of one all-reduce of `bytes` on n ranks without a host layout (the
 * table's predict) with algorithm a over the given path (shm = 1: shared memory; hostseg = 1: every
 * rank maps one host segment); a huge value when a is not applicable (one-shot and two-shot
 * without a host segment, one-shot above its size, hier). */
double rcoll_select_predict(const rcoll_tuning_t *t, rcoll_allreduce_alg_t a, int n,
                            size_t bytes, int shm, int hostseg);
/* The cheapest algorithm (ties: lower enum); *predicted_us (optional) gets its time. */
rcoll_allreduce_alg_t rcoll_select_allreduce(const rcoll_tuning_t *t, int n, size_t bytes,
                                             int shm, int hostseg, double *predicted_us);

/* The hierarchical all-reduce on nhosts hosts of ppn ranks each: ring reduce-scatter over
 * shared memory, ring all-reduce of each 1/ppn shard across hosts (the ppn shards in
 * parallel, sharing each host's link), ring all-gather over shared memory:
 *   2(k-1)a_s + 2(k-1)/k S b_s + (k-1)/k S g + 2(H-1)a_n + 2(H-1)/H S b_n + (H-1)/(Hk) S g.
 * HUGE_VAL unless nhosts > 1 and ppn > 1. */
double rcoll_select_predict_hier(const rcoll_tuning_t *t, int nhosts, int ppn, size_t bytes);
/* The flat choice (rcoll_select_allreduce on all nhosts*ppn ranks over the network) against
 * the hierarchical one; *predicted_us gets the winner's time. */
rcoll_allreduce_alg_t rcoll_select_allreduce_hosts(const rcoll_tuning_t *t, int nhosts, int ppn,
                                                   size_t bytes, double *predicted_us);

/* Pipeline chunk in bytes for algorithm a (ring, tree; others: max_chunk): the minimum of
 * (k + L/C - 1)(alpha + C (beta + gamma)) over C, where k is the pipeline depth (ring 2(n-1)
 * steps, tree 2 D) and L the bytes per lane (ring S/n, tree S/2), that is
 * C = sqrt(L alpha / ((k - 1)(beta + gamma))), rounded to the better 64-byte neighbour and
 * kept within [min(4096, max_chunk), max_chunk]. */
size_t rcoll_select_chunk(const rcoll_tuning_t *t, rcoll_allreduce_alg_t a, int n, size_t bytes,
                          int shm, size_t max_chunk);

#endif
