/*
 * init_scale - what creating a communicator costs as the job grows (docs/scale.md).
 *
 * Every rank (launched by rcoll-run, mpirun, srun or torchrun: rcoll_comm_init_env) times
 * rcoll_comm_init_env and then a first rcoll_barrier, reads its memory (VmHWM of
 * /proc/self/status), the communicator's own memory and connections (rcoll_comm_mem_stats)
 * and the sockets the process holds; rank 0 learns the maxima and sums (two all-reduces) and
 * prints one line
 * (names first) of:
 *   init_s       the slowest rank's own init call
 *   job_init_s   from the first rank entering init to the last leaving it (wall clock)
 *   tail_s       from the last rank entering init to the last leaving it: what the job
 *                waits once everyone has arrived
 *   path_ms      the longest critical path of any rank's creation (rcoll_comm_setup_stats:
 *                CPU time along the longest chain of dependent work, through the bootstrap's
 *                messages): the creation's time were every rank on a CPU of its own;
 *                path_mean_ms its mean over ranks
 *   barrier_ms   the slowest rank's first barrier
 *   root_rss_kb, rank_rss_kb   peak memory of rank 0's process (it hosts the bootstrap root)
 *                and the mean over ranks; comm_kb the mean communicator's own memory
 *   conns0_*     a rank's connections (each direction counted) when init returns;
 *   conns_*      after the barrier; sockets_max the most sockets a process holds
 *   cpu_ms       mean CPU time of a process up to its barrier (with fewer cores than ranks,
 *                ranks x cpu_ms / cores bounds job_init_s from below)
 *   root_accepted   connections rank 0's bootstrap root holds (its port's, /proc/net/tcp);
 *   relay_accepted  the most any relay holds (RCOLL_BS_RELAYS=N@host:port)
 * --json FILE writes the same as one JSON object; --hold S waits S seconds before destroying
 * the communicator (to look at the processes).
 */

#include <dirent.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"

typedef struct {
    double t_start, t_end; /* CLOCK_REALTIME, s */
    double init_s, barrier_s, cpu_s; /* cpu_s: the process's CPU time up to the barrier */
    double path_s; /* rcoll_comm_setup_stats: the creation's critical path */
    int64_t rss_kb, hwm_kb, comm_bytes;
    int32_t conns, peers, sockets, conns0; /* conns0: right after init, before the barrier */
    int32_t accepted, pad; /* the root's or this rank's relay's bootstrap connections */
} rec_t;

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int64_t status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int64_t v = -1;
    size_t n = strlen(key);
    if (!f) return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtoll(line + n + 1, NULL, 10);
    fclose(f);
    return v;
}

/* Sockets this process holds open (listening ones included). */
static int count_sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char path[300], target[64];
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, target, sizeof(target) - 1);
        if (k > 0) {
            target[k] = 0;
            if (strncmp(target, "socket:", 7) == 0) n++;
        }
    }
    closedir(d);
    return n;
}

/* Established TCP connections whose local port is port (/proc/net/tcp, this network
 * namespace): what a listener on port accepted and still holds. */
static int accepted_on(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    int n = 0;
    if (!f) return -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned lport, st;
        if (sscanf(line, " %*d: %*8x:%4x %*8x:%*4x %2x", &lport, &st) == 2 && st == 1 &&
            (int)lport == port)
            n++;
    }
    fclose(f);
    return n;
}

/* The port this rank's bootstrap listener has: RCOLL_ROOT's for rank 0, its relay's
 * (RCOLL_BS_RELAYS=N@host:port) for a rank hosting one; 0 for the others. */
static int bootstrap_port(int rank, int n)
{
    const char *root = getenv("RCOLL_ROOT"), *relays = getenv("RCOLL_BS_RELAYS");
    const char *colon;
    if (rank == 0) return root && (colon = strrchr(root, ':')) ? atoi(colon + 1) : 0;
    if (!relays || !strchr(relays, '@') || !(colon = strrchr(relays, ':'))) return 0;
    int nrel = atoi(relays), block = (n + nrel) / (nrel + 1);
    if (nrel < 1 || rank % block) return 0;
    return atoi(colon + 1) + rank / block - 1;
}

