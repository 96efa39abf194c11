/*
 * test_sched.c - exhaustive simulation of the pure schedules (algo/sched.c): every rank
 * count 1..16, counts 0..40 plus larger odd ones, several chunk sizes.  The simulator plays all
 * ranks against FIFO links with its own reduction (integer sums, so order does not matter),
 * reads a send's data only when the receiver consumes it (as a zero-copy transport may), and
 * checks the result against a reference computed directly from the inputs.  A send completes
 * (and its data is read) only when the message is delivered into one of the receiver's
 * WINDOW posted receives; a step that waits for its own earlier send therefore really waits.
 * The rooted and uneven schedules (gather, scatter, all-gather-v, reduce-scatter-v,
 * all-to-all-v) run over count patterns with zeros; every message's `more` flag (its tag)
 * must equal its receive's.
 */
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/sched.h"
#include "algo/select.h"
#include "check.h"

#define MAXN 16
#define QCAP 512   /* messages in flight per directed link */
#define SCAP 8192  /* unconsumed sends per rank */

typedef struct {
    int from_rank;
    uint64_t step;   /* sender's step index */
    int buf;         /* which sender buffer */
    size_t off, count;
    uint64_t *data;  /* the payload: a snapshot taken at delivery (or the staged values) */
    int delivered;
    int more;        /* the step's `more` flag (its tag): must equal the receive's */
} msg_t;

#define WINDOW 2 /* receives a rank keeps posted per link: the first WINDOW messages land */

typedef struct {
    msg_t q[QCAP];
    int head, n;
} link_t;

typedef struct {
    rcoll_sched_t s;
    uint64_t k;
    uint64_t *src, *dst, *ref;
    size_t dlen_checked;
    uint64_t unconsumed_sends[SCAP]; /* steps whose sends are not delivered yet */
    int nunconsumed;
    uint64_t sent_elems;
    size_t vc[MAXN], vd[MAXN], rc[MAXN], rd[MAXN]; /* uneven kinds: this rank's arrays */
} sim_rank_t;

enum { K_RING_AR, K_BCAST, K_RD_AR, K_AG, K_RS, K_REDUCE, K_A2A, K_TREE, K_NKINDS,
       /* rooted and uneven: simulated over count patterns (vpattern) */
       K_GATHER = K_NKINDS, K_SCATTER, K_AGV, K_RSV, K_A2AV, K_VEND };
static const char *const kind_name[] = {"ring allreduce", "chain bcast", "recursive doubling",
                                        "ring allgather", "ring reduce-scatter", "chain reduce",
                                        "pairwise alltoall", "double binary tree",
                                        "linear gather", "linear scatter", "ring allgatherv",
                                        "ring reduce-scatterv", "pairwise alltoallv"};

/* Uneven counts: pattern p of block b (of n), scaled by count; a2a_count for the pair. */
static int vpattern;
static size_t vblock(size_t count, int b, int n)
{
    switch (vpattern) {
    case 0: return count;                                      /* equal */
    case 1: return b % 3 == 1 ? 0 : count + (size_t)b * 7;     /* uneven, zeros */
    case 2: return b == n - 1 ? count * 3 + 1 : 0;             /* one rank only */
    default: return (size_t)b * count / 2;                     /* rank 0 empty, growing */
    }
}

static size_t a2a_count(size_t count, int from, int to)
{
    return vpattern == 0 ? count : (size_t)((from * 3 + to * 5 + vpattern) % 4) * count / 2;
}

static int send_done(const sim_rank_t *r, int64_t j)
{
    if (j < 0) return 1;
    for (int i = 0; i < r->nunconsumed; i++)
        if ((int64_t)r->unconsumed_sends[i] <= j) return 0;
    return 1;
}

static void consume_send(sim_rank_t *r, uint64_t step)
{
    for (int i = 0; i < r->nunconsumed; i++)
        if (r->unconsumed_sends[i] == step) {
            r->unconsumed_sends[i] = r->unconsumed_sends[--r->nunconsumed];
            return;
        }
}

