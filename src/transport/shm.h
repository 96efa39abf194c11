/*
 * shm.h - layouts of the shared-memory transport (shm.c, shm_conn.c): the connection handle,
 * the handshake message and the shared segment, and the internals its two files share.
 * Internal to transport/, and shared with its conformance test so that the test can play raw
 * (misbehaving) peers.  Both ends run on one host, so everything is in host byte order.
 */
#ifndef RCOLL_TRANSPORT_SHM_H
#define RCOLL_TRANSPORT_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "transport/transport.h"
#include "util/status.h"

#define RCOLL_SHM_VERSION 1u
#define RCOLL_SHM_HANDLE_MAGIC 0x72635348u /* "rcSH" */
#define RCOLL_SHM_HELLO_MAGIC 0x7263534cu  /* "rcSL" */
#define RCOLL_SHM_SEG_MAGIC 0x72635347u    /* "rcSG" */

#define RCOLL_SHM_MAX_REQS 64     /* outstanding requests per comm (isend/irecv -> NULL) */
#define RCOLL_SHM_NAME_BYTES 40   /* abstract socket name, NUL-terminated, without the '\0' */
#define RCOLL_SHM_HOST_BYTES 48   /* host name carried for error messages (truncated) */
#define RCOLL_SHM_INLINE_BYTES 32 /* messages this short travel in the slot header's line */

/* What listen() writes into the opaque handle (the rest of the 128 bytes is zero). */
typedef struct {
    uint32_t magic;   /* RCOLL_SHM_HANDLE_MAGIC */
    uint32_t version; /* RCOLL_SHM_VERSION */
    uint64_t nonce;   /* random; the connector's hello must carry it */
    uint64_t host_id; /* hash of host name, boot id and network namespace */
    int32_t pid;      /* the listening process, for messages */
    uint32_t reserved;
    char name[RCOLL_SHM_NAME_BYTES]; /* abstract Unix socket name ("" prefix '\0' implied) */
    char host[RCOLL_SHM_HOST_BYTES]; /* host name, for the "another host" message */
} rcoll_shm_handle_t;

/* The one message a connector sends on the Unix socket, with the segment's fd attached
 * (SCM_RIGHTS).  After it the socket carries nothing: its EOF tells that the peer is gone. */
typedef struct {
    uint32_t magic;     /* RCOLL_SHM_HELLO_MAGIC */
    uint32_t version;   /* RCOLL_SHM_VERSION */
    uint64_t nonce;     /* from the handle */
    uint64_t seg_bytes; /* size of the attached segment */
    int32_t pid;        /* the connector (informational; SO_PEERCRED is what is trusted) */
    uint32_t flags;     /* RCOLL_SHM_HELLO_* */
    uint64_t probe_addr;  /* address in the connector of probe_value (single-copy probe) */
    uint64_t probe_value; /* random; what a process_vm_readv of probe_addr must return */
} rcoll_shm_hello_t;

#define RCOLL_SHM_HELLO_SEALED 1u /* the segment is a memfd sealed against resizing */

/*
 * The segment: one per connection, created by the connector (the sender), written by the
 * sender except for the consumer line, which only the receiver writes.
 *
 *   0    seg header (read-only after setup)
 *   128  consumer line: consumed, recv_flags                   (receiver writes)
 *   256  slot 0: [hdr 32 B | inline 32 B][payload slot_bytes]  (sender writes, seq last)
 *        slot 1 ...
 *
 * Slot k of the stream (k = 0, 1, 2, ...) lives at index k % nslots (nslots is a power of
 * two; each slot is a 64-byte header line followed by slot_bytes of payload).  The sender fills it
 * once consumed >= k + 1 - nslots, then publishes it by a release store of seq = k + 1; the
 * receiver waits for seq == k + 1 (acquire), copies the data out and stores consumed = k + 1
 * (release).  A message of len bytes takes max(1, ceil(len / slot_bytes)) consecutive slots
 * (header fields valid in its first); one of at most RCOLL_SHM_INLINE_BYTES sits in the
 * header's own cache line.  A slot flagged RCOLL_SHM_SLOT_RNDV (optional single-copy, used
 * only when the receiver set RCOLL_SHM_RECV_VMREAD) instead carries the address
 * of the whole message in the sender, which the receiver reads with process_vm_readv; the
 * sender's request completes only when that slot is consumed.
 */
