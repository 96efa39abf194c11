/*
 * api_ipc.c - the CUDA IPC all-reduce (RCOLL_CUDA_IPC=1; docs/gpu.md "CUDA IPC"): a blocking
 * all-reduce on CUDA buffers, every rank on one host, done on the GPUs without touching host
 * memory.  Each rank has a device workspace that every other rank has mapped (cuda/ipc.c),
 * split into two halves used by alternate pieces; each half holds an input area and an
 * output area of H bytes.  One piece of B <= H bytes (the all-reduce goes piece by piece):
 *
 *   1. copy sendbuf's piece into this rank's input area;              barrier
 *   2. reduce this rank's shard of the piece over every rank's input area
 *      (peer memory read in place, the device kernels, in rank order) into
 *      this rank's output area;                                        barrier
 *   3. copy every rank's shard from its output area into recvbuf.
 *
 * The barriers are host collectives of the communicator (core/run.c); before each one the
 * IPC stream is synchronized, so what a rank wrote is complete when the others read it.  A
 * half is written again two pieces later, after the next piece's first barrier, by which
 * time every rank has finished reading it; a last barrier ends the call, so that no rank
 * frees its workspace (destroy) while another still reads it.  Each shard is reduced by one
 * rank, so every rank gets the same bits.
 *
 * Every rank must take this path for the same calls: a rank that passes host buffers to a
 * blocking all-reduce while the others pass CUDA buffers runs the host all-reduce against
 * their barriers, which the call signatures catch (RCOLL_ERR_INVALID_USAGE naming both calls).
 * The workspaces are made at the first such call, collectively; if any rank cannot make or
 * map them, every rank logs why and stages from then on.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "core/api_int.h"
#include "core/comm.h"
#include "cuda/gpu.h"
#include "util/log.h"
#include "util/status.h"

#define PIECE_ALIGN 256 /* bytes: areas and shards start on this boundary */

/* A barrier as rcoll_barrier makes one: a byte per rank, max-reduced, so every rank's
 * result depends on every rank's entry. */
static rcoll_status_t barrier(rcoll_comm_t comm)
{
    uint8_t small[64], *buf = small;
    size_t n = (size_t)comm->nranks;
    if (n > sizeof(small) && !(buf = calloc(n, 1)))
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "out of memory");
    memset(buf, 0, n);
    buf[comm->rank] = 1;
    rcoll_status_t st =
        rcoll_coll_run(comm, RCOLL_OP_BARRIER, buf, buf, n, RCOLL_UINT8, RCOLL_MAX, 0);
    if (buf != small) free(buf);
    return st;
}

/* The workspaces, made collectively at the first call: every rank allocates and exports its
 * own, the handles are gathered, every rank maps the others', and all agree. */
