#!/usr/bin/env bash
# run_multinode.sh BUILD SRC - the multinode suite: rcoll jobs spread over several emulated
# hosts (network namespaces on this machine, built by SRC/tools/netns-cluster).
#   mn_check_*      tests/multinode/mn_check on 2x2, 3x1, 4x1, 4x2 (hosts x ranks per host),
#                   with small chunks, each all-reduce algorithm, shm disabled, a 1gbit cap;
#                   every rank must pass and log the expected transports (shm within a host,
#                   tcp between hosts, from RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT)
#   *_plugin        mn_check and all_reduce_perf on 2x2 with RCOLL_NET=plugin: rcoll's own
#                   libnccl-net-rcoll.so loaded as rcoll's network transport between hosts
#   *_perf_*        the perf binaries with their data check ("Out of bounds values : 0 OK")
#   all_gather_{bruck,rd}_*  the log-step all-gathers across hosts, data checked
#   kill_*          a host dies mid-run (SIGKILL; or link down first): the survivors must
#                   fail in time and name the dead rank
#   rate_1gbit_2x1  all_reduce_perf busbw stays under 0.125 GB/s behind --rate 1gbit
#   mpirun_*        Open MPI's mpirun in host 0 (netns-cluster --launcher) starting the ranks
#                   on every host through tools/netns-agent: mn_check and all_reduce_perf
#                   through the library's PMIx launch (no RCOLL_ROOT), a torch DDP job
#   slurm_*         a Slurm cluster on the hosts (tools/slurm-cluster: munged, slurmctld, one
#                   slurmd per host): srun -N 4 -n 8 mn_check and all_reduce_perf through
#                   PMIx (mpi/pmix), all_reduce_perf with --mpi=none and RCOLL_ROOT, a torch
#                   DDP job; one cluster for all of them (slurm_cluster_up times its start)
#   projection_4x1  4 MiB ring all-reduce on 4 hosts within 15% of rcoll-info --project
#   cleanup         no namespace is left
# One verdict line per case ("SKIP NAME: why" for a case this machine cannot run: no mpirun,
# no PMIx in the build, no torch) and a summary "N passed, M failed, K skipped"; exit 1 on
# any failure, 77 (skip) where namespaces cannot be made (not root, no veth or bridge).
# MULTINODE_KEEP_LOGS=1 keeps the job logs.
set -u

build=${1:?usage: run_multinode.sh BUILD SRC}
src=${2:?usage: run_multinode.sh BUILD SRC}
cluster="$src/tools/netns-cluster"
mn_check="$build/tests/mn_check"
allreduce="$build/bench/all_reduce_perf"

if ! why=$("$cluster" --check 2>&1); then
    echo "SKIP: multinode: $why"
    exit 77
fi
for f in "$mn_check" "$build/tools/rcoll-info" "$build"/bench/{all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv}_perf; do
    if [[ ! -x $f ]]; then
        echo "FAIL: $f is missing (build first: ninja -C $build)"
        exit 1
    fi
done

logdir=$(mktemp -d "${TMPDIR:-/tmp}/rcoll-multinode.XXXXXX")
keep_logs=${MULTINODE_KEEP_LOGS:-0}
trap '[[ $keep_logs == 1 ]] || rm -rf "$logdir"' EXIT
ns_prefix="rcmn$$c" # every case's namespaces start with this; checked at the end
case_no=0
pass=0
fail=0
skip=0
failed=()
suite_t0=${EPOCHREALTIME/[.,]/}

# Seconds since a microsecond timestamp, with one decimal.
elapsed_since() {
    local us=$((${EPOCHREALTIME/[.,]/} - $1))
    printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}

# run_cluster NAME CLUSTER-OPTIONS... -- COMMAND...: runs the job, output in $log, status in
# $rc, wall time in $secs.
run_cluster() {
    local name=$1 t0
    shift
    case_no=$((case_no + 1))
    log="$logdir/$case_no-$name.log"
    t0=${EPOCHREALTIME/[.,]/}
    "$cluster" --prefix "$ns_prefix$case_no-" "$@" >"$log" 2>&1 </dev/null
    rc=$?
    secs=$(elapsed_since "$t0")
}

# verdict NAME PROBLEMS DETAIL: PROBLEMS empty means the case passed.
verdict() {
    local name=$1 problems=$2 detail=$3
    if [[ -z $problems ]]; then
        pass=$((pass + 1))
        printf 'ok   %-26s %6s s  %s\n' "$name" "$secs" "$detail"
    else
        fail=$((fail + 1))
        failed+=("$name")
        printf 'FAIL %-26s %6s s  %s\n' "$name" "$secs" "$problems"
        echo "---- last lines of $name (exit status $rc):"
        tail -n 40 "$log" | sed 's/^/    /'
        echo "----"
    fi
}

# skip_case NAME WHY: a case this machine cannot run, counted and named (never a pass).
skip_case() {
    skip=$((skip + 1))
    printf 'SKIP %s: %s\n' "$1" "$2"
}

# Output lines of one rank, without the "[h<i>r<r>] " prefix.
rank_lines() {
    sed -n "s/^\\[h[0-9]*r$2\\] //p" "$1"
}

# check_mn_ranks NRANKS SHM TCP [NET]: every rank printed mn_check's OK line and logged that
# it reaches SHM peers over shm and TCP peers over tcp, or over the network transport NET
# (nothing else). Prints the problems.
check_mn_ranks() {
    local n=$1 shm=$2 tcp=$3 net=${4:-tcp} r lines reach want
    want=
    ((shm == 0)) || want+="$shm over shm;"
    ((tcp == 0)) || want+="$tcp over $net;"
    for ((r = 0; r < n; r++)); do
        lines=$(rank_lines "$log" "$r")
        grep -q "^mn_check: rank $r of $n .*: OK" <<<"$lines" || echo -n "rank $r: no OK line; "
        reach=$(sed -n "s/.*rank $r reaches \\([0-9]*\\) peers\\{0,1\\} over \\([a-z]*\\)$/\\1 over \\2;/p" \
            <<<"$lines" | sort | tr -d '\n')
        [[ $reach == "$want" ]] || echo -n "rank $r reaches '$reach', expected '$want'; "
    done
}

