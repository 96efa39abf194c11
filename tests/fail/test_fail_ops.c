/*
 * test_fail_ops.c - a rank killed in the middle of any operation becomes a clear error on
 * every survivor, never a hang: for reduce, allgather, reduce_scatter, alltoall, bcast,
 * barrier and send/recv in a group, 4 ranks run the operation in a loop; on the third round
 * the victim starts the nonblocking form with a large count, polls rcoll_test a few times and
 * dies by SIGKILL.  Each survivor's failing call must return RCOLL_ERR_REMOTE or
 * RCOLL_ERR_TIMEOUT naming "rank <victim>" within the timeout, and later calls must return
 * RCOLL_ERR_INVALID_USAGE with the original cause.  Two more cases stop the victim (SIGSTOP)
 * so that only timeouts can find it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

#define TIMEOUT_S 4.0
/* A kill is seen at once on a closed connection; a rank that only waits on other survivors
 * learns it within RCOLL_TIMEOUT plus the root's 1 s collection of timeout reports, plus
 * scheduling slack on a loaded 2-core machine (ASan builds in CI). */
#define LIMIT_S (TIMEOUT_S + 2.0)
#define NRANKS 4
#define COUNT ((size_t)1 << 18) /* floats per block: 1 MiB */

typedef enum { K_REDUCE, K_ALLGATHER, K_REDUCE_SCATTER, K_ALLTOALL, K_BCAST, K_BARRIER,
               K_P2P_GROUP, K_P2P_MID } kind_t;

typedef struct {
    kind_t kind;
    const char *name;
    int victim, root;
    int stop; /* 1: the victim stops (SIGSTOP) instead: survivors time out naming it */
} case_t;

static const case_t cases[] = {
    {K_REDUCE, "reduce (root 0)", 3, 0, 0},
    {K_ALLGATHER, "allgather", 1, 0, 0},
    {K_REDUCE_SCATTER, "reduce_scatter", 2, 0, 0},
    {K_ALLTOALL, "alltoall", 0, 0, 0},
    {K_BCAST, "bcast (the root dies)", 1, 1, 0},
    {K_BCAST, "bcast (a non-root dies)", 2, 0, 0},
    {K_BARRIER, "barrier", 2, 0, 0},
    {K_P2P_GROUP, "send/recv group (killed before group_end)", 1, 0, 0},
    {K_P2P_MID, "send/recv (killed mid-transfer; survivors in a group)", 3, 0, 0},
    /* Beyond kills: a stopped rank is found by timeouts, which must still name it. */
    {K_ALLTOALL, "alltoall, victim stopped", 2, 0, 1},
    {K_P2P_MID, "send/recv, victim stopped mid-transfer", 1, 0, 1},
};

/* What each survivor saw, shared with the parent. */
typedef struct {
    int status, later_status, iter;
    double took;
    char msg[320];
} seen_t;
static seen_t *seen;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    float *send, *recv;
    float *p2p_out[NRANKS], *p2p_in[NRANKS];
} bufs_t;

/* The blocking form, as survivors (and the victim before it dies) call it. */
static rcoll_status_t blocking(const case_t *c, bufs_t *b, rcoll_comm_t comm, int rank)
{
    switch (c->kind) {
    case K_REDUCE:
        return rcoll_reduce(b->send, rank == c->root ? b->recv : NULL, COUNT, RCOLL_FLOAT32,
                            RCOLL_SUM, c->root, comm);
    case K_ALLGATHER: return rcoll_allgather(b->send, b->recv, COUNT, RCOLL_FLOAT32, comm);
    case K_REDUCE_SCATTER:
        return rcoll_reduce_scatter(b->send, b->recv, COUNT, RCOLL_FLOAT32, RCOLL_SUM, comm);
    case K_ALLTOALL: return rcoll_alltoall(b->send, b->recv, COUNT, RCOLL_FLOAT32, comm);
    case K_BCAST: return rcoll_bcast(b->send, NRANKS * COUNT, RCOLL_FLOAT32, c->root, comm);
    case K_BARRIER: return rcoll_barrier(comm);
    default: break;
    }
    /* Send/recv with every peer in one group. */
    rcoll_status_t st = rcoll_group_start();
    for (int p = 0; p < NRANKS && st == RCOLL_OK; p++)
        if (p != rank) st = rcoll_send(b->p2p_out[p], COUNT, RCOLL_FLOAT32, p, comm);
    for (int p = 0; p < NRANKS && st == RCOLL_OK; p++)
        if (p != rank) st = rcoll_recv(b->p2p_in[p], COUNT, RCOLL_FLOAT32, p, comm);
    rcoll_status_t end = rcoll_group_end();
    return st != RCOLL_OK ? st : end;
}

