"""test_ras.py - who is stuck, from outside (RCOLL_RAS=1 and tools/rcoll-top; suite fail).

A 3-rank all_reduce_perf job runs forever under rcoll-run with RCOLL_RAS=1.  rcoll-top must
see the three ranks running; after SIGSTOP of rank 2 it must say that rank 2 does not answer
and that ranks 0 and 1 have waited on it (its pid) without progress for more than the stall
time, exit 1, and print it in the table and in Prometheus form; after SIGCONT nothing is
stuck.  The status socket answers another user nothing (the library checks the caller's
uid).

  python3 test_ras.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import signal
import subprocess
import sys
import time

BUILD, SRC = sys.argv[1], sys.argv[2]
TOP = os.path.join(SRC, "tools", "rcoll-top")
passed = failed = skipped = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


def top(*args):
    p = subprocess.run([sys.executable, TOP, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def job_rows(pids):
    rc, out, _ = top("--json", "--stall", "1")
    if rc not in (0, 1):
        return rc, None
    d = json.loads(out)
    d["rows"] = [r for r in d["rows"] if r["pid"] in pids]
    d["stuck"] = [s for s in d["stuck"] if s["pid"] in pids]
    d["silent"] = [p for p in d["silent"] if p in pids]
    return rc, d


def main():
    env = dict(os.environ, RCOLL_RAS="1", RCOLL_TIMEOUT="120", RCOLL_WATCHDOG_S="0")
    job = subprocess.Popen([os.path.join(BUILD, "tools", "rcoll-run"), "-n", "3",
                            os.path.join(BUILD, "bench", "all_reduce_perf"), "-b", "64K",
                            "-e", "64K", "-n", "1000", "-N", "0", "-c", "0"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           start_new_session=True)
    try:
        run(job)
    finally:
        os.killpg(job.pid, signal.SIGCONT)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


def run(job):
    # the job's ranks: children of rcoll-run answering on their sockets
    pids, by_rank = set(), {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        kids = subprocess.run(["pgrep", "-s", str(job.pid), "-f", "all_reduce_perf"],
                              capture_output=True, text=True).stdout.split()
        pids = {int(x) for x in kids}
        rc, d = job_rows(pids)
        if d and len([r for r in d["rows"] if r["state"] != "not answering"]) == 3:
            by_rank = {r["rank"]: r for r in d["rows"]}
            break
        time.sleep(0.2)
    check(sorted(by_rank) == [0, 1, 2], f"rcoll-top sees ranks 0-2 of the job: {sorted(by_rank)}")
    if sorted(by_rank) != [0, 1, 2]:
        return
    check(all(r["state"] in ("running", "idle") and r["nranks"] == 3 for r in by_rank.values()),
          "every rank running or idle in a 3-rank communicator: "
          + ", ".join(f"{k}:{r['state']}" for k, r in sorted(by_rank.items())))
    p2 = by_rank[2]["pid"]
    os.kill(p2, signal.SIGSTOP)
    time.sleep(2.5)
    t0 = time.monotonic()
    rc, d = job_rows(pids)
    took = time.monotonic() - t0
    check(rc == 1, f"exit 1 with a rank stuck (got {rc}, {took:.2f} s)")
    check(d is not None and d["silent"] == [p2], f"rank 2 (pid {p2}) does not answer: "
          f"{d and d['silent']}")
    rows = {r["rank"]: r for r in d["rows"]} if d else {}
    for k in (0, 1):
        r = rows.get(k, {})
        check(r.get("state") == "stalled" and r.get("waiting_on", "").startswith("rank 2 ")
              and f"pid {p2}" in r.get("waiting_on", "") and (r.get("idle_s") or 0) >= 2.0,
              f"rank {k} stalled, waiting on rank 2 (pid {p2}) for 2 s or more: "
              f"{r.get('state')}, {r.get('waiting_on')}, idle {r.get('idle_s')}")
    check(rows.get(2, {}).get("state") == "not answering",
          f"the silent process placed as rank 2 (from the others' waits): {rows.get(2)}")
    stuck = d["stuck"] if d else []
    check(len(stuck) == 1 and stuck[0]["rank"] == 2 and sorted(stuck[0]["waited_on_by"]) == [0, 1],
          f"the one stuck rank named is rank 2, waited on by 0 and 1: {stuck}")
    rc, out, _ = top("--stall", "1")
    check(rc == 1 and f"stuck: rank 2 (pid {p2})" in out and "is not answering" in out
          and "ranks 0, 1 wait on it" in out, "the table says so:\n" + out)
    rc, out, _ = top("--prometheus", "--pid", str(by_rank[0]["pid"]), "--pid", str(p2))
    check(f'rcoll_rank_answering{{comm="{by_rank[0]["comm"]}",rank="2",pid="{p2}"}} 0' in out
          and f'rank="0",pid="{by_rank[0]["pid"]}"}} 1' in out,
          "Prometheus: rank 2 not answering, rank 0 answering:\n" + out)
    os.kill(p2, signal.SIGCONT)
    ok = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not ok:
        time.sleep(0.5)
        rc, d = job_rows(pids)
        ok = rc == 0 and d is not None and not d["stuck"] and not d["silent"]
    check(ok, f"after SIGCONT nothing is stuck (exit {rc})")
    # another user gets nothing (root's test: run the client as nobody)
    if os.getuid() == 0:
        name = f"rcoll-ras.{os.getuid()}.{by_rank[0]['pid']}"
        code = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(2)\n"
                f"s.connect('\\0{name}')\n"
                "try:\n    s.sendall(b'status\\n')\n    print(len(s.recv(65536)))\n"
                "except (ConnectionResetError, BrokenPipeError):\n    print(0)\n")
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            sys.executable, "-c", code], capture_output=True, text=True)
        check(p.returncode == 0 and p.stdout.strip() == "0",
              f"another user's request is closed unanswered (read {p.stdout.strip()!r} bytes; "
              f"{p.stderr.strip()[-200:]})")
    else:
        global skipped
        skipped += 1
        print("SKIP another user's request: needs root to act as another user")


if __name__ == "__main__":
    sys.exit(main())
