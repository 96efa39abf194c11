/*
 * pair.c - which transport two ranks use: the configuration filter each rank applies before
 * listening, and the choice between two ranks from what the rank table says of both.  Pure:
 * no I/O, no logging (core/comm.c logs the choice; tools/rcoll-topo prints it for a layout).
 */
#include <stdio.h>

#include "core/pair.h"

int rcoll_pair_allowed(const rcoll_config_t *cfg, const rcoll_transport_ops_t *t, char *why,
                       size_t len)
{
    char scratch[8];
    if (!why || !len) why = scratch, len = sizeof(scratch);
    if (cfg->transport != RCOLL_CFG_TRANSPORT_AUTO) { /* forced: that one, nothing else */
        const rcoll_transport_ops_t *forced =
            rcoll_transport_find(rcoll_cfg_transport_names[cfg->transport]);
        if (t == forced) return 1;
        snprintf(why, len, "RCOLL_TRANSPORT=%s", rcoll_cfg_transport_names[cfg->transport]);
        return 0;
    }
    if (t->host_local && cfg->shm_disable) {
        snprintf(why, len, "RCOLL_SHM_DISABLE=1");
        return 0;
    }
    if (!t->host_local && cfg->net != RCOLL_CFG_NET_AUTO &&
        t != rcoll_transport_find(rcoll_cfg_net_names[cfg->net])) {
        snprintf(why, len, "RCOLL_NET=%s", rcoll_cfg_net_names[cfg->net]);
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
