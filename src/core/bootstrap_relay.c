/*
 * bootstrap_relay.c - a relay of the bootstrap tree (bootstrap.h, rcoll_bs_tree_t): a thread
 * in the rank that hosts node n > 0.  It admits the ranks of its block and the relays of its
 * child nodes once they prove the job secret, connects to its parent node (the root, node 0,
 * or another relay), and from then on carries messages: each message a rank of its block
 * sends (its hello first) goes up in a frame naming that rank (BS_FWD), frames from child
 * relays go up as they are, and frames from the parent go down to the rank they name, to the
 * child relay whose subtree holds it, or to every rank below (BS_FWD_ALL: the rank table,
 * announcements).  The ranks speak the bootstrap's usual protocol (bootstrap.c) and cannot
 * tell a relay from the root; the root keeps every decision (bootstrap_root.c).
 *
 * When a rank's connection ends without a goodbye the relay sends BS_GONE for it (culprit:
 * that rank); when a child relay's ends, BS_GONE for every rank below it (culprit: the rank
 * hosting that relay).  When its parent's ends, it closes everything: the ranks below see
 * their relay vanish and name the rank that hosted it.
 */
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "core/bootstrap_int.h"
#include "core/bootstrap_wire.h"
#include "util/cpath.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

#define RL_PENDING_MAX 64
#define RL_ACCEPT_BURST 16
#define RL_HELLO_TIMEOUT_NS (3ull * 1000000000ull)
#define RL_SEND_NS 1000000000ull /* a control message's send deadline, to a rank */
/* The longest a hello is held to go up with the others of its subtree (at most a quarter of
 * the job's timeout): the table waits for every hello anyway, so holding costs a job that
 * forms nothing; it bounds how late the root hears of the ranks that did come when one never
 * does, and how late a refused hello is answered. */
#define RL_HOLD_NS 1000000000ull

/* The deadline of a send on a link (to the parent or a child relay): a frame given up half
 * sent would corrupt the link for every rank behind it, so it may take the job's timeout. */
static uint64_t rl_link_deadline(const bs_relay_t *r);

typedef struct {
    int fd;
    uint64_t since_ns;
    size_t got;
    union {
        struct {
            bs_hdr_t hdr;
            union {
                bs_hello_t hello;
                bs_relay_hello_t relay;
            } u;
        } m;
        char raw[sizeof(bs_hdr_t) + sizeof(bs_hello_t) + sizeof(bs_relay_hello_t)];
    } buf;
} rl_pending_t;

typedef struct {
    int fd;     /* -1: not joined yet, or closed */
    int joined; /* its hello went up */
    int left;   /* said goodbye */
    int32_t pid;
    char host[64];
    bs_rx_t rx;
} rl_rank_t;

typedef struct {
    int node; /* its node in the tree */
    int fd;   /* -1: not connected yet, or lost */
    int32_t host_pid; /* the rank hosting it, once its hello passed through here */
    char host_name[64];
    bs_frx_t rx;
} rl_child_t;

struct bs_relay {
    rcoll_bs_tree_t t;
    int node, lo, hi; /* this node; its block of ranks [lo, hi) */
    int listen_fd;
    rcoll_sockaddr_t parent_addr;
    int parent_fd;
    bs_frx_t prx;
    uint32_t down_max; /* the largest frame from the parent: the table's */
    char secret[RCOLL_SECRET_BYTES];
    double timeout_s;
    char dead[RCOLL_BS_TEXT_MAX]; /* why this relay cannot serve ("": it can) */
    rl_rank_t *ranks;             /* [hi - lo] */
    rl_child_t *child;
    int nchild;
    rl_pending_t pending[RL_PENDING_MAX];
    int npending;
    /* Hellos going up, held to go as one block (rl_hold): a BS_HELLOS header, then up_len
     * bytes of hellos in their frames. */
    char *up;
    size_t up_len;
    uint64_t up_since;  /* when the oldest held hello came */
    int hellos_up;      /* hellos passed up so far (held ones included) */
    int subtree_ranks;  /* ranks at or below this node: all their hellos come through here */
};

