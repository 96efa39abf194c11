#!/usr/bin/env bash
# Every perf binary, launched by rcoll-run with 4 local ranks as the README shows, must finish
# with exit 0 and "Out of bounds values : 0 OK" (its own independent correctness check),
# including every datatype and op, and every root for the rooted ones.
set -u
build=$1
run="$build/tools/rcoll-run"
pass=0
fail=0
skipped=0
# check NAME ARGS...: 4 ranks of NAME; passes on exit WANT_RC (default 0) and exactly WANT_N
# lines matching the extended regex WANT_RE (default: the nccl-tests verdict line, once).
# NRANKS overrides 4.
# SINGLE_COPY=1 also wants every shared-memory connection accepted with single-copy on (the
# SHM INFO line, once per connection), so that a cma case cannot pass over the copy ring.
check() {
    local name=$1
    shift
    local out rc want_re=${WANT_RE:-'Out of bounds values : 0 OK'} want_n=${WANT_N:-1} why=""
    local on='shm: accepted a connection from pid [0-9]+: .*single-copy on$'
    local off='shm: accepted a connection from pid [0-9]+: .*single-copy off$'
    out=$(timeout 120 "$run" -q -n "${NRANKS:-4}" --timeout 100 "$build/bench/$name" "$@" 2>&1)
    rc=$?
    if [ $rc -ne "${WANT_RC:-0}" ] || [ "$(grep -cE "$want_re" <<<"$out")" != "$want_n" ]; then
        why="exit $rc"
    elif [ "${SINGLE_COPY:-0}" = 1 ] && { ! grep -qE "$on" <<<"$out" || grep -qE "$off" <<<"$out"; }; then
        why="single-copy not on for every connection: $(grep -cE "$on" <<<"$out") on, $(grep -cE "$off" <<<"$out") off"
        # process_vm_readv refused by the kernel: root can always read its own processes;
        # another user under Yama's ptrace_scope may not, and there it is a counted skip
        if [ "$(id -u)" != 0 ] && grep -q 'single-copy (process_vm_readv) unavailable' <<<"$out"; then
            skipped=$((skipped + 1))
            echo "SKIP $name $*: $(grep -m1 -o 'single-copy (process_vm_readv) unavailable.*' <<<"$out")"
            return
        fi
    fi
    if [ -z "$why" ]; then
        pass=$((pass + 1))
        echo "ok   $name $*"
    else
        fail=$((fail + 1))
        echo "FAIL $name $* ($why)"
        tail -n 15 <<<"$out"
    fi
}
common=(-b 8 -e 256K -f 8 -n 2 -w 1)
check all_reduce_perf "${common[@]}" -d all -o all
check all_gather_perf "${common[@]}" -d all
check reduce_scatter_perf "${common[@]}" -d all -o all
check broadcast_perf "${common[@]}" -d all -r -1
check reduce_perf "${common[@]}" -d float,int8,half,int16,bool -o all -r -1
check alltoall_perf "${common[@]}" -d all
check sendrecv_perf "${common[@]}" -d all
check gather_perf "${common[@]}" -d all -r -1
check scatter_perf "${common[@]}" -d all -r -1
check all_reduce_perf -b 1M -e 8M -f 8 -n 2 -w 1 -z 1
check reduce_scatter_perf -b 1M -e 8M -f 8 -n 2 -w 1 -m 3
# Single-copy shared memory (process_vm_readv), checked to be on for every connection.
RCOLL_PROTO=cma RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=SHM SINGLE_COPY=1 RCOLL_ALGO=ring \
    check all_reduce_perf -b 64K -e 4M -f 8 -n 2 -w 1
RCOLL_PROTO=cma RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=SHM SINGLE_COPY=1 \
    check all_gather_perf -b 64K -e 4M -f 8 -n 2 -w 1
# imbalance_bench (no nccl-tests verdict line): a late rank's all-reduce, one row per sleep.
NRANKS=3 WANT_N=2 WANT_RE='^(\[0\] )? +4096 +(0|2000) +[0-9.]+$' \
    check imbalance_bench -b 4096 -s 0,2000 -n 5
# -M 1: the library's memory by part after the sweep (rcoll_comm_mem_stats); 3 ranks on one
# host, every peer connected by the all-reduce, staging and host segment in use.
NRANKS=3 WANT_RE='by part: state [0-9.]+ [KM]?B, staging [0-9.]+ [KM]B, host segment [0-9.]+ [KM]B, GPU staging 0 B; [2-4] connections to 2 of 2 peers' \
    check all_reduce_perf -b 1M -e 1M -n 2 -w 1 -M 1
# Only pairs rcoll does not define (a bitwise op on a float): a usage error (6) saying why.
NRANKS=2 WANT_RC=6 WANT_RE='band, bor and bxor take integer and bool types' \
    check all_reduce_perf -b 8 -e 8 -d float,half -o bxor
echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
