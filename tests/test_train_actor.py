"""Preference tuning of the actor (lactchain.train.actor) with real TRL on the tiny model.

Covers: SimPO / DPO / KTO each training and saving a LoRA adapter that loads and
changes the model; one EOS at the end of every tokenized completion (and one
BOS); metrics reaching the registry while training runs; the failure-signature
detector; resume from a checkpoint; cancellation; the SimPO hyper-parameter
guard (the first attempt's beta 0.1 / gamma 0.5); pair selection; the CLI; and
the learning test: SimPO on pairs that favour the planner's optimal moves makes
greedy output follow them and raises the evaluation success rate.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from lactchain.envs import GridWorldEnv, Planner, all_states
from lactchain.jobs import RunHandle
from lactchain.loop.labelers import execute_from
from lactchain.prompts import PromptSpec
from lactchain.runs.registry import Registry
from lactchain.train.actor import (
    ActorTrainingCallback,
    FailureDetector,
    build_trainer,
    resolve_hparams,
    tokenized_completions,
    train_actor,
)
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.pair_selection import NoUsablePairs, select_pairs


def cfg(**settings) -> TrainActorConfig:
    """The trainer's config from flat settings (beta, simpo_gamma, cpo_alpha sit in parts)."""
    return TrainActorConfig.from_params(settings)

GAMMA = 0.9
# The first four moves of the optimal plan from six start states; repeated as a
# policy it reaches the goal from every state of the 4x4 grid.
PREFIX = ["move forward", "move forward", "move forward", "turn left"]


