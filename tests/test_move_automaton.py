"""Constrained decoding on the device: the move-list grammar's token tables mask
exactly what xgrammar's matcher masks, greedy and seeded answers are the same with
either engine (prefix cache on or off), and the vectorised per-row sampler draws
from each row's distribution independently of the batch."""

from __future__ import annotations

import random

import pytest
import torch
import xgrammar as xgr

from lactchain.models.actor import Actor
from lactchain.models.decode_hooks import RowSampler
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
    together = RowSampler(range(10, 16))
    alone = [RowSampler([seed]) for seed in range(10, 16)]
    for _ in range(5):  # several steps: the draw depends on the step too
        batch = together(None, scores).argmax(dim=1).tolist()
        single = [s(None, scores[i:i + 1]).argmax(dim=1).item() for i, s in enumerate(alone)]
        assert batch == single
    flat = torch.zeros(1, 1000)
    one, two = RowSampler([1]), RowSampler([2])
    assert [one(None, flat).argmax().item() for _ in range(5)] != [two(None, flat).argmax().item() for _ in range(5)]


def test_the_sampler_follows_the_distribution_and_never_draws_a_masked_token():
    logits = torch.tensor([[0.0, 1.0, 2.0, float("-inf"), -1.0]])
    expected = torch.softmax(logits, dim=-1)[0]
    sampler = RowSampler([7])
    counts = torch.zeros(5)
    draws = 20_000
    for _ in range(draws):
        counts[sampler(None, logits).argmax()] += 1
    assert counts[3] == 0
    # 4 standard errors of a binomial share: a broken generator misses by far more.
    assert torch.all((counts / draws - expected).abs() <= 4 * (expected * (1 - expected) / draws).sqrt() + 1e-9)


def test_a_row_without_finite_mass_falls_back_to_its_argmax():
    scores = torch.tensor([[float("nan"), 2.0, 1.0], [float("-inf")] * 3, [0.0, 5.0, 0.0]])
    picks = RowSampler([1, 2, 3])(None, scores).argmax(dim=1).tolist()
    assert picks[0] == 1  # the NaN skipped
    assert picks[1] == 0  # nothing finite: still a token, no crash


# ---- canonical spellings only ------------------------------------------------------------------

def _accepts(tables, ids: list[int], eos: int) -> bool:
    """Whether the tables let `ids` then EOS through to `done`, token by token."""
    state = tables.start
    for token in [*ids, eos]:
        if not tables.allowed[state, token]:
            return False
        state = int(tables.step[state, tables.column[token]])
    return state == tables.done


def _bpe_on_move_lists(moves, max_moves):
    """A real BPE tokenizer (HF tokenizers) trained on the move lists' texts: its merges
    leave pieces such as 'mo' + 've' in the vocabulary, so a list's text has other
    spellings than the tokenizer's own."""
    import itertools

    from tokenizers import Tokenizer, models, trainers

    from lactchain.moves import format_moves

    texts = [format_moves(c) for n in range(1, max_moves + 1) for c in itertools.product(moves, repeat=n)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=60, special_tokens=["<unk>", "<eos>"],
                                                       show_progress=False))
    return tok, texts


def test_canonical_tables_admit_each_lists_own_tokenization_and_no_other_spelling():
    """Every list's canonical tokenization then EOS is admitted; the same text spelled with
    a merged token split into the two pieces it was merged from is admitted by the
    any-spelling tables (xgrammar's language) and refused by the canonical ones."""
    from lactchain.models.move_automaton import build_canonical_token_automaton

    tok, texts = _bpe_on_move_lists(DEFAULT_MOVES, 3)
    vocab = {i: t for t, i in tok.get_vocab().items()}
    size, eos = tok.get_vocab_size(), tok.token_to_id("<eos>")

    def encode(batch):
        return [e.ids for e in tok.encode_batch(batch, add_special_tokens=False)]

    canonical = build_canonical_token_automaton(DEFAULT_MOVES, 3, encode, eos, size)
    any_spelling = build_token_automaton(DEFAULT_MOVES, 3, [vocab[i].encode() for i in range(size)], eos, size,
                                         skip=[tok.token_to_id("<unk>")])
    respelled = 0
    for ids in encode(texts):
        assert _accepts(canonical, ids, eos) and _accepts(any_spelling, ids, eos)
        for k, token in enumerate(ids):  # split the first merged token that has two pieces in the vocabulary
            text = vocab[token]
            cuts = [i for i in range(1, len(text)) if text[:i] in tok.get_vocab() and text[i:] in tok.get_vocab()]
            if cuts:
                other = ids[:k] + [tok.token_to_id(text[:cuts[0]]), tok.token_to_id(text[cuts[0]:])] + ids[k + 1:]
                assert "".join(vocab[i] for i in other) == "".join(vocab[i] for i in ids)  # the same text
                assert _accepts(any_spelling, other, eos) and not _accepts(canonical, other, eos)
                respelled += 1
                break
    assert respelled == len(texts)  # every list had another spelling, and only its own got through
    assert canonical.allowed.shape[0] < any_spelling.allowed.shape[0]  # minimised: fewer states


