"""One leaderboard per env: every agent the registry knows, on the same start states.

Rows, all greedy from every start state of the env (the grid's 60 poses, Blackjack's
270 deals), seeded alike:
- `random` and the `optimum` (the env's exact solver: an oracle, the upper bound), played now;
- classic agents: each finished `baseline` run's own evaluation (`lactchain baselines train`);
- LLM actors: each finished `eval` run over all start states (`lactchain evaluate`, and the
  evaluations inside `pipeline` runs), zero-shot or named by the loss that trained their
  adapter; a pipeline's env steps: the critic's random transitions plus every candidate
  its collects executed and every action GRPO's rollouts executed.
Columns: success, mean return, optimal-move ratio (shortest / used moves, where the env
has shortest paths), the exact expected return of the greedy answers (where the solver
values a whole policy: Blackjack), and the env steps spent on training.
"""

from __future__ import annotations

import re
from typing import Any

from lactchain.baselines.agent import RandomAgent, SolverAgent
from lactchain.baselines.protocol import (  # noqa: F401  (re-exported: the leaderboard's protocol)
    classic_env,
    evaluate_agent,
    greedy_policy_return,
)
from lactchain.envs.catalog import DEFAULT_ENV, env_class, env_name
from lactchain.envs.world import STATE_TEXT_DEFAULT
from lactchain.runs.resume import lineage

# (column title, row key): the CLI's table and the console's Board tab.
COLUMNS = (("agent", "agent"), ("success", "success_rate"), ("mean return", "mean_return"),
           ("optimal ratio", "mean_optimal_ratio"), ("exact E(return)", "greedy_expected_return"),
           ("train env steps", "train_env_steps"), ("actions", "max_actions"), ("run", "run_id"),
           ("evals", "evaluations"))
MEASURED = ("success_rate", "mean_return", "mean_optimal_ratio", "greedy_expected_return", "states")


def _row(agent: str, kind: str, metrics: dict[str, Any], run_id: str | None, train_env_steps: Any,
         max_actions: Any, source: str = "") -> dict[str, Any]:
    return {"agent": agent, "kind": kind, "run_id": run_id, "source": source, "evaluations": None,
            "success_rate": metrics.get("success_rate"), "mean_return": metrics.get("mean_return"),
            "mean_optimal_ratio": metrics.get("mean_optimal_ratio"),
            "greedy_expected_return": metrics.get("greedy_expected_return"),
            "train_env_steps": train_env_steps, "max_actions": max_actions, "states": metrics.get("states")}


def _llm_label(registry: Any, params: dict[str, Any], parent: dict[str, Any] | None) -> str:
    """The actor, zero-shot or with the loss that trained its adapter (one board compares
    methods), and the state text it read where not the default (the same world read as
    coordinates is another agent)."""
    actor = params.get("actor") or (parent or {}).get("actor") or "?"
    if params.get("adapter"):
        # the adapter's own record first: a pipeline's iteration 0 plays the --adapter it started from
        loss = _adapter_loss(registry, str(params["adapter"])) or (parent or {}).get("loss")
        label = f"{actor} + {loss} adapter" if loss else f"{actor} + adapter"
    else:
        label = f"{actor} zero-shot"
    text = params.get("state_text") or (parent or {}).get("state_text")
    return f"{label} ({text} text)" if text and text != STATE_TEXT_DEFAULT else label


def _adapter_loss(registry: Any, adapter: str) -> str | None:
    """The loss an adapter was trained with, from its folder's lab metadata (`adapter`: a
    folder, or a run id whose newest adapter it is); None where nothing says."""
    import json
    from pathlib import Path

    from lactchain.artifact_checks import ADAPTER_META
    from lactchain.runs.adapters import adapter_path

    folder = adapter_path(registry, adapter)
    if folder is None:
        return None
    try:
        loss = json.loads((Path(folder) / ADAPTER_META).read_text(encoding="utf-8")).get("loss")
    except (OSError, ValueError, AttributeError):
        return None
    return loss if isinstance(loss, str) and loss else None


def _lineage_history(registry: Any, runs: list[str], key: str) -> dict[int, float]:
    """A pipeline's metric by iteration over its resume lineage (`runs`, newest first: a
    resumed pipeline logs only the phases it ran, the ones it kept are on the runs it went
    on from); a phase redone later counts once, as the later run logged it."""
    by_step: dict[int, float] = {}
    for run_id in reversed(runs):  # oldest first: a later run's iteration replaces an earlier's
        mine: dict[int, float] = {}
        for m in registry.metric_history(run_id, key):
            if m["step"] is not None and m["value"] is not None:
                mine[m["step"]] = mine.get(m["step"], 0.0) + m["value"]
        by_step.update(mine)
    return by_step


