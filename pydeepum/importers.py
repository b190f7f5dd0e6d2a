"""Turn traces taken by other tools into deepum traces.

Three inputs are understood:

* the CUPTI capture format of the project's reference traces (one record per
  line, first field the type: M iteration marker, K kernel, U unified-memory
  counter, A/F managed allocation/free; see docs/TRACE_FORMAT.md), also
  written by libdeepum's tracer (userlib/trace.c), which adds L lines (the
  launches it intercepted, with their true exec IDs), X lines (CUPTI's
  correlation of each launch to its kernel record), an explicit flush flag on
  M lines, timestamps on A/F lines, and E lines when it failed;
* plain CUPTI Unified Memory counter exports, a CSV with the header
  ``counterKind,value,start,end,address,flags,srcId``
  (CUpti_ActivityUnifiedMemoryCounter's fields);
* the user-mode engine's log (DEEPUM_ENGINE_LOG, userlib/README.md): the
  launches, faults and iteration marks exactly as the engine fed them to its
  core, in order, attributed as it attributed them.  Under a budget this is
  the live fault stream (re-faults of evicted blocks included), which an
  access-set capture does not have; its prefetch and evict lines are the
  engine's output and are left out.

Block accesses come from both GPU page-fault records (counterKind 4) and
host-to-device transfers (counterKind 1): fault records name only part of the
blocks that moved, the transfers name all of them.  Each access is attributed
to the kernel running at its timestamp.

Exec IDs.  With L lines they are libdeepum's own, and each launch is joined
to its kernel through X lines (launch -> CUPTI correlation ID -> kernel).
Without them (a capture taken with CUPTI alone): CUPTI records no kernel
arguments, which are half of what DeepUM's exec ID hashes (libdeepum hashes
the pointer arguments).  The importer stands in for them with the kernel's
ordinal among launches of the same name and shape since the last iteration
marker: in a training loop, the n-th launch of a kernel in an iteration is
the one with the n-th set of tensors.  So exec ID = dense number of (name,
grid, block, ordinal).  Either way, attribution is the same code: each UM
record belongs to the kernel running at its timestamp, and that kernel's
launch gives the exec ID.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._lowlevel import constant
from .config import as_the_engine_ran
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
    TRACE_PER_LAUNCH,
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


def _record_lines(path: Path, progress: Progress | None) -> Iterator[tuple[str, str]]:
    """("file:line", text) of each non-empty line, counting progress."""
    for number, line in _lines(path):
        if progress and number % 100_000 == 0:
            progress(100_000)
        if line:
            yield f"{path.name}:{number}", line


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


@dataclass
class _Capture:
    """A capture's lines, parsed, not yet joined."""

    kernels: list[tuple[int, int, int, int, tuple[int, ...], str]] = field(default_factory=list)
    """start, end, stream, correlation ID, grid + block, name"""
    um: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    """start, counter kind, value, address, flags"""
    markers: list[tuple[int, int, int | None]] = field(default_factory=list)
    """ts, index, flags (None: infer FLUSHED from host-bound user migrations)"""
    ranges: list[tuple[int, int, int, int]] = field(default_factory=list)
    """ts, ALLOC or FREE, address, size"""
    launches: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    """libdeepum's: ts, external ID, exec ID, name hash, stream slot, CUPTI stream (None: unknown)"""
    launch_of_correlation: dict[int, int] = field(default_factory=dict)
    """CUPTI correlation ID -> external ID (the launch that made that call)"""
    per_launch: bool = False
    """the tracer moved each launch's blocks back to the host after it ("O,per-launch")"""
    faults: str | None = None
    """where the tracer took UM records from ("O,faults=uvm-tools" or "=cupti"); None: not said"""


def _fields(line: str, where: str, counts: tuple[int, ...], maxsplit: int = -1) -> list[str]:
    f = line.split(",", maxsplit)
    if len(f) not in counts:
        want = " or ".join(str(n) for n in counts)
        raise TraceFormatError(f"{where}: {line[0]} record needs {want} fields, has {len(f)}")
    return f


