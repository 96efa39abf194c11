#!/usr/bin/env bash
# multinode_bench.sh BUILD [RATE] - the multi-host all-reduce benchmarks of docs/benchmarks.md,
# on hosts emulated by tools/netns-cluster with every host link capped at RATE (default 1gbit):
#   1. 4 hosts x 1 rank: all-reduce bus bandwidth per size against the link rate;
#   2. 2 hosts x 2 ranks: flat ring (RCOLL_ALGO=ring) against the hierarchical all-reduce
#      (RCOLL_ALGO=hier), each next to the cost model's prediction; the model's constants come
#      from the tuning probe of a first run (RCOLL_ALGO=auto), passed to the forced runs in a
#      tuning file so that their predictions use the measured constants too.
# Times are the better of all_reduce_perf's out-of-place and in-place columns (-n 5 -w 1).
# Needs root (network namespaces).  Usage: bench/multinode_bench.sh build [1gbit]
set -euo pipefail
BUILD=$(cd "${1:?usage: multinode_bench.sh BUILD [RATE]}" && pwd)
RATE=${2:-1gbit}
SRC=$(cd "$(dirname "$0")/.." && pwd)
NC="$SRC/tools/netns-cluster"
PERF="$BUILD/bench/all_reduce_perf"
SIZES=(-b 16M -e 128M -f 2 -n 5 -w 1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Link rate in bytes per second from RATE (Nkbit, Nmbit, Ngbit).
rate_bps() {
    local r=${1,,}
    case $r in
    *gbit) echo $((${r%gbit} * 125000000)) ;;
    *mbit) echo $((${r%mbit} * 125000)) ;;
    *kbit) echo $((${r%kbit} * 125)) ;;
    *) echo "multinode_bench: cannot read rate '$1'" >&2; exit 2 ;;
    esac
}
LINK=$(rate_bps "$RATE")

# Rank 0's result rows of an all_reduce_perf run: "bytes best_time_us".
rows() {
    grep -E '^\[h0r0\] +[0-9]+ +[0-9]+ ' "$1" | awk '{t = $7 < $11 ? $7 : $11; print $2, t}'
}

echo "# machine: $(nproc) cores, $(uname -r); links capped at $RATE ($LINK B/s) by tbf"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), rcoll $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null)"

echo
echo "## 4 hosts x 1 rank: $NC --hosts 4 --rate $RATE -- all_reduce_perf ${SIZES[*]}"
"$NC" --hosts 4 --ranks-per-host 1 --rate "$RATE" -- "$PERF" "${SIZES[@]}" >"$TMP/flat4" 2>&1
printf '%12s %12s %14s %10s\n' bytes time_us busbw_GB/s of_link
rows "$TMP/flat4" | while read -r bytes t; do
    awk -v b="$bytes" -v t="$t" -v link="$LINK" 'BEGIN {
        bus = b / (t * 1e-6) * 2 * 3 / 4
        printf "%12d %12.0f %14.4f %9.1f%%\n", b, t, bus / 1e9, 100 * bus / link }'
done

echo
echo "## 2 hosts x 2 ranks: flat ring vs hierarchical, measured and predicted"
"$NC" --hosts 2 --ranks-per-host 2 --rate "$RATE" --env RCOLL_DEBUG=INFO \
    --env RCOLL_DEBUG_SUBSYS=INIT,ALGO --env RCOLL_DEBUG_FILE="$TMP/log_auto_%p" -- "$PERF" \
    "${SIZES[@]}" >"$TMP/auto" 2>&1
probe=$(cat "$TMP"/log_auto_* | grep -m1 -o \
    'tuning probe (net): alpha [0-9.]* us, beta [0-9.]* GB/s, reduction [0-9.]* GB/s')
echo "# $probe"
read -r alpha beta red < <(sed -E 's/.*alpha ([0-9.]+) us, beta ([0-9.]+) GB\/s, reduction ([0-9.]+).*/\1 \2 \3/' <<<"$probe")
printf 'net_alpha_us = %s\nnet_beta_gbps = %s\nreduce_gbps = %s\n' "$alpha" "$beta" "$red" \
    >"$TMP/tuning"
for a in ring hier; do
    "$NC" --hosts 2 --ranks-per-host 2 --rate "$RATE" --env RCOLL_ALGO=$a \
        --env RCOLL_TUNING_FILE="$TMP/tuning" --env RCOLL_DEBUG=INFO \
        --env RCOLL_DEBUG_SUBSYS=ALGO --env RCOLL_DEBUG_FILE="$TMP/log_${a}_%p" -- "$PERF" \
        "${SIZES[@]}" >"$TMP/$a" 2>&1
done
printf '%12s %12s %12s %7s %12s %12s %7s %10s\n' bytes ring_us ring_pred err hier_us \
    hier_pred err ring/hier
paste -d' ' <(rows "$TMP/ring") <(rows "$TMP/hier") | while read -r bytes tr _ th; do
    pr=$(cat "$TMP"/log_ring_* | grep -m1 -o "all-reduce of $bytes B on 4 ranks: ring (RCOLL_ALGO; [0-9.]*" |
        sed 's/.*; //')
    ph=$(cat "$TMP"/log_hier_* | grep -m1 -o "all-reduce of $bytes B on 4 ranks: hier (RCOLL_ALGO; [0-9.]*" |
        sed 's/.*; //')
    awk -v b="$bytes" -v tr="$tr" -v th="$th" -v pr="${pr:-0}" -v ph="${ph:-0}" 'BEGIN {
        printf "%12d %12.0f %12.0f %6.1f%% %12.0f %12.0f %6.1f%% %9.2fx\n", b, tr, pr,
               100 * (pr - tr) / tr, th, ph, 100 * (ph - th) / th, tr / th }'
done
