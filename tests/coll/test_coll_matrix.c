/*
 * test_coll_matrix.c - the collective matrix over real processes and real TCP connections:
 * ranks 1..9, 12 and 16; counts {0, 1, ranks-1, odd, multi-chunk} with a small-chunk knob so
 * big counts take many pipeline loops; every datatype x op; in-place and out-of-place;
 * broadcast from every root; barriers; several nonblocking operations outstanding, waited in
 * reverse order and polled with rcoll_test; every all-reduce algorithm, each checked to be
 * the one that ran (the library's INFO line at the choice).  From 12 ranks a lighter matrix
 * (LIGHT_RANKS) keeps the run within time on 2 cores; int16, uint16, bool and the bitwise ops
 * run at 1 and 3 ranks and in the hierarchical all-reduce (with_narrow).  Expected values come
 * from a reference computed here in double/wide-integer arithmetic, independent of the
 * library's reduction code.
 * Then gather and scatter (every root), all-gather-v, all-to-all-v and reduce-scatter-v with
 * uneven counts (zeros, one rank only, all zero, equal), in place, out of place and
 * nonblocking, over shared memory and TCP, 1..5 ranks.
 * Usage: test_coll_matrix [max_ranks]   (RCOLL_CHUNK_SIZE is set to 64 unless given;
 * TEST_MAX_RANKS=n is max_ranks when no argument gives it; MATRIX_V_ONLY=1 runs only the
 * rooted and uneven collectives)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtref.h"
#include "algo/algo.h"
#include "mp.h"

static int verify(const void *buf, int dt, int op, int n, size_t count, const char *what,
                  int rank)
{
    for (size_t i = 0; i < count; i++) {
        double got = ref_load(buf, dt, i), want = ref_expected(dt, op, n, i, 0);
        if (!ref_close_enough(dt, op, got, want)) {
            fprintf(stderr, "rank %d: %s %s/%s count %zu: element %zu is %g, expected %g\n",
                    rank, what, dt_name[dt], op_name[op], count, i, got, want);
            return 1;
        }
    }
    return 0;
}

static int fail_st(rcoll_comm_t comm, int rank, const char *what, rcoll_status_t st)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, rcoll_status_string(st),
            rcoll_comm_last_error(comm));
    return 1;
}

/* The rank counts, and from which one the matrix is lighter: three datatypes (1-byte
 * integer, 16-bit float, 8-byte float), no count 37 (n - 1 is odd or multi-element already),
 * 256-byte chunks instead of 64 (1001 elements still take 4 to 32 chunks; at 16 ranks on 2
 * cores the pipeline loops of 64-byte chunks were most of the time), broadcast from the first,
 * middle and last rank only.  Every algorithm, every op, both in-place modes and the counts
 * 0, 1, n - 1 and multi-chunk stay.  The rank-count-dependent paths (schedules, trees,
 * doubling with a remainder) do not depend on the datatype; the datatypes are covered at 1..9. */
static const int rank_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16};
#define LIGHT_RANKS 10
#define LIGHT_CHUNK "256"

static int light_dt(int dt)
{
    return dt == RCOLL_INT8 || dt == RCOLL_BFLOAT16 || dt == RCOLL_FLOAT64;
}

/* int16, uint16, bool and the bitwise ops (dt_op_narrow) reach the algorithms like the other
 * pairs (only the element size and the kernel differ, and tests/unit/test_reduce.c checks
 * every kernel), so they run where it is cheap: every algorithm at 1 and 3 ranks, and the
 * hierarchical all-reduce on 2x2 hosts.  with_narrow says whether this run includes them
 * (set by the parent before it starts the ranks). */
static int with_narrow;

static int pair_in_run(int dt, int op, int n)
{
    if (!dt_op_defined(dt, op)) return 0; /* refused: tests/coll/test_api_args.c */
    if (dt_op_narrow(dt, op)) return with_narrow;
    return n < LIGHT_RANKS || light_dt(dt);
}

