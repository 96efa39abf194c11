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
            /* Still take part in the exchange, as "undefined", so the others do not hang. */
            mine.color = RCOLL_UNDEFINED;
        }
    }
    rcoll_status_t xst = exchange(comm, all, &mine);
    uint32_t split_no = comm->nsplits++;
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
        goto fail;
    }
    rcoll_comm_take_listeners(c, probe); /* and frees the probe */
    uint64_t ctx = comm->ctx ^ (0x9e3779b97f4a7c15ull * (split_no + 1));
    c->ctx = (ctx ^ (uint64_t)(uint32_t)color) * 1099511628211ull;
    for (int i = 0; i < size; i++) {
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
    if (st != RCOLL_OK) goto fail;
    RCOLL_INFO(INIT, "split: rank %d of the parent is rank %d of %d (color %d, key %d)",
               comm->rank, newrank, size, color, key);
    *newcomm = c;
    free(all);
    free(members);
    return RCOLL_OK;

fail:
    rcoll_comm_set_error(comm, st, rcoll_err_get());
    if (c) rcoll_comm_free(c, 0);
out:
    free(all);
    free(members);
    if (st == RCOLL_OK) *newcomm = NULL;
    return st;
}
