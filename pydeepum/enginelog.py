"""How late the user-mode engine's prefetches were, and how soon its
evictions were regretted, from a DEEPUM_ENGINE_LOG (userlib/README.md).

usage: deepumctl report LOG[.gz] [--from-iteration N] [--trace TRACE] [--core [--set F=V]...] [--json]
       deepumctl report --fit-write-backs LOG[.gz]... [--json]

Every log line ends with t=<ns> (the engine's clock).  Per measured
iteration range it reports:
  late       faults on a block whose prefetch had been issued and not
             undone by an eviction: the GPU got there first.  With the time
             from issue to fault: a prefetch that is still not done tens of
             ms after it was issued waited in the engine's stream behind
             other copies, it was not predicted too late.
  regretted  faults on a block the engine had evicted, with the time since
             that eviction: victims needed again soon.
  heard      how long after a fault happened the engine fed it to its core
             (logs whose lines carry the fault's own time, at=): its reaction
             time, rounds and driver calls included.
  driver     per direction, how long the engine's batches waited for the
             issuer (handed over to the call) and how long their driver calls
             took (logs with issued lines); with landed lines, when the
             stream finished each batch's copies: their rate, each batch
             timed from its call or the stream's previous batch, whichever
             was later (what the simulator's cost model charges for them).
             --fit-write-backs pools the eviction batches of several logs
             of the engine (demand-mode logs are left out, and said how
             they compare) and fits time = a * ranges + b * 2 MiB blocks
             (least squares): the calibration's
             engine_write_back_per_range_us and engine_write_back_per_2MiB_us.
  misses     the other faults (never predicted).
  stream     the engine's own commands (its evict and prefetch lines, each
             a range) costed with the simulator's model of the driver
             (pydeepum.simulate.cost_model, the bundled H200 calibration),
             as a share of each whole iteration's length: near 1, the
             iteration is as long as its copies take, and the engine's
             choices, not the cost model, decide the time.
  round trips  prefetched blocks the engine had evicted with no launch, or
             at most 32, between the eviction and the prefetch, as a share
             of the blocks it prefetched; and blocks prefetched more than
             once in one iteration, with how many launches after their
             eviction they came back (soon: victims a better choice would
             have kept).  A write-back costs 3-4x a prefetch on the H200,
             so a round trip is mostly write-back time.
  learning   per iteration from the first (warm-up included), faults on a
             (kernel, block) pair that had not faulted before in the log:
             what the tables, which learn from faults, were still learning.
  settling   per iteration from the first (warm-up included), faults on a
             block the engine had evicted (regretted) and blocks prefetched
             again in the iteration that had prefetched them (refetched):
             how many iterations the engine took to settle, and whether a
             measured range started after it did (forgetting an unsettled
             start costs the iterations that learn back what it dropped).
  copies     per iteration from the first (logs with landed lines), the GiB
             the engine's batches issued in it wrote back and prefetched,
             each at its rate in the stream: once settled, an iteration
             whose copies fill it lasts as long as they take, so a change in
             the driver's write-back rate shows here with the same bytes.
  taught     per warm-up iteration, the (kernel, block) pairs it taught
             first, and how many of them look wrong from the measured
             iterations: no use of the block (a fault where it was fed, a
             prefetch at its kernel's next launch) within 24 launches of
             where the pair was taught.  Hits are not seen, so pairs that
             are right count too when the block's use there is always a
             hit: the last warm-up iterations give that floor, noisily
             (one H200 log of ResNet-50 at 50%: 17-20% of iterations 7
             and 8's, against 64% of iteration 0's).
  learned    the measured iterations' prefetched blocks by the iteration
             their (kernel, block) pair first faulted in, or never (a walk
             past the kernel's own faults, or another launch's table): what
             the predictions are made of.  Tables keep what they learn, so
             pairs learned while the program's memory layout still changed
             are prefetched in every later iteration.
             A block's use by a kernel that ran while it was resident is
             never a fault, so it stays unknown until an iteration evicts
             the block first (GPT-2 XL at 75% on the H200: 8k new pairs per
             iteration at the fifth, 1k from the tenth).
  repeated   how alike consecutive iterations look to the engine: launches
             with the exec ID of the same launch of the iteration before;
             and for blocks faulting in both, how far apart (in launches
             into the iteration) the nearest kernels their faults were
             attributed to are (a block can also fault for another kernel
             in one of them: a prefetch that came too late for it).  The engine attributes a fault to the last launch it saw
             before it, and sees launches only at position writes (every
             8th, DEEPUM_WRITE_EVERY) and between its own driver calls, so
             0-8 launches is as good as it gets; the tracer's traces,
             attributed per kernel, are 0 for 98-100% of blocks.

With --trace TRACE, a per-launch trace of the same program (`deepumctl trace
record --per-launch`; scripts/gpu/capture_traces.py) judges the measured
prefetches, which the log cannot (hits are not seen): a prefetched block is
near its kernel if a kernel of the trace's last iteration touches it within
24 launches either side of where the kernel it was made for launched next;
else it is not, or that kernel did not launch again in the iteration.
Blocks are matched by their rank in address order (two processes of one
program lay their managed memory out alike; refused where the two hold
different numbers of blocks), launches by place in the iteration
(iterations whose launch count differs from the trace's are not compared).

With --core, the log's launches, faults and iteration marks also go through
this build's prefetch core (pydeepum.core), configured as the run's was (the
log's first line; --set FIELD=VALUE of struct deepum_config changes a field,
and gives the configuration of logs from before that line: capacity_blocks
and watermark_blocks at least, and flags=32 for the oldest victims those
engines had).  The engine feeds its core exactly these
records, so the same core and configuration decide what the run decided
(prefetches and evictions are compared); a changed core or field shows what
the change would have decided on the same stream.  Per iteration: the
window's resets, waits and skips, prefetched and evicted blocks.
"""

