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