def _loop_env_steps(registry: Any, run: dict[str, Any], parent: dict[str, Any]) -> int | None:
    """Env steps a pipeline spent before this evaluation: the critic's random transitions
    (iteration 0) plus every candidate executed in the collects so far and every action
    GRPO's rollouts executed (x deals: GRPO rewarded by the env has no collect at all),
    over the runs a resumed pipeline went on from too."""
    match = re.search(r"iteration (\d+)", run.get("name") or "")
    if match is None:
        return None
    iteration = int(match.group(1))
    if iteration == 0:  # the baseline evaluation: nothing learnt yet
        return 0
    runs = [r["id"] for r in lineage(registry, run["parent_id"])]  # the pipeline, then the runs it resumed
    candidates = sum(value for key in ("collect/candidates", "train-actor/samples_scored")
                     for step, value in _lineage_history(registry, runs, key).items() if step <= iteration)
    deals = int(parent.get("deals") or 1) if env_class(parent.get("env") or DEFAULT_ENV).stochastic else 1
    random_lists = _lineage_history(registry, runs, "train-critic/transitions").get(0, 0)
    return int(random_lists + candidates * deals)


def leaderboard(registry: Any, env: str) -> list[dict[str, Any]]:
    """The rows for `env`, best mean return first (the optimum's row is the reference)."""
    name = env_name(env)
    table = classic_env(name)
    rows: list[dict[str, Any]] = []
    for run in registry.list_runs(kind="baseline", status="FINISHED"):
        params = registry.params(run["id"])
        if params.get("env", DEFAULT_ENV) != name or params.get("agent") in (None, "random"):  # random: the reference row
            continue
        m = registry.latest_metrics(run["id"])
        metrics = {k.removeprefix("eval/"): v for k, v in m.items() if k.startswith("eval/")}
        steps = m.get("train/env_steps")
        rows.append(_row(params["agent"], "classic", metrics, run["id"], None if steps is None else int(steps),
                         table.max_actions, run.get("name") or ""))
    for run in registry.list_runs(kind="eval", status="FINISHED"):
        params = registry.params(run["id"])
        parent = registry.params(run["parent_id"]) if run.get("parent_id") else None
        if (params.get("env") or (parent or {}).get("env") or DEFAULT_ENV) != name or str(params.get("states")) != "all":
            continue
        # another grid: its own start states and optimum (a pipeline's evaluations record it on the pipeline)
        if (params.get("scene") or (parent or {}).get("scene")) not in (None, "empty"):
            continue
        metrics = registry.latest_metrics(run["id"])
        label = _llm_label(registry, params, parent)
        source = f"{run.get('name') or ''} of {run['parent_id']}" if run.get("parent_id") else (run.get("name") or "")
        steps = _loop_env_steps(registry, run, parent) if parent is not None else None
        rows.append(_row(label, "llm", metrics, run["id"], steps,
                         params.get("max_actions") or (parent or {}).get("eval_max_actions"), source))
    rows = _merge_repeats(rows)
    if not rows:
        raise ValueError(f"no agents evaluated on {name} in this registry: train one with "
                         f"`lactchain baselines train --env {name}` or evaluate an actor with "
                         f"`lactchain evaluate --env {name}`")
    rows.append(_row("random", "reference", evaluate_agent(table, RandomAgent(table.moves)), None, 0,
                     table.max_actions))
    rows.append(_row("optimum (oracle)", "reference", evaluate_agent(table, SolverAgent(table)), None,
                     None, table.max_actions))
    return sorted(rows, key=_rank, reverse=True)


def _merge_repeats(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row for an untrained actor measured again and again with the same numbers (every
    pipeline's baseline evaluation: the same greedy answers), counting its evaluations;
    trained actors stay a row each, however alike."""
    kept: dict[tuple[Any, ...], dict[str, Any]] = {}
    out = []
    for row in rows:
        zero_shot = row["kind"] == "llm" and "zero-shot" in row["agent"] and not row["train_env_steps"]
        key = (row["agent"], row["max_actions"], *(row.get(k) for k in MEASURED))
        if zero_shot and key in kept:
            kept[key]["evaluations"] += 1
            continue
        if row["kind"] == "llm":
            row["evaluations"] = 1
            if zero_shot:
                kept[key] = row
        out.append(row)
    return out


def _rank(row: dict[str, Any]) -> float:
    """The exact expected return where measured, else the mean return (a missing one last)."""
    for key in ("greedy_expected_return", "mean_return"):
        if row.get(key) is not None:
            return float(row[key])
    return float("-inf")


def format_cell(value: Any) -> str:
    """A leaderboard value as the tables show it ('—' where not measured)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3f}"
    return str(value)
