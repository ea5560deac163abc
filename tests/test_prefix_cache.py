"""The actor's shared-prefix KV cache and its bf16 inference copy (lactchain.models.actor):
same outputs as the plain left-padded batch, reuse across calls, invalidation when the
weights change. On the seeded `tiny` preset; one e2e test on SmolLM2-135M."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lactchain.envs import GridWorldEnv
from lactchain.envs.gridworld import ORIENTATIONS, State
from lactchain.models.actor import MIN_SHARED_PREFIX, Actor
from lactchain.moves import format_moves
from lactchain.prompts import DEFAULT_STRATEGY, PromptSpec, render_prompt


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def cached() -> Actor:
    return Actor.load("tiny", device="cpu")


@pytest.fixture(scope="module")
def uncached() -> Actor:
    return Actor.load("tiny", device="cpu", prefix_cache=False)


def state_prompts(n: int, strategy: str = DEFAULT_STRATEGY) -> list[str]:
    """Rollout-like prompts: one strategy, `n` states on grids of different sizes; some
    followed by a move history, so the state text (the suffix after the shared prefix)
    has different token lengths."""
    out = []
    for i in range(n):
        size = (4, 9, 16)[i % 3]
        env = GridWorldEnv(size=size, goal=(size - 1, size - 1))
        state = env.describe(State(i % size, (3 * i) % size, ORIENTATIONS[i % 4]))
        if i % 4:
            state += " " + format_moves(["move forward", "turn left"] * (i % 4))
        out.append(render_prompt(strategy, state))
    return out


def suffix_lengths(actor: Actor, prompts: list[str]) -> set[int]:
    rows = [actor._prompt_ids(p, 0) for p in prompts]
    n = min(len(r) for r in rows)
    k = next((i for i in range(n) if len({r[i] for r in rows}) > 1), n)
    return {len(r) - k for r in rows}


def fresh(actor: Actor) -> Actor:
    actor.clear_prefix_cache()
    actor.prefix_computations = 0
    return actor


def test_the_state_comes_last_in_the_default_template():
    """What the cache relies on: prompts of two states differ only at the end."""
    spec = PromptSpec()
    env = GridWorldEnv()
    a, b = (env.describe(State(0, 0, "east")), env.describe(State(2, 1, "north")))
    pa, pb = spec.render(a), spec.render(b)
    assert pa.endswith(a) and pb.endswith(b)
    assert pa[: -len(a)] == pb[: -len(b)]


@pytest.mark.parametrize("constrained", [True, False])
def test_greedy_is_identical_with_and_without_the_cache(cached: Actor, uncached: Actor, constrained: bool):
    prompts = state_prompts(7)
    assert len(suffix_lengths(cached, prompts)) >= 3  # really different suffix lengths: pads in the middle
    n = 48 if constrained else 20
    a = fresh(cached).generate(prompts, constrained=constrained, max_new_tokens=n)
    b = uncached.generate(prompts, constrained=constrained, max_new_tokens=n)
    assert cached.prefix_computations == 1 and uncached.prefix_computations == 0
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    assert [s.text for s in a] == [s.text for s in b]
    assert [s.moves for s in a] == [s.moves for s in b]
    assert [s.mode for s in a] == [s.mode for s in b]
    assert [s.logprob for s in a] == pytest.approx([s.logprob for s in b], abs=1e-4)


def test_sampling_is_seeded_grouped_and_identical_to_uncached(cached: Actor, uncached: Actor):
    prompts = state_prompts(4)
    a = fresh(cached).generate(prompts, temperature=1.0, seed=7, num_samples=3)
    b = uncached.generate(prompts, temperature=1.0, seed=7, num_samples=3)
    again = cached.generate(prompts, temperature=1.0, seed=7, num_samples=3)
    other = cached.generate(prompts, temperature=1.0, seed=8, num_samples=3)
    assert len(a) == 12
    assert [s.token_ids for s in a] == [s.token_ids for s in b] == [s.token_ids for s in again]
    assert [s.text for s in a] != [s.text for s in other]
    assert cached.prefix_computations == 1  # one prefix for all four calls
    # Rows stay grouped per prompt: greedy duplicates agree, and match the prompt alone.
    greedy = cached.generate(prompts, num_samples=2)
    assert [s.token_ids for s in greedy[::2]] == [s.token_ids for s in greedy[1::2]]
    assert cached.generate(prompts[2:3])[0].token_ids == greedy[4].token_ids


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sample_logprob_matches_teacher_forcing(cached: Actor, uncached: Actor, temperature: float):
    prompts = state_prompts(5)
    samples = fresh(cached).generate(prompts, temperature=temperature, seed=3, num_samples=2)
    expanded = [p for p in prompts for _ in range(2)]
    ids = [s.token_ids for s in samples]
    scored = cached.completion_logprobs(expanded, ids)
    plain = uncached.completion_logprobs(expanded, ids)
    assert scored == pytest.approx([s.logprob for s in samples], abs=1e-4)
    assert scored == pytest.approx(plain, abs=1e-4)
    # Scoring reuses the prefix generate computed (same tokens, same weights).
    assert cached.prefix_computations == 1


def test_the_cache_is_reused_across_calls_and_strategies(cached: Actor, uncached: Actor):
    actor = fresh(cached)
    prompts = state_prompts(9)
    actor.generate(prompts[:3])
    assert actor.prefix_computations == 1
    actor.generate(prompts[3:9])  # other states, same strategy
    actor.generate(prompts[5:6])  # a lone prompt reuses the cached prefix ...
    sample = actor.stream(prompts[6], lambda _t: None)  # ... so does streaming
    assert actor.prefix_computations == 1
    assert sample.token_ids == uncached.generate(prompts[6:7])[0].token_ids
    # A lone prompt with nothing cached for it is not cached (nothing to share).
    lone = render_prompt("Reach the goal.", "You are at (x=1, y=1) facing west.")
    actor.generate([lone])
    assert actor.prefix_computations == 1
    # A new strategy is a new prefix; both stay cached.
    other = state_prompts(3, strategy="Go north first, then east.")
    actor.generate(other)
    actor.generate(prompts[:2])
    actor.generate(other[1:])
    assert actor.prefix_computations == 2


def test_generating_and_scoring_pass_the_cache_under_the_name_transformers_takes(cached: Actor, uncached: Actor):
    """transformers 5.24 renamed `past_key_values` to `cache`: the old name warned on every
    generate call (the console's job logs filled with it) and leaves forward in 5.40."""
    import warnings

    prompts = state_prompts(4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for actor in (fresh(cached), uncached):
            samples = actor.generate(prompts, temperature=1.0, seed=1)
            actor.completion_logprobs(prompts, [s.token_ids for s in samples])
    assert cached.prefix_computations == 1  # the cached path ran, and took its cache
    assert not [str(w.message) for w in seen if "past_key_values" in str(w.message)]


def test_identical_prompts_and_short_common_prefixes(cached: Actor, uncached: Actor):
    actor = fresh(cached)
    same = state_prompts(1) * 3  # every token shared: the last one is still fed to the model
    assert [s.token_ids for s in actor.generate(same)] == [s.token_ids for s in uncached.generate(same)]
    assert actor.prefix_computations == 1
    key = next(iter(actor._prefix_kv))
    assert len(key[0]) == len(actor._prompt_ids(same[0], 0)) - 1
    # Chat-template tokens only in common: below MIN_SHARED_PREFIX, the plain path.
    short = ["Hi.", "The goal is at (x=3, y=3)."]
    rows = [actor._prompt_ids(p, 0) for p in short]
    assert next(i for i, (a, b) in enumerate(zip(*rows)) if a != b) < MIN_SHARED_PREFIX
    assert [s.token_ids for s in actor.generate(short, constrained=False, max_new_tokens=8)] == \
        [s.token_ids for s in uncached.generate(short, constrained=False, max_new_tokens=8)]
    assert actor.prefix_computations == 1


def test_the_stored_prefix_is_never_modified(cached: Actor):
    actor = fresh(cached)
    prompts = state_prompts(6)
    first = actor.generate(prompts)
    (kv,) = actor._prefix_kv.values()
    snapshot = [(k.clone(), v.clone()) for k, v in kv]
    assert all(k.shape[0] == 1 for k, _ in kv)  # batch 1: expanded per call
    again = actor.generate(prompts, num_samples=2, temperature=1.0, seed=0)
    assert len(again) == 12
    assert [s.token_ids for s in actor.generate(prompts)] == [s.token_ids for s in first]
    for (k, v), (k0, v0) in zip(kv, snapshot):
        assert torch.equal(k, k0) and torch.equal(v, v0)


def make_adapter(folder: Path) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lactchain.models.presets import prepare

    base = AutoModelForCausalLM.from_pretrained(prepare("tiny"))
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    peft_model.save_pretrained(folder)
    return folder


def test_adapters_and_weight_changes_invalidate_the_cache(tmp_path: Path, uncached: Actor):
    adapter = make_adapter(tmp_path / "adapter")
    prompts = state_prompts(4)
    completions = [format_moves(["move forward", "turn left"])] * 4
    actor = Actor.load("tiny", device="cpu")
    tuned = Actor.load("tiny", adapter=adapter, device="cpu", prefix_cache=False)

    base_out = actor.generate(prompts, constrained=False, max_new_tokens=8)
    assert actor.prefix_computations == 1
    actor.load_adapter(adapter)
    assert not actor._prefix_kv
    got = actor.generate(prompts, constrained=False, max_new_tokens=8)
    assert actor.prefix_computations == 2
    assert [s.token_ids for s in got] == [s.token_ids for s in tuned.generate(prompts, constrained=False, max_new_tokens=8)]
    assert actor.completion_logprobs(prompts, completions) == pytest.approx(
        tuned.completion_logprobs(prompts, completions), abs=1e-4)

    actor.unload_adapter()
    assert not actor._prefix_kv
    assert [s.token_ids for s in actor.generate(prompts, constrained=False, max_new_tokens=8)] == \
        [s.token_ids for s in base_out]
    assert actor.prefix_computations == 3

    # Training replaces the model object, or updates weights in place: both are noticed.
    actor.model = actor.model
    actor.generate(prompts)
    assert actor.prefix_computations == 4
    actor.generate(prompts)
    assert actor.prefix_computations == 4
    with torch.no_grad():
        next(actor.model.parameters()).mul_(1.5)  # like an optimizer step
    actor.generate(prompts)
    assert actor.prefix_computations == 5
    actor.clear_prefix_cache()
    assert not actor._prefix_kv


def test_bf16_inference_copy(tmp_path: Path):
    from peft import PeftModel

    adapter = make_adapter(tmp_path / "adapter")
    prompts = state_prompts(6)
    actor = Actor.load("tiny", adapter=adapter, device="cpu", inference_dtype="bf16")
    fp32 = Actor.load("tiny", adapter=adapter, device="cpu")
    half = actor.generate(prompts)
    copy = actor._inference_copy
    assert copy is not None and next(copy.parameters()).dtype == torch.bfloat16
    assert not isinstance(copy, PeftModel)  # the adapter is merged into the copy
    assert isinstance(actor.model, PeftModel) and next(actor.model.parameters()).dtype == torch.float32
    full = fp32.generate(prompts)
    # bf16 rounding may flip a near-tie; the tiny model's spread logits keep most choices.
    assert sum(a.token_ids == b.token_ids for a, b in zip(half, full)) >= len(prompts) - 1
    for s in half:
        assert s.mode == "strict"
    # Cached and uncached agree under bf16 too.
    actor.prefix_cache = False
    assert [s.token_ids for s in actor.generate(prompts)] == [s.token_ids for s in half]
    actor.prefix_cache = True
    # The copy follows the weights: rebuilt after an adapter change, dropped when switched off.
    actor.unload_adapter()
    assert actor._inference_copy is None
    actor.generate(prompts[:2])
    assert actor._inference_copy is not None and actor._inference_copy is not copy
    actor.inference_dtype = None
    assert actor._inference_copy is None
    assert [s.token_ids for s in actor.generate(prompts)] == \
        [s.token_ids for s in Actor.load("tiny", device="cpu", prefix_cache=False).generate(prompts)]
    with pytest.raises(ValueError, match="dtype"):
        actor.inference_dtype = "int3"


def test_an_adapter_is_merged_for_generation_where_a_second_copy_fits(tmp_path: Path, monkeypatch):
    """In the weights' own dtype too, generate runs a copy with the LoRA adapter merged (no
    per-token adapter ops: a GPU pays those in launches), training and scoring keep the
    adapter; where no second copy fits, the adapter runs unmerged, with the same answers."""
    from peft import PeftModel

    import lactchain.models.actor as actor_module
    from lactchain.models.actor import room_for_a_copy

    adapter = make_adapter(tmp_path / "adapter")
    prompts = state_prompts(6)
    actor = Actor.load("tiny", adapter=adapter, device="cpu", prefix_cache=False)
    assert room_for_a_copy(actor.model) and not room_for_a_copy(actor.model, margin=1e12)
    merged = actor.generate(prompts)
    copy = actor._inference_copy
    assert copy is not None and not isinstance(copy, PeftModel) and next(copy.parameters()).dtype == torch.float32
    assert isinstance(actor.model, PeftModel)
    tight = Actor.load("tiny", adapter=adapter, device="cpu", prefix_cache=False)
    monkeypatch.setattr(actor_module, "room_for_a_copy", lambda model, margin=1.25: False)  # a full machine
    unmerged = tight.generate(prompts)
    assert tight._inference_copy is None
    assert [s.token_ids for s in merged] == [s.token_ids for s in unmerged]
    assert [s.logprob for s in merged] == pytest.approx([s.logprob for s in unmerged], abs=1e-4)
    # Without an adapter nothing is copied.
    plain = Actor.load("tiny", device="cpu")
    plain.generate(prompts[:2])
    assert plain._inference_copy is None


def test_an_optimizer_step_that_bumps_no_version_counter_still_refreshes_what_generates(tmp_path: Path):
    """transformers' default optimizer (torch's fused AdamW) changes the LoRA weights in
    place without bumping their version counters. GRPO generates between such steps: the
    bf16 generation copy and the prefix cache must follow the weights, or every sample of a
    train-actor phase comes from the policy it started with (what happened before this test)."""
    from lactchain.train.actor_config import TrainActorConfig
    from lactchain.train.lora import add_lora

    prompts = state_prompts(4)
    actor = Actor.load("tiny", device="cpu", inference_dtype="bf16")
    actor.model = add_lora(actor.model, TrainActorConfig(loss="grpo"))
    actor.generate(prompts)
    copy, computed = actor._inference_copy, actor.prefix_computations
    trainable = [p for p in actor.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=0.5, fused=True)
    for p in trainable:
        p.grad = torch.ones_like(p)
    versions = [p._version for p in trainable]
    optimizer.step()
    assert [p._version for p in trainable] == versions  # the trap: no counter tells the caches
    fresh = Actor.load("tiny", device="cpu", inference_dtype="bf16", prefix_cache=False)
    fresh.model = actor.model  # the same updated weights, nothing cached
    got = actor.generate(prompts)
    # the copy follows: its adapted weights rewritten in place (lactchain.models.merged_copy)
    assert actor._inference_copy is copy and actor.copy_refreshes == 1 and actor.prefix_computations == computed + 1
    assert [s.token_ids for s in got] == [s.token_ids for s in fresh.generate(prompts)]


# ---- e2e: SmolLM2-135M -------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_smollm2_prefix_cache_greedy_e2e():
    actor = Actor.load("smollm2-135m", device="cpu")
    env = GridWorldEnv(moves=actor.moves)
    spec = PromptSpec(moves=actor.moves)
    prompts = [spec.render(env.describe(State(i % 4, (i // 4) % 4, ORIENTATIONS[i % 4]))) for i in range(16)]
    cached = actor.generate(prompts)
    assert actor.prefix_computations == 1
    actor.prefix_cache = False
    plain = actor.generate(prompts)
    assert [s.token_ids for s in cached] == [s.token_ids for s in plain]
    assert [s.logprob for s in cached] == pytest.approx([s.logprob for s in plain], abs=1e-3)


def test_the_cache_is_on_where_it_pays_and_a_run_records_what_ran(tiny_actor, tmp_path, lc):
    """prefix_cache=None follows the device type (on for a CPU, off on CUDA where it was
    measured at 0.29x); a play run's `generation` tag says what its actor did."""
    import json

    from lactchain.models.actor import PREFIX_CACHE_PAYS
    from lactchain.runs.registry import Registry

    assert PREFIX_CACHE_PAYS == {"cpu": True, "cuda": False}
    assert tiny_actor.prefix_cache is True  # loaded on the CPU with no choice made
    assert Actor(tiny_actor.model, tiny_actor.tokenizer, device="cpu", prefix_cache=False).prefix_cache is False
    db = tmp_path / "registry.db"
    code, out, err = lc("play", "--actor", "tiny", "--episodes", "2", "--envs", "2", "--max-actions", "2",
                        "--db", db, "--json")
    assert code == 0, err
    tag = json.loads(Registry(db).tags(json.loads(out)["run_id"])["generation"])
    assert tag == {"device": "cpu", "prefix_cache": True, "grammar": "tensor", "dtype": tag["dtype"],
                   "static_cache": False, "grammar_spelling": "any"}
    assert tag["dtype"] in ("float32", "bfloat16")


def test_the_static_cache_is_chosen_per_run_recorded_and_answers_the_same(tiny_actor, tmp_path, lc):
    """--static-cache on|off|auto (auto: `STATIC_CACHE_PAYS`, off everywhere until a loop run
    on a GPU shows it pays): the run records the choice and what its actor did."""
    import json

    from lactchain.models.actor import STATIC_CACHE_PAYS
    from lactchain.runs.registry import Registry

    assert STATIC_CACHE_PAYS == {"cpu": False, "cuda": False}
    assert tiny_actor.static_cache is False
    db = tmp_path / "registry.db"
    answers = {}
    for choice in ("on", "off"):
        code, out, err = lc("play", "--actor", "tiny", "--episodes", "3", "--envs", "3", "--max-actions", "2",
                            "--static-cache", choice, "--seed", "4", "--db", db, "--json")
        assert code == 0, err
        run_id = json.loads(out)["run_id"]
        with Registry(db) as reg:
            assert json.loads(reg.tags(run_id)["generation"])["static_cache"] is (choice == "on")
            assert reg.params(run_id)["static_cache"] == choice
            answers[choice] = [(s["state"], s["completion"], s["reward"]) for s in reg.steps(run_id)]
    assert answers["on"] == answers["off"] and answers["on"]
    code, out, err = lc("play", "--actor", "tiny", "--engine", "vllm", "--static-cache", "on", "--db", db)
    assert code != 0 and "--static-cache on" in err and "--engine hf" in err and "Traceback" not in err
    # CUDA graphs need a CUDA GPU (this test machine has none): one line before any run exists
    with Registry(db) as reg:
        runs_before = len(reg.list_runs())
    code, out, err = lc("play", "--actor", "tiny", "--static-cache", "cudagraphs", "--db", db)
    assert code != 0 and "--static-cache" in err and "no CUDA GPU" in err and "Traceback" not in err
    with Registry(db) as reg:
        assert len(reg.list_runs()) == runs_before
