/*
 * ncclnet.c - the "plugin" transport: an external NCCL net plugin (RCOLL_NET_PLUGIN, loaded
 * with dlopen; ncclNetPlugin_v12, v11, v10, v9 or v8) behind rcoll's transport contract.  It only
 * translates: each version's argument types, handles (an 8-byte mark in front of the plugin's
 * first 120 bytes), ncclResult_t to rcoll statuses (the plugin's own log lines reach rcoll's
 * log, subsystem NET, through the logger given to its init), and memory registrations: NCCL
 * plugins need one for every buffer, while rcoll's core passes unregistered ones, so each comm
 * registers those itself (nn_cache_*).  It knows nothing of ranks or collectives, never
 * blocks, and never keeps a registration of memory it cannot know to be alive (see
 * nn_cache_get).
 */
#include "transport/ncclnet.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/nccl_net.h"
#include "util/log.h"
#include "util/status.h"

#define NN_MAX_DEVS 32   /* plugin devices used at most */
#define NN_MAX_REQS 64   /* requests in flight per comm (NCCL plugins accept at least 32) */
#define NN_CACHE 64      /* registrations a comm holds at most (see nn_cache_get) */
#define NN_COMM_ID 0x72636f6c6c000001ull /* v11+ init's commId: one context per process */
#define NN_SEND_MAGIC 0x6e6e5353u        /* "nnSS" */
#define NN_RECV_MAGIC 0x6e6e5352u        /* "nnSR" */
#define NN_MR_MAGIC 0x6e6e4d52u          /* "nnMR" */

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

/* A registration made through reg_mr (the core's long-lived staging memory). */
typedef struct nn_mr {
    uint32_t magic; /* NN_MR_MAGIC */
    void *pmh;      /* the plugin's mhandle */
    uintptr_t start, end;
    struct nn_mr *next; /* in nn.mrs */
} nn_mr_t;

/* A connect in progress: NCCL plugins keep their connect state inside the handle they are
 * given (NCCL passes the same buffer again), so each one gets a buffer that lives until the
 * connect ends.  Keyed by the caller's handle (address and content). */
typedef struct nn_connect {
    const void *key;
    int dev;
    uint8_t orig[RCOLL_TRANSPORT_HANDLE_BYTES];
    uint8_t work[NCCL_NET_HANDLE_MAXSIZE];
    struct nn_connect *next;
} nn_connect_t;

/* What a device is beyond rcoll_transport_props_t, for describe. */
typedef struct {
    int ptr_support, reg_is_global, max_recvs;
} nn_devx_t;

static struct {
    void *lib;
    char path[RCOLL_CFG_STR_MAX]; /* the file dlopen loaded */
    char name[64];                /* the plugin's name field */
    int version;                  /* 8 .. 12 */
    int complete;                 /* every function rcoll calls is there (after init) */
    const ncclNet_v8_t *v8;
    const ncclNet_v9_t *v9;
    const ncclNet_v10_t *v10;
    const ncclNet_v11_t *v11;
    const ncclNet_v12_t *v12;
    void *ctx; /* v11+'s context */
    /* v11 and v12 (one table layout, except the properties): the members that take the
     * context, from the version's table */
    ncclResult_t (*cx_init)(void **, uint64_t, ncclNetCommConfig_v11_t *, ncclDebugLogger_t,
                            ncclProfilerCallback_t);
    ncclResult_t (*cx_listen)(void *, int, void *, void **);
    ncclResult_t (*cx_connect)(void *, int, void *, void **, ncclNetDeviceHandle_t **);
    ncclResult_t (*cx_isend)(void *, void *, size_t, int, void *, void *, void **);
    ncclResult_t (*cx_irecv)(void *, int, void **, size_t *, int *, void **, void **, void **);
    ncclResult_t (*cx_finalize)(void *);
    /* the members whose type is the same in every version, from the version's table */
    ncclResult_t (*devices)(int *);
    ncclResult_t (*accept)(void *, void **, ncclNetDeviceHandle_t **);
    ncclResult_t (*reg_mr)(void *, void *, size_t, int, void **);
    ncclResult_t (*dereg_mr)(void *, void *);
    ncclResult_t (*iflush)(void *, int, void **, int *, void **, void **);
    ncclResult_t (*test)(void *, int *, int *);
    ncclResult_t (*close_send)(void *);
    ncclResult_t (*close_recv)(void *);
    ncclResult_t (*close_listen)(void *);
    int ndev;
    rcoll_transport_props_t props[NN_MAX_DEVS];
    nn_devx_t devx[NN_MAX_DEVS];
    pthread_mutex_t lock; /* mrs and connects */
    nn_mr_t *mrs;
    nn_connect_t *connects;
} nn = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

