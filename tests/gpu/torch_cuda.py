"""torch_cuda.py - rcoll's C library on PyTorch CUDA tensors (suite gpu; tests/gpu/run.sh).

Two spawned processes share the GPU.  Each makes CUDA tensors with torch first (so torch has
loaded the driver and RCOLL_CUDA=auto picks it up at communicator creation), joins a
2-rank communicator through python/rcoll (ctypes over the librcoll that RCOLL_LIBRARY names),
then hands the tensors' device pointers (data_ptr) to the C calls: rcoll_allreduce out of
place and in place (float32 and bfloat16, 1 Mi + 3 elements), then rcoll_allreduce_stream on
torch's current stream, with torch kernels before and after it on that stream and no host
synchronization in between.  Results are checked on the GPU against the exact sums.  The
python/rcoll package itself takes buffer-protocol objects only; this checks the C library's
view of torch's memory (pointer classification, staging, stream order), not a torch backend.
Exit 77 with the reason where there is no GPU, no torch or a torch without CUDA.
"""
import ctypes
import os
import sys
import time

from gpu_spawn import all_passed, spawn, torch_cuda_or_skip

N = (1 << 20) + 3
TIMEOUT_S = float(os.environ.get("RCOLL_TIMEOUT", "60"))


def rank_main(rank: int, uid_bytes: bytes, queue) -> None:
    import torch
    from rcoll import _lib
    from rcoll._core import IN_PLACE, Communicator, Datatype, Op, UniqueId

    lines = []
    fails = 0

    def check(ok: bool, what: str) -> None:
        nonlocal fails
        lines.append(("ok   " if ok else "FAIL ") + f"rank {rank}: {what}")
        fails += 0 if ok else 1

    torch.cuda.set_device(0)
    if rank == 0:
        lines.append(f"device 0: {torch.cuda.get_device_name(0)}")
    idx = torch.arange(N, device="cuda", dtype=torch.float32) % 97
    send = idx + 1000 * rank  # torch's allocations, its kernels: the driver is loaded now
    recv = torch.full_like(send, -1.0)
    torch.cuda.synchronize()
    comm = Communicator.init_rank(2, UniqueId.from_bytes(uid_bytes), rank, timeout_s=TIMEOUT_S)
    h = comm._handle()
    lib = _lib.lib
    want = 2 * idx + 1000  # rank 0 + rank 1

    t0 = time.perf_counter()
    st = lib.rcoll_allreduce(send.data_ptr(), recv.data_ptr(), N, Datatype.FLOAT32, Op.SUM, h)
    dt = time.perf_counter() - t0
    check(st == 0 and torch.equal(recv, want),
          f"rcoll_allreduce, float32 CUDA tensors, out of place (status {st}, {dt * 1e3:.2f} ms)")
    st = lib.rcoll_allreduce(IN_PLACE, send.data_ptr(), N, Datatype.FLOAT32, Op.SUM, h)
    check(st == 0 and torch.equal(send, want), f"rcoll_allreduce, in place (status {st})")

    b = (idx + rank).to(torch.bfloat16)  # small integers: exact in bfloat16
    torch.cuda.synchronize()
    st = lib.rcoll_allreduce(IN_PLACE, b.data_ptr(), N, Datatype.BFLOAT16, Op.MAX, h)
    check(st == 0 and torch.equal(b, (idx + 1).to(torch.bfloat16)),
          f"rcoll_allreduce, bfloat16 max, in place (status {st})")

    # Stream order: torch writes the input on its stream, rcoll reduces on it, torch reads the
    # result on it; the host waits once, at the end.
    fn = lib.rcoll_allreduce_stream
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                   ctypes.c_void_p, ctypes.c_void_p]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = idx * (rank + 1)
        y = torch.empty_like(x)
        st = fn(x.data_ptr(), y.data_ptr(), N, Datatype.FLOAT32, Op.SUM, h, stream.cuda_stream)
        z = y - 3 * idx  # rank 0's idx + rank 1's 2 idx
        bad = int(torch.count_nonzero(z))  # synchronizes the stream
    check(st == 0 and bad == 0,
          f"rcoll_allreduce_stream on a torch stream (status {st}, {bad} elements wrong)")
    if fails:
        lines.append(f"rank {rank}: rcoll says: {comm.last_error}")
    comm.destroy()
    queue.put((rank, fails, lines))


def main() -> int:
    torch = torch_cuda_or_skip("torch CUDA")
    if torch is None:
        return 77
    try:
        from rcoll import _core
    except ImportError as e:
        print(f"FAIL python/rcoll cannot load librcoll: {e}")
        return 1
    uid = _core.get_unique_id()  # this process serves the bootstrap; it never touches CUDA
    results, codes = spawn(2, rank_main, (uid.to_bytes(),), TIMEOUT_S * 2 + 60)
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}): rank exit codes {codes}")
    ok = all_passed(results, codes, 2)
    print("torch CUDA tensors through librcoll: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
