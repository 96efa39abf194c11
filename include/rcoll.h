/*
 * rcoll.h - public API of rcoll, a collective-communication library.
 *
 * Conventions used throughout:
 *  - Every function that can fail returns rcoll_status_t: RCOLL_OK (0) on success, a positive
 *    value for "still in progress", a negative value for an error.  When a function that takes
 *    a communicator fails, rcoll_comm_last_error(comm) returns a sentence naming the cause
 *    (the argument, the peer rank, the system error).
 *  - Outputs are written only on success.
 *  - Handles (rcoll_comm_t, rcoll_request_t) are opaque; the library allocates and frees them.
 *  - Buffers belong to the caller.  A buffer passed to a nonblocking call must stay valid and
 *    unmodified (send side) / untouched (receive side) until the request completes.
 *  - A communicator is not thread-safe: calls on one communicator must not overlap in time.
 *    Different communicators may be used from different threads.  A call that finds another
 *    thread inside a call on the same communicator is refused (RCOLL_ERR_INVALID_USAGE, the
 *    sentence in rcoll_comm_last_error names the other call); it changes nothing.
 *    rcoll_group_end holds every communicator of its group in the same way while the group
 *    ends (a call on one of them meanwhile is refused naming rcoll_group_end).  Calls have
 *    no thread affinity: a request posted by one thread may be tested or waited for by another
 *    (one at a time), and a communicator may move between threads.
 *
 * This header is C99-clean and has no dependencies beyond <stddef.h> and <stdint.h>.
 */
#ifndef RCOLL_H
#define RCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RCOLL_VERSION_MAJOR 0
#define RCOLL_VERSION_MINOR 1
#define RCOLL_VERSION_PATCH 0
/* RCOLL_VERSION_CODE is MAJOR*10000 + MINOR*100 + PATCH. */
#define RCOLL_VERSION_CODE \
    (RCOLL_VERSION_MAJOR * 10000 + RCOLL_VERSION_MINOR * 100 + RCOLL_VERSION_PATCH)

/* ---------------------------------------------------------------------------------------------
 * Status codes.  Errors are negative and grouped by cause:
 *   -1 .. -19   invalid argument or usage (the caller can fix it)
 *   -20 .. -39  local system or resource failure (errno-level)
 *   -40 .. -59  remote failure: a peer died, closed, misbehaved or failed authentication
 *   -60 .. -79  timeout: a deadline passed while waiting for a named peer
 *   -80 .. -99  unsupported: not built in, or not possible on this machine
 *   -100        internal error (a bug in rcoll; please report it)
 * ------------------------------------------------------------------------------------------ */
typedef enum {
    RCOLL_OK = 0,
    RCOLL_INPROGRESS = 1,

    RCOLL_ERR_INVALID_ARG = -1,   /* a NULL pointer, bad enum, out-of-range value */
    RCOLL_ERR_INVALID_USAGE = -2, /* wrong call order, communicator already failed */

    RCOLL_ERR_SYSTEM = -20,     /* a system call failed (the message carries errno text) */
    RCOLL_ERR_NO_MEMORY = -21,  /* an allocation failed or a memory bound was exceeded */

    RCOLL_ERR_REMOTE = -40,     /* a peer closed, reset or died */
    RCOLL_ERR_PROTOCOL = -41,   /* a peer sent malformed or unexpected data */
    RCOLL_ERR_AUTH = -42,       /* a peer did not prove the job secret */

    RCOLL_ERR_TIMEOUT = -60,    /* no progress from the awaited peer within RCOLL_TIMEOUT */

    RCOLL_ERR_UNSUPPORTED = -80, /* feature not built in or not available here */

    RCOLL_ERR_INTERNAL = -100
} rcoll_status_t;

/* True when a status is an error (negative). */
#define RCOLL_IS_ERR(st) ((st) < 0)

/* Short constant text for a status ("invalid argument", "remote peer failure", ...).
 * Never returns NULL; unknown values give "unknown status". */
const char *rcoll_status_string(rcoll_status_t status);

/* ---------------------------------------------------------------------------------------------
 * Types
 * ------------------------------------------------------------------------------------------ */
typedef struct rcoll_comm *rcoll_comm_t;       /* communicator */
typedef struct rcoll_request *rcoll_request_t; /* nonblocking operation in flight */

#define RCOLL_UNIQUE_ID_BYTES 128
/* Identifies one communicator being created.  Produced by rcoll_get_unique_id() on one
 * process and passed (by any means: MPI, a file, a key-value store) to every rank. */
typedef struct {
    char internal[RCOLL_UNIQUE_ID_BYTES];
} rcoll_unique_id_t;

typedef enum {
    RCOLL_INT8 = 0,
    RCOLL_UINT8 = 1,
    RCOLL_INT32 = 2,
    RCOLL_UINT32 = 3,
    RCOLL_INT64 = 4,
    RCOLL_UINT64 = 5,
    RCOLL_FLOAT16 = 6,  /* IEEE 754 binary16 */
    RCOLL_BFLOAT16 = 7, /* bfloat16: upper half of a binary32 */
    RCOLL_FLOAT32 = 8,
    RCOLL_FLOAT64 = 9,
    RCOLL_INT16 = 10,
    RCOLL_UINT16 = 11,
    RCOLL_BOOL = 12, /* 1 byte: 0 is false, any other byte value is true (see below) */
    RCOLL_NUM_DATATYPES = 13
} rcoll_datatype_t;

/* Reduction operators.  Integer SUM and PROD wrap modulo 2^bits (no undefined behaviour).
 * FLOAT16 and BFLOAT16 are reduced with float32 arithmetic per element, rounded back to the
 * element type after each step.  AVG sums, then divides by the number of ranks in the
 * element's own type: for integer types the division truncates toward zero.
 * BAND, BOR and BXOR are bitwise and, or and exclusive or; they apply to the integer types
 * and BOOL, and a floating-point datatype with them is refused (RCOLL_ERR_INVALID_ARG).
 * BOOL is torch.bool: an element is false when its byte is 0 and true otherwise, and every
 * result element is written as 0 or 1 (also on a one-rank communicator).  SUM and MAX are
 * logical or, PROD and MIN logical and, BAND / BOR / BXOR logical and / or / xor (as torch
 * over NCCL and Gloo); AVG with BOOL is refused (RCOLL_ERR_INVALID_ARG), as torch refuses it. */
typedef enum {
    RCOLL_SUM = 0,
    RCOLL_PROD = 1,
    RCOLL_MIN = 2,
    RCOLL_MAX = 3,
    RCOLL_AVG = 4,
    RCOLL_BAND = 5,
    RCOLL_BOR = 6,
    RCOLL_BXOR = 7,
    RCOLL_NUM_OPS = 8
} rcoll_op_t;

/* Pass as sendbuf to operate in place (the input is taken from recvbuf), as MPI_IN_PLACE. */
#define RCOLL_IN_PLACE ((const void *)1)

/* The largest element count accepted by one call (2^40). */
#define RCOLL_MAX_COUNT ((size_t)1 << 40)

/* Size in bytes of one element of a datatype, or 0 for an invalid datatype. */
size_t rcoll_datatype_size(rcoll_datatype_t dt);

/* Version of the loaded library as RCOLL_VERSION_CODE; never fails. */
int rcoll_version(void);

