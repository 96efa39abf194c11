/*
 * test_oneshot_proto.c - the one-kernel all-reduce's synchronisation (src/cuda/oneshot_proto.h,
 * the code the kernel runs) on host threads, one per (rank, block), over heap workspaces laid
 * out as cuda/oneshot.h says: many calls (slots alternating, so a slot is reused every second
 * call), one-shot and two-shot, 2-8 ranks, seeded random delays; every call's result checked
 * against sums computed here from the inputs' formula, so a stale or lost slot is wrong data.
 * Then the failures: a late rank, a different signature, a rank that never arrives, a rank
 * that aborts mid-call (no hang, the right peer named, within the deadline, later calls
 * stopped at once), and the deadline on a clock the test moves.  Built twice: plainly and
 * under ThreadSanitizer (oneshot_proto_tsan), where a missing acquire/release is a race.
 * Only the test's own threads: no GPU, no rcoll library.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* The clock and the pause between looks at a flag are the test's (oneshot_proto.h allows
 * both): random delays, and a clock scenario (e) moves by hand. */
static uint64_t test_now_ns(void);
static void test_pause(unsigned spins);
#define RCOLL_OS_NOW_NS test_now_ns
#define RCOLL_OS_PAUSE test_pause
#include "cuda/oneshot_proto.h"

#define MAX_BLOCKS 4
#define E 8 /* elements (uint64_t) per block's part */

static uint64_t seed;

/* ---- randomness and delays (per thread, from the printed seed) ---- */
static _Thread_local uint64_t rng;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* A small random delay between two steps: mostly nothing, sometimes a yield or a few us. */
static void jitter(void)
{
    uint64_t r = rnd() % 64;
    if (r < 6)
        sched_yield();
    else if (r == 6)
        sleep_ns(1000 + (long)(rnd() % 30000));
}

/* ---- the clock: real, or moved by scenario (e) (only while no other thread runs) ---- */
static struct {
    int on;
    uint64_t t, step; /* each read returns t, then t += step */
    long reads;
    void (*on_read)(long reads);       /* called at each read, before it returns */
    void (*on_pause)(unsigned spins);  /* called at each pause */
} fake;

static void test_pause(unsigned spins)
{
    if (fake.on) {
        if (fake.on_pause) fake.on_pause(spins);
        return;
    }
    if (spins > 64 || rnd() % 16 == 0)
        sched_yield();
    if (spins > 200) sleep_ns(20000);
}

static uint64_t test_now_ns(void)
{
    if (!fake.on) return rcoll_os_now_ns();
    fake.reads++;
    if (fake.on_read) fake.on_read(fake.reads);
    uint64_t t = fake.t;
    fake.t += fake.step;
    return t;
}

static uint64_t now_ns(void)
{
    return rcoll_os_now_ns();
}

/* ---- the inputs and what every call must give ---- */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Rank r's element i in call seq: distinct per (rank, call, element). */
static uint64_t input(int r, uint64_t seq, uint64_t i)
{
    return mix(seed ^ ((uint64_t)r << 56) ^ (seq << 20) ^ i);
}

static uint64_t expected(int nranks, uint64_t seq, uint64_t i)
{
    uint64_t s = 0;
    for (int r = 0; r < nranks; r++) s += input(r, seq, i);
    return s;
}

/* ---- one run: threads for calls [first, first + ncalls) ---- */
enum {
    ACT_NORMAL,
    ACT_LATE,     /* sleeps 50 ms before the call */
    ACT_OTHERSIG, /* another signature in this call */
    ACT_ABSENT,   /* never arrives at this call (its threads end) */
    ACT_ABORT     /* its blocks >= 1 fail (abort word set) instead of meeting */
};

typedef struct {
    uint32_t code;
    int32_t peer;
    uint64_t ns; /* the call's time in this block */
} outcome_t;

