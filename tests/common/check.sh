# check.sh - the verdict helper the shell test scripts share (source it):
#   check NAME FUNCTION [ARGS...]  runs FUNCTION ARGS; prints "ok   NAME" or "FAIL NAME" and
#                                  then the first lines of $TMP/NAME.out and $TMP/NAME.err
#                                  (where the script's runner put the command's output)
#   check_summary                  prints the counts; its status is 0 when nothing failed
# Reads RC (and ELAPSED_MS when set) for the failure line; counts in npass / nfail.
npass=${npass:-0}
nfail=${nfail:-0}

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

check_summary() {
    echo "$npass passed, $nfail failed"
    [ "$nfail" = 0 ]
}
