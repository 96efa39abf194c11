"""torch.distributed backend "rcoll": ``import rcoll.torch`` registers it, then
``dist.init_process_group("rcoll", ...)`` (or ``"cpu:gloo,cuda:rcoll"`` style strings on
torch 2.x) runs torch's collectives on rcoll.

The backend is compiled C++ (``_torch_c.cpp``: a ``c10d::Backend`` on torch 2.x, a
``c10d::ProcessGroup`` on 1.13, from one source).  Meson builds it against the torch of the
package's interpreter and installs it beside this file; where it is missing (a package
installed without it, or another torch than the one it was built for) this module builds it
once with ``torch.utils.cpp_extension`` into a cache directory and loads that.

This file makes the group's communicator: the creator torch calls gets torch's store, rank 0
publishes an rcoll unique id in it and every rank joins, so every init method (env://, tcp://,
file://, a store) and ``new_group`` work; the communicator is then handed to the C++ group,
which owns it.  What rcoll cannot do raises ``RuntimeError`` naming the call; a failure inside
rcoll raises ``RuntimeError`` with rcoll's sentence (which names the failing rank).
"""
from __future__ import annotations

import ctypes
import datetime
import hashlib
import importlib.util
import os
import sys
import threading
from typing import Any, Optional

import torch
import torch.distributed as dist

from . import _lib
from ._core import Communicator, UniqueId, get_unique_id

BACKEND = "rcoll"
_HERE = os.path.dirname(os.path.abspath(__file__))


def _fail(call: str, why: str) -> RuntimeError:
    return RuntimeError(f"rcoll backend: {call}: {why}")


# The communicator the next group creation takes instead of making one (shrink, grow, join:
# they re-create the default group around a communicator they already have).
_next_comm: Optional[Communicator] = None


def _comm_config(timeout: Optional[datetime.timedelta]) -> dict:
    tmo = timeout.total_seconds() if timeout else None
    if tmo is not None:
        tmo = min(max(tmo, 0.0), 7 * 86400.0)
    # torch's own threads compute on every core while a rank waits: it sleeps rather than
    # polls (RCOLL_WAIT, when set, wins)
    wait = None if os.environ.get("RCOLL_WAIT") else "sleep"
    return dict(timeout_s=tmo, name="torch", progress_thread=True, wait=wait)


def _make_comm(store: Any, rank: int, size: int, timeout: Optional[datetime.timedelta],
               prefix: str = "") -> Communicator:
    """The group's communicator: rank 0 publishes a unique id in torch's store, every rank
    joins with it (every init method torch has gives the creator a store).  The group's
    timeout becomes the communicator's own (capped at a week), named as torch's in messages.
    The communicator has a progress thread (the group's operations move while torch
    computes) and sleeps in long waits (docs/api.md, "Waiting")."""
    global _next_comm
    if _next_comm is not None:
        comm, _next_comm = _next_comm, None
        if (comm.rank, comm.size) != (rank, size):
            raise _fail("init", f"the group is created as rank {rank} of {size} but the "
                        f"communicator handed to it is rank {comm.rank} of {comm.size}")
        return comm
    key = f"rcoll/{prefix}unique_id"
    if rank == 0:
        store.set(key, get_unique_id().to_bytes().hex())
    raw = store.get(key)
    uid = UniqueId.from_bytes(bytes.fromhex(raw.decode() if isinstance(raw, bytes) else raw))
    return Communicator.init_rank(size, uid, rank, **_comm_config(timeout))


# ---- the compiled module --------------------------------------------------------------------

_module: Any = None
_module_lock = threading.Lock()


def _include_dir() -> Optional[str]:
    """The directory of rcoll.h: the source tree's include/ or the installed one."""
    cands = [os.path.normpath(os.path.join(_HERE, "..", "..", "include"))]
    inc = getattr(_lib, "_INSTALLED_INCLUDEDIR", None)
    if inc:
        cands.append(inc)
    for d in cands:
        if os.path.isfile(os.path.join(d, "rcoll.h")):
            return d
    return None


