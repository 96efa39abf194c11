/*
 * comm.c - building and tearing down a communicator: pick the transport, join through the
 * bootstrap, connect the ring neighbours, allocate the (bounded) staging memory.  The one
 * place where bootstrap, transports and algorithms meet.  Does not run collectives
 * (progress.c) or check user arguments (api.c).
 */
#include <sched.h>
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

/* One accepted connection whose hello (naming the peer rank) has not arrived yet. */
typedef struct {
    void *comm;
    void *req;
    conn_hello_t in;
} pending_accept_t;

/* State of the connection setup: which peers this rank sends to and receives from. */
typedef struct {
    char *need_send, *need_recv; /* [nranks] */
    void **hello_sreq;           /* [nranks] */
    char *sent;                  /* [nranks] hello delivered */
    conn_hello_t out;
    pending_accept_t *pend;      /* [nranks] */
    int npend;
    int nsent_needed, nrecv_needed, nsent, nrecv;
} conn_setup_t;

static rcoll_status_t setup_sends(rcoll_comm_t c, conn_setup_t *s)
{
    const rcoll_transport_ops_t *tp = c->tp;
    char pbuf[128];
    rcoll_status_t st;
    for (int p = 0; p < c->nranks; p++) {
        if (!s->need_send[p] || s->sent[p]) continue;
        void **sc = &c->link.send_comms[p];
        if (!*sc) {
            st = tp->connect(c->dev, c->peers[p].handle, sc);
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
            s->nsent++;
        }
    }
    return RCOLL_OK;
}

static rcoll_status_t setup_recvs(rcoll_comm_t c, conn_setup_t *s)
{
    const rcoll_transport_ops_t *tp = c->tp;
    rcoll_status_t st;
    if (s->npend < c->nranks) {
        void *rc = NULL;
        st = tp->accept(c->listen_comm, &rc);
        if (st < 0) return st;
        if (rc) s->pend[s->npend++] = (pending_accept_t){.comm = rc};
    }
    for (int i = 0; i < s->npend; i++) {
        pending_accept_t *a = &s->pend[i];
        if (!a->req) {
            void *buf = &a->in;
            size_t size = sizeof(a->in);
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
        int p = a->in.rank;
        if (got != sizeof(a->in) || a->in.magic != CONN_HELLO_MAGIC || p < 0 ||
            p >= c->nranks || !s->need_recv[p] || c->link.recv_comms[p])
            return rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                 "unexpected connection claiming to be rank %d", p);
        c->link.recv_comms[p] = a->comm;
        s->nrecv++;
        s->pend[i--] = s->pend[--s->npend];
    }
    return RCOLL_OK;
}

/* Connect to every peer the algorithms use (ring neighbours, doubling partners) and accept
 * their connections, all within the deadline. */
static rcoll_status_t connect_peers(rcoll_comm_t c, uint64_t deadline_ns)
{
    int n = c->nranks;
    conn_setup_t s;
    memset(&s, 0, sizeof(s));
    s.need_send = calloc((size_t)n, 1);
    s.need_recv = calloc((size_t)n, 1);
    s.sent = calloc((size_t)n, 1);
    s.hello_sreq = calloc((size_t)n, sizeof(void *));
    s.pend = calloc((size_t)n, sizeof(pending_accept_t));
    rcoll_status_t st = RCOLL_OK;
    if (!s.need_send || !s.need_recv || !s.sent || !s.hello_sreq || !s.pend) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "connection setup allocation failed");
        goto out;
    }
    s.out = (conn_hello_t){.magic = CONN_HELLO_MAGIC, .rank = c->rank};
    s.need_send[c->next] = s.need_recv[c->prev] = 1;
    int partners[32];
    int np = rcoll_sched_rd_partners(n, c->rank, partners);
    for (int i = 0; i < np; i++) s.need_send[partners[i]] = s.need_recv[partners[i]] = 1;
    for (int p = 0; p < n; p++) {
        s.nsent_needed += s.need_send[p];
        s.nrecv_needed += s.need_recv[p];
    }
    rcoll_backoff_t bo;
    rcoll_backoff_init(&bo, (uint32_t)c->cfg.spin);
    for (;;) {
        st = setup_sends(c, &s);
        if (st == RCOLL_OK) st = setup_recvs(c, &s);
        if (st != RCOLL_OK) break;
        if (s.nsent == s.nsent_needed && s.nrecv == s.nrecv_needed) break;
        int culprit;
        st = rcoll_bs_poll(c->bs, &culprit);
        if (st != RCOLL_OK) break;
        if (rcoll_now_ns() > deadline_ns) {
            char missing[256] = "";
            size_t o = 0;
            for (int p = 0; p < n && o + 24 < sizeof(missing); p++) {
                if (s.need_send[p] && !s.sent[p])
                    o += (size_t)snprintf(missing + o, sizeof(missing) - o, " to %d", p);
                if (s.need_recv[p] && !c->link.recv_comms[p])
                    o += (size_t)snprintf(missing + o, sizeof(missing) - o, " from %d", p);
            }
            st = rcoll_err_set(RCOLL_ERR_TIMEOUT, "could not connect to the peer ranks within "
                               "%g s (missing:%s)", c->cfg.timeout_s, missing);
            break;
        }
        rcoll_backoff_wait(&bo);
    }
    for (int i = 0; i < s.npend; i++) c->tp->close_recv(s.pend[i].comm);
