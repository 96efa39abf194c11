/*
 * compare_mpi.c - times rcoll_allreduce against MPI_Allreduce (float32 sum) on the same ranks
 * and buffers, alternating the two libraries round by round so both see the same machine
 * state, and checks both results.  Built only when MPI is found; uses rcoll's public API.
 *
 *   mpirun -np 2 --allow-run-as-root --mca pml ob1 --mca btl self,tcp \
 *          --mca btl_tcp_if_include lo ./compare_mpi [-b 8 -e 64M -f 2 -n 20 -w 5 -R 5]
 *
 * Exit: 0 ok, 3 rcoll error, 6 invalid usage, 7 wrong results.
 */
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

#define MAX_ROUNDS 99

typedef struct {
    size_t min_bytes, max_bytes;
    long factor;
    int iters, warmup, rounds;
} cmp_opts_t;

static int my_rank;
static rcoll_comm_t rc_comm;

static void rc_check(const char *call, rcoll_status_t st)
{
    if (!RCOLL_IS_ERR(st))
        return;
    fprintf(stderr, "compare_mpi: rank %d: %s failed: %s: %s\n", my_rank, call,
            rcoll_status_string(st), rc_comm ? rcoll_comm_last_error(rc_comm) : "");
    rcoll_comm_abort(rc_comm);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, mult = 1;
    if (*s < '0' || *s > '9')
        return -1;
    v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': mult = 1ULL << 10; end++; break;
    case 'M': case 'm': mult = 1ULL << 20; end++; break;
    case 'G': case 'g': mult = 1ULL << 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* 0 on success; -1 (message printed by rank 0) on invalid usage; 1 for -h. */
static int parse_args(int argc, char **argv, cmp_opts_t *o)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'}, {"rounds", required_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c, f = 2, bad = 0;

    *o = (cmp_opts_t){.min_bytes = 8, .max_bytes = 64u << 20, .factor = 2, .iters = 20,
                      .warmup = 5, .rounds = 5};
    opterr = 0;
    while (!bad && (c = getopt_long(argc, argv, "b:e:f:n:w:R:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b': bad = parse_size(optarg, &o->min_bytes); break;
        case 'e': bad = parse_size(optarg, &o->max_bytes); break;
        case 'f': bad = parse_int(optarg, 2, 1 << 20, &f); o->factor = f; break;
        case 'n': bad = parse_int(optarg, 1, 1 << 30, &o->iters); break;
        case 'w': bad = parse_int(optarg, 0, 1 << 30, &o->warmup); break;
        case 'R': bad = parse_int(optarg, 1, MAX_ROUNDS, &o->rounds); break;
        case 'h':
            if (my_rank == 0)
                printf("usage: compare_mpi [-b minbytes 8] [-e maxbytes 64M] [-f factor 2] "
                       "[-n iters 20] [-w warmup 5] [-R rounds 5]\n");
            return 1;
        default: bad = -1; break;
        }
    }
    if (!bad && (optind < argc || o->min_bytes > o->max_bytes || o->min_bytes < 4))
        bad = -1;
    if (bad && my_rank == 0)
        fprintf(stderr, "compare_mpi: invalid arguments (need 4 <= -b <= -e, -f >= 2, -n >= 1, "
                "-R 1..%d); -h for usage\n", MAX_ROUNDS);
    return bad ? -1 : 0;
}

static float input_value(int rank, size_t i)
{
    return (float)((int)((i * 2 + (size_t)rank) % 17) - 8);
}

static long count_wrong(const float *got, size_t count, int nranks)
{
    long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float e = 0.0f; /* small integers: exact in any order */
        for (int r = 0; r < nranks; r++)
            e += input_value(r, i);
        wrong += got[i] != e;
    }
    return wrong;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One timed batch of `iters` operations of one library; returns the slowest rank's us/op. */
static double batch(int use_rcoll, const float *send, float *recv, size_t count, int iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (use_rcoll)
            rc_check("rcoll_allreduce",
                     rcoll_allreduce(send, recv, count, RCOLL_FLOAT32, RCOLL_SUM, rc_comm));
        else
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double us = (MPI_Wtime() - t0) * 1e6 / iters, slowest;
    MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* The memory-bandwidth floor, measured in the same run: every rank at once runs a STREAM-like
 * copy (a = b) and add (a = b + c) over buffers of `bytes`, and the slowest rank's GB/s is
 * kept.  An all-reduce must at least read its input and one other contribution and write its
 * result per element, the traffic of the add kernel, so S bytes cannot take less than
 * 3 S / add_bw on this machine. */
static void stream_floor(size_t bytes, double *copy_gbs, double *add_gbs)
{
    size_t n = bytes / sizeof(float);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)),
          *c = malloc(n * sizeof(float));
    double best_copy = 1e30, best_add = 1e30;
    if (!a || !b || !c) {
        *copy_gbs = *add_gbs = 0;
        free(a), free(b), free(c);
        return;
    }
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = (float)(i % 7), c[i] = (float)(i % 5);
    for (int rep = 0; rep < 5; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        memcpy(a, b, n * sizeof(float));
        double t1 = MPI_Wtime();
        for (size_t i = 0; i < n; i++) a[i] = b[i] + c[i];
        double t2 = MPI_Wtime();
        if (t1 - t0 < best_copy) best_copy = t1 - t0;
        if (t2 - t1 < best_add) best_add = t2 - t1;
    }
    volatile float sink = a[n / 2];
    (void)sink;
    double mine[2] = {2.0 * (double)bytes / best_copy / 1e9, 3.0 * (double)bytes / best_add / 1e9};
    double low[2];
    MPI_Allreduce(mine, low, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    *copy_gbs = low[0];
    *add_gbs = low[1];
    free(a), free(b), free(c);
}

int main(int argc, char **argv)
{
    cmp_opts_t o;
    int nranks, rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        MPI_Finalize();
        return rc > 0 ? 0 : 6;
    }
    if (o.max_bytes / sizeof(float) > (size_t)INT32_MAX) {
        if (my_rank == 0)
            fprintf(stderr, "compare_mpi: -e too large for MPI's int count\n");
        MPI_Finalize();
        return 6;
    }

    rcoll_unique_id_t id;
    memset(&id, 0, sizeof(id));
    if (my_rank == 0) {
        rcoll_status_t st = rcoll_get_unique_id(&id);
        if (RCOLL_IS_ERR(st)) {
            fprintf(stderr, "compare_mpi: rcoll_get_unique_id failed: %s: %s\n",
                    rcoll_status_string(st), rcoll_last_init_error());
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    rcoll_status_t st = rcoll_comm_init_rank(nranks, &id, my_rank, &rc_comm);
    if (RCOLL_IS_ERR(st)) {
        fprintf(stderr, "compare_mpi: rank %d: rcoll_comm_init_rank failed: %s: %s\n", my_rank,
                rcoll_status_string(st), rcoll_last_init_error());
        MPI_Abort(MPI_COMM_WORLD, 3);
    }

    size_t max_count = o.max_bytes / sizeof(float);
    float *send = malloc((max_count + 1) * sizeof(float));
    float *recv = malloc((max_count + 1) * sizeof(float));
    if (send == NULL || recv == NULL) {
        fprintf(stderr, "compare_mpi: rank %d: out of memory for -e %zu\n", my_rank,
                o.max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < max_count; i++)
        send[i] = input_value(my_rank, i);
    memset(recv, 0, (max_count + 1) * sizeof(float));

    double copy_gbs, add_gbs;
    stream_floor(o.max_bytes > (64u << 20) ? o.max_bytes : (64u << 20), &copy_gbs, &add_gbs);
    if (my_rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len, v = rcoll_version();
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, "\n,")] = '\0';
        printf("# compare_mpi: rcoll %d.%d.%d vs %s\n", v / 10000, v / 100 % 100, v % 100, ver);
        printf("# %d ranks, float32 sum, %d rounds x %d iters (warmup %d), libraries alternate "
               "per round; time = median over rounds of the slowest rank's us/op\n", nranks,
               o.rounds, o.iters, o.warmup);
        printf("# memory floor (all ranks at once, slowest rank): copy %.1f GB/s, add %.1f GB/s;"
               " floor(us) = 3 x bytes / add bandwidth\n", copy_gbs, add_gbs);
        printf("# %10s  %10s  %10s  %10s  %9s  %9s  %6s  %6s\n", "bytes", "count", "mpi(us)",
               "rcoll(us)", "rcoll/mpi", "floor(us)", "mpi_wr", "rc_wr");
        fflush(stdout);
    }

    double lsmall = 0, llarge = 0;
    int nsmall = 0, nlarge = 0;
    long wrong_total = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= (size_t)o.factor) {
        size_t count = bytes / sizeof(float);
        double tm[MAX_ROUNDS], tr[MAX_ROUNDS];
        long wrong[2] = {0, 0}, wsum[2];

        for (int w = 0; w < o.warmup; w++) {
            batch(0, send, recv, count, 1);
            batch(1, send, recv, count, 1);
        }
        for (int r = 0; r < o.rounds; r++) {
            for (int k = 0; k < 2; k++) {
                int use_rcoll = (r + k) % 2; /* MPI first in even rounds, rcoll first in odd */
                memset(recv, 0xff, count * sizeof(float)); /* NaN: unwritten shows as wrong */
                double us = batch(use_rcoll, send, recv, count, o.iters);
                (use_rcoll ? tr : tm)[r] = us;
                wrong[use_rcoll] += count_wrong(recv, count, nranks);
            }
        }
        MPI_Allreduce(wrong, wsum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        wrong_total += wsum[0] + wsum[1];
        double mpi_us = median(tm, o.rounds), rc_us = median(tr, o.rounds);
        double ratio = mpi_us > 0 ? rc_us / mpi_us : 0.0;
        if (ratio > 0 && bytes >= 8 && bytes <= (64u << 10)) {
            lsmall += log(ratio);
            nsmall++;
        }
        if (ratio > 0 && bytes >= (1u << 20) && bytes <= (64u << 20)) {
            llarge += log(ratio);
            nlarge++;
        }
        if (my_rank == 0) {
            double floor_us = add_gbs > 0 ? 3.0 * (double)bytes / (add_gbs * 1e3) : 0;
            printf("  %10zu  %10zu  %10.2f  %10.2f  %9.3f  %9.2f  %6ld  %6ld\n", bytes, count,
                   mpi_us, rc_us, ratio, floor_us, wsum[0], wsum[1]);
            fflush(stdout);
        }
        if (bytes > o.max_bytes / (size_t)o.factor)
            break;
    }

    if (my_rank == 0) {
        if (nsmall)
            printf("# geomean rcoll/mpi 8B-64KiB  : %.3f (%d sizes)\n", exp(lsmall / nsmall),
                   nsmall);
        else
            printf("# geomean rcoll/mpi 8B-64KiB  : n/a (no size in range)\n");
        if (nlarge)
            printf("# geomean rcoll/mpi 1MiB-64MiB: %.3f (%d sizes)\n", exp(llarge / nlarge),
                   nlarge);
        else
            printf("# geomean rcoll/mpi 1MiB-64MiB: n/a (no size in range)\n");
        printf("# wrong results: %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        fflush(stdout);
    }
    rc_check("rcoll_comm_destroy", rcoll_comm_destroy(rc_comm));
    rc_comm = NULL;
    free(send);
    free(recv);
    MPI_Finalize();
    return wrong_total ? 7 : 0;
}
