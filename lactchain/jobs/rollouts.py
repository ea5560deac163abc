"""play and evaluate: the actor acting in an env, every step recorded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lactchain.config import SEED_MAX, Config, option
from lactchain.envs.catalog import DEFAULT_ENV, make_env
from lactchain.jobs.engine import EngineConfig, actor_for_job, precheck_engine, prepare_engine
from lactchain.jobs.output import JobProgress, LineLog, err_console, progress_bar
from lactchain.jobs.parts import ActorPart, SceneEnvPart, StrategyPart
from lactchain.jobs.spec import Job

CONSTRAINED_HELP = "Grammar-constrained move lists (default), or free text + lenient parsing."


@dataclass
class PlayConfig(Config):
    model: ActorPart = field(default_factory=ActorPart)
    episodes: int = option(8, "Episodes to play.", short="-n", min=1, max=10_000_000, form="Episodes")
    envs: int = option(8, "Envs stepped in lock-step (the generate batch size).", short="-b", min=1, max=4096)
    constrained: bool = option(True, CONSTRAINED_HELP, negative="--free")
    start: str = option("fixed", "Start state: 'fixed' (the grid's (0,0) east; Blackjack: the hand the seed deals) "
                                 "or 'random' (uniform over the env's start states).", choices=("fixed", "random"),
                        form="Start")
    temperature: float = option(0.0, "Sampling temperature; 0 = greedy.", short="-t", min=0.0)
    max_actions: int = option(10, "Actions per episode before truncation.", min=1, max=1000)
    seed: int = option(0, "Seed for start states and sampling.", min=0, max=SEED_MAX)
    engine: EngineConfig = field(default_factory=EngineConfig)
    strategy: StrategyPart = field(default_factory=StrategyPart)
    world: SceneEnvPart = field(default_factory=SceneEnvPart)


def run_play(handle: Any, config: PlayConfig) -> dict[str, Any]:
    """Play episodes with an LLM actor and record every step in the registry."""
    from lactchain.loop.rollout import RolloutConfig, run_rollouts
    from lactchain.strategy.strategies import resolve_strategy

    env, extra = config.world.env, config.world.env_kwargs()
    cfg = RolloutConfig(episodes=config.episodes, n_envs=config.envs, constrained=config.constrained,
                        temperature=config.temperature, start=config.start, seed=config.seed,
                        env_kwargs={"max_actions": config.max_actions, **extra}, env=env)
    text_env = make_env(env)
    won, lost = outcome_words(text_env)
    with actor_for_job(config.model.actor, config.model.adapter, handle, config.engine, quiet=handle.quiet,
                       env=env) as model, \
            progress_bar("play", handle.quiet) as bar:
        task = bar.add_task("episodes", total=config.episodes, stats="")
        wins = 0
        line = LineLog()

        def on_episode(ep: Any) -> None:
            nonlocal wins
            wins += ep.success
            done = bar.tasks[0].completed + 1
            bar.update(task, advance=1, stats=f"success {wins}/{done}")
            handle.log_metrics({"episode_return": ep.total_return, "episode_success": float(ep.success)}, step=ep.idx)
            line(f"episode {done}/{config.episodes}: return {ep.total_return:.2f}, "
                 f"{won if ep.success else lost}; success {wins}/{done}", force=done in (1, config.episodes))

        strat = resolve_strategy(handle.registry, config.strategy.strategy, env)
        line(f"play: {config.episodes} episodes of {env} on {config.envs} envs, strategy {strat.label}", force=True)
        progress = JobProgress(handle, "play", "episodes")
        summary = run_rollouts(model, cfg, prompt=strat.prompt(model.moves, text_env), registry=handle.registry,
                               run_id=handle.run_id, on_episode=on_episode, should_stop=handle.cancelled.is_set,
                               on_progress=progress.rollout)
    result = summary.as_dict()
    handle.log_metrics({k: v for k, v in result.items() if isinstance(v, (int, float))})
    return result


def outcome_words(env: Any) -> tuple[str, str]:
    """How an episode's end reads ('reached the goal' / 'won the hand'), from the env."""
    return tuple(env.outcome_words)  # type: ignore[return-value]


