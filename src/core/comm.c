/*
 * comm.c - building and tearing down a communicator: pick the transport, join through the
 * bootstrap, connect the ring neighbours, allocate the (bounded) staging memory.  The one
 * place where bootstrap, transports and algorithms meet.  Does not run collectives
 * (progress.c) or check user arguments (api.c).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/tree.h"
#include "core/comm.h"
#include "core/ras.h"
#include "core/pair.h"
#include "cuda/gpu.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

#define MIN_CHUNK_BYTES 64

static rcoll_status_t choose_transports(rcoll_comm_t c);
static rcoll_status_t setup_hostseg(rcoll_comm_t c);

static rcoll_status_t alloc_staging(rcoll_comm_t c)
{
    size_t chunk = c->cfg.chunk_size ? c->cfg.chunk_size : c->cfg.conn.buffsize / 4;
    if (chunk < MIN_CHUNK_BYTES) chunk = MIN_CHUNK_BYTES;
    if (chunk > c->cfg.conn.buffsize) chunk = c->cfg.conn.buffsize;
    /* a chunk is one message: no larger than any rank's device of any transport carries
     * (the same bound on every rank: it comes from the rank table) */
    for (int p = 0; p < c->nranks; p++)
        for (int t = 0; t < RCOLL_MAX_TRANSPORTS; t++)
            if (c->peers[p].max_msg[t] && c->peers[p].max_msg[t] < chunk)
                chunk = (size_t)c->peers[p].max_msg[t];
    if (chunk < 8) chunk = 8;
    chunk &= ~(size_t)7; /* whole elements of every datatype */
    size_t nslots = c->cfg.conn.buffsize / chunk;
    if (nslots > RCOLL_EXEC_MAX_SLOTS) nslots = RCOLL_EXEC_MAX_SLOTS;
    if (nslots < 1) nslots = 1;
    c->chunk_bytes = chunk;
    c->link.slot_bytes = chunk;
    c->link.nslots = (int)nslots;
    size_t bytes = nslots * chunk;
    if (posix_memalign((void **)&c->link.staging, 4096, bytes) != 0)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "cannot allocate %zu bytes of staging", bytes);
    c->mem_bytes += bytes;
    c->mem_staging += bytes;
    for (int p = 0; p < c->nranks; p++) {
        if (!c->link.recv_comms[p]) continue;
        rcoll_status_t st = c->link.tps[p]->reg_mr(c->link.recv_comms[p], c->link.staging,
                                                    bytes, RCOLL_PTR_HOST,
                                                    &c->link.staging_mh[p]);
        if (st != RCOLL_OK) {
            rcoll_err_prefix("registering staging memory: ");
            return st;
        }
    }
    return RCOLL_OK;
}

/* This process's affinity mask as peer-info words (all online CPUs if it cannot be read). */
static void my_cpus(uint64_t words[RCOLL_CPU_WORDS])
{
    memset(words, 0, RCOLL_CPU_WORDS * sizeof(uint64_t));
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        CPU_ZERO(&set);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < n && i < CPU_SETSIZE; i++) CPU_SET((int)i, &set);
    }
    for (int i = 0; i < CPU_SETSIZE && i < RCOLL_CPU_WORDS * 64; i++)
        if (CPU_ISSET(i, &set)) words[i / 64] |= 1ull << (i % 64);
}

/* RCOLL_SPIN=-1 (auto): spin briefly, unless the ranks on this machine (ranks in other
 * network namespaces or with another RCOLL_HOST_ID included) outnumber the CPUs they may run
 * on together - the union of their affinity masks; then a waiting rank yields at once so the
 * rank it waits for can run.  The union, not this rank's own mask: a launcher that binds each
 * rank to its own core (mpirun, srun) gives every rank a one-CPU mask, and those ranks spin. */
static int choose_spin(rcoll_comm_t c, const rcoll_peer_info_t *mine)
{
    int local = 0, same_machine = 0;
    uint64_t all[RCOLL_CPU_WORDS] = {0};
    for (int p = 0; p < c->nranks; p++) {
        local += c->peers[p].host_hash == mine->host_hash;
        if (c->peers[p].machine_hash != mine->machine_hash) continue;
        same_machine++;
        for (int w = 0; w < RCOLL_CPU_WORDS; w++) all[w] |= c->peers[p].cpus[w];
    }
    int cpus = 0;
    for (int w = 0; w < RCOLL_CPU_WORDS; w++) cpus += __builtin_popcountll(all[w]);
    c->local_ranks = local;
    int oversub = same_machine > cpus;
    if (c->cfg.spin >= 0) return oversub;
    c->cfg.spin = oversub ? 0 : 200;
    if (same_machine > cpus)
        RCOLL_INFO(INIT, "%d ranks on this machine share %d CPUs (their affinity masks "
                   "together): waiting ranks yield at once (RCOLL_SPIN=0)", same_machine, cpus);
    else
        RCOLL_INFO(INIT, "%d ranks on this machine, %d CPUs in their affinity masks: waiting "
                   "ranks spin %d polls before yielding", same_machine, cpus, c->cfg.spin);
    return oversub;
}

#define BELLS_MAX 256 /* ranks of a host whose doorbells a rank rings, at most */

/* Whether a rank of this machine sleeps in long waits: RCOLL_WAIT_SLEEP, or auto on a machine
 * whose ranks outnumber their CPUs (choose_spin's test, which every rank of the machine
 * computes alike from the table). */
static int rank_sleeps(const rcoll_peer_info_t *p, int oversub)
{
    return p->bell_fd >= 0 &&
           (p->wait_mode == RCOLL_WAIT_SLEEP || (p->wait_mode == RCOLL_WAIT_AUTO && oversub));
}

/* The doorbells (util/bell.h): map those of the other ranks of this host that may sleep (this
 * process's own when another rank of the communicator is a thread of it), to ring them after
 * every progress pass that moved anything.  This rank sleeps itself only when every peer is on its
 * host and every bell there could be mapped (a bell it cannot open is a peer that could not
 * open its own either); otherwise long waits nap (RCOLL_WAIT_SPIN's way). */
