/*
 * rcoll-info - what this rcoll is and can do here: version, build features, the transports
 * usable on this machine (and why others are not), and every configuration knob with its
 * value, default and help (-c).  Read-only: it creates no communicator.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "rcoll.h"
#include "rcoll_build.h"
#include "transport/transport.h"
#include "util/config.h"
#include "util/status.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: rcoll-info [-c] [-h]\n"
                 "  (no option)  version, build features and transports on this machine\n"
                 "  -c, --config every configuration knob: name, value, default, help\n"
                 "  -h, --help   this text\n");
}

static void print_transports(const rcoll_config_t *cfg)
{
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    printf("transports (priority order):\n");
    for (size_t i = 0; i < n; i++) {
        const rcoll_transport_ops_t *t = list[i];
        rcoll_status_t st = rcoll_transport_ensure_init(t, cfg);
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
        }
    }
    printf("  %-6s not built: %s\n", "verbs",
           "verbs transport is planned (rdma-core headers are checked at configure time)");
    printf("  %-6s not built: %s\n", "cuda", "CUDA IPC transport is planned");
}

static void print_knobs(const rcoll_config_t *cfg)
{
    size_t n;
    const rcoll_knob_t *k = rcoll_config_knobs(&n);
    printf("%-26s %-12s %-10s %s\n", "knob", "value", "default", "help");
    for (size_t i = 0; i < n; i++) {
        char val[RCOLL_CFG_STR_MAX];
        rcoll_config_format(cfg, &k[i], val, sizeof(val));
        if (!strcmp(k[i].name, "RCOLL_SECRET") && val[0]) snprintf(val, sizeof(val), "(set)");
        printf("%-26s %-12s %-10s %s\n", k[i].name, val[0] ? val : "\"\"",
               k[i].defval[0] ? k[i].defval : "\"\"", k[i].help);
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", no_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int show_config = 0, c;
    while ((c = getopt_long(argc, argv, "ch", opts, NULL)) != -1) {
        if (c == 'c') {
            show_config = 1;
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
    if (show_config) {
        print_knobs(&cfg);
        return 0;
    }
    printf("rcoll %s (API %d)\n", RCOLL_VERSION_STRING, rcoll_version());
    printf("build features: %s%s\n", RCOLL_BUILD_FEATURES,
           RCOLL_HAVE_MPI ? ", mpi comparison benchmark" : "");
    print_transports(&cfg);
    printf("algorithms: all-reduce (pipelined ring; recursive doubling for small vectors), "
           "ring all-gather and reduce-scatter, chain broadcast and reduce, pairwise "
           "all-to-all, point-to-point batches\n");
    printf("run 'rcoll-info -c' for every configuration knob\n");
    return 0;
}
