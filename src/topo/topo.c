/*
 * topo.c - the topology graph: building and checking it (topo_finalize), the read-only
 * accessors, and the path classes between devices (LOC..SYS) found by walking each device's
 * chain of PCI parents up to its CPU package.  No detection and no file parsing here, and no
 * knowledge of transports: it answers "how close are these two devices".
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topo/topo_int.h"
#include "util/status.h"

const char *const rcoll_path_names[] = {"LOC", "NVL", "NVB", "PIX", "PXB",
                                        "PHB", "SYS", "NET", NULL};
#define NPATHS (sizeof(rcoll_path_names) / sizeof(rcoll_path_names[0]) - 1)

const char *rcoll_path_name(rcoll_path_t p)
{
    if ((int)p < 0 || (size_t)p >= NPATHS) return "?";
    return rcoll_path_names[p];
}

int rcoll_path_parse(const char *s, rcoll_path_t *p)
{
    if (!s) return -1;
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    for (size_t i = 0; i < NPATHS; i++) {
        if (n == strlen(rcoll_path_names[i]) && !strncasecmp(s, rcoll_path_names[i], n)) {
            *p = (rcoll_path_t)i;
            return 0;
        }
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------ */
void topo_strlcpy(char *dst, const char *src, size_t len)
{
    if (!len) return;
    size_t n = src ? strnlen(src, len - 1) : 0;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

rcoll_status_t topo_err(const char *what, int line, const char *fmt, ...)
{
    char text[RCOLL_ERR_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (line > 0) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s line %d: %s", what, line, text);
    return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s: %s", what, text);
}

/* Up to maxd hex digits at *s; returns digits read (0 = none). */
static int hex_field(const char **s, int maxd, unsigned long *v)
{
    int n = 0;
    unsigned long x = 0;
    while (n < maxd) {
        char c = **s;
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else break;
        x = x * 16 + (unsigned long)d;
        (*s)++;
        n++;
    }
    *v = x;
    return n;
}

int topo_busid_norm(const char *s, char *out, size_t len)
{
    if (!s) return -1;
    unsigned long a, b, c, fn, dom = 0, bus, dev;
    const char *p = s;
    int na = hex_field(&p, 8, &a);
    if (!na || *p != ':') return -1;
    p++;
    int nb = hex_field(&p, 8, &b);
    if (!nb) return -1;
    if (*p == ':') { /* domain:bus:dev.fn */
        p++;
        if (nb > 2 || !hex_field(&p, 2, &c)) return -1;
        dom = a;
        bus = b;
        dev = c;
    } else { /* bus:dev.fn */
        if (na > 2 || nb > 2) return -1;
        bus = a;
        dev = b;
    }
    if (*p != '.') return -1;
    p++;
    if (!hex_field(&p, 1, &fn) || *p != '\0' || dev > 0x1f || fn > 7) return -1;
    char tmp[32];
    snprintf(tmp, sizeof(tmp), "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn);
    if (strlen(tmp) >= len) return -1;
    memcpy(out, tmp, strlen(tmp) + 1);
    return 0;
}

void topo_format_cpulist(const int *cpus, int n, char *out, size_t len)
{
    size_t off = 0;
    if (len) out[0] = '\0';
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && cpus[j + 1] == cpus[j] + 1) j++;
        char item[32];
        if (j == i) snprintf(item, sizeof(item), "%s%d", off ? "," : "", cpus[i]);
        else snprintf(item, sizeof(item), "%s%d-%d", off ? "," : "", cpus[i], cpus[j]);
        size_t il = strlen(item);
        if (off + il + 1 > len) break; /* keep what fits */
        memcpy(out + off, item, il + 1);
        off += il;
        i = j + 1;
    }
}

/* ---------------------------------------------------------------------------------------
 * builder
 * ------------------------------------------------------------------------------------ */
rcoll_topo_t *topo_new(const char *source)
{
    rcoll_topo_t *t = calloc(1, sizeof(*t));
    if (!t) {
        rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology: out of memory");
        return NULL;
    }
    topo_strlcpy(t->source, source, sizeof(t->source));
    return t;
}

void rcoll_topo_free(rcoll_topo_t *t)
{
    if (!t) return;
    free(t->cpus);
    free(t->pci);
    free(t->gpus);
    free(t->nics);
    free(t->nvl_decl);
    free(t->nvl);
    free(t);
}

/* Make room for one more element of a growing array; NULL when out of memory. */
static void *grow(void **arr, int *cap, int n, size_t elem)
{
    if (n == *cap) {
        int ncap = *cap ? *cap * 2 : 8;
        void *p = realloc(*arr, (size_t)ncap * elem);
        if (!p) {
            rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology: out of memory");
            return NULL;
        }
        *arr = p;
        *cap = ncap;
    }
    char *slot = (char *)*arr + (size_t)n * elem;
    memset(slot, 0, elem);
    return slot;
}

topo_cpu_t *topo_add_cpu(rcoll_topo_t *t)
{
    topo_cpu_t *c = grow((void **)&t->cpus, &t->cap_cpus, t->ncpus, sizeof(*c));
    if (!c) return NULL;
    t->ncpus++;
    c->info.numa = -1;
    return c;
}

topo_pci_t *topo_add_pci(rcoll_topo_t *t)
{
    topo_pci_t *p = grow((void **)&t->pci, &t->cap_pci, t->npci, sizeof(*p));
    if (!p) return NULL;
    t->npci++;
    return p;
}

topo_gpu_t *topo_add_gpu(rcoll_topo_t *t)
{
    topo_gpu_t *g = grow((void **)&t->gpus, &t->cap_gpus, t->ngpus, sizeof(*g));
    if (!g) return NULL;
    g->info.index = t->ngpus;
    g->info.numa = TOPO_NUMA_UNSET;
    g->info.cpu = -1;
    t->ngpus++;
    return g;
}

topo_nic_t *topo_add_nic(rcoll_topo_t *t)
{
    topo_nic_t *n = grow((void **)&t->nics, &t->cap_nics, t->nnics, sizeof(*n));
    if (!n) return NULL;
    n->info.numa = TOPO_NUMA_UNSET;
    n->info.cpu = -1;
    t->nnics++;
    return n;
}

rcoll_status_t topo_add_nvlink(rcoll_topo_t *t, int a, int b, int links, int line)
{
    topo_nvl_decl_t *d = grow((void **)&t->nvl_decl, &t->cap_nvl_decl, t->nnvl_decl, sizeof(*d));
    if (!d) return RCOLL_ERR_NO_MEMORY;
    t->nnvl_decl++;
    d->a = a;
    d->b = b;
    d->links = links;
    d->line = line;
    return RCOLL_OK;
}

static void mark_used(const rcoll_topo_t *t, char *used, const char *name)
{
    for (int steps = 0; name[0] && steps <= t->npci; steps++) {
        int i = -1;
        for (int k = 0; k < t->npci && i < 0; k++)
            if (!strcmp(t->pci[k].id, name)) i = k;
        if (i < 0 || used[i]) return;
        used[i] = 1;
        name = t->pci[i].parent_name;
    }
}

void topo_prune_pci(rcoll_topo_t *t)
{
    char *used = calloc((size_t)t->npci + 1, 1);
    if (!used) return; /* keeping everything is correct, only larger */
    for (int i = 0; i < t->ngpus; i++) mark_used(t, used, t->gpus[i].parent_name);
    for (int i = 0; i < t->nnics; i++) mark_used(t, used, t->nics[i].parent_name);
    int n = 0;
    for (int i = 0; i < t->npci; i++)
        if (used[i]) t->pci[n++] = t->pci[i];
    t->npci = n;
    free(used);
}

static int cmp_gpu_busid(const void *x, const void *y)
{
    const topo_gpu_t *a = x, *b = y;
    return strcmp(a->info.pci, b->info.pci);
}

void topo_index_gpus_by_busid(rcoll_topo_t *t)
{
    if (t->ngpus > 1) qsort(t->gpus, (size_t)t->ngpus, sizeof(t->gpus[0]), cmp_gpu_busid);
    for (int i = 0; i < t->ngpus; i++) t->gpus[i].info.index = i;
}

/* ---------------------------------------------------------------------------------------
 * finalize: resolve, check, derive
 * ------------------------------------------------------------------------------------ */
static int cpu_by_id(const rcoll_topo_t *t, int id)
{
    for (int i = 0; i < t->ncpus; i++)
        if (t->cpus[i].info.id == id) return i;
    return -1;
}

static int pci_by_id(const rcoll_topo_t *t, const char *id)
{
    for (int i = 0; i < t->npci; i++)
        if (!strcmp(t->pci[i].id, id)) return i;
    return -1;
}

/* "cpu<digits>" -> the id; -1 when the name has another form. */
static int cpu_ref_id(const char *name)
{
    if (strncmp(name, "cpu", 3) || !name[3]) return -1;
    long v = 0;
    for (const char *p = name + 3; *p; p++) {
        if (*p < '0' || *p > '9' || v > 1000000) return -1;
        v = v * 10 + (*p - '0');
    }
    return (int)v;
}

/* Known ids, for "is not defined" messages. */
static void list_ids(const rcoll_topo_t *t, char *out, size_t len)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < t->ncpus && off + 1 < len; i++) {
        int n = snprintf(out + off, len - off, "%scpu%d", off ? ", " : "", t->cpus[i].info.id);
        if (n < 0) return;
        off += (size_t)n;
    }
    for (int i = 0; i < t->npci && off + 1 < len; i++) {
        int n = snprintf(out + off, len - off, "%s%s", off ? ", " : "", t->pci[i].id);
        if (n < 0) return;
        off += (size_t)n;
    }
    if (off + 1 >= len && len > 4) memcpy(out + len - 4, "...", 4);
    if (!out[0]) topo_strlcpy(out, "none", len);
}