int main(int argc, char **argv)
{
    const char *json = NULL;
    double hold = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            json = argv[++i];
        } else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc) {
            hold = atof(argv[++i]);
        } else {
            fprintf(stderr, "usage: init_scale [--json FILE] [--hold S]\n");
            return 2;
        }
    }
    rec_t me = {0};
    rcoll_comm_t comm;
    me.t_start = now_real();
    double t0 = now_mono();
    rcoll_status_t st = rcoll_comm_init_env(&comm);
    me.init_s = now_mono() - t0;
    me.t_end = now_real();
    if (st != RCOLL_OK) {
        fprintf(stderr, "init_scale: init failed: %s (%s)\n", rcoll_status_string(st),
                rcoll_last_init_error());
        return 1;
    }
    int rank, n;
    rcoll_comm_rank(comm, &rank);
    rcoll_comm_size(comm, &n);
    rcoll_mem_stats_t ms;
    if (rcoll_comm_mem_stats(comm, &ms, sizeof(ms)) == RCOLL_OK) me.conns0 = ms.connections;
    rcoll_setup_stats_t ss;
    if (rcoll_comm_setup_stats(comm, &ss, sizeof(ss)) == RCOLL_OK) me.path_s = ss.path_s;
    int bport = bootstrap_port(rank, n);
    if (bport > 0) me.accepted = accepted_on(bport);
    t0 = now_mono();
    st = rcoll_barrier(comm);
    me.barrier_s = now_mono() - t0;
    if (st != RCOLL_OK) {
        fprintf(stderr, "init_scale: rank %d: barrier failed: %s\n", rank,
                rcoll_comm_last_error(comm));
        return 1;
    }
    if (rcoll_comm_mem_stats(comm, &ms, sizeof(ms)) == RCOLL_OK) {
        me.comm_bytes = (int64_t)ms.total;
        me.conns = ms.connections;
        me.peers = ms.peers;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    me.cpu_s = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
               (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    me.rss_kb = status_kb("VmRSS");
    me.hwm_kb = status_kb("VmHWM");
    me.sockets = count_sockets();

    /* Rank 0 learns the maxima and sums by two all-reduces (the tree: a gather to rank 0
     * would connect every rank to it, which at 1024 ranks on two cores hung for minutes). */
    enum { M_END, M_NSTART, M_START, M_INIT, M_BAR, M_CONNS, M_CONNS0, M_SOCK, M_RELAY, M_PATH,
           M_N };
    enum { S_CONNS, S_CONNS0, S_CPU, S_HWM, S_COMM, S_PATH, S_N };
    double mx[M_N] = {me.t_end, -me.t_start, me.t_start, me.init_s, me.barrier_s, me.conns,
                      me.conns0, me.sockets, rank > 0 ? me.accepted : 0, me.path_s};
    double sm[S_N] = {me.conns, me.conns0, me.cpu_s, (double)me.hwm_kb, (double)me.comm_bytes,
                      me.path_s};
    st = rcoll_allreduce(RCOLL_IN_PLACE, mx, M_N, RCOLL_FLOAT64, RCOLL_MAX, comm);
    if (st == RCOLL_OK) st = rcoll_allreduce(RCOLL_IN_PLACE, sm, S_N, RCOLL_FLOAT64, RCOLL_SUM, comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "init_scale: rank %d: collecting the results failed: %s\n", rank,
                rcoll_comm_last_error(comm));
        return 1;
    }
    if (rank == 0) {
        struct {
            const char *name, *fmt;
            double v;
        } col[] = {
            {"ranks", "%.0f", n},
            {"init_s", "%.3f", mx[M_INIT]},
            {"job_init_s", "%.3f", mx[M_END] + mx[M_NSTART]},
            {"tail_s", "%.3f", mx[M_END] - mx[M_START]},
            {"path_ms", "%.1f", mx[M_PATH] * 1e3},
            {"path_mean_ms", "%.1f", sm[S_PATH] / n * 1e3},
            {"barrier_ms", "%.2f", mx[M_BAR] * 1e3},
            {"root_rss_kb", "%.0f", (double)me.hwm_kb},
            {"rank_rss_kb", "%.0f", sm[S_HWM] / n},
            {"comm_kb", "%.1f", sm[S_COMM] / n / 1024.0},
            {"conns0_max", "%.0f", mx[M_CONNS0]},
            {"conns0_mean", "%.2f", sm[S_CONNS0] / n},
            {"conns_max", "%.0f", mx[M_CONNS]},
            {"conns_mean", "%.2f", sm[S_CONNS] / n},
            {"sockets_max", "%.0f", mx[M_SOCK]},
            {"root_sockets", "%.0f", me.sockets},
            {"cpu_ms", "%.1f", sm[S_CPU] / n * 1e3},
            {"root_cpu_ms", "%.1f", me.cpu_s * 1e3},
            {"root_accepted", "%.0f", me.accepted},
            {"relay_accepted", "%.0f", mx[M_RELAY]},
        };
        int ncol = (int)(sizeof(col) / sizeof(col[0]));
        FILE *f = json ? fopen(json, "w") : NULL;
        if (json && !f) {
            perror(json);
            return 1;
        }
        printf("#");
        for (int i = 0; i < ncol; i++) printf(" %s", col[i].name);
        printf("\n ");
        if (f) fprintf(f, "{");
        for (int i = 0; i < ncol; i++) {
            char v[64];
            snprintf(v, sizeof(v), col[i].fmt, col[i].v);
            printf(" %*s", (int)strlen(col[i].name), v);
            if (f) fprintf(f, "%s\"%s\": %s", i ? ", " : "", col[i].name, v);
        }
        printf("\n");
        if (f) {
            fprintf(f, "}\n");
            fclose(f);
        }
    }
    if (hold > 0) usleep((useconds_t)(hold * 1e6)); /* to look at the processes meanwhile */
    st = rcoll_comm_destroy(comm);
    return st == RCOLL_OK ? 0 : 1;
}
