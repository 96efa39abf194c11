/*
 * api.c - the public entry points: argument checks with messages that name the problem,
 * and the blocking/nonblocking/stream wrappers; a checked collective goes on the route the
 * planner gives (core/plan.h) and is queued there (queue.c).  Communicator creation and the
 * launch styles: api_init.c; groups: api_group.c; what every route shares: call.c.
 * Nothing here moves data; invalid input returns before anything is touched.
 *
 * The core's files call down only (tests/unit/layers.sh checks it): api.c, api_v.c ->
 * api_stream.c -> api_stage.c -> queue.c -> api_group.c -> api_init.c -> call.c; api_ipc.c
 * -> call.c; the routes -> split/shrink -> comm.c -> probe.c -> run.c -> progress.c ->
 * conn.c -> comm_base.c, bootstrap.c (-> bootstrap_msg.c), sig.c, pair.c, handles.c,
 * plan.c, config.c; bootstrap_root.c -> bootstrap_msg.c.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/reduce.h"
#include "core/api_int.h"
#include "core/comm.h"
#include "core/plan.h"
#include "cuda/gpu.h"
#include "rcoll_build.h"
#include "util/bell.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

static rcoll_status_t check_ireq(rcoll_comm_t comm, rcoll_request_t *req, const char *fn);

/* What every route shares (call.c) and the queueing (queue.c), by this file's short names. */
#define arg_error rcoll_api_arg_error
#define check_live rcoll_api_check_live
#define comm_enter rcoll_api_enter
#define comm_leave rcoll_api_leave
#define spans_overlap rcoll_api_spans_overlap
#define submit rcoll_api_submit
#define submit_coll rcoll_api_submit_coll

size_t rcoll_datatype_size(rcoll_datatype_t dt) { return rcoll_dt_size(dt); }

int rcoll_version(void) { return RCOLL_VERSION_CODE; }

const char *rcoll_comm_last_error(rcoll_comm_t comm)
{
    if (!comm) return "NULL communicator";
    return rcoll_comm_is_live(comm) ? comm->last_error : RCOLL_NOT_LIVE_TEXT;
}

/* A query, not a call: it does not enter the communicator (a thread waiting on a CUDA event
 * asks it while another thread enqueues), and reads the first failure without the lock a
 * stream operation's host function holds while it runs. */
rcoll_status_t rcoll_comm_get_async_error(rcoll_comm_t comm, rcoll_status_t *error)
{
    if (error) *error = RCOLL_OK;
    if (!comm || !rcoll_comm_is_live(comm) || !error) return RCOLL_ERR_INVALID_ARG;
    *error = __atomic_load_n(&comm->failed, __ATOMIC_ACQUIRE);
    return RCOLL_OK;
}

const char *rcoll_comm_watchdog_report(rcoll_comm_t comm)
{
    if (!comm || !rcoll_comm_is_live(comm)) return "";
    /* The progress thread writes the report under pt_lock: hand out a copy taken under it. */
    if (comm->pt_on) pthread_mutex_lock(&comm->pt_lock);
    memcpy(comm->wdog_copy, comm->wdog_report, sizeof(comm->wdog_copy));
    if (comm->pt_on) pthread_mutex_unlock(&comm->pt_lock);
    return comm->wdog_copy;
}

