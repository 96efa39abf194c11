/*
 * test_transport_verbs.c - conformance of the verbs transport against real kernel verbs
 * (Soft-RoCE inside tools/rxe-vm): sizes 0 B..64 MiB, several QPs, grouped receives, 48
 * requests in flight, many connections, the registration cache, and the failures rxe can
 * produce for real: tag/size mismatch, bad rkey, receiver not ready, a killed peer.
 * With --gid-flap (inside tools/rxe-vm only: it changes veth0): a port flap that changes the
 * port's GID after init (veth0 down, a new MAC address, up: rxe0's default GIDs follow the
 * MAC); a connection made afterwards must use the new GID.
 * Exits 77 (skip) where no active verbs port exists.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp_harness.h"
#include "transport/verbs.h"
#include "util/config.h"
#include "util/time.h"

const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
static rcoll_vrb_config_t *cfg; /* the transport's copy: cases change QPs and timeouts */

static int ndev;

static void test_props(void)
{
    rcoll_transport_props_t p;
    CHECK(ndev >= 1, "devices %d", ndev);
    CHECK(T->get_props(0, &p) == RCOLL_OK, "get_props");
    CHECK(p.name[0] && p.port >= 1 && p.max_recvs == RCOLL_TRANSPORT_MAX_RECVS &&
              p.ptr_support == RCOLL_PTR_HOST && p.speed_mbps > 0,
          "props %s port %d recvs %d", p.name, p.port, p.max_recvs);
    CHECK(T->get_props(ndev, &p) == RCOLL_ERR_INVALID_ARG, "device out of range");
    for (int i = 0; i < ndev; i++) {
        const rcoll_vrb_dev_t *d = rcoll_vrb_dev(i);
        char g[64];
        printf("  %s port %d GID[%d] %s %s\n", d->name, d->port, d->gid_index,
               rcoll_vrb_gid_str(d->gid.raw, g, sizeof(g)), rcoll_vrb_gid_type_str(d->gid_type));
    }
}

static void sizes_with_qps(int qps)
{
    cfg->ib_qps_per_conn = qps;
    pair_t p;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    for (size_t n = 1; n <= ((size_t)16 << 20) && p.rc && !check_case_failed(); n *= 4) {
        tp_transfer(&p, n - 1, n + 7, 0, 0, (unsigned)n);
        tp_transfer(&p, n, n, 0, 0, (unsigned)n + 1);
        tp_transfer(&p, n + 1, n + 1, 0, 0, (unsigned)n + 2);
    }
    if (p.rc) tp_transfer(&p, (size_t)64 << 20, (size_t)64 << 20, 0, 0, 99);
    pair_close(&p);
    cfg->ib_qps_per_conn = 1;
}

static void sizes1(void) { sizes_with_qps(1); }
static void sizes4(void) { sizes_with_qps(4); }

static size_t pipe_len(int i)
{
    return (i % 5 == 0) ? (size_t)(200 << 10) + (size_t)i : (size_t)(i * 37);
}

/* 48 messages in flight; the receiver advertises at most RCOLL_VRB_NSLOTS ahead. */
static void pipeline(void) { tp_case_pipeline(48, pipe_len, RCOLL_VRB_NSLOTS, 0); }

/* 64 connections open at once, each carrying one message. */
static void test_many(void)
{
    enum { N = 64 };
    pair_t *p = calloc(N, sizeof(*p));
    int ok = 1;
    for (int i = 0; i < N && ok; i++) {
        ok = pair_open(&p[i]) == RCOLL_OK;
        CHECK(ok, "pair_open %d", i);
    }
    for (int i = 0; i < N && ok && !check_case_failed(); i++) tp_transfer(&p[i], 1000 + (size_t)i, 2000, 0, 0,
                                                                 (unsigned)i);
    for (int i = 0; i < N; i++) pair_close(&p[i]);
    free(p);
}