def _parse_capture(path: Path, progress: Progress | None) -> _Capture:
    c = _Capture()
    last_marker_ts = 0
    for where, line in _record_lines(path, progress):
        kind = line[0]
        if kind == "U":
            f = _fields(line, where, (7,))
            c.um.append((_int(f[3], 10, where), _int(f[1], 10, where), _int(f[2], 10, where),
                         _int(f[5], 16, where), _int(f[6], 10, where)))
        elif kind == "K":
            f = _fields(line, where, (12,), 11)
            c.kernels.append((_int(f[1], 10, where), _int(f[2], 10, where), _int(f[3], 10, where),
                              _int(f[4], 10, where), tuple(_int(x, 10, where) for x in f[5:11]), f[11]))
        elif kind == "L":
            f = _fields(line, where, (6, 7))
            stream = _int(f[6], 10, where) if len(f) == 7 else None
            c.launches.append((_int(f[5], 10, where), _int(f[1], 10, where), _int(f[2], 10, where),
                               _int(f[3], 16, where), _int(f[4], 10, where), stream))
        elif kind == "X":
            f = _fields(line, where, (3,))
            c.launch_of_correlation[_int(f[2], 10, where)] = _int(f[1], 10, where)
        elif kind == "M":
            f = _fields(line, where, (3, 4))
            last_marker_ts = _int(f[2], 10, where)
            said = _int(f[3], 10, where) if len(f) == 4 else None
            c.markers.append((last_marker_ts, _int(f[1], 10, where), said))
        elif kind in "AF":
            f = _fields(line, where, (3, 4))
            ts = _int(f[3], 10, where) if len(f) == 4 else last_marker_ts
            c.ranges.append((ts, ALLOC if kind == "A" else FREE, _int(f[1], 16, where), _int(f[2], 10, where)))
        elif kind == "O":
            if line == "O,per-launch":
                c.per_launch = True
            elif line in ("O,faults=uvm-tools", "O,faults=cupti"):
                c.faults = line.partition("=")[2]
            else:
                raise TraceFormatError(f"{where}: unknown capture option {line[2:]!r}")
        elif kind == "E":
            raise TraceFormatError(f"{path}: the tracer failed: {line[2:]}")
        else:
            raise TraceFormatError(f"{where}: unknown record type {kind!r}")
    if not c.kernels:
        raise TraceFormatError(f"{path}: no kernel (K) records: not a CUPTI capture")
    if not c.markers:
        raise TraceFormatError(f"{path}: no iteration (M) markers")
    return c


def _ordinal_exec_ids(b: _Builder, c: _Capture, marker_ts: list[int]) -> tuple[list[int], list[list]]:
    """Without libdeepum's launches: one LAUNCH per kernel, exec ID = (name,
    shape, ordinal of that name and shape in the iteration).  Returns each
    kernel's exec ID and the exec IDs' descriptions."""
    exec_ids: dict[tuple, int] = {}
    names: list[list] = []
    ordinal: dict[tuple, int] = {}
    iteration = -1
    kernel_exec = []
    for start, end, stream, _, shape, name in c.kernels:
        it = bisect.bisect_right(marker_ts, start)
        if it != iteration:
            iteration, ordinal = it, {}
        key = (name, shape)
        n = ordinal.get(key, 0)
        ordinal[key] = n + 1
        eid = exec_ids.setdefault(key + (n,), len(exec_ids))
        if eid == len(names):
            names.append([name, list(shape[:3]), list(shape[3:]), n])
        kernel_exec.append(eid)
        b.add(LAUNCH, start, name_hash(name), end - start, eid, stream)
    return kernel_exec, names


