"""deepum trace files (.dut): read, write, inspect.

Layout (docs/TRACE_FORMAT.md): struct deepum_trace_header, record_count
struct deepum_record, then meta_len bytes of UTF-8 JSON.  Little-endian.
A file may be gzip-compressed as a whole (.dut.gz).  The numpy dtypes come
from the compiled UAPI header.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ._lowlevel import constant, detect_iterations, ffi, lib, struct_dtype
from .errors import DeepumInputError, TraceFormatError

RECORD_DTYPE = struct_dtype("deepum_record")
HEADER_DTYPE = struct_dtype("deepum_trace_header")

LAUNCH = constant("DEEPUM_REC_LAUNCH")
FAULT = constant("DEEPUM_REC_FAULT")
ALLOC = constant("DEEPUM_REC_ALLOC")
FREE = constant("DEEPUM_REC_FREE")
ITERATION = constant("DEEPUM_REC_ITERATION")
RECORD_TYPES = {LAUNCH: "launch", FAULT: "fault", ALLOC: "alloc", FREE: "free", ITERATION: "iteration"}

EXEC_NONE = constant("DEEPUM_EXEC_NONE")
ITER_FLUSHED = constant("DEEPUM_ITER_F_FLUSHED")
ITER_END = constant("DEEPUM_ITER_F_END")
TRACE_ACCESS_SET = constant("DEEPUM_TRACE_F_ACCESS_SET")
TRACE_SYNTHETIC = constant("DEEPUM_TRACE_F_SYNTHETIC")
TRACE_PER_LAUNCH = constant("DEEPUM_TRACE_F_PER_LAUNCH")

_MAGIC = constant("DEEPUM_TRACE_MAGIC")
_VERSION = constant("DEEPUM_TRACE_VERSION")
_GZIP_MAGIC = b"\x1f\x8b"
# Metadata is descriptive; a claim beyond this is a corrupt header, not a big trace.
_META_MAX = 256 << 20


def name_hash(name: str) -> int:
    """The kernel-name hash LAUNCH records carry (the core's deepum_hash_bytes,
    which libdeepum uses too)."""
    data = name.encode()
    return int(lib.deepum_hash_bytes(lib.DEEPUM_HASH_INIT, ffi.from_buffer(data), len(data)))


def empty_records(n: int) -> np.ndarray:
    return np.zeros(n, dtype=RECORD_DTYPE)


@dataclass
class Trace:
    """A trace in memory: records plus the header fields that describe them."""

    records: np.ndarray
    block_shift: int = constant("DEEPUM_DEFAULT_BLOCK_SHIFT")
    flags: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.records.dtype != RECORD_DTYPE:
            raise TypeError("records must have pydeepum.trace.RECORD_DTYPE")

    @property
    def block_size(self) -> int:
        return 1 << self.block_shift

    @property
    def access_set(self) -> bool:
        return bool(self.flags & TRACE_ACCESS_SET)

    @property
    def per_launch(self) -> bool:
        """Every launch's accesses, not only each iteration's first touches."""
        return bool(self.flags & TRACE_PER_LAUNCH)

    @property
    def lists_every_access(self) -> bool:
        """Per-launch or generated; a capture otherwise lists what faulted, so a
        block used again within an iteration after it left the GPU is not in it."""
        return bool(self.flags & (TRACE_PER_LAUNCH | TRACE_SYNTHETIC))

    def counts(self) -> dict[str, int]:
        kinds, n = np.unique(self.records["type"], return_counts=True)
        out = {name: 0 for name in RECORD_TYPES.values()}
        for k, c in zip(kinds.tolist(), n.tolist()):
            out[RECORD_TYPES.get(k, f"type{k}")] = c
        return out

    def iteration_bounds(self) -> list[tuple[int, int, int]]:
        """(iteration index, first record, end record) of each iteration:
        from an ITERATION record up to the next one."""
        marks = np.flatnonzero(self.records["type"] == ITERATION)
        bounds = []
        for i, start in enumerate(marks):
            rec = self.records[start]
            if rec["flags"] & ITER_END:
                continue
            end = marks[i + 1] if i + 1 < len(marks) else len(self.records)
            bounds.append((int(rec["aux"]), int(start), int(end)))
        return bounds

    def iteration_summary(self) -> list[dict[str, int]]:
        """Per iteration: its index, LAUNCH and FAULT records, launches whose
        exec ID no earlier iteration launched (a program whose tensors still
        move; all of the first's), distinct blocks faulted and bytes moved
        (FAULT lengths summed)."""
        out, launched = [], np.empty(0, dtype=self.records["exec_id"].dtype)
        for index, start, end in self.iteration_bounds():
            records = self.records[start:end]
            faults = records[records["type"] == FAULT]
            execs = records["exec_id"][records["type"] == LAUNCH]
            out.append({"iteration": index, "launches": len(execs),
                        "new_exec_ids": int((~np.isin(execs, launched)).sum()),
                        "faults": len(faults), "blocks": len(np.unique(faults["addr"] >> np.uint64(self.block_shift))),
                        "bytes": int(faults["len"].sum())})
            launched = np.union1d(launched, execs)
        return out

    def without_flushes(self) -> "Trace":
        """The same accesses with memory staying on the GPU across iteration
        boundaries, as in training: an access-set trace's flushes (every
        iteration starting with nothing resident, its data moved back for
        free) removed.  Each iteration still lists only first touches."""
        records = self.records.copy()
        marks = records["type"] == ITERATION
        records["flags"][marks] &= np.uint32(~ITER_FLUSHED & 0xFFFFFFFF)
        return dataclasses.replace(self, records=records, meta=dict(self.meta))

    def with_last_iteration_repeated(self, copies: int) -> "Trace":
        """The trace with its last iteration played @copies more times, each
        shifted by that iteration's length: what a longer capture of a loop
        that no longer changes would hold, to see where learning settles
        when the capture ends before it does (a per-launch capture of GPT-2
        XL takes 75 s per iteration on the H200).  It is an extrapolation,
        and says so in meta["extended"]; exec IDs new in that iteration are
        known in its copies, so it is optimistic where they change."""
        if copies < 1:
            raise DeepumInputError(f"repeat the last iteration at least once, not {copies}")
        bounds = self.iteration_bounds()
        if not bounds:
            raise DeepumInputError("the trace has no iteration to repeat")
        index, start, end = bounds[-1]
        body, closing = self.records[start:end], self.records[end:]
        if np.isin(body["type"], (ALLOC, FREE)).any():
            raise DeepumInputError(f"iteration {index} allocates or frees memory: its copies would do it again")
        span = (int(closing["ts"][0]) if len(closing) else int(body["ts"][-1]) + 1) - int(body["ts"][0])
        parts = [self.records[:end]]
        for k in range(1, copies + 1):
            copy = body.copy()
            copy["ts"] += np.uint64(k * span)
            copy["aux"][copy["type"] == ITERATION] = index + k
            parts.append(copy)
        tail = closing.copy()
        tail["ts"] += np.uint64(copies * span)
        tail["aux"][tail["type"] == ITERATION] += np.uint64(copies)
        parts.append(tail)
        meta = dict(self.meta)
        meta["extended"] = {"captured_iterations": len(bounds), "last_repeated": copies,
                            "note": "iterations after the captured ones are copies of the last captured one"}
        return dataclasses.replace(self, records=np.concatenate(parts), meta=meta)

    def with_detected_marks(self, exec_max: int = constant("DEEPUM_CFG_EXEC_MAX_DEFAULT")) -> "Trace":
        """The trace as if the program marked no iteration: its marks taken
        out, and one put before every launch where libdeepum's iteration
        detector (sized for @exec_max exec IDs, as the engine's configuration
        is) finds that an iteration begins.  The launches before the first
        detected mark are iteration 0; the last detected mark closes the
        trace, as a capture ends at a mark (what follows it, an iteration
        not seen to its end, is left out).  On the H200 traces the detector
        marks from the program's fourth iteration on (tests/test_iterations.py),
        not always before the launch the program marked."""
        records = self.records
        is_mark = records["type"] == ITERATION
        if (records["flags"][is_mark] & ITER_FLUSHED).any():
            raise DeepumInputError("the trace moves everything to the host at its marks (an access-set capture): "
                                   "keep memory resident across iterations first (--keep-resident)")
        launches = np.flatnonzero((records["type"] == LAUNCH) & (records["exec_id"] != EXEC_NONE))
        before = launches[detect_iterations(records["exec_id"][launches], exec_max)]
        if len(before) < 2:
            raise DeepumInputError(f"libdeepum's iteration detector found {len(before)} iteration marks in "
                                   f"{len(launches)} launches: not a whole iteration to simulate")
        marks = empty_records(len(before))
        marks["type"] = ITERATION
        marks["ts"] = records["ts"][before]
        marks["aux"] = np.arange(1, len(before) + 1)
        marks["flags"][-1] = ITER_END
        kept = ~is_mark[: before[-1]]
        out = np.insert(records[: before[-1]][kept], np.searchsorted(np.flatnonzero(kept), before[:-1]), marks[:-1])
        out = np.concatenate([out, marks[-1:]])
        meta = dict(self.meta)
        meta["marks_detected"] = {"program_marks": int((is_mark & ~(records["flags"] & ITER_END).astype(bool)).sum()),
                                  "detected_marks": len(before), "exec_max": exec_max,
                                  "note": "the program's marks replaced by libdeepum's iteration detector's"}
        return dataclasses.replace(self, records=out, meta=meta)

    def fault_blocks(self) -> np.ndarray:
        """Block number of every FAULT record, in order."""
        faults = self.records[self.records["type"] == FAULT]
        return faults["addr"] >> np.uint64(self.block_shift)

    # ---- files -----------------------------------------------------------

    def write(self, path: str | Path) -> None:
        """Write atomically; gzip when the name ends in .gz."""
        path = Path(path)
        meta = json.dumps(self.meta, sort_keys=True, indent=1).encode()
        header = np.zeros(1, dtype=HEADER_DTYPE)
        header["magic"] = _MAGIC
        header["version"] = _VERSION
        header["header_size"] = HEADER_DTYPE.itemsize
        header["record_size"] = RECORD_DTYPE.itemsize
        header["record_count"] = len(self.records)
        header["block_shift"] = self.block_shift
        header["flags"] = self.flags
        header["meta_len"] = len(meta)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as raw:
            # mtime=0: the same trace always compresses to the same bytes.
            f = gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
            f.write(header.tobytes())
            f.write(np.ascontiguousarray(self.records).tobytes())
            f.write(meta)
            if f is not raw:
                f.close()
        tmp.replace(path)

    @classmethod
    def read(cls, path: str | Path) -> "Trace":
        path = Path(path)
        try:
            with open(path, "rb") as raw:
                magic = raw.read(2)
                raw.seek(0)
                if magic == _GZIP_MAGIC:
                    with gzip.open(raw) as f:
                        return cls._parse(f, str(path))
                return cls._parse(raw, str(path))
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            if isinstance(e, FileNotFoundError | IsADirectoryError | PermissionError):
                raise TraceFormatError(f"{path}: {e.strerror}") from None
            raise TraceFormatError(f"{path}: unreadable: {e}") from None

    @classmethod
    def _parse(cls, f: BinaryIO, name: str) -> "Trace":
        head = f.read(HEADER_DTYPE.itemsize)
        if len(head) < 8:
            raise TraceFormatError(f"{name}: too short to be a deepum trace")
        fixed = np.frombuffer(head[:8], dtype="<u4")
        if int(fixed[0]) != _MAGIC:
            raise TraceFormatError(f"{name}: not a deepum trace (bad magic 0x{int(fixed[0]):08x})")
        if int(fixed[1]) != _VERSION:
            raise TraceFormatError(
                f"{name}: trace format version {int(fixed[1])}; this deepum reads version {_VERSION}"
            )
        if len(head) < HEADER_DTYPE.itemsize:
            raise TraceFormatError(f"{name}: truncated header")
        h = np.frombuffer(head, dtype=HEADER_DTYPE)[0]
        if int(h["header_size"]) != HEADER_DTYPE.itemsize or int(h["record_size"]) != RECORD_DTYPE.itemsize:
            raise TraceFormatError(
                f"{name}: header/record size {int(h['header_size'])}/{int(h['record_size'])},"
                f" expected {HEADER_DTYPE.itemsize}/{RECORD_DTYPE.itemsize}"
            )
        shift = int(h["block_shift"])
        lo, hi = constant("DEEPUM_CFG_BLOCK_SHIFT_MIN"), constant("DEEPUM_CFG_BLOCK_SHIFT_MAX")
        if not lo <= shift <= hi:
            raise TraceFormatError(f"{name}: block size 2^{shift} is outside 2^{lo}..2^{hi}")
        if int(h["flags"]) & ~constant("DEEPUM_TRACE_F_ALL") or h["reserved"].any():
            raise TraceFormatError(f"{name}: unknown header flags or non-zero reserved fields")
        count, meta_len = int(h["record_count"]), int(h["meta_len"])
        if meta_len > _META_MAX:
            raise TraceFormatError(f"{name}: metadata length {meta_len} is implausible")
        # Read in bounded chunks: a corrupt count must not allocate the world.
        want = count * RECORD_DTYPE.itemsize
        buf = io.BytesIO()
        while buf.tell() < want:
            chunk = f.read(min(want - buf.tell(), 64 << 20))
            if not chunk:
                raise TraceFormatError(
                    f"{name}: header says {count} records, file holds"
                    f" {buf.tell() // RECORD_DTYPE.itemsize}"
                )
            buf.write(chunk)
        records = np.frombuffer(buf.getbuffer(), dtype=RECORD_DTYPE).copy()
        meta_raw = f.read(meta_len)
        if len(meta_raw) != meta_len:
            raise TraceFormatError(f"{name}: truncated metadata")
        if f.read(1):
            raise TraceFormatError(f"{name}: trailing bytes after the metadata")
        try:
            meta = json.loads(meta_raw) if meta_len else {}
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TraceFormatError(f"{name}: metadata is not JSON: {e}") from None
        if not isinstance(meta, dict):
            raise TraceFormatError(f"{name}: metadata is not a JSON object")
        return cls(records=records, block_shift=shift, flags=int(h["flags"]), meta=meta)