/* ---------------------------------------------------------------------------------------------
 * Communicator creation
 * ------------------------------------------------------------------------------------------ */

/* Create the identifier of a new communicator.  The calling process starts a bootstrap root
 * (a listening socket served by a background thread) that the ranks connect to; the id holds
 * its address and a random secret.  Call once per communicator, on one process, and give the
 * same id to all ranks.  The root thread ends by itself when every rank has destroyed the
 * communicator, or RCOLL_TIMEOUT after the last rank left or failed to arrive.
 *   id (out): the identifier.
 * Errors: RCOLL_ERR_INVALID_ARG (id NULL), RCOLL_ERR_SYSTEM (no usable interface, socket or
 * thread failure). */
rcoll_status_t rcoll_get_unique_id(rcoll_unique_id_t *id);

/* Create the communicator with nranks ranks in which the caller is `rank`.  Blocks until all
 * ranks have joined and connected, or fails within RCOLL_TIMEOUT naming the ranks that did not
 * arrive.
 *   nranks (in): >= 1.   id (in): from rcoll_get_unique_id().   rank (in): 0 <= rank < nranks.
 *   comm (out): the new communicator; free it with rcoll_comm_destroy().
 * Errors: RCOLL_ERR_INVALID_ARG (bad nranks/rank/id, NULL pointer), RCOLL_ERR_AUTH (the root
 * rejected the secret), RCOLL_ERR_TIMEOUT (a rank never joined), RCOLL_ERR_REMOTE,
 * RCOLL_ERR_SYSTEM.  On failure the reason is logged at WARN and also available through
 * rcoll_last_init_error(). */
rcoll_status_t rcoll_comm_init_rank(int nranks, const rcoll_unique_id_t *id, int rank,
                                    rcoll_comm_t *comm);

/* Create a communicator from the environment, as set by tools/rcoll-run or a job launcher:
 *   RCOLL_RANK, RCOLL_NRANKS, RCOLL_ROOT (host:port where rank 0 listens), RCOLL_SECRET;
 * or, when those are absent, torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (rcoll's
 * root then listens on MASTER_PORT + 1, since torchrun's own store holds MASTER_PORT);
 * or the rank and size that mpirun (OMPI_COMM_WORLD_RANK / _SIZE), a PMI or PMIx launcher
 * (PMI_RANK / PMI_SIZE, PMIX_RANK) or srun (SLURM_PROCID / SLURM_NTASKS) set, together with
 * RCOLL_ROOT or MASTER_ADDR / MASTER_PORT (docs/api.md has the order).
 * Rank 0 starts the bootstrap root on RCOLL_ROOT's port.  Without RCOLL_SECRET the bootstrap
 * is unauthenticated and init warns.
 * Under a PMIx server (mpirun, srun --mpi=pmix: PMIX_NAMESPACE and PMIX_RANK set), in a
 * library built with PMIx and unless RCOLL_RANK, RCOLL_NRANKS, RCOLL_ROOT, RANK, WORLD_SIZE
 * or MASTER_ADDR is set (RCOLL_PMIX=on/off decides instead): rank and size come from PMIx,
 * rank 0 makes a unique id and PMIx carries it to the others (PMIx_Put, PMIx_Fence,
 * PMIx_Get); no address is needed.  PMIx is finalized before this returns (docs/launch.md).
 *   comm (out): the new communicator.
 * Errors: as rcoll_comm_init_rank, plus RCOLL_ERR_INVALID_ARG when a variable is missing or
 * malformed (the message names it); through PMIx, a failed PMIx call is named with its
 * status (RCOLL_ERR_TIMEOUT for a fence that timed out after RCOLL_TIMEOUT), and
 * RCOLL_ERR_UNSUPPORTED / RCOLL_ERR_INVALID_USAGE for RCOLL_PMIX=on in a library without
 * PMIx / a process no PMIx server started. */
rcoll_status_t rcoll_comm_init_env(rcoll_comm_t *comm);

/* Settings of one communicator given by the caller (a framework's process group has its own
 * timeout and name).  Start from RCOLL_COMM_CONFIG_INIT, then set what you need:
 *   size       sizeof(rcoll_comm_config_t) as the caller was compiled (set by the macro;
 *              later versions add fields at the end and read only what the caller has).
 *   timeout_s  seconds without progress from an awaited peer before an operation fails, as
 *              RCOLL_TIMEOUT (0 .. RCOLL_COMM_TIMEOUT_MAX; < 0: take RCOLL_TIMEOUT).
 *   name       NULL, or a name of at most 63 characters shown in the communicator's log lines
 *              ("communicator <name>: ...").
 *   progress_thread  1: the communicator gets a thread that progresses its nonblocking
 *              operations between calls (see "Nonblocking operations"), 0: none, < 0: take
 *              RCOLL_PROGRESS_THREAD (default 0).
 *   wait       how a rank waits for its peers: RCOLL_WAIT_SPIN, RCOLL_WAIT_SLEEP or
 *              RCOLL_WAIT_AUTO (see "Waiting" below); < 0: take RCOLL_WAIT (default auto).
 * Precedence: a value set here wins over the environment; fields left at their INIT value
 * take the RCOLL_* knob (or its default).  Communicators made by rcoll_comm_split/dup inherit
 * the parent's settings. */
typedef struct {
    size_t size;
    double timeout_s;
    const char *name;
    int progress_thread;
    int wait;
} rcoll_comm_config_t;
#define RCOLL_COMM_CONFIG_INIT {sizeof(rcoll_comm_config_t), -1.0, NULL, -1, -1}

/* Waiting.  A rank whose peer has not arrived yet polls (spins, then yields the CPU), then:
 *   RCOLL_WAIT_SPIN   goes on polling for RCOLL_POLL_US, then naps in 50 us steps (the
 *                     lowest latency when every rank has a core of its own);
 *   RCOLL_WAIT_SLEEP  after RCOLL_SLEEP_AFTER_US of polling sleeps in the kernel until a peer
 *                     on its host moves (a doorbell the peers ring: a futex in shared memory),
 *                     so the CPU goes to whatever else runs there (torch's compute threads,
 *                     the peer itself).  Only where every peer of the communicator is on the
 *                     rank's host; with peers on other hosts it naps as RCOLL_WAIT_SPIN does.
 *   RCOLL_WAIT_AUTO   RCOLL_WAIT_SLEEP when the host's ranks outnumber the CPUs of their
 *                     affinity masks together, else RCOLL_WAIT_SPIN. */
#define RCOLL_WAIT_AUTO 0
#define RCOLL_WAIT_SPIN 1
#define RCOLL_WAIT_SLEEP 2
#define RCOLL_COMM_TIMEOUT_MAX (86400 * 7) /* a week, RCOLL_TIMEOUT's own limit */

/* rcoll_comm_init_rank with the caller's settings.  Errors: as rcoll_comm_init_rank, plus
 * RCOLL_ERR_INVALID_ARG (config NULL, size not from RCOLL_COMM_CONFIG_INIT, timeout_s above
 * RCOLL_COMM_TIMEOUT_MAX or NaN, name too long) and RCOLL_ERR_INVALID_USAGE (called inside a
 * group). */
rcoll_status_t rcoll_comm_init_rank_config(int nranks, const rcoll_unique_id_t *id, int rank,
                                           const rcoll_comm_config_t *config,
                                           rcoll_comm_t *comm);

