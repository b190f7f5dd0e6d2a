"""Helpers shared by the host tests: data paths and record builders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydeepum.trace import RECORD_DTYPE

DATA = Path(__file__).resolve().parent / "data"
GPT2_TRACE = DATA / "h200-gpt2-124m-bs8x512-accessset-6it.dut.gz"
GPT2_RAW = DATA / "raw" / "h200-gpt2-124m-bs8x512-accessset-6it.csv.gz"
MIB = 1 << 20
BLOCK = 2 * MIB


def blk(n: int) -> int:
    """Address of 2 MiB block n."""
    return n * BLOCK


def rec(rtype: int, addr: int = 0, length: int = 0, exec_id: int = 0, aux: int = 0,
        flags: int = 0, ts: int = 0) -> np.ndarray:
    r = np.zeros(1, dtype=RECORD_DTYPE)
    r["type"], r["addr"], r["len"], r["exec_id"] = rtype, addr, length, exec_id
    r["aux"], r["flags"], r["ts"] = aux, flags, ts
    return r[0]
