/*
 * test_mpi_init.c - rcoll_comm_init_mpi: the rcoll communicator has MPI's ranks in MPI's
 * order (on MPI_COMM_WORLD and on a split with reversed keys) and computes the same results
 * as PMPI_ calls; it is refused, with a sentence, before MPI_Init, after MPI_Finalize, for
 * MPI_COMM_NULL, a NULL output and an inter-communicator.  "fail": one rank's creation fails
 * locally; all return an error at once.
 */
#include <string.h>

#include "mpi_check.h"
#include "rcoll_mpi.h"

static void expect_err(rcoll_status_t got, rcoll_status_t want, const char *words,
                       const char *what)
{
    if (got != want)
        FAILF("%s: status %d (%s), want %d (%s)", what, got, rcoll_status_string(got), want,
              rcoll_status_string(want));
    if (!strstr(rcoll_mpi_last_error(), words))
        FAILF("%s: error text \"%s\" lacks \"%s\"", what, rcoll_mpi_last_error(), words);
}

static void check_comm(MPI_Comm mc, const char *what)
{
    rcoll_comm_t rc = NULL;
    int mr, ms, rr, rs, wrank;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    rcoll_status_t st = rcoll_comm_init_mpi(mc, &rc);
    if (st != RCOLL_OK) FAILF("%s: rcoll_comm_init_mpi: %s", what, rcoll_mpi_last_error());
    MPI_Comm_rank(mc, &mr);
    MPI_Comm_size(mc, &ms);
    rcoll_comm_rank(rc, &rr);
    rcoll_comm_size(rc, &rs);
    if (rr != mr || rs != ms) FAILF("%s: rcoll rank %d/%d, MPI %d/%d", what, rr, rs, mr, ms);
    int *got = malloc(sizeof(int) * (size_t)ms), *ref = malloc(sizeof(int) * (size_t)ms);
    if (rcoll_allgather(&wrank, got, 1, RCOLL_INT32, rc) != RCOLL_OK)
        FAILF("%s: rcoll_allgather: %s", what, rcoll_comm_last_error(rc));
    MPICHECK(PMPI_Allgather(&wrank, 1, MPI_INT, ref, 1, MPI_INT, mc));
    if (memcmp(got, ref, sizeof(int) * (size_t)ms)) FAILF("%s: rank order differs", what);
    long long x = wrank + 1, sum = 0, ref_sum = 0;
    if (rcoll_allreduce(&x, &sum, 1, RCOLL_INT64, RCOLL_SUM, rc) != RCOLL_OK)
        FAILF("%s: rcoll_allreduce: %s", what, rcoll_comm_last_error(rc));
    MPICHECK(PMPI_Allreduce(&x, &ref_sum, 1, MPI_LONG_LONG, MPI_SUM, mc));
    if (sum != ref_sum) FAILF("%s: sum %lld, MPI says %lld", what, sum, ref_sum);
    free(got);
    free(ref);
    if (rcoll_comm_destroy(rc) != RCOLL_OK) FAILF("%s: destroy", what);
}

/* "fail": rank 1's own creation fails before it joins (run_mpi.sh gives it a bad knob):
 * every rank must fail, rank 1 with its own sentence, the others with RCOLL_ERR_REMOTE naming
 * rank 1, each at once rather than after RCOLL_TIMEOUT. */
static int fail_case(void)
{
    rcoll_comm_t rc = NULL;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double t0 = MPI_Wtime();
    rcoll_status_t st = rcoll_comm_init_mpi(MPI_COMM_WORLD, &rc);
    double took = MPI_Wtime() - t0, most = 0;
    if (st == RCOLL_OK) FAILF("fail: rcoll_comm_init_mpi succeeded");
    if (rank != 1 && st != RCOLL_ERR_REMOTE) FAILF("fail: status %d, want REMOTE", st);
    if (!strstr(rcoll_mpi_last_error(), rank == 1 ? "rank 1 of" : "rank 1 of") ||
        (rank != 1 && !strstr(rcoll_mpi_last_error(), "could not create its rcoll communicator")))
        FAILF("fail: error text \"%s\" does not name rank 1", rcoll_mpi_last_error());
    MPICHECK(MPI_Allreduce(&took, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    if (rank == 0)
        printf("test_mpi_init fail: %d ranks OK, slowest %.2f s: %s\n", size, most,
               rcoll_mpi_last_error());
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    rcoll_comm_t rc = NULL;
    int rank, size;
    if (argc > 1 && !strcmp(argv[1], "fail")) {
        MPI_Init(&argc, &argv);
        return fail_case();
    }
    expect_err(rcoll_comm_init_mpi(MPI_COMM_WORLD, &rc), RCOLL_ERR_INVALID_USAGE,
               "not initialized", "before MPI_Init");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    expect_err(rcoll_comm_init_mpi(MPI_COMM_NULL, &rc), RCOLL_ERR_INVALID_ARG,
               "MPI_COMM_NULL", "MPI_COMM_NULL");
    expect_err(rcoll_comm_init_mpi(MPI_COMM_WORLD, NULL), RCOLL_ERR_INVALID_ARG, "NULL",
               "NULL output");
    if (rc != NULL) FAILF("a failed call wrote its output");

    check_comm(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    MPI_Comm split, dup;
    MPICHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &split));
    check_comm(split, "split");
    MPICHECK(MPI_Comm_dup(split, &dup));
    check_comm(dup, "dup of a split");
    MPICHECK(MPI_Comm_free(&dup));

    if (size >= 2) {
        MPI_Comm inter, half; /* leaders: world ranks 0 (evens) and 1 (odds) */
        MPICHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
        MPICHECK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 99, &inter));
        MPICHECK(MPI_Comm_free(&half));
        expect_err(rcoll_comm_init_mpi(inter, &rc), RCOLL_ERR_INVALID_ARG,
                   "inter-communicator", "inter-communicator");
        MPICHECK(MPI_Comm_free(&inter));
    }
    MPICHECK(MPI_Comm_free(&split));
    if (rank == 0) printf("test_mpi_init: %d ranks OK\n", size);
    fflush(stdout);
    MPI_Finalize();
    expect_err(rcoll_comm_init_mpi(MPI_COMM_WORLD, &rc), RCOLL_ERR_INVALID_USAGE, "finalized",
               "after MPI_Finalize");
    return 0;
}
