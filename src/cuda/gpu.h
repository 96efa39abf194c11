/*
 * gpu.h - what the rest of rcoll sees of CUDA: whether the driver is in use, and the kind of
 * memory a pointer is.  No CUDA header here: the interface exists in every build; built
 * without CUDA (-Dcuda=disabled, or no toolkit at configure time) every pointer is host
 * memory and RCOLL_CUDA=1 is refused with a sentence (gpu_stub.c).
 *
 * When is the driver used?  RCOLL_CUDA=auto (the default) loads it at communicator creation
 * only when the process has already mapped libcuda (an application that holds CUDA memory
 * has: its runtime loaded the driver); a process that never touched CUDA pays nothing, not
 * even a dlopen.  RCOLL_CUDA=1 loads it at communicator creation or fails the creation with
 * the reason; RCOLL_CUDA=0 never loads it.  Once loaded it stays for the process.
 *
 * The collective entry points call rcoll_gpu_active() (one relaxed load and a branch) and
 * classify their buffers only when it is 1.  See docs/gpu.md.
 */
#ifndef RCOLL_CUDA_GPU_H
#define RCOLL_CUDA_GPU_H

#include <stddef.h>
#include "cuda/oneshot.h"
#include "rcoll.h"
#include "util/config.h"

typedef enum {
    RCOLL_MEM_HOST = 0,        /* pageable host memory, or anything the driver does not know */
    RCOLL_MEM_HOST_PINNED = 1, /* page-locked host memory (cuMemAllocHost, cuMemHostRegister) */
    RCOLL_MEM_DEVICE = 2,      /* device memory (cuMemAlloc, cudaMalloc, VMM) */
    RCOLL_MEM_MANAGED = 3      /* managed memory (cuMemAllocManaged, cudaMallocManaged) */
} rcoll_memkind_t;

/* RCOLL_CUDA values. */
typedef enum { RCOLL_GPU_AUTO = 0, RCOLL_GPU_OFF = 1, RCOLL_GPU_ON = 2 } rcoll_gpu_mode_t;

typedef struct {
    int mode;                        /* rcoll_gpu_mode_t */
    char cuda_lib[RCOLL_CFG_STR_MAX]; /* RCOLL_CUDA_LIB: the driver library dlopen()ed */
    int ipc;                         /* RCOLL_CUDA_IPC: the CUDA IPC all-reduce (core/api_ipc.c) */
    size_t ipc_bytes;                /* RCOLL_CUDA_IPC_BYTES: each rank's IPC workspace */
    size_t ipc_oneshot;              /* RCOLL_CUDA_IPC_ONESHOT: one-kernel all-reduce up to */
    size_t ipc_twoshot;              /* RCOLL_CUDA_IPC_TWOSHOT: its two-shot form up to */
    int ipc_oneshot_shared;          /* RCOLL_CUDA_IPC_ONESHOT_SHARED: also on shared GPUs */
    size_t stage_chunk;              /* RCOLL_STAGE_CHUNK: pipelined staging's chunk, 0 off */
    size_t stage_pinned_max;         /* RCOLL_STAGE_PINNED_MAX: a communicator's pinned bytes */
} rcoll_gpu_config_t;

extern const rcoll_config_table_t rcoll_gpu_config_table;

/* 1 once the driver is loaded and started (rcoll_gpu_setup); never goes back to 0 except
 * through rcoll_gpu_test_reset. */
extern int rcoll_gpu_on;

static inline int rcoll_gpu_active(void)
{
    return __atomic_load_n(&rcoll_gpu_on, __ATOMIC_RELAXED);
}

/* At communicator creation: load the driver as cfg->mode says (above).  RCOLL_OK when nothing
 * was to be done or the driver started; with RCOLL_CUDA=1 the driver's failure, with its
 * sentence ("no CUDA driver (libcuda.so.1: ...)", "... too old ...", "cuInit failed: ...");
 * with auto a failure is logged at INFO and RCOLL_OK returned (the process then cannot hold
 * CUDA memory rcoll could classify: no device, or a driver rcoll cannot use). */
rcoll_status_t rcoll_gpu_setup(const rcoll_gpu_config_t *cfg);

