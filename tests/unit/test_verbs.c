/*
 * test_verbs.c - the verbs transport without hardware: the RCOLL_IB_HCA filter, address
 * ranges, GID scoring, and, through a scripted function table, the paths no real device
 * produces on demand (no devices, a missing library, registration and CQ creation failing,
 * the registration cache's sharing), and GPUDirect RDMA's choices: the probe, RCOLL_IB_GDR,
 * CUDA memory registered by dma-buf (the CUDA side from the scripted driver library,
 * RCOLL_CUDA_LIB, where rcoll is built with CUDA) or nvidia-peermem, and the errors of each;
 * and the cache of CUDA registrations: one per allocation however many messages, checked by
 * buffer id (a freed and reallocated range never served), bounded (RCOLL_IB_MR_CACHE).
 * The real-device suite is tests/rdma/.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "cuda/gpu.h"
#include "rcoll_build.h"
#if RCOLL_HAVE_CUDA
#include "cuda/cuda_drv.h"
#endif
#include "transport/verbs.h"
#include "util/config.h"

static void test_hca_filter(void)
{
    CHECK(rcoll_vrb_hca_match("", "mlx5_0", 1), "empty passes all");
    CHECK(rcoll_vrb_hca_match("mlx5", "mlx5_3", 2), "prefix");
    CHECK(!rcoll_vrb_hca_match("mlx5", "rxe0", 1), "prefix miss");
    CHECK(rcoll_vrb_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 1), "name:port");
    CHECK(!rcoll_vrb_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 2), "other port");
    CHECK(rcoll_vrb_hca_match("mlx5_0:1,mlx5_1", "mlx5_1", 2), "second entry, any port");
    CHECK(rcoll_vrb_hca_match("mlx5_1", "mlx5_10", 1), "prefix matches mlx5_10");
    CHECK(!rcoll_vrb_hca_match("=mlx5_1", "mlx5_10", 1), "= is exact");
    CHECK(rcoll_vrb_hca_match("=mlx5_1:1", "mlx5_1", 1), "= with port");
    CHECK(!rcoll_vrb_hca_match("^rxe", "rxe1", 1), "^ excludes");
    CHECK(rcoll_vrb_hca_match("^rxe", "mlx5_0", 1), "^ keeps others");
    CHECK(!rcoll_vrb_hca_match("^=mlx5_0:1", "mlx5_0", 1), "^= exact exclusion");
    CHECK(rcoll_vrb_hca_match("^=mlx5_0:1", "mlx5_0", 2), "^= other port kept");
}

static struct ibv_gid_entry gid(const char *text, int index, int type)
{
    struct ibv_gid_entry e = {.gid_index = (uint32_t)index, .port_num = 1,
                              .gid_type = (uint32_t)type};
    struct in_addr a4;
    if (inet_pton(AF_INET, text, &a4) == 1) {
        e.gid.raw[10] = e.gid.raw[11] = 0xff;
        memcpy(e.gid.raw + 12, &a4, 4);
    } else {
        inet_pton(AF_INET6, text, e.gid.raw);
    }
    return e;
}

static void test_gid_pick(void)
{
    rcoll_vrb_range_t none = {0}, r;
    char why[96], text[64];
    struct ibv_gid_entry t[] = {
        gid("fe80::1", 0, IBV_GID_TYPE_ROCE_V1), gid("fe80::1", 1, IBV_GID_TYPE_ROCE_V2),
        gid("10.1.2.3", 2, IBV_GID_TYPE_ROCE_V1), gid("10.1.2.3", 3, IBV_GID_TYPE_ROCE_V2),
        gid("fd00::5", 4, IBV_GID_TYPE_ROCE_V2), gid("192.168.7.9", 5, IBV_GID_TYPE_ROCE_V2)};
    int n = (int)(sizeof(t) / sizeof(t[0]));
    CHECK(rcoll_vrb_gid_pick(t, n, AF_INET, &none, why, sizeof(why)) == 3,
          "v2 + IPv4 first: %s", why);
    CHECK(rcoll_vrb_gid_pick(t, n, AF_INET6, &none, why, sizeof(why)) == 4,
          "v2 + IPv6 not link-local: %s", why);
    CHECK(rcoll_vrb_parse_range("192.168.0.0/16", &r) == RCOLL_OK, "range");
    CHECK(rcoll_vrb_gid_pick(t, n, AF_INET, &r, why, sizeof(why)) == 5, "inside range: %s", why);
    CHECK(rcoll_vrb_parse_range("172.16.0.0/12", &r) == RCOLL_OK, "range");
    CHECK(rcoll_vrb_gid_pick(t, n, AF_INET, &r, why, sizeof(why)) == -1 &&
              strstr(why, "RCOLL_IB_ADDR_RANGE"), "nothing in range: %s", why);
    /* only link-local (the test VM): taken, and said so */
    CHECK(rcoll_vrb_gid_pick(t, 2, AF_INET, &none, why, sizeof(why)) == 1 &&
              strstr(why, "link-local"), "link-local fallback: %s", why);
    struct ibv_gid_entry ib = gid("fe80::2", 0, IBV_GID_TYPE_IB);
    CHECK(rcoll_vrb_gid_pick(&ib, 1, AF_INET, &none, why, sizeof(why)) == -1, "IB GIDs are "
          "not RoCE");
    CHECK(!strcmp(rcoll_vrb_gid_str(t[3].gid.raw, text, sizeof(text)), "10.1.2.3"), "%s", text);
    CHECK(!strcmp(rcoll_vrb_gid_str(t[1].gid.raw, text, sizeof(text)), "fe80::1"), "%s", text);
    CHECK(rcoll_vrb_parse_range("10.0.0.0", &r) == RCOLL_ERR_INVALID_ARG, "no prefix");
    CHECK(rcoll_vrb_parse_range("10.0.0.0/33", &r) == RCOLL_ERR_INVALID_ARG, "prefix too long");
    CHECK(rcoll_vrb_parse_range("nonsense/8", &r) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_err_get(), "nonsense"), "bad address named");
    CHECK(rcoll_vrb_parse_range("fd00::/8", &r) == RCOLL_OK && r.family == AF_INET6, "v6");
}

