"""deepumctl replay."""

from __future__ import annotations

import click

from .. import calibration
from ..config import ConfigError, make_config, parse_field_settings, parse_size
from ..replay import FEEDBACK, ReplayReport, replay
from ..trace import Trace
from ._common import accesses_said, emit_json, fail_on_input_errors, gib, progress


@click.command("replay")
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
@fail_on_input_errors
def replay_cmd(trace_path, capacity, feedback, link_gbps, cal_path, steady_from, sets, as_json):
    """Replay TRACE through the prefetch core and report coverage and accuracy."""
    if link_gbps is None:
        link_gbps = calibration.prefetch_gbps(calibration.load(cal_path))
    if link_gbps < 0:
        raise ConfigError("--link-gbps must not be negative")
    cfg = make_config(parse_size(capacity), **parse_field_settings(sets))
    trace = Trace.read(trace_path)
    with progress(len(trace.records), "replay") as bar:
        report = replay(trace, cfg, feedback=feedback, link_gbps=link_gbps,
                        steady_from=steady_from, progress=bar.update)
    if as_json:
        emit_json({"trace": str(trace_path), **report.as_dict()})
    else:
        click.echo(format_report(trace_path, trace, report))


def format_report(name: str, trace: Trace, r: ReplayReport) -> str:
    cap = gib(r.capacity_bytes) if r.capacity_bytes else "unlimited"
    lines = [
        f"trace     {name}: {r.trace_records:,} records, {len(r.iterations)} iterations, "
        f"{trace.block_size >> 20} MiB blocks{accesses_said(trace)}",
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
