/*
 * bootstrap.c - the root that introduces ranks to each other, and the control connection
 * through which failures are announced.  It must never trust a connection that has not
 * proved the secret, never block without a deadline while ranks are joining, and never let
 * one rank's death go unannounced to the others.
 *
 *   rank i ──HELLO(secret, rank, nranks, info)──> root      (each rank)
 *   rank i <──TABLE(info[0..n-1])───────────────── root      (once all n have joined)
 *   rank i ──BYE | ABORT(culprit, text)──────────> root      (later)
 *   rank j <──FAIL(culprit, text)───────────────── root      (to every other live rank)
 *   rank i ──SHRINK(ctx, rank in it, new record)─> root      (rcoll_comm_shrink)
 *   rank i <──SHRUNK(round, k of n, member)─────── root      (n of them, once all asked)
 *   rank j <──EXCLUDED(text)────────────────────── root      (asked too late: left out)
 *   rank j <──LATE(text)────────────────────────── root      (the same, some ranks' shrink)
 *   rank i ──STALL(signature)─────────────────────> root      (after a wait: compared)
 *   rank i ──WDOG(signature)──────────────────────> root      (RCOLL_WATCHDOG_S without
 *   rank i <──WDOG_REPLY(ranks reached, others)─── root       progress: who is where)
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "core/bootstrap_wire.h"
#include "core/sig.h"
#include "util/log.h"
#include "util/ranks.h"
#include "util/status.h"
#include "util/time.h"

#define BS_PENDING_MAX 64     /* connections accepted and not yet through their hello */
#define BS_ACCEPT_BURST 16    /* accepts per pass, so hellos already sent are read in between */
#define BS_HELLO_TIMEOUT_NS (3ull * 1000000000ull) /* a connector must say hello by then */

#define BS_SIGS_PER_MEMBER 8 /* signatures the root relays for one rank, at most */
#define BS_SIGS_KEPT 32      /* distinct signatures a rank keeps */
#define BS_REVOKED_KEPT 64   /* revoked communicators a rank remembers */

_Static_assert(sizeof(rcoll_bs_sig_t) <= sizeof(bs_note_t), "signature message too big");

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t pad;
    rcoll_sockaddr_t root;
    char secret[RCOLL_SECRET_BYTES];
    /* The root's other IPv4 addresses (0 in ids of older versions: none), tried in turn when
     * root does not answer: address (network order) then port (network order). */
    uint8_t nalt;
    uint8_t pad2;
    uint8_t alt[RCOLL_BS_ROOT_ADDRS - 1][6];
} bs_id_t;

_Static_assert(sizeof(bs_id_t) <= RCOLL_UNIQUE_ID_BYTES, "unique id too small");

/* A control message (header and at most a note) read bit by bit from a non-blocking socket. */
typedef struct {
    size_t got;
    union {
        struct {
            bs_hdr_t hdr;
            bs_payload_t payload; /* decoded by rcoll_bs_ctl_decode */
        } m;
        char raw[RCOLL_BS_CTL_BYTES];
    } buf;
} bs_rx_t;

/* ------------------------------------------------------------------------------------------
 * Message helpers
 * ---------------------------------------------------------------------------------------- */

static rcoll_status_t bs_send_msg(int fd, int type, const void *payload, uint32_t len,
                                  uint64_t deadline_ns)
{
    bs_hdr_t h = {.magic = BS_MAGIC, .version = BS_VERSION, .type = (uint16_t)type,
                  .len = len};
    rcoll_status_t st = rcoll_net_send_all(fd, &h, sizeof(h), deadline_ns);
    if (st == RCOLL_OK && len) st = rcoll_net_send_all(fd, payload, len, deadline_ns);
    return st;
}

int rcoll_bs_hdr_valid(const bs_hdr_t *h, uint32_t max_len)
{
    return h->magic == BS_MAGIC && h->version == BS_VERSION && h->len <= max_len;
}

static int hdr_valid(const bs_hdr_t *h, uint32_t max_len) { return rcoll_bs_hdr_valid(h, max_len); }

int rcoll_bs_hello_scan(const void *buf, size_t got)
{
    bs_hdr_t h;
    if (got < sizeof(h)) return 0;
    memcpy(&h, buf, sizeof(h));
    if (!hdr_valid(&h, sizeof(bs_hello_t)) || h.type != BS_HELLO || h.len != sizeof(bs_hello_t))
        return -1;
    return got >= sizeof(h) + sizeof(bs_hello_t);
}

void rcoll_bs_ctl_decode(const void *msg, int to_root, rcoll_bs_event_t *ev)
{
    bs_hdr_t h;
    memcpy(&h, msg, sizeof(h));
    const char *payload = (const char *)msg + sizeof(h);
    memset(ev, 0, sizeof(*ev));
    int sig_sized = h.len == sizeof(rcoll_bs_sig_t);
    if (h.type == BS_REVOKE) {
        if (h.len != sizeof(bs_revoke_t)) return;
        ev->kind = RCOLL_BS_EV_REVOKE;
        memcpy(&ev->revoke, payload, sizeof(ev->revoke));
        ev->revoke.text[sizeof(ev->revoke.text) - 1] = '\0';
    } else if (h.type == BS_SIG) {
        if (!sig_sized) return;
        ev->kind = RCOLL_BS_EV_SIG;
        memcpy(&ev->sig, payload, sizeof(ev->sig));
    } else if (to_root) {
        if ((h.type == BS_STALL || h.type == BS_WDOG) && sig_sized) {
            ev->kind = h.type == BS_STALL ? RCOLL_BS_EV_STALL : RCOLL_BS_EV_WDOG;
            memcpy(&ev->sig, payload, sizeof(ev->sig));
        } else if (h.type == BS_BYE) {
            ev->kind = RCOLL_BS_EV_BYE;
        } else if (h.type == BS_ABORT && h.len == sizeof(bs_note_t)) {
            ev->kind = RCOLL_BS_EV_NOTE;
            memcpy(&ev->note, payload, sizeof(ev->note));
            ev->note.text[sizeof(ev->note.text) - 1] = '\0';
        } else if (h.type == BS_SHRINK && h.len == sizeof(rcoll_bs_shrink_req_t)) {
            ev->kind = RCOLL_BS_EV_SHRINK;
            memcpy(&ev->shrink, payload, sizeof(ev->shrink));
            ev->shrink.info.hostname[sizeof(ev->shrink.info.hostname) - 1] = '\0';
        }
    } else if (h.type == BS_SHRUNK) {
        if (h.len != sizeof(bs_shrunk_t)) return;
        ev->kind = RCOLL_BS_EV_SHRUNK;
        memcpy(&ev->shrunk, payload, sizeof(ev->shrunk));
        ev->shrunk.member.req.info.hostname[sizeof(ev->shrunk.member.req.info.hostname) - 1] =
            '\0';
    } else if (h.type == BS_WDOG_REPLY) {
        if (h.len != sizeof(rcoll_bs_wdog_t)) return;
        ev->kind = RCOLL_BS_EV_WDOG_REPLY;
        memcpy(&ev->wdog, payload, sizeof(ev->wdog));
    } else if (h.type == BS_LATE) {
        ev->kind = RCOLL_BS_EV_LATE;
        memcpy(&ev->note, payload, sizeof(ev->note));
        ev->note.text[sizeof(ev->note.text) - 1] = '\0';
    } else {
        /* FAIL, EXCLUDED (and anything else): a failure note, whatever its length says */
        ev->kind = h.type == BS_EXCLUDED ? RCOLL_BS_EV_EXCLUDED : RCOLL_BS_EV_NOTE;
        memcpy(&ev->note, payload, sizeof(ev->note));
        ev->note.text[sizeof(ev->note.text) - 1] = '\0';
    }
}

