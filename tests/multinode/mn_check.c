/*
 * mn_check.c - collective correctness across hosts, for tests/multinode/run_multinode.sh:
 * one process per rank, started by a launcher (tools/netns-cluster) and created with
 * rcoll_comm_init_env (or, with --id-file, from a unique id that rank 0 makes and the others
 * read from a file, as an MPI job would broadcast it). Uses only the public API (include/rcoll.h); every expected value is
 * computed here, element by element over all ranks, never with rcoll itself.
 * Prints one line per failed check and "mn_check: rank R of N: OK (...)" at the end.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rcoll.h>

/* Stop after this many reported mismatches per check, so one bug does not flood the log. */
#define MN_MAX_REPORTS 5

typedef struct {
    rcoll_comm_t comm;
    int rank;
    int nranks;
    int checks;   /* checks run */
    int failures; /* checks that failed */
} mn_ctx_t;

/* Inputs are small integers (also in float32: every partial sum is exact), so any reduction
 * order gives the same bits. */
static int32_t mn_input(int rank, size_t i, int salt)
{
    return (int32_t)((i * 31u + (size_t)rank * 17u + (size_t)salt * 7u) % 101u) - 50;
}

/* Report a failed rcoll call and end the process: the communicator is unusable afterwards.
 * rcoll_comm_abort makes the other ranks fail at once instead of waiting for RCOLL_TIMEOUT. */
static void mn_fatal(mn_ctx_t *c, const char *what, rcoll_status_t st)
{
    fprintf(stderr, "mn_check: rank %d: %s failed: %s: %s\n", c->rank, what,
            rcoll_status_string(st), rcoll_comm_last_error(c->comm));
    fflush(stderr);
    rcoll_comm_abort(c->comm);
    exit(2);
}

static void mn_result(mn_ctx_t *c, const char *what, size_t bad)
{
    c->checks++;
    if (bad == 0) return;
    c->failures++;
    fprintf(stderr, "mn_check: rank %d: FAIL %s: %zu wrong element(s)\n", c->rank, what, bad);
}

static void *mn_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "mn_check: out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------------------------------------------
 * All-reduce: int32 and float32, sum and max, out of place and in place.
 * ---------------------------------------------------------------------------------------- */
static int32_t mn_expect_reduce(int nranks, size_t i, int salt, rcoll_op_t op)
{
    int32_t acc = mn_input(0, i, salt);
    for (int r = 1; r < nranks; r++) {
        int32_t v = mn_input(r, i, salt);
        acc = op == RCOLL_SUM ? acc + v : (v > acc ? v : acc);
    }
    return acc;
}

static void mn_check_allreduce(mn_ctx_t *c, size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                               int in_place, int salt)
{
    char what[128];
    snprintf(what, sizeof(what), "allreduce %s %s count %zu%s",
             dt == RCOLL_FLOAT32 ? "float32" : "int32", op == RCOLL_SUM ? "sum" : "max", count,
             in_place ? " in place" : "");
    int32_t *si = mn_alloc(count * 4), *ri = mn_alloc(count * 4);
    float *sf = (float *)si, *rf = (float *)ri;
    for (size_t i = 0; i < count; i++) {
        int32_t v = mn_input(c->rank, i, salt);
        if (dt == RCOLL_FLOAT32) {
            sf[i] = (float)v;
            rf[i] = in_place ? (float)v : -12345.0f;
        } else {
            si[i] = v;
            ri[i] = in_place ? v : -12345;
        }
    }
    rcoll_status_t st = rcoll_allreduce(in_place ? RCOLL_IN_PLACE : si, ri, count, dt, op,
                                        c->comm);
    if (st != RCOLL_OK) mn_fatal(c, what, st);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t want = mn_expect_reduce(c->nranks, i, salt, op);
        int ok = dt == RCOLL_FLOAT32 ? rf[i] == (float)want : ri[i] == want;
        if (ok) continue;
        if (bad++ < MN_MAX_REPORTS) {
            if (dt == RCOLL_FLOAT32)
                fprintf(stderr, "mn_check: rank %d: %s: [%zu] = %g, expected %d\n", c->rank,
                        what, i, (double)rf[i], (int)want);
            else
                fprintf(stderr, "mn_check: rank %d: %s: [%zu] = %" PRId32 ", expected %" PRId32
                        "\n", c->rank, what, i, ri[i], want);
        }
    }
    mn_result(c, what, bad);
    free(si);
    free(ri);
}

