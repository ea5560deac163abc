"""Checks made before a run exists: every reference a config makes (models, adapters,
strategies, other runs) must name something usable. Each refusal is one ConfigError
line naming the option and the fix; the CLI, the console and `python -m
lactchain.jobs` share them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from lactchain.config import ConfigError


def check_models(actor: str | None = None, critic: str | None = None) -> None:
    """An unknown or wrong-kind --actor/--critic."""
    from lactchain.models.presets import ACTOR, CRITIC, check_spec

    for spec, role in ((actor, ACTOR), (critic, CRITIC)):
        if spec is not None:
            try:
                check_spec(spec, role)
            except ValueError as exc:
                raise ConfigError(f"--{role} {spec}: {exc}" if spec not in str(exc) else str(exc)) from None


def run_of_kind(registry: Any, option: str, spec: str, kinds: tuple[str, ...] = (), what: str = "") -> dict[str, Any]:
    """The run an option names: no such run, or a run of another kind, is refused
    (`what` words the expected kind, e.g. 'a judge run')."""
    from lactchain.runs.registry import RunNotFound

    try:
        run = registry.get_run(spec)
    except RunNotFound as exc:
        raise ConfigError(f"{option} {spec}: {exc}") from None
    if kinds and run["kind"] not in kinds:
        raise ConfigError(f"{option} {spec}: run {run['id']} is a {run['kind']} run; expected "
                          f"{what or ' or '.join(kinds)}")
    return run


def resolve_adapter(registry: Any, spec: str | None, base: str | None = None) -> str | None:
    """An adapter folder from a path, or from a run id's latest `adapter` artifact, checked
    to load (and, given `base`, to have been trained on that actor) before any run exists."""
    from lactchain.artifact_checks import check_adapter

    if not spec:
        return None
    if Path(spec).is_dir():
        path = str(Path(spec))
    else:
        run = run_of_kind(registry, "--adapter", spec)
        art = registry.latest_artifact(run["id"], "adapter") or _saved_state_adapter(registry, run)
        if art is None:
            raise ConfigError(f"--adapter {spec}: not a folder, and run {run['id']} ({run['kind']}) has no saved "
                              f"adapter{_children_with_adapters(registry, run['id'])}")
        path = art["path"]
    try:
        check_adapter(path, base=base)
    except ValueError as exc:
        raise ConfigError(f"--adapter {spec}: {exc}") from None
    return path


def _saved_state_adapter(registry: Any, run: dict[str, Any]) -> dict[str, Any] | None:
    """A pipeline run made before pipelines named their adapter (an `adapter` artifact): the
    adapter its saved loop state goes on from, where that folder is still there."""
    if run["kind"] != "pipeline":
        return None
    from lactchain.loop.bookkeeping import load_state

    try:
        adapter = (load_state(registry, run["id"]) or {}).get("adapter")
    except ValueError:  # an unreadable state file: as if it named none
        return None
    return {"path": adapter} if adapter and Path(adapter).is_dir() else None


def _children_with_adapters(registry: Any, run_id: str, shown: int = 3) -> str:
    """"; its child runs that have one: ..." (a comparison's cells, a pipeline's phases), or ""."""
    have = [c["id"] for c in registry.list_runs(parent_id=run_id)
            if registry.latest_artifact(c["id"], "adapter") or _saved_state_adapter(registry, c)]
    if not have:
        return ""
    more = f" and {len(have) - shown} more" if len(have) > shown else ""
    return f"; child runs that have one: {', '.join(have[:shown])}{more} (lactchain runs list --parent {run_id})"


def check_references(registry: Any, params: Mapping[str, Any], kind: str | None = None) -> Any:
    """--adapter, --strategy, --resume-from, --critic-run, --episodes-from and
    --pairs-from must name something usable. Returns the resolved strategy (the env's
    built-in one when none is given)."""
    from lactchain.artifact_checks import check_critic_checkpoint
    from lactchain.strategy.strategies import StrategyError, resolve_strategy

    resolve_adapter(registry, params.get("adapter"), base=params.get("actor"))
    for spec in params.get("pairs_from") or []:
        run_of_kind(registry, "--pairs-from", spec)
    try:
        strategy = resolve_strategy(registry, params.get("strategy"), params.get("env"))
    except StrategyError as exc:
        raise ConfigError(str(exc)) from None
    resume = params.get("resume_from")
    if resume and kind and not Path(resume).is_dir():
        run_of_kind(registry, "--resume-from", resume, (kind,))
    if params.get("critic_run"):
        run = run_of_kind(registry, "--critic-run", params["critic_run"], ("critic",))
        checkpoint = registry.latest_artifact(run["id"], "critic")
        if checkpoint is None:
            raise ConfigError(f"--critic-run {params['critic_run']}: run {run['id']} has no critic checkpoint yet")
        try:
            check_critic_checkpoint(checkpoint["path"])
        except ValueError as exc:
            raise ConfigError(f"--critic-run {params['critic_run']}: {exc}") from None
    for spec in params.get("episodes_from") or []:
        run = run_of_kind(registry, "--episodes-from", spec, ("play", "eval", "rollout"))
        if not registry.counts(run["id"])["steps"]:
            raise ConfigError(f"--episodes-from {spec}: run {run['id']} has no stored steps; play some episodes first")
    return strategy


def check_adoptable(registry: Any, run_id: str, kind: str) -> None:
    """A job only adopts a SCHEDULED run of its kind (the row a detach, a resume or the
    console created for it); never a run that already ran."""
    from lactchain.runs.registry import RunNotFound

    try:
        run = registry.get_run(run_id)
    except RunNotFound:
        raise ConfigError(f"--run-id {run_id}: no such run; --run-id is set by --detach, leave it out to start "
                          "a new run") from None
    if run["id"] != run_id or run["status"] != "SCHEDULED" or run["kind"] != kind:
        raise ConfigError(f"--run-id {run_id}: run {run['id']} is a {run['status']} {run['kind']} run; only a "
                          f"SCHEDULED {kind} run can be adopted (leave --run-id out to start a new run)")