/* ---- scripted backend: one RoCE device "fake0" with one active port ---- */

static struct ibv_device fake_dev;
static struct ibv_context fake_ctx;
static struct ibv_pd fake_pd = {.context = &fake_ctx};
static int ndevices = 1, reg_fail, regs, deregs;

static struct ibv_device **s_get_device_list(int *num)
{
    static struct ibv_device *list[2];
    list[0] = ndevices ? &fake_dev : NULL;
    *num = ndevices;
    return list;
}
static void s_free_device_list(struct ibv_device **l) { (void)l; }
static const char *s_get_device_name(struct ibv_device *d) { (void)d; return "fake0"; }
static __be64 s_get_device_guid(struct ibv_device *d) { (void)d; return 0x1234; }
static struct ibv_context *s_open_device(struct ibv_device *d)
{
    (void)d;
    fake_ctx.async_fd = -1;
    return &fake_ctx;
}
static int s_close_device(struct ibv_context *c) { (void)c; return 0; }
static int s_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    (void)c;
    memset(a, 0, sizeof(*a));
    a->phys_port_cnt = 1;
    a->max_qp_wr = 4096;
    return 0;
}
static int s_query_port(struct ibv_context *c, uint8_t p, struct ibv_port_attr *a)
{
    (void)c, (void)p;
    memset(a, 0, sizeof(*a));
    a->state = IBV_PORT_ACTIVE;
    a->link_layer = IBV_LINK_LAYER_ETHERNET;
    a->active_mtu = IBV_MTU_1024;
    a->active_width = 2;
    a->active_speed = 32;
    a->gid_tbl_len = 2;
    return 0;
}
/* The port's RoCE v2 address (GID index 1); "" once the port has none (a flap). */
static char v2_addr[64] = "10.9.8.7";
static ssize_t s_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e, size_t max,
                                 uint32_t flags)
{
    (void)c, (void)flags;
    if (max < 2) return -1;
    e[0] = gid("fe80::7", 0, IBV_GID_TYPE_ROCE_V1);
    if (!v2_addr[0]) return 1;
    e[1] = gid(v2_addr, 1, IBV_GID_TYPE_ROCE_V2);
    return 2;
}
static int s_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *g)
{
    struct ibv_gid_entry e[2];
    ssize_t n = s_query_gid_table(c, e, 2, 0);
    (void)port;
    if (index < 0 || index >= n) return EINVAL;
    *g = e[index].gid;
    return 0;
}
static struct ibv_pd *s_alloc_pd(struct ibv_context *c) { (void)c; return &fake_pd; }
static int s_dealloc_pd(struct ibv_pd *pd) { (void)pd; return 0; }
static struct ibv_mr *s_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    (void)access;
    if (reg_fail) {
        errno = ENOMEM;
        return NULL;
    }
    struct ibv_mr *m = calloc(1, sizeof(*m));
    *m = (struct ibv_mr){.pd = pd, .addr = addr, .length = len, .lkey = 1, .rkey = 2};
    regs++;
    return m;
}
static int s_dereg_mr(struct ibv_mr *m)
{
    free(m);
    deregs++;
    return 0;
}
/* ibv_reg_dmabuf_mr: the probe (fd -1) gets dmabuf_probe_errno; a registration is recorded
 * (fd open at the call, its arguments) and fails with ENOMEM when reg_fail is set. */
static int dmabuf_probe_errno = EBADF, dmabuf_regs, dmabuf_fd = -1, dmabuf_fd_open;
static uint64_t dmabuf_off, dmabuf_iova;
static size_t dmabuf_len;
static struct ibv_mr *s_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len,
                                      uint64_t iova, int fd, int access)
{
    (void)access;
    if (fd < 0) {
        errno = dmabuf_probe_errno;
        return NULL;
    }
    dmabuf_fd = fd;
    dmabuf_fd_open = fcntl(fd, F_GETFD) >= 0;
    dmabuf_off = off, dmabuf_len = len, dmabuf_iova = iova;
    if (reg_fail) {
        errno = ENOMEM;
        return NULL;
    }
    struct ibv_mr *m = calloc(1, sizeof(*m));
    *m = (struct ibv_mr){.pd = pd, .addr = (void *)(uintptr_t)iova, .length = len, .lkey = 3,
                         .rkey = 4};
    dmabuf_regs++;
    return m;
}

static struct ibv_cq *s_create_cq(struct ibv_context *c, int n, void *x,
                                  struct ibv_comp_channel *ch, int v)
{
    (void)c, (void)n, (void)x, (void)ch, (void)v;
    errno = ENOMEM; /* the failure under test */
    return NULL;
}
static const char *s_event_str(enum ibv_event_type t) { (void)t; return "event"; }
static int s_get_async_event(struct ibv_context *c, struct ibv_async_event *e)
{
    (void)c, (void)e;
    errno = EAGAIN;
    return -1;
}

static const rcoll_ibv_api_t scripted = {
    .get_device_list = s_get_device_list, .free_device_list = s_free_device_list,
    .get_device_name = s_get_device_name, .get_device_guid = s_get_device_guid,
    .open_device = s_open_device, .close_device = s_close_device,
    .query_device = s_query_device, .query_port = s_query_port,
    .query_gid_table = s_query_gid_table, .query_gid = s_query_gid,
    .alloc_pd = s_alloc_pd, .dealloc_pd = s_dealloc_pd,
    .reg_mr = s_reg_mr, .dereg_mr = s_dereg_mr, .create_cq = s_create_cq,
    .get_async_event = s_get_async_event, .event_type_str = s_event_str,
};

