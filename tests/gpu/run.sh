#!/usr/bin/env bash
# run.sh - the GPU tier in one command of bounded time, for a machine with an NVIDIA GPU:
#
#   tests/gpu/run.sh [--budget SECONDS] [--out DIR] [--build DIR] [BUILD_DIR]
#   tests/gpu/run.sh --preflight-only [--out DIR]     (what meson's gpu_script_preflight runs)
#   tests/gpu/run.sh --dry-run [--budget SECONDS] [--out DIR]    (plumbing check, no GPU used)
#
# 1. Preflight, printed and kept: the GPU (nvidia-smi: name, driver, compute mode), the driver's
#    CUDA version against what the build needs (the CUDA major of nvcc's cuda.h), container
#    runtime hints, /dev/shm, the tools (nvcc, meson, ninja, cc, python3 and its torch). No
#    /dev/nvidia0 or no loadable libcuda.so.1 (RCOLL_CUDA_LIB): "SKIP: ...", exit 77, in
#    seconds, nothing built.  Something required missing: "STOP: ..." and exit 1 at once.
# 2. Build BUILD_DIR (default build-gpu) with -Dcuda=enabled -Dmpi=disabled -Dpython=disabled
#    (hwloc if present, no sanitizer), only the targets the steps run.
# 3. The steps, most valuable first, each under `timeout` with its share of the budget (default
#    420 s, build included) and RCOLL_TIMEOUT derived from that share, so a hang fails inside
#    the budget; a step that no longer fits is "not run: budget":
#      gpu_kernels  the driver binding and the reduction kernels (tests/gpu/test_kernels.c)
#      gpu_stage    every collective staged and over CUDA IPC, 2-4 ranks sharing the GPU
#      gpu_stream   the stream-ordered collectives (tests/gpu/test_stream.c)
#      gpu_table    the all-reduce bandwidth table to 64 MiB (tests/gpu/test_perf.sh table)
#      gpu_torch    torch CUDA tensors through librcoll (tests/gpu/torch_cuda.py), when
#                   python3's torch has CUDA
#      gpu_torch_backend  the torch backend "rcoll" on CUDA tensors, built here with its CUDA
#                   half: collectives in stream order, DDP against gloo on CPU copies, 2 and 4
#                   ranks (tests/gpu/torch_backend_cuda.py), when python3's torch has CUDA
#      gpu_perf_checks  every perf binary's own check on device memory (test_perf.sh checks),
#                   only if the budget leaves room (not a core step)
# 4. From an EXIT/TERM/INT trap, so a killed run still reports: the summary printed last and
#    written to DIR (default gpu-results): summary.md (ready for docs/benchmarks.md),
#    results.json, preflight.txt, run.log (everything printed).
#
# On a lent GPU machine (docs/gpu.md, "Running the GPU tests": one command of about 7 minutes):
#   tests/gpu/run.sh --out "$OUT"                  (timeout_s 540 or more)
#
# Exit: 0 every step that ran passed and every core step ran; 1 a build, a step or a check
# failed, or a core step did not fit the budget; 77 no GPU or driver here (preflight printed).
# --dry-run runs the same plumbing (budget, timeouts, trap, reports) with sleeps for steps and
# no build; every report says DRY RUN.  It checks this script, never a GPU.  Test knobs, for
# --dry-run only: RCOLL_GPU_DRY_SLEEP (seconds per step, default 1), RCOLL_GPU_DRY_HANG=STEP
# (that step hangs until its timeout), RCOLL_GPU_DRY_FAIL=STEP (that step fails).
# The functions below run from traps and from `bash -c` under timeout, which shellcheck
# cannot follow (SC2317: "unreachable").
# shellcheck disable=SC2317
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1