static int run_matrix(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    int light = n >= LIGHT_RANKS;
    size_t counts[] = {0, 1, (size_t)(n - 1), 37, 1001};
    size_t maxc = 1001;
    char *send = malloc(maxc * 8), *recv = malloc(maxc * 8);
    char *guard = malloc(maxc * 8 + 64);
    int bad = 0;
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++)
        for (int op = 0; op < RCOLL_NUM_OPS; op++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]) && pair_in_run(dt, op, n);
                 ci++)
                for (int inplace = 0; inplace < 2 && !(light && counts[ci] == 37); inplace++) {
                    size_t count = counts[ci];
                    for (size_t i = 0; i < count; i++)
                        ref_store(send, dt, i, ref_gen(dt, op, rank, i, 0));
                    memset(recv, 0x5a, maxc * 8);
                    rcoll_status_t st;
                    if (inplace) {
                        memcpy(recv, send, count * dt_size[dt]);
                        st = rcoll_allreduce(RCOLL_IN_PLACE, recv, count, dt, op, comm);
                    } else {
                        memcpy(guard, send, maxc * 8);
                        st = rcoll_allreduce(send, recv, count, dt, op, comm);
                        if (memcmp(guard, send, maxc * 8)) {
                            fprintf(stderr, "rank %d: allreduce modified sendbuf\n", rank);
                            bad++;
                        }
                    }
                    if (st != RCOLL_OK) return fail_st(comm, rank, "allreduce", st);
                    bad += verify(recv, dt, op, n, count, inplace ? "in-place" : "out-of-place",
                                  rank);
                    /* Nothing past the end was written. */
                    for (size_t b = count * dt_size[dt]; b < maxc * 8; b++)
                        if ((unsigned char)recv[b] != 0x5a) {
                            fprintf(stderr, "rank %d: byte %zu past the result was written\n",
                                    rank, b);
                            bad++;
                            break;
                        }
                }
    /* Broadcast from every root (light: the first, middle and last). */
    for (int root = 0; root < n; root++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
            if (light && root != 0 && root != n / 2 && root != n - 1) break;
            size_t count = counts[ci];
            for (size_t i = 0; i < count; i++)
                ref_store(recv, RCOLL_INT32, i, rank == root ? (int64_t)(i * 3 + root) : -1);
            rcoll_status_t st = rcoll_bcast(recv, count, RCOLL_INT32, root, comm);
            if (st != RCOLL_OK) return fail_st(comm, rank, "bcast", st);
            for (size_t i = 0; i < count; i++)
                if (ref_load(recv, RCOLL_INT32, i) != (double)(i * 3 + root)) {
                    fprintf(stderr, "rank %d: bcast root %d count %zu: element %zu wrong\n",
                            rank, root, count, i);
                    bad++;
                    break;
                }
        }
    /* Several nonblocking operations outstanding, completed in reverse order. */
    enum { NB = 5 };
    double *nb[NB];
    rcoll_request_t req[NB];
    for (int k = 0; k < NB; k++) {
        nb[k] = malloc(700 * sizeof(double));
        for (size_t i = 0; i < 700; i++) nb[k][i] = (double)(rank + k + (int)i % 5);
        rcoll_status_t st = k == 2 ? rcoll_ibarrier(comm, &req[k])
                                   : rcoll_iallreduce(RCOLL_IN_PLACE, nb[k], 700, RCOLL_FLOAT64,
                                                      RCOLL_SUM, comm, &req[k]);
        if (st != RCOLL_OK) return fail_st(comm, rank, "iallreduce", st);
    }
    for (int k = NB - 1; k >= 0; k--) {
        rcoll_status_t st;
        if (k % 2) {
            st = rcoll_wait(&req[k]);
        } else {
            int done = 0;
            do st = rcoll_test(&req[k], &done);
            while (st == RCOLL_OK && !done);
        }
        if (st != RCOLL_OK || req[k] != NULL) return fail_st(comm, rank, "wait/test", st);
        if (k == 2) continue;
        for (size_t i = 0; i < 700; i++) {
            double want = 0;
            for (int r = 0; r < n; r++) want += r + k + (int)i % 5;
            if (nb[k][i] != want) {
                fprintf(stderr, "rank %d: nonblocking op %d element %zu wrong\n", rank, k, i);
                bad++;
                break;
            }
        }
    }
    for (int k = 0; k < NB; k++) free(nb[k]);
    rcoll_status_t st = rcoll_barrier(comm);
    if (st != RCOLL_OK) return fail_st(comm, rank, "barrier", st);
    free(send);
    free(recv);
    free(guard);
    return bad ? 2 : 0;
}

