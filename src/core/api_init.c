/*
 * api_init.c - communicator creation, the entry points: rcoll_get_unique_id and the launch
 * styles (rcoll_comm_init_rank with a unique id, rcoll_comm_init_env from a launcher's
 * environment), the launcher handshake, rcoll_last_init_error, and the creations deferred
 * to a group's end.  The communicator itself is made by comm.c; nothing here moves data.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/api_int.h"
#include "core/comm.h"
#include "core/launch_pmix.h"
#include "util/cpath.h"
#include "util/log.h"
#include "util/net.h"
#include "util/status.h"
#include "util/time.h"

static __thread char init_error[RCOLL_LAST_ERROR_MAX];

const char *rcoll_last_init_error(void) { return init_error; }

/* Record an init failure for rcoll_last_init_error and the log. */
static rcoll_status_t init_failed(rcoll_status_t st)
{
    snprintf(init_error, sizeof(init_error), "%s", rcoll_err_get());
    RCOLL_WARN(INIT, "communicator creation failed: %s (%s)", init_error,
               rcoll_status_string(st));
    return st;
}

static void secret_from_string(const char *s, char secret[RCOLL_SECRET_BYTES])
{
    memset(secret, 0, RCOLL_SECRET_BYTES);
    memcpy(secret, s, strlen(s));
}

rcoll_status_t rcoll_api_new_root(const rcoll_config_t *cfg, rcoll_unique_id_t *id,
                                  rcoll_bs_root_t **root_p)
{
    return rcoll_api_new_tree_root(cfg, NULL, id, root_p);
}

rcoll_status_t rcoll_api_new_tree_root(const rcoll_config_t *cfg, const rcoll_bs_tree_t *tree,
                                       rcoll_unique_id_t *id, rcoll_bs_root_t **root_p)
{
    /* Every interface the filter accepts (as the TCP transport listens): a rank that cannot
     * reach the first address - a stray bridge listed first - tries the others. */
    rcoll_sockaddr_t addrs[RCOLL_BS_ROOT_ADDRS];
    char ifnames[RCOLL_BS_ROOT_ADDRS][RCOLL_NET_IFNAME_MAX];
    int naddrs = rcoll_net_pick_addrs(cfg->netif.socket_ifname, addrs, ifnames,
                                      RCOLL_BS_ROOT_ADDRS);
    if (naddrs < 1) return RCOLL_ERR_SYSTEM; /* said */
    uint8_t raw[RCOLL_SECRET_BYTES / 2];
    rcoll_status_t st = rcoll_random_bytes(raw, sizeof(raw));
    if (st != RCOLL_OK) return st;
    char hex[RCOLL_SECRET_BYTES + 1];
    for (size_t i = 0; i < sizeof(raw); i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    char secret[RCOLL_SECRET_BYTES];
    secret_from_string(hex, secret);
    return rcoll_bs_root_start_tree(cfg, addrs, naddrs, secret, 0, tree, id, root_p);
}

rcoll_status_t rcoll_get_unique_id(rcoll_unique_id_t *id)
{
    if (!id) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_get_unique_id: id is NULL");
    rcoll_config_t cfg;
    rcoll_status_t st = rcoll_config_load(&cfg);
    if (st == RCOLL_OK) st = rcoll_api_new_root(&cfg, id, NULL);
    return st == RCOLL_OK ? st : init_failed(st);
}

static rcoll_status_t check_init_args(int nranks, int rank, const void *id, const void *comm)
{
    if (!comm) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "comm (output) is NULL");
    if (!id) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "unique id is NULL");
    if (nranks < 1)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "nranks=%d (must be at least 1)", nranks);
    if (rank < 0 || rank >= nranks)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rank=%d is outside [0, nranks=%d)", rank,
                             nranks);
    return RCOLL_OK;
}

/* A creation succeeded: what rcoll_comm_setup_stats reports of it (the creation's poll loops
 * leave their fruitless iterations out of the path: rcoll_cpath_set_creating). */
static void note_setup(rcoll_comm_t comm, uint64_t t0_ns)
{
    comm->setup_wall_s = (double)(rcoll_now_ns() - t0_ns) * 1e-9;
    comm->setup_path_s = (double)rcoll_cpath_ns() * 1e-9;
}

static rcoll_status_t init_rank_now(int nranks, const rcoll_unique_id_t *id, int rank,
                                   rcoll_comm_t *comm)
{
    uint64_t t0 = rcoll_now_ns();
    rcoll_config_t cfg;
    rcoll_cpath_set_creating(1);
    rcoll_status_t st = rcoll_config_load(&cfg);
    if (st == RCOLL_OK && cfg.setup_path == RCOLL_SETUP_PATH_CALL) rcoll_cpath_restart();
    if (st == RCOLL_OK) st = rcoll_bs_check_id(id);
    if (st == RCOLL_OK) st = rcoll_comm_create(nranks, id, rank, &cfg, NULL, comm);
    if (st == RCOLL_OK) note_setup(*comm, t0);
    rcoll_cpath_set_creating(0);
    return st == RCOLL_OK ? st : init_failed(st);
}

