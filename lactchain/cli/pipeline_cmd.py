"""How `lactchain pipeline` and `lactchain bench learn` print their results (the jobs
themselves: lactchain.jobs.loop)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from lactchain.cli.common import console


def render_pipeline(result: dict[str, Any]) -> None:
    if "compare_md" in result:
        render_compare(result)
        return
    table = Table(title=f"pipeline {result['run_id']}")
    for col in ("iteration", "phase", "run", "seconds", "key metrics"):
        table.add_column(col)
    keys = ("success_rate", "mean_optimal_ratio", "top_answer_share", "spearman_vstar", "pairs", "ranking_accuracy",
            "elites_optimal", "train_loss")
    for p in result["phases"]:
        shown = "  ".join(f"{k}={p[k]:.3g}" for k in keys if isinstance(p.get(k), (int, float)))
        table.add_row(str(p["iteration"]), p["phase"], p["run_id"], f"{p['seconds']:.0f}", shown)
    console.print(table)
    render_summary(result)


def render_summary(result: dict[str, Any]) -> None:
    before, after = result.get("before"), result.get("after")
    if before and after:
        shown = [f"{label} {before[key]:.3f} -> {after[key]:.3f}"
                 for key, label in (("success_rate", "success rate"), ("mean_optimal_ratio", "optimal ratio"),
                                    ("optimal_move_rate", "optimal first move"), ("mean_return", "mean return"),
                                    ("greedy_expected_return", "exact expected return"))
                 if isinstance(before.get(key), (int, float)) and isinstance(after.get(key), (int, float))]
        console.print("; ".join(shown))
    if result.get("transfer"):
        t = result["transfer"]
        console.print(f"transfer to {t['grid']}: success {t['success_rate']:.3f}, optimal ratio "
                      f"{t['mean_optimal_ratio']:.3f} over {t['states']} start states")
    if result.get("curve_png"):
        console.print(f"learning curve: {result['curve_png']}")
    if result.get("adapter") and result.get("run_id"):
        console.print(f"trained adapter: {result['adapter']} (lactchain evaluate --adapter {result['run_id']})")


def render_compare(result: dict[str, Any]) -> None:
    """`bench learn --compare`: one row per (loss, explore), mean [min-max] over seeds."""
    from pathlib import Path

    from rich.markdown import Markdown

    console.print(Markdown(Path(result["compare_md"]).read_text()))
    console.print(f"cells: {len(result['cells'])} (child runs of {result['run_id']}); "
                  f"figure: {result['compare_png']}; JSON: {result['compare_json']}")