static void test_scripted(rcoll_vrb_config_t *cfg)
{
    const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
    rcoll_ibv_set_api(&scripted);

    ndevices = 0;
    CHECK(T->init(cfg) == RCOLL_ERR_UNSUPPORTED && strstr(rcoll_err_get(), "no active"),
          "no devices is 'unsupported'");
    T->fini();

    ndevices = 1;
    snprintf(cfg->ib_hca, sizeof(cfg->ib_hca), "^fake");
    CHECK(T->init(cfg) == RCOLL_ERR_UNSUPPORTED && strstr(rcoll_err_get(), "RCOLL_IB_HCA"),
          "filtered away, and the message says by what");
    T->fini();
    cfg->ib_hca[0] = '\0';

    CHECK(T->init(cfg) == RCOLL_OK, "scripted device");
    int n = 0;
    T->devices(&n);
    rcoll_transport_props_t p;
    CHECK(n == 1 && T->get_props(0, &p) == RCOLL_OK && !strcmp(p.name, "fake0") &&
              p.speed_mbps == 100000, "one port, 4x25G: %d %s %d", n, p.name, p.speed_mbps);
    const rcoll_vrb_dev_t *d = rcoll_vrb_dev(0);
    CHECK(d && d->gid_index == 1, "RoCE v2 IPv4 GID chosen");

    /* registration cache: sharing, references, failure text */
    rcoll_vrb_mr_cache_t *mrs = d->mrs;
    char *buf = aligned_alloc(4096, 4 * 4096);
    rcoll_vrb_mr_t *a, *b, *c;
    CHECK(rcoll_vrb_mr_get(mrs, buf + 10, 3 * 4096, RCOLL_PTR_HOST, &a) == RCOLL_OK, "get a");
    CHECK(a->start == (uintptr_t)buf && a->end == (uintptr_t)buf + 4 * 4096, "page-rounded");
    CHECK(rcoll_vrb_mr_get(mrs, buf + 4096, 100, RCOLL_PTR_HOST, &b) == RCOLL_OK && a == b &&
              regs == 1, "inside: shared");
    reg_fail = 1;
    CHECK(rcoll_vrb_mr_get(mrs, buf + 8 * 4096, 10, RCOLL_PTR_HOST, &c) == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_err_get(), "cannot register"), "failure named");
    reg_fail = 0;
    rcoll_vrb_mr_put(mrs, a);
    CHECK(deregs == 0, "still referenced");
    rcoll_vrb_mr_put(mrs, b);
    CHECK(deregs == 1 && rcoll_vrb_mr_count(mrs) == 0, "last reference deregisters");
    free(buf);

    /* a verb failing during connection setup: a clear error, nothing leaked */
    char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    void *lc = NULL, *sc = NULL;
    CHECK(T->listen(0, handle, &lc) == RCOLL_OK, "listen");
    rcoll_status_t st = T->connect(0, handle, &sc);
    CHECK(st == RCOLL_ERR_SYSTEM && strstr(rcoll_err_get(), "CQ") &&
              strstr(rcoll_err_get(), "fake0"), "CQ creation failure: %d", st);
    T->close_listen(lc);
    T->fini();
    rcoll_ibv_set_api(NULL);
}

/* A registration used by a comm that moved to another device (failover): the other device's
 * copy is made once, kept with the original, reused, and goes with it. */
static void test_mr_on(rcoll_vrb_config_t *cfg)
{
    const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
    rcoll_ibv_set_api(&scripted);
    cfg->ib_hca[0] = '\0';
    if (T->init(cfg) != RCOLL_OK) {
        CHECK(0, "init: %s", rcoll_err_get());
        return;
    }
    static struct ibv_pd other_pd = {.context = &fake_ctx};
    rcoll_vrb_mr_cache_t *a = rcoll_vrb_dev(0)->mrs, *b = rcoll_vrb_mr_cache_new(&other_pd,
                                                                                  "fake1");
    char *buf = aligned_alloc(4096, 2 * 4096);
    rcoll_vrb_mr_t *m = NULL, *x = NULL, *y = NULL;
    int r0 = regs, d0 = deregs;
    CHECK(b && rcoll_vrb_mr_get(a, buf, 2 * 4096, RCOLL_PTR_HOST, &m) == RCOLL_OK, "get m");
    CHECK(m && rcoll_vrb_mr_on(b, m, &x) == RCOLL_OK && x && x->cache == b &&
              x->start == m->start && x->end == m->end && regs == r0 + 2,
          "on the other device: a registration of the same pages there (%d new)", regs - r0);
    if (x) rcoll_vrb_mr_put(b, x);
    CHECK(rcoll_vrb_mr_count(b) == 1 && deregs == d0, "kept with m after its use");
    CHECK(m && rcoll_vrb_mr_on(b, m, &y) == RCOLL_OK && y == x && regs == r0 + 2,
          "the next message reuses it");
    if (y) rcoll_vrb_mr_put(b, y);
    if (m) rcoll_vrb_mr_put(a, m);
    CHECK(deregs == d0 + 2 && rcoll_vrb_mr_count(a) == 0 && rcoll_vrb_mr_count(b) == 0,
          "both go with m's last reference (%d deregistered)", deregs - d0);
    free(buf);
    rcoll_vrb_mr_cache_free(b);
    T->fini();
    rcoll_ibv_set_api(NULL);
}

/* A port whose addresses changed after init (a flap): each new connection reads the GID
 * again and chooses anew when the chosen one is gone; none left is a clear error. */
