/*
 * socket.c - the TCP transport ("tcp"): one-directional connections made of 1..16 TCP sockets,
 * carrying framed messages between host buffers.  It knows nothing of ranks or collectives.
 * This file: init and devices, the data path and close; connection setup (listen, connect,
 * accept, the handshake) is in socket_conn.c.  Nothing blocks: connect/accept advance small
 * state machines, and bytes move only in test(), straight between the user's buffers and the
 * kernel.  It must never write past a posted buffer and never hand out a connection whose
 * handshake failed.
 *
 * Wire format (layouts in socket.h):
 *
 *   handshake, once per socket:  hello {magic, version, nonce, conn_id, index, nsocks}
 *
 *   a message shorter than stripe_min (or nsocks == 1) goes whole on socket 0:
 *       sock 0: [hdr magic|tag|len][............ payload ............]
 *
 *   a message of len >= stripe_min is split into nsocks contiguous, page-aligned parts:
 *       sock 0: [hdr][part 0]          payload = | part 0 | part 1 | part 2 | part 3 |
 *       sock 1:      [part 1]          the receiver derives the same split from len once
 *       sock 2:      [part 2]          it has read the header on socket 0
 *       sock 3:      [part 3]
 *
 * Each socket is a FIFO with its own cursor into the queue of posted messages, so messages
 * pipeline: socket 0 may carry message k+1 while socket 3 still carries part 3 of message k.
 * Requests still complete in posting order.
 */
#include "transport/tcp_int.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "util/log.h"
#include "util/time.h"

tcp_global_t tcp_g;

typedef struct {
    void *ptr;
    size_t size;
} tcp_mr_t;

/* ---------------------------------------------------------------------------------------------
 * Comms, requests and errors
 * ------------------------------------------------------------------------------------------ */

tcp_comm_t *tcp_comm_alloc(int is_recv, int nsocks, uint64_t stripe_min)
{
    tcp_comm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (is_recv) {
        c->stage = malloc(SOCK_STAGE_BYTES);
        if (!c->stage) {
            free(c);
            return NULL;
        }
    }
    pthread_mutex_init(&c->lock, NULL);
    c->is_recv = is_recv;
    c->nsocks = nsocks;
    c->stripe_min = stripe_min;
    for (int i = 0; i < RCOLL_TCP_MAX_NSOCKS; i++) {
        c->fd[i] = -1;
        c->incoming[i] = -1;
    }
    for (int i = 0; i < RCOLL_TCP_MAX_REQS; i++) {
        c->reqs[i].comm = c;
        c->free_reqs[i] = &c->reqs[RCOLL_TCP_MAX_REQS - 1 - i];
    }
    c->nfree = RCOLL_TCP_MAX_REQS;
    return c;
}

/* Free the copies of request r's messages (failover sends). */
static void tcp_req_free_copies(tcp_comm_t *c, tcp_req_t *r)
{
    if (r->copy) {
        c->eager_bytes -= r->msgs[0].length;
        free(r->copy);
        r->copy = NULL;
    }
    r->eager = r->orphan = 0;
}

void tcp_comm_free(tcp_comm_t *c)
{
    if (c->fo)
        tcp_fo_unregister(c); /* first: the failover thread lets go of it */
    for (int i = 0; i < RCOLL_TCP_MAX_REQS; i++)
        tcp_req_free_copies(c, &c->reqs[i]);
    for (int i = 0; i < RCOLL_TCP_MAX_NSOCKS; i++) {
        if (c->fd[i] >= 0)
            close(c->fd[i]);
        if (c->incoming[i] >= 0)
            close(c->incoming[i]);
        if (c->rs && i < c->nsocks && c->rs[i].fd >= 0)
            close(c->rs[i].fd);
    }
    free(c->rs);
    pthread_mutex_destroy(&c->lock);
    free(c->stage);
    free(c);
}

/* Data unacknowledged for the failover timeout fails the socket; so does an idle path that
 * stops answering keepalives (1 s idle, then every second): a sender waiting only for the
 * receiver's acknowledgement of data its kernel already delivered learns of a dead path too. */
