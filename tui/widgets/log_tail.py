"""LogTail: follows a growing log file with bounded memory (toolong-style).

The first read takes at most the last `initial_bytes`; later polls read only what
was appended. A truncated/rotated file starts over. Reads are small and local, so
they run on the event loop from a timer.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets import Log


class LogTail(Log):
    def __init__(self, *, max_lines: int = 400, initial_bytes: int = 64_000, **kwargs) -> None:  # noqa: ANN003
        super().__init__(max_lines=max_lines, auto_scroll=True, **kwargs)
        self.initial_bytes = initial_bytes
        self.path: Path | None = None
        self._offset = 0
        self._partial = ""

    def follow(self, path: str | os.PathLike | None, placeholder: str = "no log") -> None:
        new = Path(path) if path else None
        if new == self.path and new is not None:
            self.poll()
            return
        self.path, self._offset, self._partial = new, 0, ""
        self.clear()
        if new is None:
            self.write_line(placeholder)
            return
        self.poll()

    def poll(self) -> None:
        if self.path is None:
            return
        try:
            size = self.path.stat().st_size
        except OSError:
            if self._offset == 0 and self.line_count == 0:
                self.write_line(f"(waiting for {self.path.name})")
            return
        if size < self._offset:  # truncated or replaced
            self._offset, self._partial = 0, ""
            self.clear()
        if size == self._offset:
            return
        if self.line_count and self._offset == 0 and self.lines and self.lines[0].startswith("(waiting"):
            self.clear()
        start = self._offset if self._offset else max(0, size - self.initial_bytes)
        try:
            with open(self.path, "rb") as fh:
                fh.seek(start)
                data = fh.read(size - start)
        except OSError as exc:
            self.write_line(f"(cannot read log: {exc})")
            return
        self._offset = start + len(data)
        text = self._partial + data.decode("utf-8", errors="replace")
        if start and not self._partial and start == max(0, size - self.initial_bytes) and start > 0 and "\n" in text:
            text = text.split("\n", 1)[1]  # drop the cut first line of a tail read
        lines = text.split("\n")
        self._partial = lines.pop()
        if lines:
            self.write_lines([line.rstrip("\r") for line in lines])
