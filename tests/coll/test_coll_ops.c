/*
 * test_coll_ops.c - the collective matrix for every operation other than all-reduce, over
 * real processes and TCP: reduce, allgather, reduce_scatter, alltoall, bcast, nonblocking
 * mixes, groups of send/recv, split/dup and bad input, for ranks 1..9 with a 64-byte chunk
 * knob so the larger counts take many pipeline loops.  Expected values come from a reference
 * computed here (integers wrap modulo 2^bits, float16/bfloat16 encoded here), never from the
 * library's reduction code.  Every output has guard bytes behind it; send buffers are checked
 * unmodified.  Results per operation land in a shared board so the parent reports each part.
 * Usage: test_coll_ops [max_ranks [min_ranks]]; RCOLL_TEST_PARTS=reduce,groups,... selects;
 * TEST_MAX_RANKS=n is max_ranks when no argument gives it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "algo/algo.h"
#include "core/introspect.h"
#include "dtref.h"
#include "mp.h"

#define GUARD 64
#define GUARD_BYTE 0x5a

/* --- the shared board: per part and rank, state, failures and the first message ------- */

enum { P_REDUCE, P_ALLGATHER, P_REDUCE_SCATTER, P_ALLTOALL, P_BCAST, P_NONBLOCKING, P_GROUPS,
       P_SPLIT, P_BADINPUT, NPART };
static const char *const part_name[NPART] = {"reduce", "allgather", "reduce_scatter",
                                             "alltoall", "bcast", "nonblocking", "groups",
                                             "split_dup", "bad_input"};

typedef struct {
    int state[NPART][64]; /* 0 not reached, 1 running, 2 finished, 3 skipped */
    int fails[NPART][64];
    int checks[NPART][64];
    char first[NPART][64][256];
} board_t;

static board_t *board;
static int part_on[NPART];
static int cur, me, nr; /* in a rank process: current part, rank, size */
static uint64_t salt;   /* advances with every call, identically on every rank */

static void bad(const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    int k = board->fails[cur][me]++;
    if (k == 0) snprintf(board->first[cur][me], sizeof(board->first[cur][me]), "%s", text);
    if (k < 4) fprintf(stderr, "n=%d rank %d [%s]: %s\n", nr, me, part_name[cur], text);
}

static void good(void) { board->checks[cur][me]++; }

/* Records a failed call; returns 1 when st is RCOLL_OK. */
static int ok_call(rcoll_comm_t comm, rcoll_status_t st, const char *what)
{
    if (st == RCOLL_OK) return 1;
    bad("%s: %s: %s", what, rcoll_status_string(st), rcoll_comm_last_error(comm));
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* rcoll_test until done, with a deadline so a lost completion fails instead of hanging. */
static rcoll_status_t test_until_done(rcoll_request_t *req, double limit_s)
{
    double t0 = now_s();
    int done = 0;
    rcoll_status_t st;
    do st = rcoll_test(req, &done);
    while (st == RCOLL_OK && !done && now_s() - t0 < limit_s);
    if (st == RCOLL_OK && !done) return RCOLL_ERR_TIMEOUT;
    return st;
}

/* --- datatypes (sizes, names, float16/bfloat16, typed access: tests/common/dtref.h) -- */

/* Integer views of 64 raw bits in the type's width. */
static int64_t sext(int dt, uint64_t u)
{
    switch (dt_size[dt]) {
    case 1: return (int8_t)(uint8_t)u;
    case 2: return (int16_t)(uint16_t)u;
    case 4: return (int32_t)(uint32_t)u;
    default: return (int64_t)u;
    }
}

static uint64_t zext(int dt, uint64_t u)
{
    switch (dt_size[dt]) {
    case 1: return (uint8_t)u;
    case 2: return (uint16_t)u;
    case 4: return (uint32_t)u;
    default: return u;
    }
}

/* --- inputs and the reference reduction ---------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Raw bits of element i of rank r's input in call `s`. */
static uint64_t bits(uint64_t s, int r, size_t i)
{
    return mix(s * 0x100000001b3ull ^ ((uint64_t)r << 40) ^ (uint64_t)i);
}

/* Float inputs are small integers so that every result except AVG is exact in every type. */
static double fval(int op, uint64_t h)
{
    static const double pm[4] = {-2, -1, 1, 2};
    switch (op) {
    case RCOLL_PROD: return pm[h % 4];             /* |product| <= 2^9 */
    case RCOLL_MIN:
    case RCOLL_MAX: return (double)(int)(h % 241) - 120;
    default: return (double)(int)(h % 17) - 8;     /* sums within +-72 */
    }
}

/* Bool inputs: false half the time, else 1 or any other non-zero byte. */
static uint8_t bval(uint64_t h)
{
    return (h & 2) ? 0 : (h & 1) ? 1 : (uint8_t)((h >> 8) | 2);
}

/* Integer inputs are full-width random bits: sums and products wrap. */
static void put_input(void *buf, int dt, int op, uint64_t s, int r, size_t i, size_t at)
{
    uint64_t h = bits(s, r, i);
    if (dt_is_float(dt)) ref_store(buf, dt, at, fval(op, h));
    else if (dt == RCOLL_BOOL) ref_store_bits(buf, dt, at, bval(h));
    else ref_store_bits(buf, dt, at, h);
}

/* Checks element `at` of buf against op over ranks 0..n-1 of input index i. */
static int check_reduced(const void *buf, int dt, int op, uint64_t s, int n, size_t i,
                         size_t at)
{
    if (dt_is_float(dt)) {
        double acc = fval(op, bits(s, 0, i));
        for (int r = 1; r < n; r++) {
            double v = fval(op, bits(s, r, i));
            if (op == RCOLL_PROD) acc *= v;
            else if (op == RCOLL_MIN) acc = v < acc ? v : acc;
            else if (op == RCOLL_MAX) acc = v > acc ? v : acc;
            else acc += v;
        }
        double got = ref_load(buf, dt, at);
        if (op != RCOLL_AVG) return got == acc;
        double want = acc / n;
        double rel = dt == RCOLL_FLOAT16 ? 1.0 / 512 : dt == RCOLL_BFLOAT16 ? 1.0 / 64
                   : dt == RCOLL_FLOAT32 ? 1e-6 : 1e-12;
        return fabs(got - want) <= rel * (fabs(want) > 1 ? fabs(want) : 1);
    }
    if (dt == RCOLL_BOOL) { /* or (sum, max, bor), and (prod, min, band), xor; written 0/1 */
        int any = 0, all = 1, odd = 0;
        for (int r = 0; r < n; r++) {
            int t = bval(bits(s, r, i)) != 0;
            any |= t, all &= t, odd ^= t;
        }
        int want = op == RCOLL_BXOR ? odd
                 : op == RCOLL_PROD || op == RCOLL_MIN || op == RCOLL_BAND ? all : any;
        return ((const unsigned char *)buf)[at] == want;
    }
    uint64_t acc = bits(s, 0, i);
    for (int r = 1; r < n; r++) {
        uint64_t v = bits(s, r, i);
        int lt = dt_is_signed(dt) ? sext(dt, v) < sext(dt, acc) : zext(dt, v) < zext(dt, acc);
        int gt = dt_is_signed(dt) ? sext(dt, v) > sext(dt, acc) : zext(dt, v) > zext(dt, acc);
        if (op == RCOLL_PROD) acc *= v;
        else if (op == RCOLL_MIN) acc = lt ? v : acc;
        else if (op == RCOLL_MAX) acc = gt ? v : acc;
        else if (op == RCOLL_BAND) acc &= v;
        else if (op == RCOLL_BOR) acc |= v;
        else if (op == RCOLL_BXOR) acc ^= v;
        else acc += v; /* SUM and AVG: modulo 2^64, hence modulo 2^bits */
    }
    if (op == RCOLL_AVG) /* the sum in the element type, then C division */
        acc = dt_is_signed(dt) ? (uint64_t)(sext(dt, acc) / n) : zext(dt, acc) / (uint64_t)n;
    unsigned char want[8];
    ref_store_bits(want, dt, 0, acc);
    return memcmp((const char *)buf + at * dt_size[dt], want, dt_size[dt]) == 0;
}

/* --- buffers with guards --------------------------------------------------------------- */

static char *galloc(size_t bytes)
{
    char *p = malloc(bytes + GUARD);
    memset(p, GUARD_BYTE, bytes + GUARD);
    return p;
}

static int guard_ok(const char *p, size_t bytes, const char *what)
{
    for (size_t b = bytes; b < bytes + GUARD; b++)
        if ((unsigned char)p[b] != GUARD_BYTE) {
            bad("%s: byte %zu past the %zu-byte output was written", what, b - bytes, bytes);
            return 0;
        }
    return 1;
}

static int untouched(const char *p, size_t bytes, const char *what)
{
    for (size_t b = 0; b < bytes + GUARD; b++)
        if ((unsigned char)p[b] != GUARD_BYTE) {
            bad("%s: byte %zu of a buffer the call must not use was written", what, b);
            return 0;
        }
    return 1;
}

/* Raw data for the data-movement operations: element i of block `blk` from rank r. */
static void put_raw(void *buf, int dt, uint64_t s, int r, int blk, size_t i, size_t at)
{
    ref_store_bits(buf, dt, at, bits(s, r * 64 + blk, i));
}

static int raw_ok(const void *buf, int dt, uint64_t s, int r, int blk, size_t i, size_t at)
{
    unsigned char want[8];
    put_raw(want, dt, s, r, blk, i, 0);
    return memcmp((const char *)buf + at * dt_size[dt], want, dt_size[dt]) == 0;
}

static size_t counts[5];
#define NCOUNTS 5

/* The parts that only move data (allgather, alltoall, bcast) depend on the element size
 * alone; the datatypes from RCOLL_INT16 on (int16, uint16, bool) have the sizes of half and
 * int8, so those parts run the datatypes before it. */
#define MOVE_DATATYPES RCOLL_INT16

/* --- reduce ---------------------------------------------------------------------------- */

/* One rcoll_reduce; mode 0 out-of-place, 1 RCOLL_IN_PLACE on the root, 2 sendbuf == recvbuf
 * on the root.  Non-roots pass recvbuf NULL on odd calls, a guarded buffer otherwise. */
static void one_reduce(rcoll_comm_t comm, int dt, int op, size_t count, int root, int mode)
{
    uint64_t s = ++salt;
    size_t bytes = count * dt_size[dt];
    char *send = galloc(bytes), *keep = galloc(bytes), *recv = galloc(bytes);
    for (size_t i = 0; i < count; i++) put_input(send, dt, op, s, me, i, i);
    memcpy(keep, send, bytes);
    int inplace = me == root && mode != 0;
    if (inplace) memcpy(recv, send, bytes);
    const void *sb = inplace ? (mode == 1 ? RCOLL_IN_PLACE : recv) : send;
    void *rb = me == root ? recv : (s & 1) ? NULL : recv;
    if (count == 0 && mode == 0 && (s & 2)) sb = rb = NULL; /* count 0 takes NULL buffers */
    char what[96];
    snprintf(what, sizeof(what), "reduce %s/%s count %zu root %d %s", dt_name[dt], op_name[op], count,
             root, mode == 0 ? "out-of-place" : mode == 1 ? "IN_PLACE" : "send==recv");
    rcoll_status_t st = rcoll_reduce(sb, rb, count, dt, op, root, comm);
    if (ok_call(comm, st, what)) {
        int ok = 1;
        if (me == root) {
            for (size_t i = 0; i < count && ok; i++)
                if (!check_reduced(recv, dt, op, s, nr, i, i)) {
                    bad("%s: element %zu wrong", what, i);
                    ok = 0;
                }
            ok &= guard_ok(recv, bytes, what);
        } else if (rb) {
            ok &= untouched(recv, bytes, what);
        }
        if (!inplace && memcmp(send, keep, bytes + GUARD)) {
            bad("%s: sendbuf modified", what);
            ok = 0;
        }
        if (ok) good();
    }
    free(send), free(keep), free(recv);
}

static void part_reduce(rcoll_comm_t comm)
{
    /* Every root, the full count set, every form: int32 and float32 sum. */
    static const int dts[2] = {RCOLL_INT32, RCOLL_FLOAT32};
    for (int root = 0; root < nr; root++)
        for (int d = 0; d < 2; d++)
            for (int c = 0; c < NCOUNTS; c++)
                for (int mode = 0; mode < 3; mode++)
                    one_reduce(comm, dts[d], RCOLL_SUM, counts[c], root, mode);
    /* Every datatype x op x count at every root, the form rotating; the pairs of int16,
     * uint16, bool and the bitwise ops (dt_op_narrow) at one root per count, rotating. */
    int k = 0;
    for (int root = 0; root < nr; root++)
        for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++)
            for (int op = 0; op < RCOLL_NUM_OPS; op++)
                for (int c = 0; c < NCOUNTS && dt_op_defined(dt, op); c++, k++) {
                    int one_root = ((dt * RCOLL_NUM_OPS + op) * NCOUNTS + c) % nr;
                    if (!dt_op_narrow(dt, op) || root == one_root)
                        one_reduce(comm, dt, op, counts[c], root, k % 3);
                }
}

