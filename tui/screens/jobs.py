"""Jobs: launch detached CLI jobs from a small form, watch them (status, live log
tail, live metric chart) and kill them. Jobs are plain `lactchain ... --detach`
processes recorded in the registry, so they keep running when the TUI quits and
show up live again when it reopens."""

from __future__ import annotations

import time
from typing import Any

from rich.markup import escape
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import (Button, DataTable, Input, Label, Select, Static, TabbedContent,
                             TabPane)

from lactchain.engine import REPLICAS_TAG
from lactchain.runs.registry import looks_like_run_id
from lactchain.safe_text import printable, shell_line
from tui.commands import bindings_for
from tui.format import default_metric, fmt_duration, fmt_progress, fmt_run_metrics, fmt_ts, now_ms, run_duration
from tui import console_state
from tui.jobs_bridge import (FORMS_BY_COMMAND, JOB_FORMS, JobRequest, check_form, cli_actor, job_run_kinds,
                             launch_job, run_choices)
from tui.messages import JobLaunched
from tui.screens.base import BaseScreen
from tui.screens.run_controls import RunControls
from tui.screens.runs import STATUS_STYLE, with_metrics
from tui.widgets.log_tail import LogTail
from tui.widgets.metric_chart import MetricChart
from tui.widgets.tables import sync_table
from tui.widgets.topbar import TopBar
from tui.widgets.footer import FittedFooter

REFRESH_S = 2.0
REAP_EVERY = 5  # refreshes between reaps of dead jobs


def field_id(command: str, field: str) -> str:
    """The widget id of a form field ("strategy search" has a space an id cannot hold)."""
    return f"{command.replace(' ', '_')}--{field}"


def fetch_jobs(reg: Any, reap: bool, cache: dict, limit: int = 60) -> list[dict]:
    if reap:
        try:
            from lactchain.jobs import reap_dead_runs

            reap_dead_runs(reg)
        except Exception:  # noqa: BLE001 - listing matters more than reaping
            pass
    kinds = job_run_kinds()
    runs = [dict(r) for r in reg.list_runs(limit=limit * 3)
            # a job has a command line; the Lab's episodes and labelling sessions are not jobs
            if (r["kind"] in kinds and r.get("cmd")) or r["status"] in ("RUNNING", "SCHEDULED") or r.get("pid")]
    runs = runs[:limit]
    for run in runs:  # where a running job's engine replicas are (a tag the job writes when its pool is up)
        if run["status"] == "RUNNING":
            run["_replicas"] = reg.tags(run["id"]).get(REPLICAS_TAG)
    return with_metrics(reg, runs, cache)


def replicas_line(job: dict) -> str:
    """'2 replicas: node 1a2b3c pid 4242 · node 9f8e7d pid 4243' for a job on an engine pool."""
    import json

    try:
        rows = json.loads(job.get("_replicas") or "[]")
    except ValueError:
        return ""
    parts = [" ".join(x for x in (f"node {str(r['node'])[:6]}" if r.get("node") else "",
                                  f"pid {r['pid']}" if r.get("pid") else "") if x) for r in rows if isinstance(r, dict)]
    return f"{len(parts)} replica{'s' if len(parts) != 1 else ''}: " + " · ".join(parts) if parts else ""


