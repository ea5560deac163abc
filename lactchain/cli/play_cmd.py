"""`lactchain play` prints with `render_summary` (the job: lactchain.jobs.rollouts), and
the actor/engine options the hand-written commands (pipeline, bench) still declare."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from lactchain.cli.common import console, fail
from lactchain.jobs.engine import ENGINE_HELP, EngineConfig
from lactchain.jobs.parts import ACTOR_HELP, ADAPTER_HELP

ActorOption = Annotated[str, typer.Option("--actor", help=ACTOR_HELP)]
AdapterOption = Annotated[Optional[str], typer.Option("--adapter", help=ADAPTER_HELP)]
ConstrainedOption = Annotated[
    bool,
    typer.Option("--constrained/--free", help="Grammar-constrained move lists (default), or free text + lenient parsing."),
]
EngineOption = Annotated[str, typer.Option("--engine", help=ENGINE_HELP)]


def choose_engine(engine: str, dtype: Optional[str], actor: str, adapter: Optional[str], db: Any) -> EngineConfig:
    """--engine / --dtype checked (one line, before any run), auto resolved: the job
    layer's one engine check (lactchain.jobs.engine.choose)."""
    from lactchain.cli.common import open_registry
    from lactchain.config import ConfigError
    from lactchain.jobs.engine import choose

    try:
        settings = EngineConfig(engine=engine, dtype=dtype)
        choose(None, settings, actor, adapter)
        if adapter:
            with open_registry(db) as registry:
                return choose(registry, settings, actor, adapter)
        return choose(None, settings, actor, adapter)
    except ConfigError as exc:
        fail(str(exc))
        raise


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"play {result['run_id']}", show_header=False)
    for key in ("episodes", "success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate",
                "lenient_parse_rate", "env_steps_per_s"):
        value = result[key]
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)