static void test_gid_changed(rcoll_vrb_config_t *cfg)
{
    const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
    rcoll_ibv_set_api(&scripted);
    cfg->ib_hca[0] = '\0';
    snprintf(v2_addr, sizeof(v2_addr), "10.9.8.7");
    if (T->init(cfg) != RCOLL_OK) {
        CHECK(0, "init: %s", rcoll_err_get());
        return;
    }
    rcoll_vrb_dev_t *d = rcoll_vrb_dev(0);
    union ibv_gid g;
    int index = -1, type = -1;
    char text[64];
    rcoll_status_t st = rcoll_vrb_dev_gid(d, &g, &index, &type);
    CHECK(st == RCOLL_OK && index == 1 &&
              !strcmp(rcoll_vrb_gid_str(g.raw, text, sizeof(text)), "10.9.8.7"),
          "unchanged: GID[%d] %s", index, text);
    snprintf(v2_addr, sizeof(v2_addr), "10.9.8.99"); /* the interface got a new address */
    st = rcoll_vrb_dev_gid(d, &g, &index, &type);
    CHECK(st == RCOLL_OK && index == 1 && type == IBV_GID_TYPE_ROCE_V2 &&
              !strcmp(rcoll_vrb_gid_str(g.raw, text, sizeof(text)), "10.9.8.99"),
          "a new address at the same index is taken: GID[%d] %s", index, text);
    v2_addr[0] = '\0'; /* no RoCE v2 address at all: the v1 one is what is left */
    st = rcoll_vrb_dev_gid(d, &g, &index, &type);
    CHECK(st == RCOLL_OK && index == 0 && type == IBV_GID_TYPE_ROCE_V1,
          "the address gone: GID[%d] (type %d) chosen instead", index, type);
    /* forced to an index that no longer holds a GID: a sentence, not a stale GID */
    cfg->ib_gid_index = 1;
    T->fini();
    snprintf(v2_addr, sizeof(v2_addr), "10.9.8.7");
    if (T->init(cfg) == RCOLL_OK) {
        v2_addr[0] = '\0';
        st = rcoll_vrb_dev_gid(rcoll_vrb_dev(0), &g, &index, &type);
        CHECK(st == RCOLL_ERR_INVALID_ARG && strstr(rcoll_err_get(), "GID[1] 10.9.8.7 is gone") &&
                  strstr(rcoll_err_get(), "RCOLL_IB_GID_INDEX=1"),
              "forced index emptied: %d %s", st, rcoll_err_get());
    } else {
        CHECK(0, "init with RCOLL_IB_GID_INDEX=1: %s", rcoll_err_get());
    }
    cfg->ib_gid_index = -1;
    snprintf(v2_addr, sizeof(v2_addr), "10.9.8.7");
    T->fini();
    rcoll_ibv_set_api(NULL);
}

/* Which methods RCOLL_IB_GDR allows for each probe result, and the sentences. */
static void test_gdr_methods(void)
{
    char why[256];
    rcoll_vrb_gdr_probe_t none = {0, EOPNOTSUPP, 0}, dmabuf = {1, EBADF, 0},
                          peer = {0, EOPNOTSUPP, 1}, both = {1, EBADF, 1}, old = {0, 0, 0};
    CHECK(rcoll_vrb_gdr_methods(&none, RCOLL_IB_GDR_AUTO, "d0", why, sizeof(why)) == 0 &&
              strstr(why, "d0 registers no CUDA memory: its kernel driver takes no dma-buf "
                          "(Operation not supported), and nvidia-peermem is not loaded"),
          "auto, nothing: %s", why);
    CHECK(rcoll_vrb_gdr_methods(&old, RCOLL_IB_GDR_AUTO, "d0", why, sizeof(why)) == 0 &&
              strstr(why, "no ibv_reg_dmabuf_mr"), "auto, old libibverbs: %s", why);
    CHECK(rcoll_vrb_gdr_methods(&dmabuf, RCOLL_IB_GDR_AUTO, "d0", why, sizeof(why)) ==
                  RCOLL_VRB_GDR_DMABUF && !strcmp(why, "d0 registers CUDA memory by dma-buf"),
          "auto, dma-buf: %s", why);
    CHECK(rcoll_vrb_gdr_methods(&peer, RCOLL_IB_GDR_AUTO, "d0", why, sizeof(why)) ==
                  RCOLL_VRB_GDR_PEERMEM && strstr(why, "by nvidia-peermem") &&
              !strstr(why, "not seen"), "auto, peermem: %s", why);
    CHECK(rcoll_vrb_gdr_methods(&both, RCOLL_IB_GDR_AUTO, "d0", why, sizeof(why)) ==
                  (RCOLL_VRB_GDR_DMABUF | RCOLL_VRB_GDR_PEERMEM) &&
              strstr(why, "by dma-buf, else by nvidia-peermem"), "auto, both: %s", why);
    CHECK(rcoll_vrb_gdr_methods(&both, RCOLL_IB_GDR_OFF, "d0", why, sizeof(why)) == 0 &&
              strstr(why, "RCOLL_IB_GDR=off"), "off: %s", why);
    CHECK(rcoll_vrb_gdr_methods(&both, RCOLL_IB_GDR_DMABUF, "d0", NULL, 0) ==
              RCOLL_VRB_GDR_DMABUF, "dmabuf only");
    CHECK(rcoll_vrb_gdr_methods(&peer, RCOLL_IB_GDR_DMABUF, "d0", why, sizeof(why)) == 0 &&
              strstr(why, "RCOLL_IB_GDR=dmabuf, and its kernel driver takes no dma-buf"),
          "dmabuf forced where the driver has none: %s", why);
    CHECK(rcoll_vrb_gdr_methods(&none, RCOLL_IB_GDR_PEERMEM, "d0", why, sizeof(why)) ==
                  RCOLL_VRB_GDR_PEERMEM && strstr(why, "the module was not seen"),
          "peermem forced: %s", why);
}

/* The transport end to end with the scripted table: the probe at init, the properties,
 * rcoll-info's line, and CUDA registrations by each method with their failures. */
