"""The run registry on real SQLite files: round trips, rules, and concurrent writers."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lactchain.runs.registry import (
    AmbiguousRunId,
    Registry,
    RegistryFileError,
    RunNotFound,
)
from lactchain.runs.schema import SCHEMA_VERSION, TABLES


@pytest.fixture
def reg(tmp_path: Path):
    with Registry(tmp_path / "reg.db") as r:
        yield r


# -- file, schema, folders ---------------------------------------------------

def test_default_path_from_env_creates_parents(tmp_path, monkeypatch):
    db = tmp_path / "a" / "b" / "registry.db"
    monkeypatch.setenv("LACTCHAIN_DB", str(db))
    with Registry() as r:
        assert r.path == db
        assert db.exists()
        assert r.runs_dir == db.parent
        folder = r.run_dir("rollout-1234")
        assert folder == db.parent / "rollout-1234" and folder.is_dir()


def test_schema_version_wal_and_reopen(tmp_path):
    path = tmp_path / "reg.db"
    with Registry(path) as r:
        assert r.schema_version == SCHEMA_VERSION
        run_id = r.create_run("critic", params={"lr": 1e-4})
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_metrics_run_key_step", "idx_steps_run", "idx_steps_episode", "idx_pairs_run",
            "idx_pairs_labeler_status", "idx_runs_kind", "idx_runs_status"} <= indexes
    raw.close()
    with Registry(path) as again:  # re-opening runs no migration and keeps the data
        assert again.get_run(run_id)["kind"] == "critic"
        assert again.params(run_id) == {"lr": 1e-4}


def _schema_2_registry(path: Path) -> Path:
    """A registry as lactchain wrote it at schema 2 (strategy versions without an env), one version in it."""
    import sqlite_utils

    from lactchain.runs.schema import MIGRATIONS

    old = sqlite_utils.Database(path)
    for version in (1, 2):
        MIGRATIONS[version](old)
    old.execute("PRAGMA user_version = 2")
    old.execute("INSERT INTO prompts (version, text, created_ms, score) VALUES (1, 'Go east.', 1, 0.5)")
    old.conn.commit()
    old.close()
    return path


def test_a_registry_of_an_older_schema_is_upgraded_in_place_keeping_its_rows(tmp_path):
    """A registry written by an older lactchain opens with every row kept and the new column
    empty (such a version belongs to no env); the open that upgraded it says so (an older
    lactchain refuses it from then on), the next one does not, nor does a new registry."""
    path = _schema_2_registry(tmp_path / "reg.db")
    with Registry(path) as reg:
        assert reg.schema_version == SCHEMA_VERSION
        assert f"from schema 2 to {SCHEMA_VERSION}; a lactchain older than this one can no longer open it" in \
            reg.upgrade_note
        assert [(p["version"], p["text"], p["score"], p["env"]) for p in reg.prompts()] == [(1, "Go east.", 0.5, None)]
        assert reg.get_prompt(reg.save_prompt("Go north.", env="taxi"))["env"] == "taxi"
    with Registry(path) as again, Registry(tmp_path / "new.db") as new:
        assert again.upgrade_note is None and new.upgrade_note is None


def test_the_cli_and_the_console_say_when_they_upgraded_a_registry(tmp_path, capsys):
    from cli_helpers import run_cli
    from tui.app import check_db

    code, _, err = run_cli(["runs", "list", "--db", _schema_2_registry(tmp_path / "a.db")], capsys)
    assert code == 0 and "note: upgraded the registry" in err and "from schema 2" in err
    code, _, err = run_cli(["runs", "list", "--db", tmp_path / "a.db"], capsys)
    assert code == 0 and "upgraded" not in err
    notes: list[str] = []
    assert check_db(_schema_2_registry(tmp_path / "b.db"), explicit=True, notes=notes) is None
    assert len(notes) == 1 and "from schema 2" in notes[0]  # the console toasts it after its first paint


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "reg.db"
    Registry(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(RegistryFileError, match="newer"):
        Registry(path)


def test_another_applications_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    raw.execute("INSERT INTO invoices (total) VALUES (12.5)")
    raw.commit()
    raw.close()
    before = path.read_bytes()
    with pytest.raises(RegistryFileError, match="another application.*invoices"):
        Registry(path)
    assert path.read_bytes() == before
    assert not (tmp_path / "other.db-wal").exists()


# -- runs --------------------------------------------------------------------

def test_run_lifecycle_round_trip(reg):
    parent = reg.create_run("pipeline", name="iter 0")
    run_id = reg.create_run("rollout", name="r", parent_id=parent, cmd=["lactchain", "rollout", "--n", "4"],
                            params={"episodes": 8}, tags={"note": "first"})
    assert run_id.startswith("rollout-") and len(run_id) == len("rollout-") + 8
    run = reg.get_run(run_id)
    assert run["status"] == "SCHEDULED" and run["started_ms"] is None
    assert run["cmd"] == ["lactchain", "rollout", "--n", "4"]  # JSON decoded
    assert run["parent_id"] == parent

    reg.start_run(run_id, pid=1234, pgid=1234)
    reg.update_run(run_id, log_path=reg.run_dir(run_id) / "log.txt")
    hb = reg.get_run(run_id)["heartbeat_ms"]
    time.sleep(0.002)
    reg.heartbeat(run_id)
    run = reg.get_run(run_id)
    assert run["status"] == "RUNNING" and run["pid"] == 1234 and run["pgid"] == 1234
    assert run["heartbeat_ms"] > hb and run["log_path"].endswith(f"{run_id}/log.txt")

    reg.end_run(run_id, "FAILED", exit_code=1, error="boom")
    run = reg.get_run(run_id)
    assert (run["status"], run["exit_code"], run["error"]) == ("FAILED", 1, "boom")
    assert run["ended_ms"] >= run["started_ms"] >= run["created_ms"]

    with pytest.raises(ValueError, match="status"):
        reg.end_run(run_id, "RUNNING")
    with pytest.raises(ValueError, match="status"):
        reg.update_run(run_id, status="DONE")
    with pytest.raises(ValueError, match="unknown field 'colour'"):
        reg.update_run(run_id, colour="red")
    with pytest.raises(ValueError, match="kind"):
        reg.create_run("bad kind/../x")


def test_get_run_by_prefix_and_errors(reg):
    a = reg.create_run("critic")
    b = reg.create_run("critic")
    assert reg.get_run(a)["id"] == a
    prefix_a = next(a[:n] for n in range(len("critic-") + 1, len(a) + 1) if not b.startswith(a[:n]))
    assert reg.get_run(prefix_a)["id"] == a
    with pytest.raises(AmbiguousRunId, match="several runs"):
        reg.get_run("critic-")
    with pytest.raises(RunNotFound) as err:
        reg.get_run("nope-123")
    assert isinstance(err.value, KeyError)
    assert "nope-123" in str(err.value) and not str(err.value).startswith("'")
    # writes to an unknown run fail the same way, not with an IntegrityError
    for call in (lambda: reg.log_metric("nope", "x", 1.0), lambda: reg.log_params("nope", {"a": 1}),
                 lambda: reg.start_run("nope"), lambda: reg.add_steps("nope", [{"t": 0}])):
        with pytest.raises(RunNotFound):
            call()


def test_list_runs_filters_newest_first(reg):
    ids = [reg.create_run(kind) for kind in ("rollout", "critic", "rollout", "actor")]
    reg.start_run(ids[2])
    parent = ids[1]
    child = reg.create_run("rollout", parent_id=parent)
    assert [r["id"] for r in reg.list_runs()] == [child, *reversed(ids)]
    assert [r["id"] for r in reg.list_runs(kind="rollout")] == [child, ids[2], ids[0]]
    assert [r["id"] for r in reg.list_runs(status="RUNNING")] == [ids[2]]
    assert len(reg.list_runs(status=["RUNNING", "SCHEDULED"])) == 5
    assert [r["id"] for r in reg.list_runs(parent_id=parent)] == [child]
    assert len(reg.list_runs(limit=2)) == 2


def test_delete_run_cascades(reg):
    run_id = reg.create_run("rollout", params={"a": 1})
    reg.log_metric(run_id, "x", 1.0)
    ep = reg.add_episode(run_id, idx=0)
    reg.add_steps(run_id, [{"episode_id": ep, "t": 0}])
    reg.delete_run(run_id)
    assert all(n == 0 for n in reg.counts().values())


# -- params and tags ---------------------------------------------------------

def test_params_are_write_once_and_typed(reg):
    run_id = reg.create_run("actor", params={"beta": 2.0, "loss": "simpo", "layers": [1, 2]})
    reg.log_params(run_id, {"beta": 2.0, "layers": (1, 2), "seed": 7})  # same values again: fine
    assert reg.params(run_id) == {"beta": 2.0, "layers": [1, 2], "loss": "simpo", "seed": 7}
    with pytest.raises(ValueError, match="'beta'"):
        reg.log_params(run_id, {"gamma": 0.5, "beta": 10.0})
    assert "gamma" not in reg.params(run_id)  # the failed call wrote nothing


def test_tags_overwrite(reg):
    run_id = reg.create_run("actor", tags={"stage": "start"})
    reg.set_tag(run_id, "stage", "done")
    reg.set_tag(run_id, "epoch", 3)
    assert reg.tags(run_id) == {"epoch": "3", "stage": "done"}
    reg.set_tag(run_id, "epoch", None)
    assert reg.tags(run_id) == {"stage": "done"}


# -- metrics -----------------------------------------------------------------

def test_metrics_history_and_latest(reg):
    run_id = reg.create_run("critic")
    for v in (1.0, 0.5, 0.25):
        reg.log_metric(run_id, "loss", v)  # auto steps 0, 1, 2
    assert [(h["step"], h["value"]) for h in reg.metric_history(run_id, "loss")] == [(0, 1.0), (1, 0.5), (2, 0.25)]
    assert reg.latest_metrics(run_id) == {"loss": 0.25}

    assert reg.log_metrics(run_id, {"loss": np.float32(0.125), "acc": 0.9}) == {"loss": 3, "acc": 0}
    reg.log_metrics(run_id, {"loss": 0.1, "acc": 0.95}, step=10)
    assert reg.latest_metrics(run_id) == {"acc": 0.95, "loss": pytest.approx(0.1)}
    reg.log_metric(run_id, "loss", 9.0, step=4)  # a late, lower step stays in history only
    assert reg.latest_metrics(run_id)["loss"] == pytest.approx(0.1)
    assert [h["step"] for h in reg.metric_history(run_id, "loss")] == [0, 1, 2, 3, 4, 10]
    assert reg.log_metric(run_id, "loss", 0.05) == 11
    assert reg.metric_keys(run_id) == ["acc", "loss"]

    reg.log_metric(run_id, "nan", float("nan"))
    assert reg.latest_metrics(run_id)["nan"] is None

    before = reg.counts(run_id)["metrics"]
    with pytest.raises((TypeError, ValueError)):
        reg.log_metrics(run_id, {"ok": 1.0, "bad": "not a number"})
    assert reg.counts(run_id)["metrics"] == before  # one transaction: nothing from the batch


# -- artifacts ---------------------------------------------------------------

def test_artifacts(reg):
    run_id = reg.create_run("critic")
    folder = reg.run_dir(run_id)
    a1 = reg.add_artifact(run_id, "checkpoint", folder / "step-10", step=10, meta={"loss": 0.3})
    reg.add_artifact(run_id, "dataset", folder / "pairs.jsonl")
    a3 = reg.add_artifact(run_id, "checkpoint", folder / "step-20", step=20)
    assert isinstance(a1, int) and a3 > a1
    ckpts = reg.artifacts(run_id, kind="checkpoint")
    assert [a["step"] for a in ckpts] == [10, 20]
    assert ckpts[0]["meta"] == {"loss": 0.3} and ckpts[0]["path"] == str(folder / "step-10")
    assert len(reg.artifacts(run_id)) == 3
    assert reg.latest_artifact(run_id, "checkpoint")["id"] == a3
    assert reg.latest_artifact(run_id, "adapter") is None


# -- episodes and steps ------------------------------------------------------

def test_episodes_and_steps_round_trip(reg):
    run_id = reg.create_run("rollout")
    start = {"x": 0, "y": 0, "orientation": "east"}
    ep = reg.add_episode(run_id, idx=0, seed=11, start_state=start, optimal_moves=6, length=0)
    reg.update_episode(ep, **{"return": 0.9}, length=2, success=True, moves_used=7, parse_failures=0)
    ep2 = reg.add_episode(run_id, idx=1, return_=-1.0, success=np.bool_(False))
    steps = [
        {"episode_id": ep, "t": t, "state": {"x": t, "y": 0, "orientation": "east"}, "prompt": "p",
         "completion": "['move forward']", "moves": ["move forward"], "parse_mode": "strict",
         "reward": np.float64(-0.1), "next_state": {"x": t + 1, "y": 0, "orientation": "east"},
         "done": t == 1, "terminated": t == 1, "caption": "c", "seed": 11, "logprob": -1.5}
        for t in range(2)
    ]
    reg.add_steps(run_id, steps)
    reg.add_steps(run_id, [])  # nothing to do

    episodes = reg.episodes(run_id)
    assert [e["id"] for e in episodes] == [ep, ep2]
    assert episodes[0]["start_state"] == start and episodes[0]["return"] == 0.9
    assert episodes[0]["success"] is True and episodes[1]["success"] is False
    assert episodes[1]["return"] == -1.0

    got = reg.steps(episode_id=ep)
    assert [s["t"] for s in got] == [0, 1]
    assert got[0]["moves"] == ["move forward"] and got[0]["state"]["x"] == 0
    assert got[1]["next_state"] == {"x": 2, "y": 0, "orientation": "east"}
    assert got[0]["done"] is False and got[1]["done"] is True and got[1]["terminated"] is True
    assert got[0]["reward"] == pytest.approx(-0.1) and got[0]["logprob"] == -1.5
    assert reg.steps(run_id=run_id) == got and len(reg.steps()) == 2

    with pytest.raises(ValueError, match="unknown field 'rewrd'"):
        reg.add_steps(run_id, [{"rewrd": 1.0}])
    with pytest.raises(KeyError):
        reg.update_episode(12345, length=1)


# -- pairs -------------------------------------------------------------------

def test_pairs_round_trip_filters_and_updates(reg):
    run_a = reg.create_run("preferences")
    run_b = reg.create_run("preferences")
    state = {"x": 1, "y": 2, "orientation": "north"}
    ids = reg.add_pairs(run_a, [
        {"state": state, "prompt": "p", "chosen": ["move forward"], "rejected": ["turn left"],
         "chosen_score": 0.8, "rejected_score": 0.1, "labeler": "critic", "meta": {"k": 4}},
        {"state": state, "prompt": "p", "chosen": ["a"], "rejected": ["b"], "labeler": "human"},
    ])
    (id_b,) = reg.add_pairs(run_b, [{"chosen": ["x"], "rejected": ["y"], "labeler": "llm", "status": "tie"}])
    assert len(ids) == 2 and id_b not in ids

    first = reg.get_pair(ids[0])
    assert first["state"] == state and first["chosen"] == ["move forward"] and first["meta"] == {"k": 4}
    assert first["margin"] == pytest.approx(0.7) and first["status"] == "labeled"
    assert reg.get_pair(ids[1])["status"] == "pending"  # human pairs wait for a label

    assert [p["id"] for p in reg.pairs(run_ids=run_a)] == ids
    assert [p["id"] for p in reg.pairs(run_ids=[run_a, run_b])] == [*ids, id_b]
    assert [p["id"] for p in reg.pairs(labeler="human", status="pending")] == [ids[1]]
    assert [p["id"] for p in reg.pairs(status=["labeled", "tie"])] == [ids[0], id_b]

    before = reg.get_pair(ids[1])["updated_ms"]
    time.sleep(0.002)
    reg.update_pair(ids[1], status="labeled", chosen=["b"], rejected=["a"])
    updated = reg.get_pair(ids[1])
    assert updated["status"] == "labeled" and updated["chosen"] == ["b"] and updated["updated_ms"] > before

    with pytest.raises(ValueError, match="labeler"):
        reg.add_pairs(run_a, [{"labeler": "astrologer"}])
    with pytest.raises(ValueError, match="status"):
        reg.update_pair(ids[0], status="done")
    with pytest.raises(KeyError):
        reg.get_pair(999)
    with pytest.raises(KeyError):
        reg.update_pair(999, status="skipped")


# -- prompts -----------------------------------------------------------------

def test_prompt_versions(reg):
    assert reg.get_prompt() is None and reg.prompts() == []
    v1 = reg.save_prompt("Go north first.", template="{strategy}\n{state}", name="base")
    v2 = reg.save_prompt("Turn, then go.", parent_version=v1, note="edited in TUI")
    assert (v1, v2) == (1, 2)
    assert reg.get_prompt()["text"] == "Turn, then go."
    assert reg.get_prompt(1)["template"] == "{strategy}\n{state}"
    assert reg.get_prompt(2)["parent_version"] == 1
    assert [p["version"] for p in reg.prompts()] == [2, 1]
    assert reg.get_prompt(99) is None


def test_counts(reg):
    run_id = reg.create_run("rollout", params={"a": 1}, tags={"t": "x"})
    reg.log_metric(run_id, "m", 1.0)
    reg.save_prompt("s")
    counts = reg.counts()
    assert set(counts) == set(TABLES)
    assert counts["runs"] == counts["params"] == counts["tags"] == counts["metrics"] == counts["prompts"] == 1
    assert "prompts" not in reg.counts(run_id) and reg.counts(run_id)["latest_metrics"] == 1


# -- concurrency -------------------------------------------------------------

def test_threads_share_one_registry(reg):
    run_id = reg.create_run("rollout")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(100):
                reg.log_metric(run_id, "shared", float(i))
                reg.add_steps(run_id, [{"t": i, "seed": n}])
                reg.latest_metrics(run_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    steps = [h["step"] for h in reg.metric_history(run_id, "shared")]
    assert steps == list(range(400))  # auto steps never collide
    assert reg.counts(run_id)["steps"] == 400


_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from lactchain.runs.registry import Registry

    path, go, n, shared = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    while not go.exists():
        time.sleep(0.005)
    reg = Registry(path)  # may be the first to create the file and its schema
    own = reg.create_run("worker")
    for i in range(n):
        reg.log_metric(own, "loss", 1.0 / (i + 1))
        if shared != "-":
            reg.log_metric(shared, "loss", float(i))
        if i % 50 == 0:
            reg.save_prompt(f"{own} {i}")
    reg.end_run(own, "FINISHED", exit_code=0)
    print(own)
    """
)


