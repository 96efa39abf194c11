/*
 * verbs_dev.c - the verbs transport's devices: load libibverbs, open every device, keep the
 * active ports that pass RCOLL_IB_HCA, choose each port's GID (RoCE v2, preferred family, not
 * link-local, inside RCOLL_IB_ADDR_RANGE), report properties, and read async events.
 * Also the operations table of the transport (rcoll_transport_verbs).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/verbs.h"
#include "util/log.h"
#include "util/time.h"
#include "util/status.h"

#define MAX_GIDS 256

static rcoll_vrb_dev_t devs[RCOLL_VRB_MAX_PORTS];
static int ndevs;
static int inited;
static rcoll_vrb_config_t cfg_copy;
static rcoll_vrb_range_t range_copy;
static pthread_mutex_t gid_lock = PTHREAD_MUTEX_INITIALIZER; /* a port's GID, re-read */
const rcoll_vrb_config_t *rcoll_vrb_cfg;

int rcoll_vrb_ndevs(void) { return ndevs; }
rcoll_vrb_dev_t *rcoll_vrb_dev(int i) { return i >= 0 && i < ndevs ? &devs[i] : NULL; }

/* ---------------------------------------------------------------------------------------------
 * Pure helpers: device filter, address range, GID scoring, formatting
 * ------------------------------------------------------------------------------------------ */

/* Does one "name[:port]" entry (len bytes) match dev/port? */
static int hca_entry_match(const char *e, size_t len, int exact, const char *dev, int port)
{
    const char *colon = memchr(e, ':', len);
    size_t nlen = colon ? (size_t)(colon - e) : len;
    if (nlen == 0) return 0;
    if (exact ? (strlen(dev) != nlen || strncmp(dev, e, nlen)) : strncmp(dev, e, nlen))
        return 0;
    if (!colon) return 1;
    char num[16];
    size_t plen = len - nlen - 1;
    if (plen == 0 || plen >= sizeof(num)) return 0;
    memcpy(num, colon + 1, plen);
    num[plen] = '\0';
    return atoi(num) == port;
}

int rcoll_vrb_hca_match(const char *filter, const char *dev, int port)
{
    if (!filter || !*filter) return 1;
    int exclude = 0, exact = 0;
    if (*filter == '^') exclude = 1, filter++;
    if (*filter == '=') exact = 1, filter++;
    int hit = 0;
    for (const char *p = filter; *p && !hit;) {
        size_t len = strcspn(p, ",");
        hit = hca_entry_match(p, len, exact, dev, port);
        p += len;
        if (*p == ',') p++;
    }
    return exclude ? !hit : hit;
}

rcoll_status_t rcoll_vrb_parse_range(const char *text, rcoll_vrb_range_t *r)
{
    memset(r, 0, sizeof(*r));
    if (!text || !*text) return RCOLL_OK;
    char addr[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t alen = slash ? (size_t)(slash - text) : strlen(text);
    if (!slash || alen == 0 || alen >= sizeof(addr))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_IB_ADDR_RANGE='%s' is not "
                             "address/prefix (10.1.0.0/16, fd00::/8)", text);
    memcpy(addr, text, alen);
    addr[alen] = '\0';
    char *end;
    long prefix = strtol(slash + 1, &end, 10);
    if (inet_pton(AF_INET, addr, r->addr) == 1) {
        r->family = AF_INET;
    } else if (inet_pton(AF_INET6, addr, r->addr) == 1) {
        r->family = AF_INET6;
    }
    int maxp = r->family == AF_INET ? 32 : 128;
    if (!r->family || *end || end == slash + 1 || prefix < 0 || prefix > maxp) {
        memset(r, 0, sizeof(*r));
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_IB_ADDR_RANGE='%s' is not "
                             "address/prefix (10.1.0.0/16, fd00::/8)", text);
    }
    r->prefix = (int)prefix;
    return RCOLL_OK;
}

static int gid_is_v4(const uint8_t *g)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g, mapped, sizeof(mapped)) == 0;
}

