"""ActorPane: the rendered prompt, the completion as it streams, then the parse."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from lactchain.moves import FAILED, STRICT
from tui.format import short_moves


class PromptScroll(VerticalScroll):
    """The prompt, kept scrolled to its end (the observation) when the completion below grows
    and shrinks the room it has."""

    def on_resize(self) -> None:
        self.scroll_end(animate=False)


class ActorPane(Vertical):
    DEFAULT_CSS = """
    ActorPane #actor-state { height: auto; max-height: 2; text-overflow: ellipsis; text-style: bold; }
    ActorPane #actor-prompt-scroll { height: 1fr; min-height: 3; }
    ActorPane #actor-prompt { color: $text-muted; }
    ActorPane #actor-completion { height: auto; min-height: 2; max-height: 8; border-top: solid $primary-darken-1; }
    ActorPane #actor-parse { height: auto; }
    """

    def __init__(self, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self._buffer = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="actor-state")  # pinned: the state stays in view however the prompt scrolls
        with PromptScroll(id="actor-prompt-scroll"):
            yield Static("No step yet: press [b]s[/] to step, [b]e[/] to run an episode.", id="actor-prompt")
        yield Static("", id="actor-completion")
        yield Static("", id="actor-parse")

    @property
    def completion(self) -> str:
        return self._buffer

    def show_prompt(self, prompt: str, state_text: str = "") -> None:
        self._buffer = ""
        self.query_one("#actor-state", Static).update(state_text)
        self.query_one("#actor-prompt", Static).update(Text(prompt.rstrip()))
        scroll = self.query_one("#actor-prompt-scroll", VerticalScroll)
        # After the new text is laid out: its end (the observation) is what changes from step to step.
        scroll.call_after_refresh(scroll.scroll_end, animate=False)
        completion = self.query_one("#actor-completion", Static)
        completion.border_title = "completion (streaming)"
        completion.update(Text("▌", style="blink"))
        self.query_one("#actor-parse", Static).update("")

    def show_next(self, prompt: str, state_text: str) -> None:
        """The prompt the next step will send, nothing generated yet (a new deal must not
        leave the last hand's prompt in view)."""
        self.query_one("#actor-state", Static).update(state_text)
        self.query_one("#actor-prompt", Static).update(Text(prompt.rstrip()))
        scroll = self.query_one("#actor-prompt-scroll", VerticalScroll)
        scroll.call_after_refresh(scroll.scroll_end, animate=False)
        self.clear_completion()

    def append(self, piece: str) -> None:
        self._buffer += piece
        self.query_one("#actor-completion", Static).update(Text(self._buffer, style="bold") + Text("▌"))

    def show_result(self, text: str, moves: list[str] | tuple[str, ...], mode: str, *, logprob: float | None = None,
                    n_tokens: int | None = None, reward: float | None = None, caption: str = "") -> None:
        self._buffer = text
        completion = self.query_one("#actor-completion", Static)
        completion.border_title = "completion"
        completion.update(Text(text or "(empty)", style="bold"))
        colour = {STRICT: "green", FAILED: "red"}.get(mode, "yellow")
        # The completion above holds the literal list: one compact line here keeps the pane usable at 24 rows.
        line = Text(f"{len(moves)} move{'s' if len(moves) != 1 else ''} ", style="dim")
        line.append(short_moves(moves), style="bold")
        line.append("  parse ", style="dim")
        line.append(mode, style=f"bold {colour}")
        extra = []
        if n_tokens is not None:
            extra.append(f"{n_tokens} tok")
        if logprob is not None:
            extra.append(f"logp {logprob:.2f}")
        if reward is not None:
            extra.append(f"reward {reward:+.1f}")
        if extra:
            line.append("  " + " · ".join(extra), style="dim")
        if caption:
            line.append(f"\n→ {caption}")
        self.query_one("#actor-parse", Static).update(line)

    def clear_completion(self) -> None:
        """Nothing is being generated: no 'streaming' title or cursor left from a past step."""
        self._buffer = ""
        completion = self.query_one("#actor-completion", Static)
        completion.border_title = "completion"
        completion.update("")

    def show_message(self, message: str) -> None:
        self.query_one("#actor-parse", Static).update(Text(message, style="italic"))
