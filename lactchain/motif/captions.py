"""Captioned episodes for LLM-judged rewards: collect them from policies into the
registry, and read them back as one caption per episode.

A collect run stores every episode with its seed and start state, and every step with
its state, move, reward and caption, plus the policy in the run's params, so any
episode replays from its seed (`replay_episode` checks that it does). The LLM actor's
episodes come from `lactchain play --env ...`: they have the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from lactchain.baselines.tabular import Policy, QLearner, RandomPolicy, SolverPolicy, episode_seed, play_episode
from lactchain.moves import format_moves

POLICIES = ("random", "optimal", "q-learning")


def make_policy(name: str, env: Any, seed: int = 0, train_episodes: int = 50_000) -> Policy:
    """A policy by name. 'optimal' is the exact solver (an oracle, for reference only);
    'q-learning' is trained here on the env's own reward first."""
    if name == "random":
        return RandomPolicy(env.moves, seed=seed)
    if name == "optimal":
        solver = env.solver()
        if solver is None or not hasattr(solver, "action"):
            raise ValueError("this env has no exact solver with one optimal move per state: use random or q-learning")
        return SolverPolicy(solver)
    if name == "q-learning":
        return QLearner(env.moves, seed=seed).train(env, train_episodes, seed=seed + 1)
    raise ValueError(f"unknown policy {name!r}; use one of {', '.join(POLICIES)}")


def collect_episodes(env: Any, policy: Policy, episodes: int, *, seed: int = 0, registry: Any = None,
                     run_id: str | None = None, on_episode: Callable[[int, float, bool], None] | None = None,
                     should_stop: Callable[[], bool] | None = None) -> dict[str, float]:
    """Play seeded episodes (one move per action) and record them; returns summary metrics."""
    wins, total, played = 0, 0.0, 0
    for i in range(episodes):
        if should_stop is not None and should_stop():
            break
        seed_i = episode_seed(seed, i)
        ret, info, steps = play_episode(env, policy, seed_i)
        start = steps[0]["state"]
        rows = [{"t": t, "state": st["state"].as_dict(), "prompt": "", "completion": format_moves([st["move"]]),
                 "moves": [st["move"]], "parse_mode": "strict", "reward": st["reward"],
                 "next_state": st["next_state"].as_dict(), "done": st["done"], "terminated": st["terminated"],
                 "caption": st["caption"], "seed": seed_i} for t, st in enumerate(steps)]
        success = bool(info.get("success"))
        if registry is not None and run_id is not None:
            with registry.transaction():
                episode_id = registry.add_episode(run_id, idx=i, seed=seed_i, start_state=start.as_dict(),
                                                  length=len(rows), success=success, moves_used=len(rows),
                                                  parse_failures=0, **{"return": ret})
                registry.add_steps(run_id, [{**r, "episode_id": episode_id} for r in rows])
        wins, total, played = wins + success, total + ret, played + 1
        if on_episode is not None:
            on_episode(i, ret, success)
    return {"episodes": played, "win_rate": wins / played if played else 0.0,
            "mean_return": total / played if played else 0.0}


def collect_runs(registry: Any, env: Any, policies: Sequence[str], episodes: int, seed: int = 0,
                 env_name: str | None = None) -> list[str]:
    """One collect run per policy, all dealt the same seeded episodes (so episodes pair by
    start state); returns the run ids. The runs' `env` param is `env_name`, else the env's own name."""
    runs = []
    for policy in policies:
        run = registry.create_run("collect", params={"env": env_name or env.name, "policy": policy})
        collect_episodes(env, make_policy(policy, env), episodes, seed=seed, registry=registry, run_id=run)
        runs.append(run)
    return runs


@dataclass(frozen=True)
class CaptionedEpisode:
    """One finished episode as the judge sees it: its captions joined in order."""

    episode_id: int
    run_id: str
    start_state: dict[str, Any]
    seed: int | None
    caption: str
    true_return: float


def captioned_episodes(registry: Any, run_ids: Sequence[str]) -> list[CaptionedEpisode]:
    """Finished episodes of these runs (an unfinished one has no outcome to judge)."""
    out = []
    for run_id in run_ids:
        steps_by_episode: dict[int, list[dict]] = {}
        for step in registry.steps(run_id=run_id):
            steps_by_episode.setdefault(step["episode_id"], []).append(step)
        for ep in registry.episodes(run_id):
            steps = steps_by_episode.get(ep["id"], [])
            if not steps or not steps[-1]["done"]:
                continue
            out.append(CaptionedEpisode(ep["id"], run_id, ep["start_state"] or {}, ep["seed"],
                                        "; ".join(s["caption"] for s in steps), float(ep["return"] or 0.0)))
    return out


def replay_episode(env: Any, registry: Any, episode_id: int, run_id: str) -> bool:
    """Replay a recorded episode from its seed and start with its recorded moves: True
    when every caption, reward and state matches what is stored."""
    episode = next(e for e in registry.episodes(run_id) if e["id"] == episode_id)
    steps = registry.steps(episode_id=episode_id)
    env.reset(seed=episode["seed"], options={"state": episode["start_state"]})
    for step in steps:
        if env.state.as_dict() != step["state"]:
            return False
        _, reward, _, _, info = env.step(step["moves"])
        if info["caption"] != step["caption"] or reward != step["reward"]:
            return False
    return True
