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
    mpix_comm_t *e;
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
    status->MPI_ERROR = r->err;
    return r->err;
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
    for (nb_req_t *r = outstanding; r && e->outstanding > 0; r = r->next)
        if (r->e == e) nb_wait(r);
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

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    nb_progress(1, request, 1);
    return PMPI_Wait(request, status);
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    nb_progress(1, request, 0);
    return PMPI_Test(request, flag, status);
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
    nb_progress(count, array_of_requests, 1);
    return PMPI_Waitall(count, array_of_requests, array_of_statuses);
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[])
{
    nb_progress(count, array_of_requests, 0);
    return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                MPI_Status *status)
{
    nb_progress(count, array_of_requests, 0);
    return PMPI_Testany(count, array_of_requests, index, flag, status);
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
    nb_progress(incount, array_of_requests, 0);
    return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices,
                         array_of_statuses);
}

/* Any/some: with rcoll requests among them, poll both sides until one completes. */
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    int flag = 0, rc;
    if (!nb_progress(count, array_of_requests, 0))
        return PMPI_Waitany(count, array_of_requests, index, status);
    for (;;) {
        rc = PMPI_Testany(count, array_of_requests, index, &flag, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        nb_progress(count, array_of_requests, 0);
    }
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
    int rc;
    if (!nb_progress(incount, array_of_requests, 0))
        return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices,
                             array_of_statuses);
    for (;;) {
        rc = PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices,
                           array_of_statuses);
        if (rc != MPI_SUCCESS || *outcount != 0) return rc;
        nb_progress(incount, array_of_requests, 0);
    }
}
