#!/usr/bin/env bash
# Tests the rcoll-run launcher (tools/rcoll-run.c) with plain shell commands as ranks:
# launch environment, output relay and prefixes, exit status propagation, grace period,
# --timeout, signal forwarding, fd hygiene and usage errors; then real all_reduce_perf jobs
# (the tuning probe, no rdma-core, a host-ordered ring, spinning by affinity). Every command
# is bounded by `timeout`.
# Usage: bash tests/mp/test_rcoll_run.sh <meson build root>
set -u

BUILD=${1:?usage: test_rcoll_run.sh <meson build root>}
RUN="$BUILD/tools/rcoll-run"
if [ ! -x "$RUN" ]; then
    echo "FAIL rcoll-run not found at $RUN"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The checks below decide these themselves.
unset RCOLL_SECRET RCOLL_SOCKET_IFNAME RCOLL_RUN_GRACE

npass=0
nfail=0
RC=0
ELAPSED_MS=0

now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((t / 1000)); }

# rr NAME ARGS...: runs rcoll-run ARGS, output in $TMP/NAME.out/.err, sets RC, ELAPSED_MS.
rr() {
    local name=$1 t0
    shift
    t0=$(now_ms)
    timeout 20 "$RUN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
    RC=$?
    ELAPSED_MS=$(($(now_ms) - t0))
}

# check NAME FUNCTION, check_summary: tests/common/check.sh
source "$(dirname "$0")/../common/check.sh"

t_env() {
    rr env -n 4 sh -c 'echo "rank=$RCOLL_RANK n=$RCOLL_NRANKS lr=$RCOLL_LOCAL_RANK" \
        "ls=$RCOLL_LOCAL_SIZE root=$RCOLL_ROOT secret=$RCOLL_SECRET if=$RCOLL_SOCKET_IFNAME"'
    [ "$RC" = 0 ] && [ "$(wc -l <"$TMP/env.out")" = 4 ] && [ ! -s "$TMP/env.err" ] || return 1
    for i in 0 1 2 3; do
        grep -qx "\[$i\] rank=$i n=4 lr=$i ls=4 root=127\.0\.0\.1:[0-9]* secret=[0-9a-f]\{64\} if=lo" \
            "$TMP/env.out" || return 1
    done
    [ "$(grep -o 'root=[^ ]*' "$TMP/env.out" | sort -u | wc -l)" = 1 ] &&
        [ "$(grep -o 'secret=[^ ]*' "$TMP/env.out" | sort -u | wc -l)" = 1 ]
}

# The ports rank 0 listens on later (RCOLL_ROOT's, torch's MASTER_PORT) lie below the
# kernel's ephemeral range, which outgoing connections take ports from meanwhile, and differ
# (both were once drawn from one seed: the same port twice within a second).
t_ports() {
    local lo p
    rr ports -n 1 sh -c 'echo "${RCOLL_ROOT##*:} $MASTER_PORT"'
    [ "$RC" = 0 ] || return 1
    set -- $(sed 's/^\[0\] //' "$TMP/ports.out")
    [ "$#" = 2 ] && [ "$1" != "$2" ] || return 1
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || return 0
    for p in $(cat "$TMP/ports.out" | sed 's/^\[0\] //'); do
        [ "$p" -ge 1024 ] && [ "$p" -lt "$lo" ] || return 1
    done
}

# Above 64 ranks rcoll-run sets up the bootstrap tree: one relay per 32 ranks, on free ports
# apart from the root's and torch's store's; a caller's RCOLL_BS_RELAYS (empty: none) is kept.
t_relays() {
    local root master first
    rr relays -q -n 65 sh -c '[ "$RCOLL_RANK" != 0 ] || echo "${RCOLL_ROOT##*:} $MASTER_PORT $RCOLL_BS_RELAYS"'
    [ "$RC" = 0 ] || return 1
    set -- $(sed 's/^\[0\] //' "$TMP/relays.out")
    root=$1 master=$2
    case "$3" in 2@127.0.0.1:*) first=${3##*:} ;; *) return 1 ;; esac
    for p in "$first" $((first + 1)); do
        [ "$p" != "$root" ] && [ "$p" != "$master" ] || return 1
    done
    rr relays_small -q -n 64 sh -c '[ "$RCOLL_RANK" != 0 ] || echo "relays=${RCOLL_BS_RELAYS-unset}"'
    [ "$RC" = 0 ] && [ "$(cat "$TMP/relays_small.out")" = "[0] relays=unset" ] || return 1
    RCOLL_BS_RELAYS= rr relays_kept -q -n 65 sh -c '[ "$RCOLL_RANK" != 0 ] || echo "relays=${RCOLL_BS_RELAYS-unset}"'
    [ "$RC" = 0 ] && [ "$(cat "$TMP/relays_kept.out")" = "[0] relays=" ]
}

