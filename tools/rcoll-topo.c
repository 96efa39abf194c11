/*
 * rcoll-topo - what rcoll sees of this host: the path matrix between GPUs and NICs (like
 * `nvidia-smi topo -m`), each GPU's closest NIC and GPUDirect RDMA verdict, and for a rank
 * layout (--ranks) the ring order and the transport the library would use for each pair of
 * ranks (core/pair.c's decision, the same function the library calls).  Reads a
 * topology file instead of detecting with --topo-file (or RCOLL_TOPO_FILE).  Read-only: it
 * creates no communicator.  Exit status: 0, or 2 for a bad file or bad arguments.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "core/config.h"
#include "core/pair.h"
#include "transport/ncclnet.h"
#include "util/status.h"

#define MAX_RANKS 4096

static void usage(FILE *out)
{
    fprintf(out,
            "usage: rcoll-topo [--topo-file FILE] [--ranks HOST:GPU,...] [--json] [--dump FILE]\n"
            "  (no option)         detect this host (hwloc/sysfs, NVML) and print the path\n"
            "                      matrix, each GPU's closest NIC and GPUDirect RDMA verdict\n"
            "  -f, --topo-file F   read the topology from F (rcoll JSON, hwloc XML, NCCL XML)\n"
            "                      instead of detecting it (default: RCOLL_TOPO_FILE)\n"
            "  -r, --ranks LIST    rank layout, rank r = r-th HOST:GPU (GPU -1 or omitted: no\n"
            "                      GPU), e.g. a:0,a:1,b:0,b:1; prints the ring order and the\n"
            "                      transport the library would use for every pair of ranks\n"
            "                      (every host is assumed to look like this one; RCOLL_TRANSPORT,\n"
            "                      RCOLL_NET and RCOLL_SHM_DISABLE apply)\n"
            "  -j, --json          the same as JSON\n"
            "  -d, --dump F        also write the topology to F as rcoll JSON ('-' = stdout)\n"
            "  -h, --help          this text\n"
            "GPUDirect RDMA is reported possible up to PXB (GPU-NIC path).\n");
}

typedef struct {
    int n;
    char *hosts[MAX_RANKS];
    int gpus[MAX_RANKS];
} ranks_t;

static int parse_ranks(const char *arg, const rcoll_topo_t *t, ranks_t *r)
{
    char *copy = strdup(arg), *save = NULL;
    if (!copy) return -1;
    r->n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (r->n == MAX_RANKS) {
            fprintf(stderr, "rcoll-topo: --ranks: more than %d ranks\n", MAX_RANKS);
            goto err;
        }
        char *colon = strrchr(tok, ':');
        int gpu = -1;
        if (colon) {
            char *end;
            long g = strtol(colon + 1, &end, 10);
            if (end == colon + 1 || *end || g < -1 || g >= rcoll_topo_ngpus(t)) {
                fprintf(stderr, "rcoll-topo: --ranks: '%s': the GPU must be -1 or 0..%d\n", tok,
                        rcoll_topo_ngpus(t) - 1);
                goto err;
            }
            gpu = (int)g;
            *colon = '\0';
        }
        if (!tok[0]) {
            fprintf(stderr, "rcoll-topo: --ranks: rank %d has no host name\n", r->n);
            goto err;
        }
        r->hosts[r->n] = strdup(tok);
        if (!r->hosts[r->n]) goto err;
        r->gpus[r->n++] = gpu;
    }
    free(copy);
    if (!r->n) {
        fprintf(stderr, "rcoll-topo: --ranks: empty list\n");
        return -1;
    }
    return 0;
err:
    free(copy);
    return -1;
}

/* Device d of the matrix: GPUs first, then NICs. */
static void dev_label(const rcoll_topo_t *t, int d, char *buf, size_t len)
{
    int ng = rcoll_topo_ngpus(t);
    if (d < ng) snprintf(buf, len, "GPU%d", d);
    else snprintf(buf, len, "NIC%d", d - ng);
}