def test_canonical_and_any_spelling_are_one_language_where_the_tokenization_is_unique(actor):
    """The tiny actor's word-level tokenizer spells every list one way, so the canonical
    tables mask exactly what the any-spelling ones do along every walk, and the actor's
    greedy and seeded answers are the same with either."""
    rng = random.Random(0)
    any_tables = actor.token_automaton()
    actor.grammar_spelling = "canonical"
    try:
        canonical = actor.token_automaton()
        assert canonical is not any_tables
        for _ in range(25):
            a, c = any_tables.start, canonical.start
            while a != any_tables.done:
                assert torch.equal(any_tables.allowed[a], canonical.allowed[c])
                token = rng.choice(torch.nonzero(any_tables.allowed[a]).flatten().tolist())
                a = int(any_tables.step[a, any_tables.column[token]])
                c = int(canonical.step[c, canonical.column[token]])
            assert c == canonical.done
        prompts = [f"the agent is at state {i}" for i in range(6)]
        canon_greedy = [s.token_ids for s in actor.generate(prompts)]
        canon_sampled = [s.token_ids for s in actor.generate(prompts, temperature=1.0, seed=3)]
    finally:
        actor.grammar_spelling = "any"
    assert canon_greedy == [s.token_ids for s in actor.generate(prompts)]
    assert canon_sampled == [s.token_ids for s in actor.generate(prompts, temperature=1.0, seed=3)]


def test_canonical_spelling_is_refused_where_it_cannot_run(actor):
    from lactchain.models.actor import check_grammar_spelling

    with pytest.raises(ValueError, match="unknown grammar spelling 'sometimes'"):
        check_grammar_spelling("sometimes", DEFAULT_MOVES, 8)
    with pytest.raises(ValueError, match=r"6 moves x 8 make 2,015,538, over 100,000; use --grammar-spelling any"):
        check_grammar_spelling("canonical", TAXI_LIKE, 8)
    actor.grammar_engine, actor.grammar_spelling = "xgrammar", "canonical"
    try:
        with pytest.raises(ValueError, match="xgrammar's processor admits every spelling"):
            actor.generate(["the agent is at state 1"])
    finally:
        actor.grammar_engine, actor.grammar_spelling = "tensor", "any"


@pytest.mark.parametrize("argv, words", [
    (["--env", "taxi", "--grammar-spelling", "canonical"], "--grammar-spelling canonical with --env taxi"),
    (["--engine", "vllm", "--grammar-spelling", "canonical"], "use it with --engine hf"),
])
def test_canonical_spelling_where_it_cannot_run_is_a_one_line_refusal_before_any_run(lc, tmp_path, argv, words):
    db = tmp_path / "registry.db"
    code, _, err = lc("pipeline", "--actor", "tiny", "--critic", "tiny", *argv, "--db", db)
    assert code == 2 and words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not db.exists()


@pytest.mark.e2e
def test_smollm2s_canonical_tables_refuse_a_move_spelled_in_pieces():
    """On SmolLM2's tokenizer (the one whose GRPO run drifted to spellings in pieces): the
    grid's 9,840 lists make a 42-state table, `move` as 'mo' + 've' passes the any-spelling
    tables and not the canonical ones."""
    from transformers import AutoTokenizer

    from lactchain.models.move_automaton import build_canonical_token_automaton
    from lactchain.models.presets import prepare

    tok = AutoTokenizer.from_pretrained(prepare("smollm2-135m"))

    def encode(batch):
        return tok(batch, add_special_tokens=False)["input_ids"]

    eos = tok.convert_tokens_to_ids("<|im_end|>")
    canonical = build_canonical_token_automaton(DEFAULT_MOVES, 8, encode, eos, len(tok))
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok), stop_token_ids=[eos])
    any_spelling = automaton_for(info, DEFAULT_MOVES, 8, eos)
    own = encode(["['move forward', 'turn left']"])[0]
    pieces = own[:1] + tok.convert_tokens_to_ids(["mo", "ve"]) + own[2:]
    assert tok.decode(pieces) == tok.decode(own)
    assert _accepts(canonical, own, eos) and _accepts(any_spelling, own, eos)
    assert _accepts(any_spelling, pieces, eos) and not _accepts(canonical, pieces, eos)
    assert canonical.allowed.shape[0] < 100 < any_spelling.allowed.shape[0]
