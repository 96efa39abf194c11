/*
 * mpi_interpose.c - the PMPI interposer: MPI collectives that rcoll can run (predefined
 * contiguous types, SUM/PROD/MIN/MAX, intra-communicators, at least RCOLL_MPI_MIN_BYTES)
 * go to rcoll; every other call goes to the PMPI_ function unchanged.  The decision uses only
 * arguments every rank passes alike (count, datatype, op, root, communicator), never local
 * state, so all ranks of a communicator take the same path for each call.
 * One table (funcs[]) lists every wrapped function: its rcoll runner (NULL: always MPI) and
 * its PMPI fall-through.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mpi/mpi_int.h"
#include "util/log.h"

/* One call's arguments, as every wrapper receives them. */
typedef struct {
    const void *sbuf;
    void *rbuf;
    int count;           /* elements (per rank block for the block collectives) */
    MPI_Datatype dt;
    int scount;          /* send side of allgather/alltoall */
    MPI_Datatype sdt;
    MPI_Op op;
    int root;
    MPI_Comm comm;
    MPI_Request *req;
    const int *counts, *displs, *rcounts, *rdispls; /* the v-variants */
    /* gather/scatter: the caller's own counts and types (count/dt and scount/sdt above then
     * hold the side every rank gives, on which they decide) */
    int o_scount, o_rcount;
    MPI_Datatype o_sdt, o_rdt;
    /* filled by dispatch() for the runner */
    rcoll_datatype_t rdt;
    rcoll_op_t rop;
    size_t n;            /* elements of rdt */
    size_t esize, sesize;/* the v-variants: receive and send type sizes in bytes */
    int local_err;       /* the v-variants: an MPI error of this rank's own arguments, raised
                          * after it took part in the collective */
} mpix_call_t;

/* K_VMOVE: the v-variants, moved as bytes (counts and displacements converted to size_t
 * arrays of bytes) */
typedef enum { K_REDUCE, K_MOVE, K_SYNC, K_VMOVE } mpix_kind_t;

typedef struct {
    const char *name;
    mpix_kind_t kind;
    int blocks;          /* 1: the buffer holds nranks blocks of count (bytes x nranks) */
    int has_root;
    rcoll_status_t (*run)(mpix_call_t *c, mpix_comm_t *e); /* NULL: always falls through */
    int (*pmpi)(const mpix_call_t *c);
} mpix_func_desc_t;

static const void *rc_sbuf(const void *sbuf)
{
    return sbuf == MPI_IN_PLACE ? RCOLL_IN_PLACE : sbuf;
}

