"""Config dataclasses: one per trainer and job, TRL-style.

Every field carries its help text and its command-line spelling in `metadata`
(`option(...)`), so the CLI's options, the console's Jobs forms and the run's
recorded params are all derived from the one dataclass. Validation lives in one
place (`Config.__post_init__`: bounds, choices, finiteness from the metadata, then
the class's own `check`), and every refusal is a one-line `ConfigError` that
names the option and the fix.

    @dataclass
    class CollectConfig(Config):
        states: int = option(32, "Start states to sample.", min=1, max=100_000)

A config round-trips through JSON (`to_params` / `from_params`): that is what a
detached job reads back from its run folder and what `runs resume` re-reads.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import MISSING, dataclass, field
from typing import Any, Iterator, Mapping, Sequence, TypeVar

C = TypeVar("C", bound="Config")


SEED_MAX = 2**32 - 1  # a seed's upper bound everywhere (numpy's legacy seeding, gymnasium's resets)


class ConfigError(ValueError):
    """A bad config value: one line naming the option and what it must be."""


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    short: str | None = None,
    min: float | None = None,
    max: float | None = None,
    choices: Any = None,
    check: str = "",
    cli: bool = True,
    form: bool | str = False,
    negative: str | None = None,
    suggest: Any = None,
) -> Any:
    """A config field with its help text and how the CLI and the console show it.

    flag: the CLI spelling (default `--field-name`); without dashes (e.g. "RUN") the
    field is the command's positional argument of that name; short: e.g. "-k".
    min/max: inclusive bounds (numbers); choices: the allowed values, or a callable
    returning them (evaluated late, e.g. the registered envs).
    check: a reference a form checks against the registry before launch ("run:critic",
    "strategy", "engine", ...); bounds and choices are checked from the metadata.
    form: shown in the console's Jobs form (a string: with that label).
    cli: False keeps it out of the command line (set by the code, e.g. a deadline).
    negative: the off switch of a boolean (e.g. "--free" for --constrained).
    suggest: values a form offers (a callable is evaluated late) without refusing others.
    """
    meta = {"help": help, "flag": flag, "short": short, "min": min, "max": max, "choices": choices, "check": check,
            "label": form if isinstance(form, str) else None, "cli": cli, "form": bool(form), "negative": negative, "suggest": suggest}
    if isinstance(default, (list, dict, set)):
        frozen = type(default)(default)
        return field(default_factory=lambda: type(frozen)(frozen), metadata=meta)
    return field(default=default, metadata=meta)


def flag_of(f: dataclasses.Field) -> str:
    """The field's command-line option, e.g. `--critic-run`."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def choices_of(f: dataclasses.Field) -> tuple[Any, ...]:
    """The allowed values of a field (empty: any)."""
    choices = f.metadata.get("choices")
    if callable(choices):
        choices = choices()
    return tuple(choices or ())


def _strip_none(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), optional
    return tp, False


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict[str, Any]:
    """A class's resolved annotations, once: resolving them is most of a config's parsing
    cost (a job launch from the console parsed ~200 of them, ~40 ms)."""
    return typing.get_type_hints(cls)


def field_type(cls: type, f: dataclasses.Field) -> tuple[Any, bool]:
    """The field's resolved type (None stripped) and whether it may be None."""
    return _strip_none(_type_hints(cls)[f.name])


def is_list(tp: Any) -> bool:
    return typing.get_origin(tp) in (list, tuple)


def _coerce(cls: type, f: dataclasses.Field, value: Any) -> Any:
    """A JSON or form value as the field's type (int for an int field given 3.0, etc.)."""
    tp, _ = field_type(cls, f)
    if value is None:
        return None
    name = flag_of(f)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{name} {value!r}: must be true or false")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name} {value!r}: must be a whole number")
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        if not isinstance(value, int):
            raise ConfigError(f"{name} {value!r}: must be a whole number")
        return value
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name} {value!r}: must be a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} {value!r}: must be a number") from None
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name} {value!r}: must be text")
        return value
    if is_list(tp):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} {value!r}: must be a list")
        return list(value)
    return value  # unions such as `str | int` are checked by the class


