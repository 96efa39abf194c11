/*
 * api_ipc.c - collectives over CUDA IPC (RCOLL_CUDA_IPC=1; docs/gpu.md "CUDA IPC"): every
 * collective but the barrier, on CUDA buffers, every rank on one host, done on the GPUs
 * without touching host memory.  Each rank has a device workspace that every other rank has
 * mapped (cuda/ipc.c), split into two halves used by alternate pieces; each half holds an
 * input area and an output area.  A call goes piece by piece (a piece fills at most one input
 * area); for a piece of the all-reduce:
 *
 *   1. copy sendbuf's piece into this rank's input area;              barrier
 *   2. reduce this rank's shard of the piece over every rank's input area
 *      (peer memory read in place, the device kernels, in rank order) into
 *      this rank's output area;                                        barrier
 *   3. copy every rank's shard from its output area into recvbuf.
 *
 * The reduce is the same with step 3 on the root only; the reduce-scatter copies every
 * block's piece in and reduces its own block straight into recvbuf; the all-gather copies its
 * block in and every rank's block out (the gather: to the root only); the all-to-all copies
 * every block in and its own block out of every rank's; the scatter the root's blocks in and
 * each rank its block out; the broadcast copies the root's piece in and every other rank
 * copies it out.  The v-forms walk the largest block, each block giving what it has in the
 * piece.
 *
 * The barriers are host collectives of the communicator (core/run.c); before each one the
 * IPC stream is synchronized, so what a rank wrote is complete when the others read it.  A
 * half is written again two pieces later, after the next piece's first barrier, by which
 * time every rank has finished reading it (across calls too: halves alternate between
 * calls).  No barrier ends a call: a rank frees its workspace only once every other rank has
 * unmapped it (rcoll_api_ipc_release, at destroy, told through the host segment: without
 * one, CUDA IPC is not used).  Each reduced element is reduced by one rank, so every rank
 * gets the same bits.
 *
 * Every rank must take this path for the same calls: a rank that passes host buffers while
 * the others pass CUDA buffers runs the host collective against their barriers, which the
 * call signatures catch (RCOLL_ERR_INVALID_USAGE naming both calls).  The workspaces are made
 * at the first such call, collectively; if any rank cannot make or map them, every rank logs
 * why and stages from then on.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "algo/reduce.h"
#include "core/api_int.h"
#include "core/plan.h"
#include "core/comm.h"
#include "cuda/gpu.h"
#include "util/log.h"
#include "core/sig.h"
#include "topo/topo.h"
#include "util/status.h"
#include "util/time.h"

#define PIECE_ALIGN 256 /* bytes: areas and shards start on this boundary */

/* RCOLL_P2P_LEVEL below SYS: every other rank's GPU must be within that path class of this
 * rank's, in this host's topology (records: every rank's handle record, rec bytes apart).
 * 0 with the reason in why when not. */
static int p2p_allowed(rcoll_comm_t comm, const char *records, size_t rec, char *why,
                       size_t len)
{
    rcoll_path_t level = (rcoll_path_t)comm->cfg.topo.p2p_level;
    if (level >= RCOLL_PATH_SYS) return 1;
    const char *lname = rcoll_path_name(level);
    char mine[32], bus[32];
    rcoll_gpu_ipc_bus(records + (size_t)comm->rank * rec, mine, sizeof(mine));
    rcoll_topo_t *t = NULL;
    int ok = 1, ia = -1;
    for (int p = 0; p < comm->nranks && ok; p++) {
        rcoll_gpu_ipc_bus(records + (size_t)p * rec, bus, sizeof(bus));
        if (!strcasecmp(bus, mine)) continue; /* the same GPU: LOC, always allowed */
        if (!t) {
            if (rcoll_topo_detect(&comm->cfg.topo, &t) != RCOLL_OK) {
                snprintf(why, len, "RCOLL_P2P_LEVEL=%s but this host's topology could not be "
                         "read: %s", lname, rcoll_err_get());
                return 0;
            }
            ia = rcoll_topo_gpu_index(t, mine);
        }
        int ib = rcoll_topo_gpu_index(t, bus);
        if (ia < 0 || ib < 0) {
            snprintf(why, len, "RCOLL_P2P_LEVEL=%s: %s GPU %s is not in this host's topology "
                     "(%s, %d GPUs), so the path between this rank's GPU %s and rank %d's GPU "
                     "%s is unknown", lname, ia < 0 ? "this rank's" : "another rank's",
                     ia < 0 ? mine : bus, rcoll_topo_source(t), rcoll_topo_ngpus(t), mine, p,
                     bus);
            ok = 0;
            break;
        }
        char ex[160] = "";
        rcoll_path_t path = rcoll_topo_explain_gpu_gpu(t, ia, ib, NULL, ex, sizeof(ex));
        if (path > level) {
            snprintf(why, len, "this rank's GPU %s and rank %d's GPU %s are %s (%s); "
                     "RCOLL_P2P_LEVEL allows up to %s", mine, p, bus, rcoll_path_name(path), ex,
                     lname);
            ok = 0;
        }
    }
    rcoll_topo_free(t);
    return ok;
}

/* Where the one-kernel all-reduce fits in the workspaces (every rank computes the same from
 * the same agreed values): its limit, the halves' offset after the header and the two slots;
 * why, for the INFO line. */
