/*
 * registry.c - the built-in transports in priority order, their once-per-process
 * initialisation (each with its own knobs, parsed here), the knobs all transports share,
 * and the shared stubs for operations a transport lacks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll_build.h"
#include "transport/transport.h"
#include "util/status.h"

/* Priority order: for each peer the first one that reaches it is used.  The NCCL net plugin
 * ("plugin") precedes rcoll's own network transports: it works only when RCOLL_NET_PLUGIN
 * names one, and naming one asks for it. */
static const rcoll_transport_ops_t *const builtin[] = {&rcoll_transport_shm,
                                                       &rcoll_transport_ncclnet,
#if RCOLL_HAVE_VERBS
                                                       &rcoll_transport_verbs,
#endif
                                                       &rcoll_transport_tcp};
#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))
_Static_assert(NBUILTIN <= RCOLL_MAX_TRANSPORTS, "raise RCOLL_MAX_TRANSPORTS");

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
