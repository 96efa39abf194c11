/*
 * test_transport_tcp.c - conformance suite for the TCP transport, driven through its ops table.
 * Both ends live in this one thread (every op is non-blocking, so one loop tests both sides);
 * raw sockets built from socket.h play misbehaving peers.  Every wait has a 10 s deadline so
 * a bug fails the test instead of hanging it.
 */
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "transport/tcp.h"
#include "tp_harness.h"
#include "transport/transport.h"
#include "util/config.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

const rcoll_transport_ops_t *T = &rcoll_transport_tcp;

/* Failover for the next setup() (RCOLL_TCP_FAILOVER_*; -1: the knob's value). */
static int setup_failover = -1;

/* (Re)initialise the transport with nsocks sockets per connection. */
static void setup(int nsocks, size_t stripe_min)
{
    rcoll_tcp_config_t cfg;
    T->fini();
    if (rcoll_config_parse(T->config, &cfg) != RCOLL_OK) {
        fprintf(stderr, "config load failed: %s\n", rcoll_err_get());
        exit(1);
    }
    cfg.nsocks = nsocks;
    cfg.stripe_min = stripe_min;
    if (setup_failover >= 0)
        cfg.failover = setup_failover;
    if (T->init(&cfg) != RCOLL_OK) {
        fprintf(stderr, "tcp init failed: %s\n", rcoll_err_get());
        exit(1);
    }
}

/* A raw TCP client connected (blocking) to the handle's listener. */
static int raw_connect(const char *handle)
{
    rcoll_tcp_handle_t h;
    memcpy(&h, handle, sizeof(h));
    int fd = socket(h.addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, &h.addr.sa, rcoll_net_addr_len(&h.addr)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int raw_hello(int fd, const char *handle, uint64_t nonce_delta)
{
    rcoll_tcp_handle_t h;
    rcoll_tcp_hello_t m;
    memcpy(&h, handle, sizeof(h));
    memset(&m, 0, sizeof(m));
    m.magic = RCOLL_TCP_HELLO_MAGIC;
    m.version = RCOLL_TCP_VERSION;
    m.nonce = h.nonce + nonce_delta;
    rcoll_random_bytes(&m.conn_id, sizeof(m.conn_id));
    m.index = 0;
    m.nsocks = h.nsocks;
    return send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------ */

static void test_props(void)
{
    rcoll_transport_props_t pr;
    int n = 0;
    CHECK(T->devices(&n) == RCOLL_OK && n == 1, "devices = %d", n);
    CHECK(T->get_props(0, &pr) == RCOLL_OK, "get_props");
    CHECK(pr.ptr_support == RCOLL_PTR_HOST, "ptr_support %d", pr.ptr_support);
    CHECK(pr.speed_mbps > 0 && pr.max_recvs == RCOLL_TRANSPORT_MAX_RECVS, "props");
    CHECK(pr.max_msg_size >= ((size_t)1 << 32), "max_msg_size %zu", pr.max_msg_size);
    CHECK(pr.name[0] != '\0', "empty name");
}

static void test_sizes(int nsocks)
{
    static const size_t sizes[] = {0, 1, 100, 64 << 10, 1 << 20, (16 << 20) + 3};
    pair_t p;
    setup(nsocks, 64 << 10);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && p.rc; k++) {
        /* the posted buffer may be larger than the message */
        tp_transfer(&p, sizes[k], sizes[k] + 5, 0, 0, (unsigned)k);
    }
    pair_close(&p);
}

static void test_tag_mismatch(void)
{
    setup(1, 64 << 10);
    tp_case_tag_mismatch();
}

static void test_too_small(void)
{
    pair_t p;
    unsigned char sbuf[200], rbuf[100 + GUARD];
    size_t cap = 100;
    void *sreq = NULL, *rreq = NULL, *dp = rbuf;
    setup(1, 64 << 10);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc)
        return;
    fill(sbuf, sizeof(sbuf), 3);
    memset(rbuf, 0x5A, sizeof(rbuf));
    CHECK(T->isend(p.sc, sbuf, sizeof(sbuf), 1, NULL, &sreq) == RCOLL_OK, "isend");
    CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &rreq) == RCOLL_OK, "irecv");
    void *none = NULL;
    CHECK(wait2(&sreq, &none, NULL) == RCOLL_OK, "send completes into the socket");
    rcoll_status_t st = wait2(&none, &rreq, NULL);
    CHECK(st == RCOLL_ERR_INVALID_USAGE, "oversized message gave %d", st);
    CHECK(strstr(rcoll_err_get(), "200") && strstr(rcoll_err_get(), "100"),
          "message names both sizes");
    CHECK(guard_ok(rbuf, sizeof(rbuf), 0x5A), "receive buffer or guard was written");
    pair_close(&p);
}

