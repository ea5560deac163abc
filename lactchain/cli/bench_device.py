"""`lactchain bench device` (alias `bench gpu`): generated from its job
(`lactchain.jobs.bench_device.BENCH_DEVICE`); this module draws its report."""

from __future__ import annotations

from typing import Any

from lactchain.cli.common import console


def render_device(report: dict[str, Any]) -> None:
    """One line per phase: seconds (or per step), tokens/s, utilisation; then the answer checks."""
    console.print(f"{report['device']} ({report['device_type']}, {report['dtype']}, "
                  f"{report['threads']} threads)", highlight=False)
    for name, row in report["phases"].items():
        util = row.get("utilisation_vs_spec") or row.get("utilisation_vs_matmul")
        seconds, unit = (row["s_per_step"], "s/step") if row.get("s_per_step") else (row["seconds"], "s")
        console.print(f"{name:14s} {seconds:8.3f} {unit:6s} {row.get('tokens_per_s') or 0:10.0f} tokens/s  "
                      f"utilisation {util or 0:.1%}", highlight=False)
    checks = {k: v for row in report["phases"].values() for k, v in row.items() if k.endswith("_identical")}
    if checks:
        console.print("same answers: " + ", ".join(f"{k.removesuffix('_identical')} {'yes' if v else 'NO'}"
                                                   for k, v in checks.items()), highlight=False)
    console.print(f"report: {report['report']}" + (f"  ·  saved: {report['saved']}" if report.get("saved") else ""),
                  highlight=False)