/* Read what has arrived of a control message.  RCOLL_OK with *complete = 1 once the whole
 * message is in rx (the caller then resets rx->got), RCOLL_ERR_PROTOCOL for a malformed
 * header, or the connection's error (RCOLL_ERR_REMOTE when it closed). */
static rcoll_status_t bs_rx_read(int fd, bs_rx_t *rx, int *complete)
{
    *complete = 0;
    rcoll_status_t st = rcoll_net_recv_some(fd, rx->buf.raw, sizeof(bs_hdr_t), &rx->got);
    if (st != RCOLL_OK || rx->got < sizeof(bs_hdr_t)) return st;
    const bs_hdr_t *h = &rx->buf.m.hdr;
    if (!hdr_valid(h, sizeof(bs_payload_t))) return RCOLL_ERR_PROTOCOL;
    st = rcoll_net_recv_some(fd, rx->buf.raw, sizeof(bs_hdr_t) + h->len, &rx->got);
    *complete = st == RCOLL_OK && rx->got == sizeof(bs_hdr_t) + h->len;
    return st;
}

static void note_fill(bs_note_t *n, int culprit, rcoll_status_t st, const char *text)
{
    memset(n, 0, sizeof(*n));
    n->culprit = culprit;
    n->status = st;
    snprintf(n->text, sizeof(n->text), "%s", text);
}

