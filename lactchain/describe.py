"""Descriptions of archived trajectories (issue 12, seed 003) and the measure they are
held to: landmark-order accuracy.

The landmark order of a trajectory is what a description must get right: the landmarks
its BD visited, in order, then the landmark it stops nearest to when that is not the
last one visited (`reference_order`). A description's order is the landmark names it
mentions, in the order they appear, consecutive repeats collapsed (`mentioned_order`).
A description is accurate when the two are equal.

The rule describer (`describe_rule`) writes that order in fixed words, from the BD and
the scene, for every trajectory: the reference an LLM describer is compared with, and
the instruction text a language-conditioned policy (issue 13) can learn from.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

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
