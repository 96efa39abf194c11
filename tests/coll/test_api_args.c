/*
 * test_api_args.c - bad input returns the documented status with a message naming the
 * problem, touches no buffer, and leaves the communicator usable.
 */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

#define N 64

static int expect(rcoll_comm_t comm, rcoll_status_t got, rcoll_status_t want, const char *word,
                  const char *what, int rank)
{
    int ok = got == want && strstr(rcoll_comm_last_error(comm), word) != NULL;
    if (!ok)
        fprintf(stderr, "rank %d: %s: got %s '%s', wanted %s mentioning '%s'\n", rank, what,
                rcoll_status_string(got), rcoll_comm_last_error(comm), rcoll_status_string(want),
                word);
    return ok ? 0 : 1;
}

/* The rooted and uneven collectives: every rank refuses alike, so no collective runs. */
static int bad_vinputs(rcoll_comm_t comm, int rank, int n, float *buf, float *out)
{
    size_t cnt[16], dsp[16], big[16];
    for (int i = 0; i < n; i++) cnt[i] = 2, dsp[i] = (size_t)i * 2, big[i] = 1;
    big[n - 1] = RCOLL_MAX_COUNT; /* with the others' 1s: the sum passes 2^40 */
    int bad = 0;
    rcoll_request_t req;
    bad += expect(comm, rcoll_gather(buf, out, 2, RCOLL_FLOAT32, n, comm), RCOLL_ERR_INVALID_ARG,
                  "root", "gather root == nranks", rank);
    bad += expect(comm, rcoll_scatter(buf, out, 2, RCOLL_FLOAT32, -1, comm),
                  RCOLL_ERR_INVALID_ARG, "root -1", "scatter negative root", rank);
    bad += expect(comm, rcoll_gather(buf, out, RCOLL_MAX_COUNT / (size_t)n + 1, RCOLL_FLOAT32, 0,
                                     comm),
                  RCOLL_ERR_INVALID_ARG, "exceeds the maximum", "gather count x nranks", rank);
    bad += expect(comm, rcoll_gather(NULL, out, 2, RCOLL_FLOAT32, 0, comm),
                  RCOLL_ERR_INVALID_ARG, "sendbuf is NULL", "gather NULL sendbuf", rank);
    bad += expect(comm, rcoll_scatter(buf, NULL, 2, RCOLL_FLOAT32, 0, comm),
                  RCOLL_ERR_INVALID_ARG, "recvbuf is NULL", "scatter NULL recvbuf", rank);
    bad += expect(comm, rcoll_allgatherv(buf, 2, out, NULL, dsp, RCOLL_FLOAT32, comm),
                  RCOLL_ERR_INVALID_ARG, "recvcounts is NULL", "allgatherv NULL counts", rank);
    bad += expect(comm, rcoll_iallgatherv(buf, 2, out, cnt, NULL, RCOLL_FLOAT32, comm, &req),
                  RCOLL_ERR_INVALID_ARG, "displs is NULL", "iallgatherv NULL displs", rank);
    bad += expect(comm, rcoll_allgatherv(buf, 3, out, cnt, dsp, RCOLL_FLOAT32, comm),
                  RCOLL_ERR_INVALID_ARG, "differs from recvcounts", "allgatherv sendcount", rank);
    bad += expect(comm, rcoll_allgatherv(buf, 1, out, big, dsp, RCOLL_FLOAT32, comm),
                  RCOLL_ERR_INVALID_ARG, "2^40", "allgatherv sum overflow", rank);
    size_t far[16];
    for (int i = 0; i < n; i++) far[i] = RCOLL_MAX_COUNT - 1;
    bad += expect(comm, rcoll_allgatherv(buf, 2, out, cnt, far, RCOLL_FLOAT32, comm),
                  RCOLL_ERR_INVALID_ARG, "displs[0] + recvcounts[0]", "allgatherv extent", rank);
    bad += expect(comm, rcoll_alltoallv(buf, cnt, dsp, out, NULL, dsp, RCOLL_FLOAT32, comm),
                  RCOLL_ERR_INVALID_ARG, "recvcounts is NULL", "alltoallv NULL counts", rank);
    bad += expect(comm, rcoll_alltoallv(RCOLL_IN_PLACE, cnt, dsp, out, cnt, dsp, RCOLL_FLOAT32,
                                        comm),
                  RCOLL_ERR_INVALID_ARG, "in-place", "alltoallv in place", rank);
    bad += expect(comm, rcoll_ialltoallv(buf, cnt, dsp, buf + 1, cnt, dsp, RCOLL_FLOAT32, comm,
                                         &req),
                  RCOLL_ERR_INVALID_ARG, "overlap", "alltoallv overlap", rank);
    bad += expect(comm, rcoll_reduce_scatterv(buf, out, NULL, RCOLL_FLOAT32, RCOLL_SUM, comm),
                  RCOLL_ERR_INVALID_ARG, "recvcounts is NULL", "reduce_scatterv NULL", rank);
    bad += expect(comm, rcoll_ireduce_scatterv(buf, out, cnt, RCOLL_FLOAT32, (rcoll_op_t)9, comm,
                                               &req),
                  RCOLL_ERR_INVALID_ARG, "invalid reduction op 9", "reduce_scatterv op", rank);
    bad += expect(comm, rcoll_reduce_scatterv(buf, NULL, cnt, RCOLL_FLOAT32, RCOLL_SUM, comm),
                  RCOLL_ERR_INVALID_ARG, "recvbuf is NULL", "reduce_scatterv NULL recvbuf",
                  rank);
    /* Zero counts with NULL buffers are valid (the all-to-all-v still communicates). */
    size_t zero[16] = {0};
    if (rcoll_allgatherv(NULL, 0, NULL, zero, zero, RCOLL_FLOAT32, comm) != RCOLL_OK ||
        rcoll_reduce_scatterv(NULL, NULL, zero, RCOLL_FLOAT32, RCOLL_SUM, comm) != RCOLL_OK ||
        rcoll_alltoallv(NULL, zero, zero, NULL, zero, zero, RCOLL_FLOAT32, comm) != RCOLL_OK ||
        rcoll_gather(NULL, NULL, 0, RCOLL_FLOAT32, 0, comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: zero-count v-collectives with NULL buffers: %s\n", rank,
                rcoll_comm_last_error(comm));
        bad++;
    }
    return bad;
}