/* Text of the last communicator-creation failure in this thread ("" if none). */
const char *rcoll_last_init_error(void);

/* Rank of the caller / number of ranks.  Errors: RCOLL_ERR_INVALID_ARG (NULL argument). */
rcoll_status_t rcoll_comm_rank(rcoll_comm_t comm, int *rank);
rcoll_status_t rcoll_comm_size(rcoll_comm_t comm, int *size);

/* The host that rank `rank` of comm runs on, as rcoll groups ranks (host name, boot id and
 * network namespace, or RCOLL_HOST_ID; ranks of one host share memory): *host in
 * [0, *nhosts), hosts numbered in the order of their lowest rank, the same on every rank.
 * nhosts may be NULL.  Errors: RCOLL_ERR_INVALID_ARG (rank outside [0, size), host NULL). */
rcoll_status_t rcoll_comm_host(rcoll_comm_t comm, int rank, int *host, int *nhosts);

/* Bytes the communicator has allocated for itself (staging buffers, per-connection state),
 * excluding user buffers and kernel socket buffers.  Bounded by RCOLL_BUFFSIZE per peer
 * connection plus a small fixed part, plus, once collectives had CUDA device buffers, the
 * pinned host areas they are staged through (about the largest such call's buffers for the
 * blocking calls, and as much per nonblocking or grouped call in flight at once; see the
 * collectives below).  Errors: RCOLL_ERR_INVALID_ARG. */
rcoll_status_t rcoll_comm_mem_usage(rcoll_comm_t comm, size_t *bytes);

/* What rcoll_comm_mem_usage counts, by part, and the connections behind it. */
typedef struct {
    size_t total;        /* = rcoll_comm_mem_usage */
    size_t state;        /* the communicator, its per-rank tables, connection bookkeeping,
                          * requests and their counts arrays */
    size_t staging;      /* the host staging area its connections receive into
                          * (about RCOLL_BUFFSIZE) */
    size_t host_segment; /* this rank's share of the segment its host's ranks share */
    size_t gpu_staging;  /* pinned host areas for CUDA device buffers (blocking, nonblocking
                          * and stream-ordered calls) */
    int connections;     /* open connections, each direction counted (made on first use) */
    int peers;           /* ranks it has at least one connection with */
} rcoll_mem_stats_t;

/* comm's memory by part and its connections.  stats_size: sizeof(rcoll_mem_stats_t) as the
 * caller was compiled (fields past it are not written, so an older caller stays safe).
 * Errors: RCOLL_ERR_INVALID_ARG (NULL stats, stats_size 0, a destroyed communicator). */
rcoll_status_t rcoll_comm_mem_stats(rcoll_comm_t comm, rcoll_mem_stats_t *stats,
                                    size_t stats_size);

/* How this rank's creation of comm went (rcoll_comm_init_rank, rcoll_comm_init_env and
 * their variants; the fields are 0 for a communicator made by split, dup or shrink). */
typedef struct {
    double wall_s; /* this rank's creation call, entry to return, wall clock */
    double path_s; /* the critical path (CPU seconds) behind the end of this rank's creation:
                    * the longest chain of CPU work, from some rank's creation call (with
                    * RCOLL_SETUP_PATH=process: from the start of its process) through the
                    * bootstrap's messages (hellos up the tree of relays, the rank table
                    * down) to this rank's return.  What the creation would take if every
                    * rank and relay thread had a CPU of its own and messages were free: on
                    * a machine with fewer cores than ranks, wall_s measures the run queue
                    * and path_s the protocol.  Waiting is not on it (blocked, or polling
                    * for a peer during creation); a peer's work behind the connections
                    * made after the table is not (this rank's is). */
} rcoll_setup_stats_t;

/* comm's creation, timed (rcoll_setup_stats_t).  stats_size: sizeof(rcoll_setup_stats_t) as
 * the caller was compiled.  Errors: RCOLL_ERR_INVALID_ARG (NULL stats, stats_size 0, a
 * destroyed communicator). */
rcoll_status_t rcoll_comm_setup_stats(rcoll_comm_t comm, rcoll_setup_stats_t *stats,
                                      size_t stats_size);

/* Release a communicator.  Outstanding requests must have completed (rcoll_wait) or their
 * results are lost.  The rank hosting the bootstrap root waits, up to RCOLL_TIMEOUT, for the
 * other ranks to destroy theirs, so that a late rank's failure can still be reported.  With
 * CUDA IPC in use (RCOLL_CUDA_IPC=1) every rank waits, up to RCOLL_TIMEOUT, until the other
 * ranks have unmapped its device workspace (they do so in rcoll_comm_destroy) or exited, and
 * frees it then (after the timeout too, with a WARN naming the rank).
 * Safe to call on a failed communicator.  comm may be NULL (no-op).
 * Errors: RCOLL_ERR_TIMEOUT if peers did not leave in time (resources are freed anyway);
 * RCOLL_ERR_INVALID_ARG for a handle destroyed already (or never created).  Every call that
 * takes a communicator refuses such a handle with RCOLL_ERR_INVALID_ARG, never touching it,
 * and rcoll_comm_last_error() on it says so. */
rcoll_status_t rcoll_comm_destroy(rcoll_comm_t comm);

/* Abandon a communicator now: tell the other ranks (their pending and future operations
 * fail with RCOLL_ERR_REMOTE naming this rank), close every connection, free everything.
 * Never blocks longer than a few milliseconds.  comm may be NULL (no-op). */
rcoll_status_t rcoll_comm_abort(rcoll_comm_t comm);

/* The detailed text of the last error on this communicator ("" if none).  The pointer stays
 * valid until the next call on the communicator. */
const char *rcoll_comm_last_error(rcoll_comm_t comm);

/* Whether the communicator has failed, without a call that would return it: *error (out) is
 * the status of its first failure (a peer lost, RCOLL_TIMEOUT, an abort, a stream-ordered
 * operation that failed when its stream reached it), or RCOLL_OK while it has not
 * failed; rcoll_comm_last_error() then has the sentence.  For whoever waits on stream work
 * (a CUDA event) and must learn whether it ran: safe from any thread, also while another
 * thread is in a call on comm; it never blocks and changes nothing.
 * Errors: RCOLL_ERR_INVALID_ARG (NULL error, a NULL or destroyed communicator; *error is
 * then RCOLL_OK). */
rcoll_status_t rcoll_comm_get_async_error(rcoll_comm_t comm, rcoll_status_t *error);

/* The watchdog's latest report on this communicator ("" if none): when a collective made no
 * progress for RCOLL_WATCHDOG_S seconds, each rank waiting in it logs (at WARN) and keeps one
 * sentence naming the communicator, the operation and its number, what this rank waits on,
 * and which ranks reached the operation and which did not (with where those were last
 * seen).  Once per operation; it does not fail the operation (RCOLL_TIMEOUT does).  The text
 * stays until the next report; the pointer stays valid until the next call on the
 * communicator.  "" also for NULL or a destroyed handle. */
