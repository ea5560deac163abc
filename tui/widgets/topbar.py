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

    def redraw(self) -> None:
        app = self.app
        text = Text(" LactChain ", style="bold")
        for mode, key, label in SCREENS:
            if mode == self.current:
                text.append(f" {key} {label} ", style="bold reverse")
            else:
                text.append(f" {key} {label} ", style="dim")
        text.append("  actor: ", style="dim")
        text.append(getattr(app, "actor_status", "?"))
        text.append("  critic: ", style="dim")
        text.append(getattr(app, "critic_status", "?"))
        db = getattr(app, "db_label", "")
        if db:
            text.append(f"  db: {db}", style="dim")
        self.update(text)
