/*
 * topo_xml.c - a small XML reader (elements, attributes, comments, processing instructions,
 * DOCTYPE, CDATA; the five entities and character references) that keeps line numbers, and
 * the NCCL topology XML (<system version="1">, as written by NCCL_TOPO_DUMP_FILE) mapped onto
 * the topology builder.  Also checks hwloc XML for well-formedness before hwloc reads it, so
 * a typo gets a line number.  Nothing else uses this reader.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "topo/topo_text.h"
#include "util/status.h"

#define XML_MAX_DEPTH 256

typedef struct xml_attr {
    const char *name, *value;
    int line;
    struct xml_attr *next;
} xml_attr_t;

typedef struct xml_elem {
    const char *name;
    int line;
    xml_attr_t *attrs;
    struct xml_elem *child, *next;
} xml_elem_t;

/* Skip to just past `end`; error naming `what` when the file ends first. */
static rcoll_status_t skip_past(topo_text_t *p, const char *end, const char *what)
{
    int line = p->line;
    while (p->pos < p->len && !topo_text_at(p, end)) topo_text_step(p, 1);
    if (p->pos >= p->len) {
        p->line = line;
        return topo_text_err(p, "%s not closed with '%s' before the end of the file", what, end);
    }
    topo_text_step(p, strlen(end));
    return RCOLL_OK;
}

/* A comment: "--" may appear only in its closing "-->". */
static rcoll_status_t skip_comment(topo_text_t *p)
{
    int line = p->line;
    topo_text_step(p, 4);
    while (p->pos < p->len && !topo_text_at(p, "--")) topo_text_step(p, 1);
    if (p->pos >= p->len) {
        p->line = line;
        return topo_text_err(p, "comment not closed with '-->' before the end of the file");
    }
    if (!topo_text_at(p, "-->"))
        return topo_text_err(p, "'--' inside a comment (not allowed in XML)");
    topo_text_step(p, 3);
    return RCOLL_OK;
}

static int name_char(char c, int first)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':') return 1;
    return !first && ((c >= '0' && c <= '9') || c == '-' || c == '.');
}

static rcoll_status_t read_name(topo_text_t *p, const char **out)
{
    size_t start = p->pos;
    if (p->pos >= p->len || !name_char(p->s[p->pos], 1))
        return topo_text_err(p, "expected a name, found %s", topo_text_found(p));
    while (p->pos < p->len && name_char(p->s[p->pos], 0)) p->pos++;
    char *n = topo_arena_alloc(p->arena, p->pos - start + 1);
    if (!n) return topo_text_nomem(p);
    memcpy(n, p->s + start, p->pos - start); /* the arena zeroed the terminator */
    *out = n;
    return RCOLL_OK;
}

/* Attribute value between quotes, entities decoded. */
static rcoll_status_t read_value(topo_text_t *p, const char **out)
{
    int q = topo_text_peek(p);
    if (q != '"' && q != '\'')
        return topo_text_err(p, "expected a quoted attribute value, found %s", topo_text_found(p));
    topo_text_step(p, 1);
    size_t start = p->pos, end = start;
    while (end < p->len && p->s[end] != q) end++;
    if (end >= p->len)
        return topo_text_err(p, "attribute value not closed before the end of the file");
    char *v = topo_arena_alloc(p->arena, end - start + 1);
    if (!v) return topo_text_nomem(p);
    size_t n = 0;
    while (p->pos < end) {
        char c = p->s[p->pos];
        if (c == '<') return topo_text_err(p, "'<' inside an attribute value (write &lt;)");
        if (c != '&') {
            v[n++] = c;
            topo_text_step(p, 1);
            continue;
        }
        size_t semi = p->pos + 1;
        while (semi < end && semi - p->pos < 12 && p->s[semi] != ';') semi++;
        if (semi >= end || p->s[semi] != ';')
            return topo_text_err(p, "'&' not followed by an entity; write &amp;");
        const char *e = p->s + p->pos + 1;
        size_t el = semi - p->pos - 1;
        static const struct {
            const char *name;
            char c;
        } ents[] = {{"lt", '<'}, {"gt", '>'}, {"amp", '&'}, {"quot", '"'}, {"apos", '\''}};
        int done = 0;
        for (size_t i = 0; i < 5 && !done; i++)
            if (el == strlen(ents[i].name) && !memcmp(e, ents[i].name, el)) {
                v[n++] = ents[i].c;
                done = 1;
            }
        if (!done && el >= 2 && e[0] == '#') {
            char num[16];
            snprintf(num, sizeof(num), "%.*s", (int)(el - 1), e + 1);
            char *stop;
            long cp = num[0] == 'x' ? strtol(num + 1, &stop, 16) : strtol(num, &stop, 10);
            if (*stop || cp <= 0 || cp > 0x7f || stop == num || (num[0] == 'x' && stop == num + 1))
                return topo_text_err(p, "character reference &%.*s; is not supported (ASCII "
                                        "only)",
                                     (int)el, e);
            v[n++] = (char)cp;
            done = 1;
        }
        if (!done) return topo_text_err(p, "unknown entity &%.*s;", (int)el, e);
        topo_text_step(p, semi + 1 - p->pos);
    }
    v[n] = '\0';
    topo_text_step(p, 1); /* closing quote */
    *out = v;
    return RCOLL_OK;
}

