/*
 * cma.h - single-copy all-reduce for ranks on one host: a reduce-scatter then an all-gather
 * that read the peers' own buffers with Linux cross-memory attach (process_vm_readv), instead
 * of copying everything through shared memory first as two-shot does.
 *
 * Each rank publishes the addresses of its send and receive buffers in the host segment; rank
 * i then reads shard i of every peer's send buffer (in chunks, into a small scratch buffer
 * that stays in cache) and reduces it into its own receive buffer, and finally reads every
 * peer's reduced shard straight out of that peer's receive buffer.  Per rank and S bytes:
 * (n-1)/n S read twice by the kernel and S written, against two-shot's three passes through
 * the slots.  A rank leaves only when every peer has finished reading its buffers.
 *
 * Used only where the kernel lets every rank read every peer (same user, no seccomp or Yama
 * policy against it): core probes that at creation (rcoll_cma_probe) and all ranks agree.
 * Never blocks on a peer (the caller's loop waits and keeps the deadlines).
 */
#ifndef RCOLL_ALGO_CMA_H
#define RCOLL_ALGO_CMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "rcoll.h"

#define RCOLL_CMA_SLOTS 4                /* operations in flight per rank */
#define RCOLL_CMA_CHUNK (64u << 10)      /* bytes read from a peer per reduction step */

/* A rank's view of the CMA area of the host segment. */
typedef struct {
    char *base;      /* start of the area (64-byte aligned), zeroed at creation */
    int nranks, rank;
    uint64_t calls;  /* operations so far on this communicator (the same on every rank) */
    char *scratch;   /* RCOLL_CMA_CHUNK bytes, this rank's own (reduction input) */
} rcoll_cma_t;

typedef struct {
    rcoll_cma_t *cm;
    const char *src;
    char *dst;
    size_t count, esize, shard_elems;
    size_t chunk_elems; /* elements read from a peer per reduction step */
    rcoll_datatype_t dt;
    rcoll_op_t op;
    uint64_t tag;       /* the call's signature digest: every rank's must be the same */
    uint64_t g;         /* this operation's number (its slot is g % RCOLL_CMA_SLOTS) */
    int phase;          /* 0 publish, 1 reduce, 2 gather, 3 wait for the peers, 4 done */
    size_t red_off;     /* elements of this rank's shard reduced so far */
    int gat_peer;       /* peers gathered so far */
    int waiting_peer;
} rcoll_cma_op_t;

/* Bytes of host segment for nranks ranks. */
size_t rcoll_cma_area_size(int nranks);
/* Attach to the area; allocates the scratch buffer (RCOLL_ERR_NO_MEMORY). */
rcoll_status_t rcoll_cma_attach(rcoll_cma_t *cm, char *base, int nranks, int rank);
void rcoll_cma_detach(rcoll_cma_t *cm);
/* Creation, step 1: publish this process's id and a probe word (every rank, before a
 * barrier).  Step 2, after the barrier: read every peer's probe word with
 * process_vm_readv.  1 when all reads worked; 0 with the reason in why (for the log). */
void rcoll_cma_publish_probe(rcoll_cma_t *cm);
int rcoll_cma_probe(const rcoll_cma_t *cm, char *why, size_t why_len);

/* chunk_bytes: bytes read from a peer per reduction step, at most RCOLL_CMA_CHUNK (0: that). */
void rcoll_cma_op_init(rcoll_cma_op_t *o, rcoll_cma_t *cm, uint64_t tag, const void *src,
                       void *dst, size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                       size_t chunk_bytes);
/* RCOLL_OK when done, RCOLL_INPROGRESS while a peer is not there yet (o->waiting_peer),
 * RCOLL_ERR_INVALID_USAGE when a peer published a different call (its tag), RCOLL_ERR_REMOTE
 * when a peer's process is gone, RCOLL_ERR_SYSTEM when reading its memory failed otherwise
 * (o->waiting_peer names the peer). */
rcoll_status_t rcoll_cma_progress(rcoll_cma_op_t *o, int *progressed);

#endif