static void cell(const rcoll_topo_t *t, int a, int b, char *buf, size_t len, int *nvlinks)
{
    int ng = rcoll_topo_ngpus(t), links = 0;
    rcoll_path_t p;
    if (a == b) {
        snprintf(buf, len, "X");
        if (nvlinks) *nvlinks = 0;
        return;
    }
    if (a < ng && b < ng) p = rcoll_topo_path_gpu_gpu(t, a, b, &links);
    else if (a < ng) p = rcoll_topo_path_gpu_nic(t, a, b - ng);
    else if (b < ng) p = rcoll_topo_path_gpu_nic(t, b, a - ng);
    else p = rcoll_topo_path_nic_nic(t, a - ng, b - ng);
    if (p == RCOLL_PATH_NVL) snprintf(buf, len, "NV%d", links);
    else snprintf(buf, len, "%s", rcoll_path_name(p));
    if (nvlinks) *nvlinks = links;
}

static void print_matrix(const rcoll_topo_t *t, rcoll_path_t p2p_level, rcoll_path_t gdr_level)
{
    int ng = rcoll_topo_ngpus(t), nn = rcoll_topo_nnics(t), nd = ng + nn;
    printf("host %s, topology from %s: %d CPU package%s, %d GPU%s, %d NIC%s\n\n",
           rcoll_topo_host(t)[0] ? rcoll_topo_host(t) : "?", rcoll_topo_source(t),
           rcoll_topo_ncpus(t), rcoll_topo_ncpus(t) == 1 ? "" : "s", ng, ng == 1 ? "" : "s", nn,
           nn == 1 ? "" : "s");
    if (!nd) {
        printf("no GPUs and no NICs\n");
        return;
    }
    char lab[32], c[32];
    printf("%-7s", "");
    for (int b = 0; b < nd; b++) {
        dev_label(t, b, lab, sizeof(lab));
        printf(" %-6s", lab);
    }
    printf(" %-16s %s\n", "CPU Affinity", "NUMA Affinity");
    for (int a = 0; a < nd; a++) {
        dev_label(t, a, lab, sizeof(lab));
        printf("%-7s", lab);
        for (int b = 0; b < nd; b++) {
            cell(t, a, b, c, sizeof(c), NULL);
            printf(" %-6s", c);
        }
        int cpu = a < ng ? rcoll_topo_gpu(t, a)->cpu : rcoll_topo_nic(t, a - ng)->cpu;
        int numa = a < ng ? rcoll_topo_gpu(t, a)->numa : rcoll_topo_nic(t, a - ng)->numa;
        const char *cl = rcoll_topo_cpulist(t, cpu);
        char nb[16];
        snprintf(nb, sizeof(nb), "%d", numa);
        printf(" %-16s %s\n", cl[0] ? cl : "N/A", numa >= 0 ? nb : "N/A");
    }
    if (nn) {
        printf("\nNICs:\n");
        for (int i = 0; i < nn; i++) {
            const rcoll_topo_nic_t *n = rcoll_topo_nic(t, i);
            char port[48] = "", speed[32] = "speed ?";
            if (n->rdma)
                snprintf(port, sizeof(port), "RDMA port %d%s%s", n->port, n->state[0] ? " " : "",
                         n->state);
            else snprintf(port, sizeof(port), "plain NIC%s%s", n->state[0] ? " " : "", n->state);
            if (n->speed_mbps) snprintf(speed, sizeof(speed), "%g Gb/s", (double)n->speed_mbps / 1000.0);
            printf("  NIC%-3d %-10s %s, %s, %s%s%s, PCI %s\n", i, n->name, port,
                   n->link_layer[0] ? n->link_layer : "link ?", speed,
                   n->netdev[0] ? ", netdev " : "", n->netdev, n->pci[0] ? n->pci : "none");
        }
    }
    if (ng) {
        printf("\nGPU -> closest NIC, GPUDirect RDMA possible up to %s:\n",
               rcoll_path_name(gdr_level));
        for (int g = 0; g < ng; g++) {
            int nic = rcoll_topo_gpu_nic(t, g);
            if (nic < 0) {
                printf("  GPU%-3d -> none\n", g);
                continue;
            }
            char reason[400];
            int ok = rcoll_topo_gdr_allowed(t, g, nic, gdr_level, reason, sizeof(reason));
            printf("  GPU%-3d -> NIC%d %-10s %s  GDR %s: %s\n", g, nic, rcoll_topo_nic(t, nic)->name,
                   rcoll_path_name(rcoll_topo_path_gpu_nic(t, g, nic)), ok ? "yes" : "no", reason);
        }
    }
    if (ng > 1) { /* what RCOLL_CUDA_IPC's set-up decides from this graph (core/api_ipc.c) */
        printf("\nGPU pairs, CUDA IPC allowed up to %s (RCOLL_P2P_LEVEL):\n",
               rcoll_path_name(p2p_level));
        for (int a = 0; a < ng; a++)
            for (int b = a + 1; b < ng; b++) {
                char why[200] = "";
                rcoll_path_t p = rcoll_topo_explain_gpu_gpu(t, a, b, NULL, why, sizeof(why));
                printf("  GPU%d-GPU%-3d %s  IPC %s: %s\n", a, b, rcoll_path_name(p),
                       p <= p2p_level ? "yes" : "no", why);
            }
    }
    printf("\nLegend:\n"
           "  X    = self\n"
           "  LOC  = the same device (two ports of one NIC)\n"
           "  NV#  = NVLink with # links (direct, or both GPUs on NVSwitch)\n"
           "  NVB  = NVLink through a third GPU\n"
           "  PIX  = at most one PCIe switch between them\n"
           "  PXB  = several PCIe switches, without crossing a host bridge\n"
           "  PHB  = through a PCIe host bridge (same CPU package)\n"
           "  SYS  = across CPU packages (QPI/UPI/xGMI)\n");
}

