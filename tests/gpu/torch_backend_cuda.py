"""torch_backend_cuda.py - the torch.distributed backend "rcoll" on CUDA tensors (suite gpu;
tests/gpu/run.sh, step gpu_torch_backend).

The compiled backend is built once here (its CUDA half: torch's CUDA flags, RCOLL_TORCH_CUDA),
then 2 and 4 spawned ranks share the GPU, join a group with init_process_group("rcoll") and
check, against values computed independently on each rank:
  - all_reduce (float32 sum of 1 Mi + 3 elements, bfloat16 max, average, premul_sum), in place,
    on a non-contiguous tensor, on a non-default stream;
  - stream semantics: Work.wait() returns without the host waiting and the current stream reads
    the result (a kernel enqueued after wait() sees it); get_future().wait() and .then();
  - all_gather_into_tensor, reduce_scatter_tensor, broadcast, reduce, all_gather (list),
    all_to_all_single with splits, send/recv, barrier;
  - 20 DDP steps of an MLP on the GPU with rcoll against the same steps on CPU copies with a
    gloo group, parameters compared;
  - a group made with the string "cpu:gloo,cuda:rcoll".
Exit 77 with the reason where there is no GPU, no torch or a torch without CUDA; 1 if the
backend cannot be built with its CUDA half or a check fails.
"""
import datetime
import os
import socket
import sys
import time

from gpu_spawn import all_passed, spawn, torch_cuda_or_skip

N = (1 << 20) + 3
TIMEOUT_S = float(os.environ.get("RCOLL_TIMEOUT", "60"))
STEPS = 20


