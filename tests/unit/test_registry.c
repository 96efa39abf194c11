/*
 * test_registry.c - the transport registry's rules, checked on the built-in transports and
 * on a scripted one: every op is set (callers never test for NULL), the static host_local flag
 * agrees with each device's properties, describe always terminates its text, and a listen
 * handle that breaks the handle rule (first bytes zero) is refused and its listener closed;
 * and the registry is the one list of transports (knob values, knob tables).
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/config.h"
#include "transport/transport.h"
#include "util/status.h"

static int fake_closed;

static rcoll_status_t zero_listen(int dev, void *handle, void **listen_comm)
{
    (void)dev;
    memset(handle, 0, RCOLL_TRANSPORT_HANDLE_BYTES);
    ((char *)handle)[RCOLL_TRANSPORT_HANDLE_MARK] = 1; /* filled, but not where the rule looks */
    *listen_comm = &fake_closed;
    return RCOLL_OK;
}

static rcoll_status_t fake_close_listen(void *listen_comm)
{
    CHECK(listen_comm == &fake_closed, "close_listen got the listener listen made");
    fake_closed++;
    return RCOLL_OK;
}

int main(void)
{
    size_t n;
    const rcoll_transport_ops_t *const *list = rcoll_transport_list(&n);
    int host_local = 0, usable = 0;
    for (size_t i = 0; i < n; i++) {
        const rcoll_transport_ops_t *t = list[i];
        CHECK(t->init && t->devices && t->get_props && t->describe && t->listen && t->connect &&
                  t->accept && t->reg_mr && t->dereg_mr && t->isend && t->irecv && t->iflush &&
                  t->test && t->close_send && t->close_recv && t->close_listen && t->fini,
              "transport %s has every op", t->name);
        host_local += t->host_local;
        if (rcoll_transport_ensure_init(t) != RCOLL_OK) continue; /* verbs without NIC */
        int ndev = 0;
        CHECK(t->devices(&ndev) == RCOLL_OK && ndev >= 1, "%s has a device", t->name);
        for (int d = 0; d < ndev; d++) {
            rcoll_transport_props_t p;
            memset(&p, 0, sizeof(p));
            CHECK(t->get_props(d, &p) == RCOLL_OK && p.host_local == t->host_local,
                  "%s device %d: props.host_local %d, ops host_local %d", t->name, d,
                  p.host_local, t->host_local);
            char text[4];
            memset(text, 'x', sizeof(text));
            t->describe(d, text, sizeof(text));
            CHECK(memchr(text, '\0', sizeof(text)) != NULL, "%s describe terminates", t->name);
        }
        char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
        void *lc = NULL;
        CHECK(rcoll_transport_listen(t, 0, handle, &lc) == RCOLL_OK &&
                  rcoll_transport_handle_present(handle),
              "%s listens with a handle the rule accepts: %s", t->name, rcoll_err_get());
        if (lc) t->close_listen(lc);
        usable++;
    }
    CHECK(host_local == 1 && usable >= 2, "shm is the one host-local transport (%d), shm and "
          "tcp usable here (%d)", host_local, usable);

    /* The registry is the one list: its lines agree with their ops, the knobs' values come
     * from it (every built transport by name; RCOLL_NET's only those that reach other
     * hosts), and every transport's knob table is among the library's tables. */
    char why[256] = "";
    CHECK(rcoll_transport_registry_check(why, sizeof(why)), "registry lines match: %s", why);
    size_t ntab, nreg;
    const rcoll_config_table_t *const *all = rcoll_config_tables(&ntab);
    const rcoll_config_table_t *const *reg = rcoll_transport_config_tables(&nreg);
    CHECK(nreg == 5 && reg[0] == &rcoll_transport_config_table,
          "the shared knobs, then the four transports' tables (%zu)", nreg);
    for (size_t r = 0; r < nreg; r++) {
        int found = 0;
        for (size_t k = 0; k < ntab; k++) found += all[k] == reg[r];
        CHECK(found == 1, "the library's tables hold %s's once (%d)", reg[r]->module, found);
    }
    CHECK(!strcmp(rcoll_transport_names[0], "auto") && !strcmp(rcoll_net_names[0], "auto"),
          "both knobs start with auto");
    for (size_t i = 0; i < n; i++) {
        int tv = rcoll_transport_value(rcoll_transport_names, list[i]->name);
        int nv = rcoll_transport_value(rcoll_net_names, list[i]->name);
        CHECK(tv > 0 && (list[i]->host_local ? nv < 0 : nv > 0),
              "%s: RCOLL_TRANSPORT value %d, RCOLL_NET value %d", list[i]->name, tv, nv);
    }
    CHECK(rcoll_transport_value(rcoll_transport_names, "verbs") > 0 &&
              rcoll_transport_value(rcoll_net_names, "verbs") > 0 &&
              rcoll_transport_value(rcoll_transport_names, "nope") < 0,
          "verbs is a value whether built or not; an unknown name is not");

    rcoll_transport_ops_t fake = *list[0];
    fake.name = "fake";
    fake.listen = zero_listen;
    fake.close_listen = fake_close_listen;
    char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    void *lc = (void *)1;
    rcoll_status_t st = rcoll_transport_listen(&fake, 0, handle, &lc);
    CHECK(st == RCOLL_ERR_INTERNAL && lc == NULL && fake_closed == 1 &&
              strstr(rcoll_err_get(), "handle rule"),
          "a zero-led handle is refused: %s '%s', closed %d", rcoll_status_string(st),
          rcoll_err_get(), fake_closed);
    CHECK(!rcoll_transport_handle_present(handle), "an all-zero mark means 'not listening'");
    return check_summary();
}
