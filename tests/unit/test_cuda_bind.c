/*
 * test_cuda_bind.c - how rcoll binds the CUDA driver's entry points (cuda/cuda_drv.c), through
 * the scripted driver library (tests/common/cuda_script_lib.c, RCOLL_CUDA_LIB) loaded by the
 * same dlopen + cuGetProcAddress path as libcuda.so.1.  The script hands out, as a real
 * driver does, the newest form of a function not newer than the version asked for: CUDA 13's
 * cuCtxGetDevice(CUdevice *, CUcontext) and cuCtxSynchronize(CUcontext) to a caller asking at
 * 13000, the one- and no-argument forms below.  Checked here:
 * - every slot of the table holds the form its member declares (the script says which form a
 *   function pointer is: cuda_script_abi), cuCtxGetDevice and cuCtxSynchronize by name;
 * - the calls that go through them (the bus id of the current device and of a buffer's
 *   device, on the second of two scripted devices) answer right;
 * - the script itself: the CUDA 13 forms fail for a context it never handed out, too old a
 *   version gets a failing stand-in, cuCtxSetCurrent refuses a context it never handed out;
 * - the device reduction after the application reset the primary context (cudaDeviceReset):
 *   the handle is the same, the kernels loaded into the old context are gone, so rcoll's
 *   module cache must notice (by the context's id) and load them again.
 * What this does NOT test: a real driver (tests/gpu/run.sh does, on a GPU).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "cuda/kernels.h"
#include "rcoll.h"
#include "util/status.h"

typedef int (*abi_fn_t)(const void *fn);
typedef CUresult (*get_proc_fn_t)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

static abi_fn_t abi_of;
static get_proc_fn_t get_proc;

static void test_slots(void)
{
    int scripted = 0, other = 0;
    /* Each slot: the form of the version its member was declared with; names the script does
     * not implement answer 0 (its "not supported" stand-in) and are only counted. */
#define SLOT(name, version)                                                                \
    do {                                                                                   \
        void *fn_;                                                                         \
        memcpy(&fn_, &rcoll_cu->name, sizeof(fn_));                                        \
        int abi_ = abi_of(fn_);                                                            \
        if (abi_ == 0) {                                                                   \
            other++;                                                                       \
            break;                                                                         \
        }                                                                                  \
        scripted++;                                                                        \
        CHECK(abi_ == (version), "%s is bound to the form of CUDA %d, the table declares %d", \
              #name, abi_, (int)(version));                                                \
    } while (0);
    RCOLL_CU_ENTRIES(SLOT)
#undef SLOT
    printf("  %d slots checked against the script's forms, %d the script does not implement\n",
           scripted, other);
    CHECK(scripted >= 40, "only %d of the table's slots are scripted", scripted);
    /* The two whose CUDA 13 forms take a context (PFN_..._v13000): the old forms, by name. */
    void *fn;
    memcpy(&fn, &rcoll_cu->cuCtxGetDevice, sizeof(fn));
    CHECK(abi_of(fn) == 2000, "cuCtxGetDevice is the CUDA %d form, not cuCtxGetDevice(CUdevice *)",
          abi_of(fn));
    memcpy(&fn, &rcoll_cu->cuCtxSynchronize, sizeof(fn));
    CHECK(abi_of(fn) == 2000, "cuCtxSynchronize is the CUDA %d form, not cuCtxSynchronize(void)",
          abi_of(fn));
}

