/*
 * ncclnet.c - the "plugin" transport: an external NCCL net plugin (RCOLL_NET_PLUGIN, loaded
 * with dlopen; ncclNetPlugin_v12, v11, v10, v9 or v8) behind rcoll's transport contract.  It only
 * translates: each version's argument types, handles (an 8-byte mark in front of the plugin's
 * first 120 bytes), ncclResult_t to rcoll statuses (the plugin's own log lines reach rcoll's
 * log, subsystem NET, through the logger given to its init) and registrations (ncclnet_data.c).
 * This file: loading the plugin, its version, init/fini, devices, listen/connect/accept and the
 * ops table.  It knows nothing of ranks or collectives and never blocks.
 */
#include "transport/ncclnet_int.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/status.h"

#define NN_COMM_ID 0x72636f6c6c000001ull /* v11+ init's commId: one context per process */

static const rcoll_knob_t nn_knobs[] = {
    RCOLL_KNOB_STR(rcoll_ncclnet_config_t, "RCOLL_NET_PLUGIN", "", plugin,
                   "NCCL net plugin used as rcoll's network transport 'plugin' (RCOLL_NET="
                   "plugin, or auto): a path (has a '/': loaded as is) or a name N (dlopen N, "
                   "then libnccl-net-N.so); \"\" = none"),
};
const rcoll_config_table_t rcoll_ncclnet_config_table =
    RCOLL_CONFIG_TABLE("net-plugin", nn_knobs, rcoll_ncclnet_config_t);

/* ---------------------------------------------------------------------------------------------
 * The plugin, loaded once per process by nn_init
 * ------------------------------------------------------------------------------------------ */

nn_global_t nn = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The last WARN the plugin logged on this thread, for the error text of the call that fails. */
static __thread char nn_warned[256];

/* NCCL's logger, handed to the plugin's init: its lines go to rcoll's log (subsystem NET). */
static void nn_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void nn_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                      const char *fmt, ...)
{
    (void)flags;
    if (level == NCCL_LOG_NONE) return;
    rcoll_log_level_t lvl = level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT ? RCOLL_LOG_WARN
                            : level == NCCL_LOG_TRACE                         ? RCOLL_LOG_TRACE
                                                                              : RCOLL_LOG_INFO;
    int show = RCOLL_LOG_ENABLED((int)lvl, RCOLL_SUBSYS_NET);
    if (!show && lvl != RCOLL_LOG_WARN) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt ? fmt : "", ap);
    va_end(ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = '\0';
    if (lvl == RCOLL_LOG_WARN) snprintf(nn_warned, sizeof(nn_warned), "%s", msg);
    if (show)
        rcoll_log_write(lvl, RCOLL_SUBSYS_NET, "net plugin %s: %s (%s:%d)", nn.name, msg,
                        file ? file : "?", line);
}

const char *nn_result_name(ncclResult_t r)
{
    switch (r) {
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "an unknown ncclResult_t";
    }
}

static rcoll_status_t nn_status(ncclResult_t r)
{
    switch (r) {
    case ncclUnhandledCudaError:
    case ncclSystemError: return RCOLL_ERR_SYSTEM;
    case ncclInvalidArgument: return RCOLL_ERR_INVALID_ARG;
    case ncclInvalidUsage: return RCOLL_ERR_INVALID_USAGE;
    case ncclRemoteError: return RCOLL_ERR_REMOTE;
    default: return RCOLL_ERR_INTERNAL;
    }
}

/* The plugin's call failed with r: the status, with a sentence naming the plugin, the call
 * and what the plugin said (its last WARN on this thread). */
