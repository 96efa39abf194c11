"""rcoll: collective communication for clusters, from Python.

A small binding over librcoll's C API (ctypes; no compiled extension)::

    import numpy as np, rcoll
    with rcoll.init_env() as comm:          # launched by tools/rcoll-run, torchrun, mpirun
        x = np.full(1024, comm.rank, dtype=np.float32)
        comm.allreduce(None, x)             # in place: x = sum over ranks

Errors raise :class:`RcollError` carrying rcoll's sentence (which names the failing rank).
The library is found through ``RCOLL_LIBRARY``, the install directory, then the loader path.
``rcoll.torch`` (imported separately) registers the torch.distributed backend "rcoll".
"""
from ._core import (IN_PLACE, UNDEFINED, Communicator, Datatype, Op, RcollError, Request,
                    Status, UniqueId, datatype_size, get_unique_id, group, init_env, register_format,
                    version, wait_all)
from ._lib import path as library_path

__all__ = ["Communicator", "Datatype", "Op", "RcollError", "Request", "Status", "UniqueId", "IN_PLACE",
           "UNDEFINED", "datatype_size", "get_unique_id", "group", "init_env", "version",
           "wait_all", "register_format", "library_path"]
