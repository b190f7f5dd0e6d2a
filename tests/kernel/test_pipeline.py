"""The per-context pipeline: what SET_EXEC_ID and INVALIDATE put in, bounded
queues that drop and count, waiting, and a core replaced under the worker."""

from __future__ import annotations

import errno
import os
import signal
import threading
from collections.abc import Callable, Iterator

import klib
import numpy as np
import pytest
from _deepum_uapi import ffi, lib
from klib import call

from pydeepum.trace import RECORD_DTYPE

CONTEXT = lib.DEEPUM_SCOPE_CONTEXT
BLOCK = 1 << lib.DEEPUM_DEFAULT_BLOCK_SHIFT
PARAMS = klib.SYS_MODULE / "parameters"


def make_records(n: int, rtype: int, **fields: object) -> np.ndarray:
    recs = np.zeros(n, dtype=RECORD_DTYPE)
    recs["type"] = rtype
    for name, value in fields.items():
        recs[name] = value
    return recs


def feed(fd: int, recs: np.ndarray) -> None:
    """Every record into the pipeline, waiting whenever the fault queue is full."""
    while len(recs):
        n = klib.inject(fd, recs[: lib.DEEPUM_TEST_BATCH_MAX])
        recs = recs[n:]
        klib.drain_all(fd)


@pytest.fixture
def queue_len() -> Iterator[Callable[[str, int], None]]:
    """Set a queue length parameter for the contexts attached next; put back after."""
    saved = {p: (PARAMS / p).read_text() for p in ("fault_queue_len", "cmd_queue_len")}

    def set_len(name: str, value: int) -> None:
        (PARAMS / name).write_text(str(value))

    yield set_len
    for name, value in saved.items():
        (PARAMS / name).write_text(value)


def test_set_exec_id_is_a_launch(ctx: int) -> None:
    for exec_id in (5, 6, 5, lib.DEEPUM_CFG_EXEC_MAX_MAX):
        call(ctx, "SET_EXEC_ID", exec_id=exec_id, stream=1, name_hash=0x1234)
    call(ctx, "SET_EXEC_ID", exec_id=7, ts=12345)
    klib.drain_all(ctx)
    s = klib.stats(ctx)
    assert s.records == 5 and s.launches == 5
    assert s.exec_ignored == 1  # beyond exec_max


def test_invalidate_is_a_free(ctx: int) -> None:
    call(ctx, "INVALIDATE", addr=BLOCK + 1, len=3 * BLOCK)  # whole blocks 2 and 3 only
    call(ctx, "INVALIDATE", addr=10 * BLOCK, len=0)
    klib.drain_all(ctx)
    s = klib.stats(ctx)
    assert s.records == 2 and s.invalidated_bytes == 2 * BLOCK


def test_invalidate_discards_resident_blocks(ctx: int) -> None:
    feed(ctx, make_records(4, lib.DEEPUM_REC_FAULT, addr=np.arange(1, 5) * BLOCK, aux=lib.DEEPUM_ACCESS_READ))
    call(ctx, "INVALIDATE", addr=2 * BLOCK, len=2 * BLOCK)
    cmds = np.frombuffer(klib.drain_all(ctx), dtype=[("addr", "<u8"), ("exec_id", "<u4"), ("op", "<u4"),
                                                      ("flags", "<u4"), ("reserved", "<u4")])
    assert ffi.sizeof("struct deepum_cmd") == cmds.dtype.itemsize
    assert list(cmds["op"]) == [lib.DEEPUM_CMD_DISCARD] * 2
    assert sorted(cmds["addr"]) == [2 * BLOCK, 3 * BLOCK]
    assert klib.stats(ctx).discards == 2


def test_fault_queue_length(ctx: int, queue_len) -> None:
    queue_len("fault_queue_len", 64)
    small = klib.open_attached()
    try:
        assert klib.inject(small, make_records(100, lib.DEEPUM_REC_ALLOC)) == 64
        klib.drain_all(small)
        assert klib.stats(small).records == 64
    finally:
        os.close(small)
    # A context attached before keeps its queue.
    assert klib.inject(ctx, make_records(100, lib.DEEPUM_REC_ALLOC)) == 100


def busy_pipeline(fd: int, tracked: int = 16384, frees: int = 1024) -> None:
    """Leave @fd's pipeline busy for a while: the core tracks @tracked blocks,
    then @frees FREEs of everything are queued, each of which visits every
    tracked block.  The fault queue must be @frees long, so that it is full."""
    feed(fd, make_records(tracked, lib.DEEPUM_REC_FAULT, addr=np.arange(1, tracked + 1) * BLOCK,
                          aux=lib.DEEPUM_ACCESS_READ))
    assert klib.inject(fd, make_records(frees, lib.DEEPUM_REC_FREE, len=1 << 50)) == frees


