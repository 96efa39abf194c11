/*
 * test_netplug_fail.c - rcoll over NCCL net plugins that cannot work or stop working
 * (tests/plugin/fake_netplug.c), two or four ranks on two "hosts" (RCOLL_HOST_ID):
 *   - RCOLL_NET=plugin with a plugin whose init fails, one with no device, one exporting only
 *     ncclNetPlugin_v7, and a name nothing answers to: every rank's creation fails, in
 *     bounded time, with a sentence naming the plugin and the reason;
 *   - RCOLL_NET=auto with the first two: creation works over TCP, and the INFO log says why the
 *     plugin was not used;
 *   - a v8 shim that forwards to rcoll's own plugin carries a job (NCCL's v8 ABI: int sizes);
 *     the same shim failing every test() from some call on in one rank (a NIC dying mid-job)
 *     makes the all-reduces fail on every rank, in bounded time, that rank's error naming the
 *     plugin, the call and a peer, no rank hanging;
 *   - copies of rcoll's own v9, v10, v11 and v12 tables, each the only version its module
 *     exports, carry a job (the loader's code for every version).
 * Usage: test_netplug_fail RCOLL_PLUGIN BADINIT NODEV OLDVER SHIM COPY9 .. COPY12 (paths of
 * the built modules; "none" as the first when libnccl-net-rcoll.so was not built: 77).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

static char log_path[256];

typedef struct {
    const char *want[3]; /* strings the creation error must hold (NULL: creation must work) */
    int ops;             /* all-reduces to run after creation */
    int die_rank;        /* rank whose plugin dies (FAKE_NET_DIE_AFTER), -1 none */
    size_t p2p;          /* then: bytes each rank sends to rank ^ 1 (the other host) */
    size_t p2p_short;    /* ... and, if not 0, the odd ranks receive only this many: a
                          * mismatch that must fail */
} case_t;

/* A point-to-point exchange with rank ^ 1 of k->p2p bytes, checked; 0 when right, or when
 * the expected mismatch failed the call. */
static int p2p_case(const case_t *k, rcoll_comm_t comm, int rank)
{
    int peer = rank ^ 1, rc = 0;
    size_t rbytes = k->p2p_short && (rank & 1) ? k->p2p_short : k->p2p;
    unsigned char *s = malloc(k->p2p), *r = malloc(k->p2p);
    for (size_t i = 0; i < k->p2p; i++) s[i] = (unsigned char)(i * 7 + (size_t)rank);
    memset(r, 0xee, k->p2p);
    rcoll_request_t q[2];
    rcoll_status_t st = rcoll_isend(s, k->p2p, RCOLL_UINT8, peer, comm, &q[0]);
    rcoll_status_t st2 = rcoll_irecv(r, rbytes, RCOLL_UINT8, peer, comm, &q[1]);
    if (st == RCOLL_OK) st = rcoll_wait(&q[0]);
    if (st2 == RCOLL_OK) st2 = rcoll_wait(&q[1]);
    if (k->p2p_short) {
        /* the odd rank's receive is shorter than the message by pieces: it must fail */
        if ((rank & 1) && st2 == RCOLL_OK) {
            fprintf(stderr, "rank %d: a receive of %zu bytes took a %zu-byte message\n", rank,
                    rbytes, k->p2p);
            rc = 5;
        } else if (rank & 1) {
            const char *text = rcoll_comm_last_error(comm);
            rc = st2 == RCOLL_ERR_INVALID_USAGE && strstr(text, "rank ") ? 0 : 6;
            if (rc) fprintf(stderr, "rank %d: mismatch: %s: %s\n", rank,
                            rcoll_status_string(st2), text);
        }
    } else if (st != RCOLL_OK || st2 != RCOLL_OK) {
        fprintf(stderr, "rank %d: point to point: %s\n", rank, rcoll_comm_last_error(comm));
        rc = 4;
    } else {
        for (size_t i = 0; i < k->p2p && !rc; i++)
            if (r[i] != (unsigned char)(i * 7 + (size_t)peer)) {
                fprintf(stderr, "rank %d: byte %zu from rank %d is %u\n", rank, i, peer, r[i]);
                rc = 4;
            }
    }
    free(s);
    free(r);
    return rc;
}

