/*
 * sched.h - pure communication schedules: which block each rank receives, reduces, copies and
 * sends at step k, computed with no I/O so that every schedule is unit-tested exhaustively by
 * simulation (tests/unit/test_sched.c).  Offsets and counts are in elements.
 */
#ifndef RCOLL_ALGO_SCHED_H
#define RCOLL_ALGO_SCHED_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    RCOLL_SCHED_RING_ALLREDUCE, /* ring reduce-scatter then ring all-gather */
    RCOLL_SCHED_CHAIN_BCAST,    /* pipelined chain along the ring starting at root */
    RCOLL_SCHED_RD_ALLREDUCE,   /* recursive doubling (full vector per step), pipelined */
    RCOLL_SCHED_RING_ALLGATHER, /* ring all-gather of one block per rank */
    RCOLL_SCHED_RING_REDUCE_SCATTER, /* ring reduce-scatter, partial sums in staging */
    RCOLL_SCHED_CHAIN_REDUCE,   /* pipelined chain along the ring ending at root */
    RCOLL_SCHED_PAIRWISE_ALLTOALL, /* n-1 rounds: send to r+k, receive from r-k */
    RCOLL_SCHED_DBTREE_ALLREDUCE, /* double binary tree: each tree reduces and broadcasts half */
    /* rooted and uneven collectives (per-rank block sizes from the count arrays) */
    RCOLL_SCHED_LINEAR_GATHER,      /* every rank sends its block straight to the root */
    RCOLL_SCHED_LINEAR_SCATTER,     /* the root sends each rank its block */
    RCOLL_SCHED_RING_ALLGATHERV,    /* ring all-gather, block b of vcount[b] at vdispl[b] */
    RCOLL_SCHED_RING_REDUCE_SCATTERV, /* ring reduce-scatter, block b of vcount[b] at vdispl[b] */
    RCOLL_SCHED_PAIRWISE_ALLTOALLV, /* pairwise all-to-all, per-pair sizes */
    RCOLL_SCHED_OWN             /* an algorithm's own schedule, in its file: step_fn */
} rcoll_sched_kind_t;

/* What a step does with the block it receives. */
typedef enum {
    RCOLL_ACT_NONE = 0,     /* nothing received */
    RCOLL_ACT_REDUCE,       /* recvbuf[blk] = staged OP src[blk] */
    RCOLL_ACT_REDUCE_FINAL, /* same, and the result is final (AVG divides here) */
    RCOLL_ACT_COPY,         /* recvbuf[blk] = staged */
    RCOLL_ACT_DIRECT,       /* received straight into recvbuf[blk]; nothing to do */
    RCOLL_ACT_REDUCE_STAGE  /* staged = staged OP src[blk], in the staging slot (to forward) */
} rcoll_sched_act_t;

/* Buffers a step reads from.  STAGE = the staging slot this step received into. */
typedef enum { RCOLL_BUF_SRC = 0, RCOLL_BUF_DST = 1, RCOLL_BUF_STAGE = 2 } rcoll_sched_buf_t;

typedef struct {
    int has_recv;           /* a message from recv_peer arrives in this step */
    int recv_peer;
    rcoll_sched_act_t act;  /* what to do with it */
    rcoll_sched_buf_t red_buf;  /* the local operand of a reduction */
    int has_send;           /* a message goes to send_peer after the action */
    int send_peer;
    rcoll_sched_buf_t send_buf; /* which buffer the send reads */
    size_t off;             /* element offset of the block in src */
    size_t doff;            /* element offset of the block in dst (usually off) */
    size_t count;           /* elements in the block (may be 0: an empty message) */
    int64_t wait_send_step; /* before acting, the send of this step must be complete; -1 none */
    int more;               /* not the last piece of its pair's message (all-to-all-v): its
                             * tag differs, so two ends that cut a pair's data differently
                             * disagree on a tag or a size, never silently */
} rcoll_step_t;

typedef struct rcoll_sched rcoll_sched_t;
/* Step k of an algorithm's own schedule (kind RCOLL_SCHED_OWN). */
typedef void (*rcoll_sched_step_fn_t)(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st);

