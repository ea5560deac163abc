"""GRPO through TRL's GRPOTrainer with the lab's constrained generation
(lactchain.train.grpo), and the loop's preference and GRPO losses on the tiny actor.

Real components: the tiny transformers actor, TRL's trainer, a real SQLite registry;
rewards from the env (the exact planner's Q* where a test needs a known-good signal,
the critic where the loop must work without a planner)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from lactchain.config import ConfigError
from lactchain.engine import GENERATION_TAG
from lactchain.envs.gridworld import GridWorldEnv
from lactchain.machine import resolve_dtype
from lactchain.loop.labelers import Group, OracleLabeler, execute_candidate
from lactchain.runs.lifecycle import RunHandle, run_context
from lactchain.models.actor import Actor
from lactchain.loop.config import PipelineConfig
from lactchain.loop.pipeline import run_pipeline
from lactchain.prompts import PromptSpec
from lactchain.runs.registry import Registry
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.best_lists import BestLists
from lactchain.train.grpo import GRPOTask, train_grpo
from loop_helpers import run_tiny_loop

pytestmark = pytest.mark.usefixtures("one_thread")


def _oracle_task(actor: Actor, n_states: int = 8, generations: int = 4) -> GRPOTask:
    env = GridWorldEnv(moves=actor.moves)
    prompt = PromptSpec.for_env(env, moves=actor.moves)
    oracle = OracleLabeler(env, 0.9)
    states = list(env.start_states())[:n_states]

    def reward(states_: list, samples: list) -> list[float]:
        groups = []
        for i in range(0, len(states_), generations):
            g = Group(states_[i], "")
            g.candidates = [execute_candidate(env, g, s.moves, s.text, s.mode) for s in samples[i : i + generations]]
            groups.append(g)
        oracle.score(groups)
        return [c.advantage for g in groups for c in g.candidates]

    rows = [{"prompt": prompt.render(env.describe(s)), "state": s} for s in states]
    return GRPOTask(rows, reward, generations=generations, temperature=1.0, seed=1)


def _handle(reg: Registry) -> RunHandle:
    run_id = reg.create_run("actor")
    reg.start_run(run_id)
    return RunHandle(reg, run_id, reg.run_dir(run_id))


def _train_four_states(tmp_path, actor: Actor, task: GRPOTask, steps: int, metric: str, **grpo) -> tuple[dict, list]:
    """`steps` GRPO steps on the task's 4 states (all of them each step, no filter) with
    `grpo` settings: the result and the run's per-step values of `metric`."""
    settings = TrainActorConfig(loss="grpo", lr=1e-3, max_steps=steps, seed=0, bf16=False,
                                grpo={"states_per_step": 4, "group_filter": 1, **grpo})
    with Registry(tmp_path / "runs" / "registry.db") as reg:
        handle = _handle(reg)
        res = train_grpo(actor, task, settings, handle=handle)
        return res, [m["value"] for m in reg.metric_history(handle.run_id, metric)]


def test_grpo_trains_a_lora_adapter_on_scored_constrained_samples_and_resumes_after_a_kill(tmp_path):
    """Each step samples K constrained lists per state with the policy being trained,
    scores them, and logs the reward; SIGTERM (the cancelled flag) checkpoints and
    stops, and the run continues from that checkpoint's step."""
    settings = TrainActorConfig(loss="grpo", lr=1e-3, max_steps=4, save_steps=100, seed=0,
                                grpo={"states_per_step": 4})
    with Registry(tmp_path / "runs" / "registry.db") as reg:
        handle = _handle(reg)

        def stop_at_2(step: int, total: int, metrics: dict) -> None:
            if step == 2:
                handle.cancelled.set()  # what SIGTERM does in lactchain.jobs

        actor = Actor.load("tiny")
        res = train_grpo(actor, _oracle_task(actor), settings, handle=handle, on_log=stop_at_2)
        assert res["cancelled"] and res["steps"] == 3 and res["samples_scored"] == 3 * 32  # 4 states x 4 samples, over-sampled 2x
        assert res["env_moves"] > 0 and "reward" in res["final_metrics"]
        assert res["first_step_s"] > 0 and res["median_step_s"] > 0 and res["s_per_step"] > 0  # as every trainer
        ckpt = reg.latest_artifact(handle.run_id, "checkpoint")
        assert ckpt["step"] == 3 and ckpt["meta"]["cancelled"]
        assert reg.latest_artifact(handle.run_id, "adapter")["meta"]["complete"] is False
        assert [r["step"] for r in reg.metric_history(handle.run_id, "reward")] == [1, 2, 3]

        again = _handle(reg)
        actor = Actor.load("tiny")
        out = train_grpo(actor, _oracle_task(actor), settings, handle=again, resume_from_checkpoint=ckpt["path"])
        assert out["steps"] == 4 and out["resumed_from"] == ckpt["path"] and not out["cancelled"]
        assert [r["step"] for r in reg.metric_history(again.run_id, "reward")] == [4]
        assert actor.adapter is not None and (actor.adapter / "adapter_config.json").is_file()
        meta = json.loads((actor.adapter / "lactchain_adapter.json").read_text())
        assert meta["loss"] == "grpo" and meta["generations"] == 4


