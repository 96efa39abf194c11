/*
 * test_plan.c - the planner (src/core/plan.c): for every kind of collective and every
 * combination of the facts it reads, the routes it gives, against an independent statement of
 * the rules written here from docs/gpu.md ("Which path a call takes"); and the properties any
 * plan must have (a route at most once, the last one never declining).
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/plan.h"

/* The rules, as docs/gpu.md states them. */
static int is_v(rcoll_op_kind_t k)
{
    return k == RCOLL_OP_ALLGATHERV || k == RCOLL_OP_REDUCE_SCATTERV || k == RCOLL_OP_ALLTOALLV;
}

static void expected(const rcoll_plan_in_t *in, rcoll_plan_t *p)
{
    p->n = 0;
    if (in->on_stream) {
        if (in->ipc && in->one_host && in->device && in->kind == RCOLL_OP_ALLREDUCE)
            p->route[p->n++] = RCOLL_ROUTE_IPC_STREAM;
        p->route[p->n++] = RCOLL_ROUTE_STREAM;
        return;
    }
    int ipc_kind = in->kind != RCOLL_OP_BARRIER;
    int chunk_kind = ipc_kind && !is_v(in->kind);
    int takes_part = in->device || (is_v(in->kind) && in->no_buffers && in->gpu_active);
    if (in->ipc && in->one_host && !in->in_group && ipc_kind && takes_part)
        p->route[p->n++] = RCOLL_ROUTE_IPC;
    if (in->stage_chunk && !in->in_group && chunk_kind && in->bytes > in->stage_chunk) {
        p->route[p->n++] = RCOLL_ROUTE_CHUNKED;
        return;
    }
    p->route[p->n++] = in->device ? RCOLL_ROUTE_STAGE : RCOLL_ROUTE_HOST;
}

static void text(const rcoll_plan_t *p, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "," : "",
                               rcoll_route_name(p->route[i]));
}

int main(void)
{
    static const rcoll_op_kind_t kinds[] = {
        RCOLL_OP_ALLREDUCE, RCOLL_OP_BCAST,    RCOLL_OP_REDUCE,     RCOLL_OP_ALLGATHER,
        RCOLL_OP_REDUCE_SCATTER, RCOLL_OP_ALLTOALL, RCOLL_OP_GATHER, RCOLL_OP_SCATTER,
        RCOLL_OP_ALLGATHERV, RCOLL_OP_REDUCE_SCATTERV, RCOLL_OP_ALLTOALLV, RCOLL_OP_BARRIER};
    int cases = 0, wrong = 0;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (int bits = 0; bits < 1 << 8; bits++)
            for (int size = 0; size < 3; size++) {
                rcoll_plan_in_t in = {.kind = kinds[k],
                                      .device = bits & 1,
                                      .no_buffers = (bits >> 1) & 1,
                                      .gpu_active = (bits >> 2) & 1,
                                      .on_stream = (bits >> 3) & 1,
                                      .in_group = (bits >> 4) & 1,
                                      .ipc = (bits >> 5) & 1,
                                      .one_host = (bits >> 6) & 1,
                                      .stage_chunk = (bits >> 7) & 1 ? 1 << 20 : 0,
                                      .bytes = size == 0 ? 0 : size == 1 ? 1 << 20 : 4 << 20};
                if (in.device && in.no_buffers) continue; /* a device buffer is a buffer */
                rcoll_plan_t got, want;
                memset(&got, 0xff, sizeof(got));
                rcoll_plan_coll(&in, &got);
                expected(&in, &want);
                cases++;
                int same = got.n == want.n;
                for (int i = 0; same && i < got.n; i++) same = got.route[i] == want.route[i];
                if (!same && wrong++ < 10) {
                    char g[64], w[64];
                    text(&got, g, sizeof(g));
                    text(&want, w, sizeof(w));
                    CHECK(0, "kind %d bits %#x %zu B: %s, want %s", (int)in.kind, bits, in.bytes,
                          g, w);
                }
                /* any plan: 1-3 routes, none twice, only the last one that never declines */
                int ok = got.n >= 1 && got.n <= RCOLL_PLAN_MAX;
                for (int i = 0; ok && i < got.n; i++) {
                    int declines = got.route[i] == RCOLL_ROUTE_IPC ||
                                   got.route[i] == RCOLL_ROUTE_IPC_STREAM;
                    ok = (i == got.n - 1) != declines;
                    for (int j = 0; ok && j < i; j++) ok = got.route[j] != got.route[i];
                }
                if (!ok && wrong++ < 10)
                    CHECK(0, "kind %d bits %#x: a malformed plan (%d routes)", (int)in.kind,
                          bits, got.n);
            }
    CHECK(wrong == 0, "%d of %d plans differ from the rules", wrong, cases);
    /* the common case and a few named ones */
    rcoll_plan_t p;
    rcoll_plan_coll(&(rcoll_plan_in_t){.kind = RCOLL_OP_ALLREDUCE, .bytes = 64}, &p);
    CHECK(p.n == 1 && p.route[0] == RCOLL_ROUTE_HOST, "host buffers: the host");
    rcoll_plan_coll(&(rcoll_plan_in_t){.kind = RCOLL_OP_ALLREDUCE, .device = 1, .ipc = 1,
                                       .one_host = 1, .stage_chunk = 1 << 20,
                                       .bytes = 8 << 20},
                    &p);
    CHECK(p.n == 2 && p.route[0] == RCOLL_ROUTE_IPC && p.route[1] == RCOLL_ROUTE_CHUNKED,
          "device buffers, IPC and chunking on: IPC, else chunks");
    rcoll_plan_coll(&(rcoll_plan_in_t){.kind = RCOLL_OP_ALLTOALLV, .no_buffers = 1,
                                       .gpu_active = 1, .ipc = 1, .one_host = 1},
                    &p);
    CHECK(p.n == 2 && p.route[0] == RCOLL_ROUTE_IPC && p.route[1] == RCOLL_ROUTE_HOST,
          "an uneven call without buffers takes part over IPC");
    CHECK(!strcmp(rcoll_route_name(RCOLL_ROUTE_STAGE), "stage") &&
              !strcmp(rcoll_route_name((rcoll_route_t)99), "?"),
          "route names");
    printf("%d plans checked\n", cases);
    return check_summary();
}
