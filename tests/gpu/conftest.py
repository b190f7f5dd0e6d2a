"""GPU tests run only on a machine with an NVIDIA GPU, and only when asked
for with `-m gpu` (pytest -m gpu tests/gpu): anywhere else they are not even
collected.  Selected, nothing is skipped: a missing GPU, driver or package
is an error."""

from __future__ import annotations

from pathlib import Path


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    if "gpu" not in (config.getoption("markexpr") or ""):
        return collection_path.name.startswith("test_")
    return None
