"""`lactchain bench replicas`: the Ray transport's cost per call and 1 vs 2 engine replicas
(`lactchain.bench.replicas`), as JSON. Run it alone: it times CPU work."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from lactchain.cli.common import JsonOption, console, err_console, fail, print_json
from lactchain.cli.play_cmd import ActorOption


def bench_replicas(
    actor: ActorOption = "smollm2-135m",
    ray_address: Annotated[Optional[str], typer.Option(
        "--ray-address", help="A running Ray cluster (auto, HOST:PORT). Default: a one-node cluster started for "
                              "the benchmark on this machine.")] = None,
    calls: Annotated[int, typer.Option("--calls", min=1, max=1000, help="Timed calls per set-up (medians).")] = 5,
    prompts: Annotated[int, typer.Option("--prompts", min=1, max=63, help="Prompts per generate call.")] = 16,
    dtype: Annotated[str, typer.Option("--dtype", help="Engine dtype (bfloat16, float32).")] = "bfloat16",
    setups: Annotated[str, typer.Option("--setups", help="Which to time, comma-separated: in-process (always), "
                                                       "ray-1, ray-2, processes-2.")] = "in-process,ray-1,ray-2,processes-2",
    as_json: JsonOption = False,
) -> None:
    """One vLLM engine in-process against the same engine as one Ray actor (Ray's overhead
    per call; target under 10 %), and 2 replicas as Ray actors and as local worker
    processes (env-steps/s), interleaved, medians of warm calls; answers checked equal."""
    from lactchain.models.ray_replicas import RayUnavailable, check_address, ray_installed
    from lactchain.models.vllm_engine import require_vllm
    from lactchain.bench.replicas import SETUPS, bench_replicas as run

    chosen = tuple(dict.fromkeys(["in-process", *(x.strip() for x in setups.split(",") if x.strip())]))
    unknown = [x for x in chosen if x not in SETUPS]
    if unknown:
        fail(f"--setups {setups!r}: unknown {', '.join(unknown)}; use some of {', '.join(SETUPS)}")
    try:
        require_vllm()
        if not ray_installed():
            raise RayUnavailable("bench replicas needs Ray: install the ray extra (pip install -e '.[ray]')")
        address = check_address(ray_address) if ray_address else None
    except Exception as exc:  # noqa: BLE001 - one line whatever is missing
        fail(str(exc))
        return
    result = run(actor, ray_address=address, calls=calls, n_prompts=prompts, dtype=dtype, only=chosen,
                 say=lambda line: err_console.print(line, highlight=False, markup=False))
    if as_json:
        print_json(result)
        return
    for name, row in result["setups"].items():
        console.print(f"{name:14s} {row['median_s']:.3f} s  {row['env_steps_per_s']:.1f} env-steps/s", highlight=False)
    if result["ray_overhead_pct"] is not None:
        console.print(f"Ray overhead per call: {result['ray_overhead_pct']:+.1f} % (target < "
                      f"{result['ray_overhead_target_pct']:g} %)", highlight=False)
    console.print(f"same answers: {result['same_answers']}", highlight=False)
