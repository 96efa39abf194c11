"""Unit tests of the Python package (python/rcoll): every binding on 1-4 real processes, each
result compared with numpy computing the same thing locally; errors raised with rcoll's
sentence; bad buffers refused before any call.  Run by meson (suite python) with
/usr/bin/python3, RCOLL_LIBRARY and PYTHONPATH set; skips (77) without numpy."""
import multiprocessing as mp
import os
import sys
import traceback
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    print("SKIP numpy is not installed for", sys.executable)
    sys.exit(77)

import rcoll

TIMEOUT = 60


def _rank_main(fn, n, rank, uid_bytes, q):
    os.environ.setdefault("RCOLL_TIMEOUT", "20")
    try:
        comm = rcoll.Communicator.init_rank(n, rcoll.UniqueId.from_bytes(uid_bytes), rank)
        try:
            out = fn(comm, rank, n)
        finally:
            comm.destroy() if comm._h is not None else None
        q.put((rank, "ok", out))
    except BaseException:  # report everything to the parent
        q.put((rank, "error", traceback.format_exc()))


def run(n, fn):
    """Run fn(comm, rank, n) on n processes; return the list of results by rank."""
    ctx = mp.get_context("spawn")  # no fork of a process whose bootstrap root thread runs
    uid = rcoll.get_unique_id()
    q = ctx.Queue()
    ps = [ctx.Process(target=_rank_main, args=(fn, n, r, uid.to_bytes(), q)) for r in range(n)]
    for p in ps:
        p.start()
    res = {}
    try:
        for _ in range(n):
            rank, kind, out = q.get(timeout=TIMEOUT)
            if kind != "ok":
                raise AssertionError(f"rank {rank} failed:\n{out}")
            res[rank] = out
    finally:
        for p in ps:
            p.join(5)
            if p.is_alive():
                p.kill()
    return [res[r] for r in range(n)]


def data(rank, count, dtype, salt=0):
    return ((np.arange(count) * 7 + rank * 3 + salt) % 11).astype(dtype)


DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]


def shrink_healthy(comm, rank, n):
    new = comm.shrink()
    try:
        assert (new.rank, new.size) == (rank, n), (new.rank, new.size)
        x = np.full(5, rank + 1, dtype=np.int32)
        new.allreduce(None, x)
        assert (x == n * (n + 1) // 2).all(), x
    finally:
        new.destroy()
    return True


def _joiner(uid_bytes, n, rank, q):
    """A new process: joins the members' grown communicator as rank of n."""
    try:
        c = rcoll.Communicator.join(n, rcoll.UniqueId.from_bytes(uid_bytes), rank)
        x = np.full(3, rank + 1, dtype=np.int64)
        c.allreduce(None, x)
        q.put((c.rank, c.size, x.tolist()))
        c.destroy()
    except Exception as e:  # reported to the member that started it
        q.put(repr(e))


def grow_one(comm, rank, n):
    """Members grow to n + 1 with a new process that rank 0 starts; the old one still works."""
    proc = q = None
    if rank == 0:
        uid = comm.grow_id()
        assert uid.to_bytes() == comm.grow_id().to_bytes()  # asked again: the same id
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=_joiner, args=(uid.to_bytes(), n + 1, n, q))
        proc.start()
    big = comm.grow(n + 1)
    try:
        assert (big.rank, big.size) == (rank, n + 1), (big.rank, big.size)
        x = np.full(3, rank + 1, dtype=np.int64)
        big.allreduce(None, x)
        want = (n + 1) * (n + 2) // 2
        assert (x == want).all(), x
        if rank == 0:
            got = q.get(timeout=TIMEOUT)
            proc.join(TIMEOUT)
            assert got == (n, n + 1, [want] * 3), got
        y = np.full(2, 1, dtype=np.int32)
        comm.allreduce(None, y)
        assert (y == n).all(), y
    finally:
        big.destroy()
    try:
        comm.grow(n)
        raise AssertionError("grow to the same size accepted")
    except rcoll.RcollError as e:
        assert "is not above" in str(e), str(e)
    return True


