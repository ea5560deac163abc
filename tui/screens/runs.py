"""Runs: every run in the registry, filterable and sortable, with one run's details
(params, latest metrics, metric charts, artifacts, log tail), a metric overlay
across marked runs, "load this run's adapter into the Lab", and the Board tab: the
leaderboard of the selected run's env (classic agents, LLM evaluations, random and
the optimum on the same start states; `lactchain.leaderboard`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Select, Static, TabbedContent, TabPane

from lactchain.envs.catalog import DEFAULT_ENV
from lactchain.runs.logs import holding_log
from lactchain.runs.resume import KIND_ALIASES
from lactchain.runs.schema import NOTE_TAG, RUN_STATUSES, check_user_tag, is_system_tag
from lactchain.safe_text import shell_line
from tui import console_state
from tui.commands import bindings_for
from tui.format import (default_metric, fmt_duration, fmt_run_metrics, fmt_ts, fmt_value, key_metrics_first, now_ms,
                        run_duration, safe)
from tui.screens.base import BaseScreen
from tui.screens.run_controls import RunControls
from tui.widgets.log_tail import LogTail
from tui.widgets.metric_chart import MetricChart
from tui.widgets.tables import plain_cells, sync_table
from tui.widgets.topbar import TopBar
from tui.widgets.footer import FittedFooter

STATUS_STYLE = {"RUNNING": "bold yellow", "FINISHED": "green", "FAILED": "bold red", "KILLED": "magenta",
                "SCHEDULED": "cyan"}
# What matters first (an 80-column terminal shows these; the table scrolls for the rest).
COLUMNS = (("mark", "✓"), ("id", "id"), ("status", "status"), ("metrics", "key metrics"), ("kind", "kind"),
           ("duration", "dur"), ("created", "created"))
METRICS_WIDTH = 64  # a comparison's three cells run to ~120 characters: Info shows them all
SORTS = ("created", "kind", "status", "duration", "id", "metrics")  # metrics: each run's key metric
SORT_KEYS = {"created": "c", "kind": "k", "status": "s", "duration": "d", "id": "i", "metrics": "m"}  # O, then one
REFRESH_S = 2.0


PAGE = 300  # rows loaded at a time; the filter runs in the registry, so it reaches every run


class FilterError(ValueError):
    """A filter term that can match nothing (a status that does not exist): said, not an empty table."""


def parse_filter(query: str) -> tuple[list[str], dict[str, str]]:
    """'kind:train-critic status:run baseline' -> (free-text terms, {column: text}); all
    must match, case-insensitive. Free text matches id, name, kind, status and error."""
    terms, fields = [], {}
    for term in query.lower().split():
        column, sep, want = term.partition(":")
        if sep and column in ("id", "name", "kind", "status", "parent_id", "error", "parent"):
            column = "parent_id" if column == "parent" else column
            if column == "status" and not any(want in status.lower() for status in RUN_STATUSES):
                raise FilterError(f"status:{want} matches no status; use one of "
                                  f"{', '.join(s.lower() for s in RUN_STATUSES)} (or a part of one)")
            fields[column] = KIND_ALIASES.get(want, want) if column == "kind" else want
        else:
            terms.append(term)
    return terms, fields


def sort_key(column: str, now: int):  # noqa: ANN201
    def key(run: dict) -> Any:
        if column == "created":
            return run.get("created_ms") or 0
        if column == "duration":
            return run_duration(run, now) or 0.0
        if column == "metrics":  # the metric that matters for the run's kind; runs without one last
            value = key_metric_value(run)
            return (value is not None, value if value is not None else 0.0)
        return str(run.get(column) or "")

    return key


def key_metric_value(run: dict) -> float | None:
    metrics = run.get("_metrics") or {}
    keys = key_metrics_first(str(run.get("kind")), metrics)
    value = metrics.get(keys[0]) if keys else None
    value = value.get("value") if isinstance(value, dict) else value
    return float(value) if isinstance(value, (int, float)) else None


def group_children(runs: list[dict]) -> list[dict]:
    """Each run's child runs (a pipeline's phases) right under it, in the table's order;
    children whose parent is not in the list stay where they are."""
    ids = {r["id"] for r in runs}
    children: dict[str, list[dict]] = {}
    for r in runs:
        if r.get("parent_id") in ids:
            children.setdefault(r["parent_id"], []).append(r)
    out: list[dict] = []

    def place(run: dict, depth: int) -> None:
        out.append({**run, "_depth": depth})
        for child in children.get(run["id"], []):
            place(child, depth + 1)

    for r in runs:
        if r.get("parent_id") not in ids:
            place(r, 0)
    return out


TERMINAL = ("FINISHED", "FAILED", "KILLED")


def with_metrics(reg: Any, runs: list[dict], cache: dict) -> list[dict]:
    """Attach latest metrics; a finished run's metrics are read once and cached
    (`cache`: run id -> (status, metrics)), so a refresh costs one query per live run."""
    for run in runs:
        hit = cache.get(run["id"])
        if hit is not None and hit[0] == run["status"] and run["status"] in TERMINAL:
            run["_metrics"] = hit[1]
            continue
        try:
            run["_metrics"] = dict(reg.latest_metrics(run["id"]) or {})
        except Exception:  # noqa: BLE001 - a run without metrics is still a run
            run["_metrics"] = {}
        cache[run["id"]] = (run["status"], run["_metrics"])
    return runs


def fetch_runs(reg: Any, cache: dict | None = None, query: str = "", limit: int = PAGE) -> tuple[list[dict], int, int]:
    """The newest `limit` runs matching `query`, how many match, and how many runs there are."""
    terms, fields = parse_filter(query)
    runs, matched = reg.search_runs(terms, fields, limit=limit)
    if not matched and "kind" in fields:  # a kind no run has: say which there are (as status: does)
        kinds = reg.kinds()
        if not any(fields["kind"] in kind.lower() for kind in kinds):
            raise FilterError(f"kind:{fields['kind']} matches no run's kind here; kinds: {', '.join(kinds) or 'none'} "
                              "(or a part of one)")
    total = matched if not (terms or fields) else reg.search_runs(limit=0)[1]
    return with_metrics(reg, [dict(r) for r in runs], {} if cache is None else cache), matched, total


def loaded_from(reg: Any, plan: Any, specs: Mapping[str, str | None]) -> list[str]:
    """The console's models (role -> the adapter or critic it loaded: a run id, a prefix or
    a folder) that come from a run `plan` deletes, as `adapter (train-actor-1a2b)`."""
    from lactchain.runs.registry import AmbiguousRunId, RunNotFound

    found = []
    for role, spec in specs.items():
        if not spec:
            continue
        path = Path(spec).expanduser()
        if path.exists():
            inside = any(path.resolve().is_relative_to(folder.resolve()) for folder in plan.folders)
            owner = spec if inside else None
        else:
            try:
                owner = reg.resolve_run_id(spec)
            except (RunNotFound, AmbiguousRunId):
                owner = None
            owner = owner if owner in plan.ids else None
        if owner:
            found.append(f"{role} ({spec})")
    return found


def delete_question(plan: Any, loaded: Sequence[str] = ()) -> str:
    """What D asks: the runs, their size, the child runs that go with them and the kept
    runs that read them (what `runs delete` makes a user add --children / --force for),
    and which of the console's loaded models come from them."""
    from lactchain.runs.delete import human_bytes

    shown = plan.ids[:4] + ([f"and {len(plan.ids) - 4} more"] if len(plan.ids) > 4 else [])
    one = len(plan.ids) == 1
    lines = [f"Delete {len(plan.ids)} run{'' if one else 's'} and {'its folder' if one else 'their folders'} "
             f"({human_bytes(plan.size_bytes)})?", ", ".join(shown)]
    if plan.children:
        lines.append(f"This includes {len(plan.children)} child run(s): a pipeline's phases or runs resumed from them.")
    if plan.human_labels:
        lines.append(f"They hold {plan.human_labels} pair(s) labelled by hand.")
    if plan.used_by:
        readers = "; ".join(f"{kept} reads {', '.join(gone)}" for kept, gone in list(plan.used_by.items())[:3])
        lines.append(f"Still read by kept runs: {readers}.")
    if loaded:
        lines.append(f"The console has its {' and '.join(loaded)} loaded: the Lab keeps it until you load another, "
                     "and the next session starts without it.")
    return "\n".join(lines)


