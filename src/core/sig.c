/*
 * sig.c - collective signatures (sig.h): digest, text, and the host-segment announcements.
 *
 *   announcement (one 64-byte line per rank):  [seq + 1 | signature: 6 words | unused]
 *   a seqlock: the writer clears the number, writes the words, then publishes the number;
 *   a reader trusts the words only if the number reads the same before and after them.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/reduce.h"
#include "core/comm.h"
#include "core/sig.h"

#define SIG_WORDS (sizeof(rcoll_sig_t) / sizeof(uint64_t))
_Static_assert(sizeof(rcoll_sig_t) % sizeof(uint64_t) == 0, "signature not whole words");
_Static_assert(sizeof(uint64_t) * (1 + SIG_WORDS) <= RCOLL_SIG_ANNOUNCE_BYTES,
               "signature does not fit its announcement line");

void rcoll_sig_of(const struct rcoll_request *r, rcoll_sig_t *s)
{
    s->pad = 0;
    s->seq = r->seq;
    s->kind = (int32_t)r->kind;
    s->count = r->count;
    s->dt = (int32_t)r->dt;
    s->op = (int32_t)r->op;
    s->root = r->root;
    s->alg = -1;
    s->vhash = 0;
    switch (r->kind) {
    case RCOLL_OP_ALLREDUCE:
        s->root = -1;
        s->alg = r->alg_id;
        break;
    case RCOLL_OP_BCAST:
        s->op = -1;
        s->alg = r->alg_id;
        break;
    case RCOLL_OP_BARRIER:
        s->count = 0;
        s->dt = s->op = s->root = -1;
        break;
    case RCOLL_OP_ALLGATHER:
        s->op = s->root = -1;
        s->alg = r->alg_id;
        break;
    case RCOLL_OP_ALLTOALL:
        s->op = s->root = -1;
        break;
    case RCOLL_OP_REDUCE_SCATTER:
        s->root = -1;
        break;
    case RCOLL_OP_REDUCE:
        break;
    case RCOLL_OP_GATHER:
    case RCOLL_OP_SCATTER:
        s->op = -1;
        break;
    case RCOLL_OP_ALLGATHERV:
    case RCOLL_OP_REDUCE_SCATTERV:
        /* every rank knows the whole array: its sum and digest (r->count is the sum) */
        if (r->kind == RCOLL_OP_ALLGATHERV) s->op = -1;
        s->root = -1;
        s->vhash = rcoll_sig_counts_digest(r->v[RCOLL_V_COUNT], r->comm->nranks);
        break;
    case RCOLL_OP_ALLTOALLV:
        /* each rank's counts differ by design: each pair's message sizes check them */
        s->count = 0;
        s->op = s->root = -1;
        break;
    case RCOLL_OP_P2P:
        s->seq = 0;
        s->count = r->nitems ? r->items[0].bytes : 0;
        s->dt = s->op = -1;
        s->root = r->nitems ? r->items[0].peer : -1;
        break;
    }
}