static rcoll_status_t group_defer_init(int env, int nranks, const rcoll_unique_id_t *id,
                                       int rank, rcoll_comm_t *comm);

rcoll_status_t rcoll_comm_init_rank(int nranks, const rcoll_unique_id_t *id, int rank,
                                    rcoll_comm_t *comm)
{
    init_error[0] = '\0';
    rcoll_status_t st = check_init_args(nranks, rank, id, comm);
    if (st != RCOLL_OK) return init_failed(st);
    if (rcoll_api_group_depth) return group_defer_init(0, nranks, id, rank, comm);
    return init_rank_now(nranks, id, rank, comm);
}

rcoll_status_t rcoll_comm_init_rank_config(int nranks, const rcoll_unique_id_t *id, int rank,
                                           const rcoll_comm_config_t *config,
                                           rcoll_comm_t *comm)
{
    init_error[0] = '\0';
    rcoll_status_t st = check_init_args(nranks, rank, id, comm);
    if (st != RCOLL_OK) return init_failed(st);
    if (!config)
        return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_rank_config: "
                                         "config is NULL (use rcoll_comm_init_rank)"));
    if (config->size < offsetof(rcoll_comm_config_t, name) + sizeof(config->name) ||
        config->size > 4096)
        return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_rank_config: "
                                         "config->size is %zu (initialise the config with "
                                         "RCOLL_COMM_CONFIG_INIT)", config->size));
    if (!(config->timeout_s < 0) && !(config->timeout_s <= RCOLL_COMM_TIMEOUT_MAX))
        return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_rank_config: "
                                         "timeout_s %g is not in [0, %d] (or < 0: "
                                         "RCOLL_TIMEOUT)", config->timeout_s,
                                         RCOLL_COMM_TIMEOUT_MAX));
    if (config->name && strlen(config->name) >= sizeof(((rcoll_config_t *)0)->comm_name))
        return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_rank_config: "
                                         "name '%.40s...' is longer than %zu characters",
                                         config->name,
                                         sizeof(((rcoll_config_t *)0)->comm_name) - 1));
    if (rcoll_api_group_depth)
        return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "rcoll_comm_init_rank_config "
                                         "inside a group (use rcoll_comm_init_rank there)"));
    rcoll_config_t cfg;
    st = rcoll_config_load(&cfg);
    if (st == RCOLL_OK) st = rcoll_bs_check_id(id);
    if (st != RCOLL_OK) return init_failed(st);
    if (config->name) snprintf(cfg.comm_name, sizeof(cfg.comm_name), "%s", config->name);
    if (config->timeout_s >= 0) {
        cfg.timeout_s = config->timeout_s;
        snprintf(cfg.timeout_src, sizeof(cfg.timeout_src),
                 "timeout_s set at the creation of %s%s", cfg.comm_name[0] ? "communicator " :
                 "this communicator", cfg.comm_name);
    }
    /* Fields past name exist only for callers compiled with them (config->size says). */
    if (config->size >= offsetof(rcoll_comm_config_t, progress_thread) + sizeof(int) &&
        config->progress_thread >= 0)
        cfg.progress_thread = config->progress_thread != 0;
    if (config->size >= offsetof(rcoll_comm_config_t, wait) + sizeof(int) && config->wait >= 0) {
        if (config->wait > RCOLL_WAIT_SLEEP)
            return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_rank_config: "
                                             "wait %d is not RCOLL_WAIT_AUTO, _SPIN or _SLEEP "
                                             "(or < 0: RCOLL_WAIT)", config->wait));
        cfg.wait = config->wait;
    }
    st = rcoll_comm_create(nranks, id, rank, &cfg, NULL, comm);
    return st == RCOLL_OK ? st : init_failed(st);
}

/* Parse a non-negative decimal environment value; -1 when absent, -2 when malformed. */
static long env_long(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < 0) ? -2 : x;
}

/* Launchers whose environment gives each process its rank and the job's size, in the order
 * looked at (a job step under salloc inherits Slurm's variables, so the launcher started
 * inside it comes first).  size2: a second variable that may give the size instead. */
static const struct {
    const char *rank, *size, *size2, *who;
} env_launchers[] = {
    {"RANK", "WORLD_SIZE", NULL, "torchrun"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, "mpirun (Open MPI)"},
    {"PMI_RANK", "PMI_SIZE", NULL, "a PMI launcher (mpiexec, srun --mpi=pmi2)"},
    {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "a PMIx launcher"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "srun (Slurm)"},
};

