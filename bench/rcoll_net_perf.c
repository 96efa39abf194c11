/*
 * rcoll_net_perf.c - perftest-style microbenchmark of one built-in transport, driven through
 * its ops table: ib_write_bw's streaming-bandwidth table and ib_write_lat's ping-pong table.
 * Forks before touching the transport; the child sends, the parent receives, times, prints.
 * It measures transport.h only: no communicator, no collective, no library-level progress.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "transport/transport.h"
#include "core/config.h"
#include "util/status.h"
#include "util/time.h"

#include "net_perf.h"
/* ---------------------------------------------------------------------------------------------
 * Small helpers: errors, patterns, sizes
 * ------------------------------------------------------------------------------------------ */

static void np_report(const np_end_t *e, rcoll_status_t st, const char *what)
{
    fprintf(stderr, "rcoll_net_perf (%s): error: %s: %s (%s)\n",
            e->is_parent ? "receiver" : "sender", what, rcoll_err_get(),
            rcoll_status_string(st));
}

static uint64_t np_mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Seed of message iter of a round: differs per direction, round kind, size and iteration, so
 * a stale, reordered or misdirected message fails the check. */
static uint64_t np_seed(int dir, uint32_t kind, size_t size, uint64_t iter)
{
    return np_mix(np_mix(((uint64_t)size << 8) ^ ((uint64_t)kind << 2) ^ (uint64_t)dir) + iter);
}

static void np_fill(unsigned char *p, size_t n, uint64_t seed)
{
    size_t q = 0;
    for (; q + 8 <= n; q += 8) {
        uint64_t v = np_mix(seed + q);
        memcpy(p + q, &v, 8);
    }
    if (q < n) {
        uint64_t v = np_mix(seed + q);
        memcpy(p + q, &v, n - q);
    }
}

/* Offset of the first byte that differs from np_fill's pattern, or n if none. */
static size_t np_verify(const unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t q = 0; q < n; q += 8) {
        uint64_t v = np_mix(seed + q);
        size_t len = n - q < 8 ? n - q : 8;
        if (memcmp(p + q, &v, len) != 0)
            for (size_t b = 0; b < len; b++)
                if (p[q + b] != ((const unsigned char *)&v)[b])
                    return q + b;
    }
    return n;
}

/* Buffer slot of message iter.  Unless --check, the first and the last message of a round
 * have slots of their own (ring and ring + 1), written before the round and checked after it,
 * so no pattern work is timed; the others rotate through the ring slots unchecked.  With
 * --check every message is written and checked as it goes. */
static size_t np_slot(const np_opts_t *o, uint64_t iter, uint64_t iters, size_t ring)
{
    if (!o->check_all && iter == 0)
        return ring;
    if (!o->check_all && iter + 1 == iters)
        return ring + 1;
    return (size_t)(iter % ring);
}

static rcoll_status_t np_check_msg(const unsigned char *p, size_t got, size_t size,
                                   uint64_t seed, uint32_t kind, uint64_t iter)
{
    const char *round = kind == NP_ROUND_WARMUP ? "warm-up" : "measured";
    if (got != size)
        return rcoll_err_set(RCOLL_ERR_PROTOCOL, "size %zu, iteration %" PRIu64 " (%s): "
                             "received %zu bytes", size, iter, round, got);
    size_t bad = np_verify(p, size, seed);
    if (bad == size)
        return RCOLL_OK;
    uint64_t v = np_mix(seed + (bad & ~(size_t)7));
    unsigned want = ((const unsigned char *)&v)[bad & 7];
    return rcoll_err_set(RCOLL_ERR_PROTOCOL, "data mismatch at size %zu, iteration %" PRIu64
                         " (%s round): byte %zu is 0x%02x, expected 0x%02x", size, iter, round,
                         bad, p[bad], want);
}

/* Ring slots for one size: bw keeps the depth in flight, within the memory budget; lat one. */
static size_t np_ring(const np_opts_t *o, size_t size)
{
    size_t fit = NP_BUF_BUDGET / size;
    if (o->mode == NP_MODE_LAT)
        return 1;
    if (fit < 1)
        fit = 1;
    return (size_t)o->depth < fit ? (size_t)o->depth : fit;
}

static size_t np_sizes(const np_opts_t *o, size_t *sizes)
{
    size_t n = 0;
    if (o->min_size == o->max_size) {
        sizes[n++] = o->min_size;
        return n;
    }
    for (size_t s = o->min_size; s <= o->max_size && n < NP_MAX_SIZES; s *= 2)
        sizes[n++] = s;
    return n;
}

