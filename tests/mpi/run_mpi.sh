#!/usr/bin/env bash
# run_mpi.sh BUILD_ROOT CASE - the MPI interop tests under mpirun (Open MPI, shared memory),
# oversubscribed on small machines.  Cases:
#   coll NP      test_mpi_coll linked ahead of libmpi, NP ranks; the interposer must have taken
#                the calls (RCOLL_MPI_STATS) and let the others fall through
#   preload NP   the plain MPI build of test_mpi_coll under LD_PRELOAD=librcoll_mpi.so
#                (skips, 77, in sanitizer builds: the sanitizer runtime must load first)
#   knobs        RCOLL_MPI_DISABLE=1 and RCOLL_MPI_MIN_BYTES send everything / small calls to MPI
#   createfail   rcoll cannot create the communicator (on all ranks, on one): all fall through,
#                at once (well under RCOLL_TIMEOUT); rcoll_comm_init_mpi fails on all at once
#   init         rcoll_comm_init_mpi and its errors
#   kill         a rank SIGKILLs itself inside an interposed MPI_Allreduce, then inside an
#                MPI_Iallreduce; the others get an MPI error naming it within RCOLL_TIMEOUT
#                (the nonblocking one through the communicator's error handler)
#   perf         every perf binary under mpirun -np 3 (one rank per process, as nccl-tests'
#                MPI build): one report from rank 0, 3 ranks listed, data checked, 0 wrong;
#                a bad -r fails on every rank with the usage error
#   compare      bench/compare_mpi -c all on 2 ranks, tiny sizes, over vader and over TCP
#                (RCOLL_TRANSPORT=tcp): 0 wrong, four tables, a JSON with four collectives
set -u
build=$1
case_=$2
np=${3:-2}
mpi_dir=$build/tests/mpi
lib=$build/src/mpi/librcoll_mpi.so
out=$(mktemp)
trap 'rm -f "$out"' EXIT

command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader
    -x RCOLL_TIMEOUT=60 -x RCOLL_BUFFSIZE=256K -x RCOLL_MPI_MIN_BYTES=0)

# Sanitizer builds (the test programs link the ASan runtime): Open MPI's own leaks at exit
# are suppressed (lsan.supp); the interposer's are not.
if ldd "$mpi_dir/test_mpi_coll" | grep -q libasan; then
    here=$(cd "$(dirname "$0")" && pwd)
    # several ranks on 2 cores are slow there: their largest count is 256 KiB + 3 (still 4
    # chunks of 64 KiB with RCOLL_BUFFSIZE=256K); 1 rank keeps 1 MiB + 3
    [ "$np" -gt 1 ] && mpirun+=(-x TEST_MPI_BIG_BYTES=262147)
    mpirun+=(-x ASAN_OPTIONS=fast_unwind_on_malloc=0
        -x LSAN_OPTIONS=suppressions=$here/lsan.supp:print_suppressions=0)
fi

fail() { echo "FAIL: $*"; sed 's/^/  | /' "$out" | tail -40; exit 1; }

# stat FUNC FIELD: the sum over ranks of "rcoll N calls" (FIELD=rcoll) or "mpi N calls"
stat() {
    awk -v f="$1" -v k="$2" '$1 == "rcoll_mpi" && $5 == f {
        for (i = 6; i < NF; i++) if ($i == k) s += $(i + 1) } END { print s + 0 }' "$out"
}

run_coll() { # NP PRELOAD_LIB EXE
    local n=$1 pre=$2 exe=$3
    local env=(-x RCOLL_MPI_STATS=1)
    [ -n "$pre" ] && env+=(-x LD_PRELOAD="$pre")
    timeout 240 "${mpirun[@]}" "${env[@]}" -np "$n" "$exe" all >"$out" 2>&1 ||
        fail "test_mpi_coll on $n ranks (exit $?)"
    grep -q "test_mpi_coll all: $n ranks OK" "$out" || fail "no OK line"
    for f in MPI_Allreduce MPI_Reduce MPI_Bcast MPI_Allgather MPI_Reduce_scatter_block \
        MPI_Alltoall MPI_Barrier MPI_Iallreduce MPI_Ibcast MPI_Allgatherv MPI_Alltoallv; do
        [ "$(stat "$f" rcoll)" -gt 0 ] || fail "$f never reached rcoll"
    done
    for f in MPI_Allreduce MPI_Bcast MPI_Gather MPI_Allgatherv MPI_Alltoallv; do
        [ "$(stat "$f" mpi)" -gt 0 ] || fail "$f never fell through"
    done
    echo "ok: $n ranks, $(stat MPI_Allreduce rcoll) MPI_Allreduce calls on rcoll, $(stat MPI_Allreduce mpi) through MPI"
}

