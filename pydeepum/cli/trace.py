"""deepumctl trace: info, import, record, synth, extend."""

from __future__ import annotations

import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import DeepumInputError
from ..importers import import_file
from ..run import FAULT_SOURCES, CommandNotRunnable, TraceNotRecorded, TraceOptions, record
from ..synth import SynthSpec, generate
from ..trace import EXEC_NONE, FAULT, Trace
from ._common import accesses_said, emit_json, fail_on_input_errors, gib, progress
from .run import summary_lines


@click.group("trace")
def trace_group() -> None:
    """Record, inspect, import and generate traces."""


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
        "per_launch": t.per_launch,
        "flags": t.flags,
        "source": t.meta.get("source", {}),
    }
    iterations = t.iteration_summary()
    info["new_exec_ids_per_iteration"] = [i["new_exec_ids"] for i in iterations]
    if "extended" in t.meta:
        info["extended"] = t.meta["extended"]
    if as_json:
        emit_json(info)
        return
    click.echo(f"{trace_path}: {info['records']:,} records, {info['iterations']} iterations, "
               f"{info['block_size'] >> 20} MiB blocks{accesses_said(t)}")
    click.echo("  " + ", ".join(f"{k} {v:,}" for k, v in info["counts"].items()))
    click.echo(f"  {info['distinct_blocks']:,} distinct blocks ({gib(info['distinct_blocks'] * t.block_size)}),"
               f" {info['exec_ids']:,} exec IDs")
    if iterations:
        click.echo(f"  launches with an exec ID no earlier iteration had, per iteration: "
                   + ", ".join(f"{i['new_exec_ids']:,} of {i['launches']:,}" for i in iterations))
    # Metadata is free-form JSON: a file written by another tool may hold anything there.
    source = info["source"]
    for key, value in (source.items() if isinstance(source, dict) else [("", source)]):
        click.echo(f"  source{'.' if key else ''}{key}: {value}")
    if "extended" in info:
        click.echo(f"  extended: {info['extended']}")


def _parse_notes(notes: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for note in notes:
        key, sep, value = note.partition("=")
        if not sep:
            raise DeepumInputError(f"--note wants KEY=VALUE, got {note!r}")
        out[key] = value
    return out


@trace_group.command("import")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="deepum trace to write (.dut, or .dut.gz compressed).")
@click.option("--block-shift", type=int, default=21, show_default=True, help="log2 of the UM block size.")
@click.option("--note", "notes", multiple=True, metavar="KEY=VALUE", help="Provenance to record, repeatable.")
@fail_on_input_errors
def trace_import(source, output, block_shift, notes):
    """Convert a CUPTI capture, a UM-counter CSV or an engine log (DEEPUM_ENGINE_LOG) into a deepum trace."""
    size = Path(source).stat().st_size if Path(source).is_file() else 0
    with progress(size, "import") as bar:
        # Lines, not bytes, are reported: the bar is a rough guide for gzip input.
        t = import_file(source, block_shift, progress=lambda n: bar.update(n * 12))
        bar.update(size)
    if notes:
        t.meta.setdefault("provenance", {}).update(_parse_notes(notes))
    t.write(output)
    click.echo(f"{output}: {len(t.records):,} records, {len(t.iteration_bounds())} iterations")


def _recorded_summary(output: str, t: Trace) -> list[str]:
    iterations = t.iteration_summary()
    source = t.meta["source"]
    faults = t.records[t.records["type"] == FAULT]
    lines = [f"{output}: {len(t.records):,} records, {len(iterations)} iterations{accesses_said(t)}"]
    if iterations:
        lines.append(f"  per iteration (median): {statistics.median(i['launches'] for i in iterations):,.0f} launches, "
                     f"{statistics.median(i['blocks'] for i in iterations):,.0f} distinct blocks")
    lines.append(f"  launches matched to CUPTI kernels: {source['launches_matched']:,} of {source['launches']:,};"
                 f" kernels without an exec ID: {source['kernels_without_exec_id']:,};"
                 f" faults without one: {int((faults['exec_id'] == EXEC_NONE).sum()):,}")
    return lines


