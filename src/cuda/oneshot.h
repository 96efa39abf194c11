/*
 * oneshot.h - the one-kernel all-reduce over CUDA IPC (docs/gpu.md, "One kernel for small
 * all-reduces"): what the kernel of reduce.cu, its launcher (cuda/ipc.c), the protocol
 * (core/api_ipc.c) and the scripted driver (tests/common/cuda_script_lib.c) agree on.  Plain
 * C, no CUDA header: it is included by nvcc, by the library and by the test library.
 *
 * Every rank's IPC workspace starts with a header:
 *   [0, RCOLL_ONESHOT_BLOCKS * 8)       one 64-bit flag per kernel block, written by this rank
 *   [RCOLL_ONESHOT_FLAG2, + BLOCKS * 8) the two-shot's second flag per block
 *   [RCOLL_ONESHOT_ABORT, + 8)          0, or the flag of the call in which this rank's
 *                                       one-kernel all-reduces stopped for good
 *   [RCOLL_ONESHOT_HDR, + 2 * slot)     two data slots, used by alternate one-kernel calls
 * The flags are zeroed when the workspace is made.  In call number seq (the communicator's
 * collective number) with signature digest sig, block b of rank r:
 *   1. copies its part of sendbuf into r's slot (seq & 1);
 *   2. publishes flag[b] = (seq mod 2^32) << 32 | sig (release, system scope);
 *   3. waits until every other rank's flag[b] has reached seq (acquire): the same signature
 *      or the rank has gone on (then it had this rank's flag, so they matched); a different
 *      signature, the deadline passing, or the rank's abort word set, is reported in *err,
 *      the block sets this rank's abort word and stops;
 *   4. reduces its part over every rank's slot, in rank order, into recvbuf.
 * A block that finds this rank's own abort word set stops at once (reported as ABORTED):
 * after a failure the calls already queued behind it (stream-ordered calls) end at once on
 * every rank instead of each waiting out the deadline, and a peer waiting at the two-shot's
 * second flag for a block that stopped at the first is released.
 * The grid is always RCOLL_ONESHOT_BLOCKS blocks, so that two ranks in calls of different
 * counts still meet on every flag and see the signatures differ.  A slot is written again two
 * calls later, by which time every rank has finished this call's block (it published its
 * flag of the next call after it, in stream order).  No barrier ends a call, so a peer may
 * still read this rank's slot after this rank's call returned: a rank frees its workspace
 * only once every peer has closed its mapping of it (core/api_ipc.c, at destroy).
 *
 * The two-shot (shots = 2, for larger calls) moves each byte fewer times: sendbuf is cut into
 * nranks shards (rcoll_twoshot_shard), the slot holds an input area and, at byte offset out,
 * an output area, and block b takes part b of every shard:
 *   1. copies part b of every shard into r's input area;
 *   2./3. flag[b] as above;
 *   4. reduces part b of r's own shard over every rank's input area, in rank order, into r's
 *      output area and recvbuf;
 *   5. publishes flag2[b] (the same value, at RCOLL_ONESHOT_FLAG2) and waits for every
 *      peer's, as in 2./3.;
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

#define RCOLL_ONESHOT_BLOCKS 32   /* the kernel's grid, and flags per rank */
#define RCOLL_ONESHOT_THREADS 256
#define RCOLL_ONESHOT_MAX_RANKS 16
#define RCOLL_ONESHOT_FLAG2 512   /* byte offset of the two-shot's second flags */
#define RCOLL_ONESHOT_ABORT 1024  /* byte offset of the abort word */
#define RCOLL_ONESHOT_HDR 4096    /* bytes before the slots (flags, room to spare) */

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
    uint64_t err; /* rcoll_oneshot_err_t[RCOLL_ONESHOT_BLOCKS] (host memory, device-mapped) */
    int32_t nranks, rank;
    int32_t avg_divisor;                    /* AVG: nranks; else 0 */
    int32_t shots;                          /* 1: one-shot; 2: two-shot */
} rcoll_oneshot_args_t;

/* Elements of block b's part of count elements of es bytes: [*lo, *hi), cut on 16 bytes. */
RCOLL_ONESHOT_HD void rcoll_oneshot_part(uint64_t count, uint64_t es, unsigned b, uint64_t *lo,
                                      uint64_t *hi)
{
    uint64_t v = 16 / es, per = (count + RCOLL_ONESHOT_BLOCKS - 1) / RCOLL_ONESHOT_BLOCKS;
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

/* Block b's part of rank r's two-shot shard: [*lo, *hi) in elements of the whole buffer. */
RCOLL_ONESHOT_HD void rcoll_twoshot_part(uint64_t count, uint64_t es, int nranks, int r,
                                         unsigned b, uint64_t *lo, uint64_t *hi)
{
    uint64_t slo, shi, plo, phi;
    rcoll_twoshot_shard(count, es, nranks, r, &slo, &shi);
    rcoll_oneshot_part(shi - slo, es, b, &plo, &phi);
    *lo = slo + plo;
    *hi = slo + phi;
}

#endif
