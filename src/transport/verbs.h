/*
 * verbs.h - internals of the InfiniBand/RoCE verbs transport, shared by its files (device,
 * mr, conn, data) and by its unit test: the port table, the wire records exchanged at
 * connection setup, the FIFO through which a receiver advertises its buffers, and the pure
 * helpers (device filter, GID scoring) that tests check without hardware.
 */
#ifndef RCOLL_TRANSPORT_VERBS_H
#define RCOLL_TRANSPORT_VERBS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/transport.h"
#include "transport/verbs_api.h"
#include "transport/verbs_config.h"
#include "util/net.h"
#include "util/status.h"

#define RCOLL_VRB_VERSION 1u
#define RCOLL_VRB_HANDLE_MAGIC 0x72634948u /* "rcIH" */
#define RCOLL_VRB_META_MAGIC 0x7263494du   /* "rcIM" */
#define RCOLL_VRB_READY_MAGIC 0x72634952u  /* "rcIR" */
#define RCOLL_VRB_MOVE_MAGIC 0x7263494fu   /* "rcIO" */
#define RCOLL_VRB_CAP_FAILOVER 1u          /* meta caps: this end moves a connection */

#define RCOLL_VRB_MAX_PORTS 32
#define RCOLL_VRB_MAX_QPS 16
#define RCOLL_VRB_NSLOTS 32                 /* FIFO slots = outstanding irecv requests */
#define RCOLL_VRB_MAX_REQS 64               /* outstanding requests per comm */
#define RCOLL_VRB_MSG_RING (RCOLL_VRB_NSLOTS * RCOLL_TRANSPORT_MAX_RECVS)
#define RCOLL_VRB_MAX_MSG ((size_t)0x7fffffff) /* a part length travels in the immediate */
#define RCOLL_VRB_WR_BYTES ((size_t)1 << 30)   /* most bytes one RDMA WRITE carries */
#define RCOLL_VRB_IMM_ERROR 0xffffffffu        /* immediate: the sender gave up on this message */
#define RCOLL_VRB_INLINE 64                    /* inline bytes asked for at QP creation */

/* One active port that passed RCOLL_IB_HCA, with the GID chosen on it. */
typedef struct rcoll_vrb_dev {
    char name[64]; /* device name (mlx5_0, rxe0) */
    int port;
    struct ibv_context *ctx; /* shared by the ports of one device (owner closes it) */
    struct ibv_pd *pd;       /* one per device, shared likewise */
    int owns_ctx;
    struct ibv_port_attr attr;
    int gid_index;
    union ibv_gid gid;
    int gid_type; /* IBV_GID_TYPE_IB / _ROCE_V1 / _ROCE_V2 */
    uint64_t guid;
    char pci_path[256];
    int speed_mbps;
    int max_qp_wr;
    struct rcoll_vrb_mr_cache *mrs; /* this device's registrations (shared by its ports) */
    volatile int dead;             /* a fatal port/device event arrived: its text below */
    char dead_text[192];
} rcoll_vrb_dev_t;

/* What listen() writes into the opaque handle; the rest of the 128 bytes is zero. */
typedef struct {
    uint32_t magic;   /* RCOLL_VRB_HANDLE_MAGIC */
    uint32_t version; /* RCOLL_VRB_VERSION */
    uint64_t nonce;   /* random; the connector's record must carry it */
    rcoll_sockaddr_t addr; /* TCP address where the listener takes connection records */
} rcoll_vrb_handle_t;

/* The fixed-size connection record each side sends the other over TCP. */
typedef struct {
    uint32_t magic;   /* RCOLL_VRB_META_MAGIC */
    uint32_t version; /* RCOLL_VRB_VERSION */
    uint64_t nonce;   /* the listener's, from the handle */
    uint32_t nqps;    /* queue pairs of this connection (the connector decides) */
    uint32_t psn;     /* first packet sequence number of every QP */
    uint32_t qpn[RCOLL_VRB_MAX_QPS];
    uint8_t gid[16];
    uint32_t gid_index;
    uint32_t mtu;        /* enum ibv_mtu of the port */
    uint16_t lid;
    uint8_t link_layer;  /* IBV_LINK_LAYER_* */
    uint8_t gid_type;
    uint32_t caps;       /* RCOLL_VRB_CAP_*: both ends' bits on = in use (older peers: 0) */
    uint64_t fifo_addr;  /* connector: its FIFO, written by the receiver; acceptor: 0 */
    uint32_t fifo_rkey;
    uint32_t reserved;
    char dev[64];        /* device name, for messages */
} rcoll_vrb_meta_t;