from __future__ import annotations

import bisect
import collections
import gzip
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import calibration
from ._lowlevel import constant
from .config import make_config
from .core import PREFETCH, Core
from .errors import DeepumInputError
from .importers import import_engine_log
from .simulate import cost_model
from .trace import FAULT, ITER_END, ITERATION, LAUNCH, Trace

BLOCK_SHIFT = 21


class EngineLogError(DeepumInputError):
    """A log this report cannot read: the line and what is wrong with it."""


@dataclass(frozen=True)
class Spread:
    """Quantiles of a set of values (ms, launches or shares, as named)."""
    p10: float
    p50: float
    p90: float


@dataclass(frozen=True)
class LearningIteration:
    iteration: int
    faults: int
    new_pairs: int  # faults on a (kernel, block) pair that had not faulted before in the log


@dataclass(frozen=True)
class SettlingIteration:
    iteration: int
    regretted: int  # faults on a block the engine had evicted
    refetched: int  # blocks prefetched again in the iteration


@dataclass(frozen=True)
class CopiesIteration:
    """What the engine's batches issued in one iteration copied, timed in its stream."""
    iteration: int
    evicted_gib: float
    evict_GBps: float | None
    prefetched_gib: float
    prefetch_GBps: float | None


def _gib_and_rate(nbytes: int, ns: int) -> tuple[float, float | None]:
    return nbytes / 2**30, nbytes / ns if ns else None


@dataclass(frozen=True)
class TaughtIteration:
    iteration: int
    pairs: int        # (kernel, block) pairs this warm-up iteration taught first
    unconfirmed: int  # of them, ones no measured iteration used near where they were taught


@dataclass(frozen=True)
class AgainstTrace:
    """Measured prefetched blocks judged by a per-launch trace of the same program."""
    near: int
    not_near: int
    kernel_not_again: int
    not_compared: int  # in iterations whose launch count differs from the trace's


