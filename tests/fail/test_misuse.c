/*
 * test_misuse.c - ranks of one communicator that call mismatched collectives get a clear
 * usage error from that very call, on every rank, promptly: never RCOLL_OK, never a hang
 * until RCOLL_TIMEOUT, never an error only at a later call.  Each case forks its ranks (the
 * placement, transport and forced all-reduce algorithm set in each rank's own environment
 * before init), lets them call a few matching collectives, then one mismatched one:
 *   count (1000 vs 1024, and 1000 vs 1000000 across the algorithm thresholds), datatype
 *   (int32 vs float32), op (sum vs max), bcast root (rank r names root r), allreduce vs bcast,
 *   reduce root, allgather count, barrier vs allreduce, reduce_scatter and alltoall counts,
 *   the all-reduce algorithm alone (RCOLL_ALGO differs between ranks);
 * over shared memory on one host, TCP on one host and two hosts of two ranks each
 * (RCOLL_HOST_ID: shared memory inside a host, TCP between), with every all-reduce algorithm
 * that applies to the placement and the cost model's own choice.  Every rank's failing call
 * must return RCOLL_ERR_INVALID_USAGE within LIMIT_S (RCOLL_TIMEOUT is 20 s) with
 *   "rank Q called <Q's call> as operation #N while this rank called <its own call>"
 * in rcoll_comm_last_error, Q a rank whose call differs, N the number of the collective on
 * the communicator (from 1); the next collective must fail too.  Broadcast and reduce run as
 * chains: a rank between the root and the first mismatched rank of the chain may complete
 * its (correct) part with RCOLL_OK; it must fail at its next call, and at least one rank must
 * fail the call itself (docs/design.md, "Mismatched calls").  When only RCOLL_ALGO differs,
 * the communicator's own set-up all-reduces already mismatch: creation fails on every rank
 * with RCOLL_ERR_INVALID_USAGE naming both algorithms.  A point-to-point size
 * mismatch (4000 bytes sent, 400 expected, and the reverse) must fail the receive with
 * RCOLL_ERR_INVALID_USAGE naming the sender and both sizes.
 * Ranks report through shared memory; a watchdog (SIGALRM) ends a rank stuck in init or a
 * call, so a hang costs WATCH_S, and the run starts no case after MISUSE_BUDGET_S seconds
 * (default BUDGET_S; 0: no limit), counting the rest as failed, to stay within meson's
 * timeout.  MISUSE_ONLY=text runs only the cases whose name contains text.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

#define TIMEOUT_S "20" /* RCOLL_TIMEOUT of every rank: detection must not wait for it */
#define LIMIT_S 8.0    /* each rank's failing call returns within this */
#define WATCH_S 9      /* a rank still inside init or one call after this is ended by its
                        * watchdog */
#define CASE_S 25.0    /* the harness kills a case's ranks after this */
#define BUDGET_S 250.0 /* no case starts after this (meson's timeout is 300 s) */
#define MAXR 4
#define MAXCASES 160
#define SMALL ((size_t)1000)
#define LARGE ((size_t)1000000) /* 4 MB of int32: far past one-shot's 16 KiB */
#define WARM_COUNT 16
#define SLOW0_S 1.5 /* a descheduled rank (a loaded machine): longer than the half second the
                     * signature exchange once waited for the differing rank */
#define STR_(x) #x
#define STR(x) STR_(x)

enum { P_SHM, P_TCP, P_MIXED };
static const char *const place_name[] = {"shm", "tcp", "mixed hosts"};

typedef enum { C_ALLREDUCE, C_REDUCE, C_BCAST, C_ALLGATHER, C_REDUCE_SCATTER, C_ALLTOALL,
               C_BARRIER, C_SEND, C_RECV, C_GATHER, C_SCATTER, C_ALLGATHERV, C_ALLTOALLV,
               C_REDUCE_SCATTERV } call_kind_t;

/* One rank's call: count is the element count argument (per rank, per peer, recvcount);
 * root is the root, or the peer of a send/recv. */
typedef struct {
    call_kind_t kind;
    size_t count;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    int root;
    size_t vc[MAXR]; /* allgatherv, reduce_scatterv: recvcounts; alltoallv: sendcounts (each
                      * rank expects `count` from every rank) */
} call_t;

typedef struct {
    char name[160];
    int nranks, place;
    int warmups;            /* matching collectives before the mismatched one (0..2) */
    int bcast_warmups;      /* warm-ups are broadcasts (all-reduces would mismatch already) */
    const char *algo;       /* RCOLL_ALGO of every rank; NULL: unset (the cost model) */
    const char *algo_rank0; /* rank 0's own RCOLL_ALGO: only the algorithm differs */
    int p2p;                /* rank 0 sends call[0], rank 1 receives call[1] */
    int pair_sizes;         /* alltoallv whose signatures agree but one pair's sizes do not:
                             * every rank fails, the sentence names alltoallv */
    int slow0;              /* rank 0 starts its call, then sleeps SLOW0_S before waiting on
                             * it: the others find the mismatch while it does not answer */
    call_t call[MAXR];
} case_t;

static case_t cases[MAXCASES];
static int ncases;

