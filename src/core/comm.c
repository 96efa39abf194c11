/*
 * comm.c - building and tearing down a communicator: pick the transport, join through the
 * bootstrap, connect the ring neighbours, allocate the (bounded) staging memory.  The one
 * place where bootstrap, transports and algorithms meet.  Does not run collectives
 * (progress.c) or check user arguments (api.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

#define CONN_HELLO_MAGIC 0x52484c4fu /* "RHLO" */
#define MIN_CHUNK_BYTES 64

typedef struct {
    uint32_t magic;
    int32_t rank;
} conn_hello_t;

const char *rcoll_comm_peer_name(rcoll_comm_t comm, int rank, char *buf, size_t len)
{
    if (comm->peers && rank >= 0 && rank < comm->nranks)
        snprintf(buf, len, "rank %d (%s pid %d)", rank, comm->peers[rank].hostname,
                 (int)comm->peers[rank].pid);
    else
        snprintf(buf, len, "rank %d", rank);
    return buf;
}

void rcoll_comm_set_error(rcoll_comm_t comm, rcoll_status_t st, const char *text)
{
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", text);
    RCOLL_WARN(COLL, "%s (%s)", text, rcoll_status_string(st));
}

static const rcoll_transport_ops_t *pick_transport(const rcoll_config_t *cfg)
{
    if (!strcmp(cfg->transport, "auto")) {
        size_t n;
        return rcoll_transport_list(&n)[0];
    }
    return rcoll_transport_find(cfg->transport);
}

/* State of the two ring connections while they are being set up. */
typedef struct {
    void *send, *recv;
    void *hello_sreq, *hello_rreq;
    int sent, received;
    conn_hello_t out, in;
} ring_setup_t;

/* One non-blocking pass over the ring connection setup; RCOLL_OK when fully connected. */
static rcoll_status_t ring_setup_step(rcoll_comm_t c, ring_setup_t *s)
{
    const rcoll_transport_ops_t *tp = c->tp;
    char pbuf[128];
    rcoll_status_t st;
    if (!s->send) {
        st = tp->connect(c->dev, c->peers[c->next].handle, &s->send);
        if (st < 0) {
            rcoll_err_prefix("connecting to %s: ",
                             rcoll_comm_peer_name(c, c->next, pbuf, sizeof(pbuf)));
            return st;
        }
    }
    if (s->send && !s->hello_sreq && !s->sent) {
        s->out = (conn_hello_t){.magic = CONN_HELLO_MAGIC, .rank = c->rank};
        st = tp->isend(s->send, &s->out, sizeof(s->out), -1, NULL, &s->hello_sreq);
        if (st < 0) return st;
    }
    if (s->hello_sreq) {
        int done = 0;
        st = tp->test(s->hello_sreq, &done, NULL);
        if (st < 0) {
            s->hello_sreq = NULL;
            rcoll_err_prefix("greeting %s: ", rcoll_comm_peer_name(c, c->next, pbuf,
                                                                  sizeof(pbuf)));
            return st;
        }
        if (done) {
            s->hello_sreq = NULL;
            s->sent = 1;
        }
    }
    if (!s->recv) {
        st = tp->accept(c->listen_comm, &s->recv);
        if (st < 0) return st;
    }
    if (s->recv && !s->hello_rreq && !s->received) {
        void *buf = &s->in;
        size_t size = sizeof(s->in);
        int tag = -1;
        void *mh = NULL;
        st = tp->irecv(s->recv, 1, &buf, &size, &tag, &mh, &s->hello_rreq);
        if (st < 0) return st;
    }
    if (s->hello_rreq) {
        int done = 0;
        size_t got = 0;
        st = tp->test(s->hello_rreq, &done, &got);
        if (st < 0) {
            s->hello_rreq = NULL;
            rcoll_err_prefix("greeting from %s: ",
                             rcoll_comm_peer_name(c, c->prev, pbuf, sizeof(pbuf)));
            return st;
        }
        if (done) {
            s->hello_rreq = NULL;
            if (got != sizeof(s->in) || s->in.magic != CONN_HELLO_MAGIC ||
                s->in.rank != c->prev)
                return rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                     "expected a connection from %s, got one claiming rank %d",
                                     rcoll_comm_peer_name(c, c->prev, pbuf, sizeof(pbuf)),
                                     (int)s->in.rank);
            s->received = 1;
        }
    }
    return (s->sent && s->received) ? RCOLL_OK : RCOLL_INPROGRESS;
}

static rcoll_status_t connect_ring(rcoll_comm_t c, uint64_t deadline_ns)
{
    ring_setup_t s;
    memset(&s, 0, sizeof(s));
    rcoll_backoff_t bo;
    rcoll_backoff_init(&bo, (uint32_t)c->cfg.spin);
    rcoll_status_t st;
    char pbuf[128], qbuf[128];
    for (;;) {
        st = ring_setup_step(c, &s);
        if (st != RCOLL_INPROGRESS) break;
        int culprit;
        st = rcoll_bs_poll(c->bs, &culprit);
        if (st != RCOLL_OK) break;
        if (rcoll_now_ns() > deadline_ns) {
            st = rcoll_err_set(RCOLL_ERR_TIMEOUT,
                               "could not connect the ring within %g s (to %s: %s, from %s: %s)",
                               c->cfg.timeout_s,
                               rcoll_comm_peer_name(c, c->next, pbuf, sizeof(pbuf)),
                               s.sent ? "done" : "pending",
                               rcoll_comm_peer_name(c, c->prev, qbuf, sizeof(qbuf)),
                               s.received ? "done" : "pending");
            break;
        }
        rcoll_backoff_wait(&bo);
    }
    if (st != RCOLL_OK) {
        if (s.send) c->tp->close_send(s.send);
        if (s.recv) c->tp->close_recv(s.recv);
        return st;
    }
    c->link.send_comm = s.send;
    c->link.recv_comm = s.recv;
    return RCOLL_OK;
}

