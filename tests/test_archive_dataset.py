"""`lactchain archive export|import`: an archive run as a Hugging Face dataset and back,
losslessly; `datasets` reads the export; a truncated, miscounted or corrupted dataset
is refused in one line and creates no run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lactchain.archive.store import read_rows, write_rows
from lactchain.archive.dataset import DATA_FILE, MANIFEST_FILE, decode_row, encode_row, load
from lactchain.runs.registry import Registry


@pytest.fixture
def filled(tmp_path, lc):
    """(db, run id, rows): a small flat archive whose row 0 carries descriptions and an
    unknown key, and whose row 1 has a hand-written policy (a null, floats)."""
    db = tmp_path / "registry.db"
    code, out, err = lc("archive", "fill", "--scene", "flat", "--behaviours", "60", "--db", db, "--json")
    assert code == 0, err
    result = json.loads(out)
    rows = read_rows(result["archive"])
    rows[0]["descriptions"] = [{"describer": "rule", "model": "rule", "prompt_version": "v1",
                                "text": "It goes past the sofa.", "order_correct": True}]
    rows[0]["future_field"] = {"nested": [1, 2.5, None], "flag": False}
    rows[1]["policy"] = {"kind": "hand", "note": None, "weights": [0.1, 0.2]}
    write_rows(result["archive"], rows)
    return db, result["run_id"], rows


def runs(db: Path) -> int:
    return len(Registry(db).list_runs())


def test_row_codec_is_lossless_on_odd_values():
    row = {"key": "1,2|", "env": "grid", "env_kwargs": {"scene": "empty"}, "seed": None, "start": {"x": 0, "y": 0,
           "orientation": "east"}, "actions": [[]], "path": [{"x": 0, "y": 0, "orientation": "east", "z": 1}],
           "rewards": [0, 0.1], "bd": {}, "annotations": [], "descriptions": None, "other": [1, "a"]}
    record = encode_row(row)
    assert record["seed"] is None and record["path"] is None and record["rewards"] is None  # kept as JSON instead
    assert decode_row(record) == row


def test_export_import_round_trip_is_lossless(tmp_path, lc, filled):
    db, run, rows = filled
    out = tmp_path / "export"
    code, stdout, err = lc("archive", "export", run, out, "--db", db, "--json")
    assert code == 0, err
    exported = json.loads(stdout)
    assert exported["rows"] == len(rows) and (out / DATA_FILE).is_file()
    assert load(out) == rows

    from datasets import Dataset

    ds = Dataset.from_parquet(str(out / DATA_FILE), cache_dir=str(tmp_path / "hf"))
    assert ds.num_rows == len(rows) and ds.features["rewards"].feature.dtype == "float64"
    assert ds[0]["descriptions"][0]["describer"] == "rule" and ds[0]["bd"]["final"] == rows[0]["bd"]["final"]
    assert json.loads(ds[0]["env_kwargs_json"])["scene"]["name"] == "flat"
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "path: data/train-*" in card
    for text in ("`actions`", "`env_kwargs_json`", "`extra_json`", "| sofa |", f"- trajectories: {len(rows)}",
                 "distinct behaviour descriptors", "rule (rule)", "landmarks visited"):
        assert text in card, text
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["source_run"] == run and manifest["rows"] == len(rows) and len(manifest["sha256"]) == 64

    before = runs(db)
    code, stdout, err = lc("archive", "import", out, "--db", db, "--json")
    assert code == 0, err
    result = json.loads(stdout)
    assert result["trajectories"] == result["verified"] == len(rows) and result["source_run"] == run
    assert runs(db) == before + 1
    reg = Registry(db)
    assert reg.get_run(result["run_id"])["kind"] == "archive"
    assert reg.params(result["run_id"])["source_run"] == run
    assert read_rows(result["archive"]) == rows
    strip = lambda eps: [{k: e[k] for k in ("idx", "seed", "return", "length", "success")} for e in eps]  # noqa: E731
    assert strip(reg.episodes(result["run_id"])) == strip(reg.episodes(run))
    code, stdout, err = lc("archive", "verify", result["run_id"], "--db", db, "--json")
    assert code == 0 and json.loads(stdout)["verified_rate"] == 1.0

    code, _, err = lc("archive", "export", run, out, "--db", db)  # not empty: refused, then --force
    assert code == 2 and "not empty" in err and "--force" in err and len(err.strip().splitlines()) == 1
    code, _, err = lc("archive", "export", result["run_id"], out, "--db", db, "--force")
    assert code == 0, err
    assert load(out) == rows and json.loads((out / MANIFEST_FILE).read_text())["source_run"] == result["run_id"]


def _refused(lc, db: Path, out: Path, *needles: str) -> None:
    before = runs(db)
    code, stdout, err = lc("archive", "import", out, "--db", db)
    assert code == 2, (stdout, err)
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    assert runs(db) == before


def test_a_truncated_miscounted_or_corrupted_dataset_creates_no_run(tmp_path, lc, filled):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lactchain.runs.checkpoints import sha256_file

    db, run, rows = filled
    out = tmp_path / "export"
    assert lc("archive", "export", run, out, "--db", db)[0] == 0
    data, manifest_path = out / DATA_FILE, out / MANIFEST_FILE
    whole, manifest = data.read_bytes(), json.loads(manifest_path.read_text())

    data.write_bytes(whole[: len(whole) // 2])  # a truncated copy
    _refused(lc, db, out, "sha256", "truncated")

    data.write_bytes(whole)
    manifest_path.write_text(json.dumps({**manifest, "rows": manifest["rows"] + 3}))
    _refused(lc, db, out, f"holds {len(rows)} rows but the manifest says {len(rows) + 3}")

    table = pq.read_table(data)  # a resealed file whose row names a landmark the scene lacks
    victim = next(i for i, r in enumerate(rows) if r["bd"]["visited"])
    bds = table.column("bd").to_pylist()
    bds[victim]["visited"][0] = "attic"
    pq.write_table(table.set_column(table.column_names.index("bd"), table.schema.field("bd"),
                                     pa.array(bds, type=table.schema.field("bd").type)), data)
    manifest_path.write_text(json.dumps({**manifest, "sha256": sha256_file(data)}))
    _refused(lc, db, out, f"row {victim}", "'attic'", "unknown in scene 'flat'")

    manifest_path.unlink()
    _refused(lc, db, out, f"no {MANIFEST_FILE}")


def _reseal(data: Path, manifest_path: Path, manifest: dict, column: str, values: list) -> None:
    """Rewrite one column of the Parquet file and the manifest's sha256 to match (a crafted, self-consistent file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lactchain.runs.checkpoints import sha256_file

    table = pq.read_table(data)
    field = table.schema.field(column)
    pq.write_table(table.set_column(table.column_names.index(column), field, pa.array(values, type=field.type)),
                   data)
    manifest_path.write_text(json.dumps({**manifest, "sha256": sha256_file(data)}))


