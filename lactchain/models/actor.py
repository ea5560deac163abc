"""The actor: batched and streaming generation of move lists, their log-probs, LoRA adapters.

Prompts given to `generate` / `stream` / `completion_logprobs` are USER messages
(rendered strategy prompts); the actor wraps each in the model's chat template
(`chat_prompt`, generation prompt added) and tokenizes that text with
`add_special_tokens=False` (the template already holds BOS / role markers).

Generation is ONE batched `model.generate` call: left padding, KV cache, a pad
token distinct from EOS, greedy at temperature 0, otherwise plain multinomial
sampling at `temperature` (no top-k / top-p). A completion ends with the
tokenizer's EOS (for SmolLM2: `<|im_end|>`, the end of an assistant turn).

Constrained decoding restricts tokens to `move_list_grammar(moves, max_moves)`:
by default through the grammar's token automaton held in tensors on the model's
device (`move_automaton`: one gather per step for the whole batch), or through
xgrammar's HF processor (`grammar_engine = "xgrammar"`, the reference); once the
list is closed only EOS is allowed, so every constrained sample that fits in
`max_new_tokens` parses strictly. Free mode
(`constrained=False`) just samples and `parse_moves` decides (strict, lenient or
failed).

`Sample.logprob` is the sum of log-probs of the generated tokens, EOS included,
under the model's own raw (untempered, unmasked) distribution: the same number
`completion_logprobs` computes by teacher forcing.

Shared-prefix KV cache (`prefix_cache=True`): rollout prompts differ only in their
last lines (the state; see `CONVERSION_TEMPLATE`), so most of every prompt is the
same tokens. The longest common token prefix of a batch is run through the model
once (batch 1), its keys/values are kept on the actor, and the batch is laid out as
[prefix][pad...][suffix] with only the pads and suffixes fed to the model; positions
continue from the prefix length, so the result is the uncached computation up to
float rounding. The cache is dropped when the weights change (`clear_prefix_cache`,
also done on adapter load/unload, on `actor.model = ...` and when any parameter is
modified in place).

`inference_dtype` (opt-in, e.g. bfloat16 on a CPU with AVX512-bf16) generates with
a lazily built copy of the weights in that dtype, any LoRA adapter merged in; then
`Sample.logprob` is under that copy, while `completion_logprobs` always scores with
the actor's own weights.
"""

from __future__ import annotations

import copy
import types
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from lactchain.machine import resolve_dtype
from lactchain.models.cache_keyword import cache_kwargs, output_cache
from lactchain.models.decode_hooks import CallbackStreamer, LogprobRecorder, RowSampler
from lactchain.models.padding import PAD_CANDIDATES, ensure_distinct_pad  # noqa: F401  (re-exported)
from lactchain.models.move_automaton import AutomatonProcessor, TokenAutomaton, automaton_for
from lactchain.models.presets import Progress, quiet_bars, resolve_actor
from lactchain.models.prompt_tokens import PromptTokens
from lactchain.models.merged_copy import refresh_merged
from lactchain.models.scoring import ScoringTokens
from lactchain.models.static_cache import StaticCachePool, batch_bucket, pad_rows
from lactchain.moves import (
    DEFAULT_MOVES, GRAMMAR_SPELLINGS, LIST_MAX_MOVES, check_enumerable, format_moves, move_list_grammar, parse_moves,
)

FALLBACK_CONTEXT = 2048
# A shared prefix shorter than this is not worth a separate forward pass and a cache entry.
MIN_SHARED_PREFIX = 16
# Prefix KV entries kept (least recently used dropped): a few strategies in flight at once.
PREFIX_CACHE_ENTRIES = 4
# Where the shared-prefix cache pays, by device type (prefix_cache=None follows this):
# on a 2-core CPU rollouts run ~4x faster with it. On CUDA it stays off: one H100 measured
# 0.29x and one H200 0.68x and 1.62x, each with a cold first run in the figure; warmed up
# at full size, the H200 measured 0.985x and 0.995x (2026-11-29): no gain, so still off.
# `bench device` measures it per device.
PREFIX_CACHE_PAYS = {"cpu": True, "cuda": False}
# Where decoding with a static KV cache pays (static_cache=None follows this). On CUDA
# transformers compiles the decode step into CUDA graphs when the cache is static: on one
# H200 a warm greedy evaluation of the 60 states took 0.73 s against 1.42 s, same answers.
# It compiles again for each new batch shape (its cold first run: 19 s), and in a loop run
# with `--static-cache on` the evaluations took 18.3 s and 74.4 s against 4.5 s and 5.1 s
# (2026-11-29), so it stays off. On a CPU it only pads (no compiling). Since 2026-11-30 the
# caches are kept across calls, one per batch bucket (lactchain.models.static_cache): a few
# shapes and fixed addresses over a run instead of a new cache each call; not measured on a
# GPU yet.
STATIC_CACHE_PAYS = {"cpu": False, "cuda": False}
# How the static cache's decode step is compiled. "inductor": transformers' own default
# (generated kernels in CUDA graphs; the 19-78 s cold runs above). "cudagraphs": torch's
# cudagraphs backend, which captures the same eager kernels in CUDA graphs without
# generating code, so a new shape should cost a trace and a capture rather than a compile:
# the host's per-kernel launches (what bounds a 135M model's decode on a GPU) go either
# way. Not measured on a GPU yet (`bench device`'s evaluate times it on CUDA).
DECODE_COMPILERS = ("inductor", "cudagraphs")