/* ---- rcoll runners ---- */
static rcoll_status_t run_allreduce(mpix_call_t *c, mpix_comm_t *e)
{
    return rcoll_allreduce(rc_sbuf(c->sbuf), c->rbuf, c->n, c->rdt, c->rop, e->rc);
}
static rcoll_status_t run_reduce(mpix_call_t *c, mpix_comm_t *e)
{
    return rcoll_reduce(rc_sbuf(c->sbuf), c->rbuf, c->n, c->rdt, c->rop, c->root, e->rc);
}
static rcoll_status_t run_bcast(mpix_call_t *c, mpix_comm_t *e)
{
    return rcoll_bcast(c->rbuf, c->n, c->rdt, c->root, e->rc);
}
static rcoll_status_t run_allgather(mpix_call_t *c, mpix_comm_t *e)
{
    return rcoll_allgather(rc_sbuf(c->sbuf), c->rbuf, c->n, c->rdt, e->rc);
}
static rcoll_status_t run_reduce_scatter_block(mpix_call_t *c, mpix_comm_t *e)
{
    return rcoll_reduce_scatter(rc_sbuf(c->sbuf), c->rbuf, c->n, c->rdt, c->rop, e->rc);
}
static rcoll_status_t run_alltoall(mpix_call_t *c, mpix_comm_t *e)
{
    return rcoll_alltoall(c->sbuf, c->rbuf, c->n, c->rdt, e->rc);
}
static rcoll_status_t run_gather(mpix_call_t *c, mpix_comm_t *e)
{
    return rcoll_gather(rc_sbuf(c->sbuf), e->rank == c->root ? c->rbuf : NULL, c->n, c->rdt,
                        c->root, e->rc);
}
static rcoll_status_t run_scatter(mpix_call_t *c, mpix_comm_t *e)
{
    void *rbuf = c->rbuf == MPI_IN_PLACE ? (void *)RCOLL_IN_PLACE : c->rbuf;
    return rcoll_scatter(e->rank == c->root ? c->sbuf : NULL, rbuf, c->n, c->rdt, c->root,
                         e->rc);
}
static rcoll_status_t run_barrier(mpix_call_t *c, mpix_comm_t *e)
{
    (void)c;
    return rcoll_barrier(e->rc);
}
static rcoll_status_t run_iallreduce(mpix_call_t *c, mpix_comm_t *e)
{
    rcoll_request_t r;
    rcoll_status_t st = rcoll_iallreduce(rc_sbuf(c->sbuf), c->rbuf, c->n, c->rdt, c->rop,
                                         e->rc, &r);
    return st == RCOLL_OK ? (rcoll_status_t)mpix_nb_start(c->comm, e, r, c->req) : st;
}
static rcoll_status_t run_ibcast(mpix_call_t *c, mpix_comm_t *e)
{
    rcoll_request_t r;
    rcoll_status_t st = rcoll_ibcast(c->rbuf, c->n, c->rdt, c->root, e->rc, &r);
    return st == RCOLL_OK ? (rcoll_status_t)mpix_nb_start(c->comm, e, r, c->req) : st;
}

/* The v-variants.  MPI's int counts and displacements (in elements of the MPI type) become
 * rcoll's size_t ones in bytes: every contiguous predefined type moves as bytes, so ranks
 * whose types differ but whose type signatures match (MPI_INT vs 4 x MPI_BYTE) still agree.
 * Negative displacements (legal in MPI: relative to the buffer) move the base pointer. */
static char *v_convert(const int *cnt, const int *dsp, int n, size_t esize, char *buf,
                       size_t *ocnt, size_t *odsp, int *bad)
{
    long long lo = 0;
    for (int i = 0; i < n; i++)
        if (dsp[i] < lo) lo = dsp[i];
    for (int i = 0; i < n; i++) {
        if (cnt[i] < 0) *bad = 1;
        ocnt[i] = cnt[i] < 0 ? 0 : (size_t)cnt[i] * esize;
        odsp[i] = (size_t)((long long)dsp[i] - lo) * esize;
    }
    return buf ? buf + lo * (long long)esize : buf;
}

static rcoll_status_t run_allgatherv(mpix_call_t *c, mpix_comm_t *e)
{
    size_t *cnt = e->v, *dsp = e->v + e->size;
    int bad = 0;
    char *base = v_convert(c->rcounts, c->rdispls, e->size, c->esize, c->rbuf, cnt, dsp, &bad);
    const void *sbuf = RCOLL_IN_PLACE;
    if (c->sbuf != MPI_IN_PLACE && !(c->scount == 0 && cnt[e->rank] == 0)) {
        if (c->sesize && c->scount >= 0 && (size_t)c->scount * c->sesize == cnt[e->rank]) {
            sbuf = c->sbuf; /* the common case: the block as it is */
        } else {
            /* a derived send type, or a type differing from the receive type: MPI converts
             * the block into its place in recvbuf, then rcoll moves it in place.  A mismatch
             * (MPI_ERR_TRUNCATE, ...) is this rank's error, raised after the collective. */
            MPI_Comm self = mpix_self_comm();
            int rc = self == MPI_COMM_NULL ? MPI_ERR_INTERN
                     : PMPI_Sendrecv(c->sbuf, c->scount, c->sdt, 0, 0, base + dsp[e->rank],
                                     c->rcounts[e->rank], c->dt, 0, 0, self,
                                     MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) c->local_err = rc;
        }
    }
    return rcoll_allgatherv(sbuf, cnt[e->rank], base, cnt, dsp, RCOLL_UINT8, e->rc);
}

