/*
 * test_shrink.c - survivors continue (rcoll_comm_shrink), real processes forked by mp.c whose
 * bootstrap root lives in this test's parent:
 *  - 4 ranks, rank 2 killed: the survivors' collective fails, shrink gives 3 ranks renumbered
 *    in order, and a collective matrix (all-reduce of 4 types and sizes up to several chunks,
 *    broadcast from every root, all-gather, reduce-scatter, all-to-all, barrier, a ring of
 *    sends) is right on the new communicator;
 *  - 8 ranks, ranks 0 and 5 killed (rank 0 of the communicator dies; the root lives on);
 *  - a healthy communicator: shrink gives an equal one, and the old one still works;
 *  - a rank that dies during the shrink (before the root decides) is left out at once;
 *  - a live rank that does not call shrink within RCOLL_TIMEOUT is left out, and its own
 *    late call fails saying so;
 *  - a rank that dies after the decision: the new communicator fails naming it, and a second
 *    shrink leaves it out;
 *  - old and new communicators destroyed in either order (by rank parity);
 *  - environment launch, rank 0 (which hosts the root) killed: no agreement is possible, and
 *    shrink fails with RCOLL_ERR_REMOTE saying why, within the timeout;
 *  - bad arguments, and a pending operation: refused, or failed with
 *    RCOLL_SHRINK_ABORT_PENDING (the old communicator is then failed).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

#define TIMEOUT_S 4.0

enum { MODE_KILL, MODE_HEALTHY, MODE_DIE_DURING, MODE_LATE, MODE_DIE_AFTER, MODE_PENDING };

typedef struct {
    int mode;
    int nvictims;
    int victims[4];
} shrink_arg_t;

static int is_victim(const shrink_arg_t *a, int rank)
{
    for (int i = 0; i < a->nvictims; i++)
        if (a->victims[i] == rank) return 1;
    return 0;
}

#define BAD(...)                                                                 \
    do {                                                                         \
        fprintf(stderr, "rank %d of %d: ", rank, n);                             \
        fprintf(stderr, __VA_ARGS__);                                            \
        fprintf(stderr, "\n");                                                   \
        bad++;                                                                   \
    } while (0)

#define RUN(call)                                                                \
    do {                                                                         \
        rcoll_status_t st_ = (call);                                             \
        if (st_ != RCOLL_OK) {                                                   \
            BAD("%s: %s: %s", #call, rcoll_status_string(st_),                   \
                rcoll_comm_last_error(comm));                                    \
            return bad;                                                          \
        }                                                                        \
    } while (0)

/* Element i of rank r's all-reduce input: small integers, so float sums are exact. */
static double ar_val(int r, size_t i)
{
    return (double)((r + 1) * (int)(i % 13 + 1));
}

/* The collective matrix on comm (rank of n), every result checked against what this rank
 * computes itself.  Returns the number of wrong results. */
