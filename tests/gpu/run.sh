#!/usr/bin/env bash
# run.sh - the GPU tier in one command, for a machine with an NVIDIA GPU and driver:
#
#   tests/gpu/run.sh [BUILD_DIR]        (default: build-gpu, configured here)
#
# configures BUILD_DIR with -Dcuda=enabled (nvcc and cuda.h from CUDA_HOME, CUDA_PATH,
# /usr/local/cuda or PATH), builds it and runs the meson suite gpu: today the device
# reduction kernels against the host kernels and their bandwidth (tests/gpu/test_kernels.c),
# and every blocking collective with device buffers staged through pinned host memory on 2-4
# processes sharing the GPU, with the staging's cost printed (tests/gpu/test_stage.c), and
# the stream-ordered collectives on 2-4 processes with kernels and copies around them on the
# same stream (tests/gpu/test_stream.c), and the perf binaries with --memtype cuda and the
# all-reduce bandwidth table, device next to host buffers (tests/gpu/test_perf.sh).
# It prints a short summary last (each test's verdict; the kernel/copy bandwidths, the
# staging time, the all-reduce table).
# Exit: 0 passed, 1 a build or a test failed, 77 skipped, with the reason: no /dev/nvidia0 or
# no loadable libcuda.so.1 (RCOLL_CUDA_LIB names another) on this machine.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
if [ ! -e /dev/nvidia0 ]; then
    echo "SKIP: no NVIDIA GPU on this machine (/dev/nvidia0 missing)"
    exit 77
fi
LIB=${RCOLL_CUDA_LIB:-libcuda.so.1}
if ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$LIB" 2>/dev/null &&
    ! ldconfig -p 2>/dev/null | grep -q "${LIB##*/}"; then
    echo "SKIP: no NVIDIA driver library ($LIB cannot be loaded)"
    exit 77
fi
if [ -f "$BUILD/build.ninja" ]; then
    meson configure "$BUILD" -Dcuda=enabled >/dev/null || exit 1
else
    meson setup "$BUILD" -Dcuda=enabled || exit 1
fi
ninja -C "$BUILD" || exit 1
meson test -C "$BUILD" --suite gpu --print-errorlogs -v
rc=$?
# The short summary, last: each test's verdict, and the numbers the targets are about
# (docs/gpu.md): kernel vs copy bandwidth, staged vs host time, the all-reduce table.
python3 - "$BUILD/meson-logs/testlog.json" <<'PY'
import json, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except OSError as e:
    sys.exit(f"no test log: {e}")
print("\n== GPU summary ==")
for r in rows:
    head = r["name"].split(" / ")[0]  # "rcoll:gpu", "rcoll:gpu+other"
    if "gpu" not in head.split(":", 1)[-1].split("+"):
        continue
    print(f"{r['name']:<28} {r['result']:<6} {r.get('duration', 0):7.1f} s")
    out = r.get("stdout", "") or ""
    keep = False
    for line in out.splitlines():
        if line.startswith(("device 0:", "bandwidth (", "allreduce 64 MiB", "all_reduce_perf, 4 ranks")):
            keep = True
        if keep and line.strip() and not line.startswith(("ok ", "FAIL", "#  Rank")):
            print("    " + line)
        if line.startswith(("  reduce+copy / memcpy", "allreduce 64 MiB")):
            keep = False
PY
[ "$rc" -eq 0 ] || exit 1
# meson test exits 0 when every test skipped: say so, with 77
if grep -q '"result": "SKIP"' "$BUILD/meson-logs/testlog.json" 2>/dev/null &&
    ! grep -q '"result": "OK"' "$BUILD/meson-logs/testlog.json"; then
    echo "SKIP: the gpu suite skipped (see above)"
    exit 77
fi
exit 0
