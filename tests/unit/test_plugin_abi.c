/*
 * test_plugin_abi.c - the NCCL net plugin's ABI (src/transport/nccl_net.h).  The size and offset
 * of every member of every struct the plugin exchanges with NCCL (ncclNet_v8..v12_t, their
 * properties, the v10-v12 config and the v11/v12 attribute structs) are compared with numbers
 * worked out by hand from the member order of NVIDIA/nccl's headers for LP64 (x86-64,
 * aarch64: pointers and size_t 8 bytes, int/float/enum 4, aligned to their size); each
 * member's type is compared with a second transcription of NCCL's declaration.  Then the
 * built library is opened: exactly ncclNetPlugin_v8 .. v12 are exported (its dynamic symbol
 * table), each is named "rcoll" and has every function NCCL calls.
 * Usage: test_plugin_abi [PATH/libnccl-net-rcoll.so | none]  (none: the layout part only).
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "transport/nccl_net.h"

#define SIZE(T, want)                                                                     \
    CHECK(sizeof(T) == (size_t)(want), "sizeof(%s) = %zu, NCCL's layout has %d", #T,      \
          sizeof(T), (int)(want))
#define OFF(T, m, want)                                                                   \
    CHECK(offsetof(T, m) == (size_t)(want), "offsetof(%s, %s) = %zu, NCCL's layout has %d", \
          #T, #m, offsetof(T, m), (int)(want))
/* member m of T has the type given after it (commas allowed) */
#define TYPE(T, m, ...)                                                                   \
    CHECK(__builtin_types_compatible_p(__typeof__(((T *)0)->m), __VA_ARGS__),             \
          "%s.%s is not %s", #T, #m, #__VA_ARGS__)

typedef ncclNetDeviceHandle_t devh_t;

/* ---------------------------------------------------------------------------------------------
 * Properties
 * ------------------------------------------------------------------------------------------ */

static void props_v8(void)
{
    typedef ncclNetProperties_v8_t T;
    OFF(T, name, 0);              /* char *                         0 ..  8 */
    OFF(T, pciPath, 8);           /* char *                         8 .. 16 */
    OFF(T, guid, 16);             /* uint64_t                      16 .. 24 */
    OFF(T, ptrSupport, 24);       /* int                           24 .. 28 */
    OFF(T, regIsGlobal, 28);      /* int                           28 .. 32 */
    OFF(T, speed, 32);            /* int                           32 .. 36 */
    OFF(T, port, 36);             /* int                           36 .. 40 */
    OFF(T, latency, 40);          /* float                         40 .. 44 */
    OFF(T, maxComms, 44);         /* int                           44 .. 48 */
    OFF(T, maxRecvs, 48);         /* int                           48 .. 52 */
    OFF(T, netDeviceType, 52);    /* enum (4 bytes)                52 .. 56 */
    OFF(T, netDeviceVersion, 56); /* int                           56 .. 60 */
    SIZE(T, 64);                  /* 60, rounded up to 8 (the pointers' alignment) */
    TYPE(T, name, char *);
    TYPE(T, pciPath, char *);
    TYPE(T, guid, uint64_t);
    TYPE(T, latency, float);
    TYPE(T, netDeviceType, ncclNetDeviceType);
    CHECK(sizeof(ncclNetDeviceType) == 4, "the device type enum has %zu bytes",
          sizeof(ncclNetDeviceType));
}

static void vprops(void)
{
    /* int ndevs 0..4, int devs[4] 4..20; alignment 4, no padding */
    SIZE(ncclNetVDeviceProps_v9_t, 20);
    OFF(ncclNetVDeviceProps_v9_t, ndevs, 0);
    OFF(ncclNetVDeviceProps_v9_t, devs, 4);
    SIZE(ncclNetVDeviceProps_v10_t, 20);
    OFF(ncclNetVDeviceProps_v10_t, devs, 4);
    SIZE(ncclNetVDeviceProps_v11_t, 20);
    OFF(ncclNetVDeviceProps_v11_t, devs, 4);
    TYPE(ncclNetVDeviceProps_v9_t, devs, int[4]);
    TYPE(ncclNetVDeviceProps_v11_t, devs, int[4]);
}

/* v9 and v10 share one layout: v8's with forceFlush after regIsGlobal, then vProps and the
 * two size limits. */
#define PROPS_V9_V10(T)                                                                   \
    do {                                                                                  \
        OFF(T, name, 0);              /* char *                     0 ..   8 */          \
        OFF(T, pciPath, 8);           /* char *                     8 ..  16 */          \
        OFF(T, guid, 16);             /* uint64_t                  16 ..  24 */          \
        OFF(T, ptrSupport, 24);       /* int                       24 ..  28 */          \
        OFF(T, regIsGlobal, 28);      /* int                       28 ..  32 */          \
        OFF(T, forceFlush, 32);       /* int                       32 ..  36 */          \
        OFF(T, speed, 36);            /* int                       36 ..  40 */          \
        OFF(T, port, 40);             /* int                       40 ..  44 */          \
        OFF(T, latency, 44);          /* float                     44 ..  48 */          \
        OFF(T, maxComms, 48);         /* int                       48 ..  52 */          \
        OFF(T, maxRecvs, 52);         /* int                       52 ..  56 */          \
        OFF(T, netDeviceType, 56);    /* enum                      56 ..  60 */          \
        OFF(T, netDeviceVersion, 60); /* int                       60 ..  64 */          \
        OFF(T, vProps, 64);           /* {int; int[4]}, 20 bytes   64 ..  84 */          \
        OFF(T, maxP2pBytes, 88);      /* size_t, aligned 8: 84 -> 88 .. 96 */            \
        OFF(T, maxCollBytes, 96);     /* size_t                    96 .. 104 */          \
        SIZE(T, 104);                 /* 104 is a multiple of 8 */                       \
        TYPE(T, vProps, ncclNetVDeviceProps_v9_t);                                        \
        TYPE(T, maxP2pBytes, size_t);                                                     \
        TYPE(T, maxCollBytes, size_t);                                                    \
    } while (0)

static void props_v9(void) { PROPS_V9_V10(ncclNetProperties_v9_t); }
static void props_v10(void) { PROPS_V9_V10(ncclNetProperties_v10_t); }

static void props_v11(void)
{
    typedef ncclNetProperties_v11_t T;
    OFF(T, name, 0);
    OFF(T, pciPath, 8);
    OFF(T, guid, 16);
    OFF(T, ptrSupport, 24);
    OFF(T, regIsGlobal, 28);
    OFF(T, forceFlush, 32);
    OFF(T, speed, 36);
    OFF(T, port, 40);
    OFF(T, latency, 44);
    OFF(T, maxComms, 48);
    OFF(T, maxRecvs, 52);
    OFF(T, netDeviceType, 56);
    OFF(T, netDeviceVersion, 60);
    OFF(T, vProps, 64);               /* 20 bytes: 64 .. 84 */
    OFF(T, maxP2pBytes, 88);          /* aligned to 8 */
    OFF(T, maxCollBytes, 96);
    OFF(T, maxMultiRequestSize, 104); /* int 104 .. 108 */
    SIZE(T, 112);                     /* 108, rounded up to 8 */
    TYPE(T, vProps, ncclNetVDeviceProps_v11_t);
    TYPE(T, maxMultiRequestSize, int);
}

static void props_v12(void)
{
    typedef ncclNetProperties_v12_t T;
    SIZE(ncclNetVDeviceProps_v12_t, 36); /* int ndevs, int devs[8] */
    OFF(ncclNetVDeviceProps_v12_t, devs, 4);
    TYPE(ncclNetVDeviceProps_v12_t, devs, int[8]);
    OFF(T, name, 0); /* 0 .. 64 as v11 */
    OFF(T, pciPath, 8);
    OFF(T, guid, 16);
    OFF(T, ptrSupport, 24);
    OFF(T, regIsGlobal, 28);
    OFF(T, forceFlush, 32);
    OFF(T, speed, 36);
    OFF(T, port, 40);
    OFF(T, latency, 44);
    OFF(T, maxComms, 48);
    OFF(T, maxRecvs, 52);
    OFF(T, netDeviceType, 56);
    OFF(T, netDeviceVersion, 60);
    OFF(T, vProps, 64);               /* 36 bytes: 64 .. 100 */
    OFF(T, maxP2pBytes, 104);         /* aligned to 8 */
    OFF(T, maxCollBytes, 112);
    OFF(T, maxMultiRequestSize, 120); /* int 120 .. 124 */
    OFF(T, railId, 124);              /* int16_t 124 .. 126 */
    OFF(T, planeId, 126);             /* int16_t 126 .. 128 */
    SIZE(T, 128);
    TYPE(T, vProps, ncclNetVDeviceProps_v12_t);
    TYPE(T, maxP2pBytes, size_t);
    TYPE(T, railId, int16_t);
    TYPE(T, planeId, int16_t);
}

static void configs(void)
{
    /* one int: trafficClass */
    SIZE(ncclNetCommConfig_v10_t, 4);
    OFF(ncclNetCommConfig_v10_t, trafficClass, 0);
    SIZE(ncclNetCommConfig_v11_t, 4);
    OFF(ncclNetCommConfig_v11_t, trafficClass, 0);
    SIZE(ncclNetCommConfig_v12_t, 4);
    OFF(ncclNetCommConfig_v12_t, trafficClass, 0);
    SIZE(ncclNetAttr_v12_t, 44); /* as v11's */
    OFF(ncclNetAttr_v12_t, proto, 40);
    /* four int32_t */
    SIZE(ncclNetCommAttr_v11_t, 16);
    OFF(ncclNetCommAttr_v11_t, maxConcurrentPeers, 0);
    OFF(ncclNetCommAttr_v11_t, minConcurrentPeers, 4);
    OFF(ncclNetCommAttr_v11_t, maxFlowsPerPeer, 8);
    OFF(ncclNetCommAttr_v11_t, minFlowsPerPeer, 12);
    /* two 16-byte attrs, then three uint32_t: 32 + 12 = 44, alignment 4 */
    SIZE(ncclNetAttr_v11_t, 44);
    OFF(ncclNetAttr_v11_t, sendCommAttr, 0);
    OFF(ncclNetAttr_v11_t, recvCommAttr, 16);
    OFF(ncclNetAttr_v11_t, op, 32);
    OFF(ncclNetAttr_v11_t, algo, 36);
    OFF(ncclNetAttr_v11_t, proto, 40);
    TYPE(ncclNetAttr_v11_t, op, uint32_t);
    CHECK(sizeof(ncclResult_t) == 4, "ncclResult_t has %zu bytes", sizeof(ncclResult_t));
    CHECK(ncclSuccess == 0 && ncclSystemError == 2 && ncclInternalError == 3 &&
              ncclInvalidArgument == 4 && ncclInvalidUsage == 5 && ncclRemoteError == 6 &&
              ncclInProgress == 7, "ncclResult_t values");
    CHECK(NCCL_NET_HANDLE_MAXSIZE == 128 && NCCL_PTR_HOST == 1 && NCCL_PTR_CUDA == 2 &&
              NCCL_PTR_DMABUF == 4 && NCCL_LOG_WARN == 2 && NCCL_LOG_INFO == 3 &&
              NCCL_NET == 0x10 && NCCL_INIT == 0x1, "constants");
}

/* ---------------------------------------------------------------------------------------------
 * The function tables: a name, then one 8-byte function pointer per slot
 * ------------------------------------------------------------------------------------------ */

/* Members 0..18 are the same in every version (v8's whole table); slot i at 8 * i. */
#define NET_COMMON(T)                                                                     \
    do {                                                                                  \
        OFF(T, name, 0);           /* slot 0  const char * */                             \
        OFF(T, init, 8);           /* slot 1 */                                           \
        OFF(T, devices, 16);       /* slot 2 */                                           \
        OFF(T, getProperties, 24); /* slot 3 */                                           \
        OFF(T, listen, 32);        /* slot 4 */                                           \
        OFF(T, connect, 40);       /* slot 5 */                                           \
        OFF(T, accept, 48);        /* slot 6 */                                           \
        OFF(T, regMr, 56);         /* slot 7 */                                           \
        OFF(T, regMrDmaBuf, 64);   /* slot 8 */                                           \
        OFF(T, deregMr, 72);       /* slot 9 */                                           \
        OFF(T, isend, 80);         /* slot 10 */                                          \
        OFF(T, irecv, 88);         /* slot 11 */                                          \
        OFF(T, iflush, 96);        /* slot 12 */                                          \
        OFF(T, test, 104);         /* slot 13 */                                          \
        OFF(T, closeSend, 112);    /* slot 14 */                                          \
        OFF(T, closeRecv, 120);    /* slot 15 */                                          \
        OFF(T, closeListen, 128);  /* slot 16 */                                          \
        OFF(T, getDeviceMr, 136);  /* slot 17 */                                          \
        OFF(T, irecvConsumed, 144); /* slot 18 */                                         \
        TYPE(T, name, const char *);                                                      \
        TYPE(T, devices, ncclResult_t (*)(int *));                                        \
        TYPE(T, accept, ncclResult_t (*)(void *, void **, devh_t **));                    \
        TYPE(T, regMr, ncclResult_t (*)(void *, void *, size_t, int, void **));           \
        TYPE(T, regMrDmaBuf,                                                              \
             ncclResult_t (*)(void *, void *, size_t, int, uint64_t, int, void **));      \
        TYPE(T, deregMr, ncclResult_t (*)(void *, void *));                               \
        TYPE(T, iflush, ncclResult_t (*)(void *, int, void **, int *, void **, void **)); \
        TYPE(T, test, ncclResult_t (*)(void *, int *, int *));                            \
        TYPE(T, closeSend, ncclResult_t (*)(void *));                                     \
        TYPE(T, closeRecv, ncclResult_t (*)(void *));                                     \
        TYPE(T, closeListen, ncclResult_t (*)(void *));                                   \
        TYPE(T, getDeviceMr, ncclResult_t (*)(void *, void *, void **));                  \
        TYPE(T, irecvConsumed, ncclResult_t (*)(void *, int, void *));                    \
    } while (0)

static void net_v8(void)
{
    typedef ncclNet_v8_t T;
    NET_COMMON(T);
    SIZE(T, 152); /* 19 slots x 8 */
    TYPE(T, init, ncclResult_t (*)(ncclDebugLogger_t));
    TYPE(T, getProperties, ncclResult_t (*)(int, ncclNetProperties_v8_t *));
    TYPE(T, listen, ncclResult_t (*)(int, void *, void **));
    TYPE(T, connect, ncclResult_t (*)(int, void *, void **, devh_t **));
    TYPE(T, isend, ncclResult_t (*)(void *, void *, int, int, void *, void **));
    TYPE(T, irecv, ncclResult_t (*)(void *, int, void **, int *, int *, void **, void **));
}

static void net_v9(void)
{
    typedef ncclNet_v9_t T;
    NET_COMMON(T);
    OFF(T, makeVDevice, 152); /* slot 19 */
    SIZE(T, 160);             /* 20 slots x 8 */
    TYPE(T, init, ncclResult_t (*)(ncclDebugLogger_t));
    TYPE(T, getProperties, ncclResult_t (*)(int, ncclNetProperties_v9_t *));
    TYPE(T, listen, ncclResult_t (*)(int, void *, void **));
    TYPE(T, connect, ncclResult_t (*)(int, void *, void **, devh_t **));
    TYPE(T, isend, ncclResult_t (*)(void *, void *, size_t, int, void *, void **));
    TYPE(T, irecv, ncclResult_t (*)(void *, int, void **, size_t *, int *, void **, void **));
    TYPE(T, makeVDevice, ncclResult_t (*)(int *, ncclNetVDeviceProps_v9_t *));
}

static void net_v10(void)
{
    typedef ncclNet_v10_t T;
    NET_COMMON(T);
    OFF(T, makeVDevice, 152); /* slot 19 */
    SIZE(T, 160);
    TYPE(T, init, ncclResult_t (*)(ncclDebugLogger_t, ncclProfilerCallback_t));
    TYPE(T, getProperties, ncclResult_t (*)(int, ncclNetProperties_v10_t *));
    TYPE(T, listen, ncclResult_t (*)(int, void *, void **));
    TYPE(T, connect,
         ncclResult_t (*)(int, ncclNetCommConfig_v10_t *, void *, void **, devh_t **));
    TYPE(T, isend, ncclResult_t (*)(void *, void *, size_t, int, void *, void *, void **));
    TYPE(T, irecv, ncclResult_t (*)(void *, int, void **, size_t *, int *, void **, void **,
                                    void **));
    TYPE(T, makeVDevice, ncclResult_t (*)(int *, ncclNetVDeviceProps_v10_t *));
}

static void net_v11(void)
{
    typedef ncclNet_v11_t T;
    NET_COMMON(T);
    OFF(T, makeVDevice, 152); /* slot 19 */
    OFF(T, finalize, 160);    /* slot 20 */
    OFF(T, setNetAttr, 168);  /* slot 21 */
    SIZE(T, 176);             /* 22 slots x 8 */
    TYPE(T, init, ncclResult_t (*)(void **, uint64_t, ncclNetCommConfig_v11_t *,
                                   ncclDebugLogger_t, ncclProfilerCallback_t));
    TYPE(T, getProperties, ncclResult_t (*)(int, ncclNetProperties_v11_t *));
    TYPE(T, listen, ncclResult_t (*)(void *, int, void *, void **));
    TYPE(T, connect, ncclResult_t (*)(void *, int, void *, void **, devh_t **));
    TYPE(T, isend, ncclResult_t (*)(void *, void *, size_t, int, void *, void *, void **));
    TYPE(T, irecv, ncclResult_t (*)(void *, int, void **, size_t *, int *, void **, void **,
                                    void **));
    TYPE(T, makeVDevice, ncclResult_t (*)(int *, ncclNetVDeviceProps_v11_t *));
    TYPE(T, finalize, ncclResult_t (*)(void *));
    TYPE(T, setNetAttr, ncclResult_t (*)(void *, ncclNetAttr_v11_t *));
}

/* v12: v11's 22 slots in v11's order; only the property and virtual-device types differ */
static void net_v12(void)
{
    typedef ncclNet_v12_t T;
    NET_COMMON(T);
    OFF(T, makeVDevice, 152);
    OFF(T, finalize, 160);
    OFF(T, setNetAttr, 168);
    SIZE(T, 176);
    TYPE(T, init, ncclResult_t (*)(void **, uint64_t, ncclNetCommConfig_v12_t *,
                                   ncclDebugLogger_t, ncclProfilerCallback_t));
    TYPE(T, getProperties, ncclResult_t (*)(int, ncclNetProperties_v12_t *));
    TYPE(T, listen, ncclResult_t (*)(void *, int, void *, void **));
    TYPE(T, connect, ncclResult_t (*)(void *, int, void *, void **, devh_t **));
    TYPE(T, isend, ncclResult_t (*)(void *, void *, size_t, int, void *, void *, void **));
    TYPE(T, irecv, ncclResult_t (*)(void *, int, void **, size_t *, int *, void **, void **,
                                    void **));
    TYPE(T, makeVDevice, ncclResult_t (*)(int *, ncclNetVDeviceProps_v12_t *));
    TYPE(T, finalize, ncclResult_t (*)(void *));
    TYPE(T, setNetAttr, ncclResult_t (*)(void *, ncclNetAttr_v12_t *));
}

static void logger_type(void)
{
    TYPE(ncclNet_v8_t, init,
         ncclResult_t (*)(void (*)(ncclDebugLogLevel, unsigned long, const char *, int,
                                   const char *, ...)));
    TYPE(ncclNet_v10_t, init,
         ncclResult_t (*)(ncclDebugLogger_t,
                          ncclResult_t (*)(void **, int, void *, int64_t, void *)));
}

/* ---------------------------------------------------------------------------------------------
 * The built library
 * ------------------------------------------------------------------------------------------ */

static const char *so_path;

/* The defined global/weak symbols of the file's dynamic symbol table, each on its own
 * line in out; their number, or -1 when the file is not a readable ELF64 object. */
static int dynamic_exports(const char *path, char *out, size_t len)
{
    int n = -1, fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) goto out;
    const unsigned char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) goto out;
    const Elf64_Ehdr *eh = (const void *)map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64) goto unmap;
    const Elf64_Shdr *sh = (const void *)(map + eh->e_shoff);
    out[0] = '\0';
    n = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || !sh[i].sh_entsize) continue;
        const Elf64_Sym *sym = (const void *)(map + sh[i].sh_offset);
        const char *str = (const char *)(map + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sh[i].sh_entsize; k++) {
            int bind = ELF64_ST_BIND(sym[k].st_info);
            if (sym[k].st_shndx == SHN_UNDEF || !sym[k].st_name ||
                (bind != STB_GLOBAL && bind != STB_WEAK))
                continue;
            size_t used = strlen(out);
            snprintf(out + used, len - used, "%s\n", str + sym[k].st_name);
            n++;
        }
    }
