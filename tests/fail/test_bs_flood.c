/*
 * test_bs_flood.c - the bootstrap root under a connection flood: while 3 ranks join (an
 * environment launch on 127.0.0.1, the root in rank 0), three threads of this process open
 * idle connections to the root as fast as they can (at most FLOOD_MAX in FLOOD_S seconds, each
 * kept open, loopback only).  Every rank must join and run an all-reduce with the right
 * result, none may be pushed out for good, and rank 0's log must stay small (the drop
 * warnings are rate limited, with a count).  Bounded: the flood stops by itself, the ranks
 * are killed after DEADLINE_S.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mp.h"

#define NRANKS 3
#define NTHREADS 3
#define FLOOD_MAX 4000    /* connections in all */
#define FLOOD_S 4.0
#define KEEP_PER_THREAD 250 /* idle connections each thread holds open at once */
#define DEADLINE_S 40

static int port;
static atomic_int opened;
static atomic_int stop;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *flood(void *arg)
{
    (void)arg;
    int held[KEEP_PER_THREAD], nheld = 0, next = 0;
    double end = now_s() + FLOOD_S;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (!atomic_load(&stop) && now_s() < end && atomic_load(&opened) < FLOOD_MAX) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) { /* root not up yet */
            close(fd);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
            continue;
        }
        atomic_fetch_add(&opened, 1);
        if (nheld == KEEP_PER_THREAD) { /* keep the newest ones open */
            close(held[next]);
            held[next] = fd;
            next = (next + 1) % KEEP_PER_THREAD;
        } else {
            held[nheld++] = fd;
        }
    }
    while (nheld) close(held[--nheld]);
    return NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static int rank_main(int rank, const char *log)
{
    if (!freopen(log, "w", stderr)) return 90;
    char v[32];
    snprintf(v, sizeof(v), "%d", rank);
    setenv("RCOLL_RANK", v, 1);
    /* Ranks 1 and 2 join into the flood; rank 0 (the root) starts first. */
    if (rank) {
        struct timespec ts = {1, 0}; /* 1 s: into a full pending table */
        nanosleep(&ts, NULL);
    }
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_env(&comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "TEST rank %d: init failed: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    int32_t x = rank + 1;
    st = rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, comm);
    int bad = st != RCOLL_OK || x != NRANKS * (NRANKS + 1) / 2;
    if (bad) fprintf(stderr, "TEST rank %d: all-reduce %s, %d\n", rank, rcoll_status_string(st), x);
    rcoll_comm_destroy(comm);
    return bad;
}

/* Rank 0 of a job that announces a million ranks: the root must not allocate and touch
 * memory for every announced rank before they join (it took ~1.3 KB per rank, 1.26 GB RSS). */
static void announced_million(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(90);
        /* Resident memory is what is measured: meson's MALLOC_PERTURB_ makes glibc's calloc
         * write every page it returns, which would count untouched tables as resident. */
        mallopt(M_PERTURB, 0);
        setenv("RCOLL_RANK", "0", 1);
        setenv("RCOLL_NRANKS", "1000000", 1);
        setenv("RCOLL_TIMEOUT", "4", 1);
        rcoll_comm_t comm;
        _exit(rcoll_comm_init_env(&comm) == RCOLL_OK ? 1 : 0);
    }
    struct timespec ts = {1, 500000000};
    nanosleep(&ts, NULL); /* rank 0 has joined its own root by now */
    char path[64], line[128];
    long rss_kb = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6)) rss_kb = atol(line + 6);
    if (f) fclose(f);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK(rss_kb > 0 && rss_kb < 100 * 1024, "rank 0 of 1,000,000 announced ranks (1 joined) "
          "holds %ld KiB", rss_kb);
}

int main(void)
{
    port = free_port();
    CHECK(port > 0, "a free port on 127.0.0.1");
    char root[64], dir[] = "/tmp/rcoll-flood-XXXXXX";
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    CHECK(mkdtemp(dir) != NULL, "temporary directory");
    setenv("RCOLL_ROOT", root, 1);
    setenv("RCOLL_NRANKS", "3", 1);
    setenv("RCOLL_SECRET", "flood-test-secret", 1);
    setenv("RCOLL_SOCKET_IFNAME", "lo", 1);
    setenv("RCOLL_TIMEOUT", "30", 1);
    unsetenv("RCOLL_DEBUG");
    fflush(NULL);
    pid_t pids[NRANKS];
    char logs[NRANKS][96];
    for (int r = 0; r < NRANKS; r++) {
        snprintf(logs[r], sizeof(logs[r]), "%s/rank%d.log", dir, r);
        pids[r] = fork();
        if (pids[r] == 0) _exit(rank_main(r, logs[r]));
    }
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, flood, NULL);
    int codes[NRANKS], left = NRANKS;
    double deadline = now_s() + DEADLINE_S;
    for (int r = 0; r < NRANKS; r++) codes[r] = -1;
    while (left && now_s() < deadline) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        for (int r = 0; p > 0 && r < NRANKS; r++)
            if (pids[r] == p) {
                codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                left--;
            }
        if (p <= 0) {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_store(&stop, 1);
    for (int r = 0; r < NRANKS; r++)
        if (codes[r] < 0) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
        }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    int n = atomic_load(&opened);
    CHECK(n >= 200, "the flood opened %d connections to the root", n);
    printf("the flood opened %d connections\n", n);
    for (int r = 0; r < NRANKS; r++) {
        CHECK(codes[r] == 0, "rank %d joined and computed the sum under the flood (exit %d; log "
              "%s)", r, codes[r], logs[r]);
        struct stat sb;
        off_t size = stat(logs[r], &sb) == 0 ? sb.st_size : -1;
        CHECK(size >= 0 && size < 16384, "rank %d's log is %lld bytes (rate-limited warnings)", r,
              (long long)size);
        if (codes[r] != 0 || size >= 16384) {
            char cmd[400];
            snprintf(cmd, sizeof(cmd), "tail -c 1500 %s >&2", logs[r]);
            if (system(cmd) != 0) fprintf(stderr, "(could not show %s)\n", logs[r]);
        }
    }
    FILE *f = fopen(logs[0], "r");
    char line[512];
    int counted = 0;
    while (f && fgets(line, sizeof(line), f))
        counted |= strstr(line, "more like this") != NULL;
    if (f) fclose(f);
    CHECK(counted, "the root's suppressed warnings are counted ('... more like this')");
    if (!getenv("RCOLL_TEST_KEEP")) for (int r = 0; r < NRANKS; r++) unlink(logs[r]);
    if (!getenv("RCOLL_TEST_KEEP")) rmdir(dir);
    announced_million();
    return check_summary();
}