const char *rcoll_comm_watchdog_report(rcoll_comm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Collectives.  All ranks of a communicator must call the same collectives in the same order
 * with matching count, datatype, op and root.  Blocking calls progress on the caller's thread.
 * Mismatched calls are detected, always, before any data is used: every rank's call fails
 * (that call, not a later one) with RCOLL_ERR_INVALID_USAGE and a sentence naming both
 * sides, e.g. "rank 2 called allreduce(count=1000, int32, sum) as operation #17 while this
 * rank called allreduce(count=1024, float32, sum)" (operations are numbered from 1 on each
 * communicator).  Exceptions: a count of 0 communicates nothing and so is not compared; in a
 * broadcast or reduce, a rank whose part of the chain completed from ranks that matched it
 * may return RCOLL_OK (its result is right) and fails at its next call; so may a rank of a
 * gather or scatter whose exchange with the root matched, and a rank of an all-to-all-v whose
 * pairs all matched.
 * Once a collective on a communicator fails (peer death, timeout), the communicator is failed:
 * every later call returns RCOLL_ERR_INVALID_USAGE with the original cause in
 * rcoll_comm_last_error(); destroy or abort it.
 * Buffers: host memory (pageable or pinned), or, while the CUDA driver is in use (RCOLL_CUDA;
 * docs/gpu.md), CUDA device or managed memory.  Every blocking collective stages device and
 * managed buffers through a pinned host area of the communicator (allocated at the first such
 * call, freed with the communicator): the inputs are copied in, the outputs out, both complete
 * when the call returns; work on the application's own streams is not waited for (synchronize
 * the stream that wrote the input first).  A nonblocking collective copies its inputs in when
 * posted and its outputs out in the rcoll_wait / rcoll_test that sees it complete (whose
 * status a failing copy becomes), in an area of its own; inside a group, the copy out is made
 * by rcoll_group_end.  One call's buffers are all host memory or all CUDA memory
 * (RCOLL_ERR_INVALID_ARG otherwise).  Point-to-point calls stage device buffers too, each in
 * an area of its own: a send's data copied in at the call, a receive's copied out when the
 * operation is seen complete (return, rcoll_wait / rcoll_test, rcoll_group_end).  A failing
 * cuMemAllocHost is RCOLL_ERR_NO_MEMORY, a failing copy
 * RCOLL_ERR_SYSTEM, each naming the driver call and its CUresult; the communicator stays
 * usable.
 * Common errors: RCOLL_ERR_INVALID_ARG (NULL buffer with count > 0, bad datatype/op/root,
 * an op the datatype lacks (BAND/BOR/BXOR on a floating type, AVG on BOOL), count >
 * RCOLL_MAX_COUNT, partially overlapping send and receive buffers), RCOLL_ERR_REMOTE,
 * RCOLL_ERR_PROTOCOL, RCOLL_ERR_TIMEOUT (the message names the rank waited for).
 * A count of 0 is a valid no-op that communicates nothing.
 * ------------------------------------------------------------------------------------------ */

/* recvbuf[i] = op over ranks of sendbuf[i], on every rank.  sendbuf may be RCOLL_IN_PLACE. */
rcoll_status_t rcoll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                               rcoll_datatype_t datatype, rcoll_op_t op, rcoll_comm_t comm);

/* Copy count elements of buf from rank `root` to every other rank. */
rcoll_status_t rcoll_bcast(void *buf, size_t count, rcoll_datatype_t datatype, int root,
                           rcoll_comm_t comm);

/* Return once every rank has entered the barrier. */
rcoll_status_t rcoll_barrier(rcoll_comm_t comm);

/* recvbuf[i] = op over ranks of sendbuf[i], on rank `root` only.  recvbuf is used on the root
 * only (other ranks may pass NULL; it is never written there).  On the root, sendbuf may be
 * RCOLL_IN_PLACE (or equal recvbuf): the input is taken from recvbuf; on other ranks
 * RCOLL_IN_PLACE is RCOLL_ERR_INVALID_ARG.  Errors also: root out of range.  As in MPI, an
 * argument error detected on some ranks only (a NULL recvbuf on the root) leaves the others
 * running the operation: it is never issued on the refusing rank, so the others fail when
 * that rank's next call does not match (RCOLL_ERR_INVALID_USAGE) or with RCOLL_ERR_TIMEOUT. */
rcoll_status_t rcoll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                            rcoll_datatype_t datatype, rcoll_op_t op, int root,
                            rcoll_comm_t comm);

/* For the block collectives (all-gather, reduce-scatter, all-to-all) the limit of
 * RCOLL_MAX_COUNT elements applies to the whole buffer: nranks x count. */

/* Gather sendcount elements from every rank into recvbuf (nranks x sendcount elements, in
 * rank order) on every rank.  In place: sendbuf = RCOLL_IN_PLACE, or sendbuf = recvbuf +
 * rank x sendcount elements: the rank's block is already in place. */
rcoll_status_t rcoll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                               rcoll_datatype_t datatype, rcoll_comm_t comm);

/* Reduce sendbuf (nranks x recvcount elements) element-wise over ranks; rank r receives block
 * r (recvcount elements) in recvbuf.  In place: sendbuf = RCOLL_IN_PLACE or sendbuf =
 * recvbuf: recvbuf holds the nranks x recvcount input and receives the result at its start
 * (MPI semantics); or recvbuf = sendbuf + rank x recvcount elements (the result lands on the
 * rank's own block).  In the in-place forms the rest of the buffer is left unspecified. */
rcoll_status_t rcoll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    rcoll_datatype_t datatype, rcoll_op_t op,
                                    rcoll_comm_t comm);

/* Send count elements to and receive count elements from every rank: block j of sendbuf goes
 * to rank j, block i of recvbuf comes from rank i (each buffer nranks x count elements).
 * Not in place: the buffers must not overlap. */
rcoll_status_t rcoll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                              rcoll_datatype_t datatype, rcoll_comm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Rooted and uneven collectives: gather, scatter, and the "v" forms whose blocks differ in
 * size per rank (counts and displacements in elements).  Same rules as the collectives above
 * (matching calls, RCOLL_MAX_COUNT, errors); what a mismatch check compares for each is said
 * with it.  The count and displacement arrays are read during the call only (copied): they
 * may be reused or freed as soon as it returns, also for the nonblocking forms.
 * ------------------------------------------------------------------------------------------ */

/* Gather count elements from every rank into recvbuf on rank `root` (nranks x count elements,
 * in rank order).
 *   sendbuf (in): count elements; on the root RCOLL_IN_PLACE (or recvbuf + root x count
 *   elements) means its block is already in place.   recvbuf (out): used on the root only
 *   (others may pass NULL; it is never written there).
 * Compared between ranks: count, datatype, root.  Errors: as the collectives, plus root out of
 * range, nranks x count > RCOLL_MAX_COUNT, RCOLL_IN_PLACE on a rank that is not the root. */
rcoll_status_t rcoll_gather(const void *sendbuf, void *recvbuf, size_t count,
                            rcoll_datatype_t datatype, int root, rcoll_comm_t comm);

/* Scatter: block r (count elements) of the root's sendbuf (nranks x count elements) lands in
 * rank r's recvbuf.
 *   sendbuf (in): used on the root only (others may pass NULL).   recvbuf (out): count
 *   elements; on the root (void *)RCOLL_IN_PLACE (or sendbuf + root x count elements) leaves
 *   its block where it is.
 * Compared between ranks: count, datatype, root.  Errors: as rcoll_gather. */
rcoll_status_t rcoll_scatter(const void *sendbuf, void *recvbuf, size_t count,
                             rcoll_datatype_t datatype, int root, rcoll_comm_t comm);

