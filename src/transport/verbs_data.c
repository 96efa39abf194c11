/*
 * verbs_data.c - the verbs data path.  A receiver advertises each grouped irecv by RDMA-writing
 * its buffers (address, rkey, size, tag) into the sender's FIFO; the sender RDMA-writes each
 * message into the next advertised buffer, split over the connection's QPs, each part a chain
 * of unsignaled WRITEs ending in a signaled WRITE WITH IMMEDIATE (immediate = part length).
 * The first error completion or fatal event fails the comm and every request on it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/verbs.h"
#include "util/log.h"
#include "util/status.h"

enum { WR_SEND = 1, WR_FIFO = 2, WR_RECV = 3, WR_FLUSH = 4 };
#define WR_ID(kind, idx, nwr) (((uint64_t)(kind) << 56) | ((uint64_t)(idx) << 16) | (nwr))
#define WR_KIND(id) ((int)((id) >> 56))
#define WR_IDX(id) ((int)(((id) >> 16) & 0xffffffffu))
#define WR_NWR(id) ((int)((id) & 0xffffu))

#define FIFO_SIGNAL_EVERY 8  /* FIFO writes per signaled one */
#define POLL_BATCH 16
#define IDLE_CHECK_POLLS 4096 /* idle tests between looks at async events and the TCP socket */

/* ---------------------------------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------------------------------ */

static rcoll_vrb_req_t *req_get(rcoll_vrb_comm_t *c)
{
    if (c->outstanding >= RCOLL_VRB_MAX_REQS) return NULL;
    for (int i = 0; i < RCOLL_VRB_MAX_REQS; i++) {
        rcoll_vrb_req_t *r = &c->reqs[i];
        if (r->used) continue;
        memset(r, 0, sizeof(*r));
        r->used = 1;
        r->comm = c;
        c->outstanding++;
        return r;
    }
    return NULL;
}

static void req_put(rcoll_vrb_req_t *r)
{
    rcoll_vrb_comm_t *c = r->comm;
    for (int k = 0; k < r->n; k++) rcoll_vrb_mr_put(c->dev->mrs, r->mr[k]);
    r->used = 0;
    c->outstanding--;
}

/* The registration of a buffer, referenced for a request: the caller's (mhandle, from
 * reg_mr: the only way CUDA memory comes) or the cache's host-memory one. */
static rcoll_status_t buf_mr(rcoll_vrb_comm_t *c, const void *data, size_t size, void *mhandle,
                             rcoll_vrb_mr_t **out)
{
    *out = NULL;
    if (size == 0) return RCOLL_OK;
    rcoll_vrb_mr_t *m = mhandle;
    if (m) {
        if ((uintptr_t)data < m->start || (uintptr_t)data + size > m->end)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs: the %zu bytes at %p lie outside "
                                 "the registration passed with them (%#lx..%#lx)", size, data,
                                 (unsigned long)m->start, (unsigned long)m->end);
        if (m->cache != c->dev->mrs) /* registered on the port the comm moved away from */
            return rcoll_vrb_mr_on(c->dev->mrs, m, out);
        rcoll_vrb_mr_ref(c->dev->mrs, m);
        *out = m;
        return RCOLL_OK;
    }
    return rcoll_vrb_mr_get(c->dev->mrs, data, size, RCOLL_PTR_HOST, out);
}

/* Memory the host must not read (the NIC does): CUDA memory. */
static int on_gpu(const void *mhandle)
{
    return mhandle && ((const rcoll_vrb_mr_t *)mhandle)->mem_type != RCOLL_PTR_HOST;
}

rcoll_status_t rcoll_vrb_reg_mr(void *comm, void *data, size_t size, int mem_type,
                               void **mhandle)
{
    rcoll_vrb_comm_t *c = comm;
    if (!c || !mhandle) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs reg_mr: NULL");
    rcoll_vrb_mr_t *m;
    rcoll_status_t st = rcoll_vrb_mr_get(c->dev->mrs, data, size, mem_type, &m);
    if (st == RCOLL_OK) *mhandle = m;
    return st;
}

