/*
 * selector_check.c - is the default all-reduce the fastest one?  Times the automatic choice
 * (RCOLL_ALGO=auto) against every algorithm of the table forced (RCOLL_ALGO=<name>), each on
 * its own communicator over the same ranks, in one run: per size, R rounds, each round every
 * communicator in a rotated order, each time the slowest rank's microseconds per call over
 * enough calls to last about -t ms; the median round counts.  Prints per size the choice, the
 * times, the best forced algorithm and auto / best; checks every result against the exact sum.
 * A forced algorithm that does not apply at a size (the library would run the model's choice
 * instead) prints "n/a" and is not timed.  The algorithm list is the library's table, so a new
 * algorithm is checked without edits here.
 *
 *   rcoll-run -n 2 selector_check [-b 8] [-e 64M] [-f 4] [-R 5] [-t 3] [-m MARGIN] [-J out.json]
 *
 * Exit: 0, or 1 when -m is given and auto / best exceeds it at some size (the CI smoke check);
 * 3 on a library error, 7 on a wrong result.
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo.h"
#include "core/introspect.h"
#include "rcoll.h"

#define NCOMM (RCOLL_ALG_COUNT + 1) /* 0: auto, k + 1: algorithm k forced */
#define MAX_ROUNDS 31

static int rank, nranks;
static rcoll_comm_t base;

static void die(const char *what, rcoll_status_t st, rcoll_comm_t c)
{
    fprintf(stderr, "selector_check: rank %d: %s: %s: %s\n", rank, what,
            rcoll_status_string(st), c ? rcoll_comm_last_error(c) : rcoll_last_init_error());
    if (base) rcoll_comm_abort(base);
    exit(3);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 1) return -1;
    switch (*end) {
    case 'K': case 'k': v *= 1024; end++; break;
    case 'M': case 'm': v *= 1048576; end++; break;
    case 'G': case 'g': v *= 1073741824; end++; break;
    default: break;
    }
    if (*end) return -1;
    *out = (size_t)v;
    return 0;
}

static const char *comm_name(int k) { return k ? rcoll_alg_names[k - 1] : "auto"; }

/* One communicator over the base's ranks with RCOLL_ALGO=algo. */
static rcoll_comm_t make_comm(const char *algo)
{
    rcoll_unique_id_t id;
    rcoll_status_t st = RCOLL_OK;
    if (rank == 0) st = rcoll_get_unique_id(&id);
    if (st != RCOLL_OK) die("rcoll_get_unique_id", st, NULL);
    st = rcoll_bcast(&id, sizeof(id), RCOLL_UINT8, 0, base);
    if (st != RCOLL_OK) die("rcoll_bcast of the unique id", st, base);
    setenv("RCOLL_ALGO", algo, 1);
    rcoll_comm_t c;
    st = rcoll_comm_init_rank(nranks, &id, rank, &c);
    if (st != RCOLL_OK) die("rcoll_comm_init_rank", st, NULL);
    return c;
}

/* Slowest rank's microseconds per call of `iters` all-reduces on c, after one untimed call:
 * what the previous communicator's algorithm left behind (another algorithm's pages in
 * cache, a peer's cross-memory reads of the buffers) is not charged to this one. */
static double time_calls(rcoll_comm_t c, const float *src, float *dst, size_t count, int iters)
{
    rcoll_status_t st = rcoll_allreduce(src, dst, count, RCOLL_FLOAT32, RCOLL_SUM, c);
    if (st != RCOLL_OK) die("rcoll_allreduce", st, c);
    st = rcoll_barrier(c);
    if (st != RCOLL_OK) die("rcoll_barrier", st, c);
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        st = rcoll_allreduce(src, dst, count, RCOLL_FLOAT32, RCOLL_SUM, c);
        if (st != RCOLL_OK) die("rcoll_allreduce", st, c);
    }
    double us = (now_us() - t0) / iters;
    st = rcoll_allreduce(RCOLL_IN_PLACE, &us, 1, RCOLL_FLOAT64, RCOLL_MAX, base);
    if (st != RCOLL_OK) die("rcoll_allreduce of the times", st, base);
    return us;
}

