"""The Bradley-Terry reward model on judged captions, and Q-learning on its reward."""

from __future__ import annotations

import json
import math

import pytest
import torch

from lactchain.motif.captions import captioned_episodes, collect_runs
from lactchain.envs.blackjack import BlackjackTextEnv
from lactchain.motif.judge import RuleJudge, label_rows, pair_episodes
from lactchain.motif.agents import CaptionReward, reward_fn
from lactchain.runs.registry import Registry
from lactchain.train.reward_model import (
    LabelledPair,
    RewardModel,
    bradley_terry_loss,
    labelled_pairs,
    rank_correlation,
    train_reward_model,
)


def test_bradley_terry_loss_on_a_hand_built_batch():
    chosen, rejected = torch.tensor([2.0, 0.0, 1.0]), torch.tensor([0.0, 0.0, 1.0])
    target = torch.tensor([1.0, 1.0, 0.5])
    expected = (-math.log(1 / (1 + math.exp(-2.0))) + math.log(2) + math.log(2)) / 3
    assert bradley_terry_loss(chosen, rejected, target).item() == pytest.approx(expected)
    # A tie is best predicted by equal rewards; a preference pushes the gap up.
    assert bradley_terry_loss(torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([0.5])) < \
        bradley_terry_loss(torch.tensor([3.0]), torch.tensor([1.0]), torch.tensor([0.5]))
    gap = torch.tensor([0.0], requires_grad=True)
    bradley_terry_loss(gap, torch.tensor([0.0]), torch.tensor([1.0])).backward()
    assert gap.grad.item() < 0  # gradient descent raises the chosen reward


def test_only_labels_and_ties_train_the_model():
    rows = [{"status": "labeled", "chosen": "a", "rejected": "b"}, {"status": "tie", "chosen": "c", "rejected": "d"},
            {"status": "skipped", "chosen": "e", "rejected": "f"}, {"status": "pending", "chosen": "g", "rejected": "h"}]
    assert labelled_pairs(rows) == [LabelledPair("a", "b", 1.0), LabelledPair("c", "d", 0.5)]
    with pytest.raises(ValueError, match="at least 2"):
        train_reward_model(None, labelled_pairs(rows[:1]))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    reg = Registry(tmp_path_factory.mktemp("rm") / "r.db")
    env = BlackjackTextEnv()
    runs = collect_runs(reg, env, ("random", "optimal"), 150, seed=2)
    episodes = captioned_episodes(reg, runs)
    pairs = pair_episodes(episodes, 240, "random", seed=0)
    rows = label_rows(pairs, RuleJudge().judge(pairs, "blackjack"), RuleJudge(), "blackjack")
    return episodes, labelled_pairs(rows)


def test_reward_model_learns_the_rule_judges_preferences(judged):
    episodes, pairs = judged
    model = RewardModel("tiny")
    result = train_reward_model(model, pairs, epochs=30, seed=0)
    assert result["held_out_pairs"] == 48 and result["train_pairs"] == 192
    assert result["held_out_accuracy"] >= 0.8, result
    captions = {e.caption: e.true_return for e in episodes}
    rho = rank_correlation(model, list(captions), list(captions.values()))
    assert rho > 0.5, rho
    # Saved and reloaded, it scores the same.
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        model.save(folder, {"score_mean": 0.0, "score_std": 1.0})
        again = RewardModel.load(folder)
        some = list(captions)[:5]
        assert again.score(some) == pytest.approx(model.score(some), abs=1e-5)
    with pytest.raises(ValueError, match="reward_model.json is missing"):
        RewardModel.load("/nonexistent")