rcoll_status_t nn_err(ncclResult_t r, const char *call)
{
    rcoll_status_t st = nn_status(r);
    if (nn_warned[0]) {
        rcoll_err_set(st, "net plugin %s: %s failed with %s (%d): %s", nn.path, call,
                      nn_result_name(r), (int)r, nn_warned);
        nn_warned[0] = '\0';
    } else {
        rcoll_err_set(st, "net plugin %s: %s failed with %s (%d)", nn.path, call,
                      nn_result_name(r), (int)r);
    }
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Init: load, choose the version, init, read the devices
 * ------------------------------------------------------------------------------------------ */

/* NCCL's lookup: a path (with '/') as is; a name N as "N", then "libnccl-net-N.so". */
static rcoll_status_t nn_load(const char *want)
{
    char alt[RCOLL_CFG_STR_MAX + 32], err1[256] = "";
    const char *tried = want;
    dlerror();
    nn.lib = dlopen(want, RTLD_NOW | RTLD_LOCAL);
    if (!nn.lib && !strchr(want, '/')) {
        const char *e = dlerror();
        snprintf(err1, sizeof(err1), "%s", e ? e : "?");
        snprintf(alt, sizeof(alt), "libnccl-net-%s.so", want);
        tried = alt;
        nn.lib = dlopen(alt, RTLD_NOW | RTLD_LOCAL);
    }
    if (!nn.lib) {
        const char *e = dlerror();
        if (err1[0])
            return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "RCOLL_NET_PLUGIN=%s: cannot load it "
                                 "(%s), nor %s (%s)", want, err1, tried, e ? e : "?");
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "RCOLL_NET_PLUGIN=%s: cannot load it (%s)",
                             want, e ? e : "?");
    }
    struct link_map *lm = NULL;
    const char *path = tried;
    if (dlinfo(nn.lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        path = lm->l_name;
    size_t n = strlen(path);
    if (n >= sizeof(nn.path)) n = sizeof(nn.path) - 1;
    memcpy(nn.path, path, n);
    nn.path[n] = '\0';
    return RCOLL_OK;
}

/* The newest version rcoll knows that the plugin exports. */
static rcoll_status_t nn_pick_version(void)
{
    static const char *const syms[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11",
                                       "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                                       "ncclNetPlugin_v8"};
    void *t = NULL;
    for (int i = 0; i < 5 && !t; i++) {
        t = dlsym(nn.lib, syms[i]);
        if (t) nn.version = 12 - i;
    }
    if (!t) {
        char found[256] = "";
        size_t n = 0;
        for (int v = 1; v <= 32 && n < sizeof(found); v++) {
            char sym[32];
            snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
            if (dlsym(nn.lib, sym))
                n += (size_t)snprintf(found + n, sizeof(found) - n, "%s%s", n ? ", " : "", sym);
        }
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "net plugin %s exports %s; rcoll takes "
                             "ncclNetPlugin_v8 to v12", nn.path,
                             n ? found : "no ncclNetPlugin_vN symbol");
    }
    const char *name = NULL;
    int ok, has_init;
    /* The members every version has, from the table of its own type; ok: the ones whose
     * signature differs between versions (called through nn.vN) are there too. */
#define NN_TAKE(tab)                                                                   \
    do {                                                                               \
        name = (tab)->name;                                                            \
        nn.devices = (tab)->devices;                                                   \
        nn.accept = (tab)->accept;                                                     \
        nn.reg_mr = (tab)->regMr;                                                      \
        nn.dereg_mr = (tab)->deregMr;                                                  \
        nn.iflush = (tab)->iflush;                                                     \
        nn.test = (tab)->test;                                                         \
        nn.close_send = (tab)->closeSend;                                              \
        nn.close_recv = (tab)->closeRecv;                                              \
        nn.close_listen = (tab)->closeListen;                                          \
        has_init = (tab)->init != NULL;                                                \
        ok = has_init && (tab)->getProperties && (tab)->listen && (tab)->connect &&    \
             (tab)->isend && (tab)->irecv;                                             \
    } while (0)
    /* v11+: the members that take the context (init is checked by NN_TAKE) */
#define NN_TAKE_CX(tab)                                                                \
    do {                                                                               \
        nn.cx_init = (tab)->init;                                                      \
        nn.cx_listen = (tab)->listen;                                                  \
        nn.cx_connect = (tab)->connect;                                                \
        nn.cx_isend = (tab)->isend;                                                    \
        nn.cx_irecv = (tab)->irecv;                                                    \
        nn.cx_finalize = (tab)->finalize;                                              \
    } while (0)
    switch (nn.version) {
    case 8:
        nn.v8 = t;
        NN_TAKE(nn.v8);
        break;
    case 9:
        nn.v9 = t;
        NN_TAKE(nn.v9);
        break;
    case 10:
        nn.v10 = t;
        NN_TAKE(nn.v10);
        break;
    case 11:
        nn.v11 = t;
        NN_TAKE(nn.v11);
        NN_TAKE_CX(nn.v11);
        break;
    default:
        nn.v12 = t;
        NN_TAKE(nn.v12);
        NN_TAKE_CX(nn.v12);
        break;
    }
#undef NN_TAKE
#undef NN_TAKE_CX
    snprintf(nn.name, sizeof(nn.name), "%s", name ? name : "(unnamed)");
    nn.complete = ok && nn.devices && nn.accept && nn.reg_mr && nn.dereg_mr && nn.test &&
                  nn.close_send && nn.close_recv && nn.close_listen;
    if (!has_init)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "net plugin %s (ncclNetPlugin_v%d, name "
                             "%s) has no init function", nn.path, nn.version, nn.name);
    return RCOLL_OK;
}