/* The library's calls through cuCtxGetDevice, on the second device (its context is not 0). */
static void test_calls(void)
{
    int n = 0;
    CHECK(rcoll_cuda_device_count(&n) == RCOLL_OK && n == 2, "2 scripted devices: %d (%s)", n,
          rcoll_cuda_last_error());
    CHECK(rcoll_cuda_set_device(1) == RCOLL_OK, "set device 1: %s", rcoll_cuda_last_error());
    char bus[32] = "";
    CHECK(rcoll_gpu_current_bus(bus, sizeof(bus)) == RCOLL_OK && !strcmp(bus, "0000:1a:00.0"),
          "current device's bus id: '%s' (%s)", bus, rcoll_err_get());
    void *p = NULL;
    CHECK(rcoll_cuda_alloc(&p, 4096) == RCOLL_OK && p, "alloc on device 1: %s",
          rcoll_cuda_last_error());
    CHECK(rcoll_cuda_set_device(0) == RCOLL_OK, "set device 0");
    memset(bus, 0, sizeof(bus));
    CHECK(p && rcoll_gpu_ptr_bus(p, bus, sizeof(bus)) == RCOLL_OK && !strcmp(bus, "0000:1a:00.0"),
          "a device-1 buffer's bus id while device 0 is current: '%s' (%s)", bus,
          rcoll_err_get());
    CUresult res = rcoll_cu->cuCtxSynchronize();
    CHECK(res == CUDA_SUCCESS, "cuCtxSynchronize: %d", (int)res);
    if (p) CHECK(rcoll_cuda_free(p) == RCOLL_OK, "free");
}

/* The script behaves as the driver would with the CUDA 13 forms and with bad contexts. */
static void test_script(void)
{
    CUresult (*dev_v13)(CUdevice *, CUcontext) = NULL;
    CUresult (*sync_v13)(CUcontext) = NULL;
    CUresult (*alloc_v2000)(unsigned int *, unsigned int) = NULL;
    CUdriverProcAddressQueryResult q;
    CHECK(get_proc("cuCtxGetDevice", (void **)&dev_v13, 13000, 0, &q) == CUDA_SUCCESS &&
          abi_of((void *)dev_v13) == 13000, "cuCtxGetDevice at 13000: the CUDA 13 form");
    CHECK(get_proc("cuCtxSynchronize", (void **)&sync_v13, 13000, 0, &q) == CUDA_SUCCESS &&
          abi_of((void *)sync_v13) == 13000, "cuCtxSynchronize at 13000: the CUDA 13 form");
    CHECK(get_proc("cuMemAlloc", (void **)&alloc_v2000, 2000, 0, &q) == CUDA_SUCCESS &&
          abi_of((void *)alloc_v2000) == 1, "cuMemAlloc at 2000: the too-old stand-in");
    CUcontext ctx1 = NULL, bogus = (CUcontext)(uintptr_t)0x5a5a5a50;
    CUdevice dev = -1;
    rcoll_cu->cuDevicePrimaryCtxRetain(&ctx1, 1);
    if (dev_v13) {
        CHECK(dev_v13(&dev, ctx1) == CUDA_SUCCESS && dev == 1, "v13 form, device 1's context");
        CHECK(dev_v13(&dev, bogus) == CUDA_ERROR_INVALID_CONTEXT,
              "v13 form, a context never handed out: refused");
    }
    if (sync_v13)
        CHECK(sync_v13(bogus) == CUDA_ERROR_INVALID_CONTEXT, "v13 sync, bogus context: refused");
    if (alloc_v2000) {
        unsigned int p32 = 0;
        CHECK(alloc_v2000(&p32, 64) != CUDA_SUCCESS, "the too-old form fails");
    }
    CUcontext saved = NULL;
    rcoll_cu->cuCtxGetCurrent(&saved);
    CHECK(rcoll_cu->cuCtxSetCurrent(bogus) == CUDA_ERROR_INVALID_CONTEXT,
          "cuCtxSetCurrent of a context never handed out: refused");
    rcoll_cu->cuCtxSetCurrent(saved);
    rcoll_cu->cuDevicePrimaryCtxRelease(1);
}

