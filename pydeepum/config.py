"""Configuration of the prefetch core (struct deepum_config)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ._lowlevel import constant, ffi, lib, struct_dataclass, to_dataclass
from .errors import ConfigError

Config = struct_dataclass(
    "deepum_config",
    "Config",
    "Prefetch core configuration; fields as in struct deepum_config, 0 = default.",
)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)?\s*$", re.I)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_size(text: str) -> int:
    """Bytes in '8G', '512MiB', '1.5g' or '4096' (binary units)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"not a size: {text!r} (examples: 8G, 512M, 4096)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_field_settings(pairs) -> dict[str, int]:
    """{field: value} from 'FIELD=VALUE' strings (--set), values in any base int() reads."""
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


def _range(field: str) -> tuple[int, int] | None:
    prefix = f"DEEPUM_CFG_{field.upper()}"
    if not hasattr(lib, f"{prefix}_MIN"):
        return None
    return constant(f"{prefix}_MIN"), constant(f"{prefix}_MAX")


def _unset_config() -> Config:
    return Config(**{f.name: 0 for f in dataclasses.fields(Config)})


def default_config() -> Config:
    return checked(_unset_config())


def to_cdata(cfg: Config) -> Any:
    c = ffi.new("struct deepum_config *")
    for f in dataclasses.fields(cfg):
        setattr(c, f.name, getattr(cfg, f.name))
    return c


def checked(cfg: Config) -> Config:
    """@cfg with defaults filled in.  The core decides; on refusal ConfigError
    names the first offending field."""
    try:
        c = to_cdata(cfg)
    except OverflowError as e:
        raise ConfigError(f"configuration value out of range: {e}") from None
    if lib.deepum_core_config_check(c) == 0:
        return to_dataclass(Config, c)
    raise ConfigError(_why_refused(cfg))


def _why_refused(cfg: Config) -> str:
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        bounds = _range(f.name)
        if bounds and value and not bounds[0] <= value <= bounds[1]:
            return f"{f.name}={value} is outside {bounds[0]}..{bounds[1]}"
    if cfg.corr_sets & (cfg.corr_sets - 1):
        return f"corr_sets={cfg.corr_sets} is not a power of two"
    if cfg.capacity_blocks > constant("DEEPUM_CFG_CAPACITY_BLOCKS_MAX"):
        return f"capacity_blocks={cfg.capacity_blocks} is too large"
    return f"flags=0x{cfg.flags:x} has unknown bits"


def make_settings(**fields: int) -> Config:
    """The fields named set, every other one unset (0), for cores whose
    capacity comes later (the simulator's, one per capacity): the core's
    defaults may depend on it (the window is at most a quarter of it), so
    they are filled in only then.  Bad values are refused now."""
    unknown = set(fields) - {f.name for f in dataclasses.fields(Config)}
    if unknown:
        raise ConfigError(f"unknown configuration field(s): {', '.join(sorted(unknown))}")
    cfg = dataclasses.replace(_unset_config(), **fields)
    checked(cfg)
    return cfg


def make_config(capacity_bytes: int = 0, **fields: int) -> Config:
    """A checked Config: @capacity_bytes is GPU memory for UM (0: unlimited);
    other keywords set struct fields by name."""
    # From unset fields: a default may depend on others (evict_scan on the victim choice).
    cfg = make_settings(**fields)
    if capacity_bytes:
        block = 1 << checked(cfg).block_shift
        if capacity_bytes < block:
            raise ConfigError(f"capacity {capacity_bytes} B is less than one {block} B block")
        cfg = dataclasses.replace(cfg, capacity_blocks=capacity_bytes // block)
    return checked(cfg)


def as_the_engine_ran(config: dict[str, int]) -> dict[str, int]:
    """An engine's checked configuration (its log's config line, its
    statistics) as its core ran it: one that names no victim choice is from
    before API 1.4, whose default was the oldest victims."""
    if "flags" in config and not config["flags"] & constant("DEEPUM_CFG_F_VICTIMS"):
        return {**config, "flags": config["flags"] | constant("DEEPUM_CFG_F_LRM_VICTIMS")}
    return dict(config)


def memory_bytes(cfg: Config) -> int:
    """What one core instance allocates with @cfg."""
    return int(lib.deepum_core_mem_bytes(to_cdata(checked(cfg))))