/* ------------------------------------------------------------------------------------------
 * Broadcast from several roots, all-gather, reduce-scatter (int32).
 * ---------------------------------------------------------------------------------------- */
static void mn_check_bcast(mn_ctx_t *c, size_t count, int root)
{
    char what[96];
    snprintf(what, sizeof(what), "bcast int32 count %zu root %d", count, root);
    int32_t *buf = mn_alloc(count * 4);
    for (size_t i = 0; i < count; i++) buf[i] = c->rank == root ? mn_input(root, i, 3) : -1;
    rcoll_status_t st = rcoll_bcast(buf, count, RCOLL_INT32, root, c->comm);
    if (st != RCOLL_OK) mn_fatal(c, what, st);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t want = mn_input(root, i, 3);
        if (buf[i] != want && bad++ < MN_MAX_REPORTS)
            fprintf(stderr, "mn_check: rank %d: %s: [%zu] = %" PRId32 ", expected %" PRId32 "\n",
                    c->rank, what, i, buf[i], want);
    }
    mn_result(c, what, bad);
    free(buf);
}

static void mn_check_allgather(mn_ctx_t *c, size_t count)
{
    char what[96];
    snprintf(what, sizeof(what), "allgather int32 count %zu", count);
    size_t n = (size_t)c->nranks;
    int32_t *send = mn_alloc(count * 4), *recv = mn_alloc(n * count * 4);
    for (size_t i = 0; i < count; i++) send[i] = mn_input(c->rank, i, 5);
    for (size_t i = 0; i < n * count; i++) recv[i] = -1;
    rcoll_status_t st = rcoll_allgather(send, recv, count, RCOLL_INT32, c->comm);
    if (st != RCOLL_OK) mn_fatal(c, what, st);
    size_t bad = 0;
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) {
            int32_t want = mn_input((int)r, i, 5), got = recv[r * count + i];
            if (got != want && bad++ < MN_MAX_REPORTS)
                fprintf(stderr, "mn_check: rank %d: %s: block %zu [%zu] = %" PRId32
                        ", expected %" PRId32 "\n", c->rank, what, r, i, got, want);
        }
    mn_result(c, what, bad);
    free(send);
    free(recv);
}

static void mn_check_reduce_scatter(mn_ctx_t *c, size_t count)
{
    char what[96];
    snprintf(what, sizeof(what), "reduce_scatter int32 sum count %zu", count);
    size_t n = (size_t)c->nranks;
    int32_t *send = mn_alloc(n * count * 4), *recv = mn_alloc(count * 4);
    /* Element j of the whole buffer is input j (salt 9) of each rank. */
    for (size_t j = 0; j < n * count; j++) send[j] = mn_input(c->rank, j, 9);
    for (size_t i = 0; i < count; i++) recv[i] = -1;
    rcoll_status_t st = rcoll_reduce_scatter(send, recv, count, RCOLL_INT32, RCOLL_SUM, c->comm);
    if (st != RCOLL_OK) mn_fatal(c, what, st);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        size_t j = (size_t)c->rank * count + i;
        int32_t want = mn_expect_reduce(c->nranks, j, 9, RCOLL_SUM);
        if (recv[i] != want && bad++ < MN_MAX_REPORTS)
            fprintf(stderr, "mn_check: rank %d: %s: [%zu] = %" PRId32 ", expected %" PRId32 "\n",
                    c->rank, what, i, recv[i], want);
    }
    mn_result(c, what, bad);
    free(send);
    free(recv);
}

/* ------------------------------------------------------------------------------------------
 * Barrier: ranks enter at staggered times; nobody may leave before the last one entered.
 * All ranks share this machine's CLOCK_REALTIME (namespaces do not virtualise it), so the
 * entry and exit times are comparable; they are exchanged with an int64 all-reduce.
 * ---------------------------------------------------------------------------------------- */
