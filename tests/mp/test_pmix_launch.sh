#!/usr/bin/env bash
# rcoll_comm_init_env under a PMIx server (src/core/launch_pmix.c): Open MPI's mpirun on this
# host starts tests/mn_check with no RCOLL_ROOT, RCOLL_RANK or MASTER_ADDR, so rank, size and
# the bootstrap id can only come from PMIx.
#   pmix_np4         4 ranks: every rank OK, and every rank's INIT log says the launch went
#                    through PMIx with its own rank of 4 and local rank of 4
#   pmix_off         RCOLL_PMIX=off: every rank fails for want of an address, naming it
#                    (so pmix_np4 worked through PMIx, not through something else)
#   pmix_root_wins   RCOLL_ROOT given: the address path (no PMIx line), still OK
#   pmix_fence_timeout  one of 3 ranks never calls rcoll_comm_init_env (RCOLL_TIMEOUT=2):
#                    the job fails within seconds, a waiting rank naming PMIx_Fence and its
#                    TIMEOUT
#   pmix_on_no_server   RCOLL_PMIX=on without a PMIx server: a clear error
#   pmix_relays_np9  RCOLL_BS_RELAYS=4, RCOLL_BS_FANOUT=2: a bootstrap tree of two levels whose
#                    relays publish their addresses through PMIx (relays 3 and 4 under relay
#                    1): every rank OK, each relay listening and connected to its parent
#   pmix_relays_auto 72 ranks, RCOLL_BS_RELAYS unset: one relay per 32 ranks above 64 (2
#                    relays, blocks of 24) without any setting, every rank's creation OK
#   pmix_relays_addr RCOLL_BS_RELAYS with addresses under PMIx: refused, saying to give a count
#   pmix_three_launches three rcoll_comm_init_env in one process each (the Python binding, 3
#                    ranks): PMIx initialized and finalized three times, a fresh key each time,
#                    every all-reduce right, the local rank kept (skipped without numpy)
# Skips (77) when the library was built without PMIx or mpirun is missing.
set -u
BUILD=${1:?usage: test_pmix_launch.sh BUILD_DIR pmix|nopmix}
HAVE=${2:?usage: test_pmix_launch.sh BUILD_DIR pmix|nopmix}
MN="$BUILD/tests/mn_check"
if [ "$HAVE" != pmix ]; then
    echo "SKIP: librcoll was built without PMIx (meson -Dpmix; apt-get install libpmix-dev)"
    exit 77
fi
if ! command -v mpirun >/dev/null; then
    echo "SKIP: mpirun (openmpi-bin) is not installed"
    exit 77
fi
TMP=$(mktemp -d /tmp/rcoll-pmix-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# Nothing of another launch style may reach the ranks.
unset RCOLL_RANK RCOLL_NRANKS RCOLL_ROOT RCOLL_SECRET RCOLL_LOCAL_RANK RCOLL_LOCAL_SIZE \
    RANK WORLD_SIZE MASTER_ADDR MASTER_PORT RCOLL_PMIX RCOLL_DEBUG RCOLL_DEBUG_FILE \
    RCOLL_TRANSPORT RCOLL_SOCKET_IFNAME
export RCOLL_TIMEOUT=30
RC=0
ELAPSED_MS=0
source "$(dirname "$0")/../common/check.sh"

now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((t / 1000)); }

# job NAME NP MPIRUN-ARGS... -- COMMAND...: output in $TMP/NAME.out, status in RC.
job() {
    local name=$1 np=$2 t0 args=()
    shift 2
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    t0=$(now_ms)
    timeout 60 mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl self,vader \
        -x RCOLL_DEBUG=INFO -x RCOLL_DEBUG_SUBSYS="${SUBSYS:-INIT}" "${args[@]}" "$@" \
        >"$TMP/$name.out" 2>&1 </dev/null
    RC=$?
    ELAPSED_MS=$(($(now_ms) - t0))
}

np4() {
    local r
    [ "$RC" = 0 ] || return 1
    for r in 0 1 2 3; do
        grep -q "^mn_check: rank $r of 4 .*: OK" "$TMP/pmix_np4.out" || return 1
        grep -q "environment launch through PMIx: namespace [^ ]*, rank $r of 4, local rank $r of 4;" \
            "$TMP/pmix_np4.out" || return 1
    done
    [ "$(grep -c 'environment launch through PMIx' "$TMP/pmix_np4.out")" = 4 ]
}
job pmix_np4 4 -- "$MN"
check pmix_np4 np4

off() {
    [ "$RC" != 0 ] && [ "$(grep -c 'mn_check: rcoll_comm_init_env failed: .*no rendezvous address.*RCOLL_PMIX=off' \
        "$TMP/pmix_off.out")" = 2 ] && ! grep -q 'through PMIx' "$TMP/pmix_off.out"
}
job pmix_off 2 -x RCOLL_PMIX=off -- "$MN"
check pmix_off off

root_wins() {
    [ "$RC" = 0 ] && [ "$(grep -c '^mn_check: rank . of 2 .*: OK' "$TMP/pmix_root_wins.out")" = 2 ] &&
        ! grep -q 'through PMIx' "$TMP/pmix_root_wins.out"
}
job pmix_root_wins 2 -x RCOLL_ROOT=127.0.0.1:$((20000 + RANDOM % 30000)) -x RCOLL_SECRET=s3 \
    -- "$MN"