static rcoll_status_t resolve(const rcoll_topo_t *t, const char *what, int line,
                              const char *obj, const char *name, topo_ref_t *ref)
{
    ref->kind = TOPO_REF_NONE;
    ref->idx = -1;
    if (!name[0]) return RCOLL_OK;
    int cid = cpu_ref_id(name);
    if (cid >= 0) {
        int i = cpu_by_id(t, cid);
        if (i < 0)
            return topo_err(what, line, "%s: parent \"%s\" is not defined (no CPU package with "
                            "id %d)", obj, name, cid);
        ref->kind = TOPO_REF_CPU;
        ref->idx = i;
        return RCOLL_OK;
    }
    int p = pci_by_id(t, name);
    if (p < 0) {
        char ids[200];
        list_ids(t, ids, sizeof(ids));
        return topo_err(what, line, "%s: parent \"%s\" is not defined (defined: %s)", obj, name,
                        ids);
    }
    ref->kind = TOPO_REF_PCI;
    ref->idx = p;
    return RCOLL_OK;
}

/* CPU package index at the top of a parent chain (-1 unknown).  Chains are loop-free after
 * finalize's check; the step bound keeps this safe before it too. */
static int chain_cpu(const rcoll_topo_t *t, topo_ref_t r)
{
    for (int steps = 0; r.kind == TOPO_REF_PCI && steps <= t->npci; steps++)
        r = t->pci[r.idx].parent;
    return r.kind == TOPO_REF_CPU ? r.idx : -1;
}