static void test_garbage_client(int nsocks)
{
    pair_t p;
    setup(nsocks, 64 << 10);
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    int fd = raw_connect(p.handle);
    CHECK(fd >= 0, "raw connect");
    if (fd < 0)
        goto out;
    char junk[64];
    memset(junk, 'x', sizeof(junk));
    CHECK(send(fd, junk, sizeof(junk), MSG_NOSIGNAL) == (ssize_t)sizeof(junk), "send junk");
    CHECK(raw_sees_close(fd, p.lc), "garbage client was not dropped");
    close(fd);
    /* a valid connect afterwards still works, and carries data */
    tp_connect_after_bad(&p, "garbage");
out:
    pair_close(&p);
}

static void test_wrong_nonce(void)
{
    pair_t p;
    void *rc = NULL;
    setup(1, 64 << 10);
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    int fd = raw_connect(p.handle);
    CHECK(fd >= 0 && raw_hello(fd, p.handle, 1) == 0, "raw hello");
    CHECK(raw_sees_close(fd, p.lc), "wrong-nonce client was not dropped");
    CHECK(accept_wait(p.lc, &rc, 0.2) == RCOLL_OK && rc == NULL, "wrong nonce accepted");
    if (rc)
        T->close_recv(rc);
    if (fd >= 0)
        close(fd);
    pair_close(&p);
}

/* Too many silent clients: the oldest are dropped, a valid connect still succeeds. */
static void test_half_open_cap(void)
{
    enum { N = RCOLL_TCP_MAX_HALF_OPEN + 20 };
    static int fds[N];
    pair_t p;
    int saved = rcoll_log_level;
    setup(1, 64 << 10);
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    rcoll_log_level = RCOLL_LOG_NONE; /* 20 expected WARNs */
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(p.handle);
        if (i % 64 == 63) /* drain the backlog as we go */
            T->accept(p.lc, &p.rc);
    }
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while ((!p.sc || !p.rc) && rcoll_now_ns() < end) {
        if (!p.sc)
            CHECK(T->connect(0, p.handle, &p.sc) == RCOLL_OK, "connect");
        if (!p.rc)
            CHECK(T->accept(p.lc, &p.rc) == RCOLL_OK, "accept");
    }
    rcoll_log_level = saved;
    CHECK(p.sc && p.rc, "valid connect behind %d silent clients", N);
    char b;
    CHECK(fds[0] >= 0 && recv(fds[0], &b, 1, MSG_DONTWAIT) == 0, "oldest silent client kept");
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    pair_close(&p);
}

