/*
 * net.h - socket plumbing shared by the bootstrap and the TCP transport: address parsing and
 * formatting, interface selection (RCOLL_SOCKET_IFNAME), non-blocking listen/connect, and
 * whole-buffer reads/writes bounded by a deadline.  No knowledge of ranks or messages.
 */
#ifndef RCOLL_UTIL_NET_H
#define RCOLL_UTIL_NET_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "rcoll.h"
#include "util/config.h"

/* RCOLL_SOCKET_IFNAME, declared here because the bootstrap (core) and the tcp and verbs
 * transports all need it: their tables embed this one (RCOLL_KNOB_SUBTABLE). */
typedef struct {
    char socket_ifname[RCOLL_CFG_STR_MAX];
} rcoll_net_config_t;
extern const rcoll_config_table_t rcoll_net_config_table;

/* A socket address that fits IPv4 and IPv6, stored by value in handles and ids. */
typedef union {
    struct sockaddr sa;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
} rcoll_sockaddr_t;

/* "1.2.3.4:5", "[::1]:5" or "host:5" (resolved).  Returns RCOLL_ERR_INVALID_ARG with a message
 * naming the text when it cannot be parsed or resolved. */
rcoll_status_t rcoll_net_parse_hostport(const char *text, rcoll_sockaddr_t *addr);
/* Format as "ip:port" / "[ip6]:port". */
const char *rcoll_net_addr_str(const rcoll_sockaddr_t *addr, char *buf, size_t len);
socklen_t rcoll_net_addr_len(const rcoll_sockaddr_t *addr);
uint16_t rcoll_net_addr_port(const rcoll_sockaddr_t *addr);
void rcoll_net_addr_set_port(rcoll_sockaddr_t *addr, uint16_t port);

/* Choose the local address to listen on.  ifname_filter is RCOLL_SOCKET_IFNAME: "" (default:
 * the first up, non-loopback interface that is not docker, virbr, veth or br-, else loopback),
 * "eth" (prefix), "^docker,lo" (exclude prefixes), "=eth0" (exact).  Writes the address
 * (port 0) and the interface name. */
rcoll_status_t rcoll_net_pick_addr(const char *ifname_filter, rcoll_sockaddr_t *addr,
                                   char *ifname, size_t ifname_len);
/* The same choice, every candidate: up to max addresses (one per interface, in the order
 * above: the first is rcoll_net_pick_addr's), their interface names.  Returns how
 * many, or -1 (rcoll_err_get() says why) when none matches. */
#define RCOLL_NET_IFNAME_MAX 64
int rcoll_net_pick_addrs(const char *ifname_filter, rcoll_sockaddr_t *addrs,
                         char (*ifnames)[RCOLL_NET_IFNAME_MAX], int max);

/* Non-blocking listening socket bound to addr (port 0 = any); *addr gets the bound port.
 * SOCK_CLOEXEC; SO_REUSEADDR only when reuse != 0. */
rcoll_status_t rcoll_net_listen(rcoll_sockaddr_t *addr, int backlog, int reuse, int *fd_p);
/* Start a non-blocking connect; *fd_p is the socket (connect may still be in progress). */
rcoll_status_t rcoll_net_connect_start(const rcoll_sockaddr_t *addr, int *fd_p);
/* Check an in-progress connect: RCOLL_OK when connected, RCOLL_INPROGRESS while pending, an
 * error (ECONNREFUSED -> RCOLL_ERR_REMOTE) otherwise. */
rcoll_status_t rcoll_net_connect_check(int fd);
/* Blocking-style connect that retries refused/unreachable attempts until deadline_ns
 * (CLOCK_MONOTONIC), for bootstrap.  The returned socket is non-blocking. */
rcoll_status_t rcoll_net_connect_retry(const rcoll_sockaddr_t *addr, uint64_t deadline_ns,
                                       int *fd_p);
/* The same over several addresses of one server, from addrs[*which_p] on: one that refuses,
 * is unreachable or does not answer within 2 s gives way to the next, round and round (after
 * each round the same growing pause as above) until deadline_ns; *which_p gets the address
 * connected to.  At the deadline the error names every address and its last failure.  One
 * address: rcoll_net_connect_retry. */
rcoll_status_t rcoll_net_connect_retry_any(const rcoll_sockaddr_t *addrs, int n,
                                           uint64_t deadline_ns, int *fd_p, int *which_p);
/* accept4 with SOCK_NONBLOCK|SOCK_CLOEXEC; RCOLL_INPROGRESS when nothing is pending. */
/* 1 when fd's connection is to itself (local address and port equal to the peer's). */
int rcoll_net_self_connected(int fd);
rcoll_status_t rcoll_net_accept(int listen_fd, int *fd_p, rcoll_sockaddr_t *peer);
rcoll_status_t rcoll_net_set_nodelay(int fd);

/* Move exactly len bytes on a non-blocking socket, polling until deadline_ns.  Errors:
 * RCOLL_ERR_REMOTE (peer closed/reset), RCOLL_ERR_TIMEOUT, RCOLL_ERR_SYSTEM. */
rcoll_status_t rcoll_net_send_all(int fd, const void *buf, size_t len, uint64_t deadline_ns);
rcoll_status_t rcoll_net_recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns);

/* One non-blocking attempt: *done_p advanced by what moved.  Returns RCOLL_OK (possibly having
 * moved nothing), or RCOLL_ERR_REMOTE on EOF/reset, RCOLL_ERR_SYSTEM otherwise. */
rcoll_status_t rcoll_net_send_some(int fd, const void *buf, size_t len, size_t *done_p);
rcoll_status_t rcoll_net_recv_some(int fd, void *buf, size_t len, size_t *done_p);

/* Fill buf with cryptographically random bytes (getrandom). */
rcoll_status_t rcoll_random_bytes(void *buf, size_t len);

#endif
