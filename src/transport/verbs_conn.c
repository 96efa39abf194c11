/*
 * verbs_conn.c - verbs connections: queue pairs, their RESET->INIT->RTR->RTS transitions, and
 * the setup exchange over TCP (a fixed, versioned record each way, then a ready word from the
 * connector), all without blocking.  Also the list of live comms that async events and
 * failures reach.  Data movement is verbs_data.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/verbs.h"
#include "util/log.h"
#include "util/status.h"

#define LISTEN_BACKLOG 128
#define MAX_HALF 64        /* accepted connections still in setup, per listener */
#define MAX_CONNECTING 256 /* connects in progress, per process */

/* ---------------------------------------------------------------------------------------------
 * Live comms and failure
 * ------------------------------------------------------------------------------------------ */

#ifdef RCOLL_TEST_HOOKS
int rcoll_vrb_test_rq_depth;
#else
static const int rcoll_vrb_test_rq_depth = 0;
#endif

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static rcoll_vrb_comm_t *live;

void rcoll_vrb_live_add(rcoll_vrb_comm_t *c)
{
    pthread_mutex_lock(&live_lock);
    c->next_live = live;
    live = c;
    pthread_mutex_unlock(&live_lock);
}

void rcoll_vrb_live_remove(rcoll_vrb_comm_t *c)
{
    pthread_mutex_lock(&live_lock);
    for (rcoll_vrb_comm_t **pp = &live; *pp; pp = &(*pp)->next_live) {
        if (*pp == c) {
            *pp = c->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

rcoll_status_t rcoll_vrb_comm_fail(rcoll_vrb_comm_t *c, rcoll_status_t st, const char *fmt, ...)
{
    if (!c->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->fail_text, sizeof(c->fail_text), fmt, ap);
        va_end(ap);
        c->failed = st;
        RCOLL_WARN(VERBS, "%s", c->fail_text);
    }
    return rcoll_err_set(c->failed, "%s", c->fail_text);
}

void rcoll_vrb_fail_matching(const rcoll_vrb_dev_t *dev, const struct ibv_qp *qp,
                            const char *what)
{
    pthread_mutex_lock(&live_lock);
    for (rcoll_vrb_comm_t *c = live; c; c = c->next_live) {
        int hit = dev && c->dev == dev;
        for (int q = 0; q < c->nqps && qp && !hit; q++) hit = c->qp[q] == qp;
        if (qp && c->flush_qp == qp) hit = 1;
        if (hit && c->fo && !c->lost) { /* it moves to another port at its next progress */
            snprintf(c->lost_text, sizeof(c->lost_text), "%s", what);
            __atomic_store_n(&c->lost, 1, __ATOMIC_RELEASE);
        } else if (hit && !c->fo) {
            rcoll_vrb_comm_fail(c, RCOLL_ERR_REMOTE, "%s", what);
        }
    }
    pthread_mutex_unlock(&live_lock);
}

/* ---------------------------------------------------------------------------------------------
 * Queue pairs
 * ------------------------------------------------------------------------------------------ */

static rcoll_status_t qp_to_init(rcoll_vrb_comm_t *c, struct ibv_qp *qp)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = (uint8_t)c->dev->port,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ,
    };
    int rc = rcoll_ibv->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                               IBV_QP_ACCESS_FLAGS);
    if (rc) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, rc, "verbs: QP 0x%x to INIT", qp->qp_num);
    return RCOLL_OK;
}

static rcoll_status_t make_fifo(rcoll_vrb_comm_t *c)
{
    size_t bytes = sizeof(rcoll_vrb_fifo_slot_t) * RCOLL_VRB_NSLOTS;
    if (posix_memalign((void **)&c->fifo, 4096, bytes))
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "verbs: cannot allocate the FIFO");
    memset(c->fifo, 0, bytes);
    /* remote-writable on both sides: the receiver's is the target of zero-byte messages */
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    c->fifo_mr = rcoll_ibv->reg_mr(c->dev->pd, c->fifo, bytes, access);
    if (!c->fifo_mr)
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "verbs: cannot register the FIFO");
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_comm_setup(rcoll_vrb_comm_t *c, rcoll_vrb_dev_t *dev, int is_recv,
                                   int nqps, uint64_t nonce)
{
    c->is_recv = is_recv;
    c->nqps = nqps;
    c->fd = -1;
    rcoll_status_t st = rcoll_vrb_comm_build(c, dev, nonce);
    c->home = c->devi;
    return st;
}

