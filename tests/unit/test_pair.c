/*
 * test_pair.c - the transport decision between two ranks (core/pair.c), the one function both
 * the library (core/comm.c, every peer) and rcoll-topo --ranks use: the configuration filter
 * (RCOLL_TRANSPORT, RCOLL_SHM_DISABLE, RCOLL_NET) and the choice from two rank-table entries;
 * and which network device a rank with a GPU uses (the topology fixtures, argv[1]).
 */
#include <stdio.h>
#include <string.h>

#include "core/pair.h"
#include "check.h"

static unsigned bit(const char *name)
{
    const rcoll_transport_ops_t *t = rcoll_transport_find(name);
    return t ? 1u << rcoll_transport_index(t) : 0;
}

static const char *name_of(int t)
{
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    return t >= 0 && (size_t)t < n ? list[t]->name : "none";
}

static void expect(const char *what, rcoll_pair_end_t a, rcoll_pair_end_t b, const char *want)
{
    const char *got = name_of(rcoll_pair_transport(&a, &b));
    const char *got_rev = name_of(rcoll_pair_transport(&b, &a));
    CHECK(!strcmp(got, want) && !strcmp(got_rev, want), "%s: %s / %s, want %s", what, got,
          got_rev, want);
}

static rcoll_transport_props_t dev(const char *name, int port)
{
    rcoll_transport_props_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", name);
    p.port = port;
    return p;
}

/* Topology fixture `name` of directory dir (a failed check and NULL when it does not load). */
static rcoll_topo_t *fixture(const char *dir, const char *name)
{
    char path[512];
    rcoll_topo_t *t = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    CHECK(rcoll_topo_load_file(path, &t) == RCOLL_OK, "load %s", path);
    return t;
}

/* The NIC nearest to a rank's GPU, among the transport's devices. */
static void test_gpu_nic(const char *fixtures)
{
    char why[320];
    rcoll_topo_t *t = fixture(fixtures, "dgx8_nvswitch.json");
    if (!t) return;
    rcoll_transport_props_t eight[8];
    for (int i = 0; i < 8; i++) {
        char n[16];
        snprintf(n, sizeof(n), "mlx5_%d", 7 - i); /* the transport lists them in another order */
        eight[i] = dev(n, 1);
    }
    /* GPU 5 (0000:ab:00.0) shares switch sw5 with mlx5_5: device index 2 here, for any rank */
    int d = rcoll_pair_gpu_nic(t, "0000:AB:00.0", eight, 8, 3, why, sizeof(why));
    CHECK(d == 2 && strstr(why, "GPU 0000:AB:00.0 is PIX to mlx5_5 port 1"), "dgx8 GPU 5: %d %s",
          d, why);
    CHECK(rcoll_pair_gpu_nic(t, "0000:18:00.0", eight, 8, 0, NULL, 0) == 7, "dgx8 GPU 0");
    /* only the far NICs left (RCOLL_IB_HCA kept the other socket's): equally close, spread */
    rcoll_transport_props_t far[2] = {dev("mlx5_6", 1), dev("mlx5_7", 1)};
    int a = rcoll_pair_gpu_nic(t, "0000:18:00.0", far, 2, 0, why, sizeof(why));
    int b = rcoll_pair_gpu_nic(t, "0000:18:00.0", far, 2, 1, NULL, 0);
    CHECK(a == 0 && b == 1 && strstr(why, "SYS") && strstr(why, "spread by rank"),
          "equally far NICs spread by rank: %d %d %s", a, b, why);
    /* a port the topology does not have, a GPU it does not have */
    rcoll_transport_props_t port2[2] = {dev("mlx5_0", 2), dev("mlx5_1", 1)};
    CHECK(rcoll_pair_gpu_nic(t, "0000:18:00.0", port2, 2, 0, NULL, 0) == 1,
          "mlx5_0 port 2 is not the topology's mlx5_0 port 1");
    CHECK(rcoll_pair_gpu_nic(t, "0000:99:00.0", eight, 8, 0, why, sizeof(why)) == -1 &&
              strstr(why, "not in the topology"), "unknown GPU: %s", why);
    rcoll_transport_props_t eth[1] = {dev("eth7", 0)};
    CHECK(rcoll_pair_gpu_nic(t, "0000:18:00.0", eth, 1, 0, why, sizeof(why)) == -1 &&
              strstr(why, "none of the 1 devices (eth7)"), "devices unknown: %s", why);
    rcoll_topo_free(t);

    if (!(t = fixture(fixtures, "vm_rxe_2gpu.json"))) return;
    rcoll_transport_props_t rxe[2] = {dev("rxe0", 1), dev("rxe1", 1)};
    CHECK(rcoll_pair_gpu_nic(t, "0000:19:00.0", rxe, 2, 0, NULL, 0) == 1 &&
              rcoll_pair_gpu_nic(t, "0000:1a:00.0", rxe, 2, 1, NULL, 0) == 0,
          "the rdma suite's fixture: GPU 0 -> rxe1, GPU 1 -> rxe0");
    rcoll_topo_free(t);
}