void tcp_set_user_timeout(int fd)
{
    unsigned ms = (unsigned)(tcp_g.failover_timeout * 1000.0);
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &one, sizeof(one)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &one, sizeof(one)) < 0)
        RCOLL_INFO(TCP, "tcp: setsockopt(TCP_USER_TIMEOUT, keepalive): %s (a dead path is then "
                   "found by the kernel's own limits)", strerror(errno));
}

/* Mark the comm failed with st, whose detail rcoll_err_set() has just recorded. */
rcoll_status_t tcp_fail(tcp_comm_t *c, rcoll_status_t st)
{
    c->failed = st;
    snprintf(c->errtext, sizeof(c->errtext), "%s", rcoll_err_get());
    return st;
}

/* Report the comm's earlier failure again (later calls fail with the same status). */
rcoll_status_t tcp_failed(const tcp_comm_t *c)
{
    return rcoll_err_set(c->failed, "%s", c->errtext);
}

/* An I/O error (err 0 = EOF) on one of the comm's sockets. */
rcoll_status_t tcp_io_error(tcp_comm_t *c, int err)
{
    const char *dir = c->is_recv ? "from" : "to";
    rcoll_status_t st;

    if (err == 0 || err == ECONNRESET || err == EPIPE)
        st = rcoll_err_set(RCOLL_ERR_REMOTE, "connection %s %s closed by peer", dir, c->peer);
    else
        st = rcoll_err_set_errno(rcoll_status_from_errno(err), err, "%s on connection %s %s",
                                 c->is_recv ? "recv" : "send", dir, c->peer);
    return tcp_fail(c, st);
}

static tcp_req_t *tcp_req_get(tcp_comm_t *c)
{
    if (c->nfree == 0)
        return NULL;
    tcp_req_t *r = c->free_reqs[--c->nfree];
    r->in_use = 1;
    r->done = 0;
    return r;
}

static void tcp_req_put(tcp_comm_t *c, tcp_req_t *r)
{
    r->in_use = 0;
    c->free_reqs[c->nfree++] = r;
}

void rcoll_tcp_part(int nsocks, uint64_t stripe_min, uint64_t len, int s, uint64_t *off,
                    uint64_t *plen)
{
    if (nsocks == 1 || len < stripe_min) {
        *off = 0;
        *plen = s == 0 ? len : 0;
        return;
    }
    uint64_t chunk = (len + (uint64_t)nsocks - 1) / (uint64_t)nsocks;
    chunk = (chunk + SOCK_PART_ALIGN - 1) & ~(SOCK_PART_ALIGN - 1);
    uint64_t lo = (uint64_t)s * chunk, hi = lo + chunk;
    lo = lo < len ? lo : len;
    hi = hi < len ? hi : len;
    *off = lo;
    *plen = hi - lo;
}

/* Where socket s's part of a len-byte message lies (the split both ends compute). */
static void tcp_part(const tcp_comm_t *c, uint64_t len, int s, uint64_t *off, uint64_t *plen)
{
    rcoll_tcp_part(c->nsocks, c->stripe_min, len, s, off, plen);
}

static tcp_msg_t *tcp_cursor_msg(tcp_comm_t *c, const tcp_cursor_t *cur)
{
    return &c->ring[cur->seq % RCOLL_TCP_MAX_REQS]->msgs[cur->mi];
}

/* Socket s's cursor is finished with its message: step to the next one.  The cursor that
 * retires messages is the one whose passing makes them complete: a receiver's, a sender's
 * without failover, or (with failover) the sender's acknowledged position. */