rcoll_status_t rcoll_vrb_comm_build(rcoll_vrb_comm_t *c, rcoll_vrb_dev_t *dev, uint64_t nonce)
{
    int nqps = c->nqps, is_recv = c->is_recv;
    c->dev = dev;
    for (int i = 0; i < rcoll_vrb_ndevs(); i++)
        if (rcoll_vrb_dev(i) == dev) c->devi = i;
    memset(c->sq_used, 0, sizeof(c->sq_used));
    c->unsignaled = 0;
    c->sq_depth = 2 * RCOLL_VRB_MAX_REQS + 16;
    if (dev->max_qp_wr > 0 && c->sq_depth > dev->max_qp_wr) c->sq_depth = dev->max_qp_wr;
    int rq_depth = is_recv ? (rcoll_vrb_test_rq_depth > 0 ? rcoll_vrb_test_rq_depth
                                                         : RCOLL_VRB_MSG_RING) : 1;
    if (dev->max_qp_wr > 0 && rq_depth > dev->max_qp_wr) rq_depth = dev->max_qp_wr;
    c->cq = rcoll_ibv->create_cq(dev->ctx, nqps * (c->sq_depth + rq_depth), c, NULL, 0);
    if (!c->cq) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "verbs: cannot create a CQ "
                                           "on %s", dev->name);
    for (int q = 0; q < nqps; q++) {
        struct ibv_qp_init_attr ia = {
            .qp_context = c,
            .send_cq = c->cq,
            .recv_cq = c->cq,
            .cap = {.max_send_wr = (uint32_t)c->sq_depth, .max_recv_wr = (uint32_t)rq_depth,
                    .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = RCOLL_VRB_INLINE},
            .qp_type = IBV_QPT_RC,
            .sq_sig_all = 0,
        };
        c->qp[q] = rcoll_ibv->create_qp(dev->pd, &ia);
        if (!c->qp[q])
            return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "verbs: cannot create an RC QP "
                                       "on %s", dev->name);
        if (q == 0 || ia.cap.max_inline_data < c->max_inline)
            c->max_inline = ia.cap.max_inline_data;
        rcoll_status_t st = qp_to_init(c, c->qp[q]);
        if (st != RCOLL_OK) return st;
        if (is_recv && (st = rcoll_vrb_post_recvs(c, q, rq_depth)) != RCOLL_OK) return st;
    }
    rcoll_status_t st = make_fifo(c);
    if (st != RCOLL_OK) return st;
    union ibv_gid gid;
    int gid_type;
    if ((st = rcoll_vrb_dev_gid(dev, &gid, &c->gid_index, &gid_type)) != RCOLL_OK) return st;
    uint32_t psn;
    st = rcoll_random_bytes(&psn, sizeof(psn));
    if (st != RCOLL_OK) return st;
    rcoll_vrb_meta_t *m = &c->local;
    memset(m, 0, sizeof(*m));
    m->magic = RCOLL_VRB_META_MAGIC;
    m->version = RCOLL_VRB_VERSION;
    m->nonce = nonce;
    m->nqps = (uint32_t)nqps;
    m->psn = psn & 0xffffff;
    for (int q = 0; q < nqps; q++) m->qpn[q] = c->qp[q]->qp_num;
    memcpy(m->gid, gid.raw, 16);
    m->gid_index = (uint32_t)c->gid_index;
    m->mtu = dev->attr.active_mtu;
    m->lid = dev->attr.lid;
    m->link_layer = dev->attr.link_layer;
    m->gid_type = (uint8_t)gid_type;
    if (!is_recv) {
        m->fifo_addr = (uint64_t)(uintptr_t)c->fifo;
        m->fifo_rkey = c->fifo_mr->rkey;
    }
    if (rcoll_vrb_failover_offered()) m->caps |= RCOLL_VRB_CAP_FAILOVER;
    snprintf(m->dev, sizeof(m->dev), "%s", dev->name);
    return RCOLL_OK;
}

