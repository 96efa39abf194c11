/*
 * bootstrap_root.c - the bootstrap's root: a thread that admits one connection per rank once
 * it has proved the job secret, hands every rank the table of all ranks, then watches those
 * connections until the last rank leaves.  It announces a rank's death or reported failure to
 * every other rank, names the end of a chain of timeouts, compares stalled calls, answers
 * watchdogs and decides shrinks.  The protocol is drawn in bootstrap.c (the ranks' side); the
 * message helpers both sides use are in bootstrap_msg.c.
 */
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "core/bootstrap_int.h"
#include "core/bootstrap_wire.h"
#include "core/sig.h"
#include "util/cpath.h"
#include "util/log.h"
#include "util/ranks.h"
#include "util/status.h"
#include "util/time.h"

#define BS_PENDING_MAX 64     /* connections accepted and not yet through their hello */
#define BS_ACCEPT_BURST 16    /* accepts per pass, so hellos already sent are read in between */
#define BS_HELLO_TIMEOUT_NS (3ull * 1000000000ull) /* a connector must say hello by then */

#define BS_SIGS_PER_MEMBER 8 /* signatures the root relays for one rank, at most */

/* ------------------------------------------------------------------------------------------
 * Root
 * ---------------------------------------------------------------------------------------- */

typedef struct {
    int fd;
    uint64_t since_ns;
    size_t got;
    rcoll_sockaddr_t addr;
    union {
        struct {
            bs_hdr_t hdr;
            bs_hello_t hello;
        } m;
        char raw[sizeof(bs_hdr_t) + sizeof(bs_hello_t)];
    } buf;
} bs_pending_t;

/* What the root keeps of a member for the messages it may send after joining: touched only
 * when it sends them (the arrays of these and of the records are calloc'ed for the job once,
 * so the pages of the ranks that say nothing but hello are never written). */
typedef struct {
    char report[RCOLL_BS_TEXT_MAX]; /* its timeout report (waits_on) */
    rcoll_bs_sig_t stall;
    bs_rx_t rx;   /* partial control message */
    rcoll_bs_shrink_req_t shrink_req;
} bs_member_more_t;

typedef struct {
    int fd;       /* its own connection (-1: none, or gone) */
    int link;     /* or the relay link it is reached through (-1: its own connection) */
    int rank;     /* its rank */
    int open;     /* reachable: joined, and neither gone nor closed */
    int joined;
    int left;     /* said goodbye */
    int waits_on; /* rank this one reported a timeout on, or -1 */
    int sigs_relayed; /* its signatures passed on (at most BS_SIGS_PER_MEMBER) */
    int has_stall;    /* it reported a stalled call (more->stall) */
    int shrink_asked; /* sent BS_SHRINK in the open round (more->shrink_req) */
    uint64_t shrink_since;
    rcoll_peer_info_t *info; /* its record, in the root's table (infos[rank]) */
    bs_member_more_t *more;  /* what it reports (more[rank]) */
} bs_member_t;

/* A child relay's connection (fd -1: none yet, or lost). */
typedef struct {
    int node;
    int fd;
    bs_frx_t rx;
} bs_link_t;

/* Shrinks of communicators of some ranks decided lately: a request for one of them comes
 * from a member left out (it asked too late). */
#define BS_SUB_DECIDED_KEPT 64
typedef struct {
    uint64_t ctx;
    uint32_t seq;
} bs_sub_key_t;

struct rcoll_bs_root {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    int finished;
    int listen_fd[RCOLL_BS_ROOT_ADDRS]; /* one per address of the id (-1: none) */
    int nlisten;
    char secret[RCOLL_SECRET_BYTES];
    double timeout_s;
    int nranks; /* 0 until the first valid hello */
    int njoined;
    /* [nranks] NULL until that rank joins, then &store[rank].  The four arrays are calloc'ed
     * at the first hello, so their untouched pages cost nothing and the root's memory grows
     * with the ranks that joined, not with the count announced; a rank's hello writes its
     * member (64 bytes) and its record (infos, the table the root encodes). */
    bs_member_t **members;
    bs_member_t *store;
    rcoll_peer_info_t *infos;
    bs_member_more_t *more;
    bs_pending_t pending[BS_PENDING_MAX];
    int npending;
    rcoll_log_limit_t drop_limit; /* warnings about dropped connections */
    int failure_sent;
    uint64_t decide_at; /* when to name the culprit of reported timeouts (0 = none pending) */
    int joining;        /* the join phase (a lost rank fails the join) */
    int aborted;        /* the hosting rank failed its creation (rcoll_bs_root_abort), or a
                         * rank was lost while the others joined */
    int abort_culprit;  /* the rank to name (0: the hosting rank) */
    int abort_sent;     /* ... and the ranks that had joined were told */
    char abort_text[RCOLL_BS_TEXT_MAX];
    int first_named;    /* the rank named by the first timeout report */
    int shrink_open;    /* a rank asked to shrink the job's communicator; the others have
                         * until shrink_deadline */
    uint64_t shrink_deadline;
    int sub_open;       /* members asking to shrink communicators of some ranks */
    uint32_t shrink_rounds; /* shrinks decided so far */
    bs_sub_key_t sub_decided[BS_SUB_DECIDED_KEPT];
    int sub_ndecided;
    /* The tree of relays (rcoll_bs_root_set_tree; one node: none) and this root's links to
     * its child relays, through which the ranks below them are reached. */
    rcoll_bs_tree_t tree;
    bs_link_t *links;
    int nlinks;
    bs_relay_t *relay; /* set: this thread is a relay, not the root (bootstrap_relay.c) */
};

/* How long the root collects timeout reports before naming the rank at the end of the chain
 * of waiting ranks.  Ranks wait RCOLL_BS_VERDICT_WAIT_NS for the verdict. */
#define BS_DECIDE_WINDOW_NS 1000000000ull

static void root_unref(rcoll_bs_root_t *r)
{
    pthread_mutex_lock(&r->lock);
    int last = --r->refs == 0;
    pthread_mutex_unlock(&r->lock);
    if (!last) return;
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r->members);
    free(r->store);
    free(r->infos);
    free(r->more);
    for (int j = 0; j < r->nlinks; j++) rcoll_bs_frame_free(&r->links[j].rx);
    free(r->links);
    rcoll_bs_relay_free(r->relay);
    free(r);
}

static void pending_drop(rcoll_bs_root_t *r, int i, const char *why)
{
    char abuf[64];
    unsigned more = 0;
    if (rcoll_log_limit(&r->drop_limit, 5, &more)) {
        char tail[48] = "";
        if (more) snprintf(tail, sizeof(tail), " (%u more like this)", more);
        RCOLL_WARN(BOOTSTRAP, "dropped bootstrap connection from %s: %s%s",
                   rcoll_net_addr_str(&r->pending[i].addr, abuf, sizeof(abuf)), why, tail);
    }
    close(r->pending[i].fd);
    r->pending[i] = r->pending[--r->npending];
}

/* The pending table is full: make room by evicting the connection that has waited longest
 * without completing its hello (a rank sends its hello right after connecting, so that one is
 * the likeliest idle squatter).  It is told to connect again, which a real rank does. */
