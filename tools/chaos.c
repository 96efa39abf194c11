/*
 * chaos.c - fault campaign (docs/reliability.md, "Fault campaign").
 *
 * Usage: chaos [--trials N] [--time S] [--seed S] [--only K] [--timeout T] [--grace G]
 *              [--kinds kill,stop,sock,shmfull,junk,secret,revoke,grow,link] [--min-ranks A]
 *              [--max-ranks B]
 *              [--logs DIR] [-v]
 *
 * Each trial forks 2-8 ranks that build a communicator from the environment, as rcoll-run
 * launches them (RCOLL_RANK, RCOLL_NRANKS, RCOLL_ROOT on a free loopback port, RCOLL_SECRET;
 * rank 0 hosts the bootstrap root), with a random transport (RCOLL_TRANSPORT shm or tcp) and
 * all-reduce algorithm (RCOLL_ALGO), and loop one random collective (random size, datatype,
 * op, root; blocking or nonblocking) until it fails or the trial ends.  One fault per trial:
 *
 *   kill     SIGKILL of a random rank at a random moment (1 in 5 during creation)
 *   stop     SIGSTOP of a random rank for RCOLL_TIMEOUT + 2 s, then SIGCONT
 *   sock     a random established TCP socket of a random rank is shut down (shutdown(2) from
 *            a SIGUSR1 handler inside that rank: rcoll has no socket hook), transport tcp
 *   shmfull  one rank runs in its own mount namespace with a full 4 KiB tmpfs on /dev/shm and
 *            memfd_create refused (seccomp, ENOSYS), so its segments must come from /dev/shm
 *   junk     random bytes sent to a random listening socket of the job (the bootstrap root or
 *            a rank's listener), during creation or mid-job
 *   secret   an impostor process joins as a random rank with a wrong RCOLL_SECRET
 *   revoke   a helper thread of a random rank revokes the communicator (rcoll_comm_revoke)
 *            while the ranks are in their calls
 *   grow     a new process joins the job under load: the ranks agree to grow (through the
 *            loop's periodic all-reduce), a random rank makes the grow id, the new process
 *            joins as rank n (rcoll_comm_grow), and the n + 1 run a checked all-reduce
 *   link     the path under one connection dies: a SIGUSR2 handler in a random rank attaches
 *            a drop-everything socket filter to one of its established transport sockets (not
 *            the bootstrap's), so nothing more arrives on it and what it sends goes
 *            unacknowledged, as when a cable is pulled; transport tcp with
 *            RCOLL_SOCKET_FAILOVER=on and RCOLL_SOCKET_FAILOVER_TIMEOUT=0.5: the connection
 *            must move to a new socket without losing a byte
 *
 * Verdict per trial.  For the faults that break the job (kill, stop, sock, shmfull): every
 * other rank returns an error within RCOLL_TIMEOUT + grace of the fault whose text names the
 * faulty rank ("rank V"; for sock, the rank whose socket was shut or the peer that rank names;
 * the shmfull rank itself must name /dev/shm); then the survivors abort, make a new unique id
 * and a communicator among themselves, and run one checked all-reduce.  For junk and secret
 * the job must not notice: every rank's calls succeed and a checked all-reduce is right (the
 * impostor gets RCOLL_ERR_AUTH).  For revoke every rank's call fails within the bound naming
 * "rank V", and the ranks recover by shrinking the revoked communicator (the same n ranks)
 * and a checked all-reduce on it.  For grow nothing may fail: the grown communicator's checked
 * all-reduce is right on all n + 1, and so is the old one's after.  For link nothing may fail
 * either, and the final checked all-reduce must be right.  In every kind: no process needs killing at the deadline
 * (that is a hang; so is an error later than the bound), and after the ranks have destroyed
 * or aborted their communicators each surviving rank's sockets, threads and /dev/shm rcoll*
 * entries are back to their count before creation (a leak otherwise).
 * Prints one line per trial that did not pass (every trial with -v) and a table per kind.
 * Exit status: 0 when every trial passed, 1 otherwise, 2 for a usage error.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"

enum { F_KILL, F_STOP, F_SOCK, F_SHMFULL, F_JUNK, F_SECRET, F_REVOKE, F_GROW, F_LINK, NKIND };
static const char *const kind_name[NKIND] = {"kill", "stop", "sock", "shmfull", "junk", "secret",
                                             "revoke", "grow", "link"};

enum { C_ALLREDUCE, C_REDUCE, C_BCAST, C_ALLGATHER, C_REDUCE_SCATTER, C_ALLTOALL, C_GATHER,
       C_SCATTER, C_ALLGATHERV, C_ALLTOALLV, C_BARRIER, C_SENDRECV, NCOLL };
static const char *const coll_name[NCOLL] = {
    "allreduce", "reduce",  "bcast",      "allgather", "reduce_scatter", "alltoall",
    "gather",    "scatter", "allgatherv", "alltoallv", "barrier",        "sendrecv"};
static const char *const algo_name[] = {"auto", "ring", "rd", "tree", "oneshot", "twoshot",
                                         "cma"};
static const char *const dt_nm[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                    "half", "bf16", "float", "double", "int16", "uint16", "bool"};

#define MAXR 8

typedef struct {
    int ready, finished;           /* rank has joined / has written everything */
    int init_st, op_st, rec_st;    /* creation, the failing call, recovery (0: ok) */
    long ops;
    double err_t;                  /* CLOCK_MONOTONIC of the failing call's return */
    char init_txt[400], err_txt[400], rec_txt[200];
    long base_sock, base_thr, base_shm, end_sock, end_thr, end_shm;
    int shut_fd;                   /* sock: the fd shut in the victim (-1 none) */
    volatile int stage;            /* where the rank is (stage_name), for a hang's report */
    int late;                      /* sock: the error came from the final all-reduce */
} rank_slot_t;

enum { S_INIT, S_OPS, S_ABORT, S_REC_ID, S_REC_INIT, S_REC_CHECK, S_REC_DESTROY, S_LEAKS,
       S_DONE };
static const char *const stage_name[] = {"creation", "operations", "abort/destroy",
                                         "waiting for the new id", "new communicator",
                                         "checked all-reduce", "destroying the new one",
                                         "resource check", "done"};

