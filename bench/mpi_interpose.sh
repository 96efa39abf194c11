#!/usr/bin/env bash
# bench/mpi_interpose.sh [BUILD_DIR] [ROUNDS] [-- mpi_interpose flags]
# Times the unmodified MPI program bench/mpi_interpose (MPI_Allreduce, float32 sum) under
# mpirun -np ${NP:-2} over shared memory (ob1/vader), alternately with plain Open MPI and
# with LD_PRELOAD=librcoll_mpi.so, ROUNDS times each (default 5); prints per size the
# median time of each and their ratio.  Environment (RCOLL_*) passes to both runs.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
shift $(( $# >= 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
exe=$build/bench/mpi_interpose
lib=$(readlink -f "$build/src/mpi/librcoll_mpi.so")
[ -x "$exe" ] && [ -f "$lib" ] || { echo "build $build first (with MPI)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader
    -np "${NP:-2}")
for env in $(env | grep -o '^RCOLL_[A-Z_0-9]*'); do mpirun+=(-x "$env"); done
for r in $(seq 1 "$rounds"); do
    "${mpirun[@]}" "$exe" "$@" | grep -v '^#' > "$tmp/mpi.$r"
    "${mpirun[@]}" -x LD_PRELOAD="$lib" "$exe" "$@" | grep -v '^#' > "$tmp/rcoll.$r"
done
python3 - "$tmp" "$rounds" <<'PY'
import statistics, sys, math
d, rounds = sys.argv[1], int(sys.argv[2])
def load(kind):
    t = {}
    for r in range(1, rounds + 1):
        for line in open(f"{d}/{kind}.{r}"):
            b, us = line.split()
            t.setdefault(int(b), []).append(float(us))
    return {b: statistics.median(v) for b, v in t.items()}
m, p = load("mpi"), load("rcoll")
print(f"# median of {rounds} alternating runs each; ratio = Open MPI time / preloaded time "
      "(> 1: the interposer is faster)")
print(f"{'bytes':>10} {'mpi(us)':>11} {'preload(us)':>12} {'speedup':>8}")
groups = {"8B-64KiB": [], "64KiB-1MiB": [], "1MiB-64MiB": []}
for b in sorted(m):
    s = m[b] / p[b]
    print(f"{b:>10} {m[b]:>11.2f} {p[b]:>12.2f} {s:>8.2f}")
    key = "8B-64KiB" if b < 65536 else ("64KiB-1MiB" if b < 1 << 20 else "1MiB-64MiB")
    groups[key].append(s)
for k, v in groups.items():
    if v:
        print(f"# {k}: geomean speedup {math.exp(sum(map(math.log, v)) / len(v)):.2f}, "
              f"min {min(v):.2f} ({len(v)} sizes)")
PY
