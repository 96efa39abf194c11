/*
 * test_cuda.c - the CUDA foundation without a GPU: through a scripted driver table (as
 * test_verbs.c scripts libibverbs) the driver's refusals (missing library, driver too old,
 * cuInit failing, each with its sentence), pointer classification and its range cache (one
 * driver call per allocation), and the collective entry checks: device and managed buffers
 * refused with a sentence, host and pinned host ones accepted, kinds not mixed in one call.
 * The scripted "device" allocations are host memory underneath, so a check that failed to
 * refuse one would still not crash.  Runs under the ASan build too (nothing may leak).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda/cuda_drv.h"
#include "cuda/gpu.h"
#include "cuda/kernels.h"
#include "rcoll.h"
#include "util/status.h"

/* ---- scripted driver ---- */
static int version = 13000, init_result = CUDA_SUCCESS, attr_calls;

typedef struct {
    char *mem;
    size_t size;
    unsigned memtype, managed;
    unsigned long long id;
} fake_alloc_t;

#define NALLOCS 80
static fake_alloc_t allocs[NALLOCS];
static int nallocs;

static CUresult s_version(int *v)
{
    *v = version;
    return CUDA_SUCCESS;
}
static CUresult s_init(unsigned flags)
{
    (void)flags;
    return (CUresult)init_result;
}
static CUresult s_err_name(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}
static CUresult s_err_string(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "unknown error";
    return CUDA_SUCCESS;
}
/* As the driver: attributes of a known allocation, zeros (SUCCESS) for memory it never saw. */
static CUresult s_attrs(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    attr_calls++;
    const fake_alloc_t *a = NULL;
    for (int i = 0; i < nallocs; i++)
        if (p >= (CUdeviceptr)allocs[i].mem && p < (CUdeviceptr)allocs[i].mem + allocs[i].size)
            a = &allocs[i];
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned *)data[i] = a ? a->memtype : 0;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned *)data[i] = a ? a->managed : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data[i] = a ? (CUdeviceptr)a->mem : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data[i] = a ? a->size : 0;
            break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            *(unsigned long long *)data[i] = a ? a->id : 0;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

static const rcoll_cu_api_t scripted = {
    .cuInit = s_init, .cuDriverGetVersion = s_version, .cuGetErrorName = s_err_name,
    .cuGetErrorString = s_err_string, .cuPointerGetAttributes = s_attrs,
};

static char *fake(size_t size, unsigned memtype, unsigned managed)
{
    fake_alloc_t *a = &allocs[nallocs++];
    a->mem = calloc(1, size);
    a->size = size;
    a->memtype = memtype;
    a->managed = managed;
    a->id = (unsigned long long)nallocs;
    return a->mem;
}

/* ---- the driver's refusals ---- */
static void test_refusals(void)
{
    CHECK(rcoll_cu_load("/nonexistent/libcuda.so.1") == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no CUDA driver (/nonexistent/libcuda.so.1: "),
          "missing library named with dlerror's text: %s", rcoll_err_get());
    CHECK(rcoll_cu == NULL, "no table after a failed load");
    CHECK(rcoll_cu_load("/nonexistent/libcuda.so.1") == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no CUDA driver"), "the result is kept: %s",
          rcoll_err_get());

    version = 12040;
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "CUDA driver 12.4") && strstr(rcoll_err_get(), "too old"),
          "driver too old: %s", rcoll_err_get());
    CHECK(rcoll_cu == NULL, "no table with an old driver");
    version = 13000;
    init_result = CUDA_ERROR_NO_DEVICE;
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable "
                                      "device is detected)"),
          "cuInit failure: %s", rcoll_err_get());
    init_result = CUDA_SUCCESS;
    rcoll_cu_set_api(NULL);

    /* RCOLL_CUDA=1 without a driver fails communicator creation with the sentence. */
    rcoll_gpu_config_t cfg = {.mode = RCOLL_GPU_ON};
    snprintf(cfg.cuda_lib, sizeof(cfg.cuda_lib), "/nonexistent/libcuda.so.1");
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_err_get(), "no CUDA driver"), "RCOLL_CUDA=1: %s", rcoll_err_get());
    CHECK(!rcoll_gpu_active(), "not active");
    cfg.mode = RCOLL_GPU_AUTO; /* auto: the library is not in the process, nothing is tried */
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_OK && !rcoll_gpu_active(), "auto without libcuda");
    cfg.mode = RCOLL_GPU_OFF;
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_OK && !rcoll_gpu_active(), "RCOLL_CUDA=0");
    rcoll_cu_set_api(NULL);

    setenv("RCOLL_CUDA", "1", 1);
    setenv("RCOLL_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
    rcoll_unique_id_t id;
    rcoll_comm_t comm = NULL;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK, "unique id");
    CHECK(rcoll_comm_init_rank(1, &id, 0, &comm) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_last_init_error(), "no CUDA driver (/nonexistent/libcuda.so.1"),
          "communicator creation refused: %s", rcoll_last_init_error());
    unsetenv("RCOLL_CUDA");
    unsetenv("RCOLL_CUDA_LIB");
    rcoll_cu_set_api(NULL);
}

