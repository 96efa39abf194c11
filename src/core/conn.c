/*
 * conn.c - a communicator's connections to its peers, made on demand without blocking.
 * Operations say which peers they send to and receive from (rcoll_conn_want); progress loops
 * call rcoll_conn_progress until those connections exist.  An accepted connection names its
 * rank and communicator in a hello; anything else is a protocol error, never trusted.
 * Does not move collective data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

#define CONN_HELLO_MAGIC 0x52484c4fu /* "RHLO" */

typedef struct {
    uint32_t magic;
    int32_t rank;
    uint64_t ctx;   /* communicator id: the bootstrap-agreed id of this communicator */
    uint32_t epoch; /* its connection epoch: suspensions so far (suspend.c) */
    uint32_t pad;
} conn_hello_t;

/* One accepted connection whose hello has not arrived yet. */
typedef struct {
    const rcoll_transport_ops_t *tp; /* the transport it arrived on */
    void *comm;
    void *req;
    conn_hello_t *in; /* own allocation: entries move in pend[], a posted receive must not */
} pending_accept_t;

struct rcoll_conn_state {
    char *want_send, *want_recv; /* [nranks] */
    char *sent;                  /* [nranks] hello delivered on send_comms[p] */
    void **hello_sreq;           /* [nranks] */
    conn_hello_t out;
    pending_accept_t *pend;      /* [nranks] */
    int npend;
    int missing;                 /* wanted connections not ready yet */
};

rcoll_status_t rcoll_conn_init(rcoll_comm_t c)
{
    size_t n = (size_t)c->nranks;
    rcoll_conn_state_t *s = calloc(1, sizeof(*s));
    c->conn = s;
    c->link.send_comms = calloc(n, sizeof(void *));
    c->link.recv_comms = calloc(n, sizeof(void *));
    c->link.staging_mh = calloc(n, sizeof(void *));
    c->link.tps = calloc(n, sizeof(*c->link.tps));
    if (s) {
        s->want_send = calloc(n, 1);
        s->want_recv = calloc(n, 1);
        s->sent = calloc(n, 1);
        s->hello_sreq = calloc(n, sizeof(void *));
        s->pend = calloc(n, sizeof(pending_accept_t));
    }
    if (!s || !c->link.send_comms || !c->link.recv_comms || !c->link.staging_mh || !c->link.tps ||
        !s->want_send || !s->want_recv || !s->sent || !s->hello_sreq || !s->pend)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "connection table allocation failed");
    s->out = (conn_hello_t){.magic = CONN_HELLO_MAGIC, .rank = c->rank, .ctx = c->ctx,
                            .epoch = c->conn_epoch};
    c->mem_bytes += sizeof(*s) + n * (5 * sizeof(void *) + 3 +
                                      sizeof(pending_accept_t));
    return RCOLL_OK;
}

void rcoll_conn_fini(rcoll_comm_t c)
{
    rcoll_conn_state_t *s = c->conn;
    if (s) /* the tables rcoll_conn_init counted (a suspended communicator's memory drops) */
        c->mem_bytes -= sizeof(*s) + (size_t)c->nranks * (5 * sizeof(void *) + 3 +
                                                          sizeof(pending_accept_t));
    for (int p = 0; c->link.tps && p < c->nranks; p++) {
        const rcoll_transport_ops_t *tp = c->link.tps[p];
        if (!tp) continue; /* nothing was opened to this peer */
        if (c->link.staging_mh && c->link.staging_mh[p])
            tp->dereg_mr(c->link.recv_comms[p], c->link.staging_mh[p]);
        if (c->link.send_comms && c->link.send_comms[p]) tp->close_send(c->link.send_comms[p]);
        if (c->link.recv_comms && c->link.recv_comms[p]) tp->close_recv(c->link.recv_comms[p]);
    }
    if (s) {
        for (int i = 0; i < s->npend; i++) {
            s->pend[i].tp->close_recv(s->pend[i].comm);
            free(s->pend[i].in);
        }
        free(s->want_send);
        free(s->want_recv);
        free(s->sent);
        free(s->hello_sreq);
        free(s->pend);
        free(s);
    }
    free(c->link.send_comms);
    free(c->link.recv_comms);
    free(c->link.staging_mh);
    free(c->link.tps);
    c->conn = NULL;
    c->link.send_comms = c->link.recv_comms = c->link.staging_mh = NULL;
    c->link.tps = NULL;
}

static int send_ready(rcoll_comm_t c, int p) { return c->conn->sent[p]; }
static int recv_ready(rcoll_comm_t c, int p) { return c->link.recv_comms[p] != NULL; }

void rcoll_conn_want(rcoll_comm_t c, int p, int send, int recv)
{
    rcoll_conn_state_t *s = c->conn;
    if (send && !s->want_send[p]) {
        s->want_send[p] = 1;
        s->missing += !send_ready(c, p);
    }
    if (recv && !s->want_recv[p]) {
        s->want_recv[p] = 1;
        s->missing += !recv_ready(c, p);
    }
}

