"""`lactchain bench replicas`: generated from its job (`lactchain.jobs.bench_replicas`);
this module draws its report."""

from __future__ import annotations

from typing import Any

from lactchain.cli.common import console


def render_replicas(result: dict[str, Any]) -> None:
    """One line per set-up (median, env-steps/s), Ray's overhead against its target, the answer check."""
    for name, row in result["setups"].items():
        console.print(f"{name:14s} {row['median_s']:.3f} s  {row['env_steps_per_s']:.1f} env-steps/s", highlight=False)
    if result["ray_overhead_pct"] is not None:
        console.print(f"Ray overhead per call: {result['ray_overhead_pct']:+.1f} % (target < "
                      f"{result['ray_overhead_target_pct']:g} %)", highlight=False)
    console.print(f"same answers: {result['same_answers']}  ·  report: {result['report']}", highlight=False)
