/*
 * plan.h - where a checked collective runs: the planner (plan.c) turns what the call is (kind,
 * buffers' memory, stream order, group, size) and the communicator's settings (CUDA IPC, one
 * host, RCOLL_STAGE_CHUNK) into the routes to try, in order.  Pure: no communicator, no driver;
 * core/api.c gathers the facts and runs the plan, each route being one function of one shape.
 */
#ifndef RCOLL_CORE_PLAN_H
#define RCOLL_CORE_PLAN_H

#include <stddef.h>

#include "core/comm.h"

/* The routes.  A GPU route may decline a call it does not suit (a one-kernel form that does
 * not fit, workspaces that cannot be set up): the next one in the plan then runs it; the last
 * of a plan never declines. */
typedef enum {
    RCOLL_ROUTE_IPC_STREAM, /* the all-reduce as one kernel on the caller's stream (api_ipc.c) */
    RCOLL_ROUTE_STREAM,     /* the host collective in the caller's stream order (api_stream.c) */
    RCOLL_ROUTE_IPC,        /* device to device over CUDA IPC, one host (api_ipc.c) */
    RCOLL_ROUTE_CHUNKED,    /* RCOLL_STAGE_CHUNK: in chunks on every rank (api_stage.c) */
    RCOLL_ROUTE_STAGE,      /* device buffers staged through pinned host memory (api_stage.c) */
    RCOLL_ROUTE_HOST,       /* host buffers: the host algorithms (core/progress.c) */
    RCOLL_ROUTE_COUNT
} rcoll_route_t;

/* What the planner looks at. */
typedef struct {
    rcoll_op_kind_t kind;
    int device;          /* a CUDA device or managed buffer among the call's */
    int no_buffers;      /* neither buffer given (this rank's empty part of an uneven call) */
    int gpu_active;      /* this process uses the CUDA driver */
    int on_stream;       /* a *_stream call */
    int in_group;        /* inside rcoll_group_start/end */
    int ipc;             /* RCOLL_CUDA_IPC */
    int one_host;        /* every rank of the communicator on this host */
    size_t bytes;        /* count x element size */
    size_t stage_chunk;  /* RCOLL_STAGE_CHUNK (0: off) */
} rcoll_plan_in_t;

#define RCOLL_PLAN_MAX 3
typedef struct {
    int n;
    rcoll_route_t route[RCOLL_PLAN_MAX]; /* tried in order */
} rcoll_plan_t;

void rcoll_plan_coll(const rcoll_plan_in_t *in, rcoll_plan_t *plan);
const char *rcoll_route_name(rcoll_route_t p);

/* The kinds each GPU route takes.  CUDA IPC: every collective but the barrier; among them the
 * uneven ones (counts in arrays: all-gather-v, reduce-scatter-v, all-to-all-v), which a rank
 * with no buffer takes too.  Chunked: the collectives of one count (all-reduce, broadcast,
 * reduce, all-gather, reduce-scatter, all-to-all, gather, scatter). */
int rcoll_plan_ipc_kind(rcoll_op_kind_t kind);
int rcoll_plan_ipc_vkind(rcoll_op_kind_t kind);
int rcoll_plan_chunk_kind(rcoll_op_kind_t kind);

#endif
