/*
 * config.c - the knob-table parser: defaults, then environment values, into a module's own
 * struct, with one validation path per type (one for every enum).  It declares no knob
 * itself: each module has its table next to its code, and core lists them all.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/config.h"
#include "util/log.h"
#include "util/status.h"

extern char **environ;

int rcoll_parse_size(const char *s, size_t *out)
{
    if (!s) return -1;
    while (isspace((unsigned char)*s)) s++;
    if (!isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end != '\0') return -1;
    if (shift && v > (~0ull >> shift)) return -1;
    *out = (size_t)(v << shift);
    return 0;
}

/* "a, b or c": an enum's allowed values (those inside its index range). */
static void enum_list(const rcoll_knob_t *k, char *buf, size_t len)
{
    size_t o = 0, n = 0;
    buf[0] = '\0';
    for (long long i = k->min; i <= k->max && k->names[i]; i++) n++;
    for (long long i = k->min, j = 0; i <= k->max && k->names[i] && o < len; i++, j++) {
        int w = snprintf(buf + o, len - o, "%s%s", j == 0 ? "" : j + 1 == (long long)n ? " or "
                                                                                        : ", ",
                         k->names[i]);
        if (w < 0) break;
        o += (size_t)w;
    }
}

/* Index of text in the enum's names, within its range; -1 if none.  Blanks around the
 * value are ignored, case is not significant. */
static int enum_index(const rcoll_knob_t *k, const char *text)
{
    while (*text == ' ' || *text == '\t') text++;
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t')) n--;
    for (long long i = k->min; i <= k->max && k->names[i]; i++)
        if (strlen(k->names[i]) == n && !strncasecmp(k->names[i], text, n)) return (int)i;
    return -1;
}

static rcoll_status_t parse_table(const rcoll_config_table_t *t, char *base, int from_env);

static rcoll_status_t parse_knob(const rcoll_knob_t *k, const char *text, char *base)
{
    char *field = base + k->offset;
    char *end;
    switch (k->type) {
    case RCOLL_KNOB_STRING:
        if (strlen(text) >= RCOLL_CFG_STR_MAX)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s is longer than %d characters",
                                 k->name, RCOLL_CFG_STR_MAX - 1);
        strcpy(field, text);
        return RCOLL_OK;
    case RCOLL_KNOB_INT: {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end != '\0')
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s='%s' is not an integer", k->name,
                                 text);
        if (v < k->min || v > k->max)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s=%lld is out of range [%lld, %lld]",
                                 k->name, v, k->min, k->max);
        *(int *)field = (int)v;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_SIZE: {
        size_t v;
        if (rcoll_parse_size(text, &v))
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                                 "%s='%s' is not a size (bytes, with optional K/M/G)", k->name,
                                 text);
        if ((long long)v < k->min || (long long)v > k->max)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s=%zu is out of range [%lld, %lld]",
                                 k->name, v, k->min, k->max);
        *(size_t *)field = v;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_SECONDS: {
        errno = 0;
        double v = strtod(text, &end);
        if (errno || end == text || *end != '\0' || !(v >= (double)k->min) ||
            v > (double)k->max)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                                 "%s='%s' is not a number of seconds in [%lld, %lld]", k->name,
                                 text, k->min, k->max);
        *(double *)field = v;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_ENUM: {
        int i = enum_index(k, text[0] ? text : k->defval);
        if (i < 0) {
            char allowed[RCOLL_CFG_STR_MAX];
            enum_list(k, allowed, sizeof(allowed));
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s='%s' is not one of %s", k->name,
                                 text, allowed);
        }
        *(int *)field = i;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_TABLE: break;
    }
    return rcoll_err_set(RCOLL_ERR_INTERNAL, "knob %s has an unknown type", k->name);
}

