"""`bench dt` as a job of the table: archive fill, dt train and dt eval as child runs of
one recorded bench run, whose report (dt.json, an artifact) and mean rates (metrics)
stay in the registry. The bench: `lactchain.bench.dt`."""

from __future__ import annotations

from typing import Any

from lactchain.bench.dt import DTBenchConfig, run_dt_bench
from lactchain.config import ConfigError
from lactchain.jobs.output import record_report, stage_lines
from lactchain.jobs.spec import Job


def _precheck(config: DTBenchConfig) -> None:
    """Every `dt train` the bench will run is a valid config that passes its checks, before
    the archive fill (minutes) and before any run exists."""
    from lactchain.archive.dt.train_config import DTTrainConfig
    from lactchain.jobs.dt import DT_TRAIN

    for encoder in config.encoder_names:
        try:
            train = DTTrainConfig.from_params(config.train_values("the-bench-archive", encoder, config.seed_list[0]))
            if DT_TRAIN.precheck is not None:
                DT_TRAIN.precheck(train)
        except ConfigError as exc:
            raise ConfigError(f"--train-args {config.train_args!r}: {exc}") from None


def run_bench_dt(handle: Any, config: DTBenchConfig) -> dict[str, Any]:
    from lactchain.jobs.archive import ARCHIVE_FILL
    from lactchain.jobs.dt import DT_EVAL, DT_TRAIN
    from lactchain.jobs.launch import child_steps

    report = run_dt_bench(config, child_steps(handle, ARCHIVE_FILL, DT_TRAIN, DT_EVAL),
                          stage_lines(handle, prefix="bench dt: "))
    for encoder, values in report["mean"].items():
        handle.log_metrics({f"{encoder}/{k}": float(v) for k, v in values.items() if isinstance(v, (int, float))})
    return record_report(handle, report, "dt.json", "bench dt report")


BENCH_DT = Job(kind="bench", command="bench dt", config=DTBenchConfig, run=run_bench_dt,
               title="Benchmark the decision transformer", precheck=_precheck,
               name=lambda c: f"bench dt ({c.encoders}, seeds {c.seeds})",
               doc=("Fill an archive, train a DT per text encoder and seed for the same budget, evaluate on held-out "
                    "BDs and instructions against the no-text baseline and the planner (an oracle), and report the "
                    "targets (BD reached >= 0.90, landmark order >= 0.80).\n\n"
                    "Each step is one of the lab's jobs, recorded as a child run of the bench's run; the report is "
                    "dt.json in its folder."))
