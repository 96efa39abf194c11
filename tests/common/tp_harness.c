/*
 * tp_harness.c - shared pieces of the transport conformance suites (tp_harness.h).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <unistd.h>

#include "tp_harness.h"
#include "util/net.h"
#include "util/time.h"

int pair_listen_dev, pair_connect_dev;

rcoll_status_t pair_open(pair_t *p)
{
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    rcoll_status_t st;
    memset(p, 0, sizeof(*p));
    st = T->listen(pair_listen_dev, p->handle, &p->lc);
    if (st != RCOLL_OK)
        return st;
    while (!p->sc || !p->rc) {
        char copy[RCOLL_TRANSPORT_HANDLE_BYTES]; /* a fresh copy each call: keyed by contents */
        memcpy(copy, p->handle, sizeof(copy));
        if (!p->sc && (st = T->connect(pair_connect_dev, copy, &p->sc)) != RCOLL_OK)
            return st;
        if (!p->rc && (st = T->accept(p->lc, &p->rc)) != RCOLL_OK)
            return st;
        if (rcoll_now_ns() > end)
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "pair_open: no connection in 10 s");
    }
    return RCOLL_OK;
}

void pair_close(pair_t *p)
{
    if (p->sc)
        T->close_send(p->sc);
    if (p->rc)
        T->close_recv(p->rc);
    if (p->lc)
        T->close_listen(p->lc);
    memset(p, 0, sizeof(*p));
}

/* Test *r once: clears it when done or failed. */
static rcoll_status_t test_once(void **r, size_t *sizes)
{
    int done = 0;
    rcoll_status_t st = T->test(*r, &done, sizes);
    if (st != RCOLL_OK || done)
        *r = NULL;
    return st;
}

rcoll_status_t wait2(void **a, void **b, size_t *sizes_b)
{
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while (*a || *b) {
        rcoll_status_t st;
        if (*a && (st = test_once(a, NULL)) != RCOLL_OK)
            return st;
        if (*b && (st = test_once(b, sizes_b)) != RCOLL_OK)
            return st;
        if (rcoll_now_ns() > end)
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "wait2: not done in 10 s");
    }
    return RCOLL_OK;
}

rcoll_status_t wait1(void *req, size_t *sizes, uint64_t ns)
{
    uint64_t end = rcoll_now_ns() + ns;
    int done = 0;
    while (!done) {
        rcoll_status_t st = T->test(req, &done, sizes);
        if (st != RCOLL_OK)
            return st;
        if (!done && rcoll_now_ns() > end)
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "wait1: not done in time");
        if (!done)
            sched_yield(); /* the peer may share this core (2 cores, other jobs) */
    }
    return RCOLL_OK;
}

rcoll_status_t accept_wait(void *lc, void **comm, double seconds)
{
    uint64_t end = rcoll_now_ns() + (uint64_t)(seconds * 1e9);
    *comm = NULL;
    while (!*comm && rcoll_now_ns() < end) {
        rcoll_status_t st = T->accept(lc, comm);
        if (st != RCOLL_OK)
            return st;
        if (!*comm)
            sched_yield();
    }
    return RCOLL_OK;
}

int accept_wait_ok(void *lc, void **comm)
{
    return accept_wait(lc, comm, 10) == RCOLL_OK && *comm != NULL;
}

int raw_sees_close(int fd, void *lc)
{
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    char b[16];
    while (rcoll_now_ns() < end) {
        void *rc = NULL;
        T->accept(lc, &rc);
        if (rc) {
            T->close_recv(rc);
            return 0; /* accepted: wrong */
        }
        ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
    }
    return 0;
}

void fill(unsigned char *buf, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
}

