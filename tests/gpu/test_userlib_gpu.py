"""libdeepum on a real GPU (the H200 test machine): launch overhead per
delivery path, real PyTorch training under `deepumctl run`, and the tracer.

    make all && make -C userlib
    .venv/bin/python -m pytest -m gpu tests/gpu -v

These runs use observe mode (intercept, identify and deliver, with managed
memory, nothing prefetching): the machine cannot load the kernel module,
and the user-mode engine has tests of its own (test_engine_gpu.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pydeepum.trace import EXEC_NONE, FAULT, ITER_FLUSHED, ITERATION, LAUNCH, Trace

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent.parent
ITERATIONS = 6
DEEPUMCTL = [sys.executable, "-c", "from pydeepum.cli import cli; cli()"]
# The children import pydeepum from the source tree, installed or not.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def test_default_delivery_costs_at_most_a_microsecond_per_launch(tmp_path):
    out = tmp_path / "bench_launch.json"
    subprocess.run([sys.executable, str(ROOT / "scripts/bench_launch"), "--json", str(out)], check=True)
    summary = json.loads(out.read_text())["summary"]
    assert summary["write"]["overhead_us"] <= 1.0, summary
    assert summary["callback"]["overhead_us"] > summary["write"]["overhead_us"], summary


def train(model: str, stats: Path | None = None) -> dict:
    """train_check.py's result; under `deepumctl run` with @stats, counting
    the last iteration's kernels too."""
    command = [sys.executable, str(ROOT / "tests/gpu/train_check.py"), model, str(ITERATIONS)]
    env = ENV
    if stats is not None:
        command = [*DEEPUMCTL, "run", "--mode", "observe", "--stats", str(stats), "--", *command, "--count-kernels"]
        # Exec IDs by place (off by default, userlib/launch.c): what issue 5's known-ID share needs.
        env = {**ENV, "DEEPUM_EXEC_BY_PLACE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def max_relative_difference(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) == ITERATIONS
    return max(abs(x - y) / max(abs(x), abs(y), 1e-12) for x, y in zip(a, b))


@pytest.mark.parametrize("model", ["gpt2", "bert", "resnet50"])
def test_training_is_unchanged_and_its_launches_repeat(tmp_path, model):
    plain, plain_again = train(model)["losses"], train(model)["losses"]
    stats = tmp_path / "run.json"
    under = train(model, stats)
    noise = max_relative_difference(plain, plain_again)  # what non-deterministic kernels leave
    assert max_relative_difference(plain, under["losses"]) <= max(10 * noise, 1e-5), (plain, under)

    data = json.loads(stats.read_text())
    assert [p["active"] for p in data["processes"]] == [True], data["processes"]
    totals = data["totals"]
    # the CUDA runtime's entry points came through cuGetProcAddress, and all were known
    assert totals["getproc_hooked"] > 0 and totals["getproc_unmatched"] == 0
    assert totals["allocs_redirected"] > 0 and totals["allocs_fallback"] == 0
    assert totals["launches_unidentified"] == 0 and totals["exec_untracked"] == 0
    # no graph capture in these loops: no launch asked the driver about one
    assert totals["capture_queries"] == 0 and totals["delivered"] == totals["launches"]
    steady = data["steady_state"]  # iterations 2 .. ITERATIONS
    assert steady["iterations"] == ITERATIONS - 1
    # Issue 5 asks 99% from iteration 2.  The loop itself launches kernels
    # there that iteration 1 never ran (one gradient accumulation per
    # parameter: zero_grad(set_to_none=False) leaves the gradients to add
    # into from the second backward on; 148 of GPT-2's 1,586 launches), so
    # the share is asserted from iteration 3, the first to repeat one
    # (docs/BENCHMARKS.md has both numbers).
    its = data["processes"][0]["iterations"][2:]
    hits, launches = sum(it["exec_hits"] for it in its), sum(it["launches"] for it in its)
    assert hits / launches >= 0.99, (steady, data["processes"][0]["iterations"])
    # every kernel CUPTI saw run in the last iteration went through libdeepum
    (proc,) = data["processes"]
    assert proc["iterations"][-1]["launches"] == under["kernels_last_iteration"]


def test_the_tracer_ties_every_fault_to_an_intercepted_launch(tmp_path):
    """A small GPT-2 under `deepumctl trace record`: every launch finds its
    CUPTI kernel (external correlation works on the real driver), every
    fault its launch, and each access-set iteration faults its blocks again."""
    sys.path.insert(0, str(ROOT / "scripts/gpu"))
    from capture_traces import find_cupti

    out = tmp_path / "tiny.dut.gz"
    cupti = find_cupti()
    worker = [sys.executable, str(ROOT / "scripts/gpu/capture_traces.py"), "--train", "gpt2-tiny", "3", "1"]
    done = subprocess.run([*DEEPUMCTL, "trace", "record", "--iterations", "3", "-o", str(out),
                           *(["--cupti", cupti] if cupti else []), "--", *worker],
                          capture_output=True, text=True, timeout=600, env=ENV, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    t = Trace.read(out)
    source = t.meta["source"]
    assert source["launches"] > 0 and source["launches_matched"] == source["launches"], source
    assert source["kernels_without_exec_id"] == 0, source
    faults = t.records[t.records["type"] == FAULT]
    assert (faults["exec_id"] != EXEC_NONE).all()
    marks = t.records[t.records["type"] == ITERATION]
    assert len(marks) == 4 and (marks["flags"] & ITER_FLUSHED).all()
    summary = t.iteration_summary()
    assert len({i["launches"] for i in summary}) == 1, summary  # the same launches every iteration
    assert all(i["blocks"] > 0 for i in summary), summary
    launches = t.records[t.records["type"] == LAUNCH]
    assert (launches["len"] > 0).mean() >= 0.99  # kernel durations from CUPTI
    replayed = subprocess.run([*DEEPUMCTL, "replay", str(out)], capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert replayed.returncode == 0, replayed.stderr


def test_per_launch_tracing_records_every_access_and_first_touch_the_same_blocks(tmp_path):
    """A small GPT-2 traced twice: per launch and first touch (both from the UVM
    queue, the tracer's default where it can be read).  Per launch, each
    iteration lists the same accesses, many more than its distinct blocks,
    which are the first-touch trace's."""
    sys.path.insert(0, str(ROOT / "scripts/gpu"))
    from capture_traces import find_cupti

    cupti = find_cupti()
    worker = [sys.executable, str(ROOT / "scripts/gpu/capture_traces.py"), "--train", "gpt2-tiny", "3", "1"]
    traces = {}
    for how in ("--per-launch", "--access-set"):
        out = tmp_path / f"tiny{how}.dut.gz"
        done = subprocess.run([*DEEPUMCTL, "trace", "record", how, "--iterations", "3", "-o", str(out),
                               *(["--cupti", cupti] if cupti else []), "--", *worker],
                              capture_output=True, text=True, timeout=600, env=ENV, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-4000:]
        traces[how] = Trace.read(out)
        assert traces[how].meta["source"]["faults"] == "uvm-tools"
    every, first = traces["--per-launch"], traces["--access-set"]
    assert every.per_launch and not first.per_launch
    per_launch, first_touch = every.iteration_summary(), first.iteration_summary()
    assert len({i["faults"] for i in per_launch}) == 1, per_launch  # the same accesses every iteration
    assert all(i["faults"] >= 2 * i["blocks"] for i in per_launch), per_launch
    assert [i["blocks"] for i in per_launch] == [i["blocks"] for i in first_touch], (per_launch, first_touch)
