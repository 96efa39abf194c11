"""Communicators, requests and errors over librcoll's C API (see include/rcoll.h)."""
from __future__ import annotations

import ctypes
import enum
import sys
import threading
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

from . import _lib
from ._lib import lib

IN_PLACE = ctypes.c_void_p(1)  # RCOLL_IN_PLACE
UNDEFINED = -1                 # RCOLL_UNDEFINED: split colour of a rank that joins no group


class Status(enum.IntEnum):
    """rcoll_status_t values (errors are negative)."""
    OK = 0
    INPROGRESS = 1
    ERR_INVALID_ARG = -1
    ERR_INVALID_USAGE = -2
    ERR_SYSTEM = -20
    ERR_NO_MEMORY = -21
    ERR_REMOTE = -40
    ERR_PROTOCOL = -41
    ERR_AUTH = -42
    ERR_TIMEOUT = -60
    ERR_UNSUPPORTED = -80
    ERR_INTERNAL = -100


class Datatype(enum.IntEnum):
    """Element types (rcoll_datatype_t)."""
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9
    INT16 = 10
    UINT16 = 11
    BOOL = 12    # one byte: 0 false, anything else true; results are 0 or 1


class Op(enum.IntEnum):
    """Reduction operators (rcoll_op_t)."""
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5     # bitwise ops: integer and bool datatypes only
    BOR = 6
    BXOR = 7


# buffer-protocol format characters (struct module codes) -> datatype, by item size
_FORMATS = {
    ("b", 1): Datatype.INT8, ("B", 1): Datatype.UINT8, ("c", 1): Datatype.UINT8,
    ("i", 4): Datatype.INT32, ("I", 4): Datatype.UINT32,
    ("l", 4): Datatype.INT32, ("L", 4): Datatype.UINT32,
    ("l", 8): Datatype.INT64, ("L", 8): Datatype.UINT64,
    ("q", 8): Datatype.INT64, ("Q", 8): Datatype.UINT64,
    ("n", 8): Datatype.INT64, ("N", 8): Datatype.UINT64,
    ("e", 2): Datatype.FLOAT16, ("f", 4): Datatype.FLOAT32, ("d", 8): Datatype.FLOAT64,
    ("h", 2): Datatype.INT16, ("H", 2): Datatype.UINT16, ("?", 1): Datatype.BOOL,
}


def packed_offsets(counts: Sequence[int]) -> List[int]:
    """Displacements of blocks of these counts laid end to end (0, c0, c0 + c1, ...)."""
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += int(c)
    return out


def register_format(fmt: str, itemsize: int, dt: int) -> None:
    """Map a buffer format character to a datatype (used for types added by newer libraries)."""
    _FORMATS[(fmt, itemsize)] = dt


class RcollError(RuntimeError):
    """A call into rcoll failed: ``status`` is the rcoll_status_t value (a :class:`Status`
    where known), ``status_name`` its C name (``RCOLL_ERR_TIMEOUT``), and the message is
    rcoll's own sentence (which names the failing rank where one is known)."""

    def __init__(self, status: int, message: str):
        try:
            self.status: int = Status(int(status))
            self.status_name = "RCOLL_" + Status(int(status)).name
        except ValueError:
            self.status = int(status)
            self.status_name = f"rcoll status {int(status)}"
        reason = _text(lib.rcoll_status_string(int(status)))
        super().__init__(f"{message} ({reason})" if message else f"{self.status_name}: {reason}")


def _text(b: Optional[bytes]) -> str:
    return b.decode(errors="replace") if b else ""


def _check_init(st: int) -> None:
    if st < 0:
        raise RcollError(st, _text(lib.rcoll_last_init_error()))


def version() -> Tuple[int, int, int]:
    """The loaded library's version as (major, minor, patch)."""
    v = lib.rcoll_version()
    return v // 10000, v // 100 % 100, v % 100


def _c_int(name: str, value: Any) -> int:
    """value as a C int, or ValueError naming the argument: ctypes would cut a larger Python
    int to its low 32 bits (root=2**32+1 would become root 1)."""
    v = int(value)
    if not -(1 << 31) <= v < (1 << 31):
        raise ValueError(f"{name}={value} is out of range (a C int: -2**31 .. 2**31-1)")
    return v


