"""The job layer: every long task as a library function over a run handle and a config.

`JOBS` (lactchain.jobs.table) maps a job (its CLI command) to its config dataclass and its
function; the CLI's commands, the console's Jobs forms and detaching
(`python -m lactchain.jobs JOB config.json`) are all derived from it.
The run lifecycle itself (registry row, heartbeat, SIGTERM -> KILLED) lives one
layer down in `lactchain.runs.lifecycle`, so library code (the pipeline) can use it.
"""

from lactchain.runs.lifecycle import (ACTIVE, HEARTBEAT_S, STALE_AFTER_S, Cancelled, RunHandle, detach, kill_run,
                                 own_process_group, pid_alive, reap_dead_runs, run_context, show_dead, strip_detach)

__all__ = ["ACTIVE", "HEARTBEAT_S", "STALE_AFTER_S", "Cancelled", "RunHandle", "detach", "kill_run",
           "own_process_group", "pid_alive", "reap_dead_runs", "run_context", "show_dead", "strip_detach"]
