/*
 * algo.h - the all-reduce algorithms as a table of ops (CONVENTIONS.md 6).  Each algorithm
 * lives in its own file and exports one const rcoll_algo_ops_t; RCOLL_ALGO_LIST below is the
 * one list of them (enum, names, table and the RCOLL_ALGO values all come from it).  Core
 * fills an rcoll_algo_ctx_t once per communicator and runs an operation through
 * predict / start / progress; algo/ never calls core/ (it asks for connections through the
 * operation's `want` list instead).
 */
#ifndef RCOLL_ALGO_ALGO_H
#define RCOLL_ALGO_ALGO_H

#include <stddef.h>
#include <stdint.h>
#include "algo/cma.h"
#include "algo/exec.h"
#include "algo/oneshot.h"
#include "algo/twoshot.h"
#include "rcoll.h"
#include "util/config.h"

/* The all-reduce algorithms, X(ID, name): enum RCOLL_ALG_<ID>, the RCOLL_ALGO value "name",
 * and the ops rcoll_algo_<name> (defined in the algorithm's file).  Order is the tie-break
 * of the cost model (the earlier wins) and the order of the INFO line's predictions.  A new
 * algorithm is one line here (docs/design.md, "How to add an all-reduce algorithm"). */
#define RCOLL_ALGO_LIST(X)                                                                     \
    X(RING, ring)       /* flat.c */                                                           \
    X(RD, rd)           /* flat.c: recursive doubling */                                       \
    X(ONESHOT, oneshot) /* oneshot.c */                                                        \
    X(TREE, tree)       /* flat.c: double binary tree */                                       \
    X(TWOSHOT, twoshot) /* twoshot.c */                                                        \
    X(CMA, cma)         /* cma.c: single-copy over cross-memory attach */                      \
    X(HIER, hier)       /* hier.c */                                                           \
    /* end of the list */

/* The broadcast algorithms, X(ID, name): RCOLL_BCAST_ALG_<ID>, the RCOLL_ALGO_BCAST value
 * "name", the ops rcoll_bcast_<name> (in the algorithm's file).  Order: the tie-break. */
#define RCOLL_BCAST_ALGO_LIST(X)                                                               \
    X(CHAIN, chain)       /* bcast_chain.c: pipelined chain along the ring */                  \
    X(BINOMIAL, binomial) /* bcast_binomial.c: binomial tree from the root */                  \
    /* end of the list */

/* The all-gather algorithms, X(ID, name): RCOLL_ALLGATHER_ALG_<ID>, RCOLL_ALGO_ALLGATHER's
 * value "name", the ops rcoll_allgather_<name>. */
#define RCOLL_ALLGATHER_ALGO_LIST(X)                                                           \
    X(RING, ring) /* allgather_ring.c: ring in rank order */                                   \
    X(RD, rd)     /* allgather_rd.c: recursive doubling, power-of-two ranks */                 \
    X(BRUCK, bruck) /* allgather_bruck.c: ceil(log2 n) rounds, any rank count */             \
    /* end of the list */

#define RCOLL_ALGO_ENUM_(id, name) RCOLL_ALG_##id,
typedef enum {
    RCOLL_ALG_AUTO = -1, /* RCOLL_ALGO=auto: the cost model chooses */
    RCOLL_ALGO_LIST(RCOLL_ALGO_ENUM_)
    RCOLL_ALG_COUNT
} rcoll_allreduce_alg_t;
#undef RCOLL_ALGO_ENUM_
#define RCOLL_BCAST_ENUM_(id, name) RCOLL_BCAST_ALG_##id,
enum { RCOLL_BCAST_ALGO_LIST(RCOLL_BCAST_ENUM_) RCOLL_BCAST_ALG_COUNT };
#undef RCOLL_BCAST_ENUM_
#define RCOLL_ALLGATHER_ENUM_(id, name) RCOLL_ALLGATHER_ALG_##id,
enum { RCOLL_ALLGATHER_ALGO_LIST(RCOLL_ALLGATHER_ENUM_) RCOLL_ALLGATHER_ALG_COUNT };
#undef RCOLL_ALLGATHER_ENUM_

