/*
 * test_mpi_coll.c - an ordinary MPI program (it knows nothing of rcoll) that checks the
 * interposed collectives: every mapped datatype x op x count (0, 1, odd, past 1 MiB), in place
 * and not (MPI_Allgatherv/MPI_Alltoallv with per-rank block sizes, compared with PMPI_), on
 * MPI_COMM_WORLD, split and dup'd communicators, a communicator freed while the
 * parent stays in use, calls that must fall through (short, derived types, user ops, MAXLOC)
 * mixed with interposed ones, and MPI_Iallreduce/MPI_Ibcast completed by every MPI completion
 * call.  Each result is compared with the same operation done through PMPI_ (Open MPI's own
 * collectives) or with locally computed values; floats with a tolerance, integers exactly.
 * Run it linked ahead of librcoll_mpi or under LD_PRELOAD; run_mpi.sh checks from
 * RCOLL_MPI_STATS that the calls did reach rcoll.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mpi_check.h"

typedef enum { V_I8, V_U8, V_I16, V_I32, V_U32, V_I64, V_U64, V_F32, V_F64 } vkind_t;

typedef struct {
    MPI_Datatype dt;
    const char *name;
    vkind_t kind;
    int reduce; /* arithmetic: the interposer reduces it on rcoll */
} dtype_t;

static dtype_t types[32];
static int ntypes;
static int wrank, wsize;

static void types_init(void)
{
#define T(d, k, r) types[ntypes++] = (dtype_t){d, #d, k, r}
    T(MPI_FLOAT, V_F32, 1);           T(MPI_DOUBLE, V_F64, 1);
    T(MPI_INT, V_I32, 1);             T(MPI_UNSIGNED, V_U32, 1);
    T(MPI_LONG, sizeof(long) == 8 ? V_I64 : V_I32, 1);
    T(MPI_UNSIGNED_LONG, sizeof(long) == 8 ? V_U64 : V_U32, 1);
    T(MPI_LONG_LONG, V_I64, 1);       T(MPI_UNSIGNED_LONG_LONG, V_U64, 1);
    T(MPI_SIGNED_CHAR, V_I8, 1);      T(MPI_UNSIGNED_CHAR, V_U8, 1);
    T(MPI_INT8_T, V_I8, 1);           T(MPI_UINT8_T, V_U8, 1);
    T(MPI_INT32_T, V_I32, 1);         T(MPI_UINT32_T, V_U32, 1);
    T(MPI_INT64_T, V_I64, 1);         T(MPI_UINT64_T, V_U64, 1);
    /* data movement only on rcoll; reductions on them fall through */
    T(MPI_BYTE, V_U8, 0);             T(MPI_CHAR, V_I8, 0);
    T(MPI_SHORT, V_I16, 0);
#undef T
}

static size_t vsize(vkind_t k)
{
    static const size_t s[] = {1, 1, 2, 4, 4, 8, 8, 4, 8};
    return s[k];
}

static void vset(void *b, size_t i, vkind_t k, long v)
{
    switch (k) {
    case V_I8: ((int8_t *)b)[i] = (int8_t)v; break;
    case V_U8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case V_I16: ((int16_t *)b)[i] = (int16_t)v; break;
    case V_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    case V_U32: ((uint32_t *)b)[i] = (uint32_t)v; break;
    case V_I64: ((int64_t *)b)[i] = (int64_t)v; break;
    case V_U64: ((uint64_t *)b)[i] = (uint64_t)v; break;
    case V_F32: ((float *)b)[i] = (float)v * 0.25f; break;
    case V_F64: ((double *)b)[i] = (double)v * 0.25; break;
    }
}

/* Inputs: small values so that integer PROD stays in range of every type and float sums are
 * exact; unsigned types get non-negative values. */
static void fill(void *b, size_t n, vkind_t k, MPI_Op op, int rank, int seed)
{
    int is_unsigned = k == V_U8 || k == V_U32 || k == V_U64;
    for (size_t i = 0; i < n; i++) {
        long v;
        if (op == MPI_PROD)
            v = ((i + (size_t)rank + (size_t)seed) % 5 == 0) ? 2 : 1;
        else
            v = (long)((i * 7 + (size_t)rank * 13 + (size_t)seed) % 23) - (is_unsigned ? 0 : 11);
        vset(b, i, k, v);
    }
}

