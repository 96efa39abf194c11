/*
 * tcp_failover.c - keeping a TCP connection alive when the path under one of its sockets dies
 * (link failover), and moving it back when the first path answers again (failback).  The
 * protocol is in tcp.h (RCOLL_TCP_HELLO_FAILOVER): the receiver acknowledges the bytes it has
 * read on each socket, so a sender still holds every byte the receiver may not have; a new
 * socket to another of the peer's addresses takes over the dead one with a resume hello, the
 * receiver answers with how much of that socket's stream it holds, and the sender sends again
 * from there.  Nothing is lost or duplicated: the receiver reads the stream from the new socket
 * only after its answer, and never again from the old one.
 *
 * Sender: a socket whose send, or whose acknowledgement read, fails (TCP_USER_TIMEOUT for a
 * path that stopped acknowledging, an unreachable network, a reset) is stopped and taken over
 * through the peer's next address, round and round until one answers; a round of refusals
 * means the peer is gone, and the comm fails as it would have without failover.  A socket not
 * on the first address tries it again every SOCK_FAILBACK_NS, carrying data meanwhile.
 * Receiver: a read that fails for a path reason leaves the socket waiting to be taken over; an
 * end of stream or a reset is the peer's end, as without failover.  Taking-over sockets reach
 * the receiver through the listener that made the connection (tcp_conn.c routes them by
 * connection id) and a thread that looks at the listeners every SOCK_RESUME_POLL_NS while there
 * is a failover receiver; it answers a take-over itself when the receiver is not in test(), so
 * a receiver that has moved on to other work does not leave the sender waiting.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "transport/tcp_int.h"
#include "util/log.h"
#include "util/time.h"

#define FO_EVENT_QUIET_NS 10000000000ull /* an address's events are said once per 10 s */

/* Say a failover (back = 0) or failback (back = 1) once per address and FO_EVENT_QUIET_NS per
 * process (a link carries many connections); the others at INFO. */
static int tcp_fo_first_event(const char *addr, int back)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        char addr[SOCK_ADDR_STR];
        int back;
        uint64_t ns;
    } seen[8];
    uint64_t now = rcoll_now_ns();
    int first = 1, oldest = 0;

    pthread_mutex_lock(&lock);
    for (int i = 0; i < 8; i++) {
        if (seen[i].ns && seen[i].back == back && strcmp(seen[i].addr, addr) == 0) {
            first = now - seen[i].ns >= FO_EVENT_QUIET_NS;
            oldest = i;
            break;
        }
        if (seen[i].ns < seen[oldest].ns)
            oldest = i;
    }
    if (first) {
        snprintf(seen[oldest].addr, sizeof(seen[oldest].addr), "%s", addr);
        seen[oldest].back = back;
        seen[oldest].ns = now;
    }
    pthread_mutex_unlock(&lock);
    return first;
}

/* ---------------------------------------------------------------------------------------------
 * Sender: taking a socket over
 * ------------------------------------------------------------------------------------------ */

static rcoll_status_t tcp_resume_try(tcp_comm_t *c, int s);

/* The try of socket s's take-over did not work (st and rcoll_err_get(), or no answer to the
 * connect within SOCK_TRY_NS): a failback gives up until the next time; a failover tries the
 * peer's next address, and fails the comm when a whole round was refused at once. */
static rcoll_status_t tcp_resume_next(tcp_comm_t *c, int s, rcoll_status_t st, int timed_out)
{
    tcp_resume_t *rs = &c->rs[s];
    char why[RCOLL_ERR_TEXT_MAX], addr[SOCK_ADDR_STR];

    snprintf(why, sizeof(why), "%s", timed_out ? "no answer within 2 s" : rcoll_err_get());
    rcoll_net_addr_str(&c->addrs[rs->ai], addr, sizeof(addr));
    if (rs->fd >= 0)
        close(rs->fd);
    rs->fd = -1;
    rs->state = 0;
    if (rs->planned && !rs->old_dead) {
        RCOLL_INFO(TCP, "tcp: %s does not take the connection back yet (%.200s); staying on "
                   "%s", addr, why, c->peer);
        return RCOLL_OK;
    }
    if (rs->planned) { /* going back failed, and the old socket is gone too: a failover */
        rs->planned = rs->old_dead = 0;
        rs->lost_ns = rcoll_now_ns();
    }
    size_t len = strlen(rs->tried);
    if (len < sizeof(rs->tried) - 1)
        snprintf(rs->tried + len, sizeof(rs->tried) - len, "%s%s: %.160s", len ? "; " : "",
                 addr, why);
    rs->refused = timed_out ? 0 : rs->refused + 1;
    if (rs->refused >= c->naddrs)
        return tcp_fail(c, rcoll_err_set(st == RCOLL_ERR_TIMEOUT ? RCOLL_ERR_REMOTE : st,
                                         "connection to %s lost (%s), and no address of the "
                                         "peer took it over (%.300s)", c->peer, rs->why,
                                         rs->tried));
    rs->ai = (rs->ai + 1) % c->naddrs;
    return tcp_resume_try(c, s);
}