typedef struct {
    int nranks, nblocks, shots;
    uint64_t first;
    int ncalls;
    uint64_t timeout_ns;
    int special_rank; /* the rank that misbehaves at call special_seq, or -1 */
    uint64_t special_seq;
    int special_act;
    int absent_rank; /* a rank whose threads are not started (it died earlier), or -1 */
    int free_blocks; /* a rank's blocks go on without waiting for each other (no stream order) */
    char *ws[RCOLL_ONESHOT_MAX_RANKS];
    size_t slot_bytes;
    rcoll_oneshot_err_t err[RCOLL_ONESHOT_MAX_RANKS][RCOLL_ONESHOT_MAX_BLOCKS];
    outcome_t *out; /* [call][rank][block] */
    pthread_barrier_t end[RCOLL_ONESHOT_MAX_RANKS]; /* a rank's blocks, at the end of a call */
    long bad[RCOLL_ONESHOT_MAX_RANKS][MAX_BLOCKS]; /* wrong elements seen by each thread */
    char first_bad[RCOLL_ONESHOT_MAX_RANKS][MAX_BLOCKS][160];
} run_t;

typedef struct {
    run_t *run;
    int rank, block;
} thr_t;

#define SIG 0x5eedf00du
#define OTHER_SIG 0x0badcafeu

static outcome_t *outcome(run_t *R, int call, int r, int b)
{
    return &R->out[((size_t)call * R->nranks + r) * R->nblocks + b];
}

static uint64_t *slot_of(run_t *R, int r, uint64_t seq)
{
    unsigned s = (unsigned)(seq & 1);
    return (uint64_t *)(void *)(R->ws[r] + RCOLL_ONESHOT_HDR + s * R->slot_bytes);
}

static void note_bad(run_t *R, int r, int b, uint64_t seq, uint64_t i, uint64_t got, uint64_t want)
{
    if (!R->bad[r][b]++)
        snprintf(R->first_bad[r][b], sizeof(R->first_bad[r][b]),
                 "rank %d block %d call %llu element %llu: %016llx, expected %016llx", r, b,
                 (unsigned long long)seq, (unsigned long long)i, (unsigned long long)got,
                 (unsigned long long)want);
}

/* One call of block b of rank r, as the kernel's block does it; the outcome recorded. */
static int one_call(run_t *R, int r, int b, uint64_t seq, int act, outcome_t *o)
{
    const int n = R->nranks;
    rcoll_oneshot_args_t a;
    memset(&a, 0, sizeof(a));
    for (int p = 0; p < n; p++) a.peer[p] = (uint64_t)(uintptr_t)R->ws[p];
    a.nranks = n;
    a.rank = r;
    a.blocks = R->nblocks;
    a.shots = R->shots;
    a.timeout_ns = R->timeout_ns;
    a.flag = (seq & 0xffffffffu) << 32 | (act == ACT_OTHERSIG ? OTHER_SIG : SIG);
    a.err = (uint64_t)(uintptr_t)&R->err[r][0];
    memset(&R->err[r][b], 0, sizeof(R->err[r][b]));
    if (act == ACT_LATE) sleep_ns(50 * 1000000L);
    jitter();
    const uint64_t t0 = now_ns();
    uint64_t *in = slot_of(R, r, seq);
    int stop;
    if (R->shots == 1) { /* one-shot: part b in, meet, part b reduced over every slot */
        for (uint64_t i = (uint64_t)b * E; i < (uint64_t)(b + 1) * E; i++) in[i] = input(r, seq, i);
        jitter();
        if (act == ACT_ABORT && b >= 1)
            stop = rcoll_os_stop(&a, (unsigned)b, RCOLL_ONESHOT_TIMEOUT, (r + 1) % n, 0);
        else
            stop = rcoll_os_meet(&a, (unsigned)b, 0);
        if (!stop) {
            jitter();
            for (uint64_t i = (uint64_t)b * E; i < (uint64_t)(b + 1) * E; i++) {
                uint64_t s = 0;
                for (int p = 0; p < n; p++) s += slot_of(R, p, seq)[i];
                uint64_t want = expected(n, seq, i);
                if (s != want) note_bad(R, r, b, seq, i, s, want);
            }
        }
    } else { /* two-shot: shard q is [q * S, (q + 1) * S), block b takes part b of each */
        const uint64_t S = (uint64_t)R->nblocks * E, count = (uint64_t)n * S;
        uint64_t recv[RCOLL_ONESHOT_MAX_RANKS * E];
        for (int q = 0; q < n; q++)
            for (uint64_t i = q * S + b * E; i < q * S + (b + 1) * E; i++) in[i] = input(r, seq, i);
        jitter();
        if (act == ACT_ABORT && b >= 1)
            stop = rcoll_os_stop(&a, (unsigned)b, RCOLL_ONESHOT_TIMEOUT, (r + 1) % n, 0);
        else
            stop = rcoll_os_meet(&a, (unsigned)b, 0);
        if (!stop) {
            uint64_t *out = in + count; /* the output area follows the input area */
            for (uint64_t i = r * S + b * E; i < r * S + (b + 1) * E; i++) {
                uint64_t s = 0;
                for (int p = 0; p < n; p++) s += slot_of(R, p, seq)[i];
                out[i] = s;
                recv[(uint64_t)r * E + (i - r * S - b * E)] = s;
            }
            jitter();
            stop = rcoll_os_meet(&a, (unsigned)b, RCOLL_ONESHOT_FLAG2);
        }
        if (!stop) {
            jitter();
            for (int q = 0; q < n; q++) {
                if (q == r) continue;
                const uint64_t *qout = slot_of(R, q, seq) + count;
                for (uint64_t j = 0; j < E; j++) recv[(uint64_t)q * E + j] = qout[q * S + b * E + j];
            }
            for (int q = 0; q < n; q++)
                for (uint64_t j = 0; j < E; j++) {
                    uint64_t i = q * S + b * E + j, want = expected(n, seq, i);
                    if (recv[(uint64_t)q * E + j] != want)
                        note_bad(R, r, b, seq, i, recv[(uint64_t)q * E + j], want);
                }
        }
    }
    o->ns = now_ns() - t0;
    o->code = stop ? R->err[r][b].code : RCOLL_ONESHOT_OK;
    o->peer = stop ? R->err[r][b].peer : -1;
    return stop;
}