typedef struct {
    rank_slot_t r[MAXR + 1];       /* + the impostor, or grow's new process */
    volatile int stop;             /* end the op loop (non-breaking kinds) */
    volatile int revoke_go;        /* revoke: the victim's helper thread revokes now */
    volatile int grow_go;          /* grow: the ranks are asked to grow */
    volatile int grow_id_ready;    /* ... and the victim has made the id: */
    rcoll_unique_id_t grow_id;
    volatile int id_ready;
    rcoll_unique_id_t rec_id;      /* the survivors' new id */
    double fault_t;
    uint64_t sock_pick;
} board_t;

typedef struct {
    int kind, n, victim, coll, dt, op, root, nb, algo, tcp, in_init, junk_early;
    size_t count;
    double delay_s;
} trial_t;

static board_t *bd;
static double T = 2.0, grace = 3.0;
static int verbose;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static uint64_t rng;
static uint64_t next64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return n ? next64() % n : 0; }
static double unit(void) { return (double)(next64() >> 11) / 9007199254740992.0; }

static size_t dt_bytes(int dt)
{
    static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
    return s[dt];
}

/* --- resources of a rank ----------------------------------------------------------------- */

static long count_sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;
    struct dirent *e;
    char path[300], link[64];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, link, sizeof(link) - 1);
        if (k > 0) {
            link[k] = 0;
            n += !strncmp(link, "socket:", 7);
        }
    }
    if (d) closedir(d);
    return n;
}

static long count_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "Threads:", 8)) v = atol(line + 8);
    if (f) fclose(f);
    return v;
}

static long count_shm(void)
{
    DIR *d = opendir("/dev/shm");
    long n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += !strncmp(e->d_name, "rcoll", 5);
    if (d) closedir(d);
    return n;
}

/* --- faults inside a rank ------------------------------------------------------------------ */

static int my_rank;
static int root_port; /* the bootstrap root's, for link */

/* One established TCP socket of this process, picked by the board's number (-1: none); with
 * not_port, none whose local or peer port is that one.  Only system calls: async-signal-safe. */
static int pick_socket(int not_port)
{
    int cand[256], nc = 0;
    for (int fd = 3; fd < 1024 && nc < 256; fd++) {
        int type = 0;
        socklen_t len = sizeof(type);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
            continue;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
            (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
            continue;
        int lport = ntohs(((struct sockaddr_in *)&ss)->sin_port); /* same place in sin6 */
        sl = sizeof(ss);
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) continue;
        int pport = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        if (not_port && (lport == not_port || pport == not_port)) continue;
        cand[nc++] = fd;
    }
    return nc ? cand[bd->sock_pick % (uint64_t)nc] : -1;
}

/* SIGUSR1 (sock): shut down one established TCP socket of this process. */
static void on_usr1(int sig)
{
    (void)sig;
    int fd = pick_socket(0);
    if (fd < 0) return;
    shutdown(fd, SHUT_RDWR);
    bd->r[my_rank].shut_fd = fd;
}

/* SIGUSR2 (link): a socket filter that drops every packet on one established TCP socket of
 * this process that is not the bootstrap's. */
static void on_usr2(int sig)
{
    (void)sig;
    int fd = pick_socket(root_port);
    if (fd < 0) return;
    struct sock_filter drop[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
    struct sock_fprog prog = {1, drop};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) == 0)
        bd->r[my_rank].shut_fd = fd;
}

