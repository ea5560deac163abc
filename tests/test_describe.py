"""Descriptions of archived trajectories: the rule describer is the order reference,
`mentioned_order` reads names as whole words, and `lactchain archive annotate|describe`
rewrite the archive file whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lactchain.archive.store import fill, read_rows
from lactchain.archive.describe import (LLM_PROMPT_VERSION, RULE_PROMPT_VERSION, describe_rule, mentioned_order,
                                order_correct, reference_order)
from lactchain.envs.scenes import get_scene
from lactchain.runs.registry import Registry
from lactchain.archive.trajectories import annotate

pytestmark = pytest.mark.usefixtures("one_thread")

FLAT = ("fridge", "bathtub", "sofa", "bed")


def test_the_rule_describer_always_gets_the_order_right():
    archive = fill("flat", 150, seed=0)
    rows = [t.as_dict() for t in archive.elites.values()]
    assert len(rows) > 50
    assert any(len(r["bd"]["visited"]) >= 2 for r in rows)
    for row in rows:
        text = describe_rule(row)
        assert order_correct(row, text), (text, reference_order(row))


def test_mentioned_order_on_hand_written_texts():
    assert mentioned_order("Passes the Sofa, then the SOFA again, then the bed.", FLAT) == ["sofa", "bed"]
    assert mentioned_order("bed, then the sofa, then the bed again", FLAT) == ["bed", "sofa", "bed"]
    # no match inside other words
    assert mentioned_order("the bedroom, a sofabed, two bathtubs and a fridges' door", FLAT) == []
    assert mentioned_order("the sofa bed", ("sofa", "sofa bed", "bed")) == ["sofa bed"]  # the longer name wins
    assert mentioned_order("anything", ()) == []


@pytest.fixture
def archive_run(tmp_path, lc):
    """(db, run id, archive file) of a small filled archive on the flat scene."""
    db = tmp_path / "registry.db"
    code, out, err = lc("archive", "fill", "--scene", "flat", "--behaviours", "60", "--db", db, "--json")
    assert code == 0, err
    result = json.loads(out)
    return db, result["run_id"], Path(result["archive"])


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_annotate_restores_annotations_at_relation_changes_only(archive_run, lc):
    db, run, path = archive_run
    rows = read_rows(path)
    victim = next(i for i, r in enumerate(rows) if len(r["annotations"]) >= 3)
    rows[victim]["annotations"] = rows[victim]["annotations"][:1] + [{"t": 1, "landmark": "bed", "relation": "at",
                                                                      "text": "at the bed"}]
    _write(path, rows)
    code, out, err = lc("archive", "annotate", run, "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out)["changed"] == 1
    fixed = read_rows(path)
    for row in fixed:
        scene = get_scene(row["env_kwargs"]["scene"])
        assert row["annotations"] == annotate(scene, row["path"])
        notes = row["annotations"]
        assert notes[0]["t"] == 0
        for a, b in zip(notes, notes[1:]):  # one entry per change, none where nothing changed
            assert (a["landmark"], a["relation"]) != (b["landmark"], b["relation"]) and a["t"] < b["t"]
            prev = row["path"][b["t"] - 1]
            assert scene.nearest_landmark((prev["x"], prev["y"])) == (a["landmark"], a["relation"])
    before = path.read_bytes()
    code, out, err = lc("archive", "annotate", run, "--db", db, "--json")
    assert code == 0 and json.loads(out)["changed"] == 0 and path.read_bytes() == before


def test_describe_with_the_rule_then_the_tiny_llm(archive_run, lc):
    db, run, path = archive_run
    code, out, err = lc("archive", "describe", run, "--db", db, "--json")
    assert code == 0, err
    report = json.loads(out)
    n = report["trajectories"]
    assert report["described"] == n and report["accuracy"] == 1.0 and report["prompt_version"] == RULE_PROMPT_VERSION
    code, out, err = lc("archive", "describe", run, "--model", "tiny", "--limit", "3", "--batch-size", "2",
                        "--max-new-tokens", "12", "--db", db, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["described"] == 3 and report["describer"] == "llm" and 0.0 <= report["accuracy"] <= 1.0
    rows = read_rows(path)
    for i, row in enumerate(rows):
        kinds = {(d["describer"], d["model"]): d for d in row["descriptions"]}
        assert ("rule", "rule") in kinds and kinds["rule", "rule"]["order_correct"] is True
        assert (("llm", "tiny") in kinds) == (i < 3)
    llm = next(d for d in rows[0]["descriptions"] if d["describer"] == "llm")
    assert llm["prompt_version"] == LLM_PROMPT_VERSION and isinstance(llm["text"], str)
    assert isinstance(llm["order_correct"], bool)
    # Describing again replaces the rule entry, the LLM's stays; --report describes nothing.
    code, out, err = lc("archive", "describe", run, "--db", db, "--json")
    assert code == 0, err
    assert [len(r["descriptions"]) for r in read_rows(path)] == [2, 2, 2] + [1] * (n - 3)
    before = path.read_bytes()
    code, out, err = lc("archive", "describe", run, "--report", "--db", db, "--json")
    assert code == 0 and path.read_bytes() == before
    table = {(e["describer"], e["model"]): e for e in json.loads(out)["describers"]}
    assert table["rule", "rule"]["described"] == n and table["rule", "rule"]["accuracy"] == 1.0
    assert table["llm", "tiny"]["described"] == 3 and "described" not in json.loads(out)
    code, out, err = lc("archive", "describe", run, "--report", "--db", db)
    assert code == 0 and "llm-v1" in out and "rule-v1" in out


def test_bad_input_is_one_line_and_leaves_the_archive_alone(archive_run, lc):
    db, run, path = archive_run

    def refused(*argv: str, says: str) -> None:
        before = path.read_bytes()
        code, _, err = lc("archive", *argv, "--db", db)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
        assert path.read_bytes() == before

    refused("describe", run, "--model", "no-such-model", says="unknown actor model 'no-such-model'")
    other = Registry(db).create_run("play")
    refused("describe", other, says="expected an archive run")
    refused("annotate", other, says="expected an archive run")
    rows = read_rows(path)
    rows[5]["env_kwargs"]["scene"]["landmarks"][0]["cells"] = [[99, 99]]  # a scene that no longer parses
    _write(path, rows)
    refused("annotate", run, says="row 5")
    refused("describe", run, says="outside the 8x8 grid")
    rows = read_rows(path)
    rows[5]["env_kwargs"]["scene"] = "flat"
    rows[7]["bd"]["visited"] = ["wardrobe"]
    _write(path, rows)
    refused("describe", run, says="unknown landmark 'wardrobe'")
    rows = read_rows(path)
    rows[7]["bd"]["visited"] = []
    rows[3]["start"] = "(0, 0) facing east"  # a start that is no pose: refused as an import refuses it
    _write(path, rows)
    refused("annotate", run, says="row 3")
    refused("describe", run, says="is not a pose")


def test_ctrl_c_while_an_llm_describes_leaves_the_old_file(archive_run, lc, monkeypatch):
    from lactchain.models.actor import Actor

    class Interrupted:
        name = "tiny"

        def generate(self, *args, **kwargs):
            raise KeyboardInterrupt

    monkeypatch.setattr(Actor, "load", classmethod(lambda cls, *a, **k: Interrupted()))
    db, run, path = archive_run
    before = path.read_bytes()
    code, _, err = lc("archive", "describe", run, "--model", "tiny", "--db", db)
    assert code == 130 and "archive file is unchanged" in err and path.read_bytes() == before


def test_the_accuracy_report_judges_each_description_again_not_its_stored_flag():
    """An imported dataset may claim `order_correct: true` for a wrong description: the
    report recomputes it from the text and the trajectory."""
    from lactchain.archive.store import fill
    from lactchain.archive.describe import accuracy_table, describe_rule

    archive = fill("flat", 60, seed=0)
    rows = [r for r in ({"key": k, **t.as_dict()} for k, t in archive.elites.items()) if len(r["bd"]["visited"]) >= 2][:4]
    assert rows
    for row in rows:
        right = describe_rule(row)
        names = list(reversed(row["bd"]["visited"]))
        wrong = "Passes " + ", then ".join(f"the {n}" for n in names) + "."
        row["descriptions"] = [
            {"describer": "rule", "model": "rule", "prompt_version": "v1", "text": right, "order_correct": False},
            {"describer": "llm", "model": "forged", "prompt_version": "v1", "text": wrong, "order_correct": True}]
    table = {(e["describer"], e["model"]): e for e in accuracy_table(rows)}
    assert table["rule", "rule"]["accuracy"] == 1.0 and table["llm", "forged"]["accuracy"] == 0.0
