/*
 * api_group.c - groups (rcoll_group_start/end), per thread: the depth, and the operations
 * queued inside a group (blocking collectives, send/receive batches held back) that
 * rcoll_group_end releases and waits for, after the communicator creations deferred to it
 * (api_init.c).  The calls themselves are checked and queued by api.c.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/api_int.h"
#include "core/comm.h"
#include "util/log.h"

static __thread struct rcoll_request **group_reqs;
static __thread int group_nreqs, group_cap;

rcoll_status_t rcoll_api_group_record(rcoll_comm_t comm, struct rcoll_request *r)
{
    if (group_nreqs == group_cap) {
        int cap = group_cap ? 2 * group_cap : 16;
        struct rcoll_request **g = realloc(group_reqs, (size_t)cap * sizeof(*g));
        if (!g) return rcoll_api_arg_error(comm, RCOLL_ERR_NO_MEMORY, "group: out of memory");
        group_reqs = g;
        group_cap = cap;
    }
    group_reqs[group_nreqs++] = r;
    return RCOLL_OK;
}

/* Wait for the group's operations.  Several communicators that are not one family (created
 * separately, e.g. by one thread for several ranks) progress together: one may need another's
 * part before it can finish. */
static rcoll_status_t group_wait_all(void)
{
    rcoll_status_t first = RCOLL_OK;
    int separate = 0;
    for (int i = 1; i < group_nreqs && !separate; i++) {
        rcoll_comm_t a = group_reqs[0]->comm, b = group_reqs[i]->comm;
        separate = a != b && (!a->family || a->family != b->family);
    }
    if (separate) {
        for (unsigned pass = 1, left = 1; left; pass++) {
            left = 0;
            if (pass % 64 == 0) sched_yield(); /* the peers may need this CPU */
            for (int i = 0; i < group_nreqs; i++)
                if (!group_reqs[i]->complete) {
                    rcoll_comm_t c = group_reqs[i]->comm;
                    rcoll_pt_lock(c);
                    rcoll_comm_progress(c);
                    left += !group_reqs[i]->complete;
                    rcoll_pt_unlock(c);
                }
        }
    }
    for (int i = 0; i < group_nreqs; i++) {
        rcoll_comm_t c = group_reqs[i]->comm;
        rcoll_pt_lock(c);
        struct rcoll_request *r = group_reqs[i];
        rcoll_status_t st = rcoll_req_finish(r, rcoll_req_wait(r)); /* staged: copy out */
        rcoll_req_release(r);
        rcoll_pt_unlock(c);
        if (st != RCOLL_OK && first == RCOLL_OK) first = st;
    }
    group_nreqs = 0;
    return first;
}

rcoll_status_t rcoll_group_start(void)
{
    rcoll_api_group_depth++;
    return RCOLL_OK;
}

/* A batch's sends to oneself must pair with its receives from oneself. */
static int self_pairs_match(const struct rcoll_request *r)
{
    int sends = 0, recvs = 0;
    for (int i = 0; i < r->nitems; i++)
        if (r->items[i].peer == r->comm->rank) {
            sends += r->items[i].is_send;
            recvs += !r->items[i].is_send;
        }
    return sends == recvs;
}

/* Hold every communicator of the group for this thread while the group ends, as a call
 * does (comm_enter): another thread's call on one of them is refused meanwhile ("another
 * thread is using this communicator (in rcoll_group_end)") instead of progressing it at the
 * same time.  A communicator another thread is inside already is waited for: that call ends
 * (completes, or fails within RCOLL_TIMEOUT).  Without memory for the list nothing is held,
 * as before this existed. */
static void hold(rcoll_comm_t c)
{
    for (unsigned spins = 0; atomic_exchange_explicit(&c->in_use, 1, memory_order_acquire);
         spins++) {
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_store_explicit(&c->in_use_fn, "rcoll_group_end", memory_order_relaxed);
    atomic_store_explicit(&c->in_use_owner, rcoll_thread_token(), memory_order_release);
}

/* Hold the group's communicators (each once); *held gets the list to release. */
static int group_hold(rcoll_comm_t **held)
{
    int n = group_nreqs, nh = 0;
    *held = n ? malloc((size_t)n * sizeof(**held)) : NULL;
    for (int i = 0; *held && i < n; i++) {
        rcoll_comm_t c = group_reqs[i]->comm;
        int seen = 0;
        for (int j = 0; j < nh && !seen; j++) seen = (*held)[j] == c;
        if (seen) continue;
        hold(c);
        (*held)[nh++] = c;
    }
    return nh;
}

static void group_release(rcoll_comm_t *held, int nh)
{
    for (int k = 0; k < nh; k++) {
        atomic_store_explicit(&held[k]->in_use_owner, NULL, memory_order_relaxed);
        atomic_store_explicit(&held[k]->in_use, 0, memory_order_release);
    }
    free(held);
}

rcoll_status_t rcoll_group_end(void)
{
    if (rcoll_api_group_depth == 0) {
        RCOLL_WARN(COLL, "rcoll_group_end without rcoll_group_start");
        return RCOLL_ERR_INVALID_USAGE;
    }
    if (--rcoll_api_group_depth > 0) return RCOLL_OK;
    /* Communicators first: the handles the group's other calls may not use yet. */
    rcoll_status_t init_st = rcoll_api_group_run_inits();
    rcoll_comm_t *held = NULL;
    int nheld = group_hold(&held);
    /* Release the batches first, so every communicator's work can progress together. */
    for (int i = 0; i < group_nreqs; i++) {
        struct rcoll_request *r = group_reqs[i];
        if (r->kind != RCOLL_OP_P2P || !r->held) continue;
        rcoll_pt_lock(r->comm); /* its thread skips a held head; this releases it */
        r->held = 0;
        r->comm->open_group = NULL;
        if (!self_pairs_match(r)) {
            r->preset = rcoll_api_arg_error(r->comm, RCOLL_ERR_INVALID_USAGE,
                                            "rcoll_group_end: a send to self (rank %d) has "
                                            "no matching receive from self in the group, or "
                                            "the reverse", r->comm->rank);
        }
        rcoll_pt_unlock(r->comm);
    }
    rcoll_status_t first = group_wait_all();
    group_release(held, nheld);
    return init_st != RCOLL_OK ? init_st : first;
}
