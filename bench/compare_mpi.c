/*
 * compare_mpi.c - times rcoll's all-reduce, all-gather, reduce-scatter and broadcast against
 * Open MPI's own (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast; float32,
 * sum) on the same ranks and buffers, alternating the two libraries round by round so both see
 * the same machine state, and checks both results against the expected values.  Built only
 * when MPI is found; uses rcoll's public API.  -J FILE writes the rows as JSON (tools/rcoll-plot).
 *
 *   mpirun -np 2 --allow-run-as-root --mca pml ob1 --mca btl self,tcp \
 *          --mca btl_tcp_if_include lo -x RCOLL_TRANSPORT=tcp \
 *          ./compare_mpi [-c allreduce|allgather|reducescatter|bcast|all] \
 *          [-b 8 -e 64M -f 2 -n 20 -w 5 -R 5] [-J out.json]
 *
 * Sizes follow nccl-tests: the all-gather's receive buffer, the reduce-scatter's send buffer.
 * Exit: 0 ok, 3 rcoll error, 6 invalid usage, 7 wrong results.
 */
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_json.h"
#include "bench_time.h"
#include "rcoll.h"

#define MAX_ROUNDS 99

/* One collective as both libraries run it.  Buffers: `send` holds the rank's input (max_bytes
 * floats + 1), `recv` the output; `count` is per rank as each API takes it. */
typedef struct {
    const char *name, *mpi_call, *rcoll_call;
    double bus_factor_num; /* busbw = algbw x bus_factor(n) (nccl-tests' PERFORMANCE.md) */
    void (*run_rcoll)(const float *send, float *recv, size_t count);
    void (*run_mpi)(const float *send, float *recv, size_t count);
} cmp_coll_t;

typedef struct {
    size_t min_bytes, max_bytes;
    long factor;
    int iters, warmup, rounds;
    unsigned colls; /* bit i: cmp_colls[i] */
    const char *json_path;
} cmp_opts_t;

static int my_rank, nranks;
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

static void rc_allreduce(const float *send, float *recv, size_t count)
{
    rc_check("rcoll_allreduce",
             rcoll_allreduce(send, recv, count, RCOLL_FLOAT32, RCOLL_SUM, rc_comm));
}

