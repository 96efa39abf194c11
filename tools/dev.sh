#!/usr/bin/env bash
# tools/dev.sh - the two commands of the README, usable on a fresh Debian 12 machine:
#   tools/dev.sh bench   build rcoll and run all_reduce_perf across 4 local ranks
#   tools/dev.sh test    build rcoll (release + ASan/UBSan) and run the whole test suite (its
#                        fuzz suite makes a clang build for the libFuzzer targets), then the
#                        unit and coll suites in a build with every optional dependency off
#   tools/dev.sh summary DIR...  the closing summary of `test` for these build dirs' test logs
# Installs the Debian packages it needs with apt-get when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=(meson ninja-build gcc pkg-config libc6-dev iproute2 libhwloc-dev libopenmpi-dev openmpi-bin
    libibverbs-dev librdmacm-dev python3 python3-numpy python3-torch
    python3-matplotlib clang libclang-rt-14-dev)
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

# Tiers this project's CI machines can run: under CI=true a skip of one of these suites is a
# failure (the machine lost what the tier needs).  Later tiers (torch, gpu-compile) go here.
ci_tiers=(rdma multinode python torch fuzz)

# The third build: every feature option in meson_options.txt (read now, so an option that is
# added or removed needs no change here) disabled.
min_opts() {
    local f
    for f in meson.options meson_options.txt; do
        [ -f "$f" ] || continue
        sed -n "s/^option('\([a-z_0-9]*\)', *type: *'feature'.*/-D\1=disabled/p" "$f"
    done
}

# summary DIR...: one line per skipped test ("skipped: DIR SUITE/NAME") and per failed one
# (a CI tier's skip among them, saying why), then exactly one
# "tests: N passed, M failed, K skipped" (CI parses it).
summary() {
    CI_TIERS="${ci_tiers[*]}" python3 - "$@" <<'PY'
import json, os, sys
ci = os.environ.get("CI") == "true"
tiers = os.environ.get("CI_TIERS", "").split()
ok = fail = skip = 0
for d in sys.argv[1:]:
    log = os.path.join(d, "meson-logs", "testlog.json")
    try:
        lines = open(log).read().splitlines()
    except OSError as e:
        print(f"failed: {d}: no test log ({e.strerror}): meson test did not run to the end")
        fail += 1
        continue
    for line in lines:
        r = json.loads(line)
        # "project:suite / name", "project:suite1+suite2 / name" for several
        head, _, name = r["name"].partition(" / ")
        suite = head.split(":", 1)[-1]
        ci_tier = next((t for t in suite.split("+") if t in tiers), None)
        res = r["result"]
        if res in ("OK", "EXPECTEDFAIL"):
            ok += 1
        elif res == "SKIP" and ci and ci_tier:
            fail += 1
            print(f"failed: {d} {suite}/{name}: skipped under CI, but CI machines can run the "
                  f"{ci_tier} tier; its log says what this machine lacks")
        elif res == "SKIP":
            skip += 1
            print(f"skipped: {d} {suite}/{name}")
        else:
            fail += 1
            print(f"failed: {d} {suite}/{name} ({res})")
print(f"tests: {ok} passed, {fail} failed, {skip} skipped")
sys.exit(1 if fail else 0)
PY
}

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
    mapfile -t min < <(min_opts)
    configure build-min "${min[@]}" "${werror[@]}"
    for dir in build build-asan build-min; do
        echo "== meson test -C $dir"
        set +e
        if [ "$dir" = build-min ]; then
            # pure logic and the collectives up to 4 ranks (the full matrix ran in the other
            # two builds), not the slow launcher tiers: CI's time budget
            TEST_MAX_RANKS=4 meson test -C "$dir" --no-rebuild --print-errorlogs \
                --suite unit --suite coll
        else
            meson test -C "$dir" --no-rebuild --print-errorlogs
        fi
        set -e
    done
    summary build build-asan build-min
    ;;
summary)
    shift
    summary "$@"
    ;;
*)
    echo "usage: tools/dev.sh bench [all_reduce_perf flags] | tools/dev.sh test | tools/dev.sh summary DIR..." >&2
    exit 2
    ;;
esac
