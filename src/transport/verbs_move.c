/*
 * verbs_move.c - failover of verbs connections: a connection whose path dies (its port goes
 * down, an error completion, a fatal QP event) moves to another port pair, no byte lost or
 * written twice where it counts, and back to its first ports when they are up again.
 *
 * Both ends offer it in their connection records (RCOLL_VRB_CAP_FAILOVER; RCOLL_IB_FAILOVER=
 * auto offers it where this process has several active ports).  The TCP socket each
 * connection keeps from its setup carries the move, in fixed records (rcoll_vrb_move_t):
 *
 *   sender                                      receiver
 *   (path died, or the receiver said LOST, or its first port is up again)
 *   drain its CQ, new QPs + FIFO on port P'
 *     ──REQ(round, old/new port, back, meta)──>  drain its CQ; done = messages whole (every
 *                                                QP's immediate arrived); the others start
 *                                                over; new QPs + FIFO on its port Q', to RTS
 *     <──ACK(round, done, meta) ─────────────────  (or NAK(text): no port left)
 *   QPs to RTS; its requests below done are
 *   complete, the others wait to be written again
 *     ──GO(round)─────────────────────────────>  advertises again, from message done on,
 *                                                every buffer it has posted (new rkeys)
 *   writes them again in order, then new ones
 *
 * Writing a message again is harmless: an RDMA write puts the same bytes in the same place,
 * and the receiver counts a message only when all its immediates arrived on the new QPs.  A
 * sender completes a request only on its write's completion, which an RC responder gives
 * after the receiver's completion is queued, and the receiver drains its CQ before counting:
 * so a buffer the sender's user may reuse is never written again.  The receiver picks Q' by
 * the sender's step through its list of ports (parallel rails: port i of one host on the
 * network of port i of the others), else the next one up.  A move not done within
 * RCOLL_IB_FAILOVER_TIMEOUT while sends wait fails the connection with the first failure's
 * text; an end with nothing to send waits for its peer to take part (it may be computing)
 * under the communicator's own timeout.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/verbs.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

#define LOOK_EVERY 16                /* progress calls between looks at the clock, and */
#define LOOK_NS 5000000ull           /* the time between looks at events and the socket */
#define FAILBACK_EVERY_NS 1000000000ull

int rcoll_vrb_failover_offered(void)
{
    const rcoll_vrb_config_t *cfg = rcoll_vrb_cfg;
    if (!cfg || cfg->ib_failover == RCOLL_IB_FAILOVER_OFF) return 0;
    return cfg->ib_failover == RCOLL_IB_FAILOVER_ON || rcoll_vrb_ndevs() > 1;
}

static int port_up(int i)
{
    rcoll_vrb_poll_async(); /* its down and up events: a busy comm may not have read them */
    rcoll_vrb_dev_t *d = rcoll_vrb_dev(i);
    struct ibv_port_attr a;
    return d && !d->dead && rcoll_ibv->query_port(d->ctx, (uint8_t)d->port, &a) == 0 &&
           a.state == IBV_PORT_ACTIVE;
}

/* The port to move to: want if it is up, else the next one up after the current one. */
static int pick_port(const rcoll_vrb_comm_t *c, int want)
{
    int n = rcoll_vrb_ndevs();
    if (want >= 0 && want < n && want != c->devi && port_up(want)) return want;
    for (int k = 1; k < n; k++) {
        int i = (c->devi + k) % n;
        if (port_up(i)) return i;
    }
    return -1;
}

static uint64_t deadline(void)
{
    return rcoll_now_ns() + (uint64_t)(rcoll_vrb_cfg->ib_failover_timeout * 1e9);
}

static rcoll_status_t send_rec(rcoll_vrb_comm_t *c, uint32_t type, const rcoll_vrb_move_t *in)
{
    rcoll_vrb_move_t m = *in;
    m.magic = RCOLL_VRB_MOVE_MAGIC;
    m.type = type;
    rcoll_status_t st = rcoll_net_send_all(c->fd, &m, sizeof(m), rcoll_now_ns() + 2000000000ull);
    if (st != RCOLL_OK) rcoll_err_prefix("verbs failover: telling the peer (%s): ", c->remote.dev);
    return st;
}

/* A whole record from the socket into c->mv_in: 1, 0 while incomplete, or an error. */
static rcoll_status_t read_rec(rcoll_vrb_comm_t *c, int *got)
{
    *got = 0;
    rcoll_status_t st = rcoll_net_recv_some(c->fd, &c->mv_in, sizeof(c->mv_in), &c->mv_got);
    if (st != RCOLL_OK) return st;
    if (c->mv_got < sizeof(c->mv_in)) return RCOLL_OK;
    c->mv_got = 0;
    if (c->mv_in.magic != RCOLL_VRB_MOVE_MAGIC)
        return rcoll_err_set(RCOLL_ERR_PROTOCOL, "verbs failover: not a move record from the "
                             "peer (%s)", c->remote.dev);
    c->mv_in.text[sizeof(c->mv_in.text) - 1] = '\0';
    *got = 1;
    return RCOLL_OK;
}

