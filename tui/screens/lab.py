"""The Lab: watch the actor act in an env (the grid, Blackjack), step by step.

Env pane (left): the env's own view (the grid's `GridView`, the hands of Blackjack)
and the episode status. Actor pane (right, top): prompt, streaming completion,
parsed moves. Tabs (right, bottom): the critic's view of K sampled candidates, the
strategy prompt editor, the episode's steps. The palette's "Lab: play <env>"
switches env (`LactChainApp.play_env`), `lactchain-tui --env` picks the first.

Episode stepping runs in a thread worker (group "lab"): the worker calls
`LabSession.step`, which calls `actor.stream`; the streamed text, the step result
and the end of the run reach the UI only as messages.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, ProgressBar, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from lactchain.envs.catalog import EnvState
from tui.commands import bindings_for
from tui.lab_session import Snapshot, StepCancelled
from tui.messages import ActorText, CandidatesReady, EpisodeStopped, StepFinished, StepStarted
from tui.screens.base import BaseScreen
from tui.widgets.actor_pane import ActorPane
from tui.format import short_moves, short_state
from tui.widgets.critic_pane import CriticPane
from tui.widgets.env_view import append_decoding, append_progress, deal_status, view_for
from tui.widgets.grid import GridModel, GridView, fit_cell_width, grid_values
from tui import console_state
from tui.widgets.strategy_editor import DRAFT_KEY, StrategyEditor
from tui.widgets.tables import plain_cells
from tui.widgets.topbar import TopBar
from tui.widgets.footer import FittedFooter


class LabScreen(BaseScreen):
    BINDINGS = bindings_for("lab") + [Binding("escape", "focus_grid", "Grid", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pause = threading.Event()
        self.running = False
        self.show_values = False
        self._sampling = False  # a candidates worker is generating
        self._critic_values: dict | None = None
        self._tab_restored = False  # the last session's tab is shown before tab changes are remembered
        self._episode = 0  # bumped by each stop: the token of the episode thread whose messages count

    @property
    def session(self):  # noqa: ANN201
        return self.app.lab_session

    @property
    def grid(self) -> GridView | None:
        """The grid view, when the Lab plays the grid."""
        found = self.query(GridView)
        return found.first() if found else None

    def env_view(self):  # noqa: ANN201 - a GridView, or the env's own view
        if self.session.is_grid:
            return GridView(id="lab-grid", cell_width=self._cell_width(self.app.size.width))
        return view_for(self.session.env.console_view, id="lab-env")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """'n' (next deal) only where the seed deals the start: hidden from the grid's footer."""
        if action == "new_episode":
            return bool(self.session.deals)
        return True

    def compose(self) -> ComposeResult:
        yield TopBar("lab", id="topbar")
        with Horizontal(id="lab-main"):
            with Vertical(id="lab-left"):
                yield self.env_view()
                yield Static(id="lab-status")
                yield ProgressBar(total=None, show_eta=False, show_percentage=True, id="model-progress")
            with Vertical(id="lab-right"):
                yield ActorPane(id="actor-pane")
                with TabbedContent(id="lab-tabs", initial="tab-episode"):
                    with TabPane("Episode", id="tab-episode"):
                        table = DataTable(id="episode-table", cursor_type="row", zebra_stripes=True)
                        table.add_columns("#", "from", "moves", "parse", "r", "to", "what happened")
                        yield table
                    with TabPane("Critic", id="tab-critic"):
                        yield CriticPane(id="critic-pane")
                    # The editor (a TextArea) is mounted right after the first paint: see ensure_editor.
                    yield TabPane("Strategy", id="tab-strategy")
        yield FittedFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#actor-pane").border_title = "Actor"
        self.query_one("#lab-status").border_title = "Episode"
        for name in ("actor_status", "critic_status", "models_loading"):
            self.watch(self.app, name, lambda _v: self.update_status(), init=False)
        self.watch(self.app, "model_fraction", self._progress, init=False)
        self._setup_view()
        self.draw(self.session.snapshot())
        self._update_critic_header()
        self.call_after_refresh(self.compute_v_star)  # after the first paint: it holds the GIL a while
        self.call_after_refresh(self.ensure_editor)
        self.call_after_refresh(self.restore_strategy)
        self.call_after_refresh(self.restore_tab)

    def _setup_view(self) -> None:
        """Title, cursor and focus of the env pane; the critic pane told what it can show."""
        session = self.session
        self._tell_critic_pane()
        grid = self.grid
        if grid is None:
            self.query_one("#lab-env").border_title = session.env_name.capitalize()
            return
        grid.border_title = "Grid"
        grid.cursor = session.start
        self.watch(grid, "cursor", lambda _c: self.update_status(), init=False)
        grid.focus()

    async def env_changed(self) -> None:
        """The app switched the Lab's env (a new `LabSession`): swap the env pane, start over."""
        for editor in self.query(StrategyEditor):
            editor.flush_draft()  # the last env's text, typed under a second ago
        self._stop_worker()
        self._sampling, self._critic_values, self.show_values = False, None, False
        await self.query_one("#lab-left").query_children("#lab-grid, #lab-env").remove()
        await self.query_one("#lab-left", Vertical).mount(self.env_view(), before="#lab-status")
        self._setup_view()
        self.refresh_bindings()
        found = self.query(StrategyEditor)
        if found:
            editor = found.first()
            editor.set_text(self.session.strategy)
            editor.loaded_version = editor.live_version = None
            editor.say(f"{self.session.env_name}'s built-in strategy (its saved versions are listed)")  # not the last env's
            editor.refresh_versions()
        snap = self.session.snapshot()
        self._show_next_prompt(snap)  # not the last env's prompt
        self._after_reset(snap, f"the Lab plays {self.session.env_name}")
        self.compute_v_star()
        self.restore_strategy()

    def _strategy_key(self) -> str:
        """Where the applied strategy version is remembered: one per env."""
        return self.session.console_key("strategy_version")

    @work(exclusive=True, group="restore-strategy", exit_on_error=False)
    async def restore_strategy(self) -> None:
        """Reopen on the strategy version applied last time (if it is still in the registry),
        then on the text the editor held unsaved when the last session ended (quit, crash
        or a dropped SSH connection lose no edit)."""
        saved = console_state.load(self.app.db_path)
        version = saved.get(self._strategy_key())
        if isinstance(version, int):
            await self._restore_version(version)
        draft = saved.get(self.session.console_key(DRAFT_KEY))
        if isinstance(draft, str) and draft.strip() and draft.strip() != self.session.strategy.strip():
            editor = await self.ensure_editor()
            editor.set_text(draft)
            editor.loaded_version = None
            editor.say("↺ your unsaved text from the last session (not applied: ctrl+s saves it, ctrl+g applies it)",
                       "ok")
            self.query_one(ActorPane).show_message("the strategy editor holds unsaved text from the last session")

    async def _restore_version(self, version: int) -> None:
        try:
            row = await self.app.registry.call(lambda reg: reg.get_prompt(version))
            if row is None:
                return
            self.session.set_strategy(row["text"])
        except Exception:  # noqa: BLE001 - the built-in strategy stays
            return
        editor = await self.ensure_editor()
        editor.set_text(self.session.strategy)
        editor.loaded_version = editor.live_version = version
        editor.say(f"strategy version {version} (applied last session) is live", "ok")
        editor.refresh_versions()
        self.query_one(ActorPane).show_message(f"strategy version {version} restored from the last session")

    async def ensure_editor(self) -> StrategyEditor:
        """The strategy editor, mounted on first need (it is the costliest widget to build)."""
        found = self.query(StrategyEditor)
        if found:
            return found.first()
        editor = StrategyEditor(self.session.strategy, id="strategy-editor")
        await self.query_one("#tab-strategy", TabPane).mount(editor)
        return editor

    # ---- drawing ------------------------------------------------------------------
    def _overlay(self, snap: Snapshot) -> tuple[dict | None, str]:
        if not self.show_values:
            return None, ""
        o = snap.state.orientation
        if self._critic_values is not None:
            return grid_values(self._critic_values, o), f"critic V(s) facing {o}"
        return grid_values(self.session.v_star(), o), f"exact V*(s) facing {o}"

    def draw(self, snap: Snapshot) -> None:
        if snap.env != self.session.env_name:  # from a worker of the env the Lab left
            snap = self.session.snapshot()
        grid = self.grid
        if grid is not None:
            values, label = self._overlay(snap)
            grid.model = GridModel(
                size=snap.size, goal=snap.goal, agent=snap.state, path=snap.path, start=snap.start,
                values=values, values_label=label, landmarks=snap.landmarks, walls=snap.walls,
            )
        else:
            self.query_one("#lab-env").show(snap, self._hint(snap) if self.show_values else "")
        self.update_status(snap)

    def _hint(self, snap: Snapshot) -> str:
        """The solver's advice here (the value toggle, for envs without a value overlay)."""
        if snap.done:
            return ""
        move, value = self.session.oracle_move(snap.state), self.session.oracle_value(snap.state)
        if move is None:
            return "" if value is None else f"oracle: V* = {value:+.2f}"
        return f"oracle: {move}" + ("" if value is None else f" · V* = {value:+.2f}")

    def update_status(self, snap: Snapshot | None = None) -> None:
        snap = snap or self.session.snapshot()
        app = self.app
        grid = self.grid
        if grid is None or snap.env != self.session.env_name or not self.session.is_grid:
            self.query_one("#lab-status", Static).update(deal_status(
                snap, app.actor_status, self.running, self.session.constrained, self.session.temperature))
            self.query_one("#model-progress", ProgressBar).display = bool(app.models_loading)
            return
        cursor = grid.cursor
        t = Text()
        append_progress(t, snap, app.actor_status)
        if self.running:
            t.append("  ● running", style="bold yellow")
        elif snap.done:
            at_goal = (snap.state.x, snap.state.y) == tuple(snap.goal)
            t.append("  ✓ at goal" if at_goal else "  ■ over", style="bold green" if at_goal else "bold red")
        t.append("\nstart ", style="dim")
        t.append(short_state(snap.start))
        t.append("  now ", style="dim")
        t.append(short_state(snap.state))
        append_decoding(t, self.session.constrained, self.session.temperature)
        t.append("\ncursor ", style="dim")
        t.append(short_state(cursor))
        if (cursor.x, cursor.y) in snap.walls:  # in place of the keys' hint: enter/click are refused here
            t.append("  wall: not a start", style="bold #ff5f5f")
        else:
            t.append("  ←↑→↓ o ⏎/click")
        if snap.caption:
            t.append("\n" + snap.caption, style="italic")
        self.query_one("#lab-status", Static).update(t)
        bar = self.query_one("#model-progress", ProgressBar)
        bar.display = bool(app.models_loading)

    def _progress(self, fraction: float | None) -> None:
        bar = self.query_one("#model-progress", ProgressBar)
        if fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=round(fraction * 100))

    def _update_critic_header(self, value: float | None = None) -> None:
        session = self.session
        snap = session.snapshot()
        critic = self.app.critic if session.critic_fits(self.app.critic) else None
        self.query_one(CriticPane).show_value(
            self.app.critic_label if critic is not None else None, value, snap.state, session.oracle_value(snap.state),
        )
        if critic is not None and value is None:
            self.critic_state_value(snap.state)

    @work(thread=True, exclusive=True, group="v-star", exit_on_error=False, name="exact V*")
    def compute_v_star(self) -> None:
        session = self.session
        session.warm_oracle()
        self.app.call_from_thread(self._oracle_ready, session)

    def _oracle_ready(self, session: Any) -> None:
        if session is self.session:
            self._update_critic_header()
            if self.show_values and not session.is_grid:  # the hint waited for the solver
                self.draw(session.snapshot())

    @work(thread=True, exclusive=True, group="critic-v", exit_on_error=False, name="critic V(s)")
    def critic_state_value(self, state: EnvState) -> None:
        try:
            value = self.session.critic_values(self.app.critic, [state])[0]
        except Exception as exc:  # noqa: BLE001
            self.app.call_from_thread(self.app.report_error, "critic failed", exc)
            return
        self.app.call_from_thread(self._show_state_value, state, value)

    def _show_state_value(self, state: EnvState, value: float) -> None:
        if self.session.snapshot().state == state:
            self._update_critic_header(value)

    def on_resize(self, event) -> None:  # noqa: ANN001
        grid = self.grid
        if grid is not None and self.session.is_grid:  # not a grid pane the new env's is about to replace
            grid.cell_width = self._cell_width(event.size.width)

    def _cell_width(self, screen_width: int) -> int:
        """7 columns a cell on a wide screen, 5 on a narrow one; fewer where a larger grid (a
        scene's 8x8) would not fit the left pane (36 / 32 columns inside)."""
        wide = screen_width >= 100
        return fit_cell_width(self.session.env.size, 7 if wide else 5, 36 if wide else 32)

    # ---- grid ---------------------------------------------------------------------
    @on(GridView.StartChosen)
    def _start_chosen(self, event: GridView.StartChosen) -> None:
        state = event.state
        if (state.x, state.y) in self.session.snapshot().walls:  # the grid refuses these; never reset into a wall
            self.notify(f"({state.x}, {state.y}) is a wall: a start must be an open cell", title="Not a start",
                        severity="warning")
            return
        self._stop_worker()
        snap = self.session.reset(start=state)
        self._after_reset(snap, f"start set to {state}")

    # ---- actions ------------------------------------------------------------------
    def _actor_ready(self) -> bool:
        if self.app.actor is None:
            why = "loading…" if self.app.models_loading else self.app.actor_status
            self.notify(f"the actor is not loaded ({why})", severity="warning")
            return False
        return True

    def action_step(self) -> None:
        self._start_run(1)

    def action_run_episode(self) -> None:
        self._start_run(None)

    def _start_run(self, max_steps: int | None) -> None:
        if self.running:
            self.notify("already running (p pauses)", severity="warning")
            return
        if not self._actor_ready():
            return
        if self.session.snapshot().done:
            self.notify(self._over_message(), severity="warning")
            return
        self._pause.clear()
        self.running = True
        self.update_status()
        self.run_steps(max_steps, self._episode)

    def action_pause(self) -> None:
        if not self.running:
            self.notify("nothing is running")
            return
        self._pause.set()
        self.notify("pausing after this step")

    @on(TabbedContent.TabActivated, "#lab-tabs")
    def _tabs_first(self, event: TabbedContent.TabActivated) -> None:
        """On a short terminal the Strategy and Critic tabs take the right column (app.tcss).
        The tab is remembered: the next session opens on it."""
        self.set_class(event.pane.id in ("tab-strategy", "tab-critic"), "-tabs-first")
        if self._tab_restored:
            console_state.save(self.app.db_path, lab_tab=event.pane.id)

    def restore_tab(self) -> None:
        tab = console_state.load(self.app.db_path).get("lab_tab")
        tabs = self.query_one("#lab-tabs", TabbedContent)
        if tab in [pane.id for pane in tabs.query(TabPane)]:
            tabs.active = tab
        self._tab_restored = True

    def _stop_worker(self) -> None:
        """Stop the episode thread; what it still posts (a prompt, streamed text, its end) is
        ignored, or a reset or an env switch would show the stopped step as streaming."""
        self._pause.set()
        self._episode += 1
        self.workers.cancel_group(self, "lab")

    def _over_message(self) -> str:
        if self.session.deals:
            return "the hand is over: n deals the next one (r replays it)"
        return "the episode is over: r resets it"

    def action_reset(self) -> None:
        self._stop_worker()
        snap = self.session.reset()
        self._after_reset(snap, "episode reset" if not self.session.deals else f"deal #{snap.deal} again: same cards")

    def action_new_episode(self) -> None:
        self._stop_worker()
        snap = self.session.next_deal()
        self._after_reset(snap, f"deal #{snap.deal} (seed {snap.seed})")

    def _after_reset(self, snap: Snapshot, message: str) -> None:
        self.running = False
        self.query_one("#episode-table", DataTable).clear()
        pane = self.query_one(ActorPane)
        pane.clear_completion()
        self._show_next_prompt(snap)  # the prompt of the state reset to, not the last step's
        pane.show_message(message)
        self.draw(snap)
        self._update_critic_header()
        self.query_one(CriticPane).show_candidates([])

    def _show_next_prompt(self, snap: Snapshot) -> None:
        session = self.session
        self.query_one(ActorPane).show_next(session.model_prompt(self.app.actor, session.user_prompt()),
                                            f"next · {session.headline(snap.state)}")

    def action_toggle_constrained(self) -> None:
        self.session.constrained = not self.session.constrained
        self.update_status()
        self.notify("constrained decoding" if self.session.constrained else "free-text decoding")

    def action_toggle_values(self) -> None:
        self.show_values = not self.show_values
        if self.show_values and self.app.critic is not None and self._critic_values is None and self.session.critic_fits(self.app.critic):
            self.critic_grid_values()
        self.draw(self.session.snapshot())

    def action_focus_grid(self) -> None:
        if self.grid is not None:
            self.grid.focus()

    async def action_edit_strategy(self) -> None:
        editor = await self.ensure_editor()
        self.query_one("#lab-tabs", TabbedContent).active = "tab-strategy"
        editor.query_one("#strategy-text").focus()

    def action_candidates(self) -> None:
        if self.running:  # one model, one generation at a time
            self.notify("an episode is running: pause it (p) before sampling candidates", severity="warning")
            return
        if self._sampling:
            self.notify("already sampling candidates", severity="warning")
            return
        if not self._actor_ready():
            return
        if self.session.snapshot().done:
            self.notify(self._over_message(), severity="warning")
            return
        self.query_one("#lab-tabs", TabbedContent).active = "tab-critic"
        self.query_one(CriticPane).query_one("#critic-value", Static).update(Text("sampling candidates…", style="italic"))
        self._sampling = True
        self.sample_candidates()

    # ---- workers (threads: they post messages, never touch widgets) ---------------
    @work(thread=True, exclusive=True, group="lab", exit_on_error=False, name="episode")
    def run_steps(self, max_steps: int | None, episode: int) -> None:
        worker = get_current_worker()
        session, actor = self.session, self.app.actor
        done_steps, reason = 0, ""

        def on_prompt(prompt: str, state: Any) -> None:
            step = session.snapshot().actions_taken + 1
            self.post_message(StepStarted(prompt, f"step {step} · {session.headline(state)}", episode))

        def on_text(piece: str) -> None:
            if worker.is_cancelled:
                raise StepCancelled()
            self.post_message(ActorText(piece, episode))

        while True:
            if worker.is_cancelled:
                reason = "stopped"
                break
            try:
                record = session.step(actor, on_text, on_prompt=on_prompt)
            except StepCancelled:
                reason = "stopped"
                break
            except Exception as exc:  # noqa: BLE001 - shown to the researcher
                reason = f"error: {type(exc).__name__}: {exc}"
                break
            if record is None:
                reason = "reset during the step"
                break
            self.post_message(StepFinished(record, episode))
            self._record(record)
            done_steps += 1
            if record.terminated or record.truncated:
                reason = _end_reason(record, session.deals, session.env.outcome_words[0])
                break
            if max_steps is not None and done_steps >= max_steps:
                break
            if self._pause.is_set():
                reason = "paused"
                break
        self.post_message(EpisodeStopped(reason, session.snapshot(), episode))

    def _record(self, record: Any) -> None:
        """The step into the registry (this console's `play` run), from the episode thread."""
        actor, adapter = self.app.live_actor  # the one that played the step
        params = {"actor": actor, "adapter": adapter, "strategy_text": self.session.strategy,
                  **self.app.lab_world_params}  # the env, and its scene where not the default
        try:
            self.app.registry.call_sync(self.app.lab_recorder.record, record, params)
        except Exception as exc:  # noqa: BLE001 - the episode goes on; the researcher is told
            self.app.call_from_thread(self.notify, f"step not recorded in the registry: {exc}", severity="warning")

    @work(thread=True, exclusive=True, group="critic", exit_on_error=False, name="candidates")
    def sample_candidates(self, k: int = 4) -> None:
        critic = self.app.critic if self.session.critic_fits(self.app.critic) else None
        state = self.session.snapshot().state
        try:
            value, rows = self.session.candidates(self.app.actor, k=k, critic=critic)
        except Exception as exc:  # noqa: BLE001
            self.app.call_from_thread(self.notify, f"sampling failed: {exc}", severity="error")
            self.app.call_from_thread(setattr, self, "_sampling", False)
            return
        self.post_message(CandidatesReady(value, rows, self.app.critic_label if critic is not None else None, state))

    @work(thread=True, exclusive=True, group="critic-grid", exit_on_error=False, name="critic values")
    def critic_grid_values(self) -> None:
        session, critic = self.session, self.app.critic
        states = list(session.planner.states)  # every pose of the grid (its planner's states)
        try:
            values = session.critic_values(critic, states)
        except Exception as exc:  # noqa: BLE001
            self.app.call_from_thread(self.notify, f"critic failed: {exc}", severity="error")
            return
        self.app.call_from_thread(self._set_critic_values, dict(zip(states, values)))

    def _set_critic_values(self, values: dict) -> None:
        self._critic_values = values
        self.draw(self.session.snapshot())

    # ---- messages from workers ----------------------------------------------------
    def on_step_started(self, message: StepStarted) -> None:
        if message.episode == self._episode:
            self.query_one(ActorPane).show_prompt(message.prompt, message.state_text)

    def on_actor_text(self, message: ActorText) -> None:
        if message.episode == self._episode:
            self.query_one(ActorPane).append(message.text)

    def on_step_finished(self, message: StepFinished) -> None:
        r = message.record
        if message.episode != self._episode or r.snapshot.env != self.session.env_name:  # stopped, or the env left
            return
        self.query_one(ActorPane).show_result(
            r.text, r.moves, r.mode, logprob=r.logprob, n_tokens=r.n_tokens, reward=r.reward, caption=r.caption
        )
        table = self.query_one("#episode-table", DataTable)
        table.add_row(*plain_cells(str(r.index), short_state(r.state), short_moves(r.moves), r.mode, f"{r.reward:+.0f}",
                                   short_state(r.next_state), r.caption), key=str(r.index))
        table.move_cursor(row=table.row_count - 1)
        self.draw(r.snapshot)
        self._update_critic_header()
        self.query_one(CriticPane).mark_state(r.next_state)

    def on_episode_stopped(self, message: EpisodeStopped) -> None:
        if message.episode != self._episode:  # reset or switched since: that already stopped it
            return
        self.running = False
        self.draw(message.snapshot)
        if message.reason.startswith("error"):
            self.app.report_error("the step failed", message.reason)
        elif message.reason:
            self.notify(message.reason)

    def on_candidates_ready(self, message: CandidatesReady) -> None:
        if not self._sampling:  # sampled in the env the Lab has left since
            return
        snap = self.session.snapshot()
        pane = self.query_one(CriticPane)
        self._sampling = False
        pane.show_value(message.critic_label, message.value, message.state, self.session.oracle_value(message.state))
        pane.show_candidates(message.rows, message.state)
        pane.mark_state(snap.state)

    @on(StrategyEditor.Applied)
    def _strategy_applied(self, event: StrategyEditor.Applied) -> None:
        try:
            self.session.set_strategy(event.text)
        except ValueError as exc:
            self.app.report_error("strategy rejected", exc)
            return
        console_state.save(self.app.db_path, **{self._strategy_key(): event.version})  # reopened on it next time
        editor = self.query_one(StrategyEditor)
        editor.keep_draft()  # applied unsaved text stays a draft (nothing else reopens it); a version does not
        prompt = self.session.user_prompt()
        self.query_one(ActorPane).show_prompt(prompt, "next prompt (strategy applied)")
        self.query_one(ActorPane).show_message("strategy applied: the next step uses it")
        editor.refresh_versions()

    def _tell_critic_pane(self) -> None:
        """Whether the loaded critic has values for the env played (one trained on it, or
        none loaded yet on the grid, the critic's default env)."""
        critic, session = self.app.critic, self.session
        fits = session.critic_fits(critic) if critic is not None else session.is_grid
        self.query_one(CriticPane).set_env(session.env_name, fits, getattr(critic, "env_name", None))

    def on_model_changed(self) -> None:
        """Called by the app when the actor or critic changed."""
        self._tell_critic_pane()
        self._critic_values = None
        self.update_status()
        self._update_critic_header()


def _end_reason(record: Any, deals: bool, success: str = "reached the goal") -> str:
    """Why the episode stopped, for the toast (`success`: the env's words for a success)."""
    if deals:
        outcome = record.snapshot.outcome or ("out of actions" if record.truncated else "over")
        return f"hand over: {outcome} · n deals the next hand"
    return success if record.terminated and record.success else (
        "out of actions" if record.truncated else "episode over")
