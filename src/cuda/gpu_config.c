/*
 * gpu_config.c - the CUDA knobs.  Built with or without CUDA, so that a job that sets them
 * gets no "unknown variable" warning and rcoll-info -c lists them; and the kinds' names.
 */
#include "cuda/gpu.h"

static const char *const mode_names[] = {"auto", "0", "1", NULL}; /* rcoll_gpu_mode_t */

static const rcoll_knob_t gpu_knobs[] = {
    RCOLL_KNOB_ENUM_OF(rcoll_gpu_config_t, "RCOLL_CUDA", "auto", mode, mode_names,
                       "CUDA driver use: auto loads it at communicator creation when the "
                       "process has already loaded libcuda (the application uses CUDA), 1 "
                       "loads it or fails the creation, 0 never (buffers are then all host "
                       "memory)"),
    RCOLL_KNOB_STR(rcoll_gpu_config_t, "RCOLL_CUDA_LIB", "libcuda.so.1", cuda_lib,
                   "the CUDA driver library loaded with dlopen (rcoll never links it)"),
    RCOLL_KNOB_NUM(rcoll_gpu_config_t, "RCOLL_CUDA_IPC", "0", INT, ipc, 0, 1,
                   "1: the collectives on CUDA buffers, every rank on one host, run on the "
                   "GPUs over CUDA IPC instead of staging through host memory (every rank must then pass CUDA buffers to "
                   "them, outside groups; docs/gpu.md); 0: staging only"),
    RCOLL_KNOB_NUM(rcoll_gpu_config_t, "RCOLL_CUDA_IPC_BYTES", "33554432", SIZE, ipc_bytes,
                   16384, 1LL << 36,
                   "device memory of each rank's CUDA IPC workspace (larger all-reduces go "
                   "through it in pieces of a quarter of it)"),
    RCOLL_KNOB_NUM(rcoll_gpu_config_t, "RCOLL_CUDA_IPC_ONESHOT", "65536", SIZE, ipc_oneshot,
                   0, 1LL << 30,
                   "bytes: with RCOLL_CUDA_IPC=1, an all-reduce up to this size is one kernel "
                   "per rank that reads every rank's data where it lies, the ranks meeting on "
                   "flags in device memory (no host synchronization); 0: never.  Every rank "
                   "uses the smallest value set"),
    RCOLL_KNOB_NUM(rcoll_gpu_config_t, "RCOLL_CUDA_IPC_TWOSHOT", "2097152", SIZE, ipc_twoshot,
                   0, 1LL << 32,
                   "bytes: larger all-reduces up to this size are the one kernel's two-shot "
                   "form (each rank reduces its shard of every rank's data, then gathers the "
                   "others' shards; a second flag between); 0: never.  Every rank uses the "
                   "smallest value set"),
    RCOLL_KNOB_NUM(rcoll_gpu_config_t, "RCOLL_CUDA_IPC_ONESHOT_SHARED", "0", INT,
                   ipc_oneshot_shared, 0, 1,
                   "1: the one-kernel all-reduce also when ranks share a GPU (their kernels, "
                   "waiting for each other, then take turns on it: slow without MPS); 0: only "
                   "when every rank has a GPU of its own"),
    RCOLL_KNOB_NUM(rcoll_gpu_config_t, "RCOLL_STAGE_CHUNK", "0", SIZE, stage_chunk, 0,
                   1LL << 40,
                   "bytes: a blocking all-reduce, broadcast or reduce larger than this is run "
                   "as chunks of it, on every rank (host buffers too, so that every rank runs "
                   "the same collectives), and CUDA buffers are staged chunk by chunk, the "
                   "copies overlapping the other chunks' transfers; 0: off.  Set it the same on "
                   "every rank (docs/gpu.md)"),
    RCOLL_KNOB_NUM(rcoll_gpu_config_t, "RCOLL_STAGE_PINNED_MAX", "4294967296", SIZE,
                   stage_pinned_max, 0, 1LL << 46,
                   "bytes: the most pinned host memory a communicator's staging areas hold "
                   "together (the blocking calls' area, one per nonblocking or stream-ordered "
                   "call in flight, and areas outgrown in stream order until a later call frees "
                   "them); a call that would need more fails with RCOLL_ERR_NO_MEMORY saying "
                   "so; 0: no bound"),
};
const rcoll_config_table_t rcoll_gpu_config_table =
    RCOLL_CONFIG_TABLE("cuda", gpu_knobs, rcoll_gpu_config_t);

const char *rcoll_memkind_name(rcoll_memkind_t kind)
{
    switch (kind) {
    case RCOLL_MEM_HOST_PINNED:
        return "pinned host memory";
    case RCOLL_MEM_DEVICE:
        return "CUDA device memory";
    case RCOLL_MEM_MANAGED:
        return "CUDA managed memory";
    default:
        return "host memory";
    }
}
