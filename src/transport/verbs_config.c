/*
 * verbs_config.c - the verbs transport's knob table.  Built with or without verbs (see
 * verbs_config.h); holds no code.
 */
#include "transport/verbs_config.h"

#define KNOB_STR(name, def, field, help) RCOLL_KNOB_STR(rcoll_vrb_config_t, name, def, field, help)
#define KNOB_INT(name, def, field, lo, hi, help) \
    RCOLL_KNOB_NUM(rcoll_vrb_config_t, name, def, INT, field, lo, hi, help)

static const char *const family_names[] = {"ipv4", "ipv6", NULL}; /* rcoll_vrb_family_t */
static const char *const gdr_names[] = {"auto", "off", "dmabuf", "peermem", NULL};
static const char *const failover_names[] = {"auto", "on", "off", NULL}; /* rcoll_vrb_failover_t */

static const rcoll_knob_t vrb_knobs[] = {
    RCOLL_KNOB_SUBTABLE(rcoll_vrb_config_t, netif, rcoll_net_config_table),
    KNOB_STR("RCOLL_IBVERBS_LIB", "libibverbs.so.1", ibverbs_lib,
             "library loaded with dlopen for the verbs transport (missing = no verbs devices)"),
    KNOB_STR("RCOLL_IB_HCA", "", ib_hca,
             "RDMA devices to use: comma list of name[:port] prefixes (mlx5_0:1,mlx5_1), ^ "
             "excludes the listed ones, = makes names exact"),
    KNOB_INT("RCOLL_IB_GID_INDEX", "-1", ib_gid_index, -1, 1 << 16,
             "GID table index to use on every port (-1 = the best scored: RoCE v2, "
             "RCOLL_IB_ADDR_FAMILY, not link-local, inside RCOLL_IB_ADDR_RANGE)"),
    RCOLL_KNOB_ENUM_OF(rcoll_vrb_config_t, "RCOLL_IB_ADDR_FAMILY", "ipv4", ib_addr_family,
                       family_names,
                       "preferred address family of RoCE GIDs: ipv4 or ipv6 (the other is used "
                       "when it is all there is)"),
    KNOB_STR("RCOLL_IB_ADDR_RANGE", "", ib_addr_range,
             "only RoCE GIDs inside this CIDR range (10.1.0.0/16, fd00::/8) are used"),
    KNOB_INT("RCOLL_IB_TC", "0", ib_tc, 0, 255, "traffic class of RoCE packets (GRH)"),
    KNOB_INT("RCOLL_IB_SL", "0", ib_sl, 0, 15, "InfiniBand service level"),
    KNOB_INT("RCOLL_IB_TIMEOUT", "20", ib_timeout, 1, 31,
             "QP local ACK timeout exponent: 4.096 us * 2^value per retry"),
    KNOB_INT("RCOLL_IB_RETRY_CNT", "7", ib_retry_cnt, 0, 7,
             "QP transport retries before a send fails (retry exceeded)"),
    KNOB_INT("RCOLL_IB_RNR_RETRY", "7", ib_rnr_retry, 0, 7,
             "QP receiver-not-ready retries (7 = unlimited; tests lower it)"),
    KNOB_INT("RCOLL_IB_QPS_PER_CONN", "1", ib_qps_per_conn, 1, 16,
             "queue pairs per verbs connection; each message is split over all of them"),
    RCOLL_KNOB_ENUM_OF(rcoll_vrb_config_t, "RCOLL_IB_GDR", "auto", ib_gdr, gdr_names,
                       "GPUDirect RDMA (CUDA memory registered with the NIC): auto (dma-buf "
                       "where the NIC driver takes it, else nvidia-peermem when loaded), off, "
                       "dmabuf, peermem (forced: ibv_reg_mr on device pointers)"),
    KNOB_INT("RCOLL_IB_MR_CACHE", "64", ib_mr_cache, 0, 1 << 20,
             "GPUDirect RDMA registrations of CUDA allocations kept per device after their "
             "last use, checked against the driver's buffer id (0 = deregister after each)"),
    RCOLL_KNOB_ENUM_OF(rcoll_vrb_config_t, "RCOLL_IB_FAILOVER", "auto", ib_failover,
                       failover_names,
                       "move a connection whose path died (port down, error completion) to "
                       "another port pair, and back when its port returns: auto (where this "
                       "process has several active ports), on, off"),
    RCOLL_KNOB_NUM(rcoll_vrb_config_t, "RCOLL_IB_FAILOVER_TIMEOUT", "10", SECONDS,
                   ib_failover_timeout, 0, 3600,
                   "failover: a move of a connection to another port must be done by then "
                   "while sends wait on it"),
};
const rcoll_config_table_t rcoll_vrb_config_table =
    RCOLL_CONFIG_TABLE("verbs", vrb_knobs, rcoll_vrb_config_t);
