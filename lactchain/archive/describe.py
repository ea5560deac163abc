"""Descriptions of archived trajectories (issue 12, seed 003) and the measure they are
held to: landmark-order accuracy. Grid-only by nature (the landmarks of the grid's scenes).

The landmark order of a trajectory is what a description must get right: the landmarks
its BD visited, in order, then the landmark it stops nearest to when that is not the
last one visited (`reference_order`). A description's order is the landmark names it
mentions, in the order they appear, consecutive repeats collapsed (`mentioned_order`).
A description is accurate when the two are equal.

The rule describer (`describe_rule`) writes that order in fixed words, from the BD and
the scene, for every trajectory: the reference an LLM describer is compared with, and
the instruction text a language-conditioned policy (issue 13) can learn from. The LLM
describer (`describe_llm`) asks an actor preset for the same sentence from the facts
alone (`llm_prompt`: the scene, the annotations, start and final cell), so its accuracy
measures how well a model reads a trajectory. Each row keeps one description per
(describer, model), with the prompt version it was made with (`store_description`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from lactchain.envs.scenes import Scene, get_scene

RULE_DESCRIBER = "rule"
RULE_PROMPT_VERSION = "rule-v1"


def _scene_of(row: Mapping[str, Any]) -> Scene:
    return get_scene((row.get("env_kwargs") or {}).get("scene"))


def _final(row: Mapping[str, Any]) -> tuple[int, int]:
    x, y = row["bd"]["final"]
    return int(x), int(y)


def reference_order(row: Mapping[str, Any], scene: Scene | None = None) -> list[str]:
    """The landmarks visited (the BD's order), then the one stopped nearest to if new."""
    scene = scene or _scene_of(row)
    order = list(row["bd"]["visited"])
    near = scene.nearest_landmark(_final(row))
    if near is not None and (not order or order[-1] != near[0]):
        order.append(near[0])
    return order


def mentioned_order(text: str, names: Sequence[str]) -> list[str]:
    """The landmark names `text` mentions, in order of appearance, consecutive repeats
    collapsed (whole words, any case; a longer name wins over one it contains)."""
    if not names:
        return []
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\b",
                         re.IGNORECASE)
    lower = {n.lower(): n for n in names}
    out: list[str] = []
    for match in pattern.finditer(text):
        name = lower[match.group(1).lower()]
        if not out or out[-1] != name:
            out.append(name)
    return out


def order_correct(row: Mapping[str, Any], text: str, scene: Scene | None = None) -> bool:
    scene = scene or _scene_of(row)
    return mentioned_order(text, scene.names) == reference_order(row, scene)


def describe_rule(row: Mapping[str, Any], scene: Scene | None = None) -> str:
    """One sentence naming the landmarks passed, in order, and where the walk stops:
    "Passes the sofa, then the bed, and stops north of the fridge." """
    scene = scene or _scene_of(row)
    visited = list(row["bd"]["visited"])
    final = _final(row)
    near = scene.nearest_landmark(final)
    if near is None:
        stop = f"stops at ({final[0]}, {final[1]})"
    else:
        name, relation = near
        stop = f"stops {'at' if relation == 'at' else relation} the {name}"
    if not visited:
        return f"Passes no landmark and {stop}."
    if near is not None and near[0] == visited[-1] and near[1] == "at":
        visited = visited[:-1]  # "stops at the bed" already names it
        if not visited:
            return f"Goes straight to the {near[0]} and {stop}."
    passes = "Passes the " + ", then the ".join(visited)
    return f"{passes}, and {stop}."


# ---- validation, stored descriptions and their accuracy ------------------------------

LLM_DESCRIBER = "llm"
# Bump when `llm_prompt` changes: stored descriptions keep the version they were made with,
# so accuracies from different prompts are never pooled.
LLM_PROMPT_VERSION = "llm-v1"


def check_row(row: Mapping[str, Any]) -> Scene:
    """The row's scene, after checking what annotating and describing read: the scene
    parses, every pose of the path is a cell inside it, and the BD names only its
    landmarks. A ValueError (one line) otherwise, so a command can refuse before writing."""
    if not isinstance(row.get("env_kwargs"), Mapping):
        raise ValueError("it has no env_kwargs (not an archive row)")
    scene = _scene_of(row)
    path = row.get("path")
    if not isinstance(path, list) or not path:
        raise ValueError("its path is missing or empty")
    for t, pose in enumerate(path):
        if not isinstance(pose, Mapping) or "x" not in pose or "y" not in pose:
            raise ValueError(f"pose {t} of its path is not a pose: {pose!r}")
        x, y = pose["x"], pose["y"]
        if not (isinstance(x, int) and isinstance(y, int) and 0 <= x < scene.size and 0 <= y < scene.size):
            raise ValueError(f"pose {t} ({x!r}, {y!r}) is outside the {scene.size}x{scene.size} scene {scene.name!r}")
    bd = row.get("bd")
    if not isinstance(bd, Mapping) or "final" not in bd or "visited" not in bd:
        raise ValueError("it has no behaviour descriptor (bd with final and visited)")
    for name in bd["visited"]:
        if name not in scene.names:
            raise ValueError(f"its BD visits unknown landmark {name!r}; scene {scene.name!r} has "
                             f"{', '.join(scene.names) or 'none'}")
    _final(row)
    return scene


