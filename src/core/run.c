/*
 * run.c - the library's own blocking collectives (communicator set-up, the tuning probe,
 * split): queued and waited for directly, never through the public entry points, so they
 * ignore the calling thread's group state and skip the user-facing argument checks and
 * logging.  Nothing here validates user input; callers pass well-formed arguments.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "util/status.h"

rcoll_status_t rcoll_coll_run(rcoll_comm_t comm, rcoll_op_kind_t kind, const void *src,
                              void *dst, size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                              int root)
{
    if (comm->failed != RCOLL_OK) return rcoll_err_set(comm->failed, "%s", comm->last_error);
    const rcoll_coll_args_t a = {kind, src, dst, count, dt, op, root};
    struct rcoll_request *r;
    rcoll_status_t st = rcoll_req_alloc_coll(comm, &a, &r);
    if (st != RCOLL_OK) return st;
    rcoll_req_enqueue(comm, r);
    st = rcoll_req_wait(r);
    rcoll_req_release(r);
    if (st != RCOLL_OK) rcoll_err_set(st, "%s", comm->last_error);
    return st;
}

/* A barrier as rcoll_barrier makes one: a byte per rank, max-reduced, so that every rank's
 * result depends on every rank's entry.  (A barrier of no bytes has no steps: it would return
 * at once.) */
rcoll_status_t rcoll_coll_barrier(rcoll_comm_t comm)
{
    uint8_t small[64], *buf = small;
    size_t n = (size_t)comm->nranks;
    if (n > sizeof(small) && !(buf = calloc(n, 1)))
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory");
    memset(buf, 0, n);
    buf[comm->rank] = 1;
    rcoll_status_t st =
        rcoll_coll_run(comm, RCOLL_OP_BARRIER, buf, buf, n, RCOLL_UINT8, RCOLL_MAX, 0);
    if (buf != small) free(buf);
    return st;
}
