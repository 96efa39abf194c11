/*
 * net.c - socket plumbing for the bootstrap and the TCP transport: addresses, interface
 * choice, non-blocking listen/connect/accept and deadline-bounded whole-buffer I/O.
 * Knows nothing of ranks, frames or collectives.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "util/log.h"
#include "util/net.h"
#include "util/status.h"
#include "util/time.h"

static const rcoll_knob_t net_knobs[] = {
    RCOLL_KNOB_STR(rcoll_net_config_t, "RCOLL_SOCKET_IFNAME", "", socket_ifname,
                   "interface for bootstrap and TCP: prefix, ^excluded,list or =exact name"),
};
const rcoll_config_table_t rcoll_net_config_table =
    RCOLL_CONFIG_TABLE("net", net_knobs, rcoll_net_config_t);

socklen_t rcoll_net_addr_len(const rcoll_sockaddr_t *addr)
{
    return addr->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                          : sizeof(struct sockaddr_in);
}

uint16_t rcoll_net_addr_port(const rcoll_sockaddr_t *addr)
{
    return ntohs(addr->sa.sa_family == AF_INET6 ? addr->sin6.sin6_port : addr->sin.sin_port);
}

void rcoll_net_addr_set_port(rcoll_sockaddr_t *addr, uint16_t port)
{
    if (addr->sa.sa_family == AF_INET6)
        addr->sin6.sin6_port = htons(port);
    else
        addr->sin.sin_port = htons(port);
}

const char *rcoll_net_addr_str(const rcoll_sockaddr_t *addr, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (addr->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &addr->sin6.sin6_addr, ip, sizeof(ip));
        snprintf(buf, len, "[%s]:%u", ip, rcoll_net_addr_port(addr));
    } else {
        inet_ntop(AF_INET, &addr->sin.sin_addr, ip, sizeof(ip));
        snprintf(buf, len, "%s:%u", ip, rcoll_net_addr_port(addr));
    }
    return buf;
}

rcoll_status_t rcoll_net_parse_hostport(const char *text, rcoll_sockaddr_t *addr)
{
    char host[256];
    const char *port_s;
    if (!text || !*text)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "empty address (expected host:port)");
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':' || (size_t)(close - text - 1) >= sizeof(host))
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "malformed address '%s' "
                                 "(expected [ipv6]:port)", text);
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = '\0';
        port_s = close + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (!colon || (size_t)(colon - text) >= sizeof(host) || colon == text)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "malformed address '%s' "
                                 "(expected host:port)", text);
        memcpy(host, text, (size_t)(colon - text));
        host[colon - text] = '\0';
        port_s = colon + 1;
    }
    char *end;
    errno = 0;
    long port = strtol(port_s, &end, 10);
    if (errno || end == port_s || *end || port < 1 || port > 65535)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "bad port in address '%s'", text);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "cannot resolve host '%s' in '%s': %s",
                             host, text, gai_strerror(rc));
    memset(addr, 0, sizeof(*addr));
    memcpy(addr, res->ai_addr, res->ai_addrlen < sizeof(*addr) ? res->ai_addrlen
                                                                : sizeof(*addr));
    freeaddrinfo(res);
    rcoll_net_addr_set_port(addr, (uint16_t)port);
    return RCOLL_OK;
}

/* Does interface name `name` pass the RCOLL_SOCKET_IFNAME filter? */
static int if_matches(const char *filter, const char *name)
{
    if (!filter || !*filter) {
        static const char *const skip[] = {"lo", "docker", "virbr", "veth", "br-", NULL};
        for (int i = 0; skip[i]; i++)
            if (!strncmp(name, skip[i], strlen(skip[i]))) return 0;
        return 1;
    }
    int exclude = filter[0] == '^';
    int exact = filter[exclude] == '=';
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", filter + exclude + exact);
    int hit = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && !hit; tok = strtok_r(NULL, ",", &save))
        hit = exact ? !strcmp(name, tok) : !strncmp(name, tok, strlen(tok));
    return exclude ? !hit : hit;
}

/* Up to max addresses of up interfaces passing the filter (or loopback ones), IPv4 first, then
 * IPv6 (skipping link-local, which needs a scope); one per interface (its IPv4 one when it has
 * one: a second address of the same interface adds no path, and every listening socket costs
 * an accept call in each progress pass).  Returns how many, -1 when getifaddrs fails. */
