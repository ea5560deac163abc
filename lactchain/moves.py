"""Move vocabulary, parsing of model output into move lists, and the decoding grammar.

Model output is data, never code: parsing uses `ast.literal_eval` on a bracketed
literal (which evaluates no calls or names) and otherwise a phrase scan.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

MOVE_FORWARD = "move forward"
TURN_LEFT = "turn left"
TURN_RIGHT = "turn right"
ALL_MOVES: tuple[str, ...] = (MOVE_FORWARD, TURN_LEFT, TURN_RIGHT)
DEFAULT_MOVES: tuple[str, ...] = (MOVE_FORWARD, TURN_LEFT)
HIT = "hit"  # blackjack (lactchain.envs.blackjack)
STICK = "stick"

STRICT = "strict"
LENIENT = "lenient"
FAILED = "failed"
PARSE_MODES = (STRICT, LENIENT, FAILED)

_SPACE_RE = re.compile(r"[\s_\-]+")
# Longest phrases first, so "move forward" wins over a bare "forward".
_PHRASE_ALIASES: dict[str, str] = {
    "move forward": MOVE_FORWARD,
    "go forward": MOVE_FORWARD,
    "step forward": MOVE_FORWARD,
    "forward": MOVE_FORWARD,
    "turn left": TURN_LEFT,
    "rotate left": TURN_LEFT,
    "turn right": TURN_RIGHT,
    "rotate right": TURN_RIGHT,
    "hit": HIT,
    "stick": STICK,
    "stand": STICK,
}


def _scan_pattern(phrases: Iterable[str]) -> re.Pattern:
    return re.compile(
        "|".join(
            r"\b" + re.escape(p).replace(r"\ ", r"[\s_\-]+") + r"\b"
            for p in sorted(phrases, key=len, reverse=True)
        ),
        re.IGNORECASE,
    )


_SCAN_RE = _scan_pattern(_PHRASE_ALIASES)


@functools.lru_cache(maxsize=64)
def _scan_for(allowed: tuple[str, ...]) -> re.Pattern:
    """The phrase scan for a vocabulary: the known aliases plus the vocabulary's own moves
    (any env's: a move that is no alias is found by its own words)."""
    extra = {normalize_move(m) for m in allowed} - set(_PHRASE_ALIASES)
    return _scan_pattern([*_PHRASE_ALIASES, *extra]) if extra else _SCAN_RE


@dataclass(frozen=True)
class ParsedMoves:
    """What a completion turned into, and how (strict, lenient or failed)."""

    moves: list[str] = field(default_factory=list)
    mode: str = FAILED
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.mode != FAILED


def normalize_move(text: str) -> str:
    """Canonical form of one move: lower case, no quotes, single spaces."""
    cleaned = str(text).strip().strip("'\"` ").lower()
    return _SPACE_RE.sub(" ", cleaned).strip()


def validate_moves(moves: Iterable[str], allowed: Sequence[str] = ALL_MOVES) -> list[str]:
    """Normalise moves and reject any that is not in `allowed` (ValueError names it)."""
    out = []
    for raw in moves:
        move = normalize_move(raw)
        if move not in allowed:
            raise ValueError(f"unknown move {raw!r}; allowed moves: {', '.join(allowed)}")
        out.append(move)
    return out


def action_moves(action: Iterable[Any], moves: Sequence[str]) -> list[str]:
    """An env action (a list of move names, or of indices into `moves`) as move names;
    ValueError names the bad item. A bare string is refused: an action is a list."""
    if isinstance(action, str):
        raise ValueError(f"an action is a list of moves, got the string {action!r}")
    out: list[str] = []
    for item in action:
        if isinstance(item, int) or (hasattr(item, "dtype") and getattr(item.dtype, "kind", "") in "iu"):
            if not 0 <= int(item) < len(moves):
                raise ValueError(f"move index {item} is out of range 0..{len(moves) - 1}")
            out.append(moves[int(item)])
        else:
            out.extend(validate_moves([item], moves))
    return out


def format_moves(moves: Sequence[str]) -> str:
    """The python-list text of a move list, as the model is asked to write it."""
    return "[" + ", ".join(f"'{m}'" for m in moves) + "]"


def _outer_bracket_spans(text: str) -> list[tuple[int, int]]:
    """Balanced `[...]` spans that are not inside another balanced span, in order.
    One pass with a stack (linear even for '[' * 10**6); unmatched brackets are skipped."""
    stack: list[int] = []
    spans: list[tuple[int, int]] = []
    for i, ch in enumerate(text):
        if ch == "[":
            stack.append(i)
        elif ch == "]" and stack:
            spans.append((stack.pop(), i + 1))
    spans.sort()
    outer: list[tuple[int, int]] = []
    covered = -1
    for start, end in spans:
        if start >= covered:
            outer.append((start, end))
            covered = end
    return outer


def _strict(text: str, allowed: Sequence[str]) -> list[str] | None:
    # Only outermost lists count: a nested list such as [['move forward']] is not a
    # move list, and its inner list must not be picked out as if it were one.
    for start, end in _outer_bracket_spans(text):
        try:
            value = ast.literal_eval(text[start:end])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            continue
        try:
            return validate_moves(value, allowed)
        except ValueError:
            return None
    return None


def _lenient(text: str, allowed: Sequence[str]) -> list[str]:
    found = (normalize_move(m.group(0)) for m in _scan_for(tuple(allowed)).finditer(text))
    return [m for m in (_PHRASE_ALIASES.get(f, f) for f in found) if m in allowed]


def parse_moves(text: str, allowed: Sequence[str] = DEFAULT_MOVES) -> ParsedMoves:
    """Parse model output: the first python list of allowed moves (strict), else the
    known move phrases in order (lenient), else failed. Never executes the text."""
    if not isinstance(text, str):
        return ParsedMoves([], FAILED, f"expected text, got {type(text).__name__}")
    strict = _strict(text, allowed)
    if strict is not None:
        return ParsedMoves(strict, STRICT)
    lenient = _lenient(text, allowed)
    if lenient:
        return ParsedMoves(lenient, LENIENT)
    return ParsedMoves([], FAILED, "no move list or known move phrase found")


# Moves one answer may list (the grammar's and every actor's default).
LIST_MAX_MOVES = 8
# Which token spellings of a move list constrained decoding admits: any (every tokenization
# of its text, as xgrammar) or canonical (the tokenizer's own: lactchain.models.move_automaton).
GRAMMAR_SPELLINGS = ("any", "canonical")
# Most move lists (every length from 1 to max_moves) the canonical automaton enumerates:
# the grid's 3 moves x 8 are 9,840 lists (built in 0.06 s for SmolLM2), Blackjack's 2 x 8 510.
CANONICAL_MAX_LISTS = 100_000


def check_enumerable(moves: Sequence[str], max_moves: int) -> None:
    """ValueError unless the canonical automaton can enumerate every move list."""
    total = sum(len(moves) ** k for k in range(1, max_moves + 1))
    if total > CANONICAL_MAX_LISTS:
        raise ValueError(f"canonical spellings enumerate every move list: {len(moves)} moves x {max_moves} make "
                         f"{total:,}, over {CANONICAL_MAX_LISTS:,}; use --grammar-spelling any")


def move_list_grammar(allowed: Sequence[str] = DEFAULT_MOVES, max_moves: int = LIST_MAX_MOVES) -> str:
    """EBNF (GBNF dialect, as xgrammar reads it) for a python list of 1..max_moves
    allowed moves, quoted with single quotes: ['move forward', 'turn left']."""
    if max_moves < 1:
        raise ValueError(f"max_moves must be >= 1, got {max_moves}")
    if not allowed:
        raise ValueError("the move vocabulary is empty")
    alternatives = " | ".join(f"\"'{m}'\"" for m in allowed)
    # Nested optional tails keep the grammar unambiguous: tail_k allows k more moves.
    rules = [f'root ::= "[" move tail{max_moves - 1} "]"', f"move ::= {alternatives}"]
    for k in range(max_moves - 1, 0, -1):
        inner = f" tail{k - 1}" if k > 1 else ""
        rules.append(f'tail{k} ::= ("," " " move{inner})?')
    if max_moves == 1:
        rules[0] = 'root ::= "[" move "]"'
    return "\n".join(rules) + "\n"
