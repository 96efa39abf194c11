/*
 * sched.c - pure communication schedules (no I/O, no transport, no datatypes).
 *
 * Ring all-reduce, per loop over n*chunk elements split into n blocks (rank r, n ranks):
 *
 *   step 0            send blk r                                  (from src)
 *   step 1 .. n-2     recv blk (r-s), reduce into dst, send it     reduce-scatter
 *   step n-1          recv blk (r+1), reduce FINAL, send it
 *   step n .. 2n-3    recv blk (r-s) into dst, send it              all-gather
 *   step 2n-2         recv blk (r+2) into dst
 *
 *   2n-1 steps per loop; each rank sends and receives 2(n-1)/n of the data.
 *
 *   The all-gather receives land directly in dst: the block it overwrites was sent at step
 *   s-n, and that send's data was consumed by the next rank before the chain of n-1 hops
 *   that produces this step's data could start, so no explicit wait is needed.
 *
 * Chain broadcast along the ring from root (position p = (r - root) mod n), one step per chunk:
 *   p = 0: send chunk from buf; 0 < p < n-1: receive into buf, forward; p = n-1: receive.
 *
 * Recursive doubling, p = largest power of two <= n, e = n - p:
 *
 *   fold-in   ranks r < 2e: even r sends its vector to r+1, which reduces it    (1 step)
 *   doubling  the p remaining ranks, virtual rank v, for k < log2 p:
 *             exchange the whole vector with v ^ 2^k and reduce                 (log2 p steps)
 *   fold-out  odd r < 2e send the result back to r-1                            (1 step)
 *
 *   Each exchange is pipelined in chunks: A = send chunk i, B = receive chunk i and reduce
 *   it into dst; sends lead by two chunks (A0 A1 B0 A2 B1 ...).  B must wait until A's send
 *   of the same chunk is complete, since it overwrites what A reads.  Latency-optimal for
 *   small vectors; for 2 ranks it moves as few bytes as the ring with one dependent hop.
 *
 * Ring all-gather (blocks of c elements, own block already in dst), per chunk loop:
 *   step 0: send own block r; steps 1..n-2: receive block (r-s) into dst, forward it;
 *   step n-1: receive block (r+1).                                      n-1 hops, (n-1)/n
 *
 * Ring reduce-scatter (rank r ends with block r), per chunk loop:
 *   step 0: send src block (r-1); steps 1..n-2: receive block (r-1-s) into staging, add the
 *   local src block in the slot, forward the slot; step n-1: receive block r, reduce FINAL
 *   into dst (after step 0's send is done: in place, dst's start is src block 0).
 *                                                                       n-1 hops, (n-1)/n
 *
 * Chain reduce to root (position p = (r - root - 1) mod n, root last), one step per chunk:
 *   p = 0 sends its chunk; 0 < p < n-1 receive, add own, forward from the slot; the root
 *   receives and reduces FINAL into dst.
 *
 * Double binary tree all-reduce (algo/tree.c builds the trees): tree 0 reduces and then
 * broadcasts elements [0, count/2), tree 1 the rest, chunk by chunk; every rank is interior
 * in at most one tree, so both halves move at full link speed.  Up, per chunk and tree:
 *   leaf: send src to parent | one child: receive, add src into dst, send dst up (root: FINAL)
 *   two children: receive c0 and add src into dst; receive c1, add into dst, send dst up
 * Down: the root sends dst to each child; others receive into dst and forward to children.
 * All up steps (chunks interleaved across the two trees) precede all down steps.
 *                                                         2 depth hops + chunks, ~S/2 per link
 *
 * Pairwise all-to-all, rounds k = 1..n-1: send src block (r+k) to r+k, receive block (r-k)
 * from r-k into dst, chunk by chunk (A0 B0 A1 B1 ...).  The own block is copied by the
 * caller.
 *
 * Uneven blocks (the "v" collectives) reuse these patterns with a size per block:
 *   ring all-gather-v / reduce-scatter-v: as above, loop L carries chunk L of every block;
 *     a block with fewer chunks travels as empty messages in the later loops (both ends
 *     compute the sizes from the same counts array, so they always agree);
 *   pairwise all-to-all-v: round k sends max(1, chunks) pieces to r+k and receives as many as
 *     its own recvcount says from r-k, interleaved; each rank pads its rounds to its own
 *     largest pair with steps that do nothing.  A pair's last piece carries a distinct tag
 *     (step.more = 0), so counts that disagree between the two ends fail on a tag or a size.
 *
 * Linear gather to root (n-1 hops into one rank, (n-1)/n of the data through the root's link):
 *   root: send an empty message to every other rank, then receive chunk L of every rank's
 *         block, L = 0, 1, ... (ranks interleaved, so all senders progress together);
 *   other: send its chunks to the root, then receive the root's empty message.
 * Linear scatter from root: the mirror: every other rank first sends the root an empty
 *   message and then receives its chunks; the root sends chunk L to every rank per loop and
 *   receives the empty messages last.  The empty messages make every rank receive at least
 *   one message of the call (signatures are checked on receipt, core/sig.h).
 */
