/*
 * topo_int.h - inside src/topo only: the graph behind rcoll_topo_t and the builder that
 * every source (hwloc, sysfs, our JSON, NCCL XML) fills.  Sources name parents by id
 * ("cpu0", "sw3"); topo_finalize() resolves the names, checks the graph and derives what
 * the accessors need, so every source gets the same validation and error wording.
 */
#ifndef RCOLL_TOPO_TOPO_INT_H
#define RCOLL_TOPO_TOPO_INT_H

#include "rcoll_build.h"
#include "topo/topo.h"

#define TOPO_ID_MAX 48
#define TOPO_NUMA_UNSET (-2) /* builder: derive from the CPU package at finalize */

typedef enum { TOPO_REF_NONE = 0, TOPO_REF_CPU, TOPO_REF_PCI } topo_ref_kind_t;

typedef struct {
    topo_ref_kind_t kind;
    int idx; /* into cpus[] or pci[] */
} topo_ref_t;

typedef enum { TOPO_PCI_HOSTBRIDGE = 0, TOPO_PCI_SWITCH } topo_pci_kind_t;

typedef struct {
    rcoll_topo_cpu_t info;
    int line; /* where it was declared in a file; 0 = not from a file */
} topo_cpu_t;

/* A host bridge (root complex) or a PCIe switch (its upstream port and all downstream
 * ports collapsed into one node). */
typedef struct {
    char id[TOPO_ID_MAX];
    topo_pci_kind_t kind;
    char parent_name[TOPO_ID_MAX]; /* "" = attached to nothing known */
    topo_ref_t parent;             /* resolved by topo_finalize */
    char busid[RCOLL_TOPO_BUSID_MAX];
    double link_gbs;
    int line;
} topo_pci_t;

typedef struct {
    rcoll_topo_gpu_t info;
    char parent_name[TOPO_ID_MAX];
    topo_ref_t parent;
    int line;
} topo_gpu_t;

typedef struct {
    rcoll_topo_nic_t info;
    char parent_name[TOPO_ID_MAX];
    topo_ref_t parent;
    int line;
} topo_nic_t;

/* NVLink declared by a source: GPU index a has `links` links to GPU index b. */
typedef struct {
    int a, b, links, line;
} topo_nvl_decl_t;

struct rcoll_topo {
    char host[RCOLL_TOPO_NAME_MAX];
    char source[320];
    topo_cpu_t *cpus;
    int ncpus, cap_cpus;
    topo_pci_t *pci;
    int npci, cap_pci;
    topo_gpu_t *gpus;
    int ngpus, cap_gpus;
    topo_nic_t *nics;
    int nnics, cap_nics;
    topo_nvl_decl_t *nvl_decl;
    int nnvl_decl, cap_nvl_decl;
    int *nvl; /* ngpus x ngpus direct link counts, built by topo_finalize */
};

/* ---- builder (topo.c) ---- */
rcoll_topo_t *topo_new(const char *source);
/* Append an element; returns it zeroed apart from the defaults (numa TOPO_NUMA_UNSET,
 * cpu -1), or NULL when out of memory (RCOLL_ERR_NO_MEMORY recorded). */
topo_cpu_t *topo_add_cpu(rcoll_topo_t *t);
topo_pci_t *topo_add_pci(rcoll_topo_t *t);
topo_gpu_t *topo_add_gpu(rcoll_topo_t *t);
topo_nic_t *topo_add_nic(rcoll_topo_t *t);
rcoll_status_t topo_add_nvlink(rcoll_topo_t *t, int a, int b, int links, int line);
/* Drop PCI nodes with no GPU or NIC below them (detected trees carry storage and the like). */
void topo_prune_pci(rcoll_topo_t *t);
/* Give detected GPUs indices 0..n-1 in PCI bus id order (live detection). */
void topo_index_gpus_by_busid(rcoll_topo_t *t);
/* Resolve names, check, derive (numa, cpu, the NVLink matrix).  `what` prefixes errors
 * ("topology file x.json"); objects with a line add "line N". */
rcoll_status_t topo_finalize(rcoll_topo_t *t, const char *what);
/* Error "<what> line N: <text>" (line 0: "<what>: <text>"); returns RCOLL_ERR_INVALID_ARG. */
rcoll_status_t topo_err(const char *what, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- helpers shared by the sources ---- */
/* Normalise a PCI bus id ("0000:17:00.0", "17:00.0", "00000000:17:00.0", any case) into
 * out ("0000:17:00.0").  Returns 0, or -1 when s is not one. */
int topo_busid_norm(const char *s, char *out, size_t len);
/* Bounded copy that always terminates. */
void topo_strlcpy(char *dst, const char *src, size_t len);
/* "0-3,8,10-11" from a sorted list of distinct CPU numbers. */
void topo_format_cpulist(const int *cpus, int n, char *out, size_t len);

/* ---- sources ---- */
rcoll_status_t topo_load_json(const char *path, const char *text, size_t len,
                              rcoll_topo_t **out);
rcoll_status_t topo_load_nccl_xml(const char *path, const char *text, size_t len,
                                  rcoll_topo_t **out);
/* XML well-formedness (line-numbered errors), for files handed to hwloc; for hwloc's
 * <topology>, also the shapes hwloc cannot read safely (topo_xml.c: hwloc_guard). */
rcoll_status_t topo_xml_check(const char *what, const char *text, size_t len,
                              char *root_name, size_t root_len);
#if RCOLL_HAVE_HWLOC
rcoll_status_t topo_hwloc_detect(rcoll_topo_t **out);
rcoll_status_t topo_hwloc_load_xml(const char *path, rcoll_topo_t **out);
#endif
/* Live detection from sysfs under sysroot ("/sys" normally; tests use a fake tree); nvml: also
 * ask NVML for NVLinks and names. */
rcoll_status_t topo_sysfs_detect(const char *sysroot, int nvml, rcoll_topo_t **out);
/* The end of every live detection: GPU numbering by bus id, NVML (when nvml), host name,
 * PCI nodes without devices below them dropped, topo_finalize. */
rcoll_status_t topo_live_finish(rcoll_topo_t *t, int nvml);
/* Fill an RDMA port's state, link layer, rate and netdev, or a plain NIC's speed and state,
 * from sysfs (fields already set are kept).  Missing files are not errors. */
void topo_sysfs_nic_fill(const char *sysroot, rcoll_topo_nic_t *nic);
/* NVLink and names from NVML (dlopen); absent library or GPUs = nothing added (INFO). */
void topo_nvml_fill(rcoll_topo_t *t);

#endif