/* Poll what the CQ still holds (the old QPs): whole messages counted, errors ignored. */
static void drain(rcoll_vrb_comm_t *c)
{
    struct ibv_wc wc[16];
    int n;
    while (c->cq && (n = rcoll_ibv->poll_cq(c->cq, 16, wc)) > 0)
        for (int i = 0; i < n; i++) rcoll_vrb_count_completion(c, &wc[i]);
}

/* Rebuild c on port i (keeping its nonce and requests). */
static rcoll_status_t rebuild(rcoll_vrb_comm_t *c, int i)
{
    uint64_t nonce = c->local.nonce;
    rcoll_vrb_comm_unbuild(c);
    return rcoll_vrb_comm_build(c, rcoll_vrb_dev(i), nonce);
}

static rcoll_status_t fail(rcoll_vrb_comm_t *c, rcoll_status_t st, const char *what)
{
    char why[RCOLL_ERR_TEXT_MAX];
    snprintf(why, sizeof(why), "%s", rcoll_err_get());
    return rcoll_vrb_comm_fail(c, st, "verbs: %s (the connection's path had died: %s): %s", what,
                               c->lost_text[0] ? c->lost_text : "its first port is up again",
                               why);
}

static void said(rcoll_vrb_comm_t *c, const char *from, int from_port)
{
    char rg[64];
    uint64_t now = rcoll_now_ns();
    double took = c->lost_ns ? (double)(now - c->lost_ns) / 1e9 : 0;
    c->lost_ns = 0;
    if (c->devi == c->mv_from) return; /* made again where it was (going back was refused) */
    RCOLL_WARN(VERBS, "verbs: %s connection with %s (GID %s) %s %s port %d to %s port %d, "
               "%.3f s after %s%s", c->is_recv ? "receive" : "send", c->remote.dev,
               rcoll_vrb_gid_str(c->remote.gid, rg, sizeof(rg)),
               c->mv_back ? "went back from" : "moved from", from, from_port, c->dev->name,
               c->dev->port, took, c->mv_back ? "its first port was up again" : "",
               c->mv_back ? "" : c->lost_text);
}

/* ---- sender ---- */

/* Move to port `to` (-1: the next one up; back: the first one, now up again; stay: the same
 * one again, after the receiver could not go back yet). */
static rcoll_status_t send_start(rcoll_vrb_comm_t *c, int back, int stay)
{
    int old = c->devi;
    drain(c);
    int to = back ? c->home : stay ? c->devi : pick_port(c, -1);
    if (to < 0 || ((back || stay) && !port_up(to))) {
        rcoll_err_set(RCOLL_ERR_REMOTE, "no other port is up");
        return fail(c, RCOLL_ERR_REMOTE, "cannot move the connection");
    }
    rcoll_status_t st = rebuild(c, to);
    if (st != RCOLL_OK) return fail(c, st, "cannot move the connection");
    rcoll_vrb_move_t m = {.round = c->rounds, .old_dev = old, .new_dev = to,
                          .back = (uint32_t)back, .meta = c->local};
    if ((st = send_rec(c, RCOLL_VRB_MOVE_REQ, &m)) != RCOLL_OK)
        return fail(c, st, "cannot move the connection");
    c->mv_back = back;
    c->mv_state = 1;
    c->mv_deadline_ns = deadline();
    c->mv_from = old;
    return RCOLL_OK;
}