static void oneshot_layout(rcoll_comm_t comm, uint64_t limit, uint64_t limit2, int shared_ok,
                           int shared_gpu, char *why, size_t len)
{
    /* each of the two slots at most a quarter of what follows the header; the two-shot's
     * slot holds an input and an output area */
    uint64_t room = comm->gpu_ipc_bytes > RCOLL_ONESHOT_HDR
                        ? (comm->gpu_ipc_bytes - RCOLL_ONESHOT_HDR) / 4 / PIECE_ALIGN * PIECE_ALIGN
                        : 0;
    comm->gpu_ipc_oneshot = comm->gpu_ipc_twoshot = 0;
    comm->gpu_ipc_off = RCOLL_ONESHOT_HDR;
    if (comm->nranks < 2)
        snprintf(why, len, "no one-kernel all-reduce (one rank)");
    else if (comm->nranks > RCOLL_ONESHOT_MAX_RANKS)
        snprintf(why, len, "no one-kernel all-reduce (more than %d ranks)",
                 RCOLL_ONESHOT_MAX_RANKS);
    else if (!limit && !limit2)
        snprintf(why, len, "no one-kernel all-reduce (RCOLL_CUDA_IPC_ONESHOT and "
                 "RCOLL_CUDA_IPC_TWOSHOT 0 on a rank)");
    else if (shared_gpu && !shared_ok)
        snprintf(why, len, "no one-kernel all-reduce: ranks share a GPU, where kernels waiting "
                 "for each other take turns (RCOLL_CUDA_IPC_ONESHOT_SHARED=1 allows it)");
    else if (!room)
        snprintf(why, len, "no one-kernel all-reduce (RCOLL_CUDA_IPC_BYTES too small)");
    else {
        if (limit > room) limit = room;
        if (limit2 > room / 2) limit2 = room / 2 / PIECE_ALIGN * PIECE_ALIGN;
        if (limit2 < limit) limit2 = limit; /* none */
        uint64_t slot = (limit + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
        uint64_t slot2 = 2 * ((limit2 + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN);
        if (limit2 > limit && slot2 > slot) slot = slot2;
        comm->gpu_ipc_oneshot = (size_t)limit;
        comm->gpu_ipc_twoshot = (size_t)limit2;
        comm->gpu_ipc_off = RCOLL_ONESHOT_HDR + 2 * (size_t)slot;
        if (limit2 > limit)
            snprintf(why, len, "all-reduces as one kernel: one-shot up to %zu bytes, two-shot "
                     "up to %zu bytes", comm->gpu_ipc_oneshot, comm->gpu_ipc_twoshot);
        else
            snprintf(why, len, "all-reduces up to %zu bytes as one kernel",
                     comm->gpu_ipc_oneshot);
    }
}

/* The workspaces, made collectively at the first call: every rank allocates and exports its
 * own, the handles are gathered, every rank maps the others', and all agree.  Each rank's
 * outcome: OK, NOBUF (no CUDA buffer in this call to give the workspace a context: an
 * uneven collective with nothing to send or receive here; try again at a later call) or
 * FAILED (stage from now on).  The worst one decides for every rank. */
enum { SETUP_FAILED = 0, SETUP_NOBUF = 1, SETUP_OK = 2 };

static void ipc_release(rcoll_comm_t comm, int graceful);

static rcoll_status_t ipc_setup(rcoll_comm_t comm, const void *dev, const char *fn)
{
    int n = comm->nranks;
    comm->release_ipc = ipc_release; /* frees what this leaves (nothing if it fails) */
    /* per rank: the handle, int32 outcome, int32 RCOLL_CUDA_IPC_ONESHOT_SHARED, uint64
     * workspace bytes, uint64 RCOLL_CUDA_IPC_ONESHOT, uint64 RCOLL_CUDA_IPC_TWOSHOT, int32
     * the one-kernel grid proposed (its GPU's SMs, at most RCOLL_ONESHOT_MAX_BLOCKS), int32 0 */
    size_t rec = RCOLL_GPU_IPC_HANDLE_BYTES + 40;
    char *all = calloc((size_t)n, rec);
    char mine[RCOLL_GPU_IPC_HANDLE_BYTES + 40];
    uint64_t bytes = comm->cfg.gpu.ipc_bytes, use = bytes;
    uint64_t oneshot = comm->cfg.gpu.ipc_oneshot, one_use = oneshot;
    uint64_t twoshot = comm->cfg.gpu.ipc_twoshot, two_use = twoshot;
    int shared_gpu = 0; /* two ranks on one GPU */
    char oneshot_why[160];
    int32_t shared = comm->cfg.gpu.ipc_oneshot_shared, shared_use = shared;
    int32_t blocks = RCOLL_ONESHOT_MAX_BLOCKS, blocks_use; /* this rank's proposal, then all's */
    memset(mine, 0, sizeof(mine));
    char why[RCOLL_ERR_TEXT_MAX] = "";
    int32_t ok = all ? SETUP_OK : SETUP_FAILED;
    if (!all) snprintf(why, sizeof(why), "out of memory");
    if (ok == SETUP_OK && !comm->ipc_area && n > 1) { /* the same on every rank */
        snprintf(why, sizeof(why), "no host segment (RCOLL_SHM_DISABLE=1, or another transport "
                 "than shared memory forced), through which ranks tell each other they have "
                 "unmapped the workspaces");
        ok = SETUP_FAILED;
    } else if (ok == SETUP_OK && !dev) {
        ok = SETUP_NOBUF;
    } else if (ok == SETUP_OK && rcoll_gpu_ipc_create(dev, comm->cfg.gpu.ipc_bytes, comm->rank,
                                                      n, &comm->gpu_ipc, mine) != RCOLL_OK) {
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
        ok = SETUP_FAILED;
    }
    memcpy(mine + RCOLL_GPU_IPC_HANDLE_BYTES, &ok, sizeof(ok));
    memcpy(mine + RCOLL_GPU_IPC_HANDLE_BYTES + 4, &shared, sizeof(shared));
    memcpy(mine + RCOLL_GPU_IPC_HANDLE_BYTES + 8, &bytes, sizeof(bytes));
    memcpy(mine + RCOLL_GPU_IPC_HANDLE_BYTES + 16, &oneshot, sizeof(oneshot));
    memcpy(mine + RCOLL_GPU_IPC_HANDLE_BYTES + 24, &twoshot, sizeof(twoshot));
    if (ok == SETUP_OK) blocks = rcoll_gpu_ipc_blocks_proposed(comm->gpu_ipc);
    blocks_use = blocks;
    memcpy(mine + RCOLL_GPU_IPC_HANDLE_BYTES + 32, &blocks, sizeof(blocks));
    /* Every rank takes part in every step, whatever its own outcome. */
    rcoll_status_t st = rcoll_coll_run(comm, RCOLL_OP_ALLGATHER, mine, all ? all : mine,
                                       all ? rec : 0, RCOLL_UINT8, RCOLL_SUM, 0);
    if (st == RCOLL_OK && ok == SETUP_OK) {
        for (int p = 0; p < n; p++) {
            const char *r = all + (size_t)p * rec + RCOLL_GPU_IPC_HANDLE_BYTES;
            int32_t pok, pshared, pblocks;
            uint64_t pbytes, poneshot, ptwoshot;
            memcpy(&pok, r, sizeof(pok));
            memcpy(&pshared, r + 4, sizeof(pshared));
            memcpy(&pbytes, r + 8, sizeof(pbytes));
            memcpy(&poneshot, r + 16, sizeof(poneshot));
            memcpy(&ptwoshot, r + 24, sizeof(ptwoshot));
            memcpy(&pblocks, r + 32, sizeof(pblocks));
            if (pok < ok) ok = pok;
            if (pbytes < use) use = pbytes; /* every rank cuts pieces the same */
            if (poneshot < one_use) one_use = poneshot;
            if (ptwoshot < two_use) two_use = ptwoshot;
            if (pshared < shared_use) shared_use = pshared;
            if (pblocks < blocks_use) blocks_use = pblocks; /* all meet on the same flags */
            char bp[32], bq[32];
            rcoll_gpu_ipc_bus(all + (size_t)p * rec, bp, sizeof(bp));
            for (int q = 0; q < p; q++) {
                rcoll_gpu_ipc_bus(all + (size_t)q * rec, bq, sizeof(bq));
                if (!strcasecmp(bp, bq)) shared_gpu = 1;
            }
        }
        if (ok == SETUP_FAILED)
            snprintf(why, sizeof(why), "another rank could not make its workspace (its log "
                     "says why)");
        if (ok == SETUP_OK && !p2p_allowed(comm, all, rec, why, sizeof(why)))
            ok = SETUP_FAILED;
    }
    if (st == RCOLL_OK && ok == SETUP_OK) {
        /* compact the records into the handle array rcoll_gpu_ipc_open reads */
        for (int p = 0; p < n; p++)
            memmove(all + (size_t)p * RCOLL_GPU_IPC_HANDLE_BYTES, all + (size_t)p * rec,
                    RCOLL_GPU_IPC_HANDLE_BYTES);
        if (rcoll_gpu_ipc_open(comm->gpu_ipc, all) != RCOLL_OK) {
            snprintf(why, sizeof(why), "%s", rcoll_err_get());
            ok = SETUP_FAILED;
        }
    }
    free(all);
    int32_t agreed = ok;
    if (st == RCOLL_OK)
        st = rcoll_coll_run(comm, RCOLL_OP_ALLREDUCE, &agreed, &agreed, 1, RCOLL_INT32,
                            RCOLL_MIN, 0);
    if (st != RCOLL_OK) { /* the peers may have opened this workspace: it stays */
        rcoll_gpu_ipc_free(&comm->gpu_ipc, ok == SETUP_OK);
        return rcoll_api_arg_error(comm, st, "%s: setting up CUDA IPC: %s", fn, rcoll_err_get());
    }
    if (agreed == SETUP_NOBUF) { /* not now: this call is staged, a later one tries again */
        rcoll_gpu_ipc_free(&comm->gpu_ipc, 0);
        RCOLL_INFO(CUDA, "CUDA IPC set-up postponed: a rank has no CUDA buffer in this call");
        return RCOLL_OK;
    }
    if (agreed == SETUP_FAILED) {
        if (ok != SETUP_FAILED)
            snprintf(why, sizeof(why), "another rank could not map the workspaces (its log "
                     "says why)");
        RCOLL_WARN(CUDA, "CUDA IPC not used (RCOLL_CUDA_IPC=1): %s; CUDA buffers are staged "
                   "through host memory", why);
        /* every rank unmaps what it opened before any frees its own */
        rcoll_gpu_ipc_unmap(comm->gpu_ipc);
        st = rcoll_coll_barrier(comm);
        rcoll_gpu_ipc_free(&comm->gpu_ipc, st != RCOLL_OK);
        if (st != RCOLL_OK)
            return rcoll_api_arg_error(comm, st, "%s: setting up CUDA IPC: %s", fn,
                                       rcoll_err_get());
        comm->gpu_ipc_state = -1;
        return RCOLL_OK;
    }
    comm->gpu_ipc_state = 1;
    comm->gpu_ipc_bytes = (size_t)use;
    rcoll_gpu_ipc_blocks_set(comm->gpu_ipc, blocks_use);
    oneshot_layout(comm, one_use, two_use, shared_use, shared_gpu, oneshot_why,
                   sizeof(oneshot_why));
    if (use != bytes)
        RCOLL_INFO(CUDA, "CUDA IPC: another rank has a smaller RCOLL_CUDA_IPC_BYTES: %zu of this "
                   "rank's %zu bytes used", (size_t)use, (size_t)bytes);
    RCOLL_INFO(CUDA, "CUDA IPC: %d ranks, %zu-byte workspaces mapped by every rank; %s "
               "(a grid of %d blocks: the fewest SMs of the ranks' GPUs, at most %d)", n,
               comm->gpu_ipc_bytes, oneshot_why, (int)blocks_use, RCOLL_ONESHOT_MAX_BLOCKS);
    return RCOLL_OK;
}

/* One call's view of the workspaces: half h's input area and output area of rank p. */
typedef struct {
    rcoll_comm_t comm;
    rcoll_gpu_ipc_t *ipc;
    const rcoll_coll_args_t *a;
    const size_t *const *v; /* the uneven collectives' arrays (RCOLL_V_*), else NULL */
    int n, me;
    size_t es, half, area;
    /* The steps meet on device flags in the IPC stream's order (dev: where the one-kernel
     * all-reduce runs, every rank on a GPU of its own), else at host barriers.  The meets so
     * far, and the first one's signature and flag (what a failure names). */
    int dev, meets;
    rcoll_sig_t sig, first;
    uint64_t first_flag;
} ipc_call_t;

/* Elements of a block of total elements that lie in the piece [off, off + cnt). */
static size_t part(size_t total, size_t off, size_t cnt)
{
    return total > off ? (total - off < cnt ? total - off : cnt) : 0;
}

static char *in_area(const ipc_call_t *c, int p, int h)
{
    return rcoll_gpu_ipc_base(c->ipc, p) + c->comm->gpu_ipc_off + (size_t)h * c->half;
}

static char *out_area(const ipc_call_t *c, int p, int h)
{
    return in_area(c, p, h) + c->area;
}

/* Rank p's shard of count elements: [*lo, *hi), cut on PIECE_ALIGN bytes (the last shards
 * may be short or empty). */
static void shard(const ipc_call_t *c, size_t count, int p, size_t *lo, size_t *hi)
{
    size_t n = (size_t)c->n, per = (count + n - 1) / n;
    size_t unit = PIECE_ALIGN / c->es ? PIECE_ALIGN / c->es : 1;
    per = (per + unit - 1) / unit * unit;
    *lo = (size_t)p * per < count ? (size_t)p * per : count;
    *hi = *lo + per < count ? *lo + per : count;
}

/* dst = the op of every rank's cnt elements at byte offset at of its input area, in rank
 * order (AVG divides at the last step): one kernel reading every rank's input, or, where it
 * cannot (alignment, rank count), n - 1 two-input passes; one rank: a copy (bools made 0/1,
 * as the host path gives them). */
static rcoll_status_t reduce_all(const ipc_call_t *c, char *dst, size_t at, size_t cnt, int h)
{
    const rcoll_coll_args_t *a = c->a;
    if (!cnt) return RCOLL_OK;
    if (c->n == 1 && a->dt == RCOLL_BOOL)
        return rcoll_gpu_ipc_reduce(c->ipc, dst, in_area(c, 0, h) + at, in_area(c, 0, h) + at,
                                    cnt, a->dt, RCOLL_BOR, 0);
    if (c->n == 1) return rcoll_gpu_ipc_copy(c->ipc, dst, in_area(c, 0, h) + at, cnt * c->es);
    /* the same offset in every rank's workspace; the kernel reads it in 16-byte vectors */
    size_t off = (size_t)(in_area(c, 0, h) - rcoll_gpu_ipc_base(c->ipc, 0)) + at;
    rcoll_status_t st = RCOLL_ERR_UNSUPPORTED;
    if (off % 16 == 0)
        st = rcoll_gpu_ipc_reduce_all(c->ipc, dst, off, cnt, a->dt, a->op,
                                      a->op == RCOLL_AVG ? c->n : 0);
    if (st != RCOLL_ERR_UNSUPPORTED) return st;
    st = RCOLL_OK;
    for (int p = 1; p < c->n && st == RCOLL_OK; p++) {
        const char *x = p == 1 ? in_area(c, 0, h) + at : dst;
        int last = p == c->n - 1;
        rcoll_op_t op = a->op == RCOLL_AVG && !last ? RCOLL_SUM : a->op;
        st = rcoll_gpu_ipc_reduce(c->ipc, dst, x, in_area(c, p, h) + at, cnt, a->dt, op,
                                  a->op == RCOLL_AVG && last ? c->n : 0);
    }
    return st;
}

/* Every rank's steps so far done before any rank's next: a meet enqueued on the IPC stream
 * (dev; a step of the call: its own operation number, the call's signature), else this rank's
 * queued work waited for, then a host barrier. */
static rcoll_status_t sync_all(ipc_call_t *c)
{
    if (!c->dev) {
        rcoll_status_t st = rcoll_gpu_ipc_sync(c->ipc);
        return st == RCOLL_OK ? rcoll_coll_barrier(c->comm) : st;
    }
    rcoll_comm_t comm = c->comm;
    rcoll_sig_t s = c->sig;
    s.seq = comm->coll_seq++;
    rcoll_opnum_record(&comm->opnum, s.seq); /* a step: internal (rcoll_api_ipc_coll) */
    uint64_t flag = (s.seq & 0xffffffffu) << 32 | (uint32_t)rcoll_sig_tag(&s);
    if (!c->meets++) {
        /* announced once, at the first meet: the later ones are enqueued before it has run,
         * and a peer that differs stops there (a failure names it by that number) */
        if (comm->sig_area) rcoll_sig_announce(comm->sig_area, comm->rank, &s);
        c->first = s;
        c->first_flag = flag;
    }
    return rcoll_gpu_ipc_meet(c->ipc, flag, (uint64_t)(comm->cfg.timeout_s * 1e9));
}

/* The end of a piece: its copies out done (host barriers; with meets the call's end waits). */
static rcoll_status_t piece_end(const ipc_call_t *c)
{
    return c->dev ? RCOLL_OK : rcoll_gpu_ipc_sync(c->ipc);
}

/* One piece of cnt elements at element offset off, through half h. */
static rcoll_status_t ipc_piece(ipc_call_t *c, size_t off, size_t cnt, int h)
{
    const rcoll_coll_args_t *a = c->a;
    int n = c->n, me = c->me;
    size_t es = c->es, lo, hi;
    const char *src = a->src;
    char *dst = a->dst;
    rcoll_status_t st = RCOLL_OK;
    switch (a->kind) {
    case RCOLL_OP_ALLREDUCE:
    case RCOLL_OP_REDUCE:
        /* in; reduce this rank's shard into its output area; every shard out (reduce: to
         * the root only) */
        if ((st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h), src + off * es, cnt * es)) ||
            (st = sync_all(c)))
            return st;
        shard(c, cnt, me, &lo, &hi);
        if ((st = reduce_all(c, out_area(c, me, h) + lo * es, lo * es, hi - lo, h)) ||
            (st = sync_all(c)))
            return st;
        if (a->kind == RCOLL_OP_REDUCE && me != a->root) return RCOLL_OK;
        for (int p = 0; p < n && st == RCOLL_OK; p++) {
            shard(c, cnt, p, &lo, &hi);
            st = rcoll_gpu_ipc_copy(c->ipc, dst + (off + lo) * es, out_area(c, p, h) + lo * es,
                                    (hi - lo) * es);
        }
        return st == RCOLL_OK ? piece_end(c) : st;
    case RCOLL_OP_REDUCE_SCATTER:
        /* every block's piece in, side by side; this rank's block reduced into recvbuf */
        for (int b = 0; b < n && st == RCOLL_OK; b++)
            st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h) + (size_t)b * cnt * es,
                                    src + ((size_t)b * a->count + off) * es, cnt * es);
        if (st || (st = sync_all(c))) return st;
        st = reduce_all(c, dst + off * es, (size_t)me * cnt * es, cnt, h);
        return st == RCOLL_OK ? piece_end(c) : st;
    case RCOLL_OP_ALLGATHER:
    case RCOLL_OP_GATHER:
        /* this rank's block in; every block out (gather: on the root only) */
        if ((st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h), src + off * es, cnt * es)) ||
            (st = sync_all(c)) || (a->kind == RCOLL_OP_GATHER && me != a->root))
            return st;
        for (int p = 0; p < n && st == RCOLL_OK; p++)
            st = rcoll_gpu_ipc_copy(c->ipc, dst + ((size_t)p * a->count + off) * es,
                                    in_area(c, p, h), cnt * es);
        return st == RCOLL_OK ? piece_end(c) : st;
    case RCOLL_OP_SCATTER:
    case RCOLL_OP_ALLTOALL:
        /* every block's piece in, side by side (scatter: on the root only); this rank's
         * block out of every rank's copy (scatter: of the root's) */
        if (a->kind == RCOLL_OP_ALLTOALL || me == a->root)
            for (int b = 0; b < n && st == RCOLL_OK; b++)
                st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h) + (size_t)b * cnt * es,
                                        src + ((size_t)b * a->count + off) * es, cnt * es);
        if (st || (st = sync_all(c))) return st;
        if (a->kind == RCOLL_OP_SCATTER)
            st = rcoll_gpu_ipc_copy(c->ipc, dst + off * es,
                                    in_area(c, a->root, h) + (size_t)me * cnt * es, cnt * es);
        for (int p = 0; a->kind == RCOLL_OP_ALLTOALL && p < n && st == RCOLL_OK; p++)
            st = rcoll_gpu_ipc_copy(c->ipc, dst + ((size_t)p * a->count + off) * es,
                                    in_area(c, p, h) + (size_t)me * cnt * es, cnt * es);
        return st == RCOLL_OK ? piece_end(c) : st;
    case RCOLL_OP_ALLGATHERV: {
        /* this rank's block's piece in; every block's piece out at its displacement */
        const size_t *counts = c->v[RCOLL_V_COUNT], *displs = c->v[RCOLL_V_DISPL];
        size_t len = part(counts[me], off, cnt);
        if (len && (st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h), src + off * es,
                                            len * es)))
            return st;
        if ((st = sync_all(c))) return st;
        for (int p = 0; p < n && st == RCOLL_OK; p++)
            if ((len = part(counts[p], off, cnt)))
                st = rcoll_gpu_ipc_copy(c->ipc, dst + (displs[p] + off) * es, in_area(c, p, h),
                                        len * es);
        return st == RCOLL_OK ? piece_end(c) : st;
    }
    case RCOLL_OP_REDUCE_SCATTERV: {
        /* every block's piece in, side by side; this rank's block reduced into recvbuf */
        const size_t *counts = c->v[RCOLL_V_COUNT];
        size_t at = 0, len;
        for (int b = 0; b < n && st == RCOLL_OK; at += counts[b], b++)
            if ((len = part(counts[b], off, cnt)))
                st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h) + (size_t)b * cnt * es,
                                        src + (at + off) * es, len * es);
        if (st || (st = sync_all(c))) return st;
        if ((len = part(counts[me], off, cnt)))
            st = reduce_all(c, dst + off * es, (size_t)me * cnt * es, len, h);
        return st == RCOLL_OK ? piece_end(c) : st;
    }
    case RCOLL_OP_ALLTOALLV: {
        /* every send block's piece in, side by side; from every rank, its block for this
         * rank out at this rank's receive displacement */
        const size_t *sc = c->v[RCOLL_V_COUNT], *sd = c->v[RCOLL_V_DISPL];
        const size_t *rc = c->v[RCOLL_V_RCOUNT], *rd = c->v[RCOLL_V_RDISPL];
        size_t len;
        for (int b = 0; b < n && st == RCOLL_OK; b++)
            if ((len = part(sc[b], off, cnt)))
                st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h) + (size_t)b * cnt * es,
                                        src + (sd[b] + off) * es, len * es);
        if (st || (st = sync_all(c))) return st;
        for (int p = 0; p < n && st == RCOLL_OK; p++)
            if ((len = part(rc[p], off, cnt)))
                st = rcoll_gpu_ipc_copy(c->ipc, dst + (rd[p] + off) * es,
                                        in_area(c, p, h) + (size_t)me * cnt * es, len * es);
        return st == RCOLL_OK ? piece_end(c) : st;
    }
    case RCOLL_OP_BCAST:
        /* the root's piece in; every other rank copies it out */
        if (me == a->root &&
            (st = rcoll_gpu_ipc_copy(c->ipc, in_area(c, me, h), src + off * es, cnt * es)))
            return st;
        if ((st = sync_all(c)) || me == a->root) return st;
        st = rcoll_gpu_ipc_copy(c->ipc, dst + off * es, in_area(c, a->root, h), cnt * es);
        return st == RCOLL_OK ? piece_end(c) : st;
    default:
        return rcoll_err_set(RCOLL_ERR_INTERNAL, "CUDA IPC: collective kind %d", (int)a->kind);
    }
}