static rcoll_status_t ipc_setup(rcoll_comm_t comm, const void *dev, const char *fn)
{
    int n = comm->nranks;
    size_t rec = RCOLL_GPU_IPC_HANDLE_BYTES + 8; /* the handle, then int32 ok */
    char *all = calloc((size_t)n, rec);
    char mine[RCOLL_GPU_IPC_HANDLE_BYTES + 8];
    memset(mine, 0, sizeof(mine));
    char why[RCOLL_ERR_TEXT_MAX] = "";
    int32_t ok = all != NULL;
    if (!ok) snprintf(why, sizeof(why), "out of memory");
    if (ok && rcoll_gpu_ipc_create(dev, comm->cfg.gpu.ipc_bytes, comm->rank, n, &comm->gpu_ipc,
                                   mine) != RCOLL_OK) {
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
        ok = 0;
    }
    memcpy(mine + RCOLL_GPU_IPC_HANDLE_BYTES, &ok, sizeof(ok));
    /* Every rank takes part in every step, whatever its own outcome. */
    rcoll_status_t st = rcoll_coll_run(comm, RCOLL_OP_ALLGATHER, mine, all ? all : mine,
                                       all ? rec : 0, RCOLL_UINT8, RCOLL_SUM, 0);
    if (st == RCOLL_OK && ok) {
        for (int p = 0; p < n; p++) {
            int32_t pok;
            memcpy(&pok, all + (size_t)p * rec + RCOLL_GPU_IPC_HANDLE_BYTES, sizeof(pok));
            if (!pok) ok = 0;
        }
        if (!ok) snprintf(why, sizeof(why), "another rank could not make its workspace (its "
                          "log says why)");
    }
    if (st == RCOLL_OK && ok) {
        /* compact the records into the handle array rcoll_gpu_ipc_open reads */
        for (int p = 0; p < n; p++)
            memmove(all + (size_t)p * RCOLL_GPU_IPC_HANDLE_BYTES, all + (size_t)p * rec,
                    RCOLL_GPU_IPC_HANDLE_BYTES);
        if (rcoll_gpu_ipc_open(comm->gpu_ipc, all) != RCOLL_OK) {
            snprintf(why, sizeof(why), "%s", rcoll_err_get());
            ok = 0;
        }
    }
    free(all);
    int32_t agreed = ok;
    if (st == RCOLL_OK)
        st = rcoll_coll_run(comm, RCOLL_OP_ALLREDUCE, &agreed, &agreed, 1, RCOLL_INT32,
                            RCOLL_MIN, 0);
    if (st != RCOLL_OK) {
        rcoll_gpu_ipc_free(&comm->gpu_ipc);
        return rcoll_api_arg_error(comm, st, "%s: setting up CUDA IPC: %s", fn, rcoll_err_get());
    }
    if (!agreed) {
        if (ok) snprintf(why, sizeof(why), "another rank could not map the workspaces (its log "
                         "says why)");
        RCOLL_WARN(CUDA, "CUDA IPC not used (RCOLL_CUDA_IPC=1): %s; CUDA buffers are staged "
                   "through host memory", why);
        rcoll_gpu_ipc_free(&comm->gpu_ipc);
        comm->gpu_ipc_state = -1;
        return RCOLL_OK;
    }
    comm->gpu_ipc_state = 1;
    RCOLL_INFO(CUDA, "CUDA IPC: %d ranks, %zu-byte workspaces mapped by every rank", n,
               comm->cfg.gpu.ipc_bytes);
    return RCOLL_OK;
}

/* One piece: bytes at off of the call, through half h of the workspaces. */
static rcoll_status_t ipc_piece(rcoll_comm_t comm, const rcoll_coll_args_t *a, size_t off,
                                size_t count, int h, size_t half)
{
    rcoll_gpu_ipc_t *ipc = comm->gpu_ipc;
    int n = comm->nranks, me = comm->rank;
    size_t es = rcoll_dt_size(a->dt), bytes = count * es;
    size_t area = half / 2; /* input area, then output area, each `area` bytes */
    char *mine = rcoll_gpu_ipc_base(ipc, me) + (size_t)h * half;
    rcoll_status_t st = rcoll_gpu_ipc_copy(ipc, mine, (const char *)a->src + off, bytes);
    if (st == RCOLL_OK) st = rcoll_gpu_ipc_sync(ipc);
    /* a failure still takes part in the barrier's place: the others then fail on the
     * signature or the peer, not wait */
    if (st != RCOLL_OK) return st;
    if ((st = barrier(comm)) != RCOLL_OK) return st;

    /* This rank's shard: elements [lo, hi), shards cut on PIECE_ALIGN bytes. */
    size_t per = (count + (size_t)n - 1) / (size_t)n;
    size_t unit = PIECE_ALIGN / es ? PIECE_ALIGN / es : 1;
    per = (per + unit - 1) / unit * unit;
    size_t lo = (size_t)me * per, hi = lo + per;
    if (lo > count) lo = count;
    if (hi > count) hi = count;
    char *out = mine + area + lo * es;
    int avg = a->op == RCOLL_AVG ? n : 0;
    if (hi > lo) {
        if (n == 1 && a->dt == RCOLL_BOOL) {
            /* one rank: the input itself, but bools as 0/1, as the host path gives them */
            st = rcoll_gpu_ipc_reduce(ipc, out, mine + lo * es, mine + lo * es, hi - lo, a->dt,
                                      RCOLL_BOR, 0);
        } else if (n == 1) {
            st = rcoll_gpu_ipc_copy(ipc, out, mine + lo * es, (hi - lo) * es);
        } else {
            /* out = in_0 op in_1, then out op= in_p for p = 2 .. n-1; AVG divides at the
             * last step only */
            for (int p = 1; p < n && st == RCOLL_OK; p++) {
                const char *x = p == 1 ? rcoll_gpu_ipc_base(ipc, 0) + (size_t)h * half + lo * es
                                       : out;
                const char *y = rcoll_gpu_ipc_base(ipc, p) + (size_t)h * half + lo * es;
                rcoll_op_t op = a->op == RCOLL_AVG ? (p == n - 1 ? RCOLL_AVG : RCOLL_SUM) : a->op;
                st = rcoll_gpu_ipc_reduce(ipc, out, x, y, hi - lo, a->dt, op,
                                          p == n - 1 ? avg : 0);
            }
        }
    }
    if (st == RCOLL_OK) st = rcoll_gpu_ipc_sync(ipc);
    if (st != RCOLL_OK) return st;
    if ((st = barrier(comm)) != RCOLL_OK) return st;

    /* Every shard into recvbuf. */
    for (int p = 0; p < n && st == RCOLL_OK; p++) {
        size_t plo = (size_t)p * per, phi = plo + per;
        if (plo > count) plo = count;
        if (phi > count) phi = count;
        if (phi > plo)
            st = rcoll_gpu_ipc_copy(ipc, (char *)a->dst + off + plo * es,
                                    rcoll_gpu_ipc_base(ipc, p) + (size_t)h * half + area +
                                        plo * es,
                                    (phi - plo) * es);
    }
    if (st == RCOLL_OK) st = rcoll_gpu_ipc_sync(ipc);
    return st;
}