static void usage(void)
{
    fprintf(stderr, "usage: selector_check [-b min_bytes] [-e max_bytes] [-f factor] "
            "[-R rounds] [-t ms_per_sample] [-m margin] [-J file.json]\n");
    exit(6);
}

int main(int argc, char **argv)
{
    size_t minb = 8, maxb = (size_t)64 << 20;
    long factor = 4;
    int rounds = 5;
    double target_ms = 3, margin = 0;
    const char *json = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "b:e:f:R:t:m:J:h")) != -1) {
        switch (opt) {
        case 'b': if (parse_size(optarg, &minb)) usage(); break;
        case 'e': if (parse_size(optarg, &maxb)) usage(); break;
        case 'f': factor = strtol(optarg, NULL, 10); if (factor < 2) usage(); break;
        case 'R': rounds = atoi(optarg); if (rounds < 1 || rounds > MAX_ROUNDS) usage(); break;
        case 't': target_ms = atof(optarg); if (!(target_ms > 0)) usage(); break;
        case 'm': margin = atof(optarg); if (!(margin >= 1)) usage(); break;
        case 'J': json = optarg; break;
        default: usage();
        }
    }
    if (minb < 4) minb = 4;
    if (maxb < minb) usage();
    unsetenv("RCOLL_ALGO");
    rcoll_status_t st = rcoll_comm_init_env(&base);
    if (st != RCOLL_OK) die("rcoll_comm_init_env", st, NULL);
    rcoll_comm_rank(base, &rank);
    rcoll_comm_size(base, &nranks);
    if (nranks < 2) {
        fprintf(stderr, "selector_check: needs 2 or more ranks (rcoll-run -n N)\n");
        return 6;
    }
    rcoll_comm_t comms[NCOMM];
    for (int k = 0; k < NCOMM; k++) comms[k] = make_comm(comm_name(k));
    unsetenv("RCOLL_ALGO");

    size_t maxcount = maxb / 4;
    float *src = malloc(maxcount * sizeof(float)), *dst = malloc(maxcount * sizeof(float));
    if (!src || !dst) {
        fprintf(stderr, "selector_check: no memory for %zu B buffers\n", maxb);
        return 3;
    }
    for (size_t i = 0; i < maxcount; i++) src[i] = (float)((rank + 1) * (int)(i % 7 + 1));
    FILE *jf = NULL;
    if (rank == 0) {
        if (json && !(jf = fopen(json, "w"))) {
            perror(json);
            return 6;
        }
        printf("# selector_check: %d ranks, %d rounds, ~%.1f ms per sample; us per all-reduce "
               "(float32 sum, out of place), median over rounds of the slowest rank\n", nranks,
               rounds, target_ms);
        printf("%10s %-8s", "bytes", "auto=");
        for (int k = 0; k < NCOMM; k++) printf(" %9s", comm_name(k));
        printf(" %9s %6s\n", "best", "ratio");
        if (jf) fprintf(jf, "{\"ranks\": %d, \"rounds\": %d, \"rows\": [", nranks, rounds);
    }
    int failed = 0, wrong = 0, rows = 0;
    double worst = 0;
    for (size_t bytes = minb; bytes <= maxb; bytes = bytes * (size_t)factor) {
        size_t count = bytes / 4;
        bytes = count * 4;
        int choice[NCOMM];
        int applies[NCOMM];
        for (int k = 0; k < NCOMM; k++) {
            choice[k] = rcoll_comm_allreduce_choice(comms[k], bytes);
            applies[k] = k == 0 || choice[k] == k - 1;
        }
        /* calls per sample: from one warm call of auto, agreed (the slowest rank's) */
        double one = time_calls(comms[0], src, dst, count, 1);
        int iters = (int)(target_ms * 1e3 / (one > 0.1 ? one : 0.1));
        if (iters < 1) iters = 1;
        if (iters > 20000) iters = 20000;
        double t[NCOMM][MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            /* a new order every round (the same on every rank): nobody always follows the
             * same algorithm */
            int order[NCOMM];
            for (int k = 0; k < NCOMM; k++) order[k] = k;
            unsigned seed = (unsigned)(r * 2654435761u + bytes);
            for (int k = NCOMM - 1; k > 0; k--) {
                seed = seed * 1103515245u + 12345u;
                int j = (int)((seed >> 8) % (unsigned)(k + 1)), x = order[k];
                order[k] = order[j];
                order[j] = x;
            }
            for (int j = 0; j < NCOMM; j++) {
                int k = order[j];
                if (applies[k]) t[k][r] = time_calls(comms[k], src, dst, count, iters);
            }
        }
        double med[NCOMM];
        for (int k = 0; k < NCOMM; k++) {
            med[k] = NAN;
            if (!applies[k]) continue;
            qsort(t[k], (size_t)rounds, sizeof(double), cmp_dbl);
            med[k] = t[k][rounds / 2];
            /* the last call's result against the exact sum (small integers: exact in float) */
            rcoll_allreduce(src, dst, count, RCOLL_FLOAT32, RCOLL_SUM, comms[k]);
            int bad = 0;
            for (size_t i = 0; i < count; i += (count > 4096 ? count / 4096 : 1)) {
                float want = (float)(nranks * (nranks + 1) / 2 * (int)(i % 7 + 1));
                if (dst[i] != want) bad = 1;
            }
            float want_last = (float)(nranks * (nranks + 1) / 2 * (int)((count - 1) % 7 + 1));
            if (dst[count - 1] != want_last) bad = 1;
            if (bad) {
                fprintf(stderr, "selector_check: rank %d: %s gave a wrong sum at %zu B\n", rank,
                        comm_name(k), bytes);
                wrong = 1;
            }
        }
        int best = -1;
        for (int k = 1; k < NCOMM; k++)
            if (applies[k] && (best < 0 || med[k] < med[best])) best = k;
        double ratio = best > 0 ? med[0] / med[best] : 1.0;
        if (ratio > worst) worst = ratio;
        int over = margin > 0 && ratio > margin;
        failed |= over;
        if (rank == 0) {
            printf("%10zu %-8s", bytes, choice[0] >= 0 ? rcoll_alg_names[choice[0]] : "?");
            for (int k = 0; k < NCOMM; k++) {
                if (applies[k]) printf(" %9.2f", med[k]);
                else printf(" %9s", "n/a");
            }
            printf(" %9s %6.2f%s\n", best > 0 ? comm_name(best) : "-", ratio,
                   over ? "  OVER" : "");
            if (jf) {
                fprintf(jf, "%s\n  {\"bytes\": %zu, \"auto\": \"%s\", \"ratio\": %.4f, "
                        "\"us\": {", rows ? "," : "", bytes,
                        choice[0] >= 0 ? rcoll_alg_names[choice[0]] : "?", ratio);
                int first = 1;
                for (int k = 0; k < NCOMM; k++)
                    if (applies[k]) {
                        fprintf(jf, "%s\"%s\": %.3f", first ? "" : ", ", comm_name(k), med[k]);
                        first = 0;
                    }
                fprintf(jf, "}}");
            }
            fflush(stdout);
        }
        rows++;
        if (bytes > maxb / (size_t)factor) break;
    }
    int any_wrong = wrong;
    rcoll_allreduce(RCOLL_IN_PLACE, &any_wrong, 1, RCOLL_INT32, RCOLL_MAX, base);
    if (rank == 0) {
        printf("# worst auto / best: %.2f%s\n", worst,
               margin > 0 ? (failed ? " (over the margin)" : " (within the margin)") : "");
        if (jf) {
            fprintf(jf, "\n], \"worst\": %.4f}\n", worst);
            fclose(jf);
        }
    }
    for (int k = 0; k < NCOMM; k++) rcoll_comm_destroy(comms[k]);
    rcoll_comm_destroy(base);
    free(src);
    free(dst);
    if (any_wrong) return 7;
    return failed ? 1 : 0;
}
