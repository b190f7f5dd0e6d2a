"""deepumctl simulate."""

from __future__ import annotations

import click

from .. import calibration
from ..config import checked, make_settings, parse_field_settings, parse_size
from ..errors import DeepumInputError
from ..simulate import (DEFAULT_POLICIES, ENGINE_WRITE_EVERY, POLICIES, WRITE_EVERY_MAX, SimReport,
                        compute_for_detected_marks, compute_from_profile, compute_from_trace, cost_model,
                        records_simulated, simulate)
from ..trace import LAUNCH, Trace
from ._common import accesses_said, emit_json, fail_on_input_errors, gib, progress


def _capacities(text: str) -> list[int]:
    caps = [parse_size(part) for part in text.split(",") if part.strip()]
    if not caps:
        raise DeepumInputError("--capacity needs at least one size")
    return caps


@click.command("simulate")
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=False))
@click.option("--capacity", default="0", show_default=True,
              help="GPU memory for UM, comma-separated, e.g. 24G,40G,80G; 0 = unlimited.")
@click.option("--policy", "policies", default=",".join(DEFAULT_POLICIES), show_default=True,
              help=f"Comma-separated, of: {', '.join(POLICIES)}.")
@click.option("--compute", "compute_from", default="trace", show_default=True,
              help="Kernel compute times: 'trace' (each launch's duration) or a resident kernel profile CSV.")
@click.option("--calibration", "cal_path", type=click.Path(dir_okay=False), default=None,
              help="Calibration JSON (default: the bundled H200 one).")
@click.option("--steady-from", type=int, default=2, show_default=True)
@click.option("--keep-resident", is_flag=True,
              help="Ignore an access-set trace's flushes: memory stays on the GPU from one iteration to the "
                   "next, and leaving costs an eviction (what training does; compare with measured runs).")
@click.option("--unmarked", is_flag=True,
              help="Simulate the program as if it marked no iteration: libdeepum's iteration detector places "
                   "the marks (the launches before its first are iteration 0; its last ends the trace). For "
                   "traces of programs that marked their steps, best captured from the first step (a trace of an "
                   "unmarked program already has the detector's marks).")
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE", help="Prefetch core configuration field.")
@click.option("--write-every", type=click.IntRange(1, WRITE_EVERY_MAX), default=ENGINE_WRITE_EVERY, show_default=True,
              help="The engine's DEEPUM_WRITE_EVERY (deepum-user, -issuer, -split): its core hears of launches "
                   "this many at a time and ties faults to the last it heard of.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write a PNG of iteration time against capacity.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_input_errors
def simulate_cmd(trace_path, capacity, policies, compute_from, cal_path, steady_from, keep_resident, unmarked, sets,
                 write_every, plot_path, as_json):
    """Predict iteration time on GPUs of the given capacities, per memory policy."""
    caps = _capacities(capacity)
    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    cost = cost_model(calibration.load(cal_path))
    cfg = make_settings(**parse_field_settings(sets))
    trace = Trace.read(trace_path)
    if keep_resident:
        trace = trace.without_flushes()
    marked = trace
    if unmarked:
        trace = trace.with_detected_marks(checked(cfg).exec_max)
    last = max((index for index, _, _ in trace.iteration_bounds()), default=0)
    if steady_from > last:
        raise DeepumInputError(f"--steady-from {steady_from}: the trace's last iteration is {last}"
                               f"{' (with the marks libdeepum would find)' if unmarked else ''}")
    if compute_from == "trace":
        compute = compute_from_trace(trace)
    else:
        compute = compute_for_detected_marks(compute_from_profile(marked, compute_from), trace)
    with progress(records_simulated(len(trace.records), caps, chosen), "simulate") as bar:
        report = simulate(trace, caps, chosen, cfg, cost, compute, compute_from, steady_from, bar.update, write_every)
    if plot_path:
        plot(report, plot_path, title=trace_path)
    if as_json:
        emit_json({"trace": str(trace_path), "launches": int((trace.records["type"] == LAUNCH).sum()),
                   "marks_detected": trace.meta.get("marks_detected"), **report.as_dict()})
        return
    click.echo(f"trace     {trace_path}: iterations >= {steady_from}, compute from {compute_from}"
               f"{accesses_said(trace)}{', memory kept across iterations' if keep_resident else ''}")
    if unmarked:
        detected = trace.meta["marks_detected"]
        click.echo(f"marks     {detected['detected_marks']} found by libdeepum's detector, in place of the program's "
                   f"{detected['program_marks']}")
    if not trace.lists_every_access and any(caps):
        click.echo("note      the trace lists what faulted: a block used again after it was evicted within an "
                   "iteration is not in it, so times under a capacity are optimistic (deepumctl trace record "
                   "--per-launch lists every access)")
    click.echo(f"\n{'policy':13} {'capacity':>11} {'iter ms':>9} {'ideal ms':>9} {'of ideal':>8}"
               f" {'faults':>8} {'H2D GiB':>8} {'accuracy':>8} {'refetch':>8}")
    for row in report.summary():
        cap = gib(row["capacity_bytes"]) if row["capacity_bytes"] else "unlimited"
        click.echo(f"{row['policy']:13} {cap:>11} {row['time_ms']:9.1f} {row['ideal_ms']:9.1f}"
                   f" {row['fraction_of_ideal']:8.3f} {row['faults']:8.0f} {row['h2d_gib']:8.2f}"
                   f" {row['accuracy']:8.3f} {row['refetches']:8.0f}")
    click.echo("\nideal = max(compute, the fewest bytes any policy moves (Belady's MIN) at link bandwidth);"
               " of ideal = ideal / time;\nrefetch = blocks prefetched again in an iteration that had"
               " prefetched them before (evicted between).")
    if plot_path:
        click.echo(f"plot: {plot_path}")


def plot(report: SimReport, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report.summary()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    caps = sorted({r["capacity_bytes"] for r in rows}, key=lambda c: c or float("inf"))
    label = [gib(c) if c else "unlimited" for c in caps]
    for policy in dict.fromkeys(r["policy"] for r in rows):
        ys = [next(r["time_ms"] for r in rows if r["policy"] == policy and r["capacity_bytes"] == c)
              for c in caps]
        ax.plot(label, ys, marker="o", label=policy)
    ideal = [next(r["ideal_ms"] for r in rows if r["capacity_bytes"] == c) for c in caps]
    ax.plot(label, ideal, linestyle="--", color="black", label="ideal")
    ax.set_xlabel("GPU memory for UM")
    ax.set_ylabel("iteration time (ms)")
    ax.set_yscale("log")
    ax.set_title(f"{title}\n(simulated, iterations >= {report.steady_from})", fontsize=9)
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