static const char *const dt_names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                       "float16", "bfloat16", "float32", "float64"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

/* What each rank saw, shared with the parent. */
enum { PH_START, PH_INIT, PH_WARMUP, PH_CALL, PH_LATER, PH_DESTROY, PH_DONE };
static const char *const phase_name[] = {"start", "init", "warm-up", "the mismatched call",
                                         "the next collective", "rcoll_comm_destroy", "done"};
typedef struct {
    int phase;        /* the phase entered last */
    int hung;         /* the watchdog ended the rank in `phase` */
    int status, later_status;
    double took;      /* seconds in the mismatched call */
    char msg[512];    /* rcoll_comm_last_error after it (or the init/warm-up failure) */
} seen_t;
static seen_t *seen;

#define EXIT_HUNG 70

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- the cases --------------------------------------------------------------------------- */

static call_t allreduce(size_t count, rcoll_datatype_t dt, rcoll_op_t op)
{
    return (call_t){.kind = C_ALLREDUCE, .count = count, .dt = dt, .op = op, .root = 0};
}

static call_t other(call_kind_t kind, size_t count, int root)
{
    return (call_t){.kind = kind, .count = count, .dt = RCOLL_INT32, .op = RCOLL_SUM,
                    .root = root};
}

static case_t *add_case(int nranks, int place, const char *algo, int warmups, const char *fmt,
                        const char *what)
{
    if (ncases >= MAXCASES) {
        fprintf(stderr, "too many cases (MAXCASES %d)\n", MAXCASES);
        exit(99);
    }
    case_t *c = &cases[ncases++];
    memset(c, 0, sizeof(*c));
    c->nranks = nranks;
    c->place = place;
    c->algo = algo;
    c->warmups = warmups;
    snprintf(c->name, sizeof(c->name), fmt, what, place_name[place], algo ? algo : "auto",
             nranks);
    return c;
}

/* The all-reduce kinds, crossed with every algorithm that applies to the placement.  One-shot
 * forced on a vector above its 16 KiB leaves the choice to the cost model (RCOLL_ALGO's help;
 * a matching 4 MB all-reduce so forced succeeds), so the large counts run with it too: one
 * side then runs one-shot and the other whatever the model picks. */
enum { K_COUNT_SMALL, K_COUNT_LARGE, K_DATATYPE, K_OP, K_COLL_SMALL, K_COLL_LARGE, K_NUM };

static void add_allreduce_kinds(int place)
{
    static const char *const shm_algos[] = {NULL,      "ring",    "rd", "tree",
                                            "oneshot", "twoshot", "cma"};
    static const char *const tcp_algos[] = {NULL, "ring", "rd", "tree"};
    static const char *const mixed_algos[] = {NULL, "ring", "rd", "tree", "hier"};
    const char *const *algos = place == P_SHM ? shm_algos : place == P_TCP ? tcp_algos
                                                                            : mixed_algos;
    int nalgos = place == P_SHM ? 7 : place == P_TCP ? 4 : 5;
    for (int k = 0; k < K_NUM; k++)
        for (int a = 0; a < nalgos; a++) {
            const char *algo = algos[a];
            /* Two ranks mostly; the model's choice for the large counts on four, doubling
             * with a remainder and the tree on three. */
            int n = 2;
            if (place == P_MIXED) n = 4;
            else if (!algo && (k == K_COUNT_LARGE || k == K_COLL_LARGE)) n = 4;
            else if ((k == K_COUNT_SMALL && !strcmp(algo ? algo : "", "rd")) ||
                     (k == K_COLL_SMALL && !strcmp(algo ? algo : "", "tree")))
                n = 3;
            int odd = n - 1;
            size_t count = k == K_COUNT_LARGE || k == K_COLL_LARGE ? LARGE : SMALL;
            const char *what = k == K_COUNT_SMALL ? "count 1000 vs 1024"
                             : k == K_COUNT_LARGE ? "count 1000 vs 1000000"
                             : k == K_DATATYPE ? "datatype int32 vs float32"
                             : k == K_OP ? "op sum vs max"
                             : k == K_COLL_SMALL ? "allreduce vs bcast (root 0), count 1000"
                                                 : "allreduce vs bcast (root 0), count 1000000";
            /* The numbering is checked from operation #1 to #3. */
            int warm = k == K_DATATYPE ? 0 : k == K_OP ? 1 : 2;
            case_t *c = add_case(n, place, algo, warm, "%s, %s, %s, %d ranks", what);
            for (int r = 0; r < n; r++) {
                c->call[r] = allreduce(k == K_COUNT_LARGE ? SMALL : count, RCOLL_INT32,
                                       RCOLL_SUM);
                if (r != odd) continue;
                switch (k) {
                case K_COUNT_SMALL: c->call[r].count = 1024; break;
                case K_COUNT_LARGE: c->call[r].count = LARGE; break;
                case K_DATATYPE: c->call[r].dt = RCOLL_FLOAT32; break;
                case K_OP: c->call[r].op = RCOLL_MAX; break;
                default: c->call[r] = other(C_BCAST, count, 0); break;
                }
            }
        }
}