@dataclass(frozen=True)
class EngineLogReport:
    """What a log says from iteration @from_iteration on (the module's doc)."""
    from_iteration: int
    launches: int
    faults: int
    misses: int
    prefetched_blocks: int
    evicted_blocks: int
    log_prefetched_blocks: int  # the whole log's, warm-up included
    log_evicted_blocks: int
    swept_bytes: int
    late: int
    late_ms_since_issue: Spread | None
    regretted: int
    regretted_ms_since_eviction: Spread | None
    fault_heard_ms_after: Spread | None
    evict_batches: int
    prefetch_batches: int
    evict_ms_waited: Spread | None
    prefetch_ms_waited: Spread | None
    evict_ms_in_driver: Spread | None
    prefetch_ms_in_driver: Spread | None
    evict_stream_GBps: float | None
    prefetch_stream_GBps: float | None
    stream_share_of_iteration: Spread | None
    stream_iterations: int
    round_trips_no_launch: int
    round_trips_within_32: int  # ROUND_TRIP_LAUNCHES
    blocks_prefetched_again_in_iteration: int
    prefetched_again_launches_after_eviction: Spread | None
    launches_compared: int
    launches_repeated: float | None
    fault_blocks_compared: int
    fault_owner_shift_launches: Spread | None
    learning: list[LearningIteration]
    settling: list[SettlingIteration]
    copies: list[CopiesIteration]
    pairs_taught: list[TaughtIteration]
    prefetches_by_pair_learned: dict[str, int]  # iteration (or "never") -> blocks
    against_trace: AgainstTrace | None
    # Measured eviction batches (ranges, bytes, ns in the stream), for fit_write_backs()
    write_back_batches: list[tuple[int, int, int]] = field(repr=False)
    demand_mode: bool = False  # the config line's flags: DEEPUM_MODE=demand, which evicts only on faults

    def as_dict(self) -> dict:
        out = asdict(self)
        del out["write_back_batches"]
        return out


@dataclass(frozen=True)
class CoreIteration:
    window_resets: int
    window_waits: int
    window_skips: int
    launches: int
    prefetched_blocks: int
    evicted_blocks: int


@dataclass(frozen=True)
class CoreReplay:
    """A log's records through this build's core, configured as the run's."""
    config: dict
    changed: dict  # the fields set over the run's configuration
    iterations: list[CoreIteration]
    prefetched_blocks: int
    evicted_blocks: int
    log_prefetched_blocks: int
    log_evicted_blocks: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class WriteBackFit:
    """time = per_range_us * ranges + per_2MiB_us * 2 MiB blocks, least squares over the batches."""
    batches: int
    per_range_us: float
    per_2MiB_us: float
    GBps: float  # over all of them

    def as_dict(self) -> dict:
        return asdict(self)

    def time_over_fit(self, batches: list[tuple[int, int, int]]) -> float:
        """What @batches (ranges, bytes, ns) took, over what this fit says they take."""
        rows = np.array(batches, dtype=float)
        fitted_us = self.per_range_us * rows[:, 0] + self.per_2MiB_us * rows[:, 1] / (1 << BLOCK_SHIFT)
        return float(rows[:, 2].sum() / 1e3 / fitted_us.sum())


def _quantiles(values: list[float]) -> Spread | None:
    if not values:
        return None
    values = sorted(values)
    return Spread(*(values[int(q * (len(values) - 1))] for q in (0.1, 0.5, 0.9)))


def _blocks(addr: str, words: list[str]) -> range:
    first = int(addr, 16) >> BLOCK_SHIFT
    count = next((int(w.split("=")[1]) for w in words if w.startswith("blocks=")), 1)
    return range(first, first + count)


def _at(words: list[str], t: int) -> int:
    """The event's own time (at=), or when the engine logged it."""
    return next((int(w[3:]) for w in words if w.startswith("at=")), t)