static rcoll_status_t parse_elem(topo_text_t *p, int depth, xml_elem_t **out);

static rcoll_status_t parse_content(topo_text_t *p, int depth, xml_elem_t *el)
{
    xml_elem_t **tail = &el->child;
    for (;;) {
        while (p->pos < p->len && p->s[p->pos] != '<') topo_text_step(p, 1); /* text: ignored */
        if (p->pos >= p->len)
            return topo_text_err(p, "<%s> opened on line %d is not closed before the end of the "
                                    "file",
                                 el->name, el->line);
        rcoll_status_t st = RCOLL_OK;
        if (topo_text_at(p, "</")) {
            topo_text_step(p, 2);
            const char *name;
            st = read_name(p, &name);
            if (st) return st;
            if (strcmp(name, el->name))
                return topo_text_err(p, "</%s> closes <%s> opened on line %d", name, el->name,
                                     el->line);
            topo_text_skip_ws(p);
            if (!topo_text_at(p, ">"))
                return topo_text_err(p, "expected '>' after </%s, found %s", name,
                                     topo_text_found(p));
            topo_text_step(p, 1);
            return RCOLL_OK;
        } else if (topo_text_at(p, "<!--")) {
            st = skip_comment(p);
        } else if (topo_text_at(p, "<![CDATA[")) {
            st = skip_past(p, "]]>", "CDATA section");
        } else if (topo_text_at(p, "<?")) {
            st = skip_past(p, "?>", "processing instruction");
        } else {
            xml_elem_t *c;
            st = parse_elem(p, depth + 1, &c);
            if (!st) {
                *tail = c;
                tail = &c->next;
            }
        }
        if (st) return st;
    }
}

static rcoll_status_t parse_elem(topo_text_t *p, int depth, xml_elem_t **out)
{
    if (depth > XML_MAX_DEPTH)
        return topo_text_err(p, "elements nested deeper than %d", XML_MAX_DEPTH);
    xml_elem_t *el = topo_arena_alloc(p->arena, sizeof(*el));
    if (!el) return topo_text_nomem(p);
    el->line = p->line;
    topo_text_step(p, 1); /* '<' */
    rcoll_status_t st = read_name(p, &el->name);
    if (st) return st;
    xml_attr_t **tail = &el->attrs;
    for (;;) {
        size_t before = p->pos;
        topo_text_skip_ws(p);
        if (topo_text_at(p, "/>")) {
            topo_text_step(p, 2);
            *out = el;
            return RCOLL_OK;
        }
        if (topo_text_at(p, ">")) {
            topo_text_step(p, 1);
            st = parse_content(p, depth, el);
            if (st) return st;
            *out = el;
            return RCOLL_OK;
        }
        if (p->pos >= p->len)
            return topo_text_err(p, "<%s> opened on line %d: the file ends inside the tag",
                                 el->name, el->line);
        if (p->pos == before)
            return topo_text_err(p, "<%s>: expected a blank, '>' or '/>', found %s", el->name,
                                 topo_text_found(p));
        xml_attr_t *a = topo_arena_alloc(p->arena, sizeof(*a));
        if (!a) return topo_text_nomem(p);
        a->line = p->line;
        st = read_name(p, &a->name);
        if (st) return st;
        for (const xml_attr_t *o = el->attrs; o; o = o->next)
            if (!strcmp(o->name, a->name))
                return topo_text_err(p, "<%s>: attribute %s given twice", el->name, a->name);
        topo_text_skip_ws(p);
        if (!topo_text_at(p, "="))
            return topo_text_err(p, "expected '=' after attribute %s, found %s", a->name,
                                 topo_text_found(p));
        topo_text_step(p, 1);
        topo_text_skip_ws(p);
        st = read_value(p, &a->value);
        if (st) return st;
        *tail = a;
        tail = &a->next;
    }
}

