"""The critic (lactchain.models.critic) and its Monte-Carlo training (lactchain.train.critic).

Episodes come from random walks in the real GridWorldEnv, stored as steps rows in
a real registry file exactly as a play run stores them, so the trainer reads them
through the same `Registry.steps` path.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the hub

import pytest
import torch
import typer
from typer.testing import CliRunner

from lactchain import jobs
from lactchain.envs import GridWorldEnv, Planner, State, all_states
from lactchain.moves import DEFAULT_MOVES
from lactchain.runs.registry import Registry

GAMMA = 0.9


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on a shared 2-core box: one intra-op thread is many times faster
    than two threads spinning against other processes."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def random_walk_run(registry: Registry, episodes_per_start: int = 1, max_actions: int = 5, max_moves: int = 4,
                    seed: int = 0) -> str:
    """A play-like run: random move lists from every non-goal start state, stored as steps rows."""
    rng = random.Random(seed)
    run_id = registry.create_run("play", params={"actor": "random-walk", "seed": seed})
    env = GridWorldEnv(max_actions=max_actions)
    starts = [s for s in all_states(env.size) if (s.x, s.y) != env.goal] * episodes_per_start
    for idx, start in enumerate(starts):
        env.reset(options={"state": start.as_dict()})
        episode_id = registry.add_episode(run_id, idx=idx, seed=seed, start_state=start.as_dict())
        rows, done, total = [], False, 0.0
        while not done:
            moves = [rng.choice(DEFAULT_MOVES) for _ in range(rng.randint(1, max_moves))]
            before = env.state
            _, reward, terminated, truncated, info = env.step(moves)
            done = terminated or truncated
            total += reward
            rows.append({"episode_id": episode_id, "t": len(rows), "state": before.as_dict(), "moves": moves,
                         "parse_mode": "strict", "reward": reward, "next_state": env.state.as_dict(),
                         "done": done, "terminated": terminated, "caption": info["caption"]})
        rows.reverse()  # stored out of order on purpose: returns must follow t, not row order
        registry.add_steps(run_id, rows)
        registry.update_episode(episode_id, return_=total, length=len(rows), success=bool(info["reached_goal"]))
    return run_id


@pytest.fixture
def registry(tmp_path: Path):
    with Registry(tmp_path / "registry.db") as reg:
        yield reg


# ---- returns and splits (no model) ---------------------------------------------------

def test_discounted_returns_per_episode_ordered_by_t():
    from lactchain.train.critic import discounted_returns, samples_from_steps

    assert discounted_returns([-1.0, -1.0, 99.0], 0.5) == pytest.approx([-1 - 0.5 + 0.25 * 99, -1 + 0.5 * 99, 99.0])
    s = {"x": 0, "y": 0, "orientation": "east"}
    rows = [
        {"episode_id": 1, "t": 1, "state": s, "moves": ["turn left"], "reward": 10.0},
        {"episode_id": 2, "t": 0, "state": s, "moves": [], "reward": -3.0},
        {"episode_id": 1, "t": 0, "state": s, "moves": ["move forward"], "reward": -1.0},
    ]
    samples = sorted(samples_from_steps("run", rows, 0.9), key=lambda x: (x.episode[1], x.t))
    assert [(x.episode, x.t, x.ret) for x in samples] == [
        (("run", 1), 0, pytest.approx(-1 + 0.9 * 10)),
        (("run", 1), 1, 10.0),
        (("run", 2), 0, -3.0),
    ]
    assert samples[0].moves == ["move forward"]


def test_episodes_cut_off_by_a_kill_are_not_learnt_from(registry):
    """A killed play run leaves its running episodes unfinished: their partial rewards are
    not a return, so train-critic leaves them out (and says so before a run starts)."""
    from lactchain.loop.returns import usable_steps

    s = {"x": 0, "y": 0, "orientation": "east"}
    run = registry.create_run("play")
    for idx, done in enumerate((True, False)):
        ep = registry.add_episode(run, idx=idx, start_state=s)
        registry.add_steps(run, [{"episode_id": ep, "t": t, "state": s, "moves": ["move forward"], "reward": -1.0,
                                  "next_state": s, "done": done and t == 2} for t in range(3)])
    registry.end_run(run, "KILLED")
    assert usable_steps(registry, [run]) == (3, 6)
    from lactchain.train.critic import load_samples

    assert {x.episode[1] for x in load_samples(registry, [run], 0.9)} == {registry.episodes(run)[0]["id"]}


def test_split_is_by_episode(registry):
    from lactchain.train.critic import load_samples, split_by_episode

    run = random_walk_run(registry, max_actions=3)
    samples = load_samples(registry, [run], GAMMA)
    train, val = split_by_episode(samples, 0.25, seed=3)
    assert train and val and len(train) + len(val) == len(samples)
    assert not {s.episode for s in train} & {s.episode for s in val}
    assert split_by_episode(samples, 0.25, seed=3) == (train, val)  # seeded


# ---- the critic model -------------------------------------------------------------

def test_untrained_critic_tells_states_and_moves_apart():
    from lactchain.models.critic import Critic

    critic = Critic.load("tiny")
    assert critic.pooling == "mean" and not critic.causal
    states = all_states(4)
    values = critic.values(states)
    assert len(values) == 64 and len(set(values)) == 64
    assert critic.values([s.as_dict() for s in states[:5]]) == pytest.approx(values[:5], abs=1e-5)  # dicts work too
    q = critic.q_values([states[0]] * 3, [["move forward"], ["turn left"], ["move forward", "turn left"]])
    assert len(set(q)) == 3
    assert "Moves: ['move forward', 'turn left']." in critic.q_texts([states[0]], [["move forward", "turn left"]])[0]


def test_local_folder_backbone(tmp_path):
    from lactchain.models.critic import Critic, build_tiny_encoder

    folder = build_tiny_encoder(tmp_path / "tiny-encoder")
    from_folder = Critic.load(str(folder))
    in_memory = Critic.load("tiny-encoder")
    assert from_folder.source == str(folder) and in_memory.spec == "tiny"
    texts = from_folder.state_texts(all_states(4))
    with torch.no_grad():  # same base weights and tokenizer; fresh LoRA adds nothing yet
        assert torch.allclose(from_folder.embed(texts), in_memory.embed(texts), atol=1e-5)
    assert len(set(from_folder.values(all_states(4)))) == 64


def test_batched_values_do_not_depend_on_batch_company():
    from lactchain.models.critic import Critic

    critic = Critic.load("tiny-causal")
    states = all_states(4)
    together = critic.values(states)
    alone = [critic.values([s])[0] for s in states[:6]]
    assert alone == pytest.approx(together[:6], abs=1e-5)


def test_causal_backbone_pools_the_last_token_and_tells_states_apart():
    from lactchain.models.critic import Critic

    critic = Critic.load("tiny-causal")
    assert critic.causal and critic.pooling == "last"
    values = critic.values(all_states(4))
    assert len(set(values)) == 64

    # Why position 0 is forbidden: in a causal model it has seen nothing but itself,
    # so it is the same vector for every state (the first public attempt's bug).
    enc = critic.tokenizer(critic.state_texts(all_states(4)[:8]), padding=True, return_tensors="pt").to(critic.device)
    with torch.no_grad():
        hidden = critic.backbone(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
    assert torch.allclose(hidden[:, 0], hidden[0, 0].expand_as(hidden[:, 0]), atol=1e-5)


def test_position_zero_pooling_of_a_causal_model_is_refused():
    from lactchain.models.critic import Critic, PoolingError

    for pooling in ("first", "cls"):
        with pytest.raises(PoolingError, match="position-0"):
            Critic.load("tiny-causal", pooling=pooling)
    critic = Critic.load("tiny-causal")
    critic.pooling = "first"  # forced past the constructor: the pooling itself still refuses
    with pytest.raises(PoolingError):
        critic.values(all_states(4)[:2])
    assert Critic.load("tiny", pooling="cls").pooling == "first"  # fine for an encoder


# ---- training -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two epochs of V training on ~560 random-walk steps (2 episodes from each start)."""
    from lactchain.models.critic import Critic
    from lactchain.train.critic import TrainCriticConfig, spearman_vs_optimal, train_critic

    reg = Registry(tmp_path_factory.mktemp("trained") / "registry.db")
    play = random_walk_run(reg, episodes_per_start=2)
    torch.manual_seed(0)  # the trainer seeds the same way, so this is its starting point
    before = spearman_vs_optimal(Critic.load("tiny"), GAMMA)
    epochs_seen = []
    with jobs.run_context(reg, "critic", params={"episodes_from": [play]}) as handle:
        config = TrainCriticConfig(episodes_from=[play], critic="tiny", epochs=2, gamma=GAMMA, lr=3e-3,
                                   batch_size=32, seed=0, q_weight=0.0)
        result = train_critic(handle, config, on_epoch=lambda e, m: epochs_seen.append(e))
    yield {"registry": reg, "run_id": handle.run_id, "result": result, "before": before, "epochs_seen": epochs_seen}
    reg.close()


