/*
 * test_fail.c - failures must become clear errors within the timeout, never hangs:
 *  - a rank killed mid all-reduce: every survivor returns an error naming it (unique-id
 *    launch, and environment launch where the killed rank 0 also hosts the root);
 *  - a rank that stops responding (SIGSTOP): survivors time out naming it, also when it is
 *    rank 0 of an environment launch and so stops the bootstrap root with it (found by
 *    tools/chaos: the survivors then blamed each other);
 *  - ranks passing different counts to one all-reduce (two-shot over the host segment and
 *    ring over TCP): every rank fails that call with RCOLL_ERR_INVALID_USAGE naming both
 *    calls (the full matrix of mismatches is test_misuse.c), nobody hangs;
 *  - a rank that never joins: init fails on the others within the timeout, naming it;
 *  - environment launch whose rank 0 (the root's host) never starts: the others fail naming
 *    rank 0, not only the root's address (found by tools/chaos);
 *  - a process with the wrong secret is rejected (RCOLL_ERR_AUTH) and the job still forms;
 *  - garbage and silent connections on the root's port are dropped; the job still forms.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

#define TIMEOUT_S 4.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    int victim;       /* rank that dies */
    int stop;         /* 1: SIGSTOP instead of SIGKILL */
    char word[32];    /* survivors' error must contain this */
    double limit_s;   /* survivors must see the error within this time of the death */
} kill_arg_t;

/* Each rank runs all-reduces; the victim dies in the middle of its third one. */
static int run_until_failure(rcoll_comm_t comm, int rank, int n, kill_arg_t *a)
{
    (void)n;
    size_t count = 1 << 20;
    float *buf = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
    double t_start = 0;
    for (int iter = 0; iter < 1000; iter++) {
        if (rank == a->victim && iter == 2) {
            rcoll_request_t req;
            rcoll_iallreduce(RCOLL_IN_PLACE, buf, count, RCOLL_FLOAT32, RCOLL_SUM, comm, &req);
            int done = 0;
            for (int k = 0; k < 50 && !done; k++) rcoll_test(&req, &done);
            raise(a->stop ? SIGSTOP : SIGKILL);
            pause();
        }
        t_start = now_s(); /* the error must come within the limit of the failing call */
        rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, buf, count, RCOLL_FLOAT32,
                                            RCOLL_SUM, comm);
        if (st == RCOLL_OK) continue;
        double took = now_s() - t_start;
        const char *msg = rcoll_comm_last_error(comm);
        int ok = strstr(msg, a->word) != NULL && took < a->limit_s &&
                 (st == RCOLL_ERR_REMOTE || st == RCOLL_ERR_TIMEOUT);
        fprintf(stderr, "rank %d: %s after %.2f s: %s: %s\n", rank, ok ? "ok" : "BAD", took,
                rcoll_status_string(st), msg);
        /* Later calls fail at once with the original cause. */
        st = rcoll_barrier(comm);
        if (st != RCOLL_ERR_INVALID_USAGE || !strstr(rcoll_comm_last_error(comm), a->word))
            ok = 0;
        free(buf);
        return ok ? 0 : 1;
    }
    fprintf(stderr, "rank %d: never saw the failure\n", rank);
    return 1;
}

static int killed_rank_fn(rcoll_comm_t comm, int rank, int n, void *arg)
{
    return run_until_failure(comm, rank, n, arg);
}

static void test_killed(int n, int victim)
{
    kill_arg_t a = {.victim = victim, .stop = 0, .limit_s = TIMEOUT_S};
    const char *algo = getenv("RCOLL_ALGO");
    snprintf(a.word, sizeof(a.word), "rank %d", victim);
    mp_result_t res;
    mp_run(n, killed_rank_fn, &a, 30, &res);
    for (int r = 0; r < n; r++) {
        if (r == victim)
            CHECK(res.codes[r] == 128 + SIGKILL, "victim rank %d killed (code %d)", r,
                  res.codes[r]);
        else
            CHECK(res.codes[r] == 0, "survivor rank %d of %d reported rank %d's death (code %d%s%s)",
                  r, n, victim, res.codes[r], algo ? ", RCOLL_ALGO=" : "", algo ? algo : "");
    }
}

static void test_stopped(void)
{
    kill_arg_t a = {.victim = 1, .stop = 1, .limit_s = TIMEOUT_S + 3};
    snprintf(a.word, sizeof(a.word), "rank 1");
    mp_result_t res;
    mp_run(3, killed_rank_fn, &a, TIMEOUT_S + 6, &res);
    CHECK(res.codes[0] == 0 && res.codes[2] == 0,
          "survivors of a stopped rank time out naming it (codes %d, %d)", res.codes[0],
          res.codes[2]);
    CHECK(res.codes[1] == MP_TIMEOUT_EXIT, "stopped rank reaped by the harness");
}

