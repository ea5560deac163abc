"""`bench rollout` as a job of the table: a recorded run whose report (rollout.json, an
artifact) and rates (metrics) stay in the registry, detachable and killable between
its timed stages. The bench: `lactchain.bench.rollout`."""

from __future__ import annotations

from typing import Any

from lactchain.bench.rollout_config import RolloutBenchConfig
from lactchain.jobs.output import record_report, stage_lines
from lactchain.jobs.spec import Job


def _precheck(config: RolloutBenchConfig) -> None:
    """vLLM asked for where it is not installed, or a model it cannot run."""
    from lactchain.jobs.engine import check_engine

    if "vllm" in config.chosen:
        check_engine("vllm", config.actor)


def _adapter(registry: Any, config: RolloutBenchConfig) -> str | None:
    from lactchain.jobs.checks import resolve_adapter

    return config.adapter if config.adapter == "random" else resolve_adapter(registry, config.adapter)


def _prepare(registry: Any, config: RolloutBenchConfig) -> dict[str, Any]:
    from lactchain.jobs.checks import check_models

    check_models(config.actor)
    _adapter(registry, config)  # a run id without an adapter, a folder that does not load: refused here
    return {}


def _metrics(report: dict[str, Any]) -> dict[str, float]:
    """The rates and ratios: the hf report's numbers, or env-steps/s per engine and setting."""
    out = {k: float(v) for k, v in report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
           and (k.endswith("_per_s") or k.endswith("speedup") or k in ("efficiency", "vllm_over_best_hf"))}
    for row in report.get("settings", []):
        name = f"{row['engine']}/{row['dtype']}/cache_{'on' if row['prefix_cache'] else 'off'}" + \
            ("/adapter" + (f"_{row['adapter_mode']}" if row.get("adapter_mode") else "") if row["adapter"] else "")
        out[f"{name}/env_steps_per_s"] = float(row["env_steps_per_s"])
    return out


def run_bench_rollout(handle: Any, config: RolloutBenchConfig) -> dict[str, Any]:
    from lactchain.bench.rollout import run_rollout_bench
    from lactchain.jobs.engine import EngineConfig, load_actor

    def load(engine: str, dtype: str | None = None, extra: dict[str, Any] | None = None) -> Any:
        settings = None if engine == "hf" else EngineConfig(engine=engine, dtype=dtype)
        return load_actor(config.actor, None, None, quiet=handle.quiet, settings=settings, extra=extra)

    report = run_rollout_bench(config, load, stage_lines(handle), _adapter(handle.registry, config))
    handle.log_metrics(_metrics(report))
    return record_report(handle, report, "rollout.json", "bench rollout report")


BENCH_ROLLOUT = Job(kind="bench", command="bench rollout", config=RolloutBenchConfig, run=run_bench_rollout,
                    title="Benchmark rollouts", precheck=_precheck, prepare=_prepare,
                    name=lambda c: f"bench rollout {c.actor} ({c.engines}, {c.envs} envs)",
                    doc=("Env-steps/s of (a) batched lock-step rollouts, (b) one prompt at a time (how the original did "
                         "it) and (c) the model's raw batched generate at that batch size; then (a) again without the "
                         "shared-prefix KV cache and, with --bf16, with bfloat16 weights.\n\n"
                         "speedup = a / b; efficiency = a / c (how close rollouts come to the generate ceiling); "
                         "prefix_cache_speedup = a / a-uncached; bf16_speedup = a-bf16 / a. The *_identical / "
                         "*_agreement keys compare the completions (token ids) of those runs step by step.\n\n"
                         "With --engines hf,vllm or --adapter: one row per engine and setting. A recorded run "
                         "(rollout.json in its folder, the rates as metrics). Run it alone: it times the machine."))
