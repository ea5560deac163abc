"""TopBar: where am I (screen tabs), and the state of the models and the registry."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui.format import safe

SCREENS = (("lab", "1", "Lab"), ("runs", "2", "Runs"), ("labels", "3", "Label"), ("jobs", "4", "Jobs"), ("archive", "5", "Archive"))


class TopBar(Static):
    DEFAULT_CSS = """
    TopBar { height: 1; background: $panel; color: $text; }
    """

    def __init__(self, current: str, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self.current = current

    def on_mount(self) -> None:
        for name in ("actor_status", "critic_status"):
            self.watch(self.app, name, lambda _value: self.redraw(), init=False)
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """The full bar where it fits; narrower, the brand goes first, then long model
        statuses are cut (an ellipsis), then the registry's name, and only then do the other
        screens shrink to their keys: the screen names and the models' state stay in view."""
        width = self.size.width or getattr(self.app.size, "width", 0) or 120
        for brand, names, status_width, db in ((True, True, None, True), (False, True, None, True),
                                               (False, True, 24, True), (False, True, 14, True),
                                               (False, True, 14, False), (False, True, 10, False),
                                               (False, False, 14, True), (False, False, 8, True)):
            text = self._bar(brand, names, status_width, db)
            if text.cell_len <= width:
                break
        self.update(text)

    def _bar(self, brand: bool, names: bool, status_width: int | None, show_db: bool) -> Text:
        app = self.app

        def cut(value: object) -> str:
            """Cut to `status_width`, keeping a trailing ✓/✗: loaded or failed stays readable."""
            shown = safe(value, keep_newlines=False)
            if status_width is None or len(shown) <= status_width:
                return shown
            mark = shown[-2:] if shown[-2:] in (" ✓", " ✗") else ""
            return shown[:status_width - 1 - len(mark)] + "…" + mark

        text = Text(" LactChain " if brand else "", style="bold")
        for mode, key, label in SCREENS:
            if mode == self.current:
                text.append(f" {key} {label} ", style="bold reverse")
            else:
                text.append(f" {key} {label} " if names else f" {key} ", style="dim")
        text.append("  actor: " if brand else " actor ", style="dim")
        text.append(cut(getattr(app, "actor_status", "?")))
        text.append("  critic: " if brand else " critic ", style="dim")
        text.append(cut(getattr(app, "critic_status", "?")))
        db = getattr(app, "db_label", "") if show_db else ""
        if db:
            text.append(f"  db: {cut(db)}" if brand else f" db {cut(db)}", style="dim")
        return text
