/*
 * soak.c - a long run of mixed collectives on one communicator, every result checked, and the
 * process's resources watched (docs/reliability.md, "Soak").
 *
 * Usage: soak [--ranks N] [--ops N] [--seed S] [--max-bytes B] [--rss-mib M] [--limit S]
 *
 * Every rank draws the same sequence of operations from the seed (printed at start): the
 * kind (all-reduce, reduce, broadcast, all-gather, reduce-scatter, all-to-all, gather,
 * scatter, all-gather-v, all-to-all-v, reduce-scatter-v, barrier, send/recv in three forms),
 * blocking or nonblocking (waited on), in place or not, datatype, an op valid for it, root,
 * and a size from 0 to --max-bytes (default 4 MiB) skewed to small.  Reductions are checked
 * against tests/common/dtref.c (exact for integers; float AVG within its tolerance), data
 * movement byte for byte against a pattern computed here.
 *
 * Resources per rank (VmRSS, open fds, threads, /dev/shm entries named rcoll*) are sampled at
 * start, after 100 operations, after the warm-up (a tenth of the operations, at least 100) and
 * at the end.  The run fails when a result is wrong, a call fails, or at the end: fds, threads
 * or /dev/shm entries differ from their count after 100 operations, or RSS exceeds its value
 * after the warm-up by more than --rss-mib (default 16).
 */
#include <dirent.h>
#include <stdarg.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dtref.h"
#include "mp.h"

enum { K_ALLREDUCE, K_REDUCE, K_BCAST, K_ALLGATHER, K_REDUCE_SCATTER, K_ALLTOALL, K_GATHER,
       K_SCATTER, K_ALLGATHERV, K_ALLTOALLV, K_REDUCE_SCATTERV, K_BARRIER, K_SENDRECV, NKIND };
static const char *const kind_name[NKIND] = {
    "allreduce", "reduce",     "bcast",      "allgather",        "reduce_scatter",
    "alltoall",  "gather",     "scatter",    "allgatherv",       "alltoallv",
    "reduce_scatterv", "barrier", "sendrecv"};

typedef struct {
    long rss_kib, fds, threads, shm;
} res_t;

enum { S_START, S_100, S_WARM, S_END, NSAMPLE };
static const char *const sample_name[NSAMPLE] = {"start", "after 100", "after warm-up", "end"};

typedef struct {
    long ops, wrong, failed, per_kind[NKIND];
    res_t res[NSAMPLE];
    double seconds;
    char first[512];
} rank_board_t;

static rank_board_t *board;
static int me, nr;
static long n_ops = 5000, rss_bound_mib = 16;
static uint64_t seed;
static size_t max_bytes = 4u << 20;

/* Under AddressSanitizer: a small quarantine, so that freed buffers it holds back (up to
 * 256 MiB by default) do not pass for growth.  ASAN_OPTIONS still wins. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=4:thread_local_quarantine_size_kb=64";
}

/* --- resources -------------------------------------------------------------------------- */

static long status_field(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    if (f) fclose(f);
    return v;
}

static long count_dir(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    if (!d) return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && (!prefix || !strncmp(e->d_name, prefix, strlen(prefix)))) n++;
    closedir(d);
    return n - (prefix ? 0 : 1); /* opendir's own fd */
}

static void sample(res_t *r)
{
    r->rss_kib = status_field("VmRSS");
    r->threads = status_field("Threads");
    r->fds = count_dir("/proc/self/fd", NULL);
    r->shm = count_dir("/dev/shm", "rcoll");
}

/* --- the shared random sequence ----------------------------------------------------------- */

static uint64_t rng;
static uint64_t next64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return n ? next64() % n : 0; }
static double unit(void) { return (double)(next64() >> 11) / 9007199254740992.0; }

/* Bytes: 0 in 1 of 20 draws, else log-uniform-squared (most draws small) up to max_bytes. */
static size_t draw_bytes(void)
{
    if (below(20) == 0 || max_bytes == 0) return 0;
    int lg = 0;
    while (((size_t)2 << lg) <= max_bytes) lg++;
    double u = unit();
    int e = (int)(u * u * (lg + 1));
    if (e > lg) e = lg;
    size_t b = ((size_t)1 << e) + below((uint64_t)1 << e);
    return b > max_bytes ? max_bytes : b;
}

