/*
 * topo_file.c - our topology JSON (docs/topology.md): the schema that turns a parsed tree
 * into builder calls, and the writer (rcoll_topo_dump_file) whose output loads back into an
 * equal graph.  Strict on purpose, since these files are written by hand: unknown keys,
 * wrong types and missing required keys are errors naming the line and the object.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "topo/topo_json.h"
#include "util/status.h"

#define TOPO_FORMAT_VERSION 1

typedef struct {
    const char *what;
    rcoll_topo_t *t;
} ld_t;

/* Every key of object v must be in allowed (NULL-terminated); "comment" is always allowed. */
static rcoll_status_t check_keys(const ld_t *ld, const json_value_t *v, const char *obj,
                                 const char *const *allowed)
{
    for (const json_value_t *m = v->child; m; m = m->next) {
        int ok = !strcmp(m->key, "comment");
        for (size_t i = 0; allowed[i] && !ok; i++) ok = !strcmp(m->key, allowed[i]);
        if (ok) continue;
        char list[256];
        size_t off = 0;
        list[0] = '\0';
        for (size_t i = 0; allowed[i]; i++) {
            int n = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", allowed[i]);
            if (n < 0 || (size_t)n >= sizeof(list) - off) break;
            off += (size_t)n;
        }
        return topo_err(ld->what, m->line, "%s: unknown key \"%.60s\" (known: %s)", obj, m->key,
                        list);
    }
    return RCOLL_OK;
}

static rcoll_status_t want(const ld_t *ld, const json_value_t *m, json_type_t type,
                           const char *obj, const char *what_kind)
{
    if (m->type == type) return RCOLL_OK;
    return topo_err(ld->what, m->line, "%s: \"%s\" must be %s, not %s %s", obj, m->key,
                    what_kind, m->type == JSON_ARRAY || m->type == JSON_OBJECT ? "an" : "a",
                    json_type_name(m->type));
}

/* Optional/required members.  *present (may be NULL) says whether the key was there. */
static rcoll_status_t get_int(const ld_t *ld, const json_value_t *v, const char *key,
                              const char *obj, int required, long long lo, long long hi,
                              long long *out, int *present)
{
    const json_value_t *m = json_get(v, key);
    if (present) *present = m != NULL;
    if (!m) {
        if (required)
            return topo_err(ld->what, v->line, "%s: missing required key \"%s\"", obj, key);
        return RCOLL_OK;
    }
    rcoll_status_t st = want(ld, m, JSON_NUMBER, obj, "an integer");
    if (st) return st;
    if (!m->integral || m->number < (double)lo || m->number > (double)hi)
        return topo_err(ld->what, m->line, "%s: \"%s\" must be an integer in [%lld, %lld]", obj,
                        key, lo, hi);
    *out = (long long)m->number;
    return RCOLL_OK;
}

static rcoll_status_t get_str(const ld_t *ld, const json_value_t *v, const char *key,
                              const char *obj, int required, char *out, size_t len)
{
    const json_value_t *m = json_get(v, key);
    if (!m) {
        if (required)
            return topo_err(ld->what, v->line, "%s: missing required key \"%s\"", obj, key);
        return RCOLL_OK;
    }
    rcoll_status_t st = want(ld, m, JSON_STRING, obj, "a string");
    if (st) return st;
    if (strlen(m->str) >= len)
        return topo_err(ld->what, m->line, "%s: \"%s\" is longer than %zu characters", obj, key,
                        len - 1);
    memcpy(out, m->str, strlen(m->str) + 1);
    return RCOLL_OK;
}

static rcoll_status_t get_num(const ld_t *ld, const json_value_t *v, const char *key,
                              const char *obj, double *out)
{
    const json_value_t *m = json_get(v, key);
    if (!m) return RCOLL_OK;
    rcoll_status_t st = want(ld, m, JSON_NUMBER, obj, "a number");
    if (st) return st;
    if (m->number < 0 || !isfinite(m->number))
        return topo_err(ld->what, m->line, "%s: \"%s\" must not be negative", obj, key);
    *out = m->number;
    return RCOLL_OK;
}

