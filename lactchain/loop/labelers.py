"""Labelers: who decides which of several move lists from the SAME start state is better.

Every labeler scores candidate groups in place (`Candidate.advantage`), so pair
building, best-of-K selection and the ranking-accuracy check do not care which
one ran:

- `critic`  A = R + gamma * V(s') * (1 - done) - V(s) with a learned critic
  (or `Q(s, moves) - V(s)` with its Q head: `scorer="q"`). The default.
- `rollout` A = R + gamma * G_H(s') * (1 - done) - G_H(s), where G_H(s) is the
  discounted return the CURRENT greedy actor actually obtains from s in at most
  H actions: multi-step, no critic needed. Greedy decoding is deterministic, so
  the actor's answer per state is computed once (one batched generate) and the
  continuations are simulated from that table.
- `oracle`  A = R + gamma * V*(s') * (1 - done) - V*(s) from the env's exact solver
  (where the solver knows a move list's exact expected return, as Blackjack's does,
  A = E[return of the list] - V*(s), free of the cards' noise). A DIAGNOSTIC upper
  bound that separates "the critic ranks badly" from "the trainer learns badly";
  never a default.
- `judge`   an LLM judge (Motif) compares every two candidates of a group by their
  captions (the start state's text + what happened); A = (wins - losses) / (K - 1).
  By default the actor judges its own candidates (RLAIF); stored as labeler `llm`.

`ranking_accuracy` measures any labeler's pairs against the oracle.

On a stochastic env (Blackjack) every candidate of a group is executed on the same
`deals` seeded deals (common random numbers: two lists are compared on the same
cards), and value labelers average the one-step advantage over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from lactchain.envs.catalog import EnvState
# Moving and replaying envs lives in lactchain.envs.replay; the names stay importable from here.
from lactchain.envs.replay import EndState, deal_seeds, execute_from, random_moves, stored_state  # noqa: F401

LABELERS = ("critic", "rollout", "oracle", "judge")


@dataclass
class Candidate:
    """One move list drawn for a start state, executed from that exact state."""

    moves: list[str]
    text: str
    mode: str
    reward: float
    next_state: EnvState
    done: bool
    advantage: float = 0.0
    # Where it came from: "sample" (temperature), "greedy" (so a target is never worse
    # than what the actor already does), "elite" (best known before), "stitched",
    # "explore" (a random move list: search the labeler ranks, no LLM involved).
    source: str = "sample"
    # Stochastic envs: (reward, s', done) on each deal (reward/next_state/done are the first).
    outcomes: list[tuple[float, Any, bool]] | None = None

    def results(self) -> list[tuple[float, Any, bool]]:
        return self.outcomes or [(self.reward, self.next_state, self.done)]


@dataclass
class Group:
    """All candidates drawn from one start state; `baseline` is the labeler's V(s)."""

    state: Any  # the env's state (a grid State, a blackjack Hand, ...)
    prompt: str
    candidates: list[Candidate] = field(default_factory=list)
    baseline: float = 0.0
    seeds: tuple[int | None, ...] = (None,)  # the deals every candidate is executed on (see deal_seeds)


class Labeler(Protocol):
    name: str
    gamma: float

    def score(self, groups: Sequence[Group]) -> None:
        """Set `advantage` of every candidate and `baseline` of every group."""


def one_step_advantage(reward: float, v_next: float, v_state: float, done: bool, gamma: float) -> float:
    """A = R + gamma * V(s') * (1 - done) - V(s)."""
    return reward + gamma * v_next * (0.0 if done else 1.0) - v_state


class ValueLabeler:
    """One-step advantage from any state-value function `values(states) -> floats`."""

    def __init__(self, name: str, values: Any, gamma: float) -> None:
        self.name, self._values, self.gamma = name, values, float(gamma)

    def values(self, states: list[Any]) -> list[float]:
        """V of `states` (what the search in lactchain.loop.search grows lists toward)."""
        return list(self._values(states))

    def score(self, groups: Sequence[Group]) -> None:
        states = list(dict.fromkeys([g.state for g in groups]
                                    + [n for g in groups for c in g.candidates for _, n, done in c.results()
                                       if not done]))
        v = dict(zip(states, self._values(states)))
        for g in groups:
            g.baseline = v[g.state]
            for c in g.candidates:
                outs = c.results()
                c.advantage = sum(one_step_advantage(r, v.get(n, 0.0), g.baseline, done, self.gamma)
                                  for r, n, done in outs) / len(outs)


class CriticLabeler(ValueLabeler):
    """The learned critic: V-based one-step advantage, or Q(s, moves) - V(s)."""

    def __init__(self, critic: Any, gamma: float, scorer: str = "v") -> None:
        if scorer not in ("v", "q"):
            raise ValueError(f"scorer must be 'v' or 'q', got {scorer!r}")
        super().__init__("critic", critic.values, gamma)
        self.critic, self.scorer = critic, scorer

    def score(self, groups: Sequence[Group]) -> None:
        if self.scorer == "v":
            return super().score(groups)
        flat = [(g, c) for g in groups for c in g.candidates]
        q = self.critic.q_values([g.state for g, _ in flat], [c.moves for _, c in flat])
        v = dict(zip([g.state for g in groups], self.critic.values([g.state for g in groups])))
        for (g, c), qv in zip(flat, q):
            g.baseline = v[g.state]
            c.advantage = qv - g.baseline


