/*
 * suspend.c - rcoll_comm_suspend / rcoll_comm_resume (their argument checks are in api.c):
 * free a communicator's transport memory while it is not used, and restore it.
 *
 * Suspend is collective: a barrier first, so that no rank still needs a byte from another,
 * then every connection is closed (the shared-memory segments unmapped, the TCP sockets and
 * verbs queue pairs closed, their registrations dropped) and the staging area freed.  What
 * the communicator keeps: its listening endpoints (so that the peers' handles stay valid and
 * resume needs no exchange), its rank table, layout and measured constants, its control
 * connection (a failure meanwhile is still announced), and the host segment, which carries
 * state across calls (the one- and two-shot flags, the call signatures).  Resume is
 * collective too: the ring, doubling and tree connections are made again, the staging is
 * allocated and registered again; other peers connect on first use, as after creation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

rcoll_status_t rcoll_comm_suspend_run(rcoll_comm_t comm)
{
    if (comm->nranks > 1) {
        rcoll_status_t st = rcoll_coll_barrier(comm);
        if (st != RCOLL_OK) {
            rcoll_err_prefix("rcoll_comm_suspend: ");
            return st;
        }
    }
    size_t before = comm->mem_bytes;
    rcoll_conn_fini(comm); /* every connection, and its registrations */
    /* The next connections carry the next epoch: a peer that resumes before this rank gets
     * here is kept apart from this epoch's (conn.c). */
    comm->conn_epoch++;
    free(comm->link.staging);
    comm->link.staging = NULL;
    comm->mem_bytes -= comm->mem_staging;
    comm->mem_staging = 0;
    comm->suspended = 1;
    RCOLL_INFO(INIT, "suspended: connections closed, %zu B of communicator memory freed",
               before - comm->mem_bytes);
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_resume_run(rcoll_comm_t comm)
{
    uint64_t t0 = rcoll_now_ns();
    if (comm->nranks > 1) {
        rcoll_status_t st =
            rcoll_comm_open_links(comm, t0 + (uint64_t)(comm->cfg.timeout_s * 1e9));
        if (st != RCOLL_OK) {
            /* half made: what was opened goes, and it stays suspended (resume again, or
             * destroy it); a peer that died meanwhile is named by the bootstrap */
            char why[RCOLL_ERR_TEXT_MAX];
            snprintf(why, sizeof(why), "%s", rcoll_err_get());
            int culprit = -1;
            if (rcoll_bs_poll(comm->bs, &culprit) != RCOLL_OK)
                snprintf(why, sizeof(why), "%s", rcoll_err_get());
            rcoll_conn_fini(comm);
            free(comm->link.staging);
            comm->link.staging = NULL;
            comm->mem_bytes -= comm->mem_staging;
            comm->mem_staging = 0;
            return rcoll_err_set(st, "rcoll_comm_resume: %s", why);
        }
    }
    comm->suspended = 0;
    RCOLL_INFO(INIT, "resumed in %.1f ms", (double)(rcoll_now_ns() - t0) / 1e6);
    return RCOLL_OK;
}