static int rank_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    const case_t *k = arg;
    char host[32];
    snprintf(host, sizeof(host), "failhost%d", rank % 2);
    setenv("RCOLL_HOST_ID", host, 1);
    rcoll_comm_t comm;
    rcoll_status_t st = rcoll_comm_init_rank(n, id, rank, &comm);
    if (k->want[0]) {
        const char *text = rcoll_last_init_error();
        int ok = st != RCOLL_OK;
        for (int i = 0; i < 3 && k->want[i] && ok; i++) ok = strstr(text, k->want[i]) != NULL;
        if (!ok) fprintf(stderr, "rank %d: creation %s: '%s'\n", rank, st == RCOLL_OK ?
                         "worked" : "failed without the words expected", text);
        if (st == RCOLL_OK) rcoll_comm_destroy(comm);
        return ok ? 0 : 3;
    }
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    /* Arm the dying plugin only now: set-up's polling (longer on a loaded machine) must not
     * use up its count before the job starts. */
    if (rank == k->die_rank) setenv("FAKE_NET_DIE_AFTER", "3000", 1);
    enum { COUNT = 20000 };
    float *buf = malloc(COUNT * sizeof(float));
    int rc = 0;
    for (int it = 0; it < k->ops && rc == 0; it++) {
        for (int i = 0; i < COUNT; i++) buf[i] = (float)(rank + i % 7);
        st = rcoll_allreduce(RCOLL_IN_PLACE, buf, COUNT, RCOLL_FLOAT32, RCOLL_SUM, comm);
        if (st != RCOLL_OK) {
            const char *text = rcoll_comm_last_error(comm);
            fprintf(stderr, "rank %d: all-reduce %d failed (expected when a plugin dies): %s\n",
                    rank, it, text);
            if (k->die_rank < 0) {
                rc = 1;
            } else if (rank == k->die_rank) {
                /* the dying rank names the plugin, the call and the peer it talked to */
                rc = strstr(text, "fake-netplug-shim") && strstr(text, "test failed") &&
                             strstr(text, "rank ")
                         ? 10
                         : 11;
            } else {
                rc = strstr(text, "rank ") ? 10 : 11; /* names the rank that failed */
            }
            break;
        }
        for (int i = 0; i < COUNT; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) want += (float)(r + i % 7);
            if (buf[i] != want) {
                fprintf(stderr, "rank %d: all-reduce %d: [%d] = %g, not %g\n", rank, it, i,
                        (double)buf[i], (double)want);
                rc = 2;
                break;
            }
        }
    }
    free(buf);
    if (rc == 0 && k->p2p) rc = p2p_case(k, comm, rank);
    if (k->p2p_short) {
        /* The even rank's own calls succeed, possibly before the odd rank has seen its
         * receive overflow: its abort must wait for that verdict (a file the odd rank makes),
         * or the odd rank may see "rank 0 called rcoll_comm_abort" first (seen in CI).
         * Bounded, in case the odd rank never gets there. */
        char mark[300];
        snprintf(mark, sizeof(mark), "%s.checked%d", log_path, rank | 1);
        if (rank & 1) {
            FILE *f = fopen(mark, "w");
            if (f) fclose(f);
        } else {
            for (int i = 0; i < 3000 && access(mark, F_OK) != 0; i++) usleep(10000);
        }
        rcoll_comm_abort(comm); /* the even ranks may still wait */
        if (!(rank & 1)) unlink(mark);
    } else {
        rcoll_comm_destroy(comm);
    }
    return rc;
}

static int log_has(const char *a, const char *b)
{
    FILE *f = fopen(log_path, "r");
    char line[1500];
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f)) found = strstr(line, a) && strstr(line, b);
    if (f) fclose(f);
    return found;
}

static void log_reset(void)
{
    FILE *f = fopen(log_path, "w");
    if (f) fclose(f);
}

