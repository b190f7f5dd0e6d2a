"""Kernel tests need deepum.ko loaded, so they run inside the QEMU guest
(tests/qemu/run), which sets DEEPUM_KERNEL_TESTS=1 and puts _deepum_uapi on
sys.path.  Anywhere else they are not collected; with the variable set,
nothing is skipped: a missing device or binding is an error."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

if os.environ.get("DEEPUM_KERNEL_TESTS") != "1":
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def dev() -> Iterator[int]:
    """A file descriptor of /dev/deepum: one open file, one prefetch core."""
    fd = os.open("/dev/deepum", os.O_RDWR | os.O_CLOEXEC)
    yield fd
    os.close(fd)