@pytest.fixture(scope="module", autouse=True)
def _offline_tiny_models(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("LACTCHAIN_MODELS", str(tmp_path_factory.mktemp("models")))
        # The tiny model's matmuls are too small to gain from threads, and on a
        # shared 2-core box a second thread makes each step several times slower.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def tiny():
    from lactchain.models.actor import Actor

    return Actor.load("tiny")


@pytest.fixture
def registry(tmp_path):
    with Registry(tmp_path / "runs" / "registry.db") as reg:
        yield reg


def make_handle(registry: Registry, kind: str = "actor") -> RunHandle:
    run_id = registry.create_run(kind)
    registry.start_run(run_id)
    return RunHandle(registry, run_id, registry.run_dir(run_id))


# ---- pairs ------------------------------------------------------------------------

def _q(env, values, state, moves):
    reward, nxt, done = execute_from(env, state, moves)
    return reward + GAMMA * values[nxt] * (0.0 if done else 1.0)


def near_misses(moves: list[str], vocab) -> list[list[str]]:
    """Every list one substitution, deletion or insertion away from `moves`."""
    out = set()
    for i in range(len(moves)):
        out.add(tuple(moves[:i] + moves[i + 1:]))
        for m in vocab:
            out.add(tuple(moves[:i] + [m] + moves[i + 1:]))
    for i in range(len(moves) + 1):
        for m in vocab:
            out.add(tuple(moves[:i] + [m] + moves[i:]))
    return sorted(list(m) for m in out if m and list(m) != moves)


def optimal_prefix_pairs(actor, states, k: int, per_state: int | None = None):
    """chosen = the first k moves of the planner's optimal plan; rejected = near
    misses that are worse by the exact Q* (they bump a wall, turn away or waste moves)."""
    env = GridWorldEnv(moves=actor.moves)
    planner = Planner(env)
    values = planner.values(GAMMA)
    spec = PromptSpec(moves=actor.moves)
    pairs, chosen = [], {}
    for s in states:
        c = planner.plan(s)[:k]
        chosen[s] = c
        qc = _q(env, values, s, c)
        worse = [r for r in near_misses(c, actor.moves) if _q(env, values, s, r) < qc - 0.5]
        for r in worse[:per_state]:
            pairs.append({"state": s.as_dict(), "prompt": spec.render(env.describe(s)), "chosen": c, "rejected": r,
                          "chosen_score": qc, "rejected_score": _q(env, values, s, r), "labeler": "critic",
                          "status": "labeled"})
    return pairs, chosen


def small_pairs(actor, n: int = 8):
    env = GridWorldEnv(moves=actor.moves)
    states = [s for s in all_states(env.size) if (s.x, s.y) != env.goal][::7][:n]
    return optimal_prefix_pairs(actor, states, k=3, per_state=1)[0]


# ---- hyper-parameters ---------------------------------------------------------------

def test_simpo_defaults_are_in_the_authors_range_and_gamma_is_the_margin_itself():
    beta, gamma, notes = resolve_hparams("simpo", None, None)
    assert 2.0 <= beta <= 10.0
    assert 0.25 <= gamma / beta <= 0.5  # TRL's simpo_gamma is gamma, not gamma/beta
    assert notes == []
    assert resolve_hparams("dpo", None, None)[:2] == (0.1, None)
    assert resolve_hparams("kto", None, None)[:2] == (0.1, None)


@pytest.mark.parametrize("beta, gamma", [(0.1, 0.5), (2.5, 5.0), (50.0, 10.0), (-1.0, None), (2.5, -0.1)])
def test_insane_simpo_values_are_refused(beta, gamma):
    with pytest.raises(ValueError, match="SimPO|beta|gamma"):
        resolve_hparams("simpo", beta, gamma)


def test_first_attempts_simpo_settings_fail_before_any_model_work(tmp_path):
    # beta 0.1 / gamma 0.5 is what the first public attempt ran; it must not start.
    with pytest.raises(ValueError, match="first LactChain attempt"):
        train_actor(object(), [], cfg(loss="simpo", beta=0.1, simpo_gamma=0.5), output_dir=tmp_path)


def test_values_outside_the_recommended_range_warn():
    _, _, notes = resolve_hparams("simpo", 1.5, 1.2)
    assert any("beta" in n for n in notes) and any("gamma/beta" in n for n in notes)
    with pytest.raises(ValueError, match="simpo_gamma"):
        resolve_hparams("dpo", 0.1, 0.5)


# ---- pair selection -----------------------------------------------------------------

def test_select_pairs_drops_identical_and_unlabeled_and_explains_when_nothing_is_left(registry):
    run = registry.create_run("pairs")
    p = {"prompt": "where to?", "chosen": ["move forward"], "rejected": ["turn left"]}
    registry.add_pairs(run, [
        {**p, "labeler": "critic"},
        {**p, "rejected": ["move forward"], "labeler": "critic"},  # chosen == rejected
        {**p, "labeler": "human"},  # pending until a human labels it
        {**p, "labeler": "llm"},
    ])
    sel = select_pairs(registry, [run], "any")
    assert len(sel) == 2 and sel.dropped_identical == 1 and sel.dropped_unlabeled == 1
    assert [x["labeler"] for x in select_pairs(registry, run, "critic").pairs] == ["critic"]
    other = registry.create_run("pairs")
    registry.add_pairs(other, [{**p, "rejected": ["move forward"], "labeler": "critic"}] * 3)
    with pytest.raises(NoUsablePairs, match="3 dropped because chosen == rejected"):
        select_pairs(registry, [other], "critic")
    with pytest.raises(NoUsablePairs, match="0 pair"):
        select_pairs(registry, [run], "episodes")
    with pytest.raises(ValueError, match="labeler"):
        select_pairs(registry, [run], "oracle")


def test_human_labels_belong_to_the_pairs_run_they_label(registry):
    """The console writes a label of a critic's pair as a row of its `labels` run;
    `--pairs-from PAIRS --labeler human` still finds it (and not an undone one)."""
    pairs = registry.create_run("pairs")
    p = {"prompt": "where to?", "chosen": ["move forward"], "rejected": ["turn left"], "labeler": "critic"}
    first, second = registry.add_pairs(pairs, [p, {**p, "prompt": "and now?"}])
    with pytest.raises(NoUsablePairs, match="0 pair"):
        select_pairs(registry, [pairs], "human")
    labels = registry.create_run("labels")
    swapped = {**p, "chosen": ["turn left"], "rejected": ["move forward"], "labeler": "human", "status": "labeled"}
    registry.add_pairs(labels, [{**swapped, "meta": {"source_pair": first}},
                                {**swapped, "prompt": "and now?", "meta": {"source_pair": second, "undone": True}}])
    sel = select_pairs(registry, [pairs], "human")
    assert [(x["prompt"], x["chosen"]) for x in sel.pairs] == [("where to?", ["turn left"])]
    assert len(select_pairs(registry, [labels], "human")) == 2  # the labels run itself: every row, as before


# ---- datasets: EOS once, BOS once, pad != eos ------------------------------------------

@pytest.mark.parametrize("loss", ["simpo", "dpo", "kto"])
def test_every_tokenized_completion_ends_with_exactly_one_eos(loss, tmp_path):
    actor = tiny()
    tok = actor.tokenizer
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    pairs = small_pairs(actor, 4)
    trainer, info = build_trainer(actor, pairs, cfg(loss=loss, max_steps=1, batch_size=2), output_dir=tmp_path)
    comps = tokenized_completions(trainer)
    assert len(comps) == 2 * len(pairs) == info["completions"]
    for ids in comps:
        assert ids[-1] == tok.eos_token_id and ids.count(tok.eos_token_id) == 1, tok.convert_ids_to_tokens(ids)
        assert tok.pad_token_id not in ids
    # The text TRL saw ends in one EOS too, and the prompt starts with one BOS.
    ds = trainer.train_dataset
    texts = list(ds["completion"]) if loss == "kto" else list(ds["chosen"]) + list(ds["rejected"])
    assert all(t.endswith(tok.eos_token) and not t.endswith(tok.eos_token * 2) for t in texts)
    prompt_key = "prompt_input_ids" if loss == "simpo" else "prompt_ids"
    for ids in list(ds[prompt_key]):
        assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    # The prompt is the chat-rendered user message the actor sees at inference.
    assert set(ds["prompt"]) == {actor.chat_prompt(p["prompt"]) for p in pairs}


# ---- training with each loss ----------------------------------------------------------

def _adapter_tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


@pytest.mark.parametrize("loss", ["simpo", "dpo", "kto"])
def test_each_loss_trains_streams_metrics_and_saves_a_loadable_adapter(loss, registry):
    from lactchain.models.actor import Actor

    actor = tiny()
    pairs = small_pairs(actor, 8)
    handle = make_handle(registry)
    rows_during_training = []

    def on_log(step, total, metrics):
        if "loss" in metrics:  # the registry already holds this step's row
            rows_during_training.append(len(registry.metric_history(handle.run_id, "loss")))

    res = train_actor(actor, pairs, cfg(loss=loss, max_steps=3, lr=1e-3, batch_size=4, save_steps=2), handle=handle,
                      on_log=on_log)
    assert res["steps"] == 3 and res["pairs"] == 8
    assert rows_during_training == [1, 2, 3]
    expected = {"loss", "margin", "logp_chosen", "logp_rejected"} | ({"accuracy"} if loss != "kto" else set())
    assert expected <= set(res["final_metrics"])
    assert expected <= set(registry.metric_keys(handle.run_id))
    assert [r["step"] for r in registry.metric_history(handle.run_id, "loss")] == [1, 2, 3]
    assert all(math.isfinite(r["value"]) for r in registry.metric_history(handle.run_id, "loss"))

    # Adapter only: LoRA weights, no base weights, registered as an artifact.
    adapter = Path(res["adapter"])
    assert adapter == handle.dir / "adapter"
    assert (adapter / "adapter_config.json").is_file() and not (adapter / "model.safetensors").exists()
    names = list(_adapter_tensors(adapter))
    assert names and all("lora_" in n for n in names)
    assert registry.latest_artifact(handle.run_id, "adapter")["path"] == str(adapter)
    ckpts = registry.artifacts(handle.run_id, "checkpoint")
    assert [c["step"] for c in ckpts] == [2, 3] and all(Path(c["path"]).is_dir() for c in ckpts)

    # It loads on the base model and changes it.
    base, tuned = Actor.load("tiny"), Actor.load("tiny", adapter=adapter)
    prompts = [p["prompt"] for p in pairs[:3]]
    completions = ["['move forward', 'turn left']"] * 3
    lp_base = base.completion_logprobs(prompts, completions)
    lp_tuned = tuned.completion_logprobs(prompts, completions)
    assert max(abs(a - b) for a, b in zip(lp_base, lp_tuned)) > 1e-3
    # ... and the in-memory actor now carries the same adapter.
    assert actor.adapter == adapter
    assert actor.completion_logprobs(prompts, completions) == pytest.approx(lp_tuned, abs=1e-4)


@pytest.mark.parametrize("loss", ["dpo", "kto"])
def test_after_training_the_bf16_generation_copy_runs_its_own_merged_weights(loss, registry):
    """TRL's DPO/KTO/GRPO/SFT trainers patch the model's forward with a closure over the
    original: a deep copy of the trained model still ran the original (float32, LoRA
    unmerged) for every generation after the first train-actor. The bf16 copy must run
    itself: the trained model sees no forward pass, and the answers are those of the saved
    adapter loaded fresh at bf16."""
    actor = tiny()
    actor.inference_dtype = torch.bfloat16
    pairs = small_pairs(actor, 8)
    res = train_actor(actor, pairs, cfg(loss=loss, max_steps=2, lr=1e-2, batch_size=4), handle=make_handle(registry))
    prompts = [p["prompt"] for p in pairs[:4]]
    actor.generate(prompts[:1])  # builds the copy (a hook added before would be deep-copied into it)
    seen: list[int] = []
    hook = actor.model.get_input_embeddings().register_forward_hook(lambda *_: seen.append(1))
    try:
        answers = [s.text for s in actor.generate(prompts, temperature=1.0, seed=3, num_samples=2)]
    finally:
        hook.remove()
    assert seen == []
    fresh = tiny()
    fresh.load_adapter(res["adapter"])
    fresh.inference_dtype = torch.bfloat16
    assert answers == [s.text for s in fresh.generate(prompts, temperature=1.0, seed=3, num_samples=2)]


def test_a_training_step_refreshes_the_generation_copy_in_place_as_a_fresh_build_would():
    """GRPO samples between optimizer steps: the merged bf16 copy is not rebuilt each step
    (seconds for SmolLM2 on a CPU) but its adapted weights rewritten in place
    (lactchain.models.merged_copy): the same tensors (CUDA graphs replay on their addresses),
    bit for bit the weights of a copy built afresh, the same answers."""
    from lactchain.train.lora import add_lora

    actor = tiny()
    actor.inference_dtype = torch.bfloat16
    actor.model = add_lora(actor.model, cfg(loss="rft", lora_r=4))
    prompts = [p["prompt"] for p in small_pairs(actor, 4)]
    actor.generate(prompts)
    copy = actor._generation_model()
    before = {n: p.detach().clone() for n, p in copy.named_parameters()}
    addresses = [p.data_ptr() for p in copy.parameters()]
    with torch.no_grad():  # one optimizer step's worth of change to the adapter
        for name, p in actor.model.named_parameters():
            if "lora_" in name:
                p.add_(0.05 * torch.randn_like(p))
    answers = actor.generate(prompts, temperature=1.0, seed=3, num_samples=2)
    assert actor._generation_model() is copy and [p.data_ptr() for p in copy.parameters()] == addresses
    assert (actor.copy_builds, actor.copy_refreshes) == (1, 1)
    refreshed = {n: p.detach().clone() for n, p in copy.named_parameters()}
    assert any(not torch.equal(before[n], refreshed[n]) for n in refreshed)  # the new weights arrived
    actor.clear_prefix_cache()  # what a new adapter does: build the copy afresh
    rebuilt = actor._generation_model()
    assert rebuilt is not copy and actor.copy_builds == 2
    assert all(torch.equal(refreshed[n], p) for n, p in rebuilt.named_parameters())
    again = actor.generate(prompts, temperature=1.0, seed=3, num_samples=2)
    assert [s.token_ids for s in again] == [s.token_ids for s in answers]
    assert [s.logprob for s in again] == [s.logprob for s in answers]


def test_mixed_precision_training_leaves_the_actor_scoring_like_its_saved_adapter(registry):
    """Trainer(bf16=True), the default on CUDA, wraps model.forward in accelerate's autocast;
    left on, the in-memory actor scores unlike its adapter reloaded (CPU autocast shows it too)."""
    actor = tiny()
    actor.model = actor.model.to(torch.bfloat16)
    pairs = small_pairs(actor, 8)
    res = train_actor(actor, pairs, cfg(loss="simpo", max_steps=2, lr=1e-3, batch_size=4, bf16=True),
                      handle=make_handle(registry))
    assert "_original_forward" not in actor.model.__dict__  # accelerate's autocast wrapper is off
    assert actor.model.forward.__func__ is type(actor.model).forward
    reloaded = tiny()
    reloaded.model = reloaded.model.to(torch.bfloat16)
    reloaded.load_adapter(res["adapter"])
    prompts = [p["prompt"] for p in pairs[:3]]
    completions = ["['move forward', 'turn left']"] * 3
    assert actor.completion_logprobs(prompts, completions) == pytest.approx(
        reloaded.completion_logprobs(prompts, completions), abs=1e-4)


def test_trls_fused_head_projects_only_the_completion_on_a_cpu_and_scores_it_the_same():
    """DPO, KTO and GRPO score through TRL's fused LM head, which on a CPU projected every
    prompt position through the vocabulary (a SmolLM2 DPO step 53-57 s -> 29-31 s without
    them, scripts/completion_scoring_check.py). With the trainers' patch it projects only
    the labelled positions, and the log-probs are the model's own log-softmax at the labels."""
    import trl.trainer.utils as trl_utils
    from trl.trainer.utils import add_fused_lm_head

    from lactchain.train.completion_scoring import score_labelled_positions_only

    assert score_labelled_positions_only()
    rule = trl_utils._use_triton
    assert score_labelled_positions_only() and trl_utils._use_triton is rule  # applied once, not wrapped again
    model = tiny().model.eval()
    add_fused_lm_head(model)
    ids = torch.randint(3, 500, (2, 30), generator=torch.Generator().manual_seed(0))
    labels = ids.clone()
    labels[:, :25] = -100  # a 25-token prompt, a 5-token completion
    projected = []
    kernel = trl_utils._ChunkedLogProbFunction

    class Counting(kernel):  # the real kernel, counting the positions it is handed
        @staticmethod
        def forward(ctx, hidden, *rest):
            projected.append(hidden.shape[0])
            return kernel.forward(ctx, hidden, *rest)

    trl_utils._ChunkedLogProbFunction = Counting
    try:
        with torch.no_grad():
            fused = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs
    finally:
        trl_utils._ChunkedLogProbFunction = kernel
    assert projected == [2 * 5]  # the shifted labels: 5 positions a row, not 29
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
    own = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    assert fused[:, 24:] == pytest.approx(own[:, 24:], abs=1e-5)
    assert (fused[:, :24] == 0).all()


def test_simpo_takes_the_logits_of_the_completion_window_only_with_trls_numbers(tmp_path):
    """CPO-SimPO's trainer asks the model for the logits from the first scored position on,
    not the whole prompt's: the same log-probs and NLL term as TRL's own forward."""
    from trl.experimental.cpo import CPOTrainer

    actor = tiny()
    trainer, _ = build_trainer(actor, small_pairs(actor, 4), cfg(loss="simpo", cpo_alpha=1.0, batch_size=4),
                               output_dir=tmp_path)
    assert isinstance(trainer, CPOTrainer)
    batch = next(iter(trainer.get_train_dataloader()))
    with torch.no_grad():
        ours = trainer.concatenated_forward(trainer.model, batch)
        theirs = CPOTrainer.concatenated_forward(trainer, trainer.model, batch)
    for mine, trl_value in zip((ours[0], ours[1], ours[4]), (theirs[0], theirs[1], theirs[4])):
        assert mine.tolist() == pytest.approx(trl_value.tolist(), abs=1e-5)
    assert ours[4] > 0  # the NLL term on chosen is there
    prompt_tokens = min(int((row != -100).nonzero()[0]) for row in batch["chosen_labels"])
    assert ours[2].shape[1] == theirs[2].shape[1] - prompt_tokens + 1 < theirs[2].shape[1] // 2


@pytest.mark.parametrize("loss", ["simpo", "grpo"])
def test_a_continued_adapter_trains_under_the_bf16_autocast_asked_for_again(loss, registry):
    """The loop trains the same in-memory actor every iteration. accelerate marks a model it
    prepared and skips a marked one, so the second call used to train fp32 (2x slower)."""
    from lactchain.train.grpo import GRPOTask, train_grpo

    actor = tiny()
    pairs = small_pairs(actor, 4)
    task = GRPOTask([{"prompt": p["prompt"], "state": p["state"]} for p in pairs],
                    reward=lambda states, samples: [float(len(s.moves)) for s in samples], generations=2)
    autocast_in_forward = []
    hook = actor.model.get_input_embeddings().register_forward_hook(
        lambda *_: autocast_in_forward.append(torch.is_autocast_enabled("cpu")))
    for call in (1, 2):
        autocast_in_forward.clear()
        config = cfg(loss=loss, max_steps=1, lr=1e-3, batch_size=4, bf16=True)
        if loss == "grpo":
            train_grpo(actor, task, config, handle=make_handle(registry))
        else:
            train_actor(actor, pairs, config, handle=make_handle(registry))
        assert any(autocast_in_forward), f"training call {call} ran without autocast"
    hook.remove()


@pytest.mark.parametrize("loss", ["rft", "simpo"])
def test_a_budget_deadline_stops_training_early_and_keeps_a_usable_adapter(loss, registry):
    """bench learn gives every method the same minutes: a trainer whose phase is past its
    deadline (handle.stop_at) stops after the step it is in, saves its adapter as
    complete, and reports it, and the run is not marked cancelled."""
    import time

    actor = tiny()
    pairs = small_pairs(actor, 8)
    rows = [{"prompt": p["prompt"], "chosen": p["chosen"]} for p in pairs] if loss == "rft" else pairs
    handle = make_handle(registry)
    handle.stop_at = time.time()  # already spent
    extra = {} if loss == "rft" else {"save_steps": 100}
    res = train_actor(actor, rows, cfg(loss=loss, max_steps=6, lr=1e-3, batch_size=2, **extra),
                      handle=handle)
    assert res["out_of_time"] and not res["cancelled"] and res["steps"] == 1
    adapter = registry.latest_artifact(handle.run_id, "adapter")
    assert adapter["step"] == 1 and adapter["meta"]["complete"] is True
    assert actor.adapter is not None and (actor.adapter / "adapter_config.json").is_file()

    handle = make_handle(registry)
    handle.stop_at = time.time() + 3600  # plenty left: the full run
    res = train_actor(tiny(), rows, cfg(loss=loss, max_steps=3, lr=1e-3, batch_size=2, **extra),
                      handle=handle)
    assert res["steps"] == 3 and not res["out_of_time"]


def test_continuing_from_an_earlier_adapter(tmp_path):
    from lactchain.models.actor import Actor

    first = tiny()
    pairs = small_pairs(first, 8)
    a = train_actor(first, pairs, cfg(loss="simpo", max_steps=2, lr=1e-3, batch_size=4), output_dir=tmp_path / "a")
    start = Actor.load("tiny", adapter=a["adapter"])
    b = train_actor(start, pairs, cfg(loss="dpo", max_steps=2, lr=1e-3, batch_size=4), output_dir=tmp_path / "b")
    before, after = _adapter_tensors(Path(a["adapter"])), _adapter_tensors(Path(b["adapter"]))
    assert set(before) == set(after)  # the same adapter, trained further (no "ref" copy saved)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    Actor.load("tiny", adapter=b["adapter"])


# ---- failure signatures -----------------------------------------------------------------

class _State:
    def __init__(self, step):
        self.global_step = step
        self.max_steps = 20


class _Args:
    logging_steps = 1
    output_dir = "unused"


def _feed(callback, logs):
    for step, log in enumerate(logs, start=1):
        callback.on_log(_Args(), _State(step), None, logs=log)


def test_detector_flags_loss_stuck_at_ln2_easy_pairs_and_falling_chosen_logprob(registry):
    handle = make_handle(registry)
    cb = ActorTrainingCallback("dpo", handle=handle)
    logs = [{"loss": 0.6931 + 0.001 * (i % 2), "rewards/accuracies": 1.0, "rewards/margins": 0.01,
             "logps/chosen": -20.0 - 2.0 * i, "logps/rejected": -25.0 - 2.0 * i} for i in range(8)]
    _feed(cb, logs)
    codes = {w.code for w in cb.warnings}
    assert codes == {"loss_stuck", "pairs_too_easy", "logp_chosen_falling"}
    stuck = next(w for w in cb.warnings if w.code == "loss_stuck")
    assert "ln 2" in stuck.message and stuck.step == cb.detector.window
    tag = registry.tags(handle.run_id)["warning"]
    assert all(c in tag for c in codes)
    assert registry.metric_history(handle.run_id, "warning_loss_stuck")[0]["step"] == stuck.step
    # Metrics went to the registry under the stable names, once per log.
    assert len(registry.metric_history(handle.run_id, "accuracy")) == 8
    assert registry.latest_metrics(handle.run_id)["logp_chosen"] == pytest.approx(-34.0)


def test_detector_is_quiet_on_a_healthy_run_and_knows_simpos_no_signal_loss():
    cb = ActorTrainingCallback("simpo", simpo_gamma=1.25)
    healthy = [{"loss": 1.5 - 0.1 * i, "rewards/accuracies": [0.5, 0.625, 1.0, 0.75, 1.0][i % 5],
                "rewards/margins": 0.2 * i + 0.1, "logps/chosen": -5.0 + 0.1 * (i % 3)} for i in range(10)]
    _feed(cb, healthy)
    assert cb.warnings == []
    # SimPO with gamma 1.25 sits at softplus(1.25) = 1.51 when it learns nothing.
    det = FailureDetector("simpo", simpo_gamma=1.25)
    for i in range(det.window):
        det.update({"loss": math.log1p(math.exp(1.25)) + 0.001, "margin": 0.0}, step=i + 1)
    assert set(det.fired) == {"loss_stuck"}
    nan = FailureDetector("kto")
    nan.update({"loss": float("nan")}, step=1)
    assert set(nan.fired) == {"loss_nan"}


# ---- resume and cancel -----------------------------------------------------------------

def test_checkpoints_the_trainer_rotated_away_leave_no_artifact_rows(registry):
    """save_total_limit=2 deletes older checkpoint folders: their registry rows go too,
    so `runs show` and resume never point at a folder that is gone; `runs prune` of the
    finished run takes the rest and keeps its adapter."""
    actor = tiny()
    handle = make_handle(registry)
    train_actor(actor, small_pairs(actor, 8), cfg(loss="simpo", max_steps=6, lr=1e-3, batch_size=4, save_steps=2),
                handle=handle)
    ckpts = registry.artifacts(handle.run_id, "checkpoint")
    assert [c["step"] for c in ckpts] == [4, 6] and all(Path(c["path"]).is_dir() for c in ckpts)
    assert not (handle.dir / "checkpoint-2").exists()
    # finished, `runs prune` takes what the trainer wrote to resume it, and keeps its adapter
    from lactchain.runs.prune import plan_prune, prune_checkpoints

    registry.end_run(handle.run_id, "FINISHED")
    plan = plan_prune(registry, [handle.run_id])
    assert plan.folders == (handle.dir / "checkpoints",) and plan.size_bytes > 0
    assert prune_checkpoints(registry, plan) == []
    assert registry.artifacts(handle.run_id, "checkpoint") == [] and not (handle.dir / "checkpoints").exists()
    assert Path(registry.latest_artifact(handle.run_id, "adapter")["path"]).is_dir()


def test_resume_from_checkpoint_continues_at_its_step(registry, tmp_path):
    settings = cfg(loss="simpo", max_steps=4, lr=1e-3, batch_size=4, save_steps=2, seed=3)
    full = train_actor(tiny(), small_pairs(tiny(), 8), settings, output_dir=tmp_path / "full")
    ckpt2 = Path(full["checkpoints"][0])
    assert ckpt2.name == "checkpoint-2" and ckpt2.is_dir()

    handle = make_handle(registry)
    actor = tiny()
    res = train_actor(actor, small_pairs(actor, 8), settings, handle=handle, resume_from_checkpoint=ckpt2)
    assert res["steps"] == 4 and res["resumed_from"] == str(ckpt2)
    assert [r["step"] for r in registry.metric_history(handle.run_id, "loss")] == [3, 4]
    # Same data order, optimizer and scheduler state: the same adapter as one uninterrupted run.
    a, b = _adapter_tensors(Path(full["adapter"])), _adapter_tensors(Path(res["adapter"]))
    assert set(a) == set(b)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)
    with pytest.raises(FileNotFoundError):
        train_actor(tiny(), [], cfg(), output_dir=tmp_path / "x", resume_from_checkpoint=tmp_path / "nope")


