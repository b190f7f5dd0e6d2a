"""Kernel tests need deepum.ko loaded, so they run inside the QEMU guest
(tests/qemu/run), which sets DEEPUM_KERNEL_TESTS=1, puts _deepum_uapi on
sys.path and loads the module with the test ioctls enabled.  Anywhere else
they are not collected; with the variable set, nothing is skipped: a missing
device or binding is an error.

Every test also fails if the kernel logged a splat while it ran (liburing's
runtests.sh check), even if its own assertions passed."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

if os.environ.get("DEEPUM_KERNEL_TESTS") != "1":
    collect_ignore_glob = ["test_*.py"]
else:
    import klib

SPLAT = re.compile(
    r"WARNING:|BUG:|Oops|general protection fault|UBSAN:|KASAN:|kmemleak|"
    r"possible recursive locking|circular locking dependency|suspicious RCU usage|"
    r"hung_task|soft lockup|"
    r"BUG \S+ \((Not t|T)ainted"  # SLUB's check of its objects (slub_debug): "BUG kmalloc-64 (Tainted: ...): Redzone overwritten"
)


def _kernel_log(fd: int) -> list[str]:
    """The /dev/kmsg records readable on @fd now, text only."""
    lines = []
    while True:
        try:
            data = os.read(fd, 8192)
        except BlockingIOError:
            return lines
        except BrokenPipeError:  # the ring overwrote records we had not read
            continue
        lines.append(data.decode(errors="replace").split(";", 1)[-1].rstrip())


@pytest.fixture(autouse=True)
def kernel_log_clean() -> Iterator[None]:
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        os.lseek(fd, 0, os.SEEK_END)
        yield
        lines = _kernel_log(fd)
    finally:
        os.close(fd)
    splats = [line for line in lines if SPLAT.search(line)]
    assert not splats, "kernel log during the test:\n" + "\n".join(lines)


@pytest.fixture
def dev() -> Iterator[int]:
    """A file descriptor of /dev/deepum, fresh: no handshake yet."""
    fd = klib.open_dev()
    yield fd
    os.close(fd)


@pytest.fixture
def hs(dev: int) -> int:
    """/dev/deepum after the handshake, not attached."""
    klib.handshake(dev)
    return dev


@pytest.fixture
def ctx(hs: int) -> int:
    """/dev/deepum attached to this process, with small tables (klib.SMALL_CONFIG)."""
    klib.attach_small(hs)
    return hs


@pytest.fixture(scope="session")
def gpt2_records() -> Any:
    """The bundled real trace's records (numpy, RECORD_DTYPE)."""
    from pydeepum.trace import Trace

    return Trace.read(klib.GPT2_TRACE).records


@pytest.fixture
def module() -> Iterator[Callable[..., None]]:
    """klib.reload, for tests that load the module with other parameters;
    it is loaded with the test parameters again afterwards.  Request it
    before any fixture that opens the device."""
    yield klib.reload
    klib.reload(**klib.TEST_PARAMS)
