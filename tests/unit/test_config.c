/*
 * test_config.c - the knob table and its parser, address parsing, interface filters and
 * status strings: pure logic, no sockets opened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/config.h"
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
    size_t n;
    const rcoll_knob_t *k = rcoll_config_knobs(&n);
    for (size_t i = 0; i < n; i++) unsetenv(k[i].name);
}

static void test_defaults_and_env(void)
{
    clear_env();
    rcoll_config_t c;
    CHECK(rcoll_config_load(&c) == RCOLL_OK, "defaults load");
    CHECK(c.timeout_s == 300, "default timeout 300 s, got %g", c.timeout_s);
    CHECK(c.buffsize == (4u << 20), "default buffsize 4 MiB");
    CHECK(c.rank == -1 && c.nranks == -1 && c.root[0] == 0, "launch vars unset");
    CHECK(c.buffsize <= (8u << 20), "default per-connection memory within 8 MiB");
    CHECK(c.poll_us == 20000, "default polling before naps 20 ms, got %d us", c.poll_us);

    setenv("RCOLL_TIMEOUT", "2.5", 1);
    setenv("RCOLL_BUFFSIZE", "1M", 1);
    setenv("RCOLL_SOCKET_NSOCKS", "4", 1);
    setenv("RCOLL_SOCKET_IFNAME", "^docker,lo", 1);
    CHECK(rcoll_config_load(&c) == RCOLL_OK, "env load");
    CHECK(c.timeout_s == 2.5 && c.buffsize == (1u << 20) && c.socket_nsocks == 4 &&
              !strcmp(c.socket_ifname, "^docker,lo"),
          "env values applied");

    static const struct {
        const char *var, *val;
    } bad[] = {{"RCOLL_TIMEOUT", "soon"},     {"RCOLL_TIMEOUT", "-1"},
               {"RCOLL_BUFFSIZE", "lots"},    {"RCOLL_BUFFSIZE", "1"},
               {"RCOLL_SOCKET_NSOCKS", "0"},  {"RCOLL_SOCKET_NSOCKS", "3x"},
               {"RCOLL_DEBUG", "LOUD"},       {"RCOLL_ALGO", "magic"},
               {"RCOLL_POLL_US", "-5"},       {"RCOLL_POLL_US", "1ms"}};
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
    clear_env();
}

static void test_table(void)
{
    size_t n;
    const rcoll_knob_t *k = rcoll_config_knobs(&n);
    CHECK(n >= 10, "knob table has entries");
    for (size_t i = 0; i < n; i++) {
        CHECK(!strncmp(k[i].name, "RCOLL_", 6), "knob %s prefixed", k[i].name);
        CHECK(k[i].help && strlen(k[i].help) > 10, "knob %s has help", k[i].name);
        for (size_t j = i + 1; j < n; j++)
            CHECK(strcmp(k[i].name, k[j].name) != 0, "knob %s declared once", k[i].name);
    }
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
    test_addresses();
    test_status_strings();
    test_backoff();
    return check_summary();
}
