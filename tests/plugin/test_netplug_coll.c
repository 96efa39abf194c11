/*
 * test_netplug_coll.c - rcoll's collectives over an NCCL net plugin (the "plugin" transport,
 * RCOLL_NET_PLUGIN): the plugin is rcoll's own libnccl-net-rcoll.so, built here, so rcoll
 * loads it with dlopen and talks to it through NCCL's ABI (v12, its newest), and the plugin
 * moves the bytes over its TCP transport.  Ranks sit on two "hosts" (RCOLL_HOST_ID per rank,
 * interleaved): with RCOLL_NET=plugin the plugin carries every cross-host peer and shared
 * memory the others; with RCOLL_TRANSPORT=plugin the plugin carries every peer.  Each run
 * does every collective (all-reduce over every datatype, op, counts 0/1/odd/multi-chunk, in
 * and out of place; broadcast and reduce from every root; all-gather; reduce-scatter;
 * all-to-all; a send/recv ring in a group; nonblocking all-reduces; barrier) with one
 * all-reduce algorithm forced (ring, rd, tree, hier), checked against references computed
 * here (tests/common/dtref.c).  From the INFO log (one file, every rank): each all-reduce ran
 * the forced algorithm, each rank reaches its peers over the transport expected (the
 * core's "rank R reaches N peers over T" lines) and the plugin was loaded as ncclNetPlugin_v12.
 * Usage: test_netplug_coll PATH/libnccl-net-rcoll.so ("none" when it was not built: 77).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtref.h"
#include "mp.h"

#define NHOSTS 2

static const char *so_path;
static char log_path[256];

static int bad_rank(rcoll_comm_t comm, int rank, const char *what, rcoll_status_t st)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, rcoll_status_string(st),
            rcoll_comm_last_error(comm));
    return 1;
}

#define MAXC 1001

/* Every collective once or more; 0 when every result was right. */
static int run_all(rcoll_comm_t comm, int rank, int n)
{
    static const size_t counts[] = {0, 1, 37, MAXC};
    char *send = malloc(MAXC * 8 * 16), *recv = malloc(MAXC * 8 * 16);
    int bad = 0;
    rcoll_status_t st;
    /* all-reduce: every datatype and op, in and out of place */
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++)
        for (int op = 0; op < RCOLL_NUM_OPS; op++)
            for (size_t ci = 0; ci < 4 && dt_op_defined(dt, op); ci++) {
                size_t count = counts[ci];
                int inplace = (int)(ci + (size_t)op) % 2, salt = dt * 7 + op;
                for (size_t i = 0; i < count; i++)
                    ref_store(send, dt, i, (double)ref_gen(dt, op, rank, i, salt));
                memset(recv, 0x5a, MAXC * 8 + 8);
                if (inplace) memcpy(recv, send, count * dt_size[dt]);
                st = rcoll_allreduce(inplace ? RCOLL_IN_PLACE : send, recv, count, dt, op, comm);
                if (st != RCOLL_OK) return bad_rank(comm, rank, "allreduce", st);
                for (size_t i = 0; i < count; i++) {
                    double got = ref_load(recv, dt, i), want = ref_expected(dt, op, n, i, salt);
                    if (!ref_close_enough(dt, op, got, want)) {
                        fprintf(stderr, "rank %d: allreduce %s/%s count %zu: [%zu] = %g, not "
                                "%g\n", rank, dt_name[dt], op_name[op], count, i, got, want);
                        bad++;
                        break;
                    }
                }
                if ((unsigned char)recv[count * dt_size[dt]] != 0x5a) {
                    fprintf(stderr, "rank %d: allreduce wrote past its result\n", rank);
                    bad++;
                }
            }
    /* broadcast and reduce from every root */
    for (int root = 0; root < n; root++)
        for (size_t ci = 0; ci < 4; ci++) {
            size_t count = counts[ci];
            for (size_t i = 0; i < count; i++)
                ref_store(recv, RCOLL_INT32, i, rank == root ? (double)(i * 3 + (size_t)root) : -1);
            st = rcoll_bcast(recv, count, RCOLL_INT32, root, comm);
            if (st != RCOLL_OK) return bad_rank(comm, rank, "bcast", st);
            for (size_t i = 0; i < count; i++)
                if (ref_load(recv, RCOLL_INT32, i) != (double)(i * 3 + (size_t)root)) {
                    fprintf(stderr, "rank %d: bcast root %d count %zu: [%zu] wrong\n", rank,
                            root, count, i);
                    bad++;
                    break;
                }
            for (size_t i = 0; i < count; i++)
                ref_store(send, RCOLL_FLOAT64, i,
                          (double)ref_gen(RCOLL_FLOAT64, RCOLL_SUM, rank, i, root));
            st = rcoll_reduce(send, recv, count, RCOLL_FLOAT64, RCOLL_SUM, root, comm);
            if (st != RCOLL_OK) return bad_rank(comm, rank, "reduce", st);
            for (size_t i = 0; rank == root && i < count; i++)
                if (ref_load(recv, RCOLL_FLOAT64, i) !=
                    ref_expected(RCOLL_FLOAT64, RCOLL_SUM, n, i, root)) {
                    fprintf(stderr, "rank %d: reduce root %d count %zu: [%zu] wrong\n", rank,
                            root, count, i);
                    bad++;
                    break;
                }
        }
    /* all-gather, reduce-scatter, all-to-all: 37 int32 per block (multi-chunk) */
    const size_t blk = 37;
    for (size_t i = 0; i < blk; i++)
        ref_store(send, RCOLL_INT32, i, (double)(rank * 1000 + (int)i));
    st = rcoll_allgather(send, recv, blk, RCOLL_INT32, comm);
    if (st != RCOLL_OK) return bad_rank(comm, rank, "allgather", st);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < blk; i++)
            if (ref_load(recv, RCOLL_INT32, (size_t)r * blk + i) != (double)(r * 1000 + (int)i)) {
                fprintf(stderr, "rank %d: allgather block %d [%zu] wrong\n", rank, r, i);
                bad++;
                r = n;
                break;
            }
    for (size_t i = 0; i < blk * (size_t)n; i++)
        ref_store(send, RCOLL_INT32, i, (double)ref_gen(RCOLL_INT32, RCOLL_SUM, rank, i, 99));
    st = rcoll_reduce_scatter(send, recv, blk, RCOLL_INT32, RCOLL_SUM, comm);
    if (st != RCOLL_OK) return bad_rank(comm, rank, "reduce_scatter", st);
    for (size_t i = 0; i < blk; i++)
        if (ref_load(recv, RCOLL_INT32, i) !=
            ref_expected(RCOLL_INT32, RCOLL_SUM, n, (size_t)rank * blk + i, 99)) {
            fprintf(stderr, "rank %d: reduce_scatter [%zu] wrong\n", rank, i);
            bad++;
            break;
        }
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < blk; i++)
            ref_store(send, RCOLL_INT32, (size_t)r * blk + i, (double)(rank * 100000 + r * 1000 +
                                                                         (int)i));
    st = rcoll_alltoall(send, recv, blk, RCOLL_INT32, comm);
    if (st != RCOLL_OK) return bad_rank(comm, rank, "alltoall", st);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < blk; i++)
            if (ref_load(recv, RCOLL_INT32, (size_t)r * blk + i) !=
                (double)(r * 100000 + rank * 1000 + (int)i)) {
                fprintf(stderr, "rank %d: alltoall block from %d [%zu] wrong\n", rank, r, i);
                bad++;
                r = n;
                break;
            }
    /* point to point: a ring of 1001 doubles in a group (one message, no staging) */
    for (size_t i = 0; i < MAXC; i++)
        ref_store(send, RCOLL_FLOAT64, i, (double)(rank * 7 + (int)i));
    rcoll_group_start();
    rcoll_send(send, MAXC, RCOLL_FLOAT64, (rank + 1) % n, comm);
    rcoll_recv(recv, MAXC, RCOLL_FLOAT64, (rank + n - 1) % n, comm);
    st = rcoll_group_end();
    if (st != RCOLL_OK) return bad_rank(comm, rank, "send/recv ring", st);
    for (size_t i = 0; i < MAXC; i++)
        if (ref_load(recv, RCOLL_FLOAT64, i) != (double)(((rank + n - 1) % n) * 7 + (int)i)) {
            fprintf(stderr, "rank %d: ring message [%zu] wrong\n", rank, i);
            bad++;
            break;
        }
    /* nonblocking all-reduces outstanding together, waited in reverse order */
    enum { NB = 3 };
    double *nb[NB];
    rcoll_request_t req[NB];
    for (int k = 0; k < NB; k++) {
        nb[k] = malloc(500 * sizeof(double));
        for (int i = 0; i < 500; i++) nb[k][i] = rank + k + i % 5;
        st = rcoll_iallreduce(RCOLL_IN_PLACE, nb[k], 500, RCOLL_FLOAT64, RCOLL_SUM, comm, &req[k]);
        if (st != RCOLL_OK) return bad_rank(comm, rank, "iallreduce", st);
    }
    for (int k = NB - 1; k >= 0; k--) {
        st = rcoll_wait(&req[k]);
        if (st != RCOLL_OK) return bad_rank(comm, rank, "wait", st);
        double want0 = 0;
        for (int r = 0; r < n; r++) want0 += r + k;
        if (nb[k][0] != want0) {
            fprintf(stderr, "rank %d: nonblocking all-reduce %d wrong\n", rank, k);
            bad++;
        }
        free(nb[k]);
    }
    st = rcoll_barrier(comm);
    if (st != RCOLL_OK) return bad_rank(comm, rank, "barrier", st);
    free(send);
    free(recv);
    return bad ? 2 : 0;
}