static int64_t mn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void mn_check_barrier(mn_ctx_t *c, int rounds)
{
    for (int k = 0; k < rounds; k++) {
        char what[64];
        snprintf(what, sizeof(what), "barrier round %d", k);
        /* A different rank arrives last in each round, 20 ms after the others. */
        if (c->rank == (k * 5 + 1) % c->nranks) usleep(20000);
        int64_t t[2];
        t[0] = mn_now_ns();
        rcoll_status_t st = rcoll_barrier(c->comm);
        if (st != RCOLL_OK) mn_fatal(c, what, st);
        t[1] = -mn_now_ns(); /* max of -exit = -(earliest exit) */
        st = rcoll_allreduce(RCOLL_IN_PLACE, t, 2, RCOLL_INT64, RCOLL_MAX, c->comm);
        if (st != RCOLL_OK) mn_fatal(c, "allreduce int64 max (barrier times)", st);
        int64_t last_in = t[0], first_out = -t[1];
        size_t bad = first_out < last_in;
        if (bad)
            fprintf(stderr, "mn_check: rank %d: %s: a rank left %.3f ms before the last one "
                    "entered\n", c->rank, what, (double)(last_in - first_out) / 1e6);
        mn_result(c, what, bad);
    }
}

/* --split-until-error: a child communicator with the ranks in reverse order (so its rank 0
 * is not the process that hosts the bootstrap root), then all-reduces of 4 MiB on it until
 * one fails (a test kills a host meanwhile); prints the error and exits 2 at once. */
static int mn_split_until_error(mn_ctx_t *c)
{
    rcoll_comm_t child = NULL;
    rcoll_status_t st = rcoll_comm_split(c->comm, 0, c->nranks - c->rank, &child);
    if (st != RCOLL_OK) mn_fatal(c, "rcoll_comm_split", st);
    int crank = -1;
    rcoll_comm_rank(child, &crank);
    printf("mn_check: rank %d (pid %d) is rank %d of the reversed split\n", c->rank,
           (int)getpid(), crank);
    size_t count = 1u << 20;
    float *buf = calloc(count, sizeof(*buf));
    if (!buf) return 2;
    for (;;) {
        st = rcoll_allreduce(RCOLL_IN_PLACE, buf, count, RCOLL_FLOAT32, RCOLL_SUM, child);
        if (st != RCOLL_OK) break;
    }
    fprintf(stderr, "mn_check: rank %d: split all-reduce failed: %s: %s\n", c->rank,
            rcoll_status_string(st), rcoll_comm_last_error(child));
    fflush(stdout);
    fflush(stderr);
    free(buf);
    /* End here, tearing nothing down: closing the connections could reach the other survivor
     * before its own timeout and change what it reports.  _exit also skips the leak check of
     * sanitizer builds, which would count the communicators left alive on purpose. */
    _exit(2);
}

/* --loop S: all-reduces of 4 MiB (int32 sum, different inputs each time), each checked
 * element by element, for S seconds (rank 0's clock decides, told to all after each one), while
 * a test cuts and restores a link; prints the count, the wrong elements and the longest
 * all-reduce (how long traffic stalled while a connection moved to the other link). */