def fetch_detail(reg: Any, run_id: Any) -> dict:
    run = dict(reg.get_run(run_id) or {})
    return {
        "run": run,
        "params": dict(reg.params(run_id) or {}),
        "metrics": dict(reg.latest_metrics(run_id) or {}),
        "keys": list(reg.metric_keys(run_id) or []),
        "points": reg.metric_counts(run_id),
        "artifacts": [dict(a) if not isinstance(a, str) else {"path": a} for a in (reg.artifacts(run_id) or [])],
        "tags": dict(reg.tags(run_id) or {}),
        "log_holder": (holding_log(reg, run) or {}).get("id") if run else None,  # whose log holds its lines
    }


class RunsScreen(RunControls, BaseScreen):
    BINDINGS = bindings_for("runs") + [("escape", "focus_table", "Table")]
    AUTO_FOCUS = "#runs-table"  # shown with its table focused: a key typed right after never lands in the filter

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runs: list[dict] = []
        self.matched = self.total = 0
        self.marked: set[str] = set()
        self.sort_column = "created"
        self.sort_reverse = True
        self._remember_timer: Any = None  # saves the filter once typing pauses
        self.selected_id: str | None = None
        self.detail: dict | None = None
        self._metrics_cache: dict = {}  # used on the registry thread only
        self._chart_key: str | None = None

    def compose(self) -> ComposeResult:
        yield TopBar("runs", id="topbar")
        yield Input(placeholder="/ filter: text, kind:critic (or kind:train-critic), status:running, parent:RUN", id="runs-filter", compact=True)
        with Vertical(id="runs-main"):
            table = DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
            for key, label in COLUMNS:
                table.add_column(label, key=key)
            yield table
            with Vertical(id="runs-detail"):
                with TabbedContent(id="runs-tabs"):
                    with TabPane("Info", id="tab-info"):
                        with VerticalScroll():
                            yield Static("no run selected", id="run-info")
                    with TabPane("Chart", id="tab-chart"):
                        yield Select([], prompt="metric", id="metric-select", allow_blank=True)
                        yield MetricChart(id="run-chart")
                    with TabPane("Log", id="tab-log"):
                        yield LogTail(id="run-log")
                    with TabPane("Board", id="tab-board"):
                        yield Static("", id="board-title")
                        yield DataTable(id="board-table", zebra_stripes=True, cursor_type="row")
        yield Static("", id="runs-summary")
        yield FittedFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#runs-table").border_title = "Runs"
        saved = console_state.load(self.app.db_path).get("runs", {})  # the last session's filter and sort
        if isinstance(saved, dict):
            if saved.get("sort") in SORTS:
                self.sort_column, self.sort_reverse = saved["sort"], bool(saved.get("reverse"))
            if isinstance(saved.get("filter"), str):
                with self.prevent(Input.Changed):
                    self.query_one("#runs-filter", Input).value = saved["filter"]
        self.refresh_runs()
        self.set_interval(REFRESH_S, self._tick)

    def on_screen_resume(self) -> None:
        self.refresh_runs()
        self.query_one("#runs-table").focus()

    def _tick(self) -> None:
        if not self.is_current:
            return
        self.refresh_runs()
        if self.detail and str(self.detail["run"].get("status", "")).upper() in ("RUNNING", "SCHEDULED"):
            self.load_detail(self.selected_id, quiet=True)
        self.query_one("#run-log", LogTail).poll()

    # ---- data ---------------------------------------------------------------------
    @work(exclusive=True, group="runs-list", exit_on_error=False, name="load runs")
    async def refresh_runs(self) -> None:
        try:
            query = self.query_one("#runs-filter", Input).value.strip()
            runs, self.matched, self.total = await self.app.registry.call(fetch_runs, self._metrics_cache, query)
        except FilterError as exc:  # the table keeps what it showed; the summary says why the filter is wrong
            self.query_one("#runs-summary", Static).update(Text(f" filter: {exc}", style="bold red"))
            return
        except Exception as exc:  # noqa: BLE001
            self.query_one("#runs-summary", Static).update(Text(f"registry unavailable: {exc}", style="red"))
            return
        self.runs = runs
        self.populate()

    def visible_runs(self) -> list[dict]:
        """The loaded page (already filtered by the registry), sorted."""
        runs = list(self.runs)
        runs.sort(key=sort_key(self.sort_column, now_ms()), reverse=self.sort_reverse)
        return group_children(runs) if self.sort_column == "created" else runs

    def populate(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        now = now_ms()
        rows = []
        for run in self.visible_runs():
            rid = str(run["id"])
            status = str(run.get("status") or "")
            rows.append((rid, (
                "✓" if rid in self.marked else " ",
                rid,
                Text(status, style=STATUS_STYLE.get(status.upper(), "")),
                fmt_run_metrics(run, limit=3, width=METRICS_WIDTH),
                "  " * (run.get("_depth", 1) - 1) + "└ " + str(run.get("kind") or "") if run.get("_depth")
                else str(run.get("kind") or ""),
                fmt_duration(run_duration(run, now)),
                fmt_ts(run.get("created_ms"), seconds=False),
            )))
        sync_table(table, rows, keep=self.selected_id)
        arrow = "↓" if self.sort_reverse else "↑"
        query = self.query_one("#runs-filter", Input).value.strip()
        shown = f" {len(rows)}/{self.matched} runs" + (f" matching (of {self.total})" if query else "")
        if len(rows) < self.matched:
            shown += " · newest shown; filter to reach the rest"
        summary = Text(f"{shown} · sort {self.sort_column} {arrow}", style="dim")
        if self.marked:
            summary.append(f" · {len(self.marked)} marked", style="bold")
        self.query_one("#runs-summary", Static).update(summary)

    @on(DataTable.RowHighlighted, "#runs-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None or event.row_key.value is None:
            return
        run_id = event.row_key.value
        if run_id != self.selected_id:
            self.selected_id = run_id
            self.load_detail(run_id)

    @work(exclusive=True, group="runs-detail", exit_on_error=False, name="load run")
    async def load_detail(self, run_id: str | None, quiet: bool = False) -> None:
        if run_id is None:
            return
        run_key = self._registry_id(run_id)
        try:
            detail = await self.app.registry.call(fetch_detail, run_key)
        except Exception as exc:  # noqa: BLE001
            if not quiet:
                self.query_one("#run-info", Static).update(Text(f"cannot load run {run_id}: {exc}", style="red"))
            return
        if run_id != self.selected_id:
            return
        self.detail = detail
        self.show_detail(detail)
        await self.draw_chart()
        if self.query_one("#runs-tabs", TabbedContent).active == "tab-board":
            self.load_board()

    def _registry_id(self, run_id: str) -> Any:
        for run in self.runs:
            if str(run["id"]) == run_id:
                return run["id"]
        return run_id

    def show_detail(self, d: dict) -> None:
        run, params, metrics = d["run"], d["params"], d["metrics"]
        t = Text()
        t.append(f"{run.get('id')}  {safe(run.get('name'), keep_newlines=False)}\n", style="bold")
        status = str(run.get("status") or "")
        t.append(f"{run.get('kind')} · ")
        t.append(status, style=STATUS_STYLE.get(status.upper(), ""))
        t.append(f" · created {fmt_ts(run.get('created_ms'))} · {fmt_duration(run_duration(run))}\n")
        if run.get("parent_id"):
            t.append(f"parent {run['parent_id']}\n", style="dim")
        if run.get("error"):
            t.append(f"error: {safe(run['error'])}\n", style="bold red")
        if run.get("cmd"):
            t.append(f"cmd: {safe(shell_line(run['cmd']))}\n", style="dim")
        tags = d.get("tags") or {}
        if tags.get(NOTE_TAG):
            t.append(f"note: {safe(tags[NOTE_TAG])}\n", style="bold yellow")
        t.append("\nparams\n", style="bold underline")
        for k in sorted(params):
            t.append(f"  {safe(k)} = {fmt_value(params[k])}\n")
        if not params:
            t.append("  (none)\n", style="dim")
        t.append("\nlatest metrics\n", style="bold underline")
        for k in sorted(metrics):
            v = metrics[k]
            value = v.get("value") if isinstance(v, dict) else v
            step = f"  @ step {v.get('step')}" if isinstance(v, dict) and v.get("step") is not None else ""
            t.append(f"  {safe(k)} = {fmt_value(value)}{step}\n")
        if not metrics:
            t.append("  (none)\n", style="dim")
        t.append("\nartifacts\n", style="bold underline")
        for a in d["artifacts"]:
            t.append(f"  {safe(a.get('kind', ''))} {safe(a.get('path', ''))}\n")
        if not d["artifacts"]:
            t.append("  (none)\n", style="dim")
        if tags:  # yours first (N writes the note; `runs tag` any key), then lactchain's own
            t.append("\ntags\n", style="bold underline")
            for k in sorted(tags, key=lambda key: (is_system_tag(key), key)):
                t.append(f"  {safe(k)} = {safe(tags[k], keep_newlines=False)}\n", style="dim" if is_system_tag(k) else "")
        self.query_one("#run-info", Static).update(t)
        keys = d["keys"]
        select = self.query_one("#metric-select", Select)
        # the chart opens on the run kind's key metric with a curve (more than one point), not on
        # the alphabetically first one (often a single final value)
        curves = [k for k in keys if d.get("points", {}).get(k, 0) > 1]
        first = default_metric(str(run.get("kind")), curves) or default_metric(str(run.get("kind")), keys)
        current = select.value if select.value in keys else (first or Select.NULL)
        self._chart_key = None if current is Select.NULL else current
        with select.prevent(Select.Changed):
            select.set_options([(k, k) for k in keys])
            if current is not Select.NULL:
                select.value = current
        holder = d.get("log_holder")
        self.query_one("#run-log", LogTail).follow(run.get("log_path"), placeholder=(
            f"(this run has no log of its own: it ran inside {holder}, whose log holds its lines)" if holder
            else "(this run has no log)"))

    @on(TabbedContent.TabActivated, "#runs-tabs")
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "tab-board":
            self.load_board()

    def board_env(self) -> str:
        """The env whose leaderboard the Board tab shows: the selected run's, else the default env."""
        params = (self.detail or {}).get("params") or {}
        return str(params.get("env") or DEFAULT_ENV)

    @work(exclusive=True, group="runs-board", exit_on_error=False, name="leaderboard")
    async def load_board(self) -> None:
        from lactchain.leaderboard import COLUMNS as BOARD, format_cell, leaderboard

        env = self.board_env()
        title = self.query_one("#board-title", Static)
        title.update(Text(f"leaderboard: {env} · computing…", style="dim"))
        try:
            rows = await self.app.registry.call(leaderboard, env)
        except ValueError as exc:  # no agent evaluated on this env yet: the fix is in the message
            title.update(Text(str(exc), style="yellow"))
            return
        except Exception as exc:  # noqa: BLE001
            title.update(Text(f"leaderboard unavailable: {exc}", style="red"))
            return
        table = self.query_one("#board-table", DataTable)
        table.clear(columns=True)
        for label, _ in BOARD:
            table.add_column(label)
        for row in rows:
            table.add_row(*plain_cells(*(format_cell(row[key]) for _, key in BOARD)))
        title.update(Text(f"leaderboard: {env} · greedy from every start state · the selected run's env",
                          style="bold"))

    @on(Select.Changed, "#metric-select")
    async def _metric_changed(self, event: Select.Changed) -> None:
        self._chart_key = None if event.value is Select.NULL else str(event.value)
        await self.draw_chart()

    async def draw_chart(self) -> None:
        key = self._chart_key
        chart = self.query_one("#run-chart", MetricChart)
        if not key or self.selected_id is None:
            chart.plot_series("no metric", {})
            return
        ids = sorted(self.marked) if self.marked else [self.selected_id]
        keys = [self._registry_id(i) for i in ids]
        try:
            series = await self.app.registry.call(
                lambda reg: {str(i): list(reg.metric_history(i, key) or []) for i in keys})
        except Exception as exc:  # noqa: BLE001
            chart.plot_series(f"{key}: {exc}", {})
            return
        chart.plot_series(f"{key}" + (f" · {len(ids)} runs" if len(ids) > 1 else ""), series)

    # ---- actions ------------------------------------------------------------------
    def action_refresh(self) -> None:
        self.refresh_runs()
        if self.selected_id:
            self.load_detail(self.selected_id)

    def action_filter(self) -> None:
        self.query_one("#runs-filter", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#runs-table").focus()

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self) -> None:
        self.refresh_runs()  # in the registry: reaches runs beyond the loaded page
        if self._remember_timer is not None:
            self._remember_timer.stop()
        self._remember_timer = self.set_timer(0.5, self._remember)  # once typing pauses, not per keystroke

    def _remember(self) -> None:
        """Filter and sort, as the next session opens with them."""
        console_state.save(self.app.db_path, runs={"filter": self.query_one("#runs-filter", Input).value,
                                                   "sort": self.sort_column, "reverse": self.sort_reverse})

    @on(Input.Submitted, "#runs-filter")
    def _filter_done(self) -> None:
        self._remember()
        self.query_one("#runs-table").focus()

    def action_sort(self) -> None:
        """o: each column its natural way first (newest, longest first), then the other way,
        then the next column."""
        natural = self.sort_column in ("created", "duration")
        if self.sort_column in SORTS and self.sort_reverse == natural:
            self.sort_reverse = not natural  # the same column, the other way
        else:
            i = SORTS.index(self.sort_column) if self.sort_column in SORTS else -1
            self.sort_column = SORTS[(i + 1) % len(SORTS)]
            self.sort_reverse = self.sort_column in ("created", "duration")
        self.populate()
        self._remember()

    @on(DataTable.HeaderSelected, "#runs-table")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))

    def sort_by(self, column: str | None) -> None:
        """Sort by `column`, its natural way first (newest, longest first); the column it is
        already sorted by, the other way."""
        if column not in SORTS:
            return
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, column in ("created", "duration")
        self.populate()
        self._remember()

    def action_sort_column(self) -> None:
        """O: one key per column (the current one again: the other way)."""
        from tui.widgets.confirm import ChooseScreen

        arrow = "↓" if self.sort_reverse else "↑"
        choices = [(SORT_KEYS[c], c, c + (f"  (now {arrow}: again flips it)" if c == self.sort_column else ""))
                   for c in SORTS]
        self.app.push_screen(ChooseScreen("Sort runs by", choices), self.sort_by)

    def action_mark(self) -> None:
        if self.selected_id is None:
            return
        self.marked ^= {self.selected_id}
        self.populate()

    async def action_overlay(self) -> None:
        if not self.marked:
            self.notify("mark runs with space first; showing the selected run")
        self.query_one("#runs-tabs", TabbedContent).active = "tab-chart"
        await self.draw_chart()

    async def action_compare(self) -> None:
        """The marked runs side by side (2 or 3; mark them with space)."""
        from lactchain.runs.compare import MAX_RUNS, compare_runs
        from tui.widgets.compare import CompareScreen

        ids = sorted(self.marked)
        if not 2 <= len(ids) <= MAX_RUNS:
            self.notify(f"mark 2 or 3 runs with space first ({len(ids)} marked)", severity="warning")
            return
        keys = [self._registry_id(i) for i in ids]
        try:
            table = await self.app.registry.call(compare_runs, keys)
        except Exception as exc:  # noqa: BLE001 - a run deleted meanwhile: say so
            self.app.report_error("compare failed", exc)
            return
        self.app.push_screen(CompareScreen(table))

    def _selected_run(self) -> dict | None:
        return next((r for r in self.runs if str(r["id"]) == self.selected_id), None)

    def selected_run(self) -> dict | None:
        return self._selected_run()

    def refresh_listing(self) -> None:
        self.refresh_runs()

    def action_load_critic(self) -> None:
        run = self._selected_run()
        if run is None or run.get("kind") != "critic":
            self.notify("select a train-critic run (kind critic) first", severity="warning")
            return
        self.app.load_critic(str(run["id"]))
        self.notify(f"loading the critic of {run['id']}; the Lab and the job forms use it once loaded")

    def action_show_log(self) -> None:
        self.query_one("#runs-tabs", TabbedContent).active = "tab-log"

    async def action_export(self) -> None:
        """The marked runs (else the selected one) as TensorBoard event files, beside the
        registry in exports/ (`lactchain runs export` does the same from a shell)."""
        ids = sorted(self.marked) or ([self.selected_id] if self.selected_id else [])
        if not ids:
            self.notify("select a run (or mark several with space) first", severity="warning")
            return
        from lactchain.runs.export import export_runs

        def export(reg: Any) -> Path:
            out = reg.runs_dir / "exports"
            export_runs(reg, ids, out, "tensorboard")
            return out

        try:
            out = await self.app.registry.call(export)
        except Exception as exc:  # noqa: BLE001 - a run gone, a full disk: say so
            self.app.report_error("export failed", exc)
            return
        self.notify(f"exported {len(ids)} run(s) to {out}: tensorboard --logdir {out}", timeout=10)

    async def action_delete(self) -> None:
        """The marked runs (else the selected one) with their child runs and folders, after
        a question that names what goes and which kept runs read it (as `runs delete`)."""
        from lactchain.runs.delete import delete_runs, human_bytes, plan_delete
        from tui.widgets.confirm import ConfirmScreen

        ids = sorted(self.marked) or ([self.selected_id] if self.selected_id else [])
        if not ids:
            self.notify("select a run (or mark several with space) first", severity="warning")
            return
        try:
            plan = await self.app.registry.call(plan_delete, [self._registry_id(i) for i in ids])
        except Exception as exc:  # noqa: BLE001 - a run gone meanwhile: say so
            self.app.report_error("delete failed", exc)
            return
        if plan.active:
            self.notify(plan.problem(children=True, force=True) or "", severity="warning", timeout=8)
            return

        async def answered(yes: bool | None) -> None:
            if not yes:
                return
            try:
                left = await self.app.registry.call(delete_runs, plan)
            except Exception as exc:  # noqa: BLE001 - started meanwhile, a read-only registry
                self.app.report_error("delete failed", exc)
                return
            self.marked -= set(plan.ids)
            if self.selected_id in plan.ids:  # the table's cursor lands on a kept run, which loads anew
                self.selected_id, self.detail = None, None
                self.query_one("#run-info", Static).update("no run selected")
            freed = f"freed {human_bytes(plan.size_bytes)}" if not left else f"could not remove {left[0]}"
            self.notify(f"deleted {len(plan.ids)} run{'s' if len(plan.ids) != 1 else ''}; {freed}",
                        severity="warning" if left else "information")
            self.refresh_runs()

        specs = {"adapter": self.app.live_actor[1], "critic": self.app.critic_spec}
        try:
            loaded = await self.app.registry.call(loaded_from, plan, specs)
        except Exception:  # noqa: BLE001 - only a note: ask without it
            loaded = []
        self.app.push_screen(ConfirmScreen(delete_question(plan, loaded)), answered)

    def action_note(self) -> None:
        """A note on the selected run (a `note` tag: shown in Info, found by the filter);
        an empty one removes it."""
        from tui.widgets.confirm import AskScreen

        if self._selected_run() is None or self.selected_id is None:
            self.notify("select a run first", severity="warning")
            return
        run_id = self._registry_id(self.selected_id)
        detail = self.detail or {}  # the note shown now, when the detail is this run's
        current = (detail.get("tags") or {}).get(NOTE_TAG, "") if detail.get("run", {}).get("id") == run_id else ""

        def problem(text: str) -> str | None:
            try:
                check_user_tag(NOTE_TAG, text)
            except ValueError as exc:
                return str(exc)
            return None

        async def answered(text: str | None) -> None:
            if text is None:
                return
            try:
                await self.app.registry.call(lambda reg: reg.set_tag(run_id, NOTE_TAG, text or None))
            except Exception as exc:  # noqa: BLE001 - a run deleted meanwhile, a read-only registry
                self.app.report_error("note not saved", exc)
                return
            self.notify(f"note on {run_id} {'saved' if text else 'removed'}")
            self.load_detail(self.selected_id, quiet=True)

        self.app.push_screen(AskScreen(f"Note on {run_id} (empty: none)", current, problem), answered)

    def action_load_adapter(self) -> None:
        if not self.detail or self.selected_id is None:
            self.notify("select a run first", severity="warning")
            return
        arts = [a for a in self.detail["artifacts"] if a.get("kind") == "adapter"]
        if not arts and self.detail["run"].get("kind") != "pipeline":  # an older pipeline: its saved state's
            self.notify(f"run {self.selected_id} has no adapter artifact", severity="warning")
            return
        base = self.detail["params"].get("actor") or self.app.actor_spec
        if not base or base == "oracle":
            self.notify("no actor preset to put the adapter on", severity="warning")
            return
        self.app.load_actor(str(base), str(self.selected_id))
        self.app.switch_mode("lab")
