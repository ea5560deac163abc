"""`lactchain bench dt`: the decision transformer's targets (issue 13) in one command.

Fill an archive, train a decision transformer per text encoder (the learned tokenizer,
the no-text baseline, optionally the frozen MiniLM) for the same time budget on each
seed's split, evaluate each on its held-out trajectories, and print one JSON object:
per seed and encoder the steps trained, the selected checkpoint and the headline
rates; the mean over seeds; the targets and whether each is met. Every step is the
real job (`archive fill`, `dt train`, `dt eval`, lactchain.jobs), run in this process
with its command's own parsing and checks, each a run in the registry (`--db` keeps
them; default: a temporary one).
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from lactchain.cli.common import JsonOption, console, err_console, fail, finite, print_json

TARGETS = {"bd_reached_heldout_bds": 0.90, "order_match_heldout_instructions": 0.80}
ENCODERS = ("learned", "none", "minilm-l6")


def _lactchain(args: list[str], db: Path, what: str) -> dict[str, Any]:
    """Run the job `args` names (archive fill, dt train, dt eval) in this process, parsed as
    its command parses it; its result, or the bench ends with the job's one-line error."""
    from lactchain.cli.generate import call_job
    from lactchain.config import ConfigError
    from lactchain.jobs.table import JOBS

    job = JOBS[" ".join(args[:2])]
    try:
        return call_job(job, args[2:], db)
    except ConfigError as exc:
        fail(f"bench dt: {what} failed: {exc}")
        raise


def _check_train_args(encoders: list[str], extra: list[str], given: str) -> None:
    """Every `dt train` the bench will run parses and passes its checks, before the archive
    fill (minutes) and before any run exists."""
    from lactchain.cli.generate import parse_job
    from lactchain.config import ConfigError
    from lactchain.jobs.table import JOBS

    for encoder in encoders:
        try:
            parse_job(JOBS["dt train"], ["--archive", "the-bench-archive", "--text-encoder", encoder, *extra])
        except ConfigError as exc:
            fail(f"--train-args {given!r}: {str(exc).removeprefix('dt train: ')}")


