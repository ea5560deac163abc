"""Kill and resume, the same on every screen that lists runs (Jobs and Runs): kill asks
first, resume says why not. One behaviour behind one key map (tui.commands: K, R)."""

from __future__ import annotations

from typing import Any

from textual import work

KILL_FOLLOW_S, KILL_FOLLOW_TICKS = 0.25, 16


class RunControls:
    """Mixed into a screen with `selected_run()` (the highlighted row, a run dict) and
    `refresh_listing()` (reload its table)."""

    def selected_run(self) -> dict | None:  # pragma: no cover - each screen says
        raise NotImplementedError

    def refresh_listing(self) -> None:  # pragma: no cover - each screen says
        raise NotImplementedError

    def action_kill(self) -> None:
        run = self.selected_run()
        if run is None or run.get("status") not in ("RUNNING", "SCHEDULED"):
            self.notify("select a running run to kill", severity="warning")  # type: ignore[attr-defined]
            return
        from tui.widgets.confirm import ConfirmScreen

        async def answered(yes: bool | None) -> None:
            if not yes:
                return
            from tui.jobs_bridge import kill_job

            try:
                self.notify(await self.app.registry.call(kill_job, run["id"]))  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001
                self.app.report_error("kill failed", exc)  # type: ignore[attr-defined]
            self.refresh_listing()
            # The job ends KILLED a moment after SIGTERM (it checkpoints first): follow it at
            # 4 Hz for a few seconds instead of waiting for the screen's own poll.
            self.set_interval(KILL_FOLLOW_S, self.refresh_listing, repeat=KILL_FOLLOW_TICKS)  # type: ignore[attr-defined]

        from lactchain.runs.resume import kill_outcome

        self.app.push_screen(ConfirmScreen(  # type: ignore[attr-defined]
            f"Stop {run['id']} ({run.get('kind')})? {kill_outcome(str(run.get('kind')))}"), answered)

    def action_resume(self) -> None:
        run = self.selected_run()
        if run is None:
            self.notify("select a run first", severity="warning")  # type: ignore[attr-defined]
            return
        if run.get("status") not in ("KILLED", "FAILED"):
            self.notify(f"{run['id']} is {run.get('status')}: only KILLED or FAILED runs resume",  # type: ignore[attr-defined]
                        severity="warning")
            return
        self._resume_in_background(str(run["id"]))

    @work(thread=True, exit_on_error=False, group="resume", name="resume run")
    def _resume_in_background(self, run_id: str) -> None:
        from tui.jobs_bridge import RESUME, JobRequest, launch_job

        app: Any = self.app  # type: ignore[attr-defined]
        try:
            result = (app.launcher or launch_job)(JobRequest(RESUME, {"run": run_id}, app.db_path))
        except Exception as exc:  # noqa: BLE001 - the job layer's reason (e.g. play runs are not resumed)
            app.call_from_thread(app.report_error, f"{run_id} was not resumed", str(exc).removeprefix("error: "))
            return
        new_id = getattr(result, "run_id", None)
        app.call_from_thread(self.notify, f"resuming {run_id} as {new_id} (Jobs: 4)")  # type: ignore[attr-defined]
        app.call_from_thread(self._follow, str(new_id) if new_id else None)

    def _follow(self, run_id: str | None) -> None:
        """The listing selects the resumed run: its log, chart and info follow it, not the
        stopped run it goes on from."""
        if run_id:
            self.selected_id = run_id
        self.refresh_listing()
