/*
 * config.h - the core's knobs (launch, waits, data path) in rcoll_config_t, and the one list
 * of every module's knob table (core sees every layer; util/ cannot).  A communicator keeps
 * its own copy, read at creation; API-given values override it.
 */
#ifndef RCOLL_CORE_CONFIG_H
#define RCOLL_CORE_CONFIG_H

#include <stddef.h>
#include "algo/algo.h"
#include "cuda/gpu.h"
#include "rcoll.h"
#include "topo/topo.h"
#include "transport/transport.h"
#include "util/config.h"
#include "util/net.h"

/* RCOLL_TRANSPORT and RCOLL_NET hold an index into the registry's lists of names
 * (rcoll_transport_names, rcoll_net_names: transport/transport.h); 0 is "auto". */
#define RCOLL_CFG_AUTO 0

/* RCOLL_PMIX (core/config.c): launch through a PMIx server when one started the process. */
enum { RCOLL_PMIX_AUTO = 0, RCOLL_PMIX_ON = 1, RCOLL_PMIX_OFF = 2 };
/* RCOLL_SETUP_PATH: where a creation's critical path starts (rcoll_comm_setup_stats). */
enum { RCOLL_SETUP_PATH_CALL = 0, RCOLL_SETUP_PATH_PROCESS = 1 };

typedef struct rcoll_config {
    /* launch (rcoll_comm_init_env) */
    int rank;                       /* -1 when unset */
    int nranks;                     /* -1 when unset */
    char root[RCOLL_CFG_STR_MAX];   /* host:port, "" when unset */
    char secret[RCOLL_CFG_STR_MAX]; /* "" when unset */
    char bs_relays[RCOLL_CFG_STR_MAX]; /* RCOLL_BS_RELAYS: the bootstrap's relays ("" none) */
    int bs_fanout;                     /* RCOLL_BS_FANOUT: child relays per node */
    int pmix;                       /* RCOLL_PMIX: RCOLL_PMIX_AUTO, _ON or _OFF */
    int setup_path;                 /* RCOLL_SETUP_PATH: RCOLL_SETUP_PATH_CALL or _PROCESS */
    /* waits */
    double timeout_s;  /* deadline without progress from an awaited peer */
    /* who set timeout_s, for messages: "" = RCOLL_TIMEOUT (or its default); else the
     * creator's config ("timeout_s set at the creation of communicator torch") */
    char timeout_src[128];
    double watchdog_s; /* no progress this long: report who is stuck (0: off, < 0: auto) */
    int spin;          /* poll iterations before yielding the CPU */
    int poll_us;       /* microseconds of polling (spin, then yield) before naps */
    int progress_thread;  /* 1: a thread per communicator progresses queued operations */
    int progress_poll_us; /* ... and polls that long (spin, then yield) before naps */
    int wait;             /* RCOLL_WAIT: RCOLL_WAIT_AUTO, _SPIN or _SLEEP (rcoll.h) */
    int ras;              /* RCOLL_RAS: 1 = answer "who is stuck" on a unix socket (ras.h) */
    char flight_dir[RCOLL_CFG_STR_MAX]; /* RCOLL_FLIGHT_DIR: the flight recorder's ("" off) */
    int sleep_after_us;   /* in sleep mode: polling before sleeping on the doorbell */
    /* data path */
    size_t chunk_size; /* pipeline chunk in bytes; 0 = derived from buffsize */
    rcoll_algo_config_t alg; /* RCOLL_ALGO (declared in algo/select.c) */
    size_t twoshot_slot; /* bytes per two-shot slot in the host segment */
    char tuning_file[RCOLL_CFG_STR_MAX]; /* cost-model constants, "" = built-in */
    int tuning_probe;  /* 1: measure the constants at communicator creation */
    int tuning_reuse;  /* 1: reuse this process's measurements of the same shape */
    int tuning_probe_max; /* RCOLL_TUNING_PROBE_MAX: no probe above this many ranks */
    int transport;     /* RCOLL_TRANSPORT: index in rcoll_transport_names */
    int shm_disable;   /* 1: never use shared memory between local ranks */
    int cma;           /* 1: cross-memory attach between local ranks where it works */
    char host_id[RCOLL_CFG_STR_MAX]; /* "" = hostname + boot id + network namespace */
    /* Not a knob: the caller's name for the communicator (rcoll_comm_config_t; "" = none),
     * shown in its log lines; children of split/dup inherit it with the rest. */
    char comm_name[64];
    int net;           /* RCOLL_NET, between hosts: index in rcoll_net_names */
    /* knobs of lower layers the core uses too (declared there, embedded here) */
    rcoll_net_config_t netif;      /* RCOLL_SOCKET_IFNAME: bootstrap address */
    rcoll_transport_config_t conn; /* RCOLL_BUFFSIZE: staging per peer */
    rcoll_topo_config_t topo;      /* RCOLL_TOPO_FILE, RCOLL_TOPO_DUMP_FILE, levels */
    rcoll_gpu_config_t gpu;        /* RCOLL_CUDA, RCOLL_CUDA_LIB */
} rcoll_config_t;

extern const rcoll_config_table_t rcoll_core_config_table;

/* Every module's table, lower layers first (rcoll-info -c, the unknown-variable check). */
const rcoll_config_table_t *const *rcoll_config_tables(size_t *count);

/* Read the core's knobs into cfg.  Every other module's table is parsed too, so that any
 * invalid value fails here (RCOLL_ERR_INVALID_ARG naming the variable and what it accepts),
 * whichever transport ends up used; logging is (re)configured from its knobs, and unknown
 * RCOLL_* variables get one warning per process.  cfg is written only on success. */
rcoll_status_t rcoll_config_load(rcoll_config_t *cfg);

#endif
