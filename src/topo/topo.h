/*
 * topo.h - the topology of one host: CPU packages (sockets), NUMA nodes, the PCI tree (host
 * bridges and PCIe switches), GPUs (with NVLink) and NICs (RDMA and plain), and the path
 * class between any two devices in NCCL's vocabulary.  Knows nothing of transports or
 * collectives: core/comm.c combines it with them (docs/topology.md).
 *
 * Ownership: rcoll_topo_detect / rcoll_topo_load_file allocate a graph that the caller frees
 * with rcoll_topo_free.  A graph is immutable once returned, so const accessors may be called
 * from any thread.  Every function that fails returns an rcoll_status_t with the detail text
 * in rcoll_err_get() (file errors name the file, the line and the object).
 */
#ifndef RCOLL_TOPO_TOPO_H
#define RCOLL_TOPO_TOPO_H

#include <stddef.h>

#include "rcoll.h"
#include "util/config.h"

/* Path classes, strongest first (the order is meaningful: a <= b means "a is at least as
 * close as b").  Names as in NCCL and `nvidia-smi topo -m`. */
typedef enum {
    RCOLL_PATH_LOC = 0, /* "LOC": the same device */
    RCOLL_PATH_NVL,     /* "NVL": direct NVLink, or both GPUs on NVSwitch */
    RCOLL_PATH_NVB,     /* "NVB": NVLink through a common third GPU */
    RCOLL_PATH_PIX,     /* "PIX": behind the same PCIe switch (at most one switch between) */
    RCOLL_PATH_PXB,     /* "PXB": several PCIe switches, below the host bridge */
    RCOLL_PATH_PHB,     /* "PHB": through a PCIe host bridge, same CPU package */
    RCOLL_PATH_SYS,     /* "SYS": across CPU packages (QPI/UPI/xGMI) */
    RCOLL_PATH_NET      /* "NET": another host */
} rcoll_path_t;

/* "LOC", "NVL", ... ; "?" for a value outside the enum. */
const char *rcoll_path_name(rcoll_path_t p);
/* The path names, indexed by rcoll_path_t, NULL-terminated (also the allowed values of the
 * level knobs, LOC..SYS). */
extern const char *const rcoll_path_names[];
/* Parse a path name (case-insensitive, surrounding blanks ignored).  Returns 0 and sets *p,
 * or -1 for anything else (*p untouched). */
int rcoll_path_parse(const char *s, rcoll_path_t *p);

#define RCOLL_TOPO_NAME_MAX 64
#define RCOLL_TOPO_BUSID_MAX 16 /* "0000:17:00.0" plus NUL */

/* One CPU package (socket). */
typedef struct {
    int id;            /* package id (physical_package_id / hwloc os_index) */
    int numa;          /* its first NUMA node, -1 unknown */
    char cpulist[128]; /* logical CPUs, "0-23,48-71"; "" unknown */
} rcoll_topo_cpu_t;

/* One NVIDIA GPU (a PCI function of vendor 0x10de, class 0x03xx). */
typedef struct {
    int index;                       /* 0..n-1, in PCI bus id order when detected */
    char pci[RCOLL_TOPO_BUSID_MAX];  /* "0000:17:00.0" */
    char name[RCOLL_TOPO_NAME_MAX];  /* "NVIDIA H100 80GB HBM3" (NVML), else from PCI ids */
    int numa;                        /* NUMA node, -1 unknown */
    int cpu;                         /* CPU package id it hangs from, -1 unknown */
    int nvswitch_links;              /* NVLinks to NVSwitches, 0 if none */
    double link_gbs;                 /* PCIe link, GB/s; 0 unknown */
} rcoll_topo_gpu_t;

/* One NIC: an RDMA port (verbs device + port) or a plain network interface. */
typedef struct {
    char name[RCOLL_TOPO_NAME_MAX];  /* "mlx5_0", or an interface name "eth0" */
    char pci[RCOLL_TOPO_BUSID_MAX];  /* "" when not a PCI device */
    int numa;                        /* -1 unknown */
    int cpu;                         /* CPU package id, -1 unknown */
    int rdma;                        /* 1: RDMA (verbs) port */
    int port;                        /* RDMA port number (1..), 0 for plain NICs */
    char state[16];                  /* "active", "down", "init", "up" ...; "" unknown */
    char link_layer[16];             /* "ib", "eth"; "" unknown */
    long long speed_mbps;            /* 0 unknown */
    char netdev[RCOLL_TOPO_NAME_MAX];/* RDMA port's network interface, "" if none */
    double link_gbs;                 /* PCIe link, GB/s; 0 unknown */
} rcoll_topo_nic_t;