static const char *nn_result_name(ncclResult_t r)
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
static rcoll_status_t nn_err(ncclResult_t r, const char *call)
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
 * Comms, requests and the registration cache
 * ------------------------------------------------------------------------------------------ */

typedef struct nn_comm nn_comm_t;

/* One registration a comm made itself, for buffers passed without mhandle. */
typedef struct {
    int in_use;
    int refs;  /* requests using it */
    int keep;  /* inside a reg_mr registration: kept after use, until evicted or closed */
    uintptr_t start, end;
    uint64_t used; /* LRU stamp */
    void *pmh;
} nn_ent_t;

typedef struct {
    nn_comm_t *comm;
    void *preq;
    int n;    /* sizes test reports */
    int nent; /* registrations the request holds */
    nn_ent_t *ent[RCOLL_TRANSPORT_MAX_RECVS];
} nn_req_t;

struct nn_comm {
    uint32_t magic; /* NN_SEND_MAGIC or NN_RECV_MAGIC */
    void *pc;       /* the plugin's comm */
    int max_recvs;
    rcoll_status_t failed; /* after an error: every later call fails with it */
    char errtext[RCOLL_ERR_TEXT_MAX];
    uint64_t clock;
    nn_ent_t ent[NN_CACHE];
    int nfree;
    nn_req_t *free_reqs[NN_MAX_REQS];
    nn_req_t reqs[NN_MAX_REQS];
};

typedef struct {
    void *plc;
    int dev;
} nn_listen_t;

/* Mark c failed with st, whose text rcoll_err_set has just recorded. */
static rcoll_status_t nn_fail(nn_comm_t *c, rcoll_status_t st)
{
    c->failed = st;
    snprintf(c->errtext, sizeof(c->errtext), "%s", rcoll_err_get());
    return st;
}

static rcoll_status_t nn_failed(const nn_comm_t *c)
{
    return rcoll_err_set(c->failed, "%s", c->errtext);
}

static nn_comm_t *nn_comm_new(void *pc, uint32_t magic, int dev)
{
    nn_comm_t *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->magic = magic;
    c->pc = pc;
    c->max_recvs = nn.props[dev].max_recvs;
    for (int i = 0; i < NN_MAX_REQS; i++) {
        c->reqs[i].comm = c;
        c->free_reqs[i] = &c->reqs[NN_MAX_REQS - 1 - i];
    }
    c->nfree = NN_MAX_REQS;
    return c;
}

static void nn_ent_drop(nn_comm_t *c, nn_ent_t *e)
{
    ncclResult_t r = nn.dereg_mr(c->pc, e->pmh);
    if (r != ncclSuccess)
        RCOLL_WARN(NET, "net plugin %s: deregMr of %zu bytes at %p failed with %s", nn.path,
                   (size_t)(e->end - e->start), (void *)e->start, nn_result_name(r));
    memset(e, 0, sizeof(*e));
}

/* The reg_mr registration that covers [a, b), if any: its range, in *start_p and *end_p. */
static int nn_covered(uintptr_t a, uintptr_t b, uintptr_t *start_p, uintptr_t *end_p)
{
    int found = 0;
    pthread_mutex_lock(&nn.lock);
    for (nn_mr_t *m = nn.mrs; m && !found; m = m->next) {
        if (m->start <= a && b <= m->end) {
            *start_p = m->start;
            *end_p = m->end;
            found = 1;
        }
    }
    pthread_mutex_unlock(&nn.lock);
    return found;
}

