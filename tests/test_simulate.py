"""The simulator: hand-computed times on hand-made traces, the ordering of
policies, and its validation against the H200 run behind the bundled trace."""

from __future__ import annotations

import json

import numpy as np
import pytest

from testlib import BLOCK, DATA, blk, load_script, rec
from pydeepum import calibration
from pydeepum._lowlevel import lib
from pydeepum.config import default_config, make_settings
from pydeepum.errors import DeepumInputError, RecordError
from pydeepum.replay import replay
from pydeepum.simulate import POLICIES, compute_from_profile, compute_from_trace, cost_model, simulate
from pydeepum.synth import SynthSpec, generate
from pydeepum.trace import FAULT, ITER_END, ITER_FLUSHED, ITERATION, LAUNCH, Trace

# The engine's in-run write-back cost as the ninth session's logs fit it (calibration fields), which
# the tests below that quote it were written against; the calibration's fit has since moved
NINTH_SESSION_WRITE_BACKS = {"engine_write_back_per_range_us": 86, "engine_write_back_per_2MiB_us": 201}

PROFILE = DATA / "h200" / "gpt2-resident-kernels.csv.gz"

# Round numbers: a 2 MiB copy takes 1 ms on every link, a fault round 10 us.
COST = {
    "h2d_bytes_per_sec": 2 * BLOCK * 500, "d2h_bytes_per_sec": 2 * BLOCK * 500,
    "prefetch_bytes_per_sec": 2 * BLOCK * 500, "evict_bytes_per_sec": 2 * BLOCK * 500,
    "user_evict_bytes_per_sec": 2 * BLOCK * 500,
    "fault_ns": 10_000, "prefetch_range_ns": 0, "evict_range_ns": 0, "discard_ns": 0,
    "fault_bytes": 64 * 1024, "tree_threshold_pct": 51, "both_ways_overlap_pct": 100,
}
MS = 1_000_000
LRM_VICTIMS = lib.DEEPUM_CFG_F_LRM_VICTIMS


def trace_of(*records) -> Trace:
    return Trace(records=np.array(list(records)))


def one_kernel(blocks: list[int], iterations: int = 1) -> Trace:
    recs = []
    for it in range(iterations):
        recs.append(rec(ITERATION, aux=it, flags=ITER_FLUSHED))
        recs.append(rec(LAUNCH, exec_id=0, length=MS))
        recs += [rec(FAULT, blk(b), BLOCK, exec_id=0, aux=1) for b in blocks]
    recs.append(rec(ITERATION, aux=iterations, flags=ITER_END))
    return trace_of(*recs)


def run(trace: Trace, policy: str, capacity: int = 0):
    report = simulate(trace, [capacity], [policy], make_settings(), COST, compute_from_trace(trace),
                      steady_from=0)
    return report.steady(policy, capacity)


def test_keeping_memory_across_iterations_charges_the_evictions_a_flush_hid():
    # Four blocks a kernel, room for two: with flushes every iteration starts
    # empty; kept resident, the blocks left from the last iteration must go.
    trace = one_kernel([1, 2, 3, 4], iterations=3)
    flushed = run(trace, "demand", 2 * BLOCK)[2]
    kept = run(trace.without_flushes(), "demand", 2 * BLOCK)[2]
    assert flushed.evictions == 2 and kept.evictions == 4
    assert kept.time_ns == flushed.time_ns + 2 * MS  # two more 1 ms write-backs on the fault path
    assert trace.records["flags"][trace.records["type"] == ITERATION].tolist() == [1, 1, 1, ITER_END]


def test_no_iteration_has_more_useful_prefetches_than_it_issued():
    # Eight kernels of one block each, looping with memory kept and room for
    # four: prefetches issued near an iteration's end serve the next one, and
    # count for the iteration that issued them.
    recs = []
    for it in range(6):
        recs.append(rec(ITERATION, aux=it))
        for k in range(8):
            recs += [rec(LAUNCH, exec_id=k, length=MS), rec(FAULT, blk(10 + k), BLOCK, exec_id=k, aux=1)]
    recs.append(rec(ITERATION, aux=6, flags=ITER_END))
    its = run(trace_of(*recs), "deepum", 4 * BLOCK)
    assert sum(it.prefetches for it in its) > 0 and sum(it.useful for it in its) > 0
    assert all(it.useful <= it.prefetches for it in its), [(it.useful, it.prefetches) for it in its]


def test_refetches_count_blocks_prefetched_twice_in_one_iteration():
    # Kernels of one block each, 5 6 5, with room for one: block 5 leaves
    # for 6 and comes back, whatever the policy.
    recs = [rec(ITERATION, aux=0)]
    for k, b in enumerate([5, 6, 5]):
        recs += [rec(LAUNCH, exec_id=k, length=MS), rec(FAULT, blk(b), BLOCK, exec_id=k, aux=1)]
    recs.append(rec(ITERATION, aux=1, flags=ITER_END))
    tight, roomy = (run(trace_of(*recs), "oracle", capacity)[0] for capacity in (BLOCK, 2 * BLOCK))
    assert (tight.prefetches, tight.refetches, tight.evictions) == (3, 1, 2)
    assert (roomy.prefetches, roomy.refetches, roomy.evictions) == (2, 0, 0)
    trace = trace_of(*recs)
    summary = simulate(trace, [BLOCK], ["oracle"], make_settings(), COST, compute_from_trace(trace),
                       steady_from=0).summary()
    assert [row["refetches"] for row in summary] == [1]  # what deepumctl simulate shows and --json gives


def test_uvm_fault_is_rounds_then_copy():
    it = run(one_kernel([5]), "uvm")[0]
    # 32 pages of 64 KiB; the tree prefetcher stops faults after 51%: 17 rounds.
    assert it.fault_stall_ns == 17 * 10_000 + 2 * MS // 2
    assert it.time_ns == MS + it.fault_stall_ns
    assert (it.faults, it.h2d_bytes) == (1, BLOCK)


def test_demand_faults_every_page():
    it = run(one_kernel([5]), "demand")[0]
    assert it.fault_stall_ns == 32 * 10_000 + MS // 1


def test_full_gpu_evicts_on_the_fault_path():
    it = run(one_kernel([5, 6, 7]), "uvm", capacity=2 * BLOCK)[0]
    assert it.fault_evictions == 1
    assert it.fault_stall_ns == 3 * (17 * 10_000 + MS) + MS  # + one 2 MiB copy back


def test_the_user_mode_engine_makes_room_after_the_fault_not_before():
    # Under DEEPUM_CAPACITY the real GPU has room: the eviction a fault calls
    # for goes down the engine's stream and the kernel does not wait for it.
    kernel_module, user_mode = (run(one_kernel([5, 6, 7]), p, capacity=2 * BLOCK)[0]
                                for p in ("deepum", "deepum-user"))
    assert kernel_module.fault_evictions == user_mode.fault_evictions == 1
    assert kernel_module.fault_stall_ns == 3 * (17 * 10_000 + MS) + MS
    assert user_mode.fault_stall_ns == 3 * (17 * 10_000 + MS)
    assert user_mode.d2h_bytes == kernel_module.d2h_bytes == BLOCK


def test_the_emulated_demand_mode_writes_back_after_the_fault_and_its_victims_stay_until_then():
    # DEEPUM_MODE=demand under DEEPUM_CAPACITY: the GPU has room, so a fault
    # never waits for a write-back; the engine writes the oldest block back on
    # its stream, and a victim whose write-back has not started is still on
    # the GPU.  Write-backs take 4 ms here, faults 1.17 ms: block 6's starts
    # only once block 5's is done, after the kernel used 6 again.
    slow_writes = {**COST, "user_evict_bytes_per_sec": 2 * BLOCK * 125}
    trace = one_kernel([5, 6, 7, 8, 6])
    stock, emulated = (simulate(trace, [2 * BLOCK], [p], make_settings(), slow_writes, compute_from_trace(trace),
                                steady_from=0).steady(p, 2 * BLOCK)[0] for p in ("uvm", "uvm-user"))
    assert (stock.faults, stock.fault_evictions) == (5, 3)
    assert stock.fault_stall_ns == 5 * (17 * 10_000 + MS) + 3 * MS  # each eviction on the fault path (d2h: 1 ms)
    assert (emulated.faults, emulated.evictions, emulated.lingering) == (4, 2, 1)
    assert stock.lingering == 0
    assert emulated.fault_stall_ns == 4 * (17 * 10_000 + MS)
    assert emulated.d2h_bytes == 2 * BLOCK


