/*
 * ras.c - who is stuck, asked from outside (ras.h).  The records live apart from their
 * communicators, in one list under a mutex, each with a lock of its own: the answering thread
 * copies them without touching a communicator, and a communicator's threads update its record
 * (a lock taken a few times per operation, only with RCOLL_RAS=1).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/ras.h"
#include "core/sig.h"
#include "util/log.h"
#include "util/time.h"

#define RAS_TEXT 192
#define RAS_HIST 16 /* operations kept for the flight recorder */

typedef struct {
    char op[64];
    char call[RAS_TEXT];
    uint64_t start_ns, end_ns; /* end 0: not finished */
    rcoll_status_t st;
} ras_hist_t;

struct rcoll_ras_rec {
    struct rcoll_ras_rec *next, *prev;
    pthread_mutex_t lock;
    uint64_t ctx;
    char name[64];
    int rank, nranks;
    uint64_t started, finished; /* operations (collectives and point-to-point batches) */
    int running;
    char op[64];         /* "operation #17" */
    char call[RAS_TEXT]; /* "allreduce(count=1000, int32, sum)" */
    uint64_t start_ns, progress_ns;
    int waiting_peer, waiting_pid, waiting_recv;
    rcoll_status_t failed;
    char error[RAS_TEXT];
    int serve;                /* RCOLL_RAS=1: listed for the status socket */
    char flight_dir[256];     /* RCOLL_FLIGHT_DIR ("" none) */
    ras_hist_t hist[RAS_HIST]; /* the last operations, hist[(started - 1) % RAS_HIST] newest */
    uint64_t mono0_ns;        /* the monotonic clock at wall time wall0_s */
    double wall0_s;
    /* The job's map as this communicator sees it (rcoll-top asks remote hosts through it):
     * its hosts (one per host identity, in the order of their first rank), each rank's host
     * and pid.  Written at attach, read only after. */
    int nhosts;
    char (*hosts)[64];
    int32_t *host_of, *pids;
};

static pthread_mutex_t ras_lock = PTHREAD_MUTEX_INITIALIZER;
static rcoll_ras_rec_t *ras_list;
static pid_t ras_server_pid; /* the process whose thread runs (a forked child starts its own) */
static int ras_warned;

/* ---- the records ---- */

void rcoll_ras_op_start(rcoll_ras_rec_t *rec, const struct rcoll_comm *comm,
                        const struct rcoll_request *r)
{
    if (!rec) return;
    char call[RAS_TEXT], op[64];
    rcoll_sig_t s; /* computed here: an operation that needs no algorithm sets none */
    rcoll_sig_of(r, &s);
    if (r->kind == RCOLL_OP_P2P)
        snprintf(op, sizeof(op), "point-to-point");
    else
        rcoll_sig_op_number(&comm->opnum, s.seq, op, sizeof(op));
    rcoll_sig_format(&s, 1, call, sizeof(call));
    uint64_t now = rcoll_now_ns();
    pthread_mutex_lock(&rec->lock);
    rec->started++;
    rec->running = 1;
    memcpy(rec->op, op, sizeof(op));
    memcpy(rec->call, call, sizeof(call));
    rec->start_ns = rec->progress_ns = now;
    rec->waiting_peer = rec->waiting_pid = -1;
    ras_hist_t *h = &rec->hist[(rec->started - 1) % RAS_HIST];
    snprintf(h->op, sizeof(h->op), "%s", op);
    memcpy(h->call, call, sizeof(call));
    h->start_ns = now;
    h->end_ns = 0;
    h->st = RCOLL_OK;
    pthread_mutex_unlock(&rec->lock);
}

void rcoll_ras_op_wait(rcoll_ras_rec_t *rec, const struct rcoll_comm *comm,
                       const struct rcoll_request *r)
{
    if (!rec) return;
    int p = r->aop.waiting_peer;
    pthread_mutex_lock(&rec->lock);
    if (rec->running) {
        rec->waiting_peer = p >= 0 && p < comm->nranks ? p : -1;
        rec->waiting_pid = rec->waiting_peer >= 0 ? comm->peers[p].pid : -1;
        rec->waiting_recv = r->aop.waiting_recv;
        if (r->last_progress_ns && r->last_progress_ns > rec->progress_ns)
            rec->progress_ns = r->last_progress_ns;
    }
    pthread_mutex_unlock(&rec->lock);
}

