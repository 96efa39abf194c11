/*
 * test_cma.c - the single-copy all-reduce over cross-memory attach (src/algo/cma.c) where the
 * collective matrix does not reach:
 *   - it runs: RCOLL_ALGO=cma on 2..4 ranks, sizes from one element to 4 MiB (the default
 *     64 KiB reads: many chunks), in place and out of place, sum and avg of float32 and max of
 *     int64, checked against a reference computed here; the log names cma for every call;
 *   - the cost model takes it for large vectors on one host (auto, 2 ranks, 8 MiB);
 *   - several nonblocking all-reduces outstanding at once (more than its 4 slots), of mixed
 *     sizes, waited in reverse order;
 *   - where the kernel refuses process_vm_readv to ONE rank (a seccomp filter, as container
 *     runtimes install), or one rank sets RCOLL_CMA=0, no rank uses it: every rank logs why,
 *     RCOLL_ALGO=cma falls back to the model, and the results are right.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mp.h"

static char logpath[256];

static void log_reset(void)
{
    FILE *f = fopen(logpath, "w");
    if (f) fclose(f);
}

/* Lines of the shared log containing all of a and b (b NULL: a only), and the ranks that
 * wrote them (bit mask).  The choice lines (" ALGO ") count only once their rank logged its
 * "INIT rank" line: the set-up collectives before it run before the host segment exists. */
static int log_count(const char *a, const char *b, unsigned *ranks)
{
    FILE *f = fopen(logpath, "r");
    char line[1200];
    int n = 0;
    unsigned ready = 0;
    *ranks = 0;
    while (f && fgets(line, sizeof(line), f)) {
        const char *br = strchr(line, '[');
        int r = -1;
        if (!br || sscanf(br, "[%d]", &r) != 1 || r < 0 || r >= 32) continue;
        const char *init = strstr(line, " INIT rank ");
        int r_of, n_of;
        if (init && sscanf(init, " INIT rank %d/%d on", &r_of, &n_of) == 2) ready |= 1u << r;
        if (strstr(line, " ALGO ") && !(ready & 1u << r)) continue;
        if (!strstr(line, a) || (b && !strstr(line, b))) continue;
        n++;
        *ranks |= 1u << r;
    }
    if (f) fclose(f);
    return n;
}

/* Element i of rank r's input: small integers, exact in float32 sums. */
static float in_f(int r, size_t i) { return (float)((int)((i * 7 + (size_t)r * 13) % 61) - 30); }
static int64_t in_l(int r, size_t i) { return (int64_t)((i * 2654435761u + (size_t)r * 97) % 100003); }

typedef struct {
    int inplace;
    int deny_rank;   /* -1, or the rank whose process_vm_readv the kernel refuses */
    int cma_off_rank;/* -1, or the rank with RCOLL_CMA=0 */
} run_arg_t;

static int check_f(const float *got, size_t count, int n, int avg, int rank, const char *what)
{
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < n; r++) want += in_f(r, i);
        if (avg) want /= n;
        if ((double)got[i] != (float)want) {
            fprintf(stderr, "rank %d: %s count %zu: element %zu is %g, expected %g\n", rank,
                    what, count, i, (double)got[i], want);
            return 1;
        }
    }
    return 0;
}

static const size_t counts[] = {1, 3, 17, 1000, 16385, 262144, 1048576};

static int sweep_fn(rcoll_comm_t comm, int rank, int n, void *arg)
{
    const run_arg_t *a = arg;
    int bad = 0;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t count = counts[k];
        float *s = malloc(count * sizeof(float)), *d = malloc(count * sizeof(float));
        int64_t *ls = malloc(count * sizeof(int64_t)), *ld = malloc(count * sizeof(int64_t));
        for (int avg = 0; avg <= 1; avg++) {
            for (size_t i = 0; i < count; i++) s[i] = in_f(rank, i), d[i] = -1;
            rcoll_status_t st = a->inplace
                ? rcoll_allreduce(RCOLL_IN_PLACE, s, count, RCOLL_FLOAT32,
                                  avg ? RCOLL_AVG : RCOLL_SUM, comm)
                : rcoll_allreduce(s, d, count, RCOLL_FLOAT32, avg ? RCOLL_AVG : RCOLL_SUM, comm);
            if (st != RCOLL_OK) {
                fprintf(stderr, "rank %d: allreduce: %s\n", rank, rcoll_comm_last_error(comm));
                return 1;
            }
            bad |= check_f(a->inplace ? s : d, count, n, avg, rank, avg ? "avg" : "sum");
            if (!a->inplace)
                for (size_t i = 0; i < count && !bad; i++)
                    if (s[i] != in_f(rank, i)) {
                        fprintf(stderr, "rank %d: send buffer changed at %zu\n", rank, i);
                        bad = 1;
                    }
        }
        for (size_t i = 0; i < count; i++) ls[i] = in_l(rank, i);
        if (rcoll_allreduce(ls, ld, count, RCOLL_INT64, RCOLL_MAX, comm) != RCOLL_OK) return 1;
        for (size_t i = 0; i < count && !bad; i++) {
            int64_t want = INT64_MIN;
            for (int r = 0; r < n; r++) want = in_l(r, i) > want ? in_l(r, i) : want;
            if (ld[i] != want) {
                fprintf(stderr, "rank %d: max count %zu: element %zu wrong\n", rank, count, i);
                bad = 1;
            }
        }
        free(s), free(d), free(ls), free(ld);
    }
    return bad;
}