def cuda_build() -> tuple:
    """Whether the backend built here gets its CUDA half (CUDA tensors in stream order), and
    why not: it needs torch 2.x built with CUDA and CUDA's headers (torch's CUDA_HOME)."""
    if not getattr(torch.version, "cuda", None):
        return False, "this torch has no CUDA"
    if int(torch.__version__.split(".")[0]) < 2:
        return False, "CUDA tensors need torch 2.x"
    from torch.utils import cpp_extension
    home = cpp_extension.CUDA_HOME
    if not home or not os.path.isfile(os.path.join(home, "include", "cuda_runtime_api.h")):
        return False, (f"no CUDA headers (CUDA_HOME {home or 'not found'}: set CUDA_HOME to a "
                       "CUDA toolkit)")
    return True, ""


def _jit_build() -> Any:
    """Build _torch_c.cpp against this interpreter's torch (torch.utils.cpp_extension), once
    per source, torch and library: the result is cached under RCOLL_TORCH_BUILD_DIR, or
    ~/.cache/rcoll/torch_c/<key>.  With a CUDA torch and CUDA's headers it is built with
    torch's CUDA flags and libraries and its CUDA half (RCOLL_TORCH_CUDA)."""
    src = os.path.join(_HERE, "_torch_c.cpp")
    inc = _include_dir()
    libpath = os.path.realpath(_lib.path)
    if not os.path.isfile(src) or inc is None or not os.path.isfile(libpath):
        raise ImportError("the compiled backend is not installed and cannot be built here "
                          f"(source {src}: {'found' if os.path.isfile(src) else 'missing'}; "
                          f"rcoll.h: {inc or 'missing'}; librcoll: {libpath})")
    from torch.utils import cpp_extension
    cuda, _ = cuda_build()
    h = hashlib.sha256()
    for part in (open(src, "rb").read(), open(os.path.join(inc, "rcoll.h"), "rb").read(),
                 torch.__version__.encode(), libpath.encode(), sys.version.encode(),
                 f"cuda={cuda}".encode()):
        h.update(part)
    key = h.hexdigest()[:16]
    base = os.environ.get("RCOLL_TORCH_BUILD_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rcoll", "torch_c")
    bdir = os.path.join(base, key)
    os.makedirs(bdir, exist_ok=True)
    libdir = os.path.dirname(libpath)
    cflags = ["-O2", "-DTORCH_EXTENSION_NAME=_torch_c"] + (["-DRCOLL_TORCH_CUDA"] if cuda else [])
    return cpp_extension.load(
        name="_torch_c", sources=[src], build_directory=bdir, verbose=False,
        extra_include_paths=[inc], extra_cflags=cflags,
        extra_ldflags=[libpath, f"-Wl,-rpath,{libdir}"], with_cuda=cuda)


