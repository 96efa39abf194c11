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

#endif