static void pending_evict_oldest(rcoll_bs_root_t *r)
{
    int old = 0;
    for (int i = 1; i < r->npending; i++)
        if (r->pending[i].since_ns < r->pending[old].since_ns) old = i;
    bs_note_t n;
    rcoll_bs_note_fill(&n, -1, BS_RETRY_STATUS, "too many pending connections: connect again");
    rcoll_bs_send_msg(r->pending[old].fd, BS_NACK, &n, sizeof(n), 0);
    pending_drop(r, old, "too many pending connections (the oldest is evicted and told to "
                 "connect again)");
}

static void pending_reject(rcoll_bs_root_t *r, int i, rcoll_status_t st, const char *why)
{
    bs_note_t n;
    rcoll_bs_note_fill(&n, -1, st, why);
    rcoll_bs_send_msg(r->pending[i].fd, BS_NACK, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
    pending_drop(r, i, why);
}

/* Take the hello h: its member, or NULL with *st and why[len] saying why it is refused. */
static bs_member_t *root_take_hello(rcoll_bs_root_t *r, const bs_hello_t *h, rcoll_status_t *st,
                                    char *why, size_t len)
{
    *st = RCOLL_ERR_INVALID_ARG;
    if (!rcoll_bs_secret_equal(h->secret, r->secret)) {
        *st = RCOLL_ERR_AUTH;
        snprintf(why, len, "wrong job secret");
        return NULL;
    }
    if (r->aborted) {
        *st = RCOLL_ERR_REMOTE;
        snprintf(why, len, "%s", r->abort_text);
        return NULL;
    }
    if (h->nranks < 1 || h->rank < 0 || h->rank >= h->nranks) {
        snprintf(why, len, "invalid rank %d of %d", h->rank, h->nranks);
        return NULL;
    }
    if (r->tree.nnodes > 1 && h->nranks != r->tree.nranks) {
        snprintf(why, len, "rank %d says nranks=%d but the job has %d ranks", h->rank,
                 h->nranks, r->tree.nranks);
        return NULL;
    }
    if (r->nranks == 0) {
        size_t n = (size_t)h->nranks;
        r->members = calloc(n, sizeof(*r->members));
        r->store = calloc(n, sizeof(*r->store));
        r->infos = calloc(n, sizeof(*r->infos));
        r->more = calloc(n, sizeof(*r->more));
        if (!r->members || !r->store || !r->infos || !r->more) {
            free(r->members);
            free(r->store);
            free(r->infos);
            free(r->more);
            r->members = NULL;
            r->store = NULL;
            r->infos = NULL;
            r->more = NULL;
            *st = RCOLL_ERR_NO_MEMORY;
            snprintf(why, len, "root out of memory");
            return NULL;
        }
        r->nranks = h->nranks;
    }
    if (h->nranks != r->nranks) {
        snprintf(why, len, "rank %d says nranks=%d but the job has %d ranks", h->rank,
                 h->nranks, r->nranks);
        return NULL;
    }
    if (r->members[h->rank]) {
        *st = RCOLL_ERR_INVALID_USAGE;
        snprintf(why, len, "rank %d already joined (from pid %d on %s)", h->rank,
                 (int)r->members[h->rank]->info->pid, r->members[h->rank]->info->hostname);
        return NULL;
    }
    bs_member_t *m = &r->store[h->rank];
    r->members[h->rank] = m;
    m->info = &r->infos[h->rank];
    m->more = &r->more[h->rank];
    m->waits_on = -1;
    m->fd = -1;
    m->link = -1;
    m->rank = h->rank;
    m->open = 1;
    m->joined = 1;
    *m->info = h->info;
    m->info->hostname[sizeof(m->info->hostname) - 1] = '\0';
    r->njoined++;
    RCOLL_INFO(BOOTSTRAP, "root: rank %d joined from %s pid %d (%d/%d)", h->rank,
               m->info->hostname, (int)m->info->pid, r->njoined, r->nranks);
    return m;
}

/* A complete hello arrived on pending connection i: admit or reject it. */
static void root_admit(rcoll_bs_root_t *r, int i)
{
    bs_pending_t *p = &r->pending[i];
    char why[RCOLL_BS_TEXT_MAX];
    rcoll_status_t st;
    bs_member_t *m = root_take_hello(r, &p->buf.m.hello, &st, why, sizeof(why));
    if (!m) {
        pending_reject(r, i, st, why);
        return;
    }
    m->fd = p->fd;
    r->pending[i] = r->pending[--r->npending];
}

/* A complete relay hello on pending connection i: one of this root's child relays. */
static void root_admit_relay(rcoll_bs_root_t *r, int i)
{
    bs_pending_t *p = &r->pending[i];
    bs_relay_hello_t h;
    memcpy(&h, p->buf.raw + sizeof(bs_hdr_t), sizeof(h));
    char why[200];
    if (!rcoll_bs_secret_equal(h.secret, r->secret)) {
        pending_reject(r, i, RCOLL_ERR_AUTH, "wrong job secret");
        return;
    }
    if (r->aborted) {
        pending_reject(r, i, RCOLL_ERR_REMOTE, r->abort_text);
        return;
    }
    int j = -1;
    for (int c = 0; c < r->nlinks; c++)
        if (r->links[c].node == h.index && h.nranks == r->tree.nranks && r->links[c].fd < 0)
            j = c;
    if (j < 0) {
        snprintf(why, sizeof(why), "relay node %d of %d ranks is not a child of this root "
                 "(it has %d relays below it for %d ranks, or that one came twice): "
                 "RCOLL_BS_RELAYS or RCOLL_BS_FANOUT differ between ranks?", h.index, h.nranks,
                 r->nlinks, r->tree.nranks);
        pending_reject(r, i, RCOLL_ERR_INVALID_USAGE, why);
        return;
    }
    r->links[j].fd = p->fd;
    RCOLL_INFO(BOOTSTRAP, "root: relay %d connected", r->links[j].node);
    r->pending[i] = r->pending[--r->npending];
}

/* Read what is available on pending connection i. */
static void root_read_pending(rcoll_bs_root_t *r, int i)
{
    bs_pending_t *p = &r->pending[i];
    /* The header first: a relay says less than a rank, and what follows is not its hello. */
    rcoll_status_t st = rcoll_net_recv_some(p->fd, p->buf.raw, sizeof(bs_hdr_t), &p->got);
    if (st == RCOLL_OK && p->got >= sizeof(bs_hdr_t)) {
        bs_hdr_t h;
        memcpy(&h, p->buf.raw, sizeof(h));
        if (rcoll_bs_hdr_valid(&h, sizeof(bs_relay_hello_t)) && h.type == BS_RELAY &&
            h.len == sizeof(bs_relay_hello_t)) {
            st = rcoll_net_recv_some(p->fd, p->buf.raw, sizeof(h) + h.len, &p->got);
            if (st == RCOLL_OK && p->got == sizeof(h) + h.len) {
                root_admit_relay(r, i);
                return;
            }
            if (st == RCOLL_OK) return;
        } else {
            st = rcoll_net_recv_some(p->fd, p->buf.raw, sizeof(p->buf.raw), &p->got);
        }
    }
    if (st != RCOLL_OK) {
        pending_drop(r, i, "closed before completing its hello");
        return;
    }
    int scan = rcoll_bs_hello_scan(p->buf.raw, p->got);
    if (scan < 0) {
        pending_drop(r, i, "not an rcoll bootstrap hello (bad magic, version or size)");
        return;
    }
    if (scan > 0) {
        bs_hdr_t h;
        memcpy(&h, p->buf.raw, sizeof(h));
        rcoll_cpath_merge(h.path); /* the table waits on every hello */
        root_admit(r, i);
    }
}

static uint64_t root_link_deadline(const rcoll_bs_root_t *r)
{
    return rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9);
}