/* A raw peer that completed a valid hello (nsocks 1), then misbehaves as told. */
static void test_raw_peer(const char *what)
{
    pair_t p;
    unsigned char buf[2000];
    size_t cap = sizeof(buf);
    void *rreq = NULL, *dp = buf, *none = NULL;
    setup(1, 64 << 10);
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    int fd = raw_connect(p.handle);
    CHECK(fd >= 0 && raw_hello(fd, p.handle, 0) == 0, "raw hello");
    CHECK(accept_wait(p.lc, &p.rc, 10) == RCOLL_OK && p.rc, "valid raw hello not accepted");
    if (!p.rc || fd < 0)
        goto out;
    rcoll_tcp_frame_t h = {.magic = RCOLL_TCP_FRAME_MAGIC, .tag = 0, .length = 1000};
    if (!strcmp(what, "badmagic"))
        h.magic ^= 0x01010101u;
    CHECK(send(fd, &h, sizeof(h), MSG_NOSIGNAL) == (ssize_t)sizeof(h), "send header");
    CHECK(send(fd, buf, 10, MSG_NOSIGNAL) == 10, "send part of the payload");
    if (!strcmp(what, "close")) {
        close(fd);
        fd = -1;
    }
    memset(buf, 0, sizeof(buf));
    CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &rreq) == RCOLL_OK, "irecv");
    rcoll_status_t st = wait2(&none, &rreq, NULL);
    if (!strcmp(what, "close")) {
        CHECK(st == RCOLL_ERR_REMOTE, "peer close mid-message gave %d", st);
        CHECK(strstr(rcoll_err_get(), "closed by peer") != NULL, "message");
    } else {
        CHECK(st == RCOLL_ERR_PROTOCOL, "bad magic gave %d", st);
        CHECK(strstr(rcoll_err_get(), "malformed frame") != NULL, "message");
    }
out:
    if (fd >= 0)
        close(fd);
    pair_close(&p);
}

/* The receiver closes while a big send is in flight: the sender sees RCOLL_ERR_REMOTE. */
static void test_sender_sees_close(int nsocks)
{
    pair_t p;
    size_t n = 64 << 20;
    unsigned char *src = calloc(1, n);
    void *sreq = NULL, *none = NULL;
    setup(nsocks, 64 << 10);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (p.rc) {
        CHECK(T->isend(p.sc, src, n, 0, NULL, &sreq) == RCOLL_OK, "isend");
        int done;
        CHECK(T->test(sreq, &done, NULL) == RCOLL_OK && !done, "first test");
        T->close_recv(p.rc);
        p.rc = NULL;
        rcoll_status_t st = wait2(&sreq, &none, NULL);
        CHECK(st == RCOLL_ERR_REMOTE, "send to a closed peer gave %d", st);
        CHECK(strstr(rcoll_err_get(), "closed by peer") != NULL, "message");
        CHECK(T->isend(p.sc, src, 1, 0, NULL, &sreq) == RCOLL_ERR_REMOTE, "later isend");
    }
    pair_close(&p);
    free(src);
}

/* Closing comms with requests outstanding frees them (ASan checks for leaks). */
static void test_close_outstanding(int nsocks)
{
    pair_t p;
    size_t n = 8 << 20, cap = 100;
    unsigned char *src = calloc(1, n), rbuf[100];
    void *req, *dp = rbuf;
    setup(nsocks, 64 << 10);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (p.rc) {
        for (int i = 0; i < 4; i++)
            CHECK(T->isend(p.sc, src, n, 0, NULL, &req) == RCOLL_OK && req, "isend");
        int done;
        T->test(req, &done, NULL);
        for (int i = 0; i < 4; i++)
            CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &req) == RCOLL_OK && req, "irecv");
    }
    pair_close(&p);
    /* a connect left in progress is freed by fini */
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    CHECK(T->connect(0, p.handle, &p.sc) == RCOLL_OK, "connect");
    if (p.sc)
        T->close_send(p.sc);
    T->close_listen(p.lc);
    free(src);
}

static void test_reg_mr(void)
{
    pair_t p;
    char buf[16];
    void *mh = NULL;
    setup(1, 64 << 10);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (p.sc) {
        CHECK(T->reg_mr(p.sc, buf, sizeof(buf), RCOLL_PTR_CUDA, &mh) == RCOLL_ERR_UNSUPPORTED,
              "CUDA memory must be unsupported");
        CHECK(T->reg_mr(p.sc, buf, sizeof(buf), RCOLL_PTR_HOST, &mh) == RCOLL_OK && mh,
              "host reg_mr");
        CHECK(T->dereg_mr(p.sc, mh) == RCOLL_OK, "dereg_mr");
        void *req = (void *)1;
        CHECK(T->iflush(p.rc, 1, (void *[]){buf}, (int[]){16}, NULL, &req) == RCOLL_OK,
              "iflush");
    }
    pair_close(&p);
}

