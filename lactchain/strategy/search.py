"""Searching the strategy prompt, the learnable part of the actor's prompt, with no weight
update: the way OPRO (an LLM proposes new instructions from the scored history), GEPA
(mutations of strategies kept on a Pareto front over training states) and DSPy's
bootstrapped few-shot demonstrations (worked examples from the policy's own successes) do.

One round: every proposer proposes `per_round` strategies from the search so far; each
new one is played greedily from every training start state (seeded, fixed for the whole
search) and scored per state (1 success, 0 not). The front keeps every strategy that no
other beats on every state; parents are drawn from it. Held-out start states never
enter the search (scores, parents, demonstrations): only the final report reads them.

Proposers (one interface, `Proposer.propose(search, n, rng) -> texts`):
- `edits` (no LLM, the baseline): drop, swap, insert or replace one sentence, from the
  env's pool of hints (`strategy_hints`, hand-written per env) and the parent's own;
- `demos`: the parent plus 1-3 worked examples (state text -> the move list that
  succeeded in one action from it), bootstrapped from the search's own successful
  episodes on training states, and, once those are used up, from sampled attempts
  (temperature 1) of the best strategy on the training states still without one;
- `llm`: a meta-prompt shows the best strategies so far with their scores (ascending,
  OPRO's order) and a few failed episodes (GEPA's reflection); the proposer model writes
  a new strategy in free text.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol, Sequence

from lactchain.moves import format_moves
from lactchain.prompts import PromptError, validate_strategy

PROPOSERS = ("edits", "demos", "llm")
GENERIC_HINTS = ("Read the state carefully before answering.", "Answer with every move the goal needs.",
                 "Do not add moves that are not needed.")
DEMO_HEADER = "Examples of good answers:"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def state_key(state: Any) -> str:
    """A start state as a JSON-safe key (its registry dict, sorted)."""
    import json

    return json.dumps(state.as_dict() if hasattr(state, "as_dict") else state, sort_keys=True)


@dataclass
class Candidate:
    """One strategy the search tried: its text, who proposed it from which parent, its
    per-state scores on the training states (key -> 1.0/0.0) and its registry version."""

    text: str
    proposer: str
    round: int
    scores: dict[str, float] = field(default_factory=dict)
    parent: int | None = None  # index of the parent candidate
    version: int | None = None

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(self.scores) if self.scores else 0.0


@dataclass
class Search:
    """Everything a search knows, JSON round-trippable (a resume reloads it)."""

    train_keys: list[str]
    heldout_keys: list[str]
    candidates: list[Candidate] = field(default_factory=list)
    rounds_done: int = 0
    evaluations: int = 0  # episodes played for the search (training states only)
    sampled: int = 0  # of which sampled attempts (the demos proposer's bootstrap)
    successes: dict[str, list[str]] = field(default_factory=dict)  # state key -> a one-action winning move list
    descriptions: dict[str, str] = field(default_factory=dict)  # state key -> its state text
    failures: list[dict[str, Any]] = field(default_factory=list)  # recent failed episodes: state text, answer, caption
    greedy_answers: dict[str, list[str]] = field(default_factory=dict)  # state key -> every distinct greedy answer
    curve: list[dict[str, Any]] = field(default_factory=list)  # per round: best so far, evaluations, per proposer
    seconds: float = 0.0  # searching time so far, over the runs of a resumed search (its budget counts them all)

    def best(self) -> Candidate:
        return max(self.candidates, key=lambda c: (c.mean, -c.round))

    def front(self) -> list[int]:
        """Indices of the candidates no other beats on every training state (GEPA's Pareto set)."""
        out = []
        for i, c in enumerate(self.candidates):
            dominated = any(
                all(o.scores.get(k, 0.0) >= c.scores.get(k, 0.0) for k in self.train_keys)
                and any(o.scores.get(k, 0.0) > c.scores.get(k, 0.0) for k in self.train_keys)
                for j, o in enumerate(self.candidates) if j != i)
            if not dominated:
                out.append(i)
        return out

    def parent(self, rng: random.Random) -> int:
        """A parent from the front, weighted by the training states on which it is among the best."""
        front = self.front()
        weights = []
        for i in front:
            c = self.candidates[i]
            weights.append(1 + sum(c.scores.get(k, 0.0) >= max(self.candidates[j].scores.get(k, 0.0) for j in front)
                                   and c.scores.get(k, 0.0) > 0 for k in self.train_keys))
        return rng.choices(front, weights=weights)[0]

    @property
    def answers_per_state(self) -> float:
        """Distinct greedy answers per training state over every candidate so far: 1.0 means
        no strategy changed what the actor answers anywhere (a search cannot gain then)."""
        return sum(len(a) for a in self.greedy_answers.values()) / max(1, len(self.greedy_answers))

    def seen(self, text: str) -> bool:
        return any(c.text == text for c in self.candidates)

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "candidates"},
                "candidates": [asdict(c) for c in self.candidates]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Search":
        data = dict(data)
        candidates = [Candidate(**c) for c in data.pop("candidates", [])]
        return cls(**data, candidates=candidates)


