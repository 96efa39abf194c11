/*
 * mpi_nb.c - nonblocking interposed calls (MPI_Iallreduce, MPI_Ibcast).  Each rcoll request
 * hides behind an MPI generalized request (MPI_Grequest_start); rcoll has no background
 * thread, so the MPI completion calls (MPI_Wait/Test and their all/any/some forms) are wrapped
 * to drive the rcoll requests they are given and call MPI_Grequest_complete when rcoll reports
 * one done, then hand the array to the PMPI_ function.  Progress happens only inside these
 * calls and other interposed calls on the same communicator (docs/mpi.md, limits).
 */
#include <stdlib.h>

#include "mpi/mpi_int.h"

typedef struct nb_req {
    struct nb_req *next, *prev;
    MPI_Request mreq;
    rcoll_request_t rreq;  /* NULL once rcoll reported completion */
    mpix_comm_t *e;        /* NULL once its communicator was freed (drained) */
    MPI_Comm comm;         /* whose error handler a failure is raised through */
    int err;               /* MPI error code of the completed operation */
} nb_req_t;

static nb_req_t *outstanding; /* started and not yet freed by MPI */

static void nb_unlink(nb_req_t *r)
{
    if (r->prev) r->prev->next = r->next;
    else if (outstanding == r) outstanding = r->next;
    if (r->next) r->next->prev = r->prev;
    r->next = r->prev = NULL;
}

static int query_fn(void *extra, MPI_Status *status)
{
    nb_req_t *r = extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    /* success for MPI's machinery: an rcoll failure is raised by the completion call's
     * wrapper through the request's communicator (MPI would use MPI_COMM_WORLD's handler) */
    (void)r;
    status->MPI_ERROR = MPI_SUCCESS;
    return MPI_SUCCESS;
}

static int free_fn(void *extra)
{
    nb_req_t *r = extra;
    nb_unlink(r);
    free(r);
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS; /* a collective cannot be cancelled: it just completes */
}

/* The operation is over (st: its status): record it and complete the MPI request. */
static void nb_finish(nb_req_t *r, rcoll_status_t st)
{
    r->rreq = NULL;
    r->e->outstanding--;
    r->err = st == RCOLL_OK ? MPI_SUCCESS : mpix_error_code(r->e, st);
    PMPI_Grequest_complete(r->mreq);
}

static void nb_test(nb_req_t *r)
{
    int done = 0;
    if (!r->rreq) return;
    rcoll_status_t st = rcoll_test(&r->rreq, &done);
    if (done || RCOLL_IS_ERR(st)) nb_finish(r, st);
}

static void nb_wait(nb_req_t *r)
{
    if (r->rreq) nb_finish(r, rcoll_wait(&r->rreq));
}

int mpix_nb_start(MPI_Comm comm, mpix_comm_t *e, rcoll_request_t rreq, MPI_Request *req)
{
    nb_req_t *r = calloc(1, sizeof(*r));
    int rc;
    if (!r) {
        rcoll_wait(&rreq);
        return mpix_raise(comm, e, RCOLL_ERR_NO_MEMORY);
    }
    r->rreq = rreq;
    r->e = e;
    r->comm = comm;
    rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, &r->mreq);
    if (rc != MPI_SUCCESS) {
        rcoll_wait(&r->rreq);
        free(r);
        return rc;
    }
    e->outstanding++;
    r->next = outstanding;
    if (outstanding) outstanding->prev = r;
    outstanding = r;
    *req = r->mreq;
    return MPI_SUCCESS;
}

void mpix_nb_drain(mpix_comm_t *e)
{
    for (nb_req_t *r = outstanding; r; r = r->next)
        if (r->e == e) {
            nb_wait(r);
            r->e = NULL; /* the entry goes with its communicator */
            r->comm = MPI_COMM_NULL;
        }
}

static nb_req_t *nb_find(MPI_Request req)
{
    if (req == MPI_REQUEST_NULL) return NULL;
    for (nb_req_t *r = outstanding; r; r = r->next)
        if (r->mreq == req) return r;
    return NULL;
}

/* Test (wait = 0) or wait for (wait = 1) the rcoll requests among reqs; returns how many of
 * them there were. */
static int nb_progress(int n, const MPI_Request reqs[], int wait)
{
    int found = 0;
    if (!outstanding) return 0;
    for (int i = 0; i < n; i++) {
        nb_req_t *r = nb_find(reqs[i]);
        if (!r) continue;
        found++;
        if (wait) nb_wait(r);
        else nb_test(r);
    }
    return found;
}

/* ---- failures: raised when the completion call hands the request back ---- */

/* The failed rcoll requests among reqs (completed, so the PMPI_ call below hands them back
 * and frees them): their index, code and communicator, taken before the call. */
typedef struct {
    int idx, code;
    MPI_Comm comm;
} nb_fail_t;

typedef struct {
    nb_fail_t local[8], *f;
    int n;
} nb_fails_t;