/* 0 when equal (floats within 1e-5 relative), else the first differing index + 1. */
static size_t vcmp(const void *a, const void *b, size_t n, vkind_t k)
{
    for (size_t i = 0; i < n; i++) {
        if (k == V_F32 || k == V_F64) {
            double x = k == V_F32 ? ((const float *)a)[i] : ((const double *)a)[i];
            double y = k == V_F32 ? ((const float *)b)[i] : ((const double *)b)[i];
            if (fabs(x - y) > 1e-5 * (1.0 + fabs(y))) return i + 1;
        } else if (memcmp((const char *)a + i * vsize(k), (const char *)b + i * vsize(k),
                          vsize(k))) {
            return i + 1;
        }
    }
    return 0;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) FAILF("out of memory (%zu bytes)", n);
    return p;
}

static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
static const char *const op_names[] = {"sum", "prod", "min", "max"};

static void check(const char *what, const dtype_t *t, const char *op, int count, int inplace,
                  const void *got, const void *want, size_t n)
{
    size_t bad = vcmp(got, want, n, t->kind);
    if (bad)
        FAILF("%s %s %s count=%d %s: element %zu differs from the reference", what, t->name,
              op, count, inplace ? "in place" : "out of place", bad - 1);
}

/* Allreduce, reduce (every root), reduce_scatter_block for one type/op/count. */
static void reductions(MPI_Comm comm, const dtype_t *t, int oi, int count, int inplace)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Op op = ops[oi];
    size_t es = vsize(t->kind), n = (size_t)count;
    size_t nb = n * (size_t)size; /* reduce_scatter_block input */
    char *in = xmalloc(nb * es), *out = xmalloc(nb * es), *ref = xmalloc(nb * es);
    fill(in, nb, t->kind, op, rank, count);

    /* allreduce */
    memcpy(out, in, n * es);
    MPICHECK(MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, count, t->dt, op, comm));
    MPICHECK(PMPI_Allreduce(in, ref, count, t->dt, op, comm));
    check("MPI_Allreduce", t, op_names[oi], count, inplace, out, ref, n);

    /* reduce: root rotates with the count so every rank is root somewhere */
    int root = count % size;
    memcpy(out, in, n * es);
    if (inplace && rank == root)
        MPICHECK(MPI_Reduce(MPI_IN_PLACE, out, count, t->dt, op, root, comm));
    else
        MPICHECK(MPI_Reduce(in, rank == root ? out : NULL, count, t->dt, op, root, comm));
    MPICHECK(PMPI_Reduce(in, ref, count, t->dt, op, root, comm));
    if (rank == root) check("MPI_Reduce", t, op_names[oi], count, inplace, out, ref, n);

    /* reduce_scatter_block: count per rank */
    memcpy(out, in, nb * es);
    MPICHECK(MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : in, out, count, t->dt, op,
                                      comm));
    MPICHECK(PMPI_Reduce_scatter_block(in, ref, count, t->dt, op, comm));
    check("MPI_Reduce_scatter_block", t, op_names[oi], count, inplace, out, ref, n);
    free(in);
    free(out);
    free(ref);
}

