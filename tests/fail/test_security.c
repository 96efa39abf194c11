/*
 * test_security.c - the testable claims of docs/security.md, each with real processes and
 * sockets: the bootstrap root refuses a wrong secret (with a sentence, and without being
 * poisoned by it), out-of-range ranks and mismatched job sizes, and oversize lengths (root
 * and rank side); a TCP transport endpoint refuses a wrong nonce, an out-of-range socket
 * index and a frame longer than the posted buffer; with RCOLL_SOCKET_IFNAME=lo every
 * listening socket of a rank is on 127.0.0.1 (also the environment root's, when the
 * RCOLL_ROOT address is not local), and none is on the wildcard address without it; shared-
 * memory segments are memfds, or /dev/shm files created 0600 and unlinked at once.
 *
 * The bootstrap's wire layout is mirrored here (private to core/bootstrap_*.c): a change
 * of it must change this test too, which is the point of pinning it.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "mp.h"
#include "tp_harness.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "util/config.h"
#include "util/net.h"
#include "util/status.h"

const rcoll_transport_ops_t *T = &rcoll_transport_tcp;

/* ------------------------------------------------------------------------------------------
 * The bootstrap wire format (core/bootstrap_wire.h, core/bootstrap_int.h)
 * ---------------------------------------------------------------------------------------- */

#define BS_MAGIC 0x52434f42u
#define BS_VERSION 4 /* core/bootstrap_wire.h */
enum { BS_HELLO = 1, BS_NACK, BS_TABLE };

typedef struct {
    uint32_t magic;
    uint16_t version, type;
    uint32_t len, pad;
} hdr_t;

typedef struct {
    char secret[RCOLL_SECRET_BYTES];
    int32_t rank, nranks;
    rcoll_peer_info_t info;
} hello_t;

typedef struct {
    int32_t culprit, status;
    char text[RCOLL_BS_TEXT_MAX];
} note_t;

