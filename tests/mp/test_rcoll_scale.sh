#!/usr/bin/env bash
# test_rcoll_scale.sh SRC BUILD - tools/rcoll-scale measures communicator creation at 72
# ranks (9 emulated hosts of 8) with the bootstrap tree (rcoll-run's default above 64: one
# relay per 32 ranks) and with one root (--star), and rcoll-plot charts its JSON:
#   - the tree's root holds its block and two relays (24 + 2), a relay its block, one root 72;
#   - after creation a rank holds at most 14 connections (ring and tree links);
#   - each creation has a critical path (rcoll_comm_setup_stats) within the job's CPU;
#   - --repeat 3 gives each quantity as the median of its runs, the runs kept;
#   - a bad rank count is refused with a sentence.
set -u
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" "$tmp/err" 2>/dev/null | tail -20; exit 1; }

timeout 300 /usr/bin/python3 "$src/tools/rcoll-scale" -B "$build" -n 72 --star \
    -o "$tmp/scale.json" >"$tmp/out" 2>"$tmp/err" || fail "rcoll-scale exited $?"
/usr/bin/python3 - "$tmp/scale.json" <<'PY' || fail "values"
import json, sys
rows = {r["mode"]: r for r in json.load(open(sys.argv[1]))["results"]}
t, s = rows["tree"], rows["star"]
bad = []
# 72 ranks, 2 relays: blocks of 24; the root holds its block and 2 relays (26), a relay 24
if not (24 <= t["root_accepted"] <= 30): bad.append("tree root accepted %d" % t["root_accepted"])
if not (23 <= t["relay_accepted"] <= 28): bad.append("relay accepted %d" % t["relay_accepted"])
if s["root_accepted"] < 72: bad.append("star root accepted %d, want 72" % s["root_accepted"])
for r in (t, s):
    if r["conns0_max"] > 14: bad.append("%s: %d connections after init" % (r["mode"], r["conns0_max"]))
    # the critical path: some CPU, less than the job's own CPU (cpu_ms is a mean per process)
    if not (0 < r["path_ms"] <= r["cpu_ms"] * 72): bad.append("%s: path %s ms" % (r["mode"], r["path_ms"]))
print("tree: root %d, relay %d, conns %d; star: root %d; job init %.2f / %.2f s" % (
    t["root_accepted"], t["relay_accepted"], t["conns0_max"], s["root_accepted"],
    t["job_init_s"], s["job_init_s"]))
if bad:
    print("; ".join(bad))
    sys.exit(1)
PY
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || command -v gnuplot >/dev/null; then
    timeout 60 /usr/bin/python3 "$src/tools/rcoll-plot" "$tmp/scale.json" --metric root \
        -o "$tmp/s.png" >"$tmp/out" 2>&1 || fail "rcoll-plot of the scale JSON"
    [ "$(stat -c %s "$tmp/s.png")" -gt 5000 ] || fail "the chart is trivially small"
else
    echo "SKIP chart: neither python3-matplotlib nor gnuplot is installed"
fi
# --repeat: each quantity the median of the runs, the runs kept
timeout 120 /usr/bin/python3 "$src/tools/rcoll-scale" -B "$build" -n 16 -r 3 \
    -o "$tmp/rep.json" >"$tmp/out" 2>"$tmp/err" || fail "rcoll-scale -r 3 exited $?"
/usr/bin/python3 - "$tmp/rep.json" <<'PY' || fail "repeat"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
runs = r["runs"]
for k in ("path_ms", "job_init_s", "conns0_max"):
    if len(runs) != 3 or r[k] != sorted(x[k] for x in runs)[1]:
        print("%s: %s is not the median of %s" % (k, r[k], [x[k] for x in runs]))
        sys.exit(1)
PY
/usr/bin/python3 "$src/tools/rcoll-scale" -B "$build" -n 1 >"$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "rank counts must lie in" "$tmp/out" || fail "-n 1 not refused"
echo "ok"