def test_training_raises_rank_correlation_with_vstar(trained):
    result, reg, rid = trained["result"], trained["registry"], trained["run_id"]
    print(f"spearman(V, V*): untrained {trained['before']:.3f} -> trained {result['metrics']['spearman_vstar']:.3f}")
    assert result["metrics"]["spearman_vstar"] > 0.6
    assert result["metrics"]["spearman_vstar"] > trained["before"] + 0.1
    assert trained["epochs_seen"] == [1, 2]
    assert result["train_steps"] > 300 and result["val_steps"] > 0 and result["episodes"] == 120
    assert reg.get_run(rid)["status"] == "FINISHED"
    for key in ("train_loss", "val_loss", "val_explained_variance", "spearman_vstar"):
        assert [h["step"] for h in reg.metric_history(rid, key)] == [1, 2], key
    assert result["value_std"] > 1.0  # returns in reward units: the goal is worth 100
    assert 0 < result["truncated_episodes"] < result["episodes"]  # MC uses their observed returns as they are


def test_checkpoint_artifact_per_epoch(trained):
    reg, rid = trained["registry"], trained["run_id"]
    arts = reg.artifacts(rid, "critic")
    assert [a["step"] for a in arts] == [1, 2]
    for art in arts:
        folder = Path(art["path"])
        assert folder.is_dir() and folder.is_relative_to(reg.run_dir(rid))
        assert {"critic.json", "heads.safetensors", "adapter", "optimizer.pt"} <= {p.name for p in folder.iterdir()}
        assert art["meta"]["complete"] is True and "spearman_vstar" in art["meta"]
    assert trained["result"]["checkpoint"] == arts[-1]["path"]