def decode_compile_config(backend: str) -> Any:
    """transformers' CompileConfig for a static cache's decode step with `backend` (not
    inductor: no mode). It compiles on any device (transformers alone compiles only on an
    accelerator), so a CPU traces the same graphs; torch's cudagraphs backend captures
    nothing there and runs them as traced."""
    from transformers import CompileConfig

    config = CompileConfig(backend=backend, mode="default", fullgraph=False)
    config._compile_all_devices = True
    return config


def check_grammar_spelling(spelling: str, moves: Sequence[str], max_moves: int) -> str:
    """`spelling` if it is one of `GRAMMAR_SPELLINGS` and, for canonical, the lists are few
    enough to enumerate; else ValueError naming the fix."""
    if spelling not in GRAMMAR_SPELLINGS:
        raise ValueError(f"unknown grammar spelling {spelling!r}: use {' or '.join(GRAMMAR_SPELLINGS)}")
    if spelling == "canonical":
        check_enumerable(moves, max_moves)
    return spelling


@dataclass
class Sample:
    """One completion: its text, the parsed moves and how they parsed."""

    text: str
    moves: list[str]
    mode: str  # "strict" | "lenient" | "failed"
    logprob: float  # sum of completion token log-probs (EOS included) under the raw model
    n_tokens: int  # generated tokens, EOS included
    # The generated token ids (EOS included, padding dropped). A grammar can steer a
    # BPE model into a non-canonical tokenization of `text`; scoring these ids (not
    # the re-tokenized text) reproduces `logprob` exactly.
    token_ids: list[int] = field(default_factory=list)


def _default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def as_dtype(value: str | torch.dtype | None) -> Optional[torch.dtype]:
    """None (the model's own dtype), a torch dtype or its name ("bf16", "float32", ...;
    `lactchain.machine.resolve_dtype`'s, "auto" included: the dtype this machine is
    fastest in). An unknown name is a ValueError."""
    if value is None or isinstance(value, torch.dtype):
        return value
    return getattr(torch, resolve_dtype(value))