def test_cancellation_saves_a_checkpoint_and_stops(registry):
    handle = make_handle(registry)

    def on_log(step, total, metrics):
        if step == 2:
            handle.cancelled.set()  # what SIGTERM does in lactchain.jobs

    res = train_actor(tiny(), small_pairs(tiny(), 8), cfg(loss="simpo", max_steps=20, lr=1e-3, batch_size=4,
                                                          save_steps=100), handle=handle, on_log=on_log)
    assert res["cancelled"] and res["steps"] == 3
    ckpt = registry.latest_artifact(handle.run_id, "checkpoint")
    assert ckpt["step"] == 3 and ckpt["meta"]["cancelled"] and Path(ckpt["path"]).is_dir()
    assert registry.latest_artifact(handle.run_id, "adapter")["meta"]["complete"] is False


def test_told_to_keep_no_checkpoints_a_cancelled_run_saves_none_but_its_adapter(registry):
    """The loop's phases (save_steps NO_CHECKPOINTS): a stopped pipeline redoes the phase, so
    SIGTERM writes no trainer checkpoint (73 MB on SmolLM2, never read), only the adapter."""
    from lactchain.train.actor_config import NO_CHECKPOINTS

    handle = make_handle(registry)

    def on_log(step, total, metrics):
        if step == 2:
            handle.cancelled.set()

    res = train_actor(tiny(), small_pairs(tiny(), 8), cfg(loss="simpo", max_steps=20, lr=1e-3, batch_size=4,
                                                          save_steps=NO_CHECKPOINTS), handle=handle, on_log=on_log)
    assert res["cancelled"] and res["steps"] == 3 and res["checkpoints"] == []
    assert registry.artifacts(handle.run_id, "checkpoint") == []
    assert not list((registry.run_dir(handle.run_id) / "checkpoints").glob("checkpoint-*"))
    assert registry.latest_artifact(handle.run_id, "adapter")["meta"]["complete"] is False


