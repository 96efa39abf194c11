/*
 * selector_check.c - is the default all-reduce the fastest one?  Times the automatic choice
 * (RCOLL_ALGO=auto) against every algorithm of the table forced (RCOLL_ALGO=<name>), each on
 * its own communicator over the same ranks, in one run: per size, R rounds, each round every
 * communicator in a rotated order, each time the slowest rank's microseconds per call over
 * enough calls to last about -t ms; the median round counts.  Prints per size the choice, the
 * times, the best forced algorithm, auto / best (auto's own time), and choice / best (the
 * forced time of the algorithm auto chose: the choice alone, free of the noise between two
 * communicators running the same algorithm); checks every result against the exact sum.
 * A forced algorithm that does not apply at a size (the library would run the model's choice
 * instead) prints "n/a" and is not timed.  The algorithm list is the library's table, so a new
 * algorithm is checked without edits here.
 *
 *   rcoll-run -n 2 selector_check [-b 8] [-e 64M] [-f 4] [-R 5] [-t 3] [-m MARGIN] [-J out.json]
 *
 * Exit: 0, or 1 when -m is given and auto / best exceeds it at some size both in the medians and
 * in each communicator's best round (the CI smoke check; noise only adds time);
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
#include "bench_time.h"
#include "core/introspect.h"
#include "rcoll.h"

#define MAXCOMM 16 /* 0: auto, k + 1: algorithm k forced */
#define MAX_ROUNDS 31

static int rank, nranks;
static rcoll_comm_t base;
static const rcoll_algo_table_t *tb; /* the collective's algorithms (-c) */
static rcoll_coll_t coll = RCOLL_COLL_ALLREDUCE;
static int NCOMM;

