"""A training job that loses a rank and goes on (docs/elastic.md), with torch's backend "rcoll".

The driver (this file, no argument) hosts the job's TCPStore and starts 4 worker processes
(this file, --worker R).  They train a small model with DistributedDataParallel and SGD, rank
r's batch at step s being data(r, s).  At step KILL_AT rank 3 passes a barrier and SIGKILLs
itself; the survivors' next collective fails naming it, they call rcoll.torch.shrink(), make
DDP again (its construction broadcasts rank 0's parameters) and redo that step on 3 ranks.
Meanwhile the driver starts a new process (--join): it waits in the store for the grow id;
at step GROW_AT the members call rcoll.torch.grow(4), it joins as rank 3, gets the parameters
from rank 0 through DDP and the step number by a broadcast, and all 4 train to STEPS.

Then rank 0 revokes the group (rcoll.torch.revoke()): every rank's next barrier fails naming
it, and a shrink gives a group of the same 4 ranks that sums right.

Checked: the victim died by SIGKILL; every survivor saw an error naming rank 3 and went
through shrink and grow; the 4 final parameter sets are bitwise equal, and equal within
float rounding to a reference trained here in one process on the same batches (4 ranks'
mean gradient, then 3 ranks', then 4).  Exit 0 on success, 1 on a failure, 77 without torch.
"""
import json
import os
import signal
import subprocess
import sys
import time

from jobs import collect, free_port

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("SKIP: no torch for", sys.executable)
    sys.exit(77)

STEPS, KILL_AT, GROW_AT, NRANKS, VICTIM = 12, 4, 8, 4, 3
DEADLINE_S = 120


def data(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 8, generator=g)
    return x, x.sum(1, keepdim=True) * 0.5 + 0.1 * rank