static void test_bad_args(void)
{
    pair_t p;
    char bad[RCOLL_TRANSPORT_HANDLE_BYTES], buf[8];
    void *sc = NULL, *req = (void *)1, *dp[RCOLL_TRANSPORT_MAX_RECVS + 1];
    size_t caps[RCOLL_TRANSPORT_MAX_RECVS + 1] = {0};
    rcoll_tcp_config_t cfg;
    setup(1, 64 << 10);
    memset(bad, 0x33, sizeof(bad));
    CHECK(T->connect(0, bad, &sc) == RCOLL_ERR_INVALID_ARG && !sc, "connect to a bad handle");
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (p.rc) {
        for (int i = 0; i <= RCOLL_TRANSPORT_MAX_RECVS; i++)
            dp[i] = buf;
        CHECK(T->irecv(p.rc, RCOLL_TRANSPORT_MAX_RECVS + 1, dp, caps, NULL, NULL, &req) ==
                  RCOLL_ERR_INVALID_ARG, "irecv with too many buffers");
        CHECK(T->irecv(p.rc, 0, dp, caps, NULL, NULL, &req) == RCOLL_ERR_INVALID_ARG,
              "irecv with no buffer");
        CHECK(T->isend(p.rc, buf, 1, 0, NULL, &req) == RCOLL_ERR_INVALID_ARG,
              "isend on a recv comm");
    }
    pair_close(&p);
    /* an interface that does not exist: the transport says why it cannot work */
    T->fini();
    rcoll_config_parse(T->config, &cfg);
    snprintf(cfg.netif.socket_ifname, sizeof(cfg.netif.socket_ifname), "=no_such_if0");
    CHECK(T->init(&cfg) == RCOLL_ERR_UNSUPPORTED, "init on a missing interface");
    CHECK(strstr(rcoll_err_get(), "no_such_if0") != NULL, "message names the filter");
    setup(1, 64 << 10);
}

/* The two ends in two threads, as the core uses them: many random sizes, some striped. */
static void test_threads(void)
{
    setup(3, 64 << 10);
    tp_case_threads(300);
}

/* A burst of connections with 16 sockets each, more sockets than the half-open cap, all
 * waiting on the backlog at once: every one is accepted, and each carries its own data. */
static void test_burst(void)
{
    setup(16, 64 << 10);
    tp_case_burst(RCOLL_TCP_MAX_HALF_OPEN / 16 + 2, 256 << 10);
}

/* Connecting to a listener that has gone fails (not hangs), naming the address. */
static void test_connect_refused(void)
{
    char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    void *lc = NULL, *sc = NULL;
    rcoll_status_t st = RCOLL_OK;
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    setup(2, 64 << 10);
    CHECK(T->listen(0, handle, &lc) == RCOLL_OK, "listen");
    if (lc)
        T->close_listen(lc);
    while (st == RCOLL_OK && !sc && rcoll_now_ns() < end)
        st = T->connect(0, handle, &sc);
    CHECK(st == RCOLL_ERR_REMOTE && !sc, "connect to a closed listener gave %d", st);
    if (sc)
        T->close_send(sc);
}

/* A handle whose first address is `first` (a listener that is gone, or one nothing answers)
 * and whose alternative is the real listener's: the connector tries the first, then the
 * other, and the connection carries data. */
