/*
 * grow.c - rcoll_comm_grow (its argument checks are in api.c): ranks that are not in a
 * communicator - new processes, or ranks a shrink left out and that were restarted - join
 * its members in a new, larger communicator.
 *
 * One member makes a grow id (rcoll_comm_grow_id): a fresh bootstrap root in its process,
 * with its own secret, whose id the application hands to the new processes (as it handed the
 * first unique id).  At rcoll_comm_grow the members all-gather over the communicator who
 * holds an id and the size each asks for - so every member takes the same decision, and
 * refuses alike when no member or several made one, or the sizes differ - and then every
 * rank, member or new, joins that root as it would join an init: members keep their ranks
 * (0..n-1), new ranks take the numbers they were given (n..N-1).  The result is an ordinary
 * communicator of every rank of its own bootstrap (so it can be shrunk in turn); the old one
 * is untouched and may be used or destroyed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/api_int.h"
#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

typedef struct {
    int32_t nranks; /* the size this member asked for */
    int32_t holds;  /* it made a grow id, which follows */
    rcoll_unique_id_t id;
} grow_rec_t;

/* Drop this member's grow root (aborted with text unless NULL: new ranks that joined it, or
 * join later, fail at once with that sentence). */
static void drop_root(rcoll_comm_t comm, const char *text)
{
    if (!comm->grow_root) return;
    if (text) rcoll_bs_root_abort(comm->grow_root, text);
    char keep[RCOLL_ERR_TEXT_MAX]; /* the release's own sentence is not the caller's error */
    snprintf(keep, sizeof(keep), "%s", rcoll_err_get());
    rcoll_bs_root_release(comm->grow_root, 0); /* never waits: the root ends by itself */
    rcoll_err_set(RCOLL_OK, "%s", keep);
    comm->grow_root = NULL;
}

void rcoll_comm_grow_drop(rcoll_comm_t comm)
{
    if (!comm->grow_root) return;
    char text[RCOLL_BS_TEXT_MAX];
    snprintf(text, sizeof(text), "the communicator whose rank %d made this grow id was "
             "destroyed before it grew", comm->rank);
    drop_root(comm, text);
}

rcoll_status_t rcoll_comm_grow_id_run(rcoll_comm_t comm, rcoll_unique_id_t *id)
{
    if (!comm->grow_root) {
        rcoll_status_t st = rcoll_api_new_root(&comm->cfg, &comm->grow_id, &comm->grow_root);
        if (st != RCOLL_OK) {
            rcoll_err_prefix("rcoll_comm_grow_id: ");
            rcoll_comm_set_error(comm, st, rcoll_err_get());
            return st;
        }
        RCOLL_INFO(INIT, "grow: rank %d made a grow id (a root for the grown communicator)",
                   comm->rank);
    }
    *id = comm->grow_id;
    return RCOLL_OK;
}

/* Fail the grow on this member: the same sentence on every member, the root dropped. */
static rcoll_status_t refuse(rcoll_comm_t comm, rcoll_status_t st, const char *text)
{
    char why[RCOLL_BS_TEXT_MAX];
    snprintf(why, sizeof(why), "rcoll_comm_grow was refused by the members: %.180s", text);
    drop_root(comm, why);
    rcoll_err_set(st, "rcoll_comm_grow: %s", text);
    rcoll_comm_set_error(comm, st, rcoll_err_get());
    return st;
}

rcoll_status_t rcoll_comm_grow_run(rcoll_comm_t comm, int nranks, rcoll_comm_t *newcomm)
{
    *newcomm = NULL;
    int n = comm->nranks;
    grow_rec_t mine, *all = calloc((size_t)n, sizeof(*all));
    if (!all) {
        rcoll_status_t st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rcoll_comm_grow: out of memory");
        rcoll_comm_set_error(comm, st, rcoll_err_get());
        return st;
    }
    memset(&mine, 0, sizeof(mine));
    mine.nranks = nranks;
    mine.holds = comm->grow_root != NULL;
    if (mine.holds) mine.id = comm->grow_id;
    uint64_t t0 = rcoll_now_ns();
    rcoll_status_t st = rcoll_coll_run(comm, RCOLL_OP_ALLGATHER, &mine, all, sizeof(mine),
                                       RCOLL_UINT8, RCOLL_SUM, 0);
    if (st != RCOLL_OK) {
        free(all);
        char why[RCOLL_BS_TEXT_MAX];
        snprintf(why, sizeof(why), "the members could not agree on growing: %.150s",
                 comm->last_error);
        drop_root(comm, why);
        return st;
    }
    /* Every member holds the same records: each check below fails on all of them alike. */
    char text[RCOLL_ERR_TEXT_MAX];
    int holder = -1, second = -1;
    for (int p = 0; p < n; p++) {
        if (all[p].nranks != all[0].nranks) {
            snprintf(text, sizeof(text), "rank 0 asks for %d ranks and rank %d for %d: every "
                     "member must pass the same nranks", (int)all[0].nranks, p,
                     (int)all[p].nranks);
            free(all);
            return refuse(comm, RCOLL_ERR_INVALID_ARG, text);
        }
        if (all[p].holds) {
            if (holder < 0)
                holder = p;
            else if (second < 0)
                second = p;
        }
    }
    if (holder < 0 || second >= 0) {
        if (holder < 0)
            snprintf(text, sizeof(text), "no member made a grow id (call rcoll_comm_grow_id "
                     "on one member and give its id to the new ranks)");
        else
            snprintf(text, sizeof(text), "ranks %d and %d both made a grow id: exactly one "
                     "member makes it", holder, second);
        free(all);
        return refuse(comm, RCOLL_ERR_INVALID_USAGE, text);
    }
    rcoll_unique_id_t id = all[holder].id;
    free(all);
    RCOLL_INFO(INIT, "grow: %d -> %d ranks through rank %d's id", n, nranks, holder);
    /* The members join like any rank; the new ones may be there already. */
    rcoll_comm_t c = NULL;
    st = rcoll_comm_create(nranks, &id, comm->rank, &comm->cfg, NULL, &c);
    rcoll_log_set_rank(comm->rank);
    if (st != RCOLL_OK) {
        char why[RCOLL_ERR_TEXT_MAX];
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
        char note[RCOLL_BS_TEXT_MAX];
        snprintf(note, sizeof(note), "rank %d could not join the grown communicator: %.150s",
                 comm->rank, why);
        drop_root(comm, note);
        rcoll_err_set(st, "rcoll_comm_grow: %s", why);
        rcoll_comm_set_error(comm, st, rcoll_err_get());
        return st;
    }
    drop_root(comm, NULL); /* the root serves the new communicator until its ranks leave */
    RCOLL_INFO(INIT, "grow: rank %d of %d is rank %d of %d (%.1f ms)", comm->rank, n, c->rank,
               nranks, (double)(rcoll_now_ns() - t0) / 1e6);
    *newcomm = c;
    return RCOLL_OK;
}
