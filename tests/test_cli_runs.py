"""`lactchain runs list|show` against a real registry file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lactchain.cli import app
from lactchain.runs.registry import Registry

runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "reg.db"
    with Registry(path) as reg:
        critic = reg.create_run("critic", name="critic fit", params={"lr": 1e-4}, tags={"note": "x"},
                                cmd=["lactchain", "train-critic"])
        reg.start_run(critic, pid=4321)
        reg.log_metrics(critic, {"loss": 0.5, "spearman": 0.8}, step=3)
        reg.add_artifact(critic, "checkpoint", reg.run_dir(critic) / "step-3", step=3)
        reg.end_run(critic, "FINISHED", exit_code=0)
        rollout = reg.create_run("rollout", parent_id=critic)
        ep = reg.add_episode(rollout, idx=0)
        reg.add_steps(rollout, [{"episode_id": ep, "t": 0}, {"episode_id": ep, "t": 1}])
        reg.add_pairs(rollout, [{"chosen": ["a"], "rejected": ["b"], "labeler": "human"}])
    return path


def _ids(path: Path) -> tuple[str, str]:
    with Registry(path) as reg:
        return reg.list_runs(kind="critic")[0]["id"], reg.list_runs(kind="rollout")[0]["id"]


def test_list_json(db):
    critic, rollout = _ids(db)
    result = runner.invoke(app, ["runs", "list", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)
    assert [r["id"] for r in runs] == [rollout, critic]  # newest first
    assert runs[1]["latest_metrics"] == {"loss": 0.5, "spearman": 0.8}
    assert runs[1]["cmd"] == ["lactchain", "train-critic"] and runs[1]["duration_s"] >= 0

    result = runner.invoke(app, ["runs", "list", "--db", str(db), "--json", "--kind", "rollout"])
    assert [r["id"] for r in json.loads(result.stdout)] == [rollout]
    result = runner.invoke(app, ["runs", "list", "--db", str(db), "--json", "--status", "finished", "-n", "5"])
    assert [r["id"] for r in json.loads(result.stdout)] == [critic]


def test_list_a_runs_children_or_runs_matching_a_text(db):
    """--parent lists a pipeline's phases (by id prefix); --search looks where the console's
    filter looks (id, name, kind, status, error) in the registry, not in one page of runs."""
    critic, rollout = _ids(db)

    def listed(*args):  # noqa: ANN002, ANN202
        result = runner.invoke(app, ["runs", "list", "--db", str(db), "--json", *args])
        assert result.exit_code == 0, result.output
        return [r["id"] for r in json.loads(result.stdout)]

    assert listed("--parent", critic[:10]) == [rollout]
    assert listed("--parent", rollout) == []
    assert listed("--search", "CRITIC FIT") == [critic] == listed("-q", "fit", "--kind", "critic")
    assert listed("-q", "fit", "--kind", "rollout") == []
    result = runner.invoke(app, ["runs", "list", "--db", str(db), "-q", "nothing like it"])
    assert result.exit_code == 0 and "No runs match in" in result.stdout
    result = runner.invoke(app, ["runs", "list", "--db", str(db), "--parent", "nosuch"])
    assert result.exit_code == 2 and "no run with id 'nosuch'" in result.stderr


def test_list_table_and_env_var(db, monkeypatch):
    critic, _ = _ids(db)
    monkeypatch.setenv("LACTCHAIN_DB", str(db))
    result = runner.invoke(app, ["runs", "list"])
    assert result.exit_code == 0, result.output
    assert critic in result.stdout and "FINISHED" in result.stdout and "loss=0.5" in result.stdout


def test_list_without_registry_creates_nothing(tmp_path):
    missing = tmp_path / "none" / "reg.db"
    result = runner.invoke(app, ["runs", "list", "--db", str(missing), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert not missing.parent.exists()
    result = runner.invoke(app, ["runs", "list", "--db", str(missing), "--status", "bogus"])
    assert result.exit_code == 2 and "BOGUS" in result.stderr and not missing.exists()


def test_show_json_by_prefix(db):
    critic, rollout = _ids(db)
    result = runner.invoke(app, ["runs", "show", critic[:10], "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["run"]["id"] == critic and info["run"]["status"] == "FINISHED"
    assert info["params"] == {"lr": 1e-4} and info["tags"] == {"note": "x"}
    assert info["latest_metrics"] == {"loss": 0.5, "spearman": 0.8}
    assert info["artifacts"][0]["kind"] == "checkpoint" and info["artifacts"][0]["step"] == 3
    assert info["children"] == [rollout]

    info = json.loads(runner.invoke(app, ["runs", "show", rollout, "--db", str(db), "--json"]).stdout)
    assert info["counts"]["episodes"] == 1 and info["counts"]["steps"] == 2 and info["counts"]["pairs"] == 1


def test_a_run_names_the_code_that_ran_it(tmp_path):
    """Every job's run records the lactchain version, git commit and whether tracked files
    differed, so `runs show` ties any number to its code, not only a benchmark's cells."""
    db = tmp_path / "reg.db"
    played = runner.invoke(app, ["play", "--actor", "tiny", "--episodes", "1", "--envs", "1", "--free",
                                 "--db", str(db), "--json"])
    assert played.exit_code == 0, played.output
    run_id = json.loads(played.stdout)["run_id"]
    tags = json.loads(runner.invoke(app, ["runs", "show", run_id, "--db", str(db), "--json"]).stdout)["tags"]
    git = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "--short=12", "HEAD"],
                         capture_output=True, text=True)
    if git.returncode == 0:
        assert tags["code.commit"] == git.stdout.strip() and tags["code.dirty"] in ("true", "false")
    else:
        assert "code.commit" not in tags
    from importlib.metadata import version

    assert tags["code.version"] == version("lactchain")


