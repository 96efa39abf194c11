/*
 * oneshot.h - the one-kernel all-reduce over CUDA IPC (docs/gpu.md, "One kernel for small
 * all-reduces"): what the kernel of reduce.cu, its launcher (cuda/ipc.c), the protocol
 * (core/api_ipc.c) and the scripted driver (tests/common/cuda_script_lib.c) agree on.  Plain
 * C, no CUDA header: it is included by nvcc, by the library and by the test library.
 *
 * Every rank's IPC workspace starts with a header:
 *   [0, RCOLL_ONESHOT_FLAG2)            the flags: flag[b][p] (the 64-bit word at
 *                                       (b * RCOLL_ONESHOT_MAX_RANKS + p) * 8) is the flag
 *                                       block b of rank p pushed into this rank's memory
 *   [RCOLL_ONESHOT_FLAG2, ABORT)        the two-shot's second flags, laid out the same
 *   [RCOLL_ONESHOT_ABORT, + 8)          0, or the flag of the call in which this rank's
 *                                       one-kernel all-reduces stopped for good
 *   [RCOLL_ONESHOT_HDR, + 2 * slot)     two data slots, used by alternate one-kernel calls
 * Flags are pushed, spins are local: a rank writes its flag into every peer's header (and
 * its own) and waits on its own header only, so the polling load never crosses the GPU link;
 * one store per peer does.  Each word has one writer (rank p, block b) besides the zeroing
 * when the workspace is made, before any peer has it mapped.  In call number seq (the
 * communicator's collective number) with signature digest sig, block b of rank r:
 *   1. copies its part of sendbuf into r's slot (seq & 1), in r's own memory;
 *   2. publishes f = (seq mod 2^32) << 32 | sig: a system-scope fence after the block's
 *      writes, then st.release.sys of f into flag[b][r] of every rank's header;
 *   3. waits until every other rank p's flag[b][p] in r's own header has reached seq
 *      (ld.acquire.sys, local): the same signature or the rank has gone on (then it had this
 *      rank's flag, so they matched); a different signature, the deadline passing, or p's
 *      abort word set (read in p's memory, every 32nd look), is reported in *err, the block
 *      sets this rank's abort word and stops;
 *   4. reduces its part over every rank's slot (read over the link), in rank order, into
 *      recvbuf.
 * Why 4. sees 1.'s data: p's writes to its slot, then (fence, release) its store of f into
 * r's memory; r's acquire load reads f, so every write before p's release is visible to r's
 * loads after its acquire (the block's other threads behind a __syncthreads).
 * A block that finds this rank's own abort word set stops at once (reported as ABORTED):
 * after a failure the calls already queued behind it (stream-ordered calls) end at once on
 * every rank instead of each waiting out the deadline, and a peer waiting at the two-shot's
 * second flag for a block that stopped at the first is released.
 * The grid is the communicator's block count (args.blocks, at most RCOLL_ONESHOT_MAX_BLOCKS),
 * agreed by every rank at the IPC set-up (the smallest rank's proposal: min(MAX_BLOCKS, its
 * GPU's SM count), core/api_ipc.c) and the same for every call, so that two ranks in calls
 * of different counts still meet on every flag and see the signatures differ.  A slot is written again two
 * calls later, by which time every rank has finished this call's block (it published its
 * flag of the next call after it, in stream order).  No barrier ends a call, so a peer may
 * still read this rank's slot after this rank's call returned: a rank frees its workspace
 * only once every peer has closed its mapping of it (core/api_ipc.c, at destroy).
 *
 * Meet only (shots = 3, the pieced collectives' steps, core/api_ipc.c): each block publishes
 * its flag and waits for every peer's, as 2./3., nothing else: a barrier in the IPC stream's
 * order, with the deadline, the abort word and a different call reported as above, in place
 * of a host barrier between two steps of a piece (the steps before it are the stream's
 * earlier copies and kernels, finished before the meet's kernel starts).
 *
 * Reduce only (shots = 0, the larger all-reduces' pieces, core/api_ipc.c): no copy in, no
 * flags, no report: block b reduces its part of count elements at byte offset slot of every
 * rank's workspace (16-byte aligned), in rank order as step 4, into dst; the caller has
 * ordered it after every rank's copies (and after the reads of dst's previous contents).
 * One kernel reading n inputs instead of n - 1 two-input passes (each reading two, writing
 * one).
 *
 * The two-shot (shots = 2, for larger calls) moves each byte fewer times: sendbuf is cut into
 * nranks shards (rcoll_twoshot_shard), the slot holds an input area and, at byte offset out,
 * an output area, and block b takes part b of every shard:
 *   1. copies part b of every shard into r's input area;
 *   2./3. flag[b][.] as above;
 *   4. reduces part b of r's own shard over every rank's input area, in rank order, into r's
 *      output area and recvbuf;
 *   5. publishes flag2[b][r] (the same value, at RCOLL_ONESHOT_FLAG2) into every rank's
 *      header and waits for every peer's in its own, as in 2./3.;
 *   6. copies part b of every other rank's shard from that rank's output area into recvbuf.
 */
#ifndef RCOLL_CUDA_ONESHOT_H
#define RCOLL_CUDA_ONESHOT_H