static void test_gdr_scripted(rcoll_vrb_config_t *cfg)
{
    const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
    rcoll_ibv_api_t table = scripted;
    rcoll_transport_props_t p;
    char text[2048];
    rcoll_ibv_set_api(&table); /* no ibv_reg_dmabuf_mr: a libibverbs before rdma-core 34 */
    CHECK(T->init(cfg) == RCOLL_OK && T->get_props(0, &p) == RCOLL_OK &&
              p.ptr_support == RCOLL_PTR_HOST, "no dma-buf verb, no peermem: host only");
    T->describe(0, text, sizeof(text));
    CHECK(strstr(text, "GPUDirect RDMA: fake0 registers no CUDA memory: libibverbs has no "
                       "ibv_reg_dmabuf_mr"), "rcoll-info says why: %s", text);
    T->fini();

    table.reg_dmabuf_mr = s_reg_dmabuf_mr;
    dmabuf_probe_errno = EOPNOTSUPP;
    CHECK(T->init(cfg) == RCOLL_OK && T->get_props(0, &p) == RCOLL_OK &&
              p.ptr_support == RCOLL_PTR_HOST, "driver without dma-buf: host only");
    rcoll_vrb_mr_t *m = NULL;
    rcoll_status_t st = rcoll_vrb_mr_get(rcoll_vrb_dev(0)->mrs, (void *)0x10000, 4096,
                                         RCOLL_PTR_CUDA, &m);
    CHECK(st == RCOLL_ERR_UNSUPPORTED && strstr(rcoll_err_get(), "takes no dma-buf (Operation "
                                                "not supported)"), "CUDA refused: %s",
          rcoll_err_get());
    T->fini();

    dmabuf_probe_errno = EBADF;
    CHECK(T->init(cfg) == RCOLL_OK && T->get_props(0, &p) == RCOLL_OK &&
              p.ptr_support == (RCOLL_PTR_HOST | RCOLL_PTR_CUDA), "dma-buf: CUDA supported");
    T->describe(0, text, sizeof(text));
    CHECK(strstr(text, "GPUDirect RDMA: fake0 registers CUDA memory by dma-buf"), "%s", text);
    rcoll_vrb_mr_cache_t *mrs = rcoll_vrb_dev(0)->mrs;
    rcoll_vrb_config_t *live = (rcoll_vrb_config_t *)rcoll_vrb_cfg;

    /* the CUDA side: device memory from the scripted driver library */
    static rcoll_gpu_config_t gcfg;
    char *dev = NULL;
    if (!getenv("RCOLL_CUDA_LIB")) {
        check_skip("dma-buf registration of device memory: no scripted CUDA driver here "
                   "(RCOLL_CUDA_LIB unset: rcoll built without CUDA)");
    } else if (rcoll_config_parse(&rcoll_gpu_config_table, &gcfg) != RCOLL_OK ||
               rcoll_gpu_load(&gcfg) != RCOLL_OK || rcoll_gpu_set_device(0) != RCOLL_OK ||
               rcoll_gpu_mem_alloc((void **)&dev, 3 * 4096, 0) != RCOLL_OK) {
        CHECK(0, "scripted CUDA device memory: %s", rcoll_err_get());
    } else {
        st = rcoll_vrb_mr_get(mrs, dev + 100, 5000, RCOLL_PTR_CUDA, &m);
        CHECK(st == RCOLL_OK && m->method == RCOLL_VRB_GDR_DMABUF && dmabuf_regs == 1,
              "device memory registered by dma-buf");
        CHECK(dmabuf_off == 0 && dmabuf_len == 3 * 4096 && dmabuf_iova == (uintptr_t)dev,
              "the whole allocation, the dma-buf from its start, addressed by the device pointer "
              "(offset %llu len %zu iova %#llx)", (unsigned long long)dmabuf_off, dmabuf_len,
              (unsigned long long)dmabuf_iova);
        CHECK(dmabuf_fd_open && fcntl(dmabuf_fd, F_GETFD) < 0 && errno == EBADF,
              "the dma-buf descriptor was open for the call and closed after it");
        rcoll_vrb_mr_t *again = NULL;
        CHECK(rcoll_vrb_mr_get(mrs, dev + 4096, 10, RCOLL_PTR_CUDA, &again) == RCOLL_OK &&
                  again == m && dmabuf_regs == 1, "inside: the cached registration");
        rcoll_vrb_mr_t *host = NULL;
        int regs0 = regs;
        CHECK(rcoll_vrb_mr_get(mrs, dev + 4096, 10, RCOLL_PTR_HOST, &host) == RCOLL_OK &&
                  host != m && regs == regs0 + 1, "the same range as host memory: its own");
        rcoll_vrb_mr_put(mrs, host);
        rcoll_vrb_mr_put(mrs, again);
        rcoll_vrb_mr_put(mrs, m);
        CHECK(rcoll_vrb_mr_count(mrs) == 1 && rcoll_vrb_mr_cached(mrs) == 1 && deregs ==
                  regs0 + 1, "all released: the host one deregistered, the CUDA one cached");

        /* the failures below need a registration to be made: another allocation */
        rcoll_gpu_mem_free(dev);
        if (rcoll_gpu_mem_alloc((void **)&dev, 4096, 0) != RCOLL_OK) {
            CHECK(0, "scripted CUDA device memory: %s", rcoll_err_get());
            goto gpu_done;
        }
        reg_fail = 1;
        st = rcoll_vrb_mr_get(mrs, dev, 4096, RCOLL_PTR_CUDA, &m);
        CHECK(st == RCOLL_ERR_SYSTEM && strstr(rcoll_err_get(), "cannot register 4096 bytes "
                                                "of CUDA memory") &&
                  strstr(rcoll_err_get(), "ibv_reg_dmabuf_mr failed: Cannot allocate memory") &&
                  fcntl(dmabuf_fd, F_GETFD) < 0, "NIC refusal named, descriptor closed: %s",
              rcoll_err_get());
        reg_fail = 0;

        setenv("CUDA_SCRIPT_NO_DMABUF", "1", 1);
        st = rcoll_vrb_mr_get(mrs, dev, 4096, RCOLL_PTR_CUDA, &m);
        CHECK(st == RCOLL_ERR_SYSTEM && strstr(rcoll_err_get(), "cannot export dma-bufs"),
              "a GPU without dma-buf export: %s", rcoll_err_get());
        /* then nvidia-peermem (forced here: no module on this machine) */
        live->ib_gdr = RCOLL_IB_GDR_PEERMEM;
        int regs1 = regs;
        st = rcoll_vrb_mr_get(mrs, dev, 4096, RCOLL_PTR_CUDA, &m);
        CHECK(st == RCOLL_OK && m->method == RCOLL_VRB_GDR_PEERMEM && regs == regs1 + 1 &&
                  m->mr->addr == dev, "peermem: ibv_reg_mr on the device pointer");
        if (st == RCOLL_OK) rcoll_vrb_mr_put(mrs, m);
        rcoll_gpu_mem_free(dev); /* that one is cached now: another to fail on */
        CHECK(rcoll_gpu_mem_alloc((void **)&dev, 4096, 0) == RCOLL_OK,
              "scripted CUDA device memory: %s", rcoll_err_get());
        reg_fail = 1;
        st = rcoll_vrb_mr_get(mrs, dev, 4096, RCOLL_PTR_CUDA, &m);
        CHECK(st == RCOLL_ERR_SYSTEM && strstr(rcoll_err_get(), "nvidia-peermem: ibv_reg_mr on "
                                                "the device pointer failed"),
              "peermem refusal named: %s", rcoll_err_get());
        reg_fail = 0;
        unsetenv("CUDA_SCRIPT_NO_DMABUF");
        live->ib_gdr = RCOLL_IB_GDR_AUTO;
        rcoll_gpu_mem_free(dev);
    }
gpu_done:
    live->ib_gdr = RCOLL_IB_GDR_OFF;
    CHECK(T->get_props(0, &p) == RCOLL_OK && p.ptr_support == RCOLL_PTR_HOST &&
              rcoll_vrb_mr_get(mrs, (void *)0x10000, 1, RCOLL_PTR_CUDA, &m) ==
                  RCOLL_ERR_UNSUPPORTED && strstr(rcoll_err_get(), "RCOLL_IB_GDR=off"),
          "RCOLL_IB_GDR=off: host only, CUDA refused saying so");
    live->ib_gdr = RCOLL_IB_GDR_AUTO;
    T->fini();
    rcoll_ibv_set_api(NULL);
}