/* The collectives that choose among algorithms, each with its table (rcoll_algo_tables). */
typedef enum {
    RCOLL_COLL_ALLREDUCE,
    RCOLL_COLL_BCAST,
    RCOLL_COLL_ALLGATHER,
    RCOLL_COLL_COUNT
} rcoll_coll_t;

/* What rcoll_algo_choose_coll remembers per collective: the last choice and what was logged
 * per size class. */
typedef struct {
    int last_alg; /* -1: none yet */
    size_t last_bytes;
    uint8_t logged[64];
} rcoll_algo_memo_t;

typedef struct rcoll_tuning rcoll_tuning_t; /* algo/select.h */

/* An algorithm's own cost on one communicator, measured by the set-up probe (core/probe.c):
 * its microseconds at the sizes its ops name (probe_bytes), joined by straight lines, flat
 * below the first and continued with the last segment's slope above the last.  Replaces the
 * model's formula for that algorithm where the formula applies. */
#define RCOLL_ALGO_PROBE_POINTS 4
typedef struct {
    int npoints; /* 0: not measured */
    double bytes[RCOLL_ALGO_PROBE_POINTS], us[RCOLL_ALGO_PROBE_POINTS];
} rcoll_algo_fit_t;
/* The fitted line's microseconds at `bytes` (npoints > 0). */
double rcoll_algo_fit_eval(const rcoll_algo_fit_t *f, size_t bytes);

/* What the algorithms know of a communicator.  Core fills it at creation (core/comm.c:
 * tuning and forced in rcoll_comm_alloc, the shape once the connections and staging exist,
 * the host segment and all_shm as they are set up) and never changes it afterwards; the
 * counters below are the algorithms' own. */
typedef struct rcoll_algo_ctx {
    int nranks, rank;
    const rcoll_link_t *link;     /* connections to peers (by rank) and the staging memory */
    const int *ring_map;          /* ring position -> rank, host-grouped (NULL: identity) */
    int ring_pos;                 /* this rank's ring position */
    int nhosts;                   /* hosts (ranks grouped by host identity) */
    int ppn;                      /* ranks per host when every host has as many, else 0 */
    const int *local_group;       /* [ppn] this host's ranks (when nhosts > 1 and ppn > 1) */
    const int *cross_group;       /* [nhosts] the ranks with this rank's local index */
    int local_idx, cross_idx;
    int all_shm;                  /* every peer is reached over shared memory */
    int has_hostseg;              /* every rank maps the host segment (oneshot, twoshot) */
    rcoll_oneshot_t oneshot;      /* views of the host segment (when has_hostseg) */
    rcoll_twoshot_t twoshot;
    int has_cma;                  /* every rank can read every peer's memory (cma.h) */
    rcoll_cma_t cma;              /* (when has_cma) */
    uint64_t oneshot_seq;         /* one-shot operations so far (their numbers) */
    size_t chunk_bytes;           /* staging slot: the largest pipeline chunk */
    int chunk_fixed;              /* RCOLL_CHUNK_SIZE given: chunk_bytes, not the model's */
    const rcoll_tuning_t *tuning; /* the cost model's constants */
    /* The configured constants (not the probe's) that pipeline chunks are cut by: a forced
     * algorithm and the same one chosen by auto run the same schedule.  The probe's alpha
     * and beta are a whole call's steps (wake-ups, a busy CPU), not a chunk's cost in a
     * stream: chunks cut by them made auto's ring over TCP 1.2-2.5x slower than the forced
     * ring (docs/benchmarks.md, "Selector check"). */
    const rcoll_tuning_t *chunk_tuning;
    rcoll_algo_fit_t fit[RCOLL_ALG_COUNT]; /* measured lines (the probe's; none: the model) */
    rcoll_allreduce_alg_t forced; /* RCOLL_ALGO, parsed once (rcoll_algo_parse) */
    /* rcoll_algo_choose's memory: the last choice and what was logged per size class. */
    int last_alg;                 /* -1: none yet */
    size_t last_bytes;
    uint8_t logged[64];           /* per log2(bytes): choice + 1 last logged at INFO, 0: none */
    /* The other collectives: RCOLL_ALGO_<COLL> parsed (-1: auto; index 0 unused, all-reduce
     * is `forced`), and rcoll_algo_choose_coll's memory. */
    int forced_coll[RCOLL_COLL_COUNT];
    rcoll_algo_memo_t memo[RCOLL_COLL_COUNT];
} rcoll_algo_ctx_t;