typedef struct {
    uint32_t magic;
    uint16_t version, pad;
    rcoll_sockaddr_t root;
    char secret[RCOLL_SECRET_BYTES];
    uint8_t nalt, pad2;
    uint8_t alt[RCOLL_BS_ROOT_ADDRS - 1][6]; /* the root's other IPv4 addresses and ports */
} sec_id_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A blocking connection to the root of id, reads bounded by 3 s. */
static int bs_connect(const rcoll_unique_id_t *id)
{
    sec_id_t b;
    memcpy(&b, id->internal, sizeof(b));
    int fd = socket(b.root.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {3, 0};
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, &b.root.sa, rcoll_net_addr_len(&b.root)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send a hello (secret of id, flipped when wrong) and read the answer: 1 with *n filled for
 * a NACK, 0 when the root closed the connection without one, -1 for anything else. */
static int bs_hello(int fd, const rcoll_unique_id_t *id, int wrong, int rank, int nranks,
                    note_t *n)
{
    sec_id_t b;
    memcpy(&b, id->internal, sizeof(b));
    struct {
        hdr_t h;
        hello_t m;
    } msg;
    memset(&msg, 0, sizeof(msg));
    msg.h = (hdr_t){.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLO,
                    .len = sizeof(hello_t)};
    memcpy(msg.m.secret, b.secret, RCOLL_SECRET_BYTES);
    if (wrong) msg.m.secret[RCOLL_SECRET_BYTES - 1] ^= 1; /* the last byte: all but one right */
    msg.m.rank = rank;
    msg.m.nranks = nranks;
    snprintf(msg.m.info.hostname, sizeof(msg.m.info.hostname), "intruder");
    if (send(fd, &msg, sizeof(msg), MSG_NOSIGNAL) != (ssize_t)sizeof(msg)) return -1;
    hdr_t h;
    ssize_t got = recv(fd, &h, sizeof(h), MSG_WAITALL);
    if (got <= 0) return got == 0 || errno == ECONNRESET ? 0 : -1;
    if (got != sizeof(h) || h.magic != BS_MAGIC || h.type != BS_NACK || h.len != sizeof(*n))
        return -1;
    memset(n, 0, sizeof(*n));
    if (recv(fd, n, sizeof(*n), MSG_WAITALL) != (ssize_t)sizeof(*n)) return -1;
    n->text[sizeof(n->text) - 1] = '\0';
    return 1;
}

/* After a refusal the root closes the connection: EOF (or a reset) within 3 s. */
static int sees_close(int fd)
{
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
}

static int new_id(rcoll_unique_id_t *id)
{
    rcoll_status_t st = rcoll_get_unique_id(id);
    CHECK(st == RCOLL_OK, "rcoll_get_unique_id: %s", rcoll_last_init_error());
    return st == RCOLL_OK;
}

/* A communicator of one rank through the root of id: the root still serves real ranks. */
static int one_rank_ok(const rcoll_unique_id_t *id)
{
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_rank(1, id, 0, &comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "init of 1 rank: %s\n", rcoll_last_init_error());
        return 0;
    }
    rcoll_comm_destroy(comm);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Bootstrap
 * ---------------------------------------------------------------------------------------- */

static void wrong_secret(void)
{
    rcoll_unique_id_t id, bad;
    if (!new_id(&id)) return;
    /* A raw hello with all but one byte of the secret right, announcing a huge job (which must
     * not be believed: the secret is checked before anything else of the hello). */
    note_t n;
    int fd = bs_connect(&id);
    CHECK(fd >= 0, "connect to the root");
    int r = bs_hello(fd, &id, 1, 0, 1 << 30, &n);
    CHECK(r == 1 && n.status == RCOLL_ERR_AUTH && strstr(n.text, "wrong job secret"),
          "wrong secret: answer %d, status %d, text '%s'", r, n.status, r == 1 ? n.text : "");
    CHECK(sees_close(fd), "the root closes a connection with a wrong secret");
    if (fd >= 0) close(fd);
    /* A real rank with a wrong secret fails with a sentence naming the cause. */
    bad = id;
    sec_id_t b;
    memcpy(&b, bad.internal, sizeof(b));
    b.secret[0] ^= 0x20;
    memcpy(bad.internal, &b, sizeof(b));
    rcoll_comm_t comm = NULL;
    double t0 = now_s();
    rcoll_status_t st = rcoll_comm_init_rank(1, &bad, 0, &comm);
    const char *why = rcoll_last_init_error();
    CHECK(st == RCOLL_ERR_AUTH && why && strstr(why, "rejected this rank: wrong job secret"),
          "init with a wrong secret: %s: %s", rcoll_status_string(st), why ? why : "");
    CHECK(now_s() - t0 < 5, "refused within %.1f s", now_s() - t0);
    if (st == RCOLL_OK) rcoll_comm_destroy(comm);
    /* The refused hellos left no trace: the job size is still open, the real rank joins. */
    CHECK(one_rank_ok(&id), "the root still admits the rank with the right secret");
}

/* A loopback address that refuses connections: a listener that was closed. */
static rcoll_sockaddr_t refusing_addr(void)
{
    rcoll_sockaddr_t a;
    memset(&a, 0, sizeof(a));
    a.sin.sin_family = AF_INET;
    a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = -1;
    if (rcoll_net_listen(&a, 1, 0, &fd) == RCOLL_OK) close(fd);
    return a;
}

/* A root of one rank on 127.0.0.1 with this secret; its address in *a. */
static int loop_root(const char *secret, rcoll_sockaddr_t *a)
{
    rcoll_config_t cfg;
    rcoll_unique_id_t unused;
    memset(a, 0, sizeof(*a));
    a->sin.sin_family = AF_INET;
    a->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (rcoll_config_load(&cfg) != RCOLL_OK ||
        rcoll_bs_root_start(&cfg, a, 1, secret, 0, &unused, NULL) != RCOLL_OK) {
        CHECK(0, "a root on 127.0.0.1: %s", rcoll_err_get());
        return 0;
    }
    return 1;
}

/* Join a communicator of one rank through id: its status and the time taken. */
static rcoll_status_t join_one(const rcoll_unique_id_t *id, double *t)
{
    rcoll_comm_t comm = NULL;
    double t0 = now_s();
    rcoll_status_t st = rcoll_comm_init_rank(1, id, 0, &comm);
    *t = now_s() - t0;
    if (st == RCOLL_OK) rcoll_comm_destroy(comm);
    return st;
}

/* An id's first address that does not answer: the rank tries the id's alternatives (the
 * root's other addresses) instead of waiting for the first until its deadline. */
static void root_alternatives(void)
{
    char secret[RCOLL_SECRET_BYTES] = "alternatives";
    rcoll_sockaddr_t addrs[2], root;
    rcoll_unique_id_t id;
    double t;
    /* refused first address */
    if (!loop_root(secret, &root)) return;
    addrs[0] = refusing_addr();
    addrs[1] = root;
    rcoll_bs_make_id(addrs, 2, secret, &id);
    rcoll_status_t st = join_one(&id, &t);
    printf("  first address refused: joined through the alternative in %.3f s\n", t);
    CHECK(st == RCOLL_OK && t < 1.0, "refused first address: %s after %.3f s: %s",
          rcoll_status_string(st), t, st ? rcoll_last_init_error() : "");
    /* silent first address: a listener whose accept queue is full drops every new SYN */
    if (!loop_root(secret, &root)) return;
    rcoll_sockaddr_t dark;
    tp_silent_t quiet;
    int silent = tp_silent_listener(&dark, &quiet);
    CHECK(silent, "a silent listener (%d fillers)", quiet.nfill);
    addrs[0] = dark;
    addrs[1] = root;
    rcoll_bs_make_id(addrs, 2, secret, &id);
    st = join_one(&id, &t);
    printf("  first address silent: joined through the alternative in %.3f s\n", t);
    CHECK(st == RCOLL_OK && t > 1.9 && t < 3.5, "silent first address: %s after %.3f s (2 s "
          "per try): %s", rcoll_status_string(st), t, st ? rcoll_last_init_error() : "");
    tp_silent_close(&quiet);
    /* every address refuses: the error at the deadline (RCOLL_TIMEOUT + 2 s) names each */
    addrs[0] = refusing_addr();
    addrs[1] = refusing_addr();
    rcoll_bs_make_id(addrs, 2, secret, &id);
    setenv("RCOLL_TIMEOUT", "1", 1);
    st = join_one(&id, &t);
    setenv("RCOLL_TIMEOUT", "10", 1);
    const char *why = rcoll_last_init_error();
    char a0[64], a1[64];
    rcoll_net_addr_str(&addrs[0], a0, sizeof(a0));
    rcoll_net_addr_str(&addrs[1], a1, sizeof(a1));
    printf("  every address refused: %s\n", why ? why : "");
    CHECK(st == RCOLL_ERR_TIMEOUT && why && strstr(why, "any of the 2 addresses") &&
              strstr(why, a0) && strstr(why, a1) && t < 4.5,
          "every address refused: %s after %.3f s: %s", rcoll_status_string(st), t,
          why ? why : "");
    /* an id of the earlier layout (no alternatives: those bytes zero) still joins */
    if (!loop_root(secret, &root)) return;
    rcoll_bs_make_id(&root, 1, secret, &id);
    st = join_one(&id, &t);
    CHECK(st == RCOLL_OK, "an id with one address: %s", rcoll_status_string(st));
}

static void bad_ranks(void)
{
    rcoll_unique_id_t id;
    note_t n;
    if (!new_id(&id)) return;
    int keep = bs_connect(&id); /* rank 0 of 2 joins (and keeps the job size at 2) */
    CHECK(keep >= 0, "connect");
    sec_id_t b;
    memcpy(&b, id.internal, sizeof(b));
    struct {
        hdr_t h;
        hello_t m;
    } msg;
    memset(&msg, 0, sizeof(msg));
    msg.h = (hdr_t){.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLO,
                    .len = sizeof(hello_t)};
    memcpy(msg.m.secret, b.secret, RCOLL_SECRET_BYTES);
    msg.m.rank = 0;
    msg.m.nranks = 2;
    CHECK(send(keep, &msg, sizeof(msg), MSG_NOSIGNAL) == (ssize_t)sizeof(msg), "hello");
    static const struct {
        int rank, nranks;
        const char *text;
    } cases[] = {
        {-1, 2, "invalid rank -1 of 2"},
        {2, 2, "invalid rank 2 of 2"},
        {7, 3, "invalid rank 7 of 3"},
        {0, 0, "invalid rank 0 of 0"},
        {1, 5, "rank 1 says nranks=5 but the job has 2 ranks"},
        {0, 2, "rank 0 already joined"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fd = bs_connect(&id);
        int r = bs_hello(fd, &id, 0, cases[i].rank, cases[i].nranks, &n);
        CHECK(r == 1 && strstr(n.text, cases[i].text) && n.status < 0,
              "rank %d of %d: answer %d, status %d, text '%s' (expected '%s')", cases[i].rank,
              cases[i].nranks, r, n.status, r == 1 ? n.text : "", cases[i].text);
        CHECK(fd >= 0 && sees_close(fd), "the root closes the refused connection");
        if (fd >= 0) close(fd);
    }
    if (keep >= 0) close(keep);
}

static void oversize_to_root(void)
{
    rcoll_unique_id_t id;
    if (!new_id(&id)) return;
    static const uint32_t lens[] = {0xffffffffu, 0x80000000u, sizeof(hello_t) + 1, 0};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        int fd = bs_connect(&id);
        hdr_t h = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLO, .len = lens[i]};
        CHECK(fd >= 0 && send(fd, &h, sizeof(h), MSG_NOSIGNAL) == (ssize_t)sizeof(h),
              "send a header");
        double t0 = now_s();
        CHECK(fd >= 0 && sees_close(fd) && now_s() - t0 < 1.5,
              "a hello header of %u bytes is dropped at once (%.2f s)", lens[i], now_s() - t0);
        if (fd >= 0) close(fd);
    }
    CHECK(one_rank_ok(&id), "the root still admits a real rank");
}

/* A fake root: answers the first hello with a header announcing len bytes of type. */
typedef struct {
    int lfd;
    uint16_t type;
    uint32_t len;
} fake_root_t;

static void *fake_root(void *arg)
{
    fake_root_t *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    char buf[sizeof(hdr_t) + sizeof(hello_t)];
    if (recv(fd, buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf)) {
        hdr_t h = {.magic = BS_MAGIC, .version = BS_VERSION, .type = f->type, .len = f->len};
        if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h)) perror("fake root");
        char c;
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while (recv(fd, &c, 1, 0) > 0) {}
    }
    close(fd);
    return NULL;
}

