/*
 * mpi_int.h - shared state of librcoll_mpi: the knob struct, the per-MPI_Comm entry that maps
 * an MPI communicator to its rcoll communicator, the datatype/op mapping, the per-function
 * statistics and the MPI error codes that carry rcoll's sentences.
 */
#ifndef RCOLL_MPI_INT_H
#define RCOLL_MPI_INT_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll_mpi.h"

/* Knobs (mpi_config.c: one table, module "mpi"). */
typedef struct {
    int disable;      /* RCOLL_MPI_DISABLE: 1 = every call falls through */
    size_t min_bytes; /* RCOLL_MPI_MIN_BYTES: smaller calls fall through */
    int stats;        /* RCOLL_MPI_STATS: 1 = per-rank counts at MPI_Finalize */
    char host_id[256];/* RCOLL_HOST_ID (core's knob), read only for the host cross-check */
} rcoll_mpi_config_t;

/* The knobs, parsed once per process (and the log knobs, applied). */
const rcoll_mpi_config_t *rcoll_mpi_config(void);

/* Create an rcoll communicator over an intra-communicator; status and text (kept for
 * rcoll_mpi_last_error) as rcoll_comm_init_mpi.  All ranks of mpi_comm return the same
 * success/failure (an agreement follows the creation), and a rank whose own creation fails
 * tells the others at once, so none of them waits RCOLL_TIMEOUT for it. */
rcoll_status_t rcoll_mpi_comm_create(MPI_Comm mpi_comm, rcoll_comm_t *comm_p);

/* ---- interposition ---- */

/* The interposed functions: the index of their statistics row. */
typedef enum {
    MPIX_ALLREDUCE, MPIX_REDUCE, MPIX_BCAST, MPIX_ALLGATHER, MPIX_REDUCE_SCATTER_BLOCK,
    MPIX_ALLTOALL, MPIX_BARRIER, MPIX_IALLREDUCE, MPIX_IBCAST,
    MPIX_GATHER, MPIX_SCATTER, MPIX_ALLGATHERV, MPIX_ALLTOALLV,
    MPIX_NUM_FUNCS
} mpix_func_t;

/* What the map of one MPI communicator holds (an MPI attribute, created on the first
 * interposed call on it). */
typedef struct mpix_comm {
    struct mpix_comm *next, *prev; /* every live entry, creation order (finalize) */
    MPI_Comm mpi_comm;
    rcoll_comm_t rc;               /* NULL: every call on this communicator falls through */
    int rank, size;
    int outstanding;               /* nonblocking requests in flight */
    size_t *v;                     /* 4 x size entries: the v-variants' size_t counts and
                                    * displacements (allocated with the entry, so a call
                                    * never fails locally for want of memory) */
} mpix_comm_t;

/* The entry of comm, creating it (collectively: every rank reaches the same call) on the
 * first call.  Never NULL once MPI is initialized: a failed creation gives an entry whose
 * rc is NULL. */
mpix_comm_t *mpix_comm_get(MPI_Comm comm);

/* Datatype mapping.  Returns 1 and the rcoll type and element size when dt can go to rcoll:
 * for a reduction (reduce = 1: arithmetic types only) or as bytes (reduce = 0: every
 * contiguous predefined type; *rdt is then RCOLL_UINT8 and *elem_size the type's size). */
int mpix_map_type(MPI_Datatype dt, int reduce, rcoll_datatype_t *rdt, size_t *elem_size);
/* 1 and the rcoll op for MPI_SUM/PROD/MIN/MAX (integers and floats), MPI_BAND/BOR/BXOR
 * (integers) and MPI_LAND/LOR/LXOR (C_BOOL, rdt RCOLL_BOOL); 0 for everything else. */
int mpix_map_op(MPI_Op op, rcoll_datatype_t rdt, rcoll_op_t *rop);

/* 1 when a call of `bytes` bytes (count x type size, x nranks for the block collectives) on
 * e goes to rcoll; counts every decision in the statistics.  Depends only on arguments that
 * every rank passes alike, so every rank decides the same. */
int mpix_take(mpix_func_t fn, const mpix_comm_t *e, int ok, size_t bytes);

/* An rcoll failure on e as an MPI error: a user-defined error code whose string is rcoll's
 * sentence, raised through comm's error handler (which may abort).  Returns the code. */
int mpix_raise(MPI_Comm comm, const mpix_comm_t *e, rcoll_status_t st);
/* The code only (for a request's completion). */
int mpix_error_code(const mpix_comm_t *e, rcoll_status_t st);

/* A private MPI_COMM_SELF duplicate with MPI_ERRORS_RETURN (local type conversions by
 * PMPI_Sendrecv to oneself); MPI_COMM_NULL when it cannot be made. */
MPI_Comm mpix_self_comm(void);

/* Destroy every cached rcoll communicator and the keyval (MPI_Finalize, before PMPI_). */
void mpix_comm_fini(void);

/* Nonblocking (mpi_nb.c): wrap an rcoll request into a generalized MPI request. */
int mpix_nb_start(MPI_Comm comm, mpix_comm_t *e, rcoll_request_t rreq, MPI_Request *req);
/* Complete every outstanding request of e (before its communicator is destroyed). */
void mpix_nb_drain(mpix_comm_t *e);

#endif
