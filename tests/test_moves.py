"""Move vocabulary, parsing of model output (strict / lenient / failed, never executed)
and the xgrammar grammar for constrained decoding."""

from __future__ import annotations

import time

import pytest
import xgrammar as xgr

from lactchain.moves import (
    ALL_MOVES,
    DEFAULT_MOVES,
    FAILED,
    LENIENT,
    MOVE_FORWARD,
    STRICT,
    TURN_LEFT,
    TURN_RIGHT,
    format_moves,
    move_list_grammar,
    normalize_move,
    parse_moves,
    validate_moves,
)

F, L, R = MOVE_FORWARD, TURN_LEFT, TURN_RIGHT


# ---- vocabulary ---------------------------------------------------------------------
def test_vocabulary():
    assert DEFAULT_MOVES == ("move forward", "turn left")
    assert ALL_MOVES == ("move forward", "turn left", "turn right")


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("move forward", F),
        ("Move Forward", F),
        ("MOVE_FORWARD", F),
        ("move-forward", F),
        ("  move \t  forward  ", F),
        ("'turn left'", L),
        ('"Turn Left"', L),
        ("`turn_right`", R),
    ],
)
def test_normalize_move(raw, expected):
    assert normalize_move(raw) == expected


def test_validate_moves_names_the_bad_move():
    assert validate_moves(["Move_Forward", "TURN LEFT"], DEFAULT_MOVES) == [F, L]
    with pytest.raises(ValueError, match="jump"):
        validate_moves([F, "jump"], DEFAULT_MOVES)
    with pytest.raises(ValueError, match="turn right"):
        validate_moves([R], DEFAULT_MOVES)


def test_format_moves_round_trips_through_strict_parse():
    text = format_moves([F, L, F])
    assert text == "['move forward', 'turn left', 'move forward']"
    parsed = parse_moves(text)
    assert parsed.mode == STRICT and parsed.moves == [F, L, F] and parsed.ok


# ---- strict -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, moves",
    [
        ("['move forward', 'turn left']", [F, L]),
        ('["move forward", "turn left"]', [F, L]),
        ("Sure! Here is my answer: ['move forward', 'move forward'] Good luck.", [F, F]),
        ("['MOVE_FORWARD', 'Turn  Left', ' move-forward ']", [F, L, F]),
        ("[\n  'move forward',\n  'turn left',\n]", [F, L]),
        ("First ['turn left'] and later ['move forward']", [L]),  # the first list wins
        ("[]", []),  # an empty list is a legal (no-op) answer
        ("(see [1]) then ['turn left']", [L]),  # a non-move list is skipped
    ],
)
def test_strict(text, moves):
    parsed = parse_moves(text)
    assert parsed.mode == STRICT, parsed
    assert parsed.moves == moves


def test_strict_respects_the_allowed_moves():
    assert parse_moves("['turn right', 'move forward']", ALL_MOVES).moves == [R, F]
    assert parse_moves("['turn right', 'move forward']", ALL_MOVES).mode == STRICT
    # 'turn right' is not allowed by default: no strict list, and the lenient scan keeps
    # only the allowed phrase.
    parsed = parse_moves("['turn right', 'move forward']")
    assert parsed.mode == LENIENT and parsed.moves == [F]


# ---- lenient ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, moves",
    [
        ("I will move forward, then turn left, then move forward.", [F, L, F]),
        ("Move_Forward and TURN-LEFT", [F, L]),
        ("go forward, rotate left", [F, L]),
        ("['jump', 'move forward'] hmm", [F]),  # an invalid list falls back to phrases
        ("[move forward, turn left]", [F, L]),  # unquoted: not a python literal
        ("[['move forward', 'turn left']]", [F, L]),  # nested: not a move list
    ],
)
def test_lenient(text, moves):
    parsed = parse_moves(text)
    assert parsed.mode == LENIENT, parsed
    assert parsed.moves == moves
    assert parsed.ok


def test_lenient_filters_disallowed_phrases():
    assert parse_moves("turn right then move forward").moves == [F]
    assert parse_moves("turn right then move forward", ALL_MOVES).moves == [R, F]


# ---- failed -----------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "I don't know.", "['jump']", "turn right", "[1, 2, 3]", None, 42])
def test_failed(text):
    parsed = parse_moves(text)
    assert parsed.mode == FAILED
    assert parsed.moves == []
    assert not parsed.ok
    assert parsed.error


