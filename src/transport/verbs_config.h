/*
 * verbs_config.h - the verbs transport's knobs (RCOLL_IBVERBS_LIB, RCOLL_IB_*, and the shared
 * RCOLL_SOCKET_IFNAME for its connection setup).  Kept apart from verbs.h, which needs the
 * verbs headers, so that builds without verbs still know these knobs: a job's environment
 * that sets them gets no "unknown variable" warning, and rcoll-info -c lists them.
 */
#ifndef RCOLL_TRANSPORT_VERBS_CONFIG_H
#define RCOLL_TRANSPORT_VERBS_CONFIG_H

#include "util/config.h"
#include "util/net.h"

typedef enum { RCOLL_IB_FAMILY_IPV4, RCOLL_IB_FAMILY_IPV6 } rcoll_vrb_family_t;
/* RCOLL_IB_GDR: how CUDA memory is registered for GPUDirect RDMA (verbs_mr.c). */
typedef enum {
    RCOLL_IB_GDR_AUTO,    /* dma-buf where the NIC driver takes it, else a loaded nvidia-peermem */
    RCOLL_IB_GDR_OFF,     /* never: CUDA memory is refused (callers stage through host memory) */
    RCOLL_IB_GDR_DMABUF,  /* dma-buf only */
    RCOLL_IB_GDR_PEERMEM  /* ibv_reg_mr on the device pointer only, whether or not a peer-memory
                           * module was seen */
} rcoll_vrb_gdr_mode_t;
/* RCOLL_IB_FAILOVER: moving a connection whose path died to another port (verbs_move.c). */
typedef enum { RCOLL_IB_FAILOVER_AUTO, RCOLL_IB_FAILOVER_ON, RCOLL_IB_FAILOVER_OFF }
    rcoll_vrb_failover_t;

typedef struct {
    rcoll_net_config_t netif;               /* RCOLL_SOCKET_IFNAME: connection setup */
    char ibverbs_lib[RCOLL_CFG_STR_MAX];    /* library dlopen()ed for verbs */
    char ib_hca[RCOLL_CFG_STR_MAX];         /* device[:port] filter, ^exclude, =exact */
    int ib_gid_index;                       /* -1 = scored choice */
    int ib_addr_family;                     /* preferred GID family: rcoll_vrb_family_t */
    char ib_addr_range[RCOLL_CFG_STR_MAX];  /* "" or CIDR the GID must lie in */
    int ib_tc, ib_sl, ib_timeout, ib_retry_cnt, ib_rnr_retry;
    int ib_qps_per_conn;
    int ib_gdr;                             /* rcoll_vrb_gdr_mode_t */
    int ib_mr_cache;                        /* CUDA registrations kept per device */
    int ib_failover;                        /* rcoll_vrb_failover_t */
    double ib_failover_timeout;             /* s: a move must be done by then */
} rcoll_vrb_config_t;

extern const rcoll_config_table_t rcoll_vrb_config_table;

#endif
