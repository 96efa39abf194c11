/*
 * project.h - projection of collective times on clusters we do not have: a description of a
 * real cluster (GPUs per node in an NVLink domain, rails of NICs, a 1-, 2- or 3-level fat
 * tree with its oversubscription, switch latency, per-message software overhead) and the
 * alpha-beta time of all-reduce, all-gather and reduce-scatter under each algorithm family
 * (flat ring, double binary tree, hierarchical, log-step), with the nccl-tests bandwidths
 * and the choice per size.  Pure arithmetic: no I/O, no communication, no allocation.
 * docs/scale.md describes the model, its assumptions and what it leaves out.
 */
#ifndef RCOLL_ALGO_PROJECT_H
#define RCOLL_ALGO_PROJECT_H

#include <stddef.h>

#include "rcoll.h"

typedef enum {
    RCOLL_PROJ_ALLREDUCE,
    RCOLL_PROJ_ALLGATHER,
    RCOLL_PROJ_REDUCE_SCATTER,
    RCOLL_PROJ_COLL_COUNT
} rcoll_proj_coll_t;

typedef enum {
    RCOLL_PROJ_RING,      /* one flat ring over every GPU, one channel per rail */
    RCOLL_PROJ_TREE,      /* all-reduce only: NVLink chain in the node + double binary tree
                           * over the nodes, one per rail (NCCL's tree) */
    RCOLL_PROJ_HIER_RING, /* NVLink reduce-scatter, per-rail ring across nodes, NVLink
                           * all-gather (all-gather / reduce-scatter: the half that applies) */
    RCOLL_PROJ_HIER_TREE, /* all-reduce only: as hier-ring with a per-rail tree across nodes */
    RCOLL_PROJ_PAT,       /* log-step across nodes, one rank per node on each rail:
                           * ceil(log2 nodes) steps, the large steps between near nodes
                           * (NCCL's PAT); all-reduce = log-step reduce-scatter + all-gather */
    RCOLL_PROJ_ALG_COUNT
} rcoll_proj_alg_t;

#define RCOLL_PROJ_MAX_LEVELS 3

/* A cluster.  Bandwidths are per direction; "GB" is 1e9 bytes.  Nodes are numbered leaf by
 * leaf (a job is placed topology-aware), every rail is its own network of the same shape. */
typedef struct rcoll_cluster {
    int gpus_per_node;     /* ranks in one NVLink domain (1: one rank per host) */
    double nvlink_gbs;     /* NVLink bandwidth of one GPU, GB/s per direction */
    double nvlink_lat_us;  /* one NVLink message's latency (through the NVSwitch) */
    int nics_per_node;     /* rails; a GPU uses NIC (local index * nics / gpus) */
    double nic_gbit;       /* line rate of one NIC, Gbit/s per direction */
    double nic_eff;        /* payload fraction of the line rate (packet headers), (0, 1] */
    double nic_lat_us;     /* one network message's latency through the NIC and cables */
    int levels;            /* fat-tree levels: 1 (one switch), 2 (leaf-spine), 3 (pods) */
    int nodes_per_leaf;    /* nodes under one leaf switch (levels >= 2) */
    int leaves_per_pod;    /* leaves under one pod's spines (levels == 2: the whole tree) */
    double oversub[RCOLL_PROJ_MAX_LEVELS - 1]; /* down:up ratio of the leaf [0] and of the
                                                * pod's spines [1]; 1 = non-blocking */
    double switch_lat_us;  /* per switch traversed */
    double overhead_us;    /* software per message (both sides together) */
    double reduce_gbs;     /* reduction speed of one rank, GB/s of input; 0: free (overlapped
                            * with the transfer, as GPU kernels are) */
    int pipelined;         /* 0: the NVLink and network phases of hier-* and pat run one after
                            * the other (algo/hier.c today); 1: they overlap chunk by chunk */
} rcoll_cluster_t;

/* An H100 cluster (docs/scale.md gives the sources): 8 GPUs per node on NVLink 4 (450 GB/s
 * per direction, ~1 us), 8 rails of 400 Gb/s NDR InfiniBand (4096-byte MTU: 0.994 of the line
 * rate is payload, ~2 us through adapter and cable), a 2-level 1:1 fat tree of 64-port
 * switches (32 nodes per leaf, 64 leaves: 2048 nodes), 0.15 us per switch, 2 us software. */
void rcoll_cluster_h100(rcoll_cluster_t *c);
/* A tools/netns-cluster job: one rank per host, one link of link_gbit Gbit/s each way (TCP
 * over Ethernet: 1448 payload bytes per 1538 on the wire), one switch (the bridge), latency_us
 * per message, reduction on the CPU at reduce_gbs. */
void rcoll_cluster_netns(rcoll_cluster_t *c, double link_gbit, double latency_us,
                         double reduce_gbs);
/* RCOLL_ERR_INVALID_ARG naming the field unless the description is usable for ngpus GPUs
 * (ngpus >= 1 and a multiple of gpus_per_node, positive bandwidths, a level count of 1-3,
 * a tree large enough for the nodes, ...). */
rcoll_status_t rcoll_cluster_check(const rcoll_cluster_t *c, long ngpus);

/* Predicted microseconds of collective coll of `bytes` (nccl-tests' size: the whole vector
 * of all-reduce, the whole output of all-gather, the whole input of reduce-scatter) on ngpus
 * GPUs with algorithm alg: HUGE_VAL where alg does not apply (tree for all-gather, hier on one
 * node or one GPU per node, pat on one node), 0 on one GPU.  The description must pass
 * rcoll_cluster_check. */
double rcoll_project_time(const rcoll_cluster_t *c, rcoll_proj_coll_t coll,
                          rcoll_proj_alg_t alg, long ngpus, double bytes);
/* The cheapest applicable algorithm (ties: lower enum); *us (optional) gets its time. */
rcoll_proj_alg_t rcoll_project_choose(const rcoll_cluster_t *c, rcoll_proj_coll_t coll,
                                      long ngpus, double bytes, double *us);

/* nccl-tests' definitions: algbw = bytes / time, busbw = algbw x 2(n-1)/n for all-reduce and
 * x (n-1)/n for all-gather and reduce-scatter; GB/s.  0 where the time is 0 or not finite. */
double rcoll_project_algbw(double bytes, double us);
double rcoll_project_busbw(rcoll_proj_coll_t coll, long ngpus, double bytes, double us);

const char *rcoll_proj_alg_name(rcoll_proj_alg_t a);
const char *rcoll_proj_coll_name(rcoll_proj_coll_t c);

#endif
