"""What the loop keeps between its phases and reports about them: each start state's
elite (`EliteBuffer`), the state file a killed run resumes from, the result a run returns
(`PipelineResult`), and the live progress inside a phase (`PhaseProgress`)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lactchain.envs.replay import stored_state
from lactchain.runs.lifecycle import PROGRESS_METRIC, RunHandle
from lactchain.loop.labelers import Candidate, Group, execute_candidate
from lactchain.loop.config import TIE


# ---- the elites: best known move list per start state ---------------------------------

class EliteBuffer:
    """The best move list found so far for each start state. Elites re-enter every
    later group as a candidate, so they are re-scored with the current labeler and
    only replaced by something it ranks higher."""

    def __init__(self) -> None:
        self.elites: dict[Any, tuple[str, Candidate]] = {}

    def add_to(self, groups: list[Group], env: Any) -> None:
        """Each group's elite as a candidate, executed again on the group's deals."""
        for g in groups:
            if g.state in self.elites:
                _, elite = self.elites[g.state]
                g.candidates.append(execute_candidate(env, g, elite.moves, elite.text, elite.mode, "elite"))

    def stitch(self, groups: list[Group], env: Any) -> int:
        """Add, to each group, each of its candidates followed by the elite of the state
        it leads to (cut to the env's moves per action), executed from the
        group's state. Dynamic programming over the actor's own best pieces: a list
        that reaches the goal in one action is worth more than two that get there in
        two, and sampling alone rarely finds the long ones. Returns how many were added."""
        added = 0
        for g in groups:
            seen = {tuple(c.moves) for c in g.candidates}
            heads = [c for c in g.candidates if c.moves and not c.done]
            for head in heads:
                tail = self.elites.get(head.next_state)
                if tail is None or not tail[1].moves:
                    continue
                moves = (list(head.moves) + list(tail[1].moves))[: env.max_moves_per_action]
                if tuple(moves) in seen:
                    continue
                seen.add(tuple(moves))
                g.candidates.append(execute_candidate(env, g, moves, source="stitched"))
                added += 1
        return added

    @staticmethod
    def best_of(g: Group) -> Candidate | None:
        """The group's best valid candidate. Ties (same reward and next state: e.g. junk
        moves after the goal, which never run) go to the shortest list, then to the
        incumbent: targets only change for a better score or a shorter list, so they
        stop churning."""
        valid = [c for c in g.candidates if c.moves]
        if not valid:
            return None
        top = max(c.advantage for c in valid)
        tied = [c for c in valid if c.advantage >= top - TIE]
        return min(tied, key=lambda c: (len(c.moves), c.source != "elite"))

    def update(self, groups: list[Group]) -> int:
        """Take the best valid candidate of each scored group; returns how many changed."""
        changed = 0
        for g in groups:
            best = self.best_of(g)
            if best is None:
                continue
            old = self.elites.get(g.state)
            if old is None or list(old[1].moves) != list(best.moves):
                changed += 1
            self.elites[g.state] = (g.prompt, best)
        return changed

    def to_json(self) -> list[dict[str, Any]]:
        return [{"state": s.as_dict(), "prompt": prompt, **_candidate_json(c)} for s, (prompt, c) in self.elites.items()]

    @classmethod
    def from_json(cls, rows: list[dict[str, Any]], env: Any) -> "EliteBuffer":
        buffer = cls()
        for row in rows:
            buffer.elites[env.parse_state(row["state"])] = (row["prompt"], _candidate_from_json(row, env))
        return buffer

    def rows(self) -> list[dict[str, Any]]:
        """Training rows for rft: the user prompt and the elite move list."""
        return [{"prompt": prompt, "chosen": list(c.moves), "state": s.as_dict(), "score": c.advantage}
                for s, (prompt, c) in self.elites.items()]


def _candidate_json(c: Candidate) -> dict[str, Any]:
    return {"moves": list(c.moves), "text": c.text, "mode": c.mode, "reward": c.reward,
            "next_state": c.next_state.as_dict(), "done": c.done, "advantage": c.advantage, "source": c.source}


def _candidate_from_json(row: dict[str, Any], env: Any) -> Candidate:
    return Candidate(list(row["moves"]), row["text"], row["mode"], row["reward"],
                     stored_state(env, row["next_state"]), row["done"], row["advantage"], row["source"])


# ---- resume: the state after every finished phase ----------------------------------------

STATE_KIND = "pipeline-state"  # artifact kind (lactchain.runs.resume.CHECKPOINTS)
STATE_FILE = "pipeline_state.json"


def transitions_json(transitions: list[Any]) -> list[dict[str, Any]]:
    return [{"state": t.state.as_dict(), "moves": list(t.moves), "reward": t.reward,
             "next_state": t.next_state.as_dict(), "done": t.done} for t in transitions]


def transitions_from_json(rows: list[dict[str, Any]], env: Any) -> list[Any]:
    from lactchain.train.critic_td import Transition

    return [Transition(env.parse_state(r["state"]), tuple(r["moves"]), r["reward"],
                       stored_state(env, r["next_state"]), r["done"]) for r in rows]


def load_state(registry: Any, run_id: str) -> dict[str, Any] | None:
    """The saved state of a pipeline run (or of the runs it resumed), or None when it
    stopped before its first phase finished."""
    import json

    from lactchain.runs.resume import latest_checkpoint

    art = latest_checkpoint(registry, run_id, STATE_KIND)
    if art is None:
        return None
    try:
        return json.loads(Path(art["path"]).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{art['path']} cannot be read ({exc}); start the pipeline again") from None


def save_state(handle: RunHandle, state: dict[str, Any]) -> None:
    """Atomically replace the run's state file (registered once as its checkpoint)."""
    import json
    import os

    path = Path(handle.dir) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, default=str))
    os.replace(tmp, path)
    if handle.registry.latest_artifact(handle.run_id, STATE_KIND) is None:
        handle.registry.add_artifact(handle.run_id, STATE_KIND, path, meta={"what": "resume state"})


