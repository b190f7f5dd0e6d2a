"""The prefetch core's tables, walker, pre-eviction and invalidation, each
against expectations worked out by hand from the design in kmod/core/core.c."""

from __future__ import annotations

import numpy as np
import pytest

from testlib import BLOCK, DATA, blk, rec
from pydeepum._lowlevel import lib
from pydeepum.config import make_config
from pydeepum.core import CMD_DEMAND, DISCARD, EVICT, PREFETCH, Core
from pydeepum.errors import ConfigError, RecordError
from pydeepum.trace import ALLOC, EXEC_NONE, FAULT, FREE, ITER_FLUSHED, ITERATION, LAUNCH, Trace

BOUNDARY = 0xFFFFFFFE  # DUM_EXEC_BOUNDARY: the flush that ended an iteration


def launch(e: int):
    return rec(LAUNCH, exec_id=e)


def fault(b: int, e: int = EXEC_NONE):
    return rec(FAULT, blk(b) + 4096, exec_id=e, aux=1)


def flush(i: int = 0):
    return rec(ITERATION, aux=i, flags=ITER_FLUSHED)


def feed(core: Core, *records) -> list[tuple[str, int, int]]:
    """Commands as (op, block number, exec ID or flags) tuples."""
    out = []
    for r in records:
        for c in core.process(r):
            op = {PREFETCH: "P", EVICT: "E", DISCARD: "D"}[int(c["op"])]
            tag = int(c["exec_id"]) if op == "P" else int(c["flags"])
            out.append((op, int(c["addr"]) // BLOCK, tag))
    return out


# ---- correlation tables ------------------------------------------------------


def test_block_successors_are_mru_ordered():
    core = Core(make_config())
    feed(core, launch(0), fault(1), fault(2), launch(0), fault(1), fault(3))
    assert core.block_successors(0, blk(1)) == [blk(3), blk(2)]
    feed(core, launch(0), fault(1), fault(2))
    assert core.block_successors(0, blk(1)) == [blk(2), blk(3)]


def test_successor_lists_drop_the_least_recent():
    core = Core(make_config(corr_succs=2))
    for b in (2, 3, 4):
        feed(core, launch(0), fault(1), fault(b))
    assert core.block_successors(0, blk(1)) == [blk(4), blk(3)]


def test_levels_hold_successors_at_each_distance():
    core = Core(make_config(corr_levels=3))
    feed(core, launch(0), fault(1), fault(2), fault(3), fault(4))
    assert core.block_successors(0, blk(1), 0) == [blk(2)]
    assert core.block_successors(0, blk(1), 1) == [blk(3)]
    assert core.block_successors(0, blk(1), 2) == [blk(4)]
    assert core.block_successors(0, blk(3), 1) == []
    assert core.block_successors(0, blk(4), 0) == []


def test_tables_are_per_exec_id_and_executions_do_not_chain():
    core = Core(make_config())
    feed(core, launch(0), fault(1), fault(2), launch(1), fault(3))
    assert core.block_successors(0, blk(2)) == []  # 3 ran in exec 1
    assert core.block_successors(1, blk(1)) is None
    assert core.exec_starts(0) == [blk(1)] and core.exec_starts(1) == [blk(3)]


def test_exec_successors_are_mru_ordered():
    core = Core(make_config(exec_succs=2))
    feed(core, *(launch(e) for e in (0, 1, 2, 0, 2)))
    assert core.exec_successors(0) == [2, 1]
    assert core.exec_successors(1) == [2]
    assert core.exec_successors(2) == [0]


def test_a_flush_ends_the_exec_chain():
    core = Core(make_config())
    feed(core, launch(0), launch(1), flush(), launch(0))
    assert core.exec_successors(1) == [BOUNDARY]


def _colliding_blocks(base: int, count: int) -> list[int]:
    """Blocks whose exec-0 entries share a set with `base`'s (found through the
    core itself: with one way per set, a colliding insert evicts base)."""
    probe = Core(make_config(corr_sets=16, corr_ways=1))
    found = []
    for b in range(base + 1, base + 2000):
        feed(probe, launch(0), fault(base), fault(b))
        if probe.block_successors(0, blk(base)) is None:
            found.append(b)
            if len(found) == count:
                return found
    raise AssertionError("no colliding blocks found")


def test_ways_are_replaced_least_recently_used():
    x = 7
    y, z = _colliding_blocks(x, 2)
    core = Core(make_config(corr_sets=16, corr_ways=2))
    feed(core, launch(0), fault(x), fault(y), fault(x))  # x used after y
    assert core.stats().corr_replacements == 0
    feed(core, fault(z))
    assert core.block_successors(0, blk(y)) is None  # least recently used
    assert core.block_successors(0, blk(x)) is not None
    assert core.block_successors(0, blk(z)) is not None
    assert core.stats().corr_replacements == 1


FORGET = lib.DEEPUM_CFG_F_FORGET_UNSETTLED


def _forgetting(flags: int = FORGET, **fields: int):
    """A configuration that forgets where it may: one block of capacity, far
    under two thirds of the blocks every case below uses."""
    return make_config(flags=flags, capacity_bytes=BLOCK, **fields)


def _iteration(core: Core, it: int, launches: list[tuple[int, list[int]]]) -> None:
    """Launches of (exec ID, blocks it faults on), then a flushing mark."""
    for e, blocks in launches:
        feed(core, launch(e), *(fault(b, e) for b in blocks))
    feed(core, flush(it))


def test_an_iteration_of_new_exec_ids_is_forgotten_at_its_mark():
    # Eight kernels never seen: a program still settling (its allocator
    # moving tensors), so the blocks learned are forgotten; the exec-ID
    # order is kept.
    for flags, forgotten in ((0, False), (FORGET, True)):
        core = Core(_forgetting(flags))
        _iteration(core, 0, [(e, [10 + e, 20 + e] if e == 0 else [30 + e]) for e in range(8)])
        assert (core.block_successors(0, blk(10)) is None) is forgotten
        assert (core.exec_starts(0) == []) is forgotten
        assert core.exec_successors(0) == [1]


def test_a_loop_shorter_than_the_window_learns_back_what_it_forgot():
    # Eight kernels a loop, each faulting its own block, under a capacity of
    # four (tight: forgetting acts at the first mark after the all-new first
    # loop).  The window (512 kernels) must not fill with kernels walked while
    # their start blocks were forgotten: from the second loop after the
    # forgetting mark each kernel's block is prefetched ahead of its launch,
    # whether the marks come every loop or first after three (libdeepum's
    # detection).  Before, no kernel was prefetched ahead for 40 loops.
    kernels = 8
    for first_mark_after in (1, 3):
        core = Core(make_config(capacity_bytes=4 * BLOCK, flags=FORGET))
        ahead, mark = [], 0
        for loop in range(12):
            if loop == 0 or loop >= first_mark_after:
                feed(core, rec(ITERATION, aux=mark))
                mark += 1
            cmds = []
            for e in range(kernels):
                cmds += [c for c in feed(core, launch(e)) if c[0] == "P" and c[2] != e]
                feed(core, fault(10 + e, e))
            ahead.append(len(cmds))
        assert ahead[first_mark_after + 1:] == [kernels] * (11 - first_mark_after), (first_mark_after, ahead)


def test_an_iteration_is_unsettled_when_over_one_launch_in_eight_is_new():
    for new, forgotten in ((1, False), (2, True)):
        core = Core(_forgetting())
        _iteration(core, 0, [(e, [10 + e]) for e in range(8)])  # forgotten
        # Eight launches, `new` of them exec IDs never seen.
        _iteration(core, 1, [(e, [10 + e, 60 + e]) for e in range(8 - new)] +
                   [(100 + e, [70 + e]) for e in range(new)])
        assert (core.block_successors(0, blk(10)) is None) is forgotten
        assert (core.exec_starts(1) == []) is forgotten


def test_forgetting_ends_once_an_iteration_settled_and_after_the_first_iterations():
    def unsettled(it: int) -> list[tuple[int, list[int]]]:
        return [(100 * it + e, [10 + e]) for e in range(8)]

    core = Core(_forgetting())
    _iteration(core, 0, unsettled(0))
    _iteration(core, 1, [(e, [10 + e, 20 + e]) for e in range(8)])  # settled
    _iteration(core, 2, unsettled(2))  # new IDs again: kept now
    assert core.block_successors(0, blk(10)) == [blk(20)]
    core = Core(_forgetting())
    for it in range(5):
        _iteration(core, it, unsettled(it))
    assert core.block_successors(300, blk(10)) is None  # the fourth iteration's mark forgot
    assert core.block_successors(400, blk(10)) == []  # the fifth's did not


def test_what_an_unsettled_iteration_taught_is_no_longer_predicted():
    # Kernel 0 first used blocks 1 and 2, then (its tensors moved) 5 and 6.
    # Kept, the old start is walked in every iteration after.  Room for the
    # four blocks in the window, and kernel 7's twelve make it tight.
    predicted = {}
    for flags in (0, FORGET):
        core = Core(make_config(flags=flags, capacity_bytes=8 * BLOCK, lookahead_blocks=4, watermark_blocks=1))
        _iteration(core, 0, [(0, [1, 2])] + [(e, []) for e in range(1, 7)] + [(7, list(range(100, 112)))])
        _iteration(core, 1, [(0, [5, 6])] + [(e, []) for e in range(1, 8)])
        predicted[flags] = sorted(b for op, b, e in feed(core, launch(0)) if e == 0)
    assert predicted == {0: [1, 2, 5, 6], FORGET: [5, 6]}


def test_forgotten_entries_are_free_ways_not_replacements():
    x = 7
    (y,) = _colliding_blocks(x, 1)
    core = Core(_forgetting(corr_sets=16, corr_ways=1))
    _iteration(core, 0, [(0, [x])] + [(e, [40 + e]) for e in range(1, 8)])
    replaced = core.stats().corr_replacements
    feed(core, launch(0), fault(y, 0))
    assert core.stats().corr_replacements == replaced
    assert core.block_successors(0, blk(y)) == []


def test_only_memory_under_two_thirds_of_the_blocks_used_forgets():
    # Nine blocks used: five are under two thirds of them, six are not, and
    # without a capacity nothing needs to leave.
    for capacity, forgotten in ((0, False), (5, True), (6, False)):
        core = Core(make_config(flags=FORGET, capacity_bytes=capacity * BLOCK))
        _iteration(core, 0, [(e, [10 + e, 20 + e] if e == 0 else [30 + e]) for e in range(8)])
        assert (core.block_successors(0, blk(10)) is None) is forgotten, capacity


# ---- the walker ----------------------------------------------------------------


def test_walk_follows_start_then_jumps_to_the_next_exec_id():
    core = Core(make_config())
    feed(core, flush(0), launch(0), fault(1), fault(2), launch(1), fault(3), fault(4), flush(1))
    assert feed(core, launch(0)) == [("P", 1, 0), ("P", 2, 0), ("P", 3, 1), ("P", 4, 1)]


def test_a_kernel_is_walked_to_the_end_of_its_table():
    core = Core(make_config())
    feed(core, flush(0), launch(0), fault(1), fault(5), fault(6), flush(1))
    # Only the first block faults now (the rest were prefetched and hit, which
    # the core never hears of): the chain learned before must survive whole.
    feed(core, launch(0), fault(1), flush(2))
    assert feed(core, launch(0)) == [("P", 1, 0), ("P", 5, 0), ("P", 6, 0)]


def _learn_chain(core: Core, kernels: list[list[int]]) -> None:
    feed(core, flush(0))
    _iteration(core, 1, list(enumerate(kernels)))


def test_lookahead_stops_after_lookahead_kernels():
    core = Core(make_config(lookahead_kernels=2))
    _learn_chain(core, [[10], [11], [12], [13]])
    assert feed(core, launch(0)) == [("P", 10, 0), ("P", 11, 1), ("P", 12, 2)]
    assert feed(core, launch(1)) == [("P", 13, 3)]  # the window slides


def test_lookahead_stops_after_lookahead_blocks():
    kernels = [[10, 11], [12, 13], [14, 15]]
    core = Core(make_config(lookahead_blocks=3))
    _learn_chain(core, kernels)
    assert [b for _, b, _ in feed(core, launch(0))] == [10, 11, 12, 13, 14, 15]
    core = Core(make_config(lookahead_blocks=2))
    _learn_chain(core, kernels)
    assert [b for _, b, _ in feed(core, launch(0))] == [10, 11, 12, 13]


def test_no_block_is_prefetched_twice():
    core = Core(make_config())
    _learn_chain(core, [[10, 11], [11, 12]])
    assert feed(core, launch(0)) == [("P", 10, 0), ("P", 11, 0), ("P", 12, 1)]
    assert feed(core, fault(11, 1), launch(1), fault(12, 1)) == []


def test_a_fault_walks_on_from_the_faulted_block():
    core = Core(make_config())
    feed(core, launch(0), fault(1), fault(2), fault(3), flush())
    core_cmds = feed(core, rec(ALLOC), fault(2, 0))  # no launch: the block is missed
    assert core_cmds == [("P", 3, 0)]


def test_an_unknown_exec_id_where_another_was_expected_inherits_its_table():
    core = Core(make_config())
    _learn_chain(core, [[10], [11, 12], [13]])
    feed(core, launch(0))
    # Exec 7 runs where exec 1 was expected: predicted as exec 1, tagged 7.
    assert feed(core, launch(7)) == []  # 11 and 12 were prefetched with exec 0's window
    assert core.stats().exec_stand_ins == 1
    assert core.block_successors(7, blk(11)) == [blk(12)]
    assert core.stats().window_resets == 0


def test_the_predecessor_tells_apart_a_kernel_that_runs_in_two_places():
    # Kernel 5 runs after 0 and after 2 (a temporary at the same address in
    # two layers); what follows it depends on where it runs.
    core = Core(make_config(lookahead_kernels=1))
    feed(core, flush(0))
    for e, b in ((0, 10), (5, 15), (1, 11), (2, 12), (5, 15), (3, 13)):
        feed(core, launch(e), fault(b, e))
    feed(core, flush(1))
    assert core.exec_successors(5) == [3, 1]
    assert feed(core, launch(0)) == [("P", 10, 0), ("P", 15, 5)]
    assert feed(core, launch(5)) == [("P", 11, 1)]  # first-order would say 3
    assert feed(core, launch(1), launch(2), launch(5)) == [("P", 12, 2), ("P", 13, 3)]
    assert core.stats().window_resets == 0


# The window by the exec-ID table alone (as before positions, and whenever the
# launches stray from the last iteration's order): skips, waits, resets.
TABLE_ONLY = lib.DEEPUM_CFG_F_NO_POSITIONAL


def test_a_launch_further_on_in_the_window_skips_to_it():
    core = Core(make_config(lookahead_kernels=2, flags=TABLE_ONLY))
    _learn_chain(core, [[10], [11], [12], [13], [14]])
    assert feed(core, launch(0)) == [("P", 10, 0), ("P", 11, 1), ("P", 12, 2)]
    assert feed(core, launch(2)) == [("P", 13, 3), ("P", 14, 4)]  # kernel 1 did not run
    stats = core.stats()
    assert (stats.window_skips, stats.window_resets, stats.window_waits) == (1, 0, 0)


def test_an_extra_kernel_keeps_the_window():
    core = Core(make_config(lookahead_kernels=2, flags=TABLE_ONLY))
    _learn_chain(core, [[10], [11], [12], [13]])
    assert feed(core, launch(0)) == [("P", 10, 0), ("P", 11, 1), ("P", 12, 2)]
    assert feed(core, launch(3)) == [("P", 13, 3)]  # known, but not expected here
    assert feed(core, launch(1)) == []  # the window still expected kernel 1
    stats = core.stats()
    assert (stats.window_waits, stats.window_resets, stats.window_skips) == (1, 0, 0)


def test_the_window_resets_after_unexpected_launches_in_a_row():
    core = Core(make_config(lookahead_kernels=1, flags=TABLE_ONLY))
    _learn_chain(core, [[10 + e] for e in range(8)])
    feed(core, launch(0))  # the window expects kernel 1
    feed(core, *(launch(e) for e in (7, 6, 5, 4)))
    assert (core.stats().window_waits, core.stats().window_resets) == (4, 0)
    feed(core, launch(3))
    assert (core.stats().window_waits, core.stats().window_resets) == (4, 1)


def mark(i: int):
    """An iteration mark with memory kept (training)."""
    return rec(ITERATION, aux=i)


def _window_surprises(flags: int, order: list[int], iterations: int = 6) -> list[int]:
    """Launches in @order each iteration, one block each; per iteration from
    the third: the window's waits + resets + skips."""
    core = Core(make_config(lookahead_kernels=4, flags=flags))
    out = []
    for it in range(iterations):
        feed(core, mark(it))
        before = core.stats()
        for e in order:
            feed(core, launch(e), fault(100 + e, e))
        after = core.stats()
        if it >= 2:
            out.append(sum(getattr(after, k) - getattr(before, k)
                           for k in ("window_waits", "window_resets", "window_skips")))
    return out


def test_by_position_a_repeated_kernel_pair_no_longer_misleads_the_window():
    # 0 1 2 is followed by 3 in one place and 4 in the other: the exec-ID
    # table (one kernel of context) cannot tell them apart; the position can.
    order = [0, 1, 2, 3, 5, 0, 1, 2, 4, 6]
    assert all(n > 0 for n in _window_surprises(TABLE_ONLY, order))
    assert _window_surprises(0, order) == [0, 0, 0, 0]


def test_by_position_a_kernel_in_another_kernels_place_keeps_the_window():
    core = Core(make_config(lookahead_kernels=8))
    for it in range(3):
        feed(core, mark(it), *(r for e in range(6) for r in (launch(e), fault(10 + e, e))))
    feed(core, mark(3), launch(0))
    # Kernel 4, known, where 1 ran last time: it takes 1's place, and
    # kernels 2, 3, ... still come where the window has them.
    feed(core, launch(4), launch(2), launch(3))
    stats = core.stats()
    assert (stats.window_waits, stats.window_resets, stats.window_skips) == (0, 0, 0)


def test_by_position_the_window_crosses_into_the_next_iteration_unless_it_was_flushed():
    def next_iterations_prefetches(end) -> list[tuple[str, int, int]]:
        # Four kernels of one block each, room for three blocks besides the
        # watermark's five, a window of two kernels (a quarter of 8 blocks).
        core = Core(make_config(lookahead_kernels=2, capacity_bytes=8 * BLOCK, watermark_blocks=5))
        for it in range(3):
            feed(core, end(it), *(r for e in range(4) for r in (launch(e), fault(10 + e, e))))
        feed(core, end(3), launch(0), launch(1))
        # The iteration's last two kernels: what they prefetch for kernels 0 and 1
        return [c for c in feed(core, launch(2), launch(3)) if c[0] == "P" and c[2] in (0, 1)]

    # Memory kept: the next iteration's first kernels are predicted at the last ones.
    assert next_iterations_prefetches(mark) == [("P", 10, 0), ("P", 11, 1)]
    # Flushed: everything goes to the host at the mark; nothing predicted crosses it.
    assert next_iterations_prefetches(flush) == []


# ---- residency: pre-eviction and the fault path ------------------------------------


def test_pre_eviction_keeps_the_watermark_in_least_recently_migrated_order():
    core = Core(make_config(capacity_bytes=4 * BLOCK, watermark_blocks=1))
    cmds = feed(core, launch(0), fault(1), fault(2), launch(1), fault(3), fault(4),
                launch(2), fault(5), launch(3), fault(6))
    assert cmds == [("E", 1, 0), ("E", 2, 0), ("E", 3, 0)]
    assert core.stats().demand_evictions == 0


def test_an_unset_window_is_a_quarter_of_the_capacity():
    default = lib.DEEPUM_CFG_LOOKAHEAD_BLOCKS_DEFAULT
    assert make_config().lookahead_blocks == default  # no capacity
    assert make_config(capacity_bytes=100 * BLOCK).lookahead_blocks == 25
    assert make_config(capacity_bytes=3 * BLOCK).lookahead_blocks == 1
    assert make_config(capacity_bytes=8 * default * BLOCK).lookahead_blocks == default
    assert make_config(capacity_bytes=100 * BLOCK, lookahead_blocks=50).lookahead_blocks == 50  # set: kept


def test_the_window_holds_a_quarter_of_the_capacity_by_default_and_half_at_most():
    def window(capacity_blocks: int, **fields: int) -> list[tuple[str, int, int]]:
        core = Core(make_config(capacity_bytes=capacity_blocks * BLOCK, watermark_blocks=1, **fields))
        _learn_chain(core, [[1], [2, 3, 4], [5, 6, 7], [8, 9, 10], [11, 12, 13]])
        return feed(core, launch(0))

    # Room for all 13 blocks each time; the window takes kernels (the running
    # one's block does not count) while it holds fewer blocks than its budget.
    own_and_next_two = [("P", 1, 0), ("P", 2, 1), ("P", 3, 1), ("P", 4, 1), ("P", 5, 2), ("P", 6, 2), ("P", 7, 2)]
    next_three = own_and_next_two + [("P", 8, 3), ("P", 9, 3), ("P", 10, 3)]
    assert window(16) == own_and_next_two  # a quarter: stops at 6 >= 4 blocks
    assert window(32) == next_three  # at 9 >= 8
    assert window(16, lookahead_blocks=1000) == next_three  # set: capped at half, 8


def test_a_block_is_never_evicted_and_prefetched_by_the_same_record():
    """BERT's H200 trace, memory kept across iterations, half its footprint:
    a victim that a later walk of the same record predicts is taken back
    (the block stays) instead of going out and straight back in."""
    trace = Trace.read(DATA / "libdeepum/h200-bert-base-bs16x128-accessset-6it.dut.gz").without_flushes()
    core = Core(make_config(capacity_bytes=952 * BLOCK, watermark_blocks=29))
    evicted = round_trips = 0
    for i, r in enumerate(trace.records):
        if r["type"] == FAULT and core.is_resident(int(r["addr"])):
            continue  # a hit: the GPU does not fault, the core hears nothing
        cmds = core.process(r, i)
        gone = {int(c["addr"]) for c in cmds if c["op"] != PREFETCH}
        evicted += len(gone)
        round_trips += sum(1 for c in cmds if c["op"] == PREFETCH and int(c["addr"]) in gone)
    assert evicted > 5000 and round_trips == 0, (evicted, round_trips)  # the core before: 267


HORIZON = lib.DEEPUM_CFG_F_HORIZON
LRM = lib.DEEPUM_CFG_F_LRM_VICTIMS


def _horizon_run(flags: int, kernels: list[list[int]]) -> list[tuple[str, int, int]]:
    # Room for three blocks besides the watermark's one; one new block per extension.
    core = Core(make_config(capacity_bytes=4 * BLOCK, watermark_blocks=1, lookahead_kernels=16,
                            lookahead_blocks=1, flags=flags))
    _learn_chain(core, kernels)
    return feed(core, *(launch(e) for e in range(len(kernels))))


def test_with_a_horizon_blocks_never_predicted_again_go_first():
    # Kernel 4 uses block 10 again, nothing uses 11 again: least recently
    # migrated evicts 10 and fetches it back; the horizon evicts 11.
    kernels = [[10], [11], [12], [13], [10], [14]]
    assert _horizon_run(LRM, kernels) == [("P", 10, 0), ("P", 11, 1), ("P", 12, 2), ("E", 10, 0), ("P", 13, 3),
                                        ("E", 11, 0), ("P", 10, 4), ("E", 12, 0), ("P", 14, 5)]
    assert _horizon_run(HORIZON, kernels) == [("P", 10, 0), ("P", 11, 1), ("P", 12, 2), ("E", 11, 0),
                                              ("P", 13, 3), ("E", 12, 0), ("P", 14, 5)]


def test_with_a_horizon_the_victim_is_the_block_needed_last():
    # 10 comes back for kernel 4, 11 for kernel 5: Belady evicts 11.
    kernels = [[10], [11], [12], [13], [10], [11]]
    assert ("P", 10, 4) in _horizon_run(LRM, kernels)  # evicted first, fetched back
    cmds = _horizon_run(HORIZON, kernels)
    assert cmds[3] == ("E", 11, 0) and ("P", 10, 4) not in cmds
    assert [c for c in cmds if c[0] == "P"] == [("P", 10, 0), ("P", 11, 1), ("P", 12, 2), ("P", 13, 3),
                                                ("P", 11, 5)]


HISTORY = lib.DEEPUM_CFG_F_HISTORY


def _cyclic_misses(flags: int) -> list[tuple[int, list]]:
    """Six kernels touching blocks 1..6 in turn, five iterations, room for three
    blocks besides the watermark's one; prefetching off, so that only the
    victim choice differs.  Per iteration: misses, and the commands."""
    core = Core(make_config(capacity_bytes=4 * BLOCK, watermark_blocks=1, lookahead_kernels=1,
                            flags=lib.DEEPUM_CFG_F_NO_PREFETCH | flags))
    out = []
    for it in range(5):
        feed(core, rec(ITERATION, aux=it))
        before = core.stats()
        cmds = [c for k in range(6) for c in feed(core, launch(k), fault(k + 1))]
        after = core.stats()
        out.append(((after.faults - after.faults_resident) - (before.faults - before.faults_resident), cmds))
    return out


def test_with_history_the_victim_is_the_block_the_last_iteration_needed_latest():
    lrm, history = _cyclic_misses(LRM), _cyclic_misses(HISTORY)
    # A cyclic scan larger than memory: least recently migrated evicts exactly
    # the block needed next, and misses every access.
    assert [m for m, _ in lrm] == [6] * 5
    assert lrm[1][1][0] == ("E", 4, 0)
    # The first iteration is the same (nothing known yet); then the victim is
    # the block needed furthest ahead (6 at kernel 0), as Belady would choose.
    assert history[0] == lrm[0]
    assert history[1][1][0] == ("E", 6, 0)
    assert [m for m, _ in history] == [6, 4, 4, 4, 3]


def test_with_history_a_burst_of_victims_goes_farthest_next_use_first():
    # Iteration 0: kernel k faults block 10 + k, eight blocks filling the room
    # left by the watermark.  In iteration 1 kernel 0 faults three new blocks
    # at once; 10 and 11 are in the window (kernels 0 and 1).  The victims,
    # found by one scan (find_victim_by_use), are the blocks needed furthest
    # ahead, 17, 16 and 15; least recently migrated takes 12, 13 and 14.
    def burst(flags: int) -> list:
        core = Core(make_config(capacity_bytes=9 * BLOCK, watermark_blocks=1, lookahead_kernels=1,
                                flags=lib.DEEPUM_CFG_F_NO_PREFETCH | flags))
        feed(core, rec(ITERATION, aux=0))
        assert [c for k in range(8) for c in feed(core, launch(k), fault(10 + k))] == []
        feed(core, rec(ITERATION, aux=1))
        return feed(core, launch(0), fault(20), fault(21), fault(22))

    assert burst(LRM) == [("E", 12, 0), ("E", 13, 0), ("E", 14, 0)]
    assert burst(HISTORY) == [("E", 17, 0), ("E", 16, 0), ("E", 15, 0)]


RUNS = lib.DEEPUM_CFG_F_VICTIM_RUNS


def _two_victims(flags: int, neighbour_at: int) -> list:
    """Victims of the second iteration's first kernel, which faults two new
    blocks into a full GPU.  The first iteration's sixteen kernels each
    fault one block: block 30 at kernel 15 (the farthest next use), 50 at
    kernel 14, 30's neighbour 31 at @neighbour_at, the others (40-53) at the
    rest, none of them next to 30 or 31."""
    order = iter([b for b in range(40, 54) if b != 50])
    uses = {15: 30, 14: 50, neighbour_at: 31}
    core = Core(make_config(capacity_bytes=17 * BLOCK, watermark_blocks=1, lookahead_kernels=1,
                            flags=lib.DEEPUM_CFG_F_NO_PREFETCH | flags))
    feed(core, rec(ITERATION, aux=0))
    assert [c for k in range(16) for c in feed(core, launch(k), fault(uses.get(k) or next(order)))] == []
    feed(core, rec(ITERATION, aux=1))
    return feed(core, launch(0), fault(20), fault(21))


def test_victim_runs_take_a_neighbour_needed_at_least_half_as_late():
    # The best victim is 30 (needed at kernel 15), the next best 50 (14).
    # With runs, 30's neighbour 31 goes instead of 50 when it is needed no
    # sooner than half as late (kernel 10 against 14), so that the two are
    # written back as one range; needed at kernel 5 it stays.
    assert _two_victims(HISTORY, neighbour_at=10) == [("E", 30, 0), ("E", 50, 0)]
    assert _two_victims(HISTORY | RUNS, neighbour_at=10) == [("E", 30, 0), ("E", 31, 0)]
    assert _two_victims(HISTORY | RUNS, neighbour_at=5) == [("E", 30, 0), ("E", 50, 0)]


def test_victim_runs_need_victims_by_next_use():
    assert make_config(flags=RUNS).flags == HISTORY | RUNS
    assert make_config(flags=HORIZON | RUNS).flags == HORIZON | RUNS
    with pytest.raises(ConfigError):
        make_config(flags=LRM | RUNS)


def _history_after(uses: dict[int, int], launches: int) -> Core:
    """A core with history victims and room for two blocks besides the
    watermark's one, prefetching off, at the start of iteration 1, after an
    iteration 0 of @launches kernels where kernel k faulted block uses[k]
    (faults on resident blocks are heard too: late prefetches)."""
    core = Core(make_config(capacity_bytes=3 * BLOCK, watermark_blocks=1, lookahead_kernels=1,
                            flags=lib.DEEPUM_CFG_F_NO_PREFETCH | HISTORY))
    feed(core, rec(ITERATION, aux=0))
    assert [c for k in range(launches) for c in feed(core, launch(k), *([fault(uses[k])] if k in uses else []))] == []
    feed(core, rec(ITERATION, aux=1))
    return core


def test_with_history_a_block_needed_in_the_middle_of_an_iteration_stays_for_that_use():
    # Iteration 0: A is needed by kernels 0, 60 and 120, B by 1 and 110,
    # uses more than DUM_USE_GAP (32) apart.  In iteration 1 kernel 2 brings
    # in E: A is needed next at 60, B at 110, so B goes.  First and last use
    # alone said A was free until 120 (ResNet-50 on the H200: 18% of its victims came back within
    # 128 launches, by the last iteration's middle uses).
    core = _history_after({0: 10, 1: 11, 60: 10, 110: 11, 120: 10}, 121)
    assert feed(core, launch(0), fault(10), launch(1), fault(11), launch(2), fault(12)) == [("E", 11, 0)]


def test_history_runs_keep_the_longest_gaps_when_a_block_has_more_uses_than_they_hold():
    # A is needed at 0, 10, 100, 200, 300, 340 and 440: six runs of uses (0
    # and 10 are one, DUM_USE_GAP being 32) for four places.  300-340 merge
    # first (40 apart), then 0-10 with 100 (90 apart); 100-200 stays a gap.
    # B is needed at 1, 185 and 480.  At kernel 150 of the next iteration A
    # is next needed at 200, B at 185: A goes.  Had 100 and 200 merged, A
    # would look needed within the gap and B go; first and last use alone
    # made A free until 440, B until 480: B went.
    core = _history_after({0: 10, 10: 10, 100: 10, 200: 10, 300: 10, 340: 10, 440: 10,
                           1: 11, 185: 11, 480: 11}, 481)
    assert feed(core, *(launch(k) for k in range(151)), fault(12)) == [("E", 10, 0)]


def test_with_history_an_iteration_longer_than_the_last_still_ranks_next_uses():
    # Iteration 0 is ten kernels: A at 0, B at 9.  At kernel 11 of iteration
    # 1, past the last iteration's length, both are next needed in the next
    # iteration, A first: B goes.  (Before, A's distance went below zero and
    # wrapped to the largest, so A went.)
    core = _history_after({0: 10, 9: 11}, 10)
    assert feed(core, *(launch(k) for k in range(12)), fault(12)) == [("E", 11, 0)]


def test_the_history_scan_reaches_the_victim_belady_would_take_in_a_budget_of_thousands():
    # Iteration 0: kernel k faults block 10 + k, 5,000 kernels filling the
    # room left by the watermark.  In iteration 1 kernel 0 faults a new block:
    # the victim is the block needed last, 10 + 4999, which only a scan of the
    # whole budget sees; the oldest 4096 (the default scan until API 1.5)
    # offer 10 + 4095 at best.  GPT-2 XL at 75% holds 18,663 blocks.
    kernels = 5000

    def victim(**scan) -> list:
        cfg = make_config(capacity_bytes=(kernels + 1) * BLOCK, watermark_blocks=1, lookahead_kernels=1,
                          flags=lib.DEEPUM_CFG_F_NO_PREFETCH | HISTORY, **scan)
        core = Core(cfg)
        feed(core, rec(ITERATION, aux=0))
        assert [c for k in range(kernels) for c in feed(core, launch(k), fault(10 + k))] == []
        feed(core, rec(ITERATION, aux=1))
        return feed(core, launch(0), fault(10 + kernels))

    assert victim() == [("E", 10 + kernels - 1, 0)]
    assert victim(evict_scan=lib.DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT) == [("E", 10 + 4095, 0)]


def test_the_history_scan_defaults_to_the_capacity_within_its_bounds():
    assert make_config(capacity_bytes=100 * BLOCK).evict_scan == lib.DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT
    assert make_config(capacity_bytes=18663 * BLOCK).evict_scan == 18663
    assert make_config(capacity_bytes=(1 << 20) * BLOCK).evict_scan == lib.DEEPUM_CFG_EVICT_SCAN_MAX
    assert make_config(capacity_bytes=18663 * BLOCK, evict_scan=4096).evict_scan == 4096
    assert make_config(capacity_bytes=18663 * BLOCK, flags=LRM).evict_scan == lib.DEEPUM_CFG_EVICT_SCAN_DEFAULT


def test_victims_by_history_are_the_default_and_one_choice_excludes_the_others():
    cfg = make_config()
    assert cfg.flags == HISTORY and cfg.evict_scan == lib.DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT
    assert make_config(flags=HISTORY, evict_scan=100).evict_scan == 100
    for other in (HORIZON, LRM):
        cfg = make_config(flags=other)
        assert cfg.flags == other and cfg.evict_scan == lib.DEEPUM_CFG_EVICT_SCAN_DEFAULT
    for both in (HISTORY | HORIZON, HISTORY | LRM, HORIZON | LRM):
        with pytest.raises(ConfigError):
            make_config(flags=both)


def test_victims_are_never_in_the_predicted_window():
    core = Core(make_config(capacity_bytes=8 * BLOCK, watermark_blocks=6))
    _learn_chain(core, [[1], [2], [3], [4], [5]])
    # Room for 1 and 2 above the watermark; 3 would need a victim, and both are
    # predicted: stop.
    assert feed(core, launch(0)) == [("P", 1, 0), ("P", 2, 1)]
    assert core.stats().window_full >= 1
    # Kernel 0 is done: its block may go now, for kernel 2's.
    assert feed(core, launch(1)) == [("E", 1, 0), ("P", 3, 2)]


def test_a_fault_on_a_full_gpu_evicts_on_the_fault_path():
    core = Core(make_config(capacity_bytes=2 * BLOCK, watermark_blocks=1))
    assert feed(core, launch(0), fault(1), fault(2)) == []  # the running kernel's own
    assert feed(core, fault(3)) == [("E", 1, CMD_DEMAND)]
    assert core.stats().demand_evictions == 1


def test_the_model_never_exceeds_capacity(gpt2):
    core = Core(make_config(capacity_bytes=512 * BLOCK))
    for r in gpt2.records[:6000]:
        core.process(r)
        assert core.stats().resident_blocks <= 512


# ---- invalidation ------------------------------------------------------------------


def test_freed_blocks_are_discarded_and_fetched_again_when_predicted():
    core = Core(make_config())
    feed(core, flush(0), launch(0), fault(1), fault(2), fault(3))
    assert feed(core, rec(FREE, blk(2), 2 * BLOCK)) == [("D", 2, 0), ("D", 3, 0)]
    assert core.stats().invalidated_bytes == 2 * BLOCK
    feed(core, flush(1))
    # the kernel that touched them runs again: its memory was handed out anew
    assert feed(core, launch(0)) == [("P", 1, 0), ("P", 2, 0), ("P", 3, 0)]
    assert core.stats().revived_dead == 2
    # alive again: a later free discards them again
    assert feed(core, rec(FREE, blk(3), BLOCK)) == [("D", 3, 0)]


def test_a_dead_block_nobody_predicts_stays_dead():
    core = Core(make_config())
    feed(core, flush(0), fault(2), launch(0), fault(1))  # block 2: before any kernel, learned by none
    assert feed(core, rec(FREE, blk(2), BLOCK)) == [("D", 2, 0)]
    feed(core, flush(1))
    assert feed(core, launch(0)) == [("P", 1, 0)]
    assert core.stats().revived_dead == 0


def test_partially_freed_blocks_stay_alive():
    core = Core(make_config())
    feed(core, launch(0), fault(1), fault(2))
    assert feed(core, rec(FREE, blk(2) + 4096, BLOCK)) == []
    assert core.stats().invalidated_bytes == 0
    assert core.is_resident(blk(2))


def test_a_huge_free_is_bounded_work():
    core = Core(make_config())
    feed(core, launch(0), fault(1), fault(2))
    cmds = feed(core, rec(FREE, BLOCK, (1 << 63) - BLOCK))
    assert sorted(cmds) == [("D", 1, 0), ("D", 2, 0)]


# ---- determinism, validation, failure ---------------------------------------------


def test_same_input_same_commands_byte_for_byte(gpt2):
    records = gpt2.records[:12000]
    a = Core(make_config(capacity_bytes=1 << 30)).run(records)
    b = Core(make_config(capacity_bytes=1 << 30)).run(records)
    assert len(a) > 1000
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("bad", [
    rec(0),
    rec(6),
    rec(LAUNCH, flags=1),
    rec(FAULT, 4096, aux=1),  # block 0 is never UM
    rec(FAULT, blk(3), aux=9),
    rec(FAULT, blk(3), flags=1 << 7),
    rec(FREE, (1 << 64) - BLOCK, 2 * BLOCK),  # wraps around
    rec(ITERATION, flags=1 << 9),
])
def test_malformed_records_are_refused_without_effect(bad):
    core = Core(make_config())
    feed(core, launch(0), fault(1))
    before = core.stats()
    with pytest.raises(RecordError):
        core.process(bad)
    assert core.stats() == before


def test_allocation_failure_at_init_is_a_clean_error():
    failures = 0
    try:
        for k in range(64):
            lib.dum_port_fail_allocs_after = k
            try:
                Core(make_config())
                break
            except MemoryError:
                failures += 1
    finally:
        lib.dum_port_fail_allocs_after = -1
    assert failures >= 5  # every table allocation can fail on its own
    assert Core(make_config()).stats().records == 0


def test_memory_is_allocated_at_init_only(gpt2):
    # The configured bound is what the core holds, whatever the trace.
    from pydeepum.config import memory_bytes
    small = make_config(corr_sets=64, block_max=1024, exec_max=2048)
    core = Core(small)
    core.run(gpt2.records[:4000])
    assert memory_bytes(small) < 2 << 20
    assert core.stats().blocks_untracked > 0  # 1024 tracked blocks were not enough
    assert np.all(core.run(gpt2.records[4000:4500])["op"] > 0)
