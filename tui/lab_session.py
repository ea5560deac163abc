"""The Lab's model of an episode: env + strategy prompt + actor calls (no widgets).

Any env of the catalog (`lactchain.envs.catalog.make_env`): the grid, Blackjack, any
other text env. What the Lab shows comes from the env's members (`headline`,
`render_text`, `console_view`, its solver); only the grid's view fields (size, goal,
landmarks, walls, for `GridView`) and its V* overlay are the grid's own.
A worker thread calls `step(actor, on_text)`; the UI receives plain, immutable
records (`Snapshot`, `StepRecord`) in messages, so no widget ever reads the env
while a thread mutates it. `reset()` bumps an epoch under the lock, so a step that
was generating when the researcher reset is discarded instead of landing on the
new episode.

Envs whose seed deals the start (Blackjack: `fixed_start` is None) play deal after
deal: deal k is seeded like episode k of `lactchain play --seed 0`, so a hand seen
here replays there.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence

from lactchain.envs.catalog import DEFAULT_ENV, EnvState, env_name, make_env
from lactchain.envs.world import STATE_TEXT_DEFAULT, world_params
from lactchain.prompts import PromptSpec

from tui.models import sample_fields
from tui.oracle import exact_q

GAMMA = 0.9  # the pair builder's default (lactchain.loop.preferences.collect_pairs)
DEAL_STRIDE = 1_000_003  # episode k of seed s is dealt from s * DEAL_STRIDE + k, as `lactchain play` does


class StepCancelled(Exception):
    """Raised from the streaming callback to stop a step early."""


@dataclass(frozen=True)
class Snapshot:
    """The episode as the views draw it. `state`/`start`/`path` are the env's own states
    (a grid `State`, a Blackjack `Hand`, ...); the env-specific fields are empty elsewhere."""

    env: str
    state: Any
    start: Any
    path: tuple[Any, ...]
    actions_taken: int
    max_actions: int
    total_return: float
    done: bool
    caption: str
    success: bool = False
    size: int = 0  # grid
    goal: tuple[int, int] | None = None  # grid
    player_cards: tuple[int, ...] = ()  # blackjack, from the env's info
    dealer_cards: tuple[int, ...] = ()  # blackjack: only the up card until the hand is over
    outcome: str = ""  # blackjack: won / lost / draw once the hand is over
    deal: int | None = None  # the deal's number, for envs whose seed deals the start
    seed: int | None = None  # the seed that dealt it
    rendered: str = ""  # the env's `render_text()` (envs drawn by the text view)
    landmarks: tuple[Any, ...] = ()  # grid: the scene's landmarks (lactchain.envs.scenes.Landmark)
    walls: tuple[tuple[int, int], ...] = ()  # grid: the scene's wall cells (x, y), sorted


@dataclass(frozen=True)
class StepRecord:
    index: int
    state: Any
    prompt: str
    text: str
    moves: tuple[str, ...]
    mode: str
    logprob: float | None
    n_tokens: int | None
    reward: float
    next_state: Any
    terminated: bool
    truncated: bool
    caption: str
    snapshot: Snapshot
    success: bool = False
    seed: int | None = None  # the episode's seed (envs whose seed deals the start)


@dataclass(frozen=True)
class Candidate:
    moves: tuple[str, ...]
    text: str
    mode: str
    next_state: Any
    reward: float
    done: bool
    path: tuple[Any, ...]
    v_next: float | None = None  # critic V(s') (None without a critic)
    q: float | None = None  # critic Q-head Q(s, moves)
    advantage: float | None = None  # r + gamma * V(s') * (1 - done) - V(s), as the pair builder scores
    q_star: float | None = None  # exact (the oracle): grid r + gamma * V*(s'); Blackjack E[return] of the list


@dataclass
class LabSession:
    env_name: str = DEFAULT_ENV  # a catalog name ('grid', 'blackjack') or gymnasium id
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    strategy: str | None = None  # None: the env's built-in strategy
    constrained: bool = True
    temperature: float = 0.0
    max_new_tokens: int = 48
    gamma: float = GAMMA
    seed: int = 0  # deals (envs whose seed deals the start)

    def __post_init__(self) -> None:
        self.env_name = env_name(self.env_name)
        self.env = make_env(self.env_name, **self.env_kwargs)
        self.is_grid = self.env.console_view == "grid"  # drawn on the GridView (its cells, V* overlay)
        self.deals = self.env.fixed_start is None  # the seed deals each episode's start
        self.strategy = self.strategy or self.env.default_strategy
        self.spec = PromptSpec(strategy=self.strategy, moves=self.env.moves,
                               observation_label=self.env.observation_label)
        self.planner = self.env.solver() if self.is_grid else None  # the grid's exact planner
        self._solver: Any | None = None
        self._v_star: dict[EnvState, float] | None = None
        self._lock = threading.RLock()
        # One model call at a time: a step, a candidate sample and a critic query may come
        # from different workers; on a CPU box running them together only thrashes.
        self.model_lock = threading.RLock()
        self.epoch = 0
        self.deal = 0
        self.start = self.env.fixed_start
        self.history: list[StepRecord] = []
        self.total_return = 0.0
        self.done = False
        self.success = False
        self.caption = ""
        self._info: dict[str, Any] = {}
        self.reset()

    @property
    def world(self) -> dict[str, str]:
        """The world the Lab plays, as a run records one (`world_params`): an adapter whose
        actor learned in another gets a note."""
        scene = self.env_kwargs.get("scene")  # a bundled name, or the scene a file held (as_dict: same_world
        return world_params(self.env_name, scene or None,  # compares layouts, world_label shows its name)
                            str(self.env_kwargs.get("state_text") or STATE_TEXT_DEFAULT))

    def console_key(self, name: str) -> str:
        """Where the console remembers `name` for this env (a strategy for the grid means
        nothing to Blackjack): `name` on the grid, `name_<env>` elsewhere."""
        return name if self.is_grid else f"{name}_{self.env_name}"

    def critic_fits(self, critic: Any) -> bool:
        """A critic gives values only for the env it was trained on (its `env_name`)."""
        return critic is not None and getattr(critic, "env_name", DEFAULT_ENV) == self.env_name

    @property
    def episode_seed(self) -> int | None:
        return self.seed * DEAL_STRIDE + self.deal if self.deals else None

    # ---- prompt -------------------------------------------------------------------
    def set_strategy(self, text: str) -> None:
        """Apply a strategy to the live actor's prompt (validates; raises PromptError)."""
        spec = PromptSpec(strategy=text, template=self.spec.template, moves=self.spec.moves,
                          observation_label=self.spec.observation_label)
        with self._lock:
            self.spec = spec
            self.strategy = spec.strategy

    def user_prompt(self, state: Any = None) -> str:
        with self._lock:
            return self.spec.render(self.env.describe(state))

    def headline(self, state: Any) -> str:
        """The state in one line, pinned above the prompt: the env's own `headline` (the
        grid: pose and goal direction; Blackjack names a natural as dealt)."""
        with self._lock:
            return self.env.headline(state)

    @staticmethod
    def model_prompt(actor: Any, user_text: str) -> str:
        wrap = getattr(actor, "chat_prompt", None)
        return wrap(user_text) if callable(wrap) else user_text

    # ---- episode ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self._lock:
            env, info = self.env, self._info
            grid = dict(size=env.size, goal=tuple(env.goal), landmarks=tuple(env.scene.landmarks),
                        walls=tuple(sorted(getattr(env, "walls", ())))) if self.is_grid else {}
            cards = {}
            if "player_cards" in info:
                cards = dict(player_cards=tuple(info["player_cards"]), dealer_cards=tuple(info["dealer_cards"]),
                             outcome=str(info.get("outcome") or ""))
            rendered = str(env.render_text() or "") if env.console_view == "text" else ""
            return Snapshot(
                self.env_name, env.state, self.start, tuple(env.path), env.actions_taken, env.max_actions,
                self.total_return, self.done, self.caption, success=self.success, **grid, **cards,
                deal=self.deal if self.deals else None, seed=self.episode_seed, rendered=rendered,
            )

    def reset(self, start: Any = None) -> Snapshot:
        """Back to the episode's start: the grid's chosen pose, or the same deal again."""
        with self._lock:
            if start is not None and not self.deals:
                self.start = start
            if self.deals:
                _, info = self.env.reset(seed=self.episode_seed)
                self.start = self.env.state
            else:
                _, info = self.env.reset(options={"state": self.start.as_dict()})
            self.epoch += 1
            self.history = []
            self.total_return = 0.0
            self.done = bool(self.env.is_terminal(self.env.state))
            self.success = False
            self.caption = info["caption"]
            self._info = info
            return self.snapshot()

    def next_deal(self) -> Snapshot:
        """A new episode on the next seeded deal (envs whose seed deals the start)."""
        with self._lock:
            if self.deals:
                self.deal += 1
            return self.reset()

    def step(self, actor: Any, on_text: Callable[[str], None] | None = None, seed: int | None = None,
             on_prompt: Callable[[str, Any], None] | None = None) -> StepRecord | None:
        """One action: render the prompt, stream the actor's answer, parse, step the env.
        Returns None if the episode was reset while the actor was generating."""
        with self._lock:
            if self.done:
                raise RuntimeError("the episode is over: reset (r) to start again")
            epoch, state = self.epoch, self.env.state
            user = self.spec.render(self.env.describe())  # the live hand: Blackjack names a natural
            constrained, temperature, max_new = self.constrained, self.temperature, self.max_new_tokens
        prompt = self.model_prompt(actor, user)
        if on_prompt is not None:
            on_prompt(prompt, state)
        kwargs = dict(constrained=constrained, temperature=temperature, max_new_tokens=max_new, seed=seed)
        with self.model_lock, actor_moves(actor, self.env.moves):
            if on_text is not None and callable(getattr(actor, "stream", None)):
                sample = actor.stream(prompt, on_text, **kwargs)
            else:
                sample = actor.generate([prompt], **kwargs)[0]
                if on_text is not None:
                    on_text(getattr(sample, "text", ""))
        return self.apply(epoch, state, prompt, sample)

    def apply(self, epoch: int, state: Any, prompt: str, sample: Any) -> StepRecord | None:
        text, moves, mode, logprob, n_tokens = sample_fields(sample, self.env.moves)
        with self._lock:
            if epoch != self.epoch or self.done:
                return None
            _, reward, terminated, truncated, info = self.env.step(moves)
            self.total_return += float(reward)
            self.done = bool(terminated or truncated)
            self.success = bool(info.get("success", terminated))
            self.caption = info["caption"]
            self._info = info
            record = StepRecord(
                index=len(self.history) + 1, state=state, prompt=prompt, text=text, moves=tuple(info["moves"]),
                mode=mode, logprob=logprob, n_tokens=n_tokens, reward=float(reward), next_state=self.env.state,
                terminated=bool(terminated), truncated=bool(truncated), caption=info["caption"],
                snapshot=self.snapshot(), success=self.success, seed=self.episode_seed,
            )
            self.history.append(record)
            return record

    # ---- what-ifs -----------------------------------------------------------------
    def what_if_seed(self) -> int | None:
        """One seed for every candidate from the current state: they are played on the same
        cards (None for envs that draw nothing)."""
        with self._lock:
            return None if not self.deals else self.episode_seed * 7919 + self.env.actions_taken

    def simulate(self, state: Any, moves: Sequence[str], seed: int | None = None) -> tuple[Any, float, bool, tuple]:
        """Where `moves` would take the agent from `state` (a scratch env; the live one is
        untouched), as `lactchain.loop.labelers.execute_from` does, plus the seed that draws."""
        env = make_env(self.env_name, **self.env_kwargs)
        env.reset(seed=seed, options={"state": state.as_dict()})
        _, reward, terminated, _, _ = env.step(list(moves))
        return env.state, float(reward), bool(terminated), tuple(env.path)

    def solver(self) -> Any:
        """The env's exact solver (the grid's Planner; Blackjack's dynamic programme), built once."""
        if self._solver is None:
            self._solver = self.planner if self.is_grid else self.env.solver()
        return self._solver

    def v_star(self) -> dict[EnvState, float]:
        """Exact V* for every grid state (value iteration: ~0.1-0.5 s the first time, then cached)."""
        if self._v_star is None:
            self._v_star = self.planner.values(self.gamma)
        return self._v_star

    def v_star_ready(self) -> dict[EnvState, float] | None:
        """V* if it was computed already (never blocks)."""
        return self._v_star

    def warm_oracle(self) -> None:
        """Compute what the oracle hints need (the grid's V* table takes a moment)."""
        if self.is_grid:
            self.v_star()
        else:
            self.solver()

    def oracle_value(self, state: Any) -> float | None:
        """V*(s) if it is at hand without waiting (grid: once V* is computed)."""
        if self.is_grid:
            vstar = self.v_star_ready()
            return None if vstar is None else vstar.get(state)
        value = getattr(self._solver, "value", None)
        if value is None:
            return None
        return float(value(state, natural=True) if self._is_natural(state) else value(state))

    def _is_natural(self, state: Any) -> bool:
        """A Blackjack hand as dealt that is 21: an ace and a 10 (its own rules and value)."""
        with self._lock:
            return self.deals and self.env.actions_taken == 0 and state == self.env.state and \
                getattr(state, "player_sum", 0) == 21

    def oracle_move(self, state: Any) -> str | None:
        """The solver's best move here (envs whose solver names one, e.g. Blackjack)."""
        action = getattr(self._solver, "action", None)
        return None if self.is_grid or action is None else str(action(state))

    def candidates(self, actor: Any, k: int = 4, temperature: float = 0.8, seed: int | None = 0,
                   critic: Any | None = None) -> tuple[float | None, list[Candidate]]:
        """Sample k move lists for the current state; execute each from it (on the same
        seeded cards), score them with the critic (if trained on this env) and with the exact solver
        (always, as a reference: the oracle). Returns (V(s), candidates)."""
        with self._lock:
            state = self.env.state
            user = self.spec.render(self.env.describe())
            constrained, max_new = self.constrained, self.max_new_tokens
            natural = self._is_natural(state)
        sim_seed = self.what_if_seed()
        prompt = self.model_prompt(actor, user)
        with self.model_lock, actor_moves(actor, self.env.moves):
            samples = actor.generate([prompt], constrained=constrained, temperature=temperature,
                                     max_new_tokens=max_new, seed=seed, num_samples=k)
        vstar = self.v_star() if self.is_grid else None
        solver = self.solver()
        rows = []
        for sample in samples[:k]:
            text, moves, mode, _, _ = sample_fields(sample, self.env.moves)
            nxt, reward, done, path = self.simulate(state, moves, sim_seed)
            if vstar is not None:
                q_star = reward + (0.0 if done else self.gamma * vstar[nxt])
            else:
                q_star = exact_q(solver, state, moves[: self.env.max_moves_per_action], reward, nxt, done, natural)
            rows.append(Candidate(tuple(moves), text, mode, nxt, reward, done, path, q_star=q_star))
        v_s = None
        if rows and self.critic_fits(critic):
            from lactchain.loop.preferences import advantage

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

    def critic_values(self, critic: Any, states: Sequence[EnvState]) -> list[float]:
        with self.model_lock:
            return critic_values(critic, states)


@contextmanager
def actor_moves(actor: Any, moves: Sequence[str]) -> Iterator[None]:
    """The actor answers in the env's vocabulary for one call: its grammar and parser read
    `actor.moves`, and the console has one actor for every env (call under `model_lock`)."""
    old = getattr(actor, "moves", None)
    if old is None or tuple(old) == tuple(moves):
        yield
        return
    actor.moves = tuple(moves)
    try:
        yield
    finally:
        actor.moves = old


def critic_values(critic: Any, states: Sequence[EnvState]) -> list[float]:
    """V(s) from a critic (`lactchain.models.critic.Critic.values` takes states)."""
    return [float(v) for v in critic.values(list(states))]


def best_index(rows: Sequence[Candidate]) -> int | None:
    """The candidate with the highest advantage (critic) or, without a critic, the highest Q*."""
    if not rows:
        return None
    key = (lambda c: c.advantage) if all(c.advantage is not None for c in rows) else (lambda c: c.q_star or 0.0)
    return max(range(len(rows)), key=lambda i: key(rows[i]))
