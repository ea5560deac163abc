"""Lab screen: stepping (streamed from a worker thread), episodes, start state, toggles."""

from __future__ import annotations

import threading

import pytest

from textual.widgets import DataTable

from lactchain.envs import State
from tui.models import OracleActor
from tui.widgets.actor_pane import ActorPane
from tui.widgets.critic_pane import CriticPane
from tui.widgets.grid import GridView
from tui_helpers import settle


async def test_step_with_the_tiny_actor_changes_grid_and_actor_pane(make_app, tiny_actor):
    app = make_app(actor=tiny_actor, actor_spec="tiny")
    async with app.run_test(size=(120, 40)) as pilot:
        grid = app.screen.query_one(GridView)
        pane = app.screen.query_one(ActorPane)
        before = grid.model
        assert before.path == (State(0, 0, "east"),)
        await pilot.press("s")
        await settle(app, pilot)
        after = grid.model
        record = app.lab_session.history[-1]
        assert app.lab_session.snapshot().actions_taken == 1
        assert after != before and after.path == record.snapshot.path
        assert after.agent == record.next_state
        # The completion streamed into the pane and the parse result is shown.
        assert pane.completion == record.text and record.text
        assert record.mode == "strict"  # constrained decoding always yields a clean list
        parse = str(pane.query_one("#actor-parse").render())
        assert "strict" in parse and f"{len(record.moves)} move" in parse
        prompt = str(pane.query_one("#actor-prompt").render())
        assert "You are at (x=0, y=0) facing east" in prompt
        assert app.screen.query_one("#episode-table", DataTable).row_count == 1


class ThreadCheckingActor(OracleActor):
    """Records which thread generated and forwards text in several pieces."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def stream(self, prompt, on_text, **kwargs):  # noqa: ANN001, ANN003
        self.threads.append(threading.current_thread())
        return super().stream(prompt, on_text, **kwargs)


async def test_generation_runs_off_the_event_loop_and_streams_pieces(make_app):
    actor = ThreadCheckingActor()
    app = make_app(actor=actor)
    async with app.run_test(size=(120, 40)) as pilot:
        pieces: list[str] = []
        pane = app.screen.query_one(ActorPane)
        original = pane.append

        def spy(piece: str) -> None:
            assert threading.current_thread() is threading.main_thread()
            pieces.append(piece)
            original(piece)

        pane.append = spy
        await pilot.press("s")
        await settle(app, pilot)
        assert actor.threads and actor.threads[0] is not threading.main_thread()
        assert len(pieces) > 3 and "".join(pieces) == app.lab_session.history[-1].text


async def test_run_episode_reaches_the_goal_and_reset_goes_back(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await settle(app, pilot)
        snap = app.lab_session.snapshot()
        assert snap.done and (snap.state.x, snap.state.y) == (3, 3)
        assert "at goal" in str(app.screen.query_one("#lab-status").render())
        await pilot.press("s")  # the episode is over: nothing happens
        await settle(app, pilot)
        assert app.lab_session.snapshot().actions_taken == 1
        await pilot.press("r")
        await settle(app, pilot)
        assert app.lab_session.snapshot().state == State(0, 0, "east")
        assert app.screen.query_one(GridView).model.path == (State(0, 0, "east"),)
        assert app.screen.query_one("#episode-table", DataTable).row_count == 0


async def test_reset_shows_the_prompt_of_the_state_reset_to(make_app):
    app = make_app(actor=OracleActor(max_moves=1))  # one move per step: the episode moves away from the start
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s", "s")
        await settle(app, pilot)
        assert "You are at (x=0, y=0)" not in str(app.screen.query_one("#actor-prompt").render())
        await pilot.press("r")
        await settle(app, pilot)
        assert "You are at (x=0, y=0) facing east" in str(app.screen.query_one("#actor-prompt").render())


class GatedActor(OracleActor):
    """Blocks in `stream` until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__(max_moves=1)
        self.gate = threading.Event()

    def stream(self, prompt, on_text, **kwargs):  # noqa: ANN001, ANN003
        assert self.gate.wait(10)
        return super().stream(prompt, on_text, **kwargs)


