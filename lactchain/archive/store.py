"""The trajectory archive, MAP-Elites style (issue 12, seed 003): diverse, replayable
behaviours on a scene, one elite per behaviour descriptor (the shortest).

Grid-only by nature: behaviours are paths over a scene's cells and landmarks, so this
module uses the grid's poses, moves and planner directly (not the generic TextEnv seam).

Behaviours come from random walks and from the exact planner driven to random target
cells and through random landmark sequences, from random start poses. Coverage is
measured against every BD the scene allows with at most `max_landmarks` landmarks
visited (`reachable_bds`: a BFS over (pose, landmarks so far), stopping at the goal
where an episode ends), so "distinct BDs / reachable BDs" is exact, not an estimate.
"""

from __future__ import annotations

import json
import os
import random
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from lactchain.envs import Planner
from lactchain.envs.catalog import make_env
from lactchain.envs.gridworld import ORIENTATIONS, State, apply_move
from lactchain.envs.scenes import get_scene
from lactchain.archive.trajectories import Trajectory, play

SOURCES = ("random-walk", "planner-target", "planner-landmarks")
MOVES = ("move forward", "turn left", "turn right")


def bd_key(final: tuple[int, int], visited: tuple[str, ...]) -> str:
    return f"{final[0]},{final[1]}|{'>'.join(visited)}"


def reachable_bds(scene_name: str, max_landmarks: int = 2) -> set[str]:
    """Every BD key a trajectory can end with, visiting at most `max_landmarks` landmarks."""
    scene = get_scene(scene_name)
    goal = tuple(scene.goal)
    seen: set[tuple[State, tuple[str, ...]]] = set()
    queue: deque[tuple[State, tuple[str, ...]]] = deque()
    walls = frozenset(scene.walls)
    for x, y in sorted(scene.open_cells()):  # x-major, as before walls
        if (x, y) == goal:
            continue
        here = scene.landmark_at((x, y))
        if here and max_landmarks < 1:
            continue  # starting on a landmark visits it
        for o in ORIENTATIONS:
            node = (State(x, y, o), (here,) if here else ())
            seen.add(node)
            queue.append(node)
    while queue:
        state, visited = queue.popleft()
        if (state.x, state.y) == goal:
            continue  # the episode ends here
        for move in MOVES:
            nxt = apply_move(state, move, scene.size, walls=walls).state
            here = scene.landmark_at((nxt.x, nxt.y))
            was = scene.landmark_at((state.x, state.y))
            seq = visited + (here,) if here and here != was and (not visited or visited[-1] != here) else visited
            node = (nxt, seq)
            if len(seq) <= max_landmarks and node not in seen:
                seen.add(node)
                queue.append(node)
    return {bd_key((s.x, s.y), v) for s, v in seen}


@dataclass
class Archive:
    scene: str
    elites: dict[str, Trajectory] = field(default_factory=dict)
    tried: int = 0
    by_source: dict[str, int] = field(default_factory=dict)

    def offer(self, t: Trajectory) -> bool:
        """Keep `t` if its BD is new or it is shorter than the elite there."""
        self.tried += 1
        key = bd_key(tuple(t.bd["final"]), tuple(t.bd["visited"]))
        old = self.elites.get(key)
        if old is None or len(t.path) < len(old.path):
            self.elites[key] = t
            return True
        return False

    def coverage(self, reachable: set[str]) -> dict[str, Any]:
        return coverage(set(self.elites), reachable, self.tried)


def coverage(keys: set[str], reachable: set[str], tried: int) -> dict[str, Any]:
    """Elites, distinct BDs found / reachable BDs, and BDs beyond the bound, for BD keys."""
    found = keys & reachable
    return {"elites": len(keys), "reachable_bds": len(reachable), "covered_bds": len(found),
            "coverage": len(found) / len(reachable) if reachable else 0.0,
            "beyond_bound": len(keys - reachable), "tried": tried}


@lru_cache(maxsize=None)
def _planner_to(scene_name: str, target: tuple[int, int]) -> Any:
    """The exact planner with `target` as its goal: one per cell, reused by every route."""
    return Planner(make_env("grid", scene=scene_name, goal=target, moves=MOVES, max_moves_per_action=1))


def _route(scene: Any, start: State, targets: list[tuple[int, int]]) -> list[str]:
    """The planner's moves from `start` through each target cell in turn."""
    moves: list[str] = []
    state = start
    for target in targets:
        if (state.x, state.y) == tuple(target):
            continue
        leg = _planner_to(scene.name, tuple(target)).plan(state)
        for move in leg:
            state = apply_move(state, move, scene.size, walls=frozenset(scene.walls)).state
        moves += leg
    return moves