static void tcp_cursor_next(tcp_comm_t *c, tcp_cursor_t *cur, int s, int retire)
{
    tcp_req_t *r = c->ring[cur->seq % RCOLL_TCP_MAX_REQS];
    if (retire && --r->msgs[cur->mi].pending == 0)
        r->pending--;
    if (c->fo && c->is_recv) { /* its sender waits for the acknowledgement of a large one */
        c->ack_due[s] = r->msgs[cur->mi].length > SOCK_EAGER_MAX ? 2 : c->ack_due[s] | 1;
        c->ack_msgs[s] += c->ack_msgs[s] < 255;
    }
    cur->off = 0;
    if (++cur->mi == r->nmsgs) {
        cur->mi = 0;
        cur->seq++;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Data path
 * ------------------------------------------------------------------------------------------ */

/* One sendmsg (send comm) or recvmsg (recv comm) on socket s.  *n_p = bytes moved, 0 when the
 * socket would block. */
static rcoll_status_t tcp_xfer(tcp_comm_t *c, int s, struct iovec *iov, int niov,
                                size_t *n_p)
{
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    for (;;) {
        ssize_t rc = c->is_recv ? recvmsg(c->fd[s], &mh, MSG_DONTWAIT)
                                : sendmsg(c->fd[s], &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (rc > 0) {
            *n_p = (size_t)rc;
            c->bytes[s] += (uint64_t)rc;
            rcoll_transport_moves++;
            /* Connections carry data one way, so the receiver's ACKs are never piggybacked on
             * data: without this, every small message costs a pure ACK packet on both hosts
             * (about 1 us on loopback).  Bulk streams still ACK every second full segment. */
            if (c->is_recv) {
                int zero = 0;
                setsockopt(c->fd[s], IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));
            }
            return RCOLL_OK;
        }
        if (rc == 0) /* EOF (only recv returns 0 for a non-empty iov) */
            return c->fo ? tcp_path_error(c, s, 0, n_p) : tcp_io_error(c, 0);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *n_p = 0;
            return RCOLL_OK;
        }
        return c->fo ? tcp_path_error(c, s, errno, n_p) : tcp_io_error(c, errno);
    }
}

/* Advance cursor cur of socket s by n bytes of its stream, past the messages it finishes
 * (including those with nothing for this socket), retiring them if `retire`.  Stops at a
 * message of unknown length. */
void tcp_advance_cur(tcp_comm_t *c, tcp_cursor_t *cur, int s, uint64_t n, int retire)
{
    uint64_t hb = s == 0 ? SOCK_HDR : 0;

    while (cur->seq < c->tail) {
        tcp_msg_t *m = tcp_cursor_msg(c, cur);
        uint64_t poff, plen;
        if (!m->known)
            return;
        tcp_part(c, m->length, s, &poff, &plen);
        uint64_t left = hb + plen - cur->off;
        if (left > n) {
            cur->off += n;
            return;
        }
        n -= left;
        tcp_cursor_next(c, cur, s, retire);
    }
}

/* Socket s's data cursor (a failover sender's retires nothing: its acknowledgements do). */
static void tcp_advance(tcp_comm_t *c, int s, uint64_t n)
{
    tcp_advance_cur(c, &c->cur[s], s, n, !(c->fo && !c->is_recv));
}

/* Move socket s's stream as far as the kernel allows: every socket of a send comm, and
 * sockets 1.. of a recv comm (whose parts have lengths known from socket 0's headers).
 * Gathers consecutive messages into one sendmsg/recvmsg. */
static rcoll_status_t tcp_stream_progress(tcp_comm_t *c, int s)
{
    tcp_cursor_t *cur = &c->cur[s];
    uint64_t hb = s == 0 ? SOCK_HDR : 0; /* only send comms come here with s == 0 */

    for (;;) {
        struct iovec iov[SOCK_IOV_MAX];
        int niov = 0;
        size_t total = 0, n = 0;

        tcp_advance(c, s, 0); /* step over messages with nothing for this socket */
        uint64_t seq = cur->seq, off = cur->off;
        int mi = cur->mi;
        while (seq < c->tail && niov <= SOCK_IOV_MAX - 2) {
            tcp_req_t *r = c->ring[seq % RCOLL_TCP_MAX_REQS];
            tcp_msg_t *m = &r->msgs[mi];
            uint64_t poff, plen;
            if (!m->known)
                break;
            tcp_part(c, m->length, s, &poff, &plen);
            if (off < hb) {
                iov[niov].iov_base = (char *)&m->hdr + off;
                iov[niov++].iov_len = hb - off;
                total += hb - off;
                off = hb;
            }
            if (off - hb < plen) {
                iov[niov].iov_base = m->data + poff + (off - hb);
                iov[niov++].iov_len = plen - (off - hb);
                total += plen - (off - hb);
            }
            off = 0;
            if (++mi == r->nmsgs) {
                mi = 0;
                seq++;
            }
        }
        if (total == 0)
            return RCOLL_OK;
        rcoll_status_t st = tcp_xfer(c, s, iov, niov, &n);
        if (st != RCOLL_OK)
            return st;
        tcp_advance(c, s, n);
        if (n < total) /* the kernel took (or had) less: try again on the next test() */
            return RCOLL_OK;
    }
}

/* Copy up to len staged bytes to dst; returns how many. */
static size_t tcp_unstage(tcp_comm_t *c, void *dst, uint64_t len)
{
    size_t take = len < c->stage_len ? (size_t)len : c->stage_len;
    memcpy(dst, c->stage + c->stage_off, take);
    c->stage_off += take;
    c->stage_len -= take;
    return take;
}

rcoll_tcp_frame_verdict_t rcoll_tcp_frame_check(const rcoll_tcp_frame_t *h, int posted_tag,
                                                uint64_t cap)
{
    if (h->magic != RCOLL_TCP_FRAME_MAGIC)
        return RCOLL_TCP_FRAME_BAD_MAGIC;
    if (posted_tag != -1 && h->tag != -1 && h->tag != posted_tag)
        return RCOLL_TCP_FRAME_TAG_MISMATCH;
    if (h->length > cap)
        return RCOLL_TCP_FRAME_TOO_LONG;
    return RCOLL_TCP_FRAME_OK;
}

/* A complete header was read into m->hdr: validate it against the posted buffer. */
static rcoll_status_t tcp_check_header(tcp_comm_t *c, tcp_msg_t *m)
{
    const rcoll_tcp_frame_t *h = &m->hdr;
    switch (rcoll_tcp_frame_check(h, m->tag, m->cap)) {
    case RCOLL_TCP_FRAME_BAD_MAGIC:
        return tcp_fail(c, rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                          "malformed frame from %s (magic 0x%08x)", c->peer,
                                          (unsigned)h->magic));
    /* The two sides disagree about this message: a usage error (transport.h). */
    case RCOLL_TCP_FRAME_TAG_MISMATCH:
        return tcp_fail(c, rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                          "tag mismatch from %s: receive posted with tag %d, "
                                          "message has tag %d",
                                          c->peer, m->tag, (int)h->tag));
    case RCOLL_TCP_FRAME_TOO_LONG:
        return tcp_fail(c, rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                          "message of %llu bytes from %s is larger than the "
                                          "posted receive buffer of %llu bytes",
                                          (unsigned long long)h->length, c->peer,
                                          (unsigned long long)m->cap));
    case RCOLL_TCP_FRAME_OK:
        break;
    }
    m->length = h->length;
    m->known = 1;
    return RCOLL_OK;
}