rcoll_status_t rcoll_bs_relay_new(const rcoll_config_t *cfg, const rcoll_bs_tree_t *t, int node,
                                  const rcoll_sockaddr_t *addr, int listen_fd,
                                  const rcoll_sockaddr_t *parent,
                                  const char secret[RCOLL_SECRET_BYTES], bs_relay_t **out)
{
    *out = NULL;
    bs_relay_t *r = node < 1 || node >= t->nnodes ? NULL : calloc(1, sizeof(*r));
    if (!r) {
        if (listen_fd >= 0) close(listen_fd);
        if (node < 1 || node >= t->nnodes)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "bootstrap relay: node %d outside "
                                 "[1, %d)", node, t->nnodes);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap relay allocation failed");
    }
    r->t = *t;
    r->node = node;
    r->lo = rcoll_bs_tree_host(t, node);
    r->hi = r->lo + t->block < t->nranks ? r->lo + t->block : t->nranks;
    r->parent_addr = *parent;
    r->parent_fd = -1;
    memcpy(r->secret, secret, RCOLL_SECRET_BYTES);
    r->timeout_s = cfg->timeout_s;
    size_t table = rcoll_bs_table_max(t->nranks);
    size_t most = table > sizeof(bs_payload_t) ? table : sizeof(bs_payload_t);
    r->down_max = (uint32_t)(sizeof(bs_fwd_t) + sizeof(bs_hdr_t) + most);
    r->ranks = calloc((size_t)(r->hi - r->lo), sizeof(*r->ranks));
    for (int c = node * t->fanout + 1; c <= node * t->fanout + t->fanout && c < t->nnodes; c++)
        r->nchild++;
    r->child = calloc((size_t)(r->nchild ? r->nchild : 1), sizeof(*r->child));
    if (!r->ranks || !r->child) {
        free(r->ranks);
        free(r->child);
        free(r);
        if (listen_fd >= 0) close(listen_fd);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap relay allocation failed");
    }
    for (int k = 0; k < r->hi - r->lo; k++) r->ranks[k].fd = -1;
    for (int k = 0; k < t->nranks; k += t->block)
        if (rcoll_bs_tree_below(t, rcoll_bs_tree_node(t, k), node))
            r->subtree_ranks += (k + t->block < t->nranks ? t->block : t->nranks - k);
    for (int j = 0; j < r->nchild; j++) {
        r->child[j].node = node * t->fanout + 1 + j;
        r->child[j].fd = -1;
    }
    rcoll_sockaddr_t at = *addr;
    r->listen_fd = listen_fd;
    rcoll_status_t st = listen_fd >= 0 ? RCOLL_OK : rcoll_net_listen(&at, 1024, 1, &r->listen_fd);
    if (st != RCOLL_OK) {
        char abuf[64];
        rcoll_err_prefix("bootstrap relay (node %d) on %s: ", node,
                         rcoll_net_addr_str(addr, abuf, sizeof(abuf)));
        free(r->ranks);
        free(r->child);
        free(r);
        return st;
    }
    *out = r;
    return RCOLL_OK;
}

static void rl_close_all(bs_relay_t *r);

void rcoll_bs_relay_free(bs_relay_t *r)
{
    if (!r) return;
    rl_close_all(r);
    for (int j = 0; j < r->nchild; j++) rcoll_bs_frame_free(&r->child[j].rx);
    rcoll_bs_frame_free(&r->prx);
    free(r->up);
    free(r->ranks);
    free(r->child);
    free(r);
}

static uint64_t rl_link_deadline(const bs_relay_t *r)
{
    return rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9);
}

/* The child slot whose subtree holds rank (-1: none, the rank is not below this node's
 * children). */
static int rl_child_of(const bs_relay_t *r, int rank)
{
    if (rank < 0 || rank >= r->t.nranks) return -1;
    int n = rcoll_bs_tree_node(&r->t, rank);
    while (n > 0 && rcoll_bs_tree_parent(&r->t, n) != r->node) n = rcoll_bs_tree_parent(&r->t, n);
    for (int j = 0; j < r->nchild; j++)
        if (r->child[j].node == n) return j;
    return -1;
}

/* Send the held hellos up as one block (BS_HELLOS, stamped now), if any. */
static void rl_flush(bs_relay_t *r)
{
    if (r->up_len && r->parent_fd >= 0) {
        bs_hdr_t h = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLOS,
                      .len = (uint32_t)r->up_len, .path = rcoll_cpath_stamp()};
        memcpy(r->up, &h, sizeof(h));
        rcoll_net_send_all(r->parent_fd, r->up, sizeof(h) + r->up_len, rl_link_deadline(r));
    }
    r->up_len = 0;
}

