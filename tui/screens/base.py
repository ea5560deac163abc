"""Shared screen behaviour: one error path for workers (harlequin-style), and screen
switches that do not restyle or reparse for a screen nothing has restyled."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.screen import Screen
from textual.worker import Worker, WorkerState


class BaseScreen(Screen):
    _styled_for: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Made on a mode's first visit, a screen is styled at its mount by the stylesheet as
        # it is now. Textual still counts it stale (-1) and reparses every CSS source for it,
        # twice on that visit and again on its first return (~0.2 s each on this CPU). The
        # first screen keeps that refresh: it is what sets the theme's variables. A theme
        # change after this still restyles every screen as before.
        try:
            app = self.app
        except RuntimeError:  # NoActiveAppError: made outside a running app
            return
        if app.screen_stack:
            self._css_update_count = app._css_update_count

    def action_next_tab(self) -> None:
        """Key t: the screen's next tab (Lab: Episode, Critic, Strategy; Runs: Info, Chart,
        Log, Board), by keyboard; the focus stays put, so the next key is a command again."""
        from textual.widgets import TabbedContent, TabPane

        found = self.query(TabbedContent)
        if not found:
            return
        tabs = found.first()
        panes = [pane.id for pane in tabs.query(TabPane) if pane.id]
        if panes:
            current = panes.index(tabs.active) if tabs.active in panes else -1
            tabs.active = panes[(current + 1) % len(panes)]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_error(f"{event.worker.name or 'background task'} failed", event.worker.error)

    def _style_context(self) -> tuple:
        """What a suspended screen's styles can depend on beyond its own widgets (whose
        class changes restyle them at once): the theme, the app's and the screen's classes
        (dark mode, few colours, the size breakpoints) and the terminal's size."""
        app = self.app
        return app.theme, frozenset(app.classes), frozenset(self.classes), tuple(app.size)

    def _on_screen_suspend(self) -> None:
        """The context the screen is left in (its breakpoint classes arrive after its first
        resume, so the context at that resume would differ on the first return)."""
        self._styled_for = self._style_context()

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        """Textual restyles every widget of a screen each time it comes back (keys 1-5), a
        third of a switch here. Runs before `Screen._on_screen_resume` (subclass first, the
        same event): skip that restyle while the context it was left in still holds."""
        if self._style_context() == self._styled_for:
            event.refresh_styles = False
