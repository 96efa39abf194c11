/*
 * call.c - what every route of an API call shares, below all of them (api.c, api_group.c,
 * api_init.c, api_ipc.c, api_stage.c, api_stream.c, queue.c): the handle check, argument
 * errors, one thread at a time per communicator, overlapping spans, this thread's group
 * depth.  Calls nothing above the communicator's state (comm_base.c, handles.c).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "core/api_int.h"
#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"

__thread int rcoll_api_group_depth; /* rcoll_group_start minus rcoll_group_end, this thread */

rcoll_status_t rcoll_api_arg_error(rcoll_comm_t comm, rcoll_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm->last_error, sizeof(comm->last_error), fmt, ap);
    va_end(ap);
    RCOLL_WARN(COLL, "%s", comm->last_error);
    return st;
}

/* One thread at a time per communicator (the contract, as NCCL's and MPI's default): every
 * call that queues or progresses work takes the communicator's entry flag with one atomic
 * exchange, and a second thread that finds it taken is refused with a sentence instead of
 * corrupting the queue (and later timing out, blaming a rank). */
rcoll_status_t rcoll_api_enter(rcoll_comm_t comm, const char *fn)
{
    rcoll_status_t st = rcoll_api_check_live(comm, fn);
    if (st != RCOLL_OK) return st;
    if (!atomic_exchange_explicit(&comm->in_use, 1, memory_order_acquire)) {
        atomic_store_explicit(&comm->in_use_fn, fn, memory_order_relaxed);
        rcoll_pt_lock(comm); /* from the progress thread, which may be inside */
        return RCOLL_OK;
    }
    const char *other = atomic_load_explicit(&comm->in_use_fn, memory_order_relaxed);
    return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                               "%s: another thread is using this communicator (in %s): a "
                               "communicator is used by one thread at a time (give each "
                               "thread its own, e.g. with rcoll_comm_dup)", fn,
                               other ? other : "a call");
}

rcoll_status_t rcoll_api_leave(rcoll_comm_t comm, rcoll_status_t st)
{
    rcoll_pt_unlock(comm); /* and wake it: the call may have queued work */
    atomic_store_explicit(&comm->in_use, 0, memory_order_release);
    return st;
}

int rcoll_api_spans_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen && blen && x < y + blen && y < x + alen;
}