static ncclResult_t nn_call_init(void)
{
    ncclNetCommConfig_v11_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
    switch (nn.version) {
    case 8: return nn.v8->init(nn_logger);
    case 9: return nn.v9->init(nn_logger);
    case 10: return nn.v10->init(nn_logger, NULL);
    default: return nn.cx_init(&nn.ctx, NN_COMM_ID, &cfg, nn_logger, NULL);
    }
}

/* Fields every properties version shares. */
#define NN_COMMON(p, x, q)                                                             \
    do {                                                                               \
        snprintf((p)->name, sizeof((p)->name), "%s", (q).name ? (q).name : "?");       \
        snprintf((p)->pci_path, sizeof((p)->pci_path), "%s", (q).pciPath ? (q).pciPath : ""); \
        (p)->guid = (q).guid;                                                          \
        (p)->ptr_support = (q).ptrSupport & (RCOLL_PTR_HOST | RCOLL_PTR_CUDA | RCOLL_PTR_DMABUF); \
        (p)->speed_mbps = (q).speed;                                                   \
        (p)->port = (q).port;                                                          \
        (p)->latency_us = (q).latency;                                                 \
        (p)->max_comms = (q).maxComms;                                                 \
        (x)->ptr_support = (q).ptrSupport;                                             \
        (x)->reg_is_global = (q).regIsGlobal;                                          \
        (x)->max_recvs = (q).maxRecvs;                                                 \
    } while (0)

static rcoll_status_t nn_read_props(int dev, rcoll_transport_props_t *p, nn_devx_t *x)
{
    ncclResult_t r;
    memset(p, 0, sizeof(*p));
    size_t p2p = 0;
    if (nn.version == 8) {
        ncclNetProperties_v8_t q;
        memset(&q, 0, sizeof(q));
        r = nn.v8->getProperties(dev, &q);
        if (r == ncclSuccess) NN_COMMON(p, x, q);
        p2p = INT_MAX; /* v8 sizes are int */
    } else if (nn.version < 11) {
        ncclNetProperties_v9_t q;
        memset(&q, 0, sizeof(q));
        r = nn.version == 9 ? nn.v9->getProperties(dev, &q) : nn.v10->getProperties(dev, &q);
        if (r == ncclSuccess) NN_COMMON(p, x, q);
        p2p = q.maxP2pBytes;
    } else if (nn.version == 11) {
        ncclNetProperties_v11_t q;
        memset(&q, 0, sizeof(q));
        r = nn.v11->getProperties(dev, &q);
        if (r == ncclSuccess) NN_COMMON(p, x, q);
        p2p = q.maxP2pBytes;
    } else {
        ncclNetProperties_v12_t q;
        memset(&q, 0, sizeof(q));
        r = nn.v12->getProperties(dev, &q);
        if (r == ncclSuccess) NN_COMMON(p, x, q);
        p2p = q.maxP2pBytes;
    }
    if (r != ncclSuccess) return nn_err(r, "getProperties");
    p->max_recvs = x->max_recvs < 1                           ? 1
                   : x->max_recvs > RCOLL_TRANSPORT_MAX_RECVS ? RCOLL_TRANSPORT_MAX_RECVS
                                                              : x->max_recvs;
    p->max_msg_size = p2p ? p2p : (size_t)NCCL_MAX_NET_SIZE_BYTES;
    p->host_local = 0;
    return RCOLL_OK;
}
#undef NN_COMMON