static void setup_bells(rcoll_comm_t c, int oversub)
{
    const rcoll_peer_info_t *mine = &c->peers[c->rank];
    c->sleeps = 0;
    c->nbells = 0;
    int32_t fd = -1; /* this process's bell (split and shrunk communicators take it here) */
    if (!c->bell_self && (rcoll_bell_self(&c->bell_self, &fd) != RCOLL_OK || fd != mine->bell_fd))
        c->bell_self = NULL;
    int me_sleeps = rank_sleeps(mine, oversub), any = 0, remote = 0;
    for (int p = 0; p < c->nranks; p++) {
        if (c->peers[p].host_hash != mine->host_hash) {
            remote = 1;
            continue;
        }
        any |= rank_sleeps(&c->peers[p], oversub);
    }
    if (!any || c->nranks < 2) return;
    if (c->local_ranks > BELLS_MAX) {
        RCOLL_INFO(INIT, "%d ranks on this host: more doorbells than a rank rings (%d); waits "
                   "poll and nap", c->local_ranks, BELLS_MAX);
        return;
    }
    c->bells = calloc((size_t)c->local_ranks, sizeof(*c->bells));
    if (!c->bells) return;
    int failed = 0;
    for (int p = 0; p < c->nranks; p++) {
        const rcoll_peer_info_t *q = &c->peers[p];
        /* Not this rank's own: its own passes never wake a thread of its process that
         * sleeps (the progress thread sleeps only while nobody waits; new work and the end
         * ring it through rcoll_pt_unlock/stop), and such a ring per pass cost a system call
         * and a lock hand-off (a 1 KiB torch all-reduce took 16-18 us instead of 8-10). */
        if (p == c->rank || q->host_hash != mine->host_hash || !rank_sleeps(q, oversub))
            continue;
        int dup = 0; /* one bell per process (ranks that are threads of one process) */
        for (int j = 0; j < p && !dup; j++)
            dup = j != c->rank && c->peers[j].pid == q->pid &&
                  c->peers[j].host_hash == q->host_hash && rank_sleeps(&c->peers[j], oversub);
        if (dup) continue;
        rcoll_bell_t *b = q->pid == mine->pid ? c->bell_self : rcoll_bell_attach(q->pid, q->bell_fd);
        if (!b) {
            RCOLL_INFO(INIT, "rank %d's doorbell: %s; waits poll and nap", p, rcoll_err_get());
            failed = 1;
            continue;
        }
        c->bells[c->nbells++] = b;
    }
    c->sleeps = me_sleeps && !remote && !failed && c->bell_self;
    RCOLL_INFO(INIT, "waits: %s (RCOLL_WAIT=%s); ringing %d doorbell(s) of this host",
               c->sleeps ? "sleep on the doorbell" : "poll, then nap",
               mine->wait_mode == RCOLL_WAIT_SLEEP ? "sleep"
               : mine->wait_mode == RCOLL_WAIT_AUTO ? "auto" : "spin", c->nbells);
}

static void free_bells(rcoll_comm_t c)
{
    for (int i = 0; i < c->nbells; i++)
        if (c->bells[i] != c->bell_self) rcoll_bell_detach(c->bells[i]);
    free(c->bells);
    c->bells = NULL;
    c->nbells = 0;
    c->sleeps = 0;
}

static void family_leave(rcoll_comm_t c);

rcoll_status_t rcoll_family_join(rcoll_comm_t c, rcoll_family_t *f)
{
    rcoll_status_t st = rcoll_comm_register(c); /* from here on the handle is valid */
    if (st != RCOLL_OK) return st;
    c->opnum.seq0 = c->coll_seq; /* the user's collectives are numbered from here */
    if (!f) {
        f = calloc(1, sizeof(*f));
        if (!f) {
            rcoll_comm_unregister(c);
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "communicator allocation failed");
        }
    }
    f->refs++;
    c->family = f;
    if ((c->cfg.ras || c->cfg.flight_dir[0]) && !c->ras) c->ras = rcoll_ras_attach(c);
    c->fam_next = f->first;
    if (f->first) f->first->fam_prev = c;
    f->first = c;
    /* Last: from here on the thread may progress whatever the caller queues. */
    st = rcoll_pt_start(c);
    if (st != RCOLL_OK) family_leave(c);
    return st;
}

static void family_leave(rcoll_comm_t c)
{
    rcoll_family_t *f = c->family;
    if (!f) return;
    rcoll_ras_detach(c->ras);
    c->ras = NULL;
    rcoll_comm_unregister(c);
    if (c->fam_prev) c->fam_prev->fam_next = c->fam_next;
    else f->first = c->fam_next;
    if (c->fam_next) c->fam_next->fam_prev = c->fam_prev;
    if (--f->refs == 0) free(f);
    c->family = NULL;
}

/* Read RCOLL_TUNING_FILE (small text file) into the cost model. */
static rcoll_status_t load_tuning(const char *path, rcoll_tuning_t *t)
{
    char text[4096];
    FILE *f = fopen(path, "r");
    if (!f) return rcoll_err_set_errno(RCOLL_ERR_INVALID_ARG, errno,
                                       "RCOLL_TUNING_FILE '%s'", path);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    int big = !feof(f);
    fclose(f);
    if (big) return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_TUNING_FILE '%s' is larger "
                                  "than %zu bytes", path, sizeof(text) - 1);
    text[n] = '\0';
    rcoll_status_t st = rcoll_tuning_parse(text, t);
    if (st != RCOLL_OK) rcoll_err_prefix("RCOLL_TUNING_FILE '%s': ", path);
    return st;
}

rcoll_status_t rcoll_comm_alloc(int nranks, int rank, const rcoll_config_t *cfg,
                                rcoll_comm_t *comm_p)
{
    /* RCOLL_CUDA: the driver, when the process uses CUDA (cuda/gpu.h); before anything is
     * allocated, so that RCOLL_CUDA=1 without a usable driver fails cleanly */
    rcoll_status_t gst = rcoll_gpu_setup(&cfg->gpu);
    if (gst != RCOLL_OK) return gst;
    rcoll_comm_t c = calloc(1, sizeof(*c));
    if (!c) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "communicator allocation failed");
    c->rank = rank;
    c->opnum.seq0 = UINT64_MAX; /* until creation ends: set-up operations */
    c->nranks = nranks;
    c->cfg = *cfg;
    c->mem_bytes = sizeof(*c);
    c->p2p_send_seq = calloc((size_t)nranks, sizeof(uint32_t));
    c->p2p_recv_seq = calloc((size_t)nranks, sizeof(uint32_t));
    c->p2p_piece = calloc((size_t)nranks, sizeof(size_t));
    c->peers = calloc((size_t)nranks, sizeof(*c->peers));
    c->bs_of = calloc((size_t)nranks, sizeof(*c->bs_of));
    if (!c->p2p_send_seq || !c->p2p_recv_seq || !c->p2p_piece || !c->peers || !c->bs_of) {
        rcoll_comm_free(c, 0);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "communicator allocation failed");
    }
    for (int i = 0; i < nranks; i++) c->bs_of[i] = i; /* init; split and shrink map theirs */
    c->mem_bytes += (size_t)nranks * (2 * sizeof(uint32_t) + sizeof(size_t) +
                                      sizeof(*c->peers) + sizeof(*c->bs_of));
    c->next = (rank + 1) % nranks;
    c->prev = (rank - 1 + nranks) % nranks;
    c->ring_pos = rank;
    c->hostseg.fd = -1;
    c->probe_alg = -1;
    c->algo.tuning = &c->tuning;
    c->algo.chunk_tuning = &c->tuning_conf;
    c->algo.last_alg = -1;
    c->algo.forced = rcoll_algo_forced(&cfg->alg);
    for (int k = 0; k < RCOLL_COLL_COUNT; k++)
        c->algo.forced_coll[k] = rcoll_algo_forced_coll(&cfg->alg, (rcoll_coll_t)k);
    rcoll_tuning_defaults(&c->tuning);
    if (cfg->tuning_file[0]) {
        rcoll_status_t st = load_tuning(cfg->tuning_file, &c->tuning);
        if (st != RCOLL_OK) {
            rcoll_comm_free(c, 0);
            return st;
        }
    }
    c->tuning_conf = c->tuning;
    *comm_p = c;
    return RCOLL_OK;
}