static rcoll_status_t tcp_resume_try(tcp_comm_t *c, int s)
{
    tcp_resume_t *rs = &c->rs[s];

    rs->state = 1;
    rs->try_ns = rcoll_now_ns();
    rs->sent = rs->got = 0;
    rs->hello = (rcoll_tcp_hello_t){RCOLL_TCP_RESUME_MAGIC, RCOLL_TCP_VERSION, c->nonce,
                                    c->conn_id, (uint32_t)s, (uint32_t)c->nsocks,
                                    RCOLL_TCP_HELLO_FAILOVER, 0u};
    rcoll_status_t st = rcoll_net_connect_start(&c->addrs[rs->ai], &rs->fd);
    if (st != RCOLL_OK) {
        rs->fd = -1;
        return tcp_resume_next(c, s, st, 0);
    }
    return RCOLL_OK;
}

/* Start taking socket s over: after a failure (planned = 0, why: what the path said), through
 * the next address; to go back (planned = 1), through the first. */
static rcoll_status_t tcp_resume_start(tcp_comm_t *c, int s, int planned, const char *why)
{
    tcp_resume_t *rs = &c->rs[s];
    char addr[SOCK_ADDR_STR];

    if (rs->state) {
        if (!planned && rs->planned && rs->state == 1) { /* going back, and the old path died */
            rs->planned = 0;
            rs->lost_ns = rcoll_now_ns();
            snprintf(rs->why, sizeof(rs->why), "%s", why);
        } else if (!planned && rs->planned) {
            /* The hello is out: the receiver may have swapped to the new socket and closed the
             * old one (a reset here), so this is still going back; the old one rests. */
            rs->old_dead = 1;
            snprintf(rs->why, sizeof(rs->why), "%s", why);
        }
        return RCOLL_OK;
    }
    rs->planned = planned;
    rs->old_dead = 0;
    rs->lost_ns = planned ? 0 : rcoll_now_ns();
    snprintf(rs->why, sizeof(rs->why), "%s", planned ? "" : why);
    rs->tried[0] = '\0';
    rs->refused = 0;
    rs->ai = planned ? 0 : (c->ai[s] + 1) % c->naddrs;
    if (!planned)
        RCOLL_INFO(TCP, "tcp: connection to %s, socket %d: %s; taking it over through %s",
                   c->peer, s, why, rcoll_net_addr_str(&c->addrs[rs->ai], addr, sizeof(addr)));
    return tcp_resume_try(c, s);
}

/* The receiver answered socket s's take-over: it holds the first ans.count bytes of the
 * stream.  Swap the sockets and send again from there. */
