/*
 * test_topo.c - the topology detector on fixture files (tests/fixtures, argv[1]): every
 * pair's path class, closest NICs and GPUDirect RDMA verdicts, ring orders, pair transports,
 * errors with line numbers for bad files, a little fuzzing, dump/load round trips, live
 * detection here (hwloc and sysfs) and the sysfs reader on a fake tree.  No network, no GPU.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "rcoll_build.h"
#include "topo/topo.h"
#include "topo/topo_int.h"
#include "core/config.h"
#include "util/status.h"

static const char *fixtures;
static char tmpdir[256];

static const char *fx(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", fixtures, name);
    return buf[k];
}

static rcoll_topo_t *load(const char *name)
{
    rcoll_topo_t *t = NULL;
    rcoll_status_t st = rcoll_topo_load_file(fx(name), &t);
    CHECK(st == RCOLL_OK, "load %s: %s", name, rcoll_err_get());
    return st == RCOLL_OK ? t : NULL;
}

static const char *write_tmp(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    return path;
}

/* One matrix row as `rcoll-topo` prints it: devices are GPUs then NICs. */
static void row(const rcoll_topo_t *t, int a, char *out, size_t len)
{
    int ng = rcoll_topo_ngpus(t), nd = ng + rcoll_topo_nnics(t);
    size_t off = 0;
    out[0] = '\0';
    for (int b = 0; b < nd; b++) {
        char c[16];
        int links = 0;
        rcoll_path_t p;
        if (a == b) {
            snprintf(c, sizeof(c), "X");
        } else {
            if (a < ng && b < ng) p = rcoll_topo_path_gpu_gpu(t, a, b, &links);
            else if (a < ng) p = rcoll_topo_path_gpu_nic(t, a, b - ng);
            else if (b < ng) p = rcoll_topo_path_gpu_nic(t, b, a - ng);
            else p = rcoll_topo_path_nic_nic(t, a - ng, b - ng);
            if (p == RCOLL_PATH_NVL) snprintf(c, sizeof(c), "NV%d", links);
            else snprintf(c, sizeof(c), "%s", rcoll_path_name(p));
        }
        off += (size_t)snprintf(out + off, len - off, "%s%s", b ? " " : "", c);
    }
}

static void check_matrix(const char *name, const rcoll_topo_t *t, const char *const *exp, int n)
{
    if (!t) return;
    CHECK(rcoll_topo_ngpus(t) + rcoll_topo_nnics(t) == n, "%s: %d devices, expected %d", name,
          rcoll_topo_ngpus(t) + rcoll_topo_nnics(t), n);
    for (int a = 0; a < n && a < rcoll_topo_ngpus(t) + rcoll_topo_nnics(t); a++) {
        char got[512];
        row(t, a, got, sizeof(got));
        CHECK(!strcmp(got, exp[a]), "%s row %d:\n   got '%s'\n  want '%s'", name, a, got, exp[a]);
    }
}

static const char *const dgx8_exp[] = {
    "X NV18 NV18 NV18 NV18 NV18 NV18 NV18 PIX PXB PHB PHB SYS SYS SYS SYS",
    "NV18 X NV18 NV18 NV18 NV18 NV18 NV18 PXB PIX PHB PHB SYS SYS SYS SYS",
    "NV18 NV18 X NV18 NV18 NV18 NV18 NV18 PHB PHB PIX PXB SYS SYS SYS SYS",
    "NV18 NV18 NV18 X NV18 NV18 NV18 NV18 PHB PHB PXB PIX SYS SYS SYS SYS",
    "NV18 NV18 NV18 NV18 X NV18 NV18 NV18 SYS SYS SYS SYS PIX PXB PHB PHB",
    "NV18 NV18 NV18 NV18 NV18 X NV18 NV18 SYS SYS SYS SYS PXB PIX PHB PHB",
    "NV18 NV18 NV18 NV18 NV18 NV18 X NV18 SYS SYS SYS SYS PHB PHB PIX PXB",
    "NV18 NV18 NV18 NV18 NV18 NV18 NV18 X SYS SYS SYS SYS PHB PHB PXB PIX",
    "PIX PXB PHB PHB SYS SYS SYS SYS X PXB PHB PHB SYS SYS SYS SYS",
    "PXB PIX PHB PHB SYS SYS SYS SYS PXB X PHB PHB SYS SYS SYS SYS",
    "PHB PHB PIX PXB SYS SYS SYS SYS PHB PHB X PXB SYS SYS SYS SYS",
    "PHB PHB PXB PIX SYS SYS SYS SYS PHB PHB PXB X SYS SYS SYS SYS",
    "SYS SYS SYS SYS PIX PXB PHB PHB SYS SYS SYS SYS X PXB PHB PHB",
    "SYS SYS SYS SYS PXB PIX PHB PHB SYS SYS SYS SYS PXB X PHB PHB",
    "SYS SYS SYS SYS PHB PHB PIX PXB SYS SYS SYS SYS PHB PHB X PXB",
    "SYS SYS SYS SYS PHB PHB PXB PIX SYS SYS SYS SYS PHB PHB PXB X",
};
static const char *const pcie4_exp[] = {
    "X PIX PHB PHB PIX", "PIX X PHB PHB PIX", "PHB PHB X PIX PHB", "PHB PHB PIX X PHB",
    "PIX PIX PHB PHB X",
};
static const char *const nvlink2_exp[] = {"X NV4 PHB", "NV4 X PHB", "PHB PHB X"};
static const char *const vm_flat_exp[] = {"X PHB PHB", "PHB X PHB", "PHB PHB X"};
static const char *const islands_exp[] = {"X PIX NV2 PHB", "PIX X PHB NV2", "NV2 PHB X PIX",
                                          "PHB NV2 PIX X"};
/* hwloc_2socket.xml and the fake sysfs tree describe the same machine (sysfs adds eth0). */
#if RCOLL_HAVE_HWLOC
static const char *const hwloc2_exp[] = {"X SYS PIX", "SYS X SYS", "PIX SYS X"};
#endif
static const char *const fakesys_exp[] = {"X SYS PIX SYS", "SYS X SYS PHB", "PIX SYS X SYS",
                                          "SYS PHB SYS X"};

