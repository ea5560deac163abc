"""One vLLM engine in this process (`VLLMEngine`), and the pure settings and checks around it.

`VLLMEngine` is the whole `VLLMActor` contract for ONE engine; `lactchain.models.vllm_engine`
(the module callers import) adds the choice between one engine and a data-parallel
`ReplicaPool` (`VLLMActor.load`, `load_generator`). `lactchain.models.vllm_replicas` runs a
`VLLMEngine` in each of its worker processes. See `lactchain.models.vllm_engine` for the
contract and the differences from the transformers path.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from lactchain.machine import resolve_dtype
from lactchain.models.prompt_tokens import PromptTokens
from lactchain.models.scoring import ScoringTokens
from lactchain.moves import DEFAULT_MOVES, LIST_MAX_MOVES, format_moves, move_list_grammar, parse_moves

ENGINES = ("hf", "vllm", "auto")
VLLM_MISSING = "--engine vllm needs the vllm extra: pip install -e '.[vllm]'"
# Ranks vLLM's punica LoRA kernels accept (max_lora_rank must be one of them).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# Head sizes vLLM-CPU's attention kernels take (vllm/v1/attention/backends/cpu_attn.py, 0.32).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
DEFAULT_BLOCK_SIZE = 32  # caches 160 of the rollout prompts' ~167 shared tokens (128, the CPU default, caches 128)


class EngineUnavailable(RuntimeError):
    """vLLM is not installed (or does not import) here."""


class ModelNotServable(ValueError):
    """A model this engine cannot run here (e.g. a head size vLLM-CPU has no kernel for)."""


class AdapterNotServable(ValueError):
    """A LoRA adapter this engine configuration cannot serve; says why in one line."""


def vllm_installed() -> bool:
    """True when the `vllm` package is on this Python's path (nothing imported)."""
    return importlib.util.find_spec("vllm") is not None


def require_vllm() -> None:
    """Raise EngineUnavailable (the one-line install hint) when vllm is not installed."""
    if not vllm_installed():
        raise EngineUnavailable(VLLM_MISSING)


def resolve_engine(engine: str, batch_job: bool = True, model: str | Path | None = None,
                   device: str | None = None) -> str:
    """'hf' or 'vllm' for an --engine value: auto picks vllm for batch jobs when it is
    installed (and, given `model`, can run that model here), hf otherwise (streaming,
    interactive use)."""
    engine = (engine or "hf").lower()
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    if engine == "auto":
        if not (batch_job and vllm_installed()):
            return "hf"
        if model is not None:
            try:
                check_model_spec(model, device)
            except (ModelNotServable, FileNotFoundError, OSError, ValueError):
                return "hf"
        return "vllm"
    return engine


