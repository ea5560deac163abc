"""Shared screen behaviour: one error path for workers (harlequin-style)."""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker, WorkerState


class BaseScreen(Screen):
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_error(f"{event.worker.name or 'background task'} failed", event.worker.error)
