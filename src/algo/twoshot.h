/*
 * twoshot.h - two-shot all-reduce for ranks that share a host segment: a reduce-scatter then
 * an all-gather, both straight out of shared memory, pipelined in rounds.  Bandwidth-optimal
 * on one host: each byte of input is copied into shared memory once (only the shards other
 * ranks reduce), reduced once by its owner, and copied out once by every other rank.  Pure
 * shared memory: no transport, no I/O, never blocks (the caller's loop waits and keeps the
 * deadlines).
 */
#ifndef RCOLL_ALGO_TWOSHOT_H
#define RCOLL_ALGO_TWOSHOT_H

#include <stddef.h>
#include <stdint.h>
#include "rcoll.h"

#define RCOLL_TWOSHOT_SLOTS 4                  /* rounds in flight per rank */
#define RCOLL_TWOSHOT_SLOT_BYTES (256u << 10)  /* default bytes per slot */

/* A rank's view of the two-shot area of the host segment. */
typedef struct {
    char *base;        /* start of the area (64-byte aligned) */
    int nranks, rank;
    size_t slot_bytes; /* per slot; a slot holds one shard per rank */
    size_t shard_bytes;/* slot_bytes / nranks, rounded down to 64 bytes */
    uint64_t rounds;   /* rounds used so far by this communicator (same on every rank) */
} rcoll_twoshot_t;

typedef struct {
    rcoll_twoshot_t *ts;
    const char *src;
    char *dst;
    size_t count, esize, shard_elems;
    rcoll_datatype_t dt;
    rcoll_op_t op;
    uint64_t tag;           /* the call's signature digest: every rank's must be the same */
    uint64_t g0, nrounds;   /* global number of this operation's first round; its rounds */
    uint64_t pub, red, gat; /* rounds published, reduced, gathered (0..nrounds) */
    int gat_peer;           /* peers copied so far in round `gat` */
    int waiting_peer;
} rcoll_twoshot_op_t;

/* Bytes of host segment the area needs for nranks ranks with slot_bytes per slot (zeroed at
 * creation); 0 when slot_bytes cannot give every rank at least 64 bytes. */
size_t rcoll_twoshot_area_size(int nranks, size_t slot_bytes);
void rcoll_twoshot_attach(rcoll_twoshot_t *ts, char *base, int nranks, int rank,
                          size_t slot_bytes);
/* Start an operation: takes its rounds from ts->rounds. */
void rcoll_twoshot_op_init(rcoll_twoshot_op_t *o, rcoll_twoshot_t *ts, uint64_t tag,
                           const void *src, void *dst, size_t count, rcoll_datatype_t dt,
                           rcoll_op_t op);
/* RCOLL_OK when done, RCOLL_INPROGRESS while a peer is not there yet (o->waiting_peer),
 * RCOLL_ERR_INVALID_USAGE when a peer published a round of a different call (its tag, in the
 * slot header; o->waiting_peer names it, nothing of its data is used). */
rcoll_status_t rcoll_twoshot_progress(rcoll_twoshot_op_t *o, int *progressed);

#endif