static rcoll_status_t tcp_resume_done(tcp_comm_t *c, int s)
{
    tcp_resume_t *rs = &c->rs[s];
    uint64_t count = rs->ans.count;
    char addr[SOCK_ADDR_STR], old[SOCK_ADDR_STR];

    if (rs->ans.magic != RCOLL_TCP_RESUME_MAGIC || count < c->acked[s] ||
        count > c->bytes[s])
        return tcp_fail(c, rcoll_err_set(RCOLL_ERR_PROTOCOL, "bad take-over answer from %s "
                                         "(magic 0x%08x, holds %llu bytes of a stream of "
                                         "which %llu were sent and %llu acknowledged)",
                                         c->peer, (unsigned)rs->ans.magic,
                                         (unsigned long long)count,
                                         (unsigned long long)c->bytes[s],
                                         (unsigned long long)c->acked[s]));
    close(c->fd[s]);
    c->fd[s] = rs->fd;
    rs->fd = -1;
    rs->state = 0;
    rs->old_dead = 0;
    tcp_advance_cur(c, &c->ackcur[s], s, count - c->acked[s], 1);
    c->acked[s] = c->bytes[s] = count;
    c->cur[s] = c->ackcur[s];
    c->ackgot[s] = 0;
    rcoll_net_addr_str(&c->addrs[c->ai[s]], old, sizeof(old));
    c->ai[s] = rs->ai;
    rcoll_net_addr_str(&c->addrs[rs->ai], addr, sizeof(addr));
    snprintf(c->peer, sizeof(c->peer), "%s", addr);
    if (rs->planned) {
        if (tcp_fo_first_event(addr, 1))
            RCOLL_WARN(TCP, "tcp: %s answers again: connections are back on it", addr);
        else
            RCOLL_INFO(TCP, "tcp: connection back on %s (socket %d)", addr, s);
    } else {
        double secs = (double)(rcoll_now_ns() - rs->lost_ns) / 1e9;
        if (tcp_fo_first_event(old, 0))
            RCOLL_WARN(TCP, "tcp: path to %s lost (%s): connections moved to %s, %.3f s after "
                       "the loss was seen (said once per address and 10 s)", old, rs->why,
                       addr, secs);
        else
            RCOLL_INFO(TCP, "tcp: connection to %s, socket %d moved to %s in %.3f s (%s)", old,
                       s, addr, secs, rs->why);
    }
    if (c->ai[s] != 0)
        c->fb_next_ns = rcoll_now_ns() + SOCK_FAILBACK_NS;
    return RCOLL_OK;
}

/* Advance socket s's take-over: connect, send the resume hello, read the answer.  No time
 * limit once the hello is out: the receiver answers when it next looks (the caller's own
 * deadline bounds the wait). */
static rcoll_status_t tcp_resume_step(tcp_comm_t *c, int s)
{
    tcp_resume_t *rs = &c->rs[s];
    rcoll_status_t st;
    ssize_t rc;

    if (rs->state == 1) {
        st = rcoll_net_connect_check(rs->fd);
        if (st == RCOLL_INPROGRESS) {
            if (rcoll_now_ns() - rs->try_ns > SOCK_TRY_NS)
                return tcp_resume_next(c, s, RCOLL_ERR_TIMEOUT, 1);
            return RCOLL_OK;
        }
        if (st == RCOLL_OK)
            st = rcoll_net_set_nodelay(rs->fd);
        if (st != RCOLL_OK)
            return tcp_resume_next(c, s, st, 0);
        tcp_set_user_timeout(rs->fd);
        rs->state = 2;
    }
    if (rs->state == 2) {
        rc = send(rs->fd, (char *)&rs->hello + rs->sent, sizeof(rs->hello) - rs->sent,
                  MSG_DONTWAIT | MSG_NOSIGNAL);
        if (rc < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return tcp_resume_next(c, s, rcoll_err_set_errno(rcoll_status_from_errno(errno),
                                                             errno, "take-over hello"), 0);
        if (rc > 0)
            rs->sent += (uint32_t)rc;
        if (rs->sent < sizeof(rs->hello))
            return RCOLL_OK;
        rs->state = 3;
    }
    rc = recv(rs->fd, (char *)&rs->ans + rs->got, sizeof(rs->ans) - rs->got, MSG_DONTWAIT);
    if (rc == 0)
        return tcp_resume_next(c, s, rcoll_err_set(RCOLL_ERR_REMOTE, "closed without an "
                                                   "answer (the peer does not have this "
                                                   "connection any more)"), 0);
    if (rc < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            return RCOLL_OK;
        return tcp_resume_next(c, s, rcoll_err_set_errno(rcoll_status_from_errno(errno), errno,
                                                         "take-over answer"), 0);
    }
    rs->got += (uint32_t)rc;
    return rs->got < sizeof(rs->ans) ? RCOLL_OK : tcp_resume_done(c, s);
}

/* Whether socket fd's end of stream is the peer's close (a FIN), not the kernel's own. */
static int tcp_peer_closed(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
        return 1;
    return ti.tcpi_state == TCP_CLOSE_WAIT || ti.tcpi_state == TCP_LAST_ACK ||
           ti.tcpi_state == TCP_CLOSING;
}

rcoll_status_t tcp_path_error(tcp_comm_t *c, int s, int err, size_t *n_p)
{
    char why[160];

    *n_p = 0;
    if (err == 0)
        snprintf(why, sizeof(why), "closed by peer");
    else
        snprintf(why, sizeof(why), "%s", strerror(err));
    if (c->is_recv) {
        /* Only the sender's own close (a FIN: its process exited, or it closed the connection)
         * is final.  An end of stream on a socket that the kernel closed itself (the failover
         * timeout or the keepalives, whose error an acknowledgement's send may have taken) and a
         * reset (the sender's socket timed out the same way, and this one's keepalive reached
         * it once the path came back) leave the socket to be taken over; a sender that died
         * is found by the bootstrap, as without failover. */
        if (err == 0 && tcp_peer_closed(c->fd[s]))
            return tcp_io_error(c, 0);
        if (err == 0)
            snprintf(why, sizeof(why), "closed by the kernel (the path stopped answering)");
        if (!c->dead[s])
            RCOLL_INFO(TCP, "tcp: connection from %s, socket %d: %s; waiting for the sender to "
                       "take it over", c->peer, s, why);
        c->dead[s] = 1;
        return RCOLL_OK;
    }
    return tcp_resume_start(c, s, 0, why);
}

rcoll_status_t rcoll_tcp_debug_cut(void *send_comm, int s)
{
    tcp_comm_t *c = send_comm;
    if (!c || c->is_recv || s < 0 || s >= c->nsocks)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp debug cut: not a send comm, or no "
                             "socket %d", s);
    if (!c->fo)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "tcp debug cut: failover is off on this "
                             "connection");
    if (c->failed)
        return tcp_failed(c);
    return tcp_resume_start(c, s, 0, "cut by a test");
}

