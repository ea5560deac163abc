"""A reward model from judged caption pairs: Bradley-Terry over caption embeddings.

The critic's backbone (frozen: its embeddings are computed once per distinct caption)
plus a small head gives r(caption). Pairs labelled 'chosen better' are target 1, ties
are soft 0.5 labels, as Motif does; 'skipped' (unknown) pairs are never used. Reported
per run: held-out label accuracy (pairs split by pair, seeded) and the Spearman rank
correlation of r with the true return over every distinct episode caption.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from lactchain.paths import writing
from lactchain.train.ranks import spearman
from lactchain.runs.files import read_json_object, read_weights, refuse, require_keys, weights_file, write_weights

FORMAT = 1
CONFIG_NAME = "reward_model.json"
HEAD_NAME = "head.safetensors"  # reward models saved before it: head.pt (still read)


def bradley_terry_loss(r_chosen: Tensor, r_rejected: Tensor, target: Tensor) -> Tensor:
    """-[y log s(rc - rr) + (1 - y) log s(rr - rc)]: y = 1 for a preference, 0.5 for a tie."""
    diff = r_chosen - r_rejected
    return -(target * F.logsigmoid(diff) + (1 - target) * F.logsigmoid(-diff)).mean()


@dataclass(frozen=True)
class LabelledPair:
    chosen: str
    rejected: str
    target: float  # 1.0: chosen is better; 0.5: a tie


def labelled_pairs(rows: Sequence[dict[str, Any]]) -> list[LabelledPair]:
    """Judge rows -> training pairs (labeled -> 1.0, tie -> 0.5; skipped/pending dropped)."""
    out = []
    for row in rows:
        if row["status"] == "labeled":
            out.append(LabelledPair(row["chosen"], row["rejected"], 1.0))
        elif row["status"] == "tie":
            out.append(LabelledPair(row["chosen"], row["rejected"], 0.5))
    return out


class RewardModel(nn.Module):
    """r(caption) = head(embedding(caption)); the backbone is the critic's, frozen."""

    def __init__(self, backbone_spec: str = "tiny", device: str | torch.device | None = None):
        super().__init__()
        from lactchain.models.critic import Critic, value_head
        from lactchain.models.presets import quiet_bars

        self.backbone_spec = backbone_spec
        with quiet_bars(lambda *_: None):  # no weight-loading bars in a job's log
            self.encoder = Critic.load(backbone_spec, device=device, lora_r=1)  # embeddings only; LoRA stays at zero
        self.encoder.requires_grad_(False)
        self.head = value_head(int(self.encoder.backbone.config.hidden_size)).to(self.encoder.device)
        self.config: dict[str, Any] = {}  # filled by load()
        self._cache: dict[str, Tensor] = {}

    @torch.no_grad()
    def embeddings(self, texts: Sequence[str], batch_size: int = 64) -> Tensor:
        """Embeddings of texts, each distinct text computed once."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            for text, vec in zip(chunk, self.encoder.embed(chunk)):
                self._cache[text] = vec
        return torch.stack([self._cache[t] for t in texts])

    def forward(self, embeddings: Tensor) -> Tensor:
        return self.head(embeddings).squeeze(-1)

    @torch.no_grad()
    def score(self, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        self.head.eval()
        return self(self.embeddings(texts)).tolist()

    def save(self, folder: str | Path, extra: dict[str, Any] | None = None) -> Path:
        folder = Path(folder)
        with writing(folder, "the reward model"):
            folder.mkdir(parents=True, exist_ok=True)
            write_weights(folder / HEAD_NAME, self.head.state_dict())
            (folder / CONFIG_NAME).write_text(json.dumps({"format": FORMAT, "backbone": self.backbone_spec,
                                                          **(extra or {})}, indent=2))
        return folder

    @classmethod
    def load(cls, folder: str | Path, device: str | torch.device | None = None) -> "RewardModel":
        folder = Path(folder)
        cfg, head = check_saved(folder)
        model = cls(cfg["backbone"], device=device)
        model.config = cfg  # what save() recorded with it (score_mean, score_std, env)
        model.head.load_state_dict(head)
        model.head.eval()
        return model


WHAT = "reward model"
CONFIG_KEYS = {"format": int, "backbone": str, "score_mean": (int, float), "score_std": (int, float)}


def check_saved(folder: str | Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """A saved reward model that will load: its JSON's fields, its head's tensors at the
    backbone's width (one ArtifactError line naming the file otherwise). Returns (the JSON,
    the head's state), so a load reads it once."""
    from lactchain.models.critic import backbone_hidden, check_value_head

    folder = Path(folder)
    cfg = read_json_object(folder / CONFIG_NAME, WHAT)
    require_keys(cfg, folder / CONFIG_NAME, WHAT, CONFIG_KEYS)
    if cfg["format"] != FORMAT:
        raise refuse(WHAT, folder / CONFIG_NAME, f"is reward-model format {cfg['format']}; this lactchain reads "
                     f"{FORMAT}")
    state = read_weights(folder / HEAD_NAME, WHAT)
    check_value_head(state, backbone_hidden(cfg["backbone"]), weights_file(folder / HEAD_NAME), WHAT)
    return cfg, state


