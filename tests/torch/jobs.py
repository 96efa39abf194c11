"""What the torch tests' drivers share: a free port for the job's store, and collecting the
worker processes' output within the job's deadline (a worker still running then is killed, so
a hang fails the test instead of stopping it)."""
import socket
import subprocess
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def collect(procs, t0, deadline_s):
    """(returncode, stdout, stderr) of each process, in order, waiting until t0 + deadline_s
    at most (at least 1 s each)."""
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(1, deadline_s - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        outs.append((p.returncode, o, e))
    return outs