/* Rank 1 passes twice the count of the others. */
static int mismatch_fn(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)n, (void)arg;
    size_t count = 16384;
    float *buf = calloc(2 * count, sizeof(float));
    double t0 = now_s();
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, buf, rank == 1 ? 2 * count : count,
                                        RCOLL_FLOAT32, RCOLL_SUM, comm);
    double took = now_s() - t0;
    const char *msg = rcoll_comm_last_error(comm);
    fprintf(stderr, "rank %d: after %.2f s: %s: %s\n", rank, took, rcoll_status_string(st), msg);
    free(buf);
    if (st == RCOLL_OK || took > TIMEOUT_S + 3) return 1;
    /* Every rank fails this call, naming both sides (docs/design.md, "Mismatched calls"). */
    return st == RCOLL_ERR_INVALID_USAGE && strstr(msg, "allreduce(count=32768, float32, sum)") &&
                   strstr(msg, "allreduce(count=16384, float32, sum)") &&
                   strstr(msg, "as operation #1 while this rank called")
               ? 0
               : 3;
}

static void test_mismatched_counts(const char *transport, const char *algo)
{
    setenv("RCOLL_TRANSPORT", transport, 1);
    setenv("RCOLL_ALGO", algo, 1);
    mp_result_t res;
    mp_run(3, mismatch_fn, NULL, TIMEOUT_S + 10, &res);
    CHECK(res.codes[0] == 0 && res.codes[1] == 0 && res.codes[2] == 0,
          "%s over %s, mismatched counts: every rank fails that call in time naming both "
          "calls (codes %d %d %d)", algo, transport, res.codes[0], res.codes[1], res.codes[2]);
    unsetenv("RCOLL_TRANSPORT");
    unsetenv("RCOLL_ALGO");
}

/* --- environment launch --------------------------------------------------------------- */

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

static char root_env[64];

static void set_env_rank(int rank, int n, const char *secret)
{
    mp_set_env_rank(rank, n, root_env, secret);
}

static int env_killed_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)id;
    set_env_rank(rank, n, "s3cret");
    rcoll_comm_t comm;
    if (rcoll_comm_init_env(&comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: init failed: %s\n", rank, rcoll_last_init_error());
        return 90;
    }
    int rc = run_until_failure(comm, rank, n, arg);
    rcoll_comm_destroy(comm);
    return rc;
}

static void test_env_root_killed(void)
{
    snprintf(root_env, sizeof(root_env), "127.0.0.1:%d", free_port());
    kill_arg_t a = {.victim = 0, .stop = 0, .limit_s = TIMEOUT_S, .word = "rank 0"};
    mp_result_t res;
    mp_run_raw(3, env_killed_fn, &a, 30, &res);
    CHECK(res.codes[0] == 128 + SIGKILL && res.codes[1] == 0 && res.codes[2] == 0,
          "env launch: rank 0 (root host) killed; survivors name it (codes %d %d %d)",
          res.codes[0], res.codes[1], res.codes[2]);
}

/* Does msg name rank 0 ("rank 0" not followed by a digit)? */
static int names_rank0(const char *msg)
{
    for (const char *p = strstr(msg, "rank 0"); p; p = strstr(p + 1, "rank 0"))
        if (p[6] < '0' || p[6] > '9') return 1;
    return 0;
}

static void test_env_root_stopped(int n)
{
    snprintf(root_env, sizeof(root_env), "127.0.0.1:%d", free_port());
    /* The timeout, then up to 2.5 s for the root's verdict that never comes. */
    kill_arg_t a = {.victim = 0, .stop = 1, .limit_s = TIMEOUT_S + 4, .word = "rank 0"};
    mp_result_t res;
    /* A ring over TCP: rank 2 waits on rank 1, which waits on rank 0 (the chain). */
    setenv("RCOLL_TRANSPORT", "tcp", 1);
    setenv("RCOLL_ALGO", "ring", 1);
    mp_run_raw(n, env_killed_fn, &a, TIMEOUT_S + 10, &res);
    unsetenv("RCOLL_TRANSPORT");
    unsetenv("RCOLL_ALGO");
    int ok = res.codes[0] == MP_TIMEOUT_EXIT;
    for (int r = 1; r < n; r++) ok &= res.codes[r] == 0;
    CHECK(ok, "env launch, %d ranks: rank 0 (root host) stopped; every survivor names it in "
          "time (codes %d %d %d %d)", n, res.codes[0], res.codes[1], res.codes[2],
          n > 3 ? res.codes[3] : 0);
}