/* Send a message to member m: on its own connection, or in a frame through its relay. */
static rcoll_status_t member_send(rcoll_bs_root_t *r, bs_member_t *m, int type,
                                  const void *payload, uint32_t len, uint64_t deadline_ns)
{
    if (m->link < 0) return rcoll_bs_send_msg(m->fd, type, payload, len, deadline_ns);
    bs_link_t *l = &r->links[m->link];
    if (l->fd < 0) return RCOLL_ERR_REMOTE;
    /* A frame given up half sent would corrupt the link for every rank behind it: on a link
     * a send may take the job's timeout (found at 1024 ranks on two cores). */
    return rcoll_bs_send_fwd(l->fd, m->rank, 0, type, payload, len, root_link_deadline(r));
}

static void root_send_fail(rcoll_bs_root_t *r, int except, const bs_note_t *n)
{
    for (int k = 0; k < r->nranks; k++) {
        bs_member_t *m = r->members[k];
        if (k == except || !m || !m->open || m->left) continue;
        member_send(r, m, BS_FAIL, n, sizeof(*n), rcoll_now_ns() + 1000000000ull);
    }
}

/* The root is done with member m: its connection is closed (through a relay: the relay is
 * told to close it). */
static void member_close(rcoll_bs_root_t *r, bs_member_t *m)
{
    if (!m) return;
    if (m->open && m->link >= 0 && r->links[m->link].fd >= 0)
        rcoll_bs_send_fwd(r->links[m->link].fd, m->rank, 0, BS_GONE, NULL, 0,
                          root_link_deadline(r));
    if (m->fd >= 0) close(m->fd);
    m->fd = -1;
    m->open = 0;
}

/* The drop warnings suppressed so far, in one line (force: whether their second is over). */
static void drops_report(rcoll_bs_root_t *r, int force)
{
    unsigned n = rcoll_log_limit_take(&r->drop_limit, force);
    if (n)
        RCOLL_WARN(BOOTSTRAP, "root: dropped %u more bootstrap connections (%u more like this; "
                   "at most 5 such warnings a second)", n, n);
}

static void root_link_event(rcoll_bs_root_t *r, int j);

/* Joining phase: returns 1 when every rank has joined, 0 on timeout/failure. */
static int root_join_loop(rcoll_bs_root_t *r)
{
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9);
    struct pollfd *pfd = calloc(RCOLL_BS_ROOT_ADDRS + BS_PENDING_MAX + (size_t)r->nlinks,
                                sizeof(*pfd));
    if (!pfd) return 0;
    while (r->aborted || r->nranks == 0 || r->njoined < r->nranks) {
        uint64_t now = rcoll_now_ns();
        if (now >= deadline) {
            free(pfd);
            return 0;
        }
        pthread_mutex_lock(&r->lock);
        int aborted = r->aborted;
        pthread_mutex_unlock(&r->lock);
        if (aborted && !r->abort_sent) { /* those that joined learn it now, the rest on arrival */
            bs_note_t n;
            rcoll_bs_note_fill(&n, r->abort_culprit, RCOLL_ERR_REMOTE, r->abort_text);
            root_send_fail(r, -1, &n);
            r->abort_sent = 1;
            r->failure_sent = 1;
        }
        for (int i = r->npending - 1; i >= 0; i--)
            if (now - r->pending[i].since_ns > BS_HELLO_TIMEOUT_NS)
                pending_drop(r, i, "no hello within 3 s");
        drops_report(r, 0);
        int n = 0;
        for (int l = 0; l < r->nlisten; l++)
            pfd[n++] = (struct pollfd){.fd = r->listen_fd[l], .events = POLLIN};
        int np = r->npending;
        for (int i = 0; i < np; i++)
            pfd[n++] = (struct pollfd){.fd = r->pending[i].fd, .events = POLLIN};
        for (int j = 0; j < r->nlinks; j++)
            pfd[n++] = (struct pollfd){.fd = r->links[j].fd, .events = POLLIN}; /* -1: none */
        poll(pfd, (nfds_t)n, 200);
        for (int j = 0; j < r->nlinks; j++)
            if (pfd[r->nlisten + np + j].revents && r->links[j].fd == pfd[r->nlisten + np + j].fd)
                root_link_event(r, j);
        for (int i = np - 1; i >= 0; i--)
            if (i < r->npending && pfd[r->nlisten + i].revents) root_read_pending(r, i);
        for (int l = 0; l < r->nlisten; l++)
            for (int k = 0; k < BS_ACCEPT_BURST; k++) {
                int fd;
                rcoll_sockaddr_t peer;
                if (rcoll_net_accept(r->listen_fd[l], &fd, &peer) != RCOLL_OK) break;
                if (r->npending == BS_PENDING_MAX) pending_evict_oldest(r);
                r->pending[r->npending++] = (bs_pending_t){.fd = fd,
                                                           .since_ns = rcoll_now_ns(),
                                                           .addr = peer};
            }
    }
    free(pfd);
    return 1;
}

static int root_join_phase(rcoll_bs_root_t *r)
{
    r->joining = 1;
    int done = root_join_loop(r);
    r->joining = 0;
    drops_report(r, 1);
    return done;
}

static void root_join_failed(rcoll_bs_root_t *r)
{
    int first = -1, nmiss = 0;
    uint8_t *miss = calloc((size_t)r->nranks, 1);
    for (int k = 0; k < r->nranks; k++) {
        if (r->members[k]) continue;
        if (first < 0) first = k;
        nmiss++;
        if (miss) miss[k] = 1;
    }
    /* Every missing rank counted, as ranges; a list too long for the note says how many it
     * leaves out (ranks.h). */
    char text[RCOLL_BS_TEXT_MAX];
    if (nmiss == 1) {
        snprintf(text, sizeof(text), "rank %d never joined the bootstrap within %g s", first,
                 r->timeout_s);
    } else {
        size_t o = (size_t)snprintf(text, sizeof(text), "%d ranks never joined the bootstrap "
                                    "within %g s: ", nmiss, r->timeout_s);
        if (miss) rcoll_ranks_format(text, sizeof(text), o, miss, r->nranks);
    }
    free(miss);
    RCOLL_WARN(BOOTSTRAP, "root: %s", text);
    bs_note_t n;
    rcoll_bs_note_fill(&n, first, RCOLL_ERR_TIMEOUT, text);
    root_send_fail(r, -1, &n);
}

/* Member k reported a stalled call.  Two stalled calls on one communicator with the same
 * number (the signature's first 8 bytes) but different signatures are a mismatch that no
 * message between those ranks may ever reveal (each waits on a peer that runs something
 * else): announce it, with both signatures, so every rank fails the call naming both. */
