"""A save that the disk refuses (here: a file size limit, as a full disk refuses) ends in
one OSError line naming the file and the fix, never torch's long RuntimeError."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_a_refused_checkpoint_write_is_one_line_naming_the_file(tmp_path):
    script = textwrap.dedent(f"""
        import resource, sys
        from lactchain.models.critic import Critic
        critic = Critic.load("tiny")
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # from here on no file grows past 4 KB
        try:
            critic.save({str(tmp_path / "critic")!r})
        except OSError as exc:
            print("OSError:", exc)
            sys.exit(3)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 3, out.stdout + out.stderr
    line = out.stdout.strip()
    assert "could not write the critic checkpoint" in line and "a full disk or a file size limit" in line
    assert "lactchain runs resume" in line and len(line.splitlines()) == 1


@pytest.mark.slow
def test_train_critic_on_a_full_disk_ends_in_one_line_and_a_failed_run(tmp_path, lc):
    """`ulimit -f` (what a full disk looks like to a process) at sizes that refuse the
    registry's -wal, the critic's weights or its optimizer state: always one line, exit 2,
    and the run is never left RUNNING. The episodes come from `play` in this process: a
    command that kept its registry open (and so its -wal, which the 64 KB limit then
    refuses before any run exists) fails this test."""
    import json

    from lactchain.runs.registry import Registry

    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    db = tmp_path / "r.db"
    code, out, err = lc("play", "--actor", "tiny", "-n", "8", "--start", "random", "--db", db, "--json")
    assert code == 0, err
    play_id = json.loads(out)["run_id"]
    for kb in (64, 128, 256):
        limit = f"import resource, sys, runpy; resource.setrlimit(resource.RLIMIT_FSIZE, ({kb * 1024}, {kb * 1024})); "
        res = subprocess.run([sys.executable, "-c", limit + "sys.argv = ['lactchain'] + sys.argv[1:]; "
                              "runpy.run_module('lactchain.cli', run_name='__main__')",
                              "train-critic", "--critic", "tiny", "-e", play_id, "--epochs", "2", "--db", str(db)],
                             capture_output=True, text=True, timeout=300, env=env)
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert res.returncode == 2 and "Traceback" not in res.stderr and "╭" not in res.stderr, (kb, res.stderr)
        assert len(errors) == 1 and ("a full disk" in errors[0]), (kb, res.stderr)
    code, out, err = lc("runs", "list", "--json", "--db", db)
    assert code == 0, err
    critics = [r for r in json.loads(out) if r["kind"] == "critic"]
    assert len(critics) == 3 and {r["status"] for r in critics} == {"FAILED"}, critics
    with Registry(db) as reg:
        assert all(reg.get_run(r["id"])["status"] == "FAILED" for r in critics)  # stored, not only shown


def test_a_run_folder_that_cannot_be_written_leaves_no_scheduled_run(tmp_path, monkeypatch, capsys):
    """`--detach` creates the run, then writes its config in the run's folder: when that
    folder cannot be made (here a file is in its place; a read-only or full disk alike),
    the refusal is one line and the SCHEDULED row is gone."""
    import uuid

    from cli_helpers import run_cli

    from lactchain.runs.registry import Registry

    db = tmp_path / "registry.db"
    Registry(db).close()
    monkeypatch.setattr("lactchain.runs.registry.uuid.uuid4", lambda: uuid.UUID(int=7 << 96))
    (tmp_path / "play-00000007").write_text("in the way")
    code, out, err = run_cli(["play", "--actor", "tiny", "--episodes", "1", "--db", db, "--detach"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write the job's config" in err, err
    with Registry(db) as reg:
        assert reg.list_runs() == []