def test_full_fault_queue_drops_and_counts(queue_len) -> None:
    queue_len("fault_queue_len", 1024)
    fd = klib.open_attached()
    try:
        busy_pipeline(fd, tracked=16384, frees=1024)
        for _ in range(50):
            call(fd, "SET_EXEC_ID", exec_id=1)  # never fails, even when dropped
        klib.drain_all(fd)
        s = klib.stats(fd)
        assert s.records_dropped > 0
        assert s.records + s.records_dropped == 16384 + 1024 + 50
    finally:
        os.close(fd)


def test_full_command_queue_drops_and_counts(queue_len, gpt2_records: np.ndarray) -> None:
    """With 64-command queues and nobody draining, commands are lost, and
    each one lost is counted: drained + dropped = what the core emitted."""
    queue_len("cmd_queue_len", 64)
    fd = klib.open_attached()
    try:
        recs = gpt2_records[:8000]
        offered = recs
        while len(offered):  # fill the pipeline without reading the recording
            offered = offered[klib.inject(fd, offered[: lib.DEEPUM_TEST_BATCH_MAX]) :]
        drained = len(klib.drain_all(fd)) // ffi.sizeof("struct deepum_cmd")
        s = klib.stats(fd)
        assert s.records == len(recs) and s.records_dropped == 0
        assert s.cmds_dropped > 0
        assert drained + s.cmds_dropped == s.prefetches + s.evictions + s.demand_evictions + s.discards
    finally:
        os.close(fd)


def test_drain_wait_interrupted(queue_len) -> None:
    queue_len("fault_queue_len", 1024)
    fd = klib.open_attached()
    out = ffi.new("struct deepum_cmd[]", 16)
    req = klib.new("TEST_DRAIN", {"cmds": klib.address(out), "max": 16, "flags": lib.DEEPUM_DRAIN_F_WAIT})
    old = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        busy_pipeline(fd)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        # lib.ioctl: a C call, which Python does not restart after the signal.
        assert klib.raw_ioctl(fd, lib.DEEPUM_IOC_TEST_DRAIN, klib.address(req)) == errno.EINTR
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        os.close(fd)  # with the pipeline still busy: release stops it


def test_config_swaps_core_under_load(ctx: int, gpt2_records: np.ndarray) -> None:
    """CONFIG while records stream in from another thread: every record is
    processed by one core or the next, and the counters carry over."""
    recs = gpt2_records[:12000]
    done = threading.Event()
    errors = []

    def producer() -> None:
        try:
            feed(ctx, recs)
        except Exception as e:  # reported below
            errors.append(e)
        done.set()

    t = threading.Thread(target=producer)
    t.start()
    swaps = 0
    while not done.is_set() or swaps < 2:
        ways = 1 + swaps % 8
        req = call(ctx, "CONFIG", klib.config_req(CONTEXT, corr_ways=ways, **klib.SMALL_CONFIG))
        assert req.config.corr_ways == ways
        swaps += 1
    t.join()
    assert not errors
    klib.drain_all(ctx)
    s = klib.stats(ctx)
    assert s.records == len(recs), f"{swaps} swaps lost records"
    assert s.launches == int((recs["type"] == lib.DEEPUM_REC_LAUNCH).sum())


def test_stats_monotonic_across_config(ctx: int) -> None:
    feed(ctx, make_records(10, lib.DEEPUM_REC_LAUNCH, exec_id=np.arange(10)))
    before = klib.stats(ctx)
    call(ctx, "CONFIG", klib.config_req(CONTEXT, corr_levels=1))
    after = klib.stats(ctx)
    assert after.records == before.records and after.launches == before.launches
    assert after.resident_blocks == 0  # the new core holds nothing


def test_core_time_measured(ctx: int) -> None:
    feed(ctx, make_records(200, lib.DEEPUM_REC_LAUNCH, exec_id=np.arange(200) % 17))
    assert klib.stats(ctx).core_ns > 0


def test_release_with_work_queued(queue_len) -> None:
    """Closing a file while its pipeline is busy stops it; the counters it
    reached join the module's totals."""
    queue_len("fault_queue_len", 1024)
    fd = klib.open_attached()
    busy_pipeline(fd)
    os.close(fd)
    assert klib.sysfs("contexts") == "0"