#include <stdint.h>

#include "algo/sched.h"
#include "algo/tree.h"

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

/* The closing message of a chain (broadcast, reduce).  A chain's first rank only sends, so on
 * its own it could finish a call that its peers made differently without noticing (the core
 * checks calls through the tags of the messages a rank receives, core/sig.h).  So the last
 * rank of the chain sends an empty message to the first (its ring successor) as its first
 * step, and the first receives it as its last: every rank receives at least one message of
 * every call, and the first waits only for the last to have entered the call. */
static uint64_t chain_close_steps(const rcoll_sched_t *s, int pos)
{
    return s->nloops && (pos == 0 || pos == s->nranks - 1) ? 1 : 0;
}

/* Step *k of a chain at position pos: 1 when it is the closing step (filled in st); otherwise
 * *k becomes the data step's number. */
static int chain_close(const rcoll_sched_t *s, int pos, uint64_t *k, rcoll_step_t *st)
{
    int n = s->nranks;
    int last = pos == n - 1, first = pos == 0;
    if (!(last && *k == 0) && !(first && *k == s->nloops)) {
        if (last) (*k)--;
        return 0;
    }
    st->has_recv = first;
    st->has_send = last;
    st->recv_peer = (s->rank - 1 + n) % n;
    st->send_peer = (s->rank + 1) % n;
    st->act = RCOLL_ACT_NONE;
    st->red_buf = RCOLL_BUF_SRC;
    st->send_buf = RCOLL_BUF_SRC;
    st->wait_send_step = -1;
    st->off = st->doff = 0;
    st->count = 0;
    return 1;
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
    s->nsteps = s->nloops + chain_close_steps(s, ((rank - root) % nranks + nranks) % nranks);
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
        st->red_buf = RCOLL_BUF_SRC;
        st->recv_peer = st->send_peer = 0;
        ring_block(s, loop, 0, &st->off, &st->count);
        return;
    }
    int blk = ((s->rank - step) % n + n) % n;
    ring_block(s, loop, blk, &st->off, &st->count);
    st->recv_peer = (s->rank - 1 + n) % n;
    st->send_peer = (s->rank + 1) % n;
    st->red_buf = RCOLL_BUF_SRC;
    st->has_recv = step > 0;
    st->has_send = step < 2 * n - 2;
    st->send_buf = step == 0 ? RCOLL_BUF_SRC : RCOLL_BUF_DST;
    if (step == 0)
        st->act = RCOLL_ACT_NONE;
    else if (step < n - 1)
        st->act = RCOLL_ACT_REDUCE;
    else if (step == n - 1)
        st->act = RCOLL_ACT_REDUCE_FINAL;
    else
        st->act = RCOLL_ACT_DIRECT;
}

static void chain_bcast_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks;
    int pos = ((s->rank - s->root) % n + n) % n;
    if (chain_close(s, pos, &k, st)) return;
    st->off = (size_t)(k * s->chunk);
    size_t left = s->count - st->off;
    st->count = left < s->chunk ? left : s->chunk;
    st->has_recv = pos > 0;
    st->has_send = pos < n - 1;
    st->act = pos > 0 ? RCOLL_ACT_DIRECT : RCOLL_ACT_NONE;
    st->send_buf = RCOLL_BUF_DST;
    st->red_buf = RCOLL_BUF_SRC;
    st->wait_send_step = -1;
    st->recv_peer = (s->rank - 1 + n) % n;
    st->send_peer = (s->rank + 1) % n;
}