/* Load the driver now, whatever RCOLL_CUDA=auto would decide (the caller asked for CUDA: the
 * public rcoll_cuda_* calls).  Errors: RCOLL_ERR_UNSUPPORTED, "RCOLL_CUDA=0 ..." or the
 * driver's sentence (as rcoll_gpu_setup with RCOLL_CUDA=1). */
rcoll_status_t rcoll_gpu_load(const rcoll_gpu_config_t *cfg);

/* The kind of memory at p (its first byte).  RCOLL_MEM_HOST while the driver is not in use.
 * CUDA allocations are cached by their range (base and size from the driver), so a second
 * buffer inside the same allocation costs no driver call; pageable host memory is not cached
 * (a driver call per classification while the driver is in use).  Cache rules: docs/gpu.md. */
rcoll_memkind_t rcoll_gpu_classify(const void *p);
/* "host memory", "pinned host memory", "CUDA device memory", "CUDA managed memory". */
const char *rcoll_memkind_name(rcoll_memkind_t kind);
static inline int rcoll_memkind_on_device(rcoll_memkind_t kind)
{
    return kind == RCOLL_MEM_DEVICE || kind == RCOLL_MEM_MANAGED;
}

/* The range cache: entries held (tests), and dropping every entry (tests; and for the later
 * parts of the device path where a stale entry would matter, docs/gpu.md). */
size_t rcoll_gpu_cache_count(void);
void rcoll_gpu_cache_flush(void);
/* Tests: forget the loaded state (rcoll_gpu_active() == 0, cache empty). */
void rcoll_gpu_test_reset(void);

/* ---- Staging: device buffers through pinned host memory (docs/gpu.md) ----
 * A communicator owns at most one staging area: pinned host memory (cuMemAllocHost), made at
 * its first call with device buffers, grown (freed and allocated again, never copied) when a
 * call needs more, freed with the communicator.  The copies are synchronous (cuMemcpyDtoH /
 * cuMemcpyHtoD) with the device pointer's own context current (CU_POINTER_ATTRIBUTE_CONTEXT;
 * the caller's context is current again afterwards).  Each failure is one sentence naming the
 * driver call and its CUresult.  Not thread safe: the communicator's caller serializes. */
typedef struct rcoll_gpu_stage rcoll_gpu_stage_t;

/* A piece of a staged buffer: bytes at offset `off` of the device buffer, and at the same
 * offset of its staging copy. */
typedef struct {
    size_t off, len;
} rcoll_gpu_span_t;

/* A communicator's pinned host memory: the bytes its staging areas hold together, bounded by
 * cap (RCOLL_STAGE_PINNED_MAX; 0: no bound), and the areas that stream-ordered calls outgrew,
 * kept ("retired") until a call outside stream order frees them: cuMemFreeHost synchronizes
 * the device, which a call that only enqueues must never do.  Every area of the pool must be
 * freed before the pool. */
typedef struct rcoll_gpu_pinned rcoll_gpu_pinned_t;
rcoll_gpu_pinned_t *rcoll_gpu_pinned_new(size_t cap); /* NULL: out of memory */
void rcoll_gpu_pinned_free(rcoll_gpu_pinned_t **pool); /* frees the retired areas too */
size_t rcoll_gpu_pinned_held(const rcoll_gpu_pinned_t *pool); /* areas + retired, bytes */
size_t rcoll_gpu_pinned_retired(const rcoll_gpu_pinned_t *pool); /* of them, retired */

/* rcoll_gpu_stage_reserve's flags: the call is stream-ordered (no cuMemFreeHost in it). */
#define RCOLL_GPU_STAGE_IN_STREAM 1
/* *host_p: at least `bytes` of pinned host memory from *stage_p (created at the first call),
 * counted in pool (may be NULL: no bound).  An area too small is replaced by one at least
 * twice its size; outside stream order the old one is freed first (and the pool's retired
 * areas with it), in stream order (RCOLL_GPU_STAGE_IN_STREAM) it is retired instead.
 * dev: a device pointer of the call, whose context is current while memory is allocated.
 * Errors: RCOLL_ERR_NO_MEMORY "cuMemHostAlloc(N bytes, portable) ... failed: CUDA_ERROR_...
 * (...)" (outside stream order the previous area is then gone: *stage_p holds none, and the
 * next call allocates again), or "... would hold N bytes of pinned host memory, over
 * RCOLL_STAGE_PINNED_MAX=M ..." (nothing allocated, the old area kept). */