/* Bcast (every root), allgather, alltoall for one type/count: expected values are local. */
static void movements(MPI_Comm comm, const dtype_t *t, int count, int inplace)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t es = vsize(t->kind), n = (size_t)count, nb = n * (size_t)size;
    char *buf = xmalloc(nb * es), *want = xmalloc(nb * es), *in = xmalloc(nb * es);

    for (int root = 0; root < size; root++) {
        fill(buf, n, t->kind, MPI_SUM, rank, root);
        fill(want, n, t->kind, MPI_SUM, root, root);
        MPICHECK(MPI_Bcast(buf, count, t->dt, root, comm));
        check("MPI_Bcast", t, "-", count, 0, buf, want, n);
    }

    for (int r = 0; r < size; r++) fill(want + (size_t)r * n * es, n, t->kind, MPI_SUM, r, 1);
    memset(buf, 0x5a, nb * es);
    fill(in, n, t->kind, MPI_SUM, rank, 1);
    if (inplace) {
        memcpy(buf + (size_t)rank * n * es, in, n * es);
        MPICHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, t->dt, comm));
    } else {
        MPICHECK(MPI_Allgather(in, count, t->dt, buf, count, t->dt, comm));
    }
    check("MPI_Allgather", t, "-", count, inplace, buf, want, nb);

    /* alltoall: block j of rank r's input is fill(seed = 100 * r + j) */
    for (int j = 0; j < size; j++)
        fill(in + (size_t)j * n * es, n, t->kind, MPI_SUM, 0, 100 * rank + j);
    for (int r = 0; r < size; r++)
        fill(want + (size_t)r * n * es, n, t->kind, MPI_SUM, 0, 100 * r + rank);
    MPICHECK(MPI_Alltoall(in, count, t->dt, buf, count, t->dt, comm));
    check("MPI_Alltoall", t, "-", count, 0, buf, want, nb);

    /* gather and scatter at the last rank (in place there when asked); the other ranks pass
     * a receive count of 0 and MPI_DATATYPE_NULL to gather, as MPI allows off the root */
    int root = size - 1;
    for (int r = 0; r < size; r++) fill(want + (size_t)r * n * es, n, t->kind, MPI_SUM, r, 7);
    memset(buf, 0x5a, nb * es);
    fill(in, n, t->kind, MPI_SUM, rank, 7);
    if (rank == root) {
        if (inplace) {
            memcpy(buf + (size_t)rank * n * es, in, n * es);
            MPICHECK(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, t->dt, root,
                                comm));
        } else {
            MPICHECK(MPI_Gather(in, count, t->dt, buf, count, t->dt, root, comm));
        }
        check("MPI_Gather", t, "-", count, inplace, buf, want, nb);
    } else {
        MPICHECK(MPI_Gather(in, count, t->dt, NULL, 0, MPI_DATATYPE_NULL, root, comm));
    }
    /* scatter back: rank r gets block r of the gathered buffer (want) */
    memset(in, 0x5a, n * es);
    if (rank == root && inplace) {
        MPICHECK(MPI_Scatter(want, count, t->dt, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root,
                             comm));
    } else {
        MPICHECK(MPI_Scatter(rank == root ? want : NULL, rank == root ? count : 0,
                             rank == root ? t->dt : MPI_DATATYPE_NULL, in, count, t->dt, root,
                             comm));
        check("MPI_Scatter", t, "-", count, 0, in, want + (size_t)rank * n * es, n);
    }
    free(buf);
    free(want);
    free(in);
}

/* Block sizes of the v-variants: from 0 to count, different per rank (and per pair). */
static int vcount(int count, int a, int b)
{
    return count ? count * ((a + 2 * b) % 3) / 2 + (a + b) % 2 : 0;
}

/* Allgatherv (blocks in reverse rank order with one-element gaps) and alltoallv (the same
 * layout on both sides), in place where MPI allows it; each compared, gaps included, with
 * the same call through PMPI_. */
