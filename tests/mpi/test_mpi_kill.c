/*
 * test_mpi_kill.c - the last rank SIGKILLs itself while the others are inside an interposed
 * MPI_Allreduce; with MPI_ERRORS_RETURN the survivors must get an MPI error (not a hang, not
 * an abort) whose MPI_Error_string is rcoll's sentence naming the dead rank.  Each survivor
 * prints one line and exits at once (MPI_Finalize cannot complete with a dead peer).
 */
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "mpi_check.h"

int main(int argc, char **argv)
{
    enum { CNT = 1 << 18 };
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    float *buf = calloc(CNT, sizeof(float));
    if (!buf) FAILF("no memory");
    MPICHECK(MPI_Allreduce(MPI_IN_PLACE, buf, CNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    if (rank == size - 1) {
        usleep(300 * 1000); /* the others are inside the next all-reduce by now */
        raise(SIGKILL);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, CNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (rc == MPI_SUCCESS) {
        printf("test_mpi_kill: rank %d: MPI_Allreduce succeeded with a dead peer\n", rank);
        fflush(stdout);
        _exit(1);
    }
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;
    MPI_Error_string(rc, text, &len);
    MPI_Error_class(rc, &cls);
    printf("test_mpi_kill: survivor got an error after %.2f s (rank %d, class %d): %s\n", s,
           rank, cls, text);
    fflush(stdout);
    _exit(0);
}