static void mn_loop(mn_ctx_t *c, double seconds)
{
    const size_t count = 1u << 20;
    int32_t *buf = mn_alloc(count * 4);
    int64_t t0 = mn_now_ns();
    double longest = 0, total = 0;
    int iters = 0, longest_at = -1;
    size_t bad = 0;

    for (int k = 0;; k++) {
        int salt = k % 97;
        for (size_t i = 0; i < count; i++) buf[i] = mn_input(c->rank, i, salt);
        int64_t a = mn_now_ns();
        rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, buf, count, RCOLL_INT32, RCOLL_SUM,
                                            c->comm);
        if (st != RCOLL_OK) mn_fatal(c, "loop allreduce", st);
        double dt = (double)(mn_now_ns() - a) / 1e9;
        total += dt;
        if (dt > longest) {
            longest = dt;
            longest_at = k;
        }
        for (size_t i = 0; i < count; i++) {
            int32_t want = mn_expect_reduce(c->nranks, i, salt, RCOLL_SUM);
            if (buf[i] == want) continue;
            if (bad++ < MN_MAX_REPORTS)
                fprintf(stderr, "mn_check: rank %d: loop all-reduce %d: [%zu] = %" PRId32
                        ", expected %" PRId32 "\n", c->rank, k, i, buf[i], want);
        }
        iters++;
        int32_t stop = c->rank == 0 && (double)(mn_now_ns() - t0) / 1e9 >= seconds;
        st = rcoll_allreduce(RCOLL_IN_PLACE, &stop, 1, RCOLL_INT32, RCOLL_MAX, c->comm);
        if (st != RCOLL_OK) mn_fatal(c, "loop stop flag", st);
        if (stop) break;
    }
    mn_result(c, "loop all-reduces", bad);
    printf("mn_check: rank %d: loop: %d all-reduces of 4 MiB in %.1f s, %zu wrong element(s), "
           "longest %.3f s (all-reduce %d), mean %.3f s\n", c->rank, iters,
           (double)(mn_now_ns() - t0) / 1e9, bad, longest, longest_at, total / iters);
    free(buf);
}

/* --id-file PATH: rank 0 (RCOLL_RANK) makes a unique id with rcoll_get_unique_id and writes
 * it to PATH (through a rename, so that it appears whole); the others wait for it (60 s) and
 * read it; all then call rcoll_comm_init_rank with RCOLL_RANK and RCOLL_NRANKS. */
static rcoll_status_t init_from_id_file(const char *path, rcoll_comm_t *comm)
{
    const char *re = getenv("RCOLL_RANK"), *se = getenv("RCOLL_NRANKS");
    if (!re || !se) {
        fprintf(stderr, "mn_check: --id-file needs RCOLL_RANK and RCOLL_NRANKS\n");
        return RCOLL_ERR_INVALID_ARG;
    }
    int rank = atoi(re), nranks = atoi(se);
    rcoll_unique_id_t id;
    if (rank == 0) {
        rcoll_status_t st = rcoll_get_unique_id(&id);
        if (st != RCOLL_OK) {
            fprintf(stderr, "mn_check: rcoll_get_unique_id: %s\n", rcoll_last_init_error());
            return st;
        }
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path)) {
            fprintf(stderr, "mn_check: cannot write the id to %s\n", path);
            return RCOLL_ERR_SYSTEM;
        }
    } else {
        int got = 0;
        for (int ms = 0; !got && ms < 60000; ms += 20) {
            FILE *f = fopen(path, "rb");
            if (f) {
                got = fread(&id, sizeof(id), 1, f) == 1;
                fclose(f);
            }
            if (!got) {
                struct timespec ts = {0, 20000000};
                nanosleep(&ts, NULL);
            }
        }
        if (!got) {
            fprintf(stderr, "mn_check: no id in %s after 60 s\n", path);
            return RCOLL_ERR_TIMEOUT;
        }
    }
    return rcoll_comm_init_rank(nranks, &id, rank, comm);
}