rcoll_status_t rcoll_vrb_dereg_mr(void *comm, void *mhandle)
{
    rcoll_vrb_comm_t *c = comm;
    if (c && mhandle) rcoll_vrb_mr_put(c->dev->mrs, mhandle);
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Completions
 * ------------------------------------------------------------------------------------------ */

rcoll_status_t rcoll_vrb_post_recvs(rcoll_vrb_comm_t *c, int qi, int count)
{
    struct ibv_recv_wr wr[32];
    while (count > 0) {
        int n = count < 32 ? count : 32;
        for (int i = 0; i < n; i++)
            wr[i] = (struct ibv_recv_wr){.wr_id = WR_ID(WR_RECV, qi, 0),
                                         .next = i + 1 < n ? &wr[i + 1] : NULL};
        struct ibv_recv_wr *bad;
        int rc = rcoll_ibv->post_recv(c->qp[qi], wr, &bad);
        if (rc) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, rc, "verbs: cannot post receives "
                                           "on QP 0x%x", c->qp[qi]->qp_num);
        count -= n;
    }
    return RCOLL_OK;
}

static int qp_index(const rcoll_vrb_comm_t *c, uint32_t qpn)
{
    for (int q = 0; q < c->nqps; q++)
        if (c->qp[q]->qp_num == qpn) return q;
    return -1;
}

static const char *wr_what(int kind)
{
    return kind == WR_SEND ? "RDMA write of a message"
           : kind == WR_FIFO ? "RDMA write of a receive advertisement"
                             : "receive of an immediate";
}

/* Completion errors that say the path died (a connection moves on them); the others (access,
 * length, receiver not ready) are the message's or the peer's and fail the connection. */
static int path_error(enum ibv_wc_status s)
{
    return s == IBV_WC_RETRY_EXC_ERR || s == IBV_WC_WR_FLUSH_ERR || s == IBV_WC_LOC_QP_OP_ERR ||
           s == IBV_WC_FATAL_ERR || s == IBV_WC_RESP_TIMEOUT_ERR || s == IBV_WC_GENERAL_ERR;
}

static rcoll_status_t wc_error(rcoll_vrb_comm_t *c, const struct ibv_wc *wc)
{
    char lg[64], rg[64];
    if (c->fo && path_error(wc->status)) { /* the path, not the message: move (verbs_move.c) */
        if (!c->lost) {
            snprintf(c->lost_text, sizeof(c->lost_text), "%s failed on %s port %d: %s",
                     wr_what(WR_KIND(wc->wr_id)), c->dev->name, c->dev->port,
                     rcoll_ibv->wc_status_str(wc->status));
            __atomic_store_n(&c->lost, 1, __ATOMIC_RELEASE);
        }
        return RCOLL_OK;
    }
    return rcoll_vrb_comm_fail(
        c, RCOLL_ERR_REMOTE, "verbs: %s failed on %s port %d QPN 0x%x (GID %s) with peer "
        "%s QPN 0x%x (GID %s): %s (status %d, vendor error 0x%x)", wr_what(WR_KIND(wc->wr_id)),
        c->dev->name, c->dev->port, wc->qp_num, rcoll_vrb_gid_str(c->local.gid, lg, sizeof(lg)),
        c->remote.dev, c->remote.qpn[0], rcoll_vrb_gid_str(c->remote.gid, rg, sizeof(rg)),
        rcoll_ibv->wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
}

/* An immediate arrived on QP q: credit it to the message it belongs to (and post another
 * receive WR in place of the one it took, unless the QP is being left). */
static rcoll_status_t on_immediate(rcoll_vrb_comm_t *c, int q, uint32_t imm, int repost)
{
    if (imm == RCOLL_VRB_IMM_ERROR)
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_PROTOCOL, "verbs: the sender (%s) gave up on a "
                                  "message: it was larger than the buffer posted here",
                                  c->remote.dev);
    uint64_t k = c->imm_seen[q]++;
    if (k >= c->msgs_posted)
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_PROTOCOL, "verbs: an immediate arrived for no "
                                  "advertised buffer (message %llu)", (unsigned long long)k);
    rcoll_vrb_pending_t *p = &c->ring[k % RCOLL_VRB_MSG_RING];
    rcoll_vrb_req_t *r = p->req;
    r->got[p->entry] += imm;
    if (r->got[p->entry] > r->size[p->entry])
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_PROTOCOL, "verbs: received %zu bytes into a "
                                  "%zu-byte buffer", r->got[p->entry], r->size[p->entry]);
    if (++r->parts[p->entry] == c->nqps) r->left--;
    return repost ? rcoll_vrb_post_recvs(c, q, 1) : RCOLL_OK;
}