usage() {
    sed -n '3,5p' "$0" | sed 's/^# *//'
}
BUDGET=420 OUT=gpu-results BUILD=build-gpu DRY=0 PREFLIGHT_ONLY=0
while [ $# -gt 0 ]; do
    case $1 in
    --budget | --out | --build)
        [ $# -ge 2 ] || { usage >&2; exit 2; }
        case $1 in --budget) BUDGET=$2 ;; --out) OUT=$2 ;; --build) BUILD=$2 ;; esac
        shift 2
        ;;
    --budget=*) BUDGET=${1#*=}; shift ;;
    --out=*) OUT=${1#*=}; shift ;;
    --build=*) BUILD=${1#*=}; shift ;;
    --dry-run) DRY=1; shift ;;
    --preflight-only) PREFLIGHT_ONLY=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD=$1; shift ;; # the old interface: run.sh [BUILD_DIR]
    esac
done
case $BUDGET in
'' | *[!0-9]*) echo "run.sh: --budget takes whole seconds, not '$BUDGET'" >&2; exit 2 ;;
esac
if [ "$BUDGET" -lt 10 ]; then
    echo "run.sh: a budget of $BUDGET s leaves no time for anything (10 s at least)" >&2
    exit 2
fi

START=$SECONDS
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
RESERVE=5 # seconds kept for the summary
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT/summary.md" "$OUT/results.json" "$OUT/preflight.txt" "$OUT/run.log"
TMP=$(mktemp -d) || exit 1
# Everything printed also goes to run.log.  tee ignores the signals that stop the run (a
# `timeout` around this script signals its whole process group) and outlives a reader that
# went away (-p), so the trap's summary still reaches run.log; the script ignores SIGPIPE.
tee_p=-p
tee -p </dev/null >/dev/null 2>&1 || tee_p=""
exec > >(trap '' TERM INT HUP PIPE; exec tee $tee_p -a "$OUT/run.log") 2>&1
TEE_PID=$!
trap '' PIPE

STEPS=()         # the steps' names, in order
STEP_T0=$SECONDS # when the step in flight started
STEP_JOB=""      # its background job (the tee at the end of its pipeline)
declare -A VERDICT SECS RC LIMIT
CUR_STEP=""      # the step in flight
STOPPED_BY=""    # the signal that stopped the run
EXIT_CODE=""     # set before a deliberate exit
DRY_NOTE="DRY RUN (tests/gpu/run.sh --dry-run): a check of the script's plumbing; no GPU test ran, no number below is a GPU result"

elapsed() { echo $((SECONDS - START)); }

# ---- preflight --------------------------------------------------------------------------
PF="$TMP/preflight"
: >"$PF"
MISSING=() # sentences: something required is missing
pf() { printf '%-18s %s\n' "$1:" "$2" | tee -a "$PF"; }
first_line() { "$@" 2>&1 | head -n 1; }

