/*
 * ring.h - executes a ring-neighbour schedule (algo/sched.h) over two transport connections:
 * receives from the previous rank, sends to the next.  Pipelined: up to nslots receives are
 * posted ahead into staging slots and up to RCOLL_RING_MAX_SENDS sends are in flight, so the
 * reduction of one chunk overlaps the transfer of the next.  Knows the transport contract
 * only; ranks appear solely so errors can name the peer.
 */
#ifndef RCOLL_ALGO_RING_H
#define RCOLL_ALGO_RING_H

#include <stdint.h>
#include "algo/sched.h"
#include "rcoll.h"
#include "transport/transport.h"

#define RCOLL_RING_MAX_SLOTS 8
#define RCOLL_RING_MAX_SENDS 8

/* The two connections of a rank in the ring and its staging memory. */
typedef struct {
    const rcoll_transport_ops_t *tp;
    void *send_comm;    /* to the next rank */
    void *recv_comm;    /* from the previous rank */
    char *staging;      /* nslots * slot_bytes, registered on recv_comm */
    void *staging_mh;
    size_t slot_bytes;
    int nslots;         /* 1 .. RCOLL_RING_MAX_SLOTS */
} rcoll_ring_link_t;

typedef struct {
    rcoll_sched_t sched;
    const rcoll_ring_link_t *link;
    const char *src;
    char *dst;
    size_t esize;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    int tag;

    uint64_t k_post;    /* next step whose receive may be posted */
    uint64_t k_proc;    /* next step to process */
    int acted;          /* the action of step k_proc is done; its send is not yet posted */
    int nposted;        /* receives posted and not yet processed */
    uint64_t rseq_post, rseq_proc; /* receive sequence numbers (slot = seq % nslots) */
    void *rreq[RCOLL_RING_MAX_SLOTS];
    int rdone[RCOLL_RING_MAX_SLOTS];
    size_t rsize[RCOLL_RING_MAX_SLOTS];
    void *sreq[RCOLL_RING_MAX_SENDS];
    uint64_t sstep[RCOLL_RING_MAX_SENDS];
    int shead, scount;
    uint64_t last_progress_ns;
    int waiting_recv;   /* when stalled: 1 = waiting for data from prev, 0 = for next to drain */
    int err_recv_side;  /* after an error: 1 = it came from the receive side (prev) */
} rcoll_ring_exec_t;

/* Prepare e to run schedule s from src into dst (src may equal dst). */
void rcoll_ring_exec_init(rcoll_ring_exec_t *e, const rcoll_sched_t *s,
                          const rcoll_ring_link_t *link, const void *src, void *dst,
                          rcoll_datatype_t dt, rcoll_op_t op, int tag);
/* Advance as far as possible without blocking.  RCOLL_OK when finished, RCOLL_INPROGRESS
 * while not, an error (detail via rcoll_err_get) otherwise.  *progressed set to 1 if anything
 * moved. */
rcoll_status_t rcoll_ring_exec_progress(rcoll_ring_exec_t *e, int *progressed);

#endif