/* A usable RDMA port in the topology (every host is assumed to look like this one). */
static const rcoll_topo_nic_t *usable_rdma_port(const rcoll_topo_t *t)
{
    for (int i = 0; i < rcoll_topo_nnics(t); i++) {
        const rcoll_topo_nic_t *n = rcoll_topo_nic(t, i);
        if (n->rdma && strcmp(n->state, "down")) return n;
    }
    return NULL;
}

/* RCOLL_NET_PLUGIN, "" when unset: the NCCL net plugin ("plugin" transport) listens only then
 * (whether the plugin would load and find a device is not checked: nothing is loaded here). */
static const char *net_plugin(void)
{
    static rcoll_ncclnet_config_t nc;
    static int done;
    if (!done && rcoll_config_parse(&rcoll_ncclnet_config_table, &nc) != RCOLL_OK)
        nc.plugin[0] = '\0';
    done = 1;
    return nc.plugin;
}

/* A layout rank as the rank table would describe it: its host, and the transports it would
 * listen on: those its configuration allows (core/pair.c) that this topology can carry
 * (verbs needs an RDMA port that is not down; the NCCL net plugin needs RCOLL_NET_PLUGIN;
 * shared memory and TCP work everywhere). */
static rcoll_pair_end_t layout_end(const rcoll_topo_t *t, const rcoll_config_t *cfg,
                                   const char *host)
{
    rcoll_pair_end_t e = {.host = 1469598103934665603ull, .listens = 0};
    for (const char *q = host; *q; q++) e.host = (e.host ^ (unsigned char)*q) * 1099511628211ull;
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    for (size_t i = 0; i < n; i++) {
        if (!rcoll_pair_allowed(cfg, list[i], NULL, 0)) continue;
        if (!strcmp(list[i]->name, "verbs") && !usable_rdma_port(t)) continue;
        if (!strcmp(list[i]->name, "plugin") && !net_plugin()[0]) continue;
        e.listens |= 1u << i;
    }
    return e;
}

/* The library's transport for ranks a and b of the layout (core/pair.c), the path between
 * them (GPU-GPU on one host, NET across hosts, LOC on one host without GPUs) and why. */