/* One advertised receive buffer. */
typedef struct {
    uint64_t addr;
    uint64_t size;
    uint32_t rkey;
    int32_t tag;
} rcoll_vrb_fifo_entry_t;

/* One grouped irecv, RDMA-written by the receiver into the sender's FIFO.  seq_head and
 * seq_tail carry the same number and the sender trusts the slot only when both match, so a
 * slot read while it lands is never used half-written. */
typedef struct {
    uint64_t seq_head;
    uint32_t n;
    uint32_t reserved;
    rcoll_vrb_fifo_entry_t e[RCOLL_TRANSPORT_MAX_RECVS];
    uint64_t seq_tail;
} rcoll_vrb_fifo_slot_t;

/* Failover: the records on a connection's TCP socket that move it to another port pair
 * (verbs_move.c has the protocol). */
enum {
    RCOLL_VRB_MOVE_REQ = 1, /* sender: my new QPs (meta), move yours; old/new port, back */
    RCOLL_VRB_MOVE_ACK = 2, /* receiver: my new QPs (meta), messages complete (done) */
    RCOLL_VRB_MOVE_NAK = 3, /* receiver: cannot move (text) */
    RCOLL_VRB_MOVE_GO = 4,  /* sender: connected; advertise again */
    RCOLL_VRB_MOVE_LOST = 5 /* receiver: my path died (round: moves done), please move */
};
typedef struct {
    uint32_t magic; /* RCOLL_VRB_MOVE_MAGIC */
    uint32_t type;
    uint32_t round; /* moves completed before this one */
    int32_t old_dev, new_dev; /* REQ: the sender's port indexes (the receiver follows the
                               * same step through its own list: parallel rails) */
    uint32_t back;  /* REQ: going back to the ports the connection was made on */
    uint64_t done;  /* ACK: messages the receiver has whole (the sender resends from it) */
    rcoll_vrb_meta_t meta;
    char text[128]; /* NAK, LOST: why */
} rcoll_vrb_move_t;

_Static_assert(sizeof(rcoll_vrb_handle_t) <= RCOLL_TRANSPORT_HANDLE_BYTES,
               "verbs handle must fit RCOLL_TRANSPORT_HANDLE_BYTES");
_Static_assert(sizeof(rcoll_vrb_meta_t) == 200, "connection record layout has no padding");
_Static_assert(sizeof(rcoll_vrb_fifo_entry_t) == 24, "fifo entry layout has no padding");

/* ---- devices (verbs_dev.c) ---- */
/* Does device dev, port port pass the RCOLL_IB_HCA filter?  "" passes everything; a list of
 * name[:port] entries matches by name prefix ("=" first: exact names); "^" first excludes
 * what the list matches. */
int rcoll_vrb_hca_match(const char *filter, const char *dev, int port);
/* Check RCOLL_IB_ADDR_RANGE ("" or addr/prefix); fills family/bytes/prefix for matching. */
typedef struct {
    int family; /* 0 = no range */
    uint8_t addr[16];
    int prefix;
} rcoll_vrb_range_t;
rcoll_status_t rcoll_vrb_parse_range(const char *text, rcoll_vrb_range_t *r);
/* Index into entries[0..n) of the best GID for RoCE: non-zero, inside range (required), RoCE
 * v2 over v1, family (AF_INET/AF_INET6) preferred, not link-local preferred.  -1 if none; why
 * gets a short reason either way. */
int rcoll_vrb_gid_pick(const struct ibv_gid_entry *entries, int n, int family,
                      const rcoll_vrb_range_t *range, char *why, size_t why_len);
/* "10.0.0.1" for IPv4-mapped GIDs, else the IPv6 text. */
const char *rcoll_vrb_gid_str(const uint8_t gid[16], char *buf, size_t len);
const char *rcoll_vrb_gid_type_str(int type);
int rcoll_vrb_speed_mbps(const struct ibv_port_attr *attr);

