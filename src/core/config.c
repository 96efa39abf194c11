/*
 * config.c - the core's knob table (launch, waits, data path) and the list of every
 * module's table: the one place that sees them all.  Each table lives next to its module's
 * code (util/log.c, util/net.c, topo/topo_detect.c, transport/registry.c, shm.c, socket.c,
 * verbs_config.c, ncclnet.c, algo/select.c); the parser is util/config.c.
 */
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "core/config.h"
#include "util/log.h"
#include "util/status.h"

#define KNOB_STR(name, def, field, help) RCOLL_KNOB_STR(rcoll_config_t, name, def, field, help)
#define KNOB(name, def, kind, field, lo, hi, help) \
    RCOLL_KNOB_NUM(rcoll_config_t, name, def, kind, field, lo, hi, help)

/* RCOLL_WAIT, in the order of RCOLL_WAIT_AUTO, _SPIN, _SLEEP (rcoll.h). */
static const char *const rcoll_wait_names[] = {"auto", "spin", "sleep", NULL};
_Static_assert(RCOLL_WAIT_AUTO == 0 && RCOLL_WAIT_SPIN == 1 && RCOLL_WAIT_SLEEP == 2,
               "rcoll_wait_names follows the RCOLL_WAIT_* values");

/* RCOLL_PMIX, in the order of RCOLL_PMIX_AUTO, _ON, _OFF (config.h). */
static const char *const rcoll_pmix_names[] = {"auto", "on", "off", NULL};
static const char *const rcoll_setup_path_names[] = {"call", "process", NULL};