/* --- allgather ------------------------------------------------------------------------- */

/* mode 0 out-of-place, 1 RCOLL_IN_PLACE, 2 sendbuf = recvbuf + rank x count. */
static void one_allgather(rcoll_comm_t comm, int dt, size_t count, int mode)
{
    uint64_t s = ++salt;
    size_t bytes = count * dt_size[dt], total = bytes * (size_t)nr;
    char *send = galloc(bytes), *keep = galloc(bytes), *recv = galloc(total);
    for (size_t i = 0; i < count; i++) put_raw(send, dt, s, me, 0, i, i);
    memcpy(keep, send, bytes + GUARD);
    const void *sb = send;
    if (mode) {
        memcpy(recv + (size_t)me * bytes, send, bytes);
        sb = mode == 1 ? RCOLL_IN_PLACE : recv + (size_t)me * bytes;
    }
    char what[96];
    snprintf(what, sizeof(what), "allgather %s count %zu %s", dt_name[dt], count,
             mode == 0 ? "out-of-place" : mode == 1 ? "IN_PLACE" : "send=recv+rank*count");
    rcoll_status_t st = rcoll_allgather(sb, recv, count, dt, comm);
    if (ok_call(comm, st, what)) {
        int ok = 1;
        for (int r = 0; r < nr && ok; r++)
            for (size_t i = 0; i < count && ok; i++)
                if (!raw_ok(recv, dt, s, r, 0, i, (size_t)r * count + i)) {
                    bad("%s: block %d element %zu wrong", what, r, i);
                    ok = 0;
                }
        ok &= guard_ok(recv, total, what);
        if (memcmp(send, keep, bytes + GUARD)) {
            bad("%s: sendbuf modified", what);
            ok = 0;
        }
        if (ok) good();
    }
    free(send), free(keep), free(recv);
}

/* --- every algorithm of a collective's table ------------------------------------------
 * For each algorithm that rcoll_algo_tables lists for the collective (a new one is tested
 * without an edit here): a communicator over the same ranks with RCOLL_ALGO_<COLL>=name,
 * checked to run it (introspect.h) where it applies to this many ranks, and the part's
 * checks on it.  Where it does not apply the library runs the model's choice; that run is
 * still checked, and said. */
static void each_algorithm(rcoll_comm_t comm, rcoll_coll_t coll, void (*body)(rcoll_comm_t))
{
    const rcoll_algo_table_t *tb = &rcoll_algo_tables[coll];
    for (int a = 0; a < tb->count; a++) {
        rcoll_unique_id_t id;
        if (me == 0 && rcoll_get_unique_id(&id) != RCOLL_OK) bad("%s: no unique id", tb->knob);
        if (!ok_call(comm, rcoll_bcast(&id, sizeof(id), RCOLL_UINT8, 0, comm), "id bcast"))
            return;
        setenv(tb->knob, tb->names[a], 1);
        rcoll_comm_t c;
        rcoll_status_t st = rcoll_comm_init_rank(nr, &id, me, &c);
        unsetenv(tb->knob);
        if (st != RCOLL_OK) {
            bad("%s=%s: rcoll_comm_init_rank: %s", tb->knob, tb->names[a],
                rcoll_last_init_error());
            return;
        }
        int ran = rcoll_comm_algo_choice(c, coll, 4096);
        if (nr > 1 && ran != a && me == 0)
            printf("    (%d ranks: %s=%s does not apply, %s ran)\n", nr, tb->knob, tb->names[a],
                   ran >= 0 ? tb->names[ran] : "?");
        else if (nr > 1 && ran == a)
            good();
        body(c);
        rcoll_comm_destroy(c);
    }
}

