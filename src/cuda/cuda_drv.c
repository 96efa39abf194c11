/*
 * cuda_drv.c - loads the CUDA driver at run time and fills the driver function table (see
 * cuda_drv.h).  Each entry point is bound with cuGetProcAddress at the version of the ABI
 * its member declares (RCOLL_CU_ENTRIES), checked here at compile time against
 * cudaTypedefs.h, so that the driver hands out the function of that signature (cuMemAlloc_v2,
 * and the one-argument cuCtxGetDevice even from a CUDA 13 driver).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "cuda/cuda_drv.h"
#include "util/log.h"
#include "util/status.h"

const rcoll_cu_api_t *rcoll_cu;

static rcoll_cu_api_t loaded;
static void *lib;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static rcoll_status_t load_status = RCOLL_ERR_UNSUPPORTED;
static char load_text[RCOLL_ERR_TEXT_MAX];
static int load_done;

/* Each member has the type of the PFN typedef of the version it is bound at, and the list
 * names every member (the table holds nothing but these pointers). */
#define RCOLL_CU_PASTE_(a, b) a##b
#define RCOLL_CU_PASTE(a, b) RCOLL_CU_PASTE_(a, b) /* b expanded, a not (cuMemAlloc is a macro) */
#define RCOLL_CU_CHECK(name, version)                                                      \
    _Static_assert(__builtin_types_compatible_p(__typeof__(((rcoll_cu_api_t *)0)->name),   \
                                                RCOLL_CU_PASTE(PFN_##name##_v, version)),   \
                   "rcoll_cu_api_t." #name " is not the PFN_" #name " of its version");
RCOLL_CU_ENTRIES(RCOLL_CU_CHECK)
#undef RCOLL_CU_CHECK
#define RCOLL_CU_COUNT(name, version) +1
_Static_assert(sizeof(rcoll_cu_api_t) == (0 RCOLL_CU_ENTRIES(RCOLL_CU_COUNT)) * sizeof(void (*)(void)),
               "a member of rcoll_cu_api_t is missing from RCOLL_CU_ENTRIES");
#undef RCOLL_CU_COUNT

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

const char *rcoll_cu_strerror(CUresult res, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (rcoll_cu && rcoll_cu->cuGetErrorName) rcoll_cu->cuGetErrorName(res, &name);
    if (rcoll_cu && rcoll_cu->cuGetErrorString) rcoll_cu->cuGetErrorString(res, &text);
    if (name && text)
        snprintf(buf, len, "%s (%s)", name, text);
    else
        snprintf(buf, len, "CUDA error %d", (int)res);
    return buf;
}

/* The checks every table passes before use: the driver's version, then cuInit. */
static rcoll_status_t start(const rcoll_cu_api_t *api, const char *what)
{
    int version = 0;
    CUresult res = api->cuDriverGetVersion(&version);
    if (res != CUDA_SUCCESS)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                             "%s: cuDriverGetVersion failed (error %d): not a usable CUDA driver",
                             what, (int)res);
    if (version < RCOLL_CUDA_MIN_DRIVER)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                             "CUDA driver %d.%d (%s) is too old: rcoll's kernels were built with "
                             "CUDA %d.%d and need a driver of CUDA %d.0 or newer (update the "
                             "NVIDIA driver)", version / 1000, version % 1000 / 10, what,
                             CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
                             RCOLL_CUDA_MIN_DRIVER / 1000);
    res = api->cuInit(0);
    if (res != CUDA_SUCCESS) {
        const rcoll_cu_api_t *saved = rcoll_cu;
        char text[160];
        rcoll_cu = api; /* for the error's name and text */
        rcoll_cu_strerror(res, text, sizeof(text));
        rcoll_cu = saved;
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                             "cuInit failed: %s: the CUDA driver (%s) cannot start, so no CUDA "
                             "device can be used", text, what);
    }
    return RCOLL_OK;
}

