"""Archive rows -> per-move episodes for the decision transformer.

A trajectory of the archive is a list of move lists; here it is flattened to one move
per step and closed by a STOP action, so the model learns where to stop:

    step t = 0..T:  bd_t  o_t  a_t      (a_T = STOP, o_T = the final pose)

- o_t, the observation, is the pose (cell, orientation) with what a walker sees of the
  scene there: the landmark it stands on, the nearest landmark and its relation ("north
  of the bed"), the last landmark visited and how many were visited so far (the BD's
  rule, `Tracker`), and where each landmark's nearest cell is, egocentric (steps ahead,
  steps to the left), all small integer codes (`SceneCodec`, 0 = none);
- bd_t, the behaviour descriptor as conditioning: the target's final cell and the
  landmarks still to visit, in order ("BD to go", the BD analogue of a decision
  transformer's return-to-go: it shrinks as the walk enters the landmarks in order),
  with where the final cell and the next landmark to visit are from here (egocentric);
  with `bd_to_go=False`, the whole target BD at every step;
- the instruction: the trajectory's description, by the rule describer (computed here)
  or by a describer whose descriptions the archive stores (`instruction`).

The split is by trajectory (seeded): an archive keeps one elite per BD, so every
validation trajectory has a BD key never seen in training. Training also carves a
model-selection split out of its own trajectories (`carve`): the checkpoint kept as
"best" is chosen on it, never on the held-out split the evaluation reports.

Hindsight relabelling (`window`): any stretch path[i..j] of a trajectory is itself a
trajectory from path[i], with its own BD (recomputed by the BD's rule) and its own rule
description; training draws such windows of the TRAINING trajectories, so the model
sees many more (start, BD, STOP) combinations than the archive's elites. A window whose
BD key or instruction belongs to the held-out (or model-selection) trajectories is never
used (`Relabeler`).

`archive_rows` + `prepare`: an archive run's rows -> the episodes and their splits
(`Dataset`), what training and `dt eval` both start from.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from lactchain.envs.gridworld import GOAL_REWARD, MOVE_COST, ORIENTATIONS, STEP
from lactchain.envs.scenes import Scene, get_scene

MOVES = ("move forward", "turn left", "turn right")
STOP = "stop"
ACTIONS = (*MOVES, STOP)
STOP_ID = ACTIONS.index(STOP)
IGNORE = -100  # the cross-entropy's ignore index: padded steps


def _xy(pose: Any) -> tuple[int, int]:
    if isinstance(pose, (dict, Mapping)):  # dict first: the ABC check is slow
        return int(pose["x"]), int(pose["y"])
    return int(pose.x), int(pose.y)


def _orientation(pose: Any) -> str:
    return pose["orientation"] if isinstance(pose, (dict, Mapping)) else pose.orientation


def _pose(pose: Any) -> tuple[int, int, str]:
    return (*_xy(pose), _orientation(pose))


class Tracker:
    """The landmarks a walk has entered, in order, one pose at a time: the rule of
    `lactchain.archive.trajectories.behaviour_descriptor` (re-entering the last one counts once)."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.visited: list[str] = []
        self.previous: str | None = None

    def see(self, pose: Any) -> None:
        here = self.scene.landmark_at(_xy(pose))
        if here is not None and here != self.previous and (not self.visited or self.visited[-1] != here):
            self.visited.append(here)
        self.previous = here


def remaining(target: Sequence[str], visited: Sequence[str]) -> list[str]:
    """The target's landmarks not yet visited in order: after its longest common prefix
    with `visited` (a walk that went astray keeps being asked for the rest)."""
    k = 0
    while k < min(len(target), len(visited)) and target[k] == visited[k]:
        k += 1
    return list(target[k:])


def egocentric(pose: Any, cell: Sequence[int]) -> tuple[int, int]:
    """(steps ahead, steps to the left) from `pose` to `cell` (negative: behind, right)."""
    (x, y), (fx, fy) = _xy(pose), STEP[_orientation(pose)]
    dx, dy = int(cell[0]) - x, int(cell[1]) - y
    return dx * fx + dy * fy, dy * fx - dx * fy


