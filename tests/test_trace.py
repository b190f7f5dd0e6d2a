"""The .dut trace format: round trips, and every kind of bad file refused
with a clear TraceFormatError, never a crash or a huge allocation."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from testlib import GPT2_TRACE, rec
from pydeepum.errors import TraceFormatError
from pydeepum.trace import HEADER_DTYPE, ITER_END, ITERATION, LAUNCH, RECORD_DTYPE, Trace


def _raw(trace: Trace, tmp_path) -> bytes:
    path = tmp_path / "t.dut"
    trace.write(path)
    return path.read_bytes()


def test_round_trip_plain_and_gzip(gpt2, tmp_path):
    for name in ("t.dut", "t.dut.gz"):
        gpt2.write(tmp_path / name)
        back = Trace.read(tmp_path / name)
        assert back.records.tobytes() == gpt2.records.tobytes()
        assert (back.block_shift, back.flags, back.meta) == (gpt2.block_shift, gpt2.flags, gpt2.meta)


def test_writing_is_reproducible(gpt2, tmp_path):
    gpt2.write(tmp_path / "a.dut.gz")
    gpt2.write(tmp_path / "b.dut.gz")
    assert (tmp_path / "a.dut.gz").read_bytes() == (tmp_path / "b.dut.gz").read_bytes()


def test_layout_is_header_records_meta(gpt2, tmp_path):
    raw = _raw(gpt2, tmp_path)
    h = np.frombuffer(raw[: HEADER_DTYPE.itemsize], dtype=HEADER_DTYPE)[0]
    assert raw[:4] == b"DUT1"
    assert h["record_count"] == len(gpt2.records)
    end = HEADER_DTYPE.itemsize + len(gpt2.records) * RECORD_DTYPE.itemsize
    assert json.loads(raw[end:]) == gpt2.meta
    assert len(raw) == end + h["meta_len"]


def test_iterations_and_counts(gpt2):
    assert [i for i, _, _ in gpt2.iteration_bounds()] == [0, 1, 2, 3, 4, 5]
    assert gpt2.counts()["launch"] == 6 * 1107
    assert gpt2.access_set


def test_the_summary_counts_launches_of_exec_ids_no_earlier_iteration_had():
    # Kernel 3's tensors moved in iteration 1 (new ID 4, launched twice) and stayed.
    mark = [rec(ITERATION, aux=i) for i in range(3)] + [rec(ITERATION, aux=3, flags=ITER_END)]
    launches = lambda *ids: [rec(LAUNCH, exec_id=e) for e in ids]  # noqa: E731
    records = np.array([mark[0], *launches(1, 2, 3), mark[1], *launches(1, 2, 4, 4), mark[2],
                        *launches(1, 2, 4), mark[3]], dtype=RECORD_DTYPE)
    summary = Trace(records=records, meta={}).iteration_summary()
    assert [(i["launches"], i["new_exec_ids"]) for i in summary] == [(3, 3), (4, 2), (3, 0)]


def _corrupt(tmp_path, gpt2, mutate) -> str:
    raw = bytearray(_raw(gpt2, tmp_path))
    mutate(raw)
    path = tmp_path / "bad.dut"
    path.write_bytes(bytes(raw))
    return str(path)


def _set_header(field: str, value: int):
    def mutate(raw: bytearray) -> None:
        h = np.frombuffer(bytes(raw[: HEADER_DTYPE.itemsize]), dtype=HEADER_DTYPE).copy()
        h[field] = value
        raw[: HEADER_DTYPE.itemsize] = h.tobytes()
    return mutate


@pytest.mark.parametrize("mutate,message", [
    (lambda raw: raw.__delitem__(slice(100, None)), "records, file holds"),
    (lambda raw: raw.__delitem__(slice(30, None)), "truncated header"),
    (lambda raw: raw.__delitem__(slice(4, None)), "too short"),
    (_set_header("magic", 0x12345678), "bad magic"),
    (_set_header("version", 99), "version 99"),
    (_set_header("record_size", 48), "record size"),
    (_set_header("record_count", 1 << 40), "records, file holds"),
    (_set_header("block_shift", 0), "block size"),
    (_set_header("flags", 1 << 20), "unknown header flags"),
    (_set_header("meta_len", 1 << 40), "implausible"),
    (lambda raw: raw.extend(b"junk"), "trailing bytes"),
])
def test_bad_files_are_refused_clearly(tmp_path, gpt2, mutate, message):
    with pytest.raises(TraceFormatError, match=message):
        Trace.read(_corrupt(tmp_path, gpt2, mutate))


def test_bad_metadata_and_bad_gzip(tmp_path, gpt2):
    t = Trace(records=gpt2.records[:10], meta={})
    raw = bytearray(_raw(t, tmp_path))
    h = np.frombuffer(bytes(raw[: HEADER_DTYPE.itemsize]), dtype=HEADER_DTYPE).copy()
    h["meta_len"] = 3
    raw[: HEADER_DTYPE.itemsize] = h.tobytes()
    (tmp_path / "m.dut").write_bytes(bytes(raw[: -2]) + b"{x}")
    with pytest.raises(TraceFormatError, match="not JSON"):
        Trace.read(tmp_path / "m.dut")
    (tmp_path / "g.dut.gz").write_bytes(gzip.compress(GPT2_TRACE.read_bytes())[:5000])
    with pytest.raises(TraceFormatError):
        Trace.read(tmp_path / "g.dut.gz")
    with pytest.raises(TraceFormatError, match="No such file"):
        Trace.read(tmp_path / "missing.dut")
