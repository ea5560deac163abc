"""Token bookkeeping both engines score with, so `completion_logprobs` and
`choice_logprobs` read the same tokens on transformers and on vLLM. No torch import."""

from __future__ import annotations

from typing import Sequence


class ScoringTokens:
    """Mixin for an actor with `_ids(text)` (canonical token ids) and `eos_token_id`."""

    def _completion_ids(self, completion: str | Sequence[int], add_eos: bool) -> list[int]:
        """A completion's ids (text tokenized canonically, or ids as given), EOS appended
        unless already there or `add_eos` is False."""
        ids = self._ids(completion) if isinstance(completion, str) else [int(t) for t in completion]
        if add_eos and (not ids or ids[-1] != self.eos_token_id):
            ids.append(self.eos_token_id)
        if not ids:
            raise ValueError("an empty completion has nothing to score (use add_eos=True)")
        return ids

    def _option_first_tokens(self, options: Sequence[str]) -> list[int]:
        """Each option's first token, for a forced choice: they must differ."""
        firsts = []
        for option in options:
            ids = self._ids(option)
            if not ids:
                raise ValueError(f"option {option!r} has no tokens")
            firsts.append(ids[0])
        if len(set(firsts)) != len(firsts):
            raise ValueError(f"options {list(options)} start with the same token: a first-token choice cannot "
                             "tell them apart")
        return firsts