/* ---- classification and its cache ---- */
static void test_classify(void)
{
    CHECK(rcoll_gpu_classify(&version) == RCOLL_MEM_HOST && attr_calls == 0,
          "no driver in use: host, no call");
    CHECK(rcoll_cu_set_api(&scripted) == RCOLL_OK, "scripted driver: %s", rcoll_err_get());
    rcoll_gpu_config_t cfg = {.mode = RCOLL_GPU_AUTO};
    CHECK(rcoll_gpu_setup(&cfg) == RCOLL_OK && rcoll_gpu_active(), "active");

    char *dev = fake(1 << 16, CU_MEMORYTYPE_DEVICE, 0);
    char *man = fake(1 << 12, CU_MEMORYTYPE_DEVICE, 1);
    char *pin = fake(1 << 12, CU_MEMORYTYPE_HOST, 0);
    char host[64];
    attr_calls = 0;
    CHECK(rcoll_gpu_classify(dev) == RCOLL_MEM_DEVICE, "device");
    CHECK(rcoll_gpu_classify(dev + 1000) == RCOLL_MEM_DEVICE &&
              rcoll_gpu_classify(dev + (1 << 16) - 1) == RCOLL_MEM_DEVICE && attr_calls == 1,
          "inside the allocation: cached, one driver call (%d)", attr_calls);
    CHECK(rcoll_gpu_classify(man) == RCOLL_MEM_MANAGED &&
              rcoll_gpu_classify(man + 5) == RCOLL_MEM_MANAGED && attr_calls == 2,
          "managed, cached (%d)", attr_calls);
    CHECK(rcoll_gpu_classify(pin) == RCOLL_MEM_HOST_PINNED &&
              rcoll_gpu_classify(pin + 7) == RCOLL_MEM_HOST_PINNED && attr_calls == 3,
          "pinned host, cached (%d)", attr_calls);
    CHECK(rcoll_gpu_classify(host) == RCOLL_MEM_HOST &&
              rcoll_gpu_classify(host) == RCOLL_MEM_HOST && attr_calls == 5,
          "pageable host: asked each time, never cached (%d)", attr_calls);
    CHECK(rcoll_gpu_cache_count() == 3, "three entries");
    rcoll_gpu_cache_flush();
    CHECK(rcoll_gpu_cache_count() == 0 && rcoll_gpu_classify(dev + 3) == RCOLL_MEM_DEVICE &&
              attr_calls == 6, "flushed: asked again");
    /* more allocations than the cache holds: the oldest go, the count stays bounded */
    for (int i = 0; i < 70; i++) rcoll_gpu_classify(fake(64, CU_MEMORYTYPE_DEVICE, 0));
    CHECK(rcoll_gpu_cache_count() == 64, "bounded: %zu", rcoll_gpu_cache_count());
    CHECK(!strcmp(rcoll_memkind_name(RCOLL_MEM_DEVICE), "CUDA device memory") &&
              !strcmp(rcoll_memkind_name(RCOLL_MEM_MANAGED), "CUDA managed memory"), "names");
    rcoll_gpu_cache_flush();
}

