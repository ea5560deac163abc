"""The decision transformer's jobs (grid-only by nature: it acts on archive trajectories):
`dt train` (kind dt, resumable from the newest checkpoint of its lineage) and `dt eval`
(kind dt-eval: closed-loop on the held-out trajectories, against the no-text baseline
and the planner, an oracle)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lactchain.config import Config, ConfigError, option
from lactchain.archive.dt.train_config import DTTrainConfig
from lactchain.jobs.archive import load_archive
from lactchain.jobs.checks import run_of_kind
from lactchain.jobs.output import LineLog
from lactchain.jobs.spec import Job


def _precheck_train(config: DTTrainConfig) -> None:
    if config.text_encoder in ("learned", "none"):
        return
    from lactchain.models.presets import CRITIC, check_spec

    try:
        check_spec(config.text_encoder, CRITIC)
    except ValueError as exc:
        raise ConfigError(f"--text-encoder {config.text_encoder}: {exc}; use learned, or a sentence encoder "
                          "(minilm-l6)") from None


def _prepare_train(registry: Any, config: DTTrainConfig) -> dict[str, Any]:
    """The archive resolved (with descriptions by --describer), a resume of a dt run."""
    archive_id, rows = load_archive(registry, config.archive, "--archive")
    if config.describer != "rule":
        from lactchain.archive.dt.data import instruction

        described = sum(instruction(r, config.describer) is not None for r in rows)
        if described < 2:
            raise ConfigError(f"--describer {config.describer}: {described} trajectory(ies) of archive {archive_id} "
                              "have a description by it; describe the archive first, or use --describer rule")
    config.archive = archive_id
    if config.resume_from:
        config.resume_from = run_of_kind(registry, "--resume-from", config.resume_from, ("dt",), "a dt run")["id"]
        old = registry.params(config.resume_from)
        for name in MODEL_SHAPE:  # a resume continues the checkpoint's model: its shape cannot change
            if name in old and old[name] != getattr(config, name):
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} {getattr(config, name)}: run {config.resume_from} was trained with "
                                  f"{old[name]}; a resume keeps the model's shape: drop {flag} (or start a new run)")
        if _usable_checkpoint("--resume-from", config.resume_from, registry, "dt", optimizer=True) is None:
            raise ConfigError(f"--resume-from {config.resume_from}: it (and the runs it resumed) kept no checkpoint "
                              "on disk; start a fresh run without --resume-from")
    return {"archive": archive_id, "resume_from": config.resume_from}


def _usable_checkpoint(name: str, run_id: str, registry: Any, kind: str, optimizer: bool = False) -> Any:
    """The checkpoint of `kind` a job will load (passing over damaged ones), checked to
    load (one ConfigError line naming the file), or None when the run kept none."""
    from lactchain.archive.dt.checkpoints import check_checkpoint
    from lactchain.runs.resume import latest_checkpoint

    try:
        found = latest_checkpoint(registry, run_id, kind)
        if found is not None:
            check_checkpoint(found["path"], optimizer=optimizer)
    except ValueError as exc:
        raise ConfigError(f"{name} {run_id}: {exc}") from None
    return found


# The settings that fix a dt model's parameters (a resume must keep them).
MODEL_SHAPE = ("n_layer", "n_head", "n_embd", "text_encoder", "no_text", "max_visits", "rtg", "bd_to_go",
               "tie_actions", "absolute_cells")


def run_dt_train(handle: Any, config: DTTrainConfig) -> dict[str, Any]:
    from lactchain.archive.dt.train import train_dt

    line = LineLog(every_s=0.0)
    line(f"dt train: archive {config.archive}, text {config.text_encoder}, {config.steps} steps"
         + (f" or {config.minutes:g} min" if config.minutes else ""), force=True)

    def on_log(step: int, m: dict[str, float]) -> None:
        line(f"step {step}/{config.steps}: loss {m['loss']:.4f}"
             + (f"  val {m['val_loss']:.4f}  acc {m['val_accuracy']:.3f}" if "val_loss" in m else "")
             + f"  {m['steps_per_s']:.1f} steps/s")

    return train_dt(handle, config, on_log=on_log)


DT_TRAIN = Job(kind="dt", command="dt train", config=DTTrainConfig, run=run_dt_train, title="Decision transformer",
               name=lambda c: f"dt {c.text_encoder} on {c.archive}", precheck=_precheck_train,
               prepare=_prepare_train, resume_field="resume_from",
               doc="""Train a decision transformer (a small GPT) on an archive: the instruction's tokens,
    then [BD, observation, action] per move, a STOP action at the end; cross-entropy
    over the moves. Split by trajectory; resumable.""")


@dataclass
class DTEvalConfig(Config):
    dt_run: str = option("", "A dt run (its best checkpoint by model selection; see --checkpoint).", flag="RUN")
    baseline: str | None = option(None, "A no-text dt run trained on the same split (dt train --no-text, same "
                                        "--archive/--seed/--val-fraction).")
    limit: int | None = option(None, "Evaluate the first N held-out trajectories.", min=1)
    goal: bool = option(True, "Also measure success on the grid's goal from every start pose.", negative="--no-goal")
    goal_starts: int | None = option(None, "Goal success from a seeded sample of N start poses (default: every "
                                           "non-goal pose).", min=1)
    checkpoint: str = option("best", "best: the checkpoint with the best closed-loop score on the selection split "
                                     "(the newest for runs without one); last: the newest.",
                             choices=("best", "last"))  # lactchain.archive.dt.evaluate.CHECKPOINTS

    def check(self) -> None:
        if not self.dt_run:
            self.refuse("dt_run", "give the dt run to evaluate (lactchain dt train)")


def _prepare_eval(registry: Any, config: DTEvalConfig) -> dict[str, Any]:
    """Both runs are dt runs with a checkpoint on disk that loads."""
    config.dt_run = run_of_kind(registry, "RUN", config.dt_run, ("dt",), "a dt run (lactchain dt train)")["id"]
    if config.baseline:
        config.baseline = run_of_kind(registry, "--baseline", config.baseline, ("dt",), "a dt run")["id"]
        base = registry.params(config.baseline)
        if not (base.get("no_text") or base.get("text_encoder") == "none"):
            raise ConfigError(f"--baseline {config.baseline}: it reads instructions (text encoder "
                              f"{base.get('text_encoder')}); the baseline is a no-text run: `lactchain dt train "
                              "--no-text` on the same archive and seed")
    for name, rid in (("RUN", config.dt_run), ("--baseline", config.baseline)):  # what evaluate will load
        best = _usable_checkpoint(name, rid, registry, "dt-best") if rid and config.checkpoint == "best" else None
        if rid and best is None and _usable_checkpoint(name, rid, registry, "dt") is None:
            raise ConfigError(f"{name} {rid}: the run has no checkpoint yet; wait for its first one "
                              "(--checkpoint-every)")
    return {"dt_run": config.dt_run, "baseline": config.baseline}


def run_dt_eval(handle: Any, config: DTEvalConfig) -> dict[str, Any]:
    from lactchain.archive.dt.evaluate import evaluate_run

    result = evaluate_run(handle.registry, config.dt_run, baseline=config.baseline, limit=config.limit,
                          goal=config.goal, goal_starts=config.goal_starts, checkpoint=config.checkpoint)
    result["dt_run"] = result.pop("run_id")
    handle.log_metrics({k: float(v) for k, v in result["summary"].items() if v is not None})
    return result


DT_EVAL = Job(kind="dt-eval", command="dt eval", config=DTEvalConfig, run=run_dt_eval, title="Evaluate a DT",
              name=lambda c: f"dt eval {c.dt_run}", prepare=_prepare_eval,
              doc="""Roll the decision transformer out on held-out instructions and BDs: BD-reached rate,
    landmark-order match, goal success; against the no-text baseline and the planner
    (an oracle).""")
