/*
 * api_int.h - the argument checks and call plumbing of api.c, shared with the entry points of
 * the rooted and uneven collectives (api_v.c).  Only core/ includes this.
 */
#ifndef RCOLL_CORE_API_INT_H
#define RCOLL_CORE_API_INT_H

#include "core/comm.h"
#include "cuda/gpu.h"
#include "util/log.h"

/* One API call as it goes down from its entry point: its name (for errors), the caller's
 * request (nonblocking; NULL: blocking, or deferred to a group), and its order: on_stream, a
 * *_stream call to be enqueued on stream (NULL: the legacy stream); in_host, run by a stream
 * call's host function on the stream's behalf (api_stream.c).  The planner (core/plan.h)
 * reads it; nothing is kept per thread. */
typedef struct rcoll_call {
    const char *fn;
    rcoll_request_t *req;
    int on_stream;
    void *stream;
    int in_host;
} rcoll_call_t;

/* The entry points of one collective from its
 *   static rcoll_status_t do_<name>(<its parameters>, rcoll_comm_t comm,
 *                                   const rcoll_call_t *call)
 * (the tables RCOLL_COLLECTIVES in api.c and RCOLL_V_COLLECTIVES in api_v.c, one line a
 * collective): rcoll_<name> (blocking), rcoll_i<name> (its request: checked, then the call
 * completes through rcoll_test/rcoll_wait) and rcoll_<name>_stream (enqueued on stream).
 * PARAMS: the parameters before comm, in parentheses; ARGS: their names, in parentheses. */