static void die(const char *what, rcoll_status_t st, rcoll_comm_t c)
{
    fprintf(stderr, "selector_check: rank %d: %s: %s: %s\n", rank, what,
            rcoll_status_string(st), c ? rcoll_comm_last_error(c) : rcoll_last_init_error());
    if (base) rcoll_comm_abort(base);
    exit(3);
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

static const char *comm_name(int k) { return k ? tb->names[k - 1] : "auto"; }

/* One communicator over the base's ranks with the collective's knob = algo. */
static rcoll_comm_t make_comm(const char *algo)
{
    rcoll_unique_id_t id;
    rcoll_status_t st = RCOLL_OK;
    if (rank == 0) st = rcoll_get_unique_id(&id);
    if (st != RCOLL_OK) die("rcoll_get_unique_id", st, NULL);
    st = rcoll_bcast(&id, sizeof(id), RCOLL_UINT8, 0, base);
    if (st != RCOLL_OK) die("rcoll_bcast of the unique id", st, base);
    setenv(tb->knob, algo, 1);
    rcoll_comm_t c;
    st = rcoll_comm_init_rank(nranks, &id, rank, &c);
    if (st != RCOLL_OK) die("rcoll_comm_init_rank", st, NULL);
    return c;
}

/* One call of the collective: all-reduce of count floats (src to dst), broadcast of count
 * floats from rank 0 (in dst), all-gather of count floats per rank (src into dst). */
static rcoll_status_t one_call(rcoll_comm_t c, const float *src, float *dst, size_t count)
{
    switch (coll) {
    case RCOLL_COLL_BCAST: return rcoll_bcast(dst, count, RCOLL_FLOAT32, 0, c);
    case RCOLL_COLL_ALLGATHER: return rcoll_allgather(src, dst, count / (size_t)nranks,
                                                      RCOLL_FLOAT32, c);
    default: return rcoll_allreduce(src, dst, count, RCOLL_FLOAT32, RCOLL_SUM, c);
    }
}

/* Slowest rank's microseconds per call of `iters` calls on c, after one untimed call: what
 * the previous communicator's algorithm left behind (another algorithm's pages in cache, a
 * peer's cross-memory reads of the buffers) is not charged to this one. */
static double time_calls(rcoll_comm_t c, const float *src, float *dst, size_t count, int iters)
{
    rcoll_status_t st = one_call(c, src, dst, count);
    if (st != RCOLL_OK) die("the collective", st, c);
    st = rcoll_barrier(c);
    if (st != RCOLL_OK) die("rcoll_barrier", st, c);
    double t0 = bench_now_us();
    for (int i = 0; i < iters; i++) {
        st = one_call(c, src, dst, count);
        if (st != RCOLL_OK) die("the collective", st, c);
    }
    double us = (bench_now_us() - t0) / iters;
    st = rcoll_allreduce(RCOLL_IN_PLACE, &us, 1, RCOLL_FLOAT64, RCOLL_MAX, base);
    if (st != RCOLL_OK) die("rcoll_allreduce of the times", st, base);
    return us;
}

/* Broadcast: rank 0's buffer before each call (the others' is overwritten). */
static float bcast_in(size_t i) { return (float)(int)(i % 13 + 1); }

static void usage(void)
{
    fprintf(stderr, "usage: selector_check [-c allreduce|bcast|allgather] [-b min_bytes] "
            "[-e max_bytes] [-f factor] [-R rounds] [-t ms_per_sample] [-m margin] "
            "[-J file.json]\n");
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
    while ((opt = getopt(argc, argv, "c:b:e:f:R:t:m:J:h")) != -1) {
        switch (opt) {
        case 'c':
            if (!strcmp(optarg, "allreduce")) coll = RCOLL_COLL_ALLREDUCE;
            else if (!strcmp(optarg, "bcast")) coll = RCOLL_COLL_BCAST;
            else if (!strcmp(optarg, "allgather")) coll = RCOLL_COLL_ALLGATHER;
            else usage();
            break;
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
    tb = &rcoll_algo_tables[coll];
    NCOMM = tb->count + 1 <= MAXCOMM ? tb->count + 1 : MAXCOMM;
    unsetenv(tb->knob);
    rcoll_status_t st = rcoll_comm_init_env(&base);
    if (st != RCOLL_OK) die("rcoll_comm_init_env", st, NULL);
    rcoll_comm_rank(base, &rank);
    rcoll_comm_size(base, &nranks);
    if (nranks < 2) {
        fprintf(stderr, "selector_check: needs 2 or more ranks (rcoll-run -n N)\n");
        return 6;
    }
    rcoll_comm_t comms[MAXCOMM];
    for (int k = 0; k < NCOMM; k++) comms[k] = make_comm(comm_name(k));
    unsetenv(tb->knob);

    size_t maxcount = maxb / 4;
    float *src = malloc(maxcount * sizeof(float)), *dst = malloc(maxcount * sizeof(float));
    if (!src || !dst) {
        fprintf(stderr, "selector_check: no memory for %zu B buffers\n", maxb);
        return 3;
    }
    for (size_t i = 0; i < maxcount; i++) src[i] = (float)((rank + 1) * (int)(i % 7 + 1));
    if (coll == RCOLL_COLL_BCAST && rank == 0)
        for (size_t i = 0; i < maxcount; i++) dst[i] = bcast_in(i);
    FILE *jf = NULL;
    if (rank == 0) {
        if (json && !(jf = fopen(json, "w"))) {
            perror(json);
            return 6;
        }
        printf("# selector_check: %s, %d ranks, %d rounds, ~%.1f ms per sample; us per call "
               "(float32; all-reduce: sum, out of place; broadcast: root 0; all-gather: bytes "
               "= the gathered whole), median over rounds of the slowest rank\n", tb->coll,
               nranks, rounds, target_ms);
        printf("%10s %-8s", "bytes", "auto=");
        for (int k = 0; k < NCOMM; k++) printf(" %9s", comm_name(k));
        printf(" %9s %6s %6s\n", "best", "ratio", "choice");
        if (jf) fprintf(jf, "{\"ranks\": %d, \"rounds\": %d, \"rows\": [", nranks, rounds);
    }
    int failed = 0, wrong = 0, rows = 0;
    double worst = 0, worst_choice = 0;
    for (size_t bytes = minb; bytes <= maxb; bytes = bytes * (size_t)factor) {
        size_t count = bytes / 4;
        if (coll == RCOLL_COLL_ALLGATHER) count = count / (size_t)nranks * (size_t)nranks;
        if (count == 0) continue;
        bytes = count * 4;
        int choice[MAXCOMM];
        int applies[MAXCOMM];
        for (int k = 0; k < NCOMM; k++) {
            choice[k] = rcoll_comm_algo_choice(comms[k], (int)coll, bytes);
            applies[k] = k == 0 || choice[k] == k - 1;
        }
        /* calls per sample: from one warm call of auto, agreed (the slowest rank's) */
        double one = time_calls(comms[0], src, dst, count, 1);
        int iters = (int)(target_ms * 1e3 / (one > 0.1 ? one : 0.1));
        if (iters < 1) iters = 1;
        if (iters > 20000) iters = 20000;
        double t[MAXCOMM][MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            /* a new order every round (the same on every rank): nobody always follows the
             * same algorithm */
            int order[MAXCOMM];
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
        double med[MAXCOMM], low[MAXCOMM];
        for (int k = 0; k < NCOMM; k++) {
            med[k] = low[k] = NAN;
            if (!applies[k]) continue;
            qsort(t[k], (size_t)rounds, sizeof(double), bench_cmp_double);
            med[k] = t[k][rounds / 2];
            low[k] = t[k][0];
            /* the last call's result against the exact values (small integers: exact in
             * float): the sum; rank 0's input; every rank's block */
            one_call(comms[k], src, dst, count);
            int bad = 0;
            size_t stride = count > 4096 ? count / 4096 : 1, blk = count / (size_t)nranks;
            for (size_t i = 0; i < count; i += stride) {
                float want = (float)(nranks * (nranks + 1) / 2 * (int)(i % 7 + 1));
                if (coll == RCOLL_COLL_BCAST) want = bcast_in(i);
                if (coll == RCOLL_COLL_ALLGATHER)
                    want = (float)((int)(i / blk) + 1) * (float)((int)(i % blk % 7) + 1);
                if (dst[i] != want) bad = 1;
            }
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
        /* the choice alone: the forced communicator of auto's algorithm, where it runs it */
        int mine = choice[0] >= 0 && choice[0] + 1 < NCOMM && applies[choice[0] + 1]
                       ? choice[0] + 1 : -1;
        double cratio = best > 0 && mine > 0 ? med[mine] / med[best] : NAN;
        if (cratio > worst_choice) worst_choice = cratio;
        /* The margin is checked on each communicator's best round too (noise only adds
         * time): a slow default is slow in its best round, a descheduled rank is not. */
        int lbest = -1;
        for (int k = 1; k < NCOMM; k++)
            if (applies[k] && (lbest < 0 || low[k] < low[lbest])) lbest = k;
        double lratio = lbest > 0 ? low[0] / low[lbest] : 1.0;
        int over = margin > 0 && ratio > margin && lratio > margin;
        failed |= over;
        if (rank == 0) {
            printf("%10zu %-8s", bytes, choice[0] >= 0 ? tb->names[choice[0]] : "?");
            for (int k = 0; k < NCOMM; k++) {
                if (applies[k]) printf(" %9.2f", med[k]);
                else printf(" %9s", "n/a");
            }
            printf(" %9s %6.2f", best > 0 ? comm_name(best) : "-", ratio);
            if (isnan(cratio)) printf(" %6s", "-");
            else printf(" %6.2f", cratio);
            if (margin > 0 && ratio > margin)
                printf("  (best rounds: %.2f)%s", lratio, over ? "  OVER" : "");
            printf("\n");
            if (jf) {
                fprintf(jf, "%s\n  {\"bytes\": %zu, \"auto\": \"%s\", \"ratio\": %.4f, "
                        "\"choice_ratio\": %.4f, \"us\": {", rows ? "," : "", bytes,
                        choice[0] >= 0 ? tb->names[choice[0]] : "?", ratio,
                        isnan(cratio) ? -1.0 : cratio);
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
        printf("# worst choice / best: %.2f (auto's algorithm, forced, over the best forced)\n",
               worst_choice);
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
