"""`bench rollout`: env-steps/s of the actor's rollouts on this machine, side by side in
one run (the job: `lactchain.jobs.bench_rollout`).

With the hf engine alone: (a) batched lock-step rollouts, (b) one prompt at a time (how
the original did it), (c) the model's raw batched generate at that batch size; then (a)
again without the shared-prefix KV cache and, with bf16, with a bfloat16 copy of the
weights. speedup = a / b; efficiency = a / c (how close rollouts come to the generate
ceiling); prefix_cache_speedup = a / a-uncached; bf16_speedup = a-bf16 / a. The
*_identical / *_agreement keys compare the completions (token ids) step by step.

With vllm or an adapter: one row per engine and setting (fp32/bf16, prefix cache on/off,
with/without the adapter) on the same rollouts, and the engines' greedy agreement at fp32.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from lactchain.bench.common import Recording, agreement
from lactchain.bench.rollout_config import RolloutBenchConfig
from lactchain.envs import GridWorldEnv

Loader = Callable[..., Any]  # (engine=, dtype=, extra=) -> an actor or a vLLM engine
Stage = Callable[[str], None]  # told before each timed mode (progress, cancellation)


def rollout_rate(model: Any, cfg: RolloutBenchConfig, envs: int, steps: int) -> dict[str, Any]:
    """Run `envs` x `steps` lock-stepped env-steps; the rollout report plus every completion's ids."""
    from lactchain.loop.rollout import RolloutConfig, run_rollouts

    run = RolloutConfig(episodes=envs * steps, n_envs=envs, constrained=cfg.constrained, temperature=cfg.temperature,
                        start="random", seed=cfg.seed, max_env_steps=envs * steps)
    recording = Recording(model)
    result = run_rollouts(recording, run).as_dict()
    result["token_ids"] = recording.token_ids
    return result


def generate_rate(model: Any, cfg: RolloutBenchConfig, envs: int, steps: int) -> float:
    """Env-steps/s of the bare batched generate on one grid prompt repeated `envs` times."""
    from lactchain.prompts import PromptSpec

    env = GridWorldEnv(moves=model.moves)
    prompts = [PromptSpec(moves=model.moves).render(env.describe())] * envs
    t0 = time.perf_counter()
    for k in range(steps):
        model.generate(prompts, constrained=cfg.constrained, temperature=cfg.temperature, seed=cfg.seed + k)
    return envs * steps / (time.perf_counter() - t0)


def same(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, float]:
    """(identical?, fraction of env-steps whose completions match token for token)."""
    return a["token_ids"] == b["token_ids"], agreement(a["token_ids"], b["token_ids"])