/* Each rank's host index (host[p]: hosts numbered in the order of their lowest rank) and
 * each host's rank count (count[h]); sets c->nhosts.  One pass through a table of host
 * identities (open addressing): every rank computes this at creation, and a scan of the
 * ranks before each rank was p^2/2 comparisons, a cache miss each (768-byte records). */
static rcoll_status_t host_indices(rcoll_comm_t c, int *host, int *count)
{
    int n = c->nranks;
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    int *first = malloc(cap * sizeof(int)); /* the lowest rank of each host seen, or -1 */
    if (!first) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rank layout: out of memory");
    for (size_t i = 0; i < cap; i++) first[i] = -1;
    c->nhosts = 0;
    for (int p = 0; p < n; p++) {
        uint64_t h = c->peers[p].host_hash;
        size_t i = (size_t)((h * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
        while (first[i] >= 0 && c->peers[first[i]].host_hash != h) i = (i + 1) & (cap - 1);
        if (first[i] < 0) {
            first[i] = p;
            host[p] = c->nhosts++;
        } else {
            host[p] = host[first[i]];
        }
        count[host[p]]++;
    }
    free(first);
    return RCOLL_OK;
}

/* Group the ranks by host: the ring order, the local and cross groups of the hierarchical
 * all-reduce, and the ring neighbours.  The same on every rank (from the rank table). */
static rcoll_status_t build_layout(rcoll_comm_t c)
{
    int n = c->nranks;
    int *host = malloc((size_t)n * sizeof(int)), *order = malloc((size_t)n * sizeof(int));
    int *count = calloc((size_t)n, sizeof(int));
    if (!host || !order || !count) {
        free(host), free(order), free(count);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rank layout: out of memory");
    }
    if (host_indices(c, host, count) != RCOLL_OK) {
        free(host), free(order), free(count);
        return RCOLL_ERR_NO_MEMORY; /* said */
    }
    /* The ring order is topology's decision: ranks grouped by host, and inside a host by
     * their GPUs' places in the machine's GPU chain (below). */
    char (*names)[20] = malloc((size_t)n * sizeof(*names));
    const char **hosts = malloc((size_t)n * sizeof(*hosts));
    rcoll_status_t ost = names && hosts ? RCOLL_OK
                                        : rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rank layout: out "
                                                        "of memory");
    for (int p = 0; ost == RCOLL_OK && p < n; p++) {
        snprintf(names[p], sizeof(names[p]), "%016llx",
                 (unsigned long long)c->peers[p].host_hash);
        hosts[p] = names[p];
    }
    /* inside a host, the ranks' GPUs in their machine's GPU chain (gpu_pos) */
    int *chain = ost == RCOLL_OK ? malloc((size_t)n * sizeof(int)) : NULL;
    if (ost == RCOLL_OK && !chain)
        ost = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rank layout: out of memory");
    for (int p = 0; ost == RCOLL_OK && p < n; p++) chain[p] = c->peers[p].gpu_pos;
    if (ost == RCOLL_OK) ost = rcoll_topo_ring_by_chain(n, hosts, chain, order);
    free(chain);
    free(names);
    free(hosts);
    if (ost != RCOLL_OK) {
        free(host), free(order), free(count);
        return ost;
    }
    int identity = 1;
    for (int i = 0; i < n; i++) identity &= order[i] == i;
    int crossings = 0, pos = 0;
    for (int i = 0; i < n; i++) {
        crossings += host[order[i]] != host[order[(i + 1) % n]];
        if (order[i] == c->rank) pos = i;
    }
    c->ring_pos = pos;
    c->next = order[(pos + 1) % n];
    c->prev = order[(pos - 1 + n) % n];
    c->ppn = count[0];
    for (int h = 1; h < c->nhosts; h++)
        if (count[h] != c->ppn) c->ppn = 0;
    rcoll_status_t st = RCOLL_OK;
    if (c->nhosts > 1 && c->ppn > 1) {
        c->local_group = malloc((size_t)c->ppn * sizeof(int));
        c->cross_group = malloc((size_t)c->nhosts * sizeof(int));
        if (!c->local_group || !c->cross_group)
            st = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "rank layout: out of memory");
        for (int i = 0; st == RCOLL_OK && i < n; i++) { /* order is host-major */
            int h = i / c->ppn, li = i % c->ppn;
            if (host[c->rank] == h) {
                c->local_group[li] = order[i];
                if (order[i] == c->rank) c->local_idx = li;
            }
        }
        for (int i = 0; st == RCOLL_OK && i < n; i++)
            if (i % c->ppn == c->local_idx) c->cross_group[i / c->ppn] = order[i];
        c->cross_idx = host[c->rank];
        c->mem_bytes += (size_t)(c->ppn + c->nhosts) * sizeof(int);
    }
    if (identity) {
        free(order);
    } else {
        c->ring_map = order;
        c->mem_bytes += (size_t)n * sizeof(int);
    }
    if (c->nhosts > 1)
        RCOLL_INFO(INIT, "%d ranks on %d hosts (%s ranks per host): ring%s crosses host "
                   "boundaries %d times", n, c->nhosts, c->ppn ? "equal" : "unequal",
                   identity ? "" : " (reordered by host)", crossings);
    c->host_of = host;
    c->mem_bytes += (size_t)n * sizeof(int);
    free(count);
    return st;
}

/* The host's topology, detected (or read from RCOLL_TOPO_FILE) once per process and kept:
 * when the user asked for it (RCOLL_TOPO_FILE to describe the machine, RCOLL_TOPO_DUMP_FILE
 * to see what rcoll detects), and when a decision needs it (need: the NIC nearest to a rank's
 * GPU).  Logged and dumped at detection; a bad file is an error.  *out (may be NULL) gets it,
 * or NULL when it was neither asked for nor needed. */