/* A creation that must fail on every rank (RCOLL_NET=plugin), then work (auto) if fallback. */
static void unusable(const char *plugin, const char *what, const char *reason, int fallback)
{
    mp_result_t res;
    setenv("RCOLL_NET_PLUGIN", plugin, 1);
    setenv("RCOLL_NET", "plugin", 1);
    case_t k = {.want = {plugin, reason, "RCOLL_NET=plugin"}, .die_rank = -1};
    int bad = mp_run_raw(2, rank_fn, &k, 60, &res);
    CHECK(bad == 0, "%s, RCOLL_NET=plugin: %d of 2 ranks did not fail creation naming %s and "
          "'%s'", what, bad, plugin, reason);
    CHECK(res.seconds < 30, "%s: failing took %.1f s", what, res.seconds);
    printf("%s, RCOLL_NET=plugin: creation fails naming it (%.1f s)\n", what, res.seconds);
    if (!fallback) return;
    setenv("RCOLL_NET", "auto", 1);
    log_reset();
    case_t ok = {.ops = 3, .die_rank = -1};
    bad = mp_run_raw(2, rank_fn, &ok, 60, &res);
    CHECK(bad == 0, "%s, RCOLL_NET=auto: %d of 2 ranks failed", what, bad);
    CHECK(log_has("INFO INIT transport plugin not used: ", reason),
          "%s, RCOLL_NET=auto: no INFO line says why the plugin was not used", what);
    CHECK(log_has("INFO INIT rank ", "reaches 1 peer over tcp"),
          "%s, RCOLL_NET=auto: the ranks do not reach each other over tcp", what);
    printf("%s, RCOLL_NET=auto: tcp instead, INFO says why (%.1f s)\n", what, res.seconds);
}

