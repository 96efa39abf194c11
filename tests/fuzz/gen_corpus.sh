#!/usr/bin/env bash
# tests/fuzz/gen_corpus.sh BUILD_DIR - remake the seed corpora in tests/fuzz/corpus: the
# messages gen_corpus.c writes (valid messages of every kind, laid out by the library's own
# structs) and the topology fixtures of tests/fixtures.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: gen_corpus.sh BUILD_DIR}
ninja -C "$build" tests/fuzz/fuzz_gen_corpus >/dev/null
out="$src/tests/fuzz/corpus"
for t in bootstrap bs_join tcp shm handle verbs knobs topo_json topo_nccl_xml topo_file; do
    rm -rf "${out:?}/$t"
done
mkdir -p "$out"
"$build/tests/fuzz/fuzz_gen_corpus" "$out"
fx="$src/tests/fixtures"
mkdir -p "$out/topo_json" "$out/topo_nccl_xml" "$out/topo_file"
for f in "$fx"/*.json; do cp "$f" "$out/topo_json/"; done
cp "$fx/dgx8_nvswitch.xml" "$out/topo_nccl_xml/"
cp "$fx/hwloc_2socket.xml" "$fx/dgx8_nvswitch.xml" "$fx/vm_flat.json" "$out/topo_file/"
echo "seeds: $(find "$out" -type f | wc -l) files, $(du -sk "$out" | cut -f1) KiB"
