"""Text from users, runs and datasets made safe for a terminal: control characters (an
ESC that starts a colour, a title change or a clear-screen; BEL; C1 codes) are shown as
visible escapes (\\x1b) instead of being obeyed. Rich markup is a separate matter:
callers that print through Rich escape it as well (`rich.markup.escape`)."""

from __future__ import annotations

import re

# C0 controls except newline and tab, DEL, and the C1 range.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_BUT_CR = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # a log's progress bars redraw with \r


def printable(text: object, keep_newlines: bool = True, keep_cr: bool = False) -> str:
    """`text` with every control character written as its \\xNN escape (`keep_cr`: a
    carriage return stays, for logs whose progress bars redraw their line)."""
    pattern = _CONTROL_BUT_CR if keep_cr else _CONTROL
    out = pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return out if keep_newlines else out.replace("\n", "\\n").replace("\t", "\\t")


def shell_line(cmd: object) -> str:
    """A run's recorded argv as one shell line a user can copy and run again (arguments
    with spaces or quotes quoted, as `shlex.join` does); text stored otherwise as it is."""
    import shlex

    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(part) for part in cmd)
    return "" if cmd is None else str(cmd)
