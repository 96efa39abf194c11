/*
 * topo_sysfs.c - live detection from Linux sysfs alone (the fallback without hwloc), RDMA
 * port and NIC details that hwloc does not report, and the steps every live detection ends
 * with (GPU numbering, NVML, host name, finalize).  Reads files only; sysroot lets tests
 * point it at a fake tree.  PCI switches are recognised from the bridge chain in each
 * device's sysfs path (see pci_attach).
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/topo_int.h"
#include "util/log.h"
#include "util/status.h"

#define SYSFS_MAX_CPUS 8192

/* Format a path; -1 when it does not fit. */
static int pathf(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pathf(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int read_path_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *ok = fgets(buf, (int)len, f);
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* One line of the sysfs file named by fmt, newline stripped.  Returns 0, or -1. */
static int read_line(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int read_line(char *buf, size_t len, const char *fmt, ...)
{
    char path[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(path)) return -1;
    return read_path_line(path, buf, len);
}

/* The number in the file named by fmt (decimal or 0x hex), or dflt. */
static long read_long(long dflt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long read_long(long dflt, const char *fmt, ...)
{
    char path[PATH_MAX], buf[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(path) || read_path_line(path, buf, sizeof(buf))) return dflt;
    char *end;
    long v = strtol(buf, &end, 0);
    return end == buf ? dflt : v;
}

/* Is cpu in a list like "0-3,8,10-11"? */
static int cpulist_has(const char *list, int cpu)
{
    const char *p = list;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p) return 0;
        b = a;
        if (*end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
            if (end == p) return 0;
        }
        if (cpu >= a && cpu <= b) return 1;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return 0;
}

/* Numbered entries "<prefix><digits>" of a directory, sorted; returns the count (<= max). */
static int list_numbered(const char *dir, const char *prefix, int *out, int max)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    size_t pl = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (strncmp(e->d_name, prefix, pl) || !isdigit((unsigned char)e->d_name[pl])) continue;
        char *end;
        long v = strtol(e->d_name + pl, &end, 10);
        if (*end || v < 0 || v > INT_MAX) continue;
        out[n++] = (int)v;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort: small lists */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    return n;
}

typedef struct {
    const char *root; /* sysroot */
    rcoll_topo_t *t;
    int *node_pkg;    /* NUMA node -> package id, -1 unknown */
    int nnodes;
} sysfs_t;

static rcoll_status_t read_packages(sysfs_t *s)
{
    char dir[PATH_MAX], ndir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/devices/system/cpu", s->root);
    snprintf(ndir, sizeof(ndir), "%s/devices/system/node", s->root);
    int *cpus = malloc(sizeof(int) * SYSFS_MAX_CPUS), *pkg = malloc(sizeof(int) * SYSFS_MAX_CPUS);
    int *nodes = malloc(sizeof(int) * 1024), *list = malloc(sizeof(int) * SYSFS_MAX_CPUS);
    char *cl = malloc(8192);
    rcoll_status_t st = RCOLL_OK;
    if (!cpus || !pkg || !nodes || !list || !cl) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology: out of memory");
        goto out;
    }
    int ncpu = list_numbered(dir, "cpu", cpus, SYSFS_MAX_CPUS);
    for (int i = 0; i < ncpu; i++)
        pkg[i] = (int)read_long(-1, "%s/cpu%d/topology/physical_package_id", dir, cpus[i]);
    int nn = list_numbered(ndir, "node", nodes, 1024);
    s->nnodes = nn ? nodes[nn - 1] + 1 : 0;
    s->node_pkg = malloc(sizeof(int) * (size_t)(s->nnodes + 1));
    if (!s->node_pkg) {
        st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology: out of memory");
        goto out;
    }
    for (int i = 0; i < s->nnodes; i++) s->node_pkg[i] = -1;
    for (int k = 0; k < nn; k++) { /* a node belongs to the package of its first CPU */
        if (read_line(cl, 8192, "%s/node%d/cpulist", ndir, nodes[k])) continue;
        for (int i = 0; i < ncpu; i++)
            if (pkg[i] >= 0 && cpulist_has(cl, cpus[i])) {
                s->node_pkg[nodes[k]] = pkg[i];
                break;
            }
    }
    /* One package entry per distinct package id, in id order. */
    for (;;) {
        int next = INT_MAX;
        int have = s->t->ncpus ? s->t->cpus[s->t->ncpus - 1].info.id : -1;
        for (int i = 0; i < ncpu; i++)
            if (pkg[i] > have && pkg[i] < next) next = pkg[i];
        if (next == INT_MAX) break;
        int n = 0;
        for (int i = 0; i < ncpu; i++)
            if (pkg[i] == next) list[n++] = cpus[i];
        topo_cpu_t *c = topo_add_cpu(s->t);
        if (!c) {
            st = RCOLL_ERR_NO_MEMORY;
            goto out;
        }
        c->info.id = next;
        topo_format_cpulist(list, n, c->info.cpulist, sizeof(c->info.cpulist));
        for (int k = 0; k < nn && c->info.numa < 0; k++)
            if (s->node_pkg[nodes[k]] == next) c->info.numa = nodes[k];
    }
out:
    free(cpus);
    free(pkg);
    free(nodes);
    free(list);
    free(cl);
    return st;
}

/* Does a path component look like a PCI bus id ("0000:17:00.0")? */
static int is_busid(const char *comp, size_t n)
{
    char tmp[32], norm[RCOLL_TOPO_BUSID_MAX];
    if (n >= sizeof(tmp)) return 0;
    memcpy(tmp, comp, n);
    tmp[n] = '\0';
    return strchr(tmp, ':') && !topo_busid_norm(tmp, norm, sizeof(norm));
}

static double link_gbs_of(const char *root, const char *busid)
{
    char sp[64];
    if (read_line(sp, sizeof(sp), "%s/bus/pci/devices/%s/current_link_speed", root, busid))
        return 0;
    double gts = strtod(sp, NULL);
    long width = read_long(0, "%s/bus/pci/devices/%s/current_link_width", root, busid);
    if (gts <= 0 || width <= 0) return 0;
    /* 8b/10b up to 5 GT/s, 128b/130b above (PCIe 3 and later). */
    double eff = gts <= 5.0 ? 0.8 : 128.0 / 130.0;
    return gts * (double)width * eff / 8.0;
}

/* Package id of a NUMA node; with a single package, everything is on it. */
static int package_of_numa(const sysfs_t *s, int numa)
{
    if (numa >= 0 && numa < s->nnodes && s->node_pkg[numa] >= 0) return s->node_pkg[numa];
    return s->t->ncpus == 1 ? s->t->cpus[0].info.id : -1;
}

/*
 * Parent of the PCI device at sysfs path `real` (a realpath), creating the host bridge and
 * switch nodes on its way.  The path reads .../pciDDDD:BB/<bridge>/<bridge>/.../<device>:
 * the first bridge below the host bridge is a root port (part of the root complex); below
 * it bridges alternate: a switch's upstream port (a new switch), then one of its downstream
 * ports (the same switch), and so on.  Devices directly on the root bus or behind a root
 * port hang from the host bridge.  Writes the parent id into parent ("" when the path has
 * no pciDDDD:BB component).
 */
static rcoll_status_t pci_attach(sysfs_t *s, const char *real, int numa, char *parent,
                                 size_t plen)
{
    parent[0] = '\0';
    const char *p = strstr(real, "/pci");
    while (p) { /* the host bridge component: "pci" + domain:bus */
        const char *c = p + 4;
        size_t n = strcspn(c, "/");
        if (n >= 6 && n <= 12 && strchr(c, ':') && strchr(c, ':') < c + n) break;
        p = strstr(p + 1, "/pci");
    }
    if (!p) return RCOLL_OK;
    char hb[TOPO_ID_MAX];
    size_t hn = strcspn(p + 1, "/");
    snprintf(hb, sizeof(hb), "%.*s", (int)hn, p + 1);
    int pkg = package_of_numa(s, numa);
    int hbi = -1;
    for (int i = 0; i < s->t->npci; i++)
        if (!strcmp(s->t->pci[i].id, hb)) hbi = i;
    if (hbi < 0) {
        topo_pci_t *n = topo_add_pci(s->t);
        if (!n) return RCOLL_ERR_NO_MEMORY;
        topo_strlcpy(n->id, hb, sizeof(n->id));
        n->kind = TOPO_PCI_HOSTBRIDGE;
        hbi = s->t->npci - 1;
    }
    if (pkg >= 0 && !s->t->pci[hbi].parent_name[0])
        snprintf(s->t->pci[hbi].parent_name, sizeof(s->t->pci[hbi].parent_name), "cpu%d", pkg);
    /* Bus id components after the host bridge; the last one is the device itself. */
    const char *comps[64];
    size_t lens[64];
    int nc = 0;
    for (const char *c = p + 1 + hn; *c == '/' && nc < 64;) {
        c++;
        size_t n = strcspn(c, "/");
        if (!is_busid(c, n)) break;
        comps[nc] = c;
        lens[nc++] = n;
        c += n;
    }
    char cur[TOPO_ID_MAX];
    topo_strlcpy(cur, hb, sizeof(cur));
    for (int k = 0; k + 1 < nc; k++) { /* bridges only */
        int level = k + 1;             /* 1 = root port */
        if (level == 1 || level % 2 == 1) continue;
        char busid[RCOLL_TOPO_BUSID_MAX], raw[32], id[TOPO_ID_MAX];
        snprintf(raw, sizeof(raw), "%.*s", (int)lens[k], comps[k]);
        if (topo_busid_norm(raw, busid, sizeof(busid))) continue;
        snprintf(id, sizeof(id), "sw%s", busid);
        int found = 0;
        for (int i = 0; i < s->t->npci && !found; i++) found = !strcmp(s->t->pci[i].id, id);
        if (!found) {
            topo_pci_t *n = topo_add_pci(s->t);
            if (!n) return RCOLL_ERR_NO_MEMORY;
            topo_strlcpy(n->id, id, sizeof(n->id));
            n->kind = TOPO_PCI_SWITCH;
            topo_strlcpy(n->parent_name, cur, sizeof(n->parent_name));
            topo_strlcpy(n->busid, busid, sizeof(n->busid));
            n->link_gbs = link_gbs_of(s->root, raw);
        }
        topo_strlcpy(cur, id, sizeof(cur));
    }
    topo_strlcpy(parent, cur, plen);
    return RCOLL_OK;
}

/* Bus id of the last PCI component of a realpath (a PCI function or a child of one). */
static int last_busid(const char *real, char *busid)
{
    int ok = -1;
    for (const char *c = real; (c = strchr(c, '/'));) {
        c++;
        size_t n = strcspn(c, "/");
        char raw[32];
        if (n < sizeof(raw) && is_busid(c, n)) {
            snprintf(raw, sizeof(raw), "%.*s", (int)n, c);
            ok = topo_busid_norm(raw, busid, RCOLL_TOPO_BUSID_MAX);
        }
    }
    return ok;
}

/* NUMA node of a PCI function; -1 (unknown: VMs, single-node machines) becomes the only
 * node when there is just one. */
static int pci_numa(const sysfs_t *s, const char *busid)
{
    long v = read_long(-1, "%s/bus/pci/devices/%s/numa_node", s->root, busid);
    if (v < 0 && s->nnodes == 1) return 0;
    return v < -1 ? -1 : (int)v;
}

static rcoll_status_t read_gpus(sysfs_t *s)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/bus/pci/devices", s->root);
    DIR *d = opendir(dir);
    if (!d) return RCOLL_OK; /* no PCI at all: a topology without devices */
    rcoll_status_t st = RCOLL_OK;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        char busid[RCOLL_TOPO_BUSID_MAX], link[PATH_MAX], real[PATH_MAX];
        if (e->d_name[0] == '.' || topo_busid_norm(e->d_name, busid, sizeof(busid))) continue;
        long vendor = read_long(0, "%s/%s/vendor", dir, e->d_name);
        long cls = read_long(0, "%s/%s/class", dir, e->d_name);
        if (vendor != 0x10de || (cls >> 16) != 0x03) continue;
        if (pathf(link, sizeof(link), "%s/%s", dir, e->d_name) || !realpath(link, real)) continue;
        topo_gpu_t *g = topo_add_gpu(s->t);
        if (!g) {
            st = RCOLL_ERR_NO_MEMORY;
            break;
        }
        topo_strlcpy(g->info.pci, busid, sizeof(g->info.pci));
        long dev = read_long(0, "%s/%s/device", dir, e->d_name);
        snprintf(g->info.name, sizeof(g->info.name), "NVIDIA [10de:%04lx]", dev);
        g->info.numa = pci_numa(s, busid);
        g->info.link_gbs = link_gbs_of(s->root, busid);
        st = pci_attach(s, real, g->info.numa, g->parent_name, sizeof(g->parent_name));
    }
    closedir(d);
    return st;
}