class PromptGatedActor(OracleActor):
    """Renders its prompt in the episode thread only when the test opens the gate: the
    thread is stopped between rendering the prompt and posting it."""

    def __init__(self) -> None:
        super().__init__(max_moves=1)
        self.gate = threading.Event()

    def chat_prompt(self, user_text: str) -> str:
        if threading.current_thread() is not threading.main_thread():
            assert self.gate.wait(10)
        return super().chat_prompt(user_text)


async def test_a_step_stopped_by_a_reset_does_not_come_back_as_streaming(make_app):
    """r while the episode thread is about to show its prompt: the stopped step's prompt and
    '(streaming)' title, posted after the reset, used to replace the reset state's prompt
    and stay there (the same after an env switch)."""
    actor = PromptGatedActor()
    app = make_app(actor=actor)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await pilot.press("r")
        await settle(app, pilot)
        actor.gate.set()  # the stopped thread now posts its prompt, then sees it was cancelled
        await settle(app, pilot)
        completion = app.screen.query_one("#actor-completion")
        assert completion.border_title == "completion" and not app.screen.running
        assert str(app.screen.query_one("#actor-state").render()).startswith("next · ")
        await pilot.press("s")  # the Lab still steps
        await settle(app, pilot)
        assert app.lab_session.snapshot().actions_taken == 1


async def test_pause_stops_an_episode_after_the_current_step(make_app):
    actor = GatedActor()
    app = make_app(actor=actor)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        assert app.screen.running
        await pilot.press("s")  # already running: refused, no second worker
        await pilot.press("p")
        actor.gate.set()
        await settle(app, pilot)
        snap = app.lab_session.snapshot()
        assert snap.actions_taken == 1 and not snap.done
        assert not app.screen.running
        await pilot.press("e")  # resumes from where it paused, to the goal
        await settle(app, pilot)
        assert app.lab_session.snapshot().done