class JobsScreen(RunControls, BaseScreen):
    BINDINGS = bindings_for("jobs") + [("escape", "focus_table", "Table")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs: list[dict] = []
        self.selected_id: str | None = None
        self._ticks = 0
        self._metrics_cache: dict = {}  # used on the registry thread only
        self._metric: str | None = None
        self._shown_keys: list[str] | None = None  # the metric list the Select shows
        self.last_launch: JobLaunched | None = None
        self.last_launch_at: float | None = None  # time.perf_counter() when it was shown (bench console)
        self._shown_id: str | None = None  # the job the log and chart show
        self._form_labels: list[str] = []  # the session's label runs when the form was filled
        self._form_command: str | None = None  # the form whose fields are mounted

    def compose(self) -> ComposeResult:
        yield TopBar("jobs", id="topbar")
        with Horizontal(id="jobs-main"):
            with Vertical(id="job-form"):
                chosen = console_state.load(self.app.db_path).get("job_form")  # the last session's form
                chosen = chosen if chosen in FORMS_BY_COMMAND else JOB_FORMS[0].command
                yield Select([(f.title, f.command) for f in JOB_FORMS], value=chosen,
                             allow_blank=False, id="job-command")
                # the fields scroll; the command preview, the error and Launch stay in view below
                with VerticalScroll(id="job-fields-scroll", can_focus=False):  # tab goes field to field
                    with Vertical(id="job-fields", classes="job-fields"):
                        yield from self.fields_for(chosen)
                yield Static("", id="job-argv")
                yield Static("", id="job-error")
                yield Button("Launch  ctrl+l", id="job-launch", variant="primary", compact=True)
            with Vertical(id="jobs-right"):
                table = DataTable(id="jobs-table", cursor_type="row", zebra_stripes=True)
                # progress beside the status: at 80 columns what fits is what a running job is doing
                table.add_columns("id", "status", "progress", "dur", "started", "metrics")
                yield table
                with TabbedContent(id="jobs-tabs"):
                    with TabPane("Log", id="tab-job-log"):
                        yield LogTail(id="job-log")
                    with TabPane("Chart", id="tab-job-chart"):
                        yield Select([], prompt="metric", id="job-metric", allow_blank=True, compact=True)
                        yield MetricChart(id="job-chart")
        yield FittedFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#job-form").border_title = "New job"
        self.query_one("#jobs-table").border_title = "Jobs"
        self.update_argv()
        self.offer_run_ids()
        self.refresh_jobs()
        self.set_interval(REFRESH_S, self._tick)
        self.warm_launch_path()

    @work(thread=True, exit_on_error=False, group="warm", name="warm the launch path")
    def warm_launch_path(self) -> None:
        """Import the job layer's launch path while the form is read, so the first launch
        answers as fast as the next ones (its first import costs ~0.2 s)."""
        import lactchain.jobs.control  # noqa: F401

    async def on_screen_resume(self) -> None:
        self.refresh_jobs()
        if self._form_labels != list(self.app.label_runs):  # labelled since the form was filled: fill it again
            await self._show_form(self.command)

    def _tick(self) -> None:
        if not self.is_current:
            return
        self._ticks += 1
        self.refresh_jobs(reap=self._ticks % REAP_EVERY == 0)
        self.query_one("#job-log", LogTail).poll()
        job = self.selected_job()
        if job is not None and job["status"] in ("RUNNING", "SCHEDULED"):
            self.draw_chart()

    # ---- form ---------------------------------------------------------------------
    def prefill(self, command: str, field: Any, last: dict) -> str:
        """A field's starting value: the pairs this session labelled (Train actor's pairs
        runs and labeler), else what was launched last time from this form (`last`), else
        the console's own models (its --actor/--adapter/--critic), else the default."""
        labels = list(getattr(self.app, "label_runs", []))
        if labels and field.name in ("pairs-from", "labeler") and any(
                f.name == "pairs-from" for f in FORMS_BY_COMMAND[command].fields):
            return ",".join(labels) if field.name == "pairs-from" else "human"  # this session's labels
        if field.name in last:
            return str(last[field.name])
        spec, adapter = getattr(self.app, "live_actor", (None, None))  # the actor the Lab plays
        if field.name == "actor":
            return cli_actor(spec)[0]
        if field.name == "adapter" and adapter:
            return str(adapter)
        critic = getattr(self.app, "critic_spec", None)
        if critic:  # the console's critic fills the field of its kind: a run where a run is asked, else a backbone
            is_run = looks_like_run_id(str(critic))
            if field.check == "run:critic" and is_run:
                return str(critic)
            if field.name == "critic" and not is_run:
                return str(critic)
        return field.default

    def fields_for(self, command: str) -> list:
        """The inputs of one job form (only the selected form is mounted)."""
        form = FORMS_BY_COMMAND[command]
        self._form_command = command
        self._form_labels = list(getattr(self.app, "label_runs", []))
        last = console_state.load(self.app.db_path).get("forms", {}).get(command, {})
        last = last if isinstance(last, dict) else {}
        widgets: list = []
        for field in form.fields:
            wid = field_id(form.command, field.name)
            value = self.prefill(command, field, last)
            widgets.append(Label(field.label, classes="field-label"))
            if field.choices:
                # an option with no default (e.g. --scene) may stay unset: blank, left out of the command
                blank = field.default == ""
                fallback = Select.NULL if blank else field.default or field.choices[0]
                widgets.append(Select([(c, c) for c in field.choices],
                                      value=value if value in field.choices else fallback,
                                      allow_blank=blank, prompt="(default)" if blank else "Select", id=wid,
                                      compact=True))
            else:
                widget = Input(value, placeholder=field.help or field.label, id=wid, compact=True)
                widget.tooltip = field.help or None
                widgets.append(widget)
        return widgets

    @property
    def command(self) -> str:
        return str(self.query_one("#job-command", Select).value)

    def form_values(self) -> dict[str, str]:
        form = FORMS_BY_COMMAND[self.command]
        values = {}
        for field in form.fields:
            widget = self.query_one(f"#{field_id(form.command, field.name)}")
            value = widget.value
            values[field.name] = "" if value is Select.NULL or value is None else str(value)
        return values

    def request(self) -> JobRequest:
        return JobRequest(self.command, self.form_values(), self.app.db_path)

    def argv(self) -> list[str]:
        return self.request().argv

    def update_argv(self) -> None:
        argv = self.argv()
        shown = ["lactchain"] + argv[argv.index(self.command.split()[0]):]  # "strategy search": two words
        if self.app.db_path is not None:
            shown[-1] = self.app.db_label
        self.query_one("#job-argv", Static).update(Text(shell_line(shown), style="dim"))

    @on(Select.Changed, "#job-command")
    async def _command_changed(self, event: Select.Changed) -> None:
        self.query_one("#job-error", Static).update("")  # another form: the last form's error is not about it
        if self._form_command != str(event.value):
            await self._show_form(str(event.value))
            console_state.save(self.app.db_path, job_form=str(event.value))

    async def _show_form(self, command: str) -> None:
        box = self.query_one("#job-fields", Vertical)
        await box.remove_children()
        await box.mount_all(self.fields_for(command))
        self.update_argv()
        self.offer_run_ids()

    def on_key(self, event: events.Key) -> None:
        """Tab in a run-id field showing a completion takes it (as → does; a half-typed
        `play-e` launched nothing); with no completion shown, Tab moves on as anywhere."""
        field = self.focused
        if event.key != "tab" or not isinstance(field, Input) or field.suggester is None or not field.cursor_at_end:
            return
        before = field.value
        field.action_cursor_right()  # accepts the suggestion shown at the end, else does nothing
        if field.value != before:
            event.stop()
            event.prevent_default()

    @work(exclusive=True, group="run-ids", exit_on_error=False, name="run id completions")
    async def offer_run_ids(self) -> None:
        """Run-id fields complete the ids of runs of the right kind (→ or Tab accepts)."""
        from textual.suggester import SuggestFromList

        form = FORMS_BY_COMMAND[self.command]
        for field in form.fields:
            if not field.check.startswith("run:"):
                continue
            ids = await self.app.registry.call(run_choices, field.check)
            found = self.query(f"#{field_id(form.command, field.name)}")
            if found:
                found.first().suggester = SuggestFromList(ids, case_sensitive=False)

    @on(Input.Changed)
    @on(Select.Changed, ".job-fields Select")
    def _field_changed(self) -> None:
        self.update_argv()

    @on(Button.Pressed, "#job-launch")
    def _launch_pressed(self) -> None:
        self.action_launch()

    def action_new_job(self) -> None:
        self.query_one("#job-command", Select).focus()

    def action_focus_table(self) -> None:
        self.query_one("#jobs-table").focus()

    async def action_launch(self) -> None:
        request = self.request()
        command, values = request.command, request.values
        error = self.query_one("#job-error", Static)
        error.update("")
        for widget in self.query(".job-fields Input"):
            widget.remove_class("-invalid")
        try:
            problems = await self.app.registry.call(check_form, command, values)
        except Exception:  # noqa: BLE001 - the CLI checks again and says why
            problems = []
        if problems:  # point at the fields; nothing is launched
            error.update(Text("\n".join(f"✗ {why}" for _, why in problems), style="bold red"))
            for name, _ in problems:
                self.query_one(f"#{field_id(command, name)}").add_class("-invalid")
            self.query_one(f"#{field_id(command, problems[0][0])}").focus()
            return
        self.notify(f"launching {command}…", timeout=3)
        self.launch(request)

    @work(thread=True, exit_on_error=False, group="launch", name="launch job")
    def launch(self, request: JobRequest) -> None:
        launcher = self.app.launcher or launch_job
        command, values = request.command, dict(request.values)
        try:
            result = launcher(request)
        except Exception as exc:  # noqa: BLE001 - the job layer's one-line reason, as the CLI would say it
            self.app.call_from_thread(self.show_launch_error, command, str(exc))
            return
        forms = console_state.load(self.app.db_path).get("forms", {})
        console_state.save(self.app.db_path, forms={**(forms if isinstance(forms, dict) else {}), command: values})
        self.post_message(JobLaunched(command, getattr(result, "run_id", None), tuple(request.argv)))
        for note in getattr(result, "notes", ()):  # given for another world: said where it was launched
            self.app.call_from_thread(self.notify, note, severity="warning", timeout=12, markup=False)

    def show_launch_error(self, command: str, message: str) -> None:
        """The job layer's one-line reason, once: under the form, beside Launch (a toast
        repeating it covered the form on a small terminal)."""
        message = message.removeprefix("error: ")
        self.query_one("#job-error", Static).update(Text(f"✗ {command} did not start: {message}", style="bold red"))

    def on_job_launched(self, message: JobLaunched) -> None:
        self.last_launch = message
        self.last_launch_at = time.perf_counter()
        self.notify(f"started {message.run_id or message.command} (detached: it keeps running if you quit)")
        self.selected_id = message.run_id or self.selected_id
        self.refresh_jobs()

    # ---- jobs table ---------------------------------------------------------------
    @work(exclusive=True, group="jobs-list", exit_on_error=False, name="load jobs")
    async def refresh_jobs(self, reap: bool = False) -> None:
        try:
            jobs = await self.app.registry.call(fetch_jobs, reap, self._metrics_cache)
        except Exception as exc:  # noqa: BLE001
            self.query_one("#jobs-table").border_subtitle = f"registry unavailable: {exc}"
            return
        self.jobs = jobs
        self.populate()

    def populate(self) -> None:
        table = self.query_one("#jobs-table", DataTable)
        now = now_ms()
        rows = []
        for run in self.jobs:
            status = str(run["status"])
            rid = str(run["id"])
            rows.append((rid, (rid, Text(status, style=STATUS_STYLE.get(status, "")),
                               fmt_progress(run.get("_metrics"), status), fmt_duration(run_duration(run, now)),
                               fmt_ts(run.get("started_ms") or run.get("created_ms")),
                               fmt_run_metrics(run, limit=2))))
        sync_table(table, rows, keep=self.selected_id)
        active = sum(1 for r in self.jobs if r["status"] in ("RUNNING", "SCHEDULED"))
        table.border_subtitle = f"{active} active · {len(rows)} shown"
        job = self.selected_job()
        if job is not None and str(job["id"]) != self._shown_id:
            self.show_job(job)  # a new launch, or the first refresh: the log and chart follow it
        elif job is not None:
            self.sync_metrics(job)
        if job is not None:
            self.show_replicas(job)

    def show_replicas(self, job: dict) -> None:
        """Under the log: where a running job's engine replicas are."""
        self.query_one("#job-log").border_subtitle = escape(printable(replicas_line(job)))

    def selected_job(self) -> dict | None:
        return next((j for j in self.jobs if str(j["id"]) == self.selected_id), None)

    @on(DataTable.RowHighlighted, "#jobs-table")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None or event.row_key.value is None:
            return
        self.selected_id = event.row_key.value
        job = self.selected_job()
        if job is not None and str(job["id"]) != self._shown_id:
            self.show_job(job)

    def show_job(self, job: dict) -> None:
        """Point the log tail, the metric list and the chart at this job."""
        self._shown_id = str(job["id"])
        self.query_one("#job-log", LogTail).follow(job.get("log_path"), placeholder="(no log yet)")
        self.show_replicas(job)
        self._metric = None  # a new job: its own default metric
        self._shown_keys = None
        self.sync_metrics(job)

    def sync_metrics(self, job: dict) -> None:
        """Keep the metric list in step with what the job has logged so far (it grows
        while the job runs) and redraw the chart."""
        keys = sorted(job.get("_metrics") or {})
        select = self.query_one("#job-metric", Select)
        self._metric = self._metric if self._metric in keys else default_metric(str(job.get("kind")), keys)
        if keys != self._shown_keys:
            with select.prevent(Select.Changed):
                select.set_options([(k, k) for k in keys])
            self._shown_keys = keys
        if self._metric and select.value != self._metric:
            with select.prevent(Select.Changed):
                select.value = self._metric
        self.draw_chart()

    @on(Select.Changed, "#job-metric")
    def _metric_changed(self, event: Select.Changed) -> None:
        self._metric = None if event.value is Select.NULL else str(event.value)
        self.draw_chart()

    @work(exclusive=True, group="jobs-chart", exit_on_error=False, name="job chart")
    async def draw_chart(self) -> None:
        chart = self.query_one("#job-chart", MetricChart)
        run_id, key = self.selected_id, self._metric
        if not run_id or not key:
            chart.plot_series("no metric yet", {})
            return
        try:
            history = await self.app.registry.call(lambda reg: list(reg.metric_history(run_id, key)))
        except Exception as exc:  # noqa: BLE001
            chart.plot_series(f"{key}: {exc}", {})
            return
        chart.plot_series(key, {run_id: history})

    def selected_run(self) -> dict | None:
        return self.selected_job()

    def refresh_listing(self) -> None:
        self.refresh_jobs()

    def action_refresh(self) -> None:
        self.refresh_jobs(reap=True)

    def action_show_tab(self, tab: str) -> None:
        self.query_one("#jobs-tabs", TabbedContent).active = tab
