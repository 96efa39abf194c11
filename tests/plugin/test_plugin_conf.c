/*
 * test_plugin_conf.c - libnccl-net-rcoll.so driven the way NCCL's proxy drives a net plugin,
 * once per exported version (v8..v12).  Two processes (fork), each with its own dlopen and
 * init, exchange listen handles over a socketpair and connect/accept until both comms exist.
 * Then they register memory and move 0 B..8 MiB in both directions (odd sizes, receive
 * buffers larger than the message, the reported sizes checked), keep 32 sends and 32
 * receives outstanding (matched in order, right data), check grouped receives against
 * maxRecvs and iflush on host memory (with RCOLL_IB_GDR=peermem over verbs: CUDA-typed
 * memory, untouchable by the host, sent, received and flushed), and close in NCCL's order
 * (deregMr, closeSend / closeRecv, closeListen).  Misuse: a receive smaller than its message
 * fails with ncclInvalidUsage, a peer that dies (SIGKILL) fails pending and new receives and sends
 * with ncclRemoteError within a bounded time; every such error reaches NCCL's logger at
 * WARN, subsystem NET.  Every wait has a deadline and the parent kills ranks that outlive
 * theirs, so a hang fails the test instead of hanging it.
 *
 * Usage: test_plugin_conf PATH/libnccl-net-rcoll.so ("none" when it was not built: 77).
 * RCOLL_NET defaults to tcp (development machines have no RDMA device); PLUGIN_TEST_VERBOSE=1
 * prints everything the plugin logs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "transport/nccl_net.h"

#define WAIT_S 20.0        /* one wait inside a rank */
#define RUN_S 110.0        /* both ranks of one version, end to end (x5 < meson's 600 s) */
#define DEATH_S 10.0       /* an error must follow a peer's death within this */
#define MAX_MSG (8u << 20) /* largest message of the size sweep */
#define SLACK 4103         /* extra bytes of the larger receive buffers */
#define NOUT 32            /* outstanding requests NCCL needs per comm */
#define OUT_MAX (64u << 10)
#define MAXR 8             /* sizes one request can report */
#define TIMED_OUT (-1)     /* a wait ran past its deadline */

/* ---------------------------------------------------------------------------------------------
 * The plugin under test, one version at a time (what NCCL's per-version adaptors do)
 * ------------------------------------------------------------------------------------------ */

static const char *so_path;
static int V;     /* version under test */
static int R;     /* this rank: 0 or 1 */
static int ctl;   /* socket to the other rank */
static void *lib;
static const ncclNet_v8_t *n8;
static const ncclNet_v9_t *n9;
static const ncclNet_v10_t *n10;
static const ncclNet_v11_t *n11;
static const ncclNet_v12_t *n12;
static ncclNet_v11_t n12_as_v11; /* v12's table, called as v11's except getProperties */
static void *ctx11; /* v11's (v12's) context from init */
_Static_assert(sizeof(ncclNet_v11_t) == sizeof(ncclNet_v12_t), "v12 keeps v11's slots");
static int verbose;

/* What the logger saw. */
static struct {
    int warn_net;          /* WARN lines with NCCL_NET */
    int warn_other;        /* WARN lines without it */
    int rcoll_info;        /* rcoll's own INFO lines (through the log sink) */
    int tcp_chosen;        /* the plugin said it runs over tcp */
    char last_warn[1024];
} lg;

static void t_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                     const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (level == NCCL_LOG_WARN) {
        if (flags & NCCL_NET) {
            lg.warn_net++;
            snprintf(lg.last_warn, sizeof(lg.last_warn), "%s", msg);
        } else {
            lg.warn_other++;
        }
    }
    if (level == NCCL_LOG_INFO && strstr(msg, "over rcoll's tcp transport")) lg.tcp_chosen = 1;
    if (level == NCCL_LOG_INFO && strstr(msg, "tcp: device")) lg.rcoll_info++;
    if (verbose)
        fprintf(stderr, "[v%d rank %d] %s:%d level %d flags 0x%lx: %s\n", V, R, file, line,
                (int)level, flags, msg);
}

/* dlopen the plugin and find version v's table; 0 on success. */
static int t_load(int v)
{
    char sym[32];
    lib = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL, "dlopen %s: %s", so_path, dlerror());
    if (!lib) return -1;
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    void *t = dlsym(lib, sym);
    CHECK(t != NULL, "dlsym %s: %s", sym, dlerror());
    n8 = v == 8 ? t : NULL;
    n9 = v == 9 ? t : NULL;
    n10 = v == 10 ? t : NULL;
    n11 = v == 11 ? t : NULL;
    n12 = v == 12 ? t : NULL;
    if (n12) { /* every member but getProperties/makeVDevice has v11's type */
        memcpy(&n12_as_v11, n12, sizeof(n12_as_v11));
        n11 = &n12_as_v11;
    }
    return t ? 0 : -1;
}

static ncclResult_t t_init(void)
{
    ncclNetCommConfig_v11_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
    switch (V) {
    case 8: return n8->init(t_logger);
    case 9: return n9->init(t_logger);
    case 10: return n10->init(t_logger, NULL);
    default: return n11->init(&ctx11, 0x5eed0000ull + (uint64_t)R, &cfg, t_logger, NULL);
    }
}

static ncclResult_t t_finalize(void) { return V >= 11 ? n11->finalize(ctx11) : ncclSuccess; }

static ncclResult_t t_devices(int *n)
{
    return V == 8 ? n8->devices(n) : V == 9 ? n9->devices(n) : V == 10 ? n10->devices(n)
                                                                        : n11->devices(n);
}

/* Properties of every version in one shape (v8 lacks the v9+ part, v8-v10 maxMulti). */
typedef struct {
    ncclNetProperties_v11_t p;
    int has_v9, has_v11, has_v12;
    int rail, plane, v12_ndevs; /* v12 only */
} tprops_t;