def _match_launches(c: _Capture) -> dict[int, int]:
    """External launch ID -> index of its kernel record.  CUPTI's correlation
    records first; then, per CUPTI stream, the remaining launches and kernels
    in order, skipping kernels that started before the launch was made (they
    were not libdeepum's: graph replays, other libraries' launches)."""
    kernel_of_launch = {}
    for j, (_, _, _, correlation, _, _) in enumerate(c.kernels):
        external = c.launch_of_correlation.get(correlation)
        if external is not None:
            kernel_of_launch[external] = j
    taken = set(kernel_of_launch.values())
    kernels_by_stream: dict[int, list[int]] = {}
    for j in sorted(range(len(c.kernels)), key=lambda j: c.kernels[j][0]):
        if j not in taken:
            kernels_by_stream.setdefault(c.kernels[j][2], []).append(j)
    cursor = {stream: 0 for stream in kernels_by_stream}
    for ts, external, _, _, _, stream in c.launches:
        if external in kernel_of_launch or stream not in kernels_by_stream:
            continue
        queue, i = kernels_by_stream[stream], cursor[stream]
        while i < len(queue) and c.kernels[queue[i]][0] < ts:
            i += 1
        if i < len(queue):
            kernel_of_launch[external] = queue[i]
            i += 1
        cursor[stream] = i
    return kernel_of_launch


def _launch_exec_ids(b: _Builder, c: _Capture) -> tuple[list[int], list[list | None], int]:
    """With libdeepum's launches: their own exec IDs, each LAUNCH at its
    kernel's start with its duration (at the interception time, 0 long, when
    CUPTI reported no kernel for it).  Returns each kernel's exec ID
    (EXEC_NONE for kernels libdeepum never saw), the exec IDs' descriptions
    and how many launches found their kernel."""
    kernel_of_launch = _match_launches(c)
    kernel_exec = [EXEC_NONE] * len(c.kernels)
    names: list[list | None] = []
    matched = 0
    for ts, external, eid, hashed, slot, _ in c.launches:
        j = kernel_of_launch.get(external)
        if j is None:
            b.add(LAUNCH, ts, hashed, 0, eid, slot)
            continue
        start, end, _, _, shape, name = c.kernels[j]
        matched += 1
        kernel_exec[j] = eid
        b.add(LAUNCH, start, hashed, end - start, eid, slot)
        if eid != EXEC_NONE:
            names.extend([None] * (eid + 1 - len(names)))
            names[eid] = names[eid] or [name, list(shape[:3]), list(shape[3:]), None]
    return kernel_exec, names, matched


def import_cupti_capture(path: str | Path, block_shift: int = 21,
                         progress: Progress | None = None) -> Trace:
    """Read a CUPTI capture (M/K/U/A/F lines, and libdeepum's L/X lines when
    its tracer wrote it) into a Trace."""
    path = Path(path)
    c = _parse_capture(path, progress)
    c.kernels.sort()
    c.markers.sort()
    marker_ts = [ts for ts, _, _ in c.markers]
    # The last marker closes the trace: what follows is no iteration's.
    closing = marker_ts[-1]
    c.kernels = [k for k in c.kernels if k[0] <= closing]
    c.launches = [launch for launch in c.launches if launch[0] <= closing]
    b = _Builder()

    # Access-set flushes: said by the tracer, or host-bound user migrations before a marker.
    flushes = sorted(ts for ts, kind, _, _, cause in c.um if kind == UM_DTOH and cause == CAUSE_USER)
    prev = 0
    any_flush = False
    for i, (ts, index, said) in enumerate(c.markers):
        if said is None:
            flushed = bisect.bisect_left(flushes, ts) > bisect.bisect_left(flushes, prev)
        else:
            flushed = bool(said & ITER_FLUSHED)
        any_flush |= flushed
        flags = (ITER_FLUSHED if flushed else 0) | (ITER_END if i == len(c.markers) - 1 else 0)
        b.add(ITERATION, ts, aux=index, flags=flags)
        prev = ts
    for ts, rtype, addr, size in c.ranges:
        if ts <= closing:
            b.add(rtype, ts, addr, size)

    if c.launches:
        kernel_exec, names, matched = _launch_exec_ids(b, c)
        source_format = "deepum-tracer"
        key = "libdeepum: kernel name, grid, block, dynamic shared memory, pointer arguments"
    else:
        kernel_exec, names = _ordinal_exec_ids(b, c, marker_ts)
        source_format = "cupti-capture"
        key = "kernel name, grid, block, ordinal of that name and shape in the iteration"

    # One access per (launch, block), at its first record, with the bytes
    # all of that launch's records moved in the block.
    starts = [k[0] for k in c.kernels]
    first: dict[tuple[int, int], list] = {}
    for ts, kind, value, addr, flags in sorted(c.um):
        if ts > closing:
            break
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
        b.add(FAULT, ts, start, min(moved, block), kernel_exec[j], access, rflags)

    meta: dict = {
        "source": {"format": source_format, "file": path.name, "sha256": _sha256(path)},
        "exec_id_key": key,
        "kernels": names,
    }
    if c.faults:
        meta["source"]["faults"] = c.faults
    if c.launches:
        meta["source"].update(launches=len(c.launches), launches_matched=matched,
                              kernels=len(c.kernels), kernels_without_exec_id=kernel_exec.count(EXEC_NONE))
    return Trace(records=b.records(), block_shift=block_shift,
                 flags=(TRACE_ACCESS_SET if any_flush else 0) | (TRACE_PER_LAUNCH if c.per_launch else 0), meta=meta)


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