rcoll_status_t rcoll_comm_rank(rcoll_comm_t comm, int *rank)
{
    if (check_live(comm, "rcoll_comm_rank") != RCOLL_OK || !rank) return RCOLL_ERR_INVALID_ARG;
    *rank = comm->rank;
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_size(rcoll_comm_t comm, int *size)
{
    if (check_live(comm, "rcoll_comm_size") != RCOLL_OK || !size) return RCOLL_ERR_INVALID_ARG;
    *size = comm->nranks;
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_host(rcoll_comm_t comm, int rank, int *host, int *nhosts)
{
    if (check_live(comm, "rcoll_comm_host") != RCOLL_OK) return RCOLL_ERR_INVALID_ARG;
    if (!host || rank < 0 || rank >= comm->nranks)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "rcoll_comm_host: %s",
                         host ? "rank outside the communicator" : "host is NULL");
    *host = comm->host_of[rank];
    if (nhosts) *nhosts = comm->nhosts;
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_mem_usage(rcoll_comm_t comm, size_t *bytes)
{
    if (check_live(comm, "rcoll_comm_mem_usage") != RCOLL_OK || !bytes)
        return RCOLL_ERR_INVALID_ARG;
    size_t total = comm->mem_bytes + rcoll_stage_bytes(comm) + rcoll_stream_bytes(comm);
    for (struct rcoll_request *r = comm->free_reqs; r; r = r->next) total += sizeof(*r);
    *bytes = total;
    return RCOLL_OK;
}

/* The arguments of a call that fills a caller's struct of stats_size bytes (fn: its name). */
static rcoll_status_t stats_args(rcoll_comm_t comm, const char *fn, const void *stats,
                                 size_t stats_size)
{
    if (check_live(comm, fn) != RCOLL_OK) return RCOLL_ERR_INVALID_ARG;
    if (!stats || stats_size == 0)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s", fn,
                         stats ? "stats_size is 0" : "stats is NULL");
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_mem_stats(rcoll_comm_t comm, rcoll_mem_stats_t *stats,
                                    size_t stats_size)
{
    rcoll_status_t st = stats_args(comm, "rcoll_comm_mem_stats", stats, stats_size);
    if (st != RCOLL_OK) return st;
    rcoll_mem_stats_t m;
    memset(&m, 0, sizeof(m));
    size_t reqs = 0;
    for (struct rcoll_request *r = comm->free_reqs; r; r = r->next) reqs += sizeof(*r);
    m.staging = comm->mem_staging;
    m.host_segment = comm->mem_hostseg;
    m.state = comm->mem_bytes - comm->mem_staging - comm->mem_hostseg + reqs;
    m.gpu_staging = rcoll_stage_bytes(comm) + rcoll_stream_bytes(comm);
    m.total = m.state + m.staging + m.host_segment + m.gpu_staging;
    for (int p = 0; p < comm->nranks; p++) {
        int k = (comm->link.send_comms && comm->link.send_comms[p] != NULL) +
                (comm->link.recv_comms && comm->link.recv_comms[p] != NULL);
        m.connections += k;
        m.peers += k > 0;
    }
    memcpy(stats, &m, stats_size < sizeof(m) ? stats_size : sizeof(m));
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_setup_stats(rcoll_comm_t comm, rcoll_setup_stats_t *stats,
                                      size_t stats_size)
{
    rcoll_status_t st = stats_args(comm, "rcoll_comm_setup_stats", stats, stats_size);
    if (st != RCOLL_OK) return st;
    rcoll_setup_stats_t m = {.wall_s = comm->setup_wall_s, .path_s = comm->setup_path_s};
    memcpy(stats, &m, stats_size < sizeof(m) ? stats_size : sizeof(m));
    return RCOLL_OK;
}

/* Before destroy or abort: wait until the stream calls enqueued on comm have all run (their
 * host functions use it); abort first tells those not started to run nothing.  Refused
 * (the communicator left alive) when they have not run within RCOLL_TIMEOUT + 10 s. */
static rcoll_status_t stream_drain(rcoll_comm_t comm, int abort, const char *fn)
{
    rcoll_status_t st = check_live(comm, fn);
    if (st != RCOLL_OK) return st;
    if (!atomic_load_explicit(&comm->stream_pending, memory_order_acquire)) return RCOLL_OK;
    if (abort) atomic_store_explicit(&comm->stream_abort, 1, memory_order_release);
    double wait_s = comm->cfg.timeout_s + 10;
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(wait_s * 1e9);
    long pending;
    while ((pending = atomic_load_explicit(&comm->stream_pending, memory_order_acquire))) {
        if (rcoll_now_ns() > deadline)
            return arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                             "%s: %ld stream call%s enqueued on this communicator did not run "
                             "within %.0f s (is the stream blocked, or never synchronized?): "
                             "synchronize the streams before destroying it (it is still alive)",
                             fn, pending, pending == 1 ? "" : "s", wait_s);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_destroy(rcoll_comm_t comm)
{
    if (!comm) return RCOLL_OK;
    rcoll_status_t ent = stream_drain(comm, 0, "rcoll_comm_destroy");
    if (ent != RCOLL_OK) return ent;
    ent = comm_enter(comm, "rcoll_comm_destroy"); /* freed: never left */
    if (ent != RCOLL_OK) return ent;
    rcoll_bs_root_t *root = comm->root;
    /* The root serves the whole family: hand it to a member that lives on. */
    rcoll_comm_t heir = NULL;
    for (rcoll_comm_t o = comm->family ? comm->family->first : NULL; o && !heir; o = o->fam_next)
        if (o != comm) heir = o;
    if (root && heir) {
        heir->root = root;
        root = NULL;
    }
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(comm->cfg.timeout_s * 1e9);
    rcoll_comm_grow_drop(comm); /* an unused grow id: its new ranks are told */
    rcoll_pt_unlock(comm); /* rcoll_comm_free joins the progress thread */
    rcoll_comm_free(comm, 1);
    if (!root) return RCOLL_OK;
    rcoll_status_t st = rcoll_bs_root_release(root, deadline);
    if (st != RCOLL_OK) RCOLL_WARN(INIT, "rcoll_comm_destroy: %s", rcoll_err_get());
    return st;
}

rcoll_status_t rcoll_comm_abort(rcoll_comm_t comm)
{
    if (!comm) return RCOLL_OK;
    rcoll_status_t ent = stream_drain(comm, 1, "rcoll_comm_abort");
    if (ent != RCOLL_OK) return ent;
    ent = comm_enter(comm, "rcoll_comm_abort"); /* freed: never left */
    if (ent != RCOLL_OK) return ent;
    char text[160];
    snprintf(text, sizeof(text), "rank %d called rcoll_comm_abort", comm->rank);
    rcoll_bs_report(comm->bs, comm->rank, RCOLL_ERR_REMOTE, text);
    rcoll_bs_root_t *root = comm->root;
    rcoll_comm_grow_drop(comm);
    rcoll_pt_unlock(comm); /* rcoll_comm_free joins the progress thread */
    rcoll_comm_free(comm, 0);
    rcoll_bs_root_release(root, 0);
    return RCOLL_OK;
}

/* ------------------------------------------------------------------------------------------
 * Collectives
 * ---------------------------------------------------------------------------------------- */

/* The checks every call on a communicator makes first.  call says what the call is: a stream
 * call, or one a stream call's host function runs (api_stream.c), comes after the stream calls
 * already enqueued by definition. */
static rcoll_status_t check_comm_call(rcoll_comm_t comm, const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_live(comm, fn);
    if (st != RCOLL_OK) return st;
    /* stream-ordered one-kernel all-reduces that have run: did any fail? (not from a host
     * function's thread: the enqueuing thread owns their records) */
    if (__builtin_expect(!call->in_host && comm->ipc_fl_busy != 0, 0)) rcoll_api_ipc_poll(comm);
    if (comm->failed == RCOLL_OK &&
        atomic_load_explicit(&comm->revoked, memory_order_acquire))
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: %s (shrink or destroy it)", fn,
                         comm->revoke_text);
    if (comm->suspended)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: this communicator is suspended "
                         "(rcoll_comm_resume it first, on every rank)", fn);
    if (comm->failed != RCOLL_OK) {
        if (strncmp(comm->last_error, "communicator failed earlier", 27) != 0) {
            char keep[RCOLL_LAST_ERROR_MAX];
            snprintf(keep, sizeof(keep), "%s", comm->last_error);
            snprintf(comm->last_error, sizeof(comm->last_error),
                     "communicator failed earlier (destroy or abort it): %.560s", keep);
        }
        return RCOLL_ERR_INVALID_USAGE;
    }
    /* Stream calls not run yet come first in this communicator's order: a call that is not
     * stream-ordered would overtake them (and other ranks would pair it with one of them). */
    long pending = atomic_load_explicit(&comm->stream_pending, memory_order_acquire);
    if (__builtin_expect(pending != 0, 0) && !call->on_stream && !call->in_host)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                         "%s: %ld stream call%s enqueued on this communicator %s not run yet: "
                         "synchronize the stream%s before a call that is not stream-ordered "
                         "(docs/gpu.md, \"Stream order\")", fn, pending, pending == 1 ? "" : "s",
                         pending == 1 ? "has" : "have", pending == 1 ? "" : "s");
    return RCOLL_OK;
}

/* The same for a call that is none of those. */
static rcoll_status_t check_comm(rcoll_comm_t comm, const char *fn)
{
    const rcoll_call_t call = {.fn = fn};
    return check_comm_call(comm, &call);
}

static rcoll_status_t check_type(rcoll_comm_t comm, const char *fn, size_t count,
                                 rcoll_datatype_t dt)
{
    if ((unsigned)dt >= RCOLL_NUM_DATATYPES)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: invalid datatype %d", fn, (int)dt);
    if (count > RCOLL_MAX_COUNT)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: count %zu exceeds the maximum of 2^40 elements", fn, count);
    return RCOLL_OK;
}

/* After check_type: op is an rcoll_op_t and defined on dt. */
static rcoll_status_t check_op(rcoll_comm_t comm, const char *fn, rcoll_datatype_t dt,
                               rcoll_op_t op)
{
    if ((unsigned)op >= RCOLL_NUM_OPS)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)op);
    if (rcoll_reduce_defined(dt, op)) return RCOLL_OK;
    if (op == RCOLL_AVG)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: op avg is not defined on %s (for bool, sum and max are logical "
                         "or, prod and min logical and)", fn, rcoll_dt_name(dt));
    return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                     "%s: op %s is bitwise: it takes an integer or bool datatype, not %s", fn,
                     rcoll_op_name(op), rcoll_dt_name(dt));
}

