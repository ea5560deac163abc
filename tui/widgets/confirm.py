"""Dialogs: ConfirmScreen, a yes/no question before something that cannot be undone (kill
a job); AskScreen, one value asked before a job starts (how many states to evaluate);
ChooseScreen, one key picks one of a few choices (the column to sort by)."""

from __future__ import annotations

from typing import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True on y / Yes, False on n / escape / No."""

    BINDINGS = [("y", "answer(True)", "Yes"), ("n", "answer(False)", "No"), ("escape", "answer(False)", "No")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 60; height: auto; border: thick $warning; background: $surface; padding: 1 2; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    ConfirmScreen Button { margin-left: 2; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.question), id="confirm-question")
            with Horizontal():
                yield Button("No (n)", id="confirm-no")
                yield Button("Yes (y)", id="confirm-yes", variant="warning")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class AskScreen(ModalScreen[str | None]):
    """One value: Enter accepts it (once `check` finds nothing wrong: it returns the
    one-line problem, or None), escape cancels (None)."""

    BINDINGS = [("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    AskScreen { align: center middle; }
    AskScreen > Vertical { width: 60; height: auto; border: thick $primary; background: $surface; padding: 1 2; }
    AskScreen #ask-error { color: $error; height: auto; }
    """

    def __init__(self, question: str, default: str, check: Callable[[str], str | None] | None = None) -> None:
        super().__init__()
        self.question, self.default, self.check = question, default, check

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.question), id="ask-question")
            yield Input(self.default, id="ask-value")
            yield Static("", id="ask-error")
            yield Static(Text("enter: go · escape: cancel", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#ask-value", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        problem = self.check(value) if self.check is not None else None
        if problem:
            self.query_one("#ask-error", Static).update(Text(problem))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ChooseScreen(ModalScreen[str | None]):
    """A few choices, one key each (shown before its label): the key dismisses with that
    choice's value; escape (or any key of no choice) cancels with None."""

    DEFAULT_CSS = """
    ChooseScreen { align: center middle; }
    ChooseScreen > Vertical { width: 50; height: auto; border: thick $primary; background: $surface; padding: 1 2; }
    """

    def __init__(self, title: str, choices: list[tuple[str, str, str]]) -> None:
        """`choices`: (key, value, label) each."""
        super().__init__()
        self.title_text, self.choices = title, choices

    def compose(self) -> ComposeResult:
        lines = Text(self.title_text + "\n\n", style="bold")
        for key, _, label in self.choices:
            lines.append(f" {key} ", style="reverse")
            lines.append(f"  {label}\n")
        lines.append("\nescape: cancel", style="dim")
        with Vertical():
            yield Static(lines, id="choose-lines")

    def on_key(self, event) -> None:  # noqa: ANN001
        event.stop()
        event.prevent_default()
        picked = next((value for key, value, _ in self.choices if key == event.character), None)
        self.dismiss(picked)
