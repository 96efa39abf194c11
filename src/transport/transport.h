/*
 * transport.h - THE contract between rcoll's algorithms and the ways bytes move.
 *
 * Modelled on NCCL's net plugin interface so the NCCL shim stays thin.  A transport connects
 * endpoints, registers memory and moves bytes; it knows nothing of ranks, datatypes or
 * collectives.  Every operation is non-blocking: connect/accept return RCOLL_OK with a NULL
 * comm while the connection is still being established, and data moves only inside test().
 * Connections are one-directional: connect() yields a send comm, accept() a recv comm.
 * Messages on one connection are matched in order: the k-th isend is received by the k-th
 * buffer posted with irecv (grouped receives take one message per buffer).
 *
 * Errors return a negative status with the detail recorded by rcoll_err_set(); the core adds
 * the peer's rank.  A message whose tag differs from the receive's (neither -1), or that is
 * longer than the buffer posted for it, is RCOLL_ERR_INVALID_USAGE: the two sides disagree
 * about what they are doing (the core tags collectives with their signature, core/sig.h).  The
 * tag is checked first, and no byte of such a message reaches the buffer.  After an error on a comm, every later call on it fails with the same
 * status, and every outstanding request on it completes (in test) with that error.
 */
#ifndef RCOLL_TRANSPORT_H
#define RCOLL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include "rcoll.h"
#include "util/config.h"

#define RCOLL_TRANSPORT_HANDLE_BYTES 128 /* opaque connection handle exchanged by bootstrap */
#define RCOLL_TRANSPORT_MAX_RECVS 8      /* most buffers one grouped irecv may carry */
#define RCOLL_MAX_TRANSPORTS 4           /* built-in transports at most */
#define RCOLL_TRANSPORT_HANDLE_MARK 8    /* leading handle bytes that are never all zero */

/* Kinds of memory a transport can move (bitmask in props.ptr_support, and mem_type). */
enum {
    RCOLL_PTR_HOST = 1 << 0,
    RCOLL_PTR_CUDA = 1 << 1,
    RCOLL_PTR_DMABUF = 1 << 2
};

typedef struct {
    char name[64];        /* device name, e.g. "lo" or "mlx5_0" */
    char pci_path[256];   /* sysfs path of the PCI device, "" if none */
    uint64_t guid;        /* unique device id (0 if none) */
    int ptr_support;      /* RCOLL_PTR_* mask */
    int speed_mbps;       /* link speed */
    int port;             /* port number (1-based) for NICs, 0 otherwise */
    float latency_us;     /* nominal one-way latency */
    int max_comms;        /* most connections the device supports */
    int max_recvs;        /* most buffers per grouped irecv (<= RCOLL_TRANSPORT_MAX_RECVS) */
    size_t max_msg_size;  /* largest message one isend/irecv may carry */
    int host_local;       /* 1: connects only processes of one host (shared memory, IPC) */
} rcoll_transport_props_t;

/* Knobs every transport's connections share (registry.c): RCOLL_BUFFSIZE bounds the staging
 * memory per peer connection (shm slot rings here, the core's staging above).  A transport
 * that needs them embeds this table in its own (RCOLL_KNOB_SUBTABLE). */
typedef struct {
    size_t buffsize;
} rcoll_transport_config_t;
extern const rcoll_config_table_t rcoll_transport_config_table;

typedef struct rcoll_transport_ops {
    const char *name; /* "tcp", "shm", "verbs", "plugin" (an NCCL net plugin) */
    /* 1: connects only processes of one host (shared memory, IPC), as props.host_local says
     * per device; known before init, so the core can filter transports without starting them. */
    int host_local;
    /* The transport's own knobs: the registry parses this table once per process into a
     * struct of config->size bytes and passes it to init. */
    const rcoll_config_table_t *config;

    /* Called once per process before any other op, with the transport's own knobs (the
     * struct of its config table).  Returns RCOLL_ERR_UNSUPPORTED when the transport cannot
     * work here (the detail says why; rcoll-info prints it). */
    rcoll_status_t (*init)(const void *cfg);
    rcoll_status_t (*devices)(int *ndev);
    rcoll_status_t (*get_props)(int dev, rcoll_transport_props_t *props);
    /* Details of device dev for people (rcoll-info): whole lines, each ending in '\n', NUL-
     * terminated within len bytes ("" when the properties say it all). */
    void (*describe)(int dev, char *buf, size_t len);

    /* Start listening on device dev.  handle (out, RCOLL_TRANSPORT_HANDLE_BYTES) is what a
     * peer passes to connect(); listen_comm (out) is passed to accept().  Handle rule: the
     * first RCOLL_TRANSPORT_HANDLE_MARK bytes of a handle are never all zero (a transport
     * starts it with a magic number or an address family), because the core marks "does not
     * listen on this transport" in the rank table with an all-zero handle; the registry
     * refuses a listen that breaks the rule (RCOLL_ERR_INTERNAL). */
    rcoll_status_t (*listen)(int dev, void *handle, void **listen_comm);
    /* Connect to a peer's handle.  *send_comm is NULL until the connection is established;
     * call again with the same arguments until it is non-NULL or an error is returned.
     * timeout bookkeeping belongs to the caller. */
    rcoll_status_t (*connect)(int dev, const void *handle, void **send_comm);
    /* Accept the next connection on listen_comm; *recv_comm is NULL until one is ready.
     * Connections that fail the transport's handshake are dropped and logged, never
     * returned. */
    rcoll_status_t (*accept)(void *listen_comm, void **recv_comm);

    /* Register memory for use with isend/irecv on comm (send or recv comm).  mem_type is one
     * RCOLL_PTR_* value.  *mhandle (out) is passed to isend/irecv and dereg_mr. */
    rcoll_status_t (*reg_mr)(void *comm, void *data, size_t size, int mem_type,
                             void **mhandle);
    rcoll_status_t (*dereg_mr)(void *comm, void *mhandle);

    /* Send size bytes.  *request is NULL when the transport cannot queue more now (caller
     * retries later); otherwise it is completed through test(). */
    rcoll_status_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                            void **request);
    /* Post n receive buffers (n <= max_recvs) as one request; each takes one message of at
     * most sizes[i] bytes.  tags are advisory (must match the sender's if not -1).  *request
     * is NULL when the transport cannot queue more now. */
    rcoll_status_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                            void **mhandles, void **request);
    /* Make received data visible to the GPU (GPUDirect); host-memory transports complete at
     * once with *request = NULL. */
    rcoll_status_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                             void **request);
    /* Progress comm traffic and report completion.  When *done = 1 the request is freed and,
     * for receives, sizes[i] (may be NULL) holds each received length.  A request that fails
     * returns the error (and is freed). */
    rcoll_status_t (*test)(void *request, int *done, size_t *sizes);
    /* Optional (NULL: none).  Called every few milliseconds for each send and receive
     * connection of a communicator while one of its operations waits, whatever that
     * operation waits on.  For a transport whose connections have work of their own besides
     * the requests the core tests: verbs failover, where a peer's move of a connection is
     * answered only when this end of it is progressed, and an operation held on another
     * connection may not touch this one until that move is done.  A failure stays with the
     * connection (its next request returns it). */
    void (*poke)(void *comm);

    rcoll_status_t (*close_send)(void *send_comm);
    rcoll_status_t (*close_recv)(void *recv_comm);
    rcoll_status_t (*close_listen)(void *listen_comm);

    /* Release process-wide resources (after every comm is closed). */
    void (*fini)(void);
} rcoll_transport_ops_t;