static void allgather_all(rcoll_comm_t comm)
{
    for (int dt = 0; dt < MOVE_DATATYPES; dt++)
        for (int c = 0; c < NCOUNTS; c++)
            for (int mode = 0; mode < 3; mode++) one_allgather(comm, dt, counts[c], mode);
}

static void part_allgather(rcoll_comm_t comm)
{
    each_algorithm(comm, RCOLL_COLL_ALLGATHER, allgather_all);
}

/* --- reduce_scatter -------------------------------------------------------------------- */

/* mode 0 out-of-place, 1 RCOLL_IN_PLACE (result at the start), 2 recvbuf = sendbuf + rank x
 * recvcount, 3 sendbuf == recvbuf (as IN_PLACE). */
static void one_reduce_scatter(rcoll_comm_t comm, int dt, int op, size_t rc, int mode)
{
    uint64_t s = ++salt;
    size_t bytes = rc * dt_size[dt], total = bytes * (size_t)nr;
    char *send = galloc(total), *keep = galloc(total), *recv = galloc(bytes);
    for (size_t g = 0; g < rc * (size_t)nr; g++) put_input(send, dt, op, s, me, g, g);
    memcpy(keep, send, total + GUARD);
    const void *sb = send;
    void *rb = recv;
    char *res = recv;
    size_t res_bytes = bytes; /* guard after res_bytes of res */
    if (mode == 1 || mode == 3) {
        sb = mode == 1 ? RCOLL_IN_PLACE : send;
        rb = send;
        res = send;
        res_bytes = total;
    } else if (mode == 2) {
        rb = send + (size_t)me * bytes;
        res = send;
        res_bytes = total;
    }
    char what[112];
    snprintf(what, sizeof(what), "reduce_scatter %s/%s recvcount %zu %s", dt_name[dt], op_name[op], rc,
             mode == 0 ? "out-of-place" : mode == 1 ? "IN_PLACE" : mode == 2
             ? "recv=send+rank*recvcount" : "send==recv");
    rcoll_status_t st = rcoll_reduce_scatter(sb, rb, rc, dt, op, comm);
    if (ok_call(comm, st, what)) {
        int ok = 1;
        size_t at0 = mode == 2 ? (size_t)me * rc : 0;
        for (size_t i = 0; i < rc && ok; i++)
            if (!check_reduced(res, dt, op, s, nr, (size_t)me * rc + i, at0 + i)) {
                bad("%s: element %zu of the result wrong", what, i);
                ok = 0;
            }
        ok &= guard_ok(res, res_bytes, what);
        if (mode == 0) {
            ok &= guard_ok(recv, bytes, what);
            if (memcmp(send, keep, total + GUARD)) {
                bad("%s: sendbuf modified", what);
                ok = 0;
            }
        }
        if (ok) good();
    }
    free(send), free(keep), free(recv);
}

static void part_reduce_scatter(rcoll_comm_t comm)
{
    /* Every form; the pairs of dt_op_narrow one form per call, rotating. */
    int k = 0;
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++)
        for (int op = 0; op < RCOLL_NUM_OPS; op++)
            for (int c = 0; c < NCOUNTS && dt_op_defined(dt, op); c++, k++)
                for (int mode = 0; mode < 4; mode++)
                    if (!dt_op_narrow(dt, op) || mode == k % 4)
                        one_reduce_scatter(comm, dt, op, counts[c], mode);
}

/* --- alltoall -------------------------------------------------------------------------- */

static void one_alltoall(rcoll_comm_t comm, int dt, size_t count)
{
    uint64_t s = ++salt;
    size_t total = count * dt_size[dt] * (size_t)nr;
    char *send = galloc(total), *keep = galloc(total), *recv = galloc(total);
    for (int j = 0; j < nr; j++)
        for (size_t i = 0; i < count; i++) put_raw(send, dt, s, me, j, i, (size_t)j * count + i);
    memcpy(keep, send, total + GUARD);
    char what[80];
    snprintf(what, sizeof(what), "alltoall %s count %zu", dt_name[dt], count);
    rcoll_status_t st = rcoll_alltoall(send, recv, count, dt, comm);
    if (ok_call(comm, st, what)) {
        int ok = 1;
        for (int src = 0; src < nr && ok; src++)
            for (size_t i = 0; i < count && ok; i++)
                if (!raw_ok(recv, dt, s, src, me, i, (size_t)src * count + i)) {
                    bad("%s: element %zu of the block from rank %d wrong", what, i, src);
                    ok = 0;
                }
        ok &= guard_ok(recv, total, what);
        if (memcmp(send, keep, total + GUARD)) {
            bad("%s: sendbuf modified", what);
            ok = 0;
        }
        if (ok) good();
    }
    free(send), free(keep), free(recv);
}

static void part_alltoall(rcoll_comm_t comm)
{
    for (int dt = 0; dt < MOVE_DATATYPES; dt++)
        for (int c = 0; c < NCOUNTS; c++) one_alltoall(comm, dt, counts[c]);
}

/* --- bcast ----------------------------------------------------------------------------- */

static void bcast_all(rcoll_comm_t comm)
{
    for (int root = 0; root < nr; root++)
        for (int dt = 0; dt < MOVE_DATATYPES; dt++)
            for (int c = 0; c < NCOUNTS; c++) {
                size_t count = counts[c], bytes = count * dt_size[dt];
                uint64_t s = ++salt;
                char *buf = galloc(bytes);
                if (me == root)
                    for (size_t i = 0; i < count; i++) put_raw(buf, dt, s, root, 0, i, i);
                char what[80];
                snprintf(what, sizeof(what), "bcast %s count %zu root %d", dt_name[dt], count, root);
                if (!ok_call(comm, rcoll_bcast(buf, count, dt, root, comm), what)) {
                    free(buf);
                    continue;
                }
                int ok = 1;
                for (size_t i = 0; i < count && ok; i++)
                    if (!raw_ok(buf, dt, s, root, 0, i, i)) {
                        bad("%s: element %zu wrong", what, i);
                        ok = 0;
                    }
                ok &= guard_ok(buf, bytes, what);
                if (ok) good();
                free(buf);
            }
}

static void part_bcast(rcoll_comm_t comm)
{
    each_algorithm(comm, RCOLL_COLL_BCAST, bcast_all);
}

/* --- nonblocking: different operations outstanding, completed in reverse order --------- */

static void fill_u32(uint32_t *p, size_t count, uint32_t seed);
static int u32_ok(const uint32_t *p, size_t count, uint32_t seed, const char *what);

/* Blocking calls issued while nonblocking ones are outstanding run after them (issue order)
 * and progress them. */
static void nonblocking_then_blocking(rcoll_comm_t comm)
{
    uint64_t s = ++salt;
    size_t rc = 301, count = 203;
    char *rs_in = galloc(rc * 4 * nr), *rs_out = galloc(rc * 4);
    char *ag_in = galloc(count * 8), *ag_out = galloc(count * 8 * nr);
    for (size_t g = 0; g < rc * nr; g++) put_input(rs_in, RCOLL_INT32, RCOLL_PROD, s, me, g, g);
    for (size_t i = 0; i < count; i++) put_raw(ag_in, RCOLL_FLOAT64, s, me, 1, i, i);
    rcoll_request_t req = NULL;
    int ok = ok_call(comm, rcoll_ireduce_scatter(rs_in, rs_out, rc, RCOLL_INT32, RCOLL_PROD, comm,
                                                 &req), "ireduce_scatter before a blocking call");
    ok &= ok_call(comm, rcoll_allgather(ag_in, ag_out, count, RCOLL_FLOAT64, comm),
                  "blocking allgather after an ireduce_scatter");
    if (req) ok &= ok_call(comm, rcoll_wait(&req), "wait for the ireduce_scatter");
    for (size_t i = 0; i < rc && ok; i++)
        if (!check_reduced(rs_out, RCOLL_INT32, RCOLL_PROD, s, nr, me * rc + i, i))
            bad("ireduce_scatter under a blocking allgather: element %zu wrong", i), ok = 0;
    for (int r = 0; r < nr && ok; r++)
        for (size_t i = 0; i < count && ok; i++)
            if (!raw_ok(ag_out, RCOLL_FLOAT64, s, r, 1, i, r * count + i))
                bad("allgather after an ireduce_scatter: block %d element %zu wrong", r, i), ok = 0;
    if (ok && guard_ok(rs_out, rc * 4, "ireduce_scatter") &&
        guard_ok(ag_out, count * 8 * nr, "allgather"))
        good();
    free(rs_in), free(rs_out), free(ag_in), free(ag_out);
}

