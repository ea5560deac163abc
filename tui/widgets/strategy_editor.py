"""StrategyEditor: edit the learnable strategy prompt, validate it, save it as a new
version in the registry's prompts table, apply it to the live actor, and browse /
restore earlier versions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Static, TextArea

from lactchain.envs.world import world_label
from lactchain.prompts import PromptError, validate_strategy
from lactchain.strategy.strategies import evaluated_scores, ranked_versions, search_worlds, version_env
from tui.commands import bindings_for
from tui.format import fmt_ts
from tui.widgets.tables import plain_cells


DRAFT_KEY = "strategy_draft"  # the console state's key (per env: LabSession.console_key) for unsaved text
DRAFT_SAVE_S = 1.0  # the editor's unsaved text is kept this long after the last keystroke
QUICK_EVAL_STATES = "8"  # ctrl+o's default: a quick check (all start states take minutes on the default actor)
FOLLOW_EVAL_S = 2.0  # how often a launched evaluation is looked at until it ends


def check_states(text: str) -> str | None:
    """ctrl+o's answer: 'all' or a number of start states (the evaluate job's own rule)."""
    if text == "all" or (text.isdigit() and 1 <= int(text) <= 100_000):
        return None
    return f"{text!r}: give a number of start states from 1 to 100000, or all"


class StrategyEditor(Vertical):
    BINDINGS = bindings_for("lab", target="StrategyEditor")

    DEFAULT_CSS = """
    StrategyEditor { height: 1fr; }
    StrategyEditor #strategy-row { height: 1fr; }
    StrategyEditor TextArea { width: 3fr; height: 1fr; min-width: 20; }
    StrategyEditor #strategy-side { width: 2fr; max-width: 36; min-width: 14; height: 1fr; }
    StrategyEditor #strategy-versions { height: 1fr; }
    StrategyEditor #strategy-note { height: 3; }
    StrategyEditor #strategy-message { height: auto; max-height: 3; }
    StrategyEditor #strategy-message.-error { color: $error; }
    StrategyEditor #strategy-message.-ok { color: $success; }
    """

    @dataclass
    class Applied(Message):
        text: str
        version: Any | None

    def __init__(self, text: str, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self._initial = text
        self.live_version: Any | None = None  # the version the live actor uses (None: unsaved text)
        self.loaded_version: Any | None = None  # the version the editor text came from
        self.versions: list[dict] = []
        self._draft_timer: Any = None  # the pending keep of the unsaved text ...
        self._draft_pending: Any = None  # ... and what it keeps (under the env it was typed for)

    def compose(self) -> ComposeResult:
        with Horizontal(id="strategy-row"):
            yield TextArea(self._initial, id="strategy-text", soft_wrap=True, show_line_numbers=False)
            with Vertical(id="strategy-side"):  # the note above the versions: Tab goes text -> note -> versions
                yield Input(placeholder="note for the next save (optional)", id="strategy-note")
                table = DataTable(id="strategy-versions", cursor_type="row", zebra_stripes=True)
                table.add_columns("ver", "score", "saved", "note")
                yield table
        yield Static("ctrl+t validate · ctrl+s save version · ctrl+g apply to actor · ctrl+r restore version",
                     id="strategy-message")

    def on_key(self, event: events.Key) -> None:
        """The editor is a place to type: a character its text and note fields did not take
        (the versions table has the focus) is dropped here, never run as a Lab command (a
        note typed there once toggled decoding and started an episode)."""
        if event.is_printable:
            event.stop()

    def on_mount(self) -> None:
        self.query_one("#strategy-versions", DataTable).border_title = "versions"
        self.call_after_refresh(self.refresh_versions)  # not before the first paint

    @property
    def text(self) -> str:
        return self.query_one("#strategy-text", TextArea).text

    def set_text(self, text: str) -> None:
        self.query_one("#strategy-text", TextArea).load_text(text)

    def say(self, message: str, kind: str = "") -> None:
        msg = self.query_one("#strategy-message", Static)
        msg.set_class(kind == "error", "-error")
        msg.set_class(kind == "ok", "-ok")
        msg.update(Text(message))

    def _validated(self) -> str | None:
        try:
            return validate_strategy(self.text)
        except PromptError as exc:
            self.say(f"✗ invalid strategy: {exc}", "error")
            return None

    # ---- actions ------------------------------------------------------------------
    def action_validate(self) -> None:
        text = self._validated()
        if text is not None:
            self.say(f"✓ valid strategy ({len(text)} characters)", "ok")

    def saved_version_of(self, text: str) -> int | None:
        """The saved version whose text this is (saving it again would add a duplicate)."""
        return next((v["version"] for v in self.versions if (v.get("text") or "").strip() == text.strip()), None)

    async def action_save_version(self) -> int | None:
        text = self._validated()
        if text is None:
            return None
        same = self.saved_version_of(text)
        if same is not None:
            self.loaded_version = same
            self.say(f"= identical to version {same}: nothing new to save", "ok")
            return same
        note = self.query_one("#strategy-note", Input).value.strip() or None
        parent = self.loaded_version if self.loaded_version is not None else self.live_version
        env = self.app.lab_session.env_name  # written for the env the Lab plays: listed under it
        try:
            version = await self.app.registry.call(
                lambda reg: reg.save_prompt(text, note=note, parent_version=parent, env=env)
            )
        except Exception as exc:  # noqa: BLE001
            self.say(f"✗ could not save: {exc}", "error")
            return
        self.loaded_version = version
        self.query_one("#strategy-note", Input).value = ""
        self.say(f"✓ saved as version {version} (ctrl+g applies it to the actor)", "ok")
        self.versions.insert(0, {"version": version, "text": text, "note": note, "env": env})
        self.refresh_versions()
        self.keep_draft()  # saved: no draft
        return version

    async def action_evaluate(self) -> None:
        """Evaluate the editor's strategy as a detached `lactchain evaluate --strategy V`
        job (saved first when it is new) on as many start states as asked (8 by default:
        a quick check; `all` for the full score). Its score lands in the versions table
        when the job ends."""
        from tui.widgets.confirm import AskScreen

        version = await self.action_save_version()
        if version is None:
            return

        def asked(states: str | None) -> None:
            if states is None:
                self.say(f"evaluate of version {version} cancelled")
                return
            self._evaluate(version, states)

        self.app.push_screen(AskScreen(f"Evaluate version {version} greedily from how many start states? "
                                       "(a number, or all)", QUICK_EVAL_STATES, check_states), asked)

    def _evaluate(self, version: int, states: str) -> None:
        from tui.jobs_bridge import JobRequest, cli_actor

        spec, adapter = self.app.live_actor  # evaluated as the Lab plays it
        actor, why = cli_actor(spec)
        values = {"actor": actor, "adapter": adapter or "", "states": states, "strategy": str(version),
                  **self.app.lab_world_params}  # the world the Lab plays: the strategy was written for it
        self.say(f"launching evaluate of version {version} on {states} start states with {actor}{why}…")
        self._launch_evaluate(JobRequest("evaluate", values, self.app.db_path), version)

    @work(thread=True, exit_on_error=False, group="evaluate-strategy", name="evaluate strategy")
    def _launch_evaluate(self, request: Any, version: int) -> None:
        from tui.jobs_bridge import launch_job

        try:
            result = (self.app.launcher or launch_job)(request)
        except Exception as exc:  # noqa: BLE001
            self.app.call_from_thread(self.say, f"✗ evaluate did not start: {exc}", "error")
            return
        run_id = getattr(result, "run_id", None)
        self.app.call_from_thread(
            self.say, f"✓ evaluating version {version} as {run_id} (Jobs: 4); its score lands here when it ends", "ok")
        if run_id:
            self.app.call_from_thread(self._follow_evaluation, run_id, version)

    @work(exclusive=False, group="evaluate-follow", exit_on_error=False, name="follow evaluation")
    async def _follow_evaluation(self, run_id: str, version: int) -> None:
        """Poll the evaluate run until it ends; then show its score in the versions table."""
        import asyncio

        while True:
            try:
                run = await self.app.registry.call(lambda reg: reg.get_run(run_id))
            except Exception:  # noqa: BLE001 - the registry went away: nothing to follow
                return
            if run["status"] not in ("RUNNING", "SCHEDULED"):
                break
            await asyncio.sleep(FOLLOW_EVAL_S)
        self.refresh_versions()
        if run["status"] != "FINISHED":
            self.say(f"✗ evaluate {run_id} of version {version} ended {run['status']}", "error")
            return
        metrics = await self.app.registry.call(lambda reg: reg.latest_metrics(run_id))
        rate, n = metrics.get("success_rate"), metrics.get("states")
        if isinstance(rate, (int, float)):
            self.say(f"✓ version {version}: success {rate:.2f} on {int(n or 0)} start states ({run_id})", "ok")

    def action_apply(self) -> None:
        text = self._validated()
        if text is None:
            return
        self.live_version = self.loaded_version
        self.post_message(self.Applied(text, self.loaded_version))
        label = f"version {self.loaded_version}" if self.loaded_version is not None else "unsaved text"
        self.say(f"✓ applied {label} to the live actor", "ok")

    def action_restore(self) -> None:
        table = self.query_one("#strategy-versions", DataTable)
        if not self.versions or table.cursor_row is None or not 0 <= table.cursor_row < len(self.versions):
            self.say("no saved version to restore", "error")
            return
        row = self.versions[table.cursor_row]
        self.set_text(row["text"])
        self.loaded_version = row["version"]
        self.action_apply()
        self.say(f"✓ restored version {row['version']} and applied it", "ok")

    @on(TextArea.Changed, "#strategy-text")
    def _edited(self) -> None:
        loaded = next((v for v in self.versions if v["version"] == self.loaded_version), None)
        if loaded is not None and loaded["text"].strip() != self.text.strip():
            self.loaded_version = None
        # kept a second after the last keystroke (not on every one), under the env it was typed for
        session = self.app.lab_session
        key, default = session.console_key(DRAFT_KEY), session.env.default_strategy
        if self._draft_timer is not None:
            self._draft_timer.stop()
        self._draft_pending = lambda: self.keep_draft(key, default)
        self._draft_timer = self.set_timer(DRAFT_SAVE_S, self.flush_draft)

    def flush_draft(self) -> None:
        """Keep the pending draft now (the env is about to change, or its second is up)."""
        if self._draft_pending is not None:
            self._draft_pending()  # keep_draft drops the timer and the pending keep

    def keep_draft(self, key: str | None = None, default: str | None = None) -> None:
        """The text as the env's draft (console state: a quit, a crash or a dropped SSH
        connection loses no edit, applied or not), or no draft where it is a saved version
        (the next session reopens on it) or the env's built-in strategy. A keep still
        pending from the last keystroke is dropped: this one is newer."""
        from tui import console_state

        self._draft_pending = None
        if self._draft_timer is not None:
            self._draft_timer.stop()
            self._draft_timer = None
        session = self.app.lab_session
        key = key or session.console_key(DRAFT_KEY)
        default = session.env.default_strategy if default is None else default
        text = self.text
        unsaved = text.strip() != default.strip() and self.saved_version_of(text) is None
        console_state.save(self.app.db_path, **{key: text if unsaved and text.strip() else None})

    # ---- versions -----------------------------------------------------------------
    @work(exclusive=True, group="strategy-versions")
    async def refresh_versions(self) -> None:
        try:
            rows, evaluated, worlds = await self.app.registry.call(
                lambda reg: (rows := list(reg.prompts()), evaluated_scores(reg), search_worlds(reg, rows)))
        except Exception as exc:  # noqa: BLE001
            self.say(f"versions unavailable: {exc}", "error")
            return
        env = self.app.lab_session.env_name  # a search on another env scored its versions for that env only
        rows = [dict(r) for r in rows if version_env(r, worlds, env) == env]
        self.versions = ranked_versions(rows)  # hand-saved newest first, then a search's best first
        table = self.query_one("#strategy-versions", DataTable)
        table.clear()
        for r in self.versions:
            mark = "●" if r["version"] == self.live_version else " "
            first_line = (r.get("text") or "").strip().splitlines()[:1]
            note = r.get("note") or (first_line[0] if first_line else "")
            where = world_label(worlds.get(r.get("run_id") or "", {"env": env})).removeprefix(env).strip(" ,")
            note = f"{where}: {note}" if where else note  # scored on a scene (or another state text): say which
            score = "" if r.get("score") is None else f"{r['score']:.2f}"
            if not score and r["version"] in evaluated:  # a hand-saved version: its newest evaluation
                rate, n = evaluated[r["version"]]
                score = f"{rate:.0%} of {n}"  # its success rate over n start states
            table.add_row(*plain_cells(f"{mark}{r['version']}", score, fmt_ts(r.get("created_ms")), note[:40]),
                          key=str(r["version"]))