static int matrix(rcoll_comm_t comm, int rank, int n)
{
    int bad = 0;
    static const size_t counts[] = {1, 7, 1000, 300000}; /* 300000 x 8 B: many 64 KiB chunks */
    static const rcoll_datatype_t types[] = {RCOLL_INT32, RCOLL_INT64, RCOLL_FLOAT32,
                                             RCOLL_FLOAT64};
    double tri = (double)n * (n + 1) / 2;
    size_t maxc = 300000;
    void *buf = malloc(maxc * 8), *out = malloc(maxc * 8);
    for (size_t t = 0; t < 4; t++)
        for (size_t c = 0; c < 4; c++) {
            size_t cnt = counts[c];
            for (size_t i = 0; i < cnt; i++) {
                double v = ar_val(rank, i);
                switch (types[t]) {
                case RCOLL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
                case RCOLL_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
                case RCOLL_FLOAT32: ((float *)buf)[i] = (float)v; break;
                default: ((double *)buf)[i] = v; break;
                }
            }
            RUN(rcoll_allreduce(buf, out, cnt, types[t], RCOLL_SUM, comm));
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < cnt; i++) {
                double want = tri * (double)(i % 13 + 1), got;
                switch (types[t]) {
                case RCOLL_INT32: got = ((int32_t *)out)[i]; break;
                case RCOLL_INT64: got = (double)((int64_t *)out)[i]; break;
                case RCOLL_FLOAT32: got = ((float *)out)[i]; break;
                default: got = ((double *)out)[i]; break;
                }
                if (got != want && !wrong++) first = i;
            }
            if (wrong)
                BAD("allreduce type %d count %zu: %zu wrong (first at %zu)", (int)types[t], cnt,
                    wrong, first);
        }
    /* broadcast from every root */
    int32_t *b = buf, *o = out;
    for (int root = 0; root < n; root++) {
        for (int i = 0; i < 5000; i++) b[i] = rank == root ? root * 100000 + i : -1;
        RUN(rcoll_bcast(b, 5000, RCOLL_INT32, root, comm));
        for (int i = 0; i < 5000; i++)
            if (b[i] != root * 100000 + i) {
                BAD("bcast from %d: element %d is %d", root, i, b[i]);
                break;
            }
    }
    /* all-gather */
    for (int i = 0; i < 1000; i++) b[i] = rank * 100000 + i;
    RUN(rcoll_allgather(b, o, 1000, RCOLL_INT32, comm));
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 1000; i++)
            if (o[r * 1000 + i] != r * 100000 + i) {
                BAD("allgather: block %d element %d is %d", r, i, o[r * 1000 + i]);
                r = n;
                break;
            }
    /* reduce-scatter: block j of rank r is r + 7 j + i */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 1000; i++) b[j * 1000 + i] = rank + 7 * j + i;
    RUN(rcoll_reduce_scatter(b, o, 1000, RCOLL_INT32, RCOLL_SUM, comm));
    for (int i = 0; i < 1000; i++)
        if (o[i] != n * (n - 1) / 2 + n * (7 * rank + i)) {
            BAD("reduce_scatter: element %d is %d", i, o[i]);
            break;
        }
    /* all-to-all: to peer p, rank * 1000000 + p * 1000 + i */
    for (int p = 0; p < n; p++)
        for (int i = 0; i < 500; i++) b[p * 500 + i] = rank * 1000000 + p * 1000 + i;
    RUN(rcoll_alltoall(b, o, 500, RCOLL_INT32, comm));
    for (int p = 0; p < n; p++)
        for (int i = 0; i < 500; i++)
            if (o[p * 500 + i] != p * 1000000 + rank * 1000 + i) {
                BAD("alltoall: from %d element %d is %d", p, i, o[p * 500 + i]);
                p = n;
                break;
            }
    RUN(rcoll_barrier(comm));
    /* a ring of sends */
    for (int i = 0; i < 777; i++) b[i] = rank * 1000 + i;
    RUN(rcoll_group_start());
    rcoll_send(b, 777, RCOLL_INT32, (rank + 1) % n, comm);
    rcoll_recv(o, 777, RCOLL_INT32, (rank + n - 1) % n, comm);
    RUN(rcoll_group_end());
    for (int i = 0; i < 777; i++)
        if (o[i] != ((rank + n - 1) % n) * 1000 + i) {
            BAD("send/recv: element %d is %d", i, o[i]);
            break;
        }
    free(buf);
    free(out);
    return bad;
}

