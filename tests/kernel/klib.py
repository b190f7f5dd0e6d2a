"""Helpers of the kernel tests: ioctls through _deepum_uapi (the header, compiled
by tests/kernel/uapi_build.py), the module loaded and unloaded with
finit_module(2)/delete_module(2), and its sysfs files."""

from __future__ import annotations

import errno
import fcntl
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _deepum_uapi import ffi, lib

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "pydeepum"))
from _cdef import ioctl_structs  # noqa: E402  (the header extractor, standard library only)

KO = ROOT / "kmod" / "deepum.ko"
GPT2_TRACE = ROOT / "tests" / "data" / "h200-gpt2-124m-bs8x512-accessset-6it.dut.gz"
DEV = "/dev/deepum"
SYS_MODULE = Path("/sys/module/deepum")
SYS_DEVICE = Path("/sys/class/misc/deepum")

RW = lib._IOC_READ | lib._IOC_WRITE
# What the tests load the module with, and restore after changing it.
TEST_PARAMS = {"enable_test_ioctls": 1}

# Each ioctl's argument, as the header pairs them; its command encoding must carry its size.
STRUCTS = {name: f"struct {tag}" for name, tag in ioctl_structs().items()}


def ioc(direction: int, nr: int, size: int, magic: int = lib.DEEPUM_IOC_MAGIC) -> int:
    return (
        direction << lib._IOC_DIRSHIFT
        | magic << lib._IOC_TYPESHIFT
        | nr << lib._IOC_NRSHIFT
        | size << lib._IOC_SIZESHIFT
    )


def cmd(name: str) -> int:
    return int(getattr(lib, f"DEEPUM_IOC_{name}"))


def nr(name: str) -> int:
    return int(getattr(lib, f"DEEPUM_IOC_NR_{name}"))


def direction(command: int) -> int:
    return (command >> lib._IOC_DIRSHIFT) & 3


def size_of(command: int) -> int:
    return (command >> lib._IOC_SIZESHIFT) & ((1 << 14) - 1)


for _name, _ctype in STRUCTS.items():
    assert size_of(cmd(_name)) == ffi.sizeof(_ctype), _name


def new(name: str, init: dict | None = None) -> Any:
    """The argument struct of ioctl @name, as a cffi pointer."""
    return ffi.new(STRUCTS[name] + " *", init or {})


def _buffer(arg: Any) -> Any:
    return arg if isinstance(arg, bytearray) else ffi.buffer(arg)


def call(fd: int, name: str, /, arg: Any = None, **fields: Any) -> Any:
    """ioctl @name on @fd with @arg (a cffi struct pointer or a bytearray;
    default: a zeroed struct with @fields set); returns @arg as the kernel
    left it."""
    if arg is None:
        arg = new(name, fields)
    fcntl.ioctl(fd, cmd(name), _buffer(arg), True)
    return arg


def errno_of(fd: int, name: str, /, arg: Any = None, command: int | None = None, **fields: Any) -> int:
    """The errno of ioctl @name (or the raw @command), 0 on success."""
    if arg is None:
        arg = new(name, fields)
    try:
        fcntl.ioctl(fd, cmd(name) if command is None else command, _buffer(arg), True)
    except OSError as e:
        return e.errno
    return 0


def raw_ioctl(fd: int, command: int, addr: int) -> int:
    """ioctl(2) with a raw address for the argument; its errno, or 0."""
    ffi.errno = 0
    return 0 if lib.ioctl(fd, command, ffi.cast("void *", addr)) == 0 else ffi.errno


def address(ptr: Any) -> int:
    return int(ffi.cast("uintptr_t", ptr))


def open_dev() -> int:
    return os.open(DEV, os.O_RDWR | os.O_CLOEXEC)


def handshake(fd: int) -> Any:
    return call(fd, "API", api=lib.DEEPUM_API_VERSION)


def attach(fd: int) -> Any:
    return call(fd, "ATTACH")


def open_attached() -> int:
    fd = open_dev()
    handshake(fd)
    attach(fd)
    return fd


# Tables of well under a MiB.  Attaching with the built-in defaults allocates
# and zeroes 14 MiB, 90 ms under TCG: tests that need no full-size tables use these.
SMALL_CONFIG = {"corr_sets": 64, "exec_max": 256, "block_max": 1024, "lookahead_kernels": 64,
                "lookahead_blocks": 256, "walk_max": 1024}


