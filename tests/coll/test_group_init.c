/*
 * test_group_init.c - communicator creation inside rcoll_group_start/end, as NCCL users
 * write it: (1) one thread creates the communicators of every rank of a job in one group,
 * then runs collectives on all of them in groups; (2) each rank process wraps its own
 * rcoll_comm_init_rank in a group and then runs an ordinary job; (3) a creation that fails
 * inside a group fails rcoll_group_end with the reason and leaves the handle NULL; (4)
 * split/dup inside a group are refused with a sentence.  Results are checked against sums
 * computed here.  RCOLL_TIMEOUT is lowered so that the old behaviour (the first creation
 * waits for ranks that are only created after it) fails within seconds instead of hanging.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mp.h"

#define NCOMMS 3
#define COUNT 1000

/* (1) One thread, three ranks of one job. */
static void one_thread_all_ranks(void)
{
    rcoll_unique_id_t id;
    rcoll_comm_t comms[NCOMMS];
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK, "unique id: %s", rcoll_last_init_error());
    CHECK(rcoll_group_start() == RCOLL_OK, "group start");
    int deferred = 1;
    for (int r = 0; r < NCOMMS; r++) {
        comms[r] = (rcoll_comm_t)&id; /* must be overwritten */
        rcoll_status_t st = rcoll_comm_init_rank(NCOMMS, &id, r, &comms[r]);
        CHECK(st == RCOLL_OK, "init_rank %d inside a group: %s (%s)", r, rcoll_status_string(st),
              rcoll_last_init_error());
        deferred &= comms[r] == NULL;
    }
    CHECK(deferred, "handles are NULL until rcoll_group_end");
    rcoll_status_t st = rcoll_group_end();
    CHECK(st == RCOLL_OK, "group end: %s (%s)", rcoll_status_string(st), rcoll_last_init_error());
    if (st != RCOLL_OK) return;
    for (int r = 0; r < NCOMMS; r++) {
        int rank = -1, size = -1;
        CHECK(comms[r] && rcoll_comm_rank(comms[r], &rank) == RCOLL_OK &&
                  rcoll_comm_size(comms[r], &size) == RCOLL_OK && rank == r && size == NCOMMS,
              "communicator %d: rank %d of %d", r, rank, size);
    }
    /* A real job on them: all-reduce and broadcast, each rank's call in one group. */
    static float buf[NCOMMS][COUNT];
    for (int round = 0; round < 3; round++) {
        for (int r = 0; r < NCOMMS; r++)
            for (int i = 0; i < COUNT; i++) buf[r][i] = (float)(r + 1) * (float)(i % 7 + round);
        rcoll_group_start();
        for (int r = 0; r < NCOMMS; r++)
            rcoll_allreduce(RCOLL_IN_PLACE, buf[r], COUNT, RCOLL_FLOAT32, RCOLL_SUM, comms[r]);
        st = rcoll_group_end();
        CHECK(st == RCOLL_OK, "round %d: all-reduce group: %s (%s)", round,
              rcoll_status_string(st), rcoll_comm_last_error(comms[0]));
        int bad = 0;
        for (int r = 0; r < NCOMMS; r++)
            for (int i = 0; i < COUNT; i++)
                bad += buf[r][i] != (float)(1 + 2 + 3) * (float)(i % 7 + round);
        CHECK(bad == 0, "round %d: %d wrong all-reduce elements", round, bad);
        for (int r = 0; r < NCOMMS; r++)
            for (int i = 0; i < COUNT; i++) buf[r][i] = r == 1 ? (float)(i * 3 + round) : -1.0f;
        rcoll_group_start();
        for (int r = 0; r < NCOMMS; r++)
            rcoll_bcast(buf[r], COUNT, RCOLL_FLOAT32, 1, comms[r]);
        st = rcoll_group_end();
        CHECK(st == RCOLL_OK, "round %d: broadcast group: %s", round, rcoll_status_string(st));
        bad = 0;
        for (int r = 0; r < NCOMMS; r++)
            for (int i = 0; i < COUNT; i++) bad += buf[r][i] != (float)(i * 3 + round);
        CHECK(bad == 0, "round %d: %d wrong broadcast elements", round, bad);
    }
    for (int r = 0; r < NCOMMS; r++) {
        rcoll_comm_t child = NULL;
        rcoll_group_start();
        st = rcoll_comm_dup(comms[r], &child);
        rcoll_group_end();
        CHECK(st == RCOLL_ERR_INVALID_USAGE && child == NULL &&
                  strstr(rcoll_comm_last_error(comms[r]), "rcoll_group_start/end"),
              "dup inside a group: %s '%s'", rcoll_status_string(st),
              rcoll_comm_last_error(comms[r]));
    }
    for (int r = 0; r < NCOMMS; r++) rcoll_comm_destroy(comms[r]);
}