rcoll_status_t rcoll_api_ipc_allreduce(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                       rcoll_request_t *req, const char *fn, int *taken)
{
    *taken = 0;
    struct rcoll_request *r = NULL;
    if (req) { /* the nonblocking form: a request, complete at return */
        rcoll_status_t st = rcoll_req_alloc(comm, RCOLL_OP_ALLREDUCE, &r);
        if (st != RCOLL_OK)
            return rcoll_api_arg_error(comm, st, "%s: %s", fn, rcoll_err_get());
    }
    if (comm->gpu_ipc_state == 0) {
        rcoll_status_t st = ipc_setup(comm, a->src, fn);
        if (st != RCOLL_OK) {
            if (r) rcoll_req_release(r);
            return st;
        }
    }
    if (comm->gpu_ipc_state < 0) {
        if (r) rcoll_req_release(r);
        return RCOLL_OK;
    }
    *taken = 1;
    size_t es = rcoll_dt_size(a->dt);
    size_t half = rcoll_gpu_ipc_bytes(comm->gpu_ipc) / 2 / PIECE_ALIGN * PIECE_ALIGN;
    size_t area = half / 2 / PIECE_ALIGN * PIECE_ALIGN;
    size_t max_count = area / es; /* shards end at the piece's count: no rounding past it */
    rcoll_status_t st = RCOLL_OK;
    size_t done = 0;
    for (int h = comm->gpu_ipc_half; done < a->count && st == RCOLL_OK; h ^= 1) {
        size_t cnt = a->count - done < max_count ? a->count - done : max_count;
        st = ipc_piece(comm, a, done * es, cnt, h, half);
        done += cnt;
        comm->gpu_ipc_half = h ^ 1;
    }
    /* Nobody returns while a peer may still read its workspace: a rank may destroy its
     * communicator (and free the workspace) as soon as the call returns. */
    if (st == RCOLL_OK) st = barrier(comm);
    if (st != RCOLL_OK) {
        if (r) rcoll_req_release(r);
        return rcoll_api_arg_error(comm, st, "%s: CUDA IPC all-reduce: %s", fn,
                                   rcoll_err_get());
    }
    if (r) {
        r->complete = 1;
        r->status = RCOLL_OK;
        *req = r;
    }
    return RCOLL_OK;
}