/* A connection an operation needs before its next progress (start or a new phase). */
typedef struct {
    int peer, send, recv;
} rcoll_algo_want_t;

#define RCOLL_ALGO_MAX_WANT 34 /* a binomial tree's root over 2^32 ranks, plus two */
/* Per-operation state of the running algorithm: each casts it to its own struct and checks
 * the size with a _Static_assert.  Sized for the largest (the executor, plus a little). */
#define RCOLL_ALGO_STATE_BYTES (sizeof(rcoll_exec_t) + 64)

/* One operation as an algorithm sees it. */
typedef struct rcoll_algo_op {
    /* Set by core before start. */
    const void *src;
    void *dst;
    size_t count;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    int root;         /* rooted collectives: the root's ring position (core maps it) */
    int tag;          /* the collective's sequence number (tags its messages) */
    /* Reported by the algorithm. */
    int nwant;        /* connections to make before the next progress (core clears it) */
    int waiting_peer; /* while in progress: the rank waited on */
    int waiting_recv; /* 1: waiting for its data, 0: for it to take ours */
    int err_peer;     /* after an error: the rank whose connection failed (-1: none) */
    union {
        max_align_t align_;
        unsigned char bytes[RCOLL_ALGO_STATE_BYTES];
    } state;
    /* the connections of nwant (last: rarely more than a few are read, and the fields above
     * stay on the cache lines every call touches) */
    rcoll_algo_want_t want[RCOLL_ALGO_MAX_WANT];
} rcoll_algo_op_t;

typedef double (*rcoll_algo_predict_fn_t)(const rcoll_algo_ctx_t *ctx, size_t bytes);
typedef void (*rcoll_algo_start_fn_t)(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op);
typedef rcoll_status_t (*rcoll_algo_progress_fn_t)(const rcoll_algo_ctx_t *ctx,
                                                   rcoll_algo_op_t *op, int *progressed);

typedef void (*rcoll_algo_schedule_fn_t)(const rcoll_algo_ctx_t *ctx, const rcoll_algo_op_t *op,
                                         rcoll_sched_t *s);

typedef struct {
    /* Predicted microseconds of its collective moving `bytes` here (all-reduce and broadcast:
     * the vector; all-gather: the gathered whole), the cost model from ctx->tuning and the
     * shape; HUGE_VAL where the algorithm does not apply. */
    rcoll_algo_predict_fn_t predict;
    /* Set up op->state from op's buffers, count, datatype and op (count > 0, nranks > 1;
     * AVG included).  Cannot fail.  Puts into op->want the connections it needs beyond those
     * made at creation (ring neighbours, tree links). */
    rcoll_algo_start_fn_t start;
    /* Advance without blocking: RCOLL_OK when done, RCOLL_INPROGRESS, or an error (detail
     * via rcoll_err_set, op->err_peer set).  *progressed = 1 when anything moved; while in
     * progress op->waiting_peer/waiting_recv say what it waits for.  A new phase may add to
     * op->want and return RCOLL_INPROGRESS: core connects before calling again. */
    rcoll_algo_progress_fn_t progress;
    /* Runs in the host segment: core sets one up (when every rank is on one host) only if
     * the model may choose such an algorithm or RCOLL_ALGO forces one. */
    int uses_hostseg;
    /* The sizes at which the set-up probe times this algorithm (rcoll_algo_fit_t), rising,
     * 0 after the last; none: its cost is the path's (the probe's alpha, beta and gamma
     * cover it).  An algorithm whose cost the path's constants do not
     * describe names them; with calibrated = 1 it is not chosen by default until measured
     * (its formula alone is not trusted: RCOLL_TUNING_PROBE=0 or a tuning file leave it to
     * RCOLL_ALGO). */
    size_t probe_bytes[RCOLL_ALGO_PROBE_POINTS];
    int calibrated;
    /* An algorithm that is one schedule (sched.h) run by the executor: this rank's schedule
     * for op (ctx: nranks, rank, ring_pos, chunk_bytes; the chunk in elements is
     * chunk_bytes / the datatype's size).  start runs it; tests/unit/test_sched.c simulates
     * every table entry that has one.  NULL: not a single schedule. */
    rcoll_algo_schedule_fn_t schedule;
} rcoll_algo_ops_t;