static void oversize_from_root(void)
{
    static const struct {
        uint16_t type;
        uint32_t len;
    } cases[] = {{BS_TABLE, 0xfffffff0u}, {BS_NACK, 0x7fffffffu}, {BS_TABLE, 1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rcoll_sockaddr_t a;
        memset(&a, 0, sizeof(a));
        a.sin.sin_family = AF_INET;
        a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fake_root_t f = {.type = cases[i].type, .len = cases[i].len};
        if (rcoll_net_listen(&a, 4, 0, &f.lfd) != RCOLL_OK) {
            CHECK(0, "fake root listen: %s", rcoll_err_get());
            return;
        }
        int flags = fcntl(f.lfd, F_GETFL);
        fcntl(f.lfd, F_SETFL, flags & ~O_NONBLOCK);
        char secret[RCOLL_SECRET_BYTES] = "s";
        rcoll_unique_id_t id;
        rcoll_bs_make_id(&a, 1, secret, &id);
        pthread_t th;
        pthread_create(&th, NULL, fake_root, &f);
        rcoll_comm_t comm = NULL;
        double t0 = now_s();
        rcoll_status_t st = rcoll_comm_init_rank(2, &id, 1, &comm);
        const char *why = rcoll_last_init_error();
        int ok = st == RCOLL_ERR_PROTOCOL && why &&
                 (strstr(why, "malformed reply") || strstr(why, "unexpected bootstrap reply"));
        CHECK(ok, "a root's %s of %u bytes: %s: %s", cases[i].type == BS_TABLE ? "table" : "NACK",
              cases[i].len, rcoll_status_string(st), why ? why : "");
        CHECK(now_s() - t0 < 5, "refused within %.1f s", now_s() - t0);
        if (st == RCOLL_OK) rcoll_comm_destroy(comm);
        pthread_join(th, NULL);
        close(f.lfd);
    }
}

/* ------------------------------------------------------------------------------------------
 * TCP transport endpoint
 * ---------------------------------------------------------------------------------------- */

static int tcp_raw(const char *handle, uint64_t nonce_delta, uint32_t index)
{
    rcoll_tcp_handle_t h;
    memcpy(&h, handle, sizeof(h));
    int fd = socket(h.addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, &h.addr.sa, rcoll_net_addr_len(&h.addr)) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    rcoll_tcp_hello_t m = {RCOLL_TCP_HELLO_MAGIC, RCOLL_TCP_VERSION, h.nonce + nonce_delta, 0,
                           index, h.nsocks, 0, 0};
    rcoll_random_bytes(&m.conn_id, sizeof(m.conn_id));
    if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void tcp_endpoint(void)
{
    rcoll_tcp_config_t cfg;
    if (rcoll_config_parse(T->config, &cfg) != RCOLL_OK || (cfg.nsocks = 1, 0) ||
        T->init(&cfg) != RCOLL_OK) {
        CHECK(0, "tcp init: %s", rcoll_err_get());
        return;
    }
    pair_t p;
    memset(&p, 0, sizeof(p));
    CHECK(T->listen(0, p.handle, &p.lc) == RCOLL_OK, "listen");
    void *rc = NULL;
    /* Without the listener's nonce (which only the bootstrap table carries), or with a socket
     * index out of range, a connection is dropped before any frame is read. */
    int fd = tcp_raw(p.handle, 1, 0);
    CHECK(fd >= 0 && raw_sees_close(fd, p.lc), "a wrong nonce is dropped");
    if (fd >= 0) close(fd);
    fd = tcp_raw(p.handle, 0, 5);
    CHECK(fd >= 0 && raw_sees_close(fd, p.lc), "socket index 5 of 1 is dropped");
    if (fd >= 0) close(fd);
    CHECK(accept_wait(p.lc, &rc, 0.2) == RCOLL_OK && rc == NULL, "nothing was accepted");
    /* With the nonce: a frame announcing 2^62 bytes fails the posted 1000-byte receive,
     * before anything is allocated or copied for it. */
    fd = tcp_raw(p.handle, 0, 0);
    CHECK(fd >= 0 && accept_wait(p.lc, &p.rc, 10) == RCOLL_OK && p.rc, "valid hello accepted");
    if (fd >= 0 && p.rc) {
        rcoll_tcp_frame_t h = {.magic = RCOLL_TCP_FRAME_MAGIC, .tag = 0,
                               .length = (uint64_t)1 << 62};
        char junk[4096];
        memset(junk, 0x5a, sizeof(junk));
        CHECK(send(fd, &h, sizeof(h), MSG_NOSIGNAL) == (ssize_t)sizeof(h), "send the header");
        CHECK(send(fd, junk, sizeof(junk), MSG_NOSIGNAL) == (ssize_t)sizeof(junk), "send junk");
        unsigned char buf[1000 + 64];
        memset(buf, 0, sizeof(buf));
        void *dp = buf, *rreq = NULL, *none = NULL;
        size_t cap = 1000;
        CHECK(T->irecv(p.rc, 1, &dp, &cap, NULL, NULL, &rreq) == RCOLL_OK, "irecv");
        rcoll_status_t st = wait2(&none, &rreq, NULL);
        CHECK(st == RCOLL_ERR_INVALID_USAGE && strstr(rcoll_err_get(), "larger than the posted"),
              "a 2^62-byte frame into 1000 bytes: %s: %s", rcoll_status_string(st),
              rcoll_err_get());
        CHECK(guard_ok(buf, sizeof(buf), 0), "nothing was written to the receive buffer");
    }
    if (fd >= 0) close(fd);
    pair_close(&p);
    T->fini();
}

/* ------------------------------------------------------------------------------------------
 * Listening sockets
 * ---------------------------------------------------------------------------------------- */

typedef struct {
    char addr[64]; /* printable */
    unsigned port;
    int loopback, wildcard;
} lsock_t;

/* The TCP sockets in LISTEN state that process pid holds (its fds matched by inode against
 * /proc/<pid>/net/tcp and tcp6).  Returns how many, or -1 when they cannot be read. */
static int listeners(pid_t pid, lsock_t *out, int max)
{
    char path[64], link[64];
    unsigned long inos[512];
    int nino = 0, n = 0;
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) && nino < 512;) {
        char fp[384];
        snprintf(fp, sizeof(fp), "%s/%s", path, e->d_name);
        ssize_t l = readlink(fp, link, sizeof(link) - 1);
        if (l <= 0) continue;
        link[l] = '\0';
        if (sscanf(link, "socket:[%lu]", &inos[nino]) == 1) nino++;
    }
    closedir(d);
    for (int v6 = 0; v6 < 2; v6++) {
        snprintf(path, sizeof(path), "/proc/%d/net/tcp%s", (int)pid, v6 ? "6" : "");
        FILE *f = fopen(path, "r");
        if (!f) {
            if (!v6) return -1;
            continue;
        }
        char line[512], hex[40];
        unsigned port, state;
        unsigned long ino;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, " %*s %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", hex, &port,
                       &state, &ino) == 4 && state == 0x0A) {
                int mine = 0;
                for (int i = 0; i < nino && !mine; i++) mine = inos[i] == ino;
                if (!mine || n >= max) continue;
                lsock_t *s = &out[n++];
                s->port = port;
                /* each 32-bit word printed as the native value of its network-order bytes */
                unsigned char a[16];
                memset(a, 0, sizeof(a));
                for (size_t w = 0; w < strlen(hex) / 8 && w < 4; w++) {
                    char word_hex[9];
                    memcpy(word_hex, hex + 8 * w, 8);
                    word_hex[8] = '\0';
                    uint32_t word = (uint32_t)strtoul(word_hex, NULL, 16);
                    memcpy(a + 4 * w, &word, 4);
                }
                static const unsigned char zero[16], lo6[16] = {[15] = 1};
                if (!v6) {
                    inet_ntop(AF_INET, a, s->addr, sizeof(s->addr));
                    s->loopback = a[0] == 127;
                    s->wildcard = !memcmp(a, zero, 4);
                } else {
                    inet_ntop(AF_INET6, a, s->addr, sizeof(s->addr));
                    s->loopback = !memcmp(a, lo6, 16);
                    s->wildcard = !memcmp(a, zero, 16);
                }
            }
        fclose(f);
    }
    return n;
}

