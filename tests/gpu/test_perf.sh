#!/usr/bin/env bash
# The perf binaries with CUDA device buffers on a real GPU (suite gpu): every perf binary
# with --memtype cuda on 2 ranks sharing the GPU must pass its own check, and so must the
# collectives RCOLL_STAGE_CHUNK pipelines on 3 ranks, the CUDA IPC
# all-reduce (RCOLL_CUDA_IPC=1) every datatype x op on 2-4 ranks, then the bandwidth table:
# all_reduce_perf, 4 ranks on one GPU (--ranks-per-gpu 4), 8 B to 256 MiB, with host buffers,
# staged device buffers, staged in 4 MiB chunks (RCOLL_STAGE_CHUNK) and over CUDA IPC in the
# same run, side by side with the ratios; then the one-kernel all-reduce's times (one-shot
# and two-shot, to 4 MiB).  The ratios are printed, not asserted (docs/gpu.md states the targets).
# Exit 77 (skip) without a GPU or driver.
# Usage: test_perf.sh BUILD_DIR [all|checks|table]: everything (the default; meson's gpu_perf),
# only the perf binaries' own checks, or only the tables (tests/gpu/run.sh runs the tables
# first, with GPU_PERF_MAX=64M, and the checks last if its time budget leaves room).
# GPU_PERF_MAX: the table's largest size (default 256M).
set -u
build=$1
mode=${2:-all}
case $mode in
all | checks | table) ;;
*)
    echo "usage: test_perf.sh BUILD_DIR [all|checks|table]" >&2
    exit 2
    ;;
esac
run="$build/tools/rcoll-run"
if [ ! -e /dev/nvidia0 ]; then
    echo "SKIP: no NVIDIA GPU on this machine (/dev/nvidia0 missing)"
    exit 77
fi
if ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "${RCOLL_CUDA_LIB:-libcuda.so.1}" 2>/dev/null; then
    echo "SKIP: no NVIDIA driver library (${RCOLL_CUDA_LIB:-libcuda.so.1} cannot be loaded)"
    exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
pass=0
# ok_run NAME NRANKS ARGS...: NRANKS ranks of a perf binary (ARGS: the binary's name, then
# its flags) pass their own check and, with RCOLL_CUDA_IPC=1, use it.
ok_run() {
    local name=$1 n=$2 p=$3
    shift 3
    if timeout 300 "$run" -q -n "$n" --timeout 250 "$build/bench/$p" "$@" >"$TMP/$name.out" 2>&1 &&
        grep -q 'Out of bounds values : 0 OK' "$TMP/$name.out" &&
        ! grep -q 'CUDA IPC not used' "$TMP/$name.out"; then
        echo "ok   $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        tail -20 "$TMP/$name.out"
        fail=$((fail + 1))
    fi
}
checks() {
    for p in all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf \
        alltoall_perf gather_perf scatter_perf sendrecv_perf; do
        ok_run "$p --memtype cuda (2 ranks on one GPU)" 2 "$p" -b 8 -e 8M -f 16 -n 3 -w 1 \
            --memtype cuda --ranks-per-gpu 2
    done
    # Pipelined staging (RCOLL_STAGE_CHUNK, 1 MiB chunks): every collective it chunks.
    for p in all_reduce_perf broadcast_perf reduce_perf all_gather_perf reduce_scatter_perf \
        alltoall_perf gather_perf scatter_perf; do
        RCOLL_STAGE_CHUNK=1048576 ok_run "$p --memtype cuda, RCOLL_STAGE_CHUNK=1M, 3 ranks on one GPU" \
            3 "$p" -b 8 -e 16M -f 16 -n 3 -w 1 -d float,half -o sum,max -r -1 --memtype cuda --ranks-per-gpu 3
    done
    # CUDA IPC (RCOLL_CUDA_IPC=1): every datatype x op on 2-4 ranks sharing the GPU, and the
    # other collectives it runs, every root.
    for n in 2 3 4; do
        RCOLL_CUDA_IPC=1 ok_run "all_reduce_perf --memtype cuda, RCOLL_CUDA_IPC=1, $n ranks on one GPU" \
            $n all_reduce_perf -b 8 -e 4M -f 16 -n 3 -w 1 -d all -o all --memtype cuda --ranks-per-gpu $n
    done
    # The one-kernel all-reduce (one-shot to 64 KiB, two-shot to 2 MiB), allowed on the shared GPU
    for n in 2 4; do
        RCOLL_CUDA_IPC=1 RCOLL_CUDA_IPC_ONESHOT_SHARED=1 ok_run "all_reduce_perf --memtype cuda, one-kernel all-reduce, $n ranks on one GPU" \
            $n all_reduce_perf -b 8 -e 4M -f 8 -n 3 -w 1 -d all -o all --memtype cuda --ranks-per-gpu $n
    done
    for p in reduce_perf reduce_scatter_perf all_gather_perf broadcast_perf alltoall_perf \
        gather_perf scatter_perf; do
        RCOLL_CUDA_IPC=1 ok_run "$p --memtype cuda, RCOLL_CUDA_IPC=1, 3 ranks on one GPU" 3 "$p" \
            -b 8 -e 4M -f 16 -n 3 -w 1 -d all -o all -r -1 --memtype cuda --ranks-per-gpu 3
    done
}
[ "$mode" = table ] || checks
# The table: one run per memory kind, the same flags.
table() {
    timeout 580 "$run" -q --no-prefix -n 4 --timeout 550 "$build/bench/all_reduce_perf" \
        -b 8 -e "${GPU_PERF_MAX:-256M}" -f 4 -n 10 -w 3 --ranks-per-gpu 4 "$@" >"$TMP/t.out" 2>&1 || return 1
    grep -q 'Out of bounds values : 0 OK' "$TMP/t.out" || return 1
    grep -E '^ +[0-9]+ +[0-9]+ +float' "$TMP/t.out" | awk '{print $1, $6, $8}'
}
if [ "$mode" = checks ]; then
    echo "$pass passed, $fail failed, 0 skipped"
    [ "$fail" = 0 ]
    exit
