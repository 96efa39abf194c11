/*
 * mp.h - multi-process test harness: forks real rank processes that build a communicator
 * from one unique id (made in the parent, whose bootstrap root thread serves them), runs a
 * function in each, and collects exit codes within a deadline (a hung rank fails the test
 * instead of hanging it).
 */
#ifndef RCOLL_TEST_MP_H
#define RCOLL_TEST_MP_H

#include "check.h"
#include "rcoll.h"

/* Runs in each child after rcoll_comm_init_rank; return 0 for success. */
typedef int (*mp_rank_fn_t)(rcoll_comm_t comm, int rank, int nranks, void *arg);
/* Runs in each child instead of init: does everything itself. */
typedef int (*mp_raw_fn_t)(const rcoll_unique_id_t *id, int rank, int nranks, void *arg);

#define MP_TIMEOUT_EXIT 124

typedef struct {
    int nranks;
    int codes[64];   /* exit code per rank (128+sig if killed, MP_TIMEOUT_EXIT if hung) */
    double seconds;  /* wall time of the whole run */
} mp_result_t;

/* Fork nranks ranks running fn (after init; comm destroyed after fn).  Returns the number of
 * ranks that did not exit 0.  timeout_s bounds the whole run. */
int mp_run(int nranks, mp_rank_fn_t fn, void *arg, double timeout_s, mp_result_t *res);
int mp_run_raw(int nranks, mp_raw_fn_t fn, void *arg, double timeout_s, mp_result_t *res);

/* For a rank of an environment launch (rcoll_comm_init_env): RCOLL_RANK, RCOLL_NRANKS,
 * RCOLL_ROOT (host:port) and RCOLL_SECRET in this process's environment. */
void mp_set_env_rank(int rank, int nranks, const char *root, const char *secret);

/* Checks and the summary line: tests/common/check.h. */

#endif
