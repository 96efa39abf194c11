/*
 * perf_common.c - the nccl-tests-compatible harness behind every *_perf binary in bench/.
 * It creates the communicator, sweeps sizes, times and checks each operation, prints the
 * nccl-tests table and footer, and writes JSON and memory reports.  It knows a collective only
 * through its perf_coll_t and uses the public rcoll API only.  Flags are parsed in perf_opts.c;
 * inputs and expected results come from perf_data.c, never from the library under test.
 */
#include "bench_json.h"
#include "perf_common.h"
#include "perf_opts.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifdef PERF_WITH_MPI /* built with MPI: under mpirun the communicator comes from MPI */
#include <mpi.h>
#include "rcoll_mpi.h"
#endif

/* Everything one run needs; one per process, passed down explicitly. */
typedef struct {
    const perf_coll_t *coll;
    perf_opts_t opt;
    rcoll_comm_t comm;
    int rank, nranks;
    char *sendbuf, *recvbuf, *expbuf; /* recvbuf doubles as the in-place buffer */
    /* What the collective is given: sendbuf and recvbuf themselves with --memtype host, their
     * CUDA copies otherwise (inputs are made in sendbuf/recvbuf and copied in, results copied
     * back to recvbuf before they are checked). */
    char *run_send, *run_recv;
    size_t user_bytes, device_bytes;
    int device; /* CUDA device ordinal of this rank, -1 with host memory */
    char dev_name[64], dev_bus[16];
    rcoll_request_t *reqs;
    FILE *json;
    int json_rows;
    double bw_sum;
    long bw_count;
    int64_t wrong_total;
    char *memlog; /* -M per-operation lines, printed after the table */
    size_t memlog_len;
} perf_ctx_t;

/* ---------------------------------------------------------------------------------------------
 * Watchdog (-T), failures and small collective helpers
 * ------------------------------------------------------------------------------------------ */

static char watchdog_msg[200];
static size_t watchdog_len;

static void watchdog_fire(int sig)
{
    (void)sig;
    ssize_t n = write(STDERR_FILENO, watchdog_msg, watchdog_len);
    (void)n;
    _exit(PERF_EXIT_TIMEOUT);
}

static void watchdog_setup(int seconds)
{
    if (seconds <= 0)
        return;
    snprintf(watchdog_msg, sizeof(watchdog_msg),
             "%s: timeout: no progress within -T %d s (init or one row); aborting\n",
             perf_prog_name, seconds);
    watchdog_len = strlen(watchdog_msg);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = watchdog_fire;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)seconds);
}

static void watchdog_rearm(const perf_ctx_t *c)
{
    if (c->opt.timeout > 0)
        alarm((unsigned)c->opt.timeout);
}

/* A library call failed: report it with the communicator's detail, abandon, exit 3. */
static void lib_fail(perf_ctx_t *c, const char *call, rcoll_status_t st)
{
    char detail[512];
    snprintf(detail, sizeof(detail), "%s", c->comm ? rcoll_comm_last_error(c->comm) : "");
    fprintf(stderr, "%s: rank %d: %s failed: %s%s%s\n", perf_prog_name, c->rank, call,
            rcoll_status_string(st), detail[0] ? ": " : "", detail);
    fflush(stdout);
    if (c->json)
        fclose(c->json);
    rcoll_comm_abort(c->comm);
    exit(PERF_EXIT_LIBRARY);
}

static void lib_check(perf_ctx_t *c, const char *call, rcoll_status_t st)
{
    if (RCOLL_IS_ERR(st))
        lib_fail(c, call, st);
}

/* A CUDA call of the harness (rcoll_cuda_*) failed: report its sentence, abandon, exit 2. */
static void cuda_check(perf_ctx_t *c, const char *call, rcoll_status_t st)
{
    if (!RCOLL_IS_ERR(st))
        return;
    fprintf(stderr, "%s: rank %d: %s failed: %s: %s\n", perf_prog_name, c->rank, call,
            rcoll_status_string(st), rcoll_cuda_last_error());
    fflush(stdout);
    if (c->json)
        fclose(c->json);
    rcoll_comm_abort(c->comm);
    exit(PERF_EXIT_CUDA);
}

/* 1 when `bad` is nonzero on any rank, so that all ranks leave together. */
static int any_rank(perf_ctx_t *c, int bad)
{
    int32_t v = bad ? 1 : 0;
    lib_check(c, "rcoll_allreduce(agreement)",
              rcoll_allreduce(RCOLL_IN_PLACE, &v, 1, RCOLL_INT32, RCOLL_MAX, c->comm));
    return v != 0;
}

static void leave(perf_ctx_t *c, int code)
{
    if (c->json)
        fclose(c->json);
    rcoll_comm_destroy(c->comm);
    exit(code);
}

/* The value the library will see (--algo/--transport were exported before init). */
static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? v : dflt;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void memlog_add(perf_ctx_t *c, const char *line)
{
    size_t n = strlen(line);
    char *p = realloc(c->memlog, c->memlog_len + n + 1);
    if (p == NULL)
        return; /* the report is best effort */
    memcpy(p + c->memlog_len, line, n + 1);
    c->memlog = p;
    c->memlog_len += n;
}

