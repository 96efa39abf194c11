/*
 * progress.c - drives a communicator's queued operations, in issue order, on the calling
 * thread (inside blocking calls, rcoll_test and rcoll_wait; there is no background thread).
 * Owns the deadlines: an operation that sees no progress from the peer it waits on for
 * RCOLL_TIMEOUT fails naming that peer, one without progress for RCOLL_WATCHDOG_S is reported
 * once (the watchdog: who reached it, who did not), and failures announced by the bootstrap
 * root fail every queued operation.  Does not validate arguments (api.c) or move bytes (algo/, transport/).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "core/comm.h"
#include "core/ras.h"
#include "util/log.h"
#include "util/ranks.h"
#include "util/status.h"
#include "util/time.h"

#define CTL_POLL_INTERVAL_NS 1000000ull    /* look at the control connection every 1 ms */
#define CULPRIT_GRACE_NS 300000000ull      /* wait this long for the root to name a culprit */
#define VERDICT_WAIT_NS 2500000000ull      /* after a timeout: the root decides within ~1 s */
#define CLOCK_EVERY_POLLS 16               /* fruitless polls between clock readings */

rcoll_status_t rcoll_req_alloc(rcoll_comm_t comm, rcoll_op_kind_t kind,
                               struct rcoll_request **req_p)
{
    struct rcoll_request *r = comm->free_reqs;
    if (r) {
        comm->free_reqs = r->next;
    } else {
        r = calloc(1, sizeof(*r));
        if (!r) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "request allocation failed");
    }
    /* Reset what a new operation reads before setting it; the big per-algorithm state
     * (r->aop.state) is initialised when the operation starts, so it is not cleared here. */
    r->comm = comm;
    r->next = NULL;
    r->kind = kind;
    r->src = NULL;
    r->dst = NULL;
    r->count = 0;
    r->dt = RCOLL_UINT8;
    r->op = RCOLL_SUM;
    r->root = 0;
    r->started = r->complete = 0;
    r->preset = r->status = RCOLL_OK;
    r->seq = 0;
    r->connecting = r->held = 0;
    r->nitems = r->unposted = 0;
    r->last_progress_ns = 0;
    r->alg_id = -1;
    r->stall_sent = 0;
    r->wdog_sent = 0;
    r->aop.nwant = 0;
    r->aop.waiting_peer = r->aop.err_peer = -1;
    for (int i = 0; i < RCOLL_V_NUM; i++) r->v[i] = NULL;
    r->vmove = 0;
    r->post = NULL;
    r->stage_job = NULL;
    *req_p = r;
    return RCOLL_OK;
}