typedef struct rcoll_topo rcoll_topo_t;

/* The topology knobs (topo_detect.c): RCOLL_TOPO_FILE, RCOLL_TOPO_DUMP_FILE, RCOLL_P2P_LEVEL,
 * RCOLL_NET_GDR_LEVEL. */
typedef struct {
    char topo_file[RCOLL_CFG_STR_MAX];      /* "" = detect */
    char topo_dump_file[RCOLL_CFG_STR_MAX]; /* "" = no dump */
    int p2p_level; /* rcoll_path_t: the farthest GPU-GPU path that CUDA IPC may cross */
    int gdr_level; /* rcoll_path_t: the farthest GPU-NIC path GPUDirect RDMA may cross */
} rcoll_topo_config_t;

/* The farthest GPU-NIC path at which GPUDirect RDMA is used by default (NCCL's default too);
 * RCOLL_NET_GDR_LEVEL changes it for the library, rcoll-topo reports with it. */
#define RCOLL_TOPO_GDR_LEVEL RCOLL_PATH_PXB
extern const rcoll_config_table_t rcoll_topo_config_table;

/*
 * Topology of this host: cfg->topo_file when set (rcoll_topo_load_file), else live
 * detection: hwloc when built with it (sysfs when hwloc fails), else sysfs alone; NVLink
 * from NVML (dlopen "libnvidia-ml.so.1"; absent = no NVLink, logged at INFO); RDMA port
 * details from /sys/class/infiniband.  Then, when cfg->topo_dump_file is set, the result is
 * written there (our JSON).  cfg may be NULL (live detection, no dump).
 * Errors: those of rcoll_topo_load_file / rcoll_topo_dump_file; RCOLL_ERR_SYSTEM when
 * neither hwloc nor sysfs can be read; RCOLL_ERR_NO_MEMORY.  *out is set only on success.
 */
rcoll_status_t rcoll_topo_detect(const rcoll_topo_config_t *cfg, rcoll_topo_t **out);

/*
 * Load a topology file; the format is chosen by content: our JSON (starts with '{'), hwloc
 * XML (root element <topology>, needs a build with hwloc), NCCL topology XML (root
 * <system>).  Errors: RCOLL_ERR_INVALID_ARG with "topology file F line N: ..." for syntax
 * and content errors (dangling references, duplicates, missing keys, NVLink to itself),
 * RCOLL_ERR_SYSTEM when the file cannot be read, RCOLL_ERR_UNSUPPORTED for hwloc XML in a
 * build without hwloc.
 */
rcoll_status_t rcoll_topo_load_file(const char *path, rcoll_topo_t **out);

/* Write t as our JSON to path ("-" = stdout).  Loading the result gives an equal graph.
 * Errors: RCOLL_ERR_SYSTEM (open/write failed). */
rcoll_status_t rcoll_topo_dump_file(const rcoll_topo_t *t, const char *path);

void rcoll_topo_free(rcoll_topo_t *t);

/* Counts and read-only views; index out of range gives NULL. */
const char *rcoll_topo_host(const rcoll_topo_t *t);   /* host name, "" unknown */
const char *rcoll_topo_source(const rcoll_topo_t *t); /* "hwloc", "sysfs", "file x.json" */
int rcoll_topo_ncpus(const rcoll_topo_t *t);
int rcoll_topo_ngpus(const rcoll_topo_t *t);
int rcoll_topo_nnics(const rcoll_topo_t *t);
const rcoll_topo_cpu_t *rcoll_topo_cpu(const rcoll_topo_t *t, int i);
const rcoll_topo_gpu_t *rcoll_topo_gpu(const rcoll_topo_t *t, int i);
const rcoll_topo_nic_t *rcoll_topo_nic(const rcoll_topo_t *t, int i);
/* The index of the GPU at PCI bus id bus ("0000:19:00.0", any case), -1 when t (may be NULL)
 * has none there. */
int rcoll_topo_gpu_index(const rcoll_topo_t *t, const char *bus);
/* CPU list of a package id ("" unknown, also for id -1). */
const char *rcoll_topo_cpulist(const rcoll_topo_t *t, int cpu_id);

