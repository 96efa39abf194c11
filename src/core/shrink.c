/*
 * shrink.c - rcoll_comm_shrink (its argument checks are in api.c): after a failure, the
 * survivors agree on who is alive and carry on in a new communicator without the dead.
 *
 * Agreement cannot run over the communicator itself (its peers may be dead and its data
 * connections broken), so it goes through the bootstrap root, which already knows who died
 * (their control connections closed): each survivor sends its rank in the old communicator
 * and a record with fresh listen handles; once every rank whose control connection is still
 * open has asked (or RCOLL_TIMEOUT after the first asked: the rest are left out), the root
 * sends every survivor the same list (bootstrap_root.c, root_shrink_check).  From that list each
 * builds the new communicator as a split builds a child: it shares the control connection,
 * opens its own data connections, joins the family.  Nothing travels over the old
 * communicator; what was in flight on it is abandoned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

/* The root announced a failure that this communicator (or a member of its family on the same
 * control connection) has not seen yet: fail them now, since the shrink clears the latch. */
static void fail_family(rcoll_comm_t comm)
{
    int culprit = -1;
    rcoll_status_t cst = rcoll_bs_poll(comm->bs, &culprit);
    if (cst == RCOLL_OK) return;
    char text[RCOLL_ERR_TEXT_MAX];
    snprintf(text, sizeof(text), "%s", rcoll_err_get());
    for (rcoll_comm_t o = comm->family ? comm->family->first : comm; o; o = o->fam_next) {
        if (o->bs != comm->bs || o->failed != RCOLL_OK) continue;
        if (o != comm) rcoll_pt_lock(o);
        rcoll_comm_fail(o, cst, culprit, text);
        if (o != comm) rcoll_pt_unlock(o);
        if (!comm->family) break;
    }
}

/* Setting up the new communicator failed (usually: a member died after the root decided).
 * Give the root a moment to name the first cause; failing that, this rank is the cause and
 * says so.  text gets the sentence. */