def _load_file(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("rcoll._torch_c", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module at {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compiled() -> Any:
    """The compiled backend module: the file RCOLL_TORCH_C names (a build tree, as the tests
    use), the one installed beside this file, or one built now (_jit_build).  A module built
    for another torch does not load; it is then built for this one."""
    global _module
    with _module_lock:
        if _module is not None:
            return _module
        errors = []
        path = os.environ.get("RCOLL_TORCH_C")
        if path:
            try:
                _module = _load_file(path)
                return _module
            except ImportError as e:
                raise _fail("init", f"RCOLL_TORCH_C={path} does not load ({e})") from e
        try:
            from . import _torch_c  # type: ignore[attr-defined]
            if getattr(_torch_c, "CUDA", False) or not cuda_build()[0]:
                _module = _torch_c
                return _module
            # built without its CUDA half (meson builds the CPU half) while this torch and
            # toolkit can have it: built here with it
            errors.append("installed module: built without CUDA")
        except ImportError as e:
            errors.append(f"installed module: {e}")
        try:
            _module = _jit_build()
            return _module
        except Exception as e:  # a compiler error, no ninja, no headers ...
            errors.append(f"building it: {e}")
        raise _fail("init", "the compiled backend is missing: " + "; ".join(errors) +
                    " (build rcoll with -Dtorch=enabled, install libtorch-dev and a C++ "
                    "compiler, or set RCOLL_TORCH_C to a built module)")


def _group(comm: Communicator, rank: int, size: int) -> Any:
    h = comm._handle().value
    comm._h = None  # the C++ group owns it from here
    return compiled().ProcessGroupRcoll(h, rank, size)


def _create(store, rank, size, timeout):
    """torch 1.x's creator: (store, rank, size, timeout)."""
    return _group(_make_comm(store, rank, size, timeout), rank, size)


def _create_ext(dist_opts, backend_opts):
    """torch 2.x's creator (extended_api): one options object; the group id keeps the store
    keys of groups made on the same store apart."""
    gid = getattr(dist_opts, "group_id", "") or ""
    comm = _make_comm(dist_opts.store, dist_opts.group_rank, dist_opts.group_size,
                      dist_opts.timeout, prefix=f"{gid}/" if gid else "")
    return _group(comm, dist_opts.group_rank, dist_opts.group_size)


# ---- elastic: the default group loses ranks and gains them (docs/elastic.md) --------------

def _backend(group: Any) -> Any:
    """The rcoll group object behind a torch group (torch 2.x: its CPU backend)."""
    b = group
    if hasattr(group, "_get_backend"):
        b = group._get_backend(torch.device("cpu"))
    if not hasattr(b, "comm"):
        raise _fail("elastic", f"the group is not an rcoll group ({type(b).__name__})")
    return b


def _world_comm() -> Communicator:
    """The default group's communicator, not owned (the group destroys it)."""
    if not dist.is_initialized():
        raise _fail("elastic", "no default process group (init_process_group first)")
    return Communicator(ctypes.c_void_p(_backend(dist.group.WORLD).comm))


def _disown(c: Communicator) -> None:
    c._h = None


def _reinit(comm: Communicator, store: Any, timeout: Optional[datetime.timedelta]) -> None:
    """Make comm the default group: destroy the current one (if any), and create the new
    one through init_process_group, whose creator takes comm.  The store keys of the new
    group are under a prefix all its ranks agree on (a token rank 0 broadcasts), so they
    never meet the keys of an earlier group on the same store."""
    global _next_comm
    token = bytearray(os.urandom(8) if comm.rank == 0 else bytes(8))
    comm.bcast(token)
    if dist.is_initialized():
        dist.destroy_process_group()
    _next_comm = comm
    try:
        kw = {"timeout": timeout} if timeout is not None else {}
        dist.init_process_group(BACKEND, store=dist.PrefixStore(f"rcoll/{token.hex()}/", store),
                                rank=comm.rank, world_size=comm.size, **kw)
    finally:
        if _next_comm is not None:  # the creator never ran
            _next_comm = None
            comm.destroy()


def _default_store() -> Any:
    from torch.distributed import distributed_c10d as c10d
    return c10d._get_default_store()


def shrink(timeout: Optional[datetime.timedelta] = None) -> tuple:
    """After a collective of the default group failed because ranks died (the error names
    them): every surviving rank calls this; the default group is then a group of the
    survivors, numbered in their old order (rcoll_comm_shrink).  Returns (rank, size).
    Objects that hold the old group (DistributedDataParallel) must be made again.  The rank
    that made the group's unique id (rank 0) must be alive: it hosts the agreement."""
    old = _world_comm()
    store = _default_store()
    try:
        new = old.shrink(abort_pending=True)
    finally:
        _disown(old)
    rank, size = new.rank, new.size
    _reinit(new, store, timeout)  # the group owns new from here
    return rank, size


def shrink_group(group: Any, timeout: Optional[datetime.timedelta] = None) -> Any:
    """:func:`shrink` for a group made with ``new_group``: every surviving member of
    ``group`` calls this after a collective on it failed because members died (the error
    names them).  The survivors agree on who is alive (rcoll_comm_shrink) and get a new group
    of just them, numbered in their old order, which this returns (``dist.get_rank(g)``
    gives the rank in it); ``group`` is destroyed.  The default group is left as it is (shrink
    it with :func:`shrink` if it lost ranks too).  Needs torch 2.1 or later: only the
    survivors take part (``new_group(..., use_local_synchronization=True)``), through the
    default group's store, so the process that hosts it must be alive."""
    if group is None or group is dist.group.WORLD:
        raise _fail("shrink_group", "this is the default group: call rcoll.torch.shrink()")
    import inspect
    if "use_local_synchronization" not in inspect.signature(dist.new_group).parameters:
        raise _fail("shrink_group", f"needs torch 2.1 or later (new_group with "
                    f"use_local_synchronization: only the survivors can take part); this is "
                    f"torch {torch.__version__}")
    global _next_comm
    old = Communicator(ctypes.c_void_p(_backend(group).comm))
    try:
        new = old.shrink(abort_pending=True)
    finally:
        _disown(old)
    try:
        # every survivor's rank in the default group, in the new group's order
        import array
        ranks = array.array("q", [0] * new.size)
        new.allgather(array.array("q", [dist.get_rank()]), ranks)
        members = list(ranks)
        if members != sorted(members):  # torch numbers a group's ranks in ascending order
            raise _fail("shrink_group", f"the survivors' ranks {members} are not in "
                        f"ascending order (the group was not made by new_group)")
    except BaseException:
        new.destroy()
        raise
    dist.destroy_process_group(group)
    _next_comm = new
    try:
        kw = {"timeout": timeout} if timeout is not None else {}
        g = dist.new_group(ranks=members, backend=BACKEND, use_local_synchronization=True, **kw)
    finally:
        if _next_comm is not None:  # the creator never ran
            _next_comm = None
            new.destroy()
    return g


def revoke() -> None:
    """From any rank and any thread (also while another thread waits in a collective): the
    default group's operations in flight fail on every rank, naming this one, and its later
    calls fail too; every rank then calls :func:`shrink` (with nobody dead it gives a group
    of the same ranks) or destroys the group.  The way to stop a job stuck in a collective
    without killing a process (rcoll_comm_revoke)."""
    c = _world_comm()
    try:
        c.revoke()
    finally:
        _disown(c)


def _grow_key(key: Optional[str], nranks: int) -> str:
    return key or f"rcoll/grow/{nranks}"


def grow(store: Any, nranks: int, key: Optional[str] = None,
         timeout: Optional[datetime.timedelta] = None) -> tuple:
    """Every rank of the default group calls this to take in new ranks (processes that call
    :func:`join` with the same ``store``: the job's, e.g. a TCPStore every process reaches):
    rank 0 publishes a grow id under ``key`` (default ``rcoll/grow/<nranks>``) in ``store``,
    and the default group becomes one of ``nranks`` in which the members keep their ranks
    (rcoll_comm_grow).  Returns (rank, size).  Give the new ranks their state from a member
    (DistributedDataParallel broadcasts the parameters from rank 0 when made)."""
    old = _world_comm()
    try:
        if old.rank == 0:
            store.set(_grow_key(key, nranks), old.grow_id().to_bytes().hex())
        new = old.grow(nranks)
    finally:
        _disown(old)
    rank, size = new.rank, new.size
    _reinit(new, store, timeout)  # the group owns new from here
    return rank, size


def join(store: Any, nranks: int, rank: int, key: Optional[str] = None,
         timeout: Optional[datetime.timedelta] = None) -> tuple:
    """A new process (or a restarted one) joins a running job: waits in ``store`` (the
    one the members pass to :func:`grow`) for the grow id they publish there, joins as
    ``rank`` of ``nranks``, and makes that the default group.
    Returns (rank, size)."""
    raw = store.get(_grow_key(key, nranks))
    uid = UniqueId.from_bytes(bytes.fromhex(raw.decode() if isinstance(raw, bytes) else raw))
    comm = Communicator.init_rank(nranks, uid, rank, **_comm_config(timeout))
    rank, size = comm.rank, comm.size
    _reinit(comm, store, timeout)  # the group owns comm from here
    return rank, size


def _register() -> None:
    if BACKEND.upper() in dist.Backend._plugins:  # importing twice is harmless
        return
    if int(torch.__version__.split(".")[0]) >= 2:
        dist.Backend.register_backend(BACKEND, _create_ext, extended_api=True,
                                      devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, _create)


_register()