def description(row: Mapping[str, Any], describer: str, model: str, prompt_version: str, text: str,
                scene: Scene | None = None) -> dict[str, Any]:
    """The stored form of one description, judged against the row's reference order."""
    return {"describer": describer, "model": model, "prompt_version": prompt_version, "text": text,
            "order_correct": order_correct(row, text, scene)}


def store_description(row: dict[str, Any], entry: Mapping[str, Any]) -> None:
    """Put `entry` in row["descriptions"], replacing the one by the same (describer, model):
    describing again refreshes a describer's text and leaves the other describers' alone."""
    key = (entry["describer"], entry["model"])
    kept = [d for d in row.get("descriptions") or [] if (d.get("describer"), d.get("model")) != key]
    row["descriptions"] = kept + [dict(entry)]


def accuracy_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Landmark-order accuracy of every describer stored on `rows`, one entry per
    (describer, model, prompt version), in order of first appearance; each description
    judged again against its trajectory."""
    table: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        for d in row.get("descriptions") or []:
            key = (str(d.get("describer")), str(d.get("model")), str(d.get("prompt_version")))
            entry = table.setdefault(key, {"describer": key[0], "model": key[1], "prompt_version": key[2],
                                           "described": 0, "order_correct": 0})
            entry["described"] += 1
            # recomputed from the text and the trajectory, never read from the stored flag
            # (an imported dataset could say anything)
            entry["order_correct"] += order_correct(row, str(d.get("text") or ""))
    for entry in table.values():
        entry["accuracy"] = entry["order_correct"] / entry["described"]
    return list(table.values())


# ---- the LLM describer ------------------------------------------------------------------

def _cells(cells: Sequence[Sequence[int]]) -> str:
    return ", ".join(f"({x}, {y})" for x, y in cells)


def llm_prompt(row: Mapping[str, Any], scene: Scene | None = None) -> str:
    """The user message an LLM describes one trajectory from: the scene (size, landmarks
    with their cells), the start, the coarse annotations and the final cell. It holds the
    facts a description needs and no rule-made sentence, so the model's wording is its own."""
    scene = scene or _scene_of(row)
    start = row["path"][0] if row.get("path") else row.get("start") or {}
    fx, fy = _final(row)
    lines = [f"A robot walks on a {scene.size}x{scene.size} grid of cells (x grows to the east, y to the north)."]
    if scene.landmarks:
        lines.append("Landmarks and the cells they cover:")
        lines += [f"- {m.name}: {_cells(m.cells)}" for m in scene.landmarks]
    else:
        lines.append("There are no landmarks.")
    facing = f" facing {start['orientation']}" if start.get("orientation") else ""
    lines.append(f"The robot starts at ({start.get('x')}, {start.get('y')}){facing}.")
    notes = row.get("annotations") or []
    if notes:
        lines.append("Where it is along the walk, relative to the nearest landmark (step: place):")
        lines += [f"- step {a['t']}: {a['text']}" for a in notes]
    lines.append(f"It stops at ({fx}, {fy}).")
    lines.append("In one sentence, describe the walk: name the landmarks it passes through, in the order it "
                 "reaches them, and where it stops.")
    return "\n".join(lines)


def describe_llm(actor: Any, rows: Sequence[Mapping[str, Any]], batch_size: int = 8, max_new_tokens: int = 64,
                 on_batch: Callable[[int, int], None] | None = None) -> list[str]:
    """Greedy descriptions of `rows` by an actor preset, one batched generate call per
    `batch_size` prompts; `on_batch(done, total)` after each (a progress line, a cancel check)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    prompts = [llm_prompt(r) for r in rows]
    texts: list[str] = []
    for start in range(0, len(prompts), batch_size):
        samples = actor.generate(prompts[start:start + batch_size], constrained=False, temperature=0.0,
                                 max_new_tokens=max_new_tokens)
        texts += [" ".join(s.text.split()) for s in samples]
        if on_batch is not None:
            on_batch(len(texts), len(prompts))
    return texts