/* Receive on socket 0: headers and socket-0 payloads.  Reads go through a staging buffer so
 * that one recvmsg takes the rest of a payload (straight into the user's buffer) plus the
 * headers and small payloads behind it; staged bytes are copied out before reading again.
 * A read that returns less than asked means the socket is drained for this call. */
static rcoll_status_t tcp_recv_head(tcp_comm_t *c)
{
    tcp_cursor_t *cur = &c->cur[0];
    int drained = 0;
    rcoll_status_t st;

    while (cur->seq < c->tail) {
        tcp_msg_t *m = tcp_cursor_msg(c, cur);
        uint64_t poff, plen;
        size_t n;

        if (cur->off < SOCK_HDR) {
            if (c->stage_len == 0) {
                struct iovec iov = {.iov_base = c->stage, .iov_len = SOCK_STAGE_BYTES};
                if (drained)
                    return RCOLL_OK;
                st = tcp_xfer(c, 0, &iov, 1, &n);
                if (st != RCOLL_OK || n == 0)
                    return st;
                c->stage_off = 0;
                c->stage_len = n;
                drained = n < SOCK_STAGE_BYTES;
            }
            cur->off += tcp_unstage(c, (char *)&m->hdr + cur->off, SOCK_HDR - cur->off);
            if (cur->off < SOCK_HDR)
                continue;
            st = tcp_check_header(c, m);
            if (st != RCOLL_OK)
                return st;
        }
        tcp_part(c, m->length, 0, &poff, &plen);
        if (cur->off - SOCK_HDR < plen) {
            uint64_t want = plen - (cur->off - SOCK_HDR);
            char *dst = m->data + poff + (cur->off - SOCK_HDR);
            if (c->stage_len > 0) {
                cur->off += tcp_unstage(c, dst, want);
            } else {
                struct iovec iov[2] = {{.iov_base = dst, .iov_len = want},
                                       {.iov_base = c->stage, .iov_len = SOCK_STAGE_BYTES}};
                int niov = want >= SOCK_STAGE_DIRECT ? 1 : 2;
                if (drained)
                    return RCOLL_OK;
                st = tcp_xfer(c, 0, iov, niov, &n);
                if (st != RCOLL_OK || n == 0)
                    return st;
                size_t user = n < want ? n : (size_t)want;
                cur->off += user;
                c->stage_off = 0;
                c->stage_len = n - user;
                drained = n < want + (niov == 2 ? SOCK_STAGE_BYTES : 0);
            }
            if (cur->off - SOCK_HDR < plen)
                continue;
        }
        tcp_cursor_next(c, cur, 0, 1);
    }
    return RCOLL_OK;
}