void rcoll_vrb_comm_unbuild(rcoll_vrb_comm_t *c)
{
    if (c->flush_qp) rcoll_ibv->destroy_qp(c->flush_qp);
    if (c->flush_cq) rcoll_ibv->destroy_cq(c->flush_cq);
    if (c->flush_mr) rcoll_ibv->dereg_mr(c->flush_mr);
    free(c->flush_buf);
    c->flush_qp = NULL;
    c->flush_cq = NULL;
    c->flush_mr = NULL;
    c->flush_buf = NULL;
    for (int q = 0; q < c->nqps; q++) {
        if (c->qp[q]) rcoll_ibv->destroy_qp(c->qp[q]);
        c->qp[q] = NULL;
    }
    if (c->cq) rcoll_ibv->destroy_cq(c->cq);
    c->cq = NULL;
    if (c->fifo_mr) rcoll_ibv->dereg_mr(c->fifo_mr);
    c->fifo_mr = NULL;
    free(c->fifo);
    c->fifo = NULL;
}

/* qp to RTR and RTS towards QP dest_qpn of the side r describes. */
static rcoll_status_t qp_to_rtr_rts(rcoll_vrb_comm_t *c, struct ibv_qp *qp,
                                    const rcoll_vrb_meta_t *r, uint32_t dest_qpn,
                                    enum ibv_mtu mtu)
{
    const rcoll_vrb_config_t *cfg = rcoll_vrb_cfg;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = mtu,
        .dest_qp_num = dest_qpn,
        .rq_psn = r->psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = r->lid, .sl = (uint8_t)cfg->ib_sl, .port_num = (uint8_t)c->dev->port},
    };
    if (r->link_layer == IBV_LINK_LAYER_ETHERNET || c->dev->attr.link_layer ==
                                                        IBV_LINK_LAYER_ETHERNET) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
        a.ah_attr.grh.hop_limit = 255;
        a.ah_attr.grh.traffic_class = (uint8_t)cfg->ib_tc;
    }
    /* On RoCE v2 the kernel resolves the peer's MAC address (ARP or IPv6 neighbour
     * discovery) inside this call and gives up after 1 s with ETIMEDOUT.  On a port that has
     * just come up, or the new port of a failover, that is a slow first resolution, not a dead
     * peer: the QP stays in INIT, so the call is made again, RCOLL_VRB_RTR_TRIES times. */
    int rc, tries = 0;
    while ((rc = rcoll_ibv->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) ==
               ETIMEDOUT &&
           ++tries < RCOLL_VRB_RTR_TRIES) {
        char g[64];
        RCOLL_INFO(VERBS, "verbs: QP 0x%x to RTR on %s: the address of the peer's GID %s not "
                   "resolved yet (try %d of %d)", qp->qp_num, c->dev->name,
                   rcoll_vrb_gid_str(r->gid, g, sizeof(g)), tries, RCOLL_VRB_RTR_TRIES);
    }
    if (rc == ETIMEDOUT) {
        char g[64];
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, rc, "verbs: QP 0x%x to RTR on %s: the "
                                   "address of the peer's GID %s not resolved in %d tries",
                                   qp->qp_num, c->dev->name,
                                   rcoll_vrb_gid_str(r->gid, g, sizeof(g)), tries);
    }
    if (rc) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, rc, "verbs: QP 0x%x to RTR",
                                       qp->qp_num);
    struct ibv_qp_attr s = {
        .qp_state = IBV_QPS_RTS,
        .timeout = (uint8_t)cfg->ib_timeout,
        .retry_cnt = (uint8_t)cfg->ib_retry_cnt,
        .rnr_retry = (uint8_t)cfg->ib_rnr_retry,
        .sq_psn = c->local.psn,
        .max_rd_atomic = 1,
    };
    rc = rcoll_ibv->modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                              IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, rc, "verbs: QP 0x%x to RTS",
                                       qp->qp_num);
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_comm_connect_qps(rcoll_vrb_comm_t *c)
{
    char lg[64], rg[64];
    c->fo = (c->local.caps & c->remote.caps & RCOLL_VRB_CAP_FAILOVER) != 0;
    enum ibv_mtu mtu = (enum ibv_mtu)(c->local.mtu < c->remote.mtu ? c->local.mtu
                                                                   : c->remote.mtu);
    for (int q = 0; q < c->nqps; q++) {
        rcoll_status_t st = qp_to_rtr_rts(c, c->qp[q], &c->remote, c->remote.qpn[q], mtu);
        if (st != RCOLL_OK) return st;
    }
    RCOLL_INFO(VERBS, "%s connection %s port %d GID[%d] %s QPN 0x%x <-> %s GID[%u] %s QPN "
               "0x%x, %d QP%s, MTU %d", c->is_recv ? "receive" : "send", c->dev->name,
               c->dev->port, c->gid_index, rcoll_vrb_gid_str(c->local.gid, lg, sizeof(lg)),
               c->local.qpn[0], c->remote.dev, c->remote.gid_index,
               rcoll_vrb_gid_str(c->remote.gid, rg, sizeof(rg)), c->remote.qpn[0], c->nqps,
               c->nqps > 1 ? "s" : "", 128 << mtu);
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_flush_setup(rcoll_vrb_comm_t *c)
{
    rcoll_vrb_dev_t *dev = c->dev;
    if (posix_memalign((void **)&c->flush_buf, 64, 64))
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "verbs: cannot allocate the flush buffer");
    c->flush_mr = rcoll_ibv->reg_mr(dev->pd, c->flush_buf, 64, IBV_ACCESS_LOCAL_WRITE);
    if (!c->flush_mr)
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "verbs: cannot register the flush "
                                   "buffer on %s", dev->name);
    c->flush_cq = rcoll_ibv->create_cq(dev->ctx, RCOLL_VRB_MAX_REQS + 1, c, NULL, 0);
    if (!c->flush_cq)
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "verbs: cannot create the flush CQ "
                                   "on %s", dev->name);
    struct ibv_qp_init_attr ia = {
        .qp_context = c,
        .send_cq = c->flush_cq,
        .recv_cq = c->flush_cq,
        .cap = {.max_send_wr = RCOLL_VRB_MAX_REQS, .max_recv_wr = 1, .max_send_sge = 1,
                .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    c->flush_qp = rcoll_ibv->create_qp(dev->pd, &ia);
    if (!c->flush_qp)
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "verbs: cannot create the flush QP "
                                   "on %s", dev->name);
    rcoll_status_t st = qp_to_init(c, c->flush_qp);
    if (st == RCOLL_OK)
        st = qp_to_rtr_rts(c, c->flush_qp, &c->local, c->flush_qp->qp_num,
                           (enum ibv_mtu)c->local.mtu);
    if (st == RCOLL_OK)
        RCOLL_INFO(VERBS, "%s: flush QP 0x%x (GPUDirect RDMA receives)", dev->name,
                   c->flush_qp->qp_num);
    return st;
}