static void test_path_names(void)
{
    static const char *const names[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET"};
    for (int i = 0; i < 8; i++) {
        rcoll_path_t p;
        CHECK(!strcmp(rcoll_path_name((rcoll_path_t)i), names[i]), "name of %d", i);
        CHECK(rcoll_path_parse(names[i], &p) == 0 && p == (rcoll_path_t)i, "parse %s", names[i]);
    }
    rcoll_path_t p = RCOLL_PATH_SYS;
    CHECK(rcoll_path_parse(" pxb ", &p) == 0 && p == RCOLL_PATH_PXB, "case and blanks");
    CHECK(rcoll_path_parse("PCI", &p) == -1 && p == RCOLL_PATH_PXB, "PCI rejected, p untouched");
    CHECK(rcoll_path_parse("", &p) == -1 && rcoll_path_parse(NULL, &p) == -1, "empty rejected");
    CHECK(!strcmp(rcoll_path_name((rcoll_path_t)42), "?"), "out of range name");
    CHECK(RCOLL_PATH_LOC < RCOLL_PATH_NVL && RCOLL_PATH_NVL < RCOLL_PATH_NVB &&
              RCOLL_PATH_NVB < RCOLL_PATH_PIX && RCOLL_PATH_PIX < RCOLL_PATH_PXB &&
              RCOLL_PATH_PXB < RCOLL_PATH_PHB && RCOLL_PATH_PHB < RCOLL_PATH_SYS &&
              RCOLL_PATH_SYS < RCOLL_PATH_NET, "strongest first");
}

static void test_matrices(void)
{
    rcoll_topo_t *t = load("dgx8_nvswitch.json");
    check_matrix("dgx8 json", t, dgx8_exp, 16);
    rcoll_topo_free(t);
    t = load("dgx8_nvswitch.xml");
    check_matrix("dgx8 nccl xml", t, dgx8_exp, 16);
    if (t) {
        CHECK(!strcmp(rcoll_topo_cpulist(t, 0), "0-55,112-167") &&
                  !strcmp(rcoll_topo_cpulist(t, 1), "56-111,168-223"),
              "NCCL affinity masks -> cpulists: '%s' '%s'", rcoll_topo_cpulist(t, 0),
              rcoll_topo_cpulist(t, 1));
        CHECK(rcoll_topo_nic(t, 3)->rdma && rcoll_topo_nic(t, 3)->port == 1 &&
                  rcoll_topo_nic(t, 3)->speed_mbps == 400000 &&
                  !strcmp(rcoll_topo_nic(t, 3)->pci, "0000:5c:00.0"),
              "NCCL <net> fields");
        CHECK(rcoll_topo_gpu(t, 5)->nvswitch_links == 18 && rcoll_topo_gpu(t, 5)->numa == 1 &&
                  !strcmp(rcoll_topo_gpu(t, 5)->pci, "0000:ab:00.0"),
              "NCCL <gpu> fields");
    }
    rcoll_topo_free(t);
    t = load("pcie4.json");
    check_matrix("pcie4", t, pcie4_exp, 5);
    rcoll_topo_free(t);
    t = load("nvlink2.json");
    check_matrix("nvlink2", t, nvlink2_exp, 3);
    if (t) {
        int links = 0;
        CHECK(rcoll_topo_path_gpu_gpu(t, 1, 0, &links) == RCOLL_PATH_NVL && links == 4,
              "a link declared on one side only holds both ways");
        CHECK(rcoll_topo_path_gpu_gpu(t, 0, 0, &links) == RCOLL_PATH_LOC && links == 0, "LOC");
        CHECK(rcoll_topo_path_gpu_gpu(t, 0, 7, &links) == RCOLL_PATH_SYS && links == 0,
              "out of range -> SYS");
    }
    rcoll_topo_free(t);
    t = load("vm_flat.json");
    check_matrix("vm_flat", t, vm_flat_exp, 3);
    if (t) {
        CHECK(rcoll_topo_nic(t, 0)->numa == -1 && rcoll_topo_gpu(t, 0)->numa == 0,
              "unknown NUMA kept as -1");
        CHECK(rcoll_topo_gpu(t, 0)->cpu == -1 && rcoll_topo_nic(t, 0)->cpu == -1,
              "host bridge without a package: cpu -1");
    }
    rcoll_topo_free(t);
    t = load("nvl_islands.json");
    check_matrix("nvl_islands", t, islands_exp, 4);
    rcoll_topo_free(t);
#if RCOLL_HAVE_HWLOC
    t = load("hwloc_2socket.xml");
    check_matrix("hwloc xml", t, hwloc2_exp, 3);
    if (t) {
        const rcoll_topo_nic_t *n = rcoll_topo_nic(t, 0);
        CHECK(!strcmp(rcoll_topo_host(t), "hwnode"), "hwloc HostName");
        CHECK(n->rdma && !strcmp(n->name, "mlx5_0") && !strcmp(n->state, "active") &&
                  !strcmp(n->netdev, "ib0") && !strcmp(n->pci, "0000:04:00.0"),
              "hwloc OpenFabrics device -> RDMA NIC (%s %s %s)", n->name, n->state, n->netdev);
        CHECK(!strcmp(rcoll_topo_gpu(t, 1)->pci, "0000:81:00.0") &&
                  rcoll_topo_gpu(t, 1)->numa == 1 && rcoll_topo_gpu(t, 1)->cpu == 1,
              "hwloc GPU locality");
    }
    rcoll_topo_free(t);
#else
    rcoll_topo_t *x = NULL;
    CHECK(rcoll_topo_load_file(fx("hwloc_2socket.xml"), &x) == RCOLL_ERR_UNSUPPORTED && !x,
          "hwloc XML without hwloc: unsupported");
#endif

    /* NVB: 0-1 and 1-2 linked, 0-2 only through GPU 1. */
    const char *nvb = write_tmp("nvb.json",
        "{\"rcoll_topology\": 1, \"pci\": [{\"id\": \"hb0\", \"type\": \"hostbridge\"}],\n"
        " \"gpus\": [\n"
        "  {\"pci\": \"0000:01:00.0\", \"parent\": \"hb0\", \"nvlink\": [{\"peer\": 1, \"links\": 4}]},\n"
        "  {\"pci\": \"0000:02:00.0\", \"parent\": \"hb0\", \"nvlink\": [{\"peer\": 2, \"links\": 2}]},\n"
        "  {\"pci\": \"0000:03:00.0\", \"parent\": \"hb0\"}]}\n");
    CHECK(rcoll_topo_load_file(nvb, &t) == RCOLL_OK, "nvb: %s", rcoll_err_get());
    if (t) {
        int links = 0;
        char why[200];
        CHECK(rcoll_topo_explain_gpu_gpu(t, 0, 2, &links, why, sizeof(why)) == RCOLL_PATH_NVB &&
                  links == 2 && strstr(why, "GPU 1"),
              "NVB through GPU 1 with the bottleneck's 2 links (%d, %s)", links, why);
        CHECK(rcoll_topo_path_gpu_gpu(t, 2, 1, &links) == RCOLL_PATH_NVL && links == 2, "NV2");
        rcoll_topo_free(t);
        t = NULL;
    }
}

static void test_nic_and_gdr(void)
{
    char reason[400];
    rcoll_topo_t *t = load("dgx8_nvswitch.json");
    if (t) {
        for (int g = 0; g < 8; g++) {
            int nic = rcoll_topo_gpu_nic(t, g);
            CHECK(nic == g, "dgx8: GPU %d -> NIC %d", g, nic);
            CHECK(rcoll_topo_gdr_allowed(t, g, nic, RCOLL_PATH_PXB, reason, sizeof(reason)) == 1 &&
                      strstr(reason, " PIX") && strstr(reason, "same PCIe switch"),
                  "dgx8: GPU %d GDR yes (PIX): %s", g, reason);
        }
        CHECK(rcoll_topo_gdr_allowed(t, 0, 4, RCOLL_PATH_PXB, reason, sizeof(reason)) == 0 &&
                  strstr(reason, "GPU 0 and mlx5_4 are SYS") && strstr(reason, "across CPU packages"),
              "dgx8: cross-socket GDR no: %s", reason);
        CHECK(rcoll_topo_gdr_allowed(t, 0, 4, RCOLL_PATH_SYS, reason, sizeof(reason)) == 1,
              "dgx8: SYS level allows even that");
        CHECK(rcoll_topo_gdr_allowed(t, 0, 1, RCOLL_PATH_PXB, reason, sizeof(reason)) == 1 &&
                  strstr(reason, "PXB"), "dgx8: PXB within PXB");
        CHECK(rcoll_topo_gdr_allowed(t, 0, 1, RCOLL_PATH_PIX, reason, sizeof(reason)) == 0,
              "dgx8: PXB beyond PIX");
        CHECK(rcoll_topo_gdr_allowed(t, 0, 0, RCOLL_PATH_LOC, reason, sizeof(reason)) == 0,
              "LOC disables GDR");
        CHECK(rcoll_topo_gdr_allowed(t, 0, 99, RCOLL_PATH_SYS, reason, sizeof(reason)) == 0,
              "no such NIC");
        CHECK(rcoll_topo_gpu_nic(t, 8) == -1 && rcoll_topo_gpu_nic(t, -1) == -1, "no such GPU");
    }
    rcoll_topo_free(t);

    t = load("pcie4.json");
    if (t) {
        for (int g = 0; g < 4; g++) {
            CHECK(rcoll_topo_gpu_nic(t, g) == 0, "pcie4: GPU %d -> NIC 0", g);
            int ok = rcoll_topo_gdr_allowed(t, g, 0, RCOLL_PATH_PXB, reason, sizeof(reason));
            if (g < 2)
                CHECK(ok && strstr(reason, "PIX"), "pcie4: GPU %d GDR yes: %s", g, reason);
            else
                CHECK(!ok && strstr(reason, "PHB") && strstr(reason, "host bridge hb0"),
                      "pcie4: GPU %d GDR no (PHB): %s", g, reason);
        }
    }
    rcoll_topo_free(t);

    t = load("vm_flat.json");
    if (t) {
        CHECK(rcoll_topo_gpu_nic(t, 1) == 0, "vm_flat: GPU 1 -> NIC 0");
        CHECK(!rcoll_topo_gdr_allowed(t, 0, 0, RCOLL_PATH_PXB, reason, sizeof(reason)) &&
                  strstr(reason, "are PHB"), "vm_flat: GDR no at PXB: %s", reason);
        CHECK(rcoll_topo_gdr_allowed(t, 0, 0, RCOLL_PATH_PHB, reason, sizeof(reason)) == 1,
              "vm_flat: GDR yes at PHB: %s", reason);
    }
    rcoll_topo_free(t);

    t = load("nvlink2.json");
    if (t) {
        CHECK(rcoll_topo_gpu_nic(t, 0) == 0, "nvlink2: GPU 0 -> eth0");
        CHECK(!rcoll_topo_gdr_allowed(t, 0, 0, RCOLL_PATH_SYS, reason, sizeof(reason)) &&
                  strstr(reason, "eth0 is not an RDMA NIC"), "nvlink2: %s", reason);
    }
    rcoll_topo_free(t);

    /* RDMA ports beat plain NICs even when farther; a down port loses to an active one. */
    const char *mix = write_tmp("mix.json",
        "{\"rcoll_topology\": 1, \"cpus\": [{\"id\": 0}, {\"id\": 1}],\n"
        " \"pci\": [{\"id\": \"hb0\", \"type\": \"hostbridge\", \"parent\": \"cpu0\"},\n"
        "         {\"id\": \"hb1\", \"type\": \"hostbridge\", \"parent\": \"cpu1\"}],\n"
        " \"gpus\": [{\"pci\": \"01:00.0\", \"parent\": \"hb0\"}],\n"
        " \"nics\": [{\"name\": \"eth0\", \"parent\": \"hb0\"},\n"
        "          {\"name\": \"mlx5_0\", \"rdma\": true, \"parent\": \"hb0\", \"state\": \"down\"},\n"
        "          {\"name\": \"mlx5_1\", \"rdma\": true, \"parent\": \"hb1\", \"state\": \"active\"}]}\n");
    CHECK(rcoll_topo_load_file(mix, &t) == RCOLL_OK, "mix: %s", rcoll_err_get());
    if (t) {
        CHECK(rcoll_topo_gpu_nic(t, 0) == 2, "active RDMA port first (got %d)", rcoll_topo_gpu_nic(t, 0));
        CHECK(!strcmp(rcoll_topo_gpu(t, 0)->pci, "0000:01:00.0"), "short bus id normalised");
        rcoll_topo_free(t);
    }
}

static int is_perm(const int *order, int n)
{
    int seen[64] = {0};
    for (int i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n || seen[order[i]]) return 0;
        seen[order[i]] = 1;
    }
    return 1;
}