/* Every rank names itself as the root (2 ranks: root 0 vs root 1). */
static void add_bcast_roots(int place, size_t count, int n)
{
    case_t *c = add_case(n, place, NULL, 2, "%s, %s, %s, %d ranks",
                         count == SMALL ? "bcast root r on rank r, count 1000"
                                        : "bcast root r on rank r, count 1000000");
    for (int r = 0; r < n; r++) c->call[r] = other(C_BCAST, count, r);
}

/* The other collectives: small counts, the cost model's algorithm; the last rank differs. */
static void add_others(int place, int n)
{
    int odd = n - 1;
    case_t *c = add_case(n, place, NULL, 2, "%s, %s, %s, %d ranks", "reduce root 0 vs 1");
    for (int r = 0; r < n; r++) c->call[r] = other(C_REDUCE, SMALL, r == odd ? 1 : 0);
    c = add_case(n, place, NULL, 2, "%s, %s, %s, %d ranks", "allgather count 1000 vs 1024");
    for (int r = 0; r < n; r++) c->call[r] = other(C_ALLGATHER, r == odd ? 1024 : SMALL, 0);
    c = add_case(n, place, NULL, 2, "%s, %s, %s, %d ranks", "barrier vs allreduce(count=1)");
    for (int r = 0; r < n; r++)
        c->call[r] = r == odd ? other(C_BARRIER, 0, 0) : allreduce(1, RCOLL_INT32, RCOLL_SUM);
}

static void add_block(call_kind_t kind, int place, int n, const char *what)
{
    case_t *c = add_case(n, place, NULL, 2, "%s, %s, %s, %d ranks", what);
    for (int r = 0; r < n; r++) c->call[r] = other(kind, r == n - 1 ? 1024 : SMALL, 0);
}

/* Only the all-reduce algorithm differs: rank 0 forces algo0, the others algo. */
static void add_algo_mismatch(int place, int n, const char *algo0, const char *algo)
{
    char what[96];
    snprintf(what, sizeof(what), "algorithm %s on rank 0 vs %s, allreduce count 1000", algo0,
             algo);
    case_t *c = add_case(n, place, algo, 2, "%s, %s, %s, %d ranks", what);
    c->algo_rank0 = algo0;
    c->bcast_warmups = 1;
    for (int r = 0; r < n; r++) c->call[r] = allreduce(SMALL, RCOLL_INT32, RCOLL_SUM);
    snprintf(c->name, sizeof(c->name), "%s, %s, %d ranks", what, place_name[place], n);
}

static void add_p2p(int place, size_t sent, size_t expected)
{
    char what[64];
    snprintf(what, sizeof(what), "send %zu B vs recv %zu B", sent, expected);
    case_t *c = add_case(2, place, NULL, 0, "%s, %s, %s, %d ranks", what);
    c->p2p = 1;
    c->call[0] = (call_t){.kind = C_SEND, .count = sent, .dt = RCOLL_UINT8, .root = 1};
    c->call[1] = (call_t){.kind = C_RECV, .count = expected, .dt = RCOLL_UINT8, .root = 0};
    snprintf(c->name, sizeof(c->name), "%s, %s, 2 ranks", what, place_name[place]);
}

/* The rooted and uneven collectives: v(kind, count) gives every rank counts of `count`. */
static call_t vcall(call_kind_t kind, size_t count, int root, int n)
{
    call_t k = other(kind, count, root);
    for (int i = 0; i < n; i++) k.vc[i] = count;
    return k;
}

static void add_vcolls(void)
{
    case_t *c = add_case(3, P_SHM, NULL, 2, "%s, %s, %s, %d ranks", "gather root 0 vs 1");
    for (int r = 0; r < 3; r++) c->call[r] = vcall(C_GATHER, SMALL, r == 2 ? 1 : 0, 3);
    c = add_case(2, P_TCP, NULL, 2, "%s, %s, %s, %d ranks", "scatter root r on rank r");
    for (int r = 0; r < 2; r++) c->call[r] = vcall(C_SCATTER, SMALL, r, 2);
    c = add_case(4, P_MIXED, NULL, 2, "%s, %s, %s, %d ranks", "gather vs scatter (root 0)");
    for (int r = 0; r < 4; r++) c->call[r] = vcall(r == 3 ? C_SCATTER : C_GATHER, SMALL, 0, 4);
    /* the last rank's recvcounts differ in rank 0's entry: a different sum */
    c = add_case(3, P_SHM, NULL, 2, "%s, %s, %s, %d ranks", "allgatherv recvcounts[0] 1000 vs 1024");
    for (int r = 0; r < 3; r++) c->call[r] = vcall(C_ALLGATHERV, SMALL, 0, 3);
    c->call[2].vc[0] = 1024;
    /* the same sum, another distribution: only the digest tells them apart */
    c = add_case(3, P_TCP, NULL, 2, "%s, %s, %s, %d ranks",
                 "allgatherv recvcounts {1000,1000,1000} vs {1024,976,1000}");
    for (int r = 0; r < 3; r++) c->call[r] = vcall(C_ALLGATHERV, SMALL, 0, 3);
    c->call[2].vc[0] = 1024;
    c->call[2].vc[1] = 976;
    c = add_case(2, P_SHM, NULL, 2, "%s, %s, %s, %d ranks", "reduce_scatterv recvcounts[0] 1000 vs 1024");
    for (int r = 0; r < 2; r++) c->call[r] = vcall(C_REDUCE_SCATTERV, SMALL, 0, 2);
    c->call[1].vc[0] = 1024;
    c = add_case(3, P_TCP, NULL, 2, "%s, %s, %s, %d ranks", "alltoallv int32 vs float32");
    for (int r = 0; r < 3; r++) c->call[r] = vcall(C_ALLTOALLV, SMALL, 0, 3);
    c->call[2].dt = RCOLL_FLOAT32;
    for (int p = P_SHM; p <= P_TCP; p++) {
        c = add_case(3, p, NULL, 2, "%s, %s, %s, %d ranks",
                     "alltoallv sendcounts[0] 1024 on the last rank, rank 0 expects 1000");
        c->pair_sizes = 1;
        for (int r = 0; r < 3; r++) c->call[r] = vcall(C_ALLTOALLV, SMALL, 0, 3);
        c->call[2].vc[0] = 1024;
    }
}

