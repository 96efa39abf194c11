/*
 * plugin.c - rcoll's NCCL net plugin, one implementation for every exported version: the
 * transport choice (verbs when it has a device, else TCP; never shared memory, since NCCL
 * asks its net plugin to connect hosts), device properties in NCCL's terms, comms and
 * requests wrapped so that test() knows how many sizes to report, rcoll statuses mapped to
 * ncclResult_t with every error's text logged through NCCL's logger, the transports' fini
 * when NCCL unloads it.  It uses transport.h and util/ only; the version-specific argument
 * conversions live in plugin_abi.c.
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/plugin.h"
#include "rcoll_build.h"
#include "transport/transport.h"
#include "util/config.h"
#include "util/log.h"
#include "util/status.h"

#define PL_SEND_MAGIC 0x72635053u /* "rcPS" */
#define PL_RECV_MAGIC 0x72635052u /* "rcPR" */

/* ---------------------------------------------------------------------------------------------
 * Knobs: the library's RCOLL_NET and RCOLL_TRANSPORT, read again here (the core's table is out
 * of this layer's reach); same names, same values, same meaning for the network part.
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    int net;       /* index in rcoll_net_names (the transport registry's), 0: auto */
    int transport; /* index in rcoll_transport_names, 0: auto */
} pl_config_t;

/* The values are the registry's (transport/registry.c).  "plugin" (rcoll over an NCCL net
 * plugin, RCOLL_NET_PLUGIN) is the library's value for the network transport rcoll loads;
 * loaded that way, this plugin takes it as auto. */
static const rcoll_knob_t pl_knobs[] = {
    RCOLL_KNOB_ENUM_OF(pl_config_t, "RCOLL_NET", "auto", net, rcoll_net_names,
                       "NCCL plugin: network transport: auto (verbs when an active RDMA port "
                       "exists, else tcp), verbs (fail when none) or tcp; plugin (rcoll over a "
                       "net plugin: this one, loaded by rcoll) counts as auto"),
    RCOLL_KNOB_ENUM_OF(pl_config_t, "RCOLL_TRANSPORT", "auto", transport, rcoll_transport_names,
                       "NCCL plugin: verbs or tcp as RCOLL_NET when that is auto (shm does not "
                       "apply: the plugin connects hosts)"),
};
static const rcoll_config_table_t pl_config_table =
    RCOLL_CONFIG_TABLE("nccl-plugin", pl_knobs, pl_config_t);

/* ---------------------------------------------------------------------------------------------
 * Process-wide state, written once by pl_init under pl_lock
 * ------------------------------------------------------------------------------------------ */

static pthread_mutex_t pl_lock = PTHREAD_MUTEX_INITIALIZER;
static int pl_inited;
static ncclResult_t pl_init_result;
static int pl_log_to_file;               /* RCOLL_DEBUG_FILE set: rcoll's lines stay there */
static ncclDebugLogger_t pl_logger;      /* NCCL's, NULL until an init gives one */
static const rcoll_transport_ops_t *pl_tp;
static int pl_ndev;
static rcoll_transport_props_t pl_devs[PL_MAX_DEVS];
static const rcoll_transport_ops_t *pl_started[2]; /* initialised here: fini at unload */
static int pl_nstarted;
static int pl_live; /* listen, send and recv comms open now */

/* ---------------------------------------------------------------------------------------------
 * Logging and errors
 * ------------------------------------------------------------------------------------------ */

static void pl_vlog(ncclDebugLogLevel level, unsigned long flags, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    ncclDebugLogger_t logger = __atomic_load_n(&pl_logger, __ATOMIC_ACQUIRE);
    if (logger)
        logger(level, flags, __FILE__, __LINE__, "NET/rcoll : %s", msg);
    else if (level == NCCL_LOG_WARN)
        RCOLL_WARN(PLUGIN, "%s", msg);
    else
        RCOLL_INFO(PLUGIN, "%s", msg);
}

static void pl_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void pl_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pl_vlog(NCCL_LOG_WARN, NCCL_NET, fmt, ap);
    va_end(ap);
}

void pl_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pl_vlog(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, fmt, ap);
    va_end(ap);
}