def vllm_device(device: str | None) -> str:
    if device is not None:
        return str(device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_model_spec(model: str | Path, device: str | None = None) -> None:
    """ModelNotServable (one line) when vLLM cannot run this actor spec on `device`
    (the preset is prepared, offline, to read its config)."""
    from transformers import AutoConfig

    from lactchain.models.presets import resolve_actor

    folder = resolve_actor(str(model))
    check_model(AutoConfig.from_pretrained(str(folder), trust_remote_code=False), str(model), vllm_device(device))


# ---- configuration (pure) ----------------------------------------------------------------

@dataclass(frozen=True)
class EngineSettings:
    """How the vLLM engine is built. `data_parallel_size` > 1 means that many engine
    replicas (each `tensor_parallel_size` devices), prompts sharded across them: run on
    this machine by `vllm_replicas.ReplicaPool` (one worker process per replica).
    With `ray_address` the replicas are Ray actors on that cluster instead
    (`ray_replicas.RayReplicaPool`, any node with the resources free)."""

    dtype: str = "bfloat16"  # "bfloat16" | "float32" | "float16" | "auto" (`lactchain.machine.resolve_dtype`'s)
    block_size: int = DEFAULT_BLOCK_SIZE
    prefix_caching: bool = True
    enforce_eager: bool = True  # CPU: graph capture costs ~35 s of start-up for little gain at this size
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    distributed_executor_backend: Optional[str] = None  # None (vLLM decides) | "mp" | "ray" | "uni"
    max_model_len: Optional[int] = 2048
    max_num_seqs: int = 256
    gpu_memory_utilization: float = 0.85
    kv_cache_gb: float = 1.0  # the CPU's KV cache (VLLM_CPU_KVCACHE_SPACE); a GPU uses gpu_memory_utilization
    adapter_mode: str = "merge"  # "merge" (reload merged weights) | "lora" (LoRARequest per request)
    max_lora_rank: int = 16
    seed: int = 0
    cpu_threads: Optional[int] = None  # OMP threads bound for the CPU engine (None: all cores)
    multiprocessing: bool = False  # engine core in its own process (vLLM's default; orphaned by kill -9)
    ray_address: Optional[str] = None  # replicas as Ray actors on this cluster (ray_replicas.RayReplicaPool)

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1 or self.data_parallel_size < 1:
            raise ValueError("tensor_parallel_size and data_parallel_size must be >= 1")
        if self.distributed_executor_backend not in (None, "mp", "ray", "uni", "external_launcher"):
            raise ValueError(f"unknown distributed_executor_backend {self.distributed_executor_backend!r}")
        if self.adapter_mode not in ("merge", "lora"):
            raise ValueError(f"adapter_mode must be 'merge' or 'lora', got {self.adapter_mode!r}")
        if self.max_lora_rank not in VLLM_LORA_RANKS:
            raise ValueError(f"max_lora_rank must be one of {VLLM_LORA_RANKS}, got {self.max_lora_rank}")
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")


def engine_config(model: str | Path, settings: EngineSettings = EngineSettings(), *,
                  device: str = "cpu", replica: int = 0) -> dict[str, Any]:
    """Keyword arguments for `vllm.LLM(...)` for one engine replica. Pure: no vLLM import,
    no device needed (tests build tensor/data-parallel configurations on a CPU box)."""
    s = settings
    kwargs: dict[str, Any] = {
        "model": str(model),
        "tokenizer": str(model),
        "dtype": resolve_dtype(s.dtype),
        "block_size": s.block_size,
        "enable_prefix_caching": s.prefix_caching,
        "enforce_eager": s.enforce_eager,
        "tensor_parallel_size": s.tensor_parallel_size,
        "max_num_seqs": s.max_num_seqs,
        # Each replica seeds its own default generator; per-request seeds override it.
        "seed": s.seed + replica,
        # Sampling is decided per request: no generation_config.json defaults (top_k,
        # repetition penalties) sneak in, as on the HF path.
        "generation_config": "vllm",
        "trust_remote_code": False,
        "disable_log_stats": True,
        "logprobs_mode": "raw_logprobs",
        "max_logprobs": 1,
    }
    if s.max_model_len is not None:
        kwargs["max_model_len"] = s.max_model_len
    if s.distributed_executor_backend is not None:
        kwargs["distributed_executor_backend"] = s.distributed_executor_backend
    elif s.tensor_parallel_size > 1 and s.data_parallel_size > 1:
        kwargs["distributed_executor_backend"] = "ray"  # replicas of several devices each: Ray places them
    if device != "cpu":
        kwargs["gpu_memory_utilization"] = s.gpu_memory_utilization
    if s.adapter_mode == "lora":
        kwargs.update(enable_lora=True, max_lora_rank=s.max_lora_rank, max_loras=1)
    return kwargs


def engine_env(settings: EngineSettings = EngineSettings(), *, device: str = "cpu",
               cores: Optional[int] = None) -> dict[str, str]:
    """Environment variables the engine must be built under (set before vllm is imported)."""
    env: dict[str, str] = {}
    # The engine core runs in this process unless asked otherwise: then no engine process
    # can outlive the job, even after kill -9 (measured: with multiprocessing on, a killed
    # job's EngineCore and its worker stayed). Tensor-parallel workers are still separate
    # processes; they watch their parent (vLLM's death pipe) and exit with it.
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if settings.multiprocessing else "0"
    if device == "cpu":
        n = settings.cpu_threads or cores or os.cpu_count() or 1
        # Bind OMP threads to cores 0..n-1 (the default left the model one core: 1.5x slower).
        env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{n - 1}" if n > 1 else "0"
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, int(round(settings.kv_cache_gb))))
    return env


