"""Every episode run by hand in the Lab is recorded like any other: one `play` run per
console session (params `source: console`), an episode row per Lab episode and a steps
row per action, so it can be labelled, archived and browsed in Runs; each finished
episode logs the play job's episode_return and episode_success, and the success rate so far.

The run is a container, not a job (no process to watch): FINISHED from its first step,
its end time following the last step. All methods run on the registry thread."""

from __future__ import annotations

from typing import Any

from lactchain.runs.registry import now_ms


class LabRecorder:
    def __init__(self) -> None:
        self.run_id: str | None = None
        self.params: dict[str, Any] = {}  # what the run's params say (who played, where)
        self.episode_id: int | None = None
        self.episodes = 0
        self.finished, self.wins = 0, 0  # episodes of this run played to their end, and those that succeeded
        self.total = 0.0
        self.moves = 0

    def record(self, reg: Any, record: Any, params: dict[str, Any]) -> str:
        """Store one Lab step (a `lab_session.StepRecord`); returns the run id. A step played
        by another actor or adapter than the run's params name starts a new run, at its
        episode's first step (params are write-once: they must say who played)."""
        if self.run_id is not None and record.index == 1 and params != self.params:
            self.run_id, self.episode_id, self.episodes, self.finished, self.wins = None, None, 0, 0, 0
        if self.run_id is None:
            self.params = dict(params)
            self.run_id = reg.create_run("play", name="console episodes", params={"source": "console", **params})
            reg.update_run(self.run_id, status="FINISHED", started_ms=now_ms())
        with reg.transaction():
            if record.index == 1 or self.episode_id is None:  # the first action after a reset
                self.episode_id = reg.add_episode(self.run_id, idx=self.episodes, start_state=record.state.as_dict(),
                                                  length=0, seed=getattr(record, "seed", None))
                self.episodes += 1
                self.total, self.moves = 0.0, 0
            self.total += record.reward
            self.moves += len(record.moves)
            done = record.terminated or record.truncated
            reg.add_steps(self.run_id, [{
                "episode_id": self.episode_id, "t": record.index - 1, "state": record.state.as_dict(),
                "prompt": record.prompt, "completion": record.text, "moves": list(record.moves),
                "parse_mode": record.mode, "reward": record.reward, "next_state": record.next_state.as_dict(),
                "done": done, "terminated": record.terminated, "caption": record.caption, "logprob": record.logprob,
            }])
            if done:
                success = bool(getattr(record, "success", record.terminated))
                reg.update_episode(self.episode_id, return_=self.total, length=record.index, success=success,
                                   moves_used=self.moves)
                # what a play job logs per episode, and its success rate so far (a job logs it at its end):
                # `runs list` and the Runs chart show both runs alike
                self.finished, self.wins = self.finished + 1, self.wins + success
                reg.log_metrics(self.run_id, {"episode_return": self.total, "episode_success": float(success),
                                              "success_rate": self.wins / self.finished}, step=self.episodes - 1)
            reg.update_run(self.run_id, ended_ms=now_ms())
        return self.run_id