def attach_small(fd: int) -> Any:
    """ATTACH with SMALL_CONFIG as the defaults for that moment (put back after)."""
    saved = new("CONFIG", {"scope": lib.DEEPUM_SCOPE_DEFAULTS})
    saved.config = get_config(fd, lib.DEEPUM_SCOPE_DEFAULTS)[0]
    call(fd, "CONFIG", config_req(lib.DEEPUM_SCOPE_DEFAULTS, **SMALL_CONFIG))
    try:
        return attach(fd)
    finally:
        call(fd, "CONFIG", saved)


def config_req(scope: int, **config: int) -> Any:
    return new("CONFIG", {"scope": scope, "config": config})


def stats(fd: int, scope: int = lib.DEEPUM_SCOPE_CONTEXT) -> Any:
    """The counters, copied out of the request (a field of a cffi struct does
    not keep the struct alive)."""
    req = call(fd, "STATS", scope=scope)
    out = ffi.new("struct deepum_stats *")
    out[0] = req.stats
    return out


def get_config(fd: int, scope: int = lib.DEEPUM_SCOPE_CONTEXT) -> Any:
    req = call(fd, "GET_CONFIG", scope=scope)
    out = ffi.new("struct deepum_config *")
    out[0] = req.config
    return out


def inject(fd: int, records: Any, count: int | None = None) -> int:
    """TEST_INJECT @records (a cffi array, or numpy records); returns accepted."""
    ptr = records if isinstance(records, ffi.CData) else ffi.from_buffer("struct deepum_record[]", records)
    n = len(ptr) if count is None else count
    return call(fd, "TEST_INJECT", records=address(ptr), count=n).accepted


def drain(fd: int, max_cmds: int = lib.DEEPUM_TEST_BATCH_MAX, wait: bool = True) -> bytes:
    """TEST_DRAIN once; the commands' bytes."""
    out = ffi.new("struct deepum_cmd[]", max_cmds)
    flags = lib.DEEPUM_DRAIN_F_WAIT if wait else 0
    req = call(fd, "TEST_DRAIN", cmds=address(out), max=max_cmds, flags=flags)
    return bytes(ffi.buffer(out, req.count * ffi.sizeof("struct deepum_cmd")))


def drain_all(fd: int) -> bytes:
    """Every command the pipeline has produced for what was injected so far."""
    chunks = []
    while chunk := drain(fd):
        chunks.append(chunk)
    return b"".join(chunks)


def record(rtype: int, **fields: int) -> Any:
    return ffi.new("struct deepum_record *", dict(type=rtype, **fields))[0]


def records(*recs: Any) -> Any:
    arr = ffi.new("struct deepum_record[]", len(recs))
    for i, r in enumerate(recs):
        arr[i] = r
    return arr


def in_child(fn: Callable[[], object]) -> None:
    """Run @fn in a forked child (to change its credentials, or to be another
    process); whatever it raises fails the caller."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fn()
            os.write(w, b"ok")
        except BaseException as e:  # reported to the parent, then out without pytest's cleanup
            os.write(w, repr(e).encode()[:4000])
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        result = f.read().decode()
    os.waitpid(pid, 0)
    assert result == "ok", f"child: {result}"


# ---- the module -----------------------------------------------------------


def loaded() -> bool:
    return SYS_MODULE.exists()


def load(ko: Path = KO, **params: Any) -> None:
    """finit_module(2) @ko (kmod/deepum.ko) with @params; OSError on failure."""
    text = " ".join(f"{k}={v}" for k, v in params.items()).encode()
    with open(ko, "rb") as f:
        if lib.finit_module(f.fileno(), text, 0):
            err = ffi.errno
            raise OSError(err, f"finit_module({text.decode()}): {os.strerror(err)}")


def unload(name: str = "deepum") -> int:
    """delete_module(2), refusing to wait or force, as rmmod does; its errno, or 0."""
    ffi.errno = 0
    return 0 if lib.delete_module(name.encode(), lib.O_NONBLOCK) == 0 else ffi.errno


def reload(**params: Any) -> None:
    err = unload()
    if err not in (0, errno.ENOENT):
        raise OSError(err, f"delete_module: {os.strerror(err)}")
    load(**params)


def param(name: str) -> str:
    return (SYS_MODULE / "parameters" / name).read_text().strip()


def sysfs(name: str) -> str:
    return (SYS_DEVICE / name).read_text().strip()
