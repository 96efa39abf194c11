/*
 * comm.h - the communicator and request objects: where bootstrap, transports and algorithms
 * meet.  Only core/ includes this.
 */
#ifndef RCOLL_CORE_COMM_H
#define RCOLL_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "algo/algo.h"
#include "algo/select.h"
#include "util/bell.h"
#include "util/shmseg.h"
#include "core/bootstrap.h"
#include "rcoll.h"
#include "transport/transport.h"
#include "core/config.h"
#include "core/sig.h"

#define RCOLL_LAST_ERROR_MAX 640
#define RCOLL_WDOG_REPORT_MAX 1024
/* Point-to-point messages longer than this travel in pieces of it (or of less, where a
 * transport's device carries less: props.max_msg_size), so no transport sees more than it
 * carries (verbs: 2 GiB - 1, an NCCL net plugin: its maxP2pBytes). */
#define RCOLL_P2P_PIECE ((size_t)1 << 30)

typedef enum {
    RCOLL_OP_ALLREDUCE,
    RCOLL_OP_BCAST,
    RCOLL_OP_BARRIER,
    RCOLL_OP_REDUCE,
    RCOLL_OP_ALLGATHER,
    RCOLL_OP_REDUCE_SCATTER,
    RCOLL_OP_ALLTOALL,
    RCOLL_OP_P2P, /* a batch of sends and receives (one call, or a group) */
    /* rooted and uneven collectives (api_v.c) */
    RCOLL_OP_GATHER,
    RCOLL_OP_SCATTER,
    RCOLL_OP_ALLGATHERV,
    RCOLL_OP_ALLTOALLV,
    RCOLL_OP_REDUCE_SCATTERV
} rcoll_op_kind_t;

/* The count and displacement arrays of an uneven collective, as the request keeps them. */
enum { RCOLL_V_COUNT, RCOLL_V_DISPL, RCOLL_V_RCOUNT, RCOLL_V_RDISPL, RCOLL_V_NUM };

/* One send or receive of a point-to-point batch. */
typedef struct {
    int is_send;
    int peer;
    void *buf;
    size_t bytes;
    int tag;
    void *treq;   /* transport request while in flight */
    int posted, done;
    size_t off, cur; /* bytes done; bytes of the piece in flight (core/progress.c) */
    /* GPUDirect RDMA (rcoll_comm_gdr_ok): buf is device memory the transport moves itself,
     * registered (mh) when first posted; a receive is flushed (flushing) before it is done */
    int gdr, flushing;
    void *mh;
} rcoll_p2p_item_t;

typedef struct rcoll_conn_state rcoll_conn_state_t;

/* The communicators created from one communicator by split/dup (and it): they share the
 * bootstrap control connection, and a wait on one progresses all, so operations running
 * concurrently on parent and child cannot wait on each other forever. */
typedef struct rcoll_family {
    int refs;
    struct rcoll_comm *first;
} rcoll_family_t;

struct rcoll_request;
/* A request's post-step (its field post, below). */
typedef rcoll_status_t (*rcoll_req_post_fn)(struct rcoll_request *r, rcoll_status_t st, int copy);

