/*
 * test_select.c - the algorithm chooser picks the cost model's minimum on a grid of rank
 * counts and sizes, its formulas match hand-computed values, its choices move the expected
 * way with size, the tuning-file parser accepts and rejects what it should, the algorithm
 * table is complete and its names round-trip, and a forced algorithm that does not apply
 * falls back to the model; the two-shot all-reduce splits every vector evenly among the ranks
 * in as few rounds as its slots allow.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/oneshot.h"
#include "algo/reduce.h"
#include "algo/twoshot.h"
#include "algo/sched.h"
#include "algo/select.h"
#include "util/status.h"
#include "check.h"
#include "mp.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) + 1); }

/* Two-shot's split: rounds as few as the slots allow, and in them each rank reduces the same
 * number of elements give or take a cache line per round (a vector shorter than one round of
 * full shards went nearly all to the first rank: 128 KiB on 2 ranks, 64 bytes to the other). */
static int twoshot_split_ok(int n, size_t slot_bytes, size_t count, rcoll_datatype_t dt)
{
    rcoll_twoshot_t ts;
    rcoll_twoshot_attach(&ts, NULL, n, 0, slot_bytes);
    rcoll_twoshot_op_t o;
    rcoll_twoshot_op_init(&o, &ts, 1, NULL, NULL, count, dt, RCOLL_SUM);
    size_t es = rcoll_dt_size(dt), cap = ts.shard_bytes / es, line = 64 / es;
    size_t min_rounds = (count + cap * n - 1) / (cap * n);
    if (o.nrounds != min_rounds || o.shard_elems > cap || o.shard_elems * n * o.nrounds < count)
        return 0;
    size_t lo = (size_t)-1, hi = 0;
    for (int j = 0; j < n; j++) { /* elements rank j reduces over all rounds */
        size_t mine = 0;
        for (uint64_t r = 0; r < o.nrounds; r++) {
            size_t start = (size_t)r * o.shard_elems * n + (size_t)j * o.shard_elems;
            if (start < count) mine += count - start < o.shard_elems ? count - start : o.shard_elems;
        }
        lo = mine < lo ? mine : lo;
        hi = mine > hi ? mine : hi;
    }
    return hi - lo <= o.nrounds * line * (size_t)n;
}