/* ---------------------------------------------------------------------------------------------
 * Sender: progress
 * ------------------------------------------------------------------------------------------ */

rcoll_status_t tcp_fo_send_pre(tcp_comm_t *c)
{
    int moved = 0;

    for (int s = 0; s < c->nsocks; s++) {
        if (c->rs[s].state) {
            rcoll_status_t st = tcp_resume_step(c, s);
            if (st != RCOLL_OK)
                return st;
        }
        moved |= c->ai[s] != 0;
        tcp_advance_cur(c, &c->ackcur[s], s, 0, 1); /* messages with nothing for socket s */
    }
    if (moved && c->naddrs > 1) {
        uint64_t now = rcoll_now_ns();
        if (now >= c->fb_next_ns) {
            c->fb_next_ns = now + SOCK_FAILBACK_NS;
            for (int s = 0; s < c->nsocks; s++)
                if (c->ai[s] != 0 && !c->rs[s].state) {
                    rcoll_status_t st = tcp_resume_start(c, s, 1, NULL);
                    if (st != RCOLL_OK)
                        return st;
                }
        }
    }
    return RCOLL_OK;
}

/* Read socket s's acknowledgements (8-byte stream positions) and retire what they cover. */
static rcoll_status_t tcp_fo_read_acks(tcp_comm_t *c, int s)
{
    uint8_t buf[256];
    size_t got = c->ackgot[s], dummy;

    memcpy(buf, c->ackbuf[s], got);
    for (;;) {
        size_t want = sizeof(buf) - got;
        ssize_t rc = recv(c->fd[s], buf + got, want, MSG_DONTWAIT);
        if (rc == 0)
            return tcp_path_error(c, s, 0, &dummy);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return tcp_path_error(c, s, errno, &dummy);
        }
        got += (size_t)rc;
        size_t whole = got / 8 * 8;
        if (whole > 0) {
            uint64_t v;
            memcpy(&v, buf + whole - 8, 8);
            if (v < c->acked[s] || v > c->bytes[s])
                return tcp_fail(c, rcoll_err_set(RCOLL_ERR_PROTOCOL, "bad acknowledgement from "
                                                 "%s (%llu bytes of a stream of which %llu "
                                                 "were sent and %llu acknowledged)", c->peer,
                                                 (unsigned long long)v,
                                                 (unsigned long long)c->bytes[s],
                                                 (unsigned long long)c->acked[s]));
            tcp_advance_cur(c, &c->ackcur[s], s, v - c->acked[s], 1);
            c->acked[s] = v;
            memmove(buf, buf + whole, got - whole);
            got -= whole;
        }
        if ((size_t)rc < want) /* the socket is drained */
            break;
    }
    memcpy(c->ackbuf[s], buf, got);
    c->ackgot[s] = (uint8_t)got;
    return RCOLL_OK;
}