static int prefix_match(const uint8_t *a, const uint8_t *b, int bits)
{
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)whole)) return 0;
    if (!rest) return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

static int in_range(const uint8_t *g, const rcoll_vrb_range_t *r)
{
    if (!r || !r->family) return 1;
    if (r->family == AF_INET) return gid_is_v4(g) && prefix_match(g + 12, r->addr, r->prefix);
    return !gid_is_v4(g) && prefix_match(g, r->addr, r->prefix);
}

int rcoll_vrb_gid_pick(const struct ibv_gid_entry *e, int n, int family,
                      const rcoll_vrb_range_t *range, char *why, size_t why_len)
{
    static const uint8_t zero[16];
    int best = -1, best_score = -1, seen = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *g = e[i].gid.raw;
        if (!memcmp(g, zero, 16) || e[i].gid_type == IBV_GID_TYPE_IB) continue;
        seen++;
        if (!in_range(g, range)) continue;
        int v4 = gid_is_v4(g);
        int link_local = !v4 && g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
        int score = (e[i].gid_type == IBV_GID_TYPE_ROCE_V2) * 4 +
                    ((family == AF_INET) == v4) * 2 + !link_local;
        if (score > best_score) best = i, best_score = score;
    }
    if (why) {
        if (best < 0)
            snprintf(why, why_len, "%s", seen ? "no RoCE GID inside RCOLL_IB_ADDR_RANGE"
                                              : "no RoCE GID in the table");
        else
            snprintf(why, why_len, "%s%s%s",
                     e[best].gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1 only",
                     (best_score & 2) ? "" : ", other address family",
                     (best_score & 1) ? "" : ", link-local (nothing better)");
    }
    return best;
}

const char *rcoll_vrb_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
    if (gid_is_v4(gid)) {
        if (!inet_ntop(AF_INET, gid + 12, buf, (socklen_t)len)) snprintf(buf, len, "?");
    } else if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len)) {
        snprintf(buf, len, "?");
    }
    return buf;
}

const char *rcoll_vrb_gid_type_str(int type)
{
    switch (type) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "unknown";
    }
}

int rcoll_vrb_speed_mbps(const struct ibv_port_attr *a)
{
    int lanes;
    switch (a->active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: lanes = 1; break;
    }
    int lane;
    switch (a->active_speed) {
    case 1: lane = 2500; break;
    case 2: lane = 5000; break;
    case 4: case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    default: lane = 10000; break;
    }
    return lanes * lane;
}

/* ---------------------------------------------------------------------------------------------
 * Port discovery
 * ------------------------------------------------------------------------------------------ */

/* GID types from sysfs, for libraries without the GID table query. */
static int sysfs_gid_type(const char *dev, int port, int index)
{
    char path[PATH_MAX], text[32] = "";
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev,
             port, index);
    FILE *f = fopen(path, "r");
    if (!f) return IBV_GID_TYPE_IB;
    if (!fgets(text, sizeof(text), f)) text[0] = '\0';
    fclose(f);
    if (strstr(text, "v2")) return IBV_GID_TYPE_ROCE_V2;
    if (strstr(text, "RoCE")) return IBV_GID_TYPE_ROCE_V1;
    return IBV_GID_TYPE_IB;
}

/* The port's GID table, from the library's table query or entry by entry. */
static int read_gids(rcoll_vrb_dev_t *d, struct ibv_gid_entry *out, int max)
{
    if (rcoll_ibv->query_gid_table) {
        struct ibv_gid_entry all[MAX_GIDS];
        ssize_t n = rcoll_ibv->query_gid_table(d->ctx, all, MAX_GIDS, 0);
        int k = 0;
        for (ssize_t i = 0; i < n && k < max; i++)
            if ((int)all[i].port_num == d->port) out[k++] = all[i];
        if (n >= 0) return k;
    }
    int k = 0;
    for (int i = 0; i < d->attr.gid_tbl_len && i < max; i++) {
        union ibv_gid g;
        if (rcoll_ibv->query_gid(d->ctx, (uint8_t)d->port, i, &g)) continue;
        out[k] = (struct ibv_gid_entry){.gid = g, .gid_index = (uint32_t)i,
                                        .port_num = (uint32_t)d->port,
                                        .gid_type = (uint32_t)sysfs_gid_type(d->name, d->port, i)};
        k++;
    }
    return k;
}

