/*
 * queue.c - a checked call into its communicator's queue, the step every route ends in (the
 * host route, staging, the stream calls' host functions, the barrier): blocking (waited for
 * here, its post-step run), nonblocking (the caller's request), or held for the end of the
 * thread's group (api_group.c).  Above call.c and api_group.c, below the routes.  The
 * queueing itself (rcoll_api_submit, rcoll_api_submit_coll) is inline in api_int.h: every
 * call's path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/api_int.h"
#include "core/comm.h"
#include "util/status.h"

rcoll_status_t rcoll_api_run_host(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                  const size_t *const *v, rcoll_request_t *req,
                                  rcoll_req_post_fn post, struct rcoll_stage_job *job,
                                  const char *fn)
{
    struct rcoll_request *r;
    rcoll_status_t st = rcoll_req_alloc_coll(comm, a, &r);
    if (st == RCOLL_OK && v && (st = rcoll_req_set_v(r, v)) != RCOLL_OK) rcoll_req_release(r);
    if (st != RCOLL_OK) return rcoll_api_arg_error(comm, st, "%s: %s", fn, rcoll_err_get());
    r->post = post;
    r->stage_job = job;
    return rcoll_api_submit_coll(comm, r, req);
}

rcoll_status_t rcoll_api_barrier_host(rcoll_comm_t comm, rcoll_request_t *req, const char *fn)
{
    struct rcoll_request *r;
    rcoll_status_t st = rcoll_req_alloc(comm, RCOLL_OP_BARRIER, &r);
    if (st != RCOLL_OK) return rcoll_api_arg_error(comm, st, "%s: %s", fn, rcoll_err_get());
    /* One byte per rank, max-reduced: every rank's result depends on every rank's entry. */
    uint8_t *buf = r->barrier_buf;
    if ((size_t)comm->nranks > sizeof(r->barrier_buf)) {
        if (!r->barrier_heap) r->barrier_heap = calloc((size_t)comm->nranks, 1);
        if (!r->barrier_heap) {
            rcoll_req_release(r);
            return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
        }
        buf = r->barrier_heap;
    }
    memset(buf, 0, (size_t)comm->nranks);
    buf[comm->rank] = 1;
    r->src = buf;
    r->dst = buf;
    r->count = (size_t)comm->nranks;
    r->dt = RCOLL_UINT8;
    r->op = RCOLL_MAX;
    return rcoll_api_submit_coll(comm, r, req);
}
