/*
 * test_watchdog.c - RCOLL_WATCHDOG_S: when a collective makes no progress for that long,
 * every rank waiting in it logs one report (WARN) and keeps it for
 * rcoll_comm_watchdog_report, naming the ranks that reached the call and those that did not;
 * the operation still completes.  Real processes (tests/common/mp.c), 3 ranks, watchdog 1 s,
 * RCOLL_TIMEOUT 30 s so the watchdog fires first:
 *  - late:     rank 1 calls the communicator's first all-reduce 2.5 s late;
 *  - compute:  rank 2 computes 2.5 s after two collectives: the report says the operation it
 *              was last seen in (the broadcast before);
 *  - mismatch: rank 1 calls a broadcast where the others call an all-reduce: the mismatch
 *              check fires before the watchdog (half its time at most), every rank's error
 *              names rank 1's call and the others', and no watchdog report is made;
 *  - other:    rank 1 waits in an all-reduce on a duplicate communicator while the others
 *              wait in one on the parent: the parent's report says where rank 1 waits (its
 *              last wait report), the duplicate's on rank 1 names ranks 0 and 2;
 *  - tcp:      the late case with every rank on TCP;
 *  - thread:   the late case with a progress thread per communicator;
 *  - hosts:    the late case with every rank its own host (no host segment: what the report
 *              says of the other ranks comes from the bootstrap root alone).
 * Each rank captures its own stderr to count the report lines: exactly one per waiting rank.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

#define COUNT 1000
#define LATE_S 2.5

typedef enum { CASE_LATE, CASE_COMPUTE, CASE_MISMATCH } case_t;

static FILE *out; /* the rank's real stderr: its own stderr goes to a file meanwhile */
static int bad;

#define RCHECK(rank, cond, ...)                                                              \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(out, "rank %d: FAILED %s: ", rank, #cond);                                \
            fprintf(out, __VA_ARGS__);                                                        \
            fprintf(out, "\n");                                                               \
            bad++;                                                                            \
        }                                                                                     \
    } while (0)

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Redirect fd 2 to a file (returns its fd); out becomes the original stderr. */
static int capture_begin(void)
{
    char path[] = "/tmp/rcoll_wdog_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    unlink(path);
    out = fdopen(dup(2), "w");
    setvbuf(out, NULL, _IONBF, 0);
    dup2(fd, 2);
    return fd;
}

/* Restore stderr, echo what was captured there, and count the watchdog's report lines. */
static int capture_end(int fd, int rank)
{
    fflush(stderr);
    dup2(fileno(out), 2);
    static char text[1 << 16];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "rcoll WARN COLL watchdog: ")); p++) lines++;
    if (n > 0) fprintf(stderr, "--- rank %d's stderr ---\n%s", rank, text);
    return lines;
}

static int has(const char *s, const char *word) { return strstr(s, word) != NULL; }

