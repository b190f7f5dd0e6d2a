"""deepumctl trace: info, import, synth."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from ..errors import DeepumInputError
from ..importers import import_file
from ..synth import SynthSpec, generate
from ..trace import Trace
from ._common import emit_json, fail_on_input_errors, gib, progress


@click.group("trace")
def trace_group() -> None:
    """Inspect, import and generate traces."""


@trace_group.command("info")
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_input_errors
def trace_info(trace_path, as_json):
    """Summarise TRACE: records by type, iterations, blocks, provenance."""
    t = Trace.read(trace_path)
    blocks = t.fault_blocks()
    info = {
        "records": len(t.records),
        "counts": t.counts(),
        "iterations": len(t.iteration_bounds()),
        "block_size": t.block_size,
        "distinct_blocks": int(len(set(blocks.tolist()))),
        "exec_ids": int(len(set(t.records[t.records["type"] == 1]["exec_id"].tolist()))),
        "access_set": t.access_set,
        "flags": t.flags,
        "source": t.meta.get("source", {}),
    }
    if as_json:
        emit_json(info)
        return
    click.echo(f"{trace_path}: {info['records']:,} records, {info['iterations']} iterations, "
               f"{info['block_size'] >> 20} MiB blocks{', access-set' if t.access_set else ''}")
    click.echo("  " + ", ".join(f"{k} {v:,}" for k, v in info["counts"].items()))
    click.echo(f"  {info['distinct_blocks']:,} distinct blocks ({gib(info['distinct_blocks'] * t.block_size)}),"
               f" {info['exec_ids']:,} exec IDs")
    for key, value in info["source"].items():
        click.echo(f"  source.{key}: {value}")


@trace_group.command("import")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="deepum trace to write (.dut, or .dut.gz compressed).")
@click.option("--block-shift", type=int, default=21, show_default=True, help="log2 of the UM block size.")
@click.option("--note", "notes", multiple=True, metavar="KEY=VALUE", help="Provenance to record, repeatable.")
@fail_on_input_errors
def trace_import(source, output, block_shift, notes):
    """Convert a CUPTI capture or UM-counter CSV into a deepum trace."""
    size = Path(source).stat().st_size if Path(source).is_file() else 0
    with progress(size, "import") as bar:
        # Lines, not bytes, are reported: the bar is a rough guide for gzip input.
        t = import_file(source, block_shift, progress=lambda n: bar.update(n * 12))
        bar.update(size)
    for note in notes:
        key, sep, value = note.partition("=")
        if not sep:
            raise DeepumInputError(f"--note wants KEY=VALUE, got {note!r}")
        t.meta.setdefault("provenance", {})[key] = value
    t.write(output)
    click.echo(f"{output}: {len(t.records):,} records, {len(t.iteration_bounds())} iterations")


@trace_group.command("synth")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE",
              help="SynthSpec field (layers, iterations, drift, order_noise, reorder_at, ...).")
@fail_on_input_errors
def trace_synth(output, sets):
    """Generate a synthetic training-loop trace."""
    fields = {f.name: f.type for f in dataclasses.fields(SynthSpec)}
    values: dict[str, Any] = {}
    for pair in sets:
        key, sep, value = pair.partition("=")
        if not sep or key not in fields:
            raise DeepumInputError(f"--set wants one of {', '.join(fields)} as FIELD=VALUE, got {pair!r}")
        kind = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true", "yes")}[fields[key]]
        try:
            values[key] = kind(value)
        except ValueError:
            raise DeepumInputError(f"--set {key}: {value!r} is not a {fields[key]}") from None
    t = generate(SynthSpec(**values))
    t.write(output)
    click.echo(f"{output}: {len(t.records):,} records, {len(t.iteration_bounds())} iterations")
