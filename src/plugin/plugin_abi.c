/*
 * plugin_abi.c - the exported tables ncclNetPlugin_v8 .. ncclNetPlugin_v12 (name "rcoll"):
 * thin wrappers that convert each version's argument types (int sizes in v8, profiler
 * handles in v10+, the per-communicator context of v11+, v12's properties) and call plugin.c.  No behaviour
 * lives here.  Members NCCL treats as optional and rcoll lacks are NULL: regMrDmaBuf (no
 * dma-buf in ptrSupport), getDeviceMr and irecvConsumed (host networking only), makeVDevice
 * (NCCL then uses the physical devices; a function that fails would fail NCCL's init).
 */
#include <stdlib.h>
#include <string.h>

#include "plugin/plugin.h"
#include "transport/transport.h"
#include "util/status.h"

#define PL_EXPORT __attribute__((visibility("default")))

_Static_assert(PL_MAX_RECVS <= RCOLL_TRANSPORT_MAX_RECVS, "maxRecvs beyond the transports'");

/* Fields every properties version shares, from the common description. */
#define PL_FILL_COMMON(out, p)                                                 \
    do {                                                                       \
        (out)->name = (p).name;                                                \
        (out)->pciPath = (p).pci_path;                                         \
        (out)->guid = (p).guid;                                                \
        (out)->ptrSupport = (p).ptr_support;                                   \
        (out)->regIsGlobal = 0;                                                \
        (out)->speed = (p).speed;                                              \
        (out)->port = (p).port;                                                \
        (out)->latency = (p).latency;                                          \
        (out)->maxComms = (p).max_comms;                                       \
        (out)->maxRecvs = (p).max_recvs;                                       \
        (out)->netDeviceType = NCCL_NET_DEVICE_HOST;                           \
        (out)->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;             \
    } while (0)

/* v9+ additions: no forced flush, one physical device per device, the size limits. */
#define PL_FILL_V9(out, p, dev)                                                \
    do {                                                                       \
        (out)->forceFlush = 0;                                                 \
        (out)->vProps.ndevs = 1;                                               \
        (out)->vProps.devs[0] = (dev);                                         \
        (out)->maxP2pBytes = (p).max_bytes;                                    \
        (out)->maxCollBytes = (p).max_bytes;                                   \
    } while (0)

static ncclResult_t pl_accept_any(void *listen_comm, void **recv_comm,
                                  ncclNetDeviceHandle_t **recv_dev_comm)
{
    (void)recv_dev_comm; /* host networking: no device offload handle */
    return pl_accept(listen_comm, recv_comm);
}

/* ---------------------------------------------------------------------------------------------
 * v8: int sizes
 * ------------------------------------------------------------------------------------------ */

static ncclResult_t v8_get_props(int dev, ncclNetProperties_v8_t *props)
{
    pl_props_t p;
    if (!props) return pl_bad_arg("getProperties: NULL props");
    ncclResult_t res = pl_get_props(dev, &p);
    if (res != ncclSuccess) return res;
    memset(props, 0, sizeof(*props));
    PL_FILL_COMMON(props, p);
    return ncclSuccess;
}

static ncclResult_t v8_connect(int dev, void *handle, void **send_comm,
                               ncclNetDeviceHandle_t **send_dev_comm)
{
    (void)send_dev_comm;
    return pl_connect(dev, handle, send_comm);
}

static ncclResult_t v8_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
                             void **request)
{
    if (size < 0) {
        if (request) *request = NULL;
        return pl_bad_arg("isend: negative size");
    }
    return pl_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclResult_t v8_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
                             void **mhandles, void **request)
{
    size_t sz[PL_MAX_RECVS];
    /* pl_irecv refuses n out of range before reading sizes */
    for (int i = 0; sizes && i < n && i < PL_MAX_RECVS; i++) {
        if (sizes[i] < 0) {
            if (request) *request = NULL;
            return pl_bad_arg("irecv: negative size");
        }
        sz[i] = (size_t)sizes[i];
    }
    return pl_irecv(recv_comm, n, data, sizes ? sz : NULL, tags, mhandles, request);
}