/* The reduce-scatter-v's displacements are the prefix sums of its counts. */
rcoll_status_t rcoll_req_set_v(struct rcoll_request *r, const size_t *const v[RCOLL_V_NUM])
{
    rcoll_comm_t comm = r->comm;
    size_t n = (size_t)comm->nranks, need = RCOLL_V_NUM * n;
    if (r->vcap < need) {
        size_t *b = realloc(r->vbuf, need * sizeof(*b));
        if (!b) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory for %zu counts", need);
        comm->mem_bytes += (need - r->vcap) * sizeof(*b);
        r->vbuf = b;
        r->vcap = need;
    }
    for (int i = 0; i < RCOLL_V_NUM; i++) {
        size_t *d = r->vbuf + (size_t)i * n;
        if (v[i]) memcpy(d, v[i], n * sizeof(*d));
        r->v[i] = v[i] ? d : NULL;
    }
    if (r->kind == RCOLL_OP_REDUCE_SCATTERV) {
        size_t *d = r->vbuf + (size_t)RCOLL_V_DISPL * n, sum = 0;
        for (size_t i = 0; i < n; i++) {
            d[i] = sum;
            sum += r->v[RCOLL_V_COUNT][i];
        }
        r->v[RCOLL_V_DISPL] = d;
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_req_alloc_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                    struct rcoll_request **req_p)
{
    struct rcoll_request *r;
    rcoll_status_t st = rcoll_req_alloc(comm, a->kind, &r);
    if (st != RCOLL_OK) return st;
    r->src = a->src;
    r->dst = a->dst;
    r->count = a->count;
    r->dt = a->dt;
    r->op = a->op;
    r->root = a->root;
    *req_p = r;
    return RCOLL_OK;
}

void rcoll_req_enqueue(rcoll_comm_t comm, struct rcoll_request *req)
{
    /* Collectives are numbered (their tags) on every rank alike; point-to-point messages
     * carry per-peer numbers instead, since only two ranks take part. */
    req->seq = req->kind == RCOLL_OP_P2P ? 0 : comm->coll_seq++;
    if (req->kind != RCOLL_OP_P2P) rcoll_opnum_record(&comm->opnum, req->seq);
    req->next = NULL;
    if (comm->tail)
        comm->tail->next = req;
    else
        comm->head = req;
    comm->tail = req;
}

void rcoll_req_release(struct rcoll_request *req)
{
    rcoll_comm_t comm = req->comm;
    if (req->post) req->post(req, RCOLL_OK, 0); /* never finished: no copy out */
    req->post = NULL;
    req->next = comm->free_reqs;
    comm->free_reqs = req;
}

rcoll_status_t rcoll_req_finish(struct rcoll_request *r, rcoll_status_t st)
{
    rcoll_req_post_fn post = r->post;
    r->post = NULL;
    return post ? post(r, st, 1) : st;
}

/* Drop the registration of a GPUDirect point-to-point item (the transport's requests hold
 * their own references while they are in flight). */
static void p2p_unreg(rcoll_comm_t comm, rcoll_p2p_item_t *it)
{
    if (!it->mh) return;
    const rcoll_transport_ops_t *tp = comm->link.tps[it->peer];
    tp->dereg_mr(it->is_send ? comm->link.send_comms[it->peer]
                             : comm->link.recv_comms[it->peer], it->mh);
    it->mh = NULL;
}

/* Complete r, which follows prev in the queue (prev NULL: r is the head). */
static void complete_req(rcoll_comm_t comm, struct rcoll_request *prev,
                         struct rcoll_request *r, rcoll_status_t st)
{
    for (int i = 0; r->kind == RCOLL_OP_P2P && i < r->nitems; i++)
        p2p_unreg(comm, &r->items[i]);
    r->complete = 1;
    r->status = st;
    if (comm->ras) rcoll_ras_op_done(comm->ras, st);
    /* Whoever completes it (the progress thread, rcoll_test, another waiter) holds pt_lock:
     * wake the waiters that sleep, to look at theirs. */
    if (comm->pt_sleepers) pthread_cond_broadcast(&comm->pt_done_cv);
    if (prev)
        prev->next = r->next;
    else
        comm->head = r->next;
    if (comm->tail == r) comm->tail = prev;
    r->next = NULL;
}

static void complete_head(rcoll_comm_t comm, rcoll_status_t st)
{
    complete_req(comm, NULL, comm->head, st);
}

void rcoll_comm_fail(rcoll_comm_t comm, rcoll_status_t st, int culprit, const char *text)
{
    (void)culprit;
    if (comm->failed == RCOLL_OK) {
        comm->failed = st;
        rcoll_comm_set_error(comm, st, text);
        if (comm->ras) rcoll_ras_failed(comm->ras, st, text);
    }
    while (comm->head) complete_head(comm, st);
}

/* Local part of a point-to-point batch: pair sends to self with receives from self, in
 * order, and copy.  Unpaired ones are a usage error (checked before the batch runs). */
static void p2p_self_copy(rcoll_comm_t comm, struct rcoll_request *r)
{
    int si = 0, ri = 0;
    for (;;) {
        while (si < r->nitems && !(r->items[si].is_send && r->items[si].peer == comm->rank)) si++;
        while (ri < r->nitems && !(!r->items[ri].is_send && r->items[ri].peer == comm->rank)) ri++;
        if (si == r->nitems || ri == r->nitems) return;
        rcoll_p2p_item_t *a = &r->items[si++], *b = &r->items[ri++];
        size_t n = a->bytes < b->bytes ? a->bytes : b->bytes;
        if (n) memcpy(b->buf, a->buf, n);
        a->done = b->done = 1;
    }
}

/* Ring position of rank p (the chains of broadcast and reduce run on positions). */
static int ring_pos_of(const rcoll_comm_t comm, int p)
{
    for (int i = 0; comm->ring_map && i < comm->nranks; i++)
        if (comm->ring_map[i] == p) return i;
    return p;
}

/* All-gather and reduce-scatter place blocks by rank, so their rings run in rank order: when
 * the host-grouped ring differs, those neighbours are connected on first use. */
static void want_rank_ring(rcoll_comm_t comm)
{
    if (!comm->ring_map) return;
    int n = comm->nranks;
    rcoll_conn_want(comm, (comm->rank + 1) % n, 1, 0);
    rcoll_conn_want(comm, (comm->rank - 1 + n) % n, 0, 1);
}

/* Connect the peers the operation's algorithm asked for (at its start or a new phase). */
static void want_peers(rcoll_comm_t comm, struct rcoll_request *r)
{
    for (int i = 0; i < r->aop.nwant; i++)
        rcoll_conn_want(comm, r->aop.want[i].peer, r->aop.want[i].send, r->aop.want[i].recv);
    r->aop.nwant = 0;
    r->connecting = rcoll_conn_missing(comm) > 0;
}

/* What every collective's algorithm reads of the operation.  Its messages are tagged with
 * the digest of its signature, so a peer's message from a different call is refused by the
 * transport before it is used (core/sig.h); every rank on one host also announces it. */
static void aop_set(rcoll_comm_t comm, struct rcoll_request *r)
{
    r->aop.src = r->src;
    r->aop.dst = r->dst;
    r->aop.count = r->count;
    r->aop.dt = r->dt;
    r->aop.op = r->op;
    rcoll_sig_of(r, &r->sig);
    r->aop.tag = rcoll_sig_tag(&r->sig);
    if (comm->sig_area) rcoll_sig_announce(comm->sig_area, comm->rank, &r->sig);
}

/* Want a connection both ways to every other rank (root: -1) or to the root alone. */
static void want_star(rcoll_comm_t comm, int root)
{
    for (int p = 0; p < comm->nranks; p++)
        if (p != comm->rank && (root < 0 || comm->rank == root || p == root))
            rcoll_conn_want(comm, p, 1, 1);
}

/* The rooted and uneven collectives (api_v.c checked them): local copies, then the schedule
 * in *s.  Returns 1 when nothing is left to move.  Unused buffers point at used ones, so the
 * executor never offsets a NULL pointer. */
static int start_vcoll(rcoll_comm_t comm, struct rcoll_request *r, size_t chunk,
                       rcoll_sched_t *s)
{
    int n = comm->nranks, me = comm->rank;
    size_t esize = rcoll_dt_size(r->dt);
    const size_t *cnt = r->v[RCOLL_V_COUNT], *dsp = r->v[RCOLL_V_DISPL];
    switch (r->kind) {
    case RCOLL_OP_GATHER:
    case RCOLL_OP_SCATTER: {
        int gather = r->kind == RCOLL_OP_GATHER, root = me == r->root;
        size_t blk = r->count * esize;
        if (r->count == 0) return 1;
        if (root) { /* the root's own block: a local copy, unless already in place */
            char *all = gather ? (char *)r->dst : (char *)r->src;
            const char *from = gather ? r->src : all + (size_t)me * blk;
            char *to = gather ? all + (size_t)me * blk : (char *)r->dst;
            if (from != to) memcpy(to, from, blk);
        }
        if (n == 1) return 1;
        if (!r->dst) r->dst = (void *)r->src;
        if (!r->src) r->src = r->dst;
        if (gather)
            rcoll_sched_linear_gather(s, n, me, r->root, r->count, chunk);
        else
            rcoll_sched_linear_scatter(s, n, me, r->root, r->count, chunk);
        want_star(comm, r->root);
        return 0;
    }
    case RCOLL_OP_ALLGATHERV: {
        if (r->count == 0) return 1; /* the sum of the counts */
        char *own = (char *)r->dst + dsp[me] * esize;
        if (cnt[me] && r->src != own) memcpy(own, r->src, cnt[me] * esize);
        if (n == 1) return 1;
        rcoll_sched_ring_allgatherv(s, n, me, cnt, dsp, chunk);
        r->src = r->dst; /* every send reads the gathered buffer */
        want_rank_ring(comm);
        return 0;
    }
    case RCOLL_OP_REDUCE_SCATTERV:
        if (r->count == 0) return 1;
        if (!r->dst) r->dst = r->barrier_buf; /* an empty block of its own */
        if (r->src == r->dst && dsp[me]) {
            /* in place with the result at the start: computed on the own block (which only
             * this rank's last step reads), moved to the start when done */
            r->vmove = dsp[me];
            r->dst = (char *)r->dst + dsp[me] * esize;
        }
        if (n == 1) {
            const char *from = (const char *)r->src + dsp[me] * esize;
            if (from != r->dst) memmove(r->dst, from, cnt[me] * esize);
            if (r->op == RCOLL_AVG) rcoll_reduce_avg_finish(r->dst, cnt[me], r->dt, 1);
            return 1;
        }
        rcoll_sched_ring_reduce_scatterv(s, n, me, cnt, dsp, chunk);
        want_rank_ring(comm);
        return 0;
    case RCOLL_OP_ALLTOALLV: {
        /* Never a no-op: a rank cannot know that every other rank's counts are 0 too. */
        size_t own = cnt[me] * esize;
        if (own)
            memcpy((char *)r->dst + r->v[RCOLL_V_RDISPL][me] * esize,
                   (const char *)r->src + dsp[me] * esize, own);
        if (n == 1) return 1;
        if (!r->dst) r->dst = r->src ? (void *)r->src : r->barrier_buf; /* all empty here */
        if (!r->src) r->src = r->dst;
        rcoll_sched_pairwise_alltoallv(s, n, me, cnt, dsp, r->v[RCOLL_V_RCOUNT],
                                       r->v[RCOLL_V_RDISPL], chunk);
        want_star(comm, -1);
        return 0;
    }
    default:
        return 1;
    }
}

/* The end of a successful operation: a reduce-scatter-v in place moves its result to the
 * start of the buffer. */
static void finish_op(struct rcoll_request *r)
{
    if (!r->vmove) return;
    size_t esize = rcoll_dt_size(r->dt);
    char *at = r->dst;
    memmove(at - r->vmove * esize, at, r->v[RCOLL_V_COUNT][r->comm->rank] * esize);
    r->vmove = 0;
}

/* Start a collective through its algorithm table (algo/algo.h): the choice for `bytes`, the
 * operation as the algorithm sees it (root: a ring position, -1 for none), its start and the
 * connections it asks for.  Returns 0 (started). */
static int start_table(rcoll_comm_t comm, struct rcoll_request *r, rcoll_coll_t coll,
                       size_t bytes, int root_pos)
{
    r->alg_id = rcoll_algo_choose_coll(&comm->algo, coll, bytes);
    r->alg = rcoll_algo_tables[coll].ops[r->alg_id];
    aop_set(comm, r);
    r->aop.root = root_pos;
    r->alg->start(&comm->algo, &r->aop);
    if (r->aop.nwant) want_peers(comm, r);
    r->connecting = rcoll_conn_missing(comm) > 0;
    return 0;
}

/* Start the head operation: local copies, the algorithm or schedule, and the connections it
 * needs.  Returns 1 if the operation is already complete (nothing to move). */
static int start_op(rcoll_comm_t comm, struct rcoll_request *r)
{
    r->started = 1;
    int n = comm->nranks, me = comm->rank;
    size_t esize = rcoll_dt_size(r->dt);
    size_t chunk = esize ? comm->chunk_bytes / esize : 0;
    rcoll_sched_t s;
    const int *pmap = NULL; /* schedules on ring positions (all-reduce, barrier) */
    r->last_progress_ns = 0; /* stamped at the next clock reading */
    switch (r->kind) {
    case RCOLL_OP_ALLREDUCE:
    case RCOLL_OP_REDUCE:
        if (r->count == 0) return 1;
        if (n == 1) {
            if (r->src != r->dst) memcpy(r->dst, r->src, r->count * esize);
            rcoll_reduce_single(r->dst, r->count, r->dt);
            return 1;
        }
        if (r->kind == RCOLL_OP_REDUCE) {
            rcoll_sched_chain_reduce(&s, n, comm->ring_pos, ring_pos_of(comm, r->root), r->count,
                                     chunk);
            pmap = comm->ring_map;
            break;
        }
        /* All-reduce: the algorithm table (algo/algo.h); the tuning probe forces its own. */
        r->alg_id = comm->probe_alg >= 0 ? comm->probe_alg
                                         : (int)rcoll_algo_choose(&comm->algo, r->count * esize);
        r->alg = rcoll_algos[r->alg_id];
        aop_set(comm, r);
        r->alg->start(&comm->algo, &r->aop);
        if (r->aop.nwant) want_peers(comm, r);
        return 0;
    case RCOLL_OP_BARRIER:
        if (n == 1) return 1;
        rcoll_sched_ring_allreduce(&s, n, comm->ring_pos, r->count, comm->chunk_bytes);
        pmap = comm->ring_map;
        break;
    case RCOLL_OP_BCAST:
        if (r->count == 0 || n == 1) return 1;
        return start_table(comm, r, RCOLL_COLL_BCAST, r->count * esize,
                           ring_pos_of(comm, r->root));
    case RCOLL_OP_ALLGATHER: {
        if (r->count == 0) return 1;
        char *own = (char *)r->dst + (size_t)me * r->count * esize;
        if (r->src != own) memcpy(own, r->src, r->count * esize);
        if (n == 1) return 1;
        r->src = r->dst; /* every send reads the gathered buffer */
        return start_table(comm, r, RCOLL_COLL_ALLGATHER, (size_t)n * r->count * esize, -1);
    }
    case RCOLL_OP_REDUCE_SCATTER:
        if (r->count == 0) return 1;
        if (n == 1) {
            if (r->src != r->dst) memmove(r->dst, r->src, r->count * esize);
            rcoll_reduce_single(r->dst, r->count, r->dt);
            return 1;
        }
        rcoll_sched_ring_reduce_scatter(&s, n, me, r->count, chunk);
        want_rank_ring(comm);
        break;
    case RCOLL_OP_ALLTOALL: {
        if (r->count == 0) return 1;
        size_t blk = r->count * esize;
        memcpy((char *)r->dst + (size_t)me * blk, (const char *)r->src + (size_t)me * blk, blk);
        if (n == 1) return 1;
        rcoll_sched_pairwise_alltoall(&s, n, me, r->count, chunk);
        for (int p = 0; p < n; p++)
            if (p != me) rcoll_conn_want(comm, p, 1, 1);
        break;
    }
    case RCOLL_OP_GATHER:
    case RCOLL_OP_SCATTER:
    case RCOLL_OP_ALLGATHERV:
    case RCOLL_OP_ALLTOALLV:
    case RCOLL_OP_REDUCE_SCATTERV:
        if (start_vcoll(comm, r, chunk, &s)) return 1;
        break;
    case RCOLL_OP_P2P: {
        p2p_self_copy(comm, r);
        int left = 0;
        for (int i = 0; i < r->nitems; i++) {
            rcoll_p2p_item_t *it = &r->items[i];
            if (it->done) continue;
            rcoll_conn_want(comm, it->peer, it->is_send, !it->is_send);
            left++;
        }
        r->connecting = rcoll_conn_missing(comm) > 0;
        return left == 0;
    }
    default:
        return 1;
    }
    r->alg = &rcoll_algo_sched;
    aop_set(comm, r);
    rcoll_algo_sched_start(&r->aop, &s, &comm->link, pmap);
    r->connecting = rcoll_conn_missing(comm) > 0;
    return 0;
}

/* A transport error on item it of a point-to-point batch.  A usage error (the message and the
 * receive posted for it disagree: size or tag) is said in the form of a mismatched call,
 * naming both sides. */
static rcoll_status_t p2p_failed(rcoll_comm_t comm, struct rcoll_request *r,
                                 const rcoll_p2p_item_t *it, rcoll_status_t st)
{
    (void)comm;
    r->aop.err_peer = it->peer;
    if (st != RCOLL_ERR_INVALID_USAGE) return st;
    char detail[RCOLL_ERR_TEXT_MAX];
    snprintf(detail, sizeof(detail), "%s", rcoll_err_get());
    unsigned no = (unsigned)(it->tag & 0x3fffffff) + 1;
    if (it->is_send)
        return rcoll_err_set(st, "this rank's rcoll_send #%u of %zu bytes to rank %d does not "
                             "match the receive rank %d posted for it: %s", no, it->bytes,
                             it->peer, it->peer, detail);
    return rcoll_err_set(st, "rank %d's message #%u to this rank does not match this rank's "
                         "rcoll_recv of %zu bytes: %s", it->peer, no, it->bytes, detail);
}

/* A point-to-point batch: every send and receive is posted at once and all are tested, so
 * nothing waits on anything else and a batch that would deadlock call by call completes.
 * Each message travels without staging, in pieces of at most comm->p2p_piece[peer] bytes (one
 * piece below that: the transports stripe large ones themselves), one piece in flight per
 * message.  Both ends cut alike (the piece size comes from the rank table).  Every piece but
 * the last carries the message's tag with RCOLL_P2P_MORE flipped, so a receive whose size
 * differs from the message's by a piece or more meets a piece with the wrong tag: the
 * transports refuse it (RCOLL_ERR_INVALID_USAGE), as they refuse a message too long. */
#define RCOLL_P2P_MORE 0x20000000
static rcoll_status_t p2p_progress(rcoll_comm_t comm, struct rcoll_request *r, int *moved)
{
    int left = 0;
    r->unposted = 0;
    for (int i = 0; i < r->nitems; i++) {
        rcoll_p2p_item_t *it = &r->items[i];
        if (it->done) continue;
        const rcoll_transport_ops_t *tp = comm->link.tps[it->peer];
        rcoll_status_t st;
        if (!it->posted) {
            size_t piece = comm->p2p_piece[it->peer];
            it->cur = it->bytes - it->off;
            if (piece && it->cur > piece) it->cur = piece;
            void *at = (char *)it->buf + it->off;
            int tag = it->off + it->cur < it->bytes ? it->tag ^ RCOLL_P2P_MORE : it->tag;
            void *tc = it->is_send ? comm->link.send_comms[it->peer]
                                   : comm->link.recv_comms[it->peer];
            /* GPU memory: registered as such once, for every piece */
            if (it->gdr && !it->mh &&
                (st = tp->reg_mr(tc, it->buf, it->bytes, RCOLL_PTR_CUDA, &it->mh)) < 0) {
                rcoll_comm_gdr_failed(comm, tp, rcoll_err_get());
                return p2p_failed(comm, r, it, st);
            }
            void *mh = it->mh;
            if (it->is_send)
                st = tp->isend(tc, at, it->cur, tag, mh, &it->treq);
            else
                st = tp->irecv(tc, 1, &at, &it->cur, &tag, &mh, &it->treq);
            if (st < 0) return p2p_failed(comm, r, it, st);
            if (!it->treq) {
                left++;
                r->unposted++;
                continue;
            }
            it->posted = 1;
        }
        int done = 0;
        size_t got = 0;
        st = tp->test(it->treq, &done, &got);
        if (st < 0) {
            it->treq = NULL;
            return p2p_failed(comm, r, it, st);
        }
        if (!done) {
            left++;
            r->aop.waiting_peer = it->peer;
            r->aop.waiting_recv = !it->is_send;
            continue;
        }
        it->treq = NULL;
        *moved = 1;
        if (it->flushing) { /* the flush of a GPUDirect receive: the message is visible now */
            it->flushing = 0;
            it->done = 1;
            p2p_unreg(comm, it);
            continue;
        }
        if (!it->is_send && got != it->cur) {
            r->aop.err_peer = it->peer;
            return rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                 "rank %d sent %zu bytes as its message #%u to this rank while "
                                 "this rank called rcoll_recv for %zu bytes", it->peer,
                                 it->off + got, (unsigned)(it->tag & 0x3fffffff) + 1, it->bytes);
        }
        it->off += it->cur;
        if (it->off < it->bytes) { /* the next piece, now */
            it->posted = 0;
            i--;
            continue;
        }
        if (it->gdr && !it->is_send) { /* make the NIC's writes visible to the GPU */
            void *fbuf = it->buf, *fmh = it->mh;
            int fsize = it->bytes > INT32_MAX ? INT32_MAX : (int)it->bytes;
            st = tp->iflush(comm->link.recv_comms[it->peer], 1, &fbuf, &fsize, &fmh,
                            &it->treq);
            if (st < 0) return p2p_failed(comm, r, it, st);
            if (it->treq) {
                it->flushing = 1;
                left++;
                continue;
            }
        }
        it->done = 1;
        p2p_unreg(comm, it);
    }
    return left ? RCOLL_INPROGRESS : RCOLL_OK;
}

