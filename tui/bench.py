"""`lactchain bench console`: how fast the console answers, measured by driving the real app
headless with Textual's Pilot (no model: the oracle actor), idle and with a job running.

    python -m tui.bench --json [--rounds 5] [--no-job]

Figures: first paint (start -> the Lab drawn), screen switch (keys 1-5, every visit after
the first; the first visits, which mount a screen, apart), ctrl+q (press -> the app gone),
kill (K + y on the Jobs screen -> its table says KILLED) and launch (ctrl+l on the Jobs
screen's Play form -> the job started through the job layer, idle pass only).

A switch is timed from the key to the last frame it paints (`switch_*_ms`: what a person
sees; each frame pays the terminal encoding that headless mode skips), and from the key to
Pilot's return (`roundtrip_*_ms`: adds Pilot's three idle waits of >= 20 ms each, a harness
cost). `stock_mask` repeats the idle pass with Textual's stock 50 ms repaint hold on every
switch, the console's behaviour before it painted mounted screens at once.

The job is a real detached `lactchain train-actor --actor tiny --loss grpo` in the
benchmark's own registry, training while the console is measured. Targets from issue
29: switch median < 100 ms and max < 300 ms, first paint < 1 s, ctrl+q < 1 s, KILLED
within 2 s; from issue 47: launch feedback within 100 ms."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TARGETS = {"switch_median_ms": 100.0, "switch_max_ms": 300.0, "first_paint_s": 1.0, "quit_s": 1.0, "kill_s": 2.0,
           "launch_ms": 100.0, "launch_row_ms": 300.0, "quit_loaded_s": 0.5}
SCREENS = ("2", "3", "4", "5", "1")


def _timed_app(db: Path, stock_mask: bool) -> Any:
    """The console on the registry `db`, recording when each frame goes to the terminal."""
    from textual._compositor import CompositorUpdate

    from tui.app import LactChainApp
    from tui.models import OracleActor

    class TimedApp(LactChainApp):
        PAINT_MOUNTED_SWITCH_AT_ONCE = not stock_mask

        def __init__(self) -> None:
            super().__init__(actor_spec="oracle", actor=OracleActor(), load_models=False, db_path=db)
            self.frames: list[float] = []

        def _display(self, screen: Any, renderable: Any) -> None:
            if renderable is not None and not self._batch_count:
                if isinstance(renderable, CompositorUpdate):
                    renderable.render_segments(self.console)  # the encoding a real terminal pays
                self.frames.append(time.perf_counter())
            super()._display(screen, renderable)

    return TimedApp


async def measure(db: Path, rounds: int, job: str | None, stock_mask: bool = False) -> dict[str, Any]:
    """One pass of the figures on the registry `db` (with the run `job` live, if given)."""
    app = _timed_app(db, stock_mask)()
    t0 = time.perf_counter()
    out: dict[str, Any] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        out["first_paint_s"] = time.perf_counter() - t0
        first, painted, roundtrip = [], [], []
        by_key: dict[str, list[int]] = {}
        for r in range(rounds):
            for key in SCREENS:
                s0 = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                s1 = time.perf_counter()
                frames = [t for t in app.frames if s0 <= t <= s1]
                if r == 0:
                    first.append((s1 - s0) * 1000)
                else:
                    roundtrip.append((s1 - s0) * 1000)
                    painted.append(((frames[-1] if frames else s1) - s0) * 1000)
                    by_key.setdefault(key, []).append(round(painted[-1]))
        out["first_visit_ms"] = {"median": statistics.median(first), "max": max(first)}
        out["switch_median_ms"] = statistics.median(painted) if painted else None
        out["switch_max_ms"] = max(painted) if painted else None
        out["switch_ms_by_key"] = by_key
        out["roundtrip_median_ms"] = statistics.median(roundtrip) if roundtrip else None
        out["roundtrip_max_ms"] = max(roundtrip) if roundtrip else None
        if job is not None:
            out["kill_s"] = await _kill(pilot, job)
        elif not stock_mask:
            out["launch_ms"], out["launch_row_ms"] = await _launch(pilot)
        q0 = time.perf_counter()
        await pilot.press("ctrl+q")
    out["quit_s"] = time.perf_counter() - q0
    return out


async def _launch(pilot: Any) -> tuple[float | None, float | None]:
    """ctrl+l on the Jobs screen's Play form (tiny actor, one episode): milliseconds until the
    job is started (its run SCHEDULED, the detached child spawned) and the form says so, and
    until its row is in the jobs table (what a person looks for)."""
    from textual.widgets import DataTable, Input, Select

    await pilot.press("4")
    await pilot.pause()
    screen = pilot.app.screen
    screen.query_one("#job-command", Select).value = "play"
    await pilot.pause()
    screen.query_one("#play--actor", Input).value = "tiny"
    screen.query_one("#play--episodes", Input).value = "1"
    await pilot.pause()
    table = screen.query_one("#jobs-table", DataTable)
    t0 = time.perf_counter()
    await pilot.press("ctrl+l")  # Pilot's own waits (~100 ms) are not what a person waits for:
    launched_ms = row_ms = None  # the screen stamps when it shows the started job
    while time.perf_counter() - t0 < 30:
        if launched_ms is None and screen.last_launch is not None and screen.last_launch_at is not None:
            launched_ms = (screen.last_launch_at - t0) * 1000
        if launched_ms is not None and screen.last_launch.run_id in {str(k.value) for k in table.rows}:
            row_ms = (time.perf_counter() - t0) * 1000
            break
        await asyncio.sleep(0.002)
    if launched_ms is not None:  # the one-episode job ends before its registry folder goes away
        from lactchain.jobs import ACTIVE
        from lactchain.runs.registry import Registry

        with Registry(pilot.app.db_path) as reg:
            for _ in range(600):
                if reg.get_run(screen.last_launch.run_id)["status"] not in ACTIVE:
                    break
                await asyncio.sleep(0.1)
    return launched_ms, row_ms


async def _kill(pilot: Any, run_id: str) -> float | None:
    """K then y on the Jobs screen; seconds until its table shows the run KILLED."""
    from textual.widgets import DataTable

    app = pilot.app
    await pilot.press("4")
    await pilot.pause()
    table = app.screen.query_one("#jobs-table", DataTable)
    for _ in range(100):  # the row appears on the screen's next refresh
        ids = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        if run_id in ids:
            break
        await asyncio.sleep(0.1)
    else:
        return None
    table.focus()
    table.move_cursor(row=ids.index(run_id))
    await pilot.pause()
    t0 = time.perf_counter()
    await pilot.press("K")
    await pilot.pause()
    await pilot.press("y")
    while time.perf_counter() - t0 < 30:
        await pilot.pause()
        rows = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)}
        if rows.get(run_id) == "KILLED":
            return time.perf_counter() - t0
        await asyncio.sleep(0.05)
    return None


def _start_job(db: Path) -> str:
    """A real detached train-actor job on the tiny actor (issue 29's load): GRPO sampling
    from the start states of a short tiny `play` run, with steps enough to outlast the
    measurement (it is killed at the end). Returns once it has logged a training step.
    Both start through the job layer, as the console's own launches do."""
    from lactchain.jobs import ACTIVE
    from lactchain.jobs.control import start_job
    from lactchain.runs.registry import Registry

    with Registry(db) as reg:
        play = start_job(reg, "play", {"actor": "tiny", "episodes": 4, "envs": 1})
        for _ in range(1500):
            if reg.get_run(play)["status"] not in ACTIVE:
                break
            time.sleep(0.2)
        if reg.get_run(play)["status"] != "FINISHED":
            raise RuntimeError(f"the play run {play} ended {reg.get_run(play)['status']}")
        job = start_job(reg, "train-actor", {"actor": "tiny", "loss": "grpo", "rollouts_from": play,
                                             "max_steps": 100000})
        for _ in range(1500):
            run = reg.get_run(job)
            if run["status"] not in ACTIVE:
                raise RuntimeError(f"job {job} ended {run['status']} before the measurement")
            if run["status"] == "RUNNING" and reg.counts(job)["metrics"]:
                return job
            time.sleep(0.2)
    raise RuntimeError(f"job {job} logged no training step in 5 minutes")


def _teardown_s(actor: str, leave: bool) -> float:
    """Seconds from the end of a console session to the end of its process, with `actor`
    loaded: `tui.app.leave` (what `lactchain-tui` does) or Python's own exit (what it did)."""
    import subprocess
    import sys

    end = "from tui.app import leave; leave(0)" if leave else "sys.exit(0)"
    code = (f"import sys, time; from lactchain.models.actor import Actor; actor = Actor.load({actor!r}); "
            f"actor.generate(['x'], constrained=True); print(repr(time.time()), flush=True); {end}")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    said = child.stdout.readline()
    child.wait(timeout=600)
    ended = time.time()
    if child.returncode != 0 or not said.strip():
        raise RuntimeError(f"the {actor} actor did not load (exit {child.returncode})")
    return ended - float(said)


def quit_loaded(actor: str) -> dict[str, Any]:
    """The quit with a real actor loaded, side by side: leave() against Python's exit."""
    return {"actor": actor, "quit_loaded_s": _teardown_s(actor, leave=True),
            "python_exit_s": _teardown_s(actor, leave=False)}


def run(rounds: int = 5, with_job: bool = True, quit_actor: str | None = "smollm2-135m") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lactchain-bench-console-") as folder:
        db = Path(folder) / "registry.db"
        from lactchain.runs.registry import Registry

        Registry(db).close()
        result: dict[str, Any] = {"rounds": rounds, "size": "120x40", "targets": TARGETS,
                                  "cpu_count": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]}
        result["idle"] = asyncio.run(measure(db, rounds, None))
        if quit_actor:
            result["idle"].update(quit_loaded(quit_actor))
        result["stock_mask"] = asyncio.run(measure(db, rounds, None, stock_mask=True))
        if with_job:
            job = _start_job(db)
            result["under_job"] = asyncio.run(measure(db, rounds, job))
            result["under_job"]["job"] = "lactchain train-actor --actor tiny --loss grpo (detached, training)"
        result["met"] = {phase: {k: (v is not None and result[phase].get(k) is not None and result[phase][k] <= v)
                                 for k, v in TARGETS.items() if k in result[phase]}
                         for phase in ("idle", "under_job") if phase in result}
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="lactchain bench console", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="visits of every screen (the first mounts them)")
    p.add_argument("--no-job", action="store_true", help="measure idle only (no job running)")
    p.add_argument("--quit-actor", default="smollm2-135m",
                   help="actor loaded for the quit measure (the default actor; 'none' skips it)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.rounds < 2:
        p.error("--rounds must be >= 2 (the first visit of each screen is measured apart)")
    result = run(args.rounds, not args.no_job, None if args.quit_actor.lower() == "none" else args.quit_actor)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for phase in ("idle", "stock_mask", "under_job"):
        if phase in result:
            r = result[phase]
            print(f"{phase}: first paint {r['first_paint_s']:.2f} s, switch median {r['switch_median_ms']:.0f} ms "
                  f"max {r['switch_max_ms']:.0f} ms (Pilot round trip {r['roundtrip_median_ms']:.0f} ms), "
                  f"quit {r['quit_s']:.2f} s"
                  + (f", killed shown in {r['kill_s']:.2f} s" if r.get("kill_s") is not None else "")
                  + (f", launch {r['launch_ms']:.0f} ms" if r.get("launch_ms") is not None else "")
                  + (f", quit with {r['actor']} loaded {r['quit_loaded_s']:.2f} s (Python's exit "
                     f"{r['python_exit_s']:.2f} s)" if r.get("quit_loaded_s") is not None else ""))


if __name__ == "__main__":
    main()