class SceneCodec:
    """Small integer codes for a scene's cells, orientations, landmarks, relations and
    egocentric offsets (0 = none); `max_visits` BD slots. `obs_sizes` / `bd_sizes`: the
    vocabulary of each field of an observation / BD token, in order."""

    def __init__(self, scene: Scene | Mapping[str, Any] | str, max_visits: int = 6) -> None:
        self.scene = get_scene(scene)
        self.size = self.scene.size
        self.max_visits = int(max_visits)
        self.landmarks = tuple(self.scene.names)
        cells = [(x, y) for x in range(self.size) for y in range(self.size)]
        self.relations = tuple(sorted({n for n in (self.scene.nearest_landmark(c) for c in cells) if n is not None}))
        self._near = {r: i + 1 for i, r in enumerate(self.relations)}
        self._landmark = {n: i + 1 for i, n in enumerate(self.landmarks)}
        self._obs: dict[tuple, list[int]] = {}  # memo: the features are pure functions of small keys
        self._bd: dict[tuple, list[int]] = {}

    @property
    def n_cells(self) -> int:
        return self.size * self.size

    @property
    def n_landmarks(self) -> int:  # + none
        return len(self.landmarks) + 1

    @property
    def n_near(self) -> int:  # + none
        return len(self.relations) + 1

    @property
    def n_offsets(self) -> int:  # -(size-1) .. size-1, + none
        return 2 * self.size

    @property
    def obs_sizes(self) -> list[int]:
        return [self.n_cells, len(ORIENTATIONS), self.n_landmarks, self.n_near, self.n_landmarks,
                self.max_visits + 1, *[self.n_offsets] * (2 * len(self.landmarks))]

    @property
    def bd_sizes(self) -> list[int]:
        return [self.n_cells, *[self.n_landmarks] * self.max_visits, *[self.n_offsets] * 4]

    def cell(self, xy: Sequence[int]) -> int:
        return int(xy[0]) * self.size + int(xy[1])

    def landmark(self, name: str | None) -> int:
        return self._landmark.get(name, 0) if name else 0

    def offset(self, pose: Any, cell: Sequence[int] | None) -> list[int]:
        if cell is None:
            return [0, 0]
        return [v + self.size for v in egocentric(pose, cell)]

    def _nearest_cell(self, pose: Any, name: str) -> tuple[int, int]:
        return self.scene.landmark(name).nearest_cell(_xy(pose))[0]

    def obs(self, pose: Any, tracker: Tracker) -> list[int]:
        key = (*_pose(pose), tracker.visited[-1] if tracker.visited else None, min(len(tracker.visited), self.max_visits))
        if key not in self._obs:
            x, y, o, last, n = key
            near = self.scene.nearest_landmark((x, y))
            marks = [v for name in self.landmarks for v in self.offset(pose, self._nearest_cell(pose, name))]
            self._obs[key] = [self.cell((x, y)), ORIENTATIONS.index(o), self.landmark(self.scene.landmark_at((x, y))),
                              self._near.get(near, 0) if near else 0, self.landmark(last), n, *marks]
        return self._obs[key]

    def bd(self, pose: Any, final: Sequence[int], visits: Sequence[str]) -> list[int]:
        """The BD token's fields seen from `pose`: final cell, the landmarks (to go), the
        final cell's and the next landmark's egocentric offsets."""
        key = (*_pose(pose), int(final[0]), int(final[1]), tuple(visits))
        if key not in self._bd:
            visits = list(visits)
            slots = [self.landmark(v) for v in visits[: self.max_visits]]
            nxt = self._nearest_cell(pose, visits[0]) if visits and visits[0] in self._landmark else None
            self._bd[key] = [self.cell(final), *slots, *[0] * (self.max_visits - len(slots)),
                             *self.offset(pose, final), *self.offset(pose, nxt)]
        return self._bd[key]


def instruction(row: Mapping[str, Any], describer: str = "rule", scene: Scene | None = None) -> str | None:
    """The row's instruction: the rule describer's sentence, or the first stored
    description by `describer` (matched on its describer or model name); None if none."""
    if describer == "rule":
        from lactchain.archive.describe import describe_rule

        return describe_rule(row, scene)
    for d in row.get("descriptions") or []:
        if describer in (d.get("describer"), d.get("model")) and str(d.get("text") or "").strip():
            return str(d["text"])
    return None