/* Advance the head operation once: connections first, then its schedule or batch. */
static rcoll_status_t run_op(rcoll_comm_t comm, struct rcoll_request *r, int *moved)
{
    if (r->connecting) {
        rcoll_status_t st = rcoll_conn_progress(comm);
        if (st < 0) {
            r->aop.err_peer = rcoll_conn_first_missing(comm);
            return st;
        }
        if (rcoll_conn_missing(comm) > 0) {
            r->aop.waiting_peer = rcoll_conn_first_missing(comm);
            r->aop.waiting_recv = 1;
            return RCOLL_INPROGRESS;
        }
        r->connecting = 0;
        *moved = 1;
    }
    if (r->kind == RCOLL_OP_P2P) return p2p_progress(comm, r, moved);
    rcoll_status_t st = r->alg->progress(&comm->algo, &r->aop, moved);
    if (r->aop.nwant) want_peers(comm, r); /* a new phase */
    return st;
}

/* Revoked (rcoll_comm_revoke) here, by another thread, or by another rank (the root relays
 * it): the queue fails with the revoking rank's sentence.  1 if so. */
static int revoke_check(rcoll_comm_t comm)
{
    char text[RCOLL_LAST_ERROR_MAX];
    int culprit = comm->rank;
    if (atomic_load_explicit(&comm->revoked, memory_order_acquire)) {
        snprintf(text, sizeof(text), "%s", comm->revoke_text);
    } else {
        char why[RCOLL_BS_TEXT_MAX];
        if (!rcoll_bs_revoked(comm->bs, comm->ctx, &culprit, why, sizeof(why))) return 0;
        snprintf(text, sizeof(text), "rank %d: %s", comm->rank, why);
        snprintf(comm->revoke_text, sizeof(comm->revoke_text), "%s", why);
        atomic_store_explicit(&comm->revoked, 1, memory_order_release);
    }
    rcoll_comm_fail(comm, RCOLL_ERR_REMOTE, culprit, text);
    return 1;
}