int rcoll_vrb_dev_gids(int i, struct ibv_gid_entry *out, int max)
{
    return i >= 0 && i < ndevs ? read_gids(&devs[i], out, max) : 0;
}

/* Choose d's GID: RCOLL_IB_GID_INDEX, index 0 on InfiniBand, else the scored best. */
static rcoll_status_t choose_gid(rcoll_vrb_dev_t *d, const rcoll_vrb_config_t *cfg,
                                 const rcoll_vrb_range_t *range)
{
    struct ibv_gid_entry e[MAX_GIDS];
    int n = read_gids(d, e, MAX_GIDS);
    char why[96], text[INET6_ADDRSTRLEN];
    int pick = -1;
    if (cfg->ib_gid_index >= 0) {
        for (int i = 0; i < n; i++)
            if ((int)e[i].gid_index == cfg->ib_gid_index) pick = i;
        if (pick < 0)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_IB_GID_INDEX=%d: %s port %d "
                                 "has no valid GID at that index", cfg->ib_gid_index, d->name,
                                 d->port);
        snprintf(why, sizeof(why), "forced by RCOLL_IB_GID_INDEX");
    } else if (d->attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        for (int i = 0; i < n && pick < 0; i++)
            if (e[i].gid_index == 0) pick = i;
        snprintf(why, sizeof(why), "InfiniBand: LID routing, GID 0");
    } else {
        int fam = cfg->ib_addr_family == RCOLL_IB_FAMILY_IPV6 ? AF_INET6 : AF_INET;
        pick = rcoll_vrb_gid_pick(e, n, fam, range, why, sizeof(why));
    }
    if (pick < 0)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "%s port %d: %s", d->name, d->port, why);
    d->gid_index = (int)e[pick].gid_index;
    d->gid = e[pick].gid;
    d->gid_type = (int)e[pick].gid_type;
    RCOLL_INFO(VERBS, "%s port %d: GID[%d] %s (%s; %s)", d->name, d->port, d->gid_index,
               rcoll_vrb_gid_str(d->gid.raw, text, sizeof(text)),
               rcoll_vrb_gid_type_str(d->gid_type), why);
    return RCOLL_OK;
}

rcoll_status_t rcoll_vrb_dev_gid(rcoll_vrb_dev_t *d, union ibv_gid *gid, int *index, int *type)
{
    pthread_mutex_lock(&gid_lock);
    union ibv_gid now;
    rcoll_status_t st = RCOLL_OK;
    if (rcoll_ibv->query_gid(d->ctx, (uint8_t)d->port, d->gid_index, &now) != 0 ||
        memcmp(now.raw, d->gid.raw, 16)) {
        char was[INET6_ADDRSTRLEN], is[INET6_ADDRSTRLEN];
        rcoll_vrb_gid_str(d->gid.raw, was, sizeof(was));
        int old_index = d->gid_index;
        st = choose_gid(d, &cfg_copy, &range_copy);
        if (st == RCOLL_OK)
            RCOLL_WARN(VERBS, "%s port %d: GID[%d] %s is gone (the port's addresses changed); "
                       "new connections use GID[%d] %s", d->name, d->port, old_index, was,
                       d->gid_index, rcoll_vrb_gid_str(d->gid.raw, is, sizeof(is)));
        else
            rcoll_err_prefix("%s port %d: GID[%d] %s is gone and no other is usable: ",
                             d->name, d->port, old_index, was);
    }
    if (st == RCOLL_OK) {
        *gid = d->gid;
        *index = d->gid_index;
        *type = d->gid_type;
    }
    pthread_mutex_unlock(&gid_lock);
    return st;
}

