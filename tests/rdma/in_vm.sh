#!/bin/sh
# in_vm.sh BUILD - the rdma suite's checks, run inside tools/rxe-vm against real kernel verbs
# (Soft-RoCE rxe0 on veth0, rxe1 on veth1): the transport's conformance suite, a port flap
# that changes a GID, rcoll-info's device listing, all_reduce_perf and the collective matrix
# with RCOLL_NET=verbs, a link taken down under a running job (and, with a second link made
# last, failover and failback), and the NCCL net plugin's
# conformance test over verbs (also with GPUDirect RDMA forced, RCOLL_IB_GDR=peermem), and
# the NIC each rank takes next to its GPU (TOPOLOGY_FIXTURE: tests/fixtures/vm_rxe_2gpu.json)
# and point-to-point between GPUs over GPUDirect RDMA.  POSIX sh (busybox): prints one verdict
# per check, then a summary, and exits non-zero if any check failed.
BUILD=${1:?usage: in_vm.sh BUILD [TOPOLOGY_FIXTURE]}
FIXTURE=${2:-}
TMP=/tmp/rdma-suite
mkdir -p "$TMP"
pass=0
fail=0
verdict() { # NAME STATUS
    if [ "$2" = 0 ]; then pass=$((pass + 1)); echo "ok   $1"; else fail=$((fail + 1)); echo "FAIL $1"; fi
}
show() { echo "---- $1"; tail -n "${2:-40}" "$1"; echo "----"; }

export RCOLL_SHM_DISABLE=1 RCOLL_TIMEOUT=60

# 1. rcoll-info lists both ports with a chosen (starred) GID
"$BUILD/tools/rcoll-info" >"$TMP/info" 2>&1
st=1
grep -q 'verbs  device 0: rxe' "$TMP/info" && grep -q 'verbs  device 1: rxe' "$TMP/info" &&
    grep -q '^ *\* \[[0-9]*\] ' "$TMP/info" &&
    grep -q 'GPUDirect RDMA: rxe0 registers no CUDA memory: its kernel driver takes no dma-buf' \
        "$TMP/info" && st=0
[ $st = 0 ] || show "$TMP/info"
verdict "rcoll-info lists rxe0/rxe1, the GID it picks and why no GPUDirect RDMA" $st
grep -A6 'verbs  device 0' "$TMP/info"

# 2. the transport's conformance suite
"$BUILD/tests/test_transport_verbs" >"$TMP/conf" 2>&1
st=$?
cat "$TMP/conf"
verdict "verbs conformance suite" $st

# 2b. a port flap that changes the port's GID (veth0 down, a new MAC, up: rxe0's default GIDs
#     follow the MAC): a connection made afterwards uses the new GID (it used the one read at
#     init, which nothing answers any more: "retry exceeded"); the MAC is restored after
"$BUILD/tests/test_transport_verbs" --gid-flap >"$TMP/flap" 2>&1
st=$?
cat "$TMP/flap"
verdict "a port flap changes the GID: later connections use the new one" $st

# 3. all_reduce_perf over verbs, rank 0 on rxe0 and rank 1 on rxe1
RCOLL_NET=verbs RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT,VERBS timeout 300 \
    "$BUILD/tools/rcoll-run" -n 2 "$BUILD/bench/all_reduce_perf" -b 8 -e 4M -f 8 -n 5 -w 1 \
    >"$TMP/perf" 2>&1
