"""A training job on N processes (`--processes N`): DDP under `accelerate launch`.

The job's own process keeps the run (registry row, heartbeat, KILLED on SIGTERM) and
launches the ranks (`run_ranks`): `accelerate launch --multi_gpu --num_processes N -m
lactchain.jobs.rank JOB CONFIG --run-id ID --db DB`, in their own process group; their
output goes to the job's (its log when detached). Each rank (`main`) runs the same job
body on the same config; rank 0 writes the run's metrics, checkpoints and adapter and
its result (`rank0_result.json`), the others write nothing to the registry. A SIGTERM
to the job is passed to every rank: each stops at the same step (lactchain.train.ddp),
rank 0 saves a checkpoint, and the run ends KILLED, resumable like a one-process run.
"""

from __future__ import annotations

import json
from lactchain.runs.lifecycle import Cancelled
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULT_FILE = "rank0_result.json"


class RanksFailed(ValueError):
    """A rank of a multi-process training ended in an error (its traceback is in the job's
    output); one line for the user, the run FAILED."""


def processes_of(config: Any) -> int:
    return int(getattr(config, "processes", 1) or 1)


def check_gpus_fit(config: Any) -> None:
    """Refuse N ranks on a CUDA box with fewer than N GPUs (one per rank under NCCL), before
    any run exists; a fact of this machine, so it is checked at launch, not in the config."""
    from lactchain.train.ddp import gpus_short, visible_gpus

    n = processes_of(config)
    if n > 1 and (why := gpus_short(n, visible_gpus())):
        config.refuse("processes", why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_command(job_command: str, config_path: Path, run_id: str, db: Path, processes: int) -> list[str]:
    """`accelerate launch` of the ranks (torch's elastic launcher underneath: one process
    per rank on this machine, a rendezvous port of their own)."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(_free_port()), "-m", "lactchain.jobs.rank", job_command, str(config_path),
            "--run-id", run_id, "--db", str(db)]


def run_ranks(handle: Any, job_command: str, config_path: Path, n: int) -> dict[str, Any]:
    """Inside the job's run: start the ranks on the saved config, pass a cancel on to them,
    wait; rank 0's result."""
    result_path = Path(handle.dir) / RESULT_FILE
    result_path.unlink(missing_ok=True)
    env = dict(os.environ)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    env.setdefault("OMP_NUM_THREADS", str(max(1, cores // n)))  # N ranks share the cores
    env["LACTCHAIN_RUN_ID"] = handle.run_id
    print(f"training on {n} processes (accelerate launch, DDP)", file=sys.stderr, flush=True)
    proc = subprocess.Popen(launch_command(job_command, config_path, handle.run_id, handle.registry.path, n),
                            stdin=subprocess.DEVNULL, stdout=2, stderr=2,  # rank output: the job's stderr, never its --json
                            start_new_session=True, env=env)
    signalled = False
    try:
        while proc.poll() is None:
            if handle.cancelled.is_set() and not signalled:
                os.killpg(proc.pid, signal.SIGTERM)  # every rank: they stop together and rank 0 checkpoints
                signalled = True
            time.sleep(0.2)
    finally:
        if proc.poll() is None:  # the job itself is being torn down
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if signalled or handle.cancelled.is_set():
        raise Cancelled("stopped on a termination signal")
    if proc.returncode != 0 or not result_path.is_file():
        raise RanksFailed(f"the {n} training processes failed (exit code {proc.returncode}); their errors are "
                           "above (or in `lactchain runs logs`)")
    return json.loads(result_path.read_text())