# ---- the learning test --------------------------------------------------------------

def test_simpo_makes_the_tiny_actor_follow_the_optimal_moves(tmp_path):
    """Six start states share the optimal-plan prefix PREFIX; rejected lists are its
    near misses that are worse by Q* (bump a wall, turn away, waste moves). The random
    tiny model never writes PREFIX; after 45 SimPO steps greedy constrained decoding
    does, and its first action there comes closer to optimal by the exact planner."""
    from lactchain.loop.evaluate import evaluate_actor
    from lactchain.models.actor import Actor

    actor = tiny()
    env = GridWorldEnv(moves=actor.moves)
    planner = Planner(env)
    states = [s for s in all_states(env.size) if not planner.is_goal(s) and planner.plan(s)[:4] == PREFIX]
    assert len(states) == 6
    pairs, chosen = optimal_prefix_pairs(actor, states, k=4)
    assert len(pairs) >= 30 and all(c == PREFIX for c in chosen.values())
    spec = PromptSpec(moves=actor.moves)
    prompts = [spec.render(env.describe(s)) for s in states]

    def follows(a) -> float:
        out = a.generate(prompts, constrained=True, temperature=0.0)
        return sum(o.moves == chosen[s] for o, s in zip(out, states)) / len(states)

    vstar = planner.values(0.9)

    def optimality_gap(a) -> float:
        """Mean V*(s) - (r + 0.9 V*(s')) of the greedy first action on the trained states."""
        from lactchain.loop.labelers import execute_from

        out = a.generate(prompts, constrained=True, temperature=0.0)
        gaps = []
        for o, s in zip(out, states):
            r, nxt, done = execute_from(env, s, o.moves)
            gaps.append(vstar[s] - (r + (0.0 if done else 0.9 * vstar[nxt])))
        return sum(gaps) / len(gaps)

    before_follow = follows(actor)
    gap_before = optimality_gap(actor)
    before = evaluate_actor(actor, states="all", max_actions=10, seed=0)
    res = train_actor(actor, pairs, cfg(loss="simpo", max_steps=45, lr=5e-3, batch_size=8, seed=0, save_steps=1000),
                      output_dir=tmp_path)
    assert res["final_metrics"]["accuracy"] == 1.0
    trained = Actor.load("tiny", adapter=res["adapter"])
    after_follow = follows(trained)
    after = evaluate_actor(trained, states="all", max_actions=10, seed=0)
    print(f"follow {before_follow:.2f} -> {after_follow:.2f}; success {before['success_rate']:.3f} -> "
          f"{after['success_rate']:.3f}; return {before['mean_return']:.1f} -> {after['mean_return']:.1f}; "
          f"{res['s_per_step']:.3f} s/step")
    assert before_follow == 0.0 and after_follow >= 5 / 6
    # On the trained states the greedy action is now closer to optimal by the exact planner.
    # (How a RANDOM tiny model generalises to the other 54 states is printed, not asserted.)
    gap_after = optimality_gap(trained)
    assert gap_after < gap_before
    assert follows(actor) == after_follow  # the in-memory actor carries the adapter too