static int cmp_gpu_index(const void *x, const void *y)
{
    const topo_gpu_t *a = x, *b = y;
    return (a->info.index > b->info.index) - (a->info.index < b->info.index);
}

static rcoll_status_t check_cpus_pci(rcoll_topo_t *t, const char *what)
{
    for (int i = 0; i < t->ncpus; i++) {
        const topo_cpu_t *c = &t->cpus[i];
        if (c->info.id < 0) return topo_err(what, c->line, "cpu id %d is negative", c->info.id);
        if (c->info.numa < -1)
            return topo_err(what, c->line, "cpu%d: numa %d is invalid (-1 = unknown)",
                            c->info.id, c->info.numa);
        for (int j = 0; j < i; j++)
            if (t->cpus[j].info.id == c->info.id)
                return topo_err(what, c->line, "cpu id %d is declared twice", c->info.id);
    }
    for (int i = 0; i < t->npci; i++) {
        topo_pci_t *p = &t->pci[i];
        char obj[TOPO_ID_MAX + 32];
        snprintf(obj, sizeof(obj), "%s \"%s\"",
                 p->kind == TOPO_PCI_HOSTBRIDGE ? "host bridge" : "switch", p->id);
        if (!p->id[0]) return topo_err(what, p->line, "a pci node has an empty id");
        if (cpu_ref_id(p->id) >= 0)
            return topo_err(what, p->line, "%s: ids of the form cpuN name CPU packages", obj);
        for (int j = 0; j < i; j++)
            if (!strcmp(t->pci[j].id, p->id))
                return topo_err(what, p->line, "pci id \"%s\" is declared twice", p->id);
    }
    for (int i = 0; i < t->npci; i++) {
        topo_pci_t *p = &t->pci[i];
        char obj[TOPO_ID_MAX + 32];
        snprintf(obj, sizeof(obj), "%s \"%s\"",
                 p->kind == TOPO_PCI_HOSTBRIDGE ? "host bridge" : "switch", p->id);
        rcoll_status_t st = resolve(t, what, p->line, obj, p->parent_name, &p->parent);
        if (st) return st;
        if (p->kind == TOPO_PCI_HOSTBRIDGE && p->parent.kind == TOPO_REF_PCI)
            return topo_err(what, p->line, "%s: a host bridge's parent must be a CPU package "
                            "(\"cpuN\") or nothing, not \"%s\"", obj, p->parent_name);
        if (p->parent.kind == TOPO_REF_PCI && p->parent.idx == i)
            return topo_err(what, p->line, "%s: is its own parent", obj);
    }
    for (int i = 0; i < t->npci; i++) { /* parent chains must end */
        topo_ref_t r = t->pci[i].parent;
        int steps = 0;
        while (r.kind == TOPO_REF_PCI && steps <= t->npci) {
            r = t->pci[r.idx].parent;
            steps++;
        }
        if (r.kind == TOPO_REF_PCI)
            return topo_err(what, t->pci[i].line, "pci \"%s\": its chain of parents loops",
                            t->pci[i].id);
    }
    return RCOLL_OK;
}