def test_grpo_refreshes_its_generation_copy_in_place_and_samples_what_a_rebuilt_copy_would(tmp_path, monkeypatch):
    """GRPO generates between optimizer steps (and its KL gauge scores with the adapter
    off in between): the merged bf16 copy is built once and refreshed in place at every
    later step (lactchain.models.merged_copy), and the run is the one a copy rebuilt at
    every step gives: the same rewards step by step, the same adapter."""
    import lactchain.models.actor as actor_module

    runs = {}
    for way in ("refresh", "rebuild"):
        if way == "rebuild":
            monkeypatch.setattr(actor_module, "refresh_merged", lambda copy, adapted: False)
        actor = Actor.load("tiny", inference_dtype="bf16")
        res, rewards = _train_four_states(tmp_path / way, actor, _oracle_task(actor, n_states=4), 2, "reward")
        weights = {n: p.detach().clone() for n, p in actor.model.named_parameters() if "lora_" in n}
        runs[way] = (rewards, weights, actor.copy_builds, actor.copy_refreshes)
    assert runs["refresh"][2:] == (1, 1) and runs["rebuild"][2:] == (2, 0)
    assert runs["refresh"][0] == runs["rebuild"][0]
    assert all(torch.equal(w, runs["rebuild"][1][n]) for n, w in runs["refresh"][1].items())


def test_a_step_split_into_passes_makes_the_same_update_as_one_pass(tmp_path):
    """tokens_per_pass: a step's 16 sequences run as 4 passes of 4 with gradients
    accumulated (less memory for long prompts) and the adapter ends where one pass of 16
    takes it; both sample the same groups (one generation per step either way). Untold,
    the budget scales with the model's width x depth (its activations per token)."""
    from safetensors.torch import load_file

    from types import SimpleNamespace

    from lactchain.train.grpo import TOKENS_PER_PASS, pass_budget, sequences_per_pass

    smollm2, mistral = SimpleNamespace(hidden_size=576, num_hidden_layers=30), SimpleNamespace(hidden_size=4096,
                                                                                                num_hidden_layers=32)
    assert pass_budget(None, smollm2, use_cuda=False) == TOKENS_PER_PASS["cpu"]  # what it was measured on
    assert pass_budget(None, mistral, use_cuda=True) < TOKENS_PER_PASS["cuda"] // 7  # a 7B model: ~1/8 the tokens
    assert pass_budget(None, Actor.load("tiny").model.config, use_cuda=False) > 100 * TOKENS_PER_PASS["cpu"]
    assert pass_budget(512, mistral, use_cuda=True) == 512  # as told
    assert sequences_per_pass(16, 100, 400) == 4 and sequences_per_pass(16, 100, 10_000) == 16
    assert sequences_per_pass(12, 100, 500) == 4 and sequences_per_pass(16, 5000, 400) == 1  # divides 12; at least 1
    weights, passes = [], []
    for budget in (1_000_000, None):
        actor = Actor.load("tiny")
        task = _oracle_task(actor, n_states=4)
        one_seq = max(len(actor.prompt_ids(r["prompt"])) for r in task.rows) + 48  # the longest, completed
        settings = TrainActorConfig(loss="grpo", lr=1e-3, max_steps=1, seed=0, bf16=False,
                                    grpo={"states_per_step": 4, "group_filter": 1,
                                          "tokens_per_pass": budget or 4 * one_seq + 1})
        res = train_grpo(actor, task, settings, output_dir=tmp_path / f"run{len(passes)}")
        passes.append((res["sequences_per_pass"], res["passes_per_step"], res["steps"]))
        weights.append(load_file(str(actor.adapter / "adapter_model.safetensors")))
    assert passes == [(16, 1, 1), (4, 4, 1)]
    one, split = weights
    assert one.keys() == split.keys()
    moved = max(float((one[k] - split[k]).abs().max()) for k in one)
    assert moved < 1e-5, moved
    assert any(float(t.abs().max()) > 1e-4 for k, t in one.items() if "lora_B" in k)  # the step did move the adapter