static void root_check_stalls(rcoll_bs_root_t *r, int k)
{
    const rcoll_bs_sig_t *a = &r->members[k]->more->stall;
    for (int j = 0; j < r->nranks && !r->failure_sent; j++) {
        bs_member_t *o = r->members[j];
        if (j == k || !o || !o->has_stall) continue;
        const rcoll_bs_sig_t *b = &o->more->stall;
        if (b->ctx != a->ctx || memcmp(b->sig, a->sig, 8) != 0 ||
            memcmp(b->sig, a->sig, sizeof(a->sig)) == 0)
            continue;
        for (int i = 0; i < r->nranks; i++) {
            bs_member_t *d = r->members[i];
            if (!d || !d->open || d->left) continue;
            member_send(r, d, BS_SIG, a, sizeof(*a), rcoll_now_ns() + 100000000ull);
            member_send(r, d, BS_SIG, b, sizeof(*b), rcoll_now_ns() + 100000000ull);
        }
        char text[RCOLL_BS_TEXT_MAX];
        snprintf(text, sizeof(text), "rank %d and rank %d made different calls as the same "
                 "collective operation (found while both waited)", (int)b->rank, (int)a->rank);
        RCOLL_WARN(BOOTSTRAP, "root: %s", text);
        bs_note_t n;
        rcoll_bs_note_fill(&n, a->rank, RCOLL_ERR_INVALID_USAGE, text);
        root_send_fail(r, -1, &n);
        r->failure_sent = 1;
    }
}

/* ------------------------------------------------------------------------------------------
 * Shrink (rcoll_comm_shrink): the survivors agree on who is alive
 * ---------------------------------------------------------------------------------------- */

static int sub_is_member(const rcoll_bs_shrink_req_t *q, int k)
{
    return k >= 0 && k < RCOLL_BS_SUB_BITS && (q->members[k / 8] >> (k % 8) & 1);
}

static int sub_same(const rcoll_bs_shrink_req_t *a, const rcoll_bs_shrink_req_t *b)
{
    return a->ctx == b->ctx && a->seq == b->seq && (a->flags & RCOLL_BS_SHRINK_SUB) &&
           (b->flags & RCOLL_BS_SHRINK_SUB);
}

/* Member k asks to shrink.  The job's communicator: the round opens with the first request
 * and lasts until every member whose connection is still open has asked, or the timeout.
 * A communicator of some ranks: its own round, for the members the request names; one that
 * was decided already (the member asks too late) is answered at once. */