static void *block_thread(void *arg)
{
    const thr_t *t = arg;
    run_t *R = t->run;
    rng = mix(seed ^ ((uint64_t)t->rank << 8 | (uint64_t)t->block) ^ R->first) | 1;
    for (int c = 0; c < R->ncalls; c++) {
        const uint64_t seq = R->first + (uint64_t)c;
        int act = t->rank == R->special_rank && seq == R->special_seq ? R->special_act
                                                                       : ACT_NORMAL;
        outcome_t *o = outcome(R, c, t->rank, t->block);
        if (act == ACT_ABSENT) {
            o->code = 99; /* not there */
            break;
        }
        one_call(R, t->rank, t->block, seq, act, o);
        /* stream order: the rank's next call starts once every block of this one ended (the
         * abort word is the rank's: a block of the next call setting it would stop a peer
         * still waiting in this one) */
        if (!R->free_blocks) pthread_barrier_wait(&R->end[t->rank]);
    }
    return NULL;
}

static run_t *run_new(int nranks, int nblocks, int shots, int ncalls)
{
    run_t *R = calloc(1, sizeof(*R));
    R->nranks = nranks;
    R->nblocks = nblocks;
    R->shots = shots;
    R->ncalls = ncalls;
    R->first = 1;
    R->timeout_ns = 20ull * 1000000000ull; /* a hang would show as the test's own timeout */
    R->special_rank = R->absent_rank = -1;
    uint64_t count = shots == 1 ? (uint64_t)nblocks * E : (uint64_t)nranks * nblocks * E;
    R->slot_bytes = (size_t)count * 8 * (shots == 1 ? 1 : 2);
    for (int r = 0; r < nranks; r++) {
        R->ws[r] = aligned_alloc(4096, (RCOLL_ONESHOT_HDR + 2 * R->slot_bytes + 4095) / 4096 * 4096);
        pthread_barrier_init(&R->end[r], NULL, (unsigned)nblocks);
        memset(R->ws[r], 0, RCOLL_ONESHOT_HDR + 2 * R->slot_bytes);
    }
    R->out = calloc((size_t)ncalls * nranks * nblocks, sizeof(outcome_t));
    return R;
}