def _exec_id(words: list[str]) -> int:
    return next(int(w.split("=")[1]) for w in words if w.startswith("exec="))


def _repeated(launches: list[list[int]], owners: list[dict[int, set[int]]]) -> dict:
    """How much of each iteration repeats the one before (see the module's doc)."""
    same_launches = compared_launches = 0
    shifts = []
    for prev, cur in zip(launches, launches[1:]):
        same_launches += sum(a == b for a, b in zip(prev, cur))
        compared_launches += min(len(prev), len(cur))
    places = []  # per iteration: exec ID -> its first launch's place in it
    for seq in launches:
        first: dict[int, int] = {}
        for place, exec_id in enumerate(seq):
            first.setdefault(exec_id, place)
        places.append(first)
    for i in range(1, len(owners)):
        for b in owners[i - 1].keys() & owners[i].keys():
            before = [places[i - 1][e] for e in owners[i - 1][b] if e in places[i - 1]]
            now = [places[i][e] for e in owners[i][b] if e in places[i]]
            if before and now:
                shifts.append(float(min(abs(p - q) for p in before for q in now)))
    return {"launches_compared": compared_launches,
            "launches_repeated": same_launches / compared_launches if compared_launches else None,
            "fault_blocks_compared": len(shifts),
            "fault_owner_shift_launches": _quantiles(shifts)}


def _launch_places(launches: list[list[int]]) -> list[dict[int, list[int]]]:
    """Per measured iteration: exec ID -> its launches' places, in order."""
    places = []
    for seq in launches:
        by_exec: dict[int, list[int]] = {}
        for place, exec_id in enumerate(seq):
            by_exec.setdefault(exec_id, []).append(place)
        places.append(by_exec)
    return places


def _next_launch(places: dict[int, list[int]], exec_id: int, place: int) -> int | None:
    """The place of @exec_id's first launch at or after @place in an iteration
    (@places: one of _launch_places()), None if it did not launch again."""
    own = places.get(exec_id, [])
    at = bisect.bisect_left(own, place)
    return own[at] if at < len(own) else None


def _unconfirmed(first_faulted: dict[tuple[int, int], tuple[int, int]], places: list[dict[int, list[int]]],
                 fault_uses: dict[int, set[int]], prefetches: list[tuple[int, int, int, range]],
                 from_iteration: int) -> list[TaughtIteration]:
    """Per warm-up iteration, the pairs it taught (exec ID, block -> iteration,
    launches into it) and those whose block no measured iteration used within
    PLACE_SLACK launches of that place: faults count where they were fed, a
    prefetch at its kernel's next launch in that iteration."""
    uses = {b: set(fed) for b, fed in fault_uses.items()}
    for measured, place, exec_id, blocks in prefetches:
        kernel = _next_launch(places[measured], exec_id, place)
        for b in blocks:
            uses.setdefault(b, set()).add(place if kernel is None else kernel)
    per: dict[int, list[int]] = {}
    for (_, b), (iteration, place) in first_faulted.items():
        if iteration >= from_iteration:
            continue
        this = per.setdefault(iteration, [0, 0])
        this[0] += 1
        this[1] += not any(abs(place - q) <= PLACE_SLACK for q in uses.get(b, ()))
    return [TaughtIteration(i, n, u) for i, (n, u) in sorted(per.items())]