def moves_of(row: Mapping[str, Any]) -> list[str]:
    """The moves actually executed, one per pose after the start (an action list cut
    short by the goal stores its unexecuted tail too: the path is what happened)."""
    flat = [m for moves in row["actions"] for m in moves]
    return flat[: len(row["path"]) - 1]


@dataclass
class Episode:
    row: Mapping[str, Any]
    text: str
    obs: list[list[int]]  # T+1 steps x SceneCodec.obs_sizes
    bd: list[list[int]]  # T+1 steps x SceneCodec.bd_sizes
    actions: list[int]  # T+1 action ids, the last STOP
    rtg: list[float]  # return to go / 100, per step

    @property
    def key(self) -> str:
        return str(self.row.get("key") or "")

    @property
    def steps(self) -> int:
        return len(self.actions)


def move_rewards(path: Sequence[Any], goal: Sequence[int]) -> list[float]:
    """The env's reward per move: -1, and +100 for the move that reaches the goal."""
    return [MOVE_COST + (GOAL_REWARD if _xy(p) == tuple(goal) else 0.0) for p in path[1:]]


def episode(row: Mapping[str, Any], text: str, codec: SceneCodec, bd_to_go: bool = True) -> Episode:
    path, moves = row["path"], moves_of(row)
    final, target = row["bd"]["final"], list(row["bd"]["visited"])
    tracker = Tracker(codec.scene)
    obs, bd = [], []
    for pose in path:
        tracker.see(pose)
        obs.append(codec.obs(pose, tracker))
        bd.append(codec.bd(pose, final, remaining(target, tracker.visited) if bd_to_go else target))
    rewards = move_rewards(path, codec.scene.goal)
    rtg = [sum(rewards[t:]) / 100.0 for t in range(len(path))]
    return Episode(row, text, obs, bd, [ACTIONS.index(m) for m in moves] + [STOP_ID], rtg)


def window(row: Mapping[str, Any], i: int, j: int, scene: Scene) -> dict[str, Any]:
    """The trajectory row of path[i..j] (moves i..j-1): start, path, actions, BD, key."""
    from lactchain.archive.trajectories import behaviour_descriptor

    path = list(row["path"][i : j + 1])
    bd = behaviour_descriptor(scene, path)
    return {"env": row.get("env", "grid"), "env_kwargs": row.get("env_kwargs") or {}, "start": dict(path[0]),
            "path": path, "actions": [moves_of(row)[i:j]], "bd": bd.as_dict(), "key": bd.key,
            "policy": {"kind": "window", "of": row.get("key"), "from": i, "to": j}}


class Relabeler:
    """Random windows of training trajectories, never one with a held-out BD key or a
    held-out instruction that the training trajectories do not also have."""

    def __init__(self, codec: SceneCodec, describer: str, bd_to_go: bool, exclude_keys: set[str],
                 exclude_texts: set[str]) -> None:
        self.codec, self.describer, self.bd_to_go = codec, describer, bd_to_go
        self.exclude_keys, self.exclude_texts = exclude_keys, exclude_texts

    def sample(self, ep: Episode, rng: np.random.Generator) -> Episode:
        """A window of `ep` drawn uniformly over (i <= j), or `ep` itself when the window
        is excluded. With a stored (LLM) describer, a window has no description: its
        text is "" and training hides it (the window teaches the BD conditioning only)."""
        n = ep.steps - 1
        i = int(rng.integers(0, n + 1))
        j = int(rng.integers(i, n + 1))
        if (i, j) == (0, n):
            return ep
        row = window(ep.row, i, j, self.codec.scene)
        text = instruction(row, "rule", self.codec.scene) if self.describer == "rule" else ""
        if row["key"] in self.exclude_keys or text in self.exclude_texts:
            return ep
        return episode(row, text, self.codec, self.bd_to_go)


def split(n: int, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, validation) indices by trajectory, seeded; at least one of each when n >= 2."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_val = min(max(math.ceil(n * val_fraction), 1 if n >= 2 and val_fraction > 0 else 0), max(n - 1, 0))
    return sorted(order[n_val:]), sorted(order[:n_val])