static void mpi_allreduce(const float *send, float *recv, size_t count)
{
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static void rc_allgather(const float *send, float *recv, size_t count)
{
    rc_check("rcoll_allgather", rcoll_allgather(send, recv, count, RCOLL_FLOAT32, rc_comm));
}

static void mpi_allgather(const float *send, float *recv, size_t count)
{
    MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
}

static void rc_reducescatter(const float *send, float *recv, size_t count)
{
    rc_check("rcoll_reduce_scatter",
             rcoll_reduce_scatter(send, recv, count, RCOLL_FLOAT32, RCOLL_SUM, rc_comm));
}

static void mpi_reducescatter(const float *send, float *recv, size_t count)
{
    MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

/* Root 0 broadcasts recv (filled from send on the root before each batch). */
static void rc_bcast(const float *send, float *recv, size_t count)
{
    (void)send;
    rc_check("rcoll_bcast", rcoll_bcast(recv, count, RCOLL_FLOAT32, 0, rc_comm));
}

static void mpi_bcast(const float *send, float *recv, size_t count)
{
    (void)send;
    MPI_Bcast(recv, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER, COLL_BCAST, COLL_NUM };

static const cmp_coll_t cmp_colls[COLL_NUM] = {
    [COLL_ALLREDUCE] = {"allreduce", "MPI_Allreduce", "rcoll_allreduce", 2.0, rc_allreduce,
                        mpi_allreduce},
    [COLL_ALLGATHER] = {"allgather", "MPI_Allgather", "rcoll_allgather", 1.0, rc_allgather,
                        mpi_allgather},
    [COLL_REDUCESCATTER] = {"reducescatter", "MPI_Reduce_scatter_block", "rcoll_reduce_scatter",
                            1.0, rc_reducescatter, mpi_reducescatter},
    [COLL_BCAST] = {"bcast", "MPI_Bcast", "rcoll_bcast", 0.0, rc_bcast, mpi_bcast},
};

static double bus_factor(int coll)
{
    if (coll == COLL_BCAST)
        return 1.0;
    return cmp_colls[coll].bus_factor_num * (nranks - 1) / nranks;
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

static int parse_coll(const char *s, unsigned *out)
{
    if (strcmp(s, "all") == 0) {
        *out = (1u << COLL_NUM) - 1;
        return 0;
    }
    for (int i = 0; i < COLL_NUM; i++) {
        if (strcmp(s, cmp_colls[i].name) == 0) {
            *out = 1u << i;
            return 0;
        }
    }
    return -1;
}

/* 0 on success; -1 (message printed by rank 0) on invalid usage; 1 for -h. */
static int parse_args(int argc, char **argv, cmp_opts_t *o)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'}, {"rounds", required_argument, NULL, 'R'},
        {"coll", required_argument, NULL, 'c'}, {"json", required_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c, f = 2, bad = 0;

    *o = (cmp_opts_t){.min_bytes = 8, .max_bytes = 64u << 20, .factor = 2, .iters = 20,
                      .warmup = 5, .rounds = 5, .colls = 1u << COLL_ALLREDUCE};
    opterr = 0;
    while (!bad && (c = getopt_long(argc, argv, "b:e:f:n:w:R:c:J:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b': bad = parse_size(optarg, &o->min_bytes); break;
        case 'e': bad = parse_size(optarg, &o->max_bytes); break;
        case 'f': bad = parse_int(optarg, 2, 1 << 20, &f); o->factor = f; break;
        case 'n': bad = parse_int(optarg, 1, 1 << 30, &o->iters); break;
        case 'w': bad = parse_int(optarg, 0, 1 << 30, &o->warmup); break;
        case 'R': bad = parse_int(optarg, 1, MAX_ROUNDS, &o->rounds); break;
        case 'c': bad = parse_coll(optarg, &o->colls); break;
        case 'J': o->json_path = optarg; break;
        case 'h':
            if (my_rank == 0)
                printf("usage: compare_mpi [-c allreduce|allgather|reducescatter|bcast|all "
                       "(allreduce)] [-b minbytes 8] [-e maxbytes 64M] [-f factor 2] "
                       "[-n iters 20] [-w warmup 5] [-R rounds 5] [-J|--json FILE]\n");
            return 1;
        default: bad = -1; break;
        }
    }
    if (!bad && (optind < argc || o->min_bytes > o->max_bytes || o->min_bytes < 4))
        bad = -1;
    if (bad && my_rank == 0)
        fprintf(stderr, "compare_mpi: invalid arguments (need 4 <= -b <= -e, -f >= 2, -n >= 1, "
                "-R 1..%d, -c allreduce|allgather|reducescatter|bcast|all); -h for usage\n",
                MAX_ROUNDS);
    return bad ? -1 : 0;
}

static float input_value(int rank, size_t i)
{
    return (float)((int)((i * 2 + (size_t)rank) % 17) - 8);
}

/* What element i of this rank's output must hold (small integers: exact in any order). */
static float expected(int coll, size_t count, size_t i)
{
    float e = 0.0f;
    switch (coll) {
    case COLL_ALLREDUCE:
        for (int r = 0; r < nranks; r++)
            e += input_value(r, i);
        return e;
    case COLL_ALLGATHER:
        return input_value((int)(i / count), i % count);
    case COLL_REDUCESCATTER:
        for (int r = 0; r < nranks; r++)
            e += input_value(r, (size_t)my_rank * count + i);
        return e;
    default:
        return input_value(0, i);
    }
}

/* Elements of this rank's output a collective writes. */
static size_t out_count(int coll, size_t count)
{
    return coll == COLL_ALLGATHER ? count * (size_t)nranks : count;
}

static long count_wrong(int coll, const float *got, size_t count)
{
    long wrong = 0;
    size_t n = out_count(coll, count);
    for (size_t i = 0; i < n; i++)
        wrong += got[i] != expected(coll, count, i);
    return wrong;
}


/* One timed batch of `iters` operations of one library; returns the slowest rank's us/op. */
static double batch(int coll, int use_rcoll, const float *send, float *recv, size_t count,
                    int iters)
{
    const cmp_coll_t *cc = &cmp_colls[coll];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        (use_rcoll ? cc->run_rcoll : cc->run_mpi)(send, recv, count);
    double us = (MPI_Wtime() - t0) * 1e6 / iters, slowest;
    MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* Before a batch: poison the output with NaN (unwritten shows as wrong); a broadcast root's
 * buffer is its input. */
static void prepare(int coll, const float *send, float *recv, size_t count)
{
    memset(recv, 0xff, out_count(coll, count) * sizeof(float));
    if (coll == COLL_BCAST && my_rank == 0)
        memcpy(recv, send, count * sizeof(float));
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

/* The least memory traffic each rank's output needs, in us, at the measured bandwidths: the
 * all-reduce reads two contributions and writes one (add kernel, 3 S); the all-gather and the
 * broadcast write S and read as much (copy, 2 S); the reduce-scatter reads its S and writes
 * S / n (add kernel reading 2, writing 1, over S / n elements per pair: S (1 + 1/n)). */
static double floor_us(int coll, size_t bytes, double copy_gbs, double add_gbs)
{
    double s = (double)bytes;
    if (copy_gbs <= 0 || add_gbs <= 0)
        return 0;
    switch (coll) {
    case COLL_ALLREDUCE: return 3.0 * s / (add_gbs * 1e3);
    case COLL_REDUCESCATTER: return s * (1.0 + 1.0 / nranks) / (add_gbs * 1e3);
    default: return 2.0 * s / (copy_gbs * 1e3);
    }
}

static void json_peer(FILE *f, const char *key, double us, size_t bytes, double bf, long wrong)
{
    double algbw = us > 0 ? (double)bytes / us / 1e3 : 0; /* GB/s */
    fprintf(f, ",\"%s\":{\"time_us\":%.6f,\"algbw\":%.6f,\"busbw\":%.6f,\"wrong\":%ld}", key, us,
            algbw, algbw * bf, wrong);
}

/* Rank 0: the JSON head (format: docs/benchmarks.md, "compare_mpi -J"). */
static FILE *json_open(const char *path, int argc, char **argv, const char *mpi_ver,
                       double copy_gbs, double add_gbs)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return NULL;
    char when[64];
    time_t t = time(NULL);
    const char *tp = getenv("RCOLL_TRANSPORT");
    int v = rcoll_version();
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
    fprintf(f, "{\"version\":1,\"program\":\"compare_mpi\",\"rcoll_version\":\"%d.%d.%d\","
            "\"mpi_version\":", v / 10000, v / 100 % 100, v % 100);
    bench_json_str(f, mpi_ver);
    fprintf(f, ",\"start_time\":");
    bench_json_str(f, when);
    fprintf(f, ",\"args\":[");
    for (int i = 0; i < argc; i++) {
        if (i)
            fputc(',', f);
        bench_json_str(f, argv[i]);
    }
    fprintf(f, "],\"config\":{\"nranks\":%d,\"transport\":", nranks);
    bench_json_str(f, tp && tp[0] ? tp : "auto");
    fprintf(f, ",\"copy_gbs\":%.3f,\"add_gbs\":%.3f},\"results\":[", copy_gbs, add_gbs);
    return f;
}

typedef struct {
    long wrong_total;
    FILE *json;
    int json_rows;
    double copy_gbs, add_gbs;
} cmp_run_t;

/* The size sweep of one collective: a table on rank 0, rows in the JSON. */
static void run_coll(int coll, const cmp_opts_t *o, const float *send, float *recv,
                     cmp_run_t *run)
{
    const cmp_coll_t *cc = &cmp_colls[coll];
    double lsmall = 0, llarge = 0;
    int nsmall = 0, nlarge = 0;
    /* rows: the bytes of the buffer nccl-tests names (all-gather: receive; reduce-scatter:
     * send), so per-rank counts are bytes / 4 / nranks for those two */
    size_t per = (coll == COLL_ALLGATHER || coll == COLL_REDUCESCATTER) ? (size_t)nranks : 1;

    if (my_rank == 0) {
        printf("# collective %s: %s vs %s\n", cc->name, cc->mpi_call, cc->rcoll_call);
        printf("# %10s  %10s  %10s  %10s  %9s  %9s  %6s  %6s\n", "bytes", "count", "mpi(us)",
               "rcoll(us)", "rcoll/mpi", "floor(us)", "mpi_wr", "rc_wr");
        fflush(stdout);
    }
    for (size_t req = o->min_bytes; req <= o->max_bytes; req *= (size_t)o->factor) {
        size_t count = req / sizeof(float) / per;
        size_t bytes = count * per * sizeof(float);
        double tm[MAX_ROUNDS], tr[MAX_ROUNDS];
        long wrong[2] = {0, 0}, wsum[2];

        if (count == 0)
            goto next; /* too small to give every rank one element */
        for (int w = 0; w < o->warmup; w++) {
            prepare(coll, send, recv, count);
            batch(coll, 0, send, recv, count, 1);
            prepare(coll, send, recv, count);
            batch(coll, 1, send, recv, count, 1);
        }
        for (int r = 0; r < o->rounds; r++) {
            for (int k = 0; k < 2; k++) {
                int use_rcoll = (r + k) % 2; /* MPI first in even rounds, rcoll first in odd */
                prepare(coll, send, recv, count);
                double us = batch(coll, use_rcoll, send, recv, count, o->iters);
                (use_rcoll ? tr : tm)[r] = us;
                wrong[use_rcoll] += count_wrong(coll, recv, count);
            }
        }
        MPI_Allreduce(wrong, wsum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        run->wrong_total += wsum[0] + wsum[1];
        double mpi_us = bench_median(tm, o->rounds), rc_us = bench_median(tr, o->rounds);
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
            printf("  %10zu  %10zu  %10.2f  %10.2f  %9.3f  %9.2f  %6ld  %6ld\n", bytes, count,
                   mpi_us, rc_us, ratio,
                   floor_us(coll, bytes, run->copy_gbs, run->add_gbs), wsum[0], wsum[1]);
            fflush(stdout);
            if (run->json) {
                fprintf(run->json, "%s{\"collective\":\"%s\",\"size\":%zu,\"count\":%zu",
                        run->json_rows++ ? "," : "", cc->name, bytes, count);
                json_peer(run->json, "mpi", mpi_us, bytes, bus_factor(coll), wsum[0]);
                json_peer(run->json, "rcoll", rc_us, bytes, bus_factor(coll), wsum[1]);
                fprintf(run->json, ",\"ratio\":%.6f}", ratio);
            }
        }
    next:
        if (req > o->max_bytes / (size_t)o->factor)
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
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    cmp_opts_t o;
    int rc;

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

    /* The largest buffer any collective uses is max_bytes (all-gather receive, reduce-scatter
     * send); the input is the rank's own values over all of it. */
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

    cmp_run_t run = {0};
    stream_floor(o.max_bytes > (64u << 20) ? o.max_bytes : (64u << 20), &run.copy_gbs,
                 &run.add_gbs);
    int bad = 0;
    if (my_rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len, v = rcoll_version();
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, "\n,")] = '\0';
        if (o.json_path) {
            run.json = json_open(o.json_path, argc, argv, ver, run.copy_gbs, run.add_gbs);
            if (run.json == NULL) {
                fprintf(stderr, "compare_mpi: cannot write JSON output to %s\n", o.json_path);
                bad = 1;
            }
        }
        printf("# compare_mpi: rcoll %d.%d.%d vs %s\n", v / 10000, v / 100 % 100, v % 100, ver);
        printf("# %d ranks, float32 sum, %d rounds x %d iters (warmup %d), libraries alternate "
               "per round; time = median over rounds of the slowest rank's us/op\n", nranks,
               o.rounds, o.iters, o.warmup);
        printf("# memory floor (all ranks at once, slowest rank): copy %.1f GB/s, add %.1f GB/s;"
               " floor(us) = 3 x bytes / add bandwidth\n", run.copy_gbs, run.add_gbs);
        if (o.colls != 1u << COLL_ALLREDUCE)
            printf("# (all-gather, broadcast: 2 x bytes / copy bandwidth; reduce-scatter: "
                   "bytes x (1 + 1/ranks) / add bandwidth; sizes as nccl-tests)\n");
        fflush(stdout);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad) {
        rcoll_comm_destroy(rc_comm);
        MPI_Finalize();
        return 6;
    }

    for (int coll = 0; coll < COLL_NUM; coll++)
        if (o.colls & (1u << coll))
            run_coll(coll, &o, send, recv, &run);

    if (my_rank == 0) {
        printf("# wrong results: %ld %s\n", run.wrong_total, run.wrong_total ? "FAILED" : "OK");
        fflush(stdout);
        if (run.json) {
            fprintf(run.json, "],\"wrong_total\":%ld}\n", run.wrong_total);
            fclose(run.json);
        }
    }
    rc_check("rcoll_comm_destroy", rcoll_comm_destroy(rc_comm));
    rc_comm = NULL;
    free(send);
    free(recv);
    MPI_Finalize();
    return run.wrong_total ? 7 : 0;
}