static int find_addrs(const char *filter, int want_loopback, rcoll_sockaddr_t *addrs,
                      char (*ifnames)[RCOLL_NET_IFNAME_MAX], int max)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return -1;
    int found = 0;
    for (int pass = 0; pass < 2 && found < max; pass++) {
        int fam = pass == 0 ? AF_INET : AF_INET6;
        for (struct ifaddrs *i = ifs; i && found < max; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != fam) continue;
            if (!(i->ifa_flags & IFF_UP)) continue;
            int is_lo = (i->ifa_flags & IFF_LOOPBACK) != 0;
            if (want_loopback ? !is_lo : !if_matches(filter, i->ifa_name)) continue;
            if (fam == AF_INET6 &&
                IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
                continue;
            int dup = 0; /* one address per interface: IPv4 when it has one */
            for (int k = 0; k < found && !dup; k++) dup = !strcmp(ifnames[k], i->ifa_name);
            if (dup) continue;
            memset(&addrs[found], 0, sizeof(addrs[found]));
            memcpy(&addrs[found], i->ifa_addr, fam == AF_INET ? sizeof(struct sockaddr_in)
                                                              : sizeof(struct sockaddr_in6));
            snprintf(ifnames[found], RCOLL_NET_IFNAME_MAX, "%s", i->ifa_name);
            found++;
        }
    }
    freeifaddrs(ifs);
    return found;
}

int rcoll_net_pick_addrs(const char *filter, rcoll_sockaddr_t *addrs,
                         char (*ifnames)[RCOLL_NET_IFNAME_MAX], int max)
{
    int rc = find_addrs(filter, 0, addrs, ifnames, max);
    if (rc < 0) {
        rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "getifaddrs failed");
        return -1;
    }
    if (rc == 0 && (!filter || !*filter)) rc = find_addrs(NULL, 1, addrs, ifnames, 1);
    if (rc <= 0) {
        rcoll_err_set(RCOLL_ERR_SYSTEM,
                      "no up interface with an address matches RCOLL_SOCKET_IFNAME='%s'",
                      filter ? filter : "");
        return -1;
    }
    for (int k = 0; k < rc; k++) rcoll_net_addr_set_port(&addrs[k], 0);
    return rc;
}

rcoll_status_t rcoll_net_pick_addr(const char *filter, rcoll_sockaddr_t *addr, char *ifname,
                                   size_t ifname_len)
{
    rcoll_sockaddr_t a[1];
    char names[1][RCOLL_NET_IFNAME_MAX];
    if (rcoll_net_pick_addrs(filter, a, names, 1) < 0) return RCOLL_ERR_SYSTEM;
    *addr = a[0];
    snprintf(ifname, ifname_len, "%s", names[0]);
    return RCOLL_OK;
}

rcoll_status_t rcoll_net_set_nodelay(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "setsockopt(TCP_NODELAY)");
    return RCOLL_OK;
}

rcoll_status_t rcoll_net_listen(rcoll_sockaddr_t *addr, int backlog, int reuse, int *fd_p)
{
    char abuf[64];
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "socket()");
    int one = 1;
    if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, &addr->sa, rcoll_net_addr_len(addr)) < 0) {
        int e = errno;
        close(fd);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, e, "cannot bind %s",
                                   rcoll_net_addr_str(addr, abuf, sizeof(abuf)));
    }
    if (listen(fd, backlog) < 0) {
        int e = errno;
        close(fd);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, e, "listen()");
    }
    socklen_t len = sizeof(*addr);
    getsockname(fd, &addr->sa, &len);
    *fd_p = fd;
    return RCOLL_OK;
}

rcoll_status_t rcoll_net_connect_start(const rcoll_sockaddr_t *addr, int *fd_p)
{
    char abuf[64];
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "socket()");
    if (connect(fd, &addr->sa, rcoll_net_addr_len(addr)) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return rcoll_err_set_errno(rcoll_status_from_errno(e), e, "connect to %s",
                                   rcoll_net_addr_str(addr, abuf, sizeof(abuf)));
    }
    rcoll_net_set_nodelay(fd);
    *fd_p = fd;
    return RCOLL_OK;
}