/* All-gather with a block size per rank: rank i's sendcount elements land at recvbuf +
 * displs[i] elements on every rank.
 *   sendbuf (in): sendcount elements, which must equal recvcounts[rank]; RCOLL_IN_PLACE (or
 *   recvbuf + displs[rank] elements): the block is already in place.
 *   recvbuf (out).   recvcounts, displs (in): nranks entries each, never NULL; recvcounts
 *   must be the same on every rank, displs may differ (each rank's own layout).
 * The sum of recvcounts and every displs[i] + recvcounts[i] must be <= RCOLL_MAX_COUNT;
 * blocks that overlap each other are the caller's responsibility.  A sum of 0 is a no-op.
 * Compared between ranks: the sum of recvcounts, a 32-bit digest of the whole recvcounts array
 * (printed in a mismatch's sentence), datatype.
 * Errors: as the collectives, plus NULL arrays, sendcount != recvcounts[rank]. */
rcoll_status_t rcoll_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                const size_t *recvcounts, const size_t *displs,
                                rcoll_datatype_t datatype, rcoll_comm_t comm);

/* All-to-all with a block size per pair: sendcounts[j] elements at sendbuf + sdispls[j] go
 * to rank j, which receives them as its recvcounts[i] elements at recvbuf + rdispls[i] (i the
 * sender).  sendcounts[j] on rank i must equal recvcounts[i] on rank j; a pair whose sizes
 * disagree fails with RCOLL_ERR_INVALID_USAGE on the receiving rank (the sizes of every
 * pair's messages are checked, as for send/recv).  Every pair exchanges at least one
 * (possibly empty) message, so even a call whose counts are all 0 communicates.
 *   sendcounts, sdispls, recvcounts, rdispls (in): nranks entries each, never NULL.
 * Not in place: the two buffers' extents (the largest displacement + count) must not
 * overlap.  Every displacement + count must be <= RCOLL_MAX_COUNT.
 * Compared between ranks: datatype (the counts differ per rank by design; the message sizes
 * check them).  Errors: as the collectives, plus NULL arrays, sendcounts[rank] !=
 * recvcounts[rank]. */
rcoll_status_t rcoll_alltoallv(const void *sendbuf, const size_t *sendcounts,
                               const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                               const size_t *rdispls, rcoll_datatype_t datatype,
                               rcoll_comm_t comm);

/* Reduce-scatter with a block size per rank: sendbuf holds the concatenation of nranks blocks
 * (block i: recvcounts[i] elements, in rank order); rank i receives the element-wise
 * reduction over ranks of block i in recvbuf (recvcounts[i] elements).
 *   recvcounts (in): nranks entries, never NULL, the same on every rank.
 * In place: sendbuf = RCOLL_IN_PLACE or sendbuf = recvbuf: recvbuf holds the input and
 * receives the result at its start (MPI semantics); or recvbuf = sendbuf + (the sum of
 * recvcounts[0..rank-1]) elements: the result lands on the rank's own block.  The rest of the
 * buffer is then left unspecified.  A sum of 0 is a no-op.
 * Compared between ranks: the sum of recvcounts, a 32-bit digest of the array, datatype, op.
 * Errors: as rcoll_reduce_scatter, plus a NULL recvcounts. */
rcoll_status_t rcoll_reduce_scatterv(const void *sendbuf, void *recvbuf,
                                     const size_t *recvcounts, rcoll_datatype_t datatype,
                                     rcoll_op_t op, rcoll_comm_t comm);

/* Nonblocking forms: same arguments, plus req (out). */
rcoll_status_t rcoll_igather(const void *sendbuf, void *recvbuf, size_t count,
                             rcoll_datatype_t datatype, int root, rcoll_comm_t comm,
                             rcoll_request_t *req);
rcoll_status_t rcoll_iscatter(const void *sendbuf, void *recvbuf, size_t count,
                              rcoll_datatype_t datatype, int root, rcoll_comm_t comm,
                              rcoll_request_t *req);
rcoll_status_t rcoll_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                 const size_t *recvcounts, const size_t *displs,
                                 rcoll_datatype_t datatype, rcoll_comm_t comm,
                                 rcoll_request_t *req);
rcoll_status_t rcoll_ialltoallv(const void *sendbuf, const size_t *sendcounts,
                                const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                const size_t *rdispls, rcoll_datatype_t datatype,
                                rcoll_comm_t comm, rcoll_request_t *req);
rcoll_status_t rcoll_ireduce_scatterv(const void *sendbuf, void *recvbuf,
                                      const size_t *recvcounts, rcoll_datatype_t datatype,
                                      rcoll_op_t op, rcoll_comm_t comm, rcoll_request_t *req);

/* ---------------------------------------------------------------------------------------------
 * Point to point.  rcoll_send(buf, n, dt, peer) is matched by rcoll_recv(buf, n, dt, src) on
 * `peer`, with the same count and datatype; several messages between the same pair match in
 * issue order.  As in NCCL, sends, receives and collectives on a communicator must be issued
 * in a matching order on both sides; a mismatch is never silently mixed: a message whose size
 * differs from the receive's fails the receive with RCOLL_ERR_INVALID_USAGE naming the
 * sender, its message number and both sizes (the sender's call may already have completed).  Outside a group, rcoll_send returns once the data has left the buffer and
 * rcoll_recv once it has arrived; a send and its receive issued one after the other on two
 * ranks that both send first still complete for small messages only (use a group).
 * ------------------------------------------------------------------------------------------ */
rcoll_status_t rcoll_send(const void *buf, size_t count, rcoll_datatype_t datatype, int peer,
                          rcoll_comm_t comm);
rcoll_status_t rcoll_recv(void *buf, size_t count, rcoll_datatype_t datatype, int peer,
                          rcoll_comm_t comm);

/* Groups: between rcoll_group_start() and rcoll_group_end(), rcoll_send/rcoll_recv (and
 * blocking collectives) on any communicator return at once without moving data; at
 * rcoll_group_end() each communicator's sends and receives progress together, so a batch
 * that would deadlock issued one by one (every rank sending to its neighbour before
 * receiving) completes, and rcoll_group_end returns when everything in the group has
 * completed (the first error if any; details in each communicator's last error).  A send to
 * oneself needs the matching receive in the same group.  Groups nest; only the outermost
 * rcoll_group_end runs them.  Nonblocking calls (rcoll_i*) are not allowed inside a group
 * (RCOLL_ERR_INVALID_USAGE), so messages to oneself exist only inside groups.  Groups are
 * per thread.  rcoll_comm_init_rank/init_env inside a group check their arguments, set the
 * handle to NULL and return RCOLL_OK; the outermost rcoll_group_end creates every recorded
 * communicator together (one thread may so create several ranks of one job) and writes the
 * handles; a failed creation leaves its handle NULL and its text in rcoll_last_init_error.
 * A group's operations on communicators created separately progress together.
 * Errors of rcoll_group_end: RCOLL_ERR_INVALID_USAGE (no matching start, or a send to self
 * without a receive), or the first operation's error. */
rcoll_status_t rcoll_group_start(void);
rcoll_status_t rcoll_group_end(void);

/* ---------------------------------------------------------------------------------------------
 * Sub-communicators (collective over the parent: every rank of comm must call).
 * ------------------------------------------------------------------------------------------ */
#define RCOLL_UNDEFINED (-1)