int main(int argc, char **argv)
{
    if (argc < 10 || !strcmp(argv[1], "none")) {
        check_skip("libnccl-net-rcoll.so was not built (-Dnccl_plugin=disabled)");
        return check_summary();
    }
    const char *rcoll_plugin = argv[1], *badinit = argv[2], *nodev = argv[3], *oldver = argv[4],
               *shim = argv[5];
    snprintf(log_path, sizeof(log_path), "%s/rcoll_netplug_fail.%d.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    log_reset();
    setenv("RCOLL_TIMEOUT", "15", 0);
    setenv("RCOLL_TUNING_PROBE", "0", 1); /* the dying plugin's test() count starts at the job */
    setenv("RCOLL_DEBUG", "INFO", 1);
    setenv("RCOLL_DEBUG_SUBSYS", "INIT,NET", 1);
    setenv("RCOLL_DEBUG_FILE", log_path, 1);
    setenv("FAKE_NET_INNER", rcoll_plugin, 1);

    unusable(badinit, "a plugin whose init fails", "init failed", 1);
    CHECK(log_has("WARN NET net plugin fake-badinit: fake: init refused on purpose", ""),
          "the plugin's own WARN did not reach rcoll's log (subsystem NET)");
    unusable(nodev, "a plugin with no device", "reports no device", 1);
    unusable(oldver, "a plugin of version 7 only", "exports ncclNetPlugin_v7", 0);
    unusable("no-such-plugin-here", "a name nothing answers to",
             "libnccl-net-no-such-plugin-here.so", 0);

    /* the v8 shim over rcoll's plugin carries a job */
    mp_result_t res;
    setenv("RCOLL_NET_PLUGIN", shim, 1);
    setenv("RCOLL_NET", "plugin", 1);
    log_reset();
    case_t job = {.ops = 20, .die_rank = -1};
    int bad = mp_run_raw(4, rank_fn, &job, 120, &res);
    CHECK(bad == 0, "v8 shim: %d of 4 ranks failed", bad);
    CHECK(log_has(" NET net plugin ", "loaded: ncclNetPlugin_v8, name fake-shim"),
          "v8 shim: not loaded as v8");
    CHECK(log_has("INFO INIT rank ", "reaches 2 peers over plugin"),
          "v8 shim: the ranks do not reach the other host over the plugin");
    printf("rcoll over a v8 plugin (shim over rcoll's): 4 ranks, 20 all-reduces ok in %.1f s\n",
           res.seconds);

    /* copies of rcoll's own v9 .. v12 tables: each version's calls in the loader carry a job */
    for (int v = 9; v <= 12; v++) {
        char want[64], who[32];
        snprintf(want, sizeof(want), "loaded: ncclNetPlugin_v%d, name fake-v%d", v, v);
        snprintf(who, sizeof(who), "v%d copy", v);
        setenv("RCOLL_NET_PLUGIN", argv[6 + v - 9], 1);
        log_reset();
        case_t k = {.ops = 20, .die_rank = -1};
        bad = mp_run_raw(4, rank_fn, &k, 120, &res);
        CHECK(bad == 0, "%s: %d of 4 ranks failed", who, bad);
        CHECK(log_has(" NET net plugin ", want), "%s: not loaded as v%d", who, v);
        CHECK(log_has("INFO INIT rank ", "reaches 2 peers over plugin"),
              "%s: the ranks do not reach the other host over the plugin", who);
        printf("rcoll over a v%d plugin (a copy of rcoll's): 4 ranks, 20 all-reduces ok in "
               "%.1f s\n", v, res.seconds);
    }
    setenv("RCOLL_NET_PLUGIN", shim, 1);

    /* a plugin whose maxP2pBytes is 64 KiB (the v12 copy, refusing anything longer): the
     * collectives' chunks and the pieces of a 1 MiB point-to-point message fit it, and a
     * receive two pieces short of its message fails */
    setenv("FAKE_NET_MAX_P2P", "65536", 1);
    setenv("RCOLL_NET_PLUGIN", argv[9], 1);
    log_reset();
    case_t small = {.ops = 5, .die_rank = -1, .p2p = (1u << 20) + 13};
    int failed_before = check_failed;
    bad = mp_run_raw(4, rank_fn, &small, 120, &res);
    CHECK(bad == 0, "maxP2pBytes 64 KiB: %d of 4 ranks failed", bad);
    CHECK(log_has("INFO INIT rank ", "reaches 2 peers over plugin"),
          "maxP2pBytes 64 KiB: the ranks do not reach the other host over the plugin");
    case_t shorter = {.ops = 1, .die_rank = -1, .p2p = (1u << 20) + 13,
                      .p2p_short = (1u << 20) + 13 - (130u << 10)};
    /* one pair (rank 0 on one host, rank 1 on the other): with two pairs, the other pair's
     * abort after its own mismatch could reach rank 1 before rank 1 finds its own */
    bad = mp_run_raw(2, rank_fn, &shorter, 120, &res);
    CHECK(bad == 0, "maxP2pBytes 64 KiB, a receive 130 KiB short: %d of 2 ranks did not fail "
          "it as a mismatch", bad);
    if (check_failed == failed_before)
        printf("a plugin taking 64 KiB messages: all-reduces and a 1 MiB + 13 B exchange in "
               "pieces ok, a receive short by pieces fails\n");
    unsetenv("FAKE_NET_MAX_P2P");
    setenv("RCOLL_NET_PLUGIN", shim, 1);

    /* ... and dies in rank 1 after 3000 test() calls */
    case_t die = {.ops = 100000, .die_rank = 1};
    bad = mp_run_raw(4, rank_fn, &die, 120, &res);
    int named = 0, hung = 0;
    for (int r = 0; r < 4; r++) {
        named += res.codes[r] == 10;
        hung += res.codes[r] == MP_TIMEOUT_EXIT;
    }
    CHECK(hung == 0, "dying plugin: %d ranks hung", hung);
    CHECK(res.codes[1] == 10, "dying plugin: rank 1 ended with %d, not with an error naming the "
          "plugin, the call and a peer", res.codes[1]);
    CHECK(named == 4, "dying plugin: %d of 4 ranks failed with an error naming a rank", named);
    CHECK(res.seconds < 60, "dying plugin: the job took %.1f s to fail", res.seconds);
    printf("a plugin dying mid-job in rank 1: every rank fails naming a peer, in %.1f s\n",
           res.seconds);
    unlink(log_path);
    return check_summary();
}