void rcoll_ras_op_done(rcoll_ras_rec_t *rec, rcoll_status_t st)
{
    if (!rec) return;
    pthread_mutex_lock(&rec->lock);
    if (rec->running) {
        rec->finished++;
        ras_hist_t *h = &rec->hist[(rec->started - 1) % RAS_HIST];
        h->end_ns = rcoll_now_ns();
        h->st = st;
    }
    rec->running = 0;
    if (st < 0 && rec->failed == RCOLL_OK) rec->failed = st;
    pthread_mutex_unlock(&rec->lock);
}

void rcoll_ras_failed(rcoll_ras_rec_t *rec, rcoll_status_t st, const char *text)
{
    if (!rec) return;
    pthread_mutex_lock(&rec->lock);
    if (!rec->error[0]) snprintf(rec->error, sizeof(rec->error), "%s", text ? text : "");
    if (rec->failed == RCOLL_OK) rec->failed = st;
    pthread_mutex_unlock(&rec->lock);
}

/* ---- the JSON ---- */

typedef struct {
    char *buf;
    size_t len, used;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->used < o->len ? o->len - o->used : 0;
    int n = vsnprintf(room ? o->buf + o->used : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) o->used += (size_t)n;
}

static void put_str(out_t *o, const char *s)
{
    put(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            put(o, "\\%c", c);
        else if (c < 0x20)
            put(o, "\\u%04x", c);
        else
            put(o, "%c", c);
    }
    put(o, "\"");
}

/* The running operation's fields: first, right after a '{'; else after a field (a comma). */
static void put_running(out_t *o, const rcoll_ras_rec_t *c, uint64_t now, int first)
{
    put(o, "%s\"op\":", first ? "" : ",");
    put_str(o, c->op);
    put(o, ",\"call\":");
    put_str(o, c->call);
    put(o, ",\"for_s\":%.3f,\"idle_s\":%.3f", (now - c->start_ns) / 1e9,
        (now - c->progress_ns) / 1e9);
    if (c->waiting_peer >= 0)
        put(o, ",\"waiting_on\":%d,\"waiting_on_pid\":%d,\"waiting\":\"%s\"",
            c->waiting_peer, c->waiting_pid, c->waiting_recv ? "recv" : "send");
}

/* The JSON this process answers, written to buf (NUL-terminated, cut at len); returns the
 * length it needed. */
static size_t rcoll_ras_json(char *buf, size_t len)
{
    out_t o = {buf, len, 0};
    if (len) buf[0] = '\0';
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    uint64_t now = rcoll_now_ns();
    put(&o, "{\"pid\":%d,\"host\":", (int)getpid());
    put_str(&o, host);
    put(&o, ",\"uid\":%u,\"comms\":[", (unsigned)getuid());
    pthread_mutex_lock(&ras_lock);
    int first = 1;
    for (rcoll_ras_rec_t *r = ras_list; r; r = r->next) {
        if (!r->serve) continue;
        pthread_mutex_lock(&r->lock);
        rcoll_ras_rec_t c = *r;
        pthread_mutex_unlock(&r->lock);
        const char *state = c.failed != RCOLL_OK ? "failed" : c.running ? "running" : "idle";
        put(&o, "%s{\"id\":\"%016llx\",\"name\":", first ? "" : ",", (unsigned long long)c.ctx);
        first = 0;
        put_str(&o, c.name);
        put(&o, ",\"rank\":%d,\"nranks\":%d,\"started\":%llu,\"finished\":%llu,\"state\":\"%s\"",
            c.rank, c.nranks, (unsigned long long)c.started, (unsigned long long)c.finished,
            state);
        if (c.running) put_running(&o, &c, now, 0);
        if (c.failed != RCOLL_OK) {
            put(&o, ",\"error\":");
            put_str(&o, c.error[0] ? c.error : rcoll_status_string(c.failed));
        }
        if (c.host_of) {
            put(&o, ",\"map\":{\"hosts\":[");
            for (int h = 0; h < c.nhosts; h++) {
                if (h) put(&o, ",");
                put_str(&o, c.hosts[h]);
            }
            put(&o, "],\"host_of\":[");
            for (int q = 0; q < c.nranks; q++) put(&o, "%s%d", q ? "," : "", (int)c.host_of[q]);
            put(&o, "],\"pids\":[");
            for (int q = 0; q < c.nranks; q++) put(&o, "%s%d", q ? "," : "", (int)c.pids[q]);
            put(&o, "]}");
        }
        put(&o, "}");
    }
    pthread_mutex_unlock(&ras_lock);
    put(&o, "]}\n");
    if (len) buf[o.used < len ? o.used : len - 1] = '\0';
    return o.used + 1;
}