/* shmfull: a private full 4 KiB /dev/shm, and memfd_create refused so that rcoll must use it. */
static int make_shm_full(char *why, size_t wl)
{
    if (unshare(CLONE_NEWNS) != 0) { snprintf(why, wl, "unshare: %s", strerror(errno)); return -1; }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("chaos-shm", "/dev/shm", "tmpfs", 0, "size=4k") != 0) {
        snprintf(why, wl, "mount: %s", strerror(errno));
        return -1;
    }
    int fd = open("/dev/shm/chaos-filler", O_CREAT | O_WRONLY, 0600);
    char blk[512] = {0};
    while (fd >= 0 && write(fd, blk, sizeof(blk)) > 0) {}
    if (fd >= 0) close(fd);
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        snprintf(why, wl, "seccomp: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* --- the ranks ---------------------------------------------------------------------------- */

static int is_survivor(const trial_t *t, int r)
{
    return t->kind >= F_JUNK || r != t->victim;
}

#define RUN(nb, name, ...)                                                                     \
    ((nb) ? ({                                                                                 \
        rcoll_request_t rq_ = NULL;                                                            \
        rcoll_status_t s_ = rcoll_i##name(__VA_ARGS__, &rq_);                                  \
        s_ == RCOLL_OK ? rcoll_wait(&rq_) : s_;                                                \
    })                                                                                         \
          : rcoll_##name(__VA_ARGS__))

static rcoll_status_t one_call(const trial_t *t, rcoll_comm_t comm, int me, char *a, char *b)
{
    int n = t->n, dt = t->dt, nb = t->nb;
    size_t c = t->count;
    size_t cnt[MAXR], dsp[MAXR];
    for (int i = 0; i < n; i++) cnt[i] = c, dsp[i] = (size_t)i * c;
    switch (t->coll) {
    case C_ALLREDUCE: return RUN(nb, allreduce, a, b, c, dt, t->op, comm);
    case C_REDUCE: return RUN(nb, reduce, a, b, c, dt, t->op, t->root, comm);
    case C_BCAST: return RUN(nb, bcast, a, c, dt, t->root, comm);
    case C_ALLGATHER: return RUN(nb, allgather, a, b, c, dt, comm);
    case C_REDUCE_SCATTER: return RUN(nb, reduce_scatter, a, b, c, dt, t->op, comm);
    case C_ALLTOALL: return RUN(nb, alltoall, a, b, c, dt, comm);
    case C_GATHER: return RUN(nb, gather, a, b, c, dt, t->root, comm);
    case C_SCATTER: return RUN(nb, scatter, a, b, c, dt, t->root, comm);
    case C_ALLGATHERV: return RUN(nb, allgatherv, a, c, b, cnt, dsp, dt, comm);
    case C_ALLTOALLV: return RUN(nb, alltoallv, a, cnt, dsp, b, cnt, dsp, dt, comm);
    case C_BARRIER:
        if (!nb) return rcoll_barrier(comm);
        {
            rcoll_request_t rq = NULL;
            rcoll_status_t s = rcoll_ibarrier(comm, &rq);
            return s == RCOLL_OK ? rcoll_wait(&rq) : s;
        }
    default: {
        rcoll_group_start();
        rcoll_send(a, c, dt, (me + 1) % n, comm);
        rcoll_recv(b, c, dt, (me + n - 1) % n, comm);
        return rcoll_group_end();
    }
    }
}

/* One checked all-reduce: int32 sums of (rank + 1) * (i + 1). */
static int checked_allreduce(rcoll_comm_t comm, int me, int n, char *txt, size_t tl,
                             rcoll_status_t *st_p)
{
    size_t count = 4099;
    int32_t *v = malloc(count * sizeof(*v));
    for (size_t i = 0; i < count; i++) v[i] = (int32_t)((me + 1) * (i + 1));
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, v, count, RCOLL_INT32, RCOLL_SUM, comm);
    if (st_p) *st_p = st;
    int ok = st == RCOLL_OK;
    if (!ok)
        snprintf(txt, tl, "all-reduce: %s: %s", rcoll_status_string(st), rcoll_comm_last_error(comm));
    for (size_t i = 0; ok && i < count; i++)
        if (v[i] != (int32_t)((size_t)n * (n + 1) / 2 * (i + 1))) {
            snprintf(txt, tl, "all-reduce: element %zu is %d", i, v[i]);
            ok = 0;
        }
    free(v);
    return ok;
}

/* revoke: the victim's helper thread revokes the communicator when the driver says so, while
 * the main thread is in its calls. */
static volatile int revoker_quit;
static void *revoker_main(void *arg)
{
    while (!bd->revoke_go && !revoker_quit) sleep_s(0.001);
    if (bd->revoke_go) rcoll_comm_revoke((rcoll_comm_t)arg);
    return NULL;
}

/* grow, on every member once they agreed: the victim makes the id, all grow to n + 1 with the
 * new process, one checked all-reduce on the grown communicator, which is then destroyed. */
static void member_grow(const trial_t *t, rcoll_comm_t comm, int me, rank_slot_t *s)
{
    if (me == t->victim) {
        rcoll_unique_id_t id;
        if (rcoll_comm_grow_id(comm, &id) == RCOLL_OK) {
            bd->grow_id = id;
            __sync_synchronize();
            bd->grow_id_ready = 1;
        } else {
            bd->grow_id_ready = -1;
        }
    }
    rcoll_comm_t g = NULL;
    rcoll_status_t st = rcoll_comm_grow(comm, t->n + 1, NULL, RCOLL_UNDEFINED, &g);
    if (st != RCOLL_OK) {
        s->rec_st = 7;
        snprintf(s->rec_txt, sizeof(s->rec_txt), "grow: %s: %s", rcoll_status_string(st),
                 rcoll_comm_last_error(comm));
        return;
    }
    if (!checked_allreduce(g, me, t->n + 1, s->rec_txt, sizeof(s->rec_txt), NULL))
        s->rec_st = 8;
    if (rcoll_comm_destroy(g) != RCOLL_OK && !s->rec_st) {
        s->rec_st = 9;
        snprintf(s->rec_txt, sizeof(s->rec_txt), "destroy of the grown one: %s",
                 rcoll_comm_last_error(g));
    }
}

/* grow's new process: the id from the board, rank n of n + 1, one checked all-reduce. */
static int joiner_main(const trial_t *t)
{
    rank_slot_t *s = &bd->r[MAXR];
    char v[32];
    snprintf(v, sizeof(v), "%g", T);
    setenv("RCOLL_TIMEOUT", v, 1);
    setenv("RCOLL_TRANSPORT", t->tcp ? "tcp" : "shm", 1);
    setenv("RCOLL_ALGO", algo_name[t->algo], 1);
    s->stage = S_REC_ID;
    double dl = now_s() + 2 * T + 10;
    while (!bd->grow_id_ready && now_s() < dl) sleep_s(0.002);
    if (bd->grow_id_ready != 1) {
        s->init_st = 1;
        snprintf(s->init_txt, sizeof(s->init_txt), "no grow id came");
    } else {
        s->stage = S_REC_INIT;
        rcoll_comm_t g = NULL;
        rcoll_status_t st = rcoll_comm_grow(NULL, t->n + 1, (const rcoll_unique_id_t *)&bd->grow_id,
                                            t->n, &g);
        s->init_st = st;
        if (st != RCOLL_OK) {
            snprintf(s->init_txt, sizeof(s->init_txt), "join: %s", rcoll_last_init_error());
        } else {
            s->stage = S_REC_CHECK;
            if (!checked_allreduce(g, t->n, t->n + 1, s->rec_txt, sizeof(s->rec_txt), NULL))
                s->rec_st = 5;
            s->stage = S_REC_DESTROY;
            if (rcoll_comm_destroy(g) != RCOLL_OK && !s->rec_st) s->rec_st = 6;
        }
    }
    s->finished = 1;
    s->stage = S_DONE;
    return 0;
}

static int rank_main(const trial_t *t, int me, const char *root, const char *secret)
{
    rank_slot_t *s = &bd->r[me];
    char v[32];
    my_rank = me;
    s->shut_fd = -1;
    snprintf(v, sizeof(v), "%d", me);
    setenv("RCOLL_RANK", v, 1);
    snprintf(v, sizeof(v), "%d", t->n);
    setenv("RCOLL_NRANKS", v, 1);
    setenv("RCOLL_ROOT", root, 1);
    setenv("RCOLL_SECRET", secret, 1);
    snprintf(v, sizeof(v), "%g", T);
    setenv("RCOLL_TIMEOUT", v, 1);
    setenv("RCOLL_TRANSPORT", t->tcp ? "tcp" : "shm", 1);
    setenv("RCOLL_ALGO", algo_name[t->algo], 1);
    if (t->kind == F_LINK) {
        setenv("RCOLL_SOCKET_FAILOVER", "on", 1);
        setenv("RCOLL_SOCKET_FAILOVER_TIMEOUT", "0.5", 1);
    }
    root_port = atoi(strchr(root, ':') + 1);
    signal(SIGUSR1, on_usr1);
    signal(SIGUSR2, on_usr2);
    if (t->kind == F_SHMFULL && me == t->victim) {
        char why[200];
        if (make_shm_full(why, sizeof(why)) != 0) {
            snprintf(s->init_txt, sizeof(s->init_txt), "chaos: cannot fill /dev/shm: %s", why);
            s->init_st = 1000;
            s->finished = 1;
            return 3;
        }
    }
    s->stage = S_INIT;
    s->base_sock = count_sockets();
    s->base_thr = count_threads();
    s->base_shm = count_shm();

    rcoll_comm_t comm = NULL;
    rcoll_status_t st = rcoll_comm_init_env(&comm);
    s->init_st = st;
    if (st != RCOLL_OK) {
        s->err_t = now_s();
        snprintf(s->init_txt, sizeof(s->init_txt), "%s", rcoll_last_init_error());
        s->op_st = st;
        snprintf(s->err_txt, sizeof(s->err_txt), "%s", rcoll_last_init_error());
    }
    pthread_t revoker;
    int have_revoker = st == RCOLL_OK && t->kind == F_REVOKE && me == t->victim &&
                       pthread_create(&revoker, NULL, revoker_main, comm) == 0;
    s->ready = 1;
    s->stage = S_OPS;
    size_t es = dt_bytes(t->dt), bytes = t->count * es * (size_t)t->n + 64;
    char *a = calloc(1, bytes), *b = calloc(1, bytes);
    int grown = 0;
    while (st == RCOLL_OK) {
        if (s->ops % 8 == 7) {
            /* The ranks agree on when to stop, and (grow) when to grow: each reading the
             * flags alone would leave them at different calls. */
            int32_t f = bd->stop | (t->kind == F_GROW && bd->grow_go && !grown ? 2 : 0);
            st = rcoll_allreduce(RCOLL_IN_PLACE, &f, 1, RCOLL_INT32, RCOLL_BOR, comm);
            if (st == RCOLL_OK && (f & 2) && !grown) {
                grown = 1;
                member_grow(t, comm, me, s);
            }
            if (st == RCOLL_OK && (f & 1)) break;
        }
        if (st == RCOLL_OK) st = one_call(t, comm, me, a, b);
        if (st == RCOLL_OK) {
            s->ops++;
            continue;
        }
        s->err_t = now_s();
        s->op_st = st;
        snprintf(s->err_txt, sizeof(s->err_txt), "%s", rcoll_comm_last_error(comm));
    }
    free(a);
    free(b);
    if (have_revoker) {
        revoker_quit = 1;
        pthread_join(revoker, NULL);
    }
    s->stage = S_ABORT;
    if (st == RCOLL_OK && t->kind == F_SOCK) {
        /* The shut socket may be one the loop never used: the final all-reduce may be the
         * first call to meet it, which then counts as the fault's error. */
        rcoll_status_t cst = RCOLL_OK;
        if (!checked_allreduce(comm, me, t->n, s->rec_txt, sizeof(s->rec_txt), &cst) &&
            cst != RCOLL_OK) {
            st = cst;
            s->late = 1;
            s->err_t = now_s();
            s->op_st = st;
            snprintf(s->err_txt, sizeof(s->err_txt), "%s", rcoll_comm_last_error(comm));
            s->rec_txt[0] = 0;
        } else if (cst != RCOLL_OK || s->rec_txt[0]) {
            s->rec_st = 1;
        }
        if (st == RCOLL_OK && rcoll_comm_destroy(comm) != RCOLL_OK && !s->rec_st) {
            s->rec_st = 2;
            snprintf(s->rec_txt, sizeof(s->rec_txt), "destroy: %s", rcoll_comm_last_error(comm));
        }
        if (st != RCOLL_OK) rcoll_comm_abort(comm);
    } else if (st == RCOLL_OK) { /* junk, secret: the job must still be right */
        if (!checked_allreduce(comm, me, t->n, s->rec_txt, sizeof(s->rec_txt), NULL)) s->rec_st = 1;
        if (rcoll_comm_destroy(comm) != RCOLL_OK && !s->rec_st) {
            s->rec_st = 2;
            snprintf(s->rec_txt, sizeof(s->rec_txt), "destroy: %s", rcoll_comm_last_error(comm));
        }
    } else if (t->kind == F_REVOKE && s->init_st == RCOLL_OK) {
        /* Every rank leaves the revoked communicator by shrinking it: the same n ranks. */
        s->stage = S_REC_INIT;
        rcoll_comm_t c2 = NULL;
        rcoll_status_t rst = rcoll_comm_shrink(comm, RCOLL_SHRINK_DEFAULT, &c2);
        int size = 0;
        if (rst != RCOLL_OK || rcoll_comm_size(c2, &size) != RCOLL_OK || size != t->n) {
            s->rec_st = 10;
            snprintf(s->rec_txt, sizeof(s->rec_txt), "shrink of the revoked one: %s (size %d): "
                     "%s", rcoll_status_string(rst), size, rcoll_comm_last_error(comm));
        } else {
            s->stage = S_REC_CHECK;
            if (!checked_allreduce(c2, me, t->n, s->rec_txt, sizeof(s->rec_txt), NULL))
                s->rec_st = 5;
        }
        s->stage = S_REC_DESTROY;
        if (c2 && rcoll_comm_destroy(c2) != RCOLL_OK && !s->rec_st) {
            s->rec_st = 6;
            snprintf(s->rec_txt, sizeof(s->rec_txt), "destroy: %s", rcoll_comm_last_error(c2));
        }
        rcoll_comm_destroy(comm);
        st = RCOLL_OK; /* recovered: no new id */
    } else {
        rcoll_comm_abort(comm);
    }
    if (st != RCOLL_OK && is_survivor(t, me)) {
        /* Survivors: a new id made by the lowest survivor, a communicator among themselves. */
        int idx = 0, ns = 0, lead = -1;
        for (int r = 0; r < t->n; r++)
            if (is_survivor(t, r)) {
                if (lead < 0) lead = r;
                if (r < me) idx++;
                ns++;
            }
        double dl = now_s() + 2 * T + 10;
        s->stage = S_REC_ID;
        if (me == lead) {
            rcoll_unique_id_t id;
            if (rcoll_get_unique_id(&id) == RCOLL_OK) {
                bd->rec_id = id;
                __sync_synchronize();
                bd->id_ready = 1;
            } else
                bd->id_ready = -1;
        }
        while (!bd->id_ready && now_s() < dl) sleep_s(0.002);
        rcoll_comm_t c2 = NULL;
        rcoll_comm_config_t cfg = RCOLL_COMM_CONFIG_INIT;
        cfg.timeout_s = T;
        s->stage = S_REC_INIT;
        if (bd->id_ready != 1) {
            s->rec_st = 3;
            snprintf(s->rec_txt, sizeof(s->rec_txt), "no new id");
        } else if ((st = rcoll_comm_init_rank_config(ns, (const rcoll_unique_id_t *)&bd->rec_id,
                                                     idx, &cfg, &c2)) != RCOLL_OK) {
            s->rec_st = 4;
            snprintf(s->rec_txt, sizeof(s->rec_txt), "init: %s", rcoll_last_init_error());
        } else {
            s->stage = S_REC_CHECK;
            if (!checked_allreduce(c2, idx, ns, s->rec_txt, sizeof(s->rec_txt), NULL))
                s->rec_st = 5;
            s->stage = S_REC_DESTROY;
            if (rcoll_comm_destroy(c2) != RCOLL_OK && !s->rec_st) {
                s->rec_st = 6;
                snprintf(s->rec_txt, sizeof(s->rec_txt), "destroy: %s",
                         rcoll_comm_last_error(c2));
            }
        }
    }
    /* Resources back to their count before creation (a root thread may outlive its
     * communicator by up to RCOLL_TIMEOUT when a rank vanished). */
    double dl = now_s() + T + 3;
    s->stage = S_LEAKS;
    do {
        s->end_sock = count_sockets();
        s->end_thr = count_threads();
        s->end_shm = count_shm();
        if (s->end_sock <= s->base_sock && s->end_thr <= s->base_thr &&
            s->end_shm <= s->base_shm)
            break;
        sleep_s(0.02);
    } while (now_s() < dl);
    s->finished = 1;
    s->stage = S_DONE;
    return 0;
}

static int impostor_main(const trial_t *t, const char *root)
{
    rank_slot_t *s = &bd->r[MAXR];
    char v[32];
    snprintf(v, sizeof(v), "%d", t->victim);
    setenv("RCOLL_RANK", v, 1);
    snprintf(v, sizeof(v), "%d", t->n);
    setenv("RCOLL_NRANKS", v, 1);
    setenv("RCOLL_ROOT", root, 1);
    setenv("RCOLL_SECRET", "not-the-secret", 1);
    snprintf(v, sizeof(v), "%g", T + 8); /* rank 0 may be slow to listen on a loaded machine */
    setenv("RCOLL_TIMEOUT", v, 1);
    rcoll_comm_t comm = NULL;
    rcoll_status_t st = rcoll_comm_init_env(&comm);
    s->init_st = st;
    snprintf(s->init_txt, sizeof(s->init_txt), "%s", rcoll_last_init_error());
    if (st == RCOLL_OK) rcoll_comm_abort(comm);
    s->finished = 1;
    return 0;
}

/* --- the driver -------------------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

/* Listening TCP ports of the given processes (socket inodes in /proc/PID/fd matched against
 * the LISTEN lines of /proc/net/tcp and tcp6). */
static int listen_ports(const pid_t *pids, int np, int *ports, int max)
{
    unsigned long inodes[512];
    int ni = 0, n = 0;
    for (int p = 0; p < np; p++) {
        if (pids[p] <= 0) continue;
        char dir[64], path[340], link[64];
        snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pids[p]);
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d)) && ni < 512) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            ssize_t k = readlink(path, link, sizeof(link) - 1);
            if (k > 0) {
                link[k] = 0;
                if (!strncmp(link, "socket:[", 8)) inodes[ni++] = strtoul(link + 8, NULL, 10);
            }
        }
        if (d) closedir(d);
    }
    const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        char line[512];
        while (fp && fgets(line, sizeof(line), fp)) {
            char local[128], rem[128];
            unsigned st;
            unsigned long ino;
            if (sscanf(line, "%*d: %127s %127s %x %*s %*s %*s %*s %*s %lu", local, rem, &st,
                       &ino) != 4 || st != 0x0A)
                continue;
            for (int i = 0; i < ni; i++)
                if (inodes[i] == ino && n < max) {
                    char *colon = strrchr(local, ':');
                    if (colon) ports[n++] = (int)strtol(colon + 1, NULL, 16);
                }
        }
        if (fp) fclose(fp);
    }
    return n;
}

