/*
 * test_config.c - the knob tables of every module and their parser, address parsing, interface filters and
 * status strings: pure logic, no sockets opened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/config.h"
#include "transport/shm.h"
#include "transport/tcp.h"
#include "util/config.h"
#include "util/log.h"
#include "util/net.h"
#include "util/status.h"
#include "util/time.h"

static void test_sizes(void)
{
    size_t v = 0;
    CHECK(rcoll_parse_size("0", &v) == 0 && v == 0, "0");
    CHECK(rcoll_parse_size("4096", &v) == 0 && v == 4096, "4096");
    CHECK(rcoll_parse_size("4K", &v) == 0 && v == 4096, "4K");
    CHECK(rcoll_parse_size("8m", &v) == 0 && v == (8u << 20), "8m");
    CHECK(rcoll_parse_size("1G", &v) == 0 && v == (1u << 30), "1G");
    CHECK(rcoll_parse_size("2KB", &v) == 0 && v == 2048, "2KB");
    CHECK(rcoll_parse_size("", &v) != 0, "empty rejected");
    CHECK(rcoll_parse_size("-1", &v) != 0, "negative rejected");
    CHECK(rcoll_parse_size("12Q", &v) != 0, "bad suffix rejected");
    CHECK(rcoll_parse_size("99999999999999999999", &v) != 0, "overflow rejected");
    CHECK(rcoll_parse_size("99999999999999G", &v) != 0, "suffix overflow rejected");
}

static void clear_env(void)
{
    size_t nt;
    const rcoll_config_table_t *const *t = rcoll_config_tables(&nt);
    for (size_t j = 0; j < nt; j++)
        for (size_t i = 0; i < t[j]->count; i++)
            if (t[j]->knobs[i].type != RCOLL_KNOB_TABLE) unsetenv(t[j]->knobs[i].name);
}

static void test_defaults_and_env(void)
{
    clear_env();
    rcoll_config_t c;
    CHECK(rcoll_config_load(&c) == RCOLL_OK, "defaults load");
    CHECK(c.timeout_s == 300, "default timeout 300 s, got %g", c.timeout_s);
    CHECK(c.conn.buffsize == (4u << 20), "default buffsize 4 MiB");
    CHECK(c.rank == -1 && c.nranks == -1 && c.root[0] == 0, "launch vars unset");
    CHECK(c.conn.buffsize <= (8u << 20), "default per-connection memory within 8 MiB");
    CHECK(c.transport == RCOLL_CFG_AUTO && c.net == RCOLL_CFG_AUTO,
          "enum defaults: auto");
    CHECK(c.poll_us == 20000, "default polling before naps 20 ms, got %d us", c.poll_us);

    setenv("RCOLL_TIMEOUT", "2.5", 1);
    setenv("RCOLL_BUFFSIZE", "1M", 1);
    setenv("RCOLL_SOCKET_NSOCKS", "4", 1);
    setenv("RCOLL_SOCKET_IFNAME", "^docker,lo", 1);
    setenv("RCOLL_TRANSPORT", "TCP", 1);
    CHECK(rcoll_config_load(&c) == RCOLL_OK, "env load");
    CHECK(c.timeout_s == 2.5 && c.conn.buffsize == (1u << 20) &&
              !strcmp(c.netif.socket_ifname, "^docker,lo") &&
              c.transport == rcoll_transport_value(rcoll_transport_names, "tcp"),
          "env values applied");
    /* a transport's own table: its knobs and the shared ones it embeds */
    rcoll_tcp_config_t tcp;
    rcoll_shm_config_t shm;
    CHECK(rcoll_config_parse(&rcoll_tcp_config_table, &tcp) == RCOLL_OK && tcp.nsocks == 4 &&
              tcp.stripe_min == (256u << 10) && !strcmp(tcp.netif.socket_ifname, "^docker,lo"),
          "tcp table: nsocks 4, default stripe 256K, shared interface");
    CHECK(rcoll_config_parse(&rcoll_tcp_config_table, &tcp) == RCOLL_OK &&
              rcoll_config_parse(&rcoll_shm_config_table, &shm) == RCOLL_OK &&
              shm.conn.buffsize == (1u << 20) && shm.proto == RCOLL_SHM_PROTO_AUTO,
          "shm table: shared RCOLL_BUFFSIZE, proto auto");
    setenv("RCOLL_PROTO", "cma", 1);
    CHECK(rcoll_config_parse(&rcoll_shm_config_table, &shm) == RCOLL_OK &&
              shm.proto == RCOLL_SHM_PROTO_CMA, "RCOLL_PROTO=cma");
    unsetenv("RCOLL_PROTO");

    static const struct {
        const char *var, *val;
    } bad[] = {{"RCOLL_TIMEOUT", "soon"},     {"RCOLL_TIMEOUT", "-1"},
               {"RCOLL_TIMEOUT", "0"},
               {"RCOLL_BUFFSIZE", "lots"},    {"RCOLL_BUFFSIZE", "1"},
               {"RCOLL_SOCKET_NSOCKS", "0"},  {"RCOLL_SOCKET_NSOCKS", "3x"},
               {"RCOLL_DEBUG", "LOUD"},       {"RCOLL_ALGO", "magic"},
               {"RCOLL_POLL_US", "-5"},       {"RCOLL_POLL_US", "1ms"},
               {"RCOLL_PROTO", "bogus"},      {"RCOLL_TRANSPORT", "ib"},
               {"RCOLL_NET", "rdma"},         {"RCOLL_IB_ADDR_FAMILY", "ipv5"},
               {"RCOLL_IB_SL", "16"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        clear_env();
        setenv(bad[i].var, bad[i].val, 1);
        rcoll_config_t keep = c;
        rcoll_status_t st = rcoll_config_load(&c);
        CHECK(st == RCOLL_ERR_INVALID_ARG, "%s=%s rejected", bad[i].var, bad[i].val);
        CHECK(strstr(rcoll_err_get(), bad[i].var) != NULL, "message names %s: '%s'", bad[i].var,
              rcoll_err_get());
        CHECK(memcmp(&keep, &c, sizeof(c)) == 0, "output untouched on error");
    }
    /* every enum names its allowed values, through the one enum path of the parser */
    static const struct {
        const char *var, *val, *allowed;
    } enums[] = {{"RCOLL_PROTO", "bogus", "is not one of auto, copy or cma"},
                 {"RCOLL_DEBUG", "LOUD", "is not one of NONE, WARN, INFO or TRACE"},
                 {"RCOLL_TRANSPORT", "ib", "is not one of auto, shm, plugin, verbs or tcp"},
                 {"RCOLL_NET", "rdma", "is not one of auto, plugin, verbs or tcp"},
                 {"RCOLL_IB_ADDR_FAMILY", "ipv5", "is not one of ipv4 or ipv6"},
                 {"RCOLL_SOCKET_NSOCKS", "99", "out of range [1, 16]"},
                 {"RCOLL_TIMEOUT", "0", "in (0, 604800] (more than 0, at most 604800)"}};
    for (size_t i = 0; i < sizeof(enums) / sizeof(enums[0]); i++) {
        clear_env();
        setenv(enums[i].var, enums[i].val, 1);
        CHECK(rcoll_config_load(&c) == RCOLL_ERR_INVALID_ARG &&
                  strstr(rcoll_err_get(), enums[i].allowed),
              "%s=%s says what is allowed: '%s'", enums[i].var, enums[i].val, rcoll_err_get());
    }
    /* RCOLL_DEBUG_SUBSYS: every name a subsystem (it was accepted silently before) */
    static const char *const bad_subsys[] = {"abc", "-5", "INIT,TPC", "^COLL,bogus"};
    for (size_t i = 0; i < sizeof(bad_subsys) / sizeof(bad_subsys[0]); i++) {
        clear_env();
        setenv("RCOLL_DEBUG_SUBSYS", bad_subsys[i], 1);
        rcoll_config_t keep = c;
        CHECK(rcoll_config_load(&c) == RCOLL_ERR_INVALID_ARG &&
                  strstr(rcoll_err_get(), "RCOLL_DEBUG_SUBSYS") &&
                  strstr(rcoll_err_get(), "is not a subsystem") &&
                  strstr(rcoll_err_get(), "INIT, BOOTSTRAP"),
              "RCOLL_DEBUG_SUBSYS=%s refused naming what is allowed: '%s'", bad_subsys[i],
              rcoll_err_get());
        CHECK(memcmp(&keep, &c, sizeof(c)) == 0, "output untouched on error");
    }
    static const char *const good_subsys[] = {"INIT", "init,Algo,NET", "^COLL", "ALL",
                                              "SOCKET", ""};
    for (size_t i = 0; i < sizeof(good_subsys) / sizeof(good_subsys[0]); i++) {
        clear_env();
        setenv("RCOLL_DEBUG_SUBSYS", good_subsys[i], 1);
        CHECK(rcoll_config_load(&c) == RCOLL_OK, "RCOLL_DEBUG_SUBSYS=%s accepted: %s",
              good_subsys[i], rcoll_err_get());
    }
    /* empty = default for enums (RCOLL_DEBUG= was accepted before) */
    clear_env();
    setenv("RCOLL_DEBUG", "", 1);
    setenv("RCOLL_PROTO", "", 1);
    CHECK(rcoll_config_load(&c) == RCOLL_OK, "empty enums = default");
    clear_env();
}

