"""Turn traces taken by other tools into deepum traces.

Two inputs are understood:

* the CUPTI capture format of the project's reference traces (one record per
  line, first field the type: M iteration marker, K kernel, U unified-memory
  counter, A/F managed allocation/free; see docs/TRACE_FORMAT.md);
* plain CUPTI Unified Memory counter exports, a CSV with the header
  ``counterKind,value,start,end,address,flags,srcId``
  (CUpti_ActivityUnifiedMemoryCounter's fields).

Block accesses come from both GPU page-fault records (counterKind 4) and
host-to-device transfers (counterKind 1): fault records name only part of the
blocks that moved, the transfers name all of them.  Each access is attributed
to the kernel running at its timestamp.

Exec IDs.  CUPTI records no kernel arguments, which are half of what DeepUM's
exec ID hashes (libdeepum hashes the argument bytes, pointers included).  The
importer stands in for them with the kernel's ordinal among launches of the
same name and shape since the last iteration marker: in a training loop,
the n-th launch of a kernel in an iteration is the one with the n-th set of
tensors.  So exec ID = dense number of (name, grid, block, ordinal).
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ._lowlevel import constant
from .errors import TraceFormatError
from .trace import (
    ALLOC,
    EXEC_NONE,
    FAULT,
    FREE,
    ITER_END,
    ITER_FLUSHED,
    ITERATION,
    LAUNCH,
    TRACE_ACCESS_SET,
    Trace,
    empty_records,
    name_hash,
)

UM_HTOD = 1  # CUpti_ActivityUnifiedMemoryCounterKind
UM_DTOH = 2
UM_GPU_PAGE_FAULT = 4
CAUSE_USER = 1  # CUpti_ActivityUnifiedMemoryMigrationCause
_MAX_ACCESS_TYPE = constant("DEEPUM_ACCESS_PREFETCH")
_FROM_TRANSFER = constant("DEEPUM_FAULT_F_FROM_TRANSFER")
_UM_COUNTER_HEADER = "counterKind,value,start,end,address,flags,srcId"

# Order of records that share a timestamp.
_ORDER = {ITERATION: 0, ALLOC: 1, FREE: 1, LAUNCH: 2, FAULT: 3}

Progress = Callable[[int], None]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                yield number, line.rstrip("\n")
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise TraceFormatError(f"{path}: unreadable: {e}") from None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Builder:
    """Collects records as tuples, then sorts them into a record array."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, int, int, int, int]] = []

    def add(self, rtype: int, ts: int, addr: int = 0, length: int = 0,
            exec_id: int = 0, aux: int = 0, flags: int = 0) -> None:
        self.rows.append((ts, _ORDER[rtype], len(self.rows), rtype, addr, length, exec_id, aux, flags))

    def records(self) -> np.ndarray:
        self.rows.sort()
        out = empty_records(len(self.rows))
        if self.rows:
            cols = list(zip(*self.rows))
            for name, col in zip(("ts", "type", "addr", "len", "exec_id", "aux", "flags"),
                                 (cols[0], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8])):
                out[name] = np.asarray(col, dtype=np.uint64)
        return out


