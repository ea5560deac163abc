"""The Lab playing Blackjack: the env pane shows the hands, seeded deals replay, the
critic stays out of it (grid only), the palette and `--env` switch envs."""

from __future__ import annotations

from textual.widgets import DataTable

from lactchain.envs.blackjack import BlackjackSolver, Hand
from lactchain.moves import DEFAULT_MOVES, HIT, STICK
from tui.lab_session import LabSession
from tui.widgets.critic_pane import CriticPane
from tui.widgets.env_view import BlackjackView, blackjack_text
from tui.widgets.grid import GridView
from tui_helpers import palette, settle

FACE = {1: "A"}


def _faces(cards) -> list[str]:  # noqa: ANN001
    return [FACE.get(c, str(c)) for c in cards]


async def test_lab_on_blackjack_steps_the_tiny_actor_and_shows_the_hands(make_app, tiny_actor):
    app = make_app(actor=tiny_actor, actor_spec="tiny", env="blackjack")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert not screen.query(GridView)
        view = screen.query_one(BlackjackView)
        dealt = app.lab_session.snapshot()
        before = str(view.render())
        assert "??" in before and "in play" in before  # the hole card is face down
        await pilot.press("s")
        await settle(app, pilot)
        record = app.lab_session.history[-1]
        assert record.mode == "strict" and set(record.moves) <= {HIT, STICK}  # the env's own vocabulary
        assert tiny_actor.moves == DEFAULT_MOVES  # lent for the call only
        snap = app.lab_session.snapshot()
        shown = str(view.render())
        player_line = next(line for line in shown.splitlines() if line.startswith("you"))
        assert player_line.split()[1:] == _faces(snap.player_cards)
        assert snap.player_cards[:2] == dealt.player_cards  # the dealt hand, plus what it drew
        assert record.caption and record.caption in shown.replace("\n", " ")
        assert f"sum {snap.state.player_sum}" in shown
        assert ("??" in shown) != snap.done  # the hole card turns over when the hand ends
        state_line = str(screen.query_one("#actor-state").render())
        assert state_line.startswith("step 1 · Your sum is")
        assert "Blackjack: Your sum is" in record.prompt
        assert record.caption in str(screen.query_one("#actor-parse").render()).replace("\n", " ")


def test_a_seeded_deal_replays_the_same_cards(tiny_actor):
    session = LabSession(env_name="blackjack")
    first = session.step(tiny_actor)
    dealt_again = session.reset()  # r: the same deal
    second = session.step(tiny_actor)
    assert dealt_again.seed == first.seed == 0 and dealt_again.state == first.state
    assert second.moves == first.moves and second.caption == first.caption
    assert second.snapshot.player_cards == first.snapshot.player_cards
    assert second.snapshot.dealer_cards == first.snapshot.dealer_cards
    assert LabSession(env_name="blackjack").snapshot().player_cards == dealt_again.player_cards  # any session
    nxt = session.next_deal()  # n: the next hand, seeded like `lactchain play` episode 1
    assert nxt.deal == 1 and nxt.seed == 1_000_003 * 0 + 1 and not session.history


class Hitter:
    """Answers every prompt with one hit (a stand-in actor: the what-ifs are under test)."""

    def generate(self, prompts, *, num_samples=1, **_):  # noqa: ANN001, ANN003, ANN201
        from tui.models import OracleSample

        return [OracleSample("['hit']", [HIT], "strict") for _ in prompts for _ in range(num_samples)]


def test_candidates_are_played_on_the_same_cards_and_ranked_by_the_solver():
    session = LabSession(env_name="blackjack")
    state = session.snapshot().state
    value, rows = session.candidates(Hitter(), k=3)
    assert value is None and len(rows) == 3
    assert len({(c.next_state, c.reward, c.done) for c in rows}) == 1  # one seed: the same card drawn
    exact = BlackjackSolver().q_values(Hand(state.player_sum, state.dealer_card, bool(state.usable_ace)))[HIT]
    assert all(abs(c.q_star - exact) < 1e-9 for c in rows)
    assert session.snapshot().actions_taken == 0  # the live hand is untouched


async def test_a_grid_critic_gives_no_values_on_blackjack(make_app):
    from lactchain.models.critic import Critic

    app = make_app(critic=Critic.load("tiny"), critic_spec="tiny", env="blackjack")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("k")
        await settle(app, pilot)
        header = str(app.screen.query_one("#critic-value").render())
        assert "trained on grid: no values for blackjack (load one trained with --env blackjack)" in header
        assert "V*(s) = " in header and "oracle" in header
        table = app.screen.query_one(CriticPane).query_one(DataTable)
        assert table.row_count == 4
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(4)]
        assert all(r[4] == "—" and r[5] == "—" and r[6] != "—" for r in rows)  # no Q, no A; the oracle's Q*
        best = max(rows, key=lambda r: float(r[6]))
        starred = [str(c) for c in table.get_row_at(table.cursor_row)]
        assert starred[0] == "★" and starred[6] == best[6]
        assert "same cards ·" in str(app.screen.query_one("#critic-note").render())