struct rcoll_request {
    struct rcoll_comm *comm;
    struct rcoll_request *next; /* in the communicator's queue, or the free list */
    rcoll_op_kind_t kind;
    const void *src;
    void *dst;
    size_t count;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    int root;
    int started;
    int complete;
    rcoll_status_t preset; /* complete with this status instead of running (invalid group) */
    rcoll_status_t status;
    uint64_t seq;
    uint64_t last_progress_ns; /* when progress was last seen; 0: since the last clock reading */
    const rcoll_algo_ops_t *alg; /* what runs it once started (not P2P): an all-reduce
                                  * algorithm, or rcoll_algo_sched for a schedule */
    int alg_id;              /* the all-reduce algorithm (rcoll_allreduce_alg_t), -1: none */
    rcoll_sig_t sig;         /* what this rank called (set at start; core/sig.h) */
    int stall_sent;          /* its signature went to the root after a long wait */
    int wdog_sent;           /* the watchdog reported this operation (once per operation) */
    rcoll_algo_op_t aop;     /* its state; waiting_peer/err_peer also for P2P */
    uint8_t barrier_buf[64]; /* barrier payload: one byte per rank, up to 64 ranks */
    uint8_t *barrier_heap;   /* barrier payload for larger communicators */
    int connecting;          /* waiting for connections to the op's peers */
    int held;                /* part of an open group: not started before rcoll_group_end */
    rcoll_p2p_item_t *items; /* RCOLL_OP_P2P */
    int nitems, cap_items;
    int unposted;            /* items the transport has not taken yet */
    /* Uneven collectives: copies of the caller's arrays ([nranks] each, NULL where unused;
     * all-gather-v: recvcounts, displs; all-to-all-v: sendcounts, sdispls, recvcounts,
     * rdispls; reduce-scatter-v: recvcounts and their prefix sums), in vbuf (kept with the
     * request for its next use). */
    const size_t *v[RCOLL_V_NUM];
    size_t *vbuf;
    size_t vcap;             /* elements vbuf holds */
    size_t vmove;            /* reduce-scatter-v in place: the result is computed at dst +
                              * vmove elements and moved to dst at the end (0: none) */
    /* The plan's post-step (core/plan.h), or NULL: what the route that queued the request
     * does once its completion is seen, before its status is returned (rcoll_req_finish; a
     * staged call copies its outputs to the device, api_stage.c).  copy 0: the request is
     * released without being finished (rcoll_req_release): free what the step holds, copy
     * nothing.  stage_job: what the staging route's step works on. */
    rcoll_req_post_fn post;
    struct rcoll_stage_job *stage_job;
};

struct rcoll_comm {
    int rank, nranks;
    _Atomic int in_use;              /* a thread is inside a call on it (api.c comm_enter) */
    const char *_Atomic in_use_fn;   /* ... that call's name, for the refusal's sentence */
    /* The thread holding in_use for rcoll_group_end (rcoll_thread_token), else NULL: that
     * thread may still progress it as a sibling while it waits on another of the group's
     * communicators (progress.c). */
    const void *_Atomic in_use_owner;
    rcoll_config_t cfg;
    /* Transports this rank listens on (index = registry position; NULL where unusable). */
    const rcoll_transport_ops_t *tps[RCOLL_MAX_TRANSPORTS];
    void *listen_comms[RCOLL_MAX_TRANSPORTS];
    int dev[RCOLL_MAX_TRANSPORTS]; /* device of each transport (nearest the GPU, or by rank) */
    /* GPUDirect RDMA verdicts for point-to-point (rcoll_comm_gdr_ok), per transport: the GPU
     * (bus id) last decided for, and the verdict (0 staged, 1 direct); "" = none yet */
    char gdr_bus[RCOLL_MAX_TRANSPORTS][32];
    int gdr_ok[RCOLL_MAX_TRANSPORTS];
    char tp_why[RCOLL_MAX_TRANSPORTS][160]; /* why a transport is not used here ("" = it is) */
    rcoll_peer_info_t *peers;
    rcoll_bootstrap_t *bs;
    rcoll_bs_root_t *root; /* the root thread this rank hosts (environment launch), or NULL */
    rcoll_bs_root_t *grow_root; /* rcoll_comm_grow_id's root, until the grow (grow.c) */
    rcoll_unique_id_t grow_id;  /* its id */