static void check_ring(const char *what, const rcoll_topo_t *t, int n, const char *const *hosts,
                       const int *gpus, const int *want)
{
    int order[64], again[64];
    rcoll_status_t st = rcoll_topo_ring_order(t, n, hosts, gpus, order);
    CHECK(st == RCOLL_OK, "%s: %s", what, rcoll_err_get());
    if (st) return;
    CHECK(is_perm(order, n), "%s: a permutation", what);
    char got[256] = "", exp[256] = "";
    for (int i = 0; i < n; i++) {
        snprintf(got + strlen(got), sizeof(got) - strlen(got), " %d", order[i]);
        snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), " %d", want[i]);
    }
    CHECK(!strcmp(got, exp), "%s: ring%s, want%s", what, got, exp);
    CHECK(rcoll_topo_ring_order(t, n, hosts, gpus, again) == RCOLL_OK &&
              !memcmp(order, again, sizeof(int) * (size_t)n), "%s: deterministic", what);
}

/* The ring the library builds: each rank's GPU's place in its machine's chain, then sorted
 * inside each host; on a full or chain-ordered set it is rcoll_topo_ring_order's ring. */
static void check_chain_ring(const char *what, const rcoll_topo_t *t, int n,
                             const char *const *hosts, const int *gpus, const int *want)
{
    int pos[64] = {0}, cpos[16], order[16];
    CHECK(rcoll_topo_gpu_chain(t, pos) == RCOLL_OK, "%s: chain", what);
    for (int r = 0; r < n; r++) cpos[r] = gpus[r] >= 0 ? pos[gpus[r]] : 0;
    CHECK(rcoll_topo_ring_by_chain(n, hosts, cpos, order) == RCOLL_OK &&
              !memcmp(order, want, sizeof(int) * (size_t)n),
          "%s: %d %d %d %d ...", what, order[0], order[1], order[2], order[3]);
}