def datatype_size(dt: int) -> int:
    """Bytes of one element of ``dt`` (0 for an unknown datatype)."""
    return int(lib.rcoll_datatype_size(_c_int("dtype", dt)))


class UniqueId:
    """The identifier of a communicator being created: made once (:func:`get_unique_id`), by
    one process, which also serves the bootstrap; its :meth:`to_bytes` travel to every rank
    (through a file, a store, a pipe), where :meth:`from_bytes` rebuilds it."""

    __slots__ = ("_s",)

    def __init__(self, raw: bytes):
        if len(raw) != _lib.UNIQUE_ID_BYTES:
            raise ValueError(f"a unique id has {_lib.UNIQUE_ID_BYTES} bytes, not {len(raw)}")
        self._s = _lib.UniqueIdStruct()
        ctypes.memmove(ctypes.byref(self._s), raw, _lib.UNIQUE_ID_BYTES)

    @classmethod
    def from_bytes(cls, raw: bytes) -> "UniqueId":
        return cls(bytes(raw))

    def to_bytes(self) -> bytes:
        return ctypes.string_at(ctypes.byref(self._s), _lib.UNIQUE_ID_BYTES)


def get_unique_id() -> UniqueId:
    """A new communicator id; this process starts the bootstrap root that the ranks join."""
    s = _lib.UniqueIdStruct()
    st = lib.rcoll_get_unique_id(ctypes.byref(s))
    if st < 0:
        raise RcollError(st, "rcoll_get_unique_id failed")
    return UniqueId(ctypes.string_at(ctypes.byref(s), _lib.UNIQUE_ID_BYTES))


class _Buf:
    """A C-contiguous buffer-protocol object seen as (address, bytes, datatype)."""

    __slots__ = ("obj", "mv", "cbuf", "addr", "nbytes", "dt", "count")

    def __init__(self, obj: Any, dt: Optional[int], writable: bool, what: str):
        self.obj = obj
        try:
            mv = memoryview(obj)
        except TypeError:
            raise TypeError(f"{what}: {type(obj).__name__} does not support the buffer "
                            "protocol (pass a numpy array, bytearray, memoryview, ...)") from None
        if not mv.c_contiguous:
            raise ValueError(f"{what}: the buffer is not C-contiguous")
        if writable and mv.readonly:
            raise ValueError(f"{what}: the buffer is read-only")
        self.mv = mv
        self.nbytes = mv.nbytes
        if dt is None:
            fmt = mv.format.lstrip("@=<")
            if mv.format.startswith((">", "!")) and sys.byteorder == "little":
                raise ValueError(f"{what}: big-endian elements ('{mv.format}')")
            found = _FORMATS.get((fmt, mv.itemsize))
            if found is None:
                raise TypeError(f"{what}: no rcoll datatype for buffer format '{mv.format}' "
                                f"(item size {mv.itemsize}); pass dtype=")
            dt = found
        size = datatype_size(dt)
        if size == 0:
            raise ValueError(f"{what}: unknown datatype {dt}")
        if self.nbytes % size:
            raise ValueError(f"{what}: {self.nbytes} bytes are not whole {size}-byte elements")
        self.dt = _c_int("dtype", dt)
        self.count = self.nbytes // size
        if self.nbytes == 0:
            self.cbuf, self.addr = None, None
        elif mv.readonly:  # ctypes cannot point into read-only memory: one copy
            self.cbuf = (ctypes.c_char * self.nbytes).from_buffer_copy(mv)
            self.addr = ctypes.addressof(self.cbuf)
        else:
            self.cbuf = (ctypes.c_char * self.nbytes).from_buffer(mv.cast("B"))
            self.addr = ctypes.addressof(self.cbuf)


# Blocking calls wait in slices of this many seconds (rcoll_wait_for), so that Ctrl-C and other
# signals reach Python promptly (docs/python.md, "Signals").
_WAIT_SLICE_S = 0.05
_HAS_WAIT_FOR = _lib.has("rcoll_wait_for")