/* Calls [first, first + ncalls) on new threads (the workspaces as they are); joined. */
static void run_calls(run_t *R, uint64_t first, int ncalls)
{
    pthread_t th[RCOLL_ONESHOT_MAX_RANKS * MAX_BLOCKS];
    thr_t arg[RCOLL_ONESHOT_MAX_RANKS * MAX_BLOCKS];
    int nt = 0;
    R->first = first;
    R->ncalls = ncalls;
    memset(R->out, 0, (size_t)ncalls * R->nranks * R->nblocks * sizeof(outcome_t));
    for (int r = 0; r < R->nranks; r++)
        for (int b = 0; b < R->nblocks && r != R->absent_rank; b++) {
            arg[nt] = (thr_t){R, r, b};
            if (pthread_create(&th[nt], NULL, block_thread, &arg[nt]) != 0) {
                CHECK(0, "pthread_create");
                break;
            }
            nt++;
        }
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
}

static void run_free(run_t *R)
{
    for (int r = 0; r < R->nranks; r++) {
        free(R->ws[r]);
        pthread_barrier_destroy(&R->end[r]);
    }
    free(R->out);
    free(R);
}

/* Every present block of every call OK and no wrong element. */
static void check_all_ok(run_t *R, const char *what)
{
    long bad = 0, notok = 0;
    for (int r = 0; r < R->nranks; r++)
        for (int b = 0; b < R->nblocks; b++) {
            if (R->bad[r][b]) printf("  %s: %s (%ld wrong)\n", what, R->first_bad[r][b],
                                     R->bad[r][b]);
            bad += R->bad[r][b];
        }
    for (int c = 0; c < R->ncalls; c++)
        for (int r = 0; r < R->nranks; r++)
            for (int b = 0; b < R->nblocks; b++) {
                const outcome_t *o = outcome(R, c, r, b);
                if (r == R->absent_rank || o->code == RCOLL_ONESHOT_OK) continue;
                if (!notok++)
                    printf("  %s: call %llu rank %d block %d stopped: code %u peer %d\n", what,
                           (unsigned long long)(R->first + (uint64_t)c), r, b, o->code, o->peer);
            }
    CHECK(bad == 0, "%s: %ld wrong elements", what, bad);
    CHECK(notok == 0, "%s: %ld blocks stopped", what, notok);
}

/* ---- (a) many calls, every configuration ---- */
static int quick;

static void many(int nranks, int nblocks, int shots, int ncalls, uint64_t first, int free_blocks)
{
    char what[120];
    if (quick) ncalls = ncalls / 2;
    snprintf(what, sizeof(what), "%s, %d ranks x %d blocks, calls %llu..%llu%s",
             shots == 1 ? "one-shot" : "two-shot", nranks, nblocks, (unsigned long long)first,
             (unsigned long long)(first + (uint64_t)ncalls - 1),
             free_blocks ? ", blocks not in stream order" : "");
    run_t *R = run_new(nranks, nblocks, shots, ncalls);
    R->free_blocks = free_blocks;
    if (first > 1) /* the flags of the call before, every rank's pushed to every rank */
        for (int r = 0; r < nranks; r++)
            for (int b = 0; b < nblocks; b++)
                for (int p = 0; p < nranks; p++) {
                    uint64_t prev = ((first - 1) & 0xffffffffu) << 32 | SIG;
                    uint64_t ws = (uint64_t)(uintptr_t)R->ws[r];
                    *rcoll_os_flag(ws, 0, (unsigned)b, p) = prev;
                    if (shots == 2) *rcoll_os_flag(ws, RCOLL_ONESHOT_FLAG2, (unsigned)b, p) = prev;
                }
    uint64_t t0 = now_ns();
    run_calls(R, first, ncalls);
    printf("  %s: %.0f ms\n", what, (double)(now_ns() - t0) / 1e6);
    check_all_ok(R, what);
    /* the layout: every rank's header holds every rank's last flag (its own included) in
     * flag[b][p], in each flag set the calls used, and nothing else of the header written */
    const uint64_t last = ((first + (uint64_t)ncalls - 1) & 0xffffffffu) << 32 | SIG;
    long misplaced = 0;
    for (int r = 0; r < nranks; r++) {
        const uint64_t *w = (const uint64_t *)(const void *)R->ws[r];
        for (unsigned i = 0; i < RCOLL_ONESHOT_HDR / 8; i++) {
            unsigned set = i * 8 / RCOLL_ONESHOT_FLAG2, b = i % (RCOLL_ONESHOT_FLAG2 / 8) /
                                                          RCOLL_ONESHOT_MAX_RANKS;
            int p = (int)(i % RCOLL_ONESHOT_MAX_RANKS);
            int used = set < (unsigned)shots && (int)b < nblocks && p < nranks;
            if (w[i] != (used ? last : 0)) misplaced++;
        }
    }
    CHECK(misplaced == 0, "%s: %ld header words not as the layout says", what, misplaced);
    run_free(R);
}

