/*
 * wait_bench.c - what a waiting rank takes from computation, by wait mode (docs/api.md,
 * "Waiting: spin or sleep").  Every rank computes on THREADS threads (default: the CPUs it may
 * run on), the last rank twice as much, then all ranks all-reduce 8 bytes: the other ranks wait
 * in the all-reduce while the last one still computes, as DDP ranks do while a peer finishes
 * its backward pass.  A waiter that polls takes a CPU from the last rank's threads; one that
 * sleeps does not.  The same steps run on two communicators of the same ranks, one per mode
 * (rcoll_comm_config_t.wait), alternating, and rank 0 prints the median step time of each and
 * their ratio; then the 8-byte all-reduce alone (no computation), its latency in each mode.
 *
 *   rcoll-run -n 2 build/bench/wait_bench [-w WORK_US] [-t THREADS] [-n STEPS]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rcoll.h>

#include "bench_time.h"


/* A fixed amount of arithmetic (not of time: contention must make it slower). */
static volatile double sink;
static void work(long units)
{
    double x = 1.0;
    for (long i = 0; i < units; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

typedef struct {
    pthread_barrier_t start, done;
    long units;
    int stop;
} pool_t;

static void *helper(void *arg)
{
    pool_t *p = arg;
    for (;;) {
        pthread_barrier_wait(&p->start);
        if (p->stop) return NULL;
        work(p->units);
        pthread_barrier_wait(&p->done);
    }
}

static void compute(pool_t *p, long units)
{
    p->units = units;
    pthread_barrier_wait(&p->start);
    work(units);
    pthread_barrier_wait(&p->done);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: wait_bench [-w WORK_US] [-t THREADS] [-n STEPS]\n"
               "  each step: THREADS threads compute WORK_US (the last rank 2 x WORK_US), then\n"
               "  an 8-byte all-reduce; median step time per wait mode (spin, sleep)\n"
               "  defaults: -w 2000 -t <CPUs of this rank's mask> -n 200\n");
}

int main(int argc, char **argv)
{
    long work_us = 2000;
    int threads = 0, steps = 200, c;
    while ((c = getopt(argc, argv, "w:t:n:h")) != -1) {
        switch (c) {
        case 'w': work_us = atol(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'n': steps = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (work_us <= 0 || steps <= 0 || threads < 0) {
        usage(stderr);
        return 2;
    }
    if (!threads) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    rcoll_comm_t world;
    if (rcoll_comm_init_env(&world) != RCOLL_OK) {
        fprintf(stderr, "wait_bench: %s\n", rcoll_last_init_error());
        return 1;
    }
    int rank = 0, n = 1;
    rcoll_comm_rank(world, &rank);
    rcoll_comm_size(world, &n);
    const int modes[2] = {RCOLL_WAIT_SPIN, RCOLL_WAIT_SLEEP};
    const char *names[2] = {"spin", "sleep"};
    rcoll_comm_t comm[2];
    for (int m = 0; m < 2; m++) {
        rcoll_unique_id_t id;
        if (rank == 0 && rcoll_get_unique_id(&id) != RCOLL_OK) return 1;
        if (rcoll_bcast(&id, sizeof(id), RCOLL_UINT8, 0, world) != RCOLL_OK) return 1;
        rcoll_comm_config_t cfg = RCOLL_COMM_CONFIG_INIT;
        cfg.wait = modes[m];
        cfg.name = names[m];
        if (rcoll_comm_init_rank_config(n, &id, rank, &cfg, &comm[m]) != RCOLL_OK) {
            fprintf(stderr, "wait_bench: %s\n", rcoll_last_init_error());
            return 1;
        }
    }
    /* work units per microsecond, measured alone on one thread (rank 0's, sent to all) */
    double upus = 0;
    if (rank == 0) {
        double t0 = bench_now_us();
        work(20000000);
        upus = 20000000 / (bench_now_us() - t0);
    }
    rcoll_bcast(&upus, 1, RCOLL_FLOAT64, 0, world);
    long units = (long)(upus * (double)work_us) * (rank == n - 1 ? 2 : 1);

    pool_t pool = {.stop = 0};
    pthread_barrier_init(&pool.start, NULL, (unsigned)threads);
    pthread_barrier_init(&pool.done, NULL, (unsigned)threads);
    pthread_t *th = calloc((size_t)threads, sizeof(*th));
    for (int i = 1; i < threads; i++) pthread_create(&th[i], NULL, helper, &pool);

    double *t[2], *lat[2];
    for (int m = 0; m < 2; m++) {
        t[m] = calloc((size_t)steps, sizeof(double));
        lat[m] = calloc((size_t)steps, sizeof(double));
    }
    double v = 1;
    for (int m = 0; m < 2; m++) /* warm up both */
        for (int i = 0; i < 5; i++)
            rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_FLOAT64, RCOLL_SUM, comm[m]);
    for (int i = 0; i < steps; i++) {
        for (int k = 0; k < 2; k++) {
            int m = (i + k) % 2; /* alternate which mode goes first */
            rcoll_barrier(comm[m]);
            double t0 = bench_now_us();
            compute(&pool, units);
            if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_FLOAT64, RCOLL_SUM, comm[m]) !=
                RCOLL_OK)
                return 1;
            t[m][i] = bench_now_us() - t0;
        }
    }
    for (int i = 0; i < steps; i++) {
        for (int m = 0; m < 2; m++) {
            double t0 = bench_now_us();
            rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_FLOAT64, RCOLL_SUM, comm[m]);
            lat[m][i] = bench_now_us() - t0;
        }
    }
    pool.stop = 1;
    pthread_barrier_wait(&pool.start);
    for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
    if (rank == 0) {
        double ms[2], ls[2];
        for (int m = 0; m < 2; m++) {
            ms[m] = bench_median(t[m], steps);
            ls[m] = bench_median(lat[m], steps);
        }
        printf("# wait_bench: %d ranks, %d threads each computing %ld us (the last rank %ld us), "
               "then an 8-byte all-reduce; medians of %d steps\n", n, threads, work_us,
               2 * work_us, steps);
        printf("# %-28s %10s %10s %12s\n", "", "spin", "sleep", "sleep/spin");
        printf("  %-28s %10.1f %10.1f %12.3f\n", "step (us)", ms[0], ms[1], ms[1] / ms[0]);
        printf("  %-28s %10.2f %10.2f %12.3f\n", "8 B all-reduce alone (us)", ls[0], ls[1],
               ls[1] / ls[0]);
    }
    for (int m = 0; m < 2; m++) rcoll_comm_destroy(comm[m]);
    rcoll_comm_destroy(world);
    return 0;
}
