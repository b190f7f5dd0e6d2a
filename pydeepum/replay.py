"""Replay a trace through the prefetch core and report what it achieved.

Two passes over the same records: the core with prefetching and
pre-eviction, and a baseline of the same residency model with neither
(demand paging).  Coverage compares their GPU faults; accuracy counts the
prefetched blocks a kernel touched before they left the GPU.  See
pydeepum/_native_src/replay.h for what the replay models.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, make_dataclass
from typing import Any

import numpy as np

from ._lowlevel import constant, errno_error, ffi, lib, struct_dataclass, struct_fields, to_dataclass
from .config import Config, checked, to_cdata
from .errors import RecordError
from .trace import ITER_END, ITERATION, Trace

FEEDBACK = {
    "faults": constant("DUM_REPLAY_FEEDBACK_FAULTS"),
    "accesses": constant("DUM_REPLAY_FEEDBACK_ACCESSES"),
}
_CHUNK = 65536

CoreStats = struct_dataclass("deepum_stats", "CoreStats", "Counters of one prefetch core (struct deepum_stats).")
_INTERVAL_FIELDS = [f for f in struct_fields("dum_replay_interval") if f != "core"]
_Interval = make_dataclass("_Interval", [(f, int) for f in _INTERVAL_FIELDS], frozen=True)


@dataclass(frozen=True)
class IterationReport:
    """What one iteration of the trace looked like under deepum."""

    iteration: int
    accesses: int  # blocks the kernels touched (FAULT records of the trace)
    baseline_faults: int  # GPU faults with demand paging only
    faults: int  # GPU faults with deepum
    late: int  # accesses whose prefetch was still copying (link model)
    prefetches: int
    useful: int  # prefetched blocks touched before leaving the GPU
    wasted: int  # prefetched blocks evicted, discarded or flushed untouched
    evictions: int  # pre-evictions
    demand_evictions: int  # evictions left on the fault path
    baseline_demand_evictions: int
    discards: int
    invalidated_bytes: int
    records: int
    core_ns: int

    @property
    def coverage(self) -> float:
        """Share of the baseline's faults deepum avoided."""
        if not self.baseline_faults:
            return 1.0
        return max(0.0, 1.0 - self.faults / self.baseline_faults)

    @property
    def accuracy(self) -> float:
        """Share of prefetches a kernel used."""
        return self.useful / self.prefetches if self.prefetches else 1.0

    @property
    def core_ns_per_record(self) -> float:
        return self.core_ns / self.records if self.records else 0.0

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(coverage=self.coverage, accuracy=self.accuracy, core_ns_per_record=self.core_ns_per_record)
        return d


@dataclass(frozen=True)
class ReplayReport:
    trace_records: int
    block_size: int
    capacity_bytes: int  # 0: unlimited
    feedback: str
    link_gbps: float
    iterations: list[IterationReport]
    total: IterationReport  # iterations from steady_from on, summed
    steady_from: int
    core: CoreStats
    config: Config

    def as_dict(self) -> dict:
        return {
            "trace_records": self.trace_records,
            "block_size": self.block_size,
            "capacity_bytes": self.capacity_bytes,
            "feedback": self.feedback,
            "link_gbps": self.link_gbps,
            "steady_from": self.steady_from,
            "iterations": [it.as_dict() for it in self.iterations],
            "steady_state": self.total.as_dict(),
            "core": dataclasses.asdict(self.core),
            "config": dataclasses.asdict(self.config),
        }