static void test_ring_by_chain(void)
{
    rcoll_topo_t *t = load("dgx8_nvswitch.json");
    if (!t) return;
    int pos[8] = {0};
    CHECK(rcoll_topo_gpu_chain(t, pos) == RCOLL_OK && pos[0] == 1 && pos[4] == 5 &&
              pos[7] == 8, "dgx8 chain: 0..7 in socket order (%d %d %d)", pos[0], pos[4],
          pos[7]);
    static const char *const one[] = {"a", "a", "a", "a", "a", "a", "a", "a"};
    check_chain_ring("dgx8, GPUs 0 4 1 5 2 6 3 7", t, 8, one,
                     (const int[]){0, 4, 1, 5, 2, 6, 3, 7}, (const int[]){0, 2, 4, 6, 1, 3, 5, 7});
    static const char *const ab[] = {"a", "b", "a", "b", "a", "b", "a", "b"};
    check_chain_ring("dgx8, two hosts interleaved", t, 8, ab,
                     (const int[]){0, 0, 4, 4, 1, 1, 5, 5}, (const int[]){0, 4, 2, 6, 1, 5, 3, 7});
    static const char *const mixed[] = {"a", "a", "a", "a"};
    check_chain_ring("dgx8, ranks without a GPU last", t, 4, mixed,
                     (const int[]){-1, 7, -1, 6}, (const int[]){3, 1, 0, 2});
    int order[4];
    CHECK(rcoll_topo_ring_by_chain(4, (const char *const[]){"b", "a", "b", "a"}, NULL,
                                   order) == RCOLL_OK &&
              !memcmp(order, (const int[]){0, 2, 1, 3}, sizeof(order)),
          "no chain places: grouped by host, rank order inside");
    rcoll_topo_free(t);
}

static void test_ring(void)
{
    static const char *const abab[] = {"a", "b", "a", "b"};
    check_ring("no topology, a b a b", NULL, 4, abab, NULL, (const int[]){0, 2, 1, 3});
    check_ring("no topology, GPUs ignored", NULL, 4, abab, (const int[]){3, 2, 1, 0},
               (const int[]){0, 2, 1, 3});
    static const char *const hosts3[] = {"n2", "n1", "n2", "n3", "n1"};
    check_ring("hosts in order of first appearance", NULL, 5, hosts3, NULL,
               (const int[]){0, 2, 1, 4, 3});

    rcoll_topo_t *t = load("dgx8_nvswitch.json");
    if (t) {
        static const char *const one[] = {"a", "a", "a", "a", "a", "a", "a", "a"};
        check_ring("dgx8, GPUs 0 4 1 5 2 6 3 7 -> socket-grouped", t, 8, one,
                   (const int[]){0, 4, 1, 5, 2, 6, 3, 7}, (const int[]){0, 2, 4, 6, 1, 3, 5, 7});
        static const char *const ab[] = {"a", "b", "a", "b", "a", "b", "a", "b"};
        check_ring("dgx8, two hosts interleaved", t, 8, ab, (const int[]){0, 0, 4, 4, 1, 1, 5, 5},
                   (const int[]){0, 4, 2, 6, 1, 5, 3, 7});
        static const char *const mixed[] = {"a", "a", "a", "a"};
        check_ring("dgx8, ranks without a GPU last", t, 4, mixed, (const int[]){-1, 7, -1, 6},
                   (const int[]){3, 1, 0, 2});
        int order[4];
        rcoll_status_t st = rcoll_topo_ring_order(t, 4, mixed, (const int[]){0, 1, 8, 2}, order);
        CHECK(st == RCOLL_ERR_INVALID_ARG && strstr(rcoll_err_get(), "rank 2 uses GPU 8"),
              "GPU out of range rejected: %s", rcoll_err_get());
        const char *nullhost[] = {"a", NULL};
        CHECK(rcoll_topo_ring_order(t, 2, nullhost, NULL, order) == RCOLL_ERR_INVALID_ARG,
              "NULL host rejected");
        CHECK(rcoll_topo_ring_order(t, 0, NULL, NULL, NULL) == RCOLL_OK, "0 ranks");
        CHECK(rcoll_topo_ring_order(t, -1, mixed, NULL, order) == RCOLL_ERR_INVALID_ARG,
              "negative nranks");
    }
    rcoll_topo_free(t);

    t = load("pcie4.json");
    if (t) {
        static const char *const one[] = {"x", "x", "x", "x"};
        check_ring("pcie4, GPUs 3 0 2 1 -> switch-grouped", t, 4, one, (const int[]){3, 0, 2, 1},
                   (const int[]){1, 3, 2, 0});
        check_ring("pcie4, two ranks per GPU stay together", t, 4, one,
                   (const int[]){2, 0, 2, 0}, (const int[]){1, 3, 0, 2});
    }
    rcoll_topo_free(t);

    t = load("nvl_islands.json");
    if (t) {
        static const char *const one[] = {"x", "x", "x", "x"};
        /* 0 -NVL- 2 -PIX- 3 -NVL- 1 -PIX- 0: never through the host bridge. */
        check_ring("NVLink islands across switches", t, 4, one, (const int[]){0, 1, 2, 3},
                   (const int[]){0, 2, 3, 1});
    }
    rcoll_topo_free(t);
}

/* ---- bad files ---- */
static void expect_error(const char *what, const char *path, rcoll_status_t want_st, int line,
                         const char *needle)
{
    rcoll_topo_t *t = (rcoll_topo_t *)0x1;
    rcoll_status_t st = rcoll_topo_load_file(path, &t);
    const char *msg = rcoll_err_get();
    char ln[32];
    snprintf(ln, sizeof(ln), "line %d:", line);
    CHECK(st == want_st, "%s: status %d, want %d (%s)", what, st, want_st, msg);
    CHECK(t == (rcoll_topo_t *)0x1, "%s: output untouched", what);
    CHECK(line == 0 || strstr(msg, ln), "%s: message names %s: '%s'", what, ln, msg);
    CHECK(strstr(msg, needle) != NULL, "%s: message contains '%s': '%s'", what, needle, msg);
    CHECK(strstr(msg, path) != NULL, "%s: message names the file: '%s'", what, msg);
    if (st == RCOLL_OK && t != (rcoll_topo_t *)0x1) rcoll_topo_free(t);
}