static rcoll_status_t load_topology(const rcoll_topo_config_t *cfg, int need,
                                    const rcoll_topo_t **out)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static rcoll_topo_t *kept;
    if (out) *out = NULL;
    if (!need && !cfg->topo_file[0] && !cfg->topo_dump_file[0]) return RCOLL_OK;
    pthread_mutex_lock(&lock);
    rcoll_status_t st = RCOLL_OK;
    if (!kept) {
        rcoll_topo_config_t tc = *cfg; /* per-process dump names: %h host, %p pid */
        rcoll_expand_pattern(cfg->topo_dump_file, tc.topo_dump_file, sizeof(tc.topo_dump_file));
        st = rcoll_topo_detect(&tc, &kept);
    }
    if (out) *out = kept;
    pthread_mutex_unlock(&lock);
    return st;
}

/* Net transport tp has ndev > 1 devices: the one nearest this rank's GPU (PCI bus id bus),
 * else -1 (then ranks spread over them by rank).  The choice or the reason there is none is
 * logged at INFO. */
static int gpu_nic(rcoll_comm_t c, const rcoll_transport_ops_t *tp, int ndev, const char *bus)
{
    char why[320];
    rcoll_transport_props_t *props = calloc((size_t)ndev, sizeof(*props));
    const rcoll_topo_t *t = NULL;
    int d = -1;
    if (!props) {
        snprintf(why, sizeof(why), "out of memory");
    } else if (load_topology(&c->cfg.topo, 1, &t) != RCOLL_OK || !t) {
        snprintf(why, sizeof(why), "no topology (%s)", rcoll_err_get());
    } else {
        for (int i = 0; i < ndev; i++) tp->get_props(i, &props[i]);
        d = rcoll_pair_gpu_nic(t, bus, props, ndev, c->rank, why, sizeof(why));
    }
    free(props);
    if (d >= 0)
        RCOLL_INFO(INIT, "rank %d: %s device %d, nearest to its GPU: %s", c->rank, tp->name, d,
                   why);
    else
        RCOLL_INFO(INIT, "rank %d: %s devices spread by rank, not by GPU: %s", c->rank,
                   tp->name, why);
    return d;
}

/* The rank table's gpu_pos for a rank whose GPU has PCI bus id bus: 1 + its place in the
 * machine's GPU chain, the topology's ring order over all the host's GPUs (NVLink islands,
 * PCIe switches and sockets crossed as few times as possible).  It depends on the GPU and the
 * machine alone, so every rank can order any host's ranks by it (build_layout); 0 when the
 * topology is missing or does not know the GPU. */
static int32_t gpu_chain_pos(rcoll_comm_t c, const char *bus)
{
    const rcoll_topo_t *t = NULL;
    if (load_topology(&c->cfg.topo, 1, &t) != RCOLL_OK || !t) return 0;
    int ng = rcoll_topo_ngpus(t), me = rcoll_topo_gpu_index(t, bus);
    int *pos = me >= 0 ? calloc((size_t)ng, sizeof(int)) : NULL;
    int32_t mine = pos && rcoll_topo_gpu_chain(t, pos) == RCOLL_OK ? pos[me] : 0;
    free(pos);
    return mine;
}

/* Whether the whole host pages of [buf, buf + bytes) lie in buf's CUDA allocation. */
static int whole_pages(const void *buf, size_t bytes)
{
    uintptr_t base = 0, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t size = 0;
    if (rcoll_gpu_ptr_range(buf, &base, &size) != RCOLL_OK) return 0;
    uintptr_t lo = (uintptr_t)buf & ~(page - 1);
    uintptr_t hi = ((uintptr_t)buf + bytes + page - 1) & ~(page - 1);
    return lo >= base && hi <= base + size;
}

int rcoll_comm_gdr_ok(rcoll_comm_t c, int peer, const void *buf, size_t bytes)
{
    const rcoll_transport_ops_t *tp = peer != c->rank ? c->link.tps[peer] : NULL;
    int t = tp ? rcoll_transport_index(tp) : -1;
    char bus[32];
    if (t < 0 || tp->host_local || rcoll_gpu_ptr_bus(buf, bus, sizeof(bus)) != RCOLL_OK)
        return 0;
    if (c->gdr_bus[t][0] && !strcmp(c->gdr_bus[t], bus))
        return c->gdr_ok[t] && whole_pages(buf, bytes);
    rcoll_transport_props_t props;
    memset(&props, 0, sizeof(props));
    const rcoll_topo_t *topo = NULL;
    char why[400];
    int ok = 0;
    if (tp->get_props(c->dev[t], &props) != RCOLL_OK)
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
    else if (!(props.ptr_support & RCOLL_PTR_CUDA))
        snprintf(why, sizeof(why), "%s registers no CUDA memory (rcoll-info says why)",
                 props.name);
    else if (load_topology(&c->cfg.topo, 1, &topo) != RCOLL_OK || !topo)
        snprintf(why, sizeof(why), "no topology (%s)", rcoll_err_get());
    else
        ok = rcoll_pair_gdr(topo, bus, &props, (rcoll_path_t)c->cfg.topo.gdr_level, why,
                            sizeof(why));
    snprintf(c->gdr_bus[t], sizeof(c->gdr_bus[t]), "%s", bus);
    c->gdr_ok[t] = ok;
    RCOLL_INFO(INIT, "rank %d: point-to-point with CUDA buffers of GPU %s over %s %s: %s (%s)",
               c->rank, bus, tp->name, props.name,
               ok ? "GPUDirect RDMA for buffers on whole pages of their allocation"
                  : "staged through host memory", why);
    return ok && whole_pages(buf, bytes);
}

/* What the all-reduce algorithms know of the communicator (algo/algo.h): its shape, once the
 * layout, connections and staging exist.  The host segment and all_shm follow as they are
 * set up (until then they are 0, as the collectives that set them up must see). */
static void fill_algo_ctx(rcoll_comm_t c)
{
    rcoll_algo_ctx_t *a = &c->algo;
    a->nranks = c->nranks;
    a->rank = c->rank;
    a->link = &c->link;
    a->ring_map = c->ring_map;
    a->ring_pos = c->ring_pos;
    a->nhosts = c->nhosts;
    a->ppn = c->ppn;
    a->local_group = c->local_group;
    a->cross_group = c->cross_group;
    a->local_idx = c->local_idx;
    a->cross_idx = c->cross_idx;
    a->chunk_bytes = c->chunk_bytes;
    a->chunk_fixed = c->cfg.chunk_size != 0;
}

