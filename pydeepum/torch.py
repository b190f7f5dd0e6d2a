"""Iteration marks for training scripts run under libdeepum.

    from pydeepum.torch import mark_iteration

    for step in range(steps):
        mark_iteration()        # an iteration begins
        train_step()
    mark_iteration()            # and the last one ends

libdeepum counts launches per iteration between marks (`deepumctl run`), and
its tracer (`deepumctl trace record`) starts, flushes and stops at them.
Without libdeepum in the process, marking does nothing.  Named for where it
is used; it needs neither torch nor pydeepum's compiled extension.
"""

from __future__ import annotations

import ctypes

# libdeepum is preloaded, so its export is in the global scope.
_mark = getattr(ctypes.CDLL(None), "deepum_mark_iteration", None)
if _mark is not None:
    _mark.argtypes, _mark.restype = [], None


def mark_iteration() -> None:
    """An iteration begins (or, after the last one, ends)."""
    if _mark is not None:
        _mark()


def loaded() -> bool:
    """Whether libdeepum is in this process."""
    return _mark is not None
