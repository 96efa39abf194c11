#!/usr/bin/env bash
# tools/dev.sh - the two commands of the README, usable on a fresh Debian 12 machine:
#   tools/dev.sh bench   build rcoll and run all_reduce_perf across 4 local ranks
#   tools/dev.sh test    build rcoll (release + ASan/UBSan) and run the whole test suite
# Installs the Debian packages it needs with apt-get when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=(meson ninja-build gcc pkg-config libc6-dev iproute2 libhwloc-dev libopenmpi-dev openmpi-bin
    libibverbs-dev librdmacm-dev)
# The rdma suite's Soft-RoCE VM (tools/rxe-vm also installs these, and downloads the kernel).
vm_pkgs=(qemu-system-x86 busybox-static cpio rdma-core ibverbs-utils ibverbs-providers kmod
    xz-utils)

install_deps() {
    local missing=()
    for p in "${need_pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "dev.sh: installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

configure() { # dir [meson options...]
    local dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >/dev/null
    fi
    ninja -C "$dir" >/dev/null
}

werror=()
[ "${CI:-}" = "true" ] && werror=(-Dwerror_ci=true)

case "${1:-}" in
bench)
    shift
    install_deps
    configure build "${werror[@]}"
    args=("$@")
    [ ${#args[@]} -eq 0 ] && args=(-b 8 -e 64M -f 4 -n 10)
    exec build/tools/rcoll-run -q --no-prefix -n "${RANKS:-4}" build/bench/all_reduce_perf "${args[@]}"
    ;;
test)
    need_pkgs+=("${vm_pkgs[@]}")
    install_deps
    configure build "${werror[@]}"
    configure build-asan -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
        -Db_lundef=false "${werror[@]}"
    total_ok=0
    total_fail=0
    for dir in build build-asan; do
        echo "== meson test -C $dir"
        set +e
        meson test -C "$dir" --no-rebuild --print-errorlogs
        set -e
        ok=$(python3 -c 'import json,sys
ok=fail=0
for line in open(sys.argv[1]):
    r=json.loads(line)
    if r["result"] in ("OK","EXPECTEDFAIL","SKIP"): ok+=1
    else: fail+=1
print(ok, fail)' "$dir/meson-logs/testlog.json")
        total_ok=$((total_ok + ${ok% *}))
        total_fail=$((total_fail + ${ok#* }))
    done
    echo "tests: $total_ok passed, $total_fail failed"
    [ "$total_fail" -eq 0 ]
    ;;
*)
    echo "usage: tools/dev.sh bench [all_reduce_perf flags] | tools/dev.sh test" >&2
    exit 2
    ;;
esac