/* A schedule's peer (ring position) as a communicator rank. */
static int at_pos(const rcoll_comm_t c, int pos) { return c->ring_map ? c->ring_map[pos] : pos; }

rcoll_status_t rcoll_comm_open_links(rcoll_comm_t c, uint64_t deadline)
{
    int me = c->ring_pos;
    rcoll_status_t st = rcoll_conn_init(c);
    if (st == RCOLL_OK) st = choose_transports(c);
    if (st != RCOLL_OK) return st;
    /* The ring neighbours and tree links now, a constant few whatever the size; other peers
     * when an operation needs them (doubling partners, all-to-all, point to point). */
    rcoll_conn_want(c, c->next, 1, 0);
    rcoll_conn_want(c, c->prev, 0, 1);
    for (int t = 0; t < 2; t++) { /* double binary tree links, both directions */
        rcoll_tree_node_t nd;
        rcoll_dbtree_node(c->nranks, me, t, &nd, NULL);
        int links[3] = {nd.parent, nd.child[0], nd.child[1]};
        for (int i = 0; i < 3; i++)
            if (links[i] >= 0) rcoll_conn_want(c, at_pos(c, links[i]), 1, 1);
    }
    st = rcoll_conn_wait(c, deadline);
    if (st == RCOLL_OK) st = alloc_staging(c);
    if (st == RCOLL_OK) fill_algo_ctx(c);
    return st;
}

rcoll_status_t rcoll_comm_links(rcoll_comm_t c, uint64_t deadline)
{
    const rcoll_peer_info_t *mine = &c->peers[c->rank];
    setup_bells(c, choose_spin(c, mine));
    rcoll_status_t lst = load_topology(&c->cfg.topo, 0, NULL);
    if (lst == RCOLL_OK) lst = build_layout(c);
    if (lst != RCOLL_OK) return lst;
    if (c->nranks > 1) {
        rcoll_status_t st = rcoll_comm_open_links(c, deadline);
        if (st == RCOLL_OK) st = setup_hostseg(c);
        if (st != RCOLL_OK) return st;
        c->all_shm = 1;
        for (int p = 0; p < c->nranks; p++)
            if (p != c->rank && !c->link.tps[p]->host_local) c->all_shm = 0;
        c->algo.all_shm = c->all_shm;
        /* Sleeping needs a peer's progress to be the moment its data is there: true of shared
         * memory and of TCP between processes of one host (the bytes are in the receiver's
         * socket when send returns), not of an RDMA write that lands after its post. */
        for (int p = 0; c->sleeps && p < c->nranks; p++)
            if (p != c->rank && strcmp(c->link.tps[p]->name, "shm") != 0 &&
                strcmp(c->link.tps[p]->name, "tcp") != 0) {
                c->sleeps = 0;
                RCOLL_INFO(INIT, "waits: poll, then nap: rank %d is reached over %s", p,
                           c->link.tps[p]->name);
            }
        /* The set-up collectives above chose (and cached) algorithms before the host segment
         * and the paths were known: choose afresh from now on. */
        rcoll_algo_choose_reset(&c->algo);
    }
    RCOLL_INFO(INIT, "%s%s%srank %d/%d on %s: ring %d -> %d -> %d (+ tree links), "
               "chunk %zu B x %d slots, communicator memory %zu B (RCOLL_BUFFSIZE=%zu: "
               "staging, plus a quarter for the host segment), timeout %g s",
               c->cfg.comm_name[0] ? "communicator " : "", c->cfg.comm_name,
               c->cfg.comm_name[0] ? ": " : "", c->rank, c->nranks, mine->hostname, c->prev,
               c->rank, c->next, c->chunk_bytes, c->link.nslots, c->mem_bytes,
               c->cfg.conn.buffsize, c->cfg.timeout_s);
    return RCOLL_OK;
}

/* Per peer, the first transport in priority order that both ranks listen on and that can
 * reach it (host-local transports only on the same host). */
/* Why transport t carries the traffic to peer p (one sentence, for the INFO log). */
static void transport_reason(rcoll_comm_t c, int p, int t, const rcoll_transport_props_t *props,
                             char *buf, size_t len)
{
    const rcoll_peer_info_t *peer = &c->peers[p], *mine = &c->peers[c->rank];
    size_t ntp;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&ntp);
    if (props->host_local) {
        snprintf(buf, len, "same host %s", mine->hostname);
        return;
    }
    int n = snprintf(buf, len, "%s host %s, device %s%s%.0d",
                     peer->host_hash == mine->host_hash ? "same" : "other", peer->hostname,
                     props->name, props->port ? ":" : "", props->port);
    /* what ruled out the transports before this one */
    for (int u = 0; u < t && (size_t)u < ntp && n >= 0 && (size_t)n < len; u++) {
        if (!c->tps[u] && c->tp_why[u][0])
            n += snprintf(buf + n, len - (size_t)n, "; not %s: %s", list[u]->name, c->tp_why[u]);
        else if (c->tps[u] && !rcoll_transport_handle_present(peer->handles[u]))
            n += snprintf(buf + n, len - (size_t)n, "; not %s: the peer does not listen on it",
                          c->tps[u]->name);
    }
}

/* What the rank table says of rank p, for the pair decision (core/pair.c). */
static rcoll_pair_end_t pair_end(const rcoll_comm_t c, int p)
{
    rcoll_pair_end_t e = {.host = c->peers[p].host_hash, .listens = 0};
    for (int t = 0; t < RCOLL_MAX_TRANSPORTS; t++)
        if (p == c->rank ? c->listen_comms[t] != NULL
                         : rcoll_transport_handle_present(c->peers[p].handles[t]))
            e.listens |= 1u << t;
    return e;
}

/* The largest piece of a point-to-point message over a pair whose ends' devices carry
 * messages of at most a and b bytes (0: no limit given). */
static size_t pair_piece(uint64_t a, uint64_t b)
{
    uint64_t piece = RCOLL_P2P_PIECE;
    if (a && a < piece) piece = a;
    if (b && b < piece) piece = b;
    return (size_t)piece;
}