/* Whole document: prolog, one root element, trailing comments/blanks. */
static rcoll_status_t parse_doc(topo_text_t *p, xml_elem_t **root)
{
    *root = NULL;
    for (;;) {
        topo_text_skip_ws(p);
        rcoll_status_t st = RCOLL_OK;
        if (p->pos >= p->len) {
            if (*root) return RCOLL_OK;
            return topo_text_err(p, "no root element");
        }
        if (topo_text_at(p, "<?")) {
            st = skip_past(p, "?>", "processing instruction");
        } else if (topo_text_at(p, "<!--")) {
            st = skip_comment(p);
        } else if (topo_text_at(p, "<!DOCTYPE") && !*root) {
            st = skip_past(p, ">", "DOCTYPE"); /* no internal subsets in these files */
        } else if (topo_text_at(p, "<") && !*root) {
            st = parse_elem(p, 0, root);
        } else {
            return topo_text_err(p, "unexpected %s %s the root element", topo_text_found(p),
                                 *root ? "after" : "before");
        }
        if (st) return st;
    }
}

static const char *attr(const xml_elem_t *e, const char *name);

/* A bitmap as hwloc writes it: comma-separated chunks "0x" + 1..16 hex digits, the first
 * possibly "0xf...f" (infinite).  hwloc 2.9's parser asserts on other text. */
static int hwloc_bitmap_ok(const char *v)
{
    if (!strncmp(v, "0xf...f", 7)) {
        v += 7;
        if (!*v) return 1;
        if (*v++ != ',') return 0;
    }
    for (;;) {
        if (v[0] != '0' || v[1] != 'x') return 0;
        v += 2;
        int n = 0;
        while (isxdigit((unsigned char)*v)) v++, n++;
        if (n < 1 || n > 16) return 0;
        if (!*v) return 1;
        if (*v++ != ',') return 0;
    }
}

/* hwloc XML that hwloc itself cannot take safely: hwloc 2.9's import dereferences NULL on an
 * <object> that has a cpuset or nodeset without its complete_ counterpart (lstopo always
 * writes both) or on one without a type, and asserts on a bitmap that is not hex chunks, so
 * such a file is refused here, with its line, before hwloc reads it. */
static rcoll_status_t hwloc_guard(const char *what, const xml_elem_t *e)
{
    static const char *const pairs[][2] = {{"cpuset", "complete_cpuset"},
                                           {"nodeset", "complete_nodeset"}};
    static const char *const bitmaps[] = {"cpuset", "complete_cpuset", "allowed_cpuset",
                                          "nodeset", "complete_nodeset", "allowed_nodeset"};
    for (; e; e = e->next) {
        if (!strcmp(e->name, "object")) {
            if (!attr(e, "type"))
                return topo_err(what, e->line, "<object> has no type (hwloc cannot read it "
                                "safely)");
            for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
                if (attr(e, pairs[i][0]) && !attr(e, pairs[i][1]))
                    return topo_err(what, e->line, "<object> has %s but no %s (lstopo writes "
                                    "both; hwloc cannot read it safely)", pairs[i][0],
                                    pairs[i][1]);
            for (size_t i = 0; i < sizeof(bitmaps) / sizeof(bitmaps[0]); i++) {
                const char *v = attr(e, bitmaps[i]);
                if (v && !hwloc_bitmap_ok(v))
                    return topo_err(what, e->line, "<object>: %s=\"%.40s\" is not an hwloc "
                                    "bitmap (0x-prefixed hex chunks separated by commas)",
                                    bitmaps[i], v);
            }
        }
        rcoll_status_t st = hwloc_guard(what, e->child);
        if (st) return st;
    }
    return RCOLL_OK;
}

