#!/usr/bin/env bash
# A container's small /dev/shm (Docker's default is 64 MiB; here 64 KiB, smaller than one
# connection's segment) must not break a job, through rcoll-run with 4 ranks on this host:
#  - with memfd_create (every kernel since 3.17): segments are memfds, which a small /dev/shm
#    does not limit: the ranks still reach each other over shm, results right;
#  - with memfd_create refused (tests/mp/no_memfd: seccomp, ENOSYS): shm cannot work, and
#    each rank says so in one WARN line naming /dev/shm and falls back to tcp; right;
#  - the same with RCOLL_TRANSPORT=shm: every rank fails at once, naming /dev/shm and the
#    remedy (--shm-size), within seconds.
# Needs root (a mount namespace with its own /dev/shm); 77 otherwise.
set -u
BUILD=${1:?usage: test_devshm.sh BUILD_DIR}
RUN="$BUILD/tools/rcoll-run"
PERF="$BUILD/bench/all_reduce_perf"
NOMEMFD="$BUILD/tests/no_memfd"
TMP=$(mktemp -d /tmp/rcoll-devshm-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
unset RCOLL_TRANSPORT RCOLL_SOCKET_IFNAME RCOLL_SHM_DISABLE RCOLL_DEBUG_FILE RCOLL_NET
export RCOLL_TIMEOUT=20
source "$(dirname "$0")/../common/check.sh"

if ! unshare -m true 2>/dev/null; then
    echo "SKIP: no mount namespace here (needs root): the small /dev/shm cannot be made"
    exit 77
fi

# in_small_shm NAME CMD...: CMD in a mount namespace whose /dev/shm is a 64 KiB tmpfs.
in_small_shm() {
    local name=$1
    shift
    timeout 60 unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs -o size=64k rcoll-small /dev/shm &&
        df -k /dev/shm | tail -n 1 >&2 && exec "$@"' sh "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

perf=(-b 8 -e 8M -f 8 -n 2 -w 1 -c 1)
export RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT
in_small_shm memfd "$RUN" -n 4 "$PERF" "${perf[@]}"
rc=$?
ok=$(grep -c 'Out of bounds values : 0 OK' "$TMP/memfd.out")
shm=$(grep -c 'reaches 3 peers over shm' "$TMP/memfd.out" "$TMP/memfd.err" | awk -F: '{s+=$2} END {print s}')
RC=$rc
echo "memfd: 4 ranks, /dev/shm of 64 KiB: exit $rc, right $ok, ranks over shm $shm"
memfd_ok() { [ $rc = 0 ] && [ "$ok" = 1 ] && [ "$shm" = 4 ]; }
check memfd memfd_ok

in_small_shm nomemfd "$NOMEMFD" "$RUN" -n 4 "$PERF" "${perf[@]}"
rc=$?
cat "$TMP/nomemfd.out" "$TMP/nomemfd.err" >"$TMP/nomemfd.all"
ok=$(grep -c 'Out of bounds values : 0 OK' "$TMP/nomemfd.all")
tcp=$(grep -c 'reaches 3 peers over tcp' "$TMP/nomemfd.all")
warns=$(grep ' WARN ' "$TMP/nomemfd.all" | grep -c 'transport shm not used, falling back:.*/dev/shm too small')
other=$(grep ' WARN ' "$TMP/nomemfd.all" | grep -vc 'transport shm not used, falling back')
grep ' WARN ' "$TMP/nomemfd.all" | head -n 1
RC=$rc
echo "no memfd, /dev/shm of 64 KiB: exit $rc, right $ok, ranks over tcp $tcp, shm warnings $warns (one a rank), other warnings $other"
nomemfd_ok() { [ $rc = 0 ] && [ "$ok" = 1 ] && [ "$tcp" = 4 ] && [ "$warns" = 4 ] && [ "$other" = 0 ]; }
check nomemfd nomemfd_ok

unset RCOLL_DEBUG RCOLL_DEBUG_SUBSYS
t0=$SECONDS
RCOLL_TRANSPORT=shm in_small_shm forced "$NOMEMFD" "$RUN" -n 4 "$PERF" "${perf[@]}"
rc=$?
named=$(grep 'rcoll_comm_init_env failed' "$TMP/forced.err" | grep -c '/dev/shm too small.*--shm-size')
grep 'rcoll_comm_init_env failed' "$TMP/forced.err" | head -n 1
RC=$rc
took=$((SECONDS - t0))
echo "RCOLL_TRANSPORT=shm, no memfd, small /dev/shm: exit $rc, $named of 4 ranks name /dev/shm, $took s"
forced_ok() { [ $rc != 0 ] && [ "$named" = 4 ] && [ $took -le 10 ]; }
check forced forced_ok
check_summary
