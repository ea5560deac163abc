"""The Lab's model of an episode: env + strategy prompt + actor calls (no widgets).

A worker thread calls `step(actor, on_text)`; the UI receives plain, immutable
records (`GridSnapshot`, `StepRecord`) in messages, so no widget ever reads the env
while a thread mutates it. `reset()` bumps an epoch under the lock, so a step that
was generating when the researcher reset is discarded instead of landing on the
new episode.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from lactchain.envs import GridWorldEnv, Planner, State
from lactchain.prompts import DEFAULT_STRATEGY, PromptSpec

from tui.models import sample_fields

GAMMA = 0.9  # the pair builder's default (lactchain.preferences.collect_pairs)


class StepCancelled(Exception):
    """Raised from the streaming callback to stop a step early."""


@dataclass(frozen=True)
class GridSnapshot:
    size: int
    goal: tuple[int, int]
    state: State
    start: State
    path: tuple[State, ...]
    actions_taken: int
    max_actions: int
    total_return: float
    done: bool
    caption: str


@dataclass(frozen=True)
class StepRecord:
    index: int
    state: State
    prompt: str
    text: str
    moves: tuple[str, ...]
    mode: str
    logprob: float | None
    n_tokens: int | None
    reward: float
    next_state: State
    terminated: bool
    truncated: bool
    caption: str
    snapshot: GridSnapshot


@dataclass(frozen=True)
class Candidate:
    moves: tuple[str, ...]
    text: str
    mode: str
    next_state: State
    reward: float
    done: bool
    path: tuple[State, ...]
    v_next: float | None = None  # critic V(s') (None without a critic)
    q: float | None = None  # critic Q-head Q(s, moves)
    advantage: float | None = None  # r + gamma * V(s') * (1 - done) - V(s), as the pair builder scores
    q_star: float | None = None  # exact: r + gamma * V*(s') (reference)


@dataclass
class LabSession:
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    strategy: str = DEFAULT_STRATEGY
    constrained: bool = True
    temperature: float = 0.0
    max_new_tokens: int = 48
    gamma: float = GAMMA

    def __post_init__(self) -> None:
        self.env = GridWorldEnv(**self.env_kwargs)
        self.spec = PromptSpec(strategy=self.strategy, moves=self.env.moves)
        self.planner = Planner(self.env)
        self._v_star: dict[State, float] | None = None
        self._lock = threading.RLock()
        # One model call at a time: a step, a candidate sample and a critic query may come
        # from different workers; on a CPU box running them together only thrashes.
        self.model_lock = threading.RLock()
        self.epoch = 0
        self.start = self.env.start
        self.history: list[StepRecord] = []
        self.total_return = 0.0
        self.done = False
        self.caption = ""
        self.reset()

    # ---- prompt -------------------------------------------------------------------
    def set_strategy(self, text: str) -> None:
        """Apply a strategy to the live actor's prompt (validates; raises PromptError)."""
        spec = PromptSpec(strategy=text, template=self.spec.template, moves=self.spec.moves)
        with self._lock:
            self.spec = spec
            self.strategy = spec.strategy

    def user_prompt(self, state: State | None = None) -> str:
        with self._lock:
            return self.spec.render(self.env.describe(state or self.env.state))

    @staticmethod
    def model_prompt(actor: Any, user_text: str) -> str:
        wrap = getattr(actor, "chat_prompt", None)
        return wrap(user_text) if callable(wrap) else user_text

    # ---- episode ------------------------------------------------------------------
    def snapshot(self) -> GridSnapshot:
        with self._lock:
            env = self.env
            return GridSnapshot(
                env.size, tuple(env.goal), env.state, self.start, tuple(env.path), env.actions_taken,
                env.max_actions, self.total_return, self.done, self.caption,
            )

    def reset(self, start: State | None = None) -> GridSnapshot:
        with self._lock:
            if start is not None:
                self.start = start
            _, info = self.env.reset(options={"state": self.start.as_dict()})
            self.epoch += 1
            self.history = []
            self.total_return = 0.0
            self.done = (self.start.x, self.start.y) == tuple(self.env.goal)
            self.caption = info["caption"]
            return self.snapshot()

    def step(self, actor: Any, on_text: Callable[[str], None] | None = None, seed: int | None = None,
             on_prompt: Callable[[str, State], None] | None = None) -> StepRecord | None:
        """One action: render the prompt, stream the actor's answer, parse, step the env.
        Returns None if the episode was reset while the actor was generating."""
        with self._lock:
            if self.done:
                raise RuntimeError("the episode is over: reset (r) to start again")
            epoch, state = self.epoch, self.env.state
            user = self.spec.render(self.env.describe(state))
            constrained, temperature, max_new = self.constrained, self.temperature, self.max_new_tokens
        prompt = self.model_prompt(actor, user)
        if on_prompt is not None:
            on_prompt(prompt, state)
        kwargs = dict(constrained=constrained, temperature=temperature, max_new_tokens=max_new, seed=seed)
        with self.model_lock:
            if on_text is not None and callable(getattr(actor, "stream", None)):
                sample = actor.stream(prompt, on_text, **kwargs)
            else:
                sample = actor.generate([prompt], **kwargs)[0]
                if on_text is not None:
                    on_text(getattr(sample, "text", ""))
        return self.apply(epoch, state, prompt, sample)

    def apply(self, epoch: int, state: State, prompt: str, sample: Any) -> StepRecord | None:
        text, moves, mode, logprob, n_tokens = sample_fields(sample, self.env.moves)
        with self._lock:
            if epoch != self.epoch or self.done:
                return None
            _, reward, terminated, truncated, info = self.env.step(moves)
            self.total_return += float(reward)
            self.done = bool(terminated or truncated)
            self.caption = info["caption"]
            record = StepRecord(
                index=len(self.history) + 1, state=state, prompt=prompt, text=text, moves=tuple(info["moves"]),
                mode=mode, logprob=logprob, n_tokens=n_tokens, reward=float(reward), next_state=self.env.state,
                terminated=bool(terminated), truncated=bool(truncated), caption=info["caption"],
                snapshot=self.snapshot(),
            )
            self.history.append(record)
            return record

    # ---- what-ifs -----------------------------------------------------------------
    def simulate(self, state: State, moves: Sequence[str]) -> tuple[State, float, bool, tuple[State, ...]]:
        """Where `moves` would take the agent from `state` (a scratch env; the live one is untouched)."""
        env = GridWorldEnv(**self.env_kwargs)
        env.reset(options={"state": state.as_dict()})
        _, reward, terminated, _, _ = env.step(list(moves))
        return env.state, float(reward), bool(terminated), tuple(env.path)

    def v_star(self) -> dict[State, float]:
        """Exact V* for every state (value iteration: ~0.1-0.5 s the first time, then cached)."""
        if self._v_star is None:
            self._v_star = self.planner.values(self.gamma)
        return self._v_star

    def v_star_ready(self) -> dict[State, float] | None:
        """V* if it was computed already (never blocks)."""
        return self._v_star

    def candidates(self, actor: Any, k: int = 4, temperature: float = 0.8, seed: int | None = 0,
                   critic: Any | None = None) -> tuple[float | None, list[Candidate]]:
        """Sample k move lists for the current state; score them with the critic (if any)
        and with the exact V* (always, as a reference). Returns (V(s), candidates)."""
        with self._lock:
            state = self.env.state
            user = self.spec.render(self.env.describe(state))
            constrained, max_new = self.constrained, self.max_new_tokens
        prompt = self.model_prompt(actor, user)
        with self.model_lock:
            samples = actor.generate([prompt], constrained=constrained, temperature=temperature,
                                     max_new_tokens=max_new, seed=seed, num_samples=k)
        vstar = self.v_star()
        rows = []
        for sample in samples[:k]:
            text, moves, mode, _, _ = sample_fields(sample, self.env.moves)
            nxt, reward, done, path = self.simulate(state, moves)
            q_star = reward + (0.0 if done else self.gamma * vstar[nxt])
            rows.append(Candidate(tuple(moves), text, mode, nxt, reward, done, path, q_star=q_star))
        v_s = None
        if critic is not None and rows:
            from lactchain.preferences import advantage

            v_s = self.critic_values(critic, [state])[0]
            v_next = self.critic_values(critic, [c.next_state for c in rows])
            q_fn = getattr(critic, "q_values", None)
            with self.model_lock:
                q = [float(v) for v in q_fn([state] * len(rows), [list(c.moves) for c in rows])] if callable(
                    q_fn) else [None] * len(rows)
            rows = [
                replace(c, v_next=vn, q=qv, advantage=advantage(c.reward, vn, v_s, c.done, self.gamma))
                for c, vn, qv in zip(rows, v_next, q)
            ]
        return v_s, rows

    def critic_values(self, critic: Any, states: Sequence[State]) -> list[float]:
        with self.model_lock:
            return critic_values(critic, states)


def critic_values(critic: Any, states: Sequence[State]) -> list[float]:
    """V(s) from a critic (`lactchain.models.critic.Critic.values` takes states)."""
    return [float(v) for v in critic.values(list(states))]


def best_index(rows: Sequence[Candidate]) -> int | None:
    """The candidate with the highest advantage (critic) or, without a critic, the highest Q*."""
    if not rows:
        return None
    key = (lambda c: c.advantage) if all(c.advantage is not None for c in rows) else (lambda c: c.q_star or 0.0)
    return max(range(len(rows)), key=lambda i: key(rows[i]))