/* Hold one rank's hello going up in its frame (a bs_up_hello_t); the held hellos go as one
 * block once every rank at or below this node has said hello, or RL_HOLD_NS after the oldest
 * (the relay's loop), or when the block is full, before any other message going up.  The
 * parent then takes a subtree's hellos in one message: one read, one path clock. */
static void rl_hold(bs_relay_t *r, const void *frame)
{
    const size_t one = sizeof(bs_up_hello_t);
    if (!r->up) {
        r->up = malloc(sizeof(bs_hdr_t) + BS_HELLOS_MAX * one);
        if (!r->up) { /* no room: this one goes alone, in its frame */
            if (r->parent_fd < 0) return;
            bs_up_hello_t f;
            memcpy(&f, frame, one);
            rcoll_bs_restamp(&f);
            rcoll_net_send_all(r->parent_fd, &f, one, rl_link_deadline(r));
            return;
        }
    }
    if (r->up_len + one > BS_HELLOS_MAX * one) rl_flush(r);
    if (!r->up_len) r->up_since = rcoll_now_ns();
    memcpy(r->up + sizeof(bs_hdr_t) + r->up_len, frame, one);
    r->up_len += one;
    if (++r->hellos_up >= r->subtree_ranks) rl_flush(r);
}

/* Send one whole message (header at msg) up in a frame from rank: a hello is held
 * (rl_hold), anything else goes at once, after the held hellos. */
static void rl_up(bs_relay_t *r, int rank, const void *msg)
{
    if (r->parent_fd < 0) return;
    bs_hdr_t h;
    memcpy(&h, msg, sizeof(h));
    if (h.type == BS_HELLO && h.len == sizeof(bs_hello_t)) {
        bs_up_hello_t f = {.outer = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_FWD,
                                     .len = (uint32_t)(sizeof(f) - sizeof(bs_hdr_t))},
                           .fwd = {.rank = rank, .except = 0}};
        _Static_assert(sizeof(f) == 2 * sizeof(bs_hdr_t) + sizeof(bs_fwd_t) + sizeof(bs_hello_t),
                       "packed hello frame");
        memcpy(&f.inner, msg, sizeof(h) + sizeof(bs_hello_t));
        rl_hold(r, &f);
        return;
    }
    rl_flush(r);
    rcoll_bs_send_fwd(r->parent_fd, rank, 0, h.type, (const char *)msg + sizeof(h), h.len,
                      rl_link_deadline(r));
}

static void rl_gone(bs_relay_t *r, int rank, int culprit, const char *text)
{
    bs_note_t n;
    rcoll_bs_note_fill(&n, culprit, RCOLL_ERR_REMOTE, text);
    rl_flush(r); /* a rank's hello before its loss */
    if (r->parent_fd >= 0)
        rcoll_bs_send_fwd(r->parent_fd, rank, 0, BS_GONE, &n, sizeof(n), rl_link_deadline(r));
}

static void rl_pending_drop(bs_relay_t *r, int i)
{
    close(r->pending[i].fd);
    r->pending[i] = r->pending[--r->npending];
}