/* Every listener of pid is on loopback; at least min of them.  0 when so, else the exit code. */
static int all_loopback(pid_t pid, int min, const char *who)
{
    lsock_t s[64];
    int n = listeners(pid, s, 64);
    if (n < min) {
        fprintf(stderr, "%s: %d listening sockets (expected at least %d)\n", who, n, min);
        return 20;
    }
    for (int i = 0; i < n; i++)
        if (!s[i].loopback) {
            fprintf(stderr, "%s: listens on %s:%u, not on loopback\n", who, s[i].addr,
                    s[i].port);
            return 21;
        }
    return 0;
}

static int rank_listeners(rcoll_comm_t comm, int rank, int nranks, void *arg)
{
    (void)arg;
    (void)nranks;
    int32_t x = 1;
    if (rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, comm) != RCOLL_OK)
        return 10;
    char who[32];
    snprintf(who, sizeof(who), "rank %d", rank);
    return all_loopback(getpid(), 1, who);
}

static void listen_ifname_lo(void)
{
    setenv("RCOLL_TRANSPORT", "tcp", 1);
    mp_result_t res;
    int bad = mp_run(2, rank_listeners, NULL, 30, &res);
    unsetenv("RCOLL_TRANSPORT");
    for (int r = 0; r < 2; r++)
        CHECK(res.codes[r] == 0, "rank %d's listeners (RCOLL_TRANSPORT=tcp, "
              "RCOLL_SOCKET_IFNAME=lo): exit %d (20: none, 21: one not on loopback)", r,
              res.codes[r]);
    (void)bad;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

/* Environment launch whose RCOLL_ROOT is not an address of this host (a NAT'ed name): rank 0
 * cannot bind it and falls back; with RCOLL_SOCKET_IFNAME=lo it must fall back to 127.0.0.1,
 * not to the wildcard address.  Rank 0 keeps trying to reach RCOLL_ROOT meanwhile, and its
 * listeners are read from here. */
static void listen_env_fallback(void)
{
    const char *far = "192.0.2.1"; /* TEST-NET-1: not an address of this host */
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, far, &a.sin_addr);
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int local = probe >= 0 && bind(probe, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (probe >= 0) close(probe);
    if (local) {
        check_skip("%s is an address of this host", far);
        return;
    }
    int port = free_port();
    CHECK(port > 0, "a free port");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(90);
        char root[64];
        snprintf(root, sizeof(root), "%s:%d", far, port);
        setenv("RCOLL_ROOT", root, 1);
        setenv("RCOLL_RANK", "0", 1);
        setenv("RCOLL_NRANKS", "2", 1);
        setenv("RCOLL_SECRET", "fallback-test", 1);
        setenv("RCOLL_TIMEOUT", "6", 1);
        rcoll_comm_t comm;
        _exit(rcoll_comm_init_env(&comm) == RCOLL_OK ? 1 : 0);
    }
    lsock_t s[64];
    int n = 0, seen = 0;
    double end = now_s() + 4;
    while (!seen && now_s() < end) {
        sleep_ms(20);
        n = listeners(pid, s, 64);
        for (int i = 0; i < n; i++) seen |= s[i].port == (unsigned)port;
    }
    CHECK(seen, "rank 0 listens on port %d (the RCOLL_ROOT port)", port);
    for (int i = 0; i < n; i++)
        CHECK(s[i].loopback, "rank 0 (RCOLL_ROOT=%s:%d, RCOLL_SOCKET_IFNAME=lo) listens on "
              "%s:%u", far, port, s[i].addr, s[i].port);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* The root of rcoll_get_unique_id listens on the chosen interface's address: on 127.0.0.1
 * with RCOLL_SOCKET_IFNAME=lo, and never on the wildcard address without it. */
static void listen_unique_id(void)
{
    for (int pass = 0; pass < 2; pass++) {
        if (pass) unsetenv("RCOLL_SOCKET_IFNAME");
        rcoll_unique_id_t id;
        lsock_t before[64], s[64];
        int nb = listeners(getpid(), before, 64);
        int ok = new_id(&id);
        int n = listeners(getpid(), s, 64);
        sec_id_t b;
        memcpy(&b, id.internal, sizeof(b));
        unsigned port = rcoll_net_addr_port(&b.root);
        int found = 0;
        for (int i = 0; ok && i < n; i++) {
            int alt = 0; /* the id's alternative addresses: listeners of the root too */
            for (int k = 0; k < b.nalt && k < RCOLL_BS_ROOT_ADDRS - 1; k++)
                alt |= s[i].port == (unsigned)((b.alt[k][4] << 8) | b.alt[k][5]);
            if (s[i].port != port && !alt) continue;
            found |= s[i].port == port;
            CHECK(pass ? !s[i].wildcard : s[i].loopback, "root of rcoll_get_unique_id (%s) "
                  "listens on %s:%u", pass ? "RCOLL_SOCKET_IFNAME unset" :
                  "RCOLL_SOCKET_IFNAME=lo", s[i].addr, s[i].port);
        }
        CHECK(!ok || (nb >= 0 && found), "the root's listener (port %u) is found", port);
        if (ok) one_rank_ok(&id); /* lets the root finish */
        setenv("RCOLL_SOCKET_IFNAME", "lo", 1);
    }
}

/* ------------------------------------------------------------------------------------------
 * Shared memory: this program's memfd_create and shm_open stand in for libc's (the library
 * is linked into it), so that the /dev/shm path can be forced and each creation inspected.
 * ---------------------------------------------------------------------------------------- */

static int memfd_off;     /* memfd_create fails for the shm transport (forces /dev/shm) */
static int n_memfd, n_shm_open, shm_bad_mode;
static char shm_names[8][160];

int memfd_create(const char *name, unsigned int flags)
{
    if (memfd_off && (!strcmp(name, "rcoll-shm") || !strcmp(name, "rcoll-probe"))) {
        errno = ENOSYS;
        return -1;
    }
    if (!strcmp(name, "rcoll-shm")) n_memfd++;
    return (int)syscall(SYS_memfd_create, name, flags);
}

int shm_open(const char *name, int oflag, mode_t mode)
{
    char path[128];
    snprintf(path, sizeof(path), "/dev/shm/%s", name[0] == '/' ? name + 1 : name);
    int fd = open(path, oflag | O_NOFOLLOW | O_CLOEXEC, mode);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || (sb.st_mode & 077) || (mode & 077))) shm_bad_mode++;
    if (n_shm_open < 8) snprintf(shm_names[n_shm_open], sizeof(shm_names[0]), "%s", path);
    n_shm_open++;
    return fd;
}