rcoll_status_t topo_xml_check(const char *what, const char *text, size_t len, char *root_name,
                              size_t root_len)
{
    topo_arena_t arena;
    topo_text_t p;
    topo_arena_init(&arena);
    topo_text_init(&p, what, text, len, &arena);
    xml_elem_t *root;
    rcoll_status_t st = parse_doc(&p, &root);
    if (!st) topo_strlcpy(root_name, root->name, root_len);
    if (!st && !strcmp(root->name, "topology")) st = hwloc_guard(what, root->child);
    topo_arena_fini(&arena);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * NCCL topology XML
 * ------------------------------------------------------------------------------------ */
static const char *attr(const xml_elem_t *e, const char *name)
{
    for (const xml_attr_t *a = e->attrs; a; a = a->next)
        if (!strcmp(a->name, name)) return a->value;
    return NULL;
}

typedef struct {
    const char *what;
    rcoll_topo_t *t;
    /* NVLinks until every GPU is known: gpu index, target bus id, count, class, line */
    struct nccl_nvl {
        int gpu, count, line;
        char target[RCOLL_TOPO_BUSID_MAX];
        long tclass;
    } *nvl;
    int nnvl, cap_nvl;
} nx_t;

static rcoll_status_t need(const nx_t *x, const xml_elem_t *e, const char *name, const char **v)
{
    *v = attr(e, name);
    if (!*v) return topo_err(x->what, e->line, "<%s>: missing attribute %s", e->name, name);
    return RCOLL_OK;
}

static rcoll_status_t int_attr(const nx_t *x, const xml_elem_t *e, const char *name, long lo,
                               long hi, long dflt, long *out)
{
    const char *v = attr(e, name);
    *out = dflt;
    if (!v) return RCOLL_OK;
    char *end;
    long n = strtol(v, &end, 0);
    if (end == v || *end || n < lo || n > hi)
        return topo_err(x->what, e->line, "<%s>: %s=\"%s\" is not an integer in [%ld, %ld]",
                        e->name, name, v, lo, hi);
    *out = n;
    return RCOLL_OK;
}

static rcoll_status_t busid_attr(const nx_t *x, const xml_elem_t *e, char *out)
{
    const char *v;
    rcoll_status_t st = need(x, e, "busid", &v);
    if (st) return st;
    if (topo_busid_norm(v, out, RCOLL_TOPO_BUSID_MAX))
        return topo_err(x->what, e->line, "<%s>: busid=\"%s\" is not a PCI bus id", e->name, v);
    return RCOLL_OK;
}

/* "16.0 GT/s PCIe" x "16" -> GB/s */
static double nccl_link_gbs(const xml_elem_t *e)
{
    const char *sp = attr(e, "link_speed"), *w = attr(e, "link_width");
    if (!sp || !w) return 0;
    double gts = strtod(sp, NULL), width = strtod(w, NULL);
    if (gts <= 0 || width <= 0) return 0;
    return gts * width * (gts <= 5.0 ? 0.8 : 128.0 / 130.0) / 8.0;
}

/* NCCL's affinity mask "ffffffff,00000000" (32-bit words, most significant first). */
static void mask_to_cpulist(const char *mask, char *out, size_t len)
{
    int cpus[4096], n = 0;
    size_t ml = strlen(mask);
    int word = 0;
    out[0] = '\0';
    for (size_t end = ml; end > 0 && n < 4096;) { /* from the least significant word */
        size_t start = end;
        while (start > 0 && mask[start - 1] != ',') start--;
        char buf[16];
        if (end - start >= sizeof(buf)) return;
        snprintf(buf, sizeof(buf), "%.*s", (int)(end - start), mask + start);
        unsigned long v = strtoul(buf, NULL, 16);
        for (int b = 0; b < 32 && n < 4096; b++)
            if (v & (1ul << b)) cpus[n++] = word * 32 + b;
        word++;
        end = start ? start - 1 : 0;
    }
    for (int i = 1; i < n; i++) /* words were read low to high, bits ascending: sorted */
        if (cpus[i] < cpus[i - 1]) return;
    topo_format_cpulist(cpus, n, out, len);
}

static rcoll_status_t nccl_nics(nx_t *x, const xml_elem_t *nic, const char *busid,
                                const char *parent, double gbs)
{
    for (const xml_elem_t *net = nic->child; net; net = net->next) {
        if (strcmp(net->name, "net")) continue;
        const char *name;
        long port, speed;
        rcoll_status_t st = need(x, net, "name", &name);
        if (!st) st = int_attr(x, net, "port", 0, 255, 0, &port);
        if (!st) st = int_attr(x, net, "speed", 0, 1L << 40, 0, &speed);
        if (st) return st;
        topo_nic_t *n = topo_add_nic(x->t);
        if (!n) return RCOLL_ERR_NO_MEMORY;
        n->line = net->line;
        topo_strlcpy(n->info.name, name, sizeof(n->info.name));
        /* NCCL writes guid for IB/RoCE devices; sockets devices have port 0. */
        n->info.rdma = attr(net, "guid") != NULL || port > 0;
        n->info.port = n->info.rdma ? (port > 0 ? (int)port : 1) : 0;
        n->info.speed_mbps = speed;
        n->info.link_gbs = gbs;
        topo_strlcpy(n->info.pci, busid, sizeof(n->info.pci));
        topo_strlcpy(n->parent_name, parent, sizeof(n->parent_name));
    }
    return RCOLL_OK;
}

static rcoll_status_t nccl_gpu(nx_t *x, const xml_elem_t *gpu, const char *busid,
                               const char *parent, double gbs)
{
    long dev, sm;
    rcoll_status_t st = int_attr(x, gpu, "dev", 0, 1 << 20, -1, &dev);
    if (!st && dev < 0) st = topo_err(x->what, gpu->line, "<gpu>: missing attribute dev");
    if (!st) st = int_attr(x, gpu, "sm", 0, 10000, 0, &sm);
    if (st) return st;
    topo_gpu_t *g = topo_add_gpu(x->t);
    if (!g) return RCOLL_ERR_NO_MEMORY;
    g->line = gpu->line;
    g->info.index = (int)dev;
    topo_strlcpy(g->info.pci, busid, sizeof(g->info.pci));
    topo_strlcpy(g->parent_name, parent, sizeof(g->parent_name));
    g->info.link_gbs = gbs;
    if (sm) snprintf(g->info.name, sizeof(g->info.name), "NVIDIA GPU (sm_%ld)", sm);
    for (const xml_elem_t *l = gpu->child; l; l = l->next) {
        if (strcmp(l->name, "nvlink")) continue;
        const char *target;
        long count;
        st = need(x, l, "target", &target);
        if (!st) st = int_attr(x, l, "count", 1, 1024, 1, &count);
        if (st) return st;
        if (x->nnvl == x->cap_nvl) {
            int cap = x->cap_nvl ? x->cap_nvl * 2 : 16;
            void *p = realloc(x->nvl, sizeof(x->nvl[0]) * (size_t)cap);
            if (!p) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "topology: out of memory");
            x->nvl = p;
            x->cap_nvl = cap;
        }
        struct nccl_nvl *d = &x->nvl[x->nnvl++];
        d->gpu = (int)dev;
        d->count = (int)count;
        d->line = l->line;
        /* NVSwitch targets are sometimes not bus ids at all (fffffff:ffff:ff): keep "". */
        if (topo_busid_norm(target, d->target, sizeof(d->target))) d->target[0] = '\0';
        const char *tc = attr(l, "tclass");
        d->tclass = tc ? strtol(tc, NULL, 0) : -1;
    }
    return RCOLL_OK;
}