rcoll_status_t rcoll_gpu_stage_reserve(rcoll_gpu_stage_t **stage_p, rcoll_gpu_pinned_t *pool,
                                       const void *dev, size_t bytes, int flags,
                                       void **host_p);
/* Copy spans of dev to the same offsets of host (to_device 0: cuMemcpyDtoH) or back
 * (to_device 1: cuMemcpyHtoD).  Empty spans are skipped.  Errors: RCOLL_ERR_SYSTEM, "cuMemcpy
 * DtoH of N bytes from 0x... failed: ..." (or the context lookup / switch that failed). */
rcoll_status_t rcoll_gpu_stage_copy(int to_device, void *dev, void *host,
                                    const rcoll_gpu_span_t *spans, size_t nspans);
/* Bytes of pinned host memory the area holds now (0 for NULL). */
size_t rcoll_gpu_stage_bytes(const rcoll_gpu_stage_t *stage);
/* Free the area (cuMemFreeHost, in the context it was allocated in); *stage_p becomes NULL.
 * A failure is logged at WARN (nothing else can be done at that point). */
void rcoll_gpu_stage_free(rcoll_gpu_stage_t **stage_p);

/* ---- Stream order (cuda/stage.c; core/api_stream.c decides what is enqueued) ----
 * stream: a CUstream / cudaStream_t (NULL: the legacy default stream).  Each call only
 * enqueues; each failure is one sentence naming the driver call and its CUresult. */
typedef void (*rcoll_gpu_host_fn_t)(void *arg);

/* RCOLL_OK when work may be enqueued on stream: it is not being captured into a CUDA graph
 * (RCOLL_ERR_UNSUPPORTED with the reason; docs/gpu.md says why), and the driver answered
 * cuStreamIsCapturing (RCOLL_ERR_SYSTEM otherwise: not a stream of this process, ...). */
rcoll_status_t rcoll_gpu_stream_check(void *stream);
/* Enqueue the copies of spans between dev and host (pinned) on stream, as
 * rcoll_gpu_stage_copy does synchronously: to_device 0 cuMemcpyDtoHAsync, 1
 * cuMemcpyHtoDAsync, dev's context current while they are enqueued.  *enqueued_p: 1 when at
 * least one copy was enqueued (also on failure).  Errors: RCOLL_ERR_SYSTEM. */
rcoll_status_t rcoll_gpu_stream_copy(int to_device, void *dev, void *host,
                                     const rcoll_gpu_span_t *spans, size_t nspans,
                                     void *stream, int *enqueued_p);
/* Enqueue fn(arg) on stream (cuLaunchHostFunc): it runs on the driver's callback thread once
 * the work before it on stream is done, and the work after it waits for its return; fn must
 * not call CUDA.  Errors: RCOLL_ERR_SYSTEM. */
rcoll_status_t rcoll_gpu_stream_host_fn(void *stream, rcoll_gpu_host_fn_t fn, void *arg);
/* Wait for everything enqueued on stream so far (cuStreamSynchronize); errors:
 * RCOLL_ERR_SYSTEM (a sticky error of the stream or context). */
rcoll_status_t rcoll_gpu_stream_sync(void *stream);

/* ---- Devices and memory for the public rcoll_cuda_* calls (cuda/mem.c) ----
 * The driver must be loaded (rcoll_gpu_load).  Each failure is one sentence. */
/* Devices the driver sees (cuDeviceGetCount). */
rcoll_status_t rcoll_gpu_device_count(int *count);
/* Make device ordinal's primary context current in this thread (retained once per ordinal
 * and kept).  RCOLL_ERR_INVALID_ARG for an ordinal the driver does not have. */
rcoll_status_t rcoll_gpu_set_device(int ordinal);
/* Name ("NVIDIA H200") and PCI bus id ("0000:19:00.0") of device ordinal; either buffer may
 * be NULL; both are NUL-terminated within their length. */
rcoll_status_t rcoll_gpu_device_info(int ordinal, char *name, size_t name_len, char *bus_id,
                                     size_t bus_id_len);