static rcoll_status_t send_ack(rcoll_vrb_comm_t *c)
{
    const rcoll_vrb_move_t *in = &c->mv_in;
    if (in->round != c->rounds) return RCOLL_OK; /* an answer to an earlier round */
    if (in->type == RCOLL_VRB_MOVE_NAK && c->mv_back) {
        /* its first port is not up there yet: the connection is made again where it was,
         * and going back is tried again later */
        RCOLL_INFO(VERBS, "verbs: the peer (%s) cannot go back yet: %s", c->remote.dev,
                   in->text);
        int from = c->mv_from;
        c->mv_state = 0;
        c->devi = from; /* rebuilt on that port below */
        c->fb_up_ns = 0;
        return send_start(c, 0, 1);
    }
    if (in->type == RCOLL_VRB_MOVE_NAK) {
        rcoll_err_set(RCOLL_ERR_REMOTE, "the peer (%s) cannot move: %s", c->remote.dev,
                      in->text);
        return fail(c, RCOLL_ERR_REMOTE, "cannot move the connection");
    }
    if (in->type != RCOLL_VRB_MOVE_ACK) return RCOLL_OK;
    rcoll_vrb_meta_t meta = in->meta;
    const char *bad = rcoll_vrb_meta_check(&meta, c->local.nonce, c->nqps);
    if (!bad && in->done > c->msgs_sent) bad = "the peer has more messages than were sent";
    if (bad) {
        rcoll_err_set(RCOLL_ERR_PROTOCOL, "%s", bad);
        return fail(c, RCOLL_ERR_PROTOCOL, "cannot move the connection");
    }
    c->remote = meta;
    rcoll_status_t st = rcoll_vrb_comm_connect_qps(c);
    if (st != RCOLL_OK) return fail(c, st, "cannot move the connection");
    rcoll_vrb_send_rewind(c, in->done);
    rcoll_vrb_move_t go = {.round = c->rounds};
    if ((st = send_rec(c, RCOLL_VRB_MOVE_GO, &go)) != RCOLL_OK)
        return fail(c, st, "cannot move the connection");
    said(c, rcoll_vrb_dev(c->mv_from)->name, rcoll_vrb_dev(c->mv_from)->port);
    c->rounds++;
    c->mv_state = 0;
    c->lost = 0;
    c->fb_next_ns = rcoll_now_ns() + FAILBACK_EVERY_NS;
    return RCOLL_OK;
}

/* ---- receiver ---- */

static rcoll_status_t recv_req(rcoll_vrb_comm_t *c)
{
    const rcoll_vrb_move_t in = c->mv_in;
    rcoll_vrb_meta_t meta = in.meta;
    const char *bad = rcoll_vrb_meta_check(&meta, c->local.nonce, c->nqps);
    if (bad) {
        rcoll_err_set(RCOLL_ERR_PROTOCOL, "%s", bad);
        return fail(c, RCOLL_ERR_PROTOCOL, "cannot move the connection");
    }
    int old = c->devi, n = rcoll_vrb_ndevs();
    if (!c->lost_ns) c->lost_ns = rcoll_now_ns();
    drain(c);
    uint64_t done = rcoll_vrb_recv_done(c);
    int stay = in.old_dev == in.new_dev; /* the sender could not go back: nor does this end */
    int64_t step = ((int64_t)in.new_dev - (int64_t)in.old_dev) % n; /* the peer's numbers */
    int want = in.back ? c->home : (int)(((int64_t)old + step + n) % n);
    int to = in.back || stay ? (port_up(want) ? want : -1) : pick_port(c, want);
    rcoll_vrb_move_t m = {.round = in.round};
    if (to < 0 && in.back) { /* not up here yet: the sender stays, and tries later */
        snprintf(m.text, sizeof(m.text), "%s port %d is not up again yet",
                 rcoll_vrb_dev(c->home)->name, rcoll_vrb_dev(c->home)->port);
        return send_rec(c, RCOLL_VRB_MOVE_NAK, &m);
    }
    if (to < 0) {
        snprintf(m.text, sizeof(m.text), "no other port of %s's host is up", c->dev->name);
        send_rec(c, RCOLL_VRB_MOVE_NAK, &m);
        rcoll_err_set(RCOLL_ERR_REMOTE, "%s", m.text);
        return fail(c, RCOLL_ERR_REMOTE, "cannot move the connection");
    }
    rcoll_status_t st = rebuild(c, to);
    if (st == RCOLL_OK) {
        c->remote = meta;
        st = rcoll_vrb_comm_connect_qps(c);
    }
    if (st != RCOLL_OK) {
        snprintf(m.text, sizeof(m.text), "%s", rcoll_err_get());
        send_rec(c, RCOLL_VRB_MOVE_NAK, &m);
        return fail(c, st, "cannot move the connection");
    }
    m.done = done;
    m.meta = c->local;
    if ((st = send_rec(c, RCOLL_VRB_MOVE_ACK, &m)) != RCOLL_OK)
        return fail(c, st, "cannot move the connection");
    if (!c->lost_text[0])
        snprintf(c->lost_text, sizeof(c->lost_text), "the sender moved first");
    c->mv_back = (int)in.back;
    c->mv_state = 1;
    c->mv_deadline_ns = deadline();
    c->mv_from = old;
    c->mv_done = done;
    return RCOLL_OK;
}