static rcoll_status_t run_alltoallv(mpix_call_t *c, mpix_comm_t *e)
{
    size_t *sc = e->v, *sd = e->v + e->size, *rc = e->v + 2 * e->size;
    size_t *rd = e->v + 3 * e->size;
    int bad = 0;
    if (!c->counts || !c->displs || !c->rcounts || !c->rdispls) {
        /* erroneous here only: take part with nothing (the peers' sizes then disagree and
         * fail with rcoll's sentence instead of waiting), report it locally */
        memset(e->v, 0, 4 * (size_t)e->size * sizeof(size_t));
        c->local_err = MPI_ERR_ARG;
        return rcoll_alltoallv(c->sbuf, sc, sd, c->rbuf, rc, rd, RCOLL_UINT8, e->rc);
    }
    const char *sbase = v_convert(c->counts, c->displs, e->size, c->sesize,
                                  (char *)(uintptr_t)c->sbuf, sc, sd, &bad);
    char *rbase = v_convert(c->rcounts, c->rdispls, e->size, c->esize, c->rbuf, rc, rd, &bad);
    if (bad) c->local_err = MPI_ERR_COUNT; /* negative counts: taken as 0 */
    return rcoll_alltoallv(sbase, sc, sd, rbase, rc, rd, RCOLL_UINT8, e->rc);
}

/* ---- PMPI fall-throughs ---- */
static int pmpi_allreduce(const mpix_call_t *c)
{
    return PMPI_Allreduce(c->sbuf, c->rbuf, c->count, c->dt, c->op, c->comm);
}
static int pmpi_reduce(const mpix_call_t *c)
{
    return PMPI_Reduce(c->sbuf, c->rbuf, c->count, c->dt, c->op, c->root, c->comm);
}
static int pmpi_bcast(const mpix_call_t *c)
{
    return PMPI_Bcast(c->rbuf, c->count, c->dt, c->root, c->comm);
}
static int pmpi_allgather(const mpix_call_t *c)
{
    return PMPI_Allgather(c->sbuf, c->scount, c->sdt, c->rbuf, c->count, c->dt, c->comm);
}
static int pmpi_reduce_scatter_block(const mpix_call_t *c)
{
    return PMPI_Reduce_scatter_block(c->sbuf, c->rbuf, c->count, c->dt, c->op, c->comm);
}
static int pmpi_alltoall(const mpix_call_t *c)
{
    return PMPI_Alltoall(c->sbuf, c->scount, c->sdt, c->rbuf, c->count, c->dt, c->comm);
}
static int pmpi_barrier(const mpix_call_t *c)
{
    return PMPI_Barrier(c->comm);
}
static int pmpi_iallreduce(const mpix_call_t *c)
{
    return PMPI_Iallreduce(c->sbuf, c->rbuf, c->count, c->dt, c->op, c->comm, c->req);
}
static int pmpi_ibcast(const mpix_call_t *c)
{
    return PMPI_Ibcast(c->rbuf, c->count, c->dt, c->root, c->comm, c->req);
}
static int pmpi_gather(const mpix_call_t *c)
{
    return PMPI_Gather(c->sbuf, c->o_scount, c->o_sdt, c->rbuf, c->o_rcount, c->o_rdt, c->root,
                       c->comm);
}
static int pmpi_scatter(const mpix_call_t *c)
{
    return PMPI_Scatter(c->sbuf, c->o_scount, c->o_sdt, c->rbuf, c->o_rcount, c->o_rdt,
                        c->root, c->comm);
}
static int pmpi_allgatherv(const mpix_call_t *c)
{
    return PMPI_Allgatherv(c->sbuf, c->scount, c->sdt, c->rbuf, c->rcounts, c->rdispls,
                           c->dt, c->comm);
}
static int pmpi_alltoallv(const mpix_call_t *c)
{
    return PMPI_Alltoallv(c->sbuf, c->counts, c->displs, c->sdt, c->rbuf, c->rcounts,
                          c->rdispls, c->dt, c->comm);
}

