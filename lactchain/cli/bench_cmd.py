"""`lactchain bench ...`: speed targets measured side by side in one run, as JSON."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from lactchain.cli.common import JsonOption, console, err_console, finite, print_json
from lactchain.cli.play_cmd import ActorOption, ConstrainedOption

app = typer.Typer(help="Benchmarks (print JSON with --json).", no_args_is_help=True)


class _Recording:
    """Passes generate calls through to the actor and keeps every completion's token ids,
    so two benchmark runs can be checked for identical outputs."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.moves = actor.moves
        self.token_ids: list[list[int]] = []

    def generate(self, prompts: list[str], **kwargs: Any) -> Any:
        out = self.actor.generate(prompts, **kwargs)
        self.token_ids.extend(s.token_ids for s in out)
        return out


def _rollout_rate(model: Any, envs: int, steps: int, constrained: bool, temperature: float, seed: int) -> dict[str, Any]:
    from lactchain.rollout import RolloutConfig, run_rollouts

    cfg = RolloutConfig(episodes=envs * steps, n_envs=envs, constrained=constrained, temperature=temperature,
                        start="random", seed=seed, max_env_steps=envs * steps)
    recording = _Recording(model)
    result = run_rollouts(recording, cfg).as_dict()
    result["token_ids"] = recording.token_ids
    return result


def _agreement(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, float]:
    """(identical?, fraction of env-steps whose completions match token for token)."""
    pairs = list(zip(a["token_ids"], b["token_ids"]))
    same = sum(x == y for x, y in pairs)
    identical = same == len(pairs) and len(a["token_ids"]) == len(b["token_ids"])
    return identical, same / len(pairs) if pairs else 1.0


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
    as_json: JsonOption = False,
) -> None:
    """Env-steps/s of (a) batched lock-step rollouts, (b) one prompt at a time (how the
    original did it) and (c) the model's raw batched generate at that batch size; then
    (a) again without the shared-prefix KV cache and, with --bf16, with bfloat16 weights.

    speedup = a / b; efficiency = a / c (how close rollouts come to the generate ceiling);
    prefix_cache_speedup = a / a-uncached; bf16_speedup = a-bf16 / a. The *_identical /
    *_agreement keys compare the completions (token ids) of those runs step by step.
    """
    from lactchain.cli.play_cmd import load_actor

    model = load_actor(actor, None, registry=None, quiet=as_json)
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


def _register_learn() -> None:
    from lactchain.cli.pipeline_cmd import bench_learn

    app.command("learn")(bench_learn)


_register_learn()