static void send_junk(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = -1, ok = 0;
    for (int tries = 0; tries < 200 && !ok; tries++) { /* the root may not listen yet */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (!ok) {
            close(fd);
            fd = -1;
            sleep_s(0.005);
        }
    }
    if (ok) {
        char buf[4096];
        size_t len = 1 + below(sizeof(buf));
        for (size_t i = 0; i < len; i++) buf[i] = (char)next64();
        if (below(3) == 0) memset(buf, 0, len < 64 ? len : 64); /* a zeroed header */
        ssize_t w = write(fd, buf, len);
        (void)w;
        if (below(2)) sleep_s(0.05 + 0.2 * unit()); /* sometimes linger before closing */
        close(fd);
    }
}

/* Does text name "rank R" (not "rank R0")? */
static int names_rank(const char *txt, int r)
{
    char w[16];
    int l = snprintf(w, sizeof(w), "rank %d", r);
    for (const char *p = strstr(txt, w); p; p = strstr(p + 1, w))
        if (p[l] < '0' || p[l] > '9') return 1;
    return 0;
}

typedef struct {
    long trials, pass, hang, blame, leak, other, unnoticed;
} tally_t;

static void draw_trial(trial_t *t, int kind, int min_r, int max_r)
{
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    t->n = min_r + (int)below((uint64_t)(max_r - min_r + 1));
    /* secret: the impostor poses as a rank other than 0 (an impostor as rank 0 would host the
     * root itself, on the port the job was told: a squatter, not a wrong secret). */
    t->victim = kind == F_SECRET ? 1 + (int)below((uint64_t)t->n - 1) : (int)below((uint64_t)t->n);
    t->coll = (int)below(NCOLL);
    for (;;) {
        t->dt = (int)below(13);
        t->op = (int)below(8);
        int isfloat = t->dt >= 6 && t->dt <= 9;
        if (t->op >= 5 && isfloat) continue;
        if (t->op == 4 && t->dt == 12) continue;
        break;
    }
    double u = unit();
    /* At least one element: a call of count 0 communicates nothing, so a loop of them would
     * never meet the fault. */
    size_t bytes = (size_t)1 << (int)(u * u * 21); /* up to 1 MiB */
    t->count = bytes / dt_bytes(t->dt) ? bytes / dt_bytes(t->dt) : 1;
    t->root = (int)below((uint64_t)t->n);
    t->nb = below(3) == 0;
    t->algo = (int)below(sizeof(algo_name) / sizeof(algo_name[0]));
    t->tcp = kind == F_SOCK || kind == F_LINK ? 1 : kind == F_SHMFULL ? 0 : (int)below(2);
    t->in_init = kind == F_KILL && below(5) == 0;
    t->junk_early = kind == F_JUNK && below(2);
    t->delay_s = kind == F_KILL && t->in_init ? 0.05 * unit() : 0.02 + 0.3 * unit();
}