static int ranges_overlap(const void *a, const void *b, size_t len)
{
    return spans_overlap(a, len, b, len);
}

static rcoll_status_t allreduce_args(const void *sendbuf, void *recvbuf, size_t count,
                                     rcoll_datatype_t dt, rcoll_op_t op, rcoll_comm_t comm,
                                     const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_comm_call(comm, call);
    if (st == RCOLL_OK) st = check_type(comm, fn, count, dt);
    if (st == RCOLL_OK) st = check_op(comm, fn, dt, op);
    if (st != RCOLL_OK) return st;
    if (count == 0) return RCOLL_OK;
    if (!recvbuf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: recvbuf is NULL with count %zu", fn,
                         count);
    if (!sendbuf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: sendbuf is NULL with count %zu (use RCOLL_IN_PLACE to reduce in "
                         "place)", fn, count);
    size_t bytes = count * rcoll_dt_size(dt);
    if (sendbuf != RCOLL_IN_PLACE && sendbuf != recvbuf &&
        ranges_overlap(sendbuf, recvbuf, bytes))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: sendbuf and recvbuf overlap partially (they must be identical or "
                         "disjoint)", fn);
    return RCOLL_OK;
}

static rcoll_status_t check_root(rcoll_comm_t comm, const char *fn, int root)
{
    if (root < 0 || root >= comm->nranks)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: root %d is outside [0, %d)", fn,
                         root, comm->nranks);
    return RCOLL_OK;
}

static rcoll_status_t new_request(rcoll_comm_t comm, rcoll_op_kind_t kind, const char *fn,
                                  struct rcoll_request **r)
{
    rcoll_status_t st = rcoll_req_alloc(comm, kind, r);
    if (st != RCOLL_OK) return arg_error(comm, st, "%s: %s", fn, rcoll_err_get());
    return RCOLL_OK;
}

/* What the memory check found: the first CUDA device or managed buffer of the call, if any. */
typedef struct {
    const char *name;
    const void *ptr;
    rcoll_memkind_t kind;
} mem_device_t;

/* The kinds of a call's buffers, when a CUDA driver is in use (cuda/gpu.h): one call may not
 * mix host and CUDA buffers; *dev names its first device or managed buffer (ptr NULL: none).
 * s or r NULL (not used on this rank) or RCOLL_IN_PLACE: skipped. */
static rcoll_status_t check_mem_kinds(rcoll_comm_t comm, const char *fn, const char *sname,
                                      const void *s, const char *rname, const void *r,
                                      mem_device_t *dev)
{
    int has_s = s && s != RCOLL_IN_PLACE && s != r, has_r = r != NULL;
    rcoll_memkind_t sk = has_s ? rcoll_gpu_classify(s) : RCOLL_MEM_HOST;
    rcoll_memkind_t rk = has_r ? rcoll_gpu_classify(r) : RCOLL_MEM_HOST;
    if (has_s && has_r && rcoll_memkind_on_device(sk) != rcoll_memkind_on_device(rk))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: %s %p is %s but %s %p is %s: the buffers of one call must be all "
                         "host memory or all CUDA memory", fn, sname, s, rcoll_memkind_name(sk),
                         rname, r, rcoll_memkind_name(rk));
    if (has_s && rcoll_memkind_on_device(sk))
        *dev = (mem_device_t){sname, s, sk};
    else if (has_r && rcoll_memkind_on_device(rk))
        *dev = (mem_device_t){rname, r, rk};
    return RCOLL_OK;
}

/* One branch while no CUDA driver is in use. */
static inline rcoll_status_t check_mem(rcoll_comm_t comm, const char *fn, const char *sname,
                                       const void *s, const char *rname, const void *r,
                                       mem_device_t *dev)
{
    dev->ptr = NULL;
    if (__builtin_expect(!rcoll_gpu_active(), 1)) return RCOLL_OK;
    return check_mem_kinds(comm, fn, sname, s, rname, r, dev);
}

/* The routes of core/plan.h, one shape: run a on this route, or decline (*taken = 0: the
 * plan's next route runs it). */
typedef rcoll_status_t (*route_fn_t)(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                    const size_t *const *v, const rcoll_call_t *call,
                                    int device, int *taken);

static rcoll_status_t route_ipc_stream(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                      const size_t *const *v, const rcoll_call_t *call,
                                      int device, int *taken)
{
    (void)v, (void)device;
    rcoll_status_t st = rcoll_gpu_stream_check(call->stream);
    if (st != RCOLL_OK) {
        *taken = 1;
        return arg_error(comm, st, "%s: %s", call->fn, rcoll_err_get());
    }
    return rcoll_api_ipc_stream(comm, a, call->stream, call->fn, taken);
}

static rcoll_status_t route_stream(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                  const size_t *const *v, const rcoll_call_t *call, int device,
                                  int *taken)
{
    *taken = 1;
    return rcoll_api_stream_coll(comm, a, v, device, call->stream, call->fn);
}

static rcoll_status_t route_ipc(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                               const size_t *const *v, const rcoll_call_t *call, int device,
                               int *taken)
{
    (void)device;
    return rcoll_api_ipc_coll(comm, a, v, call->req, call->fn, taken);
}

static rcoll_status_t route_chunked(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                   const size_t *const *v, const rcoll_call_t *call, int device,
                                   int *taken)
{
    (void)v;
    *taken = 1;
    return rcoll_api_chunked(comm, a, device, call->req, call->fn);
}

static rcoll_status_t route_stage(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                 const size_t *const *v, const rcoll_call_t *call, int device,
                                 int *taken)
{
    (void)device;
    *taken = 1;
    return rcoll_api_stage_coll(comm, a, v, call->req, rcoll_api_group_depth != 0, call->fn);
}

static rcoll_status_t route_host(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                const size_t *const *v, const rcoll_call_t *call, int device,
                                int *taken)
{
    (void)device;
    *taken = 1;
    return rcoll_api_run_host(comm, a, v, call->req, NULL, NULL, call->fn);
}

static const route_fn_t routes[RCOLL_ROUTE_COUNT] = {
    [RCOLL_ROUTE_IPC_STREAM] = route_ipc_stream, [RCOLL_ROUTE_STREAM] = route_stream,
    [RCOLL_ROUTE_IPC] = route_ipc,               [RCOLL_ROUTE_CHUNKED] = route_chunked,
    [RCOLL_ROUTE_STAGE] = route_stage,           [RCOLL_ROUTE_HOST] = route_host};

/* Queue a checked collective (v: its count arrays, NULL for none) on the path the planner
 * gives (core/plan.h): host buffers on the host; CUDA device or managed ones over CUDA IPC,
 * in chunks, or staged through pinned host memory; stream calls in the stream's order. */
