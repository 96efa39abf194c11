/*
 * net_perf_opts.c - rcoll_net_perf's command line: usage text, sizes and counts, the option
 * parser, and the list of built-in transports for messages.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_perf.h"
#include "util/config.h"
#include "util/status.h"

/* ---------------------------------------------------------------------------------------------
 * Options and main
 * ------------------------------------------------------------------------------------------ */

static void np_usage(FILE *f)
{
    fprintf(f,
            "usage: rcoll_net_perf [options]\n"
            "  Forks a sender; the parent receives and prints perftest-style tables.\n"
            "  -t, --transport NAME  built-in transport: tcp (default), shm, verbs\n"
            "      --bw              streaming bandwidth, as ib_write_bw (default)\n"
            "      --lat             ping-pong latency, as ib_write_lat\n"
            "  -s, --size SIZE       message size (K/M/G suffixes; default 64K bw, 2 lat)\n"
            "  -a, --all             sweep sizes 2, 4, 8, ... up to --max\n"
            "  -e, --max SIZE        top of the sweep (default 8M; implies -a)\n"
            "  -n, --iters N         iterations per size (default: 1000, fewer for sizes\n"
            "                        that would take more than ~0.5 s)\n"
            "  -q, --depth N         bw: messages in flight (default %d, at most %d, and\n"
            "                        within 64 MiB)\n"
            "  -D, --dev DEV         device index or name (default 0)\n"
            "      --check           verify every message (default: first and last of a size)\n"
            "      --json FILE       also write the results as JSON\n"
            "      --timeout S       fail a wait that makes no progress for S s (default 30)\n"
            "  -h, --help\n"
            "Exit status: 0 ok, 1 failure (transfer, data mismatch, timeout), 2 usage or\n"
            "transport unavailable.\n",
            NP_DEF_DEPTH, NP_MAX_DEPTH);
}

static int np_parse_count(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int np_bad_arg(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "rcoll_net_perf: %s %s: %s\n", opt, val, want);
    return NP_EXIT_USAGE;
}

/* Fill o from argv; 0 on success, else the exit code (-h prints help and gives -1). */
int np_parse_args(int argc, char **argv, np_opts_t *o, const char **tname)
{
    enum { OPT_LAT = 256, OPT_BW, OPT_CHECK, OPT_JSON, OPT_TIMEOUT };
    static const struct option longopts[] = {
        {"transport", required_argument, NULL, 't'}, {"lat", no_argument, NULL, OPT_LAT},
        {"bw", no_argument, NULL, OPT_BW}, {"size", required_argument, NULL, 's'},
        {"all", no_argument, NULL, 'a'}, {"max", required_argument, NULL, 'e'},
        {"iters", required_argument, NULL, 'n'}, {"depth", required_argument, NULL, 'q'},
        {"dev", required_argument, NULL, 'D'}, {"check", no_argument, NULL, OPT_CHECK},
        {"json", required_argument, NULL, OPT_JSON},
        {"timeout", required_argument, NULL, OPT_TIMEOUT}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    size_t one = 0, top = NP_DEF_MAX_SIZE;
    int all = 0, c;
    uint64_t v;
    char *end;
    *o = (np_opts_t){.mode = NP_MODE_BW, .depth = NP_DEF_DEPTH, .timeout_s = 30};
    *tname = "tcp";
    while ((c = getopt_long(argc, argv, "t:s:ae:n:q:D:h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': *tname = optarg; break;
        case OPT_LAT: o->mode = NP_MODE_LAT; break;
        case OPT_BW: o->mode = NP_MODE_BW; break;
        case 'a': all = 1; break;
        case OPT_CHECK: o->check_all = 1; break;
        case OPT_JSON: o->json_path = optarg; break;
        case 'D': o->dev_arg = optarg; break;
        case 's':
            if (rcoll_parse_size(optarg, &one) != 0 || one < 1)
                return np_bad_arg("-s", optarg, "want a size of at least 1 byte (e.g. 4K)");
            break;
        case 'e':
            if (rcoll_parse_size(optarg, &top) != 0 || top < 2)
                return np_bad_arg("-e", optarg, "want a size of at least 2 bytes");
            all = 1;
            break;
        case 'n':
            if (np_parse_count(optarg, 1, NP_MAX_ITERS, &v) != 0)
                return np_bad_arg("-n", optarg, "want 1..10000000 iterations");
            o->iters = v;
            break;
        case 'q':
            if (np_parse_count(optarg, 1, NP_MAX_DEPTH, &v) != 0)
                return np_bad_arg("-q", optarg, "want a depth of 1..1024");
            o->depth = (int)v;
            break;
        case OPT_TIMEOUT:
            o->timeout_s = strtod(optarg, &end);
            if (end == optarg || *end || !(o->timeout_s > 0) || o->timeout_s > 86400)
                return np_bad_arg("--timeout", optarg, "want seconds in (0, 86400]");
            break;
        case 'h': np_usage(stdout); return -1;
        default: np_usage(stderr); return NP_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return np_bad_arg("unexpected argument", argv[optind], "see --help");
    if (all && one)
        return np_bad_arg("-s", "with -a", "choose one size or a sweep");
    o->min_size = all ? 2 : one ? one : o->mode == NP_MODE_BW ? NP_DEF_SIZE_BW : NP_DEF_SIZE_LAT;
    o->max_size = all ? top : o->min_size;
    return 0;
}

void np_list_transports(char *buf, size_t len)
{
    size_t n = 0, off = 0;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    buf[0] = '\0';
    for (size_t i = 0; i < n && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", list[i]->name);
}
