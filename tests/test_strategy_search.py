"""`lactchain strategy search` on the tiny actor: rounds that save scored strategy
versions, a held-out split the search never plays, kill -> resume from the last whole
round (as a real detached job), the proposers on their own, and one-line refusals."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from lactchain.runs.registry import Registry

from cli_helpers import wait_until
from lactchain.strategy.search import (DEMO_HEADER, Candidate, DemoProposer, EditProposer, Episode, LLMProposer,
                                       Search, sentences)

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--actor", "tiny", "--train-states", "8", "--heldout-states", "12", "--per-round", "2"]


def _search_file(reg: Registry, run_id: str) -> dict:
    return json.loads((reg.run_dir(run_id) / "search.json").read_text())


def test_a_search_saves_scored_versions_and_never_plays_a_held_out_state(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("strategy", "search", *TINY, "--rounds", "2", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    reg = Registry(db)
    saved = json.loads(json.dumps(_search_file(reg, out["run_id"])))
    train, held = set(saved["train_keys"]), set(saved["heldout_keys"])
    assert len(train) == 8 and len(held) == 12 and not train & held
    for c in saved["candidates"]:  # every score is on a training state, none on a held-out one
        assert set(c["scores"]) == train
    assert saved["rounds_done"] == out["rounds"] == 2 and out["heldout_states"] == 12
    # training states only: once per candidate, plus the demos proposer's sampled attempts
    assert out["evaluations"] == 8 * len(saved["candidates"]) + saved["sampled"]
    # what the actor answered greedily, per training state, over every candidate (1.0: no strategy changed it)
    assert set(saved["greedy_answers"]) == train and 1.0 <= out["answers_per_state"] <= len(saved["candidates"])
    versions = [p for p in reg.prompts() if p["run_id"] == out["run_id"]]
    assert len(versions) == len(saved["candidates"])  # every candidate, the built-in start strategy too
    # so the best always names a version the next job takes (`--strategy VERSION`), even the start
    assert out["best_version"] in {v["version"] for v in versions}
    start = min(versions, key=lambda v: v["version"])
    assert start["text"] == saved["candidates"][0]["text"] and start["score"] == pytest.approx(out["train_start"])
    by_version = {c["version"]: c for c in saved["candidates"]}
    for v in versions:
        c = by_version[v["version"]]
        assert v["text"] == c["text"] and v["score"] == pytest.approx(sum(c["scores"].values()) / 8)
    best = max(versions, key=lambda v: (v["score"], -v["version"]))
    assert out["train_best"] == pytest.approx(max(v["score"] for v in versions))
    assert 0.0 <= out["heldout_best"] <= 1.0 and 0.0 <= out["heldout_start"] <= 1.0
    assert [r["step"] for r in reg.metric_history(out["run_id"], "best")] == [1, 2]
    # The versions list ranks a search's versions by score (best first).
    code, stdout, err = lc("strategy", "versions", "--db", db, "--json")
    listed = json.loads(stdout)
    assert listed[0]["score"] == best["score"] and [r["score"] for r in listed] == sorted(  # no hand-saved ones here
        (r["score"] for r in listed), reverse=True)
    assert {r["world"] for r in listed} == {"grid"}  # what each score was measured on
    assert {v["env"] for v in versions} == {"grid"}  # and the env each version was written for
    # --from picks one search's versions out of a registry where others, and hand-saved ones, are too
    reg.save_prompt("by hand")
    reg.save_prompt("by hand in the console, for Taxi", env="taxi")
    other = reg.create_run("strategy", params={"env": "grid", "scene": "flat"})
    reg.save_prompt("another search's", score=0.9, run_id=other)
    code, stdout, err = lc("strategy", "versions", "--from", out["run_id"], "--limit", "1000", "--db", db, "--json")
    assert code == 0, err
    assert sorted(r["version"] for r in json.loads(stdout)) == sorted(v["version"] for v in versions)
    code, stdout, _ = lc("strategy", "versions", "--db", db, "--json")
    every = json.loads(stdout)
    assert {r["world"] for r in every} == {None, "taxi", "grid", "grid flat"}
    by_hand_for_taxi = next(r for r in every if r["world"] == "taxi")  # the env it was written for, not a score's
    assert (by_hand_for_taxi["env"], by_hand_for_taxi["scored_on"]) == ("taxi", None)
    assert next(r for r in every if r["run_id"] == other)["scored_on"] == {"env": "grid", "scene": "flat"}
    code, _, err = lc("strategy", "versions", "--from", other[:-1] + "z", "--db", db)
    assert code == 2 and "no run" in err


@pytest.mark.slow
def test_a_killed_search_resumes_from_its_last_whole_round(tmp_path, cli_subprocess):
    """A real detached job: killed after its first round, `runs resume` continues from the
    saved round, and the versions it saved before the kill are not saved twice."""
    db = tmp_path / "registry.db"
    code, stdout, err = cli_subprocess("strategy", "search", *TINY, "--rounds", "4", "--db", db, "--detach", "--json")
    assert code == 0, err
    run_id = json.loads(stdout)["run_id"]
    reg = Registry(db)
    path = reg.run_dir(run_id) / "search.json"
    wait_until(lambda: path.is_file() and json.loads(path.read_text())["rounds_done"] >= 1)
    code, _, err = cli_subprocess("runs", "kill", run_id, "--wait", "60", "--db", db)
    assert code == 0, err
    assert wait_until(lambda: reg.get_run(run_id)["status"] != "RUNNING") and reg.get_run(run_id)["status"] == "KILLED"
    kept = json.loads(path.read_text())
    assert 1 <= kept["rounds_done"] < 4
    before = {p["version"] for p in reg.prompts() if p["run_id"] == run_id}
    assert before == {c["version"] for c in kept["candidates"]}  # the start's too; none from a half round
    code, stdout, err = cli_subprocess("runs", "resume", run_id, "--db", db, "--json")
    assert code == 0, err
    new_id = json.loads(stdout)["run_id"]
    wait_until(lambda: reg.get_run(new_id)["status"] in ("FINISHED", "FAILED", "KILLED"), timeout=600)
    assert reg.get_run(new_id)["status"] == "FINISHED", reg.get_run(new_id).get("error")
    done = _search_file(reg, new_id)
    assert done["rounds_done"] == 4 and done["candidates"][: len(kept["candidates"])] == kept["candidates"]
    assert done["seconds"] > kept["seconds"] > 0  # the search's time over both runs: what --budget-min counts
    assert [r["step"] for r in reg.metric_history(new_id, "best")] == list(range(kept["rounds_done"] + 1, 5))
    assert "resuming" in (reg.run_dir(new_id) / "log.txt").read_text()


@pytest.fixture
def cli_subprocess(capsys):
    """The launcher and control commands in this process; the job a real detached subprocess."""
    from cli_helpers import run_cli

    return lambda *argv: run_cli([str(a) for a in argv], capsys)


def _search(texts_scores: list[tuple[str, list[float]]]) -> Search:
    keys = [f"s{i}" for i in range(len(texts_scores[0][1]))]
    s = Search(keys, ["h0"])
    for i, (text, scores) in enumerate(texts_scores):
        s.candidates.append(Candidate(text, "start" if i == 0 else "edits", i, dict(zip(keys, scores))))
    return s


def test_the_front_keeps_what_no_other_beats_everywhere_and_parents_come_from_it():
    s = _search([("A. B.", [1, 0, 0]), ("C. D.", [0, 1, 0]), ("E.", [1, 1, 0]), ("F.", [0, 0, 0])])
    assert s.front() == [2] and s.best().text == "E."
    s = _search([("A. B.", [1, 0, 1]), ("C. D.", [0, 1, 0]), ("F.", [0, 0, 0])])
    assert s.front() == [0, 1]
    assert {s.parent(random.Random(seed)) for seed in range(40)} == {0, 1}


def test_edits_change_one_sentence_and_demos_add_worked_examples_from_training_states():
    s = _search([("Go. Turn. Stop.", [1, 0])])
    edits = EditProposer(["Look first."]).propose(s, 6, random.Random(0))
    assert edits and all(p == 0 for _, p in edits)
    for text, _ in edits:
        a, b = sentences("Go. Turn. Stop."), sentences(text)
        assert text != "Go. Turn. Stop." and abs(len(a) - len(b)) <= 1
    s.successes = {"s0": ["move forward"], "h0": ["turn left"]}  # a held-out success must never be shown
    s.descriptions = {"s0": "You are at (x=2, y=3).", "h0": "HELD OUT"}
    demos = DemoProposer().propose(s, 3, random.Random(1))
    assert demos and all(DEMO_HEADER in t and "['move forward']" in t and "HELD OUT" not in t for t, _ in demos)


def test_demos_out_of_examples_bootstrap_more_from_sampled_attempts_on_training_states_only():
    """Once every combination of the known successes is tried, the best strategy is sampled
    from the training states still without a success; what succeeds becomes a new example."""
    s = _search([("Go.", [1, 0, 0])])
    s.heldout_keys = ["h0"]
    s.successes = {"s0": ["move forward"]}
    s.descriptions = {"s0": "At s0.", "h0": "HELD OUT"}
    asked: list[list[str]] = []

    def sample(text: str, starts: list[str]) -> list[Episode]:
        asked.append(list(starts))  # the env would play these; s1 succeeds once, s2 never
        return [Episode(k, f"At {k}.", k == "s1" and i == 1, ["turn left"], k == "s1" and i == 1)
                for i, k in enumerate(starts)]

    demos = DemoProposer(sample, train_states=["s0", "s1", "s2"], attempts=2)
    first = demos.propose(s, 1, random.Random(0))
    assert len(first) == 1 and asked == []  # the known example still had a combination left
    s.candidates.append(Candidate(first[0][0], "demos", 1, {"s0": 1.0, "s1": 0.0, "s2": 0.0}, parent=0))
    out = demos.propose(s, 3, random.Random(0))
    assert asked == [["s1", "s1", "s2", "s2"]]  # missing training states only, `attempts` times each
    assert s.evaluations == s.sampled == 4 and s.successes["s1"] == ["turn left"]
    assert any("At s1. Answer: ['turn left']" in t for t, _ in out) and not any("HELD OUT" in t for t, _ in out)


def test_a_search_whose_proposers_run_dry_stops_early(tmp_path, lc):
    """Blackjack's deals are not resampled, so demos has nothing new once its examples are
    used: the search ends after 25 empty rounds instead of spinning to --rounds."""
    db = tmp_path / "registry.db"
    code, stdout, err = lc("strategy", "search", "--actor", "tiny", "--env", "blackjack", "--proposers", "demos",
                           "--rounds", "1000", "--train-states", "4", "--heldout-states", "4", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    assert out["rounds"] < 1000 and "no proposer had a new strategy in 25 rounds" in err


def test_the_llm_proposer_reads_the_scored_history_and_returns_valid_strategies(tiny_actor):
    s = _search([("Go to the goal.", [0, 1]), ("Turn left first.", [1, 1])])
    s.failures = [{"state": "You are at (x=0, y=0).", "answer": "['turn left']", "caption": "turned left"}]
    proposer = LLMProposer(tiny_actor, "A grid world.")
    prompt = proposer.meta_prompt(s, random.Random(0))
    assert prompt.index("(50%) Go to the goal.") < prompt.index("(100%) Turn left first.")  # best last (OPRO)
    assert "['turn left'] (turned left)" in prompt
    out = proposer.propose(s, 3, random.Random(0))
    assert all(t.strip() and t not in ("Go to the goal.", "Turn left first.") and p == 1 for t, p in out)


@pytest.mark.parametrize("argv, message", [
    (["--proposers", ""], "--proposers: is empty; name at least one of edits, demos, llm"),
    (["--proposers", "edits,magic"], "unknown proposer magic"),
    (["--proposers", "edits,edits"], "names a proposer more than once"),
    (["--rounds", "0"], "--rounds"),
    (["--strategy", "{binary}"], "not a UTF-8 text file"),
    (["--train-states", "60"], "leaves none of the env's 60 start states to hold out"),
    (["--resume-from", "nope"], "no run with id 'nope'"),
    (["--proposer-actor", "no-such-model"], "--proposer-actor no-such-model"),
])
def test_bad_search_settings_are_one_line_refusals_before_any_run(argv, message, tmp_path, lc):
    binary = tmp_path / "strategy.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81" * 10)
    db = tmp_path / "registry.db"
    argv = [a.replace("{binary}", str(binary)) for a in argv]
    code, _, err = lc("strategy", "search", "--actor", "tiny", *argv, "--db", db)
    assert code != 0 and message in err, err
    assert "Traceback" not in err and len([line for line in err.splitlines() if line.strip()]) == 1
    with Registry(db) as reg:
        assert reg.list_runs() == []


@pytest.mark.slow
def test_bench_strategy_runs_each_proposer_per_seed_and_writes_its_json_png_and_table(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("bench", "strategy", *TINY, "--proposers", "edits,demos", "--seeds", "0,1", "--rounds", "2",
                           "--budget-min", "5", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    assert [c["key"] for c in out["cells"]] == ["edits-seed0", "demos-seed0", "edits-seed1", "demos-seed1"]
    reg = Registry(db)
    children = reg.list_runs(parent_id=out["run_id"])
    assert len(children) == 4 and all(c["kind"] == "strategy" and c["status"] == "FINISHED" for c in children)
    assert [r["proposer"] for r in out["table"]] == ["edits", "demos"]
    assert all(r["heldout_best"]["n"] == 2 for r in out["table"])
    for key in ("bench_json", "bench_png", "bench_md"):
        assert Path(out[key]).is_file()
    assert "| edits | 0,1 |" in Path(out["bench_md"]).read_text() and "greedy answers per state" in Path(
        out["bench_md"]).read_text()
    # A resume keeps the finished cells: nothing is played again.
    code, stdout, err = lc("bench", "strategy", *TINY, "--proposers", "edits,demos", "--seeds", "0,1", "--rounds", "2",
                           "--budget-min", "5", "--resume-from", out["run_id"], "--db", db, "--json")
    assert code == 0, err
    again = json.loads(stdout)
    assert [c["run_id"] for c in again["cells"]] == [c["run_id"] for c in out["cells"]]
    # The bench folder carried to another machine (no registry): its cells are kept there,
    # and one more seed runs beside them; other settings are refused before any run.
    folder = Path(out["bench_json"]).parent
    code, stdout, err = lc("bench", "strategy", *TINY, "--proposers", "edits", "--seeds", "0,1,2", "--rounds", "2",
                           "--budget-min", "5", "--cells-from", folder, "--db", tmp_path / "other.db", "--json")
    assert code == 0, err
    moved = json.loads(stdout)
    assert [c["key"] for c in moved["cells"]] == ["edits-seed0", "edits-seed1", "edits-seed2"]
    assert [c["run_id"] for c in moved["cells"][:2]] == [c["run_id"] for c in out["cells"] if c["proposer"] == "edits"]
    assert [c["seed"] for c in moved["cells"] if c.get("settings", {}).get("rounds") == 2] == [0, 1, 2]
    with Registry(tmp_path / "other.db") as other:
        assert len(other.list_runs(parent_id=moved["run_id"])) == 1
    code, _, err = lc("bench", "strategy", *TINY, "--proposers", "edits", "--seeds", "0,1", "--rounds", "3",
                      "--budget-min", "5", "--cells-from", folder, "--db", tmp_path / "third.db")
    assert code != 0 and "cell edits-seed0 was run with rounds 2 (this benchmark: 3)" in err, err


@pytest.mark.parametrize("world", [["--scene", "rooms", "--state-text", "coords"], ["--env", "blackjack"]])
def test_the_search_runs_on_other_worlds_of_the_seam(world, tmp_path, lc):
    """A walled scene read as coordinates, and Blackjack (training and held-out states are
    seeded deals on disjoint seeds)."""
    db = tmp_path / "registry.db"
    code, stdout, err = lc("strategy", "search", "--actor", "tiny", *world, "--proposers", "edits", "--rounds", "1",
                           "--train-states", "6", "--heldout-states", "8", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    saved = _search_file(Registry(db), out["run_id"])
    assert len(saved["train_keys"]) == 6 and len(saved["heldout_keys"]) == 8
    assert not set(saved["train_keys"]) & set(saved["heldout_keys"])
    if "blackjack" in world:
        assert all(k.startswith("deal ") for k in saved["train_keys"] + saved["heldout_keys"])
    params = Registry(db).params(out["run_id"])
    assert params["env"] == world[1] if world[0] == "--env" else params["scene"] == "rooms"