#define RCOLL_API_UNPAREN(...) __VA_ARGS__
#define RCOLL_API_ENTRIES(name, PARAMS, ARGS)                                                 \
    rcoll_status_t rcoll_##name(RCOLL_API_UNPAREN PARAMS, rcoll_comm_t comm)                  \
    {                                                                                         \
        const rcoll_call_t call = {.fn = "rcoll_" #name};                                     \
        rcoll_status_t st = rcoll_api_enter(comm, call.fn);                                   \
        if (st != RCOLL_OK) return st;                                                        \
        return rcoll_api_leave(comm, do_##name(RCOLL_API_UNPAREN ARGS, comm, &call));         \
    }                                                                                         \
    rcoll_status_t rcoll_i##name(RCOLL_API_UNPAREN PARAMS, rcoll_comm_t comm,                 \
                                 rcoll_request_t *req)                                        \
    {                                                                                         \
        const rcoll_call_t call = {.fn = "rcoll_i" #name, .req = req};                        \
        rcoll_status_t st = rcoll_api_check_ireq(comm, req, call.fn);                         \
        if (st == RCOLL_OK) st = rcoll_api_enter(comm, call.fn);                              \
        if (st != RCOLL_OK) return st;                                                        \
        return rcoll_api_leave(comm, do_##name(RCOLL_API_UNPAREN ARGS, comm, &call));         \
    }                                                                                         \
    rcoll_status_t rcoll_##name##_stream(RCOLL_API_UNPAREN PARAMS, rcoll_comm_t comm,         \
                                         void *stream)                                        \
    {                                                                                         \
        const rcoll_call_t call = {.fn = "rcoll_" #name "_stream", .on_stream = 1,            \
                                   .stream = stream};                                         \
        rcoll_status_t st = rcoll_api_stream_enter(comm, stream, call.fn);                    \
        if (st != RCOLL_OK) return st;                                                        \
        return rcoll_api_stream_leave(comm, do_##name(RCOLL_API_UNPAREN ARGS, comm, &call));  \
    }

/* ---- api_init.c ---- */
/* Start a bootstrap root in this process on the interface cfg picks, with a fresh random
 * secret, and write its id (rcoll_get_unique_id; rcoll_comm_grow_id).  root_p as for
 * rcoll_bs_root_start. */
rcoll_status_t rcoll_api_new_root(const rcoll_config_t *cfg, rcoll_unique_id_t *id,
                                  rcoll_bs_root_t **root_p);
/* The same, as node 0 of a bootstrap tree (tree NULL: none). */
rcoll_status_t rcoll_api_new_tree_root(const rcoll_config_t *cfg, const rcoll_bs_tree_t *tree,
                                       rcoll_unique_id_t *id, rcoll_bs_root_t **root_p);

/* ---- call.c: what every route shares ---- */
#define RCOLL_NOT_LIVE_TEXT \
    "not a live communicator (destroyed already, or never created by rcoll)"
/* The handle check of every call that takes a communicator: NULL, or not (or no longer) a
 * communicator, is RCOLL_ERR_INVALID_ARG, with a warning naming the call.  Inline: every
 * call's path. */
static inline rcoll_status_t rcoll_api_check_live(rcoll_comm_t comm, const char *fn)
{
    if (!comm) {
        RCOLL_WARN(COLL, "%s: comm is NULL", fn);
        return RCOLL_ERR_INVALID_ARG;
    }
    if (!rcoll_comm_is_live(comm)) {
        RCOLL_WARN(COLL, "%s: comm %p is " RCOLL_NOT_LIVE_TEXT, fn, (void *)comm);
        return RCOLL_ERR_INVALID_ARG;
    }
    return RCOLL_OK;
}
/* Take / release the communicator for one call (one thread at a time): a second thread is
 * refused with a sentence (RCOLL_ERR_INVALID_USAGE). */
rcoll_status_t rcoll_api_enter(rcoll_comm_t comm, const char *fn);
rcoll_status_t rcoll_api_leave(rcoll_comm_t comm, rcoll_status_t st);
/* The first checks of every rcoll_i* call: outside a group, req not NULL. */
rcoll_status_t rcoll_api_check_ireq(rcoll_comm_t comm, rcoll_request_t *req, const char *fn);
/* A live, not failed communicator, and no stream call pending that this call would overtake;
 * a valid datatype and count; root in range. */
rcoll_status_t rcoll_api_check_call(rcoll_comm_t comm, const rcoll_call_t *call);
rcoll_status_t rcoll_api_check_type(rcoll_comm_t comm, const char *fn, size_t count,
                                    rcoll_datatype_t dt);
rcoll_status_t rcoll_api_check_root(rcoll_comm_t comm, const char *fn, int root);
/* After check_type: op valid and defined on dt (no bitwise op on floats, no bool average). */
rcoll_status_t rcoll_api_check_op(rcoll_comm_t comm, const char *fn, rcoll_datatype_t dt,
                                  rcoll_op_t op);
/* An argument error: the sentence in comm's last error (and the log), status returned; comm
 * is left intact. */
rcoll_status_t rcoll_api_arg_error(rcoll_comm_t comm, rcoll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Do [a, a + alen) and [b, b + blen) share a byte? */
int rcoll_api_spans_overlap(const void *a, size_t alen, const void *b, size_t blen);

/* Queue a checked collective with its count arrays (v: NULL for none; core/comm.h) on the
 * planner's path: blocking (call->req NULL), nonblocking, deferred to a group, or on the
 * call's stream. */
rcoll_status_t rcoll_api_queue_vcoll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                     const size_t *const v[RCOLL_V_NUM], const rcoll_call_t *call);
/* Queue a checked collective on host (or pinned host) buffers, v as for
 * rcoll_api_queue_vcoll: blocking (req NULL: completed before returning, or at the group's
 * end inside a group) or nonblocking, its request carrying the post-step post on job (NULL:
 * none; api_stage.c).  The staging path's way to the host collective. */
struct rcoll_stage_job;
rcoll_status_t rcoll_api_run_host(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                  const size_t *const *v, rcoll_request_t *req,
                                  rcoll_req_post_fn post, struct rcoll_stage_job *job,
                                  const char *fn);
/* api_stage.c: a checked collective whose buffers are CUDA device or managed memory, run on
 * copies in pinned host memory (docs/gpu.md): blocking (req NULL, not deferred) in the
 * communicator's staging area, the outputs copied back before returning; nonblocking, or
 * deferred to the end of a group (a blocking call inside rcoll_group_start/end), in an area
 * of its own, the outputs copied back when rcoll_test/rcoll_wait/rcoll_group_end see it
 * complete.
 * Errors: the host collective's, and the staging's (RCOLL_ERR_NO_MEMORY: cuMemAllocHost
 * failed; RCOLL_ERR_SYSTEM: a copy failed), each with a sentence in the last error naming the
 * driver call. */
rcoll_status_t rcoll_api_stage_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                    const size_t *const *v, rcoll_request_t *req,
                                    int deferred, const char *fn);

/* api_stage.c: stage one point-to-point buffer of request r, bytes (> 0) of CUDA device or
 * managed memory at buf, in a pinned area of its own: a send's bytes are copied in now (buf
 * may be reused at return), a receive's are copied to buf when r's completion is seen
 * (rcoll_wait, rcoll_test, rcoll_group_end, a blocking call's return).  *host_p: the area,
 * what the transfer uses instead of buf.  The area is r's until r ends.  Errors (sentence in
 * the last error, nothing attached to r): RCOLL_ERR_NO_MEMORY, RCOLL_ERR_SYSTEM (the copy
 * in failed: "(nothing was sent)"). */
struct rcoll_request;
rcoll_status_t rcoll_api_stage_p2p(rcoll_comm_t comm, struct rcoll_request *r, int is_send,
                                   void *buf, size_t bytes, const char *fn, void **host_p);

/* A staged call prepared but not copied (the stream-ordered calls copy in stream order): the
 * spans of dev_in to copy to host_in before the host collective h runs, and of host_out to
 * copy to dev_out after (dev_* NULL or n* 0: nothing that way).  in and out are owned. */
typedef struct {
    void *dev_in, *host_in;
    rcoll_gpu_span_t *in;
    size_t nin;
    void *dev_out, *host_out;
    rcoll_gpu_span_t *out;
    size_t nout;
    rcoll_coll_args_t h;
} rcoll_stage_call_t;
/* Work out the bytes the collective a reads and writes on this rank and reserve them in
 * *area (as rcoll_api_stage_coll does, without copying), for a stream-ordered call: an area
 * too small is retired, never freed here (cuMemFreeHost would synchronize the device);
 * errors as rcoll_api_stage_coll's, sentence in the last error. */
rcoll_status_t rcoll_api_stage_prepare(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                       const size_t *const *v, const char *fn,
                                       rcoll_gpu_stage_t **area, rcoll_stage_call_t *call);
void rcoll_api_stage_call_free(rcoll_stage_call_t *call);

/* api_stage.c, pipelined staging (RCOLL_STAGE_CHUNK): a blocking or nonblocking (completed
 * inside the call) all-reduce, broadcast, reduce, all-gather, reduce-scatter, all-to-all,
 * gather or scatter (rcoll_plan_chunk_kind, core/plan.h) run as chunks of RCOLL_STAGE_CHUNK bytes (of
 * every block for the collectives of per-rank blocks); staged 1 (CUDA buffers): chunk k's copy in overlaps the earlier chunks'
 * collectives and its copy out the later ones'; staged 0 (host buffers): the same chunks, so
 * that every rank runs the same collectives. */
rcoll_status_t rcoll_api_chunked(rcoll_comm_t comm, const rcoll_coll_args_t *a, int staged,
                                 rcoll_request_t *req, const char *fn);

/* api_ipc.c: the collective a on CUDA buffers over CUDA IPC (RCOLL_CUDA_IPC=1, every rank on
 * this host, not inside a group; the kinds rcoll_plan_ipc_kind says, core/plan.h: every collective but the
 * barrier).  *taken 0: not done (the workspaces are not
 * usable: stage it); else the status is the call's.  It runs to completion in the call: the
 * nonblocking form (req) gets a request that is already complete.  The first call sets the
 * workspaces up, collectively. */
rcoll_status_t rcoll_api_ipc_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                  const size_t *const *v, rcoll_request_t *req, const char *fn,
                                  int *taken);
/* The stream-ordered all-reduce as one kernel on the caller's stream (RCOLL_CUDA_IPC=1, CUDA
 * buffers, every rank on this host, no larger than RCOLL_CUDA_IPC_TWOSHOT): *taken 1 when it
 * was enqueued so (or failed trying); 0: stage it in stream order as before.  Sets CUDA IPC
 * up at the first such call (after this communicator's earlier stream calls have run). */
rcoll_status_t rcoll_api_ipc_stream(rcoll_comm_t comm, const rcoll_coll_args_t *a, void *stream,
                                    const char *fn, int *taken);
/* Read the reports of the stream-ordered one-kernel calls that have finished: a failure
 * fails the communicator (its next call says which call failed and why). */
void rcoll_api_ipc_poll(rcoll_comm_t comm);

/* ---- groups (api_group.c) and the communicator creations deferred to them (api_init.c) ---- */
/* rcoll_group_start minus rcoll_group_end, this thread: inside a group when not 0. */
extern __thread int rcoll_api_group_depth;
/* Record r, queued by a call inside the group, for rcoll_group_end to wait for (and release,
 * when it is a held send/receive batch); RCOLL_ERR_NO_MEMORY with a sentence in comm's last
 * error (r left to the caller). */
rcoll_status_t rcoll_api_group_record(rcoll_comm_t comm, struct rcoll_request *r);
/* At the end of this thread's group: run the communicator creations deferred to it
 * (rcoll_comm_init_rank/_env inside the group; a thread each when there are several) and
 * hand out the handles.  RCOLL_OK when there were none; else the first failure's status, its
 * text this thread's rcoll_last_init_error. */
rcoll_status_t rcoll_api_group_run_inits(void);

/* ---- stream-ordered calls (api_stream.c; docs/gpu.md "Stream order") ---- */
/* Around the checks of one stream call (api.c): refusals with a sentence (inside a group, no
 * CUDA driver, another thread in the communicator, nonblocking operations in flight); the
 * call itself says it is on a stream (rcoll_call_t). */
rcoll_status_t rcoll_api_stream_enter(rcoll_comm_t comm, void *stream, const char *fn);
rcoll_status_t rcoll_api_stream_leave(rcoll_comm_t comm, rcoll_status_t st);
/* Enqueue the checked collective a (a->kind RCOLL_OP_BARRIER: a barrier) on stream: its
 * device inputs copied to a staging area of this call (staged: a buffer is CUDA device or
 * managed memory), the host collective in a host function, the outputs copied back.  Host
 * buffers (staged 0) are used in place by the host function.  v: copied.  Returns once
 * enqueued; errors: the stream captured (RCOLL_ERR_UNSUPPORTED), staging
 * (RCOLL_ERR_NO_MEMORY), a driver call failing to enqueue (RCOLL_ERR_SYSTEM), each with a
 * sentence in the last error saying how far the call got. */
rcoll_status_t rcoll_api_stream_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                     const size_t *const *v, int staged, void *stream,
                                     const char *fn);