class Proposer(Protocol):
    name: str

    def propose(self, search: Search, n: int, rng: random.Random) -> list[tuple[str, int | None]]:
        """Up to `n` new strategy texts, each with the index of its parent (None: none)."""
        ...


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def keep_new(search: Search, out: list[tuple[str, int | None]], text: str, parent: int | None) -> None:
    """Append (text, parent) to a proposer's `out` when the text is a valid strategy that
    neither the search nor this batch has tried."""
    try:
        text = validate_strategy(text)
    except PromptError:
        return
    if not search.seen(text) and all(text != t for t, _ in out):
        out.append((text, parent))


def _strip_demos(text: str) -> str:
    return text.split(DEMO_HEADER)[0].strip()


class EditProposer:
    """The no-LLM baseline: one sentence dropped, swapped, inserted or replaced."""

    name = "edits"

    def __init__(self, hints: Sequence[str]) -> None:
        self.hints = tuple(dict.fromkeys([*hints, *GENERIC_HINTS]))

    def propose(self, search: Search, n: int, rng: random.Random) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []
        for _ in range(n * 8):
            if len(out) >= n:
                break
            parent = search.parent(rng)
            parts = sentences(_strip_demos(search.candidates[parent].text))
            fresh = [h for h in self.hints if h not in parts]
            edit = rng.choice(["drop", "swap", "insert", "insert", "replace"])
            if edit == "drop" and len(parts) > 1:
                parts.pop(rng.randrange(len(parts)))
            elif edit == "swap" and len(parts) > 1:
                i, j = rng.sample(range(len(parts)), 2)
                parts[i], parts[j] = parts[j], parts[i]
            elif edit == "insert" and fresh:
                parts.insert(rng.randrange(len(parts) + 1), rng.choice(fresh))
            elif edit == "replace" and fresh and parts:
                parts[rng.randrange(len(parts))] = rng.choice(fresh)
            else:
                continue
            keep_new(search, out, " ".join(parts), parent)
        return out


class DemoProposer:
    """A parent's instructions plus 1-3 worked examples from successful training episodes.

    Greedy play of a weak start strategy succeeds from few training states, so the worked
    examples run out after a few rounds (every combination tried). Then, as DSPy's
    BootstrapFewShot does with sampled attempts, `sample(text, starts)` plays the best
    strategy so far `attempts` times at temperature 1 from each training state without a
    known one-action success; its successes join the pool. Those episodes count as the
    search's evaluations; they are training states only."""

    name = "demos"

    def __init__(self, sample: Callable[[str, Sequence[Any]], list["Episode"]] | None = None,
                 train_states: Sequence[Any] = (), attempts: int = 4) -> None:
        self.sample, self.train_states, self.attempts = sample, list(train_states), attempts

    def propose(self, search: Search, n: int, rng: random.Random) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []
        self._combine(search, out, n, rng)
        if len(out) < n and self._bootstrap(search):
            self._combine(search, out, n, rng)
        return out

    def _combine(self, search: Search, out: list[tuple[str, int | None]], n: int, rng: random.Random) -> None:
        train = set(search.train_keys)
        pool = [k for k in search.successes if k in train and k in search.descriptions]
        for _ in range(n * 8):
            if len(out) >= n or not pool:
                break
            parent = search.parent(rng)
            picked = rng.sample(pool, min(len(pool), rng.choice([1, 2, 3])))
            lines = [f"- {search.descriptions[k]} Answer: {format_moves(search.successes[k])}" for k in picked]
            keep_new(search, out, f"{_strip_demos(search.candidates[parent].text)}\n{DEMO_HEADER}\n" + "\n".join(lines),
                     parent)

    def _bootstrap(self, search: Search) -> bool:
        """Sampled attempts from the training states without a success; True if any succeeded."""
        if self.sample is None:
            return False
        missing = [s for s, k in zip(self.train_states, search.train_keys) if k not in search.successes]
        if not missing:
            return False
        before = len(search.successes)
        episodes = self.sample(search.best().text, [s for s in missing for _ in range(self.attempts)])
        search.evaluations += len(episodes)
        search.sampled += len(episodes)
        for ep in episodes:
            record(search, ep)
        return len(search.successes) > before


META_PROMPT = """You write instructions for an agent. {about}

Here are instructions written before, with the share of start states each solved (higher is better):
{history}

Some answers that failed:
{failures}

Write new instructions, different from all above, that would solve more start states. Two or three sentences, no list, nothing else."""