static void *np_alloc(size_t bytes)
{
    void *p = NULL;
    size_t len = (bytes + 4095) & ~(size_t)4095;
    if (posix_memalign(&p, 4096, len ? len : 4096) != 0)
        return NULL;
    memset(p, 0, len ? len : 4096); /* fault the pages in before anything is timed */
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * Waiting: every loop has a deadline (no progress for --timeout seconds) and watches the peer
 * ------------------------------------------------------------------------------------------ */

static void np_watch_init(np_watch_t *w, const np_end_t *e)
{
    rcoll_backoff_init(&w->bo, e->spin, e->poll_ns);
    w->idle = 0;
    w->since_ns = 0;
}

static void np_watch_moved(np_watch_t *w)
{
    w->idle = 0;
    rcoll_backoff_reset(&w->bo);
}

/* Whether the peer process is still there (the parent reaps a child that ended). */
static rcoll_status_t np_peer_alive(np_end_t *e)
{
    if (!e->is_parent) {
        if (getppid() != e->peer_pid)
            return rcoll_err_set(RCOLL_ERR_REMOTE, "the receiver process is gone");
        return RCOLL_OK;
    }
    if (e->peer_reaped || waitpid(e->peer_pid, &e->peer_status, WNOHANG) != e->peer_pid)
        return e->peer_reaped ? rcoll_err_set(RCOLL_ERR_REMOTE, "the sender process ended")
                              : RCOLL_OK;
    e->peer_reaped = 1;
    if (WIFSIGNALED(e->peer_status))
        return rcoll_err_set(RCOLL_ERR_REMOTE, "the sender process (pid %d) was killed by "
                             "signal %d", (int)e->peer_pid, WTERMSIG(e->peer_status));
    return rcoll_err_set(RCOLL_ERR_REMOTE, "the sender process (pid %d) exited with status %d",
                         (int)e->peer_pid, WEXITSTATUS(e->peer_status));
}

/* One fruitless poll: back off; now and then check the clock and the peer.  what, size and
 * iter name the awaited thing in the error (size 0: no message). */
static rcoll_status_t np_watch_idle(np_end_t *e, np_watch_t *w, const char *what, size_t size,
                                    uint64_t iter)
{
    rcoll_status_t st = RCOLL_OK;
    if (w->idle++ == 0) {
        w->since_ns = rcoll_now_ns();
    } else if ((w->idle & 1023u) == 0) {
        uint64_t waited = rcoll_now_ns() - w->since_ns;
        if ((w->idle & 65535u) == 0 || waited > 10000000ull)
            st = np_peer_alive(e);
        if (st == RCOLL_OK && (double)waited > e->o->timeout_s * 1e9)
            st = rcoll_err_set(RCOLL_ERR_TIMEOUT, "no progress in %.1f s", e->o->timeout_s);
    }
    if (st != RCOLL_OK) {
        char why[RCOLL_ERR_TEXT_MAX];
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
        if (size)
            return rcoll_err_set(st, "waiting for %s (%zu bytes, iteration %" PRIu64 "): %s",
                                 what, size, iter, why);
        return rcoll_err_set(st, "waiting for %s: %s", what, why);
    }
    rcoll_backoff_wait(&w->bo);
    return RCOLL_OK;
}

/* Test *req once; clears it when done.  sizes as in test(). */
static rcoll_status_t np_test(np_end_t *e, void **req, size_t *sizes, int *done)
{
    *done = 0;
    rcoll_status_t st = e->tp->test(*req, done, sizes);
    if (st != RCOLL_OK || *done)
        *req = NULL;
    return st;
}

static rcoll_status_t np_wait(np_end_t *e, void **req, size_t *sizes, const char *what,
                              size_t size, uint64_t iter)
{
    np_watch_t w;
    np_watch_init(&w, e);
    while (*req) {
        int done;
        rcoll_status_t st = np_test(e, req, sizes, &done);
        if (st != RCOLL_OK)
            return st;
        if (!done && (st = np_watch_idle(e, &w, what, size, iter)) != RCOLL_OK)
            return st;
    }
    return RCOLL_OK;
}

/* Post one isend / single-buffer irecv, retrying while the transport's queue is full. */
static rcoll_status_t np_post(np_end_t *e, int is_send, void *buf, size_t size, void *mh,
                              void **req, const char *what, uint64_t iter)
{
    np_watch_t w;
    np_watch_init(&w, e);
    for (;;) {
        rcoll_status_t st = is_send ? e->tp->isend(e->sc, buf, size, -1, mh, req)
                                    : e->tp->irecv(e->rc, 1, &buf, &size, NULL, &mh, req);
        if (st != RCOLL_OK || *req)
            return st;
        if ((st = np_watch_idle(e, &w, what, size, iter)) != RCOLL_OK)
            return st;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Setup: init, device, handles over the socketpair, connections, buffers
 * ------------------------------------------------------------------------------------------ */

static rcoll_status_t np_pick_dev(np_end_t *e)
{
    int ndev = 0;
    rcoll_status_t st = e->tp->devices(&ndev);
    if (st != RCOLL_OK)
        return st;
    const char *arg = e->o->dev_arg;
    char *end = NULL;
    long idx = arg ? strtol(arg, &end, 10) : 0;
    if (!arg || (end != arg && *end == '\0')) {
        if (idx < 0 || idx >= ndev)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "device %ld does not exist (%s has "
                                 "%d)", idx, e->tp->name, ndev);
        e->dev = (int)idx;
        return e->tp->get_props(e->dev, &e->props);
    }
    for (int d = 0; d < ndev; d++) {
        if ((st = e->tp->get_props(d, &e->props)) != RCOLL_OK)
            return st;
        if (!strcmp(e->props.name, arg)) {
            e->dev = d;
            return RCOLL_OK;
        }
    }
    return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "no %s device named %s", e->tp->name, arg);
}

/* Initialise the transport in this process and choose the device.  Failures here are the
 * "cannot run" kind (exit 2). */
static rcoll_status_t np_init(np_end_t *e)
{
    rcoll_config_t cfg;
    rcoll_status_t st = rcoll_config_load(&cfg);
    if (st != RCOLL_OK)
        return st;
    if ((st = rcoll_transport_ensure_init(e->tp)) != RCOLL_OK)
        return st;
    if ((st = np_pick_dev(e)) != RCOLL_OK)
        return st;
    if (e->o->max_size > e->props.max_msg_size)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%zu-byte messages exceed %s's limit of "
                             "%zu bytes", e->o->max_size, e->tp->name, e->props.max_msg_size);
    cpu_set_t cpus;
    int ncpu = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    /* As the library's RCOLL_SPIN=-1: spin briefly, then yield, unless both processes share
     * one CPU.  (Pure busy-polling, as perftest does, gave TCP stalls of a timer tick on the
     * 2-vCPU development VM; RCOLL_SPIN=100000 gets it back.) */
    e->spin = cfg.spin >= 0 ? (uint32_t)cfg.spin : ncpu >= 2 ? 200 : 0;
    e->poll_ns = (uint64_t)cfg.poll_us * 1000;
    return RCOLL_OK;
}

