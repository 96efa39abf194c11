/*
 * alltoall_perf.c - nccl-tests-compatible benchmark of rcoll_alltoall.
 * Block j of each rank's sendbuf (count = nominal count / n elements) goes to rank j; block i
 * of recvbuf comes from rank i.  No in-place column: nccl-tests times its in-place alltoall
 * but never checks it (the result is undefined there), and rcoll_alltoall rejects overlapping
 * buffers outright, so the in-place fields print N/A (JSON nulls) and stay out of the average.
 */
#include "perf_common.h"

static void a2a_sizes(size_t count, int nranks, int rank, perf_sizes_t *sz)
{
    size_t per = count / (size_t)nranks;
    (void)rank;
    *sz = (perf_sizes_t){.send_count = per * (size_t)nranks, .recv_count = per * (size_t)nranks,
                         .param_count = per, .send_inplace_off = 0, .recv_inplace_off = 0};
}

static rcoll_status_t a2a_run(const perf_op_t *o, const void *sendbuf, void *recvbuf)
{
    return rcoll_alltoall(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->comm);
}

static rcoll_status_t a2a_start(const perf_op_t *o, const void *sendbuf, void *recvbuf,
                                rcoll_request_t *req)
{
    return rcoll_ialltoall(sendbuf, recvbuf, o->sz.param_count, o->dtype, o->comm, req);
}

/* Block j of rank r's input holds value(r, j x count + k). */
static void a2a_fill(const perf_op_t *o, void *sendbuf, void *recvbuf)
{
    (void)recvbuf;
    perf_fill_input(sendbuf, o->sz.send_count, o->dtype, o->op, o->rank, o->nranks, 0);
}

/* So block r of rank i's output is block i of rank r's input: value(r, i x count + k). */
static size_t a2a_expect(const perf_op_t *o, void *expected)
{
    size_t per = o->sz.param_count;
    for (int r = 0; r < o->nranks; r++)
        perf_fill_input(perf_elem(expected, (size_t)r * per, o->dtype), per, o->dtype, o->op, r,
                        o->nranks, (size_t)o->rank * per);
    return o->sz.recv_count;
}

static const perf_coll_t alltoall_coll = {
    .name = "alltoall_perf",
    .reducing = 0,
    .rooted = 0,
    .in_place = PERF_IN_PLACE_NONE,
    .bus_factor = perf_bus_factor_ring,
    .sizes = a2a_sizes,
    .run = a2a_run,
    .start = a2a_start,
    .fill = a2a_fill,
    .expect = a2a_expect,
};

int main(int argc, char **argv)
{
    return perf_main(argc, argv, &alltoall_coll);
}
