#!/usr/bin/env bash
# The shared library exports exactly the functions declared in include/rcoll.h: nothing
# internal leaks (version script), and nothing declared is missing.
set -u
src=$1
lib=$2
want=$(tr '\n' ' ' < "$src/include/rcoll.h" | grep -oE 'rcoll_[a-z_]+\(' | tr -d '(' | sort -u)
have=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
extra=$(comm -13 <(echo "$want") <(echo "$have"))
missing=$(comm -23 <(echo "$want") <(echo "$have"))
fail=0
[ -n "$extra" ] && { echo "exported but not in rcoll.h: $extra"; fail=1; }
[ -n "$missing" ] && { echo "declared in rcoll.h but not exported: $missing"; fail=1; }
n=$(echo "$want" | wc -w)
if [ $fail = 0 ]; then echo "1 passed, 0 failed ($n public functions exported, nothing else)"; else echo "0 passed, 1 failed"; fi
exit $fail