int main(int argc, char **argv)
{
    const char *id_file = NULL;
    if (argc >= 3 && !strcmp(argv[1], "--id-file")) {
        id_file = argv[2];
        argv += 2;
        argc -= 2;
    }
    int split_mode = argc == 2 && !strcmp(argv[1], "--split-until-error");
    double loop_s = argc == 3 && !strcmp(argv[1], "--loop") ? atof(argv[2]) : 0;
    /* --idle S: the loop for 2 s, S seconds without a call, the loop for 4 s more */
    double idle_s = argc == 3 && !strcmp(argv[1], "--idle") ? atof(argv[2]) : 0;
    if (argc > 1 && !split_mode && !(loop_s > 0) && !(idle_s > 0)) {
        fprintf(stderr, "usage: mn_check [--id-file PATH] [--split-until-error | --loop "
                        "SECONDS | --idle SECONDS] (takes its ranks from the environment, as "
                        "set by tools/netns-cluster or tools/rcoll-run)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    mn_ctx_t c = {0};
    rcoll_status_t st = id_file ? init_from_id_file(id_file, &c.comm)
                                : rcoll_comm_init_env(&c.comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "mn_check: %s failed: %s: %s\n",
                id_file ? "rcoll_comm_init_rank" : "rcoll_comm_init_env",
                rcoll_status_string(st), rcoll_last_init_error());
        return 2;
    }
    rcoll_comm_rank(c.comm, &c.rank);
    rcoll_comm_size(c.comm, &c.nranks);
    if (split_mode) return mn_split_until_error(&c);
    size_t n = (size_t)c.nranks;
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    int64_t t0 = mn_now_ns();

    /* Counts that are not multiples of the rank count. 262147 float32 elements are 12 bytes
     * more than the default pipeline chunk (RCOLL_BUFFSIZE / 4 = 1 MiB), so they take two
     * chunks; with a small RCOLL_CHUNK_SIZE the smaller counts are multi-chunk too. */
    const size_t counts[] = {1, 7, 3 * n + 1, 1031, 65537, 262147};
    const int ncounts = loop_s > 0 || idle_s > 0 ? 0 : (int)(sizeof(counts) / sizeof(counts[0]));
    int salt = 0;
    if (loop_s > 0) {
        mn_loop(&c, loop_s);
        goto verdict;
    }
    if (idle_s > 0) {
        mn_loop(&c, 2);
        struct timespec ts = {(time_t)idle_s, (long)((idle_s - (double)(time_t)idle_s) * 1e9)};
        nanosleep(&ts, NULL);
        mn_loop(&c, 4);
        goto verdict;
    }
    for (int k = 0; k < ncounts; k++) {
        mn_check_allreduce(&c, counts[k], RCOLL_FLOAT32, RCOLL_SUM, 0, salt++);
        mn_check_allreduce(&c, counts[k], RCOLL_INT32, RCOLL_SUM, 0, salt++);
        mn_check_allreduce(&c, counts[k], RCOLL_FLOAT32, RCOLL_MAX, 0, salt++);
        mn_check_allreduce(&c, counts[k], RCOLL_INT32, RCOLL_MAX, 0, salt++);
    }
    mn_check_allreduce(&c, 1031, RCOLL_FLOAT32, RCOLL_SUM, 1, salt++);
    mn_check_allreduce(&c, 65537, RCOLL_INT32, RCOLL_MAX, 1, salt++);

    const size_t bcounts[] = {1, 1031, 262147};
    for (int k = 0; k < 3; k++) {
        mn_check_bcast(&c, bcounts[k], 0);
        mn_check_bcast(&c, bcounts[k], c.nranks - 1);
        mn_check_bcast(&c, bcounts[k], c.nranks / 2);
    }
    const size_t bl_counts[] = {1, 7, 1031, 32771};
    for (int k = 0; k < 4; k++) {
        mn_check_allgather(&c, bl_counts[k]);
        mn_check_reduce_scatter(&c, bl_counts[k]);
    }
    mn_check_barrier(&c, 3);

verdict:;
    /* Everyone's verdict, so that a rank whose own checks passed still notices another's. */
    int32_t failed_anywhere = c.failures;
    st = rcoll_allreduce(RCOLL_IN_PLACE, &failed_anywhere, 1, RCOLL_INT32, RCOLL_SUM, c.comm);
    if (st != RCOLL_OK) mn_fatal(&c, "final allreduce", st);
    st = rcoll_comm_destroy(c.comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "mn_check: rank %d: rcoll_comm_destroy: %s\n", c.rank,
                rcoll_status_string(st));
        return 2;
    }
    double secs = (double)(mn_now_ns() - t0) / 1e9;
    if (c.failures || failed_anywhere) {
        printf("mn_check: rank %d of %d on %s: FAIL (%d of %d checks failed here, %d in all)\n",
               c.rank, c.nranks, host, c.failures, c.checks, (int)failed_anywhere);
        return 1;
    }
    printf("mn_check: rank %d of %d on %s: OK (%d checks: allreduce, bcast, allgather, "
           "reduce_scatter, barrier; %.2f s)\n", c.rank, c.nranks, host, c.checks, secs);
    return 0;
}