/* ---------------------------------------------------------------------------------------
 * Recursive doubling
 * ------------------------------------------------------------------------------------- */

static int rd_real_rank(int v, int extra) { return v < extra ? 2 * v + 1 : v + extra; }

void rcoll_sched_rd_allreduce(rcoll_sched_t *s, int nranks, int rank, size_t count,
                              size_t chunk_elems)
{
    s->kind = RCOLL_SCHED_RD_ALLREDUCE;
    s->nranks = nranks;
    s->rank = rank;
    s->root = 0;
    s->count = count;
    s->chunk = chunk_elems ? chunk_elems : 1;
    s->nchunks = count ? div_up(count, s->chunk) : 0;
    s->pof2 = 1;
    s->log2p = 0;
    while (s->pof2 * 2 <= nranks) {
        s->pof2 *= 2;
        s->log2p++;
    }
    s->extra = nranks - s->pof2;
    s->nloops = 1;
    s->steps_per_loop = 0;
    int folded = rank < 2 * s->extra;
    int active = !folded || (rank % 2 == 1);
    s->seg_in = folded ? s->nchunks : 0;
    s->seg_rd = (active && nranks > 1) ? (uint64_t)s->log2p * 2 * s->nchunks : 0;
    uint64_t seg_out = folded ? s->nchunks : 0;
    s->nsteps = count && nranks > 1 ? s->seg_in + s->seg_rd + seg_out : 0;
}

int rcoll_sched_rd_partners(int nranks, int rank, int *peers)
{
    int pof2 = 1, log2p = 0, np = 0;
    while (pof2 * 2 <= nranks) {
        pof2 *= 2;
        log2p++;
    }
    int extra = nranks - pof2;
    if (rank < 2 * extra) {
        peers[np++] = rank % 2 ? rank - 1 : rank + 1;
        if (rank % 2 == 0) return np;
    }
    int v = rank < 2 * extra ? rank / 2 : rank - extra;
    for (int k = 0; k < log2p; k++) peers[np++] = rd_real_rank(v ^ (1 << k), extra);
    return np;
}

/* Position of A(i) (send of chunk i) within one exchange of m chunks, sends leading by 2. */
static uint64_t rd_send_pos(uint64_t i, uint64_t m)
{
    uint64_t lead = m < 2 ? m : 2;
    return i < lead ? i : lead + 2 * (i - lead) + 1;
}

static void rd_chunk(const rcoll_sched_t *s, uint64_t i, rcoll_step_t *st)
{
    st->off = (size_t)(i * s->chunk);
    size_t left = s->count - st->off;
    st->count = left < s->chunk ? left : s->chunk;
}

static void rd_allreduce_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int r = s->rank, extra = s->extra;
    uint64_t m = s->nchunks;
    int folded = r < 2 * extra;
    st->has_recv = st->has_send = 0;
    st->act = RCOLL_ACT_NONE;
    st->red_buf = RCOLL_BUF_SRC;
    st->send_buf = RCOLL_BUF_DST;
    st->wait_send_step = -1;
    st->recv_peer = st->send_peer = -1;
    if (k < s->seg_in) { /* fold-in */
        rd_chunk(s, k, st);
        if (r % 2 == 0) {
            st->has_send = 1;
            st->send_peer = r + 1;
            st->send_buf = RCOLL_BUF_SRC;
        } else {
            st->has_recv = 1;
            st->recv_peer = r - 1;
            st->act = RCOLL_ACT_REDUCE;
        }
        return;
    }
    k -= s->seg_in;
    if (k < s->seg_rd) { /* doubling */
        uint64_t step = k / (2 * m), j = k % (2 * m);
        int v = folded ? r / 2 : r - extra;
        int partner = rd_real_rank(v ^ (1 << step), extra);
        /* Until something was reduced into dst, the local data is still in src. */
        rcoll_sched_buf_t cur = (step == 0 && !folded) ? RCOLL_BUF_SRC : RCOLL_BUF_DST;
        uint64_t lead = m < 2 ? m : 2, i;
        int is_send;
        if (j < lead) {
            is_send = 1;
            i = j;
        } else if (j - lead < 2 * (m - lead)) {
            is_send = (j - lead) % 2 == 1;
            i = (j - lead) / 2 + (is_send ? lead : 0);
        } else {
            is_send = 0;
            i = (m - lead) + (j - lead - 2 * (m - lead));
        }
        rd_chunk(s, i, st);
        if (is_send) {
            st->has_send = 1;
            st->send_peer = partner;
            st->send_buf = cur;
        } else {
            st->has_recv = 1;
            st->recv_peer = partner;
            st->red_buf = cur;
            st->act = step + 1 == (uint64_t)s->log2p ? RCOLL_ACT_REDUCE_FINAL : RCOLL_ACT_REDUCE;
            st->wait_send_step =
                (int64_t)(s->seg_in + step * 2 * m + rd_send_pos(i, m));
        }
        return;
    }
    k -= s->seg_rd; /* fold-out */
    rd_chunk(s, k, st);
    if (r % 2 == 1) {
        st->has_send = 1;
        st->send_peer = r - 1;
    } else {
        st->has_recv = 1;
        st->recv_peer = r + 1;
        st->act = RCOLL_ACT_DIRECT;
    }
}