static rcoll_status_t get_busid(const ld_t *ld, const json_value_t *v, const char *key,
                                const char *obj, int required, char *out)
{
    char raw[64] = "";
    rcoll_status_t st = get_str(ld, v, key, obj, required, raw, sizeof(raw));
    if (st || !raw[0]) return st;
    if (topo_busid_norm(raw, out, RCOLL_TOPO_BUSID_MAX))
        return topo_err(ld->what, json_get(v, key)->line, "%s: \"%s\": \"%s\" is not a PCI bus "
                        "id (like 0000:17:00.0)", obj, key, raw);
    return RCOLL_OK;
}

/* Array member `key` (absent = empty); each element must be an object. */
static rcoll_status_t get_list(const ld_t *ld, const json_value_t *root, const char *key,
                               const json_value_t **first)
{
    *first = NULL;
    const json_value_t *m = json_get(root, key);
    if (!m) return RCOLL_OK;
    rcoll_status_t st = want(ld, m, JSON_ARRAY, "topology", "an array");
    if (st) return st;
    for (const json_value_t *e = m->child; e; e = e->next)
        if (e->type != JSON_OBJECT)
            return topo_err(ld->what, e->line, "\"%s\": every element must be an object, not "
                            "a %s", key, json_type_name(e->type));
    *first = m->child;
    return RCOLL_OK;
}

static rcoll_status_t load_cpus(ld_t *ld, const json_value_t *e)
{
    static const char *const keys[] = {"id", "numa", "cpulist", NULL};
    for (int i = 0; e; e = e->next, i++) {
        char obj[32];
        snprintf(obj, sizeof(obj), "cpus[%d]", i);
        long long id = 0, numa = -1;
        rcoll_status_t st = check_keys(ld, e, obj, keys);
        if (!st) st = get_int(ld, e, "id", obj, 1, 0, 1 << 20, &id, NULL);
        if (!st) snprintf(obj, sizeof(obj), "cpu%lld", id);
        if (!st) st = get_int(ld, e, "numa", obj, 0, -1, 1 << 20, &numa, NULL);
        topo_cpu_t *c = st ? NULL : topo_add_cpu(ld->t);
        if (!st && !c) st = RCOLL_ERR_NO_MEMORY;
        if (!st) st = get_str(ld, e, "cpulist", obj, 0, c->info.cpulist, sizeof(c->info.cpulist));
        if (st) return st;
        c->info.id = (int)id;
        c->info.numa = (int)numa;
        c->line = e->line;
    }
    return RCOLL_OK;
}

static rcoll_status_t load_pci(ld_t *ld, const json_value_t *e)
{
    static const char *const keys[] = {"id", "type", "parent", "busid", "link_gbs", NULL};
    for (int i = 0; e; e = e->next, i++) {
        char obj[TOPO_ID_MAX + 16], type[32] = "";
        snprintf(obj, sizeof(obj), "pci[%d]", i);
        topo_pci_t *p = topo_add_pci(ld->t);
        if (!p) return RCOLL_ERR_NO_MEMORY;
        p->line = e->line;
        rcoll_status_t st = check_keys(ld, e, obj, keys);
        if (!st) st = get_str(ld, e, "id", obj, 1, p->id, sizeof(p->id));
        if (!st) snprintf(obj, sizeof(obj), "pci \"%s\"", p->id);
        if (!st) st = get_str(ld, e, "type", obj, 1, type, sizeof(type));
        if (!st) {
            if (!strcmp(type, "hostbridge")) p->kind = TOPO_PCI_HOSTBRIDGE;
            else if (!strcmp(type, "switch")) p->kind = TOPO_PCI_SWITCH;
            else
                st = topo_err(ld->what, json_get(e, "type")->line, "%s: type \"%s\" is not "
                              "\"hostbridge\" or \"switch\"", obj, type);
        }
        if (!st) st = get_str(ld, e, "parent", obj, 0, p->parent_name, sizeof(p->parent_name));
        if (!st) st = get_busid(ld, e, "busid", obj, 0, p->busid);
        if (!st) st = get_num(ld, e, "link_gbs", obj, &p->link_gbs);
        if (st) return st;
    }
    return RCOLL_OK;
}