/* (2) Each rank process: init in a group of its own, then an ordinary job. */
static int rank_in_group(const rcoll_unique_id_t *id, int rank, int nranks, void *arg)
{
    (void)arg;
    rcoll_comm_t comm = NULL;
    rcoll_group_start();
    rcoll_status_t st = rcoll_comm_init_rank(nranks, id, rank, &comm);
    if (st == RCOLL_OK) st = rcoll_group_end();
    if (st != RCOLL_OK || !comm) {
        fprintf(stderr, "rank %d: init in a group: %s (%s)\n", rank, rcoll_status_string(st),
                rcoll_last_init_error());
        return 1;
    }
    int bad = 0;
    for (int round = 0; round < 4; round++) {
        int32_t v[64];
        for (int i = 0; i < 64; i++) v[i] = rank * 100 + i + round;
        st = rcoll_allreduce(RCOLL_IN_PLACE, v, 64, RCOLL_INT32, RCOLL_SUM, comm);
        for (int i = 0; i < 64 && st == RCOLL_OK; i++)
            bad += v[i] != 100 * nranks * (nranks - 1) / 2 + nranks * (i + round);
        if (st != RCOLL_OK) bad++;
    }
    if (bad) fprintf(stderr, "rank %d: %d wrong results after init in a group\n", rank, bad);
    rcoll_comm_destroy(comm);
    return bad != 0;
}

/* (3) A creation that fails at rcoll_group_end: the handle stays NULL, the reason is kept. */
static void failing_init_in_group(void)
{
    rcoll_unique_id_t bogus;
    memset(&bogus, 0x5a, sizeof(bogus));
    rcoll_comm_t comm = (rcoll_comm_t)&bogus;
    rcoll_group_start();
    rcoll_status_t st = rcoll_comm_init_rank(2, &bogus, 0, &comm);
    CHECK(st == RCOLL_OK && comm == NULL, "a deferred creation returns OK with a NULL handle");
    st = rcoll_group_end();
    CHECK(st != RCOLL_OK && comm == NULL && rcoll_last_init_error()[0] != '\0',
          "failed creation in a group: %s, handle %p, '%s'", rcoll_status_string(st),
          (void *)comm, rcoll_last_init_error());
    /* Bad arguments are still refused at the call. */
    rcoll_group_start();
    st = rcoll_comm_init_rank(2, &bogus, 5, &comm);
    rcoll_group_end();
    CHECK(st == RCOLL_ERR_INVALID_ARG && strstr(rcoll_last_init_error(), "rank=5"),
          "rank outside the job inside a group: %s '%s'", rcoll_status_string(st),
          rcoll_last_init_error());
}

int main(void)
{
    setenv("RCOLL_TIMEOUT", "20", 0);
    one_thread_all_ranks();
    mp_result_t res;
    int failed = mp_run_raw(3, rank_in_group, NULL, 60, &res);
    CHECK(failed == 0, "init in a per-process group then a job: %d ranks failed", failed);
    failing_init_in_group();
    return check_summary();
}