#define RCOLL_ALGO_DECL_(id, name) extern const rcoll_algo_ops_t rcoll_algo_##name;
RCOLL_ALGO_LIST(RCOLL_ALGO_DECL_)
#undef RCOLL_ALGO_DECL_
#define RCOLL_BCAST_DECL_(id, name) extern const rcoll_algo_ops_t rcoll_bcast_##name;
RCOLL_BCAST_ALGO_LIST(RCOLL_BCAST_DECL_)
#undef RCOLL_BCAST_DECL_
#define RCOLL_ALLGATHER_DECL_(id, name) extern const rcoll_algo_ops_t rcoll_allgather_##name;
RCOLL_ALLGATHER_ALGO_LIST(RCOLL_ALLGATHER_DECL_)
#undef RCOLL_ALLGATHER_DECL_

/* One collective's algorithms: its table, names and knob. */
typedef struct {
    const char *coll;  /* "all-reduce", "broadcast", "all-gather" (log lines) */
    const char *knob;  /* "RCOLL_ALGO", "RCOLL_ALGO_BCAST", ... */
    int count;
    const rcoll_algo_ops_t *const *ops;
    const char *const *names;
} rcoll_algo_table_t;
extern const rcoll_algo_table_t rcoll_algo_tables[RCOLL_COLL_COUNT];

/* select.c: shared stubs for the ops an algorithm does not have (an entry names them, so
 * nothing in a table is NULL): never applies (HUGE_VAL), nothing to set up, done at once. */
double rcoll_algo_stub_predict(const rcoll_algo_ctx_t *ctx, size_t bytes);
void rcoll_algo_stub_start(rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op);
rcoll_status_t rcoll_algo_stub_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                        int *progressed);

/* select.c: the table and the names, indexed by rcoll_allreduce_alg_t. */
extern const rcoll_algo_ops_t *const rcoll_algos[RCOLL_ALG_COUNT];
extern const char *const rcoll_alg_names[RCOLL_ALG_COUNT];

/* The algorithm layer's knob (RCOLL_ALGO), an enum over "auto" and the table's names: its
 * value 0 is auto, k + 1 is algorithm k. */
typedef struct {
    int algo;      /* RCOLL_ALGO (all-reduce) */
    int bcast;     /* RCOLL_ALGO_BCAST */
    int allgather; /* RCOLL_ALGO_ALLGATHER */
} rcoll_algo_config_t;
extern const rcoll_config_table_t rcoll_algo_config_table;
static inline rcoll_allreduce_alg_t rcoll_algo_forced(const rcoll_algo_config_t *cfg)
{
    return (rcoll_allreduce_alg_t)(cfg->algo - 1);
}