PL_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = PL_NAME,
    .init = pl_init,
    .devices = pl_devices,
    .getProperties = v8_get_props,
    .listen = pl_listen,
    .connect = v8_connect,
    .accept = pl_accept_any,
    .regMr = pl_reg_mr,
    .regMrDmaBuf = NULL,
    .deregMr = pl_dereg_mr,
    .isend = v8_isend,
    .irecv = v8_irecv,
    .iflush = pl_iflush,
    .test = pl_test,
    .closeSend = pl_close_send,
    .closeRecv = pl_close_recv,
    .closeListen = pl_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};

/* ---------------------------------------------------------------------------------------------
 * v9: size_t sizes, virtual-device properties
 * ------------------------------------------------------------------------------------------ */

static ncclResult_t v9_get_props(int dev, ncclNetProperties_v9_t *props)
{
    pl_props_t p;
    if (!props) return pl_bad_arg("getProperties: NULL props");
    ncclResult_t res = pl_get_props(dev, &p);
    if (res != ncclSuccess) return res;
    memset(props, 0, sizeof(*props));
    PL_FILL_COMMON(props, p);
    PL_FILL_V9(props, p, dev);
    return ncclSuccess;
}

PL_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = PL_NAME,
    .init = pl_init,
    .devices = pl_devices,
    .getProperties = v9_get_props,
    .listen = pl_listen,
    .connect = v8_connect,
    .accept = pl_accept_any,
    .regMr = pl_reg_mr,
    .regMrDmaBuf = NULL,
    .deregMr = pl_dereg_mr,
    .isend = pl_isend,
    .irecv = pl_irecv,
    .iflush = pl_iflush,
    .test = pl_test,
    .closeSend = pl_close_send,
    .closeRecv = pl_close_recv,
    .closeListen = pl_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

/* ---------------------------------------------------------------------------------------------
 * v10: profiler callback and handles (ignored), a config per connect (ignored: rcoll's
 * transports have no traffic classes per connection)
 * ------------------------------------------------------------------------------------------ */

static ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler)
{
    (void)profiler;
    return pl_init(logger);
}

static ncclResult_t v10_connect(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                                void **send_comm, ncclNetDeviceHandle_t **send_dev_comm)
{
    (void)config, (void)send_dev_comm;
    return pl_connect(dev, handle, send_comm);
}

static ncclResult_t v10_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                              void *phandle, void **request)
{
    (void)phandle;
    return pl_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t v10_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **phandles, void **request)
{
    (void)phandles;
    return pl_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

PL_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = PL_NAME,
    .init = v10_init,
    .devices = pl_devices,
    .getProperties = v9_get_props, /* ncclNetProperties_v10_t is v9's */
    .listen = pl_listen,
    .connect = v10_connect,
    .accept = pl_accept_any,
    .regMr = pl_reg_mr,
    .regMrDmaBuf = NULL,
    .deregMr = pl_dereg_mr,
    .isend = v10_isend,
    .irecv = v10_irecv,
    .iflush = pl_iflush,
    .test = pl_test,
    .closeSend = pl_close_send,
    .closeRecv = pl_close_recv,
    .closeListen = pl_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

/* ---------------------------------------------------------------------------------------------
 * v11: init/finalize per communicator with a context, config given at init
 * ------------------------------------------------------------------------------------------ */

#define PL_CTX_MAGIC 0x72634358u /* "rcCX" */

/* One NCCL communicator's context: what it said at init, for logs; the transport and its
 * connections are process-wide. */
typedef struct {
    uint32_t magic;
    int traffic_class;
    uint64_t comm_id;
} pl_ctx_t;

static int pl_ctx_ok(const void *ctx)
{
    return ctx && ((const pl_ctx_t *)ctx)->magic == PL_CTX_MAGIC;
}

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t profiler)
{
    (void)profiler;
    if (!ctx) return pl_bad_arg("init: NULL ctx");
    *ctx = NULL;
    ncclResult_t res = pl_init(logger);
    if (res != ncclSuccess) return res;
    pl_ctx_t *c = calloc(1, sizeof(*c));
    if (!c) return pl_fail(rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory for a context"), "init");
    c->magic = PL_CTX_MAGIC;
    c->comm_id = comm_id;
    c->traffic_class = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    pl_info("context for communicator 0x%llx (traffic class %d: not used)",
            (unsigned long long)comm_id, c->traffic_class);
    *ctx = c;
    return ncclSuccess;
}

static ncclResult_t v11_finalize(void *ctx)
{
    if (!pl_ctx_ok(ctx)) return pl_bad_arg("finalize: not a context made by init");
    ((pl_ctx_t *)ctx)->magic = 0;
    free(ctx);
    return ncclSuccess;
}

static ncclResult_t v11_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
    if (!pl_ctx_ok(ctx)) return pl_bad_arg("listen: not a context made by init");
    return pl_listen(dev, handle, listen_comm);
}

