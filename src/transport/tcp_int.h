/*
 * socket_int.h - the TCP transport's objects, shared by its data path (socket.c) and its
 * connection setup (socket_conn.c).  Internal to those two files; the wire layout is in
 * socket.h.
 */
#ifndef RCOLL_TRANSPORT_SOCKET_INT_H
#define RCOLL_TRANSPORT_SOCKET_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/tcp.h"
#include "transport/transport.h"
#include "util/net.h"
#include "util/status.h"

#define SOCK_HDR ((uint64_t)sizeof(rcoll_tcp_frame_t))
#define SOCK_IOV_MAX 64                 /* iovecs per sendmsg/recvmsg */
#define SOCK_STAGE_BYTES (64u << 10)    /* socket-0 receive staging: headers, small payloads */
#define SOCK_STAGE_DIRECT (256u << 10)  /* payload rests this long are read without staging */
#define SOCK_PART_ALIGN ((uint64_t)4096) /* stripe parts start on page multiples */
#define SOCK_MAX_CONNECTING 64          /* connects in progress, process-wide */
#define SOCK_MAX_MSG ((size_t)1 << 40)
#define SOCK_LISTEN_BACKLOG 512
#define SOCK_MAX_PENDING 1024 /* accepted sockets not yet in a comm, handshaking or not */
#define SOCK_ADDR_STR 64
#define SOCK_TRY_NS 2000000000ull      /* a connect to one address that has not completed: next */
#define SOCK_FAILBACK_NS 1000000000ull /* a moved socket tries its first address this often */
#define SOCK_EAGER_MAX ((uint64_t)64 << 10)  /* failover: sends this small are copied ... */
#define SOCK_EAGER_BUDGET ((uint64_t)4 << 20) /* ... up to this much per comm, unacknowledged */
#define SOCK_ACK_BATCH ((uint64_t)256 << 10) /* small messages are acknowledged every this */
#define SOCK_ACK_MSGS 16 /* ... many bytes or messages (a sender holds RCOLL_TCP_MAX_REQS) */
#define SOCK_RESUME_POLL_NS 5000000ull /* the failover thread looks for taking-over sockets */

/* ---------------------------------------------------------------------------------------------
 * Objects
 * ------------------------------------------------------------------------------------------ */

/* Process-wide settings, written once by init() (socket.c). */
typedef struct {
    int inited;
    int nsocks;
    uint64_t stripe_min;
    rcoll_sockaddr_t addr; /* the device: address to listen on (port 0) */
    char ifname[64];
    int naddrs; /* every address to listen on, addrs[0] = addr (RCOLL_TCP_MAX_ADDRS) */
    rcoll_sockaddr_t addrs[RCOLL_TCP_MAX_ADDRS];
    char ifnames[RCOLL_TCP_MAX_ADDRS][RCOLL_NET_IFNAME_MAX];
    int failover;    /* RCOLL_TCP_FAILOVER_* */
    double failover_timeout; /* s: TCP_USER_TIMEOUT of failover sockets */
} tcp_global_t;
extern tcp_global_t tcp_g;

typedef struct tcp_comm tcp_comm_t;

/* One message: a whole isend, or one buffer of a grouped irecv. */
typedef struct {
    char *data;
    uint64_t cap;    /* send: message length; recv: posted buffer size */
    uint64_t length; /* message length (recv: valid once known) */
    int tag;
    int known;       /* length known: always for sends, after the header for receives */
    int pending;     /* sockets whose cursor has not yet passed this message */
    rcoll_tcp_frame_t hdr; /* send: built by isend; recv: read from socket 0 */
} tcp_msg_t;

typedef struct {
    tcp_comm_t *comm;
    int in_use;  /* handed out and not yet freed by test() */
    int done;    /* complete and retired from the ring (requests retire in posting order) */
    int eager;   /* failover send of a copied message: complete for the user at once */
    int orphan;  /* eager, and already reported complete: freed when it retires */
    char *copy;  /* eager: the copy of its one message's data (msgs[0].data points to it) */
    uint64_t seq; /* its place in the comm's ring */
    int nmsgs;
    int pending; /* messages not complete yet */
    tcp_msg_t msgs[RCOLL_TRANSPORT_MAX_RECVS];
} tcp_req_t;

/* Where one socket is in the queue: message msgs[mi] of the request posted as number seq,
 * off bytes into that message's stream on this socket (header + part on socket 0). */
typedef struct {
    uint64_t seq;
    int mi;
    uint64_t off;
} tcp_cursor_t;

/* Send comm, failover: socket s being taken over by a new socket (after its path died, or to
 * go back to the first address).  A planned take-over (failback) leaves the old socket
 * carrying data meanwhile and gives up quietly; one after a failure stops the old socket and
 * goes round the peer's addresses until one answers. */