static rcoll_status_t choose_transports(rcoll_comm_t c)
{
    int used[RCOLL_MAX_TRANSPORTS] = {0};
    char pbuf[128], why[512];
    rcoll_pair_end_t mine = pair_end(c, c->rank);
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank) continue;
        rcoll_pair_end_t peer = pair_end(c, p);
        int t = rcoll_pair_transport(&mine, &peer);
        if (t < 0)
            return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no transport reaches %s (this rank "
                                 "and it have no usable transport in common)",
                                 rcoll_comm_peer_name(c, p, pbuf, sizeof(pbuf)));
        c->link.tps[p] = c->tps[t];
        c->p2p_piece[p] = pair_piece(c->peers[c->rank].max_msg[t], c->peers[p].max_msg[t]);
        used[t]++;
        int lvl = c->nranks <= 64 ? RCOLL_LOG_INFO : RCOLL_LOG_TRACE;
        if (!RCOLL_LOG_ENABLED(lvl, RCOLL_SUBSYS_INIT)) continue;
        rcoll_transport_props_t props;
        memset(&props, 0, sizeof(props));
        c->tps[t]->get_props(c->dev[t], &props);
        transport_reason(c, p, t, &props, why, sizeof(why));
        RCOLL_LOG(lvl, RCOLL_SUBSYS_INIT, "%s: %s (%s)",
                  rcoll_comm_peer_name(c, p, pbuf, sizeof(pbuf)), c->tps[t]->name, why);
    }
    for (int t = 0; t < RCOLL_MAX_TRANSPORTS; t++)
        if (used[t])
            RCOLL_INFO(INIT, "rank %d reaches %d peer%s over %s", c->rank, used[t],
                       used[t] > 1 ? "s" : "", c->tps[t]->name);
    return RCOLL_OK;
}

rcoll_status_t rcoll_comm_listen(rcoll_comm_t c, rcoll_peer_info_t *mine)
{
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    /* the knobs are enums: their names are looked up once here, compared as pointers below */
    const char *forced_name = rcoll_transport_names[c->cfg.transport];
    int forced = c->cfg.transport != RCOLL_CFG_AUTO, found = 0;
    const rcoll_transport_ops_t *forced_tp = forced ? rcoll_transport_find(forced_name) : NULL;
    if (forced && !forced_tp)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "RCOLL_TRANSPORT='%s': this rcoll was "
                             "built without that transport (rcoll-info lists the built ones)",
                             forced_name);
    const char *net = rcoll_net_names[c->cfg.net];
    int net_auto = c->cfg.net == RCOLL_CFG_AUTO;
    const rcoll_transport_ops_t *net_tp = net_auto ? NULL : rcoll_transport_find(net);
    rcoll_status_t st = RCOLL_OK;
    /* the rank's GPU: the device of the CUDA context current in this thread, if any */
    char bus[32];
    int gpu = rcoll_gpu_active() && rcoll_gpu_current_bus(bus, sizeof(bus)) == RCOLL_OK;
    mine->gpu_pos = gpu ? gpu_chain_pos(c, bus) : 0;
    for (size_t t = 0; t < n; t++) {
        int is_net = !list[t]->host_local;
        if (!rcoll_pair_allowed(&c->cfg, list[t], c->tp_why[t], sizeof(c->tp_why[t]))) {
            if (forced) c->tp_why[t][0] = '\0'; /* not worth a mention: another was forced */
            continue;
        }
        st = rcoll_transport_ensure_init(list[t]);
        int ndev = 0;
        if (st == RCOLL_OK) st = list[t]->devices(&ndev);
        /* several devices: the one nearest the rank's GPU when it has one, else spread by
         * rank */
        int near = st == RCOLL_OK && ndev > 1 && !list[t]->host_local && gpu
                       ? gpu_nic(c, list[t], ndev, bus) : -1;
        c->dev[t] = near >= 0 ? near : ndev > 1 ? c->rank % ndev : 0;
        if (st == RCOLL_OK)
            st = rcoll_transport_listen(list[t], c->dev[t], mine->handles[t], &c->listen_comms[t]);
        if (st == RCOLL_OK) {
            rcoll_transport_props_t props;
            memset(&props, 0, sizeof(props));
            if (list[t]->get_props(c->dev[t], &props) == RCOLL_OK)
                mine->max_msg[t] = props.max_msg_size;
        }
        if (st != RCOLL_OK && is_net && list[t] == net_tp) {
            memset(mine->handles[t], 0, RCOLL_TRANSPORT_HANDLE_BYTES);
            c->listen_comms[t] = NULL;
            rcoll_err_prefix("RCOLL_NET=%s, but that transport cannot work here: ", net);
            return st;
        }
        if (st != RCOLL_OK)
            snprintf(c->tp_why[t], sizeof(c->tp_why[t]), "%s", rcoll_err_get());
        if (st != RCOLL_OK) {
            /* Not built or not possible here is information; a transport that should work
             * but failed (a full /dev/shm) deserves a warning with its reason, once per
             * process (every later communicator falls back the same way: INFO). */
            static _Atomic int warned[RCOLL_MAX_TRANSPORTS];
            if (st == RCOLL_ERR_UNSUPPORTED || atomic_exchange(&warned[t], 1))
                RCOLL_INFO(INIT, "transport %s not used%s: %s", list[t]->name,
                           st == RCOLL_ERR_UNSUPPORTED ? "" : ", falling back", rcoll_err_get());
            else
                RCOLL_WARN(INIT, "transport %s not used, falling back: %s", list[t]->name,
                           rcoll_err_get());
            memset(mine->handles[t], 0, RCOLL_TRANSPORT_HANDLE_BYTES);
            c->listen_comms[t] = NULL;
            continue;
        }
        c->tps[t] = list[t];
        found = 1;
    }
    if (!found)
        return rcoll_err_set(st, "no transport could listen%s%s (last error: %s)",
                             forced ? " with RCOLL_TRANSPORT=" : "",
                             forced ? forced_name : "", rcoll_err_get());
    return RCOLL_OK;
}

/* This rank's set-up failed and it is the first cause (the error being returned): tell the
 * others through the root, naming this rank. */
static rcoll_status_t setup_report(rcoll_comm_t c, rcoll_status_t st)
{
    char own[RCOLL_ERR_TEXT_MAX], text[RCOLL_BS_TEXT_MAX], pbuf[128];
    snprintf(own, sizeof(own), "%s", rcoll_err_get());
    snprintf(text, sizeof(text), "%s could not create its communicator: %.150s",
             rcoll_comm_peer_name(c, c->rank, pbuf, sizeof(pbuf)), own);
    rcoll_bs_report(c->bs, c->rank, st, text);
    return rcoll_err_set(st, "%s", own);
}

/* Set-up failed after the bootstrap join.  A broken or silent connection is usually the
 * consequence of another rank's failure: give the root a moment to name the first cause and
 * fail with that.  Otherwise this rank is the first cause: tell the others, through the root,
 * naming this rank. */
