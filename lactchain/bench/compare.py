"""A same-budget method comparison of the loop (`bench learn --compare`): one cell per
(loss, explore, seed), each a pipeline child run with the same wall-clock (or
iteration) budget; this module turns the finished cells into the comparison's table
(markdown), its figure (success against wall time and against env moves, mean and
min-max band over seeds) and the numbers a reader looks for (final success, optimal
ratio, worst collapse share, env moves to reach 90 %)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

TARGET_SUCCESS = 0.9  # "env moves to reach 90 %"
KINDS = {int: "a whole number", str: "a name"}


def cell_key(loss: str, explore: int, seed: int) -> str:
    return f"{loss}-explore{explore}-seed{seed}"


def parse_list(text: str | Sequence[Any], what: str, cast: type, most: int) -> list[Any]:
    """'a,b,c' (or a list) -> distinct values; ValueError naming `what` when empty,
    repeated, too long or of the wrong type."""
    items = [x.strip() for x in text.split(",")] if isinstance(text, str) else list(text)
    items = [x for x in items if x != ""]
    if not items:
        raise ValueError(f"--{what} is empty; give a comma-separated list, e.g. --{what} 0,1,2")
    try:
        values = [cast(x) for x in items]
    except (TypeError, ValueError):
        kind = KINDS.get(cast, cast.__name__)
        raise ValueError(f"--{what} {','.join(map(str, items))}: every item must be {kind}") from None
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"--{what} names {', '.join(repeated)} more than once")
    if len(values) > most:
        raise ValueError(f"--{what} has {len(values)} items; at most {most} per comparison")
    return values


def reached(curve: Sequence[dict[str, Any]], key: str, target: float = TARGET_SUCCESS) -> Any:
    """`key` (wall_s, env_moves) at the first evaluation with success >= target, else None."""
    return next((row.get(key) for row in curve if (row.get("success_rate") or 0.0) >= target), None)


def spread(values: Sequence[Any]) -> dict[str, Any]:
    """Mean, min and max of the values given (None: not reached, left out)."""
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "min": None, "max": None, "n": 0}
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (loss, explore): each number over its seeds as mean, min and max."""
    by: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        by[(c["loss"], c["explore"])].append(c)
    rows = []
    for (loss, explore), group in by.items():
        trained = [row for c in group for row in c["curve"][1:]]
        finals = [c["curve"][-1] for c in group]
        rows.append({
            "loss": loss, "explore": explore, "seeds": [c["seed"] for c in group],
            "baseline_success": spread([c["curve"][0]["success_rate"] for c in group]),
            "final_success": spread([f["success_rate"] for f in finals]),
            "final_optimal_ratio": spread([f["mean_optimal_ratio"] for f in finals]),
            "max_top_answer_share": max((r.get("top_answer_share") or 0.0 for r in trained), default=None),
            "iterations": spread([len(c["curve"]) - 1 for c in group]),
            "wall_min_to_90": spread([_minutes(reached(c["curve"], "wall_s")) for c in group]),
            "env_moves_to_90": spread([reached(c["curve"], "env_moves") for c in group]),
            "seeds_reaching_90": sum(reached(c["curve"], "wall_s") is not None for c in group),
            "wall_min": spread([c["wall_min"] for c in group]),
        })
    return sorted(rows, key=lambda r: (-(r["final_success"]["mean"] or 0.0), r["loss"], r["explore"]))


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 60


def _fmt(s: dict[str, Any], digits: int = 2, pct: bool = False) -> str:
    if s["mean"] is None:
        return "-"
    f = (lambda v: f"{100 * v:.0f} %") if pct else (lambda v: f"{v:.{digits}f}")
    return f(s["mean"]) if s["min"] == s["max"] else f"{f(s['mean'])} [{f(s['min'])}-{f(s['max'])}]"