mn_case() { # NAME HOSTS RANKS_PER_HOST SHM_PEERS TCP_PEERS [CLUSTER OPTIONS...]
    local name=$1 hosts=$2 k=$3 shm=$4 tcp=$5 problems
    shift 5
    run_cluster "$name" --hosts "$hosts" --ranks-per-host "$k" --timeout 120 \
        --env RCOLL_DEBUG=INFO --env RCOLL_DEBUG_SUBSYS=INIT "$@" -- "$mn_check"
    problems=$(check_mn_ranks $((hosts * k)) "$shm" "$tcp")
    ((rc == 0)) || problems="exit status $rc; $problems"
    verdict "$name" "$problems" "$((hosts * k)) ranks OK; each reaches $shm peer(s) over shm, $tcp over tcp"
}

echo "multinode: rcoll over emulated hosts (tools/netns-cluster); logs in $logdir"

# The tool's usage text, whole: a bad option value ends with it, the Defaults line last (a
# longer synopsis once cut that line off).
case_no=$((case_no + 1))
log="$logdir/$case_no-usage_text.log"
"$cluster" --links 3 -- true >"$log" 2>&1
rc=$?
secs=0.0
problems=''
((rc == 2)) || problems+="exit status $rc, expected 2; "
grep -q '^Defaults: 2 hosts' "$log" || problems+="the usage text lacks its Defaults line; "
grep -q -- '--links 2 \[--cut-link' "$log" || problems+="the usage text lacks --links; "
verdict usage_text "$problems" "--links 3: exit 2, the whole usage text"

# --- correctness and transport choice ----------------------------------------------------------
mn_case mn_check_2x2 2 2 1 2
mn_case mn_check_3x1 3 1 0 2
mn_case mn_check_4x1 4 1 0 3
# 8 ranks on this machine's few CPUs: waiting ranks yield at once instead of spinning.
mn_case mn_check_4x2 4 2 1 6 --env RCOLL_SPIN=0
# Small pipeline chunks: every count above a few KiB takes the multi-chunk paths.
mn_case mn_check_2x2_chunk8k 2 2 1 2 --env RCOLL_CHUNK_SIZE=8K
# Each all-reduce algorithm that works across hosts, with a non-power-of-two rank count.
for algo in ring rd tree; do
    mn_case "mn_check_3x1_$algo" 3 1 0 2 --env "RCOLL_ALGO=$algo"
done

# Ranks on one host over TCP as well (through the host's own address, i.e. its loopback).
mn_case mn_check_2x2_noshm 2 2 0 3 --env RCOLL_SHM_DISABLE=1
# Zero configuration: every host has a stray interface listed before eth0 (--stray: a veth
# going nowhere) with the same address 10.99.0.1 on every host, as a container bridge would;
# RCOLL_SOCKET_IFNAME is left empty.  Each rank takes stray0 first and listens on both; its
# peers find stray0's address unanswered (it is their own) and connect through eth0, each
# rank saying so once.  (Before: "tcp connect to 10.99.0.1:PORT: Connection refused".)
run_cluster mn_check_3x1_stray_iface --hosts 3 --ranks-per-host 1 --timeout 120 \
    --stray 10.99.0.1/24 --env RCOLL_SOCKET_IFNAME= --env RCOLL_DEBUG=INFO \
    --env RCOLL_DEBUG_SUBSYS=INIT,TCP -- "$mn_check"
problems=$(check_mn_ranks 3 0 2)
((rc == 0)) || problems="exit status $rc; $problems"
for r in 0 1 2; do
    rank_lines "$log" "$r" | grep -q 'tcp: device stray0 (10.99.0.1' ||
        problems+="rank $r did not take stray0 first; "
    n=$(rank_lines "$log" "$r" | grep -c "WARN TCP tcp: a peer's first address did not answer")
    ((n <= 1)) || problems+="rank $r warned $n times; "
done
nw=$(grep -c "WARN TCP tcp: a peer's first address did not answer" "$log")
((nw >= 1)) || problems+="no rank said it connected through another address; "
verdict mn_check_3x1_stray_iface "$problems" "3 ranks OK, stray0 first on each, over tcp through eth0 ($nw warnings, at most one a rank)"

# The same hosts, and a unique id instead of RCOLL_ROOT: rank 0 makes it with
# rcoll_get_unique_id, whose root listens on stray0 and eth0, and the others read it from a
# file (as an MPI job would broadcast it).  The id's first address is 10.99.0.1, the others'
# own stray0: refused; they join through the id's alternative (eth0's address), each saying
# so once.  (Before: "could not connect to 10.99.0.1:PORT before the deadline".)
id_file="$logdir/stray-id.bin"
rm -f "$id_file"
run_cluster mn_check_3x1_stray_id --hosts 3 --ranks-per-host 1 --timeout 120 \
    --stray 10.99.0.1/24 --env RCOLL_SOCKET_IFNAME= --env RCOLL_TIMEOUT=30 \
    --env RCOLL_DEBUG=INFO --env RCOLL_DEBUG_SUBSYS=INIT,BOOTSTRAP \
    -- "$mn_check" --id-file "$id_file"