/* ---- the registration cache of CUDA memory (GPUDirect RDMA by dma-buf) ---- */

/* Device memory from the scripted CUDA driver library (RCOLL_CUDA_LIB), made current. */
static int cuda_ready(void)
{
    static rcoll_gpu_config_t gcfg;
    if (!getenv("RCOLL_CUDA_LIB")) {
        check_skip("registration cache of device memory: no scripted CUDA driver here "
                   "(RCOLL_CUDA_LIB unset: rcoll built without CUDA)");
        return 0;
    }
    if (rcoll_config_parse(&rcoll_gpu_config_table, &gcfg) != RCOLL_OK ||
        rcoll_gpu_load(&gcfg) != RCOLL_OK || rcoll_gpu_set_device(0) != RCOLL_OK) {
        CHECK(0, "scripted CUDA driver: %s", rcoll_err_get());
        return 0;
    }
    return 1;
}

#if RCOLL_HAVE_CUDA
/* The scripted driver library never hands out an address twice.  A freed allocation whose
 * range the driver hands out again is made here by wrapping its cuPointerGetAttributes:
 * id_bump is added to every buffer id it reports, so raising it is, to whoever asks, every
 * allocation freed and made again at the same range. */
static const rcoll_cu_api_t *real_cu;
static rcoll_cu_api_t bumped_cu;
static unsigned long long id_bump;
static long attr_calls;
static CUresult bump_attrs(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    attr_calls++;
    CUresult res = real_cu->cuPointerGetAttributes(n, attrs, data, p);
    for (unsigned i = 0; res == CUDA_SUCCESS && i < n; i++)
        if (attrs[i] == CU_POINTER_ATTRIBUTE_BUFFER_ID && *(unsigned long long *)data[i])
            *(unsigned long long *)data[i] += id_bump;
    return res;
}
static int bump_install(void)
{
    real_cu = rcoll_cu;
    bumped_cu = *real_cu;
    bumped_cu.cuPointerGetAttributes = bump_attrs;
    return rcoll_cu_set_api(&bumped_cu) == RCOLL_OK;
}
static void bump_remove(void) { rcoll_cu_set_api(real_cu); }
#else
static unsigned long long id_bump;
static long attr_calls;
static int bump_install(void) { return 0; }
static void bump_remove(void) {}
#endif

/* One message on a CUDA buffer as the data path takes its registration: the core registers
 * the buffer for the operation (core/progress.c, reg_mr with RCOLL_PTR_CUDA), isend/irecv
 * reference it for the request (verbs_data.c buf_mr), the request completes (req_put), the
 * core drops its registration (dereg_mr). */
static rcoll_status_t one_message(rcoll_vrb_comm_t *comm, void *buf, size_t len)
{
    void *mh = NULL;
    rcoll_status_t st = rcoll_vrb_reg_mr(comm, buf, len, RCOLL_PTR_CUDA, &mh);
    if (st != RCOLL_OK) return st;
    rcoll_vrb_mr_ref(comm->dev->mrs, mh);
    rcoll_vrb_mr_put(comm->dev->mrs, mh);
    return rcoll_vrb_dereg_mr(comm, mh);
}

