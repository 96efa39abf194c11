/*
 * rcoll-info-project.c - `rcoll-info --project N`: the projection model (algo/project.h) on a
 * described cluster: per size, the time and bus bandwidth of every algorithm of all-reduce,
 * all-gather and reduce-scatter on N GPUs, and the one it would choose.  Reads options
 * only; measures nothing (docs/scale.md).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/project.h"
#include "rcoll-info.h"
#include "util/config.h"
#include "util/status.h"

static void project_usage(FILE *out)
{
    fprintf(out,
        "usage: rcoll-info --project N [--cluster h100|netns] [options]\n"
        "  N GPUs (ranks); prints, per size, each algorithm's time and bus bandwidth and the\n"
        "  one the model chooses (docs/scale.md).  Options (defaults: --cluster h100):\n"
        "  --cluster h100        8 GPUs/node, NVLink 450 GB/s, 8 x 400 Gb/s rails, 2-level\n"
        "                        1:1 fat tree, 32 nodes/leaf, 64 leaves, 0.15 us/switch\n"
        "  --cluster netns       a tools/netns-cluster job: 1 rank/host, one TCP link of\n"
        "                        --nic-gbit (default 1) each way, one switch, --nic-lat-us\n"
        "                        per message (default 30), CPU reduction --reduce-gbs (45)\n"
        "  --gpus-per-node G     --nvlink-gbs X   --nvlink-lat-us X\n"
        "  --nics-per-node K     --nic-gbit X     --nic-eff X (payload share, 0-1]\n"
        "  --nic-lat-us X        --levels 1|2|3   --nodes-per-leaf X  --leaves-per-pod X\n"
        "  --oversub A[:B]       down:up ratio of the leaves [and of the pods' spines]\n"
        "  --switch-lat-us X     --overhead-us X (software per message)\n"
        "  --reduce-gbs X        reduction speed per rank, GB/s (0: free, overlapped)\n"
        "  --pipelined           hier-* and pat overlap their NVLink and network phases\n"
        "                        chunk by chunk (default: one after the other, as rcoll's\n"
        "                        hier does)\n"
        "  --coll all|allreduce|allgather|reducescatter     (default all)\n"
        "  -b SIZE -e SIZE -f F  sizes from b to e, times F (default 1K, 16G, 4)\n"
        "  --size SIZE           one size only (repeatable)\n"
        "  --csv                 one line per size, collective and algorithm instead\n"
        "  --json DIR            also write DIR/<collective>-<algorithm>.json in the perf\n"
        "                        binaries' -J form, for tools/rcoll-plot\n");
}

static int bad_number(const char *opt, const char *v)
{
    fprintf(stderr, "rcoll-info: %s needs a number, not '%s'\n", opt, v);
    return 2;
}

static int parse_double(const char *opt, const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x)) return bad_number(opt, v);
    *out = x;
    return 0;
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno) return bad_number(opt, v);
    if (x < lo || x > hi) {
        fprintf(stderr, "rcoll-info: %s must be from %ld to %ld, not %ld\n", opt, lo, hi, x);
        return 2;
    }
    *out = x;
    return 0;
}

enum {
    O_PROJECT = 1000, O_CLUSTER, O_GPN, O_NVL_GBS, O_NVL_LAT, O_NICS, O_NIC_GBIT, O_NIC_EFF,
    O_NIC_LAT, O_LEVELS, O_NPL, O_LPP, O_OVERSUB, O_SW_LAT, O_OVERHEAD, O_REDUCE, O_COLL,
    O_SIZE, O_CSV, O_PIPELINED, O_JSON, O_HELP
};

static void print_cluster(const rcoll_cluster_t *c, long ngpus)
{
    long nodes = ngpus / c->gpus_per_node;
    printf("# %ld GPUs: %ld node%s x %d GPU%s", ngpus, nodes, nodes == 1 ? "" : "s",
           c->gpus_per_node, c->gpus_per_node == 1 ? "" : "s");
    if (c->gpus_per_node > 1)
        printf(", NVLink %.0f GB/s %.2f us", c->nvlink_gbs, c->nvlink_lat_us);
    printf("\n# network: %d NIC%s/node x %.4g Gbit/s (payload %.1f%%: %.2f GB/s each), "
           "%.2f us/NIC\n", c->nics_per_node, c->nics_per_node == 1 ? "" : "s", c->nic_gbit,
           100 * c->nic_eff, c->nic_gbit / 8 * c->nic_eff, c->nic_lat_us);
    printf("# fat tree: %d level%s", c->levels, c->levels == 1 ? "" : "s");
    if (c->levels >= 2) printf(", %d nodes/leaf (oversubscription %g:1)", c->nodes_per_leaf,
                               c->oversub[0]);
    if (c->levels == 2) printf(", %d leaves", c->leaves_per_pod);
    if (c->levels == 3) printf(", %d leaves/pod (oversubscription %g:1)", c->leaves_per_pod,
                               c->oversub[1]);
    printf(", %.2f us/switch\n# software %.2f us/message; reduction %s", c->switch_lat_us,
           c->overhead_us, c->reduce_gbs > 0 ? "" : "free (overlapped)");
    if (c->reduce_gbs > 0) printf("%.1f GB/s", c->reduce_gbs);
    printf("; hier/pat phases %s\n", c->pipelined ? "overlapped (--pipelined)" : "in sequence");
}

static void fmt_size(double b, char *out, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) b /= 1024, u++;
    snprintf(out, len, "%g %s", b, units[u]);
}

static void print_table(const rcoll_cluster_t *c, rcoll_proj_coll_t coll, long n,
                        const double *sizes, int nsizes, int csv)
{
    if (!csv) {
        printf("\n## %s on %ld GPUs: time_us busbw_GB/s per algorithm ('-': does not apply)"
               "\n%10s", rcoll_proj_coll_name(coll), n, "size");
        for (int a = 0; a < RCOLL_PROJ_ALG_COUNT; a++)
            printf(" %22s", rcoll_proj_alg_name((rcoll_proj_alg_t)a));
        printf("  %-9s %8s\n", "choice", "busbw");
    }
    for (int i = 0; i < nsizes; i++) {
        double S = sizes[i], best_us;
        char sz[32];
        fmt_size(S, sz, sizeof(sz));
        rcoll_proj_alg_t best = rcoll_project_choose(c, coll, n, S, &best_us);
        if (!csv) printf("%10s", sz);
        for (int a = 0; a < RCOLL_PROJ_ALG_COUNT; a++) {
            double t = rcoll_project_time(c, coll, (rcoll_proj_alg_t)a, n, S);
            double bus = rcoll_project_busbw(coll, n, S, t);
            if (csv) {
                if (isfinite(t))
                    printf("%s,%ld,%.0f,%s,%.4f,%.4f,%.4f,%d\n", rcoll_proj_coll_name(coll), n,
                           S, rcoll_proj_alg_name((rcoll_proj_alg_t)a), t,
                           rcoll_project_algbw(S, t), bus, a == (int)best);
            } else if (isfinite(t)) {
                printf(" %13.5g %8.2f", t, bus);
            } else {
                printf(" %13s %8s", "-", "-");
            }
        }
        if (!csv)
            printf("  %-9s %8.2f\n", rcoll_proj_alg_name(best),
                   rcoll_project_busbw(coll, n, S, best_us));
    }
}

/* DIR/<collective>-<algorithm>.json per applicable algorithm: {"program", "collective",
 * "gpus", "results": [{"size", "out_of_place": {"time_us", "algbw", "busbw"}}]}, the form
 * tools/rcoll-plot reads from the perf binaries' -J. */