static rcoll_status_t progress_sends(rcoll_comm_t c, rcoll_conn_state_t *s)
{
    char pbuf[128];
    rcoll_status_t st;
    for (int p = 0; p < c->nranks; p++) {
        if (!s->want_send[p] || s->sent[p]) continue;
        const rcoll_transport_ops_t *tp = c->link.tps[p];
        void **sc = &c->link.send_comms[p];
        if (!*sc) {
            int t = rcoll_transport_index(tp);
            st = tp->connect(c->dev[t], c->peers[p].handles[t], sc);
            if (st < 0) {
                rcoll_err_prefix("connecting to %s: ",
                                 rcoll_comm_peer_name(c, p, pbuf, sizeof(pbuf)));
                return st;
            }
            if (!*sc) continue;
        }
        if (!s->hello_sreq[p]) {
            st = tp->isend(*sc, &s->out, sizeof(s->out), -1, NULL, &s->hello_sreq[p]);
            if (st < 0) return st;
            if (!s->hello_sreq[p]) continue;
        }
        int done = 0;
        st = tp->test(s->hello_sreq[p], &done, NULL);
        if (st < 0) {
            s->hello_sreq[p] = NULL;
            rcoll_err_prefix("greeting %s: ", rcoll_comm_peer_name(c, p, pbuf, sizeof(pbuf)));
            return st;
        }
        if (done) {
            s->hello_sreq[p] = NULL;
            s->sent[p] = 1;
            s->missing--;
        }
    }
    return RCOLL_OK;
}

/* Adopt an identified receive connection: register the staging memory on it. */
static rcoll_status_t adopt_recv(rcoll_comm_t c, int p, void *comm)
{
    c->link.recv_comms[p] = comm;
    if (c->conn->want_recv[p]) c->conn->missing--;
    if (!c->link.staging) return RCOLL_OK;
    rcoll_status_t st = c->link.tps[p]->reg_mr(comm, c->link.staging,
                                      (size_t)c->link.nslots * c->link.slot_bytes,
                                      RCOLL_PTR_HOST, &c->link.staging_mh[p]);
    if (st != RCOLL_OK) rcoll_err_prefix("registering staging memory: ");
    return st;
}

/* A connection of the next epoch that arrived before this rank closed the current one (a
 * peer resumed first): kept aside until this rank's resume adopts it. */
static rcoll_status_t keep_early(rcoll_comm_t c, int p, const rcoll_transport_ops_t *tp,
                                 void *comm)
{
    if (!c->early_comms) {
        c->early_comms = calloc((size_t)c->nranks, sizeof(*c->early_comms));
        c->early_tps = calloc((size_t)c->nranks, sizeof(*c->early_tps));
        if (!c->early_comms || !c->early_tps)
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "accepting a connection: out of memory");
    }
    if (c->early_comms[p])
        return rcoll_err_set(RCOLL_ERR_PROTOCOL, "unexpected second connection of the next "
                             "epoch claiming to be rank %d", p);
    c->early_comms[p] = comm;
    c->early_tps[p] = tp;
    c->early_epoch = c->conn_epoch + 1;
    return RCOLL_OK;
}

void rcoll_conn_drop_early(rcoll_comm_t c)
{
    for (int p = 0; c->early_comms && p < c->nranks; p++)
        if (c->early_comms[p]) c->early_tps[p]->close_recv(c->early_comms[p]);
    free(c->early_comms);
    free(c->early_tps);
    c->early_comms = NULL;
    c->early_tps = NULL;
}

