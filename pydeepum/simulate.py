"""Trace-driven simulation: iteration time per memory policy and GPU
capacity, with the real prefetch core in the loop for `deepum`.

The engine is C (pydeepum/_native_src/sim.h says what it models); this
module turns a calibration file into its cost model, finds the kernels'
compute times, runs the policies, and reports.  docs/SIMULATOR.md explains
the model, its calibration and its validation against the H200.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._lowlevel import constant, errno_error, ffi, lib, struct_fields
from .config import Config, checked, to_cdata
from .errors import DeepumInputError, RecordError
from .trace import LAUNCH, Trace

POLICIES = {
    "demand": constant("DUM_SIM_DEMAND"),
    "uvm": constant("DUM_SIM_UVM"),
    "uvm-user": constant("DUM_SIM_UVM_USER"),
    "deepum": constant("DUM_SIM_DEEPUM"),
    "deepum-user": constant("DUM_SIM_DEEPUM_USER"),
    "deepum-issuer": constant("DUM_SIM_DEEPUM_ISSUER"),
    "deepum-split": constant("DUM_SIM_DEEPUM_SPLIT"),
    "oracle": constant("DUM_SIM_ORACLE"),
}
# What `deepumctl simulate` runs unless told otherwise.
DEFAULT_POLICIES = ("demand", "uvm", "deepum", "oracle")
# Belady's MIN: the fewest bytes any policy moves, for the ideal bound (its times are no bound).
_FEWEST_BYTES = "min"
_NATIVE_POLICIES = {**POLICIES, _FEWEST_BYTES: constant("DUM_SIM_MIN")}
_CHUNK = 200_000
# libdeepum's DEEPUM_WRITE_EVERY default (userlib/intercept.c): the engine sees
# where the GPU is once per this many launches, and ties faults to the last.
ENGINE_WRITE_EVERY = 8
WRITE_EVERY_MAX = lib.DUM_SIM_LAUNCH_GROUP_MAX
_ITER_FIELDS = struct_fields("dum_sim_iteration")
MIB = 1 << 20


def cost_model(cal: dict[str, Any], block_bytes: int = 2 * MIB) -> dict[str, int]:
    """struct dum_sim_cost's fields from a calibration (h200.json's keys).

    fault_ns: a dependent 2 MiB block fault (dependent_2MiB_block_fault_us,
    mean of the measured range) is 51% of its 32 pages faulting one after
    another (the tree prefetcher brings the rest) plus the copy:
    round = (block fault - block / H2D bandwidth) / ceil(0.51 * 32).
    prefetch_range_ns and prefetch_bytes_per_sec: least-squares fit of
    time = overhead + size / rate to the measured batch-prefetch rates by range
    size (batch_prefetch_GBps_by_range_size).  Write-backs through the user
    API (libdeepum's engine), user_evict_bytes_per_sec and evict_range_ns:
    as measured in training runs (engine_write_back_per_2MiB_us, _per_range_us) where the
    calibration has that, else a 2 MiB eviction by itself
    (evict_to_host_per_2MiB_GBps) less its time in a bulk one, at the bulk
    rate; the kernel module's write-backs and the oracle's take the bulk rate.
    both_ways_overlap_pct (deepum-split): of a write-back and a prefetch at
    once, the share of the shorter that ran alongside the other
    (evict_and_prefetch_at_once, 2 MiB ranges: the engine's are short);
    100, the link's two directions at once, where the calibration lacks it.
    """
    try:
        gbps = lambda key: float(cal[key]) * 1e9  # noqa: E731
        h2d = gbps("link_h2d_pinned_GBps")
        page = int(cal["uvm_defaults"]["big_page_bytes"])
        threshold = int(cal["uvm_defaults"]["prefetch_threshold_percent"])
        dependent_us = statistics.mean(float(x) for x in cal["dependent_2MiB_block_fault_us"])
        by_size = cal["batch_prefetch_GBps_by_range_size"]
        discard_ms = float(cal["discard_batch_4096x2MiB_ms"])
        d2h, evict = gbps("link_d2h_pinned_GBps"), gbps("evict_to_host_bulk_GBps")
        evict_per_block = gbps("evict_to_host_per_2MiB_GBps")
        if "engine_write_back_per_2MiB_us" in cal:
            user_evict = block_bytes / (float(cal["engine_write_back_per_2MiB_us"]) * 1e-6)
            user_range_ns = float(cal["engine_write_back_per_range_us"]) * 1e3
        else:
            user_evict = evict
            user_range_ns = max(block_bytes / evict_per_block - block_bytes / evict, 0) * 1e9
        overlap_pct = both_ways_overlap_pct(cal.get("evict_and_prefetch_at_once"))
    except (KeyError, TypeError, ValueError) as e:
        raise DeepumInputError(f"calibration lacks a usable {e}") from None
    rounds = -(-block_bytes // page * threshold // 100)
    fault_ns = (dependent_us * 1e3 - block_bytes / h2d * 1e9) / rounds
    sizes, times = [], []
    for key, rate in by_size.items():
        if key.endswith("MiB") and key[:-3].isdigit():
            size = int(key[:-3]) * MIB
            sizes.append(size)
            times.append(size / (float(rate) * 1e9) * 1e9)
    if len(sizes) < 2:
        raise DeepumInputError("calibration needs batch_prefetch_GBps_by_range_size for 2+ sizes")
    per_byte, overhead = np.polyfit(sizes, times, 1)  # time = overhead + size * per_byte
    return {
        "h2d_bytes_per_sec": int(h2d),
        "d2h_bytes_per_sec": int(d2h),
        "prefetch_bytes_per_sec": int(1e9 / per_byte),
        "evict_bytes_per_sec": int(evict),
        "user_evict_bytes_per_sec": int(user_evict),
        "fault_ns": int(fault_ns),
        "prefetch_range_ns": int(max(overhead, 0)),
        "evict_range_ns": int(user_range_ns),
        "discard_ns": int(discard_ms * 1e6 / 4096),
        "fault_bytes": page,
        "tree_threshold_pct": threshold,
        "both_ways_overlap_pct": overlap_pct,
    }


def both_ways_overlap_pct(measured: dict[str, Any] | None) -> int:
    """From calibrate's evict_and_prefetch_at_once (2 MiB ranges): the time
    saved over one after the other (1 - together_over_serial, the median of
    each run's own ratio), as a share of the shorter of the two alone."""
    if measured is None:
        return 100
    evict = 1 / float(measured["2MiB_evict_alone_GBps"])
    prefetch = 1 / float(measured["2MiB_prefetch_alone_GBps"])
    saved = (1 - float(measured["2MiB_together_over_serial"])) * (evict + prefetch) / min(evict, prefetch)
    return int(round(100 * min(max(saved, 0.0), 1.0)))


def compute_from_trace(trace: Trace) -> np.ndarray:
    """Each LAUNCH's own duration (right for traces taken without faults)."""
    if trace.per_launch:
        raise DeepumInputError("a per-launch trace's kernel durations include every fault the kernel took: "
                               "give the compute times of a resident kernel profile "
                               "(scripts/gpu/profile_resident.py; deepumctl simulate --compute FILE)")
    return trace.records[trace.records["type"] == LAUNCH]["len"].astype(np.uint64)


def compute_for_detected_marks(compute: np.ndarray, detected: Trace) -> np.ndarray:
    """A trace's per-launch @compute for that trace with libdeepum's marks in
    place of its own (Trace.with_detected_marks, which keeps a prefix of its
    launches): a profile's kernels go by their place in the program's own
    iterations, so the compute is taken from the marked trace, then cut."""
    return compute[: detected.counts()["launch"]]


def compute_from_profile(trace: Trace, path: str | Path) -> np.ndarray:
    """Compute times from a resident profile CSV (scripts/gpu/profile_*):
    the k-th kernel of a trace iteration with as many kernels as the profiled
    ones gets the median duration of their k-th kernels.  An iteration with
    another count (a trace taken from the program's first step, which
    launches set-up kernels) gets, per launch, the median of the profiled
    kernels of its grid and block, else of all of them; at least one
    iteration must match."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            rows = list(csv.DictReader(f))
        by_iter: dict[str, list[int]] = {}
        for r in rows:
            by_iter.setdefault(r["iteration"], []).append(int(r["dur_ns"]))
    except (OSError, KeyError, ValueError, EOFError) as e:
        raise DeepumInputError(f"{path}: not a kernel profile: {e}") from None
    lengths = {len(v) for v in by_iter.values()}
    if len(lengths) != 1:
        raise DeepumInputError(f"{path}: profiled iterations differ in kernel count: {sorted(lengths)}")
    per_position = np.median(np.array(list(by_iter.values())), axis=0).astype(np.uint64)
    launches = trace.records["type"] == LAUNCH
    bounds = trace.iteration_bounds()
    if not bounds or launches[: bounds[0][1]].any():
        raise DeepumInputError("the trace has launches outside its iterations")
    counts = [int(launches[start:end].sum()) for _, start, end in bounds]
    if len(per_position) not in counts:
        raise DeepumInputError(f"{path}: {len(per_position)} kernels per profiled iteration, the trace's "
                               f"iterations have {sorted(set(counts))}")
    if set(counts) != {len(per_position)}:
        by_shape = _durations_by_shape(rows, path)
        any_kernel = int(np.median(per_position))
        kernels = trace.meta.get("kernels") or []
    out = []
    for (_, start, end), n in zip(bounds, counts):
        if n == len(per_position):
            out.append(per_position)
            continue
        exec_ids = trace.records[start:end][launches[start:end]]["exec_id"]
        shapes = [_shape(kernels[e]) if e < len(kernels) else None for e in exec_ids]
        out.append(np.array([by_shape.get(shape, any_kernel) for shape in shapes], dtype=np.uint64))
    return np.concatenate(out)


def _shape(kernel) -> tuple | None:
    """(grid, block) of a trace's kernel entry [name, grid, block, ...]."""
    return (tuple(kernel[1]), tuple(kernel[2])) if kernel and len(kernel) >= 3 else None


def _durations_by_shape(rows: list[dict], path: Path) -> dict[tuple, int]:
    try:
        durations: dict[tuple, list[int]] = {}
        for r in rows:
            shape = (tuple(int(r[k]) for k in ("gx", "gy", "gz")), tuple(int(r[k]) for k in ("bx", "by", "bz")))
            durations.setdefault(shape, []).append(int(r["dur_ns"]))
    except (KeyError, ValueError) as e:
        raise DeepumInputError(f"{path}: no launch shapes to time a trace iteration the profile does not "
                               f"match: {e}") from None
    return {shape: int(np.median(d)) for shape, d in durations.items()}


@dataclass(frozen=True)
class SimIteration:
    policy: str
    capacity_bytes: int
    iteration: int
    time_ns: int
    compute_ns: int
    fault_stall_ns: int
    late_stall_ns: int
    ideal_ns: int
    accesses: int
    faults: int
    late: int
    h2d_bytes: int
    d2h_bytes: int
    prefetches: int
    refetches: int  # prefetches of a block prefetched before in the same iteration (evicted between)
    useful: int
    evictions: int
    fault_evictions: int
    lingering: int  # uses of an evicted block before its write-back started (emulated capacity)

    @property
    def fraction_of_ideal(self) -> float:
        return self.ideal_ns / self.time_ns if self.time_ns else 1.0

    @property
    def accuracy(self) -> float:
        return self.useful / self.prefetches if self.prefetches else 1.0

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(fraction_of_ideal=self.fraction_of_ideal, accuracy=self.accuracy)
        return d


@dataclass(frozen=True)
class SimReport:
    iterations: list[SimIteration]
    steady_from: int
    cost: dict[str, int]
    compute_source: str
    write_every: int  # the engine policies' launches per position

    def steady(self, policy: str, capacity: int) -> list[SimIteration]:
        return [it for it in self.iterations
                if it.policy == policy and it.capacity_bytes == capacity and it.iteration >= self.steady_from]

    def mean_time_ns(self, policy: str, capacity: int) -> float:
        items = self.steady(policy, capacity)
        return statistics.mean(it.time_ns for it in items) if items else 0.0

    def coverage(self, policy: str, capacity: int) -> float:
        """Share of demand paging's faults this policy avoided (steady state)."""
        ours = sum(it.faults for it in self.steady(policy, capacity))
        base = sum(it.faults for it in self.steady("demand", capacity))
        return max(0.0, 1 - ours / base) if base else 1.0

    def summary(self) -> list[dict]:
        rows = []
        for policy in dict.fromkeys(it.policy for it in self.iterations):
            for cap in dict.fromkeys(it.capacity_bytes for it in self.iterations):
                items = self.steady(policy, cap)
                if not items:
                    continue
                time = statistics.mean(it.time_ns for it in items)
                ideal = statistics.mean(it.ideal_ns for it in items)
                rows.append({
                    "policy": policy, "capacity_bytes": cap, "iterations": len(items),
                    "time_ms": time / 1e6, "ideal_ms": ideal / 1e6, "fraction_of_ideal": ideal / time,
                    "faults": statistics.mean(it.faults for it in items),
                    "h2d_gib": statistics.mean(it.h2d_bytes for it in items) / (1 << 30),
                    "accuracy": sum(it.useful for it in items) / max(1, sum(it.prefetches for it in items)),
                    "refetches": statistics.mean(it.refetches for it in items),
                })
        return rows

    def as_dict(self) -> dict:
        return {"steady_from": self.steady_from, "cost": self.cost, "compute_source": self.compute_source,
                "write_every": self.write_every,
                "summary": self.summary(), "iterations": [it.as_dict() for it in self.iterations]}


class _NativeSim:
    def __init__(self, policy: str, cfg: Config, cost: dict[str, int], capacity_blocks: int, write_every: int):
        c = ffi.new("struct dum_sim_cost *", cost)
        ptr = ffi.new("struct dum_sim **")
        rc = lib.dum_sim_create(_NATIVE_POLICIES[policy], to_cdata(cfg), c, capacity_blocks, write_every, ptr)
        if rc < 0:
            raise errno_error(rc, f"simulate {policy}")
        self._s = ffi.gc(ptr[0], lib.dum_sim_destroy)

    def run(self, recs, compute, next_use, n: int, lo: int, hi: int) -> None:
        bad = ffi.new("__u64 *")
        rc = lib.dum_sim_run(self._s, recs, compute, next_use, n, lo, hi, bad)
        if rc == -22:
            raise RecordError(int(bad[0]), "malformed record")
        if rc < 0:
            raise errno_error(rc, "simulate")

    def iterations(self) -> list[dict[str, int]]:
        n = 64
        while True:
            out = ffi.new("struct dum_sim_iteration[]", n)
            got = lib.dum_sim_iterations(self._s, out, n)
            if got < n:
                return [{f: int(getattr(out[i], f)) for f in _ITER_FIELDS} for i in range(got)]
            n *= 2


def records_simulated(n_records: int, capacities: list[int], policies: list[str]) -> int:
    """How many records simulate() goes through (for a progress bar)."""
    return n_records * len(capacities) * (len(policies) + 1)  # + MIN, for the ideal bound


def simulate(
    trace: Trace,
    capacities: list[int],
    policies: list[str],
    cfg: Config,
    cost: dict[str, int],
    compute_ns: np.ndarray,
    compute_source: str = "trace",
    steady_from: int = 2,
    progress: Callable[[int], None] | None = None,
    write_every: int = ENGINE_WRITE_EVERY,
) -> SimReport:
    """Simulate @trace at each capacity in bytes (0: unlimited) under each
    policy.  Fields @cfg leaves unset (make_settings) take the core's
    defaults for each capacity, as an engine given that budget would.
    @write_every: the DEEPUM_WRITE_EVERY of the engine's policies
    (deepum-user, -issuer, -split): their core hears of launches that many at
    a time."""
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise DeepumInputError(f"unknown policy {', '.join(unknown)}; known: {', '.join(POLICIES)}")
    if not 1 <= write_every <= WRITE_EVERY_MAX:
        raise DeepumInputError(f"write_every must be 1-{WRITE_EVERY_MAX}, not {write_every}")
    cfg = dataclasses.replace(cfg, block_shift=trace.block_shift)
    checked(cfg)
    records = np.ascontiguousarray(trace.records)
    n = len(records)
    if len(compute_ns) != int((records["type"] == LAUNCH).sum()):
        raise DeepumInputError("one compute time per LAUNCH record is needed")
    compute = np.ascontiguousarray(compute_ns, dtype=np.uint64)
    recs = ffi.from_buffer("struct deepum_record[]", records)
    comp = ffi.from_buffer("__u64[]", compute)
    next_use = np.zeros(max(n, 1), dtype=np.uint64)
    nu = ffi.from_buffer("__u64[]", next_use)
    rc = lib.dum_sim_next_use(recs, n, trace.block_shift, nu)
    if rc < 0:
        raise errno_error(rc, "simulate")
    runs = [_FEWEST_BYTES] + policies
    results = []
    for cap in capacities:
        blocks = cap >> trace.block_shift
        if cap and not blocks:
            raise DeepumInputError(f"capacity {cap} B is less than one block")
        per_policy = {}
        # Defaults left unset in @cfg are the core's for this capacity (the engine's
        # policies: libdeepum's, dum_sim_create()), filled in by the C side; checked here
        # so that a bad configuration is refused before any simulation.
        at_capacity = dataclasses.replace(cfg, capacity_blocks=blocks)
        checked(at_capacity)
        for policy in runs:
            sim = _NativeSim(policy, at_capacity, cost, blocks, write_every)
            for lo in range(0, n, _CHUNK):
                sim.run(recs, comp, nu, n, lo, min(n, lo + _CHUNK))
                if progress:
                    progress(min(_CHUNK, n - lo))
            per_policy[policy] = sim.iterations()
        fewest = per_policy[_FEWEST_BYTES]
        for policy in policies:
            for k, it in enumerate(per_policy[policy]):
                needed = fewest[k]["h2d_bytes"] if k < len(fewest) else it["h2d_bytes"]
                ideal = max(it["compute_ns"], int(needed * 1e9 / cost["h2d_bytes_per_sec"]))
                results.append(SimIteration(policy=policy, capacity_bytes=cap, ideal_ns=ideal, **it))
    return SimReport(iterations=results, steady_from=steady_from, cost=cost, compute_source=compute_source,
                     write_every=write_every)
