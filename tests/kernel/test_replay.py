"""Fault replay: the bundled real trace through TEST_INJECT -> the in-kernel
pipeline -> TEST_DRAIN must give, byte for byte, the commands the userspace
core (pydeepum.core.Core, the same sources) gives; once, and from 8
processes at a time, with module-wide counters that add up; and under a
budget with forgetting, a configuration of the process's own."""

from __future__ import annotations

import dataclasses
import os
import pickle

import numpy as np
import pytest

from pydeepum._lowlevel import lib
from pydeepum.core import Core
from pydeepum.device import Device
from pydeepum.replay import CoreStats

PROCESSES = 8


@pytest.fixture(scope="module")
def replay_config():
    with Device() as dev:
        dev.attach()
        return dev.config()  # what a new context gets: the defaults


@pytest.fixture(scope="module")
def expected(gpt2_records: np.ndarray, replay_config) -> tuple[bytes, CoreStats]:
    """The userspace core's commands and counters for the whole trace."""
    core = Core(replay_config)
    cmds = core.run(gpt2_records)
    return cmds.tobytes(), core.stats()


def replay_in_kernel(records: np.ndarray) -> tuple[bytes, CoreStats]:
    with Device() as dev:
        dev.attach()
        cmds = dev.replay(records)
        return cmds.tobytes(), dev.stats()


# Counters only the pipeline around the core keeps, or that measure time.
NOT_CORE = {"core_ns", "records_dropped", "cmds_dropped", "prefetch_late"}


def test_replay_matches_userspace_core(gpt2_records: np.ndarray, expected) -> None:
    cmds, stats = replay_in_kernel(gpt2_records)
    want_cmds, want_stats = expected
    assert len(cmds) == len(want_cmds)
    assert cmds == want_cmds
    assert stats.records == len(gpt2_records)
    assert stats.records_dropped == 0 and stats.cmds_dropped == 0
    assert stats.core_ns > 0
    got = {k: v for k, v in dataclasses.asdict(stats).items() if k not in NOT_CORE}
    want = {k: v for k, v in dataclasses.asdict(want_stats).items() if k not in NOT_CORE}
    assert got == want


def test_a_forgetting_core_under_a_budget_replays_as_in_userspace(gpt2_records: np.ndarray,
                                                                  replay_config) -> None:
    """The trace's first iteration has only new exec IDs, so a core with
    DEEPUM_CFG_F_FORGET_UNSETTLED forgets at its mark; the module's does it
    as the userspace core does (and differently from one that does not)."""
    forgetting = dataclasses.replace(replay_config, capacity_blocks=400,
                                     flags=replay_config.flags | lib.DEEPUM_CFG_F_FORGET_UNSETTLED)
    want = Core(forgetting).run(gpt2_records).tobytes()
    assert want != Core(dataclasses.replace(forgetting, flags=replay_config.flags)).run(gpt2_records).tobytes()
    with Device() as dev:
        dev.attach()
        dev.configure(forgetting)
        assert dev.replay(gpt2_records).tobytes() == want


def test_concurrent_replays(gpt2_records: np.ndarray, expected) -> None:
    """8 processes replay at once: each gets the userspace core's commands,
    and the module-wide counters grow by exactly the sum of theirs."""
    with Device() as dev:
        before = dev.stats(global_scope=True)
    children = []
    for _ in range(PROCESSES):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            result: object
            try:
                cmds, stats = replay_in_kernel(gpt2_records)
                result = (cmds == expected[0], dataclasses.asdict(stats))
            except BaseException as e:
                result = repr(e)
            with os.fdopen(w, "wb") as f:
                pickle.dump(result, f)
            os._exit(0)
        os.close(w)
        children.append((pid, r))

    finals = []
    for pid, r in children:
        with os.fdopen(r, "rb") as f:
            result = pickle.load(f)
        os.waitpid(pid, 0)
        assert isinstance(result, tuple), f"child {pid}: {result}"
        same, stats = result
        assert same, f"child {pid}: commands differ from the userspace core's"
        finals.append(stats)

    with Device() as dev:
        after = dataclasses.asdict(dev.stats(global_scope=True))
    before = dataclasses.asdict(before)
    for name in after:
        if name == "resident_blocks":  # a gauge: the children's contexts are gone
            assert after[name] == before[name]
            continue
        assert after[name] - before[name] == sum(s[name] for s in finals), name
    assert after["records"] - before["records"] == PROCESSES * len(gpt2_records)
