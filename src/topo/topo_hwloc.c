/*
 * topo_hwloc.c - the topology from hwloc 2: CPU packages, NUMA nodes, the PCI tree (host
 * bridges, PCIe switches collapsed from their bridge ports), NVIDIA GPUs and NICs (hwloc's
 * OpenFabrics and network OS devices).  The same walk serves live detection and hwloc XML
 * files (lstopo --of xml); live detection then adds sysfs port details and NVML.  Built only
 * with hwloc (RCOLL_HAVE_HWLOC).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>

#include "topo/topo_int.h"
#include "util/log.h"
#include "util/status.h"

typedef struct {
    hwloc_topology_t h;
    rcoll_topo_t *t;
    int live;
    int nhb, nsw;
} hw_t;

static void busid_of(const struct hwloc_pcidev_attr_s *a, char *out)
{
    char raw[32];
    snprintf(raw, sizeof(raw), "%04x:%02x:%02x.%x", (unsigned)a->domain, a->bus, a->dev, a->func);
    if (topo_busid_norm(raw, out, RCOLL_TOPO_BUSID_MAX)) out[0] = '\0';
}

/* Package (index into t->cpus) and NUMA node of the place an I/O object is attached to. */
static void io_locality(const hw_t *w, hwloc_obj_t io, int *pkg_id, int *numa)
{
    hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(w->h, io);
    *pkg_id = -1;
    *numa = -1;
    if (!a) return;
    if (a->nodeset && hwloc_bitmap_weight(a->nodeset) == 1) *numa = hwloc_bitmap_first(a->nodeset);
    hwloc_obj_t p = a;
    while (p && p->type != HWLOC_OBJ_PACKAGE) p = p->parent;
    if (!p && a->cpuset) { /* above the packages (a Machine): the one containing it, if any */
        int n = hwloc_get_nbobjs_by_type(w->h, HWLOC_OBJ_PACKAGE);
        for (int i = 0; i < n && !p; i++) {
            hwloc_obj_t q = hwloc_get_obj_by_type(w->h, HWLOC_OBJ_PACKAGE, (unsigned)i);
            if (q->cpuset && hwloc_bitmap_isincluded(a->cpuset, q->cpuset)) p = q;
        }
    }
    if (p) *pkg_id = p->os_index != HWLOC_UNKNOWN_INDEX ? (int)p->os_index : (int)p->logical_index;
}

static rcoll_status_t add_packages(hw_t *w)
{
    int n = hwloc_get_nbobjs_by_type(w->h, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t p = hwloc_get_obj_by_type(w->h, HWLOC_OBJ_PACKAGE, (unsigned)i);
        topo_cpu_t *c = topo_add_cpu(w->t);
        if (!c) return RCOLL_ERR_NO_MEMORY;
        c->info.id = p->os_index != HWLOC_UNKNOWN_INDEX ? (int)p->os_index : (int)p->logical_index;
        if (p->cpuset) hwloc_bitmap_list_snprintf(c->info.cpulist, sizeof(c->info.cpulist), p->cpuset);
        for (hwloc_obj_t nn = hwloc_get_next_obj_by_type(w->h, HWLOC_OBJ_NUMANODE, NULL); nn;
             nn = hwloc_get_next_obj_by_type(w->h, HWLOC_OBJ_NUMANODE, nn)) {
            if (hwloc_get_ancestor_obj_by_type(w->h, HWLOC_OBJ_PACKAGE, nn) != p) continue;
            c->info.numa = (int)nn->os_index;
            break;
        }
        if (c->info.numa < 0 && p->nodeset && hwloc_bitmap_weight(p->nodeset) >= 1)
            c->info.numa = hwloc_bitmap_first(p->nodeset);
    }
    return RCOLL_OK;
}

static const char *port_state_name(const char *v)
{
    switch (v ? atoi(v) : 0) {
    case 1: return "down";
    case 2: return "init";
    case 3: return "armed";
    case 4: return "active";
    case 5: return "active_defer";
    default: return "";
    }
}

#define HW_MAX_OSDEVS 32

/* NICs from the OS devices os[0..nos) of one PCI function (pci; NULL for none): one per
 * RDMA port; plain network interfaces only when the function has no RDMA device (else the
 * interface is that device's netdev). */
