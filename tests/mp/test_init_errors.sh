#!/usr/bin/env bash
# The text of every communicator-creation failure path, on every rank, through rcoll-run:
# the first cause is kept and shown on every rank (also when only one rank fails, and when
# that rank hosts the bootstrap root), messages are never nested or garbled, a zero
# RCOLL_TIMEOUT is refused with its range, an unusable RCOLL_DEBUG_FILE is warned about, and
# every failing job ends within seconds although RCOLL_TIMEOUT is 30 s.
set -u
BUILD=${1:?usage: test_init_errors.sh BUILD_DIR}
RUN="$BUILD/tools/rcoll-run"
PERF="$BUILD/bench/all_reduce_perf"
TMP=$(mktemp -d /tmp/rcoll-init-errors-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
unset RCOLL_TRANSPORT RCOLL_SOCKET_IFNAME RCOLL_SHM_DISABLE RCOLL_TOPO_FILE RCOLL_DEBUG_FILE \
    RCOLL_DEBUG RCOLL_NET
export RCOLL_TIMEOUT=30
RC=0
ELAPSED_MS=0
source "$(dirname "$0")/../common/check.sh"

now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((t / 1000)); }

# job NAME NRANKS SETUP: runs all_reduce_perf on NRANKS ranks, each after the shell code
# SETUP (which sees $RCOLL_RANK); output in $TMP/NAME.out/.err.
job() {
    local name=$1 n=$2 setup=$3 t0
    t0=$(now_ms)
    timeout 25 "$RUN" -n "$n" sh -c "$setup"'
        exec "$0" -b 8 -e 8 -n 1' "$PERF" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
    RC=$?
    ELAPSED_MS=$(($(now_ms) - t0))
}

# failures NAME PATTERN: how many ranks' init failure lines match PATTERN (grep -E).
failures() {
    grep 'all_reduce_perf: rcoll_comm_init_env failed:' "$TMP/$1.err" | grep -cE -- "$2"
}

# failed_on_every_rank NAME N TEXT: the job failed within 10 s, and each of its N ranks
# printed one init failure line containing TEXT, none of them nested or garbled.
failed_on_every_rank() {
    local name=$1 n=$2 text=$3 r
    [ "$RC" != 0 ] && [ "$ELAPSED_MS" -lt 10000 ] || return 1
    for ((r = 0; r < n; r++)); do
        grep "^\[$r\] all_reduce_perf: rcoll_comm_init_env failed:" "$TMP/$name.err" |
            grep -qF -- "$text" || return 1
    done
    ! grep -q 'last error: no transport could listen\|(last error: e:' "$TMP/$name.err"
}

t_transport_bogus() {
    job transport_bogus 2 'export RCOLL_TRANSPORT=bogus;'
    failed_on_every_rank transport_bogus 2 "RCOLL_TRANSPORT='bogus' is not one of auto, shm, plugin, verbs or tcp"
}
check transport_bogus t_transport_bogus

t_no_interface() {
    job no_interface 2 'export RCOLL_SOCKET_IFNAME=nonexist0 RCOLL_SHM_DISABLE=1;'
    failed_on_every_rank no_interface 2 \
        "no transport could listen (last error: transport tcp: tcp transport unavailable: no up interface with an address matches RCOLL_SOCKET_IFNAME='nonexist0')"
}
check no_interface t_no_interface

t_timeout_zero() {
    job timeout_zero 2 'export RCOLL_TIMEOUT=0;'
    failed_on_every_rank timeout_zero 2 "RCOLL_TIMEOUT='0' is not a number of seconds in (0, 604800]"
}
check timeout_zero t_timeout_zero

# Only rank 0, which hosts the root, fails, before it joins: the others are told at once.
t_root_fails_early() {
    job root_fails_early 3 '[ $RCOLL_RANK = 0 ] && export RCOLL_SOCKET_IFNAME=nonexist0 RCOLL_SHM_DISABLE=1;'
    failed_on_every_rank root_fails_early 1 "no transport could listen" &&
        failed_on_every_rank root_fails_early 3 "no up interface with an address matches" &&
        [ "$(failures root_fails_early 'rank 0 \(pid [0-9]+\), which hosts the bootstrap root, could not create its communicator')" = 2 ]
}
check root_fails_early t_root_fails_early

# Another rank fails before it can join (it cannot listen: no usable interface, as with a
# full /dev/shm): it joins without addresses and says why, so everyone names it at once
# instead of waiting RCOLL_TIMEOUT for a rank that never joined.
t_rank_fails_early() {
    job rank_fails_early 3 '[ $RCOLL_RANK = 1 ] && export RCOLL_SOCKET_IFNAME=nonexist0 RCOLL_SHM_DISABLE=1;'
    failed_on_every_rank rank_fails_early 3 "no up interface with an address matches" &&
        [ "$(failures rank_fails_early 'rank 1 \(.* pid [0-9]+\) could not create its communicator: no transport could listen')" = 2 ]
}
check rank_fails_early t_rank_fails_early

# Only rank 0 fails, after joining (a topology file larger than the 64 MiB limit).
t_root_fails_late() {
    truncate -s 65M "$TMP/big.json"
    job root_fails_late 3 "[ \$RCOLL_RANK = 0 ] && export RCOLL_TOPO_FILE=$TMP/big.json;"
    rm -f "$TMP/big.json"
    failed_on_every_rank root_fails_late 3 "topology file $TMP/big.json: larger than 64 MiB" &&
        [ "$(failures root_fails_late 'rank 0 \(.* pid [0-9]+\) could not create its communicator')" = 2 ]
}
check root_fails_late t_root_fails_late

# Another rank fails after joining: everyone names it and its cause.
t_rank_fails() {
    job rank_fails 3 '[ $RCOLL_RANK = 1 ] && export RCOLL_TOPO_FILE=/nonexistent/topo.json;'
    failed_on_every_rank rank_fails 3 "cannot open topology file /nonexistent/topo.json" &&
        [ "$(failures rank_fails 'rank 1 \(.* pid [0-9]+\) could not create its communicator')" = 2 ]
}
check rank_fails t_rank_fails

t_debug_file() {
    job debug_file 2 'export RCOLL_DEBUG_FILE=/nonexistent/dir/rcoll.%p.log;'
    [ "$RC" = 0 ] && [ "$(grep -c "RCOLL_DEBUG_FILE='/nonexistent/dir/rcoll.%p.log': cannot open /nonexistent/dir/rcoll\.[0-9]*\.log: No such file or directory; logging to stderr instead" \
        "$TMP/debug_file.err")" = 2 ]
}
check debug_file t_debug_file

check_summary
