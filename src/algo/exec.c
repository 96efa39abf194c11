/*
 * exec.c - the executor of schedules (see sched.c for the pictures).
 *
 *   peer ──recv──> [staging slot | dst block] ──reduce/copy──> dst block ──send──> peer
 *
 * Steps are processed strictly in order; receives are posted ahead into staging slots
 * (bounded by nslots), sends are queued behind (bounded by RCOLL_EXEC_MAX_SENDS).  Never blocks
 * and never allocates: the caller loops, checking deadlines and the control plane.
 */
#include <string.h>

#include "algo/reduce.h"
#include "algo/exec.h"
#include "util/status.h"

void rcoll_exec_init(rcoll_exec_t *e, const rcoll_sched_t *s,
                          const rcoll_link_t *link, const void *src, void *dst,
                          rcoll_datatype_t dt, rcoll_op_t op, int tag)
{
    memset(e, 0, sizeof(*e));
    e->sched = *s;
    e->link = link;
    e->src = src;
    e->dst = dst;
    e->esize = rcoll_dt_size(dt);
    e->dt = dt;
    e->op = op;
    e->tag = tag;
}

void rcoll_exec_set_map(rcoll_exec_t *e, const int *pmap) { e->pmap = pmap; }

/* Step k of the schedule, its peers translated to communicator ranks. */
static void exec_step(const rcoll_exec_t *e, uint64_t k, rcoll_step_t *st)
{
    rcoll_sched_step(&e->sched, k, st);
    if (!e->pmap) return;
    if (st->has_recv) st->recv_peer = e->pmap[st->recv_peer];
    if (st->has_send) st->send_peer = e->pmap[st->send_peer];
}

static rcoll_status_t complete_sends(rcoll_exec_t *e, int *progressed)
{
    while (e->scount > 0) {
        int done = 0;
        rcoll_status_t st =
            e->link->tps[e->speer[e->shead]]->test(e->sreq[e->shead], &done, NULL);
        if (st < 0) {
            e->sreq[e->shead] = NULL;
            e->err_peer = e->speer[e->shead];
            return st;
        }
        if (!done) break;
        e->sreq[e->shead] = NULL;
        if (e->sslot[e->shead] >= 0) e->slot_busy[e->sslot[e->shead]] = 0;
        e->shead = (e->shead + 1) % RCOLL_EXEC_MAX_SENDS;
        e->scount--;
        *progressed = 1;
    }
    return RCOLL_OK;
}

static rcoll_status_t post_recvs(rcoll_exec_t *e)
{
    const rcoll_link_t *l = e->link;
    while (e->k_post < e->sched.nsteps && e->nposted < l->nslots) {
        rcoll_step_t st;
        exec_step(e, e->k_post, &st);
        if (!st.has_recv) {
            e->k_post++;
            continue;
        }
        int slot = (int)(e->rseq_post % (uint64_t)l->nslots);
        if (e->slot_busy[slot]) break; /* still being forwarded from */
        size_t bytes = st.count * e->esize;
        void *buf;
        void *mh = NULL;
        if (st.act == RCOLL_ACT_DIRECT) {
            buf = e->dst + st.doff * e->esize;
        } else {
            buf = l->staging + (size_t)slot * l->slot_bytes;
            mh = l->staging_mh[st.recv_peer];
        }
        void *req = NULL;
        int tag = st.more ? e->tag ^ RCOLL_EXEC_TAG_MORE : e->tag;
        rcoll_status_t rc = l->tps[st.recv_peer]->irecv(l->recv_comms[st.recv_peer], 1, &buf,
                                                        &bytes, &tag, &mh, &req);
        if (rc < 0) {
            e->err_peer = st.recv_peer;
            return rc;
        }
        if (!req) break; /* transport queue full: retry on the next call */
        e->rreq[slot] = req;
        e->rpeer[slot] = st.recv_peer;
        e->rdone[slot] = 0;
        e->rsize[slot] = 0;
        e->rseq_post++;
        e->nposted++;
        e->k_post++;
    }
    return RCOLL_OK;
}

/* Is the send of step j (already processed) complete?  Sends complete in order. */
static int send_step_done(const rcoll_exec_t *e, int64_t j)
{
    if (j < 0) return 1;
    return e->scount == 0 || (int64_t)e->sstep[e->shead] > j;
}

static void act(rcoll_exec_t *e, const rcoll_step_t *st, char *staged)
{
    char *d = e->dst + st->doff * e->esize;
    const char *s = st->red_buf == RCOLL_BUF_SRC ? e->src + st->off * e->esize : d;
    switch (st->act) {
    case RCOLL_ACT_REDUCE_STAGE:
        rcoll_reduce_local((char *)staged, staged, e->src + st->off * e->esize, st->count,
                           e->dt, e->op, 0);
        break;
    case RCOLL_ACT_REDUCE:
        rcoll_reduce_local(d, staged, s, st->count, e->dt, e->op, 0);
        break;
    case RCOLL_ACT_REDUCE_FINAL:
        rcoll_reduce_local(d, staged, s, st->count, e->dt, e->op, e->sched.nranks);
        break;
    case RCOLL_ACT_COPY:
        memcpy(d, staged, st->count * e->esize);
        break;
    case RCOLL_ACT_NONE:
    case RCOLL_ACT_DIRECT:
        break;
    }
}

