"""`lactchain runs prune`: a finished run's trainer checkpoints (resume state, not results)
go, its adapter and everything else stay; a stopped run keeps them (it resumes from them)
until a resume of it finished; a refusal is one line that removes nothing. Real registry files; the folders as the
trainers lay them out (tests/test_train_actor.py prunes a real trainer's)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli
from lactchain.runs.registry import Registry


def _actor_run(reg: Registry, status: str, parent_id: str | None = None) -> str:
    """A train-actor run with its adapter and two recorded trainer checkpoints, 1000 bytes each."""
    run_id = reg.create_run("actor", name=f"a {status.lower()} one", parent_id=parent_id)
    folder = reg.run_dir(run_id)
    (folder / "adapter").mkdir(parents=True)
    (folder / "adapter" / "adapter_model.safetensors").write_bytes(b"a" * 500)
    reg.add_artifact(run_id, "adapter", folder / "adapter")
    for step in (4, 6):
        checkpoint = folder / "checkpoints" / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "optimizer.pt").write_bytes(b"o" * 1000)
        reg.add_artifact(run_id, "checkpoint", checkpoint, step=step)
    reg.end_run(run_id, status)
    return run_id


def test_prune_takes_finished_runs_checkpoints_and_keeps_their_adapters(tmp_path, capsys):
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        done, killed = _actor_run(reg, "FINISHED"), _actor_run(reg, "KILLED")
    code, out, err = run_cli(["runs", "du", "--db", db], capsys)
    assert code == 0 and "2.0 KB of it are trainer checkpoints no run resumes from" in " ".join(out.split())

    code, out, err = run_cli(["runs", "prune", "--dry-run", "--json", "--db", db], capsys)
    assert code == 0, err
    assert json.loads(out) == {"dry_run": True, "runs": [done], "bytes": 2000}
    assert (tmp_path / done / "checkpoints").is_dir()  # a dry run removes nothing
    code, _, err = run_cli(["runs", "prune", "--db", db], capsys)
    assert code == 2 and "needs a yes: add --yes" in err  # nobody to ask here
    code, out, err = run_cli(["runs", "prune", "--yes", "--db", db], capsys)
    assert code == 0, err
    assert "removed the checkpoints of 1 run, 2.0 KB; their adapters stay" in " ".join(out.split())
    with Registry(db) as reg:
        assert reg.artifacts(done, "checkpoint") == [] and reg.latest_artifact(done, "adapter") is not None
        assert len(reg.artifacts(killed, "checkpoint")) == 2  # the stopped run resumes from them
    assert not (tmp_path / done / "checkpoints").exists() and (tmp_path / done / "adapter").is_dir()
    assert (tmp_path / killed / "checkpoints" / "checkpoint-6").is_dir()

    code, out, _ = run_cli(["runs", "prune", "--yes", "--db", db], capsys)
    assert code == 0 and "nothing to prune" in out


def test_a_stopped_run_named_is_refused_and_a_linked_folder_loses_only_its_link(tmp_path, capsys):
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        done, killed = _actor_run(reg, "FINISHED"), _actor_run(reg, "KILLED")
    code, _, err = run_cli(["runs", "prune", killed, "--yes", "--db", db], capsys)
    assert code == 2 and f"{killed} is KILLED: its checkpoints are what `lactchain runs resume`" in " ".join(
        err.split())
    assert (tmp_path / killed / "checkpoints").is_dir()
    elsewhere = tmp_path / "kept-elsewhere"
    (tmp_path / done / "checkpoints").rename(elsewhere)
    (tmp_path / done / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    code, _, err = run_cli(["runs", "prune", done, "--yes", "--db", db], capsys)
    assert code == 0, err
    assert not (tmp_path / done / "checkpoints").exists() and (elsewhere / "checkpoint-6" / "optimizer.pt").is_file()


def test_a_stopped_run_whose_resume_finished_is_pruned_and_one_still_resuming_is_kept(tmp_path, capsys):
    """`runs resume` chains (KILLED -> FAILED -> FINISHED): once the last finished, nothing will
    resume from the earlier runs' checkpoints, so they go with the finished run's. A chain
    whose newest resume stopped too keeps every checkpoint in it."""
    from lactchain.runs.resume import RESUMES_TAG

    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        first = _actor_run(reg, "KILLED")
        second = _actor_run(reg, "FAILED", parent_id=first)
        last = _actor_run(reg, "FINISHED", parent_id=second)
        reg.set_tag(second, RESUMES_TAG, first)
        reg.set_tag(last, RESUMES_TAG, second)
        stopped, still = _actor_run(reg, "KILLED"), _actor_run(reg, "KILLED")
        reg.set_tag(still, RESUMES_TAG, stopped)
    code, out, err = run_cli(["runs", "prune", "--dry-run", "--json", "--db", db], capsys)
    assert code == 0, err
    assert sorted(json.loads(out)["runs"]) == sorted([first, second, last])
    code, _, err = run_cli(["runs", "prune", first, "--yes", "--db", db], capsys)
    assert code == 0, err
    assert not (tmp_path / first / "checkpoints").exists() and (tmp_path / second / "checkpoints").is_dir()
    code, _, err = run_cli(["runs", "resume", first, "--db", db], capsys)  # what it left is the finished run
    assert code == 2 and f"run {first} was resumed to the end by {last}" in " ".join(err.split())
    code, _, err = run_cli(["runs", "prune", stopped, "--yes", "--db", db], capsys)
    assert code == 2 and f"{stopped} is KILLED" in err and (tmp_path / stopped / "checkpoints").is_dir()


def test_a_run_resumed_twice_keeps_its_checkpoints_while_one_resume_is_unfinished(tmp_path, capsys):
    """A KILLED run resumed once to the end and once more, the second killed before its
    first save: that second resume reads the first run's checkpoints (its lineage), so
    they stay until it, too, finished."""
    from lactchain.runs.resume import RESUMES_TAG, latest_checkpoint

    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        first, finished = _actor_run(reg, "KILLED"), _actor_run(reg, "FINISHED")
        again = reg.create_run("actor", name="resumed again, killed before a save", parent_id=first)
        reg.end_run(again, "KILLED")
        for resume in (finished, again):
            reg.set_tag(resume, RESUMES_TAG, first)
    code, out, err = run_cli(["runs", "prune", "--dry-run", "--json", "--db", db], capsys)
    assert code == 0, err
    assert json.loads(out)["runs"] == [finished]
    code, _, err = run_cli(["runs", "prune", "--yes", "--db", db], capsys)
    assert code == 0, err
    with Registry(db) as reg:
        assert latest_checkpoint(reg, again)["path"].endswith("checkpoint-6")


def test_a_run_something_still_resumes_from_keeps_its_checkpoints(tmp_path, capsys):
    """`train-actor --resume-from R` of a finished run, scheduled or stopped before its
    first save, reads R's checkpoints (its lineage): R keeps them, by name a one-line
    refusal. A run resumed while the question waited is refused then, nothing removed;
    a prefix and the full id name one run once."""
    from lactchain.runs.prune import plan_prune, prune_checkpoints

    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        read, free = _actor_run(reg, "FINISHED"), _actor_run(reg, "FINISHED")
        reg.create_run("actor", params={"resume": read})  # SCHEDULED: it will load read's checkpoints
        by_path = _actor_run(reg, "FINISHED")  # `--resume-from runs/<id>/checkpoints/checkpoint-6`, stopped
        stopped = reg.create_run("actor", params={"resume": str(tmp_path / by_path / "checkpoints" / "checkpoint-6")})
        reg.end_run(stopped, "KILLED")
    code, out, err = run_cli(["runs", "prune", "--dry-run", "--json", "--db", db], capsys)
    assert code == 0, err
    assert json.loads(out)["runs"] == [free]
    code, _, err = run_cli(["runs", "prune", read, "--yes", "--db", db], capsys)
    assert code == 2 and "a run not yet finished resumes from its checkpoints" in " ".join(err.split())
    code, out, err = run_cli(["runs", "prune", free[:-2], free, "--dry-run", "--json", "--db", db], capsys)
    assert code == 0 and json.loads(out)["runs"] == [free], err
    with Registry(db) as reg:
        plan = plan_prune(reg, [free])
        reg.create_run("actor", params={"resume_from": free})  # the console's R while the question waited
        with pytest.raises(ValueError, match="it changed since the plan; nothing was removed"):
            prune_checkpoints(reg, plan)
        assert len(reg.artifacts(free, "checkpoint")) == 2 and (tmp_path / free / "checkpoints").is_dir()


def test_a_stopped_pipeline_phase_gives_up_its_checkpoints(tmp_path, capsys):
    """A pipeline's resume redoes its unfinished phase from its seeds and a phase is never
    resumed alone: a KILLED phase's trainer checkpoints (older pipelines saved them) are
    dead weight and go; a KILLED run of its own keeps them."""
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        pipeline = reg.create_run("pipeline")
        reg.end_run(pipeline, "KILLED")
        phase, alone = _actor_run(reg, "KILLED", parent_id=pipeline), _actor_run(reg, "KILLED")
    code, out, err = run_cli(["runs", "prune", "--dry-run", "--json", "--db", db], capsys)
    assert code == 0, err
    assert json.loads(out)["runs"] == [phase]
    assert alone not in out