static void case_many(void)
{
    many(2, 2, 1, 5000, 1, 0);
    many(3, 3, 1, 3000, 1, 0);
    many(5, 2, 1, 1500, 1, 0);
    many(8, 2, 1, 1000, 1, 0);
    many(2, 4, 2, 3000, 1, 0);
    many(4, 2, 2, 1500, 1, 0);
    many(8, 2, 2, 800, 1, 0);
    many(3, 2, 1, 1000, 0xffffffffull - 500, 0); /* the flags' call numbers wrap at 2^32 */
    /* the data needs no stream order: each block's part is its own (the abort word does) */
    many(3, 2, 1, 2000, 1, 1);
    many(4, 3, 2, 1000, 1, 1);
}

/* ---- (b) a late rank: the others wait, nothing fails ---- */
static void case_late(void)
{
    for (int shots = 1; shots <= 2; shots++) {
        run_t *R = run_new(4, 2, shots, 40);
        R->timeout_ns = 5ull * 1000000000ull;
        R->special_rank = 2;
        R->special_seq = 20;
        R->special_act = ACT_LATE;
        run_calls(R, 1, 40);
        check_all_ok(R, shots == 1 ? "late rank, one-shot" : "late rank, two-shot");
        uint64_t waited = 0; /* rank 0 waited for it in call 20 */
        for (int b = 0; b < 2; b++)
            if (outcome(R, 19, 0, b)->ns > waited) waited = outcome(R, 19, 0, b)->ns;
        CHECK(waited >= 40 * 1000000ull, "rank 0 waited %.1f ms for the late rank",
              (double)waited / 1e6);
        run_free(R);
    }
}

/* Calls after a failure, on new threads (stream order: after every block of the failed
 * call): every present block stops at once, ABORTED by its own rank's abort word. */
static void check_after(run_t *R, uint64_t next, const char *what)
{
    run_calls(R, next, 3);
    long wrong = 0;
    uint64_t slowest = 0;
    for (int c = 0; c < 3; c++)
        for (int r = 0; r < R->nranks; r++)
            for (int b = 0; b < R->nblocks && r != R->absent_rank; b++) {
                const outcome_t *o = outcome(R, c, r, b);
                if (o->code != RCOLL_ONESHOT_ABORTED || o->peer != r) wrong++;
                if (o->ns > slowest) slowest = o->ns;
            }
    CHECK(wrong == 0, "%s: %ld blocks of the later calls not stopped by their own abort word",
          what, wrong);
    CHECK(slowest < 100 * 1000000ull, "%s: a later call took %.1f ms (stopped at once?)", what,
          (double)slowest / 1e6);
}

/* ---- (c) a different signature on one rank ---- */
static void case_mismatch(void)
{
    for (int shots = 1; shots <= 2; shots++) {
        const char *what = shots == 1 ? "mismatch, one-shot" : "mismatch, two-shot";
        const int n = 4, nb = 3, bad_rank = 1, k = 10;
        run_t *R = run_new(n, nb, shots, k);
        R->timeout_ns = 10ull * 1000000000ull; /* a mismatch must not need the deadline */
        R->special_rank = bad_rank;
        R->special_seq = k;
        R->special_act = ACT_OTHERSIG;
        uint64_t t0 = now_ns();
        run_calls(R, 1, k);
        double ms = (double)(now_ns() - t0) / 1e6;
        long bad = 0, mism = 0, wrong = 0;
        for (int r = 0; r < n; r++)
            for (int b = 0; b < nb; b++) {
                bad += R->bad[r][b];
                for (int c = 0; c < k - 1; c++) wrong += outcome(R, c, r, b)->code != 0;
                const outcome_t *o = outcome(R, k - 1, r, b);
                if (o->code == RCOLL_ONESHOT_MISMATCH) {
                    mism++;
                    /* the others name the odd rank; the odd rank names any other */
                    CHECK(r == bad_rank ? o->peer != bad_rank : o->peer == bad_rank,
                          "%s: rank %d block %d names rank %d", what, r, b, o->peer);
                } else {
                    CHECK(o->code == RCOLL_ONESHOT_ABORTED && o->peer >= 0 && o->peer < n,
                          "%s: rank %d block %d: code %u peer %d (MISMATCH or ABORTED)", what,
                          r, b, o->code, o->peer);
                }
            }
        CHECK(bad == 0 && wrong == 0, "%s: the calls before: %ld wrong elements, %ld stopped",
              what, bad, wrong);
        CHECK(mism > 0, "%s: no block saw the mismatch", what);
        CHECK(ms < 5000, "%s: %.0f ms (no waiting for the deadline)", what, ms);
        check_after(R, k + 1, what);
        run_free(R);
    }
}