static rcoll_status_t add_nics(hw_t *w, hwloc_obj_t pci, hwloc_obj_t *os, int nos,
                               const char *parent, int numa)
{
    const char *netdev = NULL;
    int nrdma = 0;
    for (int i = 0; i < nos; i++) {
        if (os[i]->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && !netdev) netdev = os[i]->name;
        if (os[i]->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) nrdma++;
    }
    for (int i = 0; i < nos; i++) {
        hwloc_obj_t o = os[i];
        int rdma = o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
        if (!o->name || (!rdma && (o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || nrdma)))
            continue;
        int ports[16], np = 0;
        if (rdma) { /* hwloc records Port<N>State for each port */
            for (int k = 1; k <= 16 && np < 16; k++) {
                char key[32];
                snprintf(key, sizeof(key), "Port%dState", k);
                if (hwloc_obj_get_info_by_name(o, key)) ports[np++] = k;
            }
            if (!np) ports[np++] = 1;
        } else {
            ports[np++] = 0;
        }
        for (int k = 0; k < np; k++) {
            topo_nic_t *n = topo_add_nic(w->t);
            if (!n) return RCOLL_ERR_NO_MEMORY;
            topo_strlcpy(n->info.name, o->name, sizeof(n->info.name));
            n->info.rdma = rdma;
            n->info.port = ports[k];
            n->info.numa = numa;
            topo_strlcpy(n->parent_name, parent, sizeof(n->parent_name));
            if (pci) {
                busid_of(&pci->attr->pcidev, n->info.pci);
                n->info.link_gbs = pci->attr->pcidev.linkspeed;
            }
            if (rdma) {
                char key[32];
                snprintf(key, sizeof(key), "Port%dState", ports[k]);
                topo_strlcpy(n->info.state, port_state_name(hwloc_obj_get_info_by_name(o, key)),
                             sizeof(n->info.state));
                if (netdev) topo_strlcpy(n->info.netdev, netdev, sizeof(n->info.netdev));
            }
            if (w->live) topo_sysfs_nic_fill("/sys", &n->info);
        }
    }
    return RCOLL_OK;
}

static rcoll_status_t add_pcidev(hw_t *w, hwloc_obj_t d, const char *parent)
{
    int pkg, numa;
    io_locality(w, d, &pkg, &numa);
    const struct hwloc_pcidev_attr_s *a = &d->attr->pcidev;
    if (a->vendor_id == 0x10de && (a->class_id >> 8) == 0x03) {
        topo_gpu_t *g = topo_add_gpu(w->t);
        if (!g) return RCOLL_ERR_NO_MEMORY;
        busid_of(a, g->info.pci);
        const char *model = hwloc_obj_get_info_by_name(d, "PCIDevice");
        if (model) topo_strlcpy(g->info.name, model, sizeof(g->info.name));
        else snprintf(g->info.name, sizeof(g->info.name), "NVIDIA [10de:%04x]", a->device_id);
        g->info.numa = numa;
        g->info.link_gbs = a->linkspeed;
        topo_strlcpy(g->parent_name, parent, sizeof(g->parent_name));
        return RCOLL_OK;
    }
    hwloc_obj_t os[HW_MAX_OSDEVS];
    int nos = 0;
    for (hwloc_obj_t o = d->io_first_child; o && nos < HW_MAX_OSDEVS; o = o->next_sibling)
        if (o->type == HWLOC_OBJ_OS_DEVICE) os[nos++] = o;
    return add_nics(w, d, os, nos, parent, numa);
}

/*
 * I/O children of obj, hanging from pci node `cur`.  level counts PCI-PCI bridges below the
 * host bridge: level 1 is a root port (part of the root complex: devices behind it hang
 * from the host bridge); below it bridges alternate between a switch's upstream port (even
 * levels: a new switch) and its downstream ports (odd levels: the same switch).
 */
static rcoll_status_t walk_io(hw_t *w, hwloc_obj_t obj, const char *cur, int level)
{
    for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) {
        rcoll_status_t st = RCOLL_OK;
        if (c->type == HWLOC_OBJ_PCI_DEVICE) {
            st = add_pcidev(w, c, cur);
        } else if (c->type == HWLOC_OBJ_BRIDGE &&
                   c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
            int l = level + 1;
            if (l >= 2 && l % 2 == 0) {
                topo_pci_t *sw = topo_add_pci(w->t);
                if (!sw) return RCOLL_ERR_NO_MEMORY;
                snprintf(sw->id, sizeof(sw->id), "sw%d", w->nsw++);
                sw->kind = TOPO_PCI_SWITCH;
                topo_strlcpy(sw->parent_name, cur, sizeof(sw->parent_name));
                busid_of(&c->attr->bridge.upstream.pci, sw->busid);
                sw->link_gbs = c->attr->bridge.upstream.pci.linkspeed;
                char id[TOPO_ID_MAX];
                topo_strlcpy(id, sw->id, sizeof(id));
                st = walk_io(w, c, id, l);
            } else {
                st = walk_io(w, c, cur, l);
            }
        }
        if (st) return st;
    }
    return RCOLL_OK;
}

