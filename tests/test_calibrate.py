"""scripts/calibrate without a GPU: the measurement sequence, the mapping to
h200.json's keys, the merge with the base file, the table and the safety
refusal, on a fake backend that models a GPU (where the buffer is decides
what a measurement costs, so a measurement taken from the wrong state gives
the wrong number)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from pydeepum import calibration
from pydeepum.simulate import cost_model
from testlib import load_script

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts/calibrate"
GIB, MIB = 1 << 30, 1 << 20
BLOCK = 2 * MIB
US = 1e-6


cal_script = load_script("calibrate")

# The fake GPU's truth: what a correct measurement sequence must recover.
LINK_H2D, LINK_D2H = 50e9, 40e9
BULK_H2D, EVICT = 45e9, 15e9
RANGE_OVERHEAD, BATCH_RATE = 80 * US, 48e9  # a batch-prefetched range costs overhead + size / rate
SHARED = 0.25  # of a prefetch that overlaps a write-back going the other way
ONE_STREAM = 0.8  # both from one stream, over one after the other
CALL_ISSUE, CALL_RATE, CALL_EVICT_RATE = 100 * US, 18e9, 10e9
PARALLEL = {"seq": 16e9, "random": 14e9}
CHAIN_FAULT = {"seq": 380 * US, "random": 420 * US}  # per 2 MiB block, queued kernels
SYNCED_FAULT = {"seq": 400 * US, "random": 440 * US}  # per block, a synchronize after each
KERNEL, SYNC = 5 * US, 25 * US
WORD_FAULT = 35 * US
DISCARD_4096 = 0.030  # s for 4,096 blocks
ADVISE_CALL, DROP_PER_BLOCK, WRITE_UPGRADE_PER_BLOCK = 30 * US, 20 * US, 60 * US
DUP_PREFETCH = 40e9
UVM = {"uvm_perf_prefetch_threshold": 60, "uvm_perf_fault_batch_count": 128, "uvm_perf_thrashing_threshold": 3,
       "uvm_perf_thrashing_lapse_usec": 500, "uvm_unrelated": 7}


class FakeGPU:
    def __init__(self, device: int = 0, free: int = 100 * GIB, host: int = 100 * GIB, batch: bool = True,
                 discard: bool = True, advise: bool = True):
        self.free, self.host = free, host
        self.has_batch_prefetch, self.has_discard, self.has_advise_location = batch, discard, advise
        # None before setup; "host" / "gpu" once allocated; "both" = read-only copies on both
        self.where = None
        self.read_mostly = False
        self.setup_calls: list[tuple[int, int]] = []
        self.closed = False
        self.separate: list[int] = []
        self.separate_closed = False
        self.copy_times: list[float] = []  # scripted h2d copy times, else from LINK_H2D
        self.fail_on: dict[str, int] = {}  # method -> fail at that call number (1-based)
        self.calls: dict[str, int] = {}

    def _enter(self, what: str) -> None:
        assert self.where is not None and not self.closed, f"{what} before setup or after close"
        self.calls[what] = self.calls.get(what, 0) + 1
        if self.fail_on.get(what) == self.calls[what]:
            raise RuntimeError(f"{what}: CUDA error 700 (an illegal memory access was encountered)")

    def device_info(self):
        return {"name": "Fake GPU 9000", "device": "Fake GPU 9000 (10 GiB)", "driver": "fake driver 1.0, CUDA 13.0"}

    def gpu_mem_info(self):
        return self.free, 2 * self.free

    def host_mem_available(self):
        return self.host

    def uvm_params(self):
        self._enter("uvm_params")
        return dict(UVM)

    def setup(self, nbytes, link_bytes):
        self.setup_calls.append((nbytes, link_bytes))
        self.nbytes, self.link_bytes, self.nblocks = nbytes, link_bytes, nbytes // BLOCK
        self.where = "host"

    def close(self):
        self.closed = True

    def copy_s(self, direction):
        self._enter("copy_s")
        if direction == "h2d" and self.copy_times:
            return self.copy_times.pop(0)
        return self.link_bytes / (LINK_H2D if direction == "h2d" else LINK_D2H)

    def prefetch_s(self, to):
        self._enter("prefetch_s")
        moved = self.where not in (to, "both")
        if moved and self.read_mostly:  # a read-only copy where it goes; the other stays
            self.where = "both"
            return self.nbytes / (DUP_PREFETCH if to == "gpu" else EVICT)
        if self.where == "both":
            return 1 * US
        self.where = to
        if not moved:
            return 1 * US
        return self.nbytes / (BULK_H2D if to == "gpu" else EVICT)

    def read_mostly_s(self, on, range_bytes):
        self._enter("read_mostly_s")
        calls = -(-self.nbytes // range_bytes)
        self.read_mostly = on
        if on or self.where != "both":
            return calls * ADVISE_CALL
        self.where = "host"  # copies collapse onto the host
        return calls * ADVISE_CALL + self.nblocks * DROP_PER_BLOCK

    def write_pages_s(self, blocks):
        self._enter("write_pages_s")
        assert sorted(blocks) == list(range(self.nblocks))
        if self.where == "both":
            self.where = "gpu"
            return 1e-3 + self.nblocks * WRITE_UPGRADE_PER_BLOCK
        assert self.where == "gpu", "writes are measured on resident memory"
        return 1e-3

    def prefetch_threads_s(self, to, threads):
        self._enter("prefetch_threads_s")
        moved = self.where != to
        self.where = to
        # the fake's write-backs scale with threads up to 4, its prefetches not at all
        return self.nbytes / (BULK_H2D if to == "gpu" else EVICT * min(threads, 4)) if moved else 1 * US

    def setup_separate(self, count, nbytes_each):
        self._enter("setup_separate")
        assert not self.separate, "separate allocations set up twice"
        self.separate = [nbytes_each] * count

    def evict_separate_s(self, threads):
        self._enter("evict_separate_s")
        assert self.separate and len(self.separate) % threads == 0
        # separate mappings: the fake's write-backs scale with threads all the way
        return sum(self.separate) / (EVICT * threads)

    def close_separate(self):
        self.separate_closed = bool(self.separate)
        self.separate = []

    def prefetch_calls(self, to, range_bytes):
        self._enter("prefetch_calls")
        n = self.nbytes // range_bytes
        moved = self.where != to
        self.where = to
        rate = CALL_RATE if to == "gpu" else CALL_EVICT_RATE
        return n * CALL_ISSUE, (self.nbytes / rate if moved else n * CALL_ISSUE)

    def batch_prefetch(self, range_bytes, order, per_call, streams):
        self._enter("batch_prefetch")
        assert sorted(order) == list(range(-(-self.nbytes // range_bytes))), "every range once"
        calls = -(-len(order) // per_call)
        issue = calls * 50 * US + len(order) * 5 * US
        if self.where == "gpu":
            return issue, issue
        self.where = "gpu"
        return issue, len(order) * RANGE_OVERHEAD + self.nbytes / BATCH_RATE

    def half_moves_s(self, evict, prefetch, range_bytes, order, one_stream=False):
        self._enter("half_moves_s")
        assert self.where == "host", "the halves are set up from a buffer on the host"
        half = self.nbytes // 2
        assert sorted(order) == list(range(half // range_bytes)), "every range of a half once"
        per_range = RANGE_OVERHEAD * len(order)
        alone = {"evict": per_range + half / EVICT, "prefetch": per_range + half / BATCH_RATE}
        # the fake's driver runs SHARED of the shorter move's time alongside the longer one, the rest after it
        if one_stream:  # one thread, one stream: one after the other, less what its queue overlaps
            assert evict and prefetch
            return ONE_STREAM * sum(alone.values())
        if evict and prefetch:
            return max(alone.values()) + (1 - SHARED) * min(alone.values())
        return alone["evict"] if evict else alone["prefetch"]

    def _order(self, blocks):
        return "seq" if blocks == sorted(blocks) else "random"

    def touch_parallel_s(self, blocks):
        self._enter("touch_parallel_s")
        assert sorted(blocks) == list(range(self.nblocks))
        on_host = self.where == "host"
        if self.where != "both":
            self.where = "both" if on_host and self.read_mostly else "gpu"
        return self.nbytes / PARALLEL[self._order(blocks)] if on_host else 1e-3

    def touch_chain_s(self, blocks):
        self._enter("touch_chain_s")
        on_host = self.where == "host"
        self.where = "gpu"
        return len(blocks) * (KERNEL + (CHAIN_FAULT[self._order(blocks)] if on_host else 0))

    def touch_synced_s(self, blocks, whole):
        self._enter("touch_synced_s")
        on_host = self.where == "host"
        fault = SYNCED_FAULT[self._order(blocks)] if whole else WORD_FAULT
        if on_host and not whole:
            # a word touch faults its block in; the rest of the buffer stays on the host
            self.where = "mixed"
        elif on_host:
            self.where = "gpu"
        return len(blocks) * (KERNEL + SYNC + (fault if on_host else 0))

    def discard_s(self):
        self._enter("discard_s")
        assert self.where == "gpu", "discard is measured on resident blocks"
        self.where = "discarded"
        return DISCARD_4096 * self.nblocks / 4096


def run_main(tmp_path, *args, fake=None, json_out=True):
    fake = fake or FakeGPU()
    out = tmp_path / "cal.json"
    argv = ["-o", str(out), *args] + (["--json"] if json_out else [])
    rc = cal_script.main(argv, backend_factory=lambda device: fake)
    return rc, out, fake


def batch_rate(size):
    return size / (RANGE_OVERHEAD + size / BATCH_RATE) / 1e9


def test_every_simulator_key_is_measured_and_the_rest_carried_over(tmp_path, capsys):
    rc, out, fake = run_main(tmp_path)
    assert rc == 0
    assert fake.setup_calls == [(8 * GIB, 2 * GIB)] and fake.closed
    base = calibration.load()
    new = calibration.load(out)
    approx = lambda x: pytest.approx(x, rel=2e-3)  # noqa: E731 -- values are rounded to 0.01
    assert new["link_h2d_pinned_GBps"] == approx(50.0)
    assert new["link_d2h_pinned_GBps"] == approx(40.0)
    assert new["prefetch_bulk_h2d_GBps"] == approx(45.0)
    assert new["evict_to_host_bulk_GBps"] == approx(15.0)
    assert new["evict_to_host_by_threads_GBps"] == {"1": approx(15.0), "2": approx(30.0), "4": approx(60.0),
                                                    "8": approx(60.0)}
    assert list(new["prefetch_by_threads_GBps"].values()) == [approx(45.0)] * 4
    assert new["evict_to_host_by_threads_separate_GBps"] == {"1": approx(15.0), "2": approx(30.0),
                                                             "4": approx(60.0), "8": approx(120.0)}
    assert fake.separate_closed and not fake.separate
    assert new["prefetch_call_per_2MiB_cpu_us"] == approx(100.0)
    assert new["prefetch_per_2MiB_calls_GBps"] == approx(18.0)
    assert new["evict_to_host_per_2MiB_GBps"] == approx(10.0)
    by_size = new["batch_prefetch_GBps_by_range_size"]
    for mib in (2, 8, 32, 128):
        assert by_size[f"{mib}MiB"] == approx(batch_rate(mib * MIB))
    assert by_size["one_8GiB_range"] == approx(batch_rate(8 * GIB))
    issue = new["batch_prefetch_cpu_issue_us_per_2MiB_block"]
    assert issue["256_per_call"] == approx(5 + 50 / 256) and issue["1_per_call"] == approx(55.0)
    assert set(issue) == {"4096_per_call", "256_per_call", "64_per_call", "16_per_call", "1_per_call"}
    both = new["evict_and_prefetch_at_once"]
    half = 4 * GIB
    for mib in (2, 32):
        ranges = half // (mib * MIB)
        evict, prefetch = ranges * RANGE_OVERHEAD + half / EVICT, ranges * RANGE_OVERHEAD + half / BATCH_RATE
        together = evict + (1 - SHARED) * prefetch
        assert both[f"{mib}MiB_evict_alone_GBps"] == approx(half / evict / 1e9)
        assert both[f"{mib}MiB_prefetch_alone_GBps"] == approx(half / prefetch / 1e9)
        assert both[f"{mib}MiB_both_GBps"] == approx(2 * half / together / 1e9)
        assert both[f"{mib}MiB_together_over_serial"] == pytest.approx(together / (evict + prefetch), abs=0.005)
        assert both[f"{mib}MiB_one_stream_over_serial"] == pytest.approx(ONE_STREAM, abs=0.005)
        assert both[f"{mib}MiB_one_stream_GBps"] == approx(2 * half / (ONE_STREAM * (evict + prefetch)) / 1e9)
    assert new["demand_paging_parallel_seq_GBps"] == approx(16.0)
    assert new["demand_paging_parallel_random_GBps"] == approx(14.0)
    assert new["demand_paging_dependent_chain_seq_GBps"] == approx(BLOCK / 385e-6 / 1e9)
    # The base file's convention: 2 MiB over the chain's rate, [address order, random order].
    assert new["dependent_2MiB_block_fault_us"] == [approx(385.0), approx(425.0)]
    assert new["dependent_2MiB_block_fault_synced_us"] == [approx(400.0), approx(440.0)]
    assert new["first_fault_in_2MiB_block_us"] == approx(35.0)
    assert new["discard_batch_4096x2MiB_ms"] == approx(30.0)
    nblocks = 8 * GIB // BLOCK
    assert new["read_duplicate_set_ms"] == approx(0.03)
    assert new["read_duplicate_prefetch_GBps"] == approx(40.0)
    assert new["read_duplicate_drop_per_2MiB_us"] == approx(20 + 30)
    assert new["read_duplicate_refault_over_resident"] == approx(8 * GIB / 16e9 / 1e-3)
    assert new["read_duplicate_drop_bulk_GBps"] == approx(8 * GIB / (30 * US + nblocks * 20 * US) / 1e9)
    assert new["read_duplicate_evict_written_GBps"] == approx(8 * GIB / (8 * GIB / 15e9 + 30 * US + nblocks * 20 * US) / 1e9)
    assert new["read_duplicate_write_over_plain_per_2MiB_us"] == approx(60.0)
    assert new["uvm_defaults"]["prefetch_threshold_percent"] == 60
    assert new["uvm_defaults"]["fault_batch_count"] == 128
    assert "uvm_unrelated" not in new["uvm_defaults"]
    assert new["device"] == "Fake GPU 9000 (10 GiB)" and new["driver"] == "fake driver 1.0, CUDA 13.0"
    assert "median of 3 runs each, 8 GiB buffer" in new["measured"]
    carried = {"single_dependent_fault_roundtrip_us", "discard_then_evict_8GiB_GBps", "discard_then_evict_2GiB_GBps",
               "uvm_defaults.va_block_bytes", "uvm_defaults.big_page_bytes", "prefetch_while_all_SMs_busy_GBps",
               "launch_empty_kernel_us", "launch_plus_cuLaunchHostFunc_us", "launch_plus_cuStreamWriteValue64_us",
               "engine_write_back_per_2MiB_us", "engine_write_back_per_range_us"}
    assert set(new["carried_over"]) == carried
    assert new["launch_empty_kernel_us"] == base["launch_empty_kernel_us"]
    assert new["uvm_defaults"]["big_page_bytes"] == base["uvm_defaults"]["big_page_bytes"]
    assert "failed" not in new
    # The base file's key order is kept; the new keys come after.
    assert [k for k in new if k in base] == [k for k in base if k in new]
    # The simulator takes it, and its fit recovers the fake's link.
    cost = cost_model(new)
    assert cost["prefetch_range_ns"] == pytest.approx(80_000, rel=0.01)
    assert cost["prefetch_bytes_per_sec"] == pytest.approx(48e9, rel=0.01)
    assert cost["tree_threshold_pct"] == 60
    rounds = -(-32 * 60 // 100)
    assert cost["fault_ns"] == pytest.approx((405e3 - BLOCK / 50e9 * 1e9) / rounds, rel=0.01)
    printed = json.loads(capsys.readouterr().out)
    assert printed["calibration"] == new and printed["output"] == str(out)
    assert {r["key"] for r in printed["simulator_cost_model"]} >= {"fault_ns", "prefetch_range_ns"}


def test_the_table_compares_with_the_base_file(tmp_path, capsys):
    rc, out, _ = run_main(tmp_path, json_out=False)
    assert rc == 0
    text = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line and not line.startswith(" ")}
    assert rows["link_h2d_pinned_GBps"] == ["55.4", "50", f"{50 / 55.4:.3f}", "0%"]  # old, new, ratio, spread
    assert rows["dependent_2MiB_block_fault_us[1]"] == ["425", "425", "1.000", "0%"]
    assert rows["launch_empty_kernel_us"] == ["4.27", "4.27", "carried"]
    assert rows["dependent_2MiB_block_fault_synced_us[0]"] == ["-", "400", "-", "0%"]
    assert rows["fault_ns"][2] != "-"  # the simulator's cost model, old and new
    assert f"calibration written to {out}" in text


def test_each_figure_is_the_median_of_its_repeats(tmp_path, capsys):
    fake = FakeGPU()
    fake.copy_times = [2 * GIB / 10e9, 2 * GIB / 30e9, 2 * GIB / 20e9]
    rc, out, _ = run_main(tmp_path, "--repeats", "3", fake=fake)
    assert rc == 0
    assert calibration.load(out)["link_h2d_pinned_GBps"] == pytest.approx(20.0, rel=1e-3)
    printed = json.loads(capsys.readouterr().out)
    assert sorted(printed["samples"]["link_h2d_pinned_GBps"]) == pytest.approx([10.0, 20.0, 30.0], rel=1e-3)
    row = next(r for r in printed["comparison"] if r["key"] == "link_h2d_pinned_GBps")
    assert row["spread"] == pytest.approx(1.0, rel=1e-3) and row["ratio"] == pytest.approx(20 / 55.4, rel=1e-3)
    assert len(printed["samples"]["evict_to_host_bulk_GBps"]) == 7  # bulk: 2 * repeats + 1


@pytest.mark.parametrize("free_gib, host_gib, refused", [
    (17.9, 100, False),  # 8 + 4 (the separate allocations) + 2 + 0.25 GiB <= 0.8 * 17.9
    (17.7, 100, True),   # 14.25 > 14.16
    (100, 17.4, True),   # the host must hold the buffers and the pinned copies too: 14 > 13.92
    (100, 17.6, False),
])
def test_refuses_before_allocating_anything(tmp_path, capsys, free_gib, host_gib, refused):
    fake = FakeGPU(free=int(free_gib * GIB), host=int(host_gib * GIB))
    rc, out, _ = run_main(tmp_path, "--buffer-gib", "8", fake=fake)
    if refused:
        assert rc == 3
        assert fake.setup_calls == [] and not out.exists()
        assert "refused" in capsys.readouterr().err
    else:
        assert rc == 0 and fake.setup_calls and out.exists()


def test_a_small_buffer_scales_discard_and_names_the_whole_range(tmp_path):
    rc, out, _ = run_main(tmp_path, "--buffer-gib", "1")
    assert rc == 0
    new = calibration.load(out)
    assert new["discard_batch_4096x2MiB_ms"] == pytest.approx(30.0, rel=1e-3)  # 512 blocks, scaled to 4,096
    assert new["batch_prefetch_GBps_by_range_size"]["one_1GiB_range"] == pytest.approx(batch_rate(GIB), rel=2e-3)
    assert {"batch_prefetch_GBps_by_range_size.one_8GiB_range",
            "batch_prefetch_cpu_issue_us_per_2MiB_block.4096_per_call"} <= set(new["carried_over"])
    assert any("512 blocks discarded" in n for n in new["notes"])
    cost_model(new)


def test_without_the_batch_and_discard_calls_their_keys_are_carried(tmp_path):
    rc, out, _ = run_main(tmp_path, fake=FakeGPU(batch=False, discard=False))
    assert rc == 0
    new, base = calibration.load(out), calibration.load()
    assert new["batch_prefetch_GBps_by_range_size"] == base["batch_prefetch_GBps_by_range_size"]
    assert new["discard_batch_4096x2MiB_ms"] == base["discard_batch_4096x2MiB_ms"]
    assert {"batch_prefetch_GBps_by_range_size.2MiB", "batch_prefetch_two_streams_2MiB_GBps",
            "discard_batch_4096x2MiB_ms"} <= set(new["carried_over"])
    assert new["evict_and_prefetch_at_once"] == base["evict_and_prefetch_at_once"]
    assert "evict_and_prefetch_at_once.2MiB_together_over_serial" in new["carried_over"]
    assert new["link_h2d_pinned_GBps"] == pytest.approx(50.0, rel=2e-3)
    assert any("cudaMemPrefetchBatchAsync is missing" in n for n in new["notes"])


def test_a_failed_measurement_keeps_none_of_its_samples_and_exits_1(tmp_path, capsys):
    fake = FakeGPU()
    fake.fail_on = {"touch_chain_s": 2}  # demand paging fails after one chain sample was taken
    rc, out, _ = run_main(tmp_path, fake=fake)
    assert rc == 1
    new, base = calibration.load(out), calibration.load()
    for key in ("demand_paging_parallel_seq_GBps", "demand_paging_dependent_chain_seq_GBps",
                "dependent_2MiB_block_fault_us"):
        assert new[key] == base[key] and key in new["carried_over"]
    assert "illegal memory access" in new["failed"]["demand paging"]
    assert new["dependent_2MiB_block_fault_synced_us"] == [pytest.approx(400.0, rel=2e-3),
                                                           pytest.approx(440.0, rel=2e-3)]
    assert "FAILED demand paging" in capsys.readouterr().err


def test_only_runs_the_groups_named_and_carries_the_rest(tmp_path, capsys):
    rc, out, fake = run_main(tmp_path, "--only", "read-duplication,nvidia-uvm-parameters")
    assert rc == 0
    new = calibration.load(out)
    assert new["read_duplicate_drop_per_2MiB_us"] == pytest.approx(50.0, rel=2e-3)
    assert new["uvm_defaults"]["fault_batch_count"] == 128
    assert set(fake.calls) == {"read_mostly_s", "prefetch_s", "touch_parallel_s", "write_pages_s", "uvm_params"}
    assert "link_h2d_pinned_GBps" in new["carried_over"] and fake.where == "host"
    capsys.readouterr()
    rc, _, fake = run_main(tmp_path, "--only", "read-duplication,dicsard")
    assert rc == 2 and fake.setup_calls == []
    err = capsys.readouterr().err
    assert "unknown group(s) dicsard" in err and "read-duplication" in err and "discard" in err


def test_without_advice_by_location_read_duplication_is_skipped_with_a_note(tmp_path):
    rc, out, fake = run_main(tmp_path, "--only", "read-duplication", fake=FakeGPU(advise=False))
    assert rc == 0 and fake.calls == {}
    new = calibration.load(out)
    assert not any(k.startswith("read_duplicate") for k in new)
    assert any("cudaMemAdvise with a location" in n for n in new["notes"])


def test_bad_input_exits_2(tmp_path):
    bad = tmp_path / "base.json"
    bad.write_text("[1, 2]")
    assert run_main(tmp_path, "--compare", str(bad))[0] == 2
    assert run_main(tmp_path, "--buffer-gib", "0.1")[0] == 2
    assert run_main(tmp_path, "--repeats", "0")[0] == 2


def test_merge_keeps_partial_dicts_and_lists_whole():
    base = {"device": "old", "a": 1.0, "d": {"x": 1, "y": 2}, "l": [1, 2], "notes": ["old note"]}
    measured = {"d": {"y": 3, "z": 4}, "l": [5, 6], "new": 7}
    merged = cal_script.merge(base, measured, {"device": "new", "notes": ["n"]})
    assert merged == {"device": "new", "a": 1.0, "d": {"x": 1, "y": 3, "z": 4}, "l": [5, 6], "notes": ["n"],
                      "new": 7, "carried_over": ["a", "d.x"]}
    assert list(merged) == ["device", "a", "d", "l", "notes", "new", "carried_over"]


def test_the_script_is_executable_and_needs_torch_only_to_measure():
    assert os.access(SCRIPT, os.X_OK)
    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=True)
    assert "--buffer-gib" in done.stdout and "--compare" in done.stdout
    try:
        import torch  # noqa: F401
    except ImportError:
        done = subprocess.run([sys.executable, str(SCRIPT), "-o", os.devnull], capture_output=True, text=True)
        assert done.returncode == 1 and "no GPU to measure" in done.stderr


def test_median_helper_matches_statistics():
    run = cal_script.Run(FakeGPU(), 8 * GIB, 2 * GIB, 3, 1, lambda m: None)
    run.samples = {"k": [3.0, 1.0, 2.0], "dependent_2MiB_block_fault_us.seq": [1.0],
                   "dependent_2MiB_block_fault_us.random": [2.0, 4.0]}
    assert run.values() == {"k": statistics.median([3.0, 1.0, 2.0]), "dependent_2MiB_block_fault_us": [1.0, 3.0]}
    assert run.spreads() == {"k": 1.0, "dependent_2MiB_block_fault_us[1]": pytest.approx(2 / 3)}
