"""One rank of a training job on N processes: `python -m lactchain.jobs.rank JOB CONFIG
--run-id ID --db DB`, started by `accelerate launch` (lactchain.jobs.ranks). It runs the
job's body on the saved config inside the launcher's run; rank 0 writes the registry,
its files and the result, the others write nothing."""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
from typing import Any

from lactchain.jobs.ranks import RESULT_FILE
from lactchain.runs.lifecycle import Cancelled, RunHandle
from lactchain.runs.registry import Registry, WriteRefused


class _WritesDropped:
    """What ranks other than 0 see: the run's registry opened read-only, each write
    dropped, reads passed. The gate is the registry's own (every write goes through
    `Registry._write`, which refuses on a read-only registry), so a write method is
    dropped whatever its name."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._registry, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def dropping(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except WriteRefused:
                return None

        return dropping


def main(argv: list[str] | None = None) -> int:
    """The job's body on the saved config, inside the launcher's run."""
    from lactchain.jobs.launch import load_config
    from lactchain.jobs.table import JOBS
    from lactchain.train.ddp import is_main_process

    parser = argparse.ArgumentParser(prog="python -m lactchain.jobs.rank", description=__doc__)
    parser.add_argument("job")
    parser.add_argument("config")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--db", required=True)
    args = parser.parse_args(argv)
    job = JOBS[args.job]
    config = load_config(job, args.config)
    import torch
    from accelerate import PartialState

    PartialState(cpu=not torch.cuda.is_available())  # joins the process group (gloo on a CPU, NCCL on GPUs)
    main_rank = is_main_process()
    with Registry(args.db, readonly=not main_rank) as registry:
        handle = RunHandle(registry if main_rank else _WritesDropped(registry), args.run_id,
                           registry.run_dir(args.run_id), quiet=True)

        def stop(_signum: int, _frame: Any) -> None:
            handle.cancelled.set()  # the trainer stops at its next step, with the other ranks

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, stop)
        try:
            result = job.run(handle, config)
        except Cancelled:  # every rank stopped at the same step; rank 0 keeps a checkpoint
            if main_rank:
                for fn in handle._on_cancel:
                    fn()
            return 130
        if main_rank:
            path = registry.run_dir(args.run_id) / RESULT_FILE
            path.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