static rcoll_status_t hw_build(hw_t *w)
{
    rcoll_status_t st = add_packages(w);
    if (st) return st;
    for (hwloc_obj_t b = hwloc_get_next_bridge(w->h, NULL); b; b = hwloc_get_next_bridge(w->h, b)) {
        if (b->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST) continue;
        int pkg, numa;
        io_locality(w, b, &pkg, &numa);
        topo_pci_t *hb = topo_add_pci(w->t);
        if (!hb) return RCOLL_ERR_NO_MEMORY;
        snprintf(hb->id, sizeof(hb->id), "hb%d", w->nhb++);
        hb->kind = TOPO_PCI_HOSTBRIDGE;
        if (pkg >= 0) snprintf(hb->parent_name, sizeof(hb->parent_name), "cpu%d", pkg);
        char id[TOPO_ID_MAX];
        topo_strlcpy(id, hb->id, sizeof(id));
        st = walk_io(w, b, id, 0);
        if (st) return st;
    }
    /* Network devices that hang from no PCI function (virtio-mmio, platform devices). */
    for (hwloc_obj_t o = hwloc_get_next_osdev(w->h, NULL); o; o = hwloc_get_next_osdev(w->h, o)) {
        if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) continue;
        if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK &&
            o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS)
            continue;
        int pkg, numa;
        io_locality(w, o, &pkg, &numa);
        char parent[32] = "";
        if (pkg >= 0) snprintf(parent, sizeof(parent), "cpu%d", pkg);
        st = add_nics(w, NULL, &o, 1, parent, numa);
        if (st) return st;
    }
    const char *host = hwloc_obj_get_info_by_name(hwloc_get_root_obj(w->h), "HostName");
    if (host) topo_strlcpy(w->t->host, host, sizeof(w->t->host));
    return RCOLL_OK;
}

/* Discovery components rcoll does without: "pci" (libpciaccess; hwloc's Linux backend reads
 * the PCI tree from sysfs itself, and libpciaccess leaks), and the GPU runtimes (slow, and
 * NVML is queried by topo_nvml.c).  Unknown names are ignored by hwloc. */
#if HWLOC_API_VERSION >= 0x00020100
static const char *const skipped_components[] = {"pci", "opencl", "gl", "cuda", "nvml", "rsmi",
                                                 "levelzero"};
#endif

static rcoll_status_t hw_open(hwloc_topology_t *h, const char *xml, const char *what)
{
    if (hwloc_topology_init(h))
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "%s: hwloc_topology_init", what);
    int bad = hwloc_topology_set_io_types_filter(*h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
    for (size_t i = 0; !xml && i < sizeof(skipped_components) / sizeof(skipped_components[0]); i++)
        hwloc_topology_set_components(*h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                      skipped_components[i]);
#endif
    if (!bad && xml) bad = hwloc_topology_set_xml(*h, xml);
    if (!bad) bad = hwloc_topology_load(*h);
    if (bad) {
        int e = errno;
        hwloc_topology_destroy(*h);
        return rcoll_err_set_errno(xml ? RCOLL_ERR_INVALID_ARG : RCOLL_ERR_SYSTEM, e,
                                   "%s: hwloc could not load %s", what,
                                   xml ? "it as an hwloc XML topology" : "this machine's topology");
    }
    return RCOLL_OK;
}

rcoll_status_t topo_hwloc_detect(rcoll_topo_t **out)
{
    hwloc_topology_t h;
    rcoll_status_t st = hw_open(&h, NULL, "topology detection");
    if (st) return st;
    rcoll_topo_t *t = topo_new("hwloc");
    if (!t) {
        hwloc_topology_destroy(h);
        return RCOLL_ERR_NO_MEMORY;
    }
    hw_t w = {.h = h, .t = t, .live = 1, .nhb = 0, .nsw = 0};
    st = hw_build(&w);
    hwloc_topology_destroy(h);
    if (!st) st = topo_live_finish(t, 1);
    if (st) {
        rcoll_topo_free(t);
        return st;
    }
    *out = t;
    return RCOLL_OK;
}

rcoll_status_t topo_hwloc_load_xml(const char *path, rcoll_topo_t **out)
{
    char what[300], source[320];
    snprintf(what, sizeof(what), "topology file %s", path);
    snprintf(source, sizeof(source), "file %s (hwloc XML)", path);
    hwloc_topology_t h;
    rcoll_status_t st = hw_open(&h, path, what);
    if (st) return st;
    rcoll_topo_t *t = topo_new(source);
    if (!t) {
        hwloc_topology_destroy(h);
        return RCOLL_ERR_NO_MEMORY;
    }
    hw_t w = {.h = h, .t = t, .live = 0, .nhb = 0, .nsw = 0};
    st = hw_build(&w);
    hwloc_topology_destroy(h);
    if (!st) {
        topo_index_gpus_by_busid(t);
        topo_prune_pci(t);
        st = topo_finalize(t, what);
    }
    if (st) {
        rcoll_topo_free(t);
        return st;
    }
    *out = t;
    return RCOLL_OK;
}