/* Every wrapped function.  Giving a function an rcoll runner is its one entry here. */
static const mpix_func_desc_t funcs[MPIX_NUM_FUNCS] = {
    [MPIX_ALLREDUCE] = {"MPI_Allreduce", K_REDUCE, 0, 0, run_allreduce, pmpi_allreduce},
    [MPIX_REDUCE] = {"MPI_Reduce", K_REDUCE, 0, 1, run_reduce, pmpi_reduce},
    [MPIX_BCAST] = {"MPI_Bcast", K_MOVE, 0, 1, run_bcast, pmpi_bcast},
    [MPIX_ALLGATHER] = {"MPI_Allgather", K_MOVE, 1, 0, run_allgather, pmpi_allgather},
    [MPIX_REDUCE_SCATTER_BLOCK] = {"MPI_Reduce_scatter_block", K_REDUCE, 1, 0,
                                   run_reduce_scatter_block, pmpi_reduce_scatter_block},
    [MPIX_ALLTOALL] = {"MPI_Alltoall", K_MOVE, 1, 0, run_alltoall, pmpi_alltoall},
    [MPIX_BARRIER] = {"MPI_Barrier", K_SYNC, 0, 0, run_barrier, pmpi_barrier},
    [MPIX_IALLREDUCE] = {"MPI_Iallreduce", K_REDUCE, 0, 0, run_iallreduce, pmpi_iallreduce},
    [MPIX_IBCAST] = {"MPI_Ibcast", K_MOVE, 0, 1, run_ibcast, pmpi_ibcast},
    [MPIX_GATHER] = {"MPI_Gather", K_MOVE, 1, 1, run_gather, pmpi_gather},
    [MPIX_SCATTER] = {"MPI_Scatter", K_MOVE, 1, 1, run_scatter, pmpi_scatter},
    [MPIX_ALLGATHERV] = {"MPI_Allgatherv", K_VMOVE, 0, 0, run_allgatherv, pmpi_allgatherv},
    [MPIX_ALLTOALLV] = {"MPI_Alltoallv", K_VMOVE, 0, 0, run_alltoallv, pmpi_alltoallv},
};

/* ---- statistics (RCOLL_MPI_STATS) ---- */
typedef struct {
    uint64_t rc_calls, rc_bytes, ft_calls, ft_bytes;
} mpix_stat_t;
static mpix_stat_t stats[MPIX_NUM_FUNCS];

static void stat_add(mpix_func_t fn, int to_rcoll, size_t bytes)
{
    mpix_stat_t *s = &stats[fn];
    __atomic_add_fetch(to_rcoll ? &s->rc_calls : &s->ft_calls, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(to_rcoll ? &s->rc_bytes : &s->ft_bytes, bytes, __ATOMIC_RELAXED);
}

static void stats_print(void)
{
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int f = 0; f < MPIX_NUM_FUNCS; f++) {
        const mpix_stat_t *s = &stats[f];
        if (!s->rc_calls && !s->ft_calls) continue;
        fprintf(stderr, "rcoll_mpi stats: rank %d %-24s rcoll %" PRIu64 " calls %" PRIu64
                " bytes, mpi %" PRIu64 " calls %" PRIu64 " bytes\n", rank, funcs[f].name,
                s->rc_calls, s->rc_bytes, s->ft_calls, s->ft_bytes);
    }
    fflush(stderr);
}

/* ---- the decision ---- */

/* Can this call's arguments go to rcoll (before looking at the communicator)?  Sets the
 * rcoll type/op/count; *bytes is the per-rank data size in bytes (one block). */