/* Work out rank, size and root address from whichever launcher set the environment. */
static rcoll_status_t env_launch_params(const rcoll_config_t *cfg, int *rank, int *nranks,
                                        char *root, size_t root_len)
{
    const char *rank_var = "RCOLL_RANK", *size_var = "RCOLL_NRANKS", *who = "RCOLL_RANK";
    long r = cfg->rank, n = cfg->nranks;
    if (r < 0 && n < 0) {
        size_t nl = sizeof(env_launchers) / sizeof(env_launchers[0]);
        for (size_t i = 0; i < nl && r < 0; i++) {
            rank_var = env_launchers[i].rank;
            size_var = env_launchers[i].size;
            who = env_launchers[i].who;
            r = env_long(rank_var);
            if (r == -1) continue;
            n = env_long(size_var);
            if (n == -1 && env_launchers[i].size2) {
                size_var = env_launchers[i].size2;
                n = env_long(size_var);
            }
            if (r < 0 || n < 0)
                return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_env: started by "
                                     "%s (%s is set), but %s/%s are not both non-negative "
                                     "integers", who, rank_var, rank_var, size_var);
        }
    }
    if (r < 0 || n < 0)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "rcoll_comm_init_env: no rank/size in the environment (set "
                             "RCOLL_RANK and RCOLL_NRANKS, or launch with tools/rcoll-run, "
                             "torchrun, mpirun or srun)");
    if (n < 1 || r >= n)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s=%ld is outside [0, %s=%ld)", rank_var,
                             r, size_var, n);
    if (cfg->root[0]) {
        snprintf(root, root_len, "%s", cfg->root);
    } else {
        const char *addr = getenv("MASTER_ADDR");
        const char *port_text = getenv("MASTER_PORT");
        long port = env_long("MASTER_PORT");
        if (addr && *addr && port_text && (port < 1 || port >= 65535))
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_env: MASTER_PORT='%s' "
                                 "is not a port number below 65535", port_text);
        if (!addr || !*addr || port < 1)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                                 "rcoll_comm_init_env: rank %ld of %ld from %s/%s (%s), but no "
                                 "rendezvous address: set RCOLL_ROOT=host:port (a free port on "
                                 "the host of rank 0; all ranks the same), or MASTER_ADDR and "
                                 "MASTER_PORT (rcoll listens on MASTER_PORT + 1)%s%s%s%s", r,
                                 n, rank_var, size_var, who,
                                 addr && *addr ? "; MASTER_ADDR is set but MASTER_PORT is not"
                                               : "",
                                 !addr && port_text ? "; MASTER_PORT is set but MASTER_ADDR is "
                                                      "not" : "",
                                 strstr(who, "MPI") || strstr(who, "mpi")
                                     ? "; in an MPI program, rcoll_comm_init_mpi (rcoll_mpi.h) "
                                       "needs neither" : "",
                                 !rcoll_pmix_started() ? ""
                                 : !rcoll_pmix_built()
                                     ? "; a PMIx server started this process, but this "
                                       "librcoll was built without PMIx (libpmix-dev), which "
                                       "would need no address"
                                 : cfg->pmix == RCOLL_PMIX_OFF
                                     ? "; a PMIx server started this process, but RCOLL_PMIX="
                                       "off" : "");
        /* torchrun's own store listens on MASTER_PORT; rcoll's root takes the next port. */
        if (strchr(addr, ':'))
            snprintf(root, root_len, "[%s]:%ld", addr, port + 1);
        else
            snprintf(root, root_len, "%s:%ld", addr, port + 1);
    }
    *rank = (int)r;
    *nranks = (int)n;
    return RCOLL_OK;
}

/* RCOLL_BS_RELAYS: "N@host:port" (N relays on consecutive ports) or "host:port,host:port,..."
 * into *addrs (malloc'ed, *n of them; none when the text is empty). */