static ncclResult_t t_props(int dev, tprops_t *out)
{
    ncclResult_t res;
    memset(out, 0, sizeof(*out));
    if (V == 8) {
        ncclNetProperties_v8_t p;
        memset(&p, 0xab, sizeof(p));
        res = n8->getProperties(dev, &p);
        out->p.name = p.name, out->p.pciPath = p.pciPath, out->p.guid = p.guid;
        out->p.ptrSupport = p.ptrSupport, out->p.regIsGlobal = p.regIsGlobal;
        out->p.speed = p.speed, out->p.port = p.port, out->p.latency = p.latency;
        out->p.maxComms = p.maxComms, out->p.maxRecvs = p.maxRecvs;
        out->p.netDeviceType = p.netDeviceType, out->p.netDeviceVersion = p.netDeviceVersion;
        return res;
    }
    if (V == 9 || V == 10) {
        ncclNetProperties_v9_t p;
        memset(&p, 0xab, sizeof(p));
        res = V == 9 ? n9->getProperties(dev, &p) : n10->getProperties(dev, &p);
        memcpy(&out->p, &p, sizeof(p)); /* v11 extends v9's layout at its end */
        out->has_v9 = 1;
        return res;
    }
    if (V == 12) {
        ncclNetProperties_v12_t p;
        memset(&p, 0xab, sizeof(p));
        res = n12->getProperties(dev, &p);
        memcpy(&out->p, &p, offsetof(ncclNetProperties_v12_t, vProps)); /* v9's first part */
        out->p.vProps.ndevs = p.vProps.ndevs;
        out->p.vProps.devs[0] = p.vProps.devs[0];
        out->p.maxP2pBytes = p.maxP2pBytes;
        out->p.maxCollBytes = p.maxCollBytes;
        out->p.maxMultiRequestSize = p.maxMultiRequestSize;
        out->rail = p.railId;
        out->plane = p.planeId;
        out->v12_ndevs = p.vProps.ndevs;
        out->has_v9 = out->has_v11 = out->has_v12 = 1;
        return res;
    }
    memset(&out->p, 0xab, sizeof(out->p));
    res = n11->getProperties(dev, &out->p);
    out->has_v9 = out->has_v11 = 1;
    return res;
}

static ncclResult_t t_listen(int dev, void *handle, void **lc)
{
    switch (V) {
    case 8: return n8->listen(dev, handle, lc);
    case 9: return n9->listen(dev, handle, lc);
    case 10: return n10->listen(dev, handle, lc);
    default: return n11->listen(ctx11, dev, handle, lc);
    }
}

static ncclResult_t t_connect(int dev, void *handle, void **sc)
{
    ncclNetDeviceHandle_t *dh = NULL;
    ncclNetCommConfig_v10_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
    switch (V) {
    case 8: return n8->connect(dev, handle, sc, &dh);
    case 9: return n9->connect(dev, handle, sc, &dh);
    case 10: return n10->connect(dev, &cfg, handle, sc, &dh);
    default: return n11->connect(ctx11, dev, handle, sc, &dh);
    }
}

static ncclResult_t t_accept(void *lc, void **rc)
{
    ncclNetDeviceHandle_t *dh = NULL;
    switch (V) {
    case 8: return n8->accept(lc, rc, &dh);
    case 9: return n9->accept(lc, rc, &dh);
    case 10: return n10->accept(lc, rc, &dh);
    default: return n11->accept(lc, rc, &dh);
    }
}

static ncclResult_t t_reg_type(void *comm, void *data, size_t size, int type, void **mh)
{
    switch (V) {
    case 8: return n8->regMr(comm, data, size, type, mh);
    case 9: return n9->regMr(comm, data, size, type, mh);
    case 10: return n10->regMr(comm, data, size, type, mh);
    default: return n11->regMr(comm, data, size, type, mh);
    }
}

static ncclResult_t t_reg(void *comm, void *data, size_t size, void **mh)
{
    return t_reg_type(comm, data, size, NCCL_PTR_HOST, mh);
}

static ncclResult_t t_dereg(void *comm, void *mh)
{
    return V == 8 ? n8->deregMr(comm, mh) : V == 9 ? n9->deregMr(comm, mh)
           : V == 10 ? n10->deregMr(comm, mh) : n11->deregMr(comm, mh);
}

static ncclResult_t t_isend(void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
    switch (V) {
    case 8: return n8->isend(sc, data, (int)size, tag, mh, req);
    case 9: return n9->isend(sc, data, size, tag, mh, req);
    case 10: return n10->isend(sc, data, size, tag, mh, NULL, req);
    default: return n11->isend(sc, data, size, tag, mh, NULL, req);
    }
}

static ncclResult_t t_irecv(void *rc, int n, void **data, size_t *sizes, int *tags, void **mhs,
                            void **req)
{
    int isz[MAXR];
    switch (V) {
    case 8:
        for (int i = 0; i < n && i < MAXR; i++) isz[i] = (int)sizes[i];
        return n8->irecv(rc, n, data, isz, tags, mhs, req);
    case 9: return n9->irecv(rc, n, data, sizes, tags, mhs, req);
    case 10: return n10->irecv(rc, n, data, sizes, tags, mhs, NULL, req);
    default: return n11->irecv(rc, n, data, sizes, tags, mhs, NULL, req);
    }
}

static ncclResult_t t_iflush(void *rc, int n, void **data, int *sizes, void **mhs, void **req)
{
    return V == 8 ? n8->iflush(rc, n, data, sizes, mhs, req)
           : V == 9 ? n9->iflush(rc, n, data, sizes, mhs, req)
           : V == 10 ? n10->iflush(rc, n, data, sizes, mhs, req)
                     : n11->iflush(rc, n, data, sizes, mhs, req);
}

static ncclResult_t t_test(void *req, int *done, int *sizes)
{
    return V == 8 ? n8->test(req, done, sizes) : V == 9 ? n9->test(req, done, sizes)
           : V == 10 ? n10->test(req, done, sizes) : n11->test(req, done, sizes);
}

static ncclResult_t t_close_send(void *c)
{
    return V == 8 ? n8->closeSend(c) : V == 9 ? n9->closeSend(c) : V == 10 ? n10->closeSend(c)
                                                                           : n11->closeSend(c);
}

static ncclResult_t t_close_recv(void *c)
{
    return V == 8 ? n8->closeRecv(c) : V == 9 ? n9->closeRecv(c) : V == 10 ? n10->closeRecv(c)
                                                                           : n11->closeRecv(c);
}

static ncclResult_t t_close_listen(void *c)
{
    return V == 8 ? n8->closeListen(c) : V == 9 ? n9->closeListen(c)
           : V == 10 ? n10->closeListen(c) : n11->closeListen(c);
}