/* ---- the flight recorder ---- */

void rcoll_ras_dump(rcoll_ras_rec_t *rec, const char *reason, const char *text)
{
    if (!rec || !rec->flight_dir[0]) return;
    pthread_mutex_lock(&rec->lock);
    rcoll_ras_rec_t c = *rec;
    pthread_mutex_unlock(&rec->lock);
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    size_t cap = 16384 + RAS_HIST * 512;
    char *buf = malloc(cap);
    if (!buf) return;
    out_t o = {buf, cap, 0};
    uint64_t now = rcoll_now_ns();
    double wall = c.wall0_s + (double)(now - c.mono0_ns) / 1e9;
    put(&o, "{\"flight\":1,\"reason\":\"%s\",\"text\":", reason);
    put_str(&o, text ? text : "");
    put(&o, ",\"time\":%.6f,\"host\":", wall);
    put_str(&o, host);
    put(&o, ",\"pid\":%d,\"id\":\"%016llx\",\"name\":", (int)getpid(),
        (unsigned long long)c.ctx);
    put_str(&o, c.name);
    put(&o, ",\"rank\":%d,\"nranks\":%d,\"started\":%llu,\"finished\":%llu", c.rank,
        c.nranks, (unsigned long long)c.started, (unsigned long long)c.finished);
    if (c.running) {
        put(&o, ",\"running\":{");
        put_running(&o, &c, now, 1);
        put(&o, "}");
    }
    put(&o, ",\"history\":[");
    uint64_t n = c.started < RAS_HIST ? c.started : RAS_HIST;
    for (uint64_t i = 0; i < n; i++) { /* oldest first */
        const ras_hist_t *h = &c.hist[(c.started - n + i) % RAS_HIST];
        put(&o, "%s{\"n\":%llu,\"op\":", i ? "," : "",
            (unsigned long long)(c.started - n + i + 1));
        put_str(&o, h->op);
        put(&o, ",\"call\":");
        put_str(&o, h->call);
        put(&o, ",\"start\":%.6f", c.wall0_s + (double)(h->start_ns - c.mono0_ns) / 1e9);
        if (h->end_ns)
            put(&o, ",\"end\":%.6f,\"status\":\"%s\"",
                c.wall0_s + (double)(h->end_ns - c.mono0_ns) / 1e9,
                h->st == RCOLL_OK ? "ok" : rcoll_status_string(h->st));
        put(&o, "}");
    }
    put(&o, "]");
    if (c.failed != RCOLL_OK) {
        put(&o, ",\"error\":");
        put_str(&o, c.error[0] ? c.error : rcoll_status_string(c.failed));
    }
    put(&o, "}\n");
    char path[512], tmp[560];
    snprintf(path, sizeof(path), "%s/rcoll-flight.%016llx.%d.json", c.flight_dir,
             (unsigned long long)c.ctx, c.rank);
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    FILE *f = o.used < cap ? fopen(tmp, "w") : NULL;
    int ok = f && fwrite(buf, 1, o.used, f) == o.used;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) == 0) {
        RCOLL_WARN(COLL, "flight recorder (%s): wrote %s", reason, path);
    } else {
        if (f) unlink(tmp);
        RCOLL_WARN(COLL, "flight recorder (%s): cannot write %s: %s", reason, path,
                   strerror(errno));
    }
    free(buf);
}

/* ---- the answering thread ---- */

/* One caller: of this user (or root), one request line, the JSON, closed. */
static void answer(int fd)
{
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 ||
        (cr.uid != getuid() && cr.uid != 0))
        return;
    /* a caller that does not read cannot hold the thread: sends give up after a second */
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char req[64];
    if (poll(&p, 1, 200) <= 0) return;
    ssize_t n = recv(fd, req, sizeof(req) - 1, MSG_DONTWAIT);
    if (n <= 0) return;
    req[n] = '\0';
    if (strncmp(req, "status", 6) != 0) {
        static const char no[] = "{\"error\":\"unknown request (ask: status)\"}\n";
        (void)!send(fd, no, sizeof(no) - 1, MSG_NOSIGNAL);
        return;
    }
    size_t need = rcoll_ras_json(NULL, 0);
    char *buf = malloc(need + 4096); /* records may grow meanwhile: cut, never overrun */
    if (!buf) return;
    rcoll_ras_json(buf, need + 4096);
    size_t len = strlen(buf);
    for (size_t off = 0; off < len;) {
        ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    free(buf);
}