/* The victim's last round: start the operation, let some data move, die. */
static void die_midway(const case_t *c, bufs_t *b, rcoll_comm_t comm, int rank)
{
    rcoll_request_t req[2 * NRANKS] = {0};
    int nreq = 1;
    switch (c->kind) {
    case K_REDUCE:
        rcoll_ireduce(b->send, rank == c->root ? b->recv : NULL, COUNT, RCOLL_FLOAT32,
                      RCOLL_SUM, c->root, comm, &req[0]);
        break;
    case K_ALLGATHER: rcoll_iallgather(b->send, b->recv, COUNT, RCOLL_FLOAT32, comm, &req[0]); break;
    case K_REDUCE_SCATTER:
        rcoll_ireduce_scatter(b->send, b->recv, COUNT, RCOLL_FLOAT32, RCOLL_SUM, comm, &req[0]);
        break;
    case K_ALLTOALL: rcoll_ialltoall(b->send, b->recv, COUNT, RCOLL_FLOAT32, comm, &req[0]); break;
    case K_BCAST:
        rcoll_ibcast(b->send, NRANKS * COUNT, RCOLL_FLOAT32, c->root, comm, &req[0]);
        break;
    case K_BARRIER: rcoll_ibarrier(comm, &req[0]); break;
    case K_P2P_GROUP:
        /* Nothing moves before group_end (rcoll.h), so the victim dies just before it. */
        rcoll_group_start();
        for (int p = 0; p < NRANKS; p++)
            if (p != rank) rcoll_send(b->p2p_out[p], COUNT, RCOLL_FLOAT32, p, comm);
        for (int p = 0; p < NRANKS; p++)
            if (p != rank) rcoll_recv(b->p2p_in[p], COUNT, RCOLL_FLOAT32, p, comm);
        raise(SIGKILL);
        break;
    case K_P2P_MID:
        nreq = 0;
        for (int p = 0; p < NRANKS; p++)
            if (p != rank) rcoll_isend(b->p2p_out[p], COUNT, RCOLL_FLOAT32, p, comm, &req[nreq++]);
        for (int p = 0; p < NRANKS; p++)
            if (p != rank) rcoll_irecv(b->p2p_in[p], COUNT, RCOLL_FLOAT32, p, comm, &req[nreq++]);
        break;
    }
    for (int k = 0; k < 50; k++)
        for (int q = 0; q < nreq; q++) {
            int done = 0;
            if (req[q]) rcoll_test(&req[q], &done);
        }
    raise(c->stop ? SIGSTOP : SIGKILL);
    pause();
}