/* rcoll_isend/rcoll_irecv outside a group: 4 MiB to both neighbours and from both, all
 * outstanding at once (as nonblocking calls they cannot deadlock), completed in reverse. */
static void nonblocking_p2p(rcoll_comm_t comm)
{
    if (nr == 1) return; /* a send to oneself needs a group, where rcoll_i* is not allowed */
    size_t count = (4u << 20) / 4;
    int right = (me + 1) % nr, left = (me + nr - 1) % nr;
    uint32_t *buf[4];
    for (int k = 0; k < 4; k++) buf[k] = malloc(count * 4);
    fill_u32(buf[0], count, (uint32_t)(5000 + 2 * me));
    fill_u32(buf[1], count, (uint32_t)(5001 + 2 * me));
    rcoll_request_t req[4] = {0};
    int ok = ok_call(comm, rcoll_isend(buf[0], count, RCOLL_UINT32, right, comm, &req[0]), "isend right");
    ok &= ok_call(comm, rcoll_isend(buf[1], count, RCOLL_UINT32, left, comm, &req[1]), "isend left");
    ok &= ok_call(comm, rcoll_irecv(buf[2], count, RCOLL_UINT32, left, comm, &req[2]), "irecv left");
    ok &= ok_call(comm, rcoll_irecv(buf[3], count, RCOLL_UINT32, right, comm, &req[3]), "irecv right");
    for (int k = 3; k >= 0; k--)
        if (req[k])
            ok &= ok_call(comm, (k % 2) ? rcoll_wait(&req[k]) : test_until_done(&req[k], 60),
                          "isend/irecv completion");
    if (ok && u32_ok(buf[2], count, (uint32_t)(5000 + 2 * left), "irecv from left") &&
        u32_ok(buf[3], count, (uint32_t)(5001 + 2 * right), "irecv from right"))
        good();
    for (int k = 0; k < 4; k++) free(buf[k]);
}

static void part_nonblocking(rcoll_comm_t comm)
{
    for (int round = 0; round < 2; round++) {
        size_t ca = round ? 1 : 301, cb = round ? 0 : 173, cc = round ? (size_t)nr : 97,
               cd = round ? 37 : 555, ce = round ? 1 : 1001;
        int rootd = nr - 1, roote = round ? nr / 2 : 0;
        uint64_t s = ++salt;
        char *sa = galloc(ca * 4), *ra = galloc(ca * 4 * nr);
        char *sbuf = galloc(cb * 4 * nr), *rb = galloc(cb * 4);
        char *sc = galloc(cc * nr), *rc = galloc(cc * nr);
        char *sd = galloc(cd * 8), *rd = galloc(cd * 8);
        char *be = galloc(ce * 8);
        for (size_t i = 0; i < ca; i++) put_raw(sa, RCOLL_INT32, s, me, 0, i, i);
        for (size_t g = 0; g < cb * nr; g++)
            put_input(sbuf, RCOLL_FLOAT32, RCOLL_SUM, s, me, g, g);
        for (int j = 0; j < nr; j++)
            for (size_t i = 0; i < cc; i++) put_raw(sc, RCOLL_UINT8, s, me, j, i, j * cc + i);
        for (size_t i = 0; i < cd; i++) put_input(sd, RCOLL_INT64, RCOLL_MAX, s, me, i, i);
        if (me == roote)
            for (size_t i = 0; i < ce; i++) put_raw(be, RCOLL_FLOAT64, s, roote, 5, i, i);
        enum { NB = 6 };
        rcoll_request_t req[NB] = {0};
        rcoll_status_t st[NB];
        st[0] = rcoll_iallgather(sa, ra, ca, RCOLL_INT32, comm, &req[0]);
        st[1] = rcoll_ireduce_scatter(sbuf, rb, cb, RCOLL_FLOAT32, RCOLL_SUM, comm, &req[1]);
        st[2] = rcoll_ialltoall(sc, rc, cc, RCOLL_UINT8, comm, &req[2]);
        st[3] = rcoll_ireduce(sd, rd, cd, RCOLL_INT64, RCOLL_MAX, rootd, comm, &req[3]);
        st[4] = rcoll_ibcast(be, ce, RCOLL_FLOAT64, roote, comm, &req[4]);
        st[5] = rcoll_ibarrier(comm, &req[5]);
        static const char *const nm[NB] = {"iallgather", "ireduce_scatter", "ialltoall",
                                           "ireduce", "ibcast", "ibarrier"};
        int issued[NB];
        for (int k = 0; k < NB; k++) issued[k] = ok_call(comm, st[k], nm[k]);
        int ok = 1;
        for (int k = NB - 1; k >= 0; k--) {
            if (!issued[k]) { ok = 0; continue; }
            rcoll_status_t w = (k % 2) ? rcoll_wait(&req[k]) : test_until_done(&req[k], 60);
            char what[64];
            snprintf(what, sizeof(what), "%s (round %d) %s", nm[k], round,
                     (k % 2) ? "rcoll_wait" : "rcoll_test");
            if (!ok_call(comm, w, what)) { ok = 0; continue; }
            if (req[k] != NULL) { bad("%s: request not set to NULL", what); ok = 0; }
        }
        for (int r = 0; r < nr && ok; r++)
            for (size_t i = 0; i < ca && ok; i++)
                if (!raw_ok(ra, RCOLL_INT32, s, r, 0, i, r * ca + i))
                    bad("iallgather: block %d element %zu wrong", r, i), ok = 0;
        for (size_t i = 0; i < cb && ok; i++)
            if (!check_reduced(rb, RCOLL_FLOAT32, RCOLL_SUM, s, nr, me * cb + i, i))
                bad("ireduce_scatter: element %zu wrong", i), ok = 0;
        for (int r = 0; r < nr && ok; r++)
            for (size_t i = 0; i < cc && ok; i++)
                if (!raw_ok(rc, RCOLL_UINT8, s, r, me, i, r * cc + i))
                    bad("ialltoall: block from %d element %zu wrong", r, i), ok = 0;
        for (size_t i = 0; i < cd && ok && me == rootd; i++)
            if (!check_reduced(rd, RCOLL_INT64, RCOLL_MAX, s, nr, i, i))
                bad("ireduce: element %zu wrong", i), ok = 0;
        for (size_t i = 0; i < ce && ok; i++)
            if (!raw_ok(be, RCOLL_FLOAT64, s, roote, 5, i, i))
                bad("ibcast: element %zu wrong", i), ok = 0;
        if (ok)
            ok = guard_ok(ra, ca * 4 * nr, "iallgather") && guard_ok(rb, cb * 4, "ireduce_scatter")
                 && guard_ok(rc, cc * nr, "ialltoall") && (me == rootd ? guard_ok(rd, cd * 8,
                 "ireduce") : untouched(rd, cd * 8, "ireduce on a non-root")) && guard_ok(be, ce * 8, "ibcast");
        if (ok) good();
        free(sa), free(ra), free(sbuf), free(rb), free(sc), free(rc), free(sd), free(rd), free(be);
    }
    nonblocking_p2p(comm);
    nonblocking_then_blocking(comm);
}

/* --- groups ---------------------------------------------------------------------------- */

