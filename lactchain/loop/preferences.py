"""Preference pairs: which of two move lists from the SAME start state is better.

Labelers write to one table (`pairs`): the critic (advantage of one action),
stored episodes (seed 000's "DPO 2": steps whose states match, ranked by return),
humans (TUI) and LLM judges. The first public attempt produced an empty dataset,
would have made chosen == rejected and never reset the env to the sampled state;
here every candidate is executed from its recorded start state, pairs need
different move lists and a margin, and every dropped candidate is counted.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol, Sequence

from lactchain.config import Config, option
from lactchain.envs.catalog import DEFAULT_ENV, EnvState, TextEnv, env_field, make_env, normalize_env_field
from lactchain.envs.replay import deal_seeds, random_moves, stored_state
from lactchain.loop.labelers import (
    Candidate,
    CriticLabeler,
    Group,
    Labeler,
    OracleLabeler,
    execute_candidate,
    one_step_advantage,
    ranking_accuracy,
)
from lactchain.moves import FAILED, format_moves
from lactchain.prompts import PromptSpec

advantage = one_step_advantage  # the name the console and older callers use

MIN_TEMPERATURE = 0.7
DROP_REASONS = ("parse_failure", "identical_lists", "margin_too_small", "too_few_candidates")



@dataclass
class DrawConfig(Config):
    """How `draw_groups` samples candidates: k move lists per start state, each executed
    from that exact state (on a stochastic env, on the same seeded deals)."""

    samples: int = option(4, "Move lists drawn per state (k >= 2).", short="-k", min=1, max=256,
                          form="Samples per state")
    temperature: float = option(1.0, f"Sampling temperature (>= {MIN_TEMPERATURE} for diversity).", short="-t",
                                min=MIN_TEMPERATURE)
    constrained: bool = option(True, "Grammar-constrained move lists (default), or free text + lenient parsing.",
                               flag="--constrained", negative="--free")
    seed: int = option(0, "Seed of the samples and the deals.", min=0)
    env: str = env_field()
    deals: int = option(16, "Stochastic envs (blackjack): deals every candidate of a start state is played on (the "
                        "same cards for all of them); the labeler averages over them. The grid is deterministic and "
                        "plays once.", min=1, max=1024)
    # Not command-line options today.
    batch_states: int = option(8, "Start states per batched generate call.", min=1, cli=False)
    include_greedy: bool = option(False, "Add each state's greedy answer as one more candidate.", cli=False)

    def check(self) -> None:
        normalize_env_field(self)


@dataclass
class CollectConfig(DrawConfig):
    """`collect_pairs`: sampling as `DrawConfig` (at least 2 lists per state: a pair needs
    two), then best vs worst by the labeler's advantage when they differ by the margin."""

    samples: int = option(4, "Move lists drawn per state (k >= 2).", short="-k", min=2, max=256,
                          form="Samples per state")
    seed: int = option(0, "Seed of the samples and the deals.", min=0, max=2**32 - 1)
    gamma: float | None = option(None, "Discount in A = R + gamma V(s') - V(s); default: the critic's.", min=0.0,
                                 max=0.999999)
    margin: float = option(0.5, "Minimum advantage gap between chosen and rejected.", min=0.0)


DEFAULT_GAMMA = 0.9  # collect_pairs' discount when neither the config nor the labeler gives one


class ValueFn(Protocol):
    def values(self, states: list[EnvState]) -> list[float]: ...


@dataclass
class PairBatch:
    """Pairs ready for the registry, the scored groups they came from, and why
    everything else was dropped."""

    pairs: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    candidates: int = 0
    groups: list[Group] = field(default_factory=list)
    ranking: dict[str, Any] = field(default_factory=dict)  # vs the oracle, see labelers.ranking_accuracy

    def stats(self) -> dict[str, Any]:
        return {
            "pairs": len(self.pairs),
            "candidates": self.candidates,
            "distinct_lists": sum(len({tuple(c.moves) for c in g.candidates}) for g in self.groups),
            **{f"dropped_{r}": int(self.dropped.get(r, 0)) for r in DROP_REASONS},
            **self.ranking,
        }


def sample_start_states(env: TextEnv, n: int, seed: int = 0, memory: Sequence[Any] | None = None) -> list[Any]:
    """Uniform over the env's start states (the grid: cells x orientations, goal cells
    excluded), or from `memory`."""
    rng = random.Random(seed)
    pool = list(memory) if memory else list(env.start_states())
    if not pool:
        raise ValueError("no start states to sample from")
    return [rng.choice(pool) for _ in range(n)]