/* A one-kernel all-reduce's signature and kernel parameter: numbered and announced as any
 * collective (so that a peer stalled in a different call names this one); the slot and the
 * flag of the communicator's next one-kernel call. */
static void oneshot_prepare(rcoll_comm_t comm, const rcoll_coll_args_t *a, rcoll_sig_t *mine,
                            rcoll_oneshot_args_t *args)
{
    memset(mine, 0, sizeof(*mine));
    mine->seq = comm->coll_seq++;
    comm->opnum.internal = 0; /* the call's own number */
    rcoll_opnum_record(&comm->opnum, mine->seq);
    comm->opnum.internal = 1;
    mine->count = a->count;
    mine->kind = RCOLL_OP_ALLREDUCE;
    mine->dt = (int32_t)a->dt;
    mine->op = (int32_t)a->op;
    mine->root = mine->alg = -1;
    if (comm->sig_area) rcoll_sig_announce(comm->sig_area, comm->rank, mine);
    size_t slot = (comm->gpu_ipc_off - RCOLL_ONESHOT_HDR) / 2;
    memset(args, 0, sizeof(*args));
    args->src = (uint64_t)(uintptr_t)a->src;
    args->dst = (uint64_t)(uintptr_t)a->dst;
    args->count = a->count;
    args->slot = RCOLL_ONESHOT_HDR + (comm->gpu_ipc_oneshots & 1) * slot;
    args->flag = (mine->seq & 0xffffffffu) << 32 | (uint32_t)rcoll_sig_tag(mine);
    args->timeout_ns = (uint64_t)(comm->cfg.timeout_s * 1e9);
    args->avg_divisor = a->op == RCOLL_AVG ? comm->nranks : 0;
    size_t bytes = a->count * rcoll_dt_size(a->dt);
    args->shots = bytes > comm->gpu_ipc_oneshot ? 2 : 1; /* two-shot: an output area after */
    args->out = (bytes + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
    comm->gpu_ipc_oneshots++;
}

/* What a failed one-kernel call (mine, its flag) reported, as the error to return. */
static rcoll_status_t oneshot_failure(rcoll_comm_t comm, const rcoll_sig_t *mine, uint64_t flag,
                                      const rcoll_oneshot_err_t *rep)
{
    /* Name the peer's call where it announced one (every rank is on this host). */
    rcoll_sig_t theirs;
    char num[48], sentence[RCOLL_ERR_TEXT_MAX];
    rcoll_sig_op_number(&comm->opnum, mine->seq, num, sizeof(num));
    if (rep->code == RCOLL_ONESHOT_ABORTED)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "%s stopped at once: %s one-kernel "
                             "all-reduces had stopped after an earlier failure (the first "
                             "failed call's error names its cause)", num,
                             rep->peer == comm->rank ? "this rank's" : "the peers'");
    if (comm->sig_area && rcoll_sig_announced(comm->sig_area, rep->peer, mine->seq, &theirs) &&
        !rcoll_sig_equal(&theirs, mine)) {
        rcoll_sig_sentence(&theirs, rep->peer, mine, -1, &comm->opnum, sentence,
                           sizeof(sentence));
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "%s", sentence);
    }
    if (rep->code == RCOLL_ONESHOT_MISMATCH) { /* its announcement replaced since */
        char what[120];
        rcoll_sig_format(mine, 0, what, sizeof(what));
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "rank %d's one-kernel all-reduce as %s "
                             "was another call (signature digest %08x; this rank's %s has "
                             "%08x): the ranks called different collectives", (int)rep->peer,
                             num, (unsigned)(rep->flag & 0xffffffffu), what,
                             (unsigned)(flag & 0xffffffffu));
    }
    /* A timeout: where the peer is, from its last flag and its last announcement. */
    char where[200] = "", flagged[96] = "no one-kernel all-reduce yet";
    if (rep->flag) {
        char pn[48];
        rcoll_sig_op_number(&comm->opnum, (mine->seq & ~(uint64_t)0xffffffffu) |
                                              (rep->flag >> 32), pn, sizeof(pn));
        snprintf(flagged, sizeof(flagged), "its last one-kernel all-reduce was %s", pn);
    }
    if (comm->sig_area && rcoll_sig_latest(comm->sig_area, rep->peer, &theirs)) {
        char what[120], tn[48];
        rcoll_sig_format(&theirs, 0, what, sizeof(what));
        rcoll_sig_op_number(&comm->opnum, theirs.seq, tn, sizeof(tn));
        snprintf(where, sizeof(where), "; it last started %s as %s", what, tn);
    }
    return rcoll_err_set(RCOLL_ERR_TIMEOUT, "rank %d did not join %s within %g s "
                         "(%s): %s%s", (int)rep->peer, num, comm->cfg.timeout_s,
                         comm->cfg.timeout_src[0] ? comm->cfg.timeout_src : "RCOLL_TIMEOUT",
                         flagged, where);
}