static rcoll_status_t load_nvlinks(ld_t *ld, const json_value_t *g, int index, const char *obj)
{
    const json_value_t *m = json_get(g, "nvlink");
    if (!m) return RCOLL_OK;
    rcoll_status_t st = want(ld, m, JSON_ARRAY, obj, "an array");
    if (st) return st;
    static const char *const keys[] = {"peer", "links", NULL};
    for (const json_value_t *e = m->child; e; e = e->next) {
        if (e->type != JSON_OBJECT)
            return topo_err(ld->what, e->line, "%s: nvlink entries must be objects like "
                            "{\"peer\": 1, \"links\": 4}", obj);
        long long peer = 0, links = 0;
        st = check_keys(ld, e, obj, keys);
        if (!st) st = get_int(ld, e, "peer", obj, 1, 0, 1 << 20, &peer, NULL);
        if (!st) st = get_int(ld, e, "links", obj, 1, 0, 1024, &links, NULL);
        if (!st) st = topo_add_nvlink(ld->t, index, (int)peer, (int)links, e->line);
        if (st) return st;
    }
    return RCOLL_OK;
}

static rcoll_status_t load_gpus(ld_t *ld, const json_value_t *e)
{
    static const char *const keys[] = {"index", "pci", "parent", "name", "numa", "nvlink",
                                       "nvswitch_links", "link_gbs", NULL};
    for (int i = 0; e; e = e->next, i++) {
        char obj[32];
        snprintf(obj, sizeof(obj), "gpus[%d]", i);
        topo_gpu_t *g = topo_add_gpu(ld->t);
        if (!g) return RCOLL_ERR_NO_MEMORY;
        g->line = e->line;
        long long index = i, numa = TOPO_NUMA_UNSET, nvs = 0;
        rcoll_status_t st = check_keys(ld, e, obj, keys);
        if (!st) st = get_int(ld, e, "index", obj, 0, 0, 1 << 20, &index, NULL);
        if (!st) snprintf(obj, sizeof(obj), "gpu %lld", index);
        if (!st) st = get_busid(ld, e, "pci", obj, 1, g->info.pci);
        if (!st) st = get_str(ld, e, "parent", obj, 0, g->parent_name, sizeof(g->parent_name));
        if (!st) st = get_str(ld, e, "name", obj, 0, g->info.name, sizeof(g->info.name));
        if (!st) st = get_int(ld, e, "numa", obj, 0, -1, 1 << 20, &numa, NULL);
        if (!st) st = get_int(ld, e, "nvswitch_links", obj, 0, 0, 1024, &nvs, NULL);
        if (!st) st = get_num(ld, e, "link_gbs", obj, &g->info.link_gbs);
        if (!st) st = load_nvlinks(ld, e, (int)index, obj);
        if (st) return st;
        g->info.index = (int)index;
        g->info.numa = (int)numa;
        g->info.nvswitch_links = (int)nvs;
    }
    return RCOLL_OK;
}

static rcoll_status_t load_nics(ld_t *ld, const json_value_t *e)
{
    static const char *const keys[] = {"name", "rdma", "pci", "parent", "numa", "port", "state",
                                       "link_layer", "speed_mbps", "netdev", "link_gbs", NULL};
    for (int i = 0; e; e = e->next, i++) {
        char obj[RCOLL_TOPO_NAME_MAX + 16];
        snprintf(obj, sizeof(obj), "nics[%d]", i);
        topo_nic_t *n = topo_add_nic(ld->t);
        if (!n) return RCOLL_ERR_NO_MEMORY;
        n->line = e->line;
        long long numa = TOPO_NUMA_UNSET, port = 0, speed = 0;
        int has_port = 0;
        rcoll_status_t st = check_keys(ld, e, obj, keys);
        if (!st) st = get_str(ld, e, "name", obj, 1, n->info.name, sizeof(n->info.name));
        if (!st) snprintf(obj, sizeof(obj), "nic \"%s\"", n->info.name);
        const json_value_t *rd = json_get(e, "rdma");
        if (!st && rd) st = want(ld, rd, JSON_BOOL, obj, "true or false");
        n->info.rdma = rd && rd->boolean;
        if (!st) st = get_busid(ld, e, "pci", obj, 0, n->info.pci);
        if (!st) st = get_str(ld, e, "parent", obj, 0, n->parent_name, sizeof(n->parent_name));
        if (!st) st = get_int(ld, e, "numa", obj, 0, -1, 1 << 20, &numa, NULL);
        if (!st) st = get_int(ld, e, "port", obj, 0, 1, 255, &port, &has_port);
        if (!st && has_port && !n->info.rdma)
            st = topo_err(ld->what, json_get(e, "port")->line, "%s: \"port\" is only meaningful "
                          "with \"rdma\": true", obj);
        if (!st) st = get_str(ld, e, "state", obj, 0, n->info.state, sizeof(n->info.state));
        if (!st)
            st = get_str(ld, e, "link_layer", obj, 0, n->info.link_layer,
                         sizeof(n->info.link_layer));
        if (!st) st = get_int(ld, e, "speed_mbps", obj, 0, 0, 1LL << 40, &speed, NULL);
        if (!st) st = get_str(ld, e, "netdev", obj, 0, n->info.netdev, sizeof(n->info.netdev));
        if (!st) st = get_num(ld, e, "link_gbs", obj, &n->info.link_gbs);
        if (st) return st;
        n->info.numa = (int)numa;
        n->info.port = n->info.rdma ? (has_port ? (int)port : 1) : 0;
        n->info.speed_mbps = speed;
    }
    return RCOLL_OK;
}

