"""Motif-style LLM-judged rewards: `collect` captioned episodes from classic policies,
`judge` pairs of captions (an LLM or the rule judge), `train-reward` a Bradley-Terry
reward model on the labels, and `reward-agents`: Q-learning on that reward."""

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
    finite,
    open_registry,
    positive,
    run_job,
    run_of_kind,
)
from lactchain.cli.loop_cmd import result_table

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
            name=f"collect {env} {policy}", render=lambda r: result_table(f"collect {r['run_id']}", r))


def _episode_runs(registry: Any, specs: list[str]) -> tuple[list[str], str]:
    """Run ids of --from (collect or play runs) and the env they share."""
    ids, envs = [], set()
    for spec in specs:
        run = run_of_kind(registry, "--from", spec, ("collect", "play"))
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
    forced: Annotated[bool, typer.Option("--forced/--free", help="LLM judges: --free generates an answer and parses it (Motif); --forced takes the likeliest of '1', '2', 'tie' as the next token (always answers).")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, max=4096, help="Pairs per generate call.")] = 16,
    seed: SeedOption = 0,
    resume_from: Annotated[Optional[str], typer.Option("--resume-from", help="Continue this killed or failed judge run: the pairs its lineage already labelled are skipped (`lactchain runs resume RUN` passes it).")] = None,
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
    if resume_from is not None:
        _check_judge_resume(registry, resume_from, run_ids, judge, pairs, pairing, seed)
    params = dict(from_runs=run_ids, judge=judge, pairs=pairs, pairing=pairing, retries=retries, seed=seed, env=env,
                  forced=forced, resume_from=resume_from)

    def body(handle) -> dict[str, Any]:
        from lactchain.captions import captioned_episodes
        from lactchain.judge import JUDGE_PROMPT_VERSION, ForcedChoiceJudge, LLMJudge, RuleJudge, agreement, \
            judge_in_batches, label_rows, pair_episodes
        from lactchain.resume import lineage

        episodes = captioned_episodes(handle.registry, run_ids)
        chosen_pairs = pair_episodes(episodes, pairs, pairing, seed)
        skip = 0
        if resume_from is not None:  # the same pairs in the same order: skip those already labelled
            skip = sum(len(handle.registry.pairs(r["id"])) for r in lineage(handle.registry, resume_from))
        offset = skip
        if judge == "rule":
            judge_impl: Any = RuleJudge()
        else:
            from lactchain.cli.play_cmd import load_actor

            model = load_actor(judge, None, handle.registry, quiet=as_json)
            judge_impl = ForcedChoiceJudge(model) if forced else LLMJudge(model, retries=retries, seed=seed)
        line = LineLog()
        line(f"judge: {len(chosen_pairs)} pairs of {len(episodes)} {env} episodes, judge {judge_impl.name}, "
             f"pairing {pairing}", force=True)
        rows: list[dict[str, Any]] = []

        def on_batch(batch, start: int) -> None:
            start += offset
            new = label_rows(chosen_pairs[start:start + len(batch)], batch, judge_impl, env, JUDGE_PROMPT_VERSION)
            handle.registry.add_pairs(handle.run_id, new)  # every finished batch is kept if the job stops
            rows.extend(new)
            stats = agreement(rows)
            handle.log_metrics(stats, step=len(rows))
            line(f"pairs {offset + len(rows)}/{len(chosen_pairs)}: agreement {stats['agreement']:.3f}, answered "
                 f"{stats['answered_rate']:.3f}", force=offset + len(rows) == len(chosen_pairs))
            handle.check_cancelled()

        if skip:
            line(f"resuming {resume_from}: {skip} pairs already labelled", force=True)
        judge_in_batches(judge_impl, chosen_pairs[skip:], env, batch_size=batch_size, on_batch=on_batch)
        stats = agreement(rows)
        err_console.print(f"{stats['pairs']} pairs judged by {judge_impl.name}: agreement with the true preference "
                          f"{stats['agreement']:.3f}, answered {stats['answered_rate']:.3f}")
        return {**stats, "judge": judge_impl.name, "episodes": len(episodes)}

    run_job(ctx, kind="judge", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"judge {judge} {env}", render=lambda r: result_table(f"judge {r['run_id']}", r))