    uint64_t ctx;          /* communicator id, equal on all its ranks */
    rcoll_conn_state_t *conn;
    uint32_t *p2p_send_seq, *p2p_recv_seq; /* [nranks] point-to-point messages so far */
    /* [nranks] the largest piece of a point-to-point message to each peer: RCOLL_P2P_PIECE at
     * most, and no more than either end's device of their transport carries (both ends
     * compute the same value from the rank table) */
    size_t *p2p_piece;
    uint64_t coll_seq;     /* collectives issued so far (their signatures' numbers) */
    rcoll_opnum_t opnum;   /* how coll_seq numbers read in sentences (core/sig.h) */
    char *sig_area;        /* signature announcements in the host segment, or NULL */
    char *ipc_area;        /* per rank, 64 bytes: its CUDA IPC mappings closed (api_ipc.c) */
    struct rcoll_request *open_group; /* P2P batch collecting the current group's calls */
    int local_ranks;       /* ranks on this host (same host identity) */
    uint32_t nsplits;      /* children made so far (part of their ids) */
    rcoll_family_t *family;
    struct rcoll_comm *fam_next, *fam_prev;
    int next, prev;        /* ring neighbours */
    /* Hosts: ranks grouped by host identity (hosts in order of their lowest rank).  The
     * all-reduce schedules run on ring positions: ring_map[pos] = rank, host-grouped so a
     * ring crosses each host boundary once per direction (NULL when that is rank order). */
    int nhosts;
    int *host_of;          /* [nranks] each rank's host index (rcoll_comm_host) */
    int ppn;               /* ranks per host when every host has as many, else 0 */
    int *ring_map;
    int ring_pos;          /* this rank's ring position */
    int *local_group;      /* [ppn] this host's ranks, ascending (when ppn > 1 and hosts > 1) */
    int *cross_group;      /* [nhosts] the ranks with this rank's local index, host order */
    int local_idx, cross_idx;
    rcoll_link_t link;     /* connections to its peers (made on first use) */
    rcoll_shmseg_t hostseg; /* one- and two-shot all-reduce areas when every rank is on this host */
    rcoll_tuning_t tuning;  /* cost model for choosing algorithms */
    rcoll_tuning_t tuning_conf; /* the configured constants (defaults or RCOLL_TUNING_FILE),
                                 * before the probe: what the pipeline chunks are cut by */
    int all_shm;            /* every peer is reached over shared memory */
    int bs_ranks;           /* rank r is member r of the bootstrap (not a reordering split) */
    int32_t *bs_of;         /* [nranks] each rank's member number in the bootstrap (the job's
                             * first numbering, in which failures are named) */
    uint32_t nshrinks;      /* rcoll_comm_shrink calls on it (the root tells them apart) */
    int probe_alg;          /* >= 0: the tuning probe forces this all-reduce algorithm */
    size_t chunk_bytes;
    rcoll_algo_ctx_t algo;  /* what the all-reduce algorithms know of this communicator */

    struct rcoll_request *head, *tail; /* queued operations, in issue order */
    struct rcoll_request *free_reqs;
    uint64_t next_seq;
    uint64_t last_ctl_poll_ns;
    uint64_t last_poke_ns;  /* the connections' transport poke (rcoll_conn_poke) */
    uint32_t polls_since_clock; /* fruitless polls since the clock was last read */
    /* Doorbells (util/bell.h, comm.c setup_bells): this process's, and those of the ranks on
     * this host that may sleep (other ranks only: not this rank's own process bell), rung after
     * a progress pass that moved anything.  sleeps: this rank sleeps on its bell in long waits
     * (RCOLL_WAIT resolved, every peer on this host and every bell attached). */
    rcoll_bell_t *bell_self;
    rcoll_bell_t **bells;
    int nbells;
    int sleeps;
    /* RCOLL_RAS=1: this communicator's record for the process's status socket (core/ras.h),
     * else NULL. */
    struct rcoll_ras_rec *ras;
    /* rcoll_comm_revoke: set (release) by the revoking thread after revoke_text; a waiting
     * thread fails its operations at its next control poll, later calls are refused. */
    _Atomic int revoked;
    int suspended; /* rcoll_comm_suspend: its connections and staging are freed (suspend.c) */
    uint32_t conn_epoch; /* suspensions so far: every connection's hello carries it (conn.c) */
    void **early_comms;  /* [nranks] connections of the next epoch accepted before this rank */
    const rcoll_transport_ops_t **early_tps; /* closed its own: adopted at its resume */
    uint32_t early_epoch; /* theirs: adopted only once conn_epoch reaches it (a peer can
                           * resume while this rank is still in suspend's barrier) */
    char revoke_text[256];

