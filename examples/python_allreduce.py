#!/usr/bin/env python3
"""All-reduce from Python with rcoll, on N local processes and no launcher.

    PYTHONPATH=python RCOLL_LIBRARY=build/src/librcoll.so python3 examples/python_allreduce.py 4

The parent makes the communicator id; each child joins with it, sums a vector with the others
and checks the result.  Under a launcher (build/tools/rcoll-run -n 4 python3 script.py) use
rcoll.init_env() instead."""
import multiprocessing as mp
import sys

import numpy as np

import rcoll


def rank_main(n, rank, uid):
    with rcoll.Communicator.init_rank(n, rcoll.UniqueId.from_bytes(uid), rank) as comm:
        x = np.arange(8, dtype=np.float32) + comm.rank
        comm.allreduce(None, x)
        want = np.arange(8, dtype=np.float32) * n + n * (n - 1) / 2
        print(f"rank {comm.rank}/{comm.size}: {x[:4]} ... {'ok' if np.array_equal(x, want) else 'WRONG'}")
        sys.exit(0 if np.array_equal(x, want) else 1)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    uid = rcoll.get_unique_id().to_bytes()
    ctx = mp.get_context("spawn")  # fresh processes: this one runs the bootstrap root thread
    ps = [ctx.Process(target=rank_main, args=(n, r, uid)) for r in range(n)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    sys.exit(max(p.exitcode for p in ps))