static ncclResult_t v11_connect(void *ctx, int dev, void *handle, void **send_comm,
                                ncclNetDeviceHandle_t **send_dev_comm)
{
    (void)send_dev_comm;
    if (!pl_ctx_ok(ctx)) return pl_bad_arg("connect: not a context made by init");
    return pl_connect(dev, handle, send_comm);
}

static ncclResult_t v11_get_props(int dev, ncclNetProperties_v11_t *props)
{
    pl_props_t p;
    if (!props) return pl_bad_arg("getProperties: NULL props");
    ncclResult_t res = pl_get_props(dev, &p);
    if (res != ncclSuccess) return res;
    memset(props, 0, sizeof(*props));
    PL_FILL_COMMON(props, p);
    PL_FILL_V9(props, p, dev);
    props->maxMultiRequestSize = 1;
    return ncclSuccess;
}

/* The hints describe the coming operations (peers, flows); rcoll's connections need none. */
static ncclResult_t v11_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
    (void)attr;
    if (!pl_ctx_ok(ctx)) return pl_bad_arg("setNetAttr: not a context made by init");
    return ncclSuccess;
}

PL_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = PL_NAME,
    .init = v11_init,
    .devices = pl_devices,
    .getProperties = v11_get_props,
    .listen = v11_listen,
    .connect = v11_connect,
    .accept = pl_accept_any,
    .regMr = pl_reg_mr,
    .regMrDmaBuf = NULL,
    .deregMr = pl_dereg_mr,
    .isend = v10_isend,
    .irecv = v10_irecv,
    .iflush = pl_iflush,
    .test = pl_test,
    .closeSend = pl_close_send,
    .closeRecv = pl_close_recv,
    .closeListen = pl_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = v11_finalize,
    .setNetAttr = v11_set_net_attr,
};

/* ---------------------------------------------------------------------------------------------
 * v12: v11 with a longer virtual-device list and the rail/plane of a device in its properties
 * ------------------------------------------------------------------------------------------ */

static ncclResult_t v12_get_props(int dev, ncclNetProperties_v12_t *props)
{
    pl_props_t p;
    if (!props) return pl_bad_arg("getProperties: NULL props");
    ncclResult_t res = pl_get_props(dev, &p);
    if (res != ncclSuccess) return res;
    memset(props, 0, sizeof(*props));
    PL_FILL_COMMON(props, p);
    PL_FILL_V9(props, p, dev);
    props->maxMultiRequestSize = 1;
    props->railId = NCCL_NET_ID_UNDEF; /* rcoll knows no rails or planes */
    props->planeId = NCCL_NET_ID_UNDEF;
    return ncclSuccess;
}

PL_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = PL_NAME,
    .init = v11_init,
    .devices = pl_devices,
    .getProperties = v12_get_props,
    .listen = v11_listen,
    .connect = v11_connect,
    .accept = pl_accept_any,
    .regMr = pl_reg_mr,
    .regMrDmaBuf = NULL,
    .deregMr = pl_dereg_mr,
    .isend = v10_isend,
    .irecv = v10_irecv,
    .iflush = pl_iflush,
    .test = pl_test,
    .closeSend = pl_close_send,
    .closeRecv = pl_close_recv,
    .closeListen = pl_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = v11_finalize,
    .setNetAttr = v11_set_net_attr,
};
