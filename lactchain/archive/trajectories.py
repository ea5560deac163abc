"""Replayable trajectories on the grid's scenes: behaviour descriptors, coarse semantic
annotations and replay verification (issue 12, seed 003). Grid-only by nature: a
trajectory is a path of poses over a scene's cells and landmarks.

A `Trajectory` is everything a replay needs: the env id and kwargs (the scene as a
dict, so a later change to a bundled scene cannot silently change it), the start
state, the seed, the move lists as executed, who produced them (`policy`), and what
was observed: the path of poses. From the path and the scene:

- the behaviour descriptor (BD) = the final cell and the ordered landmarks visited
  (entering a landmark's cells; staying or re-entering the same one at once counts once),
  e.g. final (5, 2) via sofa > bed; its key "5,2|sofa>bed" is what MAP-Elites bins on;
- the annotations = at each timestep where the relation to the nearest landmark
  changes, that relation ("t=3 north of the fridge"), never per trajectory by hand.

`verify` replays the actions from the start state and checks every transition and the
final BD against what is stored; the first diverging step names the mismatch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from lactchain.envs.catalog import make_env
from lactchain.envs.scenes import Scene, get_scene


@dataclass(frozen=True)
class BehaviourDescriptor:
    final: tuple[int, int]
    visited: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.final[0]},{self.final[1]}|{'>'.join(self.visited)}"

    def as_dict(self) -> dict[str, Any]:
        return {"final": list(self.final), "visited": list(self.visited)}


def _xy(pose: Any) -> tuple[int, int]:
    if isinstance(pose, Mapping):
        return int(pose["x"]), int(pose["y"])
    if hasattr(pose, "x"):
        return int(pose.x), int(pose.y)
    return int(pose[0]), int(pose[1])


def behaviour_descriptor(scene: Scene, path: Sequence[Any]) -> BehaviourDescriptor:
    """The final cell and the landmarks entered along `path`, in order (see the module doc)."""
    if not path:
        raise ValueError("a trajectory's path has at least its start pose")
    visited: list[str] = []
    previous: str | None = None
    for pose in path:
        here = scene.landmark_at(_xy(pose))
        if here is not None and here != previous and (not visited or visited[-1] != here):
            visited.append(here)
        previous = here
    return BehaviourDescriptor(_xy(path[-1]), tuple(visited))


def annotate(scene: Scene, path: Sequence[Any]) -> list[dict[str, Any]]:
    """[{t, relation, landmark, text}] at t = 0 and wherever the relation to the nearest
    landmark changes along `path` (turning in place changes nothing); [] without landmarks."""
    out: list[dict[str, Any]] = []
    last: tuple[str, str] | None = None
    for t, pose in enumerate(path):
        near = scene.nearest_landmark(_xy(pose))
        if near is None:
            return []
        if near != last:
            name, relation = near
            out.append({"t": t, "landmark": name, "relation": relation, "text": f"{relation} the {name}"})
            last = near
    return out


@dataclass
class Trajectory:
    env: str
    env_kwargs: dict[str, Any]
    start: dict[str, Any]
    seed: int | None
    actions: list[list[str]]
    path: list[dict[str, Any]]  # poses: the start, then one per move executed
    rewards: list[float]
    policy: dict[str, Any] = field(default_factory=dict)
    bd: dict[str, Any] = field(default_factory=dict)
    annotations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def scene(self) -> Scene:
        return get_scene(self.env_kwargs.get("scene"))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Trajectory":
        missing = {"env", "env_kwargs", "start", "seed", "actions", "path", "rewards"} - set(data)
        if missing:
            raise ValueError(f"a trajectory needs {sorted(missing)}")
        if not isinstance(data["start"], Mapping):
            raise ValueError(f"its start {str(data['start'])[:40]!r} is not a pose {{x, y, orientation}}")
        if not isinstance(data["env_kwargs"], Mapping):
            raise ValueError("its env_kwargs are not an object")
        if not isinstance(data["actions"], list) or not all(isinstance(a, list) for a in data["actions"]):
            raise ValueError("its actions are not a list of move lists")
        return cls(**{k: data[k] for k in ("env", "env_kwargs", "start", "seed", "actions", "path", "rewards")},
                   policy=dict(data.get("policy") or {}), bd=dict(data.get("bd") or {}),
                   annotations=list(data.get("annotations") or []))


def _scene_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The env's kwargs as stored: the scene as its full dict, all of it plain JSON."""
    kwargs = dict(env_kwargs)
    kwargs["scene"] = get_scene(kwargs.get("scene")).as_dict()
    return json.loads(json.dumps(kwargs))