static void vmovements(MPI_Comm comm, const dtype_t *t, int count, int inplace)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t es = vsize(t->kind);
    int *rc = xmalloc(sizeof(int) * (size_t)size), *rd = xmalloc(sizeof(int) * (size_t)size);
    int *sc = xmalloc(sizeof(int) * (size_t)size), *sd = xmalloc(sizeof(int) * (size_t)size);
    int total = 0;
    for (int r = size - 1; r >= 0; r--) {
        rc[r] = vcount(count, r, 0);
        rd[r] = total;
        total += rc[r] + 1;
    }
    size_t nb = (size_t)total * es;
    char *in = xmalloc(nb), *buf = xmalloc(nb), *ref = xmalloc(nb);
    fill(in, (size_t)rc[rank], t->kind, MPI_SUM, rank, 3);
    memset(buf, 0x5a, nb);
    memset(ref, 0x5a, nb);
    if (inplace) {
        memcpy(buf + (size_t)rd[rank] * es, in, (size_t)rc[rank] * es);
        MPICHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, rc, rd, t->dt, comm));
    } else {
        MPICHECK(MPI_Allgatherv(in, rc[rank], t->dt, buf, rc, rd, t->dt, comm));
    }
    MPICHECK(PMPI_Allgatherv(in, rc[rank], t->dt, ref, rc, rd, t->dt, comm));
    check("MPI_Allgatherv", t, "-", count, inplace, buf, ref, (size_t)total);
    free(in);
    free(buf);
    free(ref);

    /* alltoallv: rank a sends vcount(count, a, b) elements to rank b */
    int stot = 0, rtot = 0;
    for (int j = size - 1; j >= 0; j--) {
        sc[j] = vcount(count, rank, j);
        sd[j] = stot;
        stot += sc[j] + 1;
        rc[j] = vcount(count, j, rank);
        rd[j] = rtot;
        rtot += rc[j] + 1;
    }
    in = xmalloc((size_t)stot * es);
    buf = xmalloc((size_t)rtot * es);
    ref = xmalloc((size_t)rtot * es);
    fill(in, (size_t)stot, t->kind, MPI_SUM, rank, 5);
    memset(buf, 0x5a, (size_t)rtot * es);
    memset(ref, 0x5a, (size_t)rtot * es);
    MPICHECK(MPI_Alltoallv(in, sc, sd, t->dt, buf, rc, rd, t->dt, comm));
    MPICHECK(PMPI_Alltoallv(in, sc, sd, t->dt, ref, rc, rd, t->dt, comm));
    check("MPI_Alltoallv", t, "-", count, 0, buf, ref, (size_t)rtot);
    free(in);
    free(buf);
    free(ref);
    free(rc);
    free(rd);
    free(sc);
    free(sd);
}

/* The largest count's size in bytes (TEST_MPI_BIG_BYTES; run_mpi.sh lowers it in sanitizer
 * builds, where it stays several chunks of RCOLL_BUFFSIZE / 4). */
static size_t big_bytes(void)
{
    const char *s = getenv("TEST_MPI_BIG_BYTES");
    return s && *s ? (size_t)strtoull(s, NULL, 10) : ((size_t)1 << 20) + 3;
}

static void matrix(MPI_Comm comm, int full)
{
    int counts[4] = {0, 1, 7, 0};
    for (int ti = 0; ti < ntypes; ti++) {
        const dtype_t *t = &types[ti];
        counts[3] = (int)(big_bytes() / vsize(t->kind)) | 1; /* odd, past several chunks */
        int nc = full ? 4 : 3;
        for (int ci = 0; ci < nc; ci++)
            for (int inplace = 0; inplace < 2; inplace++) {
                /* MPI defines no arithmetic on MPI_BYTE and MPI_CHAR */
                if (t->dt != MPI_BYTE && t->dt != MPI_CHAR)
                    for (int oi = 0; oi < 4; oi++)
                        reductions(comm, t, oi, counts[ci], inplace);
                movements(comm, t, counts[ci], inplace);
                vmovements(comm, t, counts[ci], inplace);
            }
    }
    MPICHECK(MPI_Barrier(comm));
}

/* Split and dup'd communicators; a child freed while the parent and a sibling go on. */
static void communicators(void)
{
    MPI_Comm half, dup, third;
    MPICHECK(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &half)); /* reversed */
    MPICHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPICHECK(MPI_Comm_split(MPI_COMM_WORLD, wrank % 3 == 0 ? 0 : 1, wrank, &third));
    matrix(half, 0);
    matrix(dup, 0);
    /* each rank's rank in `half` is reversed: check the allgather order against MPI's view */
    int hr, hs;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    int *all = xmalloc(sizeof(int) * (size_t)hs), *ref = xmalloc(sizeof(int) * (size_t)hs);
    MPICHECK(MPI_Allgather(&wrank, 1, MPI_INT, all, 1, MPI_INT, half));
    MPICHECK(PMPI_Allgather(&wrank, 1, MPI_INT, ref, 1, MPI_INT, half));
    if (memcmp(all, ref, sizeof(int) * (size_t)hs)) FAILF("allgather on a split: rank order");
    free(all);
    free(ref);

    /* free the odd half's child while everyone keeps using the parents */
    if (wrank % 2) MPICHECK(MPI_Comm_free(&half));
    double x = wrank, sum = 0;
    MPICHECK(MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, dup));
    if (sum != (double)wsize * (wsize - 1) / 2) FAILF("allreduce on dup after a child's free");
    if (wrank % 2 == 0) {
        MPICHECK(MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, half));
        MPICHECK(MPI_Comm_free(&half));
    }
    matrix(third, 0);
    MPICHECK(MPI_Comm_free(&third));
    MPICHECK(MPI_Comm_free(&dup));
    matrix(MPI_COMM_WORLD, 0);
    /* MPI_COMM_SELF: a one-rank rcoll communicator */
    matrix(MPI_COMM_SELF, 0);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* Calls that must fall through, between interposed ones on the same communicator. */