static void alt_handle(const char *real, char *out, const rcoll_sockaddr_t *first)
{
    rcoll_tcp_handle_t h;
    memcpy(&h, real, sizeof(h));
    rcoll_sockaddr_t a = h.addr;
    h.nalt = 1;
    memset(&h.alt[0], 0, sizeof(h.alt[0]));
    h.alt[0].family = (uint16_t)a.sa.sa_family;
    h.alt[0].port = rcoll_net_addr_port(&a);
    memcpy(h.alt[0].ip, a.sa.sa_family == AF_INET ? (void *)&a.sin.sin_addr
                                                  : (void *)&a.sin6.sin6_addr,
           a.sa.sa_family == AF_INET ? 4 : 16);
    h.addr = *first;
    memset(out, 0, RCOLL_TRANSPORT_HANDLE_BYTES);
    memcpy(out, &h, sizeof(h));
}

/* connect (to handle) and accept (on p->lc) in turns until both ends exist; seconds taken. */
static double connect_through(pair_t *p, const char *handle, rcoll_status_t *st_p)
{
    uint64_t t0 = rcoll_now_ns(), end = t0 + DEADLINE_NS;
    rcoll_status_t st = RCOLL_OK;
    while (st == RCOLL_OK && (!p->sc || !p->rc) && rcoll_now_ns() < end) {
        if (!p->sc)
            st = T->connect(0, handle, &p->sc);
        if (st == RCOLL_OK && !p->rc)
            st = T->accept(p->lc, &p->rc);
    }
    *st_p = st;
    return (double)(rcoll_now_ns() - t0) / 1e9;
}

static void test_alternatives(void)
{
    setup(2, 64 << 10);
    /* a first address that refuses: a listener that was closed */
    char gone[RCOLL_TRANSPORT_HANDLE_BYTES], h2[RCOLL_TRANSPORT_HANDLE_BYTES];
    void *glc = NULL;
    CHECK(T->listen(0, gone, &glc) == RCOLL_OK, "listen (to be closed)");
    T->close_listen(glc);
    rcoll_tcp_handle_t g;
    memcpy(&g, gone, sizeof(g));
    pair_t p;
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    alt_handle(p.handle, h2, &g.addr);
    rcoll_status_t st;
    double t = connect_through(&p, h2, &st);
    printf("  first address refused: connected through the alternative in %.3f s\n", t);
    CHECK(st == RCOLL_OK && p.sc && p.rc && t < 1.0, "refused first address: %d after %.3f s",
          st, t);
    if (p.sc && p.rc)
        tp_transfer(&p, (1 << 20) + 3, (1 << 20) + 3, 0, 0, 7);
    pair_close(&p);

    /* a first address nothing answers: a listener whose accept queue is full drops every
     * new SYN (the connects stay in progress, as towards a host that is gone) */
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    rcoll_sockaddr_t dark;
    tp_silent_t quiet;
    int silent = tp_silent_listener(&dark, &quiet);
    CHECK(silent, "a silent listener (%d fillers)", quiet.nfill);
    alt_handle(p.handle, h2, &dark);
    t = connect_through(&p, h2, &st);
    printf("  first address silent: connected through the alternative in %.3f s\n", t);
    CHECK(st == RCOLL_OK && p.sc && p.rc && t > 1.9 && t < 3.0,
          "silent first address: %d after %.3f s (2 s per try)", st, t);
    tp_silent_close(&quiet);
    if (p.sc && p.rc)
        tp_transfer(&p, 5000, 5000, 0, 0, 8);
    pair_close(&p);

    /* every address refuses: an error naming each, at once */
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    alt_handle(p.handle, h2, &g.addr);
    T->close_listen(p.lc);
    p.lc = NULL;
    void *sc = NULL;
    uint64_t t0 = rcoll_now_ns();
    st = RCOLL_OK;
    while (st == RCOLL_OK && !sc && rcoll_now_ns() - t0 < DEADLINE_NS)
        st = T->connect(0, h2, &sc);
    t = (double)(rcoll_now_ns() - t0) / 1e9;
    const char *e = rcoll_err_get();
    printf("  every address refused after %.3f s: %s\n", t, e);
    CHECK(st != RCOLL_OK && !sc && t < 1.0 && strstr(e, "no address of the peer answered") &&
          strchr(e, ';'), "every address refused: %d after %.3f s: %s", st, t, e);
    if (sc)
        T->close_send(sc);
}