static rcoll_status_t check_gpus(rcoll_topo_t *t, const char *what)
{
    int n = t->ngpus;
    for (int i = 0; i < n; i++) {
        const topo_gpu_t *g = &t->gpus[i];
        if (g->info.index < 0 || g->info.index >= n)
            return topo_err(what, g->line, "gpu index %d is out of range: %d GPU%s declared, so "
                            "indices are 0..%d", g->info.index, n, n == 1 ? " is" : "s are",
                            n - 1);
        for (int j = 0; j < i; j++) {
            if (t->gpus[j].info.index == g->info.index)
                return topo_err(what, g->line, "gpu index %d is declared twice", g->info.index);
            if (g->info.pci[0] && !strcmp(t->gpus[j].info.pci, g->info.pci))
                return topo_err(what, g->line, "gpu %d: pci %s is also gpu %d's",
                                g->info.index, g->info.pci, t->gpus[j].info.index);
        }
    }
    /* Declarations refer to indices; the array is ordered by them from here on. */
    if (n > 1) qsort(t->gpus, (size_t)n, sizeof(t->gpus[0]), cmp_gpu_index);
    for (int i = 0; i < n; i++) {
        topo_gpu_t *g = &t->gpus[i];
        char obj[32];
        snprintf(obj, sizeof(obj), "gpu %d", i);
        rcoll_status_t st = resolve(t, what, g->line, obj, g->parent_name, &g->parent);
        if (st) return st;
        if (g->info.numa < -1 && g->info.numa != TOPO_NUMA_UNSET)
            return topo_err(what, g->line, "gpu %d: numa %d is invalid", i, g->info.numa);
        if (g->info.nvswitch_links < 0)
            return topo_err(what, g->line, "gpu %d: nvswitch_links is negative", i);
    }
    free(t->nvl);
    t->nvl = calloc((size_t)(n ? n * n : 1), sizeof(int));
    if (!t->nvl) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology: out of memory");
    int *from = calloc((size_t)(n ? n * n : 1), sizeof(int)); /* links as each side declared */
    if (!from) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology: out of memory");
    for (int k = 0; k < t->nnvl_decl; k++) {
        const topo_nvl_decl_t *d = &t->nvl_decl[k];
        rcoll_status_t st = RCOLL_OK;
        if (d->a < 0 || d->a >= n)
            st = topo_err(what, d->line, "nvlink from gpu %d: no such GPU", d->a);
        else if (d->b == d->a)
            st = topo_err(what, d->line, "gpu %d: nvlink to itself (peer %d is this GPU)", d->a,
                          d->b);
        else if (d->b < 0 || d->b >= n)
            st = topo_err(what, d->line, "gpu %d: nvlink peer %d does not exist (GPUs are "
                          "0..%d)", d->a, d->b, n - 1);
        else if (d->links < 1)
            st = topo_err(what, d->line, "gpu %d: nvlink to gpu %d has %d links (at least 1)",
                          d->a, d->b, d->links);
        if (st) {
            free(from);
            return st;
        }
        from[d->a * n + d->b] += d->links;
    }
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            int ab = from[a * n + b], ba = from[b * n + a];
            if (ab && ba && ab != ba) {
                int line = 0;
                for (int k = 0; k < t->nnvl_decl; k++)
                    if (t->nvl_decl[k].a == b && t->nvl_decl[k].b == a) line = t->nvl_decl[k].line;
                free(from);
                return topo_err(what, line, "gpus %d and %d disagree on their NVLinks: gpu %d "
                                "declares %d, gpu %d declares %d", a, b, a, ab, b, ba);
            }
            int links = ab ? ab : ba;
            t->nvl[a * n + b] = t->nvl[b * n + a] = links;
        }
    }
    free(from);
    return RCOLL_OK;
}