def _um_accesses(block_shift: int, kind: int, value: int, addr: int,
                 flags: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(block, address, bytes moved, access type, record flags) of each block a
    transfer or page-fault counter record touched; nothing for other kinds."""
    if kind == UM_HTOD:
        nbytes, access, rflags = value, 0, _FROM_TRANSFER
    elif kind == UM_GPU_PAGE_FAULT:
        nbytes, access, rflags = 0, (flags if flags <= _MAX_ACCESS_TYPE else 0), 0
    else:
        return
    first, last = addr >> block_shift, (addr + max(nbytes, 1) - 1) >> block_shift
    for blk in range(first, last + 1):
        start = max(addr, blk << block_shift)
        moved = min(addr + nbytes, (blk + 1) << block_shift) - start if nbytes else 0
        yield blk, start, moved, access, rflags


def _int(text: str, base: int, where: str) -> int:
    try:
        value = int(text, base)
    except ValueError:
        raise TraceFormatError(f"{where}: {text!r} is not a number") from None
    if value < 0 or value >= 1 << 64:
        raise TraceFormatError(f"{where}: {text!r} is out of range")
    return value


def import_cupti_capture(path: str | Path, block_shift: int = 21,
                         progress: Progress | None = None) -> Trace:
    """Read a CUPTI capture (M/K/U/A/F lines) into a Trace."""
    path = Path(path)
    kernels: list[tuple[int, int, int, tuple[int, ...], str]] = []
    um: list[tuple[int, int, int, int, int]] = []
    markers: list[tuple[int, int]] = []
    ranges: list[tuple[int, int, int, int]] = []
    last_marker_ts = 0
    for number, line in _lines(path):
        if progress and number % 100_000 == 0:
            progress(100_000)
        if not line:
            continue
        where = f"{path.name}:{number}"
        kind = line[0]
        if kind == "U":
            f = line.split(",")
            if len(f) != 7:
                raise TraceFormatError(f"{where}: U record needs 7 fields, has {len(f)}")
            um.append((_int(f[3], 10, where), _int(f[1], 10, where), _int(f[2], 10, where),
                       _int(f[5], 16, where), _int(f[6], 10, where)))
        elif kind == "K":
            f = line.split(",", 11)
            if len(f) != 12:
                raise TraceFormatError(f"{where}: K record needs 12 fields, has {len(f)}")
            shape = tuple(_int(x, 10, where) for x in f[5:11])
            kernels.append((_int(f[1], 10, where), _int(f[2], 10, where), _int(f[3], 10, where),
                            shape, f[11]))
        elif kind == "M":
            f = line.split(",")
            if len(f) != 3:
                raise TraceFormatError(f"{where}: M record needs 3 fields, has {len(f)}")
            last_marker_ts = _int(f[2], 10, where)
            markers.append((last_marker_ts, _int(f[1], 10, where)))
        elif kind in "AF":
            f = line.split(",")
            if len(f) != 3:
                raise TraceFormatError(f"{where}: {kind} record needs 3 fields, has {len(f)}")
            ranges.append((last_marker_ts, ALLOC if kind == "A" else FREE,
                           _int(f[1], 16, where), _int(f[2], 10, where)))
        else:
            raise TraceFormatError(f"{where}: unknown record type {kind!r}")
    if not kernels:
        raise TraceFormatError(f"{path}: no kernel (K) records: not a CUPTI capture")
    if not markers:
        raise TraceFormatError(f"{path}: no iteration (M) markers")

    kernels.sort()
    markers.sort()
    b = _Builder()
    marker_ts = [ts for ts, _ in markers]

    # Access-set flushes: host-bound user migrations before a marker.
    flushes = sorted(ts for ts, kind, _, _, cause in um if kind == UM_DTOH and cause == CAUSE_USER)
    prev = 0
    any_flush = False
    for i, (ts, index) in enumerate(markers):
        flushed = bisect.bisect_left(flushes, ts) > bisect.bisect_left(flushes, prev)
        any_flush |= flushed
        flags = (ITER_FLUSHED if flushed else 0) | (ITER_END if i == len(markers) - 1 else 0)
        b.add(ITERATION, ts, aux=index, flags=flags)
        prev = ts
    for ts, rtype, addr, size in ranges:
        b.add(rtype, ts, addr, size)

    exec_ids: dict[tuple, int] = {}
    names: list[list] = []
    ordinal: dict[tuple, int] = {}
    iteration = -1
    launch_exec = []
    for start, end, stream, shape, name in kernels:
        it = bisect.bisect_right(marker_ts, start)
        if it != iteration:
            iteration, ordinal = it, {}
        key = (name, shape)
        n = ordinal.get(key, 0)
        ordinal[key] = n + 1
        eid = exec_ids.setdefault(key + (n,), len(exec_ids))
        if eid == len(names):
            names.append([name, list(shape[:3]), list(shape[3:]), n])
        launch_exec.append(eid)
        b.add(LAUNCH, start, name_hash(name), end - start, eid, stream)

    # One access per (launch, block), at its first record, with the bytes
    # all of that launch's records moved in the block.
    starts = [k[0] for k in kernels]
    first: dict[tuple[int, int], list] = {}
    for ts, kind, value, addr, flags in sorted(um):
        # The kernel running then; records just outside any kernel go to the
        # latest one started (or the first).
        j = max(bisect.bisect_right(starts, ts) - 1, 0)
        for blk, start, moved, access, rflags in _um_accesses(block_shift, kind, value, addr, flags):
            if (j, blk) in first:
                first[j, blk][3] += moved
            else:
                first[j, blk] = [ts, start, j, moved, access, rflags]
    block = 1 << block_shift
    for ts, start, j, moved, access, rflags in first.values():
        b.add(FAULT, ts, start, min(moved, block), launch_exec[j], access, rflags)

    meta = {
        "source": {"format": "cupti-capture", "file": path.name, "sha256": _sha256(path)},
        "exec_id_key": "kernel name, grid, block, ordinal of that name and shape in the iteration",
        "kernels": names,
    }
    return Trace(records=b.records(), block_shift=block_shift,
                 flags=TRACE_ACCESS_SET if any_flush else 0, meta=meta)


def import_um_counters(path: str | Path, block_shift: int = 21,
                       progress: Progress | None = None) -> Trace:
    """Read a CUPTI Unified Memory counter CSV into a Trace (no exec IDs)."""
    path = Path(path)
    b = _Builder()
    first_ts = last_ts = None
    prev_blk = None
    rows = []
    for number, line in _lines(path):
        if progress and number % 100_000 == 0:
            progress(100_000)
        if number == 1:
            if line.replace(" ", "") != _UM_COUNTER_HEADER:
                raise TraceFormatError(f"{path}: first line must be {_UM_COUNTER_HEADER!r}")
            continue
        if not line:
            continue
        where = f"{path.name}:{number}"
        f = line.split(",")
        if len(f) != 7:
            raise TraceFormatError(f"{where}: needs 7 fields, has {len(f)}")
        kind, value, start = _int(f[0], 10, where), _int(f[1], 10, where), _int(f[2], 10, where)
        addr, flags = _int(f[4], 0, where), _int(f[5], 10, where)
        rows.append((start, kind, value, addr, flags))
    # Without kernels, only back-to-back records of one block are merged.
    for start, kind, value, addr, flags in sorted(rows):
        first_ts = start if first_ts is None else first_ts
        last_ts = start
        for blk, where, moved, access, rflags in _um_accesses(block_shift, kind, value, addr, flags):
            if blk != prev_blk:
                b.add(FAULT, start, where, moved, EXEC_NONE, access, rflags)
                prev_blk = blk
    if first_ts is None:
        raise TraceFormatError(f"{path}: no counter records")
    b.add(ITERATION, first_ts, aux=0)
    b.add(ITERATION, last_ts, aux=1, flags=ITER_END)
    meta = {"source": {"format": "cupti-um-counters", "file": path.name, "sha256": _sha256(path)}}
    return Trace(records=b.records(), block_shift=block_shift, meta=meta)


def import_file(path: str | Path, block_shift: int = 21, progress: Progress | None = None) -> Trace:
    """Import either format, told apart by the first line."""
    path = Path(path)
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    for _, line in _lines(path):
        if line.replace(" ", "") == _UM_COUNTER_HEADER:
            return import_um_counters(path, block_shift, progress)
        return import_cupti_capture(path, block_shift, progress)
    raise TraceFormatError(f"{path}: empty file")