/* --- reference data ------------------------------------------------------------------------ */

static uint8_t pat(uint64_t salt, int a, int b, size_t k)
{
    uint64_t h = salt * 0x9e3779b97f4a7c15ull ^ (uint64_t)a * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)b * 0x165667b19e3779f9ull ^ (uint64_t)k * 0x27d4eb2f165667c5ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return (uint8_t)(h >> 56);
}
static void pat_fill(void *p, size_t bytes, uint64_t salt, int a, int b)
{
    uint8_t *q = p;
    for (size_t k = 0; k < bytes; k++) q[k] = pat(salt, a, b, k);
}

static void wrong(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long cur_op;
static int cur_kind;
static void wrong(const char *fmt, ...)
{
    char text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (board[me].wrong++ == 0)
        snprintf(board[me].first, sizeof(board[me].first), "op %ld %s: %s", cur_op,
                 kind_name[cur_kind], text);
    if (board[me].wrong <= 5)
        fprintf(stderr, "soak rank %d: op %ld %s: %s\n", me, cur_op, kind_name[cur_kind], text);
}

static int pat_check(const void *p, size_t bytes, uint64_t salt, int a, int b, const char *what)
{
    const uint8_t *q = p;
    for (size_t k = 0; k < bytes; k++)
        if (q[k] != pat(salt, a, b, k)) {
            wrong("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, k, bytes, q[k],
                  pat(salt, a, b, k));
            return 0;
        }
    return 1;
}

/* Reduction inputs: element i of rank r is ref_gen(dt, op, r, base + i, salt). */
static void red_fill(void *p, int dt, int op, int r, size_t base, size_t count, int salt)
{
    for (size_t i = 0; i < count; i++) ref_store(p, dt, i, (double)ref_gen(dt, op, r, base + i, salt));
}
static int red_check(const void *p, int dt, int op, size_t base, size_t count, int salt,
                     const char *what)
{
    for (size_t i = 0; i < count; i++) {
        double got = ref_load(p, dt, i), want = ref_expected(dt, op, nr, base + i, salt);
        if (!ref_close_enough(dt, op, got, want)) {
            wrong("%s %s/%s: element %zu of %zu is %g, expected %g", what, dt_name[dt],
                  op_name[op], i, count, got, want);
            return 0;
        }
    }
    return 1;
}

/* --- one operation ---------------------------------------------------------------------- */

static int call_ok(rcoll_comm_t comm, rcoll_status_t st, const char *what)
{
    if (st == RCOLL_OK) return 1;
    board[me].failed++;
    wrong("%s failed: %s: %s", what, rcoll_status_string(st), rcoll_comm_last_error(comm));
    return 0;
}

/* Run a blocking call, or its nonblocking form waited on (nb). */
#define RUN(nb, blocking, ...)                                                                 \
    ((nb) ? ({                                                                                 \
        rcoll_request_t rq_ = NULL;                                                            \
        rcoll_status_t s_ = rcoll_i##blocking(__VA_ARGS__, &rq_);                              \
        s_ == RCOLL_OK ? rcoll_wait(&rq_) : s_;                                                \
    })                                                                                         \
          : rcoll_##blocking(__VA_ARGS__))

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "soak rank %d: out of memory (%zu bytes)\n", me, n);
        _exit(97);
    }
    return p;
}

static int draw_red_pair(int *dt, int *op)
{
    for (;;) {
        *dt = (int)below(RCOLL_NUM_DATATYPES);
        *op = (int)below(RCOLL_NUM_OPS);
        if (dt_op_defined(*dt, *op)) return 1;
    }
}