/* Expect the sender's next request to fail with st and a message containing what. */
static void expect_send_error(pair_t *p, void *buf, size_t n, int tag, rcoll_status_t want,
                              const char *what)
{
    void *sreq = NULL;
    rcoll_status_t st = RCOLL_OK;
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while (!sreq && st == RCOLL_OK && rcoll_now_ns() < end)
        st = T->isend(p->sc, buf, n, tag, NULL, &sreq);
    if (sreq) st = wait1(sreq, NULL, DEADLINE_NS);
    CHECK(st == want, "sender got %d, want %d", st, want);
    CHECK(strstr(rcoll_err_get(), what) != NULL, "sender's message names '%s'", what);
}

static void test_tag_and_size(void)
{
    pair_t p;
    unsigned char sbuf[200], rbuf[100 + GUARD];
    size_t cap = 100;
    void *rreq = NULL, *dp = rbuf;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc) return;
    CHECK(T->irecv(p.rc, 1, &dp, &cap, (int[]){5}, NULL, &rreq) == RCOLL_OK, "irecv");
    expect_send_error(&p, sbuf, 10, 7, RCOLL_ERR_INVALID_USAGE, "tag");
    pair_close(&p);

    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc) return;
    memset(rbuf, 0x5A, sizeof(rbuf));
    rreq = NULL;
    CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &rreq) == RCOLL_OK, "irecv");
    expect_send_error(&p, sbuf, sizeof(sbuf), 1, RCOLL_ERR_INVALID_USAGE, "larger");
    rcoll_status_t st = rreq ? wait1(rreq, NULL, DEADLINE_NS) : RCOLL_OK;
    CHECK(st == RCOLL_ERR_PROTOCOL, "receiver got %d", st);
    CHECK(strstr(rcoll_err_get(), "larger") != NULL, "receiver's message says why");
    CHECK(guard_ok(rbuf, sizeof(rbuf), 0x5A), "receive buffer was written");
    pair_close(&p);
}

/* A corrupted rkey in the advertisement: the write fails with a remote access error. */
static void test_bad_rkey(void)
{
    pair_t p;
    unsigned char sbuf[4096], rbuf[4096];
    size_t cap = sizeof(rbuf);
    void *rreq = NULL, *dp = rbuf;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc) return;
    CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &rreq) == RCOLL_OK, "irecv");
    rcoll_vrb_comm_t *sc = p.sc;
    volatile rcoll_vrb_fifo_slot_t *slot = &sc->fifo[0];
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while (slot->seq_tail != 1 && rcoll_now_ns() < end) sched_yield();
    slot->e[0].rkey ^= 0x5a5a00;
    expect_send_error(&p, sbuf, sizeof(sbuf), -1, RCOLL_ERR_REMOTE, "access");
    CHECK(strstr(rcoll_err_get(), "QPN") && strstr(rcoll_err_get(), "GID") &&
              strstr(rcoll_err_get(), "vendor error"), "message names QPN, GIDs, vendor error");
    /* the receiver learns it too: its QP is flushed or its peer closes */
    T->close_send(p.sc);
    p.sc = NULL;
    rcoll_status_t st = rreq ? wait1(rreq, NULL, DEADLINE_NS) : RCOLL_OK;
    CHECK(st != RCOLL_OK && st != RCOLL_INPROGRESS, "receiver got %d", st);
    pair_close(&p);
}

/* No receive posted for the immediate (one pre-posted receive, never replenished because the
 * receiver does not poll): receiver-not-ready retries run out. */
static void test_rnr(void)
{
    pair_t p;
    unsigned char sbuf[64], rbuf[2][64];
    size_t cap[2] = {64, 64};
    void *rreq = NULL, *dp[2] = {rbuf[0], rbuf[1]};
    rcoll_vrb_test_rq_depth = 1;
    cfg->ib_rnr_retry = 1;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    rcoll_vrb_test_rq_depth = 0;
    cfg->ib_rnr_retry = 7;
    if (!p.rc) return;
    CHECK(T->irecv(p.rc, 2, dp, cap, NULL, NULL, &rreq) == RCOLL_OK, "irecv");
    void *s1 = NULL;
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while (!s1 && rcoll_now_ns() < end) T->isend(p.sc, sbuf, 8, -1, NULL, &s1);
    CHECK(s1 && wait1(s1, NULL, DEADLINE_NS) == RCOLL_OK, "first message");
    expect_send_error(&p, sbuf, 8, -1, RCOLL_ERR_REMOTE, "RNR");
    pair_close(&p);
}