/* Failover: 600 messages of mixed sizes (0 B to 3 MiB, striped over nsocks), up to 8 in
 * flight each way, while a random socket of the connection is cut every few steps (the sender
 * takes it over with a new socket and the old one is abandoned with whatever its buffers
 * held): every message arrives whole, in order, byte for byte. */
static void test_failover_cuts(int nsocks)
{
    enum { N = 600, W = 8 };
    pair_t p;
    unsigned char *src[W], *dst[W], *want = malloc(3 << 20);
    void *sreq[W] = {0}, *rreq[W] = {0};
    size_t len[N];
    unsigned lcg = 12345u + (unsigned)nsocks;
    int sent = 0, recvd = 0, checked = 0, cuts = 0, bad = 0, step = 0;
    rcoll_status_t st = RCOLL_OK;

    setup_failover = RCOLL_TCP_FAILOVER_ON;
    setup(nsocks, 64 << 10);
    for (int i = 0; i < N; i++) {
        lcg = lcg * 1103515245u + 12345u;
        unsigned r = lcg >> 8;
        len[i] = i % 7 == 0 ? (size_t)(r % (3u << 20)) : i % 3 == 0 ? (size_t)(r % 300000u)
                                                                     : (size_t)(r % 3000u);
    }
    for (int k = 0; k < W; k++) {
        src[k] = malloc(3 << 20);
        dst[k] = malloc(3 << 20);
    }
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    uint64_t end = rcoll_now_ns() + 30000000000ull;
    while (p.rc && checked < N && st == RCOLL_OK && rcoll_now_ns() < end) {
        int k, done;
        if (sent < N && !sreq[k = sent % W]) {
            fill(src[k], len[sent], (unsigned)sent);
            st = T->isend(p.sc, src[k], len[sent], 7, NULL, &sreq[k]);
            sent += sreq[k] != NULL;
        }
        if (recvd < N && recvd < checked + W && !rreq[k = recvd % W]) {
            void *d = dst[k];
            size_t cap = 3 << 20;
            int tag = 7;
            st = st ? st : T->irecv(p.rc, 1, &d, &cap, &tag, NULL, &rreq[k]);
            recvd += rreq[k] != NULL;
        }
        for (k = 0; k < W && st == RCOLL_OK; k++)
            if (sreq[k] && (st = T->test(sreq[k], &done, NULL)) == RCOLL_OK && done)
                sreq[k] = NULL;
        if (st == RCOLL_OK && rreq[k = checked % W]) {
            size_t got = 0;
            if ((st = T->test(rreq[k], &done, &got)) == RCOLL_OK && done) {
                fill(want, len[checked], (unsigned)checked);
                bad += got != len[checked] || memcmp(dst[k], want, got) != 0;
                rreq[k] = NULL;
                checked++;
            }
        }
        lcg = lcg * 1103515245u + 12345u;
        if (st == RCOLL_OK && ++step % 5 == 0 && (lcg >> 16) % 2 == 0) {
            st = rcoll_tcp_debug_cut(p.sc, (int)((lcg >> 4) % (unsigned)nsocks));
            cuts++;
        }
    }
    CHECK(st == RCOLL_OK, "no error through the cuts (status %d)", st);
    CHECK(checked == N, "all %d messages arrived (%d)", N, checked);
    CHECK(bad == 0, "every message whole and in order (%d wrong)", bad);
    CHECK(cuts >= 20, "the connection was cut often (%d cuts)", cuts);
    pair_close(&p);
    for (int k = 0; k < W; k++) {
        free(src[k]);
        free(dst[k]);
    }
    free(want);
    setup_failover = -1;
}

/* Failover: a cut when the receiver has closed its end (its listener still there, and looked
 * at by the process: the take-over is turned away) or when nothing listens any more fails the
 * send in time; without failover a cut is refused. */