static rcoll_status_t np_sock_send(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "sending the listen handle");
        p += k;
        n -= (size_t)k;
    }
    return RCOLL_OK;
}

static rcoll_status_t np_sock_recv(np_end_t *e, int fd, void *buf, size_t n)
{
    char *p = buf;
    uint64_t end = rcoll_now_ns() + (uint64_t)(e->o->timeout_s * 1e9);
    while (n > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (rcoll_now_ns() > end)
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "no listen handle from the peer process "
                                 "in %.1f s", e->o->timeout_s);
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "reading the listen handle");
        if (k == 0) {
            char why[RCOLL_ERR_TEXT_MAX] = "";
            rcoll_status_t st = RCOLL_OK;
            for (int i = 0; i < 100 && e->is_parent && st == RCOLL_OK; i++) {
                st = np_peer_alive(e); /* give its exit status a moment to arrive */
                if (st == RCOLL_OK)
                    usleep(10000);
            }
            if (st != RCOLL_OK) /* copied: err_set must not read its own buffer */
                snprintf(why, sizeof(why), ": %s", rcoll_err_get());
            return rcoll_err_set(RCOLL_ERR_REMOTE, "the peer process closed the setup channel "
                                 "before sending its listen handle%s", why);
        }
        p += k;
        n -= (size_t)k;
    }
    return RCOLL_OK;
}

/* Listen, swap handles with the peer over fd, then connect and accept until both exist. */
static rcoll_status_t np_connect(np_end_t *e, int fd)
{
    char mine[RCOLL_TRANSPORT_HANDLE_BYTES] = {0}, peer[RCOLL_TRANSPORT_HANDLE_BYTES];
    rcoll_status_t st = e->tp->listen(e->dev, mine, &e->lc);
    if (st != RCOLL_OK)
        return st;
    if ((st = np_sock_send(fd, mine, sizeof(mine))) != RCOLL_OK ||
        (st = np_sock_recv(e, fd, peer, sizeof(peer))) != RCOLL_OK)
        return st;
    np_watch_t w;
    np_watch_init(&w, e);
    while (!e->sc || !e->rc) {
        char copy[RCOLL_TRANSPORT_HANDLE_BYTES]; /* connect may keep state keyed by contents */
        memcpy(copy, peer, sizeof(copy));
        if (!e->sc && (st = e->tp->connect(e->dev, copy, &e->sc)) != RCOLL_OK)
            return st;
        if (!e->rc && (st = e->tp->accept(e->lc, &e->rc)) != RCOLL_OK)
            return st;
        if ((!e->sc || !e->rc) &&
            (st = np_watch_idle(e, &w, "the connections to the peer process", 0, 0)) != RCOLL_OK)
            return st;
    }
    return RCOLL_OK;
}

/* Data buffers (ring + 2 slots of the largest size each way) and the token buffers, each
 * registered on the comm that moves it. */
