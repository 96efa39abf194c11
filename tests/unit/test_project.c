/*
 * test_project.c - the projection model (algo/project.h) against values derived by hand from
 * its stated formulas on small clusters with round numbers: the flat ring, the tree, the
 * log-step all-gather for power-of-two and other node counts, oversubscription slowing only
 * the steps that climb to its level, the hierarchical forms on NVLink nodes, the nccl-tests
 * bandwidths, the limits (one GPU, one node) and the description checks.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "algo/project.h"
#include "util/status.h"
#include "check.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) + 1); }

/* One switch, one rank per node, 1 GB/s links (1000 bytes/us), alpha = 2 + 3 + 0.5 us. */
static rcoll_cluster_t flat(void)
{
    rcoll_cluster_t c;
    rcoll_cluster_netns(&c, 8.0, 3.0, 0.0);
    c.nic_eff = 1.0;
    c.overhead_us = 2.0;
    c.switch_lat_us = 0.5;
    return c;
}

static void test_flat_ring(void)
{
    rcoll_cluster_t c = flat();
    double S = 1e6, a = 5.5;
    CHECK(rcoll_cluster_check(&c, 5) == RCOLL_OK, "%s", rcoll_err_get());
    /* 2(n-1)/n S/B + 2(n-1) alpha */
    double ar = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_RING, 5, S);
    CHECK(near(ar, 2.0 * 4 / 5 * S / 1000 + 2 * 4 * a), "ring all-reduce %g", ar);
    CHECK(near(ar, 1644), "ring all-reduce %g, by hand 1644 us", ar);
    /* busbw = S/t x 2(n-1)/n */
    double bus = rcoll_project_busbw(RCOLL_PROJ_ALLREDUCE, 5, S, ar);
    CHECK(near(bus, S / 1644 / 1e3 * 1.6), "busbw %g", bus);
    CHECK(near(rcoll_project_algbw(S, ar), S / 1644 / 1e3), "algbw");
    double ag = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_RING, 5, S);
    CHECK(near(ag, 822), "ring all-gather %g, by hand (n-1)/n S/B + (n-1) alpha = 822", ag);
    CHECK(near(rcoll_project_busbw(RCOLL_PROJ_ALLGATHER, 5, S, ag), S / ag / 1e3 * 0.8),
          "all-gather busbw = algbw (n-1)/n");
    /* reduce-scatter: the all-gather plus (n-1)/n S reduced at 2 GB/s */
    c.reduce_gbs = 2.0;
    double rs = rcoll_project_time(&c, RCOLL_PROJ_REDUCE_SCATTER, RCOLL_PROJ_RING, 5, S);
    CHECK(near(rs, 822 + 400), "ring reduce-scatter %g, by hand 1222", rs);
    /* with the line rate at 80% payload, the byte term is 1/0.8 as long */
    c = flat();
    c.nic_eff = 0.8;
    ar = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_RING, 5, S);
    CHECK(near(ar, 1600 / 0.8 + 44), "ring all-reduce at 80%% payload %g", ar);
}

static void test_flat_tree(void)
{
    rcoll_cluster_t c = flat();
    double S = 1e6, a = 5.5;
    /* 5 nodes: depth floor(log2 5) = 2; a node with two children sends 2S */
    double t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_TREE, 5, S);
    CHECK(near(t, 2 * 2 * a + 2 * S / 1000), "tree on 5 %g, by hand 2022", t);
    /* 2 nodes: depth 1, each node sends S (one child per tree) */
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_TREE, 2, S);
    CHECK(near(t, 2 * a + S / 1000), "tree on 2 %g, by hand 1011", t);
    CHECK(isinf(rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_TREE, 5, S)),
          "no tree all-gather");
    CHECK(isinf(rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_HIER_RING, 5, S)),
          "no hierarchy with one GPU per node");
}

