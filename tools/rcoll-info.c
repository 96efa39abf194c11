/*
 * rcoll-info - what this rcoll is and can do here: version, build features, the transports
 * usable on this machine (and why others are not), and every configuration knob with its
 * value, default and help (-c).  Read-only: it creates no communicator.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"
#include "rcoll-info.h"
#include "algo/oneshot.h"
#include "algo/select.h"
#include "rcoll_build.h"
#include "core/config.h"
#include "cuda/gpu.h"
#include "transport/transport.h"
#include "util/status.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: rcoll-info [-c] [--tuning [-n RANKS]] [--project N [...]] [-h]\n"
                 "  (no option)  version, build features and transports on this machine\n"
                 "  -c, --config every configuration knob: name, value, default, help\n"
                 "  -t, --tuning the all-reduce cost model (RCOLL_TUNING_FILE applied) and the\n"
                 "               algorithm it picks per size, for -n RANKS (default 8)\n"
                 "  --project N  projected all-reduce, all-gather and reduce-scatter times on\n"
                 "               N GPUs of a described cluster ('--project N --help' lists\n"
                 "               the cluster options; docs/scale.md)\n"
                 "  -h, --help   this text\n");
}


static void print_transports(void)
{
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    printf("transports (priority order):\n");
    for (size_t i = 0; i < n; i++) {
        const rcoll_transport_ops_t *t = list[i];
        rcoll_status_t st = rcoll_transport_ensure_init(t);
        if (st != RCOLL_OK) {
            printf("  %-6s unavailable: %s\n", t->name, rcoll_err_get());
            continue;
        }
        int ndev = 0;
        t->devices(&ndev);
        for (int d = 0; d < ndev; d++) {
            rcoll_transport_props_t p;
            memset(&p, 0, sizeof(p));
            if (t->get_props(d, &p) != RCOLL_OK) continue;
            printf("  %-6s device %d: %s, %d Mb/s, host memory%s%s\n", t->name, d, p.name,
                   p.speed_mbps, (p.ptr_support & RCOLL_PTR_CUDA) ? ", CUDA memory" : "",
                   p.host_local ? ", between processes of this host" : "");
            char more[8192];
            t->describe(d, more, sizeof(more));
            for (char *line = strtok(more, "\n"); line; line = strtok(NULL, "\n"))
                printf("         %s\n", line);
        }
    }
#if !RCOLL_HAVE_VERBS
    printf("  %-6s not built: %s\n", "verbs",
           "rdma-core headers were missing at configure time (apt-get install libibverbs-dev)");
#endif
}

/* CUDA: the driver and its devices (loading the driver, as rcoll_cuda_* do), and how CUDA
 * buffers travel with the current knobs. */
static void print_cuda(const rcoll_config_t *cfg)
{
#if !RCOLL_HAVE_CUDA
    (void)cfg;
    printf("cuda: not built (no nvcc and cuda.h at configure time, or -Dcuda=disabled)\n");
#else
    if (cfg->gpu.mode == RCOLL_GPU_OFF) {
        printf("cuda: off (RCOLL_CUDA=0)\n");
        return;
    }
    int n = 0;
    if (rcoll_cuda_device_count(&n) != RCOLL_OK) {
        printf("cuda: unavailable: %s\n", rcoll_cuda_last_error());
        return;
    }
    printf("cuda: driver %s, %d device%s\n", cfg->gpu.cuda_lib, n, n == 1 ? "" : "s");
    for (int d = 0; d < n; d++) {
        char name[128], bus[32];
        if (rcoll_cuda_device_info(d, name, sizeof(name), bus, sizeof(bus)) == RCOLL_OK)
            printf("  device %d: %s [%s]\n", d, name, bus);
        else
            printf("  device %d: %s\n", d, rcoll_cuda_last_error());
    }
    char chunk[64] = "off (RCOLL_STAGE_CHUNK=0)";
    if (cfg->gpu.stage_chunk)
        snprintf(chunk, sizeof(chunk), "%zu-byte chunks", cfg->gpu.stage_chunk);
    printf("  CUDA buffers: staged through pinned host memory, pipelined %s; CUDA IPC between "
           "the ranks of a host %s; point to point across hosts over GPUDirect RDMA where a "
           "NIC registers CUDA memory (verbs lines above) within %s of the GPU "
           "(RCOLL_NET_GDR_LEVEL)\n", chunk,
           cfg->gpu.ipc ? "on (RCOLL_CUDA_IPC=1)" : "off (RCOLL_CUDA_IPC=0)",
           rcoll_path_name((rcoll_path_t)cfg->topo.gdr_level));
#endif
}