static rcoll_status_t np_buffers(np_end_t *e, const size_t *sizes, size_t nsizes)
{
    size_t bytes = 0;
    for (size_t i = 0; i < nsizes; i++) {
        size_t need = (np_ring(e->o, sizes[i]) + 2) * sizes[i];
        bytes = need > bytes ? need : bytes;
    }
    int sends = e->o->mode == NP_MODE_LAT || !e->is_parent;
    int recvs = e->o->mode == NP_MODE_LAT || e->is_parent;
    rcoll_status_t st = RCOLL_OK;
    if (!(e->reqs = calloc((size_t)e->o->depth, sizeof(*e->reqs))) ||
        (sends && !(e->sbuf = np_alloc(bytes))) || (recvs && !(e->rbuf = np_alloc(bytes))))
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "buffers of %zu bytes", bytes);
    if (e->sbuf)
        st = e->tp->reg_mr(e->sc, e->sbuf, bytes, RCOLL_PTR_HOST, &e->smh);
    if (st == RCOLL_OK && e->rbuf)
        st = e->tp->reg_mr(e->rc, e->rbuf, bytes, RCOLL_PTR_HOST, &e->rmh);
    if (st == RCOLL_OK)
        st = e->tp->reg_mr(e->sc, &e->tok_out, sizeof(e->tok_out), RCOLL_PTR_HOST, &e->tmh_out);
    if (st == RCOLL_OK)
        st = e->tp->reg_mr(e->rc, &e->tok_in, sizeof(e->tok_in), RCOLL_PTR_HOST, &e->tmh_in);
    return st;
}

