"""Exceptions raised by pydeepum.  Everything a user can cause by bad input is
a DeepumInputError (the CLI exits with status 2 for those)."""

from __future__ import annotations


class DeepumError(Exception):
    """Base class of pydeepum's own errors."""


class DeepumInputError(DeepumError, ValueError):
    """The input (file, option, record) is not acceptable."""


class TraceFormatError(DeepumInputError):
    """A trace or capture file is malformed, truncated or of an unknown version."""


class ConfigError(DeepumInputError):
    """A configuration value is outside its documented range."""


class RecordError(DeepumInputError):
    """The prefetch core rejected a record."""

    def __init__(self, index: int, message: str):
        super().__init__(f"record {index}: {message}")
        self.index = index