static int bad_inputs(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    float buf[N], out[N], keep[N];
    for (int i = 0; i < N; i++) buf[i] = out[i] = keep[i] = (float)i;
    int bad = 0;
    rcoll_request_t req = NULL;
    bad += expect(comm, rcoll_allreduce(buf, NULL, N, RCOLL_FLOAT32, RCOLL_SUM, comm),
                  RCOLL_ERR_INVALID_ARG, "recvbuf is NULL", "NULL recvbuf", rank);
    bad += expect(comm, rcoll_allreduce(NULL, out, N, RCOLL_FLOAT32, RCOLL_SUM, comm),
                  RCOLL_ERR_INVALID_ARG, "sendbuf is NULL", "NULL sendbuf", rank);
    bad += expect(comm, rcoll_allreduce(buf, out, N, (rcoll_datatype_t)99, RCOLL_SUM, comm),
                  RCOLL_ERR_INVALID_ARG, "invalid datatype 99", "bad datatype", rank);
    bad += expect(comm, rcoll_allreduce(buf, out, N, RCOLL_FLOAT32, (rcoll_op_t)-3, comm),
                  RCOLL_ERR_INVALID_ARG, "invalid reduction op -3", "bad op", rank);
    /* Bitwise ops on every floating type, AVG on bool: refused by every reducing call. */
    static const struct {
        rcoll_datatype_t dt;
        rcoll_op_t op;
        const char *word;
    } undefined[] = {
        {RCOLL_FLOAT32, RCOLL_BAND, "op band is bitwise: it takes an integer or bool datatype, "
                                    "not float32"},
        {RCOLL_FLOAT16, RCOLL_BOR, "not float16"},   {RCOLL_BFLOAT16, RCOLL_BXOR, "not bfloat16"},
        {RCOLL_FLOAT64, RCOLL_BXOR, "not float64"},  {RCOLL_FLOAT32, RCOLL_BOR, "op bor"},
        {RCOLL_BOOL, RCOLL_AVG, "op avg is not defined on bool"},
    };
    for (size_t k = 0; k < sizeof(undefined) / sizeof(undefined[0]); k++) {
        rcoll_datatype_t dt = undefined[k].dt;
        rcoll_op_t op = undefined[k].op;
        const char *w = undefined[k].word;
        bad += expect(comm, rcoll_allreduce(buf, out, 8, dt, op, comm), RCOLL_ERR_INVALID_ARG, w,
                      "allreduce, op not defined on the datatype", rank);
        bad += expect(comm, rcoll_reduce(buf, out, 8, dt, op, 0, comm), RCOLL_ERR_INVALID_ARG, w,
                      "reduce, op not defined on the datatype", rank);
        bad += expect(comm, rcoll_ireduce_scatter(buf, out, 1, dt, op, comm, &req),
                      RCOLL_ERR_INVALID_ARG, w, "reduce_scatter, op not defined on the datatype",
                      rank);
        size_t ones[16];
        for (int i = 0; i < n && i < 16; i++) ones[i] = 1;
        bad += expect(comm, rcoll_reduce_scatterv(buf, out, ones, dt, op, comm),
                      RCOLL_ERR_INVALID_ARG, w, "reduce_scatterv, op not defined on the datatype",
                      rank);
        /* A count of 0 is no excuse: the pair is wrong on every rank whatever the count. */
        bad += expect(comm, rcoll_iallreduce(NULL, NULL, 0, dt, op, comm, &req),
                      RCOLL_ERR_INVALID_ARG, w, "iallreduce count 0, op not defined", rank);
    }
    bad += expect(comm, rcoll_allreduce(buf, out, RCOLL_MAX_COUNT + 1, RCOLL_FLOAT32, RCOLL_SUM,
                                        comm),
                  RCOLL_ERR_INVALID_ARG, "exceeds the maximum", "count overflow", rank);
    bad += expect(comm, rcoll_allreduce(buf, buf + 1, N - 1, RCOLL_FLOAT32, RCOLL_SUM, comm),
                  RCOLL_ERR_INVALID_ARG, "overlap partially", "overlapping buffers", rank);
    bad += expect(comm, rcoll_bcast(buf, N, RCOLL_FLOAT32, n, comm), RCOLL_ERR_INVALID_ARG,
                  "root", "root == nranks", rank);
    bad += expect(comm, rcoll_bcast(buf, N, RCOLL_FLOAT32, -1, comm), RCOLL_ERR_INVALID_ARG,
                  "root -1", "negative root", rank);
    bad += expect(comm, rcoll_bcast(NULL, 3, RCOLL_FLOAT32, 0, comm), RCOLL_ERR_INVALID_ARG,
                  "buf is NULL", "NULL bcast buffer", rank);
    bad += expect(comm, rcoll_iallreduce(buf, out, N, RCOLL_FLOAT32, RCOLL_SUM, comm, NULL),
                  RCOLL_ERR_INVALID_ARG, "req is NULL", "NULL request", rank);
    if (rcoll_wait(NULL) != RCOLL_ERR_INVALID_ARG || rcoll_wait(&req) != RCOLL_ERR_INVALID_ARG) {
        fprintf(stderr, "rank %d: rcoll_wait(NULL) not rejected\n", rank);
        bad++;
    }
    bad += bad_vinputs(comm, rank, n, buf, out);
    int done;
    if (rcoll_test(&req, &done) != RCOLL_ERR_INVALID_ARG) bad++;
    if (rcoll_allreduce(buf, out, N, RCOLL_FLOAT32, RCOLL_SUM, NULL) != RCOLL_ERR_INVALID_ARG)
        bad++;
    int r = -1;
    if (rcoll_comm_rank(comm, NULL) != RCOLL_ERR_INVALID_ARG ||
        rcoll_comm_rank(comm, &r) != RCOLL_OK || r != rank)
        bad++;
    /* every rank of this test is on this host: host 0 of 1 */
    int host = -1, nhosts = -1;
    if (rcoll_comm_host(comm, n - 1, &host, &nhosts) != RCOLL_OK || host != 0 || nhosts != 1 ||
        rcoll_comm_host(comm, n, &host, NULL) != RCOLL_ERR_INVALID_ARG ||
        rcoll_comm_host(comm, -1, &host, NULL) != RCOLL_ERR_INVALID_ARG ||
        rcoll_comm_host(comm, 0, NULL, NULL) != RCOLL_ERR_INVALID_ARG ||
        rcoll_comm_host(NULL, 0, &host, NULL) != RCOLL_ERR_INVALID_ARG) {
        fprintf(stderr, "rank %d: rcoll_comm_host: host %d of %d\n", rank, host, nhosts);
        bad++;
    }
    /* Nothing was touched by any rejected call. */
    if (memcmp(buf, keep, sizeof(buf)) || memcmp(out, keep, sizeof(out))) {
        fprintf(stderr, "rank %d: a rejected call modified a buffer\n", rank);
        bad++;
    }
    /* Count 0 with NULL buffers is a valid no-op. */
    if (rcoll_allreduce(NULL, NULL, 0, RCOLL_FLOAT32, RCOLL_SUM, comm) != RCOLL_OK) bad++;
    /* The communicator still works. */
    rcoll_status_t st = rcoll_allreduce(buf, out, N, RCOLL_FLOAT32, RCOLL_SUM, comm);
    for (int i = 0; i < N && st == RCOLL_OK; i++)
        if (out[i] != (float)(i * n)) st = RCOLL_ERR_INTERNAL;
    if (st != RCOLL_OK) {
        fprintf(stderr, "rank %d: comm unusable after bad input: %s\n", rank,
                rcoll_comm_last_error(comm));
        bad++;
    }
    return bad;
}