/* ---- (d) a rank that never arrives, and one that aborts mid-call ---- */
static void case_absent(void)
{
    const uint64_t timeout = 200 * 1000000ull;
    for (int shots = 1; shots <= 2; shots++) {
        const char *what = shots == 1 ? "absent rank, one-shot" : "absent rank, two-shot";
        const int n = 3, nb = 2, gone = 2, k = 4;
        run_t *R = run_new(n, nb, shots, k);
        R->timeout_ns = timeout;
        R->special_rank = gone;
        R->special_seq = k;
        R->special_act = ACT_ABSENT;
        run_calls(R, 1, k);
        for (int r = 0; r < n; r++) {
            if (r == gone) continue;
            for (int b = 0; b < nb; b++) {
                const outcome_t *o = outcome(R, k - 1, r, b);
                CHECK((o->code == RCOLL_ONESHOT_TIMEOUT && o->peer == gone) ||
                          (o->code == RCOLL_ONESHOT_ABORTED && o->peer != gone),
                      "%s: rank %d block %d: code %u peer %d", what, r, b, o->code, o->peer);
                /* never before the deadline; at most a little after it */
                if (o->code == RCOLL_ONESHOT_TIMEOUT)
                    CHECK(o->ns >= timeout, "%s: rank %d block %d timed out after %.1f ms",
                          what, r, b, (double)o->ns / 1e6);
                CHECK(o->ns < timeout + 2000 * 1000000ull, "%s: rank %d block %d took %.1f ms",
                      what, r, b, (double)o->ns / 1e6);
            }
        }
        R->absent_rank = gone;
        check_after(R, k + 1, what);
        run_free(R);
    }
}

static void case_abort(void)
{
    const uint64_t timeout = 200 * 1000000ull;
    for (int shots = 1; shots <= 2; shots++) {
        const char *what = shots == 1 ? "abort mid-call, one-shot" : "abort mid-call, two-shot";
        const int n = 4, nb = 3, ab = 3, k = 4;
        run_t *R = run_new(n, nb, shots, k);
        R->timeout_ns = timeout;
        R->special_rank = ab;
        R->special_seq = k;
        R->special_act = ACT_ABORT;
        run_calls(R, 1, k);
        long bad = 0;
        for (int r = 0; r < n; r++) {
            int failed = 0;
            bad += R->bad[r][0] + R->bad[r][1] + R->bad[r][2];
            for (int b = 0; b < nb; b++) {
                const outcome_t *o = outcome(R, k - 1, r, b);
                if (o->code != RCOLL_ONESHOT_OK) failed = 1;
                if (r != ab && o->code != RCOLL_ONESHOT_OK)
                    CHECK(o->code == RCOLL_ONESHOT_ABORTED || o->code == RCOLL_ONESHOT_TIMEOUT,
                          "%s: rank %d block %d: code %u", what, r, b, o->code);
                /* block 1 of every other rank waited for the aborting rank's flag: its abort
                 * word stops it, well before the deadline */
                if (r != ab && b == 1)
                    CHECK(o->code == RCOLL_ONESHOT_ABORTED && o->ns < timeout,
                          "%s: rank %d block 1: code %u peer %d after %.1f ms", what, r,
                          o->code, o->peer, (double)o->ns / 1e6);
            }
            CHECK(failed, "%s: rank %d's call %d did not fail", what, r, k);
        }
        CHECK(bad == 0, "%s: %ld wrong elements (a block that met its peers reduces right)",
              what, bad);
        check_after(R, k + 1, what);
        run_free(R);
    }
}

