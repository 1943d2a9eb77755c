"""Run-configuration presets and ``--set KEY=VALUE`` pairs (Flower-free), as every launcher reads them.

A preset is a TOML file of run-config keys, the format ``flwr run --run-config FILE`` reads; nested tables are
dotted keys (``[fedgcn] hops = 2`` is ``fedgcn.hops``). Unknown keys are refused naming the file, the keys each
may mean and the valid keys."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from ..errors import ConfigError, did_you_mean, unknown_keys_message
from .parse import option_by_key, unknown_key


def load_preset(path: str | os.PathLike) -> dict[str, Any]:
    """A run-config preset: a TOML file of run-config keys (the format ``flwr run --run-config FILE`` reads).

    Unknown keys and unreadable files raise ConfigError naming the file."""
    path = Path(path)
    if not path.is_file():
        found = available_presets()
        listed = (
            f"; the presets in {found[0].parent}: {', '.join(p.name for p in found)}"
            f"{did_you_mean(path.name, [p.name for p in found])}"
            if found
            else "; presets are TOML files of run-config keys, e.g. conf/fedgcn-cora.toml"
        )
        raise ConfigError(f"preset {str(path)!r} does not exist{listed}")
    try:
        values = flatten_tables(tomllib.loads(path.read_text()))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"preset {str(path)!r} is not valid TOML: {exc}") from None
    known = option_by_key()
    unknown = [k for k in values if k not in known]
    if unknown:
        raise ConfigError(f"preset {str(path)!r}: {unknown_keys_message(unknown, known)}")
    return values


def available_presets() -> list[Path]:
    """The preset files in ``./conf`` (or, when flowergraph runs from a checkout, the checkout's ``conf/``)."""
    for folder in (Path.cwd() / "conf", Path(__file__).resolve().parents[2] / "conf"):
        found = sorted(folder.glob("*.toml"))
        if found:
            return found
    return []


def flatten_tables(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested TOML tables as dotted keys (``[fedgcn] hops = 2`` -> ``fedgcn.hops``), as Flower reads them."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(flatten_tables(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def parse_set(pairs: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as run-config values (the value as TOML, else a bare string); ConfigError for an
    unknown key or a pair without ``=``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set {pair!r}: expected key=value")
        key = key.strip()
        known = option_by_key()
        if key not in known:
            raise unknown_key(key, known)
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value  # a bare string
    return out