static void test_logstep(void)
{
    rcoll_cluster_t c = flat();
    double S = 1e6, a = 5.5;
    /* 8 nodes: 3 steps of 1, 2, 4 blocks of S/8 */
    double t = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 8, S);
    CHECK(near(t, 3 * a + 7.0 / 8 * S / 1000), "pat all-gather on 8 %g, by hand 891.5", t);
    /* 5 nodes (not a power of two): ceil(log2 5) = 3 steps of 1, 2, 1 blocks of S/5 */
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 5, S);
    CHECK(near(t, 3 * a + 4.0 / 5 * S / 1000), "pat all-gather on 5 %g, by hand 816.5", t);
    /* 6 nodes: 1, 2, 2 blocks */
    t = rcoll_project_time(&c, RCOLL_PROJ_REDUCE_SCATTER, RCOLL_PROJ_PAT, 6, S);
    CHECK(near(t, 3 * a + 5.0 / 6 * S / 1000), "pat reduce-scatter on 6 %g", t);
    /* all-reduce: reduce-scatter then all-gather */
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_PAT, 8, S);
    CHECK(near(t, 2 * (3 * a + 7.0 / 8 * S / 1000)), "pat all-reduce on 8 %g", t);
    /* fewer steps than the ring: chosen for small sizes, the ring's equal bytes above */
    CHECK(rcoll_project_choose(&c, RCOLL_PROJ_ALLGATHER, 64, 1024, NULL) == RCOLL_PROJ_PAT,
          "small all-gather on 64 nodes: pat");
    CHECK(isinf(rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 1, S)),
          "no pat on one node");
}

static void test_oversubscription(void)
{
    rcoll_cluster_t c = flat();
    double S = 1e6;
    c.levels = 2;
    c.nodes_per_leaf = 4;
    c.leaves_per_pod = 64;
    CHECK(rcoll_cluster_check(&c, 8) == RCOLL_OK, "%s", rcoll_err_get());
    /* non-blocking: the step at distance 4 climbs to the spines (3 switches), others not */
    double t1 = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 8, S);
    CHECK(near(t1, (2 + 3 + 1.5) + 2 * 5.5 + 7.0 / 8 * S / 1000), "pat, 2 levels 1:1: %g", t1);
    double r1 = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_RING, 8, S);
    c.oversub[0] = 2;
    /* 2:1 at the leaves halves the bandwidth of that step only: its S/8 takes twice as long */
    double t2 = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 8, S);
    CHECK(near(t2 - t1, S / 8 / 1000), "2:1 leaves add S/8/B = 125 us, got %g", t2 - t1);
    /* the ring crosses each leaf's uplinks with one flow: not slowed */
    double r2 = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_RING, 8, S);
    CHECK(near(r1, r2), "ring unchanged by oversubscription: %g vs %g", r1, r2);
    /* within one leaf nothing climbs: no effect */
    double in_leaf1 = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 4, S);
    c.oversub[0] = 1;
    CHECK(near(in_leaf1, rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 4, S)),
          "4 nodes in one leaf: oversubscription does not apply");
    /* 3 levels, pods of 2 leaves of 2 nodes, 2:1 at each: distance 4 crosses pods (5 switches,
     * 1/4 of the bandwidth), distance 2 crosses leaves (3 switches, 1/2), distance 1 neither */
    c.levels = 3;
    c.nodes_per_leaf = 2;
    c.leaves_per_pod = 2;
    c.oversub[0] = c.oversub[1] = 2;
    double t3 = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 8, S);
    CHECK(near(t3, 7.5 + 6.5 + 5.5 + (4 * 125000.0 + 2 * 250000.0 + 500000.0) / 1000),
          "pat on 3 levels %g, by hand 1519.5", t3);
}

