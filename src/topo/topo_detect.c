/*
 * topo_detect.c - where a topology comes from: RCOLL_TOPO_FILE (format chosen by content),
 * else live detection (hwloc, sysfs when hwloc is missing or fails), then RCOLL_TOPO_DUMP_FILE.
 * Logs the result once at INFO (subsystem TOPO).  Declares the topology knobs.  The readers
 * themselves live in topo_file.c, topo_xml.c, topo_hwloc.c and topo_sysfs.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "util/log.h"
#include "util/status.h"

#define TOPO_FILE_MAX (64u << 20)

static const rcoll_knob_t topo_knobs[] = {
    RCOLL_KNOB_STR(rcoll_topo_config_t, "RCOLL_TOPO_FILE", "", topo_file,
                   "read this host's topology from a file instead of detecting it: rcoll JSON, "
                   "hwloc XML (lstopo --of xml) or NCCL topology XML (docs/topology.md)"),
    RCOLL_KNOB_STR(rcoll_topo_config_t, "RCOLL_TOPO_DUMP_FILE", "", topo_dump_file,
                   "write the topology in use to this file (rcoll JSON), to inspect it or edit "
                   "it into an RCOLL_TOPO_FILE"),
    RCOLL_KNOB_ENUM_RANGE(rcoll_topo_config_t, "RCOLL_P2P_LEVEL", "SYS", p2p_level,
                          rcoll_path_names, RCOLL_PATH_LOC, RCOLL_PATH_SYS,
                          "the farthest path between two GPUs over which ranks may read each "
                          "other's memory directly (CUDA IPC, RCOLL_CUDA_IPC): LOC (same GPU "
                          "only), NVL, NVB, PIX, PXB, PHB or SYS (any, as the driver allows)"),
    RCOLL_KNOB_ENUM_RANGE(rcoll_topo_config_t, "RCOLL_NET_GDR_LEVEL", "PXB", gdr_level,
                          rcoll_path_names, RCOLL_PATH_LOC, RCOLL_PATH_SYS,
                          "the farthest path between a GPU and its NIC over which point-to-point "
                          "messages go straight between GPU memory and the network (GPUDirect "
                          "RDMA, where the transport registers CUDA memory): PIX, PXB (default), "
                          "PHB, SYS; LOC turns it off"),
};
const rcoll_config_table_t rcoll_topo_config_table =
    RCOLL_CONFIG_TABLE("topo", topo_knobs, rcoll_topo_config_t);

static rcoll_status_t read_all(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "cannot open topology file %s", path);
    size_t cap = 0, n = 0;
    char *buf = NULL;
    rcoll_status_t st = RCOLL_OK;
    for (;;) {
        if (n == cap) {
            if (cap >= TOPO_FILE_MAX) {
                st = rcoll_err_set(RCOLL_ERR_INVALID_ARG, "topology file %s: larger than %u MiB",
                                   path, TOPO_FILE_MAX >> 20);
                break;
            }
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology file %s: out of memory", path);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f))
                st = rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "reading topology file %s", path);
            break;
        }
    }
    fclose(f);
    if (st) {
        free(buf);
        return st;
    }
    *text = buf;
    *len = n;
    return RCOLL_OK;
}

rcoll_status_t rcoll_topo_load_file(const char *path, rcoll_topo_t **out)
{
    if (!path || !path[0] || !out)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "topology file: no path given");
    char *text = NULL;
    size_t len = 0;
    rcoll_status_t st = read_all(path, &text, &len);
    if (st) return st;
    char what[300];
    snprintf(what, sizeof(what), "topology file %s", path);
    size_t i = len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0;
    while (i < len && strchr(" \t\r\n", text[i])) i++;
    if (i >= len) {
        st = topo_err(what, 0, "the file is empty");
    } else if (text[i] == '{' || text[i] == '[') { /* '[': JSON, to say what is wrong */
        st = topo_load_json(path, text, len, out);
    } else if (text[i] == '<') {
        char root[64] = "";
        st = topo_xml_check(what, text, len, root, sizeof(root));
        if (st) {
            /* the error names the line */
        } else if (!strcmp(root, "system")) {
            st = topo_load_nccl_xml(path, text, len, out);
        } else if (!strcmp(root, "topology")) {
#if RCOLL_HAVE_HWLOC
            st = topo_hwloc_load_xml(path, out);
#else
            st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "%s: hwloc XML needs an rcoll built with "
                               "hwloc (this one is not); convert it with rcoll-topo on a build "
                               "that has it, or write rcoll JSON", what);
#endif
        } else {
            st = topo_err(what, 0, "root element <%s> is neither hwloc's <topology> nor NCCL's "
                          "<system>", root);
        }
    } else {
        st = topo_err(what, 1, "not a topology file: rcoll JSON starts with '{', hwloc and NCCL "
                      "XML with '<'");
    }
    free(text);
    return st;
}

