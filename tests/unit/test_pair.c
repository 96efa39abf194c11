/*
 * test_pair.c - the transport decision between two ranks (core/pair.c), the one function both
 * the library (core/comm.c, every peer) and rcoll-topo --ranks use: the configuration filter
 * (RCOLL_TRANSPORT, RCOLL_SHM_DISABLE, RCOLL_NET) and the choice from two rank-table entries.
 */
#include <stdio.h>
#include <string.h>

#include "core/pair.h"
#include "check.h"

static unsigned bit(const char *name)
{
    const rcoll_transport_ops_t *t = rcoll_transport_find(name);
    return t ? 1u << rcoll_transport_index(t) : 0;
}

static const char *name_of(int t)
{
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    return t >= 0 && (size_t)t < n ? list[t]->name : "none";
}

static void expect(const char *what, rcoll_pair_end_t a, rcoll_pair_end_t b, const char *want)
{
    const char *got = name_of(rcoll_pair_transport(&a, &b));
    const char *got_rev = name_of(rcoll_pair_transport(&b, &a));
    CHECK(!strcmp(got, want) && !strcmp(got_rev, want), "%s: %s / %s, want %s", what, got,
          got_rev, want);
}

int main(void)
{
    unsigned shm = bit("shm"), tcp = bit("tcp"), verbs = bit("verbs");
    CHECK(shm && tcp, "shm and tcp are built in");
    const uint64_t A = 1, B = 2;
    expect("one host", (rcoll_pair_end_t){A, shm | tcp}, (rcoll_pair_end_t){A, shm | tcp}, "shm");
    expect("two hosts", (rcoll_pair_end_t){A, shm | tcp}, (rcoll_pair_end_t){B, shm | tcp}, "tcp");
    expect("one host, shm on one side only", (rcoll_pair_end_t){A, shm | tcp},
           (rcoll_pair_end_t){A, tcp}, "tcp");
    expect("nothing in common", (rcoll_pair_end_t){A, shm}, (rcoll_pair_end_t){B, shm | tcp},
           "none");
    expect("shm only, two hosts", (rcoll_pair_end_t){A, shm}, (rcoll_pair_end_t){B, shm}, "none");
    unsigned plugin = bit("plugin");
    CHECK(plugin, "the NCCL net plugin transport is built in, named 'plugin'");
    expect("two hosts, a net plugin listening", (rcoll_pair_end_t){A, shm | plugin | verbs | tcp},
           (rcoll_pair_end_t){B, shm | plugin | verbs | tcp}, "plugin");
    expect("one host, a net plugin listening", (rcoll_pair_end_t){A, shm | plugin | tcp},
           (rcoll_pair_end_t){A, shm | plugin | tcp}, "shm");
    expect("a net plugin on one side", (rcoll_pair_end_t){A, plugin | tcp},
           (rcoll_pair_end_t){B, tcp}, "tcp");
    if (verbs) {
        expect("two hosts with verbs", (rcoll_pair_end_t){A, shm | verbs | tcp},
               (rcoll_pair_end_t){B, shm | verbs | tcp}, "verbs");
        expect("one host with verbs", (rcoll_pair_end_t){A, shm | verbs | tcp},
               (rcoll_pair_end_t){A, shm | verbs | tcp}, "shm");
        expect("verbs on one side", (rcoll_pair_end_t){A, verbs | tcp},
               (rcoll_pair_end_t){B, tcp}, "tcp");
    }

    /* The configuration filter. */
    rcoll_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.transport = RCOLL_CFG_TRANSPORT_AUTO;
    cfg.net = RCOLL_CFG_NET_AUTO;
    const rcoll_transport_ops_t *S = rcoll_transport_find("shm"), *T = rcoll_transport_find("tcp");
    const rcoll_transport_ops_t *V = rcoll_transport_find("verbs");
    char why[64];
    CHECK(rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && rcoll_pair_allowed(&cfg, T, NULL, 0),
          "auto allows shm and tcp");
    cfg.shm_disable = 1;
    CHECK(!rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && !strcmp(why, "RCOLL_SHM_DISABLE=1") &&
              rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_SHM_DISABLE=1 rules out shm only: '%s'", why);
    cfg.shm_disable = 0;
    cfg.net = RCOLL_CFG_NET_TCP;
    CHECK(rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_NET=tcp keeps shm and tcp");
    if (V)
        CHECK(!rcoll_pair_allowed(&cfg, V, why, sizeof(why)) && !strcmp(why, "RCOLL_NET=tcp"),
              "RCOLL_NET=tcp rules out verbs: '%s'", why);
    cfg.net = RCOLL_CFG_NET_AUTO;
    cfg.transport = RCOLL_CFG_TRANSPORT_TCP;
    CHECK(!rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && !strcmp(why, "RCOLL_TRANSPORT=tcp") &&
              rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_TRANSPORT=tcp: tcp only: '%s'", why);
    cfg.transport = RCOLL_CFG_TRANSPORT_SHM;
    CHECK(rcoll_pair_allowed(&cfg, S, why, sizeof(why)) && !rcoll_pair_allowed(&cfg, T, why, sizeof(why)),
          "RCOLL_TRANSPORT=shm: shm only");
    const rcoll_transport_ops_t *P = rcoll_transport_find("plugin");
    cfg.transport = RCOLL_CFG_TRANSPORT_PLUGIN;
    CHECK(P && rcoll_pair_allowed(&cfg, P, why, sizeof(why)) &&
              !rcoll_pair_allowed(&cfg, S, why, sizeof(why)) &&
              !rcoll_pair_allowed(&cfg, T, why, sizeof(why)) &&
              !strcmp(why, "RCOLL_TRANSPORT=plugin"),
          "RCOLL_TRANSPORT=plugin: the net plugin only: '%s'", why);
    cfg.transport = RCOLL_CFG_TRANSPORT_AUTO;
    cfg.net = RCOLL_CFG_NET_PLUGIN;
    CHECK(P && rcoll_pair_allowed(&cfg, P, why, sizeof(why)) &&
              rcoll_pair_allowed(&cfg, S, why, sizeof(why)) &&
              !rcoll_pair_allowed(&cfg, T, why, sizeof(why)) && !strcmp(why, "RCOLL_NET=plugin"),
          "RCOLL_NET=plugin: shm and the net plugin: '%s'", why);
    return check_summary();
}
