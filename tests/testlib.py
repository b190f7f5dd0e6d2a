"""Helpers shared by the host tests: data paths, record builders, scripts as modules."""

from __future__ import annotations

import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path
from types import ModuleType

import numpy as np
from pydeepum.trace import RECORD_DTYPE

ROOT = Path(__file__).resolve().parent.parent
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


def load_script(name: str) -> ModuleType:
    """scripts/@name (a file without .py) imported as a module of that name."""
    loader = SourceFileLoader(name, str(ROOT / "scripts" / name))
    module = module_from_spec(spec_from_loader(name, loader))
    sys.modules[name] = module  # where dataclasses look their module up
    loader.exec_module(module)
    return module
