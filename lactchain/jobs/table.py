"""JOBS: every job kind the lab runs, its config and its function. The CLI commands,
the console's Jobs forms and `python -m lactchain.jobs` are generated from it."""

from __future__ import annotations

from lactchain.jobs.archive import ARCHIVE_ADD, ARCHIVE_FILL, ARCHIVE_IMPORT
from lactchain.jobs.bandit import BANDIT
from lactchain.jobs.bench_device import BENCH_DEVICE
from lactchain.jobs.bench_dt import BENCH_DT
from lactchain.jobs.bench_motif import BENCH_MOTIF
from lactchain.jobs.bench_replicas import BENCH_REPLICAS
from lactchain.jobs.bench_rollout import BENCH_ROLLOUT
from lactchain.jobs.dt import DT_EVAL, DT_TRAIN
from lactchain.jobs.baselines import BASELINES_TRAIN
from lactchain.jobs.loop import BENCH_LEARN, PIPELINE
from lactchain.jobs.motif import COLLECT, JUDGE, REWARD_AGENTS, TRAIN_REWARD
from lactchain.jobs.rollouts import EVALUATE, PLAY
from lactchain.jobs.strategy import BENCH_STRATEGY, STRATEGY_SEARCH
from lactchain.jobs.training import COLLECT_PAIRS, TRAIN_ACTOR, TRAIN_CRITIC
from lactchain.jobs.spec import Job

# Keyed by command: two commands may share a run kind (bandit and baselines train are both
# `baseline` runs).
JOBS: dict[str, Job] = {job.command: job for job in (
    TRAIN_CRITIC, COLLECT_PAIRS, TRAIN_ACTOR, PLAY, EVALUATE, PIPELINE, COLLECT, JUDGE, TRAIN_REWARD, REWARD_AGENTS, BANDIT,
    BASELINES_TRAIN, ARCHIVE_FILL, ARCHIVE_ADD, ARCHIVE_IMPORT, DT_TRAIN, DT_EVAL, BENCH_LEARN, STRATEGY_SEARCH, BENCH_STRATEGY,
    BENCH_DEVICE, BENCH_ROLLOUT, BENCH_REPLICAS, BENCH_MOTIF, BENCH_DT)}
BY_COMMAND = JOBS


def job_of_run(registry: object, run: dict) -> Job | None:
    """The job that made a run, from the config saved in its folder (None: a run made
    before the job layer, or by a command outside the table)."""
    import json

    from lactchain.jobs.launch import CONFIG_FILE

    path = registry.run_dir(run["id"]) / CONFIG_FILE  # type: ignore[attr-defined]
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    job = JOBS.get(saved.get("job")) if isinstance(saved, dict) else None
    return job if job is not None and job.kind == run["kind"] else None