static void root_shrink_request(rcoll_bs_root_t *r, int k, const rcoll_bs_shrink_req_t *req)
{
    bs_member_t *m = r->members[k];
    if (req->flags & RCOLL_BS_SHRINK_SUB) {
        for (int i = 0; i < r->sub_ndecided; i++) {
            if (r->sub_decided[i].ctx != req->ctx || r->sub_decided[i].seq != req->seq)
                continue;
            char text[RCOLL_BS_TEXT_MAX];
            snprintf(text, sizeof(text), "rank %d (%s pid %d) called rcoll_comm_shrink more "
                     "than %g s after the first rank of that communicator: the others went on "
                     "without it", k, m->info->hostname, (int)m->info->pid, r->timeout_s);
            RCOLL_WARN(BOOTSTRAP, "root: %s", text);
            bs_note_t n;
            rcoll_bs_note_fill(&n, k, RCOLL_ERR_TIMEOUT, text);
            member_send(r, m, BS_LATE, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
            return;
        }
    }
    m->more->shrink_req = *req; /* its host name terminated (rcoll_bs_ctl_decode) */
    m->shrink_asked = 1;
    m->shrink_since = rcoll_now_ns();
    if (req->flags & RCOLL_BS_SHRINK_SUB) {
        r->sub_open = 1;
    } else if (!r->shrink_open) {
        r->shrink_open = 1;
        r->shrink_deadline = m->shrink_since + (uint64_t)(r->timeout_s * 1e9);
    }
    RCOLL_INFO(BOOTSTRAP, "root: rank %d asks to shrink (its rank %d in the communicator%s)", k,
               (int)req->rank, req->flags & RCOLL_BS_SHRINK_SUB ? " of some ranks" : "");
}

typedef struct {
    int32_t rank; /* rank in the communicator shrunk */
    int k;        /* member */
} shrink_key_t;

static int shrink_key_cmp(const void *a, const void *b)
{
    const shrink_key_t *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* Send the members keys[0..count) (sorted) their new communicator: one SHRUNK per member to
 * each of them. */
static void root_shrink_send(rcoll_bs_root_t *r, const shrink_key_t *keys, int count, int sub,
                             uint32_t round)
{
    for (int s = 0; s < count; s++) {
        bs_member_t *to = r->members[keys[s].k];
        for (int i = 0; i < count && to->open; i++) {
            bs_shrunk_t msg;
            memset(&msg, 0, sizeof(msg));
            msg.round = round;
            msg.index = i;
            msg.count = count;
            msg.sub = sub;
            msg.member.bs_rank = keys[i].k;
            msg.member.req = r->members[keys[i].k]->more->shrink_req;
            /* A survivor that cannot take it has died since: the watch announces it. */
            if (member_send(r, to, BS_SHRUNK, &msg, sizeof(msg),
                                  rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9)) != RCOLL_OK)
                break;
        }
    }
}

/* After a decision: a new round of failures, the next death is announced again. */
static void root_new_failure_round(rcoll_bs_root_t *r)
{
    r->failure_sent = 0;
    r->decide_at = 0;
    for (int k = 0; k < r->nranks; k++) {
        bs_member_t *m = r->members[k];
        m->waits_on = -1;
        m->has_stall = 0;
        m->sigs_relayed = 0;
    }
}

/* The rounds of communicators of some ranks: each (communicator, shrink number) is decided
 * once every member it names that is still connected has asked, or RCOLL_TIMEOUT after its
 * first request; the members that asked are its new communicator, in their old order.  Those
 * that did not are left out of it only (not cut from the job); a later request of theirs is
 * answered LATE. */
static void root_sub_check(rcoll_bs_root_t *r, shrink_key_t *keys)
{
    if (!r->sub_open) return;
    int open = 0;
    uint64_t now = rcoll_now_ns();
    for (int k = 0; k < r->nranks; k++) {
        bs_member_t *lead = r->members[k];
        if (!lead->shrink_asked || !(lead->more->shrink_req.flags & RCOLL_BS_SHRINK_SUB)) continue;
        const rcoll_bs_shrink_req_t *q = &lead->more->shrink_req;
        uint64_t first = lead->shrink_since;
        int waiting = 0, count = 0;
        for (int j = 0; j < r->nranks; j++) {
            bs_member_t *o = r->members[j];
            int asked = o->shrink_asked && sub_same(&o->more->shrink_req, q);
            if (asked && o->shrink_since < first) first = o->shrink_since;
            if (asked && o->open) keys[count++] = (shrink_key_t){o->more->shrink_req.rank, j};
            else if (sub_is_member(q, j) && o->open && !asked) waiting++;
        }
        if (waiting && now < first + (uint64_t)(r->timeout_s * 1e9)) {
            open = 1;
            continue;
        }
        qsort(keys, (size_t)count, sizeof(*keys), shrink_key_cmp);
        uint32_t round = ++r->shrink_rounds;
        RCOLL_INFO(BOOTSTRAP, "root: shrink #%u (communicator %016llx of some ranks) decided: "
                   "%d member%s%s", round, (unsigned long long)q->ctx, count,
                   count == 1 ? "" : "s", waiting ? ", the late left out" : "");
        bs_sub_key_t key = {q->ctx, q->seq};
        root_shrink_send(r, keys, count, 1, round);
        r->sub_decided[r->sub_ndecided++ % BS_SUB_DECIDED_KEPT] = key;
        if (r->sub_ndecided > BS_SUB_DECIDED_KEPT) r->sub_ndecided = BS_SUB_DECIDED_KEPT;
        for (int j = 0; j < r->nranks; j++) {
            bs_member_t *o = r->members[j];
            const rcoll_bs_shrink_req_t *oq = &o->more->shrink_req;
            if (o->shrink_asked && oq->ctx == key.ctx && oq->seq == key.seq &&
                (oq->flags & RCOLL_BS_SHRINK_SUB))
                o->shrink_asked = 0;
        }
        root_new_failure_round(r);
    }
    r->sub_open = open;
}

/* Decide a shrink round once every member still connected has asked (or at its deadline,
 * excluding those that have not): the members that asked and are connected now are the new
 * communicator, in the order of their ranks in the old one.  The decision is made here, at
 * one instant, so every survivor gets the same list; a member that dies after it is in the
 * list and its death is announced afresh (the failure latch is reset for the new round). */
static void root_shrink_check(rcoll_bs_root_t *r)
{
    if (!r->shrink_open && !r->sub_open) return;
    shrink_key_t *keys = calloc((size_t)(unsigned)r->nranks + 1, sizeof(*keys));
    if (!keys) return; /* tried again at the next pass */
    root_sub_check(r, keys);
    if (!r->shrink_open) {
        free(keys);
        return;
    }
    int waiting = 0;
    for (int k = 0; k < r->nranks; k++) {
        bs_member_t *m = r->members[k];
        if (m->open && !(m->shrink_asked && !(m->more->shrink_req.flags & RCOLL_BS_SHRINK_SUB)))
            waiting++;
    }
    if (waiting && rcoll_now_ns() < r->shrink_deadline) {
        free(keys);
        return;
    }
    for (int k = 0; k < r->nranks && waiting; k++) {
        bs_member_t *m = r->members[k];
        if (!m->open || (m->shrink_asked && !(m->more->shrink_req.flags & RCOLL_BS_SHRINK_SUB)))
            continue;
        char text[RCOLL_BS_TEXT_MAX];
        snprintf(text, sizeof(text), "rank %d (%s pid %d) did not call rcoll_comm_shrink within "
                 "%g s of the first rank's call: it is excluded from the shrunk communicator",
                 k, m->info->hostname, (int)m->info->pid, r->timeout_s);
        RCOLL_WARN(BOOTSTRAP, "root: %s", text);
        bs_note_t n;
        rcoll_bs_note_fill(&n, k, RCOLL_ERR_TIMEOUT, text);
        member_send(r, m, BS_EXCLUDED, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
        member_close(r, m);
    }
    int count = 0;
    for (int k = 0; k < r->nranks; k++)
        if (r->members[k]->open && r->members[k]->shrink_asked &&
            !(r->members[k]->more->shrink_req.flags & RCOLL_BS_SHRINK_SUB))
            keys[count++] = (shrink_key_t){r->members[k]->more->shrink_req.rank, k};
    qsort(keys, (size_t)count, sizeof(*keys), shrink_key_cmp);
    uint32_t round = ++r->shrink_rounds;
    RCOLL_INFO(BOOTSTRAP, "root: shrink #%u decided: %d member%s", round, count,
               count == 1 ? "" : "s");
    root_shrink_send(r, keys, count, 0, round);
    free(keys);
    r->shrink_open = 0;
    for (int k = 0; k < r->nranks; k++) r->members[k]->shrink_asked = 0;
    root_new_failure_round(r);
}

/* Member k's watchdog fired in the call of its latest stall report: answer with what every
 * rank last reported of its waits on that communicator.  The root does not know which
 * members a split communicator has; a report carries the rank in that communicator. */
static void root_wdog_reply(rcoll_bs_root_t *r, int k)
{
    const rcoll_bs_sig_t *a = &r->members[k]->more->stall;
    rcoll_bs_wdog_t w;
    memset(&w, 0, sizeof(w));
    w.ctx = a->ctx;
    memcpy(&w.seq, a->sig, sizeof(w.seq));
    for (int j = 0; j < r->nranks; j++) {
        bs_member_t *o = r->members[j];
        if (!o || !o->has_stall) continue;
        int here = o->more->stall.ctx == a->ctx, rank = here ? o->more->stall.rank : j;
        if (!here && !(a->flags & RCOLL_BS_SIG_MEMBERS)) continue; /* its rank is unknown */
        rcoll_sig_t sig;
        memcpy(&sig, o->more->stall.sig, sizeof(sig));
        if (here && sig.seq == w.seq) { /* in this call (a different one: a mismatch, said) */
            if (!memcmp(o->more->stall.sig, a->sig, sizeof(a->sig)) && rank >= 0 &&
                rank < RCOLL_BS_WDOG_BITS)
                w.reached[rank / 8] |= (uint8_t)(1u << (rank % 8));
        } else if (w.nlast < RCOLL_BS_WDOG_LAST) {
            w.last[w.nlast].rank = rank;
            w.last[w.nlast].kind = sig.kind;
            w.last[w.nlast].ctx = o->more->stall.ctx;
            w.last[w.nlast++].seq = sig.seq;
        }
    }
    member_send(r, r->members[k], BS_WDOG_REPLY, &w, sizeof(w),
                      rcoll_now_ns() + 100000000ull);
}

/* Handle one readable member connection in the watch phase. */
static void root_decide_timeout(rcoll_bs_root_t *r);

/* Member k is lost (its connection ended without a goodbye, or its relay's did): announce
 * it, naming culprit, unless a failure was announced already.  While ranks are joining, the
 * join fails: those that joined are told, the rest when they arrive. */
static void root_member_lost(rcoll_bs_root_t *r, int k, int culprit, const char *text)
{
    bs_member_t *m = r->members ? r->members[k] : NULL;
    if (m) {
        if (!m->open) return;
        if (m->fd >= 0) close(m->fd);
        m->fd = -1;
        m->open = 0;
    }
    if (r->joining) {
        pthread_mutex_lock(&r->lock);
        if (!r->aborted) {
            snprintf(r->abort_text, sizeof(r->abort_text), "%s", text);
            r->abort_culprit = culprit;
            r->aborted = 1;
            RCOLL_WARN(BOOTSTRAP, "root: %s", text);
        }
        pthread_mutex_unlock(&r->lock);
        return;
    }
    if (r->failure_sent) return;
    RCOLL_WARN(BOOTSTRAP, "root: %s", text);
    bs_note_t n;
    rcoll_bs_note_fill(&n, culprit, RCOLL_ERR_REMOTE, text);
    root_send_fail(r, k, &n);
    r->failure_sent = 1;
}

static void root_member_msg(rcoll_bs_root_t *r, int k);

static void root_member_event(rcoll_bs_root_t *r, int k)
{
    bs_member_t *m = r->members[k];
    if (!m->open) return; /* closed since the poll set was built (left out of a shrink) */
    int complete;
    rcoll_status_t st = rcoll_bs_rx_read(m->fd, &m->more->rx, &complete);
    if (st == RCOLL_OK && !complete) return;
    if (st != RCOLL_OK) {
        char text[RCOLL_BS_TEXT_MAX];
        snprintf(text, sizeof(text),
                 "rank %d (%s pid %d) exited or was killed: its bootstrap connection %s", k,
                 m->info->hostname, (int)m->info->pid,
                 st == RCOLL_ERR_PROTOCOL ? "sent garbage" : "closed");
        root_member_lost(r, k, k, text);
        return;
    }
    root_member_msg(r, k);
}

/* Relay link j is gone: so is every rank below it. */
static void root_link_lost(rcoll_bs_root_t *r, int j)
{
    bs_link_t *l = &r->links[j];
    close(l->fd);
    l->fd = -1;
    int host = rcoll_bs_tree_host(&r->tree, l->node);
    const bs_member_t *hm = r->members && host < r->nranks ? r->members[host] : NULL;
    char text[RCOLL_BS_TEXT_MAX];
    snprintf(text, sizeof(text), "the bootstrap relay hosted with rank %d (%s pid %d) is gone: "
             "that process exited or was killed, and the ranks that joined through it lost "
             "their connection", host, hm ? hm->info->hostname : "?", hm ? (int)hm->info->pid : 0);
    int first = 1;
    for (int k = 0; r->members && k < r->nranks; k++) {
        bs_member_t *m = r->members[k];
        if (!m || m->link != j || !m->open) continue;
        if (first) root_member_lost(r, k, host, text);
        m->open = 0;
        first = 0;
    }
    if (first) root_member_lost(r, host, host, text); /* none had joined: the join fails */
}

/* The whole frame at the start of relay link j's buffer: a hello, a message or a loss of a
 * rank below it. */
/* Rank k's hello (in its frame, a bs_up_hello_t at e) through relay link j: it joins, or is
 * refused through that link. */
static void root_link_hello(rcoll_bs_root_t *r, int j, const char *e)
{
    bs_link_t *l = &r->links[j];
    bs_fwd_t f;
    memcpy(&f, e + sizeof(bs_hdr_t), sizeof(f));
    int k = f.rank;
    if (k < 0 || k >= r->tree.nranks ||
        !rcoll_bs_tree_below(&r->tree, rcoll_bs_tree_node(&r->tree, k), l->node))
        return; /* not a rank below that relay: dropped */
    bs_hello_t hello;
    memcpy(&hello, e + offsetof(bs_up_hello_t, hello), sizeof(hello));
    char why[RCOLL_BS_TEXT_MAX];
    rcoll_status_t st;
    bs_member_t *m = NULL;
    if (hello.rank != k) {
        st = RCOLL_ERR_PROTOCOL;
        snprintf(why, sizeof(why), "a hello of rank %d came as rank %d's", hello.rank, k);
    } else {
        m = root_take_hello(r, &hello, &st, why, sizeof(why));
    }
    if (m) {
        m->link = j;
        return;
    }
    bs_note_t n;
    rcoll_bs_note_fill(&n, -1, st, why);
    RCOLL_INFO(BOOTSTRAP, "root: rejected rank %d (through relay %d): %s", k, l->node, why);
    rcoll_bs_send_fwd(l->fd, k, 0, BS_NACK, &n, sizeof(n), root_link_deadline(r));
}

/* The whole message relay link j sent last (l->rx.msg). */
static void root_link_frame(rcoll_bs_root_t *r, int j)
{
    bs_link_t *l = &r->links[j];
    bs_hdr_t h, in;
    bs_fwd_t f;
    memcpy(&h, l->rx.msg, sizeof(h));
    if (h.type == BS_HELLOS) { /* a subtree's hellos (whole, checked by the reader) */
        for (size_t o = sizeof(h); o < sizeof(h) + h.len && l->fd >= 0;
             o += sizeof(bs_up_hello_t))
            root_link_hello(r, j, l->rx.msg + o);
        return;
    }
    if (h.type != BS_FWD) return;
    memcpy(&f, l->rx.msg + sizeof(h), sizeof(f));
    const char *inner = l->rx.msg + sizeof(h) + sizeof(f);
    memcpy(&in, inner, sizeof(in));
    int k = f.rank;
    if (k < 0 || k >= r->tree.nranks ||
        !rcoll_bs_tree_below(&r->tree, rcoll_bs_tree_node(&r->tree, k), l->node))
        return; /* not a rank below that relay: dropped */
    if (in.type == BS_HELLO) { /* a hello sent alone */
        if (in.len == sizeof(bs_hello_t)) root_link_hello(r, j, l->rx.msg);
        return;
    }
    bs_member_t *m = r->members ? r->members[k] : NULL;
    if (!m || m->link != j || !m->open) return;
    if (in.type == BS_GONE) {
        bs_note_t n;
        memset(&n, 0, sizeof(n));
        memcpy(&n, inner + sizeof(in), in.len < sizeof(n) ? in.len : sizeof(n));
        n.text[sizeof(n.text) - 1] = '\0';
        int culprit = n.culprit >= 0 && n.culprit < r->nranks ? n.culprit : k;
        root_member_lost(r, k, culprit, n.text);
        return;
    }
    if (in.len > sizeof(bs_payload_t)) return;
    memcpy(m->more->rx.buf.raw, inner, sizeof(in) + in.len);
    m->more->rx.got = 0;
    if (!r->joining) root_member_msg(r, k); /* a message while others join: none expected */
}

/* What has arrived on relay link j: every whole frame, read together. */
static void root_link_event(rcoll_bs_root_t *r, int j)
{
    bs_link_t *l = &r->links[j];
    for (;;) {
        int complete;
        rcoll_status_t st = rcoll_bs_frame_read(l->fd, &l->rx, RCOLL_BS_FRAME_UP_MAX, &complete);
        if (st != RCOLL_OK) {
            root_link_lost(r, j);
            return;
        }
        if (!complete) return;
        root_link_frame(r, j);
        if (l->fd < 0) return;
        rcoll_bs_frame_consume(&l->rx);
    }
}

static void root_member_msg(rcoll_bs_root_t *r, int k)
{
    bs_member_t *m = r->members[k];
    bs_note_t n;
    m->more->rx.got = 0;
    rcoll_bs_event_t ev;
    rcoll_bs_ctl_decode(m->more->rx.buf.raw, 1, &ev);
    if (ev.kind == RCOLL_BS_EV_STALL || ev.kind == RCOLL_BS_EV_WDOG) {
        m->more->stall = ev.sig;
        m->has_stall = 1;
        root_check_stalls(r, k);
        if (ev.kind == RCOLL_BS_EV_WDOG) root_wdog_reply(r, k);
        return;
    }
    if (ev.kind == RCOLL_BS_EV_SIG) {
        /* A rank's call, after a mismatch: every other rank may need it to name both sides. */
        if (m->sigs_relayed++ >= BS_SIGS_PER_MEMBER) return;
        rcoll_bs_sig_t sig = ev.sig;
        for (int j = 0; j < r->nranks; j++) {
            bs_member_t *o = r->members[j];
            if (j == k || !o || !o->open || o->left) continue;
            member_send(r, o, BS_SIG, &sig, sizeof(sig), rcoll_now_ns() + 100000000ull);
        }
        return;
    }
    if (ev.kind == RCOLL_BS_EV_SHRINK) {
        root_shrink_request(r, k, &ev.shrink);
        return;
    }
    if (ev.kind == RCOLL_BS_EV_REVOKE) {
        /* one communicator revoked: every other rank is told (those not in it ignore it) */
        RCOLL_INFO(BOOTSTRAP, "root: communicator %016llx revoked: %s",
                   (unsigned long long)ev.revoke.ctx, ev.revoke.text);
        for (int j = 0; j < r->nranks; j++) {
            bs_member_t *o = r->members[j];
            if (j == k || !o || !o->open || o->left) continue;
            member_send(r, o, BS_REVOKE, &ev.revoke, sizeof(ev.revoke),
                              rcoll_now_ns() + 100000000ull);
        }
        return;
    }
    if (ev.kind == RCOLL_BS_EV_BYE) {
        m->left = 1;
        member_close(r, m);
    } else if (ev.kind == RCOLL_BS_EV_NOTE) {
        n = ev.note;
        if (n.status == RCOLL_ERR_TIMEOUT && n.culprit >= 0 && n.culprit < r->nranks &&
            !r->failure_sent) {
            /* A timeout names only the peer this rank waited on, which may itself be waiting
             * on another: collect reports briefly, then name the end of the chain. */
            m->waits_on = n.culprit;
            memcpy(m->more->report, n.text, sizeof(m->more->report));
            if (!r->decide_at) {
                r->decide_at = rcoll_now_ns() + BS_DECIDE_WINDOW_NS;
                r->first_named = n.culprit;
            }
        } else if (!r->failure_sent && r->decide_at) {
            /* Timeouts are pending: a later report (a rank that gave up and aborted) is their
             * consequence, so name the end of their chain now instead of relaying it (found
             * by tools/chaos: a stopped root host, resumed after one survivor aborted, made
             * the others blame that survivor). */
            RCOLL_INFO(BOOTSTRAP, "root: rank %d reports (timeouts pending): %s", k, n.text);
            root_decide_timeout(r);
        } else if (!r->failure_sent) {
            RCOLL_INFO(BOOTSTRAP, "root: rank %d reports: %s", k, n.text);
            root_send_fail(r, k, &n);
            r->failure_sent = 1;
        }
    }
}

/* Name the culprit of the reported timeouts: follow "k waited on j" links from the first
 * rank named to one that reported nothing (the stalled one). */
static void root_decide_timeout(rcoll_bs_root_t *r)
{
    int c = r->first_named, waiter = -1;
    for (int hops = 0; hops < r->nranks && r->members[c]->waits_on >= 0; hops++)
        c = r->members[c]->waits_on;
    for (int k = 0; k < r->nranks; k++)
        if (r->members[k]->waits_on == c) waiter = k;
    char text[RCOLL_BS_TEXT_MAX];
    snprintf(text, sizeof(text), "rank %d (%s pid %d) stopped making progress (%.150s)", c,
             r->members[c]->info->hostname, (int)r->members[c]->info->pid,
             waiter >= 0 ? r->members[waiter]->more->report : "reported by its peers");
    RCOLL_WARN(BOOTSTRAP, "root: %s", text);
    bs_note_t n;
    rcoll_bs_note_fill(&n, c, RCOLL_ERR_TIMEOUT, text);
    root_send_fail(r, -1, &n);
    r->failure_sent = 1;
    r->decide_at = 0;
}

static void root_watch_phase(rcoll_bs_root_t *r)
{
    size_t most = (size_t)r->nranks + (size_t)r->nlinks;
    struct pollfd *pfd = calloc(most, sizeof(*pfd));
    int *who = calloc(most, sizeof(*who)); /* member k, or -1 - link j */
    if (!pfd || !who) {
        free(pfd);
        free(who);
        return;
    }
    for (;;) {
        int n = 0, nopen = 0;
        for (int k = 0; k < r->nranks; k++) {
            bs_member_t *m = r->members[k];
            nopen += m->open;
            if (m->open && m->link < 0) {
                pfd[n] = (struct pollfd){.fd = m->fd, .events = POLLIN};
                who[n++] = k;
            }
        }
        if (nopen == 0) break;
        for (int j = 0; j < r->nlinks; j++)
            if (r->links[j].fd >= 0) {
                pfd[n] = (struct pollfd){.fd = r->links[j].fd, .events = POLLIN};
                who[n++] = -1 - j;
            }
        if (r->decide_at && !r->failure_sent && rcoll_now_ns() >= r->decide_at)
            root_decide_timeout(r);
        root_shrink_check(r);
        /* The watch has no deadline of its own: it ends when the last rank leaves or dies,
         * and each wait here is bounded so the thread never sleeps on a stale set. */
        if (poll(pfd, (nfds_t)n, r->decide_at || r->shrink_open || r->sub_open ? 50 : 1000) <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            if (!pfd[i].revents) continue;
            if (who[i] >= 0) {
                root_member_event(r, who[i]);
            } else if (r->links[-1 - who[i]].fd == pfd[i].fd) {
                root_link_event(r, -1 - who[i]);
            }
        }
    }
    free(pfd);
    free(who);
}

static void root_close_listeners(rcoll_bs_root_t *r)
{
    for (int l = 0; l < r->nlisten; l++) close(r->listen_fd[l]);
    r->nlisten = 0;
}

static void *root_main(void *arg)
{
    rcoll_bs_root_t *r = arg;
    if (r->relay) {
        rcoll_bs_relay_run(r->relay);
    } else if (root_join_phase(r)) {
        root_close_listeners(r);
        char *table = malloc(rcoll_bs_table_max(r->nranks));
        size_t bytes = 0;
        if (table) { /* every rank joined: infos is the table */
            bytes = rcoll_bs_table_encode(r->infos, r->nranks, table);
            RCOLL_INFO(BOOTSTRAP, "root: the rank table takes %zu bytes (%zu as records)", bytes,
                       (size_t)r->nranks * sizeof(*r->infos));
        }
        if (table && bytes) {
            uint64_t deadline = rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9);
            /* Once down each relay link first: the relays hand it to every rank below them
             * (most of the job) while the root serves its own block. */
            for (int j = 0; j < r->nlinks; j++)
                if (r->links[j].fd >= 0 &&
                    rcoll_bs_send_fwd(r->links[j].fd, BS_FWD_ALL, -1, BS_TABLE, table,
                                      (uint32_t)bytes, deadline) != RCOLL_OK)
                    RCOLL_WARN(BOOTSTRAP, "root: could not send the rank table to relay %d: %s",
                               r->links[j].node, rcoll_err_get());
            for (int k = 0; k < r->nranks; k++)
                if (r->members[k]->link < 0 &&
                    rcoll_bs_send_msg(r->members[k]->fd, BS_TABLE, table, (uint32_t)bytes,
                                      deadline) != RCOLL_OK)
                    RCOLL_WARN(BOOTSTRAP, "root: could not send the rank table to rank %d: %s",
                               k, rcoll_err_get());
            free(table);
            RCOLL_INFO(BOOTSTRAP, "root: all %d ranks joined", r->nranks);
            root_watch_phase(r);
        }
    } else if (r->nranks > 0 && !r->aborted) {
        root_join_failed(r);
    } else {
        RCOLL_WARN(BOOTSTRAP, "root: no rank joined within %g s; giving up", r->timeout_s);
    }
    for (int i = 0; i < r->npending; i++) close(r->pending[i].fd);
    for (int k = 0; k < r->nranks; k++) member_close(r, r->members[k]);
    for (int j = 0; j < r->nlinks; j++)
        if (r->links[j].fd >= 0) {
            close(r->links[j].fd); /* the relays below end with it */
            r->links[j].fd = -1;
        }
    root_close_listeners(r);
    pthread_mutex_lock(&r->lock);
    r->finished = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    root_unref(r);
    return NULL;
}

/* Start the thread of r (a root or a relay); NULL on failure, with r freed. */
static rcoll_status_t root_thread_start(rcoll_bs_root_t *r, const rcoll_config_t *cfg,
                                        const char secret[RCOLL_SECRET_BYTES],
                                        rcoll_bs_root_t **root_p)
{
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    memcpy(r->secret, secret, RCOLL_SECRET_BYTES);
    r->timeout_s = cfg->timeout_s;
    r->refs = root_p ? 2 : 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int rc = pthread_create(&th, &attr, root_main, r);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        root_close_listeners(r);
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->cond);
        rcoll_bs_relay_free(r->relay);
        free(r->links);
        free(r);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, rc, "cannot start the bootstrap root");
    }
    if (root_p) *root_p = r;
    return RCOLL_OK;
}