/* Move all traffic of the comm that the sockets accept now, then retire finished requests
 * in posting order. */
static rcoll_status_t tcp_progress(tcp_comm_t *c)
{
    rcoll_status_t st = RCOLL_OK;
    int s = 0;

    if (c->fo)
        st = c->is_recv ? tcp_fo_recv_pre(c) : tcp_fo_send_pre(c);
    if (c->is_recv) {
        if (st == RCOLL_OK && !c->dead[0])
            st = tcp_recv_head(c);
        s = 1;
    }
    for (; st == RCOLL_OK && s < c->nsocks; s++)
        if (!c->dead[s] && !TCP_PAUSED(c, s))
            st = tcp_stream_progress(c, s);
    if (c->fo && st == RCOLL_OK) {
        if (c->is_recv)
            tcp_fo_recv_post(c, 0);
        else
            st = tcp_fo_send_acks(c);
    }
    while (c->head < c->tail && c->ring[c->head % RCOLL_TCP_MAX_REQS]->pending == 0) {
        tcp_req_t *r = c->ring[c->head % RCOLL_TCP_MAX_REQS];
        r->done = 1;
        c->head++;
        c->waiting -= c->fo && !c->is_recv && !r->eager;
        if (r->orphan) { /* its user has had it as complete since its data was copied */
            tcp_req_free_copies(c, r);
            tcp_req_put(c, r);
        }
    }
    return st;
}

void tcp_fo_background(tcp_comm_t *c)
{
    /* Only what its user has left: a comm in use is progressed by its own calls. */
    if (c->failed || rcoll_now_ns() - c->user_ns < SOCK_RESUME_POLL_NS)
        return;
    if (c->is_recv)
        tcp_fo_recv_post(c, 1); /* the acknowledgements held back */
    else if (c->head < c->tail)
        (void)tcp_progress(c); /* a failure stays in c->failed for the next call */
}

static rcoll_status_t tcp_isend_locked(tcp_comm_t *c, void *data, size_t size, int tag,
                                       void **request);

static rcoll_status_t tcp_isend(void *send_comm, void *data, size_t size, int tag,
                                 void *mhandle, void **request)
{
    tcp_comm_t *c = send_comm;
    if (!c || !c->fo)
        return tcp_isend_locked(c, data, size, tag, request);
    pthread_mutex_lock(&c->lock); /* the failover thread may be progressing it */
    if (c->nfree == 0 && !c->failed)
        (void)tcp_progress(c); /* sends its user let go of hold the requests: retire them */
    rcoll_status_t st = tcp_isend_locked(c, data, size, tag, request);
    pthread_mutex_unlock(&c->lock);
    (void)mhandle;
    return st;
}

