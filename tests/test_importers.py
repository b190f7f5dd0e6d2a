"""Importing CUPTI captures and UM-counter CSVs."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from testlib import BLOCK, GPT2_RAW, blk
from pydeepum.errors import TraceFormatError
from pydeepum.importers import import_file
from pydeepum.trace import (ALLOC, EXEC_NONE, FAULT, FREE, ITER_END, ITER_FLUSHED, ITERATION, LAUNCH,
                            name_hash)


def _capture(tmp_path, lines: list[str]):
    path = tmp_path / "cap.csv.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return import_file(path)


def test_capture_attribution_exec_ids_and_flushes(tmp_path):
    a, b = blk(0x100), blk(0x101)
    t = _capture(tmp_path, [
        f"U,2,{BLOCK},5,6,{a:x},1",          # flush to host before iteration 0
        "M,0,10",
        f"A,{a:x},{4 * BLOCK}",
        "K,20,30,7,1,4,1,1,128,1,1,kern_a",
        "K,40,50,7,2,4,1,1,128,1,1,kern_a",  # same name and shape: ordinal 1
        "K,60,70,7,3,8,1,1,128,1,1,kern_a",  # another shape
        f"U,1,8192,22,23,{a + BLOCK - 4096:x},2",  # spans a and b
        f"U,4,1,24,25,{b + 64:x},2",         # b again in the same launch: merged
        f"U,4,1,45,46,{b:x},1",
        f"U,1,4096,71,72,{a:x},3",           # just after the last kernel
        "M,1,80",
    ])
    r = t.records
    assert list(r["type"]) == [ITERATION, ALLOC, LAUNCH, FAULT, FAULT, LAUNCH, FAULT, LAUNCH, FAULT, ITERATION]
    launches = r[r["type"] == LAUNCH]
    assert list(launches["exec_id"]) == [0, 1, 2]
    assert launches["addr"][0] == name_hash("kern_a") and list(launches["aux"]) == [7, 7, 7]
    faults = r[r["type"] == FAULT]
    assert list(faults["addr"] // BLOCK) == [0x100, 0x101, 0x101, 0x100]
    assert list(faults["exec_id"]) == [0, 0, 1, 2]
    assert list(faults["len"][:2]) == [4096, 4096]  # bytes moved within each block
    assert list(launches["len"]) == [10, 10, 10]  # kernel durations
    assert t.records[0]["flags"] == ITER_FLUSHED and t.records[-1]["flags"] == ITER_END
    assert t.access_set
    assert t.meta["kernels"][1] == ["kern_a", [4, 1, 1], [128, 1, 1], 1]


def test_tracer_capture_joins_launches_to_kernels_by_correlation(tmp_path):
    """libdeepum's lines: L launches with their own exec IDs, X joins them to K kernels."""
    a, b = blk(0x100), blk(0x101)
    vec = name_hash("vec")
    t = _capture(tmp_path, [
        "M,0,10,1",                           # flushed, as the tracer says
        f"A,{a:x},{2 * BLOCK},10",
        f"L,1,7,{vec:x},3,11",                # ran as kernel 500
        f"L,2,9,{vec:x},4,12",                # CUPTI reported no kernel for it
        "X,1,500",
        "K,20,30,7,500,4,1,1,128,1,1,vec",
        "K,40,50,7,501,1,1,1,32,1,1,foreign",  # a kernel libdeepum never saw
        f"U,1,4096,22,23,{a:x},2",
        f"U,4,1,45,46,{b:x},1",
        f"F,{a:x},{2 * BLOCK},55",
        "M,1,60",
        f"U,1,4096,70,71,{b:x},2",            # after the closing mark: no iteration's
        "K,80,90,7,502,1,1,1,32,1,1,late",
    ])
    r = t.records
    assert list(r["type"]) == [ITERATION, ALLOC, LAUNCH, LAUNCH, FAULT, FAULT, FREE, ITERATION]
    launches = r[r["type"] == LAUNCH]
    assert [(int(x["ts"]), int(x["exec_id"]), int(x["len"]), int(x["aux"])) for x in launches] == [
        (12, 9, 0, 4), (20, 7, 10, 3)]
    assert set(launches["addr"].tolist()) == {vec}
    faults = r[r["type"] == FAULT]
    assert list(faults["addr"] // BLOCK) == [0x100, 0x101] and list(faults["exec_id"]) == [7, EXEC_NONE]
    assert r[0]["flags"] == ITER_FLUSHED and t.access_set and r[-1]["flags"] == ITER_END
    assert t.meta["source"]["format"] == "deepum-tracer"
    assert {k: t.meta["source"][k] for k in ("launches", "launches_matched", "kernels", "kernels_without_exec_id")} \
        == {"launches": 2, "launches_matched": 1, "kernels": 2, "kernels_without_exec_id": 1}
    assert t.meta["kernels"][7] == ["vec", [4, 1, 1], [128, 1, 1], None]


def test_a_capture_the_tracer_gave_up_on_is_refused_with_its_reason(tmp_path):
    with pytest.raises(TraceFormatError, match="the tracer failed: CUPTI dropped 3 activity records"):
        _capture(tmp_path, ["M,0,1", "K,2,3,7,1,1,1,1,1,1,1,k", "E,CUPTI dropped 3 activity records", "M,1,9"])


@pytest.mark.parametrize("line,message", [
    ("K,1,2,3", "K record needs 12 fields"),
    ("L,1,2,3", "L record needs 6 or 7 fields"),
    ("M,1,2,3,4", "M record needs 3 or 4 fields"),
    ("U,1,x,1,2,ff,1", "'x' is not a number"),
    ("Q,1", "unknown record type"),
    ("O,per-kernel", "unknown capture option 'per-kernel'"),
    ("U,1,4096,-5,2,ff,1", "not a number|out of range"),
])
def test_malformed_capture_lines_name_the_line(tmp_path, line, message):
    with pytest.raises(TraceFormatError, match=message) as e:
        _capture(tmp_path, ["M,0,1", "K,2,3,7,1,1,1,1,1,1,1,k", line, "M,1,9"])
    assert "cap.csv.gz:3" in str(e.value)


def test_um_counter_csv(tmp_path):
    path = tmp_path / "um.csv"
    path.write_text("counterKind,value,start,end,address,flags,srcId\n"
                    f"1,4096,100,101,{blk(5)},2,0\n"
                    f"1,4096,102,103,{blk(5) + 4096},2,0\n"
                    f"4,1,104,105,{hex(blk(6))},1,0\n"
                    f"2,4096,106,107,{blk(6)},1,0\n")
    t = import_file(path)
    faults = t.records[t.records["type"] == FAULT]
    assert list(faults["addr"] // BLOCK) == [5, 6]
    assert set(faults["exec_id"].tolist()) == {EXEC_NONE}
    assert len(t.iteration_bounds()) == 1


def test_not_a_capture(tmp_path):
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(TraceFormatError, match="empty"):
        import_file(tmp_path / "e.csv")
    (tmp_path / "m.csv").write_text("M,0,1\nM,1,2\n")
    with pytest.raises(TraceFormatError, match="no kernel"):
        import_file(tmp_path / "m.csv")


@pytest.mark.slow
def test_bundled_trace_is_reproduced_from_the_raw_capture(gpt2):
    t = import_file(GPT2_RAW)
    assert t.records.tobytes() == gpt2.records.tobytes()
    assert t.meta["source"] == gpt2.meta["source"]
    # The capture's own numbers (shared/data/README.md): 6 iterations of 1107 kernels.
    assert [e - s for _, s, e in t.iteration_bounds()] and t.counts()["launch"] == 6642
    assert np.all(np.diff(t.records["ts"].astype(np.int64)) >= 0)


def test_tracer_launches_pair_with_kernels_by_stream_order_without_correlation(tmp_path):
    """On the H200, runtime launches carry the runtime call's correlation ID,
    so most L lines have no X record: they pair with their stream's kernels
    in order, skipping kernels that started before the launch was made."""
    a = blk(0x100)
    lines = [
        "M,0,10,0",
        "K,15,18,7,900,1,1,1,32,1,1,foreign",      # before any launch: not ours
        "L,1,5,aa,0,16,7",
        "L,2,6,bb,0,17,7",
        "L,3,9,cc,1,17,8",                           # another stream
        "K,20,30,7,901,1,1,1,32,1,1,k5",
        "K,21,25,8,903,1,1,1,32,1,1,k9",
        "K,31,40,7,902,1,1,1,32,1,1,k6",
        f"U,4,1,32,33,{a:x},1",
        "M,1,50,0",
    ]
    path = tmp_path / "cap.csv"
    path.write_text("\n".join(lines) + "\n")
    t = import_file(path)
    launches = t.records[t.records["type"] == LAUNCH]
    assert sorted(zip(launches["ts"].tolist(), launches["exec_id"].tolist())) == [(20, 5), (21, 9), (31, 6)]
    faults = t.records[t.records["type"] == FAULT]
    assert list(faults["exec_id"]) == [6]
    assert t.meta["source"]["launches_matched"] == 3


# ---- the user-mode engine's log --------------------------------------------------------------


ENGINE_LOG = """iteration 0 t=100
launch slot=3 exec=0 t=110
fault exec=4294967295 0x7f0000200000 t=120
fault exec=0 0x7f0000400000 t=121
prefetch exec=1 0x7f0000600000 blocks=2 t=122
evict 0x7f0000000000 blocks=1 dead t=123
launch slot=3 exec=1 at=129 t=130
fault exec=1 0x7f0000600000 at=127 t=131
iteration 1 t=140
launch slot=3 exec=0 t=150
"""


def test_engine_logs_become_the_stream_the_core_was_fed(tmp_path):
    path = tmp_path / "engine.log"
    path.write_text(ENGINE_LOG)
    t = import_file(path)
    r = t.records
    assert t.meta["source"]["format"] == "deepum-engine-log"
    assert [(int(x["type"]), int(x["ts"])) for x in r] == [
        (ITERATION, 100), (LAUNCH, 110), (FAULT, 120), (FAULT, 121), (LAUNCH, 130), (FAULT, 131),
        (ITERATION, 140), (LAUNCH, 150), (ITERATION, 151)]
    launches, faults = r[r["type"] == LAUNCH], r[r["type"] == FAULT]
    assert list(launches["exec_id"]) == [0, 1, 0] and list(launches["aux"]) == [3, 3, 3]
    assert list(faults["addr"]) == [0x7F0000200000, 0x7F0000400000, 0x7F0000600000]
    assert list(faults["exec_id"]) == [EXEC_NONE, 0, 1]  # as the engine attributed them (in feed order, at= aside)
    assert int(r[-1]["flags"]) == ITER_END and [int(x["aux"]) for x in r[r["type"] == ITERATION]] == [0, 1, 2]


@pytest.mark.parametrize("flags, read", [
    (8, 8),                  # history, named (every engine since API 1.4)
    (16, 16 | 32),           # no victim choice named: an older engine's, the oldest victims
    (32, 32),
])
def test_an_engine_log_config_line_names_its_victim_choice(tmp_path, flags, read):
    path = tmp_path / "engine.log"
    path.write_text(f"config capacity_blocks=100 watermark_blocks=4 flags={flags} t=1\n" + ENGINE_LOG)
    config = import_file(path).meta["core_config"]
    assert config == {"capacity_blocks": 100, "watermark_blocks": 4, "flags": read}


def test_a_bad_engine_log_line_is_named(tmp_path):
    path = tmp_path / "engine.log"
    path.write_text("iteration 0 t=1\nlaunch slot=0 exec=zero t=2\n")
    with pytest.raises(TraceFormatError, match=r"engine.log:2"):
        import_file(path)
    path.write_text("iteration 0 t=1\nfault exec=1 0x1000\n")
    with pytest.raises(TraceFormatError, match=r"engine.log:2: not an engine log line"):
        import_file(path)