/*
 * A registration of c covering [data, data + size), with one more reference; *out NULL when
 * all NN_CACHE are in use by requests (the caller retries later).
 *
 * Inside memory the core registered with reg_mr (its staging, alive as long as the comms),
 * the whole registered range is registered on c too and kept after use (least recently used
 * out first when the cache is full), so the staging costs one registration per comm.  Other
 * buffers (the user's) are registered exactly and deregistered when their last request
 * completes: rcoll cannot know when the user frees them, and a registration kept past a free
 * and a new allocation at the same address would, on an RDMA plugin, move the old pages.
 */
static rcoll_status_t nn_cache_get(nn_comm_t *c, void *data, size_t size, nn_ent_t **out)
{
    uintptr_t a = (uintptr_t)data, b = a + size;
    nn_ent_t *slot = NULL, *victim = NULL;
    *out = NULL;
    for (int i = 0; i < NN_CACHE; i++) {
        nn_ent_t *e = &c->ent[i];
        if (!e->in_use) {
            if (!slot) slot = e;
            continue;
        }
        if (e->start <= a && b <= e->end) {
            e->refs++;
            e->used = ++c->clock;
            *out = e;
            return RCOLL_OK;
        }
        if (!e->refs && (!victim || e->used < victim->used)) victim = e;
    }
    uintptr_t ra = a, rb = b;
    int keep = nn_covered(a, b, &ra, &rb);
    if (!slot && !victim) return RCOLL_OK; /* every registration is in use: later */
    if (!slot) {
        nn_ent_drop(c, victim);
        slot = victim;
    }
    void *pmh = NULL;
    ncclResult_t r = nn.reg_mr(c->pc, (void *)ra, (size_t)(rb - ra), NCCL_PTR_HOST, &pmh);
    if (r != ncclSuccess) return nn_fail(c, nn_err(r, "regMr"));
    *slot = (nn_ent_t){.in_use = 1, .refs = 1, .keep = keep, .start = ra, .end = rb,
                       .used = ++c->clock, .pmh = pmh};
    *out = slot;
    return RCOLL_OK;
}

static void nn_cache_put(nn_comm_t *c, nn_ent_t *e)
{
    /* a failed comm's registrations stay until close: the plugin may still hold them */
    if (--e->refs > 0 || e->keep || c->failed) return;
    nn_ent_drop(c, e);
}

/* Give back r's registrations (and r itself when it was taken from the pool). */
static void nn_req_release(nn_comm_t *c, nn_req_t *r, int pooled)
{
    for (int i = 0; i < r->nent; i++) nn_cache_put(c, r->ent[i]);
    r->nent = 0;
    r->preq = NULL;
    if (pooled) c->free_reqs[c->nfree++] = r;
}

/* Any registration of c (a zero-byte message needs one for plugins that read it, never its
 * memory), or NULL. */
static void *nn_any_mh(const nn_comm_t *c)
{
    for (int i = 0; i < NN_CACHE; i++)
        if (c->ent[i].in_use) return c->ent[i].pmh;
    return NULL;
}

/* The plugin's mhandle for a buffer: the caller's (reg_mr), else one of c's own, held by r.
 * *later_p = 1 when no registration slot is free now. */
static rcoll_status_t nn_mh(nn_comm_t *c, nn_req_t *r, void *data, size_t size, void *mhandle,
                            void **pmh_p, int *later_p)
{
    *later_p = 0;
    if (mhandle) {
        const nn_mr_t *m = mhandle;
        if (m->magic != NN_MR_MAGIC)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin transport: an mhandle "
                                 "that its reg_mr did not make");
        *pmh_p = m->pmh;
        return RCOLL_OK;
    }
    if (size == 0) {
        *pmh_p = nn_any_mh(c);
        return RCOLL_OK;
    }
    nn_ent_t *e = NULL;
    rcoll_status_t st = nn_cache_get(c, data, size, &e);
    if (st != RCOLL_OK) return st;
    if (!e) {
        *later_p = 1;
        return RCOLL_OK;
    }
    r->ent[r->nent++] = e;
    *pmh_p = e->pmh;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Listen, connect, accept
 * ------------------------------------------------------------------------------------------ */

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

/* ---------------------------------------------------------------------------------------------
 * Registration, data path, close
 * ------------------------------------------------------------------------------------------ */