async def test_palette_switches_the_lab_between_envs(make_app, registry):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        assert app.screen.check_action("new_episode", ()) is False  # no deals on the grid: 'n' is hidden
        await pilot.press("s")
        await settle(app, pilot)
        await palette(app, pilot, "play blackjack", "Lab: play blackjack")
        assert app.lab_session.env_name == "blackjack"
        assert app.screen.query(BlackjackView) and not app.screen.query(GridView)
        assert app.screen.check_action("new_episode", ()) is True
        assert app.screen.query_one("#lab-env").border_title == "Blackjack"
        deal = app.lab_session.snapshot()
        await pilot.press("e")  # the oracle plays the hand to its end
        await settle(app, pilot)
        assert app.lab_session.snapshot().done
        await pilot.press("n")
        await settle(app, pilot)
        assert app.lab_session.snapshot().deal == deal.deal + 1 and not app.lab_session.snapshot().done
        assert str(app.screen.query_one("#actor-state").render()).startswith("next · Your sum is")
        await palette(app, pilot, "play grid", "Lab: play grid")
        assert app.lab_session.env_name == "grid" and app.screen.query(GridView)
        await pilot.press("s")
        await settle(app, pilot)
        assert app.lab_session.snapshot().actions_taken == 1
    envs = sorted(registry.params(r["id"])["env"] for r in registry.list_runs(kind="play"))
    assert envs == ["blackjack", "grid", "grid"]  # one play run per env the Lab played


async def test_switching_env_from_another_screen_after_a_resize_keeps_the_console(make_app, registry):
    """The terminal resized while Runs shows, then "Lab: play blackjack": the Lab gets
    its resize with the new env's session and the old grid pane still mounted (it once
    sized the grid's cells from Blackjack, which has no size, and the console quit)."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        await pilot.resize_terminal(80, 24)
        await settle(app, pilot)
        await palette(app, pilot, "play blackjack", "Lab: play blackjack")
        await settle(app, pilot)
        assert app.is_running and app.lab_session.env_name == "blackjack"
        assert app.screen.query(BlackjackView) and not app.screen.query(GridView)
        await pilot.resize_terminal(120, 40)
        await palette(app, pilot, "play grid", "Lab: play grid")
        await settle(app, pilot)
        assert app.is_running and app.screen.query_one(GridView).cell_width == 7  # sized for the wide screen


def test_blackjack_text_hides_the_hole_card_until_the_hand_ends():
    from tui.lab_session import Snapshot

    hand = Hand(15, 10, False)
    open_hand = Snapshot("blackjack", hand, hand, (hand,), 0, 10, 0.0, False, "dealt", player_cards=(5, 10),
                         dealer_cards=(10,))
    text = blackjack_text(open_hand, hint="oracle: hit").plain
    assert "??" in text and "shows 10" in text and "oracle: hit" in text
    over = Snapshot("blackjack", hand, hand, (hand,), 1, 10, -1.0, True, "lost 15 to 20", player_cards=(5, 10),
                    dealer_cards=(10, 10), outcome="lost")
    text = blackjack_text(over).plain
    assert "??" not in text and "total 20" in text and "lost" in text


def test_tui_env_option_refuses_an_unknown_env_in_one_line(tmp_path, capsys):
    from tui.app import main

    assert main(["--env", "poker", "--db", str(tmp_path / "r.db"), "--actor", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown env 'poker'" in err[0] and "grid" in err[0] and "blackjack" in err[0]


async def test_a_blackjack_critic_scores_the_blackjack_candidates(make_app):
    """A critic trained with --env blackjack (here: the tiny backbone, its env set) gives
    V(s) and each candidate's Q and advantage beside the oracle's Q*."""
    from lactchain.models.critic import Critic

    app = make_app(critic=Critic.load("tiny", env="blackjack"), critic_spec="tiny", env="blackjack")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("k")
        await settle(app, pilot)
        header = str(app.screen.query_one("#critic-value").render())
        assert "no values" not in header
        table = app.screen.query_one(CriticPane).query_one(DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows and all(r[5] != "—" and r[6] != "—" for r in rows)  # the critic's A and the oracle's Q*


def test_tui_refuses_an_empty_model_option_instead_of_taking_the_default(tmp_path, capsys):
    """`--adapter ''` (a shell variable that was never set) is a slip: it used to open the
    base model as if no adapter had been asked for."""
    from tui.app import main

    assert main(["--adapter", "", "--db", str(tmp_path / "r.db"), "--actor", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --adapter is empty: give a value, or leave --adapter out for its default"]
    assert not (tmp_path / "r.db").exists()