def rank_main(rank: int, world: int, port: int, queue) -> None:
    import torch
    import torch.distributed as dist
    import rcoll.torch  # noqa: F401  (registers "rcoll")

    lines = []
    fails = 0

    def check(ok: bool, what: str) -> None:
        nonlocal fails
        lines.append(("ok   " if ok else "FAIL ") + f"rank {rank}/{world}: {what}")
        fails += 0 if ok else 1

    try:
        torch.cuda.set_device(0)
        dev = torch.device("cuda", 0)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("rcoll", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=TIMEOUT_S))
        idx = torch.arange(N, device=dev, dtype=torch.float32) % 97
        tri = world * (world + 1) / 2  # the sum of rank + 1 over the ranks

        # all_reduce: sum (exact: small integers), bfloat16 max, average, premul_sum
        x = idx * (rank + 1)
        t0 = time.perf_counter()
        dist.all_reduce(x)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        check(torch.equal(x, idx * tri), f"all_reduce float32 sum, {N} elements ({dt * 1e3:.2f} ms)")
        b = (idx + rank).to(torch.bfloat16)
        dist.all_reduce(b, op=dist.ReduceOp.MAX)
        check(torch.equal(b, (idx + world - 1).to(torch.bfloat16)), "all_reduce bfloat16 max")
        a = torch.full((1000,), float(rank), device=dev)
        dist.all_reduce(a, op=dist.ReduceOp.AVG)
        check(bool(torch.all(a == (world - 1) / 2)), "all_reduce average")
        p = torch.ones(64, device=dev)
        dist.all_reduce(p, op=dist._make_nccl_premul_sum(0.5))
        check(bool(torch.all(p == world * 0.5)), "all_reduce premul_sum (factor 0.5)")

        # a non-contiguous tensor: its stand-in is copied back in stream order
        m = (torch.arange(64 * 32, device=dev, dtype=torch.float32).reshape(64, 32) + rank).t()
        want = (torch.arange(64 * 32, device=dev, dtype=torch.float32).reshape(64, 32) * world
                + world * (world - 1) / 2).t()
        dist.all_reduce(m)
        check(torch.equal(m, want), "all_reduce of a transposed (non-contiguous) tensor")

        # stream semantics: wait() does not block the host; a kernel after it sees the result
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = idx * (rank + 1)
            big = torch.randn(4096, 4096, device=dev)
            for _ in range(4):  # keep the stream busy before the collective
                big = big @ big / 64
            w = dist.all_reduce(y, async_op=True)
            t0 = time.perf_counter()
            w.wait()
            host_wait = time.perf_counter() - t0
            z = y - idx * tri
            bad = int(torch.count_nonzero(z))  # synchronizes the stream
        check(bad == 0, f"async all_reduce on a side stream, read after wait() on it "
                        f"({bad} wrong; wait() returned in {host_wait * 1e6:.0f} us)")
        fut = dist.all_reduce(idx * (rank + 1), async_op=True).get_future()
        got = fut.wait()[0]
        check(torch.equal(got, idx * tri), "get_future().wait() value")
        fut2 = dist.all_reduce(torch.ones(16, device=dev), async_op=True).get_future().then(
            lambda f: f.value()[0] * 2)
        check(bool(torch.all(fut2.wait() == 2 * world)), "get_future().then(...)")

        # the other collectives
        inp = torch.full((1000,), float(rank + 1), device=dev)
        out = torch.empty(1000 * world, device=dev)
        dist.all_gather_into_tensor(out, inp)
        want = torch.cat([torch.full((1000,), float(r + 1), device=dev) for r in range(world)])
        check(torch.equal(out, want), "all_gather_into_tensor")
        rs_in = torch.arange(1000 * world, device=dev, dtype=torch.float32) + rank
        rs_out = torch.empty(1000, device=dev)
        dist.reduce_scatter_tensor(rs_out, rs_in)
        want = (torch.arange(1000 * world, device=dev, dtype=torch.float32)[
            rank * 1000:(rank + 1) * 1000] * world + world * (world - 1) / 2)
        check(torch.equal(rs_out, want), "reduce_scatter_tensor")
        bc = torch.full((5000,), float(rank + 7), device=dev)
        dist.broadcast(bc, src=world - 1)
        check(bool(torch.all(bc == world + 6)), "broadcast from the last rank")
        rd = torch.full((100,), float(rank + 1), device=dev)
        dist.reduce(rd, dst=0)
        if rank == 0:
            check(bool(torch.all(rd == tri)), "reduce to rank 0")
        lst = [torch.empty(300, device=dev) for _ in range(world)]
        dist.all_gather(lst, torch.full((300,), float(rank), device=dev))
        check(all(bool(torch.all(lst[r] == r)) for r in range(world)), "all_gather (list)")
        splits = [r + 1 for r in range(world)]  # rank r receives r+1 rows from every rank
        a2a_in = torch.cat([torch.full((q + 1, 3), float(rank * 10 + q), device=dev)
                            for q in range(world)])
        a2a_out = torch.empty(((rank + 1) * world, 3), device=dev)
        dist.all_to_all_single(a2a_out, a2a_in, output_split_sizes=[rank + 1] * world,
                               input_split_sizes=splits)
        want = torch.cat([torch.full((rank + 1, 3), float(q * 10 + rank), device=dev)
                          for q in range(world)])
        check(torch.equal(a2a_out, want), "all_to_all_single with uneven splits")
        if world >= 2 and rank < 2:
            t = torch.full((777,), 5.0, device=dev) if rank == 0 else torch.zeros(777, device=dev)
            if rank == 0:
                dist.send(t, dst=1)
            else:
                dist.recv(t, src=0)
                check(bool(torch.all(t == 5.0)), "send/recv of a CUDA tensor")
        dist.barrier()

        # DDP on the GPU with rcoll against the same steps on CPU copies with gloo
        gloo = dist.new_group(backend="gloo")
        torch.manual_seed(1234)
        net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                  torch.nn.Linear(512, 256))
        ref = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                  torch.nn.Linear(512, 256))
        ref.load_state_dict(net.state_dict())
        gpu = torch.nn.parallel.DistributedDataParallel(net.to(dev), device_ids=[0])
        cpu = torch.nn.parallel.DistributedDataParallel(ref, process_group=gloo)
        og = torch.optim.SGD(gpu.parameters(), lr=0.01)
        oc = torch.optim.SGD(cpu.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(99 + rank)
        for _ in range(STEPS):
            data = torch.randn(64, 256, generator=g)
            for model, opt, d in ((gpu, og, data.to(dev)), (cpu, oc, data)):
                opt.zero_grad()
                model(d).square().mean().backward()
                opt.step()
        diff = max(float((pg.detach().cpu() - pc.detach()).abs().max())
                   for pg, pc in zip(gpu.parameters(), cpu.parameters()))
        check(diff < 1e-4, f"DDP {STEPS} steps on the GPU (rcoll) vs CPU copies (gloo): "
                           f"largest parameter difference {diff:.2e}")
        # the parameters are the same on every rank
        flat = torch.cat([q.detach().reshape(-1) for q in gpu.parameters()])
        lo, hi = flat.clone(), flat.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        check(torch.equal(lo, hi), "DDP parameters identical on every rank")

        # a group from the backend string that maps devices
        mixed = dist.new_group(backend="cpu:gloo,cuda:rcoll")
        c1 = torch.ones(10, device=dev)
        c2 = torch.ones(10)
        dist.all_reduce(c1, group=mixed)
        dist.all_reduce(c2, group=mixed)
        check(bool(torch.all(c1 == world)) and bool(torch.all(c2 == world)),
              "group \"cpu:gloo,cuda:rcoll\": a CUDA and a CPU tensor")
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - reported as this rank's failure
        import traceback
        check(False, f"{type(e).__name__}: {e}")
        lines.append(traceback.format_exc())
    queue.put((rank, fails, lines))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(world: int) -> bool:
    results, codes = spawn(world, rank_main, (world, free_port()), TIMEOUT_S * 3 + 90,
                           join_s=10)
    ok = all_passed(results, codes, world)
    print(f"{world} ranks: exit codes {codes}: " + ("passed" if ok else "FAILED"), flush=True)
    return ok


def main() -> int:
    torch = torch_cuda_or_skip("torch backend CUDA")
    if torch is None:
        return 77
    import rcoll.torch as rt
    cuda, why = rt.cuda_build()
    if not cuda:
        print(f"FAIL the backend cannot get its CUDA half here: {why}")
        return 1
    t0 = time.perf_counter()
    mod = rt.compiled()  # built once here, loaded by the ranks from the cache
    print(f"backend module {mod.__file__}: CUDA {mod.CUDA} ({time.perf_counter() - t0:.1f} s "
          f"to build or load)", flush=True)
    if not mod.CUDA:
        print("FAIL the loaded backend module has no CUDA half (RCOLL_TORCH_C set?)")
        return 1
    ok = all([run(2), run(4)])
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}): the rcoll backend on CUDA "
          "tensors: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