static const rcoll_knob_t core_knobs[] = {
    KNOB("RCOLL_RANK", "-1", INT, rank, -1, 1 << 24,
         "this process's rank (rcoll_comm_init_env); set by rcoll-run"),
    KNOB("RCOLL_NRANKS", "-1", INT, nranks, -1, 1 << 24,
         "number of ranks (rcoll_comm_init_env); set by rcoll-run"),
    KNOB_STR("RCOLL_ROOT", "", root,
             "host:port where rank 0 runs the bootstrap root (rcoll_comm_init_env)"),
    KNOB_STR("RCOLL_SECRET", "", secret,
             "job secret every rank must prove at bootstrap (rcoll-run makes one per job)"),
    KNOB_STR("RCOLL_BS_RELAYS", "", bs_relays,
             "relays of the bootstrap tree (rcoll_comm_init_env; set by rcoll-run for large "
             "jobs): N@host:port (N relays on consecutive ports of one host) or host:port,"
             "host:port,...; relay i is hosted by rank i * block (block = ranks / (relays + 1), "
             "rounded up) and the ranks of its block join through it, so the root admits only "
             "its own block and its child relays; every rank must see the same value.  Under "
             "PMIx: a number of relays (0: none; unset: one per 32 ranks above 64 ranks), "
             "whose addresses travel through PMIx"),
    KNOB("RCOLL_BS_FANOUT", "8", INT, bs_fanout, 2, 1024,
         "child relays per node of the bootstrap tree (RCOLL_BS_RELAYS): relay i's parent is "
         "relay (i - 1) / fanout, relay 0 being the root"),
    RCOLL_KNOB_ENUM_OF(rcoll_config_t, "RCOLL_PMIX", "auto", pmix, rcoll_pmix_names,
                       "rcoll_comm_init_env under a PMIx server (mpirun, srun --mpi=pmix; "
                       "PMIX_NAMESPACE and PMIX_RANK set): auto takes rank and size from PMIx "
                       "and passes the bootstrap id through it unless RCOLL_RANK, "
                       "RCOLL_NRANKS, RCOLL_ROOT, torchrun's RANK/WORLD_SIZE or MASTER_ADDR "
                       "say otherwise; on: always (an error without a PMIx server or a build "
                       "with PMIx); off: never"),
    RCOLL_KNOB_ENUM_OF(rcoll_config_t, "RCOLL_SETUP_PATH", "call", setup_path,
                       rcoll_setup_path_names,
                       "where the critical path of a communicator's creation starts "
                       "(rcoll_comm_setup_stats): call, each rank's creation call (what "
                       "creation costs once every rank has called it); process, the start "
                       "of each rank's process (its start-up and its work before the call "
                       "on the path too)"),
    KNOB("RCOLL_TIMEOUT", "300", SECONDS, timeout_s, 0, 86400 * 7,
         "seconds to wait without progress from an awaited peer before failing"),
    KNOB("RCOLL_WATCHDOG_S", "-1", SECONDS, watchdog_s, -2, 86400 * 7,
         "seconds a collective may make no progress before every waiting rank logs one report "
         "(WARN) of which ranks reached it and which did not, and what it waits on; the "
         "operation goes on (RCOLL_TIMEOUT fails it); 0 = off, negative = min(60, "
         "RCOLL_TIMEOUT / 3)"),
    KNOB("RCOLL_SPIN", "-1", INT, spin, -1, 100000000,
         "poll iterations spent spinning before a waiting rank yields the CPU; -1 = auto "
         "(200, or 0 when this machine's ranks outnumber the CPUs of their affinity masks "
         "together)"),
    KNOB("RCOLL_POLL_US", "20000", INT, poll_us, 0, 100000000,
         "microseconds a waiting rank keeps polling (spinning, then yielding the CPU) before "
         "it naps in 50 us steps: a peer late by less is noticed at once, a longer idle wait "
         "costs little CPU"),
    KNOB("RCOLL_RAS", "0", INT, ras, 0, 1,
         "1: each process answers who is stuck (every communicator's running operation, "
         "what it waits on, since when) as JSON on the abstract unix socket "
         "@rcoll-ras.<uid>.<pid>, to its own user only; tools/rcoll-top reads them"),
    KNOB_STR("RCOLL_FLIGHT_DIR", "", flight_dir,
             "directory of the flight recorder: on a watchdog report or a timeout each waiting "
             "rank writes its communicator's record and last 16 operations there as "
             "rcoll-flight.<id>.<rank>.json (tools/rcoll-flight merges a job's)"),
    KNOB("RCOLL_PROGRESS_THREAD", "0", INT, progress_thread, 0, 1,
         "1: each communicator gets a thread that progresses its nonblocking operations while "
         "the caller computes (rcoll_comm_config_t.progress_thread wins over this)"),
    KNOB("RCOLL_PROGRESS_POLL_US", "200", INT, progress_poll_us, 0, 100000000,
         "microseconds the progress thread keeps polling (spinning, then yielding the CPU) "
         "after its last progress before it naps in 50 us steps"),
    RCOLL_KNOB_ENUM_OF(rcoll_config_t, "RCOLL_WAIT", "auto", wait, rcoll_wait_names,
                       "how a waiting rank lets go of its CPU: spin (poll, then nap in 50 us "
                       "steps), sleep (poll RCOLL_SLEEP_AFTER_US, then sleep until a peer on "
                       "this host rings its doorbell; peers on other hosts: as spin), auto "
                       "(sleep when this machine's ranks outnumber the CPUs of their affinity "
                       "masks together, else spin)"),
    KNOB("RCOLL_SLEEP_AFTER_US", "50", INT, sleep_after_us, 0, 100000000,
         "in the sleep wait mode, microseconds a waiting rank polls (spinning, then yielding) "
         "before it sleeps on its doorbell"),
    KNOB("RCOLL_CHUNK_SIZE", "0", SIZE, chunk_size, 0, 1LL << 32,
         "pipeline chunk in bytes (0 = RCOLL_BUFFSIZE / 4); small values test multi-chunk paths"),
    RCOLL_KNOB_SUBTABLE(rcoll_config_t, alg, rcoll_algo_config_table),
    KNOB("RCOLL_TWOSHOT_SLOT", "0", SIZE, twoshot_slot, 0, 1LL << 30,
         "bytes per two-shot pipeline slot, 4 slots per rank in the host segment (0 = "
         "RCOLL_BUFFSIZE / 16, at least 4K)"),
    KNOB_STR("RCOLL_TUNING_FILE", "", tuning_file,
             "file of cost-model constants (key = value: shm_alpha_us, shm_beta_gbps, "
             "net_alpha_us, net_beta_gbps, reduce_gbps); rcoll-info --tuning shows the model"),
    KNOB("RCOLL_TUNING_PROBE", "1", INT, tuning_probe, 0, 1,
         "1: measure the cost model's alpha/beta/gamma, and every all-reduce algorithm auto "
         "may choose, at communicator creation (2-50 ms; skipped when RCOLL_TUNING_FILE is set "
         "or RCOLL_ALGO forces the algorithm); 0: built-in constants and formulas"),
    KNOB("RCOLL_TUNING_PROBE_MAX", "64", INT, tuning_probe_max, 1, 1 << 24,
         "communicators of more ranks than this skip the tuning probe and take the built-in "
         "constants (or RCOLL_TUNING_FILE): its ring over every rank grows with the size, and "
         "what it measures, one link's costs, does not"),
    KNOB("RCOLL_TUNING_REUSE", "1", INT, tuning_reuse, 0, 1,
         "1: a communicator of the same shape (ranks, hosts, paths) as one this process "
         "probed before takes that probe's measurements (every rank must have them) instead "
         "of measuring again; 0: every creation measures"),
    RCOLL_KNOB_ENUM_OF(rcoll_config_t, "RCOLL_TRANSPORT", "auto", transport,
                       rcoll_transport_names,
                       "transport between all ranks: auto (shared memory on one host, else the "
                       "network transport of RCOLL_NET), or one transport for every peer by its "
                       "name (the registry's, listed below; plugin: the NCCL net plugin of "
                       "RCOLL_NET_PLUGIN)"),
    KNOB("RCOLL_SHM_DISABLE", "0", INT, shm_disable, 0, 1,
         "1: ranks on one host talk over the network transport instead of shared memory"),
    KNOB("RCOLL_CMA", "1", INT, cma, 0, 1,
         "1: ranks on one host may read each other's buffers with cross-memory attach "
         "(process_vm_readv; the cma all-reduce) where a probe at creation shows that every "
         "rank can; 0: never"),
    KNOB_STR("RCOLL_HOST_ID", "", host_id,
             "this rank's host identity (ranks with equal ids are one host: shared memory, one "
             "ring segment); default: hostname, boot id and network namespace"),
    RCOLL_KNOB_ENUM_OF(rcoll_config_t, "RCOLL_NET", "auto", net, rcoll_net_names,
                       "network transport between hosts: auto (the first of the registry's "
                       "network transports that works here: the NCCL net plugin of "
                       "RCOLL_NET_PLUGIN when set, verbs when an active RDMA port exists, "
                       "tcp), or one by its name, which fails when it cannot work here"),
    RCOLL_KNOB_SUBTABLE(rcoll_config_t, netif, rcoll_net_config_table),
    RCOLL_KNOB_SUBTABLE(rcoll_config_t, conn, rcoll_transport_config_table),
    RCOLL_KNOB_SUBTABLE(rcoll_config_t, topo, rcoll_topo_config_table),
    RCOLL_KNOB_SUBTABLE(rcoll_config_t, gpu, rcoll_gpu_config_table),
};
const rcoll_config_table_t rcoll_core_config_table =
    RCOLL_CONFIG_TABLE("core", core_knobs, rcoll_config_t);

