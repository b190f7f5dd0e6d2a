"""/sys/class/misc/deepum/ and the module parameters."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

import klib
import pytest
from _deepum_uapi import ffi, lib

PARAMS = klib.SYS_MODULE / "parameters"
# snapshot's columns: the header's counters in order, reserved ones left out.
# A new counter is appended to the struct, so it is appended here too.
COLUMNS = [name for name, _ in ffi.typeof("struct deepum_stats").fields if not name.startswith("reserved")]


def snapshot() -> list[int]:
    return [int(v) for v in klib.sysfs("snapshot").split()]


def test_files() -> None:
    names = sorted(p.name for p in (klib.SYS_DEVICE / "stats").iterdir())
    assert names == sorted(COLUMNS)
    for name in ("snapshot", "contexts", "backend"):
        assert (klib.SYS_DEVICE / name).is_file()


def test_snapshot_columns_follow_the_header(ctx: int) -> None:
    """Each column holds the counter of its header position, as the STATS
    ioctl reports it and as stats/<name> shows it (nothing runs in between)."""
    klib.inject(ctx, klib.records(*[klib.record(lib.DEEPUM_REC_LAUNCH, exec_id=i) for i in range(5)]))
    klib.call(ctx, "INVALIDATE", addr=0, len=1 << 30)
    klib.drain_all(ctx)
    values = snapshot()
    assert len(values) == len(COLUMNS)
    ioctl = klib.stats(ctx, lib.DEEPUM_SCOPE_GLOBAL)
    for name, value in zip(COLUMNS, values):
        assert value == getattr(ioctl, name), name
        assert int(klib.sysfs(f"stats/{name}")) == value, name
    assert values[COLUMNS.index("launches")] >= 5


def test_contexts_count() -> None:
    base = int(klib.sysfs("contexts"))
    fds = [klib.open_dev() for _ in range(3)]
    try:
        for fd in fds:
            klib.handshake(fd)
        assert int(klib.sysfs("contexts")) == base  # open is not attached
        for fd in fds[:2]:
            klib.attach(fd)
        assert int(klib.sysfs("contexts")) == base + 2
    finally:
        for fd in fds:
            os.close(fd)
    assert int(klib.sysfs("contexts")) == base


def test_read_only(ctx: int) -> None:
    for path in (klib.SYS_DEVICE / "snapshot", klib.SYS_DEVICE / "stats" / "records",
                 PARAMS / "enable_test_ioctls"):
        with pytest.raises(PermissionError):
            path.write_text("1")


def test_parameter_defaults() -> None:
    assert klib.param("enable_test_ioctls") == "Y"
    assert klib.param("fault_queue_len") == "16384"
    assert klib.param("cmd_queue_len") == "16384"
    assert klib.param("launch_poll_us") == "100"
    assert klib.sysfs("backend") == "record"


@pytest.mark.parametrize("value", ["9", "100001", "-1", "abc"])
def test_launch_poll_period_checked_on_write(value: str) -> None:
    with pytest.raises(OSError) as exc:
        (PARAMS / "launch_poll_us").write_text(value)
    assert exc.value.errno == errno.EINVAL
    assert klib.param("launch_poll_us") == "100"


def test_launch_poll_period_bounds_accepted() -> None:
    try:
        for value in ("10", "100000"):
            (PARAMS / "launch_poll_us").write_text(value)
            assert klib.param("launch_poll_us") == value
    finally:
        (PARAMS / "launch_poll_us").write_text("100")


@pytest.mark.parametrize("value", ["0", "32", "100", "2097152", "-64", "abc", "64 64"])
@pytest.mark.parametrize("name", ["fault_queue_len", "cmd_queue_len"])
def test_queue_length_checked_on_write(name: str, value: str) -> None:
    before = klib.param(name)
    with pytest.raises(OSError) as exc:
        (PARAMS / name).write_text(value)
    assert exc.value.errno == errno.EINVAL
    assert klib.param(name) == before


@pytest.mark.parametrize("name", ["fault_queue_len", "cmd_queue_len"])
def test_queue_length_bounds_accepted(name: str) -> None:
    before = klib.param(name)
    try:
        for value in ("64", "1048576", "0x400"):
            (PARAMS / name).write_text(value)
            assert klib.param(name) == str(int(value, 0))
    finally:
        (PARAMS / name).write_text(before)


@pytest.mark.parametrize("params", [{"fault_queue_len": 100}, {"cmd_queue_len": 32},
                                    {"enable_test_ioctls": "maybe"}])
def test_load_refuses_bad_parameters(module: Callable[..., None], params: dict) -> None:
    assert klib.unload() == 0
    with pytest.raises(OSError) as exc:
        klib.load(**params)
    assert exc.value.errno == errno.EINVAL
    assert not klib.loaded()


def test_load_with_parameters(module: Callable[..., None]) -> None:
    module(enable_test_ioctls=1, fault_queue_len=128, cmd_queue_len=1 << 20)
    assert klib.param("fault_queue_len") == "128"
    assert klib.param("cmd_queue_len") == "1048576"
    fd = klib.open_attached()
    try:
        assert klib.inject(fd, klib.records(*[klib.record(lib.DEEPUM_REC_ALLOC)] * 200)) == 128
    finally:
        os.close(fd)
