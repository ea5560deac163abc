"""`lactchain collect` and `lactchain judge`: captioned episodes from classic policies,
and LLM (or rule) preferences between their captions, Motif-style."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from lactchain.cli.common import (
    DbOption,
    DetachOption,
    EnvOption,
    JsonOption,
    LineLog,
    RunIdOption,
    check_models,
    err_console,
    fail,
    open_registry,
    run_job,
)
from lactchain.cli.loop_cmd import _table

SeedOption = Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed of the episodes (hand i is dealt from seed and i).")]


def collect_cmd(
    ctx: typer.Context,
    policy: Annotated[str, typer.Option("--policy", help="random, optimal (the exact solver: an oracle, for reference) or q-learning (trained first on the env's reward).")] = "random",
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, max=10_000_000, help="Episodes to play and record.")] = 500,
    train_episodes: Annotated[int, typer.Option("--train-episodes", min=1, max=10_000_000, help="Training episodes for --policy q-learning.")] = 50_000,
    seed: SeedOption = 0,
    env: EnvOption = "blackjack",
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Play seeded episodes with a classic policy and record them with captions.

    Every episode keeps its seed, start state, moves, rewards and captions, so it
    replays exactly; the LLM actor's episodes come from `lactchain play --env ...`.
    These runs are what `lactchain judge --from` pairs up.
    """
    from lactchain.captions import POLICIES

    if policy not in POLICIES:
        raise typer.BadParameter(f"must be one of {', '.join(POLICIES)}", param_hint="--policy")
    if policy == "optimal":
        from lactchain.envs.catalog import make_env

        solver = make_env(env).solver()
        if solver is None or not hasattr(solver, "action"):
            fail(f"--policy optimal: {env} has no exact solver with one optimal move per state; use random or q-learning")
    params = dict(policy=policy, episodes=episodes, train_episodes=train_episodes, seed=seed, env=env)

    def body(handle) -> dict[str, Any]:
        from lactchain.captions import collect_episodes, make_policy
        from lactchain.envs.catalog import make_env

        game = make_env(env)
        line = LineLog()
        line(f"collect: {episodes} {env} episodes from the {policy} policy", force=True)
        if policy == "q-learning":
            line(f"training q-learning on {train_episodes} episodes", force=True)
        agent = make_policy(policy, game, seed=seed, train_episodes=train_episodes)

        def on_episode(i: int, ret: float, success: bool) -> None:  # noqa: ARG001
            line(f"episode {i + 1}/{episodes}", force=i + 1 == episodes)
            if (i + 1) % 100 == 0:
                handle.check_cancelled()

        result = collect_episodes(game, agent, episodes, seed=seed, registry=handle.registry, run_id=handle.run_id,
                                  on_episode=on_episode)
        handle.log_metrics({k: float(v) for k, v in result.items()})
        return {**result, "policy": agent.name}

    run_job(ctx, kind="collect", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"collect {env} {policy}", render=lambda r: _table(f"collect {r['run_id']}", r))


def _episode_runs(registry: Any, specs: list[str]) -> tuple[list[str], str]:
    """Run ids of --from (collect or play runs) and the env they share."""
    from lactchain.registry import RunNotFound

    ids, envs = [], set()
    for spec in specs:
        try:
            run = registry.get_run(spec)
        except RunNotFound as exc:
            fail(f"--from {spec}: {exc}")
        if run["kind"] not in ("collect", "play"):
            fail(f"--from {spec}: run {run['id']} is a {run['kind']} run; expected collect or play")
        ids.append(run["id"])
        envs.add(registry.params(run["id"]).get("env") or "grid")
    if len(envs) > 1:
        fail(f"--from: the runs are of different envs ({', '.join(sorted(envs))}); judge one env at a time")
    return ids, envs.pop()


