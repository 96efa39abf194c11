"""torch.distributed backend "rcoll": ``import rcoll.torch`` registers it, then
``dist.init_process_group("rcoll", ...)`` runs torch's collectives on rcoll.

The backend is a Python ``ProcessGroup`` (torch's pybind trampoline, present since 1.13):
each call checks its tensors, posts the matching nonblocking rcoll operation on the group's
communicator, and returns a ``Work`` whose ``wait()`` completes it.  Communicators are made
through the store torch gives the creator (rank 0 of the group publishes an rcoll unique id),
so every init method (env://, tcp://, file://, a store) and ``new_group`` work.  What rcoll
cannot do raises ``RuntimeError`` naming the call; a failure inside rcoll raises
``RuntimeError`` with rcoll's sentence (which names the failing rank).
"""
from __future__ import annotations

import collections
import ctypes
import datetime
import os
import queue
import threading
import time
from typing import Any, Callable, List, Optional, Sequence

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Work as _Work

from . import _core, _lib
from ._core import Communicator, Datatype, Op, RcollError, UniqueId, get_unique_id
from ._lib import lib

BACKEND = "rcoll"

_DTYPES = {
    torch.int8: Datatype.INT8, torch.uint8: Datatype.UINT8, torch.int32: Datatype.INT32,
    torch.int64: Datatype.INT64, torch.float16: Datatype.FLOAT16,
    torch.bfloat16: Datatype.BFLOAT16, torch.float32: Datatype.FLOAT32,
    torch.float64: Datatype.FLOAT64,
}
for _name, _tdt in (("INT16", torch.int16), ("BOOL", torch.bool)):
    if hasattr(Datatype, _name):  # libraries with these types
        _DTYPES[_tdt] = getattr(Datatype, _name)

_OPS = {
    dist.ReduceOp.SUM: Op.SUM, dist.ReduceOp.PRODUCT: Op.PROD, dist.ReduceOp.MIN: Op.MIN,
    dist.ReduceOp.MAX: Op.MAX, dist.ReduceOp.AVG: Op.AVG,
}
for _name, _top in (("BAND", dist.ReduceOp.BAND), ("BOR", dist.ReduceOp.BOR),
                    ("BXOR", dist.ReduceOp.BXOR)):
    if hasattr(Op, _name):
        _OPS[_top] = getattr(Op, _name)


def _fail(call: str, why: str) -> RuntimeError:
    return RuntimeError(f"rcoll backend: {call}: {why}")


class _Tensor:
    """A CPU tensor as rcoll sees it: a contiguous stand-in (the tensor itself, or a copy that
    is written back after the operation) with its address, count and datatype."""

    __slots__ = ("orig", "t", "addr", "count", "dt")

    def __init__(self, call: str, t: torch.Tensor, write_back: bool = True):
        if not isinstance(t, torch.Tensor):
            raise _fail(call, f"expected a tensor, got {type(t).__name__}")
        if t.device.type != "cpu":
            raise _fail(call, f"a {t.device.type} tensor: this backend takes CPU tensors only "
                        "(rcoll's C API takes CUDA device pointers, but the backend does not "
                        "pass CUDA tensors to it yet); use CPU tensors, or another backend "
                        "(nccl) for CUDA ones")
        if t.is_complex():
            t = torch.view_as_real(t)
        dt = _DTYPES.get(t.dtype)
        if dt is None:
            raise _fail(call, f"dtype {t.dtype} has no rcoll datatype")
        self.orig = t if write_back else None
        self.t = t if t.is_contiguous() else t.contiguous()
        if self.t is t:
            self.orig = None
        self.addr = self.t.data_ptr() if self.t.numel() else None
        self.count = self.t.numel()
        self.dt = int(dt)

    def done(self) -> None:
        if self.orig is not None:
            self.orig.copy_(self.t)


def _sizes(values: Sequence[int]) -> Any:
    return (ctypes.c_size_t * len(values))(*[int(v) for v in values])


_offsets = _core.packed_offsets


def _op(call: str, reduce_op: Any) -> int:
    op = _OPS.get(reduce_op)
    if op is None and reduce_op == getattr(dist.ReduceOp, "PREMUL_SUM", None):
        raise _fail(call, "PREMUL_SUM is not supported: torch does not give a Python process "
                    "group the op's factor (scale the tensor, then use SUM)")
    if op is None:
        raise _fail(call, f"reduce op {reduce_op} is not supported by rcoll")
    return int(op)


