#!/usr/bin/env bash
# The layers of src/ (util -> cuda -> topo -> transport -> algo -> core) use only themselves and the
# layers below them: (1) a file of src/L includes headers of L and lower layers only (plus
# rcoll.h and rcoll_build.h); (2) the undefined symbols of L's static library that some layer
# defines are defined by L or a lower layer.  The build already refuses a wrong arrow at link
# time (src/meson.build: layer_check_*); this names the offending file or symbol.  (3) inside
# the core layer, no file calls a file that calls it back, directly or around a loop (the
# core's files call down only, src/core/api.c's header says in which order): a loop is
# printed with its files.
# Usage: layers.sh SRC_ROOT LIB_util LIB_cuda LIB_topo LIB_transport LIB_algo LIB_core
set -u
src=$1
shift
layers=(util cuda topo transport algo core)
[ $# -eq ${#layers[@]} ] || { echo "usage: layers.sh SRC_ROOT LIB_util ... LIB_core" >&2; exit 2; }
libs=("$@")
passed=0
failed=0
rank_of() { for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }

# 1. includes
for i in "${!layers[@]}"; do
    L=${layers[$i]}
    bad=""
    for f in "$src/src/$L"/*.[ch] "$src/src/$L"/*.cu; do
        [ -f "$f" ] || continue
        while IFS= read -r inc; do
            dir=${inc%%/*}
            [ "$dir" = "$inc" ] && continue # rcoll.h, rcoll_build.h
            r=$(rank_of "$dir")
            if [ "$r" -lt 0 ] || [ "$r" -gt "$i" ]; then
                bad+="  ${f#$src/} includes \"$inc\""$'\n'
            fi
        done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
    done
    if [ -z "$bad" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        printf 'FAIL %s includes a higher layer:\n%s' "$L" "$bad"
    fi
done

# 2. symbols: which layer defines each global symbol
declare -A owner
for i in "${!layers[@]}"; do
    [ -f "${libs[$i]}" ] || { echo "FAIL missing library ${libs[$i]}"; exit 1; }
    while read -r sym; do owner[$sym]=$i; done < <(nm --defined-only -g "${libs[$i]}" 2>/dev/null |
        awk 'NF == 3 {print $3}')
done
for i in "${!layers[@]}"; do
    L=${layers[$i]}
    bad=""
    while read -r sym; do
        o=${owner[$sym]:-}
        [ -n "$o" ] && [ "$o" -gt "$i" ] && bad+="  $sym (defined in ${layers[$o]})"$'\n'
    done < <(nm -u "${libs[$i]}" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u)
    if [ -z "$bad" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        printf 'FAIL %s calls a higher layer:\n%s' "$L" "$bad"
    fi
done
# 3. no loop between the core's files: who calls whom (caller, defining file), through tsort
core=${libs[$((${#layers[@]} - 1))]}
edges=$(join -1 2 -2 2 \
    <(nm -A -u "$core" 2>/dev/null | awk '$2 == "U" {n = split($1, a, ":"); print a[n - 1], $3}' |
        sort -k2,2) \
    <(nm -A --defined-only -g "$core" 2>/dev/null |
        awk 'NF == 3 {n = split($1, a, ":"); print a[n - 1], $3}' | sort -k2,2) |
    awk '$2 != $3 {print $2, $3}' | sort -u)
nedges=$(printf '%s\n' "$edges" | grep -c .)
loop=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null)
if [ "$nedges" -lt 10 ]; then
    failed=$((failed + 1))
    echo "FAIL core: only $nedges calls between its files found (nm output not understood)"
elif [ -z "$loop" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    printf 'FAIL core: its files call each other around a loop:\n%s\n' "$loop" | head -40 |
        sed 's/^tsort: //; s|[^ ]*/||'
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