static void fails_take(nb_fails_t *fs, int n, const MPI_Request reqs[])
{
    fs->f = fs->local;
    fs->n = 0;
    if (!outstanding) return;
    int cap = 8;
    for (int i = 0; i < n; i++) {
        nb_req_t *r = nb_find(reqs[i]);
        if (!r || r->rreq || r->err == MPI_SUCCESS) continue;
        if (fs->n == cap) { /* more failures than the local slots: rare */
            nb_fail_t *g = malloc(sizeof(*g) * (size_t)n);
            if (!g) break; /* the rest complete as successes */
            for (int k = 0; k < fs->n; k++) g[k] = fs->f[k];
            fs->f = g;
            cap = n;
        }
        fs->f[fs->n++] = (nb_fail_t){i, r->err, r->comm};
    }
}

/* After the PMPI_ call: each failed request it handed back (reqs[idx] now
 * MPI_REQUEST_NULL; for the some-forms among indices) gets its code in its status; the
 * first one's code goes through its communicator's error handler and is the result
 * (MPI_ERR_IN_STATUS from the multiple-completion calls when their statuses are kept). */
static int fails_raise(nb_fails_t *fs, int rc, const MPI_Request reqs[], MPI_Status *statuses,
                       int multi, const int *indices, int outcount)
{
    int first = -1;
    MPI_Comm comm = MPI_COMM_NULL;
    for (int k = 0; k < fs->n && rc == MPI_SUCCESS; k++) {
        const nb_fail_t *f = &fs->f[k];
        if (reqs[f->idx] != MPI_REQUEST_NULL) continue; /* not handed back by this call */
        int slot = f->idx;
        if (indices) {
            slot = -1;
            for (int j = 0; j < outcount; j++)
                if (indices[j] == f->idx) slot = j;
            if (slot < 0) continue;
        }
        if (statuses != MPI_STATUS_IGNORE && statuses != MPI_STATUSES_IGNORE)
            statuses[multi ? slot : 0].MPI_ERROR = f->code;
        if (first < 0) {
            first = f->code;
            comm = f->comm;
        }
    }
    if (fs->f != fs->local) free(fs->f);
    if (first < 0) return rc;
    if (comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, first);
    return multi && statuses != MPI_STATUSES_IGNORE ? MPI_ERR_IN_STATUS : first;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    nb_fails_t fs;
    nb_progress(1, request, 1);
    fails_take(&fs, 1, request);
    return fails_raise(&fs, PMPI_Wait(request, status), request, status, 0, NULL, 0);
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    nb_fails_t fs;
    nb_progress(1, request, 0);
    fails_take(&fs, 1, request);
    return fails_raise(&fs, PMPI_Test(request, flag, status), request, status, 0, NULL, 0);
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
    nb_fails_t fs;
    nb_progress(count, array_of_requests, 1);
    fails_take(&fs, count, array_of_requests);
    return fails_raise(&fs, PMPI_Waitall(count, array_of_requests, array_of_statuses),
                       array_of_requests, array_of_statuses, 1, NULL, 0);
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[])
{
    nb_fails_t fs;
    nb_progress(count, array_of_requests, 0);
    fails_take(&fs, count, array_of_requests);
    return fails_raise(&fs, PMPI_Testall(count, array_of_requests, flag, array_of_statuses),
                       array_of_requests, array_of_statuses, 1, NULL, 0);
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                MPI_Status *status)
{
    nb_fails_t fs;
    nb_progress(count, array_of_requests, 0);
    fails_take(&fs, count, array_of_requests);
    return fails_raise(&fs, PMPI_Testany(count, array_of_requests, index, flag, status),
                       array_of_requests, status, 0, NULL, 0);
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
    nb_fails_t fs;
    nb_progress(incount, array_of_requests, 0);
    fails_take(&fs, incount, array_of_requests);
    int rc = PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices,
                           array_of_statuses);
    return fails_raise(&fs, rc, array_of_requests, array_of_statuses, 1, array_of_indices,
                       *outcount == MPI_UNDEFINED ? 0 : *outcount);
}

/* Any/some: with rcoll requests among them, poll both sides until one completes. */
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    int flag = 0, rc;
    nb_fails_t fs;
    if (!nb_progress(count, array_of_requests, 0))
        return PMPI_Waitany(count, array_of_requests, index, status);
    for (;;) {
        fails_take(&fs, count, array_of_requests);
        rc = PMPI_Testany(count, array_of_requests, index, &flag, status);
        rc = fails_raise(&fs, rc, array_of_requests, status, 0, NULL, 0);
        if (rc != MPI_SUCCESS || flag) return rc;
        nb_progress(count, array_of_requests, 0);
    }
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
    int rc;
    nb_fails_t fs;
    if (!nb_progress(incount, array_of_requests, 0))
        return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices,
                             array_of_statuses);
    for (;;) {
        fails_take(&fs, incount, array_of_requests);
        rc = PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices,
                           array_of_statuses);
        rc = fails_raise(&fs, rc, array_of_requests, array_of_statuses, 1, array_of_indices,
                         *outcount == MPI_UNDEFINED ? 0 : *outcount);
        if (rc != MPI_SUCCESS || *outcount != 0) return rc;
        nb_progress(incount, array_of_requests, 0);
    }
}