/* start_op, and the operation's record for RCOLL_RAS (core/ras.h). */
static int begin_op(rcoll_comm_t comm, struct rcoll_request *r)
{
    int done = start_op(comm, r);
    if (comm->ras) rcoll_ras_op_start(comm->ras, comm, r);
    return done;
}

/* ------------------------------------------------------------------------------------------
 * Mismatched calls (core/sig.h).  The rank that finds one sends its signature to the root and
 * reports the mismatch, so every rank fails the same call at once; each then sends its own
 * signature and names a rank whose call differs from its own, with both calls.
 * ---------------------------------------------------------------------------------------- */

_Static_assert(sizeof(rcoll_sig_t) <= RCOLL_BS_SIG_BYTES, "signature size");
/* How long a failing rank waits for a differing peer's signature.  That peer sends it as
 * soon as it runs again, which on a loaded host (a descheduled process) or in a program busy
 * outside the library can take well over a second; the wait ends when it arrives and is
 * spent whole only when no differing signature exists or its rank is gone.  An eighth of
 * RCOLL_TIMEOUT, within [0.5 s, 3 s]; all-to-all-v, whose signatures may agree (one pair's
 * sizes differ), waits the least. */
#define SIG_WAIT_MIN_NS 500000000ull
#define SIG_WAIT_MAX_NS 3000000000ull
static uint64_t sig_wait_ns(const rcoll_comm_t comm)
{
    double w = comm->cfg.timeout_s * 1e9 / 8;
    if (w < (double)SIG_WAIT_MIN_NS) return SIG_WAIT_MIN_NS;
    if (w > (double)SIG_WAIT_MAX_NS) return SIG_WAIT_MAX_NS;
    return (uint64_t)w;
}

static void sig_send(rcoll_comm_t comm, const rcoll_sig_t *mine, int stalled)
{
    rcoll_bs_sig_t m;
    memset(&m, 0, sizeof(m));
    m.ctx = comm->ctx;
    m.rank = comm->rank;
    memcpy(m.sig, mine, sizeof(*mine)); /* seq first: the root's key */
    if (stalled)
        rcoll_bs_send_stall(comm->bs, &m);
    else
        rcoll_bs_send_sig(comm->bs, &m);
}

/* A peer's signature that differs from mine: from the host segment's announcements, or as
 * relayed by the root within wait_ns.  A call with my call's number comes first (peer `prefer`
 * first among those); another number only when none arrives in time, which is then
 * SIG_WAIT_MIN_NS once one of another number is at hand (this rank is past the mismatched
 * operation: its peers failed in it and send no signature of this rank's number).  1 when
 * found. */