case $case_ in
coll)
    run_coll "$np" "" "$mpi_dir/test_mpi_coll"
    ;;
preload)
    if ldd "$mpi_dir/test_mpi_coll" | grep -q libasan; then
        echo "SKIP: sanitizer build: LD_PRELOAD of librcoll_mpi would load before the ASan runtime (the linked test covers the same calls)"
        exit 77
    fi
    run_coll "$np" "$lib" "$mpi_dir/test_mpi_coll_plain"
    ;;
knobs)
    timeout 120 "${mpirun[@]}" -x RCOLL_MPI_STATS=1 -x RCOLL_MPI_DISABLE=1 -np 2 \
        "$mpi_dir/test_mpi_coll" mixed >"$out" 2>&1 || fail "RCOLL_MPI_DISABLE=1 run (exit $?)"
    [ "$(stat MPI_Allreduce rcoll)" -eq 0 ] || fail "RCOLL_MPI_DISABLE=1 still used rcoll"
    [ "$(stat MPI_Allreduce mpi)" -gt 0 ] || fail "RCOLL_MPI_DISABLE=1: no calls counted"
    # the mixed test's largest call is 16 bytes: a 9-byte threshold keeps 8-byte calls on MPI
    timeout 120 "${mpirun[@]}" -x RCOLL_MPI_STATS=1 -x RCOLL_MPI_MIN_BYTES=9 -np 2 \
        "$mpi_dir/test_mpi_coll" mixed >"$out" 2>&1 || fail "RCOLL_MPI_MIN_BYTES=9 run (exit $?)"
    [ "$(stat MPI_Allreduce rcoll)" -eq 0 ] || fail "RCOLL_MPI_MIN_BYTES=9: small calls on rcoll"
    [ "$(stat MPI_Barrier rcoll)" -eq 0 ] || fail "RCOLL_MPI_MIN_BYTES=9: barrier on rcoll"
    echo "ok: RCOLL_MPI_DISABLE and RCOLL_MPI_MIN_BYTES"
    ;;
