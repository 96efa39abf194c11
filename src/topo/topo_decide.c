/*
 * topo_decide.c - decisions that follow from a topology alone: the ring order of a rank
 * layout.  Pure functions of their arguments (no I/O, no logging), so core/comm.c can call
 * them and tests can check them on fixtures.  (The transport two ranks use is core/pair.c's
 * decision, from the rank table.)
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "util/status.h"

/* ---------------------------------------------------------------------------------------
 * ring order
 * ------------------------------------------------------------------------------------ */

/* Pre-order numbering of the tree CPU package -> host bridges -> switches, so that the
 * devices below any node get contiguous numbers.  Nodes hanging from nothing come last. */
typedef struct {
    const rcoll_topo_t *t;
    int *pci_num; /* per pci node */
    int *cpu_num; /* per cpu package */
    int next;
} dfs_t;

static void dfs_pci(dfs_t *d, topo_ref_kind_t kind, int idx)
{
    for (int i = 0; i < d->t->npci; i++) {
        const topo_pci_t *p = &d->t->pci[i];
        if (p->parent.kind != kind || (kind != TOPO_REF_NONE && p->parent.idx != idx)) continue;
        d->pci_num[i] = d->next++;
        dfs_pci(d, TOPO_REF_PCI, i);
    }
}

static int tree_num(const dfs_t *d, topo_ref_t r)
{
    if (r.kind == TOPO_REF_PCI) return d->pci_num[r.idx];
    if (r.kind == TOPO_REF_CPU) return d->cpu_num[r.idx];
    return d->next; /* after everything */
}

typedef struct {
    const rcoll_topo_t *t;
    const int *gpus;
    const int *key; /* per GPU: tree number of its parent */
} ring_ctx_t;

/* Is candidate x (rank) a better next hop from GPU cur than y? */
static int better(const ring_ctx_t *c, int cur, int x, int y)
{
    int lx, ly, gx = c->gpus[x], gy = c->gpus[y];
    rcoll_path_t px = rcoll_topo_path_gpu_gpu(c->t, cur, gx, &lx);
    rcoll_path_t py = rcoll_topo_path_gpu_gpu(c->t, cur, gy, &ly);
    if (px != py) return px < py;
    if (lx != ly) return lx > ly;
    if (c->key[gx] != c->key[gy]) return c->key[gx] < c->key[gy];
    if (gx != gy) return gx < gy;
    return x < y;
}

/* Order one host's GPU ranks (members[0..n)) greedily into out. */
static void order_gpu_ranks(const ring_ctx_t *c, int *members, int n, int *out)
{
    if (!n) return;
    int first = 0; /* start from the first GPU in tree order */
    for (int i = 1; i < n; i++) {
        int gx = c->gpus[members[i]], gy = c->gpus[members[first]];
        if (c->key[gx] < c->key[gy] || (c->key[gx] == c->key[gy] &&
                                         (gx < gy || (gx == gy && members[i] < members[first]))))
            first = i;
    }
    int cur = members[first];
    members[first] = members[n - 1];
    out[0] = cur;
    for (int k = 1; k < n; k++) {
        int left = n - k, best = 0;
        for (int i = 1; i < left; i++)
            if (better(c, c->gpus[cur], members[i], members[best])) best = i;
        cur = members[best];
        members[best] = members[left - 1];
        out[k] = cur;
    }
}