    rcoll_status_t failed; /* first failure, or RCOLL_OK */
    size_t mem_bytes;
    size_t mem_staging, mem_hostseg; /* parts of mem_bytes (rcoll_comm_mem_stats) */
    /* Its creation by rcoll_comm_init_* (rcoll_comm_setup_stats; 0 for other communicators):
     * this rank's wall time in the call, and the critical-path clock at its end (util/cpath.h). */
    double setup_wall_s, setup_path_s;
    /* Pinned host memory for staging device buffers (cuda/gpu.h; made at the first call with
     * device buffers, freed by rcoll_comm_free), or NULL. */
    struct rcoll_gpu_stage *gpu_stage;
    struct rcoll_gpu_pinned *gpu_pinned; /* what its staging areas hold, bounded (api_stage.c) */
    /* The CUDA IPC all-reduce (api_ipc.c): the workspaces (NULL until its first call), the
     * state (0 not tried yet, 1 in use, -1 not usable: staging), the half the next piece
     * uses. */
    struct rcoll_gpu_ipc *gpu_ipc;
    /* Pipelined staging's streams and events (api_stage.c, RCOLL_STAGE_CHUNK), or NULL. */
    struct rcoll_gpu_pipe *gpu_pipe;
    int gpu_ipc_state, gpu_ipc_half;
    size_t gpu_ipc_bytes; /* of every workspace used: the smallest rank's */
    /* The one-kernel all-reduce (cuda/oneshot.h): up to this many bytes, its two-shot form up
     * to that many (agreed; 0 never),
     * the offset of the pieces' halves in every workspace (after the header and the two
     * slots), calls made so far (their parity picks the slot). */
    size_t gpu_ipc_oneshot, gpu_ipc_twoshot, gpu_ipc_off;
    uint64_t gpu_ipc_oneshots;
    /* the stream-ordered one-kernel calls not yet reaped (api_ipc.c), in ring order from
     * ipc_fl_head */
    struct rcoll_ipc_inflight *ipc_fl;
    int ipc_fl_busy, ipc_fl_head, ipc_fl_waiting;
    /* The nonblocking calls' staging areas, one per call in flight, kept for reuse (api_stage.c);
     * freed by rcoll_comm_free. */
    struct rcoll_stage_job *stage_jobs;
    /* Stream-ordered calls (api_stream.c): their jobs (one per call whose work has not all
     * run, kept for reuse; freed by rcoll_comm_free), the flag of the thread enqueuing one,
     * how many jobs are not done yet (other calls are refused meanwhile; destroy waits for
     * 0), calls enqueued so far, and abort's "run nothing more". */
    struct rcoll_stream_job *stream_jobs;
    _Atomic int stream_busy;
    _Atomic long stream_pending;
    uint64_t stream_seq;
    _Atomic int stream_abort;
    /* The progress thread (RCOLL_PROGRESS_THREAD; progress.c).  When it runs, pt_lock guards
     * the queue and every per-operation state: the thread holds it while it progresses, an
     * API call from comm_enter to comm_leave, rcoll_test/rcoll_wait while they look. */
    int pt_on;
    int pt_stop;              /* under pt_lock: the thread must end */
    _Atomic int pt_waiters;   /* threads inside rcoll_wait: they progress, the thread rests */
    pthread_t pt;
    pthread_mutex_t pt_lock;
    pthread_cond_t pt_cv;     /* signalled when work is queued, a waiter leaves, or stop */
    pthread_cond_t pt_done_cv; /* broadcast by the thread when it completed something */
    int pt_sleepers;          /* under pt_lock: waiters asleep on pt_done_cv */
    char last_error[RCOLL_LAST_ERROR_MAX];
    /* The watchdog's latest report ("" = none; progress.c), and the copy the accessor hands
     * out (the progress thread may write the report meanwhile). */
    char wdog_report[RCOLL_WDOG_REPORT_MAX];
    char wdog_copy[RCOLL_WDOG_REPORT_MAX];
    /* (Last, away from the fields every call touches.)  What the routes above the communicator attach to it (CUDA IPC workspaces, api_ipc.c;
     * staging and stream jobs, api_stage.c and api_stream.c), each freed by rcoll_comm_free
     * through the function its owner set when it first attached it (NULL: nothing attached):
     * the IPC workspaces before the host segment goes (it says when peers unmapped them),
     * the jobs after the transports (nothing writes their areas then). */
    void (*release_ipc)(rcoll_comm_t comm, int graceful);
    void (*free_stage_jobs)(rcoll_comm_t comm);
    void (*free_stream_jobs)(rcoll_comm_t comm);
};