static void nn_unload(void)
{
    if (nn.lib) dlclose(nn.lib);
    nn.lib = NULL;
    nn.v8 = NULL;
    nn.v9 = NULL;
    nn.v10 = NULL;
    nn.v11 = NULL;
    nn.v12 = NULL;
    nn.cx_init = NULL;
    nn.cx_listen = NULL;
    nn.cx_connect = NULL;
    nn.cx_isend = NULL;
    nn.cx_irecv = NULL;
    nn.cx_finalize = NULL;
    nn.ctx = NULL;
    nn.ndev = 0;
}

static rcoll_status_t nn_init(const void *cfgp)
{
    const rcoll_ncclnet_config_t *cfg = cfgp;
    if (!cfg->plugin[0]) return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "RCOLL_NET_PLUGIN is not set");
    snprintf(nn.name, sizeof(nn.name), "%.63s", cfg->plugin);
    rcoll_status_t st = nn_load(cfg->plugin);
    if (st != RCOLL_OK) return st;
    st = nn_pick_version();
    if (st != RCOLL_OK) goto err_unload;
    nn_warned[0] = '\0';
    ncclResult_t r = nn_call_init();
    if (r != ncclSuccess) {
        nn_err(r, "init");
        st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "%s (ncclNetPlugin_v%d, name %s)",
                           rcoll_err_get(), nn.version, nn.name);
        goto err_unload;
    }
    int ndev = 0;
    r = nn.devices ? nn.devices(&ndev) : ncclInternalError;
    if (r != ncclSuccess) {
        nn_err(r, "devices");
        st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "%s", rcoll_err_get());
        goto err_finalize;
    }
    if (ndev < 1) {
        st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "net plugin %s (ncclNetPlugin_v%d, name %s) "
                           "reports no device", nn.path, nn.version, nn.name);
        goto err_finalize;
    }
    if (!nn.complete) {
        st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "net plugin %s (ncclNetPlugin_v%d, name %s) "
                           "lacks a function NCCL requires", nn.path, nn.version, nn.name);
        goto err_finalize;
    }
    if (ndev > NN_MAX_DEVS) {
        RCOLL_INFO(NET, "net plugin %s has %d devices; rcoll uses the first %d", nn.path, ndev,
                   NN_MAX_DEVS);
        ndev = NN_MAX_DEVS;
    }
    for (int d = 0; d < ndev; d++) {
        st = nn_read_props(d, &nn.props[d], &nn.devx[d]);
        if (st != RCOLL_OK) goto err_finalize;
    }
    nn.ndev = ndev;
    RCOLL_INFO(NET, "net plugin %s loaded: ncclNetPlugin_v%d, name %s, %d device(s), the first "
               "%s", nn.path, nn.version, nn.name, ndev, nn.props[0].name);
    return RCOLL_OK;

err_finalize:
    if (nn.version >= 11 && nn.cx_finalize) nn.cx_finalize(nn.ctx);
err_unload:
    nn_unload();
    return st;
}