GPU_NAME="" DRIVER="" DRIVER_CUDA="" TORCH_CUDA=0 NO_GPU=""
preflight() {
    echo "== preflight"
    [ "$DRY" = 1 ] && pf "mode" "$DRY_NOTE"
    pf "date" "$STARTED"
    pf "commit" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    pf "host" "$(uname -srm), $(nproc 2>/dev/null || echo '?') CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null) memory"
    # Container runtime hints: gVisor reports kernel 4.4.0; Firecracker kernels here say -fc-.
    local hints=() k
    k=$(uname -r)
    case $k in 4.4.0*) hints+=("kernel 4.4.0 (gVisor?)") ;; *-fc-*) hints+=("Firecracker kernel") ;; esac
    [ -f /.dockerenv ] && hints+=("/.dockerenv (Docker)")
    [ -f /run/.containerenv ] && hints+=("/run/.containerenv (Podman)")
    if command -v systemd-detect-virt >/dev/null 2>&1; then
        hints+=("systemd-detect-virt: $(systemd-detect-virt 2>/dev/null || echo none)")
    fi
    grep -qsw 'hypervisor' /proc/cpuinfo && hints+=("CPU flag hypervisor (a VM)")
    hints+=("PID 1: $(cat /proc/1/comm 2>/dev/null || echo '?')" "user: $(id -un 2>/dev/null || id -u)")
    local joined
    joined=$(IFS=';'; echo "${hints[*]}")
    pf "runtime hints" "${joined//;/; }"
    pf "budget" "$BUDGET s in all (build included), out: $OUT, build: $BUILD"

    # The GPU and its driver
    if [ -e /dev/nvidia0 ]; then
        pf "/dev/nvidia*" "$(cd /dev && echo nvidia*)"
    else
        pf "/dev/nvidia0" "missing"
        NO_GPU="no NVIDIA GPU on this machine (/dev/nvidia0 missing)"
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        local q
        q=$(timeout 20 nvidia-smi --query-gpu=index,name,driver_version,compute_mode,memory.total,pci.bus_id \
            --format=csv,noheader 2>&1)
        pf "nvidia-smi" "${q:-no answer}"
        pf "driver's CUDA" "$(timeout 20 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -n 1 || true)"
        GPU_NAME=$(echo "$q" | head -n 1 | cut -d, -f2 | sed 's/^ *//')
        DRIVER=$(echo "$q" | head -n 1 | cut -d, -f3 | sed 's/^ *//')
        case $q in
        *Exclusive_Process* | *Prohibited*)
            pf "warning" "compute mode $(echo "$q" | head -n 1 | cut -d, -f4): the 2-4 rank steps need ranks sharing the GPU (Default)" ;;
        esac
    else
        pf "nvidia-smi" "not found"
    fi
    local lib=${RCOLL_CUDA_LIB:-libcuda.so.1} v
    if command -v python3 >/dev/null 2>&1; then
        v=$(timeout 20 python3 -c '
import ctypes, sys
try:
    l = ctypes.CDLL(sys.argv[1])
except OSError as e:
    print("unloadable:", e); sys.exit(0)
v = ctypes.c_int(0)
print(v.value if l.cuDriverGetVersion(ctypes.byref(v)) == 0 else "unloadable: cuDriverGetVersion failed")
' "$lib" 2>&1)
    else
        v="unloadable: no python3 to load it with"
    fi
    case $v in
    [0-9]*)
        DRIVER_CUDA=$v
        pf "libcuda" "$lib loads; cuDriverGetVersion: $((v / 1000)).$((v % 1000 / 10))" ;;
    *)
        pf "libcuda" "$lib: $v"
        [ -z "$NO_GPU" ] && NO_GPU="no NVIDIA driver library ($lib cannot be loaded)" ;;
    esac

    # The CUDA toolkit, found as meson finds it (CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH)
    local nvcc="" d
    for d in ${CUDA_HOME:+"$CUDA_HOME"} ${CUDA_PATH:+"$CUDA_PATH"} /usr/local/cuda; do
        [ -x "$d/bin/nvcc" ] && { nvcc=$d/bin/nvcc; break; }
    done
    [ -z "$nvcc" ] && nvcc=$(command -v nvcc 2>/dev/null || true)
    if [ -n "$nvcc" ]; then
        local cuda_h need
        local threads=""
        if "$nvcc" --help 2>/dev/null | grep -q -- '--threads'; then threads=", has --threads"; fi
        pf "nvcc" "$nvcc: $("$nvcc" --version 2>&1 | grep -o 'release [0-9.]*, V[0-9.]*' || echo '?')$threads"
        cuda_h=$(cd "$(dirname "$nvcc")/.." && pwd -P)/include/cuda.h
        need=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$cuda_h" 2>/dev/null | head -n 1)
        if [ -z "$need" ]; then
            pf "cuda.h" "missing ($cuda_h)"
            MISSING+=("cuda.h is missing beside nvcc ($cuda_h): the build needs it")
        else
            need=$(((need / 1000) * 1000))
            if [ -n "$DRIVER_CUDA" ] && [ "$DRIVER_CUDA" -lt "$need" ]; then
                pf "driver vs build" "too old: the driver gives CUDA $((DRIVER_CUDA / 1000)).$((DRIVER_CUDA % 1000 / 10)), the kernels built by this nvcc need $((need / 1000)).0 or newer"
                MISSING+=("the driver (CUDA $((DRIVER_CUDA / 1000)).$((DRIVER_CUDA % 1000 / 10))) is older than this nvcc's CUDA $((need / 1000)): rcoll's kernels would not load (use an older CUDA_HOME or a newer driver)")
            else
                pf "driver vs build" "the build needs a driver of CUDA $((need / 1000)).0 or newer (cuda.h: $cuda_h)${DRIVER_CUDA:+: ok}"
            fi
        fi
    else
        pf "nvcc" "not found (CUDA_HOME, CUDA_PATH, /usr/local/cuda/bin, PATH)"
        MISSING+=("nvcc is not found (CUDA_HOME, CUDA_PATH, /usr/local/cuda/bin, PATH): the kernels cannot be built")
    fi
    local t
    for t in meson ninja python3 cc timeout; do
        if command -v "$t" >/dev/null 2>&1; then
            v=$(first_line "$t" --version)
            pf "$t" "$(command -v "$t"): $v"
        else
            pf "$t" "not found"
            MISSING+=("$t is not on PATH: the build and the steps need it")
        fi
    done
    if command -v python3 >/dev/null 2>&1; then
        v=$(timeout 60 python3 -c '
import torch
print(torch.__version__, "CUDA", torch.version.cuda, "available" if torch.cuda.is_available() else "not available")
' 2>&1 | tail -n 1)
        pf "torch" "$v"
        case $v in *" available") TORCH_CUDA=1 ;; esac
    fi
    pf "hwloc" "$(pkg-config --modversion hwloc 2>/dev/null || echo 'not found (optional: sysfs topology instead)')"
    for t in cuobjdump compute-sanitizer; do
        if command -v "$t" >/dev/null 2>&1; then
            pf "$t" "$(command -v "$t") (present; not used by the steps)"
        else
            pf "$t" "not found (optional)"
        fi
    done
    if [ -d /dev/shm ]; then
        pf "/dev/shm" "$(df -h /dev/shm 2>/dev/null | awk 'NR == 2 {print $2 " size, " $4 " free"}')$( [ -w /dev/shm ] || echo ', NOT writable')"
        [ -w /dev/shm ] || MISSING+=("/dev/shm is not writable: ranks on one host share memory through it")
    else
        pf "/dev/shm" "missing"
        MISSING+=("/dev/shm is missing: ranks on one host share memory through it")
    fi
    cp "$PF" "$OUT/preflight.txt"
}

