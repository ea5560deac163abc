"""Archive: browse a trajectory archive (`lactchain archive fill`, issue 12) and replay
its trajectories on the grid.

The selector picks an archive run (newest first; the screen opens on the newest); the
table lists its trajectories: verification mark, BD key (final cell | landmarks
visited, in order), policy kind, moves, return, the first description. The filter
keeps rows whose BD key, landmarks, policy kind or descriptions contain every term
(`landmark:sofa`, `policy:random`, `bd:3,3`, `desc:fridge`, `verify:fail` restrict a
term to one field). `v` re-reads the archive file and replays every trajectory
(`lactchain.archive.trajectories.verify`, in a thread): ✓/✗ per row, "N/M verify", and the
selected row's first divergence under the grid.

The highlighted row plays on the grid pane: `←`/`→` step one move, `home`/`end` jump,
space plays/pauses; beside it the annotations (the current one, the last with
t <= step, highlighted) and the descriptions (✓/✗: landmark order correct).
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Select, Static

from lactchain.envs import State
from lactchain.envs.scenes import get_scene
from tui.annotations import append_annotations, current_annotation  # noqa: F401  (re-exported)
from tui.commands import bindings_for
from tui.format import clip, fmt_ts
from tui.screens.base import BaseScreen
from tui.screens.replay import StepReplay
from tui.widgets.footer import FittedFooter
from tui.widgets.compact_grid import CompactGridView
from tui.widgets.grid import GridModel, fit_cell_width
from tui.widgets.tables import reset_table, sync_table
from tui.widgets.topbar import TopBar

COLUMNS = (("ok", "✓"), ("key", "BD key"), ("policy", "policy"), ("moves", "moves"), ("return", "return"),
           ("desc", "description"))
DESC_CHARS = 60  # at most, in the table's description column (the whole text: the Trajectory pane)
PLAY_S = 0.4  # autoplay: seconds per move
RUNS_LIMIT = 200
EMPTY_HINT = "No archive run yet: `lactchain archive fill --scene flat` creates one (then f5)."
FIELDS = {"landmark": "landmark", "lm": "landmark", "policy": "policy", "kind": "policy", "bd": "key", "key": "key",
          "desc": "desc", "verify": "verify", "verified": "verify"}
ORDER_MARKS = {True: ("✓", "bold green"), False: ("✗", "bold red")}  # a description's landmark order
PASS_WORDS = ("ok", "pass", "yes", "✓", "true")
FAIL_WORDS = ("fail", "no", "✗", "x", "false", "bad")


# ---- pure helpers (pinned in tests) -----------------------------------------------

def parse_filter(query: str) -> tuple[list[str], list[tuple[str, str]]]:
    """'sofa policy:random landmark:bed' -> (free terms, [(field, text)]); all must match,
    case-insensitive substrings; quotes keep words together. A prefix that names no
    field is free text."""
    terms: list[str] = []
    fields: list[tuple[str, str]] = []
    words = query.lower().split()
    for text in (query.lower(), query.lower() + '"'):  # desc:"stops at the bed" is one term, open or closed
        try:
            words = shlex.split(text)
            break
        except ValueError:
            continue
    for term in words:
        name, sep, want = term.partition(":")
        if sep and name in FIELDS and want:
            fields.append((FIELDS[name], want))
        else:
            terms.append(term)
    return terms, fields


def _descriptions(row: dict) -> list[dict]:
    return [d for d in (row.get("descriptions") or []) if isinstance(d, dict)]


def _visited(row: dict) -> list[str]:
    bd = row.get("bd") if isinstance(row.get("bd"), dict) else {}
    return [str(v) for v in (bd.get("visited") or [])]


def _policy(row: dict) -> str:
    policy = row.get("policy") if isinstance(row.get("policy"), dict) else {}
    return str(policy.get("kind") or "?")


def row_key(row: dict) -> str:
    """The BD key as stored, else rebuilt from the BD ("final|visited")."""
    if row.get("key"):
        return str(row["key"])
    bd = row.get("bd") if isinstance(row.get("bd"), dict) else {}
    final = bd.get("final") or ["?", "?"]
    return f"{final[0]},{final[1]}|{'>'.join(_visited(row))}"


def row_matches(row: dict, terms: list[str], fields: list[tuple[str, str]], verdict: Any = None,
                verified: bool = False) -> bool:
    """Does an archive row pass the filter (see `parse_filter`)? `verdict`: the row's
    verification (None passes, a text fails) when `verified`."""
    key = row_key(row).lower()
    marks = [v.lower() for v in _visited(row)]
    policy = _policy(row).lower()
    descs = [str(d.get("text") or "").lower() for d in _descriptions(row)]
    for name, want in fields:
        if name == "landmark" and not any(want in m for m in marks):
            return False
        if name == "policy" and want not in policy:
            return False
        if name == "key" and want not in key:
            return False
        if name == "desc" and not any(want in d for d in descs):
            return False
        if name == "verify":
            state = "?" if not verified else ("ok" if verdict is None else "fail")
            wanted = "ok" if want in PASS_WORDS else "fail" if want in FAIL_WORDS else "?"
            if state != wanted:
                return False
    hay = " ".join([key, " ".join(marks), policy, *descs])
    return all(t in hay for t in terms)


def filter_hint(rows: Sequence[dict], fields: list[tuple[str, str]]) -> str:
    """Why a filter that shows nothing shows nothing: the first field term no trajectory
    matches on its own, with the values there are (`landmark:piano` in a flat with no
    piano), or a `verify:` word that means neither pass nor fail. "" when each term alone
    matches some row (then it is their combination)."""
    values = {"landmark": lambda r: _visited(r), "policy": lambda r: [_policy(r)], "key": lambda r: [row_key(r)]}
    for name, want in fields:
        if name == "verify":
            if want not in (*PASS_WORDS, *FAIL_WORDS, "?"):
                return f"verify:{want}: use verify:ok, verify:fail or verify:? (not verified)"
            continue
        if any(row_matches(row, [], [(name, want)]) for row in rows):
            continue
        if name == "desc":
            return f"no description contains {want!r}"
        seen = sorted({str(v) for row in rows for v in values[name](row)})
        shown = ", ".join(seen[:6]) + (f" and {len(seen) - 6} more" if len(seen) > 6 else "")
        label = "bd" if name == "key" else name
        return f"no trajectory has {label} {want!r}" + (f"; here: {shown}" if seen else "")
    return ""


def _state(pose: Any) -> State:
    return State(int(pose["x"]), int(pose["y"]), str(pose.get("orientation", "east")))


def _flat_moves(row: dict) -> list[str]:
    return [str(m) for action in (row.get("actions") or []) for m in action]


def _ret(row: dict) -> float:
    try:
        return float(sum(row.get("rewards") or []))
    except TypeError:
        return float("nan")


def fetch_archive_runs(reg: Any, limit: int = RUNS_LIMIT) -> list[dict]:
    """Archive runs, newest first, each with its archive file's path (None: none recorded),
    its elites and its scene."""
    out = []
    for run in reg.list_runs(kind="archive", limit=limit):
        art = reg.latest_artifact(run["id"], "archive")
        try:
            params = dict(reg.params(run["id"]) or {})
        except Exception:  # noqa: BLE001 - a run without params is still listed
            params = {}
        meta = (art or {}).get("meta") or {}
        out.append({**dict(run), "_path": art["path"] if art else None, "_elites": meta.get("elites"),
                    "_scene": params.get("scene")})
    return out


def load_rows(path: str | None, run_id: str) -> list[dict]:
    """The archive file's rows; a ValueError with one line for a missing or broken file."""
    from lactchain.archive.store import read_rows

    if not path:
        raise ValueError(f"run {run_id} has no archive file; fill one with `lactchain archive fill --scene flat`")
    if not Path(path).is_file():
        raise ValueError(f"run {run_id}: archive file {path} is missing; fill one again with `lactchain archive fill`")
    return read_rows(path)


