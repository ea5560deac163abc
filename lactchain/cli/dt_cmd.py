"""`lactchain dt train|eval`: the language-conditioned decision transformer (issue 13).

`dt train` is a registry job of kind `dt` like every trainer: foreground or
`--detach`, metrics per step (`loss` is what the console's job view plots),
checkpoints (artifact kind `dt`), SIGTERM -> KILLED with a last checkpoint, and
`lactchain runs resume RUN` continues from the newest checkpoint of the lineage.
`dt eval` (kind `dt-eval`) rolls the model out closed-loop on the held-out
trajectories of its training split; with `--baseline`, a no-text model trained on
the same split; the planner (an oracle that knows the target BD) is always there.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from lactchain.cli.common import (DbOption, DetachOption, JsonOption, LineLog, RunIdOption, console, fail, finite,
                                  open_registry, positive, run_job, run_of_kind)

app = typer.Typer(help="A language-conditioned decision transformer trained on the trajectory archive.",
                  no_args_is_help=True)


def _check_archive(registry: Any, archive: str, describer: str) -> str:
    from lactchain.cli.archive_cmd import load_archive

    archive_id, rows = load_archive(registry, archive)
    if describer != "rule":
        from lactchain.dt.data import instruction

        described = sum(instruction(r, describer) is not None for r in rows)
        if described < 2:
            fail(f"--describer {describer}: {described} trajectory(ies) of archive {archive_id} have a description "
                 "by it; describe the archive first, or use --describer rule")
    return archive_id


def _check_text_encoder(spec: str) -> None:
    if spec in ("learned", "none"):
        return
    from lactchain.models.presets import CRITIC, check_spec

    try:
        check_spec(spec, CRITIC)
    except ValueError as exc:
        fail(f"--text-encoder {spec}: {exc}; use learned, or a sentence encoder (minilm-l6)")


def _render_train(result: dict[str, Any]) -> None:
    table = Table(title=f"dt train {result['run_id']}", show_header=False)
    for key in ("archive", "text_encoder", "trajectories", "train_trajectories", "val_trajectories", "select_trajectories",
                "parameters",
                "start_step", "steps", "train_seconds"):
        value = result[key]
        table.add_row(key, f"{value:.1f}" if isinstance(value, float) else str(value))
    for key, value in (result.get("tokenizer") or {}).items():
        table.add_row(f"tokenizer/{key}", str(value))
    for key, value in result["metrics"].items():
        table.add_row(key, f"{value:.4f}")
    best = result.get("best")
    if best:
        table.add_row("best (selection)", f"step {best['step']}: score {best['select_score']:.3f}")
    table.add_row("checkpoint", str(result["checkpoint"]))
    console.print(table)


@app.command("train")
def train_cmd(
    ctx: typer.Context,
    archive: Annotated[str, typer.Option("--archive", "-a", help="The archive run to learn from (lactchain archive fill).")],
    describer: Annotated[str, typer.Option("--describer", help="Whose descriptions are the instructions: rule (computed "
                                           "from the BD), or a describer / model whose descriptions the archive "
                                           "stores (trajectories without one are left out).")] = "rule",
    text_encoder: Annotated[str, typer.Option("--text-encoder", help="learned (a word-level tokenizer learned on the "
                                              "descriptions), a frozen sentence encoder (minilm-l6), or none.")] = "learned",
    no_text: Annotated[bool, typer.Option("--no-text", help="The behaviour-cloning baseline: no instruction "
                                          "(= --text-encoder none).")] = False,
    n_layer: Annotated[int, typer.Option("--n-layer", min=1, max=48)] = 2,
    n_head: Annotated[int, typer.Option("--n-head", min=1, max=64)] = 4,
    n_embd: Annotated[int, typer.Option("--n-embd", min=8, max=4096, help="Width; a multiple of --n-head.")] = 128,
    dropout: Annotated[float, typer.Option("--dropout", callback=finite, min=0.0, max=0.9)] = 0.1,
    steps: Annotated[int, typer.Option("--steps", min=1, max=10_000_000, help="Optimizer steps in all (a resumed run "
                                       "counts the steps before it).")] = 3000,
    minutes: Annotated[Optional[float], typer.Option("--minutes", callback=positive, help="Training-time budget in "
                                                     "minutes over the whole lineage; stops at --steps or this, "
                                                     "whichever comes first (the lr schedule follows both).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", min=1, max=65536)] = 32,
    lr: Annotated[float, typer.Option("--lr", callback=positive, help="AdamW peak learning rate.")] = 1e-3,
    val_fraction: Annotated[float, typer.Option("--val-fraction", callback=finite, min=0.0, max=0.9,
                                                help="Trajectories held out for `dt eval` (by trajectory, "
                                                     "seeded); never trained on, never used to pick a "
                                                     "checkpoint.")] = 0.1,
    select_fraction: Annotated[float, typer.Option("--select-fraction", callback=finite, min=0.0, max=0.9,
                                                   help="Training trajectories set aside to pick the best "
                                                        "checkpoint (early stopping by closed-loop score); 0: the "
                                                        "last checkpoint is the one evaluated.")] = 0.1,
    select_every: Annotated[int, typer.Option("--select-every", min=1, help="Score the model closed-loop on the "
                                              "selection trajectories every N steps (and at the end).")] = 250,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Split, init and batches.")] = 0,
    text_dropout: Annotated[float, typer.Option("--text-dropout", callback=finite, min=0.0, max=0.9,
                                                help="Probability of hiding a row's instruction in training.")] = 0.2,
    bd_dropout: Annotated[float, typer.Option("--bd-dropout", callback=finite, min=0.0, max=0.9,
                                              help="Probability of hiding a row's BD in training (independently), "
                                                   "so the model also learns to act from the instruction alone.")] = 0.7,
    relabel: Annotated[float, typer.Option("--relabel", callback=finite, min=0.0, max=1.0,
                                           help="Probability that a training row is a random window of its "
                                                "trajectory, relabelled with its own BD and description "
                                                "(hindsight; never a held-out BD or instruction).")] = 0.5,
    max_visits: Annotated[int, typer.Option("--max-visits", min=1, max=32, help="BD landmark slots.")] = 6,
    rtg: Annotated[bool, typer.Option("--rtg", help="Add a return-to-go token per step.")] = False,
    bd_to_go: Annotated[bool, typer.Option("--bd-to-go/--bd-static", help="Condition on the landmarks still to "
                                           "visit (default) or on the whole target BD at every step.")] = True,
    tie_actions: Annotated[bool, typer.Option("--tie-actions", help="Tie the action embedding to the action head.")] = False,
    absolute_cells: Annotated[bool, typer.Option("--cells/--no-cells", help="Embed absolute cell ids (the pose's, "
                                                 "the BD's final cell) besides the egocentric offsets.")] = True,
    eval_every: Annotated[int, typer.Option("--eval-every", min=1, help="Log loss + validation every N steps.")] = 100,
    checkpoint_every: Annotated[int, typer.Option("--checkpoint-every", min=1)] = 500,
    threads: Annotated[Optional[int], typer.Option("--threads", min=1, max=256, help="torch CPU threads.")] = None,
    resume_from: Annotated[Optional[str], typer.Option("--resume-from", help="Continue the newest checkpoint of this "
                                                       "dt run (what `lactchain runs resume` passes).")] = None,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Train a decision transformer (a small GPT) on an archive: the instruction's tokens,
    then [BD, observation, action] per move, a STOP action at the end; cross-entropy
    over the moves. Split by trajectory; resumable."""
    if no_text:
        text_encoder = "none"
    if n_embd % n_head:
        fail(f"--n-embd {n_embd} is not a multiple of --n-head {n_head}")
    _check_text_encoder(text_encoder)
    with open_registry(db) as registry:
        archive_id = _check_archive(registry, archive, describer)
        if resume_from:
            resume_from = run_of_kind(registry, "--resume-from", resume_from, ("dt",), "a dt run")["id"]
    # Keys = keyword arguments of lactchain.dt.train.train_dt.
    params = dict(archive=archive_id, describer=describer, text_encoder=text_encoder, n_layer=n_layer, n_head=n_head,
                  n_embd=n_embd, dropout=dropout, steps=steps, minutes=minutes, batch_size=batch_size, lr=lr,
                  val_fraction=val_fraction, select_fraction=select_fraction, select_every=select_every,
                  seed=seed, text_dropout=text_dropout, bd_dropout=bd_dropout,
                  relabel=relabel,
                  max_visits=max_visits, rtg=rtg, bd_to_go=bd_to_go, tie_actions=tie_actions,
                  absolute_cells=absolute_cells, eval_every=eval_every,
                  checkpoint_every=checkpoint_every, threads=threads, resume_from=resume_from)

    def body(handle) -> dict[str, Any]:
        from lactchain.dt.train import DTTrainConfig, train_dt

        line = LineLog(every_s=0.0)
        line(f"dt train: archive {archive_id}, text {text_encoder}, {steps} steps"
             + (f" or {minutes:g} min" if minutes else ""), force=True)

        def on_log(step: int, m: dict[str, float]) -> None:
            line(f"step {step}/{steps}: loss {m['loss']:.4f}"
                 + (f"  val {m['val_loss']:.4f}  acc {m['val_accuracy']:.3f}" if "val_loss" in m else "")
                 + f"  {m['steps_per_s']:.1f} steps/s")

        return train_dt(handle, DTTrainConfig.from_params(params), on_log=on_log)

    run_job(ctx, kind="dt", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"dt {text_encoder} on {archive_id}", render=_render_train)


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _render_eval(result: dict[str, Any]) -> None:
    table = Table(title=f"dt eval {result['dt_run']} on {result['heldout']} held-out trajectories "
                        f"({result['unseen_instructions']} with unseen instructions)")
    for col in ("model", "mode", "bd_reached", "order_match", "order_match_unseen", "stopped", "mean_moves"):
        table.add_column(col)
    for name, block in (("dt", result["dt"]), ("baseline (no text)", result.get("baseline") or {})):
        for mode, r in block.items():
            if isinstance(r, dict) and "n" in r:
                table.add_row(name, mode, *(_fmt(r.get(k)) for k in ("bd_reached", "order_match",
                                                                     "order_match_unseen", "stopped", "mean_moves")))
    p = result["planner"]
    table.add_row("planner (oracle)", "bd", *(_fmt(p.get(k)) for k in ("bd_reached", "order_match",
                                                                    "order_match_unseen")), "-", _fmt(p["mean_moves"]))
    console.print(table)
    summary = Table(title="summary", show_header=False)
    for key, value in result["summary"].items():
        summary.add_row(key, _fmt(value))
    console.print(summary)