/* --- rooted and uneven collectives ------------------------------------------------------
 * gather and scatter from every root, all-gather-v, all-to-all-v and reduce-scatter-v with
 * uneven counts (zeros included, one rank holding everything, all zero), each blocking out of
 * place, blocking in place and nonblocking, over three element sizes; displacements in a
 * layout that is not rank order, with gaps that must stay untouched.  Values are exact small
 * integers, so every element is checked. */
#define VMAX 2400 /* elements per buffer, enough for every pattern at 5 ranks */
#define POISON (-7.0)

static double vval(int from, int to, size_t k) { return (double)((from * 31 + to * 17 + (int)k * 7) % 113); }

/* Counts of pattern p for rank i of n: uneven with zeros, one rank only, all zero, equal. */
static size_t vcount(int p, int i, int n)
{
    switch (p) {
    case 0: return i % 3 == 1 ? 0 : (size_t)(20 + i * 41);
    case 1: return i == n - 1 ? 300 : 0;
    case 2: return 0;
    default: return 37;
    }
}

static int vfail(int rank, const char *what, int p, int mode, int dt, size_t i, double got,
                 double want)
{
    fprintf(stderr, "rank %d: %s pattern %d mode %d %s: element %zu is %g, expected %g\n", rank,
            what, p, mode, dt_name[dt], i, got, want);
    return 1;
}

/* mode 0: blocking, out of place; 1: blocking, in place; 2: nonblocking, out of place. */
static rcoll_status_t vwait(rcoll_status_t st, rcoll_request_t *req, int mode)
{
    return mode == 2 && st == RCOLL_OK ? rcoll_wait(req) : st;
}

static int run_rooted(rcoll_comm_t comm, int rank, int n, int dt, char *a, char *b)
{
    static const size_t counts[] = {0, 1, 37, 300};
    size_t es = dt_size[dt];
    for (int root = 0; root < n; root++)
        for (size_t ci = 0; ci < 4; ci++)
            for (int mode = 0; mode < 3; mode++) {
                size_t c = counts[ci];
                int ip = mode == 1 && rank == root;
                rcoll_request_t req;
                /* gather: a = own block, b = the root's buffer */
                for (size_t i = 0; i < (size_t)n * c + 8; i++) ref_store(b, dt, i, POISON);
                for (size_t k = 0; k < c; k++)
                    ref_store(ip ? b + (size_t)root * c * es : a, dt, k, vval(rank, 0, k));
                const void *sb = ip ? RCOLL_IN_PLACE : a;
                rcoll_status_t st = mode == 2
                    ? rcoll_igather(sb, rank == root ? b : NULL, c, dt, root, comm, &req)
                    : rcoll_gather(sb, rank == root ? b : NULL, c, dt, root, comm);
                if ((st = vwait(st, &req, mode)) != RCOLL_OK) return fail_st(comm, rank, "gather", st);
                for (size_t i = 0; rank == root && i < (size_t)n * c + 8; i++) {
                    double want = i < (size_t)n * c ? vval((int)(i / c), 0, i % c) : POISON;
                    if (ref_load(b, dt, i) != want)
                        return vfail(rank, "gather", (int)ci, mode, dt, i, ref_load(b, dt, i), want);
                }
                /* scatter: b = the root's buffer, a = own block */
                for (size_t i = 0; i < (size_t)n * c; i++)
                    ref_store(b, dt, i, rank == root ? vval((int)(i / c), 1, i % c) : POISON);
                for (size_t i = 0; i < c + 8; i++) ref_store(a, dt, i, POISON);
                void *rb = ip ? (void *)RCOLL_IN_PLACE : a;
                st = mode == 2 ? rcoll_iscatter(rank == root ? b : NULL, rb, c, dt, root, comm, &req)
                               : rcoll_scatter(rank == root ? b : NULL, rb, c, dt, root, comm);
                if ((st = vwait(st, &req, mode)) != RCOLL_OK) return fail_st(comm, rank, "scatter", st);
                const char *got = ip ? b + (size_t)root * c * es : a;
                for (size_t i = 0; i < c + (ip ? 0 : 8); i++) {
                    double want = i < c ? vval(rank, 1, i) : POISON;
                    if (ref_load(got, dt, i) != want)
                        return vfail(rank, "scatter", (int)ci, mode, dt, i, ref_load(got, dt, i), want);
                }
            }
    return 0;
}