typedef struct {
    uint32_t magic;      /* RCOLL_SHM_SEG_MAGIC */
    uint32_t version;    /* RCOLL_SHM_VERSION */
    uint32_t nslots;     /* slots in the ring */
    uint32_t slot_bytes; /* payload bytes per slot (multiple of 64) */
    uint64_t seg_bytes;  /* whole segment */
    int32_t pid;         /* creator */
    uint32_t reserved;
    char pad[128 - 32];
    _Atomic uint64_t consumed;   /* slots the receiver is done with */
    _Atomic uint32_t recv_flags; /* RCOLL_SHM_RECV_* (set by the receiver at accept) */
    char pad2[128 - 12];
} rcoll_shm_seg_t;

#define RCOLL_SHM_RECV_VMREAD 1u /* the receiver can read the sender's memory directly */

typedef struct {
    _Atomic uint64_t seq; /* k + 1 once slot k of the stream is published */
    uint64_t length;      /* message length (first slot of a message) */
    int32_t tag;          /* sender's tag (-1: none) */
    uint32_t flags;       /* RCOLL_SHM_SLOT_* */
    uint64_t addr;        /* RNDV: the message's address in the sender */
    unsigned char inline_data[RCOLL_SHM_INLINE_BYTES];
} rcoll_shm_slot_t;

#define RCOLL_SHM_SLOT_RNDV 1u

#define RCOLL_SHM_SLOTS_OFFSET ((size_t)sizeof(rcoll_shm_seg_t))

_Static_assert(sizeof(rcoll_shm_handle_t) <= RCOLL_TRANSPORT_HANDLE_BYTES,
               "shm handle must fit RCOLL_TRANSPORT_HANDLE_BYTES");
_Static_assert(sizeof(rcoll_shm_hello_t) == 48, "hello layout has no padding");
_Static_assert(sizeof(rcoll_shm_seg_t) == 256, "segment header is four cache lines");
_Static_assert(offsetof(rcoll_shm_seg_t, consumed) == 128, "consumer line at 128");
_Static_assert(sizeof(rcoll_shm_slot_t) == 64, "slot header is one cache line");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free (shared memory)");

/* ---------------------------------------------------------------------------------------------
 * Internals shared by shm.c (data path, init, close) and shm_conn.c (connection setup)
 * ------------------------------------------------------------------------------------------ */

#define SHM_MAX_PENDING 256 /* accepted sockets whose hello has not arrived, per listener */

/* Process-wide settings, written once by init(). */
typedef struct {
    int inited;
    int have_memfd;    /* memfd_create works here */
    int vmread;        /* process_vm_readv works on ourselves */
    uint32_t nslots, slot_bytes;
    uint64_t rndv_min;
    uint64_t stream_min;
    uint64_t host_id;
    char host[RCOLL_SHM_HOST_BYTES];
} shm_global_t;

extern shm_global_t shm_g; /* shm.c */

/* What a receiver reads back from this process to prove that single-copy works (shm.c). */
extern volatile uint64_t shm_probe_word;

typedef struct shm_comm shm_comm_t;

/* One message: a whole isend, or one buffer of a grouped irecv. */
typedef struct {
    char *data;
    uint64_t cap;    /* send: message length; recv: posted buffer size */
    uint64_t length; /* message length (recv: valid once its first slot was read) */
    int tag;
} shm_msg_t;

typedef struct {
    shm_comm_t *comm;
    int in_use;            /* handed out and not yet freed by test() */
    int done;              /* complete and retired (requests retire in posting order) */
    int nmsgs;
    uint64_t release_slot; /* send: complete once consumed >= this (single-copy); else 0 */
    shm_msg_t msgs[RCOLL_TRANSPORT_MAX_RECVS];
} shm_req_t;

/* A send or recv comm.  ring[] holds posted requests in order: head..cur-1 are fully
 * written/read but maybe not retired, cur is under the cursor, cur..tail-1 wait. */