static void fmt_mem(char *out, size_t len, double bytes)
{
    const char *unit = "B";
    double mag = fabs(bytes);
    if (mag >= 1073741824.0) { bytes /= 1073741824.0; unit = "GB"; }
    else if (mag >= 1048576.0) { bytes /= 1048576.0; unit = "MB"; }
    else if (mag >= 1024.0) { bytes /= 1024.0; unit = "KB"; }
    int dec = unit[0] == 'B' ? 0 : fabs(bytes) < 10 ? 2 : fabs(bytes) < 100 ? 1 : 0;
    snprintf(out, len, "%.*f %s", dec, bytes, unit);
}

static size_t mem_usage(perf_ctx_t *c)
{
    size_t b = 0;
    lib_check(c, "rcoll_comm_mem_usage", rcoll_comm_mem_usage(c->comm, &b));
    return b;
}

/* ---------------------------------------------------------------------------------------------
 * JSON (rank 0 only; written as the run goes)
 * ------------------------------------------------------------------------------------------ */

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6f", v);
    else
        fputs("null", f);
}

static void json_open(perf_ctx_t *c, int argc, char **argv)
{
    int bad = 0;
    if (c->rank == 0 && c->opt.json_path) {
        c->json = fopen(c->opt.json_path, "w");
        if (c->json == NULL) {
            fprintf(stderr, "%s: cannot write JSON output to %s: %s\n", perf_prog_name,
                    c->opt.json_path, strerror(errno));
            bad = 1;
        }
    }
    if (any_rank(c, bad))
        leave(c, PERF_EXIT_USAGE);
    if (c->json == NULL)
        return;
    FILE *f = c->json;
    const perf_opts_t *o = &c->opt;
    char when[64];
    time_t t = time(NULL);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
    int v = rcoll_version();
    fprintf(f, "{\"version\":1,\"program\":");
    bench_json_str(f, c->coll->name);
    fprintf(f, ",\"rcoll_version\":\"%d.%d.%d\",\"start_time\":", v / 10000, v / 100 % 100,
            v % 100);
    bench_json_str(f, when);
    fprintf(f, ",\"args\":[");
    for (int i = 0; i < argc; i++) {
        if (i)
            fputc(',', f);
        bench_json_str(f, argv[i]);
    }
    fprintf(f, "],\"config\":{\"nthreads\":%d,\"ngpus\":%d,\"nranks\":%d,"
            "\"minimum_bytes\":%zu,\"maximum_bytes\":%zu,", o->nthreads, o->ngpus, c->nranks,
            o->min_bytes, o->max_bytes);
    if (o->step_factor > 1)
        fprintf(f, "\"step_factor\":%ld,", o->step_factor);
    else
        fprintf(f, "\"step_bytes\":%zu,", o->step_bytes);
    fprintf(f, "\"warmup_iters\":%d,\"iterations\":%d,\"aggregated_iterations\":%d,"
            "\"validation\":%d,\"blocking\":%d,\"average\":%d,\"memory\":\"host\",\"algo\":",
            o->warmup, o->iters, o->agg, o->check, o->blocking, o->average);
    bench_json_str(f, env_or("RCOLL_ALGO", "auto"));
    fprintf(f, ",\"transport\":");
    bench_json_str(f, env_or("RCOLL_TRANSPORT", "auto"));
    fprintf(f, "},\"devices\":[");
}

static void json_column(FILE *f, const char *key, double us, double algbw, double busbw,
                        int64_t wrong)
{
    fprintf(f, ",\"%s\":{\"time_us\":", key);
    json_num(f, us);
    fprintf(f, ",\"algbw\":");
    json_num(f, algbw);
    fprintf(f, ",\"busbw\":");
    json_num(f, busbw);
    if (wrong < 0)
        fprintf(f, ",\"wrong\":null}");
    else
        fprintf(f, ",\"wrong\":%" PRId64 "}", wrong);
}

/* ---------------------------------------------------------------------------------------------
 * Preamble: configuration and one line per rank
 * ------------------------------------------------------------------------------------------ */

/* Bytes per rank: int32 pid, int32 device, host name (120), bus id (16), device name (64). */
#define RANK_RECORD 256
#define REC_HOST 8
#define REC_BUS 128
#define REC_NAME 144