problems=$(check_mn_ranks 3 0 2)
((rc == 0)) || problems="exit status $rc; $problems"
for r in 1 2; do
    n=$(rank_lines "$log" "$r" | grep -c "WARN BOOTSTRAP the bootstrap root's first address 10.99.0.1:[0-9]* did not answer; joined through 198\.1[89]\.")
    ((n == 1)) || problems+="rank $r said $n times that it joined through the alternative; "
done
verdict mn_check_3x1_stray_id "$problems" "3 ranks OK from a unique id whose first address is stray0's: ranks 1 and 2 joined through eth0, saying so once"

# Link failover and failback: every host has two links (eth0 and eth1, two switches, two
# subnets; RCOLL_SOCKET_IFNAME=eth), so each rank listens on both and its connections can move.
# Host 1's eth0 goes down 4 s into 12 s of 4 MiB all-reduces, each checked element by element,
# and comes back 5 s later.  Connections through it move to eth1 (within the failover timeout,
# 2 s, plus the move) and go back once it answers; no all-reduce may fail or be wrong, and each
# process says each event once per address.  (Before: the job hung at the cut.)
run_cluster failover_link_3x1 --hosts 3 --ranks-per-host 1 --timeout 120 --links 2 \
    --cut-link 1 --cut-after 4 --restore-after 9 -- "$mn_check" --loop 12
problems=''
((rc == 0)) || problems="exit status $rc; "
longest=0
for r in 0 1 2; do
    lines=$(rank_lines "$log" "$r")
    grep -q "^mn_check: rank $r of 3 .*: OK" <<<"$lines" || problems+="rank $r: no OK line; "
    grep -q "^mn_check: rank $r: loop: [0-9]* all-reduces of 4 MiB in .*, 0 wrong element(s)" \
        <<<"$lines" || problems+="rank $r: no loop line with 0 wrong elements; "
    l=$(sed -n 's/.*, longest \([0-9.]*\) s .*/\1/p' <<<"$lines")
    [[ -n $l ]] && awk -v a="$l" -v b="$longest" 'BEGIN { exit !(a > b) }' && longest=$l
    n=$(grep -o 'WARN TCP tcp: path to [0-9.]*' <<<"$lines" | sort | uniq -d | wc -l)
    ((n == 0)) || problems+="rank $r said a lost path twice; "
    # Every path said lost was eth0's and comes back (a reset while going back is not a loss).
    for a in $(sed -n 's/.*WARN TCP tcp: path to \([0-9.:]*\) lost.*/\1/p' <<<"$lines"); do
        grep -q "WARN TCP tcp: $a answers again" <<<"$lines" ||
            problems+="rank $r said $a lost but never back; "
    done
done
nlost=$(grep -c 'WARN TCP tcp: path to .* lost' "$log")
nback=$(grep -c 'WARN TCP tcp: .* answers again: connections are back on it' "$log")
((nlost >= 2)) || problems+="$nlost lost-path warnings (expected the peers of host 1 and host 1 itself); "
((nback >= 2)) || problems+="$nback failback warnings; "
awk -v a="$longest" 'BEGIN { exit !(a < 7.0) }' || problems+="an all-reduce took $longest s; "
verdict failover_link_3x1 "$problems" \
    "3 ranks, 0 wrong; $nlost failovers, $nback failbacks said; longest all-reduce ${longest} s"

# Behind a 1 Gbit/s link: the sockets fill up and the transport must wait for the network.
mn_case mn_check_2x2_1gbit 2 2 1 2 --rate 1gbit

# rcoll over an NCCL net plugin (RCOLL_NET=plugin, transport "plugin"; the plugin is rcoll's
# own libnccl-net-rcoll.so, loaded by rcoll with dlopen): it carries the traffic between hosts,
# shm within one; then all_reduce_perf over it with its data check.
netplug="$build/src/plugin/libnccl-net-rcoll.so"
if [[ -f $netplug ]]; then
    run_cluster mn_check_2x2_plugin --hosts 2 --ranks-per-host 2 --timeout 120 \
        --env RCOLL_DEBUG=INFO --env RCOLL_DEBUG_SUBSYS=INIT --env RCOLL_NET=plugin \
        --env "RCOLL_NET_PLUGIN=$netplug" -- "$mn_check"
    problems=$(check_mn_ranks 4 1 2 plugin)
    ((rc == 0)) || problems="exit status $rc; $problems"
    verdict mn_check_2x2_plugin "$problems" \
        "4 ranks OK; each reaches 1 peer over shm, 2 over plugin"
    run_cluster all_reduce_perf_2x2_plugin --hosts 2 --ranks-per-host 2 --timeout 120 \
        --env RCOLL_SPIN=0 --env RCOLL_NET=plugin --env "RCOLL_NET_PLUGIN=$netplug" -- \
        "$allreduce" -b 8 -e 4M -f 4 -n 5 -c 1
    problems=''
    ((rc == 0)) || problems="exit status $rc; "
    rank_lines "$log" 0 | grep -q "^# Out of bounds values : 0 OK" ||
        problems+="rank 0 did not print '# Out of bounds values : 0 OK'"
    verdict all_reduce_perf_2x2_plugin "$problems" "RCOLL_NET=plugin: 0 out of bounds values"
else
    skip_case mn_check_2x2_plugin "libnccl-net-rcoll.so not built"
    skip_case all_reduce_perf_2x2_plugin "libnccl-net-rcoll.so not built"
fi

