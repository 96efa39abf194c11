/*
 * fake_netplug.c - small NCCL net plugins that misbehave on purpose, for test_netplug_fail:
 * one build per mode (meson: -DFAKE_<MODE>).
 *   FAKE_BADINIT  ncclNetPlugin_v10 whose init logs a WARN and fails (ncclSystemError)
 *   FAKE_NODEV    ncclNetPlugin_v9 whose init works and that reports 0 devices
 *   FAKE_OLDVER   ncclNetPlugin_v7 only (a version rcoll does not take)
 *   FAKE_SHIM     ncclNetPlugin_v8 forwarding every call to the v8 table of the plugin named
 *                 by FAKE_NET_INNER (rcoll's own), so rcoll runs over NCCL's v8 ABI (int
 *                 sizes); once FAKE_NET_DIE_AFTER=N is in a process's environment (set
 *                 after its communicator exists, so the count never depends on how long
 *                 set-up polled) its test() fails with ncclRemoteError from the N-th call on
 *                 (a NIC that dies mid-job).
 *   FAKE_COPY9 .. FAKE_COPY12  ncclNetPlugin_vN only: a copy, made when the module is loaded,
 *                 of the vN table of the plugin named by FAKE_NET_INNER, renamed "fake-vN", so
 *                 the loader's code for each version carries a job.  The v12 copy, with
 *                 FAKE_NET_MAX_P2P=N in the environment when it is loaded, reports maxP2pBytes
 *                 N and refuses (ncclInvalidArgument) any isend or irecv of more than N bytes,
 *                 as a plugin with a small message limit does.
 * Plain C, libc and libdl only; nothing of rcoll is linked.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "transport/nccl_net.h"

#define EXPORT __attribute__((visibility("default")))

#if defined(FAKE_BADINIT)

static ncclResult_t bad_init(ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
    (void)prof;
    if (log) log(NCCL_LOG_WARN, NCCL_INIT | NCCL_NET, __FILE__, __LINE__,
                 "fake: init refused on purpose (no NIC here)");
    return ncclSystemError;
}

EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {.name = "fake-badinit", .init = bad_init};

#elif defined(FAKE_NODEV)

static ncclDebugLogger_t logger;

static ncclResult_t ok_init(ncclDebugLogger_t log)
{
    logger = log;
    return ncclSuccess;
}

static ncclResult_t no_devices(int *n)
{
    *n = 0;
    return ncclSuccess;
}

EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {.name = "fake-nodev", .init = ok_init,
                                              .devices = no_devices};

#elif defined(FAKE_OLDVER)

/* v7's first members are those of v8; only the symbol's name matters here. */
typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
} old_net_t;

static ncclResult_t old_init(ncclDebugLogger_t log)
{
    (void)log;
    return ncclSuccess;
}

EXPORT const old_net_t ncclNetPlugin_v7 = {.name = "fake-oldver", .init = old_init};

#elif defined(FAKE_SHIM)

static ncclDebugLogger_t logger;
static const ncclNet_v8_t *in;
static long die_after = -1, tests;

static ncclResult_t shim_init(ncclDebugLogger_t log)
{
    const char *path = getenv("FAKE_NET_INNER");
    logger = log;
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    in = lib ? dlsym(lib, "ncclNetPlugin_v8") : NULL;
    if (!in) {
        if (log) log(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "fake: cannot load "
                     "FAKE_NET_INNER=%s: %s", path ? path : "(unset)", dlerror());
        return ncclSystemError;
    }
    return in->init(log);
}

static ncclResult_t shim_devices(int *n) { return in->devices(n); }
static ncclResult_t shim_props(int d, ncclNetProperties_v8_t *p) { return in->getProperties(d, p); }
static ncclResult_t shim_listen(int d, void *h, void **l) { return in->listen(d, h, l); }
static ncclResult_t shim_connect(int d, void *h, void **s, ncclNetDeviceHandle_t **dc)
{
    return in->connect(d, h, s, dc);
}
static ncclResult_t shim_accept(void *l, void **r, ncclNetDeviceHandle_t **dc)
{
    return in->accept(l, r, dc);
}
static ncclResult_t shim_reg(void *c, void *d, size_t n, int t, void **m)
{
    return in->regMr(c, d, n, t, m);
}
static ncclResult_t shim_dereg(void *c, void *m) { return in->deregMr(c, m); }
static ncclResult_t shim_isend(void *c, void *d, int n, int t, void *m, void **r)
{
    return in->isend(c, d, n, t, m, r);
}
static ncclResult_t shim_irecv(void *c, int n, void **d, int *s, int *t, void **m, void **r)
{
    return in->irecv(c, n, d, s, t, m, r);
}
static ncclResult_t shim_iflush(void *c, int n, void **d, int *s, void **m, void **r)
{
    return in->iflush(c, n, d, s, m, r);
}
static ncclResult_t shim_test(void *r, int *done, int *sizes)
{
    if (die_after < 0) { /* armed by the test once its job runs */
        const char *die = getenv("FAKE_NET_DIE_AFTER");
        if (die) die_after = atol(die);
    }
    if (die_after >= 0 && ++tests >= die_after) {
        if (tests == die_after && logger)
            logger(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "fake: the NIC died after %ld "
                   "tests", tests);
        return ncclRemoteError;
    }
    return in->test(r, done, sizes);
}
static ncclResult_t shim_close_send(void *c) { return in->closeSend(c); }
static ncclResult_t shim_close_recv(void *c) { return in->closeRecv(c); }
static ncclResult_t shim_close_listen(void *c) { return in->closeListen(c); }

EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "fake-shim",
    .init = shim_init,
    .devices = shim_devices,
    .getProperties = shim_props,
    .listen = shim_listen,
    .connect = shim_connect,
    .accept = shim_accept,
    .regMr = shim_reg,
    .deregMr = shim_dereg,
    .isend = shim_isend,
    .irecv = shim_irecv,
    .iflush = shim_iflush,
    .test = shim_test,
    .closeSend = shim_close_send,
    .closeRecv = shim_close_recv,
    .closeListen = shim_close_listen,
};

#elif defined(FAKE_COPY9) || defined(FAKE_COPY10) || defined(FAKE_COPY11) || defined(FAKE_COPY12)

#if defined(FAKE_COPY9)
#define COPY_V 9
typedef ncclNet_v9_t copy_t;
#elif defined(FAKE_COPY10)
#define COPY_V 10
typedef ncclNet_v10_t copy_t;
#elif defined(FAKE_COPY11)
#define COPY_V 11
typedef ncclNet_v11_t copy_t;
#else
#define COPY_V 12
typedef ncclNet_v12_t copy_t;
#endif
#define STR2(x) #x
#define STR(x) STR2(x)

#if COPY_V == 12
static ncclNet_v12_t inner;
static size_t max_p2p;

static ncclResult_t small_props(int dev, ncclNetProperties_v12_t *p)
{
    ncclResult_t r = inner.getProperties(dev, p);
    if (r == ncclSuccess) p->maxP2pBytes = p->maxCollBytes = max_p2p;
    return r;
}
static ncclResult_t small_isend(void *c, void *d, size_t n, int t, void *m, void *ph, void **r)
{
    if (n > max_p2p) {
        fprintf(stderr, "fake-v12: isend of %zu bytes, maxP2pBytes is %zu\n", n, max_p2p);
        return ncclInvalidArgument;
    }
    return inner.isend(c, d, n, t, m, ph, r);
}
static ncclResult_t small_irecv(void *c, int n, void **d, size_t *sz, int *t, void **m, void **ph,
                                void **r)
{
    for (int i = 0; i < n; i++)
        if (sz[i] > max_p2p) {
            fprintf(stderr, "fake-v12: irecv of %zu bytes, maxP2pBytes is %zu\n", sz[i],
                    max_p2p);
            return ncclInvalidArgument;
        }
    return inner.irecv(c, n, d, sz, t, m, ph, r);
}
#endif

/* Filled before the loader's dlsym reads it (constructors run inside dlopen); a missing inner
 * plugin leaves it without init, which rcoll refuses with a sentence. */
EXPORT copy_t ncclNetPlugin_vN __asm__("ncclNetPlugin_v" STR(COPY_V)) = {.name = "fake-v" STR(COPY_V)};

__attribute__((constructor)) static void copy_load(void)
{
    const char *path = getenv("FAKE_NET_INNER");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    const copy_t *in = lib ? dlsym(lib, "ncclNetPlugin_v" STR(COPY_V)) : NULL;
    if (!in) {
        fprintf(stderr, "fake-v%d: cannot load FAKE_NET_INNER=%s\n", COPY_V, path ? path : "");
        return;
    }
    ncclNetPlugin_vN = *in;
    ncclNetPlugin_vN.name = "fake-v" STR(COPY_V);
#if COPY_V == 12
    const char *max = getenv("FAKE_NET_MAX_P2P");
    if (max && atol(max) > 0) {
        inner = *in;
        max_p2p = (size_t)atol(max);
        ncclNetPlugin_vN.getProperties = small_props;
        ncclNetPlugin_vN.isend = small_isend;
        ncclNetPlugin_vN.irecv = small_irecv;
    }
#endif
}

#else
#error "build with one of -DFAKE_BADINIT, -DFAKE_NODEV, -DFAKE_OLDVER, -DFAKE_SHIM, -DFAKE_COPYn"
#endif