def hf_report(cfg: RolloutBenchConfig, load: Loader, stage: Stage) -> dict[str, Any]:
    """The hf engine's report: batched, sequential, ceiling, uncached and bf16 rates."""
    import torch

    model = load(engine="hf")
    # Warm-up, one lock-step of each timed variant at full size: grammar tables, caches, and
    # a GPU's first batch of a new size pays allocator growth and kernel choice, which would
    # go to whichever variant is timed first (on an H200, with the cache timed first in
    # each, this bench put the prefix cache at 0.68x and `bench device` at 1.62x).
    for cache in (False, True):
        model.prefix_cache = cache
        rollout_rate(model, cfg, cfg.envs, 1)
    # (a) is timed with the cache whatever this device's default is (left on above)
    stage("(a) batched lock-step rollouts")
    batched = rollout_rate(model, cfg, cfg.envs, cfg.steps)
    stage("(b) one prompt at a time")
    sequential = rollout_rate(model, cfg, 1, max(cfg.steps, 2))
    stage("(c) raw batched generate")
    ceiling = generate_rate(model, cfg, cfg.envs, cfg.steps)
    prefix_computations = model.prefix_computations
    stage("(a) without the prefix cache")
    model.prefix_cache = False
    try:
        uncached = rollout_rate(model, cfg, cfg.envs, cfg.steps)
    finally:
        model.prefix_cache = True
    a, b, u = batched["env_steps_per_s"], sequential["env_steps_per_s"], uncached["env_steps_per_s"]
    result = {
        "actor": cfg.actor, "envs": cfg.envs, "steps": cfg.steps, "constrained": cfg.constrained,
        "batched_env_steps_per_s": a, "sequential_env_steps_per_s": b, "generate_env_steps_per_s": ceiling,
        "speedup": a / b if b else None, "efficiency": a / ceiling if ceiling else None,
        "batched_parse_failure_rate": batched["parse_failure_rate"], "uncached_env_steps_per_s": u,
        "prefix_cache_speedup": a / u if u else None, "prefix_cache_identical": same(batched, uncached)[0],
        "prefix_computations": prefix_computations,
    }
    if cfg.bf16:
        stage("(a) with bfloat16 weights")
        before = model.inference_dtype
        model.inference_dtype = torch.bfloat16
        try:
            rollout_rate(model, cfg, cfg.envs, 1)  # builds the bf16 copy and warms it at full size
            half = rollout_rate(model, cfg, cfg.envs, cfg.steps)
        finally:
            model.inference_dtype = before
        h = half["env_steps_per_s"]
        identical, share = same(batched, half)
        result.update({"bf16_env_steps_per_s": h, "bf16_speedup": h / a if a else None,
                       "bf16_identical": identical, "bf16_agreement": share})
    return result


