"""JOBS: every job kind the lab runs, its config and its function. The CLI commands,
the console's Jobs forms and `python -m lactchain.jobs` are generated from it."""

from __future__ import annotations

from lactchain.jobs.motif import COLLECT, JUDGE, REWARD_AGENTS, TRAIN_REWARD
from lactchain.jobs.rollouts import EVALUATE, PLAY
from lactchain.jobs.spec import Job

JOBS: dict[str, Job] = {job.kind: job for job in (PLAY, EVALUATE, COLLECT, JUDGE, TRAIN_REWARD, REWARD_AGENTS)}
BY_COMMAND: dict[str, Job] = {job.command: job for job in JOBS.values()}
