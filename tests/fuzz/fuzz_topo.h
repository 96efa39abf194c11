/*
 * fuzz_topo.h - what the topology targets do with a graph a file produced: everything the
 * library asks of it afterwards (accessors, path classes with explanations, the closest
 * NIC, GPUDirect decisions, the ring order), so that a file the readers accept but whose
 * graph breaks an invariant is found too.
 */
#ifndef RCOLL_TESTS_FUZZ_TOPO_H
#define RCOLL_TESTS_FUZZ_TOPO_H

#include "fuzz.h"

#include "topo/topo.h"

static inline void fuzz_topo_use(const rcoll_topo_t *t)
{
    char why[256];
    int ngpus = rcoll_topo_ngpus(t), nnics = rcoll_topo_nnics(t), ncpus = rcoll_topo_ncpus(t);
    FZ_ASSERT(ngpus >= 0 && nnics >= 0 && ncpus >= 0);
    FZ_ASSERT(strlen(rcoll_topo_host(t)) < 1024 && strlen(rcoll_topo_source(t)) < 1024);
    for (int i = 0; i < ncpus; i++) (void)rcoll_topo_cpu(t, i);
    for (int i = -1; i < ncpus + 1; i++) (void)strlen(rcoll_topo_cpulist(t, i));
    int g = ngpus < 16 ? ngpus : 16, n = nnics < 16 ? nnics : 16;
    for (int a = 0; a < g; a++) {
        FZ_ASSERT(rcoll_topo_gpu(t, a) != NULL);
        int nic = rcoll_topo_gpu_nic(t, a);
        FZ_ASSERT(nic >= -1 && nic < nnics);
        for (int b = 0; b < g; b++) {
            int links = 0;
            (void)rcoll_topo_explain_gpu_gpu(t, a, b, &links, why, sizeof(why));
            FZ_ASSERT(links >= 0 && strlen(why) < sizeof(why));
        }
        for (int b = 0; b < n; b++) {
            (void)rcoll_topo_explain_gpu_nic(t, a, b, why, sizeof(why));
            (void)rcoll_topo_gdr_allowed(t, a, b, RCOLL_PATH_PXB, why, sizeof(why));
        }
    }
    for (int a = 0; a < n; a++) {
        FZ_ASSERT(rcoll_topo_nic(t, a) != NULL);
        for (int b = 0; b < n; b++) (void)rcoll_topo_path_nic_nic(t, a, b);
    }
    /* One host, a rank per GPU (and one without). */
    int nr = g + 1;
    const char **hosts = malloc(sizeof(*hosts) * (size_t)nr);
    int *gpus = malloc(sizeof(*gpus) * (size_t)nr), *order = malloc(sizeof(*order) * (size_t)nr);
    for (int r = 0; r < nr; r++) {
        hosts[r] = "h";
        gpus[r] = r < g ? g - 1 - r : -1;
    }
    if (rcoll_topo_ring_order(t, nr, hosts, gpus, order) == RCOLL_OK) {
        int seen = 0;
        for (int r = 0; r < nr; r++) {
            FZ_ASSERT(order[r] >= 0 && order[r] < nr);
            seen ^= 1 << order[r];
        }
        FZ_ASSERT(seen == (1 << nr) - 1);
    }
    free(hosts);
    free(gpus);
    free(order);
}

#endif