/* ---- queue.c: a checked call into the communicator's queue ---- */
/* Queue r (enqueued here): nonblocking (req: r handed out, progressed once) or blocking
 * (waited for, its post-step run, released).  Inline: every call's path. */
static inline rcoll_status_t rcoll_api_submit(rcoll_comm_t comm, struct rcoll_request *r,
                                              rcoll_request_t *req)
{
    rcoll_req_enqueue(comm, r);
    if (req) {
        *req = r;
        rcoll_comm_progress(comm);
        return RCOLL_OK;
    }
    /* staged point-to-point buffers: the received bytes copied out before the return */
    rcoll_status_t st = rcoll_req_finish(r, rcoll_req_wait(r));
    rcoll_req_release(r);
    return st;
}
/* The same for a collective, which a blocking call inside a group defers to the group's end
 * (recorded with api_group.c; r released when that fails). */
static inline rcoll_status_t rcoll_api_submit_coll(rcoll_comm_t comm, struct rcoll_request *r,
                                                   rcoll_request_t *req)
{
    if (!req && rcoll_api_group_depth) {
        rcoll_status_t st = rcoll_api_group_record(comm, r);
        if (st != RCOLL_OK) {
            rcoll_req_release(r);
            return st;
        }
        rcoll_req_enqueue(comm, r);
        return RCOLL_OK;
    }
    return rcoll_api_submit(comm, r, req);
}
/* A barrier (one byte per rank, max-reduced) queued as rcoll_api_submit_coll queues. */
rcoll_status_t rcoll_api_barrier_host(rcoll_comm_t comm, rcoll_request_t *req, const char *fn);

#endif