out:
    free(s.need_send);
    free(s.need_recv);
    free(s.sent);
    free(s.hello_sreq);
    free(s.pend);
    return st;
}

static void close_peers(rcoll_comm_t c)
{
    for (int p = 0; p < c->nranks; p++) {
        if (c->link.staging_mh && c->link.staging_mh[p])
            c->tp->dereg_mr(c->link.recv_comms[p], c->link.staging_mh[p]);
        if (c->link.send_comms && c->link.send_comms[p])
            c->tp->close_send(c->link.send_comms[p]);
        if (c->link.recv_comms && c->link.recv_comms[p])
            c->tp->close_recv(c->link.recv_comms[p]);
    }
    free(c->link.send_comms);
    free(c->link.recv_comms);
    free(c->link.staging_mh);
    c->link.send_comms = c->link.recv_comms = c->link.staging_mh = NULL;
}

static rcoll_status_t alloc_staging(rcoll_comm_t c)
{
    size_t chunk = c->cfg.chunk_size ? c->cfg.chunk_size : c->cfg.buffsize / 4;
    if (chunk < MIN_CHUNK_BYTES) chunk = MIN_CHUNK_BYTES;
    if (chunk > c->cfg.buffsize) chunk = c->cfg.buffsize;
    chunk &= ~(size_t)7; /* whole elements of every datatype */
    size_t nslots = c->cfg.buffsize / chunk;
    if (nslots > RCOLL_EXEC_MAX_SLOTS) nslots = RCOLL_EXEC_MAX_SLOTS;
    if (nslots < 1) nslots = 1;
    c->chunk_bytes = chunk;
    c->link.tp = c->tp;
    c->link.slot_bytes = chunk;
    c->link.nslots = (int)nslots;
    size_t bytes = nslots * chunk;
    if (posix_memalign((void **)&c->link.staging, 4096, bytes) != 0)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "cannot allocate %zu bytes of staging", bytes);
    c->mem_bytes += bytes;
    for (int p = 0; p < c->nranks; p++) {
        if (!c->link.recv_comms[p]) continue;
        rcoll_status_t st = c->tp->reg_mr(c->link.recv_comms[p], c->link.staging, bytes,
                                          RCOLL_PTR_HOST, &c->link.staging_mh[p]);
        if (st != RCOLL_OK) {
            rcoll_err_prefix("registering staging memory: ");
            return st;
        }
    }
    return RCOLL_OK;
}

/* RCOLL_SPIN=-1 (auto): spin briefly, unless this host runs more ranks than the CPUs this
 * process may use; then a waiting rank yields at once so the rank it waits for can run. */
static void choose_spin(rcoll_comm_t c, const rcoll_peer_info_t *mine)
{
    int local = 0;
    for (int p = 0; p < c->nranks; p++) local += c->peers[p].host_hash == mine->host_hash;
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    c->local_ranks = local;
    if (c->cfg.spin >= 0) return;
    c->cfg.spin = local > cpus ? 0 : 200;
    if (local > cpus)
        RCOLL_INFO(INIT, "%d ranks on this host share %d CPUs: waiting ranks yield at once "
                   "(RCOLL_SPIN=0)", local, cpus);
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

    choose_spin(c, &mine);
    c->next = (rank + 1) % nranks;
    c->prev = (rank - 1 + nranks) % nranks;
    if (nranks > 1) {
        c->link.send_comms = calloc((size_t)nranks, sizeof(void *));
        c->link.recv_comms = calloc((size_t)nranks, sizeof(void *));
        c->link.staging_mh = calloc((size_t)nranks, sizeof(void *));
        if (!c->link.send_comms || !c->link.recv_comms || !c->link.staging_mh) {
            st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "connection table allocation failed");
            goto err_conns;
        }
        c->mem_bytes += 3 * (size_t)nranks * sizeof(void *);
        st = connect_peers(c, deadline);
        if (st != RCOLL_OK) goto err_conns;
        st = alloc_staging(c);
        if (st != RCOLL_OK) goto err_conns;
    }
    RCOLL_INFO(INIT, "rank %d/%d on %s: transport %s, ring %d -> %d -> %d (+ doubling partners), chunk %zu B x %d "
               "slots, communicator memory %zu B (bound: RCOLL_BUFFSIZE=%zu per peer)",
               rank, nranks, mine.hostname, c->tp->name, c->prev, rank, c->next,
               c->chunk_bytes, c->link.nslots, c->mem_bytes, cfg->buffsize);
    *comm_p = c;
    return RCOLL_OK;

err_conns:
    close_peers(c);
    free(c->link.staging);
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
    close_peers(c);
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