/* handles.c: the live communicators (registered when they join a family, at the end of
 * their creation; unregistered when they leave it, at the start of their destruction). */
rcoll_status_t rcoll_comm_register(struct rcoll_comm *c);
void rcoll_comm_unregister(struct rcoll_comm *c);
int rcoll_comm_is_live(const struct rcoll_comm *c);

/* comm.c */
/* Join comm to a family (NULL: start a new one); this makes its handle valid. */
rcoll_status_t rcoll_family_join(rcoll_comm_t comm, rcoll_family_t *family);
rcoll_status_t rcoll_comm_create(int nranks, const rcoll_unique_id_t *id, int rank,
                                 const rcoll_config_t *cfg, rcoll_bs_root_t *root,
                                 rcoll_comm_t *comm_p);
void rcoll_comm_free(rcoll_comm_t comm, int graceful);
/* c takes over the transports and listening endpoints of probe, a one-rank communicator that
 * listened for it (split and shrink publish probe's handles before c exists); frees probe. */
void rcoll_comm_take_listeners(rcoll_comm_t c, rcoll_comm_t probe);
/* Pieces of communicator creation, shared with rcoll_comm_split (split.c): allocate the
 * object; pick the transport and listen (writes this rank's handle); connect to the ring
 * neighbours and tree links and allocate the staging memory. */
rcoll_status_t rcoll_comm_alloc(int nranks, int rank, const rcoll_config_t *cfg,
                                rcoll_comm_t *comm_p);
rcoll_status_t rcoll_comm_listen(rcoll_comm_t comm, rcoll_peer_info_t *mine);
rcoll_status_t rcoll_comm_links(rcoll_comm_t comm, uint64_t deadline);
/* The connection part of rcoll_comm_links (its transports per peer, the ring, doubling and
 * tree connections, the staging memory and its registration): also rcoll_comm_resume's. */
rcoll_status_t rcoll_comm_open_links(rcoll_comm_t comm, uint64_t deadline);
/* split.c: the split itself, arguments checked (color < 0: RCOLL_UNDEFINED, *newcomm NULL). */
rcoll_status_t rcoll_comm_split_run(rcoll_comm_t comm, int color, int key,
                                    rcoll_comm_t *newcomm);
/* shrink.c: rcoll_comm_shrink, arguments checked (*newcomm NULL on failure). */
rcoll_status_t rcoll_comm_shrink_run(rcoll_comm_t comm, int flags, rcoll_comm_t *newcomm);
/* grow.c: rcoll_comm_grow_id and a member's rcoll_comm_grow, arguments checked (*newcomm
 * NULL on failure); rcoll_comm_grow_drop: the communicator goes (destroy, abort) while
 * holding an unused grow id (the new ranks that got it fail at once, saying so). */