rcoll_status_t rcoll_bs_relay_start(const rcoll_config_t *cfg, const rcoll_bs_tree_t *t,
                                    int node, const rcoll_sockaddr_t *addr, int listen_fd,
                                    const rcoll_sockaddr_t *parent,
                                    const rcoll_unique_id_t *root_id, rcoll_unique_id_t *id,
                                    rcoll_bs_root_t **root_p)
{
    bs_id_t b;
    memcpy(&b, root_id->internal, sizeof(b));
    const char *secret = b.secret;
    rcoll_bs_root_t *r = calloc(1, sizeof(*r));
    if (!r) {
        if (listen_fd >= 0) close(listen_fd);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap relay allocation failed");
    }
    rcoll_status_t st = rcoll_bs_relay_new(cfg, t, node, addr, listen_fd, parent, secret,
                                           &r->relay);
    if (st != RCOLL_OK) {
        free(r);
        return st;
    }
    /* The id first: the thread may finish (and free r) before this returns. */
    rcoll_bs_make_relay_id(addr, rcoll_bs_tree_host(t, node), root_id, id);
    st = root_thread_start(r, cfg, secret, root_p);
    if (st != RCOLL_OK) return st;
    char abuf[64];
    RCOLL_INFO(BOOTSTRAP, "relay %d (ranks %d-%d) listening on %s", node,
               rcoll_bs_tree_host(t, node),
               rcoll_bs_tree_host(t, node) + t->block - 1 < t->nranks - 1
                   ? rcoll_bs_tree_host(t, node) + t->block - 1 : t->nranks - 1,
               rcoll_net_addr_str(addr, abuf, sizeof(abuf)));
    return RCOLL_OK;
}