/* bytes (> 0) of device memory (managed: cuMemAllocManaged, attached globally) in the
 * current context.  RCOLL_ERR_INVALID_USAGE when no context is current, RCOLL_ERR_NO_MEMORY
 * when the device is full. */
rcoll_status_t rcoll_gpu_mem_alloc(void **ptr, size_t bytes, int managed);
/* Free what rcoll_gpu_mem_alloc (or cudaMalloc) returned, in its own context; anything else
 * is RCOLL_ERR_INVALID_ARG and nothing is freed.  Drops the classification cache. */
rcoll_status_t rcoll_gpu_mem_free(void *ptr);
/* Copy bytes between any two kinds of memory, synchronously (cuMemcpy in the context of the
 * CUDA side; host to host is memmove). */
rcoll_status_t rcoll_gpu_memcpy(void *dst, const void *src, size_t bytes);

/* The PCI bus id ("0000:19:00.0") of the device whose context is current in the calling
 * thread (the GPU a rank works on, as NCCL takes the current device at communicator
 * creation).  RCOLL_ERR_UNSUPPORTED when the driver is not in use or no context is current
 * (nothing is loaded for this: a process that never touched CUDA has no GPU). */
rcoll_status_t rcoll_gpu_current_bus(char *bus, size_t len);
/* The PCI bus id of the GPU that holds device memory p (its allocation's context's device).
 * RCOLL_ERR_INVALID_ARG when p is not device memory the driver knows. */
rcoll_status_t rcoll_gpu_ptr_bus(const void *p, char *bus, size_t len);
/* The allocation that holds device memory p: its start and size, from the driver (one
 * cuPointerGetAttributes with the buffer id; a classification-cache entry of a freed
 * allocation over that range is dropped).  RCOLL_ERR_INVALID_ARG when the driver does not
 * know p. */
rcoll_status_t rcoll_gpu_ptr_range(const void *p, uintptr_t *base, size_t *size);
/* The allocation that holds CUDA memory p as the driver sees it now: start, size and buffer
 * id (CU_POINTER_ATTRIBUTE_BUFFER_ID, never reused for another allocation in the process).
 * Always one cuPointerGetAttributes call, never the classification cache: this is how a
 * freed and reallocated range is told apart (registrations for GPUDirect RDMA, verbs_mr.c).
 * RCOLL_ERR_UNSUPPORTED when the driver is not in use, RCOLL_ERR_INVALID_ARG when the driver
 * does not know p. */
rcoll_status_t rcoll_gpu_ptr_buffer_id(const void *p, uintptr_t *base, size_t *size,
                                       unsigned long long *buffer_id);

/* ---- GPUDirect RDMA (cuda/mem.c; the verbs transport registers what it gets) ----
 * A dma-buf file descriptor for [p, p + len) of device memory, which a NIC driver registers
 * (ibv_reg_dmabuf_mr): cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
 * offset 0 of the dma-buf is p.  p and len are multiples of the host page size and lie in
 * one allocation.  The caller closes *fd (the registration keeps what it needs).  Loads the
 * driver when it is not in use yet (the caller holds CUDA memory, so the process has it).
 * Errors, each one sentence: RCOLL_ERR_UNSUPPORTED (no driver; the GPU cannot export
 * dma-bufs, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 0; the driver refuses), RCOLL_ERR_INVALID_ARG
 * (p not device memory, or not page-aligned), RCOLL_ERR_SYSTEM (the call failed). */
rcoll_status_t rcoll_gpu_dmabuf_fd(const void *p, size_t len, int *fd);

/* ---- Pipelined staging (cuda/pipe.c; core/api_stage.c cuts the chunks) ----
 * Two streams (copies in, copies out) and events after the copies in, in the context of the
 * buffers they were made for.  Each failure is one sentence. */
typedef struct rcoll_gpu_pipe rcoll_gpu_pipe_t;
/* *pipe ready for dev's context (made, or made again for another context) with at least nev
 * events. */
rcoll_status_t rcoll_gpu_pipe_get(rcoll_gpu_pipe_t **pipe, const void *dev, int nev);
/* Enqueue a copy of len bytes between dev and pinned host (to_device 0: in, on the in stream;
 * 1: out, on the out stream); mark >= 0 records event mark after it. */
