/*
 * test_suspend.c - rcoll_comm_suspend / rcoll_comm_resume over real processes (mp.c), 4 ranks,
 * over shared memory and over TCP:
 *  - suspended: rcoll_comm_mem_stats says staging 0 and no connection, the process maps no
 *    shared-memory segment of the transport and holds fewer sockets; every call is refused
 *    naming the suspension; suspend again is refused;
 *  - resumed: staging and connections as before; all-reduce, all-to-all (its connections are
 *    made on first use) and a ring of sends are right against values computed here; three
 *    suspend/resume rounds in a row;
 *  - refusals: an operation pending (a receive whose message comes only after every rank has
 *    tried), inside a group, resume of a communicator not suspended, unknown flags; destroy
 *    of a suspended communicator;
 *  - suspend is a barrier: rank 0 enters it 200 ms late each round, having marked a word of
 *    shared memory; the others find the mark when their suspend returns;
 *  - a rank that dies while the others are suspended: their resume fails within the timeout
 *    naming it.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mp.h"
#include "rcoll.h"

static long count_maps(const char *what)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    long n = 0;
    while (f && fgets(line, sizeof(line), f)) n += strstr(line, what) != NULL;
    if (f) fclose(f);
    return n;
}

static long count_sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;
    struct dirent *e;
    char path[300], link[64];
    while (d && (e = readdir(d))) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, link, sizeof(link) - 1);
        if (k > 0) {
            link[k] = 0;
            n += !strncmp(link, "socket:", 7);
        }
    }
    if (d) closedir(d);
    return n;
}

/* All-reduce, all-to-all and a ring of sends, checked. */
static int work(rcoll_comm_t c, int rank, int n, int round)
{
    int bad = 0;
    size_t cnt = 70000; /* several chunks */
    int *v = malloc(cnt * sizeof(int));
    for (size_t i = 0; i < cnt; i++) v[i] = rank + (int)(i % 13) + round;
    if (rcoll_allreduce(RCOLL_IN_PLACE, v, cnt, RCOLL_INT32, RCOLL_SUM, c) != RCOLL_OK) bad |= 1;
    for (size_t i = 0; i < cnt && !(bad & 1); i++)
        if (v[i] != n * (n - 1) / 2 + n * ((int)(i % 13) + round)) bad |= 1;
    free(v);
    int a[16], b[16];
    for (int p = 0; p < n; p++) a[p] = 100 * rank + p + round;
    if (rcoll_alltoall(a, b, 1, RCOLL_INT32, c) != RCOLL_OK) bad |= 2;
    for (int p = 0; p < n && !(bad & 2); p++)
        if (b[p] != 100 * p + rank + round) bad |= 2;
    int s = rank * 7 + round, r = -1;
    rcoll_group_start();
    rcoll_send(&s, 1, RCOLL_INT32, (rank + 1) % n, c);
    rcoll_recv(&r, 1, RCOLL_INT32, (rank + n - 1) % n, c);
    if (rcoll_group_end() != RCOLL_OK || r != ((rank + n - 1) % n) * 7 + round) bad |= 4;
    if (bad) fprintf(stderr, "rank %d round %d: wrong (bits %d): %s\n", rank, round, bad,
                     rcoll_comm_last_error(c));
    return bad;
}

/* Shared by the rank processes (mapped before they are forked): [0] the round rank 0 has
 * entered suspend for; [1] the ranks that have tried suspend with a receive pending; [2] the
 * ranks' suspended states measured so far; [3] the ranks suspended in the death case. */
static int *shared;

/* Count this rank in shared[i], then wait (10 s at most: a rank that returned early) until
 * it reaches `until`.  The ranks meet here through shared memory, not through the library. */