def test_save_load_round_trip_gives_identical_values(trained, tmp_path):
    from lactchain.models.critic import Critic, load_from_run

    reg = trained["registry"]
    path = trained["result"]["checkpoint"]
    a = Critic.load(checkpoint=path)
    b = load_from_run(reg, trained["run_id"][:12])
    states = all_states(4)
    moves = [["move forward"] * (i % 4 + 1) for i in range(len(states))]
    assert a.values(states) == b.values(states)
    assert a.q_values(states, moves) == b.q_values(states, moves)
    config = json.loads((Path(path) / "critic.json").read_text())
    assert config["spec"] == "tiny" and config["pooling"] == "mean"
    assert (a.value_mean, a.value_std) == (config["value_mean"], config["value_std"])
    # and saving the loaded critic again reproduces it
    c = Critic.load(checkpoint=a.save(tmp_path / "again"))
    assert c.values(states) == a.values(states)


def test_cancel_checkpoints_and_resume_continues(registry):
    from lactchain.train.critic import TrainCriticConfig, train_critic

    play = random_walk_run(registry, max_actions=3, seed=1)
    params = dict(episodes_from=[play], critic="tiny", epochs=3, gamma=GAMMA, lr=3e-3, batch_size=32, seed=0,
                  q_weight=1.0)
    epoch_now = [0]

    def on_batch(epoch: int, done: int, total: int) -> None:
        assert epoch == epoch_now[0] + 1  # the epoch the batch belongs to
        if epoch == 2 and done == 2:  # SIGTERM arrives mid epoch 2
            handle.cancelled.set()

    def on_epoch(epoch: int, m) -> None:
        epoch_now[0] = epoch

    with pytest.raises(jobs.Cancelled):
        with jobs.run_context(registry, "critic", params=params) as handle:
            train_critic(handle, TrainCriticConfig(**params), on_batch=on_batch, on_epoch=on_epoch)
    rid = handle.run_id
    assert registry.get_run(rid)["status"] == "KILLED"
    arts = registry.artifacts(rid, "critic")
    assert [(a["step"], a["meta"]["complete"]) for a in arts] == [(1, True), (1, False)]  # + the SIGTERM checkpoint
    assert arts[1]["meta"]["batches_done"] == 2

    # `lactchain runs resume` re-enters the same run with its stored params
    with jobs.run_context(registry, "critic", params=registry.params(rid), run_id=rid) as handle:
        result = train_critic(handle, TrainCriticConfig.from_params(registry.params(rid)), resume=True)
    assert result["start_epoch"] == 1 and registry.get_run(rid)["status"] == "FINISHED"
    assert [a["step"] for a in registry.artifacts(rid, "critic")] == [1, 1, 2, 3]
    assert [h["step"] for h in registry.metric_history(rid, "spearman_vstar")] == [1, 2, 3]
    # the resumed epoch trains only the batches the SIGTERM'd one had not (same batches: seed x epoch)
    trained = {h["step"]: h["value"] for h in registry.metric_history(rid, "epoch_batches")}
    assert trained[2] == trained[1] - 2 and trained[3] == trained[1]
    assert "val_q_loss" in result["metrics"] and "train_q_loss" in result["metrics"]

    # a new run can continue another's checkpoint
    with jobs.run_context(registry, "critic") as handle:
        more = train_critic(handle, TrainCriticConfig(**{**params, "epochs": 4}, resume_from=rid))
    assert more["start_epoch"] == 3 and [a["step"] for a in registry.artifacts(handle.run_id, "critic")] == [4]