static rcoll_status_t on_completion(rcoll_vrb_comm_t *c, const struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS) return wc_error(c, wc);
    int q = qp_index(c, wc->qp_num);
    if (q < 0) return rcoll_vrb_comm_fail(c, RCOLL_ERR_INTERNAL, "verbs: completion of QP 0x%x "
                                         "that this comm does not own", wc->qp_num);
    switch (WR_KIND(wc->wr_id)) {
    case WR_RECV:
        return on_immediate(c, q, ntohl(wc->imm_data), 1);
    case WR_SEND:
        c->sq_used[q] -= WR_NWR(wc->wr_id);
        c->reqs[WR_IDX(wc->wr_id)].left--;
        return RCOLL_OK;
    default:
        c->sq_used[q] -= WR_NWR(wc->wr_id);
        return RCOLL_OK;
    }
}

void rcoll_vrb_count_completion(rcoll_vrb_comm_t *c, const struct ibv_wc *wc)
{
    int q = qp_index(c, wc->qp_num);
    if (wc->status != IBV_WC_SUCCESS || q < 0) return;
    if (WR_KIND(wc->wr_id) == WR_RECV) {
        uint32_t imm = ntohl(wc->imm_data);
        if (imm != RCOLL_VRB_IMM_ERROR && c->imm_seen[q] < c->msgs_posted)
            on_immediate(c, q, imm, 0);
    } else if (WR_KIND(wc->wr_id) == WR_SEND) {
        c->reqs[WR_IDX(wc->wr_id)].left--;
    }
}

