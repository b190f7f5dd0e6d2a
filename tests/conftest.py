"""Fixtures of the host tests (helpers are in testlib.py)."""

from __future__ import annotations

import pytest

from pydeepum.trace import Trace
from testlib import GPT2_TRACE


@pytest.fixture(scope="session")
def gpt2() -> Trace:
    return Trace.read(GPT2_TRACE)
