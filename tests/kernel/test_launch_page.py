"""The launch page (DEEPUM_FEATURE_LAUNCH_PAGE): mmap() of an attached file
gives the context's page; launches written into it as the GPU would (ring
entry, then position) reach the pipeline as LAUNCH records in stream order,
with their name hashes, and commands equal the userspace core's when the
bundled trace's launches travel that way."""

from __future__ import annotations

import errno
import json
import mmap
import os
import struct
import subprocess
import time

import klib
import numpy as np
import pytest
from _deepum_uapi import ffi, lib

from pydeepum.core import Core
from pydeepum.device import Device
from pydeepum.trace import LAUNCH

PAGE = ffi.sizeof("struct deepum_launch_page")
LENGTH = (PAGE + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
POSITION = ffi.offsetof("struct deepum_launch_page", "position")
RING = ffi.offsetof("struct deepum_launch_page", "ring")
NAME_HASH = ffi.offsetof("struct deepum_launch_page", "name_hash")
DEPTH = lib.DEEPUM_RING_DEPTH
LIBDEEPUM = klib.ROOT / "build/userlib/libdeepum.so"


def map_page(fd: int, length: int = LENGTH, flags: int = mmap.MAP_SHARED, offset: int = 0) -> mmap.mmap:
    return mmap.mmap(fd, length, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)


def mmap_errno(fd: int, **kwargs) -> int:
    try:
        map_page(fd, **kwargs).close()
    except OSError as e:
        return e.errno
    return 0


def put(page: mmap.mmap, offset: int, value: int) -> None:
    page[offset:offset + 8] = struct.pack("<Q", value)


class Launcher:
    """What libdeepum and the GPU do to the page: a ring entry before each
    launch, the position once the stream gets there."""

    def __init__(self, page: mmap.mmap) -> None:
        self.page = page
        self.seq: dict[int, int] = {}

    def launch(self, exec_id: int, slot: int = 0, name_hash: int = 0, reach: bool = True) -> None:
        seq = self.seq[slot] = self.seq.get(slot, 0) + 1
        if name_hash:
            put(self.page, NAME_HASH + 8 * exec_id, name_hash)
        put(self.page, RING + 8 * (slot * DEPTH + seq % DEPTH), seq << 32 | exec_id)
        if reach:
            self.reach(slot)

    def reach(self, slot: int) -> None:
        seq = self.seq[slot]
        entry = struct.unpack_from("<Q", self.page, RING + 8 * (slot * DEPTH + seq % DEPTH))[0]
        put(self.page, POSITION + 8 * slot, seq << 32 | (entry & 0xFFFFFFFF))


def wait_for(fd: int, field: str, value: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while getattr(klib.stats(fd), field) < value:
        assert time.monotonic() < deadline, f"{field} stayed at {getattr(klib.stats(fd), field)}, not {value}"
        time.sleep(0.001)


@pytest.fixture
def launcher(ctx: int):
    """A Launcher on the attached context's page, unmapped after the test."""
    page = map_page(ctx)
    yield Launcher(page)
    page.close()


def test_the_feature_is_announced(hs: int) -> None:
    assert klib.handshake(hs).features & lib.DEEPUM_FEATURE_LAUNCH_PAGE


def test_mapping_needs_an_attached_context_and_the_exact_shape(hs: int) -> None:
    assert mmap_errno(hs) == errno.ENOTCONN
    klib.attach_small(hs)
    assert mmap_errno(hs, length=LENGTH - mmap.PAGESIZE) == errno.EINVAL
    assert mmap_errno(hs, length=LENGTH + mmap.PAGESIZE) == errno.EINVAL
    assert mmap_errno(hs, offset=mmap.PAGESIZE) == errno.EINVAL
    assert mmap_errno(hs, flags=mmap.MAP_PRIVATE) == errno.EINVAL
    assert mmap_errno(hs) == 0


def test_another_process_cannot_map_it(ctx: int) -> None:
    def child() -> None:
        assert mmap_errno(ctx) == errno.EPERM

    klib.in_child(child)


def test_the_page_is_initialised_and_one_per_context(ctx: int) -> None:
    first, second = map_page(ctx), map_page(ctx)
    try:
        magic, version, streams, depth = struct.unpack_from("<4I", first, 0)
        assert (magic, version, streams, depth) == (lib.DEEPUM_PAGE_MAGIC, lib.DEEPUM_PAGE_VERSION,
                                                    lib.DEEPUM_PAGE_STREAMS, DEPTH)
        assert first[16:PAGE].count(0) == PAGE - 16  # zero beyond the header
        put(first, POSITION + 8 * 5, 0x1234)
        assert struct.unpack_from("<Q", second, POSITION + 8 * 5)[0] == 0x1234  # the same memory
    finally:
        first.close()
        second.close()


def test_launches_the_gpu_reached_become_launch_records(ctx: int, launcher: Launcher) -> None:
    for exec_id in (3, 4, 3):
        launcher.launch(exec_id, slot=0)
    launcher.launch(9, slot=77)
    wait_for(ctx, "launches", 4)
    # enqueued but not reached: nothing yet
    launcher.launch(5, slot=0, reach=False)
    launcher.launch(6, slot=0, reach=False)
    time.sleep(0.05)
    assert klib.stats(ctx).launches == 4
    launcher.reach(0)  # both at once
    wait_for(ctx, "launches", 6)
    # a launch beyond exec_max is learned as ignored, as SET_EXEC_ID's would be
    launcher.launch(lib.DEEPUM_CFG_EXEC_MAX_MAX - 1, slot=1)
    wait_for(ctx, "exec_ignored", 1)
    assert klib.stats(ctx).records_dropped == 0


def test_iteration_marks_in_the_rings_become_iteration_records(ctx: int, launcher: Launcher) -> None:
    for exec_id in (3, lib.DEEPUM_EXEC_ITERATION, 3, lib.DEEPUM_EXEC_ITERATION):
        launcher.launch(exec_id, slot=4)
    wait_for(ctx, "records", 4)
    s = klib.stats(ctx)
    assert s.launches == 2 and s.exec_ignored == 0 and s.records_dropped == 0


def test_entries_overwritten_before_they_were_read_are_counted_lost(ctx: int, launcher: Launcher) -> None:
    for exec_id in range(DEPTH + 10):  # the host ran more than a ring ahead
        launcher.launch(exec_id % 200, slot=2, reach=False)
    launcher.reach(2)
    wait_for(ctx, "launches", DEPTH - 1)
    s = klib.stats(ctx)
    assert s.launches + s.records_dropped == DEPTH + 10 and s.records_dropped >= 10


def test_the_context_lives_while_its_page_is_mapped() -> None:
    before = int(klib.sysfs("contexts"))
    fd = klib.open_dev()
    klib.handshake(fd)
    klib.attach_small(fd)
    page = map_page(fd)
    os.close(fd)  # the mapping holds the file
    assert int(klib.sysfs("contexts")) == before + 1
    page.close()  # the last reference: the context goes
    assert int(klib.sysfs("contexts")) == before


def test_trace_launches_through_the_page_give_the_userspace_cores_commands(gpt2_records: np.ndarray) -> None:
    records = gpt2_records[:6000].copy()
    launches = records["type"] == LAUNCH
    assert 50 < launches.sum() and int(records["exec_id"][launches].max()) < lib.DEEPUM_PAGE_EXEC_IDS
    records["aux"][launches] = 0  # one stream slot
    with Device() as dev:
        dev.attach()
        expected = Core(dev.config()).run(records).tobytes()
        page = map_page(dev.fileno())
        try:
            launcher, got, fed = Launcher(page), [], 0
            for start, stop in _runs(records["type"] == LAUNCH):
                if records["type"][start] == LAUNCH:
                    for r in records[start:stop]:
                        launcher.launch(int(r["exec_id"]), name_hash=int(r["addr"]))
                    fed += stop - start
                    wait_for(dev.fileno(), "records", fed)
                else:
                    got.append(dev.replay(records[start:stop]))
                    fed += stop - start
            got.append(dev.drain_all())
        finally:
            page.close()
    assert b"".join(g.tobytes() for g in got) == expected


def test_libdeepum_hands_launches_to_the_module_through_its_page(tmp_path) -> None:
    """libdeepum (against the fake libcuda) maps the real module's page,
    registers it, and the fake GPU's position writes reach the context."""
    before = int(klib.sysfs("stats/launches")), int(klib.sysfs("stats/records"))
    stats = tmp_path / "stats.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPUM_", "LD_"))}
    env.update(LD_LIBRARY_PATH=str(klib.ROOT / "build/fakecuda"), LD_PRELOAD=str(LIBDEEPUM),
               DEEPUM_DEVICE=klib.DEV, DEEPUM_MODE="observe", DEEPUM_WRITE_EVERY="1", DEEPUM_STATS=str(stats),
               DEEPUM_UVM_DEVICE=str(tmp_path / "no-uvm"))
    done = subprocess.run([str(klib.ROOT / "build/fakecuda/cuda_app"), "symbol", "loop", "3"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    s = json.loads(stats.read_text())
    assert s["attached"] and s["module_launch_page"] and s["delivery"] == "write"
    assert s["counters"]["launches"] == 9 and s["counters"]["set_exec_id_ioctls"] == 0
    # every launch, and the two iteration marks made after a launch, read from the page;
    # the three frees at its end by INVALIDATE
    assert int(klib.sysfs("stats/launches")) - before[0] == 9
    assert int(klib.sysfs("stats/records")) - before[1] == 9 + 2 + 3


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of equal values in @mask."""
    edges = np.flatnonzero(np.diff(mask.astype(np.int8))) + 1
    bounds = [0, *edges.tolist(), len(mask)]
    return list(zip(bounds[:-1], bounds[1:]))


@pytest.fixture(autouse=True)
def _page_is_in_the_header() -> None:
    assert PAGE == 16 + 8 * lib.DEEPUM_PAGE_STREAMS * (2 + DEPTH) + 8 * lib.DEEPUM_PAGE_EXEC_IDS