static void test_nvlink_nodes(void)
{
    rcoll_cluster_t c;
    rcoll_cluster_h100(&c);
    double S = 1e9, Bl = 450e3, Bk = 8 * 50e3 * c.nic_eff, al = 3.0, an = 4.15;
    CHECK(rcoll_cluster_check(&c, 32) == RCOLL_OK, "%s", rcoll_err_get());
    /* one node: a ring over NVLink, busbw = the NVLink bandwidth less latency */
    double t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_RING, 8, S);
    CHECK(near(t, 14 * al + 2.0 * 7 / 8 * S / Bl), "ring on one node %g", t);
    CHECK(isinf(rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_HIER_RING, 8, S)),
          "no hierarchy on one node");
    /* 4 nodes: the ring's NICs (8 channels) are the bottleneck: 2(n-1)/n S / (8 B_n) */
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_RING, 32, S);
    CHECK(near(t, 62 * an + 2.0 * 31 / 32 * S / Bk), "ring on 4 nodes %g", t);
    /* hier-ring: NVLink reduce-scatter, rail rings of S/8, NVLink all-gather, in sequence */
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_HIER_RING, 32, S);
    CHECK(near(t, 2 * (7 * al + 7.0 / 8 * S / Bl) + 2 * 3 * an + 2.0 * 3 / 4 * S / Bk),
          "hier-ring on 4 nodes %g", t);
    /* pipelined: the phases overlap, the larger byte term counts: NVLink's 2 x 7/8 S/B_l
     * (3889 us) over the rails' 2 x 3/4 S/(8 B_n) (3773 us) */
    c.pipelined = 1;
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_HIER_RING, 32, S);
    CHECK(near(t, 2 * 7 * al + 2 * 3 * an + 2.0 * 7 / 8 * S / Bl), "pipelined hier-ring %g", t);
    CHECK(2.0 * 7 / 8 * S / Bl > 2.0 * 3 / 4 * S / Bk, "NVLink is the larger term here");
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_PAT, 32, S);
    CHECK(near(t, 7 * al + 2 * an + 7.0 / 8 * S / Bl), "pipelined pat all-gather %g (NVLink "
          "bound: 7/8 S/B_l > 3/4 S/(8 B_n))", t);
    c.pipelined = 0;
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLGATHER, RCOLL_PROJ_HIER_RING, 32, S);
    CHECK(near(t, 7 * al + 7.0 / 8 * S / Bl + 3 * an + 3.0 / 4 * S / Bk),
          "hier-ring all-gather on 4 nodes %g", t);
    /* tree: NVLink chain and node tree overlap; the NICs carry 2S */
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_TREE, 32, S);
    CHECK(near(t, 2 * (2 * an + 7 * al) + 2 * S / Bk), "tree on 4 nodes %g", t);
    /* 2048 nodes climb to the spines: 3 switches a message */
    t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_HIER_TREE, 16384, S);
    CHECK(near(t, 2 * (7 * al + 7.0 / 8 * S / Bl) + 2 * 11 * 4.45 + 2 * S / Bk),
          "hier-tree on 2048 nodes %g", t);
    /* the choice: latency-bound at 1 KiB (not the 32766-step ring), within 1% of the best
     * bandwidth at 16 GiB */
    double best;
    rcoll_proj_alg_t a =
        rcoll_project_choose(&c, RCOLL_PROJ_ALLREDUCE, 16384, 1024, &best);
    CHECK(a != RCOLL_PROJ_RING && a != RCOLL_PROJ_HIER_RING, "1 KiB on 16384: %s",
          rcoll_proj_alg_name(a));
    a = rcoll_project_choose(&c, RCOLL_PROJ_ALLREDUCE, 32, 16.0 * (1 << 30), &best);
    double bus = rcoll_project_busbw(RCOLL_PROJ_ALLREDUCE, 32, 16.0 * (1 << 30), best);
    CHECK(bus > 0.99 * 8 * 50 * c.nic_eff * 31 / 32 && bus < 8 * 50 * c.nic_eff,
          "16 GiB on 32: %s %g GB/s", rcoll_proj_alg_name(a), bus);
}

