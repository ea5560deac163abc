"""A trajectory's landmark annotations as text: the one in force at a step highlighted.

Shared by the Archive screen and the decision-transformer instruction screen (pure
functions over rich `Text`, easy to pin in tests).
"""

from __future__ import annotations

from rich.text import Text


def current_annotation(annotations: list[dict], t: int) -> int | None:
    """Index of the annotation in force at step t: the last one with its t <= t."""
    found = None
    for i, a in enumerate(annotations):
        try:
            if int(a.get("t", 0)) <= t:
                found = i
        except (TypeError, ValueError):
            continue
    return found


def append_annotations(out: Text, annotations: list[dict], t: int) -> int | None:
    """The annotations under a bold heading, the one in force at step t highlighted, those
    before it plain and those to come dim; returns the highlighted index."""
    current = current_annotation(annotations, t)
    out.append("\nannotations" if out.plain else "annotations", style="bold underline")
    for i, a in enumerate(annotations):
        text = a.get("text") or f"{a.get('relation', '')} the {a.get('landmark', '')}"
        line = f"t={a.get('t')} {text}"
        if i == current:
            out.append(f"\n▸ {line}", style="bold reverse")
        else:
            out.append(f"\n  {line}", style="" if current is not None and i < current else "dim")
    if not annotations:
        out.append("\n(none: a scene without landmarks)", style="dim")
    return current