/* A NIC for the PCI device (or none) behind a class device's "device" link. */
static rcoll_status_t nic_at(sysfs_t *s, const char *devlink, topo_nic_t **out)
{
    char real[PATH_MAX];
    topo_nic_t *n = topo_add_nic(s->t);
    if (!n) return RCOLL_ERR_NO_MEMORY;
    *out = n;
    if (!realpath(devlink, real) || last_busid(real, n->info.pci)) return RCOLL_OK;
    n->info.numa = pci_numa(s, n->info.pci);
    n->info.link_gbs = link_gbs_of(s->root, n->info.pci);
    return pci_attach(s, real, n->info.numa, n->parent_name, sizeof(n->parent_name));
}

static rcoll_status_t read_nics(sysfs_t *s)
{
    char dir[PATH_MAX], link[PATH_MAX];
    rcoll_status_t st = RCOLL_OK;
    snprintf(dir, sizeof(dir), "%s/class/infiniband", s->root);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && !st && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char pdir[PATH_MAX];
        int ports[16];
        if (pathf(pdir, sizeof(pdir), "%s/%s/ports", dir, e->d_name) ||
            pathf(link, sizeof(link), "%s/%s/device", dir, e->d_name))
            continue;
        int np = list_numbered(pdir, "", ports, 16);
        for (int k = 0; k < np && !st; k++) {
            topo_nic_t *n;
            st = nic_at(s, link, &n);
            if (st) break;
            topo_strlcpy(n->info.name, e->d_name, sizeof(n->info.name));
            n->info.rdma = 1;
            n->info.port = ports[k];
            topo_sysfs_nic_fill(s->root, &n->info);
        }
    }
    if (d) closedir(d);
    if (st) return st;
    int nrdma = s->t->nnics;
    snprintf(dir, sizeof(dir), "%s/class/net", s->root);
    d = opendir(dir);
    while (d && !st && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (pathf(link, sizeof(link), "%s/%s/device", dir, e->d_name) || access(link, F_OK))
            continue; /* virtual: lo, veth, bridges, ifb */
        int dup = 0;
        for (int i = 0; i < nrdma && !dup; i++)
            dup = !strcmp(s->t->nics[i].info.netdev, e->d_name);
        if (dup) continue;
        topo_nic_t *n;
        st = nic_at(s, link, &n);
        if (st) break;
        topo_strlcpy(n->info.name, e->d_name, sizeof(n->info.name));
        /* The netdev of an RDMA port (same PCI function) is not a NIC of its own. */
        for (int i = 0; i < nrdma && !dup; i++)
            dup = n->info.pci[0] && !strcmp(s->t->nics[i].info.pci, n->info.pci);
        if (dup) {
            s->t->nnics--;
            continue;
        }
        topo_sysfs_nic_fill(s->root, &n->info);
    }
    if (d) closedir(d);
    return st;
}

