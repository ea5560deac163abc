"""`lactchain runs export`: a run's metrics and params into TensorBoard event files (read
back with TensorBoard's own reader) or CSV; bad input is one line and writes nothing."""

from __future__ import annotations

import csv
import json

import pytest

from lactchain.runs.registry import Registry


@pytest.fixture
def finished_run(tmp_path):
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        run_id = reg.create_run("actor", name="train-actor tiny", params={"loss": "simpo", "lr": 0.001, "epochs": 2,
                                                                          "pairs_from": ["pairs-1"]})
        reg.start_run(run_id)
        for step, loss in enumerate([0.9, 0.6, 0.4], start=1):
            reg.log_metrics(run_id, {"loss": loss, "margin": step * 0.5}, step=step)
        reg.set_tag(run_id, "note", "the lr sweep's best")
        reg.end_run(run_id, "FINISHED")
    return db, run_id


def test_tensorboard_export_has_every_logged_value_and_the_params(tmp_path, lc, finished_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    db, run_id = finished_run
    out = tmp_path / "exports"
    code, stdout, err = lc("runs", "export", run_id[:12], "--out", out, "--db", db, "--json")
    assert code == 0, err
    assert json.loads(stdout)["folders"] == [str(out / run_id)]
    events = EventAccumulator(str(out / run_id))
    events.Reload()
    assert {"loss", "margin"} <= set(events.Tags()["scalars"])
    assert [(e.step, round(e.value, 6)) for e in events.Scalars("loss")] == [(1, 0.9), (2, 0.6), (3, 0.4)]
    hparams = [p for p in (out / run_id).rglob("events.out.tfevents.*")]
    assert hparams  # the hparams summary sits beside the scalars
    text = b"".join(p.read_bytes() for p in hparams)
    assert b"simpo" in text and b"final/loss" in text and b"the lr sweep's best" in text  # the note: an hparams column
    # exported again (after more training, say): it replaces the folder's event files, no curve twice
    assert lc("runs", "export", run_id, "--out", out, "--db", db)[0] == 0
    assert len(list((out / run_id).rglob("events.out.tfevents.*"))) == len(hparams)
    again = EventAccumulator(str(out / run_id))
    again.Reload()
    assert [(e.step, round(e.value, 6)) for e in again.Scalars("loss")] == [(1, 0.9), (2, 0.6), (3, 0.4)]


def test_csv_export_and_one_line_refusals(tmp_path, lc, finished_run):
    db, run_id = finished_run
    out = tmp_path / "csv"
    code, _, err = lc("runs", "export", run_id, "--format", "csv", "--out", out, "--db", db)
    assert code == 0, err
    rows = list(csv.DictReader((out / run_id / "metrics.csv").open()))
    assert [(r["key"], int(r["step"]), float(r["value"])) for r in rows if r["key"] == "loss"] == [
        ("loss", 1, 0.9), ("loss", 2, 0.6), ("loss", 3, 0.4)]
    exported = json.loads((out / run_id / "params.json").read_text())
    assert exported["params"]["loss"] == "simpo" and exported["tags"]["note"] == "the lr sweep's best"
    for argv, message in ((["--format", "parquet"], "--format 'parquet': use one of tensorboard, csv"),
                          (["nope"], "no run with id 'nope'")):
        fresh = tmp_path / "fresh"
        args = argv if argv[0] == "nope" else [run_id, *argv]
        code, _, err = lc("runs", "export", *args, "--out", fresh, "--db", db)
        assert code != 0 and message in err and len(err.strip().splitlines()) == 1, err
        assert not fresh.exists()
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    code, _, err = lc("runs", "export", run_id, "--out", a_file, "--db", db)
    assert code != 0 and "is a file" in err