/* Has the peer's setup socket closed (its process gone)? */
static int peer_vanished(const rcoll_vrb_comm_t *c)
{
    char b;
    if (c->fd < 0) return 0;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Completions of the flush QP's RDMA reads. */
static rcoll_status_t progress_flush(rcoll_vrb_comm_t *c)
{
    struct ibv_wc wc[POLL_BATCH];
    int n = 0;
    while (!c->failed && (n = rcoll_ibv->poll_cq(c->flush_cq, POLL_BATCH, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                return rcoll_vrb_comm_fail(
                    c, RCOLL_ERR_SYSTEM, "verbs: the flush of received GPU data (an RDMA read "
                    "on %s QPN 0x%x) failed: %s (status %d, vendor error 0x%x)", c->dev->name,
                    wc[i].qp_num, rcoll_ibv->wc_status_str(wc[i].status), (int)wc[i].status,
                    wc[i].vendor_err);
            c->reqs[WR_IDX(wc[i].wr_id)].left--;
        }
    }
    if (!c->failed && n < 0)
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_SYSTEM, "verbs: polling the flush CQ of %s "
                                  "failed", c->dev->name);
    return RCOLL_OK;
}

static rcoll_status_t replay_step(rcoll_vrb_comm_t *c);

static rcoll_status_t progress(rcoll_vrb_comm_t *c)
{
    struct ibv_wc wc[POLL_BATCH];
    int n = 0;
    if (c->fo) { /* a move under way, or starting (verbs_move.c) */
        rcoll_status_t st = rcoll_vrb_move_progress(c);
        if (st != RCOLL_OK) return st;
        if (c->mv_state || c->lost) return RCOLL_OK;
        if (c->replay && (st = replay_step(c)) != RCOLL_OK) return st;
    }
    if (c->flush_cq) {
        rcoll_status_t st = progress_flush(c);
        if (st != RCOLL_OK) return st;
    }
    while (!c->failed && !c->lost && (n = rcoll_ibv->poll_cq(c->cq, POLL_BATCH, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            rcoll_status_t st = on_completion(c, &wc[i]);
            if (st != RCOLL_OK) return st;
        }
        c->idle_polls = 0;
    }
    if (!c->failed && n < 0)
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_SYSTEM, "verbs: polling the CQ of %s failed",
                                  c->dev->name);
    if (c->failed) return rcoll_err_set(c->failed, "%s", c->fail_text);
    return RCOLL_OK;
}

void rcoll_vrb_poke(void *comm)
{
    rcoll_vrb_comm_t *c = comm;
    if (!c || !c->fo || c->failed) return;
    /* an error is kept in c (failed, fail_text): the next request on c returns it */
    (void)progress(c);
}

/* Called while waiting (for request r, or for room when r is NULL): now and then look at
 * async events and the peer's socket. */
static rcoll_status_t idle_check(rcoll_vrb_comm_t *c, const rcoll_vrb_req_t *r)
{
    if (++c->idle_polls % IDLE_CHECK_POLLS) return RCOLL_OK;
    rcoll_vrb_poll_async();
    if (c->dev->dead && !c->failed && c->fo && !c->lost && !c->mv_state) {
        snprintf(c->lost_text, sizeof(c->lost_text), "%s", c->dev->dead_text);
        __atomic_store_n(&c->lost, 1, __ATOMIC_RELEASE);
        return progress(c);
    }
    if (c->dev->dead && !c->failed && !c->fo)
        rcoll_vrb_comm_fail(c, RCOLL_ERR_REMOTE, "verbs: %s", c->dev->dead_text);
    if (!c->failed && peer_vanished(c) && progress(c) == RCOLL_OK && (!r || r->left > 0)) {
        char rg[64];
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_REMOTE, "verbs: the peer (%s, GID %s) closed "
                                  "its connection while a transfer was outstanding",
                                  c->remote.dev, rcoll_vrb_gid_str(c->remote.gid, rg,
                                                                  sizeof(rg)));
    }
    if (c->failed) return rcoll_err_set(c->failed, "%s", c->fail_text);
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Send
 * ------------------------------------------------------------------------------------------ */

/* The FIFO slot the next message goes to, or NULL while the receiver has not posted it. */
static const rcoll_vrb_fifo_slot_t *ready_slot(rcoll_vrb_comm_t *c)
{
    const volatile rcoll_vrb_fifo_slot_t *s = &c->fifo[c->slot_seq % RCOLL_VRB_NSLOTS];
    uint64_t want = c->slot_seq + 1;
    if (s->seq_head != want || s->seq_tail != want) return NULL;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return (const rcoll_vrb_fifo_slot_t *)s;
}

/* Post part [off, off+len) of a message on QP q: unsignaled WRITEs, then a signaled WRITE
 * WITH IMM carrying len. */
static rcoll_status_t post_part(rcoll_vrb_comm_t *c, int q, rcoll_vrb_req_t *r, const char *data,
                                size_t off, size_t len, const rcoll_vrb_fifo_entry_t *e,
                                uint32_t lkey, int may_inline)
{
    struct ibv_sge sge[2];
    struct ibv_send_wr wr[2];
    int nwr = len > RCOLL_VRB_WR_BYTES ? 2 : 1;
    for (int w = 0; w < nwr; w++) {
        size_t woff = off + (size_t)w * RCOLL_VRB_WR_BYTES;
        size_t wlen = w == nwr - 1 ? len - (size_t)w * RCOLL_VRB_WR_BYTES : RCOLL_VRB_WR_BYTES;
        sge[w] = (struct ibv_sge){.addr = (uintptr_t)(data + woff), .length = (uint32_t)wlen,
                                  .lkey = lkey};
        wr[w] = (struct ibv_send_wr){.sg_list = &sge[w], .num_sge = wlen ? 1 : 0,
                                     .opcode = IBV_WR_RDMA_WRITE,
                                     .wr = {.rdma = {.remote_addr = e->addr + woff,
                                                     .rkey = e->rkey}}};
        if (w) wr[w - 1].next = &wr[w];
    }
    struct ibv_send_wr *last = &wr[nwr - 1];
    last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last->imm_data = htonl((uint32_t)len);
    /* inline: the host copies the bytes into the WR, so never for GPU memory */
    last->send_flags = IBV_SEND_SIGNALED |
                       (may_inline && len <= c->max_inline ? IBV_SEND_INLINE : 0);
    last->wr_id = WR_ID(WR_SEND, r - c->reqs, nwr);
    struct ibv_send_wr *bad;
    int rc = rcoll_ibv->post_send(c->qp[q], wr, &bad);
    if (rc)
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_SYSTEM, "verbs: posting an RDMA write on QP "
                                  "0x%x failed: %s", c->qp[q]->qp_num, strerror(rc));
    c->sq_used[q] += nwr;
    return RCOLL_OK;
}

/* Tell the receiver its message will not come (best effort), then fail the comm. */
static rcoll_status_t give_up(rcoll_vrb_comm_t *c, const rcoll_vrb_fifo_entry_t *e,
                              rcoll_status_t st, const char *why)
{
    struct ibv_send_wr wr = {.wr_id = WR_ID(WR_FIFO, 0, 1), .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(RCOLL_VRB_IMM_ERROR),
                             .wr = {.rdma = {.remote_addr = e->addr, .rkey = e->rkey}}};
    struct ibv_send_wr *bad;
    if (c->sq_used[0] < c->sq_depth && rcoll_ibv->post_send(c->qp[0], &wr, &bad) == 0)
        c->sq_used[0]++;
    return rcoll_vrb_comm_fail(c, st, "verbs: %s", why);
}