/* First entry of a directory (sorted by name), "" when none. */
static void first_entry(const char *dir, char *out, size_t len)
{
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (!out[0] || strcmp(e->d_name, out) < 0) topo_strlcpy(out, e->d_name, len);
    }
    closedir(d);
}

void topo_sysfs_nic_fill(const char *root, rcoll_topo_nic_t *nic)
{
    char buf[128], port[16];
    if (nic->rdma) {
        snprintf(port, sizeof(port), "%d", nic->port);
        char base[PATH_MAX];
        snprintf(base, sizeof(base), "%s/class/infiniband/%s", root, nic->name);
        if (!nic->state[0] && !read_line(buf, sizeof(buf), "%s/ports/%s/state", base, port)) {
            const char *w = strchr(buf, ':'); /* "4: ACTIVE" */
            w = w ? w + 1 : buf;
            while (*w == ' ') w++;
            size_t i = 0;
            for (; w[i] && i + 1 < sizeof(nic->state); i++)
                nic->state[i] = (char)tolower((unsigned char)w[i]);
            nic->state[i] = '\0';
        }
        if (!nic->link_layer[0] &&
            !read_line(buf, sizeof(buf), "%s/ports/%s/link_layer", base, port))
            topo_strlcpy(nic->link_layer, !strcmp(buf, "InfiniBand") ? "ib"
                                          : !strcmp(buf, "Ethernet") ? "eth" : buf,
                         sizeof(nic->link_layer));
        if (!nic->speed_mbps && !read_line(buf, sizeof(buf), "%s/ports/%s/rate", base, port))
            nic->speed_mbps = (long long)(strtod(buf, NULL) * 1000.0); /* "400 Gb/sec (4X NDR)" */
        if (!nic->netdev[0]) {
            char ndir[PATH_MAX + 16];
            snprintf(ndir, sizeof(ndir), "%s/device/net", base);
            first_entry(ndir, nic->netdev, sizeof(nic->netdev));
        }
        if (!nic->netdev[0])
            read_line(nic->netdev, sizeof(nic->netdev), "%s/ports/%s/gid_attrs/ndevs/0", base,
                      port);
        return;
    }
    if (!nic->speed_mbps) {
        long v = read_long(-1, "%s/class/net/%s/speed", root, nic->name);
        if (v > 0) nic->speed_mbps = v;
    }
    if (!nic->state[0] && !read_line(buf, sizeof(buf), "%s/class/net/%s/operstate", root,
                                     nic->name) &&
        strcmp(buf, "unknown"))
        topo_strlcpy(nic->state, buf, sizeof(nic->state));
    if (!nic->link_layer[0]) {
        long type = read_long(-1, "%s/class/net/%s/type", root, nic->name);
        if (type == 1) topo_strlcpy(nic->link_layer, "eth", sizeof(nic->link_layer));
        else if (type == 32) topo_strlcpy(nic->link_layer, "ib", sizeof(nic->link_layer));
    }
}

