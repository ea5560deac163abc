"""What a job is: a run kind, its config dataclass, and the function that runs it.

The CLI command, the console's Jobs form and the detached process are all derived
from a `Job`: nothing else lists a job's options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Job:
    """One kind of background work.

    kind: the registry's run kind (`runs list --kind`).
    command: the CLI command ("evaluate", "bench rollout").
    config: the Config dataclass: its fields are the CLI options, the form fields and
        the run's params.
    run: `run(handle, config) -> result dict`, the job body (library code only).
    name: the run's name from its config.
    precheck: `precheck(config)`, checks that need no registry (an engine that is not
        installed), made before the registry is even opened; raises ConfigError.
    prepare: `prepare(registry, config) -> extra params`, checks made before a run
        exists (references to other runs, models, engines); raises ConfigError.
    resume_field: the config field a resume sets to the old run id (None: the job is
        started again, not resumed).
    title: the console form's title; doc: the command's --help text.
    """

    kind: str
    command: str
    config: type
    run: Callable[[Any, Any], dict[str, Any]]
    title: str
    doc: str
    name: Callable[[Any], str] = lambda config: ""
    precheck: Callable[[Any], None] | None = None
    prepare: Callable[[Any, Any], dict[str, Any]] | None = None
    resume_field: str | None = None
    detachable: bool = True