class OracleLabeler(ValueLabeler):
    """Exact V* from the env's solver: the diagnostic upper bound (never a default)."""

    def __init__(self, env: Any, gamma: float) -> None:
        self.env = env
        self.solver = env.solver()
        if self.solver is None:
            raise ValueError(f"the oracle labeler needs an exact solver and {type(env).__name__} has none; "
                             "use --labeler critic or rollout")
        self.vstar = self.solver.values(gamma)
        super().__init__("oracle", lambda states: [self.vstar.get(s, 0.0) for s in states], gamma)

    def score(self, groups: Sequence[Group]) -> None:
        exact = getattr(self.solver, "plan_return", None)
        if exact is None:
            return super().score(groups)
        limit = self.env.max_moves_per_action
        for g in groups:
            g.baseline = self.solver.start_value(g.state)
            for c in g.candidates:
                c.advantage = exact(g.state, list(c.moves)[:limit], start=True) - g.baseline


class RolloutLabeler(ValueLabeler):
    """Scores by the discounted return the current greedy actor obtains from s' in
    at most `horizon` actions (multi-step, executed in the env, no critic)."""

    def __init__(self, actor: Any, env: Any, gamma: float, horizon: int = 3,
                 prompt: Any = None, constrained: bool = True) -> None:
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.actor, self.env, self.horizon = actor, env, int(horizon)
        self.prompt, self.constrained = prompt, constrained
        super().__init__("rollout", self.greedy_returns, gamma)

    def greedy_policy(self, states: Sequence[EnvState]) -> dict[EnvState, list[str]]:
        """The actor's greedy move list for each state (one batched generate)."""
        from lactchain.prompts import PromptSpec

        prompt = self.prompt or PromptSpec.for_env(self.env, moves=self.actor.moves)
        todo = list(dict.fromkeys(states))
        samples = self.actor.generate([prompt.render(self.env.describe(s)) for s in todo],
                                      constrained=self.constrained, temperature=0.0)
        return {s: list(x.moves) for s, x in zip(todo, samples)}

    def greedy_returns(self, states: Sequence[EnvState]) -> list[float]:
        """G_H(s): discounted return of the greedy actor from each state, simulated in the env
        (on a stochastic env, on one seeded deal per state: reproducible, noisy)."""
        policy: dict[EnvState, list[str]] = {}
        frontier = [s for s in states if not self._is_goal(s)]
        # The states greedy play can visit within the horizon, asked for level by level.
        for _ in range(self.horizon):
            new = [s for s in dict.fromkeys(frontier) if s not in policy]
            if not new:
                break
            policy.update(self.greedy_policy(new))
            frontier = [nxt for s in new for _, nxt, done in [execute_from(self.env, s, policy[s])] if not done]
        stochastic = getattr(self.env, "stochastic", False)
        out = []
        for i, s in enumerate(states):
            g, discount, cur = 0.0, 1.0, s
            for t in range(self.horizon):
                if self._is_goal(cur):
                    break
                if cur not in policy:  # another deal led elsewhere than the look-ahead did
                    policy.update(self.greedy_policy([cur]))
                reward, cur, done = execute_from(self.env, cur, policy[cur], i * 1009 + t if stochastic else None)
                g += discount * reward
                discount *= self.gamma
                if done:
                    break
            out.append(g)
        return out

    def _is_goal(self, s: Any) -> bool:
        return self.env.is_terminal(s)