static void *server(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL); /* EMFILE and the like: try again later */
            continue;
        }
        answer(fd);
        close(fd);
    }
    return NULL;
}

/* Under ras_lock: the thread of this process running, or started. */
static int server_start(void)
{
    if (ras_server_pid == getpid()) return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    char name[64];
    snprintf(name, sizeof(name), "rcoll-ras.%u.%d", (unsigned)getuid(), (int)getpid());
    memcpy(a.sun_path + 1, name, strlen(name));
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    if (bind(fd, (struct sockaddr *)&a, alen) != 0 || listen(fd, 16) != 0) {
        close(fd);
        return -1;
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, server, (void *)(intptr_t)fd);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    ras_server_pid = getpid();
    RCOLL_INFO(INIT, "RCOLL_RAS: answering on the abstract unix socket @%s", name);
    return 0;
}

rcoll_ras_rec_t *rcoll_ras_attach(const struct rcoll_comm *comm)
{
    rcoll_ras_rec_t *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    pthread_mutex_init(&r->lock, NULL);
    r->serve = comm->cfg.ras;
    snprintf(r->flight_dir, sizeof(r->flight_dir), "%s", comm->cfg.flight_dir);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->mono0_ns = rcoll_now_ns();
    r->wall0_s = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    r->ctx = comm->ctx;
    snprintf(r->name, sizeof(r->name), "%s", comm->cfg.comm_name);
    r->rank = comm->rank;
    r->nranks = comm->nranks;
    r->waiting_peer = r->waiting_pid = -1;
    if (r->serve) { /* the map (none when it cannot be allocated: the rest still works) */
        int n = comm->nranks;
        r->hosts = calloc((size_t)n, sizeof(*r->hosts));
        r->host_of = calloc((size_t)n, sizeof(*r->host_of));
        r->pids = calloc((size_t)n, sizeof(*r->pids));
        uint64_t *ids = calloc((size_t)n, sizeof(*ids));
        if (r->hosts && r->host_of && r->pids && ids) {
            for (int q = 0; q < n; q++) {
                const rcoll_peer_info_t *pi = &comm->peers[q];
                int h = 0;
                while (h < r->nhosts && ids[h] != pi->host_hash) h++;
                if (h == r->nhosts) {
                    ids[h] = pi->host_hash;
                    snprintf(r->hosts[h], sizeof(r->hosts[h]), "%s", pi->hostname);
                    r->nhosts++;
                }
                r->host_of[q] = h;
                r->pids[q] = pi->pid;
            }
        } else {
            free(r->hosts), free(r->host_of), free(r->pids);
            r->hosts = NULL, r->host_of = r->pids = NULL, r->nhosts = 0;
        }
        free(ids);
    }
    pthread_mutex_lock(&ras_lock);
    if (r->serve && server_start() != 0) {
        int warn = !ras_warned;
        ras_warned = 1;
        pthread_mutex_unlock(&ras_lock);
        if (warn)
            RCOLL_WARN(INIT, "RCOLL_RAS=1: cannot answer on a unix socket (%s); this process "
                       "runs without", strerror(errno));
        pthread_mutex_destroy(&r->lock);
        free(r->hosts);
        free(r->host_of);
        free(r->pids);
        free(r);
        return NULL;
    }
    r->next = ras_list;
    if (ras_list) ras_list->prev = r;
    ras_list = r;
    pthread_mutex_unlock(&ras_lock);
    return r;
}

void rcoll_ras_detach(rcoll_ras_rec_t *rec)
{
    if (!rec) return;
    pthread_mutex_lock(&ras_lock);
    if (rec->prev)
        rec->prev->next = rec->next;
    else if (ras_list == rec)
        ras_list = rec->next;
    if (rec->next) rec->next->prev = rec->prev;
    pthread_mutex_unlock(&ras_lock);
    pthread_mutex_destroy(&rec->lock);
    free(rec->hosts);
    free(rec->host_of);
    free(rec->pids);
    free(rec);
}
