"""DEEPUM_IOC_API, the handshake, against the real module (see conftest.py)."""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
from typing import Any

import pytest
from _deepum_uapi import ffi, lib
from klib import RW, STRUCTS, ioc, nr, raw_ioctl

API_SIZE = ffi.sizeof("struct deepum_api")
FEATURES = (lib.DEEPUM_FEATURE_PREFETCH | lib.DEEPUM_FEATURE_PREEVICT | lib.DEEPUM_FEATURE_INVALIDATE |
            lib.DEEPUM_FEATURE_LAUNCH_PAGE)
# The module runs with the test ioctls enabled here (test_isolation.py checks the mask without).
ALL_IOCTLS = sum(1 << nr(name) for name in STRUCTS)


def api_request(**fields: int) -> Any:
    """A struct deepum_api as a caller built against this header sends it."""
    api = ffi.new("struct deepum_api *", {"api": lib.DEEPUM_API_VERSION})
    for name, value in fields.items():
        setattr(api, name, value)
    return api


def handshake(fd: int, buf: Any, size: int | None = None) -> None:
    """DEEPUM_IOC_API on buf, its command encoding size bytes (default: len(buf))."""
    if size is None:
        size = len(buf)
    fcntl.ioctl(fd, ioc(RW, lib.DEEPUM_IOC_NR_API, size), buf, True)


def parse(data: bytes) -> Any:
    """A struct deepum_api read from data, zero-extended if data is shorter."""
    api = ffi.new("struct deepum_api *")
    ffi.memmove(api, data[:API_SIZE], min(len(data), API_SIZE))
    return api


def expect_errno(err: int, fd: int, cmd: int, buf: Any) -> None:
    with pytest.raises(OSError) as exc:
        fcntl.ioctl(fd, cmd, buf, True)
    assert exc.value.errno == err, os.strerror(exc.value.errno)


def test_ioc_matches_header() -> None:
    assert ioc(RW, lib.DEEPUM_IOC_NR_API, API_SIZE) == lib.DEEPUM_IOC_API


def test_handshake(dev: int) -> None:
    api = api_request()
    handshake(dev, ffi.buffer(api))
    assert api.api == lib.DEEPUM_API_VERSION
    assert api.flags == 0
    assert api.features == FEATURES
    assert api.ioctls == ALL_IOCTLS
    assert list(api.reserved) == [0, 0, 0, 0]


def test_supported_features_granted(dev: int) -> None:
    api = api_request(features=FEATURES)
    handshake(dev, ffi.buffer(api))
    assert api.features == FEATURES


def test_newer_minor_accepted(dev: int) -> None:
    api = api_request(api=lib.DEEPUM_API_VERSION + 1)
    handshake(dev, ffi.buffer(api))
    assert api.api == lib.DEEPUM_API_VERSION


@pytest.mark.parametrize("major", [0, lib.DEEPUM_API_MAJOR + 1, 0xFFFF])
def test_wrong_major(dev: int, major: int) -> None:
    api = api_request(api=major << 16 | lib.DEEPUM_API_MINOR)
    expect_errno(errno.EINVAL, dev, lib.DEEPUM_IOC_API, ffi.buffer(api))


def test_nonzero_flags(dev: int) -> None:
    api = api_request(flags=1)
    expect_errno(errno.EINVAL, dev, lib.DEEPUM_IOC_API, ffi.buffer(api))


@pytest.mark.parametrize("index", range(4))
def test_nonzero_reserved(dev: int, index: int) -> None:
    api = api_request()
    api.reserved[index] = 1 << 63
    expect_errno(errno.EINVAL, dev, lib.DEEPUM_IOC_API, ffi.buffer(api))


@pytest.mark.parametrize("feature", [1 << FEATURES.bit_length(), 1 << 63], ids=["next", "top"])
def test_unsupported_feature(dev: int, feature: int) -> None:
    api = api_request(features=FEATURES | feature)
    expect_errno(errno.EINVAL, dev, lib.DEEPUM_IOC_API, ffi.buffer(api))
    assert api.features == FEATURES | feature, "a refused request was written back"


