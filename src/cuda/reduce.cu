/*
 * reduce.cu - the device reductions: for every datatype x op of reduce_elem.h one kernel
 *   rcoll_reduce_<DT>_<OP>(dst, dst2, a, b, n, head, d)
 * computing dst[i] = a[i] OP b[i] for i < n and, when dst2 is not NULL, the same value into
 * dst2[i] too (the fused reduce-and-copy of a ring step: the reduced chunk kept and forwarded).
 * Elements [head, head + k * V) are moved 16 bytes at a time (V = 16 / sizeof(T)); the
 * launcher (kernels.c) picks head so that every pointer is 16-byte aligned there, or head = n
 * (all scalar) when the pointers' alignments differ.  dst and dst2 may alias a or b exactly:
 * each element (each 16-byte vector) is read before it is written.
 * Grid-stride loops: any grid size is correct.  Built by nvcc into the embedded fatbin
 * (src/cuda/meson.build); no host code here.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda/reduce_elem.h"

template <typename T>
union vec16 {
    uint4 v;
    T e[16 / sizeof(T)];
};

template <typename T, T (*OP)(T, T, int)>
__device__ __forceinline__ void reduce_body(T *dst, T *dst2, const T *a, const T *b, size_t n,
                                            size_t head, int d)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    constexpr size_t V = 16 / sizeof(T);
    if (head > n) head = n;
    for (size_t i = tid; i < head; i += stride) {
        T r = OP(a[i], b[i], d);
        dst[i] = r;
        if (dst2) dst2[i] = r;
    }
    const size_t nvec = (n - head) / V;
    const uint4 *a4 = reinterpret_cast<const uint4 *>(a + head);
    const uint4 *b4 = reinterpret_cast<const uint4 *>(b + head);
    uint4 *d4 = reinterpret_cast<uint4 *>(dst + head);
    uint4 *e4 = dst2 ? reinterpret_cast<uint4 *>(dst2 + head) : nullptr;
    for (size_t v = tid; v < nvec; v += stride) {
        vec16<T> x, y, r;
        x.v = a4[v];
        y.v = b4[v];
#pragma unroll
        for (size_t j = 0; j < V; j++) r.e[j] = OP(x.e[j], y.e[j], d);
        d4[v] = r.v;
        if (e4) e4[v] = r.v;
    }
    for (size_t i = head + nvec * V + tid; i < n; i += stride) {
        T r = OP(a[i], b[i], d);
        dst[i] = r;
        if (dst2) dst2[i] = r;
    }
}

#define RCOLL_KERNEL(DT, OP, T, fn)                                                            \
    extern "C" __global__ void __launch_bounds__(256)                                          \
        rcoll_reduce_##DT##_##OP(T *dst, T *dst2, const T *a, const T *b, size_t n,            \
                                 size_t head, int d)                                           \
    {                                                                                          \
        reduce_body<T, rcoll_elem_##fn>(dst, dst2, a, b, n, head, d);                          \
    }

RCOLL_ELEM_LIST(RCOLL_KERNEL)

/* ---- the one-kernel all-reduce over CUDA IPC (cuda/oneshot.h says the protocol) ---- */
#include "cuda/oneshot.h"

