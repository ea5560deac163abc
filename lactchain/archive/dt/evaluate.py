"""Evaluating the decision transformer closed-loop on the grid (`lactchain dt eval`).

Each held-out trajectory of the archive (the training run's validation split: every
one has a BD key never seen in training) gives a task: its start pose, its instruction
and its BD. The model acts greedily from the start pose, one move per step, until it
says STOP, reaches the grid's goal (the episode ends there, as in the env) or runs out
of steps (its `max_steps`). Conditions ("modes"): the instruction and the BD
(`text+bd`), the BD only (`bd`), the instruction only (`text`); the no-text baseline
has `bd` and `none` (unconditioned behaviour cloning).

Metrics per mode, rates in [0, 1]:
- bd_reached: the produced path's BD (final cell + landmarks entered, in order) equals
  the target's (`lactchain.archive.trajectories.behaviour_descriptor`);
- order_match: the landmarks the instruction mentions, in order
  (`describe.mentioned_order`), equal the produced path's landmark order
  (`describe.reference_order`: visited, then the one it stops nearest to);
- *_unseen: the same over tasks whose instruction text never occurs in training;
- stopped: ended by STOP (not by the step cap or the goal).

Goal success: from every non-goal pose of the scene, asked for the BD "final cell =
the grid's goal, no landmark" (and its rule description): the rate of reaching the goal.

The planner is an ORACLE: an exact BFS over (pose, target landmarks entered so far)
given the target BD, the shortest path whose BD is exactly the target (an upper bound,
1.0 on every reachable BD; it reads the BD, never the instruction).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from lactchain.archive.describe import describe_rule, mentioned_order, reference_order
from lactchain.archive.dt.checkpoints import BEST_KIND, CHECKPOINT_KIND, load_checkpoint
from lactchain.archive.dt.data import (ACTIONS, STOP_ID, Episode, SceneCodec, Tracker, archive_rows, move_rewards, prepare,
                               remaining)
from lactchain.envs.gridworld import GOAL_REWARD, MOVE_COST, ORIENTATIONS, State, apply_move
from lactchain.envs.scenes import Scene
from lactchain.archive.trajectories import annotate, behaviour_descriptor

MODES = {"text+bd": (True, True), "bd": (False, True), "text": (True, False), "none": (False, False)}


@dataclass
class Task:
    start: dict[str, Any]
    text: str
    final: tuple[int, int]
    visited: tuple[str, ...]
    rtg: float = 0.0  # the return to go to ask for, / 100 (models trained with rtg)

    @classmethod
    def of(cls, ep: Episode) -> "Task":
        row = ep.row
        return cls(dict(row["start"]), ep.text, tuple(row["bd"]["final"]), tuple(row["bd"]["visited"]), ep.rtg[0])


def _state(pose: Any) -> State:
    return pose if isinstance(pose, State) else State(int(pose["x"]), int(pose["y"]), str(pose["orientation"]))


@torch.no_grad()
def rollout(model: Any, text: Any, tasks: Sequence[Task], *, use_text: bool = True, use_bd: bool = True,
            max_steps: int | None = None) -> list[dict[str, Any]]:
    """Act greedily on every task in lock-step; per task: path (poses), moves, stopped."""
    cfg = model.cfg
    model.eval()
    codec = SceneCodec(cfg.scene, cfg.max_visits)
    scene, goal = codec.scene, tuple(codec.scene.goal)
    cap = min(max_steps or cfg.max_steps, cfg.max_steps)
    n = len(tasks)
    obs = np.zeros((n, cap, len(codec.obs_sizes)), dtype=np.int64)
    bd = np.zeros((n, cap, len(codec.bd_sizes)), dtype=np.int64)
    act = np.zeros((n, cap), dtype=np.int64)
    rtg = np.zeros((n, cap), dtype=np.float32)
    text_t = text.encode([t.text for t in tasks]) if (text is not None and use_text and n) else {}
    if cfg.text_encoder == "learned" and "text_ids" not in text_t:
        text_t = {"text_ids": torch.zeros(n, cfg.text_len, dtype=torch.long)}  # masked out below anyway
    elif cfg.use_text and cfg.text_encoder != "learned" and "text_vec" not in text_t:
        text_t = {"text_vec": torch.zeros(n, cfg.text_dim)}
    text_on = torch.full((n,), bool(use_text and cfg.use_text))
    bd_on = torch.full((n,), bool(use_bd))
    states = [_state(t.start) for t in tasks]
    out = [{"path": [s], "moves": [], "stopped": False} for s in states]
    trackers = [Tracker(scene) for _ in tasks]
    returns = [t.rtg for t in tasks]
    active = [(s.x, s.y) != goal for s in states]
    for tr, s in zip(trackers, states):
        tr.see(s)
    for t in range(cap):
        live = [i for i in range(n) if active[i]]
        if not live:
            break
        for i in live:
            obs[i, t] = codec.obs(states[i], trackers[i])
            bd[i, t] = codec.bd(states[i], tasks[i].final, remaining(tasks[i].visited, trackers[i].visited)
                                    if cfg.bd_to_go else tasks[i].visited)
            rtg[i, t] = returns[i]
        idx = torch.tensor(live)
        batch = {"obs": torch.from_numpy(obs[live, : t + 1]), "bd": torch.from_numpy(bd[live, : t + 1]),
                 "act": torch.from_numpy(act[live, : t + 1]), "rtg": torch.from_numpy(rtg[live, : t + 1]),
                 **{k: v[idx] for k, v in text_t.items()}}
        choice = model(batch, text_on=text_on[idx], bd_on=bd_on[idx])[:, t].argmax(-1).tolist()
        for i, a in zip(live, choice):
            act[i, t] = a
            if a == STOP_ID:
                out[i]["stopped"], active[i] = True, False
                continue
            move = ACTIONS[a]
            states[i] = apply_move(states[i], move, scene.size, walls=frozenset(scene.walls)).state
            trackers[i].see(states[i])
            out[i]["path"].append(states[i])
            out[i]["moves"].append(move)
            returns[i] -= move_rewards(out[i]["path"][-2:], goal)[0] / 100.0
            if (states[i].x, states[i].y) == goal:
                active[i] = False  # the episode ends at the goal
    return out


def plan(scene: Scene, start: Any, final: Sequence[int] | None, visited: Sequence[str] | None) -> list[str] | None:
    """ORACLE: the shortest moves from `start` whose path's BD is exactly (final,
    visited); `visited=None`: any landmarks. None when no path has that BD."""
    from lactchain.archive.store import MOVES

    goal, final = tuple(scene.goal), tuple(final) if final is not None else None
    target = list(visited) if visited is not None else None
    s0 = _state(start)
    tr = Tracker(scene)
    tr.see(s0)
    if target is not None and tr.visited != target[: len(tr.visited)]:
        return None
    k0 = len(tr.visited) if target is not None else 0

    def done(s: State, k: int) -> bool:
        return (s.x, s.y) == final and (target is None or k == len(target))

    if done(s0, k0):
        return []
    seen, queue = {(s0, k0)}, deque([(s0, k0, [])])
    while queue:
        s, k, moves = queue.popleft()
        if (s.x, s.y) == goal:
            continue  # terminal
        was = scene.landmark_at((s.x, s.y))
        for move in MOVES:
            nxt = apply_move(s, move, scene.size, walls=frozenset(scene.walls)).state
            here, nk = scene.landmark_at((nxt.x, nxt.y)), k
            if target is not None and here is not None and here != was and (k == 0 or target[k - 1] != here):
                if k >= len(target) or target[k] != here:
                    continue  # would enter a landmark the BD does not list here
                nk = k + 1
            if (nxt, nk) in seen:
                continue
            if done(nxt, nk):
                return moves + [move]
            seen.add((nxt, nk))
            queue.append((nxt, nk, moves + [move]))
    return None


def _path(scene: Scene, start: Any, moves: Sequence[str]) -> list[State]:
    path = [_state(start)]
    for m in moves:
        path.append(apply_move(path[-1], m, scene.size, walls=frozenset(scene.walls)).state)
    return path


def score(scene: Scene, task: Task, path: Sequence[State]) -> dict[str, bool]:
    bd = behaviour_descriptor(scene, path)
    return {"bd_reached": bd.final == tuple(task.final) and bd.visited == tuple(task.visited),
            "order_match": mentioned_order(task.text, scene.names) == reference_order({"bd": bd.as_dict()}, scene),
            "goal": (path[-1].x, path[-1].y) == tuple(scene.goal)}


def _rates(scored: Sequence[dict[str, bool]], unseen: Sequence[bool], extra: Sequence[dict[str, Any]] = ()) -> dict:
    n = len(scored)
    if not n:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for key in ("bd_reached", "order_match"):
        out[key] = sum(s[key] for s in scored) / n
        hits = [s[key] for s, u in zip(scored, unseen) if u]
        out[f"{key}_unseen"] = sum(hits) / len(hits) if hits else None
    if extra:
        out["stopped"] = sum(e["stopped"] for e in extra) / n
        out["mean_moves"] = sum(len(e["moves"]) for e in extra) / n
    return out


def evaluate_model(model: Any, text: Any, tasks: Sequence[Task], unseen: Sequence[bool],
                   modes: Sequence[str]) -> dict[str, Any]:
    scene = SceneCodec(model.cfg.scene).scene
    out = {}
    for mode in modes:
        use_text, use_bd = MODES[mode]
        runs = rollout(model, text, tasks, use_text=use_text, use_bd=use_bd)
        out[mode] = _rates([score(scene, t, r["path"]) for t, r in zip(tasks, runs)], unseen, runs)
    return out


def goal_tasks(scene: Scene, rtg: float = 0.0, starts: int | None = None, seed: int = 0) -> list[Task]:
    """From every non-goal pose (or a seeded sample of `starts` of them): reach the goal
    without a landmark, as a BD and its rule description."""
    import random

    goal = tuple(scene.goal)
    text = describe_rule({"bd": {"final": list(goal), "visited": []}}, scene)
    tasks = [Task({"x": x, "y": y, "orientation": o}, text, goal, (), rtg)
             for x, y in sorted(scene.open_cells()) for o in ORIENTATIONS if (x, y) != goal]
    if starts and starts < len(tasks):
        tasks = random.Random(seed).sample(tasks, starts)
    return tasks


def goal_success(model: Any, text: Any, modes: Sequence[str], rtg: float = 0.0, starts: int | None = None,
                 seed: int = 0) -> dict[str, float]:
    scene = SceneCodec(model.cfg.scene).scene
    tasks = goal_tasks(scene, rtg, starts, seed)
    out = {}
    for mode in modes:
        use_text, use_bd = MODES[mode]
        runs = rollout(model, text, tasks, use_text=use_text, use_bd=use_bd)
        out[mode] = sum((r["path"][-1].x, r["path"][-1].y) == tuple(scene.goal) for r in runs) / len(tasks)
    return out


def reaches_goal(scene: Scene) -> set[State]:
    """The poses from which some move sequence reaches the goal (a fixed point)."""
    from lactchain.archive.store import MOVES

    poses = [State(x, y, o) for x, y in sorted(scene.open_cells()) for o in ORIENTATIONS]
    good = {p for p in poses if (p.x, p.y) == tuple(scene.goal)}
    walls = frozenset(scene.walls)
    grew = True
    while grew:
        new = {p for p in poses if p not in good and any(apply_move(p, m, scene.size, walls=walls).state in good for m in MOVES)}
        good |= new
        grew = bool(new)
    return good


def evaluate_planner(scene: Scene, tasks: Sequence[Task], unseen: Sequence[bool], goal_starts: int | None = None,
                     seed: int = 0) -> dict[str, Any]:
    scored, moves, unreachable = [], [], 0
    for t in tasks:
        found = plan(scene, t.start, t.final, t.visited)
        unreachable += found is None
        path = _path(scene, t.start, found or [])
        scored.append(score(scene, t, path))
        moves.append(len(found or []))
    out = {"oracle": True, **_rates(scored, unseen), "unreachable": unreachable,
           "mean_moves": sum(moves) / len(moves) if moves else 0.0}
    goal, good = goal_tasks(scene, starts=goal_starts, seed=seed), reaches_goal(scene)
    out["goal_success"] = sum(_state(t.start) in good for t in goal) / len(goal)
    return out


def max_return(episodes: Sequence[Episode]) -> float:
    return max((e.rtg[0] for e in episodes), default=(GOAL_REWARD + MOVE_COST) / 100.0)


# ---- a trained run, its baseline and the planner ----------------------------------------------

CHECKPOINTS = ("best", "last")


def load_run(registry: Any, run: str, checkpoint: str = "best") -> tuple[str, dict[str, Any], Any, Any, dict[str, Any]]:
    """(run id, checkpoint artifact, model, text encoder, checkpoint meta) of a dt run:
    the best checkpoint of its lineage by model selection (`checkpoint="best"`; the
    newest one for runs trained without a selection split) or the newest (`"last"`)."""
    from lactchain.runs.resume import latest_checkpoint

    if checkpoint not in CHECKPOINTS:
        raise ValueError(f"unknown checkpoint {checkpoint!r}; use one of {', '.join(CHECKPOINTS)}")
    run_id = registry.resolve_run_id(run)
    art = latest_checkpoint(registry, run_id, BEST_KIND) if checkpoint == "best" else None
    art = art or latest_checkpoint(registry, run_id, CHECKPOINT_KIND)
    if art is None:
        raise FileNotFoundError(f"run {run_id} has no decision-transformer checkpoint yet")
    model, text, meta = load_checkpoint(art["path"])
    return run_id, art, model, text, meta


SPLIT_KEYS = ("archive", "describer", "seed", "val_fraction")  # the held-out split; select_fraction only
# moves trajectories between training and model selection


def _modes(model: Any) -> tuple[str, ...]:
    return ("text+bd", "bd", "text") if model.cfg.use_text else ("bd", "none")


def _evaluate_one(model: Any, text: Any, tasks: Sequence[Task], unseen: Sequence[bool], goal: bool,
                  best_return: float, goal_starts: int | None, seed: int) -> dict[str, Any]:
    out = evaluate_model(model, text, tasks, unseen, _modes(model))
    if goal:
        out["goal_success"] = goal_success(model, text, [m for m in _modes(model) if MODES[m][1]], best_return,
                                           goal_starts, seed)
    return out


def evaluate_run(registry: Any, run: str, *, baseline: str | None = None, limit: int | None = None,
                 goal: bool = True, goal_starts: int | None = None, checkpoint: str = "best") -> dict[str, Any]:
    """The DT of `run` (and the no-text `baseline` run, trained on the same split) on the
    held-out trajectories of its training split, plus the planner oracle."""
    run_id, art, model, text, meta = load_run(registry, run, checkpoint)
    cfg = model.cfg
    archive_id, rows = archive_rows(registry, meta["archive"])
    data = prepare(rows, describer=meta["describer"], max_visits=cfg.max_visits, bd_to_go=cfg.bd_to_go,
                   val_fraction=meta["val_fraction"], seed=meta["seed"],
                   select_fraction=float(meta.get("select_fraction", 0.0)))
    held = data.val[:limit] if limit else data.val
    train_texts = set(data.texts(data.train))
    tasks = [Task.of(data.episodes[i]) for i in held]
    unseen = [t.text not in train_texts for t in tasks]
    train_keys = {data.episodes[i].key for i in data.train}
    best = max_return([data.episodes[i] for i in data.train])
    result: dict[str, Any] = {
        "run_id": run_id, "checkpoint": art["path"], "checkpoint_kind": art["kind"], "step": meta.get("step"),
        "select_score": meta.get("select_score"), "archive": archive_id,
        "describer": meta["describer"], "text_encoder": cfg.text_encoder, "tokenizer": meta.get("tokenizer"),
        "heldout": len(tasks), "unseen_instructions": sum(unseen),
        "heldout_bds_seen_in_training": sum(t_key in train_keys for t_key in (data.episodes[i].key for i in held)),
        "max_steps": cfg.max_steps,
        "goal_starts": len(goal_tasks(SceneCodec(cfg.scene).scene, starts=goal_starts, seed=meta["seed"])) if goal else 0,
        "dt": _evaluate_one(model, text, tasks, unseen, goal, best, goal_starts, meta["seed"]),
    }
    if baseline:
        base_id, base_art, base_model, base_text, base_meta = load_run(registry, baseline, checkpoint)
        differ = [k for k in SPLIT_KEYS if base_meta.get(k) != meta.get(k)]
        if differ:
            raise ValueError(f"baseline {base_id} was trained on another split than {run_id} "
                             f"({', '.join(f'{k}: {base_meta.get(k)} vs {meta.get(k)}' for k in differ)}); "
                             "train it with the same --archive, --describer, --seed and --val-fraction")
        result["baseline"] = {"run_id": base_id, "checkpoint": base_art["path"], "checkpoint_kind": base_art["kind"],
                              "step": base_meta.get("step"),
                              "text_encoder": base_model.cfg.text_encoder,
                              **_evaluate_one(base_model, base_text, tasks, unseen, goal, best, goal_starts,
                                              meta["seed"])}
    result["planner"] = evaluate_planner(SceneCodec(cfg.scene).scene, tasks, unseen, goal_starts if goal else None,
                                         meta["seed"])
    result["summary"] = summary(result)
    return result


def summary(result: dict[str, Any]) -> dict[str, float | None]:
    """The headline numbers: the DT's, the baseline's and the planner oracle's."""
    dt, base, planner = result["dt"], result.get("baseline"), result["planner"]
    out: dict[str, float | None] = {}
    if "text+bd" in dt:
        out["bd_reached_heldout_bds"] = dt["text+bd"]["bd_reached"]
    out["bd_reached_bd_only"] = dt["bd"]["bd_reached"]
    if "text" in dt:
        out["order_match_heldout_instructions"] = dt["text"]["order_match"]
        out["order_match_unseen_instructions"] = dt["text"]["order_match_unseen"]
    if "goal_success" in dt:
        out["goal_success"] = dt["goal_success"].get("text+bd", dt["goal_success"].get("bd"))
    if base is not None:
        out["baseline_bd_reached"] = base["bd"]["bd_reached"]
        text_mode = "text" if "text" in base else "none"
        out["baseline_order_match_instructions"] = base[text_mode]["order_match"]
        if "goal_success" in base:
            out["baseline_goal_success"] = base["goal_success"].get("text+bd", base["goal_success"].get("bd"))
    out["planner_bd_reached"] = planner["bd_reached"]
    out["planner_order_match"] = planner["order_match"]
    out["planner_goal_success"] = planner["goal_success"]
    return out