/* Close everything this side opened (after a failure too: closing frees pending requests). */
static void np_close(np_end_t *e)
{
    if (e->smh)
        e->tp->dereg_mr(e->sc, e->smh);
    if (e->tmh_out)
        e->tp->dereg_mr(e->sc, e->tmh_out);
    if (e->rmh)
        e->tp->dereg_mr(e->rc, e->rmh);
    if (e->tmh_in)
        e->tp->dereg_mr(e->rc, e->tmh_in);
    if (e->sc)
        e->tp->close_send(e->sc);
    if (e->rc)
        e->tp->close_recv(e->rc);
    if (e->lc)
        e->tp->close_listen(e->lc);
    free(e->sbuf);
    free(e->rbuf);
    free(e->reqs);
    e->smh = e->rmh = e->tmh_out = e->tmh_in = e->sc = e->rc = e->lc = NULL;
    e->sbuf = e->rbuf = NULL;
    e->reqs = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Rounds.  Each starts with a token from the parent (kind, size, iterations) and the child's
 * ready reply, sent once its buffers are written; the parent starts timing after that.
 *
 *   bw:   parent              child          lat:  parent              child
 *         token ------------->                     token ------------->
 *         <--------------- ready                   <--------------- ready
 *         <------------- message 0                 ping 0 ------------>
 *         <------------- ... (depth in flight)     <-------------- pong 0 ...
 * ------------------------------------------------------------------------------------------ */

/* Sending side: before a round (not --check), write the first and last message. */
static void np_prefill(np_end_t *e, const np_token_t *t, int dir)
{
    size_t size = (size_t)t->size, ring = np_ring(e->o, size);
    if (e->o->check_all)
        return;
    np_fill(e->sbuf + ring * size, size, np_seed(dir, t->kind, size, 0));
    if (t->iters > 1)
        np_fill(e->sbuf + (ring + 1) * size, size, np_seed(dir, t->kind, size, t->iters - 1));
}

/* Sending side: the buffer of message iter, written now under --check. */
static unsigned char *np_outgoing(np_end_t *e, const np_token_t *t, int dir, uint64_t iter)
{
    size_t size = (size_t)t->size;
    unsigned char *p = e->sbuf + np_slot(e->o, iter, t->iters, np_ring(e->o, size)) * size;
    if (e->o->check_all)
        np_fill(p, size, np_seed(dir, t->kind, size, iter));
    return p;
}

static unsigned char *np_incoming(np_end_t *e, const np_token_t *t, uint64_t iter)
{
    size_t size = (size_t)t->size;
    return e->rbuf + np_slot(e->o, iter, t->iters, np_ring(e->o, size)) * size;
}

/* Receiving side: message iter arrived with got bytes: check it now (--check), or keep its
 * length for np_check_kept. */
static rcoll_status_t np_arrived(np_end_t *e, const np_token_t *t, int dir, uint64_t iter,
                                 size_t got, size_t kept[2])
{
    if (e->o->check_all)
        return np_check_msg(np_incoming(e, t, iter), got, (size_t)t->size,
                            np_seed(dir, t->kind, (size_t)t->size, iter), t->kind, iter);
    if (iter == 0)
        kept[0] = got;
    if (iter + 1 == t->iters)
        kept[1] = got;
    return RCOLL_OK;
}

static rcoll_status_t np_check_kept(np_end_t *e, const np_token_t *t, int dir,
                                    const size_t kept[2])
{
    size_t size = (size_t)t->size;
    rcoll_status_t st = RCOLL_OK;
    if (e->o->check_all)
        return RCOLL_OK;
    st = np_check_msg(np_incoming(e, t, 0), kept[0], size, np_seed(dir, t->kind, size, 0),
                      t->kind, 0);
    if (st == RCOLL_OK && t->iters > 1)
        st = np_check_msg(np_incoming(e, t, t->iters - 1), kept[1], size,
                          np_seed(dir, t->kind, size, t->iters - 1), t->kind, t->iters - 1);
    return st;
}

/* Parent: post the receive of the child's ready reply (before any data receive). */
static rcoll_status_t np_expect_ready(np_end_t *e, void **ready)
{
    return np_post(e, 0, &e->tok_in, sizeof(e->tok_in), e->tmh_in, ready, "the ready reply", 0);
}

/* Parent: send the round's token, then wait for the ready reply posted as *ready. */
static rcoll_status_t np_go(np_end_t *e, const np_token_t *t, void **ready)
{
    void *treq = NULL;
    size_t got = 0;
    e->tok_out = *t;
    rcoll_status_t st = np_post(e, 1, &e->tok_out, sizeof(e->tok_out), e->tmh_out, &treq,
                                "the round token", 0);
    if (st == RCOLL_OK)
        st = np_wait(e, &treq, NULL, "the round token to be sent", 0, 0);
    if (st == RCOLL_OK)
        st = np_wait(e, ready, &got, "the sender's ready reply", 0, 0);
    if (st == RCOLL_OK && (got != sizeof(e->tok_in) || e->tok_in.magic != NP_TOKEN_MAGIC))
        st = rcoll_err_set(RCOLL_ERR_PROTOCOL, "malformed ready reply (%zu bytes)", got);
    return st;
}

/* Child: tell the parent that this round's buffers are written. */
static rcoll_status_t np_ready(np_end_t *e)
{
    void *req = NULL;
    e->tok_out = (np_token_t){.magic = NP_TOKEN_MAGIC, .kind = e->tok_in.kind};
    rcoll_status_t st = np_post(e, 1, &e->tok_out, sizeof(e->tok_out), e->tmh_out, &req,
                                "the ready reply", 0);
    return st == RCOLL_OK ? np_wait(e, &req, NULL, "the ready reply to be sent", 0, 0) : st;
}

/* ---------------------------------------------------------------------------------------------
 * Bandwidth: the child streams, the parent keeps receives posted and times from the ready
 * reply to the last message.  Peak is the best window of at least NP_PEAK_WINDOW_NS and
 * 2 x ring messages: long enough that draining data a transport had buffered (TCP socket
 * buffers hold megabytes) cannot pass for link speed.
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    double seconds;
    double peak_bytes_s;
} np_bw_meas_t;

/* Post receives until `ring` are outstanding or all are posted; a full queue leaves the rest
 * for a later pass. */
static rcoll_status_t np_bw_post_recvs(np_end_t *e, const np_token_t *t, size_t ring,
                                       uint64_t *posted, uint64_t done)
{
    while (*posted < t->iters && *posted - done < ring) {
        size_t size = (size_t)t->size;
        void *buf = np_incoming(e, t, *posted), **req = &e->reqs[*posted % ring];
        rcoll_status_t st = e->tp->irecv(e->rc, 1, &buf, &size, NULL, &e->rmh, req);
        if (st != RCOLL_OK || !*req)
            return st;
        (*posted)++;
    }
    return RCOLL_OK;
}

static rcoll_status_t np_bw_recv_round(np_end_t *e, const np_token_t *t, np_bw_meas_t *m)
{
    size_t size = (size_t)t->size, ring = np_ring(e->o, size), kept[2] = {0, 0};
    uint64_t posted = 0, done = 0, wdone = 0, t0, wstart, now = 0;
    void *ready = NULL;
    np_watch_t w;
    rcoll_status_t st = np_expect_ready(e, &ready);
    if (st == RCOLL_OK)
        st = np_bw_post_recvs(e, t, ring, &posted, done);
    if (st == RCOLL_OK)
        st = np_go(e, t, &ready);
    if (st != RCOLL_OK)
        return st;
    t0 = wstart = rcoll_now_ns();
    m->peak_bytes_s = 0;
    np_watch_init(&w, e);
    while (done < t->iters) {
        uint64_t before = posted;
        size_t got = 0;
        int fin = 0;
        if (done < posted && (st = np_test(e, &e->reqs[done % ring], &got, &fin)) != RCOLL_OK)
            return st;
        if (fin) {
            now = rcoll_now_ns();
            if ((st = np_arrived(e, t, 1, done, got, kept)) != RCOLL_OK)
                return st;
            if (++done - wdone >= 2 * ring && now - wstart >= NP_PEAK_WINDOW_NS) {
                double rate = (double)((done - wdone) * size) / ((double)(now - wstart) * 1e-9);
                m->peak_bytes_s = rate > m->peak_bytes_s ? rate : m->peak_bytes_s;
                wstart = now;
                wdone = done;
            }
        }
        if ((st = np_bw_post_recvs(e, t, ring, &posted, done)) != RCOLL_OK)
            return st;
        if (fin || posted != before)
            np_watch_moved(&w);
        else if ((st = np_watch_idle(e, &w, "a message", size, done)) != RCOLL_OK)
            return st;
    }
    m->seconds = now > t0 ? (double)(now - t0) * 1e-9 : 1e-9;
    double avg = (double)t->iters * (double)size / m->seconds;
    m->peak_bytes_s = m->peak_bytes_s > avg ? m->peak_bytes_s : avg;
    return np_check_kept(e, t, 1, kept);
}

static rcoll_status_t np_bw_send_round(np_end_t *e, const np_token_t *t)
{
    size_t size = (size_t)t->size, ring = np_ring(e->o, size);
    uint64_t posted = 0, done = 0;
    np_watch_t w;
    np_prefill(e, t, 1);
    rcoll_status_t st = np_ready(e);
    np_watch_init(&w, e);
    while (st == RCOLL_OK && done < t->iters) {
        int moved = 0, fin = 0;
        while (posted < t->iters && posted - done < ring) {
            void **req = &e->reqs[posted % ring];
            st = e->tp->isend(e->sc, np_outgoing(e, t, 1, posted), size, -1, e->smh, req);
            if (st != RCOLL_OK || !*req)
                break; /* an error, or the queue is full */
            posted++;
            moved = 1;
        }
        if (st == RCOLL_OK && done < posted)
            st = np_test(e, &e->reqs[done % ring], NULL, &fin);
        done += fin ? 1 : 0;
        if (st != RCOLL_OK || moved || fin)
            np_watch_moved(&w);
        else
            st = np_watch_idle(e, &w, "a send to complete", size, done);
    }
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Latency: the parent sends a ping, the child answers with a pong of the same size; one-way
 * latency is half of each round trip, as ib_write_lat reports it.
 * ------------------------------------------------------------------------------------------ */

static rcoll_status_t np_lat_ping_round(np_end_t *e, const np_token_t *t, double *usec)
{
    size_t size = (size_t)t->size, kept[2] = {0, 0};
    void *ready = NULL, *sreq = NULL, *rreq = NULL;
    np_prefill(e, t, 0);
    rcoll_status_t st = np_expect_ready(e, &ready);
    if (st == RCOLL_OK)
        st = np_go(e, t, &ready);
    for (uint64_t i = 0; i < t->iters && st == RCOLL_OK; i++) {
        size_t got = 0;
        st = np_post(e, 0, np_incoming(e, t, i), size, e->rmh, &rreq, "a pong", i);
        if (st != RCOLL_OK)
            break;
        unsigned char *ping = np_outgoing(e, t, 0, i);
        uint64_t t0 = rcoll_now_ns();
        if ((st = np_post(e, 1, ping, size, e->smh, &sreq, "a ping", i)) != RCOLL_OK ||
            (st = np_wait(e, &sreq, NULL, "the ping to be sent", size, i)) != RCOLL_OK ||
            (st = np_wait(e, &rreq, &got, "the pong", size, i)) != RCOLL_OK)
            break;
        usec[i] = (double)(rcoll_now_ns() - t0) * 1e-3 / 2;
        st = np_arrived(e, t, 1, i, got, kept);
    }
    return st == RCOLL_OK ? np_check_kept(e, t, 1, kept) : st;
}

static rcoll_status_t np_lat_echo_round(np_end_t *e, const np_token_t *t)
{
    size_t size = (size_t)t->size, kept[2] = {0, 0};
    void *sreq = NULL, *rreq = NULL;
    np_prefill(e, t, 1);
    rcoll_status_t st = np_post(e, 0, np_incoming(e, t, 0), size, e->rmh, &rreq, "a ping", 0);
    if (st == RCOLL_OK)
        st = np_ready(e);
    for (uint64_t i = 0; i < t->iters && st == RCOLL_OK; i++) {
        size_t got = 0;
        if ((st = np_wait(e, &rreq, &got, "a ping", size, i)) != RCOLL_OK ||
            (st = np_arrived(e, t, 0, i, got, kept)) != RCOLL_OK)
            break;
        if (i + 1 < t->iters && (st = np_post(e, 0, np_incoming(e, t, i + 1), size, e->rmh,
                                              &rreq, "a ping", i + 1)) != RCOLL_OK)
            break;
        st = np_post(e, 1, np_outgoing(e, t, 1, i), size, e->smh, &sreq, "a pong", i);
        if (st == RCOLL_OK)
            st = np_wait(e, &sreq, NULL, "the pong to be sent", size, i);
    }
    return st == RCOLL_OK ? np_check_kept(e, t, 0, kept) : st;
}
/* ---------------------------------------------------------------------------------------------
 * The two processes
 * ------------------------------------------------------------------------------------------ */

/* Iterations for the measured round: -n, or as many as fit NP_AUTO_TARGET_S going by the
 * warm-up, between NP_MIN_AUTO_ITERS and NP_DEF_ITERS. */
static uint64_t np_auto_iters(const np_opts_t *o, uint64_t warm_iters, double warm_s)
{
    if (o->iters)
        return o->iters;
    double n = warm_s > 0 ? NP_AUTO_TARGET_S * (double)warm_iters / warm_s : NP_DEF_ITERS;
    if (n > NP_DEF_ITERS)
        return NP_DEF_ITERS;
    return n < NP_MIN_AUTO_ITERS ? NP_MIN_AUTO_ITERS : (uint64_t)n;
}

/* One round driven by the parent; bw fills *m, lat fills us[0..iters). */
static rcoll_status_t np_round(np_end_t *e, const np_token_t *t, np_bw_meas_t *m, double *us)
{
    return e->o->mode == NP_MODE_BW ? np_bw_recv_round(e, t, m) : np_lat_ping_round(e, t, us);
}

/* Warm-up, then the measured round, for one size. */
static rcoll_status_t np_measure_size(np_end_t *e, size_t size, np_result_t *r)
{
    np_token_t t = {.magic = NP_TOKEN_MAGIC, .kind = NP_ROUND_WARMUP, .size = size};
    np_bw_meas_t m = {0};
    double warm_us[NP_WARMUP_LAT], *us = NULL;
    size_t ring = np_ring(e->o, size);
    t.iters = e->o->mode == NP_MODE_BW ? (2 * ring > 16 ? 2 * ring : 16) : NP_WARMUP_LAT;
    rcoll_status_t st = np_round(e, &t, &m, warm_us);
    if (st != RCOLL_OK)
        return st;
    if (e->o->mode == NP_MODE_LAT) { /* from the median round trip: one stall misleads less */
        qsort(warm_us, NP_WARMUP_LAT, sizeof(*warm_us), np_cmp_double);
        m.seconds = warm_us[NP_WARMUP_LAT / 2] * 2e-6 * NP_WARMUP_LAT;
    }
    t.kind = NP_ROUND_MEASURE;
    t.iters = np_auto_iters(e->o, t.iters, m.seconds);
    if (e->o->mode == NP_MODE_LAT && !(us = malloc((size_t)t.iters * sizeof(*us))))
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "%" PRIu64 " latency samples", t.iters);
    if ((st = np_round(e, &t, &m, us)) == RCOLL_OK) {
        r->size = size;
        r->iters = t.iters;
        if (e->o->mode == NP_MODE_LAT) {
            np_lat_stats(us, t.iters, r);
        } else {
            r->v[0] = m.peak_bytes_s * 8e-9;
            r->v[1] = (double)t.iters * (double)size / m.seconds * 8e-9;
            r->v[2] = (double)t.iters / m.seconds * 1e-6;
        }
    }
    free(us);
    return st;
}

/* After BYE: the child closes and exits; reap it within the deadline. */
static rcoll_status_t np_reap(np_end_t *e)
{
    uint64_t end = rcoll_now_ns() + (uint64_t)(e->o->timeout_s * 1e9);
    while (!e->peer_reaped) {
        pid_t p = waitpid(e->peer_pid, &e->peer_status, WNOHANG);
        if (p == e->peer_pid) {
            e->peer_reaped = 1;
            break;
        }
        if (p < 0 && errno != EINTR)
            return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "waitpid");
        if (rcoll_now_ns() > end)
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "the sender process did not exit in %.1f s",
                                 e->o->timeout_s);
        usleep(1000);
    }
    if (WIFEXITED(e->peer_status) && WEXITSTATUS(e->peer_status) == 0)
        return RCOLL_OK;
    return rcoll_err_set(RCOLL_ERR_REMOTE, "the sender process failed (wait status 0x%x)",
                         e->peer_status);
}