/* The entry of slot s a message of size bytes with tag goes to (checked), consumed. */
static rcoll_status_t take_entry(rcoll_vrb_comm_t *c, const rcoll_vrb_fifo_slot_t *s, int tag,
                                 size_t size, rcoll_vrb_fifo_entry_t *out)
{
    if (s->n < 1 || s->n > RCOLL_TRANSPORT_MAX_RECVS)
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_PROTOCOL, "verbs: receive advertisement with "
                                  "%u buffers", s->n);
    const rcoll_vrb_fifo_entry_t e = s->e[c->slot_entry];
    char why[160];
    if (e.tag != -1 && tag != -1 && e.tag != tag) {
        snprintf(why, sizeof(why), "message tag %d does not match the receive's tag %d", tag,
                 e.tag);
        return give_up(c, &e, RCOLL_ERR_INVALID_USAGE, why);
    }
    if (size > e.size) {
        snprintf(why, sizeof(why), "a %zu-byte message is larger than the %llu-byte buffer the "
                 "receiver posted", size, (unsigned long long)e.size);
        return give_up(c, &e, RCOLL_ERR_INVALID_USAGE, why);
    }
    *out = e;
    return RCOLL_OK;
}

/* Post request r's message into entry e of slot s (split over the QPs) and move past it. */
static rcoll_status_t post_msg(rcoll_vrb_comm_t *c, rcoll_vrb_req_t *r,
                               const rcoll_vrb_fifo_slot_t *s, const rcoll_vrb_fifo_entry_t *e)
{
    size_t size = r->size[0];
    uint32_t lkey = r->mr[0] ? r->mr[0]->mr->lkey : 0;
    size_t part = (size + (size_t)c->nqps - 1) / (size_t)c->nqps;
    rcoll_status_t st = RCOLL_OK;
    for (int q = 0; q < c->nqps && st == RCOLL_OK; q++) {
        size_t off = (size_t)q * part < size ? (size_t)q * part : size;
        size_t len = size - off < part ? size - off : part;
        st = post_part(c, q, r, r->data, off, len, e, lkey, r->may_inline);
        if (st == RCOLL_OK) r->left++;
    }
    if (++c->slot_entry == (int)s->n) {
        c->slot_entry = 0;
        c->slot_seq++;
    }
    return st;
}

/* Room for two WRs per QP (a part needs at most two). */
static int sq_room(rcoll_vrb_comm_t *c)
{
    for (int q = 0; q < c->nqps; q++)
        if (c->sq_used[q] + 2 > c->sq_depth) return 0;
    return 1;
}

rcoll_status_t rcoll_vrb_isend(void *send_comm, void *data, size_t size, int tag,
                              void *mhandle, void **request)
{
    rcoll_vrb_comm_t *c = send_comm;
    if (!c || !request || c->is_recv || (size && !data))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs isend: bad arguments");
    *request = NULL;
    rcoll_status_t st = progress(c);
    if (st != RCOLL_OK) return st;
    if (size > RCOLL_VRB_MAX_MSG)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs isend: %zu bytes exceed the "
                             "transport's %zu-byte message limit", size, RCOLL_VRB_MAX_MSG);
    if (c->fo && (c->mv_state || c->lost || c->replay)) return RCOLL_OK; /* moving: later */
    const rcoll_vrb_fifo_slot_t *s = ready_slot(c);
    if (!s || !sq_room(c)) return idle_check(c, NULL);
    rcoll_vrb_fifo_entry_t e;
    if ((st = take_entry(c, s, tag, size, &e)) != RCOLL_OK) return st;
    rcoll_vrb_req_t *r = req_get(c);
    if (!r) return RCOLL_OK;
    r->n = 1;
    r->size[0] = size;
    r->data = data;
    r->tag = tag;
    r->may_inline = !on_gpu(mhandle);
    st = size > c->max_inline || !r->may_inline ? buf_mr(c, data, size, mhandle, &r->mr[0])
                                                : RCOLL_OK;
    if (st != RCOLL_OK) {
        req_put(r);
        return st;
    }
    r->msg = c->msgs_sent++;
    st = post_msg(c, r, s, &e);
    if (st != RCOLL_OK) return st; /* the request stays with the failed comm */
    *request = r;
    return RCOLL_OK;
}

