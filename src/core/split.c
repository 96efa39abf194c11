/*
 * split.c - sub-communicators (rcoll_comm_split, rcoll_comm_dup; their argument checks are in
 * api.c).  Collective over the
 * parent: one all-gather of (color, key, listen handle) tells every rank its new rank and
 * its new peers' handles, so no bootstrap round trip is needed; the child shares the
 * parent's control connection (failure notices) and opens only the connections its
 * algorithms use.  Data connections are not shared with the parent: operations on parent
 * and child may run concurrently, and one-way FIFO connections cannot be shared safely
 * until receives match by tag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

typedef struct {
    int32_t color;
    int32_t key;
    int32_t failed; /* this rank could not listen: every rank fails the split (why says why) */
    char why[124];
    uint8_t handles[RCOLL_MAX_TRANSPORTS][RCOLL_TRANSPORT_HANDLE_BYTES];
} split_rec_t;

typedef struct {
    int key, rank;
} member_t;

static int member_cmp(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Exchange the split records over the parent (a blocking all-gather of bytes). */
static rcoll_status_t exchange(rcoll_comm_t parent, split_rec_t *all, const split_rec_t *mine)
{
    return rcoll_coll_run(parent, RCOLL_OP_ALLGATHER, mine, all, sizeof(*mine), RCOLL_UINT8,
                          RCOLL_SUM, 0);
}

/* This rank's part of split number split_no failed after the exchange (making its child,
 * connecting it): st, with rcoll_err_get() saying why.  Peers may be waiting on this rank in
 * their own part, and some may have finished theirs: the failure has to reach every member
 * at once, the way a dead rank's does, or one of them waits out RCOLL_TIMEOUT (in the split,
 * or in the parent's next call that this rank never makes).  A broken or refused connection
 * is usually the consequence of another rank's failure: the root's verdict is awaited a
 * moment and taken when it comes.  Otherwise this rank is the first cause and tells every
 * rank through the root (the communicators sharing the bootstrap fail, as for a dead rank);
 * the parent fails here too. */
static rcoll_status_t split_failed(rcoll_comm_t comm, uint32_t split_no, rcoll_status_t st)
{
    char own[RCOLL_ERR_TEXT_MAX], note[RCOLL_BS_TEXT_MAX], pbuf[128];
    snprintf(own, sizeof(own), "%s", rcoll_err_get());
    if (st == RCOLL_ERR_REMOTE || st == RCOLL_ERR_PROTOCOL || st == RCOLL_ERR_TIMEOUT ||
        st == RCOLL_ERR_UNSUPPORTED) {
        int culprit = -1;
        rcoll_status_t cst = rcoll_bs_await_verdict(comm->bs, 300000000ull, &culprit);
        if (cst != RCOLL_OK) {
            char text[RCOLL_LAST_ERROR_MAX];
            snprintf(text, sizeof(text), "rcoll_comm_split (split #%u of this communicator): "
                     "%.480s", split_no + 1, rcoll_err_get());
            rcoll_comm_fail(comm, cst, culprit, text);
            return cst;
        }
    }
    snprintf(note, sizeof(note), "%s could not set up its part of rcoll_comm_split (split #%u):"
             " %.150s", rcoll_comm_peer_name(comm, comm->rank, pbuf, sizeof(pbuf)),
             split_no + 1, own);
    RCOLL_WARN(INIT, "%s", note);
    rcoll_bs_report(comm->bs, rcoll_bs_rank(comm->bs), st, note);
    rcoll_comm_fail(comm, st, comm->rank, note);
    return st;
}

rcoll_status_t rcoll_comm_split_run(rcoll_comm_t comm, int color, int key,
                                    rcoll_comm_t *newcomm)
{
    if (color < 0) color = RCOLL_UNDEFINED;
    int n = comm->nranks;
    split_rec_t mine, *all = calloc((size_t)n, sizeof(*all));
    member_t *members = calloc((size_t)n, sizeof(*members));
    rcoll_comm_t c = NULL;
    rcoll_status_t st = RCOLL_OK;
    if (!all || !members) {
        st = RCOLL_ERR_NO_MEMORY;
        snprintf(comm->last_error, sizeof(comm->last_error), "rcoll_comm_split: out of memory");
        goto out;
    }
    memset(&mine, 0, sizeof(mine));
    mine.color = color;
    mine.key = key;
    /* Listen before the exchange, so the handle travels with it. */
    rcoll_comm_t probe = NULL;
    if (color != RCOLL_UNDEFINED) {
        rcoll_peer_info_t info;
        memset(&info, 0, sizeof(info));
        st = rcoll_comm_alloc(1, 0, &comm->cfg, &probe);
        if (st == RCOLL_OK) st = rcoll_comm_listen(probe, &info);
        memcpy(mine.handles, info.handles, sizeof(mine.handles));
        if (st != RCOLL_OK) {
            rcoll_comm_set_error(comm, st, rcoll_err_get());
            /* Still take part in the exchange, marked failed, so the others do not hang and
             * every rank fails the split (the parent stays as it was). */
            mine.failed = 1;
            snprintf(mine.why, sizeof(mine.why), "%s", rcoll_err_get());
        }
    }
    rcoll_status_t xst = exchange(comm, all, &mine);
    uint32_t split_no = comm->nsplits++;
    int culprit = -1, nfailed = 0;
    for (int p = 0; xst == RCOLL_OK && p < n; p++)
        if (all[p].failed && nfailed++ == 0) culprit = p;
    if (xst == RCOLL_OK && st == RCOLL_OK && culprit >= 0) {
        /* another rank could not take part: the same failure everywhere, named */
        char pbuf[128];
        all[culprit].why[sizeof(all[culprit].why) - 1] = '\0';
        st = RCOLL_ERR_REMOTE;
        snprintf(comm->last_error, sizeof(comm->last_error), "rcoll_comm_split (split #%u of "
                 "this communicator): %s could not take part%s: %s (the split failed on every "
                 "rank; this communicator is unaffected)", split_no + 1,
                 rcoll_comm_peer_name(comm, culprit, pbuf, sizeof(pbuf)),
                 nfailed > 1 ? " (and others)" : "", all[culprit].why);
    }
    if (xst != RCOLL_OK || st != RCOLL_OK || mine.color == RCOLL_UNDEFINED) {
        if (probe) rcoll_comm_free(probe, 0);
        if (st == RCOLL_OK) st = xst;
        goto out;
    }
    int size = 0, newrank = -1;
    for (int p = 0; p < n; p++)
        if (all[p].color == color) members[size++] = (member_t){all[p].key, p};
    qsort(members, (size_t)size, sizeof(*members), member_cmp);
    for (int i = 0; i < size; i++)
        if (members[i].rank == comm->rank) newrank = i;

    /* Turn the probe (which owns the listening socket) into the child. */
    st = rcoll_comm_alloc(size, newrank, &comm->cfg, &c);
    if (st != RCOLL_OK) {
        rcoll_comm_free(probe, 0);
        st = split_failed(comm, split_no, st);
        goto out;
    }
    rcoll_comm_take_listeners(c, probe); /* and frees the probe */
    uint64_t ctx = comm->ctx ^ (0x9e3779b97f4a7c15ull * (split_no + 1));
    c->ctx = (ctx ^ (uint64_t)(uint32_t)color) * 1099511628211ull;
    for (int i = 0; i < size; i++) {
        c->bs_of[i] = comm->bs_of[members[i].rank];
        c->peers[i] = comm->peers[members[i].rank];
        memcpy(c->peers[i].handles, all[members[i].rank].handles, sizeof(c->peers[i].handles));
    }
    c->bs = rcoll_bs_ref(comm->bs);
    c->bs_ranks = comm->bs_ranks && size == n; /* every rank, so far as the watchdog cares */
    for (int i = 0; i < size && c->bs_ranks; i++) c->bs_ranks = members[i].rank == i;
    st = rcoll_comm_links(c, rcoll_now_ns() + (uint64_t)(comm->cfg.timeout_s * 1e9));
    c->tuning = comm->tuning; /* the parent's measured constants: same machine, same paths */
    c->tuning_conf = comm->tuning_conf;
    /* and its measured curves where they describe this communicator too: the same ranks (a
     * dup, or a split that keeps everyone) reached the same way.  Otherwise none: the child
     * chooses from the formulas, and an algorithm that must be measured is not chosen. */
    if (st == RCOLL_OK && size == n && c->all_shm == comm->all_shm &&
        c->algo.has_hostseg == comm->algo.has_hostseg && c->algo.has_cma == comm->algo.has_cma)
        memcpy(c->algo.fit, comm->algo.fit, sizeof(c->algo.fit));
    if (st == RCOLL_OK) st = rcoll_family_join(c, comm->family);
    if (st != RCOLL_OK) {
        rcoll_comm_free(c, 0);
        st = split_failed(comm, split_no, st);
        goto out;
    }
    RCOLL_INFO(INIT, "split: rank %d of the parent is rank %d of %d (color %d, key %d)",
               comm->rank, newrank, size, color, key);
    *newcomm = c;
    free(all);
    free(members);
    return RCOLL_OK;

out:
    free(all);
    free(members);
    if (st == RCOLL_OK) *newcomm = NULL;
    return st;
}
