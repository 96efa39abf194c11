/*
 * sched.c - pure schedules for ring neighbours (no I/O, no transport, no datatypes).
 *
 * Ring all-reduce, per loop over n*chunk elements split into n blocks (rank r, n ranks):
 *
 *   step 0            send blk r                                  (from src)
 *   step 1 .. n-2     recv blk (r-s), reduce into dst, send it     reduce-scatter
 *   step n-1          recv blk (r+1), reduce FINAL, send it
 *   step n .. 2n-3    recv blk (r-s), copy into dst, send it        all-gather
 *   step 2n-2         recv blk (r+2), copy into dst
 *
 *   2n-1 steps per loop; each rank sends and receives 2(n-1)/n of the data.  The block
 *   written at all-gather step s was sent at step s-n, so that send must be complete first.
 *
 * Chain broadcast along the ring from root (position p = (r - root) mod n), one step per chunk:
 *   p = 0: send chunk from buf; 0 < p < n-1: receive into buf, forward; p = n-1: receive.
 */
#include "algo/sched.h"

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

void rcoll_sched_ring_allreduce(rcoll_sched_t *s, int nranks, int rank, size_t count,
                                size_t chunk_elems)
{
    s->kind = RCOLL_SCHED_RING_ALLREDUCE;
    s->nranks = nranks;
    s->rank = rank;
    s->root = 0;
    s->count = count;
    s->chunk = chunk_elems ? chunk_elems : 1;
    uint64_t loop_elems = (uint64_t)s->chunk * (uint64_t)nranks;
    s->nloops = count ? div_up(count, loop_elems) : 0;
    s->steps_per_loop = nranks > 1 ? (uint32_t)(2 * nranks - 1) : 1;
    s->nsteps = s->nloops * s->steps_per_loop;
}

void rcoll_sched_chain_bcast(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                             size_t chunk_elems)
{
    s->kind = RCOLL_SCHED_CHAIN_BCAST;
    s->nranks = nranks;
    s->rank = rank;
    s->root = root;
    s->count = count;
    s->chunk = chunk_elems ? chunk_elems : 1;
    s->nloops = (count && nranks > 1) ? div_up(count, s->chunk) : 0;
    s->steps_per_loop = 1;
    s->nsteps = s->nloops;
}

/* Block b of loop L: the loop's elements split as evenly as possible over n blocks. */
static void ring_block(const rcoll_sched_t *s, uint64_t loop, int b, size_t *off, size_t *cnt)
{
    uint64_t loop_elems = (uint64_t)s->chunk * (uint64_t)s->nranks;
    uint64_t base_off = loop * loop_elems;
    uint64_t left = s->count - base_off;
    uint64_t here = left < loop_elems ? left : loop_elems;
    uint64_t per = here / (uint64_t)s->nranks, rem = here % (uint64_t)s->nranks;
    uint64_t ub = (uint64_t)b;
    *off = (size_t)(base_off + ub * per + (ub < rem ? ub : rem));
    *cnt = (size_t)(per + (ub < rem ? 1 : 0));
}

static void ring_allreduce_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks;
    uint64_t loop = k / s->steps_per_loop;
    int step = (int)(k % s->steps_per_loop);
    st->wait_send_step = -1;
    if (n == 1) {
        /* One rank: the result is the input (copied for out-of-place, AVG divides by 1). */
        st->has_recv = 0;
        st->has_send = 0;
        st->act = RCOLL_ACT_NONE;
        st->send_buf = RCOLL_BUF_SRC;
        ring_block(s, loop, 0, &st->off, &st->count);
        return;
    }
    int blk = ((s->rank - step) % n + n) % n;
    ring_block(s, loop, blk, &st->off, &st->count);
    st->has_recv = step > 0;
    st->has_send = step < 2 * n - 2;
    st->send_buf = step == 0 ? RCOLL_BUF_SRC : RCOLL_BUF_DST;
    if (step == 0)
        st->act = RCOLL_ACT_NONE;
    else if (step < n - 1)
        st->act = RCOLL_ACT_REDUCE;
    else if (step == n - 1)
        st->act = RCOLL_ACT_REDUCE_FINAL;
    else {
        st->act = RCOLL_ACT_COPY;
        st->wait_send_step = (int64_t)(k - (uint64_t)n);
    }
}

static void chain_bcast_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks;
    int pos = ((s->rank - s->root) % n + n) % n;
    st->off = (size_t)(k * s->chunk);
    size_t left = s->count - st->off;
    st->count = left < s->chunk ? left : s->chunk;
    st->has_recv = pos > 0;
    st->has_send = pos < n - 1;
    st->act = pos > 0 ? RCOLL_ACT_DIRECT : RCOLL_ACT_NONE;
    st->send_buf = RCOLL_BUF_DST;
    st->wait_send_step = -1;
}

void rcoll_sched_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *step)
{
    if (s->kind == RCOLL_SCHED_RING_ALLREDUCE)
        ring_allreduce_step(s, k, step);
    else
        chain_bcast_step(s, k, step);
}