/* All-gather-v, blocks laid out in reverse rank order with a gap of 3 after each. */
static int run_allgatherv(rcoll_comm_t comm, int rank, int n, int dt, int p, char *a, char *b)
{
    size_t cnt[16], dsp[16], end = 0, es = dt_size[dt];
    for (int i = n - 1; i >= 0; i--) {
        cnt[i] = vcount(p, i, n);
        dsp[i] = end;
        end += cnt[i] + 3;
    }
    for (int mode = 0; mode < 3; mode++) {
        for (size_t i = 0; i < end; i++) ref_store(b, dt, i, POISON);
        int ip = mode == 1;
        char *mine = ip ? b + dsp[rank] * es : a;
        for (size_t k = 0; k < cnt[rank]; k++) ref_store(mine, dt, k, vval(rank, 2, k));
        rcoll_request_t req;
        const void *sb = ip ? RCOLL_IN_PLACE : a;
        rcoll_status_t st = mode == 2
            ? rcoll_iallgatherv(sb, cnt[rank], b, cnt, dsp, dt, comm, &req)
            : rcoll_allgatherv(sb, cnt[rank], b, cnt, dsp, dt, comm);
        if ((st = vwait(st, &req, mode)) != RCOLL_OK) return fail_st(comm, rank, "allgatherv", st);
        for (int r = 0; r < n; r++)
            for (size_t k = 0; k < cnt[r] + 3; k++) {
                double want = k < cnt[r] ? vval(r, 2, k) : POISON;
                if (ref_load(b, dt, dsp[r] + k) != want)
                    return vfail(rank, "allgatherv", p, mode, dt, dsp[r] + k,
                                 ref_load(b, dt, dsp[r] + k), want);
            }
    }
    return 0;
}

/* All-to-all-v: rank i sends (i + 2j) % 4 x 13 elements to j (zeros included; pattern 1: only
 * the last rank sends, pattern 2: nothing at all); send blocks packed in reverse order,
 * receive blocks in rank order with a gap of 2. */
static size_t a2a_count(int p, int from, int to, int n)
{
    if (p == 1) return from == n - 1 ? (size_t)(40 + to * 9) : 0;
    if (p == 2) return 0;
    return (size_t)((from + 2 * to) % 4) * 13;
}

static int run_alltoallv(rcoll_comm_t comm, int rank, int n, int dt, int p, char *a, char *b)
{
    size_t sc[16], sd[16], rc[16], rd[16], send_end = 0, recv_end = 0;
    for (int j = n - 1; j >= 0; j--) {
        sc[j] = a2a_count(p, rank, j, n);
        sd[j] = send_end;
        send_end += sc[j];
    }
    for (int j = 0; j < n; j++) {
        rc[j] = a2a_count(p, j, rank, n);
        rd[j] = recv_end;
        recv_end += rc[j] + 2;
    }
    for (int mode = 0; mode < 3; mode += 2) { /* no in-place form */
        for (int j = 0; j < n; j++)
            for (size_t k = 0; k < sc[j]; k++) ref_store(a, dt, sd[j] + k, vval(rank, j, k));
        for (size_t i = 0; i < recv_end; i++) ref_store(b, dt, i, POISON);
        rcoll_request_t req;
        rcoll_status_t st = mode == 2 ? rcoll_ialltoallv(a, sc, sd, b, rc, rd, dt, comm, &req)
                                      : rcoll_alltoallv(a, sc, sd, b, rc, rd, dt, comm);
        if ((st = vwait(st, &req, mode)) != RCOLL_OK) return fail_st(comm, rank, "alltoallv", st);
        for (int j = 0; j < n; j++)
            for (size_t k = 0; k < rc[j] + 2; k++) {
                double want = k < rc[j] ? vval(j, rank, k) : POISON;
                if (ref_load(b, dt, rd[j] + k) != want)
                    return vfail(rank, "alltoallv", p, mode, dt, rd[j] + k,
                                 ref_load(b, dt, rd[j] + k), want);
            }
    }
    return 0;
}

/* Reduce-scatter-v: every op; rank r's input element i (of the concatenation) is
 * ref_gen(dt, op, r, i, 0), so block r's result is ref_expected() at its offset (the pairs
 * the library defines only: no bitwise op on floats, no average of bools). */