class _NativeReplay:
    """One pass of the C replay engine over a record array."""

    def __init__(self, cfg: Config, feedback: str, link_bytes_per_sec: int):
        opt = ffi.new("struct dum_replay_options *")
        opt.feedback = FEEDBACK[feedback]
        opt.link_bytes_per_sec = link_bytes_per_sec
        ptr = ffi.new("struct dum_replay **")
        rc = lib.dum_replay_create(to_cdata(cfg), opt, ptr)
        if rc < 0:
            raise errno_error(rc, "replay")
        self._r = ffi.gc(ptr[0], lib.dum_replay_destroy)

    def feed(self, records: np.ndarray, offset: int) -> None:
        bad = ffi.new("__u64 *")
        buf = ffi.from_buffer("struct deepum_record[]", records)
        if lib.dum_replay_feed(self._r, buf, len(records), bad) < 0:
            raise RecordError(offset + int(bad[0]), "rejected by the prefetch core (unknown type or flags)")

    def intervals(self) -> list[tuple[Any, CoreStats]]:
        """(interval counters, core counters) per interval, copied out of C."""
        n = 64
        while True:
            out = ffi.new("struct dum_replay_interval[]", n)
            got = lib.dum_replay_intervals(self._r, out, n)
            if got < n:
                return [(_Interval(**{f: int(getattr(out[i], f)) for f in _INTERVAL_FIELDS}),
                         to_dataclass(CoreStats, out[i].core)) for i in range(got)]
            n *= 2

    def stats(self) -> CoreStats:
        s = ffi.new("struct deepum_stats *")
        lib.dum_replay_stats(self._r, s)
        return to_dataclass(CoreStats, s)


def replay(
    trace: Trace,
    cfg: Config,
    feedback: str = "faults",
    link_gbps: float = 0.0,
    steady_from: int = 2,
    progress: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Replay @trace with @cfg; per-iteration results plus a steady-state total
    over iterations numbered >= @steady_from.  @progress gets record counts."""
    if feedback not in FEEDBACK:
        raise ValueError(f"feedback must be one of {', '.join(FEEDBACK)}")
    cfg = checked(cfg)
    if cfg.block_shift != trace.block_shift:
        cfg = checked(dataclasses.replace(cfg, block_shift=trace.block_shift))
    baseline_flags = constant("DEEPUM_CFG_F_NO_PREFETCH") | constant("DEEPUM_CFG_F_NO_PREEVICT")
    base_cfg = dataclasses.replace(cfg, flags=cfg.flags | baseline_flags)
    link = int(link_gbps * 1e9)
    runs = [_NativeReplay(cfg, feedback, link), _NativeReplay(base_cfg, feedback, link)]
    records = np.ascontiguousarray(trace.records)
    for start in range(0, len(records), _CHUNK):
        chunk = records[start : start + _CHUNK]
        for run in runs:
            run.feed(chunk, start)
        if progress:
            progress(len(chunk))

    ours, base = runs[0].intervals(), runs[1].intervals()
    # Interval k ends at the k-th ITERATION record; iteration i runs from the
    # record that opens it to the next one.
    marks = records[records["type"] == ITERATION]
    iterations = []
    for k in range(1, min(len(marks), len(ours) - 1) + 1):
        opener = marks[k - 1]
        if opener["flags"] & ITER_END:
            break
        iterations.append(_iteration(int(opener["aux"]), ours[k], base[k]))
    steady = [it for it in iterations if it.iteration >= steady_from]
    return ReplayReport(
        trace_records=len(records),
        block_size=trace.block_size,
        capacity_bytes=cfg.capacity_blocks << cfg.block_shift,
        feedback=feedback,
        link_gbps=link_gbps,
        iterations=iterations,
        total=_sum(steady, -1),
        steady_from=steady_from,
        core=runs[0].stats(),
        config=cfg,
    )


def _iteration(index: int, ours: tuple, base: tuple) -> IterationReport:
    iv, core = ours
    base_iv, base_core = base
    return IterationReport(
        iteration=index,
        accesses=iv.accesses,
        baseline_faults=base_iv.faults,
        faults=iv.faults,
        late=iv.late,
        prefetches=core.prefetches,
        useful=iv.useful,
        wasted=iv.wasted,
        evictions=core.evictions,
        demand_evictions=core.demand_evictions,
        baseline_demand_evictions=base_core.demand_evictions,
        discards=core.discards,
        invalidated_bytes=core.invalidated_bytes,
        records=core.records,
        core_ns=core.core_ns,
    )


def _sum(items: list[IterationReport], index: int) -> IterationReport:
    fields = [f.name for f in dataclasses.fields(IterationReport) if f.name != "iteration"]
    return IterationReport(iteration=index, **{f: sum(getattr(it, f) for it in items) for f in fields})