static void print_preamble(perf_ctx_t *c)
{
    const perf_opts_t *o = &c->opt;
    size_t total = (size_t)c->nranks * RANK_RECORD;
    uint8_t *rec = calloc(total, 1);

    if (any_rank(c, rec == NULL)) {
        if (c->rank == 0)
            fprintf(stderr, "%s: out of memory for the device report\n", perf_prog_name);
        leave(c, PERF_EXIT_INTERNAL);
    }
    /* Every rank fills its own slot of a zeroed buffer; a SUM all-reduce gathers them. */
    uint8_t *mine = rec + (size_t)c->rank * RANK_RECORD;
    int32_t pid = (int32_t)getpid(), dev = c->device;
    memcpy(mine, &pid, sizeof(pid));
    memcpy(mine + 4, &dev, sizeof(dev));
    if (gethostname((char *)mine + REC_HOST, REC_BUS - REC_HOST - 1) != 0)
        strcpy((char *)mine + REC_HOST, "unknown");
    mine[REC_BUS - 1] = 0;
    snprintf((char *)mine + REC_BUS, REC_NAME - REC_BUS, "%s", c->dev_bus);
    snprintf((char *)mine + REC_NAME, RANK_RECORD - REC_NAME, "%s", c->dev_name);
    lib_check(c, "rcoll_allreduce(device report)",
              rcoll_allreduce(RCOLL_IN_PLACE, rec, total, RCOLL_UINT8, RCOLL_SUM, c->comm));

    if (c->rank == 0) {
        int v = rcoll_version();
        printf("# nccl-tests-compatible rcoll version %d.%d.%d rcoll-headers=%d "
               "rcoll-library=%d\n", v / 10000, v / 100 % 100, v % 100, RCOLL_VERSION_CODE, v);
        printf("# Collective test starting: %s\n", c->coll->name);
        printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
               "iters: %d agg iters: %d validation: %d graph: 0\n", o->nthreads, o->ngpus,
               o->min_bytes, o->max_bytes,
               o->step_factor > 1 ? (size_t)o->step_factor : o->step_bytes,
               o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg, o->check);
        if (o->blocking == 1)
            printf("# Blocking Enabled: wait for completion and barrier after each collective\n");
        else if (o->blocking > 1)
            printf("# Blocking Enabled: wait for completion after each collective (no barrier)\n");
        static const char *const mem_names[] = {"host", "cuda", "managed"};
        printf("# rcoll: %d ranks, memory %s, algo %s, transport %s\n", c->nranks,
               mem_names[o->memtype], env_or("RCOLL_ALGO", "auto"),
               env_or("RCOLL_TRANSPORT", "auto"));
        printf("#\n# Using devices\n");
        for (int r = 0; r < c->nranks; r++) {
            const uint8_t *p = rec + (size_t)r * RANK_RECORD;
            int32_t rpid, rdev;
            memcpy(&rpid, p, sizeof(rpid));
            memcpy(&rdev, p + 4, sizeof(rdev));
            const char *host = (const char *)p + REC_HOST;
            const char *bus = rdev < 0 ? "host" : (const char *)p + REC_BUS;
            const char *name = rdev < 0 ? "host-memory" : (const char *)p + REC_NAME;
            printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", r, 0,
                   (int)rpid, host, (int)rdev, bus, name);
            if (c->json) {
                fprintf(c->json, "%s{\"rank\":%d,\"pid\":%d,\"hostname\":", r ? "," : "", r,
                        (int)rpid);
                bench_json_str(c->json, host);
                fprintf(c->json, ",\"device\":");
                bench_json_str(c->json, name);
                if (rdev >= 0) {
                    fprintf(c->json, ",\"cuda_device\":%d,\"bus_id\":", (int)rdev);
                    bench_json_str(c->json, bus);
                }
                fprintf(c->json, "}");
            }
        }
        if (c->json)
            fprintf(c->json, "],\"results\":[");
    }
    free(rec);
}

static void print_header(void)
{
    /* Same columns as the rows: the five row labels, then time/algbw/busbw/#wrong twice. */
    printf("#\n");
    printf("# %10s  %12s  %8s  %6s  %6s  %9s%-12s%23s%s\n", "", "", "", "", "", "",
           "out-of-place", "", "in-place");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
           "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)");
}

/* ---------------------------------------------------------------------------------------------
 * Running, timing and checking
 * ------------------------------------------------------------------------------------------ */

/* Issue `n` operations in the configured mode and wait for all of them. */
static void run_ops(perf_ctx_t *c, const perf_op_t *o, const void *sb, void *rb, int n)
{
    const perf_coll_t *coll = c->coll;

    if (c->opt.blocking != 0 || coll->start == NULL) {
        for (int a = 0; a < n; a++) {
            lib_check(c, "the benchmarked collective", coll->run(o, sb, rb));
            if (c->opt.blocking == 1)
                lib_check(c, "rcoll_barrier", rcoll_barrier(c->comm));
        }
        return;
    }
    for (int a = 0; a < n; a++)
        lib_check(c, "the benchmarked collective (nonblocking start)",
                  coll->start(o, sb, rb, &c->reqs[a]));
    for (int a = 0; a < n; a++)
        lib_check(c, "rcoll_wait", rcoll_wait(&c->reqs[a]));
}

/* The send and receive pointers of one column (see perf_coll_t for the in-place layout):
 * run 1 those the collective gets, run 0 their host side (the same with host memory). */
static void column_bufs(perf_ctx_t *c, const perf_op_t *o, int run, char **sb, char **rb)
{
    size_t ts = perf_dtype_size(o->dtype);
    char *send = run ? c->run_send : c->sendbuf, *recv = run ? c->run_recv : c->recvbuf;
    if (o->in_place) {
        *sb = recv + o->sz.send_inplace_off * ts;
        *rb = recv + o->sz.recv_inplace_off * ts;
    } else {
        *sb = send;
        *rb = recv;
    }
}

