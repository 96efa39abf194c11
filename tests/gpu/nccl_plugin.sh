#!/usr/bin/env bash
# nccl_plugin.sh - real NCCL over rcoll's net plugin, for a machine with an NVIDIA GPU and NCCL.
# NOT part of `meson test`: the development machines have no GPU, so this never runs in the
# suites; run it by hand (or from a GPU CI job) as one script that builds, runs and checks:
#
#   tests/gpu/nccl_plugin.sh BUILD_DIR        (BUILD_DIR holds src/plugin/libnccl-net-rcoll.so)
#
# Two processes run NCCL all-reduces (in place, float sum, 1 to 16M elements, three times
# each) with NCCL_NET_PLUGIN set to the built library, NCCL_NET=rcoll, NCCL_DEBUG=INFO,
# NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1 and one NCCL_HOSTID per process, so that NCCL treats
# them as two hosts and moves every byte through the net plugin, even when both share one
# GPU (ranks take GPU rank % count).  The program is a small C file compiled here against
# nccl.h and libnccl.  Checks: both ranks finish in time with every element right; NCCL's log
# says it loaded the rcoll plugin, uses network rcoll and connected channels via NET/rcoll;
# the plugin logged no failure.  With NCCL_TESTS_DIR (an nccl-tests build directory, MPI=1)
# and mpirun, nccl-tests' all_reduce_perf -c 1 runs the same way and must report no wrong
# values.
#
# Environment: CUDA_HOME (default /usr/local/cuda), NCCL_HOME (nccl.h in include/, libnccl in
# lib/; default: CUDA_HOME's, then /usr), NCCL_TESTS_DIR, GPU_TEST_TIMEOUT (seconds per run,
# default 300), KEEP=1 keeps the work directory.  Exit: 0 passed, 1 a check failed (the
# program's compilation included), 77 no GPU or no NCCL here (nothing could run; without a GPU
# the program is still compiled against nccl.h).
set -u

BUILD=${1:?usage: nccl_plugin.sh BUILD_DIR}
SO=$(readlink -f "$BUILD/src/plugin/libnccl-net-rcoll.so" 2>/dev/null || true)
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/common/check.sh
. "$HERE/../common/check.sh"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LIMIT=${GPU_TEST_TIMEOUT:-300}
TMP=$(mktemp -d)
if [ "${KEEP:-0}" = 1 ]; then echo "work directory: $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi

if [ -z "$SO" ] || [ ! -f "$SO" ]; then
    echo "FAIL libnccl-net-rcoll.so not found under $BUILD/src/plugin (-Dnccl_plugin)"
    exit 1
fi
# nccl.h and libnccl.so
INC="" LIB=""
for d in ${NCCL_HOME:+"$NCCL_HOME/include"} "$CUDA_HOME/include" /usr/include; do
    [ -f "$d/nccl.h" ] && { INC=$d; break; }
done
for d in ${NCCL_HOME:+"$NCCL_HOME/lib" "$NCCL_HOME/lib64"} "$CUDA_HOME/lib64" \
    /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64; do
    ls "$d"/libnccl.so* >/dev/null 2>&1 && { LIB=$d; break; }
done
if [ -z "$INC" ] || [ -z "$LIB" ]; then
    echo "SKIP NCCL not found (nccl.h: ${INC:-none}, libnccl: ${LIB:-none}); set NCCL_HOME"
    exit 77
