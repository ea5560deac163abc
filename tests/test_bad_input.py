"""Every CLI command against a table of bad inputs and faulty registry files.

Each case runs the real `lactchain` entry point (`lactchain.cli.main`, in this
process for speed) and asserts what a user depends on: a non-zero exit, one line
on stderr that names the problem, no traceback, registry files byte-for-byte
unchanged when the command had no business writing, and no run row created for
rejected input.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from lactchain.runs.registry import Registry
from cli_helpers import run_cli


def _registry_with_runs(path: Path) -> dict[str, str]:
    """A registry holding one run of each kind the cases refer to."""
    with Registry(path) as reg:
        finished = reg.create_run("critic", name="finished critic, no checkpoint")
        reg.end_run(finished, "FINISHED")
        killed = reg.create_run("play", name="killed play")
        ep = reg.add_episode(killed, idx=0, start_state={"x": 0, "y": 0, "orientation": "east"})
        reg.add_steps(killed, [{"episode_id": ep, "t": 0, "state": {"x": 0, "y": 0, "orientation": "east"},
                                "prompt": "p", "completion": "c", "moves": ["move forward"], "reward": 0.0,
                                "next_state": {"x": 1, "y": 0, "orientation": "east"}, "done": False}])
        reg.end_run(killed, "KILLED")
        good = reg.create_run("play", name="finished play")
        for idx in range(3):
            ep = reg.add_episode(good, idx=idx, start_state={"x": 0, "y": 0, "orientation": "east"})
            reg.add_steps(good, [{"episode_id": ep, "t": t, "state": {"x": t, "y": 0, "orientation": "east"},
                                  "prompt": "p", "completion": "c", "moves": ["move forward"], "reward": 0.0,
                                  "next_state": {"x": t + 1, "y": 0, "orientation": "east"}, "done": t == 1}
                                 for t in range(2)])
        reg.end_run(good, "FINISHED")
        play = reg.create_run("play", name="finished play, no return")
        reg.end_run(play, "FINISHED")
        resumed_play = reg.create_run("play", name="failed play")
        reg.end_run(resumed_play, "FAILED")
    return {"finished": finished, "good_play": good, "killed_play": killed, "empty_play": play, "failed_play": resumed_play}


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    """Registry files made once; each case gets its own copy."""
    root = tmp_path_factory.mktemp("templates")
    ok = root / "ok.db"
    ids = _registry_with_runs(ok)
    (root / "ids.txt").write_text(repr(ids))
    blob = ok.read_bytes()
    (root / "junk.db").write_bytes(bytes(range(256)) * 64)
    (root / "truncated.db").write_bytes(blob[: len(blob) // 3])
    malformed = bytearray(blob)
    malformed[100:4096] = b"\xa5" * 3996  # the schema page overwritten after the file header
    (root / "malformed.db").write_bytes(bytes(malformed))
    # closing() closes the connection (sqlite3's own `with` only commits): the close
    # checkpoints a WAL into the .db file, which is all the tests copy.
    with closing(sqlite3.connect(root / "foreign.db")) as raw, raw:
        raw.execute("CREATE TABLE notes (body TEXT)")
        raw.execute("INSERT INTO notes VALUES ('keep me')")
    shutil.copy(ok, root / "future.db")
    with closing(sqlite3.connect(root / "future.db")) as raw:
        raw.execute("PRAGMA user_version = 99")
    (root / "empty.db").write_bytes(b"")
    return {p.stem: p for p in root.iterdir()}


@pytest.fixture()
def files(tmp_path, templates):
    out = {}
    for name, path in templates.items():
        if path.suffix == ".db":
            out[name] = tmp_path / path.name
            shutil.copy(path, out[name])
    out["dir"] = tmp_path / "dir.db"
    out["dir"].mkdir()
    out["nodir"] = tmp_path / "no" / "such" / "dir" / "r.db"
    ids = eval(templates["ids"].read_text())  # written by this module
    return out, ids


TINY = ["--actor", "tiny"]
# (argv, words the one-line error must contain). {name} is a registry file or a run id.
CASES = [
    # --- faulty registry files, for reading and writing commands -------------------------
    *[(cmd + ["--db", "{%s}" % f], words)
      for f, words in (("junk", "cannot be read"), ("truncated", "cannot be read"), ("malformed", "cannot be read"),
                       ("foreign", "another application"), ("future", "upgrade lactchain"), ("dir", "is a directory"))
      for cmd in (["runs", "list"], ["runs", "show", "x"], ["runs", "logs", "x"], ["runs", "kill", "x"],
                  ["runs", "resume", "x"], ["play", *TINY, "-n", "1"], ["train-critic", "--critic", "tiny", "-e", "x"],
                  ["train-actor", *TINY], ["evaluate", *TINY, "--states", "1"],
                  ["runs", "export", "x"], ["leaderboard"], ["strategy", "search", *TINY], ["strategy", "versions"],
                  ["bench", "strategy", *TINY], ["archive", "fill", "-n", "5"], ["archive", "verify", "x"],
                  ["dt", "train", "--archive", "x"], ["baselines", "train", "-n", "5"], ["bandit", "--runs", "1"],
                  ["judge", "--from", "x"], ["collect", "--env", "blackjack", "-n", "2"],
                  ["pipeline", *TINY, "--critic", "tiny"], ["collect-pairs", *TINY, "--critic-run", "x"])],
    (["play", *TINY, "-n", "1", "--db", "{nodir}"], "does not exist"),
    # --- play --------------------------------------------------------------------------------
    (["play", "--actor", "", "--db", "{ok}"], "the actor model name is empty"),
    (["play", "--actor", "./no-such-model", "--db", "{ok}"], "unknown actor model './no-such-model'"),
    (["play", "--actor", "minilm-l6", "--db", "{ok}"], "is a critic preset, not an actor"),
    (["play", *TINY, "--episodes", "0", "--db", "{ok}"], "Invalid value for '--episodes'"),
    (["play", *TINY, "--episodes", "99999999999999999999", "--db", "{ok}"], "Invalid value for '--episodes'"),
    (["play", *TINY, "--envs", "0", "--db", "{ok}"], "Invalid value for '--envs'"),
    (["play", *TINY, "--envs", "100000", "--db", "{ok}"], "Invalid value for '--envs'"),
    (["play", *TINY, "--start", "diagonal", "--db", "{ok}"], "--start"),
    (["play", *TINY, "--temperature", "-1", "--db", "{ok}"], "Invalid value for '--temperature'"),
    (["play", *TINY, "--temperature", "inf", "--db", "{ok}"], "not a finite number"),
    (["play", *TINY, "--temperature", "nan", "--db", "{ok}"], "Invalid value for '--temperature'"),
    (["play", *TINY, "--max-actions", "0", "--db", "{ok}"], "Invalid value for '--max-actions'"),
    (["play", *TINY, "--max-actions", "99999999999999999999", "--db", "{ok}"], "Invalid value for '--max-actions'"),
    (["play", *TINY, "--seed", "-1", "--db", "{ok}"], "Invalid value for '--seed'"),
    (["play", *TINY, "--seed", str(2**32), "--db", "{ok}"], "Invalid value for '--seed'"),
    (["play", *TINY, "--seed", "abc", "--db", "{ok}"], "Invalid value for '--seed'"),
    (["play", *TINY, "--adapter", "nope", "--db", "{ok}"], "--adapter nope: no run with id 'nope'"),
    (["play", *TINY, "--adapter", "{finished}", "--db", "{ok}"], "has no saved adapter"),
    (["play", *TINY, "--adapter", "/no/such/adapter", "--db", "{ok}"], "--adapter /no/such/adapter: no such folder; give"),
    (["runs", "export", "{good_play}", "-o", "/proc/no-such/x", "--db", "{ok}"], "cannot write there"),
    (["reward-agents", "--agents", "intrinsic", "--db", "{ok}"], "--agents 'intrinsic': intrinsic and mixed agents"),
    (["runs", "tag", "{finished}", "k" * 300 + "=v", "--db", "{ok}"], "kkk... (300 characters)': give 1-"),
    *[([cmd, *TINY, *extra, "--free", "--grammar-spelling", "canonical", "--db", "{ok}"],
       "--grammar-spelling canonical shapes grammar-constrained decoding, which --free turns off")
      for cmd, extra in (("play", []), ("evaluate", []), ("pipeline", ["--critic", "tiny"]),
                         ("collect-pairs", ["--critic-run", "x"]))],
    (["play", *TINY, "--adapter", "{ok}", "--db", "{ok}"], ": not a folder; give an adapter folder (holding"),
    (["play", *TINY, "--run-id", "nope", "--db", "{ok}"], "no such run"),
    (["play", *TINY, "--run-id", "{finished}", "--db", "{ok}"], "only a SCHEDULED play run can be adopted"),
    (["play", *TINY, "--bogus", "--db", "{ok}"], "No such option: --bogus"),
    (["play", *TINY, "--strategy", "7", "--db", "{ok}"], "--strategy 7: no strategy version 7"),
    (["evaluate", *TINY, "--strategy", "./no-such-file.txt", "--db", "{ok}"], "neither a saved version number nor a"),
    (["pipeline", *TINY, "--strategy", "{empty}", "--db", "{ok}"], "the strategy prompt is empty"),
    (["collect-pairs", *TINY, "--critic-run", "x", "--strategy", "{dir}", "--db", "{ok}"], "nor a text file"),
    # --- train-critic ----------------------------------------------------------------------
    (["train-critic", "--critic", "", "-e", "{good_play}", "--db", "{ok}"], "the critic model name is empty"),
    (["train-critic", "--critic", "smollm2-135m", "-e", "{good_play}", "--db", "{ok}"], "is an actor preset, not a critic"),
    (["train-critic", "--critic", "tiny", "--epochs", "0", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--epochs'"),
    (["train-critic", "--critic", "tiny", "--gamma", "nan", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--gamma'"),
    (["train-critic", "--critic", "tiny", "--gamma", "-5", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--gamma'"),
    (["train-critic", "--critic", "tiny", "--gamma", "1", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--gamma'"),
    (["train-critic", "--critic", "tiny", "--lr", "inf", "-e", "{good_play}", "--db", "{ok}"], "not a finite number"),
    (["train-critic", "--critic", "tiny", "--lr", "0", "-e", "{good_play}", "--db", "{ok}"], "--lr 0.0: must be above 0"),
    (["train-critic", "--critic", "tiny", "--batch-size", "1", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--batch-size'"),
    (["train-critic", "--critic", "tiny", "--lora-r", "0", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--lora-r'"),
    (["train-critic", "--critic", "tiny", "--lora-r", "100000", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--lora-r'"),
    (["train-critic", "--critic", "tiny", "--q-weight", "nan", "-e", "{good_play}", "--db", "{ok}"], "Invalid value for '--q-weight'"),
    (["train-critic", "--critic", "tiny", "--resume-from", "nope", "-e", "{good_play}", "--db", "{ok}"], "--resume-from nope: no run"),
    (["train-critic", "--critic", "tiny", "--resume-from", "{killed_play}", "-e", "{good_play}", "--db", "{ok}"],
     "is a play run; expected critic"),
    (["train-critic", "--critic", "tiny", "--episodes-from", "nope", "--db", "{ok}"], "no run with id 'nope'"),
    (["train-critic", "--critic", "tiny", "--episodes-from", "{finished}", "--db", "{ok}"], "expected play"),
    (["train-critic", "--critic", "tiny", "--episodes-from", "{empty_play}", "--db", "{ok}"], "no stored steps"),
    (["train-critic", "--critic", "tiny", "--episodes-from", "{killed_play}", "--db", "{ok}"],
     "0 step(s) of finished episodes"),
    (["train-critic", "--critic", "tiny", "--episodes-from", "{killed_play}", "--batch-size", "2", "--db", "{ok}"],
     "0 step(s) of finished episodes"),
    # --- collect-pairs -------------------------------------------------------------------
    (["collect-pairs", *TINY, "--states", "0", "--db", "{ok}"], "Invalid value for '--states'"),
    (["collect-pairs", *TINY, "--states", "100000000000000", "--db", "{ok}"], "Invalid value for '--states'"),
    (["collect-pairs", *TINY, "--samples", "1", "--db", "{ok}"], "Invalid value for '--samples'"),
    (["collect-pairs", *TINY, "--samples", "100000", "--db", "{ok}"], "Invalid value for '--samples'"),
    (["collect-pairs", *TINY, "--temperature", "0.5", "--db", "{ok}"], "Invalid value for '--temperature'"),
    (["collect-pairs", *TINY, "--gamma", "nan", "--db", "{ok}"], "Invalid value for '--gamma'"),
    (["collect-pairs", *TINY, "--gamma", "-5", "--db", "{ok}"], "Invalid value for '--gamma'"),
    (["collect-pairs", *TINY, "--margin", "-1", "--db", "{ok}"], "Invalid value for '--margin'"),
    (["collect-pairs", *TINY, "--critic-run", "nope", "--db", "{ok}"], "no run with id 'nope'"),
    (["collect-pairs", *TINY, "--critic-run", "{killed_play}", "--db", "{ok}"], "is a play run; expected critic"),
    (["collect-pairs", *TINY, "--critic-run", "{finished}", "--db", "{ok}"], "has no critic checkpoint yet"),
    (["collect-pairs", *TINY, "--episodes-from", "{finished}", "--db", "{ok}"], "is a critic run; expected play"),
    # --- train-actor ---------------------------------------------------------------------
    (["train-actor", *TINY, "--loss", "foo", "--db", "{ok}"], "--loss"),
    (["train-actor", *TINY, "--labeler", "foo", "--db", "{ok}"], "--labeler"),
    (["train-actor", *TINY, "--epochs", "0", "--db", "{ok}"], "--epochs 0.0: must be above 0"),
    (["train-actor", *TINY, "--lr", "inf", "--db", "{ok}"], "not a finite number"),
    (["train-actor", *TINY, "--lr", "0", "--db", "{ok}"], "--lr 0.0: must be above 0"),
    (["train-actor", *TINY, "--beta", "nan", "--db", "{ok}"], "--beta nan is not a finite number"),
    (["train-actor", *TINY, "--beta", "-1", "--db", "{ok}"], "--beta"),
    (["train-actor", *TINY, "--simpo-gamma", "inf", "--db", "{ok}"], "not a finite number"),
    (["train-actor", *TINY, "--max-steps", "0", "--db", "{ok}"], "Invalid value for '--max-steps'"),
    (["train-actor", *TINY, "--batch-size", "0", "--db", "{ok}"], "Invalid value for '--batch-size'"),
    (["train-actor", *TINY, "--lora-r", "0", "--db", "{ok}"], "Invalid value for '--lora-r'"),
    (["train-actor", *TINY, "--resume-from", "nope", "--db", "{ok}"], "--resume-from nope"),
    (["train-actor", *TINY, "--pairs-from", "nope", "--db", "{ok}"], "--pairs-from nope: no run"),
    (["train-actor", *TINY, "--pairs-from", "{finished}", "--db", "{ok}"], "no usable preference pairs"),
    (["train-actor", *TINY, "--db", "{ok}"], "no usable preference pairs"),
    # --- evaluate ---------------------------------------------------------------------------
    (["evaluate", *TINY, "--states", "abc", "--db", "{ok}"], "--states"),
    (["evaluate", *TINY, "--states", "0", "--db", "{ok}"], "--states"),
    (["evaluate", *TINY, "--states", "-3", "--db", "{ok}"], "--states"),
    (["evaluate", *TINY, "--envs", "0", "--db", "{ok}"], "Invalid value for '--envs'"),
    (["evaluate", *TINY, "--max-actions", "0", "--db", "{ok}"], "Invalid value for '--max-actions'"),
    # --- pipeline / bench learn -----------------------------------------------------------
    (["pipeline", *TINY, "--critic", "tiny", "--labeler", "foo", "--db", "{ok}"], "labeler must be one of"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "foo", "--db", "{ok}"], "loss must be one of"),
    (["pipeline", *TINY, "--critic", "tiny", "--iterations", "0", "--db", "{ok}"], "iterations"),
    (["pipeline", *TINY, "--critic", "tiny", "--iterations", "99999999999999999999", "--db", "{ok}"], "iterations"),
    (["pipeline", *TINY, "--critic", "tiny", "--states", "abc", "--db", "{ok}"], "states must be 'all' or a number"),
    (["pipeline", *TINY, "--critic", "tiny", "--states", "0", "--db", "{ok}"], "states"),
    (["pipeline", *TINY, "--critic", "tiny", "--samples", "0", "--db", "{ok}"], "samples"),
    (["pipeline", *TINY, "--critic", "tiny", "--actor-epochs", "0", "--db", "{ok}"], "actor-epochs"),
    (["pipeline", *TINY, "--critic", "tiny", "--actor-lr", "inf", "--db", "{ok}"], "not a finite number"),
    (["pipeline", *TINY, "--critic", "tiny", "--explore", "-1", "--db", "{ok}"], "explore"),
    (["pipeline", *TINY, "--critic", "tiny", "--cpo-alpha", "1", "--db", "{ok}"], "cpo-alpha"),
    (["pipeline", *TINY, "--critic", "tiny", "--td-lists-per-state", "0", "--db", "{ok}"], "td-lists-per-state"),
    (["pipeline", *TINY, "--critic", "tiny", "--eval-states", "x", "--db", "{ok}"], "eval-states"),
    (["pipeline", *TINY, "--critic", "smollm2-135m", "--db", "{ok}"], "is an actor preset, not a critic"),
    (["pipeline", *TINY, "--critic", "tiny", "--run-id", "{finished}", "--db", "{ok}"], "only a SCHEDULED"),
    (["bench", "learn", *TINY, "--budget-min", "0", "--db", "{ok}"], "Invalid value for '--budget-min'"),
    (["bench", "learn", *TINY, "--budget-min", "nan", "--db", "{ok}"], "Invalid value for '--budget-min'"),
    (["bench", "learn", *TINY, "--labeler", "foo", "--db", "{ok}"], "labeler must be one of"),
    (["bench", "learn", *TINY, "--critic", "nope", "--db", "{ok}"], "unknown critic model 'nope': not a critic preset"),
    # --- models / env -----------------------------------------------------------------------
    (["models", "prepare", ""], "give a preset name"),
    (["models", "prepare", "nope"], "nope"),
    (["env", "show", "--size", "0"], "size must be at least 2"),
    (["env", "show", "--size", "1"], "size must be at least 2"),
    (["bench", "motif", "--critic", "nope", "--judges", "rule"], "unknown critic model 'nope'"),
    (["env", "show", "--size", "100000"], "Invalid value for '--size'"),
    (["env", "show", "--gamma", "nan"], "Invalid value for '--gamma'"),
    (["env", "show", "--gamma", "2"], "Invalid value for '--gamma'"),
    # --- runs -------------------------------------------------------------------------------
    (["runs", "list", "--status", "foo", "--db", "{ok}"], "unknown status"),
    (["runs", "list", "--limit", "0", "--db", "{ok}"], "Invalid value for '--limit'"),
    (["runs", "list", "--kind", "foo", "--db", "{ok}"], "unknown kind 'foo'"),
    (["runs", "show", "nope", "--db", "{ok}"], "no run with id 'nope'"),
    (["runs", "show", "nope", "--db", "{nodir}"], "no registry at"),
    (["runs", "logs", "nope", "--db", "{ok}"], "no run with id 'nope'"),
    (["runs", "logs", "{finished}", "--db", "{ok}"], "has no log"),
    (["runs", "logs", "{finished}", "--tail", "-1", "--db", "{ok}"], "Invalid value for '--tail'"),
    (["runs", "kill", "nope", "--db", "{ok}"], "no run with id 'nope'"),
    (["runs", "kill", "{finished}", "--db", "{ok}"], "is not running"),
    (["runs", "kill", "{finished}", "--wait", "nan", "--db", "{ok}"], "Invalid value for '--wait'"),
    (["runs", "resume", "nope", "--db", "{ok}"], "no run with id 'nope'"),
    (["runs", "resume", "{finished}", "--db", "{ok}"], "only KILLED or FAILED runs can be resumed"),
    (["runs", "resume", "{killed_play}", "--db", "{ok}"], "play runs cannot be resumed"),
    (["runs", "resume", "{failed_play}", "--db", "{ok}"], "play runs cannot be resumed"),
    # --- round two: read commands never write into a file, numbers within reason, engine settings
    *[(cmd + ["--db", "{empty}"], "is an empty file, not a registry")
      for cmd in (["leaderboard"], ["runs", "list"], ["runs", "show", "x"], ["runs", "export", "x"])],
    (["bandit", "--agents", "ucb:1e308", "--db", "{ok}"], "C must be a finite number in [0, 1000]"),
    (["bandit", "--agents", "optimistic:1e300", "--db", "{ok}"], "Q0 must be a finite number in [-1e6, 1e6]"),
    (["play", *TINY, "--tensor-parallel-size", "2", "--engine", "hf", "--db", "{ok}"],
     "--tensor-parallel-size 2 spreads one vLLM engine over devices: use it with --engine vllm"),
    (["evaluate", *TINY, "--data-parallel-size", "2", "--db", "{ok}"], "--data-parallel-size 2 runs vLLM engine replicas"),
    (["pipeline", *TINY, "--critic", "tiny", "--samples", "1", "--db", "{ok}"], "samples must be >= 2"),
    # --- learning from the actor's own samples: GRPO / DPO / KTO settings, refused before any run
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--samples", "1", "--db", "{ok}"],
     "samples must be >= 2"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--temperature", "0", "--db", "{ok}"],
     "temperature 0.0 is too low"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--grpo-loss-type", "ppo", "--db", "{ok}"],
     "--grpo-loss-type 'ppo': must be one of dapo, dr_grpo, grpo, bnpo"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--grouping", "episode", "--db", "{ok}"],
     "--grouping 'episode': must be one of start, state"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--group-filter", "0", "--db", "{ok}"],
     "group-filter"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "simpo", "--grouping", "state", "--db", "{ok}"],
     "--grouping 'state': only applies to --loss grpo"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "simpo", "--entropy-target", "1", "--db", "{ok}"],
     "--entropy-target 1.0: only applies to --loss grpo"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "dpo", "--grpo-reward", "success", "--db", "{ok}"],
     "--grpo-reward 'success': only applies to --loss grpo"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--grpo-reward", "success", "--grouping", "state",
      "--db", "{ok}"], "grpo-reward success applies to --grouping start"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--grpo-reward", "return", "--db", "{ok}"],
     "--grpo-reward 'return': must be one of labeler, success, success-return, success-speed"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "grpo", "--grpo-reward", "success-return", "--grouping",
      "state", "--db", "{ok}"], "grpo-reward success-return applies to --grouping start"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "simpo", "--rpo-alpha", "1", "--db", "{ok}"],
     "--rpo-alpha 1.0: only applies to --loss dpo/kto"),
    (["pipeline", *TINY, "--critic", "tiny", "--loss", "dpo", "--dpo-loss", "hinge", "--db", "{ok}"],
     "--dpo-loss 'hinge': must be one of sigmoid, ipo"),
    (["play", "--actor", "\x1b]0;pwned\x07", "--db", "{ok}"], "\\x1b]0;pwned\\x07"),
    # --- the newer commands: motif, baselines, archive, dt, strategy, worlds, export ---------
    (["collect", "--env", "blackjack", "--episodes", "0", "--db", "{ok}"], "Invalid value for '--episodes'"),
    (["collect", "--env", "blackjack", "--policy", "nope", "--db", "{ok}"], "--policy 'nope': must be one of"),
    (["judge", "--from", "nope", "--db", "{ok}"], "--from nope: no run with id 'nope'"),
    (["judge", "--from", "{good_play}", "--judge", "nope", "--db", "{ok}"], "unknown actor model 'nope'"),
    (["baselines", "train", "--agent", "dqn", "--db", "{ok}"], "--agent 'dqn': must be one of"),
    (["baselines", "train", "--alpha", "0", "--db", "{ok}"], "alpha must be in (0, 1]"),
    (["baselines", "train", "--alpha", "nan", "--db", "{ok}"], "alpha must be in (0, 1]"),
    (["baselines", "train", "--epsilon", "2", "--db", "{ok}"], "epsilon must be in [0, 1]"),
    (["baselines", "train", "--gamma", "2", "--db", "{ok}"], "Invalid value for '--gamma'"),
    (["baselines", "train", "--env", "nope", "--db", "{ok}"], "unknown env 'nope'"),
    (["archive", "fill", "--behaviours", "0", "--db", "{ok}"], "Invalid value for '--behaviours'"),
    (["archive", "fill", "--scene", "attic", "--db", "{ok}"], "unknown scene 'attic'"),
    *[(["archive", cmd, "nope", "--db", "{ok}"], "RUN nope: no run with id 'nope'")
      for cmd in ("verify", "add", "annotate", "describe")],
    (["archive", "export", "nope", "{nodir}", "--db", "{ok}"], "RUN nope: no run with id 'nope'"),
    (["archive", "import", "{nodir}", "--db", "{ok}"], "is not a folder"),
    (["dt", "train", "--archive", "nope", "--db", "{ok}"], "--archive nope: no run with id 'nope'"),
    (["dt", "train", "--archive", "x", "--n-embd", "30", "--n-head", "4", "--db", "{ok}"],
     "--n-embd 30: is not a multiple of --n-head 4"),
    (["dt", "eval", "nope", "--db", "{ok}"], "RUN nope: no run with id 'nope'"),
    *[(["strategy", "search", *TINY, flag, value, "--db", "{ok}"], words)
      for flag, value, words in (("--rounds", "0", "Invalid value for '--rounds'"),
                                 ("--per-round", "0", "Invalid value for '--per-round'"),
                                 ("--train-states", "0", "Invalid value for '--train-states'"),
                                 ("--env", "nope", "unknown env 'nope'"),
                                 ("--scene", "attic", "unknown scene 'attic'"),
                                 ("--state-text", "polar", "must be one of egocentric, coords"),
                                 ("--proposers", "", "is empty"),
                                 ("--proposer-actor", "nope", "--proposer-actor nope"))],
    (["strategy", "search", *TINY, "--env", "blackjack", "--scene", "rooms", "--db", "{ok}"],
     "scenes are the grid's"),
    (["strategy", "versions", "--limit", "0", "--db", "{ok}"], "Invalid value for '--limit'"),
    (["bench", "strategy", *TINY, "--seeds", "x", "--db", "{ok}"], "--seeds x: every item must be a whole number"),
    (["bench", "strategy", *TINY, "--seeds", "", "--db", "{ok}"], "--seeds is empty"),
    (["bench", "learn", *TINY, "--transfer-max-actions", "0", "--db", "{ok}"], "Invalid value for"),
    (["pipeline", *TINY, "--critic", "tiny", "--scene", "{nodir}", "--db", "{ok}"], "does not exist"),
    (["pipeline", *TINY, "--critic", "tiny", "--env", "blackjack", "--state-text", "coords", "--db", "{ok}"],
     "is the grid's"),
    (["play", *TINY, "--scene", "attic", "--db", "{ok}"], "unknown scene 'attic'"),
    (["evaluate", *TINY, "--state-text", "polar", "--db", "{ok}"], "must be one of egocentric, coords"),
    (["train-critic", "--critic", "tiny", "-e", "{good_play}", "--scene", "attic", "--db", "{ok}"],
     "unknown scene 'attic'"),
    (["collect-pairs", *TINY, "--critic-run", "x", "--scene", "attic", "--db", "{ok}"], "unknown scene 'attic'"),
    (["runs", "export", "--db", "{ok}"], "Missing argument 'RUN'"),
    (["runs", "export", "{finished}", "--format", "parquet", "--db", "{ok}"], "use one of tensorboard, csv"),
    (["train-actor", *TINY, "--loss", "grpo", "--rollouts-from", "x", "--pairs-from", "y", "--db", "{ok}"],
     "grpo samples its own lists"),
    (["train-actor", *TINY, "--loss", "grpo", "--grpo-reward", "nope", "--rollouts-from", "x", "--db", "{ok}"],
     "--grpo-reward 'nope': must be one of return, oracle"),
    (["train-actor", *TINY, "--loss", "grpo", "--rollouts-from", "{finished}", "--db", "{ok}"], "is a critic run"),
    (["env", "show", "--scene", "attic"], "unknown scene 'attic'"),
    (["env", "show", "--scene", "{nodir}"], "does not exist"),
    # an empty reference is a slip, not "the default": `--adapter ''` used to play the base model
    (["evaluate", *TINY, "--adapter", "", "--db", "{ok}"], "--adapter is empty"),
    (["play", *TINY, "--strategy", " ", "--db", "{ok}"], "--strategy is empty"),
    (["train-critic", "--critic", "tiny", "-e", "", "--db", "{ok}"], "--episodes-from is empty"),
    (["collect-pairs", *TINY, "--critic-run", "", "--db", "{ok}"], "--critic-run is empty"),
]


def _numeric_cases() -> list[tuple[list[str], str]]:
    """Every number option of every command, read from the CLI itself (so a new option is
    probed the day it lands): a word, and for floats nan/inf/-inf (they parse as floats and
    pass min/max), and for ints one below the declared minimum. The one line must name the
    option."""
    from lactchain.cli import command as cli_command

    cases = []

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in sorted(command.commands.items()):
                walk(sub, path + [name])
            return
        params = command.params
        needs_args = any(not p.opts[0].startswith("-") and p.required for p in params)
        db = ["--db", "{ok}"] if any("--db" in p.opts for p in params) else []
        for p in params:
            kind = getattr(p.type_descriptor, "annotation", None)
            if not p.opts[0].startswith("--") or kind not in (int, float):
                continue
            name = p.opts[0]
            values = ["abc"]
            if kind is float and not needs_args:  # a placeholder argument could be refused first
                values += ["nan", "inf", "-inf"]
            if kind is int and p.min is not None:
                values.append(str(p.min - 1))
            cases.extend(([*path, *(["x"] if needs_args else []), name, v, *db], name.lstrip("-")) for v in values)

    walk(cli_command(), [])
    return cases


CASES += _numeric_cases()


def _case_id(case) -> str:
    return " ".join(case[0]).replace("/", "_")[:90]


@pytest.mark.parametrize("args, words", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_input_is_one_line_not_a_traceback(files, capsys, args, words):
    paths, ids = files
    before = {name: p.read_bytes() for name, p in paths.items() if p.is_file()}
    with Registry.open_for_reading(paths["ok"]) as reg:
        runs_before = len(reg.list_runs())
    argv = [a.format(**{k: str(v) for k, v in paths.items()}, **ids) for a in args]

    code, out, err = run_cli(argv, capsys)

    assert code != 0, f"accepted: {argv}\n{out}"
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err
    assert words in err, err
    # rejected input writes nothing: faulty files stay as they were, the good registry gains no run
    assert {n: p.read_bytes() for n, p in paths.items() if n != "ok" and p.is_file()} == \
        {n: b for n, b in before.items() if n != "ok"}
    assert not paths["nodir"].parent.exists()
    with Registry.open_for_reading(paths["ok"]) as reg:
        assert len(reg.list_runs()) == runs_before


@pytest.mark.parametrize("args", [
    ["play", "--actor", "mistral-7b-instruct", "-n", "1"],
    ["evaluate", "--actor", "mistral-7b-instruct", "--states", "1"],
    ["collect-pairs", "--actor", "mistral-7b-instruct", "--critic-run", "x"],
    ["train-critic", "--critic", "sfr-embedding-mistral", "-e", "x"],
    ["pipeline", *TINY, "--critic", "sfr-embedding-mistral"],
    ["play", "--actor", "mistral-7b-instruct", "-n", "1", "--detach"],
], ids=" ".join)
def test_a_preset_whose_weights_are_not_here_is_refused_before_any_run(args, files, capsys, monkeypatch):
    """A hub preset (Mistral-7B, SFR-Embedding-Mistral) neither in the Hugging Face cache nor
    copied under the models folder: one line saying how to bring it, before a run exists
    (it once failed inside a run, leaving FAILED runs; detached, in the background)."""
    paths, _ = files
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(paths["ok"].parent / "empty-hf-cache"))
    monkeypatch.setenv("LACTCHAIN_MODELS", str(paths["ok"].parent / "models"))
    with Registry.open_for_reading(paths["ok"]) as reg:
        runs_before = len(reg.list_runs())
    code, _, err = run_cli([*args, "--db", str(paths["ok"])], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not available offline" in err, err
    assert "hf download" in err and str(paths["ok"].parent / "models") in err  # the fix: fetch it, or copy it here
    with Registry.open_for_reading(paths["ok"]) as reg:
        assert len(reg.list_runs()) == runs_before


@pytest.mark.parametrize("args", [["runs", "list"], ["runs", "list", "--wide"], ["runs", "list", "--json"],
                                  ["runs", "show", "{run}"], ["runs", "du"], ["runs", "export", "{run}", "-o", "{out}"],
                                  ["runs", "compare", "{run}", "{play}"]], ids=" ".join)
def test_values_of_the_wrong_type_in_registry_rows_read_as_missing(args, tmp_path, capsys):
    """A registry edited by hand (sqlite3 `update runs set created_ms = 'yesterday'`, a
    metric's value 'abc'): SQLite keeps the text; every reader shows it as missing
    instead of a TypeError traceback."""
    db = tmp_path / "registry.db"
    ids = _registry_with_runs(db)
    run = ids["finished"]
    with Registry(db) as reg:
        reg.log_metrics(run, {"train_loss": 0.5}, step=1)
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE runs SET created_ms = 'yesterday', ended_ms = 'x', pid = 'p' WHERE id = ?", [run])
        con.execute("UPDATE metrics SET value = 'abc', ts_ms = 'now' WHERE run_id = ?", [run])
        con.execute("UPDATE latest_metrics SET value = 'abc' WHERE run_id = ?", [run])
    argv = [a.format(run=run, play=ids["good_play"], out=tmp_path / "out") for a in args]
    code, out, err = run_cli([*argv, "--db", str(db)], capsys)
    assert code == 0 and "Traceback" not in err, err
    if "show" in args:
        assert run in out
    with Registry.open_for_reading(db) as reg:
        shown = reg.get_run(run)
        assert (shown["created_ms"], shown["ended_ms"], shown["pid"]) == (None, None, None)
        assert reg.latest_metrics(run) == {"train_loss": None}
        assert [h["value"] for h in reg.metric_history(run, "train_loss")] == [None]


def test_a_folder_named_like_a_run_does_not_hide_the_runs_adapter(tmp_path, monkeypatch):
    """`--adapter RUN` where the current folder holds a folder of that name without an
    adapter (`runs export RUN -o .` writes one): the run's adapter, not 'adapter_config.json
    is missing'; `./RUN` still means the folder."""
    from lactchain.bench.rollout import random_adapter
    from lactchain.config import ConfigError
    from lactchain.jobs.checks import resolve_adapter

    with Registry(tmp_path / "registry.db") as reg:
        run = reg.create_run("actor")
        adapter = random_adapter("tiny", reg.run_dir(run) / "adapter")
        reg.add_artifact(run, "adapter", adapter)
        here = tmp_path / "elsewhere"
        (here / run).mkdir(parents=True)
        monkeypatch.chdir(here)
        assert resolve_adapter(reg, run, base="tiny") == str(adapter)
        with pytest.raises(ConfigError, match="adapter_config.json is missing"):
            resolve_adapter(reg, f"./{run}")


def test_a_registry_locked_past_the_busy_timeout_is_one_line(tmp_path):
    """Another process holds the write lock longer than the busy timeout: the command says
    so in one line (and creates nothing), it does not hang or print a traceback."""
    db = tmp_path / "r.db"
    Registry(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        res = subprocess.run([sys.executable, "-m", "lactchain.cli", "play", "--actor", "tiny", "-n", "1",
                              "--db", str(db)], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "LACTCHAIN_BUSY_TIMEOUT_S": "1"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        "error: the registry is locked by another process (waited 1 s for its write to end); try again when it is done"]
    with Registry.open_for_reading(db) as reg:
        assert reg.list_runs() == []


def _command_paths() -> list[list[str]]:
    from lactchain.cli import command as cli_command

    def walk(command, path):
        if hasattr(command, "commands"):
            return [p for name, sub in sorted(command.commands.items()) for p in walk(sub, path + [name])]
        return [path]

    return walk(cli_command(), [])


@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_help_shows_what_was_written(path, capsys, monkeypatch):
    """Help text is never read as Rich markup or emoji codes (`START:END:STEPS` once
    rendered as `START🔚STEPS`), and every command's help renders."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli([*path, "--help"], capsys)
    assert code == 0 and "Usage" in out, err
    assert not [ch for ch in out if 0x1F000 <= ord(ch) <= 0x1FAFF or 0x2600 <= ord(ch) <= 0x27BF], out


def test_every_positional_argument_reads_in_capitals_in_usage_lines():
    """Usage lines spell arguments one way (`runs show RUN`, `runs export RUN...`), not a
    mix of `{run_id}`, `[RUN]...` and `{RUN...}...`, so a reader knows what is a placeholder."""
    from lactchain.cli import command as cli_command

    seen = []

    def walk(command, path):
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, path + [name])
        for p in getattr(command, "params", []):
            if p.param_type_name == "argument":
                metavar = p.metavar or p.name
                seen.append(" ".join(path))
                assert metavar == metavar.upper() and "..." not in metavar, (path, metavar)

    walk(cli_command(), [])
    assert {"runs show", "runs export", "dt eval", "models prepare"} <= set(seen)