# ---- the steps ----------------------------------------------------------------------------
# keys NAME FILE: the lines of a step's output that the summary keeps (verdicts, numbers).
keys() {
    case $1 in
    build) grep -E '^(build:|ninja: |FAILED|.*error:)' "$2" | tail -n 12 ;;
    gpu_kernels)
        awk '/^device 0:/ || /^(FAIL|SKIP)/ || /passed, .* failed/ {print; next}
             /^bandwidth \(/ {k = 1} k {print} /reduce\+copy \/ memcpy/ {k = 0}' "$2" | head -n 40 ;;
    gpu_table) grep -vE '^ok ' "$2" | head -n 60 ;;
    *) grep -E '^(FAIL|SKIP|ok|device 0:|allreduce 64 MiB|torch )|passed, .* failed|rcoll says' "$2" |
        grep -vE '^ok ' | head -n 30 ;;
    esac
}

record() { # NAME VERDICT SECONDS RC LIMIT
    VERDICT[$1]=$2 SECS[$1]=$3 RC[$1]=$4 LIMIT[$1]=$5
}

# run_step NAME MIN_S SHARE_PERCENT CMD...: CMD under timeout, with its share of the budget (at
# least MIN_S), or what is left if that is less; not run when what is left is under MIN_S.
run_step() {
    local name=$1 min=$2 share=$3 left limit rc
    shift 3
    STEPS+=("$name")
    left=$((BUDGET - $(elapsed) - RESERVE))
    limit=$((BUDGET * share / 100))
    [ "$limit" -lt "$min" ] && limit=$min
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt "$min" ]; then
        left=$((left < 0 ? 0 : left))
        echo "== $name: not run: budget ($left s left, it needs $min s)"
        record "$name" "not run: budget ($left s left, needs $min s)" 0 - -
        : >"$TMP/$name.out"
        return 0
    fi
    # A hang fails inside the step's share: rcoll's own deadline is a quarter of it (5-30 s).
    RCOLL_TIMEOUT=$((limit / 4))
    [ "$RCOLL_TIMEOUT" -gt 30 ] && RCOLL_TIMEOUT=30
    [ "$RCOLL_TIMEOUT" -lt 5 ] && RCOLL_TIMEOUT=5
    export RCOLL_TIMEOUT
    LIMIT[$name]=$limit
    echo "== $name (limit $limit s, RCOLL_TIMEOUT=$RCOLL_TIMEOUT s, $(elapsed) s used): $*"
    CUR_STEP=$name
    STEP_T0=$SECONDS
    # timeout runs in a process group of its own and kills the whole group (the ranks too);
    # the step runs in the background so that a signal reaches the trap at once.
    set -o pipefail
    (
        echo "$BASHPID" >"$TMP/step.pid"
        exec timeout -k 5 "$limit" "$@"
    ) 2>&1 | tee "$TMP/$name.out" &
    STEP_JOB=$!
    wait "$STEP_JOB"
    rc=$?
    set +o pipefail
    CUR_STEP=""
    local v
    case $rc in
    0) v=passed ;;
    77) v="skipped: $(grep -m1 -E '^SKIP' "$TMP/$name.out" | sed 's/^SKIP:* *//')" ;;
    124 | 137) v="failed: timed out after $limit s" ;;
    *) v="failed (exit $rc)" ;;
    esac
    [ "$DRY" = 1 ] && v="dry run: $v"
    record "$name" "$v" $((SECONDS - STEP_T0)) "$rc" "$limit"
    echo "== $name: $v ($((SECONDS - STEP_T0)) s)"
}