class LLMProposer:
    """OPRO/GEPA style: the proposer model reads the scored history and failures and writes a new strategy."""

    name = "llm"

    def __init__(self, model: Any, about: str, shown: int = 4, max_new_tokens: int = 96) -> None:
        self.model, self.about, self.shown, self.max_new_tokens = model, about, shown, max_new_tokens

    def meta_prompt(self, search: Search, rng: random.Random) -> str:
        top = sorted(search.candidates, key=lambda c: c.mean)[-self.shown:]  # ascending: the best last
        history = "\n".join(f"- ({c.mean:.0%}) {_strip_demos(c.text)}" for c in top)
        failed = rng.sample(search.failures, min(3, len(search.failures)))
        failures = "\n".join(f"- {f['state']} Answer: {f['answer']} ({f['caption']})" for f in failed) or "- none yet"
        return META_PROMPT.format(about=self.about, history=history, failures=failures)

    def propose(self, search: Search, n: int, rng: random.Random) -> list[tuple[str, int | None]]:
        prompts = [self.meta_prompt(search, rng) for _ in range(n)]
        samples = self.model.generate(prompts, constrained=False, temperature=1.0,
                                      max_new_tokens=self.max_new_tokens, seed=rng.randrange(2**31))
        best = search.candidates.index(search.best())
        out: list[tuple[str, int | None]] = []
        for sample in samples:
            keep_new(search, out, " ".join(sample.text.split()), best)
        return out


@dataclass
class Episode:
    """What the search keeps of one greedy episode from a training state."""

    key: str
    description: str
    success: bool
    first_moves: list[str]
    one_action: bool  # succeeded with its first move list alone
    caption: str = ""


Evaluate = Callable[[str, Sequence[Any]], list[Episode]]  # (strategy text, start states) -> episodes


def run_round(search: Search, proposers: Sequence[Proposer], per_round: int, train_states: Sequence[Any],
              evaluate: Evaluate, rng: random.Random, check: Callable[[], None] = lambda: None) -> list[Candidate]:
    """One round: every proposer's new strategies, each scored on every training state;
    returns the round's candidates. `check` runs before each one (a kill stops there,
    and the caller keeps the search as of the last whole round)."""
    round_no = search.rounds_done + 1
    first = len(search.candidates)
    for proposer in proposers:
        for text, parent in proposer.propose(search, per_round, rng):
            check()
            score(search, Candidate(text, proposer.name, round_no, parent=parent), train_states, evaluate)
    search.rounds_done = round_no
    search.curve.append(curve_point(search, proposers))
    return search.candidates[first:]


def score(search: Search, candidate: Candidate, train_states: Sequence[Any], evaluate: Evaluate) -> Candidate:
    """Play `candidate` from every training state; keep its scores, successes and failures."""
    episodes = evaluate(candidate.text, train_states)
    search.evaluations += len(episodes)
    for ep in episodes:
        record(search, ep)
        candidate.scores[ep.key] = 1.0 if ep.success else 0.0
        answers, answer = search.greedy_answers.setdefault(ep.key, []), format_moves(ep.first_moves)
        if answer not in answers:
            answers.append(answer)
    search.candidates.append(candidate)
    return candidate


def record(search: Search, ep: Episode) -> None:
    """What one training episode teaches the search: its state's text, a one-action
    success (the shortest kept) or a failure (the last 50 kept, for the llm proposer)."""
    if ep.key not in search.train_keys:  # never: the search plays training states only
        raise RuntimeError(f"the search evaluated a state outside its training states: {ep.key}")
    search.descriptions.setdefault(ep.key, ep.description)
    if ep.success and ep.one_action:
        known = search.successes.get(ep.key)
        if known is None or len(ep.first_moves) < len(known):
            search.successes[ep.key] = list(ep.first_moves)
    elif not ep.success:
        search.failures.append({"state": ep.description, "answer": format_moves(ep.first_moves),
                                "caption": ep.caption})
        del search.failures[:-50]


def curve_point(search: Search, proposers: Sequence[Proposer]) -> dict[str, Any]:
    """The round's point: the best training score so far, overall and by proposer."""
    point: dict[str, Any] = {"round": search.rounds_done, "evaluations": search.evaluations,
                             "best": search.best().mean, "front": len(search.front()),
                             "answers_per_state": search.answers_per_state,
                             "candidates": len(search.candidates)}
    for p in proposers:
        own = [c.mean for c in search.candidates if c.proposer == p.name]
        point[f"best_{p.name}"] = max(own) if own else None
    return point


def split_states(pool: Sequence[Any], train: int, heldout: int | None, seed: int) -> tuple[list[Any], list[Any]]:
    """Disjoint training and held-out start states, a seeded shuffle of `pool` (held-out:
    `heldout` of the rest, or all of it when None)."""
    order = list(pool)
    random.Random(seed).shuffle(order)
    if train >= len(order):
        raise ValueError(f"{train} training states leave none of the env's {len(order)} start states to hold out; "
                         f"use fewer (at most {len(order) - 1})")
    rest = order[train:]
    return order[:train], rest if heldout is None else rest[:heldout]