/* May a device move a GPU's memory directly (GPUDirect RDMA for point-to-point)? */
static void test_gdr(const char *fixtures)
{
    char why[400];
    rcoll_topo_t *t = fixture(fixtures, "dgx8_nvswitch.json");
    if (!t) return;
    rcoll_transport_props_t near = dev("mlx5_0", 1), far = dev("mlx5_7", 1);
    rcoll_transport_props_t host = dev("mlx5_0", 1), other = dev("eth9", 0);
    near.ptr_support = far.ptr_support = other.ptr_support = RCOLL_PTR_HOST | RCOLL_PTR_CUDA;
    host.ptr_support = RCOLL_PTR_HOST;
    static const struct {
        const char *bus;
        int which; /* near, far, host, other */
        rcoll_path_t level;
        int want;
        const char *says;
    } cases[] = {
        {"0000:18:00.0", 0, RCOLL_PATH_PXB, 1, "are PIX"},        /* GPU 0 and mlx5_0 */
        {"0000:18:00.0", 1, RCOLL_PATH_PXB, 0, "are SYS"},        /* GPU 0 and mlx5_7 */
        {"0000:18:00.0", 1, RCOLL_PATH_SYS, 1, "are SYS"},        /* RCOLL_NET_GDR_LEVEL=SYS */
        {"0000:18:00.0", 0, RCOLL_PATH_LOC, 0, "up to LOC"},      /* LOC: never */
        {"0000:18:00.0", 2, RCOLL_PATH_SYS, 0, "mlx5_0 registers no CUDA memory"},
        {"0000:18:00.0", 3, RCOLL_PATH_SYS, 0, "knows no NIC eth9"},
        {"0000:99:00.0", 0, RCOLL_PATH_SYS, 0, "knows no GPU 0000:99:00.0"},
    };
    const rcoll_transport_props_t *devs[] = {&near, &far, &host, &other};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        int got = rcoll_pair_gdr(t, cases[k].bus, devs[cases[k].which], cases[k].level, why,
                                 sizeof(why));
        CHECK(got == cases[k].want && strstr(why, cases[k].says), "case %zu: %d, %s", k, got,
              why);
    }
    CHECK(rcoll_pair_gdr(NULL, "0000:18:00.0", &near, RCOLL_PATH_SYS, NULL, 0) == 0,
          "no topology: no");
    rcoll_topo_free(t);
}