static void test_bad_files(void)
{
    expect_error("fixture: dangling parent", fx("bad_dangling_parent.json"), RCOLL_ERR_INVALID_ARG,
                 10, "gpu 1: parent \"sw9\" is not defined");
    expect_error("fixture: NVLink to itself", fx("bad_nvlink_self.json"), RCOLL_ERR_INVALID_ARG, 7,
                 "gpu 1: nvlink to itself");
    expect_error("fixture: missing comma", fx("bad_missing_comma.json"), RCOLL_ERR_INVALID_ARG, 5,
                 "expected ',' or ']'");
    expect_error("fixture: unterminated string", fx("bad_unterminated.json"), RCOLL_ERR_INVALID_ARG,
                 3, "string not closed");
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/does-not-exist.json", tmpdir);
    expect_error("missing file", missing, RCOLL_ERR_SYSTEM, 0, "cannot open");

    static const struct {
        const char *text;
        int line;
        const char *needle;
    } cases[] = {
        {"", 0, "empty"},
        {"   \n\n", 0, "empty"},
        {"hello", 1, "not a topology file"},
        {"[1, 2]", 1, "top level must be an object"},
        {"{\n\"rcoll_topology\": 1,\n}", 3, "trailing ','"},
        {"{\"rcoll_topology\": 1, \"cpus\": [\n{\"id\": 0},\n]}", 3, "trailing ','"},
        {"{\n \"rcoll_topology\": 1\n \"host\": \"x\"}", 3, "expected ',' or '}'"},
        {"{\"rcoll_topology\" 1}", 1, "expected ':'"},
        {"{\"rcoll_topology\": tru}", 1, "expected a value"},
        {"{\"rcoll_topology\": True}", 1, "found 'T'"},
        {"{\"rcoll_topology\": 01}", 1, "leading zeros"},
        {"{\"rcoll_topology\": 1.}", 1, "invalid number"},
        {"{\"rcoll_topology\": -}", 1, "invalid number"},
        {"{\"rcoll_topology\": 1e999}", 1, "out of range"},
        {"{\"rcoll_topology\": 1,\n\"rcoll_topology\": 1}", 2, "duplicate key \"rcoll_topology\""},
        {"{\"rcoll_topology\": 1, \"host\": \"a\\qb\"}", 1, "invalid escape"},
        {"{\"rcoll_topology\": 1, \"host\": \"a\\u00\"}", 1, "4 hex digits"},
        {"{\"rcoll_topology\": 1, \"host\": \"\\ud800x\"}", 1, "surrogate"},
        {"{\"rcoll_topology\": 1, \"host\": \"a\\u0000\"}", 1, "\\u0000"},
        {"{\"rcoll_topology\": 1, \"host\": \"a\tb\"}", 1, "control character"},
        {"{\"rcoll_topology\": 1, \"host\": \"abc", 1, "string not closed before the end of the file"},
        {"{\"rcoll_topology\": 1,\n\"cpus\": [", 2, "expected a value, found the end of the file"},
        {"{\"rcoll_topology\": 1} x", 1, "after the end of the top-level value"},
        {"{\"rcoll_topology\": 1, \"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
         "[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
         "]]}", 1, "nesting deeper"},
        {"{\"rcoll_topology\": 2}", 1, "format version 2 is not supported"},
        {"{\"host\": \"x\"}", 1, "missing required key \"rcoll_topology\""},
        {"{\"rcoll_topology\": 1,\n \"hosts\": \"x\"}", 2, "unknown key \"hosts\""},
        {"{\"rcoll_topology\": 1, \"cpus\": [\n {\"id\": 0, \"numa\": \"0\"}]}", 2,
         "cpu0: \"numa\" must be an integer"},
        {"{\"rcoll_topology\": 1, \"cpus\": [\n {\"id\": 0.5}]}", 2, "must be an integer"},
        {"{\"rcoll_topology\": 1, \"cpus\": [{\"id\": 0},\n {\"id\": 0}]}", 2,
         "cpu id 0 is declared twice"},
        {"{\"rcoll_topology\": 1, \"cpus\": [7]}", 1, "every element must be an object"},
        {"{\"rcoll_topology\": 1, \"gpus\": [\n {\"index\": 0}]}", 2,
         "gpu 0: missing required key \"pci\""},
        {"{\"rcoll_topology\": 1, \"gpus\": [\n {\"pci\": \"17:00\"}]}", 2, "not a PCI bus id"},
        {"{\"rcoll_topology\": 1, \"gpus\": [\n {\"pci\": \"01:00.0\", \"parnet\": \"hb0\"}]}", 2,
         "unknown key \"parnet\""},
        {"{\"rcoll_topology\": 1, \"gpus\": [{\"pci\": \"01:00.0\"},\n {\"pci\": \"01:00.0\"}]}", 2,
         "pci 0000:01:00.0 is also gpu 0's"},
        {"{\"rcoll_topology\": 1, \"gpus\": [{\"pci\": \"01:00.0\"},\n {\"index\": 2, \"pci\": "
         "\"02:00.0\"}]}", 2, "gpu index 2 is out of range"},
        {"{\"rcoll_topology\": 1, \"gpus\": [{\"pci\": \"01:00.0\", \"nvlink\": [\n {\"peer\": 7, "
         "\"links\": 4}]}]}", 2, "gpu 0: nvlink peer 7 does not exist"},
        {"{\"rcoll_topology\": 1, \"gpus\": [{\"pci\": \"01:00.0\", \"nvlink\": [{\"peer\": 1, "
         "\"links\": 4}]},\n {\"pci\": \"02:00.0\", \"nvlink\": [{\"peer\": 0, \"links\": 2}]}]}", 2,
         "disagree"},
        {"{\"rcoll_topology\": 1, \"gpus\": [{\"pci\": \"01:00.0\", \"nvlink\": [\n {\"peer\": 1}]}]}",
         2, "missing required key \"links\""},
        {"{\"rcoll_topology\": 1, \"gpus\": [{\"pci\": \"01:00.0\", \"nvlink\": {}}]}", 1,
         "\"nvlink\" must be an array"},
        {"{\"rcoll_topology\": 1, \"pci\": [{\"id\": \"sw0\", \"type\": \"switch\"},\n {\"id\": "
         "\"sw0\", \"type\": \"switch\"}]}", 2, "pci id \"sw0\" is declared twice"},
        {"{\"rcoll_topology\": 1, \"pci\": [\n {\"id\": \"sw0\", \"type\": \"bridge\"}]}", 2,
         "type \"bridge\" is not"},
        {"{\"rcoll_topology\": 1, \"pci\": [{\"id\": \"sw0\", \"type\": \"switch\"},\n {\"id\": "
         "\"hb0\", \"type\": \"hostbridge\", \"parent\": \"sw0\"}]}", 2, "host bridge's parent"},
        {"{\"rcoll_topology\": 1, \"pci\": [{\"id\": \"sw0\", \"type\": \"switch\", \"parent\": "
         "\"sw1\"},\n {\"id\": \"sw1\", \"type\": \"switch\", \"parent\": \"sw0\"}]}", 1, "loops"},
        {"{\"rcoll_topology\": 1, \"pci\": [\n {\"id\": \"cpu3\", \"type\": \"switch\"}]}", 2,
         "name CPU packages"},
        {"{\"rcoll_topology\": 1, \"pci\": [\n {\"id\": \"hb0\", \"type\": \"hostbridge\", "
         "\"parent\": \"cpu1\"}]}", 2, "no CPU package with id 1"},
        {"{\"rcoll_topology\": 1, \"nics\": [\n {\"name\": \"eth0\", \"port\": 1}]}", 2,
         "only meaningful with \"rdma\": true"},
        {"{\"rcoll_topology\": 1, \"nics\": [\n {\"name\": \"mlx5_0\", \"rdma\": 1}]}", 2,
         "\"rdma\" must be true or false"},
        {"{\"rcoll_topology\": 1, \"nics\": [{\"name\": \"m\", \"rdma\": true},\n {\"name\": \"m\", "
         "\"rdma\": true}]}", 2, "nic \"m\" port 1 is declared twice"},
        /* XML */
        {"<system version=\"1\">\n<cpu numaid=\"0\">\n</pci>\n</system>", 3, "</pci> closes <cpu>"},
        {"<system>\n<cpu>\n</cpu></system>", 2, "<cpu>: missing attribute numaid"},
        {"<system>\n<cpu numaid=\"0\">\n<pci class=\"0x060400\"/></cpu></system>", 3,
         "<pci>: missing attribute busid"},
        {"<system>\n<cpu numaid=\"0\"><pci busid=\"01:00.0\">\n<gpu dev=\"x\"/></pci></cpu>"
         "</system>", 3, "dev=\"x\" is not an integer"},
        {"<system>\n<cpu numaid=\"0\">", 2, "<cpu> opened on line 2 is not closed"},
        {"<system>\n<!-- a -- b -->\n</system>", 2, "'--' inside a comment"},
        {"<system a=\"1\" a=\"2\"/>", 1, "attribute a given twice"},
        {"<system a=\"&bogus;\"/>", 1, "unknown entity"},
        {"<system/>\n<more/>", 2, "after the root element"},
        {"<foo/>", 0, "neither hwloc's <topology> nor NCCL's <system>"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "bad%zu.txt", i);
        const char *path = write_tmp(name, cases[i].text);
        char what[64];
        snprintf(what, sizeof(what), "case %zu", i);
        expect_error(what, path, RCOLL_ERR_INVALID_ARG, cases[i].line, cases[i].needle);
    }
    /* A NUL byte inside NCCL XML is an error, not a blank (it used to pass for one). */
    static const char nul_xml[] = "<system version=\"1\">\n<cpu numaid=\"0\"\0 affinity=\"1\"/>"
                                  "\n</system>\n";
    char nul_path[600];
    snprintf(nul_path, sizeof(nul_path), "%s/nul.xml", tmpdir);
    FILE *nf = fopen(nul_path, "wb");
    if (nf) {
        fwrite(nul_xml, 1, sizeof(nul_xml) - 1, nf);
        fclose(nf);
    }
    expect_error("NUL byte in XML", nul_path, RCOLL_ERR_INVALID_ARG, 2, "");
#if RCOLL_HAVE_HWLOC
    /* Well-formed XML that hwloc rejects: no line from hwloc, but a clear message. */
    const char *hw = write_tmp("badhwloc.xml", "<topology version=\"2.0\">\n<object type=\"Bogus\"/>"
                                               "\n</topology>\n");
    expect_error("hwloc rejects", hw, RCOLL_ERR_INVALID_ARG, 0, "hwloc could not load it");
#endif
}

