#!/bin/sh
# failover_repeat.sh BUILD N - the rdma suite's check 11 (link failover and failback mid
# all-reduce, tests/rdma/in_vm.sh) run N times in a row, for a failure that shows in a
# fraction of runs.  Runs inside the Soft-RoCE VM, as root:
#   tools/rxe-vm --timeout 1300 --include build/tools/rcoll-run --include build/tests/mn_check \
#       --include tests/rdma/failover_repeat.sh -- /bin/sh $PWD/tests/rdma/failover_repeat.sh \
#       $PWD/build 30
# Makes the second link (veth2/veth3, rxe2/rxe3), then per run: 2 ranks over verbs run 14 s of
# 4 MiB all-reduces checked element by element, veth1 goes down 5 s in and up 5 s later; a
# run passes when both ranks exit 0 having found no wrong element, with 4 moves and 4 moves
# back said.  A failing run's last
# 45 lines are printed (the moves are said at WARN, verbs INFO lines are on); with N=1 a passing
# run's moves and loop lines too (the rdma suite's check 11 is this script with N=1, in_vm.sh).
# Ends with "failover_repeat: P passed, F failed" and exit status 1 when any failed.  The second
# link stays (the suite's check 12 uses it).
BUILD=$1
N=${2:-10}
[ -x "$BUILD/tests/mn_check" ] || { echo "usage: $0 BUILD N (no $BUILD/tests/mn_check)"; exit 2; }
export RCOLL_SHM_DISABLE=1 RCOLL_TIMEOUT=60
ip link add veth2 type veth peer name veth3 && ip link set veth2 up && ip link set veth3 up &&
    rdma link add rxe2 type rxe netdev veth2 && rdma link add rxe3 type rxe netdev veth3 ||
    { echo "failover_repeat: the second link could not be made"; exit 1; }
sleep 2
out=${TMPDIR:-/tmp}/failover_repeat.$$
pass=0
fail=0
i=0
while [ $i -lt "$N" ]; do
    i=$((i + 1))
    RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=VERBS RCOLL_NET=verbs RCOLL_IB_FAILOVER=on \
        RCOLL_IB_TIMEOUT=14 timeout 120 "$BUILD/tools/rcoll-run" -n 2 "$BUILD/tests/mn_check" \
        --loop 14 >"$out" 2>&1 &
    job=$!
    sleep 5
    ip link set veth1 down
    sleep 5
    ip link set veth1 up
    wait $job
    rc=$?
    moved=$(grep -c 'connection with .* moved from rxe[01] port 1 to rxe[23] port 1' "$out")
    back=$(grep -c 'connection with .* went back from rxe[23] port 1 to rxe[01] port 1' "$out")
    right=$(grep -c 'loop: .* 0 wrong element' "$out")
    if [ $rc = 0 ] && [ "$right" = 2 ] && [ "$moved" = 4 ] && [ "$back" = 4 ]; then
        pass=$((pass + 1))
        echo "run $i ok"
        [ "$N" = 1 ] && grep -E 'moved from|went back|loop:' "$out" | cut -c1-300 | head -n 20
    else
        fail=$((fail + 1))
        echo "run $i FAIL rc=$rc right=$right moved=$moved back=$back"
        cut -c1-300 "$out" | tail -n 45
    fi
    sleep 1
done
rm -f "$out"
echo "failover_repeat: $pass passed, $fail failed"
[ $fail = 0 ]