# ---- CLI -------------------------------------------------------------------------------

def _cli_app():
    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import JOBS

    train_actor_cmd = make_command(JOBS["train-actor"])

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test app"""

    app.command("train-actor")(train_actor_cmd)
    return app


def test_cli_train_actor_json(tmp_path):
    db = tmp_path / "runs" / "registry.db"
    with Registry(db) as reg:
        src = reg.create_run("pairs")
        pairs = small_pairs(tiny(), 6)
        reg.add_pairs(src, pairs + [{**pairs[0], "rejected": pairs[0]["chosen"]}])
    result = CliRunner().invoke(_cli_app(), [
        "train-actor", "--actor", "tiny", "--pairs-from", src, "--labeler", "critic", "--max-steps", "2",
        "--lr", "1e-3", "--batch-size", "3", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["steps"] == 2 and out["loss_type"] == "simpo" and out["beta"] == 2.5
    assert out["pair_stats"]["pairs"] == 6 and out["pair_stats"]["dropped_identical"] == 1
    assert {"loss", "margin", "accuracy", "logp_chosen", "logp_rejected"} <= set(out["final_metrics"])
    assert isinstance(out["warnings"], list)
    assert Path(out["adapter"], "adapter_config.json").is_file()
    with Registry(db) as reg:
        run = reg.get_run(out["run_id"])
        assert run["kind"] == "actor" and run["status"] == "FINISHED"
        assert reg.latest_artifact(run["id"], "adapter")["path"] == out["adapter"]
        assert reg.latest_metrics(run["id"])["pairs_used"] == 6


def test_cli_refuses_without_usable_pairs_or_with_the_first_attempts_simpo(tmp_path):
    db = tmp_path / "runs" / "registry.db"
    with Registry(db) as reg:
        src = reg.create_run("pairs")
        reg.add_pairs(src, [{"prompt": "p", "chosen": ["turn left"], "rejected": ["turn left"], "labeler": "critic"}])
    app = _cli_app()
    result = CliRunner().invoke(app, ["train-actor", "--actor", "tiny", "--pairs-from", src, "--db", str(db)])
    assert result.exit_code == 2 and "chosen == rejected" in result.stderr
    result = CliRunner().invoke(app, ["train-actor", "--beta", "0.1", "--simpo-gamma", "0.5", "--db", str(db)])
    assert result.exit_code == 2 and "beta" in result.stderr
    with Registry(db) as reg:
        assert reg.list_runs(kind="actor") == []  # nothing was started


SIGTERM_SCRIPT = """
import sys, typer
from lactchain.cli.generate import make_command
from lactchain.jobs.table import JOBS
train_actor_cmd = make_command(JOBS["train-actor"])
app = typer.Typer()
@app.callback()
def _root() -> None:
    pass
