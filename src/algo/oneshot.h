/*
 * oneshot.h - one-shot all-reduce for ranks that share a host segment: every rank publishes
 * its vector in its own slot, then reduces every slot directly (no messages, no staging).
 * Latency-optimal for small vectors: one publish and one wait.  Pure shared memory: no
 * transport, no I/O; never blocks (the caller's progress loop waits and keeps deadlines).
 */
#ifndef RCOLL_ALGO_ONESHOT_H
#define RCOLL_ALGO_ONESHOT_H

#include <stddef.h>
#include <stdint.h>
#include "rcoll.h"

#define RCOLL_ONESHOT_MAX_BYTES 16384 /* largest vector (per rank) the slots hold */

/* A rank's view of the host segment. */
typedef struct {
    char *base;
    int nranks, rank;
} rcoll_oneshot_t;

typedef struct {
    const rcoll_oneshot_t *os;
    const void *src;
    void *dst;
    size_t count;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    uint64_t k;      /* operation number, from 1, the same on every rank */
    uint64_t tag;    /* the call's signature digest: every rank's must be the same */
    int published;
    int waiting_peer;
} rcoll_oneshot_op_t;

/* Bytes of host segment for nranks ranks (zeroed at creation). */
size_t rcoll_oneshot_segment_size(int nranks);
void rcoll_oneshot_op_init(rcoll_oneshot_op_t *o, const rcoll_oneshot_t *os, uint64_t k,
                           uint64_t tag, const void *src, void *dst, size_t count,
                           rcoll_datatype_t dt, rcoll_op_t op);
/* RCOLL_OK when done, RCOLL_INPROGRESS while a peer is not there yet (o->waiting_peer),
 * RCOLL_ERR_INVALID_USAGE when a peer published a different tag (o->waiting_peer names it;
 * nothing of its data is used). */
rcoll_status_t rcoll_oneshot_progress(rcoll_oneshot_op_t *o, int *progressed);

#endif
