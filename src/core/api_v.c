/*
 * api_v.c - the entry points of the rooted and uneven collectives (gather, scatter,
 * all-gather-v, all-to-all-v, reduce-scatter-v): argument checks with sentences that name the
 * argument, then the request queued as every collective's (core/progress.c schedules it).
 * Nothing here moves data; invalid input returns before anything is touched.
 */
#include <stdint.h>

#include "algo/reduce.h"
#include "core/api_int.h"
#include "core/comm.h"

#define MAX_TEXT "the maximum of 2^40 elements"

/* Checks a counts array (and its displacements, when named): not NULL, every count, their
 * sum and every displacement + count within RCOLL_MAX_COUNT.  *total: the sum; *extent: the
 * largest displacement + count of a non-empty block (the buffer's extent in elements). */
static rcoll_status_t check_v(rcoll_comm_t comm, const char *fn, const char *cname,
                              const size_t *counts, const char *dname, const size_t *displs,
                              size_t *total, size_t *extent)
{
    if (!counts)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s is NULL", fn, cname);
    if (dname && !displs)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s is NULL", fn, dname);
    size_t sum = 0, ext = 0;
    for (int i = 0; i < comm->nranks; i++) {
        size_t c = counts[i];
        if (c > RCOLL_MAX_COUNT - sum)
            return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG,
                                       "%s: %s[%d] = %zu takes the sum of %s past " MAX_TEXT,
                                       fn, cname, i, c, cname);
        sum += c;
        if (!dname || !c) continue;
        if (displs[i] > RCOLL_MAX_COUNT - c)
            return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG,
                                       "%s: %s[%d] + %s[%d] = %zu + %zu exceeds " MAX_TEXT, fn,
                                       dname, i, cname, i, displs[i], c);
        if (displs[i] + c > ext) ext = displs[i] + c;
    }
    *total = sum;
    *extent = ext;
    return RCOLL_OK;
}

/* The checks every one of these calls starts with: the communicator, the datatype with a
 * count (0 where the count is in an array), and nranks x count within the limit. */
static rcoll_status_t check_start(rcoll_comm_t comm, const rcoll_call_t *call, size_t count,
                                  rcoll_datatype_t dt)
{
    const char *fn = call->fn;
    rcoll_status_t st = rcoll_api_check_call(comm, call);
    if (st == RCOLL_OK) st = rcoll_api_check_type(comm, fn, count, dt);
    if (st == RCOLL_OK && count > RCOLL_MAX_COUNT / (size_t)comm->nranks)
        st = rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG,
                                 "%s: count %zu x %d ranks exceeds " MAX_TEXT, fn, count,
                                 comm->nranks);
    return st;
}

/* Take the communicator for one call; a nonblocking one (nb) first checks req and the group. */
/* ------------------------------------------------------------------------------------------
 * Gather and scatter: `all` is the root's buffer of nranks blocks, `one` a rank's block.
 * ---------------------------------------------------------------------------------------- */

static rcoll_status_t do_rooted(rcoll_op_kind_t kind, const void *sendbuf, void *recvbuf,
                                size_t count, rcoll_datatype_t dt, int root, rcoll_comm_t comm,
                                const rcoll_call_t *call)
{
    const char *fn = call->fn;
    rcoll_status_t st = check_start(comm, call, count, dt);
    if (st == RCOLL_OK) st = rcoll_api_check_root(comm, fn, root);
    if (st != RCOLL_OK) return st;
    int gather = kind == RCOLL_OP_GATHER, is_root = comm->rank == root;
    /* gather: one = sendbuf, all = recvbuf; scatter: the reverse */
    const char *one_name = gather ? "sendbuf" : "recvbuf", *all_name = gather ? "recvbuf"
                                                                              : "sendbuf";
    const void *one = gather ? sendbuf : recvbuf;
    const void *all = gather ? recvbuf : sendbuf;
    size_t blk = count * rcoll_dt_size(dt);
    if (count && one == RCOLL_IN_PLACE && !is_root)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: RCOLL_IN_PLACE (as %s) is "
                                   "valid on the root (%d) only", fn, one_name, root);
    if (count && !one)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s is NULL with count %zu%s",
                                   fn, one_name, count, is_root ? " (on the root, "
                                   "RCOLL_IN_PLACE: its block is already in place)" : "");
    if (count && is_root && !all)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s is NULL on the root with "
                                   "count %zu", fn, all_name, count);
    if (count && is_root) {
        const char *own = (const char *)all + (size_t)root * blk;
        if (one == RCOLL_IN_PLACE) one = own;
        if (one != own && rcoll_api_spans_overlap(one, blk, all, blk * (size_t)comm->nranks))
            return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG,
                                       "%s: %s overlaps %s but is not the root's block of it (in "
                                       "place: pass RCOLL_IN_PLACE or %s + root x count)", fn,
                                       one_name, all_name, all_name);
    }
    if (!count || !is_root) all = NULL; /* not significant here */
    if (!count) one = NULL;
    rcoll_coll_args_t a = {.kind = kind, .count = count, .dt = dt, .op = RCOLL_SUM,
                           .root = root};
    a.src = gather ? one : all;
    a.dst = (void *)(gather ? all : one);
    return rcoll_api_queue_vcoll(comm, &a, NULL, call);
}