typedef struct {
    int state;        /* 0 none, 1 connecting, 2 sending the hello, 3 reading the answer */
    int planned;
    int old_dead;     /* planned, and the old socket failed after the hello went out (the
                       * receiver may have swapped already): it carries nothing more */
    int fd;
    int ai;           /* address being tried */
    int refused;      /* addresses refused at once in a row */
    uint64_t try_ns;  /* when this try began */
    uint64_t lost_ns; /* when the old path was found dead (0: planned) */
    uint32_t sent, got;
    rcoll_tcp_hello_t hello;
    rcoll_tcp_resume_t ans;
    char why[160];    /* what the old path said */
    char tried[RCOLL_ERR_TEXT_MAX];
} tcp_resume_t;

/* A send or recv comm.  Requests live in reqs[]; ring[] holds the posted, unretired ones in
 * posting order (sequence numbers head..tail-1). */
struct tcp_comm {
    int is_recv;
    int nsocks;
    uint64_t stripe_min;
    rcoll_status_t failed;               /* first error; sticky */
    int fd[RCOLL_TCP_MAX_NSOCKS];
    tcp_cursor_t cur[RCOLL_TCP_MAX_NSOCKS];
    uint64_t head, tail;
    tcp_req_t *ring[RCOLL_TCP_MAX_REQS];
    int nfree;
    tcp_req_t *free_reqs[RCOLL_TCP_MAX_REQS];
    tcp_req_t reqs[RCOLL_TCP_MAX_REQS];
    char *stage; /* recv only: bytes read from socket 0 past the current payload */
    size_t stage_off, stage_len;
    char peer[SOCK_ADDR_STR];
    char errtext[RCOLL_ERR_TEXT_MAX]; /* detail of `failed`, repeated by later calls */

    /* Failover (RCOLL_TCP_HELLO_FAILOVER; tcp.h has the protocol).  bytes[s]: stream
     * position of socket s, written (send) or read (recv). */
    int fo;
    uint64_t nonce, conn_id;
    uint64_t bytes[RCOLL_TCP_MAX_NSOCKS];
    uint64_t eager_bytes; /* send: bytes of copies held (SOCK_EAGER_BUDGET) */
    int waiting;          /* send: unretired sends that are not copies (their users wait) */
    unsigned ack_polls;   /* send: progress calls, to read acknowledgements now and then */
    /* send: acknowledged position and the cursor there (which retires messages) */
    uint64_t acked[RCOLL_TCP_MAX_NSOCKS];
    tcp_cursor_t ackcur[RCOLL_TCP_MAX_NSOCKS];
    uint8_t ackbuf[RCOLL_TCP_MAX_NSOCKS][8];
    uint8_t ackgot[RCOLL_TCP_MAX_NSOCKS];
    int ai[RCOLL_TCP_MAX_NSOCKS]; /* address each socket is on */
    int naddrs;
    rcoll_sockaddr_t addrs[RCOLL_TCP_MAX_ADDRS];
    uint64_t fb_next_ns; /* next failback try */
    tcp_resume_t *rs; /* nsocks of them (failover send comms only) */
    /* recv: sockets whose path failed (read no more until taken over), acks to write */
    uint8_t dead[RCOLL_TCP_MAX_NSOCKS];
    uint8_t ack_due[RCOLL_TCP_MAX_NSOCKS]; /* 1: a message ended; 2: one its sender waits for */
    uint8_t ack_msgs[RCOLL_TCP_MAX_NSOCKS]; /* messages ended since the last acknowledgement */
    uint8_t ack_off[RCOLL_TCP_MAX_NSOCKS]; /* bytes of ack_val[] written (0: none under way) */
    uint64_t ack_val[RCOLL_TCP_MAX_NSOCKS];
    uint64_t ack_last[RCOLL_TCP_MAX_NSOCKS]; /* last position acknowledged */
    /* recv: taking-over sockets handed over by the listener (under the registry lock); the
     * lock is held by test() and by the failover thread when it answers a take-over itself */
    int incoming_any;
    int incoming[RCOLL_TCP_MAX_NSOCKS];
    tcp_comm_t *reg_next;
    pthread_mutex_t lock;
    uint64_t user_ns; /* the last test() or isend(): the failover thread leaves it alone */
};

/* An accepted socket whose hello is not yet complete, or whose siblings have not arrived.
 * The cap on handshaking sockets protects against silent or slow clients; sockets that
 * proved the nonce have a separate, larger cap, so that many peers connecting with 16
 * sockets each at once do not push each other out. */
typedef struct {
    int fd;
    uint32_t got;  /* hello bytes received */
    int ready;     /* hello complete and valid */
    int ungrouped; /* completed by a failover poll: accept() still has to group it */
    uint64_t seq;  /* arrival order, to drop the oldest when full */
    rcoll_sockaddr_t peer;
    rcoll_tcp_hello_t hello;
} tcp_half_t;

typedef struct tcp_listen tcp_listen_t;
struct tcp_listen {
    int fd;                          /* = fds[0] */
    int nfds;                        /* one listening socket per address */
    int fds[RCOLL_TCP_MAX_ADDRS];
    uint32_t nsocks;
    uint64_t nonce, stripe_min;
    uint64_t seq;
    int nhalf;      /* sockets in half[] */
    int nhandshake; /* of which still in their handshake (at most RCOLL_TCP_MAX_HALF_OPEN) */
    tcp_half_t half[SOCK_MAX_PENDING];
    tcp_listen_t *next; /* registry of live listeners */
};

