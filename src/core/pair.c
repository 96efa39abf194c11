/*
 * pair.c - which transport two ranks use: the configuration filter each rank applies before
 * listening, and the choice between two ranks from what the rank table says of both.  Pure:
 * no I/O, no logging (core/comm.c logs the choice; tools/rcoll-topo prints it for a layout).
 */
#include <stdio.h>
#include <string.h>

#include "core/pair.h"

int rcoll_pair_allowed(const rcoll_config_t *cfg, const rcoll_transport_ops_t *t, char *why,
                       size_t len)
{
    char scratch[8];
    if (!why || !len) why = scratch, len = sizeof(scratch);
    if (cfg->transport != RCOLL_CFG_AUTO) { /* forced: that one, nothing else */
        const rcoll_transport_ops_t *forced =
            rcoll_transport_find(rcoll_transport_names[cfg->transport]);
        if (t == forced) return 1;
        snprintf(why, len, "RCOLL_TRANSPORT=%s", rcoll_transport_names[cfg->transport]);
        return 0;
    }
    if (t->host_local && cfg->shm_disable) {
        snprintf(why, len, "RCOLL_SHM_DISABLE=1");
        return 0;
    }
    if (!t->host_local && cfg->net != RCOLL_CFG_AUTO &&
        t != rcoll_transport_find(rcoll_net_names[cfg->net])) {
        snprintf(why, len, "RCOLL_NET=%s", rcoll_net_names[cfg->net]);
        return 0;
    }
    return 1;
}

int rcoll_pair_transport(const rcoll_pair_end_t *a, const rcoll_pair_end_t *b)
{
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    for (size_t t = 0; t < n; t++) {
        if (!(a->listens & b->listens & (1u << t))) continue;
        if (list[t]->host_local && a->host != b->host) continue;
        return (int)t;
    }
    return -1;
}

/* The topology NIC that is transport device d (name, and port where both know one). */
static int topo_nic_of(const rcoll_topo_t *t, const rcoll_transport_props_t *d)
{
    for (int i = 0; i < rcoll_topo_nnics(t); i++) {
        const rcoll_topo_nic_t *n = rcoll_topo_nic(t, i);
        if (!strcmp(n->name, d->name) && (!n->port || !d->port || n->port == d->port))
            return i;
    }
    return -1;
}

int rcoll_pair_gpu_nic(const rcoll_topo_t *t, const char *gpu_bus,
                       const rcoll_transport_props_t *devs, int ndev, int rank, char *why,
                       size_t len)
{
    char scratch[8];
    if (!why || !len) why = scratch, len = sizeof(scratch);
    int gpu = rcoll_topo_gpu_index(t, gpu_bus);
    if (gpu < 0) {
        snprintf(why, len, "GPU %s is not in the topology (%d GPUs there)", gpu_bus ? gpu_bus : "?",
                 t ? rcoll_topo_ngpus(t) : 0);
        return -1;
    }
    int best = RCOLL_PATH_SYS + 1, ntied = 0, known = 0;
    for (int d = 0; d < ndev; d++) {
        int nic = topo_nic_of(t, &devs[d]);
        if (nic < 0) continue;
        known++;
        int p = (int)rcoll_topo_path_gpu_nic(t, gpu, nic);
        if (p < best) best = p, ntied = 0;
        if (p == best) ntied++;
    }
    if (!known) {
        snprintf(why, len, "none of the %d devices (%s%s) is a NIC of the topology", ndev,
                 ndev ? devs[0].name : "", ndev > 1 ? ", ..." : "");
        return -1;
    }
    int pick = (rank < 0 ? 0 : rank) % ntied, chosen = -1;
    for (int d = 0; d < ndev && chosen < 0; d++) {
        int nic = topo_nic_of(t, &devs[d]);
        if (nic >= 0 && (int)rcoll_topo_path_gpu_nic(t, gpu, nic) == best && pick-- == 0)
            chosen = d;
    }
    char ex[160];
    rcoll_topo_explain_gpu_nic(t, gpu, topo_nic_of(t, &devs[chosen]), ex, sizeof(ex));
    snprintf(why, len, "GPU %s is %s to %s port %d: %s%s", gpu_bus, rcoll_path_name(best),
             devs[chosen].name, devs[chosen].port, ex,
             ntied > 1 ? " (one of the equally close NICs, spread by rank)" : "");
    return chosen;
}

int rcoll_pair_gdr(const rcoll_topo_t *t, const char *gpu_bus,
                   const rcoll_transport_props_t *dev, rcoll_path_t level, char *why,
                   size_t len)
{
    char scratch[8];
    if (!why || !len) why = scratch, len = sizeof(scratch);
    if (!(dev->ptr_support & RCOLL_PTR_CUDA)) {
        snprintf(why, len, "%s registers no CUDA memory (rcoll-info says why)", dev->name);
        return 0;
    }
    int gpu = rcoll_topo_gpu_index(t, gpu_bus), nic = t ? topo_nic_of(t, dev) : -1;
    if (gpu < 0 || nic < 0) {
        snprintf(why, len, "the topology knows %s %s: the path between them is unknown",
                 gpu < 0 ? "no GPU" : "no NIC", gpu < 0 ? gpu_bus : dev->name);
        return 0;
    }
    return rcoll_topo_gdr_allowed(t, gpu, nic, level, why, len);
}