static void rl_reject(bs_relay_t *r, int i, rcoll_status_t st, const char *why)
{
    bs_note_t n;
    rcoll_bs_note_fill(&n, -1, st, why);
    rcoll_bs_send_msg(r->pending[i].fd, BS_NACK, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
    RCOLL_INFO(BOOTSTRAP, "relay %d: rejected a connection: %s", r->node, why);
    rl_pending_drop(r, i);
}

/* A complete hello on pending connection i: a rank of this block, or a child relay. */
static void rl_admit(bs_relay_t *r, int i)
{
    rl_pending_t *p = &r->pending[i];
    char why[200];
    if (p->buf.m.hdr.type == BS_RELAY) {
        bs_relay_hello_t *h = &p->buf.m.u.relay;
        if (!rcoll_bs_secret_equal(h->secret, r->secret)) {
            rl_reject(r, i, RCOLL_ERR_AUTH, "wrong job secret");
            return;
        }
        if (r->dead[0]) {
            rl_reject(r, i, RCOLL_ERR_REMOTE, r->dead);
            return;
        }
        int j = -1;
        for (int c = 0; c < r->nchild; c++)
            if (r->child[c].node == h->index) j = c;
        if (j < 0 || h->nranks != r->t.nranks || r->child[j].fd >= 0) {
            snprintf(why, sizeof(why), "relay node %d of %d ranks is not a child of node %d "
                     "(or came twice): RCOLL_BS_RELAYS or RCOLL_BS_FANOUT differ between ranks?",
                     h->index, h->nranks, r->node);
            rl_reject(r, i, RCOLL_ERR_INVALID_USAGE, why);
            return;
        }
        r->child[j].fd = p->fd;
        RCOLL_INFO(BOOTSTRAP, "relay %d: relay %d connected", r->node, h->index);
        r->pending[i] = r->pending[--r->npending];
        return;
    }
    bs_hello_t *h = &p->buf.m.u.hello;
    if (!rcoll_bs_secret_equal(h->secret, r->secret)) {
        rl_reject(r, i, RCOLL_ERR_AUTH, "wrong job secret");
        return;
    }
    if (r->dead[0]) {
        rl_reject(r, i, RCOLL_ERR_REMOTE, r->dead);
        return;
    }
    if (h->nranks != r->t.nranks || h->rank < r->lo || h->rank >= r->hi) {
        snprintf(why, sizeof(why), "rank %d of %d does not join through this relay (node %d "
                 "of %d ranks, ranks %d-%d): RCOLL_BS_RELAYS or RCOLL_BS_FANOUT differ between "
                 "ranks?", h->rank, h->nranks, r->node, r->t.nranks, r->lo, r->hi - 1);
        rl_reject(r, i, RCOLL_ERR_INVALID_ARG, why);
        return;
    }
    rl_rank_t *k = &r->ranks[h->rank - r->lo];
    if (k->joined) {
        snprintf(why, sizeof(why), "rank %d already joined (from pid %d on %s)", h->rank,
                 (int)k->pid, k->host);
        rl_reject(r, i, RCOLL_ERR_INVALID_USAGE, why);
        return;
    }
    k->fd = p->fd;
    k->joined = 1;
    k->pid = h->info.pid;
    memcpy(k->host, h->info.hostname, sizeof(k->host));
    k->host[sizeof(k->host) - 1] = '\0';
    rl_up(r, h->rank, p->buf.raw);
    r->pending[i] = r->pending[--r->npending];
}

static void rl_read_pending(bs_relay_t *r, int i)
{
    rl_pending_t *p = &r->pending[i];
    rcoll_status_t st = rcoll_net_recv_some(p->fd, p->buf.raw, sizeof(bs_hdr_t), &p->got);
    if (st != RCOLL_OK) {
        rl_pending_drop(r, i);
        return;
    }
    if (p->got < sizeof(bs_hdr_t)) return;
    const bs_hdr_t *h = &p->buf.m.hdr;
    uint32_t want = h->type == BS_HELLO ? sizeof(bs_hello_t)
                    : h->type == BS_RELAY ? sizeof(bs_relay_hello_t) : 0;
    if (!rcoll_bs_hdr_valid(h, sizeof(bs_hello_t)) || !want || h->len != want) {
        RCOLL_INFO(BOOTSTRAP, "relay %d: dropped a connection that sent no bootstrap hello",
                   r->node);
        rl_pending_drop(r, i);
        return;
    }
    st = rcoll_net_recv_some(p->fd, p->buf.raw, sizeof(bs_hdr_t) + want, &p->got);
    if (st != RCOLL_OK) {
        rl_pending_drop(r, i);
        return;
    }
    if (p->got == sizeof(bs_hdr_t) + want) {
        rcoll_cpath_merge(h->path);
        rl_admit(r, i);
    }
}

/* Rank k of the block: its connection ended (garbage: st == RCOLL_ERR_PROTOCOL). */
static void rl_rank_lost(bs_relay_t *r, int k, rcoll_status_t st)
{
    rl_rank_t *m = &r->ranks[k - r->lo];
    close(m->fd);
    m->fd = -1;
    if (m->left) return;
    char text[RCOLL_BS_TEXT_MAX];
    snprintf(text, sizeof(text), "rank %d (%s pid %d) exited or was killed: its bootstrap "
             "connection %s", k, m->host, (int)m->pid,
             st == RCOLL_ERR_PROTOCOL ? "sent garbage" : "closed");
    rl_gone(r, k, k, text);
}

static void rl_rank_event(bs_relay_t *r, int k)
{
    rl_rank_t *m = &r->ranks[k - r->lo];
    int complete;
    rcoll_status_t st = rcoll_bs_rx_read(m->fd, &m->rx, &complete);
    if (st != RCOLL_OK) {
        rl_rank_lost(r, k, st);
        return;
    }
    if (!complete) return;
    m->rx.got = 0;
    rl_up(r, k, m->rx.buf.raw);
    if (m->rx.buf.m.hdr.type == BS_BYE) { /* it leaves: its close is no failure */
        m->left = 1;
        close(m->fd);
        m->fd = -1;
    }
}

/* Child relay j is gone: every rank below it is. */
static void rl_child_lost(bs_relay_t *r, int j)
{
    rl_child_t *c = &r->child[j];
    close(c->fd);
    c->fd = -1;
    int host = rcoll_bs_tree_host(&r->t, c->node);
    char text[RCOLL_BS_TEXT_MAX];
    snprintf(text, sizeof(text), "the bootstrap relay hosted with rank %d (%s pid %d) is gone: "
             "that process exited or was killed, and the ranks that joined through it lost "
             "their connection", host, c->host_name[0] ? c->host_name : "?", (int)c->host_pid);
    RCOLL_WARN(BOOTSTRAP, "relay %d: %s", r->node, text);
    for (int k = 0; k < r->t.nranks; k++)
        if (rcoll_bs_tree_below(&r->t, rcoll_bs_tree_node(&r->t, k), c->node))
            rl_gone(r, k, host, text);
}

/* One hello (in its frame, a bs_up_hello_t at e) from child relay j: held to go up. */
static void rl_child_hello(bs_relay_t *r, int j, const char *e)
{
    rl_child_t *c = &r->child[j];
    bs_fwd_t f;
    memcpy(&f, e + sizeof(bs_hdr_t), sizeof(f));
    if (rl_child_of(r, f.rank) != j) return; /* not from below that child: dropped */
    if (f.rank == rcoll_bs_tree_host(&r->t, c->node)) {
        bs_hello_t hello;
        memcpy(&hello, e + offsetof(bs_up_hello_t, hello), sizeof(hello));
        c->host_pid = hello.info.pid;
        memcpy(c->host_name, hello.info.hostname, sizeof(c->host_name));
        c->host_name[sizeof(c->host_name) - 1] = '\0';
    }
    rl_hold(r, e);
}

/* The whole message child relay j sent last (c->rx.msg): up it goes. */
static void rl_child_frame(bs_relay_t *r, int j)
{
    rl_child_t *c = &r->child[j];
    bs_hdr_t h;
    bs_fwd_t f;
    memcpy(&h, c->rx.msg, sizeof(h));
    size_t len = sizeof(h) + h.len;
    if (h.type == BS_HELLOS) { /* its subtree's hellos (whole, checked by the reader) */
        for (size_t o = sizeof(h); o < len; o += sizeof(bs_up_hello_t))
            rl_child_hello(r, j, c->rx.msg + o);
        return;
    }
    if (h.type != BS_FWD) return; /* nothing else comes up */
    memcpy(&f, c->rx.msg + sizeof(h), sizeof(f));
    if (rl_child_of(r, f.rank) != j) return; /* not from below that child: dropped */
    bs_hdr_t in;
    memcpy(&in, c->rx.msg + sizeof(h) + sizeof(f), sizeof(in));
    if (in.type == BS_HELLO && len == sizeof(bs_up_hello_t)) { /* a hello sent alone */
        rl_child_hello(r, j, c->rx.msg);
        return;
    }
    rl_flush(r);
    rcoll_bs_restamp(c->rx.msg);
    if (r->parent_fd >= 0)
        rcoll_net_send_all(r->parent_fd, c->rx.msg, len, rl_link_deadline(r));
}

static void rl_child_event(bs_relay_t *r, int j)
{
    rl_child_t *c = &r->child[j];
    for (;;) {
        int complete;
        rcoll_status_t st = rcoll_bs_frame_read(c->fd, &c->rx, RCOLL_BS_FRAME_UP_MAX, &complete);
        if (st != RCOLL_OK) {
            rl_child_lost(r, j);
            return;
        }
        if (!complete) return;
        rl_child_frame(r, j);
        rcoll_bs_frame_consume(&c->rx);
    }
}

/* A frame (or a message) from the parent. */
static void rl_down(bs_relay_t *r, char *buf)
{
    bs_hdr_t h;
    memcpy(&h, buf, sizeof(h));
    size_t len = sizeof(h) + h.len;
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9);
    if (h.type != BS_FWD) {
        /* Only a rejection of this relay comes bare (a wrong secret, a foreign node, or a
         * relay above that could not reach its own parent): every rank and relay below learns
         * it as its own, and so do those that come later. */
        bs_note_t n;
        memset(&n, 0, sizeof(n));
        memcpy(&n, buf + sizeof(h), h.len < sizeof(n) ? h.len : sizeof(n));
        n.text[sizeof(n.text) - 1] = '\0';
        for (int k = 0; k < r->hi - r->lo; k++)
            if (r->ranks[k].fd >= 0) rcoll_net_send_all(r->ranks[k].fd, buf, len, deadline);
        for (int j = 0; j < r->nchild; j++)
            if (r->child[j].fd >= 0) rcoll_net_send_all(r->child[j].fd, buf, len, deadline);
        snprintf(r->dead, sizeof(r->dead), "%s", n.text[0] ? n.text : "rejected by its parent");
        RCOLL_WARN(BOOTSTRAP, "relay %d: rejected by its parent: %s", r->node, r->dead);
        close(r->parent_fd);
        r->parent_fd = -1;
        return;
    }
    bs_fwd_t f;
    bs_hdr_t in;
    memcpy(&f, buf + sizeof(h), sizeof(f));
    memcpy(&in, buf + sizeof(h) + sizeof(f), sizeof(in));
    char *inner = buf + sizeof(h) + sizeof(f);
    size_t inner_len = sizeof(in) + in.len;
    rcoll_bs_restamp(buf); /* the frame and the message inside */
    if (f.rank == BS_FWD_ALL) { /* the child relays first: most ranks are below them */
        for (int j = 0; j < r->nchild; j++)
            if (r->child[j].fd >= 0) rcoll_net_send_all(r->child[j].fd, buf, len, deadline);
        for (int k = r->lo; k < r->hi; k++) {
            rl_rank_t *m = &r->ranks[k - r->lo];
            if (k != f.except && m->fd >= 0 && !m->left)
                rcoll_net_send_all(m->fd, inner, inner_len, deadline);
        }
        return;
    }
    if (f.rank >= r->lo && f.rank < r->hi) {
        rl_rank_t *m = &r->ranks[f.rank - r->lo];
        if (m->fd < 0) return;
        if (in.type == BS_GONE) { /* the root is done with it (left out of a shrink) */
            close(m->fd);
            m->fd = -1;
            m->left = 1;
            return;
        }
        rcoll_net_send_all(m->fd, inner, inner_len, deadline);
        return;
    }
    int j = rl_child_of(r, f.rank);
    if (j >= 0 && r->child[j].fd >= 0) rcoll_net_send_all(r->child[j].fd, buf, len, deadline);
}