static rcoll_status_t nn_reg_mr(void *comm, void *data, size_t size, int mem_type,
                                void **mhandle)
{
    nn_comm_t *c = comm;
    if (mem_type != RCOLL_PTR_HOST && mem_type != RCOLL_PTR_CUDA)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "net plugin transport: memory type %d "
                             "(dma-buf needs regMrDmaBuf, not used yet)", mem_type);
    if (c->failed) return nn_failed(c);
    nn_mr_t *m = calloc(1, sizeof(*m));
    if (!m) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "net plugin: no memory to register");
    ncclResult_t r = nn.reg_mr(c->pc, data, size, mem_type, &m->pmh); /* same values */
    if (r != ncclSuccess) {
        free(m);
        return nn_err(r, "regMr");
    }
    m->magic = NN_MR_MAGIC;
    m->start = (uintptr_t)data;
    m->end = (uintptr_t)data + size;
    pthread_mutex_lock(&nn.lock);
    m->next = nn.mrs;
    nn.mrs = m;
    pthread_mutex_unlock(&nn.lock);
    *mhandle = m;
    return RCOLL_OK;
}

static rcoll_status_t nn_dereg_mr(void *comm, void *mhandle)
{
    nn_comm_t *c = comm;
    nn_mr_t *m = mhandle;
    if (!m) return RCOLL_OK;
    pthread_mutex_lock(&nn.lock);
    for (nn_mr_t **pp = &nn.mrs; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    pthread_mutex_unlock(&nn.lock);
    ncclResult_t r = nn.dereg_mr(c->pc, m->pmh);
    m->magic = 0;
    free(m);
    return r == ncclSuccess ? RCOLL_OK : nn_err(r, "deregMr");
}

static rcoll_status_t nn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                               void **request)
{
    nn_comm_t *c = send_comm;
    *request = NULL;
    if (c->failed) return nn_failed(c);
    if (nn.version == 8 && size > INT_MAX)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin %s (ncclNetPlugin_v8) sends at "
                             "most INT_MAX bytes per message, not %zu", nn.path, size);
    if (c->nfree == 0) return RCOLL_OK; /* full: later */
    nn_req_t *r = c->free_reqs[c->nfree - 1];
    void *pmh = NULL, *preq = NULL;
    int later;
    rcoll_status_t st = nn_mh(c, r, data, size, mhandle, &pmh, &later);
    if (st != RCOLL_OK || later) return st;
    ncclResult_t res;
    switch (nn.version) {
    case 8: res = nn.v8->isend(c->pc, data, (int)size, tag, pmh, &preq); break;
    case 9: res = nn.v9->isend(c->pc, data, size, tag, pmh, &preq); break;
    case 10: res = nn.v10->isend(c->pc, data, size, tag, pmh, NULL, &preq); break;
    default: res = nn.cx_isend(c->pc, data, size, tag, pmh, NULL, &preq); break;
    }
    if (res != ncclSuccess) {
        st = nn_fail(c, nn_err(res, "isend"));
        nn_req_release(c, r, 0);
        return st;
    }
    if (!preq) {
        nn_req_release(c, r, 0);
        return RCOLL_OK;
    }
    c->nfree--;
    r->preq = preq;
    r->n = 1;
    *request = r;
    return RCOLL_OK;
}