/* ---------------------------------------------------------------------------------------
 * Block schedules: all-gather, reduce-scatter, chain reduce, all-to-all
 * ------------------------------------------------------------------------------------- */

static void sched_base(rcoll_sched_t *s, rcoll_sched_kind_t kind, int nranks, int rank,
                       int root, size_t count, size_t chunk_elems)
{
    s->kind = kind;
    s->nranks = nranks;
    s->rank = rank;
    s->root = root;
    s->count = count;
    s->chunk = chunk_elems ? chunk_elems : 1;
    s->nchunks = count ? div_up(count, s->chunk) : 0;
    s->pof2 = s->log2p = s->extra = 0;
    s->seg_in = s->seg_rd = 0;
    s->vcount = s->vdispl = s->rcount = s->rdispl = NULL;
}

void rcoll_sched_ring_allgather(rcoll_sched_t *s, int nranks, int rank, size_t blockcount,
                                size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_RING_ALLGATHER, nranks, rank, 0, blockcount, chunk_elems);
    s->nloops = nranks > 1 ? s->nchunks : 0;
    s->steps_per_loop = (uint32_t)nranks;
    s->nsteps = s->nloops * s->steps_per_loop;
}

void rcoll_sched_ring_reduce_scatter(rcoll_sched_t *s, int nranks, int rank, size_t blockcount,
                                     size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_RING_REDUCE_SCATTER, nranks, rank, 0, blockcount, chunk_elems);
    s->nloops = nranks > 1 ? s->nchunks : 0;
    s->steps_per_loop = (uint32_t)nranks;
    s->nsteps = s->nloops * s->steps_per_loop;
}

void rcoll_sched_chain_reduce(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                              size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_CHAIN_REDUCE, nranks, rank, root, count, chunk_elems);
    s->nloops = nranks > 1 ? s->nchunks : 0;
    s->steps_per_loop = 1;
    s->nsteps = s->nloops + chain_close_steps(s, ((rank - root - 1) % nranks + nranks) % nranks);
}

void rcoll_sched_pairwise_alltoall(rcoll_sched_t *s, int nranks, int rank, size_t blockcount,
                                   size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_PAIRWISE_ALLTOALL, nranks, rank, 0, blockcount, chunk_elems);
    s->nloops = nranks > 1 ? (uint64_t)(nranks - 1) : 0;
    s->steps_per_loop = (uint32_t)(2 * s->nchunks);
    s->nsteps = s->nloops * s->steps_per_loop;
}

/* ---------------------------------------------------------------------------------------
 * Rooted and uneven collectives
 * ------------------------------------------------------------------------------------- */

void rcoll_sched_linear_gather(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                               size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_LINEAR_GATHER, nranks, rank, root, count, chunk_elems);
    s->nloops = nranks > 1 ? s->nchunks : 0;
    s->steps_per_loop = rank == root ? (uint32_t)(nranks - 1) : 1;
    /* root: n-1 empty sends, then a receive per rank per chunk; other: its chunks, then one
     * empty receive */
    s->nsteps = s->nloops ? (s->nloops + 1) * s->steps_per_loop : 0;
}