static int u32_ok(const uint32_t *p, size_t count, uint32_t seed, const char *what)
{
    for (size_t i = 0; i < count; i++)
        if (p[i] != (uint32_t)(seed * 2654435761u + i)) {
            bad("%s: element %zu is %u, expected %u", what, i, p[i],
                (uint32_t)(seed * 2654435761u + i));
            return 0;
        }
    return 1;
}

static void fill_u32(uint32_t *p, size_t count, uint32_t seed)
{
    for (size_t i = 0; i < count; i++) p[i] = (uint32_t)(seed * 2654435761u + i);
}

/* Every rank sends 8 MiB right, 8 MiB left, then receives from both: only a group lets this
 * complete.  Receives are issued left first so that with two ranks (left == right) they match
 * the peer's sends in issue order. */
static void group_ring(rcoll_comm_t comm)
{
    size_t count = (8u << 20) / 4;
    int right = (me + 1) % nr, left = (me + nr - 1) % nr;
    uint32_t *to_r = malloc(count * 4), *to_l = malloc(count * 4);
    uint32_t *from_l = malloc(count * 4 + GUARD), *from_r = malloc(count * 4 + GUARD);
    fill_u32(to_r, count, (uint32_t)(me * 2 + 0));
    fill_u32(to_l, count, (uint32_t)(me * 2 + 1));
    memset(from_l, GUARD_BYTE, count * 4 + GUARD);
    memset(from_r, GUARD_BYTE, count * 4 + GUARD);
    rcoll_status_t st[6];
    st[0] = rcoll_group_start();
    st[1] = rcoll_send(to_r, count, RCOLL_UINT32, right, comm);
    st[2] = rcoll_send(to_l, count, RCOLL_UINT32, left, comm);
    st[3] = rcoll_recv(from_l, count, RCOLL_UINT32, left, comm);
    st[4] = rcoll_recv(from_r, count, RCOLL_UINT32, right, comm);
    st[5] = rcoll_group_end();
    int ok = 1;
    for (int k = 0; k < 6; k++) ok &= ok_call(comm, st[k], "8 MiB neighbour exchange in a group");
    if (ok) {
        ok &= u32_ok(from_l, count, (uint32_t)(left * 2 + 0), "8 MiB from left");
        ok &= u32_ok(from_r, count, (uint32_t)(right * 2 + 1), "8 MiB from right");
        ok &= guard_ok((char *)from_l, count * 4, "8 MiB from left");
        ok &= guard_ok((char *)from_r, count * 4, "8 MiB from right");
        if (ok) good();
    }
    free(to_r), free(to_l), free(from_l), free(from_r);
}

/* A send to self with its receive in the same (nested) group, next to a small ring step. */
static void group_self(rcoll_comm_t comm)
{
    uint32_t out[300], in[300 + GUARD / 4], ring_out[5], ring_in[5];
    fill_u32(out, 300, (uint32_t)(1000 + me));
    fill_u32(ring_out, 5, (uint32_t)(2000 + me));
    memset(in, GUARD_BYTE, sizeof(in));
    int right = (me + 1) % nr, left = (me + nr - 1) % nr;
    rcoll_status_t st[8];
    st[0] = rcoll_group_start();
    st[1] = rcoll_group_start(); /* nested: only the outer end runs the group */
    st[2] = rcoll_send(out, 300, RCOLL_UINT32, me, comm);
    st[3] = rcoll_send(ring_out, 5, RCOLL_UINT32, right, comm);
    st[4] = rcoll_group_end();
    st[5] = rcoll_recv(in, 300, RCOLL_UINT32, me, comm);
    st[6] = rcoll_recv(ring_in, 5, RCOLL_UINT32, left, comm);
    st[7] = rcoll_group_end();
    int ok = 1;
    for (int k = 0; k < 8; k++) ok &= ok_call(comm, st[k], "send to self in a nested group");
    if (ok && u32_ok(in, 300, (uint32_t)(1000 + me), "send to self") &&
        u32_ok(ring_in, 5, (uint32_t)(2000 + left), "ring step next to the self send") &&
        guard_ok((char *)in, 300 * 4, "send to self"))
        good();
}

/* All-to-all-v in one group: to every peer (self included) a count and datatype that depend
 * on the pair; some counts are 0. */
static size_t pair_count(int src, int dst) { return (size_t)((src * 7 + dst * 13) % 11) * 37 % 401; }
static int pair_dt(int src, int dst) { return (src + 3 * dst) % RCOLL_NUM_DATATYPES; }

static void group_alltoallv(rcoll_comm_t comm)
{
    uint64_t s = ++salt;
    char *out[64], *in[64];
    rcoll_status_t st = rcoll_group_start();
    int ok = ok_call(comm, st, "group_start");
    for (int p = 0; p < nr; p++) {
        size_t c = pair_count(me, p);
        int dt = pair_dt(me, p);
        out[p] = galloc(c * dt_size[dt]);
        for (size_t i = 0; i < c; i++) put_raw(out[p], dt, s, me, p, i, i);
        ok &= ok_call(comm, rcoll_send(out[p], c, dt, p, comm), "alltoallv send");
    }
    for (int p = 0; p < nr; p++) {
        size_t c = pair_count(p, me);
        int dt = pair_dt(p, me);
        in[p] = galloc(c * dt_size[dt]);
        ok &= ok_call(comm, rcoll_recv(in[p], c, dt, p, comm), "alltoallv recv");
    }
    ok &= ok_call(comm, rcoll_group_end(), "alltoallv group_end");
    for (int p = 0; p < nr && ok; p++) {
        size_t c = pair_count(p, me);
        int dt = pair_dt(p, me);
        char what[80];
        snprintf(what, sizeof(what), "alltoallv: %zu x %s from rank %d", c, dt_name[dt], p);
        for (size_t i = 0; i < c && ok; i++)
            if (!raw_ok(in[p], dt, s, p, me, i, i)) bad("%s: element %zu wrong", what, i), ok = 0;
        ok = ok && guard_ok(in[p], c * dt_size[dt], what);
    }
    if (ok) good();
    for (int p = 0; p < nr; p++) free(out[p]), free(in[p]);
}

/* Blocking send/recv outside groups: a 0 <-> 1 ping-pong, then both ranks send first. */
static void p2p_blocking(rcoll_comm_t comm)
{
    if (nr < 2 || me > 1) return;
    int ok = 1;
    int peer = 1 - me;
    for (int k = 0; k < 20 && ok; k++) {
        uint32_t msg[64 + GUARD / 4];
        size_t c = 1 + (size_t)k * 3;
        memset(msg, GUARD_BYTE, sizeof(msg));
        if ((k % 2) == me) {
            fill_u32(msg, c, (uint32_t)(k * 10 + me));
            ok &= ok_call(comm, rcoll_send(msg, c, RCOLL_UINT32, peer, comm), "ping-pong send");
        } else {
            ok &= ok_call(comm, rcoll_recv(msg, c, RCOLL_UINT32, peer, comm), "ping-pong recv");
            ok = ok && u32_ok(msg, c, (uint32_t)(k * 10 + peer), "ping-pong") &&
                 guard_ok((char *)msg, c * 4, "ping-pong");
        }
    }
    /* 4 MiB one way, then back: the receiver is waiting, so blocking calls complete. */
    size_t big = (4u << 20) / 4;
    uint32_t *bb = malloc(big * 4);
    for (int dir = 0; dir < 2 && ok; dir++) {
        if (me == dir) {
            fill_u32(bb, big, (uint32_t)(900 + dir));
            ok &= ok_call(comm, rcoll_send(bb, big, RCOLL_UINT32, peer, comm), "4 MiB send");
        } else {
            memset(bb, 0, big * 4);
            ok &= ok_call(comm, rcoll_recv(bb, big, RCOLL_UINT32, peer, comm), "4 MiB recv");
            ok = ok && u32_ok(bb, big, (uint32_t)(900 + dir), "4 MiB blocking recv");
        }
    }
    free(bb);
    /* Both send first: completes for small messages (rcoll.h). */
    uint32_t out[16], in[16];
    fill_u32(out, 16, (uint32_t)(77 + me));
    ok &= ok_call(comm, rcoll_send(out, 16, RCOLL_UINT32, peer, comm), "both-send-first send");
    ok &= ok_call(comm, rcoll_recv(in, 16, RCOLL_UINT32, peer, comm), "both-send-first recv");
    if (ok && u32_ok(in, 16, (uint32_t)(77 + peer), "both-send-first")) good();
}