static rcoll_status_t queue_coll_v(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                   const size_t *const *v, const rcoll_call_t *call)
{
    mem_device_t dev;
    const char *fn = call->fn;
    rcoll_status_t st = a->kind == RCOLL_OP_BCAST
                            ? check_mem(comm, fn, "buf", NULL, "buf", a->dst, &dev)
                            : check_mem(comm, fn, "sendbuf", a->src, "recvbuf", a->dst, &dev);
    if (st != RCOLL_OK) return st;
    /* the common case, host buffers and no GPU setting, without the planner's facts */
    if (__builtin_expect(!dev.ptr && !call->on_stream && !comm->cfg.gpu.ipc &&
                             !comm->cfg.gpu.stage_chunk, 1))
        return rcoll_api_run_host(comm, a, v, call->req, NULL, NULL, fn);
    const rcoll_plan_in_t in = {
        .kind = a->kind, .device = dev.ptr != NULL, .no_buffers = !a->src && !a->dst,
        .gpu_active = rcoll_gpu_active(), .on_stream = call->on_stream,
        .in_group = rcoll_api_group_depth != 0, .ipc = comm->cfg.gpu.ipc != 0,
        .one_host = comm->local_ranks == comm->nranks,
        .bytes = a->count * rcoll_dt_size(a->dt), .stage_chunk = comm->cfg.gpu.stage_chunk};
    rcoll_plan_t plan;
    rcoll_plan_coll(&in, &plan);
    for (int k = 0; k < plan.n; k++) {
        int taken = 0;
        st = routes[plan.route[k]](comm, a, v, call, in.device, &taken);
        if (taken || st != RCOLL_OK) return st;
    }
    return rcoll_err_set(RCOLL_ERR_INTERNAL, "%s: no path took the call", fn);
}

static rcoll_status_t queue_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                 const rcoll_call_t *call)
{
    return queue_coll_v(comm, a, NULL, call);
}

static rcoll_status_t do_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                   rcoll_datatype_t dt, rcoll_op_t op, rcoll_comm_t comm,
                                   const rcoll_call_t *call)
{
    rcoll_status_t st = allreduce_args(sendbuf, recvbuf, count, dt, op, comm, call);
    if (st != RCOLL_OK) return st;
    rcoll_coll_args_t a = {RCOLL_OP_ALLREDUCE, sendbuf == RCOLL_IN_PLACE ? recvbuf : sendbuf, recvbuf,
                     count, dt, op, 0};
    return queue_coll(comm, &a, call);
}

static rcoll_status_t do_bcast(void *buf, size_t count, rcoll_datatype_t dt, int root,
                               rcoll_comm_t comm,
                               const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_comm_call(comm, call);
    if (st == RCOLL_OK) st = check_type(comm, fn, count, dt);
    if (st == RCOLL_OK) st = check_root(comm, fn, root);
    if (st != RCOLL_OK) return st;
    if (count && !buf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: buf is NULL with count %zu", fn,
                         count);
    rcoll_coll_args_t a = {RCOLL_OP_BCAST, buf, buf, count, dt, RCOLL_SUM, root};
    return queue_coll(comm, &a, call);
}

static rcoll_status_t do_barrier(rcoll_comm_t comm, const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_comm_call(comm, call);
    if (st != RCOLL_OK) return st;
    if (call->on_stream) { /* a barrier in stream order: the host function's */
        rcoll_coll_args_t a = {RCOLL_OP_BARRIER, NULL, NULL, 0, RCOLL_UINT8, RCOLL_MAX, 0};
        return rcoll_api_stream_coll(comm, &a, NULL, 0, call->stream, fn);
    }
    return rcoll_api_barrier_host(comm, call->req, fn);
}

rcoll_status_t rcoll_barrier(rcoll_comm_t comm)
{
    rcoll_status_t ent = comm_enter(comm, "rcoll_barrier");
    return ent != RCOLL_OK ? ent : comm_leave(comm, do_barrier(comm, &(const rcoll_call_t){.fn = "rcoll_barrier"})); }

rcoll_status_t rcoll_ibarrier(rcoll_comm_t comm, rcoll_request_t *req)
{
    rcoll_status_t gst = check_ireq(comm, req, "rcoll_ibarrier");
    if (gst != RCOLL_OK) return gst;
    rcoll_status_t ent = comm_enter(comm, "rcoll_ibarrier");
    return ent != RCOLL_OK ? ent : comm_leave(comm, do_barrier(comm, &(const rcoll_call_t){.fn = "rcoll_ibarrier", .req = req}));
}

rcoll_status_t rcoll_test(rcoll_request_t *req, int *done)
{
    if (!req || !*req || !done) return RCOLL_ERR_INVALID_ARG;
    struct rcoll_request *r = *req;
    rcoll_comm_t comm = r->comm;
    if (comm->pt_on) {
        /* With the progress thread: no entry flag, so another thread may post or wait on
         * this communicator meanwhile; the lock keeps the queue whole. */
        pthread_mutex_lock(&comm->pt_lock);
        if (!r->complete) rcoll_comm_progress(comm);
        if (!r->complete) {
            pthread_mutex_unlock(&comm->pt_lock);
            *done = 0;
            return RCOLL_OK;
        }
        rcoll_status_t st = rcoll_req_finish(r, r->status);
        rcoll_req_release(r);
        pthread_mutex_unlock(&comm->pt_lock);
        *req = NULL;
        *done = 1;
        return st;
    }
    if (!r->complete) {
        rcoll_status_t ent = comm_enter(comm, "rcoll_test");
        if (ent != RCOLL_OK) return ent;
        rcoll_comm_progress(comm);
        comm_leave(comm, RCOLL_OK);
    }
    if (!r->complete) {
        *done = 0;
        return RCOLL_OK;
    }
    rcoll_status_t st = rcoll_req_finish(r, r->status);
    rcoll_req_release(r);
    *req = NULL;
    *done = 1;
    return st;
}

rcoll_status_t rcoll_wait(rcoll_request_t *req)
{
    if (!req || !*req) return RCOLL_ERR_INVALID_ARG;
    struct rcoll_request *r = *req;
    if (r->comm->pt_on) {
        *req = NULL;
        return rcoll_req_wait_shared(r);
    }
    rcoll_status_t ent = comm_enter(r->comm, "rcoll_wait");
    if (ent != RCOLL_OK) return ent;
    rcoll_status_t st = rcoll_req_wait(r);
    st = comm_leave(r->comm, rcoll_req_finish(r, st));
    rcoll_req_release(r);
    *req = NULL;
    return st;
}

rcoll_status_t rcoll_wait_for(rcoll_request_t *req, double timeout_s, int *done)
{
    if (!req || !*req || !done || !(timeout_s >= 0)) return RCOLL_ERR_INVALID_ARG;
    *done = 0;
    struct rcoll_request *r = *req;
    uint64_t deadline = rcoll_now_ns() + (timeout_s < 1e6 ? (uint64_t)(timeout_s * 1e9)
                                                          : (uint64_t)1e15);
    if (deadline == 0) deadline = 1;
    if (r->comm->pt_on) {
        rcoll_status_t st = rcoll_req_wait_shared_until(r, deadline);
        if (st == RCOLL_INPROGRESS) return RCOLL_OK;
        *req = NULL;
        *done = 1;
        return st;
    }
    rcoll_status_t ent = comm_enter(r->comm, "rcoll_wait_for");
    if (ent != RCOLL_OK) return ent;
    rcoll_status_t st = rcoll_req_wait_until(r, deadline);
    if (st == RCOLL_INPROGRESS) {
        comm_leave(r->comm, RCOLL_OK);
        return RCOLL_OK;
    }
    st = comm_leave(r->comm, rcoll_req_finish(r, st));
    rcoll_req_release(r);
    *req = NULL;
    *done = 1;
    return st;
}