def markdown(rows: Sequence[dict[str, Any]], title: str) -> str:
    """The comparison as a markdown table: mean [min-max] over seeds."""
    head = ("| loss | explore | seeds | success before | success after | optimal ratio | max top share | "
            "seeds at 90 % | min to 90 % | env moves to 90 % | iterations |")
    lines = [f"### {title}", "", head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        moves, top = r["env_moves_to_90"], r["max_top_answer_share"]
        lines.append(
            f"| {r['loss']} | {r['explore']} | {','.join(map(str, r['seeds']))} | {_fmt(r['baseline_success'], pct=True)} "
            f"| {_fmt(r['final_success'], pct=True)} | {_fmt(r['final_optimal_ratio'])} "
            f"| {'-' if top is None else format(top, '.2f')} "
            f"| {r['seeds_reaching_90']}/{len(r['seeds'])} | {_fmt(r['wall_min_to_90'], 1)} "
            f"| {'not reached' if moves['mean'] is None else _fmt(moves, 0)} | {_fmt(r['iterations'], 1)} |")
    return "\n".join(lines) + "\n"


def machines_line(cells: Sequence[dict[str, Any]]) -> str:
    """'Ran on: CPU A (keys); CPU B (keys)': minutes compare only on like machines."""
    by: dict[str, list[str]] = defaultdict(list)
    for c in cells:
        m = c.get("machine") or {}
        what = m.get("gpu") or m.get("cpu") or "not recorded"
        if m.get("cpu") and not m.get("gpu"):
            what += (f" ({m['cpu_kind']})" if m.get("cpu_kind") else "") + f", {m.get('cores')} cores, " + ("bf16: " + "+".join(m["cpu_bf16"]) if m.get("cpu_bf16")
                                                      else "no native bf16")
        by[what].append(c["key"])
    return "Ran on: " + "; ".join(f"{what} ({', '.join(keys)})" for what, keys in by.items()) + "\n"


def plot(cells: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """compare.png: `figure(cells, title)` written to `path`."""
    from lactchain.bench.figures import save_figure

    return save_figure(figure(cells, title), path)


def figure(cells: Sequence[dict[str, Any]], title: str) -> Any:
    """Success against wall time and against env moves, one line per (loss, explore):
    the mean over seeds at each evaluated iteration, the band from min to max."""
    from lactchain.bench.figures import new_figure

    by: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        by[(c["loss"], c["explore"])].append(c)
    fig, axes = new_figure(1, 2, figsize=(12, 4.5), dpi=110, sharey=True)
    for (loss, explore), group in sorted(by.items()):
        n = min(len(c["curve"]) for c in group)  # iterations every seed reached
        label = f"{loss} (explore {explore})"
        for ax, key, scale in ((axes[0], "wall_s", 1 / 60), (axes[1], "env_moves", 1.0)):
            xs = [sum(c["curve"][i][key] or 0 for c in group) / len(group) * scale for i in range(n)]
            ys = [[c["curve"][i]["success_rate"] for c in group] for i in range(n)]
            line, = ax.plot(xs, [sum(y) / len(y) for y in ys], marker="o", label=label)
            ax.fill_between(xs, [min(y) for y in ys], [max(y) for y in ys], color=line.get_color(), alpha=0.15)
    axes[0].set_xlabel("wall time (min)")
    axes[1].set_xlabel("env moves of the training data")
    positive = [p["env_moves"] for c in cells for p in c["curve"] if (p["env_moves"] or 0) > 0]
    # A log axis only where the moves span a decade: inside one (every cell past the same
    # critic fit, e.g. 69k-86k) it would show no tick between its decade marks.
    if positive and max(positive) >= 10 * min(positive):
        axes[1].set_xscale("symlog")
    axes[0].set_ylabel("greedy success (all start states)")
    for ax in axes:
        ax.axhline(TARGET_SUCCESS, color="grey", lw=0.8, ls=":")
        ax.set_ylim(-0.02, 1.02)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    return fig
