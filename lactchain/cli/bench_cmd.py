"""`lactchain bench ...`: speed targets measured side by side in one run, as JSON."""

from __future__ import annotations

import time
from typing import Annotated, Any, Optional

import typer

from lactchain.bench.common import Recording, agreement
from lactchain.cli.common import JsonOption, check_models, console, err_console, fail, finite, print_json
from lactchain.cli.play_cmd import ActorOption, ConstrainedOption

app = typer.Typer(help="Benchmarks (print JSON with --json).", no_args_is_help=True)


def _rollout_rate(model: Any, envs: int, steps: int, constrained: bool, temperature: float, seed: int) -> dict[str, Any]:
    from lactchain.loop.rollout import RolloutConfig, run_rollouts

    cfg = RolloutConfig(episodes=envs * steps, n_envs=envs, constrained=constrained, temperature=temperature,
                        start="random", seed=seed, max_env_steps=envs * steps)
    recording = Recording(model)
    result = run_rollouts(recording, cfg).as_dict()
    result["token_ids"] = recording.token_ids
    return result


def _agreement(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, float]:
    """(identical?, fraction of env-steps whose completions match token for token)."""
    return a["token_ids"] == b["token_ids"], agreement(a["token_ids"], b["token_ids"])


def _generate_rate(model: Any, envs: int, steps: int, constrained: bool, temperature: float, seed: int) -> float:
    from lactchain.envs import GridWorldEnv
    from lactchain.prompts import PromptSpec

    env = GridWorldEnv(moves=model.moves)
    prompts = [PromptSpec(moves=model.moves).render(env.describe())] * envs
    t0 = time.perf_counter()
    for k in range(steps):
        model.generate(prompts, constrained=constrained, temperature=temperature, seed=seed + k)
    return envs * steps / (time.perf_counter() - t0)


