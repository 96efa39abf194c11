#!/usr/bin/env bash
# The perf binaries with --memtype cuda / managed, end to end, on a machine without a GPU:
# each rank loads the scripted driver (tests/common/cuda_script_lib.c) through
# RCOLL_CUDA_LIB, exactly as it would load libcuda.so.1.  Its "device" memory is mapped
# PROT_NONE in the process, so a device buffer that rcoll or the harness touched with host
# loads or stores (instead of staging or copying it) kills the rank with SIGSEGV.  Checked:
# every collective's results (the harness's own check, "#wrong" 0), one device per local
# rank or --ranks-per-gpu ranks per device (the "Using devices" lines), the staging copies
# really made (the script's byte counters), every allocation freed and every copy made in
# its buffer's context; and the failures: no driver, too many ranks for the devices, a
# failing cuMemAlloc (exit 2 with the sentence).  This checks rcoll's logic, not a GPU.
# Usage: test_perf_cuda.sh BUILD_DIR SCRIPT_LIB
set -u
build=$1
lib=$2
run="$build/tools/rcoll-run"
fixtures="$(cd "$(dirname "$0")/../fixtures" && pwd)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=../common/check.sh
. "$(dirname "$0")/../common/check.sh"

# perf NAME NRANKS ARGS...: run it under the scripted driver; output in $TMP/NAME.out.
perf() {
    local name=$1 n=$2
    shift 2
    CUDA_SCRIPT_STATS=1 RCOLL_CUDA_LIB=${LIB:-$lib} timeout 120 "$run" -q -n "$n" \
        --timeout 100 "$build/bench/$name" "$@" >"$TMP/out" 2>&1
    RC=$?
}

# The run passed its own check, and every rank's driver saw staging traffic, freed all it
# allocated and never copied outside the buffer's context.
clean_run() {
    local n=$1
    [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/out" || return 1
    local stats
    stats=$(grep -c '^\[[0-9]*\] cuda-script: pid' "$TMP/out")
    [ "$stats" = "$n" ] || { echo "    $stats of $n ranks reported driver stats"; return 1; }
    ! grep 'cuda-script:' "$TMP/out" | grep -qvE 'live 0 .* other_abi 0 wrong_ctx 0$' || {
        echo "    a rank leaked or copied in another context:"; grep 'cuda-script:' "$TMP/out"
        return 1; }
    ! grep 'cuda-script:' "$TMP/out" | grep -qE 'htod_bytes 0 |dtoh_bytes 0 ' || {
        echo "    a rank's collective buffers were not staged:"; grep 'cuda-script:' "$TMP/out"
        return 1; }
}

# Lines "#  Rank R ... device D [BUS] NAME" as "R:D:NAME" joined by spaces.
devices() {
    grep -oE 'Rank +[0-9]+ .* device +-?[0-9]+ \[[^]]*\] .*' "$TMP/out" |
        sed -E 's/Rank +([0-9]+) .* device +(-?[0-9]+) \[[^]]*\] (.*)/\1:\2:\3/' | tr '\n' ' '
}

keep() { cp "$TMP/out" "$TMP/$1.out"; }

# perf_setup SETUP NRANKS ARGS...: all_reduce_perf as perf runs it, each rank first running
# the shell code SETUP (which sees $RCOLL_RANK).
perf_setup() {
    local setup=$1 n=$2
    shift 2
    CUDA_SCRIPT_STATS=1 RCOLL_CUDA_LIB=$lib timeout 60 "$run" -q -n "$n" \
        sh -c "$setup"' exec "$0" "$@"' "$build/bench/all_reduce_perf" "$@" >"$TMP/out" 2>&1
    RC=$?
}

common=(-b 8 -e 256K -f 8 -n 2 -w 1)

# 4 ranks, 2 devices, 2 ranks on each.
CUDA_SCRIPT_DEVICES=2 perf all_reduce_perf 4 "${common[@]}" --memtype cuda --ranks-per-gpu 2 \
    -d float,int32,bfloat16 -o sum,max
keep allreduce_2dev
check allreduce_2dev clean_run 4
want="0:0:Scripted GPU 0 1:0:Scripted GPU 0 2:1:Scripted GPU 1 3:1:Scripted GPU 1 "
got=$(devices)
check allreduce_2dev_devices test "$got" = "$want"
check allreduce_2dev_preamble grep -q '# rcoll: 4 ranks, memory cuda,' "$TMP/allreduce_2dev.out"
check allreduce_2dev_bus grep -qE 'device  1 \[0000:1a:00.0\] Scripted GPU 1' "$TMP/allreduce_2dev.out"

# Every collective on 3 ranks sharing one device, in and out of place (the harness runs both).
for p in all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf \
    gather_perf scatter_perf sendrecv_perf; do
    args=("${common[@]}")
    case $p in broadcast_perf | reduce_perf | gather_perf | scatter_perf) args+=(-r -1) ;; esac
    CUDA_SCRIPT_DEVICES=1 perf "$p" 3 "${args[@]}" --memtype cuda --ranks-per-gpu 3
    keep "$p"
    check "$p" clean_run 3