/* Rank 0 is slow to answer (busy or descheduled) after sending its part of the call: the
 * others find the mismatch at once and must still name rank 0's call, which it says only
 * when it runs again. */
static void add_slow_peer(void)
{
    case_t *c = add_case(3, P_TCP, NULL, 2, "%s, %s, %s, %d ranks",
                         "count 1000 vs 1024, rank 0 slow to answer");
    c->slow0 = 1;
    for (int r = 0; r < 3; r++) c->call[r] = allreduce(r == 0 ? SMALL : 1024, RCOLL_INT32,
                                                       RCOLL_SUM);
}

static void build_cases(void)
{
    add_vcolls();
    for (int p = P_SHM; p <= P_MIXED; p++) add_allreduce_kinds(p);
    add_bcast_roots(P_SHM, SMALL, 3);
    add_bcast_roots(P_SHM, LARGE, 2);
    add_bcast_roots(P_TCP, SMALL, 2);
    add_bcast_roots(P_TCP, LARGE, 3);
    add_bcast_roots(P_MIXED, SMALL, 4);
    add_bcast_roots(P_MIXED, LARGE, 4);
    add_others(P_SHM, 2);
    add_others(P_TCP, 3);
    add_others(P_MIXED, 4);
    add_block(C_REDUCE_SCATTER, P_SHM, 2, "reduce_scatter count 1000 vs 1024");
    add_block(C_ALLTOALL, P_TCP, 3, "alltoall count 1000 vs 1024");
    add_algo_mismatch(P_SHM, 3, "ring", "rd");
    add_algo_mismatch(P_MIXED, 4, "tree", "hier");
    add_p2p(P_SHM, 4000, 400);
    add_p2p(P_SHM, 400, 4000);
    add_p2p(P_TCP, 4000, 400);
    add_p2p(P_TCP, 400, 4000);
    add_slow_peer();
}

/* The library's digest of a counts array (core/sig.h): FNV-1a over the counts as 64-bit
 * little-endian words, the two halves XORed. */
