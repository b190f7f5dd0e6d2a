"""Every errno path of every ioctl but API (test_api.py), reserved fields,
struct growth and unknown commands, against the real module."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from typing import Any

import klib
import pytest
from _deepum_uapi import ffi, lib
from klib import RW, STRUCTS, call, errno_of, ioc, new, nr

CONTEXT, DEFAULTS, GLOBAL = lib.DEEPUM_SCOPE_CONTEXT, lib.DEEPUM_SCOPE_DEFAULTS, lib.DEEPUM_SCOPE_GLOBAL
BLOCK = 1 << lib.DEEPUM_DEFAULT_BLOCK_SHIFT
NOT_API = [name for name in STRUCTS if name != "API"]

# An argument each ioctl accepts on an attached file.
VALID: dict[str, dict[str, Any]] = {
    "ATTACH": {},
    "SET_EXEC_ID": {"exec_id": 1, "stream": 2, "name_hash": 3},
    "CONFIG": {"scope": CONTEXT},
    "GET_CONFIG": {"scope": DEFAULTS},
    "INVALIDATE": {"addr": BLOCK, "len": BLOCK},
    "STATS": {"scope": GLOBAL},
    "BIND_UVM": {"fd": 0},
    "TEST_INJECT": {"count": 0},
    "TEST_DRAIN": {"max": 0},
}


# What a valid argument gets: this module has no UVM backend (test_uvm_backend.py has one).
ANSWER = {"BIND_UVM": errno.ENODEV}


def reserved_fields(name: str, ctype: str | None = None, prefix: str = "") -> list[tuple[str, int | None]]:
    """(path, index) of every reserved field ioctl @name reads.  Of nested
    structs only CONFIG's is input; GET_CONFIG's and STATS' are output."""
    out: list[tuple[str, int | None]] = []
    for field, f in ffi.typeof(ctype or STRUCTS[name]).fields:
        path = prefix + field
        if f.type.kind == "struct":
            if name == "CONFIG":
                out += reserved_fields(name, f.type.cname, path + ".")
        elif field.startswith("reserved"):
            out += [(path, i) for i in range(f.type.length)] if f.type.kind == "array" else [(path, None)]
    return out


def set_path(arg: Any, path: str, index: int | None, value: int) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        arg = getattr(arg, p)
    if index is None:
        setattr(arg, leaf, value)
    else:
        getattr(arg, leaf)[index] = value


def file_for(name: str, hs: int) -> int:
    """ATTACH needs an unattached file, everything else an attached one."""
    if name != "ATTACH":
        klib.attach(hs)
    return hs


# ---- state: handshake, attach, ownership ------------------------------------


@pytest.mark.parametrize("name", NOT_API)
def test_before_handshake(dev: int, name: str) -> None:
    assert errno_of(dev, name, **VALID[name]) == errno.EPROTO


@pytest.mark.parametrize("name,fields", [
    ("SET_EXEC_ID", VALID["SET_EXEC_ID"]),
    ("INVALIDATE", VALID["INVALIDATE"]),
    ("CONFIG", {"scope": CONTEXT}),
    ("GET_CONFIG", {"scope": CONTEXT}),
    ("STATS", {"scope": CONTEXT}),
    ("BIND_UVM", {"fd": 0}),
    ("TEST_INJECT", {"count": 0}),
    ("TEST_DRAIN", {"max": 0}),
])
def test_context_needs_attach(hs: int, name: str, fields: dict) -> None:
    assert errno_of(hs, name, **fields) == errno.ENOTCONN


@pytest.mark.parametrize("name,scope", [("GET_CONFIG", DEFAULTS), ("STATS", GLOBAL), ("CONFIG", DEFAULTS)])
def test_module_scopes_need_no_attach(hs: int, name: str, scope: int) -> None:
    assert errno_of(hs, name, scope=scope) == 0


def test_attach(hs: int) -> None:
    a = klib.attach(hs)
    assert a.pid == os.getpid()
    assert a.flags == 0 and list(a.reserved) == [0, 0]
    assert errno_of(hs, "ATTACH") == errno.EBUSY
    other = klib.open_attached()
    try:
        assert errno_of(other, "ATTACH") == errno.EBUSY
        b = klib.stats(other)  # a fresh context: nothing counted yet
        assert b.records == 0
    finally:
        os.close(other)