/* Every module's table: prefixed names with help, each knob declared once over all of them. */
static void test_table(void)
{
    size_t nt, n = 0;
    const rcoll_config_table_t *const *t = rcoll_config_tables(&nt);
    const rcoll_knob_t *k[128];
    CHECK(nt >= 8, "tables of log, net, topo, transport, shm, tcp, verbs and core: %zu", nt);
    for (size_t j = 0; j < nt; j++) {
        CHECK(t[j]->module && t[j]->count > 0 && t[j]->size > 0, "table %zu described", j);
        for (size_t i = 0; i < t[j]->count && n < 128; i++)
            if (t[j]->knobs[i].type != RCOLL_KNOB_TABLE) k[n++] = &t[j]->knobs[i];
    }
    CHECK(n >= 35 && n < 128, "%zu knobs in all", n);
    for (size_t i = 0; i < n; i++) {
        CHECK(!strncmp(k[i]->name, "RCOLL_", 6), "knob %s prefixed", k[i]->name);
        CHECK(k[i]->help && strlen(k[i]->help) > 10, "knob %s has help", k[i]->name);
        CHECK(k[i]->type != RCOLL_KNOB_ENUM || (k[i]->names && k[i]->names[0]),
              "enum %s has names", k[i]->name);
        for (size_t j = i + 1; j < n; j++)
            CHECK(strcmp(k[i]->name, k[j]->name) != 0, "knob %s declared once", k[i]->name);
    }
    /* the unknown-variable check sees the knobs of every module */
    static const char *const known[] = {"RCOLL_DEBUG", "RCOLL_SOCKET_IFNAME", "RCOLL_TOPO_FILE",
                                        "RCOLL_BUFFSIZE", "RCOLL_PROTO", "RCOLL_SOCKET_NSOCKS",
                                        "RCOLL_IB_HCA", "RCOLL_TIMEOUT", "RCOLL_ALGO",
                                        "RCOLL_LOCAL_RANK", "RCOLL_MPI_MIN_BYTES"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        CHECK(rcoll_config_known(t, nt, known[i], strlen(known[i])), "%s known", known[i]);
    CHECK(!rcoll_config_known(t, nt, "RCOLL_FOO", 9), "RCOLL_FOO unknown");
    CHECK(!rcoll_config_known(t, nt, "RCOLL_PROTOCOL", 14), "no prefix match for knobs");
}

/* A module's own table, parsed into its own struct: defaults, environment, enums by index,
 * ranges, an embedded table, and errors that say what is accepted. */
typedef struct {
    char path[RCOLL_CFG_STR_MAX];
} sub_cfg_t;
static const rcoll_knob_t sub_knobs[] = {
    RCOLL_KNOB_STR(sub_cfg_t, "RCOLL_CFGTEST_PATH", "/tmp", path, "a path of the embedded table"),
};
static const rcoll_config_table_t sub_table = RCOLL_CONFIG_TABLE("sub", sub_knobs, sub_cfg_t);

typedef struct {
    int mode;
    int level;
    int count;
    size_t bytes;
    double wait_s;
    sub_cfg_t sub;
} mod_cfg_t;
static const char *const mode_names[] = {"auto", "fast", "safe", NULL};
static const char *const level_names[] = {"LOW", "MID", "HIGH", "BEYOND", NULL};
static const rcoll_knob_t mod_knobs[] = {
    RCOLL_KNOB_ENUM_OF(mod_cfg_t, "RCOLL_TEST_CFG_MODE", "auto", mode, mode_names,
                       "how to go: auto, fast or safe"),
    RCOLL_KNOB_ENUM_RANGE(mod_cfg_t, "RCOLL_TEST_CFG_LEVEL", "MID", level, level_names, 0, 2,
                          "a level: LOW, MID or HIGH (BEYOND is a name, not a level)"),
    RCOLL_KNOB_NUM(mod_cfg_t, "RCOLL_TEST_CFG_COUNT", "3", INT, count, 1, 8, "a count, 1 to 8"),
    RCOLL_KNOB_NUM(mod_cfg_t, "RCOLL_TEST_CFG_BYTES", "4K", SIZE, bytes, 0, 1 << 20,
                   "bytes, at most 1M"),
    RCOLL_KNOB_NUM(mod_cfg_t, "RCOLL_TEST_CFG_WAIT", "1.5", SECONDS, wait_s, 0, 60,
                   "seconds, at most a minute"),
    RCOLL_KNOB_SUBTABLE(mod_cfg_t, sub, sub_table),
};
static const rcoll_config_table_t mod_table = RCOLL_CONFIG_TABLE("mod", mod_knobs, mod_cfg_t);

static void test_module_table(void)
{
    static const char *const vars[] = {"RCOLL_TEST_CFG_MODE", "RCOLL_TEST_CFG_LEVEL",
                                       "RCOLL_TEST_CFG_COUNT", "RCOLL_TEST_CFG_BYTES",
                                       "RCOLL_TEST_CFG_WAIT", "RCOLL_CFGTEST_PATH"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
    mod_cfg_t m;
    CHECK(rcoll_config_parse(&mod_table, &m) == RCOLL_OK, "module defaults: %s", rcoll_err_get());
    CHECK(m.mode == 0 && m.level == 1 && m.count == 3 && m.bytes == 4096 && m.wait_s == 1.5 &&
              !strcmp(m.sub.path, "/tmp"),
          "module defaults applied (mode %d level %d count %d)", m.mode, m.level, m.count);
    setenv("RCOLL_TEST_CFG_MODE", "SAFE", 1); /* enums: any case */
    setenv("RCOLL_TEST_CFG_LEVEL", "high", 1);
    setenv("RCOLL_TEST_CFG_COUNT", "8", 1);
    setenv("RCOLL_CFGTEST_PATH", "/var", 1);
    CHECK(rcoll_config_parse(&mod_table, &m) == RCOLL_OK && m.mode == 2 && m.level == 2 &&
              m.count == 8 && !strcmp(m.sub.path, "/var"),
          "module environment applied, embedded table too");
    setenv("RCOLL_TEST_CFG_MODE", "", 1);
    CHECK(rcoll_config_parse(&mod_table, &m) == RCOLL_OK && m.mode == 0, "empty enum = default");
    char val[RCOLL_CFG_STR_MAX];
    rcoll_config_format(&m, &mod_knobs[1], val, sizeof(val));
    CHECK(!strcmp(val, "HIGH"), "an enum formats as its name: %s", val);

    static const struct {
        const char *var, *val, *says;
    } bad[] = {{"RCOLL_TEST_CFG_MODE", "slow", "is not one of auto, fast or safe"},
               {"RCOLL_TEST_CFG_LEVEL", "BEYOND", "is not one of LOW, MID or HIGH"},
               {"RCOLL_TEST_CFG_COUNT", "9", "out of range [1, 8]"},
               {"RCOLL_TEST_CFG_BYTES", "2M", "out of range [0, 1048576]"},
               {"RCOLL_TEST_CFG_WAIT", "61", "in (0, 60]"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (size_t j = 0; j < sizeof(vars) / sizeof(vars[0]); j++) unsetenv(vars[j]);
        setenv(bad[i].var, bad[i].val, 1);
        mod_cfg_t keep = m;
        CHECK(rcoll_config_parse(&mod_table, &m) == RCOLL_ERR_INVALID_ARG &&
                  strstr(rcoll_err_get(), bad[i].var) && strstr(rcoll_err_get(), bad[i].says),
              "%s=%s: '%s' says '%s'", bad[i].var, bad[i].val, rcoll_err_get(), bad[i].says);
        CHECK(!memcmp(&keep, &m, sizeof(m)), "output untouched on error");
    }
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);

    const rcoll_config_table_t *tables[] = {&mod_table};
    CHECK(rcoll_config_known(tables, 1, "RCOLL_CFGTEST_PATH", 18), "embedded knob known");
    CHECK(!rcoll_config_known(tables, 1, "RCOLL_NOPE", 10), "other name unknown");
}

static void test_addresses(void)
{
    rcoll_sockaddr_t a;
    char buf[64];
    CHECK(rcoll_net_parse_hostport("127.0.0.1:5000", &a) == RCOLL_OK &&
              !strcmp(rcoll_net_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:5000"),
          "ipv4 host:port");
    CHECK(rcoll_net_parse_hostport("[::1]:7", &a) == RCOLL_OK &&
              !strcmp(rcoll_net_addr_str(&a, buf, sizeof(buf)), "[::1]:7"),
          "ipv6 [host]:port");
    CHECK(rcoll_net_parse_hostport("localhost:80", &a) == RCOLL_OK, "name resolves");
    CHECK(rcoll_net_parse_hostport("127.0.0.1", &a) == RCOLL_ERR_INVALID_ARG, "missing port");
    CHECK(rcoll_net_parse_hostport("127.0.0.1:0", &a) == RCOLL_ERR_INVALID_ARG, "port 0");
    CHECK(rcoll_net_parse_hostport("127.0.0.1:70000", &a) == RCOLL_ERR_INVALID_ARG, "port range");
    CHECK(rcoll_net_parse_hostport("[::1:5", &a) == RCOLL_ERR_INVALID_ARG, "bad brackets");
    CHECK(strstr(rcoll_err_get(), "[::1:5") != NULL, "message quotes the input");
    char ifname[64];
    CHECK(rcoll_net_pick_addr("=lo", &a, ifname, sizeof(ifname)) == RCOLL_OK &&
              !strcmp(ifname, "lo"),
          "exact interface filter");
    CHECK(rcoll_net_pick_addr("=nosuchif0", &a, ifname, sizeof(ifname)) == RCOLL_ERR_SYSTEM &&
              strstr(rcoll_err_get(), "nosuchif0"),
          "missing interface named in the error");
    CHECK(rcoll_net_pick_addr("", &a, ifname, sizeof(ifname)) == RCOLL_OK,
          "default interface (or loopback) found");
}

static void test_status_strings(void)
{
    const rcoll_status_t all[] = {RCOLL_OK, RCOLL_INPROGRESS, RCOLL_ERR_INVALID_ARG,
                                  RCOLL_ERR_INVALID_USAGE, RCOLL_ERR_SYSTEM,
                                  RCOLL_ERR_NO_MEMORY, RCOLL_ERR_REMOTE, RCOLL_ERR_PROTOCOL,
                                  RCOLL_ERR_AUTH, RCOLL_ERR_TIMEOUT, RCOLL_ERR_UNSUPPORTED,
                                  RCOLL_ERR_INTERNAL};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        const char *s = rcoll_status_string(all[i]);
        CHECK(s && strcmp(s, "unknown status") != 0, "status %d has a string", (int)all[i]);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(s, rcoll_status_string(all[j])) != 0, "status strings distinct");
    }
    CHECK(!strcmp(rcoll_status_string((rcoll_status_t)12345), "unknown status"), "unknown");
    CHECK(rcoll_datatype_size(RCOLL_FLOAT16) == 2 && rcoll_datatype_size(RCOLL_FLOAT64) == 8 &&
              rcoll_datatype_size((rcoll_datatype_t)99) == 0,
          "datatype sizes");
    rcoll_err_set(RCOLL_ERR_REMOTE, "connection closed");
    rcoll_err_prefix("rank %d: ", 3);
    CHECK(!strcmp(rcoll_err_get(), "rank 3: connection closed"), "prefix: %s", rcoll_err_get());
}

/* The wait's phases: RCOLL_SPIN spins, then yields, then naps once the polling time is up -
 * and only then.  Watched through the state (no timing: naps would slow the test). */
static void test_backoff(void)
{
    rcoll_backoff_t b;
    rcoll_backoff_init(&b, 3, 0); /* no polling time: naps after the first clock readings */
    for (int i = 0; i < 3; i++) rcoll_backoff_wait(&b);
    CHECK(b.iter == 3 && b.nap_at_ns == 0, "3 spins, no yield yet (iter %u)", b.iter);
    int calls = 0;
    while (b.nap_at_ns != UINT64_MAX && calls < 1000) {
        rcoll_backoff_wait(&b);
        calls++;
    }
    CHECK(b.nap_at_ns == UINT64_MAX, "RCOLL_POLL_US=0 reaches the naps");
    CHECK(calls >= 64 && calls <= 129, "after one or two clock readings (%d yields)", calls);
    rcoll_backoff_reset(&b);
    CHECK(b.iter == 0 && b.nap_at_ns == 0, "reset starts over with spinning");

    rcoll_backoff_init(&b, 0, 3600ull * 1000000000ull); /* an hour of polling */
    for (int i = 0; i < 2000; i++) rcoll_backoff_wait(&b);
    CHECK(b.nap_at_ns != 0 && b.nap_at_ns != UINT64_MAX, "still yielding after 2000 calls");
}

int main(void)
{
    test_sizes();
    test_defaults_and_env();
    test_table();
    test_module_table();
    test_addresses();
    test_status_strings();
    test_backoff();
    return check_summary();
}