_ENGINE_LOG_KINDS = ("config", "iteration", "launch", "fault", "prefetch", "evict", "sweep", "issued", "landed")


def _engine_log_line(words: list[str], where: str) -> tuple[str, int, dict[str, str], list[str]]:
    """(kind, t, key=value words, other words) of one engine log line."""
    if not words or words[0] not in _ENGINE_LOG_KINDS or not words[-1].startswith("t="):
        raise TraceFormatError(f"{where}: not an engine log line (KIND ... t=<ns>)")
    keys = dict(w.split("=", 1) for w in words[1:-1] if "=" in w)
    return words[0], _int(words[-1][2:], 10, where), keys, [w for w in words[1:-1] if "=" not in w]


def import_engine_log(path: str | Path, block_shift: int = 21, progress: Progress | None = None) -> Trace:
    """Read a DEEPUM_ENGINE_LOG into a Trace: what the engine's core was fed."""
    path = Path(path)
    b = _Builder()
    iterations = 0
    last_ts = None
    config: dict[str, int] = {}
    for where, line in _record_lines(path, progress):
        kind, ts, keys, rest = _engine_log_line(line.split(), where)
        last_ts = ts
        if kind == "config":
            config = as_the_engine_ran({k: _int(v, 10, where) for k, v in keys.items()})
        elif kind == "iteration":
            b.add(ITERATION, ts, aux=_int(rest[0] if rest else "", 10, where))
            iterations += 1
        elif kind == "launch":
            b.add(LAUNCH, ts, exec_id=_int(keys.get("exec", ""), 10, where), aux=_int(keys.get("slot", ""), 10, where))
        elif kind == "fault":
            addr = _int(rest[0] if rest else "", 16, where)
            b.add(FAULT, ts, addr >> block_shift << block_shift, exec_id=_int(keys.get("exec", ""), 10, where))
    if last_ts is None:
        raise TraceFormatError(f"{path}: empty engine log")
    b.add(ITERATION, last_ts + 1, aux=iterations, flags=ITER_END)  # after the last record
    meta = {"source": {"format": "deepum-engine-log", "file": path.name, "sha256": _sha256(path)},
            "note": "the fault stream the user-mode engine fed its core (faults only: no access to resident blocks)"}
    if config:
        meta["core_config"] = config  # the engine's core (struct deepum_config), from the log's first line
    return Trace(records=b.records(), block_shift=block_shift, meta=meta)


def import_file(path: str | Path, block_shift: int = 21, progress: Progress | None = None) -> Trace:
    """Import any of the three, told apart by the first line."""
    path = Path(path)
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    for _, line in _lines(path):
        if line.replace(" ", "") == _UM_COUNTER_HEADER:
            return import_um_counters(path, block_shift, progress)
        if line.split()[:1] and line.split()[0] in _ENGINE_LOG_KINDS:
            return import_engine_log(path, block_shift, progress)
        return import_cupti_capture(path, block_shift, progress)
    raise TraceFormatError(f"{path}: empty file")