rcoll_status_t topo_live_finish(rcoll_topo_t *t, int nvml)
{
    topo_index_gpus_by_busid(t);
    topo_prune_pci(t);
    if (nvml) topo_nvml_fill(t);
    if (!t->host[0] && gethostname(t->host, sizeof(t->host) - 1)) t->host[0] = '\0';
    t->host[sizeof(t->host) - 1] = '\0';
    char what[400];
    snprintf(what, sizeof(what), "topology from %s", t->source);
    return topo_finalize(t, what);
}

rcoll_status_t topo_sysfs_detect(const char *sysroot, int nvml, rcoll_topo_t **out)
{
    char what[PATH_MAX + 32];
    snprintf(what, sizeof(what), !strcmp(sysroot, "/sys") ? "sysfs" : "sysfs at %s", sysroot);
    rcoll_topo_t *t = topo_new(what);
    if (!t) return RCOLL_ERR_NO_MEMORY;
    sysfs_t s = {.root = sysroot, .t = t, .node_pkg = NULL, .nnodes = 0};
    rcoll_status_t st = read_packages(&s);
    if (!st) st = read_gpus(&s);
    if (!st) st = read_nics(&s);
    free(s.node_pkg);
    if (!st) st = topo_live_finish(t, nvml);
    if (st) {
        rcoll_topo_free(t);
        return st;
    }
    *out = t;
    return RCOLL_OK;
}