static const char *layout_pair(const rcoll_topo_t *t, const rcoll_config_t *cfg,
                               const ranks_t *r, int a, int b, rcoll_path_t *path, char *why,
                               size_t len)
{
    rcoll_pair_end_t ea = layout_end(t, cfg, r->hosts[a]), eb = layout_end(t, cfg, r->hosts[b]);
    int tr = rcoll_pair_transport(&ea, &eb);
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    int same = !strcmp(r->hosts[a], r->hosts[b]);
    int ng = rcoll_topo_ngpus(t), ga = r->gpus[a], gb = r->gpus[b];
    char gp[300] = "";
    *path = same ? RCOLL_PATH_LOC : RCOLL_PATH_NET;
    if (same && ga >= 0 && gb >= 0 && ga < ng && gb < ng && ga != gb) {
        int links;
        char how[240];
        *path = rcoll_topo_explain_gpu_gpu(t, ga, gb, &links, how, sizeof(how));
        snprintf(gp, sizeof(gp), "; GPUs %d and %d are %s (%s)", ga, gb,
                 rcoll_path_name(*path), how);
    }
    if (tr < 0) {
        snprintf(why, len, "no transport both ranks would listen on (check RCOLL_TRANSPORT, "
                 "RCOLL_NET, RCOLL_SHM_DISABLE)");
        return "none";
    }
    const rcoll_topo_nic_t *nic = usable_rdma_port(t);
    if (list[tr]->host_local)
        snprintf(why, len, "same host: %s%s", list[tr]->name, gp);
    else if (!strcmp(list[tr]->name, "plugin"))
        snprintf(why, len, "%s; NCCL net plugin RCOLL_NET_PLUGIN=%s", same ?
                 "same host, shared memory not allowed" : "different hosts", net_plugin());
    else if (!strcmp(list[tr]->name, "verbs"))
        snprintf(why, len, "%s; RDMA port %s", same ? "same host, shared memory not allowed"
                 : "different hosts", nic ? nic->name : "?");
    else
        snprintf(why, len, "%s; %s", same ? "same host, shared memory not allowed"
                 : "different hosts", nic ? "verbs not allowed or not built"
                 : "no RDMA port that is not down");
    return list[tr]->name;
}

static int ring_edge(const int *order, int n, int a, int b)
{
    for (int i = 0; i < n && n > 1; i++) {
        int x = order[i], y = order[(i + 1) % n];
        if ((x == a && y == b) || (x == b && y == a)) return 1;
    }
    return 0;
}

static void print_ranks(const rcoll_topo_t *t, const rcoll_config_t *cfg, const ranks_t *r,
                        const int *order)
{
    printf("\nRanks:");
    for (int i = 0; i < r->n; i++) printf(" %d=%s:%d", i, r->hosts[i], r->gpus[i]);
    printf("\nRing order:");
    for (int i = 0; i < r->n; i++)
        printf("%s %d", i && strcmp(r->hosts[order[i]], r->hosts[order[i - 1]]) ? " |" : "",
               order[i]);
    printf("\n\nTransports the library would use (the decision of core/pair.c; * = ring "
           "neighbours):\n");
    for (int a = 0; a < r->n; a++)
        for (int b = a + 1; b < r->n; b++) {
            char reason[800];
            rcoll_path_t p;
            const char *tr = layout_pair(t, cfg, r, a, b, &p, reason, sizeof(reason));
            printf("  %s %3d - %-3d %-6s %-4s %s\n", ring_edge(order, r->n, a, b) ? "*" : " ", a,
                   b, tr, rcoll_path_name(p), reason);
        }
}