static void test_gdr_cache(rcoll_vrb_config_t *cfg)
{
    const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
    rcoll_ibv_api_t table = scripted;
    table.reg_dmabuf_mr = s_reg_dmabuf_mr;
    dmabuf_probe_errno = EBADF;
    rcoll_ibv_set_api(&table);
    int live0 = regs + dmabuf_regs - deregs;
    CHECK(T->init(cfg) == RCOLL_OK, "scripted device with dma-buf");
    static rcoll_vrb_comm_t comm;
    comm.dev = rcoll_vrb_dev(0);
    char *dev = NULL;
    if (!comm.dev || !cuda_ready()) goto out;
    if (rcoll_gpu_mem_alloc((void **)&dev, 4 * 4096, 0) != RCOLL_OK) {
        CHECK(0, "scripted device memory: %s", rcoll_err_get());
        goto out;
    }
    /* n messages on one buffer: one registration */
    int regs0 = dmabuf_regs, deregs0 = deregs;
    rcoll_status_t st = RCOLL_OK;
    for (int i = 0; i < 100 && st == RCOLL_OK; i++)
        st = one_message(&comm, dev + (i % 10) * 1000, 1000 + i);
    CHECK(st == RCOLL_OK && dmabuf_regs - regs0 == 1 && deregs == deregs0,
          "100 messages on one CUDA buffer: %d registrations, %d deregistrations (want 1, 0)",
          dmabuf_regs - regs0, deregs - deregs0);
    CHECK(rcoll_vrb_mr_count(comm.dev->mrs) == 1 && rcoll_vrb_mr_cached(comm.dev->mrs) == 1,
          "kept in the cache");

    if (!bump_install()) {
        CHECK(0, "wrapping the scripted driver: %s", rcoll_err_get());
        goto out_free;
    }
    rcoll_vrb_mr_cache_t *mrs = comm.dev->mrs;
    rcoll_vrb_mr_t *m = NULL, *m2 = NULL;
    /* a hit costs one driver call (the buffer id), no registration */
    long calls0 = attr_calls;
    regs0 = dmabuf_regs;
    for (int i = 0; i < 10 && st == RCOLL_OK; i++) st = one_message(&comm, dev + 5000, 100);
    CHECK(st == RCOLL_OK && attr_calls - calls0 == 10 && dmabuf_regs == regs0,
          "a hit: one cuPointerGetAttributes (%ld for 10), no registration",
          attr_calls - calls0);

    /* freed and allocated again at the same range (a new buffer id): the old registration is
     * deregistered and a new one made, never the old one used */
    id_bump = 1000;
    regs0 = dmabuf_regs, deregs0 = deregs;
    st = rcoll_vrb_mr_get(mrs, dev + 100, 100, RCOLL_PTR_CUDA, &m);
    CHECK(st == RCOLL_OK && deregs == deregs0 + 1 && dmabuf_regs == regs0 + 1 &&
              m->buffer_id > 1000 && rcoll_vrb_mr_count(mrs) == 1,
          "reallocated: old registration dropped (%d), a new one made (%d)", deregs - deregs0,
          dmabuf_regs - regs0);
    /* the same while a request still holds the old one: it stays for that request only */
    id_bump = 2000;
    regs0 = dmabuf_regs, deregs0 = deregs;
    st = rcoll_vrb_mr_get(mrs, dev + 100, 100, RCOLL_PTR_CUDA, &m2);
    CHECK(st == RCOLL_OK && m2 != m && m2->buffer_id > 2000 && dmabuf_regs == regs0 + 1 &&
              deregs == deregs0 && rcoll_vrb_mr_count(mrs) == 2 && rcoll_vrb_mr_cached(mrs) == 1,
          "reallocated while in use: a new registration, the old one kept for its holder");
    rcoll_vrb_mr_t *m3 = NULL;
    CHECK(rcoll_vrb_mr_get(mrs, dev, 10, RCOLL_PTR_CUDA, &m3) == RCOLL_OK && m3 == m2,
          "the old one is never found again");
    rcoll_vrb_mr_put(mrs, m3);
    rcoll_vrb_mr_put(mrs, m);
    CHECK(deregs == deregs0 + 1 && rcoll_vrb_mr_count(mrs) == 1,
          "the old one deregistered with its last reference");
    rcoll_vrb_mr_put(mrs, m2);
    CHECK(deregs == deregs0 + 1 && rcoll_vrb_mr_count(mrs) == 1, "the new one cached");
    id_bump = 0;
    bump_remove();

out_free:
    rcoll_gpu_mem_free(dev);
out:
    T->fini();
    CHECK(regs + dmabuf_regs - deregs == live0, "fini deregisters everything (%d left)",
          regs + dmabuf_regs - deregs - live0);
    rcoll_ibv_set_api(NULL);
}

/* The bound (RCOLL_IB_MR_CACHE): least recently used idle entries are replaced, entries in
 * use never; with every entry in use a registration is made uncached. */
static void test_gdr_cache_bound(rcoll_vrb_config_t *cfg)
{
    const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
    rcoll_ibv_api_t table = scripted;
    table.reg_dmabuf_mr = s_reg_dmabuf_mr;
    dmabuf_probe_errno = EBADF;
    rcoll_ibv_set_api(&table);
    int live0 = regs + dmabuf_regs - deregs, saved = cfg->ib_mr_cache;
    cfg->ib_mr_cache = 4;
    CHECK(T->init(cfg) == RCOLL_OK, "scripted device with dma-buf, RCOLL_IB_MR_CACHE=4");
    const rcoll_vrb_dev_t *d = rcoll_vrb_dev(0);
    enum { NB = 6 };
    char *b[NB] = {0};
    rcoll_vrb_mr_t *m[NB] = {0}, *x = NULL;
    if (!d || !cuda_ready()) goto out;
    rcoll_vrb_mr_cache_t *mrs = d->mrs;
    for (int i = 0; i < NB; i++) {
        if (rcoll_gpu_mem_alloc((void **)&b[i], 2 * 4096, 0) != RCOLL_OK) {
            CHECK(0, "scripted device memory: %s", rcoll_err_get());
            goto out_free;
        }
    }
    /* b0..b3 fill the cache; b0 used again, so b1 is the least recently used */
    int regs0 = dmabuf_regs, deregs0 = deregs;
    for (int i = 0; i < 4; i++) {
        CHECK(rcoll_vrb_mr_get(mrs, b[i], 10, RCOLL_PTR_CUDA, &x) == RCOLL_OK, "get b%d", i);
        rcoll_vrb_mr_put(mrs, x);
    }
    CHECK(rcoll_vrb_mr_get(mrs, b[0], 10, RCOLL_PTR_CUDA, &x) == RCOLL_OK, "b0 again");
    rcoll_vrb_mr_put(mrs, x);
    CHECK(dmabuf_regs == regs0 + 4 && deregs == deregs0 && rcoll_vrb_mr_cached(mrs) == 4,
          "four buffers, four registrations, all kept");
    /* bound + 1: one eviction, of b1 */
    CHECK(rcoll_vrb_mr_get(mrs, b[4], 10, RCOLL_PTR_CUDA, &m[4]) == RCOLL_OK &&
              dmabuf_regs == regs0 + 5 && deregs == deregs0 + 1 &&
              rcoll_vrb_mr_cached(mrs) == 4 && rcoll_vrb_mr_count(mrs) == 4,
          "bound + 1 buffers: one eviction (%d)", deregs - deregs0);
    CHECK(rcoll_vrb_mr_get(mrs, b[0], 10, RCOLL_PTR_CUDA, &m[0]) == RCOLL_OK &&
              rcoll_vrb_mr_get(mrs, b[2], 10, RCOLL_PTR_CUDA, &m[2]) == RCOLL_OK &&
              rcoll_vrb_mr_get(mrs, b[3], 10, RCOLL_PTR_CUDA, &m[3]) == RCOLL_OK &&
              dmabuf_regs == regs0 + 5, "b0, b2, b3 still cached: the evicted one was b1");
    /* every entry in use now (b0, b2, b3, b4): b1 and b5 registered uncached */
    CHECK(rcoll_vrb_mr_get(mrs, b[1], 10, RCOLL_PTR_CUDA, &m[1]) == RCOLL_OK &&
              rcoll_vrb_mr_get(mrs, b[5], 10, RCOLL_PTR_CUDA, &m[5]) == RCOLL_OK &&
              dmabuf_regs == regs0 + 7 && deregs == deregs0 + 1 &&
              rcoll_vrb_mr_cached(mrs) == 4 && rcoll_vrb_mr_count(mrs) == 6,
          "cache full of entries in use: none evicted, registered uncached");
    rcoll_vrb_mr_t *y = NULL;
    CHECK(rcoll_vrb_mr_get(mrs, b[5] + 4096, 10, RCOLL_PTR_CUDA, &y) == RCOLL_OK && y == m[5] &&
              dmabuf_regs == regs0 + 7, "an uncached one is shared while in use");
    rcoll_vrb_mr_put(mrs, y);
    rcoll_vrb_mr_put(mrs, m[1]);
    rcoll_vrb_mr_put(mrs, m[5]);
    CHECK(deregs == deregs0 + 3 && rcoll_vrb_mr_count(mrs) == 4,
          "uncached ones deregistered with their last reference");
    for (int i = 0; i < NB; i++)
        if (i != 1 && i != 5) rcoll_vrb_mr_put(mrs, m[i]);
    CHECK(deregs == deregs0 + 3 && rcoll_vrb_mr_cached(mrs) == 4, "cached ones kept, idle");
out_free:
    for (int i = 0; i < NB; i++)
        if (b[i]) rcoll_gpu_mem_free(b[i]);
out:
    T->fini();
    CHECK(regs + dmabuf_regs - deregs == live0, "fini deregisters the cache (%d left)",
          regs + dmabuf_regs - deregs - live0);
    cfg->ib_mr_cache = saved;
    rcoll_ibv_set_api(NULL);
}