/* Rank 0 (root host) stops before sending to ranks 1 and 2 and is resumed 7 s later.  Rank 1
 * (RCOLL_TIMEOUT=2) times out naming it and aborts while the root is still stopped; rank 2
 * (RCOLL_TIMEOUT=30) is still waiting when the resumed root reads rank 1's timeout report and
 * then its abort.  Rank 2 must learn that rank 0 stalled, not that rank 1 aborted. */
static int env_abort_relay_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)id, (void)arg;
    set_env_rank(rank, n, "s3cret");
    setenv("RCOLL_TIMEOUT", rank == 1 ? "2" : "30", 1);
    rcoll_comm_t comm;
    if (rcoll_comm_init_env(&comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: init failed: %s\n", rank, rcoll_last_init_error());
        return 90;
    }
    if (rank == 0) {
        pid_t me = getpid();
        if (fork() == 0) {
            struct timespec ts = {7, 0};
            nanosleep(&ts, NULL);
            kill(me, SIGCONT);
            _exit(0);
        }
        raise(SIGSTOP);
        struct timespec ts = {3, 0}; /* let its root thread handle the queued reports first */
        nanosleep(&ts, NULL);
        rcoll_comm_abort(comm);
        return 0;
    }
    int v = 0;
    double t0 = now_s();
    rcoll_status_t st = rcoll_recv(&v, 1, RCOLL_INT32, 0, comm);
    double took = now_s() - t0;
    const char *msg = rcoll_comm_last_error(comm);
    int ok = st != RCOLL_OK && names_rank0(msg) && took < 12;
    fprintf(stderr, "rank %d: %s after %.2f s: %s: %s\n", rank, ok ? "ok" : "BAD", took,
            rcoll_status_string(st), msg);
    rcoll_comm_abort(comm);
    return ok ? 0 : 1;
}

static void test_env_abort_while_root_stopped(void)
{
    snprintf(root_env, sizeof(root_env), "127.0.0.1:%d", free_port());
    mp_result_t res;
    mp_run_raw(3, env_abort_relay_fn, NULL, 30, &res);
    CHECK(res.codes[1] == 0 && res.codes[2] == 0,
          "root host stopped, resumed after a survivor aborted: the other survivor names rank "
          "0 (codes %d %d %d)", res.codes[0], res.codes[1], res.codes[2]);
}

/* Ranks 0 and 1 form a job; rank "2" is an impostor with the wrong secret that tries first,
 * and also throws garbage and a silent connection at the root's port. */
static int auth_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)id, (void)arg, (void)n;
    if (rank == 2) {
        int port = atoi(strchr(root_env, ':') + 1);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int g = -1, s = -1;
        for (int k = 0; k < 100; k++) {
            g = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(g, (struct sockaddr *)&sa, sizeof(sa)) == 0) break;
            close(g);
            g = -1;
            usleep(20000);
        }
        if (g < 0) return 3;
        const char junk[] = "GET / HTTP/1.0\r\n\r\nthis is not rcoll at all, not even close......";
        if (write(g, junk, sizeof(junk)) < 0) return 4;
        s = socket(AF_INET, SOCK_STREAM, 0); /* silent: connects and says nothing */
        if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) return 5;
        set_env_rank(1, 2, "wrong-secret");
        setenv("RCOLL_DEBUG", "NONE", 1);
        rcoll_comm_t comm;
        rcoll_status_t st = rcoll_comm_init_env(&comm);
        int ok = st == RCOLL_ERR_AUTH && strstr(rcoll_last_init_error(), "secret");
        fprintf(stderr, "impostor: %s: %s\n", rcoll_status_string(st), rcoll_last_init_error());
        close(g);
        close(s);
        return ok ? 0 : 6;
    }
    if (rank == 1) usleep(400000); /* let the impostor go first */
    set_env_rank(rank, 2, "right-secret");
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_env(&comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: init failed: %s\n", rank, rcoll_last_init_error());
        return 7;
    }
    int v = rank + 1;
    st = rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, comm);
    rcoll_comm_destroy(comm);
    return (st == RCOLL_OK && v == 3) ? 0 : 8;
}