def test_train_actor_grpo_needs_rollouts_and_grpo_refuses_what_it_does_not_read():
    from lactchain.train.actor_config import TrainActorJobConfig

    with pytest.raises(ConfigError, match="grpo samples from stored states: give --rollouts-from"):
        TrainActorJobConfig(loss="grpo")
    assert "pipeline --loss grpo" in next(f for f in dataclasses.fields(TrainActorJobConfig)
                                          if f.name == "loss").metadata["help"]
    with pytest.raises(ConfigError, match="kl-beta.*only applies to --loss grpo"):
        TrainActorConfig(loss="simpo", grpo={"kl_beta": 0.1})
    with pytest.raises(ConfigError, match="--beta"):
        TrainActorConfig(loss="grpo", preference={"beta": 0.1})


@pytest.mark.slow
@pytest.mark.learning  # ~60 s: the `learning` tier (-m learning); SimPO's training is in CI via test_train_actor
@pytest.mark.parametrize("loss", ["simpo"])  # grpo, dpo, kto at --explore 0: tests/test_own_samples.py
def test_the_loop_with_simpo_raises_the_tiny_actors_success_with_the_critic(tmp_path, loss):
    """No planner in the loop: the TD critic labels (SimPO: each state's elite against
    worse lists). The tiny actor starts at
    about 7 % of the 60 start states; the best trained iteration must do clearly better,
    and the last one must still beat the baseline."""
    extra = {"rejects_per_state": 2, "actor_epochs": 4} if loss == "simpo" else {"actor_epochs": 2}
    cfg = PipelineConfig(actor="tiny", critic="tiny", labeler="critic", loss=loss, iterations=3,
                         td_lists_per_state=64, explore=64, td_rounds=4, train_bf16=False, **extra)
    out, params, success, reg = run_tiny_loop(tmp_path, cfg, f"tiny {loss}")
    reg.close()
    curve = out["curve"]
    base, trained = success[0], success[1:]
    assert len(trained) == 3
    assert max(trained) >= base + 0.25 and trained[-1] > base, curve
    assert curve[-1]["env_moves"] > curve[1]["env_moves"] > 0  # the training data's env steps add up
    assert params["loss"] == loss and params["cpo_alpha"] == (1.0 if loss == "simpo" else None)
    trains = [p for p in out["phases"] if p["phase"] == "train-actor"]
    assert all(p["loss_type"] == loss for p in trains)


def test_the_loops_kl_beta_reaches_grpo_and_is_recorded(tmp_path):
    """`pipeline --loss grpo --kl-beta 0.04` (the labelled GRPO variant of the method
    comparison): the trainer gets TRL's beta, and the loop and its phase record it."""
    cfg = PipelineConfig(actor="tiny", critic="tiny", labeler="critic", loss="grpo", grpo_reward="labeler",
                         grpo={"kl_beta": 0.04}, iterations=1,
                         states=4, eval_states=4, td_lists_per_state=8, explore=4, td_rounds=1, actor_epochs=1,
                         baseline=False)
    with Registry(tmp_path / "registry.db") as reg:
        with run_context(reg, "pipeline", name="tiny grpo kl", params=cfg.params(), quiet=True) as handle:
            out = run_pipeline(handle, cfg)
        assert reg.params(handle.run_id)["kl_beta"] == 0.04
        trains = [p for p in out["phases"] if p["phase"] == "train-actor"]
        assert trains and all(p["kl_beta"] == 0.04 and p["loss_type"] == "grpo" for p in trains)


