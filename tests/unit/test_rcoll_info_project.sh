#!/usr/bin/env bash
# rcoll-info --project end to end: the table and CSV for an H100 cluster and a netns one, and
# exit status 2 with a sentence naming the problem for bad descriptions (0 GPUs, GPUs not a
# multiple of the node size, negative bandwidths, not a number, an unknown preset).
set -u
tool=$1
tmp=$(mktemp -d /tmp/rcoll-info-project-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# run NAME WANT_RC CMD...: stdout in $tmp/out, stderr in $tmp/err
run() {
    local name=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        bad "$name: exit $rc, expected $want; stderr: $(head -c 300 "$tmp/err")"
        return 1
    fi
    ok
}
has() { # NAME FILE TEXT
    if grep -qF -- "$3" "$2"; then ok; else bad "$1: '$3' not in $(head -c 400 "$2")"; fi
}

run table 0 "$tool" --project 64 -b 1M -e 1G -f 1024
has table "$tmp/out" "## all-reduce on 64 GPUs"
has table "$tmp/out" "## reduce-scatter on 64 GPUs"
has table "$tmp/out" "8 nodes x 8 GPUs"
has table "$tmp/out" "hier-tree"
[ "$(grep -c 'GiB\|MiB' "$tmp/out")" -eq 6 ] && ok || bad "table: 2 sizes x 3 collectives"

run csv 0 "$tool" --project 4 --cluster netns --nic-gbit 1 --coll allreduce --size 4M --csv
has csv "$tmp/out" "collective,gpus,bytes,algorithm,time_us,algbw_GBs,busbw_GBs,chosen"
# the ring's busbw on 1 Gbit/s TCP links: a little under 1448/1538 x 0.125 GB/s
busbw=$(awk -F, '$4 == "ring" { print $7 }' "$tmp/out")
awk -v b="${busbw:-0}" 'BEGIN { exit !(b > 0.11 && b < 0.1177) }' && ok ||
    bad "csv: netns ring busbw '$busbw' not in (0.11, 0.1177)"
[ "$(grep -c ',1$' "$tmp/out")" -eq 1 ] && ok || bad "csv: one chosen algorithm"

# --json: the perf binaries' -J form (tools/rcoll-plot reads it), one file per algorithm
mkdir "$tmp/json"
run json 0 "$tool" --project 64 --coll allgather -b 1K -e 1M -f 32 --json "$tmp/json"
ls "$tmp/json" >"$tmp/list"
has json "$tmp/list" "all-gather-pat.json"
has json "$tmp/list" "all-gather-ring.json"
[ "$(wc -l <"$tmp/list")" -eq 3 ] && ok || bad "json: ring, hier-ring and pat, got $(cat "$tmp/list")"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); r = d["results"]
assert len(r) == 3 and r[0]["size"] == 1024 and r[2]["out_of_place"]["busbw"] > 0' \
    "$tmp/json/all-gather-pat.json" && ok || bad "json: all-gather-pat.json does not parse"
run json_dir 3 "$tool" --project 8 --json "$tmp/nowhere"
has json_dir "$tmp/err" "cannot write"

run help 0 "$tool" --project 8 --help
has help "$tmp/out" "--oversub"

run zero 2 "$tool" --project 0
has zero "$tmp/err" "the GPU count must be at least 1"
run multiple 2 "$tool" --project 12
has multiple "$tmp/err" "12 GPUs is not a multiple of the node size (8 GPUs per node)"
run neg_nvlink 2 "$tool" --project 16 --nvlink-gbs -450
has neg_nvlink "$tmp/err" "NVLink bandwidth must be a positive number"
run neg_nic 2 "$tool" --project 16 --nic-gbit -400
has neg_nic "$tmp/err" "NIC bandwidth must be a positive number"
run nan 2 "$tool" --project lots
has nan "$tmp/err" "--project needs a number, not 'lots'"
run preset 2 "$tool" --project 8 --cluster dgx
has preset "$tmp/err" "--cluster takes h100 or netns"
run huge 2 "$tool" --project 99999999999
has huge "$tmp/err" "--project takes at most 1073741824 GPUs"
run too_big 2 "$tool" --project 32768
has too_big "$tmp/err" "add a level"
run levels 0 "$tool" --project 32768 --levels 3 --leaves-per-pod 32 --oversub 1:2 --size 1G

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
