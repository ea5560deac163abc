"""`lactchain baselines train` and `lactchain leaderboard` on a real registry: classic
agents and the LLM actor on the same start states, beside random play and the optimum."""

from __future__ import annotations

import json

import pytest

from lactchain.runs.registry import Registry


def test_the_leaderboard_ranks_classic_agents_and_the_llm_on_the_grid(tmp_path, lc):
    db = tmp_path / "registry.db"
    for agent, episodes in (("q-learning", 3000), ("value-iteration", 1)):
        code, out, err = lc("baselines", "train", "--agent", agent, "-n", episodes, "--db", db, "--json")
        assert code == 0, err
        result = json.loads(out)
        assert result["eval"]["states"] == 60 and result["eval"]["success_rate"] == 1.0
    reg = Registry(db)
    q_run = next(r for r in reg.list_runs(kind="baseline") if reg.params(r["id"])["agent"] == "q-learning")
    assert reg.latest_artifact(q_run["id"], "agent") is not None  # the learned table
    assert reg.latest_metrics(q_run["id"])["train/env_steps"] > 10_000
    code, out, err = lc("evaluate", "--actor", "tiny", "--states", "all", "--max-actions", "2", "--envs", "60",
                        "--db", db, "--json")
    assert code == 0, err
    code, out, err = lc("leaderboard", "--db", db, "--json")
    assert code == 0, err
    rows = {r["agent"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {"q-learning", "value-iteration", "tiny zero-shot", "random", "optimum (oracle)"}
    assert rows["q-learning"]["success_rate"] == 1.0 and rows["q-learning"]["train_env_steps"] > 10_000
    assert rows["optimum (oracle)"]["mean_optimal_ratio"] == 1.0
    assert rows["random"]["success_rate"] < rows["q-learning"]["success_rate"]
    assert rows["tiny zero-shot"]["states"] == 60 and rows["tiny zero-shot"]["kind"] == "llm"
    code, out, err = lc("leaderboard", "--db", db)
    assert code == 0 and "q-learning" in out and "optimum (oracle)" in out


def test_blackjack_rows_carry_the_exact_expected_return(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, out, err = lc("baselines", "train", "--env", "blackjack", "--agent", "value-iteration", "--db", db, "--json")
    assert code == 0, err
    code, out, err = lc("leaderboard", "--env", "blackjack", "--db", db, "--json")
    assert code == 0, err
    rows = {r["agent"]: r for r in json.loads(out)["rows"]}
    assert rows["value-iteration"]["greedy_expected_return"] == pytest.approx(
        rows["optimum (oracle)"]["greedy_expected_return"])  # Blackjack's DP is its value iteration
    assert rows["random"]["greedy_expected_return"] < rows["value-iteration"]["greedy_expected_return"]


@pytest.mark.parametrize("argv, message", [
    (["leaderboard"], "no agents evaluated on grid in this registry"),
    (["baselines", "train", "--agent", "dqn"], "--agent 'dqn': must be one of random, value-iteration"),
    (["baselines", "train", "--epsilon", "fast"], "give VALUE, START:END:STEPS"),
    (["baselines", "train", "-n", "0"], "greater than or equal to 1"),
])
def test_bad_input_is_one_line_and_creates_no_run(tmp_path, lc, argv, message):
    db = tmp_path / "registry.db"
    Registry(db)  # an empty registry
    code, _, err = lc(*argv, "--db", db)
    assert code == 2 and message in " ".join(err.split()), err
    assert Registry(db).list_runs() == []


def test_a_pipelines_evaluations_on_another_scene_stay_off_the_grids_board(tmp_path):
    """A pipeline records its scene on the pipeline run, not on its evaluation children:
    the 8x8 `flat` loop's 100 % is not a row of the 4x4 grid's leaderboard."""
    from lactchain.leaderboard import leaderboard

    reg = Registry(tmp_path / "registry.db")
    for scene, text, success in (("flat", "egocentric", 1.0), ("empty", "egocentric", 0.5),
                                 ("empty", "coords", 0.25)):
        parent = reg.create_run("pipeline", params={"env": "grid", "scene": scene, "actor": "tiny",
                                                    "state_text": text, "eval_max_actions": 5})
        child = reg.create_run("eval", name="evaluate (iteration 0)", parent_id=parent,
                               params={"states": "all", "adapter": None})
        reg.log_metrics(child, {"success_rate": success, "mean_return": 10 * success, "states": 60})
        reg.end_run(child, "FINISHED")
    rows = [r for r in leaderboard(reg, "grid") if r["kind"] == "llm"]
    # the same grid read as coordinates stays, named by its text
    assert [(r["agent"], r["success_rate"]) for r in rows] == [("tiny zero-shot", 0.5),
                                                                ("tiny zero-shot (coords text)", 0.25)]


def test_a_trained_actor_is_named_by_the_loss_that_trained_it_and_grpo_counts_its_rollouts(tmp_path):
    """One board compares methods: a pipeline's evaluation is named by its loss, a lone
    `lactchain evaluate --adapter` by its adapter folder's lab metadata (a folder or a run
    id); GRPO rewarded by the env collects nothing, so its env steps are its rollouts'; the
    untrained actor's repeated baseline is one row that counts its evaluations."""
    from lactchain.artifact_checks import ADAPTER_META
    from lactchain.leaderboard import leaderboard

    reg = Registry(tmp_path / "registry.db")

    def adapter(name: str, meta: dict | None) -> str:
        folder = tmp_path / name
        folder.mkdir()
        if meta is not None:
            (folder / ADAPTER_META).write_text(json.dumps(meta))
        return str(folder)

    def evaluation(success: float, params: dict, parent: str | None = None) -> str:
        run = reg.create_run("eval", name="evaluate (iteration 1)" if parent else "evaluate", parent_id=parent,
                             params={"states": "all", "actor": "tiny", **params})
        reg.log_metrics(run, {"success_rate": success, "mean_return": 10 * success, "states": 60})
        reg.end_run(run, "FINISHED")
        return run

    grpo = reg.create_run("pipeline", params={"env": "grid", "actor": "tiny", "loss": "grpo", "eval_max_actions": 5})
    reg.log_metrics(grpo, {"train-actor/samples_scored": 3584}, step=1)
    evaluation(0.9, {"adapter": adapter("a", None)}, parent=grpo)  # no record of its own: the pipeline's loss
    started = reg.create_run("pipeline", params={"env": "grid", "actor": "tiny", "loss": "dpo"})
    evaluation(0.05, {"adapter": adapter("f", {"loss": "rft"})}, parent=started)  # iteration 0: its --adapter
    trained = reg.create_run("actor", params={"loss": "simpo"})
    reg.add_artifact(trained, "adapter", adapter("b", {"loss": "simpo", "base": "tiny"}))
    evaluation(0.8, {"adapter": trained})
    evaluation(0.7, {"adapter": adapter("c", {"loss": "kto"})})
    evaluation(0.6, {"adapter": adapter("d", None)})  # nothing says how it was trained
    evaluation(0.6, {"adapter": adapter("e", None)})  # a trained actor as good as another: its own row
    for _ in range(3):  # every pipeline's baseline: the untrained actor's same greedy answers again
        evaluation(0.1, {"adapter": None}, parent=reg.create_run("pipeline", params={"env": "grid", "actor": "tiny"}))
    evaluation(0.2, {"adapter": None})  # measured otherwise (another --max-actions, say): its own row
    rows = [r for r in leaderboard(reg, "grid") if r["kind"] == "llm"]
    assert [(r["agent"], r["evaluations"]) for r in rows] == [
        ("tiny + grpo adapter", 1), ("tiny + simpo adapter", 1), ("tiny + kto adapter", 1), ("tiny + adapter", 1),
        ("tiny + adapter", 1), ("tiny zero-shot", 1), ("tiny zero-shot", 3), ("tiny + rft adapter", 1)]
    assert rows[0]["train_env_steps"] == 3584 and rows[1]["train_env_steps"] is None


def test_a_resumed_pipelines_env_steps_count_the_phases_it_kept(tmp_path):
    """A pipeline resumed after its first collect logs only what it ran itself: its
    evaluation's env steps count the kept phases of the run it went on from too (its
    iteration 2 once read fewer steps than the first run's iteration 1)."""
    from lactchain.leaderboard import leaderboard

    reg = Registry(tmp_path / "registry.db")
    params = {"env": "grid", "actor": "tiny", "loss": "rft", "eval_max_actions": 5}
    first = reg.create_run("pipeline", params=params, status="KILLED")
    reg.log_metrics(first, {"train-critic/transitions": 15_360}, step=0)
    reg.log_metrics(first, {"collect/candidates": 16_000}, step=1)
    reg.log_metrics(first, {"collect/candidates": 999}, step=2)  # its iteration 2, cut off by the kill: redone
    resumed = reg.create_run("pipeline", params={**params, "resume_from": first}, parent_id=first)
    reg.log_metrics(resumed, {"collect/candidates": 15_500}, step=2)
    for parent, iteration, success in ((first, 1, 0.5), (resumed, 2, 0.9)):
        run = reg.create_run("eval", name=f"evaluate (iteration {iteration})", parent_id=parent,
                             params={"states": "all", "actor": "tiny", "adapter": f"adapter-{iteration}"})
        reg.log_metrics(run, {"success_rate": success, "mean_return": success, "states": 60})
        reg.end_run(run, "FINISHED")
    steps = {r["success_rate"]: r["train_env_steps"] for r in leaderboard(reg, "grid") if r["kind"] == "llm"}
    assert steps == {0.5: 15_360 + 16_000, 0.9: 15_360 + 16_000 + 15_500}
