#!/usr/bin/env bash
# run_mpi_netns.sh BUILD_ROOT [HOSTS] - mpirun across emulated hosts: tools/netns-cluster
# builds HOSTS (default 3) network namespaces joined by a bridge; the command it runs in
# host 0 is mpirun, which starts its daemons in the other namespaces through an rsh agent
# (`ip netns exec <namespace> sh -c "$*"`), one rank per host, over Open MPI's TCP BTL on
# the namespaces' eth0.  mpirun runs, after a check that each rank sees another eth0 address:
#   - test_mpi_coll mixed (interposed MPI_Allreduce and the rest, results checked, and
#     RCOLL_MPI_STATS must show MPI_Allreduce calls on rcoll on every rank);
#   - all_reduce_perf built with MPI (rcoll_comm_init_mpi over MPI_COMM_WORLD): HOSTS ranks,
#     "Out of bounds values : 0 OK".
# The other hosts' commands only publish their namespace name and wait for host 0.
# Needs root (namespaces): exit 77 with the reason where they cannot be made.
set -u
build=$1
hosts=${2:-3}
src=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$src/tools/netns-cluster
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
if ! why=$("$cluster" --check 2>&1); then
    echo "SKIP: network namespaces cannot be made here: $why"
    exit 77
fi
coll=$build/tests/mpi/test_mpi_coll
perf=$build/bench/all_reduce_perf
for f in "$coll" "$perf"; do
    [ -x "$f" ] || { echo "FAIL: $f not built"; exit 1; }
done

work=$(mktemp -d)
keep=${MPI_NETNS_KEEP:-0}
trap '[ "$keep" = 1 ] || rm -rf "$work"' EXIT
prefix="rcmpi$$-"

# mpirun's rsh agent: "agent HOST COMMAND..." runs COMMAND (one shell line, as ssh would) in
# the namespace whose eth0 has address HOST (each host wrote its name to ns-<address>).
# Namespaces share one file system, so each emulated host gets its own TMPDIR, as real hosts
# have their own /tmp: Open MPI keeps its session directories there under a name made of the
# host name (the same in every namespace), and one job's daemons removing theirs while the
# next job's daemon made its own left that daemon dead before it called back, and mpirun
# waiting for it forever (about 1 launch in 6).
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
mkdir -p "$work/tmp-\$host"
exec ip netns exec "\$(cat "$work/ns-\$host")" env TMPDIR="$work/tmp-\$host" sh -c "\$*"
EOF

# What every namespace runs.  rcoll's own launch variables (set by netns-cluster) must not
# reach the MPI ranks: they would take precedence over MPI in the perf binaries.
cat >"$work/host.sh" <<EOF
#!/bin/bash
echo "${prefix}h\$NETNS_HOST" >"$work/ns-\$NETNS_ADDR.tmp"
mv "$work/ns-\$NETNS_ADDR.tmp" "$work/ns-\$NETNS_ADDR"
export TMPDIR="$work/tmp-\$NETNS_ADDR"
mkdir -p "\$TMPDIR"
if [ "\$NETNS_HOST" != 0 ]; then
    while [ ! -e "$work/done" ]; do sleep 0.1; done
    exit 0
fi
for i in \$(seq 200); do
    [ "\$(ls "$work" | grep -c '^ns-[0-9.]*\$')" -eq $hosts ] && break
    sleep 0.05
done
ls "$work" | sed -n 's/^ns-\([0-9.]*\)\$/\1 slots=1/p' | sort -t. -k4 -n >"$work/hostfile"
mpirun=(env -u RCOLL_RANK -u RCOLL_NRANKS -u RCOLL_ROOT -u RCOLL_SECRET -u RCOLL_LOCAL_RANK
    -u RCOLL_LOCAL_SIZE mpirun --allow-run-as-root --hostfile "$work/hostfile"
    --mca plm_rsh_agent "$work/agent" --mca plm_rsh_no_tree_spawn 1
    --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include eth0
    --mca oob_tcp_if_include eth0 -x RCOLL_SOCKET_IFNAME=eth0 -x RCOLL_TIMEOUT=30
    -x LD_LIBRARY_PATH -x ASAN_OPTIONS -x LSAN_OPTIONS -np $hosts)
# A step that has not ended after 60 s is stopped and reported (rcoll itself cannot be what
# waits that long: RCOLL_TIMEOUT=30 turns any wait of its own into an error exit).
launch() { # OUT ARGS...
    local out=\$1 r=0
    shift
    timeout 60 "\${mpirun[@]}" "\$@" >"\$out" 2>&1 || r=\$?
    [ \$r -eq 124 ] && echo "launch: mpirun still running after 60 s: \$*" >>"\$out"
    return \$r
}
rc=0
launch "$work/where.out" sh -c 'ip -4 -o addr show eth0' || rc=\$?
[ \$rc -eq 0 ] && { launch "$work/coll.out" -x RCOLL_MPI_STATS=1 "$coll" mixed || rc=\$?; }
[ \$rc -eq 0 ] && { launch "$work/perf.out" "$perf" -b 8 -e 1M -f 16 -c 1 -n 2 -w 1 || rc=\$?; }
touch "$work/done"
exit \$rc
EOF
chmod +x "$work/agent" "$work/host.sh"

if ldd "$coll" | grep -q libasan; then
    here=$(cd "$(dirname "$0")" && pwd)
    export ASAN_OPTIONS=fast_unwind_on_malloc=0
    export LSAN_OPTIONS=suppressions=$here/lsan.supp:print_suppressions=0
fi

fail() {
    echo "FAIL: $*"
    for f in cluster.out where.out coll.out perf.out hostfile; do
        [ -e "$work/$f" ] && { echo "  -- $f"; sed 's/^/  | /' "$work/$f" | tail -30; }
    done
    exit 1
}

start=$(date +%s)
"$cluster" --hosts "$hosts" --prefix "$prefix" --timeout 280 -- "$work/host.sh" \
    >"$work/cluster.out" 2>&1 || fail "netns-cluster with mpirun in host 0 (exit $?)"
took=$(( $(date +%s) - start ))

# one rank per namespace: every rank saw a different eth0 address
n=$(grep -o 'inet [0-9.]*' "$work/where.out" | sort -u | wc -l)
[ "$n" -eq "$hosts" ] || fail "the ranks ran in $n namespaces, not $hosts"
grep -q "test_mpi_coll mixed: $hosts ranks OK" "$work/coll.out" || fail "test_mpi_coll: no OK line"
n=$(awk '$1 == "rcoll_mpi" && $5 == "MPI_Allreduce" { for (i = 6; i < NF; i++)
        if ($i == "rcoll" && $(i + 1) > 0) n++ } END { print n + 0 }' "$work/coll.out")
[ "$n" -eq "$hosts" ] || fail "MPI_Allreduce reached rcoll on $n of $hosts ranks"
grep -q "^# rcoll: $hosts ranks" "$work/perf.out" || fail "all_reduce_perf: not $hosts ranks"
[ "$(grep -c '^#  Rank  *[0-9]* ' "$work/perf.out")" -eq "$hosts" ] ||
    fail "all_reduce_perf: not $hosts rank lines"
grep -q "Out of bounds values : 0 OK" "$work/perf.out" || fail "all_reduce_perf: wrong values"
echo "ok: mpirun over $hosts netns hosts (TCP): test_mpi_coll mixed and all_reduce_perf, 0 wrong, ${took}s"