def _spawn_writers(tmp_path: Path, db: Path, n: int, shared: str, count: int = 2) -> tuple[list, Path]:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, str(script), str(db), str(go), str(n), shared],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    return procs, go


def _finish(procs) -> list[str]:
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        ids.append(out.strip())
    return ids


def test_concurrent_writer_processes_on_a_fresh_file_lose_no_rows(tmp_path):
    db = tmp_path / "fresh" / "reg.db"
    procs, go = _spawn_writers(tmp_path, db, n=500, shared="-")
    go.touch()
    ids = _finish(procs)
    with Registry(db) as reg:
        assert reg.schema_version == SCHEMA_VERSION
        for run_id in ids:
            assert reg.get_run(run_id)["status"] == "FINISHED"
            assert [h["step"] for h in reg.metric_history(run_id, "loss")] == list(range(500))
            assert reg.latest_metrics(run_id) == {"loss": pytest.approx(1 / 500)}
        assert reg.counts()["metrics"] == 1000
        assert sorted(p["version"] for p in reg.prompts()) == list(range(1, 21))  # 2 x 10, no duplicates


def test_writers_and_a_reader_share_one_run(tmp_path):
    db = tmp_path / "reg.db"
    with Registry(db) as reg:
        shared = reg.create_run("shared")
        procs, go = _spawn_writers(tmp_path, db, n=500, shared=shared)
        go.touch()
        seen: list[int] = []
        while any(p.poll() is None for p in procs):  # read while they write
            seen.append(reg.counts(shared)["metrics"])
            reg.latest_metrics(shared)
            reg.list_runs()
            time.sleep(0.005)
        _finish(procs)
        assert seen == sorted(seen)  # a reader only ever sees committed, growing data
        assert len(set(seen)) > 2  # ... and it really read while they wrote
        history = reg.metric_history(shared, "loss")
        assert [h["step"] for h in history] == list(range(1000))  # auto steps unique across processes
        assert sorted(h["value"] for h in history) == sorted([float(i) for i in range(500)] * 2)
        assert reg.counts()["metrics"] == 2000


