#!/usr/bin/env bash
# test_rcoll_plot.sh SRC BUILD - tools/rcoll-plot turns the -J output of all_reduce_perf (one
# rank, no launcher) into a PNG and an SVG: the files must carry the PNG signature / an <svg>
# root element and be larger than an empty chart's header.  Skips (77) with neither
# matplotlib nor gnuplot.
set -u
src=$1
build=$2
plot=$src/tools/rcoll-plot
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null && ! command -v gnuplot >/dev/null; then
    echo "SKIP: neither python3-matplotlib nor gnuplot is installed"
    exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }

timeout 60 "$build/bench/all_reduce_perf" -b 8 -e 64K -f 4 \
    -n 2 -w 1 -J "$tmp/ar.json" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "all_reduce_perf -J"; }
# a second series: the same file under another label
timeout 60 /usr/bin/python3 "$plot" "$tmp/ar.json" "$tmp/ar.json" --label one --label two \
    -o "$tmp/c.png" --title "test chart" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "png"; }
timeout 60 /usr/bin/python3 "$plot" "$tmp/ar.json" --metric time -o "$tmp/c.svg" \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "svg"; }
[ "$(head -c 8 "$tmp/c.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    fail "c.png has no PNG signature"
[ "$(stat -c %s "$tmp/c.png")" -gt 5000 ] || fail "c.png is trivially small"
grep -q '<svg' "$tmp/c.svg" && grep -q '</svg>' "$tmp/c.svg" || fail "c.svg has no <svg> root"
[ "$(stat -c %s "$tmp/c.svg")" -gt 5000 ] || fail "c.svg is trivially small"
# a bad input is one sentence, exit 2
/usr/bin/python3 "$plot" "$tmp/out" -o "$tmp/x.png" >"$tmp/err" 2>&1
[ $? -eq 2 ] && grep -q "^rcoll-plot: cannot read" "$tmp/err" || fail "bad input not refused"
echo "ok: PNG $(stat -c %s "$tmp/c.png") bytes, SVG $(stat -c %s "$tmp/c.svg") bytes"
