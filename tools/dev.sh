#!/usr/bin/env bash
# tools/dev.sh - the two commands of the README, usable on a fresh Debian 12 machine:
#   tools/dev.sh bench   build rcoll and run all_reduce_perf across 4 local ranks
#   tools/dev.sh test    build rcoll (release + ASan/UBSan) and run the whole test suite in
#                        the release build (its fuzz suite makes a clang build for the
#                        libFuzzer targets), the suites that exercise memory handling under
#                        ASan/UBSan (asan_suites), then the unit and coll suites in a build
#                        with every optional dependency off; the fail suites, which mostly
#                        wait for deadlines, run beside the others; then the torch suite on
#                        torch 2.6 inside tools/torch-root (a Debian 13 root, built once and
#                        cached); ends with a per-suite time table and the summary
#   tools/dev.sh summary DIR...  the closing summary of `test` for these build dirs' test logs
#   tools/dev.sh times DIR...    the per-suite time table of these build dirs' test logs
# Installs the Debian packages it needs with apt-get when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=(meson ninja-build gcc pkg-config libc6-dev iproute2 libhwloc-dev libopenmpi-dev openmpi-bin
    libpmix-dev libibverbs-dev librdmacm-dev python3 python3-numpy python3-torch
    python3-matplotlib clang libclang-rt-14-dev debootstrap
    slurm-wlm munge)  # the multinode suite's Slurm cluster (tools/slurm-cluster)
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

# Under ASan/UBSan: the suites that exercise memory handling (parsers, transports, schedules,
# every collective's buffers, failures and misuse, the MPI layer, the plugin, the GPU staging
# logic against the scripted driver).  Not the long performance-shaped or launcher tiers
# (perf binaries, selector check, torch, python, multinode, chaos, soak, the gpu suite's
# scripts): they run in the release build, and the fuzz suite is sanitized by itself.
asan_suites=(unit coll fail mpi plugin)
# Wait-bound suites (a rank that dies or stalls, and the deadline that names it; links capped
# by tbf or taken down in namespaces; the chaos campaign's kills and deadlines; the soak's
# paced operations: mostly sleeping, 10-30% of one core): they run beside the CPU-bound
# suites, one at a time, not after them.  The ASan build runs those of its suites only.
wait_suites=(fail multinode chaos soak)

# torch 2.x: the torch suite again inside tools/torch-root (Debian 13's torch 2.6), in
# build-torch2, configured there with every optional dependency off and the compiled backend
# left to rcoll.torch's own build on import (the host's suite runs meson's build of it, on
# torch 1.13).  Under CI a root that cannot be built fails the run (no test log: the summary
# says so); elsewhere it is a skip, said.
torch2_dirs=()
torch2_start() {
    torch2_log=$PWD/build-torch2-root.log
    tools/torch-root --build >"$torch2_log" 2>&1 &
    torch2_pid=$!
}
torch2_test() {
    echo "== meson test -C build-torch2 (torch, inside tools/torch-root: torch 2.6)"
    local rc=0
    wait "$torch2_pid" || rc=$?
    if [ "$rc" = 77 ] && [ "${CI:-}" != "true" ]; then
        echo "skipped: build-torch2 torch: $(tail -n 1 "$torch2_log")"
        return 0
    fi
    torch2_dirs=(build-torch2)
    if [ "$rc" != 0 ]; then
        echo "tools/torch-root --build failed (exit $rc):"
        tail -n 20 "$torch2_log"
        return 0
    fi
    # the host's CUDA headers, for the check that the backend's CUDA half compiles
    local binds=()
    [ -f /usr/local/cuda/include/cuda_runtime_api.h ] && binds=(--bind /usr/local/cuda)
    tools/torch-root --env "CI=${CI:-}" "${binds[@]}" -- bash -c '
        set -e
        [ -f build-torch2/build.ninja ] || meson setup build-torch2 "$@" >/dev/null
        meson compile -C build-torch2 rcoll:shared_library rcoll-run >/dev/null
        export RCOLL_TORCH_BUILD_DIR=$PWD/build-torch2/torch_c  # built fresh by each run
        meson test -C build-torch2 --no-rebuild --print-errorlogs --suite torch' bash \
        -Dtorch=disabled -Dcuda=disabled -Dverbs=disabled -Dhwloc=disabled -Dmpi=disabled \
        -Dnccl_plugin=disabled -Dfuzz=disabled "${werror[@]}" || true
}