static rcoll_status_t progress_recvs(rcoll_comm_t c, rcoll_conn_state_t *s)
{
    rcoll_status_t st;
    /* connections of this epoch that arrived during the last (resume adopts them here); not
     * before this rank is in their epoch: it may still be in suspend's barrier */
    for (int p = 0; c->early_comms && c->early_epoch == c->conn_epoch && p < c->nranks; p++) {
        void *comm = c->early_comms[p];
        if (!comm || !c->link.tps[p]) continue;
        if (c->link.recv_comms[p] || c->link.tps[p] != c->early_tps[p])
            return rcoll_err_set(RCOLL_ERR_PROTOCOL, "unexpected connection claiming to be "
                                 "rank %d (of the previous epoch's end)", p);
        c->early_comms[p] = NULL;
        st = adopt_recv(c, p, comm);
        if (st != RCOLL_OK) return st;
    }
    for (int t = 0; t < RCOLL_MAX_TRANSPORTS && s->npend < c->nranks; t++) {
        if (!c->listen_comms[t]) continue;
        void *rc = NULL;
        st = c->tps[t]->accept(c->listen_comms[t], &rc);
        if (st < 0) return st;
        if (!rc) continue;
        conn_hello_t *in = calloc(1, sizeof(*in));
        if (!in) {
            c->tps[t]->close_recv(rc);
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "accepting a connection: out of memory");
        }
        s->pend[s->npend++] = (pending_accept_t){.tp = c->tps[t], .comm = rc, .in = in};
    }
    for (int i = 0; i < s->npend; i++) {
        pending_accept_t *a = &s->pend[i];
        const rcoll_transport_ops_t *tp = a->tp;
        if (!a->req) {
            void *buf = a->in;
            size_t size = sizeof(*a->in);
            int tag = -1;
            void *mh = NULL;
            st = tp->irecv(a->comm, 1, &buf, &size, &tag, &mh, &a->req);
            if (st < 0) return st;
            if (!a->req) continue;
        }
        int done = 0;
        size_t got = 0;
        st = tp->test(a->req, &done, &got);
        if (st < 0) {
            a->req = NULL;
            rcoll_err_prefix("greeting from an accepted connection: ");
            return st;
        }
        if (!done) continue;
        a->req = NULL;
        conn_hello_t in = *a->in;
        int p = in.rank;
        if (got == sizeof(in) && in.magic == CONN_HELLO_MAGIC && in.ctx == c->ctx && p >= 0 &&
            p < c->nranks && in.epoch != c->conn_epoch) {
            void *comm = a->comm;
            free(a->in);
            s->pend[i--] = s->pend[--s->npend];
            if (in.epoch + 1 == c->conn_epoch) { /* closed by its sender at suspend */
                tp->close_recv(comm);
                continue;
            }
            if (in.epoch == c->conn_epoch + 1) { /* its sender resumed first */
                st = keep_early(c, p, tp, comm);
                if (st != RCOLL_OK) {
                    tp->close_recv(comm);
                    return st;
                }
                continue;
            }
            tp->close_recv(comm);
            return rcoll_err_set(RCOLL_ERR_PROTOCOL, "a connection claiming to be rank %d of "
                                 "epoch %u (this rank is at %u)", p, (unsigned)in.epoch,
                                 (unsigned)c->conn_epoch);
        }
        if (got != sizeof(in) || in.magic != CONN_HELLO_MAGIC || in.ctx != c->ctx ||
            p < 0 || p >= c->nranks || c->link.recv_comms[p] || c->link.tps[p] != tp)
            return rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                 "unexpected connection claiming to be rank %d of communicator "
                                 "%llx (this is %llx)", p, (unsigned long long)in.ctx,
                                 (unsigned long long)c->ctx);
        void *comm = a->comm;
        free(a->in);
        s->pend[i--] = s->pend[--s->npend];
        st = adopt_recv(c, p, comm);
        if (st != RCOLL_OK) return st;
    }
    return RCOLL_OK;
}

void rcoll_conn_poke(rcoll_comm_t c)
{
    for (int p = 0; p < c->nranks; p++) {
        const rcoll_transport_ops_t *tp = c->link.tps ? c->link.tps[p] : NULL;
        if (!tp || !tp->poke) continue;
        if (c->link.send_comms[p]) tp->poke(c->link.send_comms[p]);
        if (c->link.recv_comms[p]) tp->poke(c->link.recv_comms[p]);
    }
}

rcoll_status_t rcoll_conn_progress(rcoll_comm_t c)
{
    rcoll_conn_state_t *s = c->conn;
    if (!s) return RCOLL_OK;
    rcoll_status_t st = RCOLL_OK;
    if (s->missing > 0) st = progress_sends(c, s);
    /* Peers may connect before this rank wants them (they run ahead): always accept. */
    if (st == RCOLL_OK) st = progress_recvs(c, s);
    return st;
}

int rcoll_conn_first_missing(rcoll_comm_t c)
{
    rcoll_conn_state_t *s = c->conn;
    for (int p = 0; s && p < c->nranks; p++)
        if ((s->want_send[p] && !send_ready(c, p)) || (s->want_recv[p] && !recv_ready(c, p)))
            return p;
    return -1;
}

int rcoll_conn_missing(rcoll_comm_t c) { return c->conn ? c->conn->missing : 0; }

rcoll_status_t rcoll_conn_wait(rcoll_comm_t c, uint64_t deadline_ns)
{
    rcoll_backoff_t bo;
    rcoll_backoff_init(&bo, (uint32_t)c->cfg.spin, (uint64_t)c->cfg.poll_us * 1000);
    char pbuf[128];
    for (;;) {
        rcoll_status_t st = rcoll_conn_progress(c);
        if (st != RCOLL_OK) return st;
        if (c->conn->missing == 0) return RCOLL_OK;
        int culprit;
        st = rcoll_bs_poll(c->bs, &culprit);
        if (st != RCOLL_OK) return st;
        if (rcoll_now_ns() > deadline_ns) {
            int p = rcoll_conn_first_missing(c);
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "could not connect with %s within %g s",
                                 rcoll_comm_peer_name(c, p, pbuf, sizeof(pbuf)),
                                 c->cfg.timeout_s);
        }
        rcoll_backoff_wait(&bo);
    }
}
