"""Constrained decoding on the device: the move-list grammar's token tables mask
exactly what xgrammar's matcher masks, greedy and seeded answers are the same with
either engine (prefix cache on or off), and the vectorised per-row sampler draws
from each row's distribution independently of the batch."""

from __future__ import annotations

import random

import pytest
import torch
import xgrammar as xgr

from lactchain.models.actor import Actor, _RowSampler
from lactchain.models.move_automaton import AutomatonProcessor, automaton_for, build_token_automaton
from lactchain.moves import ALL_MOVES, DEFAULT_MOVES, move_list_grammar

pytestmark = pytest.mark.usefixtures("one_thread")
TAXI_LIKE = ("south", "north", "east", "west", "pickup", "dropoff")


@pytest.fixture(scope="module")
def actor():
    return Actor.load("tiny", device="cpu")


def _xgr_mask(matcher, vocab_size: int) -> torch.Tensor:
    bitmask = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask, 0)
    bits = (bitmask[0].unsqueeze(1) >> torch.arange(32, dtype=torch.int32)) & 1
    return bits.flatten()[:vocab_size].bool()


@pytest.mark.parametrize("moves, max_moves", [(DEFAULT_MOVES, 8), (ALL_MOVES, 3), (TAXI_LIKE, 1), (TAXI_LIKE, 5)])
def test_tables_mask_exactly_what_xgrammar_masks(actor, moves, max_moves):
    info = actor._tokenizer_info()
    eos = actor.eos_token_id
    tables = automaton_for(info, moves, max_moves, eos)
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(move_list_grammar(moves, max_moves))
    rng = random.Random(0)
    checked = 0
    for _ in range(25):  # random walks through the grammar, token by token
        matcher = xgr.GrammarMatcher(compiled)
        state = tables.start
        while not matcher.is_terminated():
            ours = tables.allowed[state]
            theirs = _xgr_mask(matcher, info.vocab_size)
            assert torch.equal(ours, theirs), f"state {state}: {int((ours != theirs).sum())} tokens differ"
            checked += 1
            token = rng.choice(torch.nonzero(ours).flatten().tolist())
            assert matcher.accept_token(token)
            state = int(tables.step[state, tables.column[token]])
        assert state == tables.done
    assert checked > 50


def test_the_character_language_is_the_grammars():
    """One byte per token: a token walk is a character walk, so the tables accept a
    string iff the grammar does."""
    vocab = [bytes([b]) for b in range(128)]
    eos = 0
    tables = build_token_automaton(ALL_MOVES, 2, vocab, eos, vocab_size=128, skip=[eos])

    def accepts(text: str) -> bool:
        state = tables.start
        for byte in text.encode():
            if not tables.allowed[state, byte]:
                return False
            state = int(tables.step[state, tables.column[byte]])
        return bool(tables.allowed[state, eos])

    assert accepts("['turn right', 'move forward']")
    assert accepts("['turn left']")
    assert not accepts("['turn right', 'move forward', 'turn left']")  # over max_moves
    assert not accepts("['turn left',]")
    assert not accepts("['turn left'")
    assert not accepts("[]")
    assert not accepts("['jump']")
    assert not accepts('["turn left"]')


@pytest.mark.parametrize("prefix_cache", [True, False])
def test_answers_are_the_same_with_either_grammar_engine(actor, prefix_cache):
    prompts = [f"Goal at row {i}, column {j}. Answer with a python list of moves." for i in range(3) for j in range(3)]
    actor.prefix_cache = prefix_cache
    outputs = {}
    try:
        for engine in ("xgrammar", "tensor"):
            actor.grammar_engine = engine
            greedy = actor.generate(prompts, max_new_tokens=48)
            sampled = actor.generate(prompts, temperature=1.0, max_new_tokens=48, seeds=range(9), num_samples=3)
            outputs[engine] = [(s.token_ids, s.logprob, s.mode) for s in greedy + sampled]
    finally:
        actor.grammar_engine, actor.prefix_cache = "tensor", True
    assert outputs["tensor"] == outputs["xgrammar"]
    assert all(mode == "strict" for _, _, mode in outputs["tensor"])


def test_a_finished_row_stays_finite(actor):
    """After EOS generate feeds a finished row padding; its scores must keep a finite
    entry (EOS) or sampling would see a row of -inf."""
    tables = automaton_for(actor._tokenizer_info(), DEFAULT_MOVES, 1, actor.eos_token_id)
    processor = AutomatonProcessor(tables)
    vocab = tables.allowed.shape[1]
    processor(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, vocab)))
    processor.state = torch.tensor([tables.done])
    out = processor(torch.tensor([[actor.pad_token_id]]), torch.zeros((1, vocab)))
    assert torch.isfinite(out).sum() == 1 and torch.isfinite(out[0, actor.eos_token_id])


def test_an_unknown_grammar_engine_is_refused(actor):
    actor.grammar_engine = "regex"
    try:
        with pytest.raises(ValueError, match="unknown grammar engine 'regex'"):
            actor.generate(["go"], max_new_tokens=48)
    finally:
        actor.grammar_engine = "tensor"


# ---- the per-row sampler -------------------------------------------------------------
def test_each_row_draws_the_same_whatever_shares_its_batch():
    scores = torch.randn(6, 300)
    together = _RowSampler(range(10, 16))
    alone = [_RowSampler([seed]) for seed in range(10, 16)]
    for _ in range(5):  # several steps: the draw depends on the step too
        batch = together(None, scores).argmax(dim=1).tolist()
        single = [s(None, scores[i:i + 1]).argmax(dim=1).item() for i, s in enumerate(alone)]
        assert batch == single
    flat = torch.zeros(1, 1000)
    one, two = _RowSampler([1]), _RowSampler([2])
    assert [one(None, flat).argmax().item() for _ in range(5)] != [two(None, flat).argmax().item() for _ in range(5)]


def test_the_sampler_follows_the_distribution_and_never_draws_a_masked_token():
    logits = torch.tensor([[0.0, 1.0, 2.0, float("-inf"), -1.0]])
    expected = torch.softmax(logits, dim=-1)[0]
    sampler = _RowSampler([7])
    counts = torch.zeros(5)
    draws = 20_000
    for _ in range(draws):
        counts[sampler(None, logits).argmax()] += 1
    assert counts[3] == 0
    # 4 standard errors of a binomial share: a broken generator misses by far more.
    assert torch.all((counts / draws - expected).abs() <= 4 * (expected * (1 - expected) / draws).sqrt() + 1e-9)


def test_a_row_without_finite_mass_falls_back_to_its_argmax():
    scores = torch.tensor([[float("nan"), 2.0, 1.0], [float("-inf")] * 3, [0.0, 5.0, 0.0]])
    picks = _RowSampler([1, 2, 3])(None, scores).argmax(dim=1).tolist()
    assert picks[0] == 1  # the NaN skipped
    assert picks[1] == 0  # nothing finite: still a token, no crash