@pytest.mark.slow
def test_train_actor_grpo_samples_from_a_play_runs_states_and_resumes_after_sigterm(tmp_path, lc):
    """`train-actor --loss grpo --rollouts-from PLAY`: the states a play run visited are
    GRPO's start states, each sampled list rewarded by what the env pays for it; a real
    detached run killed with SIGTERM checkpoints and `runs resume` finishes it."""
    import time

    db = tmp_path / "registry.db"
    code, out, err = lc("play", "--actor", "tiny", "--episodes", "3", "--max-actions", "3", "--db", db, "--json")
    assert code == 0, err
    play = json.loads(out)["run_id"]

    # 12 steps: the job checkpoints step 1 ~8 s after launch (its imports), is killed within
    # a step or two of it, and the resume does the rest at ~0.4 s a step (alone, 2 cores)
    code, out, err = lc("train-actor", "--actor", "tiny", "--loss", "grpo", "--rollouts-from", play, "--max-steps",
                        "12", "--save-steps", "1", "--db", db, "--detach", "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    reg = Registry(db)
    end = time.time() + 300
    while reg.latest_artifact(run_id, "checkpoint") is None and time.time() < end:
        time.sleep(0.2)
    assert lc("runs", "kill", run_id, "--wait", "60", "--db", db)[0] == 0
    assert reg.get_run(run_id)["status"] == "KILLED"
    stopped_at = reg.latest_artifact(run_id, "checkpoint")["step"]
    code, out, err = lc("runs", "resume", run_id, "--db", db, "--json")
    assert code == 0, err
    again = json.loads(out)["run_id"]
    while reg.get_run(again)["status"] in ("SCHEDULED", "RUNNING") and time.time() < end + 300:
        time.sleep(0.5)
    assert reg.get_run(again)["status"] == "FINISHED", reg.get_run(again).get("error")
    steps = [r["step"] for r in reg.metric_history(again, "reward")]
    assert steps and min(steps) > stopped_at and max(steps) == 12  # continued from the checkpoint, not step 1
    assert reg.latest_artifact(again, "adapter") is not None
    assert reg.params(run_id)["rollouts_from"] == reg.params(again)["rollouts_from"] == [play]
    assert reg.params(again)["loss"] == "grpo"
    # it sampled at the dtype the loop's GRPO samples at (auto), recorded resolved and kept on resume
    assert reg.params(run_id)["dtype"] == reg.params(again)["dtype"] == resolve_dtype("auto")
    assert json.loads(reg.tags(run_id)[GENERATION_TAG])["dtype"] == resolve_dtype("auto")


@pytest.mark.parametrize("argv, message", [
    (["--loss", "grpo"], "grpo samples from stored states: give --rollouts-from PLAY_RUN"),
    (["--loss", "simpo", "--rollouts-from", "x"], "only feeds --loss grpo"),
    (["--loss", "grpo", "--rollouts-from", "nope"], "no run with id 'nope'"),
    (["--loss", "grpo", "--rollouts-from", "x", "--dtype", "fp8"], "--dtype 'fp8': unknown dtype; use one of auto, bfloat16"),
    (["--loss", "simpo", "--dtype", "bfloat16"], "--dtype 'bfloat16': only applies to --loss grpo"),
])
def test_bad_grpo_train_actor_settings_are_one_line(argv, message, tmp_path, lc):
    db = tmp_path / "registry.db"
    code, _, err = lc("train-actor", "--actor", "tiny", *argv, "--db", db)
    assert code != 0 and message in err and len(err.strip().splitlines()) == 1, err


def test_each_generated_batch_trains_updates_per_generation_steps(tmp_path):
    """`--updates-per-generation 2` (TRL's num_iterations): 2 optimizer steps sample one
    batch and both train on it (the reused step moves the weights again), and the run
    records how many batches it generated."""
    from safetensors.torch import load_file

    weights, batches = [], []
    for steps in (2, 1):
        actor = Actor.load("tiny")
        settings = TrainActorConfig(loss="grpo", lr=1e-3, max_steps=steps, seed=0, bf16=False,
                                    grpo={"states_per_step": 4, "group_filter": 1, "updates_per_generation": 2})
        res = train_grpo(actor, _oracle_task(actor, n_states=4), settings, output_dir=tmp_path / f"run{steps}")
        batches.append((res["steps"], res["generations_sampled"], res["updates_per_generation"]))
        weights.append(load_file(str(actor.adapter / "adapter_model.safetensors")))
    assert batches == [(2, 1, 2), (1, 1, 2)]
    two, one = weights
    assert max(float((two[k] - one[k]).abs().max()) for k in two) > 1e-5  # the reused steps trained too


def test_adaptive_entropy_control_raises_the_bonus_while_the_entropy_is_under_its_target(tmp_path):
    """`--entropy-target` (TRL's adaptive entropy control, Skywork-OR1): while the policy's
    entropy is at or below the target the bonus's weight rises by TRL's step (0.005) each
    optimizer step, and every step's weight is in the registry; a fixed `--entropy-coef`
    stays where it was set and moves the adapter elsewhere than no bonus does."""
    from safetensors.torch import load_file

    weights, coefs = [], []
    for grpo in ({"entropy_coef": 0.1, "entropy_target": 20.0}, {"entropy_coef": 0.5}, {}):
        with Registry(tmp_path / f"runs{len(coefs)}" / "registry.db") as reg:
            handle = _handle(reg)
            actor = Actor.load("tiny")
            settings = TrainActorConfig(loss="grpo", lr=1e-3, max_steps=2, seed=0, bf16=False,
                                        grpo={"states_per_step": 4, "group_filter": 1, **grpo})
            train_grpo(actor, _oracle_task(actor, n_states=4), settings, handle=handle)
            coefs.append([round(r["value"], 4) for r in reg.metric_history(handle.run_id, "entropy_coef")])
            weights.append(load_file(str(actor.adapter / "adapter_model.safetensors")))
    adaptive, fixed, none = coefs
    assert adaptive == [0.105, 0.11]  # 20 nats: always under the target
    assert fixed == [0.5, 0.5] and none == []  # no bonus: TRL adds no term and logs no weight
    bonus, plain = weights[1], weights[2]
    assert max(float((bonus[k] - plain[k]).abs().max()) for k in bonus) > 1e-5


def test_a_greedy_member_puts_the_policys_greedy_answer_first_in_every_group(tmp_path):
    """`--greedy-member`: each start state's group holds the policy's greedy answer (first)
    and K-1 samples, so a greedy answer the samples beat gets a negative advantage; the
    step logs how far the greedy answer's reward sits above its group's samples, and the
    run records the setting. Grouping by state refuses it (one line, before any run)."""
    actor = Actor.load("tiny")
    task = _oracle_task(actor, n_states=4)
    seen: list[tuple[list, list, list]] = []
    score = task.reward

    def recording(states: list, samples: list) -> list[float]:  # and the policy's greedy answers right then
        prompts = [r["prompt"] for s in states[::task.generations] for r in task.rows if r["state"] == s]
        seen.append((states, samples, [s.moves for s in actor.generate(prompts, temperature=0.0, max_new_tokens=48)]))
        return score(states, samples)

    task = dataclasses.replace(task, reward=recording, greedy_member=True)
    res, gaps = _train_four_states(tmp_path, actor, task, 1, "greedy_reward_gap", greedy_member=True)
    states, samples, greedy = seen[0]
    k = task.generations
    assert [samples[i * k].moves for i in range(4)] == greedy
    assert any(s.moves != samples[i * k].moves for i in range(4) for s in samples[i * k + 1:(i + 1) * k])
    assert res["greedy_member"] is True and len(gaps) == 1
    rewards = score(states, samples)
    expected = sum(rewards[i * k] - sum(rewards[i * k + 1:(i + 1) * k]) / (k - 1) for i in range(4)) / 4
    assert gaps[0] == pytest.approx(expected)
    with pytest.raises(ConfigError, match="^greedy-member .*--grouping start$"):
        PipelineConfig(actor="tiny", critic="tiny", loss="grpo", grouping="state", grpo={"greedy_member": True})


def test_replay_best_puts_each_states_best_list_so_far_first_in_its_group(tmp_path):
    """`--replay-best`: after a step, each state whose best sample beat its group is
    remembered with that list, and the next step's group of that state holds it first
    (K-1 fresh samples after it); the step logs the share of groups with a replayed list,
    and the run records the setting."""
    actor = Actor.load("tiny")
    task = _oracle_task(actor, n_states=4)
    seen: list[tuple[list, list, list]] = []
    score = task.reward

    def recording(states: list, samples: list) -> list[float]:
        rewards = score(states, samples)
        seen.append((states, samples, rewards))
        return rewards

    memory = BestLists()
    task = dataclasses.replace(task, reward=recording, replay=memory)
    res, shares = _train_four_states(tmp_path, actor, task, 2, "replay_share", replay_best=True)
    k = task.generations
    states, samples, rewards = seen[0]
    best: dict = {}  # what step 1 should have taught the memory, by state
    for i in range(4):
        r = rewards[i * k:(i + 1) * k]
        top = max(range(k), key=lambda j: r[j])
        if r[top] > sum(r) / k:
            best[json.dumps(states[i * k].as_dict(), sort_keys=True)] = samples[i * k + top].moves
    assert best, "no group of the first step had a best list above its mean"
    states2, samples2, _ = seen[1]
    replayed = 0
    for i in range(4):
        key = json.dumps(states2[i * k].as_dict(), sort_keys=True)
        if key in best:
            assert samples2[i * k].moves == best[key]
            replayed += 1
    assert replayed == len(best)  # every step holds all 4 states
    assert shares == [0.0, replayed / 4] and res["replay_best"] is True and len(memory) >= len(best)


def test_best_lists_keep_a_list_that_beat_its_group_until_a_higher_reward_replaces_it():
    """The memory's rules: a group's best list is kept only if it beat the group's mean;
    it is replaced only by a strictly higher reward; a replayed list takes its new score."""
    memory = BestLists()
    memory.update("s", ["a", "b", "c"], [1.0, 1.0, 1.0], replayed=False)  # no list beat its group
    assert memory.get("s") is None
    memory.update("s", ["a", "b", "c"], [0.0, 0.5, 0.0], replayed=False)
    assert (memory.get("s"), memory.reward("s")) == ("b", 0.5)
    members, replayed = memory.members(["s", "t"], ["x1", "x2", "x3", "y1", "y2", "y3"], 3)
    assert members == ["b", "x1", "x2", "y1", "y2", "y3"] and replayed == [True, False]
    memory.update("s", ["b", "x1", "x2"], [0.5, 0.5, 0.0], replayed=True)  # a tie keeps the incumbent
    assert memory.get("s") == "b"
    memory.update("s", ["b", "x1", "x2"], [0.25, 0.0, 0.0], replayed=True)  # re-scored lower: the new score holds
    assert memory.reward("s") == 0.25
    memory.update("s", ["b", "x1", "x2"], [0.25, 0.0, 1.0], replayed=True)
    assert (memory.get("s"), memory.reward("s"), len(memory)) == ("x2", 1.0, 1)


def test_the_loops_replay_memory_spans_its_iterations(tmp_path):
    """In the loop (`pipeline --loss grpo --grpo-reward success --replay-best`) the memory
    of each state's best win is one for the run: the second iteration's GRPO starts with
    what the first remembered, and replays it from its first step."""
    cfg = PipelineConfig(actor="tiny", critic="tiny", loss="grpo", grpo_reward="success", grpo={"replay_best": True},
                         iterations=2, states=8, eval_states=4, explore=0, actor_epochs=2, baseline=False, seed=0)
    with Registry(tmp_path / "registry.db") as reg:
        with run_context(reg, "pipeline", name="tiny grpo replay", params=cfg.params(), quiet=True) as handle:
            out = run_pipeline(handle, cfg)
        first, second = sorted(reg.list_runs(kind="actor", parent_id=handle.run_id), key=lambda r: r["created_ms"])
        remembered = [m["value"] for m in reg.metric_history(first["id"], "replay_states")]
        carried = reg.metric_history(second["id"], "replay_states")[0]["value"]
        replayed = reg.metric_history(second["id"], "replay_share")[0]["value"]
    assert remembered[-1] > 0 and carried >= remembered[-1] and replayed > 0
    trains = [p for p in out["phases"] if p["phase"] == "train-actor"]
    assert len(trains) == 2 and all(p["replay_best"] is True for p in trains)


@pytest.mark.parametrize("settings, message", [
    (dict(grouping="state", grpo={"replay_best": True}), "^replay-best .*--grouping start$"),
    (dict(grpo_reward="labeler", grpo={"replay_best": True}), "^replay-best .*--grpo-reward success"),
    (dict(grpo_reward="success", grpo={"replay_best": True, "greedy_member": True}), "^replay-best .*choose one$"),
])
def test_replay_best_refuses_what_it_cannot_replay_in_one_line(settings, message):
    with pytest.raises(ConfigError, match=message):
        PipelineConfig(actor="tiny", critic="tiny", loss="grpo", **settings)