/* ---- (e) the deadline, on a clock the test moves (one thread: the peers are words) ---- */
static uint64_t *e_ws[2];
static uint64_t e_flag, e_peer_flag; /* this rank's flag; the one the peer publishes */
static unsigned e_publish_spin; /* the peer's flag appears at this pause (this many looks) */
static long e_publish_at;       /* or at this clock read */

/* Rank 1 (block 0) pushes f into rank 0's header, where rank 0 waits for it. */
static void e_push(uint64_t f)
{
    __atomic_store_n(rcoll_os_flag((uint64_t)(uintptr_t)e_ws[0], 0, 0, 1), f, __ATOMIC_RELEASE);
}

static void e_on_pause(unsigned spins)
{
    if (spins == e_publish_spin) e_push(e_peer_flag);
}

static void e_on_read(long reads)
{
    if (reads == e_publish_at) e_push(e_peer_flag);
}

static void e_meet(uint64_t timeout_ns, rcoll_oneshot_err_t *err, int *stop)
{
    rcoll_oneshot_args_t a;
    memset(&a, 0, sizeof(a));
    a.peer[0] = (uint64_t)(uintptr_t)e_ws[0];
    a.peer[1] = (uint64_t)(uintptr_t)e_ws[1];
    a.nranks = 2;
    a.rank = 0;
    a.blocks = 1;
    a.flag = e_flag;
    a.timeout_ns = timeout_ns;
    a.err = (uint64_t)(uintptr_t)err;
    memset(err, 0, sizeof(*err));
    *stop = rcoll_os_meet(&a, 0, 0);
}

static void e_reset(void)
{
    for (int r = 0; r < 2; r++) memset(e_ws[r], 0, RCOLL_ONESHOT_HDR);
    memset(&fake, 0, sizeof(fake));
    e_publish_spin = 0;
    e_publish_at = 0;
    e_peer_flag = e_flag;
}

static void case_deadline(void)
{
    rcoll_oneshot_err_t err;
    int stop;
    for (int r = 0; r < 2; r++) e_ws[r] = aligned_alloc(64, RCOLL_ONESHOT_HDR);
    e_flag = 7ull << 32 | SIG;

    /* the peer already there; a 1 ns deadline and a clock a second on at every read */
    e_reset();
    e_push(e_flag);
    fake.on = 1;
    fake.t = 0; /* a clock reading 0 at the start is a reading, not "unset" */
    fake.step = 1000000000ull;
    e_meet(1, &err, &stop);
    CHECK(!stop, "peer there, 1 ns deadline: stopped (code %u)", err.code);

    /* the peer arrives while the block is held between its look and the clock (a thread
     * descheduled, a block off the GPU): the deadline has passed, but the peer is there */
    e_reset();
    fake.on = 1;
    fake.t = 0;
    fake.step = 1000000000ull;
    fake.on_read = e_on_read;
    e_publish_at = 2; /* read 1 is the start, read 2 the first deadline check */
    e_meet(1000, &err, &stop);
    CHECK(!stop, "peer arrived by the deadline check: stopped (code %u peer %d after %ld clock "
          "reads)", err.code, err.peer, fake.reads);
    e_reset(); /* and one that arrived in another call: named as such, not as late */
    fake.on = 1;
    fake.step = 1000000000ull;
    fake.on_read = e_on_read;
    e_publish_at = 2;
    e_peer_flag = 7ull << 32 | OTHER_SIG;
    e_meet(1000, &err, &stop);
    CHECK(stop && err.code == RCOLL_ONESHOT_MISMATCH && err.peer == 1,
          "another call by the deadline check: stop %d code %u peer %d", stop, err.code,
          err.peer);

    /* a peer that never comes: TIMEOUT, at the first check past the deadline, not before */
    e_reset();
    fake.on = 1;
    fake.t = 0;
    fake.step = 100; /* 100 ns a read: the deadline (1000 ns) passes at the 12th read */
    e_meet(1000, &err, &stop);
    CHECK(stop && err.code == RCOLL_ONESHOT_TIMEOUT && err.peer == 1,
          "never there: stop %d code %u peer %d", stop, err.code, err.peer);
    CHECK(fake.reads == 12, "never there: %ld clock reads (12 expected)", fake.reads);
    CHECK(__atomic_load_n(&e_ws[0][RCOLL_ONESHOT_ABORT / 8], __ATOMIC_ACQUIRE) == e_flag,
          "the timed-out block set its rank's abort word");
    e_meet(1000, &err, &stop); /* the next call: at once */
    CHECK(stop && err.code == RCOLL_ONESHOT_ABORTED && err.peer == 0,
          "after a timeout: stop %d code %u peer %d", stop, err.code, err.peer);

    /* a zero deadline: still a full poll interval (32 looks) before the first check */
    e_reset();
    fake.on = 1;
    fake.step = 1000000000ull;
    fake.on_pause = e_on_pause;
    e_publish_spin = 31;
    e_meet(0, &err, &stop);
    CHECK(!stop, "zero deadline, peer at the 31st look: stopped (code %u)", err.code);
    CHECK(fake.reads == 1, "zero deadline: %ld clock reads before the 32nd look", fake.reads);
    fake.on = 0;
    for (int r = 0; r < 2; r++) free(e_ws[r]);
}