t_secret_fresh() {
    local a b
    rr secret_fresh -n 1 sh -c 'echo $RCOLL_SECRET'
    a=$(cat "$TMP/secret_fresh.out")
    rr secret_fresh -n 1 sh -c 'echo $RCOLL_SECRET'
    b=$(cat "$TMP/secret_fresh.out")
    [ "$RC" = 0 ] && [ -n "$a" ] && [ "$a" != "$b" ]
}

t_env_kept() {
    RCOLL_SECRET=mysecret RCOLL_SOCKET_IFNAME=eth9 rr env_kept -n 2 \
        sh -c 'echo "$RCOLL_SECRET $RCOLL_SOCKET_IFNAME"'
    [ "$RC" = 0 ] && [ "$(sort "$TMP/env_kept.out")" = "$(printf '[0] mysecret eth9\n[1] mysecret eth9')" ]
}

t_streams() {
    rr streams -n 2 sh -c 'echo out-$RCOLL_RANK; echo err-$RCOLL_RANK >&2; printf tail-$RCOLL_RANK'
    [ "$RC" = 0 ] &&
        [ "$(sort "$TMP/streams.out")" = "$(printf '[0] out-0\n[0] tail-0\n[1] out-1\n[1] tail-1')" ] &&
        [ "$(sort "$TMP/streams.err")" = "$(printf '[0] err-0\n[1] err-1')" ]
}

t_quiet() {
    rr quiet -q -n 3 sh -c 'echo out-$RCOLL_RANK; echo err-$RCOLL_RANK >&2'
    [ "$RC" = 0 ] && [ "$(cat "$TMP/quiet.out")" = "[0] out-0" ] &&
        [ "$(sort "$TMP/quiet.err")" = "$(printf '[0] err-0\n[1] err-1\n[2] err-2')" ]
}

t_no_prefix() {
    rr no_prefix --no-prefix -n 2 -- sh -c 'echo line-$RCOLL_RANK'
    [ "$RC" = 0 ] && [ "$(sort "$TMP/no_prefix.out")" = "$(printf 'line-0\nline-1')" ]
}

t_fds() {
    # fd 7 is open in the launcher's parent without close-on-exec: ranks must not see it.
    # ls runs as a plain child of the rank's shell, which then holds only 0-2 and 3, the
    # join socket named by RCOLL_RUN_JOIN_FD.
    rr fds -n 2 sh -c 'echo "join=$RCOLL_RUN_JOIN_FD"; ls /proc/$$/fd' 7</dev/null
    [ "$RC" = 0 ] && [ "$(sort "$TMP/fds.out")" = \
        "$(printf '[0] 0\n[0] 1\n[0] 2\n[0] 3\n[0] join=3\n[1] 0\n[1] 1\n[1] 2\n[1] 3\n[1] join=3')" ]
}

t_exit_code() {
    rr exit_code -n 3 sh -c '[ $RCOLL_RANK = 2 ] && exit 3; exit 0'
    [ "$RC" = 3 ] && grep -q '^rcoll-run: rank 2 (pid [0-9]*) exited with status 3$' "$TMP/exit_code.err"
}

t_killed() {
    rr killed -n 2 sh -c '[ $RCOLL_RANK = 1 ] && kill -9 $$; exit 0'
    [ "$RC" = 137 ] && grep -q '^rcoll-run: rank 1 (pid [0-9]*) killed by signal 9' "$TMP/killed.err"
}

t_grace_finish() {
    rr grace_finish --grace 5 -n 2 sh -c '[ $RCOLL_RANK = 0 ] && exit 3; sleep 0.5; echo finished'
    [ "$RC" = 3 ] && grep -qx '\[1\] finished' "$TMP/grace_finish.out" && [ "$ELAPSED_MS" -lt 4000 ]
}

t_grace_bounded() {
    rr grace_bounded --grace 1 -n 2 sh -c '[ $RCOLL_RANK = 0 ] && exit 3; exec sleep 30'
    [ "$RC" = 3 ] && [ "$ELAPSED_MS" -ge 900 ] && [ "$ELAPSED_MS" -lt 5000 ] &&
        grep -q 'grace period' "$TMP/grace_bounded.err"
}

t_timeout() {
    rr timeout --timeout 1 -n 2 sleep 100
    [ "$RC" = 124 ] && [ "$ELAPSED_MS" -lt 4000 ] &&
        grep -q 'timeout after 1 s.*0-1' "$TMP/timeout.err"
}

