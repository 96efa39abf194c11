/*
 * plugin.h - the one implementation of rcoll's NCCL net plugin (plugin.c), in the terms the
 * per-version tables (plugin_abi.c) need: each exported ncclNet_vN_t is a thin wrapper that
 * converts its version's argument types and calls these.  Uses transport/ and util/ only.
 */
#ifndef RCOLL_PLUGIN_PLUGIN_H
#define RCOLL_PLUGIN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "transport/nccl_net.h"
#include "rcoll.h"

#define PL_NAME "rcoll"   /* the name field of every exported version */
#define PL_MAX_DEVS 32    /* devices the plugin reports at most */
#define PL_MAX_REQS 64    /* requests in flight per comm (NCCL needs NCCL_NET_MAX_REQUESTS) */
#define PL_MAX_RECVS 1    /* buffers per irecv reported to NCCL as maxRecvs (plugin.c) */

/* A device's properties, in the fields every version shares (pointers stay valid for the
 * life of the process). */
typedef struct {
    char *name;
    char *pci_path;   /* NULL: a virtual device (no PCI function behind it) */
    uint64_t guid;
    int ptr_support;  /* NCCL_PTR_* */
    int speed;        /* Mb/s */
    int port;
    float latency;    /* us */
    int max_comms;
    int max_recvs;
    size_t max_bytes; /* largest message, capped to NCCL_MAX_NET_SIZE_BYTES */
} pl_props_t;

/* Once per process (later calls only update the logger, which may be NULL): choose the
 * transport (RCOLL_NET / RCOLL_TRANSPORT, else verbs when it has a device, else tcp) and
 * read its devices; route rcoll's own log lines to the logger. */
ncclResult_t pl_init(ncclDebugLogger_t logger);
ncclResult_t pl_devices(int *ndev);
ncclResult_t pl_get_props(int dev, pl_props_t *props);

ncclResult_t pl_listen(int dev, void *handle, void **listen_comm);
ncclResult_t pl_connect(int dev, void *handle, void **send_comm);
ncclResult_t pl_accept(void *listen_comm, void **recv_comm);
ncclResult_t pl_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t pl_dereg_mr(void *comm, void *mhandle);
ncclResult_t pl_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                      void **request);
ncclResult_t pl_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                      void **mhandles, void **request);
ncclResult_t pl_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                       void **request);
/* sizes (may be NULL) gets one entry per message of the request once it is done (clamped to
 * INT_MAX: the ABI's type). */
ncclResult_t pl_test(void *request, int *done, int *sizes);
ncclResult_t pl_close_send(void *send_comm);
ncclResult_t pl_close_recv(void *recv_comm);
ncclResult_t pl_close_listen(void *listen_comm);

/* An operation failed with st, whose text rcoll_err_set recorded: log that text at WARN
 * (subsystem NET) and return st mapped to ncclResult_t. */
ncclResult_t pl_fail(rcoll_status_t st, const char *op);
/* Log a plugin-detected argument error (WARN, subsystem NET) and return ncclInvalidArgument. */
ncclResult_t pl_bad_arg(const char *what);
/* Log at INFO through NCCL's logger (or rcoll's log when there is none). */
void pl_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
