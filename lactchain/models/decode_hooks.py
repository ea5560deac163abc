"""What the actor's decode loop hands to `generate` besides the model: the logits
processors that record each chosen token's raw log-prob and draw every row from its own
seed (a row's sample does not depend on its batch), and the streamer that passes each
new piece of text on as it is decoded."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import torch


class LogprobRecorder:
    """First logits processor of the chain: sees the raw logits of every step and adds
    up the log-prob of the token chosen at that step (read back one step later)."""

    def __init__(self) -> None:
        self.prev: Optional[torch.Tensor] = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.prev is not None:
            self.steps.append(self.prev.gather(1, input_ids[:, -1:].to(self.prev.device)).squeeze(1))
        self.prev = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, generated: torch.Tensor) -> torch.Tensor:
        """(B, T) log-probs of the generated tokens."""
        if self.prev is not None and generated.shape[1] > len(self.steps):
            self.steps.append(self.prev.gather(1, generated[:, -1:].to(self.prev.device)).squeeze(1))
        self.prev = None
        if not self.steps:
            return torch.zeros(generated.shape[0], 0)
        return torch.stack(self.steps, dim=1).cpu()


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN = _signed64(0x9E3779B97F4A7C15)
_MIX1 = _signed64(0xBF58476D1CE4E5B9)
_MIX2 = _signed64(0x94D049BB133111EB)


def _shift_right(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's `>>` keeps the sign)."""
    return (x >> n) & ((1 << (64 - n)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64's output function on int64 tensors (wrapping arithmetic): a
    counter-based generator, so row r's draw at step k is a pure function of (seed, k)."""
    x = x + _GOLDEN
    x = (x ^ _shift_right(x, 30)) * _MIX1
    x = (x ^ _shift_right(x, 27)) * _MIX2
    return x ^ _shift_right(x, 31)


class RowSampler:
    """Last logits processor when every row has its own seed: each row's token is drawn
    with a uniform that depends only on that row's seed and the step (SplitMix64 of the
    pair), by inverse CDF over its probabilities, so what a row samples does not depend
    on which other rows share the batch (a rollout gives the same episodes at any
    `--envs`). The whole batch is one cumsum and one searchsorted on the scores' device:
    no per-row loop, no host sync. It returns a one-hot distribution, which generate's
    own sampling step then picks for sure."""

    def __init__(self, seeds: Sequence[int]) -> None:
        self.seeds = [int(s) % (2**63 - 1) for s in seeds]
        self.keys: Optional[torch.Tensor] = None
        self.step = 0

    def uniforms(self, device: torch.device) -> torch.Tensor:
        """(B,) float64 in [0, 1): this step's draw of every row."""
        if self.keys is None:
            self.keys = splitmix64(torch.tensor(self.seeds, dtype=torch.long, device=device))
        bits = splitmix64(self.keys + _signed64(self.step * _GOLDEN % (1 << 64)))
        self.step += 1
        return _shift_right(bits, 11).double() * (2.0 ** -53)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        probs = torch.softmax(scores.float(), dim=-1)
        cdf = probs.cumsum(dim=-1)
        target = (self.uniforms(scores.device) * cdf[:, -1].double()).float().unsqueeze(1)
        picks = torch.searchsorted(cdf, target, right=True)
        # A draw past the last mass (float rounding) or a row without finite mass: the argmax.
        usable = (picks < scores.shape[1]) & torch.isfinite(probs).all(dim=1, keepdim=True) & (cdf[:, -1:] > 0)
        fallback = scores.float().nan_to_num(nan=float("-inf")).argmax(dim=1, keepdim=True)
        picks = torch.where(usable, picks.clamp_(max=scores.shape[1] - 1), fallback)
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, picks, 0.0)
        return out


class CallbackStreamer:
    """transformers streamer: decodes the growing completion and hands each new piece
    of text to `on_text` (on the thread that runs generate)."""

    def __init__(self, tokenizer: Any, on_text: Callable[[str], None], eos_id: int) -> None:
        self.tokenizer = tokenizer
        self.on_text = on_text
        self.eos_id = eos_id
        self.seen_prompt = False
        self.ids: list[int] = []
        self.emitted = ""
        self.done = False

    def put(self, value: torch.Tensor) -> None:
        if not self.seen_prompt:
            self.seen_prompt = True  # the first call carries the prompt
            return
        if self.done:
            return
        for tok in value.reshape(-1).tolist():
            if tok == self.eos_id:
                self.done = True
                break
            self.ids.append(int(tok))
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):  # an unfinished multi-byte character: wait for the rest
            return
        self._emit_to(text)

    def _emit_to(self, text: str) -> None:
        if text.startswith(self.emitted) and len(text) > len(self.emitted):
            piece = text[len(self.emitted):]
            self.emitted = text
            self.on_text(piece)

    def end(self) -> None:
        pass

    def flush(self, final_text: str) -> None:
        self._emit_to(final_text)
