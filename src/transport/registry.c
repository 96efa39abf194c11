/*
 * registry.c - the one list of transports (RCOLL_TRANSPORTS below): the names RCOLL_TRANSPORT
 * and RCOLL_NET accept, every transport's knob table (built or not: a bad value fails at
 * once, and rcoll-info -c lists them), the built ones in priority order; their once-per-
 * process initialisation (each with its own knobs, parsed here), the knobs all transports
 * share, and the shared stubs for operations a transport lacks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll_build.h"
#include "transport/ncclnet.h"
#include "transport/shm.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "transport/verbs_config.h"
#include "util/status.h"

/* The registry.  One line a transport, in priority order (for each peer the first that
 * reaches it is used): its name (a value of RCOLL_TRANSPORT, and of RCOLL_NET for a NET one),
 * LOCAL (processes of one host) or NET (other hosts), its knob table, its operations, and the
 * build it needs (ALWAYS, or VERBS: rdma-core found).  The NCCL net plugin ("plugin")
 * precedes rcoll's own network transports: it works only when RCOLL_NET_PLUGIN names one, and
 * naming one asks for it.  Adding a transport: its files (one build line), its ops with their
 * knob table, one line here; test_registry checks that each line agrees with its ops. */
#define RCOLL_TRANSPORTS(X)                                                                    \
    X("shm", LOCAL, rcoll_shm_config_table, rcoll_transport_shm, ALWAYS)                        \
    X("plugin", NET, rcoll_ncclnet_config_table, rcoll_transport_ncclnet, ALWAYS)               \
    X("verbs", NET, rcoll_vrb_config_table, rcoll_transport_verbs, VERBS)                       \
    X("tcp", NET, rcoll_tcp_config_table, rcoll_transport_tcp, ALWAYS)

#define IF_ALWAYS(...) __VA_ARGS__
#if RCOLL_HAVE_VERBS
#define IF_VERBS(...) __VA_ARGS__
#else
#define IF_VERBS(...)
#endif
#define IS_LOCAL_LOCAL 1
#define IS_LOCAL_NET 0
#define IF_NET_NET(...) __VA_ARGS__
#define IF_NET_LOCAL(...)

#define BUILT_OPS(name, reach, cfg, ops, need) IF_##need(&ops, )
static const rcoll_transport_ops_t *const builtin[] = {RCOLL_TRANSPORTS(BUILT_OPS)};
#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))
_Static_assert(NBUILTIN <= RCOLL_MAX_TRANSPORTS, "raise RCOLL_MAX_TRANSPORTS");

#define NAME_OF(name, reach, cfg, ops, need) name,
#define NET_NAME_OF(name, reach, cfg, ops, need) IF_NET_##reach(name, )
__thread uint64_t rcoll_transport_moves;

const char *const rcoll_transport_names[] = {"auto", RCOLL_TRANSPORTS(NAME_OF) NULL};
const char *const rcoll_net_names[] = {"auto", RCOLL_TRANSPORTS(NET_NAME_OF) NULL};

#define TABLE_OF(name, reach, cfg, ops, need) &cfg,
static const rcoll_config_table_t *const tables[] = {&rcoll_transport_config_table,
                                                     RCOLL_TRANSPORTS(TABLE_OF)};

/* Every line as data, for the check below. */
typedef struct {
    const char *name;
    int host_local;
    const rcoll_config_table_t *config;
    const rcoll_transport_ops_t *ops; /* NULL: not in this build */
} entry_t;
#define ENTRY_OF(name, reach, cfg, ops, need) {name, IS_LOCAL_##reach, &cfg, IF_##need(&ops) + 0},
static const entry_t entries[] = {RCOLL_TRANSPORTS(ENTRY_OF)};
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))

int rcoll_transport_value(const char *const *names, const char *name)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

const rcoll_config_table_t *const *rcoll_transport_config_tables(size_t *count)
{
    *count = sizeof(tables) / sizeof(tables[0]);
    return tables;
}

int rcoll_transport_registry_check(char *why, size_t len)
{
    size_t built = 0;
    for (size_t i = 0; i < NENTRIES; i++) {
        const entry_t *e = &entries[i];
        if (!e->ops) continue;
        if (strcmp(e->ops->name, e->name) || e->ops->host_local != e->host_local ||
            e->ops->config != e->config) {
            snprintf(why, len, "the registry's line \"%s\" does not match its ops (name %s, "
                     "host_local %d, knob table %s)", e->name, e->ops->name, e->ops->host_local,
                     e->ops->config ? e->ops->config->module : "none");
            return 0;
        }
        if (built >= NBUILTIN || builtin[built] != e->ops) {
            snprintf(why, len, "transport %s is not in the priority list at %zu", e->name,
                     built);
            return 0;
        }
        built++;
    }
    if (built != NBUILTIN) {
        snprintf(why, len, "%zu built transports listed, %zu in the priority list", built,
                 (size_t)NBUILTIN);
        return 0;
    }
    return 1;
}

