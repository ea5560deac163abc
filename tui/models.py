"""Model loading for the TUI, kept behind small functions so the heavy imports
(torch, transformers, xgrammar) happen inside a worker thread, never at import time.

The TUI talks to an actor through the shape of `lactchain.models.actor.Actor`:

    actor.stream(prompt, on_text, *, constrained, temperature, max_new_tokens, seed) -> Sample
    actor.generate(prompts, *, constrained, temperature, max_new_tokens, seed, num_samples) -> list[Sample]
    actor.chat_prompt(user_text) -> str           (optional)

where a Sample has `text`, `moves`, `mode`, `logprob`, `n_tokens`. `OracleActor`
has that shape too: it answers with the exact optimal move list read off the
prompt (each env's `plan_from_prompt`: the grid's BFS plan, Blackjack's solver
move, ...), no model at all, which
makes a fast, deterministic stand-in for demos, snapshots and the tmux test
(`--actor oracle`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from lactchain.envs.catalog import oracle_plan
from lactchain.moves import ALL_MOVES, FAILED, format_moves, parse_moves

ORACLE = "oracle"
ProgressFn = Callable[[str, "float | None"], None]


@dataclass
class OracleSample:
    text: str
    moves: list[str]
    mode: str
    logprob: float = 0.0
    n_tokens: int = 0


_MENU_RE = re.compile(r"^\s*\d+\.\s*(.+?)\s*$", re.M)  # the prompt's move menu: "1. hit"


def _chunks(text: str) -> list[str]:
    """Split text into word-ish pieces, the way a tokenizer would stream it."""
    return re.findall(r"\s*\S+?(?=\s|'|,|\]|$)|\s*[',\]\[]", text) or [text]


class OracleActor:
    """A model-free actor that plays optimally (planner), or near-optimally when sampling."""

    name = ORACLE

    def __init__(self, max_moves: int = 8, delay: float = 0.0):
        self.max_moves = max_moves
        self.delay = delay

    def chat_prompt(self, user_text: str) -> str:
        return user_text

    def _plan(self, prompt: str) -> tuple[list[str], tuple[str, ...]]:
        """(the optimal move list, the env's moves) for the state the prompt describes: the
        catalog env that reads it plans (`plan_from_prompt`); ([], the grid's moves) when
        none does."""
        found = oracle_plan(prompt)
        if found is None:
            return [], ALL_MOVES
        moves, known = found
        return moves[: self.max_moves], known

    def _sample(self, prompt: str, temperature: float, seed: int | None, index: int) -> OracleSample:
        moves, known = self._plan(prompt)
        if temperature > 0 and index > 0:
            rng = random.Random((seed or 0) * 1000 + index)
            vocab = [m for m in _MENU_RE.findall(prompt) if m in known] or list(known[:2])
            moves = list(moves)
            for _ in range(rng.randint(1, 2)):
                if moves and rng.random() < 0.5:
                    moves.pop(rng.randrange(len(moves)))
                else:
                    moves.insert(rng.randrange(len(moves) + 1), rng.choice(vocab))
            moves = moves[: self.max_moves] or [vocab[0]]
        text = format_moves(moves) if moves else "I do not know."
        parsed = parse_moves(text, known)
        return OracleSample(text, parsed.moves, parsed.mode, 0.0, len(_chunks(text)))

    def generate(self, prompts: Sequence[str], *, constrained: bool = True, temperature: float = 0.0,
                 max_new_tokens: int = 48, seed: int | None = None, num_samples: int = 1,
                 seeds: Sequence[int] | None = None) -> list[OracleSample]:
        if seeds is not None:
            return [self._sample(p, temperature, s, i) for p, s in zip(prompts, seeds) for i in range(num_samples)]
        return [self._sample(p, temperature, seed, i) for p in prompts for i in range(num_samples)]

    def stream(self, prompt: str, on_text: Callable[[str], None], *, constrained: bool = True,
               temperature: float = 0.0, max_new_tokens: int = 48, seed: int | None = None) -> OracleSample:
        import time

        sample = self._sample(prompt, temperature, seed, 0)
        for piece in _chunks(sample.text):
            if self.delay:
                time.sleep(self.delay)
            on_text(piece)
        return sample


def _progress_adapter(progress: ProgressFn | None) -> Callable[..., None] | None:
    """Accept whatever the library reports (a message, a fraction, both, or keywords)."""
    if progress is None:
        return None

    def report(*args: Any, **kwargs: Any) -> None:
        message, fraction = "", None
        for value in list(args) + list(kwargs.values()):
            if isinstance(value, str) and not message:
                message = value
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and fraction is None:
                fraction = float(value)
        if fraction is not None and fraction > 1.0:
            fraction = None
        progress(message or "loading", fraction)

    return report


def load_actor(spec: str, adapter: str | None = None, progress: ProgressFn | None = None) -> Any:
    """Load an actor preset or path (blocking; call from a worker thread)."""
    if spec == ORACLE:
        if adapter:
            raise ValueError("the oracle actor has no weights, so it cannot take an adapter")
        return OracleActor()
    from lactchain.engine import EngineConfig
    from lactchain.jobs.engine import load_actor as load  # the lab's one actor loader; heavy: torch

    # The jobs' default engine settings (dtype auto): the Lab answers as the loop and `play` do.
    return load(spec, adapter, None, settings=EngineConfig(), progress=_progress_adapter(progress) or (lambda *_: None))


def load_critic(spec: str, registry: Any | None = None, progress: ProgressFn | None = None) -> Any:
    """Load a critic (blocking; call from a worker thread). `spec` is a checkpoint folder
    (with critic.json), a train-critic run id in the registry, or a backbone preset
    (an untrained head: its values mean nothing yet)."""
    from lactchain.models import critic as critic_mod  # heavy: torch + transformers

    folder = Path(spec).expanduser()
    if (folder / "critic.json").is_file():
        if progress:
            progress(f"loading critic checkpoint {folder.name}", None)
        return critic_mod.Critic.load(checkpoint=folder)
    if registry is not None and not folder.exists():
        try:
            run = registry.get_run(spec)
        except Exception:  # noqa: BLE001 - not a run id: try it as a preset
            run = None
        if run is not None:
            if progress:
                progress(f"loading critic of run {run['id']}", None)
            return critic_mod.load_from_run(registry, run["id"])
    if progress:
        progress(f"loading critic backbone {spec} (untrained head)", None)
    critic = critic_mod.Critic.load(spec)
    critic.untrained = True  # the console says so: its values rank nothing until a train-critic run fits it
    return critic


UNTRAINED_NOTE = ("its value head is untrained, so its values rank nothing yet: fit it with Jobs → Train critic "
                  "(on a play run's episodes), then press c on that run in Runs")


def resolve_adapter(value: str | None, registry: Any | None, base: str | None = None) -> str | None:
    """`--adapter` is a folder or a run id (a train-actor run's adapter, a pipeline's latest),
    checked as the CLI checks it: it loads, and (given `base`) was trained on that actor."""
    from lactchain.jobs.checks import resolve_adapter as checked_adapter

    if not value:
        return None
    folder = Path(value).expanduser()
    if folder.is_dir():
        value = str(folder)
    elif registry is None:
        raise ValueError(f"adapter {value!r} is not a folder and there is no registry to look it up in")
    return checked_adapter(registry, value, base=base)


def sample_fields(sample: Any, allowed: Sequence[str]) -> tuple[str, list[str], str, float | None, int | None]:
    """(text, moves, mode, logprob, n_tokens) of a Sample; parses the text if the actor did not."""
    text = str(getattr(sample, "text", "") or "")
    moves = getattr(sample, "moves", None)
    mode = getattr(sample, "mode", None)
    if moves is None or mode is None:
        parsed = parse_moves(text, allowed)
        moves, mode = parsed.moves, parsed.mode
    return text, list(moves or []), str(mode or FAILED), getattr(sample, "logprob", None), getattr(sample, "n_tokens", None)