int main(void)
{
    rcoll_tuning_t t;
    rcoll_tuning_defaults(&t);

    int split_bad = 0, split_cases = 0;
    static const size_t counts[] = {1, 63, 64, 1000, 16384, 32768, 32769, 65536, 131072,
                                    262144, 1000003, 4194304};
    for (int n = 2; n <= 8; n++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int d = 0; d < 3; d++) {
                rcoll_datatype_t dt = d == 0 ? RCOLL_FLOAT32 : d == 1 ? RCOLL_FLOAT16 : RCOLL_FLOAT64;
                split_cases++;
                if (!twoshot_split_ok(n, RCOLL_TWOSHOT_SLOT_BYTES, counts[c], dt) ||
                    !twoshot_split_ok(n, 4096, counts[c], dt)) {
                    if (split_bad++ < 5)
                        fprintf(stderr, "two-shot split uneven: %d ranks, %zu x %s\n", n,
                                counts[c], rcoll_dt_name(dt));
                }
            }
    CHECK(split_bad == 0, "two-shot splits %d vectors evenly in the fewest rounds (%d uneven)",
          split_cases, split_bad);

    /* The choice is the minimum of the model, everywhere on the grid. */
    int grid = 0;
    for (int n = 2; n <= 64; n++)
        for (size_t bytes = 1; bytes <= ((size_t)64 << 20); bytes *= 2)
            for (int shm = 0; shm < 2; shm++)
                for (int os = 0; os < 2; os++) {
                    double pred;
                    rcoll_allreduce_alg_t a = rcoll_select_allreduce(&t, n, bytes, shm, os,
                                                                      &pred);
                    double best = HUGE_VAL;
                    for (int k = 0; k < RCOLL_ALG_COUNT; k++) {
                        double x = rcoll_select_predict(&t, (rcoll_allreduce_alg_t)k, n, bytes,
                                                        shm, os);
                        if (x < best) best = x;
                    }
                    CHECK(near(pred, best) &&
                              near(rcoll_select_predict(&t, a, n, bytes, shm, os), best),
                          "n=%d bytes=%zu shm=%d hostseg=%d: chose %s (%g) but the minimum is %g",
                          n, bytes, shm, os, rcoll_alg_names[a], pred, best);
                    CHECK(a != RCOLL_ALG_ONESHOT || (shm && os && bytes <= RCOLL_ONESHOT_MAX_BYTES),
                          "one-shot chosen where it cannot run (n=%d bytes=%zu)", n, bytes);
                    CHECK(a != RCOLL_ALG_TWOSHOT || (shm && os),
                          "two-shot chosen without a host segment (n=%d bytes=%zu)", n, bytes);
                    grid++;
                }

    /* Hand-computed values with round constants. */
    rcoll_tuning_t h = {.shm = {1.0, 0.001}, .net = {10.0, 0.01}, .gamma_us_per_b = 0.002};
    /* ring, n=4, 1000 B over the network: 6*10 + 1.5*1000*0.01 + 0.75*1000*0.002 = 76.5 */
    CHECK(near(rcoll_select_predict(&h, RCOLL_ALG_RING, 4, 1000, 0, 0), 76.5), "ring formula");
    /* doubling, n=4: 2*10 + 2*1000*0.01 + 2*1000*0.002 = 44 */
    CHECK(near(rcoll_select_predict(&h, RCOLL_ALG_RD, 4, 1000, 0, 0), 44.0), "rd formula");
    /* doubling, n=5 (fold): (2+2)*10 + 4*1000*0.01 + 3*1000*0.002 = 86 */
    CHECK(near(rcoll_select_predict(&h, RCOLL_ALG_RD, 5, 1000, 0, 0), 86.0), "rd fold formula");
    /* tree, n=4 (depth 2): 2*2*10 + 2*1000*0.01 + 1000*0.002 = 62 */
    CHECK(near(rcoll_select_predict(&h, RCOLL_ALG_TREE, 4, 1000, 0, 0), 62.0), "tree formula");
    /* hierarchical, 2 hosts x 2 ranks, 1000 B: shm 2*1*1 + 2*1/2*1000*0.001 + 1/2*1000*0.002
     * = 2 + 1 + 1 = 4; net 2*1*10 + 2*1/2*1000*0.01 = 30; reduction 1/4*1000*0.002 = 0.5 */
    CHECK(near(rcoll_select_predict_hier(&h, 2, 2, 1000), 34.5), "hier formula");
    CHECK(isinf(rcoll_select_predict_hier(&h, 1, 4, 1000)) &&
              isinf(rcoll_select_predict_hier(&h, 4, 1, 1000)), "hier needs hosts and ranks");
    CHECK(isinf(rcoll_select_predict(&h, RCOLL_ALG_HIER, 4, 1000, 0, 0)),
          "flat predict does not know the layout");
    /* the hosts chooser: the minimum of the flat choice and hier, on a grid */
    for (int H = 2; H <= 8; H *= 2)
        for (int k = 2; k <= 8; k *= 2)
            for (size_t bytes = 8; bytes <= ((size_t)256 << 20); bytes *= 16) {
                double pred, flat;
                rcoll_allreduce_alg_t a = rcoll_select_allreduce_hosts(&h, H, k, bytes, &pred);
                rcoll_select_allreduce(&h, H * k, bytes, 0, 0, &flat);
                double hier = rcoll_select_predict_hier(&h, H, k, bytes);
                CHECK(near(pred, flat < hier ? flat : hier) && (a == RCOLL_ALG_HIER) == (hier < flat),
                      "hosts choice H=%d k=%d bytes=%zu", H, k, bytes);
            }
    /* the case: 2 hosts x 2 ranks on a slow network, large messages: hier is ~1.5x */
    rcoll_tuning_t gig = {.shm = {1.0, 1.0 / 12000}, .net = {50.0, 1.0 / 117}, .gamma_us_per_b = 1.0 / 20000};
    double ring4 = rcoll_select_predict(&gig, RCOLL_ALG_RING, 4, 16 << 20, 0, 0);
    double hier22 = rcoll_select_predict_hier(&gig, 2, 2, 16 << 20);
    CHECK(ring4 / hier22 > 1.4 && ring4 / hier22 < 1.5, "ring/hier at 16 MiB over 1 Gb/s: %.3f",
          ring4 / hier22);
    /* one-shot, n=4 over shm: 0.5 + 3*1000*(0.001+0.002) = 9.5 */
    CHECK(near(rcoll_select_predict(&h, RCOLL_ALG_ONESHOT, 4, 1000, 1, 1), 9.5),
          "one-shot formula");
    /* two-shot, n=4: 2*1 + 7/4*1000*0.001/2 + 3/4*1000*0.002 = 4.375 */
    CHECK(near(rcoll_select_predict(&h, RCOLL_ALG_TWOSHOT, 4, 1000, 1, 1), 4.375),
          "two-shot formula");
    CHECK(isinf(rcoll_select_predict(&h, RCOLL_ALG_TWOSHOT, 4, 1000, 1, 0)) &&
              isinf(rcoll_select_predict(&h, RCOLL_ALG_TWOSHOT, 4, 1000, 0, 1)),
          "two-shot not applicable without a host segment or off shared memory");
    CHECK(isinf(rcoll_select_predict(&h, RCOLL_ALG_ONESHOT, 4, 1000, 0, 1)) &&
              isinf(rcoll_select_predict(&h, RCOLL_ALG_ONESHOT, 4, RCOLL_ONESHOT_MAX_BYTES + 1,
                                         1, 1)),
          "one-shot not applicable off shared memory or above its slot size");

    /* Shape: latency-bound algorithms for tiny vectors, the ring for huge ones. */
    CHECK(rcoll_select_allreduce(&t, 8, 8, 0, 0, NULL) == RCOLL_ALG_RD, "8 B, 8 ranks: rd");
    CHECK(rcoll_select_allreduce(&t, 8, (size_t)64 << 20, 0, 0, NULL) == RCOLL_ALG_RING,
          "64 MiB, 8 ranks: ring");
    CHECK(rcoll_select_allreduce(&t, 2, 8, 1, 1, NULL) == RCOLL_ALG_ONESHOT,
          "8 B, 2 ranks, shared memory: one-shot");
    CHECK(rcoll_select_allreduce(&t, 2, (size_t)16 << 20, 1, 1, NULL) == RCOLL_ALG_TWOSHOT &&
              rcoll_select_allreduce(&t, 8, (size_t)1 << 20, 1, 1, NULL) == RCOLL_ALG_TWOSHOT,
          "large vectors on one host: two-shot");
    CHECK(rcoll_select_allreduce(&t, 2, (size_t)16 << 20, 1, 0, NULL) == RCOLL_ALG_RING,
          "16 MiB, 2 ranks, shared memory without a host segment: ring");

    /* Chunk: the minimum of the pipeline formula (scanned here over every 64-byte step of a
     * coarse grid, then refined around the best), within [4 KiB, max]. */
    int chunks = 0;
    for (int n = 2; n <= 64; n *= 2)
        for (size_t bytes = 4096; bytes <= ((size_t)256 << 20); bytes *= 8)
            for (int shm = 0; shm < 2; shm++)
                for (int a = RCOLL_ALG_RING; a <= RCOLL_ALG_TREE; a += RCOLL_ALG_TREE) {
                    const rcoll_path_cost_t *pc = shm ? &t.shm : &t.net;
                    double depth, lane;
                    if (a == RCOLL_ALG_RING) {
                        depth = 2.0 * (n - 1);
                        lane = (double)bytes / n;
                    } else {
                        int d = 0;
                        while ((2 << d) <= n) d++;
                        depth = 2.0 * d;
                        lane = (double)bytes / 2;
                    }
                    size_t maxc = (size_t)1 << 20;
                    size_t got = rcoll_select_chunk(&t, (rcoll_allreduce_alg_t)a, n, bytes, shm,
                                                    maxc);
                    double per_b = pc->beta_us_per_b + t.gamma_us_per_b;
#define PIPE(C) ((depth + lane / (double)(C) - 1) * (pc->alpha_us + (double)(C) * per_b))
                    size_t best = 4096;
                    for (size_t c = 4096; c <= maxc; c += 4096)
                        if (PIPE(c) < PIPE(best)) best = c;
                    for (size_t c = best > 8192 ? best - 8192 : 4096; c <= best + 8192 && c <= maxc;
                         c += 64)
                        if (PIPE(c) < PIPE(best)) best = c;
                    CHECK(got >= 4096 && got <= maxc && got % 64 == 0 &&
                              PIPE(got) <= PIPE(best) * (1 + 1e-6),
                          "%s n=%d bytes=%zu shm=%d: chunk %zu (%.3f us) but %zu gives %.3f us",
                          rcoll_alg_names[a], n, bytes, shm, got, PIPE(got), best, PIPE(best));
#undef PIPE
                    chunks++;
                }
    /* Doubling over a network: chunks of at most 256 KiB (1 MiB ones, two ahead on each
     * partner, grew the TCP buffers and slowed every later call); over shared memory the
     * slot. */
    CHECK(rcoll_select_chunk(&t, RCOLL_ALG_RD, 2, (size_t)8 << 20, 0, (size_t)1 << 20) ==
                  ((size_t)256 << 10) &&
              rcoll_select_chunk(&t, RCOLL_ALG_RD, 2, (size_t)8 << 20, 1, (size_t)1 << 20) ==
                  ((size_t)1 << 20),
          "doubling's chunk: 256 KiB over the network, the slot over shared memory");
    CHECK(rcoll_select_chunk(&t, RCOLL_ALG_RD, 4, 1 << 20, 0, 12345) == 12345 &&
              rcoll_select_chunk(&t, RCOLL_ALG_RING, 4, 1 << 20, 0, 1000) == 1000,
          "chunk: unpipelined algorithms and tiny maxima get the maximum");

    /* Tuning text. */
    rcoll_tuning_t u = t;
    CHECK(rcoll_tuning_parse("# measured on node7\nnet_alpha_us = 3.5\n\nreduce_gbps=20 # x\n",
                             &u) == RCOLL_OK &&
              near(u.net.alpha_us, 3.5) && near(u.gamma_us_per_b, 1.0 / 20e3) &&
              near(u.shm.alpha_us, t.shm.alpha_us),
          "valid tuning text applied, others kept");
    rcoll_tuning_t keep = u;
    CHECK(rcoll_tuning_parse("net_alpha_us = fast\n", &u) == RCOLL_ERR_INVALID_ARG &&
              !memcmp(&u, &keep, sizeof(u)), "non-number rejected, nothing changed");
    CHECK(rcoll_tuning_parse("ok_key = 1\n", &u) == RCOLL_ERR_INVALID_ARG, "unknown key rejected");
    CHECK(rcoll_tuning_parse("\nshm_beta_gbps = -2\n", &u) == RCOLL_ERR_INVALID_ARG,
          "negative value rejected");
    /* The table: every entry has every op (stubs, never NULL), and RCOLL_ALGO's names map
     * to the enum and back. */
    for (int a = 0; a < RCOLL_ALG_COUNT; a++) {
        const rcoll_algo_ops_t *o = rcoll_algos[a];
        CHECK(o && o->predict && o->start && o->progress, "algorithm %d has every op", a);
        /* RCOLL_ALGO=<name> through the algo layer's knob table gives that algorithm */
        rcoll_algo_config_t k = {.algo = -7};
        setenv("RCOLL_ALGO", rcoll_alg_names[a], 1);
        CHECK(rcoll_config_parse(&rcoll_algo_config_table, &k) == RCOLL_OK &&
                  rcoll_algo_forced(&k) == (rcoll_allreduce_alg_t)a &&
                  !strcmp(rcoll_algo_name(rcoll_algo_forced(&k)), rcoll_alg_names[a]),
              "name '%s' round-trips to %d", rcoll_alg_names[a], a);
    }
    /* Every collective's table: complete, its names unique, its knob maps each name to the
     * entry and "auto" to -1; the choice is a table entry that applies. */
    for (int c = 0; c < RCOLL_COLL_COUNT; c++) {
        const rcoll_algo_table_t *tb = &rcoll_algo_tables[c];
        CHECK(tb->count > 0 && tb->coll && tb->knob && tb->ops && tb->names,
              "table %d is filled", c);
        for (int a = 0; a < tb->count; a++) {
            const rcoll_algo_ops_t *o = tb->ops[a];
            CHECK(o && o->predict && o->start && o->progress && tb->names[a],
                  "%s algorithm %d has every op and a name", tb->coll, a);
            for (int b = 0; b < a; b++)
                CHECK(strcmp(tb->names[a], tb->names[b]) != 0, "%s names unique", tb->coll);
            rcoll_algo_config_t kc = {0};
            setenv(tb->knob, tb->names[a], 1);
            CHECK(rcoll_config_parse(&rcoll_algo_config_table, &kc) == RCOLL_OK &&
                      rcoll_algo_forced_coll(&kc, (rcoll_coll_t)c) == a,
                  "%s=%s gives entry %d", tb->knob, tb->names[a], a);
            unsetenv(tb->knob);
        }
        rcoll_algo_config_t kc = {0};
        CHECK(rcoll_config_parse(&rcoll_algo_config_table, &kc) == RCOLL_OK &&
                  rcoll_algo_forced_coll(&kc, (rcoll_coll_t)c) == -1, "%s unset: auto",
              tb->knob);
        for (int n = 2; n <= 9; n++) {
            rcoll_algo_ctx_t cc = {.nranks = n, .nhosts = 1, .ppn = n, .all_shm = 1,
                                   .chunk_bytes = 65536, .tuning = &t, .last_alg = -1};
            for (int f = 0; f < RCOLL_COLL_COUNT; f++) cc.forced_coll[f] = -1;
            for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 8) {
                int a = rcoll_algo_choose_coll(&cc, (rcoll_coll_t)c, bytes * (size_t)n);
                CHECK(a >= 0 && a < tb->count &&
                          isfinite(tb->ops[a]->predict(&cc, bytes * (size_t)n)),
                      "%s auto on %d ranks, %zu B: an entry that applies", tb->coll, n,
                      bytes * (size_t)n);
            }
        }
    }
    /* Broadcast: the binomial tree for small vectors on many ranks, the chain for large ones
     * (the root sends every byte log2 n times down the tree, once along the chain). */
    {
        rcoll_algo_ctx_t cc = {.nranks = 8, .nhosts = 1, .ppn = 8, .all_shm = 1,
                               .chunk_bytes = 65536, .tuning = &t, .last_alg = -1};
        cc.forced_coll[RCOLL_COLL_BCAST] = -1;
        CHECK(rcoll_algo_choose_coll(&cc, RCOLL_COLL_BCAST, 64) == RCOLL_BCAST_ALG_BINOMIAL &&
                  rcoll_algo_choose_coll(&cc, RCOLL_COLL_BCAST, (size_t)64 << 20) ==
                      RCOLL_BCAST_ALG_CHAIN,
              "8 ranks: binomial at 64 B, chain at 64 MiB");
        cc.forced_coll[RCOLL_COLL_BCAST] = RCOLL_BCAST_ALG_CHAIN;
        rcoll_algo_choose_reset(&cc);
        CHECK(rcoll_algo_choose_coll(&cc, RCOLL_COLL_BCAST, 64) == RCOLL_BCAST_ALG_CHAIN,
              "RCOLL_ALGO_BCAST=chain is followed at 64 B");
        cc.forced_coll[RCOLL_COLL_ALLGATHER] = RCOLL_ALLGATHER_ALG_RD;
        cc.nranks = cc.ppn = 6;
        CHECK(rcoll_algo_choose_coll(&cc, RCOLL_COLL_ALLGATHER, 6 * 64) ==
                  RCOLL_ALLGATHER_ALG_RING,
              "RCOLL_ALGO_ALLGATHER=rd on 6 ranks (not a power of two): the model, ring");
    }
    rcoll_algo_config_t k = {.algo = -7};
    setenv("RCOLL_ALGO", "auto", 1);
    CHECK(rcoll_config_parse(&rcoll_algo_config_table, &k) == RCOLL_OK &&
              rcoll_algo_forced(&k) == RCOLL_ALG_AUTO &&
              !strcmp(rcoll_algo_name(RCOLL_ALG_AUTO), "auto"), "auto is the model");
    unsetenv("RCOLL_ALGO");
    CHECK(rcoll_config_parse(&rcoll_algo_config_table, &k) == RCOLL_OK &&
              rcoll_algo_forced(&k) == RCOLL_ALG_AUTO, "unset is auto");
    setenv("RCOLL_ALGO", "bogus", 1);
    k.algo = 3;
    CHECK(rcoll_config_parse(&rcoll_algo_config_table, &k) == RCOLL_ERR_INVALID_ARG &&
              k.algo == 3 && strstr(rcoll_err_get(), "is not one of auto, ring, rd"),
          "unknown name rejected with the names, output untouched: %s", rcoll_err_get());
    unsetenv("RCOLL_ALGO");
    CHECK(!strcmp(rcoll_alg_names[RCOLL_ALG_RING], "ring") &&
              !strcmp(rcoll_alg_names[RCOLL_ALG_RD], "rd") &&
              !strcmp(rcoll_alg_names[RCOLL_ALG_ONESHOT], "oneshot") &&
              !strcmp(rcoll_alg_names[RCOLL_ALG_TREE], "tree") &&
              !strcmp(rcoll_alg_names[RCOLL_ALG_TWOSHOT], "twoshot") &&
              !strcmp(rcoll_alg_names[RCOLL_ALG_HIER], "hier"),
          "RCOLL_ALGO values unchanged");

    /* rcoll_algo_choose: a forced algorithm where it applies, else the model's choice. */
    rcoll_algo_ctx_t c = {.nranks = 4, .nhosts = 1, .ppn = 4, .all_shm = 1, .has_hostseg = 0,
                          .tuning = &t, .forced = RCOLL_ALG_ONESHOT, .last_alg = -1};
    rcoll_allreduce_alg_t model = rcoll_algo_model(&c, 64, NULL);
    CHECK(model != RCOLL_ALG_ONESHOT && rcoll_algo_choose(&c, 64) == model,
          "forced one-shot without a host segment falls back to the model (%s)",
          rcoll_alg_names[model]);
    c.forced = RCOLL_ALG_HIER;
    rcoll_algo_choose_reset(&c);
    CHECK(rcoll_algo_choose(&c, 64) == model, "forced hier on one host falls back");
    c.forced = RCOLL_ALG_TREE;
    rcoll_algo_choose_reset(&c);
    CHECK(rcoll_algo_choose(&c, 64) == RCOLL_ALG_TREE && rcoll_algo_choose(&c, 64) ==
              RCOLL_ALG_TREE, "forced tree applies (and is remembered)");
    c.has_hostseg = 1;
    c.forced = RCOLL_ALG_ONESHOT;
    rcoll_algo_choose_reset(&c);
    CHECK(rcoll_algo_choose(&c, 64) == RCOLL_ALG_ONESHOT &&
              rcoll_algo_choose(&c, RCOLL_ONESHOT_MAX_BYTES * 2) ==
                  rcoll_algo_model(&c, RCOLL_ONESHOT_MAX_BYTES * 2, NULL),
          "forced one-shot with a host segment: up to its size, then the model");
    c.forced = RCOLL_ALG_AUTO;
    rcoll_algo_choose_reset(&c);
    CHECK(rcoll_algo_choose(&c, 8) == rcoll_select_allreduce(&t, 4, 8, 1, 1, NULL),
          "auto: the model");
    rcoll_algo_ctx_t hc = {.nranks = 8, .nhosts = 2, .ppn = 4, .all_shm = 1, .tuning = &t,
                           .forced = RCOLL_ALG_AUTO, .last_alg = -1};
    for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 16)
        CHECK(rcoll_algo_choose(&hc, bytes) == rcoll_select_allreduce_hosts(&t, 2, 4, bytes, NULL),
              "hosts: the flat algorithms over the network against hier (%zu B)", bytes);

    /* Measured curves (rcoll_algo_fit_t): straight lines between the points, flat below the
     * first, the last segment's slope above the last. */
    rcoll_algo_fit_t f = {.npoints = 3, .bytes = {64, 1024, 4096}, .us = {1, 3, 9}};
    CHECK(near(rcoll_algo_fit_eval(&f, 8), 1) && near(rcoll_algo_fit_eval(&f, 64), 1) &&
              near(rcoll_algo_fit_eval(&f, 544), 2) && near(rcoll_algo_fit_eval(&f, 1024), 3) &&
              near(rcoll_algo_fit_eval(&f, 2560), 6) && near(rcoll_algo_fit_eval(&f, 8192), 17),
          "a measured curve: flat below, piecewise linear, extended at the last slope");
    /* CMA on one host: never chosen on its formula alone; chosen where its measured curve
     * is the cheapest, not where it is not. */
    rcoll_algo_ctx_t mc = {.nranks = 2, .nhosts = 1, .ppn = 2, .all_shm = 1, .has_hostseg = 1,
                           .has_cma = 1, .tuning = &t, .forced = RCOLL_ALG_AUTO,
                           .last_alg = -1};
    size_t big = (size_t)16 << 20;
    CHECK(isfinite(rcoll_algos[RCOLL_ALG_CMA]->predict(&mc, big)) &&
              rcoll_algo_model(&mc, big, NULL) != RCOLL_ALG_CMA &&
              isinf(rcoll_algo_predict(&mc, RCOLL_ALG_CMA, big)),
          "cma applies at 16 MiB but, unmeasured, auto does not take it");
    double two = rcoll_algo_predict(&mc, RCOLL_ALG_TWOSHOT, big);
    mc.fit[RCOLL_ALG_CMA] = (rcoll_algo_fit_t){.npoints = 2, .bytes = {4096, (double)big},
                                               .us = {5, two * 0.8}};
    CHECK(rcoll_algo_model(&mc, big, NULL) == RCOLL_ALG_CMA,
          "cma measured 0.8x two-shot's prediction at 16 MiB: chosen");
    mc.fit[RCOLL_ALG_CMA].us[1] = two * 2.5;
    CHECK(rcoll_algo_model(&mc, big, NULL) == RCOLL_ALG_TWOSHOT,
          "cma measured 2.5x two-shot at 16 MiB (the regression's machine): not chosen");
    mc.fit[RCOLL_ALG_TWOSHOT] = (rcoll_algo_fit_t){.npoints = 2, .bytes = {64, (double)big},
                                                   .us = {1, two * 3}};
    mc.fit[RCOLL_ALG_CMA].us[1] = two * 0.8;
    CHECK(rcoll_algo_model(&mc, big, NULL) == RCOLL_ALG_CMA &&
              near(rcoll_algo_predict(&mc, RCOLL_ALG_TWOSHOT, big), two * 3),
          "a measured two-shot is predicted by its curve, not its formula");
    /* A curve the probe stopped after one point (its next would have been too long): above
     * that point it follows the formula's shape through it, never flat (a flat curve made
     * the ring look free at every size over TCP and auto ran it where doubling was 2x
     * faster). */
    {
        rcoll_algo_ctx_t rc = {.nranks = 2, .nhosts = 1, .ppn = 2, .all_shm = 0, .tuning = &t,
                               .forced = RCOLL_ALG_AUTO, .last_alg = -1};
        double f64 = rcoll_algos[RCOLL_ALG_RING]->predict(&rc, 64);
        double f1m = rcoll_algos[RCOLL_ALG_RING]->predict(&rc, (size_t)1 << 20);
        rc.fit[RCOLL_ALG_RING] = (rcoll_algo_fit_t){.npoints = 1, .bytes = {64}, .us = {3 * f64}};
        CHECK(near(rcoll_algo_predict(&rc, RCOLL_ALG_RING, (size_t)1 << 20), 3 * f1m) &&
                  near(rcoll_algo_predict(&rc, RCOLL_ALG_RING, 8), 3 * f64),
              "one measured point: 3x the formula at 64 B is 3x the formula at 1 MiB too");
    }
    /* Above the last point an algorithm that names no probe sizes (its cost is the path's)
     * costs no less a byte than its formula with the measured constants: recursive doubling
     * over TCP measured cheap up to 1 MiB is not extrapolated cheaper than the ring past it
     * (it cost 1.4-1.8x the ring at 8-32 MiB on 4 ranks).  One that names its own sizes
     * keeps its measured slope (two-shot's formula over shared memory is 2x its real
     * slope; taking it made auto run cma, 2.1x slower, on 4 ranks). */
    {
        rcoll_algo_ctx_t rc = {.nranks = 4, .nhosts = 1, .ppn = 4, .all_shm = 0, .tuning = &t,
                               .forced = RCOLL_ALG_AUTO, .last_alg = -1};
        const rcoll_allreduce_alg_t rd = RCOLL_ALG_RD, ring = RCOLL_ALG_RING;
        const double M = 1048576, big = 32 * M;
        /* the probe's picture over TCP: doubling cheaper at every point, flatter slopes */
        rc.fit[rd] = (rcoll_algo_fit_t){.npoints = 3, .bytes = {64, 32768, M},
                                        .us = {40, 55, 0.5 * rcoll_algos[rd]->predict(&rc, M)}};
        rc.fit[ring] = (rcoll_algo_fit_t){.npoints = 3, .bytes = {64, 32768, M},
                                          .us = {70, 240, rcoll_algos[ring]->predict(&rc, M)}};
        double lin = rcoll_algo_fit_eval(&rc.fit[rd], (size_t)big);
        double floor_rd = rc.fit[rd].us[2] + rcoll_algos[rd]->predict(&rc, (size_t)big) -
                          rcoll_algos[rd]->predict(&rc, (size_t)M);
        CHECK(floor_rd > lin && near(rcoll_algo_predict(&rc, rd, (size_t)big), floor_rd),
              "past the last point: the formula's growth (%.1f us), not the last slope "
              "(%.1f us)", floor_rd, lin);
        CHECK(near(rcoll_algo_predict(&rc, rd, (size_t)M / 2),
                   rcoll_algo_fit_eval(&rc.fit[rd], (size_t)M / 2)),
              "within the points: the measured curve");
        CHECK(rcoll_algo_model(&rc, (size_t)M, NULL) == rd &&
                  rcoll_algo_model(&rc, (size_t)big, NULL) == ring,
              "doubling where measured cheaper (1 MiB), the ring at 32 MiB (%s)",
              rcoll_alg_names[rcoll_algo_model(&rc, (size_t)big, NULL)]);
        /* two-shot names its own probe sizes: its measured slope stays */
        mc.fit[RCOLL_ALG_TWOSHOT] = (rcoll_algo_fit_t){.npoints = 2, .bytes = {64, M},
                                                       .us = {1, 2}};
        CHECK(rcoll_algos[RCOLL_ALG_TWOSHOT]->probe_bytes[0] &&
                  near(rcoll_algo_predict(&mc, RCOLL_ALG_TWOSHOT, (size_t)big),
                       rcoll_algo_fit_eval(&mc.fit[RCOLL_ALG_TWOSHOT], (size_t)big)),
              "an algorithm with its own probe sizes: its last slope, not its formula");
    }
    /* Pipeline chunks are cut by the configured constants (chunk_tuning), not the probe's:
     * the forced ring and the ring auto chose run the same schedule. */
    {
        rcoll_tuning_t probed = t;
        probed.net.alpha_us = t.net.alpha_us * 4;
        probed.net.beta_us_per_b = t.net.beta_us_per_b * 9;
        size_t want = rcoll_select_chunk(&t, RCOLL_ALG_RING, 4, (size_t)8 << 20, 0, 1 << 20);
        CHECK(want != rcoll_select_chunk(&probed, RCOLL_ALG_RING, 4, (size_t)8 << 20, 0, 1 << 20),
              "the two sets of constants cut different chunks (else this checks nothing)");
        rcoll_algo_ctx_t cc = {.nranks = 4, .nhosts = 1, .ppn = 4, .all_shm = 0,
                               .tuning = &probed, .chunk_tuning = &t, .chunk_bytes = 1 << 20,
                               .forced = RCOLL_ALG_AUTO, .last_alg = -1};
        rcoll_algo_op_t op;
        memset(&op, 0, sizeof(op));
        op.count = ((size_t)8 << 20) / 4;
        op.dt = RCOLL_FLOAT32;
        rcoll_sched_t sc;
        rcoll_algos[RCOLL_ALG_RING]->schedule(&cc, &op, &sc);
        CHECK(sc.chunk * 4 == want, "ring schedule's chunk %zu B, the configured constants' "
              "%zu B", sc.chunk * 4, want);
    }
    mc.forced = RCOLL_ALG_CMA;
    memset(mc.fit, 0, sizeof(mc.fit));
    rcoll_algo_choose_reset(&mc);
    CHECK(rcoll_algo_choose(&mc, 4096) == RCOLL_ALG_CMA, "RCOLL_ALGO=cma runs it unmeasured");
    printf("checked %d grid points, %d chunk choices\n", grid, chunks);
    return check_summary();
}
