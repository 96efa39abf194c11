/*
 * broadcast_perf.c - nccl-tests-compatible benchmark of rcoll_bcast.
 * The root's count elements reach every rank.  nccl-tests' out-of-place column broadcasts from
 * the root's sendbuf into every recvbuf, but rcoll_bcast works in one buffer only.  So, out of
 * place, the root's input is copied into its recvbuf by the fill callback, before the timed
 * region (and before each check), and the timed operation is rcoll_bcast on recvbuf alone:
 * the numbers measure the broadcast, never that local copy.  In place is the same call on the
 * one buffer, where every rank first wrote its own input (non-roots' values differ from the
 * root's, so an element the broadcast failed to write is counted wrong).
 */
#include <string.h>

#include "perf_common.h"

static void bc_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    (void)nranks;
    (void)rank;
    *sz = (perf_sizes_t){.send_count = count, .recv_count = count, .param_count = count,
                         .send_inplace_off = 0, .recv_inplace_off = 0};
}

static rcoll_status_t bc_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    (void)sendbuf; /* staged into recvbuf by bc_fill on the root */
    return rcoll_bcast(recvbuf, o->sz.param_count, o->dtype, o->root, o->comm);
}

static rcoll_status_t bc_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                               rcoll_request_t *req)
{
    (void)sendbuf;
    return rcoll_ibcast(recvbuf, o->sz.param_count, o->dtype, o->root, o->comm, req);
}

static void bc_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    size_t n = o->sz.send_count;
    perf_fill_input(sendbuf, n, o->dtype, o->op, o->rank, o->nranks, 0);
    if (!o->in_place && o->rank == o->root)
        memcpy(recvbuf, sendbuf, n * perf_dtype_size(o->dtype));
}

static size_t bc_expect(const perf_op_t *o, void *expected)
{
    perf_fill_input(expected, o->sz.recv_count, o->dtype, o->op, o->root, o->nranks, 0);
    return o->sz.recv_count;
}

static const perf_coll_t broadcast_coll = {
    .name = "broadcast_perf",
    .reducing = 0,
    .rooted = 1,
    .in_place = PERF_IN_PLACE_CHECKED,
    .bus_factor = perf_bus_factor_one,
    .sizes = bc_sizes,
    .run = bc_run,
    .start = bc_start,
    .fill = bc_fill,
    .expect = bc_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &broadcast_coll);
}
