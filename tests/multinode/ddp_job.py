"""A small DDP training job on the "rcoll" torch.distributed backend, one process per rank, as
a cluster's launcher starts it (mpirun, srun): the rank and size come from the launcher's
variables (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS), torch's env://
store from MASTER_ADDR and MASTER_PORT.  Without MASTER_ADDR: under srun the address of the
step's first node (rank 0's, from `scontrol show node`), else host 0 of tools/netns-cluster
(the first of NETNS_ADDRS: rank 0's under the harness's mpirun).

Each of 4 steps checks DDP's gradients against the mean of every rank's own gradients, summed
over a gloo group of the same ranks (a wrong element is one off by more than rounding), and at
the end the parameters must be the same on every rank.  Prints "ddp_job: rank R of N: OK (4
steps, 0 wrong)" and exits 0, or names what was wrong and exits 1; 77 when torch is absent.

Its harnesses give it 60 s.  A job that cannot finish says where it stands before that: the
process groups' timeout is DDP_JOB_TIMEOUT_S (default 40 s: a rank stuck in a collective
fails naming its peer), and at DDP_JOB_STACKS_S (default 50 s) every rank still running prints
its Python threads' stacks to stderr (a hang outside the collectives: the store, an import)."""
import datetime
import faulthandler
import os
import re
import subprocess
import sys

faulthandler.dump_traceback_later(float(os.environ.get("DDP_JOB_STACKS_S", "50")), exit=False)


def env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            return int(v)
    raise SystemExit(f"ddp_job: none of {', '.join(names)} is set")


def slurm_first_node_addr():
    """Under srun, rank 0 runs on the step's first node, which need not be host 0: Slurm picks
    the nodes of `-N 2` among the idle ones (those of a job that just ended may still be
    completing).  Its address is the node's NodeAddr (its name need not resolve)."""
    nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if not nodes:
        return None

    def run(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=True,
                                  timeout=20).stdout
        except (OSError, subprocess.SubprocessError) as e:
            why = (getattr(e, "stderr", None) or str(e)).strip().splitlines()
            raise SystemExit(f"ddp_job: cannot find rank 0's node under Slurm: "
                             f"`{' '.join(cmd)}` failed: {why[-1] if why else e}; "
                             f"set MASTER_ADDR") from None
    first = run("scontrol", "show", "hostnames", nodes).split()[0]
    m = re.search(r"\bNodeAddr=(\S+)", run("scontrol", "show", "node", "-o", first))
    return m.group(1) if m else first


if not os.environ.get("MASTER_ADDR"):
    addr = slurm_first_node_addr()
    if not addr and os.environ.get("NETNS_ADDRS"):
        addr = os.environ["NETNS_ADDRS"].split()[0]
    if addr:
        os.environ["MASTER_ADDR"] = addr
rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
size = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")
try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError as e:
    print(f"SKIP ddp_job: torch cannot be imported by {sys.executable}: {e}")
    sys.exit(77)
import rcoll.torch  # noqa: F401  (registers the "rcoll" backend)

timeout = datetime.timedelta(seconds=float(os.environ.get("DDP_JOB_TIMEOUT_S", "40")))
dist.init_process_group("rcoll", init_method="env://", rank=rank, world_size=size,
                        timeout=timeout)
print(f"ddp_job: rank {rank} of {size}: process group up", file=sys.stderr, flush=True)
gloo = dist.new_group(backend="gloo", timeout=timeout)
torch.manual_seed(0)  # the same initial parameters everywhere (DDP also broadcasts rank 0's)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
ref.load_state_dict(model.state_dict())
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
wrong = 0
steps = 4
for step in range(steps):
    g = torch.Generator().manual_seed(1000 * step + rank)  # each rank its own batch
    x = torch.randn(8, 16, generator=g)
    y = torch.randn(8, 4, generator=g)
    opt.zero_grad()
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    opt_ref.zero_grad()
    torch.nn.functional.mse_loss(ref(x), y).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        mean = q.grad.clone()
        dist.all_reduce(mean, group=gloo)
        mean /= size
        wrong += int((~torch.isclose(p.grad, mean, rtol=1e-4, atol=1e-6)).sum())
        q.grad.copy_(mean)  # the reference follows the mean, as DDP does
    opt.step()
    opt_ref.step()
# The same parameters on every rank: rank 0's, broadcast over gloo, compared here.
for p in model.parameters():
    p0 = p.detach().clone()
    dist.broadcast(p0, 0, group=gloo)
    wrong += int((p0 != p.detach()).sum())
dist.barrier()
dist.destroy_process_group()
if wrong:
    print(f"ddp_job: rank {rank} of {size}: FAILED ({steps} steps, {wrong} wrong)")
    sys.exit(1)
faulthandler.cancel_dump_traceback_later()
print(f"ddp_job: rank {rank} of {size}: OK ({steps} steps, 0 wrong)")