/* More nonblocking all-reduces outstanding than the algorithm has slots, mixed sizes,
 * waited in reverse order. */
#define NOUT 7
static int outstanding_fn(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    float *buf[NOUT];
    size_t cnt[NOUT];
    rcoll_request_t req[NOUT];
    for (int k = 0; k < NOUT; k++) {
        cnt[k] = (size_t)(k % 3 == 0 ? 300000 : k % 3 == 1 ? 5000 : 70000) + (size_t)k;
        buf[k] = malloc(cnt[k] * sizeof(float));
        for (size_t i = 0; i < cnt[k]; i++) buf[k][i] = in_f(rank, i + (size_t)k);
        if (rcoll_iallreduce(RCOLL_IN_PLACE, buf[k], cnt[k], RCOLL_FLOAT32, RCOLL_SUM, comm,
                             &req[k]) != RCOLL_OK) {
            fprintf(stderr, "rank %d: iallreduce %d: %s\n", rank, k, rcoll_comm_last_error(comm));
            return 1;
        }
    }
    int bad = 0;
    for (int k = NOUT - 1; k >= 0; k--) {
        if (rcoll_wait(&req[k]) != RCOLL_OK) {
            fprintf(stderr, "rank %d: wait %d: %s\n", rank, k, rcoll_comm_last_error(comm));
            return 1;
        }
        for (size_t i = 0; i < cnt[k] && !bad; i++) {
            double want = 0;
            for (int r = 0; r < n; r++) want += in_f(r, i + (size_t)k);
            if (buf[k][i] != (float)want) {
                fprintf(stderr, "rank %d: outstanding %d: element %zu is %g, expected %g\n",
                        rank, k, i, (double)buf[k][i], want);
                bad = 1;
            }
        }
        free(buf[k]);
    }
    return bad;
}

/* The kernel refuses process_vm_readv to this process (EPERM), as a container's seccomp
 * profile does. */
static int deny_cma(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp");
        return -1;
    }
    return 0;
}

static int raw_fn(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    const run_arg_t *a = arg;
    if (rank == a->deny_rank && deny_cma() != 0) return 90;
    if (rank == a->cma_off_rank) setenv("RCOLL_CMA", "0", 1);
    rcoll_comm_t comm;
    if (rcoll_comm_init_rank(n, id, rank, &comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, rcoll_last_init_error());
        return 91;
    }
    int rc = sweep_fn(comm, rank, n, arg);
    rcoll_comm_destroy(comm);
    return rc;
}

static void run_forced(int n, int inplace)
{
    run_arg_t a = {inplace, -1, -1};
    log_reset();
    mp_result_t res;
    int bad = mp_run(n, sweep_fn, &a, 120, &res);
    CHECK(bad == 0, "RCOLL_ALGO=cma, %d ranks, %s: %d ranks failed", n,
          inplace ? "in place" : "out of place", bad);
    unsigned ranks, other_ranks;
    int lines = log_count(" ALGO all-reduce of ", ": cma (", &ranks);
    int others = log_count(" ALGO all-reduce of ", NULL, &other_ranks);
    /* each rank logs its first choice per size class (plus creation's small ones, which the
     * forced algorithm also takes: it applies to every size) */
    CHECK(lines > 0 && lines == others && ranks == (1u << n) - 1,
          "RCOLL_ALGO=cma, %d ranks: every choice line names cma (%d of %d lines, ranks %#x)",
          n, lines, others, ranks);
    CHECK(log_count("cross-memory attach: every rank reads every peer", NULL, &ranks) == n,
          "%d ranks: each logged that cross-memory attach is in use", n);
}