static void test_failover_gone(void)
{
    pair_t p;
    size_t n = 1 << 20; /* not copied at isend: it completes only when acknowledged */
    unsigned char *buf = calloc(1, n);
    void *req = NULL, *none = NULL;

    setup_failover = RCOLL_TCP_FAILOVER_ON;
    setup(2, 64 << 10);
    for (int closed_listener = 0; closed_listener < 2; closed_listener++) {
        CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
        if (!p.rc)
            continue;
        T->close_recv(p.rc);
        p.rc = NULL;
        if (closed_listener) {
            T->close_listen(p.lc);
            p.lc = NULL;
        }
        CHECK(rcoll_tcp_debug_cut(p.sc, 1) == RCOLL_OK, "cut");
        uint64_t t0 = rcoll_now_ns();
        rcoll_status_t st = isend_retry(p.sc, buf, n, 0, &req);
        for (int done = 0; st == RCOLL_OK && !done && rcoll_now_ns() - t0 < 10000000000ull;) {
            void *rc = NULL;
            st = T->test(req, &done, NULL);
            if (p.lc && T->accept(p.lc, &rc) == RCOLL_OK && rc)
                T->close_recv(rc);
        }
        (void)none;
        double secs = (double)(rcoll_now_ns() - t0) / 1e9;
        CHECK(st == RCOLL_ERR_REMOTE, "%s: the send fails as REMOTE (%d)",
              closed_listener ? "no listener" : "receiver closed", st);
        CHECK(strstr(rcoll_err_get(), "no address of the peer took it over") != NULL,
              "the error says the take-over failed");
        CHECK(secs < 5.0, "in time (%.2f s)", secs);
        pair_close(&p);
    }
    setup_failover = RCOLL_TCP_FAILOVER_OFF;
    setup(1, 64 << 10);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (p.sc)
        CHECK(rcoll_tcp_debug_cut(p.sc, 0) == RCOLL_ERR_UNSUPPORTED, "no failover: cut refused");
    pair_close(&p);
    free(buf);
    setup_failover = -1;
}

/* Failover: a sender that sends 2,000 small messages one at a time, each tested until it is
 * complete and never again (as the core does), while a receiver thread takes them: the copied
 * sends its user let go of hold the connection's requests until acknowledged, and isend must
 * retire them itself when they run out (nothing else tests that comm). */
typedef struct {
    void *rc;
    int n, bad;
} fo_rx_t;

static void *fo_receiver(void *arg)
{
    fo_rx_t *a = arg;
    uint32_t v = 0;
    for (int i = 0; i < a->n && !a->bad; i++) {
        void *req = NULL, *dp = &v;
        size_t cap = sizeof(v), got = 0;
        if (T->irecv(a->rc, 1, &dp, &cap, NULL, NULL, &req) != RCOLL_OK || !req ||
            wait1(req, &got, 10000000000ull) != RCOLL_OK || got != sizeof(v) || v != (uint32_t)i)
            a->bad = i + 1;
    }
    return NULL;
}

static void test_failover_let_go(void)
{
    pair_t p;
    pthread_t th;
    enum { N = 2000 };
    int sent = 0;

    setup_failover = RCOLL_TCP_FAILOVER_ON;
    setup(2, 64 << 10);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (p.rc) {
        fo_rx_t a = {p.rc, N, 0};
        CHECK(pthread_create(&th, NULL, fo_receiver, &a) == 0, "pthread_create");
        for (uint32_t i = 0; i < N; i++) {
            void *req = NULL;
            if (isend_retry(p.sc, &i, sizeof(i), 0, &req) != RCOLL_OK ||
                wait1(req, NULL, 10000000000ull) != RCOLL_OK)
                break;
            sent++;
        }
        pthread_join(th, NULL);
        CHECK(sent == N, "every send was taken and completed (%d of %d)", sent, N);
        CHECK(a.bad == 0, "every message arrived in order (first wrong: %d)", a.bad - 1);
    }
    pair_close(&p);
    setup_failover = -1;
}