unmap:
    munmap((void *)map, (size_t)st.st_size);
out:
    if (fd >= 0) close(fd);
    return n;
}

static void exports(void)
{
    char names[4096];
    int n = dynamic_exports(so_path, names, sizeof(names));
    CHECK(n == 5, "%s exports %d symbols, 5 expected:\n%s", so_path, n, n > 0 ? names : "");
    const char *want[] = {"ncclNetPlugin_v8\n", "ncclNetPlugin_v9\n", "ncclNetPlugin_v10\n",
                          "ncclNetPlugin_v11\n", "ncclNetPlugin_v12\n"};
    for (int i = 0; i < 5; i++)
        CHECK(n > 0 && strstr(names, want[i]), "%s does not export %.*s", so_path,
              (int)strlen(want[i]) - 1, want[i]);
}

/* What NCCL calls unconditionally must be there; what it treats as optional and rcoll does
 * not implement must be NULL (a stub that fails would fail NCCL: makeVDevice). */
#define REQUIRED(t)                                                                       \
    do {                                                                                  \
        CHECK(t->name && !strcmp(t->name, "rcoll"), "name '%s'", t->name);                \
        CHECK(t->init && t->devices && t->getProperties && t->listen && t->connect &&     \
                  t->accept && t->regMr && t->deregMr && t->isend && t->irecv &&          \
                  t->iflush && t->test && t->closeSend && t->closeRecv && t->closeListen, \
              "a function NCCL calls is NULL");                                           \
        CHECK(!t->regMrDmaBuf && !t->getDeviceMr && !t->irecvConsumed,                    \
              "regMrDmaBuf, getDeviceMr and irecvConsumed should be NULL (no dma-buf, "   \
              "host networking)");                                                        \
    } while (0)

