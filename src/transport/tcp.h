/*
 * socket.h - wire layout of the TCP transport (socket.c), internal to transport/ and shared
 * with its conformance test so that the test can play raw (misbehaving) peers.
 * All fields travel in host byte order: rcoll assumes one byte order per job.
 */
#ifndef RCOLL_TRANSPORT_SOCKET_H
#define RCOLL_TRANSPORT_SOCKET_H

#include <stdint.h>
#include "transport/transport.h"
#include "util/net.h"

#define RCOLL_TCP_VERSION 2u
#define RCOLL_TCP_HANDLE_MAGIC 0x72635448u /* "rcTH" */
#define RCOLL_TCP_HELLO_MAGIC 0x7263484cu  /* "rcHL" */
#define RCOLL_TCP_FRAME_MAGIC 0x7263464du  /* "rcFM" */
#define RCOLL_TCP_RESUME_MAGIC 0x72635253u /* "rcRS": hello of a socket taking over another */

#define RCOLL_TCP_MAX_NSOCKS 16     /* sockets per connection */
#define RCOLL_TCP_MAX_REQS 64       /* outstanding requests per comm (isend/irecv -> NULL) */
#define RCOLL_TCP_MAX_HALF_OPEN 256 /* accepted sockets still in handshake, per listener */

/* The transport's knobs (socket.c): RCOLL_SOCKET_IFNAME (shared, util/net.h),
 * RCOLL_SOCKET_NSOCKS, RCOLL_SOCKET_STRIPE_MIN, RCOLL_SOCKET_FAILOVER and
 * RCOLL_SOCKET_FAILOVER_TIMEOUT. */
enum { RCOLL_TCP_FAILOVER_AUTO, RCOLL_TCP_FAILOVER_ON, RCOLL_TCP_FAILOVER_OFF };
typedef struct {
    rcoll_net_config_t netif;
    int nsocks;        /* sockets per TCP connection */
    size_t stripe_min; /* messages at least this big are striped over all sockets */
    int failover;      /* RCOLL_TCP_FAILOVER_*: auto = when the peer listens on several addresses */
    double failover_timeout; /* s: a path whose data goes unacknowledged this long is left */
} rcoll_tcp_config_t;
extern const rcoll_config_table_t rcoll_tcp_config_table;

/* What listen() writes into the opaque handle (the rest of the 128 bytes is zero).  The
 * connector takes nsocks and stripe_min from here, so both ends split messages alike.  A
 * listener on several interfaces (every one RCOLL_SOCKET_IFNAME accepts, up to
 * RCOLL_TCP_MAX_ADDRS) gives the others as alternatives: a connector that cannot reach addr
 * tries them in turn (a stray interface chosen first must not break the job). */
#define RCOLL_TCP_MAX_ADDRS 4
typedef struct {
    uint16_t family; /* AF_INET or AF_INET6; 0: none */
    uint16_t port;   /* host byte order */
    uint8_t ip[16];  /* 4 bytes for AF_INET */
} rcoll_tcp_alt_t;
typedef struct {
    uint32_t magic;      /* RCOLL_TCP_HANDLE_MAGIC */
    uint32_t version;    /* RCOLL_TCP_VERSION */
    uint64_t nonce;      /* random; every hello must carry it */
    uint64_t stripe_min; /* messages at least this long are striped (when nsocks > 1) */
    uint32_t nsocks;     /* sockets per connection, 1..RCOLL_TCP_MAX_NSOCKS */
    uint32_t nalt;       /* alternatives that follow, 0..RCOLL_TCP_MAX_ADDRS - 1 */
    rcoll_sockaddr_t addr; /* where the listener listens (its first interface) */
    rcoll_tcp_alt_t alt[RCOLL_TCP_MAX_ADDRS - 1];
} rcoll_tcp_handle_t;
_Static_assert(sizeof(rcoll_tcp_handle_t) <= RCOLL_TRANSPORT_HANDLE_BYTES, "tcp handle too big");

/* First bytes the connector sends on each socket of a connection.  A socket that takes over
 * socket `index` of a live connection whose path died (failover) or to go back to the first
 * address (failback) sends the same hello with magic RCOLL_TCP_RESUME_MAGIC; the listener
 * hands it to that connection's receiver, which answers with an rcoll_tcp_resume_t. */