/* The GID new connections on d use, read again from the port each time: when the port's
 * table no longer holds it there (a port flap gave the interface new addresses) the choice is
 * made again, said once at WARN; RCOLL_ERR_UNSUPPORTED when nothing usable is left. */
rcoll_status_t rcoll_vrb_dev_gid(rcoll_vrb_dev_t *d, union ibv_gid *gid, int *index, int *type);
/* Port i's valid GID table entries (rcoll-info). */
int rcoll_vrb_dev_gids(int i, struct ibv_gid_entry *out, int max);
/* The ports in use (after init). */
int rcoll_vrb_ndevs(void);
rcoll_vrb_dev_t *rcoll_vrb_dev(int i);
/* Read pending async events of every device, failing what they concern; cheap when none. */
void rcoll_vrb_poll_async(void);
extern const rcoll_vrb_config_t *rcoll_vrb_cfg; /* the knobs init() was given */
#ifdef RCOLL_TEST_HOOKS
/* Test hook (test build of the transport layer only): receive WRs pre-posted per QP of new
 * receive comms (0 = enough for every advertised message).  The conformance test lowers it
 * to provoke receiver-not-ready. */
extern int rcoll_vrb_test_rq_depth;
#endif

/* ---- GPUDirect RDMA: what a device can register of CUDA memory (verbs_mr.c) ---- */
enum { RCOLL_VRB_GDR_DMABUF = 1, RCOLL_VRB_GDR_PEERMEM = 2 }; /* registration methods */
typedef struct {
    int dmabuf;       /* the device's kernel driver registers dma-bufs */
    int dmabuf_errno; /* what ibv_reg_dmabuf_mr(fd -1) said: EBADF = supported; 0 = no verb */
    int peermem;      /* a peer-memory client for NVIDIA GPUs is loaded (nvidia-peermem) */
} rcoll_vrb_gdr_probe_t;
/* Probe the device of pd once: ibv_reg_dmabuf_mr with fd -1 fails with EOPNOTSUPP (or
 * EPROTONOSUPPORT) where the kernel driver has no dma-buf support, with EBADF where it has;
 * and the sysfs entries of nvidia-peermem / nv_peer_mem. */
void rcoll_vrb_gdr_probe(struct ibv_pd *pd, rcoll_vrb_gdr_probe_t *out);
/* The methods (RCOLL_VRB_GDR_* mask) RCOLL_IB_GDR=mode allows on device dev given the probe,
 * in the order they are tried (dma-buf first).  why (may be NULL) gets one sentence either
 * way: the methods, or why there are none ("rxe0 registers no CUDA memory: its driver takes
 * no dma-buf (Operation not supported) and nvidia-peermem is not loaded").  Pure. */
int rcoll_vrb_gdr_methods(const rcoll_vrb_gdr_probe_t *p, int mode, const char *dev, char *why,
                         size_t len);

/* ---- memory registration cache (verbs_mr.c) ---- */
typedef struct rcoll_vrb_mr rcoll_vrb_mr_t; /* one registration, page-rounded, ref-counted */
struct rcoll_vrb_mr {
    rcoll_vrb_mr_t *next;
    struct rcoll_vrb_mr_cache *cache; /* the device cache it belongs to */
    struct rcoll_vrb_mr *alt; /* the same pages on the device a moved comm uses (failover):
                               * made at its first use there, held until this one goes */
    uintptr_t start, end; /* registered pages [start, end) */
    struct ibv_mr *mr;
    int refs;
    int mem_type; /* RCOLL_PTR_HOST or RCOLL_PTR_CUDA */
    int method;   /* CUDA memory: the RCOLL_VRB_GDR_* it was registered by */
    unsigned long long buffer_id; /* CUDA memory: its allocation's driver buffer id (0: none
                                   * known; shared only by lookups that knew none either) */
    int cached;   /* kept after its last reference (one of RCOLL_IB_MR_CACHE entries) */
    int stale;    /* another allocation lies there now: never found again, deregistered with
                   * its last reference */
    uint64_t used; /* the cache's clock at its last get or put (least recently used goes) */
};
typedef struct rcoll_vrb_mr_cache rcoll_vrb_mr_cache_t;
/* The cache of device `name` (for messages), whose GPUDirect RDMA probe it runs now; it keeps
 * up to RCOLL_IB_MR_CACHE registrations of CUDA memory after their last reference. */