/* Deliver one message that a posted receive can take (snapshot the sender's data, complete
 * its send).  Called only when no rank can move otherwise: deliveries are as late as they may
 * be, so a step that overwrites data its own send has not yet delivered is caught.  Returns 1
 * if something was delivered. */
static int deliver(sim_rank_t *R, link_t L[MAXN][MAXN], int n)
{
    for (int to = 0; to < n; to++)
        for (int f = 0; f < n; f++) {
            link_t *l = &L[to][f];
            for (int i = 0; i < l->n && i < WINDOW; i++) {
                msg_t *m = &l->q[(l->head + i) % QCAP];
                if (m->delivered) continue;
                sim_rank_t *from = &R[m->from_rank];
                if (!m->data) {
                    const uint64_t *src =
                        (m->buf == RCOLL_BUF_SRC ? from->src : from->dst) + m->off;
                    m->data = malloc((m->count + 1) * sizeof(uint64_t));
                    memcpy(m->data, src, m->count * sizeof(uint64_t));
                }
                m->delivered = 1;
                consume_send(from, m->step);
                return 1;
            }
        }
    return 0;
}

static uint64_t val(int r, size_t i) { return (uint64_t)(r + 1) * 1000003u + i * 7u; }

/* Buffers, initial contents and the expected result of rank r. */
static void setup_vrank(sim_rank_t *me, int kind, int n, int r, size_t count, int root)
{
    size_t slen = 1, dlen = 1, nb = (size_t)n * count;
    size_t *vc = me->vc, *vd = me->vd, *rc = me->rc, *rd = me->rd, at = 0, total = 0;
    if (kind == K_GATHER) slen = count, dlen = r == root ? nb : 1;
    if (kind == K_SCATTER) slen = r == root ? nb : 1, dlen = count;
    if (kind == K_AGV || kind == K_RSV) {
        for (int b = n - 1; b >= 0; b--) { /* all-gather-v: reverse order with gaps of 2 */
            vc[b] = vblock(count, b, n);
            total += vc[b];
        }
        for (int b = kind == K_AGV ? n - 1 : 0; b >= 0 && b < n; b += kind == K_AGV ? -1 : 1) {
            vd[b] = at; /* reduce-scatter-v: the prefix sums (as the core computes them) */
            at += vc[b] + (kind == K_AGV ? 2 : 0);
        }
        if (kind == K_AGV) dlen = at;
        else slen = total, dlen = vc[r];
    }
    if (kind == K_A2AV) {
        for (int j = n - 1; j >= 0; j--) {
            vc[j] = a2a_count(count, r, j);
            vd[j] = slen - 1;
            slen += vc[j];
        }
        for (int j = 0; j < n; j++) {
            rc[j] = a2a_count(count, j, r);
            rd[j] = dlen - 1;
            dlen += rc[j] + 1;
        }
    }
    me->src = calloc(slen + 1, sizeof(uint64_t));
    me->dst = calloc(dlen + 1, sizeof(uint64_t));
    me->ref = calloc(dlen + 1, sizeof(uint64_t));
    me->dlen_checked = dlen;
    switch (kind) {
    case K_GATHER:
        for (size_t i = 0; i < count; i++) me->src[i] = val(r, i);
        for (size_t i = 0; r == root && i < nb; i++) me->ref[i] = val((int)(i / count), i % count);
        if (r == root) memcpy(me->dst + (size_t)r * count, me->src, count * sizeof(uint64_t));
        if (r != root) me->dlen_checked = 0;
        break;
    case K_SCATTER:
        for (size_t i = 0; r == root && i < nb; i++) me->src[i] = val((int)(i / count), i % count);
        for (size_t i = 0; i < count; i++) me->ref[i] = val(r, i);
        if (r == root) memcpy(me->dst, me->src + (size_t)r * count, count * sizeof(uint64_t));
        break;
    case K_AGV:
        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < vc[b]; i++) me->ref[vd[b] + i] = val(b, i);
        for (size_t i = 0; i < vc[r]; i++) me->dst[vd[r] + i] = val(r, i);
        break;
    case K_RSV:
        for (size_t i = 0; i < total; i++) me->src[i] = val(r, i);
        for (size_t i = 0; i < vc[r]; i++)
            for (int q = 0; q < n; q++) me->ref[i] += val(q, vd[r] + i);
        break;
    case K_A2AV:
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < vc[j]; i++) me->src[vd[j] + i] = val(r, (size_t)j * 4096 + i);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < rc[j]; i++) me->ref[rd[j] + i] = val(j, (size_t)r * 4096 + i);
        memcpy(me->dst + rd[r], me->src + vd[r], vc[r] * sizeof(uint64_t));
        break;
    }
}