static rcoll_status_t tcp_isend_locked(tcp_comm_t *c, void *data, size_t size, int tag,
                                       void **request)
{
    /* sockets need no registration */
    if (!c || c->is_recv || !request || (size > 0 && !data))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp isend: bad comm, data or request");
    if (size > SOCK_MAX_MSG)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp isend: %zu bytes exceed the %zu-byte "
                             "message limit", size, SOCK_MAX_MSG);
    if (c->failed)
        return tcp_failed(c);
    tcp_req_t *r = tcp_req_get(c);
    if (!r) {
        *request = NULL;
        return RCOLL_OK;
    }
    tcp_msg_t *m = &r->msgs[0];
    m->data = data;
    m->cap = m->length = size;
    m->tag = tag;
    m->known = 1;
    m->pending = c->nsocks;
    m->hdr = (rcoll_tcp_frame_t){RCOLL_TCP_FRAME_MAGIC, tag, size};
    r->copy = NULL;
    r->eager = 0;
    /* Failover: a send completes when the receiver has read it, unless it is small enough to
     * be copied (so that small sends still complete before the receive is posted, as the
     * kernel's buffers let them without failover). */
    if (c->fo && size <= SOCK_EAGER_MAX && c->eager_bytes + size <= SOCK_EAGER_BUDGET &&
        (r->copy = malloc(size ? size : 1)) != NULL) {
        memcpy(r->copy, data, size);
        m->data = r->copy;
        c->eager_bytes += size;
        r->eager = 1;
    }
    c->waiting += c->fo && !r->eager;
    r->nmsgs = 1;
    r->pending = 1;
    r->seq = c->tail;
    c->ring[c->tail++ % RCOLL_TCP_MAX_REQS] = r;
    *request = r;
    return RCOLL_OK;
}

static rcoll_status_t tcp_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                                 void **mhandles, void **request)
{
    tcp_comm_t *c = recv_comm;
    (void)mhandles;

    if (!c || !c->is_recv || !request || n < 1 || n > RCOLL_TRANSPORT_MAX_RECVS || !data ||
        !sizes)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp irecv: bad comm, buffer count (%d, "
                             "at most %d), buffers or request", n, RCOLL_TRANSPORT_MAX_RECVS);
    for (int i = 0; i < n; i++)
        if (sizes[i] > 0 && !data[i])
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp irecv: buffer %d is NULL", i);
    if (c->failed)
        return tcp_failed(c);
    tcp_req_t *r = tcp_req_get(c);
    if (!r) {
        *request = NULL;
        return RCOLL_OK;
    }
    for (int i = 0; i < n; i++) {
        tcp_msg_t *m = &r->msgs[i];
        m->data = data[i];
        m->cap = sizes[i];
        m->length = 0;
        m->tag = tags ? tags[i] : -1;
        m->known = 0;
        m->pending = c->nsocks;
    }
    r->nmsgs = n;
    r->pending = n;
    c->ring[c->tail++ % RCOLL_TCP_MAX_REQS] = r;
    *request = r;
    return RCOLL_OK;
}

static rcoll_status_t tcp_test_locked(tcp_req_t *r, int *done, size_t *sizes)
{
    tcp_comm_t *c = r->comm;
    rcoll_status_t st = RCOLL_OK;

    if (!c->failed)
        st = tcp_progress(c);
    if (r->done) {
        if (sizes)
            for (int i = 0; i < r->nmsgs; i++)
                sizes[i] = r->msgs[i].length;
        tcp_req_free_copies(c, r);
        tcp_req_put(c, r);
        *done = 1;
        return RCOLL_OK;
    }
    int written = r->eager;
    for (int s = 0; s < c->nsocks && written; s++)
        written = c->cur[s].seq > r->seq;
    if (written && !c->failed) {
        /* Copied and all in the kernel, as a send completes without failover; retired when
         * acknowledged (tcp_progress), sent again from the copy if its path dies first. */
        r->orphan = 1;
        r->in_use = 0;
        *done = 1;
        return RCOLL_OK;
    }
    if (c->failed) {
        tcp_req_free_copies(c, r);
        tcp_req_put(c, r);
        /* a failure detected just now already carries its text; an older one is repeated */
        return st != RCOLL_OK ? st : tcp_failed(c);
    }
    *done = 0;
    return RCOLL_OK;
}