/* ---- fuzz: truncations and byte flips of every fixture never crash or leak ---- */
static unsigned long lcg = 12345;
static unsigned rnd(void)
{
    lcg = lcg * 6364136223846793005ul + 1442695040888963407ul;
    return (unsigned)(lcg >> 33);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20);
    *len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    return buf;
}

static void fuzz_one(const char *name, int xml)
{
    size_t len;
    char *orig = slurp(fx(name), &len);
    CHECK(orig != NULL, "read %s", name);
    if (!orig) return;
    char *buf = malloc(len + 1);
    int loaded = 0, failed = 0, bad_msg = 0;
    for (int k = 0; k < 1500; k++) {
        size_t n = len;
        memcpy(buf, orig, len);
        if (k < 500) {
            n = (size_t)k * len / 500; /* truncations */
        } else {
            int flips = 1 + (int)(rnd() % 4);
            static const char junk[] = "{}[]\",:<>/=&;-\n \\0x9eE.\"'!";
            for (int f = 0; f < flips; f++)
                buf[rnd() % len] = (rnd() & 1) ? (char)(rnd() & 0xff) : junk[rnd() % (sizeof(junk) - 1)];
        }
        rcoll_topo_t *t = NULL;
        /* Exactly n bytes: the copy below has no terminator for the parser to lean on. */
        char *exact = malloc(n ? n : 1);
        memcpy(exact, buf, n);
        rcoll_status_t st = xml ? topo_load_nccl_xml(name, exact, n, &t)
                                : topo_load_json(name, exact, n, &t);
        free(exact);
        if (st == RCOLL_OK) {
            loaded++;
            rcoll_topo_free(t);
        } else {
            failed++;
            if (!strstr(rcoll_err_get(), "topology file")) bad_msg++;
        }
    }
    CHECK(bad_msg == 0, "%s fuzz: %d errors without the file named", name, bad_msg);
    CHECK(loaded > 0 && failed > 0, "%s fuzz: %d loaded, %d rejected", name, loaded, failed);
    free(buf);
    free(orig);
}

static void test_fuzz(void)
{
    fuzz_one("dgx8_nvswitch.json", 0);
    fuzz_one("pcie4.json", 0);
    fuzz_one("nvlink2.json", 0);
    fuzz_one("dgx8_nvswitch.xml", 1);
}

/* ---- dump -> load ---- */
static char *dump_text(const rcoll_topo_t *t, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    if (rcoll_topo_dump_file(t, path)) return NULL;
    size_t len;
    char *s = slurp(path, &len);
    if (s) s[len < (1 << 20) ? len : (1 << 20) - 1] = '\0';
    return s;
}

