"""deepum.ko's nvidia-uvm backend (kmod/uvm_backend.c) against a stand-in
nvidia-uvm (tests/kernel/fakeuvm) that exports the same uvm_ext interface:
binding, GPU faults through the RCU hook into the pipeline, the commands
out through the helpers, equal to what the userspace core decides for the
same records; and unloading while faults arrive.  tests/qemu/run builds both
modules into $DEEPUM_QEMU_OUT/uvm."""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import klib
from _deepum_uapi import lib

UVM = Path(os.environ.get("DEEPUM_QEMU_OUT", "/nonexistent")) / "uvm"
FAKE_DEV = "/dev/deepum_fake_uvm"
BLOCK = 2 << 20
BASE = 0x7F0000000000
GPU = bytes(range(1, 17))
ACCESS_READ = 1  # UVM_EXT_ACCESS_READ


class Faults(ctypes.Structure):
    _fields_ = [("gpu_uuid", ctypes.c_uint8 * 16), ("count", ctypes.c_uint32), ("access_type", ctypes.c_uint32),
                ("addrs", ctypes.c_uint64 * 16)]


class Call(ctypes.Structure):
    _fields_ = [("op", ctypes.c_uint32), ("va_space", ctypes.c_uint32), ("addr", ctypes.c_uint64),
                ("len", ctypes.c_uint64), ("gpu_uuid", ctypes.c_uint8 * 16)]


class Calls(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_uint64), ("max", ctypes.c_uint32), ("count", ctypes.c_uint32)]


OP_MIGRATE, OP_EVICT, OP_DISCARD = 1, 2, 3
IOC_FAULTS = klib.ioc(lib._IOC_WRITE, 1, ctypes.sizeof(Faults), magic=ord("U"))
IOC_CALLS = klib.ioc(klib.RW, 2, ctypes.sizeof(Calls), magic=ord("U"))
IOC_ID = klib.ioc(lib._IOC_READ, 3, 4, magic=ord("U"))


@pytest.fixture(scope="module", autouse=True)
def uvm_modules():
    """The stand-in provider and deepum.ko built with the UVM backend, test ioctls
    off (with them, contexts use the recording backend); put back after."""
    assert klib.unload() == 0
    try:
        klib.load(UVM / "fakeuvm" / "fake_uvm.ko")
        klib.load(UVM / "kmod" / "deepum.ko")
        yield
    finally:
        klib.unload()
        klib.unload("fake_uvm")
        klib.load(**klib.TEST_PARAMS)


def fake_faults(fd: int, *blocks: int) -> None:
    req = Faults(count=len(blocks), access_type=ACCESS_READ)
    req.gpu_uuid[:] = list(GPU)
    for i, b in enumerate(blocks):
        req.addrs[i] = BASE + b * BLOCK + 4096
    fcntl.ioctl(fd, IOC_FAULTS, req)


def fake_calls(fd: int) -> list[Call]:
    buf = (Call * 4096)()
    req = Calls(buf=ctypes.addressof(buf), max=4096)
    fcntl.ioctl(fd, IOC_CALLS, req)
    return [buf[i] for i in range(req.count)]


def fake_id(fd: int) -> int:
    out = ctypes.c_uint32()
    fcntl.ioctl(fd, IOC_ID, out)
    return out.value


def bind(dev: int, fd: int) -> int:
    return klib.errno_of(dev, "BIND_UVM", fd=fd)


def test_the_backend_is_announced_and_binding_checks_its_argument() -> None:
    dev = klib.open_dev()
    fake = os.open(FAKE_DEV, os.O_RDWR)
    null = os.open("/dev/null", os.O_RDWR)
    try:
        assert klib.handshake(dev).features & lib.DEEPUM_FEATURE_UVM
        assert klib.sysfs("backend") == "uvm"
        assert bind(dev, fake) == errno.ENOTCONN
        klib.attach_small(dev)
        assert bind(dev, null) == errno.EBADF
        assert bind(dev, 1 << 30) == errno.EBADF  # no such descriptor
        assert klib.errno_of(dev, "BIND_UVM", fd=fake, flags=1) == errno.EINVAL
        assert klib.errno_of(dev, "BIND_UVM", fd=fake, reserved=[1, 0]) == errno.EINVAL
        assert bind(dev, fake) == 0
        assert bind(dev, fake) == errno.EBUSY  # this context is bound
        other = klib.open_dev()
        try:
            klib.handshake(other)
            klib.attach_small(other)
            assert bind(other, fake) == errno.EBUSY  # that VA space is bound
        finally:
            os.close(other)
    finally:
        for fd in (dev, fake, null):
            os.close(fd)