rcoll_status_t rcoll_comm_grow_id_run(rcoll_comm_t comm, rcoll_unique_id_t *id);
rcoll_status_t rcoll_comm_grow_run(rcoll_comm_t comm, int nranks, rcoll_comm_t *newcomm);
void rcoll_comm_grow_drop(rcoll_comm_t comm);
/* suspend.c: rcoll_comm_suspend / rcoll_comm_resume, arguments checked. */
rcoll_status_t rcoll_comm_suspend_run(rcoll_comm_t comm);
rcoll_status_t rcoll_comm_resume_run(rcoll_comm_t comm);
/* probe.c: measure the cost model's constants (RCOLL_TUNING_PROBE). */
rcoll_status_t rcoll_comm_probe(rcoll_comm_t comm);
/* Record text as the communicator's last error (and log it at WARN). */
void rcoll_comm_set_error(rcoll_comm_t comm, rcoll_status_t st, const char *text);
/* "rank 3 (host pid 1234)" */
const char *rcoll_comm_peer_name(rcoll_comm_t comm, int rank, char *buf, size_t len);
/* May a point-to-point message of bytes at device memory buf (cuMemAlloc memory) to or from
 * peer go straight between the GPU and the network (GPUDirect RDMA) instead of being staged?
 * Yes when the peer is on another host, the transport to it registers CUDA memory on this
 * rank's device of it, the topology puts that device within RCOLL_NET_GDR_LEVEL of buf's
 * GPU, and the whole host pages the message touches lie inside buf's allocation (a
 * registration covers whole pages).  The verdict is kept per transport and GPU, and logged
 * at INFO when first made. */
int rcoll_comm_gdr_ok(rcoll_comm_t comm, int peer, const void *buf, size_t bytes);
/* A GPUDirect registration failed on transport tp (why): later messages over it are staged
 * (logged once at WARN). */
void rcoll_comm_gdr_failed(rcoll_comm_t comm, const rcoll_transport_ops_t *tp, const char *why);

/* conn.c */
rcoll_status_t rcoll_conn_init(rcoll_comm_t comm);
void rcoll_conn_fini(rcoll_comm_t comm);
/* Close the connections kept for the next epoch (rcoll_comm_free). */
void rcoll_conn_drop_early(rcoll_comm_t comm);
/* Mark peer p as needed for sending and/or receiving. */
void rcoll_conn_want(rcoll_comm_t comm, int p, int send, int recv);
/* Non-blocking: connect wanted peers, accept and identify incoming connections. */
rcoll_status_t rcoll_conn_progress(rcoll_comm_t comm);
/* Each connection whose transport has a poke (transport.h): called every
 * RCOLL_CONN_POKE_NS while an operation waits. */
#define RCOLL_CONN_POKE_NS 5000000ull
void rcoll_conn_poke(rcoll_comm_t comm);
int rcoll_conn_missing(rcoll_comm_t comm);
int rcoll_conn_first_missing(rcoll_comm_t comm);
/* Blocking until every wanted connection exists (communicator creation). */
rcoll_status_t rcoll_conn_wait(rcoll_comm_t comm, uint64_t deadline_ns);

/* progress.c */
rcoll_status_t rcoll_req_alloc(rcoll_comm_t comm, rcoll_op_kind_t kind,
                               struct rcoll_request **req_p);
/* What a collective queues: its kind, buffers, count, datatype, op and root. */
typedef struct {
    rcoll_op_kind_t kind;
    const void *src;
    void *dst;
    size_t count;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    int root;
} rcoll_coll_args_t;
/* A request for the collective a (allocated as rcoll_req_alloc, then filled from a). */
rcoll_status_t rcoll_req_alloc_coll(rcoll_comm_t comm, const rcoll_coll_args_t *a,
                                    struct rcoll_request **req_p);
/* An uneven collective's arrays (v[i] NULL where unused; v[RCOLL_V_COUNT] never), copied into
 * the request (the caller's may be reused at once). */
