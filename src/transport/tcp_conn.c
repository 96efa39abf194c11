/*
 * socket_conn.c - setting up connections of the TCP transport: listen, accept (handshake of
 * every socket: hello with nonce, connection id and index; grouping a connection's sockets;
 * caps on half-open sockets) and connect (a non-blocking state machine per connection, kept
 * in a process-wide table).  The data path over the finished connection is in socket.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "transport/tcp_int.h"
#include "util/log.h"
#include "util/time.h"

static pthread_mutex_t tcp_conn_lock = PTHREAD_MUTEX_INITIALIZER;
/* Live listeners and failover receivers: accept() and the failover poll share the listeners'
 * state under this lock. */
static pthread_mutex_t tcp_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static tcp_listen_t *tcp_listeners;
static tcp_comm_t *tcp_fo_comms;
/* The failover thread: running while there is a failover comm; a thread ends when the
 * generation it was started with is over (the last comm went, or fini), and is joined by
 * whoever ended it. */
static pthread_t tcp_fo_thread;
static pthread_cond_t tcp_fo_cond = PTHREAD_COND_INITIALIZER;
static int tcp_fo_running;
static uintptr_t tcp_fo_gen;
static void tcp_fo_thread_start(void);
static tcp_connecting_t tcp_conn_tab[SOCK_MAX_CONNECTING];
static uint64_t tcp_conn_seq;

/* ---------------------------------------------------------------------------------------------
 * Listen / accept
 * ------------------------------------------------------------------------------------------ */

rcoll_status_t tcp_listen(int dev, void *handle, void **listen_comm)
{
    rcoll_tcp_handle_t h;
    rcoll_status_t st = RCOLL_OK;

    if (!tcp_g.inited)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "tcp listen before init");
    if (dev != 0 || !handle || !listen_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp listen: bad device %d or NULL "
                             "handle/listen_comm", dev);
    tcp_listen_t *l = calloc(1, sizeof(*l));
    if (!l)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "tcp listen: out of memory");
    memset(&h, 0, sizeof(h));
    /* One listening socket per address: the first is the handle's, the others its
     * alternatives (one that cannot be bound now is left out; the first must be). */
    for (int k = 0; k < tcp_g.naddrs; k++) {
        rcoll_sockaddr_t addr = tcp_g.addrs[k];
        rcoll_net_addr_set_port(&addr, 0);
        int fd = -1;
        st = rcoll_net_listen(&addr, SOCK_LISTEN_BACKLOG, 0, &fd);
        if (st != RCOLL_OK) {
            if (k == 0)
                goto err_close;
            RCOLL_INFO(TCP, "tcp: not listening on %s too: %s", tcp_g.ifnames[k],
                       rcoll_err_get());
            st = RCOLL_OK;
            continue;
        }
        l->fds[l->nfds++] = fd;
        if (k == 0) {
            h.addr = addr;
            continue;
        }
        rcoll_tcp_alt_t *a = &h.alt[h.nalt++];
        a->family = (uint16_t)addr.sa.sa_family;
        a->port = rcoll_net_addr_port(&addr);
        if (addr.sa.sa_family == AF_INET)
            memcpy(a->ip, &addr.sin.sin_addr, 4);
        else
            memcpy(a->ip, &addr.sin6.sin6_addr, 16);
    }
    l->fd = l->fds[0];
    st = rcoll_random_bytes(&l->nonce, sizeof(l->nonce));
    if (st != RCOLL_OK)
        goto err_close;
    l->nsocks = (uint32_t)tcp_g.nsocks;
    l->stripe_min = tcp_g.stripe_min;

    h.magic = RCOLL_TCP_HANDLE_MAGIC;
    h.version = RCOLL_TCP_VERSION;
    h.nonce = l->nonce;
    h.stripe_min = l->stripe_min;
    h.nsocks = l->nsocks;
    memset(handle, 0, RCOLL_TRANSPORT_HANDLE_BYTES);
    memcpy(handle, &h, sizeof(h));
    pthread_mutex_lock(&tcp_reg_lock);
    l->next = tcp_listeners;
    tcp_listeners = l;
    pthread_mutex_unlock(&tcp_reg_lock);
    *listen_comm = l;
    return RCOLL_OK;

err_close:
    for (int k = 0; k < l->nfds; k++)
        close(l->fds[k]);
    free(l);
    return st;
}

