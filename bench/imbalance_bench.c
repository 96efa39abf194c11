/*
 * imbalance_bench.c - what a late rank pays: before each all-reduce the last rank sleeps a
 * given time (a data loader, a slower GPU), and the table shows how long its own all-reduce
 * then takes, against the same call with no sleep.  The early ranks wait meanwhile; how fast
 * they notice the late one decides the result (RCOLL_SPIN, RCOLL_POLL_US).
 * Launch with rcoll-run (or any launcher rcoll_comm_init_env understands).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rcoll.h>

#include "bench_time.h"


static void usage(FILE *f)
{
    fprintf(f, "usage: imbalance_bench [-b BYTES[,BYTES...]] [-s SLEEP_US[,SLEEP_US...]] [-n ITERS]\n"
               "  the last rank sleeps SLEEP_US before each float32 sum all-reduce of BYTES;\n"
               "  prints the median time of its all-reduce per (BYTES, SLEEP_US)\n"
               "  defaults: -b 4096,65536,1048576 -s 0,1000,5000,50000 -n 200\n");
}

/* Parse a comma list of non-negative integers; the count, or -1 when malformed. */
static int parse_list(const char *s, long *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || (*end && *end != ',')) return -1;
        out[n++] = v;
        s = *end ? end + 1 : end;
    }
    return *s ? -1 : n;
}

int main(int argc, char **argv)
{
    long sizes[16] = {4096, 65536, 1048576}, sleeps[16] = {0, 1000, 5000, 50000};
    int nsizes = 3, nsleeps = 4, iters = 200, opt;
    while ((opt = getopt(argc, argv, "b:s:n:h")) != -1) {
        switch (opt) {
        case 'b': nsizes = parse_list(optarg, sizes, 16); break;
        case 's': nsleeps = parse_list(optarg, sleeps, 16); break;
        case 'n': iters = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 6;
        }
        if (nsizes <= 0 || nsleeps <= 0 || iters < 1 || iters > 1000000) {
            fprintf(stderr, "imbalance_bench: bad -%c %s\n", opt, optarg);
            usage(stderr);
            return 6;
        }
    }
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_env(&comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "imbalance_bench: init failed: %s: %s\n", rcoll_status_string(st),
                rcoll_last_init_error());
        return 3;
    }
    int rank, n;
    rcoll_comm_rank(comm, &rank);
    rcoll_comm_size(comm, &n);
    int late = n - 1;
    size_t maxb = 0;
    for (int i = 0; i < nsizes; i++)
        if ((size_t)sizes[i] > maxb) maxb = (size_t)sizes[i];
    float *buf = calloc(maxb / sizeof(float) + 1, sizeof(float));
    double *t = calloc((size_t)iters, sizeof(double));
    if (!buf || !t) return 1;
    if (rank == 0)
        printf("# imbalance_bench: %d ranks, rank %d sleeps before each all-reduce (float32 sum)"
               "; time = median of %d of the late rank's all-reduce\n"
               "#      bytes   sleep_us   late_rank_us\n", n, late, iters);
    for (int si = 0; si < nsizes; si++)
        for (int li = 0; li < nsleeps; li++) {
            size_t count = (size_t)sizes[si] / sizeof(float);
            for (int i = 0; i < iters + 3; i++) { /* 3 untimed */
                if (rank == late && sleeps[li]) usleep((useconds_t)sleeps[li]);
                double t0 = bench_now_us();
                st = rcoll_allreduce(RCOLL_IN_PLACE, buf, count, RCOLL_FLOAT32, RCOLL_SUM, comm);
                if (st != RCOLL_OK) {
                    fprintf(stderr, "imbalance_bench: rank %d: all-reduce failed: %s: %s\n",
                            rank, rcoll_status_string(st), rcoll_comm_last_error(comm));
                    rcoll_comm_abort(comm);
                    return 3;
                }
                if (i >= 3) t[i - 3] = bench_now_us() - t0;
            }
            /* The late rank's median goes to rank 0 for printing (ranks 0 and late agree). */
            double med = 0;
            if (rank == late) {
                qsort(t, (size_t)iters, sizeof(double), bench_cmp_double);
                med = t[iters / 2];
            }
            st = rcoll_allreduce(RCOLL_IN_PLACE, &med, 1, RCOLL_FLOAT64, RCOLL_MAX, comm);
            if (st != RCOLL_OK) {
                rcoll_comm_abort(comm);
                return 3;
            }
            if (rank == 0) printf("%12ld %10ld %14.1f\n", sizes[si], sleeps[li], med);
        }
    free(buf);
    free(t);
    rcoll_comm_destroy(comm);
    return 0;
}