int main(int argc, char **argv)
{
    unsigned shm = bit("shm"), tcp = bit("tcp"), verbs = bit("verbs");
    CHECK(shm && tcp, "shm and tcp are built in");
    const uint64_t A = 1, B = 2;
    expect("one host", (rcoll_pair_end_t){A, shm | tcp}, (rcoll_pair_end_t){A, shm | tcp}, "shm");
    expect("two hosts", (rcoll_pair_end_t){A, shm | tcp}, (rcoll_pair_end_t){B, shm | tcp}, "tcp");
    expect("one host, shm on one side only", (rcoll_pair_end_t){A, shm | tcp},
           (rcoll_pair_end_t){A, tcp}, "tcp");
    expect("nothing in common", (rcoll_pair_end_t){A, shm}, (rcoll_pair_end_t){B, shm | tcp},
           "none");
    expect("shm only, two hosts", (rcoll_pair_end_t){A, shm}, (rcoll_pair_end_t){B, shm}, "none");
    unsigned plugin = bit("plugin");
    CHECK(plugin, "the NCCL net plugin transport is built in, named 'plugin'");
    expect("two hosts, a net plugin listening", (rcoll_pair_end_t){A, shm | plugin | verbs | tcp},
           (rcoll_pair_end_t){B, shm | plugin | verbs | tcp}, "plugin");
    expect("one host, a net plugin listening", (rcoll_pair_end_t){A, shm | plugin | tcp},
           (rcoll_pair_end_t){A, shm | plugin | tcp}, "shm");
    expect("a net plugin on one side", (rcoll_pair_end_t){A, plugin | tcp},
           (rcoll_pair_end_t){B, tcp}, "tcp");
    if (verbs) {
        expect("two hosts with verbs", (rcoll_pair_end_t){A, shm | verbs | tcp},
               (rcoll_pair_end_t){B, shm | verbs | tcp}, "verbs");
        expect("one host with verbs", (rcoll_pair_end_t){A, shm | verbs | tcp},
               (rcoll_pair_end_t){A, shm | verbs | tcp}, "shm");
        expect("verbs on one side", (rcoll_pair_end_t){A, verbs | tcp},
               (rcoll_pair_end_t){B, tcp}, "tcp");
    }

    /* The configuration filter. */
    rcoll_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.transport = RCOLL_CFG_AUTO;
    cfg.net = RCOLL_CFG_AUTO;
    const rcoll_transport_ops_t *S = rcoll_transport_find("shm"), *T = rcoll_transport_find("tcp");
    const rcoll_transport_ops_t *V = rcoll_transport_find("verbs");
    char why[64];
    CHECK(rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && rcoll_pair_allowed(&cfg, T, NULL, 0),
          "auto allows shm and tcp");
    cfg.shm_disable = 1;
    CHECK(!rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && !strcmp(why, "RCOLL_SHM_DISABLE=1") &&
              rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_SHM_DISABLE=1 rules out shm only: '%s'", why);
    cfg.shm_disable = 0;
    cfg.net = rcoll_transport_value(rcoll_net_names, "tcp");
    CHECK(rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_NET=tcp keeps shm and tcp");
    if (V)
        CHECK(!rcoll_pair_allowed(&cfg, V, why, sizeof(why)) && !strcmp(why, "RCOLL_NET=tcp"),
              "RCOLL_NET=tcp rules out verbs: '%s'", why);
    cfg.net = RCOLL_CFG_AUTO;
    cfg.transport = rcoll_transport_value(rcoll_transport_names, "tcp");
    CHECK(!rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && !strcmp(why, "RCOLL_TRANSPORT=tcp") &&
              rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_TRANSPORT=tcp: tcp only: '%s'", why);
    cfg.transport = rcoll_transport_value(rcoll_transport_names, "shm");
    CHECK(rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && !rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_TRANSPORT=shm: shm only");
    const rcoll_transport_ops_t *P = rcoll_transport_find("plugin");
    cfg.transport = rcoll_transport_value(rcoll_transport_names, "plugin");
    CHECK(P && rcoll_pair_allowed(&cfg, P, why, sizeof(why)) &&
              !rcoll_pair_allowed(&cfg, S, why, sizeof(why)) &&
              !rcoll_pair_allowed(&cfg, T, why, sizeof(why)) &&
              !strcmp(why, "RCOLL_TRANSPORT=plugin"),
          "RCOLL_TRANSPORT=plugin: the net plugin only: '%s'", why);
    cfg.transport = RCOLL_CFG_AUTO;
    cfg.net = rcoll_transport_value(rcoll_net_names, "plugin");
    CHECK(P && rcoll_pair_allowed(&cfg, P, why, sizeof(why)) &&
              rcoll_pair_allowed(&cfg, S, why, sizeof(why)) &&
              !rcoll_pair_allowed(&cfg, T, why, sizeof(why)) && !strcmp(why, "RCOLL_NET=plugin"),
          "RCOLL_NET=plugin: shm and the net plugin: '%s'", why);
    if (argc > 1) {
        test_gpu_nic(argv[1]);
        test_gdr(argv[1]);
    } else {
        check_skip("the GPU-NIC choice and GPUDirect verdicts: no fixtures directory given");
    }
    return check_summary();
}
