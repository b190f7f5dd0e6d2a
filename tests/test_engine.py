"""libdeepum's user-mode engine (userlib/engine.c) against the test doubles
of tests/fakecuda: a pretend GPU that counts its resident managed blocks,
the batch prefetch and discard entry points, and two fault sources (the
fake CUPTI and the fake UVM tools queue of fakedev.c).

Most runs use the fault-injection build's lockstep mode
(DEEPUM_TEST_LOCKSTEP=1): each launch waits until the engine has run a
whole round, which makes the order of launches, faults and commands the
same every time.  The workload is cuda_app's "layers" loop: 8 layers of
4 MiB weights and 4 MiB activations (34 blocks of 2 MiB), a forward and a
backward pass, each kernel touching three whole allocations (6 blocks).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from pydeepum import enginelog
from testlib import load_script
from userlib_harness import LIB_FAULTS, MIB, FAKE, FAKE_CUPTI, ROOT, Run, build, run_app

BLOCK = 2 * MIB
LAYERS = 8
ITERATIONS = 6
FOOTPRINT_BLOCKS = 2 * LAYERS + 2 * (LAYERS + 1)  # weights and activations
BUDGET_BLOCKS = 24
# One kernel's blocks: pre-eviction keeps that much free, so that the faults the
# engine has not answered yet still fit (userlib/README.md, "The budget").
KERNEL_BLOCKS = 6
# The window some tests were written for: half the budget (two kernels ahead;
# the default, a quarter, holds one).
HALF_BUDGET_WINDOW = {"DEEPUM_LOOKAHEAD_BLOCKS": str(BUDGET_BLOCKS // 2)}


@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    build()


def engine(tmp_path: Path, *scenario: str, source: str = "cupti", lockstep: bool = True,
           env: dict[str, str] | None = None) -> tuple[Run, list[str]]:
    """cuda_app SCENARIO under the engine; the run and the engine's log."""
    log = tmp_path / f"engine{len(list(tmp_path.glob('engine*')))}.log"
    settings = {"DEEPUM_MODE": "user", "DEEPUM_MANAGED": "1", "DEEPUM_CAPACITY": str(BUDGET_BLOCKS * BLOCK),
                "DEEPUM_WATERMARK": str(KERNEL_BLOCKS), "DEEPUM_ENGINE_LOG": str(log),
                "DEEPUM_FAULTS": source, "DEEPUM_CUPTI": str(FAKE_CUPTI),
                "DEEPUM_TEST_LOCKSTEP": "1" if lockstep else "0"}
    fakedev = source == "uvm-tools"
    if fakedev:
        tools, uvm = tmp_path / "nvidia-uvm-tools", tmp_path / "nvidia-uvm"
        tools.touch()
        settings.update(FAKEUVM_TOOLS=str(tools), DEEPUM_UVM_TOOLS=str(tools), FAKECUDA_UVM_DEVICE=str(uvm),
                        DEEPUM_UVM_DEVICE=str(uvm))
    r = run_app(tmp_path, "symbol", *scenario, lib=LIB_FAULTS, fakedev=fakedev, env={**settings, **(env or {})})
    return r, log.read_text().splitlines() if log.exists() else []


def layers(tmp_path: Path, **kwargs) -> tuple[Run, list[str]]:
    r, log = engine(tmp_path, "layers", str(ITERATIONS), str(LAYERS), **kwargs)
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    return r, log


def peak_resident_blocks(r: Run) -> int:
    return max(int(c.args["peak_resident_blocks"]) for c in r.named("fakegpu"))


def counters(r: Run) -> dict[str, int]:
    return r.stats["engine"]["counters"]


def iterations(r: Run) -> list[dict[str, int]]:
    return r.stats["engine"]["iterations"]


def ranges(call) -> list[tuple[int, int]]:
    return [(int(a, 16), int(n)) for a, n in (part.split("+") for part in call.args["ranges"].split(","))]


def engine_stream(r: Run) -> str:
    """The engine's stream (the other one it makes takes legacy-stream discards)."""
    own, legacy_discards = r.named("cuStreamCreateWithPriority")
    assert own.args["priority"] == "0" and own.args["flags"] == "1"  # the least priority, non-blocking
    assert legacy_discards.args["flags"] == "0"  # blocking: ordered with the legacy stream
    return own.result()


@pytest.mark.parametrize("source", ["cupti", "uvm-tools"])
def test_the_budget_holds_and_the_loop_is_learned(tmp_path, source):
    r, _ = layers(tmp_path, source=source)
    assert r.stats["engine"]["fault_source"] == source
    # the pretend GPU never held more than the budget, nor did the engine see it do so
    assert peak_resident_blocks(r) <= BUDGET_BLOCKS < FOOTPRINT_BLOCKS
    assert counters(r)["budget_violation_rounds"] == 0
    assert r.stats["engine"]["observed_peak_blocks"] == peak_resident_blocks(r)
    # the time-weighted mean residency: the rounds' observations over the time they covered
    c = counters(r)
    assert 0 < c["resident_block_ns"] / c["watched_ns"] <= peak_resident_blocks(r)
    assert not [c for c in r.calls if c.result() == "invalid"]
    per_iteration = iterations(r)
    assert len(per_iteration) == ITERATIONS + 1  # and the mark after the last one
    learned = [it["faults_fed"] + it["transfer_faults_fed"] for it in per_iteration[:ITERATIONS]]
    assert learned[0] >= 2 * LAYERS and learned[-2:] == [0, 0], learned  # from iteration 4 on, no fault
    steady = per_iteration[ITERATIONS - 1]
    assert steady["prefetch_blocks"] >= FOOTPRINT_BLOCKS - BUDGET_BLOCKS
    assert steady["launches_fed"] == 2 * LAYERS and counters(r)["launches_lost"] == 0


@pytest.mark.parametrize("source", ["cupti", "uvm-tools"])
def test_memory_copied_in_before_training_leaves_the_gpu_at_the_first_mark(tmp_path, source):
    """Weights copied into memory the GPU never touched arrive with no fault
    and no migration (the fake does as the driver does), unseen by the
    engine: at the first mark it sends every block its core does not hold to
    the host, once; from there they fault in like the rest, and the budget
    holds."""
    r, log = engine(tmp_path, "layers-copied", str(ITERATIONS), str(LAYERS), source=source)
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    weights = [int(c.args["dst"], 16) for c in r.named("cuMemcpyHtoD")]
    assert len(weights) == LAYERS
    assert peak_resident_blocks(r) <= BUDGET_BLOCKS
    # the first mark came before any launch: every allocation (weights, activations,
    # scratch: 4 MiB each), whole; no later mark found a new one
    allocations = 2 * LAYERS + 2
    c = counters(r)
    assert c["sweep_ranges"] == allocations and c["sweep_bytes"] == allocations * 4 * MIB
    assert iterations(r)[0]["sweep_bytes"] == c["sweep_bytes"]
    first_launch = next(i for i, line in enumerate(log) if line.startswith("launch"))
    assert all(i < first_launch for i, line in enumerate(log) if line.startswith("sweep"))
    faulted = {int(line.split()[2], 16) >> 21 for line in log if line.startswith("fault")}
    assert {(w >> 21) + k for w in weights for k in (0, 1)} <= faulted


