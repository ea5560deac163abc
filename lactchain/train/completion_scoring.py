"""The preference and GRPO trainers score only the completion's positions, on a CPU too.

A loop answer is ~15 tokens after a ~190-token prompt (SmolLM2; Taxi's are longer), and
every loss scores only the answer. Two TRL paths projected every position through the
whole vocabulary anyway:

- DPO, KTO and GRPO score through TRL's fused LM head (`trl.trainer.utils.add_fused_lm_head`).
  On Triton devices (CUDA, XPU) it projects only the labelled positions; elsewhere every
  position, so that compilers such as Neuron's see one tile shape per batch. Nothing
  compiles on a CPU: `score_labelled_positions_only` (applied by `prepare_model`, where
  every trainer starts) lets it compact there too.
- CPO-SimPO (TRL's experimental `CPOTrainer`) asks the model for the logits of every
  position and takes the log-softmax of all of them. `CompletionWindowCPO` asks only for
  the window from the first labelled position to the end (`logits_to_keep`).

The log-probs and losses are the same (an unlabelled position is never read); the work
and the memory of the vocabulary projection shrink ~10x. Measured in docs/performance.md.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

# The line of `add_fused_lm_head` this module changes the meaning of; if a TRL release drops
# it, nothing is patched and TRL's own choice stands.
_TRL_COMPACT_LINE = "compact = _use_triton(hidden_states.device)"
IGNORE = -100  # TRL's label for a position that is not scored


def score_labelled_positions_only() -> bool:
    """Make TRL's fused head project only labelled positions on CPU tensors too (idempotent).
    True when the installed TRL does so now; False when its fused head is not the one this
    was written for (then TRL's behaviour is left as it is)."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - TRL is a required dependency
        return False
    current = getattr(trl_utils, "_use_triton", None)
    if getattr(current, "lactchain_cpu_compact", False):
        return True
    fused = getattr(trl_utils, "add_fused_lm_head", None)
    if current is None or fused is None or _TRL_COMPACT_LINE not in inspect.getsource(fused):
        return False

    def compact(device: Any) -> bool:
        return device.type == "cpu" or current(device)

    compact.lactchain_cpu_compact = True  # type: ignore[attr-defined]
    trl_utils._use_triton = compact
    return True


def completion_window(labels: Any) -> int:
    """How many last positions' logits score every label of a batch: from the position
    before the earliest labelled one (a logit predicts the next token) to the end."""
    labelled = (labels != IGNORE).any(dim=0).nonzero()
    if not len(labelled):
        return int(labels.shape[1])  # nothing is scored: every position, as TRL would
    return min(int(labels.shape[1]), int(labels.shape[1]) - int(labelled[0]) + 1)


@functools.cache
def completion_window_cpo() -> type:
    """TRL's CPOTrainer (SimPO, CPO-SimPO) whose forward computes logits only over the
    completion window. Built on first use: importing trl.experimental warns and costs time."""
    import torch
    from trl.experimental.cpo import CPOTrainer

    class CompletionWindowCPO(CPOTrainer):
        """`concatenated_forward` as TRL's for a decoder-only model, on the window's logits.
        The `logits/chosen` and `logits/rejected` metrics are means over the window."""

        def concatenated_forward(self, model: Any, batch: dict[str, Any]) -> tuple[Any, ...]:
            if self.is_encoder_decoder or self.aux_loss_enabled:
                return super().concatenated_forward(model, batch)
            both = self.concatenated_inputs(batch, is_encoder_decoder=False, padding_value=self.pad_token_id,
                                            device=self.accelerator.device)
            keep = completion_window(both["concatenated_labels"])
            labels = both["concatenated_labels"][:, -keep:]
            logits = model(both["concatenated_input_ids"], attention_mask=both["concatenated_attention_mask"],
                           use_cache=False, logits_to_keep=keep).logits
            n = batch["chosen_labels"].shape[0]
            if self.cpo_alpha == 0:
                nll = torch.tensor(0.0, device=self.accelerator.device)
            else:  # TRL's NLL on chosen: next-token cross-entropy over the labelled positions
                nll = torch.nn.functional.cross_entropy(logits[:n, :-1].reshape(-1, logits.shape[-1]),
                                                        labels[:n, 1:].reshape(-1), ignore_index=IGNORE)
            logps = self.get_batch_logps(logits, labels, average_log_prob=self.loss_type in ("ipo", "simpo"),
                                         is_encoder_decoder=False)
            return logps[:n], logps[n:], logits[:n], logits[n:], nll

    return CompletionWindowCPO