def random_adapter(actor: str, out_dir: Path) -> str:
    """A rank-8 LoRA on the actor's projection layers with random B (so it changes the
    model): for timing an engine with an adapter loaded."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lactchain.models.presets import resolve_actor
    from lactchain.models.quiet import quiet_checkpointing_deprecation
    from lactchain.train.actor import lora_targets

    base = AutoModelForCausalLM.from_pretrained(str(resolve_actor(actor)), dtype=torch.float32)
    with quiet_checkpointing_deprecation():
        model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=lora_targets(base),
                                                task_type="CAUSAL_LM"))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.01)
    model.save_pretrained(str(out_dir))
    return str(out_dir)


def _row(engine: str, dtype: str, prefix_cache: bool, adapter: str | None, result: dict[str, Any],
         **extra: Any) -> dict[str, Any]:
    return {"engine": engine, "dtype": dtype, "prefix_cache": prefix_cache, "adapter": adapter,
            "env_steps_per_s": result["env_steps_per_s"], "parse_failure_rate": result["parse_failure_rate"],
            "seconds": result["seconds"], **extra}


def side_by_side(cfg: RolloutBenchConfig, load: Loader, stage: Stage, adapter_path: str | None) -> dict[str, Any]:
    """Every engine and setting on the same rollouts (same start states and seeds): rows of
    env-steps/s, plus greedy agreement of the engines at the same dtype (fp32).
    `adapter_path`: the resolved --adapter ('random': built here)."""
    import torch

    names = cfg.chosen
    tmp = tempfile.TemporaryDirectory(prefix="lactchain-bench-")
    if adapter_path == "random":
        stage("building a random LoRA adapter")
        adapter_path = random_adapter(cfg.actor, Path(tmp.name) / "adapter")
    label = cfg.adapter
    dtypes = ["float32", "bfloat16"] if cfg.bf16 else ["float32"]
    rows: list[dict[str, Any]] = []
    tokens: dict[str, list[list[int]]] = {}

    def measure(model: Any, what: str) -> dict[str, Any]:
        generate_rate(model, cfg, min(cfg.envs, 2), 1)  # warm-up
        stage(what)
        return rollout_rate(model, cfg, cfg.envs, cfg.steps)

    try:
        if "hf" in names:
            model = load(engine="hf")
            for dtype in dtypes:
                model.inference_dtype = None if dtype == "float32" else torch.bfloat16
                for cache in (True, False):
                    if not cache and dtype != dtypes[-1]:
                        continue  # prefix cache off: timed at the fastest dtype only
                    model.prefix_cache = cache
                    res = measure(model, f"hf {dtype} prefix cache {'on' if cache else 'off'}")
                    rows.append(_row("hf", dtype, cache, None, res))
                    if dtype == "float32" and cache:
                        tokens["hf"] = res["token_ids"]
                model.prefix_cache = True
            if adapter_path:
                model.load_adapter(adapter_path)
                rows.append(_row("hf", dtypes[-1], True, label, measure(model, f"hf {dtypes[-1]} + adapter")))
            del model
        if "vllm" in names:
            for dtype in dtypes:
                for cache in (True, False):
                    if not cache and dtype != dtypes[-1]:
                        continue
                    t0 = time.perf_counter()
                    model = load(engine="vllm", dtype=dtype, extra={"prefix_caching": cache})
                    startup = time.perf_counter() - t0
                    try:
                        res = measure(model, f"vllm {dtype} prefix cache {'on' if cache else 'off'}")
                        rows.append(_row("vllm", dtype, cache, None, res, startup_seconds=startup))
                        if dtype == "float32" and cache:
                            tokens["vllm"] = res["token_ids"]
                        if adapter_path and cache and dtype == dtypes[-1]:
                            t0 = time.perf_counter()
                            model.load_adapter(adapter_path)
                            load_s = time.perf_counter() - t0
                            rows.append(_row("vllm", dtype, True, label, measure(model, f"vllm {dtype} + merged adapter"),
                                             adapter_mode="merge", adapter_load_seconds=load_s))
                    finally:
                        model.close()
            if adapter_path:
                model = load(engine="vllm", dtype=dtypes[-1], extra={"adapter_mode": "lora", "max_lora_rank": 16})
                try:
                    model.load_adapter(adapter_path)
                    rows.append(_row("vllm", dtypes[-1], True, label,
                                     measure(model, f"vllm {dtypes[-1]} + LoRARequest adapter"), adapter_mode="lora"))
                finally:
                    model.close()
    finally:
        tmp.cleanup()
    return _summary(cfg, rows, tokens, bool(adapter_path))


def _summary(cfg: RolloutBenchConfig, rows: list[dict[str, Any]], tokens: dict[str, list[list[int]]],
             with_adapter: bool) -> dict[str, Any]:
    names = cfg.chosen

    def best_of(engine: str, adapted: bool) -> float | None:
        return max((r["env_steps_per_s"] for r in rows if r["engine"] == engine and (r["adapter"] is not None) == adapted),
                   default=None)

    best = {e: best_of(e, False) for e in names}
    best_adapter = {e: best_of(e, True) for e in names}
    result: dict[str, Any] = {"actor": cfg.actor, "envs": cfg.envs, "steps": cfg.steps, "constrained": cfg.constrained,
                              "temperature": cfg.temperature, "engines": names, "settings": rows,
                              "best_env_steps_per_s": best}
    if with_adapter:
        result["best_with_adapter_env_steps_per_s"] = best_adapter
    if best.get("hf") and best.get("vllm"):
        result["vllm_over_best_hf"] = best["vllm"] / best["hf"]
        if with_adapter and best_adapter.get("hf") and best_adapter.get("vllm"):
            result["vllm_with_adapter_over_best_hf"] = best_adapter["vllm"] / best["hf"]
    if "hf" in tokens and "vllm" in tokens:
        identical, share = same({"token_ids": tokens["hf"]}, {"token_ids": tokens["vllm"]})
        result["fp32_identical"] = identical
        result["fp32_agreement"] = share  # env-steps whose completions match token for token
    return result


def run_rollout_bench(cfg: RolloutBenchConfig, load: Loader, stage: Stage, adapter_path: str | None = None
                      ) -> dict[str, Any]:
    """The report `cfg` asks for: the hf report, or rows per engine and setting."""
    if cfg.side_by_side:
        return side_by_side(cfg, load, stage, adapter_path)
    return hf_report(cfg, load, stage)
