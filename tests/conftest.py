"""Fixtures of the host tests (helpers are in testlib.py)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

# make test-asan: the extension built with sanitizers, in place of the installed one (before
# anything imports it).
if os.environ.get("DEEPUM_TEST_NATIVE"):
    _spec = importlib.util.spec_from_file_location("pydeepum._native", os.environ["DEEPUM_TEST_NATIVE"])
    sys.modules["pydeepum._native"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["pydeepum._native"])

from pydeepum.trace import Trace
from testlib import GPT2_TRACE


@pytest.fixture(scope="session")
def gpt2() -> Trace:
    return Trace.read(GPT2_TRACE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # make test-tsan, test-asan: a sanitizer's runtime cannot load again in the auditor's namespace
    if os.environ.get("DEEPUM_TEST_SANITIZER"):
        skip = pytest.mark.skip(reason="needs libdeepum's plain build, not a sanitizer's")
        for item in items:
            if "plain_build" in item.keywords:
                item.add_marker(skip)