static void test_auth_and_garbage(void)
{
    snprintf(root_env, sizeof(root_env), "127.0.0.1:%d", free_port());
    mp_result_t res;
    mp_run_raw(3, auth_fn, NULL, 30, &res);
    CHECK(res.codes[2] == 0, "impostor with the wrong secret gets RCOLL_ERR_AUTH (code %d)",
          res.codes[2]);
    CHECK(res.codes[0] == 0 && res.codes[1] == 0,
          "job forms despite garbage, a silent socket and an impostor (codes %d %d)",
          res.codes[0], res.codes[1]);
}

/* Rank 2 of 3 never calls init. */
static int never_join_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    if (rank == 2) return 0;
    double t0 = now_s();
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_rank(n, id, rank, &comm);
    double took = now_s() - t0;
    const char *msg = rcoll_last_init_error();
    int ok = st == RCOLL_ERR_TIMEOUT && strstr(msg, "2") && strstr(msg, "never joined") &&
             took < TIMEOUT_S + 4;
    fprintf(stderr, "rank %d: %s after %.2f s: %s\n", rank, ok ? "ok" : "BAD", took, msg);
    return ok ? 0 : 1;
}

/* Of 7 ranks, 1 and 3-6 never call init: the others' error counts them and lists them as
 * ranges (a list too long for the note says how many it leaves out: tests/unit/test_ranks). */
static int many_never_join_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    if (rank == 1 || rank >= 3) return 0;
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_rank(n, id, rank, &comm);
    const char *msg = rcoll_last_init_error();
    int ok = st == RCOLL_ERR_TIMEOUT &&
             strstr(msg, "5 ranks never joined the bootstrap within") && strstr(msg, ": 1,3-6");
    fprintf(stderr, "rank %d: %s: %s\n", rank, ok ? "ok" : "BAD", msg);
    return ok ? 0 : 1;
}

static void test_never_joins(void)
{
    mp_result_t res;
    mp_run_raw(3, never_join_fn, NULL, 30, &res);
    CHECK(res.codes[0] == 0 && res.codes[1] == 0,
          "init fails within the timeout naming the missing rank (codes %d %d)", res.codes[0],
          res.codes[1]);
    mp_run_raw(7, many_never_join_fn, NULL, 30, &res);
    CHECK(res.codes[0] == 0 && res.codes[2] == 0,
          "several missing ranks counted and listed as ranges (codes %d %d)", res.codes[0],
          res.codes[2]);
}

/* Environment launch; rank 0, which would host the root, never starts. */
static int env_no_root_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)id, (void)arg;
    if (rank == 0) return 0;
    set_env_rank(rank, n, "s3cret");
    double t0 = now_s();
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_env(&comm);
    double took = now_s() - t0;
    const char *msg = rcoll_last_init_error();
    int ok = st == RCOLL_ERR_TIMEOUT && strstr(msg, "rank 0 did not start it") &&
             took < TIMEOUT_S + 4;
    fprintf(stderr, "rank %d: %s after %.2f s: %s\n", rank, ok ? "ok" : "BAD", took, msg);
    return ok ? 0 : 1;
}

static void test_env_root_never_starts(void)
{
    snprintf(root_env, sizeof(root_env), "127.0.0.1:%d", free_port());
    mp_result_t res;
    mp_run_raw(3, env_no_root_fn, NULL, 30, &res);
    CHECK(res.codes[1] == 0 && res.codes[2] == 0,
          "env launch without rank 0: init fails in time naming rank 0 (codes %d %d)",
          res.codes[1], res.codes[2]);
}

int main(void)
{
    char t[32];
    snprintf(t, sizeof(t), "%g", TIMEOUT_S);
    setenv("RCOLL_TIMEOUT", t, 1);
    setenv("RCOLL_CHUNK_SIZE", "64K", 1);
    test_killed(2, 1);
    test_killed(4, 2);
    test_killed(5, 0);
    test_stopped();
    /* The single-copy all-reduce reads the victim's memory: a dead one (ESRCH or a wait that
     * a dead link ends) and a stopped one (the timeout) are named the same way. */
    setenv("RCOLL_ALGO", "cma", 1);
    test_killed(3, 1);
    test_killed(2, 0);
    test_stopped();
    unsetenv("RCOLL_ALGO");
    test_mismatched_counts("auto", "twoshot");
    test_mismatched_counts("auto", "cma");
    test_mismatched_counts("tcp", "ring");
    test_env_root_killed();
    test_env_root_stopped(3);
    test_env_root_stopped(4);
    test_env_abort_while_root_stopped();
    test_auth_and_garbage();
    test_never_joins();
    test_env_root_never_starts();
    return check_summary();
}
