/*
 * api_int.h - the argument checks and call plumbing of api.c, shared with the entry points of
 * the rooted and uneven collectives (api_v.c).  Only core/ includes this.
 */
#ifndef RCOLL_CORE_API_INT_H
#define RCOLL_CORE_API_INT_H

#include "core/comm.h"

/* Take / release the communicator for one call (one thread at a time). */
rcoll_status_t rcoll_api_enter(rcoll_comm_t comm, const char *fn);
rcoll_status_t rcoll_api_leave(rcoll_comm_t comm, rcoll_status_t st);
/* The first checks of every rcoll_i* call: outside a group, req not NULL. */
rcoll_status_t rcoll_api_check_ireq(rcoll_comm_t comm, rcoll_request_t *req, const char *fn);
/* A live, not failed communicator; a valid datatype and count; root in range. */
rcoll_status_t rcoll_api_check_comm(rcoll_comm_t comm, const char *fn);
rcoll_status_t rcoll_api_check_type(rcoll_comm_t comm, const char *fn, size_t count,
                                    rcoll_datatype_t dt);
rcoll_status_t rcoll_api_check_root(rcoll_comm_t comm, const char *fn, int root);
/* After check_type: op valid and defined on dt (no bitwise op on floats, no bool average). */
rcoll_status_t rcoll_api_check_op(rcoll_comm_t comm, const char *fn, rcoll_datatype_t dt,
                                  rcoll_op_t op);
/* An argument error: the sentence in comm's last error (and the log), status returned. */
rcoll_status_t rcoll_api_arg_error(rcoll_comm_t comm, rcoll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Do [a, a + alen) and [b, b + blen) share a byte? */
int rcoll_api_spans_overlap(const void *a, size_t alen, const void *b, size_t blen);
/* Queue a checked collective with its count arrays (v: NULL for none; core/comm.h): blocking
 * (req NULL), nonblocking, or deferred to a group. */
rcoll_status_t rcoll_api_queue_vcoll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                     const size_t *const v[RCOLL_V_NUM], rcoll_request_t *req,
                                     const char *fn);
/* Queue a checked collective on host (or pinned host) buffers, v as for
 * rcoll_api_queue_vcoll: blocking (req NULL: completed before returning, or at the group's
 * end inside a group) or nonblocking, its request carrying job (NULL: none; api_stage.c).  The staging path's way to the host
 * collective. */
struct rcoll_stage_job;
rcoll_status_t rcoll_api_run_host(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                  const size_t *const *v, rcoll_request_t *req,
                                  struct rcoll_stage_job *job, const char *fn);
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

#endif