int rcoll_net_self_connected(int fd)
{
    rcoll_sockaddr_t me, peer;
    socklen_t ml = sizeof(me), pl = sizeof(peer);
    memset(&me, 0, sizeof(me));
    memset(&peer, 0, sizeof(peer));
    if (getsockname(fd, &me.sa, &ml) != 0 || getpeername(fd, &peer.sa, &pl) != 0) return 0;
    return ml == pl && !memcmp(&me, &peer, ml);
}

rcoll_status_t rcoll_net_connect_check(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n = poll(&p, 1, 0);
    if (n < 0) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "poll()");
    if (n == 0) return RCOLL_INPROGRESS;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err) return rcoll_err_set_errno(rcoll_status_from_errno(err), err, "connect");
    /* Connecting to a local port nobody listens on yet can meet itself (TCP simultaneous
     * open, when the kernel picks that very port as the source): the socket then holds the
     * port the listener is about to bind.  Not a connection: refused, and retried. */
    if (rcoll_net_self_connected(fd))
        return rcoll_err_set(RCOLL_ERR_REMOTE, "connect: connected to itself (nothing listens "
                             "on that port yet)");
    return RCOLL_OK;
}

rcoll_status_t rcoll_net_connect_retry(const rcoll_sockaddr_t *addr, uint64_t deadline_ns,
                                       int *fd_p)
{
    char abuf[64];
    uint64_t delay_ms = 10;
    for (;;) {
        int fd;
        rcoll_status_t st = rcoll_net_connect_start(addr, &fd);
        while (st == RCOLL_OK) {
            st = rcoll_net_connect_check(fd);
            if (st == RCOLL_OK) {
                *fd_p = fd;
                return RCOLL_OK;
            }
            if (st != RCOLL_INPROGRESS) {
                close(fd);
                break;
            }
            if (rcoll_now_ns() > deadline_ns) {
                close(fd);
                st = RCOLL_ERR_TIMEOUT;
                break;
            }
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, 10);
            st = RCOLL_OK;
        }
        if (st != RCOLL_ERR_REMOTE && st != RCOLL_ERR_TIMEOUT) return st;
        if (rcoll_now_ns() > deadline_ns)
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "could not connect to %s before the deadline"
                                 " (is the root running, and is the address reachable?)",
                                 rcoll_net_addr_str(addr, abuf, sizeof(abuf)));
        struct timespec ts = {0, (long)(delay_ms * 1000000)};
        nanosleep(&ts, NULL);
        if (delay_ms < 200) delay_ms *= 2;
    }
}

/* One connect to addr, waiting until `until`: RCOLL_OK (*fd_p connected), RCOLL_ERR_TIMEOUT,
 * or its failure (why gets the text). */
static rcoll_status_t connect_once(const rcoll_sockaddr_t *addr, uint64_t until, int *fd_p,
                                   char *why, size_t len)
{
    int fd = -1;
    rcoll_status_t st = rcoll_net_connect_start(addr, &fd);
    if (st != RCOLL_OK) { /* no socket left */
        snprintf(why, len, "%s", rcoll_err_get());
        return st;
    }
    for (;;) {
        st = rcoll_net_connect_check(fd);
        if (st == RCOLL_OK) {
            *fd_p = fd;
            return RCOLL_OK;
        }
        if (st != RCOLL_INPROGRESS) {
            snprintf(why, len, "%s", rcoll_err_get());
            break;
        }
        if (rcoll_now_ns() > until) {
            snprintf(why, len, "no answer");
            st = RCOLL_ERR_TIMEOUT;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, 10);
    }
    close(fd);
    return st;
}