/* Data-path events of this thread's transports (a slot published or consumed, bytes sent or
 * received): the core compares the count around a progress pass to know that local peers
 * may have something new, and rings their doorbells (util/bell.h).  Transports that move
 * bytes between processes of one host count them; others need not. */
extern __thread uint64_t rcoll_transport_moves;

/* Shared stubs for operations a transport does not have (callers never test for NULL). */
rcoll_status_t rcoll_transport_stub_iflush(void *recv_comm, int n, void **data, int *sizes,
                                           void **mhandles, void **request);
rcoll_status_t rcoll_transport_stub_reg_mr(void *comm, void *data, size_t size, int mem_type,
                                           void **mhandle);
rcoll_status_t rcoll_transport_stub_dereg_mr(void *comm, void *mhandle);
void rcoll_transport_stub_describe(int dev, char *buf, size_t len);

/* The registry (registry.c, RCOLL_TRANSPORTS: the one list of transports).  The values of
 * RCOLL_TRANSPORT: "auto", then every transport rcoll has (built here or not), NULL-ended;
 * of RCOLL_NET: "auto", then those that reach other hosts. */
extern const char *const rcoll_transport_names[];
extern const char *const rcoll_net_names[];
/* The index of name in such a list (a knob's value), -1 if absent. */
int rcoll_transport_value(const char *const *names, const char *name);
/* The knobs all transports share, then every registered transport's table, built or not. */
const rcoll_config_table_t *const *rcoll_transport_config_tables(size_t *count);
/* 1 when every line of the registry agrees with its ops (name, host_local, knob table) and the
 * built ones are the priority list; else 0 and why. */
int rcoll_transport_registry_check(char *why, size_t len);

/* Built-in transports, in priority order (registry.c). */
extern const rcoll_transport_ops_t rcoll_transport_shm;
extern const rcoll_transport_ops_t rcoll_transport_tcp;
extern const rcoll_transport_ops_t rcoll_transport_verbs; /* when RCOLL_HAVE_VERBS */
extern const rcoll_transport_ops_t rcoll_transport_ncclnet; /* "plugin": RCOLL_NET_PLUGIN */

/* Position of a built-in transport in the priority list (its slot in handle tables). */
int rcoll_transport_index(const rcoll_transport_ops_t *t);
/* Find a built-in transport by name ("tcp"); NULL if none. */
const rcoll_transport_ops_t *rcoll_transport_find(const char *name);
/* All built-in transports in priority order; *count set to their number. */
const rcoll_transport_ops_t *const *rcoll_transport_list(size_t *count);
/* Whether a rank-table handle is filled (the peer listens on that transport), by the handle
 * rule above. */
int rcoll_transport_handle_present(const void *handle);
/* t->listen, checking the handle rule. */
rcoll_status_t rcoll_transport_listen(const rcoll_transport_ops_t *t, int dev, void *handle,
                                      void **listen_comm);
/* Initialise a transport once per process (thread-safe): parse its knob table, then init.
 * Returns that status, cached (RCOLL_ERR_INVALID_ARG for a bad knob value). */
rcoll_status_t rcoll_transport_ensure_init(const rcoll_transport_ops_t *t);
/* Free the knob structs of the n transports in finished (the caller has called their fini)
 * and of every transport whose init failed; a later ensure_init of any of them starts again.
 * For a library that is unloaded (the NCCL net plugin); others keep them for the process. */
void rcoll_transport_release(const rcoll_transport_ops_t *const *finished, int n);

#endif