/* Close pending socket i with one WARN naming the peer, and forget it. */
static void tcp_half_drop(tcp_listen_t *l, int i, const char *why)
{
    char addr[SOCK_ADDR_STR];
    tcp_half_t *h = &l->half[i];

    RCOLL_WARN(TCP, "tcp: dropping connection from %s: %s",
               rcoll_net_addr_str(&h->peer, addr, sizeof(addr)), why);
    close(h->fd);
    l->nhandshake -= !h->ready;
    l->half[i] = l->half[--l->nhalf];
}

/* Make room for one more accepted socket by dropping the oldest one that is over a cap. */
static void tcp_half_make_room(tcp_listen_t *l)
{
    int shaking = l->nhandshake >= RCOLL_TCP_MAX_HALF_OPEN, oldest = -1;

    if (!shaking && l->nhalf < SOCK_MAX_PENDING)
        return;
    for (int j = 0; j < l->nhalf; j++)
        if ((!shaking || !l->half[j].ready) &&
            (oldest < 0 || l->half[j].seq < l->half[oldest].seq))
            oldest = j;
    tcp_half_drop(l, oldest, shaking ? "too many half-open connections (oldest dropped)"
                                      : "too many connections waiting for their other "
                                        "sockets (oldest dropped)");
}

const char *rcoll_tcp_hello_check(const rcoll_tcp_hello_t *m, size_t got, uint64_t nonce,
                                  uint32_t nsocks)
{
    if (got >= sizeof(m->magic) && m->magic != RCOLL_TCP_HELLO_MAGIC &&
        m->magic != RCOLL_TCP_RESUME_MAGIC)
        return "not an rcoll tcp handshake (bad magic)";
    if (got >= offsetof(rcoll_tcp_hello_t, nonce) && m->version != RCOLL_TCP_VERSION)
        return "unsupported handshake version";
    if (got < sizeof(*m))
        return NULL;
    if (m->nonce != nonce)
        return "wrong nonce (handshake for another listener)";
    if (m->nsocks != nsocks || m->index >= m->nsocks)
        return "bad socket count or index";
    return NULL;
}

/* Why the hello received so far is unacceptable (checked as its bytes arrive), or NULL. */
static const char *tcp_hello_check(const tcp_listen_t *l, const tcp_half_t *h)
{
    const rcoll_tcp_hello_t *m = &h->hello;
    const char *bad = rcoll_tcp_hello_check(m, h->got, l->nonce, l->nsocks);
    if (bad || h->got < sizeof(*m) || m->magic == RCOLL_TCP_RESUME_MAGIC)
        return bad;
    for (int j = 0; j < l->nhalf; j++) {
        const tcp_half_t *o = &l->half[j];
        if (o->ready && o->hello.conn_id == m->conn_id && o->hello.index == m->index)
            return "duplicate socket index";
    }
    return NULL;
}

/* Read what has arrived of socket i's hello: -1 dropped (half[i] now holds another socket),
 * 0 still incomplete, 1 complete and valid. */
static int tcp_half_read(tcp_listen_t *l, int i)
{
    tcp_half_t *h = &l->half[i];
    char why[128];

    for (;;) {
        ssize_t rc = recv(h->fd, (char *)&h->hello + h->got, sizeof(h->hello) - h->got,
                          MSG_DONTWAIT);
        if (rc == 0) {
            tcp_half_drop(l, i, "closed during the handshake");
            return -1;
        }
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            snprintf(why, sizeof(why), "handshake failed: %s", strerror(errno));
            tcp_half_drop(l, i, why);
            return -1;
        }
        h->got += (uint32_t)rc;
        const char *bad = tcp_hello_check(l, h);
        if (bad) {
            tcp_half_drop(l, i, bad);
            return -1;
        }
        if (h->got == sizeof(h->hello)) {
            h->ready = 1;
            l->nhandshake--;
            return 1;
        }
    }
}

/* half[i] just completed its hello: if that completes its connection, build the recv comm
 * (a connection can only complete when one of its sockets does, so this is checked once). */