/* The communicator's own memory stays within RCOLL_BUFFSIZE plus a small fixed part. */
static int mem_bound(rcoll_comm_t comm, int rank, int n, void *arg)
{
    /* Staging (RCOLL_BUFFSIZE), this rank's share of the host segment (4 two-shot slots of
     * RCOLL_BUFFSIZE / 16 and two 16 KiB one-shot slots), bookkeeping. */
    size_t bs = *(size_t *)arg;
    size_t bound = bs + bs / 4 + 2 * (16384 + 64) + 64 * 1024 + (size_t)n * 1024;
    size_t used = 0;
    float v[1000] = {0};
    if (rcoll_allreduce(RCOLL_IN_PLACE, v, 1000, RCOLL_FLOAT32, RCOLL_SUM, comm) != RCOLL_OK ||
        rcoll_comm_mem_usage(comm, &used) != RCOLL_OK || used > bound || used == 0) {
        fprintf(stderr, "rank %d: communicator uses %zu bytes, bound %zu\n", rank, used, bound);
        return 1;
    }
    /* the same bytes by part, and the connections the all-reduce opened */
    rcoll_mem_stats_t m;
    memset(&m, 0xab, sizeof(m));
    int bad = 0;
    if (rcoll_comm_mem_stats(comm, &m, sizeof(m)) != RCOLL_OK || m.total != used ||
        m.state + m.staging + m.host_segment + m.gpu_staging != m.total || m.staging == 0 ||
        m.staging > bs || m.state == 0 || m.gpu_staging != 0 || m.peers < 1 ||
        m.peers > n - 1 || m.connections < m.peers || m.connections > 2 * m.peers) {
        fprintf(stderr, "rank %d: mem_stats total %zu (usage %zu) state %zu staging %zu host "
                "segment %zu gpu %zu, %d connections to %d peers of %d\n", rank, m.total, used,
                m.state, m.staging, m.host_segment, m.gpu_staging, m.connections, m.peers,
                n - 1);
        bad = 1;
    }
    /* an older caller's smaller struct: nothing written past it */
    rcoll_mem_stats_t o;
    memset(&o, 0xcd, sizeof(o));
    size_t part = offsetof(rcoll_mem_stats_t, connections);
    if (rcoll_comm_mem_stats(comm, &o, part) != RCOLL_OK || o.total != used ||
        o.connections != (int)0xcdcdcdcd || o.peers != (int)0xcdcdcdcd) {
        fprintf(stderr, "rank %d: mem_stats with a short struct wrote past it\n", rank);
        bad = 1;
    }
    if (rcoll_comm_mem_stats(comm, NULL, sizeof(m)) != RCOLL_ERR_INVALID_ARG ||
        !strstr(rcoll_comm_last_error(comm), "stats is NULL") ||
        rcoll_comm_mem_stats(comm, &m, 0) != RCOLL_ERR_INVALID_ARG) {
        fprintf(stderr, "rank %d: mem_stats bad arguments not refused: %s\n", rank,
                rcoll_comm_last_error(comm));
        bad = 1;
    }
    return bad;
}

