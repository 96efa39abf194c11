/*
 * test_probe_reuse.c - the set-up probe's measurements are reused by a later communicator of
 * the same shape in the same processes (RCOLL_TUNING_REUSE, default 1), and measured again
 * with RCOLL_TUNING_REUSE=0 or when only some ranks have them; the reused communicator
 * computes right; one of more ranks than RCOLL_TUNING_PROBE_MAX skips it.  The probe's sizes: the ring's, doubling's and tree's reach 4 MiB over a
 * network, 1 MiB over shared memory.  Read from each rank's INFO log (RCOLL_DEBUG_FILE, one file per rank).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo.h"
#include "check.h"
#include "core/introspect.h"
#include "mp.h"

static char dir[64];

/* A new communicator over the same ranks: rank 0's unique id broadcast over `over`. */
static rcoll_comm_t again(rcoll_comm_t over, int rank, int n)
{
    rcoll_unique_id_t id;
    if (rank == 0 && rcoll_get_unique_id(&id) != RCOLL_OK) return NULL;
    if (rcoll_bcast(&id, sizeof(id), RCOLL_UINT8, 0, over) != RCOLL_OK) return NULL;
    rcoll_comm_t c;
    return rcoll_comm_init_rank(n, &id, rank, &c) == RCOLL_OK ? c : NULL;
}

static int sum_ok(rcoll_comm_t c, int rank, int n)
{
    float x[1000];
    for (int i = 0; i < 1000; i++) x[i] = (float)(rank + i);
    if (rcoll_allreduce(RCOLL_IN_PLACE, x, 1000, RCOLL_FLOAT32, RCOLL_SUM, c) != RCOLL_OK) return 0;
    for (int i = 0; i < 1000; i++)
        if (x[i] != (float)(n * i + n * (n - 1) / 2)) return 0;
    return 1;
}

static int ranks_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)arg;
    rcoll_comm_t a, b, c, d;
    if (rcoll_comm_init_rank(n, id, rank, &a) != RCOLL_OK) return 10;
    if (!(b = again(a, rank, n))) return 11; /* reuses a's measurements */
    if (!sum_ok(b, rank, n)) return 12;
    setenv("RCOLL_TUNING_REUSE", "0", 1);
    if (!(c = again(a, rank, n))) return 13; /* measures */
    /* only rank 0 would reuse: every rank measures */
    if (rank == 0) unsetenv("RCOLL_TUNING_REUSE");
    if (!(d = again(a, rank, n))) return 14;
    if (!sum_ok(d, rank, n)) return 15;
    /* more ranks than RCOLL_TUNING_PROBE_MAX: no probe, the built-in constants */
    setenv("RCOLL_TUNING_PROBE_MAX", "1", 1);
    setenv("RCOLL_TUNING_REUSE", "0", 1);
    rcoll_comm_t e = again(a, rank, n);
    unsetenv("RCOLL_TUNING_PROBE_MAX");
    if (!e) return 16;
    if (!sum_ok(e, rank, n)) return 17;
    rcoll_comm_destroy(e);
    rcoll_comm_destroy(d);
    rcoll_comm_destroy(c);
    rcoll_comm_destroy(b);
    rcoll_comm_destroy(a);
    return 0;
}

/* Does every rank's log (n of them) hold `what` on exactly `want` lines? */
static int per_rank(const char *what, int n, int want)
{
    char cmd[256], line[64];
    /* the ranks' logs (the parent's, where the bootstrap root runs, has no INIT rank line) */
    snprintf(cmd, sizeof(cmd), "for f in $(grep -l ' INIT rank ' %s/log.*); do grep -c '%s' "
             "\"$f\"; done", dir, what);
    FILE *p = popen(cmd, "r");
    int files = 0, ok = 1;
    while (p && fgets(line, sizeof(line), p)) {
        files++;
        if (atoi(line) != want) ok = 0;
    }
    if (p) pclose(p);
    return ok && files == n;
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/rcoll-reuse-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "temporary directory");
    char pattern[96];
    snprintf(pattern, sizeof(pattern), "%s/log.%%p", dir);
    setenv("RCOLL_DEBUG", "INFO", 1);
    setenv("RCOLL_DEBUG_SUBSYS", "INIT", 1);
    setenv("RCOLL_DEBUG_FILE", pattern, 1);
    unsetenv("RCOLL_ALGO");
    unsetenv("RCOLL_TUNING_PROBE");
    unsetenv("RCOLL_TUNING_FILE");
    unsetenv("RCOLL_TUNING_REUSE");
    mp_result_t res;
    CHECK(mp_run_raw(2, ranks_fn, NULL, 120, &res) == 0,
          "2 ranks, four communicators of one shape (rank codes %d %d)", res.codes[0],
          res.codes[1]);
    CHECK(per_rank("tuning probe, measured: ", 2, 3),
          "each rank measured three times: the first, RCOLL_TUNING_REUSE=0, and when one rank "
          "had it off");
    char skipped[256];
    snprintf(skipped, sizeof(skipped), "test \"$(grep -l 'tuning probe skipped: 2 ranks, above "
             "RCOLL_TUNING_PROBE_MAX=1' %s/log.* | wc -l)\" = 1", dir);
    CHECK(system(skipped) == 0,
          "a communicator above RCOLL_TUNING_PROBE_MAX skipped the probe (said by rank 0), and "
          "the measured count above did not grow");
    CHECK(per_rank("measurements of the same shape reused", 2, 1),
          "each rank reused the first measurements once (the second communicator)");
    /* Over shared memory no curve reaches 4 MiB (the ring, doubling and tree are not chosen at
     * large sizes there; two-shot, one-shot and cma name their own sizes). */
    CHECK(per_rank("tuning probe, measured: .*4194304 B", 2, 0),
          "over shared memory no algorithm's curve has a 4 MiB point");
    /* Which sizes the probe times (the points; a busy machine's budget may stop a curve
     * earlier, so the measured lines are not checked for them): over a network the ring,
     * doubling and tree reach 4 MiB, over shared memory 1 MiB; two-shot names its own. */
    for (int shm = 0; shm <= 1; shm++)
        for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
            if (a != RCOLL_ALG_RING && a != RCOLL_ALG_RD && a != RCOLL_ALG_TREE &&
                a != RCOLL_ALG_TWOSHOT)
                continue;
            size_t pts[RCOLL_ALGO_PROBE_POINTS];
            int n = rcoll_probe_points(a, SIZE_MAX, shm, pts);
            size_t want = a == RCOLL_ALG_TWOSHOT || shm ? (size_t)1 << 20 : (size_t)4 << 20;
            CHECK(n >= 3 && pts[n - 1] == want && pts[0] == 64,
                  "%s over %s: %d points, 64 B to %zu B (want to %zu B)", rcoll_alg_names[a],
                  shm ? "shared memory" : "a network", n, n ? pts[n - 1] : 0, want);
            /* between 32 KiB and 1 MiB over shared memory, where two-shot, doubling and the
             * ring cross: a point at 256 KiB */
            int mid = 0;
            for (int k = 0; k < n; k++) mid |= pts[k] == ((size_t)256 << 10);
            if (shm || a == RCOLL_ALG_TWOSHOT)
                CHECK(mid, "%s over shared memory: no 256 KiB point", rcoll_alg_names[a]);
            n = rcoll_probe_points(a, (size_t)256 << 10, shm, pts);
            CHECK(n >= 2 && pts[n - 1] == ((size_t)256 << 10),
                  "%s, a slow link (cap 256 KiB): the last point is the cap", rcoll_alg_names[a]);
        }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "%s %s", getenv("KEEP") ? "echo" : "rm -rf", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