/* The one-kernel all-reduce (cuda/oneshot.h), blocking: one kernel, no host synchronization
 * but the stream's at the end.  A failure leaves the ranks' flags out of step: the
 * communicator's CUDA IPC calls fail from then on (gpu_ipc_state -2). */
static rcoll_status_t oneshot_allreduce(rcoll_comm_t comm, const rcoll_coll_args_t *a)
{
    rcoll_sig_t mine;
    rcoll_oneshot_args_t args;
    oneshot_prepare(comm, a, &mine, &args);
    rcoll_oneshot_err_t rep;
    rcoll_status_t st = rcoll_gpu_ipc_oneshot(comm->gpu_ipc, &args, a->dt, a->op, &rep);
    if (st == RCOLL_OK && rep.code == RCOLL_ONESHOT_OK) return RCOLL_OK;
    comm->gpu_ipc_state = -2;
    if (st != RCOLL_OK) return st;
    return oneshot_failure(comm, &mine, args.flag, &rep);
}

/* ---- the one-kernel all-reduce in the caller's stream order ----
 * Each call is launched on the caller's stream (after the previous one-kernel call, cuda/
 * ipc.c's event chain) and not waited for: its report is read once its event has passed, by
 * a later call on the communicator (any call: check_comm polls) or at destroy.  A failure
 * fails the communicator (no caller to return it to), as a stream call's host function does;
 * the kernels queued behind it stop at once on every rank (the abort word, cuda/oneshot.h). */