static int rank_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    char host[32];
    snprintf(host, sizeof(host), "plughost%d", rank % NHOSTS);
    setenv("RCOLL_HOST_ID", host, 1);
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_rank(n, id, rank, &comm);
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    int bad = run_all(comm, rank, n);
    rcoll_comm_destroy(comm);
    return bad;
}

/* What the log of one run says. */
typedef struct {
    int algo_ok, algo_wrong;      /* all-reduce choices (after a rank's set-up) */
    int reach_ok[64], reach_bad;  /* "rank R reaches N peers over T" lines as expected */
    int loaded;                   /* "net plugin ... loaded: ncclNetPlugin_v12" */
    int warns;
} logscan_t;

static int expect_peers(int rank, int n, const char *tp, int all_plugin)
{
    int same = 0;
    for (int p = 0; p < n; p++)
        if (p != rank && p % NHOSTS == rank % NHOSTS) same++;
    if (all_plugin) return strcmp(tp, "plugin") ? -1 : n - 1;
    if (!strcmp(tp, "plugin")) return n - 1 - same;
    if (!strcmp(tp, "shm")) return same;
    return -1;
}

static void scan_log(const char *want_algo, int n, int all_plugin, logscan_t *s)
{
    FILE *f = fopen(log_path, "r");
    char line[1500];
    unsigned char ready[64] = {0};
    memset(s, 0, sizeof(*s));
    CHECK(f != NULL, "cannot read the log %s", log_path);
    while (f && fgets(line, sizeof(line), f)) {
        if (strstr(line, " WARN ")) {
            s->warns++;
            fputs(line, stderr);
        }
        if (strstr(line, " NET net plugin ") && strstr(line, "loaded: ncclNetPlugin_v12"))
            s->loaded++;
        const char *br = strchr(line, '[');
        int rank = -1;
        if (!br || sscanf(br, "[%d]", &rank) != 1 || rank < 0 || rank >= 64) continue;
        int r_of, n_of, peers;
        char tp[32];
        const char *m = strstr(line, " INIT rank ");
        if (m && sscanf(m, " INIT rank %d/%d on", &r_of, &n_of) == 2) ready[rank] = 1;
        const char *over = m ? strstr(m, " over ") : NULL;
        if (m && over && sscanf(m, " INIT rank %d reaches %d peer", &r_of, &peers) == 2 &&
            sscanf(over, " over %31s", tp) == 1) {
            if (expect_peers(rank, n, tp, all_plugin) == peers) {
                s->reach_ok[rank]++;
            } else {
                s->reach_bad++;
                fprintf(stderr, "unexpected: %s", line);
            }
        }
        const char *a = strstr(line, " ALGO all-reduce of ");
        char algo[32] = "";
        int on = 0;
        if (!a || !ready[rank]) continue;
        if (sscanf(a, " ALGO all-reduce of %*[0-9] B on %d ranks: %31[a-z_]", &on, algo) != 2)
            continue;
        if (!strcmp(algo, want_algo) && on == n) {
            s->algo_ok++;
        } else {
            if (!s->algo_wrong++) fprintf(stderr, "wanted %s: %s", want_algo, line);
        }
    }
    if (f) fclose(f);
}