/* The checks every rcoll_i* call makes first: outside a group, with a place for the request. */
static rcoll_status_t check_ireq(rcoll_comm_t comm, rcoll_request_t *req, const char *fn)
{
    rcoll_status_t st = check_live(comm, fn);
    if (st != RCOLL_OK) return st;
    if (rcoll_api_group_depth) {
        st = RCOLL_ERR_INVALID_USAGE;
        if (comm)
            arg_error(comm, st, "%s: nonblocking calls are not allowed inside "
                      "rcoll_group_start/end (use the blocking form)", fn);
    } else if (!req) {
        st = RCOLL_ERR_INVALID_ARG;
        if (comm) arg_error(comm, st, "%s: req is NULL", fn);
    }
    return st;
}

/* ------------------------------------------------------------------------------------------
 * The other collectives
 * ---------------------------------------------------------------------------------------- */

/* count x nranks elements must stay within the 2^40 limit (block collectives). */
static rcoll_status_t check_blocks(rcoll_comm_t comm, const char *fn, size_t count)
{
    if (count > RCOLL_MAX_COUNT / (size_t)comm->nranks)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: count %zu x %d ranks exceeds the maximum of 2^40 elements", fn,
                         count, comm->nranks);
    return RCOLL_OK;
}

static rcoll_status_t do_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                rcoll_datatype_t dt, rcoll_op_t op, int root, rcoll_comm_t comm,
                                const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_comm_call(comm, call);
    if (st == RCOLL_OK) st = check_type(comm, fn, count, dt);
    if (st == RCOLL_OK) st = check_root(comm, fn, root);
    if (st == RCOLL_OK) st = check_op(comm, fn, dt, op);
    if (st != RCOLL_OK) return st;
    int is_root = comm->rank == root;
    if (count && sendbuf == RCOLL_IN_PLACE && !is_root)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: RCOLL_IN_PLACE is valid on the root (%d) only", fn, root);
    if (count && !sendbuf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: sendbuf is NULL with count %zu", fn,
                         count);
    if (count && is_root && !recvbuf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: recvbuf is NULL on the root with count %zu", fn, count);
    size_t bytes = count * rcoll_dt_size(dt);
    if (count && is_root && sendbuf != RCOLL_IN_PLACE && sendbuf != recvbuf &&
        ranges_overlap(sendbuf, recvbuf, bytes))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: sendbuf and recvbuf overlap partially (they must be identical or "
                         "disjoint)", fn);
    rcoll_coll_args_t a = {RCOLL_OP_REDUCE, sendbuf == RCOLL_IN_PLACE ? recvbuf : sendbuf,
                     is_root ? recvbuf : NULL, count, dt, op, root};
    return queue_coll(comm, &a, call);
}

static rcoll_status_t do_allgather(const void *sendbuf, void *recvbuf, size_t count,
                                   rcoll_datatype_t dt, rcoll_comm_t comm,
                                   const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_comm_call(comm, call);
    if (st == RCOLL_OK) st = check_type(comm, fn, count, dt);
    if (st == RCOLL_OK) st = check_blocks(comm, fn, count);
    if (st != RCOLL_OK) return st;
    size_t esize = rcoll_dt_size(dt), blk = count * esize;
    if (count && !recvbuf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: recvbuf is NULL with count %zu", fn,
                         count);
    if (count && !sendbuf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: sendbuf is NULL with count %zu (use "
                         "RCOLL_IN_PLACE when the block is already in recvbuf)", fn, count);
    const void *own = count ? (const char *)recvbuf + (size_t)comm->rank * blk : recvbuf;
    if (sendbuf == RCOLL_IN_PLACE) sendbuf = own;
    if (count && sendbuf != own &&
        spans_overlap(sendbuf, blk, recvbuf, blk * (size_t)comm->nranks))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: sendbuf overlaps recvbuf but is not this rank's block of it "
                         "(in place: pass RCOLL_IN_PLACE or recvbuf + rank x sendcount)", fn);
    rcoll_coll_args_t a = {RCOLL_OP_ALLGATHER, sendbuf, recvbuf, count, dt, RCOLL_SUM, 0};
    return queue_coll(comm, &a, call);
}

static rcoll_status_t do_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                        rcoll_datatype_t dt, rcoll_op_t op, rcoll_comm_t comm,
                                        const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_comm_call(comm, call);
    if (st == RCOLL_OK) st = check_type(comm, fn, count, dt);
    if (st == RCOLL_OK) st = check_blocks(comm, fn, count);
    if (st == RCOLL_OK) st = check_op(comm, fn, dt, op);
    if (st != RCOLL_OK) return st;
    size_t blk = count * rcoll_dt_size(dt);
    if (count && (!recvbuf || !sendbuf))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s is NULL with count %zu", fn,
                         recvbuf ? "sendbuf" : "recvbuf", count);
    if (sendbuf == RCOLL_IN_PLACE) sendbuf = recvbuf;
    int own_block = count && (const char *)recvbuf ==
                                 (const char *)sendbuf + (size_t)comm->rank * blk;
    if (count && sendbuf != recvbuf && !own_block &&
        spans_overlap(sendbuf, blk * (size_t)comm->nranks, recvbuf, blk))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: recvbuf overlaps sendbuf but is neither sendbuf (in place) nor "
                         "this rank's block of it", fn);
    rcoll_coll_args_t a = {RCOLL_OP_REDUCE_SCATTER, sendbuf, recvbuf, count, dt, op, 0};
    return queue_coll(comm, &a, call);
}

static rcoll_status_t do_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                  rcoll_datatype_t dt, rcoll_comm_t comm,
                                  const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_comm_call(comm, call);
    if (st == RCOLL_OK) st = check_type(comm, fn, count, dt);
    if (st == RCOLL_OK) st = check_blocks(comm, fn, count);
    if (st != RCOLL_OK) return st;
    size_t total = count * rcoll_dt_size(dt) * (size_t)comm->nranks;
    if (count && sendbuf == RCOLL_IN_PLACE)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: in-place all-to-all is not supported (use two buffers)", fn);
    if (count && (!recvbuf || !sendbuf))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s is NULL with count %zu", fn,
                         recvbuf ? "sendbuf" : "recvbuf", count);
    if (count && ranges_overlap(sendbuf, recvbuf, total))
        return arg_error(comm, RCOLL_ERR_INVALID_ARG,
                         "%s: sendbuf and recvbuf overlap (they must be disjoint)", fn);
    rcoll_coll_args_t a = {RCOLL_OP_ALLTOALL, sendbuf, recvbuf, count, dt, RCOLL_SUM, 0};
    return queue_coll(comm, &a, call);
}