/* The algorithm RCOLL_ALGO_<COLL> forces for collective c (-1: auto). */
int rcoll_algo_forced_coll(const rcoll_algo_config_t *cfg, rcoll_coll_t c);
/* Collective c's algorithm for `bytes` (as rcoll_algo_choose does for all-reduce, which it
 * calls for RCOLL_COLL_ALLREDUCE): forced where it applies, else the cheapest prediction;
 * remembered for the same size, logged at INFO once per size class. */
int rcoll_algo_choose_coll(rcoll_algo_ctx_t *ctx, rcoll_coll_t c, size_t bytes);
/* The executor's chunk for datatype dt here: the staging slot's worth of elements (at least
 * one). */
size_t rcoll_algo_chunk_elems(const rcoll_algo_ctx_t *ctx, rcoll_datatype_t dt);
/* The path the flat algorithms use here (shared memory when every peer is on it). */
const struct rcoll_path_cost *rcoll_algo_flat_path(const rcoll_algo_ctx_t *ctx);

/* The algorithm's name ("auto" for RCOLL_ALG_AUTO). */
const char *rcoll_algo_name(rcoll_allreduce_alg_t a);
/* Predicted microseconds of algorithm a for `bytes` here: its measured line where the probe
 * fitted one and its formula applies, else the formula; HUGE_VAL where it does not apply, or
 * where it must be calibrated and is not (auto's view; a forced choice uses the formula). */
double rcoll_algo_predict(const rcoll_algo_ctx_t *ctx, rcoll_allreduce_alg_t a, size_t bytes);
/* The cost model's cheapest algorithm here (ties: the earlier); *predicted_us (optional)
 * gets its time. */
rcoll_allreduce_alg_t rcoll_algo_model(const rcoll_algo_ctx_t *ctx, size_t bytes,
                                       double *predicted_us);
/* The all-reduce algorithm for `bytes`: ctx->forced where it applies, else the model's
 * choice.  The same size as last time returns at once; a new choice is logged at INFO with
 * every applicable prediction, once per power-of-two size class (and again on a change). */
rcoll_allreduce_alg_t rcoll_algo_choose(rcoll_algo_ctx_t *ctx, size_t bytes);
/* Forget the last choice and what was logged (new constants: choose afresh). */
void rcoll_algo_choose_reset(rcoll_algo_ctx_t *ctx);

/* The path the flat algorithms (everything but hier) are modelled on: shared memory when
 * every peer is reached over it, except across hosts of equal size, where the model weighs
 * them against the hierarchical algorithm over the network. */
static inline int rcoll_algo_flat_shm(const rcoll_algo_ctx_t *ctx)
{
    return ctx->all_shm && !(ctx->nhosts > 1 && ctx->ppn > 1);
}

/* flat.c: run a schedule as an operation (the flat all-reduces, hier's phases, and core's
 * other collectives): the executor over ctx's link, peers by position through pmap. */
void rcoll_algo_sched_start(rcoll_algo_op_t *op, const rcoll_sched_t *s,
                            const rcoll_link_t *link, const int *pmap);
rcoll_status_t rcoll_algo_sched_progress(const rcoll_algo_ctx_t *ctx, rcoll_algo_op_t *op,
                                         int *progressed);
/* The executor inside op->state (after rcoll_algo_sched_start). */
static inline rcoll_exec_t *rcoll_algo_exec(rcoll_algo_op_t *op)
{
    return (rcoll_exec_t *)(void *)op->state.bytes;
}
/* The host-segment algorithms' progress ends here: the peer their state waits on (or that
 * failed, when st is an error) into op; they wait for data (waiting_recv = 1).  Returns st. */
static inline rcoll_status_t rcoll_algo_hostseg_report(rcoll_algo_op_t *op, rcoll_status_t st,
                                                       int waiting_peer)
{
    op->waiting_peer = waiting_peer;
    op->waiting_recv = 1;
    if (st < 0) op->err_peer = waiting_peer;
    return st;
}

/* Ops that only progress an operation started with rcoll_algo_sched_start. */
extern const rcoll_algo_ops_t rcoll_algo_sched;

#endif