st=$?
if [ $st = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/perf" &&
    grep -q 'reaches 1 peer over verbs' "$TMP/perf" && grep -q 'connection rxe0' "$TMP/perf" &&
    grep -q 'connection rxe1' "$TMP/perf"; then st=0; else st=1; show "$TMP/perf" 60; fi
grep -v ' INFO ' "$TMP/perf" | tail -n 20
verdict "all_reduce_perf, 2 ranks over verbs (rxe0 <-> rxe1)" $st

# 4. the collective matrix with every rank on verbs (ranks alternate rxe0/rxe1)
MATRIX_TRANSPORT=verbs timeout 900 "$BUILD/tests/test_coll_matrix" 4 >"$TMP/matrix" 2>&1
st=$?
tail -n 8 "$TMP/matrix"
[ $st = 0 ] || show "$TMP/matrix" 60
verdict "collective matrix over verbs, 1-4 ranks" $st

# 5. the transport microbenchmark runs over verbs (rxe under QEMU: not performance numbers)
timeout 300 "$BUILD/bench/rcoll_net_perf" -t verbs -a -e 1M -n 20 >"$TMP/bw" 2>&1 &&
    timeout 300 "$BUILD/bench/rcoll_net_perf" -t verbs --lat -a -e 64K -n 50 >"$TMP/lat" 2>&1
st=$?
cat "$TMP/bw" "$TMP/lat" | grep -v '^ *$' | head -n 40
verdict "rcoll_net_perf bw and lat over verbs" $st

# 6. veth1 taken down under a running job: every rank fails, naming its peer, no hang
RCOLL_NET=verbs RCOLL_IB_TIMEOUT=14 RCOLL_TIMEOUT=20 timeout 120 \
    "$BUILD/tools/rcoll-run" -n 2 "$BUILD/bench/all_reduce_perf" -b 16M -e 16M -n 100000 -w 1 \
    >"$TMP/down" 2>&1 &
job=$!
sleep 8
ip link set veth1 down
wait $job
rc=$?
ip link set veth1 up
st=1
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q '^\[0\].*rank 1' "$TMP/down" &&
    grep -q '^\[1\].*rank 0' "$TMP/down"; then st=0; fi
grep -i 'error\|fail\|warn' "$TMP/down" | head -n 12
[ $st = 0 ] || show "$TMP/down"
verdict "link down mid-job: both ranks fail naming the peer (rc=$rc)" $st

# 7. the NCCL net plugin (libnccl-net-rcoll.so) driven as NCCL's proxy drives it, over verbs
if [ -f "$BUILD/src/plugin/libnccl-net-rcoll.so" ]; then
    RCOLL_NET=verbs timeout 600 "$BUILD/tests/test_plugin_conf" \
        "$BUILD/src/plugin/libnccl-net-rcoll.so" >"$TMP/plugin" 2>&1
    st=$?
    tail -n 12 "$TMP/plugin"
    [ $st = 0 ] || show "$TMP/plugin" 60 # RCOLL_NET=verbs: the plugin fails without verbs
    verdict "NCCL net plugin conformance over verbs (every exported version)" $st

    # 8. the same with RCOLL_IB_GDR=peermem: NCCL_PTR_CUDA reported, CUDA-typed buffers
    #    (untouchable by the host once registered) sent, received and flushed
    RCOLL_NET=verbs RCOLL_IB_GDR=peermem timeout 600 "$BUILD/tests/test_plugin_conf" \
        "$BUILD/src/plugin/libnccl-net-rcoll.so" >"$TMP/plugin_gdr" 2>&1
    st=$?
    tail -n 6 "$TMP/plugin_gdr"
    [ $st = 0 ] || show "$TMP/plugin_gdr" 60
    verdict "NCCL net plugin over verbs with GPUDirect RDMA (RCOLL_IB_GDR=peermem)" $st
fi

# 9. the NIC nearest each rank's GPU: the scripted CUDA driver's two GPUs, a topology file
#    that puts GPU 0 next to rxe1 and GPU 1 next to rxe0 (the opposite of spreading by
#    rank), all_reduce_perf on device memory: each rank listens on the NIC of its GPU
if [ -f "$BUILD/tests/libcuda_script.so" ] && [ -n "$FIXTURE" ] && [ -f "$FIXTURE" ]; then
    RCOLL_NET=verbs RCOLL_CUDA_LIB="$BUILD/tests/libcuda_script.so" CUDA_SCRIPT_DEVICES=2 \
        RCOLL_TOPO_FILE="$FIXTURE" RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT timeout 300 \
        "$BUILD/tools/rcoll-run" -n 2 "$BUILD/bench/all_reduce_perf" --memtype cuda -b 8 \
        -e 1M -f 32 -n 3 -w 1 >"$TMP/gpunic" 2>&1
    st=$?
    if [ $st = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/gpunic" &&
        grep -q 'rank 0: verbs device 1, nearest to its GPU: GPU 0000:19:00.0 is PIX to rxe1' \
            "$TMP/gpunic" &&
        grep -q 'rank 1: verbs device 0, nearest to its GPU: GPU 0000:1a:00.0 is PIX to rxe0' \
            "$TMP/gpunic"; then st=0; else st=1; show "$TMP/gpunic" 60; fi
    grep 'nearest to its GPU' "$TMP/gpunic"
    verdict "each rank on the NIC nearest its GPU (scripted GPUs, topology file)" $st

    # 10. point-to-point between GPUs over GPUDirect RDMA: the scripted driver's device memory
    #     made registrable (CUDA_SCRIPT_DEVICE_VISIBLE), RCOLL_IB_GDR=peermem; sendrecv_perf on
    #     device buffers: right results and no byte staged (the driver's copy counters stay 0);
    #     with RCOLL_NET_GDR_LEVEL=LOC the same run is staged and says why
    gdr_run() { # OUT MAXBYTES [ENV...]
        out=$1
        max=$2
        shift 2
        env "$@" RCOLL_NET=verbs RCOLL_IB_GDR=peermem RCOLL_CUDA_LIB="$BUILD/tests/libcuda_script.so" \
            CUDA_SCRIPT_DEVICES=2 CUDA_SCRIPT_DEVICE_VISIBLE=1 CUDA_SCRIPT_STATS=1 \
            RCOLL_TOPO_FILE="$FIXTURE" RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT timeout 300 \
            "$BUILD/tools/rcoll-run" -n 2 "$BUILD/bench/sendrecv_perf" --memtype cuda -b 8 \
            -e "$max" -f 16 -n 3 -w 1 >"$out" 2>&1
    }
    gdr_run "$TMP/gdr" 4M
    st=$?
    if [ $st = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/gdr" &&
        [ "$(grep -c 'cuda-script: .* htod_bytes 0 dtoh_bytes 0 ' "$TMP/gdr")" = 2 ] &&
        grep -q 'rank 0: point-to-point with CUDA buffers of GPU 0000:19:00.0 over verbs rxe1: GPUDirect RDMA for buffers on whole pages of their allocation (GPU 0 and rxe1 are PIX' \
            "$TMP/gdr"; then st=0; else st=1; show "$TMP/gdr" 60; fi
    grep -E 'point-to-point|cuda-script' "$TMP/gdr"
    verdict "point-to-point GPU to GPU over GPUDirect RDMA, nothing staged" $st
    # a 1 KiB allocation holds no whole page: staged (a registration covers whole pages)
    gdr_run "$TMP/gdr_small" 1K
    st=$?
    if [ $st = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/gdr_small" &&
        [ "$(grep -c 'cuda-script: .* htod_bytes 0 dtoh_bytes 0 ' "$TMP/gdr_small")" = 0 ]
    then st=0; else st=1; show "$TMP/gdr_small" 60; fi
    verdict "GPUDirect RDMA: a buffer not on whole pages of its allocation is staged" $st
    # each side decides alone, the wire is the same: rank 0 stages (RCOLL_NET_GDR_LEVEL=LOC
    # there only), rank 1 goes direct
    env RCOLL_NET=verbs RCOLL_IB_GDR=peermem RCOLL_CUDA_LIB="$BUILD/tests/libcuda_script.so" \
        CUDA_SCRIPT_DEVICES=2 CUDA_SCRIPT_DEVICE_VISIBLE=1 CUDA_SCRIPT_STATS=1 \
        RCOLL_TOPO_FILE="$FIXTURE" timeout 300 "$BUILD/tools/rcoll-run" -n 2 \
        sh -c '[ "$RCOLL_RANK" = 0 ] && export RCOLL_NET_GDR_LEVEL=LOC; exec "$0" "$@"' \
        "$BUILD/bench/sendrecv_perf" --memtype cuda -b 8 -e 4M -f 16 -n 3 -w 1 \
        >"$TMP/gdr_mixed" 2>&1
    st=$?
    if [ $st = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/gdr_mixed" &&
        grep -q '^\[1\] cuda-script: .* htod_bytes 0 dtoh_bytes 0 ' "$TMP/gdr_mixed" &&
        ! grep -q '^\[0\] cuda-script: .* htod_bytes 0 ' "$TMP/gdr_mixed"
    then st=0; else st=1; show "$TMP/gdr_mixed" 60; fi
    verdict "GPUDirect on one side, staging on the other: the same bytes on the wire" $st
    gdr_run "$TMP/gdr_loc" 4M RCOLL_NET_GDR_LEVEL=LOC
    st=$?
    if [ $st = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/gdr_loc" &&
        [ "$(grep -c 'cuda-script: .* htod_bytes 0 dtoh_bytes 0 ' "$TMP/gdr_loc")" = 0 ] &&
        grep -q 'staged through host memory (GPU 0 and rxe1 are PIX.*up to LOC' "$TMP/gdr_loc"
    then st=0; else st=1; show "$TMP/gdr_loc" 60; fi
    verdict "RCOLL_NET_GDR_LEVEL=LOC: the same run staged, saying why" $st
else
    echo "skip the NIC-by-GPU check: no scripted CUDA library (built without CUDA) or fixture"
fi

# 11. link failover and failback: a second link (veth2/veth3, rxe2/rxe3) made here, last, so
#     that the checks above see two ports; 2 ranks (rank 0 on rxe0, rank 1 on rxe1) run 14 s of
#     4 MiB all-reduces over verbs, each checked element by element (mn_check --loop); veth1
#     goes down 5 s in (rxe0 and rxe1 lose their link) and up 5 s later.  Every connection
#     moves to rxe2/rxe3 and back, no element is wrong, each move is said once.  The run is
#     failover_repeat.sh's, once (that script repeats it to find what fails in a few runs).
sh "$(dirname "$0")/failover_repeat.sh" "$BUILD" 1 >"$TMP/failover" 2>&1
st=$?
grep -E 'moved from|went back|loop:|run 1|failover_repeat:' "$TMP/failover" | cut -c1-300 |
    head -n 24
[ $st = 0 ] || show "$TMP/failover" 60
verdict "link failover: veth1 down and up mid all-reduce, 4 moves and 4 back, 0 wrong" $st
if ip link show veth2 >/dev/null 2>&1 && [ -d /sys/class/infiniband/rxe2 ]; then
    # 12. the link dies while no rank calls (mn_check --idle: 2 s of all-reduces, 8 s without
    #     a call, 4 s more): the connections move at the next call, after far longer than
    #     RCOLL_IB_FAILOVER_TIMEOUT=1 (which runs only while sends wait: a rank that is
    #     computing is no reason to fail); every all-reduce after is right
    RCOLL_NET=verbs RCOLL_IB_FAILOVER=on RCOLL_IB_TIMEOUT=14 RCOLL_IB_FAILOVER_TIMEOUT=1 \
        timeout 120 "$BUILD/tools/rcoll-run" -n 2 "$BUILD/tests/mn_check" --idle 8 \
        >"$TMP/idle" 2>&1 &
    job=$!
    sleep 6
    ip link set veth1 down
    wait $job
    rc=$?
    ip link set veth1 up
    st=1
    moved=$(grep -c 'connection with .* moved from rxe[01] port 1 to rxe[23] port 1' "$TMP/idle")
    if [ $rc = 0 ] && [ "$(grep -c 'loop: .* 0 wrong element' "$TMP/idle")" = 4 ] &&
        [ "$moved" = 4 ]; then st=0; fi
    grep -E 'moved from|loop:|rror' "$TMP/idle" | head -n 12
    [ $st = 0 ] || show "$TMP/idle" 60
    verdict "link failover: veth1 down while the ranks compute, moved at the next call (rc=$rc)" $st
else
    verdict "link failover: a second link (veth2/veth3, rxe2/rxe3) could not be made" 1
fi

echo "rdma suite: $pass passed, $fail failed"
[ $fail = 0 ]