/* A blocking collective queued in a group with point-to-point traffic (rcoll.h: collectives
 * inside a group return at once and run at group_end). */
static void group_with_collective(rcoll_comm_t comm)
{
    int32_t v[3] = {me + 1, 2 * me, 1};
    uint32_t out[7], in[7];
    fill_u32(out, 7, (uint32_t)(300 + me));
    int right = (me + 1) % nr, left = (me + nr - 1) % nr;
    rcoll_status_t st[5];
    st[0] = rcoll_group_start();
    st[1] = rcoll_allreduce(RCOLL_IN_PLACE, v, 3, RCOLL_INT32, RCOLL_SUM, comm);
    st[2] = rcoll_send(out, 7, RCOLL_UINT32, right, comm);
    st[3] = rcoll_recv(in, 7, RCOLL_UINT32, left, comm);
    st[4] = rcoll_group_end();
    int ok = 1;
    for (int k = 0; k < 5; k++) ok &= ok_call(comm, st[k], "allreduce + send/recv in a group");
    if (!ok) return;
    if (v[0] != nr * (nr + 1) / 2 || v[1] != nr * (nr - 1) || v[2] != nr)
        bad("allreduce inside a group: got %d %d %d", v[0], v[1], v[2]);
    else if (u32_ok(in, 7, (uint32_t)(300 + left), "send/recv next to an allreduce in a group"))
        good();
}

/* Several messages to the same peer in one group, of different sizes and datatypes: they
 * match the peer's receives in issue order. */
static void group_same_peer(rcoll_comm_t comm)
{
    static const int dts[4] = {RCOLL_INT8, RCOLL_FLOAT64, RCOLL_INT32, RCOLL_BFLOAT16};
    static const size_t cnt[4] = {17, 1000, 0, 3};
    uint64_t s = ++salt;
    int right = (me + 1) % nr, left = (me + nr - 1) % nr;
    char *out[4], *in[4];
    int ok = ok_call(comm, rcoll_group_start(), "group_start");
    for (int k = 0; k < 4; k++) {
        out[k] = galloc(cnt[k] * dt_size[dts[k]]);
        in[k] = galloc(cnt[k] * dt_size[dts[k]]);
        for (size_t i = 0; i < cnt[k]; i++) put_raw(out[k], dts[k], s, me, k, i, i);
        ok &= ok_call(comm, rcoll_send(out[k], cnt[k], dts[k], right, comm), "send (same peer)");
    }
    for (int k = 0; k < 4; k++)
        ok &= ok_call(comm, rcoll_recv(in[k], cnt[k], dts[k], left, comm), "recv (same peer)");
    ok &= ok_call(comm, rcoll_group_end(), "group_end (four messages to one peer)");
    for (int k = 0; k < 4 && ok; k++) {
        for (size_t i = 0; i < cnt[k] && ok; i++)
            if (!raw_ok(in[k], dts[k], s, left, k, i, i))
                bad("message %d of 4 from rank %d: element %zu wrong (issue order)", k, left, i), ok = 0;
        ok = ok && guard_ok(in[k], cnt[k] * dt_size[dts[k]], "message to one peer");
    }
    if (ok) good();
    for (int k = 0; k < 4; k++) free(out[k]), free(in[k]);
}

static void part_groups(rcoll_comm_t comm)
{
    group_ring(comm);
    group_same_peer(comm);
    group_self(comm);
    group_alltoallv(comm);
    p2p_blocking(comm);
    group_with_collective(comm);
}

/* --- split / dup ----------------------------------------------------------------------- */

/* Runs an allreduce and an allgather on sub and checks them against the parent ranks it
 * holds (members[child rank] = parent rank). */
static int check_sub(rcoll_comm_t sub, const int *members, int size, const char *what)
{
    int crank = -1, csize = -1;
    if (!ok_call(sub, rcoll_comm_rank(sub, &crank), what) ||
        !ok_call(sub, rcoll_comm_size(sub, &csize), what))
        return 0;
    if (csize != size || crank < 0 || crank >= size || members[crank] != me) {
        bad("%s: child rank %d size %d, expected rank of parent %d in a group of %d", what,
            crank, csize, me, size);
        return 0;
    }
    int32_t sum = me + 1, want = 0;
    for (int k = 0; k < size; k++) want += members[k] + 1;
    if (!ok_call(sub, rcoll_allreduce(RCOLL_IN_PLACE, &sum, 1, RCOLL_INT32, RCOLL_SUM, sub), what))
        return 0;
    int32_t all[64], mine = 1000 + me;
    if (!ok_call(sub, rcoll_allgather(&mine, all, 1, RCOLL_INT32, sub), what)) return 0;
    int ok = sum == want;
    for (int k = 0; k < size; k++) ok &= all[k] == 1000 + members[k];
    int32_t mx = -1, mine_p = me, bc = crank == size - 1 ? 4242 : 0;
    if (!ok_call(sub, rcoll_reduce(&mine_p, crank == 0 ? &mx : NULL,
                                   1, RCOLL_INT32, RCOLL_MAX, 0, sub), what) ||
        !ok_call(sub, rcoll_bcast(&bc, 1, RCOLL_INT32, size - 1, sub), what))
        return 0;
    int maxp = members[0];
    for (int k = 0; k < size; k++) maxp = members[k] > maxp ? members[k] : maxp;
    if (crank == 0) ok &= mx == maxp;
    ok &= bc == 4242;
    if (!ok) bad("%s: collectives on the child gave wrong results (sum %d want %d)", what, sum, want);
    return ok;
}

/* One group over two communicators: a ring to the right on a, to the left on b. */
static int group_two_comms(rcoll_comm_t a, rcoll_comm_t b)
{
    enum { C = 70000 };
    uint32_t *oa = malloc(C * 4), *ob = malloc(C * 4), *ia = malloc(C * 4), *ib = malloc(C * 4);
    fill_u32(oa, C, (uint32_t)(7000 + me));
    fill_u32(ob, C, (uint32_t)(8000 + me));
    int right = (me + 1) % nr, left = (me + nr - 1) % nr;
    const char *what = "one group over parent and dup";
    int ok = ok_call(a, rcoll_group_start(), what);
    ok &= ok_call(a, rcoll_send(oa, C, RCOLL_UINT32, right, a), what);
    ok &= ok_call(b, rcoll_send(ob, C, RCOLL_UINT32, left, b), what);
    ok &= ok_call(a, rcoll_recv(ia, C, RCOLL_UINT32, left, a), what);
    ok &= ok_call(b, rcoll_recv(ib, C, RCOLL_UINT32, right, b), what);
    ok &= ok_call(a, rcoll_group_end(), what);
    ok = ok && u32_ok(ia, C, (uint32_t)(7000 + left), "group over two comms: parent") &&
         u32_ok(ib, C, (uint32_t)(8000 + right), "group over two comms: dup");
    free(oa), free(ob), free(ia), free(ib);
    return ok;
}

/* Issue on a, issue on b, wait b, wait a; buffers differ so crossed data shows. */
static int concurrent(rcoll_comm_t a, rcoll_comm_t b, int bmax, const char *what)
{
    enum { C = 513 };
    int32_t *x = malloc(C * 4), *y = malloc(C * 4);
    for (int i = 0; i < C; i++) x[i] = me + i, y[i] = 3 * me + 2 * i + 1;
    rcoll_request_t ra = NULL, rb = NULL;
    int ok = ok_call(a, rcoll_iallreduce(RCOLL_IN_PLACE, x, C, RCOLL_INT32, RCOLL_SUM, a, &ra), what);
    ok &= ok_call(b, rcoll_iallreduce(RCOLL_IN_PLACE, y, C, RCOLL_INT32, RCOLL_MAX, b, &rb), what);
    if (rb) ok &= ok_call(b, rcoll_wait(&rb), what);
    if (ra) ok &= ok_call(a, test_until_done(&ra, 60), what);
    for (int i = 0; i < C && ok; i++)
        if (x[i] != nr * (nr - 1) / 2 + nr * i) bad("%s: parent result %d wrong", what, i), ok = 0;
        else if (y[i] != 3 * bmax + 2 * i + 1) bad("%s: child result %d wrong", what, i), ok = 0;
    free(x), free(y);
    return ok;
}