static int sig_find_other(rcoll_comm_t comm, const rcoll_sig_t *mine, int prefer,
                          uint64_t wait_ns, int *who, rcoll_sig_t *theirs)
{
    for (int i = -1; comm->sig_area && i < comm->nranks; i++) {
        int p = i < 0 ? prefer : i;
        if (p < 0 || p == comm->rank) continue;
        if (rcoll_sig_announced(comm->sig_area, p, mine->seq, theirs) &&
            !rcoll_sig_equal(theirs, mine)) {
            *who = p;
            return 1;
        }
    }
    uint64_t start = rcoll_now_ns(), until = start + wait_ns;
    int rank_other = -1;
    rcoll_sig_t other;
    for (;;) {
        rcoll_bs_sig_t got[32];
        int n = rcoll_bs_sigs(comm->bs, comm->ctx, got, 32), found = -1;
        for (int i = 0; i < n; i++) {
            rcoll_sig_t s;
            memcpy(&s, got[i].sig, sizeof(s));
            if (got[i].rank == comm->rank || got[i].rank < 0 || got[i].rank >= comm->nranks ||
                rcoll_sig_equal(&s, mine))
                continue;
            if (s.seq != mine->seq) { /* another operation: only if nothing better comes */
                if (rank_other < 0) rank_other = got[i].rank, other = s;
                continue;
            }
            if (found < 0 || got[i].rank == prefer) {
                found = i;
                *who = got[i].rank;
                *theirs = s;
            }
        }
        if (found >= 0) return 1;
        uint64_t now = rcoll_now_ns();
        if (now >= until || (rank_other >= 0 && now - start >= SIG_WAIT_MIN_NS)) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (rank_other < 0) return 0;
    *who = rank_other;
    *theirs = other;
    return 1;
}

/* The root announced a mismatch: is it of a later operation only (every signature relayed for
 * this communicator has a higher number than the running one)?  Then this rank, behind its
 * peers, finishes the running operation first and fails the mismatched one itself. */
static int mismatch_later(rcoll_comm_t comm, const struct rcoll_request *r, rcoll_status_t cst)
{
    if (cst != RCOLL_ERR_INVALID_USAGE || !r->started || r->kind == RCOLL_OP_P2P) return 0;
    rcoll_bs_sig_t got[32];
    int n = rcoll_bs_sigs(comm->bs, comm->ctx, got, 32);
    for (int i = 0; i < n; i++) {
        rcoll_sig_t s;
        memcpy(&s, got[i].sig, sizeof(s));
        if (s.seq <= r->sig.seq) return 0;
    }
    return n > 0;
}

/* Operation r does not match peer's call.  detected: this rank found it (detail says how);
 * otherwise the root announced it (detail: the announcement).  Fails the queue. */
static void mismatch_failed(rcoll_comm_t comm, struct rcoll_request *r, int peer,
                            const char *detail, int detected)
{
    char text[RCOLL_LAST_ERROR_MAX], sent[RCOLL_LAST_ERROR_MAX - 32], ms[160];
    rcoll_sig_t mine = r->sig, theirs;
    int who = peer;
    sig_send(comm, &mine, 0);
    if (detected) {
        rcoll_sig_format(&mine, 0, ms, sizeof(ms));
        snprintf(text, sizeof(text), "rank %d: rank %d's call does not match this rank's %s "
                 "(%s)", comm->rank, peer, ms, detail);
        rcoll_bs_report(comm->bs, peer, RCOLL_ERR_INVALID_USAGE, text);
    }
    /* All-to-all-v signatures may agree (the sizes of one pair differ): then the detail, which
     * names the pair and the sizes, says it; another rank's next call would not. */
    uint64_t wait_ns = r->kind == RCOLL_OP_ALLTOALLV ? SIG_WAIT_MIN_NS : sig_wait_ns(comm);
    if (sig_find_other(comm, &mine, peer, wait_ns, &who, &theirs) &&
        (r->kind != RCOLL_OP_ALLTOALLV || theirs.seq == mine.seq)) {
        rcoll_sig_sentence(&theirs, who, &mine, -1, &comm->opnum, sent, sizeof(sent));
        snprintf(text, sizeof(text), "rank %d: %s", comm->rank, sent);
    } else if (!detected) {
        snprintf(text, sizeof(text), "rank %d: %s", comm->rank, detail);
    }
    rcoll_comm_fail(comm, RCOLL_ERR_INVALID_USAGE, who, text);
}

int rcoll_sig_explain(rcoll_comm_t comm, char *buf, size_t len)
{
    uint64_t until = rcoll_now_ns() + sig_wait_ns(comm);
    for (;;) {
        rcoll_bs_sig_t got[32];
        int n = rcoll_bs_sigs(comm->bs, comm->ctx, got, 32);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                rcoll_sig_t a, b;
                memcpy(&a, got[i].sig, sizeof(a));
                memcpy(&b, got[j].sig, sizeof(b));
                if (a.seq != b.seq || rcoll_sig_equal(&a, &b) || got[i].rank == got[j].rank)
                    continue;
                rcoll_sig_sentence(&a, got[i].rank, &b, got[j].rank, &comm->opnum, buf, len);
                return 1;
            }
        if (rcoll_now_ns() >= until) return 0;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

/* The root announced a failure (status cst, culprit): fail the queue with it. */
static void root_failed(rcoll_comm_t comm, rcoll_status_t cst, int culprit)
{
    char text[RCOLL_LAST_ERROR_MAX], sent[RCOLL_LAST_ERROR_MAX - 32];
    struct rcoll_request *r = comm->head;
    if (cst == RCOLL_ERR_INVALID_USAGE && r && r->started && r->kind != RCOLL_OP_P2P) {
        char note[RCOLL_ERR_TEXT_MAX];
        snprintf(note, sizeof(note), "%s", rcoll_err_get());
        mismatch_failed(comm, r, culprit, note, 0);
        return;
    }
    snprintf(text, sizeof(text), "rank %d: %s", comm->rank, rcoll_err_get());
    /* A mismatch between other ranks while this one was in none of those calls: name both. */
    if (cst == RCOLL_ERR_INVALID_USAGE && rcoll_sig_explain(comm, sent, sizeof(sent)))
        snprintf(text, sizeof(text), "rank %d: %s", comm->rank, sent);
    rcoll_comm_fail(comm, cst, culprit, text);
}

/* A rank stalled in a collective: on one host, a peer that announced a different call under
 * the same number is a mismatch this rank can name at once.  1 when found (queue failed).
 * After STALL_REPORT_NS (or a quarter of RCOLL_TIMEOUT) without progress it also gives its
 * signature to the root, which compares the stalled calls of all ranks (no shared memory
 * needed: ranks that wait on peers running something else may never exchange a message). */
#define STALL_REPORT_NS 1000000000ull
static double watchdog_s(const rcoll_comm_t comm);
static int stall_check(rcoll_comm_t comm, struct rcoll_request *r, uint64_t now)
{
    if (!r->started || r->kind == RCOLL_OP_P2P) return 0;
    uint64_t after = (uint64_t)(comm->cfg.timeout_s * 1e9 / 4);
    if (after > STALL_REPORT_NS) after = STALL_REPORT_NS;
    /* The watchdog's answer is made of these reports: half its wait before it fires, the
     * ranks that entered the call at about the same time have all reported. */
    double wd = watchdog_s(comm);
    if (wd > 0 && (uint64_t)(wd * 1e9 / 2) < after) after = (uint64_t)(wd * 1e9 / 2);
    if (!r->stall_sent && now - r->last_progress_ns >= after) {
        sig_send(comm, &r->sig, 1);
        r->stall_sent = 1;
    }
    if (!comm->sig_area) return 0;
    for (int p = 0; p < comm->nranks; p++) {
        rcoll_sig_t s;
        if (p != comm->rank && rcoll_sig_announced(comm->sig_area, p, r->sig.seq, &s) &&
            !rcoll_sig_equal(&s, &r->sig)) {
            mismatch_failed(comm, r, p, "it announced a different call in shared memory", 1);
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The watchdog (RCOLL_WATCHDOG_S).  When a collective has made no progress that long, this
 * rank asks the root what every rank last reported of its waits (each rank reports a wait
 * after half the watchdog's time: stall_check), adds what the host segment shows of the
 * peers on this host, and logs one report: the call, what this rank waits on, which ranks
 * reached the call and which did not (and where those were last seen).  Once per operation;
 * the operation goes on (RCOLL_TIMEOUT fails it).
 * ---------------------------------------------------------------------------------------- */

#define WDOG_REPLY_WAIT_NS 200000000ull /* the root answers at once; a lost root: this long */
#define WDOG_DETAILED 8                 /* ranks not reached described one by one, at most */

static double watchdog_s(const rcoll_comm_t comm)
{
    double w = comm->cfg.watchdog_s;
    if (w >= 0) return w;
    w = comm->cfg.timeout_s / 3;
    return w < 60 ? w : 60;
}

/* Append a list of ranks ("0,2-3") of the n flags set in in[]. */
static void watchdog_report(rcoll_comm_t comm, struct rcoll_request *r, uint64_t idle_ns)
{
    int n = comm->nranks, me = comm->rank;
    uint8_t *reached = calloc((size_t)n, 1);
    if (!reached) return;
    /* The root's view (a missing answer leaves this rank with what the host segment says). */
    rcoll_bs_sig_t m;
    memset(&m, 0, sizeof(m));
    m.ctx = comm->ctx;
    m.rank = me;
    m.flags = comm->bs_ranks ? RCOLL_BS_SIG_MEMBERS : 0;
    memcpy(m.sig, &r->sig, sizeof(r->sig));
    rcoll_bs_send_wdog(comm->bs, &m);
    rcoll_bs_wdog_t w;
    int answered = 0;
    for (uint64_t until = rcoll_now_ns() + WDOG_REPLY_WAIT_NS; !answered;) {
        answered = rcoll_bs_wdog_reply(comm->bs, comm->ctx, r->sig.seq, &w);
        if (answered || rcoll_now_ns() >= until) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    reached[me] = 1;
    for (int p = 0; answered && p < n && p < RCOLL_BS_WDOG_BITS; p++)
        if (w.reached[p / 8] & (1u << (p % 8))) reached[p] = 1;
    /* Peers on this host announce every call they start: exact, and no report needed. */
    rcoll_sig_t seen;
    for (int p = 0; comm->sig_area && p < n; p++)
        if (p != me && rcoll_sig_latest(comm->sig_area, p, &seen) &&
            (seen.seq > r->sig.seq || rcoll_sig_equal(&seen, &r->sig)))
            reached[p] = 1;
    int nreached = 0;
    for (int p = 0; p < n; p++) nreached += reached[p];

    char *out = comm->wdog_report, call[160], num[48], pbuf[128];
    size_t len = sizeof(comm->wdog_report), o;
    rcoll_sig_format(&r->sig, 0, call, sizeof(call));
    rcoll_sig_op_number(&comm->opnum, r->sig.seq, num, sizeof(num));
    o = (size_t)snprintf(out, len, "watchdog: communicator %s%s%s(id %016llx) %s %s: no progress "
                         "for %.3g s on rank %d, ", comm->cfg.comm_name[0] ? "\"" : "",
                         comm->cfg.comm_name, comm->cfg.comm_name[0] ? "\" " : "",
                         (unsigned long long)comm->ctx, num, call, idle_ns / 1e9, me);
    int peer = r->aop.waiting_peer;
    if (o < len && peer >= 0 && peer < n)
        o += (size_t)snprintf(out + o, len - o, "waiting %s %s",
                              r->aop.waiting_recv ? "for data from" : "for its data to be "
                              "taken by", rcoll_comm_peer_name(comm, peer, pbuf, sizeof(pbuf)));
    else if (o < len)
        o += (size_t)snprintf(out + o, len - o, "waiting on its peers");
    if (o < len && r->alg && r->alg->progress == rcoll_algo_sched_progress) {
        const rcoll_exec_t *e = rcoll_algo_exec(&r->aop);
        o += (size_t)snprintf(out + o, len - o, " at step %llu of %llu",
                              (unsigned long long)e->k_proc + 1,
                              (unsigned long long)e->sched.nsteps);
    }
    if (o < len) o += (size_t)snprintf(out + o, len - o, "; reached by %d of %d ranks (", nreached, n);
    o = rcoll_ranks_format(out, len, o, reached, n);
    if (o < len && nreached < n) {
        o += (size_t)snprintf(out + o, len - o, "); not reached by rank%s ", n - nreached > 1 ? "s" : "");
        for (int p = 0; p < n; p++) reached[p] = !reached[p];
        o = rcoll_ranks_format(out, len, o, reached, n);
        int described = 0;
        for (int p = 0; p < n && o < len; p++) {
            if (!reached[p]) continue;
            if (described++ == WDOG_DETAILED) {
                o += (size_t)snprintf(out + o, len - o, "; ...");
                break;
            }
            char what[320] = "", sc[160], sn[48];
            size_t wo = 0;
            int k = -1;
            for (int i = 0; answered && i < w.nlast && k < 0; i++)
                if (w.last[i].rank == p) k = i;
            if (comm->sig_area && rcoll_sig_latest(comm->sig_area, p, &seen)) {
                rcoll_sig_format(&seen, 0, sc, sizeof(sc));
                rcoll_sig_op_number(&comm->opnum, seen.seq, sn, sizeof(sn));
                wo = (size_t)snprintf(what, sizeof(what), "%s %s %s", seen.seq == r->sig.seq ?
                                      "called a different collective as" : "last seen in",
                                      sn, sc);
            }
            if (k >= 0 && w.last[k].ctx != comm->ctx && wo < sizeof(what)) {
                /* numbered with the set-up collectives: that communicator's first is unknown */
                snprintf(what + wo, sizeof(what) - wo, "%slast reported waiting in %s (call "
                         "#%llu, set-up included) of communicator id %016llx", wo ? ", " : "",
                         rcoll_sig_kind_name(w.last[k].kind),
                         (unsigned long long)w.last[k].seq + 1,
                         (unsigned long long)w.last[k].ctx);
            } else if (k >= 0 && !wo) {
                rcoll_sig_op_number(&comm->opnum, w.last[k].seq, sn, sizeof(sn));
                snprintf(what, sizeof(what), "last reported waiting in %s (%s)", sn,
                         rcoll_sig_kind_name(w.last[k].kind));
            } else if (!wo) {
                snprintf(what, sizeof(what), "%s", answered ? "no wait reported on this "
                         "communicator" : "no answer from the bootstrap root");
            }
            o += (size_t)snprintf(out + o, len - o, "; rank %d: %s", p, what);
        }
    } else if (o < len) {
        o += (size_t)snprintf(out + o, len - o, ")");
    }
    free(reached);
    RCOLL_WARN(COLL, "%s", out);
    if (comm->ras) rcoll_ras_dump(comm->ras, "watchdog", out);
}

/* Called while operation r makes no progress: report it once when the watchdog's time has
 * passed. */
static void watchdog_check(rcoll_comm_t comm, struct rcoll_request *r, uint64_t now)
{
    if (r->wdog_sent || !r->started || r->kind == RCOLL_OP_P2P) return;
    double wd = watchdog_s(comm);
    if (wd <= 0 || now - r->last_progress_ns < (uint64_t)(wd * 1e9)) return;
    r->wdog_sent = 1;
    if (!r->stall_sent) { /* the root's answer counts this rank among the ranks reached */
        sig_send(comm, &r->sig, 1);
        r->stall_sent = 1;
    }
    watchdog_report(comm, r, now - r->last_progress_ns);
}

/* Wait up to wait_ns for the root's verdict on a failure; 1 (and the comm failed with it)
 * if one came. */
static int await_verdict(rcoll_comm_t comm, uint64_t wait_ns)
{
    uint64_t until = rcoll_now_ns() + wait_ns;
    while (rcoll_now_ns() < until) {
        int culprit = -1;
        rcoll_status_t cst = rcoll_bs_poll(comm->bs, &culprit);
        if (cst != RCOLL_OK) {
            root_failed(comm,
                        cst == RCOLL_ERR_TIMEOUT || cst == RCOLL_ERR_INVALID_USAGE
                            ? cst
                            : RCOLL_ERR_REMOTE,
                        culprit);
            return 1;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* A data-path error: find out who is really at fault, tell everyone, fail the queue. */
static void data_path_failed(rcoll_comm_t comm, struct rcoll_request *r, rcoll_status_t st)
{
    /* a peer that left a revoked communicator (destroyed it) breaks its connections: the
     * revoke is the cause, not that peer */
    if (revoke_check(comm)) return;
    char detail[RCOLL_ERR_TEXT_MAX], text[RCOLL_LAST_ERROR_MAX], pbuf[128];
    snprintf(detail, sizeof(detail), "%s", rcoll_err_get());
    int peer = r->aop.err_peer;
    if (st == RCOLL_ERR_INVALID_USAGE && r->kind != RCOLL_OP_P2P) {
        mismatch_failed(comm, r, peer, detail, 1);
        return;
    }
    if (st == RCOLL_ERR_INVALID_USAGE) { /* point to point: p2p_failed said it all */
        snprintf(text, sizeof(text), "rank %d: %s", comm->rank, detail);
        rcoll_bs_report(comm->bs, peer, st, text);
        rcoll_comm_fail(comm, st, peer, text);
        return;
    }
    /* Out of file descriptors here (accepting or connecting for this operation): this rank
     * is the cause, whichever peer the call was for; said at once, before the peers' own
     * grace for a verdict runs out and they blame each other. */
    if (rcoll_err_out_of_fds(detail)) {
        snprintf(text, sizeof(text), "%s failed: %s",
                 rcoll_comm_peer_name(comm, comm->rank, pbuf, sizeof(pbuf)), detail);
        rcoll_bs_report(comm->bs, rcoll_bs_rank(comm->bs), st, text);
        rcoll_comm_fail(comm, st, comm->rank, text);
        return;
    }
    /* A neighbour's broken connection is often a consequence of a failure elsewhere; the root
     * knows the first cause, so give it a moment to say so. */
    if (await_verdict(comm, CULPRIT_GRACE_NS)) return;
    snprintf(text, sizeof(text), "rank %d: %s failed: %s", comm->rank,
             rcoll_comm_peer_name(comm, peer, pbuf, sizeof(pbuf)), detail);
    rcoll_bs_report(comm->bs, peer, st, text);
    rcoll_comm_fail(comm, st, peer, text);
}

static void check_timeout(rcoll_comm_t comm, struct rcoll_request *r, uint64_t now)
{
    uint64_t limit = (uint64_t)(comm->cfg.timeout_s * 1e9);
    if (now - r->last_progress_ns <= limit) return;
    char text[RCOLL_LAST_ERROR_MAX], what[RCOLL_LAST_ERROR_MAX / 2], pbuf[128], zbuf[128];
    int peer = r->aop.waiting_peer;
    snprintf(what, sizeof(what), "no progress for %g s (%s) %s %s", comm->cfg.timeout_s,
             comm->cfg.timeout_src[0] ? comm->cfg.timeout_src : "RCOLL_TIMEOUT",
             r->aop.waiting_recv ? "waiting for data from" : "waiting for data to be taken by",
             rcoll_comm_peer_name(comm, peer, pbuf, sizeof(pbuf)));
    snprintf(text, sizeof(text), "rank %d: %s", comm->rank, what);
    if (comm->ras) {
        rcoll_ras_op_wait(comm->ras, comm, r);
        rcoll_ras_dump(comm->ras, "timeout", text);
    }
    /* The peer may itself be waiting on another rank: the root collects every timeout report
     * and names the rank at the end of the chain. */
    rcoll_bs_report(comm->bs, peer, RCOLL_ERR_TIMEOUT, text);
    if (await_verdict(comm, VERDICT_WAIT_NS)) return;
    /* No verdict.  If the root has not even acknowledged the report, the host of the process
     * that runs it is cut off from here: the likelier first failure, which the awaited peer
     * may only be waiting on in turn.  Name that process's rank when it is a member. */
    int retrans = 0;
    const rcoll_peer_info_t *rh = rcoll_bs_root_host(comm->bs);
    int root_rank = -1;
    for (int p = 0; rh && p < comm->nranks && root_rank < 0; p++)
        if (comm->peers[p].pid == rh->pid && comm->peers[p].host_hash == rh->host_hash)
            root_rank = p;
    if (rh && rcoll_bs_root_unreachable(comm->bs, &retrans)) {
        if (root_rank >= 0)
            rcoll_comm_peer_name(comm, root_rank, zbuf, sizeof(zbuf));
        else
            snprintf(zbuf, sizeof(zbuf), "the process on %s (pid %d, not in this communicator)",
                     rh->hostname, (int)rh->pid);
        if (root_rank != peer) {
            snprintf(text, sizeof(text),
                     "rank %d: %s is unreachable: the bootstrap root it hosts has not "
                     "acknowledged this rank's report for %.1f s (%d TCP retransmissions); this "
                     "rank had %s, which may itself be waiting on it",
                     comm->rank, zbuf, VERDICT_WAIT_NS / 1e9, retrans, what);
            if (root_rank >= 0) peer = root_rank;
        }
    } else if (root_rank >= 0 && root_rank != peer && root_rank != comm->rank) {
        /* Reachable (its kernel acknowledged the report) but silent: the root decides within
         * BS_DECIDE_WINDOW_NS of a timeout report, so a process that gives no verdict for
         * longer is stopped or hung, and the awaited peer may only be waiting on it in turn
         * (found by tools/chaos: a SIGSTOPped rank 0 made ranks blame each other). */
        rcoll_comm_peer_name(comm, root_rank, zbuf, sizeof(zbuf));
        snprintf(text, sizeof(text),
                 "rank %d: %s does not answer: the bootstrap root it hosts gave no verdict on "
                 "this rank's report within %.1f s (stopped or hung?); this rank had %s, which "
                 "may itself be waiting on it",
                 comm->rank, zbuf, VERDICT_WAIT_NS / 1e9, what);
        peer = root_rank;
    }
    rcoll_comm_fail(comm, RCOLL_ERR_TIMEOUT, peer, text);
}

static int progress_p2p_followers(rcoll_comm_t comm);
static int progress_pass(rcoll_comm_t comm);

/* ------------------------------------------------------------------------------------------
 * Doorbells (util/bell.h; comm.c setup_bells).  A pass that moved anything (an operation
 * started, advanced or completed, or a transport moved bytes) rings the bells of this host's
 * ranks that may sleep: one barrier, then one load per bell; a system call only for a bell
 * someone sleeps on.  A waiter whose polling time is up sleeps on its own bell, in slices of
 * at most SLEEP_SLICE_NS (after which it reads the clock: control messages, timeouts).
 * ---------------------------------------------------------------------------------------- */
#define SLEEP_SLICE_NS 10000000ull

static int progress_once(rcoll_comm_t comm)
{
    if (!comm->nbells) return progress_pass(comm);
    uint64_t before = rcoll_transport_moves;
    int moved = progress_pass(comm);
    if (moved || rcoll_transport_moves != before) {
        rcoll_bell_fence();
        for (int i = 0; i < comm->nbells; i++) rcoll_bell_ring(comm->bells[i]);
    }
    return moved;
}

/* Whether a waiter on comm may sleep on the doorbell now: comm sleeps, and so does every
 * sibling with work that the waiter progresses too (a sibling with peers on other hosts is
 * not rung for). */
static int may_sleep(rcoll_comm_t comm)
{
    if (!comm->sleeps) return 0;
    for (rcoll_comm_t o = comm->family ? comm->family->first : NULL; o; o = o->fam_next)
        if (o != comm && o->head && !o->pt_on && !o->sleeps) return 0;
    return 1;
}

static int progress_pass(rcoll_comm_t comm)
{
    int moved = 0;
    while (comm->head && comm->failed == RCOLL_OK) {
        struct rcoll_request *r = comm->head;
        if (r->held) break; /* an open group's batch: runs at rcoll_group_end */
        if (r->preset != RCOLL_OK) {
            complete_head(comm, r->preset);
            moved = 1;
            continue;
        }
        if (!r->started && begin_op(comm, r)) {
            finish_op(r);
            complete_head(comm, RCOLL_OK);
            moved = 1;
            continue;
        }
        int progressed = 0;
        rcoll_status_t st = run_op(comm, r, &progressed);
        if (progressed) r->last_progress_ns = 0; /* stamped at the next clock reading */
        moved |= progressed;
        if (st == RCOLL_OK) {
            finish_op(r);
            complete_head(comm, RCOLL_OK);
            moved = 1;
            continue;
        }
        if (st < 0) {
            data_path_failed(comm, r, st);
            return 1;
        }
        if (r->kind == RCOLL_OP_P2P) moved |= progress_p2p_followers(comm);
        if (comm->failed != RCOLL_OK) return 1;
        /* Reading the clock costs about as much as a cross-core cache line here, so it is
         * read every CLOCK_EVERY_POLLS passes only, never on the way to a result: progress
         * marks the operation (last_progress_ns = 0) and the next reading stamps it. */
        if (++comm->polls_since_clock < CLOCK_EVERY_POLLS) break;
        comm->polls_since_clock = 0;
        uint64_t now = rcoll_now_ns();
        if (r->last_progress_ns == 0) r->last_progress_ns = now;
        if (now - comm->last_ctl_poll_ns > CTL_POLL_INTERVAL_NS) {
            comm->last_ctl_poll_ns = now;
            if (now - comm->last_poke_ns > RCOLL_CONN_POKE_NS) {
                comm->last_poke_ns = now;
                rcoll_conn_poke(comm);
            }
            if (comm->ras) rcoll_ras_op_wait(comm->ras, comm, r);
            if (revoke_check(comm)) return 1;
            int culprit = -1;
            rcoll_status_t cst = rcoll_bs_poll(comm->bs, &culprit);
            if (cst != RCOLL_OK && !mismatch_later(comm, r, cst)) {
                root_failed(comm, cst, culprit);
                return 1;
            }
            cst = rcoll_conn_progress(comm); /* early connectors */
            if (cst != RCOLL_OK) {
                /* accepting them failed here (out of descriptors, say): this rank is the
                 * cause, and the peers waiting for it are told at once */
                char text[RCOLL_LAST_ERROR_MAX], pbuf[128];
                snprintf(text, sizeof(text), "%s failed accepting connections: %s",
                         rcoll_comm_peer_name(comm, comm->rank, pbuf, sizeof(pbuf)),
                         rcoll_err_get());
                rcoll_bs_report(comm->bs, rcoll_bs_rank(comm->bs), cst, text);
                rcoll_comm_fail(comm, cst, comm->rank, text);
                return 1;
            }
            if (!progressed && !stall_check(comm, r, now)) {
                watchdog_check(comm, r, now);
                check_timeout(comm, r, now);
            }
        }
        break;
    }
    return moved;
}

/* Point-to-point operations queued right behind a running one progress with it: a rank's
 * isend and irecv to the same peer must both be in flight, or two ranks that each sent first
 * would wait on each other whenever the transport cannot buffer a whole message.  Their items
 * are posted in issue order (a later operation posts nothing while an earlier one still has
 * unposted items), so each connection still carries messages in issue order. */
static int progress_p2p_followers(rcoll_comm_t comm)
{
    int moved = 0;
    struct rcoll_request *prev = comm->head;
    if (!prev || prev->kind != RCOLL_OP_P2P || prev->complete) return 0;
    for (struct rcoll_request *r = prev->next; r && comm->failed == RCOLL_OK;) {
        if (r->kind != RCOLL_OP_P2P || r->held || prev->unposted || prev->connecting) break;
        struct rcoll_request *next = r->next;
        rcoll_status_t st = RCOLL_INPROGRESS;
        if (r->preset != RCOLL_OK)
            st = r->preset;
        else if (!r->started && begin_op(comm, r))
            st = RCOLL_OK;
        else {
            int progressed = 0;
            st = run_op(comm, r, &progressed);
            if (progressed) r->last_progress_ns = 0;
            moved |= progressed;
        }
        if (st < 0) {
            data_path_failed(comm, r, st);
            return 1;
        }
        if (st != RCOLL_INPROGRESS) {
            complete_req(comm, prev, r, st);
            moved = 1;
        } else {
            prev = r;
        }
        r = next;
    }
    return moved;
}

void rcoll_comm_progress(rcoll_comm_t comm) { progress_once(comm); }

const void *rcoll_thread_token(void)
{
    static __thread char token;
    return &token;
}

/* One pass over comm and the rest of its family: a peer may be waiting for this rank's part
 * of an operation on a sibling communicator before it can serve this one. */
static int progress_family(rcoll_comm_t comm)
{
    int moved = progress_once(comm);
    for (rcoll_comm_t o = comm->family ? comm->family->first : NULL; o; o = o->fam_next) {
        if (o == comm || !o->head || o->pt_on) continue; /* a sibling's thread serves it */
        if (!atomic_exchange_explicit(&o->in_use, 1, memory_order_acquire)) {
            moved |= progress_once(o); /* not while another thread is inside it */
            atomic_store_explicit(&o->in_use, 0, memory_order_release);
        } else if (atomic_load_explicit(&o->in_use_owner, memory_order_acquire) ==
                   rcoll_thread_token()) {
            moved |= progress_once(o); /* this thread holds it for its group's end */
        }
    }
    return moved;
}

/* Sleep on comm's doorbell until a local peer moves (or a slice passes), after one more look
 * with the bell armed (util/bell.h: no wakeup is lost).  A waiter (done: its request's flag)
 * looks over the family and lets go of pt_lock while asleep when the thread runs; the
 * progress thread (done NULL) looks at comm alone and sleeps only while it has work nobody
 * else waits on.  Returns whether the look moved. */
static int sleep_on_bell(rcoll_comm_t comm, const int *done)
{
    uint32_t seen = rcoll_bell_arm(comm->bell_self);
    int moved = done ? progress_family(comm) : progress_once(comm);
    int sleep = done ? !*done
                     : comm->head && !comm->pt_stop &&
                           !atomic_load_explicit(&comm->pt_waiters, memory_order_relaxed);
    if (!moved && sleep) {
        if (comm->pt_on) pthread_mutex_unlock(&comm->pt_lock);
        rcoll_bell_sleep(comm->bell_self, seen, SLEEP_SLICE_NS);
        if (comm->pt_on) pthread_mutex_lock(&comm->pt_lock);
        comm->polls_since_clock = CLOCK_EVERY_POLLS - 1; /* the next pass reads the clock */
    }
    rcoll_bell_disarm(comm->bell_self);
    return moved;
}

rcoll_status_t rcoll_req_wait(struct rcoll_request *req) { return rcoll_req_wait_until(req, 0); }

rcoll_status_t rcoll_req_wait_until(struct rcoll_request *req, uint64_t deadline_ns)
{
    rcoll_comm_t comm = req->comm;
    rcoll_backoff_t bo;
    rcoll_backoff_init(&bo, (uint32_t)comm->cfg.spin,
                       (uint64_t)(comm->sleeps ? comm->cfg.sleep_after_us : comm->cfg.poll_us) *
                           1000);
    uint32_t polls = 0;
    while (!req->complete) {
        int moved = progress_family(comm);
        if (deadline_ns && !req->complete && (++polls % 64 == 0 || rcoll_backoff_idle(&bo)) &&
            rcoll_now_ns() >= deadline_ns)
            return RCOLL_INPROGRESS; /* rcoll_wait_for's slice is up */
        if (!moved && !req->complete && rcoll_backoff_idle(&bo) && may_sleep(comm)) {
            if (comm->pt_on) atomic_fetch_add_explicit(&comm->pt_waiters, 1, memory_order_relaxed);
            moved = sleep_on_bell(comm, &req->complete);
            if (comm->pt_on) atomic_fetch_sub_explicit(&comm->pt_waiters, 1, memory_order_relaxed);
            if (moved) rcoll_backoff_reset(&bo);
            continue;
        }
        if (moved) {
            rcoll_backoff_reset(&bo);
        } else if (comm->pt_on) { /* the caller holds pt_lock: let rcoll_test/wait look */
            atomic_fetch_add_explicit(&comm->pt_waiters, 1, memory_order_relaxed);
            pthread_mutex_unlock(&comm->pt_lock);
            rcoll_backoff_wait(&bo);
            pthread_mutex_lock(&comm->pt_lock);
            atomic_fetch_sub_explicit(&comm->pt_waiters, 1, memory_order_relaxed);
        } else {
            rcoll_backoff_wait(&bo);
        }
    }
    return req->status;
}

/* ------------------------------------------------------------------------------------------
 * The progress thread
 * ---------------------------------------------------------------------------------------- */

/* Runs the queue whenever it holds work no caller is waiting on (a waiter in rcoll_wait
 * progresses by itself, as without the thread, and the thread rests meanwhile), then polls
 * RCOLL_PROGRESS_POLL_US before it naps: a thread that spun for as long as a waiting caller
 * would take a core from the computation it is meant to run beside. */
static void *pt_main(void *arg)
{
    rcoll_comm_t comm = arg;
    rcoll_log_set_rank(comm->rank);
    rcoll_backoff_t bo;
    int poll_us = comm->cfg.progress_poll_us;
    if (comm->sleeps && comm->cfg.sleep_after_us < poll_us) poll_us = comm->cfg.sleep_after_us;
    rcoll_backoff_init(&bo, (uint32_t)comm->cfg.spin, (uint64_t)poll_us * 1000);
    pthread_mutex_lock(&comm->pt_lock);
    while (!comm->pt_stop) {
        if (!comm->head || comm->head->held || comm->failed != RCOLL_OK ||
            atomic_load_explicit(&comm->pt_waiters, memory_order_relaxed)) {
            pthread_cond_wait(&comm->pt_cv, &comm->pt_lock);
            rcoll_backoff_reset(&bo);
            continue;
        }
        if (rcoll_backoff_idle(&bo) && comm->sleeps) {
            /* new work and pt_stop ring the bell too (rcoll_pt_unlock, rcoll_pt_stop) */
            if (sleep_on_bell(comm, NULL)) rcoll_backoff_reset(&bo);
            continue;
        }
        int moved = progress_once(comm);
        pthread_mutex_unlock(&comm->pt_lock);
        if (moved)
            rcoll_backoff_reset(&bo);
        else
            rcoll_backoff_wait(&bo);
        pthread_mutex_lock(&comm->pt_lock);
    }
    pthread_mutex_unlock(&comm->pt_lock);
    return NULL;
}

rcoll_status_t rcoll_pt_start(rcoll_comm_t comm)
{
    if (!comm->cfg.progress_thread || comm->pt_on) return RCOLL_OK;
    if (pthread_mutex_init(&comm->pt_lock, NULL) != 0)
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "progress thread: mutex init failed");
    if (pthread_cond_init(&comm->pt_cv, NULL) != 0) {
        pthread_mutex_destroy(&comm->pt_lock);
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "progress thread: condition init failed");
    }
    if (pthread_cond_init(&comm->pt_done_cv, NULL) != 0) {
        pthread_cond_destroy(&comm->pt_cv);
        pthread_mutex_destroy(&comm->pt_lock);
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "progress thread: condition init failed");
    }
    comm->pt_sleepers = 0;
    comm->pt_stop = 0;
    atomic_store(&comm->pt_waiters, 0);
    comm->pt_on = 1; /* before the thread exists: it reads it (and so do rcoll_pt_lock/unlock) */
    int e = pthread_create(&comm->pt, NULL, pt_main, comm);
    if (e != 0) {
        comm->pt_on = 0;
        pthread_cond_destroy(&comm->pt_done_cv);
        pthread_cond_destroy(&comm->pt_cv);
        pthread_mutex_destroy(&comm->pt_lock);
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "progress thread: pthread_create failed: %s",
                             strerror(e));
    }
    return RCOLL_OK;
}

void rcoll_pt_stop(rcoll_comm_t comm)
{
    if (!comm->pt_on) return;
    pthread_mutex_lock(&comm->pt_lock);
    comm->pt_stop = 1;
    pthread_cond_signal(&comm->pt_cv);
    if (comm->sleeps) { /* asleep on the doorbell */
        rcoll_bell_fence();
        rcoll_bell_ring(comm->bell_self);
    }
    pthread_mutex_unlock(&comm->pt_lock);
    pthread_join(comm->pt, NULL);
    pthread_cond_destroy(&comm->pt_done_cv);
    pthread_cond_destroy(&comm->pt_cv);
    pthread_mutex_destroy(&comm->pt_lock);
    comm->pt_on = 0;
}

/* A short wait is fastest when the waiter progresses by itself (no hand-off between
 * threads), so it does for RCOLL_PROGRESS_POLL_US after its last progress, while the thread
 * rests.  A longer one (the peer is still computing) sleeps until the thread, progressing
 * with its own backoff, completes something: one poller per communicator, not two. */
rcoll_status_t rcoll_req_wait_shared(struct rcoll_request *req)
{
    return rcoll_req_wait_shared_until(req, 0);
}

rcoll_status_t rcoll_req_wait_shared_until(struct rcoll_request *req, uint64_t deadline_ns)
{
    rcoll_comm_t comm = req->comm;
    rcoll_backoff_t bo;
    rcoll_backoff_init(&bo, (uint32_t)comm->cfg.spin, 0);
    uint64_t poll_ns = (uint64_t)comm->cfg.progress_poll_us * 1000, idle_since = 0;
    atomic_fetch_add_explicit(&comm->pt_waiters, 1, memory_order_relaxed);
    pthread_mutex_lock(&comm->pt_lock);
    while (!req->complete) {
        int moved = progress_once(comm);
        if (req->complete) break;
        if (moved) {
            idle_since = 0;
        } else {
            uint64_t now = rcoll_now_ns();
            if (!idle_since) idle_since = now;
            if (now - idle_since >= poll_ns) break; /* long wait: sleep below */
            if (deadline_ns && now >= deadline_ns) break;
        }
        pthread_mutex_unlock(&comm->pt_lock); /* let other threads post and look */
        if (moved) {
            rcoll_backoff_reset(&bo);
        } else if (bo.iter < bo.spin_limit) {
            rcoll_backoff_wait(&bo);
        } else {
            sched_yield();
        }
        pthread_mutex_lock(&comm->pt_lock);
    }
    atomic_fetch_sub_explicit(&comm->pt_waiters, 1, memory_order_relaxed);
    if (!req->complete) {
        comm->pt_sleepers++;
        pthread_cond_signal(&comm->pt_cv); /* the thread takes over */
        if (!deadline_ns) {
            while (!req->complete) pthread_cond_wait(&comm->pt_done_cv, &comm->pt_lock);
        } else { /* pt_done_cv runs on CLOCK_REALTIME: the slice's rest from now */
            uint64_t now = rcoll_now_ns();
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t at = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                          (deadline_ns > now ? deadline_ns - now : 0);
            ts.tv_sec = (time_t)(at / 1000000000ull);
            ts.tv_nsec = (long)(at % 1000000000ull);
            while (!req->complete &&
                   pthread_cond_timedwait(&comm->pt_done_cv, &comm->pt_lock, &ts) == 0) {
            }
        }
        comm->pt_sleepers--;
    }
    if (!req->complete) { /* rcoll_wait_for's slice is up; the request stays the caller's */
        pthread_cond_signal(&comm->pt_cv);
        pthread_mutex_unlock(&comm->pt_lock);
        return RCOLL_INPROGRESS;
    }
    rcoll_status_t st = rcoll_req_finish(req, req->status);
    rcoll_req_release(req);
    pthread_cond_signal(&comm->pt_cv); /* the thread rests only while someone waits */
    pthread_mutex_unlock(&comm->pt_lock);
    return st;
}
