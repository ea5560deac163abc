"""`bench motif` as a job of the table: the Motif line's jobs (collect, judge,
train-reward, reward-agents) as child runs of one recorded bench run, whose table
(motif.json, an artifact) and headline numbers (metrics) stay in the registry. The
bench: `lactchain.bench.motif`."""

from __future__ import annotations

from typing import Any

from lactchain.bench.motif import MotifBenchConfig, run_motif_bench
from lactchain.jobs.output import record_report, stage_lines
from lactchain.jobs.spec import Job


def _prepare(registry: Any, config: MotifBenchConfig) -> dict[str, Any]:
    """Every judge model and the backbone, before any step: a bad backbone would otherwise
    skip every reward model after the judging."""
    from lactchain.jobs.checks import check_models

    for name in config.judge_names:
        if name != "rule":
            check_models(name)
    check_models(critic=config.critic)
    return {}


def run_bench_motif(handle: Any, config: MotifBenchConfig) -> dict[str, Any]:
    from lactchain.jobs.launch import child_steps
    from lactchain.jobs.motif import COLLECT, JUDGE, REWARD_AGENTS, TRAIN_REWARD

    result = run_motif_bench(config, child_steps(handle, COLLECT, JUDGE, TRAIN_REWARD, REWARD_AGENTS),
                             stage_lines(handle, prefix=""))
    for name, stats in result["judges"].items():
        handle.log_metrics({f"judge {name}/agreement": stats["agreement"]})  # None (NULL): answered none
    for name, score in result["agents"].items():
        handle.log_metrics({f"agent {name}/win_rate": float(score["win_rate"])})
    return record_report(handle, result, "motif.json", "bench motif table")


BENCH_MOTIF = Job(kind="bench", command="bench motif", config=MotifBenchConfig, run=run_bench_motif,
                  title="Benchmark the judged reward (Motif)", prepare=_prepare,
                  name=lambda c: f"bench motif ({c.judges})",
                  doc=("Judge agreement with the true preference, reward-model accuracy and rank correlation, and "
                       "agent win rates (extrinsic / intrinsic / mixed / optimal / random) on captioned Blackjack.\n\n"
                       "Each step is one of the lab's jobs, recorded as a child run of the bench's run; the table "
                       "is motif.json in its folder."))