/* auto at 4 MiB: never cma on the formula alone (its cost where it runs is measured or it
 * is not chosen, the 2-3x regression of an unmeasured choice); with the probe, cma is
 * measured on every rank and the choice at 4 MiB follows the measured curves (the unit test
 * test_select checks the comparison itself). */
static void run_auto_large(void)
{
    unsetenv("RCOLL_ALGO");
    setenv("RCOLL_TUNING_PROBE", "0", 1);
    log_reset();
    run_arg_t a = {0, -1, -1};
    mp_result_t res;
    int bad = mp_run(2, sweep_fn, &a, 120, &res);
    unsigned ranks;
    CHECK(bad == 0, "auto without the probe, 2 ranks: %d ranks failed", bad);
    CHECK(log_count(" ALGO all-reduce of 4194304 B on 2 ranks: ", NULL, &ranks) == 2 &&
              log_count(" ALGO all-reduce of 4194304 B on 2 ranks: cma (", NULL, &ranks) == 0,
          "auto without the probe: both ranks chose for 4 MiB, neither cma (unmeasured)");
    unsetenv("RCOLL_TUNING_PROBE");
    log_reset();
    bad = mp_run(2, sweep_fn, &a, 120, &res);
    CHECK(bad == 0, "auto with the probe, 2 ranks: %d ranks failed", bad);
    CHECK(log_count("tuning probe, measured: ", "cma: 4096 B ", &ranks) >= 2 && ranks == 3,
          "auto with the probe: every rank measured cma (ranks %#x)", ranks);
    setenv("RCOLL_ALGO", "cma", 1);
}

static void run_outstanding(int n)
{
    log_reset();
    mp_result_t res;
    int bad = mp_run(n, outstanding_fn, NULL, 120, &res);
    CHECK(bad == 0, "%d nonblocking cma all-reduces outstanding, %d ranks, waited in reverse "
          "order: %d ranks failed", NOUT, n, bad);
}

static void run_refused(int n, int deny_rank, int off_rank)
{
    run_arg_t a = {0, deny_rank, off_rank};
    log_reset();
    mp_result_t res;
    int bad = mp_run_raw(n, raw_fn, &a, 120, &res);
    const char *what = deny_rank >= 0 ? "process_vm_readv refused to" : "RCOLL_CMA=0 on";
    int who = deny_rank >= 0 ? deny_rank : off_rank;
    CHECK(bad == 0, "%s rank %d of %d: every result right (%d ranks failed)", what, who, n,
          bad);
    unsigned ranks, used_ranks, all;
    int used = log_count(" ALGO all-reduce of ", ": cma (", &used_ranks);
    CHECK(used == 0, "%s rank %d of %d: no rank ran cma (%d lines, ranks %#x)", what, who, n,
          used, used_ranks);
    int why = log_count("cross-memory attach not used: ", NULL, &all);
    CHECK(why == n && all == (1u << n) - 1, "%s rank %d of %d: every rank logged why cma is "
          "not used (%d lines)", what, who, n, why);
    if (deny_rank >= 0) {
        int own = log_count("cross-memory attach not used: process_vm_readv of rank",
                            "Operation not permitted", &ranks);
        CHECK(own == 1 && ranks == 1u << deny_rank, "the refused rank %d names the failing "
              "read and EPERM (%d lines, ranks %#x)", deny_rank, own, ranks);
    } else {
        CHECK(log_count("cross-memory attach not used: RCOLL_CMA=0", NULL, &ranks) == 1 &&
                  ranks == 1u << off_rank,
              "rank %d names RCOLL_CMA=0 (ranks %#x)", off_rank, ranks);
    }
}

int main(void)
{
    snprintf(logpath, sizeof(logpath), "%s/rcoll_test_cma.%d.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    setenv("RCOLL_DEBUG", "INFO", 1);
    setenv("RCOLL_DEBUG_SUBSYS", "INIT,ALGO", 1);
    setenv("RCOLL_DEBUG_FILE", logpath, 1);
    setenv("RCOLL_TIMEOUT", "30", 0);
    setenv("RCOLL_ALGO", "cma", 1);
    for (int n = 2; n <= 4; n++) run_forced(n, n == 3);
    run_forced(2, 1);
    run_auto_large();
    run_outstanding(2);
    run_outstanding(3);
    run_refused(3, 1, -1);
    run_refused(2, 0, -1);
    run_refused(3, -1, 2);
    unlink(logpath);
    return check_summary();
}