static int run_reduce_scatterv(rcoll_comm_t comm, int rank, int n, int dt, int p, char *a,
                               char *b)
{
    size_t cnt[16], total = 0, before = 0, es = dt_size[dt];
    for (int i = 0; i < n; i++) {
        cnt[i] = vcount(p, i, n);
        if (i < rank) before += cnt[i];
        total += cnt[i];
    }
    for (int op = 0; op < RCOLL_NUM_OPS; op++)
        for (int mode = 0; mode < 3 && dt_op_defined(dt, op); mode++) {
            int ip = mode == 1;
            char *in = ip ? b : a;
            for (size_t i = 0; i < total; i++) ref_store(in, dt, i, (double)ref_gen(dt, op, rank, i, 0));
            if (!ip)
                for (size_t i = 0; i < cnt[rank] + 4; i++) ref_store(b, dt, i, POISON);
            rcoll_request_t req;
            const void *sb = ip ? RCOLL_IN_PLACE : a;
            rcoll_status_t st = mode == 2
                ? rcoll_ireduce_scatterv(sb, b, cnt, dt, op, comm, &req)
                : rcoll_reduce_scatterv(sb, b, cnt, dt, op, comm);
            if ((st = vwait(st, &req, mode)) != RCOLL_OK)
                return fail_st(comm, rank, "reduce_scatterv", st);
            for (size_t k = 0; k < cnt[rank] + (ip ? 0 : 4); k++) {
                double got = ref_load(b, dt, k);
                if (k >= cnt[rank] ? got != POISON
                                   : !ref_close_enough(dt, op, got,
                                                       ref_expected(dt, op, n, before + k, 0)))
                    return vfail(rank, op_name[op], p, mode, dt, k, got,
                                 k >= cnt[rank] ? POISON
                                                : ref_expected(dt, op, n, before + k, 0));
            }
            (void)es;
        }
    return 0;
}

static int run_vmatrix(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    static const int dts[] = {RCOLL_INT8, RCOLL_FLOAT32, RCOLL_FLOAT64};
    char *a = malloc(VMAX * 8), *b = malloc(VMAX * 8);
    int bad = 0;
    for (int d = 0; d < 3 && !bad; d++) {
        bad = run_rooted(comm, rank, n, dts[d], a, b);
        for (int p = 0; p < 4 && !bad; p++) {
            bad = run_allgatherv(comm, rank, n, dts[d], p, a, b);
            if (!bad) bad = run_alltoallv(comm, rank, n, dts[d], p, a, b);
            if (!bad) bad = run_reduce_scatterv(comm, rank, n, dts[d], p, a, b);
        }
    }
    /* several outstanding at once, waited in reverse order */
    size_t cnt[16], dsp[16], total = 0;
    for (int i = 0; i < n; i++) {
        cnt[i] = vcount(0, i, n);
        dsp[i] = total;
        total += cnt[i];
    }
    int32_t *g = calloc(VMAX, 4), *s = calloc(VMAX, 4), *x = calloc(VMAX, 4);
    for (size_t i = 0; i < total; i++) x[i] = (int32_t)(rank + i);
    for (size_t k = 0; k < cnt[rank]; k++) s[k] = rank * 1000 + (int32_t)k;
    rcoll_request_t rq[3];
    rcoll_status_t st = rcoll_iallgatherv(s, cnt[rank], g, cnt, dsp, RCOLL_INT32, comm, &rq[0]);
    if (st == RCOLL_OK) st = rcoll_ireduce_scatterv(RCOLL_IN_PLACE, x, cnt, RCOLL_INT32, RCOLL_SUM, comm, &rq[1]);
    if (st == RCOLL_OK) st = rcoll_ibcast(s + VMAX / 2, 5, RCOLL_INT32, n - 1, comm, &rq[2]);
    for (int k = 2; k >= 0 && st == RCOLL_OK; k--) st = rcoll_wait(&rq[k]);
    if (!bad && st != RCOLL_OK) bad = fail_st(comm, rank, "outstanding v-collectives", st);
    for (int r = 0; r < n && !bad; r++)
        for (size_t k = 0; k < cnt[r]; k++)
            if (g[dsp[r] + k] != r * 1000 + (int32_t)k) bad = vfail(rank, "iallgatherv", 0, 2, RCOLL_INT32, dsp[r] + k, g[dsp[r] + k], r * 1000 + (double)k);
    for (size_t k = 0; k < cnt[rank] && !bad; k++) {
        int32_t want = 0;
        for (int r = 0; r < n; r++) want += r + (int32_t)(dsp[rank] + k);
        if (x[k] != want) bad = vfail(rank, "ireduce_scatterv", 0, 2, RCOLL_INT32, k, x[k], want);
    }
    free(g);
    free(s);
    free(x);
    free(a);
    free(b);
    return bad ? 2 : 0;
}