# ---- one instruction from one pose (the console's "act an instruction") ------------------------

def act_instruction(model: Any, text: Any, start: Any, instruction: str, *, use_bd: bool = False,
                    rtg: float = 0.0, max_steps: int | None = None) -> dict[str, Any]:
    """The model acts `instruction` greedily from `start` (text only unless `use_bd`: the BD
    slot is then the goal with no landmark). Returns the rollout (path, moves, stopped)
    plus the path's annotations, BD, the instruction's landmark order (`mentioned`), the
    path's (`reference`), `order_match` and `goal` (the episode ended at the goal)."""
    scene = SceneCodec(model.cfg.scene).scene
    task = Task(dict(start) if not isinstance(start, State) else
                {"x": start.x, "y": start.y, "orientation": start.orientation},
                instruction, tuple(scene.goal), (), rtg)
    run = rollout(model, text, [task], use_text=True, use_bd=use_bd, max_steps=max_steps)[0]

    path = run["path"]
    bd = behaviour_descriptor(scene, path)
    mentioned = mentioned_order(instruction, scene.names)
    reference = reference_order({"bd": bd.as_dict()}, scene)
    return {**run, "annotations": annotate(scene, path), "bd": bd.as_dict(), "mentioned": mentioned,
            "reference": reference, "order_match": mentioned == reference,
            "goal": (path[-1].x, path[-1].y) == tuple(scene.goal), "scene": scene}