/* Run case c; the rank `slow` is late (late/compute) or calls the broadcast (mismatch). */
static int watchdog_fn(rcoll_comm_t comm, int rank, int n, void *arg)
{
    case_t c = (case_t) * (int *)arg;
    int slow = c == CASE_COMPUTE ? 2 : 1, fd = capture_begin();
    bad = 0;
    float buf[COUNT];
    for (int i = 0; i < COUNT; i++) buf[i] = (float)(rank + 1);
    float want = (float)(n * (n + 1) / 2);
    int op = 1;
    rcoll_status_t st;
    if (c != CASE_LATE) { /* two collectives everyone takes part in: #1 and #2 */
        st = rcoll_allreduce(RCOLL_IN_PLACE, buf, COUNT, RCOLL_FLOAT32, RCOLL_SUM, comm);
        RCHECK(rank, st == RCOLL_OK, "allreduce #1: %s", rcoll_comm_last_error(comm));
        int32_t v = rank == 0 ? 42 : 0;
        st = rcoll_bcast(&v, 1, RCOLL_INT32, 0, comm);
        RCHECK(rank, st == RCOLL_OK && v == 42, "bcast #2: %s", rcoll_comm_last_error(comm));
        for (int i = 0; i < COUNT; i++) buf[i] = (float)(rank + 1);
        op = 3;
    }
    RCHECK(rank, rcoll_comm_watchdog_report(comm)[0] == '\0', "no report before any stall: %s",
           rcoll_comm_watchdog_report(comm));
    if (rank == slow && c != CASE_MISMATCH) sleep_s(LATE_S); /* never calls it, for a while */
    if (rank == slow && c == CASE_MISMATCH)
        st = rcoll_bcast(buf, COUNT, RCOLL_FLOAT32, 0, comm);
    else
        st = rcoll_allreduce(RCOLL_IN_PLACE, buf, COUNT, RCOLL_FLOAT32, RCOLL_SUM, comm);
    const char *rep = rcoll_comm_watchdog_report(comm);
    char num[64], notr[48], reached[48];
    snprintf(num, sizeof(num), "operation #%d allreduce(count=%d", op, COUNT);
    snprintf(notr, sizeof(notr), "not reached by rank %d", slow);
    snprintf(reached, sizeof(reached), "reached by %d of %d ranks (%s)", n - 1, n,
             slow == 1 ? "0,2" : "0-1");
    if (c == CASE_MISMATCH) {
        const char *err = rcoll_comm_last_error(comm);
        RCHECK(rank, st == RCOLL_ERR_INVALID_USAGE, "the mismatch fails the call: %s",
               rcoll_status_string(st));
        if (rank == slow)
            RCHECK(rank, has(err, "called allreduce(count=1000") &&
                             has(err, "this rank called bcast(count=1000"),
                   "rank 1 names both calls: %s", err);
        else
            RCHECK(rank, has(err, "rank 1 called bcast(count=1000") &&
                             has(err, "this rank called allreduce(count=1000"),
                   "names rank 1's call and its own: %s", err);
        RCHECK(rank, rep[0] == '\0', "no watchdog report: the mismatch came first: %s", rep);
        int lines = capture_end(fd, rank);
        RCHECK(rank, lines == 0, "no report logged (%d)", lines);
        return bad;
    }
    RCHECK(rank, st == RCOLL_OK, "the late collective completes: %s",
           rcoll_comm_last_error(comm));
    for (int i = 0; i < COUNT; i++)
        if (buf[i] != want) {
            RCHECK(rank, buf[i] == want, "element %d is %g, want %g", i, buf[i], want);
            break;
        }
    int lines = capture_end(fd, rank);
    if (rank == slow) {
        RCHECK(rank, rep[0] == '\0', "the late rank never waited: no report: %s", rep);
        RCHECK(rank, lines == 0, "the late rank logged no report (%d)", lines);
        return bad;
    }
    RCHECK(rank, lines == 1, "one report logged, not %d", lines);
    RCHECK(rank, has(rep, num), "the report names the call and its number: %s", rep);
    RCHECK(rank, has(rep, reached), "the report names the ranks that reached it: %s", rep);
    RCHECK(rank, has(rep, notr), "the report names rank %d as not reached: %s", slow, rep);
    RCHECK(rank, has(rep, "(id "), "the report names the communicator: %s", rep);
    RCHECK(rank, has(rep, "waiting "), "the report says what this rank waits on: %s", rep);
    if (c == CASE_COMPUTE)
        RCHECK(rank, has(rep, "rank 2: last seen in operation #2 bcast(count=1, int32, root=0)"),
               "the report says where rank 2 was last seen: %s", rep);
    return bad;
}

/* Rank 1 waits 2.5 s in an all-reduce on a duplicate (nonblocking, tested) while ranks 0 and
 * 2 wait in one on the parent; then each side joins the other's call.  No mismatch can be
 * found (two communicators); the watchdog on the parent says where rank 1 waits, and rank
 * 1's on the duplicate says ranks 0 and 2 have not reached its call. */
