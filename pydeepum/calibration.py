"""Measured costs of a GPU and its link (calibration files, JSON).

The project ships the H200 calibration (pydeepum/calibration/h200.json,
measured on the team's test machine; scripts/calibrate re-measures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import DeepumInputError

DEFAULT = Path(__file__).resolve().parent / "calibration" / "h200.json"


def load(path: str | Path | None = None) -> dict[str, Any]:
    path = Path(path) if path else DEFAULT
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise DeepumInputError(f"{path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise DeepumInputError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict):
        raise DeepumInputError(f"{path}: not a calibration object")
    return data


def prefetch_gbps(cal: dict[str, Any]) -> float:
    """Host-to-device bandwidth of bulk prefetches, GB/s."""
    try:
        return float(cal["prefetch_bulk_h2d_GBps"])
    except (KeyError, TypeError, ValueError):
        raise DeepumInputError("calibration lacks a numeric prefetch_bulk_h2d_GBps") from None