def test_reading_the_code_state_never_writes_the_checkouts_git_index(tmp_path):
    """Each job asks git for its commit and whether files changed. `git status` would
    refresh a stat-dirty index under `.git/index.lock`; a job killed meanwhile left the
    lock and the user's next `git commit` failed. Asked without optional locks, the index
    file is never written."""
    import os

    from lactchain.machine import git_state

    repo = tmp_path / "checkout"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        if args[0] == "add":
            (repo / "a.py").write_text("x = 1\n")
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    os.utime(repo / "a.py", (1, 1))  # stat-dirty: a plain `git status` rewrites the index to refresh it
    index = repo / ".git" / "index"
    before = index.stat().st_mtime_ns, index.read_bytes()
    state = git_state(repo)
    assert state["commit"] and state["dirty"] is False
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before
    subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], check=True, capture_output=True)
    assert index.read_bytes() != before[1]  # what a plain status does (the test would see the fix undone)


def test_show_table(db):
    critic, _ = _ids(db)
    result = runner.invoke(app, ["runs", "show", critic, "--db", str(db)])
    assert result.exit_code == 0, result.output
    for text in (critic, "params", "lr", "spearman", "checkpoint", "lactchain train-critic"):
        assert text in result.stdout
    # dates are labelled as dates; the milliseconds stay in --json
    assert re.search(r"created +\d{4}-\d\d-\d\d \d\d:\d\d", result.stdout) and "_ms" not in result.stdout


def test_show_unknown_id_is_a_one_line_error(db):
    result = runner.invoke(app, ["runs", "show", "nope-1234", "--db", str(db)])
    assert result.exit_code == 2
    assert result.stdout == ""
    message = " ".join(result.stderr.split())  # rich may wrap it at the terminal width
    assert message.startswith("error: no run with id 'nope-1234'") and "Traceback" not in result.stderr