class _Job:
    """One operation: ``post(h)`` posts it on communicator handle h (nonblocking rcoll calls)
    and returns the request handles; ``finish()`` runs once they completed (copies back,
    unflattening); the future then gets ``result``.  ``p2p``: a send or receive, whose
    completion may need the peer's later operations (so it is never waited on blindly)."""

    __slots__ = ("call", "post", "finish", "result", "fut", "keep", "p2p", "reqs", "state",
                 "err")

    def __init__(self, call: str, post: Callable[[Any], List[Any]], result: Any,
                 keep: Sequence[Any] = (), finish: Optional[Callable[[], None]] = None,
                 p2p: bool = False):
        self.call, self.post, self.result = call, post, result
        self.finish, self.keep, self.p2p = finish, list(keep), p2p
        self.fut: torch.futures.Future = torch.futures.Future()
        self.reqs: List[Any] = []
        self.state = 0  # _Direct: 0 posted, 1 someone completes it, 2 completed
        self.err: Optional[BaseException] = None


def _settle(job: _Job, err: Optional[BaseException]) -> None:
    """Give the job's future its result (after finish()) or its error."""
    if err is None:
        try:
            if job.finish is not None:
                job.finish()
        except BaseException as e:  # a copy back failed
            err = e
    if err is not None:
        job.fut.set_exception(RuntimeError(f"rcoll backend: {job.call} failed: {err}"))
    else:
        job.fut.set_result(job.result)
    job.keep = []


class _Direct:
    """A group's engine when its communicator has a progress thread (the default).

    - The caller posts each operation at once (posts are serialized by a lock: calls that
      post must not overlap on one communicator); the progress thread moves it while the
      caller computes, so DDP's all-reduces run during the backward pass.
    - Whoever needs the result completes it: ``Work.wait()`` in the waiting thread (no
      hand-off), or, for a future (DDP's reducer takes futures), this engine's completer
      thread, in issue order.  rcoll allows rcoll_wait in one thread while another posts on
      such a communicator.  A job is claimed (state 1) by one completer at a time."""

    def __init__(self, comm: Communicator, name: str):
        self.comm = comm
        self.name = name
        self.cv = threading.Condition()
        self.futq: "collections.deque[_Job]" = collections.deque()
        self.open: set = set()  # posted, not completed (shutdown completes them)
        self.thread: Optional[threading.Thread] = None
        self.stopping = False

    def submit(self, job: _Job) -> None:
        with self.cv:
            if self.stopping:
                job.state = 2
                _settle(job, RuntimeError("the process group was destroyed"))
                return
            try:
                job.reqs = job.post(self.comm._handle())
            except BaseException as e:
                job.state = 2
                _settle(job, e)
                return
            self.open.add(job)

    def _claim(self, job: _Job) -> bool:
        """Under cv: wait while another thread completes job; True if this one should."""
        while job.state == 1:
            self.cv.wait()
        if job.state == 2:
            return False
        job.state = 1
        return True

    def _release(self, job: _Job, done: bool) -> None:
        with self.cv:
            job.state = 2 if done else 0
            if done:
                self.open.discard(job)
            self.cv.notify_all()

    def _collect(self, job: _Job, st: int) -> None:
        if st < 0 and job.err is None:
            job.err = RcollError(st, self.comm.last_error)

    def complete(self, job: _Job) -> None:
        with self.cv:
            if not self._claim(job):
                return
        try:
            for r in job.reqs:
                if r.value is not None:  # not completed by an earlier test
                    self._collect(job, lib.rcoll_wait(ctypes.byref(r)))
            _settle(job, job.err)
        finally:
            self._release(job, True)

    def poll(self, job: _Job) -> bool:
        with self.cv:
            if job.state != 0:
                return job.state == 2
            job.state = 1
        done = ctypes.c_int(0)
        left = False
        try:
            for r in job.reqs:
                if r.value is None:
                    continue
                st = lib.rcoll_test(ctypes.byref(r), ctypes.byref(done))
                if done.value:
                    self._collect(job, st)
                else:
                    left = True
                    break
            if not left:
                _settle(job, job.err)
        finally:
            self._release(job, not left)
        return not left

    def future(self, job: _Job) -> None:
        with self.cv:
            if job.state == 2:
                return
            self.futq.append(job)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self.thread.start()
            self.cv.notify_all()

    def _run(self) -> None:
        while True:
            with self.cv:
                while not self.futq and not self.stopping:
                    self.cv.wait()
                if not self.futq:
                    return
                job = self.futq.popleft()
            self.complete(job)

    def is_alive(self) -> bool:
        return not self.stopping

    def stop(self) -> None:
        """Complete whatever is still posted (rcoll requires it before destroy)."""
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
            t = self.thread
        if t is not None:
            t.join()
        for job in list(self.open):
            self.complete(job)