static int rank_shm(rcoll_comm_t comm, int rank, int nranks, void *arg)
{
    (void)rank;
    (void)nranks;
    (void)arg;
    int32_t x[4096];
    for (int i = 0; i < 4096; i++) x[i] = i;
    if (rcoll_allreduce(RCOLL_IN_PLACE, x, 4096, RCOLL_INT32, RCOLL_SUM, comm) != RCOLL_OK)
        return 10;
    if (memfd_off) {
        if (n_shm_open < 1) return 11;  /* the /dev/shm path did not run */
        if (shm_bad_mode) return 12;    /* created with group/other permissions */
        for (int i = 0; i < n_shm_open && i < 8; i++)
            if (access(shm_names[i], F_OK) == 0) return 13; /* still named */
    } else {
        if (n_memfd < 1 || n_shm_open) return 14;
    }
    /* Nothing of this process in /dev/shm. */
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "rcoll-%d-", (int)getpid());
    DIR *d = opendir("/dev/shm");
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            closedir(d);
            return 13;
        }
    if (d) closedir(d);
    return 0;
}

static void shm_segments(void)
{
    setenv("RCOLL_TRANSPORT", "shm", 1);
    for (int off = 0; off < 2; off++) {
        memfd_off = off;
        mp_result_t res;
        mp_run(2, rank_shm, NULL, 30, &res);
        for (int r = 0; r < 2; r++)
            CHECK(res.codes[r] == 0, "rank %d, segments by %s: exit %d (11: no shm_open, 12: "
                  "mode not 0600, 13: a name left in /dev/shm, 14: no memfd)", r,
                  off ? "/dev/shm" : "memfd", res.codes[r]);
    }
    memfd_off = 0;
    unsetenv("RCOLL_TRANSPORT");
}

