"""Snapshot tests of every screen at fixed sizes: 120x40, and 80x24 (a first-class size).

Deterministic by construction: the oracle actor (no model), fixed run ids and
timestamps, UTC. Update after an intended change with `pytest --snapshot-update`
and look at the SVGs.
"""

from __future__ import annotations

import time

import pytest
from textual.widgets import TabbedContent

from tui.app import LactChainApp
from tui.models import OracleActor
from tui_helpers import add_critic_pairs, add_run, pressing

WIDE = (120, 40)
NARROW = (80, 24)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def app(db_path) -> LactChainApp:
    return LactChainApp(db_path=db_path, actor_spec="oracle", actor=OracleActor(), load_models=False)


def test_lab_after_a_step_with_values(snap_compare, app):
    assert snap_compare(app, terminal_size=WIDE, run_before=pressing(("s", "v")))


def test_lab_narrow_80x24(snap_compare, app):
    assert snap_compare(app, terminal_size=NARROW, run_before=pressing(("s",)))


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x40", "80x24"])
def test_lab_strategy_editor(snap_compare, app, size):
    async def show(pilot) -> None:  # noqa: ANN001
        pilot.app.screen.query_one("#lab-tabs", TabbedContent).active = "tab-strategy"

    assert snap_compare(app, terminal_size=size, run_before=pressing(then=show))


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x40", "80x24"])
def test_runs_screen(snap_compare, app, registry, fixed_ids, tmp_path, size):
    add_run(registry, "train-critic", params={"epochs": 3, "lr": 0.001}, metrics={"loss": [1.0, 0.6, 0.4, 0.3, 0.25]},
            duration_s=300, log_lines=[f"epoch {i} loss {1 / (i + 1):.3f}" for i in range(5)])
    add_run(registry, "play", status="FAILED", metrics={"success": [0.5]}, offset_s=60, duration_s=5, name="smoke")
    add_run(registry, "train-actor", status="KILLED", params={"algo": "simpo"}, metrics={"loss": [2.0, 1.5]},
            offset_s=120, duration_s=3700)
    assert snap_compare(app, terminal_size=size, run_before=pressing(("2",)))


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x40", "80x24"])
def test_labelling_screen(snap_compare, app, registry, fixed_ids, size):
    add_critic_pairs(registry, 3)
    assert snap_compare(app, terminal_size=size, run_before=pressing(("3",)))


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x40", "80x24"])
def test_jobs_screen(snap_compare, app, registry, fixed_ids, size):
    add_run(registry, "train-critic", metrics={"loss": [1.0, 0.5]}, duration_s=42,
            log_lines=["loading minilm-l6", "epoch 0 loss 1.000", "epoch 1 loss 0.500", "done"])
    add_run(registry, "collect-pairs", status="FAILED", offset_s=30, duration_s=3)
    assert snap_compare(app, terminal_size=size, run_before=pressing(("4",)))


def test_lab_blackjack_80x24(snap_compare, db_path):
    """The Lab on Blackjack after the oracle's step: the hands, the outcome, the caption."""
    app = LactChainApp(db_path=db_path, actor_spec="oracle", actor=OracleActor(), load_models=False, env="blackjack")
    assert snap_compare(app, terminal_size=NARROW, run_before=pressing(("s",)))


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["120x40", "80x24"])
def test_kill_confirmation_modal(snap_compare, app, registry, fixed_ids, size):
    """The one modal every kill goes through (Jobs and Runs alike)."""
    # SCHEDULED: a RUNNING row's duration would grow with the clock (not a fixed snapshot)
    add_run(registry, "train-actor", status="SCHEDULED", metrics={"loss": [1.0, 0.8]}, duration_s=30)

    async def kill(pilot) -> None:  # noqa: ANN001
        pilot.app.screen.query_one("#runs-table").focus()
        await pilot.press("K")

    assert snap_compare(app, terminal_size=size, run_before=pressing(("2",), then=kill))


def test_keys_panel_80x24(snap_compare, app, registry, fixed_ids):
    """`?` on Runs at 80x24: the keys of the screen, beside the table."""
    add_run(registry, "train-critic", metrics={"loss": [1.0, 0.5]}, duration_s=42)

    async def keys(pilot) -> None:  # noqa: ANN001
        pilot.app.screen.query_one("#runs-table").focus()
        await pilot.press("question_mark")

    assert snap_compare(app, terminal_size=NARROW, run_before=pressing(("2",), then=keys))
