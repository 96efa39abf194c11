/*
 * topo_decide.c - decisions that follow from a topology alone: the path levels of the
 * configuration (parsed and checked by the knob table in topo_detect.c), the transport two
 * ranks would use, and the ring order of a rank layout.
 * Pure functions of their arguments (no I/O, no logging), so core/comm.c can call them and
 * tests can check them on fixtures.  It names transports but never touches one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "util/status.h"

rcoll_status_t rcoll_topo_policy_init(const rcoll_topo_config_t *cfg, rcoll_topo_policy_t *pol)
{
    rcoll_topo_policy_t p = {RCOLL_PATH_PXB, RCOLL_PATH_PXB};
    if (cfg) {
        if (cfg->net_gdr_level < RCOLL_PATH_LOC || cfg->net_gdr_level > RCOLL_PATH_SYS ||
            cfg->p2p_level < RCOLL_PATH_LOC || cfg->p2p_level > RCOLL_PATH_SYS)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "path levels %d/%d are not LOC..SYS",
                                 cfg->net_gdr_level, cfg->p2p_level);
        p.gdr_level = (rcoll_path_t)cfg->net_gdr_level;
        p.p2p_level = (rcoll_path_t)cfg->p2p_level;
    }
    *pol = p;
    return RCOLL_OK;
}

const char *rcoll_pair_transport_name(rcoll_pair_transport_t tr)
{
    switch (tr) {
    case RCOLL_PAIR_SHM: return "shm";
    case RCOLL_PAIR_CUDA_IPC: return "cuda-ipc";
    case RCOLL_PAIR_VERBS_GDR: return "verbs+GDR";
    case RCOLL_PAIR_VERBS: return "verbs";
    case RCOLL_PAIR_TCP: return "tcp";
    }
    return "?";
}

static int port_usable(const rcoll_topo_nic_t *n) { return n->rdma && strcmp(n->state, "down"); }

/* Can this GPU's closest NIC do GPUDirect RDMA?  why gets the verdict either way. */
static int gpu_gdr(const rcoll_topo_t *t, const rcoll_topo_policy_t *pol, int gpu, char *why,
                   size_t len)
{
    int nic = rcoll_topo_gpu_nic(t, gpu);
    if (nic < 0) {
        snprintf(why, len, "GPU %d has no NIC", gpu);
        return 0;
    }
    const rcoll_topo_nic_t *n = rcoll_topo_nic(t, nic);
    if (n->rdma && !port_usable(n)) {
        snprintf(why, len, "GPU %d's closest RDMA port %s is down", gpu, n->name);
        return 0;
    }
    return rcoll_topo_gdr_allowed(t, gpu, nic, pol->gdr_level, why, len);
}

rcoll_pair_transport_t rcoll_topo_pair_transport(const rcoll_topo_t *t,
                                                 const rcoll_topo_policy_t *pol,
                                                 const char *host_a, int gpu_a,
                                                 const char *host_b, int gpu_b,
                                                 rcoll_path_t *path_p, char *reason,
                                                 size_t len)
{
    rcoll_topo_policy_t dflt = {RCOLL_PATH_PXB, RCOLL_PATH_PXB};
    char scratch[8];
    if (!pol) pol = &dflt;
    if (!reason || !len) {
        reason = scratch;
        len = sizeof(scratch);
    }
    int ng = rcoll_topo_ngpus(t);
    int has_a = gpu_a >= 0 && gpu_a < ng, has_b = gpu_b >= 0 && gpu_b < ng;
    int same = host_a && host_b && !strcmp(host_a, host_b);
    char why[300];
    if (same) {
        if (has_a && has_b) {
            int links;
            rcoll_path_t p = rcoll_topo_explain_gpu_gpu(t, gpu_a, gpu_b, &links, why, sizeof(why));
            if (path_p) *path_p = p;
            if (p <= pol->p2p_level) {
                snprintf(reason, len, "same host; GPUs %d and %d are %s (%s), within the P2P "
                         "level %s; the CUDA path is not built yet, shm carries it today",
                         gpu_a, gpu_b, rcoll_path_name(p), why, rcoll_path_name(pol->p2p_level));
                return RCOLL_PAIR_CUDA_IPC;
            }
            snprintf(reason, len, "same host; GPUs %d and %d are %s (%s), beyond the P2P level "
                     "%s: through host memory", gpu_a, gpu_b, rcoll_path_name(p), why,
                     rcoll_path_name(pol->p2p_level));
            return RCOLL_PAIR_SHM;
        }
        if (path_p) *path_p = RCOLL_PATH_LOC;
        snprintf(reason, len, "same host: shared memory");
        return RCOLL_PAIR_SHM;
    }
    if (path_p) *path_p = RCOLL_PATH_NET;
    int usable = -1;
    for (int i = 0; i < rcoll_topo_nnics(t) && usable < 0; i++)
        if (port_usable(rcoll_topo_nic(t, i))) usable = i;
    if (usable < 0) {
        snprintf(reason, len, "different hosts; no RDMA port that is not down%s",
                 t ? "" : " (no topology)");
        return RCOLL_PAIR_TCP;
    }
    if (has_a && has_b) {
        char wa[300], wb[300];
        int ga = gpu_gdr(t, pol, gpu_a, wa, sizeof(wa));
        int gb = gpu_gdr(t, pol, gpu_b, wb, sizeof(wb));
        if (ga && gb) {
            if (gpu_a == gpu_b) snprintf(reason, len, "different hosts; %s", wa);
            else snprintf(reason, len, "different hosts; %s; %s", wa, wb);
            return RCOLL_PAIR_VERBS_GDR;
        }
        snprintf(reason, len, "different hosts; no GPUDirect RDMA: %s", ga ? wb : wa);
        return RCOLL_PAIR_VERBS;
    }
    snprintf(reason, len, "different hosts; RDMA port %s, %s", rcoll_topo_nic(t, usable)->name,
             has_a || has_b ? "one rank has no GPU: host memory" : "host memory");
    return RCOLL_PAIR_VERBS;
}

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