/* ------------------------------------------------------------------------------------------
 * All-gather-v
 * ---------------------------------------------------------------------------------------- */

static rcoll_status_t do_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                    const size_t *recvcounts, const size_t *displs,
                                    rcoll_datatype_t dt, rcoll_comm_t comm,
                                    const rcoll_call_t *call)
{
    const char *fn = call->fn;
    size_t total = 0, extent = 0;
    rcoll_status_t st = check_start(comm, call, sendcount, dt);
    if (st == RCOLL_OK)
        st = check_v(comm, fn, "recvcounts", recvcounts, "displs", displs, &total, &extent);
    if (st != RCOLL_OK) return st;
    int me = comm->rank;
    size_t esize = rcoll_dt_size(dt);
    if (sendcount != recvcounts[me])
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: sendcount %zu differs from "
                                   "recvcounts[%d] = %zu (this rank's block)", fn, sendcount,
                                   me, recvcounts[me]);
    if (total && !recvbuf)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: recvbuf is NULL with "
                                   "recvcounts summing to %zu", fn, total);
    if (sendcount && !sendbuf)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: sendbuf is NULL with "
                                   "sendcount %zu (use RCOLL_IN_PLACE when the block is already "
                                   "in recvbuf)", fn, sendcount);
    if (sendcount) {
        const char *own = (const char *)recvbuf + displs[me] * esize;
        if (sendbuf == RCOLL_IN_PLACE) sendbuf = own;
        if (sendbuf != own &&
            rcoll_api_spans_overlap(sendbuf, sendcount * esize, recvbuf, extent * esize))
            return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG,
                                       "%s: sendbuf overlaps recvbuf but is not this rank's "
                                       "block of it (in place: pass RCOLL_IN_PLACE or recvbuf "
                                       "+ displs[rank])", fn);
    } else {
        sendbuf = NULL;
    }
    rcoll_coll_args_t a = {.kind = RCOLL_OP_ALLGATHERV, .src = sendbuf, .dst = recvbuf,
                           .count = total, .dt = dt, .op = RCOLL_SUM, .root = 0};
    const size_t *const v[RCOLL_V_NUM] = {recvcounts, displs, NULL, NULL};
    return rcoll_api_queue_vcoll(comm, &a, v, call);
}

/* ------------------------------------------------------------------------------------------
 * All-to-all-v
 * ---------------------------------------------------------------------------------------- */

static rcoll_status_t do_alltoallv(const void *sendbuf, const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf,
                                   const size_t *recvcounts, const size_t *rdispls,
                                   rcoll_datatype_t dt, rcoll_comm_t comm,
                                   const rcoll_call_t *call)
{
    const char *fn = call->fn;
    size_t stotal = 0, sext = 0, rtotal = 0, rext = 0;
    rcoll_status_t st = check_start(comm, call, 0, dt);
    if (st == RCOLL_OK)
        st = check_v(comm, fn, "sendcounts", sendcounts, "sdispls", sdispls, &stotal, &sext);
    if (st == RCOLL_OK)
        st = check_v(comm, fn, "recvcounts", recvcounts, "rdispls", rdispls, &rtotal, &rext);
    if (st != RCOLL_OK) return st;
    int me = comm->rank;
    size_t esize = rcoll_dt_size(dt);
    if (sendbuf == RCOLL_IN_PLACE)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: in-place all-to-all-v is "
                                   "not supported (use two buffers)", fn);
    if (sendcounts[me] != recvcounts[me])
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: sendcounts[%d] = %zu differs "
                                   "from recvcounts[%d] = %zu (this rank's block to itself)", fn,
                                   me, sendcounts[me], me, recvcounts[me]);
    if ((sext && !sendbuf) || (rext && !recvbuf))
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: %s is NULL with %s summing "
                                   "to %zu", fn, sext && !sendbuf ? "sendbuf" : "recvbuf",
                                   sext && !sendbuf ? "sendcounts" : "recvcounts",
                                   sext && !sendbuf ? stotal : rtotal);
    if (rcoll_api_spans_overlap(sendbuf, sext * esize, recvbuf, rext * esize))
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: sendbuf and recvbuf overlap "
                                   "(they must be disjoint)", fn);
    rcoll_coll_args_t a = {.kind = RCOLL_OP_ALLTOALLV, .src = sext ? sendbuf : NULL,
                           .dst = rext ? recvbuf : NULL, .count = 0, .dt = dt,
                           .op = RCOLL_SUM, .root = 0};
    const size_t *const v[RCOLL_V_NUM] = {sendcounts, sdispls, recvcounts, rdispls};
    return rcoll_api_queue_vcoll(comm, &a, v, call);
}

