/*
 * config.h - every rcoll knob, declared once in one table (config.c) and read from the
 * environment into a plain struct.  Nothing else in the library calls getenv for RCOLL_*.
 */
#ifndef RCOLL_UTIL_CONFIG_H
#define RCOLL_UTIL_CONFIG_H

#include <stddef.h>
#include "rcoll.h"

#define RCOLL_CFG_STR_MAX 256

typedef struct rcoll_config {
    /* logging */
    char debug[RCOLL_CFG_STR_MAX];
    char debug_subsys[RCOLL_CFG_STR_MAX];
    char debug_file[RCOLL_CFG_STR_MAX];
    /* launch (rcoll_comm_init_env) */
    int rank;                       /* -1 when unset */
    int nranks;                     /* -1 when unset */
    char root[RCOLL_CFG_STR_MAX];   /* host:port, "" when unset */
    char secret[RCOLL_CFG_STR_MAX]; /* "" when unset */
    /* waits */
    double timeout_s;  /* deadline without progress from an awaited peer */
    int spin;          /* poll iterations before yielding the CPU */
    int poll_us;       /* microseconds of polling (spin, then yield) before naps */
    /* sockets */
    char socket_ifname[RCOLL_CFG_STR_MAX];
    int socket_nsocks;        /* sockets per TCP connection */
    size_t socket_stripe_min; /* messages at least this big are striped over all sockets */
    /* data path */
    size_t buffsize;   /* staging bytes per peer connection (the memory bound) */
    size_t chunk_size; /* pipeline chunk in bytes; 0 = derived from buffsize */
    char algo[RCOLL_CFG_STR_MAX];
    size_t twoshot_slot; /* bytes per two-shot slot in the host segment */
    char proto[RCOLL_CFG_STR_MAX]; /* shared-memory protocol: auto, copy, cma */
    char tuning_file[RCOLL_CFG_STR_MAX]; /* cost-model constants, "" = built-in */
    int tuning_probe;  /* 1: measure the constants at communicator creation */
    char transport[RCOLL_CFG_STR_MAX];
    int shm_disable;   /* 1: never use shared memory between local ranks */
    char host_id[RCOLL_CFG_STR_MAX]; /* "" = hostname + boot id + network namespace */
    char net[RCOLL_CFG_STR_MAX]; /* network transport between hosts: auto, verbs, tcp */
    /* verbs */
    char ibverbs_lib[RCOLL_CFG_STR_MAX]; /* library dlopen()ed for verbs */
    char ib_hca[RCOLL_CFG_STR_MAX];      /* device[:port] filter, ^exclude, =exact */
    int ib_gid_index;                    /* -1 = scored choice */
    char ib_addr_family[RCOLL_CFG_STR_MAX]; /* preferred GID family: ipv4, ipv6 */
    char ib_addr_range[RCOLL_CFG_STR_MAX];  /* "" or CIDR the GID must lie in */
    int ib_tc, ib_sl, ib_timeout, ib_retry_cnt, ib_rnr_retry;
    int ib_qps_per_conn;
    /* topology (src/topo) */
    char topo_file[RCOLL_CFG_STR_MAX];      /* "" = detect */
    char topo_dump_file[RCOLL_CFG_STR_MAX]; /* "" = no dump */
    char net_gdr_level[RCOLL_CFG_STR_MAX];  /* path level name, validated at load */
    char p2p_level[RCOLL_CFG_STR_MAX];      /* "" = default (PXB), validated at load */
} rcoll_config_t;

typedef enum {
    RCOLL_KNOB_STRING,
    RCOLL_KNOB_INT,
    RCOLL_KNOB_SIZE,   /* bytes, accepts K/M/G suffixes (powers of 1024) */
    RCOLL_KNOB_SECONDS /* double */
} rcoll_knob_type_t;

typedef struct {
    const char *name;   /* environment variable */
    const char *defval; /* default as a string */
    rcoll_knob_type_t type;
    size_t offset;      /* into rcoll_config_t */
    long long min, max; /* valid range for INT/SIZE (SECONDS uses min/max as whole seconds) */
    const char *help;
} rcoll_knob_t;

/* Table access for rcoll-info. */
const rcoll_knob_t *rcoll_config_knobs(size_t *count);

/* Fill cfg with defaults, then environment values.  Invalid values fail with
 * RCOLL_ERR_INVALID_ARG and a message naming the variable; unknown RCOLL_* variables get one
 * warning per process.  Also configures logging on the first call. */
rcoll_status_t rcoll_config_load(rcoll_config_t *cfg);

/* Format a knob's current value in cfg into buf. */
void rcoll_config_format(const rcoll_config_t *cfg, const rcoll_knob_t *knob, char *buf,
                         size_t len);

/* Parse "123", "4K", "8M", "1G" (case-insensitive, powers of 1024).  Returns 0 on success. */
int rcoll_parse_size(const char *s, size_t *out);

#endif