struct rcoll_sched {
    rcoll_sched_kind_t kind;
    rcoll_sched_step_fn_t step_fn; /* RCOLL_SCHED_OWN: the algorithm's step */
    int nranks, rank, root;
    size_t count;       /* elements in the whole operation (per block for block schedules) */
    size_t chunk;       /* elements per block per loop (>= 1) */
    uint64_t nloops;    /* loops over the data */
    uint32_t steps_per_loop;
    uint64_t nsteps;    /* total steps */
    /* recursive doubling */
    uint64_t nchunks;   /* chunks of the vector */
    int pof2, extra;    /* largest power of two <= nranks; nranks - pof2 */
    int log2p;
    uint64_t seg_in, seg_rd; /* steps in the fold-in and doubling segments */
    /* double binary tree: this rank's links, steps per chunk, chunks per tree */
    int tparent[2], tchild[2][2], tnchild[2], tis_root[2];
    uint32_t up[2], down[2];
    uint64_t tchunks[2];
    size_t half0;       /* tree 0 carries elements [0, half0), tree 1 the rest */
    /* uneven collectives: [nranks] element counts and offsets per block (all-gather-v: in
     * dst; reduce-scatter-v: in src; all-to-all-v: vcount/vdispl send, rcount/rdispl receive
     * side).  Owned by the caller; they must outlive the schedule's execution. */
    const size_t *vcount, *vdispl, *rcount, *rdispl;
    /* an algorithm's own schedule: its per-rank numbers (their meaning is its own) */
    uint64_t own[6];
};

/* Set up a schedule.  chunk_elems >= 1.  nranks >= 1, 0 <= rank, root < nranks.
 * A count of 0 gives nsteps = 0. */
void rcoll_sched_ring_allreduce(rcoll_sched_t *s, int nranks, int rank, size_t count,
                                size_t chunk_elems);
void rcoll_sched_chain_bcast(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                             size_t chunk_elems);
void rcoll_sched_rd_allreduce(rcoll_sched_t *s, int nranks, int rank, size_t count,
                              size_t chunk_elems);
void rcoll_sched_ring_allgather(rcoll_sched_t *s, int nranks, int rank, size_t blockcount,
                                size_t chunk_elems);
void rcoll_sched_ring_reduce_scatter(rcoll_sched_t *s, int nranks, int rank, size_t blockcount,
                                     size_t chunk_elems);
void rcoll_sched_chain_reduce(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                              size_t chunk_elems);
void rcoll_sched_pairwise_alltoall(rcoll_sched_t *s, int nranks, int rank, size_t blockcount,
                                   size_t chunk_elems);
void rcoll_sched_dbtree_allreduce(rcoll_sched_t *s, int nranks, int rank, size_t count,
                                  size_t chunk_elems);
/* Gather to / scatter from root, count elements per rank (block p at p x count in the root's
 * buffer).  Each non-root rank also exchanges one empty message with the root (gather: from
 * the root, first; scatter: to the root, first), so every rank receives something. */
void rcoll_sched_linear_gather(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                               size_t chunk_elems);
void rcoll_sched_linear_scatter(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                                size_t chunk_elems);
/* Ring all-gather / reduce-scatter with block b of counts[b] elements at displs[b] (in dst for
 * the all-gather, whose own block is already in place; in src for the reduce-scatter, whose
 * result goes to dst's start).  The arrays are the same on every rank. */
void rcoll_sched_ring_allgatherv(rcoll_sched_t *s, int nranks, int rank, const size_t *counts,
                                 const size_t *displs, size_t chunk_elems);
void rcoll_sched_ring_reduce_scatterv(rcoll_sched_t *s, int nranks, int rank,
                                      const size_t *counts, const size_t *displs,
                                      size_t chunk_elems);
/* Pairwise all-to-all with per-peer blocks: scounts[p] elements at sdispls[p] of src go to p,
 * rcounts[p] elements from p land at rdispls[p] of dst (own block copied by the caller).
 * Every pair exchanges at least one message, empty for a count of 0. */
void rcoll_sched_pairwise_alltoallv(rcoll_sched_t *s, int nranks, int rank,
                                    const size_t *scounts, const size_t *sdispls,
                                    const size_t *rcounts, const size_t *rdispls,
                                    size_t chunk_elems);
/* The peers a rank exchanges with in recursive doubling (both directions), into peers[]
 * (at least 32 entries); returns how many. */
int rcoll_sched_rd_partners(int nranks, int rank, int *peers);
/* Describe step k (0 <= k < s->nsteps). */
void rcoll_sched_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *step);

#endif