static rcoll_status_t parse_relays(const char *text, rcoll_sockaddr_t **addrs, int *n)
{
    *addrs = NULL;
    *n = 0;
    if (!text[0]) return RCOLL_OK;
    const char *at = strchr(text, '@');
    if (at) {
        char *end;
        long count = strtol(text, &end, 10);
        if (end != at || count < 1 || count > 65535)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_BS_RELAYS='%s': want N@host:port "
                                 "with N in [1, 65535], or host:port,host:port,...", text);
        rcoll_sockaddr_t first;
        rcoll_status_t st = rcoll_net_parse_hostport(at + 1, &first);
        if (st != RCOLL_OK) return rcoll_err_set(st, "RCOLL_BS_RELAYS: %s", rcoll_err_get());
        int port = rcoll_net_addr_port(&first);
        if (port < 1 || port + count - 1 > 65535)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_BS_RELAYS='%s': ports %d-%ld "
                                 "are not all port numbers", text, port, port + count - 1);
        *addrs = calloc((size_t)count, sizeof(**addrs));
        if (!*addrs) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "RCOLL_BS_RELAYS");
        for (long i = 0; i < count; i++) {
            (*addrs)[i] = first;
            rcoll_net_addr_set_port(&(*addrs)[i], port + (int)i);
        }
        *n = (int)count;
        return RCOLL_OK;
    }
    int count = 1;
    for (const char *c = text; *c; c++) count += *c == ',';
    *addrs = calloc((size_t)count, sizeof(**addrs));
    if (!*addrs) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "RCOLL_BS_RELAYS");
    const char *p = text;
    for (int i = 0; i < count; i++) {
        char one[RCOLL_CFG_STR_MAX];
        size_t len = strcspn(p, ",");
        snprintf(one, sizeof(one), "%.*s", (int)len, p);
        rcoll_status_t st = rcoll_net_parse_hostport(one, &(*addrs)[i]);
        if (st != RCOLL_OK) {
            free(*addrs);
            *addrs = NULL;
            return rcoll_err_set(st, "RCOLL_BS_RELAYS (relay %d): %s", i + 1, rcoll_err_get());
        }
        p += len + (p[len] == ',');
    }
    *n = count;
    return RCOLL_OK;
}

/* Rank 0 of an environment launch hosts the root on the given port (node 0 of tree). */
static rcoll_status_t start_env_root(const rcoll_config_t *cfg, rcoll_sockaddr_t *addr,
                                     const char *secret, const rcoll_bs_tree_t *tree,
                                     rcoll_bs_root_t **root)
{
    rcoll_unique_id_t unused;
    rcoll_sockaddr_t bind_addr = *addr;
    rcoll_status_t st = rcoll_bs_root_start_tree(cfg, &bind_addr, 1, secret, 1, tree, &unused,
                                                 root);
    if (st == RCOLL_OK) return st;
    /* The name may resolve to an address of another interface of this host, or a NAT'ed
     * name: listen with that port on the address of RCOLL_SOCKET_IFNAME's interface when it
     * is set (never on all interfaces unless asked), else on every address. */
    char keep[RCOLL_ERR_TEXT_MAX], ifname[64];
    const char *where = "the wildcard address";
    snprintf(keep, sizeof(keep), "%s", rcoll_err_get());
    memset(&bind_addr, 0, sizeof(bind_addr));
    bind_addr.sa.sa_family = addr->sa.sa_family;
    if (cfg->netif.socket_ifname[0]) {
        where = "the address of RCOLL_SOCKET_IFNAME";
        st = rcoll_net_pick_addr(cfg->netif.socket_ifname, &bind_addr, ifname, sizeof(ifname));
        if (st != RCOLL_OK) {
            rcoll_err_set(st, "%s (and %s: %s)", keep, where, rcoll_err_get());
            return st;
        }
    }
    rcoll_net_addr_set_port(&bind_addr, rcoll_net_addr_port(addr));
    char abuf[64];
    RCOLL_INFO(INIT, "cannot listen on the RCOLL_ROOT address (%s); the root listens on %s",
               keep, rcoll_net_addr_str(&bind_addr, abuf, sizeof(abuf)));
    st = rcoll_bs_root_start_tree(cfg, &bind_addr, 1, secret, 1, tree, &unused, root);
    if (st != RCOLL_OK) rcoll_err_set(st, "%s (and on %s: %s)", keep, where, rcoll_err_get());
    return st;
}

/* Rank 0 of an environment launch failed: its root tells the ranks that joined (text), and
 * gets up to 2 s to do so (they fail and leave, then it finishes); this process may exit
 * right after returning.  root may be NULL (other ranks). */
static void abort_env_root(const rcoll_config_t *cfg, rcoll_bs_root_t *root, const char *text)
{
    if (!root) return;
    rcoll_bs_root_abort(root, text);
    double wait_s = cfg->timeout_s < 2 ? cfg->timeout_s : 2;
    rcoll_bs_root_release(root, rcoll_now_ns() + (uint64_t)(wait_s * 1e9));
}

/* The communicator of an environment launch, from an id whose root rank 0 hosts (root: its
 * reference on rank 0, else NULL).  On failure the text is this rank's, and rank 0's root
 * tells the ranks that joined at once. */
