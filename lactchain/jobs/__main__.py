"""`python -m lactchain.jobs JOB CONFIG.json --run-id ID --db DB`: a detached job.

What `--detach`, `runs resume` and the console start: the config comes from the
run folder, the run row was created SCHEDULED by the launcher and is adopted here.
"""

from __future__ import annotations

import argparse
from lactchain.runs.lifecycle import Cancelled
import sys


def quiet_library_bars() -> None:
    """A detached job's stderr is its log.txt: transformers', the Hub's and datasets' tqdm
    bars ("Loading weights 0%...") would fill it with redraws. The job's own progress
    lines (`JobProgress`) say where it stands. Set before any of them is imported."""
    import os

    if not sys.stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' bars follow the Hub's
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


def main(argv: list[str] | None = None) -> int:
    from lactchain.machine import calm_omp_threads

    quiet_library_bars()
    calm_omp_threads()
    from lactchain.config import ConfigError
    from lactchain.jobs.launch import load_config, precheck, prepare, run_here
    from lactchain.jobs.table import JOBS
    from lactchain.runs.registry import Registry

    parser = argparse.ArgumentParser(prog="python -m lactchain.jobs", description=__doc__)
    parser.add_argument("job", help=f"one of {', '.join(JOBS)}")
    parser.add_argument("config", help="the job's config.json (written by --detach in the run folder)")
    parser.add_argument("--run-id", help="adopt this SCHEDULED run (else a new run is created)")
    parser.add_argument("--db", help="the run registry (default runs/registry.db or $LACTCHAIN_DB)")
    args = parser.parse_args(argv)
    job = JOBS.get(args.job)
    if job is None:
        print(f"error: unknown job {args.job!r}; one of {', '.join(JOBS)}", file=sys.stderr)
        return 2
    try:
        config = load_config(job, args.config)
        if not args.run_id:  # a scheduled run was checked by its launcher
            precheck(job, config)
        with Registry(args.db) as registry:
            params = registry.params(args.run_id) if args.run_id else prepare(registry, job, config)
            run_here(registry, job, config, params, run_id=args.run_id)
    except Cancelled:
        print("cancelled; the run is marked KILLED", file=sys.stderr)
        return 130
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
