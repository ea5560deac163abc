"""The real `lactchain-tui` entry point in tmux: driven with send-keys through the
command palette (run an episode, open runs), read back with capture-pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ENTRY = Path(sys.executable).with_name("lactchain-tui")


SOCKET = f"lactchain-test-{os.getpid()}"  # a private tmux server: never the user's own


def _tmux(*args: str, check: bool = True) -> str:
    # env=os.environ, not the inherited C environment: GNU readline (imported by some
    # test tooling) exports COLUMNS=80/LINES=24 there, which would pin the TUI to 80x24.
    out = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check,
                         env=dict(os.environ))
    return out.stdout


class Pane:
    def __init__(self, session: str):
        self.session = session

    def text(self) -> str:
        return _tmux("capture-pane", "-p", "-t", self.session, check=False)

    def send(self, *keys: str) -> None:
        _tmux("send-keys", "-t", self.session, *keys)

    def type(self, text: str) -> None:
        _tmux("send-keys", "-t", self.session, "-l", text)

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if needle in text:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} never appeared; the pane shows:\n{text}")

    def wait_stable(self, needle: str, quiet: float = 0.4, timeout: float = 30.0) -> str:
        """Wait for `needle`, then until the pane stops changing for `quiet` seconds
        (the palette fills its hit list asynchronously)."""
        text = self.wait_for(needle, timeout)
        deadline = time.monotonic() + timeout
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.text()
            if now != text:
                text, stable_since = now, time.monotonic()
            elif time.monotonic() - stable_since >= quiet:
                return text
        return text

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", SOCKET, "has-session", "-t", self.session], capture_output=True,
                              env=dict(os.environ)).returncode == 0


@pytest.fixture
def pane(tmp_path: Path):
    session = f"lactchain-tui-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "runs" / "registry.db"
    db.parent.mkdir(parents=True)  # an explicit --db must be in an existing folder
    entry = str(ENTRY) if ENTRY.exists() else shutil.which("lactchain-tui")
    assert entry, "the lactchain-tui console script is not installed"
    cmd = f"env -u COLUMNS -u LINES {entry} --db {db} --actor oracle"
    env = {"TERM": "xterm-256color", "LACTCHAIN_RUNS": str(tmp_path / "runs"), "COLORTERM": ""}
    env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", *env_args, cmd)
    p = Pane(session)
    p.started = time.monotonic()
    try:
        yield p
    finally:
        _tmux("kill-server", check=False)


def test_tui_in_tmux_palette_episode_and_runs(pane):
    pane.wait_for("1 Lab", timeout=20)
    startup = time.monotonic() - pane.started
    print(f"first screen after {startup:.2f}s (process start to painted top bar)")
    pane.wait_for("Grid", timeout=20)  # the body follows the top bar (a frame apart on a loaded machine)
    pane.wait_for("actor: oracle ✓")
    pane.wait_for("Actor ──────────────────────────────")  # resized to the 120-column window
    # Run an episode through the command palette.
    pane.send("C-p")
    pane.wait_for("Search for commands")
    pane.type("run episode")
    pane.wait_stable("Run episode")
    pane.send("Enter")
    text = pane.wait_for("at goal", timeout=30)
    assert "FFFLFFF" in text and "+93" in text  # the episode table: one optimal action
    # Open the runs screen through the palette.
    pane.send("C-p")
    pane.wait_for("Search for commands")
    pane.type("open runs")
    pane.wait_stable("Open runs")
    pane.send("Enter")
    text = pane.wait_for("sort created", timeout=30)
    # the episode run by hand in the Lab is in the registry, as a play run
    assert "key metrics" in text and "1/1 runs" in text and "console episodes" in text
    # ctrl+q quits the TUI (and with it the tmux session).
    pane.send("C-q")
    deadline = time.monotonic() + 10
    while pane.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pane.alive()