static rcoll_status_t create_env_comm(const rcoll_config_t *cfg, int nranks,
                                      const rcoll_unique_id_t *id, int rank,
                                      rcoll_bs_root_t *root, int via_host, rcoll_comm_t *comm)
{
    rcoll_status_t st = rcoll_comm_create(nranks, id, rank, cfg, root, comm);
    if (st != RCOLL_OK && rank != via_host && st == RCOLL_ERR_TIMEOUT &&
        strstr(rcoll_err_get(), "could not connect to")) {
        /* Here the root is rank 0's (a relay rank via_host's): name the rank that never
         * served it. */
        char keep[RCOLL_ERR_TEXT_MAX];
        snprintf(keep, sizeof(keep), "%s", rcoll_err_get());
        if (via_host > 0)
            rcoll_err_set(st, "%s; this rank joins through the bootstrap relay that rank %d "
                          "hosts (RCOLL_BS_RELAYS): rank %d did not start it (not launched, "
                          "exited or killed before listening)", keep, via_host, via_host);
        else
            rcoll_err_set(st, "%s; in an environment launch rank 0 hosts the root: rank 0 did "
                          "not start it (not launched, exited or killed before listening)",
                          keep);
        return init_failed(st);
    }
    if (st != RCOLL_OK) {
        /* The others must not wait RCOLL_TIMEOUT for this rank: the root it hosts tells them.
         * The first cause stays this rank's message. */
        char keep[RCOLL_ERR_TEXT_MAX], why[RCOLL_BS_TEXT_MAX];
        snprintf(keep, sizeof(keep), "%s", rcoll_err_get());
        snprintf(why, sizeof(why), "rank %d (pid %d), which hosts the bootstrap root, could not "
                 "create its communicator: %.150s", rank, (int)getpid(), keep);
        abort_env_root(cfg, root, why);
        rcoll_err_set(st, "%s", keep);
        return init_failed(st);
    }
    return RCOLL_OK;
}

/* Whether rcoll_comm_init_env goes through PMIx (RCOLL_PMIX, launch_pmix.c).  auto: when a
 * PMIx server started this process, the library has PMIx, and nothing names another way:
 * RCOLL_RANK/RCOLL_NRANKS/RCOLL_ROOT (rcoll-run, netns-cluster, by hand), torchrun's
 * RANK/WORLD_SIZE (torchrun or rcoll-run started inside an srun or mpirun task inherits
 * PMIX_RANK, which is the task's, not this process's) or MASTER_ADDR. */
static rcoll_status_t want_pmix(const rcoll_config_t *cfg, int *yes)
{
    *yes = 0;
    if (cfg->pmix == RCOLL_PMIX_OFF) return RCOLL_OK;
    if (cfg->pmix == RCOLL_PMIX_ON) {
        if (!rcoll_pmix_built()) return rcoll_pmix_init(NULL); /* says: built without */
        if (!rcoll_pmix_started())
            return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "rcoll_comm_init_env: RCOLL_PMIX=on, "
                                 "but no PMIx server started this process (PMIX_NAMESPACE and "
                                 "PMIX_RANK are not set: launch with mpirun or srun "
                                 "--mpi=pmix)");
        *yes = 1;
        return RCOLL_OK;
    }
    if (!rcoll_pmix_built() || !rcoll_pmix_started()) return RCOLL_OK;
    if (cfg->rank >= 0 || cfg->nranks >= 0 || cfg->root[0]) return RCOLL_OK;
    const char *names[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return RCOLL_OK;
    }
    *yes = 1;
    return RCOLL_OK;
}

/* The relays of a PMIx launch (RCOLL_BS_RELAYS): unset, one per 32 ranks above 64 ranks
 * (tools/rcoll-run's rule); a number, that many (0: none).  Their addresses come through
 * PMIx, so addresses in the setting are refused. */
static rcoll_status_t pmix_relays(const rcoll_config_t *cfg, int nranks, int *n)
{
    const char *v = cfg->bs_relays;
    if (!v[0]) {
        *n = nranks > 64 ? (nranks + 31) / 32 - 1 : 0;
        return RCOLL_OK;
    }
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || end == v || x < 0 || x > 65535)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_BS_RELAYS='%s': under PMIx the "
                             "relays listen where their ranks run and publish their addresses "
                             "through PMIx; give a number of relays (0: none), or leave it unset "
                             "(one per 32 ranks above 64)", v);
    *n = (int)x;
    return RCOLL_OK;
}

/* Environment launch through PMIx: rank and size from it; rank 0 makes the unique id (its
 * root listens on the interfaces RCOLL_SOCKET_IFNAME accepts) and PMIx carries it to the
 * others.  With relays (pmix_relays), each relay's host rank listens on its first such
 * interface before the fence and publishes the address in it; after it, a rank joins
 * through its block's relay and a relay connects to its parent.  PMIx is finalized before
 * returning, so neither rcoll_comm_destroy nor exit needs it (a process that exits with PMIx
 * initialized is an abnormal end to Open MPI). */
