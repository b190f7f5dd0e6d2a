"""The user-mode engine on a real GPU (the H200 test machine): a two-layer
GPT-2 trained under a tight budget computes exactly what it computes in
plain device memory, and the engine runs, learns and prefetches.

    make -C userlib
    python3 -m pytest -m gpu tests/gpu -v -k engine        # about a minute

It runs scripts/bench_train --smoke (userlib/README.md), which refuses to
put more managed memory on the GPU than 80% of what it has free.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent.parent


def test_training_under_a_tight_budget_is_numerically_identical_and_prefetched(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts/bench_train"), "--smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    report = json.loads((tmp_path / "bench_train-gpt2-tiny.json").read_text())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert report["safety"]["ok"]
    assert report["numerics"]["ok"], report["numerics"]
    (budget,) = report["budgets"]
    deepum, demand = budget["runs"]["deepum"], budget["runs"]["demand"]
    assert deepum["active"] and demand["active"], (deepum.get("disabled_reason"), demand.get("disabled_reason"))
    assert deepum["fault_source"] in ("uvm-tools", "cupti") and demand["faulted_blocks"] > 0
    assert deepum["prefetched_blocks"] > 0 and demand["prefetched_blocks"] == 0
    assert deepum["faulted_blocks"] < demand["faulted_blocks"], (deepum, demand)