template <int DT, int OP>
struct elem_of;
#define RCOLL_ELEM_OF(DT, OP, T, fn)                                                           \
    template <>                                                                                \
    struct elem_of<DT, OP> {                                                                   \
        typedef T type;                                                                        \
        static __device__ __forceinline__ T f(T x, T y, int d) { return rcoll_elem_##fn(x, y, d); } \
    };
RCOLL_ELEM_LIST(RCOLL_ELEM_OF)
#undef RCOLL_ELEM_OF

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Thread 0 of each block: publish this block's flag, then wait for every peer's.  0 when
 * the block may go on; else the block's record in a.err says why. */
__device__ __forceinline__ int oneshot_meet(const rcoll_oneshot_args_t &a)
{
    uint64_t *flags = reinterpret_cast<uint64_t *>(a.peer[a.rank]);
    __threadfence_system(); /* the block's copy (ordered before by __syncthreads) first */
    st_release_sys(&flags[blockIdx.x], a.flag);
    const uint32_t seq = (uint32_t)(a.flag >> 32);
    const uint64_t start = global_ns();
    for (int p = 0; p < a.nranks; p++) {
        if (p == a.rank) continue;
        const uint64_t *pf = reinterpret_cast<const uint64_t *>(a.peer[p]) + blockIdx.x;
        for (;;) {
            uint64_t f = ld_acquire_sys(pf);
            int32_t ahead = (int32_t)((uint32_t)(f >> 32) - seq);
            uint32_t code = RCOLL_ONESHOT_OK;
            if (ahead > 0) break; /* gone on: it met this rank's flag of this call */
            if (ahead == 0 && f == a.flag) break;
            if (ahead == 0)
                code = RCOLL_ONESHOT_MISMATCH;
            else if (global_ns() - start > a.timeout_ns)
                code = RCOLL_ONESHOT_TIMEOUT;
            if (code != RCOLL_ONESHOT_OK) {
                volatile rcoll_oneshot_err_t *e =
                    reinterpret_cast<rcoll_oneshot_err_t *>(a.err) + blockIdx.x;
                e->peer = p;
                e->flag = f;
                e->code = code;
                __threadfence_system();
                return 1;
            }
        }
    }
    return 0;
}

template <int DT, int OP>
__device__ __forceinline__ void oneshot_body(const rcoll_oneshot_args_t &a)
{
    typedef typename elem_of<DT, OP>::type T;
    typedef elem_of<DT, OP == 4 ? 0 : OP> mid; /* AVG: sums, divided at the last rank */
    constexpr uint64_t V = 16 / sizeof(T);
    uint64_t lo, hi;
    rcoll_oneshot_part(a.count, sizeof(T), blockIdx.x, &lo, &hi);
    const T *src = reinterpret_cast<const T *>(a.src);
    T *dst = reinterpret_cast<T *>(a.dst);
    T *mine = reinterpret_cast<T *>(a.peer[a.rank] + a.slot);
    const uint64_t nv = (a.src & 15) == 0 ? (hi - lo) / V : 0; /* slots are 16-byte aligned */
    for (uint64_t v = threadIdx.x; v < nv; v += blockDim.x)
        reinterpret_cast<uint4 *>(mine + lo)[v] = reinterpret_cast<const uint4 *>(src + lo)[v];
    for (uint64_t i = lo + nv * V + threadIdx.x; i < hi; i += blockDim.x) mine[i] = src[i];
    __shared__ int stop;
    __syncthreads();
    if (threadIdx.x == 0) stop = oneshot_meet(a);
    __syncthreads();
    if (stop) return;
    const int n = a.nranks, d = a.avg_divisor;
    const uint64_t rv = (a.dst & 15) == 0 ? (hi - lo) / V : 0;
    for (uint64_t v = threadIdx.x; v < rv; v += blockDim.x) {
        vec16<T> r, x;
        r.v = __ldcg(reinterpret_cast<const uint4 *>(a.peer[0] + a.slot) + lo / V + v);
        for (int p = 1; p < n; p++) {
            x.v = __ldcg(reinterpret_cast<const uint4 *>(a.peer[p] + a.slot) + lo / V + v);
#pragma unroll
            for (uint64_t j = 0; j < V; j++)
                r.e[j] = p == n - 1 ? elem_of<DT, OP>::f(r.e[j], x.e[j], d)
                                    : mid::f(r.e[j], x.e[j], d);
        }
        reinterpret_cast<uint4 *>(dst + lo)[v] = r.v;
    }
    for (uint64_t i = lo + rv * V + threadIdx.x; i < hi; i += blockDim.x) {
        T r = reinterpret_cast<const volatile T *>(a.peer[0] + a.slot)[i];
        for (int p = 1; p < n; p++) {
            T x = reinterpret_cast<const volatile T *>(a.peer[p] + a.slot)[i];
            r = p == n - 1 ? elem_of<DT, OP>::f(r, x, d) : mid::f(r, x, d);
        }
        dst[i] = r;
    }
}

#define RCOLL_ONESHOT_KERNEL(DT, OP, T, fn)                                                    \
    extern "C" __global__ void __launch_bounds__(RCOLL_ONESHOT_THREADS)                        \
        rcoll_oneshot_##DT##_##OP(const rcoll_oneshot_args_t a)                                \
    {                                                                                          \
        oneshot_body<DT, OP>(a);                                                               \
    }

RCOLL_ELEM_LIST(RCOLL_ONESHOT_KERNEL)