# times DIR...: per build dir and suite, how many tests and their seconds (longest first),
# then the ten longest tests; from meson's test logs, so that growth is visible in every run.
times() {
    python3 - "$@" <<'PY'
import json, os, sys
rows = []
for d in sys.argv[1:]:
    logs = [os.path.join(d, "meson-logs", f)
            for f in ("testlog.json", "waitlog.json", "timinglog.json")]
    try:
        lines = [l for f in logs if os.path.exists(f) for l in open(f)]
        for line in lines:
            r = json.loads(line)
            head, _, name = r["name"].partition(" / ")
            rows.append((d, head.split(":", 1)[-1], name, float(r.get("duration") or 0)))
    except OSError:
        pass
per = {}
for d, suite, name, t in rows:
    k = (d, suite)
    n, s = per.get(k, (0, 0.0))
    per[k] = (n + 1, s + t)
print("== test time per suite (seconds, each test's own duration)")
print(f"{'build':<12} {'suite':<16} {'tests':>5} {'seconds':>8}")
for d in sys.argv[1:]:
    tot = 0.0
    for (dd, suite), (n, s) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        if dd != d:
            continue
        print(f"{d:<12} {suite:<16} {n:>5} {s:>8.1f}")
        tot += s
    print(f"{d:<12} {'(all)':<16} {sum(n for (dd, _), (n, _) in per.items() if dd == d):>5} {tot:>8.1f}")
print("== the ten longest tests")
for d, suite, name, t in sorted(rows, key=lambda r: -r[3])[:10]:
    print(f"{t:8.1f}  {d} {suite}/{name}")
PY
}