def model_new(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def flat(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def reference():
    m = model_new(0)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for s in range(STEPS):
        ranks = range(3) if KILL_AT <= s < GROW_AT else range(NRANKS)
        opt.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(m(x), y)
                   for x, y in (data(r, s) for r in ranks)) / len(ranks)
        loss.backward()
        opt.step()
    return flat(m)


def store_client(port):
    return dist.TCPStore("127.0.0.1", port, NRANKS + 2, False,
                         timeout=__import__("datetime").timedelta(seconds=DEADLINE_S))


def train(store, rank, size, model, step, log, joined=False):
    from torch.nn.parallel import DistributedDataParallel as DDP
    import rcoll.torch as rt
    ddp = DDP(model)  # a joiner: with the members' DDP after their grow (rank 0's parameters)
    if joined:
        t = torch.tensor([0])
        dist.broadcast(t, 0)  # the step the members are at
        step = int(t.item())
        log.append(f"resumes at step {step}")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    while step < STEPS:
        try:
            if step == GROW_AT and size == 3:
                rank, size = rt.grow(store, NRANKS)
                log.append(f"grew to {size} as rank {rank}")
                ddp = DDP(model)  # broadcasts rank 0's parameters
                t = torch.tensor([step])
                dist.broadcast(t, 0)
            if step == KILL_AT:
                dist.barrier()  # past it, every rank has finished step KILL_AT - 1
                if rank == VICTIM and size == NRANKS:
                    os.kill(os.getpid(), signal.SIGKILL)
            x, y = data(rank, step)
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
            step += 1
        except RuntimeError as e:
            log.append(f"step {step}: {str(e).splitlines()[0][:300]}")
            rank, size = rt.shrink()
            log.append(f"shrank to {size} as rank {rank}")
            ddp = DDP(model)  # every survivor takes rank 0's parameters
            t = torch.tensor([step])
            dist.broadcast(t, 0)  # and its step
            step = int(t.item())
    # Revoke: rank 0 stops the group; the others' barrier fails naming it; all shrink to
    # the same 4 ranks and sum right.
    if rank == 0:
        rt.revoke()
    try:
        dist.barrier()
        log.append("barrier after the revoke: no error")
    except RuntimeError as e:
        log.append(f"revoked: {'revoked by rank 0' in str(e)}")
    r2, s2 = rt.shrink()
    t = torch.ones(3)
    dist.all_reduce(t)
    log.append(f"after revoke+shrink: rank {r2} of {s2}, sum {t.tolist()}")
    return rank


def worker(rank, port):
    import rcoll.torch  # noqa: F401  (registers the backend)
    store = dist.PrefixStore("job/", store_client(port))
    dist.init_process_group("rcoll", store=store, rank=rank, world_size=NRANKS)
    model, log = model_new(0), []
    final = train(store, rank, NRANKS, model, 0, log)
    print(json.dumps({"rank": final, "log": log, "params": [float(v) for v in flat(model)]}),
          flush=True)
    dist.destroy_process_group()


def joiner(port):
    import rcoll.torch as rt
    store = dist.PrefixStore("job/", store_client(port))
    rank, size = rt.join(store, NRANKS, VICTIM)
    model = model_new(7)  # not the job's: it must come from rank 0
    log = [f"joined as rank {rank} of {size}"]
    final = train(store, rank, size, model, 0, log, joined=True)
    print(json.dumps({"rank": final, "log": log, "params": [float(v) for v in flat(model)]}),
          flush=True)
    dist.destroy_process_group()


def main():
    import datetime
    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, NRANKS + 2, True,
                           timeout=datetime.timedelta(seconds=DEADLINE_S), wait_for_workers=False)
    me = os.path.abspath(__file__)
    env = dict(os.environ)
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, me, "--worker", str(r), str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(NRANKS)]
    while procs[VICTIM].poll() is None and time.time() - t0 < DEADLINE_S:
        time.sleep(0.05)
    t_dead = time.time() - t0
    procs.append(subprocess.Popen([sys.executable, me, "--join", str(port)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = collect(procs, t0, DEADLINE_S)
    wall = time.time() - t0
    del server
    bad = []
    if outs[VICTIM][0] != -signal.SIGKILL:
        bad.append(f"the victim exited {outs[VICTIM][0]}, not by SIGKILL")
    results = {}
    for i, (rc, o, e) in enumerate(outs):
        if i == VICTIM:
            continue
        who = "joiner" if i == NRANKS else f"rank {i}"
        line = [ln for ln in o.splitlines() if ln.startswith("{")]
        if rc != 0 or not line:
            bad.append(f"{who} exited {rc}:\n{o[-2000:]}\n{e[-3000:]}")
            continue
        r = json.loads(line[-1])
        results[who] = r
        print(f"{who}: final rank {r['rank']}; " + "; ".join(r["log"]))
        if who != "joiner":
            if not any("rank 3" in m for m in r["log"] if m.startswith("step")):
                bad.append(f"{who}: no error naming rank 3 ({r['log']})")
            if not any(m.startswith("shrank to 3") for m in r["log"]) or \
                    not any(m.startswith("grew to 4") for m in r["log"]):
                bad.append(f"{who}: did not shrink to 3 and grow to 4 ({r['log']})")
    if len(results) == NRANKS:
        ps = [torch.tensor(r["params"], dtype=torch.float64) for r in results.values()]
        if not all(torch.equal(ps[0], p) for p in ps[1:]):
            bad.append("the ranks' final parameters differ")
        ref = reference().to(torch.float64)
        err = (ps[0] - ref).abs().max().item()
        print(f"final parameters: {len(ps)} ranks bitwise equal: "
              f"{all(torch.equal(ps[0], p) for p in ps[1:])}; max |rank 0 - reference| = "
              f"{err:.2e} (reference moved {float((ref - flat(model_new(0)).double()).abs().max()):.3f})")
        for who, r in results.items():
            if "revoked: True" not in r["log"] or \
                    f"after revoke+shrink: rank {r['rank']} of 4, sum [4.0, 4.0, 4.0]" not in r["log"]:
                bad.append(f"{who}: revoke then shrink not as expected ({r['log'][-2:]})")
        if not err < 1e-5:
            bad.append(f"rank 0's parameters are {err:.2e} from the reference")
        if torch.equal(ps[0], flat(model_new(0)).double()):
            bad.append("the parameters never moved")
    print(f"torch {torch.__version__}: rank {VICTIM} died {t_dead:.1f} s in; whole job "
          f"{wall:.1f} s")
    for b in bad:
        print("FAIL:", b)
    print("ok" if not bad else "FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) > 1:  # a worker that hangs shows where before the driver kills it
        import faulthandler
        faulthandler.dump_traceback_later(DEADLINE_S - 15, exit=False)
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--join":
        joiner(int(sys.argv[2]))
    else:
        sys.exit(main())