/* ---- a peer in another process, killed mid-transfer ---- */

static void test_killed_peer(void)
{
    int to_child[2], from_child[2];
    CHECK(pipe(to_child) == 0 && pipe(from_child) == 0, "pipes");
    size_t n = (size_t)64 << 20;
    pid_t pid = fork();
    if (pid == 0) {
        /* the child execs a fresh copy of this program: verbs state is not fork-safe */
        char fd_in[16], fd_out[16];
        snprintf(fd_in, sizeof(fd_in), "%d", to_child[0]);
        snprintf(fd_out, sizeof(fd_out), "%d", from_child[1]);
        execl("/proc/self/exe", "test_transport_verbs", "--child", fd_in, fd_out, (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    CHECK(read(from_child[0], handle, sizeof(handle)) == (ssize_t)sizeof(handle),
          "child's handle");
    void *sc = NULL;
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while (!sc && !check_case_failed() && rcoll_now_ns() < end)
        CHECK(T->connect(0, handle, &sc) == RCOLL_OK, "connect to the child");
    unsigned char *src = calloc(1, n);
    void *sreq = NULL;
    while (sc && !sreq && !check_case_failed() && rcoll_now_ns() < end)
        CHECK(T->isend(sc, src, n, -1, NULL, &sreq) == RCOLL_OK, "isend");
    int done = 0;
    if (sreq) T->test(sreq, &done, NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    uint64_t t0 = rcoll_now_ns();
    rcoll_status_t st = sreq && !done ? wait1(sreq, NULL, 30ull * 1000000000ull) : RCOLL_OK;
    printf("  sender's error after %.2f s: %s\n", (double)(rcoll_now_ns() - t0) / 1e9,
           rcoll_err_get());
    CHECK(st == RCOLL_ERR_REMOTE, "sender got %d, want REMOTE", st);
    if (sc) T->close_send(sc);
    free(src);
    close(to_child[1]);
    close(from_child[0]);
}

/* Run a shell command (the VM's ip); 0 when it exited 0. */
static int sh(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0) printf("  '%s' exited %d\n", cmd, rc);
    return rc == 0;
}

/* veth0 down, MAC address mac, up; then wait (5 s) until rxe0's port is active and the GID at
 * the index init chose differs from was.  1 when it does. */
static int flap_veth0(const char *mac, const union ibv_gid *was)
{
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "ip link set veth0 down && ip link set veth0 address %s && "
             "ip link set veth0 up", mac);
    if (!sh(cmd)) return 0;
    const rcoll_vrb_dev_t *d = rcoll_vrb_dev(0);
    for (int ms = 0; ms < 5000; ms += 50) {
        struct ibv_port_attr a;
        union ibv_gid g;
        if (rcoll_ibv->query_port(d->ctx, (uint8_t)d->port, &a) == 0 &&
            a.state == IBV_PORT_ACTIVE &&
            rcoll_ibv->query_gid(d->ctx, (uint8_t)d->port, d->gid_index, &g) == 0 &&
            memcmp(g.raw, was->raw, 16))
            return 1;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void test_gid_flap(void)
{
    rcoll_vrb_dev_t *d = rcoll_vrb_dev(0);
    CHECK(ndev >= 2 && !strcmp(d->name, "rxe0"), "rxe0 is device 0 (%s)", d->name);
    if (check_case_failed()) return;
    pair_t p;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open before the flap: %s", rcoll_err_get());
    if (p.rc) tp_transfer(&p, 1 << 20, 1 << 20, 0, 0, 11);
    pair_close(&p);
    union ibv_gid before = d->gid, after;
    char mac[32] = "", g0[64], g1[64];
    FILE *f = fopen("/sys/class/net/veth0/address", "r");
    if (f) {
        if (!fgets(mac, sizeof(mac), f)) mac[0] = '\0';
        fclose(f);
    }
    mac[strcspn(mac, "\n")] = '\0';
    CHECK(mac[0], "veth0's MAC address");
    int flapped = mac[0] && flap_veth0("02:00:00:00:99:01", &before);
    CHECK(flapped, "rxe0's GID[%d] changed after the flap", d->gid_index);
    rcoll_vrb_poll_async(); /* the port's down and up events, as a running job reads them */
    if (flapped) {
        rcoll_ibv->query_gid(d->ctx, (uint8_t)d->port, d->gid_index, &after);
        printf("  rxe0 GID[%d] %s -> %s\n", d->gid_index,
               rcoll_vrb_gid_str(before.raw, g0, sizeof(g0)),
               rcoll_vrb_gid_str(after.raw, g1, sizeof(g1)));
        uint64_t t0 = rcoll_now_ns();
        rcoll_status_t st = pair_open(&p);
        CHECK(st == RCOLL_OK, "pair_open after the flap: %s", rcoll_err_get());
        if (p.rc) tp_transfer(&p, 1 << 20, 1 << 20, 0, 0, 12);
        printf("  a connection and 1 MiB after the flap: %s in %.2f s\n",
               check_case_failed() ? "FAILED" : "ok", (double)(rcoll_now_ns() - t0) / 1e9);
        CHECK(!memcmp(d->gid.raw, after.raw, 16), "rxe0's GID is the new one");
        pair_close(&p);
    }
    if (mac[0]) CHECK(flap_veth0(mac, &after), "veth0's MAC address restored");
    rcoll_vrb_poll_async();
}

/* Child side: listen, send the handle up, accept, post a 64 MiB receive, wait to be killed. */
static int run_child(int fd_in, int fd_out)
{
    void *lc = NULL, *rc = NULL, *rreq = NULL;
    char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    if (T->listen(0, handle, &lc) != RCOLL_OK) return 2;
    if (write(fd_out, handle, sizeof(handle)) != (ssize_t)sizeof(handle)) return 3;
    uint64_t end = rcoll_now_ns() + DEADLINE_NS;
    while (!rc && rcoll_now_ns() < end)
        if (T->accept(lc, &rc) != RCOLL_OK) return 4;
    size_t n = (size_t)64 << 20;
    void *buf = malloc(n);
    if (!rc || T->irecv(rc, 1, &buf, &n, NULL, NULL, &rreq) != RCOLL_OK) return 5;
    char c;
    (void)!read(fd_in, &c, 1); /* blocks until the parent kills us or closes the pipe */
    return 0;
}

static void test_reg_cache(void)
{
    pair_t p;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    if (!p.rc) return;
    rcoll_vrb_mr_cache_t *mrs = rcoll_vrb_dev(pair_listen_dev)->mrs;
    int base = rcoll_vrb_mr_count(mrs);
    char *buf = aligned_alloc(4096, 3 * 4096);
    void *a = NULL, *b = NULL;
    CHECK(T->reg_mr(p.rc, buf, 3 * 4096, RCOLL_PTR_HOST, &a) == RCOLL_OK, "reg whole");
    CHECK(T->reg_mr(p.rc, buf + 100, 200, RCOLL_PTR_HOST, &b) == RCOLL_OK, "reg inside");
    CHECK(a == b && rcoll_vrb_mr_count(mrs) == base + 1, "one registration serves both");
    CHECK(T->reg_mr(p.rc, buf, 10, RCOLL_PTR_CUDA, &b) == RCOLL_ERR_UNSUPPORTED,
          "CUDA memory refused with a reason");
    T->dereg_mr(p.rc, a);
    CHECK(rcoll_vrb_mr_count(mrs) == base + 1, "still referenced");
    T->dereg_mr(p.rc, a);
    CHECK(rcoll_vrb_mr_count(mrs) == base, "deregistered with the last reference");
    free(buf);
    pair_close(&p);
}

/* Messages into and out of CUDA-registered memory, with the flush, as NCCL drives a GPUDirect
 * RDMA receive (isend/irecv with the mhandles of reg_mr(RCOLL_PTR_CUDA), then iflush).  The VM
 * has no GPU: RCOLL_IB_GDR=peermem makes the transport register the buffers with ibv_reg_mr
 * as it registers device pointers through nvidia-peermem, and the buffers are host memory
 * made untouchable (PROT_NONE) once registered, as device memory is to the host: rxe moves
 * the bytes through the pages it pinned, while any host access by the transport (an inline
 * send copies the message with the CPU) is a SIGSEGV.  The flush is a real RDMA read on the
 * receive comm's loopback QP. */
static void test_gdr_peermem(void)
{
    const size_t cap = (size_t)1 << 20, page = 4096;
    int saved = cfg->ib_gdr;
    cfg->ib_gdr = RCOLL_IB_GDR_PEERMEM;
    rcoll_transport_props_t pr;
    CHECK(T->get_props(pair_listen_dev, &pr) == RCOLL_OK &&
              pr.ptr_support == (RCOLL_PTR_HOST | RCOLL_PTR_CUDA),
          "RCOLL_IB_GDR=peermem: CUDA memory supported (0x%x)", pr.ptr_support);
    pair_t p;
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    unsigned char *src = aligned_alloc(page, cap), *dst = aligned_alloc(page, cap + page);
    unsigned char *ref = malloc(cap);
    void *smh = NULL, *rmh = NULL, *hmh = NULL;
    if (!p.rc || !src || !dst || !ref) goto out;
    CHECK(T->reg_mr(p.sc, src, cap, RCOLL_PTR_CUDA, &smh) == RCOLL_OK &&
              T->reg_mr(p.rc, dst, cap + page, RCOLL_PTR_CUDA, &rmh) == RCOLL_OK,
          "CUDA registrations on both sides");
    if (!smh || !rmh) goto out;
    static const size_t sizes[] = {1, 7, 64, 65, 4096, 65539, (size_t)1 << 20};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && !check_case_failed(); k++) {
        size_t n = sizes[k];
        fill(src, cap, (unsigned)k + 11);
        memcpy(ref, src, n);
        memset(dst, 0xa5, cap + page);
        CHECK(mprotect(src, cap, PROT_NONE) == 0 && mprotect(dst, cap + page, PROT_NONE) == 0,
              "buffers made untouchable");
        void *rreq = NULL, *sreq = NULL, *freq = NULL, *d = dst;
        size_t want = cap, got = 0;
        rcoll_status_t st = RCOLL_OK;
        for (uint64_t end = rcoll_now_ns() + DEADLINE_NS; !rreq && st == RCOLL_OK &&
             rcoll_now_ns() < end;)
            st = T->irecv(p.rc, 1, &d, &want, NULL, &rmh, &rreq);
        for (uint64_t end = rcoll_now_ns() + DEADLINE_NS; rreq && !sreq && st == RCOLL_OK &&
             rcoll_now_ns() < end;)
            st = T->isend(p.sc, src, n, -1, smh, &sreq);
        CHECK(st == RCOLL_OK && rreq && sreq, "%zu B: posted", n);
        if (st == RCOLL_OK && rreq && sreq) st = wait2(&sreq, &rreq, &got);
        CHECK(st == RCOLL_OK && got == n, "%zu B: received %zu", n, got);
        int isz = (int)n;
        if (st == RCOLL_OK) st = T->iflush(p.rc, 1, &d, &isz, &rmh, &freq);
        CHECK(st == RCOLL_OK && freq, "%zu B: a flush request for CUDA memory", n);
        if (freq) CHECK(wait1(freq, NULL, DEADLINE_NS) == RCOLL_OK, "%zu B: flush done", n);
        mprotect(src, cap, PROT_READ | PROT_WRITE);
        mprotect(dst, cap + page, PROT_READ | PROT_WRITE);
        CHECK(memcmp(dst, ref, n) == 0 && guard_ok(dst + n, cap + page - n, 0xa5),
              "%zu B: data and the bytes after it", n);
    }
    /* host memory needs no flush: no request */
    CHECK(T->reg_mr(p.rc, ref, cap, RCOLL_PTR_HOST, &hmh) == RCOLL_OK, "host registration");
    void *freq = (void *)1, *hd = ref;
    int one = 1;
    CHECK(hmh && T->iflush(p.rc, 1, &hd, &one, &hmh, &freq) == RCOLL_OK && !freq,
          "host memory: flushed at once (no request)");
out:
    if (hmh) T->dereg_mr(p.rc, hmh);
    if (smh) T->dereg_mr(p.sc, smh);
    if (rmh) T->dereg_mr(p.rc, rmh);
    pair_close(&p);
    free(src);
    free(dst);
    free(ref);
    cfg->ib_gdr = saved;
}

/* With the defaults, rxe registers no CUDA memory, and says why. */
static void test_gdr_auto(void)
{
    char buf[4096];
    rcoll_transport_props_t pr;
    CHECK(T->get_props(0, &pr) == RCOLL_OK && pr.ptr_support == RCOLL_PTR_HOST,
          "RCOLL_IB_GDR=auto on rxe: host memory only (0x%x)", pr.ptr_support);
    T->describe(0, buf, sizeof(buf));
    CHECK(strstr(buf, "GPUDirect RDMA: rxe") && strstr(buf, "registers no CUDA memory") &&
              strstr(buf, "takes no dma-buf") && strstr(buf, "nvidia-peermem is not loaded"),
          "rcoll-info's line says why: %s", buf);
    pair_t p;
    void *mh = NULL;
    char *b = aligned_alloc(4096, 4096);
    CHECK(pair_open(&p) == RCOLL_OK, "pair_open");
    rcoll_status_t st = p.rc ? T->reg_mr(p.rc, b, 4096, RCOLL_PTR_CUDA, &mh) : RCOLL_OK;
    CHECK(st == RCOLL_ERR_UNSUPPORTED && strstr(rcoll_err_get(), "GPUDirect RDMA"),
          "CUDA registration refused with the reason: %s", rcoll_err_get());
    pair_close(&p);
    free(b);
}

int main(int argc, char **argv)
{
    check_set_note(rcoll_err_get);
    rcoll_status_t st = rcoll_transport_ensure_init(T);
    if (st != RCOLL_OK) {
        check_skip("verbs transport unavailable here: %s", rcoll_err_get());
        return check_summary(); /* nothing ran: 77 */
    }
    cfg = (rcoll_vrb_config_t *)rcoll_vrb_cfg;
    T->devices(&ndev);
    if (argc == 4 && !strcmp(argv[1], "--child")) return run_child(atoi(argv[2]), atoi(argv[3]));
    if (argc == 2 && !strcmp(argv[1], "--gid-flap")) {
        pair_connect_dev = 1;
        cfg->ib_timeout = 12;
        if (!getenv("RXE_VM"))
            check_skip("--gid-flap changes veth0: only inside tools/rxe-vm (RXE_VM=1)");
        else
            check_case("a port flap changes the GID: later connections use the new one",
                       test_gid_flap);
        T->fini();
        return check_summary();
    }
    /* two ports (rxe0, rxe1): listen on one, connect from the other, so traffic crosses */
    pair_connect_dev = ndev > 1 ? 1 : 0;
    cfg->ib_timeout = 12; /* ~17 ms per retry: a dead peer is noticed in well under a second */
    check_case("props", test_props);
    check_case("sizes 0 B..64 MiB, 1 QP", sizes1);
    check_case("sizes 0 B..64 MiB, 4 QPs", sizes4);
    check_case("48 requests in flight", pipeline);
    check_case("grouped irecv", tp_case_grouped);
    check_case("64 connections", test_many);
    check_case("registration cache", test_reg_cache);
    check_case("GPUDirect RDMA with the defaults: refused on rxe, with the reason", test_gdr_auto);
    check_case("GPUDirect RDMA path (RCOLL_IB_GDR=peermem), untouchable buffers, flush",
               test_gdr_peermem);
    check_case("tag and size mismatch -> INVALID_USAGE at the sender, PROTOCOL at the receiver",
               test_tag_and_size);
    check_case("bad rkey -> remote access error", test_bad_rkey);
    check_case("no receive posted -> RNR retry exceeded", test_rnr);
    check_case("peer killed mid-transfer", test_killed_peer);
    T->fini();
    return check_summary();
}
