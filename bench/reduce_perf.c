/*
 * reduce_perf.c - nccl-tests-compatible benchmark of rcoll_reduce.
 * The element-wise reduction of every rank's sendbuf lands in the root's recvbuf; only the
 * root's output is checked (other ranks' recvbuf is undefined).  In place, the root passes
 * RCOLL_IN_PLACE and the other ranks pass their one buffer as both sendbuf and recvbuf, as
 * nccl-tests does (rcoll ignores recvbuf off the root).
 */
#include "perf_common.h"

static void rd_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    (void)nranks;
    (void)rank;
    *sz = (perf_sizes_t){.send_count = count, .recv_count = count, .param_count = count,
                         .send_inplace_off = 0, .recv_inplace_off = 0};
}

static const void *rd_send_arg(const perf_op_t *o, const void *sendbuf)
{
    return o->in_place && o->rank == o->root ? RCOLL_IN_PLACE : sendbuf;
}

static rcoll_status_t rd_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    return rcoll_reduce(rd_send_arg(o, sendbuf), recvbuf, o->sz.param_count, o->dtype, o->op,
                        o->root, o->comm);
}

static rcoll_status_t rd_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                               rcoll_request_t *req)
{
    return rcoll_ireduce(rd_send_arg(o, sendbuf), recvbuf, o->sz.param_count, o->dtype, o->op,
                         o->root, o->comm, req);
}

static void rd_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    (void)recvbuf;
    perf_fill_input(sendbuf, o->sz.send_count, o->dtype, o->op, o->rank, o->nranks, 0);
}

static size_t rd_expect(const perf_op_t *o, void *expected)
{
    if (o->rank != o->root)
        return 0;
    perf_fill_reduced(expected, o->sz.recv_count, o->dtype, o->op, o->nranks, 0);
    return o->sz.recv_count;
}

static const perf_coll_t reduce_coll = {
    .name = "reduce_perf",
    .reducing = 1,
    .rooted = 1,
    .in_place = PERF_IN_PLACE_CHECKED,
    .bus_factor = perf_bus_factor_one,
    .sizes = rd_sizes,
    .run = rd_run,
    .start = rd_start,
    .fill = rd_fill,
    .expect = rd_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &reduce_coll);
}