/* A connect in progress.  connect() returns NULL until every socket is connected and has
 * sent its hello, and the caller calls again "with the same arguments"; the state is kept in
 * this process-wide table keyed by (dev, handle contents), not by the handle's address, so a
 * caller may pass a fresh copy of the handle each time.  Two connects to one handle in
 * progress at once share an entry: each call that finds it complete takes it, the next
 * starts a new connection, so every caller still ends with its own comm.  Abandoned entries
 * are evicted oldest-first when the table is full, and freed by fini(). */
typedef struct {
    int used;
    int dev;
    uint64_t seq;
    rcoll_tcp_handle_t h;
    int naddrs, ai;           /* the handle's addresses; the one being tried */
    rcoll_sockaddr_t addrs[RCOLL_TCP_MAX_ADDRS];
    uint64_t try_start_ns;    /* when connecting to addrs[ai] began */
    int refused;              /* addresses refused at once in a row */
    uint64_t conn_id;
    char tried[RCOLL_ERR_TEXT_MAX]; /* what the addresses given up said */
    tcp_comm_t *comm;
    uint8_t state[RCOLL_TCP_MAX_NSOCKS]; /* 0 connecting, 1 sending hello, 2 done */
    uint32_t sent[RCOLL_TCP_MAX_NSOCKS];
    rcoll_tcp_hello_t hello[RCOLL_TCP_MAX_NSOCKS];
} tcp_connecting_t;

/* socket.c */
tcp_comm_t *tcp_comm_alloc(int is_recv, int nsocks, uint64_t stripe_min);
void tcp_comm_free(tcp_comm_t *c);
/* Send comm c's socket s is waiting for its take-over (carries nothing meanwhile). */
#define TCP_PAUSED(c, s) \
    ((c)->rs && (c)->rs[s].state && (!(c)->rs[s].planned || (c)->rs[s].old_dead))

/* A failover socket: TCP_USER_TIMEOUT (a path that stops acknowledging fails in time). */
void tcp_set_user_timeout(int fd);
/* Mark the comm failed with st (whose detail rcoll_err_set() has just recorded); report its
 * failure again; an I/O error (err 0: end of stream) on one of its sockets. */
rcoll_status_t tcp_fail(tcp_comm_t *c, rcoll_status_t st);
rcoll_status_t tcp_failed(const tcp_comm_t *c);
rcoll_status_t tcp_io_error(tcp_comm_t *c, int err);
/* Advance cursor cur of socket s by n bytes of its stream (retiring the messages it passes
 * if `retire`). */
void tcp_advance_cur(tcp_comm_t *c, tcp_cursor_t *cur, int s, uint64_t n, int retire);

/* tcp_failover.c: a failover comm's part of test().  Sender: before moving data (take-overs
 * in progress, failback), after (acknowledgements).  Receiver: before (sockets taken over),
 * after (acknowledgements; look for take-overs when `before`, the sum of bytes[], did not
 * move).  tcp_path_error: an I/O error (err 0: end of stream) on socket s, *n_p = 0. */
rcoll_status_t tcp_fo_send_pre(tcp_comm_t *c);
/* tcp.c: the failover thread's progress of send comm c (whose lock it holds). */
void tcp_fo_background(tcp_comm_t *c);
rcoll_status_t tcp_fo_send_acks(tcp_comm_t *c);
rcoll_status_t tcp_fo_recv_pre(tcp_comm_t *c);
void tcp_fo_recv_post(tcp_comm_t *c, int flush);
/* Socket fd takes over socket s of recv comm c (whose lock the caller holds): answer, swap. */
void tcp_fo_install(tcp_comm_t *c, int s, int fd);
rcoll_status_t tcp_path_error(tcp_comm_t *c, int s, int err, size_t *n_p);

/* socket_conn.c */
rcoll_status_t tcp_listen(int dev, void *handle, void **listen_comm);
rcoll_status_t tcp_accept(void *listen_comm, void **recv_comm);
rcoll_status_t tcp_connect(int dev, const void *handle, void **send_comm);
rcoll_status_t tcp_close_listen(void *listen_comm);
/* Free every connect still in progress (transport fini). */
void tcp_conn_fini(void);
/* Failover comms (registered when accept() or connect() makes them).  While there is one, a
 * thread, every SOCK_RESUME_POLL_NS: looks at every live listener for taking-over sockets, and
 * answers them when their receiver is not in test(); progresses the send comms nobody is in
 * test() of (a copied send completes for its user before it is acknowledged, and must still
 * be sent again if its path dies); writes the acknowledgements receivers held back.  Unregister a comm; take the sockets handed to recv comm c
 * (fds[s] >= 0 for each), returning how many. */
void tcp_fo_unregister(tcp_comm_t *c);
int tcp_fo_take(tcp_comm_t *c, int fds[RCOLL_TCP_MAX_NSOCKS]);

#endif
