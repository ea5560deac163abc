"""`bench dt`: the decision transformer's targets (issue 13) in one recorded run.

Fill an archive, train a decision transformer per text encoder (the learned tokenizer,
the no-text baseline, optionally the frozen MiniLM) for the same time budget on each
seed's split, evaluate each on its held-out trajectories; the report holds per seed and
encoder the steps trained, the selected checkpoint and the headline rates, the mean over
seeds, the targets and whether each is met. Every step is the lab's own job (`archive
fill`, `dt train`, `dt eval`), run in this process as a child run of the bench's run.
No torch at the top: the CLI and the job table import the config at start-up.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Callable

from lactchain.config import Config, ConfigError, argv_values, option

TARGETS = {"bd_reached_heldout_bds": 0.90, "order_match_heldout_instructions": 0.80}
ENCODERS = ("learned", "none", "minilm-l6")
# What the bench sets or runs itself: not for --train-args.
OWNED = ("--detach", "--db", "--json", "--run-id", "--archive", "--seed", "--resume-from", "--text-encoder", "--no-text")


@dataclass
class DTBenchConfig(Config):
    """The archive's size, the budget per model, the encoders and seeds compared."""

    behaviours: int = option(100_000, "Behaviours the archive fill tries (flat scene).", short="-n", min=10,
                             max=10_000_000)
    minutes: float = option(10.0, "Training budget per model.", min=0.01, max=100_000.0)
    steps: int = option(100_000, "Step cap per model (the minutes usually end training first).", min=1,
                        max=10_000_000)
    encoders: str = option("learned,none", "Comma-separated text encoders: learned, none (the no-text baseline), "
                                           "minilm-l6.")
    seeds: str = option("0", "Comma-separated seeds: each one a split, init and batch order.")
    threads: int = option(1, "torch threads per model.", min=1, max=256)
    goal_starts: int | None = option(64, "Goal success from N seeded start poses (default: every one).", min=1)
    train_args: str = option("", "More `dt train` options, as one string (e.g. \"--n-layer 1 --n-embd 32\").")

    def check(self) -> None:
        names = [e.strip() for e in self.encoders.split(",") if e.strip()]
        if not names or any(e not in ENCODERS for e in names):
            self.refuse("encoders", f"use a comma-separated list of {', '.join(ENCODERS)}")
        self.encoders = ",".join(dict.fromkeys(names))
        try:
            seeds = [int(s) for s in self.seeds.split(",") if s.strip()]
        except ValueError:
            seeds = []
        if not seeds or any(s < 0 for s in seeds):
            self.refuse("seeds", "give one or more non-negative integers, e.g. 0,1,2")
        self.seeds = ",".join(str(s) for s in dict.fromkeys(seeds))
        try:
            given = {a.split("=")[0] for a in shlex.split(self.train_args)}
        except ValueError as exc:
            self.refuse("train_args", f"{exc}; e.g. --train-args \"--n-layer 1\"")
        owned = sorted(given & set(OWNED))
        if owned:  # the benchmark runs (and waits for) each training itself, on its own archive and seeds
            self.refuse("train_args", f"{', '.join(owned)} belong to the benchmark, not to each training; leave them "
                                      "out (--seeds, --encoders and --db are the benchmark's own options)")
        self.extra_train_values()

    def extra_train_values(self) -> dict[str, Any]:
        """--train-args as `dt train` config values (ConfigError: an option it does not have)."""
        from lactchain.archive.dt.train_config import DTTrainConfig

        try:
            return argv_values(DTTrainConfig, shlex.split(self.train_args))
        except (ValueError, ConfigError) as exc:
            raise ConfigError(f"--train-args {self.train_args!r}: {exc}") from None

    @property
    def encoder_names(self) -> list[str]:
        return self.encoders.split(",")

    @property
    def seed_list(self) -> list[int]:
        return [int(s) for s in self.seeds.split(",")]

    def train_values(self, archive: str, encoder: str, seed: int) -> dict[str, Any]:
        """One training's `dt train` values: the budget, the extra options, its encoder and seed."""
        return {"steps": self.steps, "minutes": self.minutes, "threads": self.threads, **self.extra_train_values(),
                "archive": archive, "text_encoder": encoder, "seed": seed}


Step = Callable[[str, dict[str, Any]], dict[str, Any]]  # (job command, values) -> {"run_id", **result}


def _mean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def run_dt_bench(cfg: DTBenchConfig, step: Step, say: Callable[[str], None]) -> dict[str, Any]:
    """The report: every seed's runs and evaluations, the means, the targets met."""
    say(f"archive fill --behaviours {cfg.behaviours}")
    filled = step("archive fill", {"scene": "flat", "behaviours": cfg.behaviours})
    goal = {"goal_starts": cfg.goal_starts} if cfg.goal_starts else {}
    per_seed: dict[str, dict[str, Any]] = {}
    for seed in cfg.seed_list:
        runs: dict[str, dict[str, Any]] = {}
        for encoder in cfg.encoder_names:
            say(f"seed {seed}: dt train --text-encoder {encoder} ({cfg.minutes:g} min)")
            trained = step("dt train", cfg.train_values(filled["run_id"], encoder, seed))
            runs[encoder] = {"run_id": trained["run_id"], "steps": trained["steps"],
                             "train_seconds": trained["train_seconds"], "best": trained.get("best"),
                             "tokenizer": trained.get("tokenizer")}
        baseline = runs.get("none", {}).get("run_id")
        for encoder, run in runs.items():
            if encoder == "none":
                continue
            say(f"seed {seed}: dt eval ({encoder})")
            run["eval"] = step("dt eval", {"dt_run": run["run_id"], "baseline": baseline, **goal})["summary"]
        if "none" in runs and len(runs) == 1:  # the baseline alone
            runs["none"]["eval"] = step("dt eval", {"dt_run": baseline, **goal})["summary"]
        per_seed[str(seed)] = runs
    mean: dict[str, dict[str, float | None]] = {}
    for encoder in cfg.encoder_names:
        keys = sorted({k for runs in per_seed.values() for k in (runs[encoder].get("eval") or {})})
        mean[encoder] = {k: _mean([(runs[encoder].get("eval") or {}).get(k) for runs in per_seed.values()])
                         for k in keys}
    met = {encoder: {k: (mean[encoder].get(k) or 0.0) >= target for k, target in TARGETS.items()}
           for encoder in cfg.encoder_names if encoder != "none"}
    return {"archive": {k: filled[k] for k in ("run_id", "elites", "coverage", "tried") if k in filled},
            "minutes": cfg.minutes, "threads": cfg.threads, "seeds": cfg.seed_list,
            "train_args": shlex.split(cfg.train_args), "runs": per_seed, "mean": mean, "targets": TARGETS, "met": met}