def _check_judge_resume(registry: Any, spec: str, run_ids: list[str], judge: str, pairs: int, pairing: str,
                        seed: int) -> None:
    """A judge resume must pair the same episodes the same way, or it would skip other pairs."""
    old = run_of_kind(registry, "--resume-from", spec, ("judge",), "a judge run")
    before = registry.params(old["id"])
    now = {"from_runs": run_ids, "judge": judge, "pairs": pairs, "pairing": pairing, "seed": seed}
    differ = [k for k, v in now.items() if before.get(k) != v]
    if differ:
        fail(f"--resume-from {spec}: {', '.join(differ)} differ from that run's; resume with the same options")


def _judge_runs(registry: Any, specs: list[str]) -> tuple[list[str], list[str], str]:
    """Judge run ids (with the runs each resumed), the episode runs they paired, and their env."""
    from lactchain.resume import lineage

    ids, sources, envs = [], [], set()
    for spec in specs:
        run = run_of_kind(registry, "--pairs-from", spec, ("judge",), "a judge run")
        params = registry.params(run["id"])
        ids.extend(r["id"] for r in lineage(registry, run["id"]) if r["id"] not in ids)
        sources.extend(s for s in params.get("from_runs") or [] if s not in sources)
        envs.add(params.get("env") or "grid")
    if len(envs) > 1:
        fail(f"--pairs-from: the judge runs are of different envs ({', '.join(sorted(envs))})")
    return ids, sources, envs.pop()