# The build: configure (or reconfigure) BUILD_DIR, then only the targets the steps run.
build() {
    local opts=(-Dcuda=enabled -Dmpi=disabled -Dpython=disabled -Db_sanitize=none) t0=$SECONDS
    local out
    set -o pipefail
    if [ -f "$BUILD/build.ninja" ]; then
        meson configure "$BUILD" "${opts[@]}" >/dev/null || return 1
    elif ! out=$(meson setup "$BUILD" "${opts[@]}" 2>&1); then
        echo "$out" | tail -n 30
        return 1
    else
        echo "$out" | grep -E '^ +(cuda|hwloc|mpi|python|features) +:'
    fi
    echo "build: configured in $((SECONDS - t0)) s"
    local targets=(tools/rcoll-run tests/test_gpu_kernels tests/test_gpu_stage tests/test_gpu_stream)
    local p so
    # librcoll.so.X.Y.Z (its links come with it), for the torch step
    so=$(ninja -C "$BUILD" -t targets all 2>/dev/null | grep -oE '^src/librcoll\.so[.0-9]+:' | head -n 1)
    [ -n "$so" ] && targets+=("${so%:}")
    for p in all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv; do
        targets+=("bench/${p}_perf")
    done
    # the compiler's messages and ninja's failures, not its progress lines
    ninja -C "$BUILD" "${targets[@]}" |
        { grep -vE '^\[[0-9]+/[0-9]+\] (Compiling|Linking|Generating)' || true; } || return 1
    local threads=without
    if grep -q -- '--threads 0' "$BUILD/build.ninja" 2>/dev/null; then threads=with; fi
    echo "build: ${#targets[@]} targets in $((SECONDS - t0)) s (nvcc $threads --threads 0)"
}

