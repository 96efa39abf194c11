/*
 * mpi_interpose.c - a plain MPI program (links libmpi only, knows nothing of rcoll) that times
 * MPI_Allreduce (float32 sum) from -b to -e bytes and checks every result.  bench/
 * mpi_interpose.sh runs it with and without LD_PRELOAD=librcoll_mpi.so and prints the ratio.
 *
 *   mpirun -np 2 ./mpi_interpose [-b 8] [-e 64M] [-f 2] [-t 0.2]
 *
 * Per size: warm-up, then as many iterations as fit in about -t seconds (at least 5, the
 * count agreed by rank 0 so that every rank runs the same calls); prints the slowest rank's
 * microseconds per call.  Exit 7 on a wrong result.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10;
    else if (*end == 'M' || *end == 'm') v <<= 20;
    else if (*end == 'G' || *end == 'g') v <<= 30;
    return v;
}

int main(int argc, char **argv)
{
    size_t minb = 8, maxb = 64u << 20;
    double target = 0.2;
    int factor = 2, rank, size, c;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((c = getopt(argc, argv, "b:e:f:t:")) != -1) {
        switch (c) {
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': factor = atoi(optarg); break;
        case 't': target = atof(optarg); break;
        default:
            if (rank == 0) fprintf(stderr, "usage: mpi_interpose [-b B] [-e B] [-f F] [-t S]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (minb < 4 || factor < 2) MPI_Abort(MPI_COMM_WORLD, 2);
    size_t maxn = maxb / sizeof(float);
    float *in = malloc(maxn * sizeof(float)), *out = malloc(maxn * sizeof(float));
    if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < maxn; i++) in[i] = (float)((i + (size_t)rank) % 7);
    if (rank == 0) printf("# %d ranks, MPI_Allreduce float32 sum; bytes us_per_call\n", size);
    for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
        int n = (int)(bytes / sizeof(float));
        for (int w = 0; w < 3; w++)
            MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        /* calibrate: time a few calls, let rank 0 fix the count */
        double t0 = MPI_Wtime();
        for (int w = 0; w < 3; w++)
            MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double per = (MPI_Wtime() - t0) / 3;
        int iters = per > 0 ? (int)(target / per) : 1000;
        if (iters < 5) iters = 5;
        if (iters > 20000) iters = 20000;
        MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int it = 0; it < iters; it++)
            MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters, tmax = 0;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < size; r++) want += (float)(((size_t)i + (size_t)r) % 7);
            if (out[i] != want) {
                fprintf(stderr, "mpi_interpose: rank %d: %zu bytes: element %d is %g, not %g\n",
                        rank, bytes, i, out[i], want);
                MPI_Abort(MPI_COMM_WORLD, 7);
            }
        }
        if (rank == 0) printf("%zu %.3f\n", bytes, tmax * 1e6);
        fflush(stdout);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
