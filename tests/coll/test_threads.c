/*
 * test_threads.c - one communicator used by two threads at once is refused, not corrupted:
 * on rank 0, thread A runs an all-reduce that waits (rank 1 joins it 400 ms later) while
 * thread B calls rcoll_bcast, rcoll_barrier and rcoll_iallreduce on the same communicator;
 * each of B's calls returns RCOLL_ERR_INVALID_USAGE with a sentence naming A's call, A's
 * all-reduce completes with the right sum, and afterwards B's calls work again (the flag is
 * released).  A duplicate communicator (rcoll_comm_dup) used by B meanwhile is fine.  The
 * same while thread A is inside rcoll_group_end (its group's all-reduce waiting for rank 1):
 * B's calls are refused naming rcoll_group_end.  Then a nonblocking all-reduce posted by one
 * thread is completed by rcoll_wait in another.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "mp.h"

typedef struct {
    rcoll_comm_t comm, dup;
    int refused, dup_ok;
    char text[320];
} thread_b_t;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void *thread_b(void *arg)
{
    thread_b_t *b = arg;
    sleep_ms(100); /* thread A is inside its all-reduce by now */
    int32_t v[4] = {1, 2, 3, 4};
    rcoll_request_t req = NULL;
    rcoll_status_t st[3] = {
        rcoll_bcast(v, 4, RCOLL_INT32, 0, b->comm),
        rcoll_barrier(b->comm),
        rcoll_iallreduce(RCOLL_IN_PLACE, v, 4, RCOLL_INT32, RCOLL_SUM, b->comm, &req),
    };
    for (int i = 0; i < 3; i++) b->refused += st[i] == RCOLL_ERR_INVALID_USAGE;
    snprintf(b->text, sizeof(b->text), "%s", rcoll_comm_last_error(b->comm));
    /* its own duplicate is free: a self-only split needs no peer */
    int32_t one = 1;
    b->dup_ok = rcoll_allreduce(RCOLL_IN_PLACE, &one, 1, RCOLL_INT32, RCOLL_SUM, b->dup) ==
                    RCOLL_OK && one == 1;
    return NULL;
}

/* Waits for a request another thread posted. */
typedef struct {
    rcoll_request_t *req;
    rcoll_status_t st;
} waiter_t;

static void *waiter(void *arg)
{
    waiter_t *w = arg;
    w->st = rcoll_wait(w->req);
    return NULL;
}

static int body(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    int bad = 0;
    rcoll_comm_t self = NULL;
    if (rcoll_comm_split(comm, rank, 0, &self) != RCOLL_OK) return 1;
    if (rank == 1) sleep_ms(400); /* rank 0's all-reduce waits for this one meanwhile */
    thread_b_t b = {.comm = comm, .dup = self};
    pthread_t th;
    if (rank == 0 && pthread_create(&th, NULL, thread_b, &b) != 0) return 1;
    int32_t x = rank + 1;
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, comm);
    bad += st != RCOLL_OK || x != n * (n + 1) / 2;
    if (rank == 0) {
        pthread_join(th, NULL);
        if (b.refused != 3 || !strstr(b.text, "another thread is using this communicator (in "
                                                "rcoll_allreduce)") || !b.dup_ok) {
            fprintf(stderr, "rank 0: %d of 3 refused, dup %d, last error '%s'\n", b.refused,
                    b.dup_ok, b.text);
            bad++;
        }
    }
    /* a thread inside rcoll_group_end holds the communicator as a call does */
    if (rank == 1) sleep_ms(400);
    thread_b_t b2 = {.comm = comm, .dup = self};
    if (rank == 0 && pthread_create(&th, NULL, thread_b, &b2) != 0) return 1;
    int32_t g = rank + 1;
    rcoll_status_t gs = rcoll_group_start();
    if (gs == RCOLL_OK) gs = rcoll_allreduce(RCOLL_IN_PLACE, &g, 1, RCOLL_INT32, RCOLL_SUM, comm);
    rcoll_status_t ge = rcoll_group_end();
    bad += gs != RCOLL_OK || ge != RCOLL_OK || g != n * (n + 1) / 2;
    if (rank == 0) {
        pthread_join(th, NULL);
        if (b2.refused != 3 || !strstr(b2.text, "another thread is using this communicator (in "
                                                 "rcoll_group_end)") || !b2.dup_ok) {
            fprintf(stderr, "rank 0, group: %d of 3 refused, dup %d, last error '%s'\n",
                    b2.refused, b2.dup_ok, b2.text);
            bad++;
        }
    }
    /* released: the communicator works again, from any thread */
    int32_t y = 2;
    st = rcoll_allreduce(RCOLL_IN_PLACE, &y, 1, RCOLL_INT32, RCOLL_SUM, comm);
    bad += st != RCOLL_OK || y != 2 * n;
    if (bad) fprintf(stderr, "rank %d: all-reduce %s, %d %d\n", rank, rcoll_status_string(st), x, y);
    /* a request posted by this thread is completed by another one (not at the same time) */
    int32_t z[3] = {rank, rank, rank};
    rcoll_request_t req = NULL;
    waiter_t w = {.req = &req, .st = RCOLL_ERR_INTERNAL};
    st = rcoll_iallreduce(RCOLL_IN_PLACE, z, 3, RCOLL_INT32, RCOLL_SUM, comm, &req);
    if (st != RCOLL_OK || pthread_create(&th, NULL, waiter, &w) != 0) return 1;
    pthread_join(th, NULL);
    if (w.st != RCOLL_OK || req != NULL || z[0] != n * (n - 1) / 2 || z[2] != z[0]) {
        fprintf(stderr, "rank %d: a request waited by another thread: %s, %d\n", rank,
                rcoll_status_string(w.st), z[0]);
        bad++;
    }
    rcoll_comm_destroy(self);
    return bad != 0;
}

int main(void)
{
    mp_result_t res;
    CHECK(mp_run(2, body, NULL, 60, &res) == 0, "concurrent use refused on rank 0, "
          "the communicator intact on both ranks");
    return check_summary();
}
