"""Run-configuration options: the schema primitive every layer declares its keys with (Flower-free).

An :class:`Option` is one run-config key: its name, default (whose type is the key's type), help text, the
valid choices or a check, and the group it is documented under in the configuration reference (docs/configuration.md).
:mod:`flowergraph.settings` holds the keys every run has; each method declares its own keys in its registration
(:mod:`flowergraph.methods`), named ``<method>.<key>`` (e.g. ``fedgcn.hops``). Flower reads such dotted keys
from a nested table (``[tool.flwr.app.config.fedgcn]``) or as they are (``--run-config "fedgcn.hops=1"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class Option:
    """One run-config key.

    ``check(value)`` returns an error text (``"must be >= 1"``) or None; ``normalize(value)`` may return the
    canonical spelling of a valid value or raise ConfigError (e.g. dataset names are case-insensitive).
    ``group`` is the section of docs/configuration.md the key is listed under (a method's name for method keys).
    """

    key: str
    default: Any
    help: str
    choices: tuple | Callable[[], tuple] | None = None  # a callable: looked up when needed (e.g. methods)
    check: Callable[[Any], str | None] | None = None
    group: str = "run"
    normalize: Callable[[Any], Any] | None = None

    @property
    def kind(self) -> type:
        return type(self.default)

    @property
    def valid_choices(self) -> tuple | None:
        return self.choices() if callable(self.choices) else self.choices

    def parse(self, value: Any) -> Any:
        """The value coerced to the key's type and checked; ConfigError names the key, the value and the
        valid choices."""
        value = coerce(self, value)
        if self.normalize is not None:
            value = self.normalize(value)
        choices = self.valid_choices
        if choices is not None and value not in choices:
            raise ConfigError(
                f"unknown {self.key} {value!r}; valid choices: {', '.join(map(str, choices))}"
                f"{did_you_mean(value, choices)}"
            )
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise ConfigError(f"{self.key}={value!r}: {problem}")
        return value


@dataclass(frozen=True)
class Spec:
    """What :func:`option` keeps in a dataclass field's metadata: the key's help, choices, check and normalisation
    (the default and the type are the field's), and its run-config key where it is not ``<prefix>.<name>``."""

    help: str
    choices: tuple | Callable[[], tuple] | None = None
    check: Callable[[Any], str | None] | None = None
    normalize: Callable[[Any], Any] | None = None
    key: str | None = None
    group: str | None = None


SPEC = "flowergraph.option"  # the metadata key of a field declared with option()


def option(
    default: Any,
    help: str,
    choices: tuple | Callable[[], tuple] | None = None,
    check: Callable[[Any], str | None] | None = None,
    normalize: Callable[[Any], Any] | None = None,
    *,
    key: str | None = None,
    group: str | None = None,
) -> Any:
    """A hyper-parameter declared once, as a field of a dataclass (a method's options, a task's, the federation's):
    its default, help text (the argument's documentation and the key's in docs/configuration.md), valid choices or
    check. :func:`options_of` derives the run-config keys from the dataclass; the method's Strategy class takes
    the same fields as typed keyword arguments."""
    import dataclasses

    return dataclasses.field(default=default, metadata={SPEC: Spec(help, choices, check, normalize, key, group)})


def field_key(name: str, prefix: str | None) -> str:
    """The run-config key of field ``name``: ``<prefix>.<name with dashes>`` (``split_seed`` ->
    ``asfgnn.split-seed``), or the name with dashes where there is no prefix."""
    dashed = name.replace("_", "-")
    return f"{prefix}.{dashed}" if prefix else dashed


def options_of(cls: type, prefix: str | None = None, group: str | None = None) -> tuple[Option, ...]:
    """The run-config keys a dataclass declares with :func:`option`, in field order (fields without it, such as a
    Strategy's own state, are not keys)."""
    import dataclasses

    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(SPEC)
        if spec is None:
            continue
        out.append(
            Option(
                spec.key or field_key(f.name, prefix),
                f.default,
                spec.help,
                spec.choices,
                spec.check,
                group=spec.group or group or prefix or "run",
                normalize=spec.normalize,
            )
        )
    return tuple(out)


def check_fields(obj: Any, prefix: str | None = None, owner: str | None = None) -> None:
    """Coerce and check every :func:`option` field of dataclass instance ``obj`` in place (its type, choices and
    check, as the run-config key's); ConfigError names the argument, the value and the valid choices."""
    import dataclasses

    owner = owner or type(obj).__name__
    for f in dataclasses.fields(obj):
        spec = f.metadata.get(SPEC)
        if spec is None:
            continue
        value = getattr(obj, f.name)
        opt = Option(f.name, f.default, spec.help, spec.choices, spec.check, normalize=spec.normalize)
        try:
            parsed = opt.parse(value)
        except ConfigError as exc:  # "unknown hops 5; valid choices: ..." / "hops=5: must be ..." -> the reason
            import re

            reason = re.sub(rf"^(unknown {re.escape(f.name)} .*?; |{re.escape(f.name)}=.*?: )", "", str(exc), count=1)
            raise ConfigError(f"{owner}({f.name}={value!r}): {reason}") from None
        object.__setattr__(obj, f.name, parsed)


class Options:
    """The base of an options dataclass (fields declared with :func:`option`): its fields are coerced and checked
    when it is made (:func:`check_fields`), so ``NodeTask(lr=-1)`` fails at once, naming the argument."""

    def __post_init__(self) -> None:
        check_fields(self)


def namespace(prefix: str, group: str | None = None) -> Callable[..., Option]:
    """A maker of a method's or task's keys: ``opt = namespace("fedgcn")``, then
    ``opt("hops", 2, "text", choices, check)`` is ``Option("fedgcn.hops", 2, "text", choices, check,
    group="fedgcn")`` (``group``: the docs section, default the prefix)."""

    def opt(
        key: str,
        default: Any,
        text: str,
        choices: tuple | Callable[[], tuple] | None = None,
        check: Callable[[Any], str | None] | None = None,
        normalize: Callable[[Any], Any] | None = None,
    ) -> Option:
        return Option(f"{prefix}.{key}", default, text, choices, check, group=group or prefix, normalize=normalize)

    opt.__name__ = f"{prefix}_option"
    return opt


def coerce(option: Option, value: Any) -> Any:
    """``value`` as the option's type (bool, int, float or str), from Flower's config or a string."""
    kind = option.kind
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{option.key}={value!r}: expected true or false")
    if kind is int:
        if isinstance(value, bool):
            raise ConfigError(f"{option.key}={value!r}: expected an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(f"{option.key}={value!r}: expected an integer")
    if kind is float:
        if isinstance(value, bool):
            raise ConfigError(f"{option.key}={value!r}: expected a number")
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{option.key}={value!r}: expected a number") from None
        if math.isnan(out) or math.isinf(out):
            raise ConfigError(f"{option.key}={value!r}: expected a finite number")
        return out
    if not isinstance(value, str):
        raise ConfigError(f"{option.key}={value!r}: expected a string")
    return value


# Checks (each returns an error text or None).
def at_least(lo, inclusive: bool = True) -> Callable[[Any], str | None]:
    def check(v):
        ok = v >= lo if inclusive else v > lo
        return None if ok else f"must be {'>=' if inclusive else '>'} {lo}"

    return check


def within(lo, hi) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"must be in [{lo}, {hi}]"


def left_open(lo, hi) -> Callable[[Any], str | None]:
    return lambda v: None if lo < v <= hi else f"must be in ({lo}, {hi}]"


def right_open(lo, hi) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v < hi else f"must be in [{lo}, {hi})"