static void nn_fini(void)
{
    pthread_mutex_lock(&nn.lock);
    for (nn_connect_t *k = nn.connects, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    nn.connects = NULL;
    pthread_mutex_unlock(&nn.lock);
    if (!nn.lib) return;
    if (nn.version >= 11 && nn.cx_finalize) nn.cx_finalize(nn.ctx);
    nn_unload();
}

static rcoll_status_t nn_devices(int *ndev)
{
    *ndev = nn.ndev;
    return RCOLL_OK;
}

static int nn_dev_ok(int dev) { return dev >= 0 && dev < nn.ndev; }

static rcoll_status_t nn_get_props(int dev, rcoll_transport_props_t *props)
{
    if (!nn_dev_ok(dev))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin: no device %d", dev);
    *props = nn.props[dev];
    return RCOLL_OK;
}

static void nn_describe(int dev, char *buf, size_t len)
{
    if (!len) return;
    buf[0] = '\0';
    if (!nn_dev_ok(dev)) return;
    const rcoll_transport_props_t *p = &nn.props[dev];
    const nn_devx_t *x = &nn.devx[dev];
    snprintf(buf, len,
             "NCCL net plugin %s, ncclNetPlugin_v%d, name %s\n"
             "plugin device %d: ptrSupport 0x%x, regIsGlobal %d, maxRecvs %d (rcoll uses %d), "
             "largest message %zu B, PCI %s\n",
             nn.path, nn.version, nn.name, dev, x->ptr_support, x->reg_is_global, x->max_recvs,
             p->max_recvs, p->max_msg_size, p->pci_path[0] ? p->pci_path : "none (virtual)");
}

/* ---------------------------------------------------------------------------------------------
 * Listen, connect, accept, close a listener
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    void *plc;
    int dev;
} nn_listen_t;

static rcoll_status_t nn_listen(int dev, void *handle, void **listen_comm)
{
    uint8_t ph[NCCL_NET_HANDLE_MAXSIZE];
    void *plc = NULL;
    if (!nn_dev_ok(dev))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin: no device %d", dev);
    memset(ph, 0, sizeof(ph));
    nn_warned[0] = '\0';
    ncclResult_t r = nn.version >= 11 ? nn.cx_listen(nn.ctx, dev, ph, &plc)
                     : nn.version == 10 ? nn.v10->listen(dev, ph, &plc)
                     : nn.version == 9  ? nn.v9->listen(dev, ph, &plc)
                                        : nn.v8->listen(dev, ph, &plc);
    if (r != ncclSuccess) return nn_err(r, "listen");
    for (int i = RCOLL_NCCLNET_PLUGIN_HANDLE; i < NCCL_NET_HANDLE_MAXSIZE; i++) {
        if (ph[i]) {
            nn.close_listen(plc);
            return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "net plugin %s: its listen handle uses "
                                 "byte %d; rcoll carries the first %d bytes of a plugin's "
                                 "handle (docs/plugin.md)", nn.path, i,
                                 RCOLL_NCCLNET_PLUGIN_HANDLE);
        }
    }
    nn_listen_t *l = malloc(sizeof(*l));
    if (!l) {
        nn.close_listen(plc);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "net plugin: no memory for a listener");
    }
    l->plc = plc;
    l->dev = dev;
    uint64_t magic = RCOLL_NCCLNET_HANDLE_MAGIC;
    memset(handle, 0, RCOLL_TRANSPORT_HANDLE_BYTES);
    memcpy(handle, &magic, sizeof(magic));
    memcpy((uint8_t *)handle + sizeof(magic), ph, RCOLL_NCCLNET_PLUGIN_HANDLE);
    *listen_comm = l;
    return RCOLL_OK;
}

/* The buffer of the connect to handle in progress (made at its first call); NULL: no memory. */
static nn_connect_t *nn_connect_get(const void *handle, int dev)
{
    nn_connect_t *k;
    pthread_mutex_lock(&nn.lock);
    for (nn_connect_t **pp = &nn.connects; (k = *pp) != NULL; pp = &k->next) {
        if (k->key != handle || k->dev != dev) continue;
        if (!memcmp(k->orig, handle, sizeof(k->orig))) break;
        *pp = k->next; /* the same address now holds another handle: a connect abandoned */
        free(k);
        k = NULL;
        break;
    }
    if (!k && (k = calloc(1, sizeof(*k))) != NULL) {
        k->key = handle;
        k->dev = dev;
        memcpy(k->orig, handle, sizeof(k->orig));
        memcpy(k->work, (const uint8_t *)handle + 8, RCOLL_NCCLNET_PLUGIN_HANDLE);
        k->next = nn.connects;
        nn.connects = k;
    }
    pthread_mutex_unlock(&nn.lock);
    return k;
}

static void nn_connect_end(nn_connect_t *k)
{
    pthread_mutex_lock(&nn.lock);
    for (nn_connect_t **pp = &nn.connects; *pp; pp = &(*pp)->next) {
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    }
    pthread_mutex_unlock(&nn.lock);
    free(k);
}

static rcoll_status_t nn_connect(int dev, const void *handle, void **send_comm)
{
    uint64_t magic;
    *send_comm = NULL;
    memcpy(&magic, handle, sizeof(magic));
    if (magic != RCOLL_NCCLNET_HANDLE_MAGIC || !nn_dev_ok(dev))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin transport: connect to a handle "
                             "it did not make, or to no device %d", dev);
    nn_connect_t *k = nn_connect_get(handle, dev);
    if (!k) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "net plugin: no memory to connect");
    ncclNetCommConfig_v10_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ncclNetDeviceHandle_t *dev_comm = NULL; /* host networking: passed, never read */
    void *psc = NULL;
    nn_warned[0] = '\0';
    ncclResult_t r = nn.version >= 11 ? nn.cx_connect(nn.ctx, dev, k->work, &psc, &dev_comm)
                     : nn.version == 10 ? nn.v10->connect(dev, &cfg, k->work, &psc, &dev_comm)
                     : nn.version == 9  ? nn.v9->connect(dev, k->work, &psc, &dev_comm)
                                        : nn.v8->connect(dev, k->work, &psc, &dev_comm);
    if (r != ncclSuccess) {
        nn_connect_end(k);
        return nn_err(r, "connect");
    }
    if (!psc) return RCOLL_OK; /* not yet: called again with the same handle */
    nn_connect_end(k);
    nn_comm_t *c = nn_comm_new(psc, NN_SEND_MAGIC, dev);
    if (!c) {
        nn.close_send(psc);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "net plugin: no memory for a send comm");
    }
    *send_comm = c;
    return RCOLL_OK;
}