static void mixed(void)
{
    MPI_Op uop;
    MPI_Datatype pair;
    int v[4], r[4];
    MPICHECK(MPI_Op_create(user_sum, 1, &uop));
    MPICHECK(MPI_Type_contiguous(2, MPI_INT, &pair));
    MPICHECK(MPI_Type_commit(&pair));
    for (int it = 0; it < 5; it++) {
        int x = wrank + it, s = 0;
        MPICHECK(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD)); /* rcoll */
        if (s != wsize * (wsize - 1) / 2 + wsize * it) FAILF("mixed: int sum");
        MPICHECK(MPI_Allreduce(&x, &s, 1, MPI_INT, uop, MPI_COMM_WORLD));     /* user op */
        if (s != wsize * (wsize - 1) / 2 + wsize * it) FAILF("mixed: user op");
        MPICHECK(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD)); /* rcoll: bor */
        {
            int o = 0;
            for (int k = 0; k < wsize; k++) o |= k + it;
            if (s != o) FAILF("mixed: int bor %d, want %d", s, o);
        }
        _Bool bl = wrank == 0, land = 0, lor = 0;
        MPICHECK(MPI_Allreduce(&bl, &land, 1, MPI_C_BOOL, MPI_LAND, MPI_COMM_WORLD)); /* rcoll */
        MPICHECK(MPI_Allreduce(&bl, &lor, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD));
        if (land != (wsize == 1) || lor != 1) FAILF("mixed: bool land %d lor %d", land, lor);
        MPICHECK(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD)); /* logical on int */
        if (s != (wsize == 1 ? x : it > 0)) FAILF("mixed: int land %d", s); /* 1 rank: a copy */
        v[0] = v[1] = x;
        MPICHECK(MPI_Allreduce(v, r, 1, pair, uop, MPI_COMM_WORLD));          /* derived */
        if (r[0] != wsize * (wsize - 1) / 2 + wsize * it) FAILF("mixed: derived type");
        short sh = (short)x, shs = 0;
        MPICHECK(MPI_Allreduce(&sh, &shs, 1, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD)); /* int16 */
        if (shs != wsize * (wsize - 1) / 2 + wsize * it) FAILF("mixed: short sum");
        struct { double v; int i; } in = {(double)(wrank * 3 % wsize), wrank}, out;
        MPICHECK(MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
        double mx = 0;
        MPICHECK(MPI_Allreduce(&in.v, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD)); /* rcoll */
        if (out.v != mx) FAILF("mixed: maxloc %g vs max %g", out.v, mx);
        MPICHECK(MPI_Bcast(v, 1, pair, 0, MPI_COMM_WORLD));                    /* derived */
        MPICHECK(MPI_Bcast(&in, 1, MPI_DOUBLE_INT, 0, MPI_COMM_WORLD)); /* hole: falls through */
        if (in.i != 0) FAILF("mixed: bcast of MPI_DOUBLE_INT");
        int g[64];
        MPICHECK(MPI_Gather(&x, 1, MPI_INT, g, 1, MPI_INT, 0, MPI_COMM_WORLD)); /* rcoll */
        if (wrank == 0)
            for (int k = 0; k < wsize; k++)
                if (g[k] != k + it) FAILF("mixed: gather");
        struct { double v; int i; } gi = {1.5 * wrank, wrank}, gall[64];
        MPICHECK(MPI_Gather(&gi, 1, MPI_DOUBLE_INT, gall, 1, MPI_DOUBLE_INT, 0, MPI_COMM_WORLD));
        if (wrank == 0) /* a type with a hole: falls through */
            for (int k = 0; k < wsize; k++)
                if (gall[k].i != k || gall[k].v != 1.5 * k) FAILF("mixed: gather double_int");
        /* allgatherv: 2 ints per rank, sent as one `pair` (a derived type: MPI converts the
         * block locally, rcoll moves it), as 8 MPI_BYTE on rank 0 (another signature-equal
         * type) and received as MPI_INT; then received as `pair` (derived: falls through) */
        int two[2] = {wrank, -wrank - it}, ag[128], rcv[64], dsp[64];
        for (int k = 0; k < wsize; k++) {
            rcv[k] = 2;
            dsp[k] = 2 * (wsize - 1 - k);
        }
        if (wrank == 0)
            MPICHECK(MPI_Allgatherv(two, 8, MPI_BYTE, ag, rcv, dsp, MPI_INT, MPI_COMM_WORLD));
        else
            MPICHECK(MPI_Allgatherv(two, 1, pair, ag, rcv, dsp, MPI_INT, MPI_COMM_WORLD));
        for (int k = 0; k < wsize; k++)
            if (ag[dsp[k]] != k || ag[dsp[k] + 1] != -k - it) FAILF("mixed: allgatherv pair");
        /* negative displacements (relative to a recvbuf at the end of the array) */
        for (int k = 0; k < wsize; k++) dsp[k] = -2 * (k + 1);
        memset(ag, 0, sizeof(ag));
        MPICHECK(MPI_Allgatherv(two, 2, MPI_INT, ag + 2 * wsize, rcv, dsp, MPI_INT,
                                MPI_COMM_WORLD));
        for (int k = 0; k < wsize; k++)
            if (ag[2 * wsize - 2 * (k + 1)] != k || ag[2 * wsize - 2 * (k + 1) + 1] != -k - it)
                FAILF("mixed: allgatherv with negative displacements");
        for (int k = 0; k < wsize; k++) {
            rcv[k] = 1;
            dsp[k] = wsize - 1 - k;
        }
        MPICHECK(MPI_Allgatherv(two, 1, pair, ag, rcv, dsp, pair, MPI_COMM_WORLD));
        for (int k = 0; k < wsize; k++)
            if (ag[2 * dsp[k]] != k || ag[2 * dsp[k] + 1] != -k - it)
                FAILF("mixed: allgatherv of a derived type");
        /* alltoallv: one int to each rank, as 4 MPI_BYTE on rank 0 (rcoll: bytes agree);
         * then with `pair` (derived: falls through) */
        int a2a[64], got[128], one[64], zero[64];
        for (int k = 0; k < wsize; k++) {
            a2a[k] = 100 * wrank + k;
            one[k] = 1;
            zero[k] = k;
        }
        if (wrank == 0) {
            int four[64], four_d[64];
            for (int k = 0; k < wsize; k++) {
                four[k] = 4;
                four_d[k] = 4 * k;
            }
            MPICHECK(MPI_Alltoallv(a2a, four, four_d, MPI_BYTE, got, one, zero, MPI_INT,
                                   MPI_COMM_WORLD));
        } else {
            MPICHECK(MPI_Alltoallv(a2a, one, zero, MPI_INT, got, one, zero, MPI_INT,
                                   MPI_COMM_WORLD));
        }
        for (int k = 0; k < wsize; k++)
            if (got[k] != 100 * k + wrank) FAILF("mixed: alltoallv bytes/int");
        int p2[128];
        for (int k = 0; k < 2 * wsize; k++) p2[k] = 1000 * wrank + k;
        MPICHECK(MPI_Alltoallv(p2, one, zero, pair, got, one, zero, pair, MPI_COMM_WORLD));
        for (int k = 0; k < wsize; k++)
            if (got[2 * k] != 1000 * k + 2 * wrank) FAILF("mixed: alltoallv of a derived type");
        MPICHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
    MPICHECK(MPI_Type_free(&pair));
    MPICHECK(MPI_Op_free(&uop));
}