@app.command("rollout")
def rollout(
    actor: ActorOption = "smollm2-135m",
    envs: Annotated[int, typer.Option("--envs", "-b", min=1, max=4096, help="Batch size: envs stepped in lock-step.")] = 16,
    steps: Annotated[int, typer.Option("--steps", "-k", min=1, help="Lock-steps to time in each mode.")] = 4,
    constrained: ConstrainedOption = True,
    temperature: Annotated[float, typer.Option("--temperature", "-t", callback=finite, min=0.0)] = 0.0,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
    bf16: Annotated[bool, typer.Option("--bf16/--no-bf16", help="Also time generation with a bfloat16 copy of the weights.")] = True,
    engines: Annotated[str, typer.Option(
        "--engines", help="Engines timed side by side, comma-separated: hf, vllm. 'hf' alone (the default) gives "
                          "the report below; with vllm: env-steps/s per engine and setting (fp32/bf16, prefix "
                          "cache on/off, with/without --adapter), one row each.")] = "hf",
    adapter: Annotated[Optional[str], typer.Option(
        "--adapter", help="Also time each engine with this LoRA adapter: a folder, a train-actor run id, or "
                          "'random' (a rank-8 LoRA with random weights: speed only).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Env-steps/s of (a) batched lock-step rollouts, (b) one prompt at a time (how the
    original did it) and (c) the model's raw batched generate at that batch size; then
    (a) again without the shared-prefix KV cache and, with --bf16, with bfloat16 weights.

    speedup = a / b; efficiency = a / c (how close rollouts come to the generate ceiling);
    prefix_cache_speedup = a / a-uncached; bf16_speedup = a-bf16 / a. The *_identical /
    *_agreement keys compare the completions (token ids) of those runs step by step.
    """
    from lactchain.jobs.engine import check_engine, load_actor

    names = [e.strip().lower() for e in engines.split(",") if e.strip()]
    if not names or any(e not in ("hf", "vllm") for e in names):
        fail(f"--engines {engines}: use a comma-separated list of hf, vllm")
    if "vllm" in names:
        check_engine("vllm", actor)
    if names != ["hf"] or adapter is not None:
        result = _side_by_side(actor, names, envs, steps, constrained, temperature, seed, bf16, adapter, as_json)
        if as_json:
            print_json(result)
        else:
            _print_rows(result)
        return
    model = load_actor(actor, None, None, quiet=as_json)
    model.prefix_cache = True  # (a) is timed with the cache whatever this device's default is
    _generate_rate(model, min(envs, 2), 1, constrained, temperature, seed)  # warm-up: grammar compile, caches
    with err_console.status("(a) batched lock-step rollouts"):
        batched = _rollout_rate(model, envs, steps, constrained, temperature, seed)
    with err_console.status("(b) one prompt at a time"):
        sequential = _rollout_rate(model, 1, max(steps, 2), constrained, temperature, seed)
    with err_console.status("(c) raw batched generate"):
        ceiling = _generate_rate(model, envs, steps, constrained, temperature, seed)
    prefix_computations = model.prefix_computations
    with err_console.status("(a) without the prefix cache"):
        model.prefix_cache = False
        try:
            uncached = _rollout_rate(model, envs, steps, constrained, temperature, seed)
        finally:
            model.prefix_cache = True
    a, b = batched["env_steps_per_s"], sequential["env_steps_per_s"]
    u = uncached["env_steps_per_s"]
    identical, _ = _agreement(batched, uncached)
    result = {
        "actor": actor,
        "envs": envs,
        "steps": steps,
        "constrained": constrained,
        "batched_env_steps_per_s": a,
        "sequential_env_steps_per_s": b,
        "generate_env_steps_per_s": ceiling,
        "speedup": a / b if b else None,
        "efficiency": a / ceiling if ceiling else None,
        "batched_parse_failure_rate": batched["parse_failure_rate"],
        "uncached_env_steps_per_s": u,
        "prefix_cache_speedup": a / u if u else None,
        "prefix_cache_identical": identical,
        "prefix_computations": prefix_computations,
    }
    if bf16:
        import torch

        with err_console.status("(a) with bfloat16 weights"):
            before = model.inference_dtype
            model.inference_dtype = torch.bfloat16
            try:
                _generate_rate(model, min(envs, 2), 1, constrained, temperature, seed)  # builds the bf16 copy
                half = _rollout_rate(model, envs, steps, constrained, temperature, seed)
            finally:
                model.inference_dtype = before
        h = half["env_steps_per_s"]
        same, agreement = _agreement(batched, half)
        result.update({
            "bf16_env_steps_per_s": h,
            "bf16_speedup": h / a if a else None,
            "bf16_identical": same,
            "bf16_agreement": agreement,
        })
    if as_json:
        print_json(result)
    else:
        for key, value in result.items():
            console.print(f"{key:>28}: {value:.3f}" if isinstance(value, float) else f"{key:>28}: {value}")


def _random_adapter(actor: str, out_dir: Any) -> str:
    """A rank-8 LoRA on the actor's projection layers with random B (so it changes the
    model): for timing an engine with an adapter loaded."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lactchain.models.presets import resolve_actor
    from lactchain.train.actor import lora_targets

    base = AutoModelForCausalLM.from_pretrained(str(resolve_actor(actor)), dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=lora_targets(base), task_type="CAUSAL_LM"))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.01)
    model.save_pretrained(str(out_dir))
    return str(out_dir)


def _row(engine: str, dtype: str, prefix_cache: bool, adapter: Optional[str], result: dict[str, Any],
         **extra: Any) -> dict[str, Any]:
    return {"engine": engine, "dtype": dtype, "prefix_cache": prefix_cache, "adapter": adapter,
            "env_steps_per_s": result["env_steps_per_s"], "parse_failure_rate": result["parse_failure_rate"],
            "seconds": result["seconds"], **extra}