void rcoll_vrb_comm_destroy(rcoll_vrb_comm_t *c)
{
    if (!c) return;
    rcoll_vrb_comm_unbuild(c);
    for (int i = 0; i < RCOLL_VRB_MAX_REQS; i++) {
        rcoll_vrb_req_t *r = &c->reqs[i];
        for (int k = 0; r->used && k < r->n; k++) rcoll_vrb_mr_put(c->dev->mrs, r->mr[k]);
    }
    if (c->fd >= 0) close(c->fd);
    free(c);
}

/* ---------------------------------------------------------------------------------------------
 * Setup exchange
 * ------------------------------------------------------------------------------------------ */

/* A record from the peer: right magic, version, nonce and QP count.  Its device name is
 * printed later: terminated here, whatever the peer sent. */
const char *rcoll_vrb_meta_check(rcoll_vrb_meta_t *m, uint64_t nonce, int want_nqps)
{
    m->dev[sizeof(m->dev) - 1] = '\0';
    if (m->magic != RCOLL_VRB_META_MAGIC) return "not an rcoll verbs connection record";
    if (m->version != RCOLL_VRB_VERSION) return "connection record of another rcoll version";
    if (m->nonce != nonce) return "connection record for another listener (nonce)";
    if (m->nqps < 1 || m->nqps > RCOLL_VRB_MAX_QPS) return "bad QP count in connection record";
    if (want_nqps && (int)m->nqps != want_nqps) return "QP count differs between the two ends";
    if (m->link_layer != IBV_LINK_LAYER_ETHERNET && m->link_layer != IBV_LINK_LAYER_INFINIBAND)
        return "unknown link layer in connection record";
    if (m->mtu < IBV_MTU_256 || m->mtu > IBV_MTU_4096) return "bad MTU in connection record";
    return NULL;
}