# summary DIR...: one line per skipped test ("skipped: DIR SUITE/NAME"), per passing test
# whose own checks partly skipped ("skipped checks: DIR SUITE/NAME: K (first: why)", from the
# test's closing "N passed, M failed, K skipped" line) and per failed one (a CI tier's skip
# among them, saying why), the total of those inner skips, then exactly one
# "tests: N passed, M failed, K skipped" (CI parses it).
summary() {
    CI_TIERS="${ci_tiers[*]}" python3 - "$@" <<'PY'
import json, os, re, sys
ci = os.environ.get("CI") == "true"
tiers = os.environ.get("CI_TIERS", "").split()
ok = fail = skip = 0
inner = inner_tests = 0  # checks skipped inside tests that passed
for d in sys.argv[1:]:
    # testlog.json: the main run; waitlog.json: the wait-bound suites run beside it;
    # timinglog.json: the timing checks, run alone at the end
    log = os.path.join(d, "meson-logs", "testlog.json")
    try:
        lines = open(log).read().splitlines()
    except OSError as e:
        print(f"failed: {d}: no test log ({e.strerror}): meson test did not run to the end")
        fail += 1
        continue
    for extra in ("waitlog.json", "timinglog.json"):
        wait = os.path.join(d, "meson-logs", extra)
        if os.path.exists(wait):
            lines += open(wait).read().splitlines()
    for line in lines:
        r = json.loads(line)
        # "project:suite / name", "project:suite1+suite2 / name" for several
        head, _, name = r["name"].partition(" / ")
        suite = head.split(":", 1)[-1]
        ci_tier = next((t for t in suite.split("+") if t in tiers), None)
        res = r["result"]
        if res in ("OK", "EXPECTEDFAIL"):
            ok += 1
            # A passing test whose own checks partly skipped says so in its closing line
            # ("N passed, M failed, K skipped", tests/common/check.c and the scripts): name it
            out = r.get("stdout") or ""
            counts = re.findall(r"(\d+) passed, (\d+) failed, (\d+) skipped", out)
            if counts and int(counts[-1][2]) > 0:
                k = int(counts[-1][2])
                inner += k
                inner_tests += 1
                first = next((l for l in out.splitlines() if l.startswith("SKIP")), "")
                print(f"skipped checks: {d} {suite}/{name}: {k}" + (f" (first: {first[5:]})" if first else ""))
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
if inner:
    print(f"checks skipped inside passing tests: {inner} in {inner_tests} tests (named above)")
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
    t_start=$SECONDS
    need_pkgs+=("${vm_pkgs[@]}")
    install_deps
    t_deps=$SECONDS
    # torch 2.x (tools/torch-root): the root is built beside the host builds (mostly download)
    torch2_start
    configure build "${werror[@]}"
    # the release build's kernels (nvcc: ~1 min a build; its output ignores the C flags)
    fatbin=()
    [ -f build/src/cuda/rcoll_kernels.fatbin ] &&
        fatbin=(-Dkernels_fatbin="$PWD/build/src/cuda/rcoll_kernels.fatbin")
    configure build-asan -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
        -Db_lundef=false "${fatbin[@]}" "${werror[@]}"
    mapfile -t min < <(min_opts)
    configure build-min "${min[@]}" "${werror[@]}"
    t_built=$SECONDS
    set +e
    # The wait-bound suites of the release and ASan builds, beside everything else; their
    # logs go to their own directories (meson test -C DIR writes DIR/meson-logs).
    wait_args=() asan_wait_args=()
    for s in "${wait_suites[@]}"; do
        wait_args+=(--suite "$s")
        [[ " ${asan_suites[*]} " == *" $s "* ]] && asan_wait_args+=(--suite "$s")
    done
    (
        meson test -C build --no-rebuild --print-errorlogs --logbase waitlog \
            "${wait_args[@]}" >build/meson-logs/wait-suites.txt 2>&1
        meson test -C build-asan --no-rebuild --print-errorlogs --logbase waitlog \
            "${asan_wait_args[@]}" >build-asan/meson-logs/wait-suites.txt 2>&1
    ) &
    wait_pid=$!
    # the timing checks (suite timing: auto against forced algorithms) run alone at the end:
    # beside the wait-bound suites' torch and Slurm jobs their medians were noise (CI saw
    # auto 1.9x the best forced at 256 KiB over TCP, the same build passing alone)
    no_wait=(--no-suite timing)
    for s in "${wait_suites[@]}"; do no_wait+=(--no-suite "$s"); done
    echo "== meson test -C build (all suites; ${wait_suites[*]} beside it)"
    meson test -C build --no-rebuild --print-errorlogs "${no_wait[@]}"
    asan_args=()
    for s in "${asan_suites[@]}"; do
        [[ " ${wait_suites[*]} " == *" $s "* ]] || asan_args+=(--suite "$s")
    done
    echo "== meson test -C build-asan (${asan_suites[*]})"
    # the matrices up to 4 ranks: memory handling is the same at 9 (the release build ran 9)
    TEST_MAX_RANKS=4 meson test -C build-asan --no-rebuild --print-errorlogs "${asan_args[@]}"
    echo "== meson test -C build-min (unit, coll)"
    # pure logic and the collectives up to 4 ranks (the full matrix ran in the other
    # two builds), not the slow launcher tiers: CI's time budget
    TEST_MAX_RANKS=4 meson test -C build-min --no-rebuild --print-errorlogs \
        --suite unit --suite coll
    torch2_test
    wait "$wait_pid"
    echo "== meson test -C build (timing, alone)"
    meson test -C build --no-rebuild --print-errorlogs --logbase timinglog --suite timing
    echo "== meson test -C build (${wait_args[*]//--suite /}, run beside the others)"
    cat build/meson-logs/wait-suites.txt
    echo "== meson test -C build-asan (${asan_wait_args[*]//--suite /}, run beside the others)"
    cat build-asan/meson-logs/wait-suites.txt
    set -e
    times build build-asan build-min "${torch2_dirs[@]}"
    echo "== wall time: packages $((t_deps - t_start)) s, builds $((t_built - t_deps)) s, tests $((SECONDS - t_built)) s, all $((SECONDS - t_start)) s"
    summary build build-asan build-min "${torch2_dirs[@]}"
    ;;
times)
    shift
    times "$@"
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