/*
 * Path classes.  Indices out of range give RCOLL_PATH_SYS (and 0 links).  When why is not
 * NULL it receives a short explanation ("behind the same PCIe switch sw0", "across CPU
 * packages 0 and 1").  *nvlinks (may be NULL) gets the NVLink count for NVL (direct links,
 * or the smaller NVSwitch link count of the two) and NVB (the best two-hop bottleneck).
 */
rcoll_path_t rcoll_topo_path_gpu_gpu(const rcoll_topo_t *t, int a, int b, int *nvlinks);
rcoll_path_t rcoll_topo_path_gpu_nic(const rcoll_topo_t *t, int gpu, int nic);
rcoll_path_t rcoll_topo_path_nic_nic(const rcoll_topo_t *t, int a, int b);
rcoll_path_t rcoll_topo_explain_gpu_gpu(const rcoll_topo_t *t, int a, int b, int *nvlinks,
                                        char *why, size_t len);
rcoll_path_t rcoll_topo_explain_gpu_nic(const rcoll_topo_t *t, int gpu, int nic, char *why,
                                        size_t len);

/* Closest NIC of a GPU: RDMA ports that are not down, then RDMA ports that are down, then
 * plain NICs; within each, the strongest path, then the lower index.  -1 when there is no
 * NIC (or no such GPU). */
int rcoll_topo_gpu_nic(const rcoll_topo_t *t, int gpu);

/*
 * May NIC `nic` read and write GPU `gpu`'s memory directly (GPUDirect RDMA)?  Yes (1) when
 * the NIC is an RDMA port and their path is at most max_level (reports use
 * RCOLL_TOPO_GDR_LEVEL).  reason (may be NULL) gets one sentence either way, e.g. "GPU 0 and mlx5_3 are SYS:
 * across CPU packages 0 and 1; GPUDirect RDMA allowed up to PXB".
 */
int rcoll_topo_gdr_allowed(const rcoll_topo_t *t, int gpu, int nic, rcoll_path_t max_level,
                           char *reason, size_t len);

/* ---- decisions (topo_decide.c): pure functions of a graph, ready for core/comm.c ----
 * (Which transport two ranks use is decided in core/pair.c, from the rank table.) */

/*
 * Ring order for a rank layout: rank r runs on hosts[r] with GPU gpus[r] (-1 = none; gpus
 * may be NULL: no rank has a GPU).  Ranks are grouped by host (hosts in order of first
 * appearance); inside a host, ranks with GPUs come first, starting from the GPU first in
 * PCI-tree order (socket, host bridge, switch) and each time taking the closest remaining
 * GPU (strongest path, then more NVLinks, then tree order, then lower rank), so that NVLink
 * islands, PCIe switches and sockets are crossed as few times as possible; ranks without a
 * GPU follow in rank order.  t may be NULL: then only grouping by host, rank order inside.
 * Pure and deterministic.  Output order[pos] = rank, for pos in 0..nranks-1.
 * Errors: RCOLL_ERR_INVALID_ARG (nranks < 0, NULL hosts/order or host name, GPU index not
 * in t); RCOLL_ERR_NO_MEMORY.  order is written only on success.
 */
rcoll_status_t rcoll_topo_ring_order(const rcoll_topo_t *t, int nranks,
                                     const char *const *hosts, const int *gpus, int *order);

/* Each GPU's place in its machine's GPU chain: pos[g] = 1 + the position of GPU g in
 * rcoll_topo_ring_order over every GPU of t (one host).  It depends on the GPU and the
 * machine alone, so ranks on different hosts can publish theirs and order any host's ranks
 * alike.  pos holds rcoll_topo_ngpus(t) entries. */
rcoll_status_t rcoll_topo_gpu_chain(const rcoll_topo_t *t, int *pos);
/* The ring the library builds (core/comm.c) and rcoll-topo --ranks shows: ranks grouped by
 * host as rcoll_topo_ring_order does without a topology; inside a host, ranks with a chain
 * place (chain_pos[r] > 0, from their own machine's rcoll_topo_gpu_chain) by place, then
 * rank; the others after, in rank order.  chain_pos may be NULL (rank order inside hosts).
 * A subset of a chain keeps its property: islands, switches and sockets crossed as few times
 * as the chain does.  Errors as rcoll_topo_ring_order's. */
rcoll_status_t rcoll_topo_ring_by_chain(int nranks, const char *const *hosts,
                                        const int *chain_pos, int *order);

#endif
