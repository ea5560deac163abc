"""Decision transformer: act an instruction (issue 13), a modal over the Archive screen.

The newest FINISHED `dt` run of the registry acts the typed instruction, text only
(no BD), from the selected trajectory's start pose (else the scene's start): enter runs
it in a thread (checkpoint load, once, then the rollout); the path then plays on the
grid move by move, beside it the instruction's landmark order, the produced path's
annotations and landmark order, ✓/✗ whether they match, the move count and whether the
model said STOP. Once it has acted the focus leaves the Input: `←`/`→` step, `home`/`end`
jump, space replays; `tab` goes back to the instruction; escape closes.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from lactchain.envs import State
from tui.annotations import append_annotations
from tui.screens.replay import StepReplay
from tui.widgets.compact_grid import CompactGridView
from tui.widgets.grid import GridModel, fit_cell_width

PLAY_S = 0.2  # autoplay: seconds per move
NO_RUN = "No finished decision-transformer run: `lactchain dt train --archive RUN` creates one."
MARKS = {True: ("✓ order matches", "bold green"), False: ("✗ order differs", "bold red")}


def newest_dt_run(reg: Any) -> dict | None:
    """The newest FINISHED `dt` run (None: none yet)."""
    runs = reg.list_runs(kind="dt", status="FINISHED", limit=1)
    return dict(runs[0]) if runs else None


def _pose(pose: Any) -> dict:
    if isinstance(pose, State):
        return {"x": pose.x, "y": pose.y, "orientation": pose.orientation}
    if isinstance(pose, dict):
        return {"x": int(pose["x"]), "y": int(pose["y"]), "orientation": str(pose.get("orientation", "east"))}
    x, y, o = pose
    return {"x": int(x), "y": int(y), "orientation": str(o)}


class DtInstructScreen(StepReplay, ModalScreen[None]):
    """`row`: the archive's selected trajectory (its start and rule description) or None;
    `scene`: the archive's scene (the DT must have learned it) or None."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("left", "step(-1)", "Back", show=False),
        Binding("right", "step(1)", "Step", show=False),
        Binding("home", "jump('start')", "Start", show=False),
        Binding("end", "jump('end')", "End", show=False),
        Binding("space", "play", "Play", show=False),
    ]

    def __init__(self, row: dict | None = None, scene: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.row = row
        self.scene = scene
        self.dt_run: dict | None = None
        self.loaded: tuple[str, Any, Any] | None = None  # (run id, model, text encoder)
        self.result: dict | None = None
        self.error: str | None = None
        self.acting = False
        self.t = 0
        self.playing = False

    # ---- layout -------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Vertical(id="dt-dialog"):
            yield Static("looking for a decision-transformer run…", id="dt-run")
            yield Input(value=self._default_text(), placeholder="an instruction: Passes the sofa, then the bed, "
                        "and stops north of the fridge.", id="dt-instruction")
            yield Static("", id="dt-message")
            with Horizontal(id="dt-row"):
                yield CompactGridView(id="dt-grid")
                with VerticalScroll(id="dt-result-box"):
                    yield Static("", id="dt-result")
            yield Static("enter acts · then ←/→ step, home/end, space replays · tab: the instruction · esc closes", id="dt-hint")

    def _default_text(self) -> str:
        if self.row is None:
            return ""
        try:
            from lactchain.archive.describe import describe_rule

            return describe_rule(self.row)
        except Exception:  # noqa: BLE001 - a row without a BD: no default
            return ""

    def on_mount(self) -> None:
        self.query_one("#dt-dialog").border_title = "Decision transformer: act an instruction"
        self.query_one("#dt-grid").border_title = "Grid"
        self.query_one("#dt-result-box").border_title = "Produced"
        self.start_replay_timer(PLAY_S)
        self.query_one("#dt-grid").display = False
        self.query_one("#dt-result-box").can_focus = False
        self.query_one("#dt-instruction", Input).focus()
        self.find_run()

    @work(exclusive=True, group="dt-find", exit_on_error=False, name="find dt run")
    async def find_run(self) -> None:
        try:
            run = await self.app.registry.call(newest_dt_run)
        except Exception as exc:  # noqa: BLE001
            self._set_run_line(f"registry unavailable: {exc}", "bold red")
            return
        self.dt_run = run
        if run is None:
            self._set_run_line(NO_RUN, "italic")
            return
        bits = [f"dt run {run['id']}"]
        if run.get("name"):
            bits.append(str(run["name"]))
        bits.append("text only · from " + self._start_label())
        self._set_run_line(" · ".join(bits), "")

    def _start_label(self) -> str:
        p = _pose(self._start())
        return f"({p['x']},{p['y']}) facing {p['orientation']}"

    def _start(self) -> Any:
        if self.row is not None and self.row.get("path"):
            return self.row["path"][0]
        if self.row is not None and self.row.get("start"):
            return self.row["start"]
        if self.scene is not None:
            return self.scene.start
        return (0, 0, "east")

    def _set_run_line(self, text: str, style: str) -> None:
        self.query_one("#dt-run", Static).update(Text(text, style=style))

    def _message(self, text: str, style: str = "bold red") -> None:
        self.error = text or None
        self.query_one("#dt-message", Static).update(Text(text, style=style))

    # ---- acting -------------------------------------------------------------------
    @on(Input.Submitted, "#dt-instruction")
    def _submitted(self, event: Input.Submitted) -> None:
        self.act(event.value)

    def act(self, instruction: str) -> None:
        instruction = instruction.strip()
        if not instruction:
            self._message("type an instruction first (e.g. Passes the sofa, and stops at the bed.)")
            return
        if self.dt_run is None:
            self._message(NO_RUN, "italic")
            return
        if self.acting:
            self._message("already acting…", "yellow")
            return
        self.acting = True
        self._stop()
        self._message("loading the model and acting…", "yellow")
        self._act_worker(str(self.dt_run["id"]), instruction, _pose(self._start()))

    @work(thread=True, exclusive=True, group="dt-act", exit_on_error=False, name="dt act")
    def _act_worker(self, run_id: str, instruction: str, start: dict) -> None:
        call = self.app.call_from_thread
        try:
            if self.loaded is None or self.loaded[0] != run_id:
                from lactchain.archive.dt.evaluate import load_run

                _, _, model, text, _ = self.app.registry.call_sync(load_run, run_id)
                self.loaded = (run_id, model, text)
            _, model, text = self.loaded
            from lactchain.archive.dt.data import SceneCodec

            learned = SceneCodec(model.cfg.scene).scene
            if self.scene is not None and learned.as_dict() != self.scene.as_dict():
                raise ValueError(f"dt run {run_id} was trained on scene {learned.name!r}, this archive is "
                                 f"{self.scene.name!r}: train one on it (`lactchain dt train --archive RUN`)")
            from lactchain.archive.dt.evaluate import act_instruction

            result = act_instruction(model, text, start, instruction, use_bd=False)
        except Exception as exc:  # noqa: BLE001 - one line on screen, never a crash
            text_ = str(exc) if isinstance(exc, (OSError, ValueError, KeyError)) else f"{type(exc).__name__}: {exc}"
            call(self._failed, text_)
            return
        call(self._acted, result)

    def _failed(self, error: str) -> None:
        self.acting = False
        self._message(error)

    def _acted(self, result: dict) -> None:
        self.acting = False
        self.result = result
        self._message("", "")
        grid = self.query_one("#dt-grid", CompactGridView)
        scene = result["scene"]
        grid.cell_width = fit_cell_width(scene.size, 5, 28)
        grid.border_title = f"{scene.name} {scene.size}x{scene.size}"
        grid.display = True
        self.query_one("#dt-row").styles.height = max(10, self._grid_height(grid))
        self.t = 0
        self.set_focus(None)  # the stepping keys are the screen's now (tab: back to the Input)
        self.show_result()
        self.show_step()
        if self.last > 0:
            self.start_playing()

    def _grid_height(self, grid: CompactGridView) -> int:
        if self.result is None:
            return 10
        scene = self.result["scene"]
        grid.model = GridModel(size=scene.size, goal=tuple(scene.goal), landmarks=scene.landmarks, walls=scene.walls)
        return grid.get_content_height(None, None, 0) + 2

    @property
    def last(self) -> int:
        return len(self.result["path"]) - 1 if self.result else 0

    # ---- drawing ------------------------------------------------------------------
    def show_step(self) -> None:
        rs = self.result
        if rs is None:
            return
        scene, path, t = rs["scene"], rs["path"], self.t
        grid = self.query_one("#dt-grid", CompactGridView)
        grid.model = GridModel(size=scene.size, goal=tuple(scene.goal), agent=path[t], path=tuple(path[:t + 1]),
                               start=path[0], landmarks=scene.landmarks, walls=scene.walls)
        self.show_result()

    def show_result(self) -> None:
        rs = self.result
        out = Text()
        if rs is None:
            self.query_one("#dt-result", Static).update(out)
            return
        t, path = self.t, rs["path"]
        here = path[t]
        out.append(f"step {t}/{self.last}", style="bold")
        out.append("  ▶ playing" if self.playing else "  ■ paused", style="bold yellow" if self.playing else "dim")
        if t > 0:
            out.append(f"\n{rs['moves'][t - 1]} → ", style="dim")
        else:
            out.append("\nstart: ", style="dim")
        out.append(f"({here.x},{here.y}) facing {here.orientation}")
        n = len(rs["moves"])
        end = "said STOP" if rs["stopped"] else "reached the goal" if rs["goal"] else "no STOP (step cap)"
        out.append(f"\n{n} move{'s' if n != 1 else ''} · {end}", style="bold")
        out.append("\ninstruction order ", style="dim")
        out.append(" > ".join(rs["mentioned"]) or "(none)", style="bold")
        out.append("\npath order        ", style="dim")
        out.append(" > ".join(rs["reference"]) or "(none)", style="bold")
        mark, style = MARKS[bool(rs["order_match"])]
        out.append(f"\n{mark}", style=style)
        append_annotations(out, rs["annotations"], t)
        self.query_one("#dt-result", Static).update(out)

    # ---- actions ------------------------------------------------------------------
    def replay_last(self) -> int | None:
        return None if self.result is None else self.last

    def action_close(self) -> None:
        self._stop()
        self.dismiss(None)