static void one_op(rcoll_comm_t comm, long opno)
{
    int salt = (int)(opno & 0x3fffffff);
    int kind = (int)below(NKIND);
    int nb = below(10) < 3;          /* nonblocking form, waited on */
    int inplace = below(4) == 0;
    int root = (int)below((uint64_t)nr);
    int dt, op;
    draw_red_pair(&dt, &op);
    size_t es = dt_size[dt];
    size_t count = draw_bytes() / es;
    cur_op = opno, cur_kind = kind;
    board[me].per_kind[kind]++;
    rcoll_status_t st;
    char *s = NULL, *r = NULL;
    size_t blk = count / (size_t)nr; /* per-rank block of the block collectives */

    switch (kind) {
    case K_ALLREDUCE:
        r = xmalloc(count * es);
        if (inplace) {
            red_fill(r, dt, op, me, 0, count, salt);
            st = RUN(nb, allreduce, RCOLL_IN_PLACE, r, count, dt, op, comm);
        } else {
            s = xmalloc(count * es);
            red_fill(s, dt, op, me, 0, count, salt);
            st = RUN(nb, allreduce, s, r, count, dt, op, comm);
        }
        if (call_ok(comm, st, "allreduce")) red_check(r, dt, op, 0, count, salt, "allreduce");
        break;
    case K_REDUCE:
        s = xmalloc(count * es);
        red_fill(s, dt, op, me, 0, count, salt);
        if (me == root) r = xmalloc(count * es);
        if (me == root && inplace) {
            memcpy(r, s, count * es);
            st = RUN(nb, reduce, RCOLL_IN_PLACE, r, count, dt, op, root, comm);
        } else {
            st = RUN(nb, reduce, s, r, count, dt, op, root, comm);
        }
        if (call_ok(comm, st, "reduce") && me == root)
            red_check(r, dt, op, 0, count, salt, "reduce");
        break;
    case K_BCAST:
        r = xmalloc(count * es);
        if (me == root) pat_fill(r, count * es, (uint64_t)salt, root, 0);
        else memset(r, 0xee, count * es);
        st = RUN(nb, bcast, r, count, dt, root, comm);
        if (call_ok(comm, st, "bcast")) pat_check(r, count * es, (uint64_t)salt, root, 0, "bcast");
        break;
    case K_ALLGATHER:
        r = xmalloc((size_t)nr * blk * es);
        memset(r, 0xee, (size_t)nr * blk * es);
        if (inplace) {
            pat_fill(r + (size_t)me * blk * es, blk * es, (uint64_t)salt, me, 0);
            st = RUN(nb, allgather, RCOLL_IN_PLACE, r, blk, dt, comm);
        } else {
            s = xmalloc(blk * es);
            pat_fill(s, blk * es, (uint64_t)salt, me, 0);
            st = RUN(nb, allgather, s, r, blk, dt, comm);
        }
        if (call_ok(comm, st, "allgather"))
            for (int b = 0; b < nr; b++)
                if (!pat_check(r + (size_t)b * blk * es, blk * es, (uint64_t)salt, b, 0,
                               "allgather block")) break;
        break;
    case K_REDUCE_SCATTER:
        s = xmalloc((size_t)nr * blk * es);
        red_fill(s, dt, op, me, 0, (size_t)nr * blk, salt);
        if (inplace) { /* the result lands on the rank's own block */
            st = RUN(nb, reduce_scatter, s, s + (size_t)me * blk * es, blk, dt, op, comm);
            if (call_ok(comm, st, "reduce_scatter"))
                red_check(s + (size_t)me * blk * es, dt, op, (size_t)me * blk, blk, salt,
                          "reduce_scatter");
        } else {
            r = xmalloc(blk * es);
            st = RUN(nb, reduce_scatter, s, r, blk, dt, op, comm);
            if (call_ok(comm, st, "reduce_scatter"))
                red_check(r, dt, op, (size_t)me * blk, blk, salt, "reduce_scatter");
        }
        break;
    case K_ALLTOALL:
        s = xmalloc((size_t)nr * blk * es);
        r = xmalloc((size_t)nr * blk * es);
        for (int j = 0; j < nr; j++) pat_fill(s + (size_t)j * blk * es, blk * es, (uint64_t)salt, me, j);
        st = RUN(nb, alltoall, s, r, blk, dt, comm);
        if (call_ok(comm, st, "alltoall"))
            for (int i = 0; i < nr; i++)
                if (!pat_check(r + (size_t)i * blk * es, blk * es, (uint64_t)salt, i, me,
                               "alltoall block")) break;
        break;
    case K_GATHER:
        s = xmalloc(blk * es);
        pat_fill(s, blk * es, (uint64_t)salt, me, 0);
        if (me == root) {
            r = xmalloc((size_t)nr * blk * es);
            memset(r, 0xee, (size_t)nr * blk * es);
            if (inplace) memcpy(r + (size_t)root * blk * es, s, blk * es);
        }
        st = RUN(nb, gather, me == root && inplace ? RCOLL_IN_PLACE : s, r, blk, dt, root, comm);
        if (call_ok(comm, st, "gather") && me == root)
            for (int b = 0; b < nr; b++)
                if (!pat_check(r + (size_t)b * blk * es, blk * es, (uint64_t)salt, b, 0,
                               "gather block")) break;
        break;
    case K_SCATTER:
        r = xmalloc(blk * es);
        memset(r, 0xee, blk * es);
        if (me == root) {
            s = xmalloc((size_t)nr * blk * es);
            for (int b = 0; b < nr; b++)
                pat_fill(s + (size_t)b * blk * es, blk * es, (uint64_t)salt, root, b);
        }
        if (me == root && inplace) {
            st = RUN(nb, scatter, s, (void *)RCOLL_IN_PLACE, blk, dt, root, comm);
            if (call_ok(comm, st, "scatter"))
                pat_check(s + (size_t)root * blk * es, blk * es, (uint64_t)salt, root, root,
                          "scatter (in place)");
        } else {
            st = RUN(nb, scatter, s, r, blk, dt, root, comm);
            if (call_ok(comm, st, "scatter"))
                pat_check(r, blk * es, (uint64_t)salt, root, me, "scatter");
        }
        break;
    case K_ALLGATHERV: {
        size_t cnt[64], dsp[64], tot = 0;
        for (int i = 0; i < nr; i++) cnt[i] = below(4) == 0 ? 0 : below(blk * 2 + 1);
        int rev = below(2);
        for (int k = 0; k < nr; k++) { /* packed, in rank order or reversed */
            int i = rev ? nr - 1 - k : k;
            dsp[i] = tot;
            tot += cnt[i];
        }
        r = xmalloc(tot * es);
        memset(r, 0xee, tot * es);
        if (inplace) {
            pat_fill(r + dsp[me] * es, cnt[me] * es, (uint64_t)salt, me, 1);
            st = RUN(nb, allgatherv, RCOLL_IN_PLACE, cnt[me], r, cnt, dsp, dt, comm);
        } else {
            s = xmalloc(cnt[me] * es);
            pat_fill(s, cnt[me] * es, (uint64_t)salt, me, 1);
            st = RUN(nb, allgatherv, s, cnt[me], r, cnt, dsp, dt, comm);
        }
        if (call_ok(comm, st, "allgatherv"))
            for (int b = 0; b < nr; b++)
                if (!pat_check(r + dsp[b] * es, cnt[b] * es, (uint64_t)salt, b, 1,
                               "allgatherv block")) break;
        break;
    }
    case K_ALLTOALLV: {
        static size_t c[64][64];
        size_t sc[64], sd[64], rc[64], rd[64], st_ = 0, rt = 0;
        size_t pair_max = blk / (size_t)nr * 2 + 1;
        for (int i = 0; i < nr; i++)
            for (int j = 0; j < nr; j++) c[i][j] = below(5) == 0 ? 0 : below(pair_max);
        for (int j = 0; j < nr; j++) {
            sc[j] = c[me][j], sd[j] = st_, st_ += sc[j];
            rc[j] = c[j][me], rd[j] = rt, rt += rc[j];
        }
        s = xmalloc(st_ * es);
        r = xmalloc(rt * es);
        for (int j = 0; j < nr; j++) pat_fill(s + sd[j] * es, sc[j] * es, (uint64_t)salt, me, j + 2);
        st = RUN(nb, alltoallv, s, sc, sd, r, rc, rd, dt, comm);
        if (call_ok(comm, st, "alltoallv"))
            for (int i = 0; i < nr; i++)
                if (!pat_check(r + rd[i] * es, rc[i] * es, (uint64_t)salt, i, me + 2,
                               "alltoallv block")) break;
        break;
    }
    case K_REDUCE_SCATTERV: {
        size_t cnt[64], tot = 0, base = 0;
        for (int i = 0; i < nr; i++) cnt[i] = below(4) == 0 ? 0 : below(blk * 2 + 1);
        for (int i = 0; i < nr; i++) {
            if (i == me) base = tot;
            tot += cnt[i];
        }
        s = xmalloc(tot * es);
        red_fill(s, dt, op, me, 0, tot, salt);
        r = xmalloc(cnt[me] * es);
        st = RUN(nb, reduce_scatterv, s, r, cnt, dt, op, comm);
        if (call_ok(comm, st, "reduce_scatterv"))
            red_check(r, dt, op, base, cnt[me], salt, "reduce_scatterv");
        break;
    }
    case K_BARRIER:
        st = nb ? ({
            rcoll_request_t rq = NULL;
            rcoll_status_t s2 = rcoll_ibarrier(comm, &rq);
            s2 == RCOLL_OK ? rcoll_wait(&rq) : s2;
        })
                : rcoll_barrier(comm);
        call_ok(comm, st, "barrier");
        break;
    case K_SENDRECV: {
        int mode = (int)below(3);
        s = xmalloc(count * es);
        r = xmalloc(count * es);
        if (mode == 0 || nr % 2) { /* a ring inside a group */
            int to = (me + 1) % nr, from = (me + nr - 1) % nr;
            pat_fill(s, count * es, (uint64_t)salt, me, to);
            rcoll_group_start();
            rcoll_send(s, count, dt, to, comm);
            rcoll_recv(r, count, dt, from, comm);
            st = rcoll_group_end();
            if (call_ok(comm, st, "group send/recv ring"))
                pat_check(r, count * es, (uint64_t)salt, from, me, "ring recv");
        } else { /* pairs r, r^1: blocking (lower rank sends first) or isend/irecv + wait */
            int peer = me ^ 1;
            pat_fill(s, count * es, (uint64_t)salt, me, peer);
            if (mode == 1) {
                if (me < peer) {
                    st = rcoll_send(s, count, dt, peer, comm);
                    if (st == RCOLL_OK) st = rcoll_recv(r, count, dt, peer, comm);
                } else {
                    st = rcoll_recv(r, count, dt, peer, comm);
                    if (st == RCOLL_OK) st = rcoll_send(s, count, dt, peer, comm);
                }
            } else {
                rcoll_request_t a = NULL, b = NULL;
                if (me < peer) {
                    st = rcoll_isend(s, count, dt, peer, comm, &a);
                    if (st == RCOLL_OK) st = rcoll_irecv(r, count, dt, peer, comm, &b);
                } else {
                    st = rcoll_irecv(r, count, dt, peer, comm, &b);
                    if (st == RCOLL_OK) st = rcoll_isend(s, count, dt, peer, comm, &a);
                }
                rcoll_status_t s1 = a ? rcoll_wait(&a) : RCOLL_OK;
                rcoll_status_t s2 = b ? rcoll_wait(&b) : RCOLL_OK;
                if (st == RCOLL_OK) st = s1 != RCOLL_OK ? s1 : s2;
            }
            if (call_ok(comm, st, mode == 1 ? "send/recv pair" : "isend/irecv pair"))
                pat_check(r, count * es, (uint64_t)salt, peer, me, "pair recv");
        }
        break;
    }
    }
    free(s);
    free(r);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int rank_fn(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    me = rank, nr = n;
    rng = seed;
    rank_board_t *b = &board[me];
    long warm = n_ops / 10 < 100 ? 100 : n_ops / 10;
    sample(&b->res[S_START]);
    double t0 = now_s();
    for (long i = 0; i < n_ops; i++) {
        one_op(comm, i);
        b->ops = i + 1;
        if (b->failed) break; /* the communicator has failed: later calls would all fail */
        if (i + 1 == 100) sample(&b->res[S_100]);
        if (i + 1 == warm) sample(&b->res[S_WARM]);
    }
    b->seconds = now_s() - t0;
    sample(&b->res[S_END]);
    return b->wrong ? 1 : 0;
}

int main(int argc, char **argv)
{
    int ranks = 4;
    double limit = 3600;
    seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "--ranks")) ranks = atoi(v);
        else if (!strcmp(a, "--ops")) n_ops = atol(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--max-bytes")) max_bytes = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--rss-mib")) rss_bound_mib = atol(v);
        else if (!strcmp(a, "--limit")) limit = atof(v);
        else goto usage;
        i++;
    }
    if (ranks < 1 || ranks > 64 || n_ops < 100) goto usage;
    /* A fixed mmap threshold: the operations' buffers above it go back to the kernel when
     * freed, so that glibc's adaptive threshold (which keeps them in the heap) does not pass
     * for growth of the library. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    board = mmap(NULL, sizeof(rank_board_t) * 64, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (board == MAP_FAILED) return 2;
    memset(board, 0, sizeof(rank_board_t) * 64);
    printf("soak: seed 0x%016" PRIx64 ", %d ranks, %ld ops, sizes 0..%zu B\n", seed, ranks,
           n_ops, max_bytes);
    fflush(stdout);
    mp_result_t res;
    mp_run(ranks, rank_fn, NULL, limit, &res);

    long warm = n_ops / 10 < 100 ? 100 : n_ops / 10;
    int fail = 0;
    for (int r = 0; r < ranks; r++) {
        rank_board_t *b = &board[r];
        printf("rank %d: exit %d, %ld ops in %.1f s (%.0f ops/s), %ld wrong, %ld failed calls\n",
               r, res.codes[r], b->ops, b->seconds, b->seconds > 0 ? b->ops / b->seconds : 0.0,
               b->wrong, b->failed);
        for (int k = 0; k < NSAMPLE; k++)
            printf("  %-14s RSS %6ld KiB  fds %3ld  threads %2ld  /dev/shm rcoll* %ld\n",
                   k == S_WARM ? "after warm-up" : sample_name[k], b->res[k].rss_kib,
                   b->res[k].fds, b->res[k].threads, b->res[k].shm);
        if (res.codes[r] != 0 || b->wrong || b->failed || b->ops != n_ops) {
            printf("  FAIL: %s\n", b->first[0] ? b->first : "rank did not finish");
            fail = 1;
            continue;
        }
        res_t *h = &b->res[S_100], *w = &b->res[S_WARM], *e = &b->res[S_END];
        if (e->fds != h->fds || e->threads != h->threads || e->shm != h->shm) {
            printf("  FAIL: fds/threads/shm at the end (%ld/%ld/%ld) differ from after 100 ops "
                   "(%ld/%ld/%ld)\n", e->fds, e->threads, e->shm, h->fds, h->threads, h->shm);
            fail = 1;
        }
        if (e->rss_kib > w->rss_kib + rss_bound_mib * 1024) {
            printf("  FAIL: RSS grew by %ld KiB after the warm-up (%ld ops), bound %ld MiB\n",
                   e->rss_kib - w->rss_kib, warm, rss_bound_mib);
            fail = 1;
        }
    }
    printf("per kind (rank 0):");
    for (int k = 0; k < NKIND; k++) printf(" %s %ld", kind_name[k], board[0].per_kind[k]);
    printf("\nsoak: %s (seed 0x%016" PRIx64 ", %.1f s)\n", fail ? "FAIL" : "ok", seed,
           res.seconds);
    return fail;
usage:
    fprintf(stderr, "usage: soak [--ranks N] [--ops N>=100] [--seed S] [--max-bytes B] "
                    "[--rss-mib M] [--limit S]\n");
    return 2;
}