uint64_t rcoll_sig_counts_digest(const size_t *counts, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        uint64_t c = counts[i];
        for (int b = 0; b < 8; b++) {
            h ^= (c >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return (h >> 32) ^ (h & 0xffffffffull);
}

/* Three independent multiplies and a fold: a few cycles on the path of every call. */
int rcoll_sig_tag(const rcoll_sig_t *s)
{
    uint64_t w2 = (uint64_t)(uint8_t)s->kind | (uint64_t)(uint8_t)s->dt << 8 |
                  (uint64_t)(uint8_t)s->op << 16 | (uint64_t)(uint8_t)s->alg << 24 |
                  (uint64_t)(uint32_t)s->root << 32;
    uint64_t h = (s->seq + 1) * 0x9e3779b97f4a7c15ull ^
                 (s->count + 3 + (s->vhash << 40)) * 0xbf58476d1ce4e5b9ull ^
                 (w2 + 5 + (s->vhash >> 24)) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h ^= h >> 32;
    return (int)(h & 0x3fffffffu);
}

int rcoll_sig_equal(const rcoll_sig_t *a, const rcoll_sig_t *b)
{
    return a->seq == b->seq && a->count == b->count && a->kind == b->kind && a->dt == b->dt &&
           a->op == b->op && a->root == b->root && a->alg == b->alg && a->vhash == b->vhash;
}

static const char *const kind_names[] = {"allreduce", "bcast",         "barrier",
                                         "reduce",    "allgather",     "reduce_scatter",
                                         "alltoall",  "point-to-point",
                                         /* rooted and uneven collectives */
                                         "gather",    "scatter",       "allgatherv",
                                         "alltoallv", "reduce_scatterv"};

#define NAME_OF(tab, i, unknown)                                                           \
    ((i) >= 0 && (size_t)(i) < sizeof(tab) / sizeof((tab)[0]) ? (tab)[i] : (unknown))

const char *rcoll_sig_kind_name(int kind)
{
    return NAME_OF(kind_names, kind, "an unknown collective");
}

void rcoll_sig_format(const rcoll_sig_t *s, int with_alg, char *buf, size_t len)
{
    const char *kind = NAME_OF(kind_names, s->kind, "an unknown collective");
    if (s->kind == RCOLL_OP_BARRIER) {
        snprintf(buf, len, "barrier()");
        return;
    }
    if (s->kind == RCOLL_OP_P2P) {
        snprintf(buf, len, "point-to-point calls (first: %llu bytes with rank %d)",
                 (unsigned long long)s->count, (int)s->root);
        return;
    }
    size_t o;
    if (s->kind == RCOLL_OP_ALLTOALLV) /* no count: the message sizes check each pair's */
        o = (size_t)snprintf(buf, len, "%s(%s", kind, rcoll_dt_name((rcoll_datatype_t)s->dt));
    else if (s->kind == RCOLL_OP_ALLGATHERV || s->kind == RCOLL_OP_REDUCE_SCATTERV)
        o = (size_t)snprintf(buf, len, "%s(total=%llu, counts digest %08llx, %s", kind,
                             (unsigned long long)s->count, (unsigned long long)s->vhash,
                             rcoll_dt_name((rcoll_datatype_t)s->dt));
    else
        o = (size_t)snprintf(buf, len, "%s(count=%llu, %s", kind, (unsigned long long)s->count,
                             rcoll_dt_name((rcoll_datatype_t)s->dt));
    if (o < len && s->op >= 0)
        o += (size_t)snprintf(buf + o, len - o, ", %s", rcoll_op_name((rcoll_op_t)s->op));
    if (o < len && s->root >= 0) o += (size_t)snprintf(buf + o, len - o, ", root=%d", s->root);
    if (o < len && with_alg && s->alg >= 0) {
        /* the algorithm table of the call's collective */
        rcoll_coll_t c = s->kind == RCOLL_OP_BCAST       ? RCOLL_COLL_BCAST
                         : s->kind == RCOLL_OP_ALLGATHER ? RCOLL_COLL_ALLGATHER
                                                         : RCOLL_COLL_ALLREDUCE;
        const rcoll_algo_table_t *tb = &rcoll_algo_tables[c];
        o += (size_t)snprintf(buf + o, len - o, "; algorithm %s",
                              s->alg < tb->count ? tb->names[s->alg] : "?");
    }
    if (o < len) snprintf(buf + o, len - o, ")");
}

void rcoll_opnum_record(rcoll_opnum_t *t, uint64_t seq)
{
    t->next = seq + 1;
    if (seq < t->seq0) return; /* the set-up's: numbered by seq */
    uint64_t op = t->internal ? (t->ops + 1) << 1 | 1 : (++t->ops) << 1;
    t->ring[seq % RCOLL_OPNUM_RING].seq = seq + 1;
    t->ring[seq % RCOLL_OPNUM_RING].op = op;
}

void rcoll_opnum_count(rcoll_opnum_t *t)
{
    t->ops++;
}

void rcoll_sig_op_number(const rcoll_opnum_t *t, uint64_t seq, char *buf, size_t len)
{
    if (!t) {
        snprintf(buf, len, "collective #%llu", (unsigned long long)(seq + 1));
        return;
    }
    if (seq < t->seq0) {
        snprintf(buf, len, "set-up operation #%llu", (unsigned long long)(seq + 1));
        return;
    }
    uint64_t op = t->ring[seq % RCOLL_OPNUM_RING].op;
    if (t->ring[seq % RCOLL_OPNUM_RING].seq == seq + 1)
        snprintf(buf, len, "%soperation #%llu", op & 1 ? "a step of " : "",
                 (unsigned long long)(op >> 1));
    else if (seq >= t->next) /* a peer ahead of this rank: its next operations */
        snprintf(buf, len, "operation #%llu", (unsigned long long)(t->ops + seq - t->next + 1));
    else
        snprintf(buf, len, "collective #%llu (set-up and rcoll's own steps included)",
                 (unsigned long long)(seq + 1));
}

void rcoll_sig_sentence(const rcoll_sig_t *theirs, int their_rank, const rcoll_sig_t *mine,
                        int my_rank, const rcoll_opnum_t *t, char *buf, size_t len)
{
    /* The algorithm is named only when nothing else tells the calls apart. */
    rcoll_sig_t a = *theirs, b = *mine;
    a.alg = b.alg = -1;
    int with_alg = rcoll_sig_equal(&a, &b);
    char ts[160], ms[160], tn[48], mn[48];
    rcoll_sig_format(theirs, with_alg, ts, sizeof(ts));
    rcoll_sig_format(mine, with_alg, ms, sizeof(ms));
    rcoll_sig_op_number(t, theirs->seq, tn, sizeof(tn));
    rcoll_sig_op_number(t, mine->seq, mn, sizeof(mn));
    char me[32] = "this rank";
    if (my_rank >= 0) snprintf(me, sizeof(me), "rank %d", my_rank);
    size_t o;
    if (theirs->seq == mine->seq)
        o = (size_t)snprintf(buf, len, "rank %d called %s as %s while %s called %s", their_rank,
                             ts, tn, me, ms);
    else
        o = (size_t)snprintf(buf, len, "rank %d called %s as %s while %s called %s as %s",
                             their_rank, ts, tn, me, ms, mn);
    if (with_alg && o < len) {
        const char *knob = mine->kind == RCOLL_OP_BCAST       ? "RCOLL_ALGO_BCAST"
                           : mine->kind == RCOLL_OP_ALLGATHER ? "RCOLL_ALGO_ALLGATHER"
                                                              : "RCOLL_ALGO";
        snprintf(buf + o, len - o, " (is %s set differently on the ranks?)", knob);
    }
}

static _Atomic uint64_t *line(const char *area, int r)
{
    return (_Atomic uint64_t *)(void *)(area + (size_t)r * RCOLL_SIG_ANNOUNCE_BYTES);
}

void rcoll_sig_announce(char *area, int rank, const rcoll_sig_t *s)
{
    _Atomic uint64_t *l = line(area, rank);
    uint64_t w[SIG_WORDS];
    memcpy(w, s, sizeof(w));
    atomic_store_explicit(&l[0], 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (size_t i = 0; i < SIG_WORDS; i++)
        atomic_store_explicit(&l[1 + i], w[i], memory_order_relaxed);
    atomic_store_explicit(&l[0], s->seq + 1, memory_order_release);
}

int rcoll_sig_announced(const char *area, int p, uint64_t seq, rcoll_sig_t *out)
{
    _Atomic uint64_t *l = line(area, p);
    if (atomic_load_explicit(&l[0], memory_order_acquire) != seq + 1) return 0;
    uint64_t w[SIG_WORDS];
    for (size_t i = 0; i < SIG_WORDS; i++)
        w[i] = atomic_load_explicit(&l[1 + i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&l[0], memory_order_relaxed) != seq + 1) return 0;
    memcpy(out, w, sizeof(w));
    return 1;
}

int rcoll_sig_latest(const char *area, int p, rcoll_sig_t *out)
{
    _Atomic uint64_t *l = line(area, p);
    uint64_t v = atomic_load_explicit(&l[0], memory_order_acquire);
    return v != 0 && rcoll_sig_announced(area, p, v - 1, out);
}