def verify_row(row: dict) -> str | None:
    """None when the row replays exactly, else its first divergence in one line."""
    from lactchain.archive.trajectories import Trajectory, verify

    try:
        problem = verify(Trajectory.from_dict(row))
    except Exception as exc:  # noqa: BLE001 - a broken row is a failed row, not a crash
        return f"cannot replay: {exc}"
    return None if problem is None else str(problem)


TABLE_MIN_LINES = 9  # 6 rows, the header and the border
SCREEN_CHROME_LINES = 4  # the top bar, the run/filter bar, the summary and the footer


@dataclass
class Replay:
    """What the grid pane shows for one row: its scene, poses and moves."""

    scene: Any
    states: list[State]
    moves: list[str]

    @classmethod
    def of(cls, row: dict) -> "Replay":
        scene = get_scene((row.get("env_kwargs") or {}).get("scene"))
        states = [_state(p) for p in row.get("path") or []]
        if not states:
            raise ValueError("the trajectory has no path")
        return cls(scene, states, _flat_moves(row))

    @property
    def last(self) -> int:
        return len(self.states) - 1


class ArchiveTable(DataTable, inherit_bindings=False):
    """The trajectories table: up/down pick a row; left/right/home/end/space are left to
    the screen (they step the replay)."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "Top", show=False),
        Binding("ctrl+end", "scroll_bottom", "Bottom", show=False),
    ]


class ArchiveScreen(StepReplay, BaseScreen):
    BINDINGS = bindings_for("archive") + [Binding("escape", "focus_table", "Table", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runs: list[dict] = []
        self.run_id: str | None = None
        self.rows: list[dict] = []
        self.loaded = False
        self._loaded = asyncio.Event()  # set once the first list of runs (and its archive) is shown
        self.verdicts: dict[int, str | None] | None = None  # row index -> None (verifies) | mismatch text
        self.verifying: str | None = None  # progress text while the worker runs
        self.shown: list[int] = []  # row indices in the table, in order
        self.selected: int | None = None
        self.replay: Replay | None = None
        self.replay_error: str | None = None
        self.t = 0
        self.playing = False
        self._resized_to = 0  # the screen's width from its last Resize (its size may lag behind)
        self._room = 0  # the description column's width in the table now

    def compose(self) -> ComposeResult:
        yield TopBar("archive", id="topbar")
        with Horizontal(id="archive-bar"):
            yield Select([], prompt="archive run", id="archive-run", allow_blank=True, compact=True)
            yield Input(placeholder="/ filter: sofa, landmark:sofa, policy:random, bd:7,7, desc:fridge, verify:fail",
                        id="archive-filter", compact=True)
        yield Static("", id="archive-message")
        with Vertical(id="archive-main"):
            table = ArchiveTable(id="archive-table", cursor_type="row", zebra_stripes=True)
            for key, label in COLUMNS:
                table.add_column(label, key=key)
            yield table
            with Horizontal(id="archive-replay-row"):
                yield CompactGridView(id="archive-grid")
                with VerticalScroll(id="archive-step-box"):
                    yield Static("", id="archive-replay")
                    yield Static("", id="archive-annotations")
                with VerticalScroll(id="archive-detail-box"):
                    yield Static("", id="archive-detail")
                    yield Static("", id="archive-descriptions")
        yield Static("", id="archive-summary")
        yield FittedFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#archive-table").border_title = "Trajectories"
        self.query_one("#archive-grid").border_title = "Grid"
        self.query_one("#archive-step-box").border_title = "Replay"
        self.query_one("#archive-detail-box").border_title = "Trajectory"
        self.start_replay_timer(PLAY_S)
        self.query_one("#archive-main").display = False
        self.refresh_runs(open_newest=True)

    def on_screen_resume(self) -> None:
        if self.loaded:
            self.refresh_runs(open_newest=self.run_id is None)
        self.query_one("#archive-table").focus()

    # ---- data ---------------------------------------------------------------------
    @work(exclusive=True, group="archive-runs", exit_on_error=False, name="archive runs")
    async def refresh_runs(self, open_newest: bool = False, reload: bool = False) -> None:
        try:
            runs = await self.app.registry.call(fetch_archive_runs)
        except Exception as exc:  # noqa: BLE001
            self._show_message(f"registry unavailable: {exc}", "red")
            self._set_loaded()
            return
        self.runs = runs
        select = self.query_one("#archive-run", Select)
        ids = [str(r["id"]) for r in runs]
        target = self.run_id if self.run_id in ids else (ids[0] if ids else None)
        with select.prevent(Select.Changed):
            select.set_options([(self._run_label(r), str(r["id"])) for r in runs])
            if target is not None:
                select.value = target
        if target is None:
            self.run_id, self.rows, self.verdicts = None, [], None
            self._show_message(EMPTY_HINT, "italic")
            self.query_one("#archive-main").display = False
            self._set_loaded()
            self.populate()
            return
        if target != self.run_id or reload or open_newest and not self.rows:
            await self.load_archive(target)
        self._set_loaded()

    def _set_loaded(self) -> None:
        self.loaded = True
        self._loaded.set()

    @staticmethod
    def _run_label(run: dict) -> str:
        bits = [str(run["id"])]
        if run.get("_scene"):
            bits.append(str(run["_scene"]))
        if run.get("_elites") is not None:
            bits.append(f"{run['_elites']} elites")
        bits.append(fmt_ts(run.get("created_ms"), seconds=False))
        return " · ".join(bits)

    def _run(self, run_id: str | None) -> dict | None:
        return next((r for r in self.runs if str(r["id"]) == run_id), None)

    async def load_archive(self, run_id: str) -> None:
        """Read `run_id`'s archive file (in a thread) and show it; a one-line error on
        screen for a missing or truncated file."""
        run = self._run(run_id) or {}
        self.run_id = run_id
        self.verdicts, self.verifying = None, None
        self._stop()
        try:
            rows = await asyncio.to_thread(load_rows, run.get("_path"), run_id)
        except (OSError, ValueError) as exc:
            self.rows, self.selected, self.replay = [], None, None
            self._show_message(str(exc), "bold red")
            self.query_one("#archive-main").display = False
            self.populate()
            return
        if run_id != self.run_id:
            return
        self._set_rows(rows)

    def _set_rows(self, rows: list[dict]) -> None:
        self.rows = rows
        self.selected = None
        self._show_message("", "")
        self.query_one("#archive-main").display = True
        reset_table(self.query_one("#archive-table", ArchiveTable))
        self.populate()
        self.query_one("#archive-table").focus()

    def _show_message(self, text: str, style: str) -> None:
        message = self.query_one("#archive-message", Static)
        message.update(Text(text, style=style))
        message.display = bool(text)

    # ---- the table ----------------------------------------------------------------
    def visible(self) -> list[int]:
        query = self.query_one("#archive-filter", Input).value.strip()
        terms, fields = parse_filter(query)
        verified = self.verdicts is not None
        return [i for i, row in enumerate(self.rows)
                if row_matches(row, terms, fields, (self.verdicts or {}).get(i), verified)]

    def _mark(self, i: int) -> Text:
        if self.verdicts is None or i not in self.verdicts:
            return Text("·", style="dim")
        return Text("✓", style="bold green") if self.verdicts[i] is None else Text("✗", style="bold red")

    def populate(self) -> None:
        table = self.query_one("#archive-table", ArchiveTable)
        self.shown = self.visible()
        cells = []
        for i in self.shown:
            row = self.rows[i]
            descs = _descriptions(row)
            path = row.get("path") or []
            cells.append((i, row_key(row), _policy(row), str(max(0, len(path) - 1)), f"{_ret(row):+g}",
                          str(descs[0].get("text") or "") if descs else ""))
        room = self._description_room(cells)
        if room != self._room:  # a new column width: rebuilt (updated cells keep their column's width)
            reset_table(table)
            self._room = room
        rows = []
        for i, key, policy, moves, ret, first in cells:
            short = clip(first, room)
            desc = Text(short) if first else Text("—", style="dim")
            rows.append((str(i), (self._mark(i), key, policy, moves, ret, desc)))
        keep = str(self.selected) if self.selected is not None else None
        sync_table(table, rows, keep=keep)
        if self.shown and (self.selected not in self.shown):
            self._select(self.shown[table.cursor_row] if 0 <= table.cursor_row < len(self.shown) else self.shown[0])
        elif not self.shown:
            self._select(None)
        self.update_summary()

    def _description_room(self, cells: list[tuple]) -> int:
        """Characters the description column has before the table's right edge (the
        whole text is in the Trajectory pane): the table's width less the other columns."""
        width = self._width() - 4  # the table spans the screen: its border, the scrollbar
        used = 0
        for c, (_, label) in enumerate(COLUMNS[:-1]):
            used += max([len(label)] + [len(str(cell[c])) for cell in cells] if c else [1]) + 2
        return max(12, min(DESC_CHARS, width - used - 2))

    def on_resize(self, event: events.Resize) -> None:
        self._resized_to = event.size.width
        if self.replay is not None:
            grid = self.query_one("#archive-grid", CompactGridView)
            grid.cell_width = self._cell_width(self.replay.scene.size)
            self._fit_replay_row(grid)
        if self.rows:
            self.populate()

    def _fit_replay_row(self, grid: CompactGridView) -> None:
        """The replay row as tall as the grid with its legend (and its border), but short of
        the table's last 6 rows (on a short terminal the legend is cut, never the rows)."""
        room = self.app.size.height - SCREEN_CHROME_LINES - TABLE_MIN_LINES
        fit = grid.get_content_height(None, None, 0) + 2
        self.query_one("#archive-replay-row").styles.height = max(10, min(fit, room) if room > 0 else fit)

    def update_summary(self) -> None:
        t = Text()
        run = self._run(self.run_id)
        if run is not None:
            t.append(f" {run['id']}", style="bold")
            if run.get("_scene"):
                t.append(f" · {run['_scene']}")
            t.append(f" · {len(self.shown)}/{len(self.rows)} trajectories")
            query = self.query_one("#archive-filter", Input).value.strip()
            if query:
                t.append(" (filtered)", style="dim")
            hint = filter_hint(self.rows, parse_filter(query)[1]) if query and not self.shown else ""
            if hint:
                t.append(f" · {hint}", style="yellow")
        if self.verifying:
            t.append(f" · {self.verifying}", style="yellow")
        elif self.verdicts is not None and self.rows:
            ok = sum(v is None for v in self.verdicts.values())
            t.append(" · ")
            t.append(f"{ok}/{len(self.rows)} verify", style="bold green" if ok == len(self.rows) else "bold red")
        elif self.rows:
            t.append(" · v verifies by replay", style="dim")
        self.query_one("#archive-summary", Static).update(t)

    @on(DataTable.RowHighlighted, "#archive-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None or event.row_key.value is None:
            return
        if event.cursor_row != event.data_table.cursor_row:
            return  # a stale one: the cursor has moved on (and `_follow_cursor` may have shown its row)
        index = int(event.row_key.value)
        if index != self.selected:
            self._select(index)

    def _select(self, index: int | None) -> None:
        """Show row `index` on the replay pane, at its last step (the whole path drawn)."""
        self._stop()
        self.selected = index
        self.replay, self.replay_error = None, None
        if index is not None:
            try:
                self.replay = Replay.of(self.rows[index])
            except (KeyError, TypeError, ValueError) as exc:
                self.replay_error = f"cannot draw this trajectory: {exc}"
        self.t = self.replay.last if self.replay else 0
        self._configure_grid()
        self.show_step()
        self.show_descriptions()

    def _configure_grid(self) -> None:
        grid = self.query_one("#archive-grid", CompactGridView)
        if self.replay is not None:
            scene = self.replay.scene
            grid.cell_width = self._cell_width(scene.size)
            grid.border_title = f"{scene.name} {scene.size}x{scene.size}"

    def _width(self) -> int:
        return self._resized_to or self.size.width or self.app.size.width

    def _cell_width(self, size: int) -> int:
        """Cells of 3 columns for the flat (8x8) on a wide screen, 2 under 100 columns."""
        return fit_cell_width(size, 5, 36 if self._width() >= 100 else 28)

    def _row(self) -> dict | None:
        i = self.selected
        return self.rows[i] if i is not None and 0 <= i < len(self.rows) else None

    # ---- the replay pane ------------------------------------------------------------
    def show_step(self) -> None:
        """The grid at step t (path so far, the agent at path[t]), the step line, the
        annotations (the one in force highlighted) and the trajectory's BD and verdict."""
        grid = self.query_one("#archive-grid", CompactGridView)
        step, annotations_text = Text(), Text()
        rp, t, row = self.replay, self.t, self._row()
        if rp is None or row is None:
            grid.model = GridModel()
            grid.display = False
            if self.replay_error:
                step.append(self.replay_error, style="bold red")
            self.query_one("#archive-replay", Static).update(step)
            self.query_one("#archive-annotations", Static).update(annotations_text)
            if row is not None:
                self.show_detail(row)  # a row that cannot be drawn still has its BD and verdict
            else:
                self.query_one("#archive-detail", Static).update(Text())
            return
        grid.display = True
        scene = rp.scene
        grid.model = GridModel(size=scene.size, goal=tuple(scene.goal), agent=rp.states[t],
                               path=tuple(rp.states[:t + 1]), start=rp.states[0], landmarks=scene.landmarks,
                               walls=scene.walls)
        self._fit_replay_row(grid)
        here = rp.states[t]
        step.append(f"step {t}/{rp.last}", style="bold")
        step.append("  ")
        step.append("▶ playing" if self.playing else "■ paused", style="bold yellow" if self.playing else "dim")
        if t > 0 and t - 1 < len(rp.moves):
            step.append(f"\n{rp.moves[t - 1]} → ", style="dim")
        else:
            step.append("\nstart: ", style="dim")
        step.append(f"({here.x},{here.y}) facing {here.orientation}")
        self.query_one("#archive-replay", Static).update(step)
        annotations = [a for a in row.get("annotations") or [] if isinstance(a, dict)]
        current = append_annotations(annotations_text, annotations, t)
        self.query_one("#archive-annotations", Static).update(annotations_text)
        if current is not None:
            box = self.query_one("#archive-step-box", VerticalScroll)
            box.scroll_to(y=max(0, 3 + current - box.size.height // 2), animate=False)
        self.show_detail(row)

    def show_detail(self, row: dict) -> None:
        detail = Text()
        bd = row.get("bd") if isinstance(row.get("bd"), dict) else {}
        final = bd.get("final") or ["?", "?"]
        visited = _visited(row)
        detail.append("BD ", style="dim")
        detail.append(f"({final[0]},{final[1]})", style="bold")
        detail.append(" via " + " > ".join(visited) if visited else " · no landmark visited")
        n = len(row.get("actions") or [])
        detail.append(f"\n{_policy(row)} · {n} action{'s' if n != 1 else ''} · return {_ret(row):+g}", style="dim")
        detail.append("\n")
        verdicts = self.verdicts
        if verdicts is None or self.selected not in verdicts:
            detail.append("· not verified (v replays the archive)", style="dim")
        elif verdicts[self.selected] is None:
            detail.append("✓ verifies by replay", style="bold green")
        else:
            detail.append(f"✗ {verdicts[self.selected]}", style="bold red")
        self.query_one("#archive-detail", Static).update(detail)

    def show_descriptions(self) -> None:
        out = Text()
        row = self._row()
        if row is not None:
            out.append("descriptions", style="bold underline")
            try:
                from lactchain.archive.describe import reference_order

                order = reference_order(row)
                out.append("\nlandmark order ", style="dim")
                out.append(" > ".join(order) if order else "(none)", style="bold")
            except Exception:  # noqa: BLE001 - a row without a BD or scene: no reference
                pass
            descs = _descriptions(row)
            for d in descs:
                ok = d.get("order_correct")
                mark, style = ORDER_MARKS.get(ok if isinstance(ok, bool) else None, ("?", "dim"))
                out.append("\n")
                out.append(mark, style=style)
                who = " ".join(str(d[k]) for k in ("describer", "model") if d.get(k))
                out.append(f" {who or 'describer'}", style="bold")
                if d.get("prompt_version"):
                    out.append(f" ({d['prompt_version']})", style="dim")
                out.append(f"\n  {d.get('text') or ''}")
            if not descs:
                out.append("\nnone yet (`lactchain archive describe`)", style="dim")
        self.query_one("#archive-descriptions", Static).update(out)

    # ---- actions ------------------------------------------------------------------
    def _follow_cursor(self) -> None:
        """Show the row under the table's cursor now: a replay key typed right after a
        cursor move must not act on the row before it (its RowHighlighted comes later)."""
        table = self.query_one("#archive-table", ArchiveTable)
        if 0 <= table.cursor_row < len(self.shown) and self.shown[table.cursor_row] != self.selected:
            self._select(self.shown[table.cursor_row])

    def before_replay_key(self) -> None:
        self._follow_cursor()

    def replay_last(self) -> int | None:
        return None if self.replay is None else self.replay.last

    def action_filter(self) -> None:
        self.query_one("#archive-filter", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#archive-table").focus()

    def action_choose_run(self) -> None:
        select = self.query_one("#archive-run", Select)
        select.focus()
        select.expanded = True

    def action_refresh(self) -> None:
        self.refresh_runs(reload=True)

    def action_dt_instruct(self) -> None:
        """The decision transformer acts a typed instruction (from the selected row's start)."""
        from tui.screens.dt_instruct import DtInstructScreen

        self._follow_cursor()
        self._stop()
        row = self._row()
        scene = self.replay.scene if self.replay is not None else None
        if scene is None and self.rows:
            try:
                scene = Replay.of(self.rows[0]).scene
            except (KeyError, TypeError, ValueError):
                scene = None
        self.app.push_screen(DtInstructScreen(row, scene))

    @on(Select.Changed, "#archive-run")
    async def _run_changed(self, event: Select.Changed) -> None:
        if event.value is Select.NULL or str(event.value) == self.run_id:
            return
        await self.load_archive(str(event.value))

    @on(Input.Changed, "#archive-filter")
    def _filter_changed(self) -> None:
        self.populate()

    @on(Input.Submitted, "#archive-filter")
    def _filter_done(self) -> None:
        self.query_one("#archive-table").focus()

    async def action_verify(self) -> None:
        if not self.loaded:  # run from the palette as the screen opens: its archive is still loading
            try:
                await asyncio.wait_for(self._loaded.wait(), timeout=10)
            except asyncio.TimeoutError:
                return
        if self.run_id is None:
            self.notify(EMPTY_HINT, severity="warning")
            return
        if self.verifying:
            self.notify("already verifying")
            return
        run = self._run(self.run_id) or {}
        self.verifying = "verifying…"
        self.update_summary()
        self._verify_worker(self.run_id, run.get("_path"))

    @work(thread=True, exclusive=True, group="archive-verify", exit_on_error=False, name="verify archive")
    def _verify_worker(self, run_id: str, path: str | None) -> None:
        """Re-read the file (verify what is on disk) and replay every row."""
        call = self.app.call_from_thread
        try:
            rows = load_rows(path, run_id)
            verdicts: dict[int, str | None] = {}
            for i, row in enumerate(rows):
                verdicts[i] = verify_row(row)
                if (i + 1) % 200 == 0:
                    call(self._verify_progress, run_id, f"verifying {i + 1}/{len(rows)}…")
        except Exception as exc:  # noqa: BLE001 - a missing/truncated file (or worse): one line on screen
            call(self._verify_failed, run_id, str(exc) if isinstance(exc, (OSError, ValueError))
                 else f"verification failed: {type(exc).__name__}: {exc}")
            return
        call(self._verified, run_id, rows, verdicts)

    def _verify_progress(self, run_id: str, text: str) -> None:
        if run_id == self.run_id:
            self.verifying = text
            self.update_summary()

    def _verify_failed(self, run_id: str, error: str) -> None:
        if run_id != self.run_id:
            return
        self.verifying = None
        self.rows, self.verdicts, self.selected, self.replay = [], None, None, None
        self._show_message(error, "bold red")
        self.query_one("#archive-main").display = False
        self.populate()

    def _verified(self, run_id: str, rows: list[dict], verdicts: dict[int, str | None]) -> None:
        if run_id != self.run_id:
            return
        self.verifying = None
        if rows != self.rows:  # the file changed since it was read: show what was verified
            keep = self.selected
            self._set_rows(rows)
            if keep is not None and keep < len(rows):
                self._move_to(keep)
        self.verdicts = verdicts
        self.populate()
        self.show_step()
        bad = sum(v is not None for v in verdicts.values())
        if bad:
            self.notify(f"{bad} of {len(rows)} trajectories do not replay as stored", severity="warning")

    def _move_to(self, index: int) -> None:
        """Put the table's cursor on row `index` (when shown)."""
        if index in self.shown:
            self.query_one("#archive-table", ArchiveTable).move_cursor(row=self.shown.index(index), animate=False)
            self._select(index)