int main(int argc, char **argv)
{
    long trials = 30, only = -1;
    double limit = 90;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    int kinds_on[NKIND] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, min_r = 2, max_r = 8;
    const char *logdir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-v")) { verbose++; continue; }
        if (!strcmp(a, "-vv")) { verbose = 2; continue; }
        if (!v) goto usage;
        if (!strcmp(a, "--trials")) trials = atol(v);
        else if (!strcmp(a, "--time")) limit = atof(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--only")) only = atol(v);
        else if (!strcmp(a, "--timeout")) T = atof(v);
        else if (!strcmp(a, "--grace")) grace = atof(v);
        else if (!strcmp(a, "--min-ranks")) min_r = atoi(v);
        else if (!strcmp(a, "--max-ranks")) max_r = atoi(v);
        else if (!strcmp(a, "--logs")) logdir = v;
        else if (!strcmp(a, "--kinds")) {
            memset(kinds_on, 0, sizeof(kinds_on));
            char buf[256];
            snprintf(buf, sizeof(buf), "%s", v);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                int k = 0;
                while (k < NKIND && strcmp(tok, kind_name[k])) k++;
                if (k == NKIND) goto usage;
                kinds_on[k] = 1;
            }
        } else goto usage;
        i++;
    }
    if (min_r < 2 || max_r > MAXR || min_r > max_r || T <= 0) goto usage;
    int kl[NKIND], nk = 0;
    for (int k = 0; k < NKIND; k++)
        if (kinds_on[k]) kl[nk++] = k;
    if (!nk) goto usage;
    char shm_why[200] = "";
    if (kinds_on[F_SHMFULL]) { /* can this machine give a process a private full /dev/shm? */
        pid_t p = fork();
        if (p == 0) _exit(make_shm_full(shm_why, sizeof(shm_why)) == 0 ? 0 : 1);
        int status = 0;
        waitpid(p, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            snprintf(shm_why, sizeof(shm_why), "no private tmpfs on /dev/shm here (needs root "
                     "and mount namespaces)");
    }
    if (shm_why[0]) {
        printf("chaos: %s: shmfull trials are skipped\n", shm_why);
        int j = 0;
        for (int k = 0; k < nk; k++)
            if (kl[k] != F_SHMFULL) kl[j++] = kl[k];
        nk = j;
        if (!nk) return 77;
    }
    bd = mmap(NULL, sizeof(board_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bd == MAP_FAILED) return 2;
    printf("chaos: seed 0x%016" PRIx64 ", RCOLL_TIMEOUT %g s, grace %g s, %d-%d ranks, up to "
           "%ld trials in %.0f s\n", seed, T, grace, min_r, max_r, trials, limit);
    fflush(stdout);
    tally_t tal[NKIND] = {{0}};
    double t_start = now_s();
    long ran = 0;
    for (long k = 0; k < trials; k++) {
        if (only >= 0 && k != only) continue;
        if (now_s() - t_start > limit) break;
        rng = seed ^ ((uint64_t)(k + 1) * 0xd1342543de82ef95ull);
        trial_t t;
        draw_trial(&t, kl[below((uint64_t)nk)], min_r, max_r);
        memset(bd, 0, sizeof(*bd));
        bd->sock_pick = next64();
        long shm_before = count_shm();
        char root[64], secret[40];
        snprintf(root, sizeof(root), "127.0.0.1:%d", free_port());
        snprintf(secret, sizeof(secret), "%016" PRIx64, next64());
        pid_t pids[MAXR + 1] = {0};
        int np = t.n + (t.kind == F_SECRET);
        fflush(NULL);
        for (int r = 0; r < np; r++) {
            pids[r] = fork();
            if (pids[r] == 0) {
                setpgid(0, 0);
                char lp[512];
                if (logdir) snprintf(lp, sizeof(lp), "%s/trial%ld-%s%d.log", logdir, k,
                                     r < t.n ? "r" : "impostor", r < t.n ? r : t.victim);
                int lfd = open(logdir ? lp : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (lfd >= 0) { dup2(lfd, 2); dup2(lfd, 1); close(lfd); }
                if (r == t.n) {
                    sleep_s(0.01 * unit());
                    _exit(impostor_main(&t, root));
                }
                if (t.kind == F_SECRET && r == t.victim) sleep_s(0.3); /* the impostor first */
                _exit(rank_main(&t, r, root, secret));
            }
        }
        /* The fault. */
        double t0 = now_s(), fault_t = 0;
        if (t.kind == F_KILL && t.in_init) {
            sleep_s(t.delay_s);
        } else {
            double dl = t0 + T + 5;
            for (;;) {
                int ready = 0;
                for (int r = 0; r < t.n; r++) ready += bd->r[r].ready;
                if (ready == t.n || now_s() > dl) break;
                sleep_s(0.002);
            }
            sleep_s(t.delay_s);
        }
        switch (t.kind) {
        case F_KILL: kill(pids[t.victim], SIGKILL); fault_t = now_s(); break;
        case F_STOP: kill(pids[t.victim], SIGSTOP); fault_t = now_s(); break;
        case F_SOCK: kill(pids[t.victim], SIGUSR1); fault_t = now_s(); break;
        case F_SHMFULL: fault_t = t0; break;
        case F_JUNK: {
            int ports[64], npt = 0;
            if (t.junk_early) {
                npt = 1;
                ports[0] = atoi(strchr(root, ':') + 1);
            } else {
                npt = listen_ports(pids, t.n, ports, 64);
            }
            for (int j = 0; j < 1 + (int)below(3) && npt > 0; j++)
                send_junk(ports[below((uint64_t)npt)]);
            fault_t = now_s();
            sleep_s(0.1 + 0.2 * unit());
            bd->stop = 1;
            break;
        }
        case F_LINK:
            kill(pids[t.victim], SIGUSR2);
            fault_t = now_s();
            sleep_s(3 + unit()); /* past the failover timeout (0.5 s), keepalives, the move */
            bd->stop = 1;
            break;
        case F_SECRET:
            fault_t = t0;
            sleep_s(0.2 + 0.3 * unit());
            bd->stop = 1;
            break;
        case F_REVOKE:
            bd->revoke_go = 1;
            fault_t = now_s();
            break;
        case F_GROW:
            fflush(NULL);
            pids[t.n] = fork();
            if (pids[t.n] == 0) {
                setpgid(0, 0);
                char lp[512];
                if (logdir) snprintf(lp, sizeof(lp), "%s/trial%ld-joiner.log", logdir, k);
                int lfd = open(logdir ? lp : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (lfd >= 0) { dup2(lfd, 2); dup2(lfd, 1); close(lfd); }
                _exit(joiner_main(&t));
            }
            np = t.n + 1;
            bd->grow_go = 1;
            fault_t = now_s();
            break;
        }
        bd->fault_t = fault_t;
        int stopped = t.kind == F_STOP, sock_wait = t.kind == F_SOCK, grow_wait = t.kind == F_GROW;
        /* Reap, with a hard deadline. */
        double hard = fault_t + 3 * T + grace + 15;
        int left = np, hung = 0, codes[MAXR + 1];
        for (int r = 0; r < np; r++) codes[r] = -1;
        while (left > 0) {
            int status;
            pid_t p = waitpid(-1, &status, WNOHANG);
            if (p > 0) {
                for (int r = 0; r < np; r++)
                    if (pids[r] == p) {
                        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                        pids[r] = 0;
                        left--;
                    }
                continue;
            }
            if (sock_wait && now_s() > fault_t + T + grace) {
                /* A shut socket that no call uses goes unnoticed: end the trial. */
                bd->stop = 1;
                sock_wait = 0;
            }
            if (grow_wait && (bd->r[MAXR].finished || now_s() > fault_t + 2 * T + grace + 5)) {
                bd->stop = 1; /* the new process is done (or never will be): end the loop */
                grow_wait = 0;
            }
            if (stopped && now_s() > fault_t + T + 2) {
                kill(pids[t.victim], SIGCONT);
                stopped = 0;
            }
            if (now_s() > hard) {
                for (int r = 0; r < np; r++)
                    if (pids[r] > 0) {
                        hung = 1;
                        kill(pids[r], SIGKILL);
                        waitpid(pids[r], &status, 0);
                        codes[r] = 124;
                        pids[r] = 0;
                        left--;
                    }
                break;
            }
            sleep_s(0.005);
        }
        /* The verdict. */
        char why[600] = "";
        int blame = 0, leak = 0, other = 0, unnoticed = 0;
        if (t.kind == F_SOCK) {
            unnoticed = 1;
            for (int r = 0; r < t.n; r++) unnoticed &= bd->r[r].op_st == RCOLL_OK;
        }
        double bound = T + grace;
        int breaking = (t.kind <= F_SHMFULL || t.kind == F_REVOKE) && !unnoticed;
        for (int r = 0; r < t.n && !why[0]; r++) {
            rank_slot_t *s = &bd->r[r];
            if (t.kind == F_KILL && r == t.victim) continue;
            if (codes[r] == 124) {
                snprintf(why, sizeof(why), "rank %d hung (killed at the deadline) in %s after "
                         "%ld calls; its error: %s; recovery: %s", r, stage_name[s->stage],
                         s->ops, s->err_txt[0] ? s->err_txt : "none",
                         s->rec_txt[0] ? s->rec_txt : "-");
                continue;
            }
            if (!s->finished || codes[r] != 0) {
                snprintf(why, sizeof(why), "rank %d exited %d before finishing: %s", r, codes[r],
                         s->init_st == 1000 ? s->init_txt : "");
                other = 1;
                continue;
            }
            if (breaking) {
                if (s->op_st == RCOLL_OK) {
                    snprintf(why, sizeof(why), "rank %d saw no error", r);
                    other = 1;
                    continue;
                }
                if (t.kind != F_SHMFULL && !(t.kind == F_KILL && t.in_init) &&
                    s->err_t < fault_t) {
                    /* Not the fault's doing (a loaded machine can stall a rank past a short
                     * RCOLL_TIMEOUT): the trial says nothing about the fault. */
                    snprintf(why, sizeof(why), "rank %d failed %.2f s before the fault: %s", r,
                             fault_t - s->err_t, s->err_txt);
                    other = 1;
                    continue;
                }
                if (r != t.victim && !s->late && s->err_t - fault_t > bound) {
                    snprintf(why, sizeof(why), "rank %d: error %.2f s after the fault (bound "
                             "%.1f): %s", r, s->err_t - fault_t, bound, s->err_txt);
                    hung = 1;
                    continue;
                }
                int named;
                if (t.kind == F_SHMFULL && r == t.victim) named = strstr(s->err_txt, "/dev/shm") != NULL;
                else if (r == t.victim) named = 1; /* stop, sock: its own text is free */
                else {
                    named = names_rank(s->err_txt, t.victim);
                    if (!named && t.kind == F_SOCK) /* the shut socket's peer, as the victim names it */
                        for (int q = 0; q < t.n && !named; q++)
                            named = q != r && q != t.victim &&
                                    names_rank(bd->r[t.victim].err_txt, q) &&
                                    names_rank(s->err_txt, q);
                }
                if (!named) {
                    snprintf(why, sizeof(why), "rank %d blames wrongly: %s: %s", r,
                             rcoll_status_string(s->op_st), s->err_txt);
                    blame = 1;
                    continue;
                }
            } else if (s->op_st != RCOLL_OK) {
                snprintf(why, sizeof(why), "rank %d failed: %s: %s", r,
                         rcoll_status_string(s->op_st), s->err_txt);
                other = 1;
                continue;
            }
            if (is_survivor(&t, r) && s->rec_st) {
                snprintf(why, sizeof(why), "rank %d: %s failed: %s", r,
                         breaking ? "recovery" : "final check", s->rec_txt);
                other = 1;
                continue;
            }
            if (s->end_sock > s->base_sock || s->end_thr > s->base_thr ||
                s->end_shm > s->base_shm) {
                snprintf(why, sizeof(why), "rank %d leaks: sockets %ld -> %ld, threads %ld -> "
                         "%ld, /dev/shm rcoll* %ld -> %ld", r, s->base_sock, s->end_sock,
                         s->base_thr, s->end_thr, s->base_shm, s->end_shm);
                leak = 1;
            }
        }
        if (!why[0] && t.kind == F_GROW &&
            (codes[t.n] != 0 || !bd->r[MAXR].finished || bd->r[MAXR].init_st || bd->r[MAXR].rec_st)) {
            snprintf(why, sizeof(why), "the new process (exit %d, %s): %.200s%.200s", codes[t.n],
                     stage_name[bd->r[MAXR].stage], bd->r[MAXR].init_txt, bd->r[MAXR].rec_txt);
            hung = codes[t.n] == 124;
            other = !hung;
        }
        if (!why[0] && t.kind == F_SECRET && bd->r[MAXR].init_st != RCOLL_ERR_AUTH) {
            snprintf(why, sizeof(why), "impostor not refused: %s: %s",
                     rcoll_status_string(bd->r[MAXR].init_st), bd->r[MAXR].init_txt);
            other = 1;
        }
        if (!why[0] && count_shm() > shm_before) {
            snprintf(why, sizeof(why), "/dev/shm rcoll* entries %ld -> %ld", shm_before,
                     count_shm());
            leak = 1;
        }
        if (verbose > 1 && why[0])
            for (int r = 0; r < np; r++) {
                rank_slot_t *s = &bd->r[r < t.n ? r : MAXR];
                printf("  rank %d: code %d, %s, %ld calls, init %d, error %d at +%.2f s: %s; "
                       "recovery %d: %s; shut fd %d\n", r, codes[r], stage_name[s->stage],
                       s->ops, s->init_st, s->op_st, s->err_t ? s->err_t - fault_t : 0.0,
                       s->err_txt, s->rec_st, s->rec_txt, s->shut_fd);
            }
        tally_t *ty = &tal[t.kind];
        ty->trials++;
        ran++;
        const char *verdict = "pass";
        if (hung) ty->hang++, verdict = "HANG";
        else if (blame) ty->blame++, verdict = "BLAME";
        else if (leak) ty->leak++, verdict = "LEAK";
        else if (other) ty->other++, verdict = "FAIL";
        else ty->pass++, ty->unnoticed += unnoticed;
        if (unnoticed && !strcmp(verdict, "pass")) verdict = "pass (unnoticed: the job ran on)";
        if (verbose || strcmp(verdict, "pass"))
            printf("trial %ld %-7s %s: n=%d victim=%d %s count=%zu %s/%d root=%d %s %s algo=%s%s"
                   "%s%s\n", k, kind_name[t.kind], verdict, t.n, t.victim, coll_name[t.coll],
                   t.count, dt_nm[t.dt], t.op, t.root, t.nb ? "nonblocking" : "blocking",
                   t.tcp ? "tcp" : "shm", algo_name[t.algo], t.in_init ? " (in creation)" : "",
                   why[0] ? ": " : "", why);
        fflush(stdout);
    }
    printf("\n| fault | trials | pass | hang | wrong blame | leak | other failure | of the passes: "
           "fault unnoticed |\n|---|---|---|---|---|---|---|---|\n");
    tally_t sum = {0};
    int bad = 0;
    for (int k = 0; k < NKIND; k++) {
        tally_t *ty = &tal[k];
        if (!ty->trials) continue;
        printf("| %s | %ld | %ld | %ld | %ld | %ld | %ld | %ld |\n", kind_name[k], ty->trials,
               ty->pass, ty->hang, ty->blame, ty->leak, ty->other, ty->unnoticed);
        sum.trials += ty->trials, sum.pass += ty->pass, sum.hang += ty->hang;
        sum.blame += ty->blame, sum.leak += ty->leak, sum.other += ty->other;
        sum.unnoticed += ty->unnoticed;
    }
    printf("| all | %ld | %ld | %ld | %ld | %ld | %ld | %ld |\n", sum.trials, sum.pass, sum.hang,
           sum.blame, sum.leak, sum.other, sum.unnoticed);
    bad = sum.pass != sum.trials;
    printf("chaos: %ld trials in %.0f s (seed 0x%016" PRIx64 "): %s\n", ran, now_s() - t_start,
           seed, bad ? "FAIL" : "ok");
    return ran == 0 ? 1 : bad;
usage:
    fprintf(stderr, "usage: chaos [--trials N] [--time S] [--seed S] [--only K] [--timeout T] "
                    "[--grace G] [--kinds kill,stop,sock,shmfull,junk,secret,revoke,grow] "
                    "[--min-ranks A] "
                    "[--max-ranks B] [--logs DIR] [-v]\n");
    return 2;
}
