"""deepumctl: the command line.  It parses and formats; the work is in the
library (replay, trace, importers, synth), which returns dataclasses."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import click

from . import __version__, calibration
from .config import ConfigError, make_config, parse_size
from .errors import DeepumInputError
from .importers import import_file
from .replay import FEEDBACK, ReplayReport, replay
from .synth import SynthSpec, generate
from .trace import Trace


class InputError(click.ClickException):
    """Bad input from the user: a clear message and exit status 2."""

    exit_code = 2


def _fail_on_input_errors(fn):
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DeepumInputError as e:
            raise InputError(str(e)) from None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def _progress(length: int, label: str):
    return click.progressbar(length=length, label=label, file=sys.stderr, show_eta=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="deepumctl")
def cli() -> None:
    """deepum: correlation prefetching for CUDA Unified Memory."""


# ---- replay -------------------------------------------------------------------


def _parse_sets(pairs: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set wants FIELD=VALUE, got {pair!r}")
        try:
            out[key.strip()] = int(value, 0)
        except ValueError:
            raise ConfigError(f"--set {key}: {value!r} is not an integer") from None
    return out


@cli.command("replay")
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=False))
@click.option("--capacity", default="0", show_default=True,
              help="GPU memory for UM, e.g. 8G; 0 = unlimited.")
@click.option("--feedback", type=click.Choice(sorted(FEEDBACK)), default="faults", show_default=True,
              help="What the core hears of: GPU faults only (real), or every access (upper bound).")
@click.option("--link-gbps", type=float, default=None,
              help="Prefetch bandwidth for lateness; default: the calibration's bulk prefetch rate.")
@click.option("--calibration", "cal_path", type=click.Path(dir_okay=False), default=None,
              help="Calibration JSON (default: the bundled H200 one).")
@click.option("--steady-from", type=int, default=2, show_default=True,
              help="First iteration counted in the steady-state totals.")
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE",
              help="Core configuration field (struct deepum_config), repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_fail_on_input_errors
def replay_cmd(trace_path, capacity, feedback, link_gbps, cal_path, steady_from, sets, as_json):
    """Replay TRACE through the prefetch core and report coverage and accuracy."""
    if link_gbps is None:
        link_gbps = calibration.prefetch_gbps(calibration.load(cal_path))
    if link_gbps < 0:
        raise ConfigError("--link-gbps must not be negative")
    cfg = make_config(parse_size(capacity), **_parse_sets(sets))
    trace = Trace.read(trace_path)
    with _progress(len(trace.records), "replay") as bar:
        report = replay(trace, cfg, feedback=feedback, link_gbps=link_gbps,
                        steady_from=steady_from, progress=bar.update)
    if as_json:
        _emit_json({"trace": str(trace_path), **report.as_dict()})
    else:
        click.echo(format_report(trace_path, trace, report))


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def format_report(name: str, trace: Trace, r: ReplayReport) -> str:
    cap = _gib(r.capacity_bytes) if r.capacity_bytes else "unlimited"
    lines = [
        f"trace     {name}: {r.trace_records:,} records, {len(r.iterations)} iterations, "
        f"{trace.block_size >> 20} MiB blocks{', access-set' if trace.access_set else ''}",
        f"replay    GPU capacity {cap}, feedback {r.feedback}, prefetch link {r.link_gbps:g} GB/s",
        "",
        f"{'iter':>4} {'accesses':>9} {'demand':>7} {'deepum':>7} {'coverage':>9} {'prefetch':>9}"
        f" {'useful':>7} {'accuracy':>9} {'late':>6} {'evict':>6} {'fault-ev':>8} {'discard':>7} {'ns/rec':>7}",
    ]
    for it in r.iterations + [r.total]:
        label = f"{it.iteration:>4}" if it.iteration >= 0 else f"\nall iterations >= {r.steady_from}:\n    "
        lines.append(
            f"{label} {it.accesses:>9,} {it.baseline_faults:>7,} {it.faults:>7,} {it.coverage:>9.3f}"
            f" {it.prefetches:>9,} {it.useful:>7,} {it.accuracy:>9.3f} {it.late:>6,} {it.evictions:>6,}"
            f" {it.demand_evictions:>8,} {it.discards:>7,} {it.core_ns_per_record:>7.0f}"
        )
    lines += [
        "",
        "demand/deepum: GPU faults with demand paging / with deepum; coverage = faults avoided;",
        "accuracy = prefetches a kernel used; late = used before its copy could finish;",
        "fault-ev = evictions left on the fault path; ns/rec = core time per record it processed.",
    ]
    return "\n".join(lines)


# ---- traces -------------------------------------------------------------------


@cli.group("trace")
def trace_group() -> None:
    """Inspect, import and generate traces."""


@trace_group.command("info")
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_fail_on_input_errors
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
        _emit_json(info)
        return
    click.echo(f"{trace_path}: {info['records']:,} records, {info['iterations']} iterations, "
               f"{info['block_size'] >> 20} MiB blocks{', access-set' if t.access_set else ''}")
    click.echo("  " + ", ".join(f"{k} {v:,}" for k, v in info["counts"].items()))
    click.echo(f"  {info['distinct_blocks']:,} distinct blocks ({_gib(info['distinct_blocks'] * t.block_size)}),"
               f" {info['exec_ids']:,} exec IDs")
    for key, value in info["source"].items():
        click.echo(f"  source.{key}: {value}")


@trace_group.command("import")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="deepum trace to write (.dut, or .dut.gz compressed).")
@click.option("--block-shift", type=int, default=21, show_default=True, help="log2 of the UM block size.")
@click.option("--note", "notes", multiple=True, metavar="KEY=VALUE", help="Provenance to record, repeatable.")
@_fail_on_input_errors
def trace_import(source, output, block_shift, notes):
    """Convert a CUPTI capture or UM-counter CSV into a deepum trace."""
    size = Path(source).stat().st_size if Path(source).is_file() else 0
    with _progress(size, "import") as bar:
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
@_fail_on_input_errors
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