rcoll_status_t topo_load_json(const char *path, const char *text, size_t len,
                              rcoll_topo_t **out)
{
    char what[300];
    snprintf(what, sizeof(what), "topology file %s", path);
    json_doc_t *doc;
    rcoll_status_t st = json_parse(what, text, len, &doc);
    if (st) return st;
    const json_value_t *root = json_doc_root(doc);
    char source[320];
    snprintf(source, sizeof(source), "file %s", path);
    ld_t ld = {.what = what, .t = NULL};
    static const char *const keys[] = {"rcoll_topology", "host", "cpus", "pci", "gpus", "nics",
                                       NULL};
    long long version = 0;
    const json_value_t *cpus, *pci, *gpus, *nics;
    if (root->type != JSON_OBJECT) {
        st = topo_err(what, root->line, "the top level must be an object {\"rcoll_topology\": "
                      "1, ...}, not %s %s", root->type == JSON_ARRAY ? "an" : "a",
                      json_type_name(root->type));
        goto err_doc;
    }
    ld.t = topo_new(source);
    if (!ld.t) {
        st = RCOLL_ERR_NO_MEMORY;
        goto err_doc;
    }
    st = check_keys(&ld, root, "topology", keys);
    if (!st) st = get_int(&ld, root, "rcoll_topology", "topology", 1, 0, 1 << 20, &version, NULL);
    if (!st && version != TOPO_FORMAT_VERSION)
        st = topo_err(what, json_get(root, "rcoll_topology")->line, "format version %lld is "
                      "not supported (this rcoll reads version %d)", version, TOPO_FORMAT_VERSION);
    if (!st) st = get_str(&ld, root, "host", "topology", 0, ld.t->host, sizeof(ld.t->host));
    if (!st) st = get_list(&ld, root, "cpus", &cpus);
    if (!st) st = get_list(&ld, root, "pci", &pci);
    if (!st) st = get_list(&ld, root, "gpus", &gpus);
    if (!st) st = get_list(&ld, root, "nics", &nics);
    if (!st) st = load_cpus(&ld, cpus);
    if (!st) st = load_pci(&ld, pci);
    if (!st) st = load_gpus(&ld, gpus);
    if (!st) st = load_nics(&ld, nics);
    if (!st) st = topo_finalize(ld.t, what);
    if (st) goto err_topo;
    json_doc_free(doc);
    *out = ld.t;
    return RCOLL_OK;
err_topo:
    rcoll_topo_free(ld.t);
err_doc:
    json_doc_free(doc);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * writer
 * ------------------------------------------------------------------------------------ */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void put_kv_str(FILE *f, const char *key, const char *val)
{
    fprintf(f, ", \"%s\": ", key);
    put_str(f, val);
}

static const char *parent_name(const rcoll_topo_t *t, topo_ref_t r, char *buf, size_t len)
{
    if (r.kind == TOPO_REF_CPU) snprintf(buf, len, "cpu%d", t->cpus[r.idx].info.id);
    else if (r.kind == TOPO_REF_PCI) snprintf(buf, len, "%s", t->pci[r.idx].id);
    else buf[0] = '\0';
    return buf;
}

static void write_topo(const rcoll_topo_t *t, FILE *f)
{
    char pb[TOPO_ID_MAX + 16];
    fprintf(f, "{\n  \"rcoll_topology\": %d,\n  \"host\": ", TOPO_FORMAT_VERSION);
    put_str(f, t->host);
    fprintf(f, ",\n  \"cpus\": [");
    for (int i = 0; i < t->ncpus; i++) {
        const rcoll_topo_cpu_t *c = &t->cpus[i].info;
        fprintf(f, "%s\n    {\"id\": %d, \"numa\": %d", i ? "," : "", c->id, c->numa);
        if (c->cpulist[0]) put_kv_str(f, "cpulist", c->cpulist);
        fputc('}', f);
    }
    fprintf(f, "%s],\n  \"pci\": [", t->ncpus ? "\n  " : "");
    for (int i = 0; i < t->npci; i++) {
        const topo_pci_t *p = &t->pci[i];
        fprintf(f, "%s\n    {\"id\": ", i ? "," : "");
        put_str(f, p->id);
        put_kv_str(f, "type", p->kind == TOPO_PCI_HOSTBRIDGE ? "hostbridge" : "switch");
        if (p->parent.kind != TOPO_REF_NONE)
            put_kv_str(f, "parent", parent_name(t, p->parent, pb, sizeof(pb)));
        if (p->busid[0]) put_kv_str(f, "busid", p->busid);
        if (p->link_gbs > 0) fprintf(f, ", \"link_gbs\": %g", p->link_gbs);
        fputc('}', f);
    }
    fprintf(f, "%s],\n  \"gpus\": [", t->npci ? "\n  " : "");
    for (int i = 0; i < t->ngpus; i++) {
        const topo_gpu_t *g = &t->gpus[i];
        fprintf(f, "%s\n    {\"index\": %d", i ? "," : "", g->info.index);
        put_kv_str(f, "pci", g->info.pci);
        if (g->parent.kind != TOPO_REF_NONE)
            put_kv_str(f, "parent", parent_name(t, g->parent, pb, sizeof(pb)));
        if (g->info.name[0]) put_kv_str(f, "name", g->info.name);
        fprintf(f, ", \"numa\": %d", g->info.numa);
        if (g->info.nvswitch_links) fprintf(f, ", \"nvswitch_links\": %d", g->info.nvswitch_links);
        if (g->info.link_gbs > 0) fprintf(f, ", \"link_gbs\": %g", g->info.link_gbs);
        int first = 1;
        for (int j = 0; j < t->ngpus; j++) {
            int l = t->nvl[i * t->ngpus + j];
            if (!l) continue;
            fprintf(f, "%s{\"peer\": %d, \"links\": %d}", first ? ", \"nvlink\": [" : ", ", j, l);
            first = 0;
        }
        if (!first) fputc(']', f);
        fputc('}', f);
    }
    fprintf(f, "%s],\n  \"nics\": [", t->ngpus ? "\n  " : "");
    for (int i = 0; i < t->nnics; i++) {
        const topo_nic_t *n = &t->nics[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        put_str(f, n->info.name);
        fprintf(f, ", \"rdma\": %s", n->info.rdma ? "true" : "false");
        if (n->info.pci[0]) put_kv_str(f, "pci", n->info.pci);
        if (n->parent.kind != TOPO_REF_NONE)
            put_kv_str(f, "parent", parent_name(t, n->parent, pb, sizeof(pb)));
        fprintf(f, ", \"numa\": %d", n->info.numa);
        if (n->info.rdma) fprintf(f, ", \"port\": %d", n->info.port);
        if (n->info.state[0]) put_kv_str(f, "state", n->info.state);
        if (n->info.link_layer[0]) put_kv_str(f, "link_layer", n->info.link_layer);
        if (n->info.speed_mbps) fprintf(f, ", \"speed_mbps\": %lld", n->info.speed_mbps);
        if (n->info.netdev[0]) put_kv_str(f, "netdev", n->info.netdev);
        if (n->info.link_gbs > 0) fprintf(f, ", \"link_gbs\": %g", n->info.link_gbs);
        fputc('}', f);
    }
    fprintf(f, "%s]\n}\n", t->nnics ? "\n  " : "");
}

rcoll_status_t rcoll_topo_dump_file(const rcoll_topo_t *t, const char *path)
{
    if (!t || !path || !path[0])
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "topology dump: no graph or no path");
    int to_stdout = !strcmp(path, "-");
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "cannot write topology file %s", path);
    write_topo(t, f);
    int bad = ferror(f);
    if (to_stdout) bad |= fflush(f) != 0;
    else bad |= fclose(f) != 0;
    if (bad) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "writing topology file %s", path);
    return RCOLL_OK;
}