/* Posting every request of a message from c->replay_next on again, in order, as the
 * receiver's new advertisements arrive (after a move). */
static rcoll_status_t replay_step(rcoll_vrb_comm_t *c)
{
    while (c->replay_next < c->msgs_sent) {
        rcoll_vrb_req_t *r = NULL;
        for (int i = 0; i < RCOLL_VRB_MAX_REQS && !r; i++)
            if (c->reqs[i].used && c->reqs[i].replaying && c->reqs[i].msg == c->replay_next)
                r = &c->reqs[i];
        if (!r) /* completed here (and returned) but not whole there: it cannot be sent again */
            return rcoll_vrb_comm_fail(c, RCOLL_ERR_INTERNAL, "verbs failover: message %llu "
                                      "completed here but the receiver (%s) does not have it",
                                      (unsigned long long)c->replay_next, c->remote.dev);
        const rcoll_vrb_fifo_slot_t *s = ready_slot(c);
        if (!s || !sq_room(c)) return RCOLL_OK;
        rcoll_vrb_fifo_entry_t e;
        rcoll_status_t st = take_entry(c, s, r->tag, r->size[0], &e);
        if (st != RCOLL_OK) return st;
        if (!r->mr[0] && r->size[0] > c->max_inline &&
            (st = buf_mr(c, r->data, r->size[0], NULL, &r->mr[0])) != RCOLL_OK)
            return rcoll_vrb_comm_fail(c, st, "%s", rcoll_err_get());
        if (r->mr[0] && r->mr[0]->cache != c->dev->mrs) { /* the registration of the old port */
            rcoll_vrb_mr_t *m = NULL;
            st = rcoll_vrb_mr_on(c->dev->mrs, r->mr[0], &m);
            if (st != RCOLL_OK) return rcoll_vrb_comm_fail(c, st, "%s", rcoll_err_get());
            rcoll_vrb_mr_put(c->dev->mrs, r->mr[0]);
            r->mr[0] = m;
        }
        r->replaying = 0;
        r->left = 0;
        if ((st = post_msg(c, r, s, &e)) != RCOLL_OK) return st;
        c->replay_next++;
    }
    c->replay = 0;
    return RCOLL_OK;
}

void rcoll_vrb_send_rewind(rcoll_vrb_comm_t *c, uint64_t done)
{
    for (int i = 0; i < RCOLL_VRB_MAX_REQS; i++) {
        rcoll_vrb_req_t *r = &c->reqs[i];
        if (!r->used || r->is_recv || r->is_flush) continue;
        if (r->msg < done) { /* the receiver has it whole */
            r->left = 0;
            r->replaying = 0;
        } else {
            r->left = 1; /* not complete until written again */
            r->replaying = 1;
        }
    }
    c->slot_seq = 0;
    c->slot_entry = 0;
    c->replay_next = done;
    c->replay = done < c->msgs_sent;
}

/* ---------------------------------------------------------------------------------------------
 * Receive
 * ------------------------------------------------------------------------------------------ */

