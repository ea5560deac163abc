"""`bench device` (alias `bench gpu`) as a job of the table: a recorded run whose
report (device.json, an artifact) and per-phase numbers (metrics) stay in the registry,
detachable and killable like any job. The bench: `lactchain.bench.device`."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

from lactchain.bench.device_config import DeviceBenchConfig
from lactchain.config import ConfigError
from lactchain.jobs.output import record_report, stage_lines, write_report
from lactchain.jobs.spec import Job


def _precheck(config: DeviceBenchConfig) -> None:
    """A CUDA device asked for on a machine without one."""
    if config.device and config.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"--device {config.device}: this machine has no CUDA GPU; use --device cpu")


def _prepare(registry: Any, config: DeviceBenchConfig) -> dict[str, Any]:
    from lactchain.jobs.checks import check_models

    check_models(config.actor, config.critic if "critic_encode" in config.chosen else None)
    return {}


def saved_name(report: dict[str, Any]) -> str:
    """`device-<card>-<date>.json`: how docs/results/engine keeps the reports."""
    slug = re.sub(r"[^a-z0-9]+", "-", report["device"].lower()).strip("-") or "device"
    return f"device-{slug}-{date.today().isoformat()}.json"


def run_bench_device(handle: Any, config: DeviceBenchConfig) -> dict[str, Any]:
    from lactchain.bench.device import run_device_bench

    report = run_device_bench(config, before_phase=stage_lines(handle), check=handle.check_cancelled)
    for name, row in report["phases"].items():
        handle.log_metrics({f"{name}/{key}": float(value) for key, value in row.items()
                            if key in ("seconds", "s_per_step", "tokens_per_s", "utilisation_vs_spec",
                                       "utilisation_vs_matmul") and isinstance(value, (int, float))})
    result = record_report(handle, report, "device.json", "bench device report")
    if config.save:
        result["saved"] = str(write_report(report, Path(config.save) / saved_name(report)))
    return result


BENCH_DEVICE = Job(kind="bench", command="bench device", config=DeviceBenchConfig, run=run_bench_device,
                   title="Benchmark this machine", precheck=_precheck, prepare=_prepare,
                   name=lambda c: f"bench device {c.actor} ({c.phases})",
                   doc="""Per phase of the loop (greedy evaluation of the 60 grid states, sampled rollouts,
    the critic's encoder, CPO-SimPO and GRPO steps): seconds, tokens/s and model-FLOPs
    utilisation against the card's bf16 peak and this machine's measured matmul rate; the
    greedy answers compared with xgrammar's processor and with the prefix cache flipped.
    A recorded run (device.json in its folder, per-phase metrics). Run it alone: it times
    the machine.
    """)