fi
ver=$(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$INC/nccl.h" | awk '{printf "%s.", $3}')
echo "NCCL ${ver%.} ($INC, $LIB); plugin: $SO"

cat > "$TMP/allreduce.c" <<'EOF'
/* Rank argv[1] of 2: the unique id goes through the file argv[2]; in-place float sums. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "rank %d: %s: %s\n", rank, #x, cudaGetErrorString(e)); return 1; } } while (0)
#define NCCL(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { \
    fprintf(stderr, "rank %d: %s: %s\n", rank, #x, ncclGetErrorString(r)); return 1; } } while (0)

int main(int argc, char **argv)
{
    int rank = argc > 2 ? atoi(argv[1]) : -1, ndev = 0, bad = 0;
    char tmp[4096];
    ncclUniqueId id;
    ncclComm_t comm;
    cudaStream_t s;
    if (rank < 0) return 2;
    if (rank == 0) {
        NCCL(ncclGetUniqueId(&id));
        snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) || rename(tmp, argv[2])) {
            perror("id file");
            return 1;
        }
    } else {
        FILE *f = NULL;
        for (int i = 0; i < 600 && !(f = fopen(argv[2], "rb")); i++) usleep(100000);
        if (!f || fread(&id, sizeof(id), 1, f) != 1) { fprintf(stderr, "no id\n"); return 1; }
        fclose(f);
    }
    CUDA(cudaGetDeviceCount(&ndev));
    CUDA(cudaSetDevice(rank % ndev));
    NCCL(ncclCommInitRank(&comm, 2, id, rank));
    CUDA(cudaStreamCreate(&s));
    const size_t counts[] = {1, 1000, 65537, 1u << 20, 1u << 24};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        float *h = malloc(n * sizeof(float)), *d = NULL;
        if (!h) return 1;
        CUDA(cudaMalloc((void **)&d, n * sizeof(float)));
        for (int iter = 0; iter < 3; iter++) {
            for (size_t i = 0; i < n; i++) h[i] = (float)(rank + 1 + (int)(i % 7) + iter);
            CUDA(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
            NCCL(ncclAllReduce(d, d, n, ncclFloat, ncclSum, comm, s));
            CUDA(cudaStreamSynchronize(s));
            CUDA(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
            size_t wrong = n;
            for (size_t i = 0; i < n && wrong == n; i++)
                if (h[i] != (float)(3 + 2 * (int)(i % 7) + 2 * iter)) wrong = i;
            if (wrong != n) {
                printf("rank %d: all-reduce of %zu floats (pass %d): WRONG at %zu: %g\n", rank,
                       n, iter, wrong, (double)h[wrong]);
                bad++;
            }
        }
        printf("rank %d: all-reduce of %zu floats x3: %s\n", rank, n, bad ? "errors" : "ok");
        cudaFree(d);
        free(h);
    }
    NCCL(ncclCommDestroy(comm));
    return bad ? 1 : 0;
}
EOF

# the NCCL environment of rank $1, then the command
nccl_env() {
    local r=$1
    shift
    env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_NET_PLUGIN="$SO" NCCL_NET=rcoll \
        NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_HOSTID="rcoll-plugin-test-host$r" \
        LD_LIBRARY_PATH="$(dirname "$SO"):$LIB:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}" "$@"
}

compile() {
    gcc -O2 -o "$TMP/allreduce" "$TMP/allreduce.c" -I"$INC" -I"$CUDA_HOME/include" \
        -L"$LIB" -L"$CUDA_HOME/lib64" -lnccl -lcudart -Wl,-rpath,"$LIB:$CUDA_HOME/lib64" \
        > "$TMP/compile.out" 2> "$TMP/compile.err"
    RC=$?
    return $RC
}

run_allreduce() {
    rm -f "$TMP/id"
    nccl_env 0 timeout "$LIMIT" "$TMP/allreduce" 0 "$TMP/id" > "$TMP/rank0.out" 2>&1 &
    local p0=$!
    nccl_env 1 timeout "$LIMIT" "$TMP/allreduce" 1 "$TMP/id" > "$TMP/rank1.out" 2>&1 &
    local p1=$!
    wait $p0
    local rc0=$?
    wait $p1
    local rc1=$?
    cat "$TMP/rank0.out" "$TMP/rank1.out" > "$TMP/allreduce.out"
    RC="$rc0/$rc1"
    grep -h "all-reduce of" "$TMP/rank0.out" "$TMP/rank1.out"
    [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ "$(grep -c ': ok$' "$TMP/allreduce.out")" = 10 ]
}

log_has() { # PATTERN: NCCL's log of the all-reduce run shows it on both ranks
    local f
    for f in "$TMP/rank0.out" "$TMP/rank1.out"; do
        grep -qE "$1" "$f" || { echo "not in ${f##*/}: $1" > "$TMP/$2.err"; RC=1; return 1; }
    done
}

# The program is compiled first, so that a machine without a GPU still checks this script
# against its nccl.h; the runs need a GPU.
check compile compile
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    [ "$nfail" = 0 ] || exit 1
    echo "SKIP no NVIDIA GPU here (nvidia-smi -L failed): the test program compiled, nothing ran"
    exit 77
fi
nvidia-smi -L
if [ "$nfail" = 0 ]; then
    check allreduce run_allreduce
    check plugin_loaded log_has 'Loaded net plugin rcoll' plugin_loaded
    check network_rcoll log_has 'Using network rcoll' network_rcoll
    check via_net_rcoll log_has 'via NET/rcoll' via_net_rcoll
    check plugin_devices log_has 'NET/rcoll : device 0' plugin_devices
    no_failure() { ! grep -hE 'NET/rcoll : .* failed' "$TMP/rank0.out" "$TMP/rank1.out"; }
    check no_plugin_failure no_failure
fi

# nccl-tests, when given
if [ -n "${NCCL_TESTS_DIR:-}" ]; then
    PERF="$NCCL_TESTS_DIR/all_reduce_perf"
    [ -x "$PERF" ] || PERF="$NCCL_TESTS_DIR/build/all_reduce_perf"
    if [ ! -x "$PERF" ]; then
        echo "FAIL NCCL_TESTS_DIR=$NCCL_TESTS_DIR has no all_reduce_perf"
        nfail=$((nfail + 1))
    elif ! command -v mpirun >/dev/null 2>&1; then
        skip nccl_tests "mpirun not found (nccl-tests needs MPI=1 for two processes)"
    else
        cat > "$TMP/rank.sh" <<'EOF'
#!/usr/bin/env bash
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
export NCCL_HOSTID="rcoll-plugin-test-host$r"
exec "$@"
EOF
        chmod +x "$TMP/rank.sh"
        nccl_tests() {
            nccl_env x timeout "$LIMIT" mpirun -np 2 --oversubscribe --allow-run-as-root \
                -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x NCCL_NET_PLUGIN -x NCCL_NET \
                -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x LD_LIBRARY_PATH \
                "$TMP/rank.sh" "$PERF" -b 8 -e 64M -f 4 -g 1 -c 1 -n 5 -w 2 \
                > "$TMP/nccl_tests.out" 2>&1
            RC=$?
            grep -E '^ +[0-9]+ +[0-9]+ +float' "$TMP/nccl_tests.out" | head -20
            [ $RC = 0 ] && grep -q 'Out of bounds values : 0 OK' "$TMP/nccl_tests.out" &&
                grep -q 'Using network rcoll' "$TMP/nccl_tests.out"
        }
        check nccl_tests nccl_tests
    fi
else
    skip nccl_tests "NCCL_TESTS_DIR not set (the compiled all-reduce ran instead)"
fi
check_summary