rcoll_status_t rcoll_net_connect_retry_any(const rcoll_sockaddr_t *addrs, int n,
                                           uint64_t deadline_ns, int *fd_p, int *which_p)
{
    if (n <= 1) {
        *which_p = 0;
        return rcoll_net_connect_retry(addrs, deadline_ns, fd_p);
    }
    char why[4][128], abuf[64];
    uint64_t delay_ms = 10;
    int first = *which_p >= 0 && *which_p < n ? *which_p : 0;
    for (int k = 0; k < n && k < 4; k++) snprintf(why[k], sizeof(why[k]), "not tried");
    for (;;) {
        for (int j = 0; j < n; j++) {
            int i = (first + j) % n;
            uint64_t until = rcoll_now_ns() + 2000000000ull;
            if (until > deadline_ns) until = deadline_ns;
            rcoll_status_t st = connect_once(&addrs[i], until, fd_p, why[i % 4],
                                             sizeof(why[0]));
            if (st == RCOLL_OK) {
                *which_p = i;
                return RCOLL_OK;
            }
            if (st != RCOLL_ERR_REMOTE && st != RCOLL_ERR_TIMEOUT) return st;
            if (rcoll_now_ns() >= deadline_ns) {
                char list[600];
                size_t o = 0;
                for (int k = 0; k < n && k < 4 && o < sizeof(list); k++)
                    o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s: %s", k ? "; " : "",
                                          rcoll_net_addr_str(&addrs[k], abuf, sizeof(abuf)),
                                          why[k]);
                return rcoll_err_set(RCOLL_ERR_TIMEOUT, "could not connect to any of the %d "
                                     "addresses before the deadline (%s)", n, list);
            }
        }
        struct timespec ts = {0, (long)(delay_ms * 1000000)};
        nanosleep(&ts, NULL);
        if (delay_ms < 200) delay_ms *= 2;
    }
}

rcoll_status_t rcoll_net_accept(int listen_fd, int *fd_p, rcoll_sockaddr_t *peer)
{
    rcoll_sockaddr_t tmp;
    socklen_t len = sizeof(tmp);
    int fd = accept4(listen_fd, &tmp.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
            errno == ECONNABORTED)
            return RCOLL_INPROGRESS;
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "accept()");
    }
    rcoll_net_set_nodelay(fd);
    if (peer) *peer = tmp;
    *fd_p = fd;
    return RCOLL_OK;
}

rcoll_status_t rcoll_net_send_some(int fd, const void *buf, size_t len, size_t *done_p)
{
    while (*done_p < len) {
        ssize_t n = send(fd, (const char *)buf + *done_p, len - *done_p, MSG_NOSIGNAL);
        if (n > 0) {
            *done_p += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return RCOLL_OK;
        if (n < 0 && errno == EINTR) continue;
        int e = n < 0 ? errno : EPIPE;
        return rcoll_err_set_errno(rcoll_status_from_errno(e), e, "send");
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_net_recv_some(int fd, void *buf, size_t len, size_t *done_p)
{
    while (*done_p < len) {
        ssize_t n = recv(fd, (char *)buf + *done_p, len - *done_p, 0);
        if (n > 0) {
            *done_p += (size_t)n;
            continue;
        }
        if (n == 0) return rcoll_err_set(RCOLL_ERR_REMOTE, "connection closed by peer");
        if (errno == EAGAIN || errno == EWOULDBLOCK) return RCOLL_OK;
        if (errno == EINTR) continue;
        int e = errno;
        return rcoll_err_set_errno(rcoll_status_from_errno(e), e, "recv");
    }
    return RCOLL_OK;
}

static rcoll_status_t io_all(int fd, void *buf, size_t len, uint64_t deadline_ns, int is_send)
{
    size_t done = 0;
    while (done < len) {
        rcoll_status_t st = is_send ? rcoll_net_send_some(fd, buf, len, &done)
                                    : rcoll_net_recv_some(fd, buf, len, &done);
        if (st != RCOLL_OK) return st;
        if (done == len) break;
        uint64_t now = rcoll_now_ns();
        if (now >= deadline_ns)
            return rcoll_err_set(RCOLL_ERR_TIMEOUT, "%s of %zu bytes timed out after %zu",
                                 is_send ? "send" : "receive", len, done);
        struct pollfd p = {.fd = fd, .events = is_send ? POLLOUT : POLLIN};
        uint64_t left_ms = (deadline_ns - now) / 1000000 + 1;
        poll(&p, 1, left_ms > 100 ? 100 : (int)left_ms);
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_net_send_all(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
    return io_all(fd, (void *)buf, len, deadline_ns, 1);
}

rcoll_status_t rcoll_net_recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
    return io_all(fd, buf, len, deadline_ns, 0);
}

rcoll_status_t rcoll_random_bytes(void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom((char *)buf + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "getrandom");
        }
        got += (size_t)n;
    }
    return RCOLL_OK;
}