static int run_case(rcoll_comm_t comm, int rank, int n, void *arg)
{
    const case_t *c = arg;
    (void)n;
    bufs_t b;
    b.send = malloc(NRANKS * COUNT * sizeof(float));
    b.recv = malloc(NRANKS * COUNT * sizeof(float));
    for (size_t i = 0; i < NRANKS * COUNT; i++) b.send[i] = (float)(rank + 1);
    for (int p = 0; p < NRANKS; p++) {
        b.p2p_out[p] = malloc(COUNT * sizeof(float));
        b.p2p_in[p] = malloc(COUNT * sizeof(float));
        for (size_t i = 0; i < COUNT; i++) b.p2p_out[p][i] = (float)(rank * 10 + p);
    }
    char word[32];
    snprintf(word, sizeof(word), "rank %d", c->victim);
    seen_t *s = &seen[rank];
    double t_end = now_s() + 25;
    for (int iter = 0; iter < 200 && now_s() < t_end; iter++) {
        if (rank == c->victim && iter == 2) die_midway(c, &b, comm, rank);
        double t0 = now_s(); /* the error must come within the limit of the failing call */
        rcoll_status_t st = blocking(c, &b, comm, rank);
        if (st == RCOLL_OK) continue;
        s->took = now_s() - t0;
        s->status = st;
        s->iter = iter;
        snprintf(s->msg, sizeof(s->msg), "%s", rcoll_comm_last_error(comm));
        int ok = (st == RCOLL_ERR_REMOTE || st == RCOLL_ERR_TIMEOUT) &&
                 strstr(s->msg, word) != NULL && s->took < LIMIT_S + (c->stop ? 2 : 0);
        /* Later calls fail at once with the original cause. */
        rcoll_status_t later = rcoll_barrier(comm);
        s->later_status = later;
        int later_ok = later == RCOLL_ERR_INVALID_USAGE &&
                       strstr(rcoll_comm_last_error(comm), word) != NULL;
        return ok ? (later_ok ? 0 : 2) : 1;
    }
    snprintf(s->msg, sizeof(s->msg), "never saw the failure");
    return 3;
}

int main(void)
{
    char t[32];
    snprintf(t, sizeof(t), "%g", TIMEOUT_S);
    setenv("RCOLL_TIMEOUT", t, 1);
    setenv("RCOLL_CHUNK_SIZE", "64K", 1);
    setenv("RCOLL_DEBUG", "NONE", 0);
    seen = mmap(NULL, NRANKS * sizeof(seen_t), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (seen == MAP_FAILED) return 99;
    double t_all = now_s();
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const case_t *c = &cases[k];
        memset(seen, 0, NRANKS * sizeof(seen_t));
        mp_result_t res;
        mp_run(NRANKS, run_case, (void *)c, c->stop ? TIMEOUT_S + 6 : 30, &res);
        printf("%s, victim rank %d (%.1f s):\n", c->name, c->victim, res.seconds);
        for (int r = 0; r < NRANKS; r++) {
            seen_t *s = &seen[r];
            if (r == c->victim) {
                CHECK(res.codes[r] == (c->stop ? MP_TIMEOUT_EXIT : 128 + SIGKILL),
                      "%s: victim rank %d %s (code %d)", c->name, r,
                      c->stop ? "stopped, reaped by the harness" : "died by SIGKILL", res.codes[r]);
                continue;
            }
            printf("  rank %d: code %d, round %d, %s after %.2f s, later %s: %s\n", r,
                   res.codes[r], s->iter, rcoll_status_string(s->status), s->took,
                   rcoll_status_string(s->later_status), s->msg);
            CHECK(res.codes[r] == 0 || res.codes[r] == 2,
                  "%s: survivor rank %d gets RCOLL_ERR_REMOTE/TIMEOUT naming rank %d within "
                  "%.0f s (code %d: %s after %.2f s: %s)", c->name, r, c->victim,
                  LIMIT_S + (c->stop ? 2 : 0),
                  res.codes[r], rcoll_status_string(s->status), s->took, s->msg);
            if (res.codes[r] == 0 || res.codes[r] == 2)
                CHECK(res.codes[r] == 0, "%s: survivor rank %d: the next call returns "
                      "RCOLL_ERR_INVALID_USAGE with the cause (got %s)", c->name, r,
                      rcoll_status_string(s->later_status));
        }
        fflush(stdout);
    }
    printf("total %.1f s\n", now_s() - t_all);
    return check_summary();
}
