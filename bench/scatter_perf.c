/*
 * scatter_perf.c - nccl-tests-compatible benchmark of rcoll_scatter.
 * The root's sendbuf holds n blocks of recvcount elements; block r lands in rank r's recvbuf.
 * The row's nominal count is split over the ranks (recvcount = count / n), as nccl-tests does,
 * and busbw = algbw x (n-1)/n (the root's link carries all but its own block).  In place
 * passes recvbuf = sendbuf + rank x recvcount (on the root: its block stays where it is).
 * The root fills block r with value(r, r x recvcount + k); the other ranks fill their (not
 * significant) sendbuf with values of no rank, so an in-place block the scatter failed to
 * write is counted wrong.
 */
#include "perf_common.h"

static void sc_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    size_t per = count / (size_t)nranks;
    *sz = (perf_sizes_t){.send_count = per * (size_t)nranks, .recv_count = per,
                         .param_count = per, .send_inplace_off = 0,
                         .recv_inplace_off = (size_t)rank * per};
}

static rcoll_status_t sc_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    return rcoll_scatter(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->root, o->comm);
}

static rcoll_status_t sc_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                               rcoll_request_t *req)
{
    return rcoll_iscatter(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->root, o->comm,
                          req);
}

static void sc_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    size_t per = o->sz.recv_count;
    (void)recvbuf;
    if (o->rank != o->root) {
        perf_fill_input(sendbuf, o->sz.send_count, o->dtype, o->op, o->nranks, o->nranks, 0);
        return;
    }
    for (int r = 0; r < o->nranks; r++)
        perf_fill_input(perf_elem(sendbuf, (size_t)r * per, o->dtype), per, o->dtype, o->op, r,
                        o->nranks, (size_t)r * per);
}

static size_t sc_expect(const perf_op_t *o, void *expected)
{
    size_t per = o->sz.recv_count;
    perf_fill_input(expected, per, o->dtype, o->op, o->rank, o->nranks, (size_t)o->rank * per);
    return per;
}

static const perf_coll_t scatter_coll = {
    .name = "scatter_perf",
    .reducing = 0,
    .rooted = 1,
    .in_place = PERF_IN_PLACE_CHECKED,
    .bus_factor = perf_bus_factor_ring,
    .sizes = sc_sizes,
    .run = sc_run,
    .start = sc_start,
    .fill = sc_fill,
    .expect = sc_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &scatter_coll);
}