@app.command("eval")
def eval_cmd(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="A dt run (its best checkpoint by model selection; see --checkpoint).")],
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="A no-text dt run trained on the same split "
                                                    "(dt train --no-text, same --archive/--seed/--val-fraction).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Evaluate the first N held-out trajectories.")] = None,
    goal: Annotated[bool, typer.Option("--goal/--no-goal", help="Also measure success on the grid's goal from every "
                                       "start pose.")] = True,
    goal_starts: Annotated[Optional[int], typer.Option("--goal-starts", min=1, help="Goal success from a seeded "
                                                       "sample of N start poses (default: every non-goal pose).")] = None,
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="best: the checkpoint with the best closed-loop "
                                            "score on the selection split (the newest for runs without one); "
                                            "last: the newest.")] = "best",
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Roll the decision transformer out on held-out instructions and BDs: BD-reached rate,
    landmark-order match, goal success; against the no-text baseline and the planner
    (an oracle)."""
    from lactchain.dt.evaluate import CHECKPOINTS

    if checkpoint not in CHECKPOINTS:
        fail(f"--checkpoint {checkpoint!r}: use {' or '.join(CHECKPOINTS)}")
    with open_registry(db) as registry:
        dt_run = run_of_kind(registry, "RUN", run, ("dt",), "a dt run (lactchain dt train)")["id"]
        base = run_of_kind(registry, "--baseline", baseline, ("dt",), "a dt run")["id"] if baseline else None
        from lactchain.resume import latest_checkpoint

        for option, rid in (("RUN", dt_run), ("--baseline", base)):
            if rid and latest_checkpoint(registry, rid, "dt") is None:
                fail(f"{option} {rid}: the run has no checkpoint yet; wait for its first one (--checkpoint-every)")
    params = dict(dt_run=dt_run, baseline=base, limit=limit, goal=goal, goal_starts=goal_starts, checkpoint=checkpoint)

    def body(handle) -> dict[str, Any]:
        from lactchain.dt.evaluate import evaluate_run

        result = evaluate_run(handle.registry, dt_run, baseline=base, limit=limit, goal=goal, goal_starts=goal_starts,
                              checkpoint=checkpoint)
        result["dt_run"] = result.pop("run_id")
        handle.log_metrics({k: float(v) for k, v in result["summary"].items() if v is not None})
        return result

    run_job(ctx, kind="dt-eval", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"dt eval {dt_run}", render=_render_eval)