static void fill_identity(rcoll_vrb_dev_t *d, struct ibv_device *dev)
{
    char link[PATH_MAX], real[PATH_MAX];
    snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device", d->name);
    if (realpath(link, real) && strlen(real) < sizeof(d->pci_path))
        memcpy(d->pci_path, real, strlen(real) + 1);
    d->guid = rcoll_ibv->get_device_guid(dev);
    d->speed_mbps = rcoll_vrb_speed_mbps(&d->attr);
}

/* Keep the active, selected ports of one opened device; returns how many were kept. */
static int add_ports(struct ibv_device *dev, struct ibv_context *ctx,
                     const struct ibv_device_attr *da, const rcoll_vrb_config_t *cfg,
                     const rcoll_vrb_range_t *range, const char *name)
{
    int kept = 0;
    struct ibv_pd *pd = NULL;
    for (int p = 1; p <= da->phys_port_cnt && ndevs < RCOLL_VRB_MAX_PORTS; p++) {
        rcoll_vrb_dev_t *d = &devs[ndevs];
        memset(d, 0, sizeof(*d));
        snprintf(d->name, sizeof(d->name), "%s", name);
        d->port = p;
        d->ctx = ctx;
        if (rcoll_ibv->query_port(ctx, (uint8_t)p, &d->attr)) continue;
        if (d->attr.state != IBV_PORT_ACTIVE) {
            RCOLL_INFO(VERBS, "%s port %d skipped: not active", name, p);
            continue;
        }
        if (!rcoll_vrb_hca_match(cfg->ib_hca, name, p)) {
            RCOLL_INFO(VERBS, "%s port %d skipped: RCOLL_IB_HCA='%s'", name, p, cfg->ib_hca);
            continue;
        }
        if (choose_gid(d, cfg, range) != RCOLL_OK) {
            RCOLL_WARN(VERBS, "%s port %d skipped: %s", name, p, rcoll_err_get());
            continue;
        }
        if (!pd) pd = rcoll_ibv->alloc_pd(ctx);
        if (!pd) {
            RCOLL_WARN(VERBS, "%s skipped: cannot allocate a protection domain", name);
            return kept;
        }
        d->pd = pd;
        d->owns_ctx = kept == 0;
        d->max_qp_wr = da->max_qp_wr;
        fill_identity(d, dev);
        d->mrs = kept == 0 ? rcoll_vrb_mr_cache_new(pd, name) : devs[ndevs - 1].mrs;
        if (!d->mrs) {
            RCOLL_WARN(VERBS, "%s skipped: out of memory", name);
            if (!kept) rcoll_ibv->dealloc_pd(pd);
            return kept;
        }
        ndevs++;
        kept++;
    }
    if (!kept && pd) rcoll_ibv->dealloc_pd(pd);
    return kept;
}

static rcoll_status_t open_devices(const rcoll_vrb_config_t *cfg, const rcoll_vrb_range_t *range)
{
    int n = 0;
    struct ibv_device **list = rcoll_ibv->get_device_list(&n);
    if (!list)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no verbs devices (device list: %s%s)",
                             strerror(errno), errno == ENOSYS ? ": this kernel has no RDMA "
                             "support" : "");
    for (int i = 0; i < n; i++) {
        const char *name = rcoll_ibv->get_device_name(list[i]);
        struct ibv_context *ctx = rcoll_ibv->open_device(list[i]);
        struct ibv_device_attr da;
        if (!ctx || rcoll_ibv->query_device(ctx, &da)) {
            RCOLL_WARN(VERBS, "%s skipped: cannot open or query it", name ? name : "?");
            if (ctx) rcoll_ibv->close_device(ctx);
            continue;
        }
        if (add_ports(list[i], ctx, &da, cfg, range, name ? name : "?") == 0) {
            rcoll_ibv->close_device(ctx);
            continue;
        }
        /* async events are read without blocking from the progress path */
        int fl = fcntl(ctx->async_fd, F_GETFL);
        if (fl >= 0) fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    }
    rcoll_ibv->free_device_list(list);
    if (ndevs == 0)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no active verbs port%s%s (%d device%s "
                             "seen)", *cfg->ib_hca ? " matches RCOLL_IB_HCA=" : "",
                             cfg->ib_hca, n, n == 1 ? "" : "s");
    return RCOLL_OK;
}

