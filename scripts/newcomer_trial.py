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
FORMS = ("Train critic", "Collect pairs", "Train actor", "Evaluate", "Pipeline", "Play episodes")  # the Jobs select


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
        for key in keys:
            self.tmux("send-keys", "-t", self.session, key)
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

    def screen(self, digit: str, name: str) -> None:
        """Switch screens as a person can from anywhere: escape (leaves a field), then the digit."""
        self.pane.keys("escape", digit)
        self.pane.wait(lambda t: _active_screen(t, name), 10, f"the {name} screen")

    def job_form(self, title: str, values: dict[str, str]) -> None:
        """On Jobs: choose the form, fill the named fields (label -> value), launch (ctrl+l)."""
        self.screen("4", "Jobs")
        self.pane.keys("n", "enter")  # the form select, opened
        self.pane.wait(title, 5)
        for _ in range(len(FORMS) + 8):  # up to the top, then down to the form
            self.pane.keys("up", pause=0.03)
        for _ in range(FORMS.index(title)):
            self.pane.keys("down", pause=0.05)
        self.pane.keys("enter")
        self.pane.wait(lambda t: title in t, 5, f"the {title} form")
        for label, value in values.items():
            self.fill(label, value)

    def fill(self, label: str, value: str, limit: int = 14) -> None:
        """Tab from the form select to the field labelled `label`; replace its text."""
        self.pane.keys("n")  # back at the select
        for _ in range(limit):
            self.pane.keys("tab", pause=0.1)
            if _focused_label(self.pane.text()) == label:
                break
        else:
            raise Failed(f"no field labelled {label!r} reached by tab; the pane shows:\n{self.pane.text()}")
        self.pane.keys("home", "ctrl+k")
        self.pane.type(value)


def _active_screen(text: str, name: str) -> bool:
    """The top bar marks the active screen (its name shown in reverse; in plain text the
    screen's own pane titles tell)."""
    marks = {"Lab": ("Episode", "Strategy"), "Runs": ("Info",), "Jobs": ("New job",), "Label": ("pair",),
             "Archive": ("archive",)}
    return any(m in text for m in marks.get(name, (name,)))


def _focused_label(text: str) -> str | None:
    return None  # replaced once the form's focus is readable from the pane


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="120x40", help="terminal size, COLSxROWS (120x40, 80x24)")
    parser.add_argument("--actor", default="smollm2-135m", help="actor preset (tiny for the quick check)")
    parser.add_argument("--critic", default="minilm-l6", help="critic preset the critic job trains")
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
    pane = trial.pane
    pane.start()
    trial.step("console opens with the actor loaded",
               lambda: pane.wait(f"{trial.args.actor} ✓", 300, "the actor loaded in the top bar"))


if __name__ == "__main__":
    sys.exit(main())