static rcoll_status_t nccl_walk(nx_t *x, const xml_elem_t *e, const char *parent, int depth)
{
    for (const xml_elem_t *c = e->child; c; c = c->next) {
        rcoll_status_t st = RCOLL_OK;
        if (!strcmp(c->name, "nic")) {
            st = nccl_nics(x, c, "", parent, 0);
        } else if (!strcmp(c->name, "pci")) {
            char busid[RCOLL_TOPO_BUSID_MAX];
            st = busid_attr(x, c, busid);
            if (st) return st;
            double gbs = nccl_link_gbs(c);
            const xml_elem_t *gpu = NULL, *nic = NULL;
            int has_pci = 0;
            for (const xml_elem_t *k = c->child; k; k = k->next) {
                if (!strcmp(k->name, "gpu") && !gpu) gpu = k;
                if (!strcmp(k->name, "nic") && !nic) nic = k;
                if (!strcmp(k->name, "pci")) has_pci = 1;
            }
            const char *cls = attr(c, "class");
            if (gpu) {
                st = nccl_gpu(x, gpu, busid, parent, gbs);
            } else if (nic) {
                st = nccl_nics(x, nic, busid, parent, gbs);
            } else if (has_pci || (cls && !strncmp(cls, "0x0604", 6))) {
                topo_pci_t *sw = topo_add_pci(x->t);
                if (!sw) return RCOLL_ERR_NO_MEMORY;
                sw->line = c->line;
                sw->kind = TOPO_PCI_SWITCH;
                topo_strlcpy(sw->id, busid, sizeof(sw->id));
                topo_strlcpy(sw->busid, busid, sizeof(sw->busid));
                topo_strlcpy(sw->parent_name, parent, sizeof(sw->parent_name));
                sw->link_gbs = gbs;
                if (depth > 64) return topo_err(x->what, c->line, "<pci> nested too deep");
                char id[TOPO_ID_MAX]; /* sw moves when the recursion grows the array */
                topo_strlcpy(id, sw->id, sizeof(id));
                st = nccl_walk(x, c, id, depth + 1);
            }
        }
        if (st) return st;
    }
    return RCOLL_OK;
}

