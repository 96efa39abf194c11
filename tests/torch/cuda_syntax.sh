#!/usr/bin/env bash
# cuda_syntax.sh - the torch backend's CUDA half (python/rcoll/_torch_c.cpp with
# RCOLL_TORCH_CUDA) compiled for a syntax and type check against this interpreter's torch 2.x
# headers and CUDA's headers, on a machine with neither a GPU nor a CUDA torch (suite torch;
# CI runs it inside tools/torch-root, with the host's CUDA toolkit bound in).  It checks that
# the code the GPU machine will build compiles (the c10 CUDA stream, event and guard calls,
# rcoll's stream API); it runs nothing: tests/gpu/torch_backend_cuda.py does, on a GPU.
#
#   tests/torch/cuda_syntax.sh [CUDA_INCLUDE_DIR]   (default $CUDA_HOME/include, else
#                                                   /usr/local/cuda/include)
# Exit 0 compiled; 1 a compile error (printed); 77 no torch 2.x, no CUDA headers or no C++
# compiler (said).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
inc=${1:-${CUDA_HOME:+$CUDA_HOME/include}}
inc=${inc:-/usr/local/cuda/include}
if ! paths=$("$PY" - <<'PY' 2>&1
import sys, sysconfig
import torch
from torch.utils import cpp_extension as e
if int(torch.__version__.split(".")[0]) < 2:
    print(f"torch {torch.__version__}: the CUDA half needs torch 2.x"); sys.exit(3)
print(sysconfig.get_paths()["include"])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
for p in e.include_paths():
    print(p)
PY
); then
    echo "SKIP: $(echo "$paths" | tail -n 1)"
    exit 77
fi
if [ ! -f "$inc/cuda_runtime_api.h" ]; then
    echo "SKIP: no CUDA headers at $inc (give the directory, or set CUDA_HOME)"
    exit 77
fi
CXX=${CXX:-c++}
command -v "$CXX" >/dev/null || { echo "SKIP: no C++ compiler ($CXX)"; exit 77; }
mapfile -t p <<<"$paths"
args=(-std=c++17 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter
      "-D_GLIBCXX_USE_CXX11_ABI=${p[1]}" -DTORCH_EXTENSION_NAME=_torch_c
      -DTORCH_API_INCLUDE_EXTENSION_H -DRCOLL_TORCH_CUDA -DRCOLL_TORCH_CUDA_REQUIRED
      -isystem "${p[0]}" -I "$ROOT/include")
for d in "${p[@]:2}"; do args+=(-isystem "$d"); done
# A torch built without CUDA (Debian's) ships c10's CUDA headers but not the one its CUDA
# build generates; the check supplies what that one says (shared libraries).
stub=""
found=0
for d in "${p[@]:2}"; do [ -f "$d/c10/cuda/impl/cuda_cmake_macros.h" ] && found=1; done
if [ "$found" = 0 ]; then
    stub=$(mktemp -d)
    mkdir -p "$stub/c10/cuda/impl"
    echo '#define C10_CUDA_BUILD_SHARED_LIBS' >"$stub/c10/cuda/impl/cuda_cmake_macros.h"
    args+=(-isystem "$stub")
fi
args+=(-isystem "$inc")
t0=$SECONDS
"$CXX" "${args[@]}" "$ROOT/python/rcoll/_torch_c.cpp"
rc=$?
[ -n "$stub" ] && rm -rf "$stub"
tv=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)
if [ "$rc" = 0 ]; then
    echo "ok   the CUDA half compiles against torch $tv and $inc ($((SECONDS - t0)) s)"
    echo "1 passed, 0 failed, 0 skipped"
    exit 0
fi
echo "FAIL the CUDA half does not compile against torch $tv and $inc"
echo "0 passed, 1 failed, 0 skipped"
exit 1
