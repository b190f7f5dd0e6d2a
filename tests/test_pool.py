"""Stream-ordered allocations on managed memory (userlib/pool.c), against the
fake libcuda: cuMemAllocAsync/cuMemFreeAsync answered from managed
segments, best fit with splitting and coalescing, per-stream reuse, dead
2 MiB blocks discarded in stream order, pass-through where the pool cannot
serve, and frees that still work after deepum turned itself off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from userlib_harness import FAKE_CUPTI, LIB_FAULTS, MIB, build, run_app

BLOCK = 2 * MIB


@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    build()


def pool(tmp_path: Path, mode: str = "user", **env: str):
    settings = {"DEEPUM_MODE": mode, "DEEPUM_MANAGED": "1", "DEEPUM_CAPACITY": str(64 * BLOCK),
                "DEEPUM_FAULTS": "cupti", "DEEPUM_CUPTI": str(FAKE_CUPTI), **env}
    r = run_app(tmp_path, "runtime", "pool", lib=LIB_FAULTS, env=settings)
    addresses = {name: int(value, 16) for name, value in
                 (line.split() for line in r.stdout.splitlines() if line.startswith(tuple("abcohp")) and " 0x" in line)}
    return r, addresses


def segments(r) -> list[tuple[int, int]]:
    return [(int(c.result(), 16), int(c.args["size"])) for c in r.named("cuMemAllocManaged")]


def discarded(r) -> list[tuple[str, int, int]]:
    out = []
    for c in r.named("cuMemDiscardBatchAsync"):
        assert c.result() != "invalid", c.line
        for piece in c.args["ranges"].split(","):
            addr, size = piece.split("+")
            out.append((c.args["stream"], int(addr, 16), int(size)))
    return out


def test_allocations_come_from_managed_segments_best_fit_split_and_coalesced(tmp_path):
    r, at = pool(tmp_path)
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    small, medium, other, large = segments(r)
    # small requests share a 2 MiB segment, rounded to 512 bytes; a free place is reused first
    assert small[1] == BLOCK and at["a"] == small[0] and at["b"] == at["a"] + 1024 and at["c"] == at["a"]
    # medium ones a 20 MiB segment, split; freed neighbours coalesce, so the same request lands there again
    assert medium[1] == 20 * MIB and at["big1"] == medium[0] and at["big2"] == at["big1"] + 3 * MIB
    assert at["again"] == at["big1"]
    # another stream never gets memory freed on the first: a segment of its own
    assert other == (at["other"], BLOCK)
    # a large request: a segment of its own, rounded up to whole blocks
    assert large == (at["huge"], 34 * MIB)
    # none of these reached the driver's pool; the per-thread default stream's did (one handle, many streams)
    (driver_alloc,) = r.named("cuMemAllocAsync", "cuMemAllocAsync_ptsz")
    assert int(driver_alloc.result(), 16) == at["per_thread"]
    freed_by_driver = {int(c.args["dptr"], 16) for c in r.named("cuMemFreeAsync", "cuMemFreeAsync_ptsz")}
    assert freed_by_driver == {0x1234, at["per_thread"]}
    assert not r.named("cuMemFree_v2")  # cuMemFree of pool memory: the pool's, after a synchronize
    assert r.named("cuCtxSynchronize")
    c = r.stats["counters"]
    assert c["pool_allocs"] == 8 and c["pool_segments"] == 4 and c["pool_fallback"] == 0
    assert c["pool_frees_synchronized"] == 1  # "huge" freed on the other stream: waited for
    assert [s.args["stream"] for s in r.named("cuStreamSynchronize")] == [hex(0x1020)]


def test_blocks_no_allocation_lives_in_are_discarded_unless_used_again_first(tmp_path):
    r, at = pool(tmp_path)
    s1, s2 = hex(0x1010), hex(0x1020)
    calls = [[(c.args["stream"], int(a, 16), int(n)) for a, n in (p.split("+") for p in c.args["ranges"].split(","))]
             for c in r.named("cuMemDiscardBatchAsync")]
    assert all(c.result() != "invalid" for c in r.named("cuMemDiscardBatchAsync"))
    assert calls == [
        # big1 and big2 freed killed three blocks; "again" took the first two back before the mark
        [(s1, at["big1"] + 2 * BLOCK, BLOCK)],
        # at the next mark, one call per stream: the small segment's block and the large segment
        [(s1, at["a"], BLOCK), (s1, at["huge"], 34 * MIB)],
        [(s2, at["other"], BLOCK)],
    ]
    assert r.stats["counters"]["pool_dead_blocks"] == 1 + 1 + 17 + 1
    assert r.stats["engine"]["counters"]["free_discard_calls"] == 3


def test_demand_mode_pools_but_reports_no_frees(tmp_path):
    r, at = pool(tmp_path, mode="demand")
    assert r.returncode == 0 and r.warnings() == []
    assert r.stats["counters"]["pool_allocs"] == 8
    assert not r.named("cuMemDiscardBatchAsync") and r.stats["counters"]["pool_dead_blocks"] == 0


def test_without_managed_memory_the_driver_allocates(tmp_path):
    r, at = pool(tmp_path, DEEPUM_MANAGED="0", DEEPUM_MODE="observe")
    assert r.returncode == 0
    assert len(r.named("cuMemAllocAsync", "cuMemAllocAsync_ptsz")) == 9 and not r.named("cuMemAllocManaged")
    assert r.stats["counters"]["pool_allocs"] == 0


def test_pool_memory_is_freed_by_the_pool_after_deepum_turns_off(tmp_path):
    # the engine cannot start (its stream), at the first launch: after big1 and big2 were pooled
    r, at = pool(tmp_path, FAKECUDA_FAIL="cuStreamCreateWithPriority")
    assert r.returncode == 0, r.stderr  # cuda_app checks every free
    assert len(r.warnings()) == 1
    assert r.stats["counters"]["pool_allocs"] == 5  # a, b, c, big1, big2; the rest is the driver's
    by_driver = {int(c.result(), 16) for c in r.named("cuMemAllocAsync", "cuMemAllocAsync_ptsz")}
    assert by_driver == {at["again"], at["other"], at["huge"], at["per_thread"]}
    freed_by_driver = {int(c.args["dptr"], 16) for c in r.named("cuMemFreeAsync", "cuMemFreeAsync_ptsz")}
    assert freed_by_driver == {at["huge"], at["other"], at["per_thread"], 0x1234}  # never the pool's


def test_a_training_loop_in_stream_order_is_learned_with_its_activations_discarded(tmp_path):
    """cuda_app's layers-async: weights by cuMemAlloc, activations by
    cuMemAllocAsync on the legacy stream, freed after their last use."""
    common = {"DEEPUM_MANAGED": "1", "DEEPUM_CAPACITY": str(48 * BLOCK), "DEEPUM_WATERMARK": "14",
              "DEEPUM_FAULTS": "cupti", "DEEPUM_CUPTI": str(FAKE_CUPTI), "DEEPUM_TEST_LOCKSTEP": "1"}
    runs = {mode: run_app(tmp_path, "symbol", "layers-async", "6", "8", lib=LIB_FAULTS,
                          env={**common, "DEEPUM_MODE": mode}) for mode in ("user", "demand")}
    for r in runs.values():
        assert r.returncode == 0 and r.warnings() == [], r.stderr
        # the pool hands out the same addresses every iteration: exec IDs stay known
        assert r.stats["counters"]["exec_new"] == 16 and r.stats["counters"]["pool_segments"] == 9

    def faulted(r) -> list[int]:
        return [it["faults_fed"] + it["transfer_faults_fed"] + it["late_faults_fed"]
                for it in r.stats["engine"]["iterations"][:6]]

    user, demand = runs["user"], runs["demand"]
    # freed activations were discarded in the legacy stream's order: on the engine's blocking stream
    (blocking,) = [c.result() for c in user.named("cuStreamCreateWithPriority") if c.args["flags"] == "0"]
    assert {s for s, _, _ in discarded(user)} == {blocking}
    assert user.stats["engine"]["counters"]["free_discards_skipped"] == 0
    assert user.stats["engine"]["counters"]["discard_blocks"] > 0
    # dead activations predicted again are prefetched: far fewer faults than demand paging
    assert faulted(demand)[1:] == [70] * 5
    assert max(faulted(user)[3:]) <= 70 // 2, faulted(user)
