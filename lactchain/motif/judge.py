"""LLM-judged preferences between captioned episodes (Motif, arXiv 2310.00166).

The judge reads an environment description, the goal and two captions, and answers
1, 2 or tie. Answers are parsed strictly; an unparsable one is asked again (sampled),
and after `retries` tries the pair is recorded as unknown, never as a label. The rule
judge answers from the true returns: the calibration reference for any LLM judge.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from lactchain.motif.captions import CaptionedEpisode
from lactchain.envs.catalog import env_class
from lactchain.prompts import PromptError, template_slots

FIRST, SECOND, TIE = "1", "2", "tie"
PAIRINGS = ("random", "state")


def env_texts(env: Any) -> tuple[str, str]:
    """(description, goal) the judge reads for an env: the env's own `judge_description`
    and `judge_goal` (an env, its short name or gymnasium id); any other text is taken
    as the description itself, with a generic goal."""
    cls = env
    if isinstance(env, str):
        try:
            cls = env_class(env)
        except ValueError:
            return env, "do well"
    return cls.judge_description, cls.judge_goal


# Motif's prompt shape: system-style context, the two observations, then a constrained answer format.
JUDGE_TEMPLATE = """You are judging two episodes of {env_description}
The player's goal: {goal}.

Episode 1: {caption_1}
Episode 2: {caption_2}