done

# Nonblocking (the default -z 0 starts -m operations before waiting) and blocking with barrier.
CUDA_SCRIPT_DEVICES=1 perf all_reduce_perf 2 -b 1K -e 64K -f 8 -n 2 -w 1 -m 4 --memtype cuda \
    --ranks-per-gpu 2
keep allreduce_agg
check allreduce_agg clean_run 2
CUDA_SCRIPT_DEVICES=2 perf reduce_scatter_perf 2 -b 1K -e 64K -f 8 -n 2 -w 1 -z 1 --memtype cuda
keep reduce_scatter_blocking
check reduce_scatter_blocking clean_run 2

# Managed memory: staged the same way.
CUDA_SCRIPT_DEVICES=1 perf all_reduce_perf 2 "${common[@]}" --memtype managed --ranks-per-gpu 2
keep allreduce_managed
check allreduce_managed clean_run 2

# The ring inside a host follows the GPUs: 4 ranks on scripted GPUs 0-3, GPUs 0 and 2 behind
# one PCIe switch and 1 and 3 behind another (a topology file): the ring is 0 -> 2 -> 1 -> 3
# (each rank's INFO line shows its neighbours); without the file (this machine has no GPU in
# its topology) it stays in rank order.
RCOLL_TOPO_FILE=$fixtures/script_4gpu_switches.json RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT \
    CUDA_SCRIPT_DEVICES=4 perf all_reduce_perf 4 "${common[@]}" --memtype cuda
keep ring_gpu
ring_gpu_ok() {
    clean_run 4 && grep -q 'rank 0/4 on .*: ring 3 -> 0 -> 2 ' "$TMP/out" &&
        grep -q 'rank 2/4 on .*: ring 0 -> 2 -> 1 ' "$TMP/out" &&
        grep -q 'rank 1/4 on .*: ring 2 -> 1 -> 3 ' "$TMP/out"
}
check ring_gpu ring_gpu_ok
RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT CUDA_SCRIPT_DEVICES=4 perf all_reduce_perf 4 \
    "${common[@]}" --memtype cuda
keep ring_rank_order
ring_rank_ok() { clean_run 4 && grep -q 'rank 0/4 on .*: ring 3 -> 0 -> 1 ' "$TMP/out"; }
check ring_rank_order ring_rank_ok

# Pipelined staging (RCOLL_STAGE_CHUNK): the chunks' copies asynchronous on the staging
# streams (counted by the script), results right; blocking and nonblocking.
pipelined() {
    clean_run "$1" && ! grep 'cuda-script:' "$TMP/out" | grep -q ' async_copies 0 ' || {
        echo "    a rank made no asynchronous staging copy:"; grep 'cuda-script:' "$TMP/out"
        return 1; }
}
# The nonblocking forms (-z 1) take the same chunked path once posted: the block
# collectives' chunking is checked blocking only past the first two.
for p in all_reduce_perf broadcast_perf reduce_perf all_gather_perf reduce_scatter_perf \
    alltoall_perf gather_perf scatter_perf; do
    zs="0 1"
    case $p in alltoall_perf | gather_perf | scatter_perf) zs=0 ;; esac
    for z in $zs; do
        args=(-b 8 -e 1M -f 8 -n 2 -w 1 -z $z -d float,int8,half --memtype cuda --ranks-per-gpu 3)
        case $p in reduce_perf | broadcast_perf | gather_perf | scatter_perf) args+=(-r -1) ;; esac
        case $p in all_reduce_perf | reduce_perf | reduce_scatter_perf) args+=(-o all) ;; esac
        RCOLL_STAGE_CHUNK=16384 CUDA_SCRIPT_DEVICES=1 perf "$p" 3 "${args[@]}"
        keep "chunked_${p}_z$z"
        check "chunked_${p}_z$z" pipelined 3
    done