/* ------------------------------------------------------------------------------------------
 * Reduce-scatter-v
 * ---------------------------------------------------------------------------------------- */

static rcoll_status_t do_reduce_scatterv(const void *sendbuf, void *recvbuf,
                                         const size_t *recvcounts, rcoll_datatype_t dt,
                                         rcoll_op_t op, rcoll_comm_t comm,
                                         const rcoll_call_t *call)
{
    const char *fn = call->fn;
    size_t total = 0, extent = 0;
    rcoll_status_t st = check_start(comm, call, 0, dt);
    if (st == RCOLL_OK) st = rcoll_api_check_op(comm, fn, dt, op);
    if (st == RCOLL_OK)
        st = check_v(comm, fn, "recvcounts", recvcounts, NULL, NULL, &total, &extent);
    if (st != RCOLL_OK) return st;
    int me = comm->rank;
    size_t esize = rcoll_dt_size(dt), mine = recvcounts[me], before = 0;
    for (int i = 0; i < me; i++) before += recvcounts[i];
    if (total && !sendbuf)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: sendbuf is NULL with "
                                   "recvcounts summing to %zu (use RCOLL_IN_PLACE to reduce in "
                                   "place)", fn, total);
    if (total && sendbuf == RCOLL_IN_PLACE && !recvbuf)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: recvbuf is NULL in place "
                                   "(it holds the input)", fn);
    if (sendbuf == RCOLL_IN_PLACE) sendbuf = recvbuf;
    if (mine && !recvbuf)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: recvbuf is NULL with "
                                   "recvcounts[%d] = %zu", fn, me, mine);
    int own_block = total && (const char *)recvbuf == (const char *)sendbuf + before * esize;
    if (total && sendbuf != recvbuf && !own_block &&
        rcoll_api_spans_overlap(sendbuf, total * esize, recvbuf, mine * esize))
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: recvbuf overlaps sendbuf but "
                                   "is neither sendbuf (in place) nor this rank's block of it",
                                   fn);
    rcoll_coll_args_t a = {.kind = RCOLL_OP_REDUCE_SCATTERV, .src = sendbuf, .dst = recvbuf,
                           .count = total, .dt = dt, .op = op, .root = 0};
    const size_t *const v[RCOLL_V_NUM] = {recvcounts, NULL, NULL, NULL};
    return rcoll_api_queue_vcoll(comm, &a, v, call);
}

static rcoll_status_t do_gather(const void *sendbuf, void *recvbuf, size_t count,
                                rcoll_datatype_t dt, int root, rcoll_comm_t comm,
                                const rcoll_call_t *call)
{
    return do_rooted(RCOLL_OP_GATHER, sendbuf, recvbuf, count, dt, root, comm, call);
}

static rcoll_status_t do_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                 rcoll_datatype_t dt, int root, rcoll_comm_t comm,
                                 const rcoll_call_t *call)
{
    return do_rooted(RCOLL_OP_SCATTER, sendbuf, recvbuf, count, dt, root, comm, call);
}

/* ------------------------------------------------------------------------------------------
 * The entry points: one line a collective, each giving its blocking, nonblocking and
 * stream-ordered forms from its do_ function (RCOLL_API_ENTRIES, api_int.h).
 * ---------------------------------------------------------------------------------------- */

#define RCOLL_V_COLLECTIVES(X)                                                                \
    X(gather,                                                                                 \
      (const void *sendbuf, void *recvbuf, size_t count, rcoll_datatype_t dt, int root),      \
      (sendbuf, recvbuf, count, dt, root))                                                    \
    X(scatter,                                                                                \
      (const void *sendbuf, void *recvbuf, size_t count, rcoll_datatype_t dt, int root),      \
      (sendbuf, recvbuf, count, dt, root))                                                    \
    X(allgatherv,                                                                             \
      (const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,        \
       const size_t *displs, rcoll_datatype_t dt),                                            \
      (sendbuf, sendcount, recvbuf, recvcounts, displs, dt))                                  \
    X(alltoallv,                                                                              \
      (const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,   \
       const size_t *recvcounts, const size_t *rdispls, rcoll_datatype_t dt),                 \
      (sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dt))                       \
    X(reduce_scatterv,                                                                        \
      (const void *sendbuf, void *recvbuf, const size_t *recvcounts, rcoll_datatype_t dt,     \
       rcoll_op_t op),                                                                        \
      (sendbuf, recvbuf, recvcounts, dt, op))

RCOLL_V_COLLECTIVES(RCOLL_API_ENTRIES)