static void run_case(int n, const char *algo, int all_plugin)
{
    char what[128];
    snprintf(what, sizeof(what), "%d ranks on %d hosts, %s, %s", n, NHOSTS, algo,
             all_plugin ? "RCOLL_TRANSPORT=plugin" : "RCOLL_NET=plugin (shm within a host)");
    setenv("RCOLL_ALGO", algo, 1);
    setenv("RCOLL_TRANSPORT", all_plugin ? "plugin" : "auto", 1);
    setenv("RCOLL_NET", "plugin", 1);
    FILE *f = fopen(log_path, "w");
    if (f) fclose(f);
    mp_result_t res;
    long failed0 = check_failed;
    int bad = mp_run_raw(n, rank_fn, NULL, 300, &res);
    CHECK(bad == 0, "%s: %d ranks failed", what, bad);
    logscan_t s;
    scan_log(algo, n, all_plugin, &s);
    CHECK(s.loaded == n, "%s: %d of %d ranks logged the plugin loaded as v12", what, s.loaded, n);
    CHECK(s.algo_ok > 0 && s.algo_wrong == 0, "%s: %d all-reduces ran %s, %d another", what,
          s.algo_ok, algo, s.algo_wrong);
    int lines = all_plugin ? 1 : 2, ranks_ok = 0;
    for (int r = 0; r < n; r++) ranks_ok += s.reach_ok[r] == lines;
    CHECK(ranks_ok == n && s.reach_bad == 0, "%s: %d of %d ranks reach their peers over the "
          "transports expected (%d unexpected lines)", what, ranks_ok, n, s.reach_bad);
    CHECK(s.warns == 0, "%s: %d warnings logged", what, s.warns);
    printf("%s: %s in %.1f s (%d all-reduce choices checked)\n", what,
           check_failed > failed0 ? "FAILED" : "ok", res.seconds, s.algo_ok);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "none")) {
        check_skip("libnccl-net-rcoll.so was not built (-Dnccl_plugin=disabled)");
        return check_summary();
    }
    so_path = argv[1];
    CHECK(access(so_path, R_OK) == 0, "the plugin %s is readable", so_path);
    snprintf(log_path, sizeof(log_path), "%s/rcoll_netplug_coll.%d.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    setenv("RCOLL_NET_PLUGIN", so_path, 1);
    setenv("RCOLL_CHUNK_SIZE", "64", 0); /* 1001 elements take many pipeline loops */
    setenv("RCOLL_TIMEOUT", "60", 0);
    setenv("RCOLL_DEBUG", "INFO", 1);
    setenv("RCOLL_DEBUG_SUBSYS", "INIT,ALGO,NET", 1);
    setenv("RCOLL_DEBUG_FILE", log_path, 1);
    static const char *const algos[] = {"ring", "rd", "tree", "hier"};
    for (int a = 0; a < 4; a++) run_case(4, algos[a], 0);
    run_case(6, "ring", 0); /* 3 ranks per host */
    for (int a = 0; a < 3; a++) run_case(4, algos[a], 1);
    run_case(3, "rd", 1); /* odd: doubling with a remainder, every peer over the plugin */
    unlink(log_path);
    return check_summary();
}