def test_context_numbers_unique(hs: int) -> None:
    fds = [klib.open_dev() for _ in range(3)]
    try:
        ids = []
        for fd in fds:
            klib.handshake(fd)
            ids.append(klib.attach(fd).context)
        ids.append(klib.attach(hs).context)
        assert len(set(ids)) == 4 and ids == sorted(ids)
    finally:
        for fd in fds:
            os.close(fd)


# ---- arguments: flags, reserved fields, scopes, ranges ----------------------


@pytest.mark.parametrize("name,path,index", [
    (name, path, index) for name in NOT_API for path, index in reserved_fields(name)
])
def test_reserved_nonzero(hs: int, name: str, path: str, index: int | None) -> None:
    fd = file_for(name, hs)
    arg = new(name, VALID[name])
    set_path(arg, path, index, 1)
    assert errno_of(fd, name, arg) == errno.EINVAL


@pytest.mark.parametrize("name", ["ATTACH", "CONFIG", "GET_CONFIG", "STATS", "BIND_UVM", "TEST_INJECT", "TEST_DRAIN"])
def test_unknown_flags(hs: int, name: str) -> None:
    fd = file_for(name, hs)
    arg = new(name, VALID[name])
    arg.flags = 1 << 31
    assert errno_of(fd, name, arg) == errno.EINVAL


@pytest.mark.parametrize("name,scope", [
    ("CONFIG", GLOBAL), ("CONFIG", 3), ("GET_CONFIG", GLOBAL), ("GET_CONFIG", 1 << 31),
    ("STATS", DEFAULTS), ("STATS", 3),
])
def test_unknown_scope(ctx: int, name: str, scope: int) -> None:
    assert errno_of(ctx, name, scope=scope) == errno.EINVAL


def config_cases() -> list[tuple[str, int]]:
    """(field, value) pairs outside each field's DEEPUM_CFG_*_MIN..MAX."""
    cases = []
    for name, _ in ffi.typeof("struct deepum_config").fields:
        prefix = f"DEEPUM_CFG_{name.upper()}"
        if hasattr(lib, f"{prefix}_MIN"):
            lo, hi = getattr(lib, f"{prefix}_MIN"), getattr(lib, f"{prefix}_MAX")
            cases.append((name, hi + 1))
            if lo > 1:
                cases.append((name, lo - 1))
    return cases + [
        ("capacity_blocks", lib.DEEPUM_CFG_CAPACITY_BLOCKS_MAX + 1),
        ("corr_sets", lib.DEEPUM_CFG_CORR_SETS_MIN * 3),  # not a power of two
        ("flags", lib.DEEPUM_CFG_F_ALL + 1),
        ("flags", lib.DEEPUM_CFG_F_HISTORY | lib.DEEPUM_CFG_F_LRM_VICTIMS),  # two victim choices
    ]


@pytest.mark.parametrize("field,value", config_cases())
@pytest.mark.parametrize("scope", [CONTEXT, DEFAULTS], ids=["context", "defaults"])
def test_config_out_of_range(ctx: int, scope: int, field: str, value: int) -> None:
    before = bytes(ffi.buffer(klib.get_config(ctx, scope)))
    assert errno_of(ctx, "CONFIG", klib.config_req(scope, **{field: value})) == errno.EINVAL
    assert bytes(ffi.buffer(klib.get_config(ctx, scope))) == before


def test_config_zero_means_default(ctx: int) -> None:
    req = call(ctx, "CONFIG", klib.config_req(CONTEXT, corr_ways=8))
    assert req.config.corr_ways == 8
    assert req.config.corr_sets == lib.DEEPUM_CFG_CORR_SETS_DEFAULT
    assert req.config.block_shift == lib.DEEPUM_CFG_BLOCK_SHIFT_DEFAULT
    got = klib.get_config(ctx, CONTEXT)
    assert got.corr_ways == 8 and got.walk_max == lib.DEEPUM_CFG_WALK_MAX_DEFAULT
    # No victim choice: the last iteration's uses, with their scan (API 1.4).
    assert got.flags == lib.DEEPUM_CFG_F_HISTORY and got.evict_scan == lib.DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT
    # Defaults were not touched by a context's CONFIG.
    assert klib.get_config(ctx, DEFAULTS).corr_ways == lib.DEEPUM_CFG_CORR_WAYS_DEFAULT


