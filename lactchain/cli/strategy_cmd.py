"""`lactchain strategy ...`: search the strategy prompt (lactchain.jobs.strategy) and list
the saved versions ranked by the score a search gave them."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.table import Table

from lactchain.cli.common import DbOption, JsonOption, console, fail, open_registry, print_json, shown

app = typer.Typer(help="The strategy prompt: search it, list its versions.", no_args_is_help=True)


def render_search(result: dict[str, Any]) -> None:
    table = Table(title=f"strategy search {result['run_id']}", show_header=False)
    table.add_row("best", f"version {result['best_version']} ({result['best_proposer']})")
    table.add_row("training states", f"{result['train_start']:.3f} -> {result['train_best']:.3f} "
                                     f"({result['train_states']} states)")
    table.add_row("held-out states", f"{result['heldout_start']:.3f} -> {result['heldout_best']:.3f} "
                                     f"({result['heldout_states']} states, never seen by the search)")
    table.add_row("rounds / candidates / episodes",
                  f"{result['rounds']} / {result['candidates']} / {result['evaluations']}")
    console.print(table)
    console.print(f"[bold]best strategy[/]: {shown(result['best_text'])}")


def versions_cmd(
    db: DbOption = None,
    source: Optional[str] = typer.Option(None, "--from", metavar="RUN", help="Only the versions this strategy search "
                                         "saved (a benchmark: its cells' too). A score is a search's own: its world "
                                         "and training states."),
    limit: int = typer.Option(20, "--limit", min=1, max=10_000, help="Versions to show."),
    as_json: JsonOption = False,
) -> None:
    """Saved strategy versions: hand-saved ones newest first, then a search's scored versions best first
    (each with the world its search scored it on, or the env it was written for)."""
    from lactchain.envs.world import world_label
    from lactchain.runs.registry import RunNotFound
    from lactchain.strategy.strategies import ranked_versions, search_worlds

    with open_registry(db) as registry:
        rows = registry.prompts()
        if source is not None:
            try:
                run = registry.get_run(source)
            except RunNotFound as exc:
                fail(f"--from {source}: {exc.args[0]}")
            searches = {run["id"], *(child["id"] for child in registry.descendants([run["id"]]))}
            rows = [r for r in rows if r.get("run_id") in searches]
            if not rows:
                fail(f"--from {source}: run {run['id']} ({run['kind']}) saved no strategy version")
        rows = ranked_versions(rows)[:limit]
        scored_on = search_worlds(registry, rows)
        searched = {run_id: world_label(world) for run_id, world in scored_on.items()}
        worlds = {r["version"]: searched.get(r.get("run_id") or "") or r.get("env") for r in rows}
    if as_json:  # world: the table's `on` words; scored_on (the search's world) and env (written for) apart
        print_json([{**{k: r.get(k) for k in ("version", "score", "run_id", "note", "text", "env")},
                     "world": worlds[r["version"]], "scored_on": scored_on.get(r.get("run_id") or "")}
                    for r in rows])
        return
    table = Table(title="strategy versions (--strategy VERSION)")
    for column in ("ver", "score", "on", "from", "note", "text"):
        table.add_column(column)
    for r in rows:
        table.add_row(str(r["version"]), "" if r.get("score") is None else f"{r['score']:.3f}",
                      shown(worlds[r["version"]] or ""), shown(r.get("run_id") or ""),
                      shown(r.get("note") or ""), shown(" ".join((r.get("text") or "").split())[:60]))
    console.print(table)


def _register() -> None:
    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import JOBS

    app.command("search")(make_command(JOBS["strategy search"], render=render_search))
    app.command("versions")(versions_cmd)
