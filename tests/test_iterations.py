"""libdeepum's iteration detector (userlib/iterations.c) on real launch
streams: the exec IDs libdeepum gave GPT-2, BERT, ResNet-50 and GPT-2 XL
training on the H200 (tests/data/libdeepum/), whose traces also hold the
marks the training script made.  The detector must find those marks by
itself.  ResNet-50's per-launch trace is among them because its exec IDs
change as in the engine's runs (26% of the launches get new ones every
step; its first-touch trace was taken with exec IDs by place, where none
do): with 80% of a step's launches
required to repeat, the detector found no iteration in a live ResNet-50 run
on the H200 (tenth session).
GPT-2's per-layer temporaries come back every 49-50 launches, far more
often than any exec ID comes back at the step's distance: a detector
that trusts recurrences alone marks every layer (the first version did)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from pydeepum.trace import ITERATION, LAUNCH, Trace
from userlib_harness import FAKE, build

DATA = Path(__file__).resolve().parent / "data" / "libdeepum"
TRACES = sorted(DATA.glob("*-accessset-*.dut.gz")) + [DATA / "h200-resnet50-bs32x224-perlaunch-5it.dut.gz"]


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    build()


def detected_marks(exec_ids: list[int]) -> list[int]:
    """Launch numbers before which the detector marked an iteration."""
    done = subprocess.run([str(FAKE / "iterations_feed")], input="".join(f"{e}\n" for e in exec_ids),
                          capture_output=True, text=True, check=True)
    return [int(line) for line in done.stdout.split()]


def launch_stream(path: Path) -> tuple[list[int], list[int]]:
    """A trace's exec IDs in launch order, and the launch numbers of its marks."""
    exec_ids, marks = [], []
    for rec in Trace.read(path).records:
        if rec["type"] == ITERATION:
            marks.append(len(exec_ids))
        elif rec["type"] == LAUNCH:
            exec_ids.append(int(rec["exec_id"]))
    return exec_ids, marks


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name.removesuffix(".dut.gz"))
def test_the_marks_of_real_training_are_found_from_the_fourth_iteration(trace):
    exec_ids, marks = launch_stream(trace)
    inner = [m for m in marks if 0 < m < len(exec_ids)]  # a mark with launches after it
    assert len(inner) >= 4, marks
    detected = detected_marks(exec_ids)
    assert detected == inner[2:], (detected, marks)


def test_a_stream_without_a_period_is_never_marked():
    rng = random.Random(7)
    assert detected_marks([rng.randrange(2000) for _ in range(50_000)]) == []


def test_a_loop_whose_kernels_change_ids_too_often_is_not_marked():
    """Half the launches get new exec IDs every step: the stream repeats too little."""
    step, fresh = 400, iter(range(10_000, 10**6))
    stream = [next(fresh) if k % 2 == 0 else k for _ in range(12) for k in range(step)]
    assert detected_marks(stream) == []


def test_a_loop_where_a_quarter_of_the_kernels_change_ids_is_marked():
    """ResNet-50 on the H200: BatchNorm and elementwise kernels get new pointers every step."""
    step, fresh = 400, iter(range(10_000, 10**6))
    stream = [next(fresh) if k % 4 == 0 else k for _ in range(12) for k in range(step)]
    assert detected_marks(stream) == list(range(3 * step + 1, len(stream), step))


def test_a_loop_is_marked_every_step_whatever_repeats_inside_it():
    """Six layers of 20 kernels a step, 3 of them on temporaries every layer
    shares: those come back every 20 launches, the step every 120."""
    step = [1 + k if k < 3 else 1000 + 20 * layer + k for layer in range(6) for k in range(20)]
    stream = [7777] * 5 + step * 10  # setup launches, then ten steps
    detected = detected_marks(stream)
    assert detected == list(range(5 + 3 * len(step) + 3, len(stream), len(step))), detected