rcoll_vrb_mr_cache_t *rcoll_vrb_mr_cache_new(struct ibv_pd *pd, const char *name);
void rcoll_vrb_mr_cache_free(rcoll_vrb_mr_cache_t *c); /* deregisters what is left */
/* A registration covering [addr, addr+len) (a new or a cached one, reference taken).  CUDA
 * memory (RCOLL_PTR_CUDA) by the methods RCOLL_IB_GDR allows (rcoll_vrb_gdr_methods), dma-buf
 * first; RCOLL_ERR_UNSUPPORTED with the sentence where none is allowed, RCOLL_ERR_SYSTEM with
 * every method's failure where all failed.  The first CUDA registration of a device logs its
 * method at INFO.
 * CUDA memory the driver knows, in a page-aligned allocation, is registered whole and kept
 * after its last reference (cached, up to RCOLL_IB_MR_CACHE per device, least recently used
 * idle ones replaced first): every get asks the driver for the allocation's buffer id (one
 * cuPointerGetAttributes) and uses an entry only when the ids match; an entry whose
 * allocation was freed and its range reused is deregistered, never used.  Everything else
 * (host memory, CUDA memory the driver does not know or that shares its pages, and CUDA
 * memory while every cache entry is in use) is deregistered with its last reference. */
rcoll_status_t rcoll_vrb_mr_get(rcoll_vrb_mr_cache_t *c, const void *addr, size_t len,
                               int mem_type, rcoll_vrb_mr_t **out);
/* A registration on cache c of the pages of m, which another device's cache holds (a comm
 * that moved, verbs_move.c): m's copy there, made at the first call and kept with m (reference
 * taken either way). */
rcoll_status_t rcoll_vrb_mr_on(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m, rcoll_vrb_mr_t **out);
/* Another reference to m (an mhandle passed to isend/irecv). */
void rcoll_vrb_mr_ref(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m);
void rcoll_vrb_mr_put(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m);
/* The methods of the cache's device under the current RCOLL_IB_GDR, as
 * rcoll_vrb_gdr_methods. */
int rcoll_vrb_mr_gdr(const rcoll_vrb_mr_cache_t *c, char *why, size_t len);
int rcoll_vrb_mr_count(const rcoll_vrb_mr_cache_t *c);  /* live registrations (tests) */
int rcoll_vrb_mr_cached(const rcoll_vrb_mr_cache_t *c); /* of them, cache entries (tests) */

/* ---- connections (verbs_conn.c) and data path (verbs_data.c) ---- */
typedef struct rcoll_vrb_comm rcoll_vrb_comm_t;
typedef struct rcoll_vrb_req rcoll_vrb_req_t;

struct rcoll_vrb_req {
    rcoll_vrb_comm_t *comm;
    int used;
    int is_recv;
    int is_flush;            /* an iflush: its RDMA read completes it */
    int n;                   /* messages (recv) / 1 (send) / 1 (flush) */
    int left;                /* messages not complete (recv) / QP completions missing (send) */
    size_t size[RCOLL_TRANSPORT_MAX_RECVS];  /* posted or sent sizes */
    size_t got[RCOLL_TRANSPORT_MAX_RECVS];   /* received bytes so far */
    int parts[RCOLL_TRANSPORT_MAX_RECVS];    /* immediates seen per message */
    rcoll_vrb_mr_t *mr[RCOLL_TRANSPORT_MAX_RECVS]; /* cache references held (NULL: none) */
    /* send, failover: what a resend after a move needs */
    const char *data;
    int tag;
    int may_inline;
    int replaying;    /* written again after a move: not yet posted */
    uint64_t msg;     /* its message number on the connection */
    void *rbuf[RCOLL_TRANSPORT_MAX_RECVS]; /* recv: the buffers, advertised again after one */
    int rtag[RCOLL_TRANSPORT_MAX_RECVS];
};

/* Receiver's bookkeeping of one advertised message (ring indexed by message number). */
typedef struct {
    rcoll_vrb_req_t *req;
    int entry;
} rcoll_vrb_pending_t;