static unsigned long long counts_digest(const size_t *counts, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            h ^= ((uint64_t)counts[i] >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    return (unsigned long long)((h >> 32) ^ (h & 0xffffffffull));
}

static size_t sum_of(const size_t *v, int n)
{
    size_t s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s;
}

/* The signature the library must print for rank r's call in case c. */
static void sig_of(const case_t *c, int r, char *buf, size_t len)
{
    const call_t *k = &c->call[r];
    const char *dt = dt_names[k->dt], *op = op_names[k->op];
    char alg[48] = "";
    if (c->algo_rank0)
        snprintf(alg, sizeof(alg), "; algorithm %s", r == 0 ? c->algo_rank0 : c->algo);
    switch (k->kind) {
    case C_ALLREDUCE:
        snprintf(buf, len, "allreduce(count=%zu, %s, %s%s)", k->count, dt, op, alg);
        break;
    case C_REDUCE:
        snprintf(buf, len, "reduce(count=%zu, %s, %s, root=%d)", k->count, dt, op, k->root);
        break;
    case C_BCAST: snprintf(buf, len, "bcast(count=%zu, %s, root=%d)", k->count, dt, k->root); break;
    case C_ALLGATHER: snprintf(buf, len, "allgather(count=%zu, %s)", k->count, dt); break;
    case C_REDUCE_SCATTER:
        snprintf(buf, len, "reduce_scatter(count=%zu, %s, %s)", k->count, dt, op);
        break;
    case C_ALLTOALL: snprintf(buf, len, "alltoall(count=%zu, %s)", k->count, dt); break;
    case C_BARRIER: snprintf(buf, len, "barrier()"); break;
    case C_SEND: snprintf(buf, len, "send(count=%zu, %s, peer=%d)", k->count, dt, k->root); break;
    case C_RECV: snprintf(buf, len, "recv(count=%zu, %s, peer=%d)", k->count, dt, k->root); break;
    case C_GATHER:
    case C_SCATTER:
        snprintf(buf, len, "%s(count=%zu, %s, root=%d)", k->kind == C_GATHER ? "gather" : "scatter",
                 k->count, dt, k->root);
        break;
    case C_ALLGATHERV:
    case C_REDUCE_SCATTERV:
        snprintf(buf, len, "%s(total=%zu, counts digest %08llx, %s%s%s)",
                 k->kind == C_ALLGATHERV ? "allgatherv" : "reduce_scatterv",
                 sum_of(k->vc, c->nranks), counts_digest(k->vc, c->nranks), dt,
                 k->kind == C_ALLGATHERV ? "" : ", ", k->kind == C_ALLGATHERV ? "" : op);
        break;
    case C_ALLTOALLV: snprintf(buf, len, "alltoallv(%s)", dt); break;
    }
}

/* --- one rank ----------------------------------------------------------------------------- */

static int my_rank;

static void on_alarm(int sig)
{
    (void)sig;
    seen[my_rank].hung = 1;
    _exit(EXIT_HUNG);
}

static void phase(seen_t *s, int ph)
{
    s->phase = ph;
    alarm(ph == PH_DONE ? 0 : WATCH_S);
}

/* Rank-dependent input: n elements of dt. */
static void *filled(size_t n, rcoll_datatype_t dt, int rank)
{
    size_t es = rcoll_datatype_size(dt);
    unsigned char *b = malloc(n * es + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (dt == RCOLL_FLOAT32) {
            float v = (float)(rank * 10 + (int)(i % 7));
            memcpy(b + i * es, &v, sizeof(v));
        } else if (dt == RCOLL_INT32) {
            int32_t v = rank * 1000 + (int32_t)(i % 97);
            memcpy(b + i * es, &v, sizeof(v));
        } else {
            memset(b + i * es, rank * 16 + (int)(i % 16), es);
        }
    }
    return b;
}

static rcoll_status_t call(const call_t *k, void *send, void *recv, rcoll_comm_t comm, int rank,
                           int n)
{
    size_t dsp[MAXR], rc[MAXR], rd[MAXR], at = 0;
    for (int i = 0; i < n; i++) {
        dsp[i] = at;
        at += k->vc[i];
        rc[i] = k->count;
        rd[i] = (size_t)i * k->count;
    }
    switch (k->kind) {
    case C_GATHER: return rcoll_gather(send, recv, k->count, k->dt, k->root, comm);
    case C_SCATTER: return rcoll_scatter(send, recv, k->count, k->dt, k->root, comm);
    case C_ALLGATHERV:
        return rcoll_allgatherv(send, k->vc[rank], recv, k->vc, dsp, k->dt, comm);
    case C_REDUCE_SCATTERV: return rcoll_reduce_scatterv(send, recv, k->vc, k->dt, k->op, comm);
    case C_ALLTOALLV: return rcoll_alltoallv(send, k->vc, dsp, recv, rc, rd, k->dt, comm);
    case C_ALLREDUCE: return rcoll_allreduce(send, recv, k->count, k->dt, k->op, comm);
    case C_REDUCE: return rcoll_reduce(send, recv, k->count, k->dt, k->op, k->root, comm);
    case C_BCAST: return rcoll_bcast(send, k->count, k->dt, k->root, comm);
    case C_ALLGATHER: return rcoll_allgather(send, recv, k->count, k->dt, comm);
    case C_REDUCE_SCATTER: return rcoll_reduce_scatter(send, recv, k->count, k->dt, k->op, comm);
    case C_ALLTOALL: return rcoll_alltoall(send, recv, k->count, k->dt, comm);
    case C_BARRIER: return rcoll_barrier(comm);
    case C_SEND: return rcoll_send(send, k->count, k->dt, k->root, comm);
    case C_RECV: return rcoll_recv(recv, k->count, k->dt, k->root, comm);
    }
    return RCOLL_ERR_INTERNAL;
}

/* Rank 0 of a slow0 case: its all-reduce is started and driven once (its first messages
 * leave), then it does not answer for SLOW0_S before waiting for it. */
static rcoll_status_t call_slowly(const call_t *k, void *send, void *recv, rcoll_comm_t comm)
{
    rcoll_request_t req;
    rcoll_status_t st = rcoll_iallreduce(send, recv, k->count, k->dt, k->op, comm, &req);
    int done = 0;
    if (st == RCOLL_OK) st = rcoll_test(&req, &done);
    if (st != RCOLL_OK || done) return st;
    struct timespec ts = {(time_t)SLOW0_S, (long)((SLOW0_S - (int)SLOW0_S) * 1e9)};
    nanosleep(&ts, NULL);
    return rcoll_wait(&req);
}

/* The matching collectives before the mismatched one: an all-reduce and a broadcast (two
 * broadcasts where the ranks force different all-reduce algorithms), results checked. */
static int warm_up(const case_t *c, rcoll_comm_t comm, int rank, int n, seen_t *s)
{
    int32_t v[WARM_COUNT];
    for (int w = 0; w < c->warmups; w++) {
        int bcast = c->bcast_warmups || w == 1;
        int root = w == 0 ? 0 : n - 1;
        for (int i = 0; i < WARM_COUNT; i++)
            v[i] = bcast ? (rank == root ? 100 + i : -1) : rank + 1;
        rcoll_status_t st = bcast ? rcoll_bcast(v, WARM_COUNT, RCOLL_INT32, root, comm)
                                  : rcoll_allreduce(RCOLL_IN_PLACE, v, WARM_COUNT, RCOLL_INT32,
                                                    RCOLL_SUM, comm);
        if (st != RCOLL_OK) {
            snprintf(s->msg, sizeof(s->msg), "warm-up %d (%s) failed: %s: %s", w + 1,
                     bcast ? "bcast" : "allreduce", rcoll_status_string(st),
                     rcoll_comm_last_error(comm));
            return 1;
        }
        for (int i = 0; i < WARM_COUNT; i++)
            if (v[i] != (bcast ? 100 + i : n * (n + 1) / 2)) {
                snprintf(s->msg, sizeof(s->msg), "warm-up %d (%s): element %d is %d", w + 1,
                         bcast ? "bcast" : "allreduce", i, (int)v[i]);
                return 1;
            }
    }
    return 0;
}

static int run_rank(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    const case_t *c = arg;
    seen_t *s = &seen[rank];
    my_rank = rank;
    signal(SIGALRM, on_alarm);
    /* This rank's own environment, read by its init. */
    setenv("RCOLL_TRANSPORT", c->place == P_TCP ? "tcp" : "auto", 1);
    if (c->place == P_MIXED) setenv("RCOLL_HOST_ID", rank < 2 ? "A" : "B", 1);
    else unsetenv("RCOLL_HOST_ID");
    const char *algo = rank == 0 && c->algo_rank0 ? c->algo_rank0 : c->algo;
    if (algo) setenv("RCOLL_ALGO", algo, 1);
    else unsetenv("RCOLL_ALGO");

    phase(s, PH_INIT);
    rcoll_comm_t comm;
    double t_init = now_s();
    rcoll_status_t st = rcoll_comm_init_rank(n, id, rank, &comm);
    if (c->algo_rank0) { /* creation itself is the mismatched call */
        s->took = now_s() - t_init;
        s->status = st;
        snprintf(s->msg, sizeof(s->msg), "%s", st == RCOLL_OK ? "" : rcoll_last_init_error());
        if (st == RCOLL_OK) rcoll_comm_destroy(comm);
        phase(s, PH_DONE);
        return 0;
    }
    if (st != RCOLL_OK) {
        snprintf(s->msg, sizeof(s->msg), "init: %s: %s", rcoll_status_string(st),
                 rcoll_last_init_error());
        return 90;
    }
    const call_t *k = &c->call[rank];
    int blocks = k->kind == C_REDUCE_SCATTER || k->kind == C_ALLTOALL || k->kind >= C_GATHER;
    int gathers = k->kind == C_ALLGATHER || k->kind == C_ALLTOALL || k->kind >= C_GATHER;
    size_t per = k->kind >= C_GATHER ? 2 * k->count : k->count; /* room for uneven counts */
    void *send = filled(blocks ? (size_t)n * per : k->count, k->dt, rank);
    void *recv = filled(gathers ? (size_t)n * per : k->count, k->dt, -1);
    if (!send || !recv) {
        snprintf(s->msg, sizeof(s->msg), "out of memory");
        rcoll_comm_abort(comm);
        return 92;
    }

    phase(s, PH_WARMUP);
    if (warm_up(c, comm, rank, n, s)) {
        rcoll_comm_abort(comm);
        return 93;
    }

    phase(s, PH_CALL);
    double t0 = now_s();
    st = c->slow0 && rank == 0 ? call_slowly(k, send, recv, comm)
                               : call(k, send, recv, comm, rank, n);
    s->took = now_s() - t0;
    s->status = st;
    snprintf(s->msg, sizeof(s->msg), "%s", rcoll_comm_last_error(comm));

    /* The communicator has failed: the next collective fails too (not for send/recv). */
    phase(s, PH_LATER);
    if (!c->p2p) s->later_status = rcoll_barrier(comm);

    phase(s, PH_DESTROY);
    rcoll_comm_destroy(comm);
    phase(s, PH_DONE);
    free(send);
    free(recv);
    return 0;
}

/* --- the parent's checks -------------------------------------------------------------------- */

static const case_t *cur;
static const char *note_text = "";
static const char *note(void) { return note_text; }

/* Whether msg has "rank Q called <sig Q> as operation #N" for a Q whose call differs from
 * rank r's, and "while this rank called <sig r>" after it.  why: the reason it does not. */
static int message_ok(const case_t *c, int r, const char *msg, char *why, size_t len)
{
    char mine[160], theirs[160];
    sig_of(c, r, mine, sizeof(mine));
    int nop = c->warmups + 1;
    snprintf(why, len, "no \"rank <Q> called \"");
    for (const char *p = strstr(msg, "rank "); p; p = strstr(p + 1, "rank ")) {
        const char *d = p + 5;
        if (*d < '0' || *d > '9') continue;
        char *end;
        long q = strtol(d, &end, 10);
        if (strncmp(end, " called ", 8) != 0) continue;
        const char *after = end + 8;
        if (q < 0 || q >= c->nranks || q == r) {
            snprintf(why, len, "names rank %ld, not another rank of the %d", q, c->nranks);
            continue;
        }
        sig_of(c, (int)q, theirs, sizeof(theirs));
        if (!strcmp(theirs, mine)) {
            snprintf(why, len, "names rank %ld, whose call is the same as this rank's (%s)", q,
                     mine);
            continue;
        }
        size_t tl = strlen(theirs);
        if (strncmp(after, theirs, tl) != 0) {
            snprintf(why, len, "after \"rank %ld called \" expected \"%s\"", q, theirs);
            continue;
        }
        char num[48];
        snprintf(num, sizeof(num), " as operation #%d", nop);
        size_t nl = strlen(num);
        const char *a = after + tl;
        if (strncmp(a, num, nl) != 0 || (a[nl] >= '0' && a[nl] <= '9')) {
            snprintf(why, len, "after rank %ld's call expected \"%s\"", q, num);
            continue;
        }
        char tail[200];
        snprintf(tail, sizeof(tail), "while this rank called %s", mine);
        const char *w = strstr(a + nl, tail);
        if (!w) {
            snprintf(why, len, "no \"%s\"", tail);
            continue;
        }
        /* Equal operation numbers: the short form, no " as operation #" after this rank's. */
        if (!strncmp(w + strlen(tail), " as operation #", 15)) {
            snprintf(why, len, "both calls are operation #%d: expected no number after "
                     "this rank's call", nop);
            continue;
        }
        return 1;
    }
    return 0;
}

static void check_rank(const case_t *c, int r, const mp_result_t *res)
{
    const seen_t *s = &seen[r];
    char mine[160];
    sig_of(c, r, mine, sizeof(mine));
    note_text = s->msg;
    int code = res->codes[r];
    /* The process: it ended by itself, not hung, not crashed. */
    if (s->phase <= PH_WARMUP) {
        CHECK(0, "%s: rank %d did not reach the mismatched call: %s (%s, exit code %d)",
              c->name, r, s->hung || code == MP_TIMEOUT_EXIT ? "hung" : "failed",
              phase_name[s->phase], code);
        return;
    }
    if (s->phase == PH_CALL) {
        CHECK(0, "%s: rank %d: %s %s (exit code %d)", c->name, r, mine,
              s->hung ? "did not return within " STR(WATCH_S) " s (the watchdog ended the rank)"
              : code == MP_TIMEOUT_EXIT ? "did not return (the harness killed the rank)"
                                        : "never returned: the rank died", code);
        return;
    }
    CHECK(code == 0 && s->phase == PH_DONE, "%s: rank %d %s in %s (exit code %d)", c->name, r,
          s->hung || code == MP_TIMEOUT_EXIT ? "hung" : "died", phase_name[s->phase], code);
    /* The failing call itself. */
    int is_sender = c->p2p && r == 0;
    if (is_sender) return; /* the send may succeed or fail: only no hang, no crash */
    if (c->algo_rank0) { /* creation failed, naming both algorithms */
        char a0[48], a1[48];
        snprintf(a0, sizeof(a0), "; algorithm %s)", c->algo_rank0);
        snprintf(a1, sizeof(a1), "; algorithm %s)", c->algo);
        CHECK(s->status == RCOLL_ERR_INVALID_USAGE, "%s: rank %d: creation returned %s (%d), "
              "expected RCOLL_ERR_INVALID_USAGE", c->name, r,
              rcoll_status_string((rcoll_status_t)s->status), s->status);
        CHECK(s->took < LIMIT_S, "%s: rank %d: creation took %.2f s to fail", c->name, r,
              s->took);
        /* "while this rank called", or "while rank N called" from a rank that had not begun
         * that set-up operation when the others found the mismatch. */
        const char *w = strstr(s->msg, " called allreduce(");
        CHECK(strstr(s->msg, a0) && strstr(s->msg, a1) && strstr(s->msg, "set-up operation #") &&
                  w && strstr(w + 1, " called allreduce(") && strstr(s->msg, "while "),
              "%s: rank %d's init error names both calls with their algorithms (\"%s\", "
              "\"%s\") as a set-up operation", c->name, r, a0, a1);
        return;
    }
    /* A chain (broadcast, reduce): a rank upstream of the first mismatch may finish its part;
     * then its next call fails.  Some rank must fail the call itself (run_one checks). */
    if (s->status == RCOLL_OK && (c->call[r].kind == C_BCAST || c->call[r].kind == C_REDUCE ||
                                  c->call[r].kind == C_GATHER || c->call[r].kind == C_SCATTER ||
                                  c->pair_sizes)) {
        CHECK(s->phase > PH_LATER && s->later_status < 0, "%s: rank %d: %s completed its chain "
              "part, but the next collective returned %s", c->name, r, mine,
              rcoll_status_string((rcoll_status_t)s->later_status));
        return;
    }
    CHECK(s->status == RCOLL_ERR_INVALID_USAGE,
          "%s: rank %d: %s returned %s (%d), expected RCOLL_ERR_INVALID_USAGE", c->name, r,
          mine, rcoll_status_string((rcoll_status_t)s->status), s->status);
    CHECK(s->took < LIMIT_S, "%s: rank %d: %s took %.2f s to fail (limit %.0f s)", c->name, r,
          mine, s->took, LIMIT_S);
    if (c->p2p) {
        char sent[32], expected[32];
        snprintf(sent, sizeof(sent), "%zu", c->call[0].count);
        snprintf(expected, sizeof(expected), "%zu", c->call[1].count);
        CHECK(strstr(s->msg, "rank 0") && strstr(s->msg, sent) && strstr(s->msg, expected),
              "%s: rank 1's last error names \"rank 0\", %s and %s bytes", c->name, sent,
              expected);
        return;
    }
    if (c->pair_sizes) { /* equal signatures: the sentence names the call and the sizes */
        CHECK(strstr(s->msg, "alltoallv(int32)") && strstr(s->msg, "4096") &&
                  strstr(s->msg, "4000"), "%s: rank %d's last error names alltoallv(int32) and "
              "both sizes (4096 and 4000 bytes)", c->name, r);
        return;
    }
    char why[256];
    CHECK(message_ok(c, r, s->msg, why, sizeof(why)),
          "%s: rank %d's last error names another rank's call as operation #%d and this "
          "rank's %s: %s", c->name, r, c->warmups + 1, mine, why);
    if (s->phase > PH_LATER)
        CHECK(s->later_status < 0, "%s: rank %d: the next collective (barrier) returned %s, "
              "expected an error", c->name, r,
              rcoll_status_string((rcoll_status_t)s->later_status));
}

static double slowest_s;
static const char *slowest = "";

static void run_one(void)
{
    const case_t *c = cur;
    memset(seen, 0, MAXR * sizeof(seen_t));
    mp_result_t res;
    mp_run_raw(c->nranks, run_rank, (void *)c, CASE_S, &res);
    if (res.seconds > slowest_s) {
        slowest_s = res.seconds;
        slowest = c->name;
    }
    int failed_in_call = 0;
    for (int r = 0; r < c->nranks; r++) {
        check_rank(c, r, &res);
        failed_in_call += seen[r].phase > PH_CALL && seen[r].status == RCOLL_ERR_INVALID_USAGE;
    }
    note_text = "";
    CHECK(failed_in_call > 0, "%s: no rank failed the mismatched call itself", c->name);
    const char *show = getenv("MISUSE_SHOW_S");
    if (!check_case_failed() && !(show && res.seconds > atof(show))) return;
    /* What each rank saw, in one line each (check failures past the 100th are not printed;
     * MISUSE_SHOW_S=x prints those of passing cases longer than x seconds too). */
    printf("  %s: %.1f s:\n", c->name, res.seconds);
    for (int r = 0; r < c->nranks; r++) {
        const seen_t *s = &seen[r];
        char mine[160];
        sig_of(c, r, mine, sizeof(mine));
        if (s->phase <= PH_CALL)
            printf("  rank %d: %s in %s (exit code %d): %s\n", r,
                   s->hung || res.codes[r] == MP_TIMEOUT_EXIT ? "hung" : "ended",
                   phase_name[s->phase], res.codes[r], s->phase == PH_CALL ? mine : s->msg);
        else
            printf("  rank %d: %s: %s after %.2f s, next %s%s: %s\n", r, mine,
                   rcoll_status_string((rcoll_status_t)s->status), s->took,
                   c->p2p ? "(none)" : rcoll_status_string((rcoll_status_t)s->later_status),
                   s->phase == PH_DONE ? "" : s->hung ? ", then hung" : ", then died", s->msg);
    }
}

static double budget_s = BUDGET_S;

static void not_run(void)
{
    CHECK(0, "%s: not run: the budget of %.0f s (MISUSE_BUDGET_S) was spent (earlier cases "
          "were slow or hung)", cur->name, budget_s);
}

int main(void)
{
    setenv("RCOLL_TIMEOUT", TIMEOUT_S, 1);
    setenv("RCOLL_DEBUG", "NONE", 0);
    unsetenv("RCOLL_ALGO");
    const char *b = getenv("MISUSE_BUDGET_S");
    if (b) budget_s = atof(b);
    seen = mmap(NULL, MAXR * sizeof(seen_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                -1, 0);
    if (seen == MAP_FAILED) return 99;
    check_set_note(note);
    build_cases();
    const char *only = getenv("MISUSE_ONLY");
    printf("%d cases%s%s\n", ncases, only ? ", only those naming " : "", only ? only : "");
    fflush(stdout);
    double t_all = now_s();
    for (int i = 0; i < ncases; i++) {
        cur = &cases[i];
        if (only && !strstr(cur->name, only)) continue;
        int over = budget_s > 0 && now_s() - t_all > budget_s;
        check_case(cur->name, over ? not_run : run_one);
    }
    printf("total %.1f s (slowest case %.1f s: %s)\n", now_s() - t_all, slowest_s, slowest);
    return check_summary();
}