done
# Host buffers chunk alike (every rank must run the same collectives); the collectives of
# blocks go through a packed copy of each chunk's pieces there.
chunked_host() {
    [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/out" && ! grep -q 'cuda-script:' "$TMP/out"
}
for p in all_gather_perf reduce_scatter_perf alltoall_perf gather_perf scatter_perf; do
    args=(-b 8 -e 1M -f 8 -n 2 -w 1 -d float,int8,half)
    case $p in reduce_scatter_perf) args+=(-o all) ;; gather_perf | scatter_perf) args+=(-r -1) ;; esac
    RCOLL_STAGE_CHUNK=16384 perf "$p" 3 "${args[@]}"
    keep "chunked_${p}_host"
    check "chunked_${p}_host" chunked_host
done

# Host memory with the scripted driver loaded by nobody: unchanged, and no staging.
perf all_reduce_perf 2 "${common[@]}"
keep allreduce_host
host_ok() {
    [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/out" &&
        grep -q 'device -1 \[host\] host-memory' "$TMP/out" && ! grep -q 'cuda-script:' "$TMP/out"
}
check allreduce_host host_ok

# rcoll-info: the driver's devices, and the CUDA paths the knobs select; without a driver, why.
info_devices() {
    RCOLL_CUDA_LIB=$lib CUDA_SCRIPT_DEVICES=2 RCOLL_CUDA_IPC=1 RCOLL_NET_GDR_LEVEL=PHB \
        "$build/tools/rcoll-info" >"$TMP/info_devices.out" 2>&1 &&
        grep -qF "cuda: driver $lib, 2 devices" "$TMP/info_devices.out" &&
        grep -qF 'device 1: Scripted GPU 1 [0000:1a:00.0]' "$TMP/info_devices.out" &&
        grep -qF 'CUDA IPC between the ranks of a host on (RCOLL_CUDA_IPC=1)' "$TMP/info_devices.out" &&
        grep -qF 'GPUDirect RDMA where a NIC registers CUDA memory (verbs lines above) within PHB of the GPU' "$TMP/info_devices.out"
}
check info_devices info_devices
info_no_driver() {
    RCOLL_CUDA_LIB=/nonexistent/libcuda.so.1 "$build/tools/rcoll-info" >"$TMP/info_no_driver.out" 2>&1 &&
        grep -qF 'cuda: unavailable: rcoll_cuda_device_count: no CUDA driver (/nonexistent/libcuda.so.1: ' "$TMP/info_no_driver.out"
}
check info_no_driver info_no_driver

# Failures, each exit 2 with its sentence on every rank.
failed_with() {
    local want=$1
    [ "$RC" = 2 ] && grep -qF -- "$want" "$TMP/out"
}
CUDA_SCRIPT_DEVICES=1 perf all_reduce_perf 2 -b 8 -e 8 --memtype cuda
keep too_many_ranks
check too_many_ranks failed_with 'local rank 1 would use CUDA device 1 (--ranks-per-gpu 1) but this host has 1: run at most 1 ranks per host'
CUDA_SCRIPT_DEVICES=1 CUDA_SCRIPT_FAIL=cuMemAlloc:2 perf all_reduce_perf 1 -b 8 -e 1M --memtype cuda
keep alloc_fails
check alloc_fails failed_with 'cuMemAlloc(1048640 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)'
LIB=/nonexistent/libcuda.so.1 perf all_reduce_perf 2 -b 8 -e 8 --memtype cuda
keep no_driver
check no_driver failed_with 'rcoll_cuda_device_count: no CUDA driver (/nonexistent/libcuda.so.1: '
# The staging copy failing inside the benchmarked collective: a library error (exit 3) naming it.
CUDA_SCRIPT_DEVICES=1 CUDA_SCRIPT_FAIL=cuMemcpyDtoH:3 perf all_reduce_perf 1 -b 64 -e 64 -n 1 -w 1 --memtype cuda
keep copy_fails
copy_failed() { [ "$RC" = 3 ] && grep -qF 'cuMemcpyDtoH of 64 bytes from' "$TMP/out"; }
check copy_fails copy_failed
# A pipelined staging copy out failing: the sentence names the chunk it belonged to (the
# second of four here: the second asynchronous copy to the device), for an elementwise
# collective and one of blocks.
chunk_copy_failed() {
    [ "$RC" = 3 ] && grep -qF "$1: pipelined staging, chunk 2 of 4: cuMemcpyHtoDAsync of 16384 bytes" "$TMP/out"
}
for p in all_reduce_perf:rcoll_iallreduce reduce_scatter_perf:rcoll_ireduce_scatter; do
    RCOLL_STAGE_CHUNK=16384 CUDA_SCRIPT_DEVICES=1 CUDA_SCRIPT_FAIL=cuMemcpyHtoDAsync:2 \
        perf "${p%%:*}" 1 -b 64K -e 64K -n 1 -w 1 --memtype cuda
    keep "chunk_copy_fails_${p%%:*}"
    check "chunk_copy_fails_${p%%:*}" chunk_copy_failed "${p#*:}"
done
# ---- CUDA IPC (RCOLL_CUDA_IPC=1): the all-reduce on the scripted GPUs, no staging ----
# Another rank's memfd is opened through /proc/<pid>/fd: root may; another user only where
# Yama lets a process read its siblings (ptrace_scope 0).
ipc_ok=1
if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)" != 0 ]; then
    ipc_ok=0
