/*
 * ncclnet_int.h - the "plugin" transport's internals, shared by its set-up (ncclnet.c) and its
 * comms and data path (ncclnet_data.c): the process-wide state of the loaded plugin, the
 * objects that state holds, and what each file calls in the other.  Internal to those two
 * files; the knob and the handle layout are in ncclnet.h.
 */
#ifndef RCOLL_TRANSPORT_NCCLNET_INT_H
#define RCOLL_TRANSPORT_NCCLNET_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/nccl_net.h"
#include "transport/ncclnet.h"
#include "transport/transport.h"
#include "util/status.h"

#define NN_MAX_DEVS 32   /* plugin devices used at most */
#define NN_SEND_MAGIC 0x6e6e5353u        /* "nnSS" */
#define NN_RECV_MAGIC 0x6e6e5352u        /* "nnSR" */
#define NN_MR_MAGIC 0x6e6e4d52u          /* "nnMR" */

/* ---------------------------------------------------------------------------------------------
 * The plugin, loaded once per process by nn_init
 * ------------------------------------------------------------------------------------------ */

/* A registration made through reg_mr (the core's long-lived staging memory). */
typedef struct nn_mr {
    uint32_t magic; /* NN_MR_MAGIC */
    void *pmh;      /* the plugin's mhandle */
    uintptr_t start, end;
    struct nn_mr *next; /* in nn.mrs */
} nn_mr_t;

/* A connect in progress: NCCL plugins keep their connect state inside the handle they are
 * given (NCCL passes the same buffer again), so each one gets a buffer that lives until the
 * connect ends.  Keyed by the caller's handle (address and content). */
typedef struct nn_connect {
    const void *key;
    int dev;
    uint8_t orig[RCOLL_TRANSPORT_HANDLE_BYTES];
    uint8_t work[NCCL_NET_HANDLE_MAXSIZE];
    struct nn_connect *next;
} nn_connect_t;

/* What a device is beyond rcoll_transport_props_t, for describe. */
typedef struct {
    int ptr_support, reg_is_global, max_recvs;
} nn_devx_t;

/* The plugin and what rcoll holds of it, process-wide (defined in ncclnet.c). */
typedef struct {
    void *lib;
    char path[RCOLL_CFG_STR_MAX]; /* the file dlopen loaded */
    char name[64];                /* the plugin's name field */
    int version;                  /* 8 .. 12 */
    int complete;                 /* every function rcoll calls is there (after init) */
    const ncclNet_v8_t *v8;
    const ncclNet_v9_t *v9;
    const ncclNet_v10_t *v10;
    const ncclNet_v11_t *v11;
    const ncclNet_v12_t *v12;
    void *ctx; /* v11+'s context */
    /* v11 and v12 (one table layout, except the properties): the members that take the
     * context, from the version's table */
    ncclResult_t (*cx_init)(void **, uint64_t, ncclNetCommConfig_v11_t *, ncclDebugLogger_t,
                            ncclProfilerCallback_t);
    ncclResult_t (*cx_listen)(void *, int, void *, void **);
    ncclResult_t (*cx_connect)(void *, int, void *, void **, ncclNetDeviceHandle_t **);
    ncclResult_t (*cx_isend)(void *, void *, size_t, int, void *, void *, void **);
    ncclResult_t (*cx_irecv)(void *, int, void **, size_t *, int *, void **, void **, void **);
    ncclResult_t (*cx_finalize)(void *);
    /* the members whose type is the same in every version, from the version's table */
    ncclResult_t (*devices)(int *);
    ncclResult_t (*accept)(void *, void **, ncclNetDeviceHandle_t **);
    ncclResult_t (*reg_mr)(void *, void *, size_t, int, void **);
    ncclResult_t (*dereg_mr)(void *, void *);
    ncclResult_t (*iflush)(void *, int, void **, int *, void **, void **);
    ncclResult_t (*test)(void *, int *, int *);
    ncclResult_t (*close_send)(void *);
    ncclResult_t (*close_recv)(void *);
    ncclResult_t (*close_listen)(void *);
    int ndev;
    rcoll_transport_props_t props[NN_MAX_DEVS];
    nn_devx_t devx[NN_MAX_DEVS];
    pthread_mutex_t lock; /* mrs and connects */
    nn_mr_t *mrs;
    nn_connect_t *connects;
} nn_global_t;
extern nn_global_t nn;

/* A send or recv comm (ncclnet_data.c). */
typedef struct nn_comm nn_comm_t;

/* ncclnet.c */
const char *nn_result_name(ncclResult_t r);
rcoll_status_t nn_err(ncclResult_t r, const char *call);

/* ncclnet_data.c */
/* A comm around the plugin's comm pc on device dev (magic: NN_SEND_MAGIC or
 * NN_RECV_MAGIC); NULL: no memory. */
nn_comm_t *nn_comm_new(void *pc, uint32_t magic, int dev);
rcoll_status_t nn_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle);
rcoll_status_t nn_dereg_mr(void *comm, void *mhandle);
rcoll_status_t nn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                        void **request);
rcoll_status_t nn_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **request);
rcoll_status_t nn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
rcoll_status_t nn_test(void *request, int *done, size_t *sizes);
rcoll_status_t nn_close_send(void *send_comm);
rcoll_status_t nn_close_recv(void *recv_comm);

#endif