class Request:
    """A nonblocking operation in flight: complete it with :meth:`wait` (or :meth:`test` until
    it returns True) before the communicator is destroyed.  It keeps its buffers alive."""

    def __init__(self, comm: "Communicator", handle: ctypes.c_void_p, keep: Sequence[Any]):
        self._comm = comm
        self._h = handle
        self._keep = list(keep)
        self._status: Optional[int] = None

    @property
    def done(self) -> bool:
        return self._status is not None

    def _finish(self, st: int) -> None:
        self._status = st
        self._keep = []
        if st < 0:
            raise self._comm._error(st)

    def test(self) -> bool:
        """Make progress; True once complete (raises :class:`RcollError` if it failed)."""
        if self._status is not None:
            return True
        done = ctypes.c_int(0)
        st = lib.rcoll_test(ctypes.byref(self._h), ctypes.byref(done))
        if done.value:
            self._finish(st)
            return True
        if st < 0:
            self._finish(st)
        return False

    def wait(self) -> None:
        """Block until complete; raises :class:`RcollError` if the operation failed.

        Waits in slices (rcoll_wait_for), so the interpreter runs its signal handlers while
        it waits: Ctrl-C raises KeyboardInterrupt within a slice.  An exception out of the
        wait (KeyboardInterrupt, or any raised by a signal handler) aborts the communicator
        first: the operation cannot be left half done, the other ranks' operations fail
        naming this rank, and this communicator refuses every later call (make a new one)."""
        if self._status is not None:
            return
        if not _HAS_WAIT_FOR:  # an older library: one uninterruptible wait
            self._finish(lib.rcoll_wait(ctypes.byref(self._h)))
            return
        done = ctypes.c_int(0)
        try:
            while True:
                st = lib.rcoll_wait_for(ctypes.byref(self._h), _WAIT_SLICE_S, ctypes.byref(done))
                if done.value or st < 0:
                    break
        except BaseException:
            self._interrupted()
            raise
        self._finish(st)

    def _interrupted(self) -> None:
        """The wait was interrupted with the operation in flight: abort the communicator (it
        frees the request), then the buffers may go."""
        self._comm._interrupted()
        self._status = int(Status.ERR_REMOTE)
        self._keep = []


BufferLike = Any  # anything with the buffer protocol