def test_cli_train_critic_json(registry):
    from lactchain.cli.generate import make_command
    from lactchain.runs.lifecycle import PROGRESS_METRIC
    from lactchain.jobs.table import JOBS

    train_critic = make_command(JOBS["train-critic"])

    app = typer.Typer()
    app.callback()(lambda: None)
    app.command("train-critic")(train_critic)
    play = random_walk_run(registry, max_actions=2, seed=2)
    result = CliRunner().invoke(app, ["train-critic", "--episodes-from", play[:10], "-e", play, "--critic", "tiny",
                                      "--epochs", "2",
                                      "--batch-size", "32", "--lr", "3e-3", "--db", str(registry.path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # the progress the console's Jobs list draws (it stayed empty for a train-critic job): to 1 at the end
    progress = [h["value"] for h in registry.metric_history(out["run_id"], PROGRESS_METRIC)]
    assert progress == sorted(progress) and 0.5 in progress and progress[-1] == 1.0
    assert out["run_id"].startswith("critic-") and Path(out["checkpoint"]).is_dir()
    assert {"train_loss", "val_loss", "val_explained_variance", "spearman_vstar"} <= set(out["metrics"])
    assert registry.params(out["run_id"])["episodes_from"] == [play]  # prefixes resolved, each run once

    empty = registry.create_run("play")
    result = CliRunner().invoke(app, ["train-critic", "-e", empty, "--critic", "tiny", "--db", str(registry.path)])
    assert result.exit_code == 2 and "no stored steps" in result.output


@pytest.mark.e2e
def test_minilm_values_for_all_states_are_distinct():
    from lactchain.models.critic import Critic

    critic = Critic.load("minilm-l6", device="cpu")
    assert critic.pooling == "mean" and not critic.causal
    values = critic.values(all_states(4))
    assert len(values) == 64 and len(set(values)) == 64
    vstar = Planner(GridWorldEnv()).values(GAMMA)
    assert State(3, 3, "north") in vstar  # the grid the critic describes is the planner's


class _Exploit:
    """Unpickling this would create a file: the stand-in for a malicious checkpoint."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_checkpoint_loading_refuses_pickles_whatever_the_environment(tmp_path, monkeypatch):
    from lactchain.runs.files import read_tensors

    def load_tensors(path, device):
        return read_tensors(path, "critic checkpoint", device=device)

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "pwned"
    torch.save({"state": _Exploit(str(marker))}, tmp_path / "optimizer.pt")
    with pytest.raises(ValueError, match="optimizer.pt holds more than plain tensors"):
        load_tensors(tmp_path / "optimizer.pt", "cpu")
    assert not marker.exists()
    # a real optimizer state still loads
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.ones(2))])
    torch.save(opt.state_dict(), tmp_path / "ok.pt")
    assert load_tensors(tmp_path / "ok.pt", "cpu")["param_groups"][0]["lr"] == opt.param_groups[0]["lr"]