/* ---------------------------------------------------------------------------------------------
 * Time, the control socket, patterns, waits
 * ------------------------------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void ctl_send(const void *buf, size_t len)
{
    ssize_t n = write(ctl, buf, len);
    CHECK(n == (ssize_t)len, "rank %d: control write: %s", R, n < 0 ? strerror(errno) : "short");
}

/* Read exactly len bytes within secs; 0 on success, 1 on EOF (the peer is gone), -1 else. */
static int ctl_recv(void *buf, size_t len, double secs)
{
    size_t got = 0;
    double end = now_s() + secs;
    while (got < len) {
        struct pollfd p = {.fd = ctl, .events = POLLIN};
        int left_ms = (int)((end - now_s()) * 1000);
        if (left_ms <= 0 || poll(&p, 1, left_ms) == 0) return -1;
        ssize_t n = read(ctl, (char *)buf + got, len - got);
        if (n == 0) return 1;
        if (n < 0 && errno != EINTR) return -1;
        if (n > 0) got += (size_t)n;
    }
    return 0;
}

/* A one-byte step marker both ranks exchange; 0 when the peer reached the same step. */
static int sync_step(char step)
{
    char got = 0;
    ctl_send(&step, 1);
    int rc = ctl_recv(&got, 1, WAIT_S);
    CHECK(rc == 0 && got == step, "rank %d: step '%c': the peer %s", R, step,
          rc == 1 ? "is gone" : rc < 0 ? "did not answer in time" : "is at another step");
    return rc == 0 && got == step ? 0 : -1;
}

static uint8_t pat(uint32_t seed, size_t i) { return (uint8_t)(i * 131u + seed * 7u + (i >> 9)); }

static void fill(void *buf, size_t len, uint32_t seed)
{
    uint8_t *b = buf;
    for (size_t i = 0; i < len; i++) b[i] = pat(seed, i);
}

/* Index of the first byte that differs from the pattern, or len. */
static size_t verify(const void *buf, size_t len, uint32_t seed)
{
    const uint8_t *b = buf;
    for (size_t i = 0; i < len; i++)
        if (b[i] != pat(seed, i)) return i;
    return len;
}

typedef struct {
    void *req;     /* NULL once done (or never posted) */
    int sizes[MAXR];
    int done;
    ncclResult_t err;
} treq_t;

/* Test every request until all are done or one fails; returns ncclSuccess, the first error
 * (that request's err is set, its index in *which) or TIMED_OUT. */
static int wait_reqs(treq_t *t, int n, double secs, int *which)
{
    double end = now_s() + secs;
    int left = 0;
    for (int i = 0; i < n; i++) left += t[i].req != NULL;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (!t[i].req) continue;
            int done = 0;
            ncclResult_t res = t_test(t[i].req, &done, t[i].sizes);
            if (res != ncclSuccess) {
                t[i].req = NULL;
                t[i].err = res;
                if (which) *which = i;
                return res;
            }
            if (done) {
                t[i].req = NULL;
                t[i].done = 1;
                left--;
            }
        }
        if (now_s() > end) return TIMED_OUT;
    }
    return ncclSuccess;
}

/* Post until the plugin hands out a request (NULL means "call again"); the result of the
 * last call, *req NULL on timeout. */
static ncclResult_t post_send(void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
    double end = now_s() + WAIT_S;
    ncclResult_t res;
    do {
        *req = NULL;
        res = t_isend(sc, data, size, tag, mh, req);
    } while (res == ncclSuccess && !*req && now_s() < end);
    return res;
}

static ncclResult_t post_recv(void *rc, int n, void **data, size_t *sizes, int *tags,
                              void **mhs, void **req)
{
    double end = now_s() + WAIT_S;
    ncclResult_t res;
    do {
        *req = NULL;
        res = t_irecv(rc, n, data, sizes, tags, mhs, req);
    } while (res == ncclSuccess && !*req && now_s() < end);
    return res;
}

/* Make nsend send comms to the peer's handle (one after another) and accept nrecv comms on
 * lc, calling connect and accept in turns until all exist, as NCCL's proxy does. */
static int open_conns(void *peer_handle, void **sc, int nsend, void *lc, void **rc, int nrecv)
{
    int s = 0, r = 0;
    double end = now_s() + WAIT_S;
    for (int i = 0; i < nsend; i++) sc[i] = NULL;
    for (int i = 0; i < nrecv; i++) rc[i] = NULL;
    while ((s < nsend || r < nrecv) && now_s() < end) {
        if (s < nsend) {
            ncclResult_t res = t_connect(0, peer_handle, &sc[s]);
            if (res != ncclSuccess) {
                CHECK(0, "v%d rank %d: connect: %d", V, R, (int)res);
                return -1;
            }
            if (sc[s]) s++;
        }
        if (r < nrecv) {
            ncclResult_t res = t_accept(lc, &rc[r]);
            if (res != ncclSuccess) {
                CHECK(0, "v%d rank %d: accept: %d", V, R, (int)res);
                return -1;
            }
            if (rc[r]) r++;
        }
    }
    CHECK(s == nsend && r == nrecv, "rank %d: %d of %d connects and %d of %d accepts done in "
          "%.0f s", R, s, nsend, r, nrecv, WAIT_S);
    return s == nsend && r == nrecv ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * One rank
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    long passed, failed, skipped;
} result_t;

static int res_fd = -1;