/* --- which all-reduce algorithm ran ------------------------------------------------------
 * The library logs its choice at INFO (subsystem ALGO) once per size class and communicator:
 * "all-reduce of <bytes> B on <n> ranks: <algo> (...)".  A forced RCOLL_ALGO that does not
 * apply falls back to the cost model, so without this a fallback would pass as the forced
 * algorithm.  Every rank logs into one file (RCOLL_DEBUG_FILE without %p: the parent opens it
 * at its first rcoll call and the ranks it forks later inherit that stream), emptied before
 * each run; the other subsystems' lines go there too, and its warnings are copied to stderr.
 * Lines before a rank's "INIT rank R/N on" line (its communicator is ready) are its setup's
 * own all-reduces, chosen before the host segment exists: they do not count. */
static char algo_log[256];

static void algo_log_reset(void)
{
    FILE *f = fopen(algo_log, "w"); /* truncates; writers append (O_APPEND) */
    if (f) fclose(f);
}

/* After a run of n ranks: every choice line names want (want_not: none names it), every
 * rank logged one, and each says n ranks.  Returns the number of lines (0 for one rank:
 * a one-rank all-reduce is a copy, nothing is chosen). */
static int algo_log_check(const char *want, int want_not, int n, const char *run)
{
    FILE *f = fopen(algo_log, "r");
    char line[1200];
    unsigned char seen[64] = {0}, ready[64] = {0};
    int lines = 0, wrong = 0, ranks = 0;
    CHECK(f != NULL, "%s: cannot read the log %s", run, algo_log);
    while (f && fgets(line, sizeof(line), f)) {
        if (strstr(line, " WARN ")) fputs(line, stderr);
        const char *m = strstr(line, " ALGO all-reduce of ");
        int rank = -1, on = 0;
        char algo[32] = "";
        const char *br = strchr(line, '[');
        if (!br || sscanf(br, "[%d]", &rank) != 1 || rank < 0 || rank >= 64) continue;
        const char *init = strstr(line, " INIT rank ");
        int r_of, n_of;
        if (init && sscanf(init, " INIT rank %d/%d on", &r_of, &n_of) == 2) ready[rank] = 1;
        if (!m || !ready[rank]) continue;
        if (sscanf(m, " ALGO all-reduce of %*[0-9] B on %d ranks: %31[a-z_]", &on, algo) != 2) {
            CHECK(0, "%s: unparsable choice line: %s", run, line);
            continue;
        }
        lines++;
        if ((strcmp(algo, want) != 0) != want_not || on != n) {
            if (!wrong++)
                fprintf(stderr, "%s: rank %d ran %s on %d ranks: %s", run, rank, algo, on, line);
        }
        if (!seen[rank]) seen[rank] = 1, ranks++;
    }
    if (f) fclose(f);
    CHECK(wrong == 0, "%s: %d all-reduces chose another algorithm than %s%s", run, wrong,
          want_not ? "anything but " : "", want);
    CHECK(n == 1 ? lines == 0 : ranks == n, "%s: %d of %d ranks logged their choice", run, ranks,
          n == 1 ? 0 : n);
    return lines;
}

/* One rank of a raw run: its own communicator (from its environment), the matrix. */
static int init_and_run(const rcoll_unique_id_t *id, int rank, int n)
{
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_rank(n, id, rank, &comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    int bad = run_matrix(comm, rank, n, NULL);
    rcoll_comm_destroy(comm);
    return bad;
}

/* Mixed transports: odd ranks turn shared memory off for themselves (RCOLL_SHM_DISABLE=1
 * in their own environment only), so they reach everyone over TCP while the even ranks
 * use shared memory among themselves; settings that differ between ranks must not make
 * them disagree on what to run. */
static int mixed_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    if (rank % 2) setenv("RCOLL_SHM_DISABLE", "1", 1);
    return init_and_run(id, rank, n);
}

