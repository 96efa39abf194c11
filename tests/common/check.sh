# check.sh - the verdict helper the shell test scripts share (source it); the shell side of
# tests/common/check.h:
#   check NAME FUNCTION [ARGS...]  runs FUNCTION ARGS; prints "ok   NAME" or "FAIL NAME" and
#                                  then the first lines of $TMP/NAME.out and $TMP/NAME.err
#                                  (where the script's runner put the command's output)
#   skip NAME WHY                  counts a check that cannot run on this machine: "SKIP NAME: WHY"
#                                  (only for what this machine cannot do; a check that should
#                                  run here and cannot is a FAIL)
#   check_summary                  prints "N passed, M failed, K skipped"; its status is 1 when
#                                  a check failed or none ran, 77 (meson's SKIP) when every
#                                  check was skipped, 0 otherwise
# Reads RC (and ELAPSED_MS when set) for the failure line; counts in npass, nfail, nskip.
npass=${npass:-0}
nfail=${nfail:-0}
nskip=${nskip:-0}

check() {
    local name=$1
    shift
    if "$@"; then
        echo "ok   $name"
        npass=$((npass + 1))
    else
        echo "FAIL $name (rc=${RC:-?}${ELAPSED_MS:+, ${ELAPSED_MS} ms})"
        for f in "$TMP/$name.out" "$TMP/$name.err"; do
            [ -f "$f" ] && sed "s|^|    ${f##*/}: |" "$f" | head -30
        done
        nfail=$((nfail + 1))
    fi
}

skip() {
    echo "SKIP $1: $2"
    nskip=$((nskip + 1))
}

check_summary() {
    echo "$npass passed, $nfail failed, $nskip skipped"
    if [ "$nfail" != 0 ]; then return 1; fi
    if [ "$npass" = 0 ] && [ "$nskip" = 0 ]; then echo "FAIL: no check ran"; return 1; fi
    if [ "$npass" = 0 ]; then return 77; fi
    return 0
}