static void round_trip(const char *what, rcoll_topo_t *t)
{
    if (!t) return;
    char *a = dump_text(t, "rt1.json");
    CHECK(a != NULL, "%s: dump: %s", what, rcoll_err_get());
    char path[512];
    snprintf(path, sizeof(path), "%s/rt1.json", tmpdir);
    rcoll_topo_t *u = NULL;
    rcoll_status_t st = rcoll_topo_load_file(path, &u);
    CHECK(st == RCOLL_OK, "%s: reload: %s", what, rcoll_err_get());
    if (!st && a) {
        char *b = dump_text(u, "rt2.json");
        CHECK(b && !strcmp(a, b), "%s: dump(load(dump)) == dump", what);
        int nd = rcoll_topo_ngpus(t) + rcoll_topo_nnics(t);
        CHECK(rcoll_topo_ngpus(u) == rcoll_topo_ngpus(t) && rcoll_topo_nnics(u) == rcoll_topo_nnics(t) &&
                  rcoll_topo_ncpus(u) == rcoll_topo_ncpus(t) && !strcmp(rcoll_topo_host(u), rcoll_topo_host(t)),
              "%s: same counts and host", what);
        for (int d = 0; d < nd && rcoll_topo_ngpus(u) == rcoll_topo_ngpus(t); d++) {
            char r1[512], r2[512];
            row(t, d, r1, sizeof(r1));
            row(u, d, r2, sizeof(r2));
            CHECK(!strcmp(r1, r2), "%s: row %d equal after reload", what, d);
        }
        for (int g = 0; g < rcoll_topo_ngpus(t) && g < rcoll_topo_ngpus(u); g++) {
            const rcoll_topo_gpu_t *x = rcoll_topo_gpu(t, g), *y = rcoll_topo_gpu(u, g);
            double dl = x->link_gbs - y->link_gbs;
            CHECK(x->index == y->index && !strcmp(x->pci, y->pci) && !strcmp(x->name, y->name) &&
                      x->numa == y->numa && x->cpu == y->cpu &&
                      x->nvswitch_links == y->nvswitch_links && dl < 1e-3 && dl > -1e-3,
                  "%s: GPU %d fields equal", what, g);
        }
        for (int i = 0; i < rcoll_topo_nnics(t) && i < rcoll_topo_nnics(u); i++) {
            const rcoll_topo_nic_t *x = rcoll_topo_nic(t, i), *y = rcoll_topo_nic(u, i);
            CHECK(!strcmp(x->name, y->name) && !strcmp(x->pci, y->pci) && x->numa == y->numa &&
                      x->rdma == y->rdma && x->port == y->port && !strcmp(x->state, y->state) &&
                      !strcmp(x->link_layer, y->link_layer) && x->speed_mbps == y->speed_mbps &&
                      !strcmp(x->netdev, y->netdev) && x->cpu == y->cpu,
                  "%s: NIC %d fields equal", what, i);
        }
        free(b);
    }
    rcoll_topo_free(u);
    free(a);
}

static void test_round_trip(void)
{
    static const char *const files[] = {"dgx8_nvswitch.json", "dgx8_nvswitch.xml", "pcie4.json",
                                        "nvlink2.json", "vm_flat.json", "nvl_islands.json",
#if RCOLL_HAVE_HWLOC
                                        "hwloc_2socket.xml",
#endif
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        rcoll_topo_t *t = load(files[i]);
        round_trip(files[i], t);
        rcoll_topo_free(t);
    }
}

/* ---- live ---- */
static void test_live(void)
{
    rcoll_topo_t *t = NULL, *s = NULL;
    rcoll_status_t st = rcoll_topo_detect(NULL, &t);
    CHECK(st == RCOLL_OK, "live detection: %s", rcoll_err_get());
    if (t) {
        printf("live (%s): %d packages, %d GPUs, %d NICs\n", rcoll_topo_source(t),
               rcoll_topo_ncpus(t), rcoll_topo_ngpus(t), rcoll_topo_nnics(t));
        for (int g = 0; g < rcoll_topo_ngpus(t); g++) rcoll_topo_gpu_nic(t, g);
        round_trip("live", t);
    }
    st = topo_sysfs_detect("/sys", 0, &s);
    CHECK(st == RCOLL_OK, "sysfs detection: %s", rcoll_err_get());
    if (t && s) {
        printf("sysfs: %d packages, %d GPUs, %d NICs\n", rcoll_topo_ncpus(s), rcoll_topo_ngpus(s),
               rcoll_topo_nnics(s));
        CHECK(rcoll_topo_ngpus(s) == rcoll_topo_ngpus(t), "sysfs and %s agree on GPUs",
              rcoll_topo_source(t));
        if (rcoll_topo_ncpus(s) != rcoll_topo_ncpus(t)) /* containers may hide one of them */
            printf("note: sysfs sees %d packages, %s %d\n", rcoll_topo_ncpus(s),
                   rcoll_topo_source(t), rcoll_topo_ncpus(t));
        round_trip("sysfs", s);
    }
    rcoll_topo_free(t);
    rcoll_topo_free(s);

    /* RCOLL_TOPO_FILE and RCOLL_TOPO_DUMP_FILE through the configuration. */
    char dump[512];
    snprintf(dump, sizeof(dump), "%s/dumped.json", tmpdir);
    setenv("RCOLL_TOPO_FILE", fx("pcie4.json"), 1);
    setenv("RCOLL_TOPO_DUMP_FILE", dump, 1);
    rcoll_config_t cfg;
    CHECK(rcoll_config_load(&cfg) == RCOLL_OK, "config with topo knobs");
    t = NULL;
    CHECK(rcoll_topo_detect(&cfg.topo, &t) == RCOLL_OK && rcoll_topo_ngpus(t) == 4 &&
              !strcmp(rcoll_topo_host(t), "pcie4"), "RCOLL_TOPO_FILE used");
    rcoll_topo_free(t);
    t = NULL;
    CHECK(rcoll_topo_load_file(dump, &t) == RCOLL_OK && rcoll_topo_ngpus(t) == 4,
          "RCOLL_TOPO_DUMP_FILE written and loadable");
    check_matrix("pcie4 via dump", t, pcie4_exp, 5);
    rcoll_topo_free(t);
    setenv("RCOLL_TOPO_FILE", fx("bad_missing_comma.json"), 1);
    CHECK(rcoll_config_load(&cfg) == RCOLL_OK, "config");
    t = NULL;
    CHECK(rcoll_topo_detect(&cfg.topo, &t) == RCOLL_ERR_INVALID_ARG && !t &&
              strstr(rcoll_err_get(), "RCOLL_TOPO_FILE: topology file") &&
              strstr(rcoll_err_get(), "line 5"), "bad RCOLL_TOPO_FILE: %s", rcoll_err_get());
    setenv("RCOLL_TOPO_FILE", fx("pcie4.json"), 1);
    setenv("RCOLL_TOPO_DUMP_FILE", "/nonexistent-dir/x.json", 1);
    CHECK(rcoll_config_load(&cfg) == RCOLL_OK, "config");
    CHECK(rcoll_topo_detect(&cfg.topo, &t) == RCOLL_ERR_SYSTEM && !t &&
              strstr(rcoll_err_get(), "RCOLL_TOPO_DUMP_FILE"), "unwritable dump: %s", rcoll_err_get());
    unsetenv("RCOLL_TOPO_FILE");
    unsetenv("RCOLL_TOPO_DUMP_FILE");
}