int guard_ok(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

rcoll_status_t isend_retry(void *sc, void *buf, size_t n, int tag, void **req)
{
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    rcoll_status_t st = RCOLL_OK;
    *req = NULL;
    while (!*req && st == RCOLL_OK && rcoll_now_ns() < end)
        st = T->isend(sc, buf, n, tag, NULL, req);
    if (st == RCOLL_OK && !*req) return rcoll_err_set(RCOLL_ERR_TIMEOUT, "isend: no request");
    return st;
}

void tp_case_grouped(void)
{
    pair_t p;
    size_t len[3] = {10, 0, 300000}, cap[3] = {20, 8, 300000}, got[3] = {0, 1, 0};
    unsigned char *src[3], *dst[3];
    void *sreq[3] = {0}, *rreq = NULL, *dp[3];
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc)
        return;
    for (int i = 0; i < 3; i++) {
        src[i] = malloc(len[i] + 1);
        dst[i] = malloc(cap[i] + 1);
        dp[i] = dst[i];
        fill(src[i], len[i], 7u * (unsigned)i);
    }
    CHECK(T->irecv(p.rc, 3, dp, cap, (int[]){-1, 4, -1}, NULL, &rreq) == RCOLL_OK && rreq,
          "grouped irecv");
    for (int i = 0; i < 3; i++)
        CHECK(isend_retry(p.sc, src[i], len[i], i == 1 ? 4 : -1, &sreq[i]) == RCOLL_OK,
              "isend %d", i);
    void *none = NULL;
    CHECK(wait2(&sreq[0], &none, NULL) == RCOLL_OK, "send 0");
    CHECK(wait2(&sreq[1], &none, NULL) == RCOLL_OK, "send 1");
    CHECK(wait2(&sreq[2], &rreq, got) == RCOLL_OK, "send 2 + grouped recv");
    for (int i = 0; i < 3; i++) {
        CHECK(got[i] == len[i], "buffer %d got %zu, want %zu", i, got[i], len[i]);
        CHECK(memcmp(src[i], dst[i], len[i]) == 0, "buffer %d differs", i);
        free(src[i]);
        free(dst[i]);
    }
    pair_close(&p);
}

/* Post what the transport takes now: sends in order, receives up to window ahead. */
static void pipeline_post(pair_t *p, int n, size_t *len, unsigned char **src,
                          unsigned char **dst, void **sreq, void **rreq, int window,
                          int *ns, int *nr)
{
    while (*ns < n && !check_case_failed()) {
        CHECK(T->isend(p->sc, src[*ns], len[*ns], *ns, NULL, &sreq[*ns]) == RCOLL_OK,
              "isend %d", *ns);
        if (!sreq[*ns]) break; /* no room or no advertised buffer yet */
        (*ns)++;
    }
    while (*nr < n && *nr < window && !check_case_failed()) {
        void *dp = dst[*nr];
        CHECK(T->irecv(p->rc, 1, &dp, &len[*nr], NULL, NULL, &rreq[*nr]) == RCOLL_OK,
              "irecv %d", *nr);
        if (!rreq[*nr]) break;
        (*nr)++;
    }
}

void tp_case_pipeline(int n, size_t (*len_of)(int), int window, int bound)
{
    pair_t p;
    size_t *len = calloc((size_t)n, sizeof(size_t));
    unsigned char **src = calloc((size_t)n, sizeof(void *));
    unsigned char **dst = calloc((size_t)n, sizeof(void *));
    void **sreq = calloc((size_t)n, sizeof(void *)), **rreq = calloc((size_t)n, sizeof(void *));
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    for (int i = 0; i < n; i++) {
        len[i] = len_of(i);
        src[i] = malloc(len[i] + 1);
        dst[i] = malloc(len[i] + 1);
        fill(src[i], len[i], 100u + (unsigned)i);
    }
    int ns = 0, nr = 0, left = 2 * n, rdone = 0;
    if (p.rc) pipeline_post(&p, n, len, src, dst, sreq, rreq, window, &ns, &nr);
    if (p.rc && bound) { /* everything was taken at once; one more must be refused */
        void *extra = (void *)1, *dp0 = dst[0];
        CHECK(ns == n && nr == n, "only %d sends / %d receives taken of %d", ns, nr, n);
        CHECK(T->isend(p.sc, src[0], 1, 0, NULL, &extra) == RCOLL_OK && extra == NULL,
              "isend beyond %d outstanding must give a NULL request", n);
        extra = (void *)1;
        if (bound > 1)
            CHECK(T->irecv(p.rc, 1, &dp0, &len[0], NULL, NULL, &extra) == RCOLL_OK && !extra,
                  "irecv beyond %d outstanding must give a NULL request", n);
    }
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while (p.rc && left > 0 && rcoll_now_ns() < end && !check_case_failed()) {
        for (int i = n - 1; i >= 0; i--) { /* reverse order: completion must not need order */
            int done;
            if (sreq[i]) {
                CHECK(T->test(sreq[i], &done, NULL) == RCOLL_OK, "test send %d", i);
                if (done) sreq[i] = NULL, left--;
            }
            if (rreq[i]) {
                size_t got = 0;
                CHECK(T->test(rreq[i], &done, &got) == RCOLL_OK, "test recv %d", i);
                if (done) {
                    CHECK(got == len[i], "recv %d size %zu != %zu", i, got, len[i]);
                    rreq[i] = NULL, left--, rdone++;
                }
            }
        }
        pipeline_post(&p, n, len, src, dst, sreq, rreq, rdone + window, &ns, &nr);
    }
    CHECK(!p.rc || left == 0, "%d requests not complete", left);
    for (int i = 0; i < n; i++) {
        CHECK(left != 0 || memcmp(src[i], dst[i], len[i]) == 0, "message %d differs", i);
        free(src[i]);
        free(dst[i]);
    }
    pair_close(&p); /* frees whatever is still outstanding after a failure */
    free(len), free(src), free(dst), free(sreq), free(rreq);
}