def test_defaults_reach_new_contexts(ctx: int) -> None:
    had = klib.get_config(ctx, CONTEXT).lookahead_kernels
    try:
        call(ctx, "CONFIG", klib.config_req(DEFAULTS, lookahead_kernels=7))
        fd = klib.open_attached()
        try:
            assert klib.get_config(fd, CONTEXT).lookahead_kernels == 7
        finally:
            os.close(fd)
        assert klib.get_config(ctx, CONTEXT).lookahead_kernels == had  # an existing context keeps it
    finally:
        call(ctx, "CONFIG", klib.config_req(DEFAULTS))


def test_config_without_memory_keeps_core(ctx: int) -> None:
    """Tables larger than the guest's memory: -ENOMEM, and the old core goes on."""
    huge = {name: getattr(lib, f"DEEPUM_CFG_{name.upper()}_MAX")
            for name in ("corr_sets", "corr_ways", "corr_levels", "corr_succs", "exec_max", "block_max")}
    call(ctx, "CONFIG", klib.config_req(CONTEXT, corr_ways=2))
    klib.inject(ctx, klib.records(klib.record(lib.DEEPUM_REC_LAUNCH, exec_id=1)))
    klib.drain_all(ctx)
    assert errno_of(ctx, "CONFIG", klib.config_req(CONTEXT, **huge)) == errno.ENOMEM
    assert klib.get_config(ctx, CONTEXT).corr_ways == 2
    klib.inject(ctx, klib.records(klib.record(lib.DEEPUM_REC_LAUNCH, exec_id=2)))
    klib.drain_all(ctx)
    assert klib.stats(ctx).launches == 2


def test_invalidate_wrapping_range(ctx: int) -> None:
    assert errno_of(ctx, "INVALIDATE", addr=2**64 - BLOCK, len=BLOCK) == errno.EINVAL
    assert errno_of(ctx, "INVALIDATE", addr=2**64 - BLOCK, len=BLOCK - 1) == 0


def test_inject_count_limit(ctx: int) -> None:
    recs = ffi.new("struct deepum_record[]", lib.DEEPUM_TEST_BATCH_MAX + 1)
    for r in recs:
        r.type = lib.DEEPUM_REC_ALLOC
    addr = klib.address(recs)
    assert errno_of(ctx, "TEST_INJECT", records=addr, count=lib.DEEPUM_TEST_BATCH_MAX + 1) == errno.EINVAL
    assert errno_of(ctx, "TEST_INJECT", records=addr, count=2**32 - 1) == errno.EINVAL
    assert call(ctx, "TEST_INJECT", records=addr, count=lib.DEEPUM_TEST_BATCH_MAX).accepted == \
        lib.DEEPUM_TEST_BATCH_MAX


MALFORMED = [
    ("unknown type", dict(type=lib.DEEPUM_REC_TYPE_MAX + 1)),
    ("type zero", dict(type=0)),
    ("launch flags", dict(type=lib.DEEPUM_REC_LAUNCH, flags=1)),
    ("fault flags", dict(type=lib.DEEPUM_REC_FAULT, addr=BLOCK, flags=lib.DEEPUM_FAULT_F_ALL + 1)),
    ("fault access", dict(type=lib.DEEPUM_REC_FAULT, addr=BLOCK, aux=lib.DEEPUM_ACCESS_PREFETCH + 1)),
    ("fault in block 0", dict(type=lib.DEEPUM_REC_FAULT, addr=BLOCK - 1)),
    ("free wraps", dict(type=lib.DEEPUM_REC_FREE, addr=2**64 - BLOCK, len=BLOCK)),
    ("alloc flags", dict(type=lib.DEEPUM_REC_ALLOC, flags=1)),
    ("iteration flags", dict(type=lib.DEEPUM_REC_ITERATION, flags=lib.DEEPUM_ITER_F_ALL + 1)),
]