static rcoll_status_t alloc_staging(rcoll_comm_t c)
{
    size_t chunk = c->cfg.chunk_size ? c->cfg.chunk_size : c->cfg.buffsize / 4;
    if (chunk < MIN_CHUNK_BYTES) chunk = MIN_CHUNK_BYTES;
    if (chunk > c->cfg.buffsize) chunk = c->cfg.buffsize;
    chunk &= ~(size_t)7; /* whole elements of every datatype */
    size_t nslots = c->cfg.buffsize / chunk;
    if (nslots > RCOLL_RING_MAX_SLOTS) nslots = RCOLL_RING_MAX_SLOTS;
    if (nslots < 1) nslots = 1;
    c->chunk_bytes = chunk;
    c->link.tp = c->tp;
    c->link.slot_bytes = chunk;
    c->link.nslots = (int)nslots;
    size_t bytes = nslots * chunk;
    if (posix_memalign((void **)&c->link.staging, 4096, bytes) != 0)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "cannot allocate %zu bytes of staging", bytes);
    c->mem_bytes += bytes;
    rcoll_status_t st = c->tp->reg_mr(c->link.recv_comm, c->link.staging, bytes,
                                      RCOLL_PTR_HOST, &c->link.staging_mh);
    if (st != RCOLL_OK) {
        free(c->link.staging);
        c->link.staging = NULL;
        rcoll_err_prefix("registering staging memory: ");
    }
    return st;
}

rcoll_status_t rcoll_comm_create(int nranks, const rcoll_unique_id_t *id, int rank,
                                 const rcoll_config_t *cfg, rcoll_bs_root_t *root,
                                 rcoll_comm_t *comm_p)
{
    rcoll_status_t st;
    rcoll_comm_t c = calloc(1, sizeof(*c));
    if (!c) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "communicator allocation failed");
    c->rank = rank;
    c->nranks = nranks;
    c->cfg = *cfg;
    c->root = root;
    c->mem_bytes = sizeof(*c);
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(cfg->timeout_s * 1e9);
    rcoll_log_set_rank(rank);

    c->tp = pick_transport(cfg);
    if (!c->tp) {
        st = rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_TRANSPORT='%s' names no transport "
                           "built into rcoll (rcoll-info lists them)", cfg->transport);
        goto err_free;
    }
    st = rcoll_transport_ensure_init(c->tp, cfg);
    if (st != RCOLL_OK) goto err_free;
    uint8_t handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    memset(handle, 0, sizeof(handle));
    st = c->tp->listen(c->dev, handle, &c->listen_comm);
    if (st != RCOLL_OK) goto err_free;

    c->peers = calloc((size_t)nranks, sizeof(*c->peers));
    if (!c->peers) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rank table allocation failed");
        goto err_listen;
    }
    c->mem_bytes += (size_t)nranks * sizeof(*c->peers);
    rcoll_peer_info_t mine;
    memset(&mine, 0, sizeof(mine));
    rcoll_bs_host_identity(mine.hostname, sizeof(mine.hostname), &mine.host_hash);
    mine.pid = (int32_t)getpid();
    memcpy(mine.handle, handle, sizeof(handle));
    /* A little longer than the root's own deadline, so its explanation arrives first. */
    st = rcoll_bs_join(id, rank, nranks, &mine, c->peers, deadline + 2000000000ull, &c->bs);
    if (st != RCOLL_OK) goto err_peers;

    c->next = (rank + 1) % nranks;
    c->prev = (rank - 1 + nranks) % nranks;
    if (nranks > 1) {
        st = connect_ring(c, deadline);
        if (st != RCOLL_OK) goto err_bs;
        st = alloc_staging(c);
        if (st != RCOLL_OK) goto err_ring;
    }
    RCOLL_INFO(INIT, "rank %d/%d on %s: transport %s, ring %d -> %d -> %d, chunk %zu B x %d "
               "slots, communicator memory %zu B (bound: RCOLL_BUFFSIZE=%zu per peer)",
               rank, nranks, mine.hostname, c->tp->name, c->prev, rank, c->next,
               c->chunk_bytes, c->link.nslots, c->mem_bytes, cfg->buffsize);
    *comm_p = c;
    return RCOLL_OK;

err_ring:
    c->tp->close_send(c->link.send_comm);
    c->tp->close_recv(c->link.recv_comm);
err_bs:
    rcoll_bs_report(c->bs, rank, st, rcoll_err_get());
    rcoll_bs_leave(c->bs, 0);
err_peers:
    free(c->peers);
err_listen:
    c->tp->close_listen(c->listen_comm);
err_free:
    free(c);
    return st;
}

void rcoll_comm_free(rcoll_comm_t c, int graceful)
{
    if (c->link.staging_mh) c->tp->dereg_mr(c->link.recv_comm, c->link.staging_mh);
    if (c->link.send_comm) c->tp->close_send(c->link.send_comm);
    if (c->link.recv_comm) c->tp->close_recv(c->link.recv_comm);
    if (c->listen_comm) c->tp->close_listen(c->listen_comm);
    rcoll_bs_leave(c->bs, graceful);
    free(c->link.staging);
    free(c->peers);
    struct rcoll_request *r = c->free_reqs;
    while (r) {
        struct rcoll_request *nx = r->next;
        free(r->barrier_heap);
        free(r);
        r = nx;
    }
    free(c);
}