static rcoll_status_t tcp_group(tcp_listen_t *l, int i, tcp_comm_t **comm_p)
{
    uint64_t id = l->half[i].hello.conn_id;
    uint32_t count = 0;

    for (int j = 0; j < l->nhalf; j++)
        if (l->half[j].ready && l->half[j].hello.conn_id == id)
            count++;
    if (count < l->nsocks)
        return RCOLL_OK;
    tcp_comm_t *c = tcp_comm_alloc(1, (int)l->nsocks, l->stripe_min);
    if (!c)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "tcp accept: out of memory");
    c->fo = (l->half[i].hello.flags & RCOLL_TCP_HELLO_FAILOVER) != 0;
    c->nonce = l->nonce;
    c->conn_id = id;
    for (int j = l->nhalf - 1; j >= 0; j--) { /* backwards: removal swaps in the last */
        tcp_half_t *h = &l->half[j];
        if (!h->ready || h->hello.conn_id != id)
            continue;
        c->fd[h->hello.index] = h->fd;
        if (c->fo)
            tcp_set_user_timeout(h->fd);
        if (h->hello.index == 0)
            rcoll_net_addr_str(&h->peer, c->peer, sizeof(c->peer));
        *h = l->half[--l->nhalf];
    }
    if (c->fo) { /* the caller holds tcp_reg_lock */
        c->reg_next = tcp_fo_comms;
        tcp_fo_comms = c;
        tcp_fo_thread_start();
    }
    *comm_p = c;
    return RCOLL_OK;
}

/* A complete resume hello in half[i]: hand the socket to the failover receiver of its
 * connection (tcp.c answers it), or drop it when this listener has no such connection (the
 * sender then gives up on it).  half[i] then holds another socket. */
static void tcp_half_route(tcp_listen_t *l, int i)
{
    tcp_half_t *h = &l->half[i];
    tcp_comm_t *c = tcp_fo_comms;

    while (c && (!c->is_recv || c->nonce != l->nonce || c->conn_id != h->hello.conn_id))
        c = c->reg_next;
    if (!c) {
        RCOLL_INFO(TCP, "tcp: a socket came to take over a connection this listener does not "
                   "have (closed, or never made)");
        close(h->fd);
        l->half[i] = l->half[--l->nhalf];
        return;
    }
    if (pthread_mutex_trylock(&c->lock) == 0) { /* the receiver is not in test(): answer */
        int fds[RCOLL_TCP_MAX_NSOCKS];
        for (int s = 0; s < RCOLL_TCP_MAX_NSOCKS; s++) { /* older ones first */
            fds[s] = c->incoming[s];
            c->incoming[s] = -1;
        }
        atomic_store((_Atomic int *)&c->incoming_any, 0);
        if (fds[h->hello.index] >= 0)
            close(fds[h->hello.index]); /* an older try of the same socket */
        fds[h->hello.index] = h->fd;
        for (int s = 0; s < RCOLL_TCP_MAX_NSOCKS; s++)
            if (fds[s] >= 0)
                tcp_fo_install(c, s, fds[s]);
        pthread_mutex_unlock(&c->lock);
    } else { /* test() takes it (tcp_fo_take) */
        if (c->incoming[h->hello.index] >= 0)
            close(c->incoming[h->hello.index]); /* an older try of the same socket */
        c->incoming[h->hello.index] = h->fd;
        atomic_store_explicit((_Atomic int *)&c->incoming_any, 1, memory_order_release);
    }
    l->half[i] = l->half[--l->nhalf];
}

/* Read the hello of pending socket i; if that completes a connection, *c is its comm (with
 * c NULL, from the failover poll: the connection waits in half[] for accept() to group it).
 * Returns 1 when half[i] was dropped or routed (and now holds another socket). */
static int tcp_half_step(tcp_listen_t *l, int i, tcp_comm_t **c, rcoll_status_t *st)
{
    tcp_half_t *h = &l->half[i];
    int r = h->ready ? 0 : tcp_half_read(l, i);
    if (r < 0)
        return 1;
    if (r > 0 && h->hello.magic == RCOLL_TCP_RESUME_MAGIC) {
        tcp_half_route(l, i);
        return 1;
    }
    if ((r > 0 || h->ungrouped) && !c) {
        h->ungrouped = 1;
        return 0;
    }
    if (r > 0 || h->ungrouped) {
        h->ungrouped = 0;
        *st = tcp_group(l, i, c);
    }
    return 0;
}

/* Accepted sockets are read at once (a connector sends its hello right after connecting),
 * so a burst of valid connections never counts against the half-open cap.  Returns at the
 * first connection that completes; the rest wait, their bytes safe in the kernel. */
/* Read pending sockets and accept new ones until a connection completes (*c, when c is not
 * NULL) or nothing more is waiting; the caller holds tcp_reg_lock. */