static rcoll_status_t nn_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                               void **mhandles, void **request)
{
    nn_comm_t *c = recv_comm;
    void *pmh[RCOLL_TRANSPORT_MAX_RECVS], *preq = NULL;
    int isz[RCOLL_TRANSPORT_MAX_RECVS];
    size_t zsz[RCOLL_TRANSPORT_MAX_RECVS];
    *request = NULL;
    if (c->failed) return nn_failed(c);
    if (n < 1 || n > c->max_recvs)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin %s: a receive of %d buffers; "
                             "its maxRecvs is %d", nn.path, n, c->max_recvs);
    for (int i = 0; i < n; i++) {
        if (nn.version == 8 && sizes[i] > INT_MAX)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin %s (ncclNetPlugin_v8) "
                                 "receives at most INT_MAX bytes per message, not %zu", nn.path,
                                 sizes[i]);
        isz[i] = (int)sizes[i];
        zsz[i] = sizes[i];
    }
    if (c->nfree == 0) return RCOLL_OK;
    nn_req_t *r = c->free_reqs[c->nfree - 1];
    rcoll_status_t st = RCOLL_OK;
    int later = 0;
    for (int i = 0; i < n && st == RCOLL_OK && !later; i++)
        st = nn_mh(c, r, data[i], sizes[i], mhandles ? mhandles[i] : NULL, &pmh[i], &later);
    if (st != RCOLL_OK || later) {
        nn_req_release(c, r, 0);
        return st;
    }
    ncclResult_t res;
    switch (nn.version) {
    case 8: res = nn.v8->irecv(c->pc, n, data, isz, tags, pmh, &preq); break;
    case 9: res = nn.v9->irecv(c->pc, n, data, zsz, tags, pmh, &preq); break;
    case 10: res = nn.v10->irecv(c->pc, n, data, zsz, tags, pmh, NULL, &preq); break;
    default: res = nn.cx_irecv(c->pc, n, data, zsz, tags, pmh, NULL, &preq); break;
    }
    if (res != ncclSuccess) {
        st = nn_fail(c, nn_err(res, "irecv"));
        nn_req_release(c, r, 0);
        return st;
    }
    if (!preq) {
        nn_req_release(c, r, 0);
        return RCOLL_OK;
    }
    c->nfree--;
    r->preq = preq;
    r->n = n;
    *request = r;
    return RCOLL_OK;
}

static rcoll_status_t nn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                                void **request)
{
    nn_comm_t *c = recv_comm;
    void *pmh[RCOLL_TRANSPORT_MAX_RECVS], *preq = NULL;
    *request = NULL;
    if (c->failed) return nn_failed(c);
    if (!nn.iflush) return RCOLL_OK; /* nothing to flush */
    if (n < 1 || n > RCOLL_TRANSPORT_MAX_RECVS)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin: a flush of %d buffers", n);
    for (int i = 0; i < n; i++) {
        const nn_mr_t *m = mhandles ? mhandles[i] : NULL;
        pmh[i] = m && m->magic == NN_MR_MAGIC ? m->pmh : NULL;
    }
    if (c->nfree == 0) /* NULL means "done" here: never leave a flush undone */
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "net plugin: iflush with every request "
                             "slot of the comm in use");
    ncclResult_t res = nn.iflush(c->pc, n, data, sizes, pmh, &preq);
    if (res != ncclSuccess) return nn_fail(c, nn_err(res, "iflush"));
    if (!preq) return RCOLL_OK;
    nn_req_t *r = c->free_reqs[--c->nfree];
    r->preq = preq;
    r->n = 0;
    r->nent = 0;
    *request = r;
    return RCOLL_OK;
}

static rcoll_status_t nn_test(void *request, int *done, size_t *sizes)
{
    nn_req_t *r = request;
    nn_comm_t *c = r->comm;
    int d = 0, got[RCOLL_TRANSPORT_MAX_RECVS];
    *done = 0;
    if (c->failed) { /* the comm failed on another request: this one fails with it */
        nn_req_release(c, r, 1);
        return nn_failed(c);
    }
    memset(got, 0, sizeof(got));
    ncclResult_t res = nn.test(r->preq, &d, got);
    if (res != ncclSuccess) {
        rcoll_status_t st = nn_fail(c, nn_err(res, "test"));
        nn_req_release(c, r, 1);
        return st;
    }
    if (!d) return RCOLL_OK;
    for (int i = 0; sizes && i < r->n; i++) sizes[i] = got[i] > 0 ? (size_t)got[i] : 0;
    nn_req_release(c, r, 1);
    *done = 1;
    return RCOLL_OK;
}

static rcoll_status_t nn_close_comm(nn_comm_t *c, int is_recv)
{
    for (int i = 0; i < NN_CACHE; i++)
        if (c->ent[i].in_use) nn_ent_drop(c, &c->ent[i]);
    ncclResult_t r = is_recv ? nn.close_recv(c->pc) : nn.close_send(c->pc);
    c->magic = 0;
    free(c);
    return r == ncclSuccess ? RCOLL_OK : nn_err(r, is_recv ? "closeRecv" : "closeSend");
}

static rcoll_status_t nn_close_send(void *send_comm) { return nn_close_comm(send_comm, 0); }

static rcoll_status_t nn_close_recv(void *recv_comm) { return nn_close_comm(recv_comm, 1); }

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
