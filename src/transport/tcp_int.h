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
};

/* An accepted socket whose hello is not yet complete, or whose siblings have not arrived.
 * The cap on handshaking sockets protects against silent or slow clients; sockets that
 * proved the nonce have a separate, larger cap, so that many peers connecting with 16
 * sockets each at once do not push each other out. */
typedef struct {
    int fd;
    uint32_t got;  /* hello bytes received */
    int ready;     /* hello complete and valid */
    uint64_t seq;  /* arrival order, to drop the oldest when full */
    rcoll_sockaddr_t peer;
    rcoll_tcp_hello_t hello;
} tcp_half_t;

typedef struct {
    int fd;                          /* = fds[0] */
    int nfds;                        /* one listening socket per address */
    int fds[RCOLL_TCP_MAX_ADDRS];
    uint32_t nsocks;
    uint64_t nonce, stripe_min;
    uint64_t seq;
    int nhalf;      /* sockets in half[] */
    int nhandshake; /* of which still in their handshake (at most RCOLL_TCP_MAX_HALF_OPEN) */
    tcp_half_t half[SOCK_MAX_PENDING];
} tcp_listen_t;

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

/* socket_conn.c */
rcoll_status_t tcp_listen(int dev, void *handle, void **listen_comm);
rcoll_status_t tcp_accept(void *listen_comm, void **recv_comm);
rcoll_status_t tcp_connect(int dev, const void *handle, void **send_comm);
rcoll_status_t tcp_close_listen(void *listen_comm);
/* Free every connect still in progress (transport fini). */
void tcp_conn_fini(void);

#endif