/* Lower layers first: the order rcoll-info -c prints them in; the transports' tables are the
 * registry's (transport/registry.c). */
#define MAX_TABLES 32
static const rcoll_config_table_t *all_tables[MAX_TABLES];
static size_t ntables;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void add_table(const rcoll_config_table_t *t)
{
    if (ntables < MAX_TABLES) all_tables[ntables++] = t;
}

static void list_tables(void)
{
    add_table(&rcoll_log_config_table);
    add_table(&rcoll_net_config_table);
    add_table(&rcoll_gpu_config_table);
    add_table(&rcoll_topo_config_table);
    size_t n;
    const rcoll_config_table_t *const *tp = rcoll_transport_config_tables(&n);
    for (size_t i = 0; i < n; i++) add_table(tp[i]);
    add_table(&rcoll_algo_config_table);
    add_table(&rcoll_core_config_table);
}

const rcoll_config_table_t *const *rcoll_config_tables(size_t *count)
{
    pthread_once(&tables_once, list_tables);
    *count = ntables;
    return all_tables;
}

rcoll_status_t rcoll_config_load(rcoll_config_t *cfg)
{
    rcoll_log_config_t log;
    rcoll_config_t tmp;
    rcoll_status_t st = rcoll_config_parse(&rcoll_log_config_table, &log);
    if (st == RCOLL_OK) st = rcoll_log_subsys_check(log.subsys);
    /* the other modules' knobs are parsed when used; checking them here makes a bad value
     * fail every communicator's creation, not just the one that starts that module */
    size_t nt;
    const rcoll_config_table_t *const *tables = rcoll_config_tables(&nt);
    for (size_t i = 0; i < nt && st == RCOLL_OK; i++) {
        if (tables[i] == &rcoll_log_config_table || tables[i] == &rcoll_core_config_table)
            continue;
        void *scratch = malloc(tables[i]->size);
        st = scratch ? rcoll_config_parse(tables[i], scratch)
                     : rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory to check the knobs");
        free(scratch);
    }
    if (st == RCOLL_OK) st = rcoll_config_parse(&rcoll_core_config_table, &tmp);
    if (st != RCOLL_OK) return st;
    rcoll_log_configure(&log);
    rcoll_config_warn_unknown(tables, nt);
    *cfg = tmp;
    return RCOLL_OK;
}
