/*
 * all_reduce_perf.c - nccl-tests-compatible benchmark of rcoll_allreduce.
 * Describes the collective to the shared harness (perf_common.c): every rank's recvbuf
 * receives the reduction of all ranks' sendbuf; in place passes RCOLL_IN_PLACE.
 */
#include "perf_common.h"

/* A ring all-reduce moves 2(n-1)/n of the data over each rank's links. */
static double ar_bus_factor(int nranks)
{
    return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

static void ar_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    (void)nranks;
    (void)rank;
    *sz = (perf_sizes_t){.send_count = count, .recv_count = count, .param_count = count,
                         .send_inplace_off = 0, .recv_inplace_off = 0};
}

static rcoll_status_t ar_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    return rcoll_allreduce(o->in_place ? RCOLL_IN_PLACE : sendbuf, recvbuf, o->sz.param_count,
                           o->dtype, o->op, o->comm);
}

static rcoll_status_t ar_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                               rcoll_request_t *req)
{
    return rcoll_iallreduce(o->in_place ? RCOLL_IN_PLACE : sendbuf, recvbuf, o->sz.param_count,
                            o->dtype, o->op, o->comm, req);
}

static void ar_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    (void)recvbuf;
    perf_fill_input(sendbuf, o->sz.send_count, o->dtype, o->op, o->rank, o->nranks, 0);
}

static size_t ar_expect(const perf_op_t *o, void *expected)
{
    perf_fill_reduced(expected, o->sz.recv_count, o->dtype, o->op, o->nranks, 0);
    return o->sz.recv_count;
}

static const perf_coll_t all_reduce_coll = {
    .name = "all_reduce_perf",
    .reducing = 1,
    .rooted = 0,
    .bus_factor = ar_bus_factor,
    .sizes = ar_sizes,
    .run = ar_run,
    .start = ar_start,
    .fill = ar_fill,
    .expect = ar_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &all_reduce_coll);
}