rcoll_status_t rcoll_gpu_pipe_copy(rcoll_gpu_pipe_t *pipe, int to_device, void *dev, void *host,
                                   size_t len, int mark);
/* Wait for event mark (the copies before it on its stream are done). */
rcoll_status_t rcoll_gpu_pipe_wait(rcoll_gpu_pipe_t *pipe, int mark);
/* Wait for both streams. */
rcoll_status_t rcoll_gpu_pipe_finish(rcoll_gpu_pipe_t *pipe);
void rcoll_gpu_pipe_free(rcoll_gpu_pipe_t **pipe);

/* ---- CUDA IPC between the ranks of one host (cuda/ipc.c; core/api_ipc.c runs the protocol)
 * Each rank's device workspace, mapped by the others; a stream of its own; everything in the
 * workspace's context.  Each failure is one sentence. */
#define RCOLL_GPU_IPC_HANDLE_BYTES 96 /* the driver's 64-byte handle, then the GPU's bus id */
typedef struct rcoll_gpu_ipc rcoll_gpu_ipc_t;
/* This rank's workspace of bytes, allocated in dev's context (dev: a CUDA buffer of the call
 * that needs it), exported: *handle (RCOLL_GPU_IPC_HANDLE_BYTES: the driver's handle and the
 * PCI bus id of the workspace's GPU) is what the others open. */
rcoll_status_t rcoll_gpu_ipc_create(const void *dev, size_t bytes, int rank, int nranks,
                                    rcoll_gpu_ipc_t **ipc, void *handle);
/* Map every other rank's workspace: handles holds nranks handles, rank order.  A peer on
 * another GPU must be visible here and reachable directly (cuDeviceCanAccessPeer: NVLink or
 * PCIe peer-to-peer); else RCOLL_ERR_UNSUPPORTED naming both GPUs. */
rcoll_status_t rcoll_gpu_ipc_open(rcoll_gpu_ipc_t *ipc, const void *handles);
/* The PCI bus id of the GPU of a workspace, from its handle record. */
void rcoll_gpu_ipc_bus(const void *handle, char *bus, size_t len);
/* Rank r's workspace as mapped in this process (this rank's own for r = rank). */
char *rcoll_gpu_ipc_base(const rcoll_gpu_ipc_t *ipc, int r);
/* A barrier among the ranks in the IPC stream's order (the one-kernel all-reduce's meet-only
 * form, cuda/oneshot.h: block 0's flags, with the deadline timeout_ns, the abort word, a
 * different flag reported), enqueued, not waited for.  flag: (the step's number mod 2^32) << 32
 * | its signature digest, larger on every rank than any flag before it.  The meets of one call
 * share one report: rcoll_gpu_ipc_meets_begin clears it (before the call's first meet; the
 * IPC stream idle), rcoll_gpu_ipc_meets_end waits for the stream and folds it into *report
 * (code RCOLL_ONESHOT_OK: every meet met; else the first failure).  Errors: the driver's. */
void rcoll_gpu_ipc_meets_begin(rcoll_gpu_ipc_t *ipc);
rcoll_status_t rcoll_gpu_ipc_meet(rcoll_gpu_ipc_t *ipc, uint64_t flag, uint64_t timeout_ns);
rcoll_status_t rcoll_gpu_ipc_meets_end(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_err_t *report);
/* dst = the op of every rank's count elements at byte offset at of its workspace (rank order;
 * AVG divides by avg_divisor at the last), as one kernel on the IPC stream reading all of
 * them (the one-kernel all-reduce's reduce-only form, cuda/oneshot.h), asynchronously; the
 * caller orders it after every rank's copies.  RCOLL_ERR_UNSUPPORTED (nothing launched) where
 * it cannot (more than RCOLL_ONESHOT_MAX_RANKS ranks, at not 16-byte aligned): the caller
 * reduces pairwise instead. */
rcoll_status_t rcoll_gpu_ipc_reduce_all(rcoll_gpu_ipc_t *ipc, void *dst, size_t at,
                                        size_t count, rcoll_datatype_t dt, rcoll_op_t op,
                                        int avg_divisor);