/* Connect to the parent and say who this relay is.  On failure the relay stays up to tell
 * the ranks that come why they cannot join (r->dead). */
static void rl_connect_parent(bs_relay_t *r, uint64_t deadline)
{
    char abuf[64];
    rcoll_net_addr_str(&r->parent_addr, abuf, sizeof(abuf));
    int parent = rcoll_bs_tree_parent(&r->t, r->node);
    rcoll_status_t st = rcoll_net_connect_retry(&r->parent_addr, deadline, &r->parent_fd);
    if (st == RCOLL_OK) {
        bs_relay_hello_t h;
        memset(&h, 0, sizeof(h));
        memcpy(h.secret, r->secret, RCOLL_SECRET_BYTES);
        h.index = r->node;
        h.nranks = r->t.nranks;
        st = rcoll_bs_send_msg(r->parent_fd, BS_RELAY, &h, sizeof(h), deadline);
    }
    if (st == RCOLL_OK) {
        RCOLL_INFO(BOOTSTRAP, "relay %d: connected to its parent (node %d) at %s", r->node,
                   parent, abuf);
        return;
    }
    snprintf(r->dead, sizeof(r->dead), "the bootstrap relay hosted with rank %d could not "
             "reach its parent (node %d, hosted with rank %d) at %s: %.60s", r->lo, parent,
             rcoll_bs_tree_host(&r->t, parent), abuf, rcoll_err_get());
    RCOLL_WARN(BOOTSTRAP, "relay %d: %s", r->node, r->dead);
    if (r->parent_fd >= 0) close(r->parent_fd);
    r->parent_fd = -1;
}