void rcoll_sched_linear_scatter(rcoll_sched_t *s, int nranks, int rank, int root, size_t count,
                                size_t chunk_elems)
{
    rcoll_sched_linear_gather(s, nranks, rank, root, count, chunk_elems);
    s->kind = RCOLL_SCHED_LINEAR_SCATTER;
}

/* Chunks of a block of c elements (at least 1: an empty block is one empty message). */
static uint64_t block_chunks(size_t c, size_t chunk) { return c ? div_up(c, chunk) : 1; }

/* Chunk i of a block of c elements at displacement d: its offset and count (0 past the end;
 * the offset of an empty piece is 0, so no pointer past a buffer is ever formed). */
static void vchunk(size_t c, size_t d, uint64_t i, size_t chunk, size_t *off, size_t *cnt)
{
    uint64_t in = i * (uint64_t)chunk;
    *cnt = in < c ? (size_t)(c - in < chunk ? c - in : chunk) : 0;
    *off = *cnt ? d + (size_t)in : 0;
}

/* Loops of a ring over blocks of counts[b] elements: the largest block's chunks. */
static uint64_t vring_loops(const size_t *counts, int nranks, size_t chunk)
{
    uint64_t m = 0, total = 0;
    for (int b = 0; b < nranks; b++) {
        uint64_t c = counts[b] ? div_up(counts[b], chunk) : 0;
        if (c > m) m = c;
        total += counts[b];
    }
    return total && nranks > 1 ? m : 0;
}

void rcoll_sched_ring_allgatherv(rcoll_sched_t *s, int nranks, int rank, const size_t *counts,
                                 const size_t *displs, size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_RING_ALLGATHERV, nranks, rank, 0, 0, chunk_elems);
    s->vcount = counts;
    s->vdispl = displs;
    s->nloops = vring_loops(counts, nranks, s->chunk);
    s->steps_per_loop = (uint32_t)nranks;
    s->nsteps = s->nloops * s->steps_per_loop;
}

void rcoll_sched_ring_reduce_scatterv(rcoll_sched_t *s, int nranks, int rank,
                                      const size_t *counts, const size_t *displs,
                                      size_t chunk_elems)
{
    rcoll_sched_ring_allgatherv(s, nranks, rank, counts, displs, chunk_elems);
    s->kind = RCOLL_SCHED_RING_REDUCE_SCATTERV;
}

void rcoll_sched_pairwise_alltoallv(rcoll_sched_t *s, int nranks, int rank,
                                    const size_t *scounts, const size_t *sdispls,
                                    const size_t *rcounts, const size_t *rdispls,
                                    size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_PAIRWISE_ALLTOALLV, nranks, rank, 0, 0, chunk_elems);
    s->vcount = scounts;
    s->vdispl = sdispls;
    s->rcount = rcounts;
    s->rdispl = rdispls;
    uint64_t m = 1;
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        uint64_t a = block_chunks(scounts[p], s->chunk), b = block_chunks(rcounts[p], s->chunk);
        if (a > m) m = a;
        if (b > m) m = b;
    }
    s->nchunks = m; /* pieces per round and direction, padded to this rank's largest pair */
    s->nloops = nranks > 1 ? (uint64_t)(nranks - 1) : 0;
    s->steps_per_loop = (uint32_t)(2 * m);
    s->nsteps = s->nloops * s->steps_per_loop;
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Chunk `loop` of block b in a buffer of n blocks of s->count elements (uneven schedules:
 * of s->vcount[b] elements at s->vdispl[b]). */
static void block_chunk(const rcoll_sched_t *s, int b, uint64_t loop, size_t *off, size_t *cnt)
{
    if (s->vcount) {
        vchunk(s->vcount[b], s->vdispl[b], loop, s->chunk, off, cnt);
        return;
    }
    size_t in_block = (size_t)(loop * s->chunk);
    size_t left = s->count - in_block;
    *off = (size_t)b * s->count + in_block;
    *cnt = left < s->chunk ? left : s->chunk;
}

static void step_clear(rcoll_step_t *st)
{
    st->has_recv = st->has_send = 0;
    st->recv_peer = st->send_peer = -1;
    st->act = RCOLL_ACT_NONE;
    st->red_buf = RCOLL_BUF_SRC;
    st->send_buf = RCOLL_BUF_SRC;
    st->wait_send_step = -1;
}