static void part_split(rcoll_comm_t comm)
{
    /* color = rank % 3, key = -rank: the child order is reversed. */
    int color = me % 3, members[64], size = 0;
    for (int r = nr - 1; r >= 0; r--)
        if (r % 3 == color) members[size++] = r;
    rcoll_comm_t child = NULL;
    if (ok_call(comm, rcoll_comm_split(comm, color, -me, &child), "split rank%3 key -rank")) {
        if (!child) bad("split gave NULL for color %d", color);
        else if (check_sub(child, members, size, "split rank%3 key -rank")) good();
    }
    /* One rank RCOLL_UNDEFINED, one another negative color: both get NULL. */
    int undef = nr > 1 && me == nr - 1, neg = nr > 2 && me == nr - 2;
    rcoll_comm_t part = (rcoll_comm_t)&part; /* must be overwritten */
    size = 0;
    for (int r = 0; r < nr; r++)
        if (!(nr > 1 && r == nr - 1) && !(nr > 2 && r == nr - 2)) members[size++] = r;
    if (ok_call(comm, rcoll_comm_split(comm, undef ? RCOLL_UNDEFINED : neg ? -5 : 7, 0, &part),
                "split with RCOLL_UNDEFINED")) {
        if (undef || neg) {
            if (part != NULL) bad("split with color %d did not give NULL", undef ? -1 : -5);
            else good();
        } else if (!part || part == (rcoll_comm_t)&part) {
            bad("split with RCOLL_UNDEFINED elsewhere gave no communicator");
        } else if (check_sub(part, members, size, "split with RCOLL_UNDEFINED elsewhere")) {
            good();
        }
    }
    if (part == (rcoll_comm_t)&part) part = NULL;
    /* dup: same ranks; nonblocking on parent and dup at once. */
    rcoll_comm_t dup = NULL;
    for (int r = 0; r < nr; r++) members[r] = r;
    if (ok_call(comm, rcoll_comm_dup(comm, &dup), "dup") && dup) {
        if (check_sub(dup, members, nr, "dup")) good();
        if (concurrent(comm, dup, nr - 1, "iallreduce on parent and dup at once")) good();
        if (group_two_comms(comm, dup)) good();
    }
    /* Nonblocking on parent and split child at once; the child is destroyed first. */
    int cmax = me;
    for (int r = me; r < nr; r += 3) cmax = r;
    if (child && concurrent(comm, child, cmax, "iallreduce on parent and split child at once")) good();
    ok_call(comm, rcoll_comm_destroy(child), "destroy child before parent");
    ok_call(comm, rcoll_comm_destroy(part), "destroy RCOLL_UNDEFINED split");
    /* Parent destroyed before its child: the child of dup outlives dup. */
    rcoll_comm_t grandchild = NULL;
    if (dup && ok_call(dup, rcoll_comm_split(dup, 0, me, &grandchild), "split of dup") &&
        grandchild) {
        ok_call(dup, rcoll_comm_destroy(dup), "destroy parent before child");
        dup = NULL;
        if (check_sub(grandchild, members, nr, "child used after its parent was destroyed"))
            good();
        ok_call(grandchild, rcoll_comm_destroy(grandchild), "destroy child after its parent");
    }
    if (dup) rcoll_comm_destroy(dup);
}

/* --- bad input ------------------------------------------------------------------------- */

static void expect(rcoll_comm_t comm, rcoll_status_t got, rcoll_status_t want, const char *word,
                   const char *what)
{
    const char *msg = rcoll_comm_last_error(comm);
    if (got == want && strstr(msg, word)) good();
    else bad("%s: got %s '%s', wanted %s with a message naming '%s'", what,
             rcoll_status_string(got), msg, rcoll_status_string(want), word);
}

static void part_bad_input(rcoll_comm_t comm)
{
    enum { C = 4 };
    size_t bytes = (size_t)(nr + 2) * C * 4;
    char *a = galloc(bytes), *b = galloc(bytes), *ka = galloc(bytes), *kb = galloc(bytes);
    for (size_t i = 0; i < bytes; i++) a[i] = (char)i, b[i] = (char)(3 * i);
    memcpy(ka, a, bytes), memcpy(kb, b, bytes);
    float *fa = (float *)a, *fb = (float *)b;
    rcoll_request_t req = NULL;
    expect(comm, rcoll_reduce(fa, fb, C, RCOLL_FLOAT32, RCOLL_SUM, nr, comm),
           RCOLL_ERR_INVALID_ARG, "root", "reduce root == nranks");
    expect(comm, rcoll_reduce(fa, fb, C, RCOLL_FLOAT32, RCOLL_SUM, -1, comm),
           RCOLL_ERR_INVALID_ARG, "root", "reduce root -1");
    expect(comm, rcoll_ireduce(fa, fb, C, RCOLL_FLOAT32, RCOLL_SUM, nr + 3, comm, &req),
           RCOLL_ERR_INVALID_ARG, "root", "ireduce root out of range");
    expect(comm, rcoll_bcast(fa, C, RCOLL_FLOAT32, nr, comm), RCOLL_ERR_INVALID_ARG, "root",
           "bcast root == nranks");
    expect(comm, rcoll_bcast(fa, C, RCOLL_FLOAT32, -2, comm), RCOLL_ERR_INVALID_ARG, "root",
           "bcast root -2");
    /* Partial overlap that is not an in-place form. */
    expect(comm, rcoll_allgather(fb + me * C + 1, fb, C, RCOLL_FLOAT32, comm),
           RCOLL_ERR_INVALID_ARG, "overlap", "allgather sendbuf = recvbuf + rank*count + 1");
    expect(comm, rcoll_allgather(fb, fb + 1, C, RCOLL_FLOAT32, comm), RCOLL_ERR_INVALID_ARG,
           "overlap", "allgather recvbuf = sendbuf + 1");
    expect(comm, rcoll_alltoall(fa, fa, C, RCOLL_FLOAT32, comm), RCOLL_ERR_INVALID_ARG,
           "overlap", "alltoall sendbuf == recvbuf");
    expect(comm, rcoll_alltoall(fa, fa + 1, C, RCOLL_FLOAT32, comm), RCOLL_ERR_INVALID_ARG,
           "overlap", "alltoall partial overlap");
    expect(comm, rcoll_reduce_scatter(fa, fa + me * C + 1, C, RCOLL_FLOAT32, RCOLL_SUM, comm),
           RCOLL_ERR_INVALID_ARG, "overlap", "reduce_scatter recvbuf = sendbuf + rank*count + 1");
    /* Only with one rank: elsewhere the non-roots' recvbuf is unused, so they would go on. */
    if (nr == 1)
        expect(comm, rcoll_reduce(fa, fa + 1, C, RCOLL_FLOAT32, RCOLL_SUM, 0, comm),
               RCOLL_ERR_INVALID_ARG, "overlap", "reduce partial overlap on the root");
    /* Count overflow, on every operation. */
    size_t big = RCOLL_MAX_COUNT + 1;
    expect(comm, rcoll_reduce(fa, fb, big, RCOLL_FLOAT32, RCOLL_SUM, 0, comm),
           RCOLL_ERR_INVALID_ARG, "count", "reduce count > RCOLL_MAX_COUNT");
    expect(comm, rcoll_allgather(fa, fb, big, RCOLL_INT8, comm), RCOLL_ERR_INVALID_ARG, "count",
           "allgather count > RCOLL_MAX_COUNT");
    expect(comm, rcoll_reduce_scatter(fa, fb, big, RCOLL_INT8, RCOLL_MAX, comm),
           RCOLL_ERR_INVALID_ARG, "count", "reduce_scatter count > RCOLL_MAX_COUNT");
    expect(comm, rcoll_alltoall(fa, fb, big, RCOLL_INT8, comm), RCOLL_ERR_INVALID_ARG, "count",
           "alltoall count > RCOLL_MAX_COUNT");
    expect(comm, rcoll_bcast(fa, big, RCOLL_INT8, 0, comm), RCOLL_ERR_INVALID_ARG, "count",
           "bcast count > RCOLL_MAX_COUNT");
    expect(comm, rcoll_send(fa, big, RCOLL_INT8, 0, comm), RCOLL_ERR_INVALID_ARG, "count",
           "send count > RCOLL_MAX_COUNT");
    expect(comm, rcoll_recv(fb, big, RCOLL_INT8, 0, comm), RCOLL_ERR_INVALID_ARG, "count",
           "recv count > RCOLL_MAX_COUNT");
    /* Peer out of range. */
    expect(comm, rcoll_send(fa, C, RCOLL_FLOAT32, nr, comm), RCOLL_ERR_INVALID_ARG, "peer",
           "send to peer == nranks");
    expect(comm, rcoll_recv(fb, C, RCOLL_FLOAT32, -1, comm), RCOLL_ERR_INVALID_ARG, "peer",
           "recv from peer -1");
    expect(comm, rcoll_isend(fa, C, RCOLL_FLOAT32, nr + 5, comm, &req), RCOLL_ERR_INVALID_ARG,
           "peer", "isend to peer out of range");
    /* A send to self without its receive in the group. */
    rcoll_status_t st1 = rcoll_group_start();
    rcoll_status_t st2 = rcoll_send(fa, C, RCOLL_FLOAT32, me, comm);
    rcoll_status_t st3 = rcoll_group_end();
    if (st1 != RCOLL_OK || st2 != RCOLL_OK)
        bad("send to self inside a group: start %s, send %s", rcoll_status_string(st1),
            rcoll_status_string(st2));
    expect(comm, st3, RCOLL_ERR_INVALID_USAGE, "self", "group_end with an unmatched send to self");
    /* Nonblocking calls inside a group. */
    rcoll_group_start();
    expect(comm, rcoll_iallreduce(fa, fb, C, RCOLL_FLOAT32, RCOLL_SUM, comm, &req),
           RCOLL_ERR_INVALID_USAGE, "group", "iallreduce inside a group");
    expect(comm, rcoll_ireduce_scatter(fa, fb, 1, RCOLL_FLOAT32, RCOLL_SUM, comm, &req),
           RCOLL_ERR_INVALID_USAGE, "group", "ireduce_scatter inside a group");
    expect(comm, rcoll_isend(fa, C, RCOLL_FLOAT32, me, comm, &req), RCOLL_ERR_INVALID_USAGE,
           "group", "isend inside a group");
    expect(comm, rcoll_group_end(), RCOLL_OK, "", "group_end of a group whose calls were refused");
    expect(comm, rcoll_group_end(), RCOLL_ERR_INVALID_USAGE, "", "group_end without a start");
    if (req != NULL) bad("a rejected call wrote *req");
    if (memcmp(a, ka, bytes + GUARD) || memcmp(b, kb, bytes + GUARD))
        bad("a rejected call modified a buffer");
    /* The communicator still works. */
    int32_t mine = 7 * me, all[64];
    rcoll_status_t st = rcoll_allgather(&mine, all, 1, RCOLL_INT32, comm);
    int ok = ok_call(comm, st, "allgather after bad input");
    for (int r = 0; r < nr && ok; r++)
        if (all[r] != 7 * r) bad("allgather after bad input: wrong result"), ok = 0;
    float x = 1;
    ok &= ok_call(comm, rcoll_reduce(me == 0 ? RCOLL_IN_PLACE : (const void *)&x,
                                     me == 0 ? &x : NULL, 1, RCOLL_FLOAT32, RCOLL_SUM, 0, comm),
                  "reduce after bad input");
    if (me != 0) x = (float)nr;
    if (ok && x == (float)nr) good();
    else if (ok) bad("reduce after bad input: %g, expected %d", x, nr);
    free(a), free(b), free(ka), free(kb);
}