fi
# The run passed its own check, every rank reduced on the "GPU" (kernels; not with a second
# argument, for the collectives that only copy) and staged nothing, and every mapping and
# allocation was given back (no workspace freed while another rank still had it mapped).
ipc_run() {
    local n=$1 copies_only=${2:-}
    [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/out" || return 1
    [ "$(grep -c '^\[[0-9]*\] cuda-script: pid' "$TMP/out")" = "$n" ] || return 1
    ! grep 'cuda-script:' "$TMP/out" | grep -qvE 'live 0 htod_bytes 0 dtoh_bytes 0 .* freed_mapped 0 ipc_open 0 async_copies [0-9]+ other_abi 0 wrong_ctx 0$' || {
        echo "    staged, leaked, left mapped or freed while mapped elsewhere:"; grep 'cuda-script:' "$TMP/out"; return 1; }
    [ "$n" = 1 ] || [ -n "$copies_only" ] || ! grep 'cuda-script:' "$TMP/out" | grep -q ' kernels 0 ' || {
        echo "    a rank launched no reduction:"; grep 'cuda-script:' "$TMP/out"; return 1; }
}
# oneshots_on N 1 [twoshots]: every one of the N ranks ran one-kernel all-reduces (one-shot;
# with a third argument, two-shot); N 0: none did.
oneshots_on() {
    local n=$1 want=$2 kind=${3:-oneshots} got
    got=$(grep 'cuda-script:' "$TMP/out" | grep -cE " $kind [1-9]")
    if [ "$want" = 1 ]; then [ "$got" = "$n" ]; else [ "$got" = 0 ]; fi || {
        echo "    $kind on $got of $n ranks:"; grep 'cuda-script:' "$TMP/out"
        return 1; }
}
if [ $ipc_ok = 1 ]; then
    for n in 2 3 4; do
        RCOLL_CUDA_IPC=1 CUDA_SCRIPT_DEVICES=1 perf all_reduce_perf $n "${common[@]}" \
            --memtype cuda --ranks-per-gpu $n -d all -o all
        keep ipc_$n
        check ipc_$n ipc_run $n
        # ranks sharing a GPU: no one-kernel all-reduce by default
        check ipc_${n}_shared_no_oneshot oneshots_on "$n" 0
        # the pieces' reductions: one kernel reading every rank's input, on every rank
        check ipc_${n}_reduce_all oneshots_on "$n" 1 reduce_all
        # a shared GPU: the pieces' steps meet at host barriers, no device meets
        check ipc_${n}_shared_no_meets oneshots_on "$n" 0 meets
    done
    # The one-kernel all-reduce (every rank on a GPU of its own; one-shot up to 64 KiB,
    # two-shot up to 2 MiB, pieces above): every datatype x op right on 2-4 ranks, in-place
    # too, nothing staged
    for n in 2 4; do
        RCOLL_CUDA_IPC=1 CUDA_SCRIPT_DEVICES=$n perf all_reduce_perf $n "${common[@]}" \
            --memtype cuda -d all -o all
        keep oneshot_$n
        check oneshot_$n ipc_run $n
        check oneshot_${n}_used oneshots_on "$n" 1
        check oneshot_${n}_twoshot_used oneshots_on "$n" 1 twoshots
    done
    RCOLL_CUDA_IPC=1 CUDA_SCRIPT_DEVICES=3 perf all_reduce_perf 3 -b 4 -e 96K -i 4100 -n 3 -w 1 \
        --memtype cuda -d float,half,int8 -o sum,avg,max -z 2
    keep oneshot_odd
    check oneshot_odd ipc_run 3
    check oneshot_odd_used oneshots_on 3 1
    check oneshot_odd_twoshot_used oneshots_on 3 1 twoshots
    # a small workspace leaves room for smaller one-kernel calls; pieces beyond
    RCOLL_CUDA_IPC=1 RCOLL_CUDA_IPC_BYTES=65536 CUDA_SCRIPT_DEVICES=3 perf all_reduce_perf 3 \
        -b 8 -e 64K -f 2 -n 2 -w 1 -d float -o sum --memtype cuda
    keep oneshot_small_ws
    check oneshot_small_ws ipc_run 3
    check oneshot_small_ws_used oneshots_on 3 1
    # the pieces' steps meet on device flags in stream order, no host barrier
    check oneshot_small_ws_meets oneshots_on 3 1 meets
    # RCOLL_CUDA_IPC_ONESHOT=0 on one rank: no rank uses the one-shot, all the two-shot (from
    # the smallest call) and pieces beyond 1 MiB (RCOLL_CUDA_IPC_TWOSHOT on another rank)
    RCOLL_CUDA_IPC=1 CUDA_SCRIPT_DEVICES=3 perf_setup '[ $RCOLL_RANK = 1 ] && export RCOLL_CUDA_IPC_ONESHOT=0;
        [ $RCOLL_RANK = 2 ] && export RCOLL_CUDA_IPC_TWOSHOT=1048576;' \
        3 -b 1 -e 4M -f 4 -n 2 -w 1 --memtype cuda -d int8,float,bfloat16 -o sum,avg,min
    keep oneshot_off_one_rank
    check oneshot_off_one_rank ipc_run 3
    check oneshot_off_one_rank_unused oneshots_on 3 0
    check oneshot_off_one_rank_twoshot oneshots_on 3 1 twoshots
    check oneshot_off_one_rank_meets oneshots_on 3 1 meets
    # both 0 on one rank: none at all
    RCOLL_CUDA_IPC=1 CUDA_SCRIPT_DEVICES=3 perf_setup '[ $RCOLL_RANK = 1 ] && export RCOLL_CUDA_IPC_ONESHOT=0 RCOLL_CUDA_IPC_TWOSHOT=0;' \
        3 "${common[@]}" --memtype cuda -d float -o sum
    keep oneshot_off
    check oneshot_off ipc_run 3
    check oneshot_off_unused oneshots_on 3 0
    check oneshot_off_unused2 oneshots_on 3 0 twoshots
    check oneshot_off_no_meets oneshots_on 3 0 meets
    # the other collectives' pieces on GPUs of their own: steps meeting on device flags, every
    # root, results right
    for p in reduce_perf reduce_scatter_perf all_gather_perf broadcast_perf alltoall_perf \
        gather_perf scatter_perf; do
        args=(-b 8 -e 256K -f 8 -n 2 -w 1 -d float,int8 --memtype cuda)
        case $p in reduce_perf | broadcast_perf | gather_perf | scatter_perf) args+=(-r -1) ;; esac
        case $p in reduce_perf | reduce_scatter_perf) args+=(-o sum,max) ;; esac
        RCOLL_CUDA_IPC=1 RCOLL_CUDA_IPC_BYTES=65536 CUDA_SCRIPT_DEVICES=3 perf "$p" 3 "${args[@]}"
        keep "meets_$p"
        case $p in reduce_perf | reduce_scatter_perf) check "meets_$p" ipc_run 3 ;;
        *) check "meets_$p" ipc_run 3 copies ;; esac
        check "meets_${p}_used" oneshots_on 3 1 meets
    done
    # pieces: a 64 KiB workspace (16 KiB per input area) for up to 1 MiB; blocking calls
    RCOLL_CUDA_IPC=1 RCOLL_CUDA_IPC_BYTES=65536 CUDA_SCRIPT_DEVICES=2 perf all_reduce_perf 4 \
        -b 1K -e 1M -f 4 -n 2 -w 1 -d float,int64,half -o sum,avg,min --memtype cuda \
        --ranks-per-gpu 2 -z 2
    keep ipc_pieces
    check ipc_pieces ipc_run 4
    # with the progress thread, four operations aggregated per iteration
    RCOLL_CUDA_IPC=1 RCOLL_PROGRESS_THREAD=1 CUDA_SCRIPT_DEVICES=1 perf all_reduce_perf 3 \
        "${common[@]}" -m 4 --memtype cuda --ranks-per-gpu 3
    keep ipc_progress_thread
    check ipc_progress_thread ipc_run 3
    RCOLL_CUDA_IPC=1 CUDA_SCRIPT_DEVICES=1 perf all_reduce_perf 1 "${common[@]}" --memtype cuda -d all -o all
    keep ipc_1
    check ipc_1 ipc_run 1
    # the other collectives over IPC, in pieces (a 64 KiB workspace), every root
    for p in reduce_perf reduce_scatter_perf all_gather_perf broadcast_perf alltoall_perf \
        gather_perf scatter_perf; do
        args=(-b 8 -e 256K -f 8 -n 2 -w 1 -d all --memtype cuda --ranks-per-gpu 3)
        case $p in reduce_perf | broadcast_perf | gather_perf | scatter_perf) args+=(-r -1) ;; esac
        case $p in reduce_perf | reduce_scatter_perf) args+=(-o all) ;; esac
        RCOLL_CUDA_IPC=1 RCOLL_CUDA_IPC_BYTES=65536 CUDA_SCRIPT_DEVICES=1 perf "$p" 3 "${args[@]}"
        keep "ipc_$p"
        case $p in reduce_perf | reduce_scatter_perf) check "ipc_$p" ipc_run 3 ;;
        *) check "ipc_$p" ipc_run 3 copies ;; esac
    done
    # one rank cannot map a peer's workspace: every rank says so and stages, results right
    RCOLL_CUDA_IPC=1 perf_setup '[ $RCOLL_RANK = 1 ] && export CUDA_SCRIPT_FAIL=cuIpcOpenMemHandle:2;' \
        3 -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda --ranks-per-gpu 3
    keep ipc_fallback
    fallback_ok() {
        clean_run 3 &&
            [ "$(grep -c 'CUDA IPC not used (RCOLL_CUDA_IPC=1): ' "$TMP/out")" = 3 ] &&
            grep -q "cuIpcOpenMemHandle(rank 2's workspace) failed: CUDA_ERROR_INVALID_HANDLE" "$TMP/out" &&
            ! grep 'cuda-script:' "$TMP/out" | grep -qv ' freed_mapped 0 ' # rank 1 had rank 0's open
    }
    check ipc_fallback fallback_ok
    # no host segment (RCOLL_SHM_DISABLE=1): no CUDA IPC, every rank says why and stages
    RCOLL_CUDA_IPC=1 RCOLL_SHM_DISABLE=1 CUDA_SCRIPT_DEVICES=3 perf all_reduce_perf 3 \
        -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda
    keep ipc_no_hostseg
    no_hostseg_ok() {
        clean_run 3 && [ "$(grep -c 'CUDA IPC not used (RCOLL_CUDA_IPC=1): no host segment' "$TMP/out")" = 3 ]
    }
    check ipc_no_hostseg no_hostseg_ok
    # RCOLL_CUDA_IPC_BYTES smaller on one rank: every rank cuts pieces by the smallest
    RCOLL_CUDA_IPC=1 perf_setup '[ $RCOLL_RANK = 1 ] && export RCOLL_CUDA_IPC_BYTES=65536;' \
        3 -b 8 -e 1M -f 8 -n 2 -w 1 -d float,int8 -o sum,avg --memtype cuda --ranks-per-gpu 3
    keep ipc_sizes_differ
    check ipc_sizes_differ ipc_run 3
    # one rank cannot allocate its workspace: every rank says so and stages
    RCOLL_CUDA_IPC=1 perf_setup '[ $RCOLL_RANK = 2 ] && export CUDA_SCRIPT_FAIL=cuMemAlloc:3;' \
        3 -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda --ranks-per-gpu 3
    keep ipc_no_workspace
    no_workspace_ok() {
        clean_run 3 && [ "$(grep -c 'CUDA IPC not used (RCOLL_CUDA_IPC=1): ' "$TMP/out")" = 3 ] &&
            grep -q 'cuMemAlloc(33554432 bytes) for the CUDA IPC workspace failed: CUDA_ERROR_OUT_OF_MEMORY' "$TMP/out"
    }
    check ipc_no_workspace no_workspace_ok
    # the GPU fails in the middle of a call on one rank: it exits with the driver's sentence,
    # the others name it, all within seconds (RCOLL_TIMEOUT=20)
    t0=$(date +%s)
    RCOLL_TIMEOUT=20 RCOLL_CUDA_IPC=1 perf_setup \
        '[ $RCOLL_RANK = 1 ] && export CUDA_SCRIPT_FAIL=cuStreamSynchronize:5;' \
        3 -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda --ranks-per-gpu 3
    elapsed=$(($(date +%s) - t0))
    keep ipc_gpu_fails
    gpu_fails_ok() {
        [ "$RC" = 3 ] && [ "$elapsed" -lt 15 ] &&
            grep -q '\[1\] all_reduce_perf: rank 1: .*CUDA IPC allreduce: cuStreamSynchronize(the CUDA IPC stream) failed: CUDA_ERROR_ILLEGAL_ADDRESS' "$TMP/out" &&
            [ "$(grep -cE '\[[02]\] all_reduce_perf: rank [02]: .*rank 1 ' "$TMP/out")" = 2 ]
    }
    check ipc_gpu_fails gpu_fails_ok
    # two GPUs without peer access between them: every rank says so and stages
    RCOLL_CUDA_IPC=1 CUDA_SCRIPT_DEVICES=2 CUDA_SCRIPT_NO_P2P=1 perf all_reduce_perf 4 \
        -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda --ranks-per-gpu 2
    keep ipc_no_p2p
    no_p2p_ok() {
        clean_run 4 &&
            [ "$(grep -c 'CUDA IPC not used (RCOLL_CUDA_IPC=1): ' "$TMP/out")" = 4 ] &&
            grep -q "this rank's GPU 0000:19:00.0 cannot access rank 2's GPU 0000:1a:00.0 directly" "$TMP/out"
    }
    check ipc_no_p2p no_p2p_ok
    # RCOLL_P2P_LEVEL: the two scripted GPUs on different CPU packages (SYS) are refused at
    # PHB (every rank says why and stages) and allowed at the default, SYS
    RCOLL_CUDA_IPC=1 RCOLL_P2P_LEVEL=PHB RCOLL_TOPO_FILE=$fixtures/script_2socket.json \
        CUDA_SCRIPT_DEVICES=2 perf all_reduce_perf 4 -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda \
        --ranks-per-gpu 2
    keep ipc_p2p_level
    p2p_level_ok() {
        clean_run 4 && [ "$(grep -c 'CUDA IPC not used (RCOLL_CUDA_IPC=1): ' "$TMP/out")" = 4 ] &&
            grep -q "this rank's GPU 0000:19:00.0 and rank 2's GPU 0000:1a:00.0 are SYS (across CPU packages 0 and 1); RCOLL_P2P_LEVEL allows up to PHB" "$TMP/out"
    }
    check ipc_p2p_level p2p_level_ok
    RCOLL_CUDA_IPC=1 RCOLL_TOPO_FILE=$fixtures/script_2socket.json CUDA_SCRIPT_DEVICES=2 \
        perf all_reduce_perf 4 -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda --ranks-per-gpu 2
    keep ipc_p2p_sys
    check ipc_p2p_sys ipc_run 4
    # RCOLL_CUDA_IPC=1 on one rank only: the ranks run different collectives, which the call
    # signatures catch at once on every rank (no hang)
    perf_setup '[ $RCOLL_RANK = 0 ] && export RCOLL_CUDA_IPC=1;' \
        3 -b 8 -e 64K -f 8 -n 2 -w 1 --memtype cuda --ranks-per-gpu 3
    keep ipc_mismatch
    mismatch_ok() {
        [ "$RC" = 3 ] && [ "$(grep -cE '\] all_reduce_perf: rank [0-2]: .*called allgather\(count=[0-9]+, uint8\)' "$TMP/out")" = 3 ]
    }
    check ipc_mismatch mismatch_ok
else
    skip ipc "another rank's memory cannot be opened through /proc/<pid>/fd here (not root, Yama ptrace_scope != 0)"
fi
check_summary