/* rcoll's own log lines (util/log.c's sink), at the level RCOLL_DEBUG lets through. */
static void pl_sink(rcoll_log_level_t level, rcoll_subsys_t subsys, const char *msg)
{
    ncclDebugLogger_t logger = __atomic_load_n(&pl_logger, __ATOMIC_ACQUIRE);
    ncclDebugLogLevel lvl = level == RCOLL_LOG_WARN   ? NCCL_LOG_WARN
                            : level == RCOLL_LOG_INFO ? NCCL_LOG_INFO
                                                      : NCCL_LOG_TRACE;
    unsigned long flags = NCCL_NET | (subsys == RCOLL_SUBSYS_INIT ? NCCL_INIT : 0);
    if (logger) logger(lvl, flags, __FILE__, __LINE__, "NET/rcoll : %s", msg);
}

/* rcoll_status_t -> ncclResult_t. */
static ncclResult_t pl_result(rcoll_status_t st)
{
    switch (st) {
    case RCOLL_ERR_INVALID_ARG:
        return ncclInvalidArgument;
    case RCOLL_ERR_INVALID_USAGE:
        return ncclInvalidUsage;
    case RCOLL_ERR_SYSTEM:
    case RCOLL_ERR_NO_MEMORY:
        return ncclSystemError;
    case RCOLL_ERR_REMOTE:
    case RCOLL_ERR_PROTOCOL:
    case RCOLL_ERR_AUTH:
    case RCOLL_ERR_TIMEOUT:
        return ncclRemoteError;
    default:
        return st >= 0 ? ncclSuccess : ncclInternalError; /* UNSUPPORTED, INTERNAL */
    }
}

ncclResult_t pl_fail(rcoll_status_t st, const char *op)
{
    pl_warn("%s failed (%s): %s", op, rcoll_status_string(st), rcoll_err_get());
    return pl_result(st);
}

ncclResult_t pl_bad_arg(const char *what)
{
    pl_warn("%s", what);
    return ncclInvalidArgument;
}

/* ---------------------------------------------------------------------------------------------
 * Init: the transport and its devices
 * ------------------------------------------------------------------------------------------ */

/* Initialise t and read its devices; UNSUPPORTED when it has none. */
static rcoll_status_t pl_open(const rcoll_transport_ops_t *t)
{
    int ndev = 0;
    rcoll_status_t st = rcoll_transport_ensure_init(t);
    if (st == RCOLL_OK && pl_nstarted < 2) pl_started[pl_nstarted++] = t;
    if (st == RCOLL_OK) st = t->devices(&ndev);
    if (st == RCOLL_OK && ndev < 1)
        st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "transport %s has no device here", t->name);
    if (st != RCOLL_OK) return st;
    if (ndev > PL_MAX_DEVS) {
        pl_info("transport %s has %d devices; the plugin reports the first %d", t->name, ndev,
                PL_MAX_DEVS);
        ndev = PL_MAX_DEVS;
    }
    for (int d = 0; d < ndev; d++) {
        st = t->get_props(d, &pl_devs[d]);
        if (st != RCOLL_OK) return st;
    }
    pl_tp = t;
    pl_ndev = ndev;
    return RCOLL_OK;
}

/* The transport: forced by RCOLL_NET (or RCOLL_TRANSPORT), else verbs when it has a device,
 * else tcp. */