static rcoll_status_t tcp_test(void *request, int *done, size_t *sizes)
{
    tcp_req_t *r = request;

    if (!r || !done)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp test: NULL request or done");
    if (!r->in_use)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "tcp test: request already completed");
    tcp_comm_t *c = r->comm;
    if (!c->fo)
        return tcp_test_locked(r, done, sizes);
    pthread_mutex_lock(&c->lock); /* the failover thread may answer a take-over, or send */
    c->user_ns = rcoll_now_ns();
    rcoll_status_t st = tcp_test_locked(r, done, sizes);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Device, memory registration
 * ------------------------------------------------------------------------------------------ */

static int tcp_is_loopback(void)
{
    const rcoll_sockaddr_t *a = &tcp_g.addr;
    if (strcmp(tcp_g.ifname, "lo") == 0)
        return 1;
    if (a->sa.sa_family == AF_INET)
        return (ntohl(a->sin.sin_addr.s_addr) >> 24) == 127;
    return a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr);
}

static const char *const tcp_failover_names[] = {"auto", "on", "off", NULL};

static const rcoll_knob_t tcp_knobs[] = {
    RCOLL_KNOB_SUBTABLE(rcoll_tcp_config_t, netif, rcoll_net_config_table),
    RCOLL_KNOB_NUM(rcoll_tcp_config_t, "RCOLL_SOCKET_NSOCKS", "2", INT, nsocks, 1,
                   RCOLL_TCP_MAX_NSOCKS,
                   "TCP sockets per connection (large messages are striped over them)"),
    RCOLL_KNOB_NUM(rcoll_tcp_config_t, "RCOLL_SOCKET_STRIPE_MIN", "256K", SIZE, stripe_min, 0,
                   1LL << 40, "messages of at least this many bytes are striped over all sockets"),
    RCOLL_KNOB_ENUM_OF(rcoll_tcp_config_t, "RCOLL_SOCKET_FAILOVER", "auto", failover,
                       tcp_failover_names,
                       "keep connections through a dead path on another of the peer's "
                       "addresses: auto (when it listens on several), on, off"),
    RCOLL_KNOB_NUM(rcoll_tcp_config_t, "RCOLL_SOCKET_FAILOVER_TIMEOUT", "2", SECONDS,
                   failover_timeout, 0, 3600,
                   "failover: a path whose data goes unacknowledged this long is left"),
};
const rcoll_config_table_t rcoll_tcp_config_table =
    RCOLL_CONFIG_TABLE("tcp", tcp_knobs, rcoll_tcp_config_t);

static rcoll_status_t tcp_init(const void *knobs)
{
    const rcoll_tcp_config_t *cfg = knobs;
    char addr[SOCK_ADDR_STR];

    if (!cfg)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp init: NULL configuration");
    int na = rcoll_net_pick_addrs(cfg->netif.socket_ifname, tcp_g.addrs, tcp_g.ifnames,
                                  RCOLL_TCP_MAX_ADDRS);
    if (na < 1) {
        char why[RCOLL_ERR_TEXT_MAX]; /* copied: err_set must not read its own buffer */
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "tcp transport unavailable: %s", why);
    }
    tcp_g.naddrs = na;
    tcp_g.addr = tcp_g.addrs[0];
    snprintf(tcp_g.ifname, sizeof(tcp_g.ifname), "%s", tcp_g.ifnames[0]);
    for (int k = 1; k < na; k++)
        RCOLL_INFO(TCP, "tcp: also listening on %s (%s): a peer that cannot reach %s tries it",
                   tcp_g.ifnames[k], rcoll_net_addr_str(&tcp_g.addrs[k], addr, sizeof(addr)),
                   tcp_g.ifname);
    tcp_g.nsocks = cfg->nsocks < 1 ? 1 : cfg->nsocks;
    tcp_g.nsocks = tcp_g.nsocks > RCOLL_TCP_MAX_NSOCKS ? RCOLL_TCP_MAX_NSOCKS : tcp_g.nsocks;
    tcp_g.stripe_min = cfg->stripe_min;
    tcp_g.failover = cfg->failover;
    tcp_g.failover_timeout = cfg->failover_timeout;
    tcp_g.inited = 1;
    RCOLL_INFO(TCP, "tcp: device %s (%s), %d socket(s) per connection, striping messages "
               "of %llu bytes and more", tcp_g.ifname,
               rcoll_net_addr_str(&tcp_g.addr, addr, sizeof(addr)), tcp_g.nsocks,
               (unsigned long long)tcp_g.stripe_min);
    return RCOLL_OK;
}