struct rcoll_ipc_inflight {
    rcoll_sig_t sig;
    uint64_t flag;
    const char *fn;
    void *stream;
    int busy;
};

static void stream_fail(rcoll_comm_t comm, const struct rcoll_ipc_inflight *f,
                        rcoll_status_t st)
{
    comm->gpu_ipc_state = -2;
    if (comm->failed != RCOLL_OK) return;
    comm->failed = st;
    char num[48];
    rcoll_sig_op_number(&comm->opnum, f->sig.seq, num, sizeof(num));
    snprintf(comm->last_error, sizeof(comm->last_error), "%s (%s, a CUDA IPC one-kernel "
             "all-reduce on stream %p) failed in stream order: %.480s", f->fn, num, f->stream,
             rcoll_err_get());
    RCOLL_WARN(COLL, "%s", comm->last_error);
}

/* Read the reports of the finished stream-ordered calls, oldest first (wait: up to and
 * including ring entry upto, or every one for upto < 0; else only those finished). */
static void stream_reap(rcoll_comm_t comm, int wait, int upto)
{
    struct rcoll_ipc_inflight *fl = comm->ipc_fl;
    if (!fl || !comm->gpu_ipc) return;
    while (comm->ipc_fl_busy > 0) {
        int i = comm->ipc_fl_head, done = 0;
        int w = wait && (upto < 0 || comm->ipc_fl_waiting);
        rcoll_oneshot_err_t rep;
        rcoll_status_t st = rcoll_gpu_ipc_oneshot_poll(comm->gpu_ipc, i, w, &done, &rep);
        if (!done) break;
        fl[i].busy = 0;
        comm->ipc_fl_busy--;
        comm->ipc_fl_head = (i + 1) % RCOLL_GPU_IPC_RING;
        if (st != RCOLL_OK)
            stream_fail(comm, &fl[i], st);
        else if (rep.code != RCOLL_ONESHOT_OK)
            stream_fail(comm, &fl[i], oneshot_failure(comm, &fl[i].sig, fl[i].flag, &rep));
        if (i == upto) comm->ipc_fl_waiting = 0;
    }
}

