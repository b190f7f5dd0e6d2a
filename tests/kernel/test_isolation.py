"""A context belongs to the process that attached it; the test ioctls need
the module parameter; the defaults need CAP_SYS_ADMIN."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import klib
import pytest
from _deepum_uapi import ffi, lib
from klib import errno_of, in_child

CONTEXT, DEFAULTS, GLOBAL = lib.DEEPUM_SCOPE_CONTEXT, lib.DEEPUM_SCOPE_DEFAULTS, lib.DEEPUM_SCOPE_GLOBAL
BLOCK = 1 << lib.DEEPUM_DEFAULT_BLOCK_SHIFT
NOBODY = 65534

# What another process tries on a context, and what it must get.
FOREIGN_CALLS: list[tuple[str, dict, int]] = [
    ("SET_EXEC_ID", {"exec_id": 1}, errno.EPERM),
    ("INVALIDATE", {"addr": BLOCK, "len": BLOCK}, errno.EPERM),
    ("CONFIG", {"scope": CONTEXT}, errno.EPERM),
    ("GET_CONFIG", {"scope": CONTEXT}, errno.EPERM),
    ("STATS", {"scope": CONTEXT}, errno.EPERM),
    ("BIND_UVM", {"fd": 0}, errno.EPERM),
    ("TEST_INJECT", {"count": 0}, errno.EPERM),
    ("TEST_DRAIN", {"max": 0}, errno.EPERM),
    ("ATTACH", {}, errno.EBUSY),
    # What is not about the context still works.
    ("API", {"api": lib.DEEPUM_API_VERSION}, 0),
    ("STATS", {"scope": GLOBAL}, 0),
    ("GET_CONFIG", {"scope": DEFAULTS}, 0),
]


def foreign_errnos(fd: int) -> list[tuple[str, int]]:
    return [(name, errno_of(fd, name, **fields)) for name, fields, _ in FOREIGN_CALLS]


EXPECTED = [(name, err) for name, _, err in FOREIGN_CALLS]


def test_forked_child_cannot_use_parents_context(ctx: int) -> None:
    def child() -> None:
        assert foreign_errnos(ctx) == EXPECTED

    in_child(child)
    assert klib.stats(ctx).records == 0  # nothing the child tried reached it
    assert errno_of(ctx, "STATS", scope=CONTEXT) == 0


def test_context_passed_over_unix_socket(ctx: int) -> None:
    """SCM_RIGHTS both ways: whoever receives a context's file cannot use the context."""
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            parent_sock.close()
            _, fds, _, _ = socket.recv_fds(child_sock, 16, 1)
            ok = foreign_errnos(fds[0]) == EXPECTED
            own = klib.open_attached()  # and the other way round
            socket.send_fds(child_sock, [b"ok" if ok else b"no"], [own])
            child_sock.recv(16)
            status = 0 if ok and klib.stats(own).records == 0 else 1
        finally:
            os._exit(status)
    child_sock.close()
    try:
        socket.send_fds(parent_sock, [b"x"], [ctx])
        msg, fds, _, _ = socket.recv_fds(parent_sock, 16, 1)
        assert msg == b"ok", "the child could use the parent's context"
        try:
            assert foreign_errnos(fds[0]) == EXPECTED
        finally:
            os.close(fds[0])
        parent_sock.sendall(b"done")
    finally:
        parent_sock.close()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_threads_share_the_context(ctx: int) -> None:
    results = []

    def thread() -> None:
        results.append(errno_of(ctx, "SET_EXEC_ID", exec_id=3))
        results.append(errno_of(ctx, "STATS", scope=CONTEXT))

    t = threading.Thread(target=thread)
    t.start()
    t.join()
    assert results == [0, 0]
    klib.drain_all(ctx)
    assert klib.stats(ctx).launches == 1


def test_after_execve() -> None:
    """A process that called execve() keeps its PID but not its memory: the
    context it attached before is not its any more."""
    ioctl_then_exit = ("import fcntl, sys\n"
                       "try:\n"
                       "    fcntl.ioctl(int(sys.argv[1]), int(sys.argv[2]), bytearray(int(sys.argv[3])))\n"
                       "except OSError as e:\n"
                       "    sys.exit(e.errno)\n")
    pid = os.fork()
    if pid == 0:
        try:
            own = klib.open_attached()
            os.set_inheritable(own, True)
            # A zeroed STATS request asks for the context's counters.
            os.execv(sys.executable, [sys.executable, "-S", "-c", ioctl_then_exit, str(own),
                                      str(lib.DEEPUM_IOC_STATS), str(ffi.sizeof("struct deepum_stats_req"))])
        finally:
            os._exit(255)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == errno.EPERM


def test_defaults_need_cap_sys_admin(hs: int) -> None:
    """As nobody (no capabilities): defaults readable, not writable; its own
    context's configuration is fine.  The device itself is root's only."""
    spare = klib.open_dev()  # opened as root, attached after dropping root

    def child() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        assert errno_of(hs, "CONFIG", klib.config_req(DEFAULTS, corr_ways=2)) == errno.EPERM
        assert errno_of(hs, "GET_CONFIG", scope=DEFAULTS) == 0
        klib.handshake(spare)
        klib.attach(spare)
        assert errno_of(spare, "CONFIG", klib.config_req(CONTEXT, corr_ways=2)) == 0
        with pytest.raises(PermissionError):
            klib.open_dev()

    try:
        in_child(child)
    finally:
        os.close(spare)
    assert klib.get_config(hs, DEFAULTS).corr_ways == lib.DEEPUM_CFG_CORR_WAYS_DEFAULT
    assert oct(os.stat(klib.DEV).st_mode & 0o777) == "0o660"


def test_test_ioctls_need_the_parameter(module: Callable[..., None]) -> None:
    module(enable_test_ioctls=0)
    assert klib.param("enable_test_ioctls") == "N"
    assert klib.sysfs("backend") == "null"
    fd = klib.open_dev()
    try:
        # Refused before anything else, handshake included.
        assert errno_of(fd, "TEST_INJECT", count=0) == errno.EPERM
        api = klib.handshake(fd)
        public = sum(1 << klib.nr(name) for name in klib.STRUCTS if not name.startswith("TEST_"))
        assert api.ioctls == public
        klib.attach(fd)
        assert errno_of(fd, "TEST_INJECT", count=0) == errno.EPERM
        assert errno_of(fd, "TEST_DRAIN", max=0, flags=lib.DEEPUM_DRAIN_F_WAIT) == errno.EPERM
        # The pipeline runs all the same, into the null backend.
        for exec_id in range(100):
            klib.call(fd, "SET_EXEC_ID", exec_id=exec_id)
        klib.call(fd, "INVALIDATE", addr=0, len=BLOCK * 8)
        stats = wait_for_records(fd, 101)
        assert stats.launches == 100 and stats.invalidated_bytes == BLOCK * 8
        assert stats.records_dropped == 0 and stats.cmds_dropped == 0
    finally:
        os.close(fd)
    module(enable_test_ioctls=1)
    assert klib.sysfs("backend") == "record"


def wait_for_records(fd: int, n: int) -> Any:
    """STATS until @n records went through the core: without the test ioctls
    there is no TEST_DRAIN to wait with."""
    deadline = time.monotonic() + 60
    while (stats := klib.stats(fd)).records < n:
        assert time.monotonic() < deadline, f"only {stats.records} of {n} records processed"
        os.sched_yield()
    return stats
