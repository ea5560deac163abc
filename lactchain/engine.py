"""Which engine generates, at which dtype, over how many devices (`EngineConfig`, a config
part every generating job and the loop embed), and the one loader of a generating actor
(`load_generator_for`): a transformers `Actor` or a vLLM engine serving the adapter.
Library level, so the pipeline loads its actors the way the jobs do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from lactchain.config import Config, ConfigError, option
from lactchain.envs.catalog import actor_moves
from lactchain.machine import device_type_here, resolve_dtype
from lactchain.moves import GRAMMAR_SPELLINGS

ENGINE_HELP = ("Generation engine: hf (transformers, the default for now), vllm (needs the vllm extra: "
               "pip install -e '.\\[vllm]'), or auto (vllm when installed, else hf).")


@dataclass
class EngineConfig(Config):
    """Which engine generates, at which dtype, over how many devices."""

    HELP_PANEL = "Generation engine"

    engine: str = option("hf", ENGINE_HELP, suggest=("hf", "vllm", "auto"), check="engine", form="Engine")
    dtype: str | None = option("auto", "Generation dtype: float32 (a CPU's weights as loaded), bfloat16, float16, "
                                       "or auto: bfloat16 where this machine does bf16 natively (a CUDA GPU, a CPU "
                                       "with AMX or AVX512-bf16), else float32 -- as the loop generates, so a "
                                       "run here gives the loop's answers.")
    tensor_parallel_size: int = option(1, "vllm only: GPUs one engine spreads the model over.", min=1, max=64)
    data_parallel_size: int = option(1, "vllm only: engine replicas, prompts sharded across them; each replica "
                                        "takes --tensor-parallel-size devices.", min=1, max=64)
    static_cache: str = option("auto", "hf only: decode with a static KV cache, which transformers compiles into CUDA "
                                       "graphs on a GPU: on, off, auto (where it pays on this device type: off "
                                       "everywhere until a loop run shows it pays; see docs/performance.md), or "
                                       "cudagraphs (on, its decode step captured in CUDA graphs by torch's "
                                       "cudagraphs backend instead of compiled by inductor: no code generation "
                                       "per shape; a CUDA GPU only).",
                               choices=("auto", "on", "off", "cudagraphs"))
    grammar_spelling: str = option("any", "hf only: which token spellings of a move list constrained decoding "
                                          "admits: any (every tokenization of its text, as xgrammar does) or "
                                          "canonical (only the tokenizer's own, the one the trainers score: a policy "
                                          "trained on grammar-masked log-probs cannot drift to moves spelled in "
                                          "pieces; up to 100,000 move lists).", choices=GRAMMAR_SPELLINGS)
    ray_address: str | None = option(None, "vllm only: run the engine replicas as Ray actors on this Ray cluster: auto "
                                           "(the one `ray start --head` started here), HOST:PORT of its head node, "
                                           "or ray://HOST:PORT. Default: $RAY_ADDRESS when set, else no Ray. "
                                           "Needs the ray extra.")

    def check(self) -> None:
        from lactchain.models.vllm_single import ENGINES

        self.engine = str(self.engine).lower()
        if self.engine not in ENGINES:
            self.refuse("engine", f"unknown engine {self.engine!r}; use one of {', '.join(ENGINES)}")
        try:
            self.dtype = resolve_dtype(self.dtype)  # auto: recorded as the dtype that ran
        except ValueError as exc:
            self.refuse("dtype", str(exc))
        if self.engine == "vllm" and self.static_cache != "auto":
            raise ConfigError(f"--static-cache {self.static_cache} is the transformers engine's decode cache: use it "
                              "with --engine hf (vLLM manages its own)")
        if self.static_cache == "cudagraphs" and device_type_here() != "cuda":
            self.refuse("static_cache", "cudagraphs captures CUDA graphs and this machine has no CUDA GPU: use on, "
                        "off or auto")
        if self.engine == "vllm" and self.grammar_spelling != "any":
            raise ConfigError(f"--grammar-spelling {self.grammar_spelling} is the transformers engine's grammar: use "
                              "it with --engine hf (vLLM's structured outputs admit every spelling)")
        if self.engine == "hf":  # auto may still pick vllm; hf never spreads or replicates
            if self.data_parallel_size != 1:
                raise ConfigError(f"--data-parallel-size {self.data_parallel_size} runs vLLM engine replicas: use it "
                                  "with --engine vllm, not hf")
            if self.tensor_parallel_size != 1:
                raise ConfigError(f"--tensor-parallel-size {self.tensor_parallel_size} spreads one vLLM engine over "
                                  "devices: use it with --engine vllm, not hf")
            if self.ray_address:
                raise ConfigError(f"--ray-address {self.ray_address} runs vLLM engine replicas on a Ray cluster: use "
                                  "it with --engine vllm, not hf")
        self.check_ray()

    def check_ray(self) -> None:
        """--ray-address (else $RAY_ADDRESS, for the vllm engine) checked and recorded:
        malformed, unreachable or Ray missing is a one-line ConfigError before any run."""
        import os

        if self.ray_address is None and not (self.engine == "vllm" and os.environ.get("RAY_ADDRESS", "").strip()):
            return
        from lactchain.models.ray_replicas import RayUnavailable, check_address

        try:
            self.ray_address = check_address(self.ray_address)
        except RayUnavailable as exc:
            raise ConfigError(str(exc)) from None

    def record_params(self) -> dict[str, Any]:
        return self.params()

    def params(self) -> dict[str, Any]:
        """What a run records: nothing for the hf engine at the weights' dtype (what runs
        recorded before `auto` was the default: their params read as they were)."""
        if self.engine == "hf" and self.dtype is None and (self.static_cache, self.grammar_spelling) == ("auto", "any"):
            return {}
        out: dict[str, Any] = {"engine": self.engine, "dtype": self.dtype}
        if self.static_cache != "auto":
            out["static_cache"] = self.static_cache
        if self.grammar_spelling != "any":
            out["grammar_spelling"] = self.grammar_spelling
        if self.tensor_parallel_size != 1:
            out["tensor_parallel_size"] = self.tensor_parallel_size
        if self.data_parallel_size != 1:
            out["data_parallel_size"] = self.data_parallel_size
        if self.ray_address:
            out["ray_address"] = self.ray_address
        return out

    def load_kw(self) -> dict[str, Any]:
        vllm = self.engine == "vllm"
        return {"engine": self.engine, "dtype": self.dtype,
                "static_cache": None if vllm or self.static_cache == "auto" else self.static_cache != "off",
                "decode_compiler": "cudagraphs" if not vllm and self.static_cache == "cudagraphs" else None,
                "grammar_spelling": None if vllm or self.grammar_spelling == "any" else self.grammar_spelling,
                "tensor_parallel_size": self.tensor_parallel_size if vllm else None,
                "data_parallel_size": self.data_parallel_size if vllm else None,
                "ray_address": self.ray_address if vllm else None}


def resolve_auto(settings: EngineConfig, actor: str) -> EngineConfig:
    """The settings with `--engine auto` decided, for this actor on this machine: vllm where
    it is installed and can run the actor, else hf. The one place auto is resolved (the
    jobs' checks and the loop's config both call it), so what a run records is what ran."""
    if settings.engine != "auto":
        return settings
    from lactchain.models.vllm_single import resolve_engine

    which = resolve_engine("auto", model=actor)
    if which == "vllm" and (settings.static_cache != "auto" or settings.grammar_spelling != "any"):
        flag = (f"--static-cache {settings.static_cache}" if settings.static_cache != "auto"
                else f"--grammar-spelling {settings.grammar_spelling}")
        raise ConfigError(f"{flag} is the transformers engine's; --engine auto chose vllm here: use --engine hf "
                          "with it")
    if which == "hf" and (settings.data_parallel_size != 1 or settings.ray_address):
        raise ConfigError(f"--data-parallel-size {settings.data_parallel_size} / --ray-address need the vllm engine; "
                          "--engine auto chose hf here")
    return settings.replace(engine=which)


def load_generator_for(actor: str, adapter_path: str | None, env: str, settings: EngineConfig | None = None, *,
                       progress: Callable[[str, float | None], None] | None = None,
                       extra: dict[str, Any] | None = None) -> Any:
    """A transformers `Actor` (engine hf, generating at `settings.dtype`) or a `VLLMActor`
    (engine vllm, a pool of replicas when data_parallel_size > 1) for `env`'s moves.
    `extra`: more vLLM engine settings (a benchmark's prefix_caching, adapter_mode, ...)."""
    from lactchain.models.vllm_engine import load_generator

    settings = settings or EngineConfig(dtype=None)  # None: the weights' dtype (a trainer's, a bench's baseline)
    kw = {k: v for k, v in settings.load_kw().items() if v is not None}
    engine = kw.pop("engine", "hf")
    if engine != "vllm":
        kw = {"inference_dtype": kw.get("dtype"), "static_cache": kw.get("static_cache"),
              "grammar_spelling": kw.get("grammar_spelling"), "decode_compiler": kw.get("decode_compiler")}
        kw = {k: v for k, v in kw.items() if v is not None}
    else:
        kw.update(extra or {})
    kw.update(actor_moves(env))
    return load_generator(actor, engine, adapter=adapter_path, progress=progress, **kw)


GENERATION_TAG = "generation"  # how a transformers actor generates on this device (decided at load)


def record_generation(registry: Any, run_id: str, model: Any) -> None:
    """Tag the run with what the transformers engine decided at load: the device, the
    prefix cache and the static cache (each on where it pays on this device type), the
    grammar engine and the dtype."""
    if not hasattr(model, "grammar_engine"):
        return  # vLLM: its own prefix caching and structured outputs
    import json

    registry.set_tag(run_id, GENERATION_TAG, json.dumps({
        "device": str(model.device), "prefix_cache": bool(model.prefix_cache), "grammar": model.grammar_engine,
        "static_cache": bool(getattr(model, "static_cache", False)),
        **({"decode_compiler": model.decode_compiler} if getattr(model, "static_cache", False) else {}),
        "grammar_spelling": getattr(model, "grammar_spelling", "any"),
        "dtype": str(model.inference_dtype or next(model.model.parameters()).dtype).removeprefix("torch."),
    }))


REPLICAS_TAG = "replicas"  # on a run whose engine is a pool: one line per replica (node, pid), for runs show / Jobs


def record_replicas(registry: Any, run_id: str, model: Any) -> None:
    """Tag the run with where its engine replicas run (a `ReplicaPool` or `RayReplicaPool`):
    `runs show` and the console's Jobs screen list them while it runs."""
    described = model.describe() if hasattr(model, "describe") and hasattr(model, "replicas") else None
    if not described or not described.get("replicas"):
        return
    import json

    rows = [{k: r[k] for k in ("replica", "node", "pid", "cores", "gpus") if r.get(k) is not None}
            for r in described["replicas"]]
    if described.get("ray"):
        rows = [{**row, "namespace": described["ray"]["namespace"]} for row in rows]
    registry.set_tag(run_id, REPLICAS_TAG, json.dumps(rows))