#include <stdint.h>

#ifdef __CUDACC__
#define RCOLL_ONESHOT_HD __host__ __device__ __forceinline__
#else
#define RCOLL_ONESHOT_HD static inline
#endif

#define RCOLL_ONESHOT_MAX_BLOCKS 32 /* the grid at most: the header's flags per rank */
#define RCOLL_ONESHOT_THREADS 256
#define RCOLL_ONESHOT_MAX_RANKS 16
/* the header, bytes: two flag sets of MAX_BLOCKS x MAX_RANKS words, the abort word, room */
#define RCOLL_ONESHOT_FLAG2 4096  /* the two-shot's second flags */
#define RCOLL_ONESHOT_ABORT 8192  /* the abort word */
#define RCOLL_ONESHOT_HDR 12288   /* bytes before the slots */
#if RCOLL_ONESHOT_FLAG2 != RCOLL_ONESHOT_MAX_BLOCKS * RCOLL_ONESHOT_MAX_RANKS * 8 ||          \
    RCOLL_ONESHOT_ABORT != 2 * RCOLL_ONESHOT_FLAG2 || RCOLL_ONESHOT_HDR < RCOLL_ONESHOT_ABORT + 8 \
    || RCOLL_ONESHOT_HDR % 256
#error "the one-kernel all-reduce's header layout does not add up"
#endif

/* What a block reports, in host memory the kernel can write (pinned, device-mapped): one
 * record per block, so that no atomic crosses the bus; zeroed by the host before the launch. */
enum {
    RCOLL_ONESHOT_OK = 0,
    RCOLL_ONESHOT_TIMEOUT = 1,
    RCOLL_ONESHOT_MISMATCH = 2,
    RCOLL_ONESHOT_ABORTED = 3 /* peer's abort word set (peer == rank: this rank's own) */
};
typedef struct {
    uint32_t code; /* RCOLL_ONESHOT_* */
    int32_t peer;  /* the rank waited for */
    uint64_t flag; /* that rank's flag as last seen */
} rcoll_oneshot_err_t;

/* The kernel's one parameter, by value. */
typedef struct {
    uint64_t peer[RCOLL_ONESHOT_MAX_RANKS]; /* each rank's workspace as mapped here */
    uint64_t src, dst;                      /* sendbuf, recvbuf (device pointers) */
    uint64_t count;                         /* elements */
    uint64_t slot;                          /* byte offset of this call's slot */
    uint64_t out;                           /* two-shot: the output area, bytes into the slot */
    uint64_t flag;                          /* the flag value of this call (seq << 32 | sig) */
    uint64_t timeout_ns;                    /* waiting for a peer's flag, at most */
    uint64_t err; /* rcoll_oneshot_err_t[RCOLL_ONESHOT_MAX_BLOCKS] (host memory, device-mapped;
                   * the first blocks used) */
    int32_t nranks, rank;
    int32_t blocks;                         /* the grid: 1..RCOLL_ONESHOT_MAX_BLOCKS, agreed */
    int32_t avg_divisor;                    /* AVG: nranks; else 0 */
    int32_t shots; /* 1: one-shot; 2: two-shot; 0: reduce only; 3: meet only */
} rcoll_oneshot_args_t;

/* Elements of block b's part (of nblocks) of count elements of es bytes: [*lo, *hi), cut on
 * 16 bytes. */
RCOLL_ONESHOT_HD void rcoll_oneshot_part(uint64_t count, uint64_t es, unsigned nblocks,
                                         unsigned b, uint64_t *lo, uint64_t *hi)
{
    uint64_t v = 16 / es, per = (count + nblocks - 1) / nblocks;
    per = (per + v - 1) / v * v;
    *lo = (uint64_t)b * per < count ? (uint64_t)b * per : count;
    *hi = *lo + per < count ? *lo + per : count;
}

/* Rank r's shard of count elements of es bytes for the two-shot: [*lo, *hi), cut on 16
 * bytes (the last shards may be short or empty). */
RCOLL_ONESHOT_HD void rcoll_twoshot_shard(uint64_t count, uint64_t es, int nranks, int r,
                                          uint64_t *lo, uint64_t *hi)
{
    uint64_t v = 16 / es, per = (count + (uint64_t)nranks - 1) / (uint64_t)nranks;
    per = (per + v - 1) / v * v;
    *lo = (uint64_t)r * per < count ? (uint64_t)r * per : count;
    *hi = *lo + per < count ? *lo + per : count;
}

/* Block b's part (of nblocks) of rank r's two-shot shard: [*lo, *hi) in elements of the
 * whole buffer. */
RCOLL_ONESHOT_HD void rcoll_twoshot_part(uint64_t count, uint64_t es, int nranks, int r,
                                         unsigned nblocks, unsigned b, uint64_t *lo,
                                         uint64_t *hi)
{
    uint64_t slo, shi, plo, phi;
    rcoll_twoshot_shard(count, es, nranks, r, &slo, &shi);
    rcoll_oneshot_part(shi - slo, es, nblocks, b, &plo, &phi);
    *lo = slo + plo;
    *hi = slo + phi;
}

#endif