void tp_transfer(pair_t *p, size_t n, size_t cap, size_t soff, size_t doff, unsigned seed)
{
    unsigned char *sbase = malloc(n + soff + 1), *dbase = malloc(cap + GUARD + doff);
    unsigned char *src = sbase + soff, *dst = dbase + doff;
    void *sreq = NULL, *rreq = NULL, *dp = dst;
    size_t got[1] = {~(size_t)0};
    fill(src, n, seed);
    memset(dbase, 0xA5, cap + GUARD + doff);
    /* the receive first: receiver-driven transports take a send only once it is advertised */
    CHECK(T->irecv(p->rc, 1, &dp, &cap, (int[]){7}, NULL, &rreq) == RCOLL_OK && rreq,
          "irecv %zu", n);
    CHECK(isend_retry(p->sc, src, n, 7, &sreq) == RCOLL_OK, "isend %zu", n);
    CHECK(wait2(&sreq, &rreq, got) == RCOLL_OK, "transfer of %zu bytes", n);
    CHECK(got[0] == n, "size %zu reported %zu", n, got[0]);
    CHECK(memcmp(src, dst, n) == 0, "data of %zu bytes differs", n);
    CHECK(guard_ok(dst + n, cap + GUARD - n, 0xA5), "bytes past %zu were written", n);
    CHECK(guard_ok(dbase, doff, 0xA5), "bytes before %zu were written", n);
    free(sbase);
    free(dbase);
}

/* The two ends in two threads, as the core uses them: nmsgs messages of random sizes, most
 * under 3000 bytes, every 7th up to 3 MiB, THR_INFLIGHT in flight each way. */
enum { THR_INFLIGHT = 8, THR_MAX = 3 << 20 };

typedef struct {
    void *sc;
    int nmsgs;
} thr_arg_t;

static size_t thr_len(int i)
{
    return (size_t)((i * 2654435761u) % (i % 7 == 0 ? THR_MAX : 3000));
}

/* Test req until done, failed or past end (yielding between tests); 1 when it went wrong. */
static int thr_wait(void *req, size_t *got, uint64_t end)
{
    int done = 0;
    while (!done) {
        if (T->test(req, &done, got) != RCOLL_OK || rcoll_now_ns() > end) return 1;
        if (!done) sched_yield();
    }
    return 0;
}

static void *thr_sender(void *arg)
{
    const thr_arg_t *a = arg;
    void *req[THR_INFLIGHT] = {0};
    unsigned char *buf[THR_INFLIGHT];
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    intptr_t bad = 0;
    for (int k = 0; k < THR_INFLIGHT; k++)
        buf[k] = malloc(THR_MAX);
    for (int i = 0; i < a->nmsgs + THR_INFLIGHT && !bad; i++) {
        int k = i % THR_INFLIGHT;
        if (req[k]) bad = thr_wait(req[k], NULL, end);
        req[k] = NULL;
        if (i < a->nmsgs && !bad) {
            fill(buf[k], thr_len(i), (unsigned)i);
            bad = T->isend(a->sc, buf[k], thr_len(i), i, NULL, &req[k]) != RCOLL_OK || !req[k];
        }
    }
    for (int k = 0; k < THR_INFLIGHT; k++)
        free(buf[k]);
    return (void *)bad;
}

