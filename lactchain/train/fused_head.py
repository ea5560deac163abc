"""TRL's fused LM head projects only the positions it scores, on a CPU too.

TRL's DPO, KTO and GRPO trainers compute per-token log-probs through a fused LM head
(`trl.trainer.utils.add_fused_lm_head`). On Triton devices (CUDA, XPU) it projects only
the positions that carry a label -- the completion's. Elsewhere it projects every position
through the whole vocabulary, so that compilers such as Neuron's see one tile shape per
batch. Nothing compiles on a CPU, and there the loop's prompts are ~95 % of each sequence:
the prompt's positions went through SmolLM2's 49k-token head for nothing. Scoring only
the labelled positions on a CPU gives the same log-probs (an unlabelled position reads 0
either way) and halves a SmolLM2 DPO step on a 2-core CPU (docs/performance.md).
"""

from __future__ import annotations

import inspect
from typing import Any

# The line of `add_fused_lm_head` this module changes the meaning of; if a TRL release drops
# it, nothing is patched and TRL's own choice stands.
_TRL_COMPACT_LINE = "compact = _use_triton(hidden_states.device)"


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
