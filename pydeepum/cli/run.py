"""deepumctl run."""

from __future__ import annotations

import json
import sys

import click

from ..errors import DeepumError, DeepumInputError
from ..run import DELIVERIES, MODES, CommandNotRunnable, RunOptions, RunResult, run
from ..config import parse_size
from ._common import fail_on_input_errors, gib


def summary_lines(result: RunResult) -> list[str]:
    if not result.processes:
        return ["deepum: no process made a CUDA driver call through libdeepum"]
    t = result.totals()
    first = result.processes[0]
    where = " into the module's launch page" if first.get("module_launch_page") else ""
    lines = [f"deepum: {len(result.processes)} CUDA process{'es' if len(result.processes) > 1 else ''}; "
             f"mode {first['mode']}, delivery {first['delivery']}{where}, "
             f"managed memory {'on' if first['managed'] else 'off'}"]
    launches = t.get("launches", 0)
    hits = t.get("exec_hits", 0)
    lines.append(f"  launches {launches:,}, exec IDs {t.get('exec_new', 0):,}, "
                 f"known-ID hits {hits / launches:.1%}" if launches else "  launches 0")
    steady = result.steady_state()
    if steady["launches"]:
        detected = t.get("iterations_detected", 0)
        by_place = t.get("exec_by_place", 0)
        lines.append(f"  iterations from the 2nd on: {steady['iterations']}, launches {steady['launches']:,}, "
                     f"known-ID hits {steady['exec_hits'] / steady['launches']:.2%}"
                     + (f" ({detected:,} iterations found without the program's marks)" if detected else "")
                     + (f"; {by_place:,} launches on moved tensors known by their place" if by_place else ""))
    untracked = t.get("exec_untracked", 0) + t.get("launches_unidentified", 0)
    if untracked:
        lines.append(f"  untracked launches {untracked:,} (a table was full or a kernel had no name)")
    lines.append(f"  exec IDs delivered in stream order {t.get('delivered', 0):,}"
                 f" (skipped: {t.get('delivery_skipped_capture', 0):,} in graph capture,"
                 f" {t.get('delivery_skipped_streams', 0):,} beyond the stream slots)")
    lines.append(f"  managed allocations {t.get('allocs_redirected', 0):,} ({gib(t.get('bytes_redirected', 0))}),"
                 f" fell back to device memory {t.get('allocs_fallback', 0):,}, frees reported {t.get('frees_reported', 0):,}")
    for engine in result.engines():
        lines.extend(engine_lines(engine))
    for proc in result.processes:
        if proc.get("disabled_reason"):
            lines.append(f"  pid {proc['pid']}: deepum was off: {proc['disabled_reason']}")
    return lines


def engine_lines(engine: dict) -> list[str]:
    """The user-mode engine's summary (userlib/engine.c's statistics)."""
    c = engine["counters"]
    budget = gib(engine["capacity_bytes"]) if engine["capacity_bytes"] else "none"
    return [f"  engine: fault source {engine['fault_source']}, budget {budget}, "
            f"batch API {'yes' if engine['batch_api'] else 'no (per-range calls)'}",
            f"    prefetched {c['prefetch_blocks']:,} blocks in {c['prefetch_ranges']:,} ranges, "
            f"{c['prefetch_calls'] + c['fallback_calls']:,} calls; evicted {c['evict_blocks']:,} "
            f"(+{c['demand_evictions']:,} on demand, {c['discard_blocks']:,} dead)",
            f"    faults {c['fault_events']:,} events, {c['faults_fed'] + c['transfer_faults_fed']:,} missed blocks, "
            f"{c.get('late_faults_fed', 0):,} late prefetches; "
            f"launches {c['launches_fed']:,} ({c['launches_lost']:,} lost"
            + (f", {c['launches_observed']:,} timed by the observer" if c.get("launches_observed") else "")
            + "); "
            f"GPU seen over budget in {c['budget_violation_rounds']:,} rounds; "
            f"engine CPU {engine['cpu_ns'] / 1e9:.2f} s"]


@click.command("run", context_settings={"allow_interspersed_args": False})
@click.option("--stats", "stats_path", type=click.Path(dir_okay=False),
              help="Write every CUDA process's statistics, and their totals, to this JSON file.")
@click.option("--delivery", type=click.Choice(DELIVERIES), default="write", show_default=True,
              help="How the exec ID about to run reaches deepum: a stream memory write, "
                   "or a host callback (DeepUM's original, ~70x slower per launch).")
@click.option("--no-managed", is_flag=True, help="Leave device allocations as they are (no managed memory).")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="auto: the kernel module if loaded, else the user-mode engine (default); "
                   "observe: intercept and identify without prefetching; user: the user-mode engine; "
                   "demand: its budget with reactive eviction only; off: pass everything through.")
@click.option("--capacity", type=str, default=None,
              help="The user-mode engine's GPU memory budget for managed memory, e.g. 4G "
                   "(emulates a smaller GPU; default: none).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@fail_on_input_errors
def run_cmd(stats_path, delivery, no_managed, mode, capacity, command):
    """Run COMMAND under libdeepum; exit with COMMAND's status.

    Use -- before COMMAND if it has options of its own:
    deepumctl run --stats s.json -- python train.py --epochs 1
    """
    try:
        result = run(command, RunOptions(delivery=delivery, managed=not no_managed, mode=mode,
                                         capacity=parse_size(capacity) if capacity else None))
    except CommandNotRunnable as e:
        click.echo(f"deepumctl run: {e}", err=True)
        sys.exit(e.returncode)
    except DeepumInputError:
        raise
    except DeepumError as e:
        raise click.ClickException(str(e)) from None
    for line in summary_lines(result):
        click.echo(line, err=True)
    if stats_path:
        with open(stats_path, "w") as f:
            json.dump(result.as_dict(), f, indent=2, sort_keys=True)
    sys.exit(result.returncode)