static void setup_rank(sim_rank_t *me, int kind, int n, int r, size_t count, int root,
                       int inplace)
{
    if (kind >= K_NKINDS) {
        setup_vrank(me, kind, n, r, count, root);
        return;
    }
    size_t nb = (size_t)n * count;
    size_t slen = count, dlen = count;
    if (kind == K_AG) slen = 0, dlen = nb;
    if (kind == K_RS) slen = nb, dlen = inplace ? nb : count;
    if (kind == K_A2A) slen = dlen = nb;
    me->src = calloc(slen + 1, sizeof(uint64_t));
    int share = inplace && (kind == K_RING_AR || kind == K_RD_AR || kind == K_RS ||
                            kind == K_REDUCE || kind == K_TREE);
    me->dst = share || kind == K_BCAST ? me->src : calloc(dlen + 1, sizeof(uint64_t));
    if (kind == K_BCAST) me->dst = me->src;
    me->ref = calloc(dlen + 1, sizeof(uint64_t));
    me->dlen_checked = kind == K_RS ? count : dlen;
    for (size_t i = 0; i < slen; i++) me->src[i] = val(r, i);
    if (kind == K_BCAST && r != root)
        for (size_t i = 0; i < count; i++) me->src[i] = 0xdeadbeef;
    for (size_t i = 0; i < me->dlen_checked; i++) {
        uint64_t want = 0;
        switch (kind) {
        case K_RING_AR: case K_RD_AR: case K_REDUCE: case K_TREE:
            for (int q = 0; q < n; q++) want += val(q, i);
            break;
        case K_BCAST: want = val(root, i); break;
        case K_AG: want = val((int)(i / count), i % count); break;
        case K_RS:
            for (int q = 0; q < n; q++) want += val(q, (size_t)r * count + i);
            break;
        case K_A2A: want = val((int)(i / count), (size_t)r * count + i % count); break;
        }
        me->ref[i] = want;
    }
    if (kind == K_AG)
        for (size_t i = 0; i < count; i++) me->dst[(size_t)r * count + i] = val(r, i);
    if (kind == K_A2A)
        for (size_t i = 0; i < count; i++)
            me->dst[(size_t)r * count + i] = me->src[(size_t)r * count + i];
    if (kind == K_REDUCE && r != root) me->dlen_checked = 0;
}

/* When set: the schedules come from this algorithm table entry (its schedule op, the ranks
 * on a ring in rank order, the chunk in 8-byte elements), checked as `kind` says. */
static const rcoll_algo_ops_t *reg_ops;

static void reg_schedule(sim_rank_t *me, int n, int r, size_t count, size_t chunk, int root)
{
    static rcoll_tuning_t t;
    rcoll_tuning_defaults(&t);
    rcoll_algo_ctx_t ctx = {.nranks = n, .rank = r, .ring_pos = r, .nhosts = 1, .ppn = n,
                            .all_shm = 1, .chunk_bytes = chunk * 8, .chunk_fixed = 1,
                            .tuning = &t, .forced = RCOLL_ALG_AUTO, .last_alg = -1};
    rcoll_algo_op_t op;
    memset(&op, 0, sizeof(op));
    op.count = count;
    op.dt = RCOLL_UINT64;
    op.op = RCOLL_SUM;
    op.root = root;
    reg_ops->schedule(&ctx, &op, &me->s);
}

