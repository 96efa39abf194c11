/*
 * mpi_init.c - rcoll communicators from MPI communicators (rcoll_comm_init_mpi) and the knobs
 * of librcoll_mpi.  Uses rcoll's public API and PMPI_ calls only (so it also serves the
 * interposer); it knows nothing of the interposed functions.
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpi/mpi_int.h"
#include "util/config.h"
#include "util/log.h"
#include "util/status.h"

static const rcoll_knob_t mpi_knobs[] = {
    RCOLL_KNOB_NUM(rcoll_mpi_config_t, "RCOLL_MPI_DISABLE", "0", INT, disable, 0, 1,
                   "1: the MPI interposer (librcoll_mpi) passes every call to MPI"),
    RCOLL_KNOB_NUM(rcoll_mpi_config_t, "RCOLL_MPI_MIN_BYTES", "0", SIZE, min_bytes, 0,
                   LLONG_MAX,
                   "interposed MPI collectives smaller than this many bytes go to MPI"),
    RCOLL_KNOB_NUM(rcoll_mpi_config_t, "RCOLL_MPI_STATS", "0", INT, stats, 0, 1,
                   "1: each rank prints at MPI_Finalize how many calls and bytes went to "
                   "rcoll and how many fell through, per MPI function"),
    RCOLL_KNOB_STR(rcoll_mpi_config_t, "RCOLL_HOST_ID", "", host_id,
                   "(core's knob) read here only to compare MPI's hosts with rcoll's"),
};
static const rcoll_config_table_t mpi_config_table =
    RCOLL_CONFIG_TABLE("mpi", mpi_knobs, rcoll_mpi_config_t);

static rcoll_mpi_config_t mpi_cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void cfg_load(void)
{
    rcoll_log_config_t log;
    if (rcoll_config_parse(&rcoll_log_config_table, &log) == RCOLL_OK)
        rcoll_log_configure(&log);
    if (rcoll_config_parse(&mpi_config_table, &mpi_cfg) != RCOLL_OK) {
        /* a bad value disables the interposer (all ranks see the same environment) */
        RCOLL_WARN(INIT, "librcoll_mpi: %s; every MPI call goes to MPI", rcoll_err_get());
        memset(&mpi_cfg, 0, sizeof(mpi_cfg));
        mpi_cfg.disable = 1;
    }
}

static int cfg_ready; /* set (release) once cfg_load has run: every later call is one load */

const rcoll_mpi_config_t *rcoll_mpi_config(void)
{
    if (!__atomic_load_n(&cfg_ready, __ATOMIC_ACQUIRE)) {
        pthread_once(&cfg_once, cfg_load);
        __atomic_store_n(&cfg_ready, 1, __ATOMIC_RELEASE);
    }
    return &mpi_cfg;
}

static _Thread_local char last_error[RCOLL_ERR_TEXT_MAX];

const char *rcoll_mpi_last_error(void)
{
    return last_error;
}

static rcoll_status_t fail(rcoll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static rcoll_status_t fail(rcoll_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return st;
}

/* FNV-1a of this rank's host identity as rcoll forms it, as far as the public API shows:
 * RCOLL_HOST_ID when set, else the host name. */
/* Compare MPI's node grouping (MPI_COMM_TYPE_SHARED) with rcoll's hosts (rcoll_comm_host:
 * host name, boot id and network namespace, or RCOLL_HOST_ID): two ranks are on one node for
 * MPI exactly when rcoll puts them on one host, else warn (rank 0, once per communicator).
 * Collective over comm, after the rcoll communicator exists; a failing MPI call skips it. */
static void host_check(MPI_Comm comm, rcoll_comm_t rc, int rank, int size)
{
    MPI_Comm node;
    int leader = rank;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return;
    PMPI_Bcast(&leader, 1, MPI_INT, 0, node); /* the node's lowest rank names it */
    PMPI_Comm_free(&node);
    int *all = malloc(sizeof(int) * (size_t)size);
    int ok = all != NULL, all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) goto out;
    PMPI_Allgather(&leader, 1, MPI_INT, all, 1, MPI_INT, comm);
    if (rank != 0) goto out;
    for (int a = 0; a < size; a++)
        for (int b = a + 1; b < size; b++) {
            int ha = -1, hb = -1;
            if (rcoll_comm_host(rc, a, &ha, NULL) != RCOLL_OK ||
                rcoll_comm_host(rc, b, &hb, NULL) != RCOLL_OK)
                goto out;
            int same_host = ha == hb, same_node = all[a] == all[b];
            if (same_host == same_node) continue;
            RCOLL_WARN(INIT,
                       "rcoll_comm_init_mpi: MPI puts ranks %d and %d on %s node but rcoll on "
                       "%s%s; rcoll groups ranks by host name, boot id and network "
                       "namespace (RCOLL_HOST_ID overrides), so shared memory and the ring "
                       "order follow rcoll's view, not MPI's",
                       a, b, same_node ? "the same" : "different",
                       same_host ? "one host" : "different hosts",
                       rcoll_mpi_config()->host_id[0] ? " (RCOLL_HOST_ID)" : "");
            goto out;
        }
out:
    free(all);
}