static rcoll_status_t init_pmix_now(const rcoll_config_t *cfg, rcoll_comm_t *comm)
{
    rcoll_pmix_job_t job;
    rcoll_status_t st = rcoll_pmix_init(&job);
    if (st != RCOLL_OK) return init_failed(st);
    int nrelays = 0;
    st = pmix_relays(cfg, job.nranks, &nrelays);
    if (st != RCOLL_OK) {
        rcoll_pmix_fini(&job);
        return init_failed(st);
    }
    rcoll_bs_tree_t tree;
    rcoll_bs_tree_make(&tree, job.nranks, nrelays, cfg->bs_fanout);
    int node = rcoll_bs_tree_node(&tree, job.rank);
    int host = node > 0 && job.rank == rcoll_bs_tree_host(&tree, node);
    rcoll_unique_id_t id;
    memset(&id, 0, sizeof(id));
    rcoll_bs_root_t *root = NULL;
    char why[RCOLL_BS_TEXT_MAX], rwhy[RCOLL_BS_TEXT_MAX];
    const char *fail_text = NULL;
    if (job.rank == 0) {
        st = rcoll_api_new_tree_root(cfg, &tree, &id, &root);
        if (st != RCOLL_OK) {
            snprintf(why, sizeof(why), "rank 0 (pid %d) could not start the bootstrap root: "
                     "%.200s", (int)getpid(), rcoll_err_get());
            fail_text = why;
        }
    }
    /* A relay host listens now (its address goes into the fence) and starts the relay once
     * the id (the secret) and its parent's address are known. */
    rcoll_sockaddr_t mine, got;
    memset(&mine, 0, sizeof(mine));
    memset(&got, 0, sizeof(got));
    int listen_fd = -1;
    rcoll_pmix_relay_t relay = {.mine = NULL, .mine_fail = NULL, .from = -1, .got = &got};
    if (host) {
        char ifname[RCOLL_NET_IFNAME_MAX];
        relay.mine = &mine;
        if (rcoll_net_pick_addrs(cfg->netif.socket_ifname, &mine, &ifname, 1) < 1 ||
            rcoll_net_listen(&mine, 1024, 0, &listen_fd) != RCOLL_OK) {
            snprintf(rwhy, sizeof(rwhy), "rank %d (pid %d) could not start bootstrap relay %d: "
                     "%.200s", job.rank, (int)getpid(), node, rcoll_err_get());
            relay.mine_fail = rwhy;
        }
        int parent = rcoll_bs_tree_parent(&tree, node);
        relay.from = parent > 0 ? rcoll_bs_tree_host(&tree, parent) : -1;
    } else if (node > 0) {
        relay.from = rcoll_bs_tree_host(&tree, node);
    }
    st = rcoll_pmix_exchange_id(&job, &id, fail_text, cfg->timeout_s,
                                tree.nnodes > 1 ? &relay : NULL);
    if (st == RCOLL_OK && relay.mine_fail) st = rcoll_err_set(RCOLL_ERR_SYSTEM, "%s", rwhy);
    if (st != RCOLL_OK) {
        if (listen_fd >= 0) close(listen_fd);
        if (root) {
            char keep[RCOLL_ERR_TEXT_MAX];
            snprintf(keep, sizeof(keep), "%s", rcoll_err_get());
            abort_env_root(cfg, root, keep);
            rcoll_err_set(st, "%s", keep);
        }
        rcoll_pmix_fini(&job);
        return init_failed(st);
    }
    rcoll_unique_id_t root_id = id;
    if (host) {
        rcoll_sockaddr_t parent_addr = got;
        if (rcoll_bs_tree_parent(&tree, node) == 0) rcoll_bs_id_root_addr(&root_id, &parent_addr);
        st = rcoll_bs_relay_start(cfg, &tree, node, &mine, listen_fd, &parent_addr, &root_id,
                                  &id, &root);
        if (st != RCOLL_OK) {
            rcoll_pmix_fini(&job);
            return init_failed(st);
        }
    } else if (node > 0) {
        rcoll_bs_make_relay_id(&got, rcoll_bs_tree_host(&tree, node), &root_id, &id);
    }
    RCOLL_INFO(INIT, "environment launch through PMIx: namespace %s, rank %d of %d, local rank "
               "%d of %d; the bootstrap id came through PMIx (no RCOLL_ROOT needed)",
               job.nspace, job.rank, job.nranks, job.local_rank, job.local_size);
    if (tree.nnodes > 1 && job.rank == 0)
        RCOLL_INFO(INIT, "bootstrap tree: %d relays below the root, %d ranks per block, %d "
                   "children per node (addresses through PMIx)", tree.nnodes - 1, tree.block,
                   tree.fanout);
    st = create_env_comm(cfg, job.nranks, &id, job.rank, root,
                         rcoll_bs_tree_host(&tree, node), comm);
    rcoll_pmix_fini(&job);
    return st;
}