void rcoll_api_ipc_poll(rcoll_comm_t comm)
{
    stream_reap(comm, 0, -1);
}

rcoll_status_t rcoll_api_ipc_stream(rcoll_comm_t comm, const rcoll_coll_args_t *a, void *stream,
                                    const char *fn, int *taken)
{
    *taken = 0;
    if (comm->gpu_ipc_state == 0) {
        /* The set-up's host collectives must not run beside an earlier stream call's host
         * function: wait until they have all run (every rank reaches this call; once). */
        uint64_t until = rcoll_now_ns() + (uint64_t)(comm->cfg.timeout_s * 1e9);
        while (atomic_load_explicit(&comm->stream_pending, memory_order_acquire)) {
            if (rcoll_now_ns() > until)
                return rcoll_api_arg_error(comm, RCOLL_ERR_TIMEOUT, "%s: setting up CUDA IPC "
                                           "waits for this communicator's earlier stream calls "
                                           "to run: none ran within %g s (RCOLL_TIMEOUT; is "
                                           "the stream blocked?)", fn, comm->cfg.timeout_s);
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        uint64_t ops = comm->opnum.ops;
        comm->opnum.internal = 1;
        rcoll_status_t st = ipc_setup(comm, a->src, fn);
        comm->opnum.internal = 0;
        if (st != RCOLL_OK) {
            if (comm->opnum.ops == ops) rcoll_opnum_count(&comm->opnum);
            return st;
        }
    }
    if (comm->gpu_ipc_state == -2)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: an earlier one-kernel "
                                   "all-reduce on this communicator failed, so its ranks no "
                                   "longer agree on the CUDA IPC flags: abort it", fn);
    /* not usable (staged), or larger than the one-kernel takes (staged in stream order) */
    if (comm->gpu_ipc_state != 1 || !a->count ||
        a->count * rcoll_dt_size(a->dt) > comm->gpu_ipc_twoshot)
        return RCOLL_OK;
    if (!comm->ipc_fl &&
        !(comm->ipc_fl = calloc(RCOLL_GPU_IPC_RING, sizeof(struct rcoll_ipc_inflight))))
        return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "%s: out of memory", fn);
    stream_reap(comm, 0, -1);
    int busy, i = rcoll_gpu_ipc_ring_next(comm->gpu_ipc, &busy);
    if (busy) { /* RCOLL_GPU_IPC_RING calls in flight: wait for the oldest */
        comm->ipc_fl_waiting = 1;
        stream_reap(comm, 1, i);
        comm->ipc_fl_waiting = 0;
    }
    if (comm->failed != RCOLL_OK)
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: an earlier stream call "
                                   "on this communicator failed: %s", fn, comm->last_error);
    *taken = 1;
    struct rcoll_ipc_inflight *f = &comm->ipc_fl[i];
    rcoll_oneshot_args_t args;
    oneshot_prepare(comm, a, &f->sig, &args);
    comm->opnum.internal = 0;
    f->flag = args.flag;
    f->fn = fn;
    f->stream = stream;
    int slot = -1;
    rcoll_status_t st =
        rcoll_gpu_ipc_oneshot_async(comm->gpu_ipc, &args, a->dt, a->op, stream, &slot);
    if (st != RCOLL_OK) {
        comm->gpu_ipc_state = -2; /* this rank's flags are behind the peers' now */
        return rcoll_api_arg_error(comm, st, "%s: CUDA IPC one-kernel all-reduce: %s (not "
                                   "enqueued; the communicator's CUDA IPC calls fail from now "
                                   "on: abort it)", fn, rcoll_err_get());
    }
    f->busy = 1;
    if (!comm->ipc_fl_busy++) comm->ipc_fl_head = slot;
    return RCOLL_OK;
}

