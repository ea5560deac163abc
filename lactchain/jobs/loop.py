"""The learning loop as a job: `pipeline` runs lactchain.pipeline over child runs
(train-critic, evaluate, collect, train-actor), resumable at its first unfinished phase."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lactchain.config import option
from lactchain.jobs.checks import resolve_adapter
from lactchain.jobs.engine import EngineConfig, choose
from lactchain.jobs.output import err_console
from lactchain.jobs.spec import Job
from lactchain.pipeline import PipelineConfig


@dataclass
class PipelineJobConfig(PipelineConfig):
    """The loop's config plus where a resume continues from."""

    resume_from: str | None = option(None, "Continue this killed or failed pipeline run at its first unfinished "
                                           "phase: its finished phases (and their child runs) are kept, with their "
                                           "elites, critic and adapter. `lactchain runs resume RUN` passes it.")

    def record_params(self) -> dict[str, Any]:
        params = self.params()
        params.pop("resume_from", None)
        return {**params, **({"resume_from": self.resume_from} if self.resume_from else {})}


def _engine(registry: Any, config: PipelineJobConfig) -> str:
    return choose(registry, EngineConfig(engine=config.engine), config.actor, config.adapter).engine


def _precheck(config: PipelineJobConfig) -> None:
    _engine(None, config)


def _prepare(registry: Any, config: PipelineJobConfig) -> dict[str, Any]:
    config.engine = _engine(registry, config)  # auto: the engine that will run
    return {"engine": config.engine}


def run_pipeline_job(handle: Any, config: PipelineJobConfig) -> dict[str, Any]:
    from lactchain.pipeline import load_state, run_pipeline
    from lactchain.strategies import resolve_strategy

    resume_from = config.resume_from
    state = load_state(handle.registry, resume_from) if resume_from else None
    if resume_from:
        kept = len(state["phases"]) if state else 0
        err_console.print(f"resuming {resume_from}: {kept} finished phase(s) kept" if kept else
                          f"resuming {resume_from}: no phase had finished; starting from the beginning")
    start_adapter = (state or {}).get("adapter") or resolve_adapter(handle.registry, config.adapter)
    text = resolve_strategy(handle.registry, config.strategy, config.env).text if config.strategy else None
    fields = {f: getattr(config, f) for f in PipelineConfig.__dataclass_fields__}
    run_cfg = PipelineConfig(**{**fields, "adapter": start_adapter, "strategy": text})
    with err_console.status("pipeline") as status:
        return run_pipeline(handle, run_cfg, resume=state,
                            on_phase=lambda it, name: status.update(f"iteration {it}: {name}"))


PIPELINE = Job(kind="pipeline", command="pipeline", config=PipelineJobConfig, run=run_pipeline_job, title="Pipeline",
               name=lambda c: f"pipeline {c.actor} x{c.iterations}", precheck=_precheck, prepare=_prepare,
               resume_field="resume_from",
               doc="""Run the loop: train a critic by TD on random move lists, then repeat
    collect (K samples + greedy + elite per start state, ranked by the labeler)
    -> train-actor -> evaluate. Each phase is a child run of one pipeline run; the
    LoRA adapter continues across iterations. A baseline evaluation comes first,
    so the result says before and after. On a stochastic env (--env blackjack) every
    candidate of a start state is played on the same --deals deals.""")