def _against_trace(trace: Trace, log_blocks: set[int], launches: list[list[int]], places: list[dict[int, list[int]]],
                   prefetches: list[tuple[int, int, int, range]]) -> AgainstTrace:
    """The measured @prefetches (measured iteration, place, exec ID, blocks)
    against @trace's last iteration: near, not near, or for a kernel that did
    not launch again (the module docstring, --trace)."""
    if not trace.per_launch:
        raise EngineLogError("judging by a trace needs a per-launch one (deepumctl trace record --per-launch)")
    recs = trace.records
    trace_blocks = np.unique(recs[recs["type"] == FAULT]["addr"] >> trace.block_shift)
    if len(trace_blocks) != len(log_blocks):
        raise EngineLogError(f"the trace touches {len(trace_blocks)} blocks, the log names {len(log_blocks)}: "
                         "not laid out as the same program")
    to_trace = dict(zip(sorted(log_blocks), trace_blocks.tolist()))
    _, start, end = trace.iteration_bounds()[-1]
    touched: list[set[int]] = []  # per launch of the trace's last iteration
    for rec in recs[start:end]:
        if rec["type"] == LAUNCH:
            touched.append(set())
        elif rec["type"] == FAULT and touched:
            touched[-1].add(int(rec["addr"]) >> trace.block_shift)
    counts = dict.fromkeys(("near", "not_near", "kernel_not_again", "not_compared"), 0)
    for measured, place, exec_id, blocks in prefetches:
        seq = launches[measured]
        if len(seq) != len(touched):
            counts["not_compared"] += len(blocks)
            continue
        # the kernel just launched (a walk at its launch) or a later one
        kernel = _next_launch(places[measured], exec_id, max(place - 1, 0))
        for b in blocks:
            if kernel is None:
                counts["kernel_not_again"] += 1
            else:
                around = range(max(kernel - PLACE_SLACK, 0), min(kernel + PLACE_SLACK + 1, len(seq)))
                counts["near" if any(to_trace[b] in touched[p] for p in around) else "not_near"] += 1
    return AgainstTrace(**counts)


def _stream_ns(kind: str, blocks: int, dead: bool, cost: dict[str, int]) -> float:
    """What the cost model charges for one evict or prefetch line (a range)."""
    if kind == "prefetch":
        return cost["prefetch_range_ns"] + (blocks << BLOCK_SHIFT) * 1e9 / cost["prefetch_bytes_per_sec"]
    if dead:
        return blocks * cost["discard_ns"]
    return cost["evict_range_ns"] + (blocks << BLOCK_SHIFT) * 1e9 / cost["user_evict_bytes_per_sec"]


ROUND_TRIP_LAUNCHES = 32
# How near (launches) a measured iteration's use of a block must come to where a warm-up
# iteration taught its (kernel, block) pair for the pair to count as still right: three
# position writes of the engine's default eight launches each
PLACE_SLACK = 24


def replay_core(log: Path, from_iteration: int, fields: dict | None = None) -> CoreReplay:
    """The log's records through this build's core, configured as the run's
    core was with @fields over it: per measured iteration, the window's
    surprises and the commands (see the module's doc)."""
    trace = import_engine_log(log)
    config = {**trace.meta.get("core_config", {}), **(fields or {})}
    if not config.get("capacity_blocks"):
        raise EngineLogError("the log does not say how the engine's core was configured (a log from before its "
                             "config line): give --set capacity_blocks=N --set watermark_blocks=N --set flags=32 "
                             "(the oldest victims, as engines had then)")
    records = trace.records
    core = Core(make_config(**config))
    keys = ("window_resets", "window_waits", "window_skips", "launches")
    per, iteration, before = [], -1, core.stats()
    commands = {"prefetched_blocks": 0, "evicted_blocks": 0}
    whole_log = dict(commands)
    for i, record in enumerate(records):
        if record["type"] == ITERATION:
            now = core.stats()
            if iteration >= from_iteration and now.launches > before.launches:
                per.append(CoreIteration(**{k: getattr(now, k) - getattr(before, k) for k in keys}, **commands))
            if record["flags"] & ITER_END:
                break
            iteration, before = iteration + 1, now
            commands = dict.fromkeys(commands, 0)
        for cmd in core.process(record, i):
            kind = "prefetched_blocks" if cmd["op"] == PREFETCH else "evicted_blocks"
            commands[kind] += 1
            whole_log[kind] += 1
    return CoreReplay(config, fields or {}, per, sum(it.prefetched_blocks for it in per),
                      sum(it.evicted_blocks for it in per), whole_log["prefetched_blocks"],
                      whole_log["evicted_blocks"])


