/*
 * reduce.cu - the device reductions: for every datatype x op of reduce_elem.h one kernel
 *   rcoll_reduce_<DT>_<OP>(dst, dst2, a, b, n, head, d)
 * computing dst[i] = a[i] OP b[i] for i < n and, when dst2 is not NULL, the same value into
 * dst2[i] too (the fused reduce-and-copy of a ring step: the reduced chunk kept and forwarded).
 * Elements [head, head + k * V) are moved 16 bytes at a time (V = 16 / sizeof(T)); the
 * launcher (kernels.c) picks head so that every pointer is 16-byte aligned there, or head = n
 * (all scalar) when the pointers' alignments differ.  dst and dst2 may alias a or b exactly:
 * each element (each 16-byte vector) is read before it is written.
 * Grid-stride loops: any grid size is correct.
 * Then the one-kernel all-reduce over CUDA IPC, rcoll_oneshot_<DT>_<OP>(args), one-shot or
 * two-shot (cuda/oneshot.h states the protocol; a grid of args.blocks, agreed by the ranks).
 * Built by nvcc into the embedded fatbin (src/cuda/meson.build); no host code here.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda/oneshot.h"
#include "cuda/oneshot_proto.h"
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

/* Thread 0 of each block: push this block's flag into flag[b][rank] at byte offset off of
 * every rank's header, then wait on this rank's own header (local loads) for every peer's
 * flag[b][p] (cuda/oneshot_proto.h, the code the scripted driver and the host-thread test run
 * too).  0 when the block may go on; else the block's record in a.err says why. */
__device__ __forceinline__ int oneshot_meet(const rcoll_oneshot_args_t &a, unsigned off)
{
    return rcoll_os_meet(&a, blockIdx.x, off);
}

/* The whole block meets the peers on the flags at off: 0 to go on.  The order it gives:
 *   every thread's writes (this rank's slot, local)
 *   -> __syncthreads -> thread 0: __threadfence_system, st.release.sys of the flag into each
 *      peer's header
 *   ... the peer's thread 0: ld.acquire.sys of that flag in its own header -> __syncthreads
 *   -> every peer thread's loads of this rank's slot (over the link).
 * The fence and the release are cumulative: they order the writes thread 0 has seen through
 * the barrier, not only its own. */
__device__ __forceinline__ int block_meet(const rcoll_oneshot_args_t &a, unsigned off)
{
    __shared__ int stop;
    __syncthreads();
    if (threadIdx.x == 0) stop = oneshot_meet(a, off);
    __syncthreads();
    return stop;
}

/* dst[lo, hi) = src[lo, hi), 16 bytes at a time where both allow (lo is on 16 bytes);
 * src read past L1 when it is another rank's memory. */
template <typename T>
__device__ __forceinline__ void copy_part(T *dst, const T *src, uint64_t lo, uint64_t hi,
                                          bool peer)
{
    constexpr uint64_t V = 16 / sizeof(T);
    const uint64_t nv =
        ((uintptr_t)dst & 15) == 0 && ((uintptr_t)src & 15) == 0 ? (hi - lo) / V : 0;
    const uint4 *s4 = reinterpret_cast<const uint4 *>(src + lo);
    uint4 *d4 = reinterpret_cast<uint4 *>(dst + lo);
    for (uint64_t v = threadIdx.x; v < nv; v += blockDim.x) d4[v] = peer ? __ldcg(s4 + v) : s4[v];
    for (uint64_t i = lo + nv * V + threadIdx.x; i < hi; i += blockDim.x)
        dst[i] = peer ? reinterpret_cast<const volatile T *>(src)[i] : src[i];
}

/* One 16-byte vector of the result from every rank's vector x[0..n) (rank order): the
 * element functions, AVG dividing at the last rank; float16 and bfloat16 (DT 6, 7) fold
 * every rank's value in float32 and round once (reduce_elem.h, rcoll_e_fold16). */
template <int DT, int OP>
__device__ __forceinline__ uint4 reduce_vec(const vec16<typename elem_of<DT, OP>::type> *x,
                                            int n, int d)
{
    typedef typename elem_of<DT, OP>::type T;
    typedef elem_of<DT, OP == 4 ? 0 : OP> mid;
    constexpr bool half = DT == 6 || DT == 7;
    constexpr int bf = DT == 7;
    constexpr uint64_t V = 16 / sizeof(T);
    vec16<T> r = x[0];
    if constexpr (half) {
        float acc[V];
#pragma unroll
        for (uint64_t j = 0; j < V; j++) acc[j] = rcoll_e_widen16(bf, r.e[j]);
#pragma unroll
        for (int p = 1; p < n; p++)
#pragma unroll
            for (uint64_t j = 0; j < V; j++)
                acc[j] = rcoll_e_fold16(OP, acc[j], rcoll_e_widen16(bf, x[p].e[j]));
#pragma unroll
        for (uint64_t j = 0; j < V; j++) r.e[j] = rcoll_e_fold16_end(bf, OP, acc[j], d);
    } else {
#pragma unroll
        for (int p = 1; p < n; p++)
#pragma unroll
            for (uint64_t j = 0; j < V; j++)
                r.e[j] = p == n - 1 ? elem_of<DT, OP>::f(r.e[j], x[p].e[j], d)
                                    : mid::f(r.e[j], x[p].e[j], d);
    }
    return r.v;
}