struct rcoll_vrb_comm {
    int is_recv;
    rcoll_vrb_dev_t *dev;
    int gid_index;          /* of dev's port, read at setup (rcoll_vrb_dev_gid) */
    int fd;                 /* TCP socket of the setup, kept to notice a vanished peer */
    int nqps;
    struct ibv_qp *qp[RCOLL_VRB_MAX_QPS];
    struct ibv_cq *cq;
    int sq_depth;
    uint32_t max_inline;    /* inline bytes every QP of the comm accepts */
    int sq_used[RCOLL_VRB_MAX_QPS]; /* send WRs posted and not yet retired by a completion */
    rcoll_vrb_meta_t local, remote;
    /* FIFO: the sender owns fifo[] (remote-writable); the receiver writes from shadow[] */
    rcoll_vrb_fifo_slot_t *fifo;
    struct ibv_mr *fifo_mr;
    uint64_t slot_seq;       /* sender: seq of the slot now consumed (1-based); receiver: last posted */
    int slot_entry;          /* sender: next entry within it */
    int unsignaled;          /* receiver: FIFO writes since the last signaled one */
    /* receiver: messages advertised (total) and immediates seen per QP */
    uint64_t msgs_posted;
    uint64_t imm_seen[RCOLL_VRB_MAX_QPS];
    rcoll_vrb_pending_t ring[RCOLL_VRB_MSG_RING];
    int outstanding;         /* requests in use */
    rcoll_vrb_req_t reqs[RCOLL_VRB_MAX_REQS];
    rcoll_status_t failed;   /* first error (0 = healthy) and its text */
    char fail_text[RCOLL_ERR_TEXT_MAX];
    unsigned idle_polls;
    /* receiver of CUDA memory: a QP connected to itself whose RDMA reads of received data
     * (iflush) make the NIC's earlier writes visible to the GPU; made at the first flush */
    struct ibv_qp *flush_qp;
    struct ibv_cq *flush_cq;
    struct ibv_mr *flush_mr;
    char *flush_buf;
    rcoll_vrb_comm_t *next_live; /* list of live comms (async events find theirs here) */
    /* failover (verbs_move.c): both ends set RCOLL_VRB_CAP_FAILOVER */
    int fo;
    int home, devi;          /* port index it was made on, and the one it is on */
    uint64_t msgs_sent;      /* send: messages posted (the next one's number) */
    uint64_t replay_next;    /* send: next message to post again after a move (< msgs_sent) */
    int replay;              /* send: messages wait to be posted again */
    volatile int lost;       /* its path died (event, error completion): move */
    char lost_text[192];
    int mv_state;            /* 0 connected; send 1 waiting for ACK; recv 1 waiting for GO */
    int mv_back;
    uint32_t rounds;         /* moves done */
    uint64_t mv_deadline_ns, fb_next_ns, fb_up_ns, mv_look_ns;
    uint64_t lost_ns;        /* when this end saw the loss (or the move began): 0 none */
    uint64_t lost_round;     /* recv: rounds + 1 once LOST was sent for this round */
    uint64_t mv_done;        /* recv: messages whole when the move began */
    int mv_from;             /* port index the move left */
    unsigned mv_polls;
    size_t mv_got;           /* bytes of mv_in read */
    rcoll_vrb_move_t mv_in;
};

/* Build the QPs, CQ and FIFO of a comm on dev (state INIT), fill c->local. */
rcoll_status_t rcoll_vrb_comm_setup(rcoll_vrb_comm_t *c, rcoll_vrb_dev_t *dev, int is_recv,
                                   int nqps, uint64_t nonce);
/* Tries of a QP's move to RTR that the kernel's address resolution timed out (1 s each). */
#define RCOLL_VRB_RTR_TRIES 5
/* Move every QP to RTR and RTS towards c->remote. */
rcoll_status_t rcoll_vrb_comm_connect_qps(rcoll_vrb_comm_t *c);
/* The checks of what a peer sent, apart from the sockets, so that tests/fuzz can feed them
 * any bytes.  Each returns why it is unacceptable, or NULL. */
/* A connection record for the listener of this nonce (want_nqps: the QP count it must have,
 * 0 for any).  Terminates its device name (m->dev), which the peer may not have. */
