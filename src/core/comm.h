/*
 * comm.h - the communicator and request objects: where bootstrap, transports and algorithms
 * meet.  Only core/ includes this.
 */
#ifndef RCOLL_CORE_COMM_H
#define RCOLL_CORE_COMM_H

#include <stdint.h>
#include "algo/exec.h"
#include "core/bootstrap.h"
#include "rcoll.h"
#include "transport/transport.h"
#include "util/config.h"

#define RCOLL_LAST_ERROR_MAX 640

typedef enum { RCOLL_OP_ALLREDUCE, RCOLL_OP_BCAST, RCOLL_OP_BARRIER } rcoll_op_kind_t;

struct rcoll_request {
    struct rcoll_comm *comm;
    struct rcoll_request *next; /* in the communicator's queue, or the free list */
    rcoll_op_kind_t kind;
    const void *src;
    void *dst;
    size_t count;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    int root;
    int started;
    int complete;
    rcoll_status_t status;
    uint64_t seq;
    rcoll_exec_t exec;
    uint8_t barrier_buf[64]; /* barrier payload: one byte per rank, up to 64 ranks */
    uint8_t *barrier_heap;   /* barrier payload for larger communicators */
};

struct rcoll_comm {
    int rank, nranks;
    rcoll_config_t cfg;
    const rcoll_transport_ops_t *tp;
    int dev;
    void *listen_comm;
    rcoll_peer_info_t *peers;
    rcoll_bootstrap_t *bs;
    rcoll_bs_root_t *root; /* the root thread this rank hosts (environment launch), or NULL */

    int local_ranks;       /* ranks on this host (same host identity) */
    int next, prev;        /* ring neighbours */
    rcoll_link_t link;     /* connections to the ring neighbours and doubling partners */
    size_t chunk_bytes;

    struct rcoll_request *head, *tail; /* queued operations, in issue order */
    struct rcoll_request *free_reqs;
    uint64_t next_seq;
    uint64_t last_ctl_poll_ns;

    rcoll_status_t failed; /* first failure, or RCOLL_OK */
    size_t mem_bytes;
    char last_error[RCOLL_LAST_ERROR_MAX];
};

/* comm.c */
rcoll_status_t rcoll_comm_create(int nranks, const rcoll_unique_id_t *id, int rank,
                                 const rcoll_config_t *cfg, rcoll_bs_root_t *root,
                                 rcoll_comm_t *comm_p);
void rcoll_comm_free(rcoll_comm_t comm, int graceful);
/* Record text as the communicator's last error (and log it at WARN). */
void rcoll_comm_set_error(rcoll_comm_t comm, rcoll_status_t st, const char *text);
/* "rank 3 (host pid 1234)" */
const char *rcoll_comm_peer_name(rcoll_comm_t comm, int rank, char *buf, size_t len);

/* progress.c */
rcoll_status_t rcoll_req_alloc(rcoll_comm_t comm, rcoll_op_kind_t kind,
                               struct rcoll_request **req_p);
void rcoll_req_enqueue(rcoll_comm_t comm, struct rcoll_request *req);
void rcoll_req_release(struct rcoll_request *req);
/* Progress comm's queue once (non-blocking). */
void rcoll_comm_progress(rcoll_comm_t comm);
/* Progress until req completes; returns its status (does not release it). */
rcoll_status_t rcoll_req_wait(struct rcoll_request *req);
/* Fail every queued operation with st (the communicator's error). */
void rcoll_comm_fail(rcoll_comm_t comm, rcoll_status_t st, int culprit, const char *text);

#endif