static rcoll_status_t recv_go(rcoll_vrb_comm_t *c)
{
    rcoll_status_t st = rcoll_vrb_readvertise(c, c->mv_done);
    if (st != RCOLL_OK) return fail(c, st, "cannot move the connection");
    said(c, rcoll_vrb_dev(c->mv_from)->name, rcoll_vrb_dev(c->mv_from)->port);
    c->rounds++;
    c->mv_state = 0;
    c->lost = 0;
    return RCOLL_OK;
}

/* ---- both ---- */

rcoll_status_t rcoll_vrb_move_progress(rcoll_vrb_comm_t *c)
{
    if (c->failed) return rcoll_err_set(c->failed, "%s", c->fail_text);
    int lost = __atomic_load_n(&c->lost, __ATOMIC_ACQUIRE);
    if (!lost && !c->mv_state && ++c->mv_polls % LOOK_EVERY) return RCOLL_OK;
    uint64_t now = rcoll_now_ns();
    if ((lost || c->mv_state) && !c->lost_ns) c->lost_ns = now; /* for the move's line */
    if (!lost && !c->mv_state) {
        /* the ports' events (a port going down marks this comm lost), then the socket: not
         * more often than every LOOK_NS, however often the comm is polled */
        if (now - c->mv_look_ns < LOOK_NS) return RCOLL_OK;
        c->mv_look_ns = now;
        rcoll_vrb_poll_async();
        lost = __atomic_load_n(&c->lost, __ATOMIC_ACQUIRE);
    }
    rcoll_status_t st;
    if (lost && !c->mv_state && !c->is_recv) return send_start(c, 0, 0);
    if (lost && !c->mv_state && c->is_recv && c->lost_round != c->rounds + 1) {
        /* tell the sender, which may not have noticed (it moves the connection) */
        rcoll_vrb_move_t m = {.round = c->rounds};
        snprintf(m.text, sizeof(m.text), "%.120s", c->lost_text);
        if ((st = send_rec(c, RCOLL_VRB_MOVE_LOST, &m)) != RCOLL_OK)
            return fail(c, st, "cannot move the connection");
        c->lost_round = c->rounds + 1;
        c->mv_deadline_ns = deadline();
    }
    /* The timeout runs only while this end's sends wait (their receiver, whose buffers they
     * fill, is then in a call and answers): a peer that is computing, or a receiver waiting for
     * a sender that is, is left to the communicator's own timeout, which names it. */
    int waiting = !c->is_recv && c->outstanding > 0;
    if (!waiting) c->mv_deadline_ns = deadline();
    if ((c->mv_state || lost) && waiting && now > c->mv_deadline_ns) {
        rcoll_err_set(RCOLL_ERR_TIMEOUT, "no move within RCOLL_IB_FAILOVER_TIMEOUT=%g s while "
                      "sends waited", rcoll_vrb_cfg->ib_failover_timeout);
        return fail(c, RCOLL_ERR_TIMEOUT, "the connection did not move");
    }
    for (;;) {
        int got = 0;
        if ((st = read_rec(c, &got)) != RCOLL_OK) {
            if (st == RCOLL_ERR_REMOTE && !c->mv_state && !lost) return RCOLL_OK; /* idle_check */
            return fail(c, st, "the peer left while the connection moved");
        }
        if (!got) break;
        const rcoll_vrb_move_t *in = &c->mv_in;
        if (!c->is_recv && c->mv_state == 1) {
            if ((st = send_ack(c)) != RCOLL_OK) return st;
        } else if (!c->is_recv && in->type == RCOLL_VRB_MOVE_LOST && in->round == c->rounds) {
            snprintf(c->lost_text, sizeof(c->lost_text), "the receiver (%.40s) said: %.100s",
                     c->remote.dev, in->text);
            return send_start(c, 0, 0);
        } else if (c->is_recv && in->type == RCOLL_VRB_MOVE_REQ && !c->mv_state) {
            if ((st = recv_req(c)) != RCOLL_OK) return st;
        } else if (c->is_recv && in->type == RCOLL_VRB_MOVE_GO && c->mv_state == 1 &&
                   in->round == c->rounds) {
            if ((st = recv_go(c)) != RCOLL_OK) return st;
        }
    }
    /* failback: a sender away from its first port looks at it every second, and goes back
     * once it has been up for a second (the peer's port comes up about when its own does) */
    if (!c->is_recv && !c->mv_state && !c->lost && c->devi != c->home &&
        now > c->fb_next_ns) {
        c->fb_next_ns = now + FAILBACK_EVERY_NS;
        if (!port_up(c->home)) {
            c->fb_up_ns = 0;
        } else if (!c->fb_up_ns) {
            c->fb_up_ns = now;
        } else if (now - c->fb_up_ns >= FAILBACK_EVERY_NS) {
            c->lost_text[0] = '\0';
            return send_start(c, 1, 0);
        }
    }
    return RCOLL_OK;
}