/* ---- the sysfs reader on a fake tree: the machine of hwloc_2socket.xml plus a virtio NIC ---- */
static void mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(tmp, 0755);
        *p = '/';
    }
    mkdir(tmp, 0755);
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[1024], dir[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void link_to(const char *root, const char *rel, const char *target_rel)
{
    char path[1024], target[1024], dir[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(target, sizeof(target), "%s/%s", root, target_rel);
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    if (symlink(target, path)) perror(path);
}

static void pci_dev(const char *root, const char *devpath, const char *vendor, const char *cls,
                    const char *numa)
{
    char rel[512];
    const char *busid = strrchr(devpath, '/') + 1;
    snprintf(rel, sizeof(rel), "devices/%s/vendor", devpath);
    put(root, rel, vendor);
    snprintf(rel, sizeof(rel), "devices/%s/class", devpath);
    put(root, rel, cls);
    snprintf(rel, sizeof(rel), "devices/%s/device", devpath);
    put(root, rel, "0x20b0\n");
    snprintf(rel, sizeof(rel), "devices/%s/numa_node", devpath);
    put(root, rel, numa);
    snprintf(rel, sizeof(rel), "devices/%s/current_link_speed", devpath);
    put(root, rel, "16.0 GT/s PCIe\n");
    snprintf(rel, sizeof(rel), "devices/%s/current_link_width", devpath);
    put(root, rel, "16\n");
    char target[512];
    snprintf(rel, sizeof(rel), "bus/pci/devices/%s", busid);
    snprintf(target, sizeof(target), "devices/%s", devpath);
    link_to(root, rel, target);
}

static void test_fake_sysfs(void)
{
    char root[512];
    snprintf(root, sizeof(root), "%s/sys", tmpdir);
    put(root, "devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
    put(root, "devices/system/cpu/cpu1/topology/physical_package_id", "0\n");
    put(root, "devices/system/cpu/cpu2/topology/physical_package_id", "1\n");
    put(root, "devices/system/cpu/cpu3/topology/physical_package_id", "1\n");
    put(root, "devices/system/node/node0/cpulist", "0-1\n");
    put(root, "devices/system/node/node1/cpulist", "2-3\n");
    const char *rp = "pci0000:00/0000:00:01.0", *up = "pci0000:00/0000:00:01.0/0000:01:00.0";
    pci_dev(root, rp, "0x8086\n", "0x060400\n", "0\n");
    pci_dev(root, up, "0x10b5\n", "0x060400\n", "0\n");
    pci_dev(root, "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0", "0x10b5\n", "0x060400\n", "0\n");
    pci_dev(root, "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0", "0x10b5\n", "0x060400\n", "0\n");
    pci_dev(root, "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", "0x10de\n",
            "0x030200\n", "0\n");
    const char *nic = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0";
    pci_dev(root, nic, "0x15b3\n", "0x020700\n", "0\n");
    pci_dev(root, "pci0000:80/0000:80:01.0", "0x8086\n", "0x060400\n", "1\n");
    pci_dev(root, "pci0000:80/0000:80:01.0/0000:81:00.0", "0x10de\n", "0x030200\n", "1\n");
    pci_dev(root, "pci0000:80/0000:80:02.0", "0x1af4\n", "0x020000\n", "1\n");
    char rel[512];
    snprintf(rel, sizeof(rel), "devices/%s", nic);
    link_to(root, "class/infiniband/mlx5_0/device", rel);
    put(root, "class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
    put(root, "class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
    put(root, "class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)\n");
    snprintf(rel, sizeof(rel), "devices/%s/net/ib0/type", nic);
    put(root, rel, "32\n");
    snprintf(rel, sizeof(rel), "devices/%s", nic);
    link_to(root, "class/net/ib0/device", rel);
    put(root, "devices/pci0000:80/0000:80:02.0/virtio1/net/eth0/type", "1\n");
    link_to(root, "class/net/eth0/device", "devices/pci0000:80/0000:80:02.0/virtio1");
    put(root, "class/net/eth0/speed", "25000\n");
    put(root, "class/net/eth0/operstate", "up\n");
    put(root, "class/net/eth0/type", "1\n");
    put(root, "class/net/lo/type", "772\n"); /* no device link: virtual */

    rcoll_topo_t *t = NULL;
    rcoll_status_t st = topo_sysfs_detect(root, 0, &t);
    CHECK(st == RCOLL_OK, "fake sysfs: %s", rcoll_err_get());
    if (!t) return;
    check_matrix("fake sysfs", t, fakesys_exp, 4);
    CHECK(rcoll_topo_ncpus(t) == 2 && !strcmp(rcoll_topo_cpulist(t, 1), "2-3") &&
              rcoll_topo_cpu(t, 1)->numa == 1, "fake sysfs: packages and NUMA");
    const rcoll_topo_nic_t *m = rcoll_topo_nic(t, 0), *e = rcoll_topo_nic(t, 1);
    CHECK(m && m->rdma && !strcmp(m->name, "mlx5_0") && m->port == 1 && !strcmp(m->state, "active") &&
              !strcmp(m->link_layer, "ib") && m->speed_mbps == 200000 && !strcmp(m->netdev, "ib0") &&
              m->numa == 0 && m->cpu == 0,
          "fake sysfs: RDMA port details (%s %s %s %lld %s)", m ? m->name : "-", m ? m->state : "-",
          m ? m->link_layer : "-", m ? m->speed_mbps : 0, m ? m->netdev : "-");
    CHECK(e && !e->rdma && !strcmp(e->name, "eth0") && !strcmp(e->pci, "0000:80:02.0") &&
              e->speed_mbps == 25000 && !strcmp(e->state, "up") && !strcmp(e->link_layer, "eth") &&
              e->numa == 1, "fake sysfs: virtio NIC found through its PCI parent");
    CHECK(rcoll_topo_nnics(t) == 2, "ib0 is mlx5_0's netdev, lo is virtual: 2 NICs");
    const rcoll_topo_gpu_t *g = rcoll_topo_gpu(t, 0);
    CHECK(g && !strcmp(g->pci, "0000:03:00.0") && g->numa == 0 && g->cpu == 0 &&
              g->link_gbs > 31 && g->link_gbs < 32, "fake sysfs: GPU 0 fields");
    char why[200];
    rcoll_topo_explain_gpu_nic(t, 1, 1, why, sizeof(why));
    CHECK(strstr(why, "host bridge pci0000:80") != NULL, "fake sysfs: host bridge named: %s", why);
    round_trip("fake sysfs", t);
    rcoll_topo_free(t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_topo FIXTURES_DIR\n");
        return 2;
    }
    fixtures = argv[1];
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/rcoll-test-topo-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_path_names();
    test_matrices();
    test_nic_and_gdr();
    test_ring();
    test_ring_by_chain();
    test_bad_files();
    test_fuzz();
    test_round_trip();
    test_live();
    test_fake_sysfs();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_summary();
}