static rcoll_status_t tcp_listen_step(tcp_listen_t *l, tcp_comm_t **c)
{
    rcoll_status_t st = RCOLL_OK;
    tcp_comm_t *none = NULL, **cp = c ? c : &none;

    for (int i = 0; i < l->nhalf && !*cp && st == RCOLL_OK;)
        if (!tcp_half_step(l, i, c, &st))
            i++;
    for (int k = 0; k < l->nfds && !*cp && st == RCOLL_OK; k++) {
        while (!*cp && st == RCOLL_OK) { /* then whatever waits on the backlogs */
            tcp_half_t h;
            memset(&h, 0, sizeof(h));
            st = rcoll_net_accept(l->fds[k], &h.fd, &h.peer);
            if (st != RCOLL_OK)
                break;
            tcp_half_make_room(l);
            h.seq = l->seq++;
            l->half[l->nhalf++] = h;
            l->nhandshake++;
            tcp_half_step(l, l->nhalf - 1, c, &st);
        }
        if (st == RCOLL_INPROGRESS && k + 1 < l->nfds)
            st = RCOLL_OK; /* this backlog is empty: the next one */
    }
    return st;
}

rcoll_status_t tcp_accept(void *listen_comm, void **recv_comm)
{
    tcp_listen_t *l = listen_comm;
    tcp_comm_t *c = NULL;

    if (!l || !recv_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp accept: NULL listen_comm/recv_comm");
    pthread_mutex_lock(&tcp_reg_lock);
    rcoll_status_t st = tcp_listen_step(l, &c);
    pthread_mutex_unlock(&tcp_reg_lock);
    if (st != RCOLL_OK && st != RCOLL_INPROGRESS)
        return st;
    *recv_comm = c;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Failover receivers
 * ------------------------------------------------------------------------------------------ */

/* Under tcp_reg_lock: end the failover thread's generation; the caller joins *t (when it
 * returns 1) after unlocking. */
static int tcp_fo_thread_end(pthread_t *t)
{
    if (!tcp_fo_running)
        return 0;
    tcp_fo_gen++;
    pthread_cond_broadcast(&tcp_fo_cond);
    tcp_fo_running = 0;
    *t = tcp_fo_thread;
    return 1;
}

void tcp_fo_unregister(tcp_comm_t *c)
{
    pthread_t t;
    int join = 0;

    pthread_mutex_lock(&tcp_reg_lock);
    for (tcp_comm_t **p = &tcp_fo_comms; *p; p = &(*p)->reg_next)
        if (*p == c) {
            *p = c->reg_next;
            break;
        }
    if (!tcp_fo_comms) /* the last one: no thread left behind */
        join = tcp_fo_thread_end(&t);
    pthread_mutex_unlock(&tcp_reg_lock);
    if (join)
        pthread_join(t, NULL);
}

/* While there is a failover receiver: every SOCK_RESUME_POLL_NS, the listeners' new sockets
 * (taking-over ones are routed, and answered at once when their receiver is not in test()). */
static void *tcp_fo_thread_main(void *arg)
{
    uintptr_t gen = (uintptr_t)arg;
    pthread_mutex_lock(&tcp_reg_lock);
    while (gen == tcp_fo_gen) {
        for (tcp_listen_t *l = tcp_listeners; l; l = l->next)
            (void)tcp_listen_step(l, NULL); /* errors are accept()'s to report */
        for (tcp_comm_t *c = tcp_fo_comms; c; c = c->reg_next) /* what nobody tests */
            if (pthread_mutex_trylock(&c->lock) == 0) {
                tcp_fo_background(c);
                pthread_mutex_unlock(&c->lock);
            }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)SOCK_RESUME_POLL_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&tcp_fo_cond, &tcp_reg_lock, &ts); /* or woken to end */
    }
    pthread_mutex_unlock(&tcp_reg_lock);
    return NULL;
}

/* Under tcp_reg_lock. */
static void tcp_fo_thread_start(void)
{
    if (tcp_fo_running)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals are the application's threads' */
    int rc = pthread_create(&tcp_fo_thread, NULL, tcp_fo_thread_main, (void *)tcp_fo_gen);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        RCOLL_WARN(TCP, "tcp: cannot start the failover thread (%s): a take-over is answered "
                   "only when its receiver is tested", strerror(rc));
        return;
    }
    tcp_fo_running = 1;
}