static rcoll_status_t check_nics(rcoll_topo_t *t, const char *what)
{
    for (int i = 0; i < t->nnics; i++) {
        topo_nic_t *c = &t->nics[i];
        if (!c->info.name[0]) return topo_err(what, c->line, "nic %d has an empty name", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(t->nics[j].info.name, c->info.name) && t->nics[j].info.port == c->info.port)
                return topo_err(what, c->line, "nic \"%s\" port %d is declared twice",
                                c->info.name, c->info.port);
        char obj[RCOLL_TOPO_NAME_MAX + 16];
        snprintf(obj, sizeof(obj), "nic \"%s\"", c->info.name);
        rcoll_status_t st = resolve(t, what, c->line, obj, c->parent_name, &c->parent);
        if (st) return st;
        if (c->info.numa < -1 && c->info.numa != TOPO_NUMA_UNSET)
            return topo_err(what, c->line, "%s: numa %d is invalid", obj, c->info.numa);
        if (c->info.speed_mbps < 0)
            return topo_err(what, c->line, "%s: speed_mbps is negative", obj);
    }
    return RCOLL_OK;
}

rcoll_status_t topo_finalize(rcoll_topo_t *t, const char *what)
{
    rcoll_status_t st = check_cpus_pci(t, what);
    if (!st) st = check_gpus(t, what);
    if (!st) st = check_nics(t, what);
    if (st) return st;
    for (int i = 0; i < t->ngpus; i++) {
        rcoll_topo_gpu_t *g = &t->gpus[i].info;
        int c = chain_cpu(t, t->gpus[i].parent);
        g->cpu = c >= 0 ? t->cpus[c].info.id : -1;
        if (g->numa == TOPO_NUMA_UNSET) g->numa = c >= 0 ? t->cpus[c].info.numa : -1;
    }
    for (int i = 0; i < t->nnics; i++) {
        rcoll_topo_nic_t *n = &t->nics[i].info;
        int c = chain_cpu(t, t->nics[i].parent);
        n->cpu = c >= 0 ? t->cpus[c].info.id : -1;
        if (n->numa == TOPO_NUMA_UNSET) n->numa = c >= 0 ? t->cpus[c].info.numa : -1;
    }
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------
 * accessors
 * ------------------------------------------------------------------------------------ */
const char *rcoll_topo_host(const rcoll_topo_t *t) { return t ? t->host : ""; }
const char *rcoll_topo_source(const rcoll_topo_t *t) { return t ? t->source : ""; }
int rcoll_topo_ncpus(const rcoll_topo_t *t) { return t ? t->ncpus : 0; }
int rcoll_topo_ngpus(const rcoll_topo_t *t) { return t ? t->ngpus : 0; }
int rcoll_topo_nnics(const rcoll_topo_t *t) { return t ? t->nnics : 0; }

const rcoll_topo_cpu_t *rcoll_topo_cpu(const rcoll_topo_t *t, int i)
{
    return t && i >= 0 && i < t->ncpus ? &t->cpus[i].info : NULL;
}

const rcoll_topo_gpu_t *rcoll_topo_gpu(const rcoll_topo_t *t, int i)
{
    return t && i >= 0 && i < t->ngpus ? &t->gpus[i].info : NULL;
}

const rcoll_topo_nic_t *rcoll_topo_nic(const rcoll_topo_t *t, int i)
{
    return t && i >= 0 && i < t->nnics ? &t->nics[i].info : NULL;
}

const char *rcoll_topo_cpulist(const rcoll_topo_t *t, int cpu_id)
{
    if (!t || cpu_id < 0) return "";
    int i = cpu_by_id(t, cpu_id);
    return i >= 0 ? t->cpus[i].info.cpulist : "";
}

/* ---------------------------------------------------------------------------------------
 * paths
 * ------------------------------------------------------------------------------------ */
static void why_set(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void why_set(char *why, size_t len, const char *fmt, ...)
{
    if (!why || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* PCI path between two devices hanging from pa and pb. */
static rcoll_path_t pci_path(const rcoll_topo_t *t, topo_ref_t pa, topo_ref_t pb, char *why,
                             size_t len)
{
    /* Walk a's chain; for each node, look for it in b's chain: the first hit is the lowest
     * common ancestor.  Chains are short (a handful of switches), so O(depth^2) is fine. */
    int da = 0;
    for (topo_ref_t ra = pa; ra.kind == TOPO_REF_PCI && da <= t->npci;
         ra = t->pci[ra.idx].parent, da++) {
        int db = 0;
        for (topo_ref_t rb = pb; rb.kind == TOPO_REF_PCI && db <= t->npci;
             rb = t->pci[rb.idx].parent, db++) {
            if (rb.idx != ra.idx) continue;
            const topo_pci_t *n = &t->pci[ra.idx];
            if (n->kind == TOPO_PCI_HOSTBRIDGE) {
                why_set(why, len, "they meet at host bridge %s", n->id);
                return RCOLL_PATH_PHB;
            }
            if (da == 0 && db == 0) {
                why_set(why, len, "behind the same PCIe switch %s", n->id);
                return RCOLL_PATH_PIX;
            }
            why_set(why, len, "behind different PCIe switches that meet at switch %s", n->id);
            return RCOLL_PATH_PXB;
        }
    }
    int ca = chain_cpu(t, pa), cb = chain_cpu(t, pb);
    if (ca >= 0 && cb >= 0) {
        if (ca == cb) {
            why_set(why, len, "they meet only at CPU package %d (different host bridges or "
                    "root ports)", t->cpus[ca].info.id);
            return RCOLL_PATH_PHB;
        }
        why_set(why, len, "across CPU packages %d and %d", t->cpus[ca].info.id,
                t->cpus[cb].info.id);
        return RCOLL_PATH_SYS;
    }
    if (t->ncpus <= 1) {
        why_set(why, len, "no shared PCIe switch or host bridge; one CPU package");
        return RCOLL_PATH_PHB;
    }
    why_set(why, len, "the CPU package of one of them is unknown on a %d-package machine",
            t->ncpus);
    return RCOLL_PATH_SYS;
}

static int gpu_ok(const rcoll_topo_t *t, int i) { return t && i >= 0 && i < t->ngpus; }
static int nic_ok(const rcoll_topo_t *t, int i) { return t && i >= 0 && i < t->nnics; }

rcoll_path_t rcoll_topo_explain_gpu_gpu(const rcoll_topo_t *t, int a, int b, int *nvlinks,
                                        char *why, size_t len)
{
    int links = 0;
    rcoll_path_t p;
    if (!gpu_ok(t, a) || !gpu_ok(t, b)) {
        why_set(why, len, "no such GPU");
        p = RCOLL_PATH_SYS;
    } else if (a == b) {
        why_set(why, len, "the same GPU");
        p = RCOLL_PATH_LOC;
    } else if ((links = t->nvl[a * t->ngpus + b]) > 0) {
        why_set(why, len, "%d direct NVLink%s", links, links == 1 ? "" : "s");
        p = RCOLL_PATH_NVL;
    } else if (t->gpus[a].info.nvswitch_links > 0 && t->gpus[b].info.nvswitch_links > 0) {
        int la = t->gpus[a].info.nvswitch_links, lb = t->gpus[b].info.nvswitch_links;
        links = la < lb ? la : lb;
        why_set(why, len, "both on NVSwitch (%d and %d links)", la, lb);
        p = RCOLL_PATH_NVL;
    } else {
        int best = 0, via = -1, n = t->ngpus;
        for (int c = 0; c < n; c++) {
            int l1 = t->nvl[a * n + c], l2 = t->nvl[c * n + b];
            int m = l1 < l2 ? l1 : l2;
            if (m > best) {
                best = m;
                via = c;
            }
        }
        if (via >= 0) {
            links = best;
            why_set(why, len, "NVLink through GPU %d", via);
            p = RCOLL_PATH_NVB;
        } else {
            p = pci_path(t, t->gpus[a].parent, t->gpus[b].parent, why, len);
        }
    }
    if (nvlinks) *nvlinks = links;
    return p;
}

rcoll_path_t rcoll_topo_path_gpu_gpu(const rcoll_topo_t *t, int a, int b, int *nvlinks)
{
    return rcoll_topo_explain_gpu_gpu(t, a, b, nvlinks, NULL, 0);
}

rcoll_path_t rcoll_topo_explain_gpu_nic(const rcoll_topo_t *t, int gpu, int nic, char *why,
                                        size_t len)
{
    if (!gpu_ok(t, gpu) || !nic_ok(t, nic)) {
        why_set(why, len, "no such GPU or NIC");
        return RCOLL_PATH_SYS;
    }
    return pci_path(t, t->gpus[gpu].parent, t->nics[nic].parent, why, len);
}

rcoll_path_t rcoll_topo_path_gpu_nic(const rcoll_topo_t *t, int gpu, int nic)
{
    return rcoll_topo_explain_gpu_nic(t, gpu, nic, NULL, 0);
}

rcoll_path_t rcoll_topo_path_nic_nic(const rcoll_topo_t *t, int a, int b)
{
    if (!nic_ok(t, a) || !nic_ok(t, b)) return RCOLL_PATH_SYS;
    if (a == b) return RCOLL_PATH_LOC;
    /* Two ports of one device share everything. */
    if (t->nics[a].info.pci[0] && !strcmp(t->nics[a].info.pci, t->nics[b].info.pci))
        return RCOLL_PATH_LOC;
    return pci_path(t, t->nics[a].parent, t->nics[b].parent, NULL, 0);
}

/* 0: usable RDMA port, 1: RDMA port that is down, 2: plain NIC. */
static int nic_class(const rcoll_topo_nic_t *n)
{
    if (!n->rdma) return 2;
    return !strcmp(n->state, "down") ? 1 : 0;
}

int rcoll_topo_gpu_nic(const rcoll_topo_t *t, int gpu)
{
    if (!gpu_ok(t, gpu)) return -1;
    int best = -1, best_class = 0;
    rcoll_path_t best_path = RCOLL_PATH_NET;
    for (int i = 0; i < t->nnics; i++) {
        int cls = nic_class(&t->nics[i].info);
        rcoll_path_t p = rcoll_topo_path_gpu_nic(t, gpu, i);
        if (best < 0 || cls < best_class || (cls == best_class && p < best_path)) {
            best = i;
            best_class = cls;
            best_path = p;
        }
    }
    return best;
}

int rcoll_topo_gdr_allowed(const rcoll_topo_t *t, int gpu, int nic, rcoll_path_t max_level,
                           char *reason, size_t len)
{
    if (!gpu_ok(t, gpu) || !nic_ok(t, nic)) {
        why_set(reason, len, "no GPU %d or NIC %d in this topology", gpu, nic);
        return 0;
    }
    const rcoll_topo_nic_t *n = &t->nics[nic].info;
    if (!n->rdma) {
        why_set(reason, len, "%s is not an RDMA NIC", n->name);
        return 0;
    }
    char why[200];
    rcoll_path_t p = rcoll_topo_explain_gpu_nic(t, gpu, nic, why, sizeof(why));
    int ok = p <= max_level;
    why_set(reason, len, "GPU %d and %s are %s: %s (GPUDirect RDMA allowed %sup to %s)", gpu,
            n->name, rcoll_path_name(p), why, ok ? "" : "only ", rcoll_path_name(max_level));
    return ok;
}

int rcoll_topo_gpu_index(const rcoll_topo_t *t, const char *bus)
{
    for (int g = 0; t && bus && g < t->ngpus; g++)
        if (!strcasecmp(t->gpus[g].info.pci, bus)) return g;
    return -1;
}
