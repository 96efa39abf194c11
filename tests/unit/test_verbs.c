/*
 * test_verbs.c - the verbs transport without hardware: the RCOLL_IB_HCA filter, address
 * ranges, GID scoring, and, through a scripted function table, the paths no real device
 * produces on demand (no devices, a missing library, registration and CQ creation failing,
 * the registration cache's sharing), and GPUDirect RDMA's choices: the probe, RCOLL_IB_GDR,
 * CUDA memory registered by dma-buf (the CUDA side from the scripted driver library,
 * RCOLL_CUDA_LIB, where rcoll is built with CUDA) or nvidia-peermem, and the errors of each.
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
static ssize_t s_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e, size_t max,
                                 uint32_t flags)
{
    (void)c, (void)flags;
    if (max < 2) return -1;
    e[0] = gid("fe80::7", 0, IBV_GID_TYPE_ROCE_V1);
    e[1] = gid("10.9.8.7", 1, IBV_GID_TYPE_ROCE_V2);
    return 2;
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
    .query_gid_table = s_query_gid_table, .alloc_pd = s_alloc_pd, .dealloc_pd = s_dealloc_pd,
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
        CHECK(dmabuf_off == 0 && dmabuf_len == 2 * 4096 && dmabuf_iova == (uintptr_t)dev,
              "whole pages, the dma-buf from its start, addressed by the device pointer "
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
        CHECK(rcoll_vrb_mr_count(mrs) == 0, "all released");

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
    live->ib_gdr = RCOLL_IB_GDR_OFF;
    CHECK(T->get_props(0, &p) == RCOLL_OK && p.ptr_support == RCOLL_PTR_HOST &&
              rcoll_vrb_mr_get(mrs, (void *)0x10000, 1, RCOLL_PTR_CUDA, &m) ==
                  RCOLL_ERR_UNSUPPORTED && strstr(rcoll_err_get(), "RCOLL_IB_GDR=off"),
          "RCOLL_IB_GDR=off: host only, CUDA refused saying so");
    live->ib_gdr = RCOLL_IB_GDR_AUTO;
    T->fini();
    rcoll_ibv_set_api(NULL);
}

static void test_missing_library(rcoll_vrb_config_t *cfg)
{
    snprintf(cfg->ibverbs_lib, sizeof(cfg->ibverbs_lib), "/nonexistent/libibverbs.so.1");
    CHECK(rcoll_ibv_load(cfg->ibverbs_lib) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no verbs devices"), "missing library: no devices");
}

int main(void)
{
    static rcoll_vrb_config_t cfg;
    check_set_note(rcoll_err_get);
    if (rcoll_config_parse(&rcoll_vrb_config_table, &cfg) != RCOLL_OK) return 1;
    test_hca_filter();
    test_gid_pick();
    test_scripted(&cfg);
    test_gdr_methods();
    test_gdr_scripted(&cfg);
    test_missing_library(&cfg); /* last: the load result is kept for the process */
    return check_summary();
}
