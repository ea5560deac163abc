"""The trajectory archive: exact reachable BDs, MAP-Elites fill coverage, and
`lactchain archive fill|verify` on a real registry (a corrupted row is caught)."""

from __future__ import annotations

import json
from pathlib import Path


from lactchain.archive.store import fill, reachable_bds
from lactchain.envs.scenes import get_scene
from lactchain.runs.registry import Registry


def test_reachable_bds_are_exact_on_hand_countable_bounds():
    flat = get_scene("flat")
    landmark_cells = sum(len(m.cells) for m in flat.landmarks)
    # No landmark allowed: every cell off the landmarks (the goal included: an episode may end there).
    assert len(reachable_bds("flat", 0)) == 64 - landmark_cells
    assert reachable_bds("empty", 2) == {f"{x},{y}|" for x in range(4) for y in range(4)}
    one = reachable_bds("flat", 1)
    assert "3,3|sofa" in one and "0,0|sofa" in one and "3,3|" not in one  # standing on the sofa visited it
    assert all(key.count(">") == 0 for key in one)


def test_fill_keeps_the_shortest_elite_per_bd_and_covers_a_small_scene():
    archive = fill("empty", 300, seed=0)
    reachable = reachable_bds("empty", 2)
    assert archive.coverage(reachable)["coverage"] == 1.0  # all 16 final cells
    for key, t in archive.elites.items():
        assert key == f"{t.bd['final'][0]},{t.bd['final'][1]}|"
    flat = fill("flat", 300, seed=1)
    cov = flat.coverage(reachable_bds("flat", 2))
    assert 0.1 < cov["coverage"] < 1.0 and cov["tried"] == 300
    assert set(flat.by_source) == {"random-walk", "planner-target", "planner-landmarks"}


def test_fill_then_verify_and_a_corrupted_row_is_caught(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, out, err = lc("archive", "fill", "--scene", "flat", "--behaviours", "150", "--db", db, "--json")
    assert code == 0, err
    result = json.loads(out)
    run = result["run_id"]
    reg = Registry(db)
    assert len(reg.episodes(run)) == result["elites"] > 20
    code, out, err = lc("archive", "verify", run, "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out)["verified_rate"] == 1.0
    path = Path(result["archive"])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    victim = next(i for i, r in enumerate(rows) if len(r["actions"]) >= 2 and "turn left" in r["actions"][1])
    rows[victim]["actions"][1] = ["turn right" if m == "turn left" else m for m in rows[victim]["actions"][1]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = lc("archive", "verify", run, "--db", db, "--json")
    report = json.loads(out)
    assert code == 1  # a row that does not replay fails the command (scripts read the exit code)
    assert report["verified"] == len(rows) - 1
    assert [m["index"] for m in report["mismatches"]] == [victim]
    assert report["mismatches"][0]["problem"].startswith("step 1:")
    path.write_text(path.read_text()[:-20])  # a truncated file
    code, _, err = lc("archive", "verify", run, "--db", db)
    assert code == 2 and "is not JSON (a truncated archive?)" in err and len(err.strip().splitlines()) == 1


def test_bad_input_is_one_line(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, _, err = lc("archive", "fill", "--scene", "attic", "--db", db)
    assert code == 2 and "unknown scene 'attic'" in err
    reg = Registry(db)
    other = reg.create_run("play")
    code, _, err = lc("archive", "verify", other, "--db", db)
    assert code == 2 and "expected an archive run" in err and len(err.strip().splitlines()) == 1


def test_add_archives_a_play_run_with_its_policy_and_merges_into_an_archive(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, out, err = lc("play", "--actor", "tiny", "--scene", "flat", "--start", "random", "--temperature", "1",
                        "-n", "3", "--envs", "3", "--max-actions", "2", "--free", "--db", db, "--json")
    assert code == 0, err
    play_id = json.loads(out)["run_id"]
    code, out, err = lc("archive", "add", play_id, "--db", db, "--json")
    assert code == 0, err
    alone = json.loads(out)
    assert alone["offered"] == 3 and alone["skipped"] == [] and alone["elites"] == alone["new_bds"] >= 1
    rows = [json.loads(line) for line in Path(alone["archive"]).read_text().splitlines()]
    reg = Registry(db)
    assert len(reg.episodes(alone["run_id"])) == len(rows)
    policy = rows[0]["policy"]
    assert policy["kind"] == "llm" and policy["run_id"] == play_id and policy["actor"] == "tiny"
    assert policy["temperature"] == 1.0 and "strategy_version" in policy
    assert rows[0]["env_kwargs"]["scene"]["name"] == "flat"
    code, out, err = lc("archive", "verify", alone["run_id"], "--db", db, "--json")
    assert json.loads(out)["verified_rate"] == 1.0

    code, out, err = lc("archive", "fill", "--behaviours", "60", "--db", db, "--json")
    base = json.loads(out)
    path = Path(base["archive"])
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    for row in kept:
        row["descriptions"] = [{"describer": "rule", "text": "kept"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    code, out, err = lc("archive", "add", play_id, "--into", base["run_id"], "--db", db, "--json")
    assert code == 0, err
    merged = json.loads(out)
    assert merged["elites"] == base["elites"] + merged["new_bds"] and merged["new_bds"] + merged["shorter"] <= 3
    assert path.read_text().splitlines()[0] == json.dumps(kept[0])  # the archive merged into is untouched
    merged_rows = {r["key"]: r for r in map(json.loads, Path(merged["archive"]).read_text().splitlines())}
    assert sum(r["policy"]["kind"] != "llm" for r in merged_rows.values()) == base["elites"] - merged["shorter"]
    assert all(r["descriptions"] == [{"describer": "rule", "text": "kept"}]
               for r in merged_rows.values() if r["policy"]["kind"] != "llm")  # kept rows are kept whole

    runs_before = len(reg.list_runs())
    code, _, err = lc("archive", "add", base["run_id"], "--db", db)
    assert code == 2 and "expected a play run" in err
    empty_scene_play = reg.create_run("play", params={"env": "grid", "actor": "tiny"})  # the default 4x4
    runs_before = len(reg.list_runs())
    code, _, err = lc("archive", "add", empty_scene_play, "--into", base["run_id"], "--db", db)
    assert code == 2 and "different scenes" in err and len(err.strip().splitlines()) == 1
    assert len(reg.list_runs()) == runs_before  # refused before any run was created


def test_a_row_whose_start_is_not_a_pose_fails_verify_in_words(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, out, err = lc("archive", "fill", "--scene", "flat", "--behaviours", "20", "--db", db, "--json")
    assert code == 0, err
    result = json.loads(out)
    path = Path(result["archive"])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["start"] = "(0, 0) facing east"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = lc("archive", "verify", result["run_id"], "--db", db, "--json")
    report = json.loads(out)
    assert code == 1 and [m["index"] for m in report["mismatches"]] == [0]
    assert "is not a pose" in report["mismatches"][0]["problem"]