# ---- hostile input: data, never code ----------------------------------------------
def _hostile(sentinel: str) -> list[str]:
    return [
        f"__import__('os').system('touch {sentinel}')",
        f"[__import__('os').system('touch {sentinel}')]",
        f"[open('{sentinel}', 'w')]",
        f"['move forward', open('{sentinel}', 'w')]",
        f"[__import__('pathlib').Path('{sentinel}').touch()]",
        f"eval(\"open('{sentinel}', 'w')\")",
        f"exec(\"open('{sentinel}', 'w')\") ['move forward'.__class__]",
        "[print('PWNED')]",
        "print('PWNED')",
        "eval('1')",
        "[x for x in ['move forward']]",
        "[lambda: print('PWNED')]",
        "[['move forward'], ['turn left']]",
        "[[[[['turn left']]]]]",
        "[" * 300 + "]" * 300,
        "[" * 100_000,
        "]" * 100_000 + "[" * 100_000,
        "[" + "1+" * 50_000 + "1]",
        "[" + "9" * 50_000 + "]",
        "A" * 1_000_000,
        "move forward " * 20_000,
    ]


@pytest.mark.parametrize("index", range(len(_hostile("x"))))
def test_hostile_text_is_never_executed(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    sentinel = tmp_path / "pwned"
    text = _hostile(str(sentinel))[index]
    start = time.perf_counter()
    parsed = parse_moves(text)
    elapsed = time.perf_counter() - start
    assert parsed.mode in (FAILED, LENIENT), (text[:80], parsed.mode)
    assert not sentinel.exists()
    assert list(tmp_path.iterdir()) == []
    assert "PWNED" not in capsys.readouterr().out
    assert elapsed < 3.0
    assert all(m in DEFAULT_MOVES for m in parsed.moves)


def test_long_input_with_a_list_at_the_end_is_fast():
    text = "blah " * 200_000 + "['move forward', 'turn left']"
    start = time.perf_counter()
    parsed = parse_moves(text)
    assert time.perf_counter() - start < 3.0
    assert parsed.mode == STRICT and parsed.moves == [F, L]


# ---- grammar ----------------------------------------------------------------------
def _accepts(grammar_text: str, s: str) -> bool:
    """Tokenizer-free match: an empty vocabulary, then feed the raw string."""
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar(grammar_text)
    matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return matcher.accept_string(s) and matcher.is_terminated()


def test_grammar_compiles():
    for allowed in (DEFAULT_MOVES, ALL_MOVES):
        for k in (1, 2, 8):
            assert isinstance(xgr.Grammar.from_ebnf(move_list_grammar(allowed, k)), xgr.Grammar)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("['move forward', 'turn left']", True),
        ("['move forward']", True),
        ("['turn left', 'turn left', 'move forward']", True),
        ("['turn right']", False),  # not in the default vocabulary
        ("['move forward', 'turn left'", False),  # unterminated
        ("move forward", False),
        ("['jump']", False),
    ],
)
def test_grammar_accepts_move_list_shape(text, ok):
    assert _accepts(move_list_grammar(), text) is ok


def test_grammar_output_parses_strictly():
    text = "['move forward', 'turn left']"
    assert _accepts(move_list_grammar(), text)
    assert parse_moves(text).mode == STRICT


def test_grammar_limits():
    g2 = move_list_grammar(ALL_MOVES, max_moves=2)
    assert _accepts(g2, "['turn right', 'move forward']")
    assert not _accepts(g2, "['turn right', 'move forward', 'turn left']")
    assert _accepts(move_list_grammar(max_moves=1), "['turn left']")
    with pytest.raises(ValueError):
        move_list_grammar(max_moves=0)
    with pytest.raises(ValueError):
        move_list_grammar(allowed=())


def test_lenient_parse_finds_any_vocabularys_own_moves():
    """A vocabulary whose moves are no known alias (a new env's) is still scanned for."""
    taxi_like = ("south", "north", "east", "west", "pickup", "dropoff")
    parsed = parse_moves("First go south, then pickup and head east.", taxi_like)
    assert parsed.mode == "lenient" and parsed.moves == ["south", "pickup", "east"]
    assert parse_moves("go forward", ("hit", "stick")).mode == "failed"  # aliases of other vocabularies stay out