check pmix_root_wins root_wins

# mpirun ends the job when the first rank exits non-zero, so the other waiting rank may be
# killed before it prints: at least one says it, none passes.
fence_timeout() {
    [ "$RC" != 0 ] && [ "$ELAPSED_MS" -lt 15000 ] &&
        grep -q 'mn_check: rcoll_comm_init_env failed: timeout: .*PMIx_Fence over the 3 ranks .*failed: TIMEOUT' \
            "$TMP/pmix_fence_timeout.out" && ! grep -q '^mn_check: rank' "$TMP/pmix_fence_timeout.out"
}
# Rank 2 lives on (so the others' fence cannot complete) but never joins, for 5 s.
# shellcheck disable=SC2016 # expanded by each rank's shell
job pmix_fence_timeout 3 -x RCOLL_TIMEOUT=2 -- sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 2 ]; then sleep 5; exit 0; fi; exec "$0"' "$MN"
check pmix_fence_timeout fence_timeout

on_no_server() {
    [ "$RC" != 0 ] && grep -q 'RCOLL_PMIX=on, but no PMIx server started this process' \
        "$TMP/pmix_on_no_server.out"
}
RCOLL_PMIX=on RCOLL_RANK=0 RCOLL_NRANKS=1 timeout 20 "$MN" >"$TMP/pmix_on_no_server.out" 2>&1
RC=$?
check pmix_on_no_server on_no_server

relays9() {
    local f=$TMP/pmix_relays_np9.out r
    [ "$RC" = 0 ] || return 1
    for r in 0 1 2 3 4 5 6 7 8; do
        grep -q "^mn_check: rank $r of 9 .*: OK" "$f" || return 1
    done
    grep -q "bootstrap tree: 4 relays below the root, 2 ranks per block, 2 children per node (addresses through PMIx)" "$f" &&
        grep -q "relay 1: connected to its parent (node 0)" "$f" &&
        grep -q "relay 2: connected to its parent (node 0)" "$f" &&
        grep -q "relay 3: connected to its parent (node 1)" "$f" &&
        grep -q "relay 4: connected to its parent (node 1)" "$f" &&
        [ "$(grep -c 'root: relay [12] connected' "$f")" = 2 ] &&
        grep -q "relay 4 (ranks 8-8) listening" "$f"
}
SUBSYS=INIT,BOOTSTRAP job pmix_relays_np9 9 -x RCOLL_BS_RELAYS=4 -x RCOLL_BS_FANOUT=2 -- "$MN"
check pmix_relays_np9 relays9

relays_auto() {
    local f=$TMP/pmix_relays_auto.out
    [ "$RC" = 0 ] &&
        grep -q "bootstrap tree: 2 relays below the root, 24 ranks per block, 8 children per node (addresses through PMIx)" "$f" &&
        grep -q "relay 1 (ranks 24-47) listening" "$f" && grep -q "relay 2 (ranks 48-71) listening" "$f" &&
        [ "$(grep -c 'root: relay [12] connected' "$f")" = 2 ] &&
        grep -q "^ *72 " "$f"
}
SUBSYS=INIT,BOOTSTRAP job pmix_relays_auto 72 -- "$BUILD/bench/init_scale"
check pmix_relays_auto relays_auto

relays_addr() {
    [ "$RC" != 0 ] && grep -q "RCOLL_BS_RELAYS='2@127.0.0.1:5000': under PMIx the relays listen where their ranks run" \
        "$TMP/pmix_relays_addr.out" && ! grep -q '^mn_check: rank' "$TMP/pmix_relays_addr.out"
}
job pmix_relays_addr 2 -x RCOLL_BS_RELAYS=2@127.0.0.1:5000 -- "$MN"
check pmix_relays_addr relays_addr

three() {
    local r i
    [ "$RC" = 0 ] || return 1
    for r in 0 1 2; do
        for i in 0 1 2; do
            grep -q "^launch $i rank $r of 3: sum 3.0$" "$TMP/three.$r" || return 1
        done
        [ "$(grep -c "through PMIx: namespace [^ ]*, rank $r of 3, local rank $r of 3;" \
            "$TMP/pmix_three_launches.out")" = 3 ] || return 1
    done
}
py=$(command -v /usr/bin/python3 || command -v python3)
if [ -n "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then
    cat >"$TMP/three.py" <<'EOF'
import numpy as np
import rcoll
import sys
for i in range(3):
    c = rcoll.init_env()
    a = np.ones(4, dtype=np.float32)
    c.allreduce(None, a)
    with open(f"{sys.argv[1]}.{c.rank}", "a") as f:
        f.write(f"launch {i} rank {c.rank} of {c.size}: sum {a[0]}\n")
    c.destroy()
EOF
    SRC=$(cd "$(dirname "$0")/../.." && pwd)
    job pmix_three_launches 3 -x PYTHONPATH="$SRC/python" -x RCOLL_LIBRARY="$BUILD/src/librcoll.so" \
        -- "$py" "$TMP/three.py" "$TMP/three"
    check pmix_three_launches three
else
    skip pmix_three_launches "no python3 with numpy"
fi

check_summary