static void props(void) { test_props(); }
static void sizes1(void) { test_sizes(1); }
static void sizes4(void) { test_sizes(4); }
static size_t tcp_pipe_len(int i)
{
    return (i % 5 == 0) ? (size_t)(200 << 10) + (size_t)i : (size_t)(i * 37);
}

/* Many messages in flight, mixed sizes, tested in reverse order; the queue bound. */
static void pipeline(int nsocks)
{
    setup(nsocks, 32 << 10);
    tp_case_pipeline(RCOLL_TCP_MAX_REQS, tcp_pipe_len, RCOLL_TCP_MAX_REQS, 1);
}

static void pipe1(void) { pipeline(1); }
static void pipe4(void) { pipeline(4); }
static void grouped1(void) { setup(1, 64 << 10); tp_case_grouped(); }
static void grouped4(void) { setup(4, 64 << 10); tp_case_grouped(); }
static void garbage1(void) { test_garbage_client(1); }
static void garbage4(void) { test_garbage_client(4); }
static void peer_close(void) { test_raw_peer("close"); }
static void bad_magic(void) { test_raw_peer("badmagic"); }
static void sender_close1(void) { test_sender_sees_close(1); }
static void sender_close4(void) { test_sender_sees_close(4); }
static void close_out1(void) { test_close_outstanding(1); }
static void close_out4(void) { test_close_outstanding(4); }
static void fo_cuts1(void) { test_failover_cuts(1); }
static void fo_cuts4(void) { test_failover_cuts(4); }
/* The shared cases with failover on (acknowledged sends, take-over routing in accept); not
 * the grouped case, which waits for sends before testing the receive: with failover a send
 * completes when the receiver has read it. */
static void fo_cases(void)
{
    setup_failover = RCOLL_TCP_FAILOVER_ON;
    sizes1();
    sizes4();
    pipe1();
    pipe4();
    setup_failover = -1;
}

int main(void)
{
    check_set_note(rcoll_err_get);
    setup(1, 64 << 10);
    check_case("props", props);
    check_case("a handle's alternative addresses", test_alternatives);
    check_case("sizes nsocks=1", sizes1);
    check_case("sizes nsocks=4 (striped)", sizes4);
    check_case("pipeline nsocks=1", pipe1);
    check_case("pipeline nsocks=4", pipe4);
    check_case("grouped irecv nsocks=1", grouped1);
    check_case("grouped irecv nsocks=4", grouped4);
    check_case("tag mismatch -> INVALID_USAGE", test_tag_mismatch);
    check_case("recv buffer too small -> INVALID_USAGE", test_too_small);
    check_case("garbage client dropped nsocks=1", garbage1);
    check_case("garbage client dropped nsocks=4", garbage4);
    check_case("wrong nonce dropped", test_wrong_nonce);
    check_case("half-open cap", test_half_open_cap);
    check_case("burst of 16-socket connections", test_burst);
    check_case("peer closes mid-message -> REMOTE", peer_close);
    check_case("bad frame magic -> PROTOCOL", bad_magic);
    check_case("sender sees receiver close nsocks=1", sender_close1);
    check_case("sender sees receiver close nsocks=4", sender_close4);
    check_case("close with outstanding requests nsocks=1", close_out1);
    check_case("close with outstanding requests nsocks=4", close_out4);
    check_case("reg_mr / iflush", test_reg_mr);
    check_case("bad arguments", test_bad_args);
    check_case("connect to a closed listener", test_connect_refused);
    check_case("two threads, 300 messages, nsocks=3", test_threads);
    check_case("failover on: sizes, pipeline", fo_cases);
    check_case("failover: 600 messages through cuts nsocks=1", fo_cuts1);
    check_case("failover: 600 messages through cuts nsocks=4", fo_cuts4);
    check_case("failover: the peer gone", test_failover_gone);
    check_case("failover: 2,000 sends let go of at once", test_failover_let_go);
    T->fini();
    return check_summary();
}
