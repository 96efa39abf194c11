/*
 * vcoll_bench.c - the uneven and rooted collectives against their even counterparts, on one
 * communicator, alternately (so both see the same machine state): all-gather vs all-gather-v
 * with equal counts, all-to-all vs all-to-all-v, reduce-scatter vs reduce-scatter-v, and
 * gather / scatter vs all-gather.  Rank 0 prints microseconds per call (the median of -n runs
 * of -i calls).  Public API only.  Usage (under rcoll-run):  vcoll_bench [-b bytes] [-i iters]
 * [-n runs]; bytes is each rank's block in the all-gather (default 256 KiB: 1 MiB at 4 ranks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_time.h"
#include "rcoll.h"

enum { AG, AGV, A2A, A2AV, RS, RSV, GA, SC, NKINDS };
static const char *const names[] = {"allgather", "allgatherv (equal counts)", "alltoall",
                                    "alltoallv (equal counts)", "reduce_scatter",
                                    "reduce_scatterv (equal counts)", "gather (root 0)",
                                    "scatter (root 0)"};

int main(int argc, char **argv)
{
    size_t bytes = 256 * 1024;
    int iters = 20, runs = 5, opt;
    while ((opt = getopt(argc, argv, "b:i:n:")) != -1) {
        if (opt == 'b') bytes = strtoull(optarg, NULL, 0);
        else if (opt == 'i') iters = atoi(optarg);
        else if (opt == 'n') runs = atoi(optarg);
        else return 6;
    }
    if (runs > 64) runs = 64;
    rcoll_comm_t comm;
    if (rcoll_comm_init_env(&comm) != RCOLL_OK) {
        fprintf(stderr, "init: %s\n", rcoll_last_init_error());
        return 3;
    }
    int rank, n;
    rcoll_comm_rank(comm, &rank);
    rcoll_comm_size(comm, &n);
    size_t c = bytes / 4, *cnt = malloc(n * sizeof(size_t)), *dsp = malloc(n * sizeof(size_t));
    for (int i = 0; i < n; i++) cnt[i] = c, dsp[i] = (size_t)i * c;
    float *s = calloc((size_t)n * c, 4), *r = calloc((size_t)n * c, 4);
    double t[NKINDS][64];
    for (int run = -1; run < runs; run++) /* run -1 warms up */
        for (int k = 0; k < NKINDS; k++) {
            rcoll_status_t st = rcoll_barrier(comm);
            double t0 = bench_now_us();
            for (int i = 0; i < iters && st == RCOLL_OK; i++) {
                switch (k) {
                case AG: st = rcoll_allgather(s, r, c, RCOLL_FLOAT32, comm); break;
                case AGV: st = rcoll_allgatherv(s, c, r, cnt, dsp, RCOLL_FLOAT32, comm); break;
                case A2A: st = rcoll_alltoall(s, r, c, RCOLL_FLOAT32, comm); break;
                case A2AV:
                    st = rcoll_alltoallv(s, cnt, dsp, r, cnt, dsp, RCOLL_FLOAT32, comm);
                    break;
                case RS: st = rcoll_reduce_scatter(s, r, c, RCOLL_FLOAT32, RCOLL_SUM, comm); break;
                case RSV:
                    st = rcoll_reduce_scatterv(s, r, cnt, RCOLL_FLOAT32, RCOLL_SUM, comm);
                    break;
                case GA: st = rcoll_gather(s, r, c, RCOLL_FLOAT32, 0, comm); break;
                case SC: st = rcoll_scatter(s, r, c, RCOLL_FLOAT32, 0, comm); break;
                }
            }
            if (st != RCOLL_OK) {
                fprintf(stderr, "%s: %s: %s\n", names[k], rcoll_status_string(st),
                        rcoll_comm_last_error(comm));
                return 3;
            }
            if (run >= 0) t[k][run] = (bench_now_us() - t0) / iters;
        }
    if (rank == 0) {
        printf("# %d ranks, %zu bytes per rank's block (%zu bytes gathered), median of %d x %d "
               "calls\n", n, c * 4, c * 4 * (size_t)n, runs, iters);
        for (int k = 0; k < NKINDS; k++) {
            qsort(t[k], (size_t)runs, sizeof(double), bench_cmp_double);
            printf("%-32s %10.1f us\n", names[k], t[k][runs / 2]);
        }
    }
    free(s);
    free(r);
    free(cnt);
    free(dsp);
    return rcoll_comm_destroy(comm) == RCOLL_OK ? 0 : 3;
}