/* ---- JSON ---- */
static void jstr(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_json(const rcoll_topo_t *t, const rcoll_config_t *cfg, const ranks_t *r,
                       const int *order)
{
    int ng = rcoll_topo_ngpus(t), nn = rcoll_topo_nnics(t), nd = ng + nn;
    printf("{\n  \"host\": ");
    jstr(rcoll_topo_host(t));
    printf(",\n  \"source\": ");
    jstr(rcoll_topo_source(t));
    printf(",\n  \"gdr_level\": \"%s\",\n  \"p2p_level\": \"%s\",\n  \"cpus\": [",
           rcoll_path_name((rcoll_path_t)cfg->topo.gdr_level),
           rcoll_path_name((rcoll_path_t)cfg->topo.p2p_level));
    for (int i = 0; i < rcoll_topo_ncpus(t); i++) {
        const rcoll_topo_cpu_t *c = rcoll_topo_cpu(t, i);
        printf("%s\n    {\"id\": %d, \"numa\": %d, \"cpulist\": ", i ? "," : "", c->id, c->numa);
        jstr(c->cpulist);
        putchar('}');
    }
    printf("\n  ],\n  \"gpus\": [");
    for (int g = 0; g < ng; g++) {
        const rcoll_topo_gpu_t *x = rcoll_topo_gpu(t, g);
        int nic = rcoll_topo_gpu_nic(t, g);
        char reason[400] = "no NIC";
        int ok = nic >= 0 && rcoll_topo_gdr_allowed(t, g, nic, (rcoll_path_t)cfg->topo.gdr_level,
                                                    reason, sizeof(reason));
        printf("%s\n    {\"index\": %d, \"pci\": ", g ? "," : "", g);
        jstr(x->pci);
        printf(", \"name\": ");
        jstr(x->name);
        printf(", \"numa\": %d, \"cpu\": %d, \"nvswitch_links\": %d, \"nic\": ", x->numa, x->cpu,
               x->nvswitch_links);
        if (nic >= 0) jstr(rcoll_topo_nic(t, nic)->name);
        else printf("null");
        printf(", \"nic_index\": %d, \"nic_path\": ", nic);
        if (nic >= 0) printf("\"%s\"", rcoll_path_name(rcoll_topo_path_gpu_nic(t, g, nic)));
        else printf("null");
        printf(", \"gdr\": %s, \"gdr_reason\": ", ok ? "true" : "false");
        jstr(reason);
        putchar('}');
    }
    printf("\n  ],\n  \"nics\": [");
    for (int i = 0; i < nn; i++) {
        const rcoll_topo_nic_t *n = rcoll_topo_nic(t, i);
        printf("%s\n    {\"index\": %d, \"label\": \"NIC%d\", \"name\": ", i ? "," : "", i, i);
        jstr(n->name);
        printf(", \"pci\": ");
        jstr(n->pci);
        printf(", \"numa\": %d, \"rdma\": %s, \"port\": %d, \"state\": ", n->numa,
               n->rdma ? "true" : "false", n->port);
        jstr(n->state);
        printf(", \"link_layer\": ");
        jstr(n->link_layer);
        printf(", \"speed_mbps\": %lld, \"netdev\": ", n->speed_mbps);
        jstr(n->netdev);
        putchar('}');
    }
    printf("\n  ],\n  \"pairs\": [");
    int first = 1;
    for (int a = 0; a < nd; a++)
        for (int b = a + 1; b < nd; b++) {
            char la[32], lb[32], c[32];
            int links;
            dev_label(t, a, la, sizeof(la));
            dev_label(t, b, lb, sizeof(lb));
            cell(t, a, b, c, sizeof(c), &links);
            rcoll_path_t p;
            if (a < ng && b < ng) p = rcoll_topo_path_gpu_gpu(t, a, b, NULL);
            else if (a < ng) p = rcoll_topo_path_gpu_nic(t, a, b - ng);
            else p = rcoll_topo_path_nic_nic(t, a - ng, b - ng);
            printf("%s\n    {\"a\": \"%s\", \"b\": \"%s\", \"path\": \"%s\", \"nvlinks\": %d",
                   first ? "" : ",", la, lb, rcoll_path_name(p), links);
            if (a < ng && b < ng) /* GPU pairs: would the CUDA IPC set-up allow it? */
                printf(", \"ipc\": %s", p <= (rcoll_path_t)cfg->topo.p2p_level ? "true" : "false");
            putchar('}');
            first = 0;
        }
    printf("\n  ]");
    if (r) {
        printf(",\n  \"ranks\": [");
        for (int i = 0; i < r->n; i++) {
            printf("%s{\"rank\": %d, \"host\": ", i ? ", " : "", i);
            jstr(r->hosts[i]);
            printf(", \"gpu\": %d}", r->gpus[i]);
        }
        printf("],\n  \"ring\": [");
        for (int i = 0; i < r->n; i++) printf("%s%d", i ? ", " : "", order[i]);
        printf("],\n  \"transports\": [");
        first = 1;
        for (int a = 0; a < r->n; a++)
            for (int b = a + 1; b < r->n; b++) {
                char reason[800];
                rcoll_path_t p;
                const char *tr = layout_pair(t, cfg, r, a, b, &p, reason, sizeof(reason));
                printf("%s\n    {\"a\": %d, \"b\": %d, \"transport\": \"%s\", \"path\": \"%s\", "
                       "\"ring_edge\": %s, \"reason\": ", first ? "" : ",", a, b, tr,
                       rcoll_path_name(p),
                       ring_edge(order, r->n, a, b) ? "true" : "false");
                jstr(reason);
                putchar('}');
                first = 0;
            }
        printf("\n  ]");
    }
    printf("\n}\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"topo-file", required_argument, NULL, 'f'},
                                          {"ranks", required_argument, NULL, 'r'},
                                          {"json", no_argument, NULL, 'j'},
                                          {"dump", required_argument, NULL, 'd'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    const char *file = NULL, *ranks_arg = NULL, *dump = NULL;
    int json = 0, c;
    while ((c = getopt_long(argc, argv, "f:r:jd:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': file = optarg; break;
        case 'r': ranks_arg = optarg; break;
        case 'j': json = 1; break;
        case 'd': dump = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rcoll-topo: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    static rcoll_config_t cfg;
    if (rcoll_config_load(&cfg)) {
        fprintf(stderr, "rcoll-topo: %s\n", rcoll_err_get());
        return 2;
    }
    cfg.topo.topo_dump_file[0] = '\0'; /* --dump is written below, after the report */
    rcoll_topo_t *t;
    if (file ? rcoll_topo_load_file(file, &t) : rcoll_topo_detect(&cfg.topo, &t)) {
        fprintf(stderr, "rcoll-topo: %s\n", rcoll_err_get());
        return 2;
    }
    static ranks_t ranks;
    int *order = NULL, rc = 0;
    if (ranks_arg) {
        if (parse_ranks(ranks_arg, t, &ranks)) {
            rc = 2;
            goto out;
        }
        /* the ring as the library builds it: each rank's GPU's place in its (this) machine's
         * GPU chain, then rcoll_topo_ring_by_chain */
        order = malloc(sizeof(int) * (size_t)ranks.n);
        int *chain = calloc((size_t)rcoll_topo_ngpus(t) + 1, sizeof(int));
        int *cpos = calloc((size_t)ranks.n, sizeof(int));
        rcoll_status_t rst = order && chain && cpos ? rcoll_topo_gpu_chain(t, chain)
                                                    : RCOLL_ERR_NO_MEMORY;
        for (int r = 0; rst == RCOLL_OK && r < ranks.n; r++)
            cpos[r] = ranks.gpus[r] >= 0 ? chain[ranks.gpus[r]] : 0;
        if (rst == RCOLL_OK)
            rst = rcoll_topo_ring_by_chain(ranks.n, (const char *const *)ranks.hosts, cpos,
                                           order);
        free(chain);
        free(cpos);
        if (rst != RCOLL_OK) {
            fprintf(stderr, "rcoll-topo: %s\n",
                    rst == RCOLL_ERR_NO_MEMORY ? "out of memory" : rcoll_err_get());
            rc = 2;
            goto out;
        }
    }
    if (json) {
        print_json(t, &cfg, ranks_arg ? &ranks : NULL, order);
    } else {
        print_matrix(t, (rcoll_path_t)cfg.topo.p2p_level, (rcoll_path_t)cfg.topo.gdr_level);
        if (ranks_arg) print_ranks(t, &cfg, &ranks, order);
    }
    if (dump && rcoll_topo_dump_file(t, dump)) {
        fprintf(stderr, "rcoll-topo: %s\n", rcoll_err_get());
        rc = 2;
    }
out:
    for (int i = 0; i < ranks.n; i++) free(ranks.hosts[i]);
    free(order);
    rcoll_topo_free(t);
    return rc;
}