static void meet(int i, int until)
{
    __atomic_add_fetch(&shared[i], 1, __ATOMIC_SEQ_CST);
    for (int ms = 0; __atomic_load_n(&shared[i], __ATOMIC_SEQ_CST) < until && ms < 10000; ms++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static int cycle_bits(rcoll_comm_t comm, int rank, int n, void *arg)
{
    int tcp = arg != NULL, bad = work(comm, rank, n, 0);
    rcoll_mem_stats_t m0, m1, m2;
    rcoll_comm_mem_stats(comm, &m0, sizeof(m0));
    for (int round = 1; round <= 3; round++) {
        long maps0 = count_maps("rcoll-shm"), socks0 = count_sockets();
        if (rank == 0) {
            struct timespec late = {0, 200000000};
            nanosleep(&late, NULL);
            __atomic_store_n(&shared[0], round, __ATOMIC_SEQ_CST);
        }
        if (rcoll_comm_suspend(comm, RCOLL_SUSPEND_DEFAULT) != RCOLL_OK) {
            fprintf(stderr, "rank %d: suspend: %s\n", rank, rcoll_comm_last_error(comm));
            return bad | 8;
        }
        int seen = __atomic_load_n(&shared[0], __ATOMIC_SEQ_CST);
        if (seen != round) {
            fprintf(stderr, "rank %d round %d: suspend returned before rank 0 entered it "
                    "(rank 0 is at round %d)\n", rank, round, seen);
            bad |= 2048;
        }
        rcoll_comm_mem_stats(comm, &m1, sizeof(m1));
        long maps1 = count_maps("rcoll-shm"), socks1 = count_sockets();
        if (round == 1)
            fprintf(stderr, "rank %d: suspended: staging %llu -> %llu B, state %llu -> %llu B, "
                    "connections %lld -> %lld, shm mappings %ld -> %ld, sockets %ld -> %ld\n",
                    rank, (unsigned long long)m0.staging, (unsigned long long)m1.staging,
                    (unsigned long long)m0.state, (unsigned long long)m1.state,
                    (long long)m0.connections, (long long)m1.connections, maps0, maps1, socks0,
                    socks1);
        if (m1.staging != 0 || m1.connections != 0 || m1.state >= m0.state ||
            (!tcp && (maps0 == 0 || maps1 != 0)) || (tcp && socks1 >= socks0))
            bad |= 16;
        /* every rank measured before any resumes: a peer that resumes first connects at once,
         * and this rank (still in suspend's barrier) may hold that connection for its resume */
        meet(2, n * round);
        int v = 1;
        if (rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_SUM, comm) !=
                RCOLL_ERR_INVALID_USAGE ||
            !strstr(rcoll_comm_last_error(comm), "suspended"))
            bad |= 32;
        if (rcoll_comm_suspend(comm, RCOLL_SUSPEND_DEFAULT) != RCOLL_ERR_INVALID_USAGE)
            bad |= 32;
        rcoll_comm_t d = NULL;
        if (rcoll_comm_dup(comm, &d) != RCOLL_ERR_INVALID_USAGE || d) bad |= 32;
        if (rcoll_comm_resume(comm) != RCOLL_OK) {
            fprintf(stderr, "rank %d: resume: %s\n", rank, rcoll_comm_last_error(comm));
            return bad | 64;
        }
        rcoll_comm_mem_stats(comm, &m2, sizeof(m2));
        if (m2.staging != m0.staging || m2.connections == 0) bad |= 128;
        bad |= work(comm, rank, n, round);
    }
    /* refusals */
    if (rcoll_comm_resume(comm) != RCOLL_ERR_INVALID_USAGE ||
        !strstr(rcoll_comm_last_error(comm), "not suspended"))
        bad |= 256;
    if (rcoll_comm_suspend(comm, 7) != RCOLL_ERR_INVALID_ARG) bad |= 256;
    rcoll_group_start();
    if (rcoll_comm_suspend(comm, RCOLL_SUSPEND_DEFAULT) != RCOLL_ERR_INVALID_USAGE) bad |= 256;
    rcoll_group_end();
    /* pending: a receive whose message is sent only once every rank has tried suspend (the
     * ranks count themselves in shared memory, not through the library) */
    rcoll_request_t rq = NULL, sq = NULL;
    int y = -1, x = 1000 + rank;
    if (rcoll_irecv(&y, 1, RCOLL_INT32, (rank + n - 1) % n, comm, &rq) != RCOLL_OK) bad |= 512;
    if (rcoll_comm_suspend(comm, RCOLL_SUSPEND_DEFAULT) != RCOLL_ERR_INVALID_USAGE ||
        !strstr(rcoll_comm_last_error(comm), "pending"))
        bad |= 512;
    meet(1, n);
    if (rcoll_isend(&x, 1, RCOLL_INT32, (rank + 1) % n, comm, &sq) != RCOLL_OK ||
        rcoll_wait(&sq) != RCOLL_OK || rcoll_wait(&rq) != RCOLL_OK ||
        y != 1000 + (rank + n - 1) % n)
        bad |= 512;
    /* destroyed while suspended (mp destroys it after this returns) */
    if (rcoll_comm_suspend(comm, RCOLL_SUSPEND_DEFAULT) != RCOLL_OK) bad |= 1024;
    return bad;
}

/* An exit status keeps 8 bits: the whole set is said here, the status is at most 255. */
static int cycle(rcoll_comm_t comm, int rank, int n, void *arg)
{
    int bad = cycle_bits(comm, rank, n, arg);
    if (bad) fprintf(stderr, "rank %d: bits %d\n", rank, bad);
    return bad > 255 ? 255 : bad;
}

static int death(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg, (void)n;
    if (rcoll_comm_suspend(comm, RCOLL_SUSPEND_DEFAULT) != RCOLL_OK) {
        fprintf(stderr, "rank %d: suspend: %s\n", rank, rcoll_comm_last_error(comm));
        return 100;
    }
    meet(3, n); /* dying as soon as its suspend returned, rank 2 could fail a peer's */
    if (rank == 2) raise(SIGKILL);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    rcoll_status_t st = rcoll_comm_resume(comm);
    fprintf(stderr, "rank %d: resume with rank 2 dead: %s: %s\n", rank, rcoll_status_string(st),
            rcoll_comm_last_error(comm));
    return st != RCOLL_OK && strstr(rcoll_comm_last_error(comm), "rank 2") ? 0 : 1;
}

int main(void)
{
    setenv("RCOLL_TIMEOUT", "10", 1);
    mp_result_t res;
    shared = mmap(NULL, 4 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                  0);
    CHECK(shared != MAP_FAILED, "mmap of the shared words failed");
    if (shared == MAP_FAILED) return check_summary();
    for (int tcp = 0; tcp <= 1; tcp++) {
        shared[0] = shared[1] = shared[2] = shared[3] = 0;
        setenv("RCOLL_TRANSPORT", tcp ? "tcp" : "shm", 1);
        mp_run(4, cycle, tcp ? (void *)1 : NULL, 60, &res);
        for (int r = 0; r < 4; r++)
            CHECK(res.codes[r] == 0, "%s: rank %d exit %d (its bits line above: 1-4 "
                  "all-reduce, all-to-all, sends wrong; 8 suspend; 16 memory not freed; 32 "
                  "calls not refused; 64 resume; 128 memory not restored; 256-1024 refusals; "
                  "2048 suspend did not wait; 255: a bit above 128)", tcp ? "tcp" : "shm", r,
                  res.codes[r]);
        printf("%s: 4 ranks, 3 suspend/resume rounds: %s\n", tcp ? "tcp" : "shm",
               res.codes[0] || res.codes[1] || res.codes[2] || res.codes[3] ? "FAIL" : "ok");
    }
    setenv("RCOLL_TRANSPORT", "shm", 1);
    setenv("RCOLL_TIMEOUT", "3", 1);
    mp_run(4, death, NULL, 60, &res);
    for (int r = 0; r < 4; r++)
        CHECK(res.codes[r] == (r == 2 ? 128 + SIGKILL : 0), "a death while suspended: rank %d "
              "exit %d (1: resume did not fail naming rank 2; 100: suspend failed)", r,
              res.codes[r]);
    return check_summary();
}
