"""`lactchain bench ...`: speed targets measured side by side in one run, as JSON."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from lactchain.cli.common import JsonOption, console, err_console, print_json
from lactchain.cli.play_cmd import ActorOption, ConstrainedOption

app = typer.Typer(help="Benchmarks (print JSON with --json).", no_args_is_help=True)


def _rollout_rate(model: Any, envs: int, steps: int, constrained: bool, temperature: float, seed: int) -> dict[str, Any]:
    from lactchain.rollout import RolloutConfig, run_rollouts

    cfg = RolloutConfig(episodes=envs * steps, n_envs=envs, constrained=constrained, temperature=temperature,
                        start="random", seed=seed, max_env_steps=envs * steps)
    return run_rollouts(model, cfg).as_dict()


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
    envs: Annotated[int, typer.Option("--envs", "-b", min=1, help="Batch size: envs stepped in lock-step.")] = 16,
    steps: Annotated[int, typer.Option("--steps", "-k", min=1, help="Lock-steps to time in each mode.")] = 4,
    constrained: ConstrainedOption = True,
    temperature: Annotated[float, typer.Option("--temperature", "-t", min=0.0)] = 0.0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Env-steps/s of (a) batched lock-step rollouts, (b) one prompt at a time (how the
    original did it) and (c) the model's raw batched generate at that batch size.

    speedup = a / b; efficiency = a / c (how close rollouts come to the generate ceiling).
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
    a, b = batched["env_steps_per_s"], sequential["env_steps_per_s"]
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
    }
    if as_json:
        print_json(result)
    else:
        for key, value in result.items():
            console.print(f"{key:>28}: {value:.3f}" if isinstance(value, float) else f"{key:>28}: {value}")


def _register_learn() -> None:
    from lactchain.cli.pipeline_cmd import bench_learn

    app.command("learn")(bench_learn)


_register_learn()