def _chunks(moves: list[str], size: int) -> list[list[str]]:
    return [moves[i:i + size] for i in range(0, len(moves), size)] or [[]]


def fill(scene_name: str, behaviours: int, seed: int = 0, moves_per_action: int = 8,
         on_progress: Callable[[int, Archive], None] | None = None) -> Archive:
    """Generate `behaviours` trajectories (the sources in turn) and keep the elites."""
    if behaviours < 1:
        raise ValueError(f"behaviours must be >= 1, got {behaviours}")
    scene = get_scene(scene_name)
    rng = random.Random(seed)
    archive = Archive(scene.name)
    starts = [s for s in make_env("grid", scene=scene.name).start_states()]
    cells = [c for c in sorted(scene.open_cells()) if c != tuple(scene.goal)]
    kwargs = {"scene": scene.name, "moves": MOVES, "max_moves_per_action": moves_per_action, "max_actions": 64}
    for i in range(behaviours):
        source = SOURCES[i % len(SOURCES)]
        start = rng.choice(starts)
        if source == "random-walk":
            moves = [rng.choice(MOVES) for _ in range(rng.randint(1, 4 * scene.size))]
        elif source == "planner-target":
            moves = _route(scene, start, [rng.choice(cells)])
        else:
            marks = rng.sample(scene.names, rng.randint(1, min(3, len(scene.names)))) if scene.names else []
            moves = _route(scene, start, [rng.choice(scene.landmark(m).cells) for m in marks])
        t = play(_chunks(moves, moves_per_action), start, env_kwargs=kwargs, seed=seed,
                 policy={"kind": source, "seed": seed, "index": i})
        archive.by_source[source] = archive.by_source.get(source, 0) + archive.offer(t)
        if on_progress is not None:
            on_progress(i + 1, archive)
    return archive


ARCHIVE_FILE = "archive.jsonl"


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The trajectory rows of an archive file (one JSON object per line); a ValueError
    naming the line for a truncated or foreign file."""
    rows = []
    for n, text in enumerate(Path(path).read_text().splitlines(), 1):
        try:
            row = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"{path} line {n} is not JSON (a truncated archive?); fill it again") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path} line {n} is not a trajectory object")
        rows.append(row)
    return rows


def write_rows(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write an archive file atomically (a temporary file renamed over it): a crash
    mid-write leaves the old file whole."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    os.replace(tmp, path)
    return path


POLICY_PARAMS = ("actor", "adapter", "strategy", "strategy_version", "temperature", "constrained", "seed")


def from_episode(episode: Mapping[str, Any], steps: list[Mapping[str, Any]], run_params: Mapping[str, Any],
                 run_id: str) -> Trajectory:
    """A play run's grid episode as a trajectory: its steps' move lists replayed from the
    episode's start, each transition checked against the recorded next state (a
    ValueError names the first that differs), with the policy that played it."""
    kwargs = {"scene": run_params.get("scene") or "empty", "max_actions": run_params.get("max_actions", 64)}
    policy = {"kind": "llm", "run_id": run_id, **{k: run_params[k] for k in POLICY_PARAMS if k in run_params}}
    t = play([list(s["moves"] or []) for s in steps], episode["start_state"], env_kwargs=kwargs,
             seed=episode.get("seed"), policy=policy)
    cursor = 0
    for i, step in enumerate(steps[:len(t.actions)]):
        cursor += len(t.actions[i])
        got, want = t.path[cursor], step.get("next_state") or {}
        if {k: got[k] for k in ("x", "y")} != {k: want.get(k) for k in ("x", "y")}:
            raise ValueError(f"step {i}: replay reached {got}, the run recorded {want}")
    if len(t.actions) != len(steps):
        raise ValueError(f"replay ended after {len(t.actions)} of {len(steps)} steps")
    return t


def merge(rows: Iterable[Mapping[str, Any]], new: Iterable[Trajectory]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """An archive's rows offered `new` trajectories, MAP-Elites style (a new BD, or a
    shorter path than the elite there); rows kept whole (their descriptions too)."""
    elites: dict[str, dict[str, Any]] = {}
    for row in rows:
        elites[row["key"]] = dict(row)
    stats = {"offered": 0, "new_bds": 0, "shorter": 0}
    for t in new:
        stats["offered"] += 1
        key = bd_key(tuple(t.bd["final"]), tuple(t.bd["visited"]))
        old = elites.get(key)
        if old is None or len(t.path) < len(old["path"]):
            stats["new_bds" if old is None else "shorter"] += 1
            elites[key] = {"key": key, **t.as_dict()}
    return list(elites.values()), stats