class _Worker(threading.Thread):
    """Runs a group's operations on its communicator, which one thread at a time may use.

    - A collective issued while nothing is pending or in flight runs at once in the calling
      thread (rcoll_wait: rcoll's own spin-then-yield wait; no thread hand-off).
    - Otherwise the job is queued for this thread, which posts every queued job in order
      (so an isend and the irecv after it are both in flight) and completes them in order:
      a collective at the head is waited for with rcoll_wait (it completes whatever follows
      it); a send or receive at the head is polled with rcoll_test, taking newly queued jobs
      between polls, since it may need an operation the peer has not issued yet.
    ctypes releases the GIL inside every rcoll call."""

    def __init__(self, comm: Communicator, name: str):
        super().__init__(name=name, daemon=True)
        self.comm = comm
        self.cv = threading.Condition()
        self.pending: "collections.deque[_Job]" = collections.deque()
        self.owner: Optional[str] = None  # who uses the communicator: "caller", "worker"
        self.stopping = False
        self.error: Optional[BaseException] = None

    # --- one job --------------------------------------------------------------------------
    def _fail(self, job: _Job, e: BaseException) -> None:
        if not job.fut.done():
            job.fut.set_exception(RuntimeError(f"rcoll backend: {job.call} failed: {e}"))

    def _post(self, job: _Job) -> Optional[List[Any]]:
        if self.error is not None:
            self._fail(job, self.error)
            return None
        try:
            return job.post(self.comm._handle())
        except BaseException as e:
            self.error = e
            self._fail(job, e)
            return None

    def _done(self, job: _Job) -> None:
        if self.error is not None:
            self._fail(job, self.error)
            return
        try:
            if job.finish is not None:
                job.finish()
            job.fut.set_result(job.result)
        except BaseException as e:
            self._fail(job, e)

    def _wait_all(self, reqs: List[Any]) -> None:
        for r in reqs:
            st = lib.rcoll_wait(ctypes.byref(r))
            if st < 0 and self.error is None:
                self.error = RcollError(st, self.comm.last_error)

    def _test_head(self, reqs: List[Any]) -> bool:
        """Poll the head job's requests; True once all completed."""
        done = ctypes.c_int(0)
        while reqs:
            st = lib.rcoll_test(ctypes.byref(reqs[0]), ctypes.byref(done))
            if st < 0:
                if self.error is None:
                    self.error = RcollError(st, self.comm.last_error)
                reqs.pop(0)
                continue
            if not done.value:
                return False
            reqs.pop(0)
        return True

    # --- the caller's side ----------------------------------------------------------------
    def submit(self, job: _Job) -> None:
        with self.cv:
            now = (not job.p2p and not self.pending and self.owner is None and
                   not self.stopping)
            if now:
                self.owner = "caller"
            else:
                self.pending.append(job)
                self.cv.notify()
        if not now:
            return
        try:
            reqs = self._post(job)
            if reqs is not None:
                self._wait_all(reqs)
                self._done(job)
        finally:
            with self.cv:
                self.owner = None
                if self.pending:  # jobs queued meanwhile: the worker takes them now
                    self.cv.notify()

    # --- this thread ----------------------------------------------------------------------
    def run(self) -> None:
        inflight: "collections.deque" = collections.deque()
        while True:
            with self.cv:
                while (not inflight and (not self.pending or self.owner == "caller") and
                       not self.stopping):
                    self.cv.wait()
                if self.stopping and not inflight:
                    for j in self.pending:
                        self._fail(j, RuntimeError("the process group was destroyed"))
                    self.pending.clear()
                    return
                jobs: List[_Job] = []
                if self.pending and self.owner != "caller":
                    jobs = list(self.pending)
                    self.pending.clear()
                    self.owner = "worker"
            for j in jobs:
                reqs = self._post(j)
                if reqs is None:
                    continue
                inflight.append((j, reqs))
            while inflight:
                job, reqs = inflight[0]
                if job.p2p:
                    if not self._test_head(reqs):
                        break  # back to take newly queued jobs, then poll again
                else:
                    self._wait_all(reqs)
                inflight.popleft()
                self._done(job)
            if not inflight:
                with self.cv:
                    if not self.pending:  # else it takes them at once, still the owner
                        self.owner = None
            elif not jobs:
                time.sleep(0)  # polling a send or receive: let the others run

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        self.join()

    # the worker completes every job itself
    def complete(self, job: _Job) -> None:
        pass

    def poll(self, job: _Job) -> bool:
        return job.fut.done()

    def future(self, job: _Job) -> None:
        pass


