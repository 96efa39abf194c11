#!/usr/bin/env bash
# rcoll-topo end to end on the fixtures: the matrix text, the --json report (checked with
# python3's json module), --ranks, exit status 2 with the line for bad files and bad knobs,
# --dump round trip, and live detection on this machine.
set -u
tool=$1
fx=$2
# The network transport the library would pick between hosts with RDMA ports: verbs where it
# is built, tcp in a build without it (tests/meson.build passes which).
net=${3:-verbs}
if [ "$net" = verbs ]; then
    net_text='verbs  NET  different hosts; RDMA port mlx5_0'
    noshm_text='verbs  NVL  same host, shared memory not allowed'
else
    net_text='tcp    NET  different hosts; verbs not allowed or not built'
    noshm_text='tcp    NVL  same host, shared memory not allowed; verbs not allowed or not built'
fi
tmp=$(mktemp -d /tmp/rcoll-topo-sh-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
unset RCOLL_TOPO_FILE RCOLL_TOPO_DUMP_FILE RCOLL_NET RCOLL_SHM_DISABLE RCOLL_TRANSPORT

# run NAME WANT_RC CMD...: stdout in $tmp/out, stderr in $tmp/err
run() {
    local name=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" = "$want" ]; then ok; else bad "$name: exit $rc, want $want: $(head -3 "$tmp/err")"; fi
}
has() { # NAME FILE TEXT
    if grep -qF -- "$3" "$2"; then ok; else bad "$1: '$3' not in $2: $(head -5 "$2")"; fi
}
pycheck() { # NAME SCRIPT (reads $tmp/out as JSON into d)
    # python3 is on every machine that builds rcoll (meson runs on it): missing, the check fails
    if ! command -v python3 >/dev/null; then
        bad "$1: python3 missing, the JSON report cannot be checked"
        return
    fi
    if python3 -c "import json,sys; d=json.load(open('$tmp/out')); $2" 2>"$tmp/pyerr"; then ok
    else bad "$1: $(tail -2 "$tmp/pyerr")"; fi
}

run "dgx8 text" 0 "$tool" --topo-file "$fx/dgx8_nvswitch.json"
has "dgx8 text" "$tmp/out" "GPU0    X      NV18   NV18"
has "dgx8 text" "$tmp/out" "0-55,112-167"
has "dgx8 text" "$tmp/out" "GPU0   -> NIC0 mlx5_0     PIX  GDR yes"
has "dgx8 text" "$tmp/out" "GPU pairs, CUDA IPC allowed up to SYS (RCOLL_P2P_LEVEL):"
has "dgx8 text" "$tmp/out" "NV#  = NVLink"
run "p2p level" 0 env RCOLL_P2P_LEVEL=PHB "$tool" --topo-file "$fx/script_2socket.json"
has "p2p level" "$tmp/out" "GPU pairs, CUDA IPC allowed up to PHB (RCOLL_P2P_LEVEL):"
has "p2p level" "$tmp/out" "GPU0-GPU1   SYS  IPC no: across CPU packages 0 and 1"
run "p2p level json" 0 env RCOLL_P2P_LEVEL=PHB "$tool" --json --topo-file "$fx/script_2socket.json"
pycheck "p2p level json" "assert d['p2p_level'] == 'PHB' and [p['ipc'] for p in d['pairs'] if p['a'].startswith('GPU') and p['b'].startswith('GPU')] == [False]"
run "p2p level bad" 2 env RCOLL_P2P_LEVEL=NET "$tool" --topo-file "$fx/script_2socket.json"
has "p2p level bad" "$tmp/err" "RCOLL_P2P_LEVEL"

run "dgx8 json" 0 "$tool" --topo-file "$fx/dgx8_nvswitch.json" --json
pycheck "dgx8 json" "
g, n, p = d['gpus'], d['nics'], d['pairs']
assert len(g) == 8 and len(n) == 8, (len(g), len(n))
for i, x in enumerate(g):
    for k in ('index', 'pci', 'numa', 'nic', 'gdr', 'gdr_reason'): assert k in x, k
    assert x['index'] == i and x['nic'] == 'mlx5_%d' % i and x['gdr'] is True, x
    assert x['numa'] == i // 4, x
for x in n:
    for k in ('name', 'pci', 'numa', 'link_layer', 'speed_mbps'): assert k in x, k
    assert x['link_layer'] == 'ib' and x['speed_mbps'] == 400000, x
gg = [q for q in p if q['a'].startswith('GPU') and q['b'].startswith('GPU')]
assert len(gg) >= 28 and all(q['path'] == 'NVL' and q['nvlinks'] == 18 for q in gg), gg[:3]
m = {(q['a'], q['b']): q['path'] for q in p}
assert m[('GPU0', 'NIC0')] == 'PIX' and m[('GPU0', 'NIC1')] == 'PXB', m
assert m[('GPU0', 'NIC2')] == 'PHB' and m[('GPU0', 'NIC4')] == 'SYS', m
assert len(p) == 16 * 15 // 2, len(p)
"

run "dgx8 ranks" 0 "$tool" --topo-file "$fx/dgx8_nvswitch.json" --json --ranks a:0,b:0,a:4,b:4
pycheck "dgx8 ranks" "
assert d['ring'] == [0, 2, 1, 3], d['ring']
t = {(x['a'], x['b']): x for x in d['transports']}
assert len(t) == 6
assert t[(0, 2)]['transport'] == 'shm' and t[(0, 2)]['path'] == 'NVL', t[(0, 2)]
assert t[(0, 1)]['transport'] == '$net' and t[(0, 1)]['path'] == 'NET', t[(0, 1)]
assert t[(0, 3)]['transport'] == '$net', t[(0, 3)]
assert ('mlx5_0' in t[(0, 3)]['reason']) == ('$net' == 'verbs'), t[(0, 3)]
assert t[(0, 2)]['ring_edge'] and t[(2, 1)]['ring_edge'] if (2, 1) in t else t[(1, 2)]['ring_edge']
"
run "dgx8 ranks text" 0 "$tool" -f "$fx/dgx8_nvswitch.json" -r a:0,a:1,b:0,b:1,c
has "dgx8 ranks text" "$tmp/out" "Ring order: 0 1 | 2 3 | 4"
has "dgx8 ranks text" "$tmp/out" "0 - 1   shm    NVL  same host: shm; GPUs 0 and 1 are NVL"
has "dgx8 ranks text" "$tmp/out" "1 - 2   $net_text"
# The same function as the library: its knobs change the answer.
run "dgx8 ranks net tcp" 0 env RCOLL_NET=tcp "$tool" -f "$fx/dgx8_nvswitch.json" -r a:0,a:1,b:0
has "dgx8 ranks net tcp" "$tmp/out" "1 - 2   tcp    NET  different hosts; verbs not allowed or not built"
run "dgx8 ranks no shm" 0 env RCOLL_SHM_DISABLE=1 "$tool" -f "$fx/dgx8_nvswitch.json" -r a:0,a:1
has "dgx8 ranks no shm" "$tmp/out" "0 - 1   $noshm_text"
run "dgx8 ranks net plugin" 0 env RCOLL_NET=plugin RCOLL_NET_PLUGIN=libnccl-net-x.so "$tool" \
    -f "$fx/dgx8_nvswitch.json" -r a:0,a:1,b:0
has "dgx8 ranks net plugin" "$tmp/out" \
    "1 - 2   plugin NET  different hosts; NCCL net plugin RCOLL_NET_PLUGIN=libnccl-net-x.so"

run "pcie4 json" 0 "$tool" --topo-file "$fx/pcie4.json" --json
pycheck "pcie4 json" "
g = d['gpus']
assert [x['gdr'] for x in g] == [True, True, False, False], g
assert 'PHB' in g[2]['gdr_reason'] and 'host bridge' in g[2]['gdr_reason'], g[2]
assert all(x['nic'] == 'mlx5_0' for x in g)
"

run "vm_flat PXB" 0 "$tool" --topo-file "$fx/vm_flat.json" --json
pycheck "vm_flat PXB" "assert d['gdr_level'] == 'PXB' and not any(x['gdr'] for x in d['gpus']) and d['nics'][0]['numa'] == -1"

run "nccl xml" 0 "$tool" --topo-file "$fx/dgx8_nvswitch.xml" --json
pycheck "nccl xml" "assert len(d['gpus']) == 8 and d['gpus'][5]['nic'] == 'mlx5_5'"

run "nvlink2 ranks" 0 "$tool" --topo-file "$fx/nvlink2.json" --ranks h1:0,h2:0
has "nvlink2 ranks" "$tmp/out" "0 - 1   tcp    NET  different hosts; no RDMA port that is not down"

run "dangling parent" 2 "$tool" --topo-file "$fx/bad_dangling_parent.json"
has "dangling parent" "$tmp/err" "bad_dangling_parent.json line 10: gpu 1: parent \"sw9\" is not defined"
run "missing comma" 2 "$tool" --topo-file "$fx/bad_missing_comma.json" --json
has "missing comma" "$tmp/err" "line 5: expected ',' or ']'"
run "nvlink self" 2 "$tool" --topo-file "$fx/bad_nvlink_self.json"
has "nvlink self" "$tmp/err" "line 7: gpu 1: nvlink to itself"
run "no file" 2 "$tool" --topo-file "$tmp/none.json"
has "no file" "$tmp/err" "cannot open topology file"
run "bad env file" 2 env RCOLL_TOPO_FILE="$fx/bad_unterminated.json" "$tool"
has "bad env file" "$tmp/err" "RCOLL_TOPO_FILE: topology file"
run "bad net" 2 env RCOLL_NET=fast "$tool" --topo-file "$fx/pcie4.json"
has "bad net" "$tmp/err" "RCOLL_NET='fast' is not one of auto, plugin, verbs or tcp"
run "bad ranks" 2 "$tool" --topo-file "$fx/pcie4.json" --ranks a:0,a:9
has "bad ranks" "$tmp/err" "the GPU must be -1 or 0..3"
run "bad option" 2 "$tool" --frobnicate

run "dump" 0 "$tool" --topo-file "$fx/pcie4.json" --dump "$tmp/pcie4.json"
run "dump json a" 0 "$tool" --topo-file "$fx/pcie4.json" --json
grep -v '"source"' "$tmp/out" >"$tmp/a"
run "dump json b" 0 "$tool" --topo-file "$tmp/pcie4.json" --json
grep -v '"source"' "$tmp/out" >"$tmp/b"
if cmp -s "$tmp/a" "$tmp/b"; then ok; else bad "dumped topology reads back the same"; fi

run "live" 0 "$tool"
has "live" "$tmp/out" "topology from"
run "live json" 0 "$tool" --json --ranks here,here
pycheck "live json" "assert 'gpus' in d and 'nics' in d and d['ring'] == [0, 1]"

echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