void tp_case_threads(int nmsgs)
{
    pair_t p;
    pthread_t th;
    void *ret = (void *)1, *req[THR_INFLIGHT] = {0};
    unsigned char *buf[THR_INFLIGHT], *want = malloc(THR_MAX);
    int idx[THR_INFLIGHT], bad = 0;
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc) {
        free(want);
        return;
    }
    thr_arg_t arg = {p.sc, nmsgs};
    CHECK(pthread_create(&th, NULL, thr_sender, &arg) == 0, "pthread_create");
    for (int k = 0; k < THR_INFLIGHT; k++)
        buf[k] = malloc(THR_MAX);
    for (int i = 0; i < nmsgs + THR_INFLIGHT && !bad; i++) {
        int k = i % THR_INFLIGHT;
        size_t got = 0, cap = THR_MAX;
        if (req[k]) {
            bad = thr_wait(req[k], &got, end);
            if (!bad) {
                size_t n = thr_len(idx[k]);
                fill(want, n, (unsigned)idx[k]);
                CHECK(got == n && memcmp(buf[k], want, n) == 0, "threaded message %d", idx[k]);
            }
        }
        req[k] = NULL;
        if (i < nmsgs && !bad) {
            void *dp = buf[k];
            idx[k] = i;
            bad = T->irecv(p.rc, 1, &dp, &cap, (int[]){i}, NULL, &req[k]) != RCOLL_OK;
        }
    }
    CHECK(!bad, "receiver failed or timed out");
    pthread_join(th, &ret);
    CHECK(ret == NULL, "sender failed or timed out");
    for (int k = 0; k < THR_INFLIGHT; k++)
        free(buf[k]);
    free(want);
    pair_close(&p);
}

/* nc connections made before any is accepted (they finish on the backlog), then one
 * message of len bytes on each, all in flight at once; each must arrive on its own connection. */
void tp_case_burst(int nc, size_t len)
{
    char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    void *lc = NULL, **sc = calloc((size_t)nc, sizeof(void *)),
         **rc = calloc((size_t)nc, sizeof(void *)), **sreq = calloc((size_t)nc, sizeof(void *)),
         **rreq = calloc((size_t)nc, sizeof(void *));
    unsigned char **src = calloc((size_t)nc, sizeof(*src)),
                  **dst = calloc((size_t)nc, sizeof(*dst)), *want = malloc(len);
    int *seen = calloc((size_t)nc, sizeof(int)), nacc = 0, left = 0;
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    CHECK(T->listen(0, handle, &lc) == RCOLL_OK, "listen");
    for (int k = 0; k < nc && lc; k++) /* connects finish on the backlog, before any accept */
        while (!sc[k] && rcoll_now_ns() < end)
            if (T->connect(0, handle, &sc[k]) != RCOLL_OK)
                break;
    while (lc && nacc < nc && rcoll_now_ns() < end) {
        CHECK(T->accept(lc, &rc[nacc]) == RCOLL_OK, "accept");
        if (rc[nacc])
            nacc++;
    }
    CHECK(nacc == nc, "accepted %d of %d connections", nacc, nc);
    for (int k = 0; k < nc; k++) {
        size_t cap = len;
        void *dp;
        src[k] = malloc(len);
        dst[k] = dp = malloc(len);
        fill(src[k], len, 1000u + (unsigned)k);
        src[k][0] = (unsigned char)k; /* which connection it came from */
        if (nacc == nc) {
            CHECK(T->isend(sc[k], src[k], len, -1, NULL, &sreq[k]) == RCOLL_OK, "isend");
            CHECK(T->irecv(rc[k], 1, &dp, &cap, NULL, NULL, &rreq[k]) == RCOLL_OK, "irecv");
            left += 2;
        }
    }
    while (left > 0 && rcoll_now_ns() < end && !check_case_failed())
        for (int k = 0; k < nc; k++) {
            int done = 0;
            if (sreq[k] && T->test(sreq[k], &done, NULL) == RCOLL_OK && done)
                sreq[k] = NULL, left--;
            if (rreq[k] && T->test(rreq[k], &done, NULL) == RCOLL_OK && done)
                rreq[k] = NULL, left--;
        }
    CHECK(left == 0, "%d requests not done", left);
    for (int j = 0; j < nc; j++) {
        int k = dst[j][0];
        if (left == 0 && k < nc && !seen[k]) {
            seen[k] = 1;
            fill(want, len, 1000u + (unsigned)k);
            want[0] = (unsigned char)k;
            CHECK(memcmp(dst[j], want, len) == 0, "data of connection %d", k);
        } else {
            CHECK(left != 0, "connection %d delivered twice or garbage", k);
        }
        free(src[j]);
        free(dst[j]);
        if (sc[j])
            T->close_send(sc[j]);
        if (rc[j])
            T->close_recv(rc[j]);
    }
    if (lc)
        T->close_listen(lc);
    free(want);
    free(sc);
    free(rc);
    free(sreq);
    free(rreq);
    free(src);
    free(dst);
    free(seen);
}