/* Exit codes of a survivor: 0 all right; 10+ a check that failed. */
static int shrink_rank(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    const shrink_arg_t *a = arg;
    int bad = 0;
    rcoll_comm_t comm, nc = NULL;
    rcoll_status_t st = rcoll_comm_init_rank(n, id, rank, &comm);
    if (st != RCOLL_OK) return 90;
    int32_t one = 1, sum = 0;
    if (rcoll_allreduce(&one, &sum, 1, RCOLL_INT32, RCOLL_SUM, comm) != RCOLL_OK || sum != n)
        return 11;
    int victim = is_victim(a, rank);
    if (victim && a->mode == MODE_KILL) raise(SIGKILL);
    if (a->mode == MODE_KILL) {
        /* the survivors learn of it on a collective */
        st = rcoll_allreduce(&one, &sum, 1, RCOLL_INT32, RCOLL_SUM, comm);
        if (st == RCOLL_OK) st = rcoll_barrier(comm);
        if (st == RCOLL_OK) {
            fprintf(stderr, "rank %d: no failure seen\n", rank);
            return 12;
        }
        char word[32];
        snprintf(word, sizeof(word), "rank %d (", a->victims[0]);
        int named = 0;
        for (int v = 0; v < a->nvictims; v++) {
            snprintf(word, sizeof(word), "rank %d (", a->victims[v]);
            named |= strstr(rcoll_comm_last_error(comm), word) != NULL;
        }
        if (!named) {
            fprintf(stderr, "rank %d: the failure does not name a victim: %s\n", rank,
                    rcoll_comm_last_error(comm));
            return 13;
        }
    }
    if (a->mode == MODE_DIE_DURING && victim) {
        check_sleep_ms(300); /* the others are inside shrink, waiting for this rank */
        raise(SIGKILL);
    }
    if (a->mode == MODE_LATE && victim) {
        check_sleep_ms((int)(TIMEOUT_S * 1000) + 1500);
        st = rcoll_comm_shrink(comm, RCOLL_SHRINK_DEFAULT, &nc);
        int ok = st == RCOLL_ERR_TIMEOUT && nc == NULL &&
                 strstr(rcoll_comm_last_error(comm), "excluded");
        fprintf(stderr, "rank %d (late): %s: %s\n", rank, rcoll_status_string(st),
                rcoll_comm_last_error(comm));
        rcoll_comm_destroy(comm);
        return ok ? 0 : 14;
    }
    if (a->mode == MODE_HEALTHY) { /* arguments */
        if (rcoll_comm_shrink(comm, 0x10, &nc) != RCOLL_ERR_INVALID_ARG || nc) return 30;
        if (rcoll_comm_shrink(comm, RCOLL_SHRINK_DEFAULT, NULL) != RCOLL_ERR_INVALID_ARG)
            return 31;
    }
    int32_t never = 0;
    rcoll_request_t req = NULL;
    if (a->mode == MODE_PENDING) {
        /* a receive nobody sends: refused without the flag, failed with it */
        if (rcoll_irecv(&never, 1, RCOLL_INT32, (rank + 1) % n, comm, &req) != RCOLL_OK)
            return 32;
        if (rcoll_comm_shrink(comm, RCOLL_SHRINK_DEFAULT, &nc) != RCOLL_ERR_INVALID_USAGE ||
            !strstr(rcoll_comm_last_error(comm), "RCOLL_SHRINK_ABORT_PENDING"))
            return 33;
    }
    double t0 = check_now_s();
    st = rcoll_comm_shrink(comm, a->mode == MODE_PENDING ? RCOLL_SHRINK_ABORT_PENDING
                                                         : RCOLL_SHRINK_DEFAULT, &nc);
    if (a->mode == MODE_PENDING && rcoll_wait(&req) == RCOLL_OK) return 34;
    double took = check_now_s() - t0;
    if (st != RCOLL_OK || !nc) {
        fprintf(stderr, "rank %d: shrink: %s: %s\n", rank, rcoll_status_string(st),
                rcoll_comm_last_error(comm));
        return 15;
    }
    int want_size = n - a->nvictims, want_rank = 0, size = -1, nr = -1;
    for (int r = 0; r < rank; r++) want_rank += !is_victim(a, r);
    rcoll_comm_size(nc, &size);
    rcoll_comm_rank(nc, &nr);
    if (size != want_size || nr != want_rank) {
        fprintf(stderr, "rank %d: new communicator: rank %d of %d, want %d of %d\n", rank, nr,
                size, want_rank, want_size);
        return 16;
    }
    /* Dying before the decision must not cost the others the timeout. */
    double limit = a->mode == MODE_LATE ? TIMEOUT_S + 3 : TIMEOUT_S * 0.75;
    if (took > limit) {
        fprintf(stderr, "rank %d: shrink took %.2f s (limit %.2f)\n", rank, took, limit);
        return 17;
    }
    if (rank == 1 || (rank == 0 && a->mode != MODE_KILL))
        fprintf(stderr, "rank %d: shrink to %d ranks took %.3f s\n", rank, size, took);
    if (a->mode == MODE_DIE_AFTER) {
        /* the rank of the job numbered n - 1 dies once in the new communicator */
        if (rank == n - 1) raise(SIGKILL);
        st = rcoll_allreduce(&one, &sum, 1, RCOLL_INT32, RCOLL_SUM, nc);
        if (st == RCOLL_OK) st = rcoll_barrier(nc);
        char word[32];
        snprintf(word, sizeof(word), "rank %d (", n - 1);
        if (st == RCOLL_OK || !strstr(rcoll_comm_last_error(nc), word)) {
            fprintf(stderr, "rank %d: the new communicator's collective: %s: %s\n", rank,
                    rcoll_status_string(st), rcoll_comm_last_error(nc));
            return 18;
        }
        rcoll_comm_t nc2 = NULL;
        st = rcoll_comm_shrink(nc, RCOLL_SHRINK_DEFAULT, &nc2);
        size = -1;
        if (st == RCOLL_OK) rcoll_comm_size(nc2, &size);
        if (st != RCOLL_OK || size != want_size - 1) {
            fprintf(stderr, "rank %d: second shrink: %s (size %d): %s\n", rank,
                    rcoll_status_string(st), size, rcoll_comm_last_error(nc));
            return 19;
        }
        rcoll_comm_rank(nc2, &nr);
        bad += matrix(nc2, nr, size);
        if (rcoll_comm_destroy(nc2) != RCOLL_OK) bad++;
    } else {
        bad += matrix(nc, nr, size);
    }
    if (a->mode == MODE_HEALTHY) {
        /* the old communicator is still fine */
        if (rcoll_allreduce(&one, &sum, 1, RCOLL_INT32, RCOLL_SUM, comm) != RCOLL_OK ||
            sum != n)
            bad++;
    } else if (a->mode == MODE_KILL || a->mode == MODE_PENDING) {
        /* the old one stays failed */
        if (rcoll_barrier(comm) == RCOLL_OK) bad++;
    }
    /* destroy in either order */
    if (rank % 2) {
        if (rcoll_comm_destroy(nc) != RCOLL_OK) bad++;
        if (rcoll_comm_destroy(comm) != RCOLL_OK) bad++;
    } else {
        if (rcoll_comm_destroy(comm) != RCOLL_OK) bad++;
        if (rcoll_comm_destroy(nc) != RCOLL_OK) bad++;
    }
    return bad ? 20 + (bad > 9 ? 9 : bad) : 0;
}

