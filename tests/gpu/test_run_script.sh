#!/usr/bin/env bash
# test_run_script.sh - tests/gpu/run.sh's own plumbing, on any machine (suite gpu,
# gpu_script_check; no GPU used, none needed): the scripts parse (bash -n) and are shellcheck
# clean where shellcheck is installed; then run.sh --dry-run (sleeps stand in for the steps):
#   - a hung step is killed at its share of the budget, steps that no longer fit are
#     "not run: budget", the exit is 1, and the four reports say DRY RUN;
#   - SIGTERM in the middle of a step still writes summary.md and results.json, naming it;
#   - with room for everything, every step runs and the exit is 0.
# None of this is a GPU result; tests/gpu/run.sh on a GPU machine is.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
RUN=$HERE/run.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source-path=SCRIPTDIR source=../common/check.sh
. "$HERE/../common/check.sh"
export RCOLL_GPU_DRY_SLEEP=0

parses() {
    local f
    for f in "$RUN" "$HERE/test_perf.sh" "$0"; do
        bash -n "$f" >>"$TMP/parses.err" 2>&1 || return 1
    done
}
check parses parses
if command -v shellcheck >/dev/null 2>&1; then
    lint() { shellcheck -x "$RUN" "$HERE/test_perf.sh" "$0" >"$TMP/shellcheck.out" 2>&1; }
    check shellcheck lint
else
    skip shellcheck "not installed (apt-get install shellcheck)"
fi

# field FILE NAME: the verdict of step NAME in results.json
verdict() { grep -o "\"name\": \"$2\", \"verdict\": \"[^\"]*\"" "$1/results.json" | sed 's/.*"verdict": //'; }

hang_and_budget() {
    local o=$TMP/hang
    RCOLL_GPU_DRY_HANG=gpu_kernels bash "$RUN" --dry-run --budget 40 --out "$o" >"$TMP/hang_and_budget.out" 2>&1
    RC=$?
    [ "$RC" = 1 ] || { echo "exit $RC, not 1" >"$TMP/hang_and_budget.err"; return 1; }
    verdict "$o" gpu_kernels | grep -q 'timed out after 15 s' &&
        verdict "$o" gpu_stage | grep -q 'not run: budget' &&
        verdict "$o" build | grep -q 'dry run: passed' &&
        grep -q '"dry_run": true' "$o/results.json" &&
        grep -q '^\*\*DRY RUN' "$o/summary.md" &&
        grep -q '^mode: *DRY RUN' "$o/preflight.txt" &&
        grep -q '== GPU summary' "$o/run.log" &&
        [ "$(find "$o" -type f | wc -l)" -le 8 ] &&
        { ! command -v python3 >/dev/null 2>&1 || python3 -m json.tool "$o/results.json" >/dev/null; }
}
check hang_and_budget hang_and_budget

term_mid_step() {
    local o=$TMP/term pid i
    RCOLL_GPU_DRY_HANG=gpu_stage bash "$RUN" --dry-run --budget 300 --out "$o" >"$TMP/term_mid_step.out" 2>&1 &
    pid=$!
    for ((i = 0; i < 600; i++)); do # until gpu_stage hangs (the preflight comes first)
        grep -q 'gpu_stage hangs' "$o/run.log" 2>/dev/null && break
        sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid"
    RC=$?
    [ "$RC" = 1 ] || { echo "exit $RC, not 1" >"$TMP/term_mid_step.err"; return 1; }
    verdict "$o" gpu_stage | grep -q 'stopped by SIGTERM' &&
        grep -q '"stopped_by": "SIGTERM"' "$o/results.json" &&
        grep -q 'gpu_stage' "$o/summary.md" &&
        grep -q 'stopped by SIGTERM' "$o/run.log"
}
check term_mid_step term_mid_step

all_pass() {
    local o=$TMP/pass
    bash "$RUN" --dry-run --budget 400 --out "$o" >"$TMP/all_pass.out" 2>&1
    RC=$?
    [ "$RC" = 0 ] && grep -q '"passed": 8, "failed": 0' "$o/results.json"
}
check all_pass all_pass

check_summary