static rcoll_status_t setup_failed(rcoll_comm_t c, rcoll_status_t st)
{
    char own[RCOLL_ERR_TEXT_MAX];
    snprintf(own, sizeof(own), "%s", rcoll_err_get());
    /* (UNSUPPORTED: "no transport reaches rank R", also what a rank that could not listen
     * looks like from here) */
    if (st == RCOLL_ERR_REMOTE || st == RCOLL_ERR_PROTOCOL || st == RCOLL_ERR_TIMEOUT ||
        st == RCOLL_ERR_UNSUPPORTED) {
        rcoll_status_t cst = rcoll_bs_await_verdict(c->bs, 300000000ull, NULL);
        if (cst != RCOLL_OK) return cst; /* the root's text is the error now */
    }
    if (st == RCOLL_ERR_INVALID_USAGE && c->bs) {
        /* A mismatched set-up collective (RCOLL_ALGO differs between ranks): the root has
         * announced it; name both calls if this rank never got to run one. */
        char sent[RCOLL_ERR_TEXT_MAX - 16];
        if (!strstr(own, " called ") && rcoll_sig_explain(c, sent, sizeof(sent)))
            return rcoll_err_set(st, "rank %d: %s", c->rank, sent);
        return rcoll_err_set(st, "%s", own);
    }
    return setup_report(c, st);
}

rcoll_status_t rcoll_comm_create(int nranks, const rcoll_unique_id_t *id, int rank,
                                 const rcoll_config_t *cfg, rcoll_bs_root_t *root,
                                 rcoll_comm_t *comm_p)
{
    rcoll_comm_t c;
    rcoll_status_t st = rcoll_comm_alloc(nranks, rank, cfg, &c);
    if (st != RCOLL_OK) return st;
    c->ctx = rcoll_bs_id_ctx(id); /* the same on every rank, whichever relay it joins by */
    uint64_t deadline = rcoll_now_ns() + (uint64_t)(cfg->timeout_s * 1e9);
    rcoll_log_set_rank(rank);

    rcoll_peer_info_t mine;
    memset(&mine, 0, sizeof(mine));
    /* A rank that cannot listen (no usable interface, a full /dev/shm) still joins, with no
     * addresses, and then tells the others through the root: otherwise they would wait for
     * it until RCOLL_TIMEOUT and never learn why. */
    rcoll_status_t listen_st = rcoll_comm_listen(c, &mine);
    char listen_err[RCOLL_ERR_TEXT_MAX] = "";
    if (listen_st != RCOLL_OK) {
        /* The rank that hosts the root fails here: its caller aborts the root, which tells
         * the others (api.c) */
        if (root) {
            st = listen_st;
            goto err_free;
        }
        snprintf(listen_err, sizeof(listen_err), "%s", rcoll_err_get());
        memset(&mine, 0, sizeof(mine));
    }
    rcoll_bs_host_identity(mine.hostname, sizeof(mine.hostname), &mine.host_hash,
                           &mine.machine_hash);
    if (cfg->host_id[0]) { /* RCOLL_HOST_ID: the user (or a test) says which host this is */
        uint64_t h = 1469598103934665603ull;
        for (const char *q = cfg->host_id; *q; q++) h = (h ^ (unsigned char)*q) * 1099511628211ull;
        mine.host_hash = h;
        snprintf(mine.hostname, sizeof(mine.hostname), "%.63s", cfg->host_id);
    }
    mine.pid = (int32_t)getpid();
    mine.wait_mode = cfg->wait;
    mine.bell_fd = -1;
    if (rcoll_bell_self(&c->bell_self, &mine.bell_fd) != RCOLL_OK) { /* no memfd: never sleeps */
        RCOLL_INFO(INIT, "no doorbell: %s", rcoll_err_get());
        c->bell_self = NULL;
        mine.bell_fd = -1;
    }
    my_cpus(mine.cpus);
    /* A little longer than the root's own deadline, so its explanation arrives first. */
    st = rcoll_bs_join(id, rank, nranks, &mine, c->peers, deadline + 2000000000ull, &c->bs);
    c->bs_ranks = 1;
    if (st != RCOLL_OK) {
        if (listen_st != RCOLL_OK) /* the first cause, not the join's consequence */
            st = rcoll_err_set(listen_st, "%s", listen_err);
        goto err_free;
    }
    if (listen_st != RCOLL_OK) {
        rcoll_err_set(listen_st, "%s", listen_err);
        st = setup_report(c, listen_st);
        goto err_free;
    }
    st = rcoll_comm_links(c, deadline);
    if (st == RCOLL_OK) st = rcoll_comm_probe(c);
    if (st != RCOLL_OK) {
        st = setup_failed(c, st);
        goto err_free;
    }
    st = rcoll_family_join(c, NULL);
    if (st != RCOLL_OK) goto err_free;
    c->root = root; /* only now: a failed creation must not wait for the root */
    *comm_p = c;
    return RCOLL_OK;

err_free:
    rcoll_comm_free(c, 0);
    return st;
}

/* Cross-memory attach (algo/cma.h) when every rank may read every peer: each rank publishes
 * its process id and a probe word, reads every peer's, and all agree (RCOLL_CMA on every rank
 * and every read right), so that the cost model sees the same thing everywhere.  Not being
 * able to is not an error (containers' seccomp profiles commonly forbid process_vm_readv);
 * the reason is logged. */
static rcoll_status_t setup_cma(rcoll_comm_t c, char *area)
{
    int32_t ok = c->cfg.cma;
    char why[200] = "RCOLL_CMA=0";
    if (ok && rcoll_cma_attach(&c->algo.cma, area, c->nranks, c->rank) != RCOLL_OK) {
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
        ok = 0;
    }
    if (ok) rcoll_cma_publish_probe(&c->algo.cma);
    int32_t all = ok;
    rcoll_status_t st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, &all, &all, 1, RCOLL_INT32,
                                       RCOLL_MIN, 0);
    if (st == RCOLL_OK && all) {
        all = ok = rcoll_cma_probe(&c->algo.cma, why, sizeof(why));
        st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, &all, &all, 1, RCOLL_INT32, RCOLL_MIN, 0);
    }
    if (st != RCOLL_OK || !all) {
        if (st == RCOLL_OK)
            RCOLL_INFO(INIT, "cross-memory attach not used: %s", ok ? "another rank cannot "
                       "(its log says why)" : why);
        rcoll_cma_detach(&c->algo.cma);
        return st;
    }
    c->algo.has_cma = 1;
    RCOLL_INFO(INIT, "cross-memory attach: every rank reads every peer (process_vm_readv)");
    return RCOLL_OK;
}

/* When every rank is on this host (and shared memory is allowed), rank 0 creates the host
 * segment for the one-shot and two-shot all-reduces and the call signatures (core/sig.h), and
 * the others map it.  Each rank says
 * whether that worked; only if all did is it used, so the choice is the same everywhere.
 * Failing to set it up is not an error: the other algorithms remain. */