/* Split comm by color: ranks passing the same color form a new communicator, ordered by key
 * (ties by rank in comm).  A rank passing RCOLL_UNDEFINED (any negative color) gets
 * *newcomm = NULL.  The children reuse the parent's bootstrap connection; each opens its own
 * listening socket and only the connections its algorithms need.  Either may be destroyed
 * first; a wait on one progresses the others.  Not allowed inside a group.  newcomm (out).
 * A rank that cannot take part for a local reason (out of file descriptors, no transport
 * can listen) before the ranks exchange their addresses makes the split fail on every rank,
 * naming it ("... could not take part: ..."), and the parent stays usable everywhere; one
 * that fails later (making or connecting its part) tells every rank through the bootstrap,
 * as a dead rank is told: every rank's split, or its next call, fails at once naming it, and
 * the communicators sharing the bootstrap have failed (shrink or destroy them).
 * Errors: as collectives, plus RCOLL_ERR_INVALID_ARG (newcomm NULL),
 * RCOLL_ERR_INVALID_USAGE (inside a group, or the parent has failed). */
rcoll_status_t rcoll_comm_split(rcoll_comm_t comm, int color, int key, rcoll_comm_t *newcomm);

/* A new communicator with the same ranks in the same order (rcoll_comm_split with one color
 * and key = rank). */
rcoll_status_t rcoll_comm_dup(rcoll_comm_t comm, rcoll_comm_t *newcomm);

/* Revoke comm on every rank, from any rank and any thread (also while another thread waits
 * in a call on it): the operations in flight on it fail, on every rank, within a few
 * milliseconds of the root's relay (RCOLL_ERR_REMOTE, "... revoked by rank R (host pid P)"),
 * and later calls on it are refused (RCOLL_ERR_INVALID_USAGE), so that every rank can leave
 * what it was doing and shrink (rcoll_comm_shrink: with nobody dead, a new communicator of
 * the same ranks) or destroy it.  Other communicators sharing its bootstrap (its parent, its
 * splits) are not affected.  Revoking twice is a no-op.  An operation whose inputs had all
 * arrived may still complete on a rank that has not read the revoke yet; its next call there
 * fails.  Errors: RCOLL_ERR_INVALID_ARG (a NULL or destroyed communicator). */
rcoll_status_t rcoll_comm_revoke(rcoll_comm_t comm);

/* Survivors continue: after a failure (a rank died or aborted), the ranks still alive agree,
 * through the bootstrap root, on who they are and get a new communicator of just them, ranked
 * in their order in comm (no new unique id).  Allowed on a failed communicator (whose other
 * calls are refused) and on a healthy one (then every rank must call it, and it returns an
 * equal communicator).  Every live rank of comm calls it; the root waits for every rank whose
 * control connection is open, up to RCOLL_TIMEOUT after the first call: a rank that has not
 * called by then is left out (its own call fails with RCOLL_ERR_TIMEOUT saying so).  The
 * decision is taken at one instant, so all survivors get the same members: a rank dying
 * before it is out; one dying after it is in, and the new communicator then fails (at its
 * set-up inside this call, or at its first collective) naming it: shrink that one in turn.
 * Data in flight on comm is abandoned; comm stays failed or usable as it was, and comm and
 * *newcomm may be destroyed in either order.  Any communicator can be shrunk: one of every
 * rank of the job (made by init, dup or the latest shrink) as above; one of some ranks (a
 * split child) waits only for its own members, and one of them that has not called within
 * RCOLL_TIMEOUT is left out of it only (its late call fails with RCOLL_ERR_TIMEOUT; it stays
 * in the job).  A death is announced to the whole job, so every communicator fails and each
 * is shrunk (one shrunk before its rank read the announcement fails then: shrink it again).
 * Not inside a group.
 * flags: RCOLL_SHRINK_DEFAULT, or RCOLL_SHRINK_ABORT_PENDING to fail the operations pending
 * on a healthy comm (they complete with RCOLL_ERR_INVALID_USAGE; comm is then failed) instead
 * of refusing the call.  newcomm (out; NULL on error).
 * Errors: RCOLL_ERR_INVALID_ARG (newcomm NULL, unknown flags), RCOLL_ERR_INVALID_USAGE (inside
 * a group; operations pending without RCOLL_SHRINK_ABORT_PENDING; the ranks shrank different
 * communicators), RCOLL_ERR_UNSUPPORTED (comm of some ranks has one past the job's first
 * 1024),
 * RCOLL_ERR_REMOTE (the bootstrap root is gone - it lives in the process that made the
 * unique id, or in rank 0 for environment launch - so no agreement is possible),
 * RCOLL_ERR_TIMEOUT (this rank was left out, or no decision came), RCOLL_ERR_NO_MEMORY. */
#define RCOLL_SHRINK_DEFAULT 0
#define RCOLL_SHRINK_ABORT_PENDING 1
rcoll_status_t rcoll_comm_shrink(rcoll_comm_t comm, int flags, rcoll_comm_t *newcomm);

/* Grow: ranks that are not in comm - new processes, or ranks a shrink left out and that were
 * restarted - join its members in a new communicator of nranks ranks (NCCL 2.29's
 * ncclCommGetUniqueId/ncclCommGrow, in rcoll's names).
 * 1. One member calls rcoll_comm_grow_id(comm, &id): it starts, in that process, the
 *    bootstrap of the grown communicator and writes its id (calling it again returns the same
 *    id).  The application hands the id to the new ranks as it handed the first unique id (a
 *    file, a key-value store, its launcher).  The grow must start within RCOLL_TIMEOUT of it.
 * 2. Every member calls rcoll_comm_grow(comm, nranks, NULL, RCOLL_UNDEFINED, &newcomm) (or its
 *    own rank as rank): it keeps its rank.  Every new rank calls
 *    rcoll_comm_grow(NULL, nranks, &id, rank, &newcomm) with a distinct rank in
 *    [comm's size, nranks).  It is collective over all of them and returns when the new
 *    communicator is set up (as rcoll_comm_init_rank does; a rank that does not come within
 *    RCOLL_TIMEOUT fails it on every rank, named).
 * The members first agree over comm (one all-gather): when no member or more than one made a
 * grow id, or they pass different nranks, every member fails alike (RCOLL_ERR_INVALID_USAGE,
 * RCOLL_ERR_INVALID_ARG) and the new ranks fail at once saying why.  comm is left as it was,
 * grown or not, and comm and *newcomm may be destroyed in either order; *newcomm is a
 * communicator of every rank of its own bootstrap (which lives in the id-maker's process), so
 * it can be shrunk in turn.  A communicator destroyed while holding an unused grow id makes
 * the new ranks that got it fail at once.  Members take their configuration (timeout, name,
 * progress thread, wait) from comm; new ranks from the environment, as rcoll_comm_init_rank.
 * Not inside a group; not on a failed or revoked communicator (shrink it first).
 * Errors: RCOLL_ERR_INVALID_ARG (newcomm or id NULL, nranks not above comm's size, a member's
 * rank other than its own, a new rank's outside [1, nranks)), RCOLL_ERR_INVALID_USAGE (as
 * above, inside a group, a failed comm), and those of rcoll_comm_init_rank. */
rcoll_status_t rcoll_comm_grow_id(rcoll_comm_t comm, rcoll_unique_id_t *id);
rcoll_status_t rcoll_comm_grow(rcoll_comm_t comm, int nranks, const rcoll_unique_id_t *id,
                               int rank, rcoll_comm_t *newcomm);

