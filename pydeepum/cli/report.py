"""deepumctl report: what a DEEPUM_ENGINE_LOG says (pydeepum.enginelog)."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import parse_field_settings
from ..enginelog import (PLACE_SLACK, ROUND_TRIP_LAUNCHES, CoreReplay, EngineLogReport, Spread, analyse_log,
                         fit_write_backs, replay_core)
from ..trace import Trace
from ._common import InputError, emit_json, fail_on_input_errors


def _rate(gbps: float | None) -> str:
    return "-" if gbps is None else f"{gbps:.1f}"


def _spread(q: Spread | None, unit: str = " ms", digits: int = 1) -> str:
    return "-" if q is None else f"p10 {q.p10:.{digits}f} / p50 {q.p50:.{digits}f} / p90 {q.p90:.{digits}f}{unit}"


@click.command("report")
@click.argument("logs", nargs=-1, required=True, metavar="LOG[.gz]...",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from-iteration", type=int, default=3, show_default=True,
              help="First iteration counted (the engine learns before).")
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False),
              help="A per-launch trace of the same program to judge the prefetches by.")
@click.option("--core", "with_core", is_flag=True, help="Also replay the log through this build's core, configured "
              "as the run's.")
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE",
              help="A core configuration field for --core, over the run's, e.g. flags=8.")
@click.option("--fit-write-backs", "fit", is_flag=True,
              help="Pool the engine's eviction batches of the logs (demand-mode logs left out) and fit their "
              "cost per range and per 2 MiB.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_input_errors
def report_cmd(logs, from_iteration, trace_path, with_core, sets, fit, as_json):
    """How late a user-mode engine's prefetches were and how soon its evictions
    were regretted, from its DEEPUM_ENGINE_LOG (userlib/README.md; each line
    explained in pydeepum/enginelog.py)."""
    if sets and not with_core:
        raise InputError("--set goes with --core")
    if len(logs) > 1 and not fit:
        raise InputError("several logs go with --fit-write-backs")
    if fit:
        _fit(logs, from_iteration, as_json)
        return
    (log,) = logs
    report = analyse_log(log, from_iteration, Trace.read(trace_path) if trace_path else None)
    core = replay_core(log, from_iteration, parse_field_settings(sets)) if with_core else None
    if as_json:
        emit_json({**report.as_dict(), **({"core": core.as_dict()} if core else {})})
        return
    _print(report, core)


def _fit(logs: tuple[Path, ...], from_iteration: int, as_json: bool) -> None:
    """The engine's eviction batches only: the simulator charges this cost to
    the engine's own write-backs, and the demand mode's, issued between
    faults, take longer (docs/BENCHMARKS.md, twenty-seventh session)."""
    reports = [analyse_log(log, from_iteration) for log in logs]
    demand = [batch for r in reports if r.demand_mode for batch in r.write_back_batches]
    if all(r.demand_mode for r in reports):
        raise InputError("only demand-mode logs (flags with DEEPUM_CFG_F_NO_PREFETCH): the fit is of the engine's "
                         "write-backs")
    cost = fit_write_backs([batch for r in reports if not r.demand_mode for batch in r.write_back_batches])
    left_out = {"demand_mode_logs": sum(r.demand_mode for r in reports), "demand_mode_batches": len(demand),
                "demand_mode_over_fit": cost.time_over_fit(demand) if demand else None}
    if as_json:
        emit_json({**cost.as_dict(), **left_out})
        return
    click.echo(f"{cost.batches} eviction batches of the engine: {cost.per_range_us:.0f} us per range + "
               f"{cost.per_2MiB_us:.0f} us per 2 MiB ({cost.GBps:.1f} GB/s over all of them)")
    if demand:
        click.echo(f"left out: {left_out['demand_mode_logs']} demand-mode logs, whose {len(demand)} batches took "
                   f"{left_out['demand_mode_over_fit']:.2f}x this fit")


def _print(r: EngineLogReport, core: CoreReplay | None) -> None:
    echo = click.echo
    echo(f"iterations >= {r.from_iteration}: {r.launches} launches, {r.faults} faults fed, "
         f"{r.prefetched_blocks} blocks prefetched, {r.evicted_blocks} evicted")
    echo(f"  late       {r.late:7}  issued before the fault: {_spread(r.late_ms_since_issue)}")
    echo(f"  regretted  {r.regretted:7}  evicted before the fault: {_spread(r.regretted_ms_since_eviction)}")
    echo(f"  misses     {r.misses:7}  (regretted ones included)")
    echo(f"  heard      faults reached the core {_spread(r.fault_heard_ms_after)} after they happened")
    for d, batches, waited, took, rate in (
            ("evict", r.evict_batches, r.evict_ms_waited, r.evict_ms_in_driver, r.evict_stream_GBps),
            ("prefetch", r.prefetch_batches, r.prefetch_ms_waited, r.prefetch_ms_in_driver, r.prefetch_stream_GBps)):
        if batches:
            echo(f"  driver     {d} batches {batches}: waited {_spread(waited)} for their call, in it {_spread(took)}"
                 + ("" if rate is None else f"; copied at {rate:.1f} GB/s in the stream"))
    echo(f"  stream     the engine's commands, costed by the simulator's model, fill "
         f"{_spread(r.stream_share_of_iteration, '', 2)} of an iteration ({r.stream_iterations} whole iterations)")
    prefetched = max(r.prefetched_blocks, 1)
    back = r.prefetched_again_launches_after_eviction
    echo(f"  round trips  prefetches of blocks the engine had evicted, with no launch between: "
         f"{r.round_trips_no_launch / prefetched:.1%}, with at most {ROUND_TRIP_LAUNCHES}: "
         f"{r.round_trips_within_32 / prefetched:.1%}; "
         f"{r.blocks_prefetched_again_in_iteration} prefetches of a block already prefetched that iteration"
         + ("" if back is None else f", evicted in between and back {_spread(back, ' launches later', 0)}"))
    echo("  learning   faults on (kernel, block) pairs new to the log / faults, per iteration: "
         + ", ".join(f"{it.iteration}: {it.new_pairs}/{it.faults}" for it in r.learning))
    echo("  settling   regretted faults / blocks prefetched again in the iteration, per iteration: "
         + ", ".join(f"{it.iteration}: {it.regretted}/{it.refetched}" for it in r.settling))
    if r.copies:
        echo("  copies     per iteration, GiB written back / prefetched, each at GB/s in the stream: "
             + ", ".join(f"{it.iteration}: {it.evicted_gib:.1f} at {_rate(it.evict_GBps)} / "
                         f"{it.prefetched_gib:.1f} at {_rate(it.prefetch_GBps)}" for it in r.copies))
    echo("  learned    prefetched blocks by the iteration their (kernel, block) pair first faulted in: "
         + ", ".join(f"{it}: {n}" for it, n in r.prefetches_by_pair_learned.items()))
    echo(f"  taught     per warm-up iteration, pairs it taught first / of them, ones whose block no measured "
         f"iteration used within {PLACE_SLACK} launches of that place: "
         + ", ".join(f"{it.iteration}: {it.unconfirmed}/{it.pairs}" for it in r.pairs_taught))
    if (judged := r.against_trace) is not None:
        compared = max(judged.near + judged.not_near + judged.kernel_not_again, 1)
        echo(f"  against    the trace, prefetched blocks a kernel touches within {PLACE_SLACK} launches of the "
             f"kernel they were for: {judged.near / compared:.1%}, none: {judged.not_near / compared:.1%}, "
             f"that kernel not launched again in the iteration: {judged.kernel_not_again / compared:.1%} "
             f"(of {compared}; {judged.not_compared} in iterations of another length not compared)")
    repeated = "-" if r.launches_repeated is None else f"{r.launches_repeated:.1%}"
    echo(f"  repeated   launches {repeated} of {r.launches_compared}; a block's faults moved by "
         f"{_spread(r.fault_owner_shift_launches, '', 0)} launches from one iteration to the next "
         f"({r.fault_blocks_compared} blocks)")
    if core is not None:
        changed = "".join(f", {k}={v}" for k, v in core.changed.items())
        # Over the whole log: a batch decided before an iteration mark may be logged after it.
        echo(f"  core       this build's core, the run's configuration{changed}: {core.prefetched_blocks} blocks "
             f"prefetched, {core.evicted_blocks} evicted; whole log {core.log_prefetched_blocks} and "
             f"{core.log_evicted_blocks} (the run: {r.log_prefetched_blocks}, {r.log_evicted_blocks}); per iteration "
             "resets / waits / skips / launches:")
        for n, it in enumerate(core.iterations, r.from_iteration):
            echo(f"    {n:4}  {it.window_resets:5} / {it.window_waits:5} / {it.window_skips:5} / {it.launches:6}")