static rcoll_status_t vrb_init(const void *knobs)
{
    const rcoll_vrb_config_t *cfg = knobs;
    if (!cfg) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs init: NULL configuration");
    rcoll_vrb_range_t range;
    rcoll_status_t st = rcoll_vrb_parse_range(cfg->ib_addr_range, &range);
    if (st != RCOLL_OK) return st;
    st = rcoll_ibv_load(cfg->ibverbs_lib);
    if (st != RCOLL_OK) return st;
    cfg_copy = *cfg;
    range_copy = range;
    rcoll_vrb_cfg = &cfg_copy;
    st = open_devices(cfg, &range);
    if (st != RCOLL_OK) return st;
    inited = 1;
    return RCOLL_OK;
}

static rcoll_status_t vrb_devices(int *ndev)
{
    if (!ndev) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs devices: NULL ndev");
    *ndev = ndevs;
    return RCOLL_OK;
}

static rcoll_status_t vrb_get_props(int dev, rcoll_transport_props_t *props)
{
    if (!inited) return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "verbs get_props before init");
    if (dev < 0 || dev >= ndevs || !props)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "verbs get_props: bad device %d or NULL "
                             "props", dev);
    const rcoll_vrb_dev_t *d = &devs[dev];
    memset(props, 0, sizeof(*props));
    snprintf(props->name, sizeof(props->name), "%s", d->name);
    snprintf(props->pci_path, sizeof(props->pci_path), "%s", d->pci_path);
    props->guid = d->guid;
    /* CUDA memory where GPUDirect RDMA is possible (reg_mr makes the dma-buf itself) */
    props->ptr_support = RCOLL_PTR_HOST;
    if (rcoll_vrb_mr_gdr(d->mrs, NULL, 0)) props->ptr_support |= RCOLL_PTR_CUDA;
    props->speed_mbps = d->speed_mbps;
    props->port = d->port;
    props->latency_us = 2.0f;
    props->max_comms = 65536;
    props->max_recvs = RCOLL_TRANSPORT_MAX_RECVS;
    props->max_msg_size = RCOLL_VRB_MAX_MSG;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Async events
 * ------------------------------------------------------------------------------------------ */

static void handle_event(rcoll_vrb_dev_t *d, struct ibv_async_event *ev)
{
    char what[160];
    const char *name = rcoll_ibv->event_type_str(ev->event_type);
    switch (ev->event_type) {
    case IBV_EVENT_PORT_ACTIVE:
        for (int i = 0; i < ndevs; i++)
            if (devs[i].ctx == d->ctx && devs[i].port == ev->element.port_num && devs[i].dead) {
                devs[i].dead = 0; /* new connections may use it again */
                RCOLL_INFO(VERBS, "%s port %d is active again", devs[i].name, devs[i].port);
            }
        break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
        snprintf(what, sizeof(what), "async event on QP 0x%x: %s", ev->element.qp->qp_num,
                 name);
        rcoll_vrb_fail_matching(NULL, ev->element.qp, what);
        break;
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_DEVICE_FATAL:
        for (int i = 0; i < ndevs; i++) {
            rcoll_vrb_dev_t *o = &devs[i];
            if (o->ctx != d->ctx) continue;
            if (ev->event_type == IBV_EVENT_PORT_ERR && o->port != ev->element.port_num)
                continue;
            snprintf(o->dead_text, sizeof(o->dead_text), "local port %.48s:%d went down (async "
                     "event: %.48s)", o->name, o->port, name);
            if (!o->dead) RCOLL_WARN(VERBS, "%s", o->dead_text);
            o->dead = 1;
            rcoll_vrb_fail_matching(o, NULL, o->dead_text);
        }
        break;
    default:
        RCOLL_INFO(VERBS, "%s: async event %s", d->name, name);
        break;
    }
    rcoll_ibv->ack_async_event(ev);
}