/* What rank 0 broadcasts: the id, or why there is none. */
typedef struct {
    int32_t status;
    char text[RCOLL_ERR_TEXT_MAX];
    rcoll_unique_id_t id;
} init_msg_t;

/* ---- the join, agreed over MPI ----
 * rcoll_comm_init_rank blocks until every rank has joined, so a rank that fails before it
 * joins (a bad knob on that rank alone, no listening socket) would keep the others waiting
 * RCOLL_TIMEOUT.  So each rank joins in a helper thread while its own thread watches a private
 * MPI communicator: a rank whose join fails sends its sentence to every other rank, and a rank
 * that receives one stops waiting (its abandoned thread fails later, by itself, and frees what
 * it holds).  Then every rank agrees, in one PMPI_Allreduce, whether all of them succeeded;
 * notices still in flight are received by count, so the private communicator is freed clean. */
#define JOIN_TAG 0x7263

typedef struct {
    int nranks, rank;
    rcoll_unique_id_t id;
    rcoll_comm_t comm;
    rcoll_status_t st;
    char text[RCOLL_ERR_TEXT_MAX];
    int state; /* JOIN_RUNNING, then JOIN_DONE (thread) or JOIN_ABANDONED (caller) */
} join_t;
enum { JOIN_RUNNING, JOIN_DONE, JOIN_ABANDONED };

static void join_now(join_t *j)
{
    j->st = rcoll_comm_init_rank(j->nranks, &j->id, j->rank, &j->comm);
    if (j->st != RCOLL_OK) {
        j->comm = NULL;
        snprintf(j->text, sizeof(j->text), "%s", rcoll_last_init_error());
    }
}

static void *join_thread(void *arg)
{
    join_t *j = arg;
    join_now(j);
    if (__atomic_exchange_n(&j->state, JOIN_DONE, __ATOMIC_ACQ_REL) == JOIN_ABANDONED) {
        rcoll_comm_abort(j->comm); /* the caller went on without it (NULL: a no-op) */
        free(j);
    }
    return NULL;
}

