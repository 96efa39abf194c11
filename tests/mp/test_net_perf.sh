#!/usr/bin/env bash
# Tests bench/rcoll_net_perf (perftest-style transport microbenchmark): for tcp and shm, bw and
# lat, a small sweep must exit 0, print perftest's table header byte for byte, rows with the
# right number of numeric columns, and JSON with one entry per size and positive values; a
# --check run verifies every message; an unknown transport exits 2 naming it.
# Every run is bounded by `timeout`.  Usage: bash tests/mp/test_net_perf.sh <meson build root>
set -u

BUILD=${1:?usage: test_net_perf.sh <meson build root>}
BIN="$BUILD/bench/rcoll_net_perf"
if [ ! -x "$BIN" ]; then
    echo "FAIL rcoll_net_perf not found at $BIN"
    exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# perftest's column headers (perftest_parameters.h: RESULT_FMT_G, RESULT_FMT_LAT), exactly.
HDR_BW=' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]'
HDR_LAT=' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] '
SEP='---------------------------------------------------------------------------------------'

npass=0
nfail=0
RC=0

# run NAME ARGS...: output in $TMP/NAME.out/.err, exit status in RC.
run() {
    local name=$1
    shift
    timeout 60 "$BIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
    RC=$?
}

# check NAME FUNCTION, check_summary: tests/common/check.sh
source "$(dirname "$0")/../common/check.sh"

# The table: header line 1, then the separator, perftest's header, one row per size, the
# separator.  Rows: ncols numbers, all >= 0; bytes, iterations and the last bw column
# (MsgRate, 6 decimals) > 0.  Sizes 2, 4, ..., max in order.
table_ok() { # NAME MODE NSIZES
    local out="$TMP/$1.out" mode=$2 nsizes=$3 hdr ncols
    if [ "$mode" = bw ]; then hdr=$HDR_BW ncols=5; else hdr=$HDR_LAT ncols=9; fi
    [ "$(sed -n 2p "$out")" = "$SEP" ] || { echo "    separator missing"; return 1; }
    [ "$(sed -n 3p "$out")" = "$hdr" ] || { echo "    header differs from perftest's"; return 1; }
    [ "$(tail -n 1 "$out")" = "$SEP" ] || { echo "    closing separator missing"; return 1; }
    sed -n "4,$(($(wc -l <"$out") - 1))p" "$out" | awk -v n="$ncols" -v rows="$nsizes" \
        -v mode="$mode" '
        { if (NF != n) { print "    row " NR ": " NF " columns"; bad = 1 }
          for (i = 1; i <= NF; i++)
              if ($i !~ /^[0-9]+(\.[0-9]+)?$/) { print "    row " NR ": not a number: " $i; bad = 1 }
          if ($1 != 2 ^ NR) { print "    row " NR ": size " $1; bad = 1 }
          if ($2 <= 0 || (mode == "bw" && $5 <= 0) || (mode == "lat" && $3 <= 0)) {
              print "    row " NR ": non-positive value"; bad = 1 }
        }
        END { if (NR != rows) { print "    " NR " rows, want " rows; bad = 1 } exit bad }'
}

json_ok() { # NAME TRANSPORT MODE NSIZES
    python3 - "$TMP/$1.json" "$2" "$3" "$4" <<'EOF'
import json, sys
path, transport, mode, nsizes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = json.load(open(path))
keys = {"bw": ["bw_peak_gbps", "bw_avg_gbps", "msg_rate_mpps"],
        "lat": ["t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "p99_us",
                "p99_9_us"]}[mode]
assert len(rows) == nsizes, f"{len(rows)} entries, want {nsizes}"
for i, r in enumerate(rows):
    assert r["transport"] == transport and r["mode"] == mode and r["device"], r
    assert r["bytes"] == 2 << i and r["iterations"] == 50, r
    for k in keys:
        ok = r[k] >= 0 if k == "t_stdev_us" else r[k] > 0
        assert ok, f"{k} = {r[k]} in {r}"
    if mode == "lat":
        assert r["t_min_us"] <= r["t_typical_us"] <= r["t_max_us"], r
    else:
        assert r["bw_peak_gbps"] >= r["bw_avg_gbps"], r
EOF
}

sweep_ok() { # NAME TRANSPORT MODE
    local name=$1 transport=$2 mode=$3
    run "$name" -t "$transport" "--$mode" -a -e 64K -n 50 --json "$TMP/$name.json"
    [ "$RC" = 0 ] || return 1
    grep -q "^# rcoll_net_perf: transport $transport, device .*, mode $mode " "$TMP/$name.out" ||
        { echo "    header line missing"; return 1; }
    table_ok "$name" "$mode" 16 && json_ok "$name" "$transport" "$mode" 16
}

check_every_ok() { # NAME TRANSPORT MODE: --check verifies all messages, and says so
    run "$1" -t "$2" "--$3" -s 4K -n 200 --check
    [ "$RC" = 0 ] && grep -q "data check: every message" "$TMP/$1.out"
}

unknown_transport() {
    run unknown -t nosuch
    [ "$RC" = 2 ] && grep -q "nosuch" "$TMP/unknown.err" && [ ! -s "$TMP/unknown.out" ]
}

for t in tcp shm; do
    for m in bw lat; do
        check "${t}_$m" sweep_ok "${t}_$m" "$t" "$m"
    done
done
check shm_bw_check check_every_ok shm_bw_check shm bw
check tcp_lat_check check_every_ok tcp_lat_check tcp lat
check unknown_transport unknown_transport

check_summary