/* The parent's connection ended while ranks below still use this relay: the relay (or root)
 * above is gone.  Each rank below is told so, naming the rank that hosted it, before the
 * connections close (a rank that already has a verdict keeps its first). */
static void rl_orphaned(bs_relay_t *r)
{
    int parent = rcoll_bs_tree_parent(&r->t, r->node);
    int host = rcoll_bs_tree_host(&r->t, parent);
    char text[RCOLL_BS_TEXT_MAX];
    snprintf(text, sizeof(text), "lost the bootstrap %s hosted with rank %d (above the relay of "
             "rank %d): that process exited or was killed", parent ? "relay" : "root", host,
             r->lo);
    bs_note_t n;
    rcoll_bs_note_fill(&n, host, RCOLL_ERR_REMOTE, text);
    uint64_t deadline = rcoll_now_ns() + RL_SEND_NS;
    int told = 0;
    for (int k = 0; k < r->hi - r->lo; k++)
        if (r->ranks[k].fd >= 0 && !r->ranks[k].left) {
            rcoll_bs_send_msg(r->ranks[k].fd, BS_FAIL, &n, sizeof(n), deadline);
            told++;
        }
    /* The relays below pass it to their ranks that have not left (at the job's normal end,
     * none: the root closes only once every rank has left). */
    for (int j = 0; j < r->nchild; j++)
        if (r->child[j].fd >= 0)
            rcoll_bs_send_fwd(r->child[j].fd, BS_FWD_ALL, -1, BS_FAIL, &n, sizeof(n), deadline);
    if (told) RCOLL_WARN(BOOTSTRAP, "relay %d: %s", r->node, text);
}