int tcp_fo_take(tcp_comm_t *c, int fds[RCOLL_TCP_MAX_NSOCKS])
{
    int n = 0;
    if (!atomic_load_explicit((_Atomic int *)&c->incoming_any, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&tcp_reg_lock);
    for (int s = 0; s < RCOLL_TCP_MAX_NSOCKS; s++) {
        fds[s] = c->incoming[s];
        c->incoming[s] = -1;
        n += fds[s] >= 0;
    }
    atomic_store((_Atomic int *)&c->incoming_any, 0);
    pthread_mutex_unlock(&tcp_reg_lock);
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * Connect
 * ------------------------------------------------------------------------------------------ */

static void tcp_conn_release(tcp_connecting_t *e)
{
    if (e->comm)
        tcp_comm_free(e->comm);
    memset(e, 0, sizeof(*e));
}

/* The handle's addresses: its first, then its alternatives. */
static void tcp_conn_addrs(tcp_connecting_t *e)
{
    e->naddrs = 0;
    e->addrs[e->naddrs++] = e->h.addr;
    for (uint32_t k = 0; k < e->h.nalt && k < RCOLL_TCP_MAX_ADDRS - 1; k++) {
        const rcoll_tcp_alt_t *a = &e->h.alt[k];
        rcoll_sockaddr_t x;
        memset(&x, 0, sizeof(x));
        if (a->family == AF_INET) {
            x.sin.sin_family = AF_INET;
            memcpy(&x.sin.sin_addr, a->ip, 4);
        } else if (a->family == AF_INET6) {
            x.sin6.sin6_family = AF_INET6;
            memcpy(&x.sin6.sin6_addr, a->ip, 16);
        } else {
            continue;
        }
        rcoll_net_addr_set_port(&x, a->port);
        e->addrs[e->naddrs++] = x;
    }
}

/* (Re)start every socket of the connection towards addrs[ai], under a fresh connection id
 * (sockets of an abandoned try that reached a listener never complete a connection there). */
static rcoll_status_t tcp_conn_try(tcp_connecting_t *e)
{
    tcp_comm_t *c = e->comm;
    rcoll_status_t st = rcoll_random_bytes(&e->conn_id, sizeof(e->conn_id));
    if (st != RCOLL_OK)
        return st;
    rcoll_net_addr_str(&e->addrs[e->ai], c->peer, sizeof(c->peer));
    e->try_start_ns = rcoll_now_ns();
    for (int i = 0; i < c->nsocks; i++) {
        if (c->fd[i] >= 0)
            close(c->fd[i]);
        c->fd[i] = -1;
        e->state[i] = 0;
        e->sent[i] = 0;
        e->hello[i] = (rcoll_tcp_hello_t){RCOLL_TCP_HELLO_MAGIC, RCOLL_TCP_VERSION,
                                           e->h.nonce, e->conn_id, (uint32_t)i, e->h.nsocks,
                                           c->fo ? RCOLL_TCP_HELLO_FAILOVER : 0u, 0u};
    }
    for (int i = 0; i < c->nsocks; i++) {
        st = rcoll_net_connect_start(&e->addrs[e->ai], &c->fd[i]);
        if (st != RCOLL_OK) {
            c->fd[i] = -1;
            return st;
        }
    }
    return RCOLL_OK;
}

static rcoll_status_t tcp_conn_start(int dev, const rcoll_tcp_handle_t *h,
                                      tcp_connecting_t **e_p)
{
    tcp_connecting_t *e = NULL;
    rcoll_status_t st;

    for (int i = 0; i < SOCK_MAX_CONNECTING && !e; i++)
        if (!tcp_conn_tab[i].used)
            e = &tcp_conn_tab[i];
    if (!e) {
        e = &tcp_conn_tab[0];
        for (int i = 1; i < SOCK_MAX_CONNECTING; i++)
            if (tcp_conn_tab[i].seq < e->seq)
                e = &tcp_conn_tab[i];
        RCOLL_WARN(TCP, "tcp: more than %d connects in progress; abandoning the oldest "
                   "(to %s)", SOCK_MAX_CONNECTING, e->comm->peer);
        tcp_conn_release(e);
    }
    e->comm = tcp_comm_alloc(0, (int)h->nsocks, h->stripe_min);
    if (!e->comm)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "tcp connect: out of memory");
    e->used = 1;
    e->dev = dev;
    e->seq = tcp_conn_seq++;
    e->h = *h;
    e->ai = 0;
    e->tried[0] = '\0';
    tcp_conn_addrs(e);
    /* Failover: on when the peer can be reached another way (or asked for everywhere). */
    e->comm->fo = tcp_g.failover == RCOLL_TCP_FAILOVER_ON ||
                  (tcp_g.failover == RCOLL_TCP_FAILOVER_AUTO && e->naddrs > 1);
    st = tcp_conn_try(e);
    if (st != RCOLL_OK) {
        tcp_conn_release(e);
        return st;
    }
    *e_p = e;
    return RCOLL_OK;
}

/* The address being tried did not answer (st, rcoll_err_get(): refused, unreachable) or not
 * within SOCK_TRY_NS (timed_out): with alternatives, the next one (round and round: the
 * caller's deadline ends it); every address refused at once in one round, or no
 * alternative: the error, saying what each address said. */
static rcoll_status_t tcp_conn_next(tcp_connecting_t *e, rcoll_status_t st, int timed_out)
{
    char why[RCOLL_ERR_TEXT_MAX]; /* copied: err_set must not read its own buffer */
    snprintf(why, sizeof(why), "%s", timed_out ? "no answer within 2 s" : rcoll_err_get());
    if (e->naddrs < 2)
        return rcoll_err_set(st, "tcp connect to %s: %s", e->comm->peer, why);
    size_t len = strlen(e->tried);
    if (len < sizeof(e->tried) - 1)
        snprintf(e->tried + len, sizeof(e->tried) - len, "%s%s: %.160s", len ? "; " : "",
                 e->comm->peer, why);
    RCOLL_INFO(TCP, "tcp: %s: %s; trying the listener's next address", e->comm->peer, why);
    if (!timed_out)
        e->refused++;
    else
        e->refused = 0;
    if (e->refused >= e->naddrs) /* a whole round refused: nothing will listen */
        return rcoll_err_set(st, "tcp connect: no address of the peer answered (%.440s)",
                             e->tried);
    e->ai = (e->ai + 1) % e->naddrs;
    return tcp_conn_try(e);
}

/* Advance every socket of a connect: finish connecting, then send its hello. */
static rcoll_status_t tcp_conn_step(tcp_connecting_t *e, int *done_p)
{
    tcp_comm_t *c = e->comm;
    int done = 1;

    *done_p = 0;
    for (int i = 0; i < c->nsocks; i++) {
        if (e->state[i] == 0) {
            rcoll_status_t st = rcoll_net_connect_check(c->fd[i]);
            if (st == RCOLL_INPROGRESS) {
                if (e->naddrs > 1 && rcoll_now_ns() - e->try_start_ns > SOCK_TRY_NS)
                    return tcp_conn_next(e, RCOLL_ERR_TIMEOUT, 1);
                done = 0;
                continue;
            }
            if (st == RCOLL_OK)
                st = rcoll_net_set_nodelay(c->fd[i]);
            if (st != RCOLL_OK)
                return tcp_conn_next(e, st, 0);
            e->state[i] = 1;
        }
        if (e->state[i] == 1) {
            ssize_t rc = send(c->fd[i], (char *)&e->hello[i] + e->sent[i],
                              sizeof(e->hello[i]) - e->sent[i], MSG_DONTWAIT | MSG_NOSIGNAL);
            if (rc < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
                if (errno == ECONNRESET || errno == EPIPE)
                    return rcoll_err_set(RCOLL_ERR_REMOTE, "connection to %s closed by peer "
                                         "during the handshake", c->peer);
                return rcoll_err_set_errno(rcoll_status_from_errno(errno), errno,
                                           "tcp handshake with %s", c->peer);
            }
            if (rc > 0)
                e->sent[i] += (uint32_t)rc;
            if (e->sent[i] == sizeof(e->hello[i]))
                e->state[i] = 2;
            else
                done = 0;
        }
    }
    if (done && c->fo) { /* what a take-over needs to know; the failover thread's list */
        c->rs = calloc((size_t)c->nsocks, sizeof(*c->rs));
        if (!c->rs)
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "tcp connect: out of memory");
        for (int i = 0; i < c->nsocks; i++)
            c->rs[i].fd = -1;
        pthread_mutex_lock(&tcp_reg_lock);
        c->reg_next = tcp_fo_comms;
        tcp_fo_comms = c;
        tcp_fo_thread_start();
        pthread_mutex_unlock(&tcp_reg_lock);
        c->nonce = e->h.nonce;
        c->conn_id = e->conn_id;
        c->naddrs = e->naddrs;
        memcpy(c->addrs, e->addrs, sizeof(c->addrs));
        for (int i = 0; i < c->nsocks; i++) {
            c->ai[i] = e->ai;
            tcp_set_user_timeout(c->fd[i]);
        }
        c->fb_next_ns = rcoll_now_ns() + SOCK_FAILBACK_NS;
    }
    if (done && e->ai != 0) { /* the first address did not work: said once per process */
        static _Atomic int warned;
        char first[SOCK_ADDR_STR];
        rcoll_net_addr_str(&e->addrs[0], first, sizeof(first));
        if (!atomic_exchange(&warned, 1))
            RCOLL_WARN(TCP, "tcp: a peer's first address did not answer (%.300s); connected "
                       "through %s instead (RCOLL_SOCKET_IFNAME selects the interfaces; this "
                       "is said once)", e->tried, c->peer);
        else
            RCOLL_INFO(TCP, "tcp: connected through %s after %.300s", c->peer, e->tried);
    }
    *done_p = done;
    return RCOLL_OK;
}

