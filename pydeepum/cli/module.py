"""deepumctl load, unload, status, stats, config: the kernel module."""

from __future__ import annotations

import dataclasses
import functools
import json
import time

import click

from .. import build as buildmod
from .. import device as devmod
from ..config import Config
from ..errors import DeepumInputError, DeviceError
from ._common import InputError, emit_json, fail_on_input_errors


def fail_on_device_errors(fn):
    """Input errors, the module missing and missing permissions exit 2 with a
    message (fail_on_input_errors); any other refusal of the device exits 1
    with one."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DeviceError as e:
            if isinstance(e, DeepumInputError):
                raise
            raise click.ClickException(str(e)) from None

    return fail_on_input_errors(wrapper)


@click.command("load")
@click.argument("params", nargs=-1, metavar="[NAME=VALUE]...")
@click.option("--ko", type=click.Path(dir_okay=False),
              help="deepum.ko to insmod [default: kmod/deepum.ko of this tree if built, else modprobe deepum].")
@click.option("--uvm-ko", type=click.Path(dir_okay=False),
              help="Swap this patched nvidia-uvm.ko (kmod/nvidia/build-uvm) in first, in place of the "
                   "running one; checked against the running driver's version, refused while "
                   "/dev/nvidia-uvm is open.")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait for /dev/deepum to appear.")
@click.option("--dry-run", is_flag=True, help="Make every check, print the commands, run none.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_device_errors
def load_cmd(params, ko, uvm_ko, timeout, dry_run, as_json):
    """Load the kernel module with module parameters (NAME=VALUE, e.g.
    enable_test_ioctls=1 fault_queue_len=65536); needs root.  docs/INSTALL.md
    says how to undo it."""
    if dry_run:
        steps = devmod.load_commands(params, ko=ko, uvm_ko=uvm_ko)
        if as_json:
            emit_json({"commands": steps})
        else:
            click.echo("\n".join(" ".join(step) for step in steps))
        return
    node = devmod.load_module(params, ko=ko, timeout=timeout, uvm_ko=uvm_ko)
    if as_json:
        emit_json({"device": node})
    else:
        click.echo(f"deepum loaded: {node}")


@click.command("build")
@click.option("--nvidia-src", required=True, type=click.Path(),
              help="NVIDIA's open kernel module source of the running driver (a kernel-open tree, an "
                   "open-gpu-kernel-modules checkout, or Debian's nvidia-open-kernel-source .deb).")
@click.option("--out", type=click.Path(file_okay=False), help="Build directory [default: build/nvidia].")
@click.option("--kver", help="Kernel version to build for [default: the running one].")
@click.option("--dry-run", is_flag=True, help="Print the commands, run none.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_device_errors
def build_cmd(nvidia_src, out, kver, dry_run, as_json):
    """Build the patched nvidia-uvm and deepum.ko with its UVM backend
    (docs/INSTALL.md); then deepumctl load --uvm-ko swaps them in."""
    plan = buildmod.build_plan(nvidia_src, out=out, kver=kver)
    if not dry_run:
        buildmod.build(plan)
    if as_json:
        emit_json(dataclasses.asdict(plan) | {"built": not dry_run})
    elif dry_run:
        click.echo("\n".join(" ".join(argv) for argv in plan.commands))
    else:
        click.echo(f"built {plan.uvm_ko} and {plan.deepum_ko}\n"
                   f"next: sudo deepumctl load --uvm-ko {plan.uvm_ko} --ko {plan.deepum_ko}")


@click.command("unload")
@click.option("--force", is_flag=True,
              help="Stop (SIGTERM) the processes holding /dev/deepum open first, instead of refusing.")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="With --force: seconds to wait for them to exit.")
@click.option("--restore-uvm", is_flag=True, help="Then put the driver's own nvidia-uvm back.")
@fail_on_device_errors
def unload_cmd(force, timeout, restore_uvm):
    """Unload the kernel module; refuses while contexts are attached.  Needs root."""
    devmod.unload_module(force=force, timeout=timeout, restore_uvm=restore_uvm)
    click.echo("deepum unloaded" + (", stock nvidia-uvm loaded" if restore_uvm else ""))


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_device_errors
def status_cmd(as_json):
    """Whether the module is loaded, its parameters, contexts and totals (from sysfs)."""
    st = devmod.module_status()
    if as_json:
        emit_json(dataclasses.asdict(st))
        return
    if not st.loaded:
        click.echo("deepum: not loaded")
        return
    click.echo(f"deepum: loaded, {st.device or 'no device node'}, backend {st.backend}")
    click.echo(f"  contexts {st.contexts}, module users {st.refcount}"
               + (f", held open by {', '.join(map(str, st.holders))}" if st.holders else ""))
    click.echo("  parameters: " + ", ".join(f"{k}={v}" for k, v in st.parameters.items()))
    s = st.stats
    click.echo(f"  records {s.records:,} (dropped {s.records_dropped:,}), prefetches {s.prefetches:,}, "
               f"evictions {s.evictions:,}, commands dropped {s.cmds_dropped:,}")


def _print_stats(stats, previous) -> None:
    for name, value in dataclasses.asdict(stats).items():
        delta = f"  (+{value - getattr(previous, name):,})" if previous is not None else ""
        click.echo(f"  {name:20s} {value:>20,}{delta}")


@click.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (one line per sample with --watch).")
@click.option("--watch", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Print again every SECONDS until interrupted.")
@click.option("--count", type=click.IntRange(min=1), help="With --watch: stop after this many samples.")
@fail_on_device_errors
def stats_cmd(as_json, watch, count):
    """The module-wide counters: every context since the module loaded."""
    with devmod.Device() as dev:
        if watch is None:
            stats = dev.stats(global_scope=True)
            if as_json:
                emit_json(dataclasses.asdict(stats))
            else:
                _print_stats(stats, None)
            return
        previous = None
        sample = 0
        while count is None or sample < count:
            if sample:
                time.sleep(watch)
            stats = dev.stats(global_scope=True)
            if as_json:
                click.echo(json.dumps({"time": time.time(), **dataclasses.asdict(stats)}, sort_keys=True))
            else:
                click.echo(time.strftime("%H:%M:%S"))
                _print_stats(stats, previous)
            previous = stats
            sample += 1


@click.group("config")
def config_group() -> None:
    """The prefetch core configuration new contexts start with.  A context's
    own configuration belongs to its process (libdeepum sets it)."""


def _need_defaults(defaults: bool) -> None:
    if not defaults:
        raise InputError("deepumctl can only reach the defaults that new contexts start with: "
                         "add --defaults (a context's configuration belongs to its process)")


def _show_config(cfg: Config, as_json: bool) -> None:
    if as_json:
        emit_json(dataclasses.asdict(cfg))
        return
    for name, value in dataclasses.asdict(cfg).items():
        click.echo(f"{name:18s} {value}")


@config_group.command("get")
@click.option("--defaults", is_flag=True, help="The defaults new contexts get (required).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_device_errors
def config_get(defaults, as_json):
    """Show the default configuration."""
    _need_defaults(defaults)
    with devmod.Device() as dev:
        _show_config(dev.config(defaults=True), as_json)


@config_group.command("set")
@click.argument("fields", nargs=-1, required=True, metavar="FIELD=VALUE...")
@click.option("--defaults", is_flag=True, help="Change the defaults new contexts get (required; CAP_SYS_ADMIN).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@fail_on_device_errors
def config_set(fields, defaults, as_json):
    """Change fields of the default configuration (FIELD=0: back to its
    default); the others keep their values.  Contexts attached from now on
    get it."""
    _need_defaults(defaults)
    known = {f.name for f in dataclasses.fields(Config)}
    changes = {}
    for item in fields:
        name, sep, value = item.partition("=")
        if not sep or name not in known:
            raise InputError(f"{item!r}: want FIELD=VALUE with FIELD one of {', '.join(sorted(known))}")
        try:
            changes[name] = int(value, 0)
        except ValueError:
            raise InputError(f"{item!r}: {value!r} is not an integer") from None
    with devmod.Device() as dev:
        cfg = dataclasses.replace(dev.config(defaults=True), **changes)
        _show_config(dev.configure(cfg, defaults=True), as_json)


MODULE_COMMANDS = (build_cmd, load_cmd, unload_cmd, status_cmd, stats_cmd, config_group)