@dataclass
class Config:
    """Base of every trainer and job config: metadata-driven checks, JSON round trip."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            part = part_type(type(self), f)
            if part is not None:  # a nested part (e.g. a loss's settings): built from a dict if given one
                value = getattr(self, f.name)
                if isinstance(value, Mapping):
                    setattr(self, f.name, part.from_params(value))
                continue
            setattr(self, f.name, _coerce(type(self), f, getattr(self, f.name)))
            self._check_field(f)
        self.check()

    def _check_field(self, f: dataclasses.Field) -> None:
        value, name = getattr(self, f.name), flag_of(f)
        if value is None:
            return
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, str) and not v.strip() and f.metadata.get("check") and v != f.default:
                # `--adapter ''` is a slip (an unset shell variable), not "the default"
                raise ConfigError(f"{name} is empty: give a value, or leave {name} out for its default")
            if isinstance(v, float) and not math.isfinite(v):
                raise ConfigError(f"{name} {v} is not a finite number")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                lo, hi = f.metadata.get("min"), f.metadata.get("max")
                if lo is not None and v < lo:
                    raise ConfigError(f"{name} {v}: must be at least {lo:g}")
                if hi is not None and v > hi:
                    raise ConfigError(f"{name} {v}: must be at most {hi:g}")
            choices = choices_of(f)
            if choices and v not in choices:
                raise ConfigError(f"{name} {v!r}: must be one of {', '.join(map(str, choices))}")

    def check(self) -> None:
        """Cross-field checks of the subclass; raise ConfigError (use `self.refuse`)."""

    def refuse(self, field_name: str, why: str) -> None:
        """Raise the one-line error for a field: `--flag VALUE: why`."""
        f = next(f for f in dataclasses.fields(self) if f.name == field_name)
        value = getattr(self, field_name)
        if isinstance(value, (list, tuple)):  # as typed: `--agents a,b`, not "['a', 'b']"
            value = ",".join(str(v) for v in value)
        shown = f" {value!r}" if value not in (None, [], "") else ""
        raise ConfigError(f"{flag_of(f)}{shown}: {why}")

    def to_params(self) -> dict[str, Any]:
        """JSON-ready flat params (what the run records and a detached job reads back):
        a nested part's fields sit beside the others, so the params stay one flat dict."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if part_type(type(self), f) is not None:
                out.update(value.to_params())
            else:
                out[f.name] = _plain(value)
        return out

    def record_params(self) -> dict[str, Any]:
        """What a run's params record: `to_params`, except where a part says less (the
        default engine records nothing, so older runs' params read the same)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out.update(value.record_params() if part_type(type(self), f) is not None else {f.name: _plain(value)})
        return out

    @classmethod
    def from_params(cls: type[C], params: Mapping[str, Any], *, strict: bool = True) -> C:
        """The config of flat recorded params (parts gathered back); unknown keys are
        refused when `strict` (a config file with a typo), ignored otherwise."""
        known = set(flat_names(cls))
        unknown = sorted(set(params) - known)
        if strict and unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)} for {cls.__name__}; known: "
                              f"{', '.join(sorted(known))}")
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            part = part_type(cls, f)
            if part is not None:
                mine = {k: v for k, v in params.items() if k in set(flat_names(part))}
                kwargs[f.name] = part.from_params(mine, strict=strict)
            elif f.name in params:
                kwargs[f.name] = params[f.name]
        return cls(**kwargs)

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)

    def project(self, base: type[C], **changes: Any) -> C:
        """This config as one of its base classes (a job config's trainer or loop part),
        with `changes` applied: what the library function takes."""
        names = {f.name for f in dataclasses.fields(base)}
        return base(**{**{k: getattr(self, k) for k in names}, **changes})


def part_type(cls: type, f: dataclasses.Field) -> type | None:
    """The Config class of a nested part field, else None."""
    tp, _ = field_type(cls, f)
    return tp if isinstance(tp, type) and issubclass(tp, Config) else None


def flat_fields(cls: type) -> Iterator[tuple[type, dataclasses.Field]]:
    """(owning class, field) for every leaf field, parts flattened in order: what the
    CLI shows as options and the params record."""
    for f in dataclasses.fields(cls):
        part = part_type(cls, f)
        if part is not None:
            yield from flat_fields(part)
        else:
            yield cls, f


def help_panel(cls: type, name: str) -> str | None:
    """The `--help` panel a field is listed under: the panel of `cls.HELP_PANELS` (panel ->
    field names) that names it, else `cls.HELP_PANEL` (a part's own, e.g. the engine's),
    else None: the command's main Options panel. A loop command has 60-70 options; grouped,
    its --help reads by topic instead of as one box."""
    for panel, names in getattr(cls, "HELP_PANELS", {}).items():
        if name in names:
            return panel
    return getattr(cls, "HELP_PANEL", None)


def flat_names(cls: type) -> list[str]:
    return [f.name for _, f in flat_fields(cls)]


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None



def argv_values(cls: type, argv: Sequence[str]) -> dict[str, Any]:
    """Field values from options of `cls` written as on its command line (`--flag value`,
    `--flag=value`, `--flag` / `--no-flag` for a switch): what a benchmark's string of
    extra options for a step it runs carries. Values stay text (the config coerces and
    checks them); an unknown option or a missing value is a ConfigError."""
    spellings: dict[str, tuple[type, dataclasses.Field, bool]] = {}
    for owner, f in flat_fields(cls):
        if not f.metadata.get("cli", True) or not flag_of(f).startswith("--"):
            continue
        for name in (flag_of(f), f.metadata.get("short")):
            if name:
                spellings[name] = (owner, f, True)
        if field_type(owner, f)[0] is bool:
            spellings[f.metadata.get("negative") or "--no-" + flag_of(f)[2:]] = (owner, f, False)
    out: dict[str, Any] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, text = arg.partition("=")
        if name not in spellings:
            raise ConfigError(f"{arg}: no such option")
        owner, f, on = spellings[name]
        if field_type(owner, f)[0] is bool:
            if eq:
                raise ConfigError(f"{name} is a switch: write {name} or its off switch, without a value")
            out[f.name] = on
            continue
        if not eq:
            if not args:
                raise ConfigError(f"{name} needs a value")
            text = args.pop(0)
        out[f.name] = text
    return out