static void report(void)
{
    result_t r = {check_passed, check_failed, check_skipped};
    if (write(res_fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) perror("result pipe");
    printf("v%d rank %d: %ld checks passed, %ld failed, %ld skipped\n", V, R, r.passed,
           r.failed, r.skipped);
    fflush(stdout);
}

static const size_t sweep[] = {0,     1,      2,      3,      7,      8,       63,
                               64,    65,     1000,   4095,   4096,   4097,    65535,
                               65536, 65537,  262143, 262144, 262145, 1048575, 1048589,
                               3145733, MAX_MSG - 1, MAX_MSG};
#define NSWEEP (sizeof(sweep) / sizeof(sweep[0]))

/* Sizes 0 B..8 MiB both ways at once; odd-indexed receives get SLACK extra bytes. */
static void sizes_case(void *sc, void *rc, char *sbuf, char *rbuf, void *smh, void *rmh)
{
    for (size_t k = 0; k < NSWEEP; k++) {
        size_t len = sweep[k], cap = len + (k & 1 ? SLACK : 0);
        int peer = 1 - R, rtag = peer;
        treq_t t[2];
        memset(t, 0, sizeof(t));
        fill(sbuf, len, (uint32_t)(R * 1000 + (int)k));
        memset(rbuf, 0xee, cap + 64);
        void *rd = rbuf;
        ncclResult_t r1 = post_recv(rc, 1, &rd, &cap, &rtag, &rmh, &t[0].req);
        ncclResult_t r2 = post_send(sc, sbuf, len, R, smh, &t[1].req);
        CHECK(r1 == ncclSuccess && t[0].req, "v%d rank %d: irecv of %zu: %d", V, R, cap, r1);
        CHECK(r2 == ncclSuccess && t[1].req, "v%d rank %d: isend of %zu: %d", V, R, len, r2);
        if (!t[0].req || !t[1].req) return;
        int rc2 = wait_reqs(t, 2, WAIT_S, NULL);
        CHECK(rc2 == ncclSuccess, "v%d rank %d: %zu bytes: wait %d", V, R, len, rc2);
        if (rc2 != ncclSuccess) return;
        CHECK(t[0].sizes[0] == (int)len, "v%d rank %d: received %d bytes, %zu sent (buffer %zu)",
              V, R, t[0].sizes[0], len, cap);
        CHECK(t[1].sizes[0] == (int)len, "v%d rank %d: send of %zu reported %d", V, R, len,
              t[1].sizes[0]);
        size_t bad = verify(rbuf, len, (uint32_t)(peer * 1000 + (int)k));
        CHECK(bad == len, "v%d rank %d: %zu-byte message differs at byte %zu", V, R, len, bad);
        size_t over = len;
        while (over < cap + 64 && (uint8_t)rbuf[over] == 0xee) over++;
        CHECK(over == cap + 64, "v%d rank %d: %zu-byte message wrote byte %zu of its buffer", V,
              R, len, over);
    }
}

/* 32 receives, then 32 sends, all outstanding before the first test; matched in order.  A
 * NULL request is retried, as NCCL's proxy does (over verbs a send waits for the peer's
 * receives to be advertised). */
static void outstanding_case(void *sc, void *rc)
{
    char *s = malloc((size_t)NOUT * OUT_MAX), *r = malloc((size_t)NOUT * (OUT_MAX + 64));
    void *smh = NULL, *rmh = NULL;
    treq_t t[2 * NOUT];
    memset(t, 0, sizeof(t));
    CHECK(s && r, "no memory");
    if (!s || !r) goto out;
    CHECK(t_reg(sc, s, (size_t)NOUT * OUT_MAX, &smh) == ncclSuccess, "regMr");
    CHECK(t_reg(rc, r, (size_t)NOUT * (OUT_MAX + 64), &rmh) == ncclSuccess, "regMr");
    int peer = 1 - R, rtag = peer, posted = 0;
    for (int k = 0; k < NOUT; k++) {
        void *d = r + (size_t)k * (OUT_MAX + 64);
        size_t cap = OUT_MAX + 64;
        memset(d, 0xee, cap);
        ncclResult_t res = post_recv(rc, 1, &d, &cap, &rtag, &rmh, &t[k].req);
        CHECK(res == ncclSuccess && t[k].req, "v%d rank %d: receive %d of %d outstanding: "
              "result %d, request %p", V, R, k + 1, NOUT, res, t[k].req);
        posted += t[k].req != NULL;
    }
    for (int k = 0; k < NOUT; k++) {
        size_t len = 1 + ((size_t)k * 7919u + (size_t)R * 31u) % (OUT_MAX - 1);
        fill(s + (size_t)k * OUT_MAX, len, (uint32_t)(7000 + R * 100 + k));
        ncclResult_t res = post_send(sc, s + (size_t)k * OUT_MAX, len, R, smh, &t[NOUT + k].req);
        CHECK(res == ncclSuccess && t[NOUT + k].req, "v%d rank %d: send %d of %d outstanding: "
              "result %d, request %p", V, R, k + 1, NOUT, res, t[NOUT + k].req);
        posted += t[NOUT + k].req != NULL;
    }
    if (posted < 2 * NOUT) goto out; /* the peer's wait fails on its own */
    int rc2 = wait_reqs(t, 2 * NOUT, WAIT_S, NULL);
    CHECK(rc2 == ncclSuccess, "v%d rank %d: 2 x %d outstanding: wait %d", V, R, NOUT, rc2);
    for (int k = 0; rc2 == ncclSuccess && k < NOUT; k++) {
        size_t len = 1 + ((size_t)k * 7919u + (size_t)peer * 31u) % (OUT_MAX - 1);
        const char *d = r + (size_t)k * (OUT_MAX + 64);
        CHECK(t[k].sizes[0] == (int)len, "v%d rank %d: receive %d got %d bytes, message %d "
              "has %zu (out of order?)", V, R, k, t[k].sizes[0], k, len);
        size_t bad = verify(d, len, (uint32_t)(7000 + peer * 100 + k));
        CHECK(bad == len, "v%d rank %d: receive %d differs at byte %zu", V, R, k, bad);
        size_t mylen = 1 + ((size_t)k * 7919u + (size_t)R * 31u) % (OUT_MAX - 1);
        CHECK(t[NOUT + k].sizes[0] == (int)mylen, "v%d rank %d: send %d reported %d", V, R, k,
              t[NOUT + k].sizes[0]);
    }
out:
    if (smh) CHECK(t_dereg(sc, smh) == ncclSuccess, "deregMr");
    if (rmh) CHECK(t_dereg(rc, rmh) == ncclSuccess, "deregMr");
    free(s);
    free(r);
}

/* Grouped receives as the plugin reports them (maxRecvs), iflush on host memory, and calls
 * NCCL never makes but a plugin must refuse cleanly. */
static void group_flush_args_case(void *sc, void *rc, int max_recvs, char *sbuf, char *rbuf)
{
    int peer = 1 - R;
    void *req = (void *)0x1;
    if (max_recvs > 1) {
        /* a group of max_recvs buffers, tagged; the peer sends one message per tag in order */
        void *d[MAXR];
        size_t caps[MAXR];
        int tags[MAXR];
        treq_t t[1 + MAXR];
        memset(t, 0, sizeof(t));
        for (int i = 0; i < max_recvs && i < MAXR; i++) {
            d[i] = rbuf + (size_t)i * 8192;
            caps[i] = 8192;
            tags[i] = 100 + peer * 10 + i;
        }
        int n = max_recvs < MAXR ? max_recvs : MAXR;
        CHECK(post_recv(rc, n, d, caps, tags, NULL, &t[0].req) == ncclSuccess && t[0].req,
              "v%d rank %d: grouped irecv of %d", V, R, n);
        for (int i = 0; i < n; i++) {
            fill(sbuf + (size_t)i * 8192, 1000u + (size_t)i, (uint32_t)(300 + R * 10 + i));
            CHECK(post_send(sc, sbuf + (size_t)i * 8192, 1000u + (size_t)i, 100 + R * 10 + i,
                            NULL, &t[1 + i].req) == ncclSuccess && t[1 + i].req,
                  "v%d rank %d: isend %d of a group", V, R, i);
        }
        CHECK(wait_reqs(t, 1 + n, WAIT_S, NULL) == ncclSuccess, "v%d rank %d: group wait", V, R);
        for (int i = 0; i < n; i++) {
            CHECK(t[0].sizes[i] == 1000 + i, "v%d rank %d: group buffer %d got %d bytes", V, R,
                  i, t[0].sizes[i]);
            CHECK(verify(d[i], 1000u + (size_t)i, (uint32_t)(300 + peer * 10 + i)) ==
                      1000u + (size_t)i, "v%d rank %d: group buffer %d data", V, R, i);
        }
    } else {
        /* maxRecvs 1: NCCL never groups; a grouped irecv is refused, leaving the comm usable */
        void *d[2] = {rbuf, rbuf + 8192};
        size_t caps[2] = {8192, 8192};
        int tags[2] = {peer, peer}, w0 = lg.warn_net;
        ncclResult_t res = t_irecv(rc, 2, d, caps, tags, NULL, &req);
        CHECK(res == ncclInvalidArgument && req == NULL, "v%d rank %d: irecv of 2 buffers with "
              "maxRecvs 1: result %d, request %p", V, R, (int)res, req);
        CHECK(lg.warn_net > w0, "v%d rank %d: the refused irecv was not logged at WARN/NET", V,
              R);
    }
    /* iflush of host memory completes at once */
    int sz = 100;
    void *d0 = rbuf;
    req = (void *)0x1;
    CHECK(t_iflush(rc, 1, &d0, &sz, NULL, &req) == ncclSuccess && req == NULL,
          "v%d rank %d: iflush on host memory: request %p", V, R, req);
    /* wrong kinds of comm and NULL arguments: refused, logged, nothing breaks */
    int w0 = lg.warn_net;
    req = (void *)0x1;
    CHECK(t_isend(rc, sbuf, 10, R, NULL, &req) == ncclInvalidArgument && req == NULL,
          "v%d rank %d: isend on a recv comm", V, R);
    size_t cap = 10;
    void *d1 = rbuf;
    CHECK(t_irecv(sc, 1, &d1, &cap, NULL, NULL, &req) == ncclInvalidArgument,
          "v%d rank %d: irecv on a send comm", V, R);
    int done = 0;
    CHECK(t_test(NULL, &done, NULL) == ncclInvalidArgument, "v%d rank %d: test(NULL)", V, R);
    tprops_t p;
    CHECK(t_props(-1, &p) == ncclInvalidArgument, "v%d rank %d: getProperties(-1)", V, R);
    if (V == 8) {
        CHECK(n8->isend(sc, sbuf, -1, R, NULL, &req) == ncclInvalidArgument,
              "v8 rank %d: isend of -1 bytes", R);
    }
    CHECK(lg.warn_net >= w0 + 4, "v%d rank %d: refused calls logged %d WARN/NET lines", V, R,
          lg.warn_net - w0);
}

/* Over verbs (RCOLL_NET=verbs, the rdma suite) the sender learns of each receive from the
 * receiver's advertisement, as with NCCL's own IB plugin: a send waits for a posted receive,
 * and a message too large for it is refused by the sender, the receiver seeing the give-up. */
static int over_verbs(void)
{
    const char *net = getenv("RCOLL_NET");
    return net && !strcmp(net, "verbs");
}

/* GPUDirect RDMA as NCCL drives it (the rdma suite runs this with RCOLL_NET=verbs and
 * RCOLL_IB_GDR=peermem: the VM has no GPU, so the transport registers CUDA-typed buffers with
 * ibv_reg_mr as it would device pointers through nvidia-peermem).  The buffers are host
 * memory made untouchable (PROT_NONE) once registered, as device memory is to the host:
 * rxe moves the bytes through the pages it pinned, and any host access by the plugin or the
 * transport is a SIGSEGV.  Each rank sends 65539 bytes to the other from NCCL_PTR_CUDA memory
 * into NCCL_PTR_CUDA memory; the receive is flushed (a request, completed by test). */
static int gdr_forced(void)
{
    const char *g = getenv("RCOLL_IB_GDR");
    return over_verbs() && g && !strcmp(g, "peermem");
}

static void gdr_case(void *sc, void *rc)
{
    const size_t cap = (size_t)256 << 10, len = 65539;
    int peer = 1 - R;
    char *s = aligned_alloc(4096, cap), *r = aligned_alloc(4096, cap);
    void *smh = NULL, *rmh = NULL, *fr = NULL;
    treq_t t[2];
    memset(t, 0, sizeof(t));
    if (!s || !r) goto out;
    CHECK(t_reg_type(sc, s, cap, NCCL_PTR_CUDA, &smh) == ncclSuccess && smh &&
              t_reg_type(rc, r, cap, NCCL_PTR_CUDA, &rmh) == ncclSuccess && rmh,
          "v%d rank %d: regMr(NCCL_PTR_CUDA) on both comms", V, R);
    if (!smh || !rmh) goto out;
    fill(s, len, (uint32_t)(700 + R));
    memset(r, 0x5a, cap);
    CHECK(mprotect(s, cap, PROT_NONE) == 0 && mprotect(r, cap, PROT_NONE) == 0,
          "v%d rank %d: buffers made untouchable", V, R);
    size_t want = cap;
    void *d = r;
    CHECK(post_recv(rc, 1, &d, &want, NULL, &rmh, &t[0].req) == ncclSuccess && t[0].req,
          "v%d rank %d: irecv into CUDA memory", V, R);
    sync_step('G');
    CHECK(post_send(sc, s, len, 0, smh, &t[1].req) == ncclSuccess && t[1].req,
          "v%d rank %d: isend from CUDA memory", V, R);
    CHECK(wait_reqs(t, 2, WAIT_S, NULL) == ncclSuccess && t[0].sizes[0] == (int)len,
          "v%d rank %d: both done, %d bytes received", V, R, t[0].sizes[0]);
    int sz = (int)len;
    CHECK(t_iflush(rc, 1, &d, &sz, &rmh, &fr) == ncclSuccess && fr,
          "v%d rank %d: iflush of CUDA memory gives a request", V, R);
    if (fr) {
        treq_t f;
        memset(&f, 0, sizeof(f));
        f.req = fr;
        CHECK(wait_reqs(&f, 1, WAIT_S, NULL) == ncclSuccess, "v%d rank %d: flush done", V, R);
    }
    mprotect(s, cap, PROT_READ | PROT_WRITE);
    mprotect(r, cap, PROT_READ | PROT_WRITE);
    CHECK(verify(r, len, (uint32_t)(700 + peer)) == len, "v%d rank %d: data from CUDA memory",
          V, R);
    sync_step('H');
out:
    if (smh) CHECK(t_dereg(sc, smh) == ncclSuccess, "v%d: deregMr (CUDA)", V);
    if (rmh) CHECK(t_dereg(rc, rmh) == ncclSuccess, "v%d: deregMr (CUDA)", V);
    free(s);
    free(r);
}

/* How many requests one comm takes before it answers NULL (a fresh pair, rank 0 -> 1).  The
 * receiver posts first, so a transport whose sends need posted receives is counted fairly. */
static void limit_case(void *peer_handle, void *lc)
{
    void *c = NULL, *req = NULL;
    static char byte;
    int n = 0;
    if (open_conns(peer_handle, &c, R == 0, lc, &c, R == 1) != 0) return;
    if (R == 0) sync_step('P'); /* rank 1's receives are posted */
    for (n = 0; n < 1000; n++) {
        size_t cap = 1;
        void *d = &byte;
        ncclResult_t res = R == 0 ? t_isend(c, &byte, 1, 0, NULL, &req)
                                  : t_irecv(c, 1, &d, &cap, NULL, NULL, &req);
        if (res != ncclSuccess || !req) break;
    }
    if (R == 1) sync_step('P');
    printf("v%d: a %s comm took %d outstanding %s before answering NULL\n", V,
           R == 0 ? "send" : "recv", n, R == 0 ? "isends" : "irecvs");
    CHECK(n >= NOUT, "v%d rank %d: only %d outstanding requests (NCCL needs %d)", V, R, n,
          NOUT);
    sync_step('L');
    CHECK((R == 0 ? t_close_send(c) : t_close_recv(c)) == ncclSuccess,
          "v%d rank %d: close with outstanding requests", V, R);
}

/* Rank 1 posts 100 bytes, rank 0 sends 1000: the receive fails (invalid usage), logged;
 * the comm stays failed; closing it works. */
static void small_recv_case(void *peer_handle, void *lc, char *sbuf, char *rbuf)
{
    void *c = NULL;
    treq_t t;
    memset(&t, 0, sizeof(t));
    if (open_conns(peer_handle, &c, R == 0, lc, &c, R == 1) != 0) return;
    if (R == 0) {
        fill(sbuf, 1000, 42);
        ncclResult_t ps = post_send(c, sbuf, 1000, 0, NULL, &t.req);
        if (over_verbs()) { /* the sender finds it: invalid usage, at post or at test */
            int rc2 = ps == ncclSuccess && t.req ? wait_reqs(&t, 1, WAIT_S, NULL) : (int)ps;
            CHECK(rc2 == ncclInvalidUsage, "v%d rank 0: a 1000-byte send into a 100-byte "
                  "receive over verbs: %d (want %d, invalid usage)", V, rc2,
                  (int)ncclInvalidUsage);
            sync_step('S');
            CHECK(t_close_send(c) == ncclSuccess, "v%d: closeSend", V);
            return;
        }
        CHECK(ps == ncclSuccess && t.req, "v%d: isend of 1000 bytes", V);
        int rc2 = wait_reqs(&t, 1, WAIT_S, NULL); /* done (buffered) or an error: no hang */
        CHECK(rc2 != TIMED_OUT, "v%d rank 0: the send to a too-small receive hung", V);
        sync_step('S');
        CHECK(t_close_send(c) == ncclSuccess, "v%d: closeSend", V);
        return;
    }
    size_t cap = 100;
    void *d = rbuf;
    int tag = 0, w0 = lg.warn_net;
    memset(rbuf, 0xee, 1100);
    CHECK(post_recv(c, 1, &d, &cap, &tag, NULL, &t.req) == ncclSuccess && t.req,
          "v%d: irecv of 100 bytes", V);
    int rc2 = wait_reqs(&t, 1, WAIT_S, NULL);
    /* Over verbs the receiver sees the sender's give-up (a remote error saying why). */
    ncclResult_t want = over_verbs() ? ncclRemoteError : ncclInvalidUsage;
    const char *why = over_verbs() ? "larger" : "invalid usage";
    CHECK(rc2 == (int)want, "v%d rank 1: a 1000-byte message into a 100-byte receive: "
          "%d (want %d)", V, rc2, (int)want);
    CHECK(lg.warn_net > w0 && strstr(lg.last_warn, why),
          "v%d rank 1: the error was not logged at WARN/NET naming '%s' (last: %s)", V, why,
          lg.last_warn);
    size_t over = 100;
    while (over < 1100 && (uint8_t)rbuf[over] == 0xee) over++;
    CHECK(over == 1100, "v%d rank 1: the refused message wrote byte %zu", V, over);
    /* the comm stays failed */
    void *req = NULL;
    ncclResult_t res = post_recv(c, 1, &d, &cap, &tag, NULL, &req);
    if (res == ncclSuccess && req) {
        treq_t t2 = {.req = req};
        res = wait_reqs(&t2, 1, WAIT_S, NULL);
    }
    CHECK(res == want, "v%d rank 1: the next irecv on the failed comm: %d", V, (int)res);
    sync_step('S');
    CHECK(t_close_recv(c) == ncclSuccess, "v%d: closeRecv of a failed comm", V);
}

/* Rank 0 dies (SIGKILL) with connections open; rank 1's pending receive, a receive posted
 * after the death and sends all fail with ncclRemoteError within DEATH_S. */
static void death_case(void **dc_send, void **dc_recv, char *sbuf, char *rbuf)
{
    if (R == 0) {
        char go = 0;
        int rc2 = ctl_recv(&go, 1, WAIT_S);
        CHECK(rc2 == 0 && go == 'D', "v%d rank 0: no signal to die", V);
        report();
        raise(SIGKILL);
        _exit(99); /* not reached */
    }
    /* rank 1: dc_recv[0] has a receive pending before the death, dc_recv[1] gets one after */
    treq_t a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    size_t cap = 4096;
    int tag = 0;
    void *d = rbuf;
    CHECK(post_recv(dc_recv[0], 1, &d, &cap, &tag, NULL, &a.req) == ncclSuccess && a.req,
          "v%d: irecv before the death", V);
    char go = 'D';
    ctl_send(&go, 1);
    char x;
    int gone = ctl_recv(&x, 1, DEATH_S);
    CHECK(gone == 1, "v%d rank 1: rank 0 did not die", V);
    double t0 = now_s();
    int w0 = lg.warn_net;
    int rc2 = wait_reqs(&a, 1, DEATH_S, NULL);
    CHECK(rc2 == ncclRemoteError, "v%d rank 1: receive pending when the peer died: %d (want "
          "%d, remote error) after %.1f s", V, rc2, (int)ncclRemoteError, now_s() - t0);
    CHECK(lg.warn_net > w0 && strstr(lg.last_warn, "remote peer failure"),
          "v%d rank 1: the peer's death was not logged at WARN/NET (last: %s)", V, lg.last_warn);
    /* a receive on a comm whose peer is gone, posted now */
    ncclResult_t res = post_recv(dc_recv[1], 1, &d, &cap, &tag, NULL, &b.req);
    if (res == ncclSuccess && b.req) res = wait_reqs(&b, 1, DEATH_S, NULL);
    CHECK(res == ncclRemoteError, "v%d rank 1: irecv after the peer died: %d", V, (int)res);
    /* sends to the dead peer: the kernel buffers the first ones; an error must come */
    double end = now_s() + DEATH_S;
    res = ncclSuccess;
    int sends = 0;
    while (res == ncclSuccess && now_s() < end) {
        treq_t s;
        memset(&s, 0, sizeof(s));
        res = post_send(dc_send[0], sbuf, 1u << 20, 1, NULL, &s.req);
        if (res == ncclSuccess && s.req) res = wait_reqs(&s, 1, end - now_s(), NULL);
        sends++;
    }
    CHECK(res == ncclRemoteError, "v%d rank 1: sends to the dead peer: %d after %d sends and "
          "%.1f s", V, (int)res, sends, now_s() - t0);
    printf("v%d: rank 0 killed: pending receive, new receive and send failed within %.2f s\n",
           V, now_s() - t0);
    CHECK(t_close_recv(dc_recv[0]) == ncclSuccess, "v%d: closeRecv after the peer died", V);
    CHECK(t_close_recv(dc_recv[1]) == ncclSuccess, "v%d: closeRecv after the peer died", V);
    CHECK(t_close_send(dc_send[0]) == ncclSuccess, "v%d: closeSend after the peer died", V);
}

static int rank_main(void)
{
    char handle[NCCL_NET_HANDLE_MAXSIZE], peer_handle[NCCL_NET_HANDLE_MAXSIZE];
    void *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL;
    void *dc_send[2] = {NULL, NULL}, *dc_recv[2] = {NULL, NULL};
    char *sbuf = malloc(MAX_MSG + SLACK + 64), *rbuf = malloc(MAX_MSG + SLACK + 64);
    int ndev = 0;
    tprops_t p;

    setenv("RCOLL_DEBUG", "INFO", 1); /* rcoll's own INFO lines must reach the logger */
    if (!sbuf || !rbuf || t_load(V) != 0) goto out;
    ncclResult_t res = t_init();
    CHECK(res == ncclSuccess, "v%d rank %d: init: %d", V, R, (int)res);
    if (res != ncclSuccess) goto out;
    CHECK(t_devices(&ndev) == ncclSuccess && ndev >= 1, "v%d: %d devices", V, ndev);
    if (ndev < 1) goto out;

    /* properties, as the plugin must report them */
    CHECK(t_props(0, &p) == ncclSuccess, "v%d: getProperties(0)", V);
    CHECK(p.p.name && p.p.name[0], "v%d: device name", V);
    if (gdr_forced())
        CHECK(p.p.ptrSupport == (NCCL_PTR_HOST | NCCL_PTR_CUDA), "v%d: ptrSupport 0x%x "
              "(RCOLL_IB_GDR=peermem over verbs: host and CUDA expected)", V, p.p.ptrSupport);
    else
        CHECK(p.p.ptrSupport == NCCL_PTR_HOST, "v%d: ptrSupport 0x%x (host only expected)", V,
              p.p.ptrSupport);
    CHECK(p.p.regIsGlobal == 0 && p.p.netDeviceType == NCCL_NET_DEVICE_HOST &&
              p.p.netDeviceVersion == 0, "v%d: regIsGlobal %d, netDeviceType %d, version %d",
          V, p.p.regIsGlobal, (int)p.p.netDeviceType, p.p.netDeviceVersion);
    CHECK(p.p.speed > 0 && p.p.latency > 0 && p.p.maxComms > 0 && p.p.maxRecvs >= 1,
          "v%d: speed %d, latency %.1f, maxComms %d, maxRecvs %d", V, p.p.speed,
          (double)p.p.latency, p.p.maxComms, p.p.maxRecvs);
    CHECK(!p.p.pciPath || p.p.pciPath[0] == '/', "v%d: pciPath '%s'", V, p.p.pciPath);
    if (p.has_v9) {
        CHECK(p.p.forceFlush == 0 && p.p.vProps.ndevs == 1 && p.p.vProps.devs[0] == 0,
              "v%d: forceFlush %d, vProps {%d, %d}", V, p.p.forceFlush, p.p.vProps.ndevs,
              p.p.vProps.devs[0]);
        CHECK(p.p.maxP2pBytes >= MAX_MSG && p.p.maxP2pBytes <= (size_t)NCCL_MAX_NET_SIZE_BYTES &&
                  p.p.maxCollBytes == p.p.maxP2pBytes,
              "v%d: maxP2pBytes %zu, maxCollBytes %zu", V, p.p.maxP2pBytes, p.p.maxCollBytes);
    }
    if (p.has_v11) CHECK(p.p.maxMultiRequestSize == 1, "v%d: maxMultiRequestSize %d", V,
                         p.p.maxMultiRequestSize);
    if (p.has_v12) CHECK(p.rail == NCCL_NET_ID_UNDEF && p.plane == NCCL_NET_ID_UNDEF,
                         "v12: railId %d, planeId %d (-1: not known, expected)", p.rail,
                         p.plane);
    if (lg.tcp_chosen)
        CHECK(lg.rcoll_info > 0, "v%d: rcoll's own INFO line (\"tcp: device ...\") did not "
              "reach NCCL's logger", V);
    else
        check_skip("v%d: the transport is not tcp: rcoll's own INFO line not looked for", V);

    /* listen, exchange handles, connect and accept until both comms exist */
    res = t_listen(0, handle, &lc);
    CHECK(res == ncclSuccess && lc, "v%d: listen: %d", V, (int)res);
    if (!lc) goto out;
    ctl_send(handle, sizeof(handle));
    CHECK(ctl_recv(peer_handle, sizeof(peer_handle), WAIT_S) == 0, "v%d rank %d: no handle "
          "from the peer", V, R);
    if (open_conns(peer_handle, &sc, 1, lc, &rc, 1) != 0) goto out;
    CHECK(t_reg(sc, sbuf, MAX_MSG + SLACK + 64, &smh) == ncclSuccess && smh, "v%d: regMr send",
          V);
    CHECK(t_reg(rc, rbuf, MAX_MSG + SLACK + 64, &rmh) == ncclSuccess && rmh, "v%d: regMr recv",
          V);

    if (sync_step('a') == 0) sizes_case(sc, rc, sbuf, rbuf, smh, rmh);
    if (sync_step('b') == 0) outstanding_case(sc, rc);
    if (sync_step('c') == 0) group_flush_args_case(sc, rc, p.p.maxRecvs, sbuf, rbuf);
    if (sync_step('d') == 0) limit_case(peer_handle, lc);
    if (sync_step('e') == 0) small_recv_case(peer_handle, lc, sbuf, rbuf);
    if (gdr_forced() && sync_step('h') == 0) gdr_case(sc, rc);

    /* the death case's connections, made while the listeners still exist: rank 0 -> 1 twice,
     * rank 1 -> 0 once */
    if (sync_step('f') == 0) open_conns(peer_handle, dc_send, 2 - R, lc, dc_recv, 1 + R);

    /* NCCL's closing order: deregMr, closeSend / closeRecv, closeListen */
    CHECK(t_dereg(sc, smh) == ncclSuccess, "v%d: deregMr", V);
    CHECK(t_dereg(rc, rmh) == ncclSuccess, "v%d: deregMr", V);
    smh = rmh = NULL;
    CHECK(t_close_send(sc) == ncclSuccess, "v%d: closeSend", V);
    CHECK(t_close_recv(rc) == ncclSuccess, "v%d: closeRecv", V);
    CHECK(t_close_listen(lc) == ncclSuccess, "v%d: closeListen", V);
    sc = rc = lc = NULL;

    if (sync_step('g') == 0 && (R == 0 ? dc_send[1] != NULL : dc_recv[1] != NULL))
        death_case(dc_send, dc_recv, sbuf, rbuf);

    if (V >= 11) {
        CHECK(n11->setNetAttr(ctx11, NULL) == ncclSuccess, "v%d: setNetAttr", V);
        CHECK(t_finalize() == ncclSuccess, "v%d: finalize", V);
    }
    /* NCCL unloads the plugin with its last communicator and may load it again */
    CHECK(dlclose(lib) == 0, "dlclose: %s", dlerror());
    lib = NULL;
    if (t_load(V) == 0) {
        CHECK(t_init() == ncclSuccess && t_devices(&ndev) == ncclSuccess && ndev >= 1,
              "v%d: init after dlclose and dlopen again", V);
        CHECK(t_finalize() == ncclSuccess, "v%d: finalize after reloading", V);
    }
out:
    if (smh) t_dereg(sc, smh);
    if (rmh) t_dereg(rc, rmh);
    free(sbuf);
    free(rbuf);
    report();
    return check_failed ? 1 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The parent: two ranks per version, a deadline over both
 * ------------------------------------------------------------------------------------------ */

static int version;

static void run_version(void)
{
    int sp[2], rp[2][2];
    pid_t pid[2];
    int status[2] = {0, 0}, exited[2] = {0, 0};
    result_t res[2];
    memset(res, 0, sizeof(res));

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0 || pipe(rp[0]) != 0 || pipe(rp[1]) != 0) {
        CHECK(0, "socketpair/pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            V = version;
            R = r;
            ctl = sp[r];
            close(sp[1 - r]);
            res_fd = rp[r][1];
            close(rp[r][0]);
            close(rp[1 - r][0]);
            close(rp[1 - r][1]);
            check_passed = check_failed = check_skipped = 0;
            exit(rank_main());
        }
    }
    close(sp[0]);
    close(sp[1]);
    close(rp[0][1]);
    close(rp[1][1]);
    double start = now_s();
    while ((!exited[0] || !exited[1]) && now_s() - start < RUN_S) {
        for (int r = 0; r < 2; r++)
            if (!exited[r] && pid[r] > 0 && waitpid(pid[r], &status[r], WNOHANG) == pid[r])
                exited[r] = 1;
        usleep(10000);
    }
    for (int r = 0; r < 2; r++) {
        if (exited[r] || pid[r] <= 0) continue;
        kill(pid[r], SIGKILL);
        waitpid(pid[r], &status[r], 0);
        CHECK(0, "v%d rank %d hung: killed after %.0f s", version, r, RUN_S);
    }
    for (int r = 0; r < 2; r++) {
        ssize_t n = read(rp[r][0], &res[r], sizeof(res[r]));
        close(rp[r][0]);
        CHECK(n == (ssize_t)sizeof(res[r]), "v%d rank %d reported nothing (crashed?)", version,
              r);
        check_passed += res[r].passed;
        check_failed += res[r].failed;
        check_skipped += res[r].skipped;
    }
    /* rank 0 dies on purpose in the death case; any other end is a failure */
    CHECK(WIFSIGNALED(status[0]) && WTERMSIG(status[0]) == SIGKILL,
          "v%d rank 0 should have been killed in the death case (status 0x%x)", version,
          status[0]);
    CHECK(WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 0, "v%d rank 1: status 0x%x",
          version, status[1]);
    printf("v%d: both ranks in %.1f s\n", version, now_s() - start);
}

static void case_v8(void) { version = 8, run_version(); }
static void case_v9(void) { version = 9, run_version(); }
static void case_v10(void) { version = 10, run_version(); }
static void case_v11(void) { version = 11, run_version(); }
static void case_v12(void) { version = 12, run_version(); }

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "none")) {
        printf("SKIP the NCCL plugin was not built (-Dnccl_plugin)\n");
        return 77;
    }
    so_path = argv[1];
    verbose = getenv("PLUGIN_TEST_VERBOSE") != NULL;
    setenv("RCOLL_NET", "tcp", 0);
    signal(SIGPIPE, SIG_IGN);
    check_case("plugin v8", case_v8);
    check_case("plugin v9", case_v9);
    check_case("plugin v10", case_v10);
    check_case("plugin v11", case_v11);
    check_case("plugin v12", case_v12);
    return check_summary();
}
