"""Token bookkeeping both engines share, so prompts, `completion_logprobs` and
`choice_logprobs` read the same tokens on transformers and on vLLM. No torch import."""

from __future__ import annotations

from typing import Any, Sequence

from lactchain.prompts import check_prompt_length


class ScoringTokens:
    """Mixin for an actor with a `tokenizer`, a `_prompt_tokens` (`PromptTokens`) and
    `context_length()`: the chat prompt, its ids kept per text, the length check, and the
    ids a completion or a forced choice is scored on."""

    tokenizer: Any
    _prompt_tokens: Any

    def context_length(self) -> int:  # pragma: no cover - each engine says its own
        raise NotImplementedError

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    def chat_prompt(self, user_text: str) -> str:
        """The user message rendered with the chat template, generation prompt added
        (the raw text for a model without a chat template)."""
        if not getattr(self.tokenizer, "chat_template", None):
            return user_text
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True)

    def _ids(self, text: str) -> list[int]:
        """The canonical ids of a text: the tokenizer's, no special tokens added."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, text: str) -> int:
        return len(self._ids(text))

    def prompt_ids(self, user_text: str) -> list[int]:
        """The token ids generation conditions on for this user message (a trainer that
        scores the actor's own samples must see exactly these); tokenized once per text."""
        return self._prompt_tokens.ids(user_text, self.tokenizer, lambda text: self._ids(self.chat_prompt(text)))

    def _prompt_ids(self, user_text: str, reserve: int) -> list[int]:
        """`prompt_ids`, refused with a one-line error when the prompt and `reserve` new
        tokens do not fit the context."""
        ids = self.prompt_ids(user_text)
        check_prompt_length(user_text, lambda _t: len(ids), self.context_length(), reserve=reserve)
        return ids

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