@pytest.mark.parametrize("fields", [f for _, f in MALFORMED], ids=[n for n, _ in MALFORMED])
def test_inject_malformed_refuses_batch(ctx: int, fields: dict) -> None:
    good = klib.record(lib.DEEPUM_REC_LAUNCH, exec_id=1)
    bad = klib.record(fields["type"], **{k: v for k, v in fields.items() if k != "type"})
    recs = klib.records(good, good, bad, good)
    assert errno_of(ctx, "TEST_INJECT", records=klib.address(recs), count=4) == errno.EINVAL
    klib.drain_all(ctx)
    assert klib.stats(ctx).records == 0, "part of a refused batch was queued"


def test_drain_limits(ctx: int) -> None:
    out = ffi.new("struct deepum_cmd[]", 1)
    addr = klib.address(out)
    assert errno_of(ctx, "TEST_DRAIN", cmds=addr, max=lib.DEEPUM_TEST_BATCH_MAX + 1) == errno.EINVAL
    assert errno_of(ctx, "TEST_DRAIN", cmds=addr, max=0, flags=lib.DEEPUM_DRAIN_F_WAIT << 1) == errno.EINVAL
    assert call(ctx, "TEST_DRAIN", cmds=addr, max=0).count == 0


# ---- user pointers -----------------------------------------------------------

BAD_ADDRS = [0, 8, 0xFFFF_FFFF_FFFF_F000]


@pytest.mark.parametrize("addr", BAD_ADDRS, ids=["null", "low", "kernel"])
@pytest.mark.parametrize("name", NOT_API)
def test_bad_argument_pointer(hs: int, name: str, addr: int) -> None:
    fd = file_for(name, hs)
    assert klib.raw_ioctl(fd, klib.cmd(name), addr) == errno.EFAULT


@pytest.mark.parametrize("name", ["ATTACH", "CONFIG", "GET_CONFIG", "STATS", "TEST_INJECT", "TEST_DRAIN"])
def test_unwritable_argument(hs: int, name: str, tmp_path: Any) -> None:
    """A valid request whose answer cannot be written back: EFAULT on the way out."""
    fd = file_for(name, hs)
    path = tmp_path / name
    path.write_bytes(bytes(ffi.buffer(new(name, VALID[name]))))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        with ffi.from_buffer(m) as p:
            assert klib.raw_ioctl(fd, klib.cmd(name), klib.address(p)) == errno.EFAULT


@pytest.mark.parametrize("addr", BAD_ADDRS, ids=["null", "low", "kernel"])
def test_inject_bad_records_pointer(ctx: int, addr: int) -> None:
    assert errno_of(ctx, "TEST_INJECT", records=addr, count=1) == errno.EFAULT
    assert errno_of(ctx, "TEST_INJECT", records=addr, count=0) == 0  # nothing to read


def test_inject_records_past_mapping(ctx: int) -> None:
    """A batch whose last record lies in an inaccessible page: EFAULT, nothing queued."""
    page, size = mmap.PAGESIZE, ffi.sizeof("struct deepum_record")
    libc = ctypes.CDLL(None, use_errno=True)
    with mmap.mmap(-1, 2 * page) as m:
        with ffi.from_buffer(m) as p:
            first = klib.address(p) + page - size
            ffi.cast("struct deepum_record *", first).type = lib.DEEPUM_REC_LAUNCH
            assert libc.mprotect(ctypes.c_void_p(klib.address(p) + page), page, 0) == 0  # PROT_NONE
            assert errno_of(ctx, "TEST_INJECT", records=first, count=2) == errno.EFAULT
            assert errno_of(ctx, "TEST_INJECT", records=first, count=1) == 0
    klib.drain_all(ctx)
    assert klib.stats(ctx).records == 1


@pytest.mark.parametrize("addr", BAD_ADDRS, ids=["null", "low", "kernel"])
def test_drain_bad_pointer_keeps_commands(ctx: int, addr: int) -> None:
    """A drain that cannot write its commands consumes none of them."""
    klib.inject(ctx, klib.records(klib.record(lib.DEEPUM_REC_FAULT, addr=BLOCK * 5, exec_id=1),
                                  klib.record(lib.DEEPUM_REC_FREE, addr=0, len=BLOCK * 64)))
    assert errno_of(ctx, "TEST_DRAIN", cmds=addr, max=16, flags=lib.DEEPUM_DRAIN_F_WAIT) == errno.EFAULT
    cmds = klib.drain_all(ctx)
    assert len(cmds) == ffi.sizeof("struct deepum_cmd"), "the DISCARD of block 5 was lost"
    cmd = ffi.cast("struct deepum_cmd *", ffi.from_buffer(cmds))
    assert cmd.op == lib.DEEPUM_CMD_DISCARD and cmd.addr == BLOCK * 5