# Starts rcoll-run in the background with ranks that print "ready" once set up; waits for
# both ranks, sends rcoll-run the given signals 0.3 s apart, and sets RC once it is gone
# (killed after 10 s if it is not). No `timeout` wrapper: the signals must reach rcoll-run.
signal_job() {
    local name=$1 script=$2 pid i t0
    shift 2
    "$RUN" -n 2 sh -c "$script" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null &
    pid=$!
    for i in $(seq 50); do
        [ "$(grep -c ready "$TMP/$name.out")" = 2 ] && break
        sleep 0.1
    done
    t0=$(now_ms)
    for sig in "$@"; do
        kill -"$sig" "$pid"
        sleep 0.3
    done
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    RC=$?
    ELAPSED_MS=$(($(now_ms) - t0))
}

t_sigint() {
    signal_job sigint 'trap "echo got-int; exit 0" INT; echo ready; sleep 30 & wait' INT
    [ "$RC" = 0 ] && grep -qx '\[0\] got-int' "$TMP/sigint.out" &&
        grep -qx '\[1\] got-int' "$TMP/sigint.out" && [ "$ELAPSED_MS" -lt 3000 ]
}

t_sigint_twice() {
    signal_job sigint_twice 'trap "" INT; echo ready; sleep 30' INT INT
    [ "$RC" = 137 ] && [ "$ELAPSED_MS" -lt 3000 ]
}

t_usage() {
    local ok=0
    rr usage -q sh -c true;        [ "$RC" = 2 ] && grep -q 'missing -n' "$TMP/usage.err" || ok=1
    rr usage -n 0 true;            [ "$RC" = 2 ] || ok=1
    rr usage -n 1025 true;         [ "$RC" = 2 ] || ok=1
    rr usage -n x true;            [ "$RC" = 2 ] || ok=1
    rr usage -n 2;                 [ "$RC" = 2 ] && grep -q 'no command' "$TMP/usage.err" || ok=1
    rr usage --bogus -n 2 true;    [ "$RC" = 2 ] || ok=1
    rr usage --grace -1 -n 2 true; [ "$RC" = 2 ] || ok=1
    rr usage --help;               [ "$RC" = 0 ] && grep -q '^usage: rcoll-run' "$TMP/usage.out" || ok=1
    return $ok
}

t_not_found() {
    rr not_found -n 2 ./no-such-command-here
    [ "$RC" = 127 ] &&
        grep -q "^\[[01]\] rcoll-run: cannot execute './no-such-command-here': No such file or directory$" \
            "$TMP/not_found.err" &&
        grep -q '^rcoll-run: rank [01] (pid [0-9]*) exited with status 127$' "$TMP/not_found.err"
}

check env t_env
check ports t_ports
check relays t_relays
check secret_fresh t_secret_fresh
check env_kept t_env_kept
check streams t_streams
check quiet t_quiet
check no_prefix t_no_prefix
check fds t_fds
check exit_code t_exit_code
check killed t_killed
check grace_finish t_grace_finish
check grace_bounded t_grace_bounded
check timeout t_timeout
check sigint t_sigint
check sigint_twice t_sigint_twice
check usage t_usage
check not_found t_not_found

