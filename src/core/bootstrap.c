/*
 * bootstrap.c - the bootstrap's protocol, and a rank's side of it: joining through the root,
 * and the control connection through which failures are announced.  The root that introduces
 * ranks to each other is in bootstrap_root.c; the message helpers and the unique id, which
 * both sides use, are in bootstrap_msg.c.  Together they must never trust a connection that
 * has not proved the secret, never block without a deadline while ranks are joining, and
 * never let one rank's death go unannounced to the others.
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
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
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

#define BS_SIGS_KEPT 32      /* distinct signatures a rank keeps */
#define BS_REVOKED_KEPT 64   /* revoked communicators a rank remembers */

/* ------------------------------------------------------------------------------------------
 * Rank side
 * ---------------------------------------------------------------------------------------- */

struct rcoll_bootstrap {
    int refs;    /* communicators sharing this control connection (parent and children) */
    int fd;
    int nranks;
    rcoll_peer_info_t root_host; /* the info of the rank hosting the root (rank 0) or this
                                  * rank's relay, for the message when it vanishes */
    int root_rank;               /* that rank */
    int via_relay;               /* joined through a relay (the id said so) */
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
    int naddrs = rcoll_bs_id_addrs(&b, addrs), which = 0;
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
        st = rcoll_bs_send_msg(fd, BS_HELLO, &hello, sizeof(hello), deadline_ns);
        if (st == RCOLL_OK) st = rcoll_net_recv_all(fd, &h, sizeof(h), deadline_ns);
        int retry = st == RCOLL_ERR_REMOTE && ++resets <= 3;
        if (st == RCOLL_OK && h.type == BS_NACK && rcoll_bs_hdr_valid(&h, sizeof(bs_note_t))) {
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
    size_t table_max = rcoll_bs_table_max(nranks);
    if (!rcoll_bs_hdr_valid(&h, (uint32_t)(table_max > sizeof(bs_note_t) ? table_max
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
    if (h.type != BS_TABLE || h.len < rcoll_bs_table_min(nranks)) {
        st = rcoll_err_set(RCOLL_ERR_PROTOCOL, "rank %d: unexpected bootstrap reply (type %u, "
                           "%u bytes) from %s", rank, h.type, h.len, abuf);
        goto err_close;
    }
    rcoll_cpath_merge(h.path); /* this rank's creation goes on from the table's sender */
    char *wire = malloc(h.len ? h.len : 1);
    if (!wire) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rank %d: the rank table (%u bytes)", rank,
                           h.len);
        goto err_close;
    }
    st = rcoll_net_recv_all(fd, wire, h.len, deadline_ns);
    if (st == RCOLL_OK && rcoll_bs_table_decode(wire, h.len, peers, nranks) != 0)
        st = rcoll_err_set(RCOLL_ERR_PROTOCOL, "rank %d: the bootstrap root at %s sent a "
                           "malformed rank table (%u bytes are not %d records)", rank, abuf,
                           h.len, nranks);
    else if (st != RCOLL_OK)
        rcoll_err_prefix("rank %d: receiving the rank table: ", rank);
    free(wire);
    if (st != RCOLL_OK) goto err_close;
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
    bs->root_rank = b.via_host > 0 && b.via_host <= nranks ? b.via_host - 1 : 0;
    bs->via_relay = b.via_host > 0;
    bs->root_host = peers[bs->root_rank];
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
        rcoll_status_t st = rcoll_bs_rx_read(bs->fd, &bs->rx, &complete);
        if (st == RCOLL_OK && !complete) return;
        if (st != RCOLL_OK) {
            bs->closed = 1;
            if (bs->failed) return;
            /* The root itself is gone: in environment launch it lives in rank 0. */
            bs->failed = 1;
            bs->fail_status = RCOLL_ERR_REMOTE;
            bs->fail_culprit = bs->root_rank;
            snprintf(bs->fail_text, sizeof(bs->fail_text),
                     "lost the bootstrap %s (hosted with rank %d, %s pid %d): that process "
                     "exited or was killed", bs->via_relay ? "relay" : "root", bs->root_rank,
                     bs->root_host.hostname, (int)bs->root_host.pid);
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
            for (int i = 0; i < bs->nrevoked && !dup; i++)
                dup = bs->revoked[i].ctx == ev.revoke.ctx;
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
    if (bs->fd >= 0 && !bs->closed) rcoll_bs_send_msg(bs->fd, type, body, len, deadline_ns);
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
    rcoll_bs_note_fill(&n, culprit, st, text);
    pthread_mutex_lock(&bs->lock);
    rcoll_bs_send_msg(bs->fd, BS_ABORT, &n, sizeof(n), rcoll_now_ns() + 100000000ull);
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
        rcoll_bs_send_msg(bs->fd, BS_BYE, NULL, 0,
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
    if (bs->via_relay)
        return rcoll_err_set(RCOLL_ERR_REMOTE, "the survivors cannot agree without the "
                             "bootstrap root, and this rank's relay to it is gone: the process "
                             "hosting it (rank %d, %s pid %d) exited or was killed",
                             bs->root_rank, bs->root_host.hostname, (int)bs->root_host.pid);
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
    st = rcoll_bs_send_msg(bs->fd, BS_SHRINK, req, sizeof(*req), deadline_ns);
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
