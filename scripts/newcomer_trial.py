#!/usr/bin/env python
"""A newcomer's day in the console, scripted: the real `lactchain-tui` in tmux, keys only
(no mouse), read back from the pane like a person reads the screen.

    python scripts/newcomer_trial.py                       # default models, 120x40
    python scripts/newcomer_trial.py --size 80x24
    python scripts/newcomer_trial.py --actor tiny --critic tiny   # the quick check (~2 min)

Flows (issue 48's trial): step the actor and see the stream and the critic's values; edit,
save and evaluate a strategy and see its score; launch a critic and a SimPO job; kill
one and resume it; label 5 pairs and train on them; compare two runs; quit and reopen
to the same state. Each step prints ✓/✗ with its seconds; a failed step prints what the
pane showed. Exit code 0 when every step passed; `--json FILE` writes the report.
Needs tmux; the registry is a fresh temporary one (kept with --keep)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

ENTRY = Path(sys.executable).with_name("lactchain-tui")


class Failed(AssertionError):
    pass


class Pane:
    """One tmux session on a private server: send keys, read the screen."""

    def __init__(self, size: tuple[int, int], command: list[str], env: dict[str, str]):
        self.socket = f"lactchain-trial-{os.getpid()}"
        self.session = f"trial-{uuid.uuid4().hex[:6]}"
        self.size, self.command, self.env = size, command, env

    def tmux(self, *args: str, check: bool = True) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=check,
                              env=self.env).stdout

    def start(self) -> None:
        cols, rows = self.size
        self.tmux("new-session", "-d", "-s", self.session, "-x", str(cols), "-y", str(rows),
                  " ".join(_quote(c) for c in self.command))

    def alive(self) -> bool:
        return self.session in self.tmux("list-sessions", "-F", "#{session_name}", check=False)

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session, check=False)

    def keys(self, *keys: str, pause: float = 0.15) -> None:
        """Keys by Textual's names (ctrl+k, enter, escape, home, M-4 ...), as tmux names them."""
        for key in keys:
            self.tmux("send-keys", "-t", self.session, _tmux_key(key))
            time.sleep(pause)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.session, "-l", text)
        time.sleep(0.2)

    def wait(self, test: str | Callable[[str], bool], timeout: float = 60.0, what: str = "") -> str:
        """The pane once `test` (a substring or a predicate) holds; Failed after `timeout` s."""
        check = (lambda t: test in t) if isinstance(test, str) else test
        end, text = time.monotonic() + timeout, ""
        while time.monotonic() < end:
            text = self.text()
            if check(text):
                return text
            time.sleep(0.2)
        raise Failed(f"{what or test!r} never appeared in {timeout:g} s; the pane shows:\n{text}")

    def stop(self) -> None:
        self.tmux("kill-server", check=False)


TMUX_KEYS = {"enter": "Enter", "escape": "Escape", "tab": "Tab", "home": "Home", "end": "End", "up": "Up",
             "down": "Down", "left": "Left", "right": "Right", "space": "Space", "slash": "/", "backspace": "BSpace"}


def _tmux_key(key: str) -> str:
    if key.startswith("ctrl+"):
        return "C-" + key[5:]
    return TMUX_KEYS.get(key, key)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./-]", arg) else arg