# --- the perf binaries, each with its own data check ---------------------------------------------
# perf_case NAME HOSTS RANKS_PER_HOST BINARY ARGS...: exit 0 everywhere and rank 0's
# "# Out of bounds values : 0 OK".
perf_case() {
    local name=$1 hosts=$2 k=$3 problems='' envs=()
    shift 3
    for e in ${PERF_ENV:-}; do envs+=(--env "$e"); done
    run_cluster "$name" --hosts "$hosts" --ranks-per-host "$k" --timeout 120 \
        --env RCOLL_SPIN=0 "${envs[@]}" -- "$build/bench/$1" "${@:2}"
    ((rc == 0)) || problems="exit status $rc; "
    rank_lines "$log" 0 | grep -q "^# Out of bounds values : 0 OK" ||
        problems+="rank 0 did not print '# Out of bounds values : 0 OK'"
    verdict "$name" "$problems" "${*:2}: 0 out of bounds values"
}
perf_case all_reduce_perf_2x2 2 2 all_reduce_perf -b 8 -e 4M -f 4 -n 5 -c 1
# The others on 3 hosts x 2 ranks, every datatype (and op, and root for the rooted ones).
small=(-b 8 -e 1M -f 8 -n 2 -w 1 -c 1)
perf_case all_gather_perf_3x2 3 2 all_gather_perf "${small[@]}" -d all
perf_case reduce_scatter_perf_3x2 3 2 reduce_scatter_perf "${small[@]}" -d all -o all
perf_case broadcast_perf_3x2 3 2 broadcast_perf "${small[@]}" -d all -r -1
perf_case reduce_perf_3x2 3 2 reduce_perf "${small[@]}" -d float,int8,half -o all -r -1
perf_case alltoall_perf_3x2 3 2 alltoall_perf "${small[@]}" -d all
perf_case sendrecv_perf_3x2 3 2 sendrecv_perf "${small[@]}" -d all
# The log-step all-gathers across hosts: Bruck's on 6 ranks (not a power of two), recursive
# doubling on 4, both with a chunk small enough for several pieces per round.
PERF_ENV="RCOLL_ALGO_ALLGATHER=bruck RCOLL_CHUNK_SIZE=8K" \
    perf_case all_gather_bruck_3x2 3 2 all_gather_perf "${small[@]}" -d all
PERF_ENV="RCOLL_ALGO_ALLGATHER=rd RCOLL_CHUNK_SIZE=8K" \
    perf_case all_gather_rd_2x2 2 2 all_gather_perf "${small[@]}" -d all

# --- a host dies in the middle of a run ----------------------------------------------------------
# kill_case NAME DEAD RCOLL_TIMEOUT LIMIT [CLUSTER OPTIONS...]: host DEAD of 3 (one rank
# each) is killed after 3 s of a long all-reduce; both survivors must fail (not hang, not
# pass) within LIMIT seconds of the start, and each must name rank DEAD in its output.
kill_case() {
    local name=$1 dead=$2 tmo=$3 limit=$4 problems='' r want statuses
    shift 4
    run_cluster "$name" --hosts 3 --timeout 90 --kill-host "$dead" --kill-after 3 "$@" \
        --env "RCOLL_TIMEOUT=$tmo" -- "$allreduce" -b 4M -e 4M -n 100000
    statuses=$(sed -n 's/.*netns-cluster: exit statuses: //p' "$log")
    ((rc != 124)) || problems+="the survivors hung (netns-cluster timed out); "
    for r in 0 1 2; do
        if ((r == dead)); then want="r$r=killed"; else want="r$r=[1-9][0-9]*"; fi
        [[ " $statuses " =~ \ $want\  ]] || problems+="rank $r: expected $want in '$statuses'; "
        ((r == dead)) && continue
        rank_lines "$log" "$r" | grep -q "rank $dead" || problems+="rank $r never names rank $dead; "
    done
    ((${secs%.*} < limit)) || problems+="took $secs s (limit $limit s); "
    verdict "$name" "$problems" "exit statuses $statuses, survivors name rank $dead"
}
# The killed processes' sockets close: the survivors see FIN/RST at once.
kill_case kill_host_3x1 2 20 33
# The host of rank 0, which also serves the bootstrap root, dies.
kill_case kill_root_host_3x1 0 20 33
# The host's link goes down before the kill: no FIN, no RST; only RCOLL_TIMEOUT can tell.
kill_case kill_host_link_down_3x1 2 10 30 --kill-link
# The same for rank 0's host: the root goes silent too, so no verdict comes; rank 2, waiting
# on the live rank 1, must still name rank 0 (its report to the root is never acknowledged).
kill_case kill_root_host_link_down_3x1 0 10 30 --kill-link
# Again on a split child with the ranks reversed: its rank 0 is world rank 2, a survivor, so
# the survivors must name the process that hosted the root by its pid, not the child's rank 0.
run_cluster kill_root_host_split_3x1 --hosts 3 --timeout 90 --kill-host 0 --kill-after 3 \
    --kill-link --env RCOLL_TIMEOUT=6 -- "$mn_check" --split-until-error
problems=''
statuses=$(sed -n 's/.*netns-cluster: exit statuses: //p' "$log")
dead_pid=$(rank_lines "$log" 0 | sed -n 's/.*rank 0 (pid \([0-9]*\)) is rank 2 of the reversed split.*/\1/p')
[[ -n "$dead_pid" ]] || problems+="rank 0 never reported its pid and child rank 2; "
[[ " $statuses " =~ \ r0=killed\  ]] || problems+="rank 0 not killed ('$statuses'); "
for r in 1 2; do
    [[ " $statuses " =~ \ r$r=2\  ]] || problems+="rank $r: expected r$r=2 in '$statuses'; "
    [[ -n "$dead_pid" ]] && ! rank_lines "$log" "$r" | grep 'split all-reduce failed' |
        grep -q "pid $dead_pid)" && problems+="rank $r does not name pid $dead_pid; "
done
((rc != 124)) || problems+="the survivors hung; "
((${secs%.*} < 25)) || problems+="took $secs s (limit 25 s); "
verdict kill_root_host_split_3x1 "$problems" "exit statuses $statuses, survivors name pid $dead_pid"