def test_oracle_prefetches_everything_at_link_speed():
    it = run(one_kernel([5, 6, 7]), "oracle")[0]
    assert it.faults == 0 and it.prefetches == 3
    # Issued at the kernel's start, back to back: the kernel waits for the last.
    assert it.late_stall_ns == 3 * MS
    assert it.time_ns == 4 * MS


def test_oracle_fetches_each_block_once_when_each_is_used_once():
    # Six blocks used once each, room for three: Belady's minimum is six
    # fetches. Blocks fetched ahead for later records must not push out the
    # one needed now (an earlier version fetched nine).
    for it in run(one_kernel([1, 2, 3, 4, 5, 6], iterations=2), "oracle", capacity=3 * BLOCK):
        assert (it.prefetches, it.h2d_bytes, it.evictions) == (6, 6 * BLOCK, 3)


def test_oracle_waits_for_the_room_an_eviction_makes():
    # Room for two of three blocks, write-backs at half the link's rate (2 ms):
    # 5 lands at 1 ms, 6 at 2 ms; 7 needs 5's room, free once 5 is written
    # back (1 + 2 = 3 ms), and lands at 4 ms. The kernel then computes 1 ms.
    trace = one_kernel([5, 6, 7])
    report = simulate(trace, [2 * BLOCK], ["oracle"], make_settings(),
                      {**COST, "evict_bytes_per_sec": COST["evict_bytes_per_sec"] // 2}, compute_from_trace(trace),
                      steady_from=0)
    (it,) = report.steady("oracle", 2 * BLOCK)
    assert (it.evictions, it.time_ns) == (1, 5 * MS)


def test_the_ideal_bound_counts_the_fewest_bytes_any_policy_moves():
    # Six blocks in a loop with room for three, memory kept: Belady's MIN keeps
    # two and fetches three a turn (3 ms of link), while the oracle's
    # aggressive prefetching cycles all six through memory.
    trace = one_kernel([1, 2, 3, 4, 5, 6], iterations=4).without_flushes()
    for policy in ("oracle", "uvm", "deepum"):
        steady = run(trace, policy, capacity=3 * BLOCK)[1:3]
        assert [it.ideal_ns for it in steady] == [3 * MS, 3 * MS]
        assert all(it.ideal_ns <= it.time_ns and it.h2d_bytes >= 3 * BLOCK for it in steady)
    assert [it.h2d_bytes for it in run(trace, "oracle", capacity=3 * BLOCK)[1:3]] == [6 * BLOCK] * 2


def test_deepum_learns_then_prefetches():
    items = run(one_kernel([5, 6, 7, 8], iterations=3), "deepum")
    assert items[0].faults == 4 and items[0].prefetches == 0
    assert items[2].faults == 0 and items[2].prefetches == 4
    # One coalesced range: all four land after 4 ms.
    assert items[2].time_ns == MS + 4 * MS


@pytest.fixture(scope="module")
def gpt2_kept():
    """libdeepum's GPT-2 trace with memory kept across iterations, resident compute times."""
    trace = Trace.read(DATA / "libdeepum/h200-gpt2-124m-bs8x512-accessset-6it.dut.gz").without_flushes()
    return trace, compute_from_profile(trace, DATA / "h200/gpt2-resident-kernels.csv.gz")


@pytest.fixture(scope="module")
def gpt2_report(gpt2):
    cost = cost_model(calibration.load())
    compute = compute_from_profile(gpt2, PROFILE)
    return simulate(gpt2, [0, 4 << 30], ["demand", "uvm", "deepum", "oracle"], make_settings(), cost,
                    compute, "profile")


def test_policies_are_ordered(gpt2_report):
    for cap in (0, 4 << 30):
        for i in range(2, 6):
            by = {it.policy: it for it in gpt2_report.iterations
                  if it.capacity_bytes == cap and it.iteration == i}
            for p in ("demand", "uvm", "deepum", "oracle"):
                assert by[p].ideal_ns <= by[p].time_ns, (cap, i, p)
            for p in ("demand", "uvm", "deepum"):  # each iteration starts empty: the oracle is the best
                assert by["oracle"].time_ns <= by[p].time_ns, (cap, i, p)
            assert by["uvm"].time_ns < by["demand"].time_ns


def test_deepum_beats_stock_uvm_by_a_lot(gpt2_report):
    assert gpt2_report.mean_time_ns("uvm", 0) > 4 * gpt2_report.mean_time_ns("deepum", 0)
    assert gpt2_report.coverage("deepum", 0) >= 0.95


def test_stock_uvm_matches_the_h200_within_20_percent(gpt2, gpt2_report):
    """The capture ran on the stock driver (UVM's own prefetcher on): its
    measured kernel span per iteration against the `uvm` prediction."""
    launches = gpt2.records["type"] == LAUNCH
    predicted = {it.iteration: it.time_ns for it in gpt2_report.iterations
                 if it.policy == "uvm" and it.capacity_bytes == 0}
    for i, start, end in gpt2.iteration_bounds():
        ks = gpt2.records[start:end][launches[start:end]]
        measured = int(ks["ts"][-1] + ks["len"][-1] - ks["ts"][0])
        if i == 0:
            continue  # allocator warm-up; see docs/SIMULATOR.md
        assert abs(predicted[i] - measured) / measured <= 0.20, (i, predicted[i], measured)


def test_profile_must_match_the_trace(gpt2, tmp_path):
    bad = tmp_path / "p.csv"
    bad.write_text("iteration,dur_ns\n0,5\n0,6\n")
    with pytest.raises(DeepumInputError, match="kernels per profiled iteration"):
        compute_from_profile(gpt2, bad)


def test_an_iteration_the_profile_does_not_match_is_timed_by_launch_shape(tmp_path):
    """A trace from the program's first step: its first iteration launches
    set-up kernels the profiled (settled) iterations do not have."""
    profile = tmp_path / "p.csv"
    profile.write_text("iteration,dur_ns,gx,gy,gz,bx,by,bz\n"
                       "0,100,8,1,1,256,1,1\n0,30,2,1,1,64,1,1\n"
                       "1,120,8,1,1,256,1,1\n1,50,2,1,1,64,1,1\n")
    recs = [rec(ITERATION, aux=0)]
    recs += [rec(LAUNCH, exec_id=e) for e in (2, 0, 0)]  # set-up kernel, then the step's first kernel twice
    recs += [rec(ITERATION, aux=1)] + [rec(LAUNCH, exec_id=e) for e in (0, 1)]
    recs += [rec(ITERATION, aux=2, flags=ITER_END)]
    shapes = [["k", [8, 1, 1], [256, 1, 1], None], ["k2", [2, 1, 1], [64, 1, 1], None], ["setup", [1, 1, 1], [32, 1, 1], None]]
    trace = Trace(records=np.array(recs), meta={"kernels": shapes})
    # the set-up kernel's shape was never profiled: the median kernel (median of 110 and 40)
    assert compute_from_profile(trace, profile).tolist() == [75, 110, 110, 110, 40]
    # no iteration the profile matches: refused
    unmatched = Trace(records=np.array(recs[:4] + recs[-1:]), meta={"kernels": shapes})
    with pytest.raises(DeepumInputError, match="kernels per profiled iteration"):
        compute_from_profile(unmatched, profile)
    # a launch before the first iteration mark has no iteration to be timed in
    early = Trace(records=np.array([rec(LAUNCH, exec_id=0)] + recs), meta={"kernels": shapes})
    with pytest.raises(DeepumInputError, match="outside its iterations"):
        compute_from_profile(early, profile)


def test_bad_requests(gpt2):
    cost = cost_model(calibration.load())
    compute = compute_from_trace(gpt2)
    with pytest.raises(DeepumInputError, match="unknown policy"):
        simulate(gpt2, [0], ["magic"], make_settings(), cost, compute)
    with pytest.raises(DeepumInputError, match="less than one block"):
        simulate(gpt2, [1024], ["uvm"], make_settings(), cost, compute)
    with pytest.raises(DeepumInputError, match="one compute time per LAUNCH"):
        simulate(gpt2, [0], ["uvm"], make_settings(), cost, compute[:-1])
    with pytest.raises(DeepumInputError, match="calibration lacks"):
        cost_model({"link_h2d_pinned_GBps": 1})


def test_synthetic_loop_under_pressure():
    t = generate(SynthSpec(layers=8, iterations=5, drift=0.0, access_set=False))
    cap = 512 << 20  # of about 900 MiB touched per iteration
    report = simulate(t, [cap], ["uvm", "deepum", "oracle"], make_settings(),
                      cost_model(calibration.load()), compute_from_trace(t))
    assert report.mean_time_ns("oracle", cap) <= report.mean_time_ns("deepum", cap)
    assert report.mean_time_ns("deepum", cap) < report.mean_time_ns("uvm", cap)


def test_unset_fields_take_the_cores_defaults_at_each_capacity():
    """An engine given a budget leaves the window unset and its core takes at
    most a quarter of the budget; the simulator does the same per capacity
    (it had taken the default for no capacity, 1,024 blocks, at all of them)."""
    from pydeepum.config import make_config

    t = generate(SynthSpec(layers=8, iterations=5, drift=0.0, access_set=False))
    cap = 512 << 20
    quarter = (cap >> t.block_shift) // 4
    cost, compute = cost_model(calibration.load()), compute_from_trace(t)

    def times(cfg):
        report = simulate(t, [cap], ["deepum"], cfg, cost, compute)
        return [it.time_ns for it in report.iterations]

    assert make_config(cap).lookahead_blocks == quarter
    assert times(make_settings()) == times(make_settings(lookahead_blocks=quarter))
    assert times(make_settings()) != times(make_config())  # checked with no capacity: 1,024


def test_the_engines_policies_keep_libdeepums_room_under_a_budget():
    """libdeepum's engine pre-evicts to a watermark of a 32nd of its budget
    (at least the core's 8 blocks; userlib/engine_defaults.h), the module to
    the core's 8: an unset watermark is simulated as each would run it."""
    t = generate(SynthSpec(layers=24, iterations=5, drift=0.0, access_set=False))
    cap = 1 << 30  # 512 blocks: the engine keeps 16
    cost, compute = cost_model(calibration.load()), compute_from_trace(t)

    def times(policy, cfg):
        return [it.time_ns for it in simulate(t, [cap], [policy], cfg, cost, compute).iterations]

    for policy in ("deepum-user", "deepum-issuer", "deepum-split"):
        assert times(policy, make_settings()) == times(policy, make_settings(watermark_blocks=16)), policy
        assert times(policy, make_settings()) != times(policy, make_settings(watermark_blocks=8)), policy
    assert times("deepum", make_settings()) == times("deepum", make_settings(watermark_blocks=8))


def test_one_stream_for_evictions_and_prefetches_makes_prefetches_late_and_victims_linger():
    """The user-mode engine's stream runs its write-backs and prefetches one
    after another: its prefetches arrive late where the kernel module's,
    overlapped on the two links, do not.  And under an emulated capacity a
    victim stays on the GPU until its write-back starts, so some uses that
    would fault on a GPU that small find it still there.  Launches heard one
    by one (a position per launch), as the module hears them: only the
    stream differs."""
    t = generate(SynthSpec(layers=8, iterations=5, drift=0.0, access_set=False))
    cap = 512 << 20
    report = simulate(t, [cap], ["deepum", "deepum-user"], make_settings(), cost_model(calibration.load()),
                      compute_from_trace(t), write_every=1)
    module, user = report.steady("deepum", cap), report.steady("deepum-user", cap)
    assert sum(it.evictions for it in user) > 0
    assert sum(it.late_stall_ns for it in user) > sum(it.late_stall_ns for it in module)
    assert sum(it.lingering for it in user) > 0 and sum(it.lingering for it in module) == 0


def test_the_engine_hears_launches_a_group_at_a_time():
    """The engine sees where the GPU is from a position written before every
    DEEPUM_WRITE_EVERY-th launch, and ties each fault to the last launch it
    has seen.  With more launches per position than an iteration has (56
    here), it hears the launches only at the iteration's mark, every fault
    goes to the iteration before's last kernel, and its predictions are of
    no use: the misses of a launch-by-launch engine several times over.  The
    module's policy hears every launch, whatever the setting."""
    t = generate(SynthSpec(layers=8, iterations=5, drift=0.0, access_set=False))
    assert {it["launches"] for it in t.iteration_summary()} == {56}
    cap = 512 << 20

    def steady(write_every):
        report = simulate(t, [cap], ["deepum", "deepum-issuer"], make_settings(), cost_model(calibration.load()),
                          compute_from_trace(t), write_every=write_every)
        return {p: [(it.faults, it.time_ns) for it in report.steady(p, cap)] for p in ("deepum", "deepum-issuer")}

    each, per_iteration = steady(1), steady(64)
    assert each["deepum"] == per_iteration["deepum"] == steady(8)["deepum"]
    faults = {we: sum(f for f, _ in runs["deepum-issuer"]) for we, runs in ((1, each), (64, per_iteration))}
    assert faults[1] > 0 and faults[64] > 5 * faults[1], faults
    for bad in (0, lib.DUM_SIM_LAUNCH_GROUP_MAX + 1):
        with pytest.raises(DeepumInputError, match="write_every"):
            simulate(t, [cap], ["deepum-issuer"], make_settings(), cost_model(calibration.load()),
                     compute_from_trace(t), write_every=bad)


def test_write_backs_on_a_stream_of_their_own_gain_only_what_the_driver_overlaps():
    """deepum-split: the issuer engine with its write-backs on a stream of their
    own; a prefetch then waits only for the room its round's write-backs make.
    With the link's two directions at once that pays; the H200's driver runs a
    write-back and a prefetch nearly one after the other (7% overlap), and
    then the split is within a few percent of the one stream."""
    t = generate(SynthSpec(layers=8, iterations=5, drift=0.0, access_set=False))
    cap = 384 << 20
    h200 = cost_model(calibration.load() | NINTH_SESSION_WRITE_BACKS)
    assert h200["both_ways_overlap_pct"] == 7

    def split_over_issuer(pct: int) -> float:
        report = simulate(t, [cap], ["deepum-issuer", "deepum-split"], make_settings(),
                          {**h200, "both_ways_overlap_pct": pct}, compute_from_trace(t))
        assert sum(it.evictions for it in report.steady("deepum-split", cap)) > 0
        return report.mean_time_ns("deepum-split", cap) / report.mean_time_ns("deepum-issuer", cap)

    ratios = [split_over_issuer(pct) for pct in (0, 7, 50, 100)]
    assert ratios == sorted(ratios, reverse=True)
    assert ratios[-1] < 0.9
    assert 0.97 < ratios[1] < 1.03
    unlimited = simulate(t, [0], ["deepum-issuer", "deepum-split"], make_settings(), h200, compute_from_trace(t))
    assert unlimited.mean_time_ns("deepum-split", 0) == unlimited.mean_time_ns("deepum-issuer", 0)  # nothing to write


def test_the_overlap_of_the_two_directions_comes_from_the_calibration():
    # alone: 1 and 3 s per unit each way, 4 s one after the other; together 0.9 of that saves
    # 0.4 s, 40% of the shorter
    measured = {"2MiB_evict_alone_GBps": 1 / 3, "2MiB_prefetch_alone_GBps": 1.0, "2MiB_together_over_serial": 0.9}
    cal = calibration.load()
    assert cost_model({**cal, "evict_and_prefetch_at_once": measured})["both_ways_overlap_pct"] == 40
    slower = {**measured, "2MiB_together_over_serial": 1.15}
    assert cost_model({**cal, "evict_and_prefetch_at_once": slower})["both_ways_overlap_pct"] == 0
    without = {k: v for k, v in cal.items() if k != "evict_and_prefetch_at_once"}
    assert cost_model(without)["both_ways_overlap_pct"] == 100
    with pytest.raises(DeepumInputError, match="2MiB_prefetch_alone_GBps"):
        cost_model({**cal, "evict_and_prefetch_at_once": {"2MiB_evict_alone_GBps": 1.0}})


def test_a_horizon_past_an_iteration_does_not_move_more_than_no_horizon(gpt2_kept):
    """GPT-2 with memory kept at 4.75 GiB, a horizon of 4,096 kernels (3.7
    iterations): a block keeps two marks, its next and its latest predicted
    use, so a horizon that followed the positions several iterations ahead
    made every block look unneeded once its next use passed (11.3 GiB per
    iteration against 8.7 without a horizon).  It stops one iteration ahead."""
    trace, compute = gpt2_kept
    cap = 5102370816
    moved = {}
    for flags in (LRM_VICTIMS, lib.DEEPUM_CFG_F_HORIZON):
        report = simulate(trace, [cap], ["deepum"], make_settings(lookahead_kernels=4096, evict_scan=4096, flags=flags),
                          cost_model(calibration.load()), compute)
        moved[flags] = sum(it.h2d_bytes for it in report.steady("deepum", cap))
    assert moved[lib.DEEPUM_CFG_F_HORIZON] < 0.8 * moved[LRM_VICTIMS], moved


def test_an_engine_in_the_driver_hears_misses_late(gpt2_kept):
    """deepum-user's engine thread makes the driver calls, which return when
    their copies are done, and hears nothing meanwhile; deepum-issuer's
    (DEEPUM_ISSUER=1) hears every miss as it happens.  GPT-2 at the 50%
    budget: the blocked engine walks on from its misses late and misses more
    (13% more since the core predicts kernels by position; 30% before, when a
    window reset threw more of the prediction away).  With the oldest victims,
    as measured: with the last iteration's (the default since API 1.4) the
    simulated difference is gone (739 against 753)."""
    trace, compute = gpt2_kept
    cap = 5102370816
    report = simulate(trace, [cap], ["deepum-user", "deepum-issuer"], make_settings(flags=LRM_VICTIMS),
                      cost_model(calibration.load()), compute)
    faults = {p: sum(it.faults for it in report.steady(p, cap)) for p in ("deepum-user", "deepum-issuer")}
    assert faults["deepum-user"] > 1.1 * faults["deepum-issuer"], faults


def test_per_launch_traces_predict_the_measured_runs():
    """scripts/validate_simulator's per-launch cases (issue 7), with every
    block each kernel touches in the trace, the engine's write-backs costed as
    measured in training runs, and its victims on the GPU until their
    write-backs start.  Against the runs of the traces' own kernels (eighth
    session, the ninth's five calls): `deepum-issuer` within +-20% of the
    engine's three GPT-2 runs, of BERT's in 6 of 10 (the rest 33-65% slow)
    and of ResNet-50's in 4 of 10 (the rest 26-47% fast), with launches heard
    8 at a time as the engine hears them (seventeenth session; one by one:
    BERT 0 of 10).  Those runs kept a block's first and last use.  `uvm-user` (the
    emulated demand mode) within +-20% of every GPT-2 and ResNet-50 demand
    run at half the working set, 33-76% slow for BERT's; at three quarters
    BERT's and ResNet-50's demand runs faulted about half the blocks the
    simulated least-recently-migrated order does (+50..+142%), GPT-2's every
    block every iteration, as simulated (-6%): the two steady states of that
    order (docs/SIMULATOR.md, "Ninth session").  Against the runs before,
    with deterministic algorithms (37-47% more kernels per iteration than the
    traces have): `uvm` within +-20% of all nine demand runs,
    `deepum-issuer` of all 18 engine runs."""
    rows = load_script("validate_simulator").per_launch_cases()
    same = [r for r in rows if "-same-kernels" in r.case]
    assert len({r.case for r in same}) == 12

    def cells(model, run, policy, budgets=(0.5, 0.75)):
        found = [r for r in same if r.case.startswith(model + "-") and r.budget in budgets and
                 r.measured_run == run and r.policy == policy]
        assert found
        return found

    engine = {model: cells(model, "deepum", "deepum-issuer") for model in ("gpt2", "bert", "resnet50")}
    assert [len(engine[m]) for m in engine] == [3, 10, 10]
    # Simulated with the sixteenth session's core (runs of uses), these runs with first and last use.
    assert [sum(r.within_bar for r in engine[m]) for m in engine] == [3, 6, 4]
    assert all(r.error > -0.05 for r in engine["bert"]) and all(r.error < 0 for r in engine["resnet50"])
    assert all(r.within_bar for r in cells("resnet50", "demand", "uvm-user", (0.5,)))
    assert all(r.within_bar for r in cells("gpt2", "demand", "uvm-user"))  # 75%: the all-miss state
    assert not any(r.within_bar for r in cells("bert", "demand", "uvm-user", (0.5,)))
    for model in ("bert", "resnet50"):
        assert all(r.error > 0.2 for r in cells(model, "demand", "uvm-user", (0.75,)))
    before = [r for r in rows if "-same-kernels" not in r.case]
    demand = [r for r in before if r.measured_run == "demand" and r.policy == "uvm"]
    assert len(demand) == 9 and {r.case.split("-")[0] for r in demand} == {"gpt2", "bert", "resnet50"}
    assert all(r.within_bar for r in demand), [r for r in demand if not r.within_bar]
    engine_before = [r for r in before if r.policy == "deepum-issuer"]
    assert len(engine_before) == 18 and all(r.within_bar for r in engine_before)


def test_runs_under_budgets_that_hold_everything_are_predicted():
    """scripts/validate_simulator's `*-honest` cases: the eleventh session's
    runs, after the engine's sweep made the emulated budget hold memory that
    copies fill on the GPU (before, a model's weights stayed there unseen).
    GPT-2 XL at half its working set within 10% (demand, and the engine in
    both calls), every GPT-2 124M row within +-20%; BERT and ResNet-50 the
    simulation is optimistic (up to 43%), never more than 10% slow; 14 of
    21 rows within +-20%.  (The runs kept first and last use; simulated with
    runs of uses.)"""
    rows = load_script("validate_simulator").honest_budget_cases()
    assert len({r.case for r in rows}) == 6 and len(rows) == 21
    xl = [r for r in rows if r.case.startswith("gpt2-xl-")]
    assert len(xl) == 4 and all(abs(r.error) <= 0.11 for r in xl), xl
    assert all(r.within_bar for r in rows if r.case == "gpt2-honest")
    assert all(r.error <= 0.20 for r in rows), [r for r in rows if r.error > 0.20]
    assert sum(r.within_bar for r in rows) == 14, [(r.case, r.budget, r.policy, round(r.error, 3)) for r in rows]


def test_the_defaults_runs_are_predicted_pessimistically_and_mostly_within_the_bar():
    """scripts/validate_simulator's twelfth-session cases (the defaults of the
    eleventh session; GPT-2 XL with the 32768-set correlation table):
    BERT's and ResNet-50's demand runs faulted the blocks they did in the
    eleventh session and took 25-32% less, so the simulation turned from
    optimistic to pessimistic: no row more than 10% fast, none more than 41%
    slow, 16 of 22 within +-20%, and every `uvm-user` row (the emulation the
    demand runs are) within it.  GPT-2 XL with victims scanned from its whole
    budget learns more slowly in simulation than the four captured
    iterations last, so those two rows are 22% and 40% slow."""
    rows = load_script("validate_simulator").defaults_cases()
    scan = [r for r in rows if r.case == "gpt2-xl-history-scan"]
    assert len(scan) == 2 and all(0.15 < r.error <= 0.40 for r in scan), scan
    rows = [r for r in rows if r not in scan]
    assert len({r.case for r in rows}) == 5 and len(rows) == 22
    assert all(-0.10 <= r.error <= 0.41 for r in rows), [(r.case, r.budget, r.policy, round(r.error, 3)) for r in rows]
    assert all(r.within_bar for r in rows if r.policy == "uvm-user")
    assert sum(r.within_bar for r in rows) == 16, [(r.case, r.budget, r.policy, round(r.error, 3)) for r in rows]


def test_gpt2_xl_runs_warmed_up_until_settled_are_predicted_within_the_bar():
    """scripts/validate_simulator's fourteenth-session cases: GPT-2 XL's runs
    warmed up until their iterations stopped getting faster (9 and 11
    iterations for the engine), against the per-launch trace's last iteration
    repeated.  The engine and the emulated demand mode (`uvm-user`) within
    +-20% at both budgets, where the runs with three warm-up iterations were
    24-35% slower than simulated; stock UVM's model of a GPU that small
    (`uvm`, the fault waits for room) is 23-25% slow."""
    rows = load_script("validate_simulator").settled_cases()
    assert {(r.case, r.budget) for r in rows} == {("gpt2-xl-settled", 0.5), ("gpt2-xl-75-settled", 0.75)}
    judged = [r for r in rows if r.policy in ("uvm-user", "deepum-issuer")]
    assert len(judged) == 4 and all(r.within_bar for r in judged), judged
    assert all(0.20 < r.error < 0.26 for r in rows if r.policy == "uvm"), rows


def test_runs_compared_as_the_traces_kernels_launched_what_the_trace_did():
    """validate_simulator's `*-same-kernels` cases check their claim: the
    runs' engines counted the trace's launches per iteration.  The eighth
    session's first call, with deterministic algorithms, did not."""
    script = load_script("validate_simulator")
    assert script.launches_per_iteration(script.RESULTS_EIGHTH / "call5-same-kernels", "bert") == {1117}
    with pytest.raises(SystemExit, match=r"launched \[1646\] kernels per iteration, the trace \[1117\]"):
        script.per_launch("bert-same-kernels", "bert-base-bs16x128", "bert", script.RESULTS_EIGHTH / "call1-writer",
                          (0.5,))


def test_stock_uvm_predicts_each_first_touch_captures_own_iterations():
    """scripts/validate_simulator's first-touch cases (issue 7: the no-pressure
    first-touch iteration of each real trace): `uvm` on each trace taken with
    libdeepum's tracer against its own capture run.  BERT's trace came from
    CUPTI's counters, which missed 5-10% of its blocks, hence its wider margin."""
    rows = {r.case: r for r in load_script("validate_simulator").first_touch_cases()}
    assert set(rows) == {"gpt2-first-touch", "bert-first-touch", "resnet50-first-touch", "gpt2-xl-first-touch"}
    for case in ("gpt2-first-touch", "resnet50-first-touch", "gpt2-xl-first-touch"):
        assert rows[case].within_bar, rows[case]
    assert abs(rows["bert-first-touch"].error) <= 0.25, rows["bert-first-touch"]


def test_stock_uvm_predicts_the_measured_demand_runs_at_half_budget():
    """scripts/validate_simulator's cases (issue 7): at bench_train's 50% budget,
    `uvm` is within +-20% of the measured demand-paging runs, on GPT-2's
    access-set trace and on BERT's live fault streams of two calls.  (deepum is not: that
    gap is documented in docs/BENCHMARKS.md, and the script prints it.)"""
    script = load_script("validate_simulator")
    rows = script.gpt2() + script.bert_live() + script.bert_live_2()
    half = {(r.case, r.policy): r for r in rows if r.budget == 0.5}
    assert {case for case, _ in half} == {"gpt2", "bert-live", "bert-live-2"}
    for case in ("gpt2", "bert-live", "bert-live-2"):
        assert half[case, "uvm"].within_bar, half[case, "uvm"]
        assert half[case, "deepum-user"].simulated_ms >= half[case, "deepum"].simulated_ms  # one stream costs


def test_the_small_models_settled_runs_are_predicted_as_before():
    """scripts/validate_simulator's settled runs of GPT-2, BERT and ResNet-50
    (fourteenth and fifteenth sessions): every emulated demand row (`uvm-user`)
    and the engine at 75% within +-20%; at 50% the engine on GPT-2 and BERT
    simulated 26-27% too slow, on ResNet-50 25% too fast, as in the earlier
    sessions' runs (docs/SIMULATOR.md)."""
    rows = load_script("validate_simulator").settled_small_cases()
    assert {(r.case, r.budget) for r in rows} == {
        ("gpt2-settled", 0.5), ("bert-settled", 0.5), ("resnet50-settled", 0.5), ("resnet50-settled", 0.75),
        ("gpt2-75-settled", 0.75), ("bert-75-settled", 0.75)}
    detail = [(r.case, r.budget, r.policy, round(r.error, 3)) for r in rows]
    assert all(r.within_bar for r in rows if r.policy == "uvm-user"), detail
    engine = {(r.case, r.budget): r.error for r in rows if r.policy == "deepum-issuer"}
    assert all(abs(engine[case, 0.75]) <= 0.20 for case in ("gpt2-75-settled", "bert-75-settled", "resnet50-settled")), \
        detail
    assert all(0.20 < engine[case, 0.5] < 0.35 for case in ("gpt2-settled", "bert-settled")), detail
    assert -0.30 < engine["resnet50-settled", 0.5] < -0.20, detail


def test_the_writer_is_simulated_sharing_the_driver():
    """The fifteenth session's variants: GPT-2 XL's engine and its 4x
    correlation table within +-19% at both budgets, its writer thread
    (DEEPUM_WRITER=1, simulated as deepum-split) 18-25% slow.  With a write-back and a prefetch
    sharing the driver as calibrate measured (7% overlap), the split is
    simulated within 4% of the one stream everywhere; measured, the writer
    was 3-18% faster on GPT-2 XL in three calls and 8-45% slower on BERT in
    one: a difference the simulator does not model."""
    rows = load_script("validate_simulator").variant_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    xl = [r for r in rows if r.case.startswith("gpt2-xl-")]
    assert len(xl) == 8 and all(abs(r.error) <= 0.19 for r in xl if r.policy == "deepum-issuer"), detail
    assert all(0.18 <= r.error <= 0.26 for r in xl if r.policy == "deepum-split"), detail
    for case in {r.case for r in rows if r.policy == "deepum-split"}:
        simulated = {r.policy: r.simulated_ms for r in rows if r.case == case}
        assert abs(simulated["deepum-split"] / simulated["deepum-issuer"] - 1) < 0.04, (case, simulated)
    measured = {(r.case, r.measured_run): r.measured_ms for r in rows}
    for case in ("gpt2-xl-75-writer", "gpt2-xl-writer", "gpt2-xl-75-writer-2"):
        assert measured[case, "deepum-writer"] < measured[case, "deepum"]
    assert measured["bert-writer", "deepum-writer"] > measured["bert-writer", "deepum"]


def test_runs_of_the_core_that_keeps_runs_of_uses_are_predicted():
    """scripts/validate_simulator's sixteenth-session cases, the first runs
    of the core these tests simulate: every demand row within +-9%; the
    engine within +-20% in 8 of 11 rows (GPT-2 +33%, BERT +32%, ResNet-50
    -21%), and GPT-2 XL within 13% at 75% and 50%.  ResNet-50's engine,
    simulated a third too fast since the eighth session, is 12-21% fast
    now: its runs got faster, the simulation did not."""
    rows = load_script("validate_simulator").use_runs_cases()
    detail = [(r.case, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    assert len(rows) == 17, detail
    assert all(abs(r.error) <= 0.09 for r in rows if r.measured_run == "demand"), detail
    engine = [r for r in rows if r.measured_run != "demand" and not r.case.startswith("gpt2-xl")]
    assert len(engine) == 9 and sum(r.within_bar for r in engine) == 6, detail
    assert all(-0.22 <= r.error <= -0.12 for r in engine if r.case.startswith("resnet50-")), detail
    assert [abs(r.error) <= 0.13 for r in rows if r.case.startswith("gpt2-xl")] == [True, True], detail


def test_the_seventeenth_sessions_runs_are_predicted_but_resnet50_at_half():
    """scripts/validate_simulator's seventeenth-session cases, the engine's
    policy hearing launches as each run wrote positions (8 at a time, or one
    by one with DEEPUM_WRITE_EVERY=1): every engine row at 75% within +-20%
    (three models, both settings), 15 of 26 engine rows in all.  ResNet-50's
    engine at 50% ran 457-755 ms in nine runs of three calls, its demand runs
    848 and 837: the simulation (463-470 ms) is within 15% of the two
    fastest, 22-39% fast against the other seven."""
    rows = load_script("validate_simulator").write_every_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    engine = [r for r in rows if r.policy == "deepum-issuer"]
    assert len(engine) == 26, detail
    assert all(r.within_bar for r in engine if r.budget == 0.75), detail
    assert sum(r.within_bar for r in engine) == 15, detail
    resnet = sorted((r for r in engine if r.case.startswith("resnet50-") and r.budget == 0.5), key=lambda r: r.error)
    assert len(resnet) == 9 and [r.within_bar for r in resnet] == [False] * 7 + [True] * 2, detail
    assert all(-0.40 < r.error < -0.20 for r in resnet[:7]), detail
    assert all(r.within_bar for r in rows if r.policy == "uvm-user" and not r.case.startswith("gpt2-75")), detail


def _plain_and_forgetting(engine: list, case: str, budget: float) -> tuple[float, float]:
    return tuple(next(r.simulated_ms for r in engine if (r.case, r.budget, r.measured_run) == (case, budget, run))
                 for run in ("deepum", "deepum+FORGET_UNSETTLED=1"))


def test_runs_with_and_without_forgetting_are_predicted():
    """scripts/validate_simulator's eighteenth-session cases: each row the
    median of two or three tries, the engine with and without forgetting what
    the first iterations taught (DEEPUM_FORGET_UNSETTLED).  Those runs' core
    forgot at every budget; today's forgets only where the budget holds under
    two thirds of the blocks seen, so at 75% it simulates the forgetting runs
    as plain ones, and GPT-2's (measured +21% and +11% over plain) are 21%
    and 18% fast.  18 of 22 engine rows within +-20%: also out, BERT's
    forgetting run at 50% in call 2 (452 ms, the fastest of its six tries,
    +29%), GPT-2's at 50% in call 3 (+23%) and ResNet-50's plain engine at
    75% in call 2 (192 ms, +24%); and 7 of 8 demand rows (GPT-2's `uvm` +22%; `uvm-user`, the
    emulation the runs are, +12%).  At 50% the simulation tells the two
    configurations apart by at most 14%, and not in the H200's direction at
    ResNet-50's (measured -16% and -18%): it cannot replace the H200 for this
    choice."""
    rows = load_script("validate_simulator").forget_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    engine = [r for r in rows if r.policy == "deepum-issuer"]
    assert len(engine) == 22 and sum(r.within_bar for r in engine) == 18, detail
    assert {(r.case, r.measured_run) for r in engine if not r.within_bar} == {
        ("bert-forget-call2", "deepum+FORGET_UNSETTLED=1"), ("gpt2-forget-call3", "deepum+FORGET_UNSETTLED=1"),
        ("gpt2-forget-call6", "deepum+FORGET_UNSETTLED=1"), ("resnet50-forget-call2", "deepum")}, detail
    demand = [r for r in rows if r.measured_run == "demand"]
    assert len(demand) == 8 and sum(r.within_bar for r in demand) == 7, detail
    assert all(r.within_bar for r in demand if r.policy == "uvm-user"), detail
    for case, budget in {(r.case, r.budget) for r in engine}:
        plain, forget = _plain_and_forgetting(engine, case, budget)
        if budget == 0.75:
            assert forget == plain, (case, budget, plain, forget)
        else:
            assert plain != forget and abs(forget / plain - 1) < 0.15, (case, budget, plain, forget)


def test_the_nineteenth_sessions_runs_are_predicted():
    """Issue 6's 75% cells as medians of three tries (every row within
    +-20%), and at 50% the engine with and without forgetting where memory is
    tight: BERT's plain engine, its three tries 429-579 ms, is simulated 30%
    slow, GPT-2's forgetting one 26%."""
    rows = load_script("validate_simulator").nineteenth_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    assert len(rows) == 13 and [(r.case, r.measured_run) for r in rows if not r.within_bar] == [
        ("bert-19-call3", "deepum"), ("gpt2-19-call3", "deepum+FORGET_UNSETTLED=1")], detail
    engine = [r for r in rows if r.policy == "deepum-issuer"]
    for case in ("bert-19-call3", "gpt2-19-call3"):
        plain, forget = _plain_and_forgetting(engine, case, 0.5)
        assert plain != forget and abs(forget / plain - 1) < 0.05, (case, plain, forget)
    # Between marks (the engine's clock; bench_train's left its work at each mark out) every
    # engine run took longer than timed, by 0-13%, and BERT's plain engine is simulated +24%.
    for r in engine:
        assert 1.0 < r.between_marks_ms / r.measured_ms < 1.13, (r.case, r.measured_run)
    bert = next(r for r in engine if (r.case, r.measured_run) == ("bert-19-call3", "deepum"))
    assert 0.20 < bert.error_between_marks < 0.25 < bert.error, detail


def test_the_twentieth_sessions_runs_are_timed_from_their_marks():
    """Issue 6's cells timed from each iteration's mark: every run's median
    iteration is the engine's own time between marks (before, bench_train
    left the engine's work at the mark untimed: 20-41 ms).  Demand paging is
    predicted within +-20% everywhere as nvidia-uvm; the engine within it in
    every cell but ResNet-50's at 50% (38% fast), faster than it ran in all
    but BERT's at 50% (+0.3%).  Victims in
    address runs (calls 5 and 6) change the simulated time by under 4%: the
    simulator's rounds already write back in long ranges."""
    rows = load_script("validate_simulator").twentieth_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    assert len(rows) == 26, detail
    for r in rows:
        assert abs(r.between_marks_ms / r.measured_ms - 1) < 0.01, (r.case, r.measured_run, detail)
    issue6 = [r for r in rows if not r.case.endswith(("call5", "call6"))]
    assert all(r.within_bar for r in issue6 if r.policy == "uvm"), detail
    engine = [r for r in issue6 if r.policy == "deepum-issuer"]
    assert len(engine) == 6 and sum(r.error < 0 for r in engine) == 5, detail
    assert [r.case for r in engine if not r.within_bar] == ["resnet50-20-call1"], detail
    resnet = next(r for r in engine if r.case == "resnet50-20-call1")
    assert -0.40 < resnet.error < -0.35, detail
    runs = {(r.case, r.budget, r.measured_run): r.simulated_ms for r in rows if r.case.endswith(("call5", "call6"))}
    assert len(runs) == 8, detail
    for case, budget, run in runs:
        if run == "deepum":
            assert abs(runs[case, budget, "deepum+VICTIM_RUNS=1"] / runs[case, budget, run] - 1) < 0.04, detail


def test_the_twenty_second_sessions_victim_runs():
    """The engine with and without victims in address runs, seven cells: 10
    of 14 rows within +-20%.  ResNet-50 at 50% is simulated 32-37% too fast
    with either choice (its runs move 40% more bytes than simulated), GPT-2's
    runs with the flag at 50% 20% and 24% too slow.  The simulator tells the
    two choices apart by at most 12% (BERT at 50%, the flag slower, in the
    H200's direction in one call of two), where the H200 moved them by -25%
    to +18%.  Then ResNet-50 at 50% with the flag by default against demand:
    demand within the bar as nvidia-uvm, the engine 29% too fast again."""
    rows = load_script("validate_simulator").twenty_second_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    last = [r for r in rows if r.case == "resnet50-22-call5"]
    rows = [r for r in rows if r.case != "resnet50-22-call5"]
    assert [(r.measured_run, r.policy, r.within_bar) for r in last] == [
        ("demand", "uvm", True), ("demand", "uvm-user", True), ("deepum", "deepum-issuer", False)], detail
    assert -0.35 < last[-1].error < -0.25, detail
    assert len(rows) == 14 and {r.policy for r in rows} == {"deepum-issuer"}, detail
    for r in rows:
        assert abs(r.between_marks_ms / r.measured_ms - 1) < 0.01, (r.case, r.measured_run, detail)
    outside = sorted((r.case, r.measured_run) for r in rows if not r.within_bar)
    assert outside == [("gpt2-22-call2", "deepum+VICTIM_RUNS=1"), ("gpt2-22-call3", "deepum+VICTIM_RUNS=1"),
                       ("resnet50-22-call1", "deepum"), ("resnet50-22-call1", "deepum+VICTIM_RUNS=1")], detail
    assert all(-0.40 < r.error < -0.30 for r in rows if r.case.startswith("resnet50")), detail
    simulated = {(r.case, r.budget, r.measured_run): r.simulated_ms for r in rows}
    for case, budget, run in simulated:
        if run == "deepum":
            assert abs(simulated[case, budget, "deepum+VICTIM_RUNS=1"] / simulated[case, budget, run] - 1) < 0.13, detail


def test_traces_from_the_first_step_learn_the_warm_up_the_engine_learned():
    """The twenty-second session's ResNet-50 and BERT cells at 50% against
    per-launch traces taken from the program's first step: the simulated
    core learns through the iterations whose memory still moved, as the
    engine did, and every engine row comes out slower than from the settled
    traces: ResNet-50's by 13-15 points of error (its gap: -14% to -24%, from
    -29% to -37%), BERT's plain engine by 14-16 and with victims in address
    runs by under 1; demand paging does not learn and does not move."""
    script = load_script("validate_simulator")
    cold, settled = script.cold_trace_cases(), script.twenty_second_cases()
    before = {(r.case, r.measured_run, r.policy): r.error for r in settled}
    detail = [(r.case, r.measured_run, r.policy, round(r.error, 3)) for r in cold]
    assert len(cold) == 9, detail
    for r in cold:
        moved = r.error - before[r.case.replace("-cold", ""), r.measured_run, r.policy]
        if r.policy.startswith("deepum"):
            least = 0.12 if r.case.startswith("resnet50") or r.measured_run == "deepum" else 0.0
            assert moved > least, (r.case, r.measured_run, moved, detail)
        else:
            assert abs(moved) < 0.01, (r.case, r.measured_run, moved, detail)
    assert all(-0.25 < r.error < -0.10 for r in cold if r.case.startswith("resnet50") and r.policy.startswith("deepum")), detail
    assert all(r.within_bar for r in cold if r.case.startswith("bert")), detail


def test_the_twenty_third_sessions_runs():
    """Forgetting an unsettled start, a window of an eighth and demand at 50%,
    ResNet-50 and BERT against their traces from the first step: 13 of 14
    engine rows within +-20%, the plain engine's ResNet-50 run in call 4
    outside (-23%).  The simulated core forgetting is 14% faster on ResNet-50
    and 10% on BERT, the direction the H200 measured (-10% and -32%; -10% and
    -6%); on GPT-2 the simulation barely moves (-1%; measured: +9%)."""
    rows = load_script("validate_simulator").twenty_third_cases()
    detail = [(r.case, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    assert len(rows) == 18, detail
    assert all(r.within_bar for r in rows if r.policy == "uvm"), detail
    engine = [r for r in rows if r.policy == "deepum-issuer"]
    assert sum(r.within_bar for r in engine) == 13 and len(engine) == 14, detail
    assert [(r.case, r.measured_run) for r in engine if not r.within_bar] == [("resnet50-23-call4", "deepum")], detail
    for case, gain in (("resnet50-23-call2", 0.10), ("resnet50-23-call4", 0.10), ("bert-23-call2", 0.03),
                       ("bert-23-call4", 0.03)):
        plain, forgetting = _plain_and_forgetting(engine, case, 0.5)
        assert forgetting < plain * (1 - gain), (case, plain, forgetting, detail)
    plain, forgetting = _plain_and_forgetting(engine, "gpt2-23-call5", 0.5)
    assert abs(forgetting / plain - 1) < 0.02, detail


def test_the_twenty_fifth_sessions_runs():
    """Issue 6's cells with the default engine (forgetting, victims in address
    runs) against demand at 50% and 75%, and GPT-2 at 50% without forgetting,
    every model against its trace from the first step (GPT-2's new): every
    row within +-20% (the engine -15% to +6%).  Forgetting on GPT-2 simulates
    4% slower than without, as measured (+2%; the tries overlapping)."""
    rows = load_script("validate_simulator").twenty_fifth_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    assert len(rows) == 17 and all(r.within_bar for r in rows), detail
    engine = [r for r in rows if r.policy == "deepum-issuer"]
    assert len(engine) == 7 and all(-0.15 < r.error < 0.10 for r in engine), detail
    simulated = {(r.case, r.measured_run): r.simulated_ms for r in engine}
    forgetting = simulated["gpt2-25-call3", "deepum"] / simulated["gpt2-25-call3", "deepum+FORGET_UNSETTLED=0"] - 1
    assert 0 < forgetting < 0.08, (forgetting, detail)


def test_the_twenty_sixth_sessions_runs():
    """Issue 6's cells a call after the twenty-fifth session's, and BERT and
    GPT-2 at 75% with and without victims in address runs: all 11 engine
    rows within +-20% (-11% to +20%: GPT-2's at 75% in call 1, 616 ms, the
    fastest of its three calls; 761 and 804 in calls 2 and 6, -3% and -8%).
    Outside among demand: ResNet-50's emulated demand
    at 50% (uvm-user -27%; stock UVM's model -19%) and call 6's GPT-2 demand
    at 75%, the mean of two tries in the driver's two steady states (865 and
    2,169 ms): the simulation (2,045 ms) is the slower one, as in every
    other GPT-2 75% call."""
    script = load_script("validate_simulator")
    rows = script.twenty_sixth_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    assert len(rows) == 25, detail
    engine = [r for r in rows if r.policy == "deepum-issuer"]
    assert len(engine) == 11 and all(r.within_bar for r in engine), detail
    outside = sorted((r.case, r.policy) for r in rows if not r.within_bar)
    assert outside == [("gpt2-26-call6", "uvm"), ("gpt2-26-call6", "uvm-user"), ("resnet50-26-call4", "uvm-user")], \
        detail
    bench = json.loads((script.RESULTS_TWENTY_SIXTH / "call6/tries-75-gpt2-again/bench_train-gpt2.json").read_text())
    slower_try = max(bench["budgets"][0]["runs"]["demand"]["iteration_s_tries"]) * 1e3
    assert all(abs(r.simulated_ms / slower_try - 1) < 0.15 for r in rows if r.case == "gpt2-26-call6"
               and r.policy.startswith("uvm")), detail


def test_the_twenty_seventh_sessions_runs():
    """Issue 6's 50% cells a third call and GPT-2 XL at both budgets, the
    default engine against demand: every engine row within +-20% (+1% to
    +18%, every one simulated slower than it ran), and every emulated demand
    row (`uvm-user`, -14% to +11%); stock UVM's model of a GPU that small is
    21% slow for GPT-2 XL at 75%.  The simulated speedup over demand is
    within 20% of the measured one in every cell."""
    script = load_script("validate_simulator")
    rows = script.twenty_seventh_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in rows]
    assert len(rows) == 15 and {r.case for r in rows} == {
        "resnet50-27-call2", "bert-27-call2", "gpt2-27-call3", "gpt2-xl-27-call4", "gpt2-xl-27-call5"}, detail
    engine = [r for r in rows if r.policy == "deepum-issuer"]
    assert len(engine) == 5 and all(r.within_bar and r.error > 0 for r in engine), detail
    assert all(r.within_bar for r in rows if r.policy == "uvm-user"), detail
    assert [(r.case, r.policy) for r in rows if not r.within_bar] == [("gpt2-xl-27-call5", "uvm")], detail
    for r in engine:
        demand = next(d for d in rows if d.case == r.case and d.policy == "uvm-user")
        measured, simulated = demand.measured_ms / r.measured_ms, demand.simulated_ms / r.simulated_ms
        assert abs(simulated / measured - 1) < 0.2, (r.case, measured, simulated)


def test_the_runs_of_programs_that_mark_no_iteration():
    """The twenty-fifth session's call 4 (ResNet-50 and BERT at 50% marking
    no iteration, with and without forgetting), simulated with the marks
    libdeepum's detector puts in their traces from the first step: all
    simulated faster than measured, 3 of 4 within +-20% (-21% for ResNet-50
    without forgetting, 693 ms against 530 with it).  Simulated with the program's own marks instead, the
    times move by under 8%: where the marks fall is not what decides them."""
    script = load_script("validate_simulator")
    rows = script.unmarked_cases()
    detail = [(r.case, r.measured_run, round(r.error, 3)) for r in rows]
    assert len(rows) == 4 and all(r.error < 0 for r in rows), detail
    assert [(r.case, r.measured_run) for r in rows if not r.within_bar] == [
        ("resnet50-unmarked-25", "deepum-unmarked+FORGET_UNSETTLED=0")], detail
    marked = [row for stem, model in (script.RESNET50_COLD, script.BERT_COLD)
              for row in script.per_launch(model, stem, model, script.RESULTS_TWENTY_FIFTH / "call4/unmarked-forget",
                                           (0.5,), script.COLD_ITERATIONS, settled=True,
                                           compared=script.COMPARED_UNMARKED)]
    assert [r.measured_run for r in marked] == [r.measured_run for r in rows]
    moved = [r.simulated_ms / m.simulated_ms - 1 for r, m in zip(rows, marked)]
    assert all(abs(x) < 0.08 for x in moved) and any(x != 0 for x in moved), moved


def test_the_current_table_has_one_line_per_measured_run():
    script = load_script("validate_simulator")
    rows = [script.Row("gpt2-26-call1", 0.75, "demand", 2000.0, "uvm", 2100.0, True),
            script.Row("gpt2-26-call1", 0.75, "demand", 2000.0, "uvm-user", 1500.0, True),
            script.Row("gpt2-26-call1", 0.75, "deepum", 600.0, "deepum-issuer", 660.0, True)]
    lines = script.markdown(rows)
    assert lines[2:4] == ["| gpt2-26-call1 | 75% | demand | 2000 | `uvm` 2100 (+5%), `uvm-user` 1500 (-25% !) |",
                          "| gpt2-26-call1 | 75% | deepum | 600 | `deepum-issuer` 660 (+10%) |"]
    assert lines[-1].strip() == "2 of 3 rows within +-20% (! outside)."


def test_no_policy_is_3x_over_demand_at_half_the_working_set_through_the_user_api():
    """Issue 6's first target, against what any policy could reach under the
    user-mode emulation: with write-backs at the rate the engine's got while
    the models trained (the ninth session's fit, 201 us per 2 MiB), the
    simulated oracle (Belady's victims, every block prefetched in time) is
    under 2.1x faster than the emulated demand mode at half of each model's
    working set, on the traces from the first step at the twenty-fifth
    session's budgets; it evicts nearly as much as demand does, and every
    eviction is a write-back.  At the calibration's fit to every session's
    engine batches (230 us) it is slower still: 1.6-1.8x, below what the
    engine measured in some calls (1.53-2.17x), so that pooled rate
    overcharges an oracle (the rate drifts between calls), and the ninth's
    is the bound to quote."""
    script = load_script("validate_simulator")
    capacities = {"gpt2": 5102370816, "bert": 1998585856, "resnet50": 1897922560}

    def oracle_over_demand(write_back_per_2MiB_us: float) -> dict[str, float]:
        in_run = calibration.load() | {"evict_to_host_bulk_GBps": 2 * 2**20 / (write_back_per_2MiB_us * 1e3)}
        speedups = {}
        for stem, model in (script.GPT2_COLD, script.BERT_COLD, script.RESNET50_COLD):
            trace, compute = script.traced(f"{stem}-perlaunch-6it", model)
            report = simulate(trace, [capacities[model]], ["uvm-user", "oracle"], default_config(),
                              cost_model(in_run), compute, steady_from=3)
            demand, oracle = (np.median([it.time_ns for it in report.steady(p, capacities[model])])
                              for p in ("uvm-user", "oracle"))
            speedups[model] = demand / oracle
        return speedups

    ninth = oracle_over_demand(NINTH_SESSION_WRITE_BACKS["engine_write_back_per_2MiB_us"])
    assert all(1.5 < s < 2.1 for s in ninth.values()), ninth
    latest = oracle_over_demand(calibration.load()["engine_write_back_per_2MiB_us"])
    assert all(latest[m] < ninth[m] and latest[m] < 1.8 for m in ninth), (latest, ninth)


def test_resnet50s_settled_trace_predicts_as_its_first():
    """ResNet-50's per-launch trace taken after eight warm-up iterations,
    when 46 of 1,047 launches a step had new exec IDs (the first, after one:
    22-26%, which the runs' measured iterations never had).  It predicts the
    same runs within 7% of the first trace, and every row within +-20%
    (the eighteenth session's forgetting runs at 75% ran a core that forgot
    there, which today's simulates as plain: 14-15% fast)."""
    script = load_script("validate_simulator")
    settled = script.settled_trace_cases()
    detail = [(r.case, r.budget, r.measured_run, r.policy, round(r.error, 3)) for r in settled]
    first = {(r.budget, r.measured_run, r.policy, round(r.measured_ms, 3)): r.simulated_ms
             for r in script.forget_cases() + script.nineteenth_cases() if r.case.startswith("resnet50")}
    assert len(settled) == 17
    for r in settled:
        assert abs(r.simulated_ms / first[r.budget, r.measured_run, r.policy, round(r.measured_ms, 3)] - 1) < 0.07, detail
    assert all(r.within_bar for r in settled), detail


def test_damaged_records_are_run_or_named_whatever_the_damage(gpt2):
    """Fields of a real trace's records set at random (seeded) to 0, their
    maximum or noise: replay and every policy either run or refuse, naming
    the record.  (Under make test-asan the C side is checked for memory
    errors on the way.)"""
    rng = np.random.default_rng(24)
    cost = cost_model(calibration.load())
    refused = ran = 0
    for _ in range(12):
        records = gpt2.records[:5000].copy()
        for _ in range(rng.integers(1, 8)):
            field = records.dtype.names[rng.integers(len(records.dtype.names))]
            top = np.iinfo(records.dtype[field]).max
            value = (0, top, rng.integers(0, top, dtype=records.dtype[field], endpoint=True))[rng.integers(3)]
            records[field][rng.integers(len(records))] = value
        damaged = Trace(records=records, block_shift=gpt2.block_shift, flags=gpt2.flags, meta={})
        compute = np.full(int((records["type"] == LAUNCH).sum()), 1000, dtype=np.uint64)
        for run in (lambda: replay(damaged, default_config()),
                    lambda: simulate(damaged, [32 * BLOCK, 0], list(POLICIES), default_config(), cost, compute)):
            try:
                run()
                ran += 1
            except RecordError as e:
                assert 0 <= e.index < len(records), e
                refused += 1
    assert refused and ran  # both ways were taken