class Trial:
    def __init__(self, args: argparse.Namespace, db: Path):
        self.args, self.db = args, db
        cols, rows = (int(x) for x in args.size.split("x"))
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        command = [str(ENTRY), "--db", str(db), "--create", "--actor", args.actor]
        self.pane = Pane((cols, rows), command, env)
        self.report: list[dict] = []
        self.runs: dict[str, str] = {}  # what the trial made: play, critic, pairs, simpo, labels, human

    # ---- plumbing ----------------------------------------------------------------------------
    def step(self, name: str, fn: Callable[[], None]) -> bool:
        t0 = time.monotonic()
        try:
            fn()
            ok, note = True, ""
        except Failed as exc:
            ok, note = False, str(exc)
        except KeyError as exc:  # a run an earlier step should have made
            ok, note = False, f"skipped: an earlier step did not make its {exc} run"
        seconds = time.monotonic() - t0
        self.report.append({"step": name, "ok": ok, "seconds": round(seconds, 1), **({"error": note} if note else {})})
        print(f"{'✓' if ok else '✗'} {name} ({seconds:.1f} s)", flush=True)
        if not ok:
            print(note, flush=True)
        return ok

    def registry_runs(self, kind: str) -> list[dict]:
        from lactchain.runs.registry import Registry

        with Registry(self.db) as reg:
            return reg.list_runs(kind=kind)

    def wait_run(self, kind: str, status: str = "FINISHED", timeout: float = 900.0, after: set[str] = frozenset()) -> str:
        """The id of the newest `kind` run not in `after`, once it is `status` (the registry is
        the ground truth; the screen is checked for it separately)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            runs = [r for r in self.registry_runs(kind) if r["id"] not in after]
            if runs and runs[0]["status"] == status:
                return runs[0]["id"]
            if runs and runs[0]["status"] in ("FAILED", "KILLED") and status == "FINISHED":
                raise Failed(f"{kind} run {runs[0]['id']} ended {runs[0]['status']}: {runs[0].get('error')}")
            time.sleep(0.5)
        raise Failed(f"no {status} {kind} run after {timeout:g} s")

    def screen(self, digit: str, mark: str) -> None:
        """Switch screens as a person can from anywhere (alt+digit); `mark` is a text only
        that screen shows."""
        self.pane.keys(f"M-{digit}")
        self.pane.wait(mark, 10, f"the screen of key {digit}")

    def leave_field(self) -> None:
        """escape, then a pause: a key sent right after it would arrive as alt+key."""
        self.pane.keys("escape", pause=0.5)

    def choose_form(self, title: str) -> None:
        """The Jobs form select: focus it (n), open it, type the form's title, take it."""
        for _ in range(3):  # a busy machine may drop a key; look, then try again
            self.leave_field()
            self.pane.keys("n", "enter")
            self.pane.wait(lambda t: "▲" in _select_line(t), 5, "the list of job forms open")
            self.pane.type(title)
            self.pane.keys("enter", pause=0.4)
            if title in _select_line(self.pane.text()):
                time.sleep(0.5)  # its fields are mounted after the select changes
                return
        raise Failed(f"the {title} form could not be chosen; the pane shows:\n{self.pane.text()}")

    def job_form(self, command: str, values: dict[str, str]) -> None:
        """On Jobs: choose the form of `command`, fill fields (flag name -> value), launch."""
        from tui.jobs_bridge import JOB_FORMS

        forms = [f.command for f in JOB_FORMS]
        form = JOB_FORMS[forms.index(command)]
        self.screen("4", "New job")
        self.leave_field()
        self.choose_form(form.title)
        fields = {f.name: (i, f) for i, f in enumerate(form.fields)}
        for name, value in values.items():
            index, field = fields[name]
            for _ in range(3):  # a busy machine may move the focus late; check the preview, retry
                if form.title not in _select_line(self.pane.text()):  # a key landed on the form select
                    self.choose_form(form.title)
                self.leave_field()
                self.pane.keys("n", *["tab"] * (index + 1), pause=0.15)
                time.sleep(0.3)
                if field.choices:  # a select: open it, type the choice, take it
                    self.pane.keys("enter")
                    self.pane.type(value)
                    self.pane.keys("enter")
                else:
                    self.pane.keys("home", "ctrl+k")  # the field emptied
                    self.pane.type(value)
                try:  # in the command preview, or (80x24 cuts the preview) under the field's label
                    self.pane.wait(lambda t: f"--{name} {value}" in _argv(t)
                                   or _field_value(t, field.label).startswith(value[:20]), 3)
                    break
                except Failed:
                    continue
            else:
                raise Failed(f"--{name} {value} never showed in the command preview; the pane shows:\n"
                             f"{self.pane.text()}")
        self.pane.keys("ctrl+l")


def _critic_shown(text: str, run_id: str) -> bool:
    """The top bar says the critic `run_id` is loaded (at 80 columns its id is cut: a prefix)."""
    bar = text.splitlines()[0] if text else ""
    found = re.search(r"critic:? (\S+?)…? ✓", bar)
    return bool(found) and run_id.startswith(found.group(1).rstrip("…"))


def _field_value(text: str, label: str) -> str:
    """What the form shows under the field labelled `label` (the left pane's cell)."""
    cells = [line.split("│")[1].strip() if line.count("│") >= 2 else "" for line in text.splitlines()]
    for i, cell in enumerate(cells[:-1]):
        if cell == label:
            return cells[i + 1]
    return ""


def _select_line(text: str) -> str:
    """The Jobs form's command select (the first boxed line of the New job pane)."""
    for line in text.splitlines()[1:8]:
        if "▼" in line or "▲" in line:
            return line
    return ""


