"""Motif-style LLM-judged rewards as jobs: `collect` captioned episodes from classic
policies, `judge` pairs of captions (an LLM or the rule judge), `train-reward` a
Bradley-Terry reward model on the labels, `reward-agents`: Q-learning on that reward."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lactchain.config import SEED_MAX, Config, ConfigError, option
from lactchain.engine import EngineConfig
from lactchain.envs.catalog import DEFAULT_ENV, env_field, make_env, normalize_env_field
from lactchain.jobs.checks import check_models, run_of_kind
from lactchain.jobs.engine import load_actor
from lactchain.jobs.output import LineLog, err_console
from lactchain.jobs.spec import Job
from lactchain.machine import resolve_dtype

SEED_HELP = "Seed of the episodes (hand i is dealt from seed and i)."


def policy_choices() -> tuple[str, ...]:
    from lactchain.motif.captions import POLICIES

    return tuple(POLICIES)


@dataclass
class CollectConfig(Config):
    policy: str = option("random", "random, optimal (the exact solver: an oracle, for reference) or q-learning "
                                   "(trained first on the env's reward).", choices=policy_choices, form="Policy")
    episodes: int = option(500, "Episodes to play and record.", short="-n", min=1, max=10_000_000, form="Episodes")
    train_episodes: int = option(50_000, "Training episodes for --policy q-learning.", min=1, max=10_000_000)
    seed: int = option(0, SEED_HELP, min=0, max=SEED_MAX)
    env: str = env_field("blackjack")

    def check(self) -> None:
        normalize_env_field(self)
        if self.policy == "optimal":
            solver = make_env(self.env).solver()
            if solver is None or not hasattr(solver, "action"):
                self.refuse("policy", f"{self.env} has no exact solver with one optimal move per state; use random "
                                      "or q-learning")


def run_collect(handle: Any, config: CollectConfig) -> dict[str, Any]:
    from lactchain.motif.captions import collect_episodes, make_policy

    env, episodes = config.env, config.episodes
    game = make_env(env)
    line = LineLog()
    line(f"collect: {episodes} {env} episodes from the {config.policy} policy", force=True)
    if config.policy == "q-learning":
        line(f"training q-learning on {config.train_episodes} episodes", force=True)
    agent = make_policy(config.policy, game, seed=config.seed, train_episodes=config.train_episodes)

    def on_episode(i: int, ret: float, success: bool) -> None:  # noqa: ARG001
        line(f"episode {i + 1}/{episodes}", force=i + 1 == episodes)
        if (i + 1) % 100 == 0:
            handle.check_cancelled()

    result = collect_episodes(game, agent, episodes, seed=config.seed, registry=handle.registry, run_id=handle.run_id,
                              on_episode=on_episode)
    handle.log_metrics({k: float(v) for k, v in result.items()})
    return {**result, "policy": agent.name}


def pairing_choices() -> tuple[str, ...]:
    from lactchain.motif.judge import PAIRINGS

    return tuple(PAIRINGS)


@dataclass
class JudgeConfig(Config):
    from_runs: list[str] = option([], "collect or play runs whose finished episodes are paired (repeat the option).",
                                  flag="--from", check="run:", form="Episode runs")
    judge: str = option("rule", "'rule' (prefers the higher true return: the calibration reference) or an actor "
                                "preset (tiny, smollm2-135m, ...) asked Motif's question.", form="Judge")
    pairs: int = option(200, "Caption pairs to judge.", min=1, max=1_000_000, form="Pairs")
    pairing: str = option("state", "'state': two episodes from the same start state (same dealt hand); 'random': "
                                   "any two.", choices=pairing_choices, form="Pairing")
    retries: int = option(3, "Tries per pair before it is recorded as unknown (never as a label).", min=1, max=20)
    forced: bool = option(False, "LLM judges: --free generates an answer and parses it (Motif); --forced takes the "
                                 "likeliest of '1', '2', 'tie' as the next token (always answers).", negative="--free")
    batch_size: int = option(16, "Pairs per generate call.", min=1, max=4096)
    seed: int = option(0, SEED_HELP, min=0, max=SEED_MAX)
    dtype: str | None = option(None, "LLM judges: the dtype it answers at: auto (the default: bfloat16 where this "
                                     "machine does bf16 natively, a CUDA GPU or a CPU with AMX or AVX512-bf16, else "
                                     "float32: as the loop's actors generate), bfloat16, float16 or float32 (the "
                                     "weights as loaded). The rule judge generates nothing.")
    resume_from: str | None = option(None, "Continue this killed or failed judge run: the pairs its lineage already "
                                           "labelled are skipped (`lactchain runs resume RUN` passes it).")
    env: str | None = option(None, "The env of the episode runs (found from them).", cli=False)

    def check(self) -> None:
        if not self.from_runs:
            self.refuse("from_runs", "give at least one collect or play run")
        if self.judge != "rule":
            try:  # recorded resolved: the run's params say which dtype answered
                self.dtype = resolve_dtype(self.dtype or "auto")
            except ValueError as exc:
                self.refuse("dtype", str(exc))
        elif self.dtype is not None:
            self.refuse("dtype", "only applies to an LLM judge (the rule judge generates nothing); leave it out")


def _prepare_judge(registry: Any, config: JudgeConfig) -> dict[str, Any]:
    """The episode runs resolved (one env), pairable, and a resume pairing the same way."""
    if config.judge != "rule":
        check_models(config.judge)
    ids, envs = [], set()
    for spec in config.from_runs:
        run = run_of_kind(registry, "--from", spec, ("collect", "play"))
        ids.append(run["id"])
        envs.add(registry.params(run["id"]).get("env") or DEFAULT_ENV)
    if len(envs) > 1:
        raise ConfigError(f"--from: the runs are of different envs ({', '.join(sorted(envs))}); judge one env at a "
                          "time")
    config.from_runs, config.env = ids, envs.pop()
    from lactchain.motif.captions import captioned_episodes
    from lactchain.motif.judge import pair_episodes

    try:
        pair_episodes(captioned_episodes(registry, ids), 1, config.pairing, config.seed)
    except ValueError as exc:
        raise ConfigError(f"--from: {exc}") from None
    if config.resume_from is not None:
        old = run_of_kind(registry, "--resume-from", config.resume_from, ("judge",), "a judge run")
        before = registry.params(old["id"])
        now = {"from_runs": ids, "judge": config.judge, "pairs": config.pairs, "pairing": config.pairing,
               "seed": config.seed}
        differ = [k for k, v in now.items() if before.get(k) != v]
        if differ:
            raise ConfigError(f"--resume-from {config.resume_from}: {', '.join(differ)} differ from that run's; "
                              "resume with the same options")
    return {"from_runs": ids, "env": config.env}


def run_judge(handle: Any, config: JudgeConfig) -> dict[str, Any]:
    from lactchain.motif.captions import captioned_episodes
    from lactchain.motif.judge import (JUDGE_PROMPT_VERSION, ForcedChoiceJudge, LLMJudge, RuleJudge, agreement,
                                       agreement_text, judge_in_batches, label_rows, pair_episodes)
    from lactchain.runs.resume import lineage

    env = config.env
    episodes = captioned_episodes(handle.registry, config.from_runs)
    chosen_pairs = pair_episodes(episodes, config.pairs, config.pairing, config.seed)
    skip = 0
    if config.resume_from is not None:  # the same pairs in the same order: skip those already labelled
        skip = sum(len(handle.registry.pairs(r["id"])) for r in lineage(handle.registry, config.resume_from))
    if config.judge == "rule":
        judge_impl: Any = RuleJudge()
    else:
        model = load_actor(config.judge, None, handle.registry, quiet=handle.quiet, handle=handle,
                           settings=EngineConfig(dtype=config.dtype))  # answers as the loop's actors generate
        judge_impl = ForcedChoiceJudge(model) if config.forced else LLMJudge(model, retries=config.retries,
                                                                             seed=config.seed)
    line = LineLog()
    line(f"judge: {len(chosen_pairs)} pairs of {len(episodes)} {env} episodes, judge {judge_impl.name}, "
         f"pairing {config.pairing}", force=True)
    rows: list[dict[str, Any]] = []

    def on_batch(batch: Any, start: int) -> None:
        start += skip
        new = label_rows(chosen_pairs[start:start + len(batch)], batch, judge_impl, env, JUDGE_PROMPT_VERSION)
        handle.registry.add_pairs(handle.run_id, new)  # every finished batch is kept if the job stops
        rows.extend(new)
        stats = agreement(rows)
        handle.log_metrics(stats, step=len(rows))
        line(f"pairs {skip + len(rows)}/{len(chosen_pairs)}: {agreement_text(stats)}",
             force=skip + len(rows) == len(chosen_pairs))
        handle.check_cancelled()

    if skip:
        line(f"resuming {config.resume_from}: {skip} pairs already labelled", force=True)
    judge_in_batches(judge_impl, chosen_pairs[skip:], env, batch_size=config.batch_size, on_batch=on_batch)
    stats = agreement(rows)
    err_console.print(f"{stats['pairs']} pairs judged by {judge_impl.name}, against the true preference: "
                      f"{agreement_text(stats)}")
    return {**stats, "judge": judge_impl.name, "episodes": len(episodes)}


@dataclass
class TrainRewardConfig(Config):
    pairs_from: list[str] = option([], "judge runs whose labels train the model (repeat the option).",
                                   check="run:judge", form="Judge runs")
    critic: str = option("minilm-l6", "Embedding backbone: a critic preset (tiny, minilm-l6, ...); frozen, with a "
                                      "trained head.", form="Critic")
    epochs: int = option(40, "Passes over the labelled pairs.", min=1, max=10_000, form="Epochs")
    lr: float = option(1e-3, "Learning rate of the head.", min=1e-12)
    held_out: float = option(0.2, "Share of pairs held out for accuracy.", min=0.0, max=0.9)
    seed: int = option(0, "Seed of the held-out split and the batch order.", min=0, max=SEED_MAX)
    env: str | None = option(None, "The env of the judged episodes (found from the judge runs).", cli=False)

    def check(self) -> None:
        if not self.pairs_from:
            self.refuse("pairs_from", "give at least one judge run")


def _prepare_reward(registry: Any, config: TrainRewardConfig) -> dict[str, Any]:
    """Judge run ids (with the runs each resumed), one env, and at least two usable labels."""
    from lactchain.runs.resume import lineage
    from lactchain.train.reward_model import labelled_pairs

    ids, envs = [], set()
    for spec in config.pairs_from:
        run = run_of_kind(registry, "--pairs-from", spec, ("judge",), "a judge run")
        ids.extend(r["id"] for r in lineage(registry, run["id"]) if r["id"] not in ids)
        envs.add(registry.params(run["id"]).get("env") or DEFAULT_ENV)
    if len(envs) > 1:
        raise ConfigError(f"--pairs-from: the judge runs are of different envs ({', '.join(sorted(envs))})")
    usable = labelled_pairs(registry.pairs(ids))
    if len(usable) < 2:
        raise ConfigError(f"--pairs-from: {len(usable)} usable label(s) in {', '.join(ids)} (unknown answers are not "
                          "labels): judge more pairs, or with a judge that answers")
    config.pairs_from, config.env = ids, envs.pop()
    return {"pairs_from": ids, "env": config.env}


def _judged_sources(registry: Any, judge_ids: list[str]) -> list[str]:
    sources: list[str] = []
    for rid in judge_ids:
        sources.extend(s for s in registry.params(rid).get("from_runs") or [] if s not in sources)
    return sources


def run_train_reward(handle: Any, config: TrainRewardConfig) -> dict[str, Any]:
    from lactchain.motif.captions import captioned_episodes
    from lactchain.train.reward_model import RewardModel, caption_report, labelled_pairs, train_reward_model

    pairs = labelled_pairs(handle.registry.pairs(config.pairs_from))
    line = LineLog()
    line(f"train-reward: {len(pairs)} judged pairs, backbone {config.critic}", force=True)
    with err_console.status(f"loading {config.critic}"):
        model = RewardModel(config.critic)

    def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
        handle.log_metrics(metrics, step=epoch)
        line(f"epoch {epoch}/{config.epochs}: loss {metrics['loss']:.4f}, held-out accuracy "
             f"{metrics['held_out_accuracy']:.3f}", force=epoch == config.epochs)

    result = train_reward_model(model, pairs, epochs=config.epochs, lr=config.lr, held_out=config.held_out,
                                seed=config.seed, on_epoch=on_epoch, should_stop=handle.cancelled.is_set)
    sources = _judged_sources(handle.registry, config.pairs_from)
    episodes = {e.caption: e.true_return for e in captioned_episodes(handle.registry, sources)}
    report = caption_report(model, list(episodes), list(episodes.values()))
    result["rank_correlation"] = report["rank_correlation"]
    folder = model.save(handle.dir / "reward_model", {"score_mean": report["score_mean"],
                                                      "score_std": report["score_std"], "env": config.env})
    handle.registry.add_artifact(handle.run_id, "reward-model", str(folder), meta={"pairs": len(pairs)})
    handle.log_metrics({"rank_correlation": result["rank_correlation"]})
    return {**result, "reward_model": str(folder)}


@dataclass
class RewardAgentsConfig(Config):
    reward_run: str | None = option(None, "train-reward run whose model gives the intrinsic reward; without it, only "
                                          "the extrinsic agent is trained.", check="run:reward", form="Reward run")
    train_episodes: int = option(100_000, "Training hands per agent.", min=1, max=100_000_000, form="Training hands")
    eval_episodes: int = option(100_000, "Seeded hands every agent is scored on (the same for all).", min=1,
                                max=100_000_000, form="Scored hands")
    intrinsic_coef: float = option(1.0, "Weight of the standardised reward-model score.")
    extrinsic_coef: float = option(1.0, "Weight of the env's reward in the mixed agent.")
    seed: int = option(0, SEED_HELP, min=0, max=SEED_MAX)
    agents: list[str] = option([], "An agent to train: extrinsic, intrinsic or mixed (repeat the option). Default: "
                                   "all three with --reward-run, else extrinsic.",
                               choices=("extrinsic", "intrinsic", "mixed"))  # lactchain.motif.agents.AGENT_REWARDS
    references: bool = option(True, "Also score the exact optimum (oracle) and random play on the same hands.",
                              negative="--no-references")
    env: str = option("blackjack", "The env the agents play (the reward run's).", cli=False)

    def check(self) -> None:
        if self.reward_run is None and set(self.agents) - {"extrinsic"}:
            self.refuse("agents", "intrinsic and mixed agents need the reward model of --reward-run")

    def kinds(self) -> tuple[str, ...]:
        if self.agents:
            return tuple(self.agents)
        return ("extrinsic", "intrinsic", "mixed") if self.reward_run else ("extrinsic",)


def _reward_folder(registry: Any, config: RewardAgentsConfig) -> str | None:
    if config.reward_run is None:
        return None
    run = run_of_kind(registry, "--reward-run", config.reward_run)
    art = registry.latest_artifact(run["id"], "reward-model")
    if run["kind"] != "reward" or art is None:
        raise ConfigError(f"--reward-run {config.reward_run}: run {run['id']} ({run['kind']}) has no saved reward "
                          "model; give a finished train-reward run")
    return art["path"]


def _prepare_agents(registry: Any, config: RewardAgentsConfig) -> dict[str, Any]:
    from lactchain.artifact_checks import check_reward_model

    folder = _reward_folder(registry, config)
    if folder is not None:
        try:
            check_reward_model(folder)
        except ValueError as exc:
            raise ConfigError(f"--reward-run {config.reward_run}: {exc}") from None
    if config.reward_run is not None:
        config.env = registry.params(registry.get_run(config.reward_run)["id"]).get("env") or "blackjack"

    if not hasattr(make_env(config.env).solver(), "win_rate"):
        raise ConfigError(f"--reward-run {config.reward_run}: its env is {config.env}; the reward agents are scored "
                          "by win rate against an exact solver (blackjack)")
    return {"env": config.env}


def run_reward_agents(handle: Any, config: RewardAgentsConfig) -> dict[str, Any]:
    from lactchain.motif.agents import CaptionReward, train_and_score_agents
    from lactchain.train.reward_model import RewardModel

    folder = _reward_folder(handle.registry, config)
    intrinsic = None
    if folder is not None:
        model = RewardModel.load(folder)
        intrinsic = CaptionReward(model, model.config["score_mean"], model.config["score_std"])
    kinds = config.kinds()
    line = LineLog()
    line(f"reward-agents: {', '.join(kinds)} on {config.train_episodes} hands each, scored on "
         f"{config.eval_episodes}", force=True)

    def on_agent(kind: str, score: dict[str, float]) -> None:
        handle.log_metrics({f"{kind}_win_rate": score["win_rate"], f"{kind}_mean_return": score["mean_return"]})
        line(f"{kind}: win rate {score['win_rate']:.4f}, mean return {score['mean_return']:.4f}", force=True)
        handle.check_cancelled()

    def on_progress(kind: str, done: int) -> None:
        line(f"{kind}: trained on {done}/{config.train_episodes} hands", force=done == config.train_episodes)
        handle.check_cancelled()

    result = train_and_score_agents(make_env(config.env), intrinsic, train_episodes=config.train_episodes,
                                    eval_episodes=config.eval_episodes, seed=config.seed, kinds=kinds,
                                    intrinsic_coef=config.intrinsic_coef, extrinsic_coef=config.extrinsic_coef,
                                    references=config.references, on_agent=on_agent, on_progress=on_progress)
    for name, score in result["agents"].items():  # the references (the agents were logged as they finished)
        if name not in kinds:
            handle.log_metrics({f"{name.split(' ')[0]}_win_rate": score["win_rate"]})
    return result


COLLECT = Job(kind="collect", command="collect", config=CollectConfig, run=run_collect,
              title="Collect captioned episodes", name=lambda c: f"collect {c.env} {c.policy}",
              doc="""Play seeded episodes with a classic policy and record them with captions.

    Every episode keeps its seed, start state, moves, rewards and captions, so it
    replays exactly; the LLM actor's episodes come from `lactchain play --env ...`.
    These runs are what `lactchain judge --from` pairs up.
    """)
JUDGE = Job(kind="judge", command="judge", config=JudgeConfig, run=run_judge, title="Judge caption pairs",
            name=lambda c: f"judge {c.judge} {c.env}", prepare=_prepare_judge, resume_field="resume_from",
            doc="""Label pairs of captioned episodes with a judge, into the registry's pairs table.

    Each label keeps the judge (labeler `llm` with the model id, or `oracle` for the
    rule judge), the prompt version and the raw answer; an answer that does not parse
    after --retries tries is stored as skipped ('unknown'), never as a preference.
    Prints the judge's agreement with the true preference (the higher return).
    """)
TRAIN_REWARD = Job(kind="reward", command="train-reward", config=TrainRewardConfig, run=run_train_reward,
                   title="Train reward model", name=lambda c: f"reward {c.critic} {c.env}", prepare=_prepare_reward,
                   doc="""Fit a Bradley-Terry reward model r(caption) on judged caption pairs.

    Ties are soft 0.5 labels; unknown answers are never used. Reports held-out label
    accuracy and the Spearman correlation of r with the true return over every
    episode caption of the judged runs.
    """)
REWARD_AGENTS = Job(kind="agents", command="reward-agents", config=RewardAgentsConfig, run=run_reward_agents,
                    title="Reward agents", name=lambda c: "reward-agents", prepare=_prepare_agents,
                    doc="""Train tabular Q-learning on Blackjack with the env's reward (extrinsic), the
    reward model's (intrinsic) and a mix, and score each against the exact optimum
    (oracle) and random play on the same seeded hands.""")
