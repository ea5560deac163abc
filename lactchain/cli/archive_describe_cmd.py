"""`lactchain archive annotate|describe`: an archive's coarse annotations and its
language, rewritten in place (issue 12).

Both commands read an archive run's `archive.jsonl`, check every row they will touch
before changing anything (a row whose scene no longer parses is refused in one line),
and write the file once, atomically, at the end: an error, a crash or Ctrl-C while an
LLM is generating leaves the old file as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from lactchain.cli.archive_cmd import archive_artifact, load_archive
from lactchain.cli.common import (
    DbOption,
    JsonOption,
    check_models,
    console,
    err_console,
    fail,
    open_registry,
    print_json,
    shown,
)

from lactchain.jobs.output import LineLog

RunArgument = Annotated[str, typer.Argument(metavar="RUN",
    help="An archive run id (or unique prefix), from `lactchain archive fill`.")]


def _open(db: Optional[Path], run: str) -> tuple[str, Path, list[dict[str, Any]]]:
    """(run id, archive file, rows) of an archive run, or a one-line error."""
    with open_registry(db) as registry:
        run_id, rows = load_archive(registry, run)
        return run_id, archive_artifact(registry, registry.get_run(run_id)), rows


def _checked(path: Path, rows: list[dict[str, Any]]) -> list[Any]:
    """Every row's scene, or a one-line error naming the first bad row (nothing written)."""
    from lactchain.archive.dataset import check_values
    from lactchain.archive.describe import check_row

    scenes = []
    for i, row in enumerate(rows):
        try:
            check_values(row)  # a start that is no pose, rewards that are no numbers: as an import refuses them
            scenes.append(check_row(row))
        except (ValueError, KeyError, TypeError) as exc:
            fail(f"{path.name} row {i} ({row.get('key', '?')}): {exc}; nothing was written")
    return scenes


def annotate_cmd(run: RunArgument, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Recompute every trajectory's coarse annotations (its relation to the nearest
    landmark, wherever that changes) from the scene stored with it, and write them back.

    Annotations are derived data: after a change to how they are computed, or a
    hand-edited file, this brings the archive back in line with its scenes and paths.
    Reports how many rows changed; an unchanged archive is not rewritten.
    """
    from lactchain.archive.store import write_rows
    from lactchain.archive.trajectories import annotate

    run_id, path, rows = _open(db, run)
    scenes = _checked(path, rows)
    changed = 0
    for row, scene in zip(rows, scenes):
        fresh = annotate(scene, row["path"])
        if fresh != row.get("annotations"):
            row["annotations"] = fresh
            changed += 1
    if changed:
        write_rows(path, rows)
    result = {"run_id": run_id, "trajectories": len(rows), "changed": changed, "archive": str(path)}
    if as_json:
        print_json(result)
    else:
        console.print(f"{changed}/{len(rows)} trajectories had stale annotations"
                      + (f"; rewrote {path}" if changed else "; nothing to write"))


def describe_cmd(
    run: RunArgument,
    model: Annotated[str, typer.Option(
        "--model", "-m",
        help="Who describes: `rule` (the rule describer: fixed words from the BD and the scene, the reference) or an "
             "actor preset (tiny, smollm2-135m, ...), local folder or cached hub id, prompted with the scene, the "
             "annotations and the start and final cells.")] = "rule",
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, max=1024,
                                            help="LLM describer: prompts per generate call.")] = 8,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, max=1024,
                                                help="LLM describer: tokens per description at most (greedy).")] = 64,
    limit: Annotated[Optional[int], typer.Option(
        "--limit", "-n", min=1,
        help="Describe only the first N trajectories (a slow LLM); the others keep the descriptions they have.")
    ] = None,
    report: Annotated[bool, typer.Option(
        "--report",
        help="Describe nothing: only print the accuracy of every describer stored on the archive.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Describe each trajectory in one sentence and score it: a description is
    order-correct when the landmarks it names, in order, are those the trajectory
    visited, then the one it stops nearest to.

    Each row keeps one description per (describer, model) with its prompt version;
    describing again replaces that one and leaves the others. Prints this run's
    landmark-order accuracy and a table of every describer stored on the archive.
    """
    from lactchain.archive import describe as d

    llm = model != d.RULE_DESCRIBER
    if llm and not report:
        check_models(model)  # an unknown or missing preset fails here, before anything loads
    run_id, path, rows = _open(db, run)
    result: dict[str, Any] = {"run_id": run_id, "trajectories": len(rows), "archive": str(path)}
    if not report:
        todo = rows[:limit] if limit is not None else rows
        scenes = _checked(path, todo)
        if llm:
            texts, version = _llm_texts(model, todo, batch_size, max_new_tokens), d.LLM_PROMPT_VERSION
        else:
            texts, version = [d.describe_rule(r, s) for r, s in zip(todo, scenes)], d.RULE_PROMPT_VERSION
        describer = d.LLM_DESCRIBER if llm else d.RULE_DESCRIBER
        entries = [d.description(r, describer, model, version, t, s) for r, t, s in zip(todo, texts, scenes)]
        for row, entry in zip(todo, entries):
            d.store_description(row, entry)
        from lactchain.archive.store import write_rows

        write_rows(path, rows)
        correct = sum(e["order_correct"] for e in entries)
        result.update(describer=describer, model=model, prompt_version=version, described=len(entries),
                      order_correct=correct, accuracy=correct / len(entries) if entries else 0.0)
    result["describers"] = d.accuracy_table(rows)
    if as_json:
        print_json(result)
    else:
        _render(result)


def _llm_texts(model: str, rows: list[dict[str, Any]], batch_size: int, max_new_tokens: int) -> list[str]:
    """The LLM's descriptions, with a progress line; Ctrl-C ends in one line, file untouched."""
    from lactchain.archive.describe import describe_llm
    from lactchain.models.actor import Actor

    line = LineLog()
    try:
        with err_console.status(f"loading {model}", spinner="dots") as status:
            actor = Actor.load(model, progress=lambda step, _f=None: status.update(step))
            line(f"describe: {len(rows)} trajectories with {model}, {batch_size} per batch", force=True)

            def on_batch(done: int, total: int) -> None:
                status.update(f"describing with {model}: {done}/{total}")
                line(f"described {done}/{total}", force=done == total)

            status.update(f"describing with {model}: 0/{len(rows)}")
            return describe_llm(actor, rows, batch_size=batch_size, max_new_tokens=max_new_tokens, on_batch=on_batch)
    except KeyboardInterrupt:
        fail("interrupted: the archive file is unchanged", code=130)
        raise


def _render(result: dict[str, Any]) -> None:
    if "described" in result:
        who = result["describer"] if result["model"] == result["describer"] else f"{result['describer']} {result['model']}"
        console.print(f"described {result['described']}/{result['trajectories']} trajectories with {who} "
                      f"({result['prompt_version']}): landmark-order accuracy {result['accuracy']:.3f}")
    table = Table(title=f"describers stored on archive {result['run_id']}")
    for column in ("describer", "model", "prompt", "described", "accuracy"):
        table.add_column(column, justify="right" if column in ("described", "accuracy") else "left")
    for e in result["describers"]:
        table.add_row(shown(e["describer"]), shown(e["model"]), shown(e["prompt_version"]), str(e["described"]),
                      f"{e['accuracy']:.3f}")
    if not result["describers"]:
        console.print(f"no descriptions stored on archive {result['run_id']} yet; run `lactchain archive describe "
                      f"{result['run_id']}`")
        return
    console.print(table)
