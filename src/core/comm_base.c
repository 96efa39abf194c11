/*
 * comm_base.c - what the lower parts of the core (connections, progress, split, shrink, the
 * API's routes) ask of a communicator's state: a peer's printable name, the last error, and
 * the GPUDirect verdict of a transport.  Calls nothing else in the core, so that they need not
 * call comm.c (which builds communicators and calls them).
 */
#include <stdio.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/status.h"

const char *rcoll_comm_peer_name(rcoll_comm_t comm, int rank, char *buf, size_t len)
{
    if (comm->peers && rank >= 0 && rank < comm->nranks)
        snprintf(buf, len, "rank %d (%s pid %d)", rank, comm->peers[rank].hostname,
                 (int)comm->peers[rank].pid);
    else
        snprintf(buf, len, "rank %d", rank);
    return buf;
}

void rcoll_comm_set_error(rcoll_comm_t comm, rcoll_status_t st, const char *text)
{
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", text);
    if (comm->cfg.comm_name[0])
        RCOLL_WARN(COLL, "communicator %s: %s (%s)", comm->cfg.comm_name, text,
                   rcoll_status_string(st));
    else
        RCOLL_WARN(COLL, "%s (%s)", text, rcoll_status_string(st));
}

void rcoll_comm_gdr_failed(rcoll_comm_t c, const rcoll_transport_ops_t *tp, const char *why)
{
    int t = rcoll_transport_index(tp);
    if (t < 0 || !c->gdr_ok[t]) return;
    c->gdr_ok[t] = 0;
    RCOLL_WARN(INIT, "rank %d: GPUDirect RDMA over %s failed (%s): this message fails, later "
               "ones with CUDA buffers of GPU %s are staged through host memory", c->rank,
               tp->name, why, c->gdr_bus[t]);
}