def _side_by_side(actor: str, names: list[str], envs: int, steps: int, constrained: bool, temperature: float,
                  seed: int, bf16: bool, adapter: Optional[str], quiet: bool) -> dict[str, Any]:
    """Every engine and setting on the same rollouts (same start states and seeds): rows of
    env-steps/s, plus greedy agreement of the engines at the same dtype (fp32)."""
    import tempfile
    from pathlib import Path

    import torch

    from lactchain.cli.common import open_registry, resolve_adapter
    from lactchain.jobs.engine import EngineConfig, load_actor

    tmp = tempfile.TemporaryDirectory(prefix="lactchain-bench-")
    adapter_path = None
    if adapter == "random":
        with err_console.status("building a random LoRA adapter"):
            adapter_path = _random_adapter(actor, Path(tmp.name) / "adapter")
    elif adapter:
        with open_registry(None) as registry:
            adapter_path = resolve_adapter(registry, adapter)
    label = None if adapter is None else adapter
    dtypes = ["float32", "bfloat16"] if bf16 else ["float32"]
    rows: list[dict[str, Any]] = []
    tokens: dict[str, list[list[int]]] = {}

    def measure(model: Any) -> dict[str, Any]:
        _generate_rate(model, min(envs, 2), 1, constrained, temperature, seed)  # warm-up
        return _rollout_rate(model, envs, steps, constrained, temperature, seed)

    try:
        if "hf" in names:
            model = load_actor(actor, None, None, quiet=quiet)
            for dtype in dtypes:
                model.inference_dtype = None if dtype == "float32" else torch.bfloat16
                for cache in (True, False):
                    if not cache and dtype != dtypes[-1]:
                        continue  # prefix cache off: timed at the fastest dtype only
                    model.prefix_cache = cache
                    with err_console.status(f"hf {dtype} prefix cache {'on' if cache else 'off'}"):
                        res = measure(model)
                    rows.append(_row("hf", dtype, cache, None, res))
                    if dtype == "float32" and cache:
                        tokens["hf"] = res["token_ids"]
                model.prefix_cache = True
            if adapter_path:
                model.load_adapter(adapter_path)
                with err_console.status(f"hf {dtypes[-1]} + adapter"):
                    rows.append(_row("hf", dtypes[-1], True, label, measure(model)))
            del model
        if "vllm" in names:
            for dtype in dtypes:
                for cache in (True, False):
                    if not cache and dtype != dtypes[-1]:
                        continue
                    t0 = time.perf_counter()
                    model = load_actor(actor, None, None, quiet=quiet,
                                       settings=EngineConfig(engine="vllm", dtype=dtype),
                                       extra={"prefix_caching": cache})
                    startup = time.perf_counter() - t0
                    try:
                        with err_console.status(f"vllm {dtype} prefix cache {'on' if cache else 'off'}"):
                            res = measure(model)
                        rows.append(_row("vllm", dtype, cache, None, res, startup_seconds=startup))
                        if dtype == "float32" and cache:
                            tokens["vllm"] = res["token_ids"]
                        if adapter_path and cache and dtype == dtypes[-1]:
                            t0 = time.perf_counter()
                            model.load_adapter(adapter_path)
                            load_s = time.perf_counter() - t0
                            with err_console.status(f"vllm {dtype} + merged adapter"):
                                rows.append(_row("vllm", dtype, True, label, measure(model), adapter_mode="merge",
                                                 adapter_load_seconds=load_s))
                    finally:
                        model.close()
            if adapter_path:
                model = load_actor(actor, None, None, quiet=quiet, settings=EngineConfig(engine="vllm", dtype=dtypes[-1]),
                                   extra={"adapter_mode": "lora", "max_lora_rank": 16})
                try:
                    model.load_adapter(adapter_path)
                    with err_console.status(f"vllm {dtypes[-1]} + LoRARequest adapter"):
                        rows.append(_row("vllm", dtypes[-1], True, label, measure(model), adapter_mode="lora"))
                finally:
                    model.close()
    finally:
        tmp.cleanup()
    best = {e: max((r["env_steps_per_s"] for r in rows if r["engine"] == e and r["adapter"] is None), default=None)
            for e in names}
    best_adapter = {e: max((r["env_steps_per_s"] for r in rows if r["engine"] == e and r["adapter"] is not None),
                           default=None) for e in names}
    result: dict[str, Any] = {"actor": actor, "envs": envs, "steps": steps, "constrained": constrained,
                              "temperature": temperature, "engines": names, "settings": rows,
                              "best_env_steps_per_s": best}
    if adapter_path:
        result["best_with_adapter_env_steps_per_s"] = best_adapter
    if best.get("hf") and best.get("vllm"):
        result["vllm_over_best_hf"] = best["vllm"] / best["hf"]
        if adapter_path and best_adapter.get("hf") and best_adapter.get("vllm"):
            result["vllm_with_adapter_over_best_hf"] = best_adapter["vllm"] / best["hf"]
    if "hf" in tokens and "vllm" in tokens:
        same, agreement = _agreement({"token_ids": tokens["hf"]}, {"token_ids": tokens["vllm"]})
        result["fp32_identical"] = same
        result["fp32_agreement"] = agreement  # env-steps whose completions match token for token
    return result