/* --- driver ---------------------------------------------------------------------------- */

typedef void (*part_fn_t)(rcoll_comm_t comm);
static const part_fn_t parts[NPART] = {part_reduce, part_allgather, part_reduce_scatter,
                                       part_alltoall, part_bcast, part_nonblocking, part_groups,
                                       part_split, part_bad_input};

static int run_rank(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    me = rank, nr = n, salt = 0;
    size_t cs[NCOUNTS] = {0, 1, (size_t)(n - 1), 37, 1001};
    memcpy(counts, cs, sizeof(cs));
    int fails = 0;
    for (int p = 0; p < NPART; p++) {
        if (!part_on[p]) continue;
        cur = p;
        board->state[p][rank] = 1;
        salt = (uint64_t)p << 32;
        parts[p](comm);
        board->state[p][rank] = 2;
        fails += board->fails[p][rank];
        /* A part that broke the communicator (or desynchronised the ranks) stops the run. */
        rcoll_status_t st = rcoll_barrier(comm);
        if (st != RCOLL_OK) {
            bad("barrier after the part: %s: %s", rcoll_status_string(st),
                rcoll_comm_last_error(comm));
            for (int q = p + 1; q < NPART; q++) board->state[q][rank] = 3;
            return 3;
        }
    }
    return fails ? 2 : 0;
}

int main(int argc, char **argv)
{
    /* TEST_MAX_RANKS: the minimal build's smaller run (tools/dev.sh) */
    const char *env_max = getenv("TEST_MAX_RANKS");
    int maxn = argc > 1 ? atoi(argv[1]) : env_max ? atoi(env_max) : 9;
    int minn = argc > 2 ? atoi(argv[2]) : 1;
    setenv("RCOLL_CHUNK_SIZE", "64", 0);
    setenv("RCOLL_TIMEOUT", "20", 0);
    setenv("RCOLL_DEBUG", "NONE", 0); /* the bad-input part would log warnings */
    const char *sel = getenv("RCOLL_TEST_PARTS");
    for (int p = 0; p < NPART; p++) {
        part_on[p] = !sel;
        for (const char *t = sel; t && *t; t += strcspn(t, ",") + (t[strcspn(t, ",")] != 0))
            if (strcspn(t, ",") == strlen(part_name[p]) && !strncmp(t, part_name[p], strcspn(t, ",")))
                part_on[p] = 1;
    }
    int nparts = 0;
    for (int p = 0; p < NPART; p++) nparts += part_on[p];
    CHECK(nparts > 0, "RCOLL_TEST_PARTS=%s names no part", sel ? sel : "");
    if (!nparts) return check_summary();
    board = mmap(NULL, sizeof(board_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (board == MAP_FAILED) return 99;
    double t_all = now_s();
    for (int n = minn; n <= maxn; n++) {
        memset(board, 0, sizeof(*board));
        mp_result_t res;
        int bad_ranks = mp_run(n, run_rank, NULL, 240, &res);
        printf("%d ranks (%.1f s):", n, res.seconds);
        for (int p = 0; p < NPART; p++) {
            if (!part_on[p]) continue;
            int fails = 0, checks = 0, hung = 0, skipped = 0, first = -1, reached = 0;
            for (int r = 0; r < n; r++) {
                fails += board->fails[p][r];
                checks += board->checks[p][r];
                reached |= board->state[p][r] != 0;
                hung |= board->state[p][r] == 1 || board->state[p][r] == 0;
                skipped |= board->state[p][r] == 3;
                if (first < 0 && board->fails[p][r]) first = r;
            }
            /* a part that checked nothing tested nothing: a failure, not a pass */
            const char *verdict = fails ? "FAIL" : !reached ? "NOT RUN" : hung ? "HUNG"
                                : skipped ? "SKIPPED" : !checks ? "NO CHECKS" : "ok";
            printf(" %s %s(%d)", part_name[p], verdict, checks);
            CHECK(!fails && !hung && !skipped && checks > 0,
                  "%d ranks, %s: %s, %d failures (first, rank %d: %s)",
                  n, part_name[p], verdict, fails, first, first >= 0 ? board->first[p][first] : "");
        }
        printf("\n");
        CHECK(bad_ranks == 0, "%d ranks: every rank exits 0 (%d did not)", n, bad_ranks);
        for (int r = 0; r < n; r++)
            if (res.codes[r]) fprintf(stderr, "    rank %d exit code %d\n", r, res.codes[r]);
        fflush(stdout);
    }
    printf("total %.1f s\n", now_s() - t_all);
    return check_summary();
}