class Communicator:
    """A group of ranks running collectives (rcoll_comm_t).

    Create it with :meth:`init_rank` (from a :class:`UniqueId`) or :meth:`init_env` (from a
    launcher's environment: rcoll-run, torchrun, mpirun, srun); derive others with
    :meth:`split` and :meth:`dup`.  Buffers are any C-contiguous buffer-protocol objects; the
    datatype comes from their format (numpy dtypes int8..uint64, float16/32/64) unless
    ``dtype=`` is given (needed for bfloat16, whose buffers have no format of their own).  A
    communicator is used by one thread at a time (rcoll refuses a second one with an error).
    Failures raise :class:`RcollError` with rcoll's sentence.  Use it as a context manager or
    call :meth:`destroy`."""

    def __init__(self, handle: ctypes.c_void_p):
        self._h = handle

    # --- creation -------------------------------------------------------------------------
    @classmethod
    def init_rank(cls, nranks: int, uid: UniqueId, rank: int, *,
                  timeout_s: Optional[float] = None, name: Optional[str] = None,
                  progress_thread: Optional[bool] = None,
                  wait: Optional[str] = None) -> "Communicator":
        """Join communicator ``uid`` as ``rank`` of ``nranks`` (blocks until all joined).
        ``timeout_s``, ``name``, ``progress_thread`` and ``wait`` are this communicator's
        own (rcoll_comm_config_t): they win over RCOLL_TIMEOUT, RCOLL_PROGRESS_THREAD and
        RCOLL_WAIT; None takes the environment's.  With a progress thread, nonblocking
        operations move while Python runs other code, and :meth:`Request.wait` may be called
        from another thread than the one posting.  ``wait`` is "auto", "spin" or "sleep"
        (docs/api.md, "Waiting")."""
        waits = {"auto": 0, "spin": 1, "sleep": 2}
        if wait is not None and wait not in waits:
            raise ValueError(f"wait={wait!r}: use one of {', '.join(waits)}")
        h = _lib.c_comm()
        if timeout_s is None and name is None and progress_thread is None and wait is None:
            _check_init(lib.rcoll_comm_init_rank(_c_int("nranks", nranks), ctypes.byref(uid._s),
                                                 _c_int("rank", rank), ctypes.byref(h)))
            return cls(h)
        cfg = _lib.CommConfig(ctypes.sizeof(_lib.CommConfig),
                              -1.0 if timeout_s is None else float(timeout_s),
                              None if name is None else name.encode(),
                              -1 if progress_thread is None else int(bool(progress_thread)),
                              -1 if wait is None else waits[wait])
        _check_init(lib.rcoll_comm_init_rank_config(_c_int("nranks", nranks), ctypes.byref(uid._s),
                                                    _c_int("rank", rank), ctypes.byref(cfg),
                                                    ctypes.byref(h)))
        return cls(h)

    @classmethod
    def init_env(cls) -> "Communicator":
        """Create the communicator the launcher's environment describes (RCOLL_RANK /
        RCOLL_NRANKS / RCOLL_ROOT, torchrun's, mpirun's or srun's variables)."""
        h = _lib.c_comm()
        _check_init(lib.rcoll_comm_init_env(ctypes.byref(h)))
        return cls(h)

    def split(self, color: int, key: int) -> Optional["Communicator"]:
        """Collective: ranks with the same ``color`` form a new communicator ordered by
        ``key``; ``color=UNDEFINED`` returns None."""
        h = _lib.c_comm()
        self._call(lib.rcoll_comm_split(self._handle(), _c_int("color", color),
                                        _c_int("key", key), ctypes.byref(h)))
        return Communicator(h) if h.value else None

    def dup(self) -> "Communicator":
        """Collective: a new communicator with the same ranks."""
        h = _lib.c_comm()
        self._call(lib.rcoll_comm_dup(self._handle(), ctypes.byref(h)))
        return Communicator(h)

    def shrink(self, abort_pending: bool = False) -> "Communicator":
        """After a failure (or on a healthy communicator; then every rank calls it): the
        ranks still alive agree on who they are and get a new communicator of just them, in
        their old order (rcoll_comm_shrink, docs/api.md).  ``abort_pending``: fail the
        operations pending here instead of refusing (RCOLL_SHRINK_ABORT_PENDING)."""
        h = _lib.c_comm()
        self._call(lib.rcoll_comm_shrink(self._handle(), 1 if abort_pending else 0,
                                         ctypes.byref(h)))
        return Communicator(h)

    def revoke(self) -> None:
        """From any rank and any thread: the operations in flight on this communicator fail
        on every rank, naming this one, and later calls are refused; then shrink or destroy
        it (rcoll_comm_revoke)."""
        self._call(lib.rcoll_comm_revoke(self._handle()))

    def suspend(self) -> None:
        """Collective: free the connections and staging memory until :meth:`resume`
        (rcoll_comm_suspend); other calls are refused meanwhile."""
        self._call(lib.rcoll_comm_suspend(self._handle(), 0))

    def resume(self) -> None:
        """Collective: make the connections and staging again (rcoll_comm_resume)."""
        self._call(lib.rcoll_comm_resume(self._handle()))

    def grow_id(self) -> UniqueId:
        """On one member: the id new ranks join with (rcoll_comm_grow_id; the same id when
        asked again).  Hand it to them as the first unique id was handed out."""
        uid = UniqueId(bytes(ctypes.sizeof(_lib.UniqueIdStruct)))
        self._call(lib.rcoll_comm_grow_id(self._handle(), ctypes.byref(uid._s)))
        return uid

    def grow(self, nranks: int) -> "Communicator":
        """Collective over the members and the new ranks: a new communicator of ``nranks``
        in which the members keep their ranks (rcoll_comm_grow, docs/api.md); one member
        must have made a :meth:`grow_id`.  This communicator is left as it was."""
        h = _lib.c_comm()
        self._call(lib.rcoll_comm_grow(self._handle(), _c_int("nranks", nranks), None, -1,
                                       ctypes.byref(h)))
        return Communicator(h)

    @classmethod
    def join(cls, nranks: int, uid: UniqueId, rank: int) -> "Communicator":
        """A new rank's side of :meth:`grow`: join the members' communicator as ``rank`` of
        ``nranks`` through the grow id a member made."""
        h = _lib.c_comm()
        _check_init(lib.rcoll_comm_grow(None, _c_int("nranks", nranks), ctypes.byref(uid._s),
                                        _c_int("rank", rank), ctypes.byref(h)))
        return cls(h)

    # --- queries and teardown -------------------------------------------------------------
    @property
    def rank(self) -> int:
        v = ctypes.c_int()
        self._call(lib.rcoll_comm_rank(self._handle(), ctypes.byref(v)))
        return v.value

    @property
    def size(self) -> int:
        v = ctypes.c_int()
        self._call(lib.rcoll_comm_size(self._handle(), ctypes.byref(v)))
        return v.value

    @property
    def last_error(self) -> str:
        """rcoll's text of the last error on this communicator ("" if none)."""
        return _text(lib.rcoll_comm_last_error(self._handle())) if self._h else ""

    def destroy(self) -> None:
        """Release the communicator (outstanding requests must have completed)."""
        if self._h is not None and self._h.value:
            st = lib.rcoll_comm_destroy(self._h)
            self._h = None
            if st < 0:
                raise RcollError(st, "rcoll_comm_destroy")
        self._h = None

    def abort(self) -> None:
        """Abandon the communicator now: the other ranks' operations fail naming this rank."""
        if self._h is not None and self._h.value:
            lib.rcoll_comm_abort(self._h)
        self._h = None

    def _interrupted(self) -> None:
        """A wait on this communicator was interrupted (Ctrl-C): abort it, and say so to
        later calls."""
        self.abort()
        self._gone = ("it was aborted when a wait on it was interrupted (KeyboardInterrupt or "
                      "another exception from a signal handler); make a new communicator")

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.destroy()
        else:
            self.abort()

    # --- internals ------------------------------------------------------------------------
    def _handle(self) -> ctypes.c_void_p:
        if self._h is None:
            raise ValueError("the communicator was destroyed" if not getattr(self, "_gone", None)
                             else "the communicator is gone: " + self._gone)
        return self._h

    def _error(self, st: int) -> RcollError:
        return RcollError(st, self.last_error)

    def _call(self, st: int) -> None:
        if st < 0:
            raise self._error(st)

    def _run(self, fn: str, args: List[Any], async_op: bool, keep: Sequence[Any]):
        if not async_op:
            if _groups.depth or not _HAS_WAIT_FOR:
                if _groups.depth:  # runs at the group's end: its buffers must live until then
                    _groups.keep.extend(keep)
                self._call(getattr(lib, "rcoll_" + fn)(*args))
                return None
            # posted, then waited for in slices: Ctrl-C reaches Python (Request.wait)
            h = _lib.c_req()
            self._call(getattr(lib, "rcoll_i" + fn)(*args, ctypes.byref(h)))
            Request(self, h, keep).wait()
            return None
        h = _lib.c_req()
        self._call(getattr(lib, "rcoll_i" + fn)(*args, ctypes.byref(h)))
        return Request(self, h, keep)

    @staticmethod
    def _pair(send: Optional[BufferLike], recv: BufferLike, dtype: Optional[int], what: str):
        r = _Buf(recv, dtype, True, what + " recvbuf")
        if send is None:
            return None, r
        s = _Buf(send, dtype, False, what + " sendbuf")
        if s.dt != r.dt:
            raise TypeError(f"{what}: sendbuf is {Datatype(s.dt).name}, recvbuf "
                            f"{Datatype(r.dt).name}")
        return s, r

    # --- collectives ----------------------------------------------------------------------
    def allreduce(self, sendbuf: Optional[BufferLike], recvbuf: BufferLike, op: int = Op.SUM,
                  *, dtype: Optional[int] = None, async_op: bool = False):
        """recvbuf = op over ranks of sendbuf (sendbuf None: in place in recvbuf)."""
        s, r = self._pair(sendbuf, recvbuf, dtype, "allreduce")
        if s is not None and s.count != r.count:
            raise ValueError(f"allreduce: sendbuf has {s.count} elements, recvbuf {r.count}")
        src = IN_PLACE if s is None else s.addr
        return self._run("allreduce", [src, r.addr, r.count, r.dt, _c_int("op", op),
                                       self._handle()], async_op, (s, r))

    def bcast(self, buf: BufferLike, root: int = 0, *, dtype: Optional[int] = None,
              async_op: bool = False):
        """Copy buf from rank ``root`` to every rank."""
        b = _Buf(buf, dtype, True, "bcast buf")
        return self._run("bcast", [b.addr, b.count, b.dt, _c_int("root", root), self._handle()],
                         async_op, (b,))

    def reduce(self, sendbuf: Optional[BufferLike], recvbuf: Optional[BufferLike],
               op: int = Op.SUM, root: int = 0, *, dtype: Optional[int] = None,
               async_op: bool = False):
        """recvbuf on ``root`` = op over ranks of sendbuf; other ranks may pass recvbuf=None.
        On the root, sendbuf None means in place."""
        if recvbuf is None:
            if sendbuf is None:
                raise ValueError("reduce: sendbuf and recvbuf are both None")
            s = _Buf(sendbuf, dtype, False, "reduce sendbuf")
            args = [s.addr, None, s.count, s.dt, _c_int("op", op), _c_int("root", root),
                    self._handle()]
            return self._run("reduce", args, async_op, (s,))
        s, r = self._pair(sendbuf, recvbuf, dtype, "reduce")
        src = IN_PLACE if s is None else s.addr
        count = r.count if s is None else s.count
        return self._run("reduce", [src, r.addr, count, r.dt, _c_int("op", op),
                                    _c_int("root", root), self._handle()], async_op, (s, r))

    def allgather(self, sendbuf: Optional[BufferLike], recvbuf: BufferLike, *,
                  dtype: Optional[int] = None, async_op: bool = False):
        """recvbuf (size x count elements) = every rank's sendbuf in rank order (sendbuf None:
        this rank's block is already in place in recvbuf)."""
        s, r = self._pair(sendbuf, recvbuf, dtype, "allgather")
        n = self.size
        if r.count % n:
            raise ValueError(f"allgather: recvbuf has {r.count} elements, not a multiple of "
                             f"{n} ranks")
        count = r.count // n
        if s is not None and s.count != count:
            raise ValueError(f"allgather: sendbuf has {s.count} elements, recvbuf {count} per "
                             "rank")
        src = IN_PLACE if s is None else s.addr
        return self._run("allgather", [src, r.addr, count, r.dt, self._handle()], async_op,
                         (s, r))

    def reduce_scatter(self, sendbuf: BufferLike, recvbuf: BufferLike, op: int = Op.SUM, *,
                       dtype: Optional[int] = None, async_op: bool = False):
        """Reduce sendbuf (size x count) over ranks; rank r gets block r in recvbuf (count)."""
        s, r = self._pair(sendbuf, recvbuf, dtype, "reduce_scatter")
        n = self.size
        if s is None or s.count != r.count * n:
            raise ValueError(f"reduce_scatter: sendbuf must hold {n} x {r.count} elements")
        return self._run("reduce_scatter", [s.addr, r.addr, r.count, r.dt, _c_int("op", op),
                                            self._handle()], async_op, (s, r))

    def alltoall(self, sendbuf: BufferLike, recvbuf: BufferLike, *,
                 dtype: Optional[int] = None, async_op: bool = False):
        """Block j of sendbuf goes to rank j; block i of recvbuf comes from rank i."""
        s, r = self._pair(sendbuf, recvbuf, dtype, "alltoall")
        n = self.size
        if s is None or s.count != r.count or r.count % n:
            raise ValueError(f"alltoall: sendbuf and recvbuf must hold the same multiple of "
                             f"{n} elements")
        return self._run("alltoall", [s.addr, r.addr, r.count // n, r.dt, self._handle()],
                         async_op, (s, r))

    # --- rooted and uneven collectives (libraries that have them) ------------------------
    def _need(self, fn: str) -> None:
        if not _lib.has("rcoll_" + fn):
            raise NotImplementedError(f"{fn}: the loaded librcoll ({_lib.path}) lacks it")

    @staticmethod
    def _sizes(values: Sequence[int], n: int, what: str):
        vals = [int(v) for v in values]
        if len(vals) != n or any(v < 0 or v >= 1 << 63 for v in vals):
            raise ValueError(f"{what}: {n} non-negative entries expected, got {vals[:8]}")
        return (ctypes.c_size_t * n)(*vals)

    _offsets = staticmethod(lambda counts: packed_offsets(counts))

    def gather(self, sendbuf: Optional[BufferLike], recvbuf: Optional[BufferLike],
               root: int = 0, *, dtype: Optional[int] = None, async_op: bool = False):
        """recvbuf on ``root`` (size x count elements) = every rank's sendbuf in rank order;
        other ranks pass recvbuf=None.  At the root, sendbuf None: its block is in place."""
        self._need("gather")
        n = self.size
        r = _Buf(recvbuf, dtype, True, "gather recvbuf") if recvbuf is not None else None
        s = _Buf(sendbuf, dtype if dtype is not None else (r.dt if r else None), False,
                 "gather sendbuf") if sendbuf is not None else None
        if s is None and r is None:
            raise ValueError("gather: sendbuf and recvbuf are both None")
        if r is not None and r.count % n:
            raise ValueError(f"gather: recvbuf has {r.count} elements, not a multiple of {n}")
        count = s.count if s is not None else r.count // n
        dt = s.dt if s is not None else r.dt
        return self._run("gather", [IN_PLACE if s is None else s.addr,
                                    None if r is None else r.addr, count, dt, _c_int("root", root),
                                    self._handle()], async_op, (s, r))

    def scatter(self, sendbuf: Optional[BufferLike], recvbuf: Optional[BufferLike],
                root: int = 0, *, dtype: Optional[int] = None, async_op: bool = False):
        """Block r of the root's sendbuf (size x count elements) lands in rank r's recvbuf;
        other ranks pass sendbuf=None.  At the root, recvbuf None leaves its block in place."""
        self._need("scatter")
        n = self.size
        s = _Buf(sendbuf, dtype, False, "scatter sendbuf") if sendbuf is not None else None
        r = _Buf(recvbuf, dtype if dtype is not None else (s.dt if s else None), True,
                 "scatter recvbuf") if recvbuf is not None else None
        if s is None and r is None:
            raise ValueError("scatter: sendbuf and recvbuf are both None")
        if s is not None and s.count % n:
            raise ValueError(f"scatter: sendbuf has {s.count} elements, not a multiple of {n}")
        count = r.count if r is not None else s.count // n
        dt = r.dt if r is not None else s.dt
        return self._run("scatter", [None if s is None else s.addr,
                                     IN_PLACE if r is None else r.addr, count, dt,
                                     _c_int("root", root), self._handle()], async_op, (s, r))

    def allgatherv(self, sendbuf: Optional[BufferLike], recvbuf: BufferLike,
                   counts: Sequence[int], displs: Optional[Sequence[int]] = None, *,
                   dtype: Optional[int] = None, async_op: bool = False):
        """Rank i's counts[i] elements land at recvbuf + displs[i] (default: packed in rank
        order) on every rank; sendbuf None: this rank's block is already in place."""
        self._need("allgatherv")
        n = self.size
        s, r = self._pair(sendbuf, recvbuf, dtype, "allgatherv")
        c = self._sizes(counts, n, "allgatherv counts")
        d = self._sizes(displs if displs is not None else self._offsets(counts), n,
                        "allgatherv displs")
        mine = int(counts[self.rank])
        if s is not None and s.count != mine:
            raise ValueError(f"allgatherv: sendbuf has {s.count} elements, counts[{self.rank}] "
                             f"is {mine}")
        return self._run("allgatherv", [IN_PLACE if s is None else s.addr, mine, r.addr, c, d,
                                        r.dt, self._handle()], async_op, (s, r, c, d))

    def alltoallv(self, sendbuf: BufferLike, sendcounts: Sequence[int], recvbuf: BufferLike,
                  recvcounts: Sequence[int], sdispls: Optional[Sequence[int]] = None,
                  rdispls: Optional[Sequence[int]] = None, *, dtype: Optional[int] = None,
                  async_op: bool = False):
        """sendcounts[j] elements go to rank j; recvcounts[i] come from rank i (displacements
        default to packed blocks in rank order)."""
        self._need("alltoallv")
        n = self.size
        s, r = self._pair(sendbuf, recvbuf, dtype, "alltoallv")
        if s is None:
            raise ValueError("alltoallv: not in place")
        sc = self._sizes(sendcounts, n, "alltoallv sendcounts")
        rc = self._sizes(recvcounts, n, "alltoallv recvcounts")
        sd = self._sizes(sdispls if sdispls is not None else self._offsets(sendcounts), n,
                         "alltoallv sdispls")
        rd = self._sizes(rdispls if rdispls is not None else self._offsets(recvcounts), n,
                         "alltoallv rdispls")
        return self._run("alltoallv", [s.addr, sc, sd, r.addr, rc, rd, r.dt, self._handle()],
                         async_op, (s, r, sc, sd, rc, rd))

    def reduce_scatterv(self, sendbuf: Optional[BufferLike], recvbuf: BufferLike,
                        counts: Sequence[int], op: int = Op.SUM, *,
                        dtype: Optional[int] = None, async_op: bool = False):
        """Reduce sendbuf (blocks of counts[i] elements in rank order) over ranks; rank i gets
        block i (counts[i] elements) in recvbuf.  sendbuf None: the input is in recvbuf."""
        self._need("reduce_scatterv")
        n = self.size
        s, r = self._pair(sendbuf, recvbuf, dtype, "reduce_scatterv")
        c = self._sizes(counts, n, "reduce_scatterv counts")
        return self._run("reduce_scatterv", [IN_PLACE if s is None else s.addr, r.addr, c,
                                             r.dt, _c_int("op", op), self._handle()], async_op,
                         (s, r, c))

    def barrier(self, *, async_op: bool = False):
        """Return once every rank has entered the barrier."""
        return self._run("barrier", [self._handle()], async_op, ())

    # --- point to point -------------------------------------------------------------------
    def send(self, buf: BufferLike, peer: int, *, dtype: Optional[int] = None,
             async_op: bool = False):
        """Send buf to ``peer`` (matched by its recv of the same size, in issue order)."""
        b = _Buf(buf, dtype, False, "send buf")
        return self._run("send", [b.addr, b.count, b.dt, _c_int("peer", peer), self._handle()],
                         async_op, (b,))

    def recv(self, buf: BufferLike, peer: int, *, dtype: Optional[int] = None,
             async_op: bool = False):
        """Receive into buf from ``peer``."""
        b = _Buf(buf, dtype, True, "recv buf")
        return self._run("recv", [b.addr, b.count, b.dt, _c_int("peer", peer), self._handle()],
                         async_op, (b,))

    def isend(self, buf: BufferLike, peer: int, *, dtype: Optional[int] = None) -> Request:
        return self.send(buf, peer, dtype=dtype, async_op=True)

    def irecv(self, buf: BufferLike, peer: int, *, dtype: Optional[int] = None) -> Request:
        return self.recv(buf, peer, dtype=dtype, async_op=True)


class _GroupState(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.keep: List[Any] = []


_groups = _GroupState()  # per thread, as rcoll's groups are


class group:
    """Context manager around rcoll_group_start/rcoll_group_end: the sends, receives and
    blocking collectives issued inside run together at the end (a ring exchange that would
    deadlock call by call completes).  Their buffers are kept alive until then."""

    def __enter__(self) -> "group":
        st = lib.rcoll_group_start()
        if st < 0:
            raise RcollError(st, "rcoll_group_start")
        _groups.depth += 1
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        st = lib.rcoll_group_end()
        _groups.depth -= 1
        if _groups.depth == 0:
            _groups.keep = []
        if st < 0 and exc_type is None:
            raise RcollError(st, "rcoll_group_end (see each communicator's last_error)")


def wait_all(requests: Iterable[Optional[Request]]) -> None:
    """Wait for every request (None entries are skipped); the first failure is raised after
    all have completed."""
    first: Optional[BaseException] = None
    for r in requests:
        if r is None:
            continue
        try:
            r.wait()
        except RcollError as e:
            first = first or e
    if first is not None:
        raise first


def init_env() -> Communicator:
    """Shorthand for :meth:`Communicator.init_env`."""
    return Communicator.init_env()