def _peak_rss_mb() -> float:
    """This process's peak resident memory so far (MB): flat means nothing big was allocated."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_crafted_dataset_is_refused_in_one_line_and_creates_no_run(tmp_path, lc, filled):
    """A dataset from the Hub is untrusted: links out of its folder, a manifest of the wrong
    shape, values a trajectory cannot hold, absurd nesting, duplicate behaviours and an
    empty dataset are all refused before any run exists."""
    import os
    import shutil

    import pyarrow.parquet as pq

    db, run, rows = filled
    out = tmp_path / "export"
    assert lc("archive", "export", run, out, "--db", db)[0] == 0
    data, manifest_path = out / DATA_FILE, out / MANIFEST_FILE
    whole, manifest = data.read_bytes(), json.loads(manifest_path.read_text())

    # the data file, or its folder, a link to a place outside the dataset
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(str(data), outside / data.name)
    os.symlink(outside / data.name, data)
    _refused(lc, db, out, "is a symbolic link", "refused")
    data.unlink()
    data_dir = data.parent
    shutil.move(str(data_dir), outside / "data")
    os.symlink(outside / "data", data_dir)
    (outside / "data" / data.name).write_bytes(whole)
    _refused(lc, db, out, "is a symbolic link")
    data_dir.unlink()
    shutil.move(str(outside / "data"), data_dir)

    for bad, needle in (({"format_version": -1}, "format version -1, not a version number"),
                        ({"scenes": "flat"}, "scenes must be a list of scene names"),
                        ({"scenes": {"flat": 1}}, "scenes must be a list of scene names"),
                        ({"scenes": [1, 2]}, "scenes must be a list of scene names"),
                        ({"rows": 0}, "holds no trajectories")):
        manifest_path.write_text(json.dumps({**manifest, **bad}))
        _refused(lc, db, out, needle)
    manifest_path.write_text(json.dumps(manifest))

    table = pq.read_table(data)
    seeds = table.column("seed").to_pylist()
    _reseal(data, manifest_path, manifest, "seed", [-5] + seeds[1:])
    _refused(lc, db, out, "row 0", "seed -5 is not a whole number >= 0")
    data.write_bytes(whole)
    rewards = table.column("rewards").to_pylist()
    _reseal(data, manifest_path, manifest, "rewards", [[float("nan")] + rewards[0][1:]] + rewards[1:])
    _refused(lc, db, out, "row 0", "rewards are not a list of finite numbers")
    data.write_bytes(whole)
    policies = table.column("policy_json").to_pylist()
    deep = "[" * 2000 + "]" * 2000
    _reseal(data, manifest_path, manifest, "policy_json", [deep] + policies[1:])
    _refused(lc, db, out, "row 0")
    data.write_bytes(whole)
    kwargs = table.column("env_kwargs_json").to_pylist()  # a scene of absurd size: refused at once, memory flat
    huge = json.loads(kwargs[0])
    huge["scene"]["size"] = 1_000_000
    _reseal(data, manifest_path, manifest, "env_kwargs_json", [json.dumps(huge)] + kwargs[1:])
    before, started = _peak_rss_mb(), time.perf_counter()
    _refused(lc, db, out, "row 0", "size must be at most 64, got 1000000")
    assert time.perf_counter() - started < 1.0 and _peak_rss_mb() - before < 50
    data.write_bytes(whole)
    keys = table.column("key").to_pylist()
    _reseal(data, manifest_path, manifest, "key", [keys[1]] + keys[1:])
    _refused(lc, db, out, "two rows hold the behaviour")
    data.write_bytes(whole)
    manifest_path.write_text(json.dumps(manifest))
    code, _, err = lc("archive", "import", out, "--db", db)
    assert code == 0, err  # the untouched dataset still imports