@trace_group.command("record", context_settings={"allow_interspersed_args": False})
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="deepum trace to write (.dut, or .dut.gz compressed).")
@click.option("--iterations", type=int, default=0, show_default=True,
              help="Iterations to record from the first mark (0: every one the program marks).")
@click.option("--access-set/--no-access-set", default=True, show_default=True,
              help="Move managed memory to the host at every mark, so each iteration records "
                   "its complete first-touch stream.")
@click.option("--per-launch", is_flag=True,
              help="Also wait for every launch and move what it brought in back to the host, so each "
                   "launch records every block it touches, not only the iteration's first touches "
                   "(slow: each block is faulted in and written back once per kernel using it; with "
                   "CUPTI's counters all managed memory goes back after every launch).")
@click.option("--cupti", type=click.Path(dir_okay=False), default=None,
              help="libcupti.so to load (default: the one the program loaded, or the library path's).")
@click.option("--faults", type=click.Choice(FAULT_SOURCES), default="auto", show_default=True,
              help="Where GPU faults and migrations come from: the driver's event queue on "
                   "/dev/nvidia-uvm-tools, or CUPTI's Unified Memory counters (which missed 5-10% of "
                   "the blocks on the H200, and report none once cuDNN is loaded); auto: the queue "
                   "where it can be read, else CUPTI.")
@click.option("--block-shift", type=int, default=21, show_default=True, help="log2 of the UM block size.")
@click.option("--keep-capture", type=click.Path(dir_okay=False), default=None,
              help="Also keep libdeepum's raw capture here (deepumctl trace import reads it).")
@click.option("--note", "notes", multiple=True, metavar="KEY=VALUE", help="Provenance to record, repeatable.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@fail_on_input_errors
def trace_record(output, iterations, access_set, per_launch, cupti, faults, block_shift, keep_capture, notes,
                 command):
    """Run COMMAND under libdeepum's tracer and write its trace.

    COMMAND marks each iteration's start, and the end of the last, with
    pydeepum.torch.mark_iteration(); the trace starts at the first mark.
    It runs in observe mode with managed memory, CUPTI recording kernels,
    and Unified Memory activity from the UVM tools queue (or CUPTI's
    counters: --faults); the program must not use CUPTI itself (e.g.
    torch.profiler).  Exits with COMMAND's status, or 1 if no trace could
    be made of it.

    deepumctl trace record --iterations 5 -o gpt2.dut.gz -- python train.py
    """
    provenance = _parse_notes(notes)
    try:
        t, result = record(command, TraceOptions(iterations=iterations, access_set=access_set, per_launch=per_launch,
                                                cupti=cupti, faults=faults),
                           block_shift, keep_capture=Path(keep_capture) if keep_capture else None)
    except CommandNotRunnable as e:
        click.echo(f"deepumctl trace record: {e}", err=True)
        sys.exit(e.returncode)
    except TraceNotRecorded as e:
        for line in summary_lines(e.result):
            click.echo(line, err=True)
        click.echo(f"deepumctl trace record: no trace: {e}", err=True)
        sys.exit(e.result.returncode or 1)
    t.meta["provenance"].update(provenance)
    t.write(output)
    for line in summary_lines(result) + _recorded_summary(output, t):
        click.echo(line, err=True)
    sys.exit(result.returncode)


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


@trace_group.command("extend")
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
@click.option("--repeat-last", "copies", type=int, required=True, metavar="N",
              help="Play the last iteration N more times.")
@fail_on_input_errors
def trace_extend(trace_path, output, copies):
    """Extrapolate a capture that ended before learning settled: its last
    iteration repeated (said so in the trace's metadata, "extended")."""
    t = Trace.read(trace_path).with_last_iteration_repeated(copies)
    t.write(output)
    click.echo(f"{output}: {len(t.records):,} records, {len(t.iteration_bounds())} iterations "
               f"({copies} of them copies of the last captured)")