static void symbols(void)
{
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", so_path, dlerror());
    if (!h) return;
    const ncclNet_v8_t *t8 = dlsym(h, "ncclNetPlugin_v8");
    const ncclNet_v9_t *t9 = dlsym(h, "ncclNetPlugin_v9");
    const ncclNet_v10_t *t10 = dlsym(h, "ncclNetPlugin_v10");
    const ncclNet_v11_t *t11 = dlsym(h, "ncclNetPlugin_v11");
    const ncclNet_v12_t *t12 = dlsym(h, "ncclNetPlugin_v12");
    CHECK(t8 && t9 && t10 && t11 && t12, "a versioned symbol is missing");
    if (t8) REQUIRED(t8);
    if (t9) {
        REQUIRED(t9);
        CHECK(!t9->makeVDevice, "v9 makeVDevice should be NULL (not supported)");
    }
    if (t10) {
        REQUIRED(t10);
        CHECK(!t10->makeVDevice, "v10 makeVDevice should be NULL");
    }
    if (t11) {
        REQUIRED(t11);
        CHECK(!t11->makeVDevice, "v11 makeVDevice should be NULL");
        CHECK(t11->finalize && t11->setNetAttr, "v11 finalize and setNetAttr");
    }
    if (t12) {
        REQUIRED(t12);
        CHECK(!t12->makeVDevice, "v12 makeVDevice should be NULL");
        CHECK(t12->finalize && t12->setNetAttr, "v12 finalize and setNetAttr");
        ncclNetProperties_v12_t p;
        memset(&p, 0x5a, sizeof(p));
        void *ctx = NULL;
        ncclNetCommConfig_v12_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
        int ndev = 0;
        if (t12->init(&ctx, 1, &cfg, NULL, NULL) == ncclSuccess && t12->devices(&ndev) ==
            ncclSuccess && ndev > 0) {
            CHECK(t12->getProperties(0, &p) == ncclSuccess, "v12 getProperties(0) failed");
            CHECK(p.railId == NCCL_NET_ID_UNDEF && p.planeId == NCCL_NET_ID_UNDEF,
                  "v12 railId %d planeId %d, -1 (not known) expected", p.railId, p.planeId);
            CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == 0 && p.maxMultiRequestSize == 1 &&
                      p.maxP2pBytes > 0 && p.maxP2pBytes == p.maxCollBytes,
                  "v12 vProps %d/%d, maxMultiRequestSize %d, maxP2pBytes %zu", p.vProps.ndevs,
                  p.vProps.devs[0], p.maxMultiRequestSize, p.maxP2pBytes);
            t12->finalize(ctx);
        } else {
            CHECK(0, "v12 init/devices failed here");
        }
    }
    /* nothing of rcoll leaks out (the exports check reads the table; this asks the loader) */
    CHECK(!dlsym(h, "rcoll_transport_find") && !dlsym(h, "rcoll_log_write") &&
              !dlsym(h, "pl_init"), "an internal symbol is visible");
    /* unloaded as NCCL unloads it: the transports and their knobs are released (an ASan
     * build names any leak) */
    CHECK(dlclose(h) == 0, "dlclose: %s", dlerror());
}

int main(int argc, char **argv)
{
    so_path = argc > 1 ? argv[1] : "none";
    check_case("properties v8", props_v8);
    check_case("virtual device props v9-v11", vprops);
    check_case("properties v9", props_v9);
    check_case("properties v10", props_v10);
    check_case("properties v11", props_v11);
    check_case("properties v12", props_v12);
    check_case("config, attributes, results, constants", configs);
    check_case("ncclNet_v8_t", net_v8);
    check_case("ncclNet_v9_t", net_v9);
    check_case("ncclNet_v10_t", net_v10);
    check_case("ncclNet_v11_t", net_v11);
    check_case("ncclNet_v12_t", net_v12);
    check_case("logger and profiler types", logger_type);
    if (strcmp(so_path, "none")) {
        check_case("exported symbols", exports);
        check_case("tables and names", symbols);
    } else {
        check_skip("the plugin was not built (-Dnccl_plugin): its exports not checked");
    }
    return check_summary();
}