const char *rcoll_vrb_meta_check(rcoll_vrb_meta_t *m, uint64_t nonce, int want_nqps);
/* A connect handle. */
const char *rcoll_vrb_handle_check(const rcoll_vrb_handle_t *h);
/* The flush QP of a receive comm (connected to itself) with its CQ and landing buffer. */
rcoll_status_t rcoll_vrb_flush_setup(rcoll_vrb_comm_t *c);
/* Post the receive WRs that immediates consume (receiver, before RTR). */
rcoll_status_t rcoll_vrb_post_recvs(rcoll_vrb_comm_t *c, int qi, int count);
void rcoll_vrb_comm_destroy(rcoll_vrb_comm_t *c);
/* Record the comm's first error (later ones keep it); returns its status. */
rcoll_status_t rcoll_vrb_comm_fail(rcoll_vrb_comm_t *c, rcoll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* What a comm needs on one port: CQ, QPs in INIT (receive WRs posted on a receiver's), the
 * FIFO, and c->local (for nonce); sets c->dev.  rcoll_vrb_comm_setup is this and more. */
rcoll_status_t rcoll_vrb_comm_build(rcoll_vrb_comm_t *c, rcoll_vrb_dev_t *dev, uint64_t nonce);
/* Destroy what rcoll_vrb_comm_build made (and the flush QP): the comm keeps its requests. */
void rcoll_vrb_comm_unbuild(rcoll_vrb_comm_t *c);
/* Failover (verbs_move.c).  Whether new connections offer it (RCOLL_IB_FAILOVER). */
int rcoll_vrb_failover_offered(void);
/* Advance a failover comm's move (started by c->lost, a record on its socket, or its home
 * port active again); RCOLL_OK while it moves or when there is none, an error when it cannot
 * move (the comm failed).  Cheap when nothing happens. */
rcoll_status_t rcoll_vrb_move_progress(rcoll_vrb_comm_t *c);
/* The data path's part of a move (verbs_data.c): receiver, after the sender's go: advertise
 * again every buffer from message `done` on; sender, before the go: requests of messages
 * below done complete, the others wait to be posted again. */
rcoll_status_t rcoll_vrb_readvertise(rcoll_vrb_comm_t *c, uint64_t from);
uint64_t rcoll_vrb_recv_done(rcoll_vrb_comm_t *c); /* receiver: messages whole; resets the rest */
/* A completion polled from the CQ of QPs being left: successes counted, errors ignored. */
void rcoll_vrb_count_completion(rcoll_vrb_comm_t *c, const struct ibv_wc *wc);
void rcoll_vrb_send_rewind(rcoll_vrb_comm_t *c, uint64_t done);
void rcoll_vrb_live_add(rcoll_vrb_comm_t *c);
void rcoll_vrb_live_remove(rcoll_vrb_comm_t *c);
/* Fail every live comm on dev (port/device events) or owning qp (QP events). */
void rcoll_vrb_fail_matching(const rcoll_vrb_dev_t *dev, const struct ibv_qp *qp,
                            const char *what);

rcoll_status_t rcoll_vrb_listen(int dev, void *handle, void **listen_comm);
rcoll_status_t rcoll_vrb_connect(int dev, const void *handle, void **send_comm);
rcoll_status_t rcoll_vrb_accept(void *listen_comm, void **recv_comm);
rcoll_status_t rcoll_vrb_close_listen(void *listen_comm);
void rcoll_vrb_conn_fini(void);

rcoll_status_t rcoll_vrb_reg_mr(void *comm, void *data, size_t size, int mem_type,
                               void **mhandle);
rcoll_status_t rcoll_vrb_dereg_mr(void *comm, void *mhandle);
rcoll_status_t rcoll_vrb_isend(void *send_comm, void *data, size_t size, int tag,
                              void *mhandle, void **request);
rcoll_status_t rcoll_vrb_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **request);
rcoll_status_t rcoll_vrb_iflush(void *recv_comm, int n, void **data, int *sizes,
                               void **mhandles, void **request);
rcoll_status_t rcoll_vrb_test(void *request, int *done, size_t *sizes);
/* A failover connection's own work while the core waits on something else (transport.h
 * poke): its move (or its peer's), the messages it writes again after one, its
 * completions. */
void rcoll_vrb_poke(void *comm);
rcoll_status_t rcoll_vrb_close_comm(void *comm);

#endif
