"""gpu_spawn.py - what the torch GPU tests share (tests/gpu/torch_cuda.py,
tests/gpu/torch_backend_cuda.py): the skip when there is no GPU or no torch with CUDA, and
ranks as spawned processes that report (rank, failures, lines) through a queue.
"""
import multiprocessing as mp
import os
import sys
import time


def torch_cuda_or_skip(what: str):
    """This interpreter's torch when it sees a CUDA device; otherwise prints "SKIP: ..." and
    returns None (the caller exits 77)."""
    if not os.path.exists("/dev/nvidia0"):
        print("SKIP: no NVIDIA GPU here (/dev/nvidia0 missing)")
        return None
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: {what}: no torch for {sys.executable} ({e})")
        return None
    if not torch.cuda.is_available():
        print(f"SKIP: {what}: torch {torch.__version__} sees no CUDA device "
              f"(built for CUDA {torch.version.cuda})")
        return None
    return torch


def spawn(world: int, target, args: tuple, deadline_s: float, join_s: float = 5.0):
    """Run target(rank, *args, queue) in world spawned processes; each puts (rank, failures,
    lines) on the queue once.  Prints every rank's lines as they come; returns ({rank:
    failures}, [exit codes]), a rank that died or hung past deadline_s missing from the dict
    (and killed)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, *args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.monotonic() + deadline_s
    while len(results) < world and time.monotonic() < deadline:
        try:
            rank, fails, lines = queue.get(timeout=1)
            results[rank] = fails
            print("\n".join(lines), flush=True)
        except Exception:  # queue.Empty: a rank may have died
            if all(not p.is_alive() for p in procs) and queue.empty():
                break
    for p in procs:
        p.join(timeout=join_s)
        if p.is_alive():
            p.kill()
    return results, [p.exitcode for p in procs]


def all_passed(results: dict, codes: list, world: int) -> bool:
    return len(results) == world and not any(results.values()) and codes == [0] * world