def test_json_columns_are_plain_json_in_the_file(reg):
    """Other tools (sqlite3 CLI, datasette, the TUI) read the same columns."""
    run_id = reg.create_run("rollout", cmd=["a", "b"])
    reg.add_pairs(run_id, [{"chosen": ["move forward"], "rejected": ["turn left"], "labeler": "critic"}])
    raw = sqlite3.connect(reg.path)
    assert json.loads(raw.execute("SELECT cmd FROM runs").fetchone()[0]) == ["a", "b"]
    assert json.loads(raw.execute("SELECT chosen FROM pairs").fetchone()[0]) == ["move forward"]
    raw.close()


# -- read-only media and full disks -------------------------------------------------------

def _registry_with_a_dead_run(path: Path) -> str:
    with Registry(path) as reg:
        run_id = reg.create_run("play", name="died")
        reg.start_run(run_id, pid=2**22 + 12345, pgid=0)  # no such process
        reg.log_metrics(run_id, {"loss": 1.0}, step=1)
    return run_id


def test_read_only_registry_lists_and_browses_without_writing(tmp_path):
    from lactchain.jobs import reap_dead_runs, show_dead

    path = tmp_path / "reg.db"
    run_id = _registry_with_a_dead_run(path)
    before = path.read_bytes()
    with Registry(path, readonly=True) as reg:
        dead = reap_dead_runs(reg)
        assert list(dead) == [run_id]
        shown = show_dead(reg.list_runs(), dead)
        assert shown[0]["status"] == "FAILED" and "died without reporting" in shown[0]["error"]
        assert reg.get_run(run_id)["status"] == "RUNNING"  # shown, not written
        assert reg.latest_metrics(run_id) == {"loss": 1.0}
        with pytest.raises(RegistryFileError, match="read-only"):
            reg.create_run("play")
        reg.run_dir(run_id)  # names the folder, creates nothing
    assert path.read_bytes() == before  # (SQLite may add its -shm/-wal lock files beside it)
    assert not (tmp_path / "reg.db-wal").exists() or not (tmp_path / "reg.db-wal").read_bytes()
    assert not (tmp_path / run_id).exists()


