"""Errors raised by flowergraph. Every message names the bad value and, where there is a list, the valid choices
(with :func:`did_you_mean` for a close one). Public (``__all__``): the exceptions and :func:`did_you_mean`; the
other helpers build flowergraph's own messages."""

from __future__ import annotations

from typing import Any, Iterable

__all__ = [
    "CheckpointError",
    "ClientProcessDied",
    "ClientsMissingError",
    "ConfigError",
    "DatasetUnavailableError",
    "FlowergraphError",
    "KeyFileError",
    "PartitionError",
    "did_you_mean",
]


def close_match(name: Any, choices: Iterable[Any]) -> str | None:
    """The closest of ``choices`` to ``name`` (case-insensitive), or None when none is close."""
    import difflib

    options = [str(c) for c in choices]
    lowered = {o.lower(): o for o in options}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def did_you_mean(name: Any, choices: Iterable[Any]) -> str:
    """``"; did you mean 'x'?"`` for a close match among ``choices`` (case-insensitive; '' when there is none)."""
    match = close_match(name, choices)
    return f"; did you mean {match!r}?" if match is not None else ""


def same_last_part(key: str, keys: Iterable[str]) -> list[str]:
    """The keys among ``keys`` (other than ``key``) whose last dotted part is ``key``'s: a key given without its
    namespace or under another one (``lr``, ``fedstar.lr`` -> ``node.lr``, ``graph.lr``), in ``keys``' order."""
    last = str(key).rpartition(".")[2]
    return [k for k in map(str, keys) if k != key and k.rpartition(".")[2] == last]


def did_you_mean_key(key: str, keys: Iterable[str]) -> str:
    """``"; did you mean 'node.lr'?"`` for an unknown run-config key: the known keys with its last dotted part
    (:func:`same_last_part`; several: ``'node.beta' or 'graph.beta'``), else a close match (:func:`did_you_mean`);
    '' when there is neither."""
    keys = list(keys)
    same = same_last_part(key, keys)
    if not same:
        return did_you_mean(key, keys)
    named = [repr(k) for k in same]
    return f"; did you mean {', '.join(named[:-1]) + ' or ' if len(named) > 1 else ''}{named[-1]}?"


def closest_keys(key: str, keys: Iterable[str], n: int = 5) -> list[str]:
    """The (at most ``n``) known keys closest to an unknown ``key``: those with its last dotted part first
    (:func:`same_last_part`), then the closest by spelling (of the whole key and of its last part), in that order."""
    import difflib

    keys = list(dict.fromkeys(map(str, keys)))
    out = same_last_part(key, keys)
    last = {k: k.rpartition(".")[2] for k in keys}
    by_key = difflib.get_close_matches(str(key), keys, n=n, cutoff=0.5)
    by_last = difflib.get_close_matches(str(key).rpartition(".")[2], list(set(last.values())), n=n, cutoff=0.6)
    out += by_key + [k for part in by_last for k in keys if last[k] == part]
    return list(dict.fromkeys(k for k in out if k != key))[:n]


KEYS_REFERENCE = "docs/configuration.md, or `python -m flowergraph.settings`"


def unknown_keys_message(unknown: Iterable[str], keys: Iterable[str], what: str = "run-config key") -> str:
    """The refusal of unknown keys: each with the keys it may mean (:func:`did_you_mean_key`), the few closest
    known keys (:func:`closest_keys`), and where every key is listed; never the whole list (~200 keys)."""
    keys, unknown = list(keys), list(unknown)
    if len(unknown) == 1:
        head = f"unknown {what} {unknown[0]!r}{did_you_mean_key(unknown[0], keys)}"
    else:
        head = f"unknown {what}s " + ", ".join(
            f"{k!r}" + (f" ({hint[2:]})" if (hint := did_you_mean_key(k, keys)) else "") for k in unknown
        )
    named = {k for u in unknown for k in (same_last_part(u, keys) or [close_match(u, keys)])} - {None}
    close = [c for c in dict.fromkeys(c for k in unknown for c in closest_keys(k, keys)) if c not in named][:8]
    near = f"; {'other ' if named else ''}close keys: {', '.join(close)}" if close else ""
    return f"{head}{near}; all {len(keys)} keys: {KEYS_REFERENCE}"


class FlowergraphError(Exception):
    """Base class of every error flowergraph raises on purpose."""


class ConfigError(FlowergraphError, ValueError):
    """A configuration value is invalid (unknown name, out of range, inconsistent with another value)."""


class DatasetUnavailableError(FlowergraphError, FileNotFoundError):
    """A dataset's raw files are missing and could not be downloaded."""


class PartitionError(FlowergraphError, ValueError):
    """A partition cannot be built with the requested settings."""


class KeyFileError(FlowergraphError, ValueError):
    """A key file is missing, unreadable or not what it should be."""


class CheckpointError(FlowergraphError, ValueError):
    """A checkpoint file is missing, corrupt, or does not fit the run that wants to resume from it."""


class ClientProcessDied(FlowergraphError, RuntimeError):
    """A client's process died in Flower's Ray simulation, which does not replace it: the run stops after that
    round (exit status 1) instead of finishing with fewer clients. ``server_round``: the round it died in;
    ``clients``: the clients whose messages were lost with it."""

    def __init__(self, message: str, server_round: int = 0, clients: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.server_round = server_round
        self.clients = clients


class ClientsMissingError(FlowergraphError, RuntimeError):
    """Fewer clients connected than the run needs within its wait (``connect-timeout``)."""