static rcoll_status_t nn_accept(void *listen_comm, void **recv_comm)
{
    nn_listen_t *l = listen_comm;
    ncclNetDeviceHandle_t *dev_comm = NULL;
    void *prc = NULL;
    *recv_comm = NULL;
    nn_warned[0] = '\0';
    ncclResult_t r = nn.accept(l->plc, &prc, &dev_comm);
    if (r != ncclSuccess) return nn_err(r, "accept");
    if (!prc) return RCOLL_OK;
    nn_comm_t *c = nn_comm_new(prc, NN_RECV_MAGIC, l->dev);
    if (!c) {
        nn.close_recv(prc);
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "net plugin: no memory for a recv comm");
    }
    *recv_comm = c;
    return RCOLL_OK;
}

static rcoll_status_t nn_close_listen(void *listen_comm)
{
    nn_listen_t *l = listen_comm;
    ncclResult_t r = nn.close_listen(l->plc);
    free(l);
    return r == ncclSuccess ? RCOLL_OK : nn_err(r, "closeListen");
}

const rcoll_transport_ops_t rcoll_transport_ncclnet = {
    .name = "plugin",
    .host_local = 0,
    .config = &rcoll_ncclnet_config_table,
    .init = nn_init,
    .devices = nn_devices,
    .get_props = nn_get_props,
    .describe = nn_describe,
    .listen = nn_listen,
    .connect = nn_connect,
    .accept = nn_accept,
    .reg_mr = nn_reg_mr,
    .dereg_mr = nn_dereg_mr,
    .isend = nn_isend,
    .irecv = nn_irecv,
    .iflush = nn_iflush,
    .test = nn_test,
    .close_send = nn_close_send,
    .close_recv = nn_close_recv,
    .close_listen = nn_close_listen,
    .fini = nn_fini,
};