/* torchrun-style launch: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (rcoll uses port + 1). */
static int torchrun_port;

static int torchrun_rank(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)id, (void)arg;
    char v[32];
    unsetenv("RCOLL_RANK");
    unsetenv("RCOLL_NRANKS");
    unsetenv("RCOLL_ROOT");
    snprintf(v, sizeof(v), "%d", rank);
    setenv("RANK", v, 1);
    snprintf(v, sizeof(v), "%d", n);
    setenv("WORLD_SIZE", v, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(v, sizeof(v), "%d", torchrun_port);
    setenv("MASTER_PORT", v, 1);
    setenv("RCOLL_SECRET", "torch-job", 1);
    rcoll_comm_t comm;
    if (rcoll_comm_init_env(&comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: torchrun-style init: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    int got_rank = -1, got_size = -1;
    rcoll_comm_rank(comm, &got_rank);
    rcoll_comm_size(comm, &got_size);
    int x = 1;
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, comm);
    rcoll_comm_destroy(comm);
    return (st == RCOLL_OK && x == n && got_rank == rank && got_size == n) ? 0 : 2;
}

/* srun-style launch: SLURM_PROCID and SLURM_NTASKS, with RCOLL_ROOT as the rendezvous. */
static char srun_root[64];

static int srun_rank(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    (void)id, (void)arg;
    char v[32];
    static const char *const clear[] = {"RCOLL_RANK", "RCOLL_NRANKS", "RANK", "WORLD_SIZE",
                                        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                        "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "MASTER_ADDR",
                                        "MASTER_PORT"};
    for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++) unsetenv(clear[i]);
    snprintf(v, sizeof(v), "%d", rank);
    setenv("SLURM_PROCID", v, 1);
    snprintf(v, sizeof(v), "%d", n);
    setenv("SLURM_NTASKS", v, 1);
    setenv("RCOLL_ROOT", srun_root, 1);
    setenv("RCOLL_SECRET", "slurm-job", 1);
    rcoll_comm_t comm;
    if (rcoll_comm_init_env(&comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: srun-style init: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    int got_rank = -1, got_size = -1;
    rcoll_comm_rank(comm, &got_rank);
    rcoll_comm_size(comm, &got_size);
    int x = rank + 1;
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, comm);
    rcoll_comm_destroy(comm);
    return (st == RCOLL_OK && x == n * (n + 1) / 2 && got_rank == rank && got_size == n) ? 0
                                                                                         : 2;
}

/* Two ranks made with rcoll_comm_init_rank_config run an all-reduce; so does a dup. */
static int config_rank(const rcoll_unique_id_t *id, int rank, int n, void *arg)
{
    const rcoll_comm_config_t *cfg = arg;
    rcoll_comm_t comm, dup;
    if (rcoll_comm_init_rank_config(n, id, rank, cfg, &comm) != RCOLL_OK) {
        fprintf(stderr, "rank %d: init with config: %s\n", rank, rcoll_last_init_error());
        return 1;
    }
    int x = 1;
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, comm);
    if (st == RCOLL_OK) st = rcoll_comm_dup(comm, &dup);
    if (st == RCOLL_OK) {
        st = rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, dup);
        rcoll_comm_destroy(dup);
    }
    rcoll_comm_destroy(comm);
    return st == RCOLL_OK && x == n * n ? 0 : 2;
}