/* --- the root's host dies (environment launch: the root lives in rank 0) --------------- */

static char root_env[64];

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

static int root_lost_rank(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)id;
    (void)arg;
    mp_set_env_rank(rank, n, root_env, "shrink-secret");
    rcoll_comm_t comm, nc = NULL;
    if (rcoll_comm_init_env(&comm) != RCOLL_OK) return 90;
    if (rank == 0) raise(SIGKILL);
    int32_t one = 1, sum = 0;
    if (rcoll_allreduce(&one, &sum, 1, RCOLL_INT32, RCOLL_SUM, comm) == RCOLL_OK) return 12;
    double t0 = check_now_s();
    rcoll_status_t st = rcoll_comm_shrink(comm, RCOLL_SHRINK_DEFAULT, &nc);
    double took = check_now_s() - t0;
    const char *msg = rcoll_comm_last_error(comm);
    int ok = st == RCOLL_ERR_REMOTE && nc == NULL && strstr(msg, "cannot agree") &&
             took < TIMEOUT_S;
    fprintf(stderr, "rank %d: shrink without the root: %s after %.3f s: %s\n", rank,
            rcoll_status_string(st), took, msg);
    rcoll_comm_destroy(comm);
    return ok ? 0 : 40;
}

static void run_case(const char *what, int n, shrink_arg_t *a, int killed_exit)
{
    mp_result_t res;
    double t0 = check_now_s();
    mp_run_raw(n, shrink_rank, a, 60, &res);
    double took = check_now_s() - t0;
    int ok = 1;
    for (int r = 0; r < n; r++) {
        int want = is_victim(a, r) ? killed_exit : 0;
        if (a->mode == MODE_DIE_AFTER && r == n - 1) want = 128 + SIGKILL;
        if (res.codes[r] != want) ok = 0;
    }
    char codes[256] = "";
    for (int r = 0, o = 0; r < n; r++)
        o += snprintf(codes + o, sizeof(codes) - (size_t)o, " %d", res.codes[r]);
    CHECK(ok, "%s: exit codes%s", what, codes);
    printf("%-60s %s (%.2f s)\n", what, ok ? "ok" : "FAIL", took);
    fflush(stdout);
}

