#!/usr/bin/env python3
"""torch.distributed on rcoll against gloo, same run, same processes (2 ranks by default).

    PYTHONPATH=python RCOLL_LIBRARY=build/src/librcoll.so /usr/bin/python3 \\
        bench/torch_bench.py [--ranks 2] [--steps 30] [--reps 5]

Each rank makes the default group with backend rcoll and a gloo group over the same ranks;
every measurement alternates the two backends `--reps` times and reports the median:
  - latency of a 1 KiB float32 all_reduce (mean of 200 calls per repetition);
  - all_reduce bus bandwidth at 1, 16 and 64 MiB (nccl-tests' 2(n-1)/n factor);
  - a DDP training step of a ~1M-parameter MLP (forward, backward, SGD step).
Rank 0 prints one line per item with rcoll / gloo ratios (< 1 is rcoll faster for times);
bandwidth rows also time the same communicator through the rcoll package without torch
("rcoll direct"), the torch path's own cost."""
import argparse
import copy
import datetime
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def timed(fn, iters):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def bench(rank, n, port, args, q):
    import rcoll.torch  # noqa: F401
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("rcoll", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    groups = {"rcoll": None, "gloo": gloo}
    res = {}

    def alternate(key, make):
        for name, g in groups.items():
            make(g)()  # warm up
        for _ in range(args.reps):
            for name, g in groups.items():
                res.setdefault((key, name), []).append(make(g)())

    small = torch.ones(256)
    alternate("allreduce 1 KiB latency (us)",
              lambda g: lambda: timed(lambda: dist.all_reduce(small, group=g), 200) * 1e6)
    pg = dist.distributed_c10d._get_default_group()
    if hasattr(pg, "_get_backend"):  # torch 2.x: the rcoll Backend inside torch's group
        pg = pg._get_backend(torch.device("cpu"))
    # the group's communicator: its handle, borrowed (the group owns it)
    import ctypes
    from rcoll._core import Communicator
    comm = Communicator(ctypes.c_void_p(pg.comm))
    for mib in (1, 16, 64):
        t = torch.ones(mib << 18)
        iters = max(3, 64 // mib)

        def bw(g, t=t, iters=iters, mib=mib):
            if g == "direct":  # the same communicator through the rcoll package, no torch
                arr = t.numpy()
                return lambda: (2 * (n - 1) / n) * (mib << 20) / timed(
                    lambda: comm.allreduce(None, arr), iters) / 1e9
            return lambda: (2 * (n - 1) / n) * (mib << 20) / timed(
                lambda: dist.all_reduce(t, group=g), iters) / 1e9
        groups["direct"] = "direct"
        alternate(f"allreduce {mib} MiB bus bandwidth (GB/s)", bw)
        del groups["direct"]

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    nparams = sum(p.numel() for p in model.parameters())
    ddps = {name: torch.nn.parallel.DistributedDataParallel(copy.deepcopy(model),
                                                           process_group=g)
            for name, g in groups.items()}
    x = torch.randn(64, 512)

    def step(g):
        name = "rcoll" if g is None else "gloo"
        ddp = ddps[name]
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)

        def run():
            def one():
                opt.zero_grad()
                ddp(x).sum().backward()
                opt.step()
            return timed(one, args.steps) * 1e3
        return run
    alternate(f"DDP step, {nparams / 1e6:.2f}M-param MLP (ms)", step)
    if rank == 0:
        q.put({k: statistics.median(v) for k, v in res.items()})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    mp.spawn(bench, args=(args.ranks, port, args, q), nprocs=args.ranks)
    med = q.get()
    print(f"# torch {torch.__version__}, {args.ranks} ranks, CPU tensors, medians of "
          f"{args.reps} alternating repetitions")
    for k in dict.fromkeys(k for k, _ in med):
        r, g = med[(k, "rcoll")], med[(k, "gloo")]
        line = f"{k:45s} rcoll {r:8.2f}  gloo {g:8.2f}  rcoll/gloo {r / g:5.2f}"
        if (k, "direct") in med:
            d = med[(k, "direct")]
            line += f"  rcoll direct {d:6.2f}  torch/direct {r / d:5.2f}"
        print(line)


if __name__ == "__main__":
    main()
