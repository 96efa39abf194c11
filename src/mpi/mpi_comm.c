/*
 * mpi_comm.c - the map from MPI communicators to rcoll communicators used by the interposer:
 * an MPI attribute (one keyval) on each communicator, created on the first interposed call on
 * it, deleted (and the rcoll communicator destroyed) by MPI_Comm_free and by MPI_Finalize.
 * Also the datatype/op tables and the MPI error codes that carry rcoll's sentences.
 * It must not decide whether a call goes to rcoll (mpi_interpose.c does).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_int.h"
#include "util/log.h"

static int keyval = MPI_KEYVAL_INVALID;
static int disabled;          /* MPI_THREAD_MULTIPLE: the interposer stays out */
static mpix_comm_t *world;    /* MPI_COMM_WORLD's entry: no attribute lookup on it */
static mpix_comm_t *entries;  /* every live entry, newest first */
static MPI_Comm self_comm = MPI_COMM_NULL;

static void entry_unlink(mpix_comm_t *e)
{
    if (e->prev) e->prev->next = e->next;
    else if (entries == e) entries = e->next;
    if (e->next) e->next->prev = e->prev;
    e->next = e->prev = NULL;
}

static void entry_release(mpix_comm_t *e)
{
    if (!e->rc) return;
    mpix_nb_drain(e);
    rcoll_status_t st = rcoll_comm_destroy(e->rc);
    if (st != RCOLL_OK)
        RCOLL_INFO(INIT, "librcoll_mpi: destroying the rcoll communicator of an MPI "
                   "communicator: %s", rcoll_status_string(st));
    e->rc = NULL;
}

/* The keyval's delete callback: MPI_Comm_free, MPI_Comm_delete_attr, MPI_Finalize. */
static int comm_delete_fn(MPI_Comm comm, int kv, void *attr, void *extra)
{
    mpix_comm_t *e = attr;
    (void)comm;
    (void)kv;
    (void)extra;
    entry_release(e);
    entry_unlink(e);
    if (world == e) world = NULL;
    free(e);
    return MPI_SUCCESS;
}

static int keyval_ready(void)
{
    int inited = 0, finalized = 0, level = MPI_THREAD_SINGLE;
    if (keyval != MPI_KEYVAL_INVALID) return 1;
    if (disabled) return 0;
    PMPI_Initialized(&inited);
    PMPI_Finalized(&finalized);
    if (!inited || finalized) return 0;
    PMPI_Query_thread(&level);
    if (level == MPI_THREAD_MULTIPLE) {
        /* creation inside a call is collective: two threads creating on different
         * communicators in different orders on two ranks would deadlock */
        RCOLL_INFO(INIT, "librcoll_mpi: MPI_THREAD_MULTIPLE: every call goes to MPI");
        disabled = 1;
        return 0;
    }
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_fn, &keyval, NULL) !=
        MPI_SUCCESS) {
        disabled = 1;
        return 0;
    }
    return 1;
}

mpix_comm_t *mpix_comm_get(MPI_Comm comm)
{
    void *val = NULL;
    int flag = 0, inter = 0;
    if (comm == MPI_COMM_WORLD && world) return world;
    if (comm == MPI_COMM_NULL || !keyval_ready()) return NULL;
    if (PMPI_Comm_get_attr(comm, keyval, &val, &flag) != MPI_SUCCESS) return NULL;
    if (flag) return val;

    int rank = 0, size = 0;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    mpix_comm_t *e = calloc(1, sizeof(*e) + 4 * (size_t)size * sizeof(size_t));
    if (!e) return NULL; /* the same on every rank?  No: but MPI itself fails next */
    e->mpi_comm = comm;
    e->rank = rank;
    e->size = size;
    e->v = (size_t *)(e + 1);
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter) {
        rcoll_status_t st = rcoll_mpi_comm_create(comm, &e->rc);
        if (st != RCOLL_OK) {
            e->rc = NULL;
            RCOLL_WARN(INIT, "librcoll_mpi: no rcoll communicator for an MPI communicator of "
                       "%d ranks (%s: %s); its collectives go to MPI from now on", e->size,
                       rcoll_status_string(st), rcoll_mpi_last_error());
        }
    }
    if (PMPI_Comm_set_attr(comm, keyval, e) != MPI_SUCCESS) {
        entry_release(e);
        free(e);
        return NULL;
    }
    e->next = entries;
    if (entries) entries->prev = e;
    entries = e;
    if (comm == MPI_COMM_WORLD) world = e;
    return e;
}