# ---- commands and struct sizes ---------------------------------------------


def test_unknown_numbers() -> None:
    known = {nr(name) for name in STRUCTS}
    fd = klib.open_dev()
    try:
        klib.handshake(fd)
        buf = bytearray(64)
        for number in range(256):
            if number not in known:
                assert errno_of(fd, "API", buf, command=ioc(RW, number, 64)) == errno.ENOTTY, number
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", NOT_API)
def test_wrong_direction(ctx: int, name: str) -> None:
    right = klib.direction(klib.cmd(name))
    for d in {lib._IOC_NONE, lib._IOC_READ, lib._IOC_WRITE, RW} - {right}:
        command = ioc(d, nr(name), klib.size_of(klib.cmd(name)))
        assert errno_of(ctx, name, command=command) == errno.ENOTTY


@pytest.mark.parametrize("name", NOT_API)
def test_longer_struct(hs: int, name: str) -> None:
    """A newer caller's longer struct: a zero tail is fine and left alone,
    a non-zero one asks for something this module does not know."""
    fd = file_for(name, hs)
    size = ffi.sizeof(STRUCTS[name])
    command = ioc(klib.direction(klib.cmd(name)), nr(name), size + 16)
    buf = bytearray(ffi.buffer(new(name, VALID[name]))) + bytes(16)
    buf[-1] = 1
    assert errno_of(fd, name, buf, command=command) == errno.E2BIG
    buf[-1] = 0
    assert errno_of(fd, name, buf, command=command) == ANSWER.get(name, 0)
    assert buf[size:] == bytes(16)


def test_shorter_stats_struct(hs: int) -> None:
    """An older caller's STATS struct, ending before the pipeline counters:
    it gets what it knows, and nothing past its end is written."""
    size = ffi.offsetof("struct deepum_stats_req", "stats") + ffi.offsetof("struct deepum_stats", "records_dropped")
    guard = b"\xa5" * 32
    buf = bytearray(ffi.buffer(new("STATS", {"scope": GLOBAL}))[:size]) + guard
    assert errno_of(hs, "STATS", buf, command=ioc(RW, nr("STATS"), size)) == 0
    assert buf[size:] == guard
    full = klib.stats(hs, GLOBAL)
    short = ffi.cast("struct deepum_stats_req *", ffi.from_buffer(buf))
    assert short.stats.records <= full.records


def test_shorter_config_struct(ctx: int) -> None:
    """An older caller's CONFIG, ending before capacity_blocks: the rest
    reads as zero, i.e. defaults."""
    size = ffi.offsetof("struct deepum_config_req", "config") + ffi.offsetof("struct deepum_config", "capacity_blocks")
    req = klib.config_req(CONTEXT, corr_ways=2, capacity_blocks=123)
    buf = bytearray(ffi.buffer(req)[:size])
    assert errno_of(ctx, "CONFIG", buf, command=ioc(RW, nr("CONFIG"), size)) == 0
    got = klib.get_config(ctx, CONTEXT)
    assert got.corr_ways == 2 and got.capacity_blocks == 0


def test_empty_struct(hs: int) -> None:
    """Size 0: every field zero.  For STATS that is the CONTEXT scope."""
    assert errno_of(hs, "STATS", bytearray(0), command=ioc(RW, nr("STATS"), 0)) == errno.ENOTCONN


def test_outputs_are_cleared(ctx: int) -> None:
    """Output-only fields come back as the module wrote them, whatever went in."""
    arg = new("STATS", {"scope": CONTEXT})
    ffi.memmove(ffi.addressof(arg.stats), b"\xff" * ffi.sizeof("struct deepum_stats"),
                ffi.sizeof("struct deepum_stats"))
    call(ctx, "STATS", arg)
    fields = [name for name, _ in ffi.typeof("struct deepum_stats").fields]
    assert [getattr(arg.stats, name) for name in fields] == [0] * len(fields)  # a fresh context