def _print_rows(result: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"bench rollout {result['actor']}, {result['envs']} envs")
    for col in ("engine", "dtype", "prefix cache", "adapter", "env-steps/s", "parse failures"):
        table.add_column(col)
    for r in result["settings"]:
        table.add_row(r["engine"], r["dtype"], "on" if r["prefix_cache"] else "off",
                      f"{r['adapter']} ({r.get('adapter_mode', 'peft')})" if r["adapter"] else "-",
                      f"{r['env_steps_per_s']:.2f}", f"{r['parse_failure_rate']:.1%}")
    console.print(table)
    for key in ("vllm_over_best_hf", "vllm_with_adapter_over_best_hf", "fp32_agreement"):
        if key in result:
            console.print(f"{key}: {result[key]:.3f}")


def _register_learn() -> None:
    """`bench learn`: generated from the job's config (lactchain.jobs.loop.BENCH_LEARN)."""
    from lactchain.cli.bench_device import render_device
    from lactchain.cli.generate import make_command
    from lactchain.cli.pipeline_cmd import render_pipeline
    from lactchain.jobs.table import JOBS

    app.command("learn")(make_command(JOBS["bench learn"], render=render_pipeline))
    app.command("strategy")(make_command(JOBS["bench strategy"], render=_render_bench_strategy))
    device = make_command(JOBS["bench device"], render=render_device)
    app.command("device")(device)
    app.command("gpu", hidden=True)(device)  # the name issue 46 gave it
    app.command("console")(bench_console)


def bench_console(
    rounds: Annotated[int, typer.Option("--rounds", min=2, max=100, help="Visits of every screen (the first "
                                                                         "mounts it and is reported apart).")] = 5,
    no_job: Annotated[bool, typer.Option("--no-job", help="Idle only: no job running beside the console.")] = False,
    quit_actor: Annotated[str, typer.Option("--quit-actor", help="Actor loaded for the quit measure (ctrl+q with a "
                                                                 "real model in memory); none skips it.")] = "smollm2-135m",
    as_json: JsonOption = False,
) -> None:
    """How fast the console answers (first paint, screen switch, ctrl+q, a kill shown),
    driving the real app headless, idle and with a detached tiny play job stepping. The
    console is its own program (the library never imports it): this runs `python -m
    tui.bench` and passes its output on."""
    import subprocess
    import sys

    if quit_actor.lower() != "none":
        check_models(quit_actor)
    argv = [sys.executable, "-m", "tui.bench", "--rounds", str(rounds), "--quit-actor", quit_actor] + \
        (["--no-job"] if no_job else []) + (["--json"] if as_json else [])
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"the console benchmark failed: {(res.stderr.strip().splitlines() or ['no output'])[-1]}")
    print(res.stdout, end="")


def _render_bench_strategy(result: dict) -> None:
    from pathlib import Path

    from rich.markdown import Markdown

    console.print(Markdown(Path(result["bench_md"]).read_text()))
    console.print(f"figure: {result['bench_png']}  ·  data: {result['bench_json']}")


_register_learn()
