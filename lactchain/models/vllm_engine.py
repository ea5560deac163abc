"""vLLM as the rollout engine: `VLLMActor.generate` keeps `Actor.generate`'s contract.

The same user prompts go in (rendered with the model's chat template by the same
Hugging Face tokenizer, tokenized with `add_special_tokens=False` and handed to
vLLM as token ids, so both engines see the very same prompt tokens); the same
move-list grammar constrains the answer (`move_list_grammar`, through vLLM's
structured outputs, xgrammar backend); the same `Sample`s come out (text decoded
by the HF tokenizer from the generated ids, `parse_moves`, EOS counted in
`n_tokens` / `token_ids`).

Differences from the transformers path, by design:
- `Sample.logprob` is vLLM's log-prob of each sampled token ("raw_logprobs": before
  temperature); under a grammar vLLM applies the token mask before it, so a
  constrained sample's log-prob is under the masked (renormalised) distribution.
  Re-score with `completion_logprobs` (on either engine) where the raw model's
  number matters.
- Sampling uses vLLM's own per-request generator: a seeded call repeats exactly
  on vLLM, but draws different samples than the HF engine for the same seed.
  Greedy (temperature 0) answers agree with HF at the same dtype up to float
  rounding (tests/test_vllm_engine.py reports any difference).

Scoring keeps the Actor's contracts too, under the current adapter, with raw
(untempered, unmasked) log-probs: `completion_logprobs` is the teacher-forced sum
read from vLLM's prompt logprobs of prompt + completion sent as one prompt (such
requests skip the prefix cache, so every position is computed); `choice_logprobs`
reads the options' first tokens at the first generated position (`logprob_token_ids`,
prefix cache used). At float32 both agree with the HF actor's within 5e-5
(tests/test_vllm_scoring.py).

Adapters: a train-actor LoRA folder is merged into the base weights with peft
(saved once per adapter under a temporary folder) and loaded into the running
engine with `collective_rpc("reload_weights")` (about 1 s), then the prefix cache
is reset. `adapter_mode="lora"` serves it per request with `LoRARequest` instead
(3x slower on the CPU, measured; the only way to mix adapters in one batch).

Data parallel: `data_parallel_size` > 1 (`VLLMActor.load`, `load_generator`) gives a
`lactchain.models.vllm_replicas.ReplicaPool`: that many engines, each a `VLLMActor` in its
own spawned worker process pinned to its own GPUs (or CPU cores), prompts sharded across
them with the seeds a single engine would use, so sharding changes no sample (exactly at
float32; at bfloat16 a replica's other thread count or batch can round differently). Its workers end with the job,
kill -9 included (a death signal and their pipe's EOF).

Lifecycle: the engine core runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`
unless the environment says otherwise; with one device, the uniprocess executor): no
engine process exists that could outlive the job, even after kill -9. Tensor-parallel
workers are child processes that watch their parent (vLLM's death pipe) and exit
with it. `close()` also runs at exit and from the job's cancel hook. With
multiprocessing turned on, SIGTERM to the job's group (`runs kill`) ends everything
(measured), but a kill -9 of the job orphans vLLM's EngineCore (measured; vLLM 0.32).

`engine_config` / `engine_env` are pure functions (no vLLM import): what the
engine is built with, testable without a GPU or vLLM.

Modules: one engine and its settings live in `lactchain.models.vllm_single` (`VLLMEngine`),
the replicas in `lactchain.models.vllm_replicas` (which runs a `VLLMEngine` per worker);
this module, above both, chooses between them and re-exports the single engine's names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from lactchain.models.vllm_replicas import ReplicaPool
from lactchain.models.vllm_single import (  # noqa: F401  (re-exported: callers import them from here)
    CPU_HEAD_SIZES,
    DEFAULT_BLOCK_SIZE,
    ENGINES,
    VLLM_LORA_RANKS,
    VLLM_MISSING,
    AdapterNotServable,
    EngineSettings,
    EngineUnavailable,
    ModelNotServable,
    ParallelPlan,
    VLLMEngine,
    adapter_info,
    check_adapter,
    check_generate_args,
    check_model,
    check_model_spec,
    engine_config,
    engine_env,
    even_ranges,
    head_size,
    merge_adapter,
    move_list_regex,
    parallel_plan,
    require_vllm,
    resolve_engine,
    vllm_installed,
)


class VLLMActor(VLLMEngine):
    """An actor whose `generate` runs on vLLM (same contract as `Actor.generate`): one engine
    (`VLLMEngine`), or from `load` with `data_parallel_size` > 1 a `ReplicaPool` of them."""

    @classmethod
    def _start(cls, folder: Path, **kw: Any) -> Any:
        if kw["settings"].ray_address:
            from lactchain.models.ray_replicas import RayReplicaPool

            return RayReplicaPool(folder, ray_address=kw["settings"].ray_address, **kw)
        if kw["settings"].data_parallel_size > 1:
            return ReplicaPool(folder, **kw)
        return super()._start(folder, **kw)


def load_generator(actor: str, engine: str = "hf", adapter: str | Path | None = None, *, batch_job: bool = True,
                   progress: Optional[Callable[[str, Optional[float]], None]] = None, **kw: Any) -> Any:
    """An `Actor` (engine 'hf') or a `VLLMActor` (engine 'vllm'); 'auto' takes vLLM for batch
    jobs when it is installed. `kw`: Actor.load's keyword arguments (moves, max_moves,
    device, prefix_cache, inference_dtype, static_cache, grammar_spelling, decode_compiler) and, for vLLM,
    EngineSettings fields."""
    which = resolve_engine(engine, batch_job, model=actor if engine == "auto" else None, device=kw.get("device"))
    if which == "vllm":
        require_vllm()
        hf_only = {"prefix_cache", "inference_dtype", "static_cache", "grammar_spelling", "decode_compiler"}
        overrides = {k: v for k, v in kw.items() if k not in hf_only | {"moves", "max_moves", "device", "settings"}}
        dtype = kw.get("inference_dtype")
        if dtype is not None and "dtype" not in overrides:
            overrides["dtype"] = str(dtype).removeprefix("torch.")
        if kw.get("prefix_cache") is False:
            overrides["prefix_caching"] = False
        return VLLMActor.load(actor, adapter=adapter, progress=progress, settings=kw.get("settings"),
                              **{k: kw[k] for k in ("moves", "max_moves", "device") if k in kw}, **overrides)
    from lactchain.models.actor import Actor

    hf_kw = {k: v for k, v in kw.items()
             if k in ("moves", "max_moves", "device", "prefix_cache", "inference_dtype", "static_cache",
                      "grammar_spelling", "decode_compiler")}
    return Actor.load(actor, adapter=adapter, progress=progress, **hf_kw)