#define RCOLL_TCP_HELLO_FAILOVER 1u /* the receiver acknowledges what it reads (below) */
typedef struct {
    uint32_t magic;   /* RCOLL_TCP_HELLO_MAGIC or RCOLL_TCP_RESUME_MAGIC */
    uint32_t version; /* RCOLL_TCP_VERSION */
    uint64_t nonce;   /* from the handle */
    uint64_t conn_id; /* random, the same on every socket of one connection */
    uint32_t index;   /* this socket's place, 0..nsocks-1 */
    uint32_t nsocks;  /* must equal the handle's */
    uint32_t flags;   /* RCOLL_TCP_HELLO_* */
    uint32_t reserved;
} rcoll_tcp_hello_t;

/* Failover (RCOLL_TCP_HELLO_FAILOVER): every socket of the connection is a byte stream whose
 * position both ends count.  The receiver writes back, on the same socket, the 8-byte count
 * of bytes it has read from that socket whenever it finishes a message there; the sender
 * completes a send only when its last byte is acknowledged, so it still holds every byte the
 * receiver may not have.  A socket that takes over gets this answer to its resume hello: the
 * count the receiver has read on the old socket (which it closes), from which the sender sends
 * again. */
typedef struct {
    uint32_t magic; /* RCOLL_TCP_RESUME_MAGIC */
    uint32_t reserved;
    uint64_t count; /* bytes of this socket's stream the receiver holds */
} rcoll_tcp_resume_t;

/* Header of every message, always on socket 0, directly followed by its socket-0 payload. */
typedef struct {
    uint32_t magic;  /* RCOLL_TCP_FRAME_MAGIC */
    int32_t tag;     /* the sender's tag (-1: none) */
    uint64_t length; /* payload bytes (all sockets together) */
} rcoll_tcp_frame_t;

/* The checks of what a peer sent, apart from the sockets (tcp_conn.c, tcp.c), so that
 * tests/fuzz can feed them any bytes. */
/* Why a connect handle is not one of this version's, or NULL. */
const char *rcoll_tcp_handle_check(const rcoll_tcp_handle_t *h);
/* Why the first got bytes of a hello are unacceptable to the listener of this nonce and
 * socket count, or NULL (also while incomplete and fine so far).  The duplicate check
 * against the listener's other sockets is the caller's. */
const char *rcoll_tcp_hello_check(const rcoll_tcp_hello_t *m, size_t got, uint64_t nonce,
                                  uint32_t nsocks);
/* Tests: make socket s of a send comm behave as if its path had just died (the sender stops
 * using it and resumes the stream on a new socket; the old one stays open, unread). */
rcoll_status_t rcoll_tcp_debug_cut(void *send_comm, int s);
/* A complete frame header against the posted receive (tag, -1: any; cap bytes). */
typedef enum {
    RCOLL_TCP_FRAME_OK,
    RCOLL_TCP_FRAME_BAD_MAGIC,
    RCOLL_TCP_FRAME_TAG_MISMATCH,
    RCOLL_TCP_FRAME_TOO_LONG
} rcoll_tcp_frame_verdict_t;
rcoll_tcp_frame_verdict_t rcoll_tcp_frame_check(const rcoll_tcp_frame_t *h, int posted_tag,
                                                uint64_t cap);
/* Where socket s's part of a len-byte message lies, for a connection of nsocks sockets that
 * stripes messages of at least stripe_min bytes (the split both ends compute). */
void rcoll_tcp_part(int nsocks, uint64_t stripe_min, uint64_t len, int s, uint64_t *off,
                    uint64_t *plen);

_Static_assert(sizeof(rcoll_tcp_handle_t) <= RCOLL_TRANSPORT_HANDLE_BYTES,
               "tcp handle must fit RCOLL_TRANSPORT_HANDLE_BYTES");
_Static_assert(sizeof(rcoll_tcp_hello_t) == 40, "hello layout has no padding");
_Static_assert(sizeof(rcoll_tcp_resume_t) == 16, "resume answer layout has no padding");
_Static_assert(sizeof(rcoll_tcp_frame_t) == 16, "frame header layout has no padding");

#endif