/* Close every connection: the ranks and relays below see this relay end. */
static void rl_close_all(bs_relay_t *r)
{
    for (int i = 0; i < r->npending; i++) close(r->pending[i].fd);
    r->npending = 0;
    for (int k = 0; k < r->hi - r->lo; k++)
        if (r->ranks[k].fd >= 0) {
            close(r->ranks[k].fd);
            r->ranks[k].fd = -1;
        }
    for (int j = 0; j < r->nchild; j++)
        if (r->child[j].fd >= 0) {
            close(r->child[j].fd);
            r->child[j].fd = -1;
        }
    if (r->parent_fd >= 0) close(r->parent_fd);
    if (r->listen_fd >= 0) close(r->listen_fd);
    r->parent_fd = r->listen_fd = -1;
}

void rcoll_bs_relay_run(bs_relay_t *r)
{
    /* The parent by the timeout; a relay that cannot reach it says so to the ranks that come
     * until their own deadline (RCOLL_TIMEOUT and 2 s). */
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9);
    rl_connect_parent(r, deadline);
    deadline += 2000000000ull;
    int nfd_max = 2 + RL_PENDING_MAX + (r->hi - r->lo) + r->nchild;
    struct pollfd *pfd = calloc((size_t)nfd_max, sizeof(*pfd));
    int *who = calloc((size_t)nfd_max, sizeof(*who));
    if (!pfd || !who) {
        free(pfd);
        free(who);
        return;
    }
    enum { W_PARENT = -1, W_LISTEN = -2 };
    for (;;) {
        uint64_t now = rcoll_now_ns();
        if (r->parent_fd < 0 && (r->dead[0] == 0 || now >= deadline)) break;
        /* A dead relay serves its refusal until the deadline: no early close, which would
         * reset connections whose hellos were not read yet. */
        for (int i = r->npending - 1; i >= 0; i--)
            if (now - r->pending[i].since_ns > RL_HELLO_TIMEOUT_NS) rl_pending_drop(r, i);
        int all_in = 1;
        for (int k = 0; k < r->hi - r->lo; k++) all_in &= r->ranks[k].joined;
        for (int j = 0; j < r->nchild; j++) all_in &= r->child[j].fd >= 0;
        if (all_in && r->listen_fd >= 0 && !r->npending && r->parent_fd >= 0) {
            close(r->listen_fd);
            r->listen_fd = -1;
        }
        int n = 0;
        if (r->parent_fd >= 0) {
            pfd[n] = (struct pollfd){.fd = r->parent_fd, .events = POLLIN};
            who[n++] = W_PARENT;
        }
        if (r->listen_fd >= 0 && now < deadline) {
            pfd[n] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
            who[n++] = W_LISTEN;
        }
        int base_p = n;
        for (int i = 0; i < r->npending; i++)
            pfd[n++] = (struct pollfd){.fd = r->pending[i].fd, .events = POLLIN};
        int base_r = n;
        for (int k = 0; k < r->hi - r->lo; k++)
            if (r->ranks[k].fd >= 0) {
                pfd[n] = (struct pollfd){.fd = r->ranks[k].fd, .events = POLLIN};
                who[n++] = k;
            }
        int base_c = n;
        for (int j = 0; j < r->nchild; j++)
            if (r->child[j].fd >= 0) {
                pfd[n] = (struct pollfd){.fd = r->child[j].fd, .events = POLLIN};
                who[n++] = j;
            }
        int wait_ms = 200;
        if (r->up_len) { /* held hellos go RL_HOLD_NS (or a quarter of the timeout) after the
                          * oldest */
            uint64_t hold = r->timeout_s * 2.5e8 < RL_HOLD_NS ? (uint64_t)(r->timeout_s * 2.5e8)
                                                                : RL_HOLD_NS;
            uint64_t due = r->up_since + hold;
            if (now >= due) {
                rl_flush(r);
            } else {
                uint64_t ms = (due - now + 999999) / 1000000;
                wait_ms = ms < 200 ? (int)ms : 200;
            }
        }
        if (poll(pfd, (nfds_t)n, wait_ms) <= 0) continue;
        /* The parent first: a frame for a rank is delivered before that rank's next read. */
        for (int i = 0; i < base_p; i++) {
            if (!pfd[i].revents) continue;
            if (who[i] == W_PARENT) {
                int complete = 1;
                rcoll_status_t st = RCOLL_OK;
                while (complete && r->parent_fd >= 0) {
                    st = rcoll_bs_frame_read(r->parent_fd, &r->prx, r->down_max, &complete);
                    if (st != RCOLL_OK || !complete) break;
                    rl_down(r, r->prx.msg);
                    rcoll_bs_frame_consume(&r->prx);
                }
                if (st != RCOLL_OK) { /* the root is done, or gone: so is this relay */
                    close(r->parent_fd);
                    r->parent_fd = -1;
                    rl_orphaned(r);
                    break;
                }
                if (r->parent_fd < 0) break; /* rejected: serve the refusal */
            } else if (who[i] == W_LISTEN) {
                for (int a = 0; a < RL_ACCEPT_BURST; a++) {
                    int fd;
                    rcoll_sockaddr_t peer;
                    if (rcoll_net_accept(r->listen_fd, &fd, &peer) != RCOLL_OK) break;
                    if (r->npending == RL_PENDING_MAX) rl_pending_drop(r, 0);
                    r->pending[r->npending++] =
                        (rl_pending_t){.fd = fd, .since_ns = rcoll_now_ns()};
                }
            }
        }
        if (r->parent_fd < 0 && !r->dead[0]) break;
        /* Pending connections (indices shift as they are admitted: last first). */
        for (int i = base_r - 1; i >= base_p; i--)
            if (pfd[i].revents && i - base_p < r->npending) rl_read_pending(r, i - base_p);
        for (int i = base_r; i < base_c; i++)
            if (pfd[i].revents && r->ranks[who[i]].fd == pfd[i].fd)
                rl_rank_event(r, r->lo + who[i]);
        for (int i = base_c; i < n; i++)
            if (pfd[i].revents && r->child[who[i]].fd == pfd[i].fd) rl_child_event(r, who[i]);
    }
    free(pfd);
    free(who);
    rl_close_all(r);
    RCOLL_INFO(BOOTSTRAP, "relay %d: done", r->node);
}
