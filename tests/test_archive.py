"""The trajectory archive: exact reachable BDs, MAP-Elites fill coverage, and
`lactchain archive fill|verify` on a real registry (a corrupted row is caught)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lactchain.archive import fill, reachable_bds
from lactchain.envs.scenes import get_scene
from lactchain.registry import Registry


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


@pytest.fixture
def lc(capsys):
    from cli_helpers import run_cli

    return lambda *argv: run_cli([str(a) for a in argv], capsys)


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
