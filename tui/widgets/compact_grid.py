"""CompactGridView: the `GridView` drawn one text line per grid row (no rules between
rows), so an 8x8 scene takes 12 lines instead of 19 and fits under a table. Same
cells as the GridView (landmark colours and letters, walls, path, agent, goal, start)
and the same legend; the gap between two cells of one landmark takes its colour, so a
sofa reads as one block, and the gap between two wall cells is wall, so a wall reads
as one line."""

from __future__ import annotations

from rich.text import Text

from tui.widgets.grid import LABEL_W, WALL_GLYPH, WALL_STYLE, GridView


class CompactGridView(GridView):
    DEFAULT_CSS = """
    CompactGridView { width: auto; height: auto; padding: 0 1; }
    """

    def __init__(self, *, cell_width: int = 3, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(cell_width=cell_width, interactive=False, name=name, id=id, classes=classes)

    def get_content_height(self, container, viewport, width) -> int:  # noqa: ANN001
        return self.model.size + 3 + (1 if self.model.values_label else 0) + len(self._legend())

    def cell_at(self, cx: int, cy: int) -> tuple[int, int] | None:
        size = self.model.size
        if cx < LABEL_W or not 1 <= cy <= size:
            return None
        col = (cx - LABEL_W) // (self.cell_width + 1)
        return (col, size - cy) if 0 <= col < size else None

    def render(self) -> Text:
        m, w = self.model, self.cell_width
        n = m.size
        border = "#6c6c6c"
        inner = n * (w + 1) - 1
        out = Text(no_wrap=True, overflow="crop")
        out.append(" " * (LABEL_W - 1) + "┌" + "─" * inner + "┐\n", border)
        marks, walls = self._landmarks, m.walls
        for row in range(n):
            y = n - 1 - row
            out.append(f"{y:>{LABEL_W - 2}} ", "#8a8a8a")
            out.append("│", border)
            for x in range(n):
                out.append_text(self._cell(x, y))
                if x == n - 1:
                    out.append("│", border)
                elif (x, y) in walls and (x + 1, y) in walls:
                    out.append(WALL_GLYPH, WALL_STYLE)
                else:
                    here, right = marks.get((x, y)), marks.get((x + 1, y))
                    out.append(" ", f"on {here.colour}" if here is not None and here is right else "")
            out.append("\n")
        out.append(" " * (LABEL_W - 1) + "└" + "─" * inner + "┘\n", border)
        return self._append_axis_and_legend(out, w)