/* Constant-time comparison, so response timing does not leak the secret. */
static int secret_equal(const char *a, const char *b)
{
    unsigned char diff = 0;
    for (int i = 0; i < RCOLL_SECRET_BYTES; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

void rcoll_bs_host_identity(char *hostname, size_t len, uint64_t *hash, uint64_t *machine)
{
    char host[256] = "unknown";
    gethostname(host, sizeof(host) - 1);
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
        fclose(f);
    }
    /* The network namespace too: host-local transports (abstract sockets) do not cross it,
     * so ranks in different namespaces of one machine count as different hosts. */
    char netns[64] = "";
    ssize_t nl = readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
    netns[nl > 0 ? nl : 0] = '\0';
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = host; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (const char *p = boot; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    *machine = h;
    for (const char *p = netns; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    *hash = h;
    char *dot = strchr(host, '.');
    if (dot) *dot = '\0';
    snprintf(hostname, len, "%s", host);
}

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

typedef struct {
    int fd;       /* -1 once gone */
    int joined;
    int left;     /* said goodbye */
    int waits_on; /* rank this one reported a timeout on, or -1 */
    char report[RCOLL_BS_TEXT_MAX];
    int sigs_relayed; /* its signatures passed on (at most BS_SIGS_PER_MEMBER) */
    int has_stall;    /* it reported a stalled call: */
    rcoll_bs_sig_t stall;
    rcoll_peer_info_t info;
    bs_rx_t rx;   /* partial control message */
    int shrink_asked; /* sent BS_SHRINK in the open round: */
    uint64_t shrink_since;
    rcoll_bs_shrink_req_t shrink_req;
} bs_member_t;

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
    /* [nranks] NULL until that rank joins: calloc'ed, so its untouched pages cost nothing and
     * the root's memory grows with the ranks that joined, not with the count announced. */
    bs_member_t **members;
    bs_pending_t pending[BS_PENDING_MAX];
    int npending;
    rcoll_log_limit_t drop_limit; /* warnings about dropped connections */
    int failure_sent;
    uint64_t decide_at; /* when to name the culprit of reported timeouts (0 = none pending) */
    int aborted;        /* the hosting rank failed its creation (rcoll_bs_root_abort) */
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
    for (int k = 0; r->members && k < r->nranks; k++) free(r->members[k]);
    free(r->members);
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
    note_fill(&n, -1, BS_RETRY_STATUS, "too many pending connections: connect again");
    bs_send_msg(r->pending[old].fd, BS_NACK, &n, sizeof(n), 0);
    pending_drop(r, old, "too many pending connections (the oldest is evicted and told to "
                 "connect again)");
}

static void pending_reject(rcoll_bs_root_t *r, int i, rcoll_status_t st, const char *why)
{
    bs_note_t n;
    note_fill(&n, -1, st, why);
    bs_send_msg(r->pending[i].fd, BS_NACK, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
    pending_drop(r, i, why);
}

/* A complete hello arrived on pending connection i: admit or reject it. */
static void root_admit(rcoll_bs_root_t *r, int i)
{
    bs_pending_t *p = &r->pending[i];
    bs_hello_t *h = &p->buf.m.hello;
    char why[160];
    if (!secret_equal(h->secret, r->secret)) {
        pending_reject(r, i, RCOLL_ERR_AUTH, "wrong job secret");
        return;
    }
    if (r->aborted) {
        pending_reject(r, i, RCOLL_ERR_REMOTE, r->abort_text);
        return;
    }
    if (h->nranks < 1 || h->rank < 0 || h->rank >= h->nranks) {
        snprintf(why, sizeof(why), "invalid rank %d of %d", h->rank, h->nranks);
        pending_reject(r, i, RCOLL_ERR_INVALID_ARG, why);
        return;
    }
    if (r->nranks == 0) {
        r->members = calloc((size_t)h->nranks, sizeof(*r->members));
        if (!r->members) {
            pending_reject(r, i, RCOLL_ERR_NO_MEMORY, "root out of memory");
            return;
        }
        r->nranks = h->nranks;
    }
    if (h->nranks != r->nranks) {
        snprintf(why, sizeof(why), "rank %d says nranks=%d but the job has %d ranks", h->rank,
                 h->nranks, r->nranks);
        pending_reject(r, i, RCOLL_ERR_INVALID_ARG, why);
        return;
    }
    if (r->members[h->rank]) {
        snprintf(why, sizeof(why), "rank %d already joined (from pid %d on %s)", h->rank,
                 (int)r->members[h->rank]->info.pid, r->members[h->rank]->info.hostname);
        pending_reject(r, i, RCOLL_ERR_INVALID_USAGE, why);
        return;
    }
    bs_member_t *m = calloc(1, sizeof(*m));
    if (!m) {
        pending_reject(r, i, RCOLL_ERR_NO_MEMORY, "root out of memory");
        return;
    }
    r->members[h->rank] = m;
    m->waits_on = -1;
    m->fd = p->fd;
    m->joined = 1;
    m->info = h->info;
    m->info.hostname[sizeof(m->info.hostname) - 1] = '\0';
    r->njoined++;
    RCOLL_INFO(BOOTSTRAP, "root: rank %d joined from %s pid %d (%d/%d)", h->rank,
               m->info.hostname, (int)m->info.pid, r->njoined, r->nranks);
    r->pending[i] = r->pending[--r->npending];
}

/* Read what is available on pending connection i. */
static void root_read_pending(rcoll_bs_root_t *r, int i)
{
    bs_pending_t *p = &r->pending[i];
    size_t want = sizeof(p->buf.raw);
    rcoll_status_t st = rcoll_net_recv_some(p->fd, p->buf.raw, want, &p->got);
    if (st != RCOLL_OK) {
        pending_drop(r, i, "closed before completing its hello");
        return;
    }
    int scan = rcoll_bs_hello_scan(p->buf.raw, p->got);
    if (scan < 0) {
        pending_drop(r, i, "not an rcoll bootstrap hello (bad magic, version or size)");
        return;
    }
    if (scan > 0) root_admit(r, i);
}

static void root_send_fail(rcoll_bs_root_t *r, int except, const bs_note_t *n)
{
    for (int k = 0; k < r->nranks; k++) {
        bs_member_t *m = r->members[k];
        if (k == except || !m || m->fd < 0 || m->left) continue;
        bs_send_msg(m->fd, BS_FAIL, n, sizeof(*n), rcoll_now_ns() + 1000000000ull);
    }
}

static void member_close(bs_member_t *m)
{
    if (!m) return;
    if (m->fd >= 0) close(m->fd);
    m->fd = -1;
}

/* The drop warnings suppressed so far, in one line (force: whether their second is over). */
static void drops_report(rcoll_bs_root_t *r, int force)
{
    unsigned n = rcoll_log_limit_take(&r->drop_limit, force);
    if (n)
        RCOLL_WARN(BOOTSTRAP, "root: dropped %u more bootstrap connections (%u more like this; "
                   "at most 5 such warnings a second)", n, n);
}

/* Joining phase: returns 1 when every rank has joined, 0 on timeout/failure. */
static int root_join_loop(rcoll_bs_root_t *r)
{
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9);
    struct pollfd pfd[RCOLL_BS_ROOT_ADDRS + BS_PENDING_MAX];
    while (r->aborted || r->nranks == 0 || r->njoined < r->nranks) {
        uint64_t now = rcoll_now_ns();
        if (now >= deadline) return 0;
        pthread_mutex_lock(&r->lock);
        int aborted = r->aborted;
        pthread_mutex_unlock(&r->lock);
        if (aborted && !r->abort_sent) { /* those that joined learn it now, the rest on arrival */
            bs_note_t n;
            note_fill(&n, 0, RCOLL_ERR_REMOTE, r->abort_text);
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
        for (int i = 0; i < r->npending; i++)
            pfd[n++] = (struct pollfd){.fd = r->pending[i].fd, .events = POLLIN};
        poll(pfd, (nfds_t)n, 200);
        for (int i = r->npending - 1; i >= 0; i--)
            if (pfd[r->nlisten + i].revents) root_read_pending(r, i);
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
    return 1;
}

static int root_join_phase(rcoll_bs_root_t *r)
{
    int done = root_join_loop(r);
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
    note_fill(&n, first, RCOLL_ERR_TIMEOUT, text);
    root_send_fail(r, -1, &n);
}

/* Member k reported a stalled call.  Two stalled calls on one communicator with the same
 * number (the signature's first 8 bytes) but different signatures are a mismatch that no
 * message between those ranks may ever reveal (each waits on a peer that runs something
 * else): announce it, with both signatures, so every rank fails the call naming both. */
static void root_check_stalls(rcoll_bs_root_t *r, int k)
{
    const rcoll_bs_sig_t *a = &r->members[k]->stall;
    for (int j = 0; j < r->nranks && !r->failure_sent; j++) {
        bs_member_t *o = r->members[j];
        if (j == k || !o || !o->has_stall) continue;
        const rcoll_bs_sig_t *b = &o->stall;
        if (b->ctx != a->ctx || memcmp(b->sig, a->sig, 8) != 0 ||
            memcmp(b->sig, a->sig, sizeof(a->sig)) == 0)
            continue;
        for (int i = 0; i < r->nranks; i++) {
            bs_member_t *d = r->members[i];
            if (!d || d->fd < 0 || d->left) continue;
            bs_send_msg(d->fd, BS_SIG, a, sizeof(*a), rcoll_now_ns() + 100000000ull);
            bs_send_msg(d->fd, BS_SIG, b, sizeof(*b), rcoll_now_ns() + 100000000ull);
        }
        char text[RCOLL_BS_TEXT_MAX];
        snprintf(text, sizeof(text), "rank %d and rank %d made different calls as the same "
                 "collective operation (found while both waited)", (int)b->rank, (int)a->rank);
        RCOLL_WARN(BOOTSTRAP, "root: %s", text);
        bs_note_t n;
        note_fill(&n, a->rank, RCOLL_ERR_INVALID_USAGE, text);
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
                     "without it", k, m->info.hostname, (int)m->info.pid, r->timeout_s);
            RCOLL_WARN(BOOTSTRAP, "root: %s", text);
            bs_note_t n;
            note_fill(&n, k, RCOLL_ERR_TIMEOUT, text);
            bs_send_msg(m->fd, BS_LATE, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
            return;
        }
    }
    m->shrink_req = *req; /* its host name terminated (rcoll_bs_ctl_decode) */
    m->shrink_asked = 1;
    m->shrink_since = rcoll_now_ns();
    if (req->flags & RCOLL_BS_SHRINK_SUB) {
        r->sub_open = 1;
    } else if (!r->shrink_open) {
        r->shrink_open = 1;
        r->shrink_deadline = m->shrink_since + (uint64_t)(r->timeout_s * 1e9);
    }
    RCOLL_INFO(BOOTSTRAP, "root: rank %d asks to shrink (its rank %d in the communicator%s)", k,
               (int)m->shrink_req.rank, req->flags & RCOLL_BS_SHRINK_SUB ? " of some ranks" : "");
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
        for (int i = 0; i < count && to->fd >= 0; i++) {
            bs_shrunk_t msg;
            memset(&msg, 0, sizeof(msg));
            msg.round = round;
            msg.index = i;
            msg.count = count;
            msg.sub = sub;
            msg.member.bs_rank = keys[i].k;
            msg.member.req = r->members[keys[i].k]->shrink_req;
            /* A survivor that cannot take it has died since: the watch announces it. */
            if (bs_send_msg(to->fd, BS_SHRUNK, &msg, sizeof(msg),
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
        if (!lead->shrink_asked || !(lead->shrink_req.flags & RCOLL_BS_SHRINK_SUB)) continue;
        const rcoll_bs_shrink_req_t *q = &lead->shrink_req;
        uint64_t first = lead->shrink_since;
        int waiting = 0, count = 0;
        for (int j = 0; j < r->nranks; j++) {
            bs_member_t *o = r->members[j];
            int asked = o->shrink_asked && sub_same(&o->shrink_req, q);
            if (asked && o->shrink_since < first) first = o->shrink_since;
            if (asked && o->fd >= 0) keys[count++] = (shrink_key_t){o->shrink_req.rank, j};
            else if (sub_is_member(q, j) && o->fd >= 0 && !asked) waiting++;
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
            if (o->shrink_asked && o->shrink_req.ctx == key.ctx && o->shrink_req.seq == key.seq &&
                (o->shrink_req.flags & RCOLL_BS_SHRINK_SUB))
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
        if (m->fd >= 0 && !(m->shrink_asked && !(m->shrink_req.flags & RCOLL_BS_SHRINK_SUB)))
            waiting++;
    }
    if (waiting && rcoll_now_ns() < r->shrink_deadline) {
        free(keys);
        return;
    }
    for (int k = 0; k < r->nranks && waiting; k++) {
        bs_member_t *m = r->members[k];
        if (m->fd < 0 || (m->shrink_asked && !(m->shrink_req.flags & RCOLL_BS_SHRINK_SUB)))
            continue;
        char text[RCOLL_BS_TEXT_MAX];
        snprintf(text, sizeof(text), "rank %d (%s pid %d) did not call rcoll_comm_shrink within "
                 "%g s of the first rank's call: it is excluded from the shrunk communicator",
                 k, m->info.hostname, (int)m->info.pid, r->timeout_s);
        RCOLL_WARN(BOOTSTRAP, "root: %s", text);
        bs_note_t n;
        note_fill(&n, k, RCOLL_ERR_TIMEOUT, text);
        bs_send_msg(m->fd, BS_EXCLUDED, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
        member_close(m);
    }
    int count = 0;
    for (int k = 0; k < r->nranks; k++)
        if (r->members[k]->fd >= 0 && r->members[k]->shrink_asked &&
            !(r->members[k]->shrink_req.flags & RCOLL_BS_SHRINK_SUB))
            keys[count++] = (shrink_key_t){r->members[k]->shrink_req.rank, k};
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
    const rcoll_bs_sig_t *a = &r->members[k]->stall;
    rcoll_bs_wdog_t w;
    memset(&w, 0, sizeof(w));
    w.ctx = a->ctx;
    memcpy(&w.seq, a->sig, sizeof(w.seq));
    for (int j = 0; j < r->nranks; j++) {
        bs_member_t *o = r->members[j];
        if (!o || !o->has_stall) continue;
        int here = o->stall.ctx == a->ctx, rank = here ? o->stall.rank : j;
        if (!here && !(a->flags & RCOLL_BS_SIG_MEMBERS)) continue; /* its rank is unknown */
        rcoll_sig_t sig;
        memcpy(&sig, o->stall.sig, sizeof(sig));
        if (here && sig.seq == w.seq) { /* in this call (a different one: a mismatch, said) */
            if (!memcmp(o->stall.sig, a->sig, sizeof(a->sig)) && rank >= 0 &&
                rank < RCOLL_BS_WDOG_BITS)
                w.reached[rank / 8] |= (uint8_t)(1u << (rank % 8));
        } else if (w.nlast < RCOLL_BS_WDOG_LAST) {
            w.last[w.nlast].rank = rank;
            w.last[w.nlast].kind = sig.kind;
            w.last[w.nlast].ctx = o->stall.ctx;
            w.last[w.nlast++].seq = sig.seq;
        }
    }
    bs_send_msg(r->members[k]->fd, BS_WDOG_REPLY, &w, sizeof(w), rcoll_now_ns() + 100000000ull);
}

/* Handle one readable member connection in the watch phase. */
static void root_decide_timeout(rcoll_bs_root_t *r);

static void root_member_event(rcoll_bs_root_t *r, int k)
{
    bs_member_t *m = r->members[k];
    if (m->fd < 0) return; /* closed since the poll set was built (left out of a shrink) */
    int complete;
    rcoll_status_t st = bs_rx_read(m->fd, &m->rx, &complete);
    if (st == RCOLL_OK && !complete) return;
    char text[RCOLL_BS_TEXT_MAX];
    bs_note_t n;
    if (st != RCOLL_OK) {
        snprintf(text, sizeof(text),
                 "rank %d (%s pid %d) exited or was killed: its bootstrap connection %s", k,
                 m->info.hostname, (int)m->info.pid,
                 st == RCOLL_ERR_PROTOCOL ? "sent garbage" : "closed");
        member_close(m);
        if (!r->failure_sent) {
            RCOLL_WARN(BOOTSTRAP, "root: %s", text);
            note_fill(&n, k, RCOLL_ERR_REMOTE, text);
            root_send_fail(r, k, &n);
            r->failure_sent = 1;
        }
        return;
    }
    m->rx.got = 0;
    rcoll_bs_event_t ev;
    rcoll_bs_ctl_decode(m->rx.buf.raw, 1, &ev);
    if (ev.kind == RCOLL_BS_EV_STALL || ev.kind == RCOLL_BS_EV_WDOG) {
        m->stall = ev.sig;
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
            if (j == k || !o || o->fd < 0 || o->left) continue;
            bs_send_msg(o->fd, BS_SIG, &sig, sizeof(sig), rcoll_now_ns() + 100000000ull);
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
            if (j == k || !o || o->fd < 0 || o->left) continue;
            bs_send_msg(o->fd, BS_REVOKE, &ev.revoke, sizeof(ev.revoke),
                        rcoll_now_ns() + 100000000ull);
        }
        return;
    }
    if (ev.kind == RCOLL_BS_EV_BYE) {
        m->left = 1;
        member_close(m);
    } else if (ev.kind == RCOLL_BS_EV_NOTE) {
        n = ev.note;
        if (n.status == RCOLL_ERR_TIMEOUT && n.culprit >= 0 && n.culprit < r->nranks &&
            !r->failure_sent) {
            /* A timeout names only the peer this rank waited on, which may itself be waiting
             * on another: collect reports briefly, then name the end of the chain. */
            m->waits_on = n.culprit;
            memcpy(m->report, n.text, sizeof(m->report));
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
             r->members[c]->info.hostname, (int)r->members[c]->info.pid,
             waiter >= 0 ? r->members[waiter]->report : "reported by its peers");
    RCOLL_WARN(BOOTSTRAP, "root: %s", text);
    bs_note_t n;
    note_fill(&n, c, RCOLL_ERR_TIMEOUT, text);
    root_send_fail(r, -1, &n);
    r->failure_sent = 1;
    r->decide_at = 0;
}

static void root_watch_phase(rcoll_bs_root_t *r)
{
    struct pollfd *pfd = calloc((size_t)r->nranks, sizeof(*pfd));
    int *who = calloc((size_t)r->nranks, sizeof(*who));
    if (!pfd || !who) {
        free(pfd);
        free(who);
        return;
    }
    for (;;) {
        int n = 0;
        for (int k = 0; k < r->nranks; k++)
            if (r->members[k]->fd >= 0) {
                pfd[n] = (struct pollfd){.fd = r->members[k]->fd, .events = POLLIN};
                who[n++] = k;
            }
        if (n == 0) break;
        if (r->decide_at && !r->failure_sent && rcoll_now_ns() >= r->decide_at)
            root_decide_timeout(r);
        root_shrink_check(r);
        /* The watch has no deadline of its own: it ends when the last rank leaves or dies,
         * and each wait here is bounded so the thread never sleeps on a stale set. */
        if (poll(pfd, (nfds_t)n, r->decide_at || r->shrink_open || r->sub_open ? 50 : 1000) <= 0)
            continue;
        for (int i = 0; i < n; i++)
            if (pfd[i].revents) root_member_event(r, who[i]);
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
    if (root_join_phase(r)) {
        root_close_listeners(r);
        size_t bytes = (size_t)r->nranks * sizeof(rcoll_peer_info_t);
        rcoll_peer_info_t *table = malloc(bytes);
        if (table) {
            for (int k = 0; k < r->nranks; k++) table[k] = r->members[k]->info;
            for (int k = 0; k < r->nranks; k++)
                if (bs_send_msg(r->members[k]->fd, BS_TABLE, table, (uint32_t)bytes,
                                rcoll_now_ns() + (uint64_t)(r->timeout_s * 1e9)) != RCOLL_OK)
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
    for (int k = 0; k < r->nranks; k++) member_close(r->members[k]);
    root_close_listeners(r);
    pthread_mutex_lock(&r->lock);
    r->finished = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    root_unref(r);
    return NULL;
}

void rcoll_bs_make_id(const rcoll_sockaddr_t *addrs, int naddrs,
                      const char secret[RCOLL_SECRET_BYTES], rcoll_unique_id_t *id)
{
    bs_id_t b;
    memset(&b, 0, sizeof(b));
    b.magic = BS_MAGIC;
    b.version = BS_VERSION;
    b.root = addrs[0];
    memcpy(b.secret, secret, RCOLL_SECRET_BYTES);
    for (int i = 1; i < naddrs && b.nalt < RCOLL_BS_ROOT_ADDRS - 1; i++) {
        if (addrs[i].sa.sa_family != AF_INET) continue; /* no room for IPv6 alternatives */
        memcpy(b.alt[b.nalt], &addrs[i].sin.sin_addr.s_addr, 4);
        memcpy(b.alt[b.nalt] + 4, &addrs[i].sin.sin_port, 2);
        b.nalt++;
    }
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, &b, sizeof(b));
}

rcoll_status_t rcoll_bs_check_id(const rcoll_unique_id_t *id)
{
    bs_id_t b;
    memcpy(&b, id->internal, sizeof(b));
    if (b.magic != BS_MAGIC || b.version != BS_VERSION)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "the unique id is not a valid rcoll id of version %d (was it made "
                             "by rcoll_get_unique_id and copied whole?)", BS_VERSION);
    return RCOLL_OK;
}

/* The addresses a rank tries for the root of id b, the first first; returns how many. */
static int id_addrs(const bs_id_t *b, rcoll_sockaddr_t *out)
{
    int n = 0;
    out[n++] = b->root;
    for (int i = 0; i < b->nalt && i < RCOLL_BS_ROOT_ADDRS - 1; i++) {
        memset(&out[n], 0, sizeof(out[n]));
        out[n].sin.sin_family = AF_INET;
        memcpy(&out[n].sin.sin_addr.s_addr, b->alt[i], 4);
        memcpy(&out[n].sin.sin_port, b->alt[i] + 4, 2);
        n++;
    }
    return n;
}

rcoll_status_t rcoll_bs_root_start(const rcoll_config_t *cfg, rcoll_sockaddr_t *addrs,
                                   int naddrs, const char secret[RCOLL_SECRET_BYTES],
                                   int fixed_port, rcoll_unique_id_t *id,
                                   rcoll_bs_root_t **root_p)
{
    rcoll_bs_root_t *r = calloc(1, sizeof(*r));
    if (!r) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap root allocation failed");
    /* The first address must listen; the others are alternatives, kept only where they do
     * (and said in the id only then). */
    rcoll_sockaddr_t kept[RCOLL_BS_ROOT_ADDRS];
    char abuf[64], list[4 * 64] = "";
    size_t lo = 0;
    for (int i = 0; i < naddrs && r->nlisten < RCOLL_BS_ROOT_ADDRS; i++) {
        rcoll_status_t st = rcoll_net_listen(&addrs[i], 1024, fixed_port,
                                             &r->listen_fd[r->nlisten]);
        if (st != RCOLL_OK && i == 0) {
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
        free(r);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, rc, "cannot start the bootstrap root");
    }
    RCOLL_INFO(BOOTSTRAP, "root listening on %s", list);
    rcoll_bs_make_id(kept, r->nlisten, secret, id);
    if (root_p) *root_p = r;
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

/* ------------------------------------------------------------------------------------------
 * Rank side
 * ---------------------------------------------------------------------------------------- */

struct rcoll_bootstrap {
    int refs;    /* communicators sharing this control connection (parent and children) */
    int fd;
    int nranks;
    rcoll_peer_info_t root_host; /* rank 0's info, for the message when the root vanishes */
    bs_rx_t rx;
    int failed;
    int closed; /* the connection ended (after a failure: nothing more to read) */
    rcoll_status_t fail_status;
    int fail_culprit;
    char fail_text[RCOLL_BS_TEXT_MAX + 64];
    rcoll_bs_sig_t sigs[BS_SIGS_KEPT]; /* peers' signatures relayed by the root, distinct */
    int nsigs;
    rcoll_bs_wdog_t wdog; /* the root's latest watchdog answer */
    int has_wdog;
    bs_revoke_t revoked[BS_REVOKED_KEPT]; /* communicators revoked by other ranks */
    int nrevoked;
    int rank;      /* this rank's number in the bootstrap */
    int members;   /* ranks in the job now (rcoll_bs_members) */
    char excluded[RCOLL_BS_TEXT_MAX]; /* the root excluded this rank from a shrink: why */
    char late[RCOLL_BS_TEXT_MAX];     /* its shrink of some ranks was decided without it */
    rcoll_bs_member_t *shrunk; /* the shrink's result as it arrives */
    int shrunk_got, shrunk_count, shrunk_ready;
    uint32_t shrunk_round;
    /* The communicators of a family share this connection and may run on several threads
     * (their callers, their progress threads): every function below takes this (recursive)
     * lock, so a message is read by one thread and a write is never interleaved. */
    pthread_mutex_t lock;
};

/* The root answered at an alternative address (now in abuf, for the messages): said once per
 * process at WARN, like the transports' own. */
static void join_went_around(const rcoll_sockaddr_t *addrs, int which, char *abuf, size_t len)
{
    static int said;
    char first[64];
    rcoll_net_addr_str(&addrs[0], first, sizeof(first));
    rcoll_net_addr_str(&addrs[which], abuf, len);
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        RCOLL_WARN(BOOTSTRAP, "the bootstrap root's first address %s did not answer; joined "
                   "through %s instead (RCOLL_SOCKET_IFNAME on the root's host selects the "
                   "interfaces; this is said once)", first, abuf);
}

rcoll_status_t rcoll_bs_join(const rcoll_unique_id_t *id, int rank, int nranks,
                             const rcoll_peer_info_t *mine, rcoll_peer_info_t *peers,
                             uint64_t deadline_ns, rcoll_bootstrap_t **bs_p)
{
    bs_id_t b;
    char abuf[64];
    memcpy(&b, id->internal, sizeof(b));
    rcoll_sockaddr_t addrs[RCOLL_BS_ROOT_ADDRS];
    int naddrs = id_addrs(&b, addrs), which = 0;
    rcoll_net_addr_str(&b.root, abuf, sizeof(abuf));
    int fd = -1, resets = 0;
    bs_hello_t hello;
    memset(&hello, 0, sizeof(hello));
    memcpy(hello.secret, b.secret, RCOLL_SECRET_BYTES);
    hello.rank = rank;
    hello.nranks = nranks;
    hello.info = *mine;
    bs_hdr_t h;
    rcoll_status_t st;
    uint64_t backoff_ms = 10;
    /* Connect and say hello until the root answers.  Under a flood of connections the root
     * evicts the oldest silent one and tells it to connect again (a NACK with
     * BS_RETRY_STATUS); a reset before any answer is retried a few times too, since the root
     * may have dropped the connection before reading it.  Both back off, within the deadline. */
    for (;;) {
        st = rcoll_net_connect_retry_any(addrs, naddrs, deadline_ns, &fd, &which);
        if (st != RCOLL_OK) {
            rcoll_err_prefix("rank %d: bootstrap: ", rank);
            return st;
        }
        if (which != 0) join_went_around(addrs, which, abuf, sizeof(abuf));
        st = bs_send_msg(fd, BS_HELLO, &hello, sizeof(hello), deadline_ns);
        if (st == RCOLL_OK) st = rcoll_net_recv_all(fd, &h, sizeof(h), deadline_ns);
        int retry = st == RCOLL_ERR_REMOTE && ++resets <= 3;
        if (st == RCOLL_OK && h.type == BS_NACK && hdr_valid(&h, sizeof(bs_note_t))) {
            bs_note_t n;
            memset(&n, 0, sizeof(n));
            if (rcoll_net_recv_all(fd, &n, h.len < sizeof(n) ? h.len : sizeof(n), deadline_ns) ==
                    RCOLL_OK && n.status == BS_RETRY_STATUS) {
                retry = 1;
            } else {
                n.text[sizeof(n.text) - 1] = '\0';
                rcoll_status_t why = n.status < 0 ? (rcoll_status_t)n.status : RCOLL_ERR_REMOTE;
                st = rcoll_err_set(why, "rank %d: the bootstrap root at %s rejected this rank: "
                                   "%s", rank, abuf, n.text);
                goto err_close;
            }
        }
        if (!retry || rcoll_now_ns() + backoff_ms * 1000000ull >= deadline_ns) break;
        RCOLL_INFO(BOOTSTRAP, "rank %d: the bootstrap root at %s %s; connecting again in %llu ms",
                   rank, abuf, st == RCOLL_OK ? "asked this rank to connect again (it is under "
                   "load)" : "closed the connection before answering",
                   (unsigned long long)backoff_ms);
        close(fd);
        fd = -1;
        struct timespec ts = {(time_t)(backoff_ms / 1000), (long)(backoff_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        if (backoff_ms < 500) backoff_ms *= 2;
    }
    if (st == RCOLL_ERR_TIMEOUT) {
        st = rcoll_err_set(RCOLL_ERR_TIMEOUT, "rank %d: timed out waiting for the other ranks "
                           "to join through the root at %s", rank, abuf);
        goto err_close;
    }
    if (st != RCOLL_OK) {
        rcoll_err_prefix("rank %d: bootstrap with root %s: ", rank, abuf);
        goto err_close;
    }
    size_t table_bytes = (size_t)nranks * sizeof(rcoll_peer_info_t);
    if (!hdr_valid(&h, (uint32_t)(table_bytes > sizeof(bs_note_t) ? table_bytes
                                                                  : sizeof(bs_note_t)))) {
        st = rcoll_err_set(RCOLL_ERR_PROTOCOL, "rank %d: the bootstrap root at %s sent a "
                           "malformed reply", rank, abuf);
        goto err_close;
    }
    if (h.type == BS_NACK || h.type == BS_FAIL) { /* a NACK here asked for a retry too late */
        bs_note_t n;
        memset(&n, 0, sizeof(n));
        st = rcoll_net_recv_all(fd, &n, h.len < sizeof(n) ? h.len : sizeof(n), deadline_ns);
        n.text[sizeof(n.text) - 1] = '\0';
        rcoll_status_t why = n.status < 0 ? (rcoll_status_t)n.status : RCOLL_ERR_REMOTE;
        st = rcoll_err_set(why, "rank %d: the bootstrap root at %s %s: %s", rank, abuf,
                           h.type == BS_NACK ? "rejected this rank" : "reported a failure",
                           n.text);
        goto err_close;
    }
    if (h.type != BS_TABLE || h.len != table_bytes) {
        st = rcoll_err_set(RCOLL_ERR_PROTOCOL, "rank %d: unexpected bootstrap reply (type %u, "
                           "%u bytes) from %s", rank, h.type, h.len, abuf);
        goto err_close;
    }
    st = rcoll_net_recv_all(fd, peers, table_bytes, deadline_ns);
    if (st != RCOLL_OK) {
        rcoll_err_prefix("rank %d: receiving the rank table: ", rank);
        goto err_close;
    }
    /* Host names are printed as they are ("rank 2 (node7 pid 12)"): whatever the root sent,
     * they end inside their records. */
    for (int k = 0; k < nranks; k++) peers[k].hostname[sizeof(peers[k].hostname) - 1] = '\0';
    rcoll_bootstrap_t *bs = calloc(1, sizeof(*bs));
    if (!bs) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap state allocation failed");
        goto err_close;
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    int me = pthread_mutex_init(&bs->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    if (me != 0) {
        free(bs);
        st = rcoll_err_set(RCOLL_ERR_SYSTEM, "bootstrap state: mutex init failed");
        goto err_close;
    }
    bs->refs = 1;
    bs->fd = fd;
    bs->nranks = nranks;
    bs->rank = rank;
    bs->members = nranks;
    bs->root_host = peers[0];
    *bs_p = bs;
    return RCOLL_OK;

err_close:
    close(fd);
    return st;
}

/* One member of a shrink's result arrived; the last one completes it and starts a new round
 * of failures (the latch is cleared: what failed before belongs to the old communicator). */
static void bs_shrunk_take(rcoll_bootstrap_t *bs, const bs_shrunk_t *m)
{
    if (m->count < 1 || m->index < 0 || m->index >= m->count) return;
    if (m->index == 0) {
        free(bs->shrunk);
        bs->shrunk = calloc((size_t)m->count, sizeof(*bs->shrunk));
        bs->shrunk_got = 0;
        bs->shrunk_count = m->count;
        bs->shrunk_round = m->round;
    }
    if (!bs->shrunk || m->count != bs->shrunk_count || m->index != bs->shrunk_got) return;
    bs->shrunk[bs->shrunk_got++] = m->member;
    if (bs->shrunk_got < bs->shrunk_count) return;
    bs->shrunk_ready = 1;
    if (!m->sub) bs->members = bs->shrunk_count; /* the job's communicator shrank */
    bs->failed = 0;
    bs->fail_status = RCOLL_OK;
    bs->fail_culprit = -1;
    bs->fail_text[0] = '\0';
    bs->nsigs = 0;
}

/* Read every complete control message that has arrived: signatures are kept, the first
 * failure is latched (and later ones ignored). */
static void bs_pump(rcoll_bootstrap_t *bs)
{
    while (!bs->closed) {
        int complete;
        rcoll_status_t st = bs_rx_read(bs->fd, &bs->rx, &complete);
        if (st == RCOLL_OK && !complete) return;
        if (st != RCOLL_OK) {
            bs->closed = 1;
            if (bs->failed) return;
            /* The root itself is gone: in environment launch it lives in rank 0. */
            bs->failed = 1;
            bs->fail_status = RCOLL_ERR_REMOTE;
            bs->fail_culprit = 0;
            snprintf(bs->fail_text, sizeof(bs->fail_text),
                     "lost the bootstrap root (hosted with rank 0, %s pid %d): that process "
                     "exited or was killed", bs->root_host.hostname, (int)bs->root_host.pid);
            return;
        }
        bs->rx.got = 0;
        rcoll_bs_event_t ev;
        rcoll_bs_ctl_decode(bs->rx.buf.raw, 0, &ev);
        if (ev.kind == RCOLL_BS_EV_NONE) continue;
        if (ev.kind == RCOLL_BS_EV_SIG) {
            const rcoll_bs_sig_t *g = &ev.sig;
            int dup = 0;
            for (int i = 0; i < bs->nsigs && !dup; i++)
                dup = bs->sigs[i].ctx == g->ctx && !memcmp(bs->sigs[i].sig, g->sig, sizeof(g->sig));
            if (!dup && bs->nsigs < BS_SIGS_KEPT) bs->sigs[bs->nsigs++] = *g;
            continue;
        }
        if (ev.kind == RCOLL_BS_EV_SHRUNK) {
            bs_shrunk_take(bs, &ev.shrunk);
            continue;
        }
        if (ev.kind == RCOLL_BS_EV_WDOG_REPLY) {
            bs->wdog = ev.wdog;
            bs->has_wdog = 1;
            continue;
        }
        if (ev.kind == RCOLL_BS_EV_REVOKE) {
            int dup = 0;
            for (int i = 0; i < bs->nrevoked && !dup; i++) dup = bs->revoked[i].ctx == ev.revoke.ctx;
            if (!dup && bs->nrevoked < BS_REVOKED_KEPT) bs->revoked[bs->nrevoked++] = ev.revoke;
            continue;
        }
        if (ev.kind == RCOLL_BS_EV_LATE) { /* left out of one communicator: not a failure */
            snprintf(bs->late, sizeof(bs->late), "%s", ev.note.text);
            continue;
        }
        if (ev.kind == RCOLL_BS_EV_EXCLUDED) /* a shrink left this rank out (a FAIL as well) */
            snprintf(bs->excluded, sizeof(bs->excluded), "%s", ev.note.text);
        if (bs->failed) continue;
        bs->failed = 1;
        const bs_note_t *n = &ev.note;
        bs->fail_status = n->status < 0 ? (rcoll_status_t)n->status : RCOLL_ERR_REMOTE;
        bs->fail_culprit = n->culprit;
        snprintf(bs->fail_text, sizeof(bs->fail_text), "%s", n->text);
    }
}

rcoll_status_t rcoll_bs_poll(rcoll_bootstrap_t *bs, int *culprit)
{
    pthread_mutex_lock(&bs->lock);
    bs_pump(bs);
    rcoll_status_t st = RCOLL_OK;
    if (bs->failed) {
        *culprit = bs->fail_culprit;
        st = rcoll_err_set(bs->fail_status, "%s", bs->fail_text);
    }
    pthread_mutex_unlock(&bs->lock);
    return st;
}

static void bs_send_locked(rcoll_bootstrap_t *bs, uint32_t type, const void *body, size_t len,
                           uint64_t deadline_ns)
{
    pthread_mutex_lock(&bs->lock);
    if (bs->fd >= 0 && !bs->closed) bs_send_msg(bs->fd, type, body, len, deadline_ns);
    pthread_mutex_unlock(&bs->lock);
}

void rcoll_bs_send_sig(rcoll_bootstrap_t *bs, const rcoll_bs_sig_t *sig)
{
    if (!bs) return;
    bs_send_locked(bs, BS_SIG, sig, sizeof(*sig), rcoll_now_ns() + 100000000ull);
}

void rcoll_bs_send_stall(rcoll_bootstrap_t *bs, const rcoll_bs_sig_t *sig)
{
    if (!bs) return;
    bs_send_locked(bs, BS_STALL, sig, sizeof(*sig), rcoll_now_ns() + 100000000ull);
}

void rcoll_bs_send_wdog(rcoll_bootstrap_t *bs, const rcoll_bs_sig_t *sig)
{
    if (!bs) return;
    bs_send_locked(bs, BS_WDOG, sig, sizeof(*sig), rcoll_now_ns() + 100000000ull);
}

int rcoll_bs_wdog_reply(rcoll_bootstrap_t *bs, uint64_t ctx, uint64_t seq, rcoll_bs_wdog_t *out)
{
    pthread_mutex_lock(&bs->lock);
    bs_pump(bs);
    int got = bs->has_wdog && bs->wdog.ctx == ctx && bs->wdog.seq == seq;
    if (got) {
        *out = bs->wdog;
        bs->has_wdog = 0;
    }
    pthread_mutex_unlock(&bs->lock);
    return got;
}

int rcoll_bs_sigs(rcoll_bootstrap_t *bs, uint64_t ctx, rcoll_bs_sig_t *out, int max)
{
    pthread_mutex_lock(&bs->lock);
    bs_pump(bs);
    int n = 0;
    for (int i = 0; i < bs->nsigs && n < max; i++)
        if (bs->sigs[i].ctx == ctx) out[n++] = bs->sigs[i];
    pthread_mutex_unlock(&bs->lock);
    return n;
}

void rcoll_bs_report(rcoll_bootstrap_t *bs, int culprit, rcoll_status_t st, const char *text)
{
    if (!bs || bs->fd < 0) return;
    bs_note_t n;
    note_fill(&n, culprit, st, text);
    pthread_mutex_lock(&bs->lock);
    bs_send_msg(bs->fd, BS_ABORT, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
    pthread_mutex_unlock(&bs->lock);
}

const rcoll_peer_info_t *rcoll_bs_root_host(const rcoll_bootstrap_t *bs)
{
    return bs ? &bs->root_host : NULL;
}

int rcoll_bs_root_unreachable(rcoll_bootstrap_t *bs, int *retransmits)
{
    *retransmits = 0;
    if (!bs || bs->fd < 0) return 0;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(bs->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
    *retransmits = ti.tcpi_retransmits;
    return ti.tcpi_unacked > 0 && ti.tcpi_retransmits >= 2; /* one lost segment is not a verdict */
}

rcoll_bootstrap_t *rcoll_bs_ref(rcoll_bootstrap_t *bs)
{
    pthread_mutex_lock(&bs->lock);
    bs->refs++;
    pthread_mutex_unlock(&bs->lock);
    return bs;
}

void rcoll_bs_leave(rcoll_bootstrap_t *bs, int graceful)
{
    if (!bs) return;
    pthread_mutex_lock(&bs->lock);
    int last = --bs->refs == 0;
    pthread_mutex_unlock(&bs->lock);
    if (!last) return;
    /* A clean leave says so also after a failure: once a shrink has reset the root's latch,
     * a closed connection is announced as a death, and would fail the communicators the
     * survivors just made.  After a failure the root may be gone or stopped: a short wait. */
    if (graceful && !bs->closed)
        bs_send_msg(bs->fd, BS_BYE, NULL, 0,
                    rcoll_now_ns() + (bs->failed ? 100000000ull : 1000000000ull));
    close(bs->fd);
    free(bs->shrunk);
    pthread_mutex_destroy(&bs->lock);
    free(bs);
}

/* ------------------------------------------------------------------------------------------
 * Shrink, rank side
 * ---------------------------------------------------------------------------------------- */

int rcoll_bs_members(const rcoll_bootstrap_t *bs)
{
    return bs->members;
}

int rcoll_bs_rank(const rcoll_bootstrap_t *bs)
{
    return bs ? bs->rank : -1;
}

rcoll_status_t rcoll_bs_await_verdict(rcoll_bootstrap_t *bs, uint64_t wait_ns, int *culprit)
{
    uint64_t until = rcoll_now_ns() + wait_ns;
    for (;;) {
        int who = -1;
        rcoll_status_t st = rcoll_bs_poll(bs, &who);
        if (st != RCOLL_OK) {
            if (culprit) *culprit = who;
            return st;
        }
        if (rcoll_now_ns() >= until) return RCOLL_OK;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

void rcoll_bs_revoke(rcoll_bootstrap_t *bs, uint64_t ctx, int rank, const char *text)
{
    if (!bs || bs->fd < 0) return;
    bs_revoke_t m;
    memset(&m, 0, sizeof(m));
    m.ctx = ctx;
    m.rank = rank;
    snprintf(m.text, sizeof(m.text), "%s", text);
    pthread_mutex_lock(&bs->lock);
    bs_send_locked(bs, BS_REVOKE, &m, sizeof(m), rcoll_now_ns() + 100000000ull);
    pthread_mutex_unlock(&bs->lock);
}

int rcoll_bs_revoked(rcoll_bootstrap_t *bs, uint64_t ctx, int *rank, char *text, size_t len)
{
    if (!bs) return 0;
    int found = 0;
    pthread_mutex_lock(&bs->lock);
    bs_pump(bs);
    for (int i = 0; i < bs->nrevoked && !found; i++) {
        if (bs->revoked[i].ctx != ctx) continue;
        found = 1;
        if (rank) *rank = bs->revoked[i].rank;
        if (text) snprintf(text, len, "%s", bs->revoked[i].text);
    }
    pthread_mutex_unlock(&bs->lock);
    return found;
}

/* Why no decision can come: the connection to the root ended. */
static rcoll_status_t shrink_lost(rcoll_bootstrap_t *bs)
{
    if (bs->excluded[0]) return rcoll_err_set(RCOLL_ERR_TIMEOUT, "%s", bs->excluded);
    return rcoll_err_set(RCOLL_ERR_REMOTE, "the survivors cannot agree without the bootstrap "
                         "root, and it is gone: the process hosting it (the one that made the "
                         "unique id, or with environment launch rank 0, %s pid %d) exited or "
                         "was killed", bs->root_host.hostname, (int)bs->root_host.pid);
}

rcoll_status_t rcoll_bs_shrink(rcoll_bootstrap_t *bs, const rcoll_bs_shrink_req_t *req,
                               uint64_t deadline_ns, rcoll_bs_member_t **members, int *count,
                               uint32_t *round)
{
    *members = NULL;
    *count = 0;
    /* Held while looking, not while waiting: family members on other threads read the
     * connection meanwhile, and the result arrives in bs whoever reads it. */
    pthread_mutex_lock(&bs->lock);
    bs_pump(bs);
    rcoll_status_t st = RCOLL_OK;
    if (bs->closed) {
        st = shrink_lost(bs);
        goto out;
    }
    bs->shrunk_ready = 0;
    bs->shrunk_got = 0;
    bs->late[0] = '\0';
    st = bs_send_msg(bs->fd, BS_SHRINK, req, sizeof(*req), deadline_ns);
    if (st != RCOLL_OK) {
        bs_pump(bs);
        if (bs->closed) st = shrink_lost(bs);
        goto out;
    }
    for (;;) {
        bs_pump(bs);
        if (bs->shrunk_ready) break;
        if (bs->late[0]) {
            st = rcoll_err_set(RCOLL_ERR_TIMEOUT, "%s", bs->late);
            goto out;
        }
        if (bs->closed) {
            st = shrink_lost(bs);
            goto out;
        }
        uint64_t now = rcoll_now_ns();
        if (now >= deadline_ns) {
            st = rcoll_err_set(RCOLL_ERR_TIMEOUT, "the bootstrap root did not decide the "
                               "shrink in time (is the process hosting it stopped?)");
            goto out;
        }
        struct pollfd p = {.fd = bs->fd, .events = POLLIN};
        uint64_t ms = (deadline_ns - now) / 1000000ull + 1;
        pthread_mutex_unlock(&bs->lock);
        poll(&p, 1, ms > 50 ? 50 : (int)ms);
        pthread_mutex_lock(&bs->lock);
    }
    bs->shrunk_ready = 0;
    *members = bs->shrunk;
    *count = bs->shrunk_count;
    *round = bs->shrunk_round;
    bs->shrunk = NULL;
out:
    pthread_mutex_unlock(&bs->lock);
    return st;
}