def even_ranges(n: int, parts: int) -> list[range]:
    """0..n-1 cut into `parts` contiguous ranges whose sizes differ by at most one (prompts
    over replicas, cores over replicas and tensor-parallel ranks)."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (i < extra)
        out.append(range(start, start + size))
        start += size
    return out


@dataclass(frozen=True)
class ParallelPlan:
    """Data-parallel rollouts: `replicas` engines of `tensor_parallel_size` devices each;
    a batch of prompts is split into contiguous shards, one per replica."""

    replicas: int
    tensor_parallel_size: int
    devices_per_replica: int
    total_devices: int
    backend: str
    configs: list[dict[str, Any]] = field(default_factory=list)

    def shards(self, n_prompts: int) -> list[range]:
        """Contiguous prompt index ranges, one per replica (sizes differ by at most one)."""
        return even_ranges(n_prompts, self.replicas)


def parallel_plan(model: str | Path, settings: EngineSettings, *, device: str = "cuda") -> ParallelPlan:
    """The engine configuration of every replica for tensor x data parallel rollouts."""
    tp, dp = settings.tensor_parallel_size, settings.data_parallel_size
    backend = settings.distributed_executor_backend or ("ray" if dp > 1 else ("mp" if tp > 1 else "uni"))
    configs = [engine_config(model, replace(settings, distributed_executor_backend=backend if tp > 1 else None),
                             device=device, replica=r) for r in range(dp)]
    return ParallelPlan(replicas=dp, tensor_parallel_size=tp, devices_per_replica=tp, total_devices=tp * dp,
                        backend=backend, configs=configs)


def head_size(hf_config: Any) -> int:
    """Attention head size of a transformers config."""
    size = getattr(hf_config, "head_dim", None)
    if not size:
        size = hf_config.hidden_size // hf_config.num_attention_heads
    return int(size)


def check_model(hf_config: Any, name: str, device: str = "cpu") -> None:
    """Raise ModelNotServable (one line) for a model vLLM cannot run on `device`."""
    size = head_size(hf_config)
    if device == "cpu" and size not in CPU_HEAD_SIZES:
        raise ModelNotServable(
            f"vLLM's CPU attention has no kernel for head size {size} ({name}); it takes "
            f"{', '.join(map(str, CPU_HEAD_SIZES))}: use --engine hf for this model")


def move_list_regex(allowed: Sequence[str] = DEFAULT_MOVES, max_moves: int = LIST_MAX_MOVES) -> str:
    """The move-list grammar as a regular expression (the same language as
    `move_list_grammar`), for engines that only take a regex."""
    import re

    alt = "|".join(re.escape(f"'{m}'") for m in allowed)
    return rf"\[({alt})(, ({alt})){{0,{max_moves - 1}}}\]"


# ---- adapters ----------------------------------------------------------------------------

def adapter_info(path: str | Path) -> dict[str, Any]:
    """adapter_config.json of a LoRA folder (FileNotFoundError when it is not one)."""
    path = Path(path).expanduser()
    cfg_path = path / "adapter_config.json"
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{path} is not a LoRA adapter folder (no adapter_config.json)")
    return json.loads(cfg_path.read_text())


def check_adapter(path: str | Path, settings: EngineSettings = EngineSettings()) -> dict[str, Any]:
    """Raise AdapterNotServable (one line) for an adapter this configuration cannot serve,
    before any engine or run exists. Merged adapters: any LoRA; per-request LoRA: rank
    up to `max_lora_rank`, no extra trained modules, no DoRA."""
    info = adapter_info(path)
    kind = str(info.get("peft_type", "LORA")).upper()
    if kind != "LORA":
        raise AdapterNotServable(f"adapter {path}: a {kind} adapter; vLLM serves LoRA adapters only")
    if settings.adapter_mode == "lora":
        rank = int(info.get("r", 0))
        ranks = [rank, *map(int, (info.get("rank_pattern") or {}).values())]
        if max(ranks) > settings.max_lora_rank:
            raise AdapterNotServable(
                f"adapter {path}: LoRA rank {max(ranks)} is above the engine's max_lora_rank {settings.max_lora_rank} "
                f"(raise it to one of {[r for r in VLLM_LORA_RANKS if r >= max(ranks)][:1] or VLLM_LORA_RANKS[-1:]}, "
                "or serve the adapter merged: adapter_mode='merge')")
        if info.get("use_dora"):
            raise AdapterNotServable(f"adapter {path}: DoRA adapters are not served by vLLM's LoRA kernels; "
                                     "use adapter_mode='merge'")
        if info.get("modules_to_save"):
            raise AdapterNotServable(f"adapter {path}: it trains whole modules ({info['modules_to_save']}), "
                                     "which vLLM's LoRA cannot serve; use adapter_mode='merge'")
    return info


def check_generate_args(prompts: Sequence[str], temperature: float, max_new_tokens: int, num_samples: int,
                        seeds: Sequence[int] | None) -> None:
    """ValueError (one line) for generate arguments no engine can honour."""
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")


def merge_adapter(base_folder: str | Path, adapter: str | Path, out_dir: str | Path) -> Path:
    """Base weights + LoRA merged with peft, saved (safetensors) to `out_dir` with the
    base's tokenizer and config files: a folder vLLM loads weights from."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from lactchain.models.quiet import quiet_checkpointing_deprecation

    out_dir = Path(out_dir)
    base = AutoModelForCausalLM.from_pretrained(str(base_folder), dtype=torch.float32)
    with quiet_checkpointing_deprecation():
        merged = PeftModel.from_pretrained(base, str(adapter), is_trainable=False).merge_and_unload()
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out_dir, safe_serialization=True)
    for f in Path(base_folder).iterdir():  # tokenizer files, chat template, generation config
        if f.is_file() and not f.name.endswith((".safetensors", ".bin")) and f.name != "config.json" \
                and not (out_dir / f.name).exists():
            shutil.copy2(f, out_dir / f.name)
    return out_dir