/* Run one configuration; returns 0 if correct. */
static int simulate(int kind, int n, size_t count, size_t chunk, int root, int inplace)
{
    static sim_rank_t R[MAXN];
    static link_t L[MAXN][MAXN]; /* L[to][from] */
    for (int r = 0; r < n; r++) {
        if (reg_ops) reg_schedule(&R[r], n, r, count, chunk, root);
        else switch (kind) {
        case K_RING_AR: rcoll_sched_ring_allreduce(&R[r].s, n, r, count, chunk); break;
        case K_BCAST: rcoll_sched_chain_bcast(&R[r].s, n, r, root, count, chunk); break;
        case K_RD_AR: rcoll_sched_rd_allreduce(&R[r].s, n, r, count, chunk); break;
        case K_AG: rcoll_sched_ring_allgather(&R[r].s, n, r, count, chunk); break;
        case K_RS: rcoll_sched_ring_reduce_scatter(&R[r].s, n, r, count, chunk); break;
        case K_REDUCE: rcoll_sched_chain_reduce(&R[r].s, n, r, root, count, chunk); break;
        case K_A2A: rcoll_sched_pairwise_alltoall(&R[r].s, n, r, count, chunk); break;
        case K_TREE: rcoll_sched_dbtree_allreduce(&R[r].s, n, r, count, chunk); break;
        }
        R[r].k = 0;
        R[r].nunconsumed = 0;
        R[r].sent_elems = 0;
        setup_rank(&R[r], kind, n, r, count, root, inplace);
        switch (kind) { /* the uneven ones read the arrays setup_rank made */
        case K_GATHER: rcoll_sched_linear_gather(&R[r].s, n, r, root, count, chunk); break;
        case K_SCATTER: rcoll_sched_linear_scatter(&R[r].s, n, r, root, count, chunk); break;
        case K_AGV: rcoll_sched_ring_allgatherv(&R[r].s, n, r, R[r].vc, R[r].vd, chunk); break;
        case K_RSV:
            rcoll_sched_ring_reduce_scatterv(&R[r].s, n, r, R[r].vc, R[r].vd, chunk);
            break;
        case K_A2AV:
            rcoll_sched_pairwise_alltoallv(&R[r].s, n, r, R[r].vc, R[r].vd, R[r].rc, R[r].rd,
                                           chunk);
            break;
        }
        for (int f = 0; f < n; f++) L[r][f].head = L[r][f].n = 0;
    }
    int ring_only = !reg_ops && kind != K_RD_AR && kind != K_A2A && kind != K_TREE &&
                    kind != K_GATHER && kind != K_SCATTER && kind != K_A2AV;
    int err = 0;
    int progress = 1;
    while (progress && !err) {
        progress = 0;
        for (int r = 0; r < n && !err; r++) {
            sim_rank_t *me = &R[r];
            while (me->k < me->s.nsteps) {
                rcoll_step_t st;
                rcoll_sched_step(&me->s, me->k, &st);
                msg_t m = {0, 0, 0, 0, 0, NULL, 0, 0};
                link_t *in = st.has_recv ? &L[r][st.recv_peer] : NULL;
                if (st.has_recv) {
                    if (in->n == 0 || !in->q[in->head].delivered) break;
                    m = in->q[in->head];
                    if (m.count != st.count || m.more != st.more) {
                        fprintf(stderr, "rank %d step %llu: got %zu elements, expected %zu\n",
                                r, (unsigned long long)me->k, m.count, st.count);
                        err = 1;
                        break;
                    }
                }
                if (!send_done(me, st.wait_send_step)) break;
                if (st.has_send &&
                    (L[st.send_peer][r].n == QCAP || me->nunconsumed == SCAP))
                    break; /* check before consuming anything */
                uint64_t *stage = NULL;
                if (st.has_recv) {
                    in->head = (in->head + 1) % QCAP;
                    in->n--;
                    const uint64_t *data = m.data;
                    uint64_t *d = me->dst + st.doff;
                    const uint64_t *s =
                        st.red_buf == RCOLL_BUF_SRC ? me->src + st.off : me->dst + st.doff;
                    if (st.act == RCOLL_ACT_REDUCE_STAGE) {
                        stage = malloc((st.count + 1) * sizeof(uint64_t));
                        for (size_t i = 0; i < st.count; i++)
                            stage[i] = data[i] + me->src[st.off + i];
                    } else {
                        for (size_t i = 0; i < st.count; i++) {
                            if (st.act == RCOLL_ACT_REDUCE || st.act == RCOLL_ACT_REDUCE_FINAL)
                                d[i] = data[i] + s[i];
                            else
                                d[i] = data[i];
                        }
                    }
                    free(m.data);
                }
                if (st.has_send) {
                    link_t *out = &L[st.send_peer][r];
                    if (ring_only && st.send_peer != (r + 1) % n) {
                        fprintf(stderr, "rank %d sends to %d, not its ring successor\n", r,
                                st.send_peer);
                        free(stage);
                        err = 1;
                        break;
                    }
                    if (st.send_buf == RCOLL_BUF_STAGE && !stage) {
                        fprintf(stderr, "rank %d step %llu sends a slot it did not fill\n", r,
                                (unsigned long long)me->k);
                        err = 1;
                        break;
                    }
                    size_t off = st.send_buf == RCOLL_BUF_DST ? st.doff : st.off;
                    out->q[(out->head + out->n) % QCAP] =
                        (msg_t){r, me->k, st.send_buf, off, st.count, stage, 0, st.more};
                    out->n++;
                    me->unconsumed_sends[me->nunconsumed++] = me->k;
                    me->sent_elems += st.count;
                } else {
                    free(stage);
                }
                me->k++;
                progress = 1;
            }
        }
        if (!progress && !err) progress = deliver(R, L, n);
    }

    uint64_t total_sent = 0;
    for (int r = 0; r < n; r++) {
        if (!err && R[r].k != R[r].s.nsteps) {
            fprintf(stderr, "deadlock: rank %d stopped at step %llu of %llu\n", r,
                    (unsigned long long)R[r].k, (unsigned long long)R[r].s.nsteps);
            err = 1;
        }
        for (int f = 0; f < n; f++) {
            if (L[r][f].n && !err) {
                fprintf(stderr, "rank %d has %d unconsumed messages from %d\n", r, L[r][f].n, f);
                err = 1;
            }
            for (int i = 0; i < L[r][f].n; i++)
                free(L[r][f].q[(L[r][f].head + i) % QCAP].data);
        }
        /* One rank: the core copies (tested by the collective tests), no schedule runs. */
        int checked = n > 1 || kind == K_BCAST || kind == K_AG || kind == K_A2A ||
                      (kind >= K_NKINDS && kind != K_RSV);
        for (size_t i = 0; checked && i < R[r].dlen_checked && !err; i++)
            if (R[r].dst[i] != R[r].ref[i]) {
                fprintf(stderr, "rank %d element %zu: %llu != %llu\n", r, i,
                        (unsigned long long)R[r].dst[i], (unsigned long long)R[r].ref[i]);
                err = 1;
            }
        total_sent += R[r].sent_elems;
    }
    /* Bandwidth: each schedule moves the minimum its algorithm allows. */
    uint64_t nn = (uint64_t)n, c = count, want = 0;
    switch (kind) {
    case K_RING_AR: case K_TREE: want = 2 * (nn - 1) * c; break;
    case K_BCAST: case K_REDUCE: want = (nn - 1) * c; break;
    case K_AG: case K_RS: case K_A2A: want = nn * (nn - 1) * c; break;
    case K_GATHER: case K_SCATTER: want = (nn - 1) * c; break;
    case K_AGV: case K_RSV: /* every block but its owner's (or target's) reaches n-1 ranks */
        for (int b = 0; b < n; b++) want += (nn - 1) * R[0].vc[b];
        break;
    case K_A2AV:
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) want += i != j ? a2a_count(count, i, j) : 0;
        break;
    default: want = total_sent; break; /* doubling: log2(p) vectors per rank plus folds */
    }
    if (!err && n > 1 && total_sent != want) {
        fprintf(stderr, "sent %llu elements in total, expected %llu\n",
                (unsigned long long)total_sent, (unsigned long long)want);
        err = 1;
    }
    for (int r = 0; r < n; r++) {
        if (R[r].dst != R[r].src) free(R[r].dst);
        free(R[r].src);
        free(R[r].ref);
    }
    return err;
}

