"""A small GPT in the nanoGPT mould, conditioned on language and behaviour.

The sequence (one batch row):

    [text_1 .. text_L]  [bd_0 (rtg_0) o_0 a_0]  [bd_1 (rtg_1) o_1 a_1]  ...  [bd_T (rtg_T) o_T a_T]

- text: the instruction's word tokens (learned embeddings + text positions, [PAD]
  keys masked out), or ONE token projected from a frozen sentence embedding; absent
  text (the no-text baseline, or conditioning dropout) is one learned NO-TEXT token;
- bd_t: the sum of the BD fields' embeddings (the target's final cell, its landmarks
  still to visit, one table per slot, the egocentric offsets of the final cell and of
  the next landmark); absent BD is one learned NO-BD vector;
- rtg_t (optional): the return to go, through a linear layer;
- o_t: the sum of the observation's field embeddings (cell, orientation, landmark here,
  nearest landmark + relation, last landmark visited, how many visited, each landmark's
  egocentric offset: one table per landmark and axis). (Concatenating the fields and
  projecting them was tried: worse, on the 8x8 flat benchmark, at equal steps.)
- a_t: the move (or STOP) embedding.

Every step token also gets its timestep embedding and a token-type embedding. The
action a_t is predicted from the output at o_t (causal attention: a_t and everything
after it are unseen there) by a linear head with cross-entropy over the 3 moves + STOP.

Weight tying: text tokens are never predicted (no language-model loss), so the text
embedding has nothing to tie to; the action embedding and the action head share the
4-symbol action vocabulary and may be tied (`tie_actions`, off by default: the input
embedding of a move need not be the direction that scores it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from lactchain.archive.dt.data import ACTIONS, IGNORE, SceneCodec

NO_TEXT = "none"
TEXT, BD, RTG, OBS, ACT = range(5)


@dataclass
class DTConfig:
    scene: dict[str, Any] = field(default_factory=dict)
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.1
    text_encoder: str = "learned"  # "learned", a frozen sentence encoder spec (minilm-l6), or "none"
    text_vocab: int = 0  # learned: the tokenizer's vocabulary
    text_len: int = 1  # text tokens in the sequence
    text_dim: int = 0  # frozen: the sentence embedding's size
    max_visits: int = 6  # BD slots
    max_steps: int = 64  # timestep embeddings: the longest episode, STOP included
    rtg: bool = False
    bd_to_go: bool = True
    tie_actions: bool = False
    absolute_cells: bool = True  # embed the cell ids (pose, BD final); False: egocentric offsets only

    @property
    def use_text(self) -> bool:
        return self.text_encoder != NO_TEXT

    @property
    def tokens_per_step(self) -> int:
        return 4 if self.rtg else 3

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DTConfig":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: DTConfig) -> None:
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0, "n_embd must be a multiple of n_head"
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.n_head, d // self.n_head).transpose(1, 2) for t in (q, k, v))
        # no dropout on the attention weights: on CPU it costs a third of a step here
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(b, s, d)))


class Block(nn.Module):
    def __init__(self, cfg: DTConfig) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd),
                                 nn.Dropout(cfg.dropout))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class DecisionTransformer(nn.Module):
    def __init__(self, cfg: DTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        codec = SceneCodec(cfg.scene, cfg.max_visits)
        d = cfg.n_embd
        # text
        if cfg.text_encoder == "learned":
            self.wte = nn.Embedding(max(cfg.text_vocab, 2), d)
            self.wpe_text = nn.Embedding(cfg.text_len, d)
        elif cfg.use_text:
            self.text_proj = nn.Linear(cfg.text_dim, d)
        self.no_text = nn.Parameter(torch.zeros(d))
        # behaviour descriptor (to go)
        self.bd_emb = nn.ModuleList([nn.Embedding(n, d) for n in codec.bd_sizes])
        self.no_bd = nn.Parameter(torch.zeros(d))
        self.rtg_proj = nn.Linear(1, d) if cfg.rtg else None
        # one embedding per observation field (SceneCodec.obs_sizes), summed
        self.obs_emb = nn.ModuleList([nn.Embedding(n, d) for n in codec.obs_sizes])
        self.act_emb = nn.Embedding(len(ACTIONS), d)
        self.time = nn.Embedding(cfg.max_steps, d)
        self.kind = nn.Embedding(5, d)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, len(ACTIONS), bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))
        if cfg.tie_actions:
            self.head.weight = self.act_emb.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # ---- the sequence -------------------------------------------------------------------
    def _text(self, batch: Mapping[str, torch.Tensor], b: int, text_on: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(text block (B, L, d), key validity (B, L))."""
        cfg, dev = self.cfg, self.no_text.device
        if cfg.text_encoder == "learned":
            ids = batch["text_ids"]
            ids = ids[:, : max(1, int((ids != 0).sum(1).max()))]  # trailing [PAD] columns: masked keys anyway
            emb = self.wte(ids) + self.wpe_text(torch.arange(ids.shape[1], device=dev))
            valid = ids != 0
        elif cfg.use_text:
            emb, valid = self.text_proj(batch["text_vec"]).unsqueeze(1), torch.ones(b, 1, dtype=torch.bool, device=dev)
        else:
            emb, valid = self.no_text.expand(b, 1, -1), torch.ones(b, 1, dtype=torch.bool, device=dev)
        off = ~text_on
        emb = torch.where(off[:, None, None], self.no_text.expand_as(emb), emb)
        valid = valid & text_on[:, None]
        valid[:, 0] = True  # the first text token (or NO-TEXT) is always there
        return emb + self.kind.weight[TEXT], valid

    def _fields(self, embs: nn.ModuleList, codes: torch.Tensor) -> torch.Tensor:
        """The sum of the fields' embeddings (field 0, a cell id, left out without
        `absolute_cells`)."""
        first = 0 if self.cfg.absolute_cells else 1
        return sum(emb(codes[..., i]) for i, emb in enumerate(embs) if i >= first)

    def forward(self, batch: Mapping[str, torch.Tensor], text_on: torch.Tensor | None = None,
                bd_on: torch.Tensor | None = None) -> torch.Tensor:
        """Action logits (B, T, 4) at every step's observation. `text_on` / `bd_on`
        (B,) bool say which rows see their instruction / BD (default: all)."""
        cfg = self.cfg
        obs, bd, act = batch["obs"], batch["bd"], batch["act"]
        b, t = obs.shape[:2]
        dev = obs.device
        ones = torch.ones(b, dtype=torch.bool, device=dev)
        text_on = (ones if text_on is None else text_on.to(dev)) & cfg.use_text
        bd_on = ones if bd_on is None else bd_on.to(dev)

        text, text_valid = self._text(batch, b, text_on)
        bd_tok = self._fields(self.bd_emb, bd)
        bd_tok = torch.where(bd_on[:, None, None], bd_tok, self.no_bd.expand_as(bd_tok)) + self.kind.weight[BD]
        obs_tok = self._fields(self.obs_emb, obs) + self.kind.weight[OBS]
        act_tok = self.act_emb(act.clamp(min=0)) + self.kind.weight[ACT]
        step = [bd_tok]
        if cfg.rtg:
            step.append(self.rtg_proj(batch["rtg"].unsqueeze(-1)) + self.kind.weight[RTG])
        step += [obs_tok, act_tok]
        k = len(step)
        steps = torch.stack(step, dim=2) + self.time(torch.arange(t, device=dev).clamp(max=cfg.max_steps - 1))[None, :, None]
        x = self.drop(torch.cat([text, steps.reshape(b, t * k, -1)], dim=1))

        n_text, s = text.shape[1], x.shape[1]
        keys = torch.cat([text_valid, torch.ones(b, t * k, dtype=torch.bool, device=dev)], dim=1)
        causal = torch.ones(s, s, dtype=torch.bool, device=dev).tril()
        mask = (causal[None] & keys[:, None, :]) | torch.eye(s, dtype=torch.bool, device=dev)[None]
        # (B, 1, S, S) additive: 0 where a query may look, -inf elsewhere (every head alike)
        mask = torch.zeros(mask.shape, device=dev).masked_fill_(~mask, float("-inf"))[:, None]
        for block in self.blocks:
            x = block(x, mask)
        x = self.ln_f(x)
        at_obs = n_text + torch.arange(t, device=dev) * k + (k - 2)
        return self.head(x[:, at_obs])


def action_loss(logits: torch.Tensor, act: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), act.reshape(-1), ignore_index=IGNORE,
                           reduction=reduction)


def action_accuracy(logits: torch.Tensor, act: torch.Tensor) -> float:
    valid = act != IGNORE
    return float((logits.argmax(-1)[valid] == act[valid]).float().mean()) if valid.any() else 0.0