# ---- the engine ----------------------------------------------------------------------------

_LIVE: "weakref.WeakSet[VLLMEngine]" = weakref.WeakSet()


def _close_all() -> None:
    for actor in list(_LIVE):
        actor.close()


atexit.register(_close_all)


class VLLMEngine(ScoringTokens):
    """An actor whose `generate` runs on ONE vLLM engine (same contract as `Actor.generate`).
    `lactchain.models.vllm_engine.VLLMActor` is this class with `load` able to start replicas."""

    engine = "vllm"

    def __init__(self, folder: str | Path, *, name: str = "model", moves: Sequence[str] = DEFAULT_MOVES,
                 max_moves: int = LIST_MAX_MOVES, settings: EngineSettings = EngineSettings(), device: str = "cpu",
                 adapter: str | Path | None = None, progress: Optional[Callable[[str, Optional[float]], None]] = None,
                 replica: int = 0) -> None:
        """One engine. `replica`: its index in a ReplicaPool (seeds its default generator
        like `parallel_plan`'s configs); data-parallel settings go through `VLLMActor.load`."""
        from transformers import AutoConfig, AutoTokenizer

        require_vllm()
        from lactchain.models.padding import ensure_distinct_pad

        self.name = name
        self.folder = Path(folder)
        self.moves: tuple[str, ...] = tuple(moves)
        self.max_moves = int(max_moves)
        self.settings = settings
        self.device = device
        self.adapter: Optional[Path] = None
        self._lora: Any = None
        self._tmp = Path(tempfile.mkdtemp(prefix="lactchain-vllm-"))
        self._merged: dict[Path, Path] = {}  # adapter -> its merged copy (merge) or itself (lora)
        self._merges = 0
        self._closed = False
        self._lock = threading.Lock()
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        self._prompt_tokens = PromptTokens()  # each user text's chat prompt ids, tokenized once (as the Actor's)
        if self.tokenizer.eos_token_id is None:
            raise ValueError(f"the tokenizer of {name!r} has no EOS token, so completions could never end")
        ensure_distinct_pad(self.tokenizer)
        self._hf_config = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
        check_model(self._hf_config, name, device)
        if adapter is not None:
            check_adapter(adapter, settings)  # before the engine starts
        if settings.data_parallel_size > 1:
            raise ValueError(f"one VLLMActor is one engine; data_parallel_size={settings.data_parallel_size} runs "
                             "replicas through VLLMActor.load / load_generator (vllm_replicas.ReplicaPool)")
        for key, value in engine_env(settings, device=device).items():
            os.environ.setdefault(key, value)
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries --json output
        if progress is not None:
            progress(f"starting vLLM engine for {name}", None)
        t0 = time.perf_counter()
        try:
            from vllm import LLM
        except ImportError as exc:
            raise EngineUnavailable(f"{VLLM_MISSING} (import vllm failed: {exc})") from exc
        self.replica = int(replica)
        self.config = engine_config(folder, settings, device=device, replica=self.replica)
        self.llm = LLM(**self.config)
        self.startup_seconds = time.perf_counter() - t0
        _LIVE.add(self)
        self._grammar_cache: dict[tuple[tuple[str, ...], int], str] = {}
        if adapter is not None:
            self.load_adapter(adapter)
        if progress is not None:
            progress(f"{name} ready on vLLM ({device}, {self.startup_seconds:.0f} s)", 1.0)

    # ---- loading -------------------------------------------------------------------------
    @classmethod
    def load(cls, spec: str = "smollm2-135m", adapter: str | Path | None = None, *,
             moves: Sequence[str] = DEFAULT_MOVES, max_moves: int = LIST_MAX_MOVES, device: str | None = None,
             progress: Optional[Callable[[str, Optional[float]], None]] = None,
             settings: EngineSettings | None = None, **overrides: Any) -> Any:
        """A preset, local folder or cached hub id on a vLLM engine (`overrides`: EngineSettings fields).
        `data_parallel_size` > 1: a `ReplicaPool` of that many engines (same contract)."""
        from lactchain.models.presets import resolve_actor

        require_vllm()
        settings = replace(settings or EngineSettings(), **overrides)
        device = vllm_device(device)
        folder = resolve_actor(spec, progress)
        return cls._start(folder, name=spec, moves=moves, max_moves=max_moves, settings=settings, device=device,
                          adapter=adapter, progress=progress)

    @classmethod
    def _start(cls, folder: Path, **kw: Any) -> Any:
        """The engine(s) `load` returns for a resolved model folder: here, one engine
        (`VLLMActor` starts a `ReplicaPool` when data_parallel_size > 1)."""
        return cls(folder, **kw)

    def load_adapter(self, path: str | Path, *, merged: str | Path | None = None) -> None:
        """Serve a LoRA adapter folder from now on (replacing any other): merged into the
        weights and reloaded (adapter_mode 'merge'), or per request ('lora'). `merged`: the
        adapter already merged into this base elsewhere (a ReplicaPool merges once for all
        its replicas); it is read, never deleted, by this engine."""
        path = Path(path).expanduser()
        check_adapter(path, self.settings)
        if self.settings.adapter_mode == "lora":
            from vllm.lora.request import LoRARequest

            self._lora = LoRARequest(path.name or "adapter", len(self._merged) + 1, str(path))
            self._merged[path] = path
        else:
            folder = Path(merged) if merged is not None else self._merged.get(path)
            if folder is None:
                self._merges += 1
                folder = merge_adapter(self.folder, path, self._tmp / f"merged-{self._merges}")
            self._merged[path] = folder
            self._reload(folder)
            # One merged copy on disk at a time (a full model each: a long loop would fill the disk).
            for old in [a for a in self._merged if a != path]:
                copy = self._merged.pop(old)
                if copy.is_relative_to(self._tmp):  # ours; a pool's shared copy is the pool's to delete
                    shutil.rmtree(copy, ignore_errors=True)
        self.adapter = path

    def unload_adapter(self) -> None:
        """Back to the base weights."""
        if self.adapter is not None and self.settings.adapter_mode == "merge":
            self._reload(self.folder)
        self._lora = None
        self.adapter = None

    def _reload(self, folder: Path) -> None:
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(folder)})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Shut the engine down (its processes, if any, end) and drop merged copies. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        llm = getattr(self, "llm", None)
        self.llm = None
        if llm is not None:
            try:
                engine = getattr(llm, "llm_engine", None)
                core = getattr(engine, "engine_core", None)
                if core is not None and hasattr(core, "shutdown"):
                    core.shutdown()
            except Exception:
                pass
            del llm
        shutil.rmtree(self._tmp, ignore_errors=True)
        _LIVE.discard(self)

    def __enter__(self) -> "VLLMEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- prompts -------------------------------------------------------------------------
    def context_length(self) -> int:
        limit = self.config.get("max_model_len")
        own = getattr(self._hf_config, "max_position_embeddings", None) or 2048
        return min(limit, own) if limit else own

    def grammar(self) -> str:
        return move_list_grammar(self.moves, self.max_moves)

    def grammar_token_budget(self) -> int:
        longest = max(self.moves, key=lambda m: len(self._ids(m)))
        return len(self._ids(format_moves([longest] * self.max_moves))) + 1

    # ---- generation ----------------------------------------------------------------------
    def _params(self, *, constrained: bool, temperature: float, max_new_tokens: int, seed: Optional[int]) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        kwargs: dict[str, Any] = dict(
            n=1, max_tokens=int(max_new_tokens), logprobs=0, detokenize=False,
            stop_token_ids=[self.eos_token_id], skip_special_tokens=True, repetition_penalty=1.0,
        )
        if temperature > 0:
            kwargs.update(temperature=float(temperature), top_k=0, top_p=1.0, min_p=0.0)
            if seed is not None:
                kwargs["seed"] = int(seed) % (2**63 - 1)
        else:
            kwargs.update(temperature=0.0)
        if constrained:
            kwargs["structured_outputs"] = StructuredOutputsParams(grammar=self.grammar())
        return SamplingParams(**kwargs)

    def generate(self, prompts: list[str], *, constrained: bool = True, temperature: float = 0.0,
                 max_new_tokens: int = 48, seed: int | None = None, num_samples: int = 1,
                 seeds: Sequence[int] | None = None, row_offset: int = 0) -> list[Any]:
        """`num_samples` completions per user prompt, grouped per prompt, in one engine call.
        Every completion is its own request with its own seed: `seeds` (one per prompt) as on
        the HF path (prompt seed * 1009 + sample index), else derived from `seed` and its row.
        The same seeds give the same samples whatever else is in the batch. `row_offset`: the
        first prompt's row in a larger batch (a replica's shard), so a shard's seeds are the
        ones one engine would give those rows."""
        from vllm.inputs import TokensPrompt

        from lactchain.models.actor import Sample

        check_generate_args(prompts, temperature, max_new_tokens, num_samples, seeds)
        if not prompts:
            return []
        rows = [self._prompt_ids(p, max_new_tokens) for p in prompts]
        requests, params = [], []
        for i, ids in enumerate(rows):
            for j in range(num_samples):
                if seeds is not None:
                    row_seed: Optional[int] = int(seeds[i]) * 1_009 + j
                elif seed is not None:
                    row_seed = int(seed) * 1_000_003 + (int(row_offset) + i) * num_samples + j
                else:
                    row_seed = None
                requests.append(TokensPrompt(prompt_token_ids=ids))
                params.append(self._params(constrained=constrained, temperature=temperature,
                                           max_new_tokens=max_new_tokens, seed=row_seed))
        outputs = self._engine_call(requests, params)
        samples = []
        for out in outputs:
            comp = out.outputs[0]
            tokens = [int(t) for t in comp.token_ids]
            eos = self.eos_token_id
            n = tokens.index(eos) + 1 if eos in tokens else len(tokens)
            tokens = tokens[:n]
            body = tokens[:-1] if tokens and tokens[-1] == eos else tokens
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            parsed = parse_moves(text, self.moves)
            lp = 0.0
            for pos, tok in enumerate(tokens):
                entry = comp.logprobs[pos] if comp.logprobs is not None and pos < len(comp.logprobs) else None
                if entry and tok in entry:
                    lp += float(entry[tok].logprob)
            samples.append(Sample(text=text, moves=list(parsed.moves), mode=parsed.mode, logprob=lp,
                                  n_tokens=len(tokens), token_ids=tokens))
        return samples

    def stream(self, prompt: str, on_text: Callable[[str], None], *, constrained: bool = True,
               temperature: float = 0.0, max_new_tokens: int = 48, seed: int | None = None) -> Any:
        """One completion, its text handed to `on_text` when it is done (vLLM's offline
        engine answers whole requests; the Lab's token streaming stays on the HF engine)."""
        sample = self.generate([prompt], constrained=constrained, temperature=temperature,
                               max_new_tokens=max_new_tokens, seed=seed)[0]
        if sample.text:
            on_text(sample.text)
        return sample

    # ---- scoring -------------------------------------------------------------------------
    def _engine_call(self, requests: list[Any], params: Any) -> list[Any]:
        """One engine call under the current adapter (per-request LoRA; none when merged)."""
        if self.llm is None:
            raise RuntimeError("this vLLM engine was closed")
        return self.llm.generate(requests, params, use_tqdm=False, lora_request=self._lora)

    def completion_logprobs(self, prompts: list[str], completions: Sequence[str | Sequence[int]], *,
                            add_eos: bool = True, batch_size: int = 16) -> list[float]:
        """`Actor.completion_logprobs` on vLLM: the teacher-forced sum of log-probs of each
        completion (text or token ids; EOS appended unless there or `add_eos=False`) after
        the chat-rendered prompt, read from vLLM's prompt logprobs of prompt + completion.
        They are raw (the engine's logprobs_mode), under the current adapter. `batch_size`
        is accepted for the contract; vLLM schedules its own batches."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        comps = [self._completion_ids(c, add_eos) for c in completions]
        # +1: vLLM wants room for the one token it generates after the scored prompt.
        heads = [self._prompt_ids(p, len(c) + 1) for p, c in zip(prompts, comps)]
        if not comps:
            return []
        # Cached positions would come back as uninitialised memory, not None (measured,
        # vLLM 0.32): never read the prefix cache here (vLLM's default, made explicit).
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0, detokenize=False,
                                skip_reading_prefix_cache=True)
        outputs = self._engine_call([TokensPrompt(prompt_token_ids=h + c) for h, c in zip(heads, comps)], params)
        # prompt_logprobs[i] is {token i: Logprob} given tokens < i (None at 0).
        return [float(sum(out.prompt_logprobs[len(h) + j][t].logprob for j, t in enumerate(c)))
                for out, h, c in zip(outputs, heads, comps)]

    def choice_logprobs(self, prompts: list[str], options: Sequence[str], batch_size: int = 16) -> list[list[float]]:
        """`Actor.choice_logprobs` on vLLM: log p(option's first token | chat prompt) for each
        prompt and option, one request per prompt (vLLM's `logprob_token_ids` on the first
        generated position: raw logprobs, the prompt prefix cache used)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        firsts = self._option_first_tokens(options)
        rows = [self._prompt_ids(p, 1) for p in prompts]
        if not rows:
            return []
        params = SamplingParams(max_tokens=1, temperature=0.0, detokenize=False, logprob_token_ids=firsts)
        outputs = self._engine_call([TokensPrompt(prompt_token_ids=r) for r in rows], params)
        return [[float(out.outputs[0].logprobs[0][t].logprob) for t in firsts] for out in outputs]

    def describe(self) -> dict[str, Any]:
        """What ran: recorded in run params and bench JSON."""
        return {"engine": "vllm", "device": self.device, "adapter": str(self.adapter) if self.adapter else None,
                **{k: v for k, v in asdict(self.settings).items() if v is not None}}