static rcoll_status_t tcp_devices(int *ndev)
{
    if (!ndev)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp devices: NULL ndev");
    *ndev = 1;
    return RCOLL_OK;
}

static rcoll_status_t tcp_get_props(int dev, rcoll_transport_props_t *props)
{
    char path[128];
    int speed = 0;

    if (!tcp_g.inited)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "tcp get_props before init");
    if (dev != 0 || !props)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp get_props: bad device %d or NULL "
                             "props", dev);
    memset(props, 0, sizeof(*props));
    snprintf(props->name, sizeof(props->name), "%s", tcp_g.ifname);
    if (tcp_is_loopback()) {
        speed = 100000;
    } else {
        snprintf(path, sizeof(path), "/sys/class/net/%s/speed", tcp_g.ifname);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &speed) != 1)
                speed = 0;
            fclose(f);
        }
        if (speed <= 0) /* virtual NICs report -1 or nothing */
            speed = 10000;
    }
    props->ptr_support = RCOLL_PTR_HOST;
    props->speed_mbps = speed;
    props->latency_us = tcp_is_loopback() ? 10.0f : 50.0f;
    props->max_comms = 65536;
    props->max_recvs = RCOLL_TRANSPORT_MAX_RECVS;
    props->max_msg_size = SOCK_MAX_MSG;
    return RCOLL_OK;
}

static rcoll_status_t tcp_reg_mr(void *comm, void *data, size_t size, int mem_type,
                                  void **mhandle)
{
    if (!comm || !mhandle)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp reg_mr: NULL comm or mhandle");
    if (mem_type != RCOLL_PTR_HOST)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "tcp transport moves host memory only "
                             "(asked to register memory type %d)", mem_type);
    tcp_mr_t *mr = malloc(sizeof(*mr));
    if (!mr)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "tcp reg_mr: out of memory");
    mr->ptr = data;
    mr->size = size;
    *mhandle = mr;
    return RCOLL_OK;
}

static rcoll_status_t tcp_dereg_mr(void *comm, void *mhandle)
{
    (void)comm;
    free(mhandle);
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Close, fini, ops table
 * ------------------------------------------------------------------------------------------ */

static rcoll_status_t tcp_close_comm(void *comm, int is_recv)
{
    tcp_comm_t *c = comm;
    if (!c || c->is_recv != is_recv)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp close: NULL or wrong kind of comm");
    tcp_comm_free(c); /* outstanding requests live inside the comm */
    return RCOLL_OK;
}

static rcoll_status_t tcp_close_send(void *send_comm) { return tcp_close_comm(send_comm, 0); }

static rcoll_status_t tcp_close_recv(void *recv_comm) { return tcp_close_comm(recv_comm, 1); }

static void tcp_fini(void)
{
    tcp_conn_fini();
    memset(&tcp_g, 0, sizeof(tcp_g));
}

const rcoll_transport_ops_t rcoll_transport_tcp = {
    .name = "tcp",
    .config = &rcoll_tcp_config_table,
    .init = tcp_init,
    .devices = tcp_devices,
    .get_props = tcp_get_props,
    .describe = rcoll_transport_stub_describe,
    .listen = tcp_listen,
    .connect = tcp_connect,
    .accept = tcp_accept,
    .reg_mr = tcp_reg_mr,
    .dereg_mr = tcp_dereg_mr,
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .iflush = rcoll_transport_stub_iflush,
    .test = tcp_test,
    .close_send = tcp_close_send,
    .close_recv = tcp_close_recv,
    .close_listen = tcp_close_listen,
    .fini = tcp_fini,
};