/* ---- (f) a peer that publishes and stops between two looks (one thread, the peer words) ----
 * The peer's flag appears, and its abort word is set, while the block pauses after a look at
 * the flag that said "wait": the block's next look is at the abort word.  Another call's flag
 * is then named as the mismatch it is (the stop only followed from it), and this call's
 * flag lets the block go on (it met this rank before it stopped). */
static uint64_t f_abort;
static void f_on_pause(unsigned spins)
{
    if (spins != 32) return;
    e_push(e_peer_flag);
    __atomic_store_n(&e_ws[1][RCOLL_ONESHOT_ABORT / 8], f_abort, __ATOMIC_RELEASE);
}

static void case_stop_after_publish(void)
{
    rcoll_oneshot_err_t err;
    int stop;
    for (int r = 0; r < 2; r++) e_ws[r] = aligned_alloc(64, RCOLL_ONESHOT_HDR);
    e_flag = 7ull << 32 | SIG;
    for (int same = 0; same <= 1; same++) {
        e_reset();
        e_peer_flag = same ? e_flag : 7ull << 32 | OTHER_SIG;
        f_abort = e_peer_flag;
        fake.on = 1;
        fake.step = 1; /* the deadline (1 s) never passes */
        fake.on_pause = f_on_pause;
        e_meet(1000000000ull, &err, &stop);
        if (same)
            CHECK(!stop, "the peer met this call, then stopped: stopped (code %u peer %d)",
                  err.code, err.peer);
        else
            CHECK(stop && err.code == RCOLL_ONESHOT_MISMATCH && err.peer == 1 &&
                      err.flag == e_peer_flag,
                  "another call, then the peer's stop: stop %d code %u peer %d (a mismatch "
                  "naming rank 1 expected)", stop, err.code, err.peer);
    }
    fake.on = 0;
    for (int r = 0; r < 2; r++) free(e_ws[r]);
}

int main(int argc, char **argv)
{
    const char *s = getenv("ONESHOT_PROTO_SEED");
    seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    printf("seed %llu (ONESHOT_PROTO_SEED=%llu repeats it)%s\n", (unsigned long long)seed,
           (unsigned long long)seed, quick ? ", quick" : "");
    fflush(stdout);
    alarm(100); /* a hang ends the test, failed, before meson's timeout */
    rng = mix(seed) | 1;
    check_case("many calls, slots reused, 2-8 ranks, one-shot and two-shot", case_many);
    check_case("a late rank", case_late);
    check_case("a different signature on one rank", case_mismatch);
    check_case("a rank that never arrives", case_absent);
    check_case("a rank that aborts mid-call", case_abort);
    check_case("the deadline never fires early", case_deadline);
    check_case("a peer that publishes and stops between two looks", case_stop_after_publish);
    return check_summary();
}