static rcoll_status_t setup_hostseg(rcoll_comm_t c)
{
    if (c->local_ranks != c->nranks) return RCOLL_OK; /* the same on every rank */
    /* Each rank's own settings may differ (RCOLL_SHM_DISABLE on some ranks only): agree
     * first, so that every rank runs the same collectives below. */
    rcoll_allreduce_alg_t forced = c->algo.forced;
    /* shared memory allowed: auto, or a forced transport of one host */
    const rcoll_transport_ops_t *forced_tp =
        c->cfg.transport == RCOLL_CFG_AUTO
            ? NULL : rcoll_transport_find(rcoll_transport_names[c->cfg.transport]);
    int32_t want = !c->cfg.shm_disable &&
                   (c->cfg.transport == RCOLL_CFG_AUTO || (forced_tp && forced_tp->host_local));
    /* Without one- and two-shot (RCOLL_ALGO forces another) the segment holds only the call
     * signatures (core/sig.h). */
    int algs = forced == RCOLL_ALG_AUTO || rcoll_algos[forced]->uses_hostseg;
    rcoll_status_t st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, &want, &want, 1, RCOLL_INT32,
                                       RCOLL_MIN, 0);
    if (st != RCOLL_OK) return st;
    if (!want) return RCOLL_OK;
    size_t os_size = algs ? rcoll_oneshot_segment_size(c->nranks) : 0;
    size_t slot = c->cfg.twoshot_slot ? c->cfg.twoshot_slot : c->cfg.conn.buffsize / 16;
    if (slot < 4096) slot = 4096;
    size_t ts_size = algs ? rcoll_twoshot_area_size(c->nranks, slot) : 0;
    size_t cma_size = algs ? rcoll_cma_area_size(c->nranks) : 0;
    size_t sig_size = (size_t)c->nranks * RCOLL_SIG_ANNOUNCE_BYTES;
    size_t ipc_size = (size_t)c->nranks * 64; /* api_ipc.c: workspace unmapped, per rank */
    size_t size = os_size + ts_size + cma_size + sig_size + ipc_size;
    rcoll_shmseg_ref_t ref;
    memset(&ref, 0, sizeof(ref));
    int32_t ok = 1;
    if (c->rank == 0 && rcoll_shmseg_create(size, "rcoll-host", &c->hostseg, &ref) != RCOLL_OK)
        ok = 0;
    if (c->rank == 0 && !ok) RCOLL_INFO(INIT, "host segment not used: %s", rcoll_err_get());
    st = rcoll_coll_run(c, RCOLL_OP_BCAST, &ref, &ref, sizeof(ref), RCOLL_UINT8, RCOLL_SUM, 0);
    if (st != RCOLL_OK) return st;
    if (c->rank != 0 && ok && ref.size == size) {
        if (rcoll_shmseg_attach(&ref, &c->hostseg) != RCOLL_OK) {
            RCOLL_INFO(INIT, "host segment not used: %s", rcoll_err_get());
            ok = 0;
        }
    } else if (c->rank != 0) {
        ok = 0;
    }
    int32_t all_ok = ok;
    st = rcoll_coll_run(c, RCOLL_OP_ALLREDUCE, &all_ok, &all_ok, 1, RCOLL_INT32, RCOLL_MIN, 0);
    if (st != RCOLL_OK) return st;
    if (!all_ok) {
        rcoll_shmseg_detach(&c->hostseg);
        return RCOLL_OK;
    }
    c->sig_area = c->hostseg.base + os_size + ts_size + cma_size;
    c->ipc_area = c->sig_area + sig_size;
    c->mem_bytes += size / (size_t)c->nranks; /* this rank's share of the host segment */
    c->mem_hostseg += size / (size_t)c->nranks;
    if (!algs) {
        RCOLL_INFO(INIT, "host segment: %zu B (call signatures only)", size);
        return RCOLL_OK;
    }
    c->algo.oneshot = (rcoll_oneshot_t){.base = c->hostseg.base, .nranks = c->nranks,
                                        .rank = c->rank};
    rcoll_twoshot_attach(&c->algo.twoshot, c->hostseg.base + os_size, c->nranks, c->rank, slot);
    c->algo.has_hostseg = 1;
    RCOLL_INFO(INIT, "host segment: %zu B (one-shot %zu B, two-shot %zu B: %d slots of %zu B "
               "per rank, CMA %zu B, call signatures %zu B)", size, os_size, ts_size,
               RCOLL_TWOSHOT_SLOTS, slot, cma_size, sig_size);
    return setup_cma(c, c->hostseg.base + os_size + ts_size);
}

void rcoll_comm_take_listeners(rcoll_comm_t c, rcoll_comm_t probe)
{
    for (int t = 0; t < RCOLL_MAX_TRANSPORTS; t++) {
        c->dev[t] = probe->dev[t];
        c->tps[t] = probe->tps[t];
        memcpy(c->tp_why[t], probe->tp_why[t], sizeof(c->tp_why[t]));
        c->listen_comms[t] = probe->listen_comms[t];
        probe->listen_comms[t] = NULL;
    }
    rcoll_comm_free(probe, 0);
}

void rcoll_comm_free(rcoll_comm_t c, int graceful)
{
    rcoll_pt_stop(c);
    free_bells(c);
    family_leave(c);
    rcoll_cma_detach(&c->algo.cma);
    if (c->release_ipc) c->release_ipc(c, graceful); /* the host segment says when peers unmapped it */
    rcoll_shmseg_detach(&c->hostseg);
    if (c->conn) rcoll_conn_fini(c);
    rcoll_conn_drop_early(c);
    for (int t = 0; t < RCOLL_MAX_TRANSPORTS; t++)
        if (c->listen_comms[t]) c->tps[t]->close_listen(c->listen_comms[t]);
    rcoll_bs_leave(c->bs, graceful);
    rcoll_gpu_stage_free(&c->gpu_stage); /* after the transports: nothing writes it now */
    rcoll_gpu_pipe_free(&c->gpu_pipe);
    if (c->free_stage_jobs) c->free_stage_jobs(c);
    if (c->free_stream_jobs) c->free_stream_jobs(c);
    rcoll_gpu_pinned_free(&c->gpu_pinned); /* after every area counted in it */
    free(c->link.staging);
    free(c->peers);
    free(c->bs_of);
    free(c->ring_map);
    free(c->host_of);
    free(c->local_group);
    free(c->cross_group);
    free(c->p2p_send_seq);
    free(c->p2p_recv_seq);
    free(c->p2p_piece);
    struct rcoll_request *r = c->free_reqs;
    while (r) {
        struct rcoll_request *nx = r->next;
        free(r->barrier_heap);
        free(r->items);
        free(r->vbuf);
        free(r);
        r = nx;
    }
    free(c);
}
