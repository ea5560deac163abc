"""CriticPane: V(s) of the current state and a table of K sampled candidates.

A critic gives values only for the env it was trained on: with another env's critic
(or none) the pane says so and ranks the candidates by the oracle alone (the env's
exact solver)."""

from __future__ import annotations
from lactchain.envs.catalog import env_class

from typing import Any, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from tui.format import short_moves, short_state
from tui.lab_session import Candidate, best_index

GRID_LEGEND = "k: sample candidates · F=forward L=left R=right · Q* = r + γ·V*(s') (exact)"
GRID_NOTE = "A = r + γ·V(s') − V(s), the critic's TD advantage (★ = highest)"
# Another env: Q* is the solver's exact expected return of the list, then optimal play (tui.oracle).
ORACLE_LEGEND = "k: sample · H=hit S=stick · Q* = exact E[return] (oracle)"
ORACLE_NOTE = "same cards · ★ = best Q* (oracle)"


def oracle_legend(moves: Sequence[str], stochastic: bool) -> str:
    """The legend for an env without the grid's view: its move letters and what Q* is
    (Blackjack's is ORACLE_LEGEND)."""
    letters = " ".join(f"{short_moves([m])}={m}" for m in moves)
    q_star = "exact E[return]" if stochastic else "r + V*(s')"
    return f"k: sample · {letters} · Q* = {q_star} (oracle)"


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:+.2f}"


class CriticPane(Vertical):
    DEFAULT_CSS = """
    CriticPane #critic-value { height: auto; }
    CriticPane DataTable { height: 1fr; }
    CriticPane #critic-note { height: auto; }
    """

    table_state: Any = None  # where the candidates in the table were sampled
    critic_note: str | None = None  # why the critic has no values here (trained on another env)
    legend: str = GRID_LEGEND
    note: str = GRID_NOTE

    def set_env(self, env: str, critic_ok: bool, critic_env: str | None = None) -> None:
        """Say what the pane can show for `env` with a critic trained on `critic_env` (None:
        no critic loaded); clears the table."""
        cls = env_class(env)
        grid = cls.console_view == "grid"
        self.legend = GRID_LEGEND if grid else oracle_legend(cls.all_moves, cls.stochastic)
        same = "same cards · " if cls.stochastic else ""
        self.note = (GRID_NOTE if grid else f"{same}{GRID_NOTE}") if critic_ok else f"{same}★ = best Q* (oracle)"
        fix = f"load one trained with --env {env}"
        self.critic_note = None if critic_ok else (
            f"no critic loaded: no values for {env} ({fix})" if critic_env is None
            else f"the critic was trained on {critic_env}: no values for {env} ({fix})")
        self.show_candidates([])

    def compose(self) -> ComposeResult:
        yield Static("critic not loaded", id="critic-value")
        table = DataTable(id="critic-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("#", "moves", "s'", "r", "Q", "A", "Q*")
        yield table
        yield Static("", id="critic-note")

    def mark_state(self, state: Any) -> None:
        """Say whether the table belongs to the agent's current state (stale after a step)."""
        note = self.query_one("#critic-note", Static)
        if self.table_state is None:
            note.update("")
        elif state is not None and state != self.table_state:
            note.update(Text(f"⚠ stale: sampled at {short_state(self.table_state)}, the agent is now at "
                             f"{short_state(state)}; k samples here", style="bold yellow"))
        else:
            note.update(Text(f"sampled at {short_state(self.table_state)} · {self.note}", style="dim"))

    def show_value(self, critic_label: str | None, value: float | None, state: Any, v_star: float | None) -> None:
        text = Text()
        gap = "   "
        if self.critic_note is not None:  # its own line; s and the oracle's V* on the next
            text.append(self.critic_note + "\n", style="italic yellow")
            gap = ""
        elif critic_label is None:
            text.append("critic not loaded", style="italic yellow")
        else:
            text.append(f"V(s) = {_num(value)}", style="bold")
            text.append(f"  [{critic_label}]", style="dim")
        if state is not None:
            text.append(f"{gap}s = {short_state(state)}", style="dim")
            gap = "   "
        if v_star is not None:
            text.append(f"{gap}V*(s) = {v_star:+.2f}" + (" (oracle)" if self.critic_note else ""), style="dim")
        text.append("\n" + self.legend, style="dim")
        self.query_one("#critic-value", Static).update(text)

    def show_candidates(self, rows: Sequence[Candidate], state: Any = None) -> None:
        table = self.query_one("#critic-table", DataTable)
        table.clear()
        self.table_state = state if rows else None
        self.mark_state(state)
        best = best_index(rows)
        for i, c in enumerate(rows):
            style = "bold green" if i == best else ""
            mark = "★" if i == best else str(i + 1)
            cells = [mark, short_moves(c.moves) if c.mode != "failed" else "parse failed", short_state(c.next_state),
                     f"{c.reward:+.0f}", _num(c.q), _num(c.advantage), _num(c.q_star)]
            table.add_row(*(Text(x, style=style) for x in cells), key=str(i))
        if best is not None:
            table.move_cursor(row=best)
