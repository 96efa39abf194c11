/*
 * topo_nvml.c - NVLink peers and GPU names from NVML, loaded with dlopen so that rcoll needs
 * no NVIDIA header or library to build and runs where the driver is absent (then GPUs simply
 * have no NVLink information, logged at INFO).  Declares the few NVML types it uses itself.
 * Only adds declarations to a graph under construction; never fails detection.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "util/log.h"

#define TOPO_NVML_LIB "libnvidia-ml.so.1"
#define NVML_SUCCESS 0
#define NVML_LINKS_MAX 18 /* NVML_NVLINK_MAX_LINKS of current drivers */
#define NVML_FEATURE_ENABLED 1

typedef int nvml_return_t;
typedef struct nvml_device *nvml_device_t;

/* nvmlPciInfo_t (the layout of NVML 11 and later, used by the _v2 calls) */
typedef struct {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci_info_t;

typedef struct {
    nvml_return_t (*init)(void);
    nvml_return_t (*shutdown)(void);
    nvml_return_t (*by_busid)(const char *, nvml_device_t *);
    nvml_return_t (*name)(nvml_device_t, char *, unsigned);
    nvml_return_t (*link_state)(nvml_device_t, unsigned, int *); /* nvmlEnableState_t */
    nvml_return_t (*remote_pci)(nvml_device_t, unsigned, nvml_pci_info_t *);
} nvml_fns_t;

static int bind(void *lib, const char *sym, void *fnp)
{
    void *p = dlsym(lib, sym);
    memcpy(fnp, &p, sizeof(p));
    return p != NULL;
}

/* PCI class of a bus id from sysfs (-1 when the device is not visible there). */
static long sysfs_class(const char *busid)
{
    char path[96], buf[32];
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", busid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    if (fgets(buf, sizeof(buf), f)) v = strtol(buf, NULL, 0);
    fclose(f);
    return v;
}

/* One GPU's links: counts per peer GPU, and links to anything else that is not a GPU
 * (NVSwitches; on some systems they are not visible on PCI at all). */
static void gpu_links(rcoll_topo_t *t, const nvml_fns_t *fn, int g, nvml_device_t dev)
{
    int per_peer[256] = {0};
    int nvswitch = 0;
    for (unsigned l = 0; l < NVML_LINKS_MAX; l++) {
        int active = 0;
        nvml_pci_info_t pci;
        if (fn->link_state(dev, l, &active) != NVML_SUCCESS || active != NVML_FEATURE_ENABLED)
            continue;
        memset(&pci, 0, sizeof(pci));
        if (fn->remote_pci(dev, l, &pci) != NVML_SUCCESS) continue;
        char busid[RCOLL_TOPO_BUSID_MAX], raw[40];
        snprintf(raw, sizeof(raw), "%x:%02x:%02x.0", pci.domain & 0xffff, pci.bus & 0xff,
                 pci.device & 0x1f);
        if (topo_busid_norm(raw, busid, sizeof(busid))) continue;
        int peer = -1;
        for (int i = 0; i < t->ngpus; i++)
            if (!strcmp(t->gpus[i].info.pci, busid)) peer = i;
        if (peer >= 0 && peer != g && peer < 256) {
            per_peer[peer]++;
            continue;
        }
        long cls = sysfs_class(busid);
        if (cls >= 0 && (cls >> 16) == 0x03) continue; /* a GPU hidden from us */
        nvswitch++;
    }
    for (int p = 0; p < t->ngpus && p < 256; p++)
        if (per_peer[p]) topo_add_nvlink(t, g, p, per_peer[p], 0);
    t->gpus[g].info.nvswitch_links = nvswitch;
    RCOLL_INFO(TOPO, "GPU %d (%s): %d NVLink%s to NVSwitch", g, t->gpus[g].info.pci, nvswitch,
               nvswitch == 1 ? "" : "s");
}

void topo_nvml_fill(rcoll_topo_t *t)
{
    if (!t->ngpus) return;
    void *lib = dlopen(TOPO_NVML_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        RCOLL_INFO(TOPO, "%s not loaded (%s): no NVLink information", TOPO_NVML_LIB, dlerror());
        return;
    }
    nvml_fns_t fn;
    int ok = bind(lib, "nvmlInit_v2", &fn.init) && bind(lib, "nvmlShutdown", &fn.shutdown) &&
             bind(lib, "nvmlDeviceGetHandleByPciBusId_v2", &fn.by_busid) &&
             bind(lib, "nvmlDeviceGetName", &fn.name) &&
             bind(lib, "nvmlDeviceGetNvLinkState", &fn.link_state) &&
             bind(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &fn.remote_pci);
    if (!ok) {
        RCOLL_INFO(TOPO, "%s lacks an NVML function rcoll needs: no NVLink information",
                   TOPO_NVML_LIB);
        goto out_close;
    }
    nvml_return_t r = fn.init();
    if (r != NVML_SUCCESS) {
        RCOLL_INFO(TOPO, "nvmlInit_v2 failed (%d): no NVLink information", r);
        goto out_close;
    }
    for (int g = 0; g < t->ngpus; g++) {
        nvml_device_t dev;
        r = fn.by_busid(t->gpus[g].info.pci, &dev);
        if (r != NVML_SUCCESS) {
            RCOLL_INFO(TOPO, "NVML does not know GPU %s (%d): no NVLink information for it",
                       t->gpus[g].info.pci, r);
            continue;
        }
        char name[96];
        if (fn.name(dev, name, sizeof(name)) == NVML_SUCCESS)
            topo_strlcpy(t->gpus[g].info.name, name, sizeof(t->gpus[g].info.name));
        gpu_links(t, &fn, g, dev);
    }
    fn.shutdown();
out_close:
    dlclose(lib);
}