rcoll_status_t rcoll_mpi_comm_create(MPI_Comm mpi_comm, rcoll_comm_t *comm_p)
{
    int inited = 0, finalized = 0, inter = 0, rank, size;
    init_msg_t msg;
    rcoll_status_t st;

    last_error[0] = '\0';
    if (!comm_p)
        return fail(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_mpi: comm is NULL");
    PMPI_Finalized(&finalized);
    if (finalized)
        return fail(RCOLL_ERR_INVALID_USAGE,
                    "rcoll_comm_init_mpi: MPI is already finalized (MPI_Finalize was called)");
    PMPI_Initialized(&inited);
    if (!inited)
        return fail(RCOLL_ERR_INVALID_USAGE,
                    "rcoll_comm_init_mpi: MPI is not initialized (call MPI_Init first)");
    if (mpi_comm == MPI_COMM_NULL)
        return fail(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_mpi: the communicator is "
                                           "MPI_COMM_NULL");
    if (PMPI_Comm_test_inter(mpi_comm, &inter) != MPI_SUCCESS)
        return fail(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_mpi: not a valid MPI communicator");
    if (inter)
        return fail(RCOLL_ERR_INVALID_ARG,
                    "rcoll_comm_init_mpi: an inter-communicator has two groups; rcoll "
                    "communicators are intra-communicators (use MPI_Intercomm_merge first)");
    PMPI_Comm_rank(mpi_comm, &rank);
    PMPI_Comm_size(mpi_comm, &size);
    rcoll_mpi_config(); /* log knobs applied before anything logs */

    memset(&msg, 0, sizeof(msg));
    if (rank == 0) {
        msg.status = rcoll_get_unique_id(&msg.id);
        if (msg.status != RCOLL_OK)
            snprintf(msg.text, sizeof(msg.text), "rcoll_comm_init_mpi: rank 0 could not make "
                     "the unique id: %s: %s", rcoll_status_string(msg.status),
                     rcoll_last_init_error());
    }
    if (PMPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, mpi_comm) != MPI_SUCCESS)
        return fail(RCOLL_ERR_SYSTEM, "rcoll_comm_init_mpi: MPI_Bcast of the unique id failed");
    if (msg.status != RCOLL_OK)
        return fail((rcoll_status_t)msg.status, "%s", msg.text);


    /* a private communicator for the notices (a split: no attributes are copied) */
    MPI_Comm priv;
    if (PMPI_Comm_split(mpi_comm, 0, rank, &priv) != MPI_SUCCESS)
        return fail(RCOLL_ERR_SYSTEM, "rcoll_comm_init_mpi: MPI_Comm_split failed");
    PMPI_Comm_set_errhandler(priv, MPI_ERRORS_RETURN);

    join_t local, *j = size > 1 ? calloc(1, sizeof(*j)) : NULL;
    pthread_t tid;
    pthread_attr_t attr;
    int threaded = 0;
    if (!j) {
        j = &local;
        memset(j, 0, sizeof(*j));
    }
    j->nranks = size;
    j->rank = rank;
    j->id = msg.id;
    if (j != &local && pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        threaded = pthread_create(&tid, &attr, join_thread, j) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!threaded) join_now(j); /* one rank, or no thread: wait here (as before) */

    char cause[RCOLL_ERR_TEXT_MAX] = "", scratch[RCOLL_ERR_TEXT_MAX], sink[RCOLL_ERR_TEXT_MAX];
    int got = 0, abandoned = 0;
    while (threaded && __atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == JOIN_RUNNING) {
        int flag = 0;
        MPI_Status ms;
        if (PMPI_Iprobe(MPI_ANY_SOURCE, JOIN_TAG, priv, &flag, &ms) == MPI_SUCCESS && flag) {
            PMPI_Recv(cause, sizeof(cause), MPI_CHAR, ms.MPI_SOURCE, JOIN_TAG, priv,
                      MPI_STATUS_IGNORE);
            cause[sizeof(cause) - 1] = '\0';
            got = 1;
            /* stop waiting; if the thread finished meanwhile, its result is ours again */
            abandoned = __atomic_exchange_n(&j->state, JOIN_ABANDONED, __ATOMIC_ACQ_REL) ==
                        JOIN_RUNNING;
            break;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    rcoll_comm_t comm = abandoned ? NULL : j->comm;
    st = abandoned ? RCOLL_ERR_REMOTE : j->st;
    int sent = !abandoned && st != RCOLL_OK;
    MPI_Request *reqs = NULL;
    if (sent) { /* tell every other rank, so that none of them waits for this one */
        fail(st, "rcoll_comm_init_mpi: rank %d of %d: %s", rank, size, j->text);
        snprintf(scratch, sizeof(scratch), "rank %d of %d could not create its rcoll "
                 "communicator: %.400s", rank, size, j->text);
        reqs = malloc(sizeof(*reqs) * (size_t)size);
        for (int r = 0; reqs && r < size; r++) {
            reqs[r] = MPI_REQUEST_NULL;
            if (r != rank)
                PMPI_Isend(scratch, (int)strlen(scratch) + 1, MPI_CHAR, r, JOIN_TAG, priv,
                           &reqs[r]);
        }
    }
    /* agree: how many ranks have a communicator, how many sent notices */
    int in[2] = {comm != NULL, sent && reqs}, out[2] = {0, 0};
    if (PMPI_Allreduce(in, out, 2, MPI_INT, MPI_SUM, priv) != MPI_SUCCESS) out[0] = 0;
    for (int k = out[1] - in[1] - got; k > 0; k--) /* the notices still on their way here */
        PMPI_Recv(cause[0] ? sink : cause, sizeof(cause), MPI_CHAR, MPI_ANY_SOURCE,
                  JOIN_TAG, priv, MPI_STATUS_IGNORE);
    cause[sizeof(cause) - 1] = '\0';
    if (reqs) PMPI_Waitall(size, reqs, MPI_STATUSES_IGNORE);
    free(reqs);
    PMPI_Comm_free(&priv);
    if (j != &local && !abandoned) free(j); /* an abandoned one is its thread's to free */

    if (out[0] == size) {
        host_check(mpi_comm, comm, rank, size);
        *comm_p = comm;
        return RCOLL_OK;
    }
    rcoll_comm_abort(comm); /* NULL: a no-op */
    if (sent) return st;    /* this rank's own sentence, set above */
    if (cause[0]) return fail(RCOLL_ERR_REMOTE, "rcoll_comm_init_mpi: %s", cause);
    return fail(RCOLL_ERR_REMOTE, "rcoll_comm_init_mpi: another rank of the %d failed to "
                "create its rcoll communicator", size);
}

rcoll_status_t rcoll_comm_init_mpi(MPI_Comm mpi_comm, rcoll_comm_t *comm)
{
    return rcoll_mpi_comm_create(mpi_comm, comm);
}