static int other_fn(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    rcoll_comm_t dup;
    if (rcoll_comm_dup(comm, &dup) != RCOLL_OK) return 90;
    int fd = capture_begin();
    bad = 0;
    float a[COUNT], b[COUNT];
    for (int i = 0; i < COUNT; i++) a[i] = b[i] = (float)(rank + 1);
    float want = (float)(n * (n + 1) / 2);
    rcoll_status_t st, st2;
    if (rank == 1) {
        rcoll_request_t req;
        st2 = rcoll_iallreduce(RCOLL_IN_PLACE, b, COUNT, RCOLL_FLOAT32, RCOLL_SUM, dup, &req);
        int done = 0;
        for (int i = 0; i < 2500 && !done && st2 == RCOLL_OK; i++) {
            st2 = rcoll_test(&req, &done);
            if (!done) sleep_s(0.001);
        }
        RCHECK(rank, !done, "the duplicate's call waits for ranks 0 and 2");
        st = rcoll_allreduce(RCOLL_IN_PLACE, a, COUNT, RCOLL_FLOAT32, RCOLL_SUM, comm);
        if (!done) st2 = rcoll_wait(&req);
    } else {
        st = rcoll_allreduce(RCOLL_IN_PLACE, a, COUNT, RCOLL_FLOAT32, RCOLL_SUM, comm);
        st2 = rcoll_allreduce(RCOLL_IN_PLACE, b, COUNT, RCOLL_FLOAT32, RCOLL_SUM, dup);
    }
    RCHECK(rank, st == RCOLL_OK && st2 == RCOLL_OK && a[0] == want && b[0] == want,
           "both calls complete: %s / %s", rcoll_comm_last_error(comm),
           rcoll_comm_last_error(dup));
    const char *rp = rcoll_comm_watchdog_report(comm), *rd = rcoll_comm_watchdog_report(dup);
    int lines = capture_end(fd, rank);
    RCHECK(rank, lines == 1, "one report logged, not %d", lines);
    if (rank == 1) {
        RCHECK(rank, rp[0] == '\0', "no report on the parent: %s", rp);
        RCHECK(rank, has(rd, "operation #1 allreduce(count=1000") &&
                         has(rd, "reached by 1 of 3 ranks (1)") &&
                         has(rd, "not reached by ranks 0,2"),
               "the duplicate's report names ranks 0 and 2: %s", rd);
    } else {
        RCHECK(rank, rd[0] == '\0', "no report on the duplicate: %s", rd);
        RCHECK(rank, has(rp, "not reached by rank 1") &&
                         has(rp, "rank 1: ") &&
                         has(rp, "last reported waiting in allreduce (call #") &&
                         has(rp, "of communicator id "),
               "the parent's report says rank 1 waits in another communicator: %s", rp);
    }
    rcoll_comm_destroy(dup);
    return bad;
}

static void other_case(void)
{
    mp_result_t res;
    mp_run(3, other_fn, NULL, 25.0, &res);
    for (int r = 0; r < 3; r++)
        CHECK(res.codes[r] == 0, "other communicator: rank %d's checks (code %d)", r,
              res.codes[r]);
}

static void run_case(case_t c, const char *what)
{
    int arg = c;
    mp_result_t res;
    mp_run(3, watchdog_fn, &arg, 25.0, &res);
    for (int r = 0; r < 3; r++)
        CHECK(res.codes[r] == 0, "%s: rank %d's checks (code %d)", what, r, res.codes[r]);
    if (c != CASE_MISMATCH)
        CHECK(res.seconds < LATE_S + 5, "%s: took %.1f s", what, res.seconds);
}

static void late_case(void) { run_case(CASE_LATE, "late"); }
static void compute_case(void) { run_case(CASE_COMPUTE, "compute"); }
static void mismatch_case(void) { run_case(CASE_MISMATCH, "mismatch"); }

/* Every rank its own host (RCOLL_HOST_ID): no host segment, so whatever the report says of
 * the others comes from the bootstrap root (the ranks' wait reports). */
static int hosts_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    char host[16];
    snprintf(host, sizeof(host), "h%d", rank);
    setenv("RCOLL_HOST_ID", host, 1);
    setenv("RCOLL_NET", "tcp", 1);
    rcoll_comm_t comm;
    if (rcoll_comm_init_rank(n, id, rank, &comm) != RCOLL_OK) return 90;
    int rc = watchdog_fn(comm, rank, n, arg);
    if (rcoll_comm_destroy(comm) != RCOLL_OK && rc == 0) rc = 91;
    return rc;
}

static void hosts_case(void)
{
    int arg = CASE_LATE;
    mp_result_t res;
    mp_run_raw(3, hosts_fn, &arg, 25.0, &res);
    for (int r = 0; r < 3; r++)
        CHECK(res.codes[r] == 0, "late, one host per rank: rank %d's checks (code %d)", r,
              res.codes[r]);
}

static void tcp_case(void)
{
    setenv("RCOLL_TRANSPORT", "tcp", 1);
    run_case(CASE_LATE, "late over tcp");
    unsetenv("RCOLL_TRANSPORT");
}

static void thread_case(void)
{
    setenv("RCOLL_PROGRESS_THREAD", "1", 1);
    run_case(CASE_LATE, "late with a progress thread");
    unsetenv("RCOLL_PROGRESS_THREAD");
}

int main(void)
{
    /* WDOG_TEST_S overrides the watchdog's time (0: off, to see every check fail). */
    const char *w = getenv("WDOG_TEST_S");
    setenv("RCOLL_WATCHDOG_S", w ? w : "1", 1);
    setenv("RCOLL_TIMEOUT", "30", 1);
    check_case("late", late_case);
    check_case("compute", compute_case);
    check_case("mismatch", mismatch_case);
    check_case("other", other_case);
    check_case("tcp", tcp_case);
    check_case("thread", thread_case);
    check_case("hosts", hosts_case);
    return check_summary();
}
