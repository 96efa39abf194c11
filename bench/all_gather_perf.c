/*
 * all_gather_perf.c - nccl-tests-compatible benchmark of rcoll_allgather.
 * Each rank contributes sendcount elements and every rank receives all n blocks in rank order.
 * The row's nominal count is split over the ranks (sendcount = count / n), as nccl-tests does.
 * In place passes sendbuf = recvbuf + rank x sendcount: the rank's block is already in place.
 */
#include "perf_common.h"

static void ag_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    size_t per = count / (size_t)nranks;
    *sz = (perf_sizes_t){.send_count = per, .recv_count = per * (size_t)nranks,
                         .param_count = per, .send_inplace_off = (size_t)rank * per,
                         .recv_inplace_off = 0};
}

static rcoll_status_t ag_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    return rcoll_allgather(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->comm);
}

static rcoll_status_t ag_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                               rcoll_request_t *req)
{
    return rcoll_iallgather(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->comm, req);
}

/* Rank r's block holds value(r, r x sendcount + k): every element of the result is distinct. */
static void ag_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    size_t per = o->sz.send_count;
    (void)recvbuf;
    perf_fill_input(sendbuf, per, o->dtype, o->op, o->rank, o->nranks, (size_t)o->rank * per);
}

static size_t ag_expect(const perf_op_t *o, void *expected)
{
    size_t per = o->sz.send_count;
    for (int r = 0; r < o->nranks; r++)
        perf_fill_input(perf_elem(expected, (size_t)r * per, o->dtype), per, o->dtype, o->op, r,
                        o->nranks, (size_t)r * per);
    return o->sz.recv_count;
}

static const perf_coll_t all_gather_coll = {
    .name = "all_gather_perf",
    .reducing = 0,
    .rooted = 0,
    .in_place = PERF_IN_PLACE_CHECKED,
    .bus_factor = perf_bus_factor_ring,
    .sizes = ag_sizes,
    .run = ag_run,
    .start = ag_start,
    .fill = ag_fill,
    .expect = ag_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &all_gather_coll);
}