/* Move the rest of a fixed-size record; *done counts bytes moved. */
static rcoll_status_t step_io(int fd, int out, void *buf, size_t len, size_t *done)
{
    if (*done >= len) return RCOLL_OK;
    return out ? rcoll_net_send_some(fd, buf, len, done) : rcoll_net_recv_some(fd, buf, len, done);
}

static rcoll_sockaddr_t tcp_addr;
static int tcp_addr_ok;

static rcoll_status_t pick_tcp_addr(void)
{
    if (tcp_addr_ok) return RCOLL_OK;
    char ifname[64];
    rcoll_status_t st = rcoll_net_pick_addr(rcoll_vrb_cfg->netif.socket_ifname, &tcp_addr, ifname,
                                            sizeof(ifname));
    if (st == RCOLL_OK) tcp_addr_ok = 1;
    return st;
}

typedef struct {
    int fd;
    int stage; /* 0 read record, 1 write record, 2 read ready */
    size_t done;
    rcoll_vrb_meta_t in;
    uint32_t ready;
    rcoll_vrb_comm_t *comm;
} half_t;

typedef struct {
    int dev;
    int fd;
    uint64_t nonce;
    int nhalf;
    half_t half[MAX_HALF];
} vrb_listen_t;

rcoll_status_t rcoll_vrb_listen(int dev, void *handle, void **listen_comm)
{
    if (!rcoll_vrb_dev(dev) || !handle || !listen_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs listen: bad device %d or NULL "
                             "handle/listen_comm", dev);
    rcoll_status_t st = pick_tcp_addr();
    if (st != RCOLL_OK) return st;
    vrb_listen_t *l = calloc(1, sizeof(*l));
    if (!l) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "verbs listen: out of memory");
    rcoll_vrb_handle_t h = {.magic = RCOLL_VRB_HANDLE_MAGIC, .version = RCOLL_VRB_VERSION};
    h.addr = tcp_addr;
    rcoll_net_addr_set_port(&h.addr, 0);
    st = rcoll_net_listen(&h.addr, LISTEN_BACKLOG, 0, &l->fd);
    if (st == RCOLL_OK) st = rcoll_random_bytes(&l->nonce, sizeof(l->nonce));
    if (st != RCOLL_OK) {
        if (l->fd > 0) close(l->fd);
        free(l);
        return st;
    }
    l->dev = dev;
    h.nonce = l->nonce;
    memset(handle, 0, RCOLL_TRANSPORT_HANDLE_BYTES);
    memcpy(handle, &h, sizeof(h));
    *listen_comm = l;
    return RCOLL_OK;
}

static void half_drop(vrb_listen_t *l, int i, const char *why)
{
    half_t *h = &l->half[i];
    RCOLL_WARN(VERBS, "verbs: dropping a connection in setup: %s", why);
    if (h->comm) {
        h->comm->fd = -1;
        rcoll_vrb_comm_destroy(h->comm);
    }
    close(h->fd);
    l->half[i] = l->half[--l->nhalf];
}