rcoll_status_t rcoll_topo_ring_order(const rcoll_topo_t *t, int nranks,
                                     const char *const *hosts, const int *gpus, int *order)
{
    if (nranks < 0 || (nranks > 0 && (!hosts || !order)))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "ring order: nranks %d, hosts %p, order %p",
                             nranks, (const void *)hosts, (void *)order);
    for (int r = 0; r < nranks; r++) {
        if (!hosts[r]) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "ring order: rank %d has no "
                                            "host name", r);
        int g = gpus ? gpus[r] : -1;
        if (g < -1 || (t && g >= t->ngpus) || (!t && g > 1 << 20))
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "ring order: rank %d uses GPU %d, but "
                                 "the topology has %d GPU%s", r, g, rcoll_topo_ngpus(t),
                                 rcoll_topo_ngpus(t) == 1 ? "" : "s");
    }
    if (!nranks) return RCOLL_OK;
    int ng = t ? t->ngpus : 0;
    int *out = malloc(sizeof(int) * (size_t)nranks);
    int *placed = calloc((size_t)nranks, sizeof(int));
    int *members = malloc(sizeof(int) * (size_t)nranks);
    int *key = calloc((size_t)(ng + 1), sizeof(int));
    int *pci_num = calloc((size_t)(t && t->npci ? t->npci : 1), sizeof(int));
    int *cpu_num = calloc((size_t)(t && t->ncpus ? t->ncpus : 1), sizeof(int));
    rcoll_status_t st = RCOLL_OK;
    if (!out || !placed || !members || !key || !pci_num || !cpu_num) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "ring order: out of memory");
        goto out;
    }
    if (t) {
        dfs_t d = {.t = t, .pci_num = pci_num, .cpu_num = cpu_num, .next = 0};
        for (int c = 0; c < t->ncpus; c++) {
            cpu_num[c] = d.next++;
            dfs_pci(&d, TOPO_REF_CPU, c);
        }
        dfs_pci(&d, TOPO_REF_NONE, -1);
        for (int g = 0; g < ng; g++) key[g] = tree_num(&d, t->gpus[g].parent);
    }
    ring_ctx_t ctx = {.t = t, .gpus = gpus, .key = key};
    int pos = 0;
    for (int r = 0; r < nranks; r++) {
        if (placed[r]) continue;
        int n = 0;
        for (int s = r; s < nranks; s++) /* this host's ranks, in rank order */
            if (!placed[s] && !strcmp(hosts[s], hosts[r])) {
                placed[s] = 1;
                members[n++] = s;
            }
        if (!t || !gpus) {
            for (int i = 0; i < n; i++) out[pos++] = members[i];
            continue;
        }
        int ngr = 0; /* GPU ranks to the front, keeping rank order on both sides */
        for (int i = 0; i < n; i++)
            if (gpus[members[i]] >= 0) {
                int m = members[i];
                memmove(members + ngr + 1, members + ngr, sizeof(int) * (size_t)(i - ngr));
                members[ngr++] = m;
            }
        order_gpu_ranks(&ctx, members, ngr, out + pos);
        pos += ngr;
        for (int i = ngr; i < n; i++) out[pos++] = members[i];
    }
    memcpy(order, out, sizeof(int) * (size_t)nranks);
out:
    free(out);
    free(placed);
    free(members);
    free(key);
    free(pci_num);
    free(cpu_num);
    return st;
}

rcoll_status_t rcoll_topo_gpu_chain(const rcoll_topo_t *t, int *pos)
{
    int ng = rcoll_topo_ngpus(t);
    if (!t || !pos) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "GPU chain: NULL topology or pos");
    if (!ng) return RCOLL_OK;
    int *gpus = malloc((size_t)ng * sizeof(int)), *order = malloc((size_t)ng * sizeof(int));
    const char **hosts = malloc((size_t)ng * sizeof(*hosts));
    rcoll_status_t st = gpus && order && hosts
                            ? RCOLL_OK
                            : rcoll_err_set(RCOLL_ERR_NO_MEMORY, "GPU chain: out of memory");
    for (int g = 0; st == RCOLL_OK && g < ng; g++) gpus[g] = g, hosts[g] = "";
    if (st == RCOLL_OK) st = rcoll_topo_ring_order(t, ng, hosts, gpus, order);
    for (int i = 0; st == RCOLL_OK && i < ng; i++) pos[order[i]] = i + 1;
    free(gpus), free(order), free(hosts);
    return st;
}

rcoll_status_t rcoll_topo_ring_by_chain(int nranks, const char *const *hosts,
                                        const int *chain_pos, int *order)
{
    rcoll_status_t st = rcoll_topo_ring_order(NULL, nranks, hosts, NULL, order);
    if (st != RCOLL_OK || !chain_pos) return st;
    /* inside each host (a run of order): chain place first (0: none, last), then rank */
    for (int i = 0, j; i < nranks; i = j) {
        for (j = i + 1; j < nranks && !strcmp(hosts[order[j]], hosts[order[i]]); j++) {
        }
        for (int a = i + 1; a < j; a++) { /* insertion sort of order[i..j) */
            int r = order[a], b = a;
            long kr = chain_pos[r] > 0 ? chain_pos[r] : LONG_MAX;
            while (b > i) {
                int q = order[b - 1];
                long kq = chain_pos[q] > 0 ? chain_pos[q] : LONG_MAX;
                if (kq < kr || (kq == kr && q < r)) break;
                order[b] = q;
                b--;
            }
            order[b] = r;
        }
    }
    return RCOLL_OK;
}