def judge_cmd(
    ctx: typer.Context,
    from_runs: Annotated[list[str], typer.Option("--from", help="collect or play runs whose finished episodes are paired (repeat the option).")],
    judge: Annotated[str, typer.Option("--judge", help="'rule' (prefers the higher true return: the calibration reference) or an actor preset (tiny, smollm2-135m, ...) asked Motif's question.")] = "rule",
    pairs: Annotated[int, typer.Option("--pairs", min=1, max=1_000_000, help="Caption pairs to judge.")] = 200,
    pairing: Annotated[str, typer.Option("--pairing", help="'state': two episodes from the same start state (same dealt hand); 'random': any two.")] = "state",
    retries: Annotated[int, typer.Option("--retries", min=1, max=20, help="Tries per pair before it is recorded as unknown (never as a label).")] = 3,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, max=4096, help="Pairs per generate call.")] = 16,
    seed: SeedOption = 0,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Label pairs of captioned episodes with a judge, into the registry's pairs table.

    Each label keeps the judge (labeler `llm` with the model id, or `oracle` for the
    rule judge), the prompt version and the raw answer; an answer that does not parse
    after --retries tries is stored as skipped ('unknown'), never as a preference.
    Prints the judge's agreement with the true preference (the higher return).
    """
    from lactchain.judge import PAIRINGS

    if pairing not in PAIRINGS:
        raise typer.BadParameter(f"must be one of {', '.join(PAIRINGS)}", param_hint="--pairing")
    if judge != "rule":
        check_models(judge)  # an unknown or missing preset fails here, before a run exists
    registry = open_registry(db)
    run_ids, env = _episode_runs(registry, from_runs)
    if run_id is None:
        from lactchain.captions import captioned_episodes
        from lactchain.judge import pair_episodes

        try:
            pair_episodes(captioned_episodes(registry, run_ids), 1, pairing, seed)
        except ValueError as exc:
            fail(f"--from: {exc}")
    params = dict(from_runs=run_ids, judge=judge, pairs=pairs, pairing=pairing, retries=retries, seed=seed, env=env)

    def body(handle) -> dict[str, Any]:
        from lactchain.captions import captioned_episodes
        from lactchain.judge import JUDGE_PROMPT_VERSION, LLMJudge, RuleJudge, agreement, judge_in_batches, \
            label_rows, pair_episodes

        episodes = captioned_episodes(handle.registry, run_ids)
        chosen_pairs = pair_episodes(episodes, pairs, pairing, seed)
        if judge == "rule":
            judge_impl: Any = RuleJudge()
        else:
            from lactchain.cli.play_cmd import load_actor

            judge_impl = LLMJudge(load_actor(judge, None, handle.registry, quiet=as_json), retries=retries, seed=seed)
        line = LineLog()
        line(f"judge: {len(chosen_pairs)} pairs of {len(episodes)} {env} episodes, judge {judge_impl.name}, "
             f"pairing {pairing}", force=True)
        rows: list[dict[str, Any]] = []

        def on_batch(batch, start: int) -> None:
            new = label_rows(chosen_pairs[start:start + len(batch)], batch, judge_impl, env, JUDGE_PROMPT_VERSION)
            handle.registry.add_pairs(handle.run_id, new)  # every finished batch is kept if the job stops
            rows.extend(new)
            stats = agreement(rows)
            handle.log_metrics(stats, step=len(rows))
            line(f"pairs {len(rows)}/{len(chosen_pairs)}: agreement {stats['agreement']:.3f}, answered "
                 f"{stats['answered_rate']:.3f}", force=len(rows) == len(chosen_pairs))
            handle.check_cancelled()

        judge_in_batches(judge_impl, chosen_pairs, env, batch_size=batch_size, on_batch=on_batch)
        stats = agreement(rows)
        err_console.print(f"{stats['pairs']} pairs judged by {judge_impl.name}: agreement with the true preference "
                          f"{stats['agreement']:.3f}, answered {stats['answered_rate']:.3f}")
        return {**stats, "judge": judge_impl.name, "episodes": len(episodes)}

    run_job(ctx, kind="judge", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"judge {judge} {env}", render=lambda r: _table(f"judge {r['run_id']}", r))