static void ring_allgather_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks, r = s->rank;
    uint64_t loop = k / s->steps_per_loop;
    int step = (int)(k % s->steps_per_loop);
    step_clear(st);
    block_chunk(s, mod(r - step, n), loop, &st->off, &st->count);
    st->doff = st->off;
    st->has_recv = step > 0;
    st->recv_peer = mod(r - 1, n);
    st->act = step > 0 ? RCOLL_ACT_DIRECT : RCOLL_ACT_NONE;
    st->has_send = step < n - 1;
    st->send_peer = (r + 1) % n;
    st->send_buf = RCOLL_BUF_DST;
}

/* A reducing chain along the ring at position pos of last+1: the first sends its own data,
 * the middle ones add theirs to what arrives and forward it from the slot, the last reduces
 * into dst. */
static void chain_role(rcoll_step_t *st, int n, int r, int pos, int last)
{
    st->recv_peer = mod(r - 1, n);
    st->send_peer = (r + 1) % n;
    if (pos == 0) {
        st->has_send = 1;
        st->send_buf = RCOLL_BUF_SRC;
    } else if (pos < last) {
        st->has_recv = st->has_send = 1;
        st->act = RCOLL_ACT_REDUCE_STAGE;
        st->send_buf = RCOLL_BUF_STAGE;
    } else {
        st->has_recv = 1;
        st->act = RCOLL_ACT_REDUCE_FINAL;
    }
}

static void ring_reduce_scatter_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks, r = s->rank;
    uint64_t loop = k / s->steps_per_loop;
    int step = (int)(k % s->steps_per_loop);
    step_clear(st);
    block_chunk(s, mod(r - 1 - step, n), loop, &st->off, &st->count);
    /* only the final block is written, at dst's start (an empty piece of an uneven block: 0) */
    st->doff = st->count ? (size_t)(loop * s->chunk) : 0;
    chain_role(st, n, r, step, n - 1);
    /* In place with the result at the start of the buffer, the final write covers block 0,
     * which rank 1 sent straight from src at step 0: that send must be done. */
    if (step == n - 1) st->wait_send_step = (int64_t)(loop * s->steps_per_loop);
}

static void chain_reduce_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks, pos = mod(s->rank - s->root - 1, n);
    step_clear(st);
    if (chain_close(s, pos, &k, st)) return;
    st->off = st->doff = (size_t)(k * s->chunk);
    size_t left = s->count - st->off;
    st->count = left < s->chunk ? left : s->chunk;
    chain_role(st, n, s->rank, pos, n - 1);
}

static void pairwise_alltoall_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks, r = s->rank;
    int round = (int)(k / s->steps_per_loop) + 1;
    uint64_t j = k % s->steps_per_loop;
    uint64_t i = j / 2;
    step_clear(st);
    if (j % 2 == 0) { /* send block (r+round) to rank r+round */
        int to = (r + round) % n;
        block_chunk(s, to, i, &st->off, &st->count);
        st->doff = st->off;
        st->has_send = 1;
        st->send_peer = to;
        st->send_buf = RCOLL_BUF_SRC;
    } else { /* receive block (r-round) from rank r-round straight into dst */
        int from = mod(r - round, n);
        block_chunk(s, from, i, &st->off, &st->count);
        st->doff = st->off;
        st->has_recv = 1;
        st->recv_peer = from;
        st->act = RCOLL_ACT_DIRECT;
    }
}