static rcoll_status_t init_env_do(rcoll_comm_t *comm)
{
    rcoll_config_t cfg;
    rcoll_status_t st = rcoll_config_load(&cfg);
    if (st != RCOLL_OK) return init_failed(st);
    if (cfg.setup_path == RCOLL_SETUP_PATH_CALL) rcoll_cpath_restart();
    int pmix = 0;
    st = want_pmix(&cfg, &pmix);
    if (st != RCOLL_OK) return init_failed(st);
    if (pmix) return init_pmix_now(&cfg, comm);
    int rank = 0, nranks = 0;
    char root_text[RCOLL_CFG_STR_MAX + 16];
    st = env_launch_params(&cfg, &rank, &nranks, root_text, sizeof(root_text));
    if (st != RCOLL_OK) return init_failed(st);
    rcoll_sockaddr_t addr;
    st = rcoll_net_parse_hostport(root_text, &addr);
    if (st != RCOLL_OK) return init_failed(st);
    if (strlen(cfg.secret) > RCOLL_SECRET_BYTES)
        return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_SECRET is longer "
                                         "than %d characters", RCOLL_SECRET_BYTES));
    if (!cfg.secret[0] && rank == 0)
        RCOLL_WARN(INIT, "RCOLL_SECRET is not set: the bootstrap is unauthenticated (any "
                   "process that reaches %s can join); tools/rcoll-run sets one", root_text);
    char secret[RCOLL_SECRET_BYTES];
    secret_from_string(cfg.secret, secret);
    /* The bootstrap tree: rank 0's root and, with RCOLL_BS_RELAYS, relays that admit the
     * ranks of their blocks, so that no process accepts every rank's connection. */
    rcoll_sockaddr_t *relays = NULL;
    int nrelays = 0;
    st = parse_relays(cfg.bs_relays, &relays, &nrelays);
    if (st != RCOLL_OK) return init_failed(st);
    rcoll_bs_tree_t tree;
    rcoll_bs_tree_make(&tree, nranks, nrelays, cfg.bs_fanout);
    int node = rcoll_bs_tree_node(&tree, rank);
    rcoll_bs_root_t *root = NULL;
    rcoll_unique_id_t id, root_id;
    rcoll_bs_make_id(&addr, 1, secret, &root_id);
    if (rank == 0) {
        st = start_env_root(&cfg, &addr, secret, &tree, &root);
    } else if (node > 0 && rank == rcoll_bs_tree_host(&tree, node)) {
        int parent = rcoll_bs_tree_parent(&tree, node);
        st = rcoll_bs_relay_start(&cfg, &tree, node, &relays[node - 1], -1,
                                  parent ? &relays[parent - 1] : &addr, &root_id, &id, &root);
    }
    if (st != RCOLL_OK) {
        free(relays);
        return init_failed(st);
    }
    if (node > 0)
        rcoll_bs_make_relay_id(&relays[node - 1], rcoll_bs_tree_host(&tree, node), &root_id, &id);
    else
        id = root_id;
    free(relays);
    if (tree.nnodes > 1 && rank == 0)
        RCOLL_INFO(INIT, "bootstrap tree: %d relays below the root, %d ranks per block, %d "
                   "children per node", tree.nnodes - 1, tree.block, tree.fanout);
    return create_env_comm(&cfg, nranks, &id, rank, root, rcoll_bs_tree_host(&tree, node), comm);
}

static rcoll_status_t init_env_now(rcoll_comm_t *comm)
{
    uint64_t t0 = rcoll_now_ns();
    rcoll_cpath_set_creating(1);
    rcoll_status_t st = init_env_do(comm);
    if (st == RCOLL_OK) note_setup(*comm, t0);
    rcoll_cpath_set_creating(0);
    return st;
}

/* Tell the launcher how far this rank got (tools/rcoll-run passes a socket as
 * RCOLL_RUN_JOIN_FD): 'S' when the rank starts to join, 'J' when it has joined, then the
 * socket is closed.  So rcoll-run can end a job whose rank exited before even starting to
 * join, instead of leaving the others waiting for it until RCOLL_TIMEOUT.  Once per process;
 * anything that is not a socket is left alone. */
static void tell_launcher(char what)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int fd = -2; /* -2: not looked up yet, -1: none */
    pthread_mutex_lock(&lock);
    if (fd == -2) {
        const char *v = getenv("RCOLL_RUN_JOIN_FD");
        char *end;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        struct stat sb;
        fd = x >= 3 && x < 1 << 20 && !*end && fstat((int)x, &sb) == 0 && S_ISSOCK(sb.st_mode)
                 ? (int)x : -1;
    }
    if (fd >= 0) {
        if (send(fd, &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1 || what != 'S') {
            close(fd);
            fd = -1;
        }
    }
    pthread_mutex_unlock(&lock);
}