/* Suspend: free a communicator's transport memory while it is not used (between phases of a
 * job, while another communicator holds the memory), and restore it (NCCL 2.29's
 * ncclCommSuspend / ncclCommResume, in rcoll's names).  Both are collective over comm: every
 * rank calls them.  rcoll_comm_suspend waits in a barrier, then closes every connection (the
 * shared-memory segments are unmapped, the sockets and queue pairs closed, registrations
 * dropped) and frees the staging area (rcoll_comm_mem_stats: staging 0, connections 0).  It
 * keeps the listening endpoints, the rank table, the control connection (a rank that dies
 * meanwhile is still announced) and the host segment, which carries state across calls.
 * Every call on a suspended communicator but rcoll_comm_resume, destroy, abort, revoke,
 * shrink and the queries is refused (RCOLL_ERR_INVALID_USAGE, "suspended").
 * rcoll_comm_resume makes the connections again (the ring and tree ones at once,
 * the others on first use) and the staging; a failure leaves it suspended, naming the cause
 * (a peer that died: shrink or destroy it).
 * Errors: RCOLL_ERR_INVALID_ARG (unknown flags), RCOLL_ERR_INVALID_USAGE (operations pending,
 * inside a group, already suspended / not suspended, a failed or revoked communicator), and
 * those of a collective. */
#define RCOLL_SUSPEND_DEFAULT 0
rcoll_status_t rcoll_comm_suspend(rcoll_comm_t comm, int flags);
rcoll_status_t rcoll_comm_resume(rcoll_comm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Nonblocking operations.  An rcoll_i* call checks its arguments, queues the operation and
 * returns a request.  Operations on one communicator execute in the order they were issued;
 * several may be outstanding and they may be waited for in any order.  Progress happens inside
 * rcoll_test, rcoll_wait and any other call on the same communicator and, on a communicator
 * with a progress thread (rcoll_comm_config_t.progress_thread or RCOLL_PROGRESS_THREAD=1),
 * also between calls, so that an operation moves while the caller computes.  A request must
 * be completed with rcoll_wait, or rcoll_test until done, before the communicator is
 * destroyed.
 *
 * Threads: a request may be completed on another thread than the one that posted it.  Calls
 * on one communicator must not overlap (a second thread is refused with
 * RCOLL_ERR_INVALID_USAGE), except that with a progress thread rcoll_test and rcoll_wait may
 * run beside any other call on the communicator (one thread waits while another posts).
 * ------------------------------------------------------------------------------------------ */

/* Nonblocking rcoll_allreduce.  req (out): the request. */
rcoll_status_t rcoll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                rcoll_datatype_t datatype, rcoll_op_t op, rcoll_comm_t comm,
                                rcoll_request_t *req);

/* Nonblocking forms of the other operations: same arguments, plus req (out). */
rcoll_status_t rcoll_ibcast(void *buf, size_t count, rcoll_datatype_t datatype, int root,
                            rcoll_comm_t comm, rcoll_request_t *req);
rcoll_status_t rcoll_ibarrier(rcoll_comm_t comm, rcoll_request_t *req);
rcoll_status_t rcoll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                             rcoll_datatype_t datatype, rcoll_op_t op, int root,
                             rcoll_comm_t comm, rcoll_request_t *req);
rcoll_status_t rcoll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                rcoll_datatype_t datatype, rcoll_comm_t comm,
                                rcoll_request_t *req);
rcoll_status_t rcoll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                     rcoll_datatype_t datatype, rcoll_op_t op,
                                     rcoll_comm_t comm, rcoll_request_t *req);
rcoll_status_t rcoll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                               rcoll_datatype_t datatype, rcoll_comm_t comm,
                               rcoll_request_t *req);
rcoll_status_t rcoll_isend(const void *buf, size_t count, rcoll_datatype_t datatype, int peer,
                           rcoll_comm_t comm, rcoll_request_t *req);
rcoll_status_t rcoll_irecv(void *buf, size_t count, rcoll_datatype_t datatype, int peer,
                           rcoll_comm_t comm, rcoll_request_t *req);

/* Make progress and report whether *req has completed.  On completion (success or error) the
 * request is freed and *req set to NULL; *done is set to 1.  Otherwise *done = 0 and RCOLL_OK.
 * Returns the operation's status once complete.  Errors: RCOLL_ERR_INVALID_ARG (NULL req or
 * *req, NULL done), or the operation's error. */
rcoll_status_t rcoll_test(rcoll_request_t *req, int *done);

/* Block until *req completes; frees it and sets *req to NULL.  Returns the operation's status.
 * Errors: RCOLL_ERR_INVALID_ARG (NULL), or the operation's error. */
rcoll_status_t rcoll_wait(rcoll_request_t *req);

/* rcoll_wait for at most timeout_s seconds: *done = 1 when *req completed (freed, *req NULL,
 * the operation's status returned), else *done = 0 and RCOLL_OK (the request still runs: wait
 * again, or test).  For callers that must look at something else now and then while they wait
 * (an interpreter's pending signals: the Python package waits in slices of this).  Errors:
 * RCOLL_ERR_INVALID_ARG (NULL req, *req or done; timeout_s negative or NaN), or the
 * operation's error. */
rcoll_status_t rcoll_wait_for(rcoll_request_t *req, double timeout_s, int *done);

/* ---------------------------------------------------------------------------------------------
 * Stream-ordered operations (docs/gpu.md, "Stream order").  rcoll_<op>_stream takes the
 * arguments of rcoll_<op> and a CUDA stream: stream is a CUstream / cudaStream_t passed as
 * void * (rcoll.h does not include cuda.h); NULL is the legacy default stream, and
 * CU_STREAM_PER_THREAD / cudaStreamPerThread the per-thread one.  The call checks its
 * arguments (the same errors, with the same sentences, as rcoll_<op>), enqueues the operation
 * on stream and returns without waiting: work enqueued on stream after it sees the result,
 * work before it is what the operation reads.  Buffers may be CUDA device or managed memory
 * (staged through pinned host memory in stream order: a copy in, the host collective in a
 * host function, a copy out) or host memory (read and written by the host function when the
 * stream reaches it: leave them alone until then).  With RCOLL_CUDA_IPC=1 an all-reduce of
 * device buffers up to RCOLL_CUDA_IPC_TWOSHOT bytes is instead one kernel launched on stream
 * (no copies, no host function), which does not hold the communicator: the rule below on
 * calls that have not run does not apply to it.  Nothing is linked against CUDA: the
 * driver must be in use (RCOLL_CUDA=1, or auto with libcuda loaded before the communicator
 * was created), else RCOLL_ERR_UNSUPPORTED.
 *
 * Rules (the refusals are RCOLL_ERR_INVALID_USAGE with a sentence):
 * - every rank enqueues the stream operations of a communicator in the same order (one stream
 *   per communicator is the simple way; operations on several streams run in the order the
 *   streams reach them, which must match across ranks);
 * - while a stream operation of the communicator has not run, its other calls (blocking,
 *   nonblocking, group, split) are refused: synchronize the stream first; a stream call is
 *   refused while nonblocking operations of the communicator are in flight, inside
 *   rcoll_group_start/end, and while another thread is in a call on it;
 * - a stream being captured into a CUDA graph is refused (RCOLL_ERR_UNSUPPORTED): capture is
 *   not supported yet;
 * - rcoll_comm_destroy / rcoll_comm_abort wait (up to RCOLL_TIMEOUT + 10 s) until the
 *   communicator's stream operations have run; abort makes those not started run nothing.
 *
 * Errors: those of rcoll_<op>'s checks, and of enqueueing (RCOLL_ERR_NO_MEMORY: the staging
 * area; RCOLL_ERR_SYSTEM: a driver call failed to enqueue, the sentence saying whether the
 * collective was enqueued on this rank).  An error while the operation runs (a peer lost,
 * RCOLL_TIMEOUT) cannot be returned by the call: the communicator fails, rcoll_comm_last_error
 * names the stream operation ("rcoll_allreduce_stream (stream call #3 on this communicator,
 * on stream 0x...) failed in stream order: ..."), the next call on it returns
 * RCOLL_ERR_INVALID_USAGE ("communicator failed earlier ..."), and the later stream
 * operations already enqueued run nothing.  The outputs of a failed operation and of those
 * later ones are unspecified (staged ones receive the staging area's contents).
 * ------------------------------------------------------------------------------------------ */