class JudgeLabeler:
    """Pairwise judgements of the candidates' captions, batched: each candidate meets its
    next `opponents` neighbours in the group (all pairs when K <= opponents + 1), so the
    cost grows with K, not K^2 (the pipeline adds hundreds of explore lists per state).
    A win counts +1, a loss -1, a tie or an unknown answer 0, averaged over the
    candidate's judgements. The baseline is 0 (a judge has no state value)."""

    gamma = 0.0

    def __init__(self, judge: Any, env: Any, env_name: str | None = None, batch_size: int = 16,
                 opponents: int = 3) -> None:
        if opponents < 1:
            raise ValueError(f"opponents must be >= 1, got {opponents}")
        self.judge, self.env, self.batch_size = judge, env, batch_size
        self.env_name = env_name or env.name  # the judge's prompt reads this env's description and goal
        self.opponents = opponents
        self.name = getattr(judge, "labeler", "llm")  # the registry's labeler for its pairs

    def caption(self, state: Any, moves: Sequence[str], seed: int | None = None) -> str:
        """What the candidate did on the group's first deal (the one its reward is from)."""
        self.env.reset(seed=seed, options={"state": state.as_dict()})
        _, _, _, _, info = self.env.step(list(moves))
        return f"{self.env.describe(state)} Then: {info['caption']}."

    def score(self, groups: Sequence[Group]) -> None:
        from lactchain.motif.captions import CaptionedEpisode
        from lactchain.motif.judge import FIRST, SECOND, judge_in_batches

        pairs, where = [], []
        for gi, g in enumerate(groups):
            g.baseline = 0.0
            episodes = [CaptionedEpisode(-1, "", g.state.as_dict(), None, self.caption(g.state, c.moves, g.seeds[0]), c.reward)
                        for c in g.candidates]
            k = len(episodes)
            ring = sorted({(min(i, (i + d) % k), max(i, (i + d) % k))
                           for i in range(k) for d in range(1, min(self.opponents, k - 1) + 1)})
            for i, j in ring:
                if episodes[i].caption != episodes[j].caption:
                    pairs.append((episodes[i], episodes[j]))
                    where.append((gi, i, j))
        tally = [[0.0] * len(g.candidates) for g in groups]
        count = [[0] * len(g.candidates) for g in groups]
        for (gi, i, j), verdict in zip(where, judge_in_batches(self.judge, pairs, self.env_name, self.batch_size)):
            sign = {FIRST: 1.0, SECOND: -1.0}.get(verdict.answer or "", 0.0)
            tally[gi][i] += sign
            tally[gi][j] -= sign
            count[gi][i] += 1
            count[gi][j] += 1
        for g, scores, counts in zip(groups, tally, count):
            for c, score, n in zip(g.candidates, scores, counts):
                c.advantage = score / max(1, n)


def execute_candidate(env: Any, group: Group, moves: Sequence[str], text: str = "", mode: str = "strict",
                      source: str = "sample") -> Candidate:
    """A candidate for `group`: `moves` executed from its state on each of its deals."""
    outs = [execute_from(env, group.state, moves, seed) for seed in group.seeds]
    reward, nxt, done = outs[0]
    return Candidate(list(moves), text, mode, reward, nxt, done, source=source,
                     outcomes=outs if len(outs) > 1 else None)


def make_labeler(name: str, *, env: Any, gamma: float, critic: Any = None, actor: Any = None,
                 horizon: int = 3, scorer: str = "v", prompt: Any = None, constrained: bool = True,
                 judge: Any = None) -> Labeler:
    """The labeler called `name`, with the pieces it needs (a clear error when one is missing).
    The judge labeler uses `judge`, else the actor as its own judge."""
    if name == "critic":
        if critic is None:
            raise ValueError("the critic labeler needs a trained critic (--critic-run, or let the pipeline train one)")
        return CriticLabeler(critic, gamma, scorer=scorer)
    if name == "rollout":
        if actor is None:
            raise ValueError("the rollout labeler needs the actor")
        return RolloutLabeler(actor, env, gamma, horizon=horizon, prompt=prompt, constrained=constrained)
    if name == "oracle":
        return OracleLabeler(env, gamma)
    if name == "judge":
        if judge is None and actor is None:
            raise ValueError("the judge labeler needs a judge or the actor (which then judges its own candidates)")
        if judge is None:
            from lactchain.motif.judge import LLMJudge

            judge = LLMJudge(actor)
        return JudgeLabeler(judge, env, env_name=env.name)
    raise ValueError(f"labeler must be one of {', '.join(LABELERS)}, not {name!r}")


def ranking_accuracy(pairs: Sequence[Mapping[str, Any]], oracle: OracleLabeler) -> dict[str, float | int]:
    """How often the oracle agrees with a labeler's chosen/rejected order.

    Each pair's two lists are re-executed from its start state and scored with
    the oracle's one-step advantage. `accuracy` = agreements / pairs the oracle
    does not call a tie (ties: both lists are equally good by V*, `ties` counts them)."""
    env = oracle.env
    agree = ties = 0
    for p in pairs:
        group = Group(env.parse_state(p["state"]), "", [], seeds=tuple(p.get("meta", {}).get("seeds") or (None,)))
        for side in ("chosen", "rejected"):
            group.candidates.append(execute_candidate(env, group, p[side]))
        oracle.score([group])
        a, b = (c.advantage for c in group.candidates)
        if abs(a - b) < 1e-9:
            ties += 1
        elif a > b:
            agree += 1
    decided = len(pairs) - ties
    return {"ranking_accuracy": agree / decided if decided else float("nan"), "ranking_pairs": len(pairs),
            "ranking_ties": ties}



def sampled_groups(env: Any, states: Sequence[Any], samples: Sequence[Any], k: int,
                   deals: Callable[[int], Sequence[int] | None]) -> list["Group"]:
    """GRPO's batch as a labeler sees it: the states come K at a time (each repeated for
    its K samples); each group is one state with its K sampled lists executed from it,
    on the deals `deals(i)` names for the group starting at row i."""
    groups = []
    for i in range(0, len(states), k):
        g = Group(states[i], "", seeds=deals(i))
        g.candidates = [execute_candidate(env, g, s.moves, s.text, s.mode) for s in samples[i:i + k]]
        groups.append(g)
    return groups
