"""The chat prompt's token ids, kept per user text.

Tokenizing a ~300-token prompt through transformers' tokenizer call costs ~0.4 ms of a
CPU core, and the loop asks for the same few hundred start-state prompts in every
generate call: 60 of them each lock-step of an evaluation (~25 ms a step, against issue
46's 0.5-s budget for the whole 60-state evaluation on a GPU), 32 each GRPO step. Ids are
kept compactly (an int32 array, ~1 KB a prompt), the least recently used dropped past
`capacity`, all of them when the tokenizer changes; safe to share between threads (the
console generates from worker threads).
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from typing import Any, Callable

CAPACITY = 4096  # prompts kept: a few MB at most


class PromptTokens:
    """`ids(text)`: `make(text)` the first time (per tokenizer), the kept copy after."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = int(capacity)
        self._kept: OrderedDict[str, array] = OrderedDict()
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def ids(self, text: str, tokenizer: Any, make: Callable[[str], list[int]]) -> list[int]:
        with self._lock:
            if tokenizer is not self._tokenizer:
                self._kept.clear()
                self._tokenizer = tokenizer
            kept = self._kept.get(text)
            if kept is not None:
                self._kept.move_to_end(text)
                return kept.tolist()
        ids = list(make(text))  # outside the lock: tokenizing is the slow part
        with self._lock:
            if tokenizer is self._tokenizer:
                self._kept[text] = array("i", ids)
                if len(self._kept) > self.capacity:
                    self._kept.popitem(last=False)
        return ids