/* Several "hosts" on this machine (RCOLL_HOST_ID per rank, hosts interleaved in rank order:
 * rank r is on host r % nhosts): local peers over shared memory, others over TCP, the ring
 * reordered by host, and the hierarchical all-reduce where hosts have equal rank counts. */
static int hosts_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    char host[32];
    snprintf(host, sizeof(host), "fakehost%d", rank % *(int *)arg);
    setenv("RCOLL_HOST_ID", host, 1);
    return init_and_run(id, rank, n);
}

static void run_hosts(const char *only)
{
    /* ranks x hosts: 2x2 and 3x2 (equal: hier applies), 3 on 2 (unequal: it does not) */
    static const int layouts[][2] = {{4, 2}, {6, 2}, {6, 3}, {3, 2}};
    /* the table's algorithms that do not need one host segment (algo/algo.h), hier first */
    const char *algos[RCOLL_ALG_COUNT];
    int nalg = 0;
    algos[nalg++] = rcoll_alg_names[RCOLL_ALG_HIER];
    for (int a = 0; a < RCOLL_ALG_COUNT; a++)
        if (a != RCOLL_ALG_HIER && !rcoll_algos[a]->uses_hostseg) algos[nalg++] = rcoll_alg_names[a];
    setenv("RCOLL_TRANSPORT", only ? only : "auto", 1);
    for (int a = 0; a < nalg; a++) {
        setenv("RCOLL_ALGO", algos[a], 1);
        for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
            int n = layouts[l][0], hosts = layouts[l][1];
            /* hier needs equal ranks per host: elsewhere the model must choose another */
            int unequal = n % hosts != 0, want_not = !strcmp(algos[a], "hier") && unequal;
            char what[96];
            snprintf(what, sizeof(what), "%s, %d ranks on %d hosts", algos[a], n, hosts);
            mp_result_t res;
            long failed0 = check_failed;
            algo_log_reset();
            with_narrow = !strcmp(algos[a], "hier") && n == 4 && hosts == 2;
            int bad = mp_run_raw(n, hosts_fn, &hosts, 300, &res);
            CHECK(bad == 0, "matrix (%s) with %d ranks on %d hosts: %d ranks failed", algos[a],
                  n, hosts, bad);
            algo_log_check(algos[a], want_not, n, what);
            printf("%s, %d ranks on %d interleaved hosts: %s in %.1f s (%s%s ran)%s\n", algos[a],
                   n, hosts, check_failed > failed0 ? "FAILED" : "ok", res.seconds,
                   want_not ? "not " : "", algos[a],
                   with_narrow ? " (with int16, uint16, bool, bitwise ops)" : "");
            fflush(stdout);
        }
    }
    setenv("RCOLL_ALGO", "auto", 1);
}