static void linear_gather_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st, int scatter)
{
    int n = s->nranks, r = s->rank, root = s->root, others = n - 1;
    step_clear(st);
    st->off = st->doff = 0;
    st->count = 0;
    if (r != root) {
        /* gather: chunks to the root, then its empty message; scatter: the reverse */
        int empty = scatter ? k == 0 : k == s->nloops;
        uint64_t i = scatter ? k - 1 : k;
        if (empty) {
            st->has_send = scatter;
            st->has_recv = !scatter;
        } else {
            st->off = st->doff = (size_t)(i * s->chunk);
            size_t left = s->count - st->off;
            st->count = left < s->chunk ? left : s->chunk;
            st->has_send = !scatter;
            st->has_recv = scatter;
            st->act = scatter ? RCOLL_ACT_DIRECT : RCOLL_ACT_NONE;
        }
        st->send_peer = st->recv_peer = root;
        return;
    }
    /* the root: the empty messages first (gather) or last (scatter), the data in between */
    uint64_t data_steps = s->nloops * (uint64_t)others;
    uint64_t j = scatter ? k : k - (uint64_t)others;
    if (scatter ? k >= data_steps : k < (uint64_t)others) {
        int p = (root + 1 + (int)(scatter ? k - data_steps : k)) % n;
        st->has_send = !scatter;
        st->has_recv = scatter;
        st->send_peer = st->recv_peer = p;
        return;
    }
    int p = (root + 1 + (int)(j % (uint64_t)others)) % n;
    block_chunk(s, p, j / (uint64_t)others, &st->off, &st->count);
    st->doff = st->off;
    if (scatter) {
        st->has_send = 1;
        st->send_peer = p;
    } else {
        st->has_recv = 1;
        st->recv_peer = p;
        st->act = RCOLL_ACT_DIRECT;
    }
}

static void pairwise_alltoallv_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int n = s->nranks, r = s->rank;
    int round = (int)(k / s->steps_per_loop) + 1;
    uint64_t j = k % s->steps_per_loop, i = j / 2;
    step_clear(st);
    st->off = st->doff = 0;
    st->count = 0;
    if (j % 2 == 0) { /* piece i to rank r+round, if its block has one */
        int to = (r + round) % n;
        uint64_t m = block_chunks(s->vcount[to], s->chunk);
        if (i >= m) return;
        vchunk(s->vcount[to], s->vdispl[to], i, s->chunk, &st->off, &st->count);
        st->doff = st->off;
        st->has_send = 1;
        st->send_peer = to;
        st->more = i + 1 < m;
    } else { /* piece i from rank r-round, straight into dst */
        int from = mod(r - round, n);
        uint64_t m = block_chunks(s->rcount[from], s->chunk);
        if (i >= m) return;
        vchunk(s->rcount[from], s->rdispl[from], i, s->chunk, &st->off, &st->count);
        st->doff = st->off;
        st->has_recv = 1;
        st->recv_peer = from;
        st->act = RCOLL_ACT_DIRECT;
        st->more = i + 1 < m;
    }
}

/* ---------------------------------------------------------------------------------------
 * Double binary tree all-reduce
 * ------------------------------------------------------------------------------------- */

void rcoll_sched_dbtree_allreduce(rcoll_sched_t *s, int nranks, int rank, size_t count,
                                  size_t chunk_elems)
{
    sched_base(s, RCOLL_SCHED_DBTREE_ALLREDUCE, nranks, rank, 0, count, chunk_elems);
    s->half0 = count / 2;
    size_t halves[2] = {s->half0, count - s->half0};
    s->nsteps = 0;
    for (int t = 0; t < 2; t++) {
        rcoll_tree_node_t nd;
        int root;
        rcoll_dbtree_node(nranks, rank, t, &nd, &root);
        s->tparent[t] = nd.parent;
        s->tchild[t][0] = nd.child[0];
        s->tchild[t][1] = nd.child[1];
        s->tnchild[t] = (nd.child[0] >= 0) + (nd.child[1] >= 0);
        s->tis_root[t] = nd.parent < 0;
        s->up[t] = s->tnchild[t] == 2 ? 2 : 1;
        s->down[t] = s->tnchild[t] == 2 ? 2 : 1;
        s->tchunks[t] = (nranks > 1 && halves[t]) ? div_up(halves[t], s->chunk) : 0;
        if (s->tis_root[t] && s->tnchild[t] == 0) s->tchunks[t] = 0; /* one rank */
    }
    s->seg_in = s->tchunks[0] * s->up[0] + s->tchunks[1] * s->up[1]; /* up-phase steps */
    s->nsteps = s->seg_in + s->tchunks[0] * s->down[0] + s->tchunks[1] * s->down[1];
}

