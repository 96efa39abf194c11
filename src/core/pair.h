/*
 * pair.h - the one decision of which transport carries the traffic between two ranks.
 * core/comm.c applies it to every peer of a communicator; tools/rcoll-topo applies it to a
 * planned rank layout, so the tool shows what the library does.
 */
#ifndef RCOLL_CORE_PAIR_H
#define RCOLL_CORE_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include "core/config.h"
#include "topo/topo.h"
#include "transport/transport.h"

/* What the rank table says of one rank. */
typedef struct {
    uint64_t host;     /* host identity (hostname, boot id, network namespace; RCOLL_HOST_ID) */
    unsigned listens;  /* bit t: listens on built-in transport t (registry order) */
} rcoll_pair_end_t;

/* Whether this rank's configuration lets it try built-in transport t (RCOLL_TRANSPORT,
 * RCOLL_SHM_DISABLE, RCOLL_NET).  When it does not, why (may be NULL) gets the setting that
 * rules it out, e.g. "RCOLL_NET=tcp". */
int rcoll_pair_allowed(const rcoll_config_t *cfg, const rcoll_transport_ops_t *t, char *why,
                       size_t len);

/* The transport between a and b: the first in priority order that both listen on, a
 * host-local one only when both are on one host.  Its registry index, or -1 when none. */
int rcoll_pair_transport(const rcoll_pair_end_t *a, const rcoll_pair_end_t *b);

/* Which of a network transport's ndev devices (their properties in devs) a rank whose GPU has
 * PCI bus id gpu_bus uses: among the devices topology t knows (by name, and port where both
 * have one), those with the strongest GPU-NIC path; several equally close ones are spread by
 * rank.  Returns the device index, or -1 when t does not know the GPU or any of the devices.
 * why (may be NULL) gets one sentence either way, e.g. "GPU 0000:19:00.0 is PIX to mlx5_1
 * port 1: behind the same PCIe switch sw0".  Pure. */
int rcoll_pair_gpu_nic(const rcoll_topo_t *t, const char *gpu_bus,
                       const rcoll_transport_props_t *devs, int ndev, int rank, char *why,
                       size_t len);

/* May network device dev move GPU gpu_bus's memory directly (GPUDirect RDMA)?  1 when it
 * registers CUDA memory (RCOLL_PTR_CUDA) and topology t puts it within level of the GPU
 * (rcoll_topo_gdr_allowed); 0 otherwise, also when t does not know the GPU or the device.
 * why gets one sentence either way.  Pure. */
int rcoll_pair_gdr(const rcoll_topo_t *t, const char *gpu_bus,
                   const rcoll_transport_props_t *dev, rcoll_path_t level, char *why,
                   size_t len);

#endif
