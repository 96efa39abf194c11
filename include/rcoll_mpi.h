/*
 * rcoll_mpi.h - rcoll communicators from MPI communicators (librcoll_mpi, built when MPI is
 * found at configure time).  Include after <mpi.h>; link -lrcoll_mpi -lrcoll and MPI.
 *
 * librcoll_mpi.so is also a PMPI interposition library: preloaded (LD_PRELOAD) or linked
 * ahead of libmpi, it runs MPI_Allreduce, MPI_Reduce, MPI_Bcast, MPI_Allgather,
 * MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Barrier, MPI_Iallreduce and MPI_Ibcast on rcoll
 * where it can and passes every other call to the MPI library (docs/mpi.md).
 *
 * The core library (librcoll) never links MPI; only this one does.
 */
#ifndef RCOLL_MPI_H
#define RCOLL_MPI_H

#include <mpi.h>

#include "rcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create an rcoll communicator with the ranks of mpi_comm, in the same order (rcoll rank r is
 * rank r of mpi_comm).  Collective over mpi_comm: every rank must call it.  Rank 0 makes the
 * unique id (rcoll_get_unique_id) and broadcasts it with PMPI_Bcast, so the call works inside
 * an MPI interposition layer too; every rank then calls rcoll_comm_init_rank.  The hosts MPI
 * sees (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) are compared with the hosts rcoll will see
 * (hostname, or RCOLL_HOST_ID when set); a difference is logged at WARN, once.
 *   mpi_comm (in): an intra-communicator (MPI_COMM_WORLD or one from MPI_Comm_split/dup/...).
 *   comm (out): the new communicator; free it with rcoll_comm_destroy() before MPI_Finalize.
 * Errors: RCOLL_ERR_INVALID_ARG (comm NULL, mpi_comm is MPI_COMM_NULL or an
 * inter-communicator), RCOLL_ERR_INVALID_USAGE (MPI not initialized, or already finalized),
 * RCOLL_ERR_SYSTEM (an MPI call failed), or those of rcoll_get_unique_id and
 * rcoll_comm_init_rank.  A failure on rank 0 before the broadcast (no unique id) fails every
 * rank with the same status.  The sentence naming the cause is returned by
 * rcoll_mpi_last_error() (and, for rcoll_comm_init_rank's own failures, also by
 * rcoll_last_init_error()). */
rcoll_status_t rcoll_comm_init_mpi(MPI_Comm mpi_comm, rcoll_comm_t *comm);

/* Text of the last failure of rcoll_comm_init_mpi in this thread ("" if none). */
const char *rcoll_mpi_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* RCOLL_MPI_H */