class _RcollWork(_Work):
    """What each call returns: completes when the worker has completed the operation.
    ``wait()`` raises RuntimeError with rcoll's sentence if it failed (torch's own future-
    wrapping Work would return True), ``get_future()`` gives the future DDP's reducer uses.
    torch calls these through a pybind trampoline that finds them only while this Python
    object lives, so the group keeps it until it completed and someone waited on it or took
    its future; C++ code that waits on a Work a second time after that is not supported."""

    def __init__(self, pg: "ProcessGroupRcoll", job: _Job):
        super().__init__()
        self._pg = pg
        self._job = job
        self._fut = job.fut
        self._call = job.call
        pg._live.add(self)

    def _release(self, *_: Any) -> None:
        self._pg._live.discard(self)

    def wait(self, timeout: Any = None) -> bool:
        try:
            self._pg._engine.complete(self._job)
            self._fut.wait()
        finally:
            self._release()
        return True

    def is_completed(self) -> bool:
        return self._fut.done() or self._pg._engine.poll(self._job)

    def is_success(self) -> bool:
        if not self._fut.done():
            return False
        try:
            self._fut.value()
            return True
        except RuntimeError:
            return False

    def result(self) -> Any:
        self._pg._engine.complete(self._job)
        return self._fut.wait()

    def get_future(self) -> torch.futures.Future:
        self._fut.add_done_callback(self._release)
        self._pg._engine.future(self._job)
        return self._fut


def _make_comm(store: Any, rank: int, size: int, timeout: Optional[datetime.timedelta],
               progress_thread: bool) -> Communicator:
    """The group's communicator: rank 0 publishes a unique id in torch's store, every rank
    joins with it (every init method torch has gives the creator a store)."""
    key = "rcoll/unique_id"
    if rank == 0:
        store.set(key, get_unique_id().to_bytes().hex())
    raw = store.get(key)
    uid = UniqueId.from_bytes(bytes.fromhex(raw.decode() if isinstance(raw, bytes) else raw))
    tmo = timeout.total_seconds() if timeout else None
    if tmo is not None:
        tmo = min(max(tmo, 0.0), 7 * 86400.0)
    return Communicator.init_rank(size, uid, rank, timeout_s=tmo, name="torch",
                                  progress_thread=progress_thread)