def test_intrinsic_and_mixed_rewards_come_from_the_captions(judged):
    episodes, pairs = judged
    model = RewardModel("tiny")
    train_reward_model(model, pairs, epochs=5, seed=0)
    intrinsic = CaptionReward(model, mean=0.5, std=2.0)
    info = {"caption": "the last step", "episode_caption": episodes[0].caption, "done": True}
    raw = model.score([episodes[0].caption])[0]
    assert intrinsic(episodes[0].caption) == pytest.approx((raw - 0.5) / 2.0)
    assert reward_fn("extrinsic", None) is None
    assert reward_fn("intrinsic", intrinsic, intrinsic_coef=2.0)(-1.0, info) == pytest.approx(2 * (raw - 0.5) / 2.0)
    assert reward_fn("mixed", intrinsic, 1.0, 3.0)(-1.0, info) == pytest.approx(-3.0 + (raw - 0.5) / 2.0)
    # Before the episode ends there is no intrinsic reward: the model scores whole episodes.
    assert reward_fn("mixed", intrinsic, 1.0, 3.0)(0.0, {**info, "done": False}) == 0.0
    with pytest.raises(ValueError, match="needs a reward model"):
        reward_fn("mixed", None)


def test_train_reward_and_reward_agents_cli(tmp_path, capsys):
    from cli_helpers import run_cli

    def lc(*argv):
        code, out, err = run_cli(list(argv), capsys)
        return code, (json.loads(out) if code == 0 else None), err

    db = str(tmp_path / "r.db")
    ids = [lc("collect", "--policy", p, "-n", "80", "--db", db, "--json")[1]["run_id"] for p in ("random", "optimal")]
    judge = lc("judge", "--from", ids[0], "--from", ids[1], "--pairs", "60", "--pairing", "random", "--db", db,
               "--json")[1]["run_id"]
    code, out, err = lc("train-reward", "--pairs-from", judge, "--critic", "tiny", "--epochs", "10", "--db", db, "--json")
    assert code == 0, err
    assert 0.0 <= out["held_out_accuracy"] <= 1.0 and -1.0 <= out["rank_correlation"] <= 1.0
    reg = Registry(db)
    assert reg.latest_artifact(out["run_id"], "reward-model") is not None
    code, result, err = lc("reward-agents", "--reward-run", out["run_id"], "--train-episodes", "300",
                           "--eval-episodes", "300", "--db", db, "--json")
    assert code == 0, err
    agents = result["agents"]
    assert set(agents) == {"extrinsic", "intrinsic", "mixed", "optimal (oracle)", "random"}
    assert all(0.0 <= a["win_rate"] <= 1.0 for a in agents.values())
    # Bad input: a run that is not a train-reward run, pairs from a non-judge run.
    code, _, err = lc("reward-agents", "--reward-run", judge, "--db", db)
    assert code == 2 and "has no saved reward model" in err
    code, _, err = lc("train-reward", "--pairs-from", ids[0], "--db", db)
    assert code == 2 and "expected a judge run" in err


def test_bench_motif_prints_one_results_table(capsys, tmp_path):
    """One bench run whose steps are the Motif jobs, recorded as its child runs."""
    from cli_helpers import run_cli
    from lactchain.runs.registry import Registry

    db = tmp_path / "registry.db"
    code, out, err = run_cli(["bench", "motif", "--judges", "rule", "--critic", "tiny", "--episodes", "40", "--pairs",
                              "30", "--pairing", "random", "--train-episodes", "200", "--eval-episodes", "200",
                              "--epochs", "5", "--db", db, "--json"], capsys)
    assert code == 0, err
    table = json.loads(out)
    assert table["judges"]["rule"]["agreement"] == 1.0
    assert 0.0 <= table["reward_models"]["rule"]["held_out_accuracy"] <= 1.0
    assert {"extrinsic", "intrinsic (rule)", "mixed (rule)", "optimal (oracle)", "random"} == set(table["agents"])
    assert table["optimal_win_rate_exact"] == pytest.approx(0.4329, abs=1e-4)
    with Registry(db) as reg:
        assert reg.get_run(table["run_id"])["kind"] == "bench"
        children = sorted(r["kind"] for r in reg.list_runs(parent_id=table["run_id"]))
        assert children == ["agents", "agents", "collect", "collect", "judge", "reward"]
        assert json.loads(open(reg.latest_artifact(table["run_id"], "report")["path"]).read())["agents"] == table["agents"]
    code, _, err = run_cli(["bench", "motif", "--judges", " , ", "--db", db], capsys)
    assert code == 2 and "name at least one judge" in err
