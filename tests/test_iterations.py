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

import numpy as np
import pytest

from pydeepum._lowlevel import constant, detect_iterations
from pydeepum.errors import DeepumInputError
from pydeepum.trace import ITER_END, ITERATION, LAUNCH, Trace, empty_records
from userlib_harness import FAKE, build

# iterations_feed sizes libdeepum's detector so
EXEC_MAX = constant("DEEPUM_CFG_EXEC_MAX_DEFAULT")

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


def launch_stream(trace: Path | Trace) -> tuple[list[int], list[int]]:
    """A trace's exec IDs in launch order, and the launch numbers of its marks."""
    exec_ids, marks = [], []
    for rec in (trace if isinstance(trace, Trace) else Trace.read(trace)).records:
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


# The simulator's copy of the detector: the same source (userlib/iteration_detector.c) in the cffi extension.
COLD = sorted(DATA.glob("*-cold-perlaunch-*.dut.gz"))


@pytest.mark.parametrize("trace", TRACES + COLD, ids=lambda p: p.name.removesuffix(".dut.gz"))
def test_the_extension_marks_what_libdeepum_marks(trace):
    exec_ids, _ = launch_stream(trace)
    ours = detect_iterations(np.array(exec_ids), EXEC_MAX).tolist()
    assert ours and ours == detected_marks(exec_ids)


def test_the_extension_marks_nothing_in_a_stream_without_a_period():
    rng = np.random.default_rng(7)
    assert detect_iterations(rng.integers(0, 2000, 50_000), EXEC_MAX).tolist() == []


def test_a_trace_simulated_unmarked_has_the_marks_libdeepum_would_find():
    """GPT-2 from its first step: the program marked every step; the
    detector marks from the fourth on, 16 launches later (its anchor is the
    first kernel of a step whose exec ID was there from the program's
    first step), and its last mark ends the trace."""
    trace = Trace.read(DATA / "h200-gpt2-124m-bs8x512-cold-perlaunch-6it.dut.gz").without_flushes()
    exec_ids, program = launch_stream(trace)
    unmarked = trace.with_detected_marks()
    ids_after, marks_after = launch_stream(unmarked)
    detected = detected_marks(exec_ids)
    assert marks_after == detected and len(detected) >= 2
    assert ids_after == exec_ids[: detected[-1]]
    records = unmarked.records
    marks = records[records["type"] == ITERATION]
    assert marks["aux"].tolist() == list(range(1, len(detected) + 1))
    assert [bool(f & ITER_END) for f in marks["flags"]] == [False] * (len(detected) - 1) + [True]
    # everything but the marks is kept, in order, up to the last detected one
    others = trace.records[trace.records["type"] != ITERATION]
    kept = records[records["type"] != ITERATION]
    assert np.array_equal(kept, others[: len(kept)])
    assert [m - p for m, p in zip(detected, program[3:])] == [16] * len(detected)
    assert unmarked.meta["marks_detected"]["program_marks"] == len(program) - 1  # the capture's closing one not counted


def test_marks_are_not_detected_in_an_access_set_trace_or_where_there_are_none():
    flushed = Trace.read(DATA / "h200-gpt2-124m-bs8x512-accessset-6it.dut.gz")
    with pytest.raises(DeepumInputError, match="keep memory resident"):
        flushed.with_detected_marks()
    assert len(flushed.without_flushes().with_detected_marks().meta) > 0
    records = empty_records(3000)
    records["type"] = LAUNCH
    records["exec_id"] = np.random.default_rng(1).integers(0, 2000, 3000)
    with pytest.raises(DeepumInputError, match="found 0 iteration marks in 3000 launches"):
        Trace(records).with_detected_marks()