# --dry-run's stand-in for a step: sleeps, or hangs, or fails, and says it is a dry run.
dry_step() {
    echo "DRY RUN: $1 stands in for a step; no test ran"
    if [ "${RCOLL_GPU_DRY_HANG:-}" = "$1" ]; then
        echo "DRY RUN: $1 hangs until its timeout"
        sleep 100000
    fi
    sleep "${RCOLL_GPU_DRY_SLEEP:-1}"
    [ "${RCOLL_GPU_DRY_FAIL:-}" = "$1" ] && { echo "FAIL DRY RUN: $1 fails as asked"; return 1; }
    echo "1 passed, 0 failed, 0 skipped (DRY RUN)"
}

# ---- the summary, from the trap ----------------------------------------------------------
json_str() { # one line as a JSON string
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/\\t}
    s=${s//$'\r'/}
    printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\010\013-\037')"
}
json_lines() { # FILE: its lines as a JSON array
    local first=1 line
    printf '['
    while IFS= read -r line || [ -n "$line" ]; do
        [ "$first" = 1 ] || printf ', '
        first=0
        json_str "$line"
    done <"$1"
    printf ']'
}

write_reports() {
    local code=$1 n passed=0 failed=0 notrun=0 skipped=0 s
    for s in "${STEPS[@]}"; do
        case ${VERDICT[$s]} in
        *passed*) passed=$((passed + 1)) ;;
        *"not run"*) notrun=$((notrun + 1)) ;;
        *skipped*) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)) ;;
        esac
        keys "$s" "$TMP/$s.out" >"$TMP/$s.keys" 2>/dev/null
    done
    local total="$passed passed, $failed failed, $skipped skipped, $notrun not run (budget)"
    local gpu="${GPU_NAME:-no GPU}${DRIVER:+, driver $DRIVER}"
    local head
    head="exit $code${STOPPED_BY:+, stopped by SIG$STOPPED_BY}; $(elapsed) s of a $BUDGET s budget"
    {
        echo "# rcoll GPU run (tests/gpu/run.sh)"
        echo
        [ "$DRY" = 1 ] && { echo "**$DRY_NOTE.**"; echo; }
        echo "- $STARTED, commit $(sed -n 's/^commit: *//p' "$PF" | head -n 1)"
        echo "- GPU: $gpu"
        echo "- $total; $head"
        echo
        echo "| step | verdict | seconds | limit (s) |"
        echo "| --- | --- | ---: | ---: |"
        for s in "${STEPS[@]}"; do
            echo "| $s | ${VERDICT[$s]} | ${SECS[$s]} | ${LIMIT[$s]} |"
        done
        for s in "${STEPS[@]}"; do
            [ -s "$TMP/$s.keys" ] || continue
            echo
            echo "## $s"
            echo
            echo '```'
            cat "$TMP/$s.keys"
            echo '```'
        done
        echo
        echo "## Preflight"
        echo
        echo '```'
        cat "$PF"
        echo '```'
    } >"$OUT/summary.md"
    {
        printf '{\n  "script": "tests/gpu/run.sh",\n  "dry_run": %s,\n' "$([ "$DRY" = 1 ] && echo true || echo false)"
        printf '  "started": %s,\n  "budget_s": %d,\n  "elapsed_s": %d,\n' "$(json_str "$STARTED")" "$BUDGET" "$(elapsed)"
        printf '  "exit": %d,\n  "stopped_by": %s,\n' "$code" "$([ -n "$STOPPED_BY" ] && json_str "SIG$STOPPED_BY" || echo null)"
        printf '  "gpu": %s,\n  "driver": %s,\n' "$(json_str "${GPU_NAME}")" "$(json_str "${DRIVER}")"
        printf '  "totals": {"passed": %d, "failed": %d, "skipped": %d, "not_run_budget": %d},\n' \
            "$passed" "$failed" "$skipped" "$notrun"
        printf '  "preflight": %s,\n  "tests": [' "$(json_lines "$PF")"
        n=0
        for s in "${STEPS[@]}"; do
            [ "$n" = 0 ] || printf ','
            n=1
            printf '\n    {"name": %s, "verdict": %s, "seconds": %d, "limit_s": %s, "exit": %s,\n     "lines": %s}' \
                "$(json_str "$s")" "$(json_str "${VERDICT[$s]}")" "${SECS[$s]}" \
                "$(case ${LIMIT[$s]} in '' | *[!0-9]*) echo null ;; *) echo "${LIMIT[$s]}" ;; esac)" \
                "$(case ${RC[$s]} in '' | *[!0-9]*) echo null ;; *) echo "${RC[$s]}" ;; esac)" \
                "$(json_lines "$TMP/$s.keys")"
        done
        printf '\n  ]\n}\n'
    } >"$OUT/results.json"
    # printed last: the short summary
    echo
    echo "== GPU summary ($head)"
    [ "$DRY" = 1 ] && echo "$DRY_NOTE"
    for s in "${STEPS[@]}"; do
        printf '%-16s %-40s %5s s\n' "$s" "${VERDICT[$s]}" "${SECS[$s]}"
        sed 's/^/    /' "$TMP/$s.keys"
    done
    echo "$total"
    echo "reports: $OUT/summary.md, results.json, preflight.txt, run.log"
}