int main(void)
{
    setenv("RCOLL_DEBUG", "NONE", 0);
    int bad = mp_run(3, bad_inputs, NULL, 60, NULL);
    CHECK(bad == 0, "bad collective arguments rejected cleanly on every rank");
    size_t buffsize = 4u << 20;
    CHECK(mp_run(5, mem_bound, &buffsize, 60, NULL) == 0, "memory within the default bound");
    setenv("RCOLL_BUFFSIZE", "1M", 1);
    buffsize = 1u << 20;
    CHECK(mp_run(5, mem_bound, &buffsize, 60, NULL) == 0, "RCOLL_BUFFSIZE=1M lowers the bound");
    unsetenv("RCOLL_BUFFSIZE");
    /* A free port for rcoll's root; torchrun's store would sit one below it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    torchrun_port = ntohs(sa.sin_port) - 1;
    CHECK(mp_run_raw(3, torchrun_rank, NULL, 60, NULL) == 0,
          "torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) launch a job");
    snprintf(srun_root, sizeof(srun_root), "127.0.0.1:%d", torchrun_port + 1);
    CHECK(mp_run_raw(3, srun_rank, NULL, 60, NULL) == 0,
          "Slurm variables (SLURM_PROCID, SLURM_NTASKS) with RCOLL_ROOT launch a job");

    /* Communicator creation arguments (no process needed: they fail before any I/O). */
    rcoll_unique_id_t id;
    rcoll_comm_t comm = NULL;
    CHECK(rcoll_get_unique_id(NULL) == RCOLL_ERR_INVALID_ARG, "NULL id pointer");
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK, "unique id");
    CHECK(rcoll_comm_init_rank(2, &id, 2, &comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "rank=2") && comm == NULL,
          "rank >= nranks: %s", rcoll_last_init_error());
    CHECK(rcoll_comm_init_rank(0, &id, 0, &comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "nranks=0"),
          "nranks 0: %s", rcoll_last_init_error());
    CHECK(rcoll_comm_init_rank(2, NULL, 0, &comm) == RCOLL_ERR_INVALID_ARG, "NULL id");
    CHECK(rcoll_comm_init_rank(2, &id, 0, NULL) == RCOLL_ERR_INVALID_ARG, "NULL comm");
    rcoll_unique_id_t junk;
    memset(&junk, 0x41, sizeof(junk));
    CHECK(rcoll_comm_init_rank(2, &junk, 0, &comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "not a valid rcoll id"),
          "garbage id: %s", rcoll_last_init_error());
    unsetenv("RCOLL_RANK");
    unsetenv("RCOLL_NRANKS");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");
    unsetenv("PMIX_RANK");
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_NTASKS");
    unsetenv("RCOLL_ROOT");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "RCOLL_RANK"),
          "no launch environment: %s", rcoll_last_init_error());
    /* started by a launcher that gives rank and size but no rendezvous: say what is missing */
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "rank 1 of 4 from OMPI_COMM_WORLD_RANK") &&
              strstr(rcoll_last_init_error(), "no rendezvous address: set RCOLL_ROOT") &&
              strstr(rcoll_last_init_error(), "rcoll_comm_init_mpi"),
          "mpirun without a rendezvous: %s", rcoll_last_init_error());
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "MASTER_ADDR is set but MASTER_PORT is not"),
          "MASTER_ADDR alone: %s", rcoll_last_init_error());
    setenv("MASTER_PORT", "70000", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "MASTER_PORT='70000'"),
          "MASTER_PORT out of range: %s", rcoll_last_init_error());
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("PMIX_RANK", "2", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "PMIx launcher (PMIX_RANK is set)"),
          "PMIX_RANK without a size: %s", rcoll_last_init_error());
    setenv("SLURM_NTASKS", "3", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "rank 2 of 3 from PMIX_RANK/SLURM_NTASKS"),
          "PMIX_RANK with SLURM_NTASKS, no rendezvous: %s", rcoll_last_init_error());
    unsetenv("PMIX_RANK");
    setenv("SLURM_PROCID", "5", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "SLURM_PROCID=5 is outside [0, SLURM_NTASKS=3)"),
          "SLURM_PROCID outside SLURM_NTASKS: %s", rcoll_last_init_error());
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_NTASKS");
    setenv("RCOLL_RANK", "3", 1);
    setenv("RCOLL_NRANKS", "2", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "RCOLL_RANK=3"),
          "rank outside size: %s", rcoll_last_init_error());
    setenv("RCOLL_RANK", "1", 1);
    setenv("RCOLL_ROOT", "nonsense", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "nonsense"),
          "malformed RCOLL_ROOT: %s", rcoll_last_init_error());
    setenv("RCOLL_TIMEOUT", "never", 1);
    CHECK(rcoll_comm_init_env(&comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "RCOLL_TIMEOUT"),
          "bad knob value named: %s", rcoll_last_init_error());
    CHECK(rcoll_comm_destroy(NULL) == RCOLL_OK && rcoll_comm_abort(NULL) == RCOLL_OK,
          "NULL destroy/abort are no-ops");
    unsetenv("RCOLL_TIMEOUT");
    unsetenv("RCOLL_RANK");
    unsetenv("RCOLL_NRANKS");
    unsetenv("RCOLL_ROOT");

    /* The caller's settings: arguments refused with a sentence ... */
    rcoll_comm_config_t cfg = RCOLL_COMM_CONFIG_INIT;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK, "unique id for the config cases");
    CHECK(rcoll_comm_init_rank_config(2, &id, 0, NULL, &comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "config is NULL"),
          "NULL config: %s", rcoll_last_init_error());
    cfg.size = 3;
    CHECK(rcoll_comm_init_rank_config(2, &id, 0, &cfg, &comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "RCOLL_COMM_CONFIG_INIT"),
          "config without its size: %s", rcoll_last_init_error());
    cfg.size = sizeof(cfg);
    cfg.timeout_s = 1e12;
    CHECK(rcoll_comm_init_rank_config(2, &id, 0, &cfg, &comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "timeout_s"),
          "timeout beyond a week: %s", rcoll_last_init_error());
    cfg.timeout_s = -1;
    cfg.name = "a-name-that-is-far-too-long-to-fit-in-the-sixty-four-bytes-of-the-field";
    CHECK(rcoll_comm_init_rank_config(2, &id, 0, &cfg, &comm) == RCOLL_ERR_INVALID_ARG &&
              strstr(rcoll_last_init_error(), "longer than 63"),
          "name too long: %s", rcoll_last_init_error());
    rcoll_group_start();
    cfg.name = "grp";
    CHECK(rcoll_comm_init_rank_config(2, &id, 0, &cfg, &comm) == RCOLL_ERR_INVALID_USAGE,
          "config inside a group refused: %s", rcoll_last_init_error());
    rcoll_group_end();
    /* ... and the timeout wins over RCOLL_TIMEOUT: rank 1 never comes, rank 0 gives up after
     * the config's 1.5 s, not the environment's 120 s */
    setenv("RCOLL_TIMEOUT", "120", 1);
    cfg.timeout_s = 1.5;
    cfg.name = "lonely";
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rcoll_status_t cst = rcoll_comm_init_rank_config(2, &id, 0, &cfg, &comm);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(cst == RCOLL_ERR_TIMEOUT && took >= 1.4 && took < 20,
          "config timeout 1.5 s over RCOLL_TIMEOUT=120: %s after %.1f s: %s",
          rcoll_status_string(cst), took, rcoll_last_init_error());
    unsetenv("RCOLL_TIMEOUT");
    /* a working one: the name and timeout reach the INFO line; split children inherit */
    cfg.timeout_s = 42;
    cfg.name = "configured";
    CHECK(mp_run_raw(2, config_rank, &cfg, 60, NULL) == 0,
          "two ranks created with a config run an all-reduce");
    return check_summary();
}
