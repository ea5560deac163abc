"""The actor (lactchain.models.actor): batching, constrained decoding, seeding,
log-probs, streaming and LoRA adapters, on the seeded `tiny` preset; one e2e test
on SmolLM2-135M (converted once into runs/models)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from lactchain.envs import GridWorldEnv
from lactchain.envs.gridworld import ORIENTATIONS, State
from lactchain.models.actor import Actor, Sample
from lactchain.moves import ALL_MOVES, DEFAULT_MOVES, STRICT, format_moves
from lactchain.prompts import DEFAULT_STRATEGY, PromptError, render_prompt


pytestmark = pytest.mark.usefixtures("one_thread")


def make_prompts(n: int, size: int = 4, moves=DEFAULT_MOVES) -> list[str]:
    """`n` rendered strategy prompts of different states and lengths."""
    env = GridWorldEnv(size=size, goal=(size - 1, size - 1), moves=moves)
    strategies = [
        DEFAULT_STRATEGY,
        "Reach the goal.",
        "Go north first, then east. Turn left when you face a wall.",
        DEFAULT_STRATEGY + " Think about the grid and the goal before you move.",
    ]
    out = []
    for i in range(n):
        state = State(i % size, (i // size) % size, ORIENTATIONS[i % 4])
        out.append(render_prompt(strategies[i % len(strategies)], env.describe(state), moves))
    return out


def assert_valid(sample: Sample, moves=DEFAULT_MOVES, max_moves: int = 8) -> None:
    assert sample.mode == STRICT, sample
    assert 1 <= len(sample.moves) <= max_moves, sample
    assert all(m in moves for m in sample.moves), sample
    assert sample.text == format_moves(sample.moves), sample  # exactly the grammar's text, nothing around it
    assert sample.n_tokens == len(sample.token_ids) and sample.token_ids[-1] == 2  # ends with <eos>


# ---- tokenizer and chat template ----------------------------------------------------


def test_tiny_pad_is_not_eos_and_template_renders(tiny_actor: Actor):
    tok = tiny_actor.tokenizer
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    assert tok.padding_side == "left"
    assert tiny_actor.model.generation_config.pad_token_id == tok.pad_token_id
    assert tiny_actor.model.generation_config.eos_token_id == tok.eos_token_id
    prompt = tiny_actor.chat_prompt("hello")
    assert prompt.startswith(tok.bos_token) and prompt.endswith("<|assistant|>\n")
    assert tiny_actor.context_length() == 2048


@pytest.mark.parametrize("moves", [["move forward", "turn left"], list(ALL_MOVES), ["turn right"]])
def test_tiny_tokenizer_round_trips_move_lists(tiny_actor: Actor, moves):
    tok = tiny_actor.tokenizer
    text = format_moves(moves)
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_tiny_tokenizer_covers_rendered_prompts(tiny_actor: Actor):
    """The default prompt of every state and grid size has no unknown word (a
    researcher's own strategy words may still map to <unk>: it is a random model)."""
    tok = tiny_actor.tokenizer
    prompts = []
    for size in (2, 4, 9, 16):
        env = GridWorldEnv(size=size, goal=(size - 1, size - 1), moves=ALL_MOVES)
        for i in range(8):
            state = State(i % size, (3 * i) % size, ORIENTATIONS[i % 4])
            prompts.append(render_prompt(DEFAULT_STRATEGY, env.describe(state), ALL_MOVES))
    for prompt in prompts:
        ids = tok.encode(tiny_actor.chat_prompt(prompt), add_special_tokens=False)
        assert tok.unk_token_id not in ids, prompt
        assert tok.decode(ids) == tiny_actor.chat_prompt(prompt)


# ---- batching ------------------------------------------------------------------------


@pytest.mark.parametrize("constrained", [True, False])
def test_batched_greedy_equals_one_by_one(tiny_actor: Actor, constrained: bool):
    prompts = make_prompts(6) + ["Hi.", "The goal is at (x=3, y=3)."]
    lengths = {tiny_actor.count_tokens(tiny_actor.chat_prompt(p)) for p in prompts}
    assert len(lengths) >= 5  # really different lengths, so left padding is exercised
    n = 48 if constrained else 24
    batched = tiny_actor.generate(prompts, constrained=constrained, max_new_tokens=n)
    single = [tiny_actor.generate([p], constrained=constrained, max_new_tokens=n)[0] for p in prompts]
    assert [s.token_ids for s in batched] == [s.token_ids for s in single]
    assert [s.text for s in batched] == [s.text for s in single]
    for b, s in zip(batched, single):
        assert b.logprob == pytest.approx(s.logprob, abs=1e-3)


def test_samples_are_grouped_per_prompt(tiny_actor: Actor):
    prompts = make_prompts(3)
    out = tiny_actor.generate(prompts, num_samples=4, temperature=1.0, seed=5)
    assert len(out) == 12
    greedy = tiny_actor.generate(prompts, num_samples=2)
    assert greedy[0].text == greedy[1].text and greedy[2].text == greedy[3].text
    for p, first in zip(prompts, greedy[::2]):
        assert tiny_actor.generate([p])[0].text == first.text
    assert tiny_actor.generate([]) == []


# ---- constrained decoding -------------------------------------------------------------


def test_constrained_samples_always_parse_strictly(tiny_actor: Actor):
    prompts = make_prompts(8)
    samples = []
    for seed in range(10):
        samples += tiny_actor.generate(prompts, temperature=1.0, seed=seed, num_samples=4)
    assert len(samples) == 320
    for s in samples:
        assert_valid(s)
    lengths = {len(s.moves) for s in samples}
    assert len(lengths) >= 4  # the grammar leaves real choices: not always one length
    assert len({s.text for s in samples}) >= 20


def test_constrained_respects_moves_and_max_moves():
    steps = []
    actor = Actor.load("tiny", moves=ALL_MOVES, max_moves=3, device="cpu",
                       progress=lambda step, fraction: steps.append((step, fraction)))
    assert steps and steps[-1][1] == 1.0 and "ready" in steps[-1][0]
    prompts = make_prompts(4, moves=ALL_MOVES)
    samples = []
    for seed in range(5):
        samples += actor.generate(prompts, temperature=1.5, seed=seed, num_samples=4, max_new_tokens=20)
    for s in samples:
        assert_valid(s, ALL_MOVES, 3)
    assert {m for s in samples for m in s.moves} == set(ALL_MOVES)
    # The grammar cache follows attribute changes.
    actor.max_moves = 1
    for s in actor.generate(prompts, temperature=1.0, seed=0, num_samples=2):
        assert_valid(s, ALL_MOVES, 1)


def test_a_token_budget_too_small_for_the_grammar_warns(tiny_actor: Actor):
    assert tiny_actor.grammar_token_budget() == 42  # 8 x 'move forward' + brackets + EOS
    with pytest.warns(UserWarning, match="cut off"):
        out = tiny_actor.generate(make_prompts(2), max_new_tokens=6, temperature=1.0, seed=0, num_samples=4)
    assert all(s.n_tokens <= 6 for s in out)
    assert any(s.mode != STRICT for s in out)  # cut-off lists are reported honestly


def test_free_mode_is_parsed_not_forced(tiny_actor: Actor):
    out = tiny_actor.generate(make_prompts(4), constrained=False, temperature=1.0, seed=0, max_new_tokens=12)
    assert len(out) == 4
    for s in out:
        assert s.mode in ("strict", "lenient", "failed")
        assert 1 <= s.n_tokens <= 12


# ---- seeding ----------------------------------------------------------------------------


def test_same_seed_same_samples_and_different_seeds_differ(tiny_actor: Actor):
    prompts = make_prompts(4)
    a = tiny_actor.generate(prompts, temperature=1.0, seed=11, num_samples=3)
    b = tiny_actor.generate(prompts, temperature=1.0, seed=11, num_samples=3)
    c = tiny_actor.generate(prompts, temperature=1.0, seed=12, num_samples=3)
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    assert [s.logprob for s in a] == [s.logprob for s in b]
    assert [s.text for s in a] != [s.text for s in c]
    # Seeding does not disturb the caller's global RNG stream.
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    tiny_actor.generate(prompts[:1], temperature=1.0, seed=99)
    assert torch.equal(torch.rand(3), expected)


# ---- log-probs ----------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_generate_logprob_matches_teacher_forcing(tiny_actor: Actor, temperature: float):
    prompts = make_prompts(5)
    samples = tiny_actor.generate(prompts, temperature=temperature, seed=3, num_samples=2)
    expanded = [p for p in prompts for _ in range(2)]
    by_text = tiny_actor.completion_logprobs(expanded, [s.text for s in samples])
    by_ids = tiny_actor.completion_logprobs(expanded, [s.token_ids for s in samples], batch_size=3)
    for s, t, i in zip(samples, by_text, by_ids):
        assert s.logprob < 0
        assert t == pytest.approx(s.logprob, rel=1e-4, abs=1e-3)  # untempered, EOS included
        assert i == pytest.approx(s.logprob, rel=1e-4, abs=1e-3)


def test_free_mode_logprob_matches_teacher_forcing(tiny_actor: Actor):
    prompts = make_prompts(3)
    samples = tiny_actor.generate(prompts, constrained=False, temperature=1.0, seed=4, max_new_tokens=10)
    eos = tiny_actor.eos_token_id
    cut = [s for s in samples if s.token_ids[-1] != eos]
    assert cut  # a random model rarely says EOS within 10 tokens
    for s in cut:
        assert s.n_tokens == 10
    # A cut-off sample has no EOS: score exactly its tokens ...
    exact = tiny_actor.completion_logprobs(prompts, [s.token_ids for s in samples], add_eos=False)
    for s, v in zip(samples, exact):
        assert v == pytest.approx(s.logprob, rel=1e-4, abs=1e-3)
    # ... while the default adds the EOS it never produced (one more negative term).
    with_eos = tiny_actor.completion_logprobs(prompts, [s.token_ids for s in samples])
    for s, v in zip(samples, with_eos):
        assert v < s.logprob if s.token_ids[-1] != eos else v == pytest.approx(s.logprob, abs=1e-3)


def test_completion_logprobs_batching_and_validation(tiny_actor: Actor):
    prompts = make_prompts(5) + ["Hi."]
    completions = [format_moves(["turn left"] * (i + 1)) for i in range(len(prompts))]
    batched = tiny_actor.completion_logprobs(prompts, completions)
    one_by_one = tiny_actor.completion_logprobs(prompts, completions, batch_size=1)
    assert batched == pytest.approx(one_by_one, abs=1e-3)  # left padding does not change scores
    assert all(v < 0 for v in batched) and len(set(batched)) == len(batched)
    with pytest.raises(ValueError):
        tiny_actor.completion_logprobs(prompts[:1], [])
    with pytest.raises(ValueError):
        tiny_actor.completion_logprobs(prompts[:1], [""], add_eos=False)


def test_prompt_longer_than_context_is_a_prompt_error(tiny_actor: Actor):
    long_prompt = " ".join(["move forward"] * 1200)
    with pytest.raises(PromptError, match="context"):
        tiny_actor.generate([long_prompt])
    with pytest.raises(PromptError):
        tiny_actor.stream(long_prompt, lambda _t: None)


# ---- streaming ----------------------------------------------------------------------------


@pytest.mark.parametrize("constrained", [True, False])
def test_stream_pieces_concatenate_to_the_sample(tiny_actor: Actor, constrained: bool):
    p = make_prompts(2)[1]
    pieces: list[str] = []
    n = 48 if constrained else 16
    sample = tiny_actor.stream(p, pieces.append, constrained=constrained, temperature=1.0, seed=8,
                               max_new_tokens=n)
    assert len(pieces) >= 2 and all(pieces)
    assert "".join(pieces) == sample.text
    same = tiny_actor.generate([p], constrained=constrained, temperature=1.0, seed=8, max_new_tokens=n)[0]
    assert same.token_ids == sample.token_ids
    assert same.logprob == pytest.approx(sample.logprob, abs=1e-4)


# ---- LoRA adapters --------------------------------------------------------------------------


def test_adapter_round_trip(tmp_path: Path, tiny_actor: Actor):
    from peft import LoraConfig, get_peft_model

    from lactchain.models.presets import prepare

    folder = prepare("tiny")
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(folder)
    peft_model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj", "down_proj"])
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    peft_model.save_pretrained(tmp_path / "adapter")

    prompts = make_prompts(4)
    completions = [format_moves(["move forward", "turn left"])] * 4
    tuned_in_memory = Actor(peft_model, tiny_actor.tokenizer, name="tiny+lora", device="cpu")
    want = tuned_in_memory.generate(prompts, constrained=False, max_new_tokens=8)
    want_lp = tuned_in_memory.completion_logprobs(prompts, completions)

    actor = Actor.load("tiny", adapter=tmp_path / "adapter", device="cpu")
    assert actor.adapter == tmp_path / "adapter"
    got = actor.generate(prompts, constrained=False, max_new_tokens=8)
    assert [s.token_ids for s in got] == [s.token_ids for s in want]
    assert actor.completion_logprobs(prompts, completions) == pytest.approx(want_lp, abs=1e-4)

    base_lp = tiny_actor.completion_logprobs(prompts, completions)
    assert max(abs(a - b) for a, b in zip(want_lp, base_lp)) > 0.1  # the adapter really changes the model

    actor.unload_adapter()
    assert actor.adapter is None
    assert actor.completion_logprobs(prompts, completions) == pytest.approx(base_lp, abs=1e-4)
    import warnings

    with warnings.catch_warnings():  # peft's reads of transformers' deprecated names: not in the user's terminal
        warnings.simplefilter("error", FutureWarning)
        actor.load_adapter(tmp_path / "adapter")
    assert actor.completion_logprobs(prompts, completions) == pytest.approx(want_lp, abs=1e-4)
    with pytest.raises(FileNotFoundError):
        actor.load_adapter(tmp_path)


def test_the_lm_head_gets_a_contiguous_input_with_an_adapter_in_every_dtype(tmp_path: Path):
    """torch's CPU linear is up to ~370x slower on a non-contiguous 3-D input once the
    weight needs no grad (adapter loaded: frozen base); generate and scoring feed the head
    a slice of the hidden states, so the actor hands it a contiguous copy, merged bf16
    inference copy included. Outputs are unchanged by it."""
    from lactchain.bench.rollout import random_adapter

    actor = Actor.load("tiny", adapter=random_adapter("tiny", tmp_path / "adapter"), device="cpu")
    prompts = make_prompts(4)
    fp32 = actor.generate(prompts, max_new_tokens=16)
    for dtype in (None, torch.bfloat16):
        actor.inference_dtype = dtype
        model = actor._generation_model()
        assert not any(p.requires_grad for p in model.parameters())  # the case torch is slow for
        seen: list[bool] = []
        hook = model.get_output_embeddings().register_forward_pre_hook(
            lambda _m, args: seen.append(args[0].is_contiguous()))
        try:
            out = actor.generate(prompts, max_new_tokens=16)
            actor.completion_logprobs(prompts, [s.text for s in out])
        finally:
            hook.remove()
        assert seen and all(seen), dtype
        if dtype is None:
            assert [s.token_ids for s in out] == [s.token_ids for s in fp32]


# ---- e2e: SmolLM2-135M -------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_smollm2_constrained_generation_e2e():
    from lactchain.models.presets import prepare, preset_status

    t0 = time.perf_counter()
    folder = prepare("smollm2-135m")  # converts once into runs/models, then reuses it
    t_prepare = time.perf_counter() - t0
    assert preset_status("smollm2-135m")[0]
    assert (folder / "model.safetensors").is_file()

    t0 = time.perf_counter()
    actor = Actor.load("smollm2-135m", device="cpu")
    t_load = time.perf_counter() - t0
    tok = actor.tokenizer
    assert "<|im_start|>" in tok.chat_template
    assert tok.eos_token == "<|im_end|>"  # ends an assistant turn
    assert tok.pad_token == "<|endoftext|>" and tok.pad_token_id != tok.eos_token_id
    prompt = actor.chat_prompt("hi")
    assert prompt.endswith("<|im_start|>assistant\n")

    prompts = make_prompts(8)
    t0 = time.perf_counter()
    samples = actor.generate(prompts, constrained=True, temperature=0.0, max_new_tokens=48)
    t_generate = time.perf_counter() - t0
    assert len(samples) == 8
    for s in samples:
        assert s.mode == STRICT and 1 <= len(s.moves) <= 8 and set(s.moves) <= set(DEFAULT_MOVES), s
        assert s.token_ids[-1] == tok.eos_token_id
    # Greedy output re-tokenizes canonically here, so teacher forcing agrees.
    scored = actor.completion_logprobs(prompts[:2], [s.token_ids for s in samples[:2]])
    assert scored == pytest.approx([s.logprob for s in samples[:2]], abs=1e-2)
    print(f"\nsmollm2: prepare {t_prepare:.1f}s, cached load {t_load:.1f}s, 8x constrained generate {t_generate:.1f}s")


def test_the_static_cache_is_kept_across_calls_one_per_batch_bucket_with_the_same_answers(tiny_actor):
    """What CUDA graphs replay on (lactchain.models.static_cache): generate calls of 6, 3 and
    5 rows share one cache of 8 rows, at the same addresses (also after a weight change's
    clear), and 12 rows take a second of 16; greedy and row-seeded answers are the plain
    path's token for token. Sampling from one shared `seed` keeps its own batch size."""
    from lactchain.models.static_cache import StaticCachePool

    prompts = [f"Goal at row {i}. Answer with a python list of moves." for i in range(12)]
    before = tiny_actor.prefix_cache
    tiny_actor.prefix_cache = False
    tiny_actor.static_caches = StaticCachePool()
    calls = [(6, {}), (3, {"temperature": 1.0, "seeds": range(3)}), (5, {}),
             (12, {"temperature": 1.0, "seeds": range(12)}), (6, {})]
    answers: dict[bool, list] = {}
    addresses = []
    try:
        for static in (False, True):
            tiny_actor.static_cache = static
            answers[static] = []
            for n, how in calls:
                answers[static].append([s.token_ids for s in tiny_actor.generate(prompts[:n], max_new_tokens=48, **how)])
                if static:
                    held = tiny_actor.static_caches.held()
                    addresses.append(held[8, torch.float32].layers[0].keys.data_ptr())
                    tiny_actor.clear_prefix_cache()  # what training calls: the caches' buffers stay
        assert sorted(batch for batch, _ in tiny_actor.static_caches.held()) == [8, 16]
        assert tiny_actor.static_caches.created == 2 and len(set(addresses)) == 1
        assert answers[True] == answers[False]
        tiny_actor.generate(prompts[:3], temperature=1.0, seed=7, max_new_tokens=48)  # one shared generator
        assert (3, torch.float32) in tiny_actor.static_caches.held()
    finally:
        tiny_actor.static_cache, tiny_actor.prefix_cache = False, before
        tiny_actor.static_caches = StaticCachePool()


def test_a_static_kv_cache_gives_the_same_answers(tiny_actor):
    """`static_cache` (what CUDA graphs need: transformers compiles the decode step on a
    GPU) changes where the keys and values live, not the answers: greedy and seeded
    samples token for token, log-probs to float rounding. With a prefix cache it stays
    off (that cache is the DynamicCache generate starts from). The same with its decode step
    traced by torch's cudagraphs backend (`decode_compiler`; on a CPU it captures nothing and
    runs the traced graphs)."""
    import torch._dynamo

    prompts = [f"Goal at row {i}. Answer with a python list of moves." for i in range(6)]
    before = tiny_actor.prefix_cache
    tiny_actor.prefix_cache = False
    runs = {}
    torch._dynamo.utils.counters.clear()
    try:
        for static, compiler in ((False, "inductor"), (True, "inductor"), (True, "cudagraphs")):
            tiny_actor.static_cache, tiny_actor.decode_compiler = static, compiler
            greedy = tiny_actor.generate(prompts, max_new_tokens=48)
            sampled = tiny_actor.generate(prompts, temperature=1.0, max_new_tokens=48, seeds=range(6), num_samples=2)
            runs[static, compiler] = greedy + sampled
    finally:
        tiny_actor.static_cache, tiny_actor.prefix_cache, tiny_actor.decode_compiler = False, before, "inductor"
        torch._dynamo.reset()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # the cudagraphs run went through dynamo
    plain = runs[False, "inductor"]
    for variant in ((True, "inductor"), (True, "cudagraphs")):
        assert [s.token_ids for s in runs[variant]] == [s.token_ids for s in plain], variant
        assert [s.logprob for s in runs[variant]] == pytest.approx([s.logprob for s in plain], abs=1e-4)


def test_a_prompts_ids_are_tokenized_once_and_are_the_tokenizers_own(tiny_actor):
    """The chat prompt's ids of a user text are kept (the loop asks for the same start-state
    prompts every call): the same ids as tokenizing anew, a copy each time, made again
    for another tokenizer, the least recent dropped past the capacity."""
    from lactchain.models.prompt_tokens import PromptTokens

    texts = [f"Goal at row {i}. Answer with a python list of moves." for i in range(5)]
    fresh = [tiny_actor._ids(tiny_actor.chat_prompt(t)) for t in texts]
    kept = PromptTokens(capacity=3)
    calls = []

    def make(text):
        calls.append(text)
        return tiny_actor._ids(tiny_actor.chat_prompt(text))

    tok = tiny_actor.tokenizer
    assert [kept.ids(t, tok, make) for t in texts[:3]] == fresh[:3] and len(calls) == 3
    got = kept.ids(texts[0], tok, make)
    assert got == fresh[0] and len(calls) == 3  # kept: not tokenized again
    got.append(-1)
    assert kept.ids(texts[0], tok, make) == fresh[0]  # a caller's change never reaches the kept ids
    kept.ids(texts[3], tok, make)  # a 4th text: the least recently used (texts[1]) goes
    kept.ids(texts[1], tok, make)
    assert calls[-1] == texts[1] and len(calls) == 5
    kept.ids(texts[0], object(), make)  # another tokenizer: nothing kept applies
    assert calls[-1] == texts[0] and len(calls) == 6
    # the actor's own: generate conditions on exactly these ids
    assert [tiny_actor.prompt_ids(t) for t in texts] == fresh == [tiny_actor.prompt_ids(t) for t in texts]