/* One setup step of accepted connection h; *ready when it is complete. */
static rcoll_status_t half_step(vrb_listen_t *l, half_t *h, int *ready)
{
    rcoll_status_t st;
    if (h->stage == 0) {
        if ((st = step_io(h->fd, 0, &h->in, sizeof(h->in), &h->done)) != RCOLL_OK) return st;
        if (h->done < sizeof(h->in)) return RCOLL_OK;
        const char *bad = rcoll_vrb_meta_check(&h->in, l->nonce, 0);
        if (bad) return rcoll_err_set(RCOLL_ERR_PROTOCOL, "%s", bad);
        h->comm = calloc(1, sizeof(*h->comm));
        if (!h->comm) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "verbs accept: out of memory");
        st = rcoll_vrb_comm_setup(h->comm, rcoll_vrb_dev(l->dev), 1, (int)h->in.nqps, l->nonce);
        if (st != RCOLL_OK) return st;
        h->comm->remote = h->in;
        if ((st = rcoll_vrb_comm_connect_qps(h->comm)) != RCOLL_OK) return st;
        h->stage = 1;
        h->done = 0;
    }
    if (h->stage == 1) {
        st = step_io(h->fd, 1, &h->comm->local, sizeof(h->comm->local), &h->done);
        if (st != RCOLL_OK) return st;
        if (h->done < sizeof(h->comm->local)) return RCOLL_OK;
        h->stage = 2;
        h->done = 0;
    }
    if ((st = step_io(h->fd, 0, &h->ready, sizeof(h->ready), &h->done)) != RCOLL_OK) return st;
    if (h->done < sizeof(h->ready)) return RCOLL_OK;
    if (h->ready != RCOLL_VRB_READY_MAGIC)
        return rcoll_err_set(RCOLL_ERR_PROTOCOL, "bad ready word from the connector");
    *ready = 1;
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_accept(void *listen_comm, void **recv_comm)
{
    vrb_listen_t *l = listen_comm;
    if (!l || !recv_comm) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs accept: NULL");
    *recv_comm = NULL;
    while (l->nhalf < MAX_HALF) {
        int fd;
        rcoll_status_t st = rcoll_net_accept(l->fd, &fd, NULL);
        if (st == RCOLL_INPROGRESS) break;
        if (st != RCOLL_OK) return st;
        l->half[l->nhalf++] = (half_t){.fd = fd};
    }
    for (int i = 0; i < l->nhalf; i++) {
        half_t *h = &l->half[i];
        int ready = 0;
        if (half_step(l, h, &ready) != RCOLL_OK) {
            char why[RCOLL_ERR_TEXT_MAX];
            snprintf(why, sizeof(why), "%s", rcoll_err_get());
            half_drop(l, i--, why);
            continue;
        }
        if (!ready) continue;
        rcoll_vrb_comm_t *c = h->comm;
        c->fd = h->fd;
        l->half[i] = l->half[--l->nhalf];
        rcoll_vrb_live_add(c);
        *recv_comm = c;
        return RCOLL_OK;
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_close_listen(void *listen_comm)
{
    vrb_listen_t *l = listen_comm;
    if (!l) return RCOLL_OK;
    while (l->nhalf) {
        half_t *h = &l->half[--l->nhalf];
        if (h->comm) {
            h->comm->fd = -1;
            rcoll_vrb_comm_destroy(h->comm);
        }
        close(h->fd);
    }
    close(l->fd);
    free(l);
    return RCOLL_OK;
}

/* ---- connector side ---- */

typedef struct {
    int used;
    int dev;
    unsigned char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    int stage; /* 0 TCP connect, 1 write record, 2 read record, 3 write ready */
    size_t done;
    uint32_t ready;
    rcoll_vrb_comm_t *comm;
} connecting_t;

static connecting_t connecting[MAX_CONNECTING];
static pthread_mutex_t connecting_lock = PTHREAD_MUTEX_INITIALIZER;

static connecting_t *connecting_find(int dev, const void *handle)
{
    connecting_t *free_slot = NULL;
    for (int i = 0; i < MAX_CONNECTING; i++) {
        connecting_t *e = &connecting[i];
        if (!e->used) {
            if (!free_slot) free_slot = e;
            continue;
        }
        if (e->dev == dev && !memcmp(e->handle, handle, sizeof(e->handle))) return e;
    }
    if (free_slot) {
        memset(free_slot, 0, sizeof(*free_slot));
        free_slot->dev = dev;
        memcpy(free_slot->handle, handle, sizeof(free_slot->handle));
    }
    return free_slot;
}

static void connecting_release(connecting_t *e, int destroy)
{
    if (destroy && e->comm) rcoll_vrb_comm_destroy(e->comm);
    e->used = 0;
    e->comm = NULL;
}

static rcoll_status_t connect_step(connecting_t *e, const rcoll_vrb_handle_t *h, int *ready)
{
    rcoll_vrb_comm_t *c = e->comm;
    rcoll_status_t st;
    if (e->stage == 0) {
        st = rcoll_net_connect_check(c->fd);
        if (st == RCOLL_INPROGRESS) return RCOLL_OK;
        if (st != RCOLL_OK) return st;
        e->stage = 1;
    }
    if (e->stage == 1) {
        if ((st = step_io(c->fd, 1, &c->local, sizeof(c->local), &e->done)) != RCOLL_OK)
            return st;
        if (e->done < sizeof(c->local)) return RCOLL_OK;
        e->stage = 2;
        e->done = 0;
    }
    if (e->stage == 2) {
        if ((st = step_io(c->fd, 0, &c->remote, sizeof(c->remote), &e->done)) != RCOLL_OK)
            return st;
        if (e->done < sizeof(c->remote)) return RCOLL_OK;
        const char *bad = rcoll_vrb_meta_check(&c->remote, h->nonce, c->nqps);
        if (bad) return rcoll_err_set(RCOLL_ERR_PROTOCOL, "verbs connect: %s", bad);
        if ((st = rcoll_vrb_comm_connect_qps(c)) != RCOLL_OK) return st;
        e->stage = 3;
        e->done = 0;
        e->ready = RCOLL_VRB_READY_MAGIC;
    }
    if ((st = step_io(c->fd, 1, &e->ready, sizeof(e->ready), &e->done)) != RCOLL_OK) return st;
    *ready = e->done == sizeof(e->ready);
    return RCOLL_OK;
}

static rcoll_status_t connect_start(connecting_t *e, const rcoll_vrb_handle_t *h)
{
    rcoll_vrb_comm_t *c = calloc(1, sizeof(*c));
    if (!c) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "verbs connect: out of memory");
    e->comm = c;
    rcoll_status_t st = rcoll_vrb_comm_setup(c, rcoll_vrb_dev(e->dev), 0,
                                            rcoll_vrb_cfg->ib_qps_per_conn, h->nonce);
    if (st != RCOLL_OK) return st;
    return rcoll_net_connect_start(&h->addr, &c->fd);
}

const char *rcoll_vrb_handle_check(const rcoll_vrb_handle_t *h)
{
    if (h->magic != RCOLL_VRB_HANDLE_MAGIC || h->version != RCOLL_VRB_VERSION)
        return "not a verbs handle of this rcoll version";
    return NULL;
}

rcoll_status_t rcoll_vrb_connect(int dev, const void *handle, void **send_comm)
{
    if (!rcoll_vrb_dev(dev) || !handle || !send_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs connect: bad device %d or NULL "
                             "handle/send_comm", dev);
    rcoll_vrb_handle_t h;
    memcpy(&h, handle, sizeof(h));
    if (rcoll_vrb_handle_check(&h))
        return rcoll_err_set(RCOLL_ERR_PROTOCOL, "verbs connect: not a verbs handle of this "
                             "rcoll version");
    *send_comm = NULL;
    pthread_mutex_lock(&connecting_lock);
    connecting_t *e = connecting_find(dev, handle);
    rcoll_status_t st = RCOLL_OK;
    if (!e) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "verbs connect: more than %d connections in "
                           "setup at once", MAX_CONNECTING);
    } else if (!e->used) {
        e->used = 1;
        st = connect_start(e, &h);
    }
    int ready = 0;
    if (st == RCOLL_OK) st = connect_step(e, &h, &ready);
    if (st != RCOLL_OK) {
        char addr[80];
        rcoll_err_prefix("verbs connection setup with %s: ",
                         rcoll_net_addr_str(&h.addr, addr, sizeof(addr)));
        if (e) connecting_release(e, 1);
    } else if (ready) {
        rcoll_vrb_live_add(e->comm);
        *send_comm = e->comm;
        connecting_release(e, 0);
    }
    pthread_mutex_unlock(&connecting_lock);
    return st;
}

void rcoll_vrb_conn_fini(void)
{
    pthread_mutex_lock(&connecting_lock);
    for (int i = 0; i < MAX_CONNECTING; i++)
        if (connecting[i].used) connecting_release(&connecting[i], 1);
    pthread_mutex_unlock(&connecting_lock);
    tcp_addr_ok = 0;
}