static rcoll_status_t pl_pick(const pl_config_t *cfg)
{
    const char *want = NULL, *knob = NULL;
    const char *net = rcoll_net_names[cfg->net], *tp = rcoll_transport_names[cfg->transport];
    int net_plugin = !strcmp(net, "plugin"), tp_plugin = !strcmp(tp, "plugin");
    const rcoll_transport_ops_t *tp_ops = rcoll_transport_find(tp);
    if (net_plugin || tp_plugin)
        pl_info("%s=plugin: rcoll loaded this plugin as its network transport; choosing as "
                "with RCOLL_NET=auto", net_plugin ? "RCOLL_NET" : "RCOLL_TRANSPORT");
    if (cfg->net != 0 && !net_plugin) {
        want = net;
        knob = "RCOLL_NET";
    } else if (cfg->transport != 0 && !tp_plugin && tp_ops && tp_ops->host_local) {
        pl_warn("RCOLL_TRANSPORT=%s does not apply to the NCCL net plugin, which connects "
                "hosts; choosing as with RCOLL_NET=auto", tp);
    } else if (cfg->transport != 0 && !tp_plugin) {
        want = tp;
        knob = "RCOLL_TRANSPORT";
    }
    if (want) {
        const rcoll_transport_ops_t *t = rcoll_transport_find(want);
        if (!t)
            return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "%s=%s, but this rcoll was built "
                                 "without that transport", knob, want);
        rcoll_status_t st = pl_open(t);
        if (st != RCOLL_OK) rcoll_err_prefix("%s=%s: ", knob, want);
        return st;
    }
    const rcoll_transport_ops_t *verbs = rcoll_transport_find("verbs");
    if (verbs) {
        if (pl_open(verbs) == RCOLL_OK) return RCOLL_OK;
        pl_info("verbs not used, TCP instead: %s", rcoll_err_get());
    }
    const rcoll_transport_ops_t *tcp = rcoll_transport_find("tcp");
    if (!tcp) return rcoll_err_set(RCOLL_ERR_INTERNAL, "no tcp transport built in");
    return pl_open(tcp);
}

static ncclResult_t pl_init_once(void)
{
    rcoll_log_config_t log;
    pl_config_t cfg;

    rcoll_err_clear();
    rcoll_status_t st = rcoll_config_parse(&rcoll_log_config_table, &log);
    if (st != RCOLL_OK) return pl_fail(st, "init");
    rcoll_log_configure(&log);
    pl_log_to_file = log.file[0] != '\0';
    if (!pl_log_to_file && __atomic_load_n(&pl_logger, __ATOMIC_ACQUIRE))
        rcoll_log_set_sink(pl_sink);
    st = rcoll_config_parse(&pl_config_table, &cfg);
    if (st == RCOLL_OK) st = pl_pick(&cfg);
    if (st != RCOLL_OK) return pl_fail(st, "init");
    pl_info("rcoll %s net plugin: transport %s, %d device(s)", RCOLL_VERSION_STRING,
            pl_tp->name, pl_ndev);
    for (int d = 0; d < pl_ndev; d++) {
        const rcoll_transport_props_t *p = &pl_devs[d];
        pl_info("device %d: %s over rcoll's %s transport, %d Mb/s, %.1f us, PCI %s", d,
                p->name, pl_tp->name, p->speed_mbps, (double)p->latency_us,
                p->pci_path[0] ? p->pci_path : "none (virtual)");
    }
    return ncclSuccess;
}

ncclResult_t pl_init(ncclDebugLogger_t logger)
{
    pthread_mutex_lock(&pl_lock);
    if (logger) {
        __atomic_store_n(&pl_logger, logger, __ATOMIC_RELEASE);
        if (pl_inited && !pl_log_to_file) rcoll_log_set_sink(pl_sink);
    }
    if (!pl_inited) {
        pl_init_result = pl_init_once();
        __atomic_store_n(&pl_inited, 1, __ATOMIC_RELEASE); /* pl_tp, pl_devs are written */
    }
    ncclResult_t res = pl_init_result;
    pthread_mutex_unlock(&pl_lock);
    return res;
}

/* NCCL unloads the plugin (dlclose) after its last communicator: release what the transports
 * hold for the process (verbs devices, connects in progress) when no comm is open any more.
 * At exit with comms still open (no communicator destroyed) nothing is touched: a proxy
 * thread may still use them. */
__attribute__((destructor)) static void pl_unload(void)
{
    rcoll_log_set_sink(NULL); /* NCCL's logger may be past use; rcoll's log is stderr */
    __atomic_store_n(&pl_logger, NULL, __ATOMIC_RELEASE);
    if (__atomic_load_n(&pl_live, __ATOMIC_ACQUIRE) != 0) return;
    for (int i = pl_nstarted - 1; i >= 0; i--) pl_started[i]->fini();
    rcoll_transport_release(pl_started, pl_nstarted); /* and the knobs parsed for them */
    pl_nstarted = 0;
    pl_tp = NULL;
}