static int eligible(const mpix_func_desc_t *d, mpix_call_t *c, size_t *bytes)
{
    size_t esize = 0;
    if (!d->run || c->count < 0) return 0;
    if (d->kind == K_VMOVE) {
        /* decided on what every rank gives alike: the receive type (allgatherv: its counts
         * too, below), alltoallv: both types and MPI_IN_PLACE (given on all ranks or none);
         * never on alltoallv's counts, which differ per rank */
        rcoll_datatype_t rdt;
        if (!mpix_map_type(c->dt, 0, &rdt, &c->esize)) return 0;
        /* (in place the send type is ignored: MPI allows any value there) */
        if (c->sbuf == MPI_IN_PLACE || !mpix_map_type(c->sdt, 0, &rdt, &c->sesize))
            c->sesize = 0;
        if (d->run == run_alltoallv) return c->sbuf != MPI_IN_PLACE && c->sesize > 0;
        return c->rcounts && c->rdispls;
    }
    if (d->kind == K_SYNC) {
        *bytes = 0;
        return 1;
    }
    if (!mpix_map_type(c->dt, d->kind == K_REDUCE, &c->rdt, &esize)) return 0;
    if (d->kind == K_REDUCE && !mpix_map_op(c->op, c->rdt, &c->rop)) return 0;
    if (d->blocks && d->kind == K_MOVE && c->sbuf != MPI_IN_PLACE &&
        (c->sdt != c->dt || c->scount != c->count))
        return 0; /* different send and receive type maps: MPI converts */
    c->n = (size_t)c->count * (esize / rcoll_datatype_size(c->rdt));
    *bytes = (size_t)c->count * esize;
    return 1;
}

int mpix_take(mpix_func_t fn, const mpix_comm_t *e, int ok, size_t bytes)
{
    /* alltoallv: its size differs per rank, so RCOLL_MPI_MIN_BYTES cannot apply */
    ok = ok && e && e->rc && (fn == MPIX_ALLTOALLV || bytes >= rcoll_mpi_config()->min_bytes);
    stat_add(fn, ok, bytes);
    return ok;
}

static int dispatch(mpix_func_t fn, mpix_call_t *c)
{
    const mpix_func_desc_t *d = &funcs[fn];
    mpix_comm_t *e = NULL;
    size_t bytes = 0;
    int ok = !rcoll_mpi_config()->disable && eligible(d, c, &bytes);
    if (ok) e = mpix_comm_get(c->comm);
    if (ok && e) {
        if (d->blocks) bytes *= (size_t)e->size;
        if (d->has_root && (c->root < 0 || c->root >= e->size)) ok = 0; /* MPI reports it */
        if (fn == MPIX_ALLTOALL && c->sbuf == MPI_IN_PLACE) ok = 0;      /* rcoll: not in place */
        if (c->n * (d->blocks ? (size_t)e->size : 1) > RCOLL_MAX_COUNT) ok = 0;
        if (fn == MPIX_ALLGATHERV) { /* recvcounts: the same on every rank */
            for (int i = 0; i < e->size; i++) {
                if (c->rcounts[i] < 0) ok = 0; /* MPI reports it */
                else bytes += (size_t)c->rcounts[i] * c->esize;
            }
            if (bytes > RCOLL_MAX_COUNT) ok = 0;
        } else if (fn == MPIX_ALLTOALLV && c->counts) { /* this rank's share: statistics only */
            for (int i = 0; i < e->size; i++)
                if (c->counts[i] > 0) bytes += (size_t)c->counts[i] * c->sesize;
        }
    }
    if (!ok && !bytes && c->count > 0 && d->kind != K_SYNC && rcoll_mpi_config()->stats) {
        int tsize = 0; /* only for the statistics of calls that fall through early */
        if (PMPI_Type_size(c->dt, &tsize) == MPI_SUCCESS && tsize > 0)
            bytes = (size_t)c->count * (size_t)tsize;
    }
    if (!mpix_take(fn, e, ok, bytes)) return d->pmpi(c);
    if (fn == MPIX_REDUCE && e->rank != c->root) c->rbuf = NULL; /* unused off the root */
    rcoll_status_t st = d->run(c, e);
    if (st == RCOLL_OK && c->local_err) { /* this rank's own arguments were wrong */
        PMPI_Comm_call_errhandler(c->comm, c->local_err);
        return c->local_err;
    }
    if (st == RCOLL_OK) return MPI_SUCCESS;
    if (st > 0) return (int)st; /* an MPI error code from mpix_nb_start */
    return mpix_raise(c->comm, e, st);
}