def test_runs_list_works_on_a_full_disk(tmp_path):
    """A process that may not grow any file (RLIMIT_FSIZE: what a full disk looks like
    to SQLite) still lists and shows runs, with the dead one as FAILED."""
    import subprocess
    import sys

    path = tmp_path / "reg.db"
    run_id = _registry_with_a_dead_run(path)
    with Registry(path) as reg:  # checkpoint the WAL so the db file holds everything
        reg._database().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    limit = "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1)); "
    cli = "from lactchain.cli import main; sys.argv = ['lactchain'] + sys.argv[1:]; main()"
    for args in (["runs", "list", "--json"], ["runs", "show", run_id, "--json"]):
        res = subprocess.run([sys.executable, "-c", limit + cli, *args, "--db", str(path)],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr
        assert "FAILED" in res.stdout and run_id in res.stdout
    from lactchain.jobs import reap_dead_runs

    with Registry(path) as reg:  # space is back: the next listing stores the mark
        assert reg.get_run(run_id)["status"] == "RUNNING"
        reap_dead_runs(reg)
        run = reg.get_run(run_id)
        assert run["status"] == "FAILED" and run["ended_ms"] == run["heartbeat_ms"]  # ended when last heard of


# -- files deleted under a live connection ------------------------------------------------

def test_a_deleted_wal_or_registry_is_put_back_from_the_open_connection(tmp_path):
    from lactchain.runs.lifecycle import registry_file_present

    path = tmp_path / "reg.db"
    reg = Registry(path)
    run_id = reg.create_run("play", name="kept")
    reg.log_metrics(run_id, {"loss": 2.0}, step=1)
    assert reg.restore_deleted_files() is None  # nothing wrong: nothing done
    Path(str(path) + "-wal").unlink()
    assert "-wal was deleted" in reg.restore_deleted_files()
    reg.log_metrics(run_id, {"loss": 1.0}, step=2)
    with Registry(path) as other:
        assert [m["value"] for m in other.metric_history(run_id, "loss")] == [2.0, 1.0]
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    assert "was deleted; restored it" in reg.restore_deleted_files()
    assert registry_file_present(reg)
    with Registry(path) as other:
        assert other.get_run(run_id)["name"] == "kept" and other.latest_metrics(run_id) == {"loss": 1.0}
    # replaced by somebody else's registry: left alone, and the job's warning check sees it
    reg_path_other = tmp_path / "other.db"
    Registry(reg_path_other).close()
    os.replace(reg_path_other, path)
    assert reg.restore_deleted_files() is None and not registry_file_present(reg)
    with Registry(path) as other:
        assert other.list_runs() == []
    reg.close()


def test_param_values_lists_one_param_across_runs_newest_first(tmp_path):
    with Registry(tmp_path / "r.db") as reg:
        old = reg.create_run("eval")
        reg.log_params(old, {"strategy_version": 1})
        other = reg.create_run("play")
        reg.log_params(other, {"strategy_version": 9})
        new = reg.create_run("eval")
        reg.log_params(new, {"strategy_version": 2, "states": 8})
        reg.create_run("eval")  # no such param: not listed
        reg.end_run(new, "FINISHED")
        assert reg.param_values("strategy_version", kind="eval") == [(new, 2), (old, 1)]
        assert reg.param_values("strategy_version", kind="eval", status="FINISHED") == [(new, 2)]
        assert reg.param_values("strategy_version") == [(new, 2), (other, 9), (old, 1)]


def test_opening_the_registry_does_not_import_pandas_and_pandas_still_imports():
    """sqlite-utils imports pandas when installed (~0.45 s of every CLI call, job process
    and console start) for a column type the registry never stores: the registry's import
    hides it, and pandas imports normally afterwards."""
    import subprocess
    import sys

    probe = ("import sys, tempfile, pathlib\n"
             "from lactchain.runs.registry import Registry\n"
             "with Registry(pathlib.Path(tempfile.mkdtemp()) / 'registry.db') as reg:\n"
             "    run = reg.create_run('play', params={'a': 1})\n"
             "    reg.log_metrics(run, {'x': 1.0}, step=1)\n"
             "    assert reg.latest_metrics(run) == {'x': 1.0}\n"
             "assert 'pandas' not in sys.modules, 'the registry imported pandas'\n"
             "import pandas\n"
             "print(pandas.DataFrame({'a': [1]}).shape)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 1)"