int main(void)
{
    char t[32];
    snprintf(t, sizeof(t), "%g", TIMEOUT_S);
    setenv("RCOLL_TIMEOUT", t, 1);
    setenv("RCOLL_CHUNK_SIZE", "64K", 1);
    shrink_arg_t a4 = {MODE_KILL, 1, {2}};
    run_case("4 ranks, rank 2 killed: 3 continue", 4, &a4, 128 + SIGKILL);
    shrink_arg_t a8 = {MODE_KILL, 2, {0, 5}};
    run_case("8 ranks, ranks 0 and 5 killed: 6 continue", 8, &a8, 128 + SIGKILL);
    shrink_arg_t ah = {MODE_HEALTHY, 0, {0}};
    run_case("4 ranks, nobody dead: an equal communicator", 4, &ah, 0);
    shrink_arg_t ap = {MODE_PENDING, 0, {0}};
    run_case("4 ranks, a receive pending: RCOLL_SHRINK_ABORT_PENDING", 4, &ap, 0);
    shrink_arg_t ad = {MODE_DIE_DURING, 1, {1}};
    run_case("4 ranks, rank 1 dies during the shrink: left out", 4, &ad, 128 + SIGKILL);
    shrink_arg_t aa = {MODE_DIE_AFTER, 0, {0}};
    run_case("4 ranks, rank 3 dies once included: shrink again", 4, &aa, 0);
    shrink_arg_t al = {MODE_LATE, 1, {3}};
    run_case("4 ranks, rank 3 calls too late: excluded", 4, &al, 0);
    {
        snprintf(root_env, sizeof(root_env), "127.0.0.1:%d", free_port());
        mp_result_t res;
        double t0 = check_now_s();
        mp_run_raw(3, root_lost_rank, NULL, 30, &res);
        int ok = res.codes[0] == 128 + SIGKILL && res.codes[1] == 0 && res.codes[2] == 0;
        CHECK(ok, "env launch, rank 0 (root host) killed: shrink fails saying why (codes %d %d "
              "%d)", res.codes[0], res.codes[1], res.codes[2]);
        printf("%-60s %s (%.2f s)\n", "3 ranks (env), rank 0 hosting the root killed: no shrink",
               ok ? "ok" : "FAIL", check_now_s() - t0);
    }
    return check_summary();
}
