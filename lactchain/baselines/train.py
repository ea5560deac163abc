"""Train a classic agent on a lab env as a registry run (kind `baseline`), then evaluate
it greedily from every start state: the numbers the leaderboard reads.

Training episodes start from uniformly random start states (seeded); the evaluation is
the leaderboard's protocol (`baselines.protocol.evaluate_agent`), so every agent's row is
measured the same way. Metrics: `train/*` every `log_every` episodes, `eval/*` at the end.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable

from lactchain.baselines.agent import RandomAgent, run_agent

AGENTS = ("random", "value-iteration", "q-learning", "sarsa", "mc", "reinforce", "actor-critic")


def make_agent(name: str, env: Any, seed: int = 0, gamma: float = 0.9, alpha: str = "0.5",
               epsilon: str = "1:0.05:20000") -> Any:
    """The agent called `name` for `env` (a ValueError names the known agents)."""
    from lactchain.baselines.td import METHODS, Schedule, TabularAgent, ValueIterationAgent

    if name == "random":
        return RandomAgent(env.moves, seed)
    if name == "value-iteration":
        return ValueIterationAgent(env, gamma, seed)
    if name in METHODS:
        return TabularAgent(env.moves, method=name, gamma=gamma, alpha=Schedule.parse(alpha),
                            epsilon=Schedule.parse(epsilon), seed=seed)
    if name in ("reinforce", "actor-critic"):
        from lactchain.baselines import pg

        cls = pg.ReinforceAgent if name == "reinforce" else pg.ActorCriticAgent
        return cls(env, gamma=gamma, seed=seed)
    raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(AGENTS)}")


def train_baseline(handle: Any, env: str, agent: str, episodes: int, seed: int = 0, log_every: int = 250,
                   on_progress: Callable[[int, dict[str, Any]], None] | None = None, **hyper: Any) -> dict[str, Any]:
    """Train `agent` for `episodes` episodes under run `handle`, evaluate it, save what it learned."""
    from lactchain.baselines.protocol import classic_env, evaluate_agent

    text_env = classic_env(env)
    learner = make_agent(agent, text_env, seed=seed, **hyper)
    learns = agent not in ("random", "value-iteration")
    train: dict[str, Any] = {"env_steps": getattr(learner, "model_calls", 0)}
    if learns:
        pool = list(text_env.start_states())
        rng = random.Random(seed)
        starts = [rng.choice(pool) for _ in range(episodes)] if text_env.fixed_start is not None else None

        def on_episode(i: int, so_far: Any) -> None:
            if (i + 1) % log_every == 0 or i + 1 == episodes:
                recent = so_far.returns[-log_every:]
                metrics = {"train/env_steps": so_far.env_steps, "train/mean_return": sum(recent) / len(recent),
                           "train/success_rate": so_far.successes / so_far.episodes}
                handle.log_metrics(metrics, step=i + 1)
                if on_progress is not None:
                    on_progress(i + 1, metrics)
                handle.check_cancelled()

        summary = run_agent(text_env, learner, episodes, seed=seed + 1, starts=starts, on_episode=on_episode)
        train = {"env_steps": summary.env_steps, "episodes": summary.episodes, "seconds": summary.seconds}
    handle.log_metrics({"train/env_steps": train["env_steps"]})
    result = evaluate_agent(text_env, learner)
    handle.log_metrics({f"eval/{k}": float(v) for k, v in result.items() if isinstance(v, (int, float))})
    to_json = getattr(learner, "to_json", None)
    if to_json is not None:
        path = handle.dir / "agent.json"
        path.write_text(json.dumps(to_json()) + "\n")
        handle.registry.add_artifact(handle.run_id, "agent", path, meta={"agent": agent})
    return {"agent": agent, "env": env, "train": train, "eval": result}
