/*
 * plan.c - the planner (plan.h): one place that says which path a collective takes, so that
 * core/api.c checks arguments and runs the plan, and each path's file does its path only.
 */
#include "core/plan.h"

int rcoll_plan_ipc_vkind(rcoll_op_kind_t kind)
{
    return kind == RCOLL_OP_ALLGATHERV || kind == RCOLL_OP_REDUCE_SCATTERV ||
           kind == RCOLL_OP_ALLTOALLV;
}

int rcoll_plan_ipc_kind(rcoll_op_kind_t kind)
{
    return kind == RCOLL_OP_ALLREDUCE || kind == RCOLL_OP_REDUCE ||
           kind == RCOLL_OP_REDUCE_SCATTER || kind == RCOLL_OP_ALLGATHER ||
           kind == RCOLL_OP_BCAST || kind == RCOLL_OP_ALLTOALL || kind == RCOLL_OP_GATHER ||
           kind == RCOLL_OP_SCATTER || rcoll_plan_ipc_vkind(kind);
}

int rcoll_plan_chunk_kind(rcoll_op_kind_t kind)
{
    return kind == RCOLL_OP_ALLREDUCE || kind == RCOLL_OP_BCAST || kind == RCOLL_OP_REDUCE ||
           kind == RCOLL_OP_ALLGATHER || kind == RCOLL_OP_REDUCE_SCATTER ||
           kind == RCOLL_OP_ALLTOALL || kind == RCOLL_OP_GATHER || kind == RCOLL_OP_SCATTER;
}

static void add(rcoll_plan_t *p, rcoll_route_t route)
{
    if (p->n < RCOLL_PLAN_MAX) p->route[p->n++] = route;
}

void rcoll_plan_coll(const rcoll_plan_in_t *in, rcoll_plan_t *p)
{
    p->n = 0;
    if (in->on_stream) {
        /* a small all-reduce of device buffers as one kernel on the stream, where the ranks
         * share a host over CUDA IPC; everything else by a host function in stream order
         * (staged there when its buffers are on a device) */
        if (in->ipc && in->kind == RCOLL_OP_ALLREDUCE && in->device && in->one_host)
            add(p, RCOLL_ROUTE_IPC_STREAM);
        add(p, RCOLL_ROUTE_STREAM);
        return;
    }
    /* CUDA IPC: device buffers, or none at all in an uneven collective whose other ranks
     * have some (this rank takes part in the steps all the same); not inside a group (its
     * steps are blocking) */
    if (in->ipc && rcoll_plan_ipc_kind(in->kind) && !in->in_group && in->one_host &&
        (in->device || (rcoll_plan_ipc_vkind(in->kind) && in->no_buffers && in->gpu_active)))
        add(p, RCOLL_ROUTE_IPC);
    /* RCOLL_STAGE_CHUNK: large collectives of one count in chunks on every rank, whatever
     * its buffers, so that all run the same calls */
    if (in->stage_chunk && rcoll_plan_chunk_kind(in->kind) && !in->in_group &&
        in->bytes > in->stage_chunk) {
        add(p, RCOLL_ROUTE_CHUNKED);
        return;
    }
    add(p, in->device ? RCOLL_ROUTE_STAGE : RCOLL_ROUTE_HOST);
}

const char *rcoll_route_name(rcoll_route_t p)
{
    static const char *const names[RCOLL_ROUTE_COUNT] = {
        [RCOLL_ROUTE_IPC_STREAM] = "ipc-stream", [RCOLL_ROUTE_STREAM] = "stream",
        [RCOLL_ROUTE_IPC] = "ipc",               [RCOLL_ROUTE_CHUNKED] = "chunked",
        [RCOLL_ROUTE_STAGE] = "stage",           [RCOLL_ROUTE_HOST] = "host"};
    return p >= 0 && p < RCOLL_ROUTE_COUNT ? names[p] : "?";
}