size_t rcoll_gpu_ipc_bytes(const rcoll_gpu_ipc_t *ipc);
/* The one-kernel all-reduce's grid this rank proposes: min(RCOLL_ONESHOT_MAX_BLOCKS, the SM
 * count of the workspace's GPU), at least 1; and the grid every rank agreed on (the smallest
 * proposal), which the kernel parameters get from then on (before it is set: the proposal). */
int rcoll_gpu_ipc_blocks_proposed(const rcoll_gpu_ipc_t *ipc);
void rcoll_gpu_ipc_blocks_set(rcoll_gpu_ipc_t *ipc, int blocks);
/* Enqueue on the IPC stream: a device-to-device copy (either side may be a peer's mapped
 * workspace), dst = a op b over count elements (AVG divides by avg_divisor > 1). */
rcoll_status_t rcoll_gpu_ipc_copy(rcoll_gpu_ipc_t *ipc, void *dst, const void *src,
                                  size_t bytes);
rcoll_status_t rcoll_gpu_ipc_reduce(rcoll_gpu_ipc_t *ipc, void *dst, const void *a,
                                    const void *b, size_t count, rcoll_datatype_t dt,
                                    rcoll_op_t op, int avg_divisor);
/* The one-kernel all-reduce (cuda/oneshot.h) of a: its peers, ranks, grid and report address
 * are filled in here, the rest is the caller's.  Launched on the IPC stream and waited for; what
 * the kernel reported (a peer's flag with another signature, or none by the deadline) in
 * *report (code RCOLL_ONESHOT_OK when all went well).  Errors: the driver's, one sentence. */
rcoll_status_t rcoll_gpu_ipc_oneshot(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_args_t *a,
                                     rcoll_datatype_t dt, rcoll_op_t op,
                                     rcoll_oneshot_err_t *report);
/* The same kernel in the caller's stream order (stream: a CUstream, NULL the legacy one):
 * launched on stream after the communicator's previous one-kernel all-reduce, whatever its
 * stream (an event chain: a rank's one-kernel calls never overlap), and not waited for.  It
 * reports into entry *slot of a ring of RCOLL_GPU_IPC_RING entries, used in turn; the caller
 * must have polled the entry's previous call to completion (rcoll_gpu_ipc_ring_next says which
 * entry comes next; its previous call, when busy). */
#define RCOLL_GPU_IPC_RING 16
int rcoll_gpu_ipc_ring_next(const rcoll_gpu_ipc_t *ipc, int *busy);
rcoll_status_t rcoll_gpu_ipc_oneshot_async(rcoll_gpu_ipc_t *ipc, rcoll_oneshot_args_t *a,
                                           rcoll_datatype_t dt, rcoll_op_t op, void *stream,
                                           int *slot);
/* Has entry slot's call finished (wait: wait for it)?  *done 1 with its report in *report
 * (the entry is free again), 0 while it runs.  An error: the driver's (the call's kernel
 * failed, or the query did), one sentence; the entry is free again. */
rcoll_status_t rcoll_gpu_ipc_oneshot_poll(rcoll_gpu_ipc_t *ipc, int slot, int wait, int *done,
                                          rcoll_oneshot_err_t *report);
/* Wait for everything enqueued on the IPC stream. */
rcoll_status_t rcoll_gpu_ipc_sync(rcoll_gpu_ipc_t *ipc);
/* Wait for the IPC stream and the stream-ordered one-kernel calls, then unmap the peers'
 * workspaces (this rank reads none of them any more). */
void rcoll_gpu_ipc_unmap(rcoll_gpu_ipc_t *ipc);
/* Unmap the peers' workspaces, free the stream and this rank's workspace; *ipc becomes NULL.
 * Other ranks must have unmapped this rank's workspace first: freeing an exported allocation
 * that is still mapped elsewhere is undefined with the driver (on a GPU, a peer's kernel
 * still polling it takes an MMU fault, a sticky CUDA_ERROR_ILLEGAL_ADDRESS).  keep_own: a
 * peer may still have it mapped, so the workspace stays allocated (said at INFO) until the
 * process exits. */
void rcoll_gpu_ipc_free(rcoll_gpu_ipc_t **ipc, int keep_own);

#endif