def record_adapter(handle: RunHandle, adapter: str | None, iteration: int) -> None:
    """Name the actor's adapter as of now on the pipeline run itself (an `adapter` artifact,
    added when it changes): `--adapter PIPELINE_RUN` then means the pipeline's trained actor,
    and the train-actor phase holding it is a run the pipeline reads (`runs delete` asks)."""
    if not adapter:
        return
    latest = handle.registry.latest_artifact(handle.run_id, "adapter")
    if latest is None or latest["path"] != adapter:
        handle.registry.add_artifact(handle.run_id, "adapter", adapter, step=iteration,
                                     meta={"what": f"the actor's adapter after iteration {iteration}"})


# ---- results ------------------------------------------------------------------------------

@dataclass
class PipelineResult:
    phases: list[dict[str, Any]] = field(default_factory=list)
    seconds_per_phase: dict[str, float] = field(default_factory=dict)
    t0: float = field(default_factory=time.time)

    def add(self, iteration: int, phase: str, run_id: str, seconds: float, metrics: dict[str, Any]) -> None:
        self.phases.append({"iteration": iteration, "phase": phase, "run_id": run_id, "seconds": seconds,
                            "wall_s": time.time() - self.t0, **metrics})
        self.seconds_per_phase[phase] = self.seconds_per_phase.get(phase, 0.0) + seconds

    def last(self, phase: str, iteration: int | None = None) -> dict[str, Any] | None:
        return next((p for p in reversed(self.phases)
                     if p["phase"] == phase and (iteration is None or p["iteration"] == iteration)), None)

    def curve(self) -> list[dict[str, Any]]:
        """One row per evaluated iteration: the learning curve."""
        rows = []
        moves_before: dict[int, int] = {}  # phase index of an evaluate -> env moves of the training data so far
        total = 0
        for i, p in enumerate(self.phases):
            total += int(p.get("env_moves") or 0)
            moves_before[i] = total
        for i, ev in enumerate(self.phases):
            if ev["phase"] != "evaluate":
                continue
            it = ev["iteration"]
            collect = self.last("collect", it) or {}
            critic = self.last("train-critic", it) or self.last("train-critic", 0) or {}
            rows.append({
                "iteration": it, "wall_s": ev["wall_s"], "success_rate": ev.get("success_rate"),
                "mean_optimal_ratio": ev.get("mean_optimal_ratio"), "mean_return": ev.get("mean_return"),
                "optimal_move_rate": ev.get("optimal_move_rate"), "greedy_expected_return": ev.get("greedy_expected_return"),
                "top_answer_share": ev.get("top_answer_share"), "distinct_answers": ev.get("distinct_answers"),
                "critic_spearman_vstar": critic.get("spearman_vstar"),
                "ranking_accuracy": collect.get("ranking_accuracy"), "pairs": collect.get("pairs"),
                "elites_optimal": collect.get("elites_optimal"), "env_moves": moves_before[i],
            })
        return rows

    def summary(self) -> dict[str, Any]:
        evals = [p for p in self.phases if p["phase"] == "evaluate"]
        before, after = (evals[0], evals[-1]) if evals else (None, None)
        critic = self.last("train-critic") or {}
        pick = ("success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate", "lenient_parse_rate",
                "top_answer_share", "distinct_answers", "optimal_move_rate", "optimal_mean_return", "greedy_expected_return")
        collects = [p for p in self.phases if p["phase"] == "collect" and p.get("ranking_accuracy") is not None]
        return {
            "before": {k: before.get(k) for k in pick} if before else None,
            "after": {k: after.get(k) for k in pick} if after else None,
            "critic_spearman_vstar": critic.get("spearman_vstar"),
            "ranking_accuracy": (sum(p["ranking_accuracy"] for p in collects) / len(collects)) if collects else None,
            "max_top_answer_share": max((p.get("top_answer_share") or 0.0 for p in evals), default=None),
            "iterations_done": max((p["iteration"] for p in self.phases), default=0),
            "seconds_per_phase": self.seconds_per_phase,
            "curve": self.curve(),
            "phases": self.phases,
        }