static int pl_ready(void) { return __atomic_load_n(&pl_inited, __ATOMIC_ACQUIRE) && pl_tp; }

ncclResult_t pl_devices(int *ndev)
{
    if (!ndev) return pl_bad_arg("devices: NULL ndev");
    *ndev = pl_ready() ? pl_ndev : 0;
    return ncclSuccess;
}

static int pl_dev_ok(int dev) { return pl_ready() && dev >= 0 && dev < pl_ndev; }

ncclResult_t pl_get_props(int dev, pl_props_t *props)
{
    if (!props || !pl_dev_ok(dev)) return pl_bad_arg("getProperties: bad device or NULL props");
    rcoll_transport_props_t *p = &pl_devs[dev];
    memset(props, 0, sizeof(*props));
    props->name = p->name;
    props->pci_path = p->pci_path[0] ? p->pci_path : NULL;
    props->guid = p->guid;
    /* CUDA buffers where the transport registers them itself (verbs with GPUDirect RDMA:
     * it makes the dma-buf of a CUDA pointer, or uses nvidia-peermem); NCCL_PTR_DMABUF never,
     * as regMrDmaBuf is not implemented (NCCL then calls regMr with NCCL_PTR_CUDA). */
    props->ptr_support = NCCL_PTR_HOST;
    if (p->ptr_support & RCOLL_PTR_CUDA) props->ptr_support |= NCCL_PTR_CUDA;
    props->speed = p->speed_mbps;
    props->port = p->port;
    props->latency = p->latency_us;
    props->max_comms = p->max_comms;
    /* NCCL's grouped receive matches each message to a buffer by tag, in any order; rcoll's
     * transports match a group's buffers in posting order.  maxRecvs 1 keeps NCCL from
     * grouping (and from sharing one connection between ranks), so the two always agree. */
    props->max_recvs = p->max_recvs < PL_MAX_RECVS ? p->max_recvs : PL_MAX_RECVS;
    props->max_bytes = p->max_msg_size < (size_t)NCCL_MAX_NET_SIZE_BYTES
                           ? p->max_msg_size
                           : (size_t)NCCL_MAX_NET_SIZE_BYTES;
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------------------------
 * Comms and requests
 * ------------------------------------------------------------------------------------------ */

typedef struct pl_comm pl_comm_t;

typedef struct {
    pl_comm_t *comm;
    void *treq; /* the transport's request; NULL while the slot is free */
    int n;      /* sizes test() reports: 1 for a send, the buffers of a receive, 0 for a flush */
} pl_req_t;

/* A send or recv comm: the transport's comm and a fixed pool of request slots (no allocation
 * on the data path). */
struct pl_comm {
    uint32_t magic; /* PL_SEND_MAGIC or PL_RECV_MAGIC; 0 once closed */
    void *tc;
    int nfree;
    pl_req_t *free_reqs[PL_MAX_REQS];
    pl_req_t reqs[PL_MAX_REQS];
};

static pl_comm_t *pl_comm_new(void *tc, uint32_t magic)
{
    pl_comm_t *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->magic = magic;
    c->tc = tc;
    for (int i = 0; i < PL_MAX_REQS; i++) {
        c->reqs[i].comm = c;
        c->free_reqs[i] = &c->reqs[PL_MAX_REQS - 1 - i];
    }
    c->nfree = PL_MAX_REQS;
    return c;
}

static int pl_is(const pl_comm_t *c, uint32_t magic) { return c && c->magic == magic; }

static int pl_is_comm(const pl_comm_t *c)
{
    return pl_is(c, PL_SEND_MAGIC) || pl_is(c, PL_RECV_MAGIC);
}

/* Wrap a just-made transport comm; closes it when there is no memory for the wrapper. */
static ncclResult_t pl_wrap(void *tc, uint32_t magic, void **out)
{
    pl_comm_t *c = pl_comm_new(tc, magic);
    if (!c) {
        if (magic == PL_SEND_MAGIC)
            pl_tp->close_send(tc);
        else
            pl_tp->close_recv(tc);
        return pl_fail(rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory for a comm"),
                       magic == PL_SEND_MAGIC ? "connect" : "accept");
    }
    __atomic_add_fetch(&pl_live, 1, __ATOMIC_ACQ_REL);
    *out = c;
    return ncclSuccess;
}

static void pl_req_put(pl_req_t *r)
{
    r->treq = NULL;
    r->comm->free_reqs[r->comm->nfree++] = r;
}

ncclResult_t pl_listen(int dev, void *handle, void **listen_comm)
{
    if (!handle || !listen_comm || !pl_dev_ok(dev))
        return pl_bad_arg("listen: bad device, or NULL handle or listenComm");
    rcoll_status_t st = rcoll_transport_listen(pl_tp, dev, handle, listen_comm);
    if (st != RCOLL_OK) return pl_fail(st, "listen");
    __atomic_add_fetch(&pl_live, 1, __ATOMIC_ACQ_REL);
    return ncclSuccess;
}

ncclResult_t pl_connect(int dev, void *handle, void **send_comm)
{
    void *tc = NULL;
    if (send_comm) *send_comm = NULL;
    if (!handle || !send_comm || !pl_dev_ok(dev))
        return pl_bad_arg("connect: bad device, or NULL handle or sendComm");
    rcoll_status_t st = pl_tp->connect(dev, handle, &tc);
    if (st != RCOLL_OK) return pl_fail(st, "connect");
    return tc ? pl_wrap(tc, PL_SEND_MAGIC, send_comm) : ncclSuccess;
}

ncclResult_t pl_accept(void *listen_comm, void **recv_comm)
{
    void *tc = NULL;
    if (recv_comm) *recv_comm = NULL;
    if (!listen_comm || !recv_comm) return pl_bad_arg("accept: NULL listenComm or recvComm");
    rcoll_status_t st = pl_tp->accept(listen_comm, &tc);
    if (st != RCOLL_OK) return pl_fail(st, "accept");
    return tc ? pl_wrap(tc, PL_RECV_MAGIC, recv_comm) : ncclSuccess;
}

ncclResult_t pl_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    pl_comm_t *c = comm;
    if (!pl_is_comm(c) || !mhandle) return pl_bad_arg("regMr: bad comm or NULL mhandle");
    int mem = type == NCCL_PTR_HOST ? RCOLL_PTR_HOST
              : type == NCCL_PTR_CUDA ? RCOLL_PTR_CUDA
                                      : -1;
    if (mem < 0) {
        pl_warn("regMr: memory type %d is neither NCCL_PTR_HOST nor NCCL_PTR_CUDA", type);
        return ncclInvalidArgument;
    }
    rcoll_status_t st = pl_tp->reg_mr(c->tc, data, size, mem, mhandle);
    return st == RCOLL_OK ? ncclSuccess : pl_fail(st, "regMr");
}

