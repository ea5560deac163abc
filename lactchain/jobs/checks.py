"""Checks made before a run exists: every reference a config makes (models, adapters,
strategies, other runs) must name something usable. Each refusal is one ConfigError
line naming the option and the fix; the CLI, the console and `python -m
lactchain.jobs` share them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from lactchain.config import ConfigError
from lactchain.envs.catalog import DEFAULT_ENV, env_class, env_name
from lactchain.envs.scenes import get_scene
from lactchain.runs.adapters import run_adapter


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

    if spec is None:
        return None
    if not spec.strip():  # `--adapter ''` (an unset shell variable) must not mean the base model
        raise ConfigError("--adapter is empty: give a value, or leave --adapter out for its default")
    folder = Path(spec).expanduser()
    pathlike = "/" in spec or os.sep in spec or spec.startswith((".", "~"))
    if folder.is_dir() and (pathlike or (folder / "adapter_config.json").exists() or not _has_run(registry, spec)):
        path: str | None = str(folder)  # a folder named like a run id (an export here) does not hide the run
    elif pathlike or folder.is_file():
        raise ConfigError(f"--adapter {spec}: {'not a folder' if folder.exists() else 'no such folder'}; give an "
                          "adapter folder (holding adapter_config.json) or a run id")
    else:
        run = run_of_kind(registry, "--adapter", spec)
        path = run_adapter(registry, run)
        if path is None:
            raise ConfigError(f"--adapter {spec}: not a folder, and run {run['id']} ({run['kind']}) has no saved "
                              f"adapter{_children_with_adapters(registry, run['id'])}")
    try:
        check_adapter(path, base=base)
    except ValueError as exc:
        raise ConfigError(f"--adapter {spec}: {exc}") from None
    return path


def _has_run(registry: Any, spec: str) -> bool:
    from lactchain.runs.registry import RunNotFound

    if registry is None:
        return False
    try:
        registry.get_run(spec)
    except RunNotFound:
        return False
    return True


def adapter_world(registry: Any, spec: str | None) -> tuple[str, dict[str, str]] | None:
    """(run id, world) of the run whose actor learned the adapter `spec` names (a run id, or
    a folder under the runs folder): the run's own world, else the nearest ancestor's (a
    pipeline's train-actor phase), else its --pairs-from / --rollouts-from runs' when they
    agree. None where no run says (a folder from elsewhere, a deleted run)."""
    from lactchain.envs.world import recorded_world
    from lactchain.runs.delete import run_of_folder

    if not spec:
        return None
    folder = Path(spec).is_dir()
    run_id = run_of_folder(registry, Path(spec)) if folder else spec
    seen: set[str] = set()
    while run_id and run_id not in seen:
        seen.add(run_id)
        try:
            run = registry.get_run(run_id)
        except (KeyError, ValueError):  # a deleted run, an ambiguous prefix: nothing to say
            return None
        if folder and run["id"] != run_id:  # runs/actor/x is no run's folder, though `actor` prefixes one id
            return None
        params = registry.params(run["id"])
        world = recorded_world(params) or sources_world(registry, params)
        if world is not None:
            return run["id"], world
        run_id = run.get("parent_id")
    return None


LEARNS_ON = "this run learns on"  # a train-actor run's world: its sources', which no option of its own changes


def sources_world(registry: Any, params: Mapping[str, Any]) -> dict[str, str] | None:
    """The world a run that played no env of its own learned from: its --pairs-from or
    --rollouts-from runs' world, when they all agree (None otherwise)."""
    from lactchain.envs.world import recorded_world, same_world

    sources = [recorded_world(_params_or_empty(registry, s))
               for s in params.get("pairs_from") or params.get("rollouts_from") or []]
    if sources and sources[0] is not None and all(w is not None and same_world(w, sources[0]) for w in sources):
        return sources[0]
    return None


def world_note(registry: Any, adapter: str | None, world: dict[str, str], here: str = "this run plays") -> str:
    """One line when the adapter's actor learned in another world than `world` (transfer is a
    fair experiment, but rarely the one meant): which world, and the options that play it
    (`here` words who plays `world`: a job, the console's Lab)."""
    from lactchain.envs.world import same_world, world_label

    found = adapter_world(registry, adapter)
    if found is None or same_world(found[1], world):
        return ""
    run_id, learned = found
    how = (f"{_world_options(learned, world)} to play where it learned" if here != LEARNS_ON else
           f"its --pairs-from / --rollouts-from runs played there; runs of {world_label(learned)} train where it "
           "learned")
    return (f"note: adapter {adapter} learned on {world_label(learned)} (run {run_id}); {here} "
            f"{world_label(world)}: {how}")


def run_notes(registry: Any, params: Mapping[str, Any]) -> list[str]:
    """What a run's start says about what it was given for another world than it plays: an
    adapter whose actor learned elsewhere, a strategy version written for another env (a
    resume goes on as it began: nothing said)."""
    from lactchain.envs.world import recorded_world

    world, here = recorded_world(params), "this run plays"
    if world is None:  # a train-actor run: the world of the runs it learns from
        world, here = sources_world(registry, params), LEARNS_ON
    if world is None or params.get("resume_from") or params.get("resume"):
        return []
    notes = [world_note(registry, str(params["adapter"]), world, here) if params.get("adapter") else ""]
    version = params.get("strategy_version")
    if isinstance(version, int) and not isinstance(version, bool):
        notes.append(strategy_note(registry, version, world["env"]))
    return [note for note in notes if note]


def strategy_note(registry: Any, version: int, env: str) -> str:
    """One line when strategy version `version` was written for another env than `env`."""
    from lactchain.strategy.strategies import search_worlds, version_env

    row = registry.get_prompt(version)
    written = version_env(row, search_worlds(registry, [row]), "") if row else ""
    if not written or written == env:
        return ""
    return (f"note: strategy version {version} was written for {written}; this run plays {env} "
            f"(`lactchain strategy versions` names each version's env)")


def _world_options(learned: Mapping[str, str], world: Mapping[str, str]) -> str:
    """'pass --env grid --scene flat', '... without --scene': the options that turn `world`
    into `learned` (a default the learned world leaves out is named where `world` differs)."""
    from lactchain.envs.world import STATE_TEXT_DEFAULT

    options = [f"--env {learned['env']}"] + ([f"--scene {learned['scene']}"] if learned.get("scene") else [])
    text = learned.get("state_text", STATE_TEXT_DEFAULT)
    if text != world.get("state_text", STATE_TEXT_DEFAULT):
        options.append(f"--state-text {text}")
    without = " without --scene" if world.get("scene") and not learned.get("scene") else ""
    return f"pass {' '.join(options)}{without}"


def _params_or_empty(registry: Any, run_id: str) -> dict[str, Any]:
    try:
        return registry.params(registry.resolve_run_id(run_id))
    except (KeyError, ValueError):
        return {}


def _children_with_adapters(registry: Any, run_id: str, shown: int = 3) -> str:
    """"; its child runs that have one: ..." (a comparison's cells, a pipeline's phases), or ""."""
    have = [c["id"] for c in registry.list_runs(parent_id=run_id) if run_adapter(registry, c)]
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
        if params.get("env"):
            check_critic_world(params["critic_run"], checkpoint["path"], params["env"], params.get("scene"))
    for spec in params.get("episodes_from") or []:
        run = run_of_kind(registry, "--episodes-from", spec, ("play", "eval", "rollout"))
        if not registry.counts(run["id"])["steps"]:
            raise ConfigError(f"--episodes-from {spec}: run {run['id']} has no stored steps; play some episodes first")
    return strategy


def check_critic_world(spec: str, folder: str | Path, env: str, scene: Any = None) -> None:
    """A critic values the world it learned: its env and, where the env has scenes, its
    scene (critic.json says which; checked by `check_critic_checkpoint` first)."""
    from lactchain.models.critic import CONFIG_NAME
    from lactchain.runs.files import read_json_object

    saved = read_json_object(Path(folder) / CONFIG_NAME, "critic checkpoint")
    learnt = env_name(saved.get("env") or DEFAULT_ENV)  # critics saved before the env seam are grid critics
    if learnt != env_name(env):
        raise ConfigError(f"--critic-run {spec}: it trained a critic for {learnt}, not {env}; train one with "
                          f"`lactchain train-critic --env {env}`")
    if getattr(env_class(env), "has_scenes", False):
        learnt_scene = get_scene((saved.get("env_kwargs") or {}).get("scene")).name
        here = get_scene(scene).name
        if learnt_scene != here:
            raise ConfigError(f"--critic-run {spec}: it learnt scene {learnt_scene}, not {here}; pass --scene "
                              f"{learnt_scene} or train a critic on this scene")


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