@pytest.mark.parametrize(
    "cmd",
    [
        ioc(RW, lib.DEEPUM_IOC_NR_BIND_UVM + 1, API_SIZE),
        ioc(RW, lib.DEEPUM_IOC_NR_TEST_DRAIN + 1, API_SIZE),
        ioc(RW, 0xFF, API_SIZE),
        ioc(RW, lib.DEEPUM_IOC_NR_API, API_SIZE, magic=lib.DEEPUM_IOC_MAGIC + 1),
        ioc(lib._IOC_READ, lib.DEEPUM_IOC_NR_API, API_SIZE),
        ioc(lib._IOC_WRITE, lib.DEEPUM_IOC_NR_API, API_SIZE),
        ioc(lib._IOC_NONE, lib.DEEPUM_IOC_NR_API, 0),
    ],
    ids=["after-public", "after-test", "last-nr", "other-magic", "read-only", "write-only", "no-data"],
)
def test_unknown_command(dev: int, cmd: int) -> None:
    expect_errno(errno.ENOTTY, dev, cmd, bytearray(ffi.buffer(api_request())))


@pytest.mark.parametrize("field", ["features", "ioctls", "reserved"])
def test_older_shorter_struct(dev: int, field: str) -> None:
    """A caller built when the struct ended before field still works, and
    nothing past its struct is touched."""
    size = ffi.offsetof("struct deepum_api", field)
    guard = b"\xa5" * 16
    buf = bytearray(ffi.buffer(api_request())[:size]) + guard
    handshake(dev, buf, size)
    assert buf[size:] == guard
    api = parse(bytes(buf[:size]))
    assert api.api == lib.DEEPUM_API_VERSION
    assert api.flags == 0
    if size > ffi.offsetof("struct deepum_api", "features"):
        assert api.features == FEATURES
    if size > ffi.offsetof("struct deepum_api", "ioctls"):
        assert api.ioctls == ALL_IOCTLS


def test_newer_longer_struct_zero_tail(dev: int) -> None:
    buf = bytearray(ffi.buffer(api_request())) + bytes(24)
    handshake(dev, buf)
    api = parse(bytes(buf))
    assert api.api == lib.DEEPUM_API_VERSION
    assert api.features == FEATURES
    assert buf[API_SIZE:] == bytes(24)


def test_newer_longer_struct_nonzero_tail(dev: int) -> None:
    """Fields this module does not know about must be zero: it cannot honour them."""
    buf = bytearray(ffi.buffer(api_request())) + bytes(23) + b"\x01"
    expect_errno(errno.E2BIG, dev, ioc(RW, lib.DEEPUM_IOC_NR_API, len(buf)), buf)


@pytest.mark.parametrize("addr", [0, 8, 0xFFFF_FFFF_FFFF_F000], ids=["null", "low", "kernel"])
def test_bad_pointer(dev: int, addr: int) -> None:
    assert raw_ioctl(dev, lib.DEEPUM_IOC_API, addr) == errno.EFAULT


def test_unwritable_struct(dev: int, tmp_path: Any) -> None:
    """A valid request the reply cannot be written to: EFAULT on the way out."""
    path = tmp_path / "api"
    path.write_bytes(bytes(ffi.buffer(api_request())))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        with ffi.from_buffer(m) as p:
            addr = int(ffi.cast("uintptr_t", p))
            assert raw_ioctl(dev, lib.DEEPUM_IOC_API, addr) == errno.EFAULT


def test_files_are_independent(dev: int) -> None:
    """Several open files coexist, each with its own handshake, and close cleanly."""
    fds = [os.open("/dev/deepum", os.O_RDWR | os.O_CLOEXEC) for _ in range(3)]
    try:
        for fd in [dev, *fds]:
            api = api_request()
            handshake(fd, ffi.buffer(api))
            assert api.api == lib.DEEPUM_API_VERSION
    finally:
        for fd in fds:
            os.close(fd)
