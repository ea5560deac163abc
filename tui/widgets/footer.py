"""A footer that leaves out the keys that do not fit instead of cutting one in half.

At 80 columns a screen has more keys than the footer has room for. Textual's footer
clips the last one mid-word ("k Samp▏^p palette"); this one shows the keys that fit
whole, in order, and keeps the palette key (every command is in the palette).
"""

from __future__ import annotations

from textual.widgets import Footer, Input, Label, TextArea
from textual.widgets._footer import FooterKey


class FittedFooter(Footer):
    """Also says how to reach the screen's keys while a text field has the focus (keys
    typed there are text: `n` in a form field is a letter, not "New job")."""

    DEFAULT_CSS = """
    FittedFooter .-esc-hint { color: $warning; text-style: bold; }
    """
    ESC_HINT = " esc: screen keys "
    _composed: tuple | None = None  # the signature the key widgets were composed for

    def _text_focused(self) -> bool:
        try:
            return isinstance(self.screen.focused, (Input, TextArea))
        except Exception:  # noqa: BLE001 - not on a screen yet
            return False

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)

    def _signature(self) -> tuple:
        """What the keys shown depend on: a screen switch that leaves them as they were
        (every visit after the first) keeps the key widgets instead of remounting them."""
        bindings = tuple((b.key, b.description, b.action, enabled, b.show)
                         for _, b, enabled, _ in self.screen.active_bindings.values())
        return bindings, self._text_focused(), self.size.width

    async def recompose(self) -> None:
        signature = self._signature()
        if self.children and signature == self._composed:
            return
        self._composed = signature
        await super().recompose()
        if self.children and self._text_focused():  # the bindings changed with the focus: say how back
            self.styles.grid_size_columns = int(self.styles.grid_size_columns or len(self.children)) + 1
            await self.mount(Label(self.ESC_HINT, classes="-esc-hint"), before=0)
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        palette = [w for w in self.children if w.has_class("-command-palette")]
        room = self.size.width - sum(_width(w) for w in palette)
        used = 0
        for widget in self.children:
            if widget in palette:
                continue
            used += _width(widget)
            widget.display = used <= room


def _width(widget) -> int:  # noqa: ANN001
    """Cells the widget takes, measured from its content (valid even while it is hidden)."""
    margin = widget.styles.margin
    gutter = widget.styles.gutter
    if isinstance(widget, FooterKey):
        content = widget.render().cell_len
    else:
        content = widget.outer_size.width
    return content + gutter.width + margin.left + margin.right