static rcoll_status_t process_steps(rcoll_exec_t *e, int *progressed)
{
    const rcoll_link_t *l = e->link;
    while (e->k_proc < e->sched.nsteps) {
        rcoll_step_t st;
        exec_step(e, e->k_proc, &st);
        int slot = (int)(e->rseq_proc % (uint64_t)l->nslots);
        if (st.has_recv && !e->acted) {
            e->waiting_peer = st.recv_peer;
            if (e->rseq_proc >= e->rseq_post) {
                e->waiting_recv = 1;
                return RCOLL_OK; /* not posted yet */
            }
            if (!e->rdone[slot]) {
                int done = 0;
                size_t got = 0;
                rcoll_status_t rc = l->tps[e->rpeer[slot]]->test(e->rreq[slot], &done, &got);
                if (rc < 0) {
                    e->rreq[slot] = NULL;
                    e->err_peer = st.recv_peer;
                    return rc;
                }
                if (!done) {
                    e->waiting_recv = 1;
                    return RCOLL_OK;
                }
                e->rreq[slot] = NULL;
                e->rdone[slot] = 1;
                e->rsize[slot] = got;
                *progressed = 1;
            }
            if (e->rsize[slot] != st.count * e->esize) {
                /* Shorter than its receive (a longer one the transport refuses): the two
                 * sides disagree about the call, as with a tag that differs. */
                e->err_peer = st.recv_peer;
                return rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                     "received %zu bytes where %zu were expected (do all ranks "
                                     "pass the same count and datatype?)",
                                     e->rsize[slot], st.count * e->esize);
            }
        }
        if (!e->acted) {
            if (!send_step_done(e, st.wait_send_step)) {
                e->waiting_recv = 0;
                e->waiting_peer = e->speer[e->shead];
                return RCOLL_OK;
            }
            act(e, &st, l->staging + (size_t)slot * l->slot_bytes);
            e->acted = 1;
        }
        if (st.has_send) {
            if (e->scount == RCOLL_EXEC_MAX_SENDS) {
                e->waiting_recv = 0;
                e->waiting_peer = e->speer[e->shead];
                return RCOLL_OK;
            }
            const char *buf = st.send_buf == RCOLL_BUF_SRC   ? e->src + st.off * e->esize
                              : st.send_buf == RCOLL_BUF_DST ? e->dst + st.doff * e->esize
                                                             : l->staging +
                                                                   (size_t)slot * l->slot_bytes;
            void *req = NULL;
            rcoll_status_t rc = l->tps[st.send_peer]->isend(
                l->send_comms[st.send_peer], (void *)buf, st.count * e->esize,
                st.more ? e->tag ^ RCOLL_EXEC_TAG_MORE : e->tag, NULL, &req);
            if (rc < 0) {
                e->err_peer = st.send_peer;
                return rc;
            }
            if (!req) {
                e->waiting_recv = 0;
                e->waiting_peer = st.send_peer;
                return RCOLL_OK;
            }
            int tail = (e->shead + e->scount) % RCOLL_EXEC_MAX_SENDS;
            e->sreq[tail] = req;
            e->sstep[tail] = e->k_proc;
            e->speer[tail] = st.send_peer;
            e->sslot[tail] = st.send_buf == RCOLL_BUF_STAGE ? slot : -1;
            if (st.send_buf == RCOLL_BUF_STAGE) e->slot_busy[slot] = 1;
            e->scount++;
        }
        if (st.has_recv) {
            e->rseq_proc++;
            e->nposted--;
        }
        e->acted = 0;
        e->k_proc++;
        *progressed = 1;
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_exec_progress(rcoll_exec_t *e, int *progressed)
{
    int moved = 0;
    rcoll_status_t st = complete_sends(e, &moved);
    if (st == RCOLL_OK) st = post_recvs(e);
    if (st == RCOLL_OK) st = process_steps(e, &moved);
    if (st == RCOLL_OK) st = post_recvs(e);
    if (st == RCOLL_OK) st = complete_sends(e, &moved);
    *progressed = moved;
    if (st < 0) return st;
    if (e->k_proc == e->sched.nsteps && e->scount == 0) return RCOLL_OK;
    if (e->k_proc == e->sched.nsteps) {
        e->waiting_recv = 0;
        e->waiting_peer = e->speer[e->shead];
    }
    return RCOLL_INPROGRESS;
}