/* Read the acknowledgements when a user waits for one (a send that was not copied), when the
 * requests or the copies run short, and on every 64th call (a dead path shows there too);
 * not on every call, which would cost a system call per socket each time. */
rcoll_status_t tcp_fo_send_acks(tcp_comm_t *c)
{
    if (!c->waiting && c->tail - c->head < RCOLL_TCP_MAX_REQS / 2 &&
        c->eager_bytes < SOCK_EAGER_BUDGET / 2 && ++c->ack_polls % 64 != 0)
        return RCOLL_OK;
    for (int s = 0; s < c->nsocks && !c->failed; s++) {
        if (TCP_PAUSED(c, s) || c->acked[s] == c->bytes[s])
            continue;
        rcoll_status_t st = tcp_fo_read_acks(c, s);
        if (st != RCOLL_OK)
            return st;
    }
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Receiver
 * ------------------------------------------------------------------------------------------ */

void tcp_fo_install(tcp_comm_t *c, int s, int fd)
{
    rcoll_tcp_resume_t ans = {RCOLL_TCP_RESUME_MAGIC, 0, c->bytes[s]};
    ssize_t rc = s < c->nsocks ? send(fd, &ans, sizeof(ans), MSG_DONTWAIT | MSG_NOSIGNAL) : -1;
    if (rc != (ssize_t)sizeof(ans)) { /* a fresh socket takes 16 bytes, or is dead */
        RCOLL_INFO(TCP, "tcp: connection from %s: could not answer a take-over of socket %d",
                   c->peer, s);
        close(fd);
        return;
    }
    tcp_set_user_timeout(fd);
    close(c->fd[s]);
    c->fd[s] = fd;
    c->dead[s] = 0;
    c->ack_off[s] = 0;
    c->ack_due[s] = 0;
    c->ack_last[s] = c->bytes[s];
    RCOLL_INFO(TCP, "tcp: connection from %s: socket %d taken over at byte %llu", c->peer, s,
               (unsigned long long)c->bytes[s]);
}

rcoll_status_t tcp_fo_recv_pre(tcp_comm_t *c)
{
    int fds[RCOLL_TCP_MAX_NSOCKS];

    if (!tcp_fo_take(c, fds))
        return RCOLL_OK;
    for (int s = 0; s < RCOLL_TCP_MAX_NSOCKS; s++)
        if (fds[s] >= 0)
            tcp_fo_install(c, s, fds[s]);
    return RCOLL_OK;
}

/* Acknowledge what was read: at once for a message larger than SOCK_EAGER_MAX (its sender
 * waits for it), for smaller ones (copied, their senders are not waiting) every SOCK_ACK_BATCH
 * bytes or SOCK_ACK_MSGS messages (before the sender runs out of requests), or when the
 * failover thread flushes (every SOCK_RESUME_POLL_NS), so that small messages cost no packet
 * back each. */
void tcp_fo_recv_post(tcp_comm_t *c, int flush)
{
    for (int s = 0; s < c->nsocks; s++) {
        if (c->dead[s])
            continue;
        if (!c->ack_off[s]) {
            if (!c->ack_due[s] || c->bytes[s] == c->ack_last[s]) {
                c->ack_due[s] = 0;
                continue;
            }
            if (c->ack_due[s] < 2 && !flush && c->bytes[s] - c->ack_last[s] < SOCK_ACK_BATCH &&
                c->ack_msgs[s] < SOCK_ACK_MSGS)
                continue;
            c->ack_due[s] = 0;
            c->ack_msgs[s] = 0;
            c->ack_val[s] = c->bytes[s];
        }
        ssize_t rc = send(c->fd[s], (char *)&c->ack_val[s] + c->ack_off[s], 8u - c->ack_off[s],
                          MSG_DONTWAIT | MSG_NOSIGNAL);
        if (rc > 0) {
            c->ack_off[s] = (uint8_t)(c->ack_off[s] + rc);
            if (c->ack_off[s] == 8) {
                c->ack_off[s] = 0;
                c->ack_last[s] = c->ack_val[s];
            }
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            c->ack_due[s] |= c->ack_off[s] == 0; /* again next time */
        } else {
            c->ack_off[s] = 0; /* the path is failing: the reads will say how */
        }
    }
}