void rcoll_vrb_poll_async(void)
{
    /* every comm's progress may call this: one look per millisecond for the process */
    static uint64_t last_ns;
    uint64_t now = rcoll_now_ns(), last = __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
    if (now - last < 1000000ull ||
        !__atomic_compare_exchange_n(&last_ns, &last, now, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    for (int i = 0; i < ndevs; i++) {
        rcoll_vrb_dev_t *d = &devs[i];
        if (!d->owns_ctx) continue;
        struct ibv_async_event ev;
        while (rcoll_ibv->get_async_event(d->ctx, &ev) == 0) handle_event(d, &ev);
    }
}

static void vrb_fini(void)
{
    rcoll_vrb_conn_fini();
    for (int i = ndevs - 1; i >= 0; i--) {
        rcoll_vrb_dev_t *d = &devs[i];
        if (!d->owns_ctx) continue;
        rcoll_vrb_mr_cache_free(d->mrs);
        rcoll_ibv->dealloc_pd(d->pd);
        rcoll_ibv->close_device(d->ctx);
    }
    ndevs = 0;
    inited = 0;
}

/* The port's link, MTU and GID table, the entry in use marked with '*'. */
static void vrb_describe(int dev, char *buf, size_t len)
{
    static const char *const ll[] = {"unspecified", "InfiniBand", "Ethernet (RoCE)"};
    size_t n = 0;
    if (len) buf[0] = '\0';
    if (!inited || dev < 0 || dev >= ndevs || !len) return;
    const rcoll_vrb_dev_t *d = &devs[dev];
    n += (size_t)snprintf(buf + n, len - n, "%s port %d: %s, MTU %d, LID %u, GIDs:\n", d->name,
                          d->port, d->attr.link_layer < 3 ? ll[d->attr.link_layer] : "?",
                          128 << d->attr.active_mtu, d->attr.lid);
    struct ibv_gid_entry e[64];
    int ng = rcoll_vrb_dev_gids(dev, e, 64);
    for (int k = 0; k < ng && n < len; k++) {
        char text[64];
        n += (size_t)snprintf(buf + n, len - n, "  %s [%u] %-40s %s\n",
                              (int)e[k].gid_index == d->gid_index ? "*" : " ", e[k].gid_index,
                              rcoll_vrb_gid_str(e[k].gid.raw, text, sizeof(text)),
                              rcoll_vrb_gid_type_str((int)e[k].gid_type));
    }
    if (n < len) {
        char why[256];
        rcoll_vrb_mr_gdr(d->mrs, why, sizeof(why));
        snprintf(buf + n, len - n, "  GPUDirect RDMA: %s\n", why);
    }
}

const rcoll_transport_ops_t rcoll_transport_verbs = {
    .name = "verbs",
    .config = &rcoll_vrb_config_table,
    .init = vrb_init,
    .devices = vrb_devices,
    .get_props = vrb_get_props,
    .describe = vrb_describe,
    .listen = rcoll_vrb_listen,
    .connect = rcoll_vrb_connect,
    .accept = rcoll_vrb_accept,
    .reg_mr = rcoll_vrb_reg_mr,
    .dereg_mr = rcoll_vrb_dereg_mr,
    .isend = rcoll_vrb_isend,
    .irecv = rcoll_vrb_irecv,
    .iflush = rcoll_vrb_iflush,
    .test = rcoll_vrb_test,
    .poke = rcoll_vrb_poke,
    .close_send = rcoll_vrb_close_comm,
    .close_recv = rcoll_vrb_close_comm,
    .close_listen = rcoll_vrb_close_listen,
    .fini = vrb_fini,
};