static rcoll_status_t nccl_build(nx_t *x, const xml_elem_t *root)
{
    if (strcmp(root->name, "system"))
        return topo_err(x->what, root->line, "the root element is <%s>, not NCCL's <system>",
                        root->name);
    for (const xml_elem_t *c = root->child; c; c = c->next) {
        if (strcmp(c->name, "cpu")) continue;
        long numa;
        rcoll_status_t st = int_attr(x, c, "numaid", -1, 1 << 20, -2, &numa);
        if (!st && numa == -2) st = topo_err(x->what, c->line, "<cpu>: missing attribute numaid");
        if (!st && numa < 0) st = topo_err(x->what, c->line, "<cpu>: numaid must be >= 0");
        if (st) return st;
        topo_cpu_t *cpu = topo_add_cpu(x->t);
        if (!cpu) return RCOLL_ERR_NO_MEMORY;
        cpu->line = c->line;
        cpu->info.id = (int)numa;
        cpu->info.numa = (int)numa;
        const char *aff = attr(c, "affinity");
        if (aff) mask_to_cpulist(aff, cpu->info.cpulist, sizeof(cpu->info.cpulist));
        char parent[32];
        snprintf(parent, sizeof(parent), "cpu%ld", numa);
        st = nccl_walk(x, c, parent, 0);
        if (st) return st;
    }
    for (int k = 0; k < x->nnvl; k++) {
        const struct nccl_nvl *d = &x->nvl[k];
        int peer = -1;
        for (int i = 0; i < x->t->ngpus && d->target[0]; i++)
            if (!strcmp(x->t->gpus[i].info.pci, d->target)) peer = x->t->gpus[i].info.index;
        if (peer >= 0) {
            rcoll_status_t st = topo_add_nvlink(x->t, d->gpu, peer, d->count, d->line);
            if (st) return st;
            continue;
        }
        if (d->tclass >= 0 && (d->tclass >> 16) == 0x03) continue; /* a GPU not in this file */
        for (int i = 0; i < x->t->ngpus; i++)
            if (x->t->gpus[i].info.index == d->gpu) x->t->gpus[i].info.nvswitch_links += d->count;
    }
    return RCOLL_OK;
}

rcoll_status_t topo_load_nccl_xml(const char *path, const char *text, size_t len,
                                  rcoll_topo_t **out)
{
    char what[300], source[320];
    snprintf(what, sizeof(what), "topology file %s", path);
    snprintf(source, sizeof(source), "file %s (NCCL XML)", path);
    topo_arena_t arena;
    topo_text_t p;
    topo_arena_init(&arena);
    topo_text_init(&p, what, text, len, &arena);
    nx_t x = {.what = what, .t = NULL, .nvl = NULL, .nnvl = 0, .cap_nvl = 0};
    xml_elem_t *root;
    rcoll_status_t st = parse_doc(&p, &root);
    if (st) goto out;
    x.t = topo_new(source);
    if (!x.t) {
        st = RCOLL_ERR_NO_MEMORY;
        goto out;
    }
    st = nccl_build(&x, root);
    if (!st) st = topo_finalize(x.t, what);
    if (!st) {
        *out = x.t;
        x.t = NULL;
    }
out:
    rcoll_topo_free(x.t);
    free(x.nvl);
    topo_arena_fini(&arena);
    return st;
}
