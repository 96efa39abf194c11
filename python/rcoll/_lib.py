"""Finding and loading librcoll, and the C prototypes (ctypes).

The library is looked for in this order:

1. the ``RCOLL_LIBRARY`` environment variable (a path to ``librcoll.so``);
2. the directory ``meson install`` put it in (written into ``_paths.py`` at install time);
3. the dynamic loader's own search (``LD_LIBRARY_PATH``, ``/etc/ld.so.cache``):
   ``librcoll.so.0``, then ``librcoll.so``.

The first that loads wins; if none does, :class:`ImportError` lists what was tried.
"""
from __future__ import annotations

import ctypes
import os
from typing import List, Optional

try:  # written by meson install; absent in a source tree
    from . import _paths  # type: ignore[attr-defined]
    _INSTALLED_LIBDIR: Optional[str] = getattr(_paths, "LIBDIR", None)
    _INSTALLED_INCLUDEDIR: Optional[str] = getattr(_paths, "INCLUDEDIR", None)
except ImportError:  # pragma: no cover - depends on the layout
    _INSTALLED_LIBDIR = None
    _INSTALLED_INCLUDEDIR = None

UNIQUE_ID_BYTES = 128

c_status = ctypes.c_int
c_comm = ctypes.c_void_p
c_req = ctypes.c_void_p


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class CommConfig(ctypes.Structure):
    """rcoll_comm_config_t"""
    _fields_ = [("size", ctypes.c_size_t), ("timeout_s", ctypes.c_double),
                ("name", ctypes.c_char_p), ("progress_thread", ctypes.c_int),
                ("wait", ctypes.c_int)]


def _candidates() -> List[str]:
    out: List[str] = []
    env = os.environ.get("RCOLL_LIBRARY")
    if env:
        out.append(env)
    if _INSTALLED_LIBDIR:
        out.append(os.path.join(_INSTALLED_LIBDIR, "librcoll.so.0"))
    out += ["librcoll.so.0", "librcoll.so"]
    return out


def _load() -> ctypes.CDLL:
    errors = []
    for name in _candidates():
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"{name}: {e}")
    raise ImportError("rcoll: cannot load librcoll (set RCOLL_LIBRARY to its path, or add its "
                      "directory to LD_LIBRARY_PATH); tried " + "; ".join(errors))


lib = _load()
path: str = getattr(lib, "_name", "?")

_P = ctypes.POINTER
_SZ = ctypes.c_size_t
_INT = ctypes.c_int
_VP = ctypes.c_void_p


def _proto(name: str, restype, *argtypes) -> None:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_proto("rcoll_status_string", ctypes.c_char_p, c_status)
_proto("rcoll_version", _INT)
_proto("rcoll_datatype_size", _SZ, _INT)
_proto("rcoll_get_unique_id", c_status, _P(UniqueIdStruct))
_proto("rcoll_comm_init_rank", c_status, _INT, _P(UniqueIdStruct), _INT, _P(c_comm))
_proto("rcoll_comm_init_env", c_status, _P(c_comm))
_proto("rcoll_last_init_error", ctypes.c_char_p)
_proto("rcoll_comm_rank", c_status, c_comm, _P(_INT))
_proto("rcoll_comm_size", c_status, c_comm, _P(_INT))
_proto("rcoll_comm_destroy", c_status, c_comm)
_proto("rcoll_comm_abort", c_status, c_comm)
_proto("rcoll_comm_last_error", ctypes.c_char_p, c_comm)
_proto("rcoll_comm_split", c_status, c_comm, _INT, _INT, _P(c_comm))
_proto("rcoll_comm_dup", c_status, c_comm, _P(c_comm))
_proto("rcoll_comm_shrink", c_status, c_comm, _INT, _P(c_comm))
_proto("rcoll_comm_revoke", c_status, c_comm)
_proto("rcoll_comm_suspend", c_status, c_comm, _INT)
_proto("rcoll_comm_resume", c_status, c_comm)
_proto("rcoll_comm_grow_id", c_status, c_comm, _P(UniqueIdStruct))
_proto("rcoll_comm_grow", c_status, c_comm, _INT, _P(UniqueIdStruct), _INT, _P(c_comm))
_proto("rcoll_barrier", c_status, c_comm)
_proto("rcoll_ibarrier", c_status, c_comm, _P(c_req))
for _b in ("", "i"):
    _tail = [_P(c_req)] if _b else []
    _proto(f"rcoll_{_b}allreduce", c_status, _VP, _VP, _SZ, _INT, _INT, c_comm, *_tail)
    _proto(f"rcoll_{_b}bcast", c_status, _VP, _SZ, _INT, _INT, c_comm, *_tail)
    _proto(f"rcoll_{_b}reduce", c_status, _VP, _VP, _SZ, _INT, _INT, _INT, c_comm, *_tail)
    _proto(f"rcoll_{_b}allgather", c_status, _VP, _VP, _SZ, _INT, c_comm, *_tail)
    _proto(f"rcoll_{_b}reduce_scatter", c_status, _VP, _VP, _SZ, _INT, _INT, c_comm, *_tail)
    _proto(f"rcoll_{_b}alltoall", c_status, _VP, _VP, _SZ, _INT, c_comm, *_tail)
    _proto(f"rcoll_{_b}send" if _b == "" else "rcoll_isend", c_status, _VP, _SZ, _INT, _INT,
           c_comm, *_tail)
    _proto(f"rcoll_{_b}recv" if _b == "" else "rcoll_irecv", c_status, _VP, _SZ, _INT, _INT,
           c_comm, *_tail)
_proto("rcoll_group_start", c_status)
_proto("rcoll_group_end", c_status)
_proto("rcoll_test", c_status, _P(c_req), _P(_INT))
_proto("rcoll_wait", c_status, _P(c_req))
if hasattr(lib, "rcoll_wait_for"):
    _proto("rcoll_wait_for", c_status, _P(c_req), ctypes.c_double, _P(_INT))

# Optional entry points (newer libraries): looked up, never required.
_SZP = _P(_SZ)
for _b in ("", "i"):
    _tail = [_P(c_req)] if _b else []
    if hasattr(lib, f"rcoll_{_b}gather"):
        _proto(f"rcoll_{_b}gather", c_status, _VP, _VP, _SZ, _INT, _INT, c_comm, *_tail)
        _proto(f"rcoll_{_b}scatter", c_status, _VP, _VP, _SZ, _INT, _INT, c_comm, *_tail)
        _proto(f"rcoll_{_b}allgatherv", c_status, _VP, _SZ, _VP, _SZP, _SZP, _INT, c_comm,
               *_tail)
        _proto(f"rcoll_{_b}alltoallv", c_status, _VP, _SZP, _SZP, _VP, _SZP, _SZP, _INT,
               c_comm, *_tail)
        _proto(f"rcoll_{_b}reduce_scatterv", c_status, _VP, _VP, _SZP, _INT, _INT, c_comm,
               *_tail)
if hasattr(lib, "rcoll_comm_init_rank_config"):
    _proto("rcoll_comm_init_rank_config", c_status, _INT, _P(UniqueIdStruct), _INT,
           _P(CommConfig), _P(c_comm))


def has(name: str) -> bool:
    """Whether the loaded library exports the C function ``name``."""
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False