static rcoll_status_t setup_cause(rcoll_comm_t c, int bs_rank, rcoll_status_t st, char *text,
                                  size_t len)
{
    char own[RCOLL_ERR_TEXT_MAX];
    snprintf(own, sizeof(own), "%s", rcoll_err_get());
    uint64_t until = rcoll_now_ns() + 300000000ull;
    while (rcoll_now_ns() < until) {
        int culprit = -1;
        rcoll_status_t cst = rcoll_bs_poll(c->bs, &culprit);
        if (cst != RCOLL_OK) {
            snprintf(text, len, "setting up the shrunk communicator: %.400s", rcoll_err_get());
            return cst;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    char note[RCOLL_BS_TEXT_MAX];
    snprintf(note, sizeof(note), "rank %d of the shrunk communicator could not set it up: "
             "%.150s", c->rank, own);
    rcoll_bs_report(c->bs, bs_rank, st, note);
    snprintf(text, len, "setting up the shrunk communicator: %.400s", own);
    return st;
}

rcoll_status_t rcoll_comm_shrink_run(rcoll_comm_t comm, int flags, rcoll_comm_t *newcomm)
{
    *newcomm = NULL;
    char pbuf[RCOLL_ERR_TEXT_MAX];
    rcoll_status_t st;
    /* A communicator of every rank of the job (made by init, dup or the latest shrink), or
     * one of some ranks, which names them to the root (bit b: the job's rank b). */
    int sub = comm->nranks != rcoll_bs_members(comm->bs);
    if (sub) {
        for (int i = 0; i < comm->nranks; i++)
            if (comm->bs_of[i] < 0 || comm->bs_of[i] >= RCOLL_BS_SUB_BITS) {
                st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll_comm_shrink: rank %d of this "
                                   "communicator is rank %d of the job: a communicator of some "
                                   "ranks can be shrunk when its ranks are among the job's "
                                   "first %d", i, (int)comm->bs_of[i], RCOLL_BS_SUB_BITS);
                rcoll_comm_set_error(comm, st, rcoll_err_get());
                return st;
            }
    }
    if (comm->head && comm->failed == RCOLL_OK) {
        if (!(flags & RCOLL_SHRINK_ABORT_PENDING)) {
            st = rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "rcoll_comm_shrink: operations are "
                               "pending on this communicator (wait for them, or pass "
                               "RCOLL_SHRINK_ABORT_PENDING)");
            rcoll_comm_set_error(comm, st, rcoll_err_get());
            return st;
        }
        rcoll_comm_fail(comm, RCOLL_ERR_INVALID_USAGE, -1,
                        "pending operation aborted by rcoll_comm_shrink(RCOLL_SHRINK_ABORT_PENDING)");
    }
    fail_family(comm);
    uint64_t t0 = rcoll_now_ns();

    /* Listen first, so the record carries the new handles. */
    rcoll_comm_t probe = NULL, c = NULL;
    rcoll_bs_shrink_req_t req;
    memset(&req, 0, sizeof(req));
    req.ctx = comm->ctx;
    req.rank = comm->rank;
    req.flags = flags | (sub ? RCOLL_BS_SHRINK_SUB : 0);
    req.seq = comm->nshrinks++;
    for (int i = 0; sub && i < comm->nranks; i++)
        req.members[comm->bs_of[i] / 8] |= (uint8_t)(1u << (comm->bs_of[i] % 8));
    req.info = comm->peers[comm->rank];
    memset(req.info.handles, 0, sizeof(req.info.handles));
    memset(req.info.max_msg, 0, sizeof(req.info.max_msg));
    st = rcoll_comm_alloc(1, 0, &comm->cfg, &probe);
    if (st == RCOLL_OK) st = rcoll_comm_listen(probe, &req.info);
    if (st != RCOLL_OK) {
        rcoll_err_prefix("rcoll_comm_shrink: ");
        goto fail;
    }
    rcoll_bs_member_t *tab = NULL;
    int count = 0;
    uint32_t round = 0;
    uint64_t deadline = t0 + (uint64_t)((2 * comm->cfg.timeout_s + 5) * 1e9);
    st = rcoll_bs_shrink(comm->bs, &req, deadline, &tab, &count, &round);
    if (st != RCOLL_OK) {
        rcoll_err_prefix("rcoll_comm_shrink: ");
        goto fail;
    }
    /* Every survivor holds this same list: the checks below fail on all of them alike. */
    int newrank = -1;
    for (int i = 0; i < count; i++) {
        if (tab[i].req.ctx != comm->ctx || (i > 0 && tab[i].req.rank <= tab[i - 1].req.rank)) {
            free(tab);
            st = rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "rcoll_comm_shrink: the ranks shrank "
                               "different communicators at once (rank %d of the job asked for "
                               "another one)", (int)tab[i].bs_rank);
            goto fail;
        }
        if (tab[i].req.rank == comm->rank) newrank = i;
    }
    if (newrank < 0) {
        free(tab);
        st = rcoll_err_set(RCOLL_ERR_INTERNAL, "rcoll_comm_shrink: this rank is not in the "
                           "root's list of survivors");
        goto fail;
    }
    int my_bs_rank = tab[newrank].bs_rank;

    /* Turn the probe (which owns the listening sockets) into the new communicator. */
    st = rcoll_comm_alloc(count, newrank, &comm->cfg, &c);
    if (st != RCOLL_OK) {
        free(tab);
        goto fail;
    }
    rcoll_comm_take_listeners(c, probe); /* and frees the probe */
    probe = NULL;
    c->ctx = (comm->ctx ^ (0xc2b2ae3d27d4eb4full * round)) * 1099511628211ull;
    for (int i = 0; i < count; i++) {
        c->peers[i] = tab[i].req.info;
        c->bs_of[i] = tab[i].bs_rank;
    }
    free(tab);
    c->bs = rcoll_bs_ref(comm->bs);
    uint64_t t_agreed = rcoll_now_ns();
    st = rcoll_comm_links(c, t_agreed + (uint64_t)(comm->cfg.timeout_s * 1e9));
    char text[RCOLL_ERR_TEXT_MAX] = "";
    if (st != RCOLL_OK && st != RCOLL_ERR_NO_MEMORY)
        st = setup_cause(c, my_bs_rank, st, text, sizeof(text));
    else if (st != RCOLL_OK)
        goto fail;
    c->tuning = comm->tuning; /* the old communicator's constants: same machines, same paths */
    c->tuning_conf = comm->tuning_conf;
    rcoll_status_t jst = rcoll_family_join(c, comm->family);
    if (jst != RCOLL_OK) {
        st = jst;
        goto fail;
    }
    if (st != RCOLL_OK) {
        /* The survivors agreed and every one of them holds this communicator; a member that
         * died since fails it, as it would fail its first collective.  Shrink it again. */
        rcoll_comm_fail(c, st, -1, text);
        RCOLL_WARN(INIT, "shrink: the new communicator failed while being set up: %s", text);
    }
    RCOLL_INFO(INIT, "shrink: rank %d of %d is rank %d of %d (agreed in %.1f ms, set up in "
               "%.1f ms)", comm->rank, comm->nranks, newrank, count,
               (double)(t_agreed - t0) / 1e6, (double)(rcoll_now_ns() - t_agreed) / 1e6);
    *newcomm = c;
    return RCOLL_OK;

fail:
    snprintf(pbuf, sizeof(pbuf), "%s", rcoll_err_get());
    if (c) rcoll_comm_free(c, 0);
    if (probe) rcoll_comm_free(probe, 0);
    rcoll_comm_set_error(comm, st, pbuf);
    return rcoll_err_set(st, "%s", pbuf);
}
