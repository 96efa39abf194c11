#!/usr/bin/env bash
# Every perf binary, launched by rcoll-run with 4 local ranks as the README shows, must finish
# with exit 0 and "Out of bounds values : 0 OK" (its own independent correctness check),
# including every datatype and op, and every root for the rooted ones.
set -u
build=$1
run="$build/tools/rcoll-run"
pass=0
fail=0
# check NAME ARGS...: 4 ranks of NAME; passes on exit 0 and exactly WANT_N lines matching the
# extended regex WANT_RE (default: the nccl-tests verdict line, once). NRANKS overrides 4.
check() {
    local name=$1
    shift
    local out rc want_re=${WANT_RE:-'Out of bounds values : 0 OK'} want_n=${WANT_N:-1}
    out=$(timeout 120 "$run" -q -n "${NRANKS:-4}" --timeout 100 "$build/bench/$name" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -cE "$want_re" <<<"$out")" = "$want_n" ]; then
        pass=$((pass + 1))
        echo "ok   $name $*"
    else
        fail=$((fail + 1))
        echo "FAIL $name $* (exit $rc)"
        tail -n 15 <<<"$out"
    fi
}
common=(-b 8 -e 256K -f 8 -n 2 -w 1)
check all_reduce_perf "${common[@]}" -d all -o all
check all_gather_perf "${common[@]}" -d all
check reduce_scatter_perf "${common[@]}" -d all -o all
check broadcast_perf "${common[@]}" -d all -r -1
check reduce_perf "${common[@]}" -d float,int8,half -o all -r -1
check alltoall_perf "${common[@]}" -d all
check sendrecv_perf "${common[@]}" -d all
check all_reduce_perf -b 1M -e 8M -f 8 -n 2 -w 1 -z 1
check reduce_scatter_perf -b 1M -e 8M -f 8 -n 2 -w 1 -m 3
# Single-copy shared memory (process_vm_readv where the kernel allows it, else the ring).
RCOLL_PROTO=cma RCOLL_ALGO=ring check all_reduce_perf -b 64K -e 4M -f 8 -n 2 -w 1
RCOLL_PROTO=cma check all_gather_perf -b 64K -e 4M -f 8 -n 2 -w 1
# imbalance_bench (no nccl-tests verdict line): a late rank's all-reduce, one row per sleep.
NRANKS=3 WANT_N=2 WANT_RE='^(\[0\] )? +4096 +(0|2000) +[0-9.]+$' \
    check imbalance_bench -b 4096 -s 0,2000 -n 5
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
