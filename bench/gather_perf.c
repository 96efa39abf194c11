/*
 * gather_perf.c - nccl-tests-compatible benchmark of rcoll_gather.
 * Each rank sends sendcount elements; the root receives all n blocks in rank order.  The
 * row's nominal count is split over the ranks (sendcount = count / n), as nccl-tests does, and
 * busbw = algbw x (n-1)/n (the root's link carries all but its own block).  In place passes
 * sendbuf = recvbuf + rank x sendcount (on the root: its block already in place).  Only the
 * root's output is checked (recvbuf is not significant elsewhere).
 */
#include "perf_common.h"

static void ga_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    size_t per = count / (size_t)nranks;
    *sz = (perf_sizes_t){.send_count = per, .recv_count = per * (size_t)nranks,
                         .param_count = per, .send_inplace_off = (size_t)rank * per,
                         .recv_inplace_off = 0};
}

static rcoll_status_t ga_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    return rcoll_gather(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->root, o->comm);
}

static rcoll_status_t ga_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                               rcoll_request_t *req)
{
    return rcoll_igather(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->root, o->comm, req);
}

/* Rank r's block holds value(r, r x sendcount + k): every element of the result is distinct. */
static void ga_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    size_t per = o->sz.send_count;
    (void)recvbuf;
    perf_fill_input(sendbuf, per, o->dtype, o->op, o->rank, o->nranks, (size_t)o->rank * per);
}

static size_t ga_expect(const perf_op_t *o, void *expected)
{
    size_t per = o->sz.send_count;
    if (o->rank != o->root) return 0;
    for (int r = 0; r < o->nranks; r++)
        perf_fill_input(perf_elem(expected, (size_t)r * per, o->dtype), per, o->dtype, o->op, r,
                        o->nranks, (size_t)r * per);
    return o->sz.recv_count;
}

static const perf_coll_t gather_coll = {
    .name = "gather_perf",
    .reducing = 0,
    .rooted = 1,
    .in_place = PERF_IN_PLACE_CHECKED,
    .bus_factor = perf_bus_factor_ring,
    .sizes = ga_sizes,
    .run = ga_run,
    .start = ga_start,
    .fill = ga_fill,
    .expect = ga_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &gather_coll);
}
