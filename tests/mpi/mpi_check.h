/*
 * mpi_check.h - small helpers shared by the MPI interop tests: failure reporting with the rank
 * and the datatype table the tests walk (every predefined type the interposer maps).
 */
#ifndef RCOLL_TEST_MPI_CHECK_H
#define RCOLL_TEST_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MPICHECK(call)                                                                     \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != MPI_SUCCESS) {                                                          \
            char s_[MPI_MAX_ERROR_STRING];                                                 \
            int l_ = 0;                                                                    \
            MPI_Error_string(rc_, s_, &l_);                                                \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, s_);      \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

#define FAILF(...)                                                                         \
    do {                                                                                   \
        int r_ = -1;                                                                       \
        MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                                \
        fprintf(stderr, "rank %d: %s:%d: ", r_, __FILE__, __LINE__);                       \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                             \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
    } while (0)

#endif
