#!/usr/bin/env bash
# run_rdma.sh SRC BUILD - the meson suite `rdma`: boots the Soft-RoCE VM (tools/rxe-vm) with
# the build's programs that in_vm.sh uses inside and runs tests/rdma/in_vm.sh there.  Exit 77
# (skip) where the VM cannot run (no qemu or kernel package and RXE_VM_NO_INSTALL=1, or no
# network to apt).
set -euo pipefail
SRC=$(cd "${1:?usage: run_rdma.sh SRC BUILD}" && pwd)
BUILD=$(cd "${2:?usage: run_rdma.sh SRC BUILD}" && pwd)
VM="$SRC/tools/rxe-vm"
set +e
"$VM" --check
rc=$?
set -e
if [ "$rc" != 0 ]; then
    echo "SKIP: the Soft-RoCE VM cannot run here (tools/rxe-vm --check gave $rc)"
    exit 77
fi
# Into the VM: what in_vm.sh and failover_repeat.sh run (their "$BUILD/..." paths; rxe-vm
# adds their shared libraries), not the whole build tree: the VM unpacks its image into half
# its memory, and the tree (750 MB, a 16 MB binary per test) stopped fitting ("Initramfs
# unpacking failed: write error" on the VM's console, in_vm.sh itself missing).
includes=()
for rel in $(cat "$SRC/tests/rdma/in_vm.sh" "$SRC/tests/rdma/failover_repeat.sh" |
             grep -o '\$BUILD/[A-Za-z0-9_./+-]*' | sed 's|^\$BUILD/||' | sort -u); do
    [ -e "$BUILD/$rel" ] && includes+=(--include "$BUILD/$rel")
done
exec "$VM" --timeout "${RXE_VM_TIMEOUT:-1500}" --mem 2048 "${includes[@]}" \
    --include "$SRC/tests/rdma/in_vm.sh" --include "$SRC/tests/rdma/failover_repeat.sh" \
    --include "$SRC/tests/fixtures/vm_rxe_2gpu.json" \
    -- /bin/sh "$SRC/tests/rdma/in_vm.sh" "$BUILD" "$SRC/tests/fixtures/vm_rxe_2gpu.json"