def test_show_ambiguous_prefix(db):
    result = runner.invoke(app, ["runs", "show", "", "--db", str(db)])
    assert result.exit_code == 2 and "no run" in result.stderr
    with Registry(db) as reg:
        reg.create_run("critic")
    result = runner.invoke(app, ["runs", "show", "critic-", "--db", str(db)])
    assert result.exit_code == 2 and "several runs" in " ".join(result.stderr.split())


def test_help_texts():
    result = runner.invoke(app, ["runs", "--help"])
    assert result.exit_code == 0 and "list" in result.stdout and "show" in result.stdout
    for cmd in ("list", "show"):
        result = runner.invoke(app, ["runs", cmd, "--help"])
        assert result.exit_code == 0 and "--db" in result.stdout and "--json" in result.stdout


def test_console_script_json_is_pure(db):
    critic, _ = _ids(db)
    exe = Path(sys.executable).with_name("lactchain")
    out = subprocess.run([str(exe), "runs", "show", critic, "--json", "--db", str(db)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["run"]["id"] == critic  # nothing but JSON on the real stdout


@pytest.mark.parametrize("args, words", [
    (["runs", "list", "--db", "{junk}"], "registry database cannot be read"),
    (["play", "--actor", "./no-such-model", "--episodes", "1", "--db", "{ok}"], "unknown actor model './no-such-model'"),
    (["runs", "list", "--db", "{foreign}"], "another application"),
    (["play", "--actor", "tiny", "--episodes", "1", "--run-id", "{finished}", "--db", "{ok}"],
     "only a SCHEDULED play run can be adopted"),
    (["play", "--actor", "tiny", "--episodes", "1", "--run-id", "nope", "--db", "{ok}"], "no such run"),
    (["play", "--actor", "minilm-l6", "--episodes", "1", "--db", "{ok}"], "'minilm-l6' is a critic preset, not an actor"),
    (["pipeline", "--actor", "tiny", "--critic", "smollm2-135m", "--db", "{ok}"], "is an actor preset, not a critic"),
    (["play", "--actor", "tiny", "--temperature", "inf", "--db", "{ok}"], "inf is not a finite number"),
    (["play", "--actor", "tiny", "--temperature", "nan", "--db", "{ok}"], "Invalid value for '--temperature'"),
    (["pipeline", "--actor", "tiny", "--actor-lr", "inf", "--db", "{ok}"], "inf is not a finite number"),
    (["play", "--actor", "tiny", "--episodes", "0", "--db", "{ok}"], "Invalid value for '--episodes'"),
    (["play", "--actor", "tiny", "--bogus", "--db", "{ok}"], "No such option: --bogus"),
    (["play", "--actor", "tiny", "--adapter", "nope", "--db", "{ok}"], "--adapter nope: no run with id 'nope'"),
    (["play", "--actor", "tiny", "--adapter", "{finished}", "--db", "{ok}"], "has no saved adapter"),
    (["collect-pairs", "--actor", "tiny", "--critic-run", "{finished}", "--db", "{ok}"], "has no critic checkpoint yet"),
    (["collect-pairs", "--actor", "tiny", "--episodes-from", "{finished}", "--db", "{ok}"],
     "is a critic run; expected play"),
    (["train-critic", "--critic", "tiny", "--episodes-from", "nope", "--db", "{ok}"], "no run with id 'nope'"),
])
def test_bad_input_is_one_line_not_a_traceback(tmp_path, lc, args, words):
    """In this process (an interpreter start-up per case cost ~1-3 s); a real process's exit
    code and one line: test_disk_faults, test_bad_input's locked registry."""
    import sqlite3

    junk = tmp_path / "junk.db"
    junk.write_bytes(bytes(range(256)) * 8)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE notes (body TEXT)")
    with Registry(tmp_path / "ok.db") as reg:
        finished = reg.create_run("critic")
        reg.end_run(finished, "FINISHED")
        runs_before = len(reg.list_runs())
    files_before = {p: p.read_bytes() for p in (junk, foreign)}
    argv = [a.format(junk=junk, ok=tmp_path / "ok.db", foreign=foreign, finished=finished) for a in args]
    code, _, err = lc(*argv)
    assert code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert words in err
    assert {p: p.read_bytes() for p in files_before} == files_before  # refused files are untouched
    with Registry(tmp_path / "ok.db") as reg:
        assert len(reg.list_runs()) == runs_before and reg.get_run(finished)["status"] == "FINISHED"


def test_list_is_one_line_per_run_at_80_columns_key_metric_first(db, tmp_path):
    """An 80-column terminal: every run on one line, its full id and its kind's key
    metric (an eval's success rate before its alphabetically earlier metrics); --wide
    shows every metric."""
    import subprocess
    import sys

    with Registry(db) as reg:
        ev = reg.create_run("eval", name="evaluate smollm2-135m with a long name that cannot fit " * 2)
        reg.log_metrics(ev, {"distinct_answers": 3, "mean_return": 40.2, "success_rate": 0.583})
        reg.end_run(ev, "FINISHED")
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "LACTCHAIN_DB": str(db)}
    out = subprocess.run([sys.executable, "-m", "lactchain.cli", "runs", "list"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    row = next(line for line in lines if line.startswith(ev))
    assert "success_rate=0.583" in row and "distinct_answers" not in out.stdout
    assert len([line for line in lines if line.startswith(("critic-", "rollout-", "eval-"))]) == 3
    wide = subprocess.run([sys.executable, "-m", "lactchain.cli", "runs", "list", "--wide"], capture_output=True,
                          text=True, env={**env, "COLUMNS": "200"}, timeout=120)
    assert "distinct_answers=3" in wide.stdout and "mean_return=40.2" in wide.stdout


def test_stored_hostile_text_is_shown_never_obeyed(tmp_path):
    """A run name, params, a log with terminal escapes (a title change, a clear-screen)
    and Rich markup: `runs list`, `runs show` and `runs logs` print them visibly escaped."""
    import subprocess
    import sys

    db = tmp_path / "reg.db"
    hostile = "\x1b]0;pwned\x07\x1b[2J[bold red]boom[/] :end:"
    with Registry(db) as reg:
        run_id = reg.create_run("eval", name=hostile, params={"strategy_text": hostile})
        reg.end_run(run_id, "FINISHED")
        reg.save_prompt(hostile, note=hostile, score=0.5, run_id="strategy-1")
        (reg.run_dir(run_id)).mkdir(parents=True, exist_ok=True)
        (reg.run_dir(run_id) / "log.txt").write_text(f"line one {hostile}\n")
    env = {"COLUMNS": "300", "PATH": "/usr/bin:/bin", "LACTCHAIN_DB": str(db)}
    for argv in (["runs", "list"], ["runs", "show", run_id], ["runs", "logs", run_id], ["strategy", "versions"]):
        out = subprocess.run([sys.executable, "-m", "lactchain.cli", *argv], capture_output=True, text=True, env=env,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout, argv
        assert "\\x1b]0;pwned\\x07" in out.stdout, argv
        if argv[1] != "logs":
            assert "[bold red]boom[/]" in out.stdout and ":end:" in out.stdout, argv  # markup shown as typed
    # A hostile registry path, colour forced: its ESC shown, its markup never a link (OSC 8).
    path = str(tmp_path / "a\x1b]0;pwned\x07[link=file:///etc/passwd]x[/link].db")
    out = subprocess.run([sys.executable, "-m", "lactchain.cli", "runs", "list", "--db", path], capture_output=True,
                         text=True, env={**env, "FORCE_COLOR": "1"}, timeout=120)
    assert out.returncode == 0 and "\x1b]" not in out.stdout and "\x07" not in out.stdout, out.stdout
    assert "\\x1b" in out.stdout and "link" in out.stdout and "passwd" in out.stdout


def test_a_file_where_the_runs_folder_belongs_is_named_in_one_line(tmp_path):
    import subprocess
    import sys

    (tmp_path / "runs").write_text("not a folder")
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "lactchain.cli", "play", "--actor", "tiny", "--episodes", "1"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"{tmp_path / 'runs'} is a file" in out.stderr and "Errno" not in out.stderr
    assert (tmp_path / "runs").read_text() == "not a folder"


def test_runs_compare_puts_what_differs_first(tmp_path, capsys):
    from cli_helpers import run_cli

    db = tmp_path / "reg.db"
    with Registry(db) as reg:
        a = reg.create_run("actor", params={"actor": "tiny", "loss": "simpo", "lr": 0.001})
        b = reg.create_run("actor", params={"actor": "tiny", "loss": "dpo", "lr": 0.001})
        reg.log_metrics(a, {"loss": 0.5}, step=3)
        reg.log_metrics(b, {"loss": 0.7, "margin": 1.0}, step=3)
    code, out, err = run_cli(["runs", "compare", a, b, "--db", db, "--json"], capsys)
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows[0] == {"section": "params", "key": "loss", "values": ["simpo", "dpo"], "differs": True}
    assert {"section": "params", "key": "lr", "values": [0.001, 0.001], "differs": False} in rows
    assert {"section": "metrics", "key": "loss", "values": [0.5, 0.7], "differs": True} in rows
    assert {"section": "metrics", "key": "margin", "values": [None, 1.0], "differs": True} in rows
    code, out, _ = run_cli(["runs", "compare", a, b, "--differing", "--db", db], capsys)
    assert code == 0 and "simpo" in out and "lr" not in out.split("metrics")[0]
    with Registry(db) as reg:
        reg.set_tag(b, "note", "the dpo try")
        reg.set_tag(b, "code.commit", "abc123")  # lactchain's own tags stay out of the table
    code, out, _ = run_cli(["runs", "compare", a, b, "--db", db, "--json"], capsys)
    rows = json.loads(out)["rows"]
    assert rows[0] == {"section": "note", "key": "note", "values": [None, "the dpo try"], "differs": True}
    assert not any("abc123" in repr(r["values"]) for r in rows)
    for argv, words in (([a], "compare takes 2 to 3 runs, got 1"), ([a, a], f"compare names run {a} more than once"),
                        ([a, "nope"], "no run with id 'nope'")):
        code, _, err = run_cli(["runs", "compare", *argv, "--db", db], capsys)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_runs_show_gives_a_crash_its_last_line_and_json_keeps_the_traceback(tmp_path, capsys):
    from cli_helpers import run_cli

    db = tmp_path / "reg.db"
    trace = ('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n    boom()\n'
             "OSError: no tokenizer in /models/broken\n")
    with Registry(db) as reg:
        run_id = reg.create_run("play")
        reg.end_run(run_id, "FAILED", error=trace)
    code, out, err = run_cli(["runs", "show", run_id, "--db", db], capsys)
    assert code == 0 and "OSError: no tokenizer in /models/broken" in out and "Traceback" not in out, out
    assert f"runs show {run_id} --json" in out
    code, out, _ = run_cli(["runs", "show", run_id, "--db", db, "--json"], capsys)
    assert json.loads(out)["run"]["error"] == trace


def test_runs_show_gives_the_command_as_a_shell_line_to_run_again(tmp_path, capsys):
    """A recorded argv with a spaced or quoted argument is shown quoted, so the line copied
    from `runs show` (or the console's Info tab) runs the same command."""
    import shlex

    from cli_helpers import run_cli

    from lactchain.safe_text import shell_line

    argv = ["lactchain", "strategy", "set", "Go to the goal; don't turn twice", "--note", "it's mine"]
    db = tmp_path / "reg.db"
    with Registry(db) as reg:
        run_id = reg.create_run("play", cmd=argv)
    assert shlex.split(shell_line(argv)) == argv
    code, out, _ = run_cli(["runs", "show", run_id, "--db", db], capsys)
    assert code == 0 and "'Go to the goal; don'\"'\"'t turn twice'" in " ".join(out.split()), out


def test_a_users_tags_are_written_shown_and_searched_but_lactchains_own_are_not(db):
    """`runs tag RUN note=... KEY=` sets and removes a user's tags in one go; the filter
    (`runs list -q`) finds a note, never a value of lactchain's own tags (a commit hash)."""
    critic, rollout = _ids(db)
    with Registry(db) as reg:
        reg.set_tag(rollout, "code.commit", "deadbeef1234")

    def tag(*args):  # noqa: ANN002, ANN202
        return runner.invoke(app, ["runs", "tag", critic[:9], *args, "--db", str(db), "--json"])

    result = tag("note=lr too high, diverged", "owner=me")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tags"] == {"note": "lr too high, diverged", "owner": "me"}
    assert json.loads(tag("owner=").stdout)["tags"] == {"note": "lr too high, diverged"}
    for args, says in ((["code.commit=x"], "written by lactchain itself"), (["warning=x"], "written by lactchain itself"),
                       (["note"], "give KEY=VALUE"), (["=x"], "give 1-64 printable characters"),
                       ([f"note={'x' * 2001}"], "keep it to 2000")):
        result = tag(*args)
        assert result.exit_code == 2 and says in result.stderr and len(result.stderr.strip().splitlines()) == 1, args
    with Registry(db) as reg:
        assert reg.tags(critic) == {"note": "lr too high, diverged"}  # a refused call wrote nothing
        assert reg.tags(rollout) == {"code.commit": "deadbeef1234"}

    def listed(text):  # noqa: ANN001, ANN202
        return [r["id"] for r in json.loads(runner.invoke(app, ["runs", "list", "--db", str(db), "--json", "-q",
                                                                text]).stdout)]

    assert listed("DIVERGED") == [critic] and listed("deadbeef") == []
    shown = runner.invoke(app, ["runs", "show", critic, "--db", str(db)]).stdout
    assert "lr too high, diverged" in shown


def test_every_tag_lactchain_writes_is_one_a_user_cannot_overwrite():
    """The tag names the lab writes live beside their writers; the schema's list must name
    each of them, or `runs tag` would let a user overwrite it and the filter would search it."""
    from lactchain.engine import GENERATION_TAG, REPLICAS_TAG
    from lactchain.machine import code_tags
    from lactchain.runs.resume import RESUMES_TAG
    from lactchain.runs.schema import NOTE_TAG, is_system_tag

    assert all(is_system_tag(key) for key in (GENERATION_TAG, REPLICAS_TAG, RESUMES_TAG, "warning", *code_tags()))
    assert not is_system_tag(NOTE_TAG)


def test_every_kind_of_run_a_job_makes_is_one_runs_list_and_delete_take(tmp_path, capsys):
    """`--kind` checks against the schema's list: a job's kind missing there (strategy was)
    made `runs list --kind strategy` refuse runs the registry holds."""
    from cli_helpers import run_cli

    from lactchain.jobs.table import JOBS
    from lactchain.runs.schema import RUN_KINDS

    assert {job.kind for job in JOBS.values()} <= set(RUN_KINDS)
    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        search = reg.create_run("strategy", name="a search")
    code, out, err = run_cli(["runs", "list", "--kind", "strategy", "--json", "--db", db], capsys)
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == [search]


def test_logs_of_a_run_that_logged_into_its_parents_log_names_that_log(tmp_path, capsys):
    """A benchmark's cells and a pipeline's phases write into the detached parent's log."""
    from cli_helpers import run_cli

    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        bench = reg.create_run("strategy", name="bench strategy")
        (reg.run_dir(bench) / "log.txt").write_text("cell 1/9 edits-seed0: held-out 0.018 -> 0.018\n")
        cell = reg.create_run("strategy", name="cell", parent_id=bench)
        alone = reg.create_run("eval", name="in the foreground")
        foreground = reg.create_run("pipeline", name="a pipeline in the foreground: no log")
        phase = reg.create_run("critic", parent_id=foreground)
        from tui.screens.runs import fetch_detail  # the console's Log tab says the same

        assert (fetch_detail(reg, cell)["log_holder"], fetch_detail(reg, phase)["log_holder"]) == (bench, None)
    code, _, err = run_cli(["runs", "logs", cell, "--db", db], capsys)
    assert code == 2 and f"it ran inside {bench}, whose log holds its lines: lactchain runs logs {bench}" in " ".join(
        err.split())
    code, out, _ = run_cli(["runs", "logs", bench, "--db", db], capsys)
    assert code == 0 and "cell 1/9 edits-seed0" in out
    code, _, err = run_cli(["runs", "logs", alone, "--db", db], capsys)
    assert code == 2 and "only detached runs write one" in err and "ran inside" not in err
    code, _, err = run_cli(["runs", "logs", phase, "--db", db], capsys)
    assert code == 2 and "ran inside" not in err


@pytest.mark.parametrize("process", ["detached", "foreground"])
def test_resuming_a_benchmarks_cell_on_its_own_is_refused_naming_the_benchmark(tmp_path, capsys, process):
    """A cell runs inside its benchmark's process and records that command line: resumed
    alone it would rerun the whole benchmark under the cell's id (it once started a job that
    failed at once). The refusal names the run to resume instead, and starts nothing."""
    from cli_helpers import run_cli

    db = tmp_path / "registry.db"
    with Registry(db) as reg:
        bench = reg.create_run("strategy", name="bench strategy", cmd=["lactchain", "bench", "strategy", "--seeds",
                                                                         "0,1"])  # its command line, as typed
        # what the cell records: its process's argv (the job runner's, or the console script's)
        cmd = (["python", "-m", "lactchain.jobs", "bench strategy", "config.json", "--run-id", bench]
               if process == "detached" else ["/venv/bin/lactchain", "bench", "strategy", "--seeds", "0,1"])
        cell = reg.create_run("strategy", name="bench strategy cell edits-seed1", parent_id=bench, cmd=cmd)
        search = reg.run_dir(cell) / "search.json"
        search.write_text("{}")
        reg.add_artifact(cell, "strategy-search", search)
        for run_id in (cell, bench):
            reg.end_run(run_id, "FAILED")
    code, _, err = run_cli(["runs", "resume", cell, "--db", db], capsys)
    assert code == 2 and f"ran inside {bench}, as a part of it: resume that (`lactchain runs resume {bench}`)" in \
        " ".join(err.split())
    with Registry(db) as reg:
        assert len(reg.list_runs()) == 2  # nothing started


def test_a_benchmarks_own_job_child_resumes_alone(tmp_path):
    """bench dt trains its transformer as a child job run inside its process (its argv names
    the benchmark): unlike a cell, that child resumes on its own, from its saved config."""
    from lactchain.runs.resume import check_resumable

    with Registry(tmp_path / "registry.db") as reg:
        bench = reg.create_run("bench", cmd=["lactchain", "bench", "dt", "--detach"])
        trained = reg.create_run("dt", parent_id=bench, cmd=["python", "-m", "lactchain.jobs", "bench dt",
                                                              "config.json", "--run-id", bench])
        checkpoint = reg.run_dir(trained) / "checkpoint-1"
        checkpoint.mkdir()
        reg.add_artifact(trained, "dt", checkpoint)
        for run_id in (trained, bench):
            reg.end_run(run_id, "KILLED")
        check_resumable(reg, reg.get_run(trained))  # no NotResumable