static void test_limits(void)
{
    rcoll_cluster_t c = flat();
    for (int a = 0; a < RCOLL_PROJ_ALG_COUNT; a++) {
        double t = rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, (rcoll_proj_alg_t)a, 1, 1e6);
        CHECK(t == 0 || isinf(t), "one GPU, %s: %g", rcoll_proj_alg_name(a), t);
    }
    CHECK(rcoll_project_time(&c, RCOLL_PROJ_ALLREDUCE, RCOLL_PROJ_RING, 1, 1e6) == 0,
          "one GPU: nothing moves");
    CHECK(rcoll_project_busbw(RCOLL_PROJ_ALLREDUCE, 1, 1e6, 0) == 0, "busbw of 0 us is 0");
    CHECK(rcoll_project_busbw(RCOLL_PROJ_ALLGATHER, 4, 1e6, HUGE_VAL) == 0, "busbw of inf");
    CHECK(isinf(rcoll_project_time(&c, RCOLL_PROJ_COLL_COUNT, RCOLL_PROJ_RING, 4, 1e6)),
          "unknown collective");
    CHECK(!strcmp(rcoll_proj_alg_name(RCOLL_PROJ_HIER_TREE), "hier-tree"), "names");
    CHECK(!strcmp(rcoll_proj_coll_name(RCOLL_PROJ_REDUCE_SCATTER), "reduce-scatter"), "names");
    /* time grows with size and the choice's busbw never exceeds the NIC's line rate */
    double last = 0;
    for (double S = 8; S <= 1e10; S *= 4) {
        double t;
        rcoll_project_choose(&c, RCOLL_PROJ_ALLREDUCE, 12, S, &t);
        CHECK(t > last, "monotonic at %g", S);
        CHECK(rcoll_project_busbw(RCOLL_PROJ_ALLREDUCE, 12, S, t) <= 1.0 + 1e-9, "busbw cap");
        last = t;
    }
}

static int rejects(const rcoll_cluster_t *c, long n, const char *words)
{
    if (rcoll_cluster_check(c, n) != RCOLL_ERR_INVALID_ARG) return 0;
    if (!strstr(rcoll_err_get(), words)) {
        printf("  message '%s' lacks '%s'\n", rcoll_err_get(), words);
        return 0;
    }
    return 1;
}

static void test_check(void)
{
    rcoll_cluster_t c;
    rcoll_cluster_h100(&c);
    CHECK(rcoll_cluster_check(&c, 16384) == RCOLL_OK, "16384 H100s fit: %s", rcoll_err_get());
    CHECK(rejects(&c, 0, "at least 1"), "0 GPUs");
    CHECK(rejects(&c, 12, "not a multiple of the node size"), "12 GPUs on 8-GPU nodes");
    CHECK(rejects(&c, 8 * 2049, "add a level"), "2049 nodes on 2 levels");
    c.levels = 3;
    CHECK(rcoll_cluster_check(&c, 8 * 4096) == RCOLL_OK, "3 levels hold them");
    c.nvlink_gbs = -450;
    CHECK(rejects(&c, 8, "NVLink bandwidth must be a positive"), "negative NVLink");
    rcoll_cluster_h100(&c);
    c.nic_gbit = -1;
    CHECK(rejects(&c, 8, "NIC bandwidth must be a positive"), "negative NIC");
    rcoll_cluster_h100(&c);
    c.oversub[0] = 0.5;
    CHECK(rejects(&c, 8, "oversubscription of level 1"), "oversubscription below 1");
    rcoll_cluster_h100(&c);
    c.levels = 4;
    CHECK(rejects(&c, 8, "1, 2 or 3 levels"), "4 levels");
    rcoll_cluster_h100(&c);
    c.nic_eff = 1.5;
    CHECK(rejects(&c, 8, "efficiency"), "efficiency above 1");
    rcoll_cluster_h100(&c);
    c.switch_lat_us = -1;
    CHECK(rejects(&c, 8, "latencies"), "negative latency");
}

int main(void)
{
    check_case("flat_ring", test_flat_ring);
    check_case("flat_tree", test_flat_tree);
    check_case("logstep", test_logstep);
    check_case("oversubscription", test_oversubscription);
    check_case("nvlink_nodes", test_nvlink_nodes);
    check_case("limits", test_limits);
    check_case("check", test_check);
    return check_summary();
}