/* ---- the entry checks of the collectives ---- */
static void test_api(void)
{
    rcoll_unique_id_t id;
    rcoll_comm_t comm = NULL;
    CHECK(rcoll_get_unique_id(&id) == RCOLL_OK && rcoll_comm_init_rank(1, &id, 0, &comm) ==
              RCOLL_OK, "one-rank communicator: %s", rcoll_last_init_error());
    if (!comm) return;
    float *dev = (float *)fake(4096, CU_MEMORYTYPE_DEVICE, 0);
    float *man = (float *)fake(4096, CU_MEMORYTYPE_DEVICE, 1);
    float *pin = (float *)fake(4096, CU_MEMORYTYPE_HOST, 0);
    float host[16] = {1, 2, 3}, out[16];
    char want[200];

    CHECK(rcoll_allreduce(host, out, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK &&
              out[2] == 3, "host buffers: accepted");
    CHECK(rcoll_allreduce(host, pin, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK &&
              pin[1] == 2, "pinned host: the host path");
    snprintf(want, sizeof(want), "rcoll_allreduce: recvbuf %p is CUDA device memory: the CUDA "
             "device path is not built yet", (void *)dev);
    CHECK(rcoll_allreduce(RCOLL_IN_PLACE, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_UNSUPPORTED && strstr(rcoll_comm_last_error(comm), want),
          "device refused: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_allreduce(dev, dev + 64, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_UNSUPPORTED && strstr(rcoll_comm_last_error(comm), "sendbuf"),
          "device send and receive: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_allreduce(man, man + 64, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_UNSUPPORTED && strstr(rcoll_comm_last_error(comm), "CUDA managed"),
          "managed refused: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_allreduce(host, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) ==
              RCOLL_ERR_INVALID_ARG && strstr(rcoll_comm_last_error(comm), "host memory but") &&
              strstr(rcoll_comm_last_error(comm), "all host memory or all CUDA memory"),
          "mixed kinds refused: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_bcast(dev, 16, RCOLL_FLOAT32, 0, comm) == RCOLL_ERR_UNSUPPORTED &&
              strstr(rcoll_comm_last_error(comm), "rcoll_bcast: buf"), "bcast: %s",
          rcoll_comm_last_error(comm));
    CHECK(rcoll_allgather(dev, dev + 64, 16, RCOLL_FLOAT32, comm) == RCOLL_ERR_UNSUPPORTED,
          "allgather: %s", rcoll_comm_last_error(comm));
    size_t counts[1] = {16}, displs[1] = {0};
    CHECK(rcoll_allgatherv(host, 16, man, counts, displs, RCOLL_FLOAT32, comm) ==
              RCOLL_ERR_INVALID_ARG, "allgatherv mixed: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_reduce(dev, dev, 16, RCOLL_FLOAT32, RCOLL_SUM, 0, comm) ==
              RCOLL_ERR_UNSUPPORTED, "reduce: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_group_start() == RCOLL_OK, "group");
    rcoll_status_t s1 = rcoll_send(dev, 4, RCOLL_FLOAT32, 0, comm);
    CHECK(s1 == RCOLL_ERR_UNSUPPORTED && strstr(rcoll_comm_last_error(comm), "rcoll_send: buf"),
          "send: %s", rcoll_comm_last_error(comm));
    rcoll_group_end();
    CHECK(rcoll_allreduce(host, out, 16, RCOLL_FLOAT32, RCOLL_SUM, comm) == RCOLL_OK,
          "still usable after the refusals: %s", rcoll_comm_last_error(comm));
    CHECK(rcoll_comm_destroy(comm) == RCOLL_OK, "destroy");
}

/* ---- kernels: names and the embedded fatbin ---- */
static void test_kernels(void)
{
    CHECK(rcoll_cuda_fatbin_size > 1000, "fatbin embedded: %zu bytes", rcoll_cuda_fatbin_size);
    /* a fatbin starts with its magic 0xba55ed50 (little endian) */
    CHECK(rcoll_cuda_fatbin[0] == 0x50 && rcoll_cuda_fatbin[1] == 0xed &&
              rcoll_cuda_fatbin[2] == 0x55 && rcoll_cuda_fatbin[3] == 0xba, "fatbin magic");
    CHECK(((uintptr_t)rcoll_cuda_fatbin & 63) == 0, "aligned");
    int defined = 0;
    for (int dt = 0; dt < RCOLL_NUM_DATATYPES; dt++)
        for (int op = 0; op < RCOLL_NUM_OPS; op++) {
            const char *name = rcoll_cuda_kernel_name((rcoll_datatype_t)dt, (rcoll_op_t)op);
            int is_float = dt >= RCOLL_FLOAT16 && dt <= RCOLL_FLOAT64;
            int want = !(is_float && op >= RCOLL_BAND) && !(dt == RCOLL_BOOL && op == RCOLL_AVG);
            CHECK(!name == !want, "kernel of %d x %d %s", dt, op, name ? name : "(none)");
            if (!name) continue;
            defined++;
            char buf[32];
            snprintf(buf, sizeof(buf), "rcoll_reduce_%d_%d", dt, op);
            CHECK(!strcmp(buf, name), "%s", name);
            CHECK(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, name, strlen(name)) != NULL,
                  "%s is in the fatbin", name);
        }
    CHECK(defined == 91, "91 pairs: %d", defined);
    CHECK(rcoll_cuda_reduce(0, 0, 0, 0, 4, RCOLL_FLOAT32, RCOLL_BAND, 1, NULL) ==
              RCOLL_ERR_INVALID_ARG, "undefined pair refused");
}

int main(void)
{
    check_set_note(rcoll_err_get);
    test_refusals();
    test_classify();
    test_api();
    test_kernels();
    rcoll_cu_set_api(NULL);
    rcoll_gpu_test_reset();
    for (int i = 0; i < nallocs; i++) free(allocs[i].mem);
    return check_summary();
}