def _loop_records(iterations: int, kernels: int, blocks_per_kernel: int) -> list[tuple[str, int]]:
    """A training-like loop: kernel k touches its own blocks, every iteration."""
    out = []
    for _ in range(iterations):
        for k in range(kernels):
            out.append(("launch", k))
            out += [("fault", k * blocks_per_kernel + j) for j in range(blocks_per_kernel)]
    return out


def _expected_calls(config, steps: list[tuple[str, int]]) -> list[tuple[int, int, int]]:
    """What the userspace core commands for the same records, as helper calls:
    evictions the core charges to the fault path are the driver's own."""
    from pydeepum.core import DISCARD, EVICT, PREFETCH, Core
    from pydeepum.trace import EXEC_NONE, FAULT, LAUNCH, RECORD_DTYPE

    recs = np.zeros(len(steps), dtype=RECORD_DTYPE)
    for i, (kind, value) in enumerate(steps):
        if kind == "launch":
            recs[i]["type"], recs[i]["exec_id"] = LAUNCH, value
        else:
            recs[i]["type"], recs[i]["exec_id"] = FAULT, EXEC_NONE
            recs[i]["addr"], recs[i]["aux"] = BASE + value * BLOCK, ACCESS_READ
    out = []
    for c in Core(config).run(recs):
        if c["flags"] & lib.DEEPUM_CMD_F_DEMAND:
            continue
        op = {PREFETCH: OP_MIGRATE, EVICT: OP_EVICT, DISCARD: OP_DISCARD}[int(c["op"])]
        out.append((op, int(c["addr"]), BLOCK if op != OP_EVICT else 0))
    return out


def test_gpu_faults_in_helper_calls_out_as_the_userspace_core_decides() -> None:
    from pydeepum.device import Device

    steps = _loop_records(iterations=4, kernels=6, blocks_per_kernel=3)
    with open(FAKE_DEV, "rb+", buffering=0) as fake, Device() as dev:
        dev.attach()
        config = dev.configure(dataclasses.replace(dev.config(), capacity_blocks=10, **klib.SMALL_CONFIG))
        dev.bind_uvm(fake.fileno())
        fake_calls(fake.fileno())  # start from an empty log
        for kind, value in steps:
            if kind == "launch":
                dev.set_exec_id(value)
            else:
                fake_faults(fake.fileno(), value)
        want = _expected_calls(config, steps)
        got: list[Call] = []
        deadline = time.monotonic() + 30
        while len(got) < len(want) and time.monotonic() < deadline:
            got += fake_calls(fake.fileno())
            time.sleep(0.05)
        stats = dev.stats()
        assert stats.records == len(steps) and stats.records_dropped == 0
        assert [(c.op, c.addr, c.len) for c in got] == want
        assert {c.va_space for c in got} == {fake_id(fake.fileno())}
        assert {bytes(c.gpu_uuid) for c in got if c.op == OP_MIGRATE} == {GPU}
        assert sum(c.op == OP_MIGRATE for c in got) > 0 and sum(c.op == OP_EVICT for c in got) > 0


def test_contexts_go_away_while_faults_arrive() -> None:
    """Bound contexts are released while another thread plays fault batches on
    their VA spaces: the hook must never reach a freed pipeline."""
    fake = os.open(FAKE_DEV, os.O_RDWR)
    stop = threading.Event()

    def storm() -> None:
        b = 0
        while not stop.is_set():
            fake_faults(fake, *range(b, b + 16))
            b = (b + 16) % 4096

    t = threading.Thread(target=storm)
    t.start()
    try:
        for _ in range(100):
            dev = klib.open_dev()
            try:
                klib.handshake(dev)
                klib.attach_small(dev)
                assert bind(dev, fake) == 0
            finally:
                os.close(dev)
    finally:
        stop.set()
        t.join()
        fake_calls(fake)
        os.close(fake)


def test_the_module_cannot_leave_while_the_provider_needs_it_and_unloads_after() -> None:
    assert klib.unload("fake_uvm") == errno.EWOULDBLOCK  # deepum imports its symbols
    assert klib.unload() == 0
    assert klib.unload("fake_uvm") == 0
    klib.load(UVM / "fakeuvm" / "fake_uvm.ko")
    klib.load(UVM / "kmod" / "deepum.ko")