def train_reward_cmd(
    ctx: typer.Context,
    pairs_from: Annotated[list[str], typer.Option("--pairs-from", help="judge runs whose labels train the model (repeat the option).")],
    critic: Annotated[str, typer.Option("--critic", help="Embedding backbone: a critic preset (tiny, minilm-l6, ...); frozen, with a trained head.")] = "minilm-l6",
    epochs: Annotated[int, typer.Option("--epochs", min=1, max=10_000)] = 40,
    lr: Annotated[float, typer.Option("--lr", callback=positive, help="Learning rate of the head.")] = 1e-3,
    held_out: Annotated[float, typer.Option("--held-out", callback=finite, min=0.0, max=0.9, help="Share of pairs held out for accuracy.")] = 0.2,
    seed: SeedOption = 0,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Fit a Bradley-Terry reward model r(caption) on judged caption pairs.

    Ties are soft 0.5 labels; unknown answers are never used. Reports held-out label
    accuracy and the Spearman correlation of r with the true return over every
    episode caption of the judged runs.
    """
    registry = open_registry(db)
    judge_ids, sources, env = _judge_runs(registry, pairs_from)
    from lactchain.train.reward_model import labelled_pairs

    usable = labelled_pairs(registry.pairs(judge_ids))
    if len(usable) < 2:
        fail(f"--pairs-from: {len(usable)} usable label(s) in {', '.join(judge_ids)} (unknown answers are not "
             "labels): judge more pairs, or with a judge that answers")
    params = dict(pairs_from=judge_ids, critic=critic, epochs=epochs, lr=lr, held_out=held_out, seed=seed, env=env)

    def body(handle) -> dict[str, Any]:
        from lactchain.captions import captioned_episodes
        from lactchain.train.reward_model import RewardModel, caption_report, train_reward_model

        pairs = labelled_pairs(handle.registry.pairs(judge_ids))
        line = LineLog()
        line(f"train-reward: {len(pairs)} judged pairs, backbone {critic}", force=True)
        with err_console.status(f"loading {critic}"):
            model = RewardModel(critic)

        def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
            handle.log_metrics(metrics, step=epoch)
            line(f"epoch {epoch}/{epochs}: loss {metrics['loss']:.4f}, held-out accuracy "
                 f"{metrics['held_out_accuracy']:.3f}", force=epoch == epochs)

        result = train_reward_model(model, pairs, epochs=epochs, lr=lr, held_out=held_out, seed=seed,
                                    on_epoch=on_epoch, should_stop=handle.cancelled.is_set)
        episodes = {e.caption: e.true_return for e in captioned_episodes(handle.registry, sources)}
        report = caption_report(model, list(episodes), list(episodes.values()))
        result["rank_correlation"] = report["rank_correlation"]
        folder = model.save(handle.dir / "reward_model", {"score_mean": report["score_mean"],
                                                          "score_std": report["score_std"], "env": env})
        handle.registry.add_artifact(handle.run_id, "reward-model", str(folder), meta={"pairs": len(pairs)})
        handle.log_metrics({"rank_correlation": result["rank_correlation"]})
        return {**result, "reward_model": str(folder)}

    run_job(ctx, kind="reward", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"reward {critic} {env}", render=lambda r: result_table(f"train-reward {r['run_id']}", r))


def reward_agents_cmd(
    ctx: typer.Context,
    reward_run: Annotated[Optional[str], typer.Option("--reward-run", help="train-reward run whose model gives the intrinsic reward; without it, only the extrinsic agent is trained.")] = None,
    train_episodes: Annotated[int, typer.Option("--train-episodes", min=1, max=100_000_000)] = 100_000,
    eval_episodes: Annotated[int, typer.Option("--eval-episodes", min=1, max=100_000_000, help="Seeded hands every agent is scored on (the same for all).")] = 100_000,
    intrinsic_coef: Annotated[float, typer.Option("--intrinsic-coef", callback=finite, help="Weight of the standardised reward-model score.")] = 1.0,
    extrinsic_coef: Annotated[float, typer.Option("--extrinsic-coef", callback=finite, help="Weight of the env's reward in the mixed agent.")] = 1.0,
    seed: SeedOption = 0,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Train tabular Q-learning on Blackjack with the env's reward (extrinsic), the
    reward model's (intrinsic) and a mix, and score each against the exact optimum
    (oracle) and random play on the same seeded hands."""
    registry = open_registry(db)
    folder, env = None, "blackjack"
    if reward_run is not None:
        run = run_of_kind(registry, "--reward-run", reward_run)
        art = registry.latest_artifact(run["id"], "reward-model")
        if run["kind"] != "reward" or art is None:
            fail(f"--reward-run {reward_run}: run {run['id']} ({run['kind']}) has no saved reward model; give a "
                 "finished train-reward run")
        folder, env = art["path"], registry.params(run["id"]).get("env") or "blackjack"
    if env != "blackjack":
        fail(f"--reward-run {reward_run}: its env is {env}; the tabular agents play blackjack")
    params = dict(reward_run=reward_run, train_episodes=train_episodes, eval_episodes=eval_episodes,
                  intrinsic_coef=intrinsic_coef, extrinsic_coef=extrinsic_coef, seed=seed, env=env)

    def body(handle) -> dict[str, Any]:
        from lactchain.envs.catalog import make_env
        from lactchain.motif import AGENT_REWARDS, CaptionReward, train_and_score_agents
        from lactchain.train.reward_model import RewardModel

        intrinsic = None
        if folder is not None:
            model = RewardModel.load(folder)
            intrinsic = CaptionReward(model, model.config["score_mean"], model.config["score_std"])
        kinds = AGENT_REWARDS if intrinsic is not None else ("extrinsic",)
        line = LineLog()
        line(f"reward-agents: {', '.join(kinds)} on {train_episodes} hands each, scored on {eval_episodes}", force=True)

        def on_agent(kind: str, score: dict[str, float]) -> None:
            handle.log_metrics({f"{kind}_win_rate": score["win_rate"], f"{kind}_mean_return": score["mean_return"]})
            line(f"{kind}: win rate {score['win_rate']:.4f}, mean return {score['mean_return']:.4f}", force=True)
            handle.check_cancelled()

        def on_progress(kind: str, done: int) -> None:
            line(f"{kind}: trained on {done}/{train_episodes} hands", force=done == train_episodes)
            handle.check_cancelled()

        result = train_and_score_agents(make_env(env), intrinsic, train_episodes=train_episodes,
                                        eval_episodes=eval_episodes, seed=seed, kinds=kinds,
                                        intrinsic_coef=intrinsic_coef, extrinsic_coef=extrinsic_coef,
                                        on_agent=on_agent, on_progress=on_progress)
        for name, score in result["agents"].items():  # the references (the agents were logged as they finished)
            if name not in kinds:
                handle.log_metrics({f"{name.split(' ')[0]}_win_rate": score["win_rate"]})
        return result

    def render(result: dict[str, Any]) -> None:
        from rich.table import Table

        from lactchain.cli.common import console

        table = Table(title=f"reward-agents {result['run_id']} ({result['eval_episodes']} seeded hands)")
        for column in ("agent", "win rate", "mean return", "draws"):
            table.add_column(column)
        for name, score in result["agents"].items():
            table.add_row(name, f"{score['win_rate']:.4f}", f"{score['mean_return']:+.4f}", f"{score['draw_rate']:.4f}")
        console.print(table)

    run_job(ctx, kind="agents", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name="reward-agents", render=render)
