"""`bench replicas` as a job of the table: a recorded run whose report (replicas.json,
an artifact) and per-set-up medians (metrics) stay in the registry, detachable and
killable like any job. The bench: `lactchain.bench.replicas`."""

from __future__ import annotations

from typing import Any

from lactchain.bench.replicas import ReplicasBenchConfig, bench_replicas
from lactchain.config import ConfigError
from lactchain.jobs.output import record_report, stage_lines
from lactchain.jobs.spec import Job


def _precheck(config: ReplicasBenchConfig) -> None:
    """vLLM or Ray missing, or a Ray address with nothing behind it: one line, no run."""
    from lactchain.models.ray_replicas import RayUnavailable, check_address, ray_installed
    from lactchain.models.vllm_engine import EngineUnavailable, require_vllm

    try:
        require_vllm()
        if not ray_installed():
            raise RayUnavailable("bench replicas needs Ray: install the ray extra (pip install -e '.[ray]')")
        if config.ray_address:
            config.ray_address = check_address(config.ray_address)
    except (RayUnavailable, EngineUnavailable, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def _prepare(registry: Any, config: ReplicasBenchConfig) -> dict[str, Any]:
    from lactchain.jobs.checks import check_models

    check_models(config.actor)
    return {}


def run_bench_replicas(handle: Any, config: ReplicasBenchConfig) -> dict[str, Any]:
    report = bench_replicas(config.actor, ray_address=config.ray_address, calls=config.calls,
                            n_prompts=config.prompts, dtype=config.dtype, only=config.chosen,
                            say=stage_lines(handle, prefix=""))
    for name, row in report["setups"].items():
        handle.log_metrics({f"{name}/median_s": float(row["median_s"]),
                            f"{name}/env_steps_per_s": float(row["env_steps_per_s"])})
    if report["ray_overhead_pct"] is not None:
        handle.log_metrics({"ray_overhead_pct": float(report["ray_overhead_pct"])})
    return record_report(handle, report, "replicas.json", "bench replicas report")


BENCH_REPLICAS = Job(kind="bench", command="bench replicas", config=ReplicasBenchConfig, run=run_bench_replicas,
                     title="Benchmark engine replicas", precheck=_precheck, prepare=_prepare,
                     name=lambda c: f"bench replicas {c.actor} ({c.setups})",
                     doc=("One vLLM engine in-process against the same engine as one Ray actor (Ray's overhead per "
                          "call; target under 10 %), and 2 replicas as Ray actors and as local worker processes "
                          "(env-steps/s), interleaved, medians of warm calls; answers checked equal.\n\n"
                          "A recorded run (replicas.json in its folder, each set-up's median as metrics). Run it "
                          "alone: it times the machine."))