/* ------------------------------------------------------------------------------------------
 * Point to point
 * ---------------------------------------------------------------------------------------- */

static rcoll_status_t p2p_add(struct rcoll_request *r, int is_send, int peer, void *buf,
                              size_t bytes)
{
    rcoll_comm_t comm = r->comm;
    if (r->nitems == r->cap_items) {
        int cap = r->cap_items ? 2 * r->cap_items : 4;
        rcoll_p2p_item_t *it = realloc(r->items, (size_t)cap * sizeof(*it));
        if (!it) return RCOLL_ERR_NO_MEMORY;
        r->items = it;
        r->cap_items = cap;
    }
    uint32_t seq = is_send ? comm->p2p_send_seq[peer]++ : comm->p2p_recv_seq[peer]++;
    r->items[r->nitems++] = (rcoll_p2p_item_t){
        .is_send = is_send, .peer = peer, .buf = buf, .bytes = bytes,
        .tag = (int)(0x40000000u | (seq & 0x3fffffffu))};
    return RCOLL_OK;
}

static rcoll_status_t do_p2p(int is_send, void *buf, size_t count, rcoll_datatype_t dt,
                             int peer, rcoll_comm_t comm, rcoll_request_t *req, const char *fn)
{
    rcoll_status_t st = check_comm(comm, fn);
    if (st == RCOLL_OK) st = check_type(comm, fn, count, dt);
    if (st != RCOLL_OK) return st;
    if (peer < 0 || peer >= comm->nranks)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: peer %d is outside [0, %d)", fn,
                         peer, comm->nranks);
    if (count && !buf)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: buf is NULL with count %zu", fn,
                         count);
    if (peer == comm->rank && !rcoll_api_group_depth)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                         "%s: a message to oneself needs its matching %s in the same group "
                         "(rcoll_group_start/end)", fn, is_send ? "rcoll_recv" : "rcoll_send");
    mem_device_t dev = {0};
    if (count && (st = check_mem(comm, fn, "buf", NULL, "buf", buf, &dev)) != RCOLL_OK)
        return st;
    size_t bytes = count * rcoll_dt_size(dt);
    struct rcoll_request *r = rcoll_api_group_depth ? comm->open_group : NULL;
    if (!r) {
        if ((st = new_request(comm, RCOLL_OP_P2P, fn, &r)) != RCOLL_OK) return st;
        if (rcoll_api_group_depth) {
            if ((st = rcoll_api_group_record(comm, r)) != RCOLL_OK) {
                rcoll_req_release(r);
                return st;
            }
            r->held = 1;
            comm->open_group = r;
            rcoll_req_enqueue(comm, r);
        }
    }
    if (p2p_add(r, is_send, peer, buf, bytes) != RCOLL_OK)
        st = arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    /* CUDA device memory to or from another host over a transport that registers it, within
     * RCOLL_NET_GDR_LEVEL of the NIC: straight from and to the GPU (GPUDirect RDMA) */
    if (st == RCOLL_OK && count && dev.ptr && dev.kind == RCOLL_MEM_DEVICE &&
        rcoll_comm_gdr_ok(comm, peer, buf, bytes))
        r->items[r->nitems - 1].gdr = 1;
    /* else CUDA device or managed memory: the transfer uses a pinned copy (api_stage.c); if
     * that fails, the item is taken back (a group goes on without it) */
    else if (st == RCOLL_OK && count && dev.ptr &&
        (st = rcoll_api_stage_p2p(comm, r, is_send, buf, bytes, fn,
                                  &r->items[r->nitems - 1].buf)) != RCOLL_OK) {
        r->nitems--;
        if (is_send)
            comm->p2p_send_seq[peer]--;
        else
            comm->p2p_recv_seq[peer]--;
    }
    if (st != RCOLL_OK) {
        if (!rcoll_api_group_depth) rcoll_req_release(r); /* a group's request stays */
        return st;
    }
    if (rcoll_api_group_depth) return RCOLL_OK;
    return submit(comm, r, req);
}

rcoll_status_t rcoll_send(const void *buf, size_t count, rcoll_datatype_t dt, int peer,
                          rcoll_comm_t comm)
{
    rcoll_status_t ent = comm_enter(comm, "rcoll_send");
    return ent != RCOLL_OK ? ent : comm_leave(comm, do_p2p(1, (void *)buf, count, dt, peer, comm, NULL, "rcoll_send"));
}

rcoll_status_t rcoll_recv(void *buf, size_t count, rcoll_datatype_t dt, int peer,
                          rcoll_comm_t comm)
{
    rcoll_status_t ent = comm_enter(comm, "rcoll_recv");
    return ent != RCOLL_OK ? ent : comm_leave(comm, do_p2p(0, buf, count, dt, peer, comm, NULL, "rcoll_recv"));
}

rcoll_status_t rcoll_isend(const void *buf, size_t count, rcoll_datatype_t dt, int peer,
                           rcoll_comm_t comm, rcoll_request_t *req)
{
    rcoll_status_t st = check_ireq(comm, req, "rcoll_isend");
    if (st != RCOLL_OK) return st;
    rcoll_status_t ent = comm_enter(comm, "rcoll_isend");
    return ent != RCOLL_OK ? ent : comm_leave(comm, do_p2p(1, (void *)buf, count, dt, peer, comm, req, "rcoll_isend"));
}

rcoll_status_t rcoll_irecv(void *buf, size_t count, rcoll_datatype_t dt, int peer,
                           rcoll_comm_t comm, rcoll_request_t *req)
{
    rcoll_status_t st = check_ireq(comm, req, "rcoll_irecv");
    if (st != RCOLL_OK) return st;
    rcoll_status_t ent = comm_enter(comm, "rcoll_irecv");
    return ent != RCOLL_OK ? ent : comm_leave(comm, do_p2p(0, buf, count, dt, peer, comm, req, "rcoll_irecv"));
}

/* ------------------------------------------------------------------------------------------
 * Sub-communicators (the split itself: split.c)
 * ---------------------------------------------------------------------------------------- */

static rcoll_status_t split_args(rcoll_comm_t comm, rcoll_comm_t *newcomm, const char *fn)
{
    rcoll_status_t st = check_comm(comm, fn);
    if (st != RCOLL_OK) return st;
    if (!newcomm) return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: newcomm is NULL", fn);
    if (rcoll_api_group_depth)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                         "%s: not allowed inside rcoll_group_start/end (call it before the "
                         "group or after rcoll_group_end)", fn);
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_split(rcoll_comm_t comm, int color, int key, rcoll_comm_t *newcomm)
{
    rcoll_status_t st = split_args(comm, newcomm, "rcoll_comm_split");
    if (st == RCOLL_OK) st = comm_enter(comm, "rcoll_comm_split");
    if (st != RCOLL_OK) return st;
    return comm_leave(comm, rcoll_comm_split_run(comm, color, key, newcomm));
}