fi
if table --memtype host >"$TMP/host" && table --memtype cuda >"$TMP/cuda" &&
    RCOLL_STAGE_CHUNK=4194304 table --memtype cuda >"$TMP/pipe" &&
    RCOLL_CUDA_IPC=1 table --memtype cuda >"$TMP/ipc"; then
    grep -E '#  Rank' "$TMP/t.out" | head -4
    echo "all_reduce_perf, 4 ranks on one GPU, out of place: busbw (GB/s) with host buffers,"
    echo "CUDA buffers staged, staged in 4 MiB chunks (RCOLL_STAGE_CHUNK), over CUDA IPC"
    echo "(RCOLL_CUDA_IPC=1), and the time of each (us); ratios to the host buffers' busbw"
    printf '%12s %8s %8s %8s %8s %9s %9s %9s %9s %6s %6s %6s\n' bytes host stage chunk ipc \
        host_us stage_us chunk_us ipc_us stg chk ipc
    paste -d' ' "$TMP/host" "$TMP/cuda" "$TMP/pipe" "$TMP/ipc" | awk '{
        h = $3; r1 = h > 0 ? $6 / h : 0; r2 = h > 0 ? $9 / h : 0; r3 = h > 0 ? $12 / h : 0;
        printf "%12d %8.2f %8.2f %8.2f %8.2f %9.2f %9.2f %9.2f %9.2f %6.2f %6.2f %6.2f\n",
               $1, $3, $6, $9, $12, $2, $5, $8, $11, r1, r2, r3}'
    pass=$((pass + 1))
else
    echo "FAIL the bandwidth table"
    tail -20 "$TMP/t.out"
    fail=$((fail + 1))
fi
# The one-kernel all-reduce's times on the shared GPU (its ranks' kernels wait for each other,
# so without MPS they run by the GPU's time slices: an upper bound of what separate GPUs give).
if RCOLL_CUDA_IPC=1 RCOLL_CUDA_IPC_ONESHOT_SHARED=1 GPU_PERF_MAX=4M table --memtype cuda >"$TMP/one"; then
    echo "one-kernel all-reduce (RCOLL_CUDA_IPC_ONESHOT_SHARED=1), 4 ranks on one GPU: bytes,"
    echo "time (us), busbw (GB/s)"
    awk '{printf "%12d %9.2f %8.2f\n", $1, $2, $3}' "$TMP/one"
    pass=$((pass + 1))
else
    echo "FAIL the one-kernel all-reduce's times"
    tail -20 "$TMP/t.out"
    fail=$((fail + 1))
fi
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
