"""deepumctl, through click's CliRunner: output, --json, and exit status 2
with a clear message for every kind of bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from testlib import GPT2_TRACE
from pydeepum.cli import cli
from pydeepum.trace import Trace


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_replay_prints_the_per_iteration_table():
    result = run("replay", str(GPT2_TRACE))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.split()[:1] == ["5"] for line in lines)  # iteration 5's row
    assert "coverage" in result.output and "accuracy" in result.output
    assert "all iterations >= 2" in result.output


def test_replay_json_is_complete():
    result = run("replay", str(GPT2_TRACE), "--json", "--capacity", "6G", "--set", "corr_ways=8")
    assert result.exit_code == 0
    data = json.loads(result.output[result.output.index("{"):])
    assert len(data["iterations"]) == 6
    assert data["capacity_bytes"] == 6 << 30
    assert data["config"]["corr_ways"] == 8
    assert data["steady_state"]["coverage"] >= 0.95
    assert set(data["core"]) >= {"prefetches", "evictions", "walk_entries"}


def test_trace_info_and_json():
    result = run("trace", "info", str(GPT2_TRACE), "--json")
    info = json.loads(result.output)
    assert info["iterations"] == 6 and info["exec_ids"] == 1107 and info["access_set"]
    assert info["new_exec_ids_per_iteration"] == [1107, 0, 0, 0, 0, 0]  # exec IDs by place
    assert "sha256" in info["source"]
    text = run("trace", "info", str(GPT2_TRACE)).output
    assert "6 iterations" in text and "per iteration: 1,107 of 1,107, 0 of 1,107," in text


def test_trace_info_shows_metadata_another_tool_wrote(tmp_path):
    t = Trace.read(GPT2_TRACE)
    t.meta = {"source": "engine.log"}  # free-form, not the importers' dict
    t.write(tmp_path / "other.dut")
    result = run("trace", "info", str(tmp_path / "other.dut"))
    assert result.exit_code == 0 and "source: engine.log" in result.output


def test_trace_synth_then_replay(tmp_path):
    out = tmp_path / "s.dut"
    result = run("trace", "synth", "-o", str(out), "--set", "layers=4", "--set", "drift=0.0")
    assert result.exit_code == 0, result.output
    assert Trace.read(out).meta["source"]["spec"]["layers"] == 4
    assert run("replay", str(out)).exit_code == 0


def test_trace_extend_repeats_the_last_iteration_and_says_so(tmp_path):
    out = tmp_path / "longer.dut"
    result = run("trace", "extend", str(GPT2_TRACE), "-o", str(out), "--repeat-last", "3")
    assert result.exit_code == 0, result.output
    t, longer = Trace.read(GPT2_TRACE), Trace.read(out)
    bounds, more = t.iteration_bounds(), longer.iteration_bounds()
    assert [i for i, _, _ in more] == list(range(9)) and more[:6] == bounds
    _, start, end = bounds[-1]
    last = t.records[start:end]
    for _, s, e in more[6:]:
        copy = longer.records[s:e]
        # the same records, later by whole iterations
        assert (copy[["type", "addr", "len", "exec_id", "flags"]] == last[["type", "addr", "len", "exec_id", "flags"]]).all()
        assert len(set((copy["ts"] - last["ts"]).tolist())) == 1 and copy["ts"][0] > longer.records["ts"][s - 1]
    assert longer.records["ts"][-1] >= longer.records["ts"][:-1].max()  # the closing mark stays last
    info = json.loads(run("trace", "info", str(out), "--json").output)
    assert info["extended"] == {"captured_iterations": 6, "last_repeated": 3,
                                "note": "iterations after the captured ones are copies of the last captured one"}
    bad = run("trace", "extend", str(GPT2_TRACE), "-o", str(out), "--repeat-last", "0")
    assert bad.exit_code == 2 and "at least once" in bad.output


def test_trace_import_records_provenance(tmp_path):
    src = tmp_path / "um.csv"
    src.write_text("counterKind,value,start,end,address,flags,srcId\n1,4096,1,2,4194304,2,0\n")
    out = tmp_path / "um.dut"
    result = run("trace", "import", str(src), "-o", str(out), "--note", "gpu=test")
    assert result.exit_code == 0, result.output
    assert Trace.read(out).meta["provenance"] == {"gpu": "test"}


def _bad_trace(tmp_path):
    raw = GPT2_TRACE.read_bytes()
    (tmp_path / "trunc.dut.gz").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "magic.dut").write_bytes(b"NOPE" + bytes(60))
    return tmp_path


@pytest.mark.parametrize("args,message", [
    (["replay", "{tmp}/trunc.dut.gz"], "unreadable"),
    (["replay", "{tmp}/magic.dut"], "bad magic"),
    (["replay", "{tmp}/nothing.dut"], "No such file"),
    (["replay", "GPT2", "--capacity", "lots"], "not a size"),
    (["replay", "GPT2", "--capacity", "1k"], "less than one"),
    (["replay", "GPT2", "--set", "corr_ways=999"], "corr_ways=999 is outside"),
    (["replay", "GPT2", "--set", "corr_sets=1000"], "not a power of two"),
    (["replay", "GPT2", "--set", "bogus=1"], "unknown configuration field"),
    (["replay", "GPT2", "--set", "walk_max"], "FIELD=VALUE"),
    (["replay", "GPT2", "--link-gbps", "-1"], "must not be negative"),
    (["trace", "info", "{tmp}/magic.dut"], "bad magic"),
    (["trace", "import", "{tmp}/nothing.csv", "-o", "{tmp}/x.dut"], "no such file"),
    (["trace", "synth", "-o", "{tmp}/x.dut", "--set", "layers=0"], "must be >= 1"),
    (["trace", "synth", "-o", "{tmp}/x.dut", "--set", "layers=many"], "not a int"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, args, message):
    _bad_trace(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("GPT2", str(GPT2_TRACE)) for a in args]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_simulate_says_when_a_trace_lists_only_what_faulted():
    data = GPT2_TRACE.parent
    first_touch = run("simulate", str(GPT2_TRACE), "--policy", "uvm", "--capacity", "4G", "--steady-from", "4")
    assert first_touch.exit_code == 0, first_touch.output
    assert "note      the trace lists what faulted" in first_touch.output
    per_launch = data / "libdeepum/h200-resnet50-bs32x224-perlaunch-5it.dut.gz"
    profile = data / "h200/resnet50-resident-kernels.csv.gz"
    every = run("simulate", str(per_launch), "--compute", str(profile), "--policy", "uvm", "--capacity", "1G",
                "--keep-resident", "--steady-from", "3")
    assert every.exit_code == 0, every.output
    assert "every launch's accesses" in every.output and "note" not in every.output
    # its kernel durations include every fault: compute must come from a resident profile
    refused = run("simulate", str(per_launch), "--policy", "uvm")
    assert refused.exit_code == 2 and "resident kernel profile" in refused.output


def test_simulate_takes_the_engines_position_rate_and_says_which():
    """--write-every reaches the engine policies and the JSON says what was simulated."""
    data = GPT2_TRACE.parent
    args = ("simulate", str(data / "libdeepum/h200-resnet50-bs32x224-perlaunch-5it.dut.gz"), "--compute",
            str(data / "h200/resnet50-resident-kernels.csv.gz"), "--policy", "deepum-issuer", "--capacity",
            "1897922560", "--keep-resident", "--json")

    def report(*more: str) -> dict:
        output = run(*args, *more).output  # after the progress bar's label
        return json.loads(output[output.index("{"):])

    reports = {every: report("--write-every", str(every)) for every in (1, 8)}
    assert [reports[every]["write_every"] for every in (1, 8)] == [1, 8]
    assert reports[1]["summary"][0]["time_ms"] != reports[8]["summary"][0]["time_ms"]
    assert report()["write_every"] == 8  # libdeepum's default
    refused = run(*args, "--write-every", "0")
    assert refused.exit_code == 2 and "--write-every" in refused.output


def test_simulate_unmarked_puts_the_marks_where_libdeepum_finds_them():
    """--unmarked: the program's marks replaced by libdeepum's detector's
    (from ResNet-50's fourth iteration on); the JSON says how many."""
    data = GPT2_TRACE.parent
    args = ("simulate", str(data / "libdeepum/h200-resnet50-bs32x224-cold-perlaunch-6it.dut.gz"), "--compute",
            str(data / "h200/resnet50-resident-kernels.csv.gz"), "--policy", "deepum-issuer", "--capacity",
            "1897922560", "--keep-resident", "--steady-from", "1", "--json")

    def report(*more: str) -> dict:
        result = run(*args, *more)
        assert result.exit_code == 0, result.output
        return json.loads(result.output[result.output.index("{"):])

    marked, unmarked = report(), report("--unmarked")
    assert marked["marks_detected"] is None
    assert unmarked["marks_detected"]["program_marks"] == 6 and unmarked["marks_detected"]["detected_marks"] == 3
    assert [it["iteration"] for it in unmarked["iterations"]] == [0, 1, 2]  # the last detected mark ends it
    assert unmarked["launches"] < marked["launches"]
    text = run(*args[:-1], "--unmarked").output
    assert "marks     3 found by libdeepum's detector, in place of the program's 6" in text
    beyond = run(*args[:-3], "--steady-from", "3", "--unmarked")
    assert beyond.exit_code == 2 and "the trace's last iteration is 2" in beyond.output


H200_ENGINE_LOG = GPT2_TRACE.parents[2] / "docs/results/bench_train-2026-12-02j/call1/logs/engine-629.log.gz"


def test_report_reads_an_h200_engine_log():
    """deepumctl report on a real run's DEEPUM_ENGINE_LOG (ResNet-50 at 50%):
    every line of the report, and the same numbers as --json."""
    text = run("report", str(H200_ENGINE_LOG), "--from-iteration", "6")
    assert text.exit_code == 0, text.output
    for line in ("late", "regretted", "misses", "heard", "driver     evict", "driver     prefetch", "stream",
                 "round trips", "learning", "settling", "copies", "learned", "taught", "repeated"):
        assert f"  {line}" in text.output, line
    data = json.loads(run("report", str(H200_ENGINE_LOG), "--from-iteration", "6", "--json").output)
    assert f"{data['launches']} launches, {data['faults']} faults fed" in text.output
    assert data["late"] + data["misses"] == data["faults"] and data["against_trace"] is None
    assert data["late_ms_since_issue"].keys() == {"p10", "p50", "p90"}
    # Per iteration from the first; the measured ones' write-backs together copy at the driver line's rate
    copies = data["copies"]
    assert [it["iteration"] for it in copies] == list(range(len(copies))) and len(copies) > 6
    measured = [it for it in copies if it["iteration"] >= 6 and it["evict_GBps"]]
    written = sum(it["evicted_gib"] for it in measured)
    assert written / sum(it["evicted_gib"] / it["evict_GBps"] for it in measured) == pytest.approx(
        data["evict_stream_GBps"])


def test_report_fits_the_engines_write_backs_and_leaves_the_demand_mode_out():
    """--fit-write-backs over a ResNet-50 engine run and a demand-mode run of
    one H200 call: the fit is the engine log's batches alone; the demand
    mode's (evicting between faults) are said apart, and took longer."""
    logs = H200_ENGINE_LOG.parents[3] / "bench_train-2026-12-02l/call2/logs"
    engine, demand = logs / "engine-1059.log.gz", logs / "engine-1093.log.gz"
    alone = json.loads(run("report", "--fit-write-backs", str(engine), "--from-iteration", "6", "--json").output)
    both = run("report", "--fit-write-backs", str(engine), str(demand), "--from-iteration", "6", "--json")
    assert both.exit_code == 0, both.output
    fit = json.loads(both.output)
    fitted = ("batches", "per_range_us", "per_2MiB_us", "GBps")
    assert {k: fit[k] for k in fitted} == {k: alone[k] for k in fitted} and alone["batches"] > 100
    assert fit["demand_mode_logs"] == 1 and fit["demand_mode_batches"] > alone["batches"]
    assert fit["demand_mode_over_fit"] > 1.2
    text = run("report", "--fit-write-backs", str(engine), str(demand), "--from-iteration", "6").output
    assert f"{alone['batches']} eviction batches of the engine" in text
    assert f"left out: 1 demand-mode logs, whose {fit['demand_mode_batches']} batches took" in text


def test_report_bad_input_exits_2_with_a_clear_message(tmp_path):
    old = tmp_path / "old.log"
    old.write_text("iteration 0 at=0\n")  # a log from before timestamps
    quiet = tmp_path / "quiet.log"
    quiet.write_text("iteration 0 t=0\n")   # no eviction batch to fit
    demand = tmp_path / "demand.log"
    demand.write_text("config flags=35 t=0\n")  # DEEPUM_MODE=demand's
    broken = tmp_path / "broken.log.gz"
    broken.write_bytes(b"\x1f\x8b not gzip after all")
    for args, message in ((["report", str(tmp_path / "none.log")], "does not exist"),
                          (["report", str(old)], "no t=<ns>"),
                          (["report", str(broken)], f"{broken}: unreadable"),
                          (["report", "--fit-write-backs", str(old), str(quiet)], f"{old}: line 1: no t=<ns>"),
                          (["report", str(old), str(old)], "several logs go with --fit-write-backs"),
                          (["report", str(old), "--set", "flags=2"], "--set goes with --core"),
                          (["report", "--fit-write-backs", str(quiet)], "fewer than 2 timed"),
                          (["report", "--fit-write-backs", str(demand)], "only demand-mode logs")):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output, (args, result.output)