def common_prefix_len(rows: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all rows share."""
    first = rows[0]
    n = min(len(r) for r in rows)
    for row in rows[1:]:
        k = 0
        while k < n and row[k] == first[k]:
            k += 1
        n = k
    return n


def _kv_pairs(cache: Any) -> Optional[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Per-layer (keys, values) of a transformers DynamicCache, or None for any other cache
    layout (sliding windows, linear attention...): those models just skip the prefix cache."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer or layer.keys is None for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


@dataclass
class _Batch:
    """Model inputs for a batch of prompt rows. Without a prefix: left padded. With one:
    [prefix][pad...][suffix], `past` holding the prefix keys/values expanded to the batch
    (a fresh cache per call: generate appends to it) and `prefix_len` tokens of `input_ids`
    already in it."""

    input_ids: torch.Tensor
    mask: torch.Tensor
    past: Any = None
    prefix_len: int = 0

    def position_ids(self) -> torch.Tensor:
        """Positions of the tokens not in the cache: real tokens count on from the prefix
        length, pads (masked out anyway) get 0, as in generate."""
        pos = (self.mask.cumsum(-1) - 1).masked_fill(self.mask == 0, 0)
        return pos[:, self.prefix_len:]


def contiguous_head(model: Any) -> Any:
    """Give the LM head a contiguous input. Generation and scoring feed it a slice of the
    hidden states (the last positions), and torch's CPU `linear` takes a very slow path
    for a non-contiguous 3-D input when the weight needs no grad, i.e. whenever an adapter
    is loaded (the base is frozen): SmolLM2's head took 2.6 s instead of 7 ms in bf16, and
    5x longer in fp32 (torch 2.13, measured), once per generate call."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if isinstance(head, torch.nn.Module) and not getattr(head, "_lactchain_contiguous", False):
        head.register_forward_pre_hook(lambda _module, args: (args[0].contiguous(), *args[1:]))
        head._lactchain_contiguous = True
    return model


def own_forwards(model: Any) -> Any:
    """Undo, on a deep copy, the forward patches that still call the original model.

    TRL's trainers patch the model's forward (`add_fused_lm_head`) with a closure over the
    original bound `forward`: a deep copy keeps that closure, so the copy's forward runs the
    ORIGINAL model. The generation copy (bf16, adapter merged) then silently generated in
    float32 through unmerged LoRA layers after the first train-actor: a SmolLM2 GRPO step's
    rollouts spent 26 of 44 s in LoRA layers. A patch is recognised as TRL's: bound to the
    module, `functools.wraps` of its class's forward; the class's own forward is restored."""
    for module in model.modules():
        patched = vars(module).get("forward")
        if (isinstance(patched, types.MethodType) and patched.__self__ is module
                and getattr(patched.__func__, "__wrapped__", None) is getattr(type(module), "forward", None)):
            del module.forward
    return model


def room_for_a_copy(model: Any, margin: float = 1.25) -> bool:
    """Whether a second copy of `model`'s weights (times `margin`) fits in what its
    device has free: the GPU's free memory, or the host's available RAM."""
    params = list(model.parameters())
    need = margin * sum(p.numel() * p.element_size() for p in params)
    device = params[0].device
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free > need
    import psutil  # peft's and accelerate's dependency

    return psutil.virtual_memory().available > need


def trainable_fingerprint(params: list[Any]) -> tuple[float, float] | None:
    """(sum, sum of squares) of the trainable parameters (an adapter's): a value that changes
    when an optimizer step changes them. None when nothing is trainable."""
    trainable = [p.detach() for p in params if p.requires_grad]
    if not trainable:
        return None
    with torch.no_grad():
        sums = torch.stack([torch.stack([p.sum(), (p * p).sum()]).float() for p in trainable]).sum(0)
    return tuple(float(v) for v in sums.tolist())


class Actor(ScoringTokens):
    """An LLM that answers rendered strategy prompts with move lists."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "model",
        moves: Sequence[str] = DEFAULT_MOVES,
        max_moves: int = LIST_MAX_MOVES,
        device: str | torch.device | None = None,
        prefix_cache: bool | None = None,
        inference_dtype: str | torch.dtype | None = None,
        static_cache: bool | None = None,
        grammar_spelling: str = "any",
        decode_compiler: str = "inductor",
    ) -> None:
        """`prefix_cache`: share the KV of the prompts' common prefix (see the module doc);
        None: where it pays on this device type (`PREFIX_CACHE_PAYS`). `static_cache`:
        decode with a static KV cache (CUDA graphs on a GPU); None: `STATIC_CACHE_PAYS`;
        `decode_compiler`: how that decode step is compiled (`DECODE_COMPILERS`).
        `inference_dtype`: generate with a copy of the weights in this dtype (None: as loaded).
        `grammar_spelling`: which token spellings of a move list constrained decoding admits,
        `GRAMMAR_SPELLINGS` (ValueError for an unknown one or too many lists to enumerate)."""
        from transformers import GenerationConfig

        from lactchain.models.attention import choose_sdpa_kernels, use_grouped_attention

        self.name = name
        self.tokenizer = tokenizer
        self.moves: tuple[str, ...] = tuple(moves)
        self.max_moves = int(max_moves)
        self.device = torch.device(device) if device is not None else _default_device()
        self.adapter: Optional[Path] = None
        if tokenizer.eos_token_id is None:
            raise ValueError(f"the tokenizer of {name!r} has no EOS token, so completions could never end")
        base = model.get_base_model() if hasattr(model, "get_base_model") else model  # under a peft wrapper
        ensure_distinct_pad(tokenizer, base)
        # GQA models read their shared KV heads without copying them at inference (lactchain.models.attention).
        self.grouped_attention = use_grouped_attention(base)
        choose_sdpa_kernels(self.device)  # no cuDNN SDPA where each new shape's graph build costs more than it gains
        # A neutral generation config: sampling is fully decided per call (no hub
        # defaults such as top_k=50 or repetition penalties sneaking in).
        base.generation_config = GenerationConfig(
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        if prefix_cache is None:
            prefix_cache = PREFIX_CACHE_PAYS.get(self.device.type, False)
        self.prefix_cache = bool(prefix_cache)
        # (prefix ids, dtype) -> per-layer (keys, values) of batch 1, most recently used last.
        self._prefix_kv: OrderedDict[tuple[tuple[int, ...], torch.dtype], list[tuple[torch.Tensor, torch.Tensor]]]
        self._prefix_kv = OrderedDict()
        self.prefix_computations = 0  # forward passes spent on shared prefixes (cache misses)
        self._prompt_tokens = PromptTokens()  # each user text's chat prompt ids, tokenized once
        self._inference_copy: Any = None
        self._stale_copy: Any = None  # the copy before a training step, refreshed in place when it maps
        self.copy_builds = self.copy_refreshes = 0  # generation copies built / refreshed in place (tests, logs)
        self._weights_stamp: Any = None
        self._inference_dtype = as_dtype(inference_dtype)
        self.model = model.to(self.device).eval()
        self._xgr_info: Any = None
        self._xgr_compiler: Any = None
        self._grammars: dict[tuple[tuple[str, ...], int], Any] = {}
        self._automata: dict[tuple[tuple[str, ...], int, str], TokenAutomaton] = {}
        self.static_caches = StaticCachePool()  # kept across calls and weight changes: fixed addresses
        # Decode with a static KV cache (never with a prefix cache: its DynamicCache is the
        # input): on CUDA transformers then compiles the decode step (CUDA graphs).
        if static_cache is None:
            static_cache = STATIC_CACHE_PAYS.get(self.device.type, False)
        self.static_cache = bool(static_cache)
        if decode_compiler not in DECODE_COMPILERS:
            raise ValueError(f"unknown decode compiler {decode_compiler!r}: use {' or '.join(DECODE_COMPILERS)}")
        self.decode_compiler = decode_compiler
        # How constrained decoding masks tokens: "tensor" (the grammar's token automaton
        # on the model's device, no host work per token) or "xgrammar" (its HF processor:
        # the reference the tensor tables are tested against).
        self.grammar_engine = "tensor"
        self.grammar_spelling = check_grammar_spelling(grammar_spelling, self.moves, self.max_moves)

    # ---- weights, derived copies and caches -------------------------------------------
    @property
    def model(self) -> Any:
        return self._model

    @model.setter
    def model(self, value: Any) -> None:
        """Swapping the model (training code puts the trained peft model here) drops
        everything computed from the old weights."""
        self._model = contiguous_head(value)
        self.clear_prefix_cache()

    @property
    def inference_dtype(self) -> Optional[torch.dtype]:
        return self._inference_dtype

    @inference_dtype.setter
    def inference_dtype(self, value: str | torch.dtype | None) -> None:
        self._inference_dtype = as_dtype(value)
        self._inference_copy = self._stale_copy = None

    def clear_prefix_cache(self) -> None:
        """Forget cached prefix keys/values and the inference-dtype copy of the weights.
        Call it after changing the weights in place (training does); adapter load/unload
        and `actor.model = ...` call it themselves."""
        self._prefix_kv.clear()
        self._inference_copy = self._stale_copy = None
        self._weights_stamp = None

    def _stamp(self) -> tuple:
        """Identity of the current weights: model object, adapter, the sum of the
        parameters' in-place version counters and a fingerprint of the trainable ones, so
        caches never outlive the weights they were computed from even without a clear call.
        The fingerprint is what catches training: torch's fused AdamW (transformers' default
        optimizer) changes weights in place without bumping a version counter, and GRPO,
        which generates between optimizer steps, sampled from the weights it started with."""
        model = self._model
        try:
            active = str(getattr(model, "active_adapters", None))
        except Exception:  # peft raises on some half-built states
            active = None
        params = list(model.parameters())
        # Training here always goes through a LoRA adapter (PEFT freezes the base): fingerprint
        # only then; a plain model's weights all require grad, and summing them cost ~90 ms a call.
        adapter_weights = trainable_fingerprint(params) if hasattr(model, "peft_config") else None
        return (id(model), str(self.adapter), active, sum(p._version for p in params), adapter_weights)

    def _sync_caches(self) -> None:
        """Drop derived state if the weights changed since it was computed (call first)."""
        stamp = self._stamp()
        if stamp != self._weights_stamp:
            # The copy (or one already stale: GRPO's KL gauge scores with the adapter off between
            # steps, a weight change of its own) is refreshed, not rebuilt, while model and adapter stay.
            previous = self._weights_stamp
            copy_ = self._inference_copy if self._inference_copy is not None else self._stale_copy
            self.clear_prefix_cache()
            if previous is not None and previous[:3] == stamp[:3]:
                self._stale_copy = copy_
            self._weights_stamp = stamp

    def _generation_model(self) -> Any:
        """The model generate runs: a lazily built copy with any LoRA adapter merged, in
        `inference_dtype` where that differs from the weights', else the actor's own.
        Merged, the adapter adds no per-token cost: unmerged, each of SmolLM2's 210
        adapted layers runs ~5 more ops a token, which a GPU pays in kernel launches. A
        same-dtype copy is made only where a second set of weights fits in memory."""
        own = self._model
        dtype = self._inference_dtype
        recast = dtype is not None and dtype != next(own.parameters()).dtype
        stale, self._stale_copy = self._stale_copy, None
        if self._inference_copy is None and stale is not None and refresh_merged(stale, own):
            self._inference_copy = stale  # the adapter's new weights written in place (lactchain.models.merged_copy)
            self.copy_refreshes += 1
        if self._inference_copy is None:
            adapted = hasattr(own, "peft_config")
            if not recast and not (adapted and room_for_a_copy(own)):
                return own
            dup = copy.deepcopy(own)
            if adapted:
                dup = dup.merge_and_unload()  # merged in the original dtype, then cast: less rounding
            dup = own_forwards(dup)
            self._inference_copy = contiguous_head((dup.to(dtype) if recast else dup).eval())
            self.copy_builds += 1
        return self._inference_copy

    def _prefix_kv_for(self, model: Any, ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """Keys/values of `ids` (batch 1) under `model`, computed once per weights."""
        from transformers import DynamicCache

        dtype = next(model.parameters()).dtype
        key = (tuple(ids), dtype)
        if key in self._prefix_kv:
            self._prefix_kv.move_to_end(key)
            return self._prefix_kv[key]
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([ids], device=self.device), use_cache=True,
                        **cache_kwargs(model, DynamicCache(config=self._config())), logits_to_keep=1)
        kv = _kv_pairs(output_cache(out))
        if kv is None:
            return None
        self.prefix_computations += 1
        self._prefix_kv[key] = kv
        while len(self._prefix_kv) > PREFIX_CACHE_ENTRIES:
            self._prefix_kv.popitem(last=False)
        return kv

    def _shared_prefix(self, model: Any, rows: list[list[int]], keep: int,
                       limit: int | None = None) -> tuple[int, Any]:
        """(length, keys/values) of the prefix to reuse for `rows`, or (0, None). At least
        `keep` tokens of the shortest row stay outside the prefix (generation needs the last
        prompt token's logits). A cached prefix the batch starts with is reused as is, so
        batches whose common part runs a few tokens into the state still hit the same
        entry; a lone prompt only ever reuses one (it shares nothing with itself)."""
        if not self.prefix_cache:
            return 0, None
        limit = min(common_prefix_len(rows), min(len(r) for r in rows) - keep if limit is None else limit)
        if limit < MIN_SHARED_PREFIX:
            return 0, None
        dtype = next(model.parameters()).dtype
        first = rows[0]
        best: Optional[tuple[int, ...]] = None
        for ids, dt in self._prefix_kv:
            if dt == dtype and MIN_SHARED_PREFIX <= len(ids) <= limit and (best is None or len(ids) > len(best)) \
                    and tuple(first[:len(ids)]) == ids:
                best = ids
        if best is None and len(rows) == 1:
            return 0, None
        ids = list(best) if best is not None else first[:limit]
        kv = self._prefix_kv_for(model, ids)
        return (len(ids), kv) if kv is not None else (0, None)

    def _batch(self, model: Any, rows: list[list[int]], keep: int = 1, limit: int | None = None) -> _Batch:
        """Inputs for `rows`: through the shared-prefix cache when there is one to use
        (`limit`: the longest prefix allowed, else all but `keep` tokens of the shortest row)."""
        from transformers import DynamicCache

        n, kv = self._shared_prefix(model, rows, keep, limit)
        if kv is None:
            input_ids, mask = self._left_pad(rows)
            return _Batch(input_ids, mask)
        batch = len(rows)
        suffix_ids, suffix_mask = self._left_pad([r[n:] for r in rows])
        prefix = torch.tensor(rows[0][:n], dtype=torch.long, device=self.device).expand(batch, n)
        input_ids = torch.cat([prefix, suffix_ids], dim=1)
        mask = torch.cat([torch.ones((batch, n), dtype=torch.long, device=self.device), suffix_mask], dim=1)
        # A new cache object per call, filled by copying (torch.cat inside `update`) the
        # stored tensors expanded to the batch: the stored entry itself is never touched.
        past = DynamicCache([(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in kv],
                            config=self._config())
        return _Batch(input_ids, mask, past, n)

    # ---- loading ------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        spec: str = "smollm2-135m",
        adapter: str | Path | None = None,
        *,
        moves: Sequence[str] = DEFAULT_MOVES,
        max_moves: int = LIST_MAX_MOVES,
        device: str | None = None,
        progress: Optional[Progress] = None,
        prefix_cache: bool | None = None,
        inference_dtype: str | torch.dtype | None = None,
        static_cache: bool | None = None,
        grammar_spelling: str = "any",
        decode_compiler: str = "inductor",
    ) -> "Actor":
        """Load a preset (`tiny`, `smollm2-135m`, `mistral-7b-instruct`), a local folder or
        a cached hub id, optionally with a LoRA adapter folder on top."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = resolve_actor(spec, progress)
        dev = torch.device(device) if device is not None else _default_device()
        dtype = torch.float32
        if dev.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False):
            dtype = torch.bfloat16
        if progress is not None:
            progress(f"loading {spec} weights", None)
        with quiet_bars(progress):
            tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, trust_remote_code=False)
        actor = cls(model, tokenizer, name=spec, moves=moves, max_moves=max_moves, device=dev,
                    prefix_cache=prefix_cache, inference_dtype=inference_dtype, static_cache=static_cache,
                    grammar_spelling=grammar_spelling, decode_compiler=decode_compiler)
        if adapter is not None:
            if progress is not None:
                progress(f"loading adapter {adapter}", None)
            actor.load_adapter(adapter)
        if progress is not None:
            progress(f"{spec} ready on {dev}", 1.0)
        return actor

    def load_adapter(self, path: str | Path) -> None:
        """Put a peft LoRA adapter (a folder saved by `save_pretrained`) on the base model;
        replaces any adapter already loaded."""
        from peft import PeftModel

        from lactchain.models.quiet import quiet_checkpointing_deprecation

        path = Path(path).expanduser()
        if not (path / "adapter_config.json").is_file():
            raise FileNotFoundError(f"{path} is not a LoRA adapter folder (no adapter_config.json)")
        self.unload_adapter()
        with quiet_checkpointing_deprecation():
            self.model = PeftModel.from_pretrained(self.model, str(path), is_trainable=False).to(self.device).eval()
        self.adapter = path
        self.clear_prefix_cache()

    def unload_adapter(self) -> None:
        """Remove the LoRA adapter (no merge): back to the base weights."""
        from peft import PeftModel

        if isinstance(self.model, PeftModel):
            self.model = self.model.unload().eval()
        self.adapter = None
        self.clear_prefix_cache()

    # ---- prompts --------------------------------------------------------------------
    @property
    def pad_token_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def context_length(self) -> int:
        config = self._config()
        for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            value = getattr(config, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        value = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(value, int) and 0 < value < 10**7:
            return value
        return FALLBACK_CONTEXT

    def _config(self) -> Any:
        model = self.model
        return getattr(model, "config", None) or model.get_base_model().config

    def _left_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            if row:
                ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
                mask[i, width - len(row):] = 1
        return ids.to(self.device), mask.to(self.device)

    @torch.inference_mode()
    def choice_logprobs(self, prompts: list[str], options: Sequence[str], batch_size: int = 16) -> list[list[float]]:
        """log p(option's first token | chat prompt) for each prompt and option: a forced
        choice (a judge that must answer one of '1', '2', 'tie'), one forward pass per batch."""
        firsts = self._option_first_tokens(options)
        self._sync_caches()
        model = self._generation_model()
        out: list[list[float]] = []
        for start in range(0, len(prompts), batch_size):
            rows = [self._prompt_ids(p, 1) for p in prompts[start:start + batch_size]]
            ids, mask = self._left_pad(rows)
            logits = model(input_ids=ids, attention_mask=mask).logits[:, -1, :].float()
            logp = torch.log_softmax(logits, dim=-1)[:, firsts]
            out.extend(logp.tolist())
        return out

    # ---- constrained decoding ------------------------------------------------------
    def _tokenizer_info(self) -> Any:
        import xgrammar as xgr

        if self._xgr_info is None:
            self._xgr_info = xgr.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=self._config().vocab_size, stop_token_ids=[self.eos_token_id],
            )
        return self._xgr_info

    def _compiled_grammar(self) -> Any:
        import xgrammar as xgr

        key = (tuple(self.moves), int(self.max_moves))
        if key not in self._grammars:
            if self._xgr_compiler is None:
                self._xgr_compiler = xgr.GrammarCompiler(self._tokenizer_info())
            self._grammars[key] = self._xgr_compiler.compile_grammar(move_list_grammar(*key))
        return self._grammars[key]

    def token_automaton(self) -> TokenAutomaton:
        """The move-list grammar's token tables on this actor's device (built once per
        moves / max_moves: 0.6 s for SmolLM2's 49k vocabulary; 0.06 s for its canonical
        spellings). GRPO reads them too, to score its samples under the grammar-masked
        policy that drew them."""
        key = (tuple(self.moves), int(self.max_moves), self.grammar_spelling)
        if key not in self._automata:
            def encode(texts: list[str]) -> list[list[int]]:
                return self.tokenizer(texts, add_special_tokens=False)["input_ids"]

            canonical = encode if self.grammar_spelling == "canonical" else None
            tables = automaton_for(self._tokenizer_info(), self.moves, self.max_moves, self.eos_token_id, canonical)
            self._automata[key] = tables.to(self.device)
        return self._automata[key]

    def _grammar_processor(self) -> Any:
        """A fresh (stateful) constrained-decoding processor for one generate call."""
        if self.grammar_engine == "tensor":
            return AutomatonProcessor(self.token_automaton())
        if self.grammar_engine == "xgrammar":
            if self.grammar_spelling != "any":
                raise ValueError("xgrammar's processor admits every spelling of a move list: use the tensor "
                                 "grammar engine for canonical spellings")
            from xgrammar.contrib.hf import LogitsProcessor as GrammarProcessor

            return GrammarProcessor(self._compiled_grammar())
        raise ValueError(f"unknown grammar engine {self.grammar_engine!r}: use 'tensor' or 'xgrammar'")

    def grammar_token_budget(self) -> int:
        """Tokens (EOS included) the longest allowed move list takes when tokenized
        canonically: `max_new_tokens` below this can cut constrained lists short."""
        longest = max(self.moves, key=lambda m: len(self._ids(m)))
        return len(self._ids(format_moves([longest] * self.max_moves))) + 1

    # ---- generation ------------------------------------------------------------------
    def generate(
        self,
        prompts: list[str],
        *,
        constrained: bool = True,
        temperature: float = 0.0,
        max_new_tokens: int = 48,
        seed: int | None = None,
        num_samples: int = 1,
        seeds: Sequence[int] | None = None,
    ) -> list[Sample]:
        """`num_samples` completions per user prompt, grouped per prompt (prompt 0's
        first), from ONE batched generate call. Same seed -> same samples. `seeds` (one
        per prompt) seeds each prompt's sampling on its own: its samples are then the
        same whatever else is in the batch."""
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        if not prompts:
            return []
        if constrained:
            self._check_budget(max_new_tokens)
        rows = [self._prompt_ids(p, max_new_tokens) for p in prompts]
        rows = [r for r in rows for _ in range(num_samples)]
        row_seeds = None if seeds is None else [int(s) * 1_009 + j for s in seeds for j in range(num_samples)]
        return self._run(rows, constrained=constrained, temperature=temperature,
                         max_new_tokens=max_new_tokens, seed=seed, row_seeds=row_seeds)

    def stream(
        self,
        prompt: str,
        on_text: Callable[[str], None],
        *,
        constrained: bool = True,
        temperature: float = 0.0,
        max_new_tokens: int = 48,
        seed: int | None = None,
    ) -> Sample:
        """Generate one completion, calling `on_text(piece)` as text arrives (on this
        thread); the pieces concatenate to the returned `Sample.text`."""
        if constrained:
            self._check_budget(max_new_tokens)
        rows = [self._prompt_ids(prompt, max_new_tokens)]
        streamer = CallbackStreamer(self.tokenizer, on_text, self.eos_token_id)
        sample = self._run(rows, constrained=constrained, temperature=temperature,
                           max_new_tokens=max_new_tokens, seed=seed, streamer=streamer)[0]
        streamer.flush(sample.text)
        return sample

    def _check_budget(self, max_new_tokens: int) -> None:
        budget = self.grammar_token_budget()
        if max_new_tokens < budget:
            warnings.warn(
                f"max_new_tokens={max_new_tokens} is below the {budget} tokens a list of {self.max_moves} moves "
                f"takes for {self.name}: long constrained answers will be cut off (and parse leniently or fail)",
                stacklevel=3,
            )

    def _run(
        self,
        rows: list[list[int]],
        *,
        constrained: bool,
        temperature: float,
        max_new_tokens: int,
        seed: int | None,
        streamer: Any = None,
        row_seeds: Sequence[int] | None = None,
    ) -> list[Sample]:
        from transformers import GenerationConfig, LogitsProcessorList, TemperatureLogitsWarper

        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self._sync_caches()
        model = self._generation_model()
        batch = self._batch(model, rows)
        input_ids, mask, past = batch.input_ids, batch.mask, batch.past
        do_sample = temperature > 0
        # A static cache kept across calls (lactchain.models.static_cache): the batch padded to its
        # bucket where no row's answer depends on the others; a streamed answer takes generate's own.
        pooled = self.static_cache and past is None and streamer is None
        if pooled:
            size = batch_bucket(len(rows)) if not do_sample or row_seeds is not None else len(rows)
            input_ids, mask = pad_rows(input_ids, size), pad_rows(mask, size)
            if row_seeds is not None:
                row_seeds = [*row_seeds, *[row_seeds[0]] * (size - len(rows))]
            past = self.static_caches.get(model, size, input_ids.shape[1] + int(max_new_tokens))
        recorder = LogprobRecorder()
        processors = LogitsProcessorList([recorder])
        if do_sample and temperature != 1.0:
            processors.append(TemperatureLogitsWarper(float(temperature)))
        if constrained:
            processors.append(self._grammar_processor())  # one per call: it is stateful
        if do_sample and row_seeds is not None:
            processors.append(RowSampler(row_seeds))  # last: it sees the final distribution
        settings: dict[str, Any] = dict(
            max_new_tokens=int(max_new_tokens),
            do_sample=do_sample,
            num_beams=1,
            bos_token_id=self.tokenizer.bos_token_id,
            eos_token_id=self.eos_token_id,
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
            use_cache=True,
            repetition_penalty=1.0,
        )
        if do_sample:
            # The temperature is applied by our own warper, after the raw logits were recorded.
            settings.update(temperature=1.0, top_k=0, top_p=1.0)
        if self.static_cache and batch.past is None:
            if not pooled:
                settings.update(cache_implementation="static")
            if self.decode_compiler != "inductor":
                settings.update(compile_config=decode_compile_config(self.decode_compiler))
        config = GenerationConfig(**settings)
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices, enabled=seed is not None), torch.inference_mode():
            if seed is not None:
                torch.manual_seed(int(seed))
            # With a prefix cache, generate feeds only the tokens past the cache and derives
            # positions from the mask (pads skipped), like the left-padded uncached batch.
            out = model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                **cache_kwargs(model, past),
                generation_config=config,
                logits_processor=processors,
                streamer=streamer,
            )
        generated = out.sequences[:, input_ids.shape[1]:].cpu()
        token_lp = recorder.finish(generated)
        return [self._sample(generated[i].tolist(), token_lp[i]) for i in range(len(rows))]  # padding rows dropped

    def _sample(self, tokens: list[int], token_lp: torch.Tensor) -> Sample:
        eos = self.eos_token_id
        n = tokens.index(eos) + 1 if eos in tokens else len(tokens)
        body = tokens[: n - 1] if n and tokens[n - 1] == eos else tokens[:n]
        text = self.tokenizer.decode(body, skip_special_tokens=True)
        parsed = parse_moves(text, self.moves)
        return Sample(text=text, moves=list(parsed.moves), mode=parsed.mode,
                      logprob=float(token_lp[:n].sum()), n_tokens=n, token_ids=list(tokens[:n]))

    # ---- scoring ---------------------------------------------------------------------
    def completion_logprobs(
        self,
        prompts: list[str],
        completions: Sequence[str | Sequence[int]],
        *,
        add_eos: bool = True,
        batch_size: int = 16,
    ) -> list[float]:
        """Teacher-forced sum of log-probs of each completion followed by EOS, given the
        chat-rendered user prompt. Batched (left padding, positions from the mask).

        A completion is text (tokenized canonically) or a list of token ids such as
        `Sample.token_ids`; EOS is appended unless it is already there. A sample cut
        off by `max_new_tokens` has no EOS: score its ids with `add_eos=False`."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        results: list[float] = []
        self._sync_caches()
        for start in range(0, len(prompts), batch_size):
            chunk_p = prompts[start:start + batch_size]
            chunk_c = completions[start:start + batch_size]
            comp = [self._completion_ids(c, add_eos) for c in chunk_c]
            prompt_ids = [self._prompt_ids(p, len(c)) for p, c in zip(chunk_p, comp)]
            rows = [p + c for p, c in zip(prompt_ids, comp)]
            keep = max(len(c) for c in comp) + 1
            # Any shared prefix ends before the first completion token's prediction: it
            # may run up to the shortest PROMPT (rows are left-padded, so `keep` covers
            # every completion however long the others are).
            batch = self._batch(self.model, rows, keep=keep, limit=min(len(p) for p in prompt_ids) - 1)
            input_ids = batch.input_ids
            with torch.inference_mode():
                logits = self.model(
                    input_ids=input_ids[:, batch.prefix_len:], attention_mask=batch.mask,
                    position_ids=batch.position_ids(), **cache_kwargs(self.model, batch.past),
                    logits_to_keep=keep, use_cache=batch.past is not None,
                ).logits
            logits = logits[:, -keep:-1].float()  # predictions of the last keep-1 tokens
            targets = input_ids[:, -(keep - 1):]
            lp = torch.log_softmax(logits, dim=-1).gather(2, targets.unsqueeze(-1)).squeeze(-1)
            for i, c in enumerate(comp):
                results.append(float(lp[i, lp.shape[1] - len(c):].sum()))
        return results