static rcoll_status_t np_receiver_run(np_end_t *e, const size_t *sizes, size_t nsizes,
                                      np_result_t *res)
{
    rcoll_status_t st = RCOLL_OK;
    void *treq = NULL;
    np_print_header(e);
    for (size_t i = 0; i < nsizes && st == RCOLL_OK; i++)
        if ((st = np_measure_size(e, sizes[i], &res[i])) == RCOLL_OK)
            np_print_row(e->o->mode, &res[i]);
    if (st != RCOLL_OK)
        return st;
    printf(NP_RESULT_LINE);
    fflush(stdout);
    e->tok_out = (np_token_t){.magic = NP_TOKEN_MAGIC, .kind = NP_ROUND_BYE};
    st = np_post(e, 1, &e->tok_out, sizeof(e->tok_out), e->tmh_out, &treq, "the bye token", 0);
    if (st == RCOLL_OK)
        st = np_wait(e, &treq, NULL, "the bye token to be sent", 0, 0);
    return st == RCOLL_OK ? np_reap(e) : st;
}

/* Parent: receives and reports.  Returns the exit code. */
static int np_receiver_main(const np_opts_t *o, pid_t child, int fd)
{
    np_end_t e = {.o = o, .tp = o->tp, .is_parent = 1, .peer_pid = child};
    size_t sizes[NP_MAX_SIZES], nsizes = np_sizes(o, sizes);
    np_result_t res[NP_MAX_SIZES];
    int code = NP_EXIT_USAGE;
    const char *stage = "startup";
    FILE *json = NULL;
    rcoll_status_t st = RCOLL_OK;
    if (o->json_path && !(json = fopen(o->json_path, "w")))
        st = rcoll_err_set_errno(RCOLL_ERR_INVALID_ARG, errno, "cannot write %s", o->json_path);
    if (st != RCOLL_OK || (st = np_init(&e)) != RCOLL_OK)
        goto err;
    code = NP_EXIT_FAIL;
    stage = "connection setup";
    if ((st = np_connect(&e, fd)) != RCOLL_OK)
        goto err;
    stage = "buffer setup";
    if ((st = np_buffers(&e, sizes, nsizes)) != RCOLL_OK)
        goto err;
    stage = o->mode == NP_MODE_BW ? "bandwidth test" : "latency test";
    if ((st = np_receiver_run(&e, sizes, nsizes, res)) != RCOLL_OK)
        goto err;
    close(fd);
    np_close(&e);
    stage = "results";
    if (json && (st = np_json_write(&e, json, res, nsizes)) != RCOLL_OK)
        goto err_json; /* json is closed */
    return 0;
err:
    if (!e.peer_reaped) {
        kill(child, SIGKILL);
        while (waitpid(child, &e.peer_status, 0) < 0 && errno == EINTR)
            ;
    } else if (WIFEXITED(e.peer_status) && WEXITSTATUS(e.peer_status) == NP_EXIT_USAGE) {
        code = NP_EXIT_USAGE; /* the sender could not start (it said why) */
    }
    close(fd);
    np_close(&e);
    if (json)
        fclose(json);
err_json:
    np_report(&e, st, stage);
    if (json)
        unlink(o->json_path); /* no file that looks like results of a failed run */
    return code;
}

