/*
 * oneshot.c - one-shot all-reduce over a host segment.
 *
 *   segment: [rank 0: slot A | slot B][rank 1: slot A | slot B] ...
 *   slot:    [seq | data ...] - the operation number sits on the same cache line as the
 *            first 56 bytes of data, so a small vector crosses cores as a single line
 *
 *   operation k (from 1) uses slot k % 2: copy the input into the own slot, publish seq = k
 *   (release), wait until every rank's slot shows k (acquire), then dst = slot(0) op slot(1)
 *   op ... op slot(n-1) in rank order on every rank (identical bits everywhere).
 *
 *   Reusing slot k % 2 at operation k + 2 is safe without any extra flag: finishing k + 1
 *   required every rank to publish k + 1, which each did only after finishing k, reading
 *   included.                                                         1 publish + 1 wait
 */
#include <stdatomic.h>
#include <string.h>

#include "algo/oneshot.h"
#include "algo/reduce.h"

#define LINE 64
#define SLOT_BYTES (((RCOLL_ONESHOT_MAX_BYTES + sizeof(uint64_t)) + LINE - 1) / LINE * LINE)

size_t rcoll_oneshot_segment_size(int nranks) { return (size_t)nranks * 2 * SLOT_BYTES; }

static char *slot(const rcoll_oneshot_t *os, int r, uint64_t k)
{
    return os->base + ((size_t)r * 2 + (size_t)(k % 2)) * SLOT_BYTES;
}

static _Atomic uint64_t *slot_seq(char *s) { return (_Atomic uint64_t *)(void *)s; }
static char *slot_data(char *s) { return s + sizeof(uint64_t); }

void rcoll_oneshot_op_init(rcoll_oneshot_op_t *o, const rcoll_oneshot_t *os, uint64_t k,
                           const void *src, void *dst, size_t count, rcoll_datatype_t dt,
                           rcoll_op_t op)
{
    memset(o, 0, sizeof(*o));
    o->os = os;
    o->k = k;
    o->src = src;
    o->dst = dst;
    o->count = count;
    o->dt = dt;
    o->op = op;
    o->waiting_peer = -1;
}

rcoll_status_t rcoll_oneshot_progress(rcoll_oneshot_op_t *o, int *progressed)
{
    const rcoll_oneshot_t *os = o->os;
    int n = os->nranks;
    size_t bytes = o->count * rcoll_dt_size(o->dt);
    *progressed = 0;
    if (!o->published) {
        char *mine = slot(os, os->rank, o->k);
        memcpy(slot_data(mine), o->src, bytes);
        atomic_store_explicit(slot_seq(mine), o->k, memory_order_release);
        o->published = 1;
        *progressed = 1;
    }
    for (int p = 0; p < n; p++)
        if (atomic_load_explicit(slot_seq(slot(os, p, o->k)), memory_order_acquire) < o->k) {
            o->waiting_peer = p;
            return RCOLL_INPROGRESS;
        }
    memcpy(o->dst, slot_data(slot(os, 0, o->k)), bytes);
    for (int p = 1; p < n; p++)
        rcoll_reduce_local(o->dst, o->dst, slot_data(slot(os, p, o->k)), o->count, o->dt, o->op,
                           p == n - 1 ? n : 0);
    *progressed = 1;
    return RCOLL_OK;
}