static void log_topo(const rcoll_topo_t *t)
{
    if (!RCOLL_LOG_ENABLED(RCOLL_LOG_INFO, RCOLL_SUBSYS_TOPO)) return;
    int nrdma = 0;
    for (int i = 0; i < rcoll_topo_nnics(t); i++) nrdma += rcoll_topo_nic(t, i)->rdma;
    RCOLL_INFO(TOPO, "topology of %s from %s: %d CPU package%s, %d GPU%s, %d NIC%s (%d RDMA)",
               t->host[0] ? t->host : "?", t->source, t->ncpus, t->ncpus == 1 ? "" : "s",
               t->ngpus, t->ngpus == 1 ? "" : "s", t->nnics, t->nnics == 1 ? "" : "s", nrdma);
    for (int i = 0; i < t->ngpus; i++) {
        const rcoll_topo_gpu_t *g = &t->gpus[i].info;
        RCOLL_INFO(TOPO, "GPU %d: %s %s, NUMA %d, package %d, NVSwitch links %d", i, g->pci,
                   g->name, g->numa, g->cpu, g->nvswitch_links);
    }
    for (int i = 0; i < t->nnics; i++) {
        const rcoll_topo_nic_t *n = &t->nics[i].info;
        RCOLL_INFO(TOPO, "NIC %d: %s%s port %d %s %s %lld Mb/s, PCI %s, NUMA %d", i, n->name,
                   n->rdma ? " (RDMA)" : "", n->port, n->state[0] ? n->state : "-",
                   n->link_layer[0] ? n->link_layer : "-", n->speed_mbps,
                   n->pci[0] ? n->pci : "-", n->numa);
    }
}

rcoll_status_t rcoll_topo_detect(const rcoll_topo_config_t *cfg, rcoll_topo_t **out)
{
    if (!out) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "topology detection: out is NULL");
    rcoll_topo_t *t = NULL;
    rcoll_status_t st;
    if (cfg && cfg->topo_file[0]) {
        st = rcoll_topo_load_file(cfg->topo_file, &t);
        if (st) rcoll_err_prefix("RCOLL_TOPO_FILE: ");
    } else {
#if RCOLL_HAVE_HWLOC
        st = topo_hwloc_detect(&t);
        if (st) {
            RCOLL_INFO(TOPO, "hwloc detection failed (%s); reading sysfs instead", rcoll_err_get());
            st = topo_sysfs_detect("/sys", 1, &t);
        }
#else
        st = topo_sysfs_detect("/sys", 1, &t);
#endif
    }
    if (st) return st;
    log_topo(t);
    if (cfg && cfg->topo_dump_file[0]) {
        st = rcoll_topo_dump_file(t, cfg->topo_dump_file);
        if (st) {
            rcoll_err_prefix("RCOLL_TOPO_DUMP_FILE: ");
            rcoll_topo_free(t);
            return st;
        }
        RCOLL_INFO(TOPO, "topology written to %s", cfg->topo_dump_file);
    }
    *out = t;
    return RCOLL_OK;
}