/* Child: follows the parent's tokens until BYE.  Returns the exit code. */
static int np_sender_main(const np_opts_t *o, pid_t parent, int fd)
{
    np_end_t e = {.o = o, .tp = o->tp, .is_parent = 0, .peer_pid = parent};
    size_t sizes[NP_MAX_SIZES], nsizes = np_sizes(o, sizes);
    const char *stage = "startup";
    rcoll_status_t st = np_init(&e);
    if (st != RCOLL_OK) {
        np_report(&e, st, stage);
        close(fd);
        return NP_EXIT_USAGE;
    }
    stage = "connection setup";
    if ((st = np_connect(&e, fd)) != RCOLL_OK)
        goto out;
    stage = "buffer setup";
    if ((st = np_buffers(&e, sizes, nsizes)) != RCOLL_OK)
        goto out;
    stage = o->mode == NP_MODE_BW ? "bandwidth test" : "latency test";
    for (;;) {
        void *treq = NULL;
        size_t got = 0;
        st = np_post(&e, 0, &e.tok_in, sizeof(e.tok_in), e.tmh_in, &treq, "a token", 0);
        if (st == RCOLL_OK)
            st = np_wait(&e, &treq, &got, "the next token from the receiver", 0, 0);
        if (st != RCOLL_OK)
            break;
        np_token_t t = e.tok_in;
        if (got != sizeof(t) || t.magic != NP_TOKEN_MAGIC || t.size > o->max_size ||
            t.iters > NP_MAX_ITERS) {
            st = rcoll_err_set(RCOLL_ERR_PROTOCOL, "malformed token (%zu bytes)", got);
            break;
        }
        if (t.kind == NP_ROUND_BYE)
            break;
        st = o->mode == NP_MODE_BW ? np_bw_send_round(&e, &t) : np_lat_echo_round(&e, &t);
        if (st != RCOLL_OK)
            break;
    }
out:
    if (st != RCOLL_OK)
        np_report(&e, st, stage);
    close(fd);
    np_close(&e);
    return st == RCOLL_OK ? 0 : NP_EXIT_FAIL;
}
int main(int argc, char **argv)
{
    np_opts_t o;
    const char *tname;
    char names[128];
    int sv[2], code = np_parse_args(argc, argv, &o, &tname);
    if (code != 0)
        return code < 0 ? 0 : code;
    if (!(o.tp = rcoll_transport_find(tname))) {
        np_list_transports(names, sizeof(names));
        fprintf(stderr, "rcoll_net_perf: transport '%s' is not built in (built-in: %s)\n",
                tname, names);
        return NP_EXIT_USAGE;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("rcoll_net_perf: socketpair");
        return NP_EXIT_FAIL;
    }
    /* Fork before the transport exists: nothing of it is shared or inherited. */
    pid_t parent = getpid();
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        perror("rcoll_net_perf: fork");
        return NP_EXIT_FAIL;
    }
    if (child == 0) {
        close(sv[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the receiver */
        if (getppid() != parent)
            _exit(NP_EXIT_FAIL);
        exit(np_sender_main(&o, parent, sv[1]));
    }
    close(sv[1]);
    return np_receiver_main(&o, child, sv[0]);
}
