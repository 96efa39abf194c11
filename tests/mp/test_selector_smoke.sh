#!/usr/bin/env bash
# The selector check's CI slice (bench/selector_check, docs/benchmarks.md "Selector check"):
# 2 ranks over shared memory and over TCP, a few sizes from 4 KiB to 16 MiB, auto against every
# algorithm forced in the same run.  Fails when auto takes more than MARGIN (1.5) times the best
# forced algorithm's time at some size, in the medians of the rounds and in each one's best
# round (noise only adds time): the 2-3x regression of an unmeasured default (CMA chosen at
# 4 MiB) and the 1.6-2.1x of a probe curve gone flat (ring over TCP from 128 KiB) are over it.
# A run over the margin is run once more and fails only if it is over again (a descheduled
# rank is not a regression; a wrong default is over both times).  Every result is checked against the exact
# sum by the benchmark itself (exit 7).
# Usage: bash tests/mp/test_selector_smoke.sh <meson build root>
set -u

BUILD=${1:?usage: test_selector_smoke.sh <meson build root>}
BIN="$BUILD/bench/selector_check"
RUN="$BUILD/tools/rcoll-run"
MARGIN=${SELECTOR_MARGIN:-1.5}
for f in "$BIN" "$RUN"; do
    if [ ! -x "$f" ]; then
        echo "FAIL $f not built"
        exit 1
    fi
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
npass=0
nfail=0

check() { # NAME ENV...: run the check (twice if the first is over the margin)
    local name=$1
    shift
    local try rc
    for try in 1 2; do
        env "$@" timeout 240 "$RUN" -n 2 "$BIN" -b 4K -e 16M -f 8 -R 3 -t 2 -m "$MARGIN" \
            >"$TMP/$name.out" 2>&1
        rc=$?
        [ $rc -ne 1 ] && break
        echo "note: $name over the margin on try $try:"
        grep -E 'OVER|worst' "$TMP/$name.out" | sed 's/^/    /'
    done
    if [ $rc -eq 0 ] && grep -q 'worst auto / best' "$TMP/$name.out" &&
        grep -q 'worst choice / best: [0-9]' "$TMP/$name.out"; then
        echo "PASS $name: $(grep -o 'worst auto / best: [0-9.]*' "$TMP/$name.out"), $(grep -o \
            'worst choice / best: [0-9.]*' "$TMP/$name.out")"
        npass=$((npass + 1))
    else
        echo "FAIL $name (exit $rc):"
        sed 's/^/    /' "$TMP/$name.out" | tail -20
        nfail=$((nfail + 1))
    fi
}

check shm
check tcp RCOLL_TRANSPORT=tcp
echo "$npass passed, $nfail failed, 0 skipped"
[ $nfail -eq 0 ]