createfail)
    # rcoll cannot create the communicator (RCOLL_BUFFSIZE below its range fails init): on
    # every rank (rank 0 cannot make the id: its broadcast says so), then on rank 1 only,
    # before it joins (it tells the others over MPI, so they stop waiting at once, not after
    # RCOLL_TIMEOUT=30); either way every rank falls through, with one WARN each
    exe=$mpi_dir/test_mpi_coll
    # one app context (mpirun's -x options do not reach a second one), rank 1's environment
    # changed by a shell in front of it
    rank1_bad=(bash -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export RCOLL_BUFFSIZE=1; exec "$@"' sh)
    for how in all one; do
        start=$(date +%s)
        if [ $how = all ]; then
            timeout 120 "${mpirun[@]}" -x RCOLL_MPI_STATS=1 -x RCOLL_BUFFSIZE=1 -np 2 \
                "$exe" mixed >"$out" 2>&1 || fail "creation failing everywhere (exit $?)"
        else
            timeout 120 "${mpirun[@]}" -x RCOLL_MPI_STATS=1 -x RCOLL_TIMEOUT=30 -np 3 \
                "${rank1_bad[@]}" "$exe" mixed >"$out" 2>&1 ||
                fail "creation failing on rank 1 only (exit $?)"
        fi
        took=$(( $(date +%s) - start ))
        np=$([ $how = all ] && echo 2 || echo 3)
        grep -q "test_mpi_coll mixed: $np ranks OK" "$out" || fail "$how: no OK line"
        [ "$(stat MPI_Allreduce rcoll)" -eq 0 ] || fail "$how: calls reached a failed rcoll"
        [ "$(stat MPI_Allreduce mpi)" -gt 0 ] || fail "$how: no calls counted"
        n=$(grep -c "librcoll_mpi: no rcoll communicator for an MPI communicator of $np ranks" "$out")
        [ "$n" -eq "$np" ] || fail "$how: $n fall-through warnings, want one per rank"
        [ "$took" -lt 15 ] || fail "$how: took ${took}s: the ranks waited for RCOLL_TIMEOUT=30"
        echo "ok: $how: every rank fell through to MPI in ${took}s"
    done
    if [ $how = one ]; then
        grep -q "remote peer failure: rcoll_comm_init_mpi: rank 1 of 3 could not create its rcoll communicator: RCOLL_BUFFSIZE=1" "$out" ||
            fail "one: the other ranks' warnings do not carry rank 1's sentence"
    fi
    # rcoll_comm_init_mpi itself: every rank returns an error at once, naming rank 1
    start=$(date +%s)
    timeout 120 "${mpirun[@]}" -x RCOLL_TIMEOUT=30 -np 3 "${rank1_bad[@]}" \
        "$mpi_dir/test_mpi_init" fail >"$out" 2>&1 || fail "test_mpi_init fail (exit $?)"
    took=$(( $(date +%s) - start ))
    grep "test_mpi_init fail: 3 ranks OK" "$out" || fail "test_mpi_init fail: no OK line"
    [ "$took" -lt 15 ] || fail "rcoll_comm_init_mpi: took ${took}s (RCOLL_TIMEOUT=30)"
    echo "ok: a failed creation sends every rank to MPI; rcoll_comm_init_mpi fails at once"
    ;;
init)
    for n in 1 3; do
        timeout 120 "${mpirun[@]}" -np "$n" "$mpi_dir/test_mpi_init" >"$out" 2>&1 ||
            fail "test_mpi_init on $n ranks (exit $?)"
        grep -q "test_mpi_init: $n ranks OK" "$out" || fail "no OK line"
        if grep -q "MPI puts ranks" "$out"; then fail "a host mismatch warned where none is"; fi
    done
    # MPI sees one node; RCOLL_HOST_ID per rank makes rcoll see three hosts: rank 0 warns,
    # naming the first pair (rcoll_comm_host against MPI_COMM_TYPE_SHARED)
    per_rank_host=(bash -c 'export RCOLL_HOST_ID=h$OMPI_COMM_WORLD_RANK; exec "$@"' sh)
    timeout 120 "${mpirun[@]}" -np 3 "${per_rank_host[@]}" "$mpi_dir/test_mpi_init" \
        >"$out" 2>&1 || fail "test_mpi_init with a host id per rank (exit $?)"
    grep -q "test_mpi_init: 3 ranks OK" "$out" || fail "host ids: no OK line"
    grep -q "MPI puts ranks 0 and 1 on the same node but rcoll on different hosts" "$out" ||
        fail "host ids: no warning naming ranks 0 and 1"
    echo "ok: rcoll_comm_init_mpi"
    ;;