int main(void)
{
    setenv("RCOLL_SOCKET_IFNAME", "lo", 1);
    setenv("RCOLL_TIMEOUT", "10", 1);
    unsetenv("RCOLL_DEBUG");
    signal(SIGPIPE, SIG_IGN);
    /* Forking cases first, while this process has no root thread of its own. */
    check_case("listen: RCOLL_SOCKET_IFNAME=lo binds every listener of a rank to 127.0.0.1",
               listen_ifname_lo);
    check_case("listen: the environment root's fallback stays on RCOLL_SOCKET_IFNAME",
               listen_env_fallback);
    check_case("shm: segments are memfds, or /dev/shm files made 0600 and unlinked",
               shm_segments);
    check_case("listen: the root of rcoll_get_unique_id is never on the wildcard address",
               listen_unique_id);
    check_case("bootstrap: a wrong secret is refused with a sentence", wrong_secret);
    check_case("bootstrap: out-of-range ranks and mismatched job sizes are refused", bad_ranks);
    check_case("bootstrap: a root's first address that does not answer gives way to the "
               "id's alternatives", root_alternatives);
    check_case("bootstrap: oversize lengths to the root are dropped", oversize_to_root);
    check_case("bootstrap: a rank refuses a root's oversize lengths", oversize_from_root);
    check_case("tcp: wrong nonce, bad socket index and oversize frames are refused",
               tcp_endpoint);
    return check_summary();
}