def seed_phase(seed: int, iteration: int, name: str) -> None:
    """Every phase starts from random states fixed by (seed, iteration, phase), not by all
    that ran before it: a resumed loop redoes its unfinished phase exactly as an
    uninterrupted one would (the critic's optimizer is restored beside its checkpoint)."""
    import random
    import zlib

    import numpy as np
    import torch

    value = (seed * 1_000_003 + iteration * 101 + zlib.crc32(name.encode())) % 2**32
    random.seed(value)
    np.random.seed(value)
    torch.manual_seed(value)


class PhaseProgress:
    """What happens inside a phase, live: a progress line on stderr (the pipeline's log)
    every few seconds, and the trainer's and the critic's figures on the pipeline run
    itself under `live/<phase>/<key>` at the phase's running step, so its log and chart
    move while a phase runs (the phase's own run has the full record). Also the run's
    `progress` (0..1, the console's Jobs column) as `fraction()` reads it, passed on to
    `on_progress` (a comparison's own progress over its cells), and the running phase's own
    `progress` on its child run (`child`, set by `run_phase`), as a standalone job has."""

    EVERY_S = 5.0

    def __init__(self, handle: RunHandle, on_progress: Callable[[float], None] | None = None) -> None:
        self.handle, self.on_progress = handle, on_progress
        self.fraction: Callable[[], float] | None = None  # set by the loop's state
        self.steps: dict[str, int] = {}  # each phase's running step of its live metrics
        self.child: RunHandle | None = None  # the running phase's own run (run_phase sets it)
        self._sent_at: dict[str, float] = {}  # when each throttled output last went out

    def _due(self, what: str, final: bool = False) -> bool:
        """True at most every EVERY_S seconds per `what` (always when `final`)."""
        now = time.time()
        if final or now - self._sent_at.get(what, float("-inf")) >= self.EVERY_S:
            self._sent_at[what] = now
            return True
        return False

    def tick(self, final: bool = False) -> None:
        """The run's progress, at most every EVERY_S seconds (or now, `final`: a phase ended)."""
        if self.fraction is None or not self._due("progress", final):
            return
        fraction = self.fraction()
        try:  # each value at the key's next step
            self.handle.log_metrics({PROGRESS_METRIC: fraction})
            if self.on_progress is not None:
                self.on_progress(fraction)
        except Exception:  # a busy registry must not stop the loop
            pass

    def moved(self, fraction: float) -> None:
        """The running phase is `fraction` done: its own run's `progress` (its row in the
        console's Jobs list moves as a standalone job's does), then the pipeline's."""
        child = self.child
        if child is not None and self._due(f"progress of {child.run_id}"):
            try:
                child.log_metrics({PROGRESS_METRIC: min(1.0, max(0.0, fraction))})
            except Exception:  # a busy registry must not stop the loop
                pass
        self.tick()

    def _say(self, final: bool, line: str) -> None:
        """`line` on the pipeline's log, at most every EVERY_S seconds (or now, `final`)."""
        if self._due("log line", final):
            print(line, file=sys.stderr, flush=True)

    def _figures(self, phase: str, metrics: dict[str, Any], shown: tuple[str, ...]) -> str:
        """A phase's figures on the pipeline run (each phase's series numbered 1, 2, ... over
        the run); returns `shown`'s figures as `k=v, ...` for the log."""
        numeric = numeric_metrics(metrics)
        self.steps[phase] = step = self.steps.get(phase, 0) + 1
        try:
            self.handle.log_metrics({f"live/{phase}/{k}": v for k, v in numeric.items()}, step=step)
        except Exception:  # a busy registry must not stop training
            pass
        return ", ".join(f"{k}={numeric[k]:.3g}" for k in shown if k in numeric)

    def trainer(self, iteration: int) -> Callable[[int, int, dict[str, float]], None]:
        def on_log(step: int, total: int, metrics: dict[str, float]) -> None:
            self.moved(step / total if total else 0.0)
            shown = self._figures("train-actor", metrics, ("loss", "reward", "margin"))
            if shown:  # the trainer's end-of-run summary has none of these
                self._say(step >= total, f"iteration {iteration} train-actor: step {step}/{total} {shown}")
        return on_log

    def rounds(self, iteration: int, total: int) -> Callable[[int, dict[str, float]], None]:
        """The critic's fit, round by round (the first fit of a run takes half a minute or
        more on a CPU, and said nothing until it ended)."""
        def on_round(rnd: int, metrics: dict[str, float]) -> None:
            self.moved(rnd / total if total else 0.0)
            shown = self._figures("train-critic", metrics, ("v_loss", "spearman_vstar"))
            if rnd < total:  # the last round's figures are the phase's own summary
                self._say(False, f"iteration {iteration} train-critic: round {rnd}/{total} {shown}")
        return on_round

    def episodes(self, iteration: int, phase: str) -> Callable[[Any], None]:
        """A rollout's lock-steps (`RolloutProgress`): an evaluation of 1,000 Blackjack deals
        takes a minute on a CPU, and said nothing until it ended."""
        def on_progress(progress: Any) -> None:
            self.moved(progress.done / progress.total if progress.total else 0.0)
            if progress.finished < progress.total:  # the phase's summary says the end
                self._say(False, f"iteration {iteration} {phase}: {progress.finished}/{progress.total} episodes, "
                          f"{progress.env_steps} env steps")
        return on_progress

    def states(self, iteration: int, phase: str, total: int) -> Callable[[int], None]:
        done = [0]

        def on_progress(n: int) -> None:
            done[0] += n
            self.moved(done[0] / total if total else 0.0)
            self._say(done[0] >= total, f"iteration {iteration} {phase}: {done[0]}/{total} states")
        return on_progress


def numeric_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v}