@dataclass
class EvaluateConfig(Config):
    model: ActorPart = field(default_factory=ActorPart)
    states: str = option("all", "'all' start states of the env (the grid's non-goal poses, Blackjack's 270 deals), "
                                "or a number to sample.", form="Start states")
    constrained: bool = option(True, CONSTRAINED_HELP, negative="--free")
    envs: int = option(64, "Batch size of lock-step envs (64: every 4x4 start state in one batch, as the loop's "
                           "evaluation; faster than 16 even on 2 CPU cores).", short="-b", min=1, max=4096)
    max_actions: int = option(10, "Actions per episode before truncation.", min=1, max=1000)
    seed: int = option(0, "Seed.", min=0, max=SEED_MAX)
    strategy: StrategyPart = field(default_factory=StrategyPart)
    world: SceneEnvPart = field(default_factory=SceneEnvPart)
    engine: EngineConfig = field(default_factory=EngineConfig)

    def check(self) -> None:
        text = str(self.states).strip()
        if text != "all" and not (text.isdigit() and 1 <= int(text) <= 100_000):
            self.refuse("states", "must be 'all' or a number of states from 1 to 100000")
        self.states = text


def run_evaluate(handle: Any, config: EvaluateConfig) -> dict[str, Any]:
    """Score an actor greedily from every start state."""
    from lactchain.loop.evaluate import evaluate_actor, evaluation_starts
    from lactchain.strategy.strategies import resolve_strategy

    env, extra, states = config.world.env, config.world.env_kwargs(), config.states
    with actor_for_job(config.model.actor, config.model.adapter, handle, config.engine, quiet=handle.quiet,
                       env=env) as model:
        strat = resolve_strategy(handle.registry, config.strategy.strategy, env)
        wanted = states if states == "all" else int(states)
        text_env = make_env(env, **extra)
        count = len(evaluation_starts(text_env, wanted, config.seed))  # --states 1000: the grid's 60
        LineLog()(f"evaluate: greedy from {count} start states, strategy {strat.label}", force=True)
        progress = JobProgress(handle, "evaluate", "start states")
        with err_console.status("evaluating"):
            result = evaluate_actor(model, states=wanted,
                                    constrained=config.constrained, n_envs=config.envs,
                                    max_actions=config.max_actions, seed=config.seed, registry=handle.registry,
                                    prompt=strat.prompt(model.moves, text_env), env=env, env_kwargs=extra,
                                    run_id=handle.run_id, should_stop=handle.cancelled.is_set,
                                    on_progress=progress.rollout)
        handle.log_metrics({k: float(v) for k, v in result.items() if isinstance(v, (int, float))})
        return result


def _name(prefix: str) -> Any:
    def name(config: Any) -> str:
        text = f"{prefix} {config.model.actor}"
        if prefix == "play":
            return text + (f" {config.world.env}" if config.world.env != DEFAULT_ENV else "")
        return (text + (f"+{config.model.adapter}" if config.model.adapter else "")
                + (f" strategy {config.strategy.strategy}" if config.strategy.strategy else ""))
    return name


PLAY = Job(kind="play", command="play", config=PlayConfig, run=run_play, title="Play episodes", name=_name("play"),
           precheck=precheck_engine, prepare=prepare_engine,
           doc="""Play episodes with an LLM actor and record every step in the registry.

    Each lock-step renders one prompt per live env and makes ONE batched generate
    call. Prints success rate, mean return, optimal ratio (BFS-optimal moves /
    moves used, over successful episodes), parse-failure rate and env-steps/s.
    """)
EVALUATE = Job(kind="eval", command="evaluate", config=EvaluateConfig, run=run_evaluate, title="Evaluate",
               name=_name("eval"), precheck=precheck_engine, prepare=prepare_engine,
               doc="""Score an actor greedily from every start state: success rate, mean return,
    optimal ratio (BFS-optimal moves / moves used) and parse-failure rate. On
    Blackjack: win rate, how often the first move is the exact optimum's, and the
    optimal expected return over the same deals (dynamic programming).""")