def _mean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def bench_dt(
    behaviours: Annotated[int, typer.Option("--behaviours", "-n", min=10, max=10_000_000,
                                            help="Behaviours the archive fill tries (flat scene).")] = 100_000,
    minutes: Annotated[float, typer.Option("--minutes", callback=finite, min=0.01, help="Training budget per model.")] = 10.0,
    steps: Annotated[int, typer.Option("--steps", min=1, max=10_000_000, help="Step cap per model (the minutes "
                                       "usually end training first).")] = 100_000,
    encoders: Annotated[str, typer.Option("--encoders", help="Comma-separated text encoders: learned, none (the "
                                          "no-text baseline), minilm-l6.")] = "learned,none",
    seeds: Annotated[str, typer.Option("--seeds", help="Comma-separated seeds: each one a split, init and "
                                       "batch order.")] = "0",
    threads: Annotated[int, typer.Option("--threads", min=1, max=256, help="torch threads per model.")] = 1,
    goal_starts: Annotated[Optional[int], typer.Option("--goal-starts", min=1, help="Goal success from N seeded "
                                                       "start poses (default: every one).")] = 64,
    train_args: Annotated[str, typer.Option("--train-args", help="More `dt train` options, as one string "
                                            "(e.g. \"--n-layer 1 --n-embd 32\").")] = "",
    db: Annotated[Optional[Path], typer.Option("--db", help="Keep the runs in this registry (default: a "
                                               "temporary one).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Fill an archive, train a DT per text encoder and seed for the same budget, evaluate on
    held-out BDs and instructions against the no-text baseline and the planner (an oracle),
    and report the targets (BD reached >= 0.90, landmark order >= 0.80)."""
    names = [e.strip() for e in encoders.split(",") if e.strip()]
    bad = [e for e in names if e not in ENCODERS]
    if not names or bad:
        fail(f"--encoders {encoders!r}: use a comma-separated list of {', '.join(ENCODERS)}")
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
        extra = shlex.split(train_args)
    except ValueError as exc:
        fail(f"--seeds / --train-args: {exc}; e.g. --seeds 0,1 --train-args \"--n-layer 1\"")
    if not seed_list or any(s < 0 for s in seed_list):
        fail(f"--seeds {seeds!r}: give one or more non-negative integers, e.g. 0,1,2")
    owned = sorted({a.split("=")[0] for a in extra} & {"--detach", "--db", "--json", "--run-id", "--archive", "--seed",
                                                       "--resume-from", "--text-encoder", "--no-text"})
    if owned:  # the benchmark runs (and waits for) each training itself, on its own archive and seeds
        fail(f"--train-args {train_args!r}: {', '.join(owned)} belong to the benchmark, not to each training; "
             "leave them out (--seeds, --encoders and --db are the benchmark's own options)")

    _check_train_args(names, extra, train_args)

    with tempfile.TemporaryDirectory(prefix="lactchain-bench-dt-") as tmp:
        registry = Path(db) if db else Path(tmp) / "registry.db"
        say = err_console.print
        say(f"bench dt: archive fill --behaviours {behaviours}")
        filled = _lactchain(["archive", "fill", "--scene", "flat", "--behaviours", str(behaviours)], registry,
                            "archive fill")
        budget = ["--steps", str(steps), "--minutes", f"{minutes:g}", "--threads", str(threads)]
        per_seed: dict[str, dict[str, Any]] = {}
        for seed in seed_list:
            runs: dict[str, dict[str, Any]] = {}
            for encoder in names:
                say(f"bench dt: seed {seed}: dt train --text-encoder {encoder} ({minutes:g} min)")
                trained = _lactchain(["dt", "train", "--archive", filled["run_id"], "--text-encoder", encoder,
                                      "--seed", str(seed), *budget, *extra], registry, f"dt train ({encoder})")
                runs[encoder] = {"run_id": trained["run_id"], "steps": trained["steps"],
                                 "train_seconds": trained["train_seconds"], "best": trained.get("best"),
                                 "tokenizer": trained.get("tokenizer")}
            baseline = runs.get("none", {}).get("run_id")
            for encoder, run in runs.items():
                if encoder == "none":
                    continue
                say(f"bench dt: seed {seed}: dt eval ({encoder})")
                args = ["dt", "eval", run["run_id"]] + (["--baseline", baseline] if baseline else [])
                args += ["--goal-starts", str(goal_starts)] if goal_starts else []
                run["eval"] = _lactchain(args, registry, f"dt eval ({encoder})")["summary"]
            if "none" in runs and len(runs) == 1:  # the baseline alone
                args = ["dt", "eval", baseline] + (["--goal-starts", str(goal_starts)] if goal_starts else [])
                runs["none"]["eval"] = _lactchain(args, registry, "dt eval (none)")["summary"]
            per_seed[str(seed)] = runs

        mean: dict[str, dict[str, float | None]] = {}
        for encoder in names:
            keys = sorted({k for runs in per_seed.values() for k in (runs[encoder].get("eval") or {})})
            mean[encoder] = {k: _mean([(runs[encoder].get("eval") or {}).get(k) for runs in per_seed.values()])
                             for k in keys}
        text_encoders = [e for e in names if e != "none"]
        met = {encoder: {k: (mean[encoder].get(k) or 0.0) >= target for k, target in TARGETS.items()}
               for encoder in text_encoders}
        result = {"archive": {k: filled[k] for k in ("run_id", "elites", "coverage", "tried") if k in filled},
                  "minutes": minutes, "threads": threads, "seeds": seed_list, "train_args": extra,
                  "runs": per_seed, "mean": mean, "targets": TARGETS, "met": met,
                  "db": str(registry) if db else None}
    if as_json:
        print_json(result)
        return
    from rich.table import Table

    table = Table(title=f"bench dt: {result['archive'].get('elites')} elites, {minutes:g} min per model, "
                        f"seeds {seeds}")
    cols = ("bd_reached_heldout_bds", "order_match_heldout_instructions", "order_match_unseen_instructions",
            "goal_success", "baseline_bd_reached", "baseline_order_match_instructions", "planner_bd_reached")
    table.add_column("encoder")
    for col in cols:
        table.add_column(col.replace("_", " "))
    for encoder, values in mean.items():
        table.add_row(encoder, *("-" if values.get(c) is None else f"{values[c]:.3f}" for c in cols))
    console.print(table)
    for encoder, checks in met.items():
        console.print(f"{encoder}: " + ", ".join(f"{k} {'met' if ok else 'NOT met'} (target {TARGETS[k]:.2f})"
                                                  for k, ok in checks.items()))