static void test_missing_library(rcoll_vrb_config_t *cfg)
{
    snprintf(cfg->ibverbs_lib, sizeof(cfg->ibverbs_lib), "/nonexistent/libibverbs.so.1");
    CHECK(rcoll_ibv_load(cfg->ibverbs_lib) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no verbs devices"), "missing library: no devices");
}

/* A QP's move to RTR that the kernel's address resolution timed out (ETIMEDOUT after its 1 s,
 * seen on Soft-RoCE right after a failover to a new port) is tried again; a peer whose address
 * never resolves fails after RCOLL_VRB_RTR_TRIES tries, naming its GID.  Any other error of
 * the modify fails at once. */
static int rtr_timeouts, rtr_calls, rts_calls, rtr_errno = ETIMEDOUT;
static int s_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    (void)qp, (void)mask;
    if (a->qp_state == IBV_QPS_RTS) return rts_calls++, 0;
    if (a->qp_state != IBV_QPS_RTR) return EINVAL;
    return ++rtr_calls <= rtr_timeouts ? rtr_errno : 0;
}

static void test_rtr_retry(rcoll_vrb_config_t *cfg)
{
    const rcoll_transport_ops_t *T = &rcoll_transport_verbs;
    rcoll_ibv_api_t table = scripted;
    table.modify_qp = s_modify_qp;
    rcoll_ibv_set_api(&table);
    if (T->init(cfg) != RCOLL_OK) {
        CHECK(0, "scripted device: %s", rcoll_err_get());
        rcoll_ibv_set_api(NULL);
        return;
    }
    struct ibv_qp qp = {.qp_num = 0x42};
    rcoll_vrb_comm_t c = {.dev = rcoll_vrb_dev(0), .nqps = 1, .qp = {&qp}};
    c.local.mtu = c.remote.mtu = IBV_MTU_1024;
    c.remote.link_layer = IBV_LINK_LAYER_ETHERNET;
    c.remote.qpn[0] = 7;
    memset(c.remote.gid, 0, sizeof(c.remote.gid));
    c.remote.gid[0] = 0xfe, c.remote.gid[1] = 0x80, c.remote.gid[15] = 0x09;

    rtr_timeouts = RCOLL_VRB_RTR_TRIES - 1, rtr_calls = rts_calls = 0;
    rcoll_status_t st = rcoll_vrb_comm_connect_qps(&c);
    CHECK(st == RCOLL_OK && rtr_calls == RCOLL_VRB_RTR_TRIES && rts_calls == 1,
          "RTR timed out %d times, then connected: status %d, %d RTR calls, %d RTS",
          RCOLL_VRB_RTR_TRIES - 1, st, rtr_calls, rts_calls);

    rtr_timeouts = 1000, rtr_calls = rts_calls = 0;
    st = rcoll_vrb_comm_connect_qps(&c);
    CHECK(st == RCOLL_ERR_SYSTEM && rtr_calls == RCOLL_VRB_RTR_TRIES && rts_calls == 0 &&
              strstr(rcoll_err_get(), "QP 0x42 to RTR on fake0") &&
              strstr(rcoll_err_get(), "fe80::9 not resolved in 5 tries") &&
              strstr(rcoll_err_get(), "timed out"),
          "a GID that never resolves: %d RTR calls, then the error names it", rtr_calls);

    rtr_errno = EINVAL, rtr_timeouts = 1000, rtr_calls = 0;
    st = rcoll_vrb_comm_connect_qps(&c);
    CHECK(st == RCOLL_ERR_SYSTEM && rtr_calls == 1 && strstr(rcoll_err_get(), "QP 0x42 to RTR"),
          "another error is not tried again: %d RTR call(s)", rtr_calls);
    rtr_errno = ETIMEDOUT;
    T->fini();
    rcoll_ibv_set_api(NULL);
}

int main(void)
{
    static rcoll_vrb_config_t cfg;
    check_set_note(rcoll_err_get);
    if (rcoll_config_parse(&rcoll_vrb_config_table, &cfg) != RCOLL_OK) return 1;
    test_hca_filter();
    test_gid_pick();
    test_scripted(&cfg);
    test_gid_changed(&cfg);
    test_mr_on(&cfg);
    test_gdr_methods();
    test_gdr_scripted(&cfg);
    test_gdr_cache(&cfg);
    test_gdr_cache_bound(&cfg);
    test_rtr_retry(&cfg);
    test_missing_library(&cfg); /* last: the load result is kept for the process */
    return check_summary();
}