finish() {
    local code=$?
    trap - EXIT TERM INT HUP
    [ -n "$EXIT_CODE" ] && code=$EXIT_CODE
    if [ -n "$CUR_STEP" ]; then # stopped in the middle of a step: end it, keep its output
        local pid
        pid=$(cat "$TMP/step.pid" 2>/dev/null)
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
        # `wait` from a trap that interrupted a wait can block on the wrong child: poll instead
        # (timeout -k 5 ends the step's process group within 5 s of the TERM).
        gone "$pid" "$STEP_JOB" 80
        record "$CUR_STEP" "failed: stopped by SIG${STOPPED_BY:-?} after $((SECONDS - STEP_T0)) s" \
            $((SECONDS - STEP_T0)) - "${LIMIT[$CUR_STEP]:--}"
        [ "$DRY" = 1 ] && VERDICT[$CUR_STEP]="dry run: ${VERDICT[$CUR_STEP]}"
        code=1
    fi
    if [ "${#STEPS[@]}" -gt 0 ] || [ "$code" != 77 ]; then
        write_reports "$code"
    else # skipped in the preflight: the reports say so
        STEPS=(preflight)
        record preflight "skipped: ${NO_GPU:-?}" "$(elapsed)" 77 -
        : >"$TMP/preflight.out"
        write_reports "$code" >/dev/null
    fi
    rm -rf "$TMP"
    exec >&- 2>&-
    gone "$TEE_PID" "" 50 # run.log complete before the caller reads it
    exit "$code"
}
gone() { # PID PID TENTHS: wait until neither process exists, at most TENTHS tenths of a second
    local i
    for ((i = 0; i < $3; i++)); do
        { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; } ||
            { [ -n "$2" ] && kill -0 "$2" 2>/dev/null; } || return 0
        sleep 0.1
    done
}
on_signal() {
    STOPPED_BY=$1
    echo "run.sh: SIG$1: stopping, the summary follows"
    exit 1
}
trap finish EXIT
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP

# ---- the run ------------------------------------------------------------------------------
preflight
if [ "$DRY" = 0 ] && [ -n "$NO_GPU" ]; then
    echo "SKIP: $NO_GPU; nothing built or run (preflight: $OUT/preflight.txt)"
    EXIT_CODE=77
    exit 77
fi
if [ "${#MISSING[@]}" -gt 0 ]; then
    for m in "${MISSING[@]}"; do echo "STOP: $m."; done
    EXIT_CODE=1
    STEPS=(preflight)
    record preflight "failed: ${MISSING[0]}" "$(elapsed)" 1 -
    : >"$TMP/preflight.out"
    exit 1
fi
if [ "$PREFLIGHT_ONLY" = 1 ]; then
    echo "preflight only: everything required is here"
    EXIT_CODE=0
    exit 0