def analyse(lines, from_iteration: int, cost: dict[str, int] | None = None,
            trace: Trace | None = None) -> EngineLogReport:
    """The report of a log's @lines from iteration @from_iteration on (the
    module's doc); @cost: the driver's cost model (default: the bundled H200
    calibration's); @trace: a per-launch trace of the same program to judge
    the measured prefetches by."""
    cost = cost or cost_model(calibration.load())
    log_blocks: set[int] = set()  # every block the log names
    iteration = -1
    stream_ns, began = 0.0, None  # the current iteration's commands, costed; when it began
    stream_share: list[float] = []
    issued: dict[int, int] = {}   # block -> when its pending prefetch was issued
    evicted: dict[int, int] = {}  # block -> when it was last evicted
    late, regretted, heard = [], [], []
    waited: dict[str, list[float]] = {"evict": [], "prefetch": []}  # ms from handed to the call
    took: dict[str, list[float]] = {"evict": [], "prefetch": []}    # ms in the call
    # job -> (direction, ranges, bytes, when it was called, the iteration it was issued in)
    in_stream: dict[int, tuple[str, int, int, int, int]] = {}
    stream_free: dict[int, int] = {}                 # per issuing thread (job >> 32): its last batch's end
    copies: dict[int, dict[str, list[int]]] = {}    # iteration -> direction -> bytes, ns of its batches
    write_backs: list[tuple[int, int, int]] = []     # measured eviction batches: ranges, bytes, ns
    evicted_at_launch: dict[int, int] = {}  # block -> launches logged before its last eviction
    round_trips = {"round_trips_no_launch": 0, f"round_trips_within_{ROUND_TRIP_LAUNCHES}": 0,
                   "blocks_prefetched_again_in_iteration": 0}
    prefetched_this_iteration: set[int] = set()
    back_after: list[float] = []  # launches from eviction to the same iteration's next prefetch
    launches_seen = 0
    demand_mode = False
    counts = {"faults": 0, "misses": 0, "prefetched_blocks": 0, "evicted_blocks": 0, "launches": 0,
              "log_prefetched_blocks": 0, "log_evicted_blocks": 0, "swept_bytes": 0}
    launches: list[list[int]] = []          # per iteration, exec IDs in order
    owners: list[dict[int, set[int]]] = []  # per iteration, block -> exec IDs its faults went to
    # (exec ID, block) -> the iteration it first faulted in and the launches into it then
    first_faulted: dict[tuple[int, int], tuple[int, int]] = {}
    origins: collections.Counter = collections.Counter()  # measured prefetches by their pair's first iteration
    learning: dict[int, list[int]] = {}              # iteration -> [faults, on pairs new to the log]
    settling: dict[int, list[int]] = {}              # iteration -> [regretted faults, refetched blocks]
    fault_uses: dict[int, set[int]] = {}             # block -> where measured iterations fed its faults
    measured_prefetches: list[tuple[int, int, int, range]] = []  # measured iteration, place, exec ID, blocks
    place = 0                                        # launches into the current iteration
    for number, line in enumerate(lines, 1):
        words = line.split()
        if not words:
            continue
        if not words[-1].startswith("t="):
            raise EngineLogError(f"line {number}: no t=<ns> at the end (a log from before timestamps?): {line!r}")
        t = int(words[-1][2:])
        kind = words[0]
        if kind == "config":
            flags = next((int(w[6:]) for w in words if w.startswith("flags=")), 0)
            demand_mode = bool(flags & constant("DEEPUM_CFG_F_NO_PREFETCH"))
            continue
        if kind == "iteration":
            if began is not None and iteration >= from_iteration and t > began:
                stream_share.append(stream_ns / (t - began))
            iteration, stream_ns, began, place = int(words[1]), 0.0, t, 0
            prefetched_this_iteration = set()
            if iteration >= from_iteration:
                launches.append([])
                owners.append({})
            continue
        measured = iteration >= from_iteration
        if kind == "prefetch":
            blocks = _blocks(words[2], words)
            log_blocks.update(blocks)
            if measured:
                exec_id = _exec_id(words)
                origins.update(first_faulted[exec_id, b][0] if (exec_id, b) in first_faulted else "never"
                               for b in blocks)
                measured_prefetches.append((len(launches) - 1, place, exec_id, blocks))
            for b in blocks:
                issued[b] = t
                gone = evicted_at_launch.pop(b, None)
                if measured and gone is not None:
                    round_trips["round_trips_no_launch"] += gone == launches_seen
                    round_trips[f"round_trips_within_{ROUND_TRIP_LAUNCHES}"] += \
                        launches_seen - gone <= ROUND_TRIP_LAUNCHES
                repeated = b in prefetched_this_iteration
                settling.setdefault(iteration, [0, 0])[1] += repeated
                again = measured and repeated
                round_trips["blocks_prefetched_again_in_iteration"] += again
                if again and gone is not None:  # evicted since this iteration's first prefetch
                    back_after.append(launches_seen - gone)
                prefetched_this_iteration.add(b)
            counts["prefetched_blocks"] += measured * len(blocks)
            counts["log_prefetched_blocks"] += len(blocks)
            stream_ns += _stream_ns(kind, len(blocks), False, cost)
        elif kind == "evict":
            blocks = _blocks(words[1], words)
            log_blocks.update(blocks)
            for b in blocks:
                evicted[b] = t
                evicted_at_launch[b] = launches_seen
                issued.pop(b, None)
            counts["evicted_blocks"] += measured * len(blocks)
            counts["log_evicted_blocks"] += len(blocks)
            stream_ns += _stream_ns(kind, len(blocks), "dead" in words, cost)
        elif kind == "issued":
            keys = dict(w.split("=", 1) for w in words[3:-1])
            started = int(keys["started"])
            if measured:
                waited[words[1]].append((started - int(keys["handed"])) / 1e6)
                took[words[1]].append((t - started) / 1e6)
            if "job" in keys:
                in_stream[int(keys["job"])] = (words[1], int(keys["ranges"]), int(keys["bytes"]), started, iteration)
        elif kind == "landed":
            job = int(words[1].split("=")[1])
            if job in in_stream:
                direction, ranges, nbytes, started, issued_in = in_stream.pop(job)
                begin = max(started, stream_free.get(job >> 32, 0))
                per_iteration = copies.setdefault(issued_in, {"evict": [0, 0], "prefetch": [0, 0]})[direction]
                per_iteration[0] += nbytes
                per_iteration[1] += t - begin
                if direction == "evict" and issued_in >= from_iteration:
                    write_backs.append((ranges, nbytes, t - begin))
            stream_free[job >> 32] = t
        elif kind == "launch":
            launches_seen += 1
            place += 1
            counts["launches"] += measured
            if measured:
                launches[-1].append(_exec_id(words))
        elif kind == "fault":
            b = int(words[2], 16) >> BLOCK_SHIFT
            log_blocks.add(b)
            since_issue = issued.pop(b, None)
            since_evict = evicted.pop(b, None)
            pair = (_exec_id(words), b)
            this = learning.setdefault(iteration, [0, 0])
            this[0] += 1
            this[1] += pair not in first_faulted
            first_faulted.setdefault(pair, (iteration, place))
            settling.setdefault(iteration, [0, 0])[0] += since_issue is None and since_evict is not None
            if not measured:
                continue
            fault_uses.setdefault(b, set()).add(place)
            owners[-1].setdefault(b, set()).add(pair[0])
            counts["faults"] += 1
            happened = _at(words, t)
            if happened != t:
                heard.append((t - happened) / 1e6)
            if since_issue is not None:
                late.append((happened - since_issue) / 1e6)
            else:
                counts["misses"] += 1
                if since_evict is not None:
                    regretted.append((happened - since_evict) / 1e6)
        elif kind == "sweep":
            # Blocks the budget had not seen, sent to the host once (userlib/engine.c,
            # sweep_unseen): mostly there already, so not costed as copies.
            counts["swept_bytes"] += int(words[2].split("=")[1])
        else:
            raise EngineLogError(f"line {number}: unknown kind {kind!r}")
    places = _launch_places(launches)
    # bytes, ns of the measured iterations' batches, per direction
    copied = {d: [sum(c[d][k] for i, c in copies.items() if i >= from_iteration) for k in (0, 1)]
              for d in ("evict", "prefetch")}
    return EngineLogReport(
        **counts, from_iteration=from_iteration, late=len(late), late_ms_since_issue=_quantiles(late),
        regretted=len(regretted), regretted_ms_since_eviction=_quantiles(regretted),
        fault_heard_ms_after=_quantiles(heard), stream_share_of_iteration=_quantiles(stream_share),
        stream_iterations=len(stream_share),
        **{f"{d}_batches": len(took[d]) for d in took},
        **{f"{d}_ms_waited": _quantiles(waited[d]) for d in waited},
        **{f"{d}_ms_in_driver": _quantiles(took[d]) for d in took},
        **{f"{d}_stream_GBps": nbytes / ns if ns else None for d, (nbytes, ns) in copied.items()},
        **round_trips, prefetched_again_launches_after_eviction=_quantiles(back_after),
        **_repeated(launches, owners),
        learning=[LearningIteration(i, f, n) for i, (f, n) in sorted(learning.items())],
        settling=[SettlingIteration(i, r, a) for i, (r, a) in sorted(settling.items())],
        copies=[CopiesIteration(i, *(x for d in ("evict", "prefetch") for x in _gib_and_rate(*c[d])))
                for i, c in sorted(copies.items())],
        pairs_taught=_unconfirmed(first_faulted, places, fault_uses, measured_prefetches, from_iteration),
        prefetches_by_pair_learned={**{str(i): origins[i] for i in sorted(k for k in origins if k != "never")},
                                    "never": origins["never"]},
        against_trace=_against_trace(trace, log_blocks, launches, places, measured_prefetches) if trace else None,
        write_back_batches=write_backs, demand_mode=demand_mode)