/* Defaults (from_env = 0) or environment values (1) of every knob of t, tables included. */
static rcoll_status_t parse_table(const rcoll_config_table_t *t, char *base, int from_env)
{
    for (size_t i = 0; i < t->count; i++) {
        const rcoll_knob_t *k = &t->knobs[i];
        rcoll_status_t st;
        if (k->type == RCOLL_KNOB_TABLE) {
            st = parse_table(k->table, base + k->offset, from_env);
        } else {
            const char *text = from_env ? getenv(k->name) : k->defval;
            if (!text) continue;
            st = parse_knob(k, text, base);
        }
        if (st != RCOLL_OK) return st;
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_config_parse(const rcoll_config_table_t *t, void *out)
{
    char *tmp = calloc(1, t->size);
    if (!tmp) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory for the %s knobs", t->module);
    rcoll_status_t st = parse_table(t, tmp, 0); /* fails only for a bad table */
    if (st == RCOLL_OK) st = parse_table(t, tmp, 1);
    if (st == RCOLL_OK) memcpy(out, tmp, t->size);
    free(tmp);
    return st;
}

void rcoll_config_format(const void *cfg, const rcoll_knob_t *k, char *buf, size_t len)
{
    const char *field = (const char *)cfg + k->offset;
    switch (k->type) {
    case RCOLL_KNOB_STRING: snprintf(buf, len, "%s", field); break;
    case RCOLL_KNOB_INT: snprintf(buf, len, "%d", *(const int *)field); break;
    case RCOLL_KNOB_SIZE: snprintf(buf, len, "%zu", *(const size_t *)field); break;
    case RCOLL_KNOB_SECONDS: snprintf(buf, len, "%g", *(const double *)field); break;
    case RCOLL_KNOB_ENUM: snprintf(buf, len, "%s", k->names[*(const int *)field]); break;
    case RCOLL_KNOB_TABLE: snprintf(buf, len, "(%s)", k->table->module); break;
    }
}

/* Variables that start with RCOLL_ but are read by tools rather than the library. */
static const char *const tool_vars[] = {"RCOLL_LOCAL_RANK", "RCOLL_LOCAL_SIZE",
                                        "RCOLL_RUN_GRACE", "RCOLL_TEST_", NULL};

static int table_has(const rcoll_config_table_t *t, const char *name, size_t len)
{
    for (size_t i = 0; i < t->count; i++) {
        const rcoll_knob_t *k = &t->knobs[i];
        if (k->type == RCOLL_KNOB_TABLE ? table_has(k->table, name, len)
                                        : strlen(k->name) == len && !strncmp(k->name, name, len))
            return 1;
    }
    return 0;
}

int rcoll_config_known(const rcoll_config_table_t *const *tables, size_t n, const char *name,
                       size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (table_has(tables[i], name, len)) return 1;
    for (size_t i = 0; tool_vars[i]; i++)
        if (len >= strlen(tool_vars[i]) && !strncmp(name, tool_vars[i], strlen(tool_vars[i])))
            return 1;
    return 0;
}

static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static int warned;

void rcoll_config_warn_unknown(const rcoll_config_table_t *const *tables, size_t n)
{
    pthread_mutex_lock(&warn_lock);
    int first = !warned;
    warned = 1;
    pthread_mutex_unlock(&warn_lock);
    if (!first) return;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "RCOLL_", 6) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (!rcoll_config_known(tables, n, *e, len))
            RCOLL_WARN(INIT, "unknown variable %.*s ignored (rcoll-info -c lists every knob)",
                       (int)len, *e);
    }
}