/* Bytes of the receive (in place: the one) buffer a column uses. */
static size_t column_recv_bytes(const perf_op_t *o)
{
    size_t big = o->sz.send_count > o->sz.recv_count ? o->sz.send_count : o->sz.recv_count;
    return (o->in_place ? big : o->sz.recv_count) * perf_dtype_size(o->dtype);
}

/* Fill this rank's input; poison the output first so unwritten elements are caught.  With
 * CUDA memory both are made on the host and copied to the device buffers. */
static void prepare(perf_ctx_t *c, const perf_op_t *o, int poison)
{
    char *sb, *rb;
    column_bufs(c, o, 0, &sb, &rb);
    if (poison)
        memset(c->recvbuf, 0xa5, column_recv_bytes(o));
    c->coll->fill(o, sb, rb);
    if (c->run_recv == c->recvbuf)
        return;
    if (!o->in_place)
        cuda_check(c, "rcoll_cuda_memcpy(inputs to the device)",
                   rcoll_cuda_memcpy(c->run_send, c->sendbuf,
                                     o->sz.send_count * perf_dtype_size(o->dtype)));
    cuda_check(c, "rcoll_cuda_memcpy(inputs to the device)",
               rcoll_cuda_memcpy(c->run_recv, c->recvbuf, column_recv_bytes(o)));
}