rcoll_status_t rcoll_comm_dup(rcoll_comm_t comm, rcoll_comm_t *newcomm)
{
    rcoll_status_t st = split_args(comm, newcomm, "rcoll_comm_dup");
    if (st == RCOLL_OK) st = comm_enter(comm, "rcoll_comm_dup");
    if (st != RCOLL_OK) return st;
    return comm_leave(comm, rcoll_comm_split_run(comm, 0, comm->rank, newcomm));
}

/* No entry: another thread may be waiting in a call on comm (that is what revoke is for);
 * the flag and the root's message reach it at its next control poll. */
rcoll_status_t rcoll_comm_revoke(rcoll_comm_t comm)
{
    rcoll_status_t st = check_live(comm, "rcoll_comm_revoke");
    if (st != RCOLL_OK) return st;
    if (atomic_load_explicit(&comm->revoked, memory_order_acquire)) return RCOLL_OK;
    char pbuf[128], text[RCOLL_BS_TEXT_MAX];
    snprintf(text, sizeof(text), "communicator %s%s%s(id %016llx) revoked by %s",
             comm->cfg.comm_name[0] ? "\"" : "", comm->cfg.comm_name,
             comm->cfg.comm_name[0] ? "\" " : "", (unsigned long long)comm->ctx,
             rcoll_comm_peer_name(comm, comm->rank, pbuf, sizeof(pbuf)));
    snprintf(comm->revoke_text, sizeof(comm->revoke_text), "%s", text);
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&comm->revoked, &expected, 1,
                                                 memory_order_acq_rel, memory_order_acquire))
        return RCOLL_OK; /* another thread was first */
    RCOLL_WARN(COLL, "%s", text);
    rcoll_bs_revoke(comm->bs, comm->ctx, comm->rank, text);
    if (comm->bell_self) { /* a waiter asleep here wakes */
        rcoll_bell_fence();
        rcoll_bell_ring(comm->bell_self);
    }
    return RCOLL_OK;
}

/* Allowed on a failed communicator: that is what it is for. */
rcoll_status_t rcoll_comm_shrink(rcoll_comm_t comm, int flags, rcoll_comm_t *newcomm)
{
    const char *fn = "rcoll_comm_shrink";
    rcoll_status_t st = check_live(comm, fn);
    if (st != RCOLL_OK) return st;
    if (newcomm) *newcomm = NULL;
    if (!newcomm) return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: newcomm is NULL", fn);
    if (flags & ~RCOLL_SHRINK_ABORT_PENDING)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: unknown flags 0x%x (known: "
                         "RCOLL_SHRINK_ABORT_PENDING)", fn, (unsigned)flags);
    if (rcoll_api_group_depth)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                         "%s: not allowed inside rcoll_group_start/end (call it before the "
                         "group or after rcoll_group_end)", fn);
    long pending = atomic_load_explicit(&comm->stream_pending, memory_order_acquire);
    if (pending) /* their host functions still use comm (after a failure they run nothing) */
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: %ld stream call%s enqueued on "
                         "this communicator %s not run yet: synchronize the stream first", fn,
                         pending, pending == 1 ? "" : "s", pending == 1 ? "has" : "have");
    st = comm_enter(comm, fn);
    if (st != RCOLL_OK) return st;
    return comm_leave(comm, rcoll_comm_shrink_run(comm, flags, newcomm));
}

rcoll_status_t rcoll_comm_grow_id(rcoll_comm_t comm, rcoll_unique_id_t *id)
{
    const char *fn = "rcoll_comm_grow_id";
    rcoll_status_t st = check_comm(comm, fn);
    if (st != RCOLL_OK) return st;
    if (!id) return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: id is NULL", fn);
    st = comm_enter(comm, fn);
    if (st != RCOLL_OK) return st;
    return comm_leave(comm, rcoll_comm_grow_id_run(comm, id));
}

/* A member (comm) or a new rank (comm NULL: an init through the grow id). */
rcoll_status_t rcoll_comm_grow(rcoll_comm_t comm, int nranks, const rcoll_unique_id_t *id,
                               int rank, rcoll_comm_t *newcomm)
{
    const char *fn = "rcoll_comm_grow";
    if (!comm) {
        if (!newcomm)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s: newcomm is NULL", fn);
        *newcomm = NULL;
        if (!id)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s: a new rank (comm NULL) needs the "
                                 "grow id a member made with rcoll_comm_grow_id", fn);
        if (nranks < 2 || rank < 1 || rank >= nranks)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s: a new rank's rank %d is not in "
                                 "[1, nranks=%d) (the members keep 0 to their size - 1)", fn,
                                 rank, nranks);
        return rcoll_comm_init_rank(nranks, id, rank, newcomm);
    }
    rcoll_status_t st = split_args(comm, newcomm, fn);
    if (st != RCOLL_OK) return st;
    *newcomm = NULL;
    if (nranks <= comm->nranks)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: nranks %d is not above this "
                         "communicator's size %d (a grow adds ranks; rcoll_comm_shrink removes "
                         "them)", fn, nranks, comm->nranks);
    if (rank != RCOLL_UNDEFINED && rank != comm->rank)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: a member keeps its rank: pass "
                         "RCOLL_UNDEFINED or %d, not %d", fn, comm->rank, rank);
    st = comm_enter(comm, fn);
    if (st != RCOLL_OK) return st;
    return comm_leave(comm, rcoll_comm_grow_run(comm, nranks, newcomm));
}

/* Collective: no operation pending, not in a group; then the barrier and the teardown. */
rcoll_status_t rcoll_comm_suspend(rcoll_comm_t comm, int flags)
{
    const char *fn = "rcoll_comm_suspend";
    rcoll_status_t st = check_comm(comm, fn);
    if (st != RCOLL_OK) return st;
    if (flags != RCOLL_SUSPEND_DEFAULT)
        return arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: unknown flags 0x%x (known: "
                         "RCOLL_SUSPEND_DEFAULT)", fn, (unsigned)flags);
    if (rcoll_api_group_depth)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                         "%s: not allowed inside rcoll_group_start/end (call it before the "
                         "group or after rcoll_group_end)", fn);
    st = comm_enter(comm, fn);
    if (st != RCOLL_OK) return st;
    if (comm->head) {
        st = arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: operations are pending on this "
                       "communicator (wait for them first)", fn);
        return comm_leave(comm, st);
    }
    st = rcoll_comm_suspend_run(comm);
    if (st != RCOLL_OK) rcoll_comm_set_error(comm, st, rcoll_err_get());
    return comm_leave(comm, st);
}