rcoll_status_t rcoll_req_set_v(struct rcoll_request *r, const size_t *const v[RCOLL_V_NUM]);
void rcoll_req_enqueue(rcoll_comm_t comm, struct rcoll_request *req);
void rcoll_req_release(struct rcoll_request *req);
/* The progress thread: started at the end of creation when cfg.progress_thread is set;
 * stopped (joined) by rcoll_comm_free, which must not hold pt_lock.  rcoll_pt_lock/unlock
 * take pt_lock only when the thread runs (unlock also wakes it: work may have been queued). */
rcoll_status_t rcoll_pt_start(rcoll_comm_t comm);
void rcoll_pt_stop(rcoll_comm_t comm);
static inline void rcoll_pt_lock(rcoll_comm_t comm)
{
    if (comm->pt_on) pthread_mutex_lock(&comm->pt_lock);
}
static inline void rcoll_pt_unlock(rcoll_comm_t comm)
{
    if (!comm->pt_on) return;
    pthread_cond_signal(&comm->pt_cv);
    if (comm->sleeps) { /* the thread may sleep on the doorbell rather than on pt_cv */
        rcoll_bell_fence();
        rcoll_bell_ring(comm->bell_self);
    }
    pthread_mutex_unlock(&comm->pt_lock);
}
/* rcoll_wait's loop when the thread runs: the caller holds no lock and may run beside
 * another thread's calls on comm; returns the status and releases req. */
rcoll_status_t rcoll_req_wait_shared(struct rcoll_request *req);
/* ... until deadline_ns (0: none): RCOLL_INPROGRESS (req neither finished nor released) when
 * it passed first. */
rcoll_status_t rcoll_req_wait_shared_until(struct rcoll_request *req, uint64_t deadline_ns);

/* Request r seen complete with status st: its post-step run (a staged call's copy out);
 * returns st or the step's error (with its sentence in the last error).  The request stays
 * the caller's to release. */
rcoll_status_t rcoll_req_finish(struct rcoll_request *r, rcoll_status_t st);
/* api_stage.c: bytes of pinned staging memory the communicator holds (all its areas). */
size_t rcoll_stage_bytes(rcoll_comm_t comm);
/* api_stream.c: the bytes the stream calls' jobs hold (rcoll_comm_mem_usage). */
size_t rcoll_stream_bytes(rcoll_comm_t comm);

/* Progress comm's queue once (non-blocking). */
void rcoll_comm_progress(rcoll_comm_t comm);
/* Progress until req completes; returns its status (does not release it). */
rcoll_status_t rcoll_req_wait(struct rcoll_request *req);
/* rcoll_req_wait until deadline_ns (0: none): RCOLL_INPROGRESS when it passed first. */
rcoll_status_t rcoll_req_wait_until(struct rcoll_request *req, uint64_t deadline_ns);
/* After a mismatch the root announced: "rank A called X as operation #n while rank B called
 * Y" from the signatures the root relays (waits for two that differ up to an eighth of
 * RCOLL_TIMEOUT, within [0.5 s, 3 s]).  1 when found. */
int rcoll_sig_explain(rcoll_comm_t comm, char *buf, size_t len);
/* Fail every queued operation with st (the communicator's error). */
void rcoll_comm_fail(rcoll_comm_t comm, rcoll_status_t st, int culprit, const char *text);

/* progress.c: an address that is different in every thread (which thread holds a
 * communicator for a group's end). */
const void *rcoll_thread_token(void);

/* run.c: one collective run to completion for the library's own use (set-up, probe, split),
 * whatever the calling thread's group state.  src may equal dst (in place).  On failure the
 * detail (the communicator's last error) is in rcoll_err_get. */
rcoll_status_t rcoll_coll_run(rcoll_comm_t comm, rcoll_op_kind_t kind, const void *src,
                              void *dst, size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                              int root);
/* run.c: a barrier (every rank has entered it when it returns anywhere). */
rcoll_status_t rcoll_coll_barrier(rcoll_comm_t comm);

#endif