static int write_json(const char *dir, const rcoll_cluster_t *c, rcoll_proj_coll_t coll,
                      long n, const double *sizes, int nsizes)
{
    for (int a = 0; a < RCOLL_PROJ_ALG_COUNT; a++) {
        if (!isfinite(rcoll_project_time(c, coll, (rcoll_proj_alg_t)a, n, sizes[nsizes - 1])))
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s-%s.json", dir, rcoll_proj_coll_name(coll),
                 rcoll_proj_alg_name((rcoll_proj_alg_t)a));
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "rcoll-info: cannot write %s: %s\n", path, strerror(errno));
            return -1;
        }
        fprintf(f, "{\"program\": \"rcoll-info --project\", \"collective\": \"%s\", "
                   "\"algorithm\": \"%s\", \"gpus\": %ld, \"results\": [",
                rcoll_proj_coll_name(coll), rcoll_proj_alg_name((rcoll_proj_alg_t)a), n);
        for (int i = 0; i < nsizes; i++) {
            double t = rcoll_project_time(c, coll, (rcoll_proj_alg_t)a, n, sizes[i]);
            fprintf(f, "%s\n  {\"size\": %.0f, \"out_of_place\": {\"time_us\": %.6g, "
                       "\"algbw\": %.6g, \"busbw\": %.6g}}", i ? "," : "", sizes[i], t,
                    rcoll_project_algbw(sizes[i], t), rcoll_project_busbw(coll, n, sizes[i], t));
        }
        fprintf(f, "\n]}\n");
        if (fclose(f) != 0) {
            fprintf(stderr, "rcoll-info: cannot write %s: %s\n", path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int rcoll_info_project(int argc, char **argv)
{
    static const struct option opts[] = {
        {"project", required_argument, NULL, O_PROJECT},
        {"cluster", required_argument, NULL, O_CLUSTER},
        {"gpus-per-node", required_argument, NULL, O_GPN},
        {"nvlink-gbs", required_argument, NULL, O_NVL_GBS},
        {"nvlink-lat-us", required_argument, NULL, O_NVL_LAT},
        {"nics-per-node", required_argument, NULL, O_NICS},
        {"nic-gbit", required_argument, NULL, O_NIC_GBIT},
        {"nic-eff", required_argument, NULL, O_NIC_EFF},
        {"nic-lat-us", required_argument, NULL, O_NIC_LAT},
        {"levels", required_argument, NULL, O_LEVELS},
        {"nodes-per-leaf", required_argument, NULL, O_NPL},
        {"leaves-per-pod", required_argument, NULL, O_LPP},
        {"oversub", required_argument, NULL, O_OVERSUB},
        {"switch-lat-us", required_argument, NULL, O_SW_LAT},
        {"overhead-us", required_argument, NULL, O_OVERHEAD},
        {"reduce-gbs", required_argument, NULL, O_REDUCE},
        {"coll", required_argument, NULL, O_COLL},
        {"size", required_argument, NULL, O_SIZE},
        {"csv", no_argument, NULL, O_CSV},
        {"pipelined", no_argument, NULL, O_PIPELINED},
        {"json", required_argument, NULL, O_JSON},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0}};
    /* Two passes: the preset first, so that the other options change it in any order. */
    rcoll_cluster_t c;
    int netns = 0, o;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--cluster") && i + 1 < argc) v = argv[i + 1];
        else if (!strncmp(argv[i], "--cluster=", 10)) v = argv[i] + 10;
        if (!v) continue;
        if (!strcmp(v, "h100")) netns = 0;
        else if (!strcmp(v, "netns")) netns = 1;
        else {
            fprintf(stderr, "rcoll-info: --cluster takes h100 or netns, not '%s'\n", v);
            return 2;
        }
    }
    if (netns) rcoll_cluster_netns(&c, 1.0, 30.0, 45.0);
    else rcoll_cluster_h100(&c);

    long ngpus = 0, lv;
    int colls = (1 << RCOLL_PROJ_COLL_COUNT) - 1, csv = 0, nsizes = 0, rc;
    const char *json_dir = NULL;
    double sizes[64], dv = 0;
    size_t b = 1024, e = (size_t)16 << 30, f = 4;
    optind = 1;
    while ((o = getopt_long(argc, argv, "b:e:f:h", opts, NULL)) != -1) {
        rc = 0;
        switch (o) {
        case O_PROJECT:
            rc = parse_int("--project", optarg, LONG_MIN, LONG_MAX, &ngpus);
            if (!rc && ngpus > (1L << 30)) {
                fprintf(stderr, "rcoll-info: --project takes at most %ld GPUs\n", 1L << 30);
                rc = 2;
            }
            break;
        case O_CLUSTER: break;
        case O_GPN:
            rc = parse_int("--gpus-per-node", optarg, -(1L << 20), 1L << 20, &lv);
            c.gpus_per_node = (int)lv;
            break;
        case O_NVL_GBS: rc = parse_double("--nvlink-gbs", optarg, &c.nvlink_gbs); break;
        case O_NVL_LAT: rc = parse_double("--nvlink-lat-us", optarg, &c.nvlink_lat_us); break;
        case O_NICS:
            rc = parse_int("--nics-per-node", optarg, -(1L << 20), 1L << 20, &lv);
            c.nics_per_node = (int)lv;
            break;
        case O_NIC_GBIT: rc = parse_double("--nic-gbit", optarg, &c.nic_gbit); break;
        case O_NIC_EFF: rc = parse_double("--nic-eff", optarg, &c.nic_eff); break;
        case O_NIC_LAT: rc = parse_double("--nic-lat-us", optarg, &c.nic_lat_us); break;
        case O_LEVELS:
            rc = parse_int("--levels", optarg, -100, 100, &lv);
            c.levels = (int)lv;
            break;
        case O_NPL:
            rc = parse_int("--nodes-per-leaf", optarg, -(1L << 30), 1L << 30, &lv);
            c.nodes_per_leaf = (int)lv;
            break;
        case O_LPP:
            rc = parse_int("--leaves-per-pod", optarg, -(1L << 30), 1L << 30, &lv);
            c.leaves_per_pod = (int)lv;
            break;
        case O_OVERSUB: {
            char *colon = strchr(optarg, ':');
            if (colon) {
                *colon = '\0';
                rc = parse_double("--oversub", colon + 1, &c.oversub[1]);
            }
            if (!rc) rc = parse_double("--oversub", optarg, &c.oversub[0]);
            break;
        }
        case O_SW_LAT: rc = parse_double("--switch-lat-us", optarg, &c.switch_lat_us); break;
        case O_OVERHEAD: rc = parse_double("--overhead-us", optarg, &c.overhead_us); break;
        case O_REDUCE: rc = parse_double("--reduce-gbs", optarg, &c.reduce_gbs); break;
        case O_COLL:
            if (!strcmp(optarg, "all")) colls = (1 << RCOLL_PROJ_COLL_COUNT) - 1;
            else if (!strcmp(optarg, "allreduce")) colls = 1 << RCOLL_PROJ_ALLREDUCE;
            else if (!strcmp(optarg, "allgather")) colls = 1 << RCOLL_PROJ_ALLGATHER;
            else if (!strcmp(optarg, "reducescatter")) colls = 1 << RCOLL_PROJ_REDUCE_SCATTER;
            else {
                fprintf(stderr, "rcoll-info: --coll takes all, allreduce, allgather or "
                                "reducescatter, not '%s'\n", optarg);
                return 2;
            }
            break;
        case O_SIZE:
        case 'b':
        case 'e': {
            size_t v;
            if (rcoll_parse_size(optarg, &v) != 0 || v == 0) {
                fprintf(stderr, "rcoll-info: invalid size '%s' (e.g. 8, 64K, 32M, 1G)\n",
                        optarg);
                return 2;
            }
            if (o == 'b') b = v;
            else if (o == 'e') e = v;
            else if (nsizes < 64) sizes[nsizes++] = (double)v;
            break;
        }
        case 'f':
            rc = parse_double("-f", optarg, &dv);
            if (!rc && !(dv >= 2)) {
                fprintf(stderr, "rcoll-info: -f must be at least 2\n");
                rc = 2;
            }
            f = (size_t)dv;
            break;
        case O_CSV: csv = 1; break;
        case O_PIPELINED: c.pipelined = 1; break;
        case O_JSON: json_dir = optarg; break;
        case 'h':
        case O_HELP: project_usage(stdout); return 0;
        default: project_usage(stderr); return 2;
        }
        if (rc) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "rcoll-info: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (rcoll_cluster_check(&c, ngpus) != RCOLL_OK) {
        fprintf(stderr, "rcoll-info: --project: %s\n", rcoll_err_get());
        return 2;
    }
    if (!nsizes) {
        if (b > e) {
            fprintf(stderr, "rcoll-info: -b must not be above -e\n");
            return 2;
        }
        for (double s = (double)b; s <= (double)e && nsizes < 64; s *= (double)f)
            sizes[nsizes++] = s;
    }
    if (csv) printf("collective,gpus,bytes,algorithm,time_us,algbw_GBs,busbw_GBs,chosen\n");
    else print_cluster(&c, ngpus);
    for (int k = 0; k < RCOLL_PROJ_COLL_COUNT; k++) {
        if (!(colls & (1 << k))) continue;
        print_table(&c, (rcoll_proj_coll_t)k, ngpus, sizes, nsizes, csv);
        if (json_dir && write_json(json_dir, &c, (rcoll_proj_coll_t)k, ngpus, sizes, nsizes))
            return 3;
    }
    return 0;
}