int main(int argc, char **argv)
{
    /* TEST_MAX_RANKS: the minimal build's smaller run (tools/dev.sh) */
    const char *env_max = getenv("TEST_MAX_RANKS");
    int maxn = argc > 1 ? atoi(argv[1]) : env_max ? atoi(env_max) : 16;
    int chunk_given = getenv("RCOLL_CHUNK_SIZE") != NULL;
    setenv("RCOLL_CHUNK_SIZE", "64", 0);
    setenv("RCOLL_TIMEOUT", "60", 0);
    snprintf(algo_log, sizeof(algo_log), "%s/rcoll_matrix_algo.%d.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    algo_log_reset();
    setenv("RCOLL_DEBUG", "INFO", 1);
    setenv("RCOLL_DEBUG_SUBSYS", "ALL", 1);
    setenv("RCOLL_DEBUG_FILE", algo_log, 1);
    /* Every all-reduce algorithm of the table (algo/algo.h: a new one runs here without an
     * edit) on every rank count, but hier, which needs several hosts (run_hosts below). */
    const rcoll_algo_table_t *tb = &rcoll_algo_tables[RCOLL_COLL_ALLREDUCE];
    /* Both transports between these local ranks: the schedule algorithms alternate between
     * TCP and shared memory; the host-segment ones need shared memory (the other
     * collectives' tests run over each transport as well). */
    const char *transports[RCOLL_ALG_COUNT];
    for (int a = 0, flip = 0; a < tb->count; a++)
        transports[a] = tb->ops[a]->uses_hostseg ? "auto" : (flip++ % 2 ? "auto" : "tcp");
    /* MATRIX_TRANSPORT=verbs runs everything over that one transport (the rdma suite) */
    const char *only = getenv("MATRIX_TRANSPORT");
    for (int a = 0; only && a < tb->count; a++) transports[a] = only;
    setenv("RCOLL_TWOSHOT_SLOT", "4096", 0);
    /* MATRIX_V_ONLY=1: the rooted and uneven collectives alone */
    int v_only = getenv("MATRIX_V_ONLY") != NULL;
    for (int a = 0; a < tb->count && !v_only; a++) {
        const char *name = tb->names[a];
        if (a == RCOLL_ALG_HIER) continue; /* several hosts: run_hosts */
        /* the host-segment algorithms need every peer on shared memory: over one other
         * transport they cannot run, and the library would run another algorithm */
        if (only && tb->ops[a]->uses_hostseg) {
            check_skip("%s over %s: needs every peer on shared memory", name, only);
            continue;
        }
        setenv("RCOLL_ALGO", name, 1);
        setenv("RCOLL_TRANSPORT", transports[a], 1);
        for (size_t k = 0; k < sizeof(rank_counts) / sizeof(rank_counts[0]); k++) {
            int n = rank_counts[k];
            if (n > maxn) break;
            char what[64];
            snprintf(what, sizeof(what), "%s over %s, %d ranks", name, transports[a], n);
            mp_result_t res;
            long failed0 = check_failed;
            if (!chunk_given) setenv("RCOLL_CHUNK_SIZE", n >= LIGHT_RANKS ? LIGHT_CHUNK : "64", 1);
            algo_log_reset();
            with_narrow = n == 1 || n == 3;
            int bad = mp_run(n, run_matrix, NULL, 300, &res);
            CHECK(bad == 0, "matrix (%s) with %d ranks: %d ranks failed", name, n, bad);
            int chosen = algo_log_check(name, 0, n, what);
            printf("%s: %s in %.1f s%s%s%s\n", what, check_failed > failed0 ? "FAILED" : "ok",
                   res.seconds, n >= LIGHT_RANKS ? " (light)" : "",
                   n == 1 ? " (one rank: a copy)" : chosen ? "" : " (no algorithm logged)",
                   with_narrow ? " (with int16, uint16, bool, bitwise ops)" : "");
            fflush(stdout);
        }
    }
    setenv("RCOLL_ALGO", "auto", 1);
    setenv("RCOLL_TRANSPORT", "auto", 1);
    if (!chunk_given) setenv("RCOLL_CHUNK_SIZE", "64", 1);
    for (int n = 3; n <= 4 && n <= maxn && !only && !v_only; n++) {
        mp_result_t res;
        long failed0 = check_failed;
        algo_log_reset();
        with_narrow = 0;
        int bad = mp_run_raw(n, mixed_fn, NULL, 300, &res);
        CHECK(bad == 0, "matrix, mixed shm/tcp peers, %d ranks: %d ranks failed", n, bad);
        algo_log_check("", 1, n, "auto over mixed shm/tcp"); /* any algorithm, every rank */
        printf("auto over mixed shm/tcp, %d ranks: %s in %.1f s\n", n,
               check_failed > failed0 ? "FAILED" : "ok", res.seconds);
        fflush(stdout);
    }
    if (maxn >= 6 && !v_only) run_hosts(only);
    /* The rooted and uneven collectives over shared memory and TCP (or the one transport). */
    for (int t = 0; t < 2 && !(only && t); t++) {
        const char *tp = only ? only : t ? "tcp" : "shm";
        setenv("RCOLL_TRANSPORT", only ? only : t ? "tcp" : "auto", 1);
        for (int n = 1; n <= 5 && n <= maxn; n++) {
            mp_result_t res;
            long failed0 = check_failed;
            int bad = mp_run(n, run_vmatrix, NULL, 300, &res);
            CHECK(bad == 0, "gather/scatter/v-collectives over %s with %d ranks: %d ranks "
                  "failed", tp, n, bad);
            printf("gather, scatter, allgatherv, alltoallv, reduce_scatterv over %s, %d ranks: "
                   "%s in %.1f s\n", tp, n, check_failed > failed0 ? "FAILED" : "ok",
                   res.seconds);
            fflush(stdout);
        }
    }
    setenv("RCOLL_TRANSPORT", "auto", 1);
    unlink(algo_log);
    return check_summary();
}