ncclResult_t pl_dereg_mr(void *comm, void *mhandle)
{
    pl_comm_t *c = comm;
    if (!pl_is_comm(c)) return pl_bad_arg("deregMr: bad comm");
    rcoll_status_t st = pl_tp->dereg_mr(c->tc, mhandle);
    return st == RCOLL_OK ? ncclSuccess : pl_fail(st, "deregMr");
}

ncclResult_t pl_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                      void **request)
{
    pl_comm_t *c = send_comm;
    void *treq = NULL;
    if (request) *request = NULL; /* also on errors: NCCL may look before the result */
    if (!request || !pl_is(c, PL_SEND_MAGIC))
        return pl_bad_arg("isend: not a send comm, or NULL request");
    if (c->nfree == 0) return ncclSuccess; /* NULL request: NCCL calls again later */
    rcoll_status_t st = pl_tp->isend(c->tc, data, size, tag, mhandle, &treq);
    if (st != RCOLL_OK) return pl_fail(st, "isend");
    if (!treq) return ncclSuccess;
    pl_req_t *r = c->free_reqs[--c->nfree];
    r->treq = treq;
    r->n = 1;
    *request = r;
    return ncclSuccess;
}

ncclResult_t pl_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                      void **mhandles, void **request)
{
    pl_comm_t *c = recv_comm;
    size_t want[PL_MAX_RECVS]; /* a copy: a transport may lower sizes it cannot take */
    void *treq = NULL;
    if (request) *request = NULL;
    if (!request || !pl_is(c, PL_RECV_MAGIC) || !data || !sizes)
        return pl_bad_arg("irecv: not a recv comm, or NULL data, sizes or request");
    if (n < 1 || n > PL_MAX_RECVS) {
        pl_warn("irecv: %d buffers; this plugin takes at most %d (its maxRecvs)", n,
                PL_MAX_RECVS);
        return ncclInvalidArgument;
    }
    if (c->nfree == 0) return ncclSuccess;
    memcpy(want, sizes, (size_t)n * sizeof(*sizes));
    rcoll_status_t st = pl_tp->irecv(c->tc, n, data, want, tags, mhandles, &treq);
    if (st != RCOLL_OK) return pl_fail(st, "irecv");
    if (!treq) return ncclSuccess;
    pl_req_t *r = c->free_reqs[--c->nfree];
    r->treq = treq;
    r->n = n;
    *request = r;
    return ncclSuccess;
}