def _argv(text: str) -> str:
    """The Jobs form's command preview, joined (it wraps over lines)."""
    lines = [line.split("│")[1] if line.count("│") >= 2 else "" for line in text.splitlines()]
    joined = " ".join(x.strip() for x in lines)
    return joined[joined.find("lactchain "):] if "lactchain " in joined else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="120x40", help="terminal size, COLSxROWS (120x40, 80x24)")
    parser.add_argument("--actor", default="smollm2-135m", help="actor preset (tiny for the quick check)")
    parser.add_argument("--critic", default="minilm-l6", help="critic preset the critic job trains")
    parser.add_argument("--epochs", default="3", help="SimPO epochs (long enough to kill it mid-way)")
    parser.add_argument("--kill-after", type=float, default=3.0, help="seconds of SimPO training before the kill")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--keep", action="store_true", help="keep the registry folder (its path is printed)")
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        print("error: tmux is not installed; install it (apt install tmux) to run the trial", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="lactchain-trial-"))
    trial = Trial(args, folder / "registry.db")
    try:
        run_trial(trial)
    finally:
        trial.pane.stop()
        if args.keep:
            print(f"registry kept: {trial.db}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    ok = all(s["ok"] for s in trial.report)
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "actor": args.actor, "critic": args.critic,
                                         "passed": ok, "steps": trial.report}, indent=1))
    return 0 if ok else 1


