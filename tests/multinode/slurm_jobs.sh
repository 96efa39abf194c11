#!/usr/bin/env bash
# slurm_jobs.sh LOGDIR NAME:COMMAND... - run_multinode.sh's Slurm jobs, run on host 0 inside
# tools/slurm-cluster run: each COMMAND (one shell line, srun ...) in turn, at most 60 s, its
# output, exit status and seconds in LOGDIR/slurm-NAME.log, .rc and .secs.
logdir=$1
shift
for job in "$@"; do
    name=${job%%:*}
    cmd=${job#*:}
    t0=${EPOCHREALTIME/[.,]/}
    timeout 60 bash -c "$cmd" >"$logdir/slurm-$name.log" 2>&1 </dev/null
    echo $? >"$logdir/slurm-$name.rc"
    us=$((${EPOCHREALTIME/[.,]/} - t0))
    printf '%d.%d\n' $((us / 1000000)) $((us % 1000000 / 100000)) >"$logdir/slurm-$name.secs"
done