/* Step k of one phase (steps per chunk sp[t], chunks m[t]; chunks of both trees interleave). */
static void dbtree_locate(const rcoll_sched_t *s, const uint32_t *sp, uint64_t k, int *t,
                          uint64_t *chunk, uint32_t *sub)
{
    uint64_t both = s->tchunks[0] < s->tchunks[1] ? s->tchunks[0] : s->tchunks[1];
    uint64_t block = (uint64_t)sp[0] + sp[1];
    if (k < both * block) {
        *chunk = k / block;
        uint32_t j = (uint32_t)(k % block);
        *t = j < sp[0] ? 0 : 1;
        *sub = *t ? j - sp[0] : j;
        return;
    }
    k -= both * block;
    *t = s->tchunks[0] > s->tchunks[1] ? 0 : 1; /* the tree with chunks left */
    *chunk = both + k / sp[*t];
    *sub = (uint32_t)(k % sp[*t]);
}

static void dbtree_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *st)
{
    int t;
    uint64_t i;
    uint32_t sub;
    int down = k >= s->seg_in;
    dbtree_locate(s, down ? s->down : s->up, down ? k - s->seg_in : k, &t, &i, &sub);
    step_clear(st);
    size_t base = t ? s->half0 : 0, len = t ? s->count - s->half0 : s->half0;
    st->off = st->doff = base + (size_t)(i * s->chunk);
    size_t left = base + len - st->off;
    st->count = left < s->chunk ? left : s->chunk;
    int nc = s->tnchild[t], parent = s->tparent[t];
    if (!down) {
        if (nc == 0) { /* leaf: its own data goes up */
            st->has_send = 1;
            st->send_peer = parent;
            st->send_buf = RCOLL_BUF_SRC;
            return;
        }
        st->has_recv = 1;
        st->recv_peer = s->tchild[t][sub];
        st->red_buf = sub == 0 ? RCOLL_BUF_SRC : RCOLL_BUF_DST; /* own data, then the sum */
        int last = sub + 1 == (uint32_t)nc;
        st->act = last && s->tis_root[t] ? RCOLL_ACT_REDUCE_FINAL : RCOLL_ACT_REDUCE;
        if (last && !s->tis_root[t]) {
            st->has_send = 1;
            st->send_peer = parent;
            st->send_buf = RCOLL_BUF_DST;
        }
        return;
    }
    if (sub == 0 && !s->tis_root[t]) { /* receive the result from the parent */
        st->has_recv = 1;
        st->recv_peer = parent;
        st->act = RCOLL_ACT_DIRECT;
    }
    if ((int)sub < nc) {
        st->has_send = 1;
        st->send_peer = s->tchild[t][sub];
        st->send_buf = RCOLL_BUF_DST;
    }
}

void rcoll_sched_step(const rcoll_sched_t *s, uint64_t k, rcoll_step_t *step)
{
    step->doff = SIZE_MAX;
    step->more = 0;
    switch (s->kind) {
    case RCOLL_SCHED_RING_ALLREDUCE: ring_allreduce_step(s, k, step); break;
    case RCOLL_SCHED_CHAIN_BCAST: chain_bcast_step(s, k, step); break;
    case RCOLL_SCHED_RD_ALLREDUCE: rd_allreduce_step(s, k, step); break;
    case RCOLL_SCHED_RING_ALLGATHER: ring_allgather_step(s, k, step); break;
    case RCOLL_SCHED_RING_REDUCE_SCATTER: ring_reduce_scatter_step(s, k, step); break;
    case RCOLL_SCHED_CHAIN_REDUCE: chain_reduce_step(s, k, step); break;
    case RCOLL_SCHED_PAIRWISE_ALLTOALL: pairwise_alltoall_step(s, k, step); break;
    case RCOLL_SCHED_DBTREE_ALLREDUCE: dbtree_step(s, k, step); break;
    case RCOLL_SCHED_LINEAR_GATHER: linear_gather_step(s, k, step, 0); break;
    case RCOLL_SCHED_LINEAR_SCATTER: linear_gather_step(s, k, step, 1); break;
    case RCOLL_SCHED_RING_ALLGATHERV: ring_allgather_step(s, k, step); break;
    case RCOLL_SCHED_RING_REDUCE_SCATTERV: ring_reduce_scatter_step(s, k, step); break;
    case RCOLL_SCHED_PAIRWISE_ALLTOALLV: pairwise_alltoallv_step(s, k, step); break;
    case RCOLL_SCHED_OWN: s->step_fn(s, k, step); break;
    }
    if (step->doff == SIZE_MAX) step->doff = step->off;
}
