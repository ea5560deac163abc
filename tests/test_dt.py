"""The language-conditioned decision transformer (issue 13): tokenizer, data, model,
training as a resumable registry job, closed-loop evaluation. Tiny sizes, real parts."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch

from tests.cli_helpers import run_cli

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--batch-size", "16", "--eval-every", "5",
        "--checkpoint-every", "10", "--select-every", "10", "--threads", "1"]


@pytest.fixture(scope="module")
def rows():
    from lactchain.archive.store import fill

    archive = fill("flat", 150, seed=0)
    return [{"key": k, **t.as_dict()} for k, t in archive.elites.items()]


@pytest.fixture(scope="module")
def data(rows):
    from lactchain.archive.dt.train import prepare

    return prepare(rows, val_fraction=0.15, seed=0)


def _model(data, text=None, **overrides):
    from lactchain.archive.dt.model import DecisionTransformer, DTConfig

    torch.manual_seed(0)
    cfg = DTConfig(scene=data.codec.scene.as_dict(), n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                   text_vocab=text.vocab_size if text else 0, text_len=text.length if text else 1,
                   text_encoder="learned" if text else "none", max_steps=64, **overrides)
    return DecisionTransformer(cfg)


def _batch(data, text, idx):
    from lactchain.archive.dt.data import Tensors

    tensors = Tensors([data.episodes[i] for i in idx], data.codec)
    return {**tensors.batch(range(len(idx))), **(text.encode([data.episodes[i].text for i in idx]) if text else {})}


# ---- tokenizer and data ------------------------------------------------------------------------

def test_tokenizer_is_learned_on_descriptions_and_round_trips(data, tmp_path):
    from lactchain.archive.dt.tokenizer import LearnedText

    texts = data.texts(data.train)
    text = LearnedText.learn(texts)
    stats = text.stats(texts)
    assert 10 < stats["vocab_size"] < 100  # the rule describer's small vocabulary (+ [PAD], [UNK])
    assert stats["longest_description_tokens"] == text.length == max(len(text.ids(t)) for t in texts)
    assert stats["cut_descriptions"] == 0
    text.save(tmp_path)
    again = LearnedText.load(tmp_path, text.length)
    assert torch.equal(again.encode(texts)["text_ids"], text.encode(texts)["text_ids"])
    ids = text.encode(["Passes the SOFA, then the bed."])["text_ids"][0]
    assert ids[0] != 0 and (ids == 0).any()  # words (any case) then [PAD]
    assert text.ids("the zebra")[1] == text.tokenizer.token_to_id("[UNK]")


def test_episodes_flatten_moves_end_in_stop_and_track_the_bd(rows, data):
    from lactchain.archive.dt.data import ACTIONS, STOP_ID, Tracker, moves_of, split
    from lactchain.archive.trajectories import behaviour_descriptor

    assert len(data.episodes) == len(rows) and data.undescribed == 0
    for ep in data.episodes:
        row = ep.row
        assert ep.steps == len(row["path"]) == len(moves_of(row)) + 1
        assert ep.actions[-1] == STOP_ID and STOP_ID not in ep.actions[:-1]
        assert [ACTIONS[a] for a in ep.actions[:-1]] == moves_of(row)
        tracker = Tracker(data.codec.scene)
        for pose in row["path"]:
            tracker.see(pose)
        assert tuple(tracker.visited) == behaviour_descriptor(data.codec.scene, row["path"]).visited
        # BD to go: none left at the end, where the final cell is 0 steps ahead and 0 to the left
        k, size = data.codec.max_visits, data.codec.size
        assert ep.bd[-1][0] == data.codec.cell(row["bd"]["final"]) and not any(ep.bd[-1][1:1 + k])
        assert ep.bd[-1][1 + k:] == [size, size, 0, 0]
        assert len(ep.bd[0]) == len(data.codec.bd_sizes) and len(ep.obs[0]) == len(data.codec.obs_sizes)
    train, val = split(100, 0.2, seed=3)
    assert not set(train) & set(val) and len(val) == 20 and split(100, 0.2, seed=3) == (train, val)
    # split by trajectory = by BD key (one elite per BD)
    assert not {data.episodes[i].key for i in data.train} & {data.episodes[i].key for i in data.val}


def test_model_selection_is_carved_from_training_and_leaves_the_held_out_split_alone(rows, data):
    from lactchain.archive.dt.train import prepare

    with_select = prepare(rows, val_fraction=0.15, seed=0, select_fraction=0.2)
    assert with_select.val == data.val  # the evaluation's held-out trajectories do not move
    assert sorted(with_select.train + with_select.select) == data.train
    assert not set(with_select.train) & set(with_select.select)
    assert len(with_select.select) == -(-len(data.train) * 2 // 10)  # ceil(20 %)
    assert prepare(rows, val_fraction=0.15, seed=0, select_fraction=0.2).select == with_select.select


def test_relabelled_windows_are_real_trajectories_and_skip_held_out_bds(data):
    import numpy as np

    from lactchain.archive.describe import describe_rule
    from lactchain.archive.dt.data import ACTIONS, Relabeler, egocentric, window
    from lactchain.archive.trajectories import play

    assert egocentric({"x": 0, "y": 0, "orientation": "east"}, (3, 1)) == (3, 1)  # 3 ahead, 1 to the left
    assert egocentric({"x": 0, "y": 0, "orientation": "north"}, (3, 1)) == (1, -3)  # 1 ahead, 3 to the right
    scene, rng = data.codec.scene, np.random.default_rng(0)
    relabel = Relabeler(data.codec, "rule", True, set(), set())
    seen = 0
    for i in data.train[:30]:
        ep = relabel.sample(data.episodes[i], rng)
        if ep is data.episodes[i]:
            continue
        seen += 1
        row = ep.row
        replay = play(row["actions"], row["start"], env_kwargs={"scene": scene.name, "moves": ACTIONS[:3],
                                                                        "max_moves_per_action": 64})
        assert replay.path == row["path"] and replay.bd == row["bd"]  # a window replays to its own BD
        assert ep.text == describe_rule(row, scene) and ep.actions[-1] == ACTIONS.index("stop")
    assert seen > 10
    row = data.episodes[data.train[0]].row
    assert window(row, 0, len(row["path"]) - 1, scene)["key"] == row["key"]
    # nothing held out leaks in: with every key excluded, only the originals come back
    everything = Relabeler(data.codec, "rule", True, {e.key for e in data.episodes} | {window(
        data.episodes[i].row, a, b, scene)["key"] for i in data.train[:30] for a in range(data.episodes[i].steps)
        for b in range(a, data.episodes[i].steps)}, set())
    assert all(everything.sample(data.episodes[i], rng) is data.episodes[i] for i in data.train[:30])


# ---- model -----------------------------------------------------------------------------------------

def test_forward_shapes_and_causal_masking(data):
    from lactchain.archive.dt.tokenizer import LearnedText

    text = LearnedText.learn(data.texts(data.train))
    model = _model(data, text).eval()
    idx = data.train[:4]
    batch = _batch(data, text, idx)
    b, t = batch["obs"].shape[:2]
    logits = model(batch)
    assert logits.shape == (b, t, 4)
    cut = 3
    changed = {k: v.clone() for k, v in batch.items()}
    changed["act"][:, cut:] = (changed["act"][:, cut:].clamp(min=0) + 1) % 4  # a_t and later
    changed["obs"][:, cut + 1:, 0] = (changed["obs"][:, cut + 1:, 0] + 5) % data.codec.n_cells  # o_{t+1} and later
    changed["bd"][:, cut + 1:, 0] = 0
    after = model(changed)
    assert torch.allclose(after[:, : cut + 1], logits[:, : cut + 1], atol=1e-5)  # logits up to o_t unchanged
    assert not torch.allclose(after[:, cut + 1:], logits[:, cut + 1:])
    # hidden text / BD: the instruction's words no longer matter
    off = torch.zeros(b, dtype=torch.bool)
    other = {**batch, "text_ids": torch.flip(batch["text_ids"], dims=[0])}
    assert torch.allclose(model(batch, text_on=off), model(other, text_on=off), atol=1e-5)
    assert not torch.allclose(model(batch), model(other))
    other_bd = {**batch, "bd": torch.flip(batch["bd"], dims=[0])}
    assert torch.allclose(model(batch, bd_on=off)[:, 0], model(other_bd, bd_on=off)[:, 0], atol=1e-5)


def test_frozen_sentence_encoder_is_one_projected_token(data):
    from lactchain.archive.dt.model import DecisionTransformer, DTConfig
    from lactchain.archive.dt.tokenizer import FrozenText

    calls = []

    def encode(texts):
        calls.append(len(texts))
        return torch.stack([torch.full((8,), float(len(t))) for t in texts])

    text = FrozenText("fake-encoder", encoder=encode, dim=8)
    cfg = DTConfig(scene=data.codec.scene.as_dict(), n_layer=1, n_head=2, n_embd=16, text_encoder="fake-encoder",
                   text_dim=8, max_steps=64)
    idx = data.train[:3]
    batch = _batch(data, text, idx)
    assert batch["text_vec"].shape == (3, 8)
    text.encode([data.episodes[i].text for i in idx])  # cached: no new call
    assert sum(calls) == len({data.episodes[i].text for i in idx})
    assert DecisionTransformer(cfg).eval()(batch).shape[:2] == batch["obs"].shape[:2]


def test_a_few_training_steps_decrease_the_loss(data):
    from lactchain.archive.dt.data import Tensors
    from lactchain.archive.dt.model import action_loss
    from lactchain.archive.dt.tokenizer import LearnedText

    text = LearnedText.learn(data.texts(data.train))
    model = _model(data, text, rtg=True, tie_actions=True)
    assert model.head.weight is model.act_emb.weight
    tensors = Tensors(data.episodes, data.codec)
    texts = text.encode([e.text for e in data.episodes])
    idx = torch.tensor(data.train[:24])
    batch = {**tensors.batch(idx), **{k: v[idx] for k, v in texts.items()}}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    for _ in range(15):
        loss = action_loss(model(batch), batch["act"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_length_bucketed_loss_is_the_whole_batch_loss_and_gradient(data):
    """Training pads each length-sorted bucket to its own longest walk: same loss and
    gradient as the batch padded to its longest (dropout off), whatever the buckets."""
    from lactchain.archive.dt.model import action_loss
    from lactchain.archive.dt.tokenizer import LearnedText
    from lactchain.archive.dt.train import bucketed_loss

    text = LearnedText.learn(data.texts(data.train))
    model = _model(data, text).train()  # dropout 0.0
    idx = data.train[:12]
    eps = [data.episodes[i] for i in idx]
    text_on = torch.tensor([i % 3 != 0 for i in range(12)])
    bd_on = torch.tensor([i % 2 == 0 for i in range(12)])
    batch = _batch(data, text, idx)
    whole = action_loss(model(batch, text_on=text_on, bd_on=bd_on), batch["act"])
    grads = torch.autograd.grad(whole, list(model.parameters()), allow_unused=True)
    assert len({e.steps for e in eps}) > 3  # a real mix of lengths
    for buckets in (1, 2, 5):
        split = bucketed_loss(model, data.codec, text, eps, text_on, bd_on, buckets=buckets)
        assert torch.allclose(split, whole, atol=1e-6), buckets
        for g, h in zip(grads, torch.autograd.grad(split, list(model.parameters()), allow_unused=True)):
            assert (g is None) == (h is None) and (g is None or torch.allclose(g, h, atol=1e-6))


# ---- evaluation pieces ------------------------------------------------------------------------------

def test_planner_oracle_reaches_every_held_out_bd_exactly(data):
    from lactchain.archive.dt.evaluate import Task, _path, evaluate_planner, plan, score

    scene = data.codec.scene
    tasks = [Task.of(data.episodes[i]) for i in data.val]
    for task in tasks:
        moves = plan(scene, task.start, task.final, task.visited)
        assert moves is not None and score(scene, task, _path(scene, task.start, moves))["bd_reached"]
    result = evaluate_planner(scene, tasks, [True] * len(tasks))
    assert result["oracle"] and result["bd_reached"] == result["order_match"] == result["goal_success"] == 1.0
    # an impossible BD: the fridge and the bathtub are not where (0, 0) ends
    assert plan(scene, {"x": 0, "y": 0, "orientation": "east"}, (0, 0), ("bed",)) is not None
    assert plan(scene, {"x": 7, "y": 7, "orientation": "east"}, (0, 0), ()) is None  # starts on the goal: terminal


def test_rollout_stops_and_follows_the_env(data):
    from lactchain.archive.dt.evaluate import Task, rollout
    from lactchain.envs.gridworld import apply_move

    model = _model(data).eval()
    tasks = [Task.of(data.episodes[i]) for i in data.val[:5]]
    for task, run in zip(tasks, rollout(model, None, tasks, use_text=False, max_steps=10)):
        assert len(run["moves"]) <= 10 and len(run["path"]) == len(run["moves"]) + 1
        for a, b, m in zip(run["path"], run["path"][1:], run["moves"]):
            assert apply_move(a, m, data.codec.scene.size).state == b


# ---- the CLI: a registry job, resumable; eval --json -------------------------------------------------

@pytest.fixture(scope="module")
def archive_db(tmp_path_factory):
    """A registry with a small archive run (in-process `archive fill`)."""
    import io
    import sys

    from lactchain.cli import main

    db = tmp_path_factory.mktemp("dt") / "registry.db"
    old_argv, old_out = sys.argv, sys.stdout
    sys.argv = ["lactchain", "archive", "fill", "--scene", "flat", "--behaviours", "150", "--db", str(db), "--json"]
    sys.stdout = buf = io.StringIO()
    try:
        with pytest.raises(SystemExit) as exit_:
            main()
    finally:
        sys.argv, sys.stdout = old_argv, old_out
    assert exit_.value.code == 0
    return db, json.loads(buf.getvalue())["run_id"]


def test_dt_train_is_a_registry_run_then_eval_json(archive_db, capsys):
    from lactchain.runs.registry import Registry

    db, archive = archive_db
    code, out, err = run_cli(["dt", "train", "--archive", archive, "--steps", "20", *TINY, "--db", db, "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    reg = Registry(db)
    run = reg.get_run(result["run_id"])
    assert run["kind"] == "dt" and run["status"] == "FINISHED"
    assert result["steps"] == 20 and result["val_trajectories"] >= 1
    assert result["tokenizer"]["vocab_size"] > 10 and result["tokenizer"]["longest_description_tokens"] > 5
    losses = reg.metric_history(result["run_id"], "loss")
    assert [m["step"] for m in losses] == [5, 10, 15, 20] and all(m["value"] > 0 for m in losses)
    assert {"val_loss", "val_accuracy", "val_text_loss", "val_bd_loss", "lr"} <= set(reg.metric_keys(result["run_id"]))
    arts = reg.artifacts(result["run_id"], "dt")
    assert [a["step"] for a in arts] == [10, 20]  # the last two kept
    # model selection: closed-loop scores on the selection split every 10 steps; the best kept
    assert result["select_trajectories"] >= 1
    scores = {m["step"]: m["value"] for m in reg.metric_history(result["run_id"], "select_score")}
    assert set(scores) == {10, 20} and all(0.0 <= v <= 1.0 for v in scores.values())
    best = reg.artifacts(result["run_id"], "dt-best")
    assert len(best) == 1 and Path(best[0]["path"]).is_dir()
    assert best[0]["meta"]["select_score"] == max(scores.values())
    assert best[0]["step"] == result["best"]["step"] == min(s for s, v in scores.items() if v == max(scores.values()))
    assert {"model.safetensors", "optimizer.pt", "config.json", "tokenizer.json"} <= {p.name for p in Path(arts[-1]["path"]).iterdir()}

    code, out, err = run_cli(["dt", "train", "--archive", archive, "--no-text", "--steps", "10", *TINY, "--db", db,
                              "--json"], capsys)
    assert code == 0, err
    baseline = json.loads(out)["run_id"]

    code, out, err = run_cli(["dt", "eval", result["run_id"], "--baseline", baseline, "--goal-starts", "16", "--db", db,
                              "--json"], capsys)
    assert code == 0, err
    ev = json.loads(out)
    assert ev["heldout"] == result["val_trajectories"] and ev["heldout_bds_seen_in_training"] == 0
    assert ev["checkpoint_kind"] == "dt-best" and ev["step"] == best[0]["step"]  # the selected model by default
    assert ev["goal_starts"] == 16
    assert set(ev["dt"]) == {"text+bd", "bd", "text", "goal_success"}
    assert set(ev["baseline"]) >= {"bd", "none", "goal_success"} and ev["planner"]["oracle"] is True
    for key in ("bd_reached_heldout_bds", "bd_reached_bd_only", "order_match_heldout_instructions", "goal_success",
                "baseline_bd_reached", "baseline_order_match_instructions", "planner_bd_reached",
                "planner_order_match", "planner_goal_success"):
        assert 0.0 <= ev["summary"][key] <= 1.0, key
    assert ev["summary"]["planner_bd_reached"] == 1.0
    assert reg.get_run(ev["run_id"])["kind"] == "dt-eval"
    code, out, err = run_cli(["dt", "eval", result["run_id"], "--checkpoint", "last", "--no-goal", "--limit", "2",
                              "--db", db, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["checkpoint_kind"] == "dt" and json.loads(out)["step"] == 20

    # a no-text baseline on another split is refused, in one line
    code, out, err = run_cli(["dt", "train", "--archive", archive, "--no-text", "--steps", "1", "--seed", "7", *TINY,
                              "--db", db, "--json"], capsys)
    other = json.loads(out)["run_id"]
    code, out, err = run_cli(["dt", "eval", result["run_id"], "--baseline", other, "--no-goal", "--db", db], capsys)
    assert code == 2 and "another split" in err
    # a text run is no no-text baseline; a resume cannot change the model's shape
    code, out, err = run_cli(["dt", "eval", result["run_id"], "--baseline", result["run_id"], "--no-goal", "--db", db],
                             capsys)
    assert code == 2 and "the baseline is a no-text run" in err and len(err.strip().splitlines()) == 1
    runs_before = len(reg.list_runs())
    code, out, err = run_cli(["dt", "train", "--archive", archive, "--resume-from", result["run_id"], *TINY,
                              "--n-layer", "3", "--steps", "30", "--db", db], capsys)
    assert code == 2 and "--n-layer 3: run" in err and "a resume keeps the model's shape" in err, err
    assert len(reg.list_runs()) == runs_before
    # a truncated checkpoint (the one eval loads: the selected best) is named in one line, before an eval run exists
    weights = Path(reg.latest_artifact(baseline, "dt-best")["path"]) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    code, out, err = run_cli(["dt", "eval", result["run_id"], "--baseline", baseline, "--no-goal", "--db", db],
                             capsys)
    assert code == 2 and "model.safetensors" in err and "damaged" in err and len(err.strip().splitlines()) == 1, err
    assert len(reg.list_runs()) == runs_before


def test_killed_dt_training_resumes_from_its_checkpoint(archive_db, capsys, monkeypatch):
    """SIGTERM mid-training -> KILLED with a checkpoint at that step; `runs resume`'s command
    (the recorded one + --resume-from) continues the step count to the end."""
    import lactchain.archive.dt.train as dt_train
    from lactchain import jobs
    from lactchain.runs.registry import Registry
    from lactchain.runs.resume import check_resumable

    db, archive = archive_db
    real = dt_train.train_dt

    def sigterm_at_step_13(handle, config, **kw):
        def on_step(step):
            if step == 13:
                os.kill(os.getpid(), signal.SIGTERM)
        return real(handle, config, **kw, on_step=on_step)

    monkeypatch.setattr(dt_train, "train_dt", sigterm_at_step_13)
    code, out, err = run_cli(["dt", "train", "--archive", archive, "--steps", "25", *TINY, "--db", db], capsys)
    assert code == 130, err
    reg = Registry(db)
    killed = reg.list_runs(kind="dt")[0]
    assert killed["status"] == "KILLED"
    assert [a["step"] for a in reg.artifacts(killed["id"], "dt")] == [10, 13]  # every 10, and on SIGTERM
    check_resumable(reg, reg.get_run(killed["id"]))  # `runs resume` accepts it

    monkeypatch.setattr(dt_train, "train_dt", real)
    # what `runs resume` launches (detached, with the registry's --db)
    argv = jobs.strip_detach(list(killed["cmd"][1:])) + ["--resume-from", killed["id"], "--db", db, "--json"]
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    resumed = json.loads(out)
    assert resumed["start_step"] == 13 and resumed["steps"] == 25
    steps = [a["step"] for a in reg.artifacts(resumed["run_id"], "dt")]
    assert steps == [20, 25]
    assert reg.params(resumed["run_id"])["resume_from"] == killed["id"]
    assert resumed["train_seconds"] > reg.artifacts(killed["id"], "dt")[-1]["meta"]["train_seconds"]


def test_bench_dt_trains_each_encoder_evaluates_against_the_baseline_and_reports_targets(tmp_path, capsys):
    """`lactchain bench dt`: the real archive fill / dt train / dt eval commands, tiny sizes,
    each a run in the registry it was given; the JSON says per encoder whether the targets
    are met. Bad input: one line, nothing run."""
    from lactchain.runs.registry import Registry

    db = tmp_path / "bench.db"
    code, out, err = run_cli(["bench", "dt", "-n", "40", "--minutes", "1", "--steps", "6", "--seeds", "3",
                              "--goal-starts", "4", "--train-args",
                              "--n-layer 1 --n-head 2 --n-embd 32 --batch-size 8 --select-every 3 --eval-every 3",
                              "--db", str(db), "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    runs = result["runs"]["3"]
    assert set(runs) == {"learned", "none"} and runs["learned"]["steps"] == runs["none"]["steps"] == 6
    ev = runs["learned"]["eval"]
    assert ev["planner_bd_reached"] == 1.0 and 0.0 <= ev["baseline_bd_reached"] <= 1.0
    assert result["mean"]["learned"]["bd_reached_heldout_bds"] == ev["bd_reached_heldout_bds"]
    assert set(result["met"]["learned"]) == set(result["targets"]) and "none" not in result["met"]
    reg = Registry(db)
    assert {r["kind"] for r in reg.list_runs()} == {"bench", "archive", "dt", "dt-eval"}
    assert {r["kind"] for r in reg.list_runs(parent_id=result["run_id"])} == {"archive", "dt", "dt-eval"}
    assert reg.params(runs["learned"]["run_id"])["seed"] == 3
    assert json.loads(open(reg.latest_artifact(result["run_id"], "report")["path"]).read())["mean"] == result["mean"]

    code, out, err = run_cli(["bench", "dt", "--encoders", "learned,bpe", "--db", str(tmp_path / "x.db")], capsys)
    assert code == 2 and "--encoders" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()
    code, out, err = run_cli(["bench", "dt", "--train-args", "--n-layer 1 --detach", "--db", str(tmp_path / "x.db")],
                             capsys)
    assert code == 2 and "--detach belong to the benchmark" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()
    # a dt train option the training would refuse: refused before the archive fill, nothing created
    for extra, message in (("--n-embd 7", "--n-embd"), ("--bogus", "--bogus: no such option")):
        code, out, err = run_cli(["bench", "dt", "--train-args", extra, "--db", str(tmp_path / "x.db")], capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "x.db").exists()
