"""The Lab's env pane for envs other than the grid (the grid has `GridView`).

`BlackjackView` lays the hands out as cards: the dealer's hole card stays face down
until the hand is over, as the env keeps it (`info["dealer_cards"]`), so the pane
never shows the researcher more than the actor knows. `TextEnvView` is the fallback
for any other text env: its own `render()` text.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from tui.format import short_state

FACE = {1: "A"}
CARD = "bold #1c1c1c on #e4e4e4"
HIDDEN = "bold #e4e4e4 on #5f5f87"
OUTCOME = {"won": ("✓ won", "bold green"), "lost": ("■ lost", "bold red"), "draw": ("= draw", "bold yellow")}


def hand_total(cards: tuple[int, ...]) -> int:
    """Blackjack total: an ace counts 11 when that does not bust."""
    total = sum(cards)
    return total + 10 if 1 in cards and total + 10 <= 21 else total


def _cards(cards: tuple[int, ...], hidden: int = 0) -> Text:
    out = Text()
    for card in cards:
        out.append(f" {FACE.get(card, str(card)):>2} ", CARD)
        out.append(" ")
    for _ in range(hidden):
        out.append(" ?? ", HIDDEN)
        out.append(" ")
    return out


def blackjack_text(snap: Any, hint: str = "") -> Text:
    """Both hands, the player's sum, and how the last step went (pure: pinned in tests)."""
    player, dealer = tuple(snap.player_cards), tuple(snap.dealer_cards)
    revealed = len(dealer) > 1
    out = Text(no_wrap=False)
    out.append("dealer  ", "dim")
    out.append_text(_cards(dealer, hidden=0 if revealed else 1))
    out.append("\n        ")
    up = FACE.get(dealer[0], str(dealer[0])) if dealer else "?"
    out.append(f"total {hand_total(dealer)}" if revealed else f"shows {up}", "dim")
    out.append("\nyou     ", "dim")
    out.append_text(_cards(player))
    out.append("\n        ")
    state = snap.state
    out.append(f"sum {getattr(state, 'player_sum', hand_total(player))}", "bold")
    if getattr(state, "usable_ace", False):
        out.append(" · usable ace", "#87afff")
    out.append("\n")
    if snap.outcome in OUTCOME:
        word, style = OUTCOME[snap.outcome]
        out.append(word, style)
    elif snap.done:
        out.append("■ void (out of actions)", "bold red")
    else:
        out.append("● in play", "bold #ffd75f")
    if snap.caption:
        out.append("\n" + snap.caption, "italic")
    if hint:
        out.append("\n" + hint, "#d7af87")
    return out


class BlackjackView(Static):
    """The dealt hands; `show(snapshot, hint)` redraws them."""

    DEFAULT_CSS = """
    BlackjackView { width: 100%; height: auto; padding: 0 1; }
    """

    def show(self, snap: Any, hint: str = "") -> None:
        self.update(blackjack_text(snap, hint))


class TextEnvView(Static):
    """Any other text env: its `render_text()` lines and the last caption."""

    DEFAULT_CSS = """
    TextEnvView { width: 100%; height: auto; padding: 0 1; }
    """

    def show(self, snap: Any, hint: str = "") -> None:
        out = Text(snap.rendered or str(snap.state))
        if snap.caption:
            out.append("\n" + snap.caption, "italic")
        if hint:
            out.append("\n" + hint, "#d7af87")
        self.update(out)


def append_progress(t: Text, snap: Any, actor_status: str) -> None:
    """The Episode panel's first lines, any env: the actor, actions taken, the return."""
    t.append("actor ", style="dim")
    t.append(f"{actor_status}\n")
    t.append("step ", style="dim")
    t.append(f"{snap.actions_taken}/{snap.max_actions}")
    t.append("  return ", style="dim")
    t.append(f"{snap.total_return:+.1f}")


def append_decoding(t: Text, constrained: bool, temperature: float) -> None:
    t.append("\ndecoding ", style="dim")
    t.append("constrained" if constrained else "free text", style="bold" if constrained else "bold magenta")
    t.append(" · greedy" if temperature == 0 else f" · T={temperature}")


def deal_status(snap: Any, actor_status: str, running: bool, constrained: bool, temperature: float) -> Text:
    """The Episode panel for envs other than the grid: progress, return, which deal."""
    t = Text()
    append_progress(t, snap, actor_status)
    if running:
        t.append("  ● running", style="bold yellow")
    elif snap.done:
        word = snap.outcome or ("success" if snap.success else "over")
        t.append(f"  {'✓' if snap.success else '■'} {word}", style="bold green" if snap.success else "bold red")
    if snap.deal is not None:
        t.append("\ndeal ", style="dim")
        t.append(f"#{snap.deal}")
        t.append(f" · seed {snap.seed} · n next", style="dim")
    t.append("\nstart ", style="dim")
    t.append(short_state(snap.start))
    append_decoding(t, constrained, temperature)
    return t


def view_for(view: str, **kwargs: Any) -> Static:
    """The pane for an env's `console_view` other than "grid" (the Lab keeps its GridView
    for that): "cards" (Blackjack's hands), else its `render_text()` lines."""
    return BlackjackView(**kwargs) if view == "cards" else TextEnvView(**kwargs)