# all_reduce_perf is always built (bench/meson.build), so its absence is a failure, and every
# check below runs whatever the first job did: none is skipped because another failed.
PERF="$BUILD/bench/all_reduce_perf"
t_perf_built() { [ -x "$PERF" ]; }
check perf_built t_perf_built
rr perf --timeout 15 -n 2 "$PERF" -b 8 -e 1K -f 4 -n 2
t_perf() { [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/perf.out"; }
check perf t_perf
# A rank that exits (status 0) before it begins to join: the others would wait for it
# until RCOLL_TIMEOUT (300 s); rcoll-run ends the job at once, naming it, status 1.
t_early_exit() {
    rr early_exit -n 3 sh -c '[ $RCOLL_RANK = 1 ] && exit 0; exec "$0" -b 8 -e 8 -n 1' "$PERF"
    [ "$RC" = 1 ] && [ "$ELAPSED_MS" -lt 8000 ] &&
        grep -q '^rcoll-run: rank 1 (pid [0-9]*) exited with status 0 before it began to join the job' \
            "$TMP/early_exit.err"
}
check early_exit t_early_exit
# The tuning probe: every rank logs measured constants, positive and the same on
# every rank (they are agreed by an all-reduce), for shared memory and for TCP.
t_probe_path() { # NAME PATH
    local lines consts
    lines=$(grep -o "tuning probe ($2): alpha [0-9.]* us, beta [0-9.]* GB/s, reduction [0-9.]* GB/s" \
        "$TMP/$1.out" "$TMP/$1.err" 2>/dev/null | sed 's/^[^:]*://')
    [ "$(grep -c . <<<"$lines")" = 3 ] || return 1
    consts=$(sort -u <<<"$lines")
    [ "$(grep -c . <<<"$consts")" = 1 ] || return 1
    ! grep -q " 0\.000 \| 0\.00 " <<<"$consts"
}
RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT rr probe_shm --timeout 15 -n 3 "$PERF" -b 8 -e 8 -n 1
t_probe_shm() { [ "$RC" = 0 ] && t_probe_path probe_shm shm; }
check probe_shm t_probe_shm
RCOLL_TRANSPORT=tcp RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT rr probe_net --timeout 15 -n 3 \
    "$PERF" -b 8 -e 8 -n 1
t_probe_net() { [ "$RC" = 0 ] && t_probe_path probe_net net; }
check probe_net t_probe_net
# Without rdma-core (the verbs library missing) rcoll still loads and runs, over TCP
# here, and says at INFO why verbs is not used (where verbs is built: -Dverbs=disabled
# builds have nothing to say).
verbs_built=0
grep -q '^#define RCOLL_HAVE_VERBS 1' "$BUILD/rcoll_build.h" && verbs_built=1
RCOLL_IBVERBS_LIB=/nonexistent/libibverbs.so.1 RCOLL_SHM_DISABLE=1 RCOLL_DEBUG=INFO \
    RCOLL_DEBUG_SUBSYS=INIT rr no_rdma_core --timeout 15 -n 2 "$PERF" -b 8 -e 64K -f 8 -n 2
t_no_rdma_core() {
    [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/no_rdma_core.out" &&
        { [ $verbs_built = 0 ] ||
        grep -q 'transport verbs not used: .*cannot load /nonexistent/libibverbs.so.1' \
            "$TMP/no_rdma_core.out" "$TMP/no_rdma_core.err"; } &&
        grep -q 'reaches 1 peer over tcp' "$TMP/no_rdma_core.out" "$TMP/no_rdma_core.err"
}
check no_rdma_core t_no_rdma_core
# Ranks numbered across hosts (RCOLL_HOST_ID alternating): the ring is reordered by
# host and crosses the host boundary twice (once per direction), never 4 times.
RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT rr host_ring --timeout 15 -n 4 bash -c \
    'export RCOLL_HOST_ID=h$((RCOLL_RANK % 2)); exec "$0" "$@"' "$PERF" -b 8 -e 1M -f 32 -n 2
t_host_ring() {
    [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/host_ring.out" &&
        [ "$(grep -c 'on 2 hosts (equal ranks per host): ring (reordered by host) crosses host boundaries 2 times' \
            "$TMP/host_ring.out" "$TMP/host_ring.err" | awk -F: '{s += $NF} END {print s}')" = 4 ]
}
check host_ring t_host_ring
# Automatic spinning counts the CPUs of all ranks' affinity masks together: two ranks
# pinned to one CPU each (as mpirun and srun bind) spin; both pinned to the same
# CPU share it and yield at once.
t_spin_case() { # NAME CPU-EXPR EXPECTED-TEXT
    RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT rr "$1" --timeout 15 -n 2 bash -c \
        "exec taskset -c $2 \"\$0\" \"\$@\"" "$PERF" -b 8 -e 64K -f 16 -n 20
    [ "$RC" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/$1.out" &&
        [ "$(grep -c "$3" "$TMP/$1.out" "$TMP/$1.err" |
            awk -F: '{s += $NF} END {print s}')" = 2 ]
}
# taskset is in util-linux (essential on Debian): missing, both checks fail.  Only a
# machine with one CPU cannot pin two ranks apart: there spin_bound is a counted skip.
t_spin_bound() {
    t_spin_case spin_bound '$RCOLL_LOCAL_RANK' \
        '2 ranks on this machine, 2 CPUs in their affinity masks: waiting ranks spin 200 polls'
}
if [ "$(nproc)" -ge 2 ]; then
    check spin_bound t_spin_bound
else
    skip spin_bound "this machine gives the test $(nproc) CPU, two are needed"
fi
t_spin_shared() {
    t_spin_case spin_shared 0 \
        '2 ranks on this machine share 1 CPUs (their affinity masks together): waiting ranks yield at once'
}
check spin_shared t_spin_shared

check_summary
