"""The pad token every engine and trainer uses: distinct from EOS, on the left.

Shared by the actor, the model presets (which convert and save checkpoints), the vLLM
engines and the trainers; no torch import.
"""

from __future__ import annotations

from typing import Any

PAD_CANDIDATES = ("<|endoftext|>", "<pad>", "<|pad|>", "<unk>")


def ensure_distinct_pad(tokenizer: Any, model: Any = None) -> None:
    """Give the tokenizer a pad token that is not EOS (padding with EOS hides the
    end of every completion from training), pad on the left, and tell the model.
    Prefers an existing non-EOS special token (unk, <|endoftext|>, <pad>); adds a
    new `<|pad|>` token (and resizes the embeddings) only as a last resort."""
    eos_id = tokenizer.eos_token_id
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == eos_id:
        vocab = tokenizer.get_vocab()
        choice = None
        if tokenizer.unk_token is not None and tokenizer.unk_token_id not in (None, eos_id):
            choice = tokenizer.unk_token
        else:
            for tok in PAD_CANDIDATES:
                if tok in vocab and vocab[tok] != eos_id:
                    choice = tok
                    break
        if choice is not None:
            tokenizer.pad_token = choice
        else:
            tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
            if model is not None:
                model.resize_token_embeddings(len(tokenizer))
    tokenizer.padding_side = "left"
    if model is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id
            model.generation_config.eos_token_id = eos_id