void mpix_comm_fini(void)
{
    if (keyval == MPI_KEYVAL_INVALID) return;
    /* Only the rank hosting a communicator's bootstrap root (rank 0: it made the id) waits in
     * rcoll_comm_destroy for the others; destroying every other communicator first means no
     * rank waits while holding back a goodbye that another rank's root waits for. */
    for (int root_pass = 0; root_pass < 2; root_pass++)
        for (mpix_comm_t *e = entries; e; e = e->next)
            if ((e->rank == 0) == root_pass) entry_release(e);
    while (entries) {
        mpix_comm_t *e = entries;
        if (PMPI_Comm_delete_attr(e->mpi_comm, keyval) != MPI_SUCCESS) {
            entry_unlink(e); /* the callback did not run */
            free(e);
        }
    }
    world = NULL;
    if (self_comm != MPI_COMM_NULL) PMPI_Comm_free(&self_comm);
    PMPI_Comm_free_keyval(&keyval);
    keyval = MPI_KEYVAL_INVALID;
}

MPI_Comm mpix_self_comm(void)
{
    if (self_comm == MPI_COMM_NULL && keyval_ready()) {
        if (PMPI_Comm_dup(MPI_COMM_SELF, &self_comm) != MPI_SUCCESS) return MPI_COMM_NULL;
        PMPI_Comm_set_errhandler(self_comm, MPI_ERRORS_RETURN);
    }
    return self_comm;
}

/* ---- datatypes and ops ---- */

typedef struct {
    MPI_Datatype mpi;
    rcoll_datatype_t rc;
    int reduce; /* arithmetic in MPI's sense: allowed in SUM/PROD/MIN/MAX */
} type_map_t;

static type_map_t types[24];
static int ntypes;
static pthread_once_t types_once = PTHREAD_ONCE_INIT;
static int types_ready;

static void types_init(void)
{
#define T(m, r, red) types[ntypes++] = (type_map_t){m, r, red}
    /* most used first: the lookup is a linear scan */
    T(MPI_FLOAT, RCOLL_FLOAT32, 1);
    T(MPI_DOUBLE, RCOLL_FLOAT64, 1);
    T(MPI_INT, RCOLL_INT32, 1);
    T(MPI_BYTE, RCOLL_UINT8, 0); /* data movement only: MPI has no arithmetic on bytes */
    T(MPI_CHAR, RCOLL_INT8, 0);  /* likewise (MPI_CHAR is text, not a C integer type) */
    T(MPI_SIGNED_CHAR, RCOLL_INT8, 1);
    T(MPI_UNSIGNED_CHAR, RCOLL_UINT8, 1);
    T(MPI_UNSIGNED, RCOLL_UINT32, 1);
    T(MPI_LONG_LONG, RCOLL_INT64, 1);
    T(MPI_UNSIGNED_LONG_LONG, RCOLL_UINT64, 1);
    T(MPI_INT8_T, RCOLL_INT8, 1);
    T(MPI_UINT8_T, RCOLL_UINT8, 1);
    T(MPI_INT32_T, RCOLL_INT32, 1);
    T(MPI_UINT32_T, RCOLL_UINT32, 1);
    T(MPI_INT64_T, RCOLL_INT64, 1);
    T(MPI_UINT64_T, RCOLL_UINT64, 1);
    T(MPI_LONG, sizeof(long) == 8 ? RCOLL_INT64 : RCOLL_INT32, 1);
    T(MPI_UNSIGNED_LONG, sizeof(long) == 8 ? RCOLL_UINT64 : RCOLL_UINT32, 1);
    T(MPI_SHORT, RCOLL_INT16, 1);
    T(MPI_UNSIGNED_SHORT, RCOLL_UINT16, 1);
    T(MPI_INT16_T, RCOLL_INT16, 1);
    T(MPI_UINT16_T, RCOLL_UINT16, 1);
    T(MPI_C_BOOL, RCOLL_BOOL, 1); /* only with the logical ops (mpix_map_op) */
#undef T
}

