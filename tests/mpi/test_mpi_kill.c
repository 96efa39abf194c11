/*
 * test_mpi_kill.c - the last rank SIGKILLs itself while the others are inside an interposed
 * MPI_Allreduce; with MPI_ERRORS_RETURN the survivors must get an MPI error (not a hang, not
 * an abort) whose MPI_Error_string is rcoll's sentence naming the dead rank.  Each survivor
 * prints one line and exits at once (MPI_Finalize cannot complete with a dead peer).
 * "nb": the same with MPI_Iallreduce + MPI_Wait on a dup of MPI_COMM_WORLD whose error handler
 * records what it is called with (MPI_COMM_WORLD keeps MPI_ERRORS_ARE_FATAL): the failure
 * must go through the dup's handler, with the code that MPI_Wait returns.
 */
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpi_check.h"

static int handler_code = MPI_SUCCESS, handler_calls;

static void record(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handler_code = *code;
    handler_calls++;
}

int main(int argc, char **argv)
{
    enum { CNT = 1 << 18 };
    int rank, size, nb = argc > 1 && !strcmp(argv[1], "nb");
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Errhandler eh;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (nb) {
        MPICHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
        MPICHECK(MPI_Comm_create_errhandler(record, &eh));
        MPICHECK(MPI_Comm_set_errhandler(comm, eh));
    } else {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    float *buf = calloc(CNT, sizeof(float));
    if (!buf) FAILF("no memory");
    MPICHECK(MPI_Allreduce(MPI_IN_PLACE, buf, CNT, MPI_FLOAT, MPI_SUM, comm));
    if (rank == size - 1) {
        usleep(300 * 1000); /* the others are inside the next all-reduce by now */
        raise(SIGKILL);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc;
    if (nb) {
        MPI_Request req;
        MPI_Status st;
        rc = MPI_Iallreduce(MPI_IN_PLACE, buf, CNT, MPI_FLOAT, MPI_SUM, comm, &req);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, &st);
        if (rc != MPI_SUCCESS && (handler_calls != 1 || handler_code != rc)) {
            printf("test_mpi_kill: rank %d: MPI_Wait returned %d, the handler saw %d calls, "
                   "code %d\n", rank, rc, handler_calls, handler_code);
            fflush(stdout);
            _exit(1);
        }
    } else {
        rc = MPI_Allreduce(MPI_IN_PLACE, buf, CNT, MPI_FLOAT, MPI_SUM, comm);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (rc == MPI_SUCCESS) {
        printf("test_mpi_kill: rank %d: %s succeeded with a dead peer\n", rank,
               nb ? "MPI_Iallreduce" : "MPI_Allreduce");
        fflush(stdout);
        _exit(1);
    }
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;
    MPI_Error_string(rc, text, &len);
    MPI_Error_class(rc, &cls);
    printf("test_mpi_kill: survivor got %san error after %.2f s (rank %d, class %d): %s\n",
           nb ? "through the handler " : "", s, rank, cls, text);
    fflush(stdout);
    _exit(0);
}