/* Only on a suspended communicator (whose other calls are refused). */
rcoll_status_t rcoll_comm_resume(rcoll_comm_t comm)
{
    const char *fn = "rcoll_comm_resume";
    rcoll_status_t st = check_live(comm, fn);
    if (st != RCOLL_OK) return st;
    if (!comm->suspended)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: this communicator is not "
                         "suspended", fn);
    if (rcoll_api_group_depth)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE,
                         "%s: not allowed inside rcoll_group_start/end", fn);
    if (comm->failed != RCOLL_OK)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: the communicator failed while "
                         "suspended (%.300s): shrink or destroy it", fn, comm->last_error);
    st = comm_enter(comm, fn);
    if (st != RCOLL_OK) return st;
    st = rcoll_comm_resume_run(comm);
    if (st != RCOLL_OK) rcoll_comm_set_error(comm, st, rcoll_err_get());
    return comm_leave(comm, st);
}

/* ------------------------------------------------------------------------------------------
 * For the rooted and uneven collectives (api_v.c, through core/api_int.h)
 * ---------------------------------------------------------------------------------------- */

rcoll_status_t rcoll_api_check_ireq(rcoll_comm_t comm, rcoll_request_t *req, const char *fn)
{
    return check_ireq(comm, req, fn);
}

rcoll_status_t rcoll_api_check_call(rcoll_comm_t comm, const rcoll_call_t *call)
{
    return check_comm_call(comm, call);
}

rcoll_status_t rcoll_api_check_type(rcoll_comm_t comm, const char *fn, size_t count,
                                    rcoll_datatype_t dt)
{
    return check_type(comm, fn, count, dt);
}

rcoll_status_t rcoll_api_check_op(rcoll_comm_t comm, const char *fn, rcoll_datatype_t dt,
                                  rcoll_op_t op)
{
    return check_op(comm, fn, dt, op);
}

rcoll_status_t rcoll_api_check_root(rcoll_comm_t comm, const char *fn, int root)
{
    return check_root(comm, fn, root);
}

rcoll_status_t rcoll_api_queue_vcoll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                     const size_t *const v[RCOLL_V_NUM], const rcoll_call_t *call)
{
    return queue_coll_v(comm, a, v, call);
}

/* ------------------------------------------------------------------------------------------
 * Stream-ordered calls (api_stream.c enqueues them; docs/gpu.md, "Stream order")
 * ---------------------------------------------------------------------------------------- */

/* Take the communicator for enqueueing one stream call.  Not comm_enter: a host function of
 * an earlier stream call may be inside it (running its collective) meanwhile, which is the
 * point.  Refused, with a sentence: inside a group; without the CUDA driver; a second thread
 * enqueueing; no stream call pending and another thread inside a call, or nonblocking
 * operations in flight (they would be ordered before the stream's work on this rank only). */
static rcoll_status_t stream_enter(rcoll_comm_t comm, void *stream, const char *fn)
{
    rcoll_status_t st = check_live(comm, fn);
    if (st != RCOLL_OK) return st;
    if (rcoll_api_group_depth)
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: stream calls are not allowed "
                         "inside rcoll_group_start/end (their stream orders them)", fn);
    if (!rcoll_gpu_active())
        return arg_error(comm, RCOLL_ERR_UNSUPPORTED, "%s: stream calls need the CUDA driver, "
                         "which this process does not use (rcoll built without CUDA, "
                         "RCOLL_CUDA=0, or RCOLL_CUDA=auto and libcuda not loaded when the "
                         "communicator was created: set RCOLL_CUDA=1)", fn);
    if (atomic_exchange_explicit(&comm->stream_busy, 1, memory_order_acquire))
        return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: another thread is enqueueing a "
                         "stream call on this communicator: a communicator is used by one "
                         "thread at a time", fn);
    if (!atomic_load_explicit(&comm->stream_pending, memory_order_acquire)) {
        const char *other = NULL;
        int inflight = 0;
        if (atomic_load_explicit(&comm->in_use, memory_order_acquire)) {
            other = atomic_load_explicit(&comm->in_use_fn, memory_order_relaxed);
        } else {
            rcoll_pt_lock(comm);
            inflight = comm->head != NULL;
            rcoll_pt_unlock(comm);
        }
        if (other || inflight) {
            atomic_store_explicit(&comm->stream_busy, 0, memory_order_release);
            if (inflight)
                return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: nonblocking operations of "
                                 "this communicator are in flight: complete them (rcoll_wait) "
                                 "before a stream call", fn);
            return arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: another thread is using this "
                             "communicator (in %s): a communicator is used by one thread at a "
                             "time", fn, other ? other : "a call");
        }
    }
    (void)stream; /* the call carries it (rcoll_call_t) */
    return RCOLL_OK;
}

static rcoll_status_t stream_leave(rcoll_comm_t comm, rcoll_status_t st)
{
    atomic_store_explicit(&comm->stream_busy, 0, memory_order_release);
    return st;
}

rcoll_status_t rcoll_api_stream_enter(rcoll_comm_t comm, void *stream, const char *fn)
{
    return stream_enter(comm, stream, fn);
}

rcoll_status_t rcoll_api_stream_leave(rcoll_comm_t comm, rcoll_status_t st)
{
    return stream_leave(comm, st);
}

rcoll_status_t rcoll_barrier_stream(rcoll_comm_t comm, void *stream)
{
    const char *fn = "rcoll_barrier_stream";
    rcoll_status_t ent = stream_enter(comm, stream, fn);
    if (ent != RCOLL_OK) return ent;
    return stream_leave(comm, do_barrier(comm, &(const rcoll_call_t){.fn = fn, .on_stream = 1, .stream = stream}));
}

/* ------------------------------------------------------------------------------------------
 * The entry points: one line a collective, each giving its blocking, nonblocking and
 * stream-ordered forms from its do_ function (RCOLL_API_ENTRIES, api_int.h).  The barrier,
 * without parameters, is written out above.
 * ---------------------------------------------------------------------------------------- */

#define RCOLL_COLLECTIVES(X)                                                                  \
    X(allreduce,                                                                              \
      (const void *sendbuf, void *recvbuf, size_t count, rcoll_datatype_t dt, rcoll_op_t op), \
      (sendbuf, recvbuf, count, dt, op))                                                      \
    X(bcast, (void *buf, size_t count, rcoll_datatype_t dt, int root), (buf, count, dt, root)) \
    X(reduce,                                                                                 \
      (const void *sendbuf, void *recvbuf, size_t count, rcoll_datatype_t dt, rcoll_op_t op,  \
       int root),                                                                             \
      (sendbuf, recvbuf, count, dt, op, root))                                                \
    X(allgather, (const void *sendbuf, void *recvbuf, size_t sendcount, rcoll_datatype_t dt), \
      (sendbuf, recvbuf, sendcount, dt))                                                      \
    X(reduce_scatter,                                                                         \
      (const void *sendbuf, void *recvbuf, size_t recvcount, rcoll_datatype_t dt,             \
       rcoll_op_t op),                                                                        \
      (sendbuf, recvbuf, recvcount, dt, op))                                                  \
    X(alltoall, (const void *sendbuf, void *recvbuf, size_t count, rcoll_datatype_t dt),      \
      (sendbuf, recvbuf, count, dt))

RCOLL_COLLECTIVES(RCOLL_API_ENTRIES)
