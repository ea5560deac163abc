"""GridView: the GridWorld drawn with box characters, an agent glyph that shows
the orientation, the goal, the episode's path, the scene's landmarks (their colour as
the cell's background, their letter at its left edge, a legend line), the scene's walls
(a solid dark block, `WALL_GLYPH` across the cell, named in the legend), an optional
value overlay, and a cursor to choose a start state (arrows + o + enter, or a mouse
click; a wall cell is refused with a notice). Grid-only by nature: the view of envs
whose `console_view` is "grid"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from lactchain.envs import ORIENTATIONS, State

GLYPH = {"north": "▲", "east": "▶", "south": "▼", "west": "◀"}
LABEL_W = 3  # "3 │"
LANDMARK_FG = "bold #121212"  # text on a landmark's (bright) background
WALL_GLYPH = "█"  # a wall cell is this glyph across its whole width
WALL_STYLE = "#585858"  # dark grey, like the env's renders (WALL_RGB)
START_GLYPH = "◇"  # where the episode started (not "S": the flat's sofa is lettered S)
WALL_CURSOR = "bold #ff5f5f on #585858"  # the cursor's mark on a wall (it cannot start there)


@dataclass(frozen=True)
class GridModel:
    size: int = 4
    goal: tuple[int, int] = (3, 3)
    agent: State | None = None
    path: tuple[State, ...] = ()
    start: State | None = None  # drawn as S when the agent has left it
    values: Mapping[tuple[int, int], float] | None = None  # overlay, per cell
    values_label: str = ""
    # the scene's landmarks (lactchain.envs.scenes.Landmark: name, cells, colour, letter);
    # empty (the default 4x4 grid): the view draws exactly as without scenes
    landmarks: Sequence[Any] = ()
    # the scene's wall cells (x, y): drawn as solid blocks, never a start; empty: no walls
    walls: frozenset[tuple[int, int]] = frozenset()

    def __post_init__(self) -> None:  # any iterable of cells (a Scene's tuple, the env's frozenset)
        object.__setattr__(self, "walls", frozenset(tuple(c) for c in self.walls))

    def is_wall(self, x: int, y: int) -> bool:
        return (x, y) in self.walls


class GridView(Widget, can_focus=True):
    """Focusable grid. Posts `GridView.StartChosen` when the researcher picks a start."""

    BINDINGS = [
        Binding("up", "cursor(0, 1)", "Up", show=False),
        Binding("down", "cursor(0, -1)", "Down", show=False),
        Binding("left", "cursor(-1, 0)", "Left", show=False),
        Binding("right", "cursor(1, 0)", "Right", show=False),
        Binding("o", "rotate", "Rotate", show=False, tooltip="Rotate the start-state cursor"),
        Binding("enter", "choose", "Start", show=False, tooltip="Reset the episode to start at the cursor"),
    ]

    DEFAULT_CSS = """
    GridView { width: auto; height: auto; padding: 0 1; }
    """

    model: reactive[GridModel] = reactive(GridModel, layout=True)
    cell_width: reactive[int] = reactive(7, layout=True)
    cursor: reactive[State] = reactive(State(0, 0, "east"))
    show_cursor: reactive[bool] = reactive(True)

    @dataclass
    class StartChosen(Message):
        grid: "GridView"
        state: State

    def __init__(self, *, cell_width: int = 7, interactive: bool = True, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.set_reactive(GridView.cell_width, cell_width)
        self.interactive = interactive
        self.can_focus = interactive
        if not interactive:
            self.set_reactive(GridView.show_cursor, False)

    # ---- geometry -----------------------------------------------------------------
    def get_content_width(self, container, viewport) -> int:  # noqa: ANN001
        return LABEL_W + self.model.size * (self.cell_width + 1) + 1

    def get_content_height(self, container, viewport, width) -> int:  # noqa: ANN001
        return 2 * self.model.size + 2 + (1 if self.model.values_label else 0) + len(self._legend())

    def cell_at(self, cx: int, cy: int) -> tuple[int, int] | None:
        size = self.model.size
        if cx < LABEL_W or cy < 1 or cy > 2 * size - 1:
            return None
        col = (cx - LABEL_W) // (self.cell_width + 1)
        row = (cy - 1) // 2
        if not (0 <= col < size and 0 <= row < size):
            return None
        return col, size - 1 - row

    # ---- drawing ------------------------------------------------------------------
    def _wall_cell(self, x: int, y: int) -> Text:
        """A wall: the block across the cell; under the cursor, an x in its middle."""
        w = self.cell_width
        body = Text(WALL_GLYPH * w, WALL_STYLE)
        if self.show_cursor and (self.cursor.x, self.cursor.y) == (x, y):
            body = Text()
            body.append(WALL_GLYPH * ((w - 1) // 2), WALL_STYLE)
            body.append("×", WALL_CURSOR)
            body.append(WALL_GLYPH * (w - 1 - (w - 1) // 2), WALL_STYLE)
            body.stylize("underline")
        return body

    def _cell(self, x: int, y: int) -> Text:
        m, w = self.model, self.cell_width
        agent, here = m.agent, (x, y)
        if here in m.walls:
            return self._wall_cell(x, y)
        on_path = any((s.x, s.y) == here for s in m.path)
        style = "on #303a4a" if on_path else ""
        glyph, gstyle = " ", ""
        if agent is not None and (agent.x, agent.y) == here:
            glyph, gstyle = GLYPH[agent.orientation], "bold #ffd75f"
        elif here == tuple(m.goal):
            glyph, gstyle = "G", "bold #5fd75f"
        elif m.start is not None and (m.start.x, m.start.y) == here:
            glyph, gstyle = START_GLYPH, "bold #87afff"
        elif on_path:
            glyph, gstyle = "·", "#87afff"
        if here == tuple(m.goal) and agent is not None and (agent.x, agent.y) == here:
            style = "on #005f00"
        cursor_here = self.show_cursor and (self.cursor.x, self.cursor.y) == here
        if cursor_here and glyph == " ":
            glyph, gstyle = GLYPH[self.cursor.orientation], "#8a8a8a"
        mark = self._landmarks.get(here)
        value = None if m.values is None else m.values.get(here)
        body = Text()
        if mark is not None:
            # the landmark's colour behind the cell, its letter at the left edge (alone: in
            # the middle), whatever else stands there in the middle, all in dark text
            style = f"on {mark.colour}"
            if value is not None:
                body.append(glyph if glyph != " " else mark.letter, LANDMARK_FG)
                body.append(f"{value:>{w - 1}.{1 if w >= 7 else 0}f}", LANDMARK_FG)
            else:
                pad = w - 1
                inner = [" "] * w
                inner[pad // 2] = glyph if glyph != " " else mark.letter
                if glyph != " " and pad // 2 > 0:  # room for the letter beside the glyph
                    inner[0] = mark.letter
                body.append("".join(inner), LANDMARK_FG)
        elif value is not None:
            body.append(glyph, gstyle)
            body.append(f"{value:>{w - 1}.{1 if w >= 7 else 0}f}", "#d7af87")
        else:
            pad = w - 1
            body.append(" " * (pad // 2))
            body.append(glyph, gstyle)
            body.append(" " * (pad - pad // 2))
        body.truncate(w, pad=True)
        if style:
            body.stylize(style)
        if cursor_here:
            body.stylize("reverse" if self.has_focus else "underline")
        return body

    def render(self) -> Text:
        m, w = self.model, self.cell_width
        n = m.size
        border = "#6c6c6c"
        out = Text(no_wrap=True, overflow="crop")

        def rule(left: str, mid: str, right: str) -> None:
            out.append(" " * (LABEL_W - 1) + left + mid.join(["─" * w] * n) + right + "\n", border)

        rule("┌", "┬", "┐")
        for row in range(n):
            y = n - 1 - row
            out.append(f"{y:>{LABEL_W - 2}} ", "#8a8a8a")
            out.append("│", border)
            for x in range(n):
                out.append_text(self._cell(x, y))
                out.append("│", border)
            out.append("\n")
            if row < n - 1:
                rule("├", "┼", "┤")
        rule("└", "┴", "┘")
        return self._append_axis_and_legend(out, w)

    def _append_axis_and_legend(self, out: Text, w: int) -> Text:
        """The x axis, the values label and the landmarks' legend under the grid (every layout)."""
        axis = " " * LABEL_W + "".join(f"{x:^{w}} " for x in range(self.model.size))
        out.append(axis.rstrip(), "#8a8a8a")
        if self.model.values_label:
            out.append("\n" + self.model.values_label, "#d7af87")
        for line in self._legend():
            out.append("\n")
            out.append_text(line)
        return out

    def _legend(self) -> list[Text]:
        """The landmarks' legend ("F fridge  T bathtub ...") and the walls' ("█ wall"),
        wrapped to the grid's width; no lines without landmarks or walls."""
        width = LABEL_W + self.model.size * (self.cell_width + 1) + 1
        lines: list[Text] = []
        line = Text(" " * (LABEL_W - 1))
        entries = []
        for mark in self.model.landmarks:
            entry = Text()
            entry.append(mark.letter, f"{LANDMARK_FG} on {mark.colour}")
            entry.append(f" {mark.name}", "#8a8a8a")
            entries.append(entry)
        if self.model.walls:
            entries.append(Text.assemble((WALL_GLYPH, WALL_STYLE), (" wall", "#8a8a8a")))
        for entry in entries:
            sep = "  " if line.plain.strip() else ""
            if line.plain.strip() and len(line) + len(sep) + len(entry) > width:
                lines.append(line)
                line, sep = Text(" " * (LABEL_W - 1)), ""
            line.append(sep)
            line.append_text(entry)
        if line.plain.strip():
            lines.append(line)
        return lines

    @property
    def _landmarks(self) -> dict[tuple[int, int], Any]:
        model = self.model
        cache = getattr(self, "_landmark_cache", None)
        if cache is None or cache[0] is not model.landmarks:
            cache = (model.landmarks, {tuple(c): mark for mark in model.landmarks for c in mark.cells})
            self._landmark_cache = cache
        return cache[1]

    # ---- interaction --------------------------------------------------------------
    def action_cursor(self, dx: int, dy: int) -> None:
        n = self.model.size
        c = self.cursor
        self.cursor = State(min(n - 1, max(0, c.x + dx)), min(n - 1, max(0, c.y + dy)), c.orientation)

    def action_rotate(self) -> None:
        c = self.cursor
        self.cursor = State(c.x, c.y, ORIENTATIONS[(ORIENTATIONS.index(c.orientation) + 1) % 4])

    def action_choose(self) -> None:
        self._choose(self.cursor)

    def _choose(self, state: State) -> None:
        """Post the start, unless the cell is a wall: then a notice, and nothing changes."""
        if self.model.is_wall(state.x, state.y):
            self.notify(f"({state.x}, {state.y}) is a wall: a start must be an open cell", title="Not a start",
                        severity="warning")
            return
        self.post_message(self.StartChosen(self, state))

    def on_click(self, event: events.Click) -> None:
        if not self.interactive:
            return
        offset = event.get_content_offset(self)
        if offset is None:
            return
        cell = self.cell_at(offset.x, offset.y)
        if cell is None:
            return
        self.focus()
        self.cursor = State(cell[0], cell[1], self.cursor.orientation)
        self._choose(self.cursor)

    def watch_model(self, model: GridModel) -> None:
        if self.cursor.x >= model.size or self.cursor.y >= model.size:
            self.cursor = State(0, 0, self.cursor.orientation)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()


def fit_cell_width(size: int, preferred: int, room: int) -> int:
    """The widest cell, at most `preferred`, with which a size x size grid fits `room` columns."""
    return max(1, min(preferred, (room - LABEL_W - 1) // size - 1))


def grid_values(values: Mapping[State, float], orientation: str) -> dict[tuple[int, int], float]:
    """Per-cell overlay from per-state values, for one orientation."""
    return {(s.x, s.y): v for s, v in values.items() if s.orientation == orientation}
