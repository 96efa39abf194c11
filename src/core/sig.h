/*
 * sig.h - collective signatures: what a rank called, compared with what its peers called
 * before any of their data is used (docs/design.md, "Mismatched calls").
 *
 * Every collective has a signature: its number on the communicator, kind, count, datatype,
 * op, root and (all-reduce) algorithm.  Its 30-bit digest is the tag of every message the
 * operation sends, so a transport that matches tags refuses a peer's message from a different
 * call (RCOLL_ERR_INVALID_USAGE) before it lands in a buffer; the shared-memory algorithms
 * keep the digest beside their data.  When every rank is on one host, each rank also
 * announces its whole signature in the host segment, so a rank stalled in a call that its
 * peers never joined (a different algorithm, a different collective) finds the difference.
 * On a mismatch the ranks exchange their whole signatures through the bootstrap root, and
 * each names both sides in one sentence.
 */
#ifndef RCOLL_CORE_SIG_H
#define RCOLL_CORE_SIG_H

#include <stddef.h>
#include <stdint.h>

struct rcoll_comm;
struct rcoll_request;

/* One call, as the ranks compare it (fixed layout: it travels between ranks). */
typedef struct {
    uint64_t seq;   /* collective number on the communicator (from 0, set-up included) */
    uint64_t count; /* elements (per rank for the block collectives; bytes for P2P; the sum
                     * of the counts for all-gather-v and reduce-scatter-v; 0: all-to-all-v) */
    uint64_t vhash; /* all-gather-v, reduce-scatter-v: rcoll_sig_counts_digest of the counts
                     * array (the same on every rank); 0 otherwise */
    int32_t kind;   /* rcoll_op_kind_t */
    int32_t dt;     /* rcoll_datatype_t (-1: none) */
    int32_t op;     /* rcoll_op_t (-1: none) */
    int32_t root;   /* -1: none; for P2P the peer */
    int32_t alg;    /* the algorithm in its collective's table (all-reduce, broadcast,
                     * all-gather: algo/algo.h), -1 otherwise */
    int32_t pad;
} rcoll_sig_t;

#define RCOLL_SIG_ANNOUNCE_BYTES 64 /* host-segment bytes per rank */

/* The signature of request r (a started collective, or a P2P batch: its first item). */
void rcoll_sig_of(const struct rcoll_request *r, rcoll_sig_t *s);
/* The digest of an uneven collective's counts array: FNV-1a (64 bits) over the counts as
 * little-endian 64-bit words, folded to 32 bits (upper half XOR lower half); printed in
 * mismatch sentences as 8 hex digits. */
uint64_t rcoll_sig_counts_digest(const size_t *counts, int n);
/* Its digest: a transport tag in [0, 2^30) (P2P tags have bit 30 set, so never equal). */
int rcoll_sig_tag(const rcoll_sig_t *s);
int rcoll_sig_equal(const rcoll_sig_t *a, const rcoll_sig_t *b);
/* "allreduce(count=1000, int32, sum)"; with_alg adds "; algorithm ring" (all-reduce,
 * broadcast, all-gather). */
void rcoll_sig_format(const rcoll_sig_t *s, int with_alg, char *buf, size_t len);
/* How a communicator's collectives are numbered in sentences.  Every collective has a
 * number on the communicator (its signature's seq, set-up and rcoll's own steps included, the
 * same on every rank); the user sees operations, numbered from 1 after the set-up, in the
 * order the program started them.  rcoll's own collectives inside a user's call (CUDA IPC's
 * set-up and barriers) are steps of that call, not operations.  The table maps the recent
 * numbers to operations (older ones are named by their collective number). */
#define RCOLL_OPNUM_RING 256
typedef struct {
    uint64_t seq0;     /* the first collective after the set-up (UINT64_MAX during it) */
    uint64_t next;     /* the next collective's number (the communicator's coll_seq) */
    uint64_t ops;      /* user operations started after the set-up */
    int internal;      /* the collectives now being started are steps of the coming call */
    struct {
        uint64_t seq;  /* + 1 (0: empty) */
        uint64_t op;   /* operation number << 1 | 1 for a step inside it */
    } ring[RCOLL_OPNUM_RING];
} rcoll_opnum_t;
/* Collective seq is started (after the set-up): an operation of its own, or (t->internal) a
 * step of the operation now starting, whose number the next rcoll_opnum_count or
 * operation takes. */
void rcoll_opnum_record(rcoll_opnum_t *t, uint64_t seq);
/* A user's call that started no collective of its own (a CUDA IPC call made of steps) counts
 * as an operation. */
void rcoll_opnum_count(rcoll_opnum_t *t);
/* "operation #17", "a step of operation #4" (rcoll's own collective inside that call),
 * "set-up operation #2" (the communicator's creation) or, for a number older than the
 * table, "collective #90 (set-up and rcoll's own steps included)".  t may be NULL (numbers
 * as collective numbers). */
void rcoll_sig_op_number(const rcoll_opnum_t *t, uint64_t seq, char *buf, size_t len);
/* The sentence naming both sides: "rank 2 called X as operation #17 while this rank called
 * Y" (my_rank >= 0 names the second side "rank N" instead of "this rank"). */
void rcoll_sig_sentence(const rcoll_sig_t *theirs, int their_rank, const rcoll_sig_t *mine,
                        int my_rank, const rcoll_opnum_t *t, char *buf, size_t len);
/* "allreduce", "bcast", ... for an rcoll_op_kind_t. */
const char *rcoll_sig_kind_name(int kind);
/* Host segment: publish this rank's signature of the operation being started, and read
 * peer p's (1 when p has announced the operation numbered seq, its signature in *out). */
void rcoll_sig_announce(char *area, int rank, const rcoll_sig_t *s);
int rcoll_sig_announced(const char *area, int p, uint64_t seq, rcoll_sig_t *out);
/* Peer p's latest announcement, whatever its number (1 when there is one: the collective p
 * started last). */
int rcoll_sig_latest(const char *area, int p, rcoll_sig_t *out);

#endif