/* The communicator's CUDA IPC workspaces, at its end (its release_ipc): this rank unmaps the
 * peers' and, when graceful and the host segment is there, waits (RCOLL_TIMEOUT at most; a
 * WARN) until every peer has unmapped this rank's (a peer may still read it: the one-kernel
 * all-reduce ends with no barrier), then frees its own. */
static void ipc_release(rcoll_comm_t comm, int graceful)
{
    if (!comm->gpu_ipc) return;
    stream_reap(comm, 1, -1); /* the stream-ordered calls still running: a failure is logged */
    free(comm->ipc_fl);
    comm->ipc_fl = NULL;
    rcoll_gpu_ipc_unmap(comm->gpu_ipc); /* this rank's work done, the peers' unmapped */
    /* Free this rank's workspace only once every peer has unmapped it (or exited): the driver
     * leaves freeing an exported allocation that another process still has mapped undefined,
     * and a peer may still read this rank's (a one-kernel call ends with no barrier; after an
     * abort its kernel may still poll this rank's flags).  Say that this rank has unmapped
     * theirs, then wait for them (graceful) or look once (abort); a workspace some peer may
     * still map is kept until this process exits. */
    int keep = 0, waiting_for = -1;
    if (comm->ipc_area) {
        _Atomic uint64_t *mine = (_Atomic uint64_t *)(void *)(comm->ipc_area +
                                                              (size_t)comm->rank * 64);
        atomic_store_explicit(mine, 1, memory_order_release);
        uint64_t until = rcoll_now_ns() + (uint64_t)(comm->cfg.timeout_s * 1e9);
        for (int p = 0; p < comm->nranks && !keep; p++) {
            _Atomic uint64_t *theirs =
                (_Atomic uint64_t *)(void *)(comm->ipc_area + (size_t)p * 64);
            while (p != comm->rank && atomic_load_explicit(theirs, memory_order_acquire) != 1) {
                if (kill(comm->peers[p].pid, 0) != 0 && errno == ESRCH) break; /* exited */
                if (!graceful || rcoll_now_ns() > until) {
                    keep = 1;
                    waiting_for = p;
                    break;
                }
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
        }
    }
    if (keep && graceful && waiting_for >= 0)
        RCOLL_WARN(CUDA, "the CUDA IPC workspace is kept until this process exits: rank %d has "
                   "not unmapped it after %g s (RCOLL_TIMEOUT; has it destroyed the "
                   "communicator?)", waiting_for, comm->cfg.timeout_s);
    else if (keep && waiting_for >= 0)
        RCOLL_INFO(CUDA, "aborted: the CUDA IPC workspace is kept until this process exits "
                   "(rank %d may still have it mapped)", waiting_for);
    rcoll_gpu_ipc_free(&comm->gpu_ipc, keep);
}

static rcoll_status_t ipc_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                               const size_t *const *v, rcoll_request_t *req, const char *fn,
                               int *taken)
{
    *taken = 0;
    struct rcoll_request *r = NULL;
    if (req) { /* the nonblocking form: a request, complete at return */
        rcoll_status_t st = rcoll_req_alloc(comm, a->kind, &r);
        if (st != RCOLL_OK)
            return rcoll_api_arg_error(comm, st, "%s: %s", fn, rcoll_err_get());
    }
    if (comm->gpu_ipc_state == 0) {
        /* any CUDA buffer of the call gives the context (reduce: recvbuf may be NULL) */
        rcoll_status_t st = ipc_setup(comm, a->src ? a->src : a->dst, fn);
        if (st != RCOLL_OK) {
            if (r) rcoll_req_release(r);
            return st;
        }
    }
    if (comm->gpu_ipc_state == -2) {
        if (r) rcoll_req_release(r);
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_USAGE, "%s: an earlier one-kernel "
                                   "all-reduce on this communicator failed, so its ranks no "
                                   "longer agree on the CUDA IPC flags: abort it", fn);
    }
    if (comm->gpu_ipc_state != 1) { /* not usable, or postponed: staged */
        if (r) rcoll_req_release(r);
        return RCOLL_OK;
    }
    *taken = 1;
    if (a->kind == RCOLL_OP_ALLREDUCE && a->count &&
        a->count * rcoll_dt_size(a->dt) <= comm->gpu_ipc_twoshot) {
        rcoll_status_t st = oneshot_allreduce(comm, a);
        if (st != RCOLL_OK) {
            if (r) rcoll_req_release(r);
            return rcoll_api_arg_error(comm, st, "%s: CUDA IPC one-kernel all-reduce: %s", fn,
                                       rcoll_err_get());
        }
        if (r) {
            r->complete = 1;
            r->status = RCOLL_OK;
            *req = r;
        }
        return RCOLL_OK;
    }
    ipc_call_t c = {.comm = comm, .ipc = comm->gpu_ipc, .a = a, .v = v, .n = comm->nranks,
                    .me = comm->rank, .es = rcoll_dt_size(a->dt)};
    /* the same on every rank */
    c.half = (comm->gpu_ipc_bytes - comm->gpu_ipc_off) / 2 / PIECE_ALIGN * PIECE_ALIGN;
    c.area = c.half / 2 / PIECE_ALIGN * PIECE_ALIGN;
    /* elements per piece: what one input area holds (n blocks' pieces side by side for the
     * reduce-scatter, the all-to-all and the scatter) */
    int blocks = a->kind == RCOLL_OP_REDUCE_SCATTER || a->kind == RCOLL_OP_ALLTOALL ||
                 a->kind == RCOLL_OP_SCATTER || a->kind == RCOLL_OP_REDUCE_SCATTERV ||
                 a->kind == RCOLL_OP_ALLTOALLV;
    size_t max_count = c.area / c.es / (blocks ? (size_t)c.n : 1);
    if (!max_count) { /* never a piece of nothing (that would loop for ever) */
        if (r) rcoll_req_release(r);
        return rcoll_api_arg_error(comm, RCOLL_ERR_INVALID_ARG, "%s: CUDA IPC %s: a %zu-byte "
                                   "input area holds no piece of %d blocks (raise "
                                   "RCOLL_CUDA_IPC_BYTES)", fn, rcoll_sig_kind_name(a->kind),
                                   c.area, c.n);
    }
    rcoll_status_t st = RCOLL_OK;
    /* The pieces walk [0, extent): the count, or for the uneven collectives the largest
     * block, the same on every rank (all-to-all-v: agreed, since each rank knows its own
     * counts only). */
    size_t extent = a->count;
    if (rcoll_plan_ipc_vkind(a->kind)) {
        uint64_t big = 0;
        for (int p = 0; p < c.n; p++) {
            if (v[RCOLL_V_COUNT][p] > big) big = v[RCOLL_V_COUNT][p];
            if (v[RCOLL_V_RCOUNT] && v[RCOLL_V_RCOUNT][p] > big) big = v[RCOLL_V_RCOUNT][p];
        }
        if (a->kind == RCOLL_OP_ALLTOALLV)
            st = rcoll_coll_run(comm, RCOLL_OP_ALLREDUCE, &big, &big, 1, RCOLL_UINT64,
                                RCOLL_MAX, 0);
        extent = (size_t)big;
    }
    /* Device meets where the one-kernel all-reduce runs (every rank on a GPU of its own: no
     * kernels of several ranks spinning in turns on one GPU); the signature is what every
     * rank has alike (extent, not the v-forms' own counts). */
    c.dev = comm->gpu_ipc_oneshot > 0 || comm->gpu_ipc_twoshot > 0;
    memset(&c.sig, 0, sizeof(c.sig));
    c.sig.kind = (int32_t)a->kind;
    c.sig.count = extent;
    c.sig.dt = (int32_t)a->dt;
    int reduces = a->kind == RCOLL_OP_ALLREDUCE || a->kind == RCOLL_OP_REDUCE ||
                  a->kind == RCOLL_OP_REDUCE_SCATTER || a->kind == RCOLL_OP_REDUCE_SCATTERV;
    int rooted = a->kind == RCOLL_OP_REDUCE || a->kind == RCOLL_OP_BCAST ||
                 a->kind == RCOLL_OP_GATHER || a->kind == RCOLL_OP_SCATTER;
    c.sig.op = reduces ? (int32_t)a->op : -1;
    c.sig.root = rooted ? a->root : -1;
    c.sig.alg = -1;
    if (c.dev && st == RCOLL_OK) rcoll_gpu_ipc_meets_begin(c.ipc);
    size_t done = 0;
    for (int h = comm->gpu_ipc_half; done < extent && st == RCOLL_OK; h ^= 1) {
        size_t cnt = extent - done < max_count ? extent - done : max_count;
        st = ipc_piece(&c, done, cnt, h);
        done += cnt;
        comm->gpu_ipc_half = h ^ 1;
    }
    if (c.meets) { /* the stream drained (a failed meet stops the later ones at once) */
        rcoll_oneshot_err_t rep;
        rcoll_status_t est = rcoll_gpu_ipc_meets_end(c.ipc, &rep);
        if (st == RCOLL_OK && est != RCOLL_OK) st = est;
        if (st == RCOLL_OK && rep.code != RCOLL_ONESHOT_OK)
            st = oneshot_failure(comm, &c.first, c.first_flag, &rep);
        if (st != RCOLL_OK || rep.code != RCOLL_ONESHOT_OK)
            comm->gpu_ipc_state = -2; /* the ranks' flags are out of step now */
    }
    /* No barrier ends the call: the next call's first barrier (or meet) comes before any rank
     * writes a half again, and a rank frees its workspace only once the others have unmapped
     * it. */
    if (st != RCOLL_OK) {
        if (r) rcoll_req_release(r);
        return rcoll_api_arg_error(comm, st, "%s: CUDA IPC %s: %s", fn,
                                   rcoll_sig_kind_name(a->kind), rcoll_err_get());
    }
    if (r) {
        r->complete = 1;
        r->status = RCOLL_OK;
        *req = r;
    }
    return RCOLL_OK;
}

/* The call is one operation in sentences; its set-up and barriers are steps of it (core/sig.h).
 * Staged, the host collective that follows is the operation. */
rcoll_status_t rcoll_api_ipc_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                  const size_t *const *v, rcoll_request_t *req, const char *fn,
                                  int *taken)
{
    uint64_t ops = comm->opnum.ops;
    comm->opnum.internal = 1;
    rcoll_status_t st = ipc_coll(comm, a, v, req, fn, taken);
    comm->opnum.internal = 0;
    if ((*taken || st != RCOLL_OK) && comm->opnum.ops == ops) rcoll_opnum_count(&comm->opnum);
    return st;
}