/* dst = a + b of 64 floats on device 0 through rcoll's kernels; 1 when the result is right. */
static int reduce_once(CUstream s, const char *when)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    float ha[64], hb[64], hd[64];
    for (int i = 0; i < 64; i++) ha[i] = (float)i, hb[i] = 1000.0f, hd[i] = -1;
    void *a = NULL, *b = NULL, *d = NULL;
    int ok = rcoll_cuda_alloc(&a, sizeof(ha)) == RCOLL_OK &&
             rcoll_cuda_alloc(&b, sizeof(hb)) == RCOLL_OK &&
             rcoll_cuda_alloc(&d, sizeof(hd)) == RCOLL_OK &&
             cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)a, ha, sizeof(ha)) == CUDA_SUCCESS &&
             cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)b, hb, sizeof(hb)) == CUDA_SUCCESS;
    CHECK(ok, "%s: buffers", when);
    rcoll_status_t st = ok ? rcoll_cuda_reduce((CUdeviceptr)(uintptr_t)d, 0,
                                               (CUdeviceptr)(uintptr_t)a,
                                               (CUdeviceptr)(uintptr_t)b, 64, RCOLL_FLOAT32,
                                               RCOLL_SUM, 0, s)
                           : RCOLL_ERR_SYSTEM;
    CHECK(st == RCOLL_OK, "%s: the device reduction launches: %s", when, rcoll_err_get());
    CUresult res = cu->cuStreamSynchronize(s);
    CHECK(res == CUDA_SUCCESS, "%s: the stream: %d", when, (int)res);
    int right = st == RCOLL_OK && res == CUDA_SUCCESS &&
                cu->cuMemcpyDtoH(hd, (CUdeviceptr)(uintptr_t)d, sizeof(hd)) == CUDA_SUCCESS;
    for (int i = 0; right && i < 64; i++) right = hd[i] == (float)i + 1000.0f;
    CHECK(right, "%s: the sum is right", when);
    rcoll_cuda_free(a), rcoll_cuda_free(b), rcoll_cuda_free(d);
    return right;
}

static void test_reset(void)
{
    const rcoll_cu_api_t *cu = rcoll_cu;
    CHECK(rcoll_cuda_set_device(0) == RCOLL_OK, "device 0");
    CUstream s = NULL;
    CHECK(cu->cuStreamCreate(&s, 0) == CUDA_SUCCESS, "a stream");
    reduce_once(s, "before the reset");
    cu->cuStreamDestroy(s);
    CUresult (*reset)(CUdevice) = NULL;
    CUdriverProcAddressQueryResult q;
    CHECK(get_proc("cuDevicePrimaryCtxReset", (void **)&reset, 11000, 0, &q) == CUDA_SUCCESS &&
          abi_of((void *)reset) == 11000, "the script resets primary contexts");
    if (!reset) return;
    CUcontext before = NULL, after = NULL;
    cu->cuCtxGetCurrent(&before);
    unsigned long long id0 = 0, id1 = 0;
    cu->cuCtxGetId(before, &id0);
    CHECK(reset(0) == CUDA_SUCCESS, "cuDevicePrimaryCtxReset(0)");
    CHECK(rcoll_cuda_set_device(0) == RCOLL_OK, "device 0 again");
    cu->cuCtxGetCurrent(&after);
    cu->cuCtxGetId(after, &id1);
    CHECK(before == after && id0 != id1, "same handle (%p, %p), a new context (id %llu, %llu)",
          (void *)before, (void *)after, id0, id1);
    CHECK(cu->cuStreamCreate(&s, 0) == CUDA_SUCCESS, "a stream in the new context");
    reduce_once(s, "after the reset");
    cu->cuStreamDestroy(s);
}

int main(void)
{
    check_set_note(rcoll_err_get);
    const char *path = getenv("RCOLL_CUDA_LIB");
    if (!path) {
        check_skip("RCOLL_CUDA_LIB names no scripted driver library");
        return check_summary();
    }
    setenv("CUDA_SCRIPT_DEVICES", "2", 1);
    rcoll_status_t st = rcoll_cu_load(path);
    CHECK(st == RCOLL_OK, "load %s: %s", path, rcoll_err_get());
    void *lib = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (st != RCOLL_OK || !lib) return check_summary();
    void *a = dlsym(lib, "cuda_script_abi"), *g = dlsym(lib, "cuGetProcAddress_v2");
    CHECK(a && g, "the script exports cuda_script_abi and cuGetProcAddress_v2");
    if (!a || !g) return check_summary();
    memcpy(&abi_of, &a, sizeof(a));
    memcpy(&get_proc, &g, sizeof(g));
    check_case("slots", test_slots);
    check_case("calls", test_calls);
    check_case("script", test_script);
    check_case("reset", test_reset);
    dlclose(lib);
    return check_summary();
}