def suspend_resume(comm, rank, n):
    comm.suspend()
    try:
        comm.allreduce(None, np.ones(2, np.int32))
        raise AssertionError("a call on a suspended communicator accepted")
    except rcoll.RcollError as e:
        assert "suspended" in str(e), str(e)
    comm.resume()
    x = np.full(4, rank + 1, dtype=np.int32)
    comm.allreduce(None, x)
    assert (x == n * (n + 1) // 2).all(), x
    return True


def allreduce_all(comm, rank, n):
    for dt in DTYPES:
        for count in (0, 1, 1001, 70000):
            x = data(rank, count, dt)
            want = sum(data(r, count, dt).astype(np.float64) for r in range(n))
            y = np.empty_like(x)
            comm.allreduce(x, y)
            assert np.allclose(y.astype(np.float64), want.astype(dt).astype(np.float64)) \
                if count else True, (dt, count)
            comm.allreduce(None, x, rcoll.Op.MAX)
            if count:
                wmax = np.max([data(r, count, dt) for r in range(n)], axis=0)
                assert np.array_equal(x, wmax), (dt, count)
    # bitwise ops on integers, logical ones on bool
    x = np.array([rank + 1, 1 << rank, 0xFF], np.int16)
    comm.allreduce(None, x, rcoll.Op.BOR)
    assert x[1] == (1 << n) - 1 and x[2] == 0xFF
    b = np.array([rank == 0, True, False], np.bool_)
    comm.allreduce(None, b, rcoll.Op.BAND)
    assert list(b) == [n == 1, True, False], b
    try:
        comm.allreduce(None, np.zeros(2, np.float32), rcoll.Op.BXOR)
        raise AssertionError("bxor on float32 accepted")
    except rcoll.RcollError as e:
        assert "bitwise" in str(e), str(e)
    return True


def collectives(comm, rank, n):
    f = np.float32
    # bcast from the last rank
    b = data(rank, 513, f) if rank == n - 1 else np.zeros(513, f)
    comm.bcast(b, root=n - 1)
    assert np.array_equal(b, data(n - 1, 513, f))
    # reduce to rank 0 (others pass None)
    x = data(rank, 300, np.int64)
    y = np.zeros_like(x) if rank == 0 else None
    comm.reduce(x, y, rcoll.Op.SUM, root=0)
    if rank == 0:
        assert np.array_equal(y, sum(data(r, 300, np.int64) for r in range(n)))
    # allgather, out of place and in place
    g = np.zeros(n * 5, np.int32)
    comm.allgather(data(rank, 5, np.int32), g)
    assert np.array_equal(g, np.concatenate([data(r, 5, np.int32) for r in range(n)]))
    g2 = np.zeros(n * 5, np.int32)
    g2[rank * 5:(rank + 1) * 5] = data(rank, 5, np.int32)
    comm.allgather(None, g2)
    assert np.array_equal(g, g2)
    # reduce_scatter
    s = data(rank, n * 4, np.float64)
    r = np.zeros(4, np.float64)
    comm.reduce_scatter(s, r)
    tot = sum(data(k, n * 4, np.float64) for k in range(n))
    assert np.array_equal(r, tot[rank * 4:(rank + 1) * 4])
    # alltoall
    a = np.array([rank * 100 + j for j in range(n) for _ in range(3)], np.int64)
    out = np.zeros_like(a)
    comm.alltoall(a, out)
    assert np.array_equal(out, np.array([i * 100 + rank for i in range(n) for _ in range(3)]))
    comm.barrier()
    # nonblocking: two all-reduces in flight, waited in reverse order
    p = np.full(10, rank, np.float32)
    q2 = np.full(10, 2 * rank, np.float32)
    r1 = comm.allreduce(None, p, async_op=True)
    r2 = comm.allreduce(None, q2, async_op=True)
    r2.wait()
    while not r1.test():
        pass
    assert np.all(p == sum(range(n))) and np.all(q2 == 2 * sum(range(n)))
    # bytes (read-only) as a send buffer, bytearray as a receive buffer
    ring = (rank + 1) % n, (rank - 1) % n
    got = bytearray(6)
    with rcoll.group():
        comm.send(b"rank%02d" % rank, ring[0])
        comm.recv(got, ring[1])
    assert bytes(got) == b"rank%02d" % ring[1], got
    # bfloat16: raw 16-bit words with dtype=
    bf = np.array([0x3F80, 0x4000], np.uint16)  # 1.0, 2.0
    comm.allreduce(None, bf, dtype=rcoll.Datatype.BFLOAT16)
    want = np.array([1.0 * n, 2.0 * n], np.float32).view(np.uint32) >> 16
    assert np.array_equal(bf, want.astype(np.uint16)), bf
    # rooted and uneven collectives (counts include a zero)
    root = n - 1
    mine = data(rank, 4, np.int32)
    gat = np.zeros(4 * n, np.int32) if rank == root else None
    comm.gather(mine, gat, root=root)
    if rank == root:
        assert np.array_equal(gat, np.concatenate([data(r, 4, np.int32) for r in range(n)]))
    full = np.arange(3 * n, dtype=np.float64) if rank == 0 else None
    part = np.zeros(3, np.float64)
    comm.scatter(full, part, root=0)
    assert np.array_equal(part, np.arange(3 * n, dtype=np.float64)[3 * rank:3 * rank + 3])
    counts = [(r * 2) % 5 for r in range(n)]  # rank 0 sends nothing
    gv = np.zeros(sum(counts), np.int64)
    comm.allgatherv(data(rank, counts[rank], np.int64), gv, counts)
    assert np.array_equal(gv, np.concatenate([data(r, counts[r], np.int64) for r in range(n)]))
    # alltoallv: rank i sends i + j + 1 elements (value 100 i + j) to rank j
    sc = [rank + j + 1 for j in range(n)]
    rc = [i + rank + 1 for i in range(n)]
    sbuf = np.concatenate([np.full(sc[j], 100 * rank + j, np.int32) for j in range(n)])
    rbuf = np.zeros(sum(rc), np.int32)
    comm.alltoallv(sbuf, sc, rbuf, rc)
    want = np.concatenate([np.full(rc[i], 100 * i + rank, np.int32) for i in range(n)])
    assert np.array_equal(rbuf, want)
    rs_counts = [r + 1 for r in range(n)]
    src = data(rank, sum(rs_counts), np.float32)
    out = np.zeros(rs_counts[rank], np.float32)
    comm.reduce_scatterv(src, out, rs_counts)
    tot = sum(data(r, sum(rs_counts), np.float32) for r in range(n))
    off = sum(rs_counts[:rank])
    assert np.array_equal(out, tot[off:off + rs_counts[rank]])
    # split into even and odd ranks, dup
    sub = comm.split(rank % 2, rank)
    with sub:
        v = np.array([rank], np.int32)
        sub.allreduce(None, v)
        assert v[0] == sum(k for k in range(n) if k % 2 == rank % 2)
        assert sub.size == len([k for k in range(n) if k % 2 == rank % 2])
    none = comm.split(rcoll.UNDEFINED if rank == 0 else 1, 0)
    assert (none is None) == (rank == 0)
    if none is not None:
        none.destroy()
    with comm.dup() as d:
        assert d.rank == rank and d.size == n
    return True


def mismatch(comm, rank, n):
    x = np.zeros(10 if rank == 0 else 12, np.float32)
    try:
        comm.allreduce(None, x)
    except rcoll.RcollError as e:
        assert e.status_name == "RCOLL_ERR_INVALID_USAGE", e.status_name
        assert "allreduce(count=" in str(e) and "rank " in str(e), str(e)
        comm.abort()
        return str(e)
    raise AssertionError("a mismatched all-reduce returned")


def _destroy_rank(rank, q, out):
    if rank == 0:  # rank 0 hosts the bootstrap root, as a torch group's rank 0 does
        uid = rcoll.get_unique_id().to_bytes()
        q.put(uid)
    else:
        uid = q.get(timeout=TIMEOUT)
    c = rcoll.Communicator.init_rank(2, rcoll.UniqueId.from_bytes(uid), rank)
    x = np.ones(4, np.float32)
    c.allreduce(None, x)
    if rank == 1:
        os._exit(0)  # leaves without destroying its communicator
    import time
    time.sleep(0.5)
    t0 = time.monotonic()
    c.destroy()
    out.put(time.monotonic() - t0)


def _pt_rank(rank, q, out):
    """A progress thread moves a posted all-reduce while Python sleeps; another Python
    thread may wait on it meanwhile."""
    import threading
    import time
    if rank == 0:
        uid = rcoll.get_unique_id().to_bytes()
        q.put(uid)
    else:
        uid = q.get(timeout=TIMEOUT)
    c = rcoll.Communicator.init_rank(2, rcoll.UniqueId.from_bytes(uid), rank,
                                     progress_thread=True)
    x = data(rank, 1 << 20, np.float32)
    want = data(0, 1 << 20, np.float32) + data(1, 1 << 20, np.float32)
    req = c.allreduce(None, x, async_op=True)
    time.sleep(1.0)
    first = req.test()
    if not first:
        req.wait()
    y = data(rank, 1000, np.int64)
    req = c.allreduce(None, y, async_op=True)
    t = threading.Thread(target=req.wait)
    t.start()
    z = np.full(3, rank, np.int32)
    c.bcast(z, root=1)  # beside the waiting thread
    t.join()
    ok = (first and np.array_equal(x, want) and
          np.array_equal(y, data(0, 1000, np.int64) + data(1, 1000, np.int64)) and
          list(z) == [1, 1, 1])
    c.destroy()
    out.put((rank, bool(ok), first))


def _sigint_rank(rank, q, out):
    """Rank 0 waits in a barrier for rank 1, which comes 20 s late; SIGINT reaches rank 0
    after 0.5 s: KeyboardInterrupt within a slice, the communicator aborted; rank 1's barrier
    then fails naming rank 0 instead of waiting."""
    import signal
    import threading
    import time
    if rank == 0:
        uid = rcoll.get_unique_id().to_bytes()
        q.put(uid)
    else:
        uid = q.get(timeout=TIMEOUT)
    c = rcoll.Communicator.init_rank(2, rcoll.UniqueId.from_bytes(uid), rank, timeout_s=60)
    c.barrier()
    if rank == 0:
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            c.barrier()
            out.put((0, "no interrupt", 0.0))
        except KeyboardInterrupt:
            took = time.monotonic() - t0
            try:
                c.barrier()
                after = "a call after the interrupt ran"
            except ValueError as e:
                after = str(e)
            out.put((0, after, took))
    else:
        time.sleep(3)
        t0 = time.monotonic()
        try:
            c.barrier()
            out.put((1, "no error", 0.0))
        except rcoll.RcollError as e:
            out.put((1, str(e), time.monotonic() - t0))
        c.abort()


class PackageTest(unittest.TestCase):
    def test_progress_thread(self):
        ctx = mp.get_context("spawn")
        q, out = ctx.Queue(), ctx.Queue()
        ps = [ctx.Process(target=_pt_rank, args=(r, q, out)) for r in range(2)]
        for p in ps:
            p.start()
        res = sorted(out.get(timeout=TIMEOUT) for _ in range(2))
        for p in ps:
            p.join(10)
        self.assertEqual(res, [(0, True, True), (1, True, True)])

    def test_destroy_after_peer_left(self):
        """The rank hosting the root does not wait RCOLL_TIMEOUT in destroy for a peer that
        exited without destroying its communicator."""
        ctx = mp.get_context("spawn")
        q, out = ctx.Queue(), ctx.Queue()
        env = os.environ.get("RCOLL_TIMEOUT")
        os.environ["RCOLL_TIMEOUT"] = "30"
        try:
            ps = [ctx.Process(target=_destroy_rank, args=(r, q, out)) for r in range(2)]
            for p in ps:
                p.start()
            took = out.get(timeout=TIMEOUT)
            for p in ps:
                p.join(10)
        finally:
            if env is None:
                del os.environ["RCOLL_TIMEOUT"]
            else:
                os.environ["RCOLL_TIMEOUT"] = env
        self.assertLess(took, 5.0, f"destroy took {took:.1f} s with RCOLL_TIMEOUT=30")

    def test_ctrl_c(self):
        ctx = mp.get_context("spawn")
        q, out = ctx.Queue(), ctx.Queue()
        ps = [ctx.Process(target=_sigint_rank, args=(r, q, out)) for r in range(2)]
        for p in ps:
            p.start()
        res = dict((r, (text, took)) for r, text, took in (out.get(timeout=TIMEOUT)
                                                            for _ in range(2)))
        for p in ps:
            p.join(10)
        text0, took0 = res[0]
        self.assertLess(took0, 1.5, f"KeyboardInterrupt {took0:.2f} s after the wait began "
                        "(the signal came at 0.5 s)")
        self.assertIn("aborted when a wait on it was interrupted", text0)
        text1, took1 = res[1]
        self.assertIn("rank 0", text1)
        self.assertLess(took1, 10, text1)

    def test_int_ranges(self):
        """Python ints beyond a C int are refused, naming the argument, never cut to 32 bits
        (root=2**32+1 would have broadcast from rank 1)."""
        uid = rcoll.get_unique_id()
        with rcoll.Communicator.init_rank(1, uid, 0) as c:
            x = np.zeros(4, np.float32)
            for kw, call in (("root", lambda: c.bcast(x, root=2**32 + 1)),
                             ("root", lambda: c.bcast(x, root=2**40)),
                             ("op", lambda: c.allreduce(None, x, op=2**32 + 3)),
                             ("root", lambda: c.reduce(None, x, root=-2**33)),
                             ("peer", lambda: c.send(x, 2**32)),
                             ("color", lambda: c.split(2**32, 0)),
                             ("key", lambda: c.split(0, 2**31)),
                             ("dtype", lambda: c.allreduce(None, x, dtype=2**32 + 9))):
                with self.assertRaisesRegex(ValueError, f"{kw}=.* out of range"):
                    call()
        with self.assertRaisesRegex(ValueError, "rank=.* out of range"):
            rcoll.Communicator.init_rank(1, rcoll.get_unique_id(), 2**32)
        with self.assertRaisesRegex(ValueError, "wait='nap'"):
            rcoll.Communicator.init_rank(1, rcoll.get_unique_id(), 0, wait="nap")
        with rcoll.Communicator.init_rank(1, rcoll.get_unique_id(), 0, wait="sleep") as c:
            y = np.ones(3, np.int32)
            c.allreduce(None, y)
            self.assertEqual(list(y), [1, 1, 1])

    def test_local(self):
        self.assertGreaterEqual(rcoll.version(), (0, 1, 0))
        self.assertEqual(rcoll.datatype_size(rcoll.Datatype.BFLOAT16), 2)
        self.assertTrue(os.path.exists(rcoll.library_path) or "librcoll" in rcoll.library_path)
        uid = rcoll.get_unique_id()
        self.assertEqual(len(uid.to_bytes()), 128)
        with self.assertRaises(ValueError):
            rcoll.UniqueId(b"short")
        with rcoll.Communicator.init_rank(1, uid, 0) as c:
            self.assertEqual((c.rank, c.size), (0, 1))
            with self.assertRaisesRegex(TypeError, "buffer protocol"):
                c.allreduce(None, [1, 2, 3])
            with self.assertRaisesRegex(ValueError, "read-only"):
                c.allreduce(None, b"abcd")
            with self.assertRaisesRegex(ValueError, "C-contiguous"):
                c.allreduce(None, np.zeros((4, 4), np.float32)[:, 1])
            with self.assertRaisesRegex(TypeError, "no rcoll datatype"):
                c.allreduce(None, np.zeros(4, np.complex64))
            with self.assertRaisesRegex(TypeError, "sendbuf is INT32, recvbuf FLOAT32"):
                c.allreduce(np.zeros(4, np.int32), np.zeros(4, np.float32))
            with self.assertRaises(rcoll.RcollError) as cm:
                c.bcast(np.zeros(4, np.float32), root=3)
            self.assertEqual(cm.exception.status_name, "RCOLL_ERR_INVALID_ARG")
            self.assertIn("root", str(cm.exception))
        with self.assertRaisesRegex(ValueError, "destroyed"):
            _ = c.rank
        with self.assertRaises(rcoll.RcollError) as cm:
            rcoll.Communicator.init_rank(2, uid, 5)
        self.assertIn("rank=5", str(cm.exception))
        # the communicator's own timeout: rank 1 never comes, rank 0 gives up after 1 s
        import time
        t0 = time.monotonic()
        with self.assertRaises(rcoll.RcollError) as cm:
            rcoll.Communicator.init_rank(2, rcoll.get_unique_id(), 0, timeout_s=1.0,
                                         name="alone")
        self.assertEqual(cm.exception.status, rcoll.Status.ERR_TIMEOUT)
        self.assertLess(time.monotonic() - t0, 15)

    def test_allreduce_every_type(self):
        for n in (2, 3):
            self.assertEqual(run(n, allreduce_all), [True] * n)

    def test_collectives(self):
        for n in (1, 2, 4):
            self.assertEqual(run(n, collectives), [True] * n)

    def test_shrink_healthy(self):
        self.assertEqual(run(3, shrink_healthy), [True] * 3)

    def test_suspend_resume(self):
        self.assertEqual(run(3, suspend_resume), [True] * 3)

    def test_grow(self):
        self.assertEqual(run(2, grow_one), [True] * 2)

    def test_mismatch_names_both_sides(self):
        texts = run(2, mismatch)
        self.assertIn("rank 1 called allreduce(count=12, float32, sum)", texts[0])

    def test_example(self):
        import subprocess
        ex = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                          "python_allreduce.py")
        out = subprocess.run([sys.executable, ex, "3"], capture_output=True, text=True,
                             timeout=TIMEOUT)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(out.stdout.count("... ok"), 3, out.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