ncclResult_t pl_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                       void **request)
{
    pl_comm_t *c = recv_comm;
    void *treq = NULL;
    if (request) *request = NULL;
    if (!request || !pl_is(c, PL_RECV_MAGIC))
        return pl_bad_arg("iflush: not a recv comm, or NULL request");
    /* A NULL request means "nothing to flush" here, not "call again": keep a slot for one. */
    if (c->nfree == 0) return pl_bad_arg("iflush: every request slot of the comm is in use");
    rcoll_status_t st = pl_tp->iflush(c->tc, n, data, sizes, mhandles, &treq);
    if (st != RCOLL_OK) return pl_fail(st, "iflush");
    if (!treq) return ncclSuccess; /* host memory: complete at once */
    pl_req_t *r = c->free_reqs[--c->nfree];
    r->treq = treq;
    r->n = 0;
    *request = r;
    return ncclSuccess;
}

ncclResult_t pl_test(void *request, int *done, int *sizes)
{
    pl_req_t *r = request;
    size_t got[RCOLL_TRANSPORT_MAX_RECVS];
    int d = 0;
    if (!r || !done || !pl_is_comm(r->comm) || !r->treq)
        return pl_bad_arg("test: not a request in flight, or NULL done");
    *done = 0;
    rcoll_status_t st = pl_tp->test(r->treq, &d, got);
    if (st != RCOLL_OK) {
        pl_req_put(r); /* the transport freed its request */
        return pl_fail(st, "test");
    }
    if (!d) return ncclSuccess;
    for (int i = 0; sizes && i < r->n; i++)
        sizes[i] = got[i] > (size_t)INT_MAX ? INT_MAX : (int)got[i];
    pl_req_put(r);
    *done = 1;
    return ncclSuccess;
}

static ncclResult_t pl_close_comm(void *comm, uint32_t magic, const char *op)
{
    pl_comm_t *c = comm;
    if (!pl_is(c, magic)) {
        pl_warn("%s: not an open comm of that kind", op);
        return ncclInvalidArgument;
    }
    rcoll_status_t st = magic == PL_SEND_MAGIC ? pl_tp->close_send(c->tc)
                                               : pl_tp->close_recv(c->tc);
    c->magic = 0;
    free(c); /* the transport's requests went with its comm */
    __atomic_sub_fetch(&pl_live, 1, __ATOMIC_ACQ_REL);
    return st == RCOLL_OK ? ncclSuccess : pl_fail(st, op);
}

ncclResult_t pl_close_send(void *send_comm)
{
    return pl_close_comm(send_comm, PL_SEND_MAGIC, "closeSend");
}

ncclResult_t pl_close_recv(void *recv_comm)
{
    return pl_close_comm(recv_comm, PL_RECV_MAGIC, "closeRecv");
}

ncclResult_t pl_close_listen(void *listen_comm)
{
    if (!listen_comm || !pl_ready()) return pl_bad_arg("closeListen: NULL listenComm");
    rcoll_status_t st = pl_tp->close_listen(listen_comm);
    __atomic_sub_fetch(&pl_live, 1, __ATOMIC_ACQ_REL);
    return st == RCOLL_OK ? ncclSuccess : pl_fail(st, "closeListen");
}