/* A message tagged 7 into a receive that expects tag 5: the pair fails with INVALID_USAGE
 * (the two sides disagree about the message) naming the tag, the receive queued behind fails
 * too, and the comm refuses new receives.  The tag is checked before the size: a message
 * that is also too long still names the tag. */
void tp_case_tag_mismatch(void)
{
    pair_t p;
    char sbuf[32] = "hello", rbuf[32];
    size_t cap = sizeof(rbuf);
    void *sreq = NULL, *rreq = NULL, *rreq2 = NULL, *dp = rbuf;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc)
        return;
    size_t small = 4;
    CHECK(T->isend(p.sc, sbuf, 6, 7, NULL, &sreq) == RCOLL_OK, "isend");
    CHECK(T->irecv(p.rc, 1, &dp, &small, (int[]){5}, NULL, &rreq) == RCOLL_OK, "irecv");
    CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &rreq2) == RCOLL_OK, "irecv 2");
    rcoll_status_t st = wait2(&sreq, &rreq, NULL);
    CHECK(st == RCOLL_ERR_INVALID_USAGE, "tag mismatch gave %d", st);
    CHECK(strstr(rcoll_err_get(), "tag") != NULL, "message names the tag");
    int done = 0;
    if (rreq2) /* the outstanding request fails the same way */
        CHECK(T->test(rreq2, &done, NULL) == RCOLL_ERR_INVALID_USAGE, "outstanding request");
    CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &rreq2) == RCOLL_ERR_INVALID_USAGE,
          "later irecv on a failed comm");
    pair_close(&p);
}

void tp_connect_after_bad(pair_t *p, const char *after)
{
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while ((!p->sc || !p->rc) && rcoll_now_ns() < end) {
        if (!p->sc)
            CHECK(T->connect(0, p->handle, &p->sc) == RCOLL_OK, "connect after %s", after);
        if (!p->rc)
            CHECK(T->accept(p->lc, &p->rc) == RCOLL_OK, "accept after %s", after);
    }
    CHECK(p->sc && p->rc, "valid connect after %s", after);
    if (p->sc && p->rc) {
        char s[4] = "abc", r[4] = "";
        size_t cap = 4;
        void *sreq = NULL, *rreq = NULL, *dp = r;
        T->isend(p->sc, s, 4, 0, NULL, &sreq);
        T->irecv(p->rc, 1, &dp, &cap, NULL, NULL, &rreq);
        CHECK(wait2(&sreq, &rreq, NULL) == RCOLL_OK && !strcmp(r, "abc"), "data after %s", after);
    }
}

int tp_silent_listener(void *addr, tp_silent_t *s)
{
    rcoll_sockaddr_t *a = addr;
    memset(a, 0, sizeof(*a));
    a->sin.sin_family = AF_INET;
    a->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->lfd = -1;
    s->nfill = 0;
    int silent = 0;
    if (rcoll_net_listen(a, 0, 0, &s->lfd) != RCOLL_OK) return 0;
    while (s->nfill < 8 && !silent) { /* fill the queue until a connect hangs */
        if (rcoll_net_connect_start(a, &s->fillers[s->nfill]) != RCOLL_OK) break;
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        silent = rcoll_net_connect_check(s->fillers[s->nfill++]) == RCOLL_INPROGRESS;
    }
    return silent;
}

void tp_silent_close(tp_silent_t *s)
{
    for (int i = 0; i < s->nfill; i++) close(s->fillers[i]);
    if (s->lfd >= 0) close(s->lfd);
    s->nfill = 0;
    s->lfd = -1;
}