def analyse_log(path: Path, from_iteration: int, trace: Trace | None = None) -> EngineLogReport:
    """analyse() of the DEEPUM_ENGINE_LOG at @path, gzipped or not; what is
    wrong with it, or what keeps it from being read, said with its name."""
    try:
        with (gzip.open if path.name.endswith(".gz") else open)(path, "rt") as lines:
            return analyse(lines, from_iteration, trace=trace)
    except EngineLogError as e:
        raise EngineLogError(f"{path}: {e}") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise EngineLogError(f"{path}: unreadable: {e}") from None


def fit_write_backs(batches: list[tuple[int, int, int]]) -> WriteBackFit:
    """Least-squares time = per_range * ranges + per_2MiB * blocks over
    eviction batches (ranges, bytes, ns), in us."""
    if len(batches) < 2:
        raise EngineLogError("fewer than 2 timed eviction batches (logs without landed lines?)")
    rows = np.array(batches, dtype=float)
    (per_range, per_block), *_ = np.linalg.lstsq(np.c_[rows[:, 0], rows[:, 1] / (1 << BLOCK_SHIFT)],
                                                 rows[:, 2] / 1e3, rcond=None)
    return WriteBackFit(len(batches), float(per_range), float(per_block), float(rows[:, 1].sum() / rows[:, 2].sum()))