def carve(indices: Sequence[int], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(rest, carved): a seeded `fraction` of `indices` set aside (at least one when
    fraction > 0 and two or more indices; never all). Training carves its model-selection
    split out of the training trajectories, so the evaluation's held-out split stays the
    one `split` gives whatever the selection fraction."""
    if fraction <= 0 or len(indices) < 2:
        return sorted(indices), []
    order = sorted(indices)
    random.Random(f"select-{seed}").shuffle(order)
    n = min(max(math.ceil(len(order) * fraction), 1), len(order) - 1)
    return sorted(order[n:]), sorted(order[:n])


class Tensors:
    """Every episode's steps padded to the longest, as tensors; `batch(idx)` cuts a
    batch to its own longest episode."""

    def __init__(self, episodes: Sequence[Episode], codec: SceneCodec) -> None:
        n, t_max = len(episodes), max((e.steps for e in episodes), default=1)
        obs = np.zeros((n, t_max, len(codec.obs_sizes)), dtype=np.int64)
        bd = np.zeros((n, t_max, len(codec.bd_sizes)), dtype=np.int64)
        act = np.full((n, t_max), IGNORE, dtype=np.int64)
        rtg = np.zeros((n, t_max), dtype=np.float32)
        for i, e in enumerate(episodes):
            obs[i, : e.steps], bd[i, : e.steps], act[i, : e.steps], rtg[i, : e.steps] = e.obs, e.bd, e.actions, e.rtg
        self.obs, self.bd, self.act, self.rtg = (torch.from_numpy(a) for a in (obs, bd, act, rtg))
        self.lengths = torch.tensor([e.steps for e in episodes])

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, idx: Sequence[int] | torch.Tensor) -> dict[str, torch.Tensor]:
        idx = torch.as_tensor(idx, dtype=torch.long)
        t = int(self.lengths[idx].max())
        return {"obs": self.obs[idx, :t], "bd": self.bd[idx, :t], "act": self.act[idx, :t], "rtg": self.rtg[idx, :t]}


# ---- an archive run's trajectories, split -------------------------------------------------

def archive_rows(registry: Any, archive: str) -> tuple[str, list[dict[str, Any]]]:
    """(run id, trajectory rows) of an archive run."""
    from lactchain.archive.store import read_rows

    run_id = registry.resolve_run_id(archive)
    art = registry.latest_artifact(run_id, "archive")
    if art is None or not Path(art["path"]).is_file():
        raise FileNotFoundError(f"run {run_id} has no archive file; fill one with `lactchain archive fill`")
    return run_id, read_rows(art["path"])


@dataclass
class Dataset:
    codec: SceneCodec
    episodes: list[Episode]  # the described trajectories, in archive order
    train: list[int]
    val: list[int]  # held out: what `dt eval` reports on
    undescribed: int  # trajectories without a description by the describer: left out
    select: list[int] = field(default_factory=list)  # carved out of train: picks the best checkpoint

    def texts(self, idx: Sequence[int]) -> list[str]:
        return [self.episodes[i].text for i in idx]


def prepare(rows: Sequence[Mapping[str, Any]], *, describer: str = "rule", max_visits: int = 6,
            bd_to_go: bool = True, val_fraction: float = 0.1, seed: int = 0,
            select_fraction: float = 0.0) -> Dataset:
    """Episodes of the described rows of one scene and their seeded split by trajectory
    (train, held-out val, and `select_fraction` of train carved out for model selection)."""
    if not rows:
        raise ValueError("the archive has no trajectories")
    scenes = {json.dumps((r.get("env_kwargs") or {}).get("scene"), sort_keys=True) for r in rows}
    if len(scenes) != 1:
        raise ValueError(f"the archive mixes {len(scenes)} scenes; a decision transformer learns one")
    codec = SceneCodec((rows[0].get("env_kwargs") or {}).get("scene"), max_visits)
    episodes, undescribed = [], 0
    for row in rows:
        text = instruction(row, describer, codec.scene)
        if text is None:
            undescribed += 1
            continue
        episodes.append(episode(row, text, codec, bd_to_go))
    if len(episodes) < 2:
        raise ValueError(f"only {len(episodes)} trajectory(ies) have a {describer!r} description; "
                         "at least 2 are needed (one to train on, one to hold out)")
    train, val = split(len(episodes), val_fraction, seed)
    train, select = carve(train, select_fraction, seed)
    return Dataset(codec, episodes, train, val, undescribed, select)