static const rcoll_knob_t transport_knobs[] = {
    RCOLL_KNOB_NUM(rcoll_transport_config_t, "RCOLL_BUFFSIZE", "4M", SIZE, buffsize, 4096,
                   1LL << 32,
                   "staging bytes per peer connection: the bound on a communicator's memory "
                   "per peer"),
};
const rcoll_config_table_t rcoll_transport_config_table =
    RCOLL_CONFIG_TABLE("transport", transport_knobs, rcoll_transport_config_t);

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_done[NBUILTIN];
static rcoll_status_t init_status[NBUILTIN];
static char init_text[NBUILTIN][RCOLL_ERR_TEXT_MAX];
static void *init_cfg[NBUILTIN]; /* each transport's knobs, kept until released */

const rcoll_transport_ops_t *const *rcoll_transport_list(size_t *count)
{
    *count = NBUILTIN;
    return builtin;
}

int rcoll_transport_index(const rcoll_transport_ops_t *t)
{
    for (size_t i = 0; i < NBUILTIN; i++)
        if (builtin[i] == t) return (int)i;
    return -1;
}

const rcoll_transport_ops_t *rcoll_transport_find(const char *name)
{
    for (size_t i = 0; i < NBUILTIN; i++)
        if (!strcmp(builtin[i]->name, name)) return builtin[i];
    return NULL;
}

/* Parse t's knobs and initialise it with them. */
static rcoll_status_t init_one(const rcoll_transport_ops_t *t, size_t i)
{
    init_cfg[i] = calloc(1, t->config->size);
    if (!init_cfg[i])
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory for the knobs of transport %s",
                             t->name);
    rcoll_status_t st = rcoll_config_parse(t->config, init_cfg[i]);
    if (st != RCOLL_OK) return st;
    return t->init(init_cfg[i]);
}

rcoll_status_t rcoll_transport_ensure_init(const rcoll_transport_ops_t *t)
{
    size_t i = 0;
    while (i < NBUILTIN && builtin[i] != t) i++;
    if (i == NBUILTIN) return rcoll_err_set(RCOLL_ERR_INTERNAL, "unregistered transport");
    pthread_mutex_lock(&init_lock);
    if (!init_done[i]) {
        rcoll_err_clear();
        init_status[i] = init_one(t, i);
        snprintf(init_text[i], sizeof(init_text[i]), "%s", rcoll_err_get());
        init_done[i] = 1;
    }
    rcoll_status_t st = init_status[i];
    pthread_mutex_unlock(&init_lock);
    if (st != RCOLL_OK) return rcoll_err_set(st, "transport %s: %s", t->name, init_text[i]);
    return RCOLL_OK;
}

void rcoll_transport_release(const rcoll_transport_ops_t *const *finished, int n)
{
    pthread_mutex_lock(&init_lock);
    for (size_t i = 0; i < NBUILTIN; i++) {
        int done = init_done[i] && init_status[i] != RCOLL_OK;
        for (int k = 0; k < n && !done; k++) done = finished[k] == builtin[i];
        if (!done) continue;
        free(init_cfg[i]);
        init_cfg[i] = NULL;
        init_done[i] = 0;
    }
    pthread_mutex_unlock(&init_lock);
}

rcoll_status_t rcoll_transport_stub_iflush(void *recv_comm, int n, void **data, int *sizes,
                                           void **mhandles, void **request)
{
    (void)recv_comm, (void)n, (void)data, (void)sizes, (void)mhandles;
    *request = NULL; /* host memory needs no flush */
    return RCOLL_OK;
}

rcoll_status_t rcoll_transport_stub_reg_mr(void *comm, void *data, size_t size, int mem_type,
                                           void **mhandle)
{
    (void)comm, (void)data, (void)size;
    if (mem_type != RCOLL_PTR_HOST)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "this transport moves host memory only");
    *mhandle = NULL;
    return RCOLL_OK;
}

rcoll_status_t rcoll_transport_stub_dereg_mr(void *comm, void *mhandle)
{
    (void)comm, (void)mhandle;
    return RCOLL_OK;
}

void rcoll_transport_stub_describe(int dev, char *buf, size_t len)
{
    (void)dev;
    if (len) buf[0] = '\0';
}

int rcoll_transport_handle_present(const void *handle)
{
    const uint8_t *h = handle;
    for (int i = 0; i < RCOLL_TRANSPORT_HANDLE_MARK; i++)
        if (h[i]) return 1;
    return 0;
}

rcoll_status_t rcoll_transport_listen(const rcoll_transport_ops_t *t, int dev, void *handle,
                                      void **listen_comm)
{
    rcoll_status_t st = t->listen(dev, handle, listen_comm);
    if (st != RCOLL_OK || rcoll_transport_handle_present(handle)) return st;
    t->close_listen(*listen_comm);
    *listen_comm = NULL;
    return rcoll_err_set(RCOLL_ERR_INTERNAL, "transport %s made a listen handle whose first %d "
                         "bytes are zero (transport.h's handle rule)", t->name,
                         RCOLL_TRANSPORT_HANDLE_MARK);
}