const char *rcoll_tcp_handle_check(const rcoll_tcp_handle_t *h)
{
    if (h->magic != RCOLL_TCP_HANDLE_MAGIC || h->version != RCOLL_TCP_VERSION)
        return "not a tcp handle of this version";
    if (h->nsocks < 1 || h->nsocks > RCOLL_TCP_MAX_NSOCKS)
        return "bad socket count";
    return NULL;
}

rcoll_status_t tcp_connect(int dev, const void *handle, void **send_comm)
{
    rcoll_tcp_handle_t h;
    tcp_connecting_t *e = NULL;
    rcoll_status_t st = RCOLL_OK;
    int done = 0;

    if (!tcp_g.inited)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "tcp connect before init");
    if (dev != 0 || !handle || !send_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp connect: bad device %d or NULL "
                             "handle/send_comm", dev);
    memcpy(&h, handle, sizeof(h));
    if (rcoll_tcp_handle_check(&h))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp connect: not a tcp handle of version "
                             "%u (magic 0x%08x, version %u, %u sockets)", RCOLL_TCP_VERSION,
                             (unsigned)h.magic, (unsigned)h.version, (unsigned)h.nsocks);

    pthread_mutex_lock(&tcp_conn_lock);
    for (int i = 0; i < SOCK_MAX_CONNECTING && !e; i++)
        if (tcp_conn_tab[i].used && tcp_conn_tab[i].dev == dev &&
            memcmp(&tcp_conn_tab[i].h, &h, sizeof(h)) == 0)
            e = &tcp_conn_tab[i];
    if (!e)
        st = tcp_conn_start(dev, &h, &e);
    if (st == RCOLL_OK)
        st = tcp_conn_step(e, &done);
    if (st != RCOLL_OK) {
        if (e)
            tcp_conn_release(e);
    } else if (done) {
        *send_comm = e->comm;
        e->comm = NULL;
        tcp_conn_release(e);
    } else {
        *send_comm = NULL;
    }
    pthread_mutex_unlock(&tcp_conn_lock);
    return st;
}

rcoll_status_t tcp_close_listen(void *listen_comm)
{
    tcp_listen_t *l = listen_comm;
    if (!l)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "tcp close_listen: NULL listen_comm");
    pthread_mutex_lock(&tcp_reg_lock);
    for (tcp_listen_t **p = &tcp_listeners; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            break;
        }
    pthread_mutex_unlock(&tcp_reg_lock);
    for (int i = 0; i < l->nhalf; i++)
        close(l->half[i].fd);
    for (int k = 0; k < l->nfds; k++)
        close(l->fds[k]);
    free(l);
    return RCOLL_OK;
}

void tcp_conn_fini(void)
{
    pthread_t t;
    pthread_mutex_lock(&tcp_reg_lock);
    int join = tcp_fo_thread_end(&t);
    pthread_mutex_unlock(&tcp_reg_lock);
    if (join)
        pthread_join(t, NULL);

    pthread_mutex_lock(&tcp_conn_lock);
    for (int i = 0; i < SOCK_MAX_CONNECTING; i++)
        if (tcp_conn_tab[i].used)
            tcp_conn_release(&tcp_conn_tab[i]);
    pthread_mutex_unlock(&tcp_conn_lock);
}
