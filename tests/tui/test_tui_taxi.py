"""Taxi in the console: the Lab plays it through the generic text view."""

from __future__ import annotations

from lactchain.envs.catalog import make_env
from lactchain.envs.taxi import TaxiSolver
from tui_helpers import settle


async def test_the_console_lab_plays_taxi_through_the_generic_text_view(tmp_path):
    """`lactchain-tui --env taxi`: no grid widgets; the env's own text render, captions and
    headline; the model-free oracle actor reads Taxi's prompt and delivers."""
    from tui.app import LactChainApp
    from tui.models import OracleActor
    from tui.widgets.env_view import TextEnvView
    from tui.widgets.grid import GridView

    app = LactChainApp(db_path=tmp_path / "registry.db", actor_spec="oracle", actor=OracleActor(), load_models=False,
                       env="taxi")
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(app, pilot)
        assert not app.screen.query(GridView)
        view = app.screen.query_one(TextEnvView)
        session = app.lab_session
        start = session.snapshot().start
        first = make_env("taxi")
        first.reset(seed=0)
        assert start == first.state  # deal 0 is seed 0, as `lactchain play` episode 0
        assert "|T| : | : |" in str(view.render())
        for _ in range(2):
            await pilot.press("s")
            await settle(app, pilot)
        assert session.done and session.success and session.history[-1].caption.endswith("delivered (+20)")
        assert session.total_return == TaxiSolver().optimal_return(start)
        assert "delivered (+20)" in str(view.render())
