"""GRPO's log-probs under the policy that actually samples: the grammar-masked one.

The actor samples move lists through the move-list grammar (`move_automaton`): at
each position only the tokens the grammar allows keep their logits, and the
distribution is renormalised over them. TRL scores the same tokens under the raw
model, over the whole vocabulary. On SmolLM2's own constrained samples of the grid
(2026-11-29, `docs/results.md`) the allowed tokens held on average only 0.67 of the
raw probability (under 0.5 at a third of the positions), so the raw policy gradient
(1 - p of the sampled token: 0.41 on average, against 0.16 for the masked policy)
spends most of its size moving probability between allowed and never-sampled tokens
-- a change that alters no sample -- and the raw entropy TRL logs rises as the
update spreads mass onto tokens the grammar masks anyway.

`constrained_logprobs` renormalises over the allowed tokens (the exact log-prob of
the sampling policy, so the policy-gradient theorem holds for what is sampled), and
`ConstrainedScoring` puts it into TRL's GRPOTrainer in place of its fused head
(`--policy-logprobs constrained`). Measured, it did not help: SmolLM2 collapsed to one
answer as before, and the tiny loop collapsed where the raw scoring does not, so raw
stays the default (docs/results.md).
"""

from __future__ import annotations

from typing import Any

import torch

from lactchain.models.move_automaton import TokenAutomaton, states_along


def constrained_logprobs(logits: torch.Tensor, targets: torch.Tensor, automaton: TokenAutomaton,
                         temperature: float = 1.0, entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs of `targets` (B, T) under the grammar-masked, tempered policy,
    from `logits` (B, T, V) predicting them; with `entropy`, that policy's entropy at each
    position too. A target the grammar never allowed there (padding past the end) scores
    0: the trainer's completion mask drops it."""
    allowed = automaton.allowed[states_along(automaton, targets)].to(logits.device)
    vocab = logits.shape[-1]
    if allowed.shape[-1] < vocab:  # logits wider than the tokenizer's vocabulary
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[-1]))
    allowed = allowed[..., :vocab]
    z = (logits.float() / float(temperature)).masked_fill(~allowed, float("-inf"))
    logp = torch.log_softmax(z, dim=-1)
    index = targets.unsqueeze(-1).to(logits.device)
    picked = logp.gather(-1, index).squeeze(-1)
    ok = allowed.gather(-1, index).squeeze(-1)
    picked = torch.where(ok, picked, torch.zeros_like(picked))
    if not entropy:
        return picked, None
    finite = logp.masked_fill(~allowed, 0.0)  # no 0 * -inf, whose gradient is NaN even where masked
    return picked, -(logp.exp() * finite).sum(-1)


class ConstrainedScoring:
    """Mixed into TRL's GRPOTrainer: its per-token log-probs (the loss, the importance
    ratio, the KL to a reference, the logged entropy) come from the grammar-masked
    policy. Text-only, no MoE aux loss: anything else goes to TRL's own scoring."""

    automaton: TokenAutomaton | None = None

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           **extra: Any) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        if self.automaton is None or compute_aux_loss or any(v is not None for v in extra.values()):
            return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)
        size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), size):
            ids, mask = input_ids[start:start + size], attention_mask[start:start + size]
            with self.accelerator.autocast():  # type: ignore[attr-defined]
                logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=logits_to_keep + 1,
                               use_cache=False).logits
            lp, ent = constrained_logprobs(logits[:, :-1], ids[:, -logits_to_keep:], self.automaton,
                                           self.temperature, compute_entropy)  # type: ignore[attr-defined]
            logps.append(lp)
            if ent is not None:
                entropies.append(ent)
        return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None