rcoll_status_t rcoll_comm_init_env(rcoll_comm_t *comm)
{
    init_error[0] = '\0';
    if (!comm) return init_failed(rcoll_err_set(RCOLL_ERR_INVALID_ARG, "comm is NULL"));
    if (rcoll_api_group_depth) return group_defer_init(1, 0, NULL, 0, comm);
    tell_launcher('S');
    rcoll_status_t st = init_env_now(comm);
    tell_launcher(st == RCOLL_OK ? 'J' : 'F');
    return st;
}

/* ------------------------------------------------------------------------------------------
 * Creations deferred to a group's end (rcoll_group_end runs them; api_group.c)
 * ---------------------------------------------------------------------------------------- */

/* A communicator creation deferred to the group's end (NCCL's pattern: one thread creates
 * the communicators of several ranks of one job inside a group; run one by one, the first
 * would wait for the others forever). */
typedef struct {
    int env;                 /* rcoll_comm_init_env, else rcoll_comm_init_rank */
    int nranks, rank;
    rcoll_unique_id_t id;
    rcoll_comm_t *out;       /* the caller's handle, written at rcoll_group_end */
    rcoll_comm_t comm;
    rcoll_status_t st;
    char err[RCOLL_LAST_ERROR_MAX];
} group_init_t;
static __thread group_init_t *group_inits;
static __thread int group_ninits, group_cap_inits;

static rcoll_status_t group_defer_init(int env, int nranks, const rcoll_unique_id_t *id,
                                       int rank, rcoll_comm_t *comm)
{
    if (group_ninits == group_cap_inits) {
        int cap = group_cap_inits ? 2 * group_cap_inits : 4;
        group_init_t *g = realloc(group_inits, (size_t)cap * sizeof(*g));
        if (!g)
            return init_failed(rcoll_err_set(RCOLL_ERR_NO_MEMORY, "group: out of memory "
                                             "recording a communicator creation"));
        group_inits = g;
        group_cap_inits = cap;
    }
    group_init_t *gi = &group_inits[group_ninits++];
    memset(gi, 0, sizeof(*gi));
    gi->env = env;
    gi->nranks = nranks;
    gi->rank = rank;
    if (id) gi->id = *id;
    gi->out = comm;
    *comm = NULL; /* set by rcoll_group_end */
    return RCOLL_OK;
}

static void *group_init_run(void *arg)
{
    group_init_t *gi = arg;
    init_error[0] = '\0';
    if (gi->env) tell_launcher('S');
    gi->st = gi->env ? init_env_now(&gi->comm) : init_rank_now(gi->nranks, &gi->id, gi->rank,
                                                                &gi->comm);
    if (gi->env) tell_launcher(gi->st == RCOLL_OK ? 'J' : 'F');
    if (gi->st != RCOLL_OK) snprintf(gi->err, sizeof(gi->err), "%s", init_error);
    return NULL;
}

/* Run the group's communicator creations together (a thread each when there are several)
 * and hand out the handles; the first failure's text becomes this thread's init error. */
static rcoll_status_t group_run_inits(void)
{
    int n = group_ninits;
    pthread_t *th = n > 1 ? calloc((size_t)n, sizeof(*th)) : NULL;
    int *started = n > 1 ? calloc((size_t)n, sizeof(*started)) : NULL;
    group_ninits = 0;
    if (n > 1 && (!th || !started)) {
        free(th);
        free(started);
        return init_failed(rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rcoll_group_end: out of memory "
                                         "starting %d communicator creations", n));
    }
    for (int i = 0; i < n; i++) {
        group_init_t *gi = &group_inits[i];
        if (n == 1) {
            group_init_run(gi);
            continue;
        }
        int e = pthread_create(&th[i], NULL, group_init_run, gi);
        started[i] = e == 0;
        if (e) {
            gi->st = RCOLL_ERR_SYSTEM;
            snprintf(gi->err, sizeof(gi->err), "rcoll_group_end: could not start a thread to "
                     "create the communicator of rank %d: %s", gi->rank, strerror(e));
        }
    }
    for (int i = 0; n > 1 && i < n; i++)
        if (started[i]) pthread_join(th[i], NULL);
    free(th);
    free(started);
    rcoll_status_t first = RCOLL_OK;
    init_error[0] = '\0';
    for (int i = 0; i < n; i++) {
        group_init_t *gi = &group_inits[i];
        if (gi->st == RCOLL_OK) {
            *gi->out = gi->comm;
        } else if (first == RCOLL_OK) {
            first = gi->st;
            snprintf(init_error, sizeof(init_error), "%s", gi->err);
        }
    }
    return first;
}

rcoll_status_t rcoll_api_group_run_inits(void)
{
    return group_ninits ? group_run_inits() : RCOLL_OK;
}