rcoll_status_t rcoll_bs_root_start(const rcoll_config_t *cfg, rcoll_sockaddr_t *addrs,
                                   int naddrs, const char secret[RCOLL_SECRET_BYTES],
                                   int fixed_port, rcoll_unique_id_t *id,
                                   rcoll_bs_root_t **root_p)
{
    return rcoll_bs_root_start_tree(cfg, addrs, naddrs, secret, fixed_port, NULL, id, root_p);
}

rcoll_status_t rcoll_bs_root_start_tree(const rcoll_config_t *cfg, rcoll_sockaddr_t *addrs,
                                        int naddrs, const char secret[RCOLL_SECRET_BYTES],
                                        int fixed_port, const rcoll_bs_tree_t *tree,
                                        rcoll_unique_id_t *id, rcoll_bs_root_t **root_p)
{
    rcoll_bs_root_t *r = calloc(1, sizeof(*r));
    if (!r) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap root allocation failed");
    if (tree && tree->nnodes > 1) {
        r->tree = *tree;
        for (int c = 1; c <= tree->fanout && c < tree->nnodes; c++) r->nlinks++;
        r->links = calloc((size_t)r->nlinks, sizeof(*r->links));
        if (!r->links) {
            free(r);
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap root allocation failed");
        }
        for (int j = 0; j < r->nlinks; j++) r->links[j] = (bs_link_t){.node = 1 + j, .fd = -1};
    }
    /* The first address must listen; the others are alternatives, kept only where they do
     * (and said in the id only then). */
    rcoll_sockaddr_t kept[RCOLL_BS_ROOT_ADDRS];
    char abuf[64], list[4 * 64] = "";
    size_t lo = 0;
    for (int i = 0; i < naddrs && r->nlisten < RCOLL_BS_ROOT_ADDRS; i++) {
        rcoll_status_t st = rcoll_net_listen(&addrs[i], 1024, fixed_port,
                                             &r->listen_fd[r->nlisten]);
        if (st != RCOLL_OK && i == 0) {
            free(r->links);
            free(r);
            rcoll_err_prefix("bootstrap root: ");
            return st;
        }
        if (st != RCOLL_OK) {
            RCOLL_INFO(BOOTSTRAP, "root: not listening on the alternative %s too: %s",
                       rcoll_net_addr_str(&addrs[i], abuf, sizeof(abuf)), rcoll_err_get());
            continue;
        }
        kept[r->nlisten++] = addrs[i];
        lo += (size_t)snprintf(list + lo, sizeof(list) - lo, "%s%s", i ? ", " : "",
                               rcoll_net_addr_str(&addrs[i], abuf, sizeof(abuf)));
        if (lo >= sizeof(list)) lo = sizeof(list) - 1;
    }
    /* The id first: the thread may finish (and free r) before this returns. */
    rcoll_bs_make_id(kept, r->nlisten, secret, id);
    rcoll_status_t st = root_thread_start(r, cfg, secret, root_p);
    if (st != RCOLL_OK) return st;
    RCOLL_INFO(BOOTSTRAP, "root listening on %s", list);
    return RCOLL_OK;
}

void rcoll_bs_root_abort(rcoll_bs_root_t *r, const char *text)
{
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    if (!r->aborted) {
        snprintf(r->abort_text, sizeof(r->abort_text), "%s", text);
        r->aborted = 1;
    }
    pthread_mutex_unlock(&r->lock);
}

rcoll_status_t rcoll_bs_root_release(rcoll_bs_root_t *r, uint64_t deadline_ns)
{
    if (!r) return RCOLL_OK;
    rcoll_status_t st = RCOLL_OK;
    pthread_mutex_lock(&r->lock);
    while (!r->finished) {
        uint64_t now = rcoll_now_ns();
        if (now >= deadline_ns) {
            st = rcoll_err_set(RCOLL_ERR_TIMEOUT, "ranks still connected to the bootstrap root"
                               " after the timeout; leaving it running");
            break;
        }
        uint64_t wake = now + 50000000ull; /* 50 ms */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)((wake - now) % 1000000000ull);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cond, &r->lock, &ts);
    }
    pthread_mutex_unlock(&r->lock);
    root_unref(r);
    return st;
}
