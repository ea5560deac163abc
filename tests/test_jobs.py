"""Detached jobs as real subprocesses: outlive the launcher, SIGTERM -> KILLED,
kill -9 -> FAILED on the next read, a crash -> FAILED with its traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pathlib import Path

from lactchain.jobs import pid_alive, reap_dead_runs
from lactchain.runs.registry import Registry

from cli_helpers import wait_until


def lactchain(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "lactchain.cli", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli(capsys):
    """The launcher and the control commands (runs kill / resume) in this process; the
    jobs they start stay real detached subprocesses (an interpreter start each costs ~3 s)."""
    from types import SimpleNamespace

    from cli_helpers import run_cli

    def run(*args):
        code, out, err = run_cli(list(args), capsys)
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


def wait_for(predicate, timeout=90.0, every=0.2):  # noqa: ANN001, ANN201
    return wait_until(predicate, timeout, every)


# A long job that starts in ~1 s: Blackjack episodes of the random policy, a step row each. The run's
# lifecycle is under test, not what it plays (a tiny-actor play paid ~8 s of torch and transformers
# imports per launch; play itself runs detached in test_job_layer and the console's tests).
LONG_JOB = ("collect", "--episodes", "1000000")


def launch_long_job(cli, db):
    res = cli(*LONG_JOB, "--db", str(db), "--detach", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["run_id"]


def test_detached_job_outlives_launcher_then_sigterm_marks_killed(tmp_path, cli):
    db = tmp_path / "registry.db"
    t0 = time.time()
    run_id = launch_long_job(cli, db)
    assert time.time() - t0 < 60  # the launcher returned without waiting for the job
    reg = Registry(db)
    run = wait_for(lambda: (r := reg.get_run(run_id))["status"] == "RUNNING" and r)
    assert pid_alive(run["pid"]) and run["pgid"] == run["pid"]  # own session, launcher gone
    assert os.getsid(run["pid"]) == run["pid"]
    wait_for(lambda: len(reg.steps(run_id=run_id)) > 0)  # it is really playing
    log = (tmp_path / run_id / "log.txt")
    assert log.exists()
    res = cli("runs", "kill", run_id, "--wait", "60", "--db", str(db))
    assert res.returncode == 0, res.stderr
    final = wait_for(lambda: (r := reg.get_run(run_id))["status"] != "RUNNING" and r)
    assert final["status"] == "KILLED"
    wait_for(lambda: not pid_alive(run["pid"]))


def test_kill_dash_nine_is_failed_on_next_read(tmp_path, cli):
    db = tmp_path / "registry.db"
    run_id = launch_long_job(cli, db)
    reg = Registry(db)
    run = wait_for(lambda: (r := reg.get_run(run_id))["status"] == "RUNNING" and r)
    os.killpg(run["pgid"], signal.SIGKILL)
    wait_for(lambda: not pid_alive(run["pid"]))
    assert reg.get_run(run_id)["status"] == "RUNNING"  # nobody said anything yet
    listed = json.loads(cli("runs", "list", "--json", "--db", str(db)).stdout)
    row = next(r for r in listed if r["id"] == run_id)
    assert row["status"] == "FAILED"
    assert "died without reporting" in row["error"]


def test_crash_is_failed_with_traceback(tmp_path, cli):
    db = tmp_path / "registry.db"
    broken = tmp_path / "no-such-model"  # looks like a model folder, fails to load inside the job
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    res = cli("play", "--actor", str(broken), "--db", str(db), "--detach", "--json")
    run_id = json.loads(res.stdout)["run_id"]
    reg = Registry(db)
    run = wait_for(lambda: (r := reg.get_run(run_id))["status"] in ("FAILED", "FINISHED") and r)
    assert run["status"] == "FAILED"
    assert "Traceback" in run["error"] and "tokenizer" in run["error"]
    wait_for(lambda: not pid_alive(run["pid"]))
    assert "tokenizer" in (tmp_path / run_id / "log.txt").read_text()  # the one-line error; the run keeps the traceback


def test_scheduled_run_that_never_started_is_reaped(tmp_path):
    reg = Registry(tmp_path / "r.db")
    run_id = reg.create_run("play")
    assert list(reap_dead_runs(reg, never_started_after_s=3600)) == []
    assert list(reap_dead_runs(reg, never_started_after_s=0)) == [run_id]
    assert reg.get_run(run_id)["status"] == "FAILED"


@pytest.mark.slow
def test_killed_critic_training_resumes_from_its_checkpoint(tmp_path, cli):
    db = tmp_path / "registry.db"
    play = cli("play", "--actor", "tiny", "--episodes", "24", "--envs", "8", "--start", "random",
               "--max-actions", "4", "--free", "--temperature", "1.0", "--db", str(db), "--json")
    assert play.returncode == 0, play.stderr
    play_id = json.loads(play.stdout)["run_id"]
    res = cli("train-critic", "--episodes-from", play_id, "--critic", "tiny", "--epochs", "500",
              "--batch-size", "16", "--db", str(db), "--detach", "--json")
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run_id"]
    reg = Registry(db)
    wait_for(lambda: len(reg.artifacts(run_id, "critic")) >= 2, timeout=120)
    assert cli("runs", "kill", run_id, "--wait", "60", "--db", str(db)).returncode == 0
    assert reg.get_run(run_id)["status"] == "KILLED"
    last_step = reg.latest_artifact(run_id, "critic")["step"]

    res = cli("runs", "resume", run_id, "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    new_id = json.loads(res.stdout)["run_id"]
    assert reg.get_run(new_id)["parent_id"] == run_id
    first = wait_for(lambda: reg.artifacts(new_id, "critic"), timeout=120)
    # The resumed run's first checkpoint comes after the killed run's last one.
    assert min(a["step"] for a in first) > last_step >= 1
    assert cli("runs", "kill", new_id, "--wait", "60", "--db", str(db)).returncode == 0
    assert reg.get_run(new_id)["status"] == "KILLED"
    newest = max(a["step"] for a in reg.artifacts(new_id, "critic"))

    # resume after a resume: the third run dies (kill -9) before it saves anything ...
    third = json.loads(cli("runs", "resume", new_id, "--db", str(db), "--json").stdout)["run_id"]
    wait_for(lambda: reg.get_run(third)["status"] == "RUNNING", timeout=60, every=0.05)
    assert cli("runs", "kill", third, "--force", "--db", str(db)).returncode == 0
    assert reg.get_run(third)["status"] == "FAILED" and not reg.artifacts(third, "critic")
    # ... and resuming it still continues the lineage's newest checkpoint
    res = cli("runs", "resume", third, "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    fourth = json.loads(res.stdout)["run_id"]
    later = wait_for(lambda: reg.artifacts(fourth, "critic"), timeout=120)
    assert min(a["step"] for a in later) > newest
    assert cli("runs", "kill", fourth, "--wait", "60", "--db", str(db)).returncode == 0

    # Every checkpoint of the lineage deleted: resuming is a one-line refusal, never a silent fresh start.
    import shutil

    for rid in (run_id, new_id, third, fourth):
        for art in reg.artifacts(rid, "critic"):
            shutil.rmtree(art["path"], ignore_errors=True)
    runs_before = len(reg.list_runs())
    for argv in (("runs", "resume", fourth), ("train-critic", "--episodes-from", play_id, "--critic", "tiny",
                                               "--resume-from", fourth)):
        res = cli(*argv, "--db", str(db))
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "checkpoint" in res.stderr and "Traceback" not in res.stderr
    assert len(reg.list_runs()) == runs_before


def test_kill_of_a_foreground_run_spares_its_callers_process_group(tmp_path):
    """A script that runs a job (`lactchain collect`) in the foreground (so the job shares the
    script's process group) survives `runs kill`, and so does its other child."""
    db = tmp_path / "registry.db"
    script = (f"sleep 300 & echo $! > {tmp_path / 'sibling.pid'}; "
              f"{sys.executable} -m lactchain.cli {' '.join(LONG_JOB)} --db {db}; "
              "sleep 300")
    parent = subprocess.Popen(["bash", "-c", script], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run = wait_for(lambda: db.exists() and next(
            (r for r in Registry(db).list_runs() if r["status"] == "RUNNING"), None))
        reg = Registry(db)
        assert run["pgid"] == 0  # not the leader of the group it runs in
        sibling = int((tmp_path / "sibling.pid").read_text())
        res = lactchain("runs", "kill", run["id"], "--wait", "60", "--db", str(db))
        assert res.returncode == 0, res.stderr
        assert wait_for(lambda: reg.get_run(run["id"])["status"] == "KILLED")
        assert parent.poll() is None and pid_alive(sibling)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


def _phases(reg, run_id):
    """(iteration, phase) of a pipeline's finished child runs, from their names."""
    import re

    out = []
    for child in reg.list_runs(parent_id=run_id):
        m = re.match(r"(.+) \(iteration (\d+)\)", child["name"] or "")
        if m and child["status"] == "FINISHED":
            out.append((int(m.group(2)), m.group(1)))
    return sorted(out)


@pytest.mark.slow
def test_a_killed_pipeline_redoes_only_its_unfinished_phases_and_ends_where_an_uninterrupted_one_does(tmp_path, cli):
    """Killed once iteration 1 collected its pairs (often inside the actor's training; where
    it lands depends on the machine's load), resumed: each phase runs exactly once over the
    two runs -- the unfinished ones redone, none of the kept ones -- and the loop's curve
    equals the uninterrupted run's with the same seed: each phase starts from RNG states
    fixed by (seed, iteration, phase), and the critic's optimizer is restored beside its
    checkpoint."""
    args = ["pipeline", "--actor", "tiny", "--critic", "tiny", "--iterations", "2", "--states", "6",
            "--eval-states", "8", "--samples", "3", "--explore", "8", "--td-lists-per-state", "16", "--td-rounds", "2",
            "--actor-epochs", "1", "--seed", "3"]
    db = tmp_path / "registry.db"
    whole = cli(*args, "--db", str(db), "--json")
    assert whole.returncode == 0, whole.stderr
    expected = json.loads(whole.stdout)["curve"]
    order = [(p["iteration"], p["phase"]) for p in json.loads(whole.stdout)["phases"]]  # the loop's own order
    fits = [p["v_loss"] for p in json.loads(whole.stdout)["phases"] if p["phase"] == "train-critic"]

    res = cli(*args, "--db", str(db), "--detach", "--json")
    assert res.returncode == 0, res.stderr
    first = json.loads(res.stdout)["run_id"]
    reg = Registry(db)
    wait_for(lambda: (1, "collect") in _phases(reg, first), timeout=300, every=0.1)
    assert cli("runs", "kill", first, "--wait", "60", "--db", str(db)).returncode == 0
    assert reg.get_run(first)["status"] == "KILLED"
    kept = _phases(reg, first)
    assert {(0, "evaluate"), (1, "collect")} <= set(kept)

    res = cli("runs", "resume", first, "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    second = json.loads(res.stdout)["run_id"]
    wait_for(lambda: reg.get_run(second)["status"] not in ("SCHEDULED", "RUNNING"), timeout=300)
    assert reg.get_run(second)["status"] == "FINISHED", reg.get_run(second).get("error")
    redone = _phases(reg, second)
    assert sorted(kept + redone) == sorted(order)  # each phase ran exactly once over the two runs
    assert redone and set(kept) == set(order[:len(kept)]) and set(redone) == set(order[len(kept):])
    log = (reg.run_dir(second) / "log.txt").read_text()
    assert all(f"iteration {i} {p}: kept from run" in log for i, p in kept), log
    assert reg.params(second)["resume_from"] == first
    assert reg.latest_metrics(second)["evaluate/success_rate"] is not None

    # the result covers the whole loop, kept phases included, and equals the uninterrupted run's
    got = json.loads(Path(reg.latest_artifact(second, "pipeline-state")["path"]).read_text())["phases"]
    evals = [p for p in got if p["phase"] == "evaluate"]
    assert [e["success_rate"] for e in evals] == [row["success_rate"] for row in expected]
    assert [e["mean_return"] for e in evals] == pytest.approx([row["mean_return"] for row in expected])
    collects = [p for p in got if p["phase"] == "collect"]
    assert [c["pairs"] for c in collects] == [row["pairs"] for row in expected[1:]]
    # the critic fits after the resume continue the same optimizer: the same losses
    assert [p["v_loss"] for p in got if p["phase"] == "train-critic"] == pytest.approx(fits, rel=1e-6)
    # the resumed run names the adapter its loop ended with (--adapter RESUMED_RUN)
    last_actor = [p["run_id"] for p in got if p["phase"] == "train-actor"][-1]
    assert reg.latest_artifact(second, "adapter")["path"] == reg.latest_artifact(last_actor, "adapter")["path"]


def _steps_of(db, run_id):
    with Registry(db) as reg:
        return len(reg.steps(run_id=run_id))


@pytest.mark.parametrize("deleted", [("-wal",), ("", "-wal", "-shm")], ids=["the -wal", "registry.db and its files"])
def test_a_job_puts_back_registry_files_deleted_under_it(tmp_path, cli, deleted):
    """rm registry.db-wal (or the whole registry) while a job writes: the job's open
    connection still holds every row; its heartbeat writes them back, says so in its log,
    and the run goes on to a normal end with nothing lost."""
    db = tmp_path / "registry.db"
    run_id = launch_long_job(cli, db)
    reg = Registry(db)
    run = wait_for(lambda: (r := reg.get_run(run_id))["status"] == "RUNNING" and len(reg.steps(run_id=run_id)) > 2
                   and r)
    before = len(reg.steps(run_id=run_id))
    reg.close()
    log = tmp_path / run_id / "log.txt"
    try:
        for suffix in deleted:
            Path(str(db) + suffix).unlink(missing_ok=True)
        wait_for(lambda: "; run " in log.read_text() and "goes on" in log.read_text(), timeout=60)
        said = log.read_text()
        assert ("was deleted; restored it" if "" in deleted else "-wal was deleted; what it held was checkpointed") \
            in said, said
        wait_for(lambda: _steps_of(db, run_id) > before + 2)  # readable again, and the job still records
        assert cli("runs", "kill", run_id, "--wait", "60", "--db", str(db)).returncode == 0
        with Registry(db) as reg:
            final = wait_for(lambda: (r := reg.get_run(run_id))["status"] != "RUNNING" and r)
            assert final["status"] == "KILLED"
            assert len(reg.steps(run_id=run_id)) > before + 2  # the rows written before the deletion are there
    finally:
        if pid_alive(run["pid"]):
            os.killpg(run["pgid"], signal.SIGKILL)
        wait_for(lambda: not pid_alive(run["pid"]))


def test_a_detached_jobs_log_gets_no_library_progress_bars(tmp_path):
    """A detached job's stderr is its log: transformers' "Loading weights" bars are off
    there (the job's own progress lines stay)."""
    code = ("from lactchain.jobs.__main__ import quiet_library_bars; quiet_library_bars(); "
            "from transformers.utils import logging; print(logging.is_progress_bar_enabled())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_HUB_DISABLE")}
    with open(tmp_path / "log.txt", "w") as log:  # not a terminal, as a detached job's stderr
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                             timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", (tmp_path / "log.txt").read_text()


def test_a_damaged_newest_critic_checkpoint_is_passed_over_for_the_one_before(tmp_path, capsys):
    """Every checkpoint is sealed (sizes and SHA-256, written last); a resume verifies the
    newest, says in one line that it is damaged and goes on from the one before it."""
    from cli_helpers import run_cli

    from lactchain.runs.checkpoints import MANIFEST

    db = tmp_path / "registry.db"
    code, out, err = run_cli(["play", "--actor", "tiny", "--episodes", "16", "--envs", "8", "--start", "random",
                              "--max-actions", "4", "--free", "--temperature", "1.0", "--db", db, "--json"], capsys)
    assert code == 0, err
    play = json.loads(out)["run_id"]
    critic = ["train-critic", "--episodes-from", play, "--critic", "tiny", "--batch-size", "16", "--db", db]
    code, out, err = run_cli([*critic, "--epochs", "3", "--json"], capsys)
    assert code == 0, err
    first = json.loads(out)["run_id"]
    with Registry(db) as reg:
        saved = [a["path"] for a in reg.artifacts(first, "critic")]
    assert len(saved) >= 2 and all((Path(p) / MANIFEST).is_file() for p in saved)
    newest = max(Path(p) for p in saved)
    victim = max((f for f in newest.iterdir() if f.name != MANIFEST), key=lambda f: f.stat().st_size)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # a half-written file
    code, out, err = run_cli([*critic, "--epochs", "4", "--resume-from", first, "--json"], capsys)
    assert code == 0, err
    assert f"checkpoint {newest} is damaged ({victim.name}:" in err and "using the one before it" in err, err


def test_a_finished_run_that_tracked_its_progress_reads_one_and_a_killed_one_keeps_its_own(tmp_path):
    """A comparison whose last cell ran out of minutes ended at progress 0.91 and showed
    that as FINISHED; a finished run reads 1, a killed one where it stopped, and a run that
    never tracked progress gets none."""
    from lactchain.runs.lifecycle import PROGRESS_METRIC, Cancelled, run_context

    reg = Registry(tmp_path / "registry.db")
    with run_context(reg, "bench", quiet=True) as done:
        done.log_metrics({PROGRESS_METRIC: 0.91})
    with run_context(reg, "play", quiet=True) as untracked:
        untracked.log_metrics({"loss": 1.0})
    with pytest.raises(Cancelled), run_context(reg, "bench", quiet=True) as killed:
        killed.log_metrics({PROGRESS_METRIC: 0.4})
        raise Cancelled("stopped")
    assert [r["value"] for r in reg.metric_history(done.run_id, PROGRESS_METRIC)] == [0.91, 1.0]
    assert reg.get_run(done.run_id)["status"] == "FINISHED"
    assert PROGRESS_METRIC not in reg.latest_metrics(untracked.run_id)
    assert reg.latest_metrics(killed.run_id)[PROGRESS_METRIC] == 0.4
    assert reg.get_run(killed.run_id)["status"] == "KILLED"