fi

if [ "$DRY" = 1 ]; then
    echo "$DRY_NOTE"
    for s in build gpu_kernels gpu_stage gpu_stream gpu_table gpu_torch gpu_torch_backend \
        gpu_perf_checks; do
        eval "run_$s() { dry_step $s; }"
    done
else
    run_build() { build; }
    run_gpu_kernels() { "$BUILD/tests/test_gpu_kernels"; }
    run_gpu_stage() { "$BUILD/tests/test_gpu_stage"; }
    run_gpu_stream() { "$BUILD/tests/test_gpu_stream"; }
    run_gpu_table() { GPU_PERF_MAX=64M bash tests/gpu/test_perf.sh "$BUILD" table; }
    run_gpu_torch() {
        local lib f
        for f in "$BUILD"/src/librcoll.so.[0-9]*.[0-9]*; do [ -f "$f" ] && lib=$f; done
        PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" RCOLL_LIBRARY="${lib:-$BUILD/src/librcoll.so}" \
            PYTHONUNBUFFERED=1 python3 tests/gpu/torch_cuda.py
    }
    run_gpu_torch_backend() {
        local lib f
        for f in "$BUILD"/src/librcoll.so.[0-9]*.[0-9]*; do [ -f "$f" ] && lib=$f; done
        PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" RCOLL_LIBRARY="${lib:-$BUILD/src/librcoll.so}" \
            RCOLL_TORCH_BUILD_DIR="$BUILD/torch_c" MAX_JOBS=8 PYTHONUNBUFFERED=1 \
            python3 tests/gpu/torch_backend_cuda.py
    }
    run_gpu_perf_checks() { bash tests/gpu/test_perf.sh "$BUILD" checks; }
fi
export -f run_build run_gpu_kernels run_gpu_stage run_gpu_stream run_gpu_table run_gpu_torch \
    run_gpu_torch_backend run_gpu_perf_checks build dry_step 2>/dev/null
export BUILD ROOT RCOLL_GPU_DRY_SLEEP RCOLL_GPU_DRY_HANG RCOLL_GPU_DRY_FAIL 2>/dev/null

# NAME, the least seconds worth starting it with, its share of the budget (%), the command.
run_step build 20 60 bash -c run_build
if [ "${RC[build]}" != 0 ]; then
    echo "STOP: the build ${VERDICT[build]}; no test can run"
    exit 1
fi
CORE=(gpu_kernels gpu_stage gpu_stream gpu_table gpu_torch gpu_torch_backend)
run_step gpu_kernels 15 15 bash -c run_gpu_kernels
run_step gpu_stage 40 30 bash -c run_gpu_stage
run_step gpu_stream 15 15 bash -c run_gpu_stream
run_step gpu_table 40 25 bash -c run_gpu_table
if [ "$TORCH_CUDA" = 1 ] || [ "$DRY" = 1 ]; then
    run_step gpu_torch 15 10 bash -c run_gpu_torch
    run_step gpu_torch_backend 60 30 bash -c run_gpu_torch_backend
else
    for s in gpu_torch gpu_torch_backend; do
        STEPS+=("$s")
        record "$s" "skipped: torch CUDA: not available here ($(sed -n 's/^torch: *//p' "$PF"))" 0 - -
        : >"$TMP/$s.out"
    done
fi
run_step gpu_perf_checks 60 40 bash -c run_gpu_perf_checks

code=0
for s in "${STEPS[@]}"; do
    case ${VERDICT[$s]} in *failed*) code=1 ;; esac
done
# A core step not run for the budget, or one that skipped although the preflight found the
# GPU and its driver (torch's check apart: torch may lack CUDA), fails the run.
for s in "${CORE[@]}"; do
    case ${VERDICT[$s]} in
    *"not run"*) code=1 ;;
    *skipped*) case $s in gpu_torch | gpu_torch_backend) ;; *) code=1 ;; esac ;;
    esac
done
EXIT_CODE=$code
exit "$code"