/* RDMA-write the advertisement of request r (slot seq) into the sender's FIFO. */
static rcoll_status_t advertise(rcoll_vrb_comm_t *c, uint64_t seq)
{
    rcoll_vrb_fifo_slot_t *s = &c->fifo[(seq - 1) % RCOLL_VRB_NSLOTS];
    int signal = ++c->unsignaled >= FIFO_SIGNAL_EVERY;
    struct ibv_sge sge = {.addr = (uintptr_t)s, .length = sizeof(*s), .lkey = c->fifo_mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = WR_ID(WR_FIFO, 0, c->unsignaled), .sg_list = &sge, .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE, .send_flags = signal ? IBV_SEND_SIGNALED : 0,
        .wr = {.rdma = {.remote_addr = c->remote.fifo_addr +
                                       ((seq - 1) % RCOLL_VRB_NSLOTS) * sizeof(*s),
                        .rkey = c->remote.fifo_rkey}}};
    struct ibv_send_wr *bad;
    int rc = rcoll_ibv->post_send(c->qp[0], &wr, &bad);
    if (rc)
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_SYSTEM, "verbs: posting a receive advertisement "
                                  "on QP 0x%x failed: %s", c->qp[0]->qp_num, strerror(rc));
    c->sq_used[0]++;
    if (signal) c->unsignaled = 0;
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **request)
{
    rcoll_vrb_comm_t *c = recv_comm;
    if (!c || !request || !c->is_recv || n < 1 || n > RCOLL_TRANSPORT_MAX_RECVS || !data ||
        !sizes)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs irecv: bad arguments");
    *request = NULL;
    rcoll_status_t st = progress(c);
    if (st != RCOLL_OK) return st;
    if (c->fo && (c->mv_state || c->lost)) return RCOLL_OK; /* moving: later */
    if (c->outstanding >= RCOLL_VRB_NSLOTS || c->sq_used[0] + 1 > c->sq_depth)
        return idle_check(c, NULL);
    rcoll_vrb_req_t *r = req_get(c);
    if (!r) return RCOLL_OK;
    r->is_recv = 1;
    uint64_t seq = c->slot_seq + 1;
    rcoll_vrb_fifo_slot_t *s = &c->fifo[(seq - 1) % RCOLL_VRB_NSLOTS];
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < n; i++) {
        if (sizes[i] > RCOLL_VRB_MAX_MSG) sizes[i] = RCOLL_VRB_MAX_MSG; /* nothing bigger comes */
        st = buf_mr(c, data[i], sizes[i], mhandles ? mhandles[i] : NULL, &r->mr[i]);
        r->n = i + 1;
        if (st != RCOLL_OK) {
            req_put(r);
            return st;
        }
        r->size[i] = sizes[i];
        r->rbuf[i] = data[i];
        r->rtag[i] = tags ? tags[i] : -1;
        /* an empty buffer gets the FIFO's address: a zero-byte write touches nothing */
        s->e[i] = (rcoll_vrb_fifo_entry_t){
            .addr = r->mr[i] ? (uintptr_t)data[i] : (uintptr_t)c->fifo,
            .size = sizes[i], .rkey = r->mr[i] ? r->mr[i]->mr->rkey : c->fifo_mr->rkey,
            .tag = tags ? tags[i] : -1};
    }
    r->left = n;
    s->seq_head = s->seq_tail = seq;
    s->n = (uint32_t)n;
    st = advertise(c, seq);
    if (st != RCOLL_OK) return st; /* the request stays with the failed comm */
    for (int i = 0; i < n; i++) {
        c->ring[c->msgs_posted % RCOLL_VRB_MSG_RING] = (rcoll_vrb_pending_t){.req = r, .entry = i};
        c->msgs_posted++;
    }
    c->slot_seq = seq;
    *request = r;
    return RCOLL_OK;
}

uint64_t rcoll_vrb_recv_done(rcoll_vrb_comm_t *c)
{
    uint64_t done = c->msgs_posted;
    for (int q = 0; q < c->nqps; q++)
        if (c->imm_seen[q] < done) done = c->imm_seen[q];
    for (uint64_t k = done; k < c->msgs_posted; k++) { /* these start over */
        rcoll_vrb_pending_t *p = &c->ring[k % RCOLL_VRB_MSG_RING];
        p->req->got[p->entry] = 0;
        p->req->parts[p->entry] = 0;
    }
    for (int q = 0; q < RCOLL_VRB_MAX_QPS; q++) c->imm_seen[q] = done;
    return done;
}