def run_trial(trial: Trial) -> None:
    pane, args = trial.pane, trial.args
    pane.start()
    if not trial.step("console opens with the actor loaded",
                      lambda: pane.wait(f"{args.actor} ✓", 300, "the actor loaded in the top bar")):
        return

    def lab_step() -> None:
        trial.screen("1", "Episode")
        pane.keys("s")
        pane.wait(lambda t: "parse strict" in t or "parse lenient" in t or "parse failed" in t, 120,
                  "the completion and its parse")
        pane.wait("─completion─", 5)
    trial.step("lab: step streams the completion and its parse", lab_step)

    def play_job() -> None:
        before = _console_plays(trial)
        trial.job_form("play", {"episodes": "16", "start": "random"})
        trial.runs["play"] = trial.wait_run("play", "FINISHED", 900, after=before)
        pane.wait(trial.runs["play"], 20, "the play job's row")
    trial.step("jobs: play episodes (the critic's data)", play_job)

    def critic_job() -> None:
        trial.job_form("train-critic", {"episodes-from": trial.runs["play"], "critic": args.critic, "epochs": "2"})
        pane.wait(lambda t: "critic-" in t, 20, "the critic job's row")
        trial.runs["critic"] = trial.wait_run("critic", "FINISHED", 1800)
    trial.step("jobs: train a critic", critic_job)

    def load_critic() -> None:
        trial.screen("2", " · sort ")
        pane.keys("slash")
        pane.type(f"kind:critic")
        pane.keys("enter")
        pane.wait(trial.runs["critic"], 10)
        pane.keys("c")
        pane.wait(lambda t: _critic_shown(t, trial.runs["critic"]), 300, "the critic loaded in the top bar")
        trial.screen("1", "Episode")
        pane.keys("s", "t")  # a step, then the next tab: Critic
        pane.wait("V(s) =", 60, "the critic's value of the state")
        pane.keys("k")  # sample candidates here, ranked by the critic
        pane.wait(lambda t: re.search(r"\bA\b", t) is not None and "candidates" in t.lower(), 120,
                  "the candidates with their advantages")
        pane.keys("v")  # V(s) on every cell of the grid
    trial.step("runs: load the critic; the lab shows its values and ranks candidates", load_critic)


    def strategy() -> None:
        trial.screen("1", "Episode")
        pane.keys("ctrl+e")  # the editor, its text focused
        pane.wait("save version", 10, "the strategy editor")
        pane.keys("ctrl+end")
        pane.type(" Turn to face the goal, then move forward.")
        pane.keys("ctrl+s")  # a new version
        pane.wait(lambda t: re.search(r"saved.*version|version \d+ saved|v2\b", t) is not None, 20,
                  "the saved version")
        before = {r["id"] for r in trial.registry_runs("eval")}
        pane.keys("ctrl+o")  # evaluate it: asks how many states
        pane.wait("states", 10, "the states question")
        pane.keys("enter")  # the quick 8-state check
        trial.runs["eval"] = trial.wait_run("eval", "FINISHED", 900, after=before)
        pane.wait(lambda t: re.search(r"\d+% of 8", t) is not None, 60, "the version's score (x% of 8) in the table")
    trial.step("lab: edit, save and evaluate a strategy; its score shows", strategy)

    def pairs_job() -> None:
        trial.job_form("collect-pairs", {"critic-run": trial.runs["critic"], "states": "8"})
        trial.runs["pairs"] = trial.wait_run("pairs", "FINISHED", 1800)
        pane.wait(trial.runs["pairs"], 20, "the pairs job's row")
    trial.step("jobs: collect pairs ranked by the critic", pairs_job)

    def simpo_kill_resume() -> None:
        trial.job_form("train-actor", {"loss": "simpo", "pairs-from": trial.runs["pairs"], "epochs": args.epochs})
        end = time.monotonic() + 600
        while time.monotonic() < end and not any(r["status"] == "RUNNING" for r in trial.registry_runs("actor")):
            time.sleep(0.3)
        killed = trial.registry_runs("actor")[0]["id"]
        time.sleep(args.kill_after)
        trial.leave_field()
        pane.keys("escape", pause=0.5)  # the jobs table (its newest row selected after a launch)
        pane.keys("K")
        pane.wait("y", 10, "the kill question")
        pane.keys("y")
        trial.wait_run("actor", "KILLED", 300)
        pane.wait(lambda t: killed in t and "KILLED" in t, 20, "the KILLED row")
        pane.keys("R")
        pane.wait(lambda t: "resum" in t.lower(), 20, "the resume said")
        trial.runs["simpo"] = trial.wait_run("actor", "FINISHED", 1800, after={killed})
    trial.step("jobs: SimPO on the pairs, killed, resumed to the end", simpo_kill_resume)

    def label_and_train() -> None:
        trial.screen("3", "A better")
        for key in "ababa":
            pane.keys(key, pause=0.6)
        pane.wait("labels in labels-", 20, "where the labels went")
        labels = re.search(r"labels in (labels-[0-9a-f]+)", pane.text()).group(1)
        trial.runs["labels"] = labels
        before = {r["id"] for r in trial.registry_runs("actor")}
        trial.screen("4", "New job")
        trial.choose_form("Train actor")
        pane.wait(lambda t: _field_value(t, "Pairs runs") == labels and _field_value(t, "Labeler").startswith("human"),
                  10, "the Train actor form pre-filled with the labels")
        pane.keys("ctrl+l")
        trial.runs["human"] = trial.wait_run("actor", "FINISHED", 1800, after=before)
    trial.step("label 5 pairs by hand and train on them", label_and_train)

    def compare() -> None:
        trial.screen("2", " · sort ")
        pane.keys("slash", "home", "ctrl+k")
        pane.type("kind:actor")
        pane.keys("enter", pause=0.5)
        pane.wait(trial.runs["simpo"], 10)
        pane.keys("home", "space")  # the first row marked
        pane.wait("1 marked", 10, "one run marked")
        for _ in range(3):
            pane.keys("down", "space")
            if "2 marked" in pane.wait(lambda t: "marked" in t, 5):
                break
            pane.keys("space")  # that row was the marked one: unmark it, go on down
        pane.wait("2 marked", 5, "two runs marked")
        pane.keys("=")
        pane.wait(lambda t: "differ" in t.lower(), 20, "the comparison of two runs")
        pane.keys("escape", pause=0.5)
    trial.step("runs: compare two runs", compare)

    def reopen() -> None:
        pane.keys("M-2")
        shown = pane.wait("kind:actor", 10)
        pane.keys("ctrl+q")
        end = time.monotonic() + 30
        while pane.alive() and time.monotonic() < end:
            time.sleep(0.2)
        pane.start()
        pane.wait(f"{args.actor} ✓", 300, "the actor loaded again")
        pane.wait(lambda t: _critic_shown(t, trial.runs["critic"]), 300, "the critic loaded again")
        pane.keys("M-2")
        pane.wait("kind:actor", 10, "the Runs filter as it was left")
        pane.keys("M-4")
        pane.wait(lambda t: "Train actor" in _select_line(t), 10, "the Jobs form as it was left (Train actor)")
        del shown
    trial.step("quit and reopen: the same models, filter and screen state", reopen)


def _console_plays(trial: Trial) -> set[str]:
    """The play runs the console's own Lab episodes made (not the play job's)."""
    return {r["id"] for r in trial.registry_runs("play")}


if __name__ == "__main__":
    sys.exit(main())
