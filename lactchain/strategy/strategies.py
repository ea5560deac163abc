"""Strategy prompts by name: a version saved in the registry, or a text file.

The strategy is the learnable part of the actor's prompt: the console's editor
saves versions in the registry's `prompts` table. Every command that renders
prompts takes `--strategy VERSION|FILE` and records what it used in the run's
params (`strategy`, `strategy_version`, `strategy_text`), so runs can be
compared by strategy and rerun exactly, whatever happens to the file later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lactchain.envs.catalog import DEFAULT_ENV, make_env
from lactchain.envs.world import recorded_world
from lactchain.prompts import DEFAULT_STRATEGY, PromptError, PromptSpec, validate_strategy

MAX_FILE_BYTES = 1_000_000


class StrategyError(ValueError):
    """A --strategy that names nothing usable (one line, with the fix)."""


@dataclass(frozen=True)
class Strategy:
    text: str
    version: int | None = None  # the registry's prompt version; None for a file or the default
    source: str = "default"  # "default", "version 3" or the file's path

    def params(self) -> dict[str, Any]:
        return {"strategy": self.source, "strategy_version": self.version, "strategy_text": self.text}

    @property
    def label(self) -> str:
        return f"v{self.version}" if self.version is not None else self.source

    def prompt(self, moves: Any, env: Any = None) -> Any:
        """The PromptSpec a job renders with this strategy, the actor's moves and the
        env's name for its observation (the grid's when no env is given)."""
        label = {"observation_label": env.observation_label} if env is not None else {}
        return PromptSpec(strategy=self.text, moves=tuple(moves), **label)


DEFAULT = Strategy(DEFAULT_STRATEGY)


def default_strategy(env: str | None = None) -> Strategy:
    """The built-in strategy of an env (short name or id; the grid's when None)."""
    if env is None:
        return DEFAULT

    return Strategy(make_env(env).default_strategy)


def resolve_strategy(registry: Any, spec: str | None, env: str | None = None) -> Strategy:
    """`None`/'default': the env's built-in strategy; a number: that saved version; else a text file."""
    if spec is None or not str(spec).strip() or str(spec).strip() == "default":
        return default_strategy(env)
    spec = str(spec).strip()
    try:
        if spec.isdigit():
            row = registry.get_prompt(int(spec))
            if row is None:
                latest = registry.get_prompt()
                saved = f"saved versions: 1-{latest['version']}" if latest else "none saved yet: the console's editor saves them"
                raise StrategyError(f"--strategy {spec}: no strategy version {spec} in {registry.path} ({saved})")
            return Strategy(validate_strategy(row["text"]), int(row["version"]), f"version {row['version']}")
        path = Path(spec).expanduser()
        if not path.is_file():
            raise StrategyError(f"--strategy {spec}: neither a saved version number nor a text file")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise StrategyError(f"--strategy {spec}: the file is {path.stat().st_size} bytes; a strategy is a few lines")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise StrategyError(f"--strategy {spec}: not a UTF-8 text file") from None
        return Strategy(validate_strategy(text), None, str(path))
    except PromptError as exc:
        raise StrategyError(f"--strategy {spec}: {exc}") from None


def evaluated_scores(registry: Any) -> dict[int, tuple[float, int]]:
    """Each saved version's newest finished `evaluate` score: version -> (success rate,
    start states scored), from the eval runs' recorded `strategy_version` (what the
    console's ctrl+o launches), so a version's score shows where its text is listed."""
    out: dict[int, tuple[float, int]] = {}
    for run_id, version in registry.param_values("strategy_version", kind="eval", status="FINISHED"):  # newest first
        if not isinstance(version, int) or isinstance(version, bool) or version in out:
            continue  # the first seen (newest) wins
        metrics = registry.latest_metrics(run_id) or {}
        rate, states = metrics.get("success_rate"), metrics.get("states") or metrics.get("episodes")
        if isinstance(rate, (int, float)):
            out[version] = (float(rate), int(states or 0))
    return out


def search_worlds(registry: Any, rows: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Where each search among `rows` scored its versions: run id -> its world (`world_params`'
    shape; `world_label` words it). Scores of different worlds do not compare."""
    worlds = {}
    for run_id in {r["run_id"] for r in rows if r.get("run_id")}:
        params = registry.params(run_id)
        if not params:  # the search run was deleted: its versions stay, their world unknown
            continue
        worlds[run_id] = recorded_world({**params, "env": params.get("env") or DEFAULT_ENV}) or {"env": DEFAULT_ENV}
    return worlds


def version_env(row: dict[str, Any], worlds: dict[str, dict[str, str]], default: str) -> str:
    """The env a strategy version was written for: as saved, else its search's (`worlds`),
    else `default` (a version saved before versions named their env: every env's)."""
    return row.get("env") or worlds.get(row.get("run_id") or "", {}).get("env") or default


def ranked_versions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Saved strategy versions for a list: hand-saved ones (no score) newest first, then a
    search's scored versions best first (ties: the newer)."""
    manual = sorted((r for r in rows if r.get("score") is None), key=lambda r: -r["version"])
    scored = sorted((r for r in rows if r.get("score") is not None), key=lambda r: (-r["score"], -r["version"]))
    return manual + scored