int mpix_map_type(MPI_Datatype dt, int reduce, rcoll_datatype_t *rdt, size_t *elem_size)
{
    if (!__atomic_load_n(&types_ready, __ATOMIC_ACQUIRE)) {
        pthread_once(&types_once, types_init);
        __atomic_store_n(&types_ready, 1, __ATOMIC_RELEASE);
    }
    for (int i = 0; i < ntypes; i++) {
        if (types[i].mpi != dt) continue;
        if (reduce && !types[i].reduce) return 0;
        *rdt = types[i].rc;
        *elem_size = rcoll_datatype_size(types[i].rc);
        return 1;
    }
    if (reduce) return 0;
    /* data movement: any predefined type without holes travels as bytes */
    int ni, na, nd, comb, size;
    MPI_Aint lb, extent, tlb, textent;
    if (dt == MPI_DATATYPE_NULL ||
        PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
        comb != MPI_COMBINER_NAMED || PMPI_Type_size(dt, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    if (size <= 0 || lb != 0 || tlb != 0 || extent != size || textent != size) return 0;
    *rdt = RCOLL_UINT8;
    *elem_size = (size_t)size;
    return 1;
}

int mpix_map_op(MPI_Op op, rcoll_datatype_t rdt, rcoll_op_t *rop)
{
    int is_bool = rdt == RCOLL_BOOL;
    int is_int = !is_bool && rdt != RCOLL_FLOAT16 && rdt != RCOLL_BFLOAT16 &&
                 rdt != RCOLL_FLOAT32 && rdt != RCOLL_FLOAT64;
    /* MPI's categories: arithmetic and min/max on integers and floats; bitwise on integers;
     * logical on C_BOOL.  Anything else is MPI's to refuse (or a user op): it falls through. */
    if (is_bool) {
        if (op == MPI_LAND) *rop = RCOLL_BAND;
        else if (op == MPI_LOR) *rop = RCOLL_BOR;
        else if (op == MPI_LXOR) *rop = RCOLL_BXOR;
        else return 0;
        return 1;
    }
    if (op == MPI_SUM) *rop = RCOLL_SUM;
    else if (op == MPI_PROD) *rop = RCOLL_PROD;
    else if (op == MPI_MIN) *rop = RCOLL_MIN;
    else if (op == MPI_MAX) *rop = RCOLL_MAX;
    else if (is_int && op == MPI_BAND) *rop = RCOLL_BAND;
    else if (is_int && op == MPI_BOR) *rop = RCOLL_BOR;
    else if (is_int && op == MPI_BXOR) *rop = RCOLL_BXOR;
    else return 0; /* logical ops on integers, MAXLOC/MINLOC, REPLACE, user ops */
    return 1;
}

/* ---- errors ---- */

/* MPI error strings belong to codes; a code's string is replaced when the pool wraps, so
 * the text of one of the last NCODES failures can still be read. */
#define NCODES 16
static int err_class = -1;
static int codes[NCODES];
static int ncodes, next_code;

int mpix_error_code(const mpix_comm_t *e, rcoll_status_t st)
{
    char text[MPI_MAX_ERROR_STRING];
    if (err_class < 0 && PMPI_Add_error_class(&err_class) != MPI_SUCCESS) {
        err_class = -1;
        return MPI_ERR_OTHER;
    }
    int slot = next_code++ % NCODES;
    if (slot >= ncodes) {
        if (PMPI_Add_error_code(err_class, &codes[slot]) != MPI_SUCCESS) return MPI_ERR_OTHER;
        ncodes++;
    }
    snprintf(text, sizeof(text), "rcoll: %s: %s", rcoll_status_string(st),
             e && e->rc ? rcoll_comm_last_error(e->rc) : "");
    PMPI_Add_error_string(codes[slot], text);
    return codes[slot];
}

int mpix_raise(MPI_Comm comm, const mpix_comm_t *e, rcoll_status_t st)
{
    int code = mpix_error_code(e, st);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}
