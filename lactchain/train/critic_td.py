"""Critic training by off-policy TD on transitions of random move lists (no LLM needed).

Why: Monte-Carlo returns of the actor's own episodes are few, noisy and measure
the (bad) behaviour policy; ranking candidates needs something close to the
optimal value. Env steps cost nothing here, so:

1. `random_transitions` draws, from EVERY state the actor acts from (the start states
   and those only reached, as Taxi's riding passenger: `decision_states`; a V(s') the
   targets read must itself be fitted, or the backup carries noise -- on Taxi, fitting
   the start states alone left V's Spearman with V* near 0), move lists of random
   length (1..max moves per action) and executes each from that exact state:
   (s, moves, r, s', done). The actor's own candidates can be added too
   (`Transition.from_candidates`), so the data grows with every iteration.
2. Fitted value iteration (a Bellman-optimality backup over the sampled actions):
   each round computes V(s') for every state with the current critic (one
   batch: all states of the grid), forms the target
       y(s) = max over sampled (moves) from s of  r + gamma * V(s') * (1 - done)
   and regresses V(s) on y(s) for `steps_per_round` full-batch steps; the Q head
   regresses Q(s, moves) on r + gamma * V(s') for a mini-batch of transitions.
3. The critic keeps training across calls (the pipeline calls it again each
   iteration with more transitions), so nothing learned is thrown away.

The target scale is fixed on the first call (from the first targets) and kept,
so values stay comparable across rounds and iterations.

Stochastic envs (Blackjack): one sampled outcome per move list, and the max over
hundreds of noisy ±1 returns would be ~+1 everywhere. There the transitions of a
state are grouped by the move list the env actually reads (`canonical_moves`:
Blackjack ignores everything after a stick), and the max uses the double estimator
(van Hasselt 2010): pick the best list on one half of its samples, value it on the
other half, both ways, averaged.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

from lactchain.envs.replay import decision_states, execute_from, random_moves


@dataclass(frozen=True)
class Transition:
    state: Any
    moves: tuple[str, ...]
    reward: float
    next_state: Any
    done: bool

    @staticmethod
    def from_candidates(groups: Iterable[Any]) -> list["Transition"]:
        """The executed candidates of scored/drawn groups (lactchain.loop.labelers.Group)."""
        return [Transition(g.state, tuple(c.moves), r, n, done)
                for g in groups for c in g.candidates if c.moves for r, n, done in c.results()]


def random_transitions(env: Any, lists_per_state: int, seed: int) -> list[Transition]:
    """`lists_per_state` random move lists (uniform length 1..max moves, uniform moves)
    executed from every state the actor acts from (`decision_states`; each on its own deal
    where the env is stochastic)."""
    rng = random.Random(seed)
    stochastic = getattr(env, "stochastic", False)
    out = []
    for s in decision_states(env):
        for _ in range(lists_per_state):
            moves = random_moves(env, rng)
            reward, nxt, done = execute_from(env, s, moves, rng.randrange(2**31) if stochastic else None)
            out.append(Transition(s, moves, reward, nxt, done))
    return out


def critic_states(env: Any, transitions: Sequence[Transition]) -> list[Any]:
    """Every state the targets need V of: the decision states and the open next states."""
    return list(dict.fromkeys([*decision_states(env), *(t.next_state for t in transitions if not t.done)]))


@dataclass
class TDConfig:
    """Fitted value iteration for the critic (see the module docstring)."""

    rounds: int = 8
    head_steps: int = 150  # value-head steps per round on cached embeddings (milliseconds each)
    backbone_steps: int = 4  # steps per round through the LoRA backbone (about a second each on CPU)
    lists_per_state: int = 256
    lr: float = 1e-3
    gamma: float = 0.9
    q_batch: int = 64
    q_weight: float = 0.0  # > 0 also fits Q(s, moves) during the backbone steps (slower: longer texts)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rounds", "lists_per_state", "q_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("head_steps", "backbone_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.head_steps + self.backbone_steps == 0:
            raise ValueError("head_steps and backbone_steps are both 0: the critic would never train")
        if not 0.0 <= self.gamma < 1.0:
            raise ValueError(f"gamma must be in [0, 1), got {self.gamma}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.q_weight < 0:
            raise ValueError(f"q_weight must be >= 0, got {self.q_weight}")


def bellman_targets(transitions: Sequence[Transition], v: dict[Any, float], gamma: float,
                    env: Any = None) -> dict[Any, float]:
    """y(s) = max over the sampled transitions from s of r + gamma * V(s') * (1 - done);
    on a stochastic `env`, the double-estimated max over its canonical move lists' means."""
    def target(t: Transition) -> float:
        return t.reward + (0.0 if t.done else gamma * v.get(t.next_state, 0.0))

    if env is None or not getattr(env, "stochastic", False):
        best: dict[Any, float] = {}
        for t in transitions:
            y = target(t)
            if t.state not in best or y > best[t.state]:
                best[t.state] = y
        return best
    canonical = getattr(env, "canonical_moves", tuple)
    samples: dict[Any, dict[tuple[str, ...], list[float]]] = defaultdict(lambda: defaultdict(list))
    for t in transitions:
        samples[t.state][tuple(canonical(t.moves))].append(target(t))
    return {s: double_max(lists) for s, lists in samples.items()}


def double_max(samples: dict[Any, list[float]]) -> float:
    """max over keys of E[samples], double-estimated: each half picks, the other values."""
    halves = {k: (ys[0::2], ys[1::2]) for k, ys in samples.items() if len(ys) >= 2}
    if not halves:
        return max(sum(ys) / len(ys) for ys in samples.values())

    def mean(ys: list[float]) -> float:
        return sum(ys) / len(ys)

    a = max(halves, key=lambda k: mean(halves[k][0]))
    b = max(halves, key=lambda k: mean(halves[k][1]))
    return 0.5 * (mean(halves[a][1]) + mean(halves[b][0]))


def _backbone_step(critic: Any, texts: list[str], z: torch.Tensor, transitions: Sequence[Transition],
                   v: dict[Any, float], cfg: TDConfig, rng: random.Random) -> float:
    loss = torch.nn.functional.mse_loss(critic.forward_values(texts), z)
    if cfg.q_weight > 0:
        batch = rng.sample(list(transitions), min(cfg.q_batch, len(transitions)))
        qz = torch.tensor([((t.reward + (0.0 if t.done else cfg.gamma * v.get(t.next_state, 0.0)))
                            - critic.value_mean) / critic.value_std for t in batch], device=critic.device)
        q_pred = critic.forward_q(critic.q_texts([t.state for t in batch], [list(t.moves) for t in batch]))
        loss = loss + cfg.q_weight * torch.nn.functional.mse_loss(q_pred, qz)
    return loss


TD_OPTIMIZER_FILE = "td_optimizer.pt"  # beside a critic checkpoint: the fits' optimizer, for an exact resume


def td_optimizer(critic: Any, cfg: TDConfig, state: dict[str, Any] | None = None) -> torch.optim.Optimizer:
    """The backbone-and-heads optimizer the fits continue from call to call; `state`
    restores a saved one (a resumed loop then trains as if it had never stopped)."""
    optimizer = torch.optim.AdamW(critic.trainable_parameters(), lr=cfg.lr, weight_decay=0.0)
    if state is not None:
        optimizer.load_state_dict(state)
    return optimizer


def fit_critic_td(
    critic: Any,
    transitions: Sequence[Transition],
    cfg: TDConfig,
    optimizer: torch.optim.Optimizer | None = None,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[torch.optim.Optimizer, dict[str, float]]:
    """Run `cfg.rounds` rounds of fitted value iteration on `transitions`; returns the
    optimizer (pass it back to continue) and the last round's metrics.

    Each round: a few steps through the LoRA backbone, then many cheap steps of the
    value head on the (now fixed) embeddings of the states."""
    from lactchain.train.critic import spearman_vs_optimal

    env = critic.env
    states = critic_states(env, transitions)
    if optimizer is None:
        optimizer = td_optimizer(critic, cfg)
    head_opt = torch.optim.AdamW(critic.v_head.parameters(), lr=cfg.lr, weight_decay=0.0)
    rng = random.Random(cfg.seed)
    metrics: dict[str, float] = {}
    for rnd in range(1, cfg.rounds + 1):
        if should_stop is not None and should_stop():
            break
        t0 = time.perf_counter()
        v = dict(zip(states, critic.values(states)))
        targets = bellman_targets(transitions, v, cfg.gamma, env)
        if rnd == 1 and critic.value_mean == 0.0 and critic.value_std == 1.0:
            ys = torch.tensor(list(targets.values()))
            critic.set_target_stats(float(ys.mean()), float(ys.std()))
        train_states = list(targets)
        texts = critic.state_texts(train_states)
        z = torch.tensor([(targets[s] - critic.value_mean) / critic.value_std for s in train_states],
                         device=critic.device)
        critic.train()
        loss = torch.tensor(0.0)
        for _ in range(cfg.backbone_steps):
            loss = _backbone_step(critic, texts, z, transitions, v, cfg, rng)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if cfg.head_steps:
            with torch.no_grad():
                critic.eval()
                emb = critic.embed(texts).detach()
                critic.train()
            for _ in range(cfg.head_steps):
                loss = torch.nn.functional.mse_loss(critic.v_head(emb).squeeze(-1), z)
                head_opt.zero_grad(set_to_none=True)
                loss.backward()
                head_opt.step()
        critic.eval()
        metrics = {"round": rnd, "v_loss": float(loss.detach()), "spearman_vstar": spearman_vs_optimal(critic, cfg.gamma),
                   "transitions": len(transitions), "round_seconds": time.perf_counter() - t0}
        if on_round is not None:
            on_round(rnd, metrics)
    return optimizer, metrics