Which episode shows the better play towards the goal? Answer with exactly one of: 1, 2, tie.
Answer:"""
JUDGE_PROMPT_VERSION = "motif-v1"
REQUIRED_JUDGE_SLOTS = {"caption_1", "caption_2"}


def check_judge_template(template: str) -> str:
    """A judge prompt must show both captions (else it judges nothing)."""
    slots = template_slots(template)
    missing = REQUIRED_JUDGE_SLOTS - slots
    if missing:
        slots_text = ", ".join("{" + s + "}" for s in sorted(missing))
        raise PromptError(f"the judge prompt lacks {slots_text}: it must show both captions "
                          "({caption_1} and {caption_2})")
    unknown = slots - REQUIRED_JUDGE_SLOTS - {"env_description", "goal"}
    if unknown:
        raise PromptError(f"the judge prompt uses unknown slot(s) {sorted(unknown)}; known: caption_1, caption_2, "
                          "env_description, goal")
    return template


def render_judge_prompt(env: Any, first: str, second: str, template: str = JUDGE_TEMPLATE) -> str:
    description, goal = env_texts(env)
    return check_judge_template(template).format(env_description=description, goal=goal, caption_1=first,
                                                 caption_2=second)


_ANSWER_RE = re.compile(r"^\W*(?:episode\s*)?(1|2|one|two|tie|neither|equal|same|draw)\b", re.IGNORECASE)
_BOTH_RE = re.compile(r"^\W*(?:episode\s*)?(1|2)\s*(?:,|or|and|/|-)\s*(?:episode\s*)?(1|2)\b", re.IGNORECASE)
_WORDS = {"1": FIRST, "one": FIRST, "2": SECOND, "two": SECOND}


def parse_judgement(text: str | None) -> str | None:
    """'1', '2' or 'tie' from the start of an answer; None when it says none of them
    (empty, garbage, or both numbers with no decision)."""
    if not isinstance(text, str) or not text.strip():
        return None
    m = _ANSWER_RE.match(text.strip())
    if not m or _BOTH_RE.match(text.strip()):  # "1, 2" or "1 or 2" names both: no decision
        return None
    word = m.group(1).lower()
    return _WORDS.get(word, TIE)


@dataclass(frozen=True)
class Judgement:
    answer: str | None  # FIRST, SECOND, TIE or None (unknown after every try)
    raw: str  # the last raw answer
    tries: int


class RuleJudge:
    """Prefers the episode with the higher true return; equal returns are a tie."""

    name = "rule (true return)"
    labeler = "oracle"

    def judge(self, pairs: Sequence[tuple[CaptionedEpisode, CaptionedEpisode]], env: str) -> list[Judgement]:
        out = []
        for a, b in pairs:
            answer = FIRST if a.true_return > b.true_return else SECOND if b.true_return > a.true_return else TIE
            out.append(Judgement(answer, answer, 1))
        return out


class LLMJudge:
    """An actor preset as judge: batched free-text generation, greedy first, then
    sampled retries for the answers that did not parse."""

    labeler = "llm"

    def __init__(self, actor: Any, retries: int = 3, template: str = JUDGE_TEMPLATE, max_new_tokens: int = 8,
                 seed: int = 0):
        if retries < 1:
            raise ValueError("retries must be >= 1")
        self.actor, self.retries, self.template = actor, retries, check_judge_template(template)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.name = getattr(actor, "name", "llm")

    def prompts(self, pairs: Sequence[tuple[CaptionedEpisode, CaptionedEpisode]], env: str) -> list[str]:
        return [render_judge_prompt(env, a.caption, b.caption, self.template) for a, b in pairs]

    def judge(self, pairs: Sequence[tuple[CaptionedEpisode, CaptionedEpisode]], env: str) -> list[Judgement]:
        prompts = self.prompts(pairs, env)
        raw = [""] * len(prompts)
        answers: list[str | None] = [None] * len(prompts)
        tries = [0] * len(prompts)
        todo = list(range(len(prompts)))
        for attempt in range(self.retries):
            if not todo:
                break
            samples = self.actor.generate([prompts[i] for i in todo], constrained=False,
                                          temperature=0.0 if attempt == 0 else 0.8,
                                          max_new_tokens=self.max_new_tokens, seed=self.seed + attempt)
            for i, sample in zip(todo, samples):
                raw[i], tries[i] = sample.text, tries[i] + 1
                answers[i] = parse_judgement(sample.text)
            todo = [i for i in todo if answers[i] is None]
        return [Judgement(a, r, t) for a, r, t in zip(answers, raw, tries)]


class ForcedChoiceJudge:
    """An actor preset as judge that always answers: it reads the model's next-token
    probabilities of '1', '2' and 'tie' after the prompt and takes the likeliest, no
    generation and no parsing. With `both_orders` (the default) each pair is also asked
    with the captions swapped and the two readings are added (episode 1 first = '1' there
    and '2' here), so a model that always prefers a position cannot win by it."""

    labeler = "llm"
    OPTIONS = (FIRST, SECOND, TIE)

    def __init__(self, actor: Any, template: str = JUDGE_TEMPLATE, batch_size: int = 16, both_orders: bool = True):
        self.actor, self.template, self.batch_size = actor, check_judge_template(template), batch_size
        self.both_orders = both_orders
        self.name = f"{getattr(actor, 'name', 'llm')} (forced choice{', both orders' if both_orders else ''})"

    def judge(self, pairs: Sequence[tuple[CaptionedEpisode, CaptionedEpisode]], env: str) -> list[Judgement]:
        prompts = [render_judge_prompt(env, a.caption, b.caption, self.template) for a, b in pairs]
        if self.both_orders:
            prompts += [render_judge_prompt(env, b.caption, a.caption, self.template) for a, b in pairs]
        logps = self.actor.choice_logprobs(prompts, self.OPTIONS, self.batch_size)
        out = []
        for i in range(len(pairs)):
            scores = list(logps[i])
            if self.both_orders:  # swapped: its '2' says the first episode, its '1' the second
                swapped = logps[len(pairs) + i]
                scores = [scores[0] + swapped[1], scores[1] + swapped[0], scores[2] + swapped[2]]
            best = max(range(len(self.OPTIONS)), key=lambda k: scores[k])
            raw = ", ".join(f"{o}: {lp:.2f}" for o, lp in zip(self.OPTIONS, scores))
            out.append(Judgement(self.OPTIONS[best], f"log p {raw}", 1))
        return out


def pair_episodes(episodes: Sequence[CaptionedEpisode], n: int, how: str = "state",
                  seed: int = 0) -> list[tuple[CaptionedEpisode, CaptionedEpisode]]:
    """`n` pairs of distinct episodes. 'random': any two. 'state': two episodes from the
    same start state (the same dealt hand), so the judge compares play, not luck of the
    deal; states with a single episode are skipped."""
    if how not in PAIRINGS:
        raise ValueError(f"pairing must be one of {', '.join(PAIRINGS)}, got {how!r}")
    if len(episodes) < 2:
        raise ValueError(f"{len(episodes)} finished episode(s): pairs need at least 2")
    rng = random.Random(seed)
    if how == "random":
        return [tuple(rng.sample(list(episodes), 2)) for _ in range(n)]  # type: ignore[misc]
    groups: dict[str, list[CaptionedEpisode]] = {}
    for ep in episodes:
        groups.setdefault(repr(sorted(ep.start_state.items())), []).append(ep)
    usable = [g for g in groups.values() if len({e.caption for e in g}) > 1]
    if not usable:
        raise ValueError("no start state has two episodes with different captions: collect more episodes, "
                         "from more than one policy, or pair with --pairing random")
    return [tuple(rng.sample(rng.choice(usable), 2)) for _ in range(n)]  # type: ignore[misc]


def label_rows(pairs: Sequence[tuple[CaptionedEpisode, CaptionedEpisode]], judgements: Sequence[Judgement],
               judge: Any, env: str, prompt_version: str = JUDGE_PROMPT_VERSION) -> list[dict[str, Any]]:
    """Rows for the registry's `pairs` table: chosen = the preferred caption; a tie keeps
    the order with status 'tie'; an unknown answer is status 'skipped' (never a label)."""
    rows = []
    for (a, b), j in zip(pairs, judgements):
        first, second = (b, a) if j.answer == SECOND else (a, b)
        truth = FIRST if a.true_return > b.true_return else SECOND if b.true_return > a.true_return else TIE
        rows.append({
            "state": a.start_state, "prompt": "", "chosen": first.caption, "rejected": second.caption,
            "chosen_score": first.true_return, "rejected_score": second.true_return,
            "margin": first.true_return - second.true_return, "labeler": judge.labeler,
            "status": {None: "skipped", TIE: "tie"}.get(j.answer, "labeled"),
            "meta": {"judge": judge.name, "answer": j.answer or "unknown", "raw_answer": j.raw, "tries": j.tries,
                     "prompt_version": prompt_version, "env": env, "true_preference": truth,
                     "episode_ids": [first.episode_id, second.episode_id]},
        })
    return rows


def agreement(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """How often the judge's answer is the true preference (ties count; unknowns do not).
    None when the judge answered none of the pairs: no agreement is not 0 % agreement."""
    answered = [r for r in rows if r["meta"]["answer"] != "unknown"]
    if not rows:
        return {"pairs": 0, "answered_rate": 0.0, "agreement": None}
    agree = 0
    for r in answered:
        truth, answer = r["meta"]["true_preference"], r["meta"]["answer"]
        # chosen is listed first: the judge agrees when the truth prefers chosen, or both say tie
        agree += (answer == TIE and truth == TIE) or (answer != TIE and r["margin"] > 0)
    return {"pairs": len(rows), "answered_rate": len(answered) / len(rows),
            "agreement": agree / len(answered) if answered else None}


def agreement_text(stats: dict[str, Any]) -> str:
    """`agreement 0.812, answered 0.950`, or `agreement n/a (answered none)`."""
    if stats["agreement"] is None:
        return "agreement n/a (answered none)"
    return f"agreement {stats['agreement']:.3f}, answered {stats['answered_rate']:.3f}"


def judge_in_batches(judge: Any, pairs: Sequence[tuple[CaptionedEpisode, CaptionedEpisode]], env: str,
                     batch_size: int = 16, on_batch: Callable[[list[Judgement], int], None] | None = None
                     ) -> list[Judgement]:
    """Judge in batches (one generate call each), reporting after every batch."""
    out: list[Judgement] = []
    for start in range(0, len(pairs), batch_size):
        batch = judge.judge(pairs[start:start + batch_size], env)
        out.extend(batch)
        if on_batch is not None:
            on_batch(batch, start)
    return out