/* ---- the wrappers ---- */

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm)
{
    mpix_call_t c = {.sbuf = sendbuf, .rbuf = recvbuf, .count = count, .dt = datatype,
                     .op = op, .comm = comm};
    return dispatch(MPIX_ALLREDUCE, &c);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
               MPI_Op op, int root, MPI_Comm comm)
{
    mpix_call_t c = {.sbuf = sendbuf, .rbuf = recvbuf, .count = count, .dt = datatype,
                     .op = op, .root = root, .comm = comm};
    return dispatch(MPIX_REDUCE, &c);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    mpix_call_t c = {.rbuf = buffer, .count = count, .dt = datatype, .root = root,
                     .comm = comm};
    return dispatch(MPIX_BCAST, &c);
}

/* The block collectives with a send and a receive side (root unused where it has none). */
static int dispatch_blocks(mpix_func_t fn, const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    mpix_call_t c = {.sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf,
                     .count = recvcount, .dt = recvtype, .root = root, .comm = comm};
    return dispatch(fn, &c);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    return dispatch_blocks(MPIX_ALLGATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                           recvtype, 0, comm);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    mpix_call_t c = {.sbuf = sendbuf, .rbuf = recvbuf, .count = recvcount, .dt = datatype,
                     .op = op, .comm = comm};
    return dispatch(MPIX_REDUCE_SCATTER_BLOCK, &c);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    return dispatch_blocks(MPIX_ALLTOALL, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                           recvtype, 0, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    mpix_call_t c = {.comm = comm};
    return dispatch(MPIX_BARRIER, &c);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    mpix_call_t c = {.sbuf = sendbuf, .rbuf = recvbuf, .count = count, .dt = datatype,
                     .op = op, .comm = comm, .req = request};
    return dispatch(MPIX_IALLREDUCE, &c);
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request)
{
    mpix_call_t c = {.rbuf = buffer, .count = count, .dt = datatype, .root = root,
                     .comm = comm, .req = request};
    return dispatch(MPIX_IBCAST, &c);
}

/* Gather and scatter: the receive side (gather) / send side (scatter) is significant at the
 * root only, so every rank decides from the side all ranks give (a root in place from the
 * other one, which MPI requires to describe the same data).  The decision stays the same on
 * every rank; the caller's own arguments go to the fall-through. */
static int dispatch_rooted(mpix_func_t fn, const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    mpix_call_t c = {.sbuf = sendbuf, .rbuf = recvbuf, .root = root, .comm = comm,
                     .o_scount = sendcount, .o_sdt = sendtype, .o_rcount = recvcount,
                     .o_rdt = recvtype};
    int by_send = fn == MPIX_GATHER ? sendbuf != MPI_IN_PLACE : recvbuf == MPI_IN_PLACE;
    c.count = c.scount = by_send ? sendcount : recvcount;
    c.dt = c.sdt = by_send ? sendtype : recvtype;
    return dispatch(fn, &c);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return dispatch_rooted(MPIX_GATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                           recvtype, root, comm);
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return dispatch_rooted(MPIX_SCATTER, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                           recvtype, root, comm);
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm)
{
    mpix_call_t c = {.sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf,
                     .rcounts = recvcounts, .rdispls = displs, .dt = recvtype, .comm = comm};
    return dispatch(MPIX_ALLGATHERV, &c);
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    mpix_call_t c = {.sbuf = sendbuf, .counts = sendcounts, .displs = sdispls,
                     .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts,
                     .rdispls = rdispls, .dt = recvtype, .comm = comm};
    return dispatch(MPIX_ALLTOALLV, &c);
}

int MPI_Finalize(void)
{
    if (rcoll_mpi_config()->stats) stats_print();
    mpix_comm_fini();
    return PMPI_Finalize();
}