async def test_choose_start_state_with_keys_and_with_the_mouse(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        grid = app.screen.query_one(GridView)
        grid.focus()
        await pilot.press("right", "right", "up", "o", "enter")
        await settle(app, pilot)
        assert app.lab_session.start == State(2, 1, "south")
        assert grid.model.agent == State(2, 1, "south")
        # Click the cell (1, 3): row 0 of the drawing, column 1.
        offset = grid.content_region.offset - grid.region.offset
        x = offset.x + 3 + 1 * (grid.cell_width + 1) + 2
        y = offset.y + 1
        await pilot.click(GridView, offset=(x, y))
        await settle(app, pilot)
        assert app.lab_session.start == State(1, 3, "south")
        await pilot.press("s")
        await settle(app, pilot)
        record = app.lab_session.history[-1]
        assert record.state == State(1, 3, "south")
        assert "You are at (x=1, y=3) facing south" in record.prompt


async def test_constrained_toggle_value_overlay_and_candidates(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.lab_session.constrained
        await pilot.press("c")
        assert not app.lab_session.constrained
        assert "free text" in str(app.screen.query_one("#lab-status").render())
        await pilot.press("c")
        assert app.lab_session.constrained
        await pilot.press("v")
        model = app.screen.query_one(GridView).model
        assert model.values and "V*" in model.values_label
        assert model.values[(3, 3)] == 0.0 and model.values[(2, 3)] > 0
        await pilot.press("k")
        await settle(app, pilot)
        table = app.screen.query_one(CriticPane).query_one(DataTable)
        assert table.row_count == 4
        assert "critic not loaded" in str(app.screen.query_one("#critic-value").render())
        assert str(table.get_row_at(table.cursor_row)[0]) == "★"


async def test_no_actor_means_a_warning_not_a_crash(make_app):
    app = make_app(actor=None, actor_spec=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        assert app.lab_session.snapshot().actions_taken == 0
        assert any("not loaded" in n.message for n in app._notifications)


async def test_models_load_in_the_background_with_visible_progress(make_app, tiny_actor):
    """The first screen is up before the actor exists; status shows the load, then it works."""
    app = make_app(actor=None, actor_spec="tiny", load_models=True)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.actor is None
        seen = [app.actor_status]
        app.watch(app, "actor_status", lambda status: seen.append(status))  # every status, however fast the load
        for _ in range(600):
            if app.actor is not None:
                break
            await pilot.pause(0.05)
        assert app.actor is not None, seen[-1]
        assert any("loading" in s for s in seen)
        assert app.actor_status == "tiny ✓"
        assert "tiny ✓" in str(app.screen.query_one("#topbar").render())
        await pilot.press("s")
        await settle(app, pilot)
        assert app.lab_session.snapshot().actions_taken == 1


async def test_with_a_real_critic_the_candidates_have_q_and_advantage(make_app):
    from lactchain.models.critic import Critic

    critic = Critic.load("tiny")
    app = make_app(critic=critic, critic_spec="tiny")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        assert "V(s) = " in str(app.screen.query_one("#critic-value").render())
        await pilot.press("k")
        await settle(app, pilot)
        table = app.screen.query_one(CriticPane).query_one(DataTable)
        assert table.row_count == 4
        row = [str(c) for c in table.get_row_at(0)]
        assert row[4] != "—" and row[5] != "—"  # Q (critic's Q head) and A (advantage)
        await pilot.press("v")
        await settle(app, pilot)
        model = app.screen.query_one(GridView).model
        assert "critic V(s)" in model.values_label and len(model.values) == 16


async def test_repeated_keys_do_not_stack_toasts_and_reset_clears_the_stream(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        screen.running = True  # an episode is being played
        for _ in range(3):
            await pilot.press("s")
        await settle(app, pilot)
        assert sum("already running" in n.message for n in app._notifications) == 1
        screen.running = False
        pane = screen.query_one(ActorPane)
        pane.show_prompt("a prompt")  # a generation starts streaming ...
        await pilot.press("r")  # ... and the episode is reset
        await settle(app, pilot)
        completion = pane.query_one("#actor-completion")
        assert completion.border_title == "completion" and "▌" not in str(completion.render())


async def test_a_lab_episode_is_a_play_run_in_the_registry(make_app, registry):
    from cli_helpers import run_cli_uncaptured

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("e")  # run the episode (the oracle actor reaches the goal)
        for _ in range(100):
            await pilot.pause(0.05)
            if not app.screen.running and app.lab_session.done:
                break
        await settle(app, pilot)
        history = list(app.lab_session.history)
        await pilot.press("r", "s")  # a second episode starts with its first step
        await settle(app, pilot)
    (run,) = registry.list_runs(kind="play")
    assert registry.params(run["id"])["source"] == "console" and run["status"] == "FINISHED"
    first, second = registry.episodes(run["id"])
    assert first["success"] is True and first["length"] == len(history) > 0
    assert first["return"] == pytest.approx(sum(r.reward for r in history))
    steps = registry.steps(episode_id=first["id"])
    assert [s["moves"] for s in steps] == [list(r.moves) for r in history]
    assert steps[0]["prompt"] == history[0].prompt and steps[-1]["done"] is True
    (step,) = registry.steps(episode_id=second["id"])  # one step after the reset: its own episode
    assert step["t"] == 0 and (second["return"] is None) != step["done"]
    # the finished episode's metrics, as a play job logs them (runs list's key metric)
    finished = [e for e in (first, second) if e["return"] is not None]
    assert [(m["step"], m["value"]) for m in registry.metric_history(run["id"], "episode_success")] == \
        [(i, float(e["success"])) for i, e in enumerate(finished)]
    assert [(m["step"], m["value"]) for m in registry.metric_history(run["id"], "episode_return")] == \
        [(i, pytest.approx(e["return"])) for i, e in enumerate(finished)]
    assert registry.latest_metrics(run["id"])["success_rate"] == sum(e["success"] for e in finished) / len(finished)
    code, out, _ = run_cli_uncaptured(["runs", "list", "--db", str(registry.path)])
    assert code == 0 and "success_rate=1" in out  # what runs list shows first


async def test_critic_table_is_marked_stale_after_a_step_and_k_waits_for_the_episode(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        pane = screen.query_one(CriticPane)
        start = app.lab_session.snapshot().state
        await pilot.press("k")
        await settle(app, pilot)
        assert pane.query_one("#critic-table", DataTable).row_count > 0 and pane.table_state == start
        note = str(pane.query_one("#critic-note").render())
        assert "sampled at" in note and "A = r + γ·V(s') − V(s)" in note and "stale" not in note
        await pilot.press("s")
        await settle(app, pilot)
        assert app.lab_session.snapshot().state != start
        assert "stale: sampled at" in str(pane.query_one("#critic-note").render())
        screen.running = True  # an episode is generating: k must not start a second generation
        await pilot.press("k")
        await settle(app, pilot)
        assert any("pause it (p)" in n.message for n in app._notifications)
        assert pane.table_state == start


async def test_lab_at_80x24_pins_the_state_and_shows_only_whole_footer_keys(make_app, tiny_actor):
    """80x24 is a first-class size: after a step the state line is in view above the prompt,
    the actor pane keeps room for the completion, and the footer never cuts a key in half."""
    from textual.widgets._footer import FooterKey

    from tui.widgets.footer import FittedFooter

    app = make_app(actor=tiny_actor, actor_spec="tiny")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.pause(0.2)
        screen = app.screen
        state_line = screen.query_one("#actor-state")
        assert "step 1 · at (x=0, y=0, facing east)" in str(state_line.render())
        pane = screen.query_one("#actor-pane")
        assert state_line.region.y == pane.region.y + 1  # first row inside the border: never scrolled away
        assert pane.region.height >= 12 and screen.query_one("#lab-tabs").region.height >= 7
        completion = screen.query_one("#actor-completion")
        assert completion.region.height >= 2 and pane.region.contains_region(completion.region)
        footer = screen.query_one(FittedFooter)
        shown = [k for k in footer.query(FooterKey) if k.region.width]  # on screen (its group may be hidden)
        hidden = [k for k in footer.query(FooterKey) if not k.region.width]
        assert hidden, "at 80 columns some keys must give way"
        assert shown[-1].has_class("-command-palette")
        for key in shown:  # each one whole inside the footer, none overlapping the palette key
            assert footer.region.contains_region(key.region), key.description
        palette = shown[-1].region
        assert all(k.region.right <= palette.x for k in shown[:-1])
        # Widening the terminal brings the hidden keys back.
        await pilot.resize_terminal(160, 40)
        await pilot.pause(0.3)
        assert all(k.region.width for k in footer.query(FooterKey))


async def test_a_preset_critic_loads_from_the_palette_and_says_its_head_is_untrained(make_app):
    """ctrl+p 'Load preset critic' (ctrl+k): asks which preset (minilm-l6 by default; an
    unknown one is refused in the dialog), loads it, and says its values rank nothing yet."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+k")
        await settle(app, pilot)
        field = app.screen.query_one("#ask-value")
        assert field.value == "minilm-l6"
        field.value = "no-such-critic"
        await pilot.press("enter")
        await settle(app, pilot)
        assert "no-such-critic" in str(app.screen.query_one("#ask-error").render())  # still asking
        field.value = "tiny"
        await pilot.press("enter")
        for _ in range(600):
            if app.critic is not None:
                break
            await pilot.pause(0.05)
        assert app.critic is not None and app.critic_label == "tiny (untrained)"
        assert app.critic_status == "tiny (untrained) ✓"
        assert any("untrained" in str(n.message) and "Train critic" in str(n.message)
                   for n in app._notifications)
        assert "V(s) = " in str(app.screen.query_one("#critic-value").render())


async def test_the_lab_play_run_names_who_played_and_where(make_app, registry):
    """A run's params are write-once: steps played after another actor or adapter loaded go
    into a new play run, from that episode's first step; each names the scene the Lab plays
    (GRPO's --rollouts-from rebuilds the env from it)."""
    from tui.messages import ModelLoaded
    from tui.models import OracleActor

    app = make_app(env_kwargs={"scene": "rooms"})
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await settle(app, pilot)
        app.post_message(ModelLoaded("actor", OracleActor(), "oracle + x", 0.0, "actor-0000000x", "oracle"))
        await settle(app, pilot)
        await pilot.press("s")  # the same episode: still the first run's
        await settle(app, pilot)
        await pilot.press("r", "s")  # a new episode by the new adapter: a new run
        await settle(app, pilot)
    runs = sorted(registry.list_runs(kind="play"), key=lambda r: r["created_ms"])
    params = [registry.params(r["id"]) for r in runs]
    assert [(p["adapter"], p["scene"]) for p in params] == [(None, "rooms"), ("actor-0000000x", "rooms")]
    assert [len(registry.steps(run_id=r["id"])) for r in runs] == [2, 1]