rcoll_status_t rcoll_vrb_readvertise(rcoll_vrb_comm_t *c, uint64_t from)
{
    c->slot_seq = 0;
    for (uint64_t k = from; k < c->msgs_posted;) {
        rcoll_vrb_req_t *r = c->ring[k % RCOLL_VRB_MSG_RING].req;
        uint64_t seq = c->slot_seq + 1;
        rcoll_vrb_fifo_slot_t *s = &c->fifo[(seq - 1) % RCOLL_VRB_NSLOTS];
        memset(s, 0, sizeof(*s));
        int n = 0;
        for (; k < c->msgs_posted && c->ring[k % RCOLL_VRB_MSG_RING].req == r; k++) {
            int i = c->ring[k % RCOLL_VRB_MSG_RING].entry;
            if (r->mr[i] && r->mr[i]->cache != c->dev->mrs) { /* the old port's registration */
                rcoll_vrb_mr_t *m = NULL;
                rcoll_status_t st = rcoll_vrb_mr_on(c->dev->mrs, r->mr[i], &m);
                if (st != RCOLL_OK) return st;
                rcoll_vrb_mr_put(c->dev->mrs, r->mr[i]);
                r->mr[i] = m;
            }
            s->e[n++] = (rcoll_vrb_fifo_entry_t){
                .addr = r->mr[i] ? (uintptr_t)r->rbuf[i] : (uintptr_t)c->fifo,
                .size = r->size[i], .rkey = r->mr[i] ? r->mr[i]->mr->rkey : c->fifo_mr->rkey,
                .tag = r->rtag[i]};
        }
        s->n = (uint32_t)n;
        s->seq_head = s->seq_tail = seq;
        rcoll_status_t st = advertise(c, seq);
        if (st != RCOLL_OK) return st;
        c->slot_seq = seq;
    }
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Flush: make data the NIC wrote into GPU memory visible to the GPU's kernels.  PCIe writes
 * may still be in flight when the completion arrives; a read from the same memory through the
 * NIC (an RDMA READ on a QP connected to itself, as NCCL does) returns only after them.  One
 * read of the last non-empty CUDA buffer of the receive flushes them all.
 * ------------------------------------------------------------------------------------------ */

rcoll_status_t rcoll_vrb_iflush(void *recv_comm, int n, void **data, int *sizes,
                               void **mhandles, void **request)
{
    rcoll_vrb_comm_t *c = recv_comm;
    if (!c || !request || !c->is_recv || n < 0 || n > RCOLL_TRANSPORT_MAX_RECVS ||
        (n && (!data || !sizes)))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs iflush: bad arguments");
    *request = NULL;
    if (c->failed) return rcoll_err_set(c->failed, "%s", c->fail_text);
    int last = -1;
    for (int i = 0; i < n; i++)
        if (sizes[i] > 0 && mhandles && on_gpu(mhandles[i])) last = i;
    if (last < 0) return RCOLL_OK; /* host memory only: visible already */
    rcoll_status_t st;
    if (!c->flush_qp && (st = rcoll_vrb_flush_setup(c)) != RCOLL_OK)
        return rcoll_vrb_comm_fail(c, st, "%s", rcoll_err_get());
    rcoll_vrb_req_t *r = req_get(c);
    if (!r)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "verbs iflush: all %d requests of the "
                             "comm are in use", RCOLL_VRB_MAX_REQS);
    rcoll_vrb_mr_t *m = mhandles[last];
    st = buf_mr(c, data[last], 1, m, &r->mr[0]); /* held until the read is done */
    if (st != RCOLL_OK) {
        req_put(r);
        return st;
    }
    r->is_flush = 1;
    r->n = 1;
    r->left = 1;
    struct ibv_sge sge = {.addr = (uintptr_t)c->flush_buf, .length = 1,
                          .lkey = c->flush_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = WR_ID(WR_FLUSH, r - c->reqs, 1), .sg_list = &sge,
                             .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
                             .send_flags = IBV_SEND_SIGNALED,
                             .wr = {.rdma = {.remote_addr = (uintptr_t)data[last],
                                             .rkey = m->mr->rkey}}};
    struct ibv_send_wr *bad;
    int rc = rcoll_ibv->post_send(c->flush_qp, &wr, &bad);
    if (rc) {
        req_put(r);
        return rcoll_vrb_comm_fail(c, RCOLL_ERR_SYSTEM, "verbs: posting the flush read on QP "
                                  "0x%x failed: %s", c->flush_qp->qp_num, strerror(rc));
    }
    *request = r;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Test and close
 * ------------------------------------------------------------------------------------------ */

rcoll_status_t rcoll_vrb_test(void *request, int *done, size_t *sizes)
{
    rcoll_vrb_req_t *r = request;
    if (!r || !done || !r->used) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs test: bad "
                                                      "request");
    rcoll_vrb_comm_t *c = r->comm;
    *done = 0;
    rcoll_status_t st = progress(c);
    if (st == RCOLL_OK && r->left > 0) st = idle_check(c, r);
    if (st != RCOLL_OK) {
        req_put(r);
        return st;
    }
    if (r->left > 0) return RCOLL_OK;
    for (int i = 0; sizes && !r->is_flush && i < r->n; i++)
        sizes[i] = r->is_recv ? r->got[i] : r->size[i];
    req_put(r);
    *done = 1;
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_close_comm(void *comm)
{
    rcoll_vrb_comm_t *c = comm;
    if (!c) return RCOLL_OK;
    rcoll_vrb_live_remove(c);
    rcoll_vrb_comm_destroy(c);
    return RCOLL_OK;
}
