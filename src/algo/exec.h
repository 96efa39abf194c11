/*
 * exec.h - executes a schedule (algo/sched.h) over transport connections to peer ranks.
 * Pipelined: up to nslots receives are posted ahead into staging slots and up to
 * RCOLL_EXEC_MAX_SENDS sends are in flight, so the reduction of one chunk overlaps the
 * transfer of the next.  Knows the transport contract only; ranks index the connections.
 */
#ifndef RCOLL_ALGO_EXEC_H
#define RCOLL_ALGO_EXEC_H

#include <stdint.h>
#include "algo/sched.h"
#include "rcoll.h"
#include "transport/transport.h"

#define RCOLL_EXEC_MAX_SLOTS 8
#define RCOLL_EXEC_MAX_SENDS 8
/* Flipped in the tag of a piece that is not its message's last (rcoll_step_t.more).  Tags
 * of collectives are 30-bit digests, so the flipped tag stays one. */
#define RCOLL_EXEC_TAG_MORE 0x20000000

/* A rank's connections (indexed by peer rank; NULL where none) and its staging memory. */
typedef struct {
    const rcoll_transport_ops_t **tps; /* [nranks]: the transport that reaches each peer */
    void **send_comms;  /* [nranks] */
    void **recv_comms;  /* [nranks] */
    void **staging_mh;  /* [nranks]: staging registered on each receive connection */
    char *staging;      /* nslots * slot_bytes */
    size_t slot_bytes;
    int nslots;         /* 1 .. RCOLL_EXEC_MAX_SLOTS */
} rcoll_link_t;

typedef struct {
    rcoll_sched_t sched;
    const rcoll_link_t *link;
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
    void *rreq[RCOLL_EXEC_MAX_SLOTS];
    int rdone[RCOLL_EXEC_MAX_SLOTS];
    size_t rsize[RCOLL_EXEC_MAX_SLOTS];
    void *sreq[RCOLL_EXEC_MAX_SENDS];
    uint64_t sstep[RCOLL_EXEC_MAX_SENDS];
    int shead, scount;
    int speer[RCOLL_EXEC_MAX_SENDS];
    int sslot[RCOLL_EXEC_MAX_SENDS];       /* staging slot a send reads, or -1 */
    int rpeer[RCOLL_EXEC_MAX_SLOTS];       /* peer whose message a slot's receive awaits */
    int slot_busy[RCOLL_EXEC_MAX_SLOTS];   /* a send from this slot is still in flight */
    int waiting_peer;   /* when stalled: the rank waited on */
    int waiting_recv;   /* 1 = waiting for its data, 0 = waiting for it to take ours */
    int err_peer;       /* after an error: the peer whose connection failed */
    const int *pmap;    /* schedule rank -> communicator rank (NULL: the same) */
} rcoll_exec_t;

/* Prepare e to run schedule s from src into dst (src may equal dst).  A schedule computed for
 * a position in a reordered ring or a subgroup names peers by position: rcoll_exec_set_map
 * gives the communicator rank of each position (the map must outlive the execution). */
void rcoll_exec_init(rcoll_exec_t *e, const rcoll_sched_t *s,
                          const rcoll_link_t *link, const void *src, void *dst,
                          rcoll_datatype_t dt, rcoll_op_t op, int tag);
/* Advance as far as possible without blocking.  RCOLL_OK when finished, RCOLL_INPROGRESS
 * while not, an error (detail via rcoll_err_get) otherwise.  *progressed set to 1 if anything
 * moved. */
rcoll_status_t rcoll_exec_progress(rcoll_exec_t *e, int *progressed);

void rcoll_exec_set_map(rcoll_exec_t *e, const int *pmap);

#endif