#define KNOB(name, def, type, field, lo, hi, help) \
    {name, def, RCOLL_KNOB_##type, offsetof(rcoll_config_t, field), lo, hi, NULL, NULL, help}

static const rcoll_knob_t knobs[] = {
    KNOB("RCOLL_DEBUG", "WARN", STRING, debug, 0, 0,
         "log level: NONE, WARN, INFO or TRACE"),
    KNOB("RCOLL_DEBUG_SUBSYS", "ALL", STRING, debug_subsys, 0, 0,
         "subsystems to log, comma list (INIT,BOOTSTRAP,SOCKET,ALGO,COLL,...); ^ excludes"),
    KNOB("RCOLL_DEBUG_FILE", "", STRING, debug_file, 0, 0,
         "write logs to this file instead of stderr; %h = host, %p = pid"),
    KNOB("RCOLL_RANK", "-1", INT, rank, -1, 1 << 24,
         "this process's rank (rcoll_comm_init_env); set by rcoll-run"),
    KNOB("RCOLL_NRANKS", "-1", INT, nranks, -1, 1 << 24,
         "number of ranks (rcoll_comm_init_env); set by rcoll-run"),
    KNOB("RCOLL_ROOT", "", STRING, root, 0, 0,
         "host:port where rank 0 runs the bootstrap root (rcoll_comm_init_env)"),
    KNOB("RCOLL_SECRET", "", STRING, secret, 0, 0,
         "job secret every rank must prove at bootstrap (rcoll-run makes one per job)"),
    KNOB("RCOLL_TIMEOUT", "300", SECONDS, timeout_s, 0, 86400 * 7,
         "seconds to wait without progress from an awaited peer before failing"),
    KNOB("RCOLL_SPIN", "-1", INT, spin, -1, 100000000,
         "poll iterations spent spinning before a waiting rank yields the CPU; -1 = auto "
         "(200, or 0 when this machine's ranks outnumber the CPUs of their affinity masks "
         "together)"),
    KNOB("RCOLL_POLL_US", "20000", INT, poll_us, 0, 100000000,
         "microseconds a waiting rank keeps polling (spinning, then yielding the CPU) before "
         "it naps in 50 us steps: a peer late by less is noticed at once, a longer idle wait "
         "costs little CPU"),
    KNOB("RCOLL_SOCKET_IFNAME", "", STRING, socket_ifname, 0, 0,
         "interface for bootstrap and TCP: prefix, ^excluded,list or =exact name"),
    KNOB("RCOLL_SOCKET_NSOCKS", "2", INT, socket_nsocks, 1, 16,
         "TCP sockets per connection (large messages are striped over them)"),
    KNOB("RCOLL_SOCKET_STRIPE_MIN", "256K", SIZE, socket_stripe_min, 0, 1LL << 40,
         "messages of at least this many bytes are striped over all sockets"),
    KNOB("RCOLL_BUFFSIZE", "4M", SIZE, buffsize, 4096, 1LL << 32,
         "staging bytes per peer connection: the bound on a communicator's memory per peer"),
    KNOB("RCOLL_CHUNK_SIZE", "0", SIZE, chunk_size, 0, 1LL << 32,
         "pipeline chunk in bytes (0 = RCOLL_BUFFSIZE / 4); small values test multi-chunk paths"),
    KNOB("RCOLL_ALGO", "auto", STRING, algo, 0, 0,
         "all-reduce algorithm: auto, ring, rd (recursive doubling), tree (double binary "
         "tree), oneshot (host segment, up to 16 KiB), twoshot (host segment: reduce-"
         "scatter + all-gather through shared memory) or hier (several hosts with equal ranks: "
         "reduce-scatter on each host, all-reduce across hosts, all-gather); one that does "
         "not apply here leaves the choice to the cost model"),
    KNOB("RCOLL_TWOSHOT_SLOT", "0", SIZE, twoshot_slot, 0, 1LL << 30,
         "bytes per two-shot pipeline slot, 4 slots per rank in the host segment (0 = "
         "RCOLL_BUFFSIZE / 16, at least 4K)"),
    KNOB("RCOLL_PROTO", "auto", STRING, proto, 0, 0,
         "how shared-memory messages move: auto (= copy, the faster here), copy (through the "
         "connection's slot ring: copy in, copy out) or cma (single copy with "
         "process_vm_readv from 64 KiB, where the kernel allows it; else copy); read once per "
         "process, when its first communicator starts the shm transport"),
    KNOB("RCOLL_TUNING_FILE", "", STRING, tuning_file, 0, 0,
         "file of cost-model constants (key = value: shm_alpha_us, shm_beta_gbps, "
         "net_alpha_us, net_beta_gbps, reduce_gbps); rcoll-info --tuning shows the model"),
    KNOB("RCOLL_TUNING_PROBE", "1", INT, tuning_probe, 0, 1,
         "1: measure the cost model's alpha/beta/gamma at communicator creation (a few ms; "
         "skipped when RCOLL_TUNING_FILE is set or RCOLL_ALGO forces the algorithm); 0: built-in "
         "constants"),
    KNOB("RCOLL_TRANSPORT", "auto", STRING, transport, 0, 0,
         "transport between all ranks: auto (shared memory on one host, else the network "
         "transport of RCOLL_NET), shm, verbs or tcp"),
    KNOB("RCOLL_SHM_DISABLE", "0", INT, shm_disable, 0, 1,
         "1: ranks on one host talk over the network transport instead of shared memory"),
    KNOB("RCOLL_HOST_ID", "", STRING, host_id, 0, 0,
         "this rank's host identity (ranks with equal ids are one host: shared memory, one "
         "ring segment); default: hostname, boot id and network namespace"),
    KNOB("RCOLL_NET", "auto", STRING, net, 0, 0,
         "network transport between hosts: auto (verbs when an active RDMA port exists, else "
         "tcp), verbs (fail when none) or tcp"),
    KNOB("RCOLL_IBVERBS_LIB", "libibverbs.so.1", STRING, ibverbs_lib, 0, 0,
         "library loaded with dlopen for the verbs transport (missing = no verbs devices)"),
    KNOB("RCOLL_IB_HCA", "", STRING, ib_hca, 0, 0,
         "RDMA devices to use: comma list of name[:port] prefixes (mlx5_0:1,mlx5_1), ^ "
         "excludes the listed ones, = makes names exact"),
    KNOB("RCOLL_IB_GID_INDEX", "-1", INT, ib_gid_index, -1, 1 << 16,
         "GID table index to use on every port (-1 = the best scored: RoCE v2, "
         "RCOLL_IB_ADDR_FAMILY, not link-local, inside RCOLL_IB_ADDR_RANGE)"),
    KNOB("RCOLL_IB_ADDR_FAMILY", "ipv4", STRING, ib_addr_family, 0, 0,
         "preferred address family of RoCE GIDs: ipv4 or ipv6 (the other is used when it is "
         "all there is)"),
    KNOB("RCOLL_IB_ADDR_RANGE", "", STRING, ib_addr_range, 0, 0,
         "only RoCE GIDs inside this CIDR range (10.1.0.0/16, fd00::/8) are used"),
    KNOB("RCOLL_IB_TC", "0", INT, ib_tc, 0, 255, "traffic class of RoCE packets (GRH)"),
    KNOB("RCOLL_IB_SL", "0", INT, ib_sl, 0, 15, "InfiniBand service level"),
    KNOB("RCOLL_IB_TIMEOUT", "20", INT, ib_timeout, 1, 31,
         "QP local ACK timeout exponent: 4.096 us * 2^value per retry"),
    KNOB("RCOLL_IB_RETRY_CNT", "7", INT, ib_retry_cnt, 0, 7,
         "QP transport retries before a send fails (retry exceeded)"),
    KNOB("RCOLL_IB_RNR_RETRY", "7", INT, ib_rnr_retry, 0, 7,
         "QP receiver-not-ready retries (7 = unlimited; tests lower it)"),
    KNOB("RCOLL_IB_QPS_PER_CONN", "1", INT, ib_qps_per_conn, 1, 16,
         "queue pairs per verbs connection; each message is split over all of them"),
    KNOB("RCOLL_TOPO_FILE", "", STRING, topo_file, 0, 0,
         "read this host's topology from a file instead of detecting it: rcoll JSON, hwloc "
         "XML (lstopo --of xml) or NCCL topology XML (docs/topology.md)"),
    KNOB("RCOLL_TOPO_DUMP_FILE", "", STRING, topo_dump_file, 0, 0,
         "write the topology in use to this file (rcoll JSON), to inspect it or edit it into "
         "an RCOLL_TOPO_FILE"),
    KNOB("RCOLL_NET_GDR_LEVEL", "PXB", STRING, net_gdr_level, 0, 0,
         "farthest GPU-NIC path at which GPUDirect RDMA is used: LOC (never), PIX (same PCIe "
         "switch), PXB (switches below one host bridge), PHB (same CPU package) or SYS"),
    KNOB("RCOLL_P2P_LEVEL", "", STRING, p2p_level, 0, 0,
         "farthest GPU-GPU path at which GPU peer-to-peer is used (NVL, NVB, PIX, PXB, PHB, "
         "SYS; LOC = never); empty = PXB"),
};

static const rcoll_config_table_t all_table = RCOLL_CONFIG_TABLE("rcoll", knobs, rcoll_config_t);

const rcoll_knob_t *rcoll_config_knobs(size_t *count)
{
    *count = sizeof(knobs) / sizeof(knobs[0]);
    return knobs;
}

/* Path level names of src/topo/topo.h (rcoll_path_parse), usable as GDR/P2P levels.  Kept
 * here because util/ sits below topo/; test_topo checks that both agree. */
static int path_level_ok(const char *s)
{
    static const char *const levels[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS"};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (!strcasecmp(s, levels[i])) return 1;
    return 0;
}

rcoll_status_t rcoll_config_load(rcoll_config_t *cfg)
{
    rcoll_config_t tmp;
    rcoll_status_t st = rcoll_config_parse(&all_table, &tmp);
    if (st != RCOLL_OK) return st;
    if (rcoll_log_parse_level(tmp.debug) < 0)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "RCOLL_DEBUG='%s' is not one of NONE, WARN, INFO, TRACE",
                             tmp.debug);
    if (strcmp(tmp.algo, "auto") && strcmp(tmp.algo, "ring") && strcmp(tmp.algo, "rd") &&
        strcmp(tmp.algo, "oneshot") && strcmp(tmp.algo, "tree") && strcmp(tmp.algo, "twoshot") &&
        strcmp(tmp.algo, "hier"))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "RCOLL_ALGO='%s' is not one of auto, ring, rd, tree, oneshot, "
                             "twoshot, hier", tmp.algo);
    if (strcmp(tmp.proto, "auto") && strcmp(tmp.proto, "copy") && strcmp(tmp.proto, "cma"))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "RCOLL_PROTO='%s' is not one of auto, copy, cma", tmp.proto);
    if (!path_level_ok(tmp.net_gdr_level))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "RCOLL_NET_GDR_LEVEL='%s' is not a path level: LOC, NVL, NVB, PIX, "
                             "PXB, PHB or SYS", tmp.net_gdr_level);
    if (tmp.p2p_level[0] && !path_level_ok(tmp.p2p_level))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "RCOLL_P2P_LEVEL='%s' is not a path level: LOC, NVL, NVB, PIX, PXB, "
                             "PHB or SYS", tmp.p2p_level);
    rcoll_log_configure(tmp.debug, tmp.debug_subsys, tmp.debug_file);
    const rcoll_config_table_t *tables[] = {&all_table};
    rcoll_config_warn_unknown(tables, 1);
    *cfg = tmp;
    return RCOLL_OK;
}