#define BIND(name, version)                                                                \
    do {                                                                                   \
        void *p_ = NULL;                                                                   \
        CUdriverProcAddressQueryResult q_ = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;          \
        if (get_proc(#name, &p_, version, CU_GET_PROC_ADDRESS_DEFAULT, &q_) !=             \
                CUDA_SUCCESS ||                                                            \
            q_ != CU_GET_PROC_ADDRESS_SUCCESS || !p_) {                                    \
            if (!missing) missing = #name, missing_version = version;                      \
        }                                                                                  \
        memcpy(&loaded.name, &p_, sizeof(p_));                                             \
    } while (0);

static rcoll_status_t load_locked(const char *path)
{
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "no CUDA driver (%s)", dlerror());
    void *v = dlsym(lib, "cuDriverGetVersion");
    void *g = dlsym(lib, "cuGetProcAddress_v2");
    void *i = dlsym(lib, "cuInit");
    rcoll_status_t st = RCOLL_OK;
    if (!v || !i) {
        st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                           "no CUDA driver (%s lacks cuDriverGetVersion or cuInit: not a CUDA "
                           "driver library)", path);
    } else {
        memcpy(&loaded.cuDriverGetVersion, &v, sizeof(v));
        memcpy(&loaded.cuInit, &i, sizeof(i));
        int version = 0;
        /* An old driver lacks cuGetProcAddress_v2: say "too old", not "missing symbol". */
        if (!g && loaded.cuDriverGetVersion(&version) == CUDA_SUCCESS &&
            version >= RCOLL_CUDA_MIN_DRIVER)
            st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                               "no CUDA driver (%s lacks cuGetProcAddress_v2)", path);
        else if (!g)
            st = start(&loaded, path); /* reports the version */
    }
    if (st == RCOLL_OK) {
        get_proc_fn get_proc;
        memcpy(&get_proc, &g, sizeof(g));
        const char *missing = NULL;
        int missing_version = 0;
        RCOLL_CU_ENTRIES(BIND)
        if (missing)
            st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                               "no CUDA driver (%s has no %s of the CUDA %d.%d interface)",
                               path, missing, missing_version / 1000,
                               missing_version % 1000 / 10);
        else
            st = start(&loaded, path);
    }
    if (st != RCOLL_OK) {
        dlclose(lib);
        lib = NULL;
        return st;
    }
    int version = 0;
    loaded.cuDriverGetVersion(&version);
    RCOLL_INFO(CUDA, "loaded %s (CUDA driver %d.%d)", path, version / 1000, version % 1000 / 10);
    return RCOLL_OK;
}

rcoll_status_t rcoll_cu_load(const char *path)
{
    pthread_mutex_lock(&load_lock);
    if (!load_done) {
        load_status = load_locked(path);
        snprintf(load_text, sizeof(load_text), "%s", load_status == RCOLL_OK ? "" : rcoll_err_get());
        load_done = 1;
        if (load_status == RCOLL_OK && !rcoll_cu) rcoll_cu = &loaded;
    }
    rcoll_status_t st = load_status;
    pthread_mutex_unlock(&load_lock);
    if (st != RCOLL_OK) return rcoll_err_set(st, "%s", load_text);
    return RCOLL_OK;
}

int rcoll_cu_present(const char *path)
{
    void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) return 0;
    dlclose(h);
    return 1;
}

rcoll_status_t rcoll_cu_set_api(const rcoll_cu_api_t *api)
{
    pthread_mutex_lock(&load_lock);
    rcoll_status_t st = RCOLL_OK;
    if (api) {
        st = start(api, "scripted driver");
        load_status = st;
        snprintf(load_text, sizeof(load_text), "%s", st == RCOLL_OK ? "" : rcoll_err_get());
        load_done = 1;
        rcoll_cu = st == RCOLL_OK ? api : NULL;
    } else {
        rcoll_cu = NULL;
        load_done = 0;
        load_status = RCOLL_ERR_UNSUPPORTED;
    }
    pthread_mutex_unlock(&load_lock);
    if (st != RCOLL_OK) return rcoll_err_set(st, "%s", load_text);
    return st;
}

rcoll_status_t rcoll_cu_fail(rcoll_status_t st, CUresult res, const char *what)
{
    char text[160];
    return rcoll_err_set(st, "%s failed: %s", what, rcoll_cu_strerror(res, text, sizeof(text)));
}

rcoll_status_t rcoll_gpu_ctx_push(CUcontext ctx, const char *what, CUcontext *saved)
{
    CUresult res = rcoll_cu->cuCtxGetCurrent(saved);
    if (res != CUDA_SUCCESS) return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, "cuCtxGetCurrent");
    if (*saved != ctx && (res = rcoll_cu->cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) {
        char call[96];
        snprintf(call, sizeof(call), "cuCtxSetCurrent(%s)", what);
        return rcoll_cu_fail(RCOLL_ERR_SYSTEM, res, call);
    }
    return RCOLL_OK;
}

void rcoll_gpu_ctx_pop(CUcontext ctx, CUcontext saved)
{
    if (saved != ctx) rcoll_cu->cuCtxSetCurrent(saved);
}
