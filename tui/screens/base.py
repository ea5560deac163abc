"""Shared screen behaviour: one error path for workers (harlequin-style), and screen
switches that do not restyle a screen nothing has restyled."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.screen import Screen
from textual.worker import Worker, WorkerState


class BaseScreen(Screen):
    _styled_for: Any = None

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_error(f"{event.worker.name or 'background task'} failed", event.worker.error)

    def _style_context(self) -> tuple:
        """What a suspended screen's styles can depend on beyond its own widgets (whose
        class changes restyle them at once): the theme, the app's and the screen's classes
        (dark mode, few colours, the size breakpoints) and the terminal's size."""
        app = self.app
        return app.theme, frozenset(app.classes), frozenset(self.classes), tuple(app.size)

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        """Textual restyles every widget of a screen each time it comes back (keys 1-5), a
        third of a switch here. Runs before `Screen._on_screen_resume` (subclass first, the
        same event): skip that restyle while the context it was styled in still holds."""
        context = self._style_context()
        if context == self._styled_for:
            event.refresh_styles = False
        self._styled_for = context
