"""The text side of the decision transformer: what turns an instruction into tokens.

- `LearnedText`: a word-level tokenizer (HF `tokenizers`: NFKC, lower case, words and
  punctuation) learned on the training split's descriptions; the archive's vocabulary
  is small (the rule describer uses a few dozen words), so each word gets its own
  trainable embedding in the model. Saved as `tokenizer.json` with every checkpoint.
- `FrozenText`: a frozen sentence encoder (the bundled all-MiniLM-L6-v2, `minilm-l6`,
  or any critic backbone spec) whose mean-pooled, normalised embedding becomes ONE
  text token through a trainable projection. The comparison the issue asks for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch

PAD, UNK = "[PAD]", "[UNK]"
TOKENIZER_FILE = "tokenizer.json"
LEARNED = "learned"


def learn_tokenizer(texts: Sequence[str]) -> Any:
    """A word-level tokenizer over `texts` ([PAD] = 0, [UNK] = 1)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(list(texts), trainers.WordLevelTrainer(special_tokens=[PAD, UNK], min_frequency=1,
                                                                   show_progress=False))
    return tok


class LearnedText:
    """Instruction -> word ids, padded with [PAD] (0) to `max_len` (longer ones cut)."""

    kind = LEARNED

    def __init__(self, tokenizer: Any, max_len: int) -> None:
        self.tokenizer, self.max_len = tokenizer, int(max_len)
        self.pad_id = tokenizer.token_to_id(PAD)

    @classmethod
    def learn(cls, texts: Sequence[str]) -> "LearnedText":
        tok = learn_tokenizer(texts)
        return cls(tok, max(1, longest(tok, texts)))

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def length(self) -> int:  # text tokens in the model's sequence
        return self.max_len

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def encode(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        out = torch.full((len(texts), self.max_len), self.pad_id, dtype=torch.long)
        for i, enc in enumerate(self.tokenizer.encode_batch(list(texts))):
            ids = enc.ids[: self.max_len]
            out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return {"text_ids": out}

    def save(self, folder: Path) -> None:
        self.tokenizer.save(str(Path(folder) / TOKENIZER_FILE))

    @classmethod
    def load(cls, folder: Path, max_len: int) -> "LearnedText":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(Path(folder) / TOKENIZER_FILE)), max_len)

    def stats(self, texts: Sequence[str]) -> dict[str, int]:
        return {"vocab_size": self.vocab_size, "longest_description_tokens": longest(self.tokenizer, texts),
                "cut_descriptions": sum(len(self.ids(t)) > self.max_len for t in texts)}


def longest(tokenizer: Any, texts: Sequence[str]) -> int:
    return max((len(e.ids) for e in tokenizer.encode_batch(list(texts))), default=0)


def _mean_pool_encoder(spec: str) -> tuple[Callable[[Sequence[str]], torch.Tensor], int]:
    """(texts -> normalised mean-pooled embeddings, their size) of a critic backbone spec."""
    from lactchain.models.critic import load_backbone

    model, tok, _ = load_backbone(spec, torch.device("cpu"))
    model.eval()

    @torch.no_grad()
    def encode(texts: Sequence[str]) -> torch.Tensor:
        out = []
        for i in range(0, len(texts), 64):
            batch = tok(list(texts[i : i + 64]), padding=True, truncation=True, max_length=128, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            out.append(torch.nn.functional.normalize(pooled.float(), dim=-1))
        return torch.cat(out) if out else torch.zeros(0, model.config.hidden_size)

    return encode, int(model.config.hidden_size)


class FrozenText:
    """Instruction -> one frozen sentence embedding (cached per distinct text)."""

    def __init__(self, spec: str = "minilm-l6", encoder: Callable[[Sequence[str]], torch.Tensor] | None = None,
                 dim: int | None = None) -> None:
        self.kind = spec
        self._encoder, self._dim = encoder, dim
        self._cache: dict[str, torch.Tensor] = {}

    def _load(self) -> None:
        if self._encoder is None:
            self._encoder, self._dim = _mean_pool_encoder(self.kind)

    @property
    def dim(self) -> int:
        self._load()
        return int(self._dim)

    @property
    def length(self) -> int:
        return 1

    @property
    def vocab_size(self) -> int:
        return 0

    def encode(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        self._load()
        new = sorted({t for t in texts if t not in self._cache})
        if new:
            for text, vec in zip(new, self._encoder(new)):
                self._cache[text] = vec.float()
        if not texts:
            return {"text_vec": torch.zeros(0, self.dim)}
        return {"text_vec": torch.stack([self._cache[t] for t in texts])}

    def save(self, folder: Path) -> None:  # nothing to save: the encoder is the bundled preset
        pass

    def stats(self, texts: Sequence[str]) -> dict[str, Any]:
        return {"text_encoder": self.kind, "embedding_dim": self.dim}
