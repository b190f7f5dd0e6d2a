"""What every deepumctl command shares: input errors exit 2, JSON output,
progress bars on stderr, how a trace is described."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import click

from ..errors import DeepumInputError


class InputError(click.ClickException):
    """Bad input from the user: a clear message and exit status 2."""

    exit_code = 2


def fail_on_input_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DeepumInputError as e:
            raise InputError(str(e)) from None

    return wrapper


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def progress(length: int, label: str):
    return click.progressbar(length=length, label=label, file=sys.stderr, show_eta=True)


def gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def accesses_said(trace) -> str:
    """What a trace's accesses are, for its one-line description."""
    return (", every launch's accesses" if trace.per_launch else
            ", first touches per iteration" if trace.access_set else "")
