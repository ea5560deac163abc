"""TopBar: where am I (screen tabs), and the state of the models and the registry."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

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
        """The full bar where it fits; on a narrow terminal the other screens shrink to their
        keys first, so the models' and the registry's state stay in view."""
        app = self.app
        width = self.size.width or getattr(app.size, "width", 0) or 120
        for compact in (False, True):
            text = Text("" if compact else " LactChain ", style="bold")
            for mode, key, label in SCREENS:
                if mode == self.current:
                    text.append(f" {key} {label} ", style="bold reverse")
                else:
                    text.append(f" {key} " if compact else f" {key} {label} ", style="dim")
            text.append("  actor: " if not compact else " actor ", style="dim")
            text.append(getattr(app, "actor_status", "?"))
            text.append("  critic: " if not compact else " critic ", style="dim")
            text.append(getattr(app, "critic_status", "?"))
            db = getattr(app, "db_label", "")
            if db:
                text.append(f"  db: {db}" if not compact else f" db {db}", style="dim")
            if text.cell_len <= width:
                break
        self.update(text)