# --- who is stuck, across hosts (tools/rcoll-top --remote) ----------------------------------------
# A 2 x 2 all_reduce_perf job with RCOLL_RAS=1 runs on; rank 3 (host 1) is stopped.  rcoll-top,
# run on host 0 only, must list all four ranks, asking host 1 through its namespace
# (--remote), name rank 3 as not answering with ranks waiting on it, and without --remote
# list ranks 2 and 3 as remote, not asked.
case_no=$((case_no + 1))
log="$logdir/$case_no-rcoll_top_remote_2x2.log"
tp="${ns_prefix}top-"
t0=${EPOCHREALTIME/[.,]/}
"$cluster" --prefix "$tp" --hosts 2 --ranks-per-host 2 --timeout 120 --env RCOLL_RAS=1 \
    --env RCOLL_TIMEOUT=120 --env RCOLL_WATCHDOG_S=0 --env RCOLL_SPIN=0 -- \
    nice -n 10 "$allreduce" -b 64K -e 64K -n 1000 -N 0 -c 0 >"$log" 2>&1 </dev/null &
top_job=$!
problems=
p3=
for _ in $(seq 1 100); do # rank 3's process, once every rank answers on its host
    for p in $(pgrep -f "^$allreduce -b 64K -e 64K -n 1000 -N 0"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx RCOLL_RANK=3 && p3=$p
    done
    if [[ -n $p3 ]]; then
        n0=$(ip netns exec "${tp}h0" python3 "$src/tools/rcoll-top" --json --timeout 2 \
            --remote "ip netns exec ${tp}h{index}" 2>/dev/null |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print(len([r for r in d["rows"] if r["state"] in ("running", "idle", "stalled")]))' 2>/dev/null)
        [[ $n0 == 4 ]] && break
    fi
    sleep 0.2
done
[[ -n $p3 && $n0 == 4 ]] || problems+="the job's 4 ranks did not all answer (rank 3 pid '${p3:-?}', answering ${n0:-0}); "
if [[ -z $problems ]]; then
    kill -STOP "$p3"
    sleep 2.5
    ip netns exec "${tp}h0" python3 "$src/tools/rcoll-top" --json --stall 1 --timeout 2 \
        --remote "ip netns exec ${tp}h{index}" >"$logdir/top-remote.json" 2>&1
    trc=$?
    ip netns exec "${tp}h0" python3 "$src/tools/rcoll-top" --timeout 2 \
        --remote "ip netns exec ${tp}h{index}" >"$logdir/top-remote.txt" 2>&1
    ip netns exec "${tp}h0" python3 "$src/tools/rcoll-top" --json --timeout 2 \
        >"$logdir/top-local.json" 2>&1
    problems+=$(python3 - "$logdir/top-remote.json" "$logdir/top-local.json" "$p3" <<'PY'
import json, sys
out = []
d = json.load(open(sys.argv[1]))
p3 = int(sys.argv[3])
big = max({r["comm"] for r in d["rows"] if r["comm"] != "?"} or {"?"},
          key=lambda c: sum(1 for r in d["rows"] if r["comm"] == c))
rows = {r["rank"]: r for r in d["rows"] if r["comm"] == big or r["pid"] == p3}
if sorted(k for k in rows if k is not None) != [0, 1, 2, 3]:
    out.append(f"remote: ranks {sorted(k for k in rows if k is not None)}, not 0-3")
r3 = rows.get(3, {})
if r3.get("state") != "not answering" or r3.get("pid") != p3 or not r3.get("host", "").endswith("#1"):
    out.append(f"remote: rank 3 is {r3}")
st = [s for s in d["stuck"] if s["pid"] == p3]
if not st or not st[0]["waited_on_by"]:
    out.append(f"remote: rank 3 not named stuck with its waiters: {d['stuck']}")
loc = json.load(open(sys.argv[2]))
na = sorted(r["rank"] for r in loc["rows"] if r["state"] == "remote, not asked")
if na != [2, 3] or not any("not asked" in n for n in loc.get("notes", [])):
    out.append(f"local only: remote ranks not asked {na}, notes {loc.get('notes')}")
print("; ".join(out))
PY
)
    ((trc == 1)) || problems+="rcoll-top exit $trc (1: something is stuck); "
    kill -CONT "$p3"
fi
kill "$top_job" 2>/dev/null
wait "$top_job" 2>/dev/null
rc=0
secs=$(elapsed_since "$t0")
stuck_line=$(grep '^stuck:' "$logdir/top-remote.txt" 2>/dev/null | head -n 1)
verdict rcoll_top_remote_2x2 "$problems" "rank 3 on host 1 stopped, named from host 0: ${stuck_line:-?}"

# --- the rate cap --------------------------------------------------------------------------------
run_cluster rate_1gbit_2x1 --hosts 2 --rate 1gbit --timeout 120 -- \
    "$allreduce" -b 16M -e 16M -n 5 -c 1
problems=
((rc == 0)) || problems="exit status $rc; "
busbw=$(rank_lines "$log" 0 | sed -n 's/^# Avg bus bandwidth *: *//p')
if [[ -z $busbw ]]; then
    problems+="no '# Avg bus bandwidth' line; "
elif ! awk -v b="$busbw" 'BEGIN { exit !(b < 0.125) }'; then
    problems+="busbw $busbw GB/s is not below 0.125 GB/s (1 Gbit/s): the cap does not hold; "
fi
detail="busbw ${busbw:-?} GB/s at 16 MiB (limit 0.125 GB/s)"
if [[ -n $busbw ]] && awk -v b="$busbw" 'BEGIN { exit !(b < 0.08) }'; then
    detail+="; note: under 64% of the link, is the machine busy?"
fi
verdict rate_1gbit_2x1 "$problems" "$detail"

# --- launched by the cluster's engines: Open MPI's mpirun -----------------------------------------
# mpirun runs in host 0 (netns-cluster --launcher) and starts its daemons on the other hosts
# through tools/netns-agent (ip netns exec), one hostfile line per host; Open MPI's own traffic
# and rcoll's stay on eth0.  --tag-output's "[1,R]<stdout>:" becomes "[h0rR] " for rank_lines.
agent="$src/tools/netns-agent"
pymod="$src/python"
torch_c=$(find "$build/python" -maxdepth 1 -name '_torch_c*.so' 2>/dev/null | head -n 1)
have_pmix=0
"$build/tools/rcoll-info" 2>/dev/null | grep -q 'pmix launch' && have_pmix=1
have_torch=0
/usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
# The torch backend: meson's build of it, else rcoll.torch builds it on import, into the build
# dir (once, cached).
# gloo (the reference group) binds to what the host name resolves to unless told the link.
torch_env=(--env "PYTHONPATH=$pymod" --env "RCOLL_LIBRARY=$build/src/librcoll.so"
    --env GLOO_SOCKET_IFNAME=eth0)
if [[ -n $torch_c ]]; then
    torch_env+=(--env "RCOLL_TORCH_C=$torch_c")
    torch_x=(-x PYTHONPATH -x RCOLL_LIBRARY -x GLOO_SOCKET_IFNAME -x RCOLL_TORCH_C)
else
    torch_env+=(--env "RCOLL_TORCH_BUILD_DIR=$build/torch_c")
    torch_x=(-x PYTHONPATH -x RCOLL_LIBRARY -x GLOO_SOCKET_IFNAME -x RCOLL_TORCH_BUILD_DIR)
fi

# mpirun_case NAME HOSTS RANKS_PER_HOST [CLUSTER OPTIONS...] -- [MPIRUN OPTIONS...] -- COMMAND...
mpirun_case() {
    local name=$1 hosts=$2 k=$3 copts=() mopts=()
    shift 3
    while [[ $1 != -- ]]; do copts+=("$1"); shift; done
    shift
    while [[ $1 != -- ]]; do mopts+=("$1"); shift; done
    shift
    # shellcheck disable=SC2016 # expanded inside host 0
    run_cluster "$name" --hosts "$hosts" --ranks-per-host "$k" --launcher --timeout 120 \
        "${copts[@]}" -- bash -c 'exec timeout 100 mpirun --allow-run-as-root \
        --hostfile "$NETNS_HOSTFILE" -np $((NETNS_HOSTS * NETNS_RANKS_PER_HOST)) \
        --mca plm_rsh_agent "$0" --mca plm_rsh_no_tree_spawn 1 --mca pml ob1 \
        --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
        --tag-output -x RCOLL_SOCKET_IFNAME=eth0 -x RCOLL_TIMEOUT=60 "$@"' \
        "$agent" "${mopts[@]}" "$@"
    sed -i -E 's/^\[h0\] \[[0-9]+,([0-9]+)\]<std(out|err)>: ?/[h0r\1] /' "$log"
}

# pmix_lines N: how many ranks said their launch went through PMIx.
pmix_lines() {
    grep -c 'rcoll INFO INIT environment launch through PMIx: namespace' "$log"
}

if ! command -v mpirun >/dev/null; then
    for c in mpirun_mn_check_4x2 mpirun_all_reduce_perf_4x2 mpirun_torch_ddp_2x2; do
        skip_case "$c" "mpirun (openmpi-bin) is not installed"
    done
else
    if ((have_pmix)); then
        # 8 ranks, 4 hosts: rank, size and the bootstrap id from PMIx; 1 peer over shm, 6 over tcp.
        mpirun_case mpirun_mn_check_4x2 4 2 -- -x RCOLL_DEBUG=INFO -x RCOLL_DEBUG_SUBSYS=INIT \
            -x RCOLL_SPIN=0 -- "$mn_check"
        problems=$(check_mn_ranks 8 1 6)
        ((rc == 0)) || problems="exit status $rc; $problems"
        n=$(pmix_lines)
        ((n == 8)) || problems+="$n of 8 ranks launched through PMIx; "
        verdict mpirun_mn_check_4x2 "$problems" "8 ranks OK through PMIx (no RCOLL_ROOT); each reaches 1 peer over shm, 6 over tcp"
        # The perf binary through the library's PMIx launch (RCOLL_PMIX=on: not MPI's comm).
        mpirun_case mpirun_all_reduce_perf_4x2 4 2 -- -x RCOLL_PMIX=on -x RCOLL_SPIN=0 \
            -x RCOLL_DEBUG=INFO -x RCOLL_DEBUG_SUBSYS=INIT -- \
            "$allreduce" -b 8 -e 8M -f 8 -n 2 -w 1 -c 1
        problems=''
        ((rc == 0)) || problems="exit status $rc; "
        rank_lines "$log" 0 | grep -q "^# Out of bounds values : 0 OK" ||
            problems+="rank 0 did not print '# Out of bounds values : 0 OK'; "
        rank_lines "$log" 0 | grep -q "^# rcoll: 8 ranks" || problems+="not one job of 8 ranks; "
        n=$(pmix_lines)
        ((n == 8)) || problems+="$n of 8 ranks launched through PMIx; "
        verdict mpirun_all_reduce_perf_4x2 "$problems" "-b 8 -e 8M: 0 out of bounds values, 8 ranks through PMIx"
    else
        skip_case mpirun_mn_check_4x2 "librcoll built without PMIx (libpmix-dev)"
        skip_case mpirun_all_reduce_perf_4x2 "librcoll built without PMIx (libpmix-dev)"
    fi
    if ((have_torch)); then
        # torch's env:// store on host 0 (MASTER_ADDR); the ranks' size and rank from mpirun.
        mpirun_case mpirun_torch_ddp_2x2 2 2 "${torch_env[@]}" -- \
            "${torch_x[@]}" -x MASTER_PORT=29511 -x OMP_NUM_THREADS=1 -x RCOLL_SPIN=0 \
            -- /usr/bin/python3 "$src/tests/multinode/ddp_job.py"
        problems=''
        ((rc == 0)) || problems="exit status $rc; "
        for r in 0 1 2 3; do
            # anywhere in the job's output: under mpirun a rank's line was once glued to
            # another's ("...OK[1,1]<stdout>:ddp_job: rank 1 of 4: OK ...")
            grep -q "ddp_job: rank $r of 4: OK (4 steps, 0 wrong)" "$log" ||
                problems+="rank $r: no OK line; "
        done
        verdict mpirun_torch_ddp_2x2 "$problems" "4 ranks on 2 hosts: DDP gradients = the mean over gloo, 0 wrong"
    else
        skip_case mpirun_torch_ddp_2x2 "/usr/bin/python3 cannot import torch (apt-get install python3-torch)"
    fi
fi

# --- launched by the cluster's engines: Slurm ------------------------------------------------------
# One cluster (4 hosts) for every job: slurm-cluster run starts it on host 0 and runs
# tests/multinode/slurm_jobs.sh there, which runs each job (srun --label), its output, exit
# status and seconds in $logdir/slurm-<case>.{log,rc,secs}; each job then gets its verdict.
slurm_cases=(slurm_mn_check_4x2 slurm_all_reduce_perf_4x2 slurm_all_reduce_perf_4x2_nopmix
    slurm_torch_ddp_2x2)
if ! why=$("$src/tools/slurm-cluster" --check 2>&1); then
    skip_case slurm_cluster_up "$why"
    for c in "${slurm_cases[@]}"; do skip_case "$c" "$why"; done
else
    sj=(bash "$src/tests/multinode/slurm_jobs.sh" "$logdir")
    perf_small="$allreduce -b 8 -e 8M -f 8 -n 2 -w 1 -c 1"
    if ((have_pmix)); then
        sj+=("slurm_mn_check_4x2:srun --label -K -N 4 -n 8 env RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT RCOLL_SPIN=0 $mn_check")
        sj+=("slurm_all_reduce_perf_4x2:srun --label -K -N 4 -n 8 env RCOLL_PMIX=on RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT RCOLL_SPIN=0 $perf_small")
    fi
    # Without PMIx: Slurm's variables and RCOLL_ROOT on host 0 (rank 0's: block distribution).
    # shellcheck disable=SC2016 # expanded on host 0
    sj+=('slurm_all_reduce_perf_4x2_nopmix:srun --label -K --mpi=none -N 4 -n 8 env RCOLL_ROOT=$NETNS_ADDR:29400 RCOLL_SECRET=$RANDOM$RANDOM RCOLL_SPIN=0 '"$perf_small")
    if ((have_torch)); then
        # On n2 and n3: rank 0 (the torch store's) is not on host 0, as when Slurm picks the
        # nodes itself (ddp_job.py then takes the step's first node's address).
        sj+=("slurm_torch_ddp_2x2:srun --label -K --mpi=none -N 2 -n 4 -w n2,n3 env MASTER_PORT=29511 OMP_NUM_THREADS=1 RCOLL_SPIN=0 /usr/bin/python3 $src/tests/multinode/ddp_job.py")
    fi
    rm -f "$logdir"/slurm-*
    run_cluster slurm_cluster_up --hosts 4 --ranks-per-host 2 --launcher --timeout 240 \
        "${torch_env[@]}" -- "$src/tools/slurm-cluster" run -- "${sj[@]}"
    up_line=$(grep -o 'slurm-cluster: 4 nodes idle.*MpiDefault=[a-z]*' "$log")
    slurm_mpi=$(sed -n 's/.*MpiDefault=//p' <<<"$up_line")
    problems=''
    [[ -n $up_line ]] || problems="the cluster did not come up (exit status $rc); "
    # Its own time: the whole run less the jobs' (each has its verdict and time below).
    jobs_secs=0
    for f in "$logdir"/slurm-*.secs; do
        [[ -f $f ]] && jobs_secs=$(awk -v a="$jobs_secs" -v b="$(cat "$f")" 'BEGIN { print a + b }')
    done
    secs=$(awk -v a="$secs" -v b="$jobs_secs" 'BEGIN { printf "%.1f", a - b }')
    verdict slurm_cluster_up "$problems" "${up_line#slurm-cluster: } (start and stop)"

    # slurm_job NAME: its log (srun --label's "R: " becomes "[h0rR] "), status and time.
    slurm_job() {
        log="$logdir/slurm-$1.log"
        rc=$(cat "$logdir/slurm-$1.rc" 2>/dev/null || echo 'not run')
        secs=$(cat "$logdir/slurm-$1.secs" 2>/dev/null || echo 0.0)
        [[ -f $log ]] || echo "(not run: the cluster did not come up)" >"$log"
        sed -i -E 's/^ *([0-9]+): /[h0r\1] /' "$log"
    }
    if ((have_pmix)) && [[ $slurm_mpi == pmix ]]; then
        slurm_job slurm_mn_check_4x2
        problems=$(check_mn_ranks 8 1 6)
        [[ $rc == 0 ]] || problems="exit status $rc; $problems"
        n=$(pmix_lines)
        ((n == 8)) || problems+="$n of 8 ranks launched through PMIx; "
        verdict slurm_mn_check_4x2 "$problems" "srun -N 4 -n 8: 8 ranks OK through PMIx (no RCOLL_ROOT); 1 peer over shm, 6 over tcp"
        slurm_job slurm_all_reduce_perf_4x2
        problems=''
        [[ $rc == 0 ]] || problems="exit status $rc; "
        rank_lines "$log" 0 | grep -q "^# Out of bounds values : 0 OK" ||
            problems+="rank 0 did not print '# Out of bounds values : 0 OK'; "
        rank_lines "$log" 0 | grep -q "^# rcoll: 8 ranks" || problems+="not one job of 8 ranks; "
        n=$(pmix_lines)
        ((n == 8)) || problems+="$n of 8 ranks launched through PMIx; "
        verdict slurm_all_reduce_perf_4x2 "$problems" "srun -N 4 -n 8, -b 8 -e 8M: 0 out of bounds values, 8 ranks through PMIx"
    elif ((have_pmix)) && [[ -n $up_line ]]; then
        skip_case slurm_mn_check_4x2 "Slurm without its mpi_pmix plugin (MpiDefault=$slurm_mpi)"
        skip_case slurm_all_reduce_perf_4x2 "Slurm without its mpi_pmix plugin (MpiDefault=$slurm_mpi)"
    elif ((have_pmix)); then
        for c in slurm_mn_check_4x2 slurm_all_reduce_perf_4x2; do
            slurm_job "$c"
            verdict "$c" "not run: the cluster did not come up; " ""
        done
    else
        skip_case slurm_mn_check_4x2 "librcoll built without PMIx (libpmix-dev)"
        skip_case slurm_all_reduce_perf_4x2 "librcoll built without PMIx (libpmix-dev)"
    fi
    slurm_job slurm_all_reduce_perf_4x2_nopmix
    problems=''
    [[ $rc == 0 ]] || problems="exit status $rc; "
    rank_lines "$log" 0 | grep -q "^# Out of bounds values : 0 OK" ||
        problems+="rank 0 did not print '# Out of bounds values : 0 OK'; "
    rank_lines "$log" 0 | grep -q "^# rcoll: 8 ranks" || problems+="not one job of 8 ranks; "
    verdict slurm_all_reduce_perf_4x2_nopmix "$problems" "srun --mpi=none, RCOLL_ROOT: 0 out of bounds values, 8 ranks"
    if ((have_torch)); then
        slurm_job slurm_torch_ddp_2x2
        problems=''
        [[ $rc == 0 ]] || problems="exit status $rc; "
        for r in 0 1 2 3; do
            # anywhere in the job's output: under mpirun a rank's line was once glued to
            # another's ("...OK[1,1]<stdout>:ddp_job: rank 1 of 4: OK ...")
            grep -q "ddp_job: rank $r of 4: OK (4 steps, 0 wrong)" "$log" ||
                problems+="rank $r: no OK line; "
        done
        verdict slurm_torch_ddp_2x2 "$problems" "srun -N 2 -n 4 -w n2,n3: DDP gradients = the mean over gloo, 0 wrong"
    else
        skip_case slurm_torch_ddp_2x2 "/usr/bin/python3 cannot import torch (apt-get install python3-torch)"
    fi
fi

# --- the projection model against a measurement (docs/scale.md) -------------------------------
# 4 hosts x 1 rank behind --rate 1gbit, ring all-reduce of 4 MiB: the best of 6 cycles must be
# within 15% of `rcoll-info --project 4 --cluster netns --nic-gbit 1` (the full check is
# tools/validate-projection). A result slower than that is measured once more before it
# fails: the machine is shared, and contention only slows.
projection_busbw() { # -> measured busbw of the 4 MiB row in $log, best cycle
    rank_lines "$log" 0 | awk '$1 == 4194304 { t = $6 < $10 ? $6 : $10; if (!m || t < m) m = t }
        END { if (m) printf "%.5f", 4194304 / m / 1e3 * 1.5 }'
}
pred=$("$build/tools/rcoll-info" --project 4 --cluster netns --nic-gbit 1 --nic-lat-us 25 \
    --coll allreduce --size 4M --csv | awk -F, '$4 == "ring" { print $7 }')
problems=
for try in 1 2; do
    run_cluster "projection_4x1_try$try" --hosts 4 --rate 1gbit --timeout 120 \
        --env RCOLL_ALGO=ring -- "$allreduce" -b 4M -e 4M -n 3 -w 1 -N 6 -c 0
    meas=$(projection_busbw)
    err=$(awk -v p="${pred:-0}" -v m="${meas:-0}" 'BEGIN { if (m > 0) printf "%.1f", 100 * (p - m) / m }')
    problems=
    ((rc == 0)) || problems+="exit status $rc; "
    [[ -n $pred ]] || problems+="no prediction from rcoll-info --project; "
    [[ -n $err ]] || problems+="no 4 MiB row; "
    if [[ -z $problems ]] && ! awk -v e="$err" 'BEGIN { exit !(e <= 15 && e >= -15) }'; then
        problems="measured ${meas} GB/s, predicted ${pred}: error ${err}% beyond 15%; "
        awk -v e="$err" 'BEGIN { exit !(e > 15) }' && continue # slower: once more
    fi
    break
done
verdict projection_4x1 "$problems" "ring all-reduce 4 MiB: measured ${meas:-?} GB/s, model ${pred:-?}, error ${err:-?}% (try $try)"

# --- nothing left behind -------------------------------------------------------------------------
secs=0.0
log=/dev/null
rc=0
left=$(ip netns list 2>/dev/null | grep "^$ns_prefix" | tr '\n' ' ')
verdict cleanup "${left:+namespaces left behind: $left}" "no namespace of this suite is left"

echo "multinode: $pass passed, $fail failed, $skip skipped in $(elapsed_since "$suite_t0") s${failed:+ (failed: ${failed[*]})}"
((fail == 0))
