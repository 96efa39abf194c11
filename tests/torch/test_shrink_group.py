"""A group made with new_group loses a member and goes on (rcoll.torch.shrink_group,
docs/elastic.md).

The driver (this file, no argument) hosts the job's TCPStore and starts 4 worker processes
(this file, --worker R) with the backend "rcoll".  All make the group G of ranks 1, 2, 3
(new_group) and its members all-reduce on it; rank 3 then SIGKILLs itself.  Ranks 1 and 2:
their next all-reduce on G fails naming the dead member; they call shrink_group(G) and get
a group of the two of them, ranks 0 and 1 in it, on which all-reduces sum right (computed
here).  Rank 0, not in G, all-reduces nothing on it and waits for the others in the store.

Checked: the victim died by SIGKILL; ranks 1 and 2 saw the error naming it (its pid), their
new group's ranks and size, and sums over it; the default group was left alone.  On torch
older than 2.1 (no new_group(use_local_synchronization)) shrink_group must refuse with a
sentence saying so: that is checked, and the shrink is reported as a skipped check.
Exit 0 on success, 1 on a failure, 77 without torch.
"""
import datetime
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

NRANKS, VICTIM, GROUP = 4, 3, [1, 2, 3]
DEADLINE_S = 90


def store_client(port):
    return dist.TCPStore("127.0.0.1", port, NRANKS + 1, False,
                         timeout=datetime.timedelta(seconds=DEADLINE_S))


def worker(rank, port):
    import rcoll.torch as rt
    store = dist.PrefixStore("job/", store_client(port))
    dist.init_process_group("rcoll", store=store, rank=rank, world_size=NRANKS)
    g = dist.new_group(GROUP, backend="rcoll")
    out = {"rank": rank, "pid": os.getpid(), "log": []}
    t0 = time.time()

    def stamp(what):
        out["log"].append(f"{what} at {time.time() - t0:.1f} s")

    if rank in GROUP:
        t = torch.ones(4)
        dist.all_reduce(t, group=g)
        out["log"].append(f"first sum {t.tolist()}")
        if rank == VICTIM:
            dist.barrier(group=g)
            os.kill(os.getpid(), signal.SIGKILL)
        dist.barrier(group=g)
        try:
            t = torch.ones(4)
            dist.all_reduce(t, group=g)
            out["log"].append(f"second sum {t.tolist()} (no error)")
        except RuntimeError as e:
            out["error"] = str(e)
        stamp("failed")
        try:
            g2 = rt.shrink_group(g)
        except RuntimeError as e:
            out["shrink_error"] = str(e)
            g2 = None
        stamp("shrunk")
        if g2 is not None:
            out["new_rank"], out["new_size"] = dist.get_rank(g2), dist.get_world_size(g2)
            t = torch.full((5,), float(rank))
            dist.all_reduce(t, group=g2)
            u = torch.ones(1000)
            dist.all_reduce(u, group=g2)
            out["sums"] = [t.tolist(), float(u.sum())]
            dist.destroy_process_group(g2)
        stamp("done")
        store.add("done", 1)
    else:
        while store.add("done", 0) < len(GROUP) - 1:
            time.sleep(0.05)
    print(json.dumps(out), flush=True)
    os._exit(0)  # the default group has a dead member: nothing more to do with it


def main():
    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, NRANKS + 1, True,
                           timeout=datetime.timedelta(seconds=DEADLINE_S),
                           wait_for_workers=False)
    me = os.path.abspath(__file__)
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, me, "--worker", str(r), str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(NRANKS)]
    outs = collect(procs, t0, DEADLINE_S)
    del server
    bad, res = [], {}
    if outs[VICTIM][0] != -signal.SIGKILL:
        bad.append(f"the victim exited {outs[VICTIM][0]}, not by SIGKILL")
    for r, (rc, o, e) in enumerate(outs):
        if r == VICTIM:
            continue
        line = [ln for ln in o.splitlines() if ln.startswith("{")]
        if rc != 0 or not line:
            bad.append(f"rank {r} exited {rc}:\n{o[-2000:]}\n{e[-3000:]}")
            continue
        res[r] = json.loads(line[-1])
        print(f"rank {r}: {json.dumps(res[r])}")
    victim_pid = procs[VICTIM].pid
    old = "use_local_synchronization" not in __import__("inspect").signature(
        dist.new_group).parameters
    for r in (1, 2):
        x = res.get(r)
        if x is None:
            continue
        if f"pid {victim_pid}" not in x.get("error", ""):
            bad.append(f"rank {r}: the all-reduce after the death did not fail naming pid "
                       f"{victim_pid}: {x.get('error', x['log'])}")
        if old:
            if "needs torch 2.1 or later" not in x.get("shrink_error", ""):
                bad.append(f"rank {r}: on torch {torch.__version__} shrink_group did not "
                           f"refuse saying so: {x.get('shrink_error')}")
            continue
        if "shrink_error" in x:
            bad.append(f"rank {r}: shrink_group failed: {x['shrink_error']}")
            continue
        want = [[3.0] * 5, 2000.0]  # ranks 1 + 2; 1000 ones from each of 2
        if (x.get("new_rank"), x.get("new_size")) != (r - 1, 2) or x.get("sums") != want:
            bad.append(f"rank {r}: new group rank {x.get('new_rank')} of {x.get('new_size')}, "
                       f"sums {x.get('sums')} (want rank {r - 1} of 2, {want})")
    print(f"torch {torch.__version__}: {time.time() - t0:.1f} s")
    for b in bad:
        print("FAIL:", b)
    # checks: the victim's death, the error on ranks 1 and 2, then their shrink (torch 2.1+)
    # or, on older torch, shrink_group's refusal; the shrink itself is a skipped check there
    skipped = 1 if old else 0
    if old:
        print(f"SKIP torch {torch.__version__} has no new_group(use_local_synchronization): "
              f"shrink_group's refusal checked, the shrink itself not run")
    print(f"{5 - len(bad) if len(bad) < 5 else 0} passed, {len(bad)} failed, "
          f"{skipped} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        import faulthandler
        faulthandler.dump_traceback_later(DEADLINE_S - 15, exit=False)
        worker(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(main())
