/*
 * sendrecv_perf.c - nccl-tests-compatible benchmark of rcoll_send/rcoll_recv.
 * Every rank sends count elements to (rank + 1) % n and receives as many from
 * (rank - 1 + n) % n, both in one group so the ring cannot deadlock.  There is no nonblocking
 * form (the harness issues -m operations one after another).  In place, as in nccl-tests, the
 * same buffer is sent and received into: it is timed but its content is undefined, so #wrong
 * prints N/A.
 */
#include "perf_common.h"

static void sr_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    (void)nranks;
    (void)rank;
    *sz = (perf_sizes_t){.send_count = count, .recv_count = count, .param_count = count,
                         .send_inplace_off = 0, .recv_inplace_off = 0};
}

static rcoll_status_t sr_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    int to = (o->rank + 1) % o->nranks;
    int from = (o->rank - 1 + o->nranks) % o->nranks;

    rcoll_status_t st = rcoll_group_start();
    if (RCOLL_IS_ERR(st))
        return st;
    rcoll_status_t st_p2p = rcoll_send(sendbuf, o->sz.param_count, o->dtype, to, o->comm);
    if (!RCOLL_IS_ERR(st_p2p))
        st_p2p = rcoll_recv(recvbuf, o->sz.param_count, o->dtype, from, o->comm);
    st = rcoll_group_end(); /* the group is closed even when queueing failed */
    return RCOLL_IS_ERR(st_p2p) ? st_p2p : st;
}

static void sr_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    (void)recvbuf;
    perf_fill_input(sendbuf, o->sz.send_count, o->dtype, o->op, o->rank, o->nranks, 0);
}

static size_t sr_expect(const perf_op_t *o, void *expected)
{
    int from = (o->rank - 1 + o->nranks) % o->nranks;
    perf_fill_input(expected, o->sz.recv_count, o->dtype, o->op, from, o->nranks, 0);
    return o->sz.recv_count;
}

static const perf_coll_t sendrecv_coll = {
    .name = "sendrecv_perf",
    .reducing = 0,
    .rooted = 0,
    .in_place = PERF_IN_PLACE_UNCHECKED,
    .bus_factor = perf_bus_factor_one,
    .sizes = sr_sizes,
    .run = sr_run,
    .start = NULL,
    .fill = sr_fill,
    .expect = sr_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &sendrecv_coll);
}
