"""Iteration marks and free reports for training scripts run under libdeepum.

    from pydeepum.torch import mark_iteration

    for step in range(steps):
        mark_iteration()        # an iteration begins
        train_step()
    mark_iteration()            # and the last one ends

libdeepum counts launches per iteration between marks (`deepumctl run`), its
tracer (`deepumctl trace record`) starts, flushes and stops at them, and the
user-mode engine counts its iterations from them.  `report_free(ptr, size,
stream)` tells libdeepum that a tensor's memory holds dead data from this
point of @stream on (its allocator freed it and keeps it): the engine
discards its whole 2 MiB blocks there, in stream order, so they are never
copied back (userlib/README.md, "Discards", says when that pays).  Without
libdeepum in the process, both do nothing.  Named for where they are used;
they need neither torch nor pydeepum's compiled extension.
"""

from __future__ import annotations

import ctypes

# libdeepum is preloaded, so its export is in the global scope.
_library = ctypes.CDLL(None)
_mark = getattr(_library, "deepum_mark_iteration", None)
if _mark is not None:
    _mark.argtypes, _mark.restype = [], None
_report_free = getattr(_library, "deepum_report_free", None)
if _report_free is not None:
    _report_free.argtypes, _report_free.restype = [ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_void_p], ctypes.c_int


def mark_iteration() -> None:
    """An iteration begins (or, after the last one, ends)."""
    if _mark is not None:
        _mark()


def report_free(ptr: int, size: int, stream: int = 0) -> bool:
    """[ptr, ptr + size) holds dead data from this point of @stream (a CUDA
    stream handle, e.g. torch.cuda.current_stream().cuda_stream) on.
    Whether anything listened (the user-mode engine or the kernel module)."""
    return _report_free is not None and _report_free(ptr, size, stream or None) == 0


def loaded() -> bool:
    """Whether libdeepum is in this process."""
    return _mark is not None