/* The vectors [0, rv) of reduce_part for exactly NR ranks: each thread first issues all the
 * loads of U vectors from every rank's slot (NR x U x 16 bytes in flight, read past L1 since
 * they are other ranks' memory), then reduces them.  The unrolled loops keep everything in
 * registers (NR = 8, U = 2: 16 vectors, 64 registers).  U is a guess until measured. */
template <int DT, int OP, int NR>
__device__ __forceinline__ void reduce_vecs_nr(const rcoll_oneshot_args_t &a, uint64_t at,
                                               uint4 *d4, uint4 *e4, uint64_t first, uint64_t rv)
{
    typedef typename elem_of<DT, OP>::type T;
    constexpr int U = 2;
    const uint4 *s4[NR];
#pragma unroll
    for (int p = 0; p < NR; p++) s4[p] = reinterpret_cast<const uint4 *>(a.peer[p] + at) + first;
    const uint64_t step = blockDim.x;
    for (uint64_t v0 = threadIdx.x; v0 < rv; v0 += U * step) {
        vec16<T> x[U][NR];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (v0 + u * step < rv)
#pragma unroll
                for (int p = 0; p < NR; p++) x[u][p].v = __ldcg(s4[p] + v0 + u * step);
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (v0 + u * step >= rv) continue;
            const uint4 r = reduce_vec<DT, OP>(x[u], NR, a.avg_divisor);
            d4[v0 + u * step] = r;
            if (e4) e4[v0 + u * step] = r;
        }
    }
}

/* dst[lo, hi) (and dst2's, when not NULL) = every rank's slot (at byte offset at of its
 * workspace) reduced in rank order; AVG sums and divides at the last rank.  float16 and
 * bfloat16 (DT 6, 7) fold every rank's value in float32 and round once (reduce_elem.h,
 * rcoll_e_fold16).  2, 4 and 8 ranks take the unrolled form (every load issued before the
 * first reduction), other counts a loop over the ranks; the same elements either way. */
template <int DT, int OP>
__device__ __forceinline__ void reduce_part(const rcoll_oneshot_args_t &a, uint64_t at,
                                            typename elem_of<DT, OP>::type *dst,
                                            typename elem_of<DT, OP>::type *dst2, uint64_t lo,
                                            uint64_t hi)
{
    typedef typename elem_of<DT, OP>::type T;
    typedef elem_of<DT, OP == 4 ? 0 : OP> mid;
    constexpr bool half = DT == 6 || DT == 7;
    constexpr int bf = DT == 7;
    constexpr uint64_t V = 16 / sizeof(T);
    const int n = a.nranks, d = a.avg_divisor;
    const uint64_t rv = ((uintptr_t)dst & 15) == 0 && ((uintptr_t)dst2 & 15) == 0
                            ? (hi - lo) / V : 0; /* the slots are 16-byte aligned */
    uint4 *d4 = reinterpret_cast<uint4 *>(dst + lo);
    uint4 *e4 = dst2 ? reinterpret_cast<uint4 *>(dst2 + lo) : nullptr;
    /* The loads-first forms for 2, 4 and 8 ranks only where training spends its all-reduces
     * (float32, float16, bfloat16; sum and average): three more copies of every kernel would
     * grow the fatbin 2.5 times and nvcc's time with it. */
    constexpr bool unroll = (DT == 6 || DT == 7 || DT == 8) && (OP == 0 || OP == 4);
    bool done = false;
    if constexpr (unroll) {
        done = true;
        if (n == 2)
            reduce_vecs_nr<DT, OP, 2>(a, at, d4, e4, lo / V, rv);
        else if (n == 4)
            reduce_vecs_nr<DT, OP, 4>(a, at, d4, e4, lo / V, rv);
        else if (n == 8)
            reduce_vecs_nr<DT, OP, 8>(a, at, d4, e4, lo / V, rv);
        else
            done = false;
    }
    if (!done) {
        for (uint64_t v = threadIdx.x; v < rv; v += blockDim.x) {
            vec16<T> r, x;
            r.v = __ldcg(reinterpret_cast<const uint4 *>(a.peer[0] + at) + lo / V + v);
            if constexpr (half) {
                float acc[V];
#pragma unroll
                for (uint64_t j = 0; j < V; j++) acc[j] = rcoll_e_widen16(bf, r.e[j]);
                for (int p = 1; p < n; p++) {
                    x.v = __ldcg(reinterpret_cast<const uint4 *>(a.peer[p] + at) + lo / V + v);
#pragma unroll
                    for (uint64_t j = 0; j < V; j++)
                        acc[j] = rcoll_e_fold16(OP, acc[j], rcoll_e_widen16(bf, x.e[j]));
                }
#pragma unroll
                for (uint64_t j = 0; j < V; j++) r.e[j] = rcoll_e_fold16_end(bf, OP, acc[j], d);
            } else {
                for (int p = 1; p < n; p++) {
                    x.v = __ldcg(reinterpret_cast<const uint4 *>(a.peer[p] + at) + lo / V + v);
#pragma unroll
                    for (uint64_t j = 0; j < V; j++)
                        r.e[j] = p == n - 1 ? elem_of<DT, OP>::f(r.e[j], x.e[j], d)
                                            : mid::f(r.e[j], x.e[j], d);
                }
            }
            d4[v] = r.v;
            if (e4) e4[v] = r.v;
        }
    }
    for (uint64_t i = lo + rv * V + threadIdx.x; i < hi; i += blockDim.x) {
        T r = reinterpret_cast<const volatile T *>(a.peer[0] + at)[i];
        if constexpr (half) {
            float acc = rcoll_e_widen16(bf, r);
            for (int p = 1; p < n; p++)
                acc = rcoll_e_fold16(OP, acc, rcoll_e_widen16(
                                                  bf, reinterpret_cast<const volatile T *>(
                                                          a.peer[p] + at)[i]));
            r = rcoll_e_fold16_end(bf, OP, acc, d);
        } else {
            for (int p = 1; p < n; p++) {
                T x = reinterpret_cast<const volatile T *>(a.peer[p] + at)[i];
                r = p == n - 1 ? elem_of<DT, OP>::f(r, x, d) : mid::f(r, x, d);
            }
        }
        dst[i] = r;
        if (dst2) dst2[i] = r;
    }
}

