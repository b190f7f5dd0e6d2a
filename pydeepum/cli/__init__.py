"""deepumctl: the command line.  Commands parse and format; the work is in
the library, which returns dataclasses.  One module per command group."""

from __future__ import annotations

import click

from .. import __version__
from .module import MODULE_COMMANDS
from .replay import replay_cmd
from .report import report_cmd
from .run import run_cmd
from .simulate import simulate_cmd
from .trace import trace_group


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="deepumctl")
def cli() -> None:
    """deepum: correlation prefetching for CUDA Unified Memory."""


cli.add_command(replay_cmd)
cli.add_command(report_cmd)
cli.add_command(run_cmd)
cli.add_command(simulate_cmd)
cli.add_command(trace_group)
for command in MODULE_COMMANDS:
    cli.add_command(command)