class ProcessGroupRcoll(dist.ProcessGroup):
    """A torch.distributed process group over one rcoll communicator (its own worker thread
    posts and completes the operations; see _Worker)."""

    def __init__(self, store: Any, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)
        # The communicator's progress thread moves async operations while torch computes;
        # RCOLL_PROGRESS_THREAD=0 takes the thread-less engine (_Worker) instead.
        pt = os.environ.get("RCOLL_PROGRESS_THREAD", "1").strip() != "0"
        self.comm = _make_comm(store, rank, size, timeout, pt)
        self._live: set = set()  # works torch may still call (see _RcollWork)
        self._engine: Any = (_Direct(self.comm, f"rcoll-pg-{rank}") if pt else
                             _Worker(self.comm, f"rcoll-pg-{rank}"))
        if not pt:
            self._engine.start()
        self._coalescing: Optional[List[Any]] = None

    def getBackendName(self) -> str:  # noqa: N802 (torch's name)
        return BACKEND

    def _post_one(self, fn: str, args: List[Any]) -> Callable[[Any], List[Any]]:
        """A job's post function: rcoll_i<fn>(*args, comm, &req)."""
        def post(h: Any) -> List[Any]:
            r = _lib.c_req()
            st = getattr(lib, "rcoll_i" + fn)(*args, h, ctypes.byref(r))
            if st < 0:
                raise RcollError(st, self.comm.last_error)
            return [r]
        return post

    def _submit(self, call: str, fn: str, arglists: List[List[Any]], result: Any,
                keep: Sequence[Any] = (), finish: Optional[Callable[[], None]] = None,
                p2p: bool = False):
        posts = [self._post_one(fn, a) for a in arglists]

        def post(h: Any) -> List[Any]:
            out: List[Any] = []
            for p in posts:
                out += p(h)
            return out
        job = _Job(call, post, result, keep, finish, p2p)
        work = _RcollWork(self, job)
        self._engine.submit(job)
        return work

    def shutdown(self) -> None:
        """Stop the worker and destroy the communicator (at destroy_process_group)."""
        if self._engine.is_alive():
            self._engine.stop()
        self.comm.destroy()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass

    # --- collectives ----------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        call = "allreduce"
        op = _op(call, opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        ts = [_Tensor(call, t) for t in tensors]
        return self._submit(call, "allreduce",
                            [[_core.IN_PLACE, t.addr, t.count, t.dt, op] for t in ts],
                            list(tensors), ts, lambda: [t.done() for t in ts] and None)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts=None):
        call = "broadcast"
        root = opts.rootRank if opts is not None else 0
        ts = [_Tensor(call, t) for t in tensors]
        return self._submit(call, "bcast", [[t.addr, t.count, t.dt, root] for t in ts],
                            list(tensors), ts, lambda: [t.done() for t in ts] and None)

    def reduce(self, tensors, opts=None):
        call = "reduce"
        op = _op(call, opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        root = opts.rootRank if opts is not None else 0
        ts = [_Tensor(call, t) for t in tensors]
        me = self.rank()
        return self._submit(call, "reduce",
                            [[_core.IN_PLACE if me == root else t.addr, t.addr, t.count, t.dt,
                              op, root] for t in ts],
                            list(tensors), ts, lambda: [t.done() for t in ts] and None)

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 (torch's name)
        call = "all_gather_into_tensor"
        o, i = _Tensor(call, output), _Tensor(call, input, write_back=False)
        if o.dt != i.dt or o.count != i.count * self.size():
            raise _fail(call, f"output has {o.count} elements, input {i.count} x {self.size()} "
                        "ranks expected")
        return self._submit(call, "allgather", [[i.addr, o.addr, i.count, i.dt]], [output],
                            (o, i), o.done)

    def allgather(self, output_tensors, input_tensors, opts=None):
        call = "all_gather"
        if len(input_tensors) != 1 or len(output_tensors) != 1:
            raise _fail(call, "one input tensor and one output list per call")
        outs, inp = output_tensors[0], input_tensors[0]
        n = self.size()
        if len(outs) != n:
            raise _fail(call, f"{len(outs)} output tensors for {n} ranks")
        i = _Tensor(call, inp, write_back=False)
        if any(o.dtype != inp.dtype for o in outs):
            raise _fail(call, "output tensors of another dtype than the input")
        counts = [o.numel() for o in outs]
        if counts[self.rank()] != i.count:
            raise _fail(call, f"this rank's output tensor has {counts[self.rank()]} elements, "
                        f"its input {i.count}")
        flat = torch.empty(sum(counts), dtype=i.t.dtype)
        f = _Tensor(call, flat)
        offs = _offsets(counts)

        def unflatten() -> None:
            for r, o in enumerate(outs):
                o.copy_(flat[offs[r]:offs[r] + counts[r]].view_as(o))
        if len(set(counts)) == 1:
            return self._submit(call, "allgather", [[i.addr, f.addr, i.count, i.dt]],
                                [list(outs)], (i, f), unflatten)
        c, d = _sizes(counts), _sizes(offs)  # uneven: rcoll_allgatherv
        return self._submit(call, "allgatherv", [[i.addr, i.count, f.addr, c, d, i.dt]],
                            [list(outs)], (i, f, c, d), unflatten)

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002
        call = "reduce_scatter_tensor"
        op = _op(call, opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        o, i = _Tensor(call, output), _Tensor(call, input, write_back=False)
        if o.dt != i.dt or i.count != o.count * self.size():
            raise _fail(call, f"input has {i.count} elements, output {o.count} x {self.size()} "
                        "ranks expected")
        return self._submit(call, "reduce_scatter", [[i.addr, o.addr, o.count, o.dt, op]],
                            [output], (o, i), o.done)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        call = "reduce_scatter"
        if len(output_tensors) != 1 or len(input_tensors) != 1:
            raise _fail(call, "one output tensor and one input list per call")
        out, ins = output_tensors[0], input_tensors[0]
        n = self.size()
        if len(ins) != n:
            raise _fail(call, f"{n} input tensors expected, got {len(ins)}")
        counts = [t.numel() for t in ins]
        if counts[self.rank()] != out.numel():
            raise _fail(call, f"input {self.rank()} has {counts[self.rank()]} elements, the "
                        f"output {out.numel()}")
        flat = torch.cat([t.reshape(-1) for t in ins])
        if len(set(counts)) == 1:
            return self._reduce_scatter_base(out, flat, opts)
        op = _op(call, opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        o, i = _Tensor(call, out), _Tensor(call, flat, write_back=False)
        c = _sizes(counts)  # uneven: rcoll_reduce_scatterv
        return self._submit(call, "reduce_scatterv", [[i.addr, o.addr, c, o.dt, op]], [out],
                            (o, i, c), o.done)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,  # noqa: A002
                      opts=None):
        call = "all_to_all_single"
        n = self.size()
        o, i = _Tensor(call, output), _Tensor(call, input, write_back=False)
        if not output_split_sizes and not input_split_sizes:
            if o.count != i.count or i.count % n:
                raise _fail(call, f"input and output must hold the same multiple of {n} "
                            "elements")
            return self._submit(call, "alltoall", [[i.addr, o.addr, i.count // n, i.dt]],
                                [output], (o, i), o.done)
        # splits are in rows of the first dimension: elements = rows x the other dimensions
        row_in = i.count // max(input.shape[0], 1) if input.dim() else 1
        row_out = o.count // max(output.shape[0], 1) if output.dim() else 1
        sc = [x * row_in for x in input_split_sizes] if input_split_sizes else \
            [i.count // n] * n
        rc = [x * row_out for x in output_split_sizes] if output_split_sizes else \
            [o.count // n] * n
        if len(sc) != n or len(rc) != n or sum(sc) != i.count or sum(rc) != o.count:
            raise _fail(call, f"splits {list(input_split_sizes)} / {list(output_split_sizes)} "
                        f"do not cover the tensors ({i.count} and {o.count} elements)")
        a, b, c, d = _sizes(sc), _sizes(_offsets(sc)), _sizes(rc), _sizes(_offsets(rc))
        return self._submit(call, "alltoallv", [[i.addr, a, b, o.addr, c, d, i.dt]], [output],
                            (o, i, a, b, c, d), o.done)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        call = "all_to_all"
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise _fail(call, f"{n} input and {n} output tensors expected")
        sc = [t.numel() for t in input_tensors]
        rc = [t.numel() for t in output_tensors]
        fi = _Tensor(call, torch.cat([t.reshape(-1) for t in input_tensors]), write_back=False)
        flat_out = torch.empty(sum(rc), dtype=fi.t.dtype)
        fo = _Tensor(call, flat_out)
        roff = _offsets(rc)

        def unflatten() -> None:
            for r, o in enumerate(output_tensors):
                o.copy_(flat_out[roff[r]:roff[r] + rc[r]].view_as(o))
        if len(set(sc + rc)) == 1:
            return self._submit(call, "alltoall", [[fi.addr, fo.addr, sc[0], fi.dt]],
                                list(output_tensors), (fi, fo), unflatten)
        a, b, c, d = _sizes(sc), _sizes(_offsets(sc)), _sizes(rc), _sizes(roff)
        return self._submit(call, "alltoallv", [[fi.addr, a, b, fo.addr, c, d, fi.dt]],
                            list(output_tensors), (fi, fo, a, b, c, d), unflatten)

    def barrier(self, opts=None):
        def post(h: Any) -> List[Any]:
            r = _lib.c_req()
            st = lib.rcoll_ibarrier(h, ctypes.byref(r))
            if st < 0:
                raise RcollError(st, self.comm.last_error)
            return [r]
        job = _Job("barrier", post, [])
        work = _RcollWork(self, job)
        self._engine.submit(job)
        return work

    # --- point to point -------------------------------------------------------------------
    def send(self, tensors, dstRank, tag=0):  # noqa: N803 (torch's names)
        call = "send"
        ts = [_Tensor(call, t, write_back=False) for t in tensors]
        return self._submit(call, "send", [[t.addr, t.count, t.dt, int(dstRank)] for t in ts],
                            list(tensors), ts, p2p=True)

    def recv(self, tensors, srcRank, tag=0):  # noqa: N803
        call = "recv"
        ts = [_Tensor(call, t) for t in tensors]
        return self._submit(call, "recv", [[t.addr, t.count, t.dt, int(srcRank)] for t in ts],
                            list(tensors), ts, lambda: [t.done() for t in ts] and None,
                            p2p=True)

    def recv_anysource(self, tensors, tag=0):
        raise _fail("recv from any source", "rcoll receives from a named rank only")

    def gather(self, output_tensors, input_tensors, opts=None):
        call = "gather"
        root = opts.rootRank if opts is not None else 0
        n = self.size()
        if len(input_tensors) != 1:
            raise _fail(call, "one input tensor per call")
        i = _Tensor(call, input_tensors[0], write_back=False)
        if self.rank() != root:
            return self._submit(call, "gather", [[i.addr, None, i.count, i.dt, root]], [], (i,))
        outs = output_tensors[0] if output_tensors else []
        if len(outs) != n or any(o.numel() != i.count or o.dtype != input_tensors[0].dtype
                                 for o in outs):
            raise _fail(call, f"the root needs {n} output tensors of the input's size and dtype")
        flat = torch.empty(n * i.count, dtype=i.t.dtype)
        f = _Tensor(call, flat)

        def unflatten() -> None:
            for r, o in enumerate(outs):
                o.copy_(flat[r * i.count:(r + 1) * i.count].view_as(o))
        return self._submit(call, "gather", [[i.addr, f.addr, i.count, i.dt, root]],
                            [list(outs)], (i, f), unflatten)

    def scatter(self, output_tensors, input_tensors, opts=None):
        call = "scatter"
        root = opts.rootRank if opts is not None else 0
        n = self.size()
        if len(output_tensors) != 1:
            raise _fail(call, "one output tensor per call")
        o = _Tensor(call, output_tensors[0])
        if self.rank() != root:
            return self._submit(call, "scatter", [[None, o.addr, o.count, o.dt, root]],
                                [output_tensors[0]], (o,), o.done)
        ins = input_tensors[0] if input_tensors else []
        if len(ins) != n or any(t.numel() != o.count for t in ins):
            raise _fail(call, f"the root needs {n} input tensors of the output's size")
        f = _Tensor(call, torch.cat([t.reshape(-1) for t in ins]), write_back=False)
        return self._submit(call, "scatter", [[f.addr, o.addr, o.count, o.dt, root]],
                            [output_tensors[0]], (o, f), o.done)


def _compiled() -> Any:
    """The compiled backend (_torch_c, python/rcoll/_torch_c.cpp), or None: installed beside
    this file, or the file RCOLL_TORCH_C names (a build tree).  RCOLL_TORCH_IMPL chooses:
    "python" (the default while the compiled one does not cover every call), "c++" (the
    compiled one; an error when it is missing)."""
    impl = os.environ.get("RCOLL_TORCH_IMPL", "python").strip().lower()
    if impl not in ("python", "c++", "cpp"):
        raise _fail("init", f"RCOLL_TORCH_IMPL={impl!r}: use python or c++")
    if impl == "python":
        return None
    path = os.environ.get("RCOLL_TORCH_C")
    try:
        if path:
            import importlib.util
            spec = importlib.util.spec_from_file_location("rcoll._torch_c", path)
            if spec is None or spec.loader is None:
                raise ImportError(f"no module at {path}")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
        from . import _torch_c  # type: ignore[attr-defined]
        return _torch_c
    except ImportError as e:
        raise _fail("init", f"RCOLL_TORCH_IMPL=c++ but the compiled backend does not load ({e}); "
                    "build with -Dtorch=enabled, or set RCOLL_TORCH_C to the built module") from e


def _create(store, rank, size, timeout):
    c = _compiled()
    if c is None:
        return ProcessGroupRcoll(store, rank, size, timeout)
    # The compiled group needs the communicator's progress thread (its operations move while
    # torch computes, one thread completes them); it owns the communicator from here on.
    comm = _make_comm(store, rank, size, timeout, True)
    h = comm._handle().value
    comm._h = None
    return c.ProcessGroupRcoll(h, rank, size)


if BACKEND.upper() not in dist.Backend._plugins:  # importing twice is harmless
    dist.Backend.register_backend(BACKEND, _create)
