/*
 * reduce_scatter_perf.c - nccl-tests-compatible benchmark of rcoll_reduce_scatter.
 * Each rank sends n x recvcount elements; rank r receives block r of the element-wise
 * reduction over ranks.  The row's nominal count is split over the ranks (recvcount =
 * count / n).  In place uses NCCL's layout: recvbuf = sendbuf + rank x recvcount, so the
 * result lands on the rank's own block of the input.
 */
#include "perf_common.h"

static void rs_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    size_t per = count / (size_t)nranks;
    *sz = (perf_sizes_t){.send_count = per * (size_t)nranks, .recv_count = per,
                         .param_count = per, .send_inplace_off = 0,
                         .recv_inplace_off = (size_t)rank * per};
}

static rcoll_status_t rs_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    return rcoll_reduce_scatter(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->op, o->comm);
}

static rcoll_status_t rs_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                               rcoll_request_t *req)
{
    return rcoll_ireduce_scatter(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->op, o->comm,
                                 req);
}

static void rs_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    (void)recvbuf;
    perf_fill_input(sendbuf, o->sz.send_count, o->dtype, o->op, o->rank, o->nranks, 0);
}

/* Block `rank` of the reduction: elements rank x recvcount .. (rank + 1) x recvcount - 1. */
static size_t rs_expect(const perf_op_t *o, void *expected)
{
    size_t per = o->sz.recv_count;
    perf_fill_reduced(expected, per, o->dtype, o->op, o->nranks, (size_t)o->rank * per);
    return per;
}

static const perf_coll_t reduce_scatter_coll = {
    .name = "reduce_scatter_perf",
    .reducing = 1,
    .rooted = 0,
    .in_place = PERF_IN_PLACE_CHECKED,
    .bus_factor = perf_bus_factor_ring,
    .sizes = rs_sizes,
    .run = rs_run,
    .start = rs_start,
    .fill = rs_fill,
    .expect = rs_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &reduce_scatter_coll);
}