def play(actions: Sequence[Sequence[str]], start: Any = None, *, env_kwargs: Mapping[str, Any] | None = None,
         seed: int | None = None, policy: Mapping[str, Any] | None = None, env: str = "grid") -> Trajectory:
    """Execute `actions` (move lists) from `start` and record the trajectory with its BD and
    annotations. Moves after the episode ends are not executed (nor stored)."""
    kwargs = _scene_kwargs(env_kwargs or {})
    text_env = make_env(env, **kwargs)
    options = {"state": text_env.parse_state(start).as_dict()} if start is not None else None
    text_env.reset(seed=seed, options=options)
    path, rewards, done_actions = [text_env.state.as_dict()], [], []
    for moves in actions:
        _, reward, terminated, truncated, info = text_env.step(list(moves))
        done_actions.append(list(info["moves"])[:info["moves_executed"]])  # not the moves after the goal
        rewards.append(float(reward))
        path.extend(p.as_dict() for p in text_env.path[len(path):])
        if terminated or truncated:
            break
    scene = get_scene(kwargs["scene"])
    return Trajectory(env, kwargs, path[0], seed, done_actions, path, rewards, dict(policy or {}),
                      behaviour_descriptor(scene, path).as_dict(), annotate(scene, path))


@dataclass(frozen=True)
class Mismatch:
    step: int  # the action index where the replay first diverged (-1: the start or the BD)
    what: str

    def __str__(self) -> str:
        return f"step {self.step}: {self.what}" if self.step >= 0 else self.what


def verify(trajectory: Trajectory) -> Mismatch | None:
    """Replay the stored actions from the stored start; None when every transition, the
    rewards and the BD match, else the first divergence."""
    try:
        replay = play(trajectory.actions, trajectory.start, env_kwargs=trajectory.env_kwargs, seed=trajectory.seed,
                      env=trajectory.env)
    except ValueError as exc:  # an unknown scene, landmark or move: not replayable as stored
        return Mismatch(-1, f"cannot replay: {exc}")
    if replay.start != trajectory.start:
        return Mismatch(-1, f"start {trajectory.start} does not reset to itself (got {replay.start})")
    if len(replay.actions) != len(trajectory.actions):
        return Mismatch(len(replay.actions) - 1,
                        f"the episode ended after {len(replay.actions)} of {len(trajectory.actions)} actions")
    cursor = 1
    for i, (moves, reward) in enumerate(zip(replay.actions, replay.rewards)):
        stored = trajectory.actions[i]
        if i == len(replay.actions) - 1:  # older files kept the moves after the goal: not executed
            stored = stored[:len(moves)]
        if moves != stored:
            return Mismatch(i, f"moves {trajectory.actions[i]} executed as {moves}")
        n = len(moves)
        got, want = replay.path[cursor:cursor + n], trajectory.path[cursor:cursor + n]
        if got != want:
            return Mismatch(i, f"reached {got[-1] if got else None}, stored {want[-1] if want else None}")
        if abs(reward - trajectory.rewards[i]) > 1e-9:
            return Mismatch(i, f"reward {reward}, stored {trajectory.rewards[i]}")
        cursor += n
    if replay.bd != trajectory.bd:
        return Mismatch(-1, f"behaviour descriptor {replay.bd}, stored {trajectory.bd}")
    return None