struct shm_comm {
    int is_recv;
    rcoll_status_t failed; /* first error; sticky */
    int fd;                /* the Unix socket: liveness only after the handshake */
    int pidfd;             /* the peer process (pidfd_open), -1 where unavailable */
    int peer_pid;
    unsigned char *seg;
    size_t seg_bytes;
    rcoll_shm_seg_t *hdr;
    unsigned char *slots;
    uint32_t nslots, slot_bytes;
    size_t stride;
    uint64_t next;     /* stream slot to fill (send) or read (recv) next */
    uint64_t consumed; /* send: last value seen of hdr->consumed */
    uint64_t head, cur, tail;
    int cur_mi;        /* message of ring[cur] under the cursor */
    uint64_t cur_off;  /* bytes of it written (send) or read (recv) */
    int cur_started;   /* recv: its first slot has been read */
    int cur_rndv;      /* recv: it is a single-copy message */
    uint64_t rndv_addr;
    uint64_t rndv_min;   /* send: single-copy from this size up (copied from shm_g) */
    uint64_t stream_min; /* recv: messages this long are copied out with streaming stores */
    uint32_t idle;     /* fruitless progress calls since progress or the last check */
    uint64_t stall_ns; /* when the clock first saw the current fruitless wait */
    int nfree;
    shm_req_t *free_reqs[RCOLL_SHM_MAX_REQS];
    shm_req_t *ring[RCOLL_SHM_MAX_REQS];
    shm_req_t reqs[RCOLL_SHM_MAX_REQS];
    char errtext[RCOLL_ERR_TEXT_MAX]; /* detail of `failed`, repeated by later calls */
};

/* An accepted socket whose hello has not arrived yet. */
typedef struct {
    int fd;
    uint64_t seq; /* arrival order, to drop the oldest when full */
} shm_pend_t;

typedef struct {
    int fd;
    uint64_t nonce;
    uint64_t seq;
    int npend;
    shm_pend_t pend[SHM_MAX_PENDING];
} shm_listen_t;

/* shm.c */
shm_comm_t *shm_comm_alloc(int is_recv);
void shm_comm_free(shm_comm_t *c);

/* shm_conn.c */
size_t shm_seg_size(uint32_t nslots, uint32_t slot_bytes);
/* The checks of what a peer sent, apart from the sockets and mappings, so that tests/fuzz can
 * feed them any bytes.  Each returns why it is unacceptable, or NULL. */
/* A connect handle (the name is then a terminated, non-empty string). */
const char *rcoll_shm_handle_check(const rcoll_shm_handle_t *h);
/* A hello of n bytes received by the listener of this nonce. */
const char *rcoll_shm_hello_check(const rcoll_shm_hello_t *h, size_t n, uint64_t nonce);
/* The header of a mapped segment of seg_bytes bytes: each field is read once (the peer may
 * change them later), the geometry in *nslots and *slot_bytes when acceptable. */
const char *rcoll_shm_seg_check(const rcoll_shm_seg_t *hdr, uint64_t seg_bytes,
                                uint32_t *nslots, uint32_t *slot_bytes);
rcoll_status_t shm_devshm_free(uint64_t *free_p);
rcoll_status_t shm_devshm_too_small(uint64_t avail, size_t need);
rcoll_status_t shm_listen(int dev, void *handle, void **listen_comm);
rcoll_status_t shm_accept(void *listen_comm, void **recv_comm);
rcoll_status_t shm_connect(int dev, const void *handle, void **send_comm);

/* The transport's knobs (shm.c): RCOLL_BUFFSIZE (shared, transport.h) and RCOLL_PROTO. */
typedef enum {
    RCOLL_SHM_PROTO_AUTO, /* = copy, the faster where measured */
    RCOLL_SHM_PROTO_COPY, /* through the connection's slot ring */
    RCOLL_SHM_PROTO_CMA   /* single copy with process_vm_readv where allowed */
} rcoll_shm_proto_t;
typedef struct {
    rcoll_transport_config_t conn;
    int proto; /* rcoll_shm_proto_t */
} rcoll_shm_config_t;
extern const rcoll_config_table_t rcoll_shm_config_table;

/* The transport (shm.c); transport.h should list it with the other built-ins. */
extern const rcoll_transport_ops_t rcoll_transport_shm;

#ifdef RCOLL_TEST_HOOKS
/* Test hooks, in the test build of the transport layer only (rcoll_transport_testhooks),
 * read by the next init():
 * force_shm_open = 1 creates segments with shm_open in /dev/shm (the fallback for kernels
 * without memfd_create); single_copy_min > 0 sends messages of at least that many bytes
 * single-copy (process_vm_readv) where the receiver can read the sender.  Default 0, 0:
 * memfd, and single-copy off, because on the machines measured so far it is slower than the
 * pipelined copy through the ring (see the top of shm.c). */
void rcoll_shm_test_options(int force_shm_open, uint64_t single_copy_min);
#endif

#endif