/* rcoll_allreduce in stream order.  stream (in): a CUstream / cudaStream_t, NULL the legacy
 * default stream. */
rcoll_status_t rcoll_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                      rcoll_datatype_t datatype, rcoll_op_t op,
                                      rcoll_comm_t comm, void *stream);

/* The other collectives in stream order: the arguments of rcoll_<op>, plus stream. */
rcoll_status_t rcoll_bcast_stream(void *buf, size_t count, rcoll_datatype_t datatype, int root,
                                  rcoll_comm_t comm, void *stream);
rcoll_status_t rcoll_barrier_stream(rcoll_comm_t comm, void *stream);
rcoll_status_t rcoll_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   rcoll_datatype_t datatype, rcoll_op_t op, int root,
                                   rcoll_comm_t comm, void *stream);
rcoll_status_t rcoll_allgather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                      rcoll_datatype_t datatype, rcoll_comm_t comm,
                                      void *stream);
rcoll_status_t rcoll_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
                                           size_t recvcount, rcoll_datatype_t datatype,
                                           rcoll_op_t op, rcoll_comm_t comm, void *stream);
rcoll_status_t rcoll_alltoall_stream(const void *sendbuf, void *recvbuf, size_t count,
                                     rcoll_datatype_t datatype, rcoll_comm_t comm,
                                     void *stream);
rcoll_status_t rcoll_gather_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   rcoll_datatype_t datatype, int root, rcoll_comm_t comm,
                                   void *stream);
rcoll_status_t rcoll_scatter_stream(const void *sendbuf, void *recvbuf, size_t count,
                                    rcoll_datatype_t datatype, int root, rcoll_comm_t comm,
                                    void *stream);
rcoll_status_t rcoll_allgatherv_stream(const void *sendbuf, size_t sendcount, void *recvbuf,
                                       const size_t *recvcounts, const size_t *displs,
                                       rcoll_datatype_t datatype, rcoll_comm_t comm,
                                       void *stream);
rcoll_status_t rcoll_alltoallv_stream(const void *sendbuf, const size_t *sendcounts,
                                      const size_t *sdispls, void *recvbuf,
                                      const size_t *recvcounts, const size_t *rdispls,
                                      rcoll_datatype_t datatype, rcoll_comm_t comm,
                                      void *stream);
rcoll_status_t rcoll_reduce_scatterv_stream(const void *sendbuf, void *recvbuf,
                                            const size_t *recvcounts, rcoll_datatype_t datatype,
                                            rcoll_op_t op, rcoll_comm_t comm, void *stream);

/* ---------------------------------------------------------------------------------------------
 * CUDA devices and memory (docs/gpu.md, "Devices and memory"), for programs that do not link
 * the CUDA runtime and still want to hand rcoll device buffers (rcoll's perf binaries with
 * --memtype cuda); a program that uses the CUDA runtime needs none of them.  The first call
 * loads the CUDA driver, as RCOLL_CUDA=1 does at communicator creation (so communicators,
 * older ones too, classify CUDA buffers from then on); RCOLL_CUDA=0 refuses them.  Each
 * failure leaves a sentence in rcoll_cuda_last_error() of the calling thread.
 * Errors common to all: RCOLL_ERR_UNSUPPORTED (built without CUDA, no usable driver, its
 * sentence: "no CUDA driver (libcuda.so.1: ...)", "... too old ...", "cuInit failed: ...",
 * or RCOLL_CUDA=0), RCOLL_ERR_INVALID_ARG (a NULL pointer where one is needed),
 * RCOLL_ERR_SYSTEM (a driver call failed; the sentence names it and its CUresult).
 * ------------------------------------------------------------------------------------------ */

/* CUDA devices the driver sees (after CUDA_VISIBLE_DEVICES).  count (out). */
rcoll_status_t rcoll_cuda_device_count(int *count);

/* Make device `ordinal` (0 .. count - 1) current in the calling thread: its primary context,
 * as cudaSetDevice does (the two can be mixed).  Errors: RCOLL_ERR_INVALID_ARG (no such
 * device; the sentence gives the count and CUDA_VISIBLE_DEVICES). */
rcoll_status_t rcoll_cuda_set_device(int ordinal);

/* Name ("NVIDIA H200") and PCI bus id ("0000:19:00.0") of device `ordinal`; name or bus_id
 * may be NULL.  Each is NUL-terminated within its length (truncated if short; 64 and 16
 * bytes suffice). */
rcoll_status_t rcoll_cuda_device_info(int ordinal, char *name, size_t name_len, char *bus_id,
                                      size_t bus_id_len);

/* bytes (> 0) of CUDA device memory (rcoll_cuda_alloc: cuMemAlloc) or managed memory
 * (rcoll_cuda_alloc_managed: cuMemAllocManaged, attached globally) on the current device.
 *   ptr (out): the allocation, freed with rcoll_cuda_free (or cudaFree).
 * Errors: RCOLL_ERR_INVALID_ARG (ptr NULL, bytes 0), RCOLL_ERR_INVALID_USAGE (no device is
 * current in this thread: rcoll_cuda_set_device first), RCOLL_ERR_NO_MEMORY (the device is
 * full). */
rcoll_status_t rcoll_cuda_alloc(void **ptr, size_t bytes);
rcoll_status_t rcoll_cuda_alloc_managed(void **ptr, size_t bytes);

/* Free an allocation of rcoll_cuda_alloc(_managed) (or cudaMalloc/cudaMallocManaged).
 * NULL is a no-op.  Errors: RCOLL_ERR_INVALID_ARG (ptr is not the start of a CUDA device or
 * managed allocation: nothing is freed). */
rcoll_status_t rcoll_cuda_free(void *ptr);

/* Copy bytes from src to dst, each host memory or CUDA memory of any kind; returns when the
 * copy is complete (cuMemcpy, synchronous; host to host is memmove).  Not ordered after work
 * the application queued on its own streams: synchronize them first. */
rcoll_status_t rcoll_cuda_memcpy(void *dst, const void *src, size_t bytes);

/* The sentence of the last failed rcoll_cuda_* call in this thread ("" if none failed). */
const char *rcoll_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* RCOLL_H */