app.command("train-actor")(train_actor_cmd)
app()
"""


def test_sigterm_checkpoints_marks_killed_and_the_run_resumes(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "runs" / "registry.db"
    with Registry(db) as reg:
        src = reg.create_run("pairs")
        reg.add_pairs(src, small_pairs(tiny(), 8))
    script = tmp_path / "cli.py"
    script.write_text(SIGTERM_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(script), "train-actor", "--actor", "tiny", "--pairs-from", src,
                             "--max-steps", "500", "--batch-size", "2", "--lr", "1e-3", "--save-steps", "1000",
                             "--db", str(db), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.time() + 120
        run_id = None
        with Registry(db) as reg:
            while time.time() < deadline and proc.poll() is None:
                runs = reg.list_runs(kind="actor")
                if runs and len(reg.metric_history(runs[0]["id"], "loss")) >= 2:
                    run_id = runs[0]["id"]
                    break
                time.sleep(0.2)
        assert run_id is not None, proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "no metrics"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()[-2000:]
    with Registry(db) as reg:
        run = reg.get_run(run_id)
        assert run["status"] == "KILLED"
        ckpt = reg.latest_artifact(run_id, "checkpoint")
        assert ckpt is not None and ckpt["meta"]["cancelled"] and Path(ckpt["path"]).is_dir()
        stopped_at = ckpt["step"]
        assert stopped_at >= 2 and reg.latest_artifact(run_id, "adapter")["meta"]["complete"] is False
    # `--resume-from RUN_ID` (what `lactchain runs resume` appends) continues from that checkpoint's step.
    result = CliRunner().invoke(_cli_app(), [
        "train-actor", "--actor", "tiny", "--pairs-from", src, "--max-steps", str(stopped_at + 2), "--batch-size", "2",
        "--lr", "1e-3", "--resume-from", run_id, "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["steps"] == stopped_at + 2 and out["resumed_from"] == ckpt["path"]
    with Registry(db) as reg:
        assert [r["step"] for r in reg.metric_history(out["run_id"], "loss")] == [stopped_at + 1, stopped_at + 2]


def test_a_damaged_newest_actor_checkpoint_is_passed_over_for_the_one_before(tmp_path, capsys):
    """Actor checkpoints are sealed too: `--resume-from RUN` with the newest one damaged
    goes on from the one before it, and says which."""
    from cli_helpers import run_cli

    from lactchain.runs.checkpoints import MANIFEST

    db = tmp_path / "runs" / "registry.db"
    with Registry(db) as reg:
        src = reg.create_run("pairs")
        reg.add_pairs(src, small_pairs(tiny(), 8))
    common = ["train-actor", "--actor", "tiny", "--pairs-from", src, "--batch-size", "2", "--lr", "1e-3",
              "--save-steps", "2", "--db", db, "--json"]
    code, out, err = run_cli([*common, "--max-steps", "4"], capsys)
    assert code == 0, err
    first = json.loads(out)["run_id"]
    with Registry(db) as reg:
        saved = sorted(reg.artifacts(first, "checkpoint"), key=lambda a: a["step"])
    assert [a["step"] for a in saved][-2:] == [2, 4] and all((Path(a["path"]) / MANIFEST).is_file() for a in saved)
    newest, before = Path(saved[-1]["path"]), saved[-2]["path"]
    weights = next(newest.glob("adapter_model.safetensors"))
    weights.write_bytes(weights.read_bytes()[:64])
    code, out, err = run_cli([*common, "--max-steps", "6", "--resume-from", first[:-2]], capsys)  # a prefix
    assert code == 0, err
    assert f"checkpoint {newest} is damaged (adapter_model.safetensors:" in err and f"one before it, {before}" in err
    with Registry(db) as reg:  # recorded as the full id: a later run sharing the prefix must not hide it
        assert reg.params(json.loads(out)["run_id"])["resume"] == first