def split_pairs(pairs: Sequence[LabelledPair], held_out: float, seed: int) -> tuple[list, list]:
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_test = max(1, int(round(len(pairs) * held_out))) if len(pairs) > 1 else 0
    test = {i for i in order[:n_test]}
    return [p for i, p in enumerate(pairs) if i not in test], [p for i, p in enumerate(pairs) if i in test]


def accuracy(model: RewardModel, pairs: Sequence[LabelledPair]) -> float:
    """Share of strict preferences (ties excluded) where r(chosen) > r(rejected)."""
    strict = [p for p in pairs if p.target == 1.0]
    if not strict:
        return 0.0
    chosen = model.score([p.chosen for p in strict])
    rejected = model.score([p.rejected for p in strict])
    return sum(c > r for c, r in zip(chosen, rejected)) / len(strict)


def rank_correlation(model: RewardModel, captions: Sequence[str], returns: Sequence[float]) -> float:
    """Spearman correlation between r(caption) and the true return (0.0 when undefined)."""
    return _spearman(model.score(list(captions)), returns)


def _spearman(scores: Sequence[float], returns: Sequence[float]) -> float:
    """0.0 below three captions (two points always rank +-1); constant returns are 0.0 in `spearman`."""
    return spearman(scores, returns) if len(scores) >= 3 else 0.0


def caption_report(model: RewardModel, captions: Sequence[str], returns: Sequence[float]) -> dict[str, float]:
    """From one scoring pass over the episode captions: the Spearman correlation of r with
    the true return, and the mean and std of r (the intrinsic reward's standardisation)."""
    scores = model.score(list(captions))
    mean = sum(scores) / len(scores) if scores else 0.0
    std = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5 if scores else 1.0
    return {"rank_correlation": _spearman(scores, returns), "score_mean": mean, "score_std": std or 1.0}


def train_reward_model(model: RewardModel, pairs: Sequence[LabelledPair], *, epochs: int = 30, lr: float = 1e-3,
                       batch_size: int = 64, held_out: float = 0.2, seed: int = 0,
                       on_epoch: Callable[[int, dict[str, float]], None] | None = None,
                       should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Fit the head with the Bradley-Terry loss; returns the metrics of the last epoch."""
    if len(pairs) < 2:
        raise ValueError(f"{len(pairs)} usable judged pair(s): the reward model needs at least 2 "
                         "(skipped/unknown answers are not labels)")
    train, test = split_pairs(pairs, held_out, seed)
    torch.manual_seed(seed)
    emb_c = model.embeddings([p.chosen for p in train])
    emb_r = model.embeddings([p.rejected for p in train])
    target = torch.tensor([p.target for p in train], device=emb_c.device)
    opt = torch.optim.Adam(model.head.parameters(), lr=lr)
    metrics: dict[str, float] = {}
    gen = torch.Generator().manual_seed(seed)
    for epoch in range(1, epochs + 1):
        model.head.train()
        losses = []
        for idx in torch.randperm(len(train), generator=gen).split(batch_size):
            if len(idx) < 2:  # BatchNorm needs two rows
                continue
            both = model(torch.cat([emb_c[idx], emb_r[idx]]))
            loss = bradley_terry_loss(both[: len(idx)], both[len(idx):], target[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        metrics = {"loss": sum(losses) / max(1, len(losses)), "train_accuracy": accuracy(model, train),
                   "held_out_accuracy": accuracy(model, test) if test else 0.0}
        if on_epoch is not None:
            on_epoch(epoch, metrics)
        if should_stop is not None and should_stop():
            break
    return {**metrics, "train_pairs": len(train), "held_out_pairs": len(test),
            "ties": sum(p.target == 0.5 for p in pairs)}