static double combine_time(perf_ctx_t *c, double t)
{
    switch (c->opt.average) {
    case 0:
        lib_check(c, "rcoll_bcast(time)", rcoll_bcast(&t, 1, RCOLL_FLOAT64, 0, c->comm));
        return t;
    case 2:
        lib_check(c, "rcoll_allreduce(time)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &t, 1, RCOLL_FLOAT64, RCOLL_MIN, c->comm));
        return t;
    case 3:
        lib_check(c, "rcoll_allreduce(time)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &t, 1, RCOLL_FLOAT64, RCOLL_MAX, c->comm));
        return t;
    default:
        lib_check(c, "rcoll_allreduce(time)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &t, 1, RCOLL_FLOAT64, RCOLL_SUM, c->comm));
        return t / c->nranks;
    }
}

/* Microseconds per operation, combined over ranks per -a. */
static double time_column(perf_ctx_t *c, const perf_op_t *o)
{
    char *sb, *rb;
    column_bufs(c, o, 1, &sb, &rb);
    prepare(c, o, 0);
    for (int w = 0; w < c->opt.warmup; w++)
        run_ops(c, o, sb, rb, c->opt.agg);
    lib_check(c, "rcoll_barrier", rcoll_barrier(c->comm));
    double t0 = now_s();
    for (int it = 0; it < c->opt.iters; it++)
        run_ops(c, o, sb, rb, c->opt.agg);
    double us = (now_s() - t0) * 1e6 / ((double)c->opt.iters * c->opt.agg);
    return combine_time(c, us);
}

/* Wrong elements summed over ranks (stops at the first check iteration that finds any). */
static int64_t check_column(perf_ctx_t *c, const perf_op_t *o)
{
    int64_t wrong = 0;
    char *sb, *rb, *host_sb, *host_rb;
    column_bufs(c, o, 1, &sb, &rb);
    column_bufs(c, o, 0, &host_sb, &host_rb);
    for (int k = 0; k < c->opt.check && wrong == 0; k++) {
        prepare(c, o, 1);
        run_ops(c, o, sb, rb, 1);
        if (c->run_recv != c->recvbuf)
            cuda_check(c, "rcoll_cuda_memcpy(results from the device)",
                       rcoll_cuda_memcpy(c->recvbuf, c->run_recv, column_recv_bytes(o)));
        size_t n = c->coll->expect(o, c->expbuf);
        wrong = (int64_t)perf_count_wrong(host_rb, c->expbuf, n, o->dtype, o->op);
        lib_check(c, "rcoll_allreduce(#wrong)",
                  rcoll_allreduce(RCOLL_IN_PLACE, &wrong, 1, RCOLL_INT64, RCOLL_SUM, c->comm));
    }
    return wrong;
}

/* nccl-tests' number style: the most decimals (2, 1, 0) that fit the width, else exponent. */
static void fmt_fit(char *out, size_t len, double v, int width)
{
    for (int dec = 2; dec >= 0; dec--) {
        int n = snprintf(out, len, "%*.*f", width, dec, v);
        if (n >= 0 && n <= width)
            return;
    }
    snprintf(out, len, "%*.*e", width, width >= 7 ? 1 : 0, v);
}

static void print_column(double us, double algbw, double busbw, int64_t wrong)
{
    char t[32], a[32], b[32], w[32];
    fmt_fit(t, sizeof(t), us, 7);
    fmt_fit(a, sizeof(a), algbw, 6);
    fmt_fit(b, sizeof(b), busbw, 6);
    if (wrong < 0)
        snprintf(w, sizeof(w), "%6s", "N/A");
    else
        snprintf(w, sizeof(w), "%6" PRId64, wrong);
    printf("  %7s  %6s  %6s  %6s", t, a, b, w);
}

double perf_bus_factor_one(int nranks)
{
    (void)nranks;
    return 1.0;
}

double perf_bus_factor_ring(int nranks)
{
    return nranks > 0 ? (double)(nranks - 1) / (double)nranks : 0.0;
}

/* A column that is not run (PERF_IN_PLACE_NONE): N/A in the table, nulls in JSON. */
static void print_column_na(perf_ctx_t *c, const char *key)
{
    printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    if (c->json)
        json_column(c->json, key, NAN, NAN, NAN, -1);
}

static void run_row(perf_ctx_t *c, perf_op_t *o, size_t bytes)
{
    const perf_coll_t *coll = c->coll;
    size_t ts = perf_dtype_size(o->dtype);
    coll->sizes(bytes / ts, c->nranks, c->rank, &o->sz);
    size_t elems = o->sz.send_count > o->sz.recv_count ? o->sz.send_count : o->sz.recv_count;
    size_t row_bytes = elems * ts;
    int shown_root = coll->rooted ? o->root : -1;
    const char *opname = coll->reducing ? perf_op_name(o->op) : "none";

    watchdog_rearm(c);
    if (c->rank == 0) {
        /* As nccl-tests: size is the larger buffer, count the call's count argument. */
        printf("%12zu  %12zu  %8s  %6s  %6d", row_bytes, o->sz.param_count,
               perf_dtype_name(o->dtype), opname, shown_root);
        fflush(stdout);
        if (c->json) {
            fprintf(c->json, "%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\","
                    "\"root\":%d", c->json_rows++ ? "," : "", row_bytes, o->sz.param_count,
                    perf_dtype_name(o->dtype), opname, shown_root);
        }
    }
    for (int ip = 0; ip < 2; ip++) {
        const char *key = ip ? "in_place" : "out_of_place";
        o->in_place = ip;
        if (ip && coll->in_place == PERF_IN_PLACE_NONE) {
            if (c->rank == 0)
                print_column_na(c, key);
            continue;
        }
        double us = time_column(c, o);
        int checked = c->opt.check > 0 && !(ip && coll->in_place == PERF_IN_PLACE_UNCHECKED);
        int64_t wrong = checked ? check_column(c, o) : -1;
        double algbw = us > 0 ? (double)row_bytes / (us * 1e3) : 0.0;
        double busbw = algbw * coll->bus_factor(c->nranks);
        if (wrong > 0)
            c->wrong_total += wrong;
        if (c->rank == 0) {
            print_column(us, algbw, busbw, wrong);
            fflush(stdout);
            if (c->json)
                json_column(c->json, key, us, algbw, busbw, wrong);
        }
        c->bw_sum += busbw;
        c->bw_count++;
    }
    if (c->rank == 0) {
        printf("\n");
        fflush(stdout);
        if (c->json)
            fprintf(c->json, "}");
    }
}

static size_t next_size(const perf_opts_t *o, size_t s)
{
    if (o->step_factor > 1) {
        if (s == 0)
            return 1; /* a factor never leaves 0 */
        return s > SIZE_MAX / (size_t)o->step_factor ? SIZE_MAX : s * (size_t)o->step_factor;
    }
    return s > SIZE_MAX - o->step_bytes ? SIZE_MAX : s + o->step_bytes;
}

/* One sweep over sizes for one (datatype, op, root). */
static void run_sweep(perf_ctx_t *c, perf_op_t *o)
{
    size_t before = 0;
    if (c->opt.mem_report)
        before = mem_usage(c);
    int first = 1;
    for (size_t s = c->opt.min_bytes; s <= c->opt.max_bytes;) {
        run_row(c, o, s);
        if (first && c->opt.mem_report) {
            size_t after = mem_usage(c);
            char line[256], d[32], t[32];
            fmt_mem(d, sizeof(d), (double)after - (double)before);
            fmt_mem(t, sizeof(t), (double)after);
            snprintf(line, sizeof(line), "# Memory per operation : %s %s root %d: first size "
                     "%s, library now %s\n", perf_dtype_name(o->dtype),
                     c->coll->reducing ? perf_op_name(o->op) : "none",
                     c->coll->rooted ? o->root : -1, d, t);
            memlog_add(c, line);
            first = 0;
        }
        size_t n = next_size(&c->opt, s);
        if (n <= s)
            break;
        s = n;
    }
    if (c->opt.mem_report) {
        char line[320], d[32], st[32], sg[32], hs[32], gp[32];
        fmt_mem(d, sizeof(d), (double)mem_usage(c) - (double)before);
        snprintf(line, sizeof(line), "#                        after the sweep: %s\n", d);
        memlog_add(c, line);
        rcoll_mem_stats_t m;
        lib_check(c, "rcoll_comm_mem_stats", rcoll_comm_mem_stats(c->comm, &m, sizeof(m)));
        fmt_mem(st, sizeof(st), (double)m.state);
        fmt_mem(sg, sizeof(sg), (double)m.staging);
        fmt_mem(hs, sizeof(hs), (double)m.host_segment);
        fmt_mem(gp, sizeof(gp), (double)m.gpu_staging);
        snprintf(line, sizeof(line), "#                        by part: state %s, staging %s, "
                 "host segment %s, GPU staging %s; %d connections to %d of %d peers\n", st, sg,
                 hs, gp, m.connections, m.peers, c->nranks - 1);
        memlog_add(c, line);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Setup and main
 * ------------------------------------------------------------------------------------------ */

#ifdef PERF_WITH_MPI
/* Started by mpirun (or another MPI launcher) without rcoll's own launch variables: one rank
 * per process, as nccl-tests' MPI build runs.  MPI_Init, then rcoll_comm_init_mpi over
 * MPI_COMM_WORLD (no rendezvous address needed); MPI_Finalize at exit.  RCOLL_PMIX=on asks
 * for the library's own PMIx launch (rcoll_comm_init_env) instead. */
static int mpi_launched(void)
{
    const char *pmix = getenv("RCOLL_PMIX");
    return (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE")) &&
           !getenv("RCOLL_RANK") && !getenv("RCOLL_NRANKS") && !getenv("RCOLL_ROOT") &&
           !(pmix && !strcasecmp(pmix, "on"));
}

static void mpi_fini(void)
{
    int done = 1;
    if (MPI_Finalized(&done) == MPI_SUCCESS && !done) MPI_Finalize();
}
#endif

/* A launcher's environment that rcoll_comm_init_env reads: rcoll's own, torchrun's, mpirun's
 * with RCOLL_ROOT, srun's of several tasks (RCOLL_ROOT needed without PMIx), or a PMIx
 * server's (the library takes rank, size and the
 * bootstrap id from PMIx when it was built with it, and says so when not). */
static int env_launched(void)
{
    return getenv("RCOLL_NRANKS") || getenv("RCOLL_RANK") || getenv("WORLD_SIZE") ||
           (getenv("OMPI_COMM_WORLD_SIZE") && getenv("RCOLL_ROOT")) || getenv("PMIX_RANK") ||
           (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS") && atoi(getenv("SLURM_NTASKS")) > 1);
}

static int env_rank_hint(void)
{
    const char *names[] = {"RCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        if (v)
            return atoi(v);
    }
    return 0;
}

/* --memtype cuda/managed under a launcher that names the local rank: that rank's GPU made
 * current before the communicator exists (as NCCL expects it), so that rcoll picks the
 * network device nearest to it.  Failures are left to device_setup, which checks the device
 * again once the communicator says which ranks share the host. */
static void early_device(const perf_ctx_t *c)
{
    const char *names[] = {"RCOLL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "MPI_LOCALRANKID", "SLURM_LOCALID"};
    const char *v = NULL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !v; i++) v = getenv(names[i]);
    int count = 0, dev = v ? atoi(v) / c->opt.ranks_per_gpu : -1;
    if (c->opt.memtype == PERF_MEM_HOST || dev < 0 || rcoll_cuda_device_count(&count) != RCOLL_OK ||
        dev >= count)
        return;
    (void)rcoll_cuda_set_device(dev);
}

static void comm_create(perf_ctx_t *c)
{
    rcoll_status_t st;
    const char *how;

    early_device(c);
    if (c->opt.algo && setenv("RCOLL_ALGO", c->opt.algo, 1) != 0)
        perf_usage_fail(PERF_EXIT_INTERNAL, "%s: setenv failed%s", "--algo", "");
    if (c->opt.transport && setenv("RCOLL_TRANSPORT", c->opt.transport, 1) != 0)
        perf_usage_fail(PERF_EXIT_INTERNAL, "%s: setenv failed%s", "--transport", "");
#ifdef PERF_WITH_MPI
    if (mpi_launched()) {
        how = "rcoll_comm_init_mpi";
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
            fprintf(stderr, "%s: MPI_Init failed\n", perf_prog_name);
            exit(PERF_EXIT_LIBRARY);
        }
        atexit(mpi_fini);
        st = rcoll_comm_init_mpi(MPI_COMM_WORLD, &c->comm);
        if (RCOLL_IS_ERR(st)) {
            fprintf(stderr, "%s: %s failed: %s: %s\n", perf_prog_name, how,
                    rcoll_status_string(st), rcoll_mpi_last_error());
            exit(PERF_EXIT_LIBRARY);
        }
    } else
#endif
    if (env_launched()) {
        how = "rcoll_comm_init_env";
        st = rcoll_comm_init_env(&c->comm);
    } else {
        rcoll_unique_id_t id;
        how = "rcoll_get_unique_id";
        st = rcoll_get_unique_id(&id);
        if (st == RCOLL_OK) {
            how = "rcoll_comm_init_rank";
            st = rcoll_comm_init_rank(1, &id, 0, &c->comm);
        }
    }
    if (RCOLL_IS_ERR(st)) {
        const char *why = rcoll_last_init_error();
        fprintf(stderr, "%s: %s failed: %s%s%s\n", perf_prog_name, how, rcoll_status_string(st),
                why && why[0] ? ": " : "", why ? why : "");
        exit(PERF_EXIT_LIBRARY);
    }
    lib_check(c, "rcoll_comm_rank", rcoll_comm_rank(c->comm, &c->rank));
    lib_check(c, "rcoll_comm_size", rcoll_comm_size(c->comm, &c->nranks));
}

/* Buffers for the largest row of any selected datatype; every rank agrees before going on. */
static void buffers_alloc(perf_ctx_t *c)
{
    size_t send = 0, recv = 0, big = 0;
    for (int i = 0; i < c->opt.ndtypes; i++) {
        size_t ts = perf_dtype_size(c->opt.dtypes[i]);
        perf_sizes_t sz;
        c->coll->sizes(c->opt.max_bytes / ts, c->nranks, c->rank, &sz);
        size_t s = sz.send_count * ts, r = sz.recv_count * ts;
        send = s > send ? s : send;
        recv = r > recv ? r : recv;
        big = (s > r ? s : r) > big ? (s > r ? s : r) : big;
    }
    /* At least one cache line each so pointers are never NULL, even for 0-byte rows. */
    send += 64;
    big += 64;
    recv += 64;
    void *sb = NULL, *rb = NULL, *eb = NULL;
    int bad = posix_memalign(&sb, 4096, send) != 0 || posix_memalign(&rb, 4096, big) != 0 ||
              posix_memalign(&eb, 4096, recv) != 0;
    c->reqs = calloc((size_t)c->opt.agg, sizeof(*c->reqs));
    bad |= c->reqs == NULL;
    if (bad)
        fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes of buffers for -e %zu\n",
                perf_prog_name, c->rank, send + big + recv, c->opt.max_bytes);
    if (any_rank(c, bad))
        leave(c, PERF_EXIT_INTERNAL);
    memset(sb, 0, send); /* touch every page now, not inside a timed loop */
    memset(rb, 0, big);
    memset(eb, 0, recv);
    c->sendbuf = sb;
    c->recvbuf = rb;
    c->expbuf = eb;
    c->user_bytes = send + big + recv;
    c->run_send = sb;
    c->run_recv = rb;
    if (c->opt.memtype == PERF_MEM_HOST)
        return;
    /* The collective's buffers on the device; sendbuf/recvbuf stay as their host side. */
    void *ds = NULL, *dr = NULL;
    rcoll_status_t (*alloc)(void **, size_t) =
        c->opt.memtype == PERF_MEM_MANAGED ? rcoll_cuda_alloc_managed : rcoll_cuda_alloc;
    rcoll_status_t st = alloc(&ds, send);
    if (st == RCOLL_OK)
        st = alloc(&dr, big);
    if (st == RCOLL_OK)
        st = rcoll_cuda_memcpy(dr, rb, big); /* zeroed, as the host buffers */
    if (st == RCOLL_OK)
        st = rcoll_cuda_memcpy(ds, sb, send);
    if (st != RCOLL_OK)
        fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes of CUDA buffers for -e %zu on "
                "device %d: %s\n", perf_prog_name, c->rank, send + big, c->opt.max_bytes,
                c->device, rcoll_cuda_last_error());
    c->run_send = ds;
    c->run_recv = dr;
    if (any_rank(c, st != RCOLL_OK))
        leave(c, PERF_EXIT_CUDA);
    c->device_bytes = send + big;
}

/* --memtype cuda/managed: one CUDA device per local rank (--ranks-per-gpu local ranks share
 * one), made current in this thread before any buffer is allocated.  Local rank: the ranks
 * before this one on its host (rcoll_comm_host), so it holds under any launcher. */
static void device_setup(perf_ctx_t *c)
{
    c->device = -1;
    if (c->opt.memtype == PERF_MEM_HOST)
        return;
    int host = 0, nhosts = 0, local = 0, count = 0;
    lib_check(c, "rcoll_comm_host", rcoll_comm_host(c->comm, c->rank, &host, &nhosts));
    for (int r = 0; r < c->rank; r++) {
        int h = 0;
        lib_check(c, "rcoll_comm_host", rcoll_comm_host(c->comm, r, &h, &nhosts));
        local += h == host;
    }
    char why[700] = "";
    int dev = local / c->opt.ranks_per_gpu;
    if (rcoll_cuda_device_count(&count) != RCOLL_OK)
        snprintf(why, sizeof(why), "%s", rcoll_cuda_last_error());
    else if (dev >= count)
        snprintf(why, sizeof(why), "local rank %d would use CUDA device %d (--ranks-per-gpu %d) "
                 "but this host has %d: run at most %d ranks per host, or let more ranks share "
                 "a device with --ranks-per-gpu", local, dev, c->opt.ranks_per_gpu, count,
                 count * c->opt.ranks_per_gpu);
    else if (rcoll_cuda_set_device(dev) != RCOLL_OK ||
             rcoll_cuda_device_info(dev, c->dev_name, sizeof(c->dev_name), c->dev_bus,
                                    sizeof(c->dev_bus)) != RCOLL_OK)
        snprintf(why, sizeof(why), "%s", rcoll_cuda_last_error());
    if (why[0])
        fprintf(stderr, "%s: rank %d: --memtype %s: %s\n", perf_prog_name, c->rank,
                c->opt.memtype == PERF_MEM_MANAGED ? "managed" : "cuda", why);
    if (any_rank(c, why[0] != 0))
        leave(c, PERF_EXIT_CUDA);
    c->device = dev;
}

static void print_footer(perf_ctx_t *c)
{
    double avg = c->bw_count ? c->bw_sum / (double)c->bw_count : 0.0;
    if (c->rank != 0)
        return;
    if (c->memlog)
        fputs(c->memlog, stdout);
    printf("# %-20s : %" PRId64 " %s\n", "Out of bounds values", c->wrong_total,
           c->wrong_total ? "FAILED" : "OK");
    printf("# %-20s : %g\n", "Avg bus bandwidth", avg);
    printf("#\n# Collective test concluded: %s\n", c->coll->name);
    fflush(stdout);
    if (c->json) {
        fprintf(c->json, "],\"out_of_bounds\":{\"count\":%" PRId64 ",\"okay\":%s},"
                "\"average_bus_bandwidth\":", c->wrong_total, c->wrong_total ? "false" : "true");
        json_num(c->json, avg);
        fprintf(c->json, "}\n");
    }
}

int perf_main(int argc, char **argv, const perf_coll_t *coll)
{
    perf_ctx_t ctx;
    perf_ctx_t *c = &ctx;

    memset(c, 0, sizeof(*c));
    c->coll = coll;
    perf_prog_name = coll->name;
    perf_usage_lead = env_rank_hint() <= 0;
    perf_parse_args(argc, argv, &c->opt);
    watchdog_setup(c->opt.timeout);

    comm_create(c);
    if (coll->rooted && c->opt.root >= c->nranks) {
        if (c->rank == 0)
            fprintf(stderr, "%s: invalid value for -r: %d (the job has %d ranks)\n", perf_prog_name,
                    c->opt.root, c->nranks);
        leave(c, PERF_EXIT_USAGE);
    }
    int defined = 0;
    for (int d = 0; d < c->opt.ndtypes; d++)
        for (int p = 0; p < c->opt.nops; p++)
            defined += !coll->reducing || perf_op_defined(c->opt.dtypes[d], c->opt.ops[p]);
    if (defined == 0) {
        if (c->rank == 0)
            fprintf(stderr, "%s: no datatype of -d has an op of -o (band, bor and bxor take "
                    "integer and bool types; avg is not defined on bool)\n", perf_prog_name);
        leave(c, PERF_EXIT_USAGE);
    }
    device_setup(c);
    json_open(c, argc, argv);
    print_preamble(c);
    buffers_alloc(c);
    if (c->opt.mem_report && c->rank == 0) {
        char lib[32], usr[32], tot[32];
        size_t lb = mem_usage(c);
        fmt_mem(lib, sizeof(lib), (double)lb);
        fmt_mem(usr, sizeof(usr), (double)c->user_bytes);
        fmt_mem(tot, sizeof(tot), (double)(lb + c->user_bytes));
        printf("# %-20s : rcoll library %s | user buffers %s | Total %s\n", "Host memory usage",
               lib, usr, tot);
        if (c->device_bytes) {
            fmt_mem(usr, sizeof(usr), (double)c->device_bytes);
            printf("# %-20s : user buffers %s (device %d)\n", "CUDA memory usage", usr,
                   c->device);
        }
    }
    if (c->rank == 0) {
        print_header();
        fflush(stdout);
    }

    int nroots = coll->rooted && c->opt.root < 0 ? c->nranks : 1;
    int nops = coll->reducing ? c->opt.nops : 1;
    for (int cyc = 0; c->opt.cycles == 0 || cyc < c->opt.cycles; cyc++) {
        for (int d = 0; d < c->opt.ndtypes; d++) {
            for (int p = 0; p < nops; p++) {
                for (int r = 0; r < nroots; r++) {
                    if (coll->reducing && !perf_op_defined(c->opt.dtypes[d], c->opt.ops[p]))
                        break; /* rcoll does not define the pair (skipped, see -h) */
                    perf_op_t o = {
                        .comm = c->comm, .rank = c->rank, .nranks = c->nranks,
                        .dtype = c->opt.dtypes[d],
                        .op = coll->reducing ? c->opt.ops[p] : RCOLL_SUM,
                        .root = !coll->rooted ? 0 : c->opt.root < 0 ? r : c->opt.root};
                    run_sweep(c, &o);
                }
            }
        }
    }
    if (c->opt.timeout > 0)
        alarm((unsigned)c->opt.timeout); /* bounds the teardown too */
    print_footer(c);
    int code = c->wrong_total ? PERF_EXIT_WRONG : PERF_EXIT_OK;
    if (c->json)
        fclose(c->json);
    c->json = NULL;
    rcoll_status_t st = rcoll_comm_destroy(c->comm);
    if (RCOLL_IS_ERR(st)) {
        fprintf(stderr, "%s: rank %d: rcoll_comm_destroy failed: %s\n", perf_prog_name, c->rank,
                rcoll_status_string(st));
        if (code == PERF_EXIT_OK)
            code = PERF_EXIT_LIBRARY;
    }
    if (c->run_send != c->sendbuf) {
        rcoll_cuda_free(c->run_send);
        rcoll_cuda_free(c->run_recv);
    }
    free(c->sendbuf);
    free(c->recvbuf);
    free(c->expbuf);
    free(c->reqs);
    free(c->memlog);
    return code;
}
