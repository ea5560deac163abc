"""`lactchain runs delete`: a registry's runs and their folders go only when nothing that
stays needs them -- never a running run, never a child left without its parent unless
asked (--children), never a run a kept run reads unless forced (--force) -- and a refusal
is one line that deletes nothing. Real registry files, real runs made by the CLI."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from cli_helpers import run_cli
from lactchain.runs.delete import delete_runs, plan_delete
from lactchain.runs.registry import Registry, RunNotFound


def _cli(capsys, *args):
    return run_cli(list(args), capsys)


def _ids(db: Path) -> set[str]:
    with Registry.open_for_reading(db) as reg:
        return {r["id"] for r in reg.list_runs()}


def _tree(db: Path) -> dict[str, str]:
    """A finished pipeline with two phases (one of them resumed once), each with a folder of files,
    and a FAILED run apart."""
    with Registry(db) as reg:
        ids = {"pipeline": reg.create_run("pipeline", name="loop")}
        ids["critic"] = reg.create_run("critic", parent_id=ids["pipeline"])
        ids["actor"] = reg.create_run("actor", parent_id=ids["pipeline"])
        ids["resumed"] = reg.create_run("actor", parent_id=ids["actor"], params={"resume_from": ids["actor"]})
        ids["failed"] = reg.create_run("eval", name="a failed one")
        for name, run_id in ids.items():
            reg.log_metric(run_id, "loss", 1.0)
            (reg.run_dir(run_id) / "weights.bin").write_bytes(b"x" * 1000)
            reg.end_run(run_id, "FAILED" if name == "failed" else "FINISHED")
        reg.add_pairs(ids["failed"], [{"chosen": ["forward"], "rejected": ["left"], "labeler": "human",
                                       "status": "labeled"}])
    return ids


def test_a_pipeline_goes_with_its_children_only_when_asked_and_a_dry_run_deletes_nothing(tmp_path, capsys):
    db = tmp_path / "registry.db"
    ids = _tree(db)
    before = _ids(db)

    code, _, err = _cli(capsys, "runs", "delete", ids["pipeline"], "--yes", "--db", db)
    assert code == 2 and "3 child run(s) would be left without their parent" in err and "--children" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = _cli(capsys, "runs", "delete", ids["pipeline"], "--children", "--dry-run", "--json", "--db", db)
    assert code == 0, err
    dry = json.loads(out)
    assert dry["dry_run"] and set(dry["runs"]) == {ids[k] for k in ("pipeline", "critic", "actor", "resumed")}
    assert dry["bytes"] == 4000
    assert _ids(db) == before and all((tmp_path / i / "weights.bin").exists() for i in ids.values())

    code, out, err = _cli(capsys, "runs", "delete", ids["pipeline"], "--children", "--yes", "--db", db)
    assert code == 0, err
    assert "deleted 4 runs, freed 3.9 KB" in out
    assert _ids(db) == {ids["failed"]}
    assert not any((tmp_path / ids[k]).exists() for k in ("pipeline", "critic", "actor", "resumed"))
    assert (tmp_path / ids["failed"] / "weights.bin").exists()
    with Registry.open_for_reading(db) as reg:
        assert reg.counts()["metrics"] == 1  # the kept run's; the deleted runs' rows went with them


def test_status_picks_runs_and_a_command_nobody_can_answer_needs_yes(tmp_path, capsys):
    db = tmp_path / "registry.db"
    ids = _tree(db)
    code, _, err = _cli(capsys, "runs", "delete", "--status", "failed", "--db", db)
    assert code == 2 and "needs a yes: add --yes" in err  # pytest's stdin is not a terminal: nobody to ask
    assert "1 pair(s) labelled by hand" in err  # the work a person did is named before it goes
    assert ids["failed"] in _ids(db)
    code, out, err = _cli(capsys, "runs", "delete", "--status", "FAILED", "--yes", "--json", "--db", db)
    assert code == 0, err
    assert json.loads(out)["runs"] == [ids["failed"]] and ids["failed"] not in _ids(db)
    assert ids["pipeline"] in _ids(db)
    for args, says in ((["--status", "RUNNING"], "stopped with `lactchain runs kill`"),
                       (["--status", "GONE"], "--status 'GONE': use one of"),
                       (["--kind", "actor"], "give --status too"),
                       ([], "name the runs to delete"),
                       (["--status", "KILLED"], "no KILLED runs"),
                       (["nosuch"], "no run with id 'nosuch'")):
        code, _, err = _cli(capsys, "runs", "delete", *args, "--yes", "--db", db)
        assert code == 2 and says in err, (args, err)
    assert len(_ids(db)) == 4


def test_a_run_that_a_kept_run_reads_goes_only_with_force(tmp_path, capsys):
    """A judge run reads its collect run's episodes (`judge --from`): deleting the collect
    run would leave the judge run pointing at nothing."""
    db = tmp_path / "registry.db"
    code, out, err = _cli(capsys, "collect", "--episodes", "6", "--db", db, "--json")
    assert code == 0, err
    collect = next(i for i in _ids(db) if i.startswith("collect-"))
    code, out, err = _cli(capsys, "judge", "--from", collect, "--pairs", "2", "--db", db, "--json")
    assert code == 0, err
    judge = next(i for i in _ids(db) if i.startswith("judge-"))
    code, _, err = _cli(capsys, "runs", "delete", collect, "--yes", "--db", db)
    assert code == 2 and f"{judge} reads {collect}" in err and "--force" in err
    assert collect in _ids(db)
    code, _, err = _cli(capsys, "runs", "delete", collect, judge, "--yes", "--db", db)  # both together: nobody left reading
    assert code == 0, err
    assert _ids(db) == set()


def test_a_running_run_is_never_deleted_and_a_dead_one_is(tmp_path, capsys):
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        live = reg.create_run("play")
        reg.start_run(live, pid=os.getpid())  # this process: alive
        dead = reg.create_run("play")
        reg.start_run(dead, pid=2**22 + 12345)  # beyond pid_max: no such process
    code, _, err = _cli(capsys, "runs", "delete", live, "--yes", "--db", db)
    assert code == 2 and f"{live} is still running: stop it first" in err
    code, _, err = _cli(capsys, "runs", "delete", dead, "--yes", "--db", db)
    assert code == 0, err  # reaped as FAILED first, then deleted
    assert _ids(db) == {live}


def test_a_hostile_id_or_a_linked_folder_never_takes_anything_outside_its_run(tmp_path):
    """Ids come from the registry file: one that reads `..` or the registry's own name
    deletes its rows only; a run folder that is a link loses the link, not its target."""
    db = tmp_path / "lab" / "registry.db"
    db.parent.mkdir()
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    with Registry(db) as reg:
        linked = reg.create_run("actor")
        folder = reg.run_dir(linked)
        folder.rmdir()
        folder.symlink_to(outside, target_is_directory=True)
        reg.end_run(linked, "FINISHED")
    with sqlite3.connect(db) as con:  # rows no lactchain command writes
        for hostile in ("..", "registry.db"):
            con.execute("INSERT INTO runs (id, kind, status, created_ms) VALUES (?, 'actor', 'FINISHED', 1)", [hostile])
    with Registry(db) as reg:
        plan = plan_delete(reg, ["..", "registry.db", linked])
        assert plan.folders == (db.parent / linked,) and plan.size_bytes == 0
        assert plan.problem(children=False, force=False) is None
        assert delete_runs(reg, plan) == []
        assert not (db.parent / linked).exists() and (outside / "keep.txt").read_text() == "mine"
        assert db.exists() and not reg.list_runs()
        with pytest.raises(RunNotFound):
            plan_delete(reg, [linked])


def test_du_lists_the_biggest_run_folders_first_with_the_total(tmp_path, capsys):
    db = tmp_path / "registry.db"
    ids = _tree(db)
    (tmp_path / ids["critic"] / "checkpoint.bin").write_bytes(b"c" * 5000)
    code, out, err = _cli(capsys, "runs", "du", "-n", "2", "--json", "--db", db)
    assert code == 0, err
    usage = json.loads(out)
    assert usage["total_bytes"] == 10000 and [r["id"] for r in usage["runs"]][0] == ids["critic"]
    assert [r["bytes"] for r in usage["runs"]] == [6000, 1000]
    code, out, err = _cli(capsys, "runs", "du", "--db", db)
    assert code == 0 and ids["critic"] in out and "5 runs, 9.8 KB in their folders" in out


def test_a_stopped_pipelines_phases_are_read_by_its_resume(tmp_path, capsys):
    """A killed pipeline goes on from its finished phases (`runs resume`: their critic
    checkpoint, adapter, elites), and a running one does as it goes: deleting one alone
    would break it, so it asks for --force; a finished pipeline's phases are history,
    deleted when asked."""
    db = tmp_path / "registry.db"
    ids = _tree(db)
    with Registry(db) as reg:
        stopped = reg.create_run("pipeline", name="stopped", cmd=["lactchain", "pipeline"])
        phase = reg.create_run("critic", parent_id=stopped)
        reg.end_run(phase, "FINISHED")
        reg.end_run(stopped, "KILLED")
    code, _, err = _cli(capsys, "runs", "delete", phase, "--yes", "--db", db)
    assert code == 2 and f"{stopped} reads {phase}" in err and "add --force" in err
    assert phase in _ids(db)
    code, _, err = _cli(capsys, "runs", "delete", ids["critic"], "--yes", "--db", db)  # the finished pipeline's
    assert code == 0, err
    code, _, err = _cli(capsys, "runs", "delete", phase, "--force", "--yes", "--db", db)
    assert code == 0, err
    assert phase not in _ids(db) and stopped in _ids(db)
    with Registry(db) as reg:  # what a resume does not go on from: a resume of it, a comparison's cell
        resume = reg.create_run("pipeline", parent_id=stopped, cmd=["lactchain", "pipeline"])
        reg.set_tag(resume, "resumes", stopped)
        comparison = reg.create_run("pipeline", params={"compare": "rft,dpo"},
                                    cmd=["lactchain", "bench", "learn", "--compare", "rft,dpo"])
        cell = reg.create_run("pipeline", parent_id=comparison)
        for run_id, status in ((resume, "FAILED"), (cell, "FINISHED"), (comparison, "KILLED")):
            reg.end_run(run_id, status)
        assert plan_delete(reg, [resume, cell]).used_by == {}
        running = reg.create_run("pipeline", cmd=["lactchain", "pipeline"])  # its next phase reads the critic
        reg.start_run(running, pid=os.getpid())
        fitted = reg.create_run("critic", parent_id=running)
        reg.end_run(fitted, "FINISHED")
        assert plan_delete(reg, [fitted]).used_by == {running: (fitted,)}


def test_a_pipeline_whose_phase_was_deleted_by_force_is_refused_on_resume_before_any_run(tmp_path, capsys):
    """The phase's folder held the adapter the stopped pipeline goes on from: `runs resume`
    says so in one line and starts nothing (it used to start a run that failed on loading)."""
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        stopped = _pipeline_job(reg)
        phase = reg.create_run("actor", parent_id=stopped)
        adapter = reg.run_dir(phase) / "adapter"
        adapter.mkdir()
        reg.add_artifact(phase, "adapter", adapter)
        reg.end_run(phase, "FINISHED")
        _stop_with_state(reg, stopped, {"phases": [], "adapter": str(adapter)})
        reg.add_artifact(stopped, "adapter", adapter)  # as the loop names its adapter
        assert plan_delete(reg, [phase]).used_by == {stopped: (phase,)}  # two reasons, named once
    code, _, err = _cli(capsys, "runs", "delete", phase, "--force", "--yes", "--db", db)
    assert code == 0, err
    code, _, err = _cli(capsys, "runs", "resume", stopped, "--db", db)
    assert code == 2 and f"its actor adapter {adapter} is gone" in " ".join(err.split())
    assert len(err.strip().splitlines()) <= 2 and "Traceback" not in err
    assert _ids(db) == {stopped}  # no resume run was made


def test_a_pipeline_whose_collect_phase_was_deleted_by_force_is_refused_on_resume(tmp_path, capsys):
    """Stopped between collect and train-actor, a pipeline's resume trains on the collect
    run's pairs: with that run deleted it trained on none and skipped the iteration's
    training without a word; now `runs resume` says so in one line and starts nothing."""
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        stopped = _pipeline_job(reg)
        collect = reg.create_run("pairs", parent_id=stopped)
        reg.end_run(collect, "FINISHED")
        _stop_with_state(reg, stopped, {"phases": [{"iteration": 1, "phase": "collect", "wall_s": 1.0}],
                                        "pending": {"iteration": 1, "pairs_run": collect, "transitions": []}})
    code, _, err = _cli(capsys, "runs", "delete", collect, "--force", "--yes", "--db", db)
    assert code == 0, err
    code, _, err = _cli(capsys, "runs", "resume", stopped, "--db", db)
    assert code == 2 and f"the pairs its iteration 1 trains on (collect run {collect}) are gone" in " ".join(
        err.split())
    assert _ids(db) == {stopped}  # no resume run was made


def _pipeline_job(reg: Registry) -> str:
    """A pipeline run of the job table (its config saved, as a detached one has), not started."""
    from lactchain.jobs import launch
    from lactchain.jobs.table import BY_COMMAND

    job = BY_COMMAND["pipeline"]
    config, params = launch.checked_config(reg, job, {"actor": "tiny", "critic": "tiny"})
    run_id = reg.create_run("pipeline", params=params, cmd=["lactchain", "pipeline"])
    launch.save_config(reg.run_dir(run_id), job, config)
    return run_id


def _stop_with_state(reg: Registry, run_id: str, state: dict) -> None:
    """The pipeline stopped (KILLED) with this saved loop state, as its resume reads it."""
    from lactchain.loop.bookkeeping import STATE_FILE, STATE_KIND

    path = reg.run_dir(run_id) / STATE_FILE
    path.write_text(json.dumps(state))
    reg.add_artifact(run_id, STATE_KIND, path)
    reg.end_run(run_id, "KILLED")