/* Nonblocking: several in flight, completed by each MPI completion call, with an ordinary
 * point-to-point request in the same arrays. */
static void nonblocking(MPI_Comm comm)
{
    enum { N = 4, CNT = 70001 };
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    float *a[N], *ref[N];
    for (int i = 0; i < N; i++) {
        a[i] = xmalloc(sizeof(float) * CNT);
        ref[i] = xmalloc(sizeof(float) * CNT);
    }
    for (int how = 0; how < 7; how++) {
        MPI_Request req[N + 1];
        int peer_in = -1, peer_out = rank;
        for (int i = 0; i < N; i++) {
            fill(a[i], CNT, V_F32, MPI_SUM, rank, how * N + i);
            if (i % 2 == 0) {
                PMPI_Allreduce(a[i], ref[i], CNT, MPI_FLOAT, MPI_SUM, comm);
                MPICHECK(MPI_Iallreduce(MPI_IN_PLACE, a[i], CNT, MPI_FLOAT, MPI_SUM, comm,
                                        &req[i]));
            } else {
                int root = (how + i) % size;
                fill(ref[i], CNT, V_F32, MPI_SUM, root, how * N + i);
                MPICHECK(MPI_Ibcast(a[i], CNT, MPI_FLOAT, root, comm, &req[i]));
            }
        }
        /* one MPI-native request among them: a message to oneself */
        MPICHECK(PMPI_Irecv(&peer_in, 1, MPI_INT, rank, 7, comm, &req[N]));
        MPICHECK(PMPI_Send(&peer_out, 1, MPI_INT, rank, 7, comm));
        int left = N + 1, flag = 0, idx, outc, idxs[N + 1];
        MPI_Status st[N + 1];
        switch (how) {
        case 0:
            for (int i = N; i >= 0; i--) MPICHECK(MPI_Wait(&req[i], MPI_STATUS_IGNORE));
            break;
        case 1:
            for (int i = 0; i <= N; i++)
                do MPICHECK(MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE)); while (!flag);
            break;
        case 2: MPICHECK(MPI_Waitall(N + 1, req, st)); break;
        case 3:
            do MPICHECK(MPI_Testall(N + 1, req, &flag, st)); while (!flag);
            break;
        case 4:
            while (left--) MPICHECK(MPI_Waitany(N + 1, req, &idx, MPI_STATUS_IGNORE));
            break;
        case 5:
            while (left) {
                MPICHECK(MPI_Testany(N + 1, req, &idx, &flag, MPI_STATUS_IGNORE));
                if (flag && idx != MPI_UNDEFINED) left--;
            }
            break;
        case 6:
            while (left > 0) {
                MPICHECK(MPI_Waitsome(N + 1, req, &outc, idxs, st));
                if (outc == MPI_UNDEFINED) FAILF("waitsome: requests lost");
                left -= outc;
            }
            break;
        }
        for (int i = 0; i <= N; i++)
            if (req[i] != MPI_REQUEST_NULL) FAILF("completion %d left request %d active", how, i);
        if (peer_in != rank) FAILF("completion %d: the point-to-point message", how);
        for (int i = 0; i < N; i++)
            if (vcmp(a[i], ref[i], CNT, V_F32))
                FAILF("completion %d: %s %d wrong", how, i % 2 ? "ibcast" : "iallreduce", i);
    }
    for (int i = 0; i < N; i++) {
        free(a[i]);
        free(ref[i]);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    types_init();
    const char *what = argc > 1 ? argv[1] : "all";
    int all = !strcmp(what, "all");
    if (all || !strcmp(what, "matrix")) matrix(MPI_COMM_WORLD, 1);
    if (all || !strcmp(what, "comms")) communicators();
    if (all || !strcmp(what, "mixed")) mixed();
    if (all || !strcmp(what, "nb")) {
        MPI_Comm dup;
        nonblocking(MPI_COMM_WORLD);
        MPICHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        nonblocking(dup);
        MPICHECK(MPI_Comm_free(&dup));
    }
    if (wrank == 0) printf("test_mpi_coll %s: %d ranks OK\n", what, wsize);
    MPI_Finalize();
    return 0;
}