int main(int argc, char **argv)
{
    static const size_t extra[] = {63, 64, 65, 100, 255, 257, 1000, 4099};
    static const size_t chunks[] = {1, 3, 64, 2, 5, 8};
    /* --quick (sanitizer builds, where the simulation runs 4-5 times slower, and the build
     * with every option off: the same code as the release build's exhaustive run): the first
     * three chunk sizes only (one element, an odd size, a larger one) and up to 9 ranks (odd
     * and even counts, powers of two and not, a partner set past 8); everything else as
     * always. */
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    size_t nchunks = quick ? 3 : sizeof(chunks) / sizeof(chunks[0]);
    int maxn = quick ? 9 : MAXN;
    if (quick) printf("quick run: chunk sizes 1, 3 and 64, 1-9 ranks for the all-rank schedules\n");
    int configs = 0;
    for (int n = 1; n <= maxn; n++)
        for (size_t ci = 0; ci < nchunks; ci++)
            for (size_t c = 0; c <= 40 + sizeof(extra) / sizeof(extra[0]); c++) {
                size_t count = c <= 40 ? c : extra[c - 41];
                for (int kind = 0; kind < K_NKINDS; kind++) {
                    int rooted = kind == K_BCAST || kind == K_REDUCE;
                    /* Block schedules multiply the count by n: keep them small. */
                    if ((kind == K_AG || kind == K_RS || kind == K_A2A) && count > 100) continue;
                    int has_inplace = kind == K_RING_AR || kind == K_RD_AR || kind == K_RS ||
                                      kind == K_REDUCE || kind == K_TREE;
                    for (int root = 0; root < (rooted ? n : 1); root += (n > 4 ? 3 : 1))
                        for (int inplace = 0; inplace <= has_inplace; inplace++) {
                            int bad = simulate(kind, n, count, chunks[ci], root, inplace);
                            CHECK(!bad, "%s n=%d count=%zu chunk=%zu root=%d inplace=%d",
                                  kind_name[kind], n, count, chunks[ci], root, inplace);
                            configs++;
                        }
                }
            }
    /* The rooted and uneven schedules: every count pattern, ranks 1..9, small blocks. */
    static const size_t vcounts[] = {0, 1, 2, 5, 13, 40};
    static const size_t vchunks[] = {1, 2, 3, 5};
    for (int n = 1; n <= 9; n++)
        for (size_t ci = 0; ci < sizeof(vchunks) / sizeof(vchunks[0]); ci++)
            for (size_t c = 0; c < sizeof(vcounts) / sizeof(vcounts[0]); c++)
                for (vpattern = 0; vpattern < 4; vpattern++)
                    for (int kind = K_NKINDS; kind < K_VEND; kind++) {
                        int rooted = kind == K_GATHER || kind == K_SCATTER;
                        if (rooted && vpattern) continue; /* even by definition */
                        for (int root = 0; root < (rooted ? n : 1); root++) {
                            int bad = simulate(kind, n, vcounts[c], vchunks[ci], root, 0);
                            CHECK(!bad, "%s n=%d count=%zu pattern=%d chunk=%zu root=%d",
                                  kind_name[kind], n, vcounts[c], vpattern, vchunks[ci], root);
                            configs++;
                        }
                    }
    /* Every algorithm of the tables that is one schedule (algo/algo.h: its schedule op), as
     * the registry lists them: a new broadcast, all-gather or all-reduce algorithm is
     * simulated here without an edit.  Its collective says what is expected. */
    static const struct { rcoll_coll_t coll; int kind; } by_coll[] = {
        {RCOLL_COLL_ALLREDUCE, K_RD_AR}, {RCOLL_COLL_BCAST, K_BCAST},
        {RCOLL_COLL_ALLGATHER, K_AG}};
    int reg_algos = 0;
    for (size_t c = 0; c < sizeof(by_coll) / sizeof(by_coll[0]); c++) {
        const rcoll_algo_table_t *tb = &rcoll_algo_tables[by_coll[c].coll];
        int kind = by_coll[c].kind, rooted = kind == K_BCAST;
        for (int a = 0; a < tb->count; a++) {
            if (!tb->ops[a]->schedule) continue;
            reg_ops = tb->ops[a];
            reg_algos++;
            /* one of sched.c's kinds was simulated above, every chunk size: only an
             * algorithm's own schedule (RCOLL_SCHED_OWN) is new here */
            sim_rank_t one;
            reg_schedule(&one, 4, 0, 10, 3, 0);
            if (one.s.kind != RCOLL_SCHED_OWN) {
                printf("%s %s: sched.c's kind %d, simulated above\n", tb->coll, tb->names[a],
                       (int)one.s.kind);
                continue;
            }
            int before = configs;
            /* three chunk sizes (one element, odd, large): the kinds above ran every one */
            for (int n = 1; n <= maxn; n++)
                for (size_t ci = 0; ci < 3; ci++)
                    for (size_t cnt = 0; cnt <= 40 + sizeof(extra) / sizeof(extra[0]); cnt++) {
                        size_t count = cnt <= 40 ? cnt : extra[cnt - 41];
                        if (kind == K_AG && count > 100) continue;
                        /* an algorithm that does not apply to n ranks is not simulated */
                        rcoll_tuning_t t;
                        rcoll_tuning_defaults(&t);
                        rcoll_algo_ctx_t probe = {.nranks = n, .nhosts = 1, .ppn = n,
                                                  .all_shm = 1, .tuning = &t};
                        if (n > 1 && isinf(tb->ops[a]->predict(&probe, 4096))) continue;
                        for (int root = 0; root < (rooted ? n : 1); root += (n > 4 ? 3 : 1)) {
                            int bad = simulate(kind, n, count, chunks[ci], root, 0);
                            CHECK(!bad, "%s %s n=%d count=%zu chunk=%zu root=%d", tb->coll,
                                  tb->names[a], n, count, chunks[ci], root);
                            configs++;
                        }
                    }
            printf("%s %s: %d configurations from the table\n", tb->coll, tb->names[a],
                   configs - before);
        }
    }
    reg_ops = NULL;
    CHECK(reg_algos >= 6, "the tables' schedule algorithms were simulated (%d)", reg_algos);
    /* Step counts: 2n-1 per loop for the ring, one per chunk for the chain. */
    rcoll_sched_t s;
    rcoll_sched_ring_allreduce(&s, 4, 0, 100, 10);
    CHECK(s.nloops == 3 && s.nsteps == 21, "ring 4 ranks, 100 elems, chunk 10: %llu loops %llu steps",
          (unsigned long long)s.nloops, (unsigned long long)s.nsteps);
    rcoll_sched_ring_allreduce(&s, 4, 0, 0, 10);
    CHECK(s.nsteps == 0, "count 0 has no steps");
    rcoll_sched_ring_allreduce(&s, 3, 1, (size_t)1 << 40, (size_t)1 << 18);
    CHECK(s.nloops == (((uint64_t)1 << 40) + 3 * ((uint64_t)1 << 18) - 1) / (3 * ((uint64_t)1 << 18)),
          "2^40 elements: loop count without overflow");
    /* Doubling partners: symmetric, and log2(p) (+1 folded) of them. */
    for (int n = 2; n <= 64; n++)
        for (int r = 0; r < n; r++) {
            int pr[32];
            int np = rcoll_sched_rd_partners(n, r, pr);
            for (int i = 0; i < np; i++) {
                int back[32], nb = rcoll_sched_rd_partners(n, pr[i], back), found = 0;
                for (int j = 0; j < nb; j++) found |= back[j] == r;
                CHECK(found && pr[i] != r && pr[i] >= 0 && pr[i] < n,
                      "n=%d: partner %d of %d is mutual", n, pr[i], r);
            }
        }
    printf("simulated %d configurations\n", configs);
    return check_summary();
}