/* The cost model's constants and, per path, the sizes where its choice changes. */
static int print_tuning(const rcoll_config_t *cfg, int nranks)
{
    rcoll_tuning_t t;
    rcoll_tuning_defaults(&t);
    if (cfg->tuning_file[0]) {
        char text[4096];
        FILE *f = fopen(cfg->tuning_file, "r");
        size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
        if (f) fclose(f);
        text[n] = '\0';
        if (!f || rcoll_tuning_parse(text, &t) != RCOLL_OK) {
            fprintf(stderr, "rcoll-info: RCOLL_TUNING_FILE '%s': %s\n", cfg->tuning_file,
                    f ? rcoll_err_get() : "cannot open");
            return 3;
        }
    }
    printf("all-reduce cost model%s%s\n", cfg->tuning_file[0] ? " from " : " (built-in)",
           cfg->tuning_file);
    printf("  shm: alpha %.3f us, beta %.2f GB/s\n", t.shm.alpha_us,
           1.0 / t.shm.beta_us_per_b / 1e3);
    printf("  net: alpha %.3f us, beta %.2f GB/s\n", t.net.alpha_us,
           1.0 / t.net.beta_us_per_b / 1e3);
    printf("  reduction: %.2f GB/s\n", 1.0 / t.gamma_us_per_b / 1e3);
    for (int shm = 1; shm >= 0; shm--) {
        printf("%d ranks over %s:\n", nranks, shm ? "shared memory (one host)" : "the network");
        int last = -1;
        for (size_t bytes = 4; bytes <= ((size_t)1 << 30); bytes *= 2) {
            double pred;
            int a = (int)rcoll_select_allreduce(&t, nranks, bytes, shm, shm, &pred);
            if (a != last)
                printf("  from %10zu B: %-8s (%.2f us predicted)\n", bytes, rcoll_alg_names[a],
                       pred);
            last = a;
        }
    }
    /* the same ranks spread over hosts (2 or more per host): flat against hierarchical */
    for (int hosts = 2; hosts <= nranks / 2; hosts *= 2) {
        if (nranks % hosts) continue;
        printf("%d ranks on %d hosts (%d per host), between hosts over the network:\n", nranks,
               hosts, nranks / hosts);
        int last = -1;
        for (size_t bytes = 4; bytes <= ((size_t)1 << 30); bytes *= 2) {
            double pred;
            int a = (int)rcoll_select_allreduce_hosts(&t, hosts, nranks / hosts, bytes, &pred);
            if (a != last)
                printf("  from %10zu B: %-8s (%.2f us predicted)\n", bytes, rcoll_alg_names[a],
                       pred);
            last = a;
        }
    }
    return 0;
}

/* Every module's knobs, grouped by module: name, value here, default, help. */
static int print_knobs(void)
{
    size_t ntables;
    const rcoll_config_table_t *const *tables = rcoll_config_tables(&ntables);
    printf("%-26s %-12s %-10s %s\n", "knob", "value", "default", "help");
    for (size_t t = 0; t < ntables; t++) {
        void *cfg = malloc(tables[t]->size);
        if (!cfg || rcoll_config_parse(tables[t], cfg) != RCOLL_OK) {
            fprintf(stderr, "rcoll-info: %s\n", cfg ? rcoll_err_get() : "out of memory");
            free(cfg);
            return 3;
        }
        printf("[%s]\n", tables[t]->module);
        for (size_t i = 0; i < tables[t]->count; i++) {
            const rcoll_knob_t *k = &tables[t]->knobs[i];
            if (k->type == RCOLL_KNOB_TABLE) continue; /* listed under its own module */
            char val[RCOLL_CFG_STR_MAX];
            rcoll_config_format(cfg, k, val, sizeof(val));
            if (!strcmp(k->name, "RCOLL_SECRET") && val[0]) snprintf(val, sizeof(val), "(set)");
            printf("%-26s %-12s %-10s %s\n", k->name, val[0] ? val : "\"\"",
                   k->defval[0] ? k->defval : "\"\"", k->help);
        }
        free(cfg);
    }
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--project") || !strncmp(argv[i], "--project=", 10))
            return rcoll_info_project(argc, argv);
    static const struct option opts[] = {{"config", no_argument, NULL, 'c'},
                                         {"tuning", no_argument, NULL, 't'},
                                         {"ranks", required_argument, NULL, 'n'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int show_config = 0, show_tuning = 0, nranks = 8, c;
    while ((c = getopt_long(argc, argv, "ctn:h", opts, NULL)) != -1) {
        if (c == 'c') {
            show_config = 1;
        } else if (c == 't') {
            show_tuning = 1;
        } else if (c == 'n') {
            nranks = atoi(optarg);
            if (nranks < 2 || nranks > (1 << 24)) {
                fprintf(stderr, "rcoll-info: -n needs a rank count of at least 2\n");
                return 2;
            }
        } else if (c == 'h') {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    rcoll_config_t cfg;
    rcoll_status_t st = rcoll_config_load(&cfg);
    if (st != RCOLL_OK) {
        fprintf(stderr, "rcoll-info: invalid configuration: %s\n", rcoll_err_get());
        return 3;
    }
    if (show_config) return print_knobs();
    if (show_tuning) return print_tuning(&cfg, nranks);
    printf("rcoll %s (API %d)\n", RCOLL_VERSION_STRING, rcoll_version());
    printf("build features: %s%s\n", RCOLL_BUILD_FEATURES,
           RCOLL_HAVE_MPI ? ", mpi comparison benchmark" : "");
    print_transports();
    print_cuda(&cfg);
    printf("algorithms: all-reduce (pipelined ring; recursive doubling for small vectors), "
           "ring all-gather and reduce-scatter, chain broadcast and reduce, pairwise "
           "all-to-all, point-to-point batches\n");
    printf("run 'rcoll-info -c' for every configuration knob\n");
    return 0;
}