def test_prefetches_go_in_coalesced_batches_on_a_low_priority_stream(tmp_path):
    r, log = layers(tmp_path)
    stream = engine_stream(r)
    batches = r.named("cuMemPrefetchBatchAsync")
    assert batches and {c.args["stream"] for c in batches} == {stream}
    assert not r.named("cuMemPrefetchAsync")
    c = counters(r)
    to_gpu = [c for c in batches if c.args["location"] == "device"]
    assert sum(len(ranges(call)) for call in to_gpu) == c["prefetch_ranges"]
    assert sum(n for call in to_gpu for _, n in ranges(call)) == c["prefetch_bytes"] == c["prefetch_blocks"] * BLOCK
    assert len(to_gpu) == c["prefetch_calls"] < c["prefetch_blocks"] // 2
    # a layer's weights and input activations are adjacent: one planned range of 4 blocks,
    # issued as one piece per allocation
    planned = [int(m.group(1)) for m in (re.search(r"blocks=(\d+)", line) for line in log if
                                         line.startswith("prefetch")) if m]
    assert max(planned) >= 4
    for call in batches:
        pieces = ranges(call)
        assert len(pieces) <= 128
        # never past an allocation's end (cuda_app's are 4 MiB, 4 MiB-aligned), whole blocks
        assert all(n in (BLOCK, 4 * MIB) and a // (4 * MIB) == (a + n - 1) // (4 * MIB) for a, n in pieces)


def test_evictions_come_before_the_prefetches_they_make_room_for(tmp_path):
    r, _ = layers(tmp_path)
    between_launches = [[]]
    for call in r.calls:
        if call.name.startswith("cuLaunch"):
            between_launches.append([])
        elif call.name == "cuMemPrefetchBatchAsync":
            between_launches[-1].append(call.args["location"])
    assert any("host" in each and "device" in each for each in between_launches)
    for each in between_launches:  # within a round, every eviction batch before any prefetch batch
        assert each == sorted(each, key=lambda where: where == "device"), each


@pytest.mark.parametrize("source", ["cupti", "uvm-tools"])
def test_a_block_is_fed_once_per_miss_however_many_pages_fault(tmp_path, source):
    """The GPU reports every faulting page; the core hears of each miss once,
    and of a late prefetch (a fault on a block it holds) once per kernel."""
    one, _ = layers(tmp_path, source=source, env=HALF_BUDGET_WINDOW)
    many, _ = layers(tmp_path, source=source, env={**HALF_BUDGET_WINDOW, "FAKECUDA_FAULT_EVENTS": "8"})
    a, b = counters(one), counters(many)
    assert b["fault_events"] == 8 * a["fault_events"]
    assert (b["faults_fed"], b["late_faults_fed"]) == (a["faults_fed"], a["late_faults_fed"])
    assert b["faults_on_resident"] == a["faults_on_resident"] + 7 * a["fault_events"]
    assert a["late_faults_fed"] > 0  # lockstep has some: a fault that beats its prefetch


def test_the_engine_log_report_accounts_for_every_command_and_fault(tmp_path):
    r, _ = layers(tmp_path)
    (log,) = tmp_path.glob("engine*.log")
    report = subprocess.run([sys.executable, str(ROOT / "scripts/engine_log_report"), str(log), "--from-iteration", "0",
                             "--json"], capture_output=True, text=True, check=True)
    got, c = json.loads(report.stdout), counters(r)
    assert got["faults"] == c["faults_fed"] + c["late_faults_fed"] + c["transfer_faults_fed"]
    assert got["late"] + got["misses"] == got["faults"] and got["regretted"] <= got["misses"]
    assert got["prefetched_blocks"] == c["prefetch_blocks"]
    assert got["evicted_blocks"] == c["evict_blocks"] + c["demand_evictions"] + c["discard_blocks"]
    assert got["launches"] == c["launches_fed"]
    assert got["launches_repeated"] == 1.0 and got["launches_compared"] == (ITERATIONS - 1) * 2 * LAYERS
    assert got["fault_heard_ms_after"]["p10"] >= 0  # fault lines carry their own time (at=)
    assert got["evict_batches"] == got["prefetch_batches"] == 0  # lockstep has no issuer
    # lockstep attributes every fault to the kernel that made it: with nothing
    # prefetched, a block faults for the same kernels every iteration
    demand_log = tmp_path / "demand.log"
    layers(tmp_path, env={"DEEPUM_MODE": "demand", "DEEPUM_ENGINE_LOG": str(demand_log)})
    demand = json.loads(subprocess.run([sys.executable, str(ROOT / "scripts/engine_log_report"), str(demand_log),
                                        "--from-iteration", "0", "--json"], capture_output=True, text=True,
                                       check=True).stdout)
    assert demand["fault_blocks_compared"] > 0 and demand["fault_owner_shift_launches"]["p90"] == 0
    assert got["stream_iterations"] == ITERATIONS and got["stream_share_of_iteration"]["p50"] > 0
    # the log replayed through the same core, configured as its first line says, decides what the run did
    replayed = json.loads(subprocess.run(
        [sys.executable, str(ROOT / "scripts/engine_log_report"), str(log), "--from-iteration", "0", "--json",
         "--core"], capture_output=True, text=True, check=True).stdout)["core"]
    assert replayed["config"] == r.stats["engine"]["config"]  # the log's first line, the statistics' copy
    assert replayed["config"]["capacity_blocks"] == BUDGET_BLOCKS
    assert replayed["config"]["lookahead_blocks"] == BUDGET_BLOCKS // 4  # the default window: a quarter
    assert replayed["config"]["watermark_blocks"] == KERNEL_BLOCKS
    assert (replayed["prefetched_blocks"], replayed["evicted_blocks"]) == (got["prefetched_blocks"],
                                                                           got["evicted_blocks"])
    assert (replayed["log_prefetched_blocks"], replayed["log_evicted_blocks"]) == (got["log_prefetched_blocks"],
                                                                                   got["log_evicted_blocks"])
    assert len(replayed["iterations"]) == ITERATIONS and replayed["prefetched_blocks"] > 0
    # a field set over the run's changes the decisions (no pre-eviction: evictions only on faults)
    changed = json.loads(subprocess.run(
        [sys.executable, str(ROOT / "scripts/engine_log_report"), str(log), "--from-iteration", "0", "--json",
         "--core", "--set", "flags=2"], capture_output=True, text=True, check=True).stdout)["core"]
    assert changed["changed"] == {"flags": 2} and changed["evicted_blocks"] != replayed["evicted_blocks"]
    log.write_text(log.read_text().replace(" t=", " at="))  # a log from before timestamps
    bad = subprocess.run([sys.executable, str(ROOT / "scripts/engine_log_report"), str(log)], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "no t=<ns>" in bad.stderr


def test_the_engine_log_report_counts_round_trips_of_evicted_blocks():
    lines = ["iteration 0 t=0", "prefetch exec=1 0x200000 blocks=2 t=1", "evict 0x200000 blocks=1 t=2",
             "prefetch exec=2 0x200000 blocks=1 t=3",            # back with no launch between
             "evict 0x400000 blocks=1 t=4"] + [f"launch slot=0 exec={e} at=5 t=5" for e in range(40)] + [
             "prefetch exec=3 0x400000 blocks=1 t=6"]            # back 40 launches later
    got = enginelog.analyse(lines, 0)
    assert (got.round_trips_no_launch, got.round_trips_within_32) == (1, 1)
    assert got.blocks_prefetched_again_in_iteration == 2 and got.prefetched_blocks == 4
    # both were evicted after this iteration's first prefetch: back after 0 and 40 launches
    assert got.prefetched_again_launches_after_eviction.p10 == 0
    later = enginelog.analyse([line for line in lines if line != "prefetch exec=2 0x200000 blocks=1 t=3"], 0)
    assert later.prefetched_again_launches_after_eviction == enginelog.Spread(40, 40, 40)
    assert enginelog.analyse(lines[:3], 0).prefetched_again_launches_after_eviction is None


def test_the_engine_log_report_shows_each_iteration_settling():
    """Per iteration, warm-up included: faults on blocks the engine had
    evicted (not on a pending prefetch), and blocks prefetched twice."""
    lines = ["iteration 0 t=0", "evict 0x200000 blocks=1 t=1", "fault exec=1 0x200000 at=2 t=2",  # regretted
             "prefetch exec=1 0x400000 blocks=1 t=3", "evict 0x400000 blocks=1 t=4",
             "prefetch exec=2 0x400000 blocks=1 t=5",                                        # refetched
             "fault exec=2 0x400000 at=6 t=6",                                               # late, not regretted
             "iteration 1 t=7", "prefetch exec=2 0x400000 blocks=1 t=8", "fault exec=3 0x600000 at=9 t=9"]
    got = enginelog.analyse(lines, 1)
    assert got.settling == [enginelog.SettlingIteration(0, regretted=1, refetched=1),
                            enginelog.SettlingIteration(1, regretted=0, refetched=0)]
    assert got.regretted == 0 and got.blocks_prefetched_again_in_iteration == 0  # measured: iteration 1


def test_the_engine_log_report_judges_prefetches_by_a_per_launch_trace():
    """Log blocks 1-3 are the trace's 11-13 (by rank).  Kernel 7's prefetch of
    blocks 1-2: the trace's last iteration touches 11 near it, 12 nowhere
    (only an earlier iteration did); block 3 was for kernel 8, which did not
    launch again.  An iteration of another length is not compared."""
    import numpy as np

    from pydeepum.trace import FAULT, ITER_END, ITERATION, LAUNCH, TRACE_PER_LAUNCH, Trace
    from testlib import blk, rec

    # 60 launches an iteration: kernel 7 second, kernel 6 last, 58 apart (more than 24)
    launches = [f"launch slot=0 exec={e} at=1 t=1" for e in (5, 7, *[9] * 57, 6)]
    lines = ["iteration 0 t=0", "prefetch exec=7 0x200000 blocks=2 t=1", "prefetch exec=8 0x600000 blocks=1 t=1",
             *launches, "iteration 1 t=2", "prefetch exec=7 0x200000 blocks=1 t=3", *launches[:2], "iteration 2 t=4"]
    last = [rec(LAUNCH, exec_id=0), rec(LAUNCH, exec_id=1), rec(FAULT, blk(11), BLOCK, 1),
            *[rec(LAUNCH, exec_id=3)] * 57, rec(LAUNCH, exec_id=2), rec(FAULT, blk(13), BLOCK, 2)]
    recs = [rec(ITERATION, aux=0), rec(LAUNCH, exec_id=0), rec(FAULT, blk(12), BLOCK, 0),
            rec(ITERATION, aux=1), *last, rec(ITERATION, aux=2, flags=ITER_END)]
    trace = Trace(records=np.array(recs), flags=TRACE_PER_LAUNCH)
    got = enginelog.analyse(lines, 0, trace=trace).against_trace
    assert got == enginelog.AgainstTrace(near=1, not_near=1, kernel_not_again=1, not_compared=1), got
    with pytest.raises(ValueError, match="not laid out as the same program"):
        enginelog.analyse(lines + ["prefetch exec=7 0x800000 blocks=1 t=5"], 0, trace=trace)
    with pytest.raises(ValueError, match="per-launch"):
        enginelog.analyse(lines, 0, trace=Trace(records=np.array(recs)))


def test_replayed_through_this_core_the_h200_resnet50_log_evicts_less_than_its_run():
    """The sixteenth session's ResNet-50 engine log (50%, settled; its core
    kept a block's first and last use): this core, fed the same records,
    evicts at least 10% fewer blocks over the settled iterations (11.5% when
    the runs of uses came in; ResNet-50 then took 23% less per iteration)."""
    log = ROOT / "docs/results/bench_train-2026-12-01c/call1-resnet50-logs-settled/engine-619.log.gz"
    run = enginelog.analyse_log(log, 8)
    replayed = enginelog.replay_core(log, 8)
    assert run.evicted_blocks > 14000 and replayed.log_evicted_blocks > 0
    assert replayed.evicted_blocks <= 0.9 * run.evicted_blocks, (replayed.evicted_blocks, run.evicted_blocks)


def test_the_engine_log_report_follows_what_the_tables_still_learn():
    """Per iteration, warm-up included: faults on (kernel, block) pairs that had not faulted before."""
    lines = ["fault exec=1 0x200000 at=0 t=0",                                  # before the first mark
             "iteration 0 t=1", "fault exec=1 0x200000 at=1 t=1",               # known pair
             "fault exec=2 0x200000 at=1 t=2", "fault exec=1 0x400000 at=2 t=2",  # new kernel, new block
             "iteration 1 t=3", "fault exec=2 0x200000 at=3 t=3", "fault exec=2 0x200000 at=3 t=4"]
    got = enginelog.analyse(lines, 1)
    assert got.learning == [enginelog.LearningIteration(-1, faults=1, new_pairs=1),
                            enginelog.LearningIteration(0, faults=3, new_pairs=2),
                            enginelog.LearningIteration(1, faults=2, new_pairs=0)]
    assert got.faults == 2  # the measured iterations' other counts are unchanged


def test_the_engine_log_report_finds_pairs_the_warm_up_taught_wrong():
    """Iteration 0 teaches block 1 at launch 0 and block 2 at launch 40; the
    measured iteration uses block 1 at launch 2 (a fault) and block 2 where
    its kernel runs next after the prefetch: launch 70 (30 away: taught
    wrong) or launch 50 (10 away: still right)."""
    def launches(n, exec_id=9):
        return [f"launch slot=0 exec={exec_id} at=1 t=1"] * n

    def log(kernel_at: int) -> list[str]:
        return (["iteration 0 t=0", "fault exec=1 0x200000 at=0 t=1"] + launches(40) +
                ["fault exec=2 0x400000 at=2 t=2", "iteration 1 t=3"] + launches(2) +
                ["fault exec=1 0x200000 at=3 t=4"] + launches(3) + ["prefetch exec=2 0x400000 blocks=1 t=5"] +
                launches(kernel_at - 5) + launches(1, exec_id=2))

    assert enginelog.analyse(log(70), 1).pairs_taught == [enginelog.TaughtIteration(0, pairs=2, unconfirmed=1)]
    assert enginelog.analyse(log(50), 1).pairs_taught == [enginelog.TaughtIteration(0, pairs=2, unconfirmed=0)]


def test_the_engine_log_report_costs_the_engines_commands_as_the_simulator_does():
    """One 1 ms iteration with a prefetch range of two blocks and an eviction of
    one, dead blocks discarded: (0.1 + 0.1) + (0.05 + 0.1) + 2 x 0.01 ms = 0.37 of it."""
    cost = {"prefetch_range_ns": 100_000, "prefetch_bytes_per_sec": 2 * BLOCK * 10_000,
            "evict_range_ns": 50_000, "user_evict_bytes_per_sec": BLOCK * 10_000, "discard_ns": 10_000}
    lines = ["iteration 0 t=0", "prefetch exec=1 0x200000 blocks=2 t=1", "evict 0x600000 blocks=1 t=2",
             "evict 0x800000 blocks=2 dead t=3", "iteration 1 t=1000000", "evict 0xa00000 blocks=1 t=1000001"]
    got = enginelog.analyse(lines, 0, cost)
    assert got.stream_iterations == 1  # the second is not whole
    assert got.stream_share_of_iteration.p50 == pytest.approx(0.37)


def test_victims_are_never_in_the_predicted_window(tmp_path):
    """No block is evicted while it waits, prefetched, for a kernel that has not run yet
    or is running (the core protects it until the launch after its kernel's)."""
    _, log = layers(tmp_path)
    waiting: dict[int, int] = {}  # block -> the exec ID it was prefetched for
    running = None
    evictions = 0
    for line in log:
        words = line.split()
        if words[0] == "launch":
            waiting = {b: e for b, e in waiting.items() if e != running}
            running = int(words[2].split("=")[1])
        elif words[0] == "prefetch":
            exec_id, addr, n = int(words[1].split("=")[1]), int(words[2], 16), int(words[3].split("=")[1])
            waiting.update({(addr >> 21) + i: exec_id for i in range(n)})
        elif words[0] == "evict":
            addr, n = int(words[1], 16), int(words[2].split("=")[1])
            evictions += 1
            assert not {(addr >> 21) + i for i in range(n)} & waiting.keys(), line
    assert evictions > 0


@pytest.mark.parametrize("setting, value", [("DEEPUM_HORIZON_KERNELS", "256"), ("DEEPUM_HISTORY_SCAN", "0")])
def test_another_victim_choice_changes_the_victims_and_keeps_the_budget(tmp_path, setting, value):
    """A horizon (DEEPUM_HORIZON_KERNELS) or the oldest victims
    (DEEPUM_HISTORY_SCAN=0) reach the core: other victims than the last
    iteration's uses, and the budget and the loop's learning hold.  Without
    victims in address runs: on this loop they make both choices' victims the
    same contiguous runs."""
    def victims(log: list[str]) -> list[str]:
        return [line.split()[1] for line in log if line.startswith("evict")]

    env = {**HALF_BUDGET_WINDOW, "DEEPUM_VICTIM_RUNS": "0"}
    _, plain = layers(tmp_path, env=env)
    r, log = layers(tmp_path, env={**env, setting: value})
    assert victims(log) != victims(plain)
    assert peak_resident_blocks(r) <= BUDGET_BLOCKS and counters(r)["budget_violation_rounds"] == 0
    assert [it["faults_fed"] for it in iterations(r)][-3:] == [0, 0, 0]
    bad, _ = engine(tmp_path, "layers", "1", "1", env={setting: "100000"})
    assert f"{setting}=100000 is outside" in bad.stderr and bad.returncode == 0


def test_a_horizon_and_history_exclude_each_other(tmp_path):
    both, _ = engine(tmp_path, "layers", "1", "1", env={"DEEPUM_HISTORY_SCAN": "64", "DEEPUM_HORIZON_KERNELS": "64"})
    assert "exclude each other" in both.stderr and both.returncode == 0


def test_victim_runs_refuse_the_oldest_victims(tmp_path):
    oldest, _ = engine(tmp_path, "layers", "1", "1", env={"DEEPUM_HISTORY_SCAN": "0", "DEEPUM_VICTIM_RUNS": "1"})
    assert "DEEPUM_VICTIM_RUNS weighs victims by next use" in oldest.stderr and oldest.returncode == 0


def test_the_engine_learns_a_loop_the_program_does_not_mark(tmp_path):
    r, _ = engine(tmp_path, "layers-unmarked", "12", str(LAYERS))
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    detected = r.stats["counters"]["iterations_detected"]
    per_iteration = iterations(r)
    assert detected >= 8 and len(per_iteration) == detected
    assert [it["launches_fed"] for it in per_iteration] == [2 * LAYERS] * detected
    assert [it["faults_fed"] for it in per_iteration][-4:] == [0, 0, 0, 0]
    assert peak_resident_blocks(r) <= BUDGET_BLOCKS


def test_demand_mode_evicts_on_faults_only_and_prefetches_nothing(tmp_path):
    r, _ = layers(tmp_path, env={"DEEPUM_MODE": "demand"})
    c = counters(r)
    assert r.stats["mode"] == "demand"
    assert c["prefetch_blocks"] == 0 and c["evict_blocks"] == 0 and c["demand_evictions"] > 0
    assert {call.args["location"] for call in r.named("cuMemPrefetchBatchAsync")} == {"host"}
    # reactive: a kernel's faults land before the engine can make room for them
    assert BUDGET_BLOCKS < peak_resident_blocks(r) <= BUDGET_BLOCKS + KERNEL_BLOCKS
    faults = [it["faults_fed"] + it["transfer_faults_fed"] for it in iterations(r)[:ITERATIONS]]
    assert min(faults) >= FOOTPRINT_BLOCKS - 2 - BUDGET_BLOCKS  # every iteration pages again


def launch_pointers(call, managed: list[tuple[int, int]]) -> list[int]:
    """The managed-memory pointers among a launch's argument words (the fake logs them as hex bytes)."""
    words = (int.from_bytes(bytes.fromhex(w), "little") for w in call.args["args"].split("-") if len(w) == 16)
    return [w for w in words if any(base <= w < base + size for base, size in managed)]


def misattributed_faults(r: Run, log: list[str]) -> tuple[int, int]:
    """Faults the engine fed for a kernel that does not touch their block, and
    all faults, from the second iteration on: at the first mark the engine's
    sweep (engine.c, sweep_unseen) keeps it in the driver while the first
    launches go by, before any position was written for the observer to see."""
    managed = [(int(c.result(), 16), int(c.args["size"])) for c in r.named("cuMemAllocManaged")]
    touched = [launch_pointers(c, managed) for c in r.launches()]  # cuda_app's allocations are 4 MiB
    launch, latest, wrong, total, iteration = -1, {}, 0, 0, -1
    for words in (line.split() for line in log):
        if words[0] == "iteration":
            iteration = int(words[1])
        elif words[0] == "launch":
            launch += 1
            latest[words[2]] = launch  # exec=N -> its latest launch
        elif words[0] == "fault" and words[1] in latest and iteration >= 1:
            total += 1
            addr = int(words[2], 16)
            wrong += not any(p <= addr < p + 4 * MIB for p in touched[latest[words[1]]])
    return wrong, total


@pytest.mark.parametrize("observe_us", [0, 50])
def test_an_observer_thread_times_launches_while_the_engine_waits_in_the_driver(tmp_path, observe_us):
    """Kernels of 2 ms, eviction calls that keep the engine in the driver for
    8 ms: launches seen only by its rounds get the time the round saw them, and
    the faults before go to the kernel before.  DEEPUM_OBSERVE_US times them
    from a thread that makes no driver call.  (Without the issuer: with it
    the engine no longer waits there.)"""
    r, log = engine(tmp_path, "layers", str(ITERATIONS), str(LAYERS), lockstep=False,
                    env={"DEEPUM_MODE": "demand", "FAKECUDA_KERNEL_US": "2000", "DEEPUM_ISSUER": "0",
                         "FAKECUDA_SLOW": "cuMemPrefetchBatchAsync=8000", "DEEPUM_OBSERVE_US": str(observe_us)})
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    wrong, total = misattributed_faults(r, log)
    c = counters(r)
    assert total >= (ITERATIONS - 1) * (FOOTPRINT_BLOCKS - BUDGET_BLOCKS - 2)
    if observe_us:
        # (a thread starved by a loaded machine sees 85-90% of the launches; the rest go by their round's
        # time: with three CPU hogs on two cores 6-12% of the faults went to the kernel before, against a
        # third or more without the thread; a fresh-clone CI run failed at 7 of 92 under 1 in 20)
        assert wrong <= total // 6 and c["launches_observed"] >= c["launches_fed"] * 3 // 4, (wrong, total)
    else:
        assert wrong >= total // 3 and c["launches_observed"] == 0, (wrong, total)


def fault_heard_delays_ms(log: list[str]) -> list[float]:
    """For each fault the engine fed: how long after it happened (at=) the
    core got it (t=), sorted."""
    delays = []
    for line in log:
        fields = dict(word.split("=", 1) for word in line.split()[1:] if "=" in word)
        if line.startswith("fault ") and "at" in fields:
            delays.append((int(fields["t"]) - int(fields["at"])) / 1e6)
    return sorted(delays)


@pytest.mark.parametrize("issuer", [0, 1])
def test_an_issuer_thread_keeps_the_engine_listening_while_the_driver_is_slow(tmp_path, issuer):
    """Eviction calls that keep their caller in the driver for 30 ms (the H200
    took up to 215 ms): the engine that makes them hears the faults of that
    time when it comes back; with DEEPUM_ISSUER=1 a thread of its own makes
    them, and the core hears faults within a millisecond or two."""
    r, log = engine(tmp_path, "layers", str(ITERATIONS), str(LAYERS), lockstep=False,
                    env={"DEEPUM_MODE": "demand", "FAKECUDA_KERNEL_US": "2000",
                         "FAKECUDA_SLOW": "cuMemPrefetchBatchAsync=30000", "DEEPUM_ISSUER": str(issuer)})
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    delays = fault_heard_delays_ms(log)
    assert len(delays) >= ITERATIONS * (FOOTPRINT_BLOCKS - BUDGET_BLOCKS - 2) // 2
    p90 = delays[len(delays) * 9 // 10]
    if issuer:
        assert p90 < 10, delays
    else:
        assert p90 >= 15, delays
    assert counters(r)["evict_calls"] > 0 and counters(r)["releases"] == 2 * LAYERS + 2
    assert r.stats["engine"]["issuer"] is bool(issuer)


def test_with_an_issuer_the_engine_prefetches_and_releases_as_without(tmp_path):
    """The user-mode engine with DEEPUM_ISSUER=1 at its own pace: prefetches and
    evictions go out in calls of the engine's stream, and every cuMemFree waits
    until the issuer has made the calls it was handed."""
    log = tmp_path / "issuer.log"
    r, _ = layers(tmp_path, lockstep=False, env={"DEEPUM_ISSUER": "1", "FAKECUDA_KERNEL_US": "2000",
                                                 "FAKECUDA_SLOW": "cuMemPrefetchBatchAsync=3000",
                                                 "DEEPUM_ENGINE_LOG": str(log)})
    c = counters(r)
    assert r.stats["engine"]["issuer"] is True
    # its log says when each batch was handed over, called and back (each call takes 3 ms here)
    got = json.loads(subprocess.run([sys.executable, str(ROOT / "scripts/engine_log_report"), str(log),
                                     "--from-iteration", "0", "--json"], capture_output=True, text=True,
                                    check=True).stdout)
    assert 0 < got["evict_batches"] <= c["evict_calls"] and 0 < got["prefetch_batches"] <= c["prefetch_calls"]
    assert got["evict_ms_waited"]["p10"] >= 0 and got["prefetch_ms_in_driver"]["p10"] >= 3.0
    # and when the stream was done with each batch (the fake runs host functions at once)
    assert log.read_text().count("landed job=") >= got["evict_batches"] + got["prefetch_batches"]
    assert 0 < got["evict_stream_GBps"] and 0 < got["prefetch_stream_GBps"]
    fit = json.loads(subprocess.run([sys.executable, str(ROOT / "scripts/engine_log_report"), "--fit-write-backs",
                                     str(log), str(log), "--from-iteration", "0", "--json"], capture_output=True,
                                    text=True, check=True).stdout)
    assert fit["batches"] == 2 * got["evict_batches"] and fit["GBps"] == pytest.approx(got["evict_stream_GBps"])
    assert c["prefetch_calls"] > 0 and c["evict_calls"] > 0
    stream = engine_stream(r)
    batches = r.named("cuMemPrefetchBatchAsync")
    assert batches and {b.args["stream"] for b in batches} == {stream}
    assert c["prefetch_calls"] + c["evict_calls"] == len(batches)
    assert c["releases"] == len(r.named("cuMemFree_v2"))
    assert not [call for call in r.calls if call.result() == "invalid"]


def test_the_engine_log_report_fits_write_back_cost_per_range_and_per_block():
    # 100 us per range + 200 us per 2 MiB block, batches of 1-3 ranges of 1-4 blocks each
    batches = [(r, r * b * BLOCK, (100 * r + 200 * r * b) * 1000) for r in (1, 2, 3) for b in (1, 2, 4)]
    fit = enginelog.fit_write_backs(batches)
    assert fit.per_range_us == pytest.approx(100) and fit.per_2MiB_us == pytest.approx(200)
    assert fit.batches == 9


def test_a_writer_thread_writes_back_on_a_stream_of_its_own_and_prefetches_wait_for_it(tmp_path):
    """DEEPUM_WRITER=1: eviction batches come from a second thread on a
    stream of their own, prefetch batches from the issuer on the engine's
    stream; each prefetch batch waits for the eviction batches handed over
    before it (their room): on the host while the writer is still in the
    driver (its calls take 20 ms here: at 5 ms, a run in a few dozen had
    its queue never full), then on the GPU for its event.  The engine never
    waits for either queue."""
    r, _ = layers(tmp_path, lockstep=False, env={"DEEPUM_WRITER": "1", "FAKECUDA_KERNEL_US": "2000",
                                                 "FAKECUDA_SLOW": "cuMemPrefetchBatchAsync@host=20000"})
    c = counters(r)
    assert r.stats["engine"]["issuer"] is True and r.stats["engine"]["writer"] is True
    own, _, writes = r.named("cuStreamCreateWithPriority")
    assert writes.args["flags"] == "1" and writes.args["priority"] == "0"
    batches = r.named("cuMemPrefetchBatchAsync")
    streams = {where: {b.args["stream"] for b in batches if b.args["location"] == where} for where in ("host", "device")}
    assert streams == {"host": {writes.result()}, "device": {own.result()}}
    assert c["prefetch_calls"] > 0 and c["evict_calls"] > 0 and c["write_waits"] > 0
    # the writer's queue fills up; batches join its newest job instead of stopping the engine
    assert c["issuer_joins"] > 0 and c["issuer_waits"] == 0
    waits = [w for w in r.named("cuStreamWaitEvent") if w.args["stream"] == own.result()]
    assert c["write_waits"] <= len(waits) <= c["prefetch_calls"]
    assert c["releases"] == len(r.named("cuMemFree_v2"))
    assert not [call for call in r.calls if call.result() == "invalid"]


def test_the_engine_counts_the_drivers_thrashing_heuristics_from_the_uvm_queue(tmp_path):
    """The UVM queue's thrashing, throttling and remote-mapping events (the
    driver serving pages without moving them) reach the engine's counters,
    read with the driver's layouts; the fake reports one of each per
    fault-driven migration (FAKEUVM_THRASHING=1), and nothing without it."""
    r, _ = layers(tmp_path, source="uvm-tools", env={"FAKEUVM_THRASHING": "1"})
    c = counters(r)
    assert c["thrashing_events"] > 0 and c["throttled_pages"] == c["thrashing_events"]
    assert c["thrashing_bytes"] == c["mapped_remote_bytes"] == c["h2d_fault_bytes"] > 0
    assert c["fault_events"] > 0 and r.stats["engine"]["source_drops"] == 0
    (tmp_path / "plain").mkdir()
    plain = counters(layers(tmp_path / "plain", source="uvm-tools")[0])
    assert plain["thrashing_events"] == plain["throttled_pages"] == plain["mapped_remote_bytes"] == 0
    assert plain["h2d_fault_bytes"] > 0


def test_the_engine_settings_reach_its_core(tmp_path):
    from pydeepum._lowlevel import lib

    r, _ = layers(tmp_path, env={"DEEPUM_POSITIONAL": "0", "DEEPUM_LOOKAHEAD_BLOCKS": "7",
                                 "DEEPUM_HISTORY_SCAN": "100", "DEEPUM_CORR_SETS": "32768",
                                 "DEEPUM_FORGET_UNSETTLED": "1", "DEEPUM_VICTIM_RUNS": "1"})
    config = r.stats["engine"]["config"]
    assert config["flags"] == (lib.DEEPUM_CFG_F_NO_POSITIONAL | lib.DEEPUM_CFG_F_HISTORY |
                               lib.DEEPUM_CFG_F_FORGET_UNSETTLED | lib.DEEPUM_CFG_F_VICTIM_RUNS)
    assert (config["lookahead_blocks"], config["evict_scan"], config["corr_sets"]) == (7, 100, 32768)
    (tmp_path / "defaults").mkdir()
    config = layers(tmp_path / "defaults")[0].stats["engine"]["config"]
    # victims in address runs by default wherever victims weigh next uses, and forgetting an unsettled start
    forget = lib.DEEPUM_CFG_F_FORGET_UNSETTLED
    assert (config["flags"], config["evict_scan"], config["corr_sets"]) == (
        lib.DEEPUM_CFG_F_HISTORY | lib.DEEPUM_CFG_F_VICTIM_RUNS | forget, lib.DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT,
        lib.DEEPUM_CFG_CORR_SETS_DEFAULT)
    (tmp_path / "plain").mkdir()
    env = {"DEEPUM_VICTIM_RUNS": "0", "DEEPUM_FORGET_UNSETTLED": "0"}
    assert layers(tmp_path / "plain", env=env)[0].stats["engine"]["config"]["flags"] == lib.DEEPUM_CFG_F_HISTORY
    (tmp_path / "horizon").mkdir()
    config = layers(tmp_path / "horizon", env={"DEEPUM_HORIZON_KERNELS": "64"})[0].stats["engine"]["config"]
    assert config["flags"] == lib.DEEPUM_CFG_F_HORIZON | lib.DEEPUM_CFG_F_VICTIM_RUNS | forget
    (tmp_path / "oldest").mkdir()
    config = layers(tmp_path / "oldest", env={"DEEPUM_HISTORY_SCAN": "0"})[0].stats["engine"]["config"]
    assert config["flags"] == lib.DEEPUM_CFG_F_LRM_VICTIMS | forget


def test_without_batch_entry_points_it_prefetches_range_by_range(tmp_path):
    r, _ = layers(tmp_path, env={"FAKECUDA_FAIL": "cuMemPrefetchBatchAsync=801"})  # CUDA_ERROR_NOT_SUPPORTED
    c = counters(r)
    assert r.stats["engine"]["batch_api"] is False
    stream = engine_stream(r)
    singles = r.named("cuMemPrefetchAsync")
    assert singles and {s.args["stream"] for s in singles} == {stream}
    assert {s.args["device"] for s in singles} == {"0", "-1"}
    assert c["fallback_calls"] == len(singles) == c["prefetch_ranges"] + c["evict_ranges"] + c["sweep_ranges"]
    assert peak_resident_blocks(r) <= BUDGET_BLOCKS


def test_reported_frees_are_discarded_in_stream_order_and_freed_memory_is_let_go(tmp_path):
    r, _ = engine(tmp_path, "layers-frees", str(ITERATIONS), str(LAYERS))
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    c = counters(r)
    assert c["free_reports"] == c["free_discard_calls"] == c["frees_fed"] == ITERATIONS
    discards = r.named("cuMemDiscardBatchAsync")
    scratch = int(r.named("cuMemAllocManaged")[-1].result(), 16)
    assert [ranges(d) for d in discards] == [[(scratch, 4 * MIB)]] * ITERATIONS
    for d in discards:  # on the program's stream, right after the kernel that used the buffer last
        assert d.args["stream"] == "0x1010"
        before = r.calls[r.calls.index(d) - 1]
        assert before.name == "cuLaunchKernel" and before.args["f"] == "scale"
    # every cuMemFree waited for the engine to drain its stream, and nothing touched freed memory after
    stream = engine_stream(r)
    frees = r.named("cuMemFree_v2")
    assert c["releases"] == len(frees) == 2 * LAYERS + 2
    for free in frees:
        i = r.calls.index(free)
        assert r.calls[i - 1].name == "cuStreamSynchronize" and r.calls[i - 1].args["stream"] == stream
    freed: set[int] = set()
    for call in r.calls:
        if call.name == "cuMemFree_v2":
            freed.add(int(call.args["dptr"], 16))
        elif call.name == "cuMemPrefetchBatchAsync":
            assert not {a for a, _ in ranges(call)} & freed
    assert not [call for call in r.calls if call.result() == "invalid"]


def test_positions_every_few_launches_still_give_the_engine_every_launch(tmp_path):
    """The engine then knows where the GPU is to within 8 launches (here, in lockstep
    with the host, that is too late to prefetch for the next few kernels; on a GPU
    the host runs far ahead)."""
    r, _ = layers(tmp_path, env={"DEEPUM_WRITE_EVERY": "8"})
    launches = r.counter("launches")
    assert r.counter("position_writes") < launches // 4
    assert counters(r)["launches_fed"] == launches and counters(r)["launches_lost"] == 0
    # marks deliver the position too, so iterations still begin exactly where they do
    assert [it["launches_fed"] for it in iterations(r)] == [2 * LAYERS] * ITERATIONS + [0]


def test_positions_are_written_at_the_same_launches_of_every_iteration(tmp_path):
    """Position writes (every 8th launch, delivery.c) count from the last
    iteration mark: with 10 launches per iteration, counted from the start
    they would fall on other launches each iteration, and the engine would
    tie each iteration's faults to other kernels."""
    r, _ = engine(tmp_path, "layers", str(ITERATIONS), "5", env={"DEEPUM_WRITE_EVERY": "8"})
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    launches, written = 0, [set() for _ in range(ITERATIONS)]  # per iteration: launches written before
    for call in r.calls:
        if call.name == "cuLaunchKernel" and call.args["f"].startswith("layer_"):
            launches += 1
        elif call.name == "cuStreamWriteValue64_v2" and launches % 10:  # (marks write at 0)
            written[launches // 10].add(launches % 10)
    assert written == [{7}] * ITERATIONS, written


def test_the_engine_runs_without_lockstep(tmp_path):
    """Its own pace, as on a GPU: the same loop works and ends cleanly."""
    r, _ = layers(tmp_path, lockstep=False)
    assert r.stats["active"] and counters(r)["rounds"] > 0
    assert not [c for c in r.calls if c.result() == "invalid"]


def test_managed_memory_stops_at_the_limit(tmp_path):
    """80% of the GPU's free memory by default: 16 MiB of 20 MiB, four 4 MiB allocations."""
    r, _ = layers(tmp_path, env={"FAKECUDA_MEM_FREE": str(20 * MIB), "DEEPUM_CAPACITY": str(8 * MIB)})
    assert len(r.named("cuMemAllocManaged")) == 4
    assert r.counter("allocs_over_limit") == len(r.named("cuMemAlloc_v2")) == 2 * LAYERS + 2 - 4


@pytest.mark.parametrize("env, warning", [
    ({"FAKECUDA_FAIL": "cuMemPrefetchBatchAsync"}, "cuMemPrefetchBatchAsync failed"),
    ({"FAKECUDA_MEM_FREE": str(16 * MIB)}, "DEEPUM_CAPACITY=50331648 is more than the GPU's 16777216 free bytes"),
    ({"DEEPUM_FAULTS": "uvm-tools", "DEEPUM_UVM_TOOLS": "/no/such/tools"}, "no UVM event queue: /no/such/tools"),
    ({"DEEPUM_CUPTI": "/no/such/libcupti.so"}, "cannot load CUPTI"),
    ({"DEEPUM_TEST_FAIL": "engine-alloc"}, "cannot allocate the prefetch core"),
    ({"DEEPUM_TEST_FAIL": "engine-thread"}, "cannot start its thread"),
    ({"FAKECUDA_FAIL": "cuStreamCreateWithPriority"}, "cannot create its stream"),
    ({"DEEPUM_CAPACITY": "lots"}, "DEEPUM_CAPACITY=lots is not a byte count"),
    ({"DEEPUM_CORR_SETS": "1000"}, "DEEPUM_CORR_SETS (a power of two)"),
])
def test_engine_failures_turn_deepum_off_and_the_program_runs_on(tmp_path, env, warning):
    plain = run_app(tmp_path, "symbol", "layers", "3", str(LAYERS), lib=None)
    r, _ = engine(tmp_path, "layers", "3", str(LAYERS), env=env)
    assert r.returncode == 0 and r.stdout == plain.stdout, r.stderr
    assert [(c.name, c.args) for c in r.launches()] == [(c.name, c.args) for c in plain.launches()]
    assert len(r.warnings()) == 1 and warning in r.warnings()[0], r.stderr
    assert not r.stats["active"] and warning in r.stats["disabled_reason"]


@pytest.mark.parametrize("lockstep", [True, False], ids=["engine-reads", "reader-thread"])
def test_the_uvm_tools_source_reads_the_drivers_queue(tmp_path, lockstep):
    """The fake queue of fakedev.c: one tracker, on the UVM file the driver
    opened; read by the engine under lockstep, else by a thread of its own.
    Without lockstep the kernels take 1 ms: a program of instant kernels can
    end before a starved engine (a loaded CI machine) has prefetched anything."""
    r, _ = layers(tmp_path, source="uvm-tools", lockstep=lockstep,
                  env=None if lockstep else {"FAKECUDA_KERNEL_US": "1000"})
    (init,) = r.named("ioctl")[:1]
    assert init.line.startswith("ioctl UVM_TOOLS_INIT_EVENT_TRACKER_V2 entries=262144")
    assert counters(r)["faults_fed"] > 0
    enable = [c for c in r.named("ioctl") if "ENABLE_EVENTS" in c.line]
    # migrations (2), GPU faults (3), thrashing detected (10), throttling (11), remote mappings (13)
    assert [c.args["types"] for c in enable] == [hex(1 << 2 | 1 << 3 | 1 << 10 | 1 << 11 | 1 << 13)]
    assert r.stats["engine"]["source_drops"] == 0
    # what actually moved, as the driver reports it: no more than what was asked
    assert 0 < counters(r)["h2d_prefetch_bytes"] <= counters(r)["prefetch_bytes"]
    assert 0 < counters(r)["d2h_bytes"] <= counters(r)["evict_bytes"] + counters(r)["sweep_bytes"]


def test_auto_mode_without_a_module_runs_the_engine_with_cupti_when_there_is_no_uvm_queue(tmp_path):
    r = run_app(tmp_path, "symbol", "layers", "2", "2",
                env={"DEEPUM_MANAGED": "1", "DEEPUM_CUPTI": str(FAKE_CUPTI), "DEEPUM_CAPACITY": "48M",
                     "DEEPUM_UVM_TOOLS": str(tmp_path / "none")})
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    assert r.stats["mode"] == "user" and r.stats["engine"]["fault_source"] == "cupti"
    assert r.stats["engine"]["capacity_bytes"] == 48 * MIB


def test_deepumctl_run_sets_the_budget_and_summarises_the_engine(tmp_path):
    import subprocess
    import sys

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPUM_", "FAKECUDA_", "LD_"))}
    environ.update(LD_LIBRARY_PATH=str(FAKE), DEEPUM_DEVICE=str(tmp_path / "no-such-device"),
                   DEEPUM_CUPTI=str(FAKE_CUPTI), DEEPUM_UVM_TOOLS=str(tmp_path / "none"))
    done = subprocess.run([sys.executable, "-c", "from pydeepum.cli import cli; cli()", "run", "--mode", "demand",
                           "--capacity", "48M", "--", "./cuda_app", "symbol", "layers-unmarked", "12", str(LAYERS)],
                          env=environ, capture_output=True, text=True, timeout=60, cwd=FAKE)
    assert done.returncode == 0, done.stderr
    assert "mode demand" in done.stderr and "engine: fault source cupti, budget 0.05 GiB" in done.stderr
    assert "(9 iterations found without the program's marks)" in done.stderr
    assert re.search(r"faults [\d,]+ events, [\d,]+ missed blocks, [\d,]+ late prefetches", done.stderr), done.stderr


# ---- scripts/bench_train's plumbing, without a GPU ------------------------------------------


def bench_train_on_the_fake_gpu(monkeypatch):
    """scripts/bench_train with cuda_app's layers loop standing in for training (unmarked for
    runs that set BENCH_TRAIN_UNMARKED): the real libdeepum and engine on the fake driver, so
    the statistics, the comparison, the table and the figure are the real code's."""
    import json as _json

    bench_train = load_script("bench_train")
    probe = {"free_bytes": 80 << 30, "total_bytes": 80 << 30, "gpu": "fake", "needs_bytes": 1 << 30,
             "pinned_h2d_GBps": 50.0, "pinned_d2h_GBps": 50.0}

    def stand_in(args: list[str]) -> list[str]:
        if args[0] == "probe":
            return ["echo", _json.dumps(probe)]
        measured, warmup, _max_warmup = map(int, args[2:5])
        assert args[5:] == [], args  # deterministic kernels only for --smoke's numerics
        total = warmup + measured  # every iteration takes as long: settled at once
        line = _json.dumps({"description": "layers", "iteration_s": [0.01] * total, "losses": [1.0] * total,
                            "warmup": warmup, "settled": None,
                            "peak_reserved_bytes": FOOTPRINT_BLOCKS * BLOCK, "peak_allocated_bytes": 0,
                            "libdeepum": True})
        scenario = 'layers$([ "$BENCH_TRAIN_UNMARKED" = 1 ] && echo -unmarked)'
        return ["sh", "-c", f"{FAKE}/cuda_app symbol {scenario} {total} {LAYERS} >/dev/null && echo '{line}'"]

    monkeypatch.setattr(bench_train, "worker_command", stand_in)
    monkeypatch.setattr(bench_train, "LIB", LIB_FAULTS)
    monkeypatch.setenv("DEEPUM_TEST_LOCKSTEP", "1")  # the fake GPU has no time of its own
    monkeypatch.setenv("LD_LIBRARY_PATH", str(FAKE))
    monkeypatch.setenv("DEEPUM_CUPTI", str(FAKE_CUPTI))
    monkeypatch.setenv("DEEPUM_FAULTS", "cupti")
    monkeypatch.setenv("DEEPUM_WRITE_EVERY", "1")
    return bench_train


@pytest.mark.plain_build  # bench_train starts its runs with the auditor
def test_bench_train_runs_every_configuration_and_reads_the_engine(tmp_path, monkeypatch):
    """bench() end to end on the fake GPU."""
    bench_train = bench_train_on_the_fake_gpu(monkeypatch)
    swept, refused = "deepum+LOOKAHEAD_BLOCKS=4", "deepum+LOOKAHEAD_BLOCKS=99999999"
    report = bench_train.bench("gpt2", [0.5, 0.75], iterations=3, warmup=3, out=tmp_path, deadline=180,
                               timeout=60, smoke=False, runs=("deepum", "demand", swept, refused))
    assert report["safety"]["ok"] and [b["fraction"] for b in report["budgets"]] == [0.5, 0.75]
    assert report["iteration_timed"].startswith("from its mark")
    # a run's +SETTING=VALUE reaches libdeepum: in range it runs, out of range libdeepum says why not
    for budget in report["budgets"]:
        assert budget["runs"][swept]["active"] and budget["runs"][swept]["prefetched_blocks"] > 0
        assert not budget["runs"][refused]["active"]
        assert "DEEPUM_LOOKAHEAD_BLOCKS" in budget["runs"][refused]["disabled_reason"]
    for budget in report["budgets"]:
        deepum, demand = budget["runs"]["deepum"], budget["runs"]["demand"]
        assert deepum["active"] and demand["active"], (deepum, demand)
        assert deepum["fault_source"] == "cupti" and deepum["prefetched_blocks"] > 0
        assert deepum["launches_per_iteration"] == demand["launches_per_iteration"] == 2 * LAYERS
        assert demand["prefetched_blocks"] == 0 and demand["faulted_blocks"] > deepum["faulted_blocks"]
        # every iteration's time, warm-up included, beside the measured ones' median
        assert len(deepum["iteration_s_all"]) == 6
        assert deepum["iteration_s"] == statistics.median(deepum["iteration_s_all"][3:])
        assert 0 < budget["comparison"]["coverage"] <= 1 and 0 < budget["comparison"]["accuracy"] <= 1
    # the table's last columns: the GPU's observed peak and mean residency over the budget
    rows = {(cells[0], cells[1]): cells for cells in map(str.split, bench_train.table(report)) if len(cells) > 2}
    for budget in report["budgets"]:
        peak = budget["runs"]["deepum"]["observed_peak_blocks"] * BLOCK / budget["capacity_bytes"]
        deepum_row, swept_row = rows[f"{budget['fraction']:.0%}", "deepum"], rows[f"{budget['fraction']:.0%}", swept]
        mean = budget["runs"]["deepum"]["observed_mean_blocks"] * BLOCK / budget["capacity_bytes"]
        assert float(deepum_row[-2]) == pytest.approx(peak, abs=0.005)
        assert float(deepum_row[-1]) == pytest.approx(mean, abs=0.005) and 0 < mean <= peak
        # coverage and accuracy for every prefetching run, against demand's faults
        assert float(deepum_row[-4]) == pytest.approx(budget["comparison"]["coverage"], abs=0.0005)
        assert 0 < float(swept_row[-4]) <= 1 and 0 < float(swept_row[-3]) <= 1
    assert len(bench_train.verdicts(report)) >= 2
    assert bench_train.plot([report], tmp_path / "bench.png").startswith("wrote") and (tmp_path / "bench.png").exists()
    # the time between marks by the engine's clock, and the same re-read from the saved statistics
    (tmp_path / "bench_train-gpt2.json").write_text(json.dumps(report))
    saved = bench_train.saved_between_marks(tmp_path / "bench_train-gpt2.json")
    for budget in report["budgets"]:
        for name in ("deepum", "demand"):
            between = budget["runs"][name]["between_marks_s"]
            assert between > 0 and saved[budget["fraction"], name] == pytest.approx(between), (name, budget)
    assert any("deepum over demand" in line for line in bench_train.marks_table([tmp_path / "bench_train-gpt2.json"]))
    # beside each run's statistics, the host's free memory before it
    host = json.loads((tmp_path / "bench_train-gpt2-deepum-50.host.json").read_text())
    assert "MemFree" in host["meminfo"] and any(orders for orders in host["free_blocks_by_order"].values())


@pytest.mark.plain_build  # bench_train starts its runs with the auditor
def test_bench_train_measures_a_program_that_marks_no_iteration(tmp_path, monkeypatch):
    """deepum-unmarked: the program makes no mark (bench_train's worker skips them), libdeepum
    finds its iterations, and the measured ones are the last whole ones detected (after the
    iterations the engine takes to learn back what it forgot at the first detected mark)."""
    bench_train = bench_train_on_the_fake_gpu(monkeypatch)
    report = bench_train.bench("gpt2", [0.5], iterations=3, warmup=12, out=tmp_path, deadline=180,
                               timeout=60, smoke=False, runs=("deepum", "deepum-unmarked"))
    marked, unmarked = (report["budgets"][0]["runs"][name] for name in ("deepum", "deepum-unmarked"))
    assert marked["iterations_detected"] == 0 and unmarked["iterations_detected"] >= 4, unmarked
    # the last three detected iterations: whole loops, learned (nothing faults any more)
    assert unmarked["launches_per_iteration"] == marked["launches_per_iteration"] == 2 * LAYERS
    assert unmarked["faulted_blocks"] == marked["faulted_blocks"] == 0 and unmarked["prefetched_blocks"] > 0


@pytest.mark.plain_build  # bench_train starts its runs with the auditor
def test_a_program_that_marks_no_iteration_learns_back_what_it_forgot(tmp_path, monkeypatch):
    """Forgetting an unsettled start where libdeepum detects the iterations:
    its first mark comes after three loops, so the core forgets tables that
    were right, in a loop shorter than the prefetch window.  The window walks
    no kernel more than an iteration ahead, and walks the next kernel again
    once it has start blocks; before, every later iteration faulted ~26 blocks
    evicted just before their use."""
    bench_train = bench_train_on_the_fake_gpu(monkeypatch)
    report = bench_train.bench("gpt2", [0.5], iterations=3, warmup=12, out=tmp_path, deadline=180,
                               timeout=60, smoke=False, runs=("deepum-unmarked+FORGET_UNSETTLED=1",))
    forgetting = report["budgets"][0]["runs"]["deepum-unmarked+FORGET_UNSETTLED=1"]
    assert forgetting["iterations_detected"] >= 4, forgetting
    assert forgetting["faulted_blocks"] == 0 and forgetting["prefetched_blocks"] > 0, forgetting


def test_bench_train_refuses_managed_runs_beyond_the_safety_rule(tmp_path, monkeypatch):
    import json as _json

    bench_train = load_script("bench_train")
    probe = {"free_bytes": 10 << 30, "total_bytes": 80 << 30, "gpu": "fake", "needs_bytes": 1 << 30,
             "pinned_h2d_GBps": 50.0, "pinned_d2h_GBps": 50.0}
    resident = {"description": "big", "iteration_s": [0.01] * 4, "losses": [1.0] * 4, "warmup": 2,
                "peak_reserved_bytes": 9 << 30, "peak_allocated_bytes": 0, "libdeepum": False}
    monkeypatch.setattr(bench_train, "worker_command",
                        lambda args: ["echo", _json.dumps(probe if args[0] == "probe" else resident)])
    report = bench_train.bench("gpt2", [0.5], iterations=2, warmup=2, out=tmp_path, deadline=60, timeout=30,
                               smoke=False)
    assert not report["safety"]["ok"] and "safety rule" in report["error"] and report["budgets"] == []


def test_bench_train_warms_up_until_iterations_stop_getting_faster():
    bench_train = load_script("bench_train")
    # GPT-2 XL at 75% on the H200 (fourteenth session), the engine learning for ten iterations
    xl = [4.09, 7.36, 6.55, 5.98, 3.74, 3.93, 3.28, 3.61, 2.70, 3.33, 2.62, 3.65, 2.73, 3.15, 2.99, 3.14]
    times = iter(xl)
    seconds, warmed = bench_train.timed_iterations(lambda: next(times), 3, warmup=3, max_warmup=20)
    # medians 3.33 against 3.28 at the twelfth: not 5% faster any more
    assert warmed == 12 and seconds == xl[:15] and bench_train.settled(seconds[:warmed])
    assert not any(bench_train.settled(xl[:n]) for n in range(12))
    # the limit ends a warm-up that has not settled; the minimum one that has
    times = iter(xl)
    assert bench_train.timed_iterations(lambda: next(times), 2, warmup=3, max_warmup=8)[1] == 8
    assert bench_train.timed_iterations(lambda: 1.0, 2, warmup=7, max_warmup=20) == ([1.0] * 9, 7)
    # without --settle the warm-up is --warmup iterations, whatever the times
    assert bench_train.timed_iterations(lambda: 1.0, 4, warmup=3, max_warmup=3) == ([1.0] * 7, 3)


def test_bench_train_numerics_judge_every_managed_run_against_resident_noise():
    numerics = load_script("bench_train").numerics
    plain, again = [2.0, 1.5, 1.25], [2.0, 1.5, 1.2500001]  # noise 8e-8: the 1e-5 floor applies
    n = numerics(plain, again, {"deepum": [2.0, 1.5, 1.25], "deepum-writer": [2.0, 1.5, 1.26], "demand": [2.0]})
    assert {name: r["ok"] for name, r in n["runs"].items()} == {"deepum": True, "deepum-writer": False,
                                                                "demand": False}  # too short: a run died
    assert not n["ok"] and n["difference"] == pytest.approx(0.01 / 1.26)
    assert numerics(plain, again, {"deepum": plain})["ok"] and not numerics(plain, again, {})["ok"]


def test_the_pending_gpu_measurements_name_runs_and_scripts_that_exist():
    """scripts/gpu/pending_measurements: every step's commands, dry-run, use
    scripts that exist and bench_train models and runs it knows."""
    script = ROOT / "scripts/gpu/pending_measurements"
    steps = subprocess.run([sys.executable, str(script), "--list"], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    names = [line.split()[0] for line in steps if line.strip()]
    assert names
    bench_train = load_script("bench_train")
    for name in names:
        printed = subprocess.run([sys.executable, str(script), name, "--out", "/nonexistent", "--dry-run"],
                                 capture_output=True, text=True, check=True).stdout
        commands = [line.split() for line in printed.splitlines() if not re.match(r"^[A-Z_]+=", line)]
        assert commands, name
        for words in commands:
            assert (ROOT / words[1]).exists() or words[1] == "-m", words
            if words[1] == "scripts/bench_train":
                assert words[2] in bench_train.MODELS, words
            if "--runs" in words:
                for run in words[words.index("--runs") + 1].split(","):
                    bench_train.run_settings(run)  # ValueError if bench_train does not know it


def test_the_pending_gpu_measurements_compress_the_engine_logs_they_write(tmp_path):
    """A step's engine logs come back gzipped (a GPT-2 XL run's is ~45 MB, over
    what the device tool returns), the same bytes, and nothing else is touched."""
    compress = load_script("gpu/pending_measurements").compress_engine_logs
    text = "config flags=200 t=1\n" * 1000
    (tmp_path / "engine-42.log").write_text(text)
    (tmp_path / "bench_train-gpt2-xl.json").write_text("{}")
    assert compress(tmp_path) == [tmp_path / "engine-42.log.gz"]
    assert gzip.decompress((tmp_path / "engine-42.log.gz").read_bytes()).decode() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench_train-gpt2-xl.json", "engine-42.log.gz"]


def test_bench_train_run_names_carry_settings_and_bad_ones_are_refused():
    run_settings = load_script("bench_train").run_settings
    lib = load_script("bench_train").LIB
    assert run_settings("deepum-no-issuer+WATERMARK=64+LOOKAHEAD_BLOCKS=128") == (
        "user", {"DEEPUM_ISSUER": "0", "DEEPUM_WATERMARK": "64", "DEEPUM_LOOKAHEAD_BLOCKS": "128"}, lib)
    assert run_settings("demand") == ("demand", {}, lib)
    before = Path("/builds/before/libdeepum.so")
    assert run_settings("deepum+WRITER=1@before", {"before": before}) == ("user", {"DEEPUM_WRITER": "1"}, before)
    for bad in ("resident", "deepum+lookahead_blocks=1", "deepum+WATERMARK", "deepum+WATERMARK=", "deepum+",
                "deepum@before", "deepum@"):
        with pytest.raises(ValueError):
            run_settings(bad)


@pytest.mark.plain_build  # bench_train starts its runs with the auditor
def test_bench_train_repeats_every_configuration_and_reports_the_median_try(tmp_path, monkeypatch):
    """--repeat: every name runs N times, the tries alternating, and its row is the
    median try's with every try's time beside it; a failed try is reported, not hidden."""
    bench_train = bench_train_on_the_fake_gpu(monkeypatch)
    order = []
    real_run = bench_train.run

    def counted(args, env, timeout):
        if args[0] == "train" and "DEEPUM_MODE" in env:
            order.append(env["DEEPUM_MODE"])
        return real_run(args, env, timeout)

    monkeypatch.setattr(bench_train, "run", counted)
    report = bench_train.bench("gpt2", [0.5], iterations=3, warmup=3, out=tmp_path, deadline=180,
                               timeout=60, smoke=False, runs=("deepum", "demand"), repeat=3)
    assert order == ["user", "demand"] * 3
    runs = report["budgets"][0]["runs"]
    for name in ("deepum", "demand"):
        tries = runs[name]["iteration_s_tries"]
        assert len(tries) == 3 and runs[name]["iteration_s"] == statistics.median(tries)
    assert sorted(p.name for p in tmp_path.glob("*-deepum-50*.stats.json")) == [
        "bench_train-gpt2-deepum-50-try2.stats.json", "bench_train-gpt2-deepum-50-try3.stats.json",
        "bench_train-gpt2-deepum-50.stats.json"]
    assert any(line.split()[:3] == ["deepum", "tried", "3"] for line in bench_train.table(report))
    # the median of an even count is the slower middle try's row; failed tries stay visible
    tries = [{"iteration_s": 0.3, "tag": "slow"}, {"iteration_s": 0.1, "tag": "fast"}, {"error": "exited 1"}]
    row = bench_train.median_run(tries)
    assert row["tag"] == "slow" and row["iteration_s"] == pytest.approx(0.2)
    assert row["iteration_s_tries"] == [0.3, 0.1] and row["repeat_errors"] == ["exited 1"]
    assert bench_train.median_run([{"error": "timed out"}, {"error": "exited 1"}])["repeat_errors"] == [
        "timed out", "exited 1"]
    assert bench_train.median_run([{"iteration_s": 0.5}]) == {"iteration_s": 0.5}


def test_bench_train_says_when_tries_did_not_settle_alike():
    """GPT-2's demand at 75% on the H200 (twenty-sixth session, call 6): one
    try settled at 865 ms, the other at 2,169; their median is a time no try
    took.  The table says the tries are 2.5x apart, and each try's mean
    residency against the budget (the fast one held more than its budget)."""
    bench_train = load_script("bench_train")
    call = ROOT / "docs/results/bench_train-2026-12-02k/call6/tries-75-gpt2-again"
    report = json.loads((call / "bench_train-gpt2.json").read_text())
    budget = report["budgets"][0]

    def try_row(stats: str, seconds: float) -> dict:
        measured = json.loads((call / stats).read_text())["engine"]["iterations"][6:9]
        mean = sum(it["resident_block_ns"] for it in measured) / sum(it["watched_ns"] for it in measured)
        return {**budget["runs"]["demand"], "iteration_s": seconds, "observed_mean_blocks": mean}

    fast, slow = budget["runs"]["demand"]["iteration_s_tries"]
    budget["runs"]["demand"] = bench_train.median_run([try_row("bench_train-gpt2-demand-75.stats.json", fast),
                                                       try_row("bench_train-gpt2-demand-75-try2.stats.json", slow)])
    lines = [line.strip() for line in bench_train.table(report)]
    assert ("demand tried 2 times: 864.9 / 2169.4 ms (the median above), resident on average 1.07 / 1.04 of the "
            "budget") in lines, lines
    assert "demand's tries are 2.5x apart: more than one steady state, which the median mixes" in lines
    assert not any(line.startswith("deepum's tries") for line in lines)  # 762.9 and 844.7 ms


def test_the_engine_log_report_says_when_the_pairs_it_prefetches_were_learned():
    """Each measured prefetch by the iteration its (kernel, block) pair first faulted in:
    the tables keep what they learn, so early iterations' pairs are prefetched for good."""
    lines = ["iteration 0 t=0", "fault exec=1 0x200000 at=1 t=1", "iteration 1 t=2",
             "fault exec=2 0x400000 at=3 t=3", "fault exec=1 0x200000 at=3 t=3",  # learned in 0 already
             "iteration 2 t=4", "prefetch exec=1 0x200000 blocks=1 t=5",
             "prefetch exec=2 0x400000 blocks=2 t=6",   # 0x400000 learned in 1, 0x600000 never faulted
             "prefetch exec=3 0x200000 blocks=1 t=7"]   # another kernel's block: never its pair
    assert enginelog.analyse(lines, 2).prefetches_by_pair_learned == {"0": 1, "1": 1, "never": 2}
    assert enginelog.analyse(lines, 3).prefetches_by_pair_learned == {"never": 0}  # nothing measured