def best_vs_worst(cands: list[Candidate], margin: float, dropped: Counter) -> tuple[Candidate, Candidate] | None:
    """The highest- and lowest-advantage candidates with different move lists, if
    they differ by more than `margin`; otherwise count why not."""
    valid = [c for c in cands if c.mode != FAILED]
    dropped["parse_failure"] += len(cands) - len(valid)
    if len(valid) < 2:
        dropped["too_few_candidates"] += len(valid)
        return None
    distinct: dict[tuple[str, ...], Candidate] = {}
    for c in valid:
        key = tuple(c.moves)
        if key not in distinct or c.advantage > distinct[key].advantage:
            distinct[key] = c
    dropped["identical_lists"] += len(valid) - len(distinct)
    if len(distinct) < 2:
        dropped["identical_lists"] += len(distinct)  # the one list left has nothing to pair with
        return None
    ranked = sorted(distinct.values(), key=lambda c: c.advantage, reverse=True)
    best, worst = ranked[0], ranked[-1]
    if best.advantage - worst.advantage <= margin:
        dropped["margin_too_small"] += len(distinct)
        return None
    dropped["margin_too_small"] += len(distinct) - 2  # the middle candidates are unused
    return best, worst


def draw_groups(
    actor: Any,
    states: Sequence[EnvState],
    config: DrawConfig,
    *,
    prompt: PromptSpec | None = None,
    env_kwargs: dict[str, Any] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[Group]:
    """Sample `config.samples` move lists per start state (plus the greedy answer when
    `config.include_greedy`) and execute each from that exact state (on a stochastic
    env, on the same `config.deals` seeded deals for every candidate of a state)."""
    samples, temperature, constrained, seed = config.samples, config.temperature, config.constrained, config.seed
    batch_states, include_greedy, deals = config.batch_states, config.include_greedy, config.deals
    env = make_env(config.env, **{"moves": tuple(actor.moves), **(env_kwargs or {})})
    prompt = prompt or PromptSpec.for_env(env, moves=actor.moves)
    groups: list[Group] = []
    for start in range(0, len(states), batch_states):
        chunk = list(states[start : start + batch_states])
        prompts = [prompt.render(env.describe(s)) for s in chunk]
        drawn = actor.generate(prompts, constrained=constrained, temperature=temperature, num_samples=samples,
                               seed=seed + start)
        greedy = actor.generate(prompts, constrained=constrained, temperature=0.0) if include_greedy else []
        for i, (state, text) in enumerate(zip(chunk, prompts)):
            group = Group(state, text, seeds=deal_seeds(env, seed + start + i, deals))
            picks = [(x, "sample") for x in drawn[i * samples : (i + 1) * samples]]
            picks += [(greedy[i], "greedy")] if include_greedy else []
            for sample, source in picks:
                group.candidates.append(execute_candidate(env, group, sample.moves, sample.text, sample.mode, source))
            groups.append(group)
        if on_progress is not None:
            on_progress(len(chunk))
    return groups


def add_exploration(groups: Sequence[Group], env: TextEnv, per_state: int, seed: int = 0) -> int:
    """Append `per_state` random move lists (distinct from the group's own) to every
    group, executed from its state: candidates the labeler ranks beside the actor's
    samples, so the search is not limited to what the actor already says. Env steps
    only; returns how many were added."""
    rng = random.Random(seed)
    added = 0
    for g in groups:
        seen = {tuple(c.moves) for c in g.candidates}
        mine = 0
        for _ in range(per_state * 4):  # short lists repeat; stop trying after a while
            if mine >= per_state:
                break
            moves = random_moves(env, rng)
            if moves in seen:
                continue
            seen.add(moves)
            g.candidates.append(execute_candidate(env, g, moves, source="explore"))
            mine += 1
        added += mine
    return added


OWN_SOURCES = ("greedy", "sample")  # what the actor itself answers


def worse_than(chosen: Candidate, cands: Sequence[Candidate], margin: float, n: int) -> list[Candidate]:
    """Up to `n` distinct move lists of the group scored more than `margin` below `chosen`:
    the actor's own answers first (greedy, then samples, worst first: what the model
    says now is what a preference loss must push down), then the rest (explore, stitched),
    worst first."""
    best: dict[tuple[str, ...], Candidate] = {}
    for c in cands:
        key = tuple(c.moves)
        if c.mode == FAILED or key == tuple(chosen.moves) or chosen.advantage - c.advantage <= margin:
            continue
        if key not in best or c.advantage > best[key].advantage:
            best[key] = c
    order = sorted(best.values(), key=lambda c: (c.source not in OWN_SOURCES, c.source != "greedy", c.advantage))
    return order[:n]


def pairs_against(groups: Sequence[Group], chosen: Callable[[Group], Candidate | None], labeler: Labeler,
                  margin: float, per_state: int, out: PairBatch) -> PairBatch:
    """Each group's `chosen` list (the loop: the state's elite) against up to `per_state`
    worse lists of the same group (`worse_than`), as registry pair rows: one state
    carries several pairs, each with the labeler's score gap as its margin."""
    for g in groups:
        out.candidates += len(g.candidates)
        best = chosen(g)
        if best is None:
            out.dropped["too_few_candidates"] += len(g.candidates)
            continue
        rejected = worse_than(best, g.candidates, margin, per_state)
        if not rejected:
            out.dropped["margin_too_small"] += len(g.candidates)
            continue
        seeds = {"seeds": list(g.seeds)} if g.seeds != (None,) else {}
        for worse in rejected:
            out.pairs.append(pair_row(g.state, g.prompt, best, worse, labeler=labeler.name,
                                      meta={"v_state": g.baseline, "gamma": labeler.gamma, **seeds}))
    out.groups.extend(groups)
    return out


def pairs_from_groups(groups: Sequence[Group], labeler: Labeler, margin: float, out: PairBatch) -> PairBatch:
    """Best vs worst of every scored group, as registry pair rows."""
    for g in groups:
        out.candidates += len(g.candidates)
        picked = best_vs_worst(g.candidates, margin, out.dropped)
        if picked is None:
            continue
        best, worst = picked
        seeds = {"seeds": list(g.seeds)} if g.seeds != (None,) else {}
        out.pairs.append(pair_row(g.state, g.prompt, best, worst, labeler=labeler.name,
                                  meta={"v_state": g.baseline, "gamma": labeler.gamma, **seeds}))
    out.groups.extend(groups)
    return out


def collect_pairs(
    actor: Any,
    labeler: Labeler | ValueFn,
    states: Sequence[EnvState],
    config: CollectConfig,
    *,
    prompt: PromptSpec | None = None,
    env_kwargs: dict[str, Any] | None = None,
    oracle: OracleLabeler | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> PairBatch:
    """Sample `config.samples` move lists per start state, execute each from that exact
    state, score them with `labeler` (a critic given bare is the critic labeler, with
    `config.gamma`) and keep best vs worst. With `oracle`, the pairs' ranking accuracy
    against it is measured too."""
    if not hasattr(labeler, "score"):
        labeler = CriticLabeler(labeler, DEFAULT_GAMMA if config.gamma is None else config.gamma)
    groups = draw_groups(actor, states, config, prompt=prompt, env_kwargs=env_kwargs, on_progress=on_progress)
    labeler.score(groups)
    out = pairs_from_groups(groups, labeler, config.margin, PairBatch())
    if oracle is not None:
        out.ranking = ranking_accuracy(out.pairs, oracle)
    return out


def pair_row(state: Any, prompt: str, chosen: Candidate, rejected: Candidate, labeler: str, meta: dict) -> dict[str, Any]:
    return {
        "state": state.as_dict(),
        "prompt": prompt,
        "chosen": list(chosen.moves),
        "rejected": list(rejected.moves),
        "chosen_score": chosen.advantage,
        "rejected_score": rejected.advantage,
        "margin": chosen.advantage - rejected.advantage,
        "labeler": labeler,
        "status": "labeled",
        "meta": {
            **meta,
            "chosen_reward": chosen.reward,
            "rejected_reward": rejected.reward,
            "chosen_next_state": chosen.next_state.as_dict(),
            "rejected_next_state": rejected.next_state.as_dict(),
            "chosen_done": chosen.done,
            "rejected_done": rejected.done,
        },
    }


def _returns(rewards: list[float], gamma: float) -> list[float]:
    out, g = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        g = rewards[t] + gamma * g
        out[t] = g
    return out


def pairs_from_steps(
    steps: Iterable[dict[str, Any]],
    *,
    gamma: float = 0.9,
    margin: float = 0.5,
    prompt: PromptSpec | None = None,
    env_kwargs: dict[str, Any] | None = None,
    env: str = DEFAULT_ENV,
) -> PairBatch:
    """Seed 000's "DPO 2": steps of stored episodes whose states match, with
    different move lists, ranked by their Monte-Carlo return from that step."""
    text_env = make_env(env, **(env_kwargs or {}))
    by_episode: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in steps:
        by_episode[row["episode_id"]].append(row)
    by_state: dict[Any, list[Candidate]] = defaultdict(list)
    for rows in by_episode.values():
        rows.sort(key=lambda r: r["t"])
        for row, g in zip(rows, _returns([float(r["reward"]) for r in rows], gamma)):
            by_state[text_env.parse_state(row["state"])].append(
                Candidate(list(row["moves"] or []), row.get("completion") or "", row["parse_mode"], float(row["reward"]),
                          stored_state(text_env, row["next_state"]), bool(row["done"]), advantage=g)
            )
    prompt = prompt or PromptSpec.for_env(text_env)
    out = PairBatch()
    for state, group in by_state.items():
        out.candidates += len(group)
        picked = best_vs_worst(group, margin, out.dropped)
        if picked is None:
            continue
        best, worst = picked
        out.pairs.append(pair_row(state, prompt.render(text_env.describe(state)), best, worst, "episodes", {"gamma": gamma, "score": "return"}))
    return out


def to_dataset(pairs: Sequence[dict[str, Any]], chat_prompt: Callable[[str], str], eos_token: str):
    """TRL's preference format: prompt (chat-template rendered), chosen and rejected
    completions as move-list text ending with EOS so the model learns to stop."""
    from datasets import Dataset

    rows = {"prompt": [], "chosen": [], "rejected": []}
    for p in pairs:
        if list(p["chosen"]) == list(p["rejected"]):
            continue  # never train on a pair that says nothing
        rows["prompt"].append(chat_prompt(p["prompt"]))
        rows["chosen"].append(format_moves(p["chosen"]) + eos_token)
        rows["rejected"].append(format_moves(p["rejected"]) + eos_token)
    return Dataset.from_dict(rows)