kill)
    # Open MPI ends the job when a process dies; with recovery enabled the survivors go on
    # and report, then mpirun exits non-zero (a process was killed): the survivors' lines
    # decide.  Blocking (MPI_Allreduce, MPI_ERRORS_RETURN) and nonblocking (MPI_Iallreduce +
    # MPI_Wait on a dup whose own error handler must see the code).
    for mode in blocking nb; do
        start=$(date +%s)
        timeout 120 "${mpirun[@]}" -x RCOLL_TIMEOUT=5 --enable-recovery \
            --mca orte_abort_on_non_zero_status 0 -np 3 "$mpi_dir/test_mpi_kill" $mode \
            >"$out" 2>&1
        took=$(( $(date +%s) - start ))
        n=$(grep -c "test_mpi_kill: survivor got" "$out")
        [ "$n" -eq 2 ] || fail "$mode: expected 2 survivors to report the error, got $n"
        grep "survivor got" "$out" | grep -q "rank 2" || fail "$mode: the error does not name rank 2"
        if [ $mode = nb ]; then
            [ "$(grep -c "survivor got through the handler" "$out")" -eq 2 ] ||
                fail "nb: the communicator's handler was not called"
        fi
        # each survivor's own time, from entering the all-reduce to the error: within the 5 s
        # RCOLL_TIMEOUT (with a second of slack for a loaded machine)
        slow=$(awk '/survivor got/ { for (i = 1; i <= NF; i++) if ($i == "after" && $(i + 1) > 6) print }' "$out")
        [ -z "$slow" ] || fail "$mode: a survivor waited longer than RCOLL_TIMEOUT: $slow"
        [ "$took" -lt 60 ] || fail "$mode: took ${took}s"
        grep "survivor got" "$out" | head -1
        echo "ok: $mode: survivors reported the killed rank in ${took}s"
    done
    ;;
perf)
    for p in all_reduce_perf all_gather_perf broadcast_perf reduce_perf reduce_scatter_perf \
        alltoall_perf sendrecv_perf gather_perf scatter_perf; do
        exe=$build/bench/$p
        [ -x "$exe" ] || fail "$exe not built"
        timeout 120 "${mpirun[@]}" -np 3 "$exe" -b 8 -e 64K -f 8 -c 1 -n 2 -w 1 \
            >"$out" 2>&1 || fail "$p under mpirun -np 3 (exit $?)"
        grep -q "^# rcoll: 3 ranks" "$out" || fail "$p: not 3 ranks"
        [ "$(grep -c '^#  Rank  [0-2] ' "$out")" -eq 3 ] || fail "$p: not 3 rank lines"
        [ "$(grep -c 'Collective test concluded' "$out")" -eq 1 ] || fail "$p: not one report"
        grep -q "Out of bounds values : 0 OK" "$out" || fail "$p: wrong values"
    done
    timeout 120 "${mpirun[@]}" -np 3 "$build/bench/broadcast_perf" -b 8 -e 8 -r 5 \
        >"$out" 2>&1 && fail "broadcast_perf -r 5 on 3 ranks succeeded"
    grep -q "invalid value for -r: 5 (the job has 3 ranks)" "$out" ||
        fail "broadcast_perf -r 5: no usage sentence"
    echo "ok: 9 perf binaries under mpirun -np 3, 0 wrong; a bad root refused"
    ;;
compare)
    exe=$build/bench/compare_mpi
    [ -x "$exe" ] || fail "$exe not built"
    for btl in vader tcp; do
        # the common command line with its btl list swapped (an MCA param may appear once)
        cmd=("${mpirun[@]/#self,vader/self,$btl}")
        [ $btl = tcp ] && cmd+=(--mca btl_tcp_if_include lo -x RCOLL_TRANSPORT=tcp)
        timeout 60 "${cmd[@]}" -np 2 "$exe" -c all -b 8 -e 64K -f 8 -n 2 \
            -w 1 -R 3 -J "$out.json" >"$out" 2>&1 || fail "compare_mpi -c all over $btl (exit $?)"
        grep -q "^# wrong results: 0 OK" "$out" || fail "$btl: wrong results"
        for c in allreduce allgather reducescatter bcast; do
            [ "$(grep -c "^# collective $c: " "$out")" -eq 1 ] || fail "$btl: no $c table"
            [ "$(grep -o "\"collective\":\"$c\"" "$out.json" | wc -l)" -eq 5 ] ||
                fail "$btl: $c: not 5 JSON rows"
        done
        grep -q '"wrong_total":0}' "$out.json" || fail "$btl: JSON not complete"
        rm -f "$out.json"
    done
    echo "ok: compare_mpi -c all over vader and tcp, 4 tables, 0 wrong"
    ;;
*)
    echo "usage: run_mpi.sh BUILD_ROOT coll|preload NP | knobs | createfail | init | kill | perf | compare" >&2
    exit 2
    ;;
esac