template <int DT, int OP>
__device__ __forceinline__ void oneshot_body(const rcoll_oneshot_args_t &a)
{
    typedef typename elem_of<DT, OP>::type T;
    const T *src = reinterpret_cast<const T *>(a.src);
    T *dst = reinterpret_cast<T *>(a.dst);
    T *in = reinterpret_cast<T *>(a.peer[a.rank] + a.slot);
    uint64_t lo, hi;
    if (a.shots == 3) { /* meet only: a barrier in stream order (oneshot.h) */
        block_meet(a, 0);
        return;
    }
    if (a.shots == 0) { /* reduce only: every rank's input already there (oneshot.h) */
        rcoll_oneshot_part(a.count, sizeof(T), a.blocks, blockIdx.x, &lo, &hi);
        reduce_part<DT, OP>(a, a.slot, dst, (T *)nullptr, lo, hi);
        return;
    }
    if (a.shots != 2) {
        rcoll_oneshot_part(a.count, sizeof(T), a.blocks, blockIdx.x, &lo, &hi);
        copy_part(in, src, lo, hi, false);
        if (block_meet(a, 0)) return;
        reduce_part<DT, OP>(a, a.slot, dst, (T *)nullptr, lo, hi);
        return;
    }
    /* the two-shot: part b of every shard in; part b of this rank's shard reduced into its
     * output area and recvbuf; part b of every other shard from its owner's output area */
    T *out = reinterpret_cast<T *>(a.peer[a.rank] + a.slot + a.out);
    for (int r = 0; r < a.nranks; r++) {
        rcoll_twoshot_part(a.count, sizeof(T), a.nranks, r, a.blocks, blockIdx.x, &lo, &hi);
        copy_part(in, src, lo, hi, false);
    }
    if (block_meet(a, 0)) return;
    rcoll_twoshot_part(a.count, sizeof(T), a.nranks, a.rank, a.blocks, blockIdx.x, &lo, &hi);
    reduce_part<DT, OP>(a, a.slot, dst, out, lo, hi);
    if (block_meet(a, RCOLL_ONESHOT_FLAG2)) return;
    for (int r = 0; r < a.nranks; r++) {
        if (r == a.rank) continue;
        rcoll_twoshot_part(a.count, sizeof(T), a.nranks, r, a.blocks, blockIdx.x, &lo, &hi);
        copy_part(dst, reinterpret_cast<const T *>(a.peer[r] + a.slot + a.out), lo, hi, true);
    }
}

#define RCOLL_ONESHOT_KERNEL(DT, OP, T, fn)                                                    \
    extern "C" __global__ void __launch_bounds__(RCOLL_ONESHOT_THREADS)                        \
        rcoll_oneshot_##DT##_##OP(const rcoll_oneshot_args_t a)                                \
    {                                                                                          \
        oneshot_body<DT, OP>(a);                                                               \
    }

RCOLL_ELEM_LIST(RCOLL_ONESHOT_KERNEL)
