"""Loading and unloading: many cycles, and never under an open file."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

import klib
from _deepum_uapi import lib

CYCLES = 100


def test_load_unload_cycles(module: Callable[..., None]) -> None:
    """Each cycle also opens, attaches (with small tables: klib.attach_small)
    and feeds the pipeline, so that a context is created and torn down with
    work done."""
    start = time.monotonic()
    for cycle in range(CYCLES):
        assert klib.unload() == 0, f"cycle {cycle}"
        assert not klib.loaded()
        klib.load(**klib.TEST_PARAMS)
        fd = klib.open_dev()
        try:
            klib.handshake(fd)
            klib.attach_small(fd)
            recs = klib.records(klib.record(lib.DEEPUM_REC_LAUNCH, exec_id=1),
                                klib.record(lib.DEEPUM_REC_FAULT, addr=1 << 30, exec_id=1))
            assert klib.inject(fd, recs) == 2
            klib.drain_all(fd)
            assert klib.stats(fd).records == 2
        finally:
            os.close(fd)
    print(f"{CYCLES} load/unload cycles in {time.monotonic() - start:.1f} s")


def test_unload_refused_while_open(module: Callable[..., None]) -> None:
    fd = klib.open_dev()
    try:
        assert klib.unload() == errno.EWOULDBLOCK  # open, not even attached
        klib.handshake(fd)
        klib.attach(fd)
        assert klib.unload() == errno.EWOULDBLOCK
        assert klib.loaded()
        assert klib.stats(fd).records == 0  # and the context still works
    finally:
        os.close(fd)
    assert klib.unload() == 0


def test_global_stats_start_at_zero(module: Callable[..., None]) -> None:
    module(**klib.TEST_PARAMS)
    assert set(klib.sysfs("snapshot").split()) == {"0"}
    assert klib.sysfs("contexts") == "0"
